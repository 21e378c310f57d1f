/*
 * block_mamba2.c — the Mamba-2 mixer:
 *
 *   z | xBC | dt = Win x
 *   xBC = silu(causal_conv1d(xBC) + bias)        window: the last d_conv - 1 raw inputs (src/ssm conv1d)
 *   x, B, C = xBC;  y = selective scan (src/ssm/mamba2.h) with the D skip
 *   out = Wout (grouped_rmsnorm(y * silu(z)) * norm_w)
 *
 * State of the layer in each recurrent slot of the pool: the conv window
 * (d_conv - 1, conv_dim), oldest row first, and the scan state (n_head, d_state,
 * d_head). The products run over all rows of the step; the conv and the scan go by
 * the plan's runs, as in block_gdn.c: a verify run keeps per row the conv window and
 * the scan's inputs (the conv output x|B|C and the raw dt) in the row's row slot,
 * and accepting k rows replays the first k on the slot (block_mamba2_accept).
 */
#include <math.h>
#include <string.h>

#include "model/engine.h"
#include "model/linear.h"
#include "ssm/mamba2.h"
#include "ssm/ssm.h"

static mamba2_params params_of(const model_hparams *hp, const model_layer *l) {
    return (mamba2_params){hp->ssm_n_head, hp->ssm_d_inner / hp->ssm_n_head, hp->ssm_n_group, hp->ssm_d_state,
                           (const float *)l->ssm_a.data, (const float *)l->ssm_dt_bias.data,
                           (const float *)l->ssm_d.data, 0.0f, INFINITY};
}

/* The scan's inputs and outputs from row r0 of the step's buffers: x|B|C rows of the
 * conv output in gdn_qkv (n, CD), raw dt in the in-projection's rows mb_in (n, IN), y
 * into gdn_o (n, DI). */
static mamba2_io io_at(const engine *c, int64_t r0) {
    const model_hparams *hp = &c->m->hp;
    const int64_t DI = hp->ssm_d_inner, CD = mamba2_conv_dim(hp), IN = mamba2_in_dim(hp);
    const int64_t GS = hp->ssm_n_group * hp->ssm_d_state;
    float *xbc = c->gdn_qkv + r0 * CD;
    return (mamba2_io){xbc, CD, xbc + DI, CD, xbc + DI + GS, CD, c->mb_in + r0 * IN + DI + CD, IN,
                       c->gdn_o + r0 * DI, DI};
}

void block_mamba2(engine *c, const model_layer *l, int64_t il, const step_plan *plan) {
    const model_hparams *hp = &c->m->hp;
    state_pool *sp = c->sp;
    const int64_t n = plan->n;
    const int64_t DI = hp->ssm_d_inner, CD = mamba2_conv_dim(hp), IN = mamba2_in_dim(hp), H = hp->ssm_n_head;
    const int64_t gsize = DI / hp->ssm_n_group;

    /* zxbcdt: (n, IN); the conv output goes to gdn_qkv (n, CD) */
    linear(c->pool, &l->ssm_in, c->xn, n, c->mb_in, c->act);
    conv1d_params cp = {CD, (int)hp->ssm_d_conv, l->conv_w, (const float *)l->ssm_conv_bias.data, 0, 0, 0.0f};
    const mamba2_params p = params_of(hp, l);
    for (int64_t i = 0; i < plan->n_runs;) {
        const step_run *run = &plan->runs[i];
        const int64_t r0 = run->row0;
        const float *x = c->mb_in + r0 * IN + DI;
        float *y = c->gdn_qkv + r0 * CD;
        const mamba2_io io = io_at(c, r0);
        float **states = plan->ptrs;
        const int64_t g = step_decode_group(plan, i);
        if (g > 0) { /* one step for a group of decoding sequences */
            conv1d_step(g > 1 ? c->pool : NULL, &cp, g, x, IN, y, CD, sp->conv[il], plan->slots);
            for (int64_t k = 0; k < g; k++) states[k] = state_rec(sp, il, plan->slots[k]);
            mamba2_step(&p, &io, states, g, c->pool);
            i += g;
            continue;
        }
        if (run->snap) {
            /* verify: the slot is only read. The conv window after each row goes to its
             * row slot; the scan keeps its outputs only (a state per row would be
             * n_head d_state d_head floats each), and the row slot keeps what
             * replaying it takes, its x|B|C and raw dt, for block_mamba2_accept */
            float **conv_snap, **keep_snap;
            step_snap_ptrs(c, run, il, &conv_snap, &keep_snap);
            EDDY_ASSERT(sp->shape[il].keep_floats == CD + H);
            conv1d_verify(c->pool, &cp, 1, run->n, x, IN, y, CD, sp->conv[il], &run->slot, conv_snap);
            for (int64_t t = 0; t < run->n; t++) {
                memcpy(keep_snap[t], y + t * CD, (size_t)CD * sizeof(float));
                memcpy(keep_snap[t] + CD, io.dt + t * IN, (size_t)H * sizeof(float));
            }
            const float *from[1] = {state_rec(sp, il, run->slot)};
            mamba2_verify_outputs(&p, &io, from, 1, run->n, c->pool, NULL);
        } else { /* in pieces ending at multiples of cache_every, where checkpoints may be taken */
            float *conv = state_conv(sp, il, run->slot);
            states[0] = state_rec(sp, il, run->slot);
            for (int64_t t0 = 0; t0 < run->n;) {
                const int64_t t1 = step_piece_end(c, run->pos0 + t0, run->pos0 + run->n) - run->pos0;
                conv1d_prefill(c->pool, &cp, t1 - t0, x + t0 * IN, IN, y + t0 * CD, CD, conv);
                const mamba2_io piece = {io.x + t0 * CD, CD, io.B + t0 * CD, CD, io.C + t0 * CD, CD,
                                         io.dt + t0 * IN, IN, io.y + t0 * DI, DI};
                const int64_t seq_start[2] = {0, t1 - t0};
                mamba2_scan(&p, &piece, seq_start, states, 1, c->pool, NULL);
                const int64_t ck = step_ckpt_slot(run, run->pos0 + t1);
                if (ck >= 0) state_slot_copy_layer(sp, il, ck, run->slot); /* a prefix-cache checkpoint */
                t0 = t1;
            }
        }
        i++;
    }
    /* gate, then RMSNorm per group */
    gated_rmsnorm_group(n == 1 ? NULL : c->pool, n, hp->ssm_n_group, gsize, c->gdn_o, DI, c->mb_in, IN,
                        (const float *)l->ssm_norm.data, hp->rms_eps, c->gdn_o, DI);
    linear(c->pool, &l->ssm_out, c->gdn_o, n, c->mix, c->act);
}

void block_mamba2_accept(engine *c, const model_layer *l, int64_t il, eddy_seq *s, int64_t n_keep) {
    const model_hparams *hp = &c->m->hp;
    state_pool *sp = c->sp;
    const int64_t CD = mamba2_conv_dim(hp), IN = mamba2_in_dim(hp), H = hp->ssm_n_head;
    EDDY_ASSERT(n_keep >= 1 && n_keep <= s->n_pending && n_keep <= c->n_batch);
    /* the kept rows' inputs, gathered into the step's buffers (free between steps) */
    const mamba2_io io = io_at(c, 0);
    for (int64_t t = 0; t < n_keep; t++) {
        const float *keep = state_keep(sp, il, s->pending[t]);
        memcpy(c->gdn_qkv + t * CD, keep, (size_t)CD * sizeof(float));
        memcpy((float *)io.dt + t * IN, keep + CD, (size_t)H * sizeof(float));
    }
    const mamba2_params p = params_of(hp, l);
    mamba2_replay(&p, &io, n_keep, state_rec(sp, il, s->st.slot), c->pool);
    memcpy(state_conv(sp, il, s->st.slot), state_conv(sp, il, s->pending[n_keep - 1]),
           (size_t)sp->shape[il].conv_floats * sizeof(float));
}
