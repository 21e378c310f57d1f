/*
 * test_ops.c — dense ops: RMSNorm, SwiGLU, softmax, rotary embeddings (attention:
 * test_attention.c).
 * Each against an independent double-precision formulation, with the bound stated.
 */
#include "test.h"

#include <stdlib.h>

#include "base/threadpool.h"
#include "ops/norm.h"
#include "ops/rope.h"

static float *rand_vec(test_rng *r, int64_t n, float scale) {
    float *v = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = scale * test_rng_normal(r);
    return v;
}

/* float32 ops on O(1) inputs vs double: relative error a few ulps -> 1e-5. */
TEST(ops_rmsnorm_matches_double) {
    test_rng r = test_rng_new();
    int64_t sizes[] = {1, 7, 64, 1000, 4096};
    for (int k = 0; k < 5; k++) {
        int64_t n = sizes[k];
        float *x = rand_vec(&r, n, 3.0f), *w = rand_vec(&r, n, 1.0f), *y = malloc((size_t)n * 4);
        ops_rmsnorm(y, x, w, n, 1e-6f);
        double ss = 0;
        for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
        double sc = 1.0 / sqrt(ss / n + 1e-6);
        for (int64_t i = 0; i < n; i++) {
            double want = x[i] * sc * w[i];
            if (!CHECKF(fabs(y[i] - want) <= 1e-5 * (fabs(want) + 1e-3), "n=%lld i=%lld %g vs %g",
                        (long long)n, (long long)i, y[i], want))
                break;
        }
        ops_rmsnorm(x, x, NULL, n, 1e-6f); /* in place, no weight: unit RMS */
        double ms = 0;
        for (int64_t i = 0; i < n; i++) ms += (double)x[i] * x[i];
        CHECKF(fabs(ms / n - 1.0) < 1e-4 || n == 1, "rms %g", sqrt(ms / n));
        free(x), free(w), free(y);
    }
}

TEST(ops_swiglu_and_softmax) {
    test_rng r = test_rng_new();
    float g[9], u[9], o[9];
    for (int i = 0; i < 9; i++) g[i] = 4 * test_rng_normal(&r), u[i] = test_rng_normal(&r);
    ops_swiglu(o, g, u, 9);
    for (int i = 0; i < 9; i++) {
        double want = g[i] / (1 + exp(-(double)g[i])) * u[i];
        CHECKF(fabs(o[i] - want) <= 1e-6 * (1 + fabs(want)), "%g vs %g", o[i], want);
    }
    CHECK(ops_softplus(100.0f) == 100.0f);
    CHECK(fabsf(ops_softplus(0.0f) - 0.6931472f) < 1e-6f);
    CHECK(ops_softplus(-100.0f) >= 0.0f);
    float s[5] = {1000, 1000, -1000, 0, 999};
    ops_softmax(s, 5);
    double sum = 0;
    for (int i = 0; i < 5; i++) sum += s[i], CHECK(isfinite(s[i]));
    CHECK(fabs(sum - 1) < 1e-6);
    CHECK(fabs(s[0] - s[1]) < 1e-7 && s[2] == 0.0f);
}

/* ==== Rotary embeddings ==== */

/* Double-precision rotation of one head, written as complex multiplication. */
static void rope_double(double *out, const float *x, int64_t head_dim, int64_t n_rot, int64_t pos, double base,
                        rope_style style) {
    for (int64_t d = 0; d < head_dim; d++) out[d] = x[d];
    for (int64_t i = 0; i < n_rot / 2; i++) {
        int64_t ia = style == ROPE_NEOX ? i : 2 * i, ib = style == ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;
        double th = pos * pow(base, -2.0 * i / n_rot);
        double re = x[ia], im = x[ib];
        out[ia] = re * cos(th) - im * sin(th);
        out[ib] = re * sin(th) + im * cos(th);
    }
}

TEST(ops_rope_matches_complex_rotation) {
    test_rng r = test_rng_new();
    struct { int64_t head_dim, n_rot; rope_style style; float base; } cases[] = {
        {64, 64, ROPE_NORM, 10000}, {64, 64, ROPE_NEOX, 10000}, {256, 64, ROPE_NEOX, 10000000},
        {128, 32, ROPE_NORM, 500000}, {8, 2, ROPE_NEOX, 10000},
    };
    int64_t positions[] = {0, 1, 17, 4095, 100000};
    for (int c = 0; c < 5; c++)
        for (int p = 0; p < 5; p++) {
            int64_t hd = cases[c].head_dim, nr = cases[c].n_rot, n_heads = 3;
            float *x = rand_vec(&r, n_heads * hd, 1.0f), *y = malloc((size_t)(n_heads * hd) * 4);
            memcpy(y, x, (size_t)(n_heads * hd) * 4);
            float cs[256];
            ops_rope_table(cs, positions[p], nr, cases[c].base);
            ops_rope_apply(y, n_heads, hd, nr, cs, cases[c].style);
            double want[256];
            for (int64_t h = 0; h < n_heads; h++) {
                rope_double(want, x + h * hd, hd, nr, positions[p], cases[c].base, cases[c].style);
                for (int64_t d = 0; d < hd; d++)
                    CHECKF(fabs(y[h * hd + d] - want[d]) <= 3e-6 * (1 + fabs(want[d])),
                           "case %d pos %lld h %lld d %lld: %g vs %g", c, (long long)positions[p], (long long)h,
                           (long long)d, y[h * hd + d], want[d]);
                for (int64_t d = nr; d < hd; d++) CHECK(y[h * hd + d] == x[h * hd + d]); /* pass-through */
            }
            free(x), free(y);
        }
}

/* q at m and k at n: the dot product depends only on m - n. */
TEST(ops_rope_is_relative) {
    test_rng r = test_rng_new();
    for (int style = 0; style <= 1; style++) {
        float *q = rand_vec(&r, 64, 1), *k = rand_vec(&r, 64, 1);
        double dots[2];
        int64_t ms[2] = {5, 1005}, ns[2] = {2, 1002};
        for (int i = 0; i < 2; i++) {
            float qq[64], kk[64], cs[64];
            memcpy(qq, q, sizeof qq), memcpy(kk, k, sizeof kk);
            ops_rope_table(cs, ms[i], 64, 10000), ops_rope_apply(qq, 1, 64, 64, cs, (rope_style)style);
            ops_rope_table(cs, ns[i], 64, 10000), ops_rope_apply(kk, 1, 64, 64, cs, (rope_style)style);
            dots[i] = 0;
            for (int d = 0; d < 64; d++) dots[i] += (double)qq[d] * kk[d];
        }
        CHECKF(fabs(dots[0] - dots[1]) < 1e-4, "style %d: %g vs %g", style, dots[0], dots[1]);
        free(q), free(k);
    }
}
