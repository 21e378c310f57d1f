/*
 * block_attention.c — the attention mixer: projections, optional per-head q/k
 * RMSNorm, rotary embeddings (when n_rot > 0), the key/value cache of the sequence, causal GQA
 * attention, optional sigmoid output gate (Qwen's gated attention), output projection.
 */
#include <math.h>
#include <string.h>

#include "model/ctx.h"
#include "model/linear.h"
#include "ops/attention.h"
#include "ops/norm.h"
#include "ops/rope.h"

void block_attention(ctx *c, const model_layer *l, int64_t il, int64_t n) {
    const model_hparams *hp = &c->m->hp;
    seq_state *s = c->seq;
    const int64_t pos0 = s->n_pos, hd = hp->head_dim_k;
    const int64_t Q = hp->n_head * hd, K = hp->n_head_kv * hd, V = hp->n_head_kv * hp->head_dim_v;
    const int64_t O = hp->n_head * hp->head_dim_v;

    /* q (and its gate): with a gate the projection row is, per head, q (hd) then gate (hd) */
    linear(c->pool, &l->wq, c->xn, n, hp->attn_gated ? c->qg : c->q, c->act);
    if (hp->attn_gated)
        for (int64_t t = 0; t < n; t++)
            for (int64_t h = 0; h < hp->n_head; h++) {
                const float *src = c->qg + t * 2 * Q + h * 2 * hd;
                memcpy(c->q + t * Q + h * hd, src, (size_t)hd * sizeof(float));
                memcpy(c->attn + t * O + h * hd, src + hd, (size_t)hd * sizeof(float)); /* gate, kept for later */
            }
    linear(c->pool, &l->wk, c->xn, n, c->k, c->act);
    linear(c->pool, &l->wv, c->xn, n, c->v, c->act);
    if (l->q_norm.name) {
        ops_rmsnorm_rows(c->q, hd, c->q, hd, (const float *)l->q_norm.data, hd, n * hp->n_head, hp->rms_eps);
        ops_rmsnorm_rows(c->k, hd, c->k, hd, (const float *)l->k_norm.data, hd, n * hp->n_head_kv, hp->rms_eps);
    }
    for (int64_t t = 0; t < n; t++) {
        if (hp->n_rot > 0) {
            ops_rope_table(c->rope, pos0 + t, hp->n_rot, hp->rope_base);
            ops_rope_apply(c->q + t * Q, hp->n_head, hd, hp->n_rot, c->rope, hp->rope_style);
            ops_rope_apply(c->k + t * K, hp->n_head_kv, hd, hp->n_rot, c->rope, hp->rope_style);
        }
        seq_state_store_kv(s, il, pos0 + t, c->k + t * K, c->v + t * V);
    }
    const float scale = hp->attn_scale > 0 ? hp->attn_scale : 1.0f / sqrtf((float)hd);
    attn_shape shape = {hp->n_head, hp->n_head_kv, hd, hp->head_dim_v, scale};
    /* the gate (when any) sits in c->attn; attention writes into c->qg, free by now */
    float *out = hp->attn_gated ? c->qg : c->attn;
    /* the cache's rows: K (n_ctx, K), V (n_ctx, V) in s->type_k / s->type_v */
    attn_args a = {out, c->q, s->k[il], s->v[il], O, Q, K, V, n, pos0, s->type_k, s->type_v};
    ops_attention(c->pool, &shape, &a);
    if (hp->attn_gated)
        for (int64_t i = 0; i < n * O; i++) out[i] *= ops_sigmoid(c->attn[i]);
    linear(c->pool, &l->wo, out, n, c->mix, c->act);
}
