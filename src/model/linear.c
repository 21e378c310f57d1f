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
