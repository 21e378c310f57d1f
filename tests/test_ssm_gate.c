/*
 * test_ssm_gate.c — the decay gate (ssm.h): g = a * softplus(alpha + dt_bias),
 * beta = sigmoid(b), against a double-precision evaluation of the same formula
 * (|err| <= 4 ulp of the result + 1e-30) across the softplus guard at 20, with
 * strided rows, and against the gate as transformers' Qwen3-Next computes it; the
 * grouped layout of Qwen3-Next's fused b|a projection against the same gates from
 * separate contiguous rows.
 */
#include "ops/norm.h"
#include "ssm/ssm.h"
#include "test_ssm.h"

static double softplus_d(double x) { return x > 20 ? x : log1p(exp(x)); }

TEST(gate_matches_formula) {
    test_rng rng = test_rng_new();
    const int64_t R = 37, H = 13, as = H + 4, bs = H + 2;
    float alpha[37 * 17], b[37 * 15], a[13], dt[13], g[37 * 13], beta[37 * 13], g2[37 * 13];
    for (int64_t i = 0; i < R * as; i++) alpha[i] = 12.0f * test_rng_normal(&rng);
    for (int64_t i = 0; i < R * bs; i++) b[i] = 6.0f * test_rng_normal(&rng);
    alpha[0] = 20.0f, alpha[1] = nextafterf(20.0f, 0), alpha[2] = 80.0f, alpha[3] = -80.0f;
    for (int64_t h = 0; h < H; h++) a[h] = -expf(test_rng_uniform(&rng, -4.6f, 2.77f)), dt[h] = 0.0f;
    for (int64_t h = 4; h < H; h++) dt[h] = test_rng_normal(&rng);
    ssm_gate(R, H, alpha, as, b, bs, H, H, a, dt, g, beta);
    for (int64_t r = 0; r < R; r++)
        for (int64_t h = 0; h < H; h++) {
            double eg = a[h] * softplus_d((double)(float)(alpha[r * as + h] + dt[h]));
            double eb = 1.0 / (1.0 + exp(-(double)b[r * bs + h]));
            double gv = g[r * H + h], bv = beta[r * H + h];
            CHECKF(fabs(gv - eg) <= 4 * 1.2e-7 * fabs(eg) + 1e-30, "g[%lld][%lld] = %.9g, expected %.9g", (long long)r,
                   (long long)h, gv, eg);
            CHECKF(fabs(bv - eb) <= 4 * 1.2e-7 * fabs(eb) + 1e-30, "beta[%lld][%lld] = %.9g, expected %.9g",
                   (long long)r, (long long)h, bv, eb);
            CHECKF(gv <= 0 && bv >= 0 && bv <= 1, "g or beta out of range at %lld,%lld", (long long)r, (long long)h);
        }
    /* no beta wanted; the plain name equals _ref */
    ssm_gate_ref(R, H, alpha, as, NULL, 0, H, H, a, dt, g2, NULL);
    CHECK(!memcmp(g, g2, sizeof g));
}

TEST(gate_golden_transformers) {
    ssm_golden gf;
    REQUIRE(ssm_golden_open(&gf, "ssm/gate_hf.bin"));
    int64_t n;
    const float *meta = ssm_golden_get(&gf, "meta", &n);
    REQUIRE(meta && n == 2);
    int64_t R = (int64_t)meta[0], H = (int64_t)meta[1];
    const float *a = ssm_golden_get(&gf, "a", NULL), *dt = ssm_golden_get(&gf, "dt_bias", NULL);
    const float *alpha = ssm_golden_get(&gf, "alpha", NULL), *b = ssm_golden_get(&gf, "b", NULL);
    const float *ge = ssm_golden_get(&gf, "g", NULL), *be = ssm_golden_get(&gf, "beta", NULL);
    REQUIRE(a && dt && alpha && b && ge && be && R * H <= 256);
    float g[256], beta[256];
    ssm_gate(R, H, alpha, H, b, H, H, H, a, dt, g, beta);
    for (int64_t i = 0; i < R * H; i++) {
        CHECKF(fabsf(g[i] - ge[i]) <= 4 * 1.2e-7f * fabsf(ge[i]) + 1e-30f, "g[%lld] = %.9g, transformers %.9g",
               (long long)i, g[i], ge[i]);
        CHECKF(fabsf(beta[i] - be[i]) <= 4 * 1.2e-7f * fabsf(be[i]) + 1e-30f, "beta[%lld] = %.9g, transformers %.9g",
               (long long)i, beta[i], be[i]);
    }
    ssm_golden_close(&gf);
}

/* Qwen3-Next's fused projection: per key head (n_v / n_k of them), b of its r value
 * heads, then a of them. Read in place through group = r, group_stride = 2 r, the
 * gates must be bit-identical to those of the same values laid out as two contiguous
 * (rows, n_v) arrays, and to the formula written out per head. */
TEST(gate_reads_fused_ba_rows) {
    test_rng rng = test_rng_new();
    enum { R = 5, NK = 3, RATIO = 4, NV = NK * RATIO };
    float ba[R * 2 * NV], alpha[R * NV], b[R * NV], a[NV], dt[NV];
    float g[R * NV], beta[R * NV], g2[R * NV], beta2[R * NV];
    for (int i = 0; i < R * 2 * NV; i++) ba[i] = 8.0f * test_rng_normal(&rng);
    ba[RATIO] = 25.0f; /* a of head 0, row 0: past the softplus guard */
    for (int h = 0; h < NV; h++) a[h] = -expf(test_rng_normal(&rng)), dt[h] = test_rng_normal(&rng);
    dt[0] = 0.5f;
    for (int r = 0; r < R; r++)
        for (int h = 0; h < NV; h++) {
            const int grp = h / RATIO, j = h % RATIO;
            b[r * NV + h] = ba[r * 2 * NV + grp * 2 * RATIO + j];
            alpha[r * NV + h] = ba[r * 2 * NV + grp * 2 * RATIO + RATIO + j];
        }
    ssm_gate(R, NV, ba + RATIO, 2 * NV, ba, 2 * NV, RATIO, 2 * RATIO, a, dt, g, beta);
    ssm_gate(R, NV, alpha, NV, b, NV, NV, NV, a, dt, g2, beta2);
    CHECK(!memcmp(g, g2, sizeof g));
    CHECK(!memcmp(beta, beta2, sizeof beta));
    for (int i = 0; i < R * NV; i++) {
        const float eg = a[i % NV] * ops_softplus(alpha[i] + dt[i % NV]), eb = ops_sigmoid(b[i]);
        if (!CHECKF(memcmp(&g[i], &eg, sizeof eg) == 0 && memcmp(&beta[i], &eb, sizeof eb) == 0,
                    "row %d head %d: g %.9g beta %.9g, expected %.9g %.9g", i / NV, i % NV, g[i], beta[i], eg, eb))
            break;
    }
    CHECK(g[0] == a[0] * 25.5f);
}
