/*
 * qpack.h — weights repacked once, at model load, into row-interleaved panels for the
 * prefill (and decode) matrix kernels of CPUs without AMX; activations packed per
 * product into token tiles that match them.
 *
 * Owns: the packed formats (which weight types have one, their byte layouts), the
 * portable repacking of GGUF rows into them, the activation tile builder, the scalar
 * reference kernel on the packed layout, and the dispatch of the SIMD kernels. Does
 * not own: the split over threads and tiles (ops/matmul.c) or the GGUF block formats
 * (quant.h).
 *
 * Layout (docs/kernels-matmul.md, "Packed weights"): rows go in groups of
 * QPACK_ROWS = 16 (the last group padded with zero rows); a group is a run of units
 * (32 elements, or a 256-element super-block for the K-quants), each unit holding the
 * 16 rows' quants interleaved four bytes at a time, [j][row][4] — so one 64-byte
 * vector is 4 consecutive quants of each of the 16 rows, what one vpdpbusd multiplies
 * by 4 activation bytes broadcast to every lane — followed by the 16 rows' scales.
 * The quants are unsigned (Q8_0: q + 128, Q4_0, Q6_K and Q2_K: q as stored, Q3_K: q + 4,
 * IQ4_NL: the table index, mapped to kvalue + 128 in the kernel), the offset going
 * through the activation sums. Each packed format has exactly the bytes of the original
 * rows (Q4_K and Q3_K: 64 more per 16 rows and super-block).
 *
 * F16 and BF16 have no quants to dot in integers: a unit is 32 elements, [j][row] two
 * bytes each, so one 32-byte vector holds element j of the 16 rows, widened to 16
 * floats (lanes = rows) and multiplied by token t's activation j broadcast (the tile
 * holds the activations as f32, [t][32] per unit). Per unit and token two running sums
 * (even and odd elements, fused multiply-adds in element order) start from zero and
 * their sum is added to the row's total: the same operations in every kernel, for any
 * number of tokens, so packed F16/BF16 rows give the same bits decoded one token at a
 * time or in a batch.
 *
 * A kernel call multiplies one group (16 rows) by one tile of 1..QPACK_TOK tokens over
 * the whole row length and writes y[t][r] for the rows that exist. The integer block
 * sums are those of vec_dot_ref, exactly; the float operations are the same in the
 * reference kernel and the SIMD ones (lanes are rows, so no horizontal sums), so the two
 * are bit-identical; against vec_dot_ref they differ in rounding only, within the bound
 * of docs/kernels-matmul.md.
 */
#ifndef EDDY_QUANT_QPACK_H
#define EDDY_QUANT_QPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/quant.h"

#define QPACK_ROWS 16 /* rows per group (one 16-lane vector of int32) */
#define QPACK_TOK 8   /* tokens per activation tile */

typedef enum {
    QPACK_NONE = 0,
    QPACK_Q8_0,
    QPACK_Q4_0,
    QPACK_Q4_1,
    QPACK_Q4_K,
    QPACK_Q6_K,
    QPACK_IQ4_NL,
    QPACK_Q5_0,
    QPACK_Q5_1,
    QPACK_Q5_K,
    QPACK_IQ4_XS,
    QPACK_Q3_K,
    QPACK_Q2_K,
    QPACK_F16,
    QPACK_BF16,
    QPACK_COUNT
} qpack_format;

/* The packed format of a weight type, or QPACK_NONE. */
qpack_format qpack_format_of(qtype t);

/* Elements per unit (32, or 256 for the K-quants). */
int64_t qpack_unit(qpack_format f);

/* Bytes of one unit of one group of weights, and of one unit of one activation tile. */
size_t qpack_unit_bytes(qpack_format f);
size_t qpack_act_unit_bytes(qpack_format f);

/* Bytes of a whole packed matrix of n_out rows of n_in (n_in a multiple of the unit);
 * SIZE_MAX on overflow. */
size_t qpack_weight_bytes(qpack_format f, int64_t n_in, int64_t n_out);

/* Repacks rows [0, n_out) of w (GGUF rows, row_bytes apart) into dst
 * (qpack_weight_bytes; any alignment, 64 is best). */
void qpack_weights(qpack_format f, const void *w, size_t row_bytes, int64_t n_in, int64_t n_out, void *dst);

/* Bytes of one unit of one row in the GGUF block format (the block, or the
 * super-block of the K-quants). */
size_t qpack_block_bytes(qpack_format f);

/* The inverse of qpack_weights for one row: units [unit0, unit0 + n_units) of row r
 * (0..15) of the packed group that starts at `group`, as the GGUF blocks they were
 * packed from, bit for bit, into dst (n_units * qpack_block_bytes). What reads the
 * weights as rows (the AMX prefill) reads them from the packed copy with it. */
void qpack_unpack_row(qpack_format f, const void *group, int64_t unit0, int64_t n_units, int r, void *dst);

/* One activation tile: nt (1..QPACK_TOK) rows in quant_dot_type (Q8_0 or Q8_K),
 * act_stride bytes apart, into dst (n_in / unit units of qpack_act_unit_bytes). */
void qpack_act_tile(qpack_format f, const void *act, size_t act_stride, int nt, int64_t n_in, void *dst);

/* y[t * y_stride + r] = row r of the group . token t of the tile, for t < nt, r < nrows
 * (1..16), over n_units units. */
typedef void (*qpack_kernel_fn)(int64_t n_units, const void *group, const void *tile, int nt, float *y,
                                int64_t y_stride, int nrows);

/* The scalar oracle of the kernels (the same operations, one lane at a time). */
void qpack_kernel_ref(qpack_format f, int64_t n_units, const void *group, const void *tile, int nt, float *y,
                      int64_t y_stride, int nrows);

/* The SIMD kernel for f at the ISA level in force, or NULL (no packed kernel here,
 * e.g. under EDDY_FORCE_REF=1: then nothing is packed and matmul runs the row kernels). */
qpack_kernel_fn qpack_kernel(qpack_format f);

/* The AVX-512 VNNI kernels and the AVX2 ones (compiled for x86-64 only; called when the
 * CPU has them: the dispatcher takes AVX-512 VNNI, else AVX2), and the NEON ones with the
 * dot-product instructions (aarch64 only). */
qpack_kernel_fn qpack_kernel_avx512(qpack_format f);
qpack_kernel_fn qpack_kernel_avx2(qpack_format f);
qpack_kernel_fn qpack_kernel_neon(qpack_format f);

#endif
