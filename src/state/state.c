/*
 * state.c — allocation and reset of a sequence's state.
 */
#include "state.h"

#include <string.h>

#include "base/alloc.h"

eddy_status seq_state_new(seq_state **out, const state_layer_shape *shapes, int64_t n_layer, int64_t n_ctx,
                          eddy_error *err) {
    *out = NULL;
    /* total floats, overflow-checked */
    size_t floats = 0;
    for (int64_t il = 0; il < n_layer; il++) {
        size_t kv, layer;
        bool ok = eddy_mul_size((size_t)n_ctx, (size_t)(shapes[il].kv_k + shapes[il].kv_v), &kv);
        layer = kv + (size_t)shapes[il].rec_floats;
        ok = ok && layer >= kv && floats + layer >= floats;
        if (!ok)
            return eddy_error_set(err, EDDY_ERR_NOMEM, "sequence state for a context of %lld tokens is too large",
                                  (long long)n_ctx);
        floats += layer;
    }
    size_t bytes;
    if (!eddy_mul_size(floats, sizeof(float), &bytes))
        return eddy_error_set(err, EDDY_ERR_NOMEM, "sequence state is too large");
    seq_state *s = eddy_calloc(1, sizeof *s);
    if (!s) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    s->n_layer = n_layer;
    s->n_ctx = n_ctx;
    s->k = eddy_calloc((size_t)n_layer, sizeof *s->k);
    s->v = eddy_calloc((size_t)n_layer, sizeof *s->v);
    s->rec = eddy_calloc((size_t)n_layer, sizeof *s->rec);
    s->shape = eddy_calloc((size_t)n_layer, sizeof *s->shape);
    s->mem = eddy_malloc_aligned(bytes, 64);
    if (!s->k || !s->v || !s->rec || !s->shape || !s->mem) {
        seq_state_free(s);
        return eddy_error_set(err, EDDY_ERR_NOMEM, "cannot allocate %.1f MiB of sequence state",
                              (double)bytes / (1 << 20));
    }
    s->mem_bytes = bytes;
    memcpy(s->shape, shapes, (size_t)n_layer * sizeof *shapes);
    float *p = s->mem;
    for (int64_t il = 0; il < n_layer; il++) {
        if (shapes[il].kv_k) s->k[il] = p, p += n_ctx * shapes[il].kv_k;
        if (shapes[il].kv_v) s->v[il] = p, p += n_ctx * shapes[il].kv_v;
        if (shapes[il].rec_floats) s->rec[il] = p, p += shapes[il].rec_floats;
    }
    seq_state_reset(s);
    *out = s;
    return EDDY_OK;
}

void seq_state_free(seq_state *s) {
    if (!s) return;
    eddy_free(s->k);
    eddy_free(s->v);
    eddy_free(s->rec);
    eddy_free(s->shape);
    eddy_free_aligned(s->mem);
    eddy_free(s);
}

void seq_state_reset(seq_state *s) {
    s->n_pos = 0;
    for (int64_t il = 0; il < s->n_layer; il++)
        if (s->rec[il]) memset(s->rec[il], 0, (size_t)s->shape[il].rec_floats * sizeof(float));
}
