/*
 * ck_quant.cu — quantized weights on the GPU: the 32-element unit decoders of every
 * format, the matrix-vector kernel that dequantizes on the fly (decode and batches of
 * up to CK_GEMV_MAX_TOK rows), dequantization to f16 for the tensor-core products,
 * and embedding look-up.
 *
 * A unit is 32 consecutive elements of a row: one block of the 32-element formats, one
 * sub-block of 32 of the 256-element K-quants (two of Q2_K/Q3_K/Q6_K's 16-element scale
 * groups). Each decoder follows dequant_ref.c's arithmetic (the scale formed first,
 * then applied), so a dequantized weight is the CPU's bit for bit; the dot products
 * sum in another order than the CPU and agree within float rounding.
 * Blocks are 2-byte aligned (every block size is even and rows start 32-byte aligned),
 * so fields are read as 16-bit words.
 */
#include "cuda/ck_device.h"
#include <stdint.h>

#include <type_traits>

#include "cuda/ck.h"
#include "cuda/ck_block.h"
#include "cuda/ck_levels.h"
#include "cuda/ck_q8.h"

namespace {

/* Elements per block and bytes per block */
template <int T> struct fmt;
template <> struct fmt<T_F32> { enum { QK = 1, BYTES = 4 }; };
template <> struct fmt<T_F16> { enum { QK = 1, BYTES = 2 }; };
template <> struct fmt<T_BF16> { enum { QK = 1, BYTES = 2 }; };
template <> struct fmt<T_Q4_0> { enum { QK = 32, BYTES = 18 }; };
template <> struct fmt<T_Q4_1> { enum { QK = 32, BYTES = 20 }; };
template <> struct fmt<T_Q5_0> { enum { QK = 32, BYTES = 22 }; };
template <> struct fmt<T_Q5_1> { enum { QK = 32, BYTES = 24 }; };
template <> struct fmt<T_Q8_0> { enum { QK = 32, BYTES = 34 }; };
template <> struct fmt<T_IQ4_NL> { enum { QK = 32, BYTES = 18 }; };
template <> struct fmt<T_Q2_K> { enum { QK = 256, BYTES = 84 }; };
template <> struct fmt<T_Q3_K> { enum { QK = 256, BYTES = 110 }; };
template <> struct fmt<T_Q4_K> { enum { QK = 256, BYTES = 144 }; };
template <> struct fmt<T_Q5_K> { enum { QK = 256, BYTES = 176 }; };
template <> struct fmt<T_Q6_K> { enum { QK = 256, BYTES = 210 }; };
template <> struct fmt<T_IQ4_XS> { enum { QK = 256, BYTES = 136 }; };

/* Unit u of a row (elements [32u, 32u + 32)) into w; for the float types elements past
 * n_in read as 0. */
template <int T> __device__ __forceinline__ void unit(const uint8_t *row, int64_t u, int64_t n_in, float w[32]);

template <> __device__ __forceinline__ void unit<T_F32>(const uint8_t *row, int64_t u, int64_t n_in, float w[32]) {
    const float *r = (const float *)row + 32 * u;
    const int64_t left = n_in - 32 * u;
#pragma unroll
    for (int i = 0; i < 32; i++) w[i] = i < left ? r[i] : 0.0f;
}
template <> __device__ __forceinline__ void unit<T_F16>(const uint8_t *row, int64_t u, int64_t n_in, float w[32]) {
    const uint16_t *r = (const uint16_t *)row + 32 * u;
    const int64_t left = n_in - 32 * u;
#pragma unroll
    for (int i = 0; i < 32; i++) w[i] = i < left ? h2f(r[i]) : 0.0f;
}
template <> __device__ __forceinline__ void unit<T_BF16>(const uint8_t *row, int64_t u, int64_t n_in, float w[32]) {
    const uint16_t *r = (const uint16_t *)row + 32 * u;
    const int64_t left = n_in - 32 * u;
#pragma unroll
    for (int i = 0; i < 32; i++) w[i] = i < left ? __uint_as_float((uint32_t)r[i] << 16) : 0.0f;
}
/* Q4_0 and IQ4_NL: an fp16 scale and 16 bytes of nibbles, low nibbles first; the level
 * of nibble q is q - 8 or the IQ4 table's */
template <bool NL> __device__ __forceinline__ void unit_nibbles(const uint8_t *row, int64_t u, float w[32]) {
    const uint8_t *b = row + 18 * u;
    const float d = h2f(ld16(b));
    uint32_t q[4];
    ld128(b + 2, q);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const int x = byte_of(q, j);
        w[j] = d * (float)(NL ? kvalues[x & 15] : (x & 15) - 8);
        w[j + 16] = d * (float)(NL ? kvalues[x >> 4] : (x >> 4) - 8);
    }
}
template <> __device__ __forceinline__ void unit<T_Q4_0>(const uint8_t *row, int64_t u, int64_t, float w[32]) {
    unit_nibbles<false>(row, u, w);
}
template <> __device__ __forceinline__ void unit<T_IQ4_NL>(const uint8_t *row, int64_t u, int64_t, float w[32]) {
    unit_nibbles<true>(row, u, w);
}
template <> __device__ __forceinline__ void unit<T_Q4_1>(const uint8_t *row, int64_t u, int64_t, float w[32]) {
    const uint8_t *b = row + 20 * u;
    const float d = h2f(ld16(b)), m = h2f(ld16(b + 2));
    uint32_t q[4];
    ld128(b + 4, q);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const int x = byte_of(q, j);
        w[j] = __fadd_rn(__fmul_rn(d, (float)(x & 15)), m);
        w[j + 16] = __fadd_rn(__fmul_rn(d, (float)(x >> 4)), m);
    }
}
template <> __device__ __forceinline__ void unit<T_Q5_0>(const uint8_t *row, int64_t u, int64_t, float w[32]) {
    const uint8_t *b = row + 22 * u;
    const float d = h2f(ld16(b));
    const uint32_t qh = ld32(b + 2);
    uint32_t q[4];
    ld128(b + 6, q);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const int x = byte_of(q, j);
        const int q0 = (x & 15) | (int)(((qh >> j) & 1) << 4), q1 = (x >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
        w[j] = d * (float)(q0 - 16);
        w[j + 16] = d * (float)(q1 - 16);
    }
}
template <> __device__ __forceinline__ void unit<T_Q5_1>(const uint8_t *row, int64_t u, int64_t, float w[32]) {
    const uint8_t *b = row + 24 * u;
    const float d = h2f(ld16(b)), m = h2f(ld16(b + 2));
    const uint32_t qh = ld32(b + 4);
    uint32_t q[4];
    ld128(b + 8, q);
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const int x = byte_of(q, j);
        const int q0 = (x & 15) | (int)(((qh >> j) & 1) << 4), q1 = (x >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
        w[j] = __fadd_rn(__fmul_rn(d, (float)q0), m);
        w[j + 16] = __fadd_rn(__fmul_rn(d, (float)q1), m);
    }
}
template <> __device__ __forceinline__ void unit<T_Q8_0>(const uint8_t *row, int64_t u, int64_t, float w[32]) {
    const uint8_t *b = row + 34 * u;
    const float d = h2f(ld16(b));
#pragma unroll
    for (int i = 0; i < 32; i += 2) {
        const uint16_t p = ld16(b + 2 + i);
        w[i] = (float)(int8_t)(p & 255) * d;
        w[i + 1] = (float)(int8_t)(p >> 8) * d;
    }
}
template <> __device__ __forceinline__ void unit<T_Q2_K>(const uint8_t *row, int64_t u, int64_t, float w[32]) {
    const uint8_t *b = row + 84 * (u >> 3);
    const int sub = (int)(u & 7), h = sub >> 2, s = sub & 3;
    const float d = h2f(ld16(b + 80)), dmin = h2f(ld16(b + 82));
    uint32_t q[8];
    ld128(b + 16 + 32 * h, q);
    ld128(b + 16 + 32 * h + 16, q + 4);
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int sc = b[2 * sub + half];
        const float dl = __fmul_rn(d, (float)(sc & 15)), ml = __fmul_rn(dmin, (float)(sc >> 4));
#pragma unroll
        for (int l = 16 * half; l < 16 * half + 16; l++) {
            const int x = (int)((q[l >> 2] >> (8 * (l & 3))) & 255);
            w[l] = __fsub_rn(__fmul_rn(dl, (float)((x >> (2 * s)) & 3)), ml);
        }
    }
}
template <> __device__ __forceinline__ void unit<T_Q3_K>(const uint8_t *row, int64_t u, int64_t, float w[32]) {
    const uint8_t *b = row + 110 * (u >> 3);
    const int sub = (int)(u & 7), h = sub >> 2, s = sub & 3;
    const float d = h2f(ld16(b + 108));
    const uint8_t *sc = b + 96;
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int j = 2 * sub + half;
        const int lo = (j < 8 ? sc[j] : sc[j - 8] >> 4) & 15, hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
        const float dl = __fmul_rn(d, (float)((lo | hi << 4) - 32));
#pragma unroll
        for (int l = 16 * half; l < 16 * half + 16; l++) {
            const int q = ((b[32 + 32 * h + l] >> (2 * s)) & 3) - (((b[l] >> sub) & 1) ? 0 : 4);
            w[l] = __fmul_rn(dl, (float)q);
        }
    }
}
template <> __device__ __forceinline__ void unit<T_Q4_K>(const uint8_t *row, int64_t u, int64_t, float w[32]) {
    const uint8_t *b = row + 144 * (u >> 3);
    const int j = (int)(u & 7);
    const float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
    int sc, m;
    scale_min_k4(b + 4, j, &sc, &m);
    const float dl = __fmul_rn(d, (float)sc), ml = __fmul_rn(dmin, (float)m);
    uint32_t q[8];
    ld128(b + 16 + 32 * (j / 2), q);
    ld128(b + 16 + 32 * (j / 2) + 16, q + 4);
    const int shift = 4 * (j % 2);
#pragma unroll
    for (int l = 0; l < 32; l++) {
        const int x = (int)((q[l >> 2] >> (8 * (l & 3))) & 255);
        w[l] = __fsub_rn(__fmul_rn(dl, (float)((x >> shift) & 15)), ml);
    }
}
template <> __device__ __forceinline__ void unit<T_Q5_K>(const uint8_t *row, int64_t u, int64_t, float w[32]) {
    const uint8_t *b = row + 176 * (u >> 3);
    const int j = (int)(u & 7);
    const float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
    int sc, m;
    scale_min_k4(b + 4, j, &sc, &m);
    const float dl = __fmul_rn(d, (float)sc), ml = __fmul_rn(dmin, (float)m);
    uint32_t q[8], qh[8];
    ld128(b + 48 + 32 * (j / 2), q);
    ld128(b + 48 + 32 * (j / 2) + 16, q + 4);
    ld128(b + 16, qh);
    ld128(b + 32, qh + 4);
    const int shift = 4 * (j % 2);
#pragma unroll
    for (int l = 0; l < 32; l++) {
        const int x = (int)((q[l >> 2] >> (8 * (l & 3))) & 255), hb = (int)((qh[l >> 2] >> (8 * (l & 3))) & 255);
        const int v = ((x >> shift) & 15) | (((hb >> j) & 1) << 4);
        w[l] = __fsub_rn(__fmul_rn(dl, (float)v), ml);
    }
}
template <> __device__ __forceinline__ void unit<T_Q6_K>(const uint8_t *row, int64_t u, int64_t, float w[32]) {
    const uint8_t *b = row + 210 * (u >> 3);
    const int sub = (int)(u & 7), h = sub >> 2, r0 = 32 * (sub & 3);
    const float d = h2f(ld16(b + 208));
    /* elements r0 + l of half h: low nibble from ql[64h + (r % 64)] >> 4 (r / 64), high bits
     * from qh[32h + r % 32] >> 2 (r / 32) */
    uint32_t ql[8], qh[8];
    ld128(b + 64 * h + (r0 % 64), ql);
    ld128(b + 64 * h + (r0 % 64) + 16, ql + 4);
    ld128(b + 128 + 32 * h, qh);
    ld128(b + 128 + 32 * h + 16, qh + 4);
    const int lshift = 4 * (r0 / 64), hshift = 2 * (r0 / 32);
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const float dl = __fmul_rn(d, (float)(int8_t)b[192 + 2 * sub + half]);
#pragma unroll
        for (int l = 16 * half; l < 16 * half + 16; l++) {
            const int lo = (int)((ql[l >> 2] >> (8 * (l & 3) + lshift)) & 15);
            const int hi = (int)((qh[l >> 2] >> (8 * (l & 3) + hshift)) & 3);
            w[l] = __fmul_rn(dl, (float)((lo | hi << 4) - 32));
        }
    }
}
template <> __device__ __forceinline__ void unit<T_IQ4_XS>(const uint8_t *row, int64_t u, int64_t, float w[32]) {
    const uint8_t *b = row + 136 * (u >> 3);
    const int j = (int)(u & 7);
    const float d = h2f(ld16(b));
    const int scales_h = ld16(b + 2);
    const int ls = ((b[4 + j / 2] >> (4 * (j % 2))) & 15) | (((scales_h >> (2 * j)) & 3) << 4);
    const float dl = __fmul_rn(d, (float)(ls - 32));
    uint32_t q[4];
    ld128(b + 8 + 16 * j, q);
#pragma unroll
    for (int l = 0; l < 16; l++) {
        const int x = byte_of(q, l);
        w[l] = __fmul_rn(dl, (float)kvalues[x & 15]);
        w[l + 16] = __fmul_rn(dl, (float)kvalues[x >> 4]);
    }
}

/* ==== y = x W^T, one warp per output row ==== */

#define GEMV_WARPS 8

/* acc[t] = the lane's share of row . x[t] for the NT rows of x (n_in apart): units lane,
 * lane + 32, ... dequantized to f32 */
template <int T, int NT>
__device__ __forceinline__ void float_row_products(const uint8_t *row, int64_t n_in, const float *x, float acc[NT]) {
    const int lane = threadIdx.x & 31;
    const int64_t n_units = (n_in + 31) / 32;
    const bool vec4 = n_in % 4 == 0;
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    for (int64_t u = lane; u < n_units; u += 32) {
        float w[32];
        unit<T>(row, u, n_in, w);
        const int64_t e0 = 32 * u, left = n_in - e0;
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const float *xr = x + (size_t)t * n_in + e0;
            float s = 0.0f;
            if (vec4 && left >= 32) {
#pragma unroll
                for (int i = 0; i < 32; i += 4) {
                    const float4 v = *(const float4 *)(xr + i);
                    s = fmaf(w[i], v.x, s);
                    s = fmaf(w[i + 1], v.y, s);
                    s = fmaf(w[i + 2], v.z, s);
                    s = fmaf(w[i + 3], v.w, s);
                }
            } else {
#pragma unroll
                for (int i = 0; i < 32; i++)
                    if (i < left) s = fmaf(w[i], xr[i], s);
            }
            acc[t] += s;
        }
    }
}

template <int T, int NT>
__global__ void __launch_bounds__(32 * GEMV_WARPS) gemv_kernel(const uint8_t *W, size_t row_bytes, int64_t n_in,
                                                               int64_t n_out, const float *x, float *y) {
    ck_pdl_entry();
    const int lane = threadIdx.x & 31;
    const int64_t r = (int64_t)blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    if (r >= n_out) return;
    float acc[NT];
    float_row_products<T, NT>(W + (size_t)r * row_bytes, n_in, x, acc);
#pragma unroll
    for (int t = 0; t < NT; t++) {
        float s = acc[t];
        s = warp_sum(s);
        if (lane == 0) y[(size_t)t * n_out + r] = s;
    }
}

/* The experts' products in float (ck_gemv_experts): blockIdx.y is the slot s, whose row
 * of x is s / x_div and whose matrix is expert sel[s]'s, n_out rows from the one before */
template <int T>
__global__ void __launch_bounds__(32 * GEMV_WARPS)
    gemv_experts_kernel(const uint8_t *W, size_t row_bytes, int64_t n_in, int64_t n_out, const float *x, float *y,
                        const int32_t *sel, int x_div) {
    ck_pdl_entry();
    const int lane = threadIdx.x & 31, s = blockIdx.y;
    const int64_t r = (int64_t)blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    if (r >= n_out) return;
    const uint8_t *row = W + ((size_t)sel[s] * (size_t)n_out + (size_t)r) * row_bytes;
    float acc[1];
    float_row_products<T, 1>(row, n_in, x + (size_t)(s / x_div) * n_in, acc);
    acc[0] = warp_sum(acc[0]);
    if (lane == 0) y[(size_t)s * n_out + r] = acc[0];
}

template <int T>
void gemv_t(const void *W, size_t row_bytes, int64_t n_in, int64_t n_out, const float *x, int64_t n_tok, float *y,
            cudaStream_t st) {
    const dim3 grid((unsigned)((n_out + GEMV_WARPS - 1) / GEMV_WARPS)), block(32 * GEMV_WARPS);
    const uint8_t *w = (const uint8_t *)W;
    switch (n_tok) {
    case 1: CK_LAUNCH(grid, block, 0, st, gemv_kernel<T, 1>)(w, row_bytes, n_in, n_out, x, y); break;
    case 2: CK_LAUNCH(grid, block, 0, st, gemv_kernel<T, 2>)(w, row_bytes, n_in, n_out, x, y); break;
    case 3: CK_LAUNCH(grid, block, 0, st, gemv_kernel<T, 3>)(w, row_bytes, n_in, n_out, x, y); break;
    case 4: CK_LAUNCH(grid, block, 0, st, gemv_kernel<T, 4>)(w, row_bytes, n_in, n_out, x, y); break;
    case 5: CK_LAUNCH(grid, block, 0, st, gemv_kernel<T, 5>)(w, row_bytes, n_in, n_out, x, y); break;
    case 6: CK_LAUNCH(grid, block, 0, st, gemv_kernel<T, 6>)(w, row_bytes, n_in, n_out, x, y); break;
    case 7: CK_LAUNCH(grid, block, 0, st, gemv_kernel<T, 7>)(w, row_bytes, n_in, n_out, x, y); break;
    default: CK_LAUNCH(grid, block, 0, st, gemv_kernel<T, 8>)(w, row_bytes, n_in, n_out, x, y); break;
    }
}

/* ==== y = x W^T on 8-bit activations: integer dot products (__dp4a) ====
 *
 * The activations are quantized per 32-element unit of a row (ck_q8.h: int8 levels, a
 * scale, the sums of the levels over each half of 16), by the kernel that made them or
 * by quantize_q8x_kernel once per product. A weight unit is read as int8 levels
 * (ck_levels.h's iunit<T>: four per 32-bit word, elements 0..15 in q[0..3], 16..31 in
 * q[4..7]) with an integer offset and, per half of 16, a scale and a min, and multiplied
 * as ck_levels.h writes out. Each lane takes one unit at a time, as gemv_kernel; every
 * integer sum is exact, the float operations are per unit: the result differs from x W^T
 * with x dequantized from its 8-bit form only by float rounding. */

/* One warp per unit of the n rows of x (n_in a multiple of 32): the 8-bit levels into
 * xq (n, n_in), the unit's scale and half sums into xs (n, n_in / 32). */
__global__ void quantize_q8x_kernel(const float *x, int64_t n_units, int8_t *xq, q8x *xs) {
    ck_pdl_entry();
    const int lane = threadIdx.x & 31;
    const int64_t i = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (i >= n_units) return; /* i is the warp's: the whole warp leaves */
    q8_store_unit(x[32 * i + lane], i, xq, xs);
}

/* The integer kernels' warps: wpr warps (1, 2, 4 or 8) take a row together, so that a
 * product of few rows still keeps many loads in flight. Warp w of a block takes row
 * blockIdx.x * (GEMV_WARPS / wpr) + w / wpr of the parts' rows and the row's items
 * (units, pieces) lane + 32 (w % wpr), stepping 32 wpr. */
struct gemv_warp {
    const uint8_t *row; /* the row's weights */
    float *y;           /* its part's output (n_tok, n_out) */
    int64_t r, n_out;   /* the row within its part */
    int first, step;
    int part;  /* the row's part (0 for a dead warp) */
    bool live; /* the row exists (a dead warp still takes part in the block's sums) */
};
__device__ __forceinline__ gemv_warp gemv_warp_at(int wpr, const gemv_parts &ps) {
    const int w = threadIdx.x >> 5;
    gemv_warp g = {(const uint8_t *)ps.p[0].W, ps.p[0].y, 0, 1, 0, 0, 0, false};
    int64_t r = (int64_t)blockIdx.x * (GEMV_WARPS / wpr) + w / wpr;
    g.first = (threadIdx.x & 31) + 32 * (w % wpr);
    g.step = 32 * wpr;
#pragma unroll
    for (int k = 0; k < CK_GEMV_MAX_PARTS; k++) /* constant indices: the parts stay parameters */
        if (!g.live && k < ps.n) {
            if (r < ps.p[k].n_out) {
                g.live = true, g.r = r, g.n_out = ps.p[k].n_out, g.y = ps.p[k].y, g.part = k;
                g.row = (const uint8_t *)ps.p[k].W + (size_t)r * ps.p[k].row_bytes;
            } else {
                r -= ps.p[k].n_out;
            }
        }
    return g;
}
/* y[t][r] = the sum of acc[t] over the warp, then over the row's wpr warps */
template <int NT> __device__ __forceinline__ void gemv_store(const float acc[NT], int wpr, const gemv_warp &g) {
    __shared__ float part[GEMV_WARPS][NT];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    float v[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) {
        v[t] = acc[t];
        v[t] = warp_sum(v[t]);
    }
    if (wpr == 1) {
        if (lane == 0 && g.live)
            for (int t = 0; t < NT; t++) g.y[(size_t)t * g.n_out + g.r] = v[t];
        return;
    }
    if (lane == 0)
        for (int t = 0; t < NT; t++) part[w][t] = v[t];
    __syncthreads();
    if (lane == 0 && w % wpr == 0 && g.live)
        for (int t = 0; t < NT; t++) {
            float sum = 0.0f;
            for (int k = 0; k < wpr; k++) sum += part[w + k][t];
            g.y[(size_t)t * g.n_out + g.r] = sum;
        }
}

/* The kernel's items (ITEM policies below): a 32-element unit of a row (unit_item<T>, any
 * format with a level decoder), or a piece of a Q4_K / Q6_K super-block (q4k_item,
 * q6k_item). Each policy has its piece (what a lane loads of an item), count (items in a
 * row of n_in), load (an item's piece, from the row) and dot (the piece times each of the
 * NT rows of x: v[t]). */
template <int T> struct unit_item {
    typedef iw piece;
    static __device__ __forceinline__ int64_t count(int64_t n_in) { return n_in / 32; }
    static __device__ __forceinline__ void load(const uint8_t *row, int64_t u, piece &w) { iunit<T>(row, u, w); }
    template <int NT>
    static __device__ __forceinline__ void dot(const piece &w, int64_t u, int64_t n_in, const int8_t *xq,
                                               const q8x *xs, float v[NT]) {
        const int64_t n_units = n_in / 32;
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const int *a = (const int *)(xq + (size_t)t * n_in + 32 * u); /* 32-byte aligned */
            int s0 = 0, s1 = 0;
#pragma unroll
            for (int i = 0; i < 4; i++)
                s0 = __dp4a((int)w.q[i], a[i], s0), s1 = __dp4a((int)w.q[4 + i], a[4 + i], s1);
            const q8x x = xs[t * n_units + u];
            const float h0 = __fadd_rn(__fmul_rn(w.d0, (float)(s0 + w.off * x.x0)), __fmul_rn(w.m0, (float)x.x0));
            const float h1 = __fadd_rn(__fmul_rn(w.d1, (float)(s1 + w.off * x.x1)), __fmul_rn(w.m1, (float)x.x1));
            v[t] = __fmul_rn(x.d, __fadd_rn(h0, h1));
        }
    }
};

/* ==== Q4_K and Q6_K, the bulk of a Q4_K_M file: a lane per piece of a super-block ====
 * unit_item gives each lane a 32-element unit, so a warp's loads of one field land on 32
 * units of several super-blocks and a unit takes 8 to 16 load instructions. Here the
 * lanes of a warp take consecutive pieces of the row's super-blocks instead: Q4_K's 128
 * bytes of nibbles in 8 pieces of 16 bytes (one 16-byte load each, rows 16-byte aligned),
 * Q6_K's 256 elements in 8 pieces of 32 (lane (half h, quarter g): elements l in
 * [8g, 8g + 8) of each of the half's four groups of 32, as dequant_ref lays them out).
 * Same arithmetic per 16 elements as iunit<T> and unit_item. */

/* piece c = i % 8 of super-block sb = i / 8 of a row: the block's 16-byte header and the
 * piece's 16 bytes of nibbles (the low ones elements 16 * (c % 2) + [0, 16) of sub-block
 * 2 * (c / 2), the high ones the same of the next sub-block) */
struct q4k_item {
    struct piece {
        uint4 h, qv;
    };
    static __device__ __forceinline__ int64_t count(int64_t n_in) { return n_in / 256 * 8; }
    static __device__ __forceinline__ void load(const uint8_t *row, int64_t i, piece &p) {
        const uint8_t *b = row + 144 * (i >> 3);
        p.h = *(const uint4 *)b, p.qv = *(const uint4 *)(b + 16 + 16 * (i & 7));
    }
    template <int NT>
    static __device__ __forceinline__ void dot(const piece &p, int64_t i, int64_t n_in, const int8_t *xq,
                                               const q8x *xs, float v[NT]) {
        const int64_t sb = i >> 3, n_units = n_in / 32;
        const int c = (int)(i & 7), half = c & 1;
        int sc0, m0, sc1, m1;
        k4_scale_min(p.h, c & ~1, &sc0, &m0);
        k4_scale_min(p.h, (c & ~1) + 1, &sc1, &m1);
        const float d = h2f((uint16_t)(p.h.x & 0xFFFF)), dmin = h2f((uint16_t)(p.h.x >> 16));
        const float d0 = __fmul_rn(d, (float)sc0), d1 = __fmul_rn(d, (float)sc1);
        const float n0 = __fmul_rn(dmin, (float)m0), n1 = __fmul_rn(dmin, (float)m1);
        const uint32_t q[4] = {p.qv.x, p.qv.y, p.qv.z, p.qv.w};
        const int64_t u0 = 8 * sb + (c & ~1); /* the unit of the low nibbles; u0 + 1 the high ones' */
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const int8_t *xa = xq + (size_t)t * n_in + 32 * u0 + 16 * half;
            const int4 a0 = *(const int4 *)xa, a1 = *(const int4 *)(xa + 32);
            const int a0w[4] = {a0.x, a0.y, a0.z, a0.w}, a1w[4] = {a1.x, a1.y, a1.z, a1.w};
            int s0 = 0, s1 = 0;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                s0 = __dp4a((int)(q[k] & 0x0F0F0F0Fu), a0w[k], s0);
                s1 = __dp4a((int)((q[k] >> 4) & 0x0F0F0F0Fu), a1w[k], s1);
            }
            const q8x x0 = xs[t * n_units + u0], x1 = xs[t * n_units + u0 + 1];
            const int X0 = half ? x0.x1 : x0.x0, X1 = half ? x1.x1 : x1.x0;
            const float h0 = __fsub_rn(__fmul_rn(d0, (float)s0), __fmul_rn(n0, (float)X0));
            const float h1 = __fsub_rn(__fmul_rn(d1, (float)s1), __fmul_rn(n1, (float)X1));
            v[t] = __fadd_rn(__fmul_rn(x0.d, h0), __fmul_rn(x1.d, h1));
        }
    }
};

/* item i of a row: half h = (i / 4) % 2, quarter g = i % 4 of super-block sb = i / 8:
 * l in [8g, 8g + 8) of ql[l], ql[l + 32], qh[l] of the half, the elements 128h + 32e + l
 * for e = 0..3 (e's scale 8h + 2e + g / 2) */
struct q6k_item {
    struct piece {
        uint32_t qa[2], qb[2], qh[2], sw[2];
        uint16_t d;
    };
    static __device__ __forceinline__ int64_t count(int64_t n_in) { return n_in / 256 * 8; }
    static __device__ __forceinline__ void load(const uint8_t *row, int64_t i, piece &p) {
        const uint8_t *b = row + 210 * (i >> 3);
        const int h = (int)(i >> 2) & 1, g = (int)(i & 3);
        ldw<2>(b + 64 * h + 8 * g, p.qa);
        ldw<2>(b + 64 * h + 32 + 8 * g, p.qb);
        ldw<2>(b + 128 + 32 * h + 8 * g, p.qh);
        ldw<2>(b + 192 + 8 * h, p.sw);
        p.d = ld16(b + 208);
    }
    template <int NT>
    static __device__ __forceinline__ void dot(const piece &p, int64_t i, int64_t n_in, const int8_t *xq,
                                               const q8x *xs, float v[NT]) {
        const int64_t sb = i >> 3, n_units = n_in / 32;
        const int h = (int)(i >> 2) & 1, g = (int)(i & 3);
        const float d = h2f(p.d);
#pragma unroll
        for (int t = 0; t < NT; t++) v[t] = 0.0f;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const uint32_t *lo = e & 1 ? p.qb : p.qa;
            uint32_t q[2];
#pragma unroll
            for (int k = 0; k < 2; k++)
                q[k] = signed6(((lo[k] >> (4 * (e >> 1))) & 0x0F0F0F0Fu) | ((p.qh[k] >> (2 * e)) & 0x03030303u) << 4);
            const int si = 2 * e + (g >> 1);
            const float de = __fmul_rn(d, (float)(int8_t)((si < 4 ? p.sw[0] : p.sw[1]) >> (8 * (si & 3))));
            const int64_t u = 8 * sb + 4 * h + e;
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const int2 a = *(const int2 *)(xq + (size_t)t * n_in + 32 * u + 8 * g);
                const int S = __dp4a((int)q[1], a.y, __dp4a((int)q[0], a.x, 0));
                v[t] = __fadd_rn(v[t], __fmul_rn(xs[t * n_units + u].d, __fmul_rn(de, (float)S)));
            }
        }
    }
};

/* The integer products: a warp (or wpr warps, gemv_warp) per output row, its lanes taking
 * the row's items first, first + step, ... D at a time: the D items' loads are all issued
 * before the first is multiplied, so that a warp keeps D times the bytes in flight (the
 * loads of a row do not depend on each other; only the sums do). An item past the row's
 * end loads the group's first again and adds nothing, so a group stays one straight run
 * of instructions; the sums are added in the same order for every D, so every D gives
 * the same bits (the items' sums and products written as __fadd_rn and __fmul_rn: nvcc
 * fuses no multiply into an add there, which it might do in one kernel and not another). A launch may start early (ck_device.h): the first group of weights is
 * loaded before ck_pdl_wait, while the kernel that makes x may still run. */
template <class I, int D>
__device__ __forceinline__ void load_group(const uint8_t *row, int64_t i0, int64_t step, int64_t n_items,
                                           typename I::piece p[D]) {
#pragma unroll
    for (int d = 0; d < D; d++) {
        const int64_t i = i0 + d * step;
        I::load(row, i < n_items ? i : i0, p[d]);
    }
}
template <class I, int NT, int D>
__device__ __forceinline__ void dot_group(const typename I::piece p[D], int64_t i0, int64_t step, int64_t n_items,
                                          int64_t n_in, const int8_t *xq, const q8x *xs, float acc[NT]) {
#pragma unroll
    for (int d = 0; d < D; d++) {
        const int64_t i = i0 + d * step;
        float v[NT];
        I::template dot<NT>(p[d], i < n_items ? i : i0, n_in, xq, xs, v);
#pragma unroll
        for (int t = 0; t < NT; t++) acc[t] = i < n_items ? __fadd_rn(acc[t], v[t]) : acc[t];
    }
}

/* acc = the warp's row (its items first, first + step, ...) times each of the NT rows of x */
template <class I, int NT, int D>
__device__ __forceinline__ void row_products(const gemv_warp &gw, int64_t n_in, const int8_t *xq, const q8x *xs,
                                             float acc[NT]) {
    const int64_t n_items = I::count(n_in);
    int64_t i0 = gw.first;
    bool more = gw.live && i0 < n_items;
    typename I::piece p[D];
    if (more) load_group<I, D>(gw.row, i0, gw.step, n_items, p);
    ck_pdl_wait(); /* the weights do not depend on the kernels before; x does */
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    while (more) {
        dot_group<I, NT, D>(p, i0, gw.step, n_items, n_in, xq, xs, acc);
        i0 += D * gw.step;
        more = i0 < n_items;
        if (more) load_group<I, D>(gw.row, i0, gw.step, n_items, p);
    }
}

/* Parts [0, n_first) in items I, the others in I2 (a launch of two types: Q6_K's and
 * Q4_K's, whose rows have as many items); a warp's row is of one part, so each warp takes
 * one of the two ways whole. */
template <class I, class I2, int NT, int D>
__global__ void __launch_bounds__(32 * GEMV_WARPS)
    gemv_q8_kernel(const gemv_parts ps, int64_t n_in, const int8_t *xq, const q8x *xs, int wpr, int n_first) {
    ck_pdl_trigger();
    const gemv_warp gw = gemv_warp_at(wpr, ps);
    float acc[NT];
    if (std::is_same<I, I2>::value || gw.part < n_first) row_products<I, NT, D>(gw, n_in, xq, xs, acc);
    else row_products<I2, NT, D>(gw, n_in, xq, xs, acc);
    gemv_store<NT>(acc, wpr, gw);
}

/* The experts' products on 8-bit activations (ck_gemv_experts): gemv_q8_kernel's for one
 * row of x, that of the slot s = blockIdx.y: x's row s / x_div, each part's matrix of
 * expert sel[s] (n_out rows after the one before), the outputs' row s. The experts come
 * from the routing kernel, so the weights are loaded after the wait. */
template <class I, int D>
__global__ void __launch_bounds__(32 * GEMV_WARPS) gemv_q8_experts_kernel(const gemv_parts ps, int64_t n_in,
                                                                          const int8_t *xq, const q8x *xs, int wpr,
                                                                          const int32_t *sel, int x_div) {
    ck_pdl_trigger();
    ck_pdl_wait();
    const int s = blockIdx.y;
    gemv_warp gw = gemv_warp_at(wpr, ps);
    size_t expert_bytes = 0;
#pragma unroll
    for (int k = 0; k < CK_GEMV_MAX_PARTS; k++) /* constant indices, as in gemv_warp_at */
        if (k == gw.part) expert_bytes = (size_t)ps.p[k].n_out * ps.p[k].row_bytes;
    gw.row += (size_t)sel[s] * expert_bytes;
    gw.y += (size_t)s * gw.n_out;
    const size_t xr = (size_t)(s / x_div);
    float acc[1];
    row_products<I, 1, D>(gw, n_in, xq + xr * (size_t)n_in, xs + xr * (size_t)(n_in / 32), acc);
    gemv_store<1>(acc, wpr, gw);
}

/* Warps per row for a product of n_out rows of n_items items: more while the product
 * has fewer than about two warps per warp slot of a large GPU (132 SMs x 64) and a row's
 * warps would still take more than one round of 32 items each. */
static int gemv_wpr(int64_t n_out, int64_t n_items) {
    int wpr = 1;
    while (wpr < GEMV_WARPS && n_out * wpr < 16384 && n_items > 32 * wpr) wpr *= 2;
    return wpr;
}

/* Items a lane loads before it multiplies the first (ck_gemv_set_depth): 1 or GEMV_DEPTH */
#define GEMV_DEPTH 4
int gemv_depth = GEMV_DEPTH;

/* One launch of the integer kernel; gemv_q8_launch's kind picks its items: 1 Q4_K's
 * pieces, 2 Q6_K's, 3 Q6_K's for parts [0, n_first) and Q4_K's for the others, 0 T's units */
struct launch {
    dim3 grid, block;
    cudaStream_t st;
    gemv_parts ps;
    int64_t n_in;
    const int8_t *xq;
    const q8x *xs;
    int wpr, n_first;
};
template <class I, class I2, int NT, int D> void gemv_q8_launch_i(const launch &l) {
    CK_LAUNCH(l.grid, l.block, 0, l.st, gemv_q8_kernel<I, I2, NT, D>)(l.ps, l.n_in, l.xq, l.xs, l.wpr, l.n_first);
}
template <int T, int NT, int D> void gemv_q8_launch_d(int kind, const launch &l) {
    if (kind == 1) gemv_q8_launch_i<q4k_item, q4k_item, NT, D>(l);
    else if (kind == 2) gemv_q8_launch_i<q6k_item, q6k_item, NT, D>(l);
    else if (kind == 3) gemv_q8_launch_i<q6k_item, q4k_item, NT, D>(l);
    else gemv_q8_launch_i<unit_item<T>, unit_item<T>, NT, D>(l);
}
template <int T, int NT> void gemv_q8_launch(int kind, const launch &l) {
    if (gemv_depth == 1) gemv_q8_launch_d<T, NT, 1>(kind, l);
    else gemv_q8_launch_d<T, NT, GEMV_DEPTH>(kind, l);
}

/* The 8-bit form of x's n rows in scratch: the levels (n, n_in), then each unit's scale
 * and half sums (n, n_in / 32); quantized now unless x_ready */
static void x_q8(const float *x, int64_t n, int64_t n_in, void *scratch, bool x_ready, cudaStream_t st, int8_t **xq,
                 q8x **xs) {
    *xq = (int8_t *)scratch;
    *xs = (q8x *)(*xq + (size_t)(n * n_in));
    const int64_t units = n * n_in / 32;
    if (!x_ready) CK_LAUNCH(blocks_for(units * 32, 256), 256, 0, st, quantize_q8x_kernel)(x, units, *xq, *xs);
}

static int64_t parts_rows(const gemv_parts &ps) {
    int64_t n_out = 0;
    for (int k = 0; k < ps.n; k++) n_out += ps.p[k].n_out;
    return n_out;
}

/* x's 8-bit form into scratch (unless x_ready), then the parts' products in one launch of
 * the given kind (n_tok <= CK_GEMV_MAX_TOK, n_in a multiple of 32) */
template <int T>
void gemv_q8_go(const gemv_parts &ps, int kind, int n_first, int64_t n_in, const float *x, int64_t n_tok,
                void *scratch, bool x_ready, cudaStream_t st) {
    int8_t *xq;
    q8x *xs;
    x_q8(x, n_tok, n_in, scratch, x_ready, st, &xq, &xs);
    const int64_t n_out = parts_rows(ps);
    /* split rows for one row of x (timed on an H200); batches keep a warp per row */
    const int wpr = n_tok == 1 ? gemv_wpr(n_out, kind ? n_in / 256 * 8 : n_in / 32) : 1;
    const dim3 grid((unsigned)((n_out + GEMV_WARPS / wpr - 1) / (GEMV_WARPS / wpr))), block(32 * GEMV_WARPS);
    const launch l = {grid, block, st, ps, n_in, xq, xs, wpr, n_first};
    switch (n_tok) {
    case 1: gemv_q8_launch<T, 1>(kind, l); break;
    case 2: gemv_q8_launch<T, 2>(kind, l); break;
    case 3: gemv_q8_launch<T, 3>(kind, l); break;
    case 4: gemv_q8_launch<T, 4>(kind, l); break;
    case 5: gemv_q8_launch<T, 5>(kind, l); break;
    case 6: gemv_q8_launch<T, 6>(kind, l); break;
    case 7: gemv_q8_launch<T, 7>(kind, l); break;
    case 8: gemv_q8_launch<T, 8>(kind, l); break;
    default: break;
    }
}

/* Whether Q4_K's 16-byte loads of the super-block kernel may read the parts [k0, k1) */
static bool rows_16_aligned(const gemv_parts &ps, int k0, int k1) {
    uintptr_t align = 0;
    for (int k = k0; k < k1; k++) align |= (uintptr_t)ps.p[k].W | ps.p[k].row_bytes;
    return align % 16 == 0;
}

/* The items of T's rows for the integer kernels: 1 Q4_K's pieces (rows 16-byte aligned),
 * 2 Q6_K's, 0 units */
template <int T> static int item_kind(const gemv_parts &ps) {
    return T == T_Q4_K && rows_16_aligned(ps, 0, ps.n) ? 1 : T == T_Q6_K ? 2 : 0;
}

/* The integer path for the block formats with a level decoder (run returns false for
 * the others: the float path). */
template <int T, bool = has_iunit<T>::V> struct gemv_q8 {
    static bool run(const gemv_parts &, int64_t, const float *, int64_t, void *, bool, cudaStream_t) { return false; }
};
template <int T> struct gemv_q8<T, true> {
    static bool run(const gemv_parts &ps, int64_t n_in, const float *x, int64_t n_tok, void *scratch, bool x_ready,
                    cudaStream_t st) {
        if (!scratch || n_in % 32) return false;
        gemv_q8_go<T>(ps, item_kind<T>(ps), ps.n, n_in, x, n_tok, scratch, x_ready, st);
        return true;
    }
};

/* The experts' products of ck_gemv_experts: x's n_x rows quantized into scratch (unless
 * x_ready), then one launch of slots x rows on the integer path, or one launch a part in
 * float (types without levels, or no scratch). */
template <int T, bool = has_iunit<T>::V> struct gemv_experts {
    static bool q8(const gemv_parts &, int64_t, const float *, int64_t, const int32_t *, int64_t, void *, bool,
                   cudaStream_t) {
        return false;
    }
};
template <int T> struct gemv_experts<T, true> {
    static bool q8(const gemv_parts &ps, int64_t n_in, const float *x, int64_t n_x, const int32_t *sel,
                   int64_t n_slots, void *scratch, bool x_ready, cudaStream_t st) {
        if (!scratch || n_in % 32) return false;
        int8_t *xq;
        q8x *xs;
        x_q8(x, n_x, n_in, scratch, x_ready, st, &xq, &xs);
        const int64_t n_out = parts_rows(ps);
        const int kind = item_kind<T>(ps);
        const int wpr = gemv_wpr(n_out * n_slots, kind ? n_in / 256 * 8 : n_in / 32);
        const dim3 grid(blocks_for(n_out, GEMV_WARPS / wpr), (unsigned)n_slots), block(32 * GEMV_WARPS);
        const int x_div = (int)(n_slots / n_x);
#define EXPERTS(I) \
    CK_LAUNCH(grid, block, 0, st, gemv_q8_experts_kernel<I, GEMV_DEPTH>)(ps, n_in, xq, xs, wpr, sel, x_div)
        if (kind == 1) EXPERTS(q4k_item);
        else if (kind == 2) EXPERTS(q6k_item);
        else EXPERTS(unit_item<T>);
#undef EXPERTS
        return true;
    }
};
template <int T>
static void gemv_experts_float(const gemv_parts &ps, int64_t n_in, const float *x, int64_t n_x, const int32_t *sel,
                               int64_t n_slots, cudaStream_t st) {
    for (int k = 0; k < ps.n; k++) {
        const dim3 grid(blocks_for(ps.p[k].n_out, GEMV_WARPS), (unsigned)n_slots), block(32 * GEMV_WARPS);
        CK_LAUNCH(grid, block, 0, st, gemv_experts_kernel<T>)((const uint8_t *)ps.p[k].W, ps.p[k].row_bytes, n_in,
                                                              ps.p[k].n_out, x, ps.p[k].y, sel,
                                                              (int)(n_slots / n_x));
    }
}

/* ==== Dequantization and look-up: one thread per unit ==== */

template <int T>
__global__ void dequant_kernel(const uint8_t *W, size_t row_bytes, int64_t n_in, int64_t n_rows, __half *out) {
    ck_pdl_entry();
    const int64_t n_units = (n_in + 31) / 32;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_units * n_rows) return;
    const int64_t r = i / n_units, u = i % n_units;
    float w[32];
    unit<T>(W + (size_t)r * row_bytes, u, n_in, w);
    __half *o = out + r * n_in + 32 * u;
    const int64_t left = n_in - 32 * u;
#pragma unroll
    for (int k = 0; k < 32; k++)
        if (k < left) o[k] = __float2half_rn(w[k]);
}

template <int T>
__global__ void embed_kernel(const uint8_t *W, size_t row_bytes, int64_t n_in, const int32_t *tokens, int64_t n,
                             float scale, float *x) {
    ck_pdl_entry();
    const int64_t n_units = (n_in + 31) / 32;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_units * n) return;
    const int64_t t = i / n_units, u = i % n_units;
    float w[32];
    unit<T>(W + (size_t)tokens[t] * row_bytes, u, n_in, w);
    float *o = x + t * n_in + 32 * u;
    const int64_t left = n_in - 32 * u;
#pragma unroll
    for (int k = 0; k < 32; k++)
        if (k < left) o[k] = scale == 1.0f ? w[k] : w[k] * scale;
}

__global__ void f32_to_f16_kernel(const float *x, __half *out, int64_t n) {
    ck_pdl_entry();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2half_rn(x[i]);
}

} // namespace

extern "C" int ck_type_supported(uint32_t type, int64_t n_in) {
    int64_t qk = 0;
#define QK_OF(T) qk = fmt<T>::QK
    CK_DISPATCH(type, QK_OF)
#undef QK_OF
    return qk > 0 && n_in > 0 && n_in % qk == 0 && (qk > 1 || n_in % 2 == 0);
}

extern "C" size_t ck_gemv_scratch_bytes(int64_t n_in, int64_t n_tok) {
    return ck_gemv_experts_scratch_bytes(n_in, n_tok < CK_GEMV_MAX_TOK ? n_tok : CK_GEMV_MAX_TOK);
}

extern "C" int ck_gemv(uint32_t type, const void *W, size_t row_bytes, int64_t n_in, int64_t n_out, const float *x,
                       int64_t n_tok, float *y, void *scratch, int x_ready, void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    bool quantized = false;
    x_ready = x_ready && n_tok <= CK_GEMV_MAX_TOK;
    for (int64_t t0 = 0; t0 < n_tok; t0 += CK_GEMV_MAX_TOK) {
        const int64_t nt = n_tok - t0 < CK_GEMV_MAX_TOK ? n_tok - t0 : CK_GEMV_MAX_TOK;
        gemv_parts ps = {};
        ps.n = 1, ps.p[0] = ck_gemv_part{W, row_bytes, n_out, y + t0 * n_out};
#define GEMV(T)                                                                                                      \
    quantized = gemv_q8<T>::run(ps, n_in, x + t0 * n_in, nt, scratch, x_ready, st);                                  \
    if (!quantized) gemv_t<T>(W, row_bytes, n_in, n_out, x + t0 * n_in, nt, y + t0 * n_out, st);
        CK_DISPATCH(type, GEMV)
#undef GEMV
    }
    return quantized && n_tok <= CK_GEMV_MAX_TOK;
}

extern "C" int ck_gemv_parts(uint32_t type, const ck_gemv_part *parts, int n_parts, int64_t n_in, const float *x,
                             int64_t n_tok, void *scratch, int x_ready, void *stream) {
    if (n_parts <= 0) return 0;
    if (n_parts <= CK_GEMV_MAX_PARTS && n_tok <= CK_GEMV_MAX_TOK) {
        gemv_parts ps = {};
        ps.n = n_parts;
        for (int k = 0; k < n_parts; k++) ps.p[k] = parts[k];
        bool one_launch = false;
#define GEMV(T) one_launch = gemv_q8<T>::run(ps, n_in, x, n_tok, scratch, x_ready, (cudaStream_t)stream)
        CK_DISPATCH(type, GEMV)
#undef GEMV
        if (one_launch) return 1;
    }
    int held = x_ready; /* one product after the other, each reusing the 8-bit x the last left */
    for (int k = 0; k < n_parts; k++)
        held = ck_gemv(type, parts[k].W, parts[k].row_bytes, n_in, parts[k].n_out, x, n_tok, parts[k].y, scratch,
                       held, stream);
    return held;
}

extern "C" int ck_gemv_parts_mixed(uint32_t type_first, int n_first, uint32_t type_rest, const ck_gemv_part *parts,
                                   int n_parts, int64_t n_in, const float *x, int64_t n_tok, void *scratch,
                                   int x_ready, void *stream) {
    const bool pair = (type_first == T_Q6_K && type_rest == T_Q4_K) || (type_first == T_Q4_K && type_rest == T_Q6_K);
    if (!pair || n_first <= 0 || n_first >= n_parts || n_parts > CK_GEMV_MAX_PARTS || n_tok <= 0 ||
        n_tok > CK_GEMV_MAX_TOK || !scratch || n_in % 256)
        return -1;
    /* Q6_K's parts first: the order of a launch's parts is its own (each has its output) */
    gemv_parts ps = {};
    ps.n = n_parts;
    const int n_q6 = type_first == T_Q6_K ? n_first : n_parts - n_first;
    for (int k = 0, j = 0; k < n_parts; k++)
        if ((k < n_first) == (type_first == T_Q6_K)) ps.p[j++] = parts[k];
    for (int k = 0, j = n_q6; k < n_parts; k++)
        if ((k < n_first) != (type_first == T_Q6_K)) ps.p[j++] = parts[k];
    if (!rows_16_aligned(ps, n_q6, n_parts)) return -1;
    gemv_q8_go<T_Q4_K>(ps, 3, n_q6, n_in, x, n_tok, scratch, x_ready, (cudaStream_t)stream);
    return 1;
}

extern "C" size_t ck_gemv_experts_scratch_bytes(int64_t n_in, int64_t n_x) {
    return (size_t)(n_x * n_in) + (size_t)(n_x * ((n_in + 31) / 32)) * sizeof(q8x);
}

extern "C" int ck_gemv_experts(uint32_t type, const ck_gemv_part *parts, int n_parts, int64_t n_in, const float *x,
                               int64_t n_x, const int32_t *sel, int64_t n_slots, void *scratch, int x_ready,
                               void *stream) {
    if (n_parts <= 0 || n_parts > CK_GEMV_MAX_PARTS || n_x <= 0 || n_slots <= 0 || n_slots % n_x ||
        n_slots > 65535)
        return -1;
    gemv_parts ps = {};
    ps.n = n_parts;
    for (int k = 0; k < n_parts; k++) ps.p[k] = parts[k];
    cudaStream_t st = (cudaStream_t)stream;
    bool quantized = false;
#define EXPERTS(T)                                                                                                   \
    quantized = gemv_experts<T>::q8(ps, n_in, x, n_x, sel, n_slots, scratch, x_ready, st);                           \
    if (!quantized) gemv_experts_float<T>(ps, n_in, x, n_x, sel, n_slots, st);
    CK_DISPATCH(type, EXPERTS)
#undef EXPERTS
    return quantized;
}

int ck_pdl_enabled = 0;

extern "C" int ck_set_pdl(int on) {
    const int old = ck_pdl_enabled;
    ck_pdl_enabled = on;
    return old;
}

extern "C" int ck_gemv_set_depth(int depth) {
    const int old = gemv_depth;
    if (depth == 1 || depth == GEMV_DEPTH) gemv_depth = depth;
    return old;
}

extern "C" int ck_gemv_integer(uint32_t type) {
    int v = 0;
#define HAS(T) v = has_iunit<T>::V
    CK_DISPATCH(type, HAS)
#undef HAS
    return v;
}

extern "C" void ck_dequant_f16(uint32_t type, const void *W, size_t row_bytes, int64_t n_in, int64_t n_rows,
                               uint16_t *out, void *stream) {
    const int64_t n = (n_in + 31) / 32 * n_rows;
#define DEQ(T)                                                                                                       \
    CK_LAUNCH(blocks_for(n, 256), 256, 0, (cudaStream_t)stream, dequant_kernel<T>)((const uint8_t *)W, row_bytes,     \
                                                                                  n_in, n_rows, (__half *)out)
    CK_DISPATCH(type, DEQ)
#undef DEQ
}

extern "C" void ck_embed(uint32_t type, const void *W, size_t row_bytes, int64_t n_in, const int32_t *tokens,
                         int64_t n, float scale, float *x, void *stream) {
    const int64_t units = (n_in + 31) / 32 * n;
#define EMB(T)                                                                                                       \
    CK_LAUNCH(blocks_for(units, 256), 256, 0, (cudaStream_t)stream, embed_kernel<T>)((const uint8_t *)W, row_bytes,   \
                                                                                    n_in, tokens, n, scale, x)
    CK_DISPATCH(type, EMB)
#undef EMB
}

extern "C" void ck_f32_to_f16(const float *x, uint16_t *out, int64_t n, void *stream) {
    if (n > 0) CK_LAUNCH(blocks_for(n, 256), 256, 0, (cudaStream_t)stream, f32_to_f16_kernel)(x, (__half *)out, n);
}

extern "C" const char *ck_check_stream(void *stream) {
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    return e == cudaSuccess ? NULL : cudaGetErrorString(e);
}

extern "C" const char *ck_check(int sync) {
    cudaError_t e = sync ? cudaDeviceSynchronize() : cudaSuccess;
    if (e == cudaSuccess) e = cudaGetLastError();
    return e == cudaSuccess ? NULL : cudaGetErrorString(e);
}
