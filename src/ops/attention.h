/*
 * attention.h — causal grouped-query attention over a sequence's key/value rows.
 *
 * Owns: softmax(q k^T * scale) v for one sequence, queries at consecutive positions.
 * Does not own: where the keys and values live (the KV cache in src/state) or the
 * projections and rotary embedding around it (src/model).
 *
 * Shapes (row strides in floats, so q/k/v can be slices of wider rows):
 *   q   (n_q,  n_head,    head_dim_k)  stride sq   query t is at position pos0 + t
 *   k   (n_kv, n_head_kv, head_dim_k)  stride sk   row j holds position j
 *   v   (n_kv, n_head_kv, head_dim_v)  stride sv
 *   out (n_q,  n_head,    head_dim_v)  stride so
 * Query t sees keys 0 .. pos0 + t (causal); query head h reads key/value head
 * h / (n_head / n_head_kv).
 */
#ifndef EDDY_OPS_ATTENTION_H
#define EDDY_OPS_ATTENTION_H

#include <stdint.h>

#include "base/threadpool.h"

typedef struct {
    int64_t n_head, n_head_kv, head_dim_k, head_dim_v;
    float scale; /* usually 1/sqrt(head_dim_k) */
} attn_shape;

typedef struct {
    float *out;
    const float *q, *k, *v;
    int64_t so, sq, sk, sv;
    int64_t n_q, pos0;
} attn_args;

/* Scratch floats each thread needs: one score row of pos0 + n_q keys. */
static inline int64_t ops_attention_scratch(int64_t pos0, int64_t n_q) { return pos0 + n_q; }

/* Threaded over (query, head) pairs; scratch from pool_scratch (reserve first:
 * ops_attention_scratch floats per thread). Same arithmetic as the reference, in a
 * different variant of the dot product (SIMD), so results agree to rounding. */
void ops_attention(threadpool *pool, const attn_shape *s, const attn_args *a);

/* The scalar oracle; scores: (pos0 + n_q) floats. */
void ops_attention_ref(const attn_shape *s, const attn_args *a, float *scores);

#endif
