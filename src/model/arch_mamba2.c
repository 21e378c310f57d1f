/*
 * arch_mamba2.c — Mamba-2 (GGUF architecture "mamba2"): every layer is RMSNorm and
 * a Mamba-2 mixer with a residual; no feed-forward part. The hyperparameter reader
 * and the mixer binding serve the hybrids built on Mamba-2 too (arch_nemotron_h.c).
 * GGUF facts: ssm_a holds -exp(A_log) and ssm_a / ssm_d are stored as (1, n_head);
 * ssm_in projects to z (d_inner), xBC (d_inner + 2 * n_group * d_state) and dt
 * (n_head), in that order; the output norm is grouped (n_group groups of
 * d_inner / n_group) and applied after the gate.
 */
#include <inttypes.h>

#include "model/model_loader.h"

void load_mamba2_hparams(loader *L) {
    model_hparams *hp = &L->m->hp;
    const int64_t big = (int64_t)1 << 24;
    hp->ssm_d_conv = hp_int(L, "ssm.conv_kernel", -1, 2, 8);
    hp->ssm_d_inner = hp_int(L, "ssm.inner_size", -1, 1, big);
    hp->ssm_d_state = hp_int(L, "ssm.state_size", -1, 1, 1024);
    hp->ssm_n_head = hp_int(L, "ssm.time_step_rank", -1, 1, 4096);
    hp->ssm_n_group = hp_int(L, "ssm.group_count", 1, 1, 4096);
    if (L->status != EDDY_OK) return;
    if (hp->ssm_d_inner % hp->ssm_n_head != 0 || hp->ssm_n_head % hp->ssm_n_group != 0 ||
        hp->ssm_d_inner % hp->ssm_n_group != 0)
        loader_fail(L, "%sssm: inner size %" PRId64 ", %" PRId64 " heads and %" PRId64 " groups do not divide evenly",
                    L->prefix, hp->ssm_d_inner, hp->ssm_n_head, hp->ssm_n_group);
}

void bind_mamba2(loader *L, model_layer *l, int il) {
    const model_hparams *hp = &L->m->hp;
    const int64_t E = hp->n_embd, DI = hp->ssm_d_inner, H = hp->ssm_n_head, CD = mamba2_conv_dim(hp);
    l->mixer = MIXER_MAMBA2;
    bind(L, &l->ssm_in, true, 2, (int64_t[]){E, mamba2_in_dim(hp)}, "blk.%d.ssm_in.weight", il);
    bind_f32(L, &l->ssm_conv, true, 2, (int64_t[]){hp->ssm_d_conv, CD}, "blk.%d.ssm_conv1d.weight", il);
    bind_f32(L, &l->ssm_conv_bias, true, 1, (int64_t[]){CD}, "blk.%d.ssm_conv1d.bias", il);
    bind_f32(L, &l->ssm_dt_bias, true, 1, (int64_t[]){H}, "blk.%d.ssm_dt.bias", il);
    bind_f32(L, &l->ssm_a, true, 2, (int64_t[]){1, H}, "blk.%d.ssm_a", il);
    bind_f32(L, &l->ssm_d, true, 2, (int64_t[]){1, H}, "blk.%d.ssm_d", il);
    bind_f32(L, &l->ssm_norm, true, 2, (int64_t[]){DI / hp->ssm_n_group, hp->ssm_n_group}, "blk.%d.ssm_norm.weight",
             il);
    bind(L, &l->ssm_out, true, 2, (int64_t[]){DI, E}, "blk.%d.ssm_out.weight", il);
}

void load_mamba2(loader *L) {
    model_hparams *hp = &L->m->hp;
    hp->n_embd = hp_int(L, "embedding_length", -1, 1, (int64_t)1 << 24);
    hp->n_layer = hp_int(L, "block_count", -1, 1, 4096);
    hp->n_ctx_train = hp_int(L, "context_length", 4096, 1, (int64_t)1 << 32);
    hp->rms_eps = (float)hp_float(L, "attention.layer_norm_rms_epsilon", 1e-5, 0.0, 1.0);
    load_mamba2_hparams(L);
    load_embeddings(L);
    for (int il = 0; il < hp->n_layer && L->status == EDDY_OK; il++) {
        model_layer *l = &L->m->layers[il];
        l->ffn = FFN_NONE;
        bind_f32(L, &l->attn_norm, true, 1, (int64_t[]){hp->n_embd}, "blk.%d.attn_norm.weight", il);
        bind_mamba2(L, l, il);
    }
}
