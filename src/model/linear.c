/*
 * linear.c — matrix products of activations with weight tensors: a model-side view
 * of a tensor handed to the quantized matmul kernels (src/ops/matmul.h).
 */
#include "linear.h"

#include "ops/matmul.h"

static matmul_weight weight_of(const tensor *W) {
    matmul_weight w;
    /* the model loader checked type, row length and alignment of every bound tensor */
    EDDY_ASSERT(matmul_weight_init(&w, W->type, W->ne[0], W->ne[1] * W->ne[2] * W->ne[3], W->data));
    w.packed = W->packed;
    return w;
}

size_t linear_scratch_bytes(const tensor *W, int64_t n_tok) {
    matmul_weight w = weight_of(W);
    return matmul_scratch_bytes(&w, n_tok);
}

void linear(threadpool *pool, const tensor *W, const float *x, int64_t n_tok, float *y, void *scratch) {
    matmul_weight w = weight_of(W);
    matmul(pool, &w, x, w.n_in, n_tok, y, w.n_out, scratch, matmul_scratch_bytes(&w, n_tok));
}

void linear_many(threadpool *pool, const tensor *const *W, int n, const float *x, int64_t n_tok, float *const *y,
                 void *scratch) {
    matmul_weight w[MATMUL_MANY_MAX];
    const matmul_weight *wp[MATMUL_MANY_MAX];
    int64_t ys[MATMUL_MANY_MAX];
    size_t sb = 0;
    EDDY_ASSERT(n >= 1 && n <= MATMUL_MANY_MAX);
    for (int i = 0; i < n; i++) {
        w[i] = weight_of(W[i]);
        wp[i] = &w[i];
        ys[i] = w[i].n_out;
        const size_t b = matmul_scratch_bytes(&w[i], n_tok);
        if (b > sb) sb = b;
    }
    matmul_many(pool, wp, n, x, w[0].n_in, n_tok, y, ys, scratch, sb);
}
