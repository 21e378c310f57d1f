/*
 * roofline_avx2.c — the FMA-peak loop for AVX2 + FMA: 10 independent 8-wide chains,
 * enough to cover the FMA latency times the two FMA ports.
 */
#include <immintrin.h>

#include "bench.h"

double bench_fma_loop_avx2(int64_t iters, float *sink) {
    __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    /* distinct start values: chains that start equal compute the same values, and the
     * compiler merges them into one (which then runs at the FMA latency, not its throughput) */
    __m256 a0 = _mm256_set1_ps(1.0f), a1 = _mm256_set1_ps(1.001f), a2 = _mm256_set1_ps(1.002f), a3 = _mm256_set1_ps(1.003f), a4 = _mm256_set1_ps(1.004f);
    __m256 a5 = _mm256_set1_ps(1.005f), a6 = _mm256_set1_ps(1.006f), a7 = _mm256_set1_ps(1.007f), a8 = _mm256_set1_ps(1.008f), a9 = _mm256_set1_ps(1.009f);
    for (int64_t i = 0; i < iters; i++) {
        a0 = _mm256_fmadd_ps(a0, m, c), a1 = _mm256_fmadd_ps(a1, m, c), a2 = _mm256_fmadd_ps(a2, m, c);
        a3 = _mm256_fmadd_ps(a3, m, c), a4 = _mm256_fmadd_ps(a4, m, c), a5 = _mm256_fmadd_ps(a5, m, c);
        a6 = _mm256_fmadd_ps(a6, m, c), a7 = _mm256_fmadd_ps(a7, m, c), a8 = _mm256_fmadd_ps(a8, m, c);
        a9 = _mm256_fmadd_ps(a9, m, c);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(_mm256_add_ps(a6, a7), _mm256_add_ps(a8, a9))));
    float out[8];
    _mm256_storeu_ps(out, s);
    *sink += out[0];
    return (double)iters * 10 * 8 * 2;
}
