/*
 * gguf_write.c — building a GGUF file in memory.
 *
 * Owns: a minimal writer for tests, fuzz seeds and tools: metadata of every
 * scalar type, strings, arrays of scalars and strings, a value copied from a file
 * read by gguf_read.c (nested arrays included), tensors with their data, alignment
 * padding. Does not own: validation of what it writes (gguf_read.c
 * checks the result like any other file).
 *
 * The writer keeps two growing byte buffers, the header (key/values, then tensor
 * infos, which are appended at finish) and the data section, so adding a tensor
 * never moves metadata.
 */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "gguf.h"
#include "quant/qtypes.h"

typedef struct {
    uint8_t *p;
    size_t len, cap;
} bytes;

typedef struct {
    char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t offset;
} pending_tensor;

struct gguf_writer {
    uint32_t version, alignment;
    bool failed;
    uint64_t n_kv;
    bytes kv;   /* encoded key/value pairs */
    bytes data; /* the data section, each tensor padded to the alignment */
    pending_tensor *tensors;
    uint64_t n_tensors, cap_tensors;
};

static void put(gguf_writer *w, bytes *b, const void *src, size_t n) {
    if (w->failed) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        uint8_t *p = eddy_realloc(b->p, cap);
        if (!p) {
            w->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_le(gguf_writer *w, bytes *b, uint64_t v, size_t n) {
    uint8_t tmp[8];
    for (size_t i = 0; i < n; i++) tmp[i] = (uint8_t)(v >> (8 * i));
    put(w, b, tmp, n);
}

static void put_str(gguf_writer *w, bytes *b, const char *s) {
    size_t n = strlen(s);
    put_le(w, b, n, 8);
    put(w, b, s, n);
}

static void put_strn(gguf_writer *w, bytes *b, const char *s, uint64_t n) {
    put_le(w, b, n, 8);
    put(w, b, s, (size_t)n);
}

static void put_key(gguf_writer *w, const char *key, gguf_type t) {
    put_str(w, &w->kv, key);
    put_le(w, &w->kv, (uint64_t)t, 4);
    w->n_kv++;
}

gguf_writer *gguf_writer_new(uint32_t version, uint32_t alignment) {
    gguf_writer *w = eddy_calloc(1, sizeof *w);
    if (!w) return NULL;
    w->version = version;
    w->alignment = alignment ? alignment : GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    eddy_free(w->kv.p);
    eddy_free(w->data.p);
    for (uint64_t i = 0; i < w->n_tensors; i++) eddy_free(w->tensors[i].name);
    eddy_free(w->tensors);
    eddy_free(w);
}

void gguf_writer_add_uint(gguf_writer *w, const char *key, gguf_type t, uint64_t v) {
    put_key(w, key, t);
    put_le(w, &w->kv, v, gguf_scalar_size(t));
}

void gguf_writer_add_int(gguf_writer *w, const char *key, gguf_type t, int64_t v) {
    gguf_writer_add_uint(w, key, t, (uint64_t)v);
}

void gguf_writer_add_float(gguf_writer *w, const char *key, gguf_type t, double v) {
    put_key(w, key, t);
    if (t == GGUF_TYPE_FLOAT32) {
        float f = (float)v;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        put_le(w, &w->kv, bits, 4);
    } else {
        uint64_t bits;
        memcpy(&bits, &v, 8);
        put_le(w, &w->kv, bits, 8);
    }
}

void gguf_writer_add_bool(gguf_writer *w, const char *key, bool v) {
    put_key(w, key, GGUF_TYPE_BOOL);
    put_le(w, &w->kv, v ? 1 : 0, 1);
}

void gguf_writer_add_str(gguf_writer *w, const char *key, const char *v) {
    put_key(w, key, GGUF_TYPE_STRING);
    put_str(w, &w->kv, v);
}

void gguf_writer_add_array(gguf_writer *w, const char *key, gguf_type elem_type, const void *raw,
                           uint64_t n) {
    put_key(w, key, GGUF_TYPE_ARRAY);
    put_le(w, &w->kv, (uint64_t)elem_type, 4);
    put_le(w, &w->kv, n, 8);
    put(w, &w->kv, raw, (size_t)(n * gguf_scalar_size(elem_type)));
}

void gguf_writer_add_str_array(gguf_writer *w, const char *key, const char *const *v, uint64_t n) {
    put_key(w, key, GGUF_TYPE_ARRAY);
    put_le(w, &w->kv, GGUF_TYPE_STRING, 4);
    put_le(w, &w->kv, n, 8);
    for (uint64_t i = 0; i < n; i++) put_str(w, &w->kv, v[i]);
}

/* The body of an array value (element type, count, elements), nested arrays included. */
static void put_array_body(gguf_writer *w, const gguf_value *v) {
    put_le(w, &w->kv, (uint64_t)v->arr.elem_type, 4);
    put_le(w, &w->kv, v->arr.n, 8);
    if (v->arr.elem_type == GGUF_TYPE_STRING) {
        for (uint64_t i = 0; i < v->arr.n; i++) put_strn(w, &w->kv, v->arr.strs[i].ptr, v->arr.strs[i].len);
    } else if (v->arr.elem_type == GGUF_TYPE_ARRAY) {
        for (uint64_t i = 0; i < v->arr.n; i++) put_array_body(w, &v->arr.elems[i]);
    } else {
        put(w, &w->kv, v->arr.raw, (size_t)(v->arr.n * gguf_scalar_size(v->arr.elem_type)));
    }
}

void gguf_writer_add_value(gguf_writer *w, const char *key, const gguf_value *v) {
    switch (v->type) {
    case GGUF_TYPE_STRING:
        put_key(w, key, GGUF_TYPE_STRING);
        put_strn(w, &w->kv, v->s.ptr, v->s.len);
        break;
    case GGUF_TYPE_ARRAY:
        put_key(w, key, GGUF_TYPE_ARRAY);
        put_array_body(w, v);
        break;
    case GGUF_TYPE_FLOAT32:
    case GGUF_TYPE_FLOAT64: gguf_writer_add_float(w, key, v->type, v->f); break;
    case GGUF_TYPE_BOOL: gguf_writer_add_bool(w, key, v->b); break;
    default: gguf_writer_add_uint(w, key, v->type, v->u); break; /* the integers: same bits either way */
    }
}

void gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims,
                            const int64_t *ne, const void *data) {
    if (w->failed) return;
    EDDY_ASSERT(n_dims >= 1 && n_dims <= GGUF_MAX_DIMS);
    if (w->n_tensors == w->cap_tensors) {
        uint64_t cap = w->cap_tensors ? 2 * w->cap_tensors : 16;
        pending_tensor *p = eddy_realloc(w->tensors, (size_t)cap * sizeof *p);
        if (!p) {
            w->failed = true;
            return;
        }
        w->tensors = p;
        w->cap_tensors = cap;
    }
    pending_tensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    size_t len = strlen(name);
    t->name = eddy_malloc(len + 1);
    if (!t->name) {
        w->failed = true;
        return;
    }
    memcpy(t->name, name, len + 1);
    w->n_tensors++;
    t->type = type;
    t->n_dims = n_dims;
    int64_t rows = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = d < n_dims ? ne[d] : 1;
        if (d > 0) rows *= t->ne[d];
    }
    size_t row_bytes = 0;
    EDDY_ASSERT(qtype_row_bytes(type, t->ne[0], &row_bytes));
    t->offset = w->data.len;
    put(w, &w->data, data, row_bytes * (size_t)rows);
    static const uint8_t zeros[64] = {0};
    while (w->data.len % w->alignment) {
        size_t pad = w->alignment - w->data.len % w->alignment;
        put(w, &w->data, zeros, pad < sizeof zeros ? pad : sizeof zeros);
        if (w->failed) return;
    }
}

eddy_status gguf_writer_finish(gguf_writer *w, uint8_t **out, uint64_t *size, eddy_error *err) {
    *out = NULL;
    *size = 0;
    bytes file = {0};
    put(w, &file, GGUF_MAGIC, 4);
    put_le(w, &file, w->version, 4);
    put_le(w, &file, w->n_tensors, 8);
    put_le(w, &file, w->n_kv, 8);
    put(w, &file, w->kv.p, w->kv.len);
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        const pending_tensor *t = &w->tensors[i];
        put_str(w, &file, t->name);
        put_le(w, &file, (uint64_t)t->n_dims, 4);
        for (int d = 0; d < t->n_dims; d++) put_le(w, &file, (uint64_t)t->ne[d], 8);
        put_le(w, &file, t->type, 4);
        put_le(w, &file, t->offset, 8);
    }
    if (w->n_tensors > 0) {
        static const uint8_t zeros[64] = {0};
        while (file.len % w->alignment) {
            size_t pad = w->alignment - file.len % w->alignment;
            put(w, &file, zeros, pad < sizeof zeros ? pad : sizeof zeros);
            if (w->failed) break;
        }
        put(w, &file, w->data.p, w->data.len);
    }
    if (w->failed) {
        eddy_free(file.p);
        return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory while writing GGUF");
    }
    *out = file.p;
    *size = file.len;
    return EDDY_OK;
}

eddy_status gguf_writer_write_file(gguf_writer *w, const char *path, eddy_error *err) {
    uint8_t *buf;
    uint64_t size;
    eddy_status s = gguf_writer_finish(w, &buf, &size, err);
    if (s != EDDY_OK) return s;
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        eddy_free(buf);
        return eddy_error_set(err, EDDY_ERR_IO, "%s: cannot create file", path);
    }
    bool ok = fwrite(buf, 1, (size_t)size, fp) == size;
    ok = (fclose(fp) == 0) && ok;
    eddy_free(buf);
    return ok ? EDDY_OK : eddy_error_set(err, EDDY_ERR_IO, "%s: write failed", path);
}
