/*
 * ctx.h — a compute context: one model, one sequence's state, a thread pool and the
 * work buffers of a forward pass, all sized up front so evaluation allocates nothing.
 *
 * Owns: the internal form of eddy_ctx (include/eddy.h). The forward pass (forward.c)
 * and its blocks (block_*.c) read their buffers from here; a buffer an architecture
 * does not use is NULL.
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
    float *x;    /* (n_batch, n_embd) residual stream */
    float *xn;   /* (n_batch, n_embd) normalized input of a block */
    float *mix;  /* (n_batch, n_embd) output of a block, added to x */
    /* attention */
    float *qg;   /* (n_batch, n_head * head_dim_k * (gated ? 2 : 1)) q projection */
    float *q;    /* (n_batch, n_head * head_dim_k) */
    float *k;    /* (n_batch, n_head_kv * head_dim_k) */
    float *v;    /* (n_batch, n_head_kv * head_dim_v) */
    float *attn; /* (n_batch, n_head * head_dim_v) */
    float *rope; /* (n_rot) cos/sin table of one position */
    /* Gated DeltaNet */
    float *gdn_qkv; /* (n_batch, conv_dim) projection, then conv output */
    float *gdn_z;   /* (n_batch, n_v * d_v) output gate */
    float *gdn_b;   /* (n_batch, n_v) beta logits (or interleaved b|a, 2 n_v, for qwen3next) */
    float *gdn_a;   /* (n_batch, n_v) decay logits */
    float *gdn_o;   /* (n_batch, n_v * d_v) mixer output before out projection */
    float *gdn_g;   /* (n_batch, n_v) log decay per value head */
    float *gdn_beta; /* (n_batch, n_v) */
    float *conv_in; /* (n_batch, conv_dim) the projection the conv reads */
    /* Mamba-2 (the conv output reuses gdn_qkv, the scan output gdn_o) */
    float *mb_in;   /* (n_batch, in_dim) z | xBC | dt */
    /* feed-forward */
    float *ff_a, *ff_b; /* (n_batch, max(n_ff, n_ff_exp, n_ff_shexp)) */
    float *router;      /* (n_batch, n_expert) */
    float *ff_out;      /* (n_batch, n_embd) one expert's outputs for the tokens routed to it */
    float *moe_x;       /* (n_batch, n_embd) the inputs of the tokens routed to one expert */
    int32_t *moe_sel;   /* (n_batch, n_expert_used) each token's experts */
    float *moe_w;       /* (n_batch, n_expert_used) their weights */
    int32_t *moe_order; /* (n_batch * n_expert_used) token slots sorted by expert */
    int32_t *moe_start; /* (n_expert + 1) where each expert's slots begin in moe_order */
    void *act;          /* activations converted for linear(): the largest need */
};

typedef struct eddy_ctx ctx;

/* Runs n (<= n_batch) tokens of the context's sequence at positions n_pos.. and
 * writes logits for every token (all) or for the last one only into logits
 * ((all ? n : 1), n_vocab); logits NULL skips the output layer. Advances n_pos.
 * Inputs are checked by the caller. */
void forward(ctx *c, const int32_t *tokens, int64_t n, float *logits, bool all);

/* The blocks: each reads c->xn (n rows of n_embd) and writes c->mix. */
void block_attention(ctx *c, const model_layer *l, int64_t il, int64_t n);
void block_gdn(ctx *c, const model_layer *l, int64_t il, int64_t n);
void block_ffn_dense(ctx *c, const model_layer *l, int64_t n);
void block_ffn_moe(ctx *c, const model_layer *l, int64_t n);
void block_ffn_relu2(ctx *c, const model_layer *l, int64_t n);
void block_mamba2(ctx *c, const model_layer *l, int64_t il, int64_t n);

#endif
