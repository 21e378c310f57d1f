/*
 * conv1d_avx512.c — AVX-512 block kernels of conv1d (ssm.h): 16 channels per
 * vector, masked tails. The tile and scan kernels issue the same FMA chain
 * (bias, then taps 0..K-1) and the same SiLU, so they agree bit for bit.
 */
#include "ssm/ssm_kernels.h"
#include "ssm/ssm_simd.h"

/* ==== Tile: window rows read from memory ==== */

static inline __attribute__((always_inline)) void tile_k(const int K, const conv1d_params *p, int64_t c0, int64_t c1,
                                                         int64_t t0, int64_t t1, const float *x, int64_t x_stride,
                                                         const float *state, float *y, int64_t y_stride) {
    const int64_t C = p->conv_dim;
    for (int64_t t = t0; t < t1; t++) {
        const float *src[CONV1D_MAX_K];
#pragma GCC unroll 8
        for (int j = 0; j < K; j++) {
            int64_t tau = t - (K - 1) + j;
            src[j] = tau >= 0 ? x + tau * x_stride : state + (K - 1 + tau) * C;
        }
        float *yt = y + t * y_stride;
        for (int64_t c = c0; c < c1; c += 16) {
            __mmask16 m = ssm_mask16(c1 - c);
            __m512 acc = p->bias ? _mm512_maskz_loadu_ps(m, p->bias + c) : _mm512_setzero_ps();
#pragma GCC unroll 8
            for (int j = 0; j < K; j++)
                acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p->w + j * C + c), _mm512_maskz_loadu_ps(m, src[j] + c),
                                      acc);
            _mm512_mask_storeu_ps(yt + c, m, ssm_silu512(acc));
        }
    }
}

static void tile_avx512(const conv1d_params *p, int64_t c0, int64_t c1, int64_t t0, int64_t t1, const float *x,
                        int64_t x_stride, const float *state, float *y, int64_t y_stride) {
    switch (p->K) {
    case 2: tile_k(2, p, c0, c1, t0, t1, x, x_stride, state, y, y_stride); break;
    case 3: tile_k(3, p, c0, c1, t0, t1, x, x_stride, state, y, y_stride); break;
    case 4: tile_k(4, p, c0, c1, t0, t1, x, x_stride, state, y, y_stride); break;
    case 5: tile_k(5, p, c0, c1, t0, t1, x, x_stride, state, y, y_stride); break;
    case 6: tile_k(6, p, c0, c1, t0, t1, x, x_stride, state, y, y_stride); break;
    case 7: tile_k(7, p, c0, c1, t0, t1, x, x_stride, state, y, y_stride); break;
    default: tile_k(8, p, c0, c1, t0, t1, x, x_stride, state, y, y_stride); break;
    }
}

/* ==== Scan: the window of each channel vector stays in registers ==== */

static inline __attribute__((always_inline)) void scan_k(const int K, const conv1d_params *p, int64_t c0, int64_t c1,
                                                         int64_t T, const float *x, int64_t x_stride,
                                                         const float *state, float *y, int64_t y_stride) {
    const int64_t C = p->conv_dim;
    for (int64_t c = c0; c < c1; c += 16) {
        __mmask16 m = ssm_mask16(c1 - c);
        __m512 w[CONV1D_MAX_K], win[CONV1D_MAX_K];
        __m512 b = p->bias ? _mm512_maskz_loadu_ps(m, p->bias + c) : _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int j = 0; j < K; j++) w[j] = _mm512_maskz_loadu_ps(m, p->w + j * C + c);
#pragma GCC unroll 8
        for (int j = 0; j < K - 1; j++) win[j] = _mm512_maskz_loadu_ps(m, state + j * C + c);
        for (int64_t t = 0; t < T; t++) {
            win[K - 1] = _mm512_maskz_loadu_ps(m, x + t * x_stride + c);
            __m512 acc = b;
#pragma GCC unroll 8
            for (int j = 0; j < K; j++) acc = _mm512_fmadd_ps(w[j], win[j], acc);
            _mm512_mask_storeu_ps(y + t * y_stride + c, m, ssm_silu512(acc));
#pragma GCC unroll 8
            for (int j = 0; j < K - 1; j++) win[j] = win[j + 1];
        }
    }
}

static void scan_avx512(const conv1d_params *p, int64_t c0, int64_t c1, int64_t T, const float *x, int64_t x_stride,
                        const float *state, float *y, int64_t y_stride) {
    switch (p->K) {
    case 2: scan_k(2, p, c0, c1, T, x, x_stride, state, y, y_stride); break;
    case 3: scan_k(3, p, c0, c1, T, x, x_stride, state, y, y_stride); break;
    case 4: scan_k(4, p, c0, c1, T, x, x_stride, state, y, y_stride); break;
    case 5: scan_k(5, p, c0, c1, T, x, x_stride, state, y, y_stride); break;
    case 6: scan_k(6, p, c0, c1, T, x, x_stride, state, y, y_stride); break;
    case 7: scan_k(7, p, c0, c1, T, x, x_stride, state, y, y_stride); break;
    default: scan_k(8, p, c0, c1, T, x, x_stride, state, y, y_stride); break;
    }
}

/* ==== L2 norm of one head ==== */

static void l2norm_avx512(float *y, int64_t n, float eps) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __m512 v = _mm512_maskz_loadu_ps(ssm_mask16(n - i), y + i);
        acc = _mm512_fmadd_ps(v, v, acc);
    }
    __m512 s = _mm512_set1_ps(1.0f / sqrtf(_mm512_reduce_add_ps(acc) + eps));
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = ssm_mask16(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i), s));
    }
}

const conv1d_kernels conv1d_kernels_avx512 = {tile_avx512, scan_avx512, l2norm_avx512};
