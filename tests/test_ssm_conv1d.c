/*
 * test_ssm_conv1d.c — causal depthwise conv1d + SiLU (+ per-head L2 norm), ssm.h:
 * every variant and ISA against the scalar oracle conv1d_scan_ref (channel counts
 * with odd tails, K = 2..8, with and without bias and L2 norm, 1..8 sequences on
 * scattered state slots, strided rows), the prefill bit-identical to the scan of the
 * same ISA, verify snapshots, and golden outputs of transformers.
 *
 * Error bounds:
 *   outputs against conv1d_scan_ref: normalized MSE 1e-12 — at most K+1 products
 *     summed with FMA instead of multiply-add, and the SIMD exp (about 2 ulp) in
 *     SiLU (measured worst 1.3e-14). The error follows the terms (w of scale 0.5
 *     times inputs of scale 1-1.5), not their sum, which can cancel to almost
 *     nothing; with one channel (C=1) a single cancelled output would be the whole
 *     mean square, so it is normalized by at least OUT_FLOOR² (seed 40039481710081
 *     gave 9.78080e-05 against 9.78208e-05, error 1.3e-8: nmse 1.7e-8 unfloored,
 *     6e-14 floored);
 *   states and snapshots: exact — they are copies of raw inputs;
 *   prefill against scan of the same ISA: bit-identical, as the contract says;
 *   golden (torch float32): normalized MSE 1e-12.
 */
#include "ssm/ssm.h"
#include "test_ssm.h"

#define BOUND_OUT 1e-12
#define OUT_FLOOR 0.05

typedef struct {
    conv1d_params p;
    float *w, *bias;
    int64_t R, x_stride, y_stride;
    float *x, *y_ref, *y_got;
    uint64_t seed;
} ccase;

static bool make_ccase(test_rng *rng, ccase *c, int64_t C, int K, bool bias, int64_t l2_dim, int64_t l2_heads,
                       int64_t R) {
    memset(c, 0, sizeof *c);
    c->seed = test_rng_u64(rng);
    test_rng r = {c->seed};
    c->R = R;
    c->x_stride = C + 7;
    c->y_stride = C + 5;
    c->w = ssm_test_alloc(K * C);
    c->bias = ssm_test_alloc(C);
    c->x = ssm_test_alloc(R * c->x_stride);
    c->y_ref = ssm_test_alloc(R * c->y_stride);
    c->y_got = ssm_test_alloc(R * c->y_stride);
    if (!c->w || !c->bias || !c->x || !c->y_ref || !c->y_got) return false;
    ssm_test_normal(&r, c->w, K * C, 0.5f);
    ssm_test_normal(&r, c->bias, C, 0.2f);
    ssm_test_normal(&r, c->x, R * c->x_stride, 1.5f);
    c->p = (conv1d_params){C, K, c->w, bias ? c->bias : NULL, l2_dim * l2_heads, l2_dim, 1e-6f};
    return true;
}

static void free_ccase(ccase *c) { free(c->w), free(c->bias), free(c->x), free(c->y_ref), free(c->y_got); }

static void describe(char *buf, size_t n, const char *what, isa_level isa, const ccase *c) {
    snprintf(buf, n, "%s %s C=%lld K=%d bias=%d l2=%lldx%lld R=%lld seed=%llu", what, isa_name(isa),
             (long long)c->p.conv_dim, c->p.K, c->p.bias != NULL, (long long)c->p.l2_channels / (c->p.l2_dim ? c->p.l2_dim : 1),
             (long long)c->p.l2_dim, (long long)c->R, (unsigned long long)c->seed);
}

static const struct {
    int64_t C;
    int K;
    bool bias;
    int64_t l2_dim, l2_heads;
} shapes[] = {
    {1, 2, false, 0, 0},    {5, 3, true, 0, 0},     {16, 4, false, 16, 1}, {100, 4, true, 0, 0},
    {136, 4, false, 32, 4}, {257, 8, true, 0, 0},   {520, 5, false, 64, 4}, {768, 4, false, 128, 4},
    {1000, 6, true, 0, 0},  {96, 7, false, 24, 2},  {384, 2, true, 128, 2},
};

TEST(conv1d_step_matches_ref) {
    threadpool *pool = NULL;
    REQUIRE(pool_create(&pool, 3, NULL) == EDDY_OK);
    test_rng rng = test_rng_new();
    isa_level isas[ISA_COUNT];
    int n_isa = ssm_test_isas(isas);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n_seq = 1 + (int64_t)(si % 8), n_slots = n_seq + 2;
        if (n_slots % 3 == 0) n_slots++; /* 3 s + 1 mod n_slots: distinct, scattered slots */
        ccase c;
        REQUIRE(make_ccase(&rng, &c, shapes[si].C, shapes[si].K, shapes[si].bias, shapes[si].l2_dim,
                           shapes[si].l2_heads, n_seq));
        int64_t ns = conv1d_state_floats(&c.p), slot[8];
        for (int64_t s = 0; s < n_seq; s++) slot[s] = (3 * s + 1) % n_slots;
        float *s0 = ssm_test_alloc(n_slots * ns), *sr = ssm_test_alloc(n_slots * ns), *sg = ssm_test_alloc(n_slots * ns);
        REQUIRE(s0 && sr && sg);
        ssm_test_normal(&rng, s0, n_slots * ns, 1.0f);
        memcpy(sr, s0, (size_t)(n_slots * ns) * sizeof(float));
        conv1d_step_ref(&c.p, n_seq, c.x, c.x_stride, c.y_ref, c.y_stride, sr, slot);
        for (int ii = 0; ii < n_isa; ii++) {
            memcpy(sg, s0, (size_t)(n_slots * ns) * sizeof(float));
            conv1d_step_isa(isas[ii], pool, &c.p, n_seq, c.x, c.x_stride, c.y_got, c.y_stride, sg, slot);
            char what[160];
            describe(what, sizeof what, "step", isas[ii], &c);
            CLOSE_ROWS_FLOOR(what, c.y_got, c.y_ref, n_seq, c.p.conv_dim, c.y_stride, BOUND_OUT, OUT_FLOOR);
            CHECKF(!memcmp(sg, sr, (size_t)(n_slots * ns) * sizeof(float)), "%s: states differ", what);
        }
        free(s0), free(sr), free(sg);
        free_ccase(&c);
    }
    pool_destroy(pool);
}

TEST(conv1d_scan_and_prefill_match_ref) {
    static const int64_t Ts[] = {1, 2, 3, 7, 33, 100, 257};
    threadpool *pool = NULL;
    REQUIRE(pool_create(&pool, 3, NULL) == EDDY_OK);
    test_rng rng = test_rng_new();
    isa_level isas[ISA_COUNT];
    int n_isa = ssm_test_isas(isas);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
            if (shapes[si].C >= 500 && Ts[ti] > 33) continue;
            int64_t T = Ts[ti];
            ccase c;
            REQUIRE(make_ccase(&rng, &c, shapes[si].C, shapes[si].K, shapes[si].bias, shapes[si].l2_dim,
                               shapes[si].l2_heads, T));
            int64_t ns = conv1d_state_floats(&c.p);
            float *s0 = ssm_test_alloc(ns), *sr = ssm_test_alloc(ns), *sg = ssm_test_alloc(ns);
            float *y_scan = ssm_test_alloc(T * c.y_stride);
            REQUIRE(s0 && sr && sg && y_scan);
            ssm_test_normal(&rng, s0, ns, 1.0f);
            memcpy(sr, s0, (size_t)ns * sizeof(float));
            conv1d_scan_ref(&c.p, T, c.x, c.x_stride, c.y_ref, c.y_stride, sr);
            for (int ii = 0; ii < n_isa; ii++) {
                char what[160];
                memcpy(sg, s0, (size_t)ns * sizeof(float));
                conv1d_scan_isa(isas[ii], pool, &c.p, T, c.x, c.x_stride, y_scan, c.y_stride, sg);
                describe(what, sizeof what, "scan", isas[ii], &c);
                CLOSE_ROWS_FLOOR(what, y_scan, c.y_ref, T, c.p.conv_dim, c.y_stride, BOUND_OUT, OUT_FLOOR);
                CHECKF(!memcmp(sg, sr, (size_t)ns * sizeof(float)), "%s: state differs", what);

                memcpy(sg, s0, (size_t)ns * sizeof(float));
                conv1d_prefill_isa(isas[ii], pool, &c.p, T, c.x, c.x_stride, c.y_got, c.y_stride, sg);
                describe(what, sizeof what, "prefill", isas[ii], &c);
                CHECKF(!memcmp(sg, sr, (size_t)ns * sizeof(float)), "%s: state differs", what);
                bool same = true;
                for (int64_t t = 0; t < T && same; t++)
                    same = !memcmp(c.y_got + t * c.y_stride, y_scan + t * c.y_stride,
                                   (size_t)c.p.conv_dim * sizeof(float));
                CHECKF(same, "%s: not bit-identical to the scan", what);
            }
            free(s0), free(sr), free(sg), free(y_scan);
            free_ccase(&c);
        }
    pool_destroy(pool);
}

TEST(conv1d_verify_matches_ref) {
    threadpool *pool = NULL;
    REQUIRE(pool_create(&pool, 3, NULL) == EDDY_OK);
    test_rng rng = test_rng_new();
    isa_level isas[ISA_COUNT];
    int n_isa = ssm_test_isas(isas);
    static const struct {
        int64_t C;
        int K;
        int64_t n_seq, T;
    } vs[] = {{40, 4, 1, 1}, {136, 4, 2, 3}, {520, 8, 3, 5}, {64, 2, 1, 8}};
    for (size_t vi = 0; vi < sizeof vs / sizeof vs[0]; vi++) {
        int64_t n_seq = vs[vi].n_seq, T = vs[vi].T, n_snap = n_seq * T;
        ccase c;
        REQUIRE(make_ccase(&rng, &c, vs[vi].C, vs[vi].K, vi % 2 == 1, 8, 2, n_seq * T));
        int64_t ns = conv1d_state_floats(&c.p), slot[3] = {2, 0, 1};
        float *s0 = ssm_test_alloc(3 * ns), *sr = ssm_test_alloc(3 * ns), *sg = ssm_test_alloc(3 * ns);
        float *snr = ssm_test_alloc(n_snap * ns), *sng = ssm_test_alloc(n_snap * ns), *pr[32], *pg[32];
        REQUIRE(s0 && sr && sg && snr && sng && n_snap <= 32);
        for (int64_t i = 0; i < n_snap; i++) pr[i] = snr + i * ns, pg[i] = sng + (n_snap - 1 - i) * ns;
        ssm_test_normal(&rng, s0, 3 * ns, 1.0f);
        memcpy(sr, s0, (size_t)(3 * ns) * sizeof(float));
        conv1d_verify_ref(&c.p, n_seq, T, c.x, c.x_stride, c.y_ref, c.y_stride, sr, slot, pr);
        CHECKF(!memcmp(sr, s0, (size_t)(3 * ns) * sizeof(float)), "conv1d_verify_ref changed its input states");
        for (int ii = 0; ii < n_isa; ii++) {
            memcpy(sg, s0, (size_t)(3 * ns) * sizeof(float));
            conv1d_verify_isa(isas[ii], pool, &c.p, n_seq, T, c.x, c.x_stride, c.y_got, c.y_stride, sg, slot, pg);
            char what[160];
            describe(what, sizeof what, "verify", isas[ii], &c);
            CLOSE_ROWS_FLOOR(what, c.y_got, c.y_ref, n_seq * T, c.p.conv_dim, c.y_stride, BOUND_OUT, OUT_FLOOR);
            CHECKF(!memcmp(sg, s0, (size_t)(3 * ns) * sizeof(float)), "%s: the input states changed", what);
            bool same = true;
            for (int64_t i = 0; i < n_snap; i++) same &= !memcmp(pg[i], pr[i], (size_t)ns * sizeof(float));
            CHECKF(same, "%s: snapshots differ", what);
        }
        free(s0), free(sr), free(sg), free(snr), free(sng);
        free_ccase(&c);
    }
    pool_destroy(pool);
}

/* transformers' causal_conv1d_update (the state rolls), causal_conv1d_fn (bias, zero
 * state) and l2norm, through conv1d_pack_weights from the GGUF layout. */
TEST(conv1d_golden_transformers) {
    ssm_golden gf;
    REQUIRE(ssm_golden_open(&gf, "ssm/conv1d_hf.bin"));
    int64_t n;
    const float *meta = ssm_golden_get(&gf, "meta", &n);
    REQUIRE(meta && n == 5);
    int64_t C = (int64_t)meta[0], T = (int64_t)meta[2], l2c = (int64_t)meta[3], l2d = (int64_t)meta[4];
    int K = (int)meta[1];
    const float *x = ssm_golden_get(&gf, "x", NULL), *w_ck = ssm_golden_get(&gf, "w", NULL);
    const float *bias = ssm_golden_get(&gf, "bias", NULL), *st0 = ssm_golden_get(&gf, "state0", NULL);
    const float *y = ssm_golden_get(&gf, "y", NULL), *y_l2 = ssm_golden_get(&gf, "y_l2", NULL);
    const float *st1 = ssm_golden_get(&gf, "state1", NULL), *yb = ssm_golden_get(&gf, "y_bias_zero_state", NULL);
    REQUIRE(x && w_ck && bias && st0 && y && y_l2 && st1 && yb);
    float *w = ssm_test_alloc(K * C), *st = ssm_test_alloc((K - 1) * C), *out = ssm_test_alloc(T * C);
    REQUIRE(w && st && out);
    conv1d_pack_weights(w_ck, C, K, w);
    for (int variant = 0; variant < 3; variant++) {
        conv1d_params p = {C, K, w, NULL, variant == 1 ? l2c : 0, l2d, 1e-6f};
        memcpy(st, st0, (size_t)((K - 1) * C) * sizeof(float));
        if (variant == 0) conv1d_scan_ref(&p, T, x, C, out, C, st);
        if (variant == 1) conv1d_prefill(NULL, &p, T, x, C, out, C, st);
        if (variant == 2) { /* token by token through the decode step */
            for (int64_t t = 0; t < T; t++) conv1d_step(NULL, &p, 1, x + t * C, C, out + t * C, C, st, NULL);
        }
        CLOSE(variant == 1 ? "conv1d + l2 vs transformers" : "conv1d vs transformers", out, variant == 1 ? y_l2 : y,
              T * C, BOUND_OUT);
        CHECKF(!memcmp(st, st1, (size_t)((K - 1) * C) * sizeof(float)), "variant %d: final state differs", variant);
    }
    conv1d_params pb = {C, K, w, bias, 0, 0, 0.0f};
    for (int64_t i = 0; i < (K - 1) * C; i++) st[i] = 0.0f;
    conv1d_scan(NULL, &pb, T, x, C, out, C, st);
    CLOSE("conv1d with bias vs transformers", out, yb, T * C, BOUND_OUT);
    free(w), free(st), free(out);
    ssm_golden_close(&gf);
}
