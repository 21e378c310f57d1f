/*
 * arch_llama.c — the Llama family (e.g. SmolLM2): attention with adjacent-pair rotary
 * embeddings (the converter permutes q/k into that order) and a SwiGLU FFN per layer.
 */
#include "model/model_loader.h"

void load_llama(loader *L) {
    model_hparams *hp = &L->m->hp;
    hp->n_ff = hp_int(L, "feed_forward_length", -1, 1, (int64_t)1 << 24);
    hp->rope_style = ROPE_NORM;
    load_common(L);
    for (int il = 0; il < hp->n_layer && L->status == EDDY_OK; il++) {
        model_layer *l = &L->m->layers[il];
        bind_f32(L, &l->attn_norm, true, 1, (int64_t[]){hp->n_embd}, "blk.%d.attn_norm.weight", il);
        bind_attention(L, l, il, false);
        bind_ffn_dense(L, l, il, "blk.%d.ffn_norm.weight");
    }
}
