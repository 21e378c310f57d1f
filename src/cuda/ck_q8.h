/*
 * ck_q8.h — the 8-bit form of activations that ck_gemv's integer products multiply, and
 * the warp-level step that makes it, shared by ck_gemv's own quantization and by the
 * kernels that produce a product's input (the norms, SwiGLU), which write it as they go.
 *
 * Per 32-element unit of a row: int8 levels q = round(x / d) with d = amax / 127 (as
 * quantize_row_q8_0_ref: d stored rounded to f16), and the sums of q over each half of 16.
 * In ck_gemv's scratch, for rows of n elements (n a multiple of 32): the levels (rows, n),
 * then the units' q8x (rows, n / 32).
 */
#ifndef EDDY_CUDA_CK_Q8_H
#define EDDY_CUDA_CK_Q8_H

#include <stdint.h>

#include "cuda/ck.h"
#include "cuda/ck_block.h"
#include "cuda/ck_device.h"

struct q8x {
    float d;    /* the unit's scale (f16-rounded) */
    int x0, x1; /* the sums of the 8-bit activations over elements 0..15 and 16..31 */
    int pad;
};

/* The units' q8x in a scratch of rows of n */
__host__ __device__ inline q8x *q8_units(void *q8, int64_t rows, int64_t n) {
    return (q8x *)((int8_t *)q8 + rows * n);
}

/* Whether a kernel can leave its (rows, n) output's 8-bit form in q8 as ck_gemv reads it */
static inline bool q8_fits(const void *q8, int64_t rows, int64_t n) {
    return q8 && n % 32 == 0 && rows <= CK_GEMV_MAX_TOK;
}

/* Called by the 32 lanes of a warp together, lane l holding element l of a unit: the
 * element's 8-bit level; *d = the unit's scale (f16-rounded); *x0, *x1 = the sums of the
 * levels over elements 0..15 and 16..31. */
__device__ __forceinline__ int q8_level(float v, float *d, int *x0, int *x1) {
    float amax = fabsf(v);
    amax = warp_max(amax);
    const float dd = amax / 127.0f, id = dd != 0.0f ? 1.0f / dd : 0.0f;
    const float f = v * id;
    const int q = !(f == f) ? 0 : f >= 127.0f ? 127 : f <= -127.0f ? -127 : (int)roundf(f);
    /* half sums (|sum| <= 16 * 127: exact in a float) */
    float s = (float)q;
    for (int o = 8; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float s_hi = __shfl_xor_sync(0xffffffffu, s, 16);
    const bool lo = (threadIdx.x & 16) == 0;
    *x0 = (int)(lo ? s : s_hi), *x1 = (int)(lo ? s_hi : s);
    *d = __half2float(__float2half_rn(dd));
    return q;
}

/* The same, the unit being unit u of a scratch: its levels to xq[32 u + l], its scale and
 * half sums to xs[u]. */
__device__ __forceinline__ void q8_store_unit(float v, int64_t u, int8_t *xq, q8x *xs) {
    float d;
    int x0, x1;
    const int q = q8_level(v, &d, &x0, &x1);
    xq[32 * u + (threadIdx.x & 31)] = (int8_t)q;
    if ((threadIdx.x & 31) == 0) xs[u] = q8x{d, x0, x1, 0};
}

#endif
