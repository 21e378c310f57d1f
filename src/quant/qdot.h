/*
 * qdot.h — fast dot products of weight rows with activation rows, and fast
 * activation quantization, picked per weight type and ISA at run time.
 *
 * Owns: the kernel contract (qdot_fn), the table of ISA variants, the dispatcher
 * and the activation quantizers. Does not own: block layouts and the scalar
 * oracles (quant.h: vec_dot_ref, quantize_row_q8_0_ref / _q8_K_ref), or the
 * matrix product that drives the kernels over rows and threads (ops/matmul.h).
 *
 * One kernel call takes one weight row and up to QDOT_MAX_ACT activation rows, so
 * that a prefill tile unpacks each weight block once and uses it for several
 * tokens; a single dot product is the n_act = 1 case. Activation rows are in
 * quant_dot_type(weight type): F32, Q8_0 or Q8_K. Some variants also offer 4-row
 * kernels (qgemm4_fn) that share the activation work over four weight rows.
 *
 * Variants, each needing an ISA level (base/isa.h) and maybe an extension of it
 * (docs/kernels-matmul.md has the full table):
 *   ref           ISA_REF: vec_dot_ref per activation row (the oracle; EDDY_FORCE_REF=1)
 *   avx2          ISA_AVX2 (AVX2 + FMA + F16C), integer dots with vpmaddubsw
 *   avx512        ISA_AVX512 + ISA_EXT_AVX512VNNI (vpdpbusd); AVX-512 parts without
 *                 VNNI (Skylake-SP) run avx2
 *   neon          ISA_NEON, integer dots with smull/sadalp
 *   neon_dotprod  ISA_NEON + ISA_EXT_DOTPROD (sdot)
 * The dispatcher takes the best available variant that has a kernel for the type.
 *
 * Accuracy: a kernel equals vec_dot_ref up to the order of float32 operations
 * (integer block sums are exact in both); tests/test_quant_simd.c states and
 * checks the bound. The activation quantizers are bit-identical to the _ref ones.
 */
#ifndef EDDY_QUANT_QDOT_H
#define EDDY_QUANT_QDOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/quant.h"

/* The most activation rows one kernel call takes. */
#define QDOT_MAX_ACT 4

/* out[c] = sum_i w_row[i] * act_c[i] for c < n_act, where act_c = (const char *)act +
 * c * act_stride is a row in quant_dot_type(type). n >= 0 is a multiple of the block
 * size; 1 <= n_act <= QDOT_MAX_ACT; rows aligned as quant_row_align says. */
typedef void (*qdot_fn)(int64_t n, const void *w_row, const void *act, size_t act_stride, int n_act, float *out);

/* Four weight rows at once: out[4 r + c] = dot(weight row r, activation row c) for
 * r < 4, c < n_act (1..4), weight row r at (const char *)w + r * w_stride. Offered
 * only where it is faster than one-row calls (qdot_gemm4 returns NULL elsewhere). */
typedef void (*qgemm4_fn)(int64_t n, const void *w, size_t w_stride, const void *act, size_t act_stride, int n_act,
                          float *out);

/* dst = the n floats of x in an activation format (n a multiple of its block). */
typedef void (*qquant_fn)(const float *x, void *dst, int64_t n);

typedef struct {
    const char *name;      /* "ref", "avx2", "avx512", "neon", "neon_dotprod" */
    bool available;        /* isa_available() of its level, isa_has() of its extension ("ref": always) */
    qdot_fn (*kernel)(qtype weight_type); /* NULL where the variant has no kernel */
    qquant_fn q8_0, q8_K;  /* activation quantizers; NULL where it has none */
    qgemm4_fn (*gemm4)(qtype weight_type); /* NULL, or a function returning NULL where it has none */
} qdot_variant;

/* Every variant compiled for this architecture, best last; *n gets the count. */
const qdot_variant *qdot_variants(int *n);

/* The dispatched kernel for a supported weight type, and the variant it comes from. */
qdot_fn qdot_kernel(qtype weight_type);
const char *qdot_kernel_name(qtype weight_type);

/* The 4 x 4 tile of the variant qdot_kernel comes from, or NULL. */
qgemm4_fn qdot_gemm4(qtype weight_type);

/* One dot product through the dispatched kernel. */
float qdot(qtype weight_type, int64_t n, const void *w_row, const void *act_row);

/* Dispatched activation conversion: F32 (copy), Q8_0 or Q8_K; bit-identical to
 * quantize_row_ref. */
void quantize_row_act(qtype act_type, const float *x, void *dst, int64_t n);

/* The reference "kernel": vec_dot_ref for each activation row. */
void qdot_ref(qtype weight_type, int64_t n, const void *w_row, const void *act, size_t act_stride, int n_act,
              float *out);

/* ==== ISA variants (compiled only for their architecture) ==== */

qdot_fn qdot_kernel_avx2(qtype weight_type);
void quantize_row_q8_0_avx2(const float *x, void *dst, int64_t n);
void quantize_row_q8_K_avx2(const float *x, void *dst, int64_t n);

qdot_fn qdot_kernel_avx512(qtype weight_type);
qgemm4_fn qdot_gemm4_avx512(qtype weight_type);
void quantize_row_q8_0_avx512(const float *x, void *dst, int64_t n);
void quantize_row_q8_K_avx512(const float *x, void *dst, int64_t n);

qdot_fn qdot_kernel_neon(qtype weight_type);
qdot_fn qdot_kernel_neon_dotprod(qtype weight_type);
void quantize_row_q8_0_neon(const float *x, void *dst, int64_t n);
void quantize_row_q8_K_neon(const float *x, void *dst, int64_t n);

#endif
