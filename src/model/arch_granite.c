/*
 * arch_granite.c — Granite 4 hybrid (GGUF architecture "granitehybrid"): every layer
 * is RMSNorm and a Mamba-2 mixer or an attention layer, then RMSNorm and a
 * feed-forward part (a mixture of experts with an ungated shared expert, or one
 * SwiGLU MLP when the file has no experts), each with a residual.
 * GGUF facts: attention.head_count_kv is per layer, 0 for a Mamba-2 layer; the
 * attention uses rotary embeddings only when rope.scaling.finetuned is true (the
 * converter writes false for the hybrids: no position encoding besides the Mamba-2
 * layers); four multipliers (embedding_scale, residual_scale, attention.scale,
 * logit_scale, which divides) replace the usual constants when present.
 */
#include <inttypes.h>
#include <stdio.h>

#include "model/model_loader.h"

void load_granitehybrid(loader *L) {
    model *m = L->m;
    model_hparams *hp = &m->hp;
    const int64_t big = (int64_t)1 << 24;
    hp->n_embd = hp_int(L, "embedding_length", -1, 1, big);
    hp->n_layer = hp_int(L, "block_count", -1, 1, 4096);
    hp->n_ctx_train = hp_int(L, "context_length", 4096, 1, (int64_t)1 << 32);
    hp->n_head = hp_int(L, "attention.head_count", -1, 1, 4096);
    hp->rms_eps = (float)hp_float(L, "attention.layer_norm_rms_epsilon", 1e-5, 0.0, 1.0);
    hp->embd_scale = (float)hp_float(L, "embedding_scale", 1.0, 1e-6, 1e6);
    hp->residual_scale = (float)hp_float(L, "residual_scale", 1.0, 1e-6, 1e6);
    hp->attn_scale = (float)hp_float(L, "attention.scale", 0.0, 0.0, 1e6);
    hp->logit_scale = (float)hp_float(L, "logit_scale", 1.0, 1e-6, 1e6);
    hp->n_ff = hp_int(L, "feed_forward_length", -1, 1, big);
    hp->n_expert = hp_int(L, "expert_count", 0, 0, 4096);
    if (hp->n_expert > 0) {
        /* at most 64 experts per token: the router keeps its choices on the stack */
        hp->n_expert_used = hp_int(L, "expert_used_count", -1, 1, hp->n_expert > 64 ? 64 : hp->n_expert);
        hp->n_ff_exp = hp->n_ff;
        hp->n_ff_shexp = hp_int(L, "expert_shared_feed_forward_length", 0, 0, big);
    }
    load_mamba2_hparams(L);
    if (L->status != EDDY_OK) return;

    /* (n_layer) attention or not, from the per-layer KV head counts */
    bool attention[4096];
    const gguf_value *kv = hp_array(L, "attention.head_count_kv");
    if (!kv || !gguf_type_is_int(kv->arr.elem_type) || (int64_t)kv->arr.n < hp->n_layer) {
        loader_fail(L, "%sattention.head_count_kv must be an integer array with one entry per layer (0: Mamba-2)",
                    L->prefix);
        return;
    }
    for (int il = 0; il < hp->n_layer && L->status == EDDY_OK; il++) {
        const int64_t v = hp_layer_int(L, "attention.head_count_kv", il, hp->n_head);
        attention[il] = v != 0;
        if (v > 0 && hp->n_head % v != 0)
            loader_fail(L, "%sattention.head_count_kv[%d] = %" PRId64 " does not divide head_count %" PRId64, L->prefix,
                        il, v, hp->n_head);
        hp_same_in_layers(L, &hp->n_head_kv, v, "attention.head_count_kv", il);
    }
    if (L->status != EDDY_OK) return;
    hp->head_dim_k = hp_int(L, "attention.key_length", hp->n_embd / hp->n_head, 1, 4096);
    hp->head_dim_v = hp_int(L, "attention.value_length", hp->head_dim_k, 1, 4096);
    char key[128];
    snprintf(key, sizeof key, "%srope.scaling.finetuned", L->prefix);
    const gguf_value *rope = gguf_get(m->file, key);
    const bool use_rope = !rope || rope->type != GGUF_TYPE_BOOL || rope->b; /* llama.cpp's default: true */
    hp->n_rot = use_rope ? hp_int(L, "rope.dimension_count", hp->head_dim_k, 2, hp->head_dim_k) : 0;
    hp->rope_base = (float)hp_float(L, "rope.freq_base", 10000.0, 1.0, 1e12);
    hp->rope_style = ROPE_NORM; /* the converter permutes q/k rows as for llama */
    if (hp->n_rot % 2) loader_fail(L, "%srope.dimension_count %" PRId64 " is odd", L->prefix, hp->n_rot);
    load_embeddings(L);

    for (int il = 0; il < hp->n_layer && L->status == EDDY_OK; il++) {
        model_layer *l = &m->layers[il];
        bind_f32(L, &l->attn_norm, true, 1, (int64_t[]){hp->n_embd}, "blk.%d.attn_norm.weight", il);
        if (attention[il]) bind_attention(L, l, il, false);
        else bind_mamba2(L, l, il);
        if (hp->n_expert > 0) bind_ffn_moe(L, l, il, "blk.%d.ffn_norm.weight");
        else bind_ffn_dense(L, l, il, "blk.%d.ffn_norm.weight");
    }
}
