/*
 * model.h — a loaded model: architecture, hyperparameters, and weight views.
 *
 * Owns: the internal form of eddy_model (include/eddy.h): which architecture a GGUF
 * file holds, its hyperparameters read and checked from the metadata, and a view of
 * every weight tensor bound by name with its shape checked. Weights stay in the
 * mapped file; a `tensor` is a pointer and a shape, never a copy.
 * Does not own: the forward pass (forward_<arch>.c), sequence state (src/state),
 * or the compute context (ctx.h).
 */
#ifndef EDDY_MODEL_H
#define EDDY_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eddy.h"
#include "gguf/gguf.h"
#include "ops/rope.h"

typedef enum {
    ARCH_LLAMA = 0,
    ARCH_COUNT,
} model_arch;

/* A weight tensor inside the mapped file. ne[0] is the row (input) length. */
typedef struct {
    const char *name;     /* NULL when an optional tensor is absent */
    uint32_t type;        /* qtype id */
    int64_t ne[4];
    size_t row_bytes;     /* bytes of one ne[0] row */
    const uint8_t *data;
} tensor;

typedef enum { LAYER_ATTENTION = 0 } layer_kind;

typedef struct {
    layer_kind kind;
    /* attention: norm (n_embd); q (n_embd -> n_head*head_dim); k, v (n_embd ->
     * n_head_kv*head_dim); o (n_head*head_dim -> n_embd) */
    tensor attn_norm, wq, wk, wv, wo;
    /* feed-forward: norm (n_embd); gate, up (n_embd -> n_ff); down (n_ff -> n_embd) */
    tensor ffn_norm, ffn_gate, ffn_up, ffn_down;
} model_layer;

typedef struct {
    int64_t n_vocab;
    int64_t n_embd;
    int64_t n_layer;
    int64_t n_ctx_train;
    int64_t n_ff;
    int64_t n_head, n_head_kv;
    int64_t head_dim_k, head_dim_v;
    int64_t n_rot;         /* rotary dimensions per head (<= head_dim_k) */
    float rope_base;
    rope_style rope_style;
    float rms_eps;
} model_hparams;

struct eddy_model {
    gguf_file *file;
    model_arch arch;
    const char *arch_name;
    model_hparams hp;
    tensor tok_embd;    /* (n_vocab rows of n_embd) */
    tensor output_norm; /* (n_embd) */
    tensor output;      /* (n_vocab rows of n_embd); tok_embd when tied */
    model_layer *layers; /* (n_layer) */
};

typedef struct eddy_model model;

/* Opens path, identifies the architecture, reads the hyperparameters and binds every
 * tensor, checking each shape and type. Errors name the key or tensor, with the
 * expected and found values. */
eddy_status model_load(model **out, const char *path, eddy_error *err);
void model_free(model *m);

/* Reads one row of a tensor as float32 (n = ne[0] values): embedding look-up. */
void tensor_row_f32(const tensor *t, int64_t row, float *dst);

#endif
