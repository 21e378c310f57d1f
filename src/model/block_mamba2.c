/*
 * block_mamba2.c — the Mamba-2 mixer:
 *
 *   z | xBC | dt = Win x
 *   xBC = silu(causal_conv1d(xBC) + bias)        window: the last d_conv - 1 raw inputs (src/ssm conv1d)
 *   x, B, C = xBC;  y = selective scan (src/ssm/mamba2.h) with the D skip
 *   out = Wout (grouped_rmsnorm(y * silu(z)) * norm_w)
 *
 * State of the layer in the sequence's recurrent block: conv window (d_conv - 1,
 * conv_dim), oldest row first, then the scan state (n_head, d_state, d_head).
 */
#include <math.h>

#include "model/ctx.h"
#include "model/linear.h"
#include "ssm/mamba2.h"
#include "ssm/ssm.h"

void block_mamba2(ctx *c, const model_layer *l, int64_t il, int64_t n) {
    const model_hparams *hp = &c->m->hp;
    const int64_t DI = hp->ssm_d_inner, CD = mamba2_conv_dim(hp), IN = mamba2_in_dim(hp);
    const int64_t GS = hp->ssm_n_group * hp->ssm_d_state, gsize = DI / hp->ssm_n_group;
    float *win = c->seq->rec[il], *state = win + (hp->ssm_d_conv - 1) * CD;

    /* zxbcdt: (n, IN); the conv output goes to gdn_qkv (n, CD) */
    linear(c->pool, &l->ssm_in, c->xn, n, c->mb_in, c->act);
    conv1d_params cp = {CD, (int)hp->ssm_d_conv, l->conv_w, (const float *)l->ssm_conv_bias.data, 0, 0, 0.0f};
    if (n == 1) conv1d_step(NULL, &cp, 1, c->mb_in + DI, IN, c->gdn_qkv, CD, win, NULL);
    else conv1d_prefill(c->pool, &cp, n, c->mb_in + DI, IN, c->gdn_qkv, CD, win);

    mamba2_params p = {hp->ssm_n_head, DI / hp->ssm_n_head, hp->ssm_n_group, hp->ssm_d_state,
                       (const float *)l->ssm_a.data, (const float *)l->ssm_dt_bias.data,
                       (const float *)l->ssm_d.data, 0.0f, INFINITY};
    mamba2_io io = {c->gdn_qkv, CD, c->gdn_qkv + DI, CD, c->gdn_qkv + DI + GS, CD, c->mb_in + DI + CD, IN,
                    c->gdn_o, DI};
    float *states[1] = {state};
    if (n == 1) {
        mamba2_step(&p, &io, states, 1, c->pool);
    } else {
        int64_t seq_start[2] = {0, n};
        mamba2_scan(&p, &io, seq_start, states, 1, c->pool, NULL);
    }
    /* gate, then RMSNorm per group */
    gated_rmsnorm_group(n == 1 ? NULL : c->pool, n, hp->ssm_n_group, gsize, c->gdn_o, DI, c->mb_in, IN,
                        (const float *)l->ssm_norm.data, hp->rms_eps, c->gdn_o, DI);
    linear(c->pool, &l->ssm_out, c->gdn_o, n, c->mix, c->act);
}
