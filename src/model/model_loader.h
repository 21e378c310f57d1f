/*
 * model_loader.h — the pieces each architecture's loader (arch_<name>.c) uses to
 * read hyperparameters and bind tensors, with the first error kept.
 */
#ifndef EDDY_MODEL_LOADER_H
#define EDDY_MODEL_LOADER_H

#include "model/model.h"

typedef struct {
    model *m;
    eddy_error *err;
    eddy_status status; /* first error; EDDY_OK while none */
    char prefix[64];    /* "<arch>." for hyperparameter keys */
} loader;

bool loader_fail(loader *L, const char *fmt, ...) EDDY_PRINTF(2, 3);
bool loader_nomem(loader *L, const char *what);

/* "<arch>.<key>" as an integer in [lo, hi]; def < 0 makes it required. */
int64_t hp_int(loader *L, const char *key, int64_t def, int64_t lo, int64_t hi);
/* "<arch>.<key>" as a float in [lo, hi]; def when absent. */
double hp_float(loader *L, const char *key, double def, double lo, double hi);
/* "<arch>.<key>" for layer il in 0..hi, written per layer (an integer array with an
 * entry per layer) or once (a scalar). */
int64_t hp_layer_int(loader *L, const char *key, int il, int64_t hi);
/* A per-layer size that must be the same in every layer that has one (nonzero):
 * keeps the first in *kept, fails naming key[il] on a different one. */
void hp_same_in_layers(loader *L, int64_t *kept, int64_t v, const char *key, int il);
/* "<arch>.<key>" as an array (any element type) or NULL. */
const gguf_value *hp_array(loader *L, const char *key);

/* Binds the tensor named by fmt (with %d for the layer), checking its shape is
 * exactly ne[0..n_dims) and its type one eddy computes with. An absent optional
 * tensor leaves t->name NULL. bind_f32 also requires type F32 (vectors the forward
 * pass reads directly: norms, gates' scalars, conv taps). */
bool bind(loader *L, tensor *t, bool required, int n_dims, const int64_t *ne, const char *fmt, int layer);
bool bind_f32(loader *L, tensor *t, bool required, int n_dims, const int64_t *ne, const char *fmt, int layer);

/* The attention hyperparameters shared by every architecture here (head counts,
 * head sizes, rope, norm epsilon), the vocabulary size from token_embd, and the
 * token embedding, output norm and output (tied when absent) tensors. */
void load_common(loader *L);
/* The embeddings part of load_common alone (architectures without attention). */
void load_embeddings(loader *L);

/* Binds an attention mixer's tensors for layer il (q optionally with its gate). */
void bind_attention(loader *L, model_layer *l, int il, bool qk_norm);
/* Binds a dense SwiGLU feed-forward part; norm_name is the pre-FFN norm's name. */
void bind_ffn_dense(loader *L, model_layer *l, int il, const char *norm_name);
/* Binds a mixture of experts (n_expert of n_ff_exp) and, when n_ff_shexp > 0, its
 * shared expert with an optional scalar gate. */
void bind_ffn_moe(loader *L, model_layer *l, int il, const char *norm_name);

void load_llama(loader *L);
void load_qwen(loader *L); /* qwen35, qwen35moe, qwen3next */
/* The file's count of multi-token-prediction layers after the main ones (nextn_predict_layers). */
int64_t load_n_mtp(loader *L);   /* while hp.n_layer is still block_count */
int64_t load_n_mtp_file(loader *L); /* after: the same key, read again */
void load_mamba2(loader *L);
void load_nemotron_h(loader *L);
void load_granitehybrid(loader *L);

/* The Mamba-2 hyperparameters (ssm.*) and the tensors of one Mamba-2 mixer. */
void load_mamba2_hparams(loader *L);
void bind_mamba2(loader *L, model_layer *l, int il);

#endif
