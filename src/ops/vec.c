/*
 * vec.c — the scalar reference vector kernels, the per-level table and the
 * dispatch (on isa_active()).
 */
#include "vec.h"

#include <math.h>
#include <stddef.h>

/* ==== Reference ==== */

float vec_dot_f32_ref(const float *x, const float *y, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += x[i] * y[i];
    return sum;
}

void vec_axpy_f32_ref(float *y, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

void vec_swiglu_f32_ref(float *out, const float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

double vec_sum_exp_f32_ref(const float *x, int64_t n, float m) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += expf(x[i] - m);
    return sum;
}

/* ==== Per-level table and dispatch ==== */

static const vec_kernels tables[ISA_COUNT] = {
    [ISA_REF] = {vec_dot_f32_ref, vec_axpy_f32_ref, vec_swiglu_f32_ref, vec_sum_exp_f32_ref},
#if defined(__x86_64__)
    [ISA_AVX2] = {vec_dot_f32_avx2, vec_axpy_f32_avx2, vec_swiglu_f32_avx2, vec_sum_exp_f32_avx2},
    [ISA_AVX512] = {vec_dot_f32_avx512, vec_axpy_f32_avx512, vec_swiglu_f32_avx512, vec_sum_exp_f32_avx512},
#elif defined(__aarch64__)
    [ISA_NEON] = {vec_dot_f32_neon, vec_axpy_f32_neon, vec_swiglu_f32_neon, vec_sum_exp_f32_neon},
#endif
};

const vec_kernels *vec_kernels_for(isa_level isa) {
    return (unsigned)isa < ISA_COUNT && tables[isa].dot ? &tables[isa] : NULL;
}

const char *vec_variant(void) { return isa_name(isa_active()); }

int64_t vec_argmax_ref(const float *x, int64_t n) {
    int64_t b = -1;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(x[i]) && (b < 0 || x[i] > x[b])) b = i;
    return b < 0 ? 0 : b;
}

#define ARGMAX_CHUNK 256
#define ARGMAX_LANES 16

int64_t vec_argmax(const float *x, int64_t n) {
    if (isa_active() == ISA_REF) return vec_argmax_ref(x, n); /* EDDY_FORCE_REF=1 */
    float best = -INFINITY;
    int64_t at = 0; /* the first chunk that holds best */
    for (int64_t c = 0; c < n; c += ARGMAX_CHUNK) {
        const int64_t e = c + ARGMAX_CHUNK < n ? c + ARGMAX_CHUNK : n;
        float m[ARGMAX_LANES]; /* running maxima, lane k of elements k mod 16 (NaN never wins a > test) */
        for (int k = 0; k < ARGMAX_LANES; k++) m[k] = -INFINITY;
        int64_t i = c;
        for (; i + ARGMAX_LANES <= e; i += ARGMAX_LANES)
            for (int k = 0; k < ARGMAX_LANES; k++) m[k] = x[i + k] > m[k] ? x[i + k] : m[k];
        for (; i < e; i++) m[0] = x[i] > m[0] ? x[i] : m[0];
        float cm = m[0];
        for (int k = 1; k < ARGMAX_LANES; k++) cm = m[k] > cm ? m[k] : cm;
        if (cm > best) best = cm, at = c;
    }
    for (int64_t i = at; i < n; i++) /* -inf everywhere: the first -inf; all NaN: none */
        if (x[i] == best) return i;
    return 0;
}

int64_t vec_greedy(const float *x, int64_t n) {
    const int64_t b = vec_argmax(x, n);
    return x[b] == -INFINITY || isnan(x[b]) ? 0 : b;
}

int64_t vec_top_k(const float *x, int64_t n, int64_t k, int32_t *ids, float *vals) {
    int64_t m = 0, i = 0;
    for (; i < n; i++) {
        if (m == k && i % 16 == 0) {
            const float thr = vals[k - 1];
            int beat = 0;
            for (; i + 16 <= n; i += 16) {
                for (int j = 0; j < 16; j++) beat |= x[i + j] > thr; /* NaN: false */
                if (beat) break;
            }
            if (i >= n) break;
        }
        const float l = x[i];
        if (isnan(l) || l == -INFINITY || (m == k && !(l > vals[k - 1]))) continue;
        int64_t j = m < k ? m++ : k - 1; /* a later index loses ties: it goes after equal values */
        for (; j > 0 && l > vals[j - 1]; j--) ids[j] = ids[j - 1], vals[j] = vals[j - 1];
        ids[j] = (int32_t)i, vals[j] = l;
    }
    return m;
}

int64_t vec_argmax_softmax(const float *x, int64_t n, float *p) {
    const int64_t b = vec_argmax(x, n);
    *p = (float)(1.0 / vec_sum_exp_f32(x, n, x[b]));
    return b;
}

float vec_dot_f32(const float *x, const float *y, int64_t n) { return tables[isa_active()].dot(x, y, n); }

void vec_axpy_f32(float *y, float a, const float *x, int64_t n) { tables[isa_active()].axpy(y, a, x, n); }

void vec_swiglu_f32(float *out, const float *gate, const float *up, int64_t n) {
    tables[isa_active()].swiglu(out, gate, up, n);
}

double vec_sum_exp_f32(const float *x, int64_t n, float m) { return tables[isa_active()].sum_exp(x, n, m); }

double vec_logprob(const float *x, int64_t n, int64_t target) {
    const float m = x[vec_argmax(x, n)]; /* a NaN or a row of -inf makes the sum NaN whichever m */
    return (double)x[target] - m - log(vec_sum_exp_f32(x, n, m));
}

double vec_logsumexp(const float *x, int64_t n) {
    const float m = x[vec_argmax(x, n)];
    return (double)m + log(vec_sum_exp_f32(x, n, m));
}
