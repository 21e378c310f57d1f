/*
 * forward.c — the forward pass shared by every architecture:
 *   x = embed(tokens)
 *   per layer: x += mixer(norm(x))      mixer: attention, Gated DeltaNet or Mamba-2
 *              x += ffn(norm(x))        ffn: SwiGLU, squared-ReLU MLP or mixture of experts
 *   (a layer may have only one of the two)
 *   logits = output(norm(x))
 * (Granite scales the embeddings, each block's output and the logits by constants.)
 */
#include "model/ctx.h"
#include "model/linear.h"
#include "ops/norm.h"

/* x += scale * y */
static void add_rows(float *x, const float *y, int64_t n, float scale) {
    if (scale == 1.0f)
        for (int64_t i = 0; i < n; i++) x[i] += y[i];
    else
        for (int64_t i = 0; i < n; i++) x[i] += scale * y[i];
}

static void scale_rows(float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] *= scale;
}

void forward(ctx *c, const int32_t *tokens, int64_t n, float *logits, bool all) {
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd;
    for (int64_t t = 0; t < n; t++) tensor_row_f32(&m->tok_embd, tokens[t], c->x + t * E);
    if (hp->embd_scale != 1.0f) scale_rows(c->x, n * E, hp->embd_scale);

    for (int64_t il = 0; il < hp->n_layer; il++) {
        const model_layer *l = &m->layers[il];
        if (l->mixer != MIXER_NONE) {
            ops_rmsnorm_rows(c->xn, E, c->x, E, (const float *)l->attn_norm.data, E, n, hp->rms_eps);
            switch (l->mixer) {
            case MIXER_ATTENTION: block_attention(c, l, il, n); break;
            case MIXER_GDN: block_gdn(c, l, il, n); break;
            case MIXER_MAMBA2: block_mamba2(c, l, il, n); break;
            case MIXER_NONE: break;
            }
            add_rows(c->x, c->mix, n * E, hp->residual_scale);
        }
        if (l->ffn != FFN_NONE) {
            ops_rmsnorm_rows(c->xn, E, c->x, E, (const float *)l->ffn_norm.data, E, n, hp->rms_eps);
            switch (l->ffn) {
            case FFN_DENSE: block_ffn_dense(c, l, n); break;
            case FFN_MOE: block_ffn_moe(c, l, n); break;
            case FFN_RELU2: block_ffn_relu2(c, l, n); break;
            case FFN_NONE: break;
            }
            add_rows(c->x, c->mix, n * E, hp->residual_scale);
        }
    }
    c->seq->n_pos += n;

    /* output: only the rows whose logits are wanted */
    if (!logits) return;
    const int64_t first = all ? 0 : n - 1, rows = n - first;
    ops_rmsnorm_rows(c->xn, E, c->x + first * E, E, (const float *)m->output_norm.data, E, rows, hp->rms_eps);
    linear(c->pool, &m->output, c->xn, rows, logits, c->act);
    if (hp->logit_scale != 1.0f) scale_rows(logits, rows * hp->n_vocab, 1.0f / hp->logit_scale);
}
