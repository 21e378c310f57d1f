/*
 * arch_qwen.c — the Gated DeltaNet hybrids: qwen35 (Qwen3.5 dense), qwen35moe
 * (Qwen3.5 MoE) and qwen3next (Qwen3-Next).
 *
 * Layers are Gated DeltaNet mixers except every full_attention_interval-th (or as
 * attention.recurrent_layers says), which is gated attention: the q projection holds
 * q and a per-head output gate, q and k are RMS-normed per head, rotary embeddings
 * turn the first rope.dimension_count dims of each head in halves (NEOX pairing; the
 * multi-section rope of qwen35 reduces to it for text). The feed-forward part is a
 * SwiGLU (qwen35) or a mixture of experts with a gated shared expert.
 * GGUF facts: norm weights already include the +1 of Qwen's zero-centred RMSNorm
 * (the converter adds it), except the DeltaNet output norm; ssm_a holds -exp(A_log);
 * value heads are tiled over key heads in qwen35* files and grouped in qwen3next.
 * A multi-token-prediction layer (nextn_predict_layers, blk.<n_layer>.nextn.*) is a
 * gated-attention layer of the same shapes with its own input projection (model.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "model/model_loader.h"

/* Layer il is attention (true) or Gated DeltaNet (false). */
static bool layer_is_attention(loader *L, int il) {
    const gguf_value *rec = hp_array(L, "attention.recurrent_layers");
    if (rec) {
        if (rec->arr.elem_type != GGUF_TYPE_BOOL && !gguf_type_is_int(rec->arr.elem_type))
            return loader_fail(L, "%sattention.recurrent_layers holds %s, expected bools", L->prefix,
                               gguf_type_name(rec->arr.elem_type));
        if ((int64_t)rec->arr.n < L->m->hp.n_layer)
            return loader_fail(L, "%sattention.recurrent_layers has %" PRIu64 " entries for %" PRId64 " layers",
                               L->prefix, rec->arr.n, L->m->hp.n_layer);
        return gguf_arr_int(rec, (uint64_t)il) == 0;
    }
    int64_t interval = hp_int(L, "full_attention_interval", 4, 1, 4096);
    return (il + 1) % interval == 0;
}

static void bind_gdn(loader *L, model_layer *l, int il) {
    const model_hparams *hp = &L->m->hp;
    const int64_t E = hp->n_embd, V = hp->ssm_n_v * hp->ssm_d_v, conv_dim = model_gdn_conv_dim(hp);
    l->mixer = MIXER_GDN;
    bind(L, &l->ssm_qkv, true, 2, (int64_t[]){E, conv_dim}, "blk.%d.attn_qkv.weight", il);
    bind(L, &l->ssm_z, true, 2, (int64_t[]){E, V}, "blk.%d.attn_gate.weight", il);
    if (L->m->arch == ARCH_QWEN3NEXT) {
        bind(L, &l->ssm_ba, true, 2, (int64_t[]){E, 2 * hp->ssm_n_v}, "blk.%d.ssm_ba.weight", il);
    } else {
        bind(L, &l->ssm_beta, true, 2, (int64_t[]){E, hp->ssm_n_v}, "blk.%d.ssm_beta.weight", il);
        bind(L, &l->ssm_alpha, true, 2, (int64_t[]){E, hp->ssm_n_v}, "blk.%d.ssm_alpha.weight", il);
    }
    bind_f32(L, &l->ssm_conv, true, 2, (int64_t[]){hp->ssm_d_conv, conv_dim}, "blk.%d.ssm_conv1d.weight", il);
    bind_f32(L, &l->ssm_a, true, 1, (int64_t[]){hp->ssm_n_v}, "blk.%d.ssm_a", il);
    bind_f32(L, &l->ssm_dt_bias, true, 1, (int64_t[]){hp->ssm_n_v}, "blk.%d.ssm_dt.bias", il);
    bind_f32(L, &l->ssm_norm, true, 1, (int64_t[]){hp->ssm_d_v}, "blk.%d.ssm_norm.weight", il);
    bind(L, &l->ssm_out, true, 2, (int64_t[]){V, E}, "blk.%d.ssm_out.weight", il);
}

static void bind_mtp(loader *L, bool moe);

void load_qwen(loader *L) {
    model *m = L->m;
    model_hparams *hp = &m->hp;
    const bool moe = m->arch != ARCH_QWEN35;
    const int64_t big = (int64_t)1 << 24;
    if (moe) {
        hp->n_expert = hp_int(L, "expert_count", -1, 1, 4096);
        /* at most 64 experts per token: the router keeps its choices on the stack */
        hp->n_expert_used = hp_int(L, "expert_used_count", -1, 1, hp->n_expert > 64 ? 64 : (hp->n_expert > 0 ? hp->n_expert : 1));
        hp->n_ff_exp = hp_int(L, "expert_feed_forward_length", -1, 1, big);
        hp->n_ff_shexp = hp_int(L, "expert_shared_feed_forward_length", 0, 0, big);
    } else {
        hp->n_ff = hp_int(L, "feed_forward_length", -1, 1, big);
    }
    hp->ssm_d_conv = hp_int(L, "ssm.conv_kernel", -1, 2, 8);
    hp->ssm_d_k = hp_int(L, "ssm.state_size", -1, 1, 1024);
    hp->ssm_n_k = hp_int(L, "ssm.group_count", -1, 1, 4096);
    hp->ssm_n_v = hp_int(L, "ssm.time_step_rank", -1, 1, 4096);
    int64_t inner = hp_int(L, "ssm.inner_size", -1, 1, big);
    if (L->status != EDDY_OK) return;
    if (hp->ssm_n_v % hp->ssm_n_k != 0 || inner % hp->ssm_n_v != 0) {
        loader_fail(L, "%sssm: %" PRId64 " value heads, %" PRId64 " key heads and inner size %" PRId64
                    " do not divide evenly", L->prefix, hp->ssm_n_v, hp->ssm_n_k, inner);
        return;
    }
    hp->ssm_d_v = inner / hp->ssm_n_v;
    hp->ssm_head_map = m->arch == ARCH_QWEN3NEXT ? GDN_KHEAD_DIV : GDN_KHEAD_MOD;
    if (hp->ssm_d_k > GDN_MAX_DIM || hp->ssm_d_v > GDN_MAX_DIM || hp->ssm_n_v / hp->ssm_n_k > GDN_MAX_GROUP) {
        loader_fail(L, "%sssm: head sizes %" PRId64 "/%" PRId64 " or %" PRId64 " value heads per key head exceed "
                    "eddy's limits (%d, %d)", L->prefix, hp->ssm_d_k, hp->ssm_d_v, hp->ssm_n_v / hp->ssm_n_k,
                    GDN_MAX_DIM, GDN_MAX_GROUP);
        return;
    }
    hp->attn_gated = true;
    hp->rope_style = ROPE_NEOX;
    load_common(L);
    if (L->status == EDDY_OK && hp->head_dim_k != hp->head_dim_v)
        loader_fail(L, "gated attention needs equal key and value head sizes, file has %sattention.key_length %" PRId64
                    " and value_length %" PRId64, L->prefix, hp->head_dim_k, hp->head_dim_v);
    for (int il = 0; il < hp->n_layer && L->status == EDDY_OK; il++) {
        model_layer *l = &m->layers[il];
        bind_f32(L, &l->attn_norm, true, 1, (int64_t[]){hp->n_embd}, "blk.%d.attn_norm.weight", il);
        bool attention = layer_is_attention(L, il);
        if (L->status != EDDY_OK) break;
        if (attention) bind_attention(L, l, il, true);
        else bind_gdn(L, l, il);
        if (moe) bind_ffn_moe(L, l, il, "blk.%d.post_attention_norm.weight");
        else bind_ffn_dense(L, l, il, "blk.%d.post_attention_norm.weight");
    }
    if (L->status == EDDY_OK) bind_mtp(L, moe);
}

/* The MTP layer after the main ones, when the file counts one and carries its
 * tensors; a file that counts one but holds none (converted with the layers dropped)
 * runs without it. */
static void bind_mtp(loader *L, bool moe) {
    model *m = L->m;
    const model_hparams *hp = &m->hp;
    const int il = (int)hp->n_layer, E = (int)hp->n_embd;
    char name[64];
    snprintf(name, sizeof name, "blk.%d.nextn.eh_proj.weight", il);
    if (load_n_mtp_file(L) == 0 || gguf_find_tensor(m->file, name) < 0) return;
    model_layer *l = &m->layers[il];
    bind_f32(L, &l->attn_norm, true, 1, (int64_t[]){E}, "blk.%d.attn_norm.weight", il);
    bind_attention(L, l, il, true);
    if (moe) bind_ffn_moe(L, l, il, "blk.%d.post_attention_norm.weight");
    else bind_ffn_dense(L, l, il, "blk.%d.post_attention_norm.weight");
    bind(L, &m->mtp_eh_proj, true, 2, (int64_t[]){2 * E, E}, "blk.%d.nextn.eh_proj.weight", il);
    bind_f32(L, &m->mtp_enorm, true, 1, (int64_t[]){E}, "blk.%d.nextn.enorm.weight", il);
    bind_f32(L, &m->mtp_hnorm, true, 1, (int64_t[]){E}, "blk.%d.nextn.hnorm.weight", il);
    bind_f32(L, &m->mtp_head_norm, false, 1, (int64_t[]){E}, "blk.%d.nextn.shared_head_norm.weight", il);
    bind(L, &m->mtp_embd, false, 2, (int64_t[]){E, hp->n_vocab}, "blk.%d.nextn.embed_tokens.weight", il);
    bind(L, &m->mtp_head, false, 2, (int64_t[]){E, hp->n_vocab}, "blk.%d.nextn.shared_head_head.weight", il);
    if (L->status != EDDY_OK) return;
    if (!m->mtp_head_norm.name) m->mtp_head_norm = m->output_norm;
    if (!m->mtp_embd.name) m->mtp_embd = m->tok_embd;
    if (!m->mtp_head.name) m->mtp_head = m->output;
    m->mtp = l;
}
