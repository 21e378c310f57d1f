/*
 * roofline_avx512.c — the peak loops for AVX-512: 10 independent 16-wide FMA chains, and
 * 10 independent vpdpbusd chains (64 byte products each) for the 8-bit dot kernels.
 */
#include <immintrin.h>

#include "bench.h"

double bench_fma_loop_avx512(int64_t iters, float *sink) {
    __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    /* distinct start values: chains that start equal compute the same values, and the
     * compiler merges them into one (which then runs at the FMA latency, not its throughput) */
    __m512 a0 = _mm512_set1_ps(1.0f), a1 = _mm512_set1_ps(1.001f), a2 = _mm512_set1_ps(1.002f), a3 = _mm512_set1_ps(1.003f), a4 = _mm512_set1_ps(1.004f);
    __m512 a5 = _mm512_set1_ps(1.005f), a6 = _mm512_set1_ps(1.006f), a7 = _mm512_set1_ps(1.007f), a8 = _mm512_set1_ps(1.008f), a9 = _mm512_set1_ps(1.009f);
    for (int64_t i = 0; i < iters; i++) {
        a0 = _mm512_fmadd_ps(a0, m, c), a1 = _mm512_fmadd_ps(a1, m, c), a2 = _mm512_fmadd_ps(a2, m, c);
        a3 = _mm512_fmadd_ps(a3, m, c), a4 = _mm512_fmadd_ps(a4, m, c), a5 = _mm512_fmadd_ps(a5, m, c);
        a6 = _mm512_fmadd_ps(a6, m, c), a7 = _mm512_fmadd_ps(a7, m, c), a8 = _mm512_fmadd_ps(a8, m, c);
        a9 = _mm512_fmadd_ps(a9, m, c);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(_mm512_add_ps(a6, a7), _mm512_add_ps(a8, a9))));
    *sink += _mm512_reduce_add_ps(s);
    return (double)iters * 10 * 16 * 2;
}

double bench_dot8_loop_avx512(int64_t iters, float *sink) {
    const __m512i u = _mm512_set1_epi8(3), v = _mm512_set1_epi8(-5);
    __m512i a0 = _mm512_set1_epi32(0), a1 = _mm512_set1_epi32(1), a2 = _mm512_set1_epi32(2), a3 = _mm512_set1_epi32(3);
    __m512i a4 = _mm512_set1_epi32(4), a5 = _mm512_set1_epi32(5), a6 = _mm512_set1_epi32(6), a7 = _mm512_set1_epi32(7);
    __m512i a8 = _mm512_set1_epi32(8), a9 = _mm512_set1_epi32(9);
    for (int64_t i = 0; i < iters; i++) {
        a0 = _mm512_dpbusd_epi32(a0, u, v), a1 = _mm512_dpbusd_epi32(a1, u, v), a2 = _mm512_dpbusd_epi32(a2, u, v);
        a3 = _mm512_dpbusd_epi32(a3, u, v), a4 = _mm512_dpbusd_epi32(a4, u, v), a5 = _mm512_dpbusd_epi32(a5, u, v);
        a6 = _mm512_dpbusd_epi32(a6, u, v), a7 = _mm512_dpbusd_epi32(a7, u, v), a8 = _mm512_dpbusd_epi32(a8, u, v);
        a9 = _mm512_dpbusd_epi32(a9, u, v);
    }
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                                 _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(_mm512_add_epi32(a6, a7), _mm512_add_epi32(a8, a9))));
    *sink += (float)_mm512_reduce_add_epi32(s);
    return (double)iters * 10 * 64 * 2;
}
