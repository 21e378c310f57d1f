/*
 * forward.c — the forward pass shared by every architecture, over one step's rows
 * (tokens of one or many sequences, step_plan in engine.h):
 *   x = embed(tokens)
 *   per layer: x += mixer(norm(x))      mixer: attention, Gated DeltaNet or Mamba-2
 *              x += ffn(norm(x))        ffn: SwiGLU, squared-ReLU MLP or mixture of experts
 *   (a layer may have only one of the two)
 *   logits = output(norm(x)) for the rows asked for
 *   then, in an engine with it, the multi-token-prediction layer (block_mtp.c)
 * (A model split between the CPU and a GPU runs the embeddings and its first layers here,
 * forward_front, and the rest on the GPU: src/cuda/cuda_engine.c.)
 * (Granite scales the embeddings, each block's output and the logits by constants.)
 * Every product runs over all rows of the step at once, so each weight is read once
 * per step whatever the number of sequences; only the mixers' recurrences and
 * attention look at which sequence a row belongs to.
 */
#include <string.h>

#include "model/engine.h"
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

void forward_scale_logits(const model_hparams *hp, float *logits, int64_t n_rows) {
    if (hp->logit_scale != 1.0f) scale_rows(logits, n_rows * hp->n_vocab, 1.0f / hp->logit_scale);
}

void forward_layer(engine *c, const model_layer *l, int64_t il, const step_plan *plan) {
    const model_hparams *hp = &c->m->hp;
    const int64_t E = hp->n_embd, n = plan->n;
    if (l->mixer != MIXER_NONE) {
        ops_rmsnorm_rows_mt(c->pool, c->xn, E, c->x, E, (const float *)l->attn_norm.data, E, n, hp->rms_eps);
        switch (l->mixer) {
        case MIXER_ATTENTION: block_attention(c, l, il, plan); break;
        case MIXER_GDN: block_gdn(c, l, il, plan); break;
        case MIXER_MAMBA2: block_mamba2(c, l, il, plan); break;
        case MIXER_NONE: break;
        }
        add_rows(c->x, c->mix, n * E, hp->residual_scale);
    }
    if (l->ffn != FFN_NONE) {
        ops_rmsnorm_rows_mt(c->pool, c->xn, E, c->x, E, (const float *)l->ffn_norm.data, E, n, hp->rms_eps);
        switch (l->ffn) {
        case FFN_DENSE: block_ffn_dense(c, l, n); break;
        case FFN_MOE: block_ffn_moe(c, l, n); break;
        case FFN_RELU2: block_ffn_relu2(c, l, n); break;
        case FFN_NONE: break;
        }
        add_rows(c->x, c->mix, n * E, hp->residual_scale);
    }
}

void forward_front(engine *c, const int32_t *tokens, const step_plan *plan, int64_t il_end) {
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, n = plan->n;
    for (int64_t t = 0; t < n; t++) tensor_row_f32(&m->tok_embd, tokens[t], c->x + t * E);
    if (hp->embd_scale != 1.0f) scale_rows(c->x, n * E, hp->embd_scale);
    for (int64_t il = 0; il < il_end; il++) forward_layer(c, &m->layers[il], il, plan);
}

void forward(engine *c, const int32_t *tokens, const step_plan *plan, float *logits, const int64_t *out_rows,
             int64_t n_out) {
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, n = plan->n;
    forward_front(c, tokens, plan, hp->n_layer);

    /* output: only the rows whose logits are wanted, gathered into xn (with the MTP
     * layer every row is normed, into c->h, which that layer reads next) */
    const float *norm = (const float *)m->output_norm.data;
    if (c->mtp) ops_rmsnorm_rows_mt(c->pool, c->h, E, c->x, E, norm, E, n, hp->rms_eps);
    if (logits && n_out > 0) {
        for (int64_t i = 0; i < n_out; i++) {
            if (c->mtp) memcpy(c->xn + i * E, c->h + out_rows[i] * E, (size_t)E * sizeof(float));
            else ops_rmsnorm_rows(c->xn + i * E, E, c->x + out_rows[i] * E, E, norm, E, 1, hp->rms_eps);
        }
        linear(c->pool, &m->output, c->xn, n_out, logits, c->act);
        forward_scale_logits(hp, logits, n_out);
    }
    if (c->mtp) block_mtp(c, tokens, plan);
}
