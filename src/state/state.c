/*
 * state.c — allocation and reset of a sequence's state, and the conversion of
 * key/value rows into its cache.
 */
#include "state.h"

#include <string.h>

#include "base/alloc.h"
#include "quant/fp16.h"

static size_t elem_bytes(qtype t) { return t == QTYPE_F16 ? sizeof(uint16_t) : sizeof(float); }

/* Each region starts on a cache line. */
static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Bytes of an (n_ctx, n) cache or a block of n floats, rounded to a cache line;
 * false on overflow. */
static bool region_bytes(int64_t rows, int64_t n, size_t elem, size_t *out) {
    size_t b;
    if (!eddy_mul_size((size_t)rows, (size_t)n, &b) || !eddy_mul_size(b, elem, &b) || b > SIZE_MAX - 63) return false;
    *out = round64(b);
    return true;
}

eddy_status seq_state_new(seq_state **out, const state_layer_shape *shapes, int64_t n_layer, int64_t n_ctx,
                          qtype type_k, qtype type_v, eddy_error *err) {
    *out = NULL;
    EDDY_ASSERT((type_k == QTYPE_F32 || type_k == QTYPE_F16) && (type_v == QTYPE_F32 || type_v == QTYPE_F16));
    /* total bytes, overflow-checked */
    size_t bytes = 0;
    for (int64_t il = 0; il < n_layer; il++) {
        size_t k = 0, v = 0, r = 0;
        bool ok = region_bytes(n_ctx, shapes[il].kv_k, elem_bytes(type_k), &k) &&
                  region_bytes(n_ctx, shapes[il].kv_v, elem_bytes(type_v), &v) &&
                  region_bytes(1, shapes[il].rec_floats, sizeof(float), &r);
        const size_t layer = k + v;
        ok = ok && layer >= k && layer + r >= layer && bytes + layer + r >= bytes;
        if (!ok)
            return eddy_error_set(err, EDDY_ERR_NOMEM, "sequence state for a context of %lld tokens is too large",
                                  (long long)n_ctx);
        bytes += layer + r;
    }
    seq_state *s = eddy_calloc(1, sizeof *s);
    if (!s) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    s->n_layer = n_layer;
    s->n_ctx = n_ctx;
    s->type_k = type_k;
    s->type_v = type_v;
    s->k = eddy_calloc((size_t)n_layer, sizeof *s->k);
    s->v = eddy_calloc((size_t)n_layer, sizeof *s->v);
    s->rec = eddy_calloc((size_t)n_layer, sizeof *s->rec);
    s->shape = eddy_calloc((size_t)n_layer, sizeof *s->shape);
    s->mem = eddy_malloc_aligned(bytes ? bytes : 64, 64);
    if (!s->k || !s->v || !s->rec || !s->shape || !s->mem) {
        seq_state_free(s);
        return eddy_error_set(err, EDDY_ERR_NOMEM, "cannot allocate %.1f MiB of sequence state",
                              (double)bytes / (1 << 20));
    }
    s->mem_bytes = bytes;
    memcpy(s->shape, shapes, (size_t)n_layer * sizeof *shapes);
    char *p = s->mem;
    for (int64_t il = 0; il < n_layer; il++) {
        size_t k = 0, v = 0, r = 0; /* sizes checked above */
        region_bytes(n_ctx, shapes[il].kv_k, elem_bytes(type_k), &k);
        region_bytes(n_ctx, shapes[il].kv_v, elem_bytes(type_v), &v);
        region_bytes(1, shapes[il].rec_floats, sizeof(float), &r);
        if (k) s->k[il] = p, p += k;
        if (v) s->v[il] = p, p += v;
        if (r) s->rec[il] = (float *)p, p += r;
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

/* dst[i] = src[i] in type t (f16: round to nearest, ties to even). */
static void store_row(void *dst, qtype t, const float *src, int64_t n) {
    if (t == QTYPE_F16) {
        uint16_t *h = dst;
        for (int64_t i = 0; i < n; i++) h[i] = f32_to_fp16(src[i]);
    } else {
        memcpy(dst, src, (size_t)n * sizeof(float));
    }
}

void seq_state_store_kv(seq_state *s, int64_t il, int64_t pos, const float *k, const float *v) {
    const state_layer_shape *sh = &s->shape[il];
    EDDY_ASSERT(s->k[il] && s->v[il] && pos >= 0 && pos < s->n_ctx);
    store_row((char *)s->k[il] + (size_t)(pos * sh->kv_k) * elem_bytes(s->type_k), s->type_k, k, sh->kv_k);
    store_row((char *)s->v[il] + (size_t)(pos * sh->kv_v) * elem_bytes(s->type_v), s->type_v, v, sh->kv_v);
}
