/*
 * gguf_read.c — parsing and validating a GGUF file.
 *
 * Owns: the header walk (magic, version, counts, metadata, tensor infos), every
 * check on what the file claims, and freeing what a parse allocated. Lookups live
 * in gguf_meta.c; the writer in gguf_write.c.
 *
 * Layout (all little-endian):
 *   "GGUF" u32 version  u64 n_tensors  u64 n_kv
 *   n_kv ×      { str key, u32 value_type, value }
 *   n_tensors × { str name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset }
 *   padding to `general.alignment` (default 32), then the data section;
 *   str = u64 length + bytes; array = u32 elem_type + u64 n + n elements.
 *
 * Every read goes through a cursor that checks the bytes are there and keeps the
 * first error; a count is checked against the bytes left (each element needs at
 * least a minimum size) before anything is allocated for it, so a damaged file
 * cannot make the parser allocate more than a small multiple of its own size or
 * loop longer than its own length.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "gguf.h"
#include "quant/quant.h"
#include "quant/qtypes.h"

/* ==== Cursor ==== */

typedef struct {
    const uint8_t *p;
    uint64_t size, pos;
    const char *name; /* file name for messages */
    eddy_error *err;
    eddy_status status; /* first error; EDDY_OK while none */
} cursor;

/* Records the first error as "<file>: byte <offset>: <message>". */
EDDY_PRINTF(3, 4)
static bool fail_at(cursor *c, uint64_t offset, const char *fmt, ...) {
    if (c->status != EDDY_OK) return false;
    c->status = EDDY_ERR_FORMAT;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    eddy_error_set(c->err, EDDY_ERR_FORMAT, "%s: byte %" PRIu64 ": %s", c->name, offset, msg);
    return false;
}

static bool fail_nomem(cursor *c, const char *what) {
    if (c->status != EDDY_OK) return false;
    c->status = EDDY_ERR_NOMEM;
    eddy_error_set(c->err, EDDY_ERR_NOMEM, "%s: out of memory while reading %s", c->name, what);
    return false;
}

static uint64_t remaining(const cursor *c) { return c->size - c->pos; }

/* Takes n bytes; on a short file records "<what> ... truncated". */
static const uint8_t *take(cursor *c, uint64_t n, const char *what) {
    if (c->status != EDDY_OK) return NULL;
    if (n > remaining(c)) {
        fail_at(c, c->pos, "%s truncated: needs %" PRIu64 " bytes, file has %" PRIu64 " left", what, n,
                remaining(c));
        return NULL;
    }
    const uint8_t *p = c->p + c->pos;
    c->pos += n;
    return p;
}

static uint64_t le_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint32_t le_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint16_t le_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static bool read_u32(cursor *c, uint32_t *v, const char *what) {
    const uint8_t *p = take(c, 4, what);
    if (!p) return false;
    *v = le_u32(p);
    return true;
}

static bool read_u64(cursor *c, uint64_t *v, const char *what) {
    const uint8_t *p = take(c, 8, what);
    if (!p) return false;
    *v = le_u64(p);
    return true;
}

static bool read_str(cursor *c, gguf_str *s, const char *what) {
    uint64_t at = c->pos;
    uint64_t len;
    if (!read_u64(c, &len, what)) return false;
    if (len > remaining(c))
        return fail_at(c, at, "%s: string length %" PRIu64 " runs past the end of the file (%" PRIu64
                              " bytes left)", what, len, remaining(c));
    s->ptr = (const char *)take(c, len, what);
    s->len = len;
    return s->ptr != NULL || len == 0;
}

/* A key or tensor name: non-empty, bounded, no NUL byte; returned as a C string. */
static char *read_name(cursor *c, const char *what) {
    uint64_t at = c->pos;
    gguf_str s;
    if (!read_str(c, &s, what)) return NULL;
    if (s.len == 0) return fail_at(c, at, "%s is empty", what), NULL;
    if (s.len > GGUF_MAX_NAME)
        return fail_at(c, at, "%s is %" PRIu64 " bytes long (at most %d allowed)", what, s.len,
                       GGUF_MAX_NAME), NULL;
    if (memchr(s.ptr, '\0', (size_t)s.len))
        return fail_at(c, at, "%s contains a NUL byte", what), NULL;
    char *copy = eddy_malloc((size_t)s.len + 1);
    if (!copy) return fail_nomem(c, what), NULL;
    memcpy(copy, s.ptr, (size_t)s.len);
    copy[s.len] = '\0';
    return copy;
}

/* ==== Metadata values ==== */

static const char *const type_names[GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
};

const char *gguf_type_name(gguf_type t) {
    return (unsigned)t < GGUF_TYPE_COUNT ? type_names[t] : "unknown";
}

size_t gguf_scalar_size(gguf_type t) {
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

/* The fewest bytes one element of type t can occupy in the file. */
static uint64_t min_encoded_size(gguf_type t) {
    if (t == GGUF_TYPE_STRING) return 8;     /* u64 length */
    if (t == GGUF_TYPE_ARRAY) return 4 + 8;  /* u32 type + u64 count */
    return gguf_scalar_size(t);
}

static void free_value(gguf_value *v) {
    if (v->type != GGUF_TYPE_ARRAY) return;
    eddy_free(v->arr.strs);
    if (v->arr.elems) {
        for (uint64_t i = 0; i < v->arr.n; i++) free_value(&v->arr.elems[i]);
        eddy_free(v->arr.elems);
    }
    v->arr.strs = NULL;
    v->arr.elems = NULL;
}

/* Decodes a scalar of type t from p (which holds gguf_scalar_size(t) bytes). */
static void decode_scalar(gguf_type t, const uint8_t *p, gguf_value *v) {
    v->type = t;
    switch (t) {
    case GGUF_TYPE_UINT8: v->u = p[0]; break;
    case GGUF_TYPE_INT8: v->i = (int8_t)p[0]; break;
    case GGUF_TYPE_UINT16: v->u = le_u16(p); break;
    case GGUF_TYPE_INT16: v->i = (int16_t)le_u16(p); break;
    case GGUF_TYPE_UINT32: v->u = le_u32(p); break;
    case GGUF_TYPE_INT32: v->i = (int32_t)le_u32(p); break;
    case GGUF_TYPE_UINT64: v->u = le_u64(p); break;
    case GGUF_TYPE_INT64: v->i = (int64_t)le_u64(p); break;
    case GGUF_TYPE_BOOL: v->b = p[0] != 0; break;
    case GGUF_TYPE_FLOAT32: {
        uint32_t bits = le_u32(p);
        float f;
        memcpy(&f, &bits, 4);
        v->f = f;
        break;
    }
    case GGUF_TYPE_FLOAT64: {
        uint64_t bits = le_u64(p);
        memcpy(&v->f, &bits, 8);
        break;
    }
    default: EDDY_ASSERT(!"not a scalar type");
    }
}

static bool read_value(cursor *c, gguf_type t, gguf_value *v, int depth, const char *what);

static bool read_array(cursor *c, gguf_value *v, int depth, const char *what) {
    uint64_t at = c->pos;
    uint32_t et;
    uint64_t n;
    if (!read_u32(c, &et, what) || !read_u64(c, &n, what)) return false;
    if (et >= GGUF_TYPE_COUNT)
        return fail_at(c, at, "%s: unknown array element type %" PRIu32, what, et);
    if (depth + 1 >= GGUF_MAX_ARRAY_DEPTH)
        return fail_at(c, at, "%s: arrays nested more than %d deep", what, GGUF_MAX_ARRAY_DEPTH);
    uint64_t min = min_encoded_size((gguf_type)et);
    if (n > remaining(c) / min)
        return fail_at(c, at + 4, "%s: array count %" PRIu64 " cannot fit in the %" PRIu64
                                  " bytes left", what, n, remaining(c));
    v->type = GGUF_TYPE_ARRAY;
    v->arr.elem_type = (gguf_type)et;
    v->arr.n = n;
    v->arr.raw = c->p + c->pos;
    if (et == GGUF_TYPE_STRING) {
        v->arr.strs = eddy_calloc(n ? n : 1, sizeof(gguf_str));
        if (!v->arr.strs) return fail_nomem(c, what);
        for (uint64_t i = 0; i < n; i++)
            if (!read_str(c, &v->arr.strs[i], what)) return false;
    } else if (et == GGUF_TYPE_ARRAY) {
        v->arr.elems = eddy_calloc(n ? n : 1, sizeof(gguf_value));
        if (!v->arr.elems) return fail_nomem(c, what);
        for (uint64_t i = 0; i < n; i++) v->arr.elems[i].type = GGUF_TYPE_ARRAY;
        for (uint64_t i = 0; i < n; i++)
            if (!read_array(c, &v->arr.elems[i], depth + 1, what)) return false;
    } else {
        uint64_t bytes = n * min; /* cannot overflow: n <= remaining / min */
        const uint8_t *p = take(c, bytes, what);
        if (!p) return false;
        if (et == GGUF_TYPE_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (p[i] > 1)
                    return fail_at(c, (uint64_t)(p - c->p) + i, "%s: bool element %" PRIu64
                                   " has value %u (must be 0 or 1)", what, i, p[i]);
    }
    return true;
}

static bool read_value(cursor *c, gguf_type t, gguf_value *v, int depth, const char *what) {
    if (t == GGUF_TYPE_STRING) {
        v->type = t;
        return read_str(c, &v->s, what);
    }
    if (t == GGUF_TYPE_ARRAY) {
        v->type = t;
        return read_array(c, v, depth, what);
    }
    uint64_t at = c->pos;
    const uint8_t *p = take(c, gguf_scalar_size(t), what);
    if (!p) return false;
    if (t == GGUF_TYPE_BOOL && p[0] > 1)
        return fail_at(c, at, "%s: bool has value %u (must be 0 or 1)", what, p[0]);
    decode_scalar(t, p, v);
    return true;
}

/* ==== Name hash (duplicates and lookups) ==== */

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* Inserts names[i] into an open-addressing table of capacity cap (a power of two).
 * Returns the index of an earlier equal name, or -1 after inserting. */
static int64_t hash_insert(int64_t *table, uint64_t cap, char *const *names, size_t stride,
                           int64_t i) {
    const char *name = *(char *const *)((const char *)names + (size_t)i * stride);
    for (uint64_t h = hash_name(name) & (cap - 1);; h = (h + 1) & (cap - 1)) {
        if (table[h] < 0) {
            table[h] = i;
            return -1;
        }
        const char *other = *(char *const *)((const char *)names + (size_t)table[h] * stride);
        if (strcmp(other, name) == 0) return table[h];
    }
}

static int64_t *hash_new(uint64_t n, uint64_t *cap_out) {
    uint64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    int64_t *t = eddy_malloc((size_t)cap * sizeof *t);
    if (t)
        for (uint64_t i = 0; i < cap; i++) t[i] = -1;
    *cap_out = cap;
    return t;
}

int64_t gguf_find_tensor(const gguf_file *f, const char *name) {
    if (!f->tensor_index) return -1;
    uint64_t cap = f->tensor_index_cap;
    for (uint64_t h = hash_name(name) & (cap - 1);; h = (h + 1) & (cap - 1)) {
        int64_t i = f->tensor_index[h];
        if (i < 0) return -1;
        if (strcmp(f->tensors[i].name, name) == 0) return i;
    }
}

/* ==== Header sections ==== */

static bool read_header(cursor *c, gguf_file *f, uint64_t *n_tensors, uint64_t *n_kv) {
    const uint8_t *magic = take(c, 4, "magic");
    if (!magic) return false;
    if (memcmp(magic, GGUF_MAGIC, 4) != 0)
        return fail_at(c, 0, "not a GGUF file (magic is %02x %02x %02x %02x, expected \"GGUF\")",
                       magic[0], magic[1], magic[2], magic[3]);
    uint32_t version;
    if (!read_u32(c, &version, "version")) return false;
    if ((version & 0xffff) == 0 && (version >> 24) >= 1 && (version >> 24) <= 3)
        return fail_at(c, 4, "big-endian GGUF not supported (version field reads %" PRIu32
                             " byte-swapped)", version >> 24);
    if (version == 1) return fail_at(c, 4, "GGUF version 1 is not supported (only 2 and 3 are)");
    if (version != 2 && version != 3)
        return fail_at(c, 4, "unsupported GGUF version %" PRIu32 " (only 2 and 3 are)", version);
    f->version = version;
    if (!read_u64(c, n_tensors, "tensor count") || !read_u64(c, n_kv, "metadata count"))
        return false;
    /* Each metadata entry takes at least 8+1 (key) + 4 (type) + 1 bytes, each tensor
     * info at least 8+1 (name) + 4 + 8 + 4 + 8. */
    if (*n_kv > remaining(c) / 14)
        return fail_at(c, 16, "metadata count %" PRIu64 " cannot fit in a %" PRIu64 "-byte file",
                       *n_kv, c->size);
    if (*n_tensors > remaining(c) / 33)
        return fail_at(c, 8, "tensor count %" PRIu64 " cannot fit in a %" PRIu64 "-byte file",
                       *n_tensors, c->size);
    return true;
}

static bool read_metadata(cursor *c, gguf_file *f, uint64_t n_kv) {
    f->kv = eddy_calloc(n_kv ? n_kv : 1, sizeof *f->kv);
    if (!f->kv) return fail_nomem(c, "metadata");
    uint64_t cap;
    int64_t *seen = hash_new(n_kv, &cap);
    if (!seen) return fail_nomem(c, "metadata");
    bool ok = true;
    for (uint64_t i = 0; i < n_kv && ok; i++) {
        gguf_kv *kv = &f->kv[i];
        kv->offset = c->pos;
        char what[GGUF_MAX_NAME + 64];
        snprintf(what, sizeof what, "metadata key %" PRIu64, i);
        kv->key = read_name(c, what);
        if (!kv->key) {
            ok = false;
            break;
        }
        f->n_kv = (int64_t)i + 1;
        int64_t dup = hash_insert(seen, cap, &f->kv[0].key, sizeof *f->kv, (int64_t)i);
        if (dup >= 0) {
            ok = fail_at(c, kv->offset, "duplicate metadata key \"%s\" (also entry %" PRId64 ")",
                         kv->key, dup);
            break;
        }
        snprintf(what, sizeof what, "metadata \"%s\"", kv->key);
        uint64_t type_at = c->pos;
        uint32_t t;
        if (!read_u32(c, &t, what)) {
            ok = false;
            break;
        }
        if (t >= GGUF_TYPE_COUNT) {
            ok = fail_at(c, type_at, "%s: unknown value type %" PRIu32, what, t);
            break;
        }
        kv->val.type = (gguf_type)t; /* so free_value knows what it holds */
        ok = read_value(c, (gguf_type)t, &kv->val, 0, what);
        if (ok && t == GGUF_TYPE_STRING) {
            kv->str_copy = eddy_malloc((size_t)kv->val.s.len + 1);
            if (!kv->str_copy) ok = fail_nomem(c, what);
            else {
                memcpy(kv->str_copy, kv->val.s.ptr, (size_t)kv->val.s.len);
                kv->str_copy[kv->val.s.len] = '\0';
            }
        }
    }
    eddy_free(seen);
    return ok;
}

static bool read_alignment(cursor *c, gguf_file *f) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = gguf_find_key(f, "general.alignment");
    if (i < 0) return true;
    const gguf_value *v = &f->kv[i].val;
    if (!gguf_type_is_int(v->type) || v->type == GGUF_TYPE_INT8 || v->type == GGUF_TYPE_INT16 ||
        v->type == GGUF_TYPE_INT32 || v->type == GGUF_TYPE_INT64)
        return fail_at(c, f->kv[i].offset, "general.alignment has type %s, expected an unsigned integer",
                       gguf_type_name(v->type));
    if (v->u == 0 || (v->u & (v->u - 1)) != 0 || v->u > (1u << 30))
        return fail_at(c, f->kv[i].offset, "general.alignment is %" PRIu64
                                           ", expected a power of two up to 2^30", v->u);
    f->alignment = (uint32_t)v->u;
    return true;
}

/* Reads the tensor infos; checks each one's shape, type and sizes (not yet its
 * offset, which needs the data section's position). */
static bool read_tensor_infos(cursor *c, gguf_file *f, uint64_t n_tensors) {
    f->tensors = eddy_calloc(n_tensors ? n_tensors : 1, sizeof *f->tensors);
    if (!f->tensors) return fail_nomem(c, "tensor infos");
    f->tensor_index = hash_new(n_tensors, &f->tensor_index_cap);
    if (!f->tensor_index) return fail_nomem(c, "tensor infos");
    for (uint64_t i = 0; i < n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        t->info_offset = c->pos;
        char what[GGUF_MAX_NAME + 64];
        snprintf(what, sizeof what, "tensor %" PRIu64 " name", i);
        t->name = read_name(c, what);
        if (!t->name) return false;
        f->n_tensors = (int64_t)i + 1;
        int64_t dup = hash_insert(f->tensor_index, f->tensor_index_cap, &f->tensors[0].name,
                                  sizeof *f->tensors, (int64_t)i);
        if (dup >= 0)
            return fail_at(c, t->info_offset, "duplicate tensor name \"%s\" (also tensor %" PRId64 ")",
                           t->name, dup);
        snprintf(what, sizeof what, "tensor \"%s\"", t->name);
        uint64_t at = c->pos;
        uint32_t n_dims;
        if (!read_u32(c, &n_dims, what)) return false;
        if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
            return fail_at(c, at, "%s: dimension count %" PRIu32 " (must be 1..%d)", what, n_dims,
                           GGUF_MAX_DIMS);
        t->n_dims = (int)n_dims;
        int64_t n_elements = 1;
        for (int d = 0; d < GGUF_MAX_DIMS; d++) {
            t->ne[d] = 1;
            if (d >= t->n_dims) continue;
            at = c->pos;
            uint64_t ne;
            if (!read_u64(c, &ne, what)) return false;
            if (ne == 0 || ne > (uint64_t)INT64_MAX)
                return fail_at(c, at, "%s: dimension %d is %" PRIu64 " (must be 1..2^63-1)", what, d, ne);
            t->ne[d] = (int64_t)ne;
            if (n_elements > INT64_MAX / t->ne[d])
                return fail_at(c, at, "%s: element count overflows at dimension %d", what, d);
            n_elements *= t->ne[d];
        }
        t->n_elements = n_elements;
        at = c->pos;
        if (!read_u32(c, &t->type, what)) return false;
        const qtype_traits *tt = qtype_info(t->type);
        if (!tt) return fail_at(c, at, "%s: unknown tensor type %" PRIu32, what, t->type);
        if (t->ne[0] % tt->block_size != 0)
            return fail_at(c, t->info_offset, "%s: row length %" PRId64
                           " is not a multiple of the %s block size %" PRId64, what, t->ne[0],
                           tt->name, tt->block_size);
        size_t row_bytes;
        uint64_t n_rows = (uint64_t)(n_elements / t->ne[0]);
        if (!qtype_row_bytes(t->type, t->ne[0], &row_bytes) ||
            (row_bytes != 0 && n_rows > UINT64_MAX / row_bytes))
            return fail_at(c, t->info_offset, "%s: byte size overflows", what);
        t->n_bytes = (uint64_t)row_bytes * n_rows;
        at = c->pos;
        if (!read_u64(c, &t->offset, what)) return false;
        if (t->offset % f->alignment != 0)
            return fail_at(c, at, "%s: data offset %" PRIu64 " is not a multiple of the alignment %" PRIu32,
                           what, t->offset, f->alignment);
    }
    return true;
}

/* Places the data section after the header and checks every tensor lies inside it. */
static bool place_data(cursor *c, gguf_file *f) {
    uint64_t header_end = c->pos;
    uint64_t pad = (f->alignment - header_end % f->alignment) % f->alignment;
    f->data_offset = header_end + pad;
    if (f->data_offset > c->size) {
        if (f->n_tensors > 0)
            return fail_at(c, header_end, "data section (after %" PRIu64
                           " bytes of padding) starts past the end of the file", pad);
        f->data_offset = c->size; /* no tensors: the file may end right after the header */
    }
    uint64_t data_size = c->size - f->data_offset;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (t->offset > data_size || t->n_bytes > data_size - t->offset)
            return fail_at(c, t->info_offset, "tensor \"%s\": data [%" PRIu64 ", %" PRIu64
                           ") lies outside the %" PRIu64 "-byte data section at byte %" PRIu64,
                           t->name, t->offset, t->offset + t->n_bytes, data_size, f->data_offset);
        t->data = f->bytes + f->data_offset + t->offset;
        /* the block structs need their natural alignment; an alignment of 1 or 2
         * in the file could break it */
        size_t align = quant_row_align((qtype)t->type);
        if ((uintptr_t)t->data % align != 0)
            return fail_at(c, t->info_offset, "tensor \"%s\": data at byte %" PRIu64
                           " is not aligned to the %zu bytes type %s needs", t->name,
                           f->data_offset + t->offset, align, qtype_name(t->type));
    }
    return true;
}

/* ==== Open and close ==== */

static eddy_status parse(gguf_file *f, eddy_error *err) {
    cursor c = {.p = f->bytes, .size = f->size, .name = f->path, .err = err};
    uint64_t n_tensors = 0, n_kv = 0;
    if (read_header(&c, f, &n_tensors, &n_kv) && read_metadata(&c, f, n_kv) &&
        read_alignment(&c, f) && read_tensor_infos(&c, f, n_tensors))
        place_data(&c, f);
    return c.status;
}

static eddy_status open_common(gguf_file **out, gguf_file *f, const char *name, eddy_error *err) {
    size_t len = strlen(name);
    f->path = eddy_malloc(len + 1);
    if (!f->path) {
        gguf_close(f);
        return eddy_error_set(err, EDDY_ERR_NOMEM, "%s: out of memory", name);
    }
    memcpy(f->path, name, len + 1);
    eddy_status s = parse(f, err);
    if (s != EDDY_OK) {
        gguf_close(f);
        return s;
    }
    *out = f;
    return EDDY_OK;
}

eddy_status gguf_open_memory(gguf_file **out, const void *data, uint64_t size, const char *name,
                             eddy_error *err) {
    *out = NULL;
    gguf_file *f = eddy_calloc(1, sizeof *f);
    if (!f) return eddy_error_set(err, EDDY_ERR_NOMEM, "%s: out of memory", name);
    f->bytes = data;
    f->size = size;
    return open_common(out, f, name, err);
}

eddy_status gguf_open(gguf_file **out, const char *path, eddy_error *err) {
    *out = NULL;
    gguf_file *f = eddy_calloc(1, sizeof *f);
    if (!f) return eddy_error_set(err, EDDY_ERR_NOMEM, "%s: out of memory", path);
    eddy_status s = mapfile_open(&f->map, path, true, err);
    if (s != EDDY_OK) {
        eddy_free(f);
        return s;
    }
    f->bytes = f->map.data;
    f->size = f->map.size;
    return open_common(out, f, path, err);
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    for (int64_t i = 0; i < f->n_kv; i++) {
        eddy_free(f->kv[i].key);
        eddy_free(f->kv[i].str_copy);
        free_value(&f->kv[i].val);
    }
    /* an entry whose key was read but whose value failed midway may hold arrays too */
    eddy_free(f->kv);
    for (int64_t i = 0; i < f->n_tensors; i++) eddy_free(f->tensors[i].name);
    eddy_free(f->tensors);
    eddy_free(f->tensor_index);
    eddy_free(f->path);
    mapfile_close(&f->map);
    eddy_free(f);
}
