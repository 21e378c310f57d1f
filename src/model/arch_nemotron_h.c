/*
 * arch_nemotron_h.c — Nemotron-H (GGUF architecture "nemotron_h"): a hybrid whose
 * every layer is RMSNorm, then ONE of a Mamba-2 mixer, an attention layer (no
 * rotary embedding; position comes from the Mamba-2 layers) or an MLP
 * (up -> squared ReLU -> down), then the residual.
 * GGUF facts: the layer kind is read from two per-layer arrays, as the converter
 * writes them: attention.head_count_kv[i] > 0 marks attention, feed_forward_length[i]
 * > 0 marks an MLP, both 0 a Mamba-2 layer. Every layer's norm is blk.N.attn_norm.
 * The norm epsilon is attention.layer_norm_epsilon (an RMS norm all the same).
 */
#include <inttypes.h>
#include <stdio.h>

#include "model/model_loader.h"

void load_nemotron_h(loader *L) {
    model *m = L->m;
    model_hparams *hp = &m->hp;
    const int64_t big = (int64_t)1 << 24;
    hp->n_embd = hp_int(L, "embedding_length", -1, 1, big);
    hp->n_layer = hp_int(L, "block_count", -1, 1, 4096);
    hp->n_ctx_train = hp_int(L, "context_length", 4096, 1, (int64_t)1 << 32);
    hp->n_head = hp_int(L, "attention.head_count", -1, 1, 4096);
    hp->rms_eps = (float)hp_float(L, "attention.layer_norm_epsilon", 1e-5, 0.0, 1.0);
    hp->rms_eps = (float)hp_float(L, "attention.layer_norm_rms_epsilon", hp->rms_eps, 0.0, 1.0);
    load_mamba2_hparams(L);
    if (L->status != EDDY_OK) return;

    /* (n_layer) kinds from the per-layer arrays */
    mixer_kind kinds[4096];
    for (int il = 0; il < hp->n_layer && L->status == EDDY_OK; il++) {
        const int64_t kv = hp_layer_int(L, "attention.head_count_kv", il, hp->n_head);
        const int64_t ff = hp_layer_int(L, "feed_forward_length", il, big);
        hp_same_in_layers(L, &hp->n_head_kv, kv, "attention.head_count_kv", il);
        hp_same_in_layers(L, &hp->n_ff, ff, "feed_forward_length", il);
        if (kv > 0 && ff > 0)
            loader_fail(L, "layer %d has both attention heads and a feed-forward length (%sattention.head_count_kv[%d] = %"
                        PRId64 ", feed_forward_length[%d] = %" PRId64 "); a Nemotron-H layer is one of the two", il,
                        L->prefix, il, kv, il, ff);
        kinds[il] = kv > 0 ? MIXER_ATTENTION : ff > 0 ? MIXER_NONE : MIXER_MAMBA2;
    }
    if (L->status != EDDY_OK) return;
    if (hp->n_head_kv > 0 && hp->n_head % hp->n_head_kv != 0) {
        loader_fail(L, "%sattention.head_count %" PRId64 " is not a multiple of head_count_kv %" PRId64, L->prefix,
                    hp->n_head, hp->n_head_kv);
        return;
    }
    hp->head_dim_k = hp_int(L, "attention.key_length", hp->n_embd / hp->n_head, 1, 4096);
    hp->head_dim_v = hp_int(L, "attention.value_length", hp->head_dim_k, 1, 4096);
    hp->n_rot = 0; /* no rotary embedding, whatever rope.dimension_count says */
    load_embeddings(L);

    const int64_t E = hp->n_embd, F = hp->n_ff;
    for (int il = 0; il < hp->n_layer && L->status == EDDY_OK; il++) {
        model_layer *l = &m->layers[il];
        l->mixer = MIXER_NONE;
        l->ffn = FFN_NONE;
        bind_f32(L, &l->attn_norm, true, 1, (int64_t[]){E}, "blk.%d.attn_norm.weight", il);
        /* biases are optional in the format; no released model has them and eddy does not add them */
        static const char *const biases[] = {"blk.%d.attn_q.bias", "blk.%d.attn_output.bias", "blk.%d.ffn_up.bias",
                                             "blk.%d.ffn_down.bias", "blk.%d.ssm_in.bias", "blk.%d.ssm_out.bias"};
        for (size_t b = 0; b < sizeof biases / sizeof biases[0]; b++) {
            char name[64];
            snprintf(name, sizeof name, biases[b], il);
            if (gguf_find_tensor(m->file, name) >= 0) loader_fail(L, "tensor %s: biases are not supported yet", name);
        }
        switch (kinds[il]) {
        case MIXER_MAMBA2: bind_mamba2(L, l, il); break;
        case MIXER_ATTENTION: bind_attention(L, l, il, false); break;
        default:
            /* the MLP: the layer's one norm serves as the feed-forward norm */
            l->ffn = FFN_RELU2;
            l->ffn_norm = l->attn_norm;
            bind(L, &l->ffn_up, true, 2, (int64_t[]){E, F}, "blk.%d.ffn_up.weight", il);
            bind(L, &l->ffn_down, true, 2, (int64_t[]){F, E}, "blk.%d.ffn_down.weight", il);
            break;
        }
    }
}
