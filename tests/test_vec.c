/*
 * test_vec.c — every SIMD variant of the vector kernels against the scalar _ref,
 * on awkward lengths and unaligned pointers. Variants the CPU lacks are skipped.
 */
#include "test.h"

#include <stdlib.h>

#include "base/cpu.h"
#include "base/isa.h"
#include "ops/vec.h"

typedef float (*dot_fn)(const float *, const float *, int64_t);
typedef void (*axpy_fn)(float *, float, const float *, int64_t);
typedef void (*swiglu_fn)(float *, const float *, const float *, int64_t);
typedef double (*sum_exp_fn)(const float *, int64_t, float);

typedef struct {
    const char *name;
    dot_fn dot;
    axpy_fn axpy;
    swiglu_fn swiglu;
    sum_exp_fn sum_exp;
    bool available;
} vec_variant_case;

/* The dispatcher, then each level's table (ISA_REF's is _ref itself). */
static int variants(vec_variant_case *out) {
    int n = 0;
    out[n++] = (vec_variant_case){"dispatch", vec_dot_f32, vec_axpy_f32, vec_swiglu_f32, vec_sum_exp_f32, true};
    for (int l = ISA_REF + 1; l < ISA_COUNT; l++) {
        const vec_kernels *k = vec_kernels_for((isa_level)l);
        if (k) out[n++] = (vec_variant_case){isa_name((isa_level)l), k->dot, k->axpy, k->swiglu, k->sum_exp,
                                                   isa_available((isa_level)l)};
    }
    return n;
}

static const int64_t lengths[] = {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 255, 256, 1000, 4099};

/* The dot product's error bound: float32 summation in a different order, so
 * |got - ref| <= 1e-5 * sum |x_i y_i| + 1e-30 (n up to 4099, inputs O(1)). */
TEST(vec_dot_matches_ref) {
    vec_variant_case v[ISA_COUNT];
    int nv = variants(v);
    test_rng rng = test_rng_new();
    float *x = malloc(4200 * sizeof(float)), *y = malloc(4200 * sizeof(float));
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        int64_t n = lengths[li];
        int off = (int)test_rng_below(&rng, 4); /* unaligned starts */
        double mag = 0;
        for (int64_t i = 0; i < n; i++) {
            x[off + i] = test_rng_normal(&rng);
            y[off + i] = test_rng_normal(&rng);
            mag += fabs((double)x[off + i] * y[off + i]);
        }
        float ref = vec_dot_f32_ref(x + off, y + off, n);
        for (int k = 0; k < nv; k++) {
            if (!v[k].available) continue;
            float got = v[k].dot(x + off, y + off, n);
            CHECKF(fabs((double)got - ref) <= 1e-5 * mag + 1e-30, "%s n=%lld: %g vs ref %g", v[k].name,
                   (long long)n, got, ref);
        }
    }
    free(x);
    free(y);
}

/* axpy: one FMA per element versus multiply-then-add in _ref, so each element
 * may differ by one rounding: |got - ref| <= 2^-23 * (|y| + |a x|). */
TEST(vec_axpy_matches_ref) {
    vec_variant_case v[ISA_COUNT];
    int nv = variants(v);
    test_rng rng = test_rng_new();
    float *x = malloc(4200 * sizeof(float)), *y0 = malloc(4200 * sizeof(float));
    float *yr = malloc(4200 * sizeof(float)), *yv = malloc(4200 * sizeof(float));
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        int64_t n = lengths[li];
        float a = test_rng_normal(&rng);
        for (int64_t i = 0; i < n + 1; i++) x[i] = test_rng_normal(&rng), y0[i] = test_rng_normal(&rng);
        memcpy(yr, y0, (size_t)(n + 1) * sizeof(float));
        vec_axpy_f32_ref(yr, a, x, n);
        for (int k = 0; k < nv; k++) {
            if (!v[k].available) continue;
            memcpy(yv, y0, (size_t)(n + 1) * sizeof(float));
            v[k].axpy(yv, a, x, n);
            for (int64_t i = 0; i < n; i++) {
                double bound = 1.2e-7 * (fabs(y0[i]) + fabs(a * x[i])) + 1e-30;
                if (!CHECKF(fabs((double)yv[i] - yr[i]) <= bound, "%s n=%lld i=%lld: %g vs %g", v[k].name,
                            (long long)n, (long long)i, yv[i], yr[i]))
                    break;
            }
            CHECKF(yv[n] == y0[n], "%s wrote past the end (n=%lld)", v[k].name, (long long)n);
        }
    }
    free(x), free(y0), free(yr), free(yv);
}

/* swiglu: the vector exp (about 2 ulp) against libm's, a division and a product, so
 * |got - ref| <= 8 * 2^-24 * |ref| + 1e-30; gates from -100 (exp(-g) clamped, result
 * ~ -0) to 100 and exact zeros; out aliasing gate, one element past n untouched. */
TEST(vec_swiglu_matches_ref) {
    vec_variant_case v[ISA_COUNT];
    int nv = variants(v);
    test_rng rng = test_rng_new();
    float *g = malloc(4200 * sizeof(float)), *u = malloc(4200 * sizeof(float));
    float *yr = malloc(4200 * sizeof(float)), *yv = malloc(4200 * sizeof(float));
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        int64_t n = lengths[li];
        for (int64_t i = 0; i < n + 1; i++) {
            const uint32_t kind = test_rng_below(&rng, 8);
            g[i] = kind == 0 ? 0.0f : kind == 1 ? test_rng_uniform(&rng, -100, 100) : 4 * test_rng_normal(&rng);
            u[i] = test_rng_normal(&rng);
        }
        vec_swiglu_f32_ref(yr, g, u, n);
        for (int k = 0; k < nv; k++) {
            if (!v[k].available) continue;
            memcpy(yv, g, (size_t)(n + 1) * sizeof(float));
            v[k].swiglu(yv, yv, u, n); /* in place over the gate */
            for (int64_t i = 0; i < n; i++) {
                double bound = 8 * 0x1p-24 * fabs((double)yr[i]) + 1e-30;
                if (!CHECKF(fabs((double)yv[i] - yr[i]) <= bound, "%s n=%lld i=%lld: silu(%g) * %g = %g vs %g",
                            v[k].name, (long long)n, (long long)i, g[i], u[i], yv[i], yr[i]))
                    break;
            }
            CHECKF(yv[n] == g[n], "%s wrote past the end (n=%lld)", v[k].name, (long long)n);
        }
    }
    free(g), free(u), free(yr), free(yv);
}

/* sum_exp: each term within the vector exp's 2 ulp of libm's, summed in double in another
 * order, so |got - ref| <= 4 * 2^-24 * ref + 1e-300; logits of a model's spread below their
 * max, with -inf (0), values below exp's range (0 in the vector exp, subnormal in libm's:
 * both under the bound) and the max itself (1). */
TEST(vec_sum_exp_matches_ref) {
    vec_variant_case v[ISA_COUNT];
    int nv = variants(v);
    test_rng rng = test_rng_new();
    float *x = malloc(4200 * sizeof(float));
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        const int64_t n = lengths[li];
        for (int64_t i = 0; i < n; i++) {
            const uint32_t kind = test_rng_below(&rng, 16);
            x[i] = kind == 0 ? -INFINITY : kind == 1 ? test_rng_uniform(&rng, -200, -80) : 3 * test_rng_normal(&rng);
        }
        const float m = 12.0f;
        const double ref = vec_sum_exp_f32_ref(x, n, m);
        for (int k = 0; k < nv; k++) {
            if (!v[k].available) continue;
            const double got = v[k].sum_exp(x, n, m);
            CHECKF(fabs(got - ref) <= 4 * 0x1p-24 * ref + 1e-300, "%s n=%lld: %.17g vs ref %.17g", v[k].name,
                   (long long)n, got, ref);
        }
    }
    const float one[1] = {5.0f};
    CHECK(vec_sum_exp_f32(one, 1, 5.0f) == 1.0 && vec_sum_exp_f32(one, 0, 5.0f) == 0.0);
    free(x);
}

/* vec_logprob against the formula in double with libm's exp: a row of a vocabulary's
 * size (within 1e-6), the target the largest or far below it; a NaN anywhere gives NaN. */
TEST(vec_logprob_matches_the_formula) {
    test_rng rng = test_rng_new();
    const int64_t n = 151936;
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = 3 * test_rng_normal(&rng);
    x[777] = 30.0f;
    const int64_t targets[] = {777, 0, n - 1, 4242};
    for (int t = 0; t < 4; t++) {
        double sum = 0;
        for (int64_t i = 0; i < n; i++) sum += exp((double)x[i] - 30.0);
        const double want = (double)x[targets[t]] - 30.0 - log(sum), got = vec_logprob(x, n, targets[t]);
        CHECKF(fabs(got - want) <= 1e-6, "target %lld: %.12g, the formula %.12g", (long long)targets[t], got, want);
    }
    x[1234] = NAN;
    CHECK(isnan(vec_logprob(x, n, 777)));
    free(x);
}

/* vec_argmax_softmax against the formula in double with libm's exp: the argmax, and its
 * probability within 1e-6 relative, for a clear winner and for a vocabulary of near ties;
 * NaN for a NaN anywhere. */
TEST(vec_argmax_softmax_matches_the_formula) {
    test_rng rng = test_rng_new();
    const int64_t n = 151936;
    float *x = malloc((size_t)n * sizeof *x);
    for (int round = 0; round < 2; round++) {
        for (int64_t i = 0; i < n; i++) x[i] = (round ? 0.01f : 3.0f) * test_rng_normal(&rng);
        x[4242] = round ? 0.1f : 20.0f;
        const int64_t b = vec_argmax_ref(x, n);
        double sum = 0;
        for (int64_t i = 0; i < n; i++) sum += exp((double)x[i] - x[b]);
        float p;
        CHECK_EQ(vec_argmax_softmax(x, n, &p), b);
        CHECKF(fabs(p * sum - 1.0) <= 1e-6, "round %d: p %.9g, the formula %.9g", round, p, 1.0 / sum);
    }
    x[77] = NAN;
    float p;
    vec_argmax_softmax(x, n, &p);
    CHECK(isnan(p));
    free(x);
}

/* vec_logsumexp against the same formula: rows of a vocabulary's size, of 3 and of 1,
 * within 1e-6; a row's log-probabilities from it are vec_logprob's within 1e-9 (the same
 * sum, subtracted in another order); NaN for a NaN anywhere or a row all -inf. */
TEST(vec_logsumexp_matches_the_formula) {
    test_rng rng = test_rng_new();
    const int64_t lens[] = {151936, 3, 1};
    for (int li = 0; li < 3; li++) {
        const int64_t n = lens[li];
        float *x = malloc((size_t)n * sizeof *x);
        for (int64_t i = 0; i < n; i++) x[i] = 3 * test_rng_normal(&rng);
        x[n / 2] = 30.0f;
        double sum = 0;
        for (int64_t i = 0; i < n; i++) sum += exp((double)x[i] - 30.0);
        const double want = 30.0 + log(sum), got = vec_logsumexp(x, n);
        CHECKF(fabs(got - want) <= 1e-6, "n %lld: %.12g, the formula %.12g", (long long)n, got, want);
        const int64_t j = n - 1;
        CHECKF(fabs(((double)x[j] - got) - vec_logprob(x, n, j)) <= 1e-9, "n %lld: %.12g, vec_logprob %.12g",
               (long long)n, (double)x[j] - got, vec_logprob(x, n, j));
        x[0] = NAN;
        CHECK(isnan(vec_logsumexp(x, n)));
        for (int64_t i = 0; i < n; i++) x[i] = -INFINITY;
        CHECK(isnan(vec_logsumexp(x, n)));
        free(x);
    }
}

TEST(vec_dispatch_respects_force_ref) {
    CHECK_STR(vec_variant(), isa_name(isa_active()));
    if (cpu_force_ref()) CHECK_STR(vec_variant(), "ref");
#if defined(__x86_64__)
    else if (cpu_has_avx512(cpu_features())) CHECK_STR(vec_variant(), "avx512");
#endif
    CHECK(vec_kernels_for(ISA_REF) && vec_kernels_for(ISA_REF)->dot == vec_dot_f32_ref);
    CHECK(vec_kernels_for(ISA_COUNT) == NULL);
}

/* vec_argmax against the scalar loop: random rows of awkward lengths, rows whose largest
 * value repeats in several chunks (the first must win), maxima at either end, -inf
 * everywhere, NaNs scattered (never taken) and everywhere (0). */
TEST(vec_argmax_matches_ref) {
    test_rng rng = test_rng_new();
    static const int64_t ns[] = {1, 2, 15, 16, 17, 255, 256, 257, 511, 1000, 4099, 151936};
    float *x = malloc(151936 * sizeof(float));
    for (size_t li = 0; li < sizeof ns / sizeof ns[0]; li++) {
        const int64_t n = ns[li];
        for (int kind = 0; kind < 7; kind++) {
            for (int64_t i = 0; i < n; i++) x[i] = (float)(int)test_rng_below(&rng, 50) - 25.0f; /* many ties */
            if (kind == 1) x[n - 1] = 100.0f;
            if (kind == 2) x[0] = 100.0f;
            if (kind == 3) /* the largest in several chunks: its first place wins */
                for (int64_t i = n - 1; i >= 0; i -= 97) x[i] = 100.0f;
            if (kind == 4)
                for (int64_t i = 0; i < n; i++) x[i] = -INFINITY;
            if (kind == 5) /* NaNs, the first element one of them */
                for (int64_t i = 0; i < n; i += 7) x[i] = NAN;
            if (kind == 6)
                for (int64_t i = 0; i < n; i++) x[i] = NAN;
            const int64_t want = vec_argmax_ref(x, n), got = vec_argmax(x, n);
            CHECKF(got == want, "n=%lld kind %d: %lld, the scalar loop %lld", (long long)n, kind, (long long)got,
                   (long long)want);
        }
    }
    /* the reference itself on a few hand-made rows */
    const float a[] = {1, 3, 3, 2}, b[] = {NAN, -1, -2}, c[] = {NAN, NAN};
    CHECK(vec_argmax_ref(a, 4) == 1 && vec_argmax_ref(b, 3) == 1 && vec_argmax_ref(c, 2) == 0);
    free(x);
}
