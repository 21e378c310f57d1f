/*
 * linear.c — matrix products of activations with weight tensors.
 */
#include "linear.h"

#include "quant/quant.h"

size_t linear_scratch_bytes(const tensor *W, int64_t n_tok) {
    size_t row;
    EDDY_ASSERT(qtype_row_bytes(quant_dot_type((qtype)W->type), W->ne[0], &row));
    return row * (size_t)n_tok;
}

typedef struct {
    const tensor *W;
    const uint8_t *act; /* (n_tok, act_row) in the dot format */
    size_t act_row;
    int64_t n_tok;
    float *y;
} linear_job;

static void linear_task(void *p, int ith, int nth) {
    linear_job *j = p;
    const int64_t n_in = j->W->ne[0], n_out = j->W->ne[1];
    int64_t b, e;
    pool_split(n_out, ith, nth, &b, &e);
    for (int64_t o = b; o < e; o++) {
        const uint8_t *w = j->W->data + (size_t)o * j->W->row_bytes;
        for (int64_t t = 0; t < j->n_tok; t++)
            j->y[t * n_out + o] = vec_dot_ref((qtype)j->W->type, n_in, w, j->act + (size_t)t * j->act_row);
    }
}

void linear(threadpool *pool, const tensor *W, const float *x, int64_t n_tok, float *y, void *scratch) {
    const qtype dot = quant_dot_type((qtype)W->type);
    size_t act_row;
    EDDY_ASSERT(qtype_row_bytes(dot, W->ne[0], &act_row));
    const uint8_t *act = (const uint8_t *)x;
    if (dot != QTYPE_F32) {
        for (int64_t t = 0; t < n_tok; t++)
            quantize_row_ref(dot, x + t * W->ne[0], (uint8_t *)scratch + (size_t)t * act_row, W->ne[0]);
        act = scratch;
    }
    linear_job job = {W, act, act_row, n_tok, y};
    /* small products run on fewer threads: waking a thread costs more than ~16K MACs */
    int64_t macs = W->ne[0] * W->ne[1] * n_tok, nth = macs / 16384 + 1;
    pool_run(pool, linear_task, &job, nth < pool_size(pool) ? (int)nth : 0);
}
