/*
 * ctx.h — a compute context: one model, one sequence's state, a thread pool and the
 * work buffers of a forward pass, all sized up front so evaluation allocates nothing.
 *
 * Owns: the internal form of eddy_ctx (include/eddy.h). The forward pass of each
 * architecture (forward_<arch>.c) reads its buffers from here.
 */
#ifndef EDDY_MODEL_CTX_H
#define EDDY_MODEL_CTX_H

#include "base/threadpool.h"
#include "model/model.h"
#include "state/state.h"

struct eddy_ctx {
    const model *m;
    threadpool *pool;
    seq_state *seq;
    int64_t n_ctx;   /* positions a sequence may hold */
    int64_t n_batch; /* tokens per forward step; longer inputs are split */

    /* work buffers, rows of n_batch tokens */
    float *x;      /* (n_batch, n_embd) residual stream */
    float *xn;     /* (n_batch, n_embd) normalized input of a block */
    float *q;      /* (n_batch, n_head * head_dim_k) */
    float *k;      /* (n_batch, n_head_kv * head_dim_k) */
    float *v;      /* (n_batch, n_head_kv * head_dim_v) */
    float *attn;   /* (n_batch, n_head * head_dim_v) */
    float *ff_a;   /* (n_batch, n_ff) */
    float *ff_b;   /* (n_batch, n_ff) */
    float *rope;   /* (n_rot) cos/sin table of one position */
    void *act;     /* activations converted for linear(): linear_scratch_bytes max */
};

typedef struct eddy_ctx ctx;

/* Runs n (<= n_batch) tokens of the context's sequence at positions n_pos.. and
 * writes logits for every token (all) or for the last one only into logits
 * ((all ? n : 1), n_vocab); logits NULL skips the output layer. Advances n_pos.
 * Inputs are checked by the caller. */
void forward_llama(ctx *c, const int32_t *tokens, int64_t n, float *logits, bool all);

#endif
