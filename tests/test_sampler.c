/*
 * test_sampler.c — the sampling chain: greedy, each filter's effect, penalties,
 * reproducibility, and that draws follow the distribution.
 */
#include "test.h"

#include <stdlib.h>

#include "eddy.h"

static eddy_sampler_params plain(float temp) {
    eddy_sampler_params p = eddy_sampler_default_params();
    p.temp = temp, p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f;
    return p;
}

static eddy_sampler *make(const eddy_sampler_params *p, int64_t n) {
    eddy_sampler *s = NULL;
    eddy_error err;
    CHECKF(eddy_sampler_new(p, n, &s, &err) == EDDY_OK, "%s", err.msg);
    return s;
}

TEST(sampler_greedy_picks_argmax) {
    float l[6] = {0.1f, 3.0f, -1.0f, 2.9f, NAN, -INFINITY};
    eddy_sampler_params p = plain(0.0f);
    eddy_sampler *s = make(&p, 6);
    REQUIRE(s);
    for (int i = 0; i < 10; i++) CHECK_EQ(eddy_sampler_sample(s, l), 1);
    eddy_sampler_free(s);
    p = plain(1.0f);
    p.top_k = 1; /* top-k 1 is greedy too */
    s = make(&p, 6);
    for (int i = 0; i < 10; i++) CHECK_EQ(eddy_sampler_sample(s, l), 1);
    eddy_sampler_free(s);
    /* greedy without penalties (a scan) and with a penalty that changes nothing here (the
     * candidate chain) agree: ties to the first, NaN and -inf never chosen, token 0 when
     * nothing can be */
    test_rng rng = test_rng_new();
    const int64_t n = 1000;
    float *x = malloc(n * sizeof *x);
    for (int kind = 0; kind < 5; kind++) {
        for (int64_t i = 0; i < n; i++) x[i] = (float)(int)test_rng_below(&rng, 20);
        if (kind == 1)
            for (int64_t i = 0; i < n; i += 3) x[i] = NAN;
        if (kind == 2)
            for (int64_t i = 0; i < n; i++) x[i] = i % 2 ? -INFINITY : NAN;
        if (kind == 3)
            for (int64_t i = 0; i < n; i++) x[i] = -INFINITY;
        if (kind == 4) x[0] = NAN, x[n - 1] = 50.0f;
        eddy_sampler_params q = plain(0.0f);
        eddy_sampler *fast = make(&q, n);
        q.presence_penalty = 1.0f; /* no token accepted: nothing to penalize, but the chain runs */
        eddy_sampler *chained = make(&q, n);
        CHECKF(eddy_sampler_sample(fast, x) == eddy_sampler_sample(chained, x), "kind %d: %d against %d", kind,
               eddy_sampler_sample(fast, x), eddy_sampler_sample(chained, x));
        eddy_sampler_free(fast), eddy_sampler_free(chained);
    }
    free(x);
}

/* 20,000 draws at temperature 1 from 4 tokens: each frequency within 0.02 of its
 * probability (5 standard deviations at p = 0.5 is 0.018). */
TEST(sampler_draws_follow_softmax) {
    float l[4] = {0.0f, 1.0f, 2.0f, -1.0f};
    for (int temp_i = 0; temp_i < 2; temp_i++) {
        float temp = temp_i ? 0.5f : 1.0f;
        eddy_sampler_params p = plain(temp);
        p.seed = test_seed();
        eddy_sampler *s = make(&p, 4);
        REQUIRE(s);
        int counts[4] = {0};
        for (int i = 0; i < 20000; i++) counts[eddy_sampler_sample(s, l)]++;
        double zt = 0;
        for (int i = 0; i < 4; i++) zt += exp(l[i] / temp);
        for (int i = 0; i < 4; i++) {
            double want = exp(l[i] / temp) / zt;
            CHECKF(fabs(counts[i] / 20000.0 - want) < 0.02, "temp %g token %d: %g vs %g", temp, i, counts[i] / 20000.0, want);
        }
        eddy_sampler_free(s);
    }
}

TEST(sampler_filters_cut_the_tail) {
    /* probabilities at temp 1: ~0.64, 0.24, 0.09, 0.03 */
    float l[4] = {3.0f, 2.0f, 1.0f, 0.0f};
    struct { int top_k; float top_p, min_p; int allowed; } cases[] = {
        {2, 1.0f, 0.0f, 2}, {0, 0.85f, 0.0f, 2}, {0, 0.5f, 0.0f, 1}, {0, 1.0f, 0.3f, 2}, {0, 1.0f, 0.1f, 3},
        {3, 0.99f, 0.0f, 3},
    };
    for (int c = 0; c < 6; c++) {
        eddy_sampler_params p = plain(1.0f);
        p.top_k = cases[c].top_k, p.top_p = cases[c].top_p, p.min_p = cases[c].min_p, p.seed = test_seed() + c;
        eddy_sampler *s = make(&p, 4);
        REQUIRE(s);
        int seen[4] = {0};
        for (int i = 0; i < 3000; i++) seen[eddy_sampler_sample(s, l)] = 1;
        for (int t = 0; t < 4; t++)
            CHECKF(seen[t] == (t < cases[c].allowed), "case %d: token %d %s", c, t, seen[t] ? "drawn" : "never drawn");
        eddy_sampler_free(s);
    }
}

TEST(sampler_penalties) {
    float l[3] = {2.0f, 1.9f, -1.0f};
    eddy_sampler_params p = plain(0.0f);
    p.repeat_penalty = 1.5f; /* 2.0 / 1.5 = 1.33 < 1.9 */
    eddy_sampler *s = make(&p, 3);
    REQUIRE(s);
    CHECK_EQ(eddy_sampler_sample(s, l), 0);
    eddy_sampler_accept(s, 0);
    CHECK_EQ(eddy_sampler_sample(s, l), 1);
    eddy_sampler_reset(s);
    CHECK_EQ(eddy_sampler_sample(s, l), 0);
    eddy_sampler_free(s);

    p = plain(0.0f);
    p.repeat_last_n = 2, p.presence_penalty = 0.05f, p.frequency_penalty = 0.1f;
    s = make(&p, 3);
    eddy_sampler_accept(s, 0); /* 2.0 - 0.1 - 0.05 = 1.85 < 1.9 */
    CHECK_EQ(eddy_sampler_sample(s, l), 1);
    eddy_sampler_accept(s, 1), eddy_sampler_accept(s, 1); /* token 0 leaves the 2-token window */
    CHECK_EQ(eddy_sampler_sample(s, l), 0);
    eddy_sampler_free(s);
}

TEST(sampler_is_reproducible) {
    test_rng r = test_rng_new();
    float l[100];
    for (int i = 0; i < 100; i++) l[i] = test_rng_normal(&r);
    eddy_sampler_params p = eddy_sampler_default_params();
    p.seed = 42;
    eddy_sampler *a = make(&p, 100), *b = make(&p, 100);
    REQUIRE(a && b);
    for (int i = 0; i < 200; i++) {
        int32_t x = eddy_sampler_sample(a, l), y = eddy_sampler_sample(b, l);
        CHECK_EQ(x, y);
        eddy_sampler_accept(a, x), eddy_sampler_accept(b, y);
    }
    eddy_sampler_free(a), eddy_sampler_free(b);
}

TEST(sampler_refuses_bad_params) {
    eddy_error err;
    eddy_sampler *s;
    eddy_sampler_params p = eddy_sampler_default_params();
    p.top_p = 0;
    CHECK_EQ(eddy_sampler_new(&p, 10, &s, &err), EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "top-p");
    p = eddy_sampler_default_params(), p.temp = -1;
    CHECK_EQ(eddy_sampler_new(&p, 10, &s, &err), EDDY_ERR_ARG);
    p = eddy_sampler_default_params(), p.min_p = 2;
    CHECK_EQ(eddy_sampler_new(&p, 10, &s, &err), EDDY_ERR_ARG);
    p = eddy_sampler_default_params(), p.repeat_penalty = 0;
    CHECK_EQ(eddy_sampler_new(&p, 10, &s, &err), EDDY_ERR_ARG);
    p = eddy_sampler_default_params();
    CHECK_EQ(eddy_sampler_new(&p, 0, &s, &err), EDDY_ERR_ARG);
    float all_nan[3] = {NAN, NAN, -INFINITY};
    REQUIRE(eddy_sampler_new(&p, 3, &s, &err) == EDDY_OK);
    int32_t t = eddy_sampler_sample(s, all_nan);
    CHECK(t >= 0 && t < 3);
    eddy_sampler_free(s);
}
