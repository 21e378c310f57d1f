/*
 * vec.h — small float32 vector kernels used across ops (dot products, scaled adds).
 *
 * Each kernel has a scalar _ref (the oracle, kept forever) and SIMD variants in
 * vec_avx2.c, vec_avx512.c and vec_neon.c, gathered in one table per ISA level;
 * the plain name runs the table of isa_active() (base/isa.h), so EDDY_FORCE_REF=1
 * routes every call to _ref.
 */
#ifndef EDDY_OPS_VEC_H
#define EDDY_OPS_VEC_H

#include <stdint.h>

#include "base/isa.h"

/* The index of the largest of x[0, n) (n >= 1): the first on ties, NaNs never taken, 0
 * when every element is NaN. vec_argmax finds the largest value per chunk of 256 in loops
 * the compiler vectorizes, then the first index of it in the chunk where it first came:
 * a vocabulary's logits (150k floats) in a fraction of the scalar loop's time, which
 * matters where the GPU makes a token in a few milliseconds. Plain C for every ISA (the
 * reference under EDDY_FORCE_REF=1). */
int64_t vec_argmax(const float *x, int64_t n);
int64_t vec_argmax_ref(const float *x, int64_t n);

/* Greedy decoding's choice: vec_argmax, or 0 when that element is NaN or -inf (no logit
 * usable). What a greedy sampler without penalties and eddy_engine_decode_argmax pick. */
int64_t vec_greedy(const float *x, int64_t n);

/* The k best of x[0, n) that are neither NaN nor -inf, best first (of equal values the
 * lower index first; -0 and +0 equal), their indices in ids and values in vals (k of
 * each at most); returns how many (fewer than k where fewer elements are usable). One
 * pass: once k are held, a group of 16 elements is looked at one by one only when one of
 * them beats the k-th best (a loop the compiler vectorizes), which after the first few
 * thousand is rare. k <= VEC_TOP_MAX: each insertion moves up to k entries, and beyond
 * that a sort is cheaper. What the sampler's top-k and eddy_engine_decode_top give. */
#define VEC_TOP_MAX 64
int64_t vec_top_k(const float *x, int64_t n, int64_t k, int32_t *ids, float *vals);

/* vec_argmax and the argmax's probability under softmax, 1 / vec_sum_exp_f32(x, n, max),
 * in *p (NaN when a logit is NaN or all are -inf). Once per drafted token. */
int64_t vec_argmax_softmax(const float *x, int64_t n, float *p);

/* sum_i x[i] * y[i] over n elements (any n >= 0, no alignment needed). */
float vec_dot_f32(const float *x, const float *y, int64_t n);
float vec_dot_f32_ref(const float *x, const float *y, int64_t n);

/* y[i] += a * x[i] */
void vec_axpy_f32(float *y, float a, const float *x, int64_t n);
void vec_axpy_f32_ref(float *y, float a, const float *x, int64_t n);

/* out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i]; out may
 * alias gate or up. The SIMD variants use the vector exp of vexp.h (about 2 ulp), so
 * they agree with _ref (libm expf) within a few ulp of the result. */
void vec_swiglu_f32(float *out, const float *gate, const float *up, int64_t n);
void vec_swiglu_f32_ref(float *out, const float *gate, const float *up, int64_t n);

/* The sum over i of exp(x[i] - m), accumulated in double. The SIMD variants use the vector
 * exp of vexp.h (about 2 ulp; 0 below -87.3), _ref libm's expf. */
double vec_sum_exp_f32(const float *x, int64_t n, float m);
double vec_sum_exp_f32_ref(const float *x, int64_t n, float m);

/* The log-probability of token `target` under the logits x[0, n) (n >= 1): x[target] -
 * max - log(vec_sum_exp_f32(x, n, max)); NaN when a logit is NaN or all are -inf. What
 * eddy perplexity scores and eddy_engine_decode_logprob gives. */
double vec_logprob(const float *x, int64_t n, int64_t target);
/* log(sum over i of exp(x[i])) (n >= 1): max + log(vec_sum_exp_f32(x, n, max)); NaN as
 * vec_logprob. x[j] - vec_logsumexp(x, n) is token j's log-probability: what
 * eddy_engine_decode_top gives beside a row's best logits when asked. */
double vec_logsumexp(const float *x, int64_t n);

/* ISA variants, compiled only for their architecture; called only when the CPU
 * has the feature. Exposed for the tests. */
float vec_dot_f32_avx2(const float *x, const float *y, int64_t n);
void vec_axpy_f32_avx2(float *y, float a, const float *x, int64_t n);
void vec_swiglu_f32_avx2(float *out, const float *gate, const float *up, int64_t n);
double vec_sum_exp_f32_avx2(const float *x, int64_t n, float m);
float vec_dot_f32_avx512(const float *x, const float *y, int64_t n);
void vec_axpy_f32_avx512(float *y, float a, const float *x, int64_t n);
void vec_swiglu_f32_avx512(float *out, const float *gate, const float *up, int64_t n);
double vec_sum_exp_f32_avx512(const float *x, int64_t n, float m);
float vec_dot_f32_neon(const float *x, const float *y, int64_t n);
void vec_axpy_f32_neon(float *y, float a, const float *x, int64_t n);
void vec_swiglu_f32_neon(float *out, const float *gate, const float *up, int64_t n);
double vec_sum_exp_f32_neon(const float *x, int64_t n, float m);

/* The kernels of one ISA level; NULL where this build has none (the level's
 * isa_available() says whether this CPU runs them). */
typedef struct {
    float (*dot)(const float *x, const float *y, int64_t n);
    void (*axpy)(float *y, float a, const float *x, int64_t n);
    void (*swiglu)(float *out, const float *gate, const float *up, int64_t n);
    double (*sum_exp)(const float *x, int64_t n, float m);
} vec_kernels;
const vec_kernels *vec_kernels_for(isa_level isa);

/* The name of the variant the dispatcher runs: isa_name(isa_active()). */
const char *vec_variant(void);

#endif
