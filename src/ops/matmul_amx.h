/*
 * matmul_amx.h — prefill matrix products on AMX tiles (x86-64 with AMX-BF16).
 *
 * y[t][r] = sum_k bf16(x[t][k]) * bf16(W[r][k]) in float32, for the first
 * n_rows rows of W (a multiple of MATMUL_AMX_ROWS): the weights are dequantized to
 * float32 (the same values as dequantize_row_ref), rounded to bf16 and laid out as
 * tile operands a panel at a time; the activations are rounded to bf16 once per call.
 * Both roundings are to nearest even, so against matmul_ref (8-bit activations) the
 * result differs by about the activation quantization's own error; the test states
 * the bound. The caller (matmul.c) decides when to use it (matmul_amx_usable) and
 * runs any remaining rows on the other kernels.
 */
#ifndef EDDY_OPS_MATMUL_AMX_H
#define EDDY_OPS_MATMUL_AMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "ops/matmul.h"

#define MATMUL_AMX_ROWS 32   /* weight rows per block (two 16-column tiles) */
#define MATMUL_AMX_TOKENS 32 /* token rows per block (two 16-row tiles) */
#define MATMUL_AMX_MIN_TOKENS 16 /* fewer tokens go to the 8-bit kernels */

/* True when the CPU and OS allow AMX and W's type and row length suit it:
 * quantized types and BF16 (not F32 or F16, whose precision bf16 would cut),
 * n_in a multiple of 32, n_tok >= MATMUL_AMX_MIN_TOKENS and n_out >= MATMUL_AMX_ROWS. */
bool matmul_amx_usable(const matmul_weight *w, int64_t n_tok);

/* Scratch bytes for n_tok token rows (the bf16 activations, rows padded to
 * MATMUL_AMX_TOKENS), or SIZE_MAX on overflow. */
size_t matmul_amx_scratch_bytes(const matmul_weight *w, int64_t n_tok);

/* Rows [0, n_rows) of y; n_rows a multiple of MATMUL_AMX_ROWS, <= w->n_out. */
void matmul_amx(threadpool *pool, const matmul_weight *w, int64_t n_rows, const float *x, int64_t x_stride,
                int64_t n_tok, float *y, int64_t y_stride, void *scratch, size_t scratch_bytes);

#endif
