/*
 * gguf_public.c — the eddy_gguf_* functions of include/eddy.h.
 *
 * Owns: the public view of an opened GGUF file, formatting metadata values as
 * text (for `eddy inspect`), and dequantizing a tensor to float32. Everything else
 * delegates to gguf_read.c / gguf_meta.c.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "gguf.h"
#include "quant/qtypes.h"
#include "quant/quant.h"

eddy_status eddy_gguf_open(const char *path, eddy_gguf **out, eddy_error *err) {
    if (!path || !out) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_gguf_open: NULL argument");
    return gguf_open(out, path, err);
}

void eddy_gguf_close(eddy_gguf *f) { gguf_close(f); }

uint32_t eddy_gguf_version(const eddy_gguf *f) { return f->version; }
uint32_t eddy_gguf_alignment(const eddy_gguf *f) { return f->alignment; }
uint64_t eddy_gguf_file_size(const eddy_gguf *f) { return f->size; }
uint64_t eddy_gguf_data_offset(const eddy_gguf *f) { return f->data_offset; }
int64_t eddy_gguf_n_kv(const eddy_gguf *f) { return f->n_kv; }
int64_t eddy_gguf_n_tensors(const eddy_gguf *f) { return f->n_tensors; }

const char *eddy_gguf_kv_key(const eddy_gguf *f, int64_t i) {
    return i >= 0 && i < f->n_kv ? f->kv[i].key : NULL;
}

int64_t eddy_gguf_get_int(const eddy_gguf *f, const char *key, int64_t def) {
    return gguf_get_int(f, key, def);
}
double eddy_gguf_get_float(const eddy_gguf *f, const char *key, double def) {
    return gguf_get_float(f, key, def);
}
const char *eddy_gguf_get_str(const eddy_gguf *f, const char *key, const char *def) {
    return gguf_get_str(f, key, def);
}

/* ==== Formatting values ==== */

/* snprintf-like appender: writes what fits, counts everything. */
typedef struct {
    char *buf;
    size_t cap, len;
} text;

EDDY_PRINTF(2, 3)
static void text_add(text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = t->len < t->cap ? t->cap - t->len : 0;
    int n = vsnprintf(room ? t->buf + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) t->len += (size_t)n;
}

static void add_quoted(text *t, const char *s, uint64_t len) {
    text_add(t, "\"");
    for (uint64_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        switch (ch) {
        case '"': text_add(t, "\\\""); break;
        case '\\': text_add(t, "\\\\"); break;
        case '\n': text_add(t, "\\n"); break;
        case '\r': text_add(t, "\\r"); break;
        case '\t': text_add(t, "\\t"); break;
        default:
            if (ch < 0x20 || ch == 0x7f) text_add(t, "\\x%02x", ch);
            else text_add(t, "%c", ch);
        }
    }
    text_add(t, "\"");
}

/* Shortest of %.6g / %.9g that reads back as the same float32. */
static void add_f32(text *t, double v) {
    char tmp[40];
    snprintf(tmp, sizeof tmp, "%.6g", v);
    if ((float)strtod(tmp, NULL) != (float)v) snprintf(tmp, sizeof tmp, "%.9g", v);
    text_add(t, "%s", tmp);
}

static void add_scalar(text *t, const gguf_value *v) {
    switch (v->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        text_add(t, "%" PRIu64, v->u);
        break;
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        text_add(t, "%" PRId64, v->i);
        break;
    case GGUF_TYPE_FLOAT32: add_f32(t, v->f); break;
    case GGUF_TYPE_FLOAT64: text_add(t, "%.17g", v->f); break;
    case GGUF_TYPE_BOOL: text_add(t, "%s", v->b ? "true" : "false"); break;
    case GGUF_TYPE_STRING: add_quoted(t, v->s.ptr, v->s.len); break;
    default: text_add(t, "?"); break;
    }
}

static void add_value(text *t, const gguf_value *v, int64_t max_items) {
    if (v->type != GGUF_TYPE_ARRAY) {
        add_scalar(t, v);
        return;
    }
    uint64_t n = v->arr.n, shown = n;
    if (max_items >= 0 && shown > (uint64_t)max_items) shown = (uint64_t)max_items;
    text_add(t, "[");
    for (uint64_t i = 0; i < shown; i++) {
        if (i) text_add(t, ", ");
        if (v->arr.elem_type == GGUF_TYPE_STRING) {
            add_quoted(t, v->arr.strs[i].ptr, v->arr.strs[i].len);
        } else if (v->arr.elem_type == GGUF_TYPE_ARRAY) {
            add_value(t, &v->arr.elems[i], max_items);
        } else {
            gguf_value e;
            memset(&e, 0, sizeof e);
            e.type = v->arr.elem_type;
            if (e.type == GGUF_TYPE_FLOAT32 || e.type == GGUF_TYPE_FLOAT64) e.f = gguf_arr_float(v, i);
            else if (e.type == GGUF_TYPE_BOOL) e.b = gguf_arr_int(v, i) != 0;
            else if (e.type == GGUF_TYPE_UINT64) e.u = (uint64_t)gguf_arr_int(v, i);
            else if (gguf_type_is_int(e.type)) e.i = gguf_arr_int(v, i), e.u = (uint64_t)e.i;
            add_scalar(t, &e);
        }
    }
    if (shown < n) text_add(t, "%s... (%" PRIu64 " items)", shown ? ", " : "", n);
    text_add(t, "]");
}

static void add_type_name(text *t, const gguf_value *v) {
    if (v->type != GGUF_TYPE_ARRAY) {
        text_add(t, "%s", gguf_type_name(v->type));
        return;
    }
    text_add(t, "arr[");
    if (v->arr.elem_type == GGUF_TYPE_ARRAY && v->arr.n > 0) add_type_name(t, &v->arr.elems[0]);
    else text_add(t, "%s", gguf_type_name(v->arr.elem_type));
    text_add(t, "]");
}

const char *eddy_gguf_kv_type_name(const eddy_gguf *f, int64_t i) {
    static _Thread_local char buf[64];
    if (i < 0 || i >= f->n_kv) return NULL;
    text t = {buf, sizeof buf, 0};
    add_type_name(&t, &f->kv[i].val);
    return buf;
}

size_t eddy_gguf_kv_format(const eddy_gguf *f, int64_t i, char *buf, size_t buf_size,
                           int64_t max_items) {
    text t = {buf, buf_size, 0};
    if (buf_size) buf[0] = '\0';
    if (i < 0 || i >= f->n_kv) return 0;
    add_value(&t, &f->kv[i].val, max_items);
    return t.len;
}

/* ==== Tensors ==== */

void eddy_gguf_tensor_info(const eddy_gguf *f, int64_t i, eddy_tensor_info *out) {
    memset(out, 0, sizeof *out);
    if (i < 0 || i >= f->n_tensors) return;
    const gguf_tensor *t = &f->tensors[i];
    const qtype_traits *tt = qtype_info(t->type);
    out->name = t->name;
    out->type_name = tt->name;
    out->type = (int)t->type;
    out->n_dims = t->n_dims;
    for (int d = 0; d < 4; d++) out->ne[d] = t->ne[d];
    out->n_elements = t->n_elements;
    out->offset = f->data_offset + t->offset;
    out->n_bytes = t->n_bytes;
    out->supported = tt->supported;
}

int64_t eddy_gguf_find_tensor(const eddy_gguf *f, const char *name) {
    return name ? gguf_find_tensor(f, name) : -1;
}

eddy_status eddy_gguf_tensor_to_f32(const eddy_gguf *f, int64_t i, float *dst, eddy_error *err) {
    if (i < 0 || i >= f->n_tensors)
        return eddy_error_set(err, EDDY_ERR_ARG, "tensor index %" PRId64 " out of range", i);
    const gguf_tensor *t = &f->tensors[i];
    const qtype_traits *tt = qtype_info(t->type);
    if (!tt->supported)
        return eddy_error_set(err, EDDY_ERR_UNSUPPORTED,
                              "tensor %s has type %s, which eddy does not support yet", t->name, tt->name);
    /* row by row: rows are whole blocks, checked at open */
    size_t row_bytes;
    EDDY_ASSERT(qtype_row_bytes(t->type, t->ne[0], &row_bytes));
    int64_t n_rows = t->n_elements / t->ne[0];
    for (int64_t r = 0; r < n_rows; r++)
        dequantize_row_ref((qtype)t->type, t->data + (size_t)r * row_bytes, dst + r * t->ne[0], t->ne[0]);
    return EDDY_OK;
}
