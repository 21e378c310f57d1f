/*
 * vec_avx2.c — AVX2 + FMA variants of vec.h (compiled with -mavx2 -mfma; called
 * only when the CPU has them).
 */
#include <immintrin.h>

#include "vec.h"
#include "vexp.h"

static float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

float vec_dot_f32_avx2(const float *x, const float *y, int64_t n) {
    /* four accumulators hide the FMA latency */
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc0);
    float sum = hsum256(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++) sum += x[i] * y[i];
    return sum;
}

void vec_axpy_f32_avx2(float *y, float a, const float *x, int64_t n) {
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

/* each vector's exps widened to double and summed there: 8 lanes, two accumulators */
double vec_sum_exp_f32_avx2(const float *x, int64_t n, float m) {
    const __m256 vm = _mm256_set1_ps(m);
    __m256d lo = _mm256_setzero_pd(), hi = lo;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = vexp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double part[4];
    _mm256_storeu_pd(part, _mm256_add_pd(lo, hi));
    return part[0] + part[1] + part[2] + part[3] + vec_sum_exp_f32_ref(x + i, n - i, m);
}

void vec_swiglu_f32_avx2(float *out, const float *gate, const float *up, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i), u = _mm256_loadu_ps(up + i);
        const __m256 e = vexp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u));
    }
    vec_swiglu_f32_ref(out + i, gate + i, up + i, n - i);
}
