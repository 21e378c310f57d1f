/*
 * forward_llama.c — the Llama-family transformer forward pass.
 *
 * Per layer: x += Wo · attn(rope(Wq · norm(x)), rope(Wk · norm(x)), Wv · norm(x))
 *            x += Wdown · (silu(Wgate · norm(x)) * (Wup · norm(x)))
 * then logits = Wout · norm(x). Rotary pairs are adjacent (ROPE_NORM): the GGUF
 * converter permutes the q/k weights of Hugging Face checkpoints into that order.
 */
#include <math.h>
#include <string.h>

#include "model/ctx.h"
#include "model/linear.h"
#include "ops/attention.h"
#include "ops/norm.h"
#include "ops/rope.h"

void forward_llama(ctx *c, const int32_t *tokens, int64_t n, float *logits, bool all) {
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    seq_state *s = c->seq;
    const int64_t E = hp->n_embd, pos0 = s->n_pos;
    const int64_t Q = hp->n_head * hp->head_dim_k, K = hp->n_head_kv * hp->head_dim_k;
    const int64_t V = hp->n_head_kv * hp->head_dim_v, F = hp->n_ff;

    for (int64_t t = 0; t < n; t++) tensor_row_f32(&m->tok_embd, tokens[t], c->x + t * E);

    attn_shape shape = {hp->n_head, hp->n_head_kv, hp->head_dim_k, hp->head_dim_v,
                        1.0f / sqrtf((float)hp->head_dim_k)};
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const model_layer *l = &m->layers[il];
        /* attention block */
        ops_rmsnorm_rows(c->xn, E, c->x, E, (const float *)l->attn_norm.data, E, n, hp->rms_eps);
        linear(c->pool, &l->wq, c->xn, n, c->q, c->act);
        linear(c->pool, &l->wk, c->xn, n, c->k, c->act);
        linear(c->pool, &l->wv, c->xn, n, c->v, c->act);
        float *kc = s->k[il], *vc = s->v[il];
        for (int64_t t = 0; t < n; t++) {
            ops_rope_table(c->rope, pos0 + t, hp->n_rot, hp->rope_base);
            ops_rope_apply(c->q + t * Q, hp->n_head, hp->head_dim_k, hp->n_rot, c->rope, hp->rope_style);
            ops_rope_apply(c->k + t * K, hp->n_head_kv, hp->head_dim_k, hp->n_rot, c->rope, hp->rope_style);
            memcpy(kc + (pos0 + t) * K, c->k + t * K, (size_t)K * sizeof(float));
            memcpy(vc + (pos0 + t) * V, c->v + t * V, (size_t)V * sizeof(float));
        }
        attn_args a = {c->attn, c->q, kc, vc, hp->n_head * hp->head_dim_v, Q, K, V, n, pos0};
        ops_attention(c->pool, &shape, &a);
        linear(c->pool, &l->wo, c->attn, n, c->xn, c->act);
        for (int64_t i = 0; i < n * E; i++) c->x[i] += c->xn[i];

        /* feed-forward block */
        ops_rmsnorm_rows(c->xn, E, c->x, E, (const float *)l->ffn_norm.data, E, n, hp->rms_eps);
        linear(c->pool, &l->ffn_gate, c->xn, n, c->ff_a, c->act);
        linear(c->pool, &l->ffn_up, c->xn, n, c->ff_b, c->act);
        ops_swiglu(c->ff_a, c->ff_a, c->ff_b, n * F);
        linear(c->pool, &l->ffn_down, c->ff_a, n, c->xn, c->act);
        for (int64_t i = 0; i < n * E; i++) c->x[i] += c->xn[i];
    }
    s->n_pos += n;

    /* output: only the rows whose logits are wanted */
    if (!logits) return;
    const int64_t first = all ? 0 : n - 1, rows = n - first;
    ops_rmsnorm_rows(c->xn, E, c->x + first * E, E, (const float *)m->output_norm.data, E, rows, hp->rms_eps);
    linear(c->pool, &m->output, c->xn, rows, logits, c->act);
}
