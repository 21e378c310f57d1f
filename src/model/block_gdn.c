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
 * State of the layer in the sequence's recurrent block: conv window (d_conv - 1,
 * conv_dim), oldest row first, then S (n_v, d_k, d_v), row i of head h contiguous.
 */
#include <math.h>

#include "model/ctx.h"
#include "model/linear.h"
#include "ops/norm.h"
#include "ssm/gdn.h"
#include "ssm/ssm.h"

void block_gdn(ctx *c, const model_layer *l, int64_t il, int64_t n) {
    const model_hparams *hp = &c->m->hp;
    const int64_t n_k = hp->ssm_n_k, n_v = hp->ssm_n_v, d_k = hp->ssm_d_k, d_v = hp->ssm_d_v;
    const int64_t conv_dim = model_gdn_conv_dim(hp), key_dim = n_k * d_k, V = n_v * d_v, r = n_v / n_k;
    float *win = c->seq->rec[il], *S_all = win + (hp->ssm_d_conv - 1) * conv_dim;

    linear(c->pool, &l->ssm_qkv, c->xn, n, c->conv_in, c->act);
    linear(c->pool, &l->ssm_z, c->xn, n, c->gdn_z, c->act);
    const bool ba = l->ssm_ba.name != NULL;
    if (ba) {
        linear(c->pool, &l->ssm_ba, c->xn, n, c->gdn_b, c->act);
    } else {
        linear(c->pool, &l->ssm_beta, c->xn, n, c->gdn_b, c->act);
        linear(c->pool, &l->ssm_alpha, c->xn, n, c->gdn_a, c->act);
    }
    const float *a_log_neg = (const float *)l->ssm_a.data, *dt_bias = (const float *)l->ssm_dt_bias.data;
    /* conv + SiLU, then q and k L2-normed per key head (1e-6 as the reference models) */
    conv1d_params cp = {conv_dim, (int)hp->ssm_d_conv, l->conv_w, NULL, 2 * key_dim, d_k, 1e-6f};
    if (n == 1) conv1d_step(NULL, &cp, 1, c->conv_in, conv_dim, c->gdn_qkv, conv_dim, win, NULL);
    else conv1d_prefill(c->pool, &cp, n, c->conv_in, conv_dim, c->gdn_qkv, conv_dim, win);
    /* each value head's beta and decay */
    for (int64_t t = 0; t < n; t++) {
        for (int64_t h = 0; h < n_v; h++) {
            /* qwen3next interleaves per key head: b for its r value heads, then a */
            float b_raw, a_raw;
            if (ba) {
                const int64_t grp = h / r, j = h % r;
                b_raw = c->gdn_b[t * 2 * n_v + grp * 2 * r + j];
                a_raw = c->gdn_b[t * 2 * n_v + grp * 2 * r + r + j];
            } else {
                b_raw = c->gdn_b[t * n_v + h];
                a_raw = c->gdn_a[t * n_v + h];
            }
            c->gdn_beta[t * n_v + h] = ops_sigmoid(b_raw);
            c->gdn_g[t * n_v + h] = a_log_neg[h] * ops_softplus(a_raw + dt_bias[h]);
        }
    }
    /* the delta rule over the n tokens: one step when decoding, else the prefill
     * kernel (chunked WY form past its crossover, the scan below it) */
    gdn_params p = {n_k, n_v, d_k, d_v, hp->ssm_head_map, 1.0f / sqrtf((float)d_k)};
    gdn_rows rows = {c->gdn_qkv, c->gdn_qkv + key_dim, c->gdn_qkv + 2 * key_dim, c->gdn_g, c->gdn_beta,
                     conv_dim, conv_dim, conv_dim, n_v, n_v, c->gdn_o, V};
    if (n == 1) gdn_step(c->pool, &p, 1, &rows, S_all, NULL);
    else gdn_prefill(c->pool, &p, n, &rows, S_all, NULL);

    /* gated RMSNorm of each head's output */
    gated_rmsnorm(n == 1 ? NULL : c->pool, n, n_v, d_v, c->gdn_o, V, c->gdn_z, V, (const float *)l->ssm_norm.data,
                  hp->rms_eps, c->gdn_o, V);
    linear(c->pool, &l->ssm_out, c->gdn_o, n, c->mix, c->act);
}
