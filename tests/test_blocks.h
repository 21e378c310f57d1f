/*
 * test_blocks.h — facts about quantized block layouts that several tests need.
 */
#ifndef EDDY_TEST_BLOCKS_H
#define EDDY_TEST_BLOCKS_H

#include "quant/quant.h"

/* Byte offsets of the fp16 scale fields of a block, -1 terminated (as in
 * scripts/gen_quant_golden.py): tests overwrite them to keep random blocks' scales sane. */
static inline const int *test_fp16_fields(qtype t) {
    static const int d0[] = {0, -1}, dm0[] = {0, 2, -1}, q2k[] = {80, 82, -1}, q3k[] = {108, -1},
                     q6k[] = {208, -1}, none[] = {-1};
    switch (t) {
    case QTYPE_Q4_0:
    case QTYPE_Q5_0:
    case QTYPE_Q8_0:
    case QTYPE_IQ4_NL:
    case QTYPE_IQ4_XS: return d0;
    case QTYPE_Q4_1:
    case QTYPE_Q5_1:
    case QTYPE_Q4_K:
    case QTYPE_Q5_K: return dm0;
    case QTYPE_Q2_K: return q2k;
    case QTYPE_Q3_K: return q3k;
    case QTYPE_Q6_K: return q6k;
    default: return none;
    }
}

#endif
