/*
 * test_sampler.c — the sampling chain: greedy, each filter's effect, penalties,
 * reproducibility, and that draws follow the distribution.
 */
#include "test.h"

#include <stdlib.h>

#include "eddy.h"
#include "gen/sampler.h"
#include "ops/vec.h"

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
    CHECK(!eddy_sampler_params_greedy(&p));
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
        CHECK(eddy_sampler_params_greedy(&q));
        eddy_sampler *fast = make(&q, n);
        q.presence_penalty = 1.0f; /* no token accepted: nothing to penalize, but the chain runs */
        CHECK(!eddy_sampler_params_greedy(&q));
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

/* The chain's order is by logit, highest first, equal logits by lower id (-0 equal to +0):
 * its distribution over a vocabulary of many ties, signs and zeros equals one built here
 * with qsort and the chain's arithmetic (softmax at temperature 1 accumulated in double
 * over the sorted candidates, top-p's shortest prefix, min-p, then the temperature), bit
 * for bit, for top-k off (the whole vocabulary sorted) and on, small and large. */
typedef struct {
    int32_t id;
    float logit;
} ref_cand;
static int ref_desc(const void *a, const void *b) {
    const float x = ((const ref_cand *)a)->logit, y = ((const ref_cand *)b)->logit;
    if (x != y) return x < y ? 1 : -1;
    return ((const ref_cand *)a)->id - ((const ref_cand *)b)->id;
}
static void ref_softmax(const ref_cand *c, float *pr, int64_t n, float temp) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += pr[i] = expf((c[i].logit - c[0].logit) / temp);
    for (int64_t i = 0; i < n; i++) pr[i] = (float)(pr[i] / sum);
}

TEST(sampler_order_and_probabilities_match_a_sort) {
    test_rng rng = test_rng_new();
    const int64_t n = 20000;
    float *x = malloc(n * sizeof *x), *got = malloc(n * sizeof *got), *want = calloc(n, sizeof *want);
    float *pr = malloc(n * sizeof *pr);
    ref_cand *c = malloc(n * sizeof *c);
    const int32_t top_ks[] = {0, 40, 100, 65, 7, 1000};
    for (size_t ki = 0; ki < sizeof top_ks / sizeof top_ks[0]; ki++) {
        for (int64_t i = 0; i < n; i++) { /* ties: about 200 a value, both zeros the largest, so
                                              * that a top-k of 7 or 100 cuts among them; or about 50
                                              * a value of either sign; a few NaN and -inf left out */
            const int v = ki % 2 ? (int)test_rng_below(&rng, 400) - 200 : -(int)test_rng_below(&rng, 100);
            x[i] = v == 0 ? (test_rng_below(&rng, 2) ? -0.0f : 0.0f) : (float)v / 16.0f;
        }
        x[17] = NAN, x[18] = -INFINITY, x[n - 1] = -INFINITY;
        eddy_sampler_params p = plain(0.7f);
        p.top_k = top_ks[ki], p.top_p = 0.9f, p.min_p = 0.001f;
        sampler *s = NULL;
        eddy_error err;
        REQUIRE(sampler_new(&s, &p, n, &err) == EDDY_OK);
        sampler_probs(s, x, got);
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++)
            if (!isnan(x[i]) && x[i] != -INFINITY) c[m].id = (int32_t)i, c[m].logit = x[i], m++;
        qsort(c, (size_t)m, sizeof *c, ref_desc);
        int64_t keep = p.top_k > 0 && p.top_k < m ? p.top_k : m;
        ref_softmax(c, pr, keep, 1.0f);
        double cum = 0;
        for (int64_t i = 0; i < keep; i++)
            if ((cum += pr[i]) >= p.top_p) {
                keep = i + 1;
                break;
            }
        int64_t k2 = 1;
        while (k2 < keep && pr[k2] >= p.min_p * pr[0]) k2++;
        keep = k2;
        ref_softmax(c, pr, keep, p.temp);
        memset(want, 0, n * sizeof *want);
        for (int64_t i = 0; i < keep; i++) want[c[i].id] = pr[i];
        CHECKF(!memcmp(got, want, n * sizeof *got), "top-k %d: the distributions differ (%lld kept)", p.top_k,
               (long long)keep);
        sampler_free(s);
    }
    free(x), free(got), free(want), free(pr), free(c);
}

/* A row of n logits for the top tests: values from a small set (ties), both zeros, a few
 * NaN and -inf; with `usable` >= 0 only that many elements are neither NaN nor -inf. */
static void tie_row(test_rng *rng, float *x, int64_t n, int spread, int64_t usable) {
    for (int64_t i = 0; i < n; i++) {
        const int v = (int)test_rng_below(rng, (uint32_t)spread) - spread / 2;
        x[i] = v == 0 ? (test_rng_below(rng, 2) ? -0.0f : 0.0f) : (float)v / 8.0f;
        if (test_rng_below(rng, 50) == 0) x[i] = test_rng_below(rng, 2) ? NAN : -INFINITY;
    }
    if (usable >= 0)
        for (int64_t i = 0; i < n; i++)
            if (i % (n / (usable + 1) + 1) || i / (n / (usable + 1) + 1) >= usable) x[i] = i % 2 ? NAN : -INFINITY;
}

/* vec_top_k is the first k of a qsort by the chain's order (logit, then id; -0 equal to
 * +0; NaN and -inf left out), ids and values bit for bit, for k 1..64 on rows of awkward
 * lengths, many ties, and fewer usable elements than k. */
TEST(vec_top_k_matches_a_sort) {
    test_rng rng = test_rng_new();
    const int64_t lens[] = {1, 2, 15, 16, 17, 63, 100, 1000, 20000};
    const int64_t ks[] = {1, 2, 7, 40, 63, 64};
    float *x = malloc(20000 * sizeof *x), vals[64];
    ref_cand *c = malloc(20000 * sizeof *c);
    int32_t ids[64];
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (int rep = 0; rep < 3; rep++) {
                const int64_t n = lens[li], k = ks[ki];
                tie_row(&rng, x, n, rep == 0 ? 9 : 400, rep == 2 ? k / 2 : -1);
                int64_t m = 0;
                for (int64_t i = 0; i < n; i++)
                    if (!isnan(x[i]) && x[i] != -INFINITY) c[m].id = (int32_t)i, c[m].logit = x[i], m++;
                qsort(c, (size_t)m, sizeof *c, ref_desc);
                const int64_t want = m < k ? m : k, got = vec_top_k(x, n, k, ids, vals);
                REQUIRE(CHECKF(got == want, "n %lld k %lld: %lld of %lld", (long long)n, (long long)k, (long long)got,
                               (long long)want));
                for (int64_t i = 0; i < got; i++)
                    REQUIRE(CHECKF(ids[i] == c[i].id && !memcmp(&vals[i], &x[c[i].id], sizeof *vals),
                                   "n %lld k %lld: entry %lld is %d, the sort's %d", (long long)n, (long long)k,
                                   (long long)i, ids[i], c[i].id));
            }
    free(x), free(c);
}

/* eddy_sampler_params_top: how many best logits a sampler looks at, 0 when it needs the
 * whole row */
TEST(sampler_params_top) {
    eddy_sampler_params p = eddy_sampler_default_params();
    CHECK_EQ(eddy_sampler_params_top(&p), 40);
    p.top_k = 64;
    CHECK_EQ(eddy_sampler_params_top(&p), 64);
    p.top_k = 65;
    CHECK_EQ(eddy_sampler_params_top(&p), 0);
    p.top_k = 0;
    CHECK_EQ(eddy_sampler_params_top(&p), 0);
    p.top_k = 40, p.repeat_penalty = 1.1f;
    CHECK_EQ(eddy_sampler_params_top(&p), 0);
    p.repeat_penalty = 1.0f, p.presence_penalty = 0.5f;
    CHECK_EQ(eddy_sampler_params_top(&p), 0);
    p.presence_penalty = 0.0f, p.temp = 0.0f, p.top_k = 0;
    CHECK_EQ(eddy_sampler_params_top(&p), 1);
    p.frequency_penalty = 0.1f;
    CHECK_EQ(eddy_sampler_params_top(&p), 0);
    /* with banned tokens, as many more (while they fit in EDDY_TOP_MAX) */
    p = eddy_sampler_default_params();
    CHECK_EQ(eddy_sampler_params_top_banned(&p, 0), 40);
    CHECK_EQ(eddy_sampler_params_top_banned(&p, 3), 43);
    CHECK_EQ(eddy_sampler_params_top_banned(&p, EDDY_TOP_MAX - 40), EDDY_TOP_MAX);
    CHECK_EQ(eddy_sampler_params_top_banned(&p, EDDY_TOP_MAX - 39), 0);
    p.temp = 0.0f;
    CHECK_EQ(eddy_sampler_params_top_banned(&p, 5), 6);
    p.repeat_penalty = 1.1f;
    CHECK_EQ(eddy_sampler_params_top_banned(&p, 5), 0);
}

/* eddy_top_remove drops the banned tokens from a row's candidates, the others' order kept */
TEST(top_remove_keeps_the_order) {
    eddy_token ids[6] = {9, 4, 7, 1, 4000, 3};
    float logits[6] = {6, 5, 4, 3, 2, 1};
    const eddy_token banned[3] = {7, 3, 12};
    const int32_t n = eddy_top_remove(ids, logits, 6, banned, 3);
    CHECK_EQ(n, 4);
    const eddy_token want_ids[4] = {9, 4, 1, 4000};
    const float want_logits[4] = {6, 5, 3, 2};
    CHECK(!memcmp(ids, want_ids, sizeof want_ids) && !memcmp(logits, want_logits, sizeof want_logits));
    CHECK_EQ(eddy_top_remove(ids, logits, 4, NULL, 0), 4);
    CHECK_EQ(eddy_top_remove(ids, logits, 4, want_ids, 4), 0);
}

/* eddy_sampler_sample_top on a row's best k (vec_top_k, k at least eddy_sampler_params_top)
 * picks what eddy_sampler_sample picks on the whole row, step after step (the same draws
 * of the generator): greedy, eddy run's defaults, top-k 1 and 64 with and without top-p
 * and min-p, on rows of ties and rows with fewer usable logits than the top-k. */
TEST(sampler_sample_top_matches_the_whole_row) {
    test_rng rng = test_rng_new();
    const int64_t n = 3000;
    float *x = malloc(n * sizeof *x), vals[64];
    int32_t ids[64];
    eddy_sampler_params ps[6];
    for (int i = 0; i < 6; i++) ps[i] = eddy_sampler_default_params();
    ps[0].temp = 0.0f;
    ps[2].top_k = 1;
    ps[3].top_k = 64, ps[3].top_p = 1.0f, ps[3].min_p = 0.0f, ps[3].temp = 1.5f;
    ps[4].top_k = 7, ps[4].top_p = 0.5f;
    ps[5].top_k = 64, ps[5].seed = 99;
    for (int pi = 0; pi < 6; pi++) {
        const int32_t need = eddy_sampler_params_top(&ps[pi]);
        REQUIRE(CHECKF(need >= 1, "settings %d need the whole row", pi));
        eddy_sampler *whole = make(&ps[pi], n), *top = make(&ps[pi], n);
        REQUIRE(whole && top);
        for (int step = 0; step < 300; step++) {
            tie_row(&rng, x, n, step % 3 == 0 ? 9 : 2000, step % 7 == 0 ? step % 5 : -1);
            const int64_t k = step % 2 ? need : 64; /* the least the settings need, or more */
            const int32_t got = (int32_t)vec_top_k(x, n, k, ids, vals);
            const int32_t a = eddy_sampler_sample(whole, x), b = eddy_sampler_sample_top(top, ids, vals, got);
            REQUIRE(CHECKF(a == b, "settings %d step %d (k %lld): the whole row gives %d, its top %d", pi, step,
                           (long long)k, a, b));
            eddy_sampler_accept(whole, a), eddy_sampler_accept(top, b);
        }
        eddy_sampler_free(whole), eddy_sampler_free(top);
    }
    free(x);
}
