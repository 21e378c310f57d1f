/*
 * footprint.c — what a model's sequence holds and what one decode step moves.
 *
 * Owns: the state shape of each layer (key/value rows of an attention layer, the
 * recurrent floats of a Gated DeltaNet or Mamba-2 layer) that contexts allocate, and
 * the count of bytes one decode step reads from memory (eddy_model_decode_bytes),
 * which `eddy bench -m` divides by the measured read bandwidth for its roofline.
 * Does not own: the state's memory (src/state) or any timing (src/bench).
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/model.h"

/* ==== State per layer ==== */

state_layer_shape model_state_shape(const model *m, int64_t il) {
    const model_hparams *hp = &m->hp;
    state_layer_shape s = {0, 0, 0, 0, 0};
    if (il == hp->n_layer) { /* the MTP layer */
        EDDY_ASSERT(m->mtp);
        return (state_layer_shape){hp->n_head_kv * hp->head_dim_k, hp->n_head_kv * hp->head_dim_v, hp->n_embd, 0, 0};
    }
    switch (m->layers[il].mixer) {
    case MIXER_ATTENTION:
        s.kv_k = hp->n_head_kv * hp->head_dim_k;
        s.kv_v = hp->n_head_kv * hp->head_dim_v;
        break;
    case MIXER_GDN:
        s.conv_floats = (hp->ssm_d_conv - 1) * model_gdn_conv_dim(hp);
        s.rec_floats = hp->ssm_n_v * hp->ssm_d_k * hp->ssm_d_v;
        s.keep_floats = model_gdn_conv_dim(hp) + 2 * hp->ssm_n_v; /* q|k|v after the conv, g, beta */
        break;
    case MIXER_MAMBA2:
        s.conv_floats = (hp->ssm_d_conv - 1) * mamba2_conv_dim(hp);
        s.rec_floats = hp->ssm_n_head * hp->ssm_d_state * (hp->ssm_d_inner / hp->ssm_n_head);
        s.keep_floats = mamba2_conv_dim(hp) + hp->ssm_n_head; /* x|B|C after the conv, raw dt */
        break;
    case MIXER_NONE: break;
    }
    return s;
}

/* ==== Bytes of one decode step ==== */

/* The layer a tensor name "blk.N.<...>" belongs to, or -1 for a tensor outside the
 * layers (embeddings, output). */
static int64_t tensor_layer(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    char *end;
    long long il = strtoll(name + 4, &end, 10);
    return end == name + 4 || *end != '.' || il < 0 ? -1 : (int64_t)il;
}

static bool is_expert_tensor(const model_layer *l, const uint8_t *data) {
    return l->ffn == FFN_MOE && (data == l->moe_gate.data || data == l->moe_up.data || data == l->moe_down.data);
}

/* Weights: every tensor of the file in full, except
 *   - the token embedding table, of which a step reads one row (but when the output
 *     matrix is tied to it, the whole table is read again as the output matrix);
 *   - expert tensors (ne[2] = n_expert experts), of which a step reads n_expert_used;
 *   - tensors of layers past n_layer (multi-token prediction), which the forward pass
 *     leaves out.
 * State: each recurrent layer's state is read and written once per token. KV cache: a
 * step reads one key and one value row per attention layer for each position held. */
void eddy_model_decode_bytes(const eddy_model *m, eddy_decode_bytes *out) {
    const gguf_file *f = m->file;
    const model_hparams *hp = &m->hp;
    const int64_t i_embd = gguf_find_tensor(f, "token_embd.weight");
    uint64_t weights = 0;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        int64_t il = tensor_layer(t->name);
        if (i == i_embd) weights += m->tok_embd.row_bytes;
        else if (il >= hp->n_layer) continue;
        else if (il >= 0 && is_expert_tensor(&m->layers[il], t->data))
            weights += t->n_bytes / (uint64_t)t->ne[2] * (uint64_t)hp->n_expert_used;
        else weights += t->n_bytes;
    }
    if (m->output.data == m->tok_embd.data) weights += (uint64_t)m->tok_embd.row_bytes * (uint64_t)hp->n_vocab;

    uint64_t state = 0, kv = 0;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        state_layer_shape s = model_state_shape(m, il);
        state += 2 * (uint64_t)(s.conv_floats + s.rec_floats) * sizeof(float);
        kv += (uint64_t)(s.kv_k + s.kv_v) * sizeof(float);
    }
    out->weights = weights;
    out->state = state;
    out->kv_per_pos = kv;
}
