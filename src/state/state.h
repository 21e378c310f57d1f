/*
 * state.h — everything a sequence carries from one call to the next.
 *
 * Owns: the memory of a sequence's state and its position. Per layer:
 *   attention layers: key rows K (n_ctx, kv_k) in type_k and value rows
 *                     V (n_ctx, kv_v) in type_v (f32, or f16 rounded to nearest
 *                     even as llama.cpp stores its F16 cache); rows [0, n_pos) are valid
 *   recurrent layers: a fixed-size block of rec_floats f32 (conv window and
 *                     recurrent matrices; their layout belongs to the layer's kernels)
 * One allocation per sequence. The model reads and writes a sequence's state only
 * through this struct, so snapshots, rollback and saving can be added here once for
 * every architecture.
 */
#ifndef EDDY_STATE_H
#define EDDY_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "quant/qtypes.h"

typedef struct {
    int64_t kv_k, kv_v; /* elements per key / value row; 0 for a layer without attention */
    int64_t rec_floats; /* floats of recurrent state; 0 for a layer without */
} state_layer_shape;

typedef struct {
    int64_t n_layer;
    int64_t n_ctx; /* rows of each key/value cache */
    int64_t n_pos; /* tokens consumed */
    qtype type_k, type_v; /* key / value elements: QTYPE_F32 or QTYPE_F16 */
    void **k, **v;  /* (n_layer) each (n_ctx, kv_k / kv_v) in type_k / type_v, or NULL */
    float **rec;    /* (n_layer) each (rec_floats) or NULL */
    state_layer_shape *shape; /* (n_layer) */
    void *mem;
    size_t mem_bytes;
} seq_state;

/* shapes: (n_layer); type_k, type_v: QTYPE_F32 or QTYPE_F16. Fails with NOMEM
 * naming the bytes needed. */
eddy_status seq_state_new(seq_state **out, const state_layer_shape *shapes, int64_t n_layer, int64_t n_ctx,
                          qtype type_k, qtype type_v, eddy_error *err);
void seq_state_free(seq_state *s);

/* Back to an empty sequence: n_pos = 0, recurrent state zeroed. */
void seq_state_reset(seq_state *s);

/* Stores the key and value rows of position pos of layer il (k: kv_k floats,
 * v: kv_v floats), converted to the cache's types. */
void seq_state_store_kv(seq_state *s, int64_t il, int64_t pos, const float *k, const float *v);

#endif
