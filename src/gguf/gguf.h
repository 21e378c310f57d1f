/*
 * gguf.h — the validated GGUF reader (and a small writer used by tests and tools).
 *
 * Owns: parsing a GGUF v2/v3 little-endian file, validating every field before use,
 * the metadata values, the tensor directory, and the mapped data section. Does not
 * own: what the metadata means for a model (src/model) or the tensor formats
 * (src/quant).
 *
 * A file is opened whole: gguf_open maps it read-only (or reads it where mmap is
 * unavailable), walks the header with a bounds-checked cursor that keeps the first
 * error, and either returns a gguf_file whose every offset and size has been checked
 * or fails with one line naming the field and the byte offset. Nothing after a
 * successful open needs to re-check the file's numbers.
 *
 * `struct eddy_gguf` is the public handle of include/eddy.h; inside the library it
 * is called gguf_file.
 */
#ifndef EDDY_GGUF_H
#define EDDY_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/mapfile.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NAME 256      /* longest key or tensor name eddy accepts, in bytes */
#define GGUF_MAX_ARRAY_DEPTH 8 /* arrays of arrays nest at most this deep */

typedef enum {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT = 13,
} gguf_type;

/* A string inside the mapped file: not NUL-terminated, may hold any bytes. */
typedef struct {
    const char *ptr;
    uint64_t len;
} gguf_str;

typedef struct gguf_value gguf_value;
struct gguf_value {
    gguf_type type;
    union {
        uint64_t u;  /* UINT8..UINT64 */
        int64_t i;   /* INT8..INT64 */
        double f;    /* FLOAT32, FLOAT64 */
        bool b;      /* BOOL */
        gguf_str s;  /* STRING */
        struct {
            gguf_type elem_type;
            uint64_t n;
            const uint8_t *raw; /* scalar elements: n little-endian values in the file */
            gguf_str *strs;     /* STRING elements: (n) */
            gguf_value *elems;  /* ARRAY elements: (n), each itself an array */
        } arr;
    };
};

typedef struct {
    char *key;       /* NUL-terminated copy */
    gguf_value val;
    char *str_copy;  /* NUL-terminated copy of a STRING value (NULL otherwise) */
    uint64_t offset; /* byte offset of the key in the file */
} gguf_kv;

typedef struct {
    char *name;           /* NUL-terminated copy */
    uint32_t type;        /* qtype id, known to qtypes.h */
    int n_dims;           /* 1..4 */
    int64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the contiguous dimension; unused dims are 1 */
    int64_t n_elements;
    uint64_t offset;      /* from the start of the data section, aligned */
    uint64_t n_bytes;
    const uint8_t *data;  /* offset resolved into the mapped file */
    uint64_t info_offset; /* byte offset of this tensor's info record in the file */
} gguf_tensor;

typedef struct eddy_gguf gguf_file;

struct eddy_gguf {
    mapfile map;          /* owns the bytes (unused for gguf_open_memory) */
    const uint8_t *bytes; /* the whole file */
    uint64_t size;
    char *path;           /* for messages */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset; /* start of the data section; == size when there is none */

    int64_t n_kv;
    gguf_kv *kv;
    int64_t n_tensors;
    gguf_tensor *tensors;

    int64_t *tensor_index; /* open-addressing hash of tensor names -> index, -1 empty */
    uint64_t tensor_index_cap;
};

/* ==== Opening ==== */

eddy_status gguf_open(gguf_file **out, const char *path, eddy_error *err);
/* Parses bytes already in memory; they must outlive the returned file. `name` is
 * used in messages. */
eddy_status gguf_open_memory(gguf_file **out, const void *data, uint64_t size, const char *name,
                             eddy_error *err);
void gguf_close(gguf_file *f);

/* ==== Metadata ==== */

const char *gguf_type_name(gguf_type t); /* "u32", "str", "arr", ... */
int64_t gguf_find_key(const gguf_file *f, const char *key); /* -1 if absent */
const gguf_value *gguf_get(const gguf_file *f, const char *key); /* NULL if absent */

/* Typed getters: the value when the key exists and holds a value of that kind that
 * fits (any integer type for the integer getters, f32/f64 or integers for floats),
 * else def. */
int64_t gguf_get_int(const gguf_file *f, const char *key, int64_t def);
uint32_t gguf_get_u32(const gguf_file *f, const char *key, uint32_t def);
double gguf_get_float(const gguf_file *f, const char *key, double def);
bool gguf_get_bool(const gguf_file *f, const char *key, bool def);
const char *gguf_get_str(const gguf_file *f, const char *key, const char *def);

/* The array under key when it exists and its elements are of elem_type
 * (GGUF_TYPE_COUNT: any), else NULL. */
const gguf_value *gguf_get_array(const gguf_file *f, const char *key, gguf_type elem_type);

/* Element i (< arr->arr.n) of an array value. Integer and float element getters
 * convert from any numeric element type. */
int64_t gguf_arr_int(const gguf_value *arr, uint64_t i);
double gguf_arr_float(const gguf_value *arr, uint64_t i);
gguf_str gguf_arr_str(const gguf_value *arr, uint64_t i);
bool gguf_type_is_int(gguf_type t);
size_t gguf_scalar_size(gguf_type t); /* 0 for STRING and ARRAY */

/* ==== Tensors ==== */

int64_t gguf_find_tensor(const gguf_file *f, const char *name); /* -1 if absent */

/* ==== Writer (tests, tools) ==== */

/* Builds a GGUF file in memory. Every add_* copies its arguments. Errors (out of
 * memory) are sticky and reported by gguf_writer_finish. */
typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(uint32_t version, uint32_t alignment);
void gguf_writer_free(gguf_writer *w);
void gguf_writer_add_uint(gguf_writer *w, const char *key, gguf_type t, uint64_t v);
void gguf_writer_add_int(gguf_writer *w, const char *key, gguf_type t, int64_t v);
void gguf_writer_add_float(gguf_writer *w, const char *key, gguf_type t, double v);
void gguf_writer_add_bool(gguf_writer *w, const char *key, bool v);
void gguf_writer_add_str(gguf_writer *w, const char *key, const char *v);
/* An array of n scalars of elem_type, given as raw little-endian bytes. */
void gguf_writer_add_array(gguf_writer *w, const char *key, gguf_type elem_type, const void *raw,
                           uint64_t n);
void gguf_writer_add_str_array(gguf_writer *w, const char *key, const char *const *v, uint64_t n);
/* A copy of a value read from a file (any type, nested arrays and strings holding any
 * bytes included). */
void gguf_writer_add_value(gguf_writer *w, const char *key, const gguf_value *v);
/* Adds a tensor; data holds its n_bytes (computed from type and ne). */
void gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, int n_dims,
                            const int64_t *ne, const void *data);
/* The finished file in a buffer the caller frees with eddy_free. */
eddy_status gguf_writer_finish(gguf_writer *w, uint8_t **out, uint64_t *size, eddy_error *err);
eddy_status gguf_writer_write_file(gguf_writer *w, const char *path, eddy_error *err);

#endif
