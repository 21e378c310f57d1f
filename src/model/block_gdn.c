/*
 * block_gdn.c — the Gated DeltaNet mixer (Qwen3.5, Qwen3-Next), on the src/ssm kernels:
 *
 *   qkv = Wqkv x;  z = Wz x;  beta = sigmoid(Wb x);  g = ssm_a * softplus(Wa x + dt_bias)
 *   c = silu(causal_conv1d(qkv))         window: the last d_conv - 1 raw inputs + this one
 *   q, k = l2norm(c[q]), l2norm(c[k]) per key head;  q *= 1/sqrt(d_k);  v = c[v]
 *   per value head h (key head kh(h)), state S (d_k, d_v), by src/ssm/gdn.h:
 *     S = exp(g) S;  u = beta (v - S^T k);  S += k u^T;  o = S^T q
 *   out = Wout (rmsnorm(o) * norm_w * silu(z)) per value head
 *
 * State of the layer in each recurrent slot of the pool: the conv window
 * (d_conv - 1, conv_dim), oldest row first, and S (n_v, d_k, d_v), row i of head h
 * contiguous. The products and gates run over all rows of the step; the conv and the
 * delta rule go by the plan's runs: consecutive one-token runs as one decode step
 * over their slots, a longer run as one sequence's prefill (in pieces that end at the
 * multiples of cache_every, where the prefix cache may copy the state), a verify run
 * from its slot, keeping per row the conv window and the delta rule's inputs in the
 * row's row slot (state.h); accepting k rows replays the first k on the slot
 * (block_gdn_accept).
 */
#include <math.h>
#include <string.h>

#include "model/engine.h"
#include "model/linear.h"
#include "ssm/gdn.h"
#include "ssm/ssm.h"

/* Rows [row0, ..) of the step's q, k, v, gates and output. */
static gdn_rows rows_from(const engine *c, int64_t row0, int64_t conv_dim, int64_t key_dim, int64_t n_v,
                          int64_t V) {
    const float *qkv = c->gdn_qkv + row0 * conv_dim;
    return (gdn_rows){qkv, qkv + key_dim, qkv + 2 * key_dim, c->gdn_g + row0 * n_v, c->gdn_beta + row0 * n_v,
                      conv_dim, conv_dim, conv_dim, n_v, n_v, c->gdn_o + row0 * V, V};
}

void block_gdn(engine *c, const model_layer *l, int64_t il, const step_plan *plan) {
    const model_hparams *hp = &c->m->hp;
    state_pool *sp = c->sp;
    const int64_t n = plan->n;
    const int64_t n_k = hp->ssm_n_k, n_v = hp->ssm_n_v, d_k = hp->ssm_d_k, d_v = hp->ssm_d_v;
    const int64_t conv_dim = model_gdn_conv_dim(hp), key_dim = n_k * d_k, V = n_v * d_v, r = n_v / n_k;

    /* the input projections all read xn: one pass */
    const bool ba = l->ssm_ba.name != NULL;
    if (ba)
        linear_many(c->pool, (const tensor *[]){&l->ssm_qkv, &l->ssm_z, &l->ssm_ba}, 3, c->xn, n,
                    (float *[]){c->conv_in, c->gdn_z, c->gdn_b}, c->act);
    else
        linear_many(c->pool, (const tensor *[]){&l->ssm_qkv, &l->ssm_z, &l->ssm_beta, &l->ssm_alpha}, 4, c->xn, n,
                    (float *[]){c->conv_in, c->gdn_z, c->gdn_b, c->gdn_a}, c->act);
    /* each value head's beta and decay; qwen3next's fused projection interleaves per
     * key head: b of its r value heads, then a of them */
    const float *a_log_neg = (const float *)l->ssm_a.data, *dt_bias = (const float *)l->ssm_dt_bias.data;
    if (ba)
        ssm_gate(n, n_v, c->gdn_b + r, 2 * n_v, c->gdn_b, 2 * n_v, r, 2 * r, a_log_neg, dt_bias, c->gdn_g, c->gdn_beta);
    else
        ssm_gate(n, n_v, c->gdn_a, n_v, c->gdn_b, n_v, n_v, n_v, a_log_neg, dt_bias, c->gdn_g, c->gdn_beta);
    /* conv + SiLU, q and k L2-normed per key head (1e-6 as the reference models), then
     * the delta rule: one step for a group of decoding sequences, else the prefill
     * kernel (chunked WY form past its crossover, the scan below it) */
    conv1d_params cp = {conv_dim, (int)hp->ssm_d_conv, l->conv_w, NULL, 2 * key_dim, d_k, 1e-6f};
    gdn_params p = {n_k, n_v, d_k, d_v, hp->ssm_head_map, 1.0f / sqrtf((float)d_k)};
    for (int64_t i = 0; i < plan->n_runs;) {
        const step_run *run = &plan->runs[i];
        const float *x = c->conv_in + run->row0 * conv_dim;
        float *y = c->gdn_qkv + run->row0 * conv_dim;
        gdn_rows rows = rows_from(c, run->row0, conv_dim, key_dim, n_v, V);
        const int64_t g = step_decode_group(plan, i);
        if (g > 0) {
            conv1d_step(g > 1 ? c->pool : NULL, &cp, g, x, conv_dim, y, conv_dim, sp->conv[il], plan->slots);
            gdn_step(c->pool, &p, g, &rows, sp->rec[il], plan->slots);
            i += g;
            continue;
        }
        if (run->snap) {
            /* verify: the slot is only read. The conv window after each row goes to its
             * row slot; the delta rule keeps its outputs only (a state per row would be
             * n_v d_k d_v floats each), and the row slot keeps what replaying it
             * takes, its q, k, v, g and beta, for block_gdn_accept */
            float **conv_snap, **keep_snap;
            step_snap_ptrs(c, run, il, &conv_snap, &keep_snap);
            EDDY_ASSERT(sp->shape[il].keep_floats == conv_dim + 2 * n_v);
            conv1d_verify(c->pool, &cp, 1, run->n, x, conv_dim, y, conv_dim, sp->conv[il], &run->slot, conv_snap);
            for (int64_t t = 0; t < run->n; t++) {
                float *keep = keep_snap[t];
                memcpy(keep, y + t * conv_dim, (size_t)conv_dim * sizeof(float));
                memcpy(keep + conv_dim, rows.g + t * n_v, (size_t)n_v * sizeof(float));
                memcpy(keep + conv_dim + n_v, rows.beta + t * n_v, (size_t)n_v * sizeof(float));
            }
            gdn_verify_outputs(c->pool, &p, 1, run->n, &rows, sp->rec[il], &run->slot, NULL);
        } else { /* in pieces ending at multiples of cache_every, where checkpoints may be taken */
            float *conv = state_conv(sp, il, run->slot), *S = state_rec(sp, il, run->slot);
            for (int64_t t0 = 0; t0 < run->n;) {
                const int64_t t1 = step_piece_end(c, run->pos0 + t0, run->pos0 + run->n) - run->pos0;
                gdn_rows piece = rows_from(c, run->row0 + t0, conv_dim, key_dim, n_v, V);
                conv1d_prefill(c->pool, &cp, t1 - t0, x + t0 * conv_dim, conv_dim, y + t0 * conv_dim, conv_dim, conv);
                gdn_prefill(c->pool, &p, t1 - t0, &piece, S, NULL);
                const int64_t ck = step_ckpt_slot(run, run->pos0 + t1);
                if (ck >= 0) state_slot_copy_layer(sp, il, ck, run->slot); /* a prefix-cache checkpoint */
                t0 = t1;
            }
        }
        i++;
    }

    /* gated RMSNorm of each head's output */
    gated_rmsnorm(n == 1 ? NULL : c->pool, n, n_v, d_v, c->gdn_o, V, c->gdn_z, V, (const float *)l->ssm_norm.data,
                  hp->rms_eps, c->gdn_o, V);
    linear(c->pool, &l->ssm_out, c->gdn_o, n, c->mix, c->act);
}

void block_gdn_accept(engine *c, const model_layer *l, int64_t il, eddy_seq *s, int64_t n_keep) {
    (void)l;
    const model_hparams *hp = &c->m->hp;
    state_pool *sp = c->sp;
    const int64_t n_k = hp->ssm_n_k, n_v = hp->ssm_n_v, d_k = hp->ssm_d_k, d_v = hp->ssm_d_v;
    const int64_t conv_dim = model_gdn_conv_dim(hp), key_dim = n_k * d_k, V = n_v * d_v;
    EDDY_ASSERT(n_keep >= 1 && n_keep <= s->n_pending && n_keep <= c->n_batch);
    /* the kept rows' inputs, gathered into the step's buffers (free between steps) */
    for (int64_t t = 0; t < n_keep; t++) {
        const float *keep = state_keep(sp, il, s->pending[t]);
        memcpy(c->gdn_qkv + t * conv_dim, keep, (size_t)conv_dim * sizeof(float));
        memcpy(c->gdn_g + t * n_v, keep + conv_dim, (size_t)n_v * sizeof(float));
        memcpy(c->gdn_beta + t * n_v, keep + conv_dim + n_v, (size_t)n_v * sizeof(float));
    }
    gdn_params p = {n_k, n_v, d_k, d_v, hp->ssm_head_map, 1.0f / sqrtf((float)d_k)};
    gdn_rows rows = rows_from(c, 0, conv_dim, key_dim, n_v, V);
    gdn_replay(c->pool, &p, n_keep, &rows, state_rec(sp, il, s->st.slot));
    memcpy(state_conv(sp, il, s->st.slot), state_conv(sp, il, s->pending[n_keep - 1]),
           (size_t)sp->shape[il].conv_floats * sizeof(float));
}
