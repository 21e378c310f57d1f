/*
 * gguf_meta.c — looking up metadata in an opened GGUF file.
 *
 * Owns: key lookup, typed getters with defaults, array element access. Values were
 * validated by gguf_read.c; nothing here re-reads untrusted counts.
 */
#include <math.h>
#include <string.h>

#include "gguf.h"

bool gguf_type_is_int(gguf_type t) {
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16:
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64:
        return true;
    default:
        return false;
    }
}

static bool type_is_signed(gguf_type t) {
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
}

int64_t gguf_find_key(const gguf_file *f, const char *key) {
    for (int64_t i = 0; i < f->n_kv; i++)
        if (strcmp(f->kv[i].key, key) == 0) return i;
    return -1;
}

const gguf_value *gguf_get(const gguf_file *f, const char *key) {
    int64_t i = gguf_find_key(f, key);
    return i < 0 ? NULL : &f->kv[i].val;
}

/* An integer value as int64 when it fits. */
static bool value_as_int(const gguf_value *v, int64_t *out) {
    if (!gguf_type_is_int(v->type)) return false;
    if (type_is_signed(v->type)) {
        *out = v->i;
        return true;
    }
    if (v->u > (uint64_t)INT64_MAX) return false;
    *out = (int64_t)v->u;
    return true;
}

int64_t gguf_get_int(const gguf_file *f, const char *key, int64_t def) {
    const gguf_value *v = gguf_get(f, key);
    int64_t x;
    return v && value_as_int(v, &x) ? x : def;
}

uint32_t gguf_get_u32(const gguf_file *f, const char *key, uint32_t def) {
    const gguf_value *v = gguf_get(f, key);
    int64_t x;
    return v && value_as_int(v, &x) && x >= 0 && x <= (int64_t)UINT32_MAX ? (uint32_t)x : def;
}

double gguf_get_float(const gguf_file *f, const char *key, double def) {
    const gguf_value *v = gguf_get(f, key);
    if (!v) return def;
    if (v->type == GGUF_TYPE_FLOAT32 || v->type == GGUF_TYPE_FLOAT64) return v->f;
    int64_t x;
    return value_as_int(v, &x) ? (double)x : def;
}

bool gguf_get_bool(const gguf_file *f, const char *key, bool def) {
    const gguf_value *v = gguf_get(f, key);
    return v && v->type == GGUF_TYPE_BOOL ? v->b : def;
}

const char *gguf_get_str(const gguf_file *f, const char *key, const char *def) {
    int64_t i = gguf_find_key(f, key);
    return i >= 0 && f->kv[i].val.type == GGUF_TYPE_STRING ? f->kv[i].str_copy : def;
}

const gguf_value *gguf_get_array(const gguf_file *f, const char *key, gguf_type elem_type) {
    const gguf_value *v = gguf_get(f, key);
    if (!v || v->type != GGUF_TYPE_ARRAY) return NULL;
    if (elem_type != GGUF_TYPE_COUNT && v->arr.elem_type != elem_type) return NULL;
    return v;
}

/* ==== Array elements ==== */

static gguf_value arr_scalar(const gguf_value *arr, uint64_t i) {
    EDDY_ASSERT(arr->type == GGUF_TYPE_ARRAY && i < arr->arr.n);
    gguf_type t = arr->arr.elem_type;
    size_t sz = gguf_scalar_size(t);
    EDDY_ASSERT(sz != 0);
    const uint8_t *p = arr->arr.raw + i * sz;
    gguf_value v;
    memset(&v, 0, sizeof v);
    v.type = t;
    uint64_t bits = 0;
    for (size_t k = sz; k-- > 0;) bits = (bits << 8) | p[k];
    switch (t) {
    case GGUF_TYPE_INT8: v.i = (int8_t)bits; break;
    case GGUF_TYPE_INT16: v.i = (int16_t)bits; break;
    case GGUF_TYPE_INT32: v.i = (int32_t)bits; break;
    case GGUF_TYPE_INT64: v.i = (int64_t)bits; break;
    case GGUF_TYPE_FLOAT32: {
        uint32_t b32 = (uint32_t)bits;
        float x;
        memcpy(&x, &b32, 4);
        v.f = x;
        break;
    }
    case GGUF_TYPE_FLOAT64: memcpy(&v.f, &bits, 8); break;
    case GGUF_TYPE_BOOL: v.b = bits != 0; break;
    default: v.u = bits; break;
    }
    return v;
}

int64_t gguf_arr_int(const gguf_value *arr, uint64_t i) {
    gguf_value v = arr_scalar(arr, i);
    if (v.type == GGUF_TYPE_FLOAT32 || v.type == GGUF_TYPE_FLOAT64)
        return v.f > -9.2e18 && v.f < 9.2e18 ? (int64_t)v.f : 0; /* NaN and out of range: 0 */
    if (v.type == GGUF_TYPE_BOOL) return v.b;
    return type_is_signed(v.type) ? v.i : (int64_t)v.u;
}

double gguf_arr_float(const gguf_value *arr, uint64_t i) {
    gguf_value v = arr_scalar(arr, i);
    if (v.type == GGUF_TYPE_FLOAT32 || v.type == GGUF_TYPE_FLOAT64) return v.f;
    if (v.type == GGUF_TYPE_BOOL) return v.b;
    return type_is_signed(v.type) ? (double)v.i : (double)v.u;
}

gguf_str gguf_arr_str(const gguf_value *arr, uint64_t i) {
    EDDY_ASSERT(arr->type == GGUF_TYPE_ARRAY && arr->arr.elem_type == GGUF_TYPE_STRING && i < arr->arr.n);
    return arr->arr.strs[i];
}
