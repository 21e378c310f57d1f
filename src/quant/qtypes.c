/*
 * qtypes.c — the GGML type table.
 */
#include "qtypes.h"

static const qtype_traits table[QTYPE_COUNT] = {
    [QTYPE_F32] = {"F32", 1, 4, true},
    [QTYPE_F16] = {"F16", 1, 2, true},
    [QTYPE_Q4_0] = {"Q4_0", 32, 18, true},
    [QTYPE_Q4_1] = {"Q4_1", 32, 20, true},
    [QTYPE_Q5_0] = {"Q5_0", 32, 22, true},
    [QTYPE_Q5_1] = {"Q5_1", 32, 24, true},
    [QTYPE_Q8_0] = {"Q8_0", 32, 34, true},
    [QTYPE_Q8_1] = {"Q8_1", 32, 36, false},
    [QTYPE_Q2_K] = {"Q2_K", 256, 84, true},
    [QTYPE_Q3_K] = {"Q3_K", 256, 110, true},
    [QTYPE_Q4_K] = {"Q4_K", 256, 144, true},
    [QTYPE_Q5_K] = {"Q5_K", 256, 176, true},
    [QTYPE_Q6_K] = {"Q6_K", 256, 210, true},
    [QTYPE_Q8_K] = {"Q8_K", 256, 292, false},
    [QTYPE_IQ2_XXS] = {"IQ2_XXS", 256, 66, false},
    [QTYPE_IQ2_XS] = {"IQ2_XS", 256, 74, false},
    [QTYPE_IQ3_XXS] = {"IQ3_XXS", 256, 98, false},
    [QTYPE_IQ1_S] = {"IQ1_S", 256, 50, false},
    [QTYPE_IQ4_NL] = {"IQ4_NL", 32, 18, true},
    [QTYPE_IQ3_S] = {"IQ3_S", 256, 110, false},
    [QTYPE_IQ2_S] = {"IQ2_S", 256, 82, false},
    [QTYPE_IQ4_XS] = {"IQ4_XS", 256, 136, true},
    [QTYPE_I8] = {"I8", 1, 1, false},
    [QTYPE_I16] = {"I16", 1, 2, false},
    [QTYPE_I32] = {"I32", 1, 4, false},
    [QTYPE_I64] = {"I64", 1, 8, false},
    [QTYPE_F64] = {"F64", 1, 8, false},
    [QTYPE_IQ1_M] = {"IQ1_M", 256, 56, false},
    [QTYPE_BF16] = {"BF16", 1, 2, true},
    [QTYPE_TQ1_0] = {"TQ1_0", 256, 54, false},
    [QTYPE_TQ2_0] = {"TQ2_0", 256, 66, false},
    [QTYPE_MXFP4] = {"MXFP4", 32, 17, false},
    [QTYPE_NVFP4] = {"NVFP4", 64, 36, false},
    [QTYPE_Q1_0] = {"Q1_0", 128, 18, false},
};

const qtype_traits *qtype_info(uint32_t type) {
    if (type >= QTYPE_COUNT || table[type].name == NULL) return NULL;
    return &table[type];
}

const char *qtype_name(uint32_t type) {
    const qtype_traits *t = qtype_info(type);
    return t ? t->name : "unknown";
}

bool qtype_row_bytes(uint32_t type, int64_t n, size_t *out) {
    const qtype_traits *t = qtype_info(type);
    if (!t || n < 0 || n % t->block_size != 0) return false;
    uint64_t blocks = (uint64_t)(n / t->block_size);
    if (blocks > SIZE_MAX / t->type_size) return false;
    *out = (size_t)blocks * t->type_size;
    return true;
}
