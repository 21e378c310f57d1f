/*
 * block_attention.c — the attention mixer: projections, optional per-head q/k
 * RMSNorm, rotary embeddings (when n_rot > 0), the key/value cache of each sequence,
 * causal GQA attention, optional sigmoid output gate (Qwen's gated attention), output
 * projection. The products run over all rows of the step; the cache and attention
 * itself go sequence by sequence (each run of the plan: its rows see its own cache,
 * through its block table).
 */
#include <math.h>
#include <string.h>

#include "model/engine.h"
#include "model/linear.h"
#include "ops/attention.h"
#include "ops/norm.h"
#include "ops/rope.h"

/* Elements of q, k and v a thread's rows should hold before another thread is woken
 * for the rotary embeddings and cache stores. */
#define ROPE_MIN_WORK ((int64_t)1 << 14)

typedef struct {
    engine *c;
    const step_plan *plan;
    int64_t il, Q, K, V;
} rope_job;

/* Rows [b, e) of the step: each rotated at its position with its own table row, and
 * its k and v stored in its sequence's cache block. */
static void rope_store_task(void *p, int ith, int nth) {
    const rope_job *j = p;
    const model_hparams *hp = &j->c->m->hp;
    const step_plan *plan = j->plan;
    const int64_t hd = hp->head_dim_k;
    int64_t b, e;
    pool_split(plan->n, ith, nth, &b, &e);
    for (int64_t r = 0; r < plan->n_runs; r++) {
        const step_run *run = &plan->runs[r];
        const int32_t *blocks = run->seq->st.blocks;
        const int64_t t0 = run->row0 > b ? run->row0 : b, t1 = run->row0 + run->n < e ? run->row0 + run->n : e;
        for (int64_t t = t0; t < t1; t++) {
            const int64_t pos = plan->pos[t];
            if (hp->n_rot > 0) {
                float *cs = j->c->rope + t * hp->n_rot;
                ops_rope_table(cs, pos, hp->n_rot, hp->rope_base);
                ops_rope_apply(j->c->q + t * j->Q, hp->n_head, hd, hp->n_rot, cs, hp->rope_style);
                ops_rope_apply(j->c->k + t * j->K, hp->n_head_kv, hd, hp->n_rot, cs, hp->rope_style);
            }
            state_store_kv(j->c->sp, j->il, blocks[pos / STATE_KV_BLOCK], pos % STATE_KV_BLOCK, j->c->k + t * j->K,
                           j->c->v + t * j->V);
        }
    }
}

void block_attention(engine *c, const model_layer *l, int64_t il, const step_plan *plan) {
    const model_hparams *hp = &c->m->hp;
    state_pool *sp = c->sp;
    const int64_t n = plan->n, hd = hp->head_dim_k;
    const int64_t Q = hp->n_head * hd, K = hp->n_head_kv * hd, V = hp->n_head_kv * hp->head_dim_v;
    const int64_t O = hp->n_head * hp->head_dim_v;

    /* q (and its gate): with a gate the projection row is, per head, q (hd) then gate (hd) */
    /* q, k and v read the same rows: one pass */
    linear_many(c->pool, (const tensor *[]){&l->wq, &l->wk, &l->wv}, 3, c->xn, n,
                (float *[]){hp->attn_gated ? c->qg : c->q, c->k, c->v}, c->act);
    if (hp->attn_gated)
        for (int64_t t = 0; t < n; t++)
            for (int64_t h = 0; h < hp->n_head; h++) {
                const float *src = c->qg + t * 2 * Q + h * 2 * hd;
                memcpy(c->q + t * Q + h * hd, src, (size_t)hd * sizeof(float));
                memcpy(c->attn + t * O + h * hd, src + hd, (size_t)hd * sizeof(float)); /* gate, kept for later */
            }
    if (l->q_norm.name) {
        ops_rmsnorm_rows_mt(c->pool, c->q, hd, c->q, hd, (const float *)l->q_norm.data, hd, n * hp->n_head,
                            hp->rms_eps);
        ops_rmsnorm_rows_mt(c->pool, c->k, hd, c->k, hd, (const float *)l->k_norm.data, hd, n * hp->n_head_kv,
                            hp->rms_eps);
    }
    /* rotary embeddings at each row's own position, then its key and value rows into
     * its sequence's cache block (reserved by the engine before the step): rows split
     * over the threads, each computed alone, so the split changes no bit */
    rope_job rj = {c, plan, il, Q, K, V};
    const int nth = pool_parts_for(c->pool, n * (Q + K + V), ROPE_MIN_WORK);
    pool_run(nth > 1 ? c->pool : NULL, rope_store_task, &rj, nth < n ? nth : (int)n);
    const float scale = hp->attn_scale > 0 ? hp->attn_scale : 1.0f / sqrtf((float)hd);
    attn_shape shape = {hp->n_head, hp->n_head_kv, hd, hp->head_dim_v, scale};
    /* the gate (when any) sits in c->attn; attention writes into c->qg, free by now */
    float *out = hp->attn_gated ? c->qg : c->attn;
    for (int64_t r = 0; r < plan->n_runs; r++) {
        const step_run *run = &plan->runs[r];
        /* the cache's rows, block by block: K (STATE_KV_BLOCK, K) and V (STATE_KV_BLOCK, V) in
         * the pool's types, the run's queries at positions pos0 .. pos0 + n - 1 */
        attn_args a = {out + run->row0 * O, c->q + run->row0 * Q, sp->k[il], sp->v[il], O, Q, K, V, run->n,
                       run->pos0, sp->type_k, sp->type_v, run->seq->st.blocks, state_block_elems_k(sp, il),
                       state_block_elems_v(sp, il), state_k_tiled(sp, il)};
        ops_attention(c->pool, &shape, &a);
    }
    if (hp->attn_gated)
        for (int64_t i = 0; i < n * O; i++) out[i] *= ops_sigmoid(c->attn[i]);
    linear(c->pool, &l->wo, out, n, c->mix, c->act);
}
