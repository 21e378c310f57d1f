/*
 * qtypes.h — the table of GGML tensor types: ids as stored in GGUF, names, block
 * sizes, bytes per block, and whether eddy can read them.
 *
 * Owns: type metadata only. The block layouts and the arithmetic live in
 * quant.h (formats eddy supports).
 */
#ifndef EDDY_QUANT_QTYPES_H
#define EDDY_QUANT_QTYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* GGML type ids, as written in GGUF tensor infos. Gaps are ids that were removed
 * from the format; they are unknown types. */
typedef enum {
    QTYPE_F32 = 0,
    QTYPE_F16 = 1,
    QTYPE_Q4_0 = 2,
    QTYPE_Q4_1 = 3,
    QTYPE_Q5_0 = 6,
    QTYPE_Q5_1 = 7,
    QTYPE_Q8_0 = 8,
    QTYPE_Q8_1 = 9,
    QTYPE_Q2_K = 10,
    QTYPE_Q3_K = 11,
    QTYPE_Q4_K = 12,
    QTYPE_Q5_K = 13,
    QTYPE_Q6_K = 14,
    QTYPE_Q8_K = 15,
    QTYPE_IQ2_XXS = 16,
    QTYPE_IQ2_XS = 17,
    QTYPE_IQ3_XXS = 18,
    QTYPE_IQ1_S = 19,
    QTYPE_IQ4_NL = 20,
    QTYPE_IQ3_S = 21,
    QTYPE_IQ2_S = 22,
    QTYPE_IQ4_XS = 23,
    QTYPE_I8 = 24,
    QTYPE_I16 = 25,
    QTYPE_I32 = 26,
    QTYPE_I64 = 27,
    QTYPE_F64 = 28,
    QTYPE_IQ1_M = 29,
    QTYPE_BF16 = 30,
    QTYPE_TQ1_0 = 34,
    QTYPE_TQ2_0 = 35,
    QTYPE_MXFP4 = 39,
    QTYPE_NVFP4 = 40,
    QTYPE_Q1_0 = 41,
    QTYPE_COUNT = 42, /* ids are < QTYPE_COUNT */
} qtype;

typedef struct {
    const char *name;   /* "Q4_K"; NULL for an unknown id */
    int64_t block_size; /* elements per block */
    size_t type_size;   /* bytes per block */
    bool supported;     /* eddy can dequantize it and take dot products with it */
} qtype_traits;

/* Traits of a type id, or NULL when the id is not a known GGML type. */
const qtype_traits *qtype_info(uint32_t type);

/* The name of a type id; "unknown" for an id that is not a known GGML type. */
const char *qtype_name(uint32_t type);

/* Bytes taken by a row of n elements; false when n is not a multiple of the block
 * size or the size overflows. */
bool qtype_row_bytes(uint32_t type, int64_t n, size_t *out);

#endif
