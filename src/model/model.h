/*
 * model.h — a loaded model: architecture, hyperparameters, and weight views.
 *
 * Owns: the internal form of eddy_model (include/eddy.h): which architecture a GGUF
 * file holds, its hyperparameters read and checked from the metadata, and a view of
 * every weight tensor bound by name with its shape checked. Weights stay in the
 * mapped file; a `tensor` is a pointer and a shape, never a copy.
 * Does not own: the forward pass (forward.c and the block_*.c files), sequence state
 * (src/state), or the compute context (ctx.h).
 *
 * Every architecture is described by the same structure: a stack of layers, each a
 * mixer (attention, Gated DeltaNet) followed by a feed-forward part (dense SwiGLU,
 * mixture of experts), with one forward pass for all of them.
 */
#ifndef EDDY_MODEL_H
#define EDDY_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eddy.h"
#include "gguf/gguf.h"
#include "ops/rope.h"
#include "ssm/gdn.h"
#include "state/state.h"

typedef enum {
    ARCH_LLAMA = 0,
    ARCH_QWEN35,
    ARCH_QWEN35MOE,
    ARCH_QWEN3NEXT,
    ARCH_MAMBA2,
    ARCH_NEMOTRON_H,
    ARCH_GRANITEHYBRID,
    ARCH_COUNT,
} model_arch;

/* A weight tensor inside the mapped file. ne[0] is the row (input) length; rows
 * are ne[1] (x ne[2] x ne[3]). A view of one expert of a 3-D expert tensor is a
 * tensor too. */
typedef struct {
    const char *name;     /* NULL when an optional tensor is absent */
    uint32_t type;        /* qtype id */
    int64_t ne[4];
    size_t row_bytes;     /* bytes of one ne[0] row */
    const uint8_t *data;
    const uint8_t *packed; /* NULL, or the rows repacked at load for the matrix kernels
                            * (ops/matmul.h matmul_pack; only tensors linear() reads) */
} tensor;

typedef enum { MIXER_ATTENTION = 0, MIXER_GDN, MIXER_MAMBA2, MIXER_NONE } mixer_kind;
/* FFN_DENSE: down(silu(gate x) * up x); FFN_RELU2: down(relu(up x)^2) */
typedef enum { FFN_DENSE = 0, FFN_MOE, FFN_RELU2, FFN_NONE } ffn_kind;


typedef struct {
    mixer_kind mixer;
    ffn_kind ffn;
    tensor attn_norm; /* (n_embd) f32, before the mixer */

    /* attention: q (n_embd -> n_head*head_dim_k, or twice that with a per-head output
     * gate after each head's q); k, v (n_embd -> n_head_kv*head_dim); o (n_head*head_dim_v
     * -> n_embd); q_norm/k_norm (head_dim_k) f32, optional */
    tensor wq, wk, wv, wo, q_norm, k_norm;

    /* Gated DeltaNet: qkv (n_embd -> conv_dim = 2*n_k*d_k + n_v*d_v); z (n_embd -> n_v*d_v);
     * beta, alpha (n_embd -> n_v), or ba (n_embd -> 2*n_v, interleaved per key head);
     * conv (conv_dim rows of d_conv taps) f32; a, dt_bias (n_v) f32; norm (d_v) f32;
     * out (n_v*d_v -> n_embd) */
    tensor ssm_qkv, ssm_z, ssm_beta, ssm_alpha, ssm_ba, ssm_conv, ssm_a, ssm_dt_bias, ssm_norm, ssm_out;

    /* Mamba-2: in (n_embd -> z | xBC | dt = 2*d_inner + 2*n_group*d_state + n_head);
     * conv (conv_dim = d_inner + 2*n_group*d_state rows of d_conv taps) f32 and its
     * bias (conv_dim) f32; a, d, dt_bias (n_head) f32; norm (d_inner) f32, grouped;
     * out (d_inner -> n_embd). Shares ssm_conv, ssm_a, ssm_dt_bias, ssm_norm, ssm_out. */
    tensor ssm_in, ssm_conv_bias, ssm_d;
    float *conv_w; /* ssm_conv repacked tap-major (d_conv, conv_dim) for src/ssm's conv1d; owned */

    tensor ffn_norm; /* (n_embd) f32, before the feed-forward part */
    /* dense: gate, up (n_embd -> n_ff); down (n_ff -> n_embd); squared ReLU: up, down */
    tensor ffn_gate, ffn_up, ffn_down;
    /* experts: router (n_embd -> n_expert); gate/up (n_embd -> n_ff_exp, x n_expert);
     * down (n_ff_exp -> n_embd, x n_expert); shared expert gate/up/down and its scalar
     * gate (n_embd -> 1), optional */
    tensor moe_router, moe_gate, moe_up, moe_down;
    tensor shexp_gate, shexp_up, shexp_down, shexp_router;
} model_layer;

typedef struct {
    int64_t n_vocab;
    int64_t n_embd;
    int64_t n_layer;
    int64_t n_ctx_train;
    int64_t n_ff;
    int64_t n_head, n_head_kv;
    int64_t head_dim_k, head_dim_v;
    int64_t n_rot;         /* rotary dimensions per head (<= head_dim_k); 0: no rotary embedding */
    float rope_base;
    rope_style rope_style;
    float rms_eps;
    /* Granite's multipliers: embeddings times embd_scale; each block's output times
     * residual_scale before the residual add; attention scores times attn_scale
     * (0: 1/sqrt(head_dim_k)); logits divided by logit_scale. Others: 1, 1, 0, 1. */
    float embd_scale, residual_scale, attn_scale, logit_scale;
    bool attn_gated;       /* q projection carries a per-head output gate */

    /* Gated DeltaNet */
    int64_t ssm_d_conv;    /* conv taps */
    int64_t ssm_n_k, ssm_n_v; /* key heads, value heads */
    int64_t ssm_d_k, ssm_d_v; /* key head dim, value head dim */
    gdn_head_map ssm_head_map; /* which key head a value head reads (src/ssm/gdn.h) */

    /* Mamba-2 (ssm_d_conv shared) */
    int64_t ssm_d_inner, ssm_d_state, ssm_n_group, ssm_n_head; /* head size d_inner / n_head */

    /* mixture of experts */
    int64_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
} model_hparams;

struct eddy_model {
    gguf_file *file;
    model_arch arch;
    const char *arch_name;
    model_hparams hp;
    tensor tok_embd;    /* (n_vocab rows of n_embd) */
    tensor output_norm; /* (n_embd) f32 */
    tensor output;      /* (n_vocab rows of n_embd); tok_embd when tied */
    model_layer *layers; /* (n_layer, and the MTP layer after them when mtp is set) */
    /* The multi-token-prediction (MTP, "nextn") layer some Qwen3.5 files carry as layer
     * n_layer: from the token x_q and the main model's last hidden state h_{q-1} (after
     * output_norm) it predicts the token after next,
     *   y = layer(eh_proj([enorm(embed(x_q)); hnorm(h_{q-1})]))   (a gated-attention layer)
     *   logits = mtp_head(head_norm(y))
     * (eh_proj: 2 n_embd -> n_embd; embed, head_norm and mtp_head default to tok_embd,
     * output_norm and output). NULL when the file has none (arch_qwen.c, block_mtp.c). */
    model_layer *mtp;
    tensor mtp_eh_proj, mtp_enorm, mtp_hnorm, mtp_head_norm, mtp_embd, mtp_head;
    uint8_t *packed;     /* one allocation holding every tensor's packed rows, or NULL */
    size_t packed_bytes;
    /* the file's tokenizer, of exactly n_vocab tokens; NULL when the file has none */
    eddy_vocab *vocab;
};

typedef struct eddy_model model;

/* Opens path, identifies the architecture, reads the hyperparameters and binds every
 * tensor, checking each shape and type, then loads the file's vocabulary (when it has
 * a tokenizer), which must have one token per row of token_embd. Errors name the key
 * or tensor, with the expected and found values. */
eddy_status model_load(model **out, const char *path, eddy_error *err);
/* The same from a file already opened; the model owns f from then on (it is closed
 * on failure too). */
eddy_status model_load_gguf(model **out, gguf_file *f, eddy_error *err);
void model_free(model *m);

/* Reads one row of a tensor as float32 (n = ne[0] values): embedding look-up. */
void tensor_row_f32(const tensor *t, int64_t row, float *dst);

/* The 2-D view of expert e of a 3-D tensor (ne[0] x ne[1] x n_expert). */
tensor tensor_expert(const tensor *t, int64_t e);

/* Conv channels of a Gated DeltaNet layer (q | k | v). */
int64_t model_gdn_conv_dim(const model_hparams *hp);

/* Mamba-2: conv channels (x, B, C) and in-projection width. */
int64_t mamba2_conv_dim(const model_hparams *hp);
int64_t mamba2_in_dim(const model_hparams *hp);

/* What layer il keeps per sequence (footprint.c): key/value row sizes for attention;
 * for Gated DeltaNet and Mamba-2 the conv window (d_conv - 1, conv_dim) and the
 * recurrent matrices (GDN: (n_v, d_k, d_v); Mamba-2: (n_head, d_state, d_head)), and
 * what a verified row keeps to be replayed (GDN: conv_dim + 2 n_v; Mamba-2: conv_dim +
 * n_head); zeros for a layer with no mixer. il == n_layer is the MTP layer: its keys and
 * values, and as its "conv window" the one row it reads next, h of the last position. */
state_layer_shape model_state_shape(const model *m, int64_t il);

#endif
