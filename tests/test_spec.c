/*
 * test_spec.c — speculative decoding (src/gen/draft.c, speculative.c):
 *   - prompt lookup finds the latest, longest earlier n-gram and drafts what followed;
 *   - the acceptance rule of speculative sampling draws from p whatever q drafts
 *     (chi-square test);
 *   - on the tiny model of every architecture, generation with drafts (prompt lookup;
 *     a draft model) gives the tokens generation without them gives, bit for bit —
 *     greedy and sampled with prompt lookup —, stops where it stops (length, context,
 *     callback) and leaves the sequence in the same state (position, logits);
 *   - with a draft model at temperature > 0, the second generated token follows the
 *     model's own distribution (chi-square test against the exact marginal);
 *   - a draft model of another vocabulary, or a context without states for the verify,
 *     is refused.
 *
 * The chi-square tests fail when the statistic's p-value is below 1e-4 (Wilson-Hilferty
 * approximation of the chi-square tail): a correct rule fails once in 10,000 seeds, a
 * rule that kept the drafts' distribution q fails every time (checked below: the
 * statistic against q is far past the bound).
 */
#include "test.h"

#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "gen/sampler.h"
#include "gen/spec.h"
#include "test_seq.h"

/* ==== Prompt lookup ==== */

TEST(spec_ngram_lookup_takes_latest_longest_match) {
    eddy_token out[8];
    int g;
    /* ... 1 2 3 [9 9] ... 1 2 3 [7 8] ... 2 3 -> "2 3" last seen before 7 8 */
    const eddy_token h1[] = {1, 2, 3, 9, 9, 4, 1, 2, 3, 7, 8, 5, 2, 3};
    CHECK_EQ(ngram_lookup(h1, 14, 3, 2, out, &g), 2);
    CHECK_EQ(out[0], 7), CHECK_EQ(out[1], 8), CHECK_EQ(g, 2);
    /* a longer n-gram wins over a later shorter one: "1 2 3" -> 9 (at 0), not "2 3" */
    const eddy_token h2[] = {1, 2, 3, 9, 5, 2, 3, 6, 1, 2, 3};
    CHECK_EQ(ngram_lookup(h2, 11, 3, 1, out, &g), 1);
    CHECK_EQ(out[0], 9), CHECK_EQ(g, 3);
    /* ngram 2 cannot see that: "2 3" -> 6 */
    CHECK_EQ(ngram_lookup(h2, 11, 2, 1, out, &g), 1);
    CHECK_EQ(out[0], 6);
    /* a repeating tail drafts its period past the end */
    const eddy_token h3[] = {4, 5, 6, 4, 5, 6, 4};
    CHECK_EQ(ngram_lookup(h3, 7, 3, 6, out, &g), 6);
    const eddy_token want[6] = {5, 6, 4, 5, 6, 4};
    CHECK(!memcmp(out, want, sizeof want));
    /* nothing recurs: no drafts */
    const eddy_token h4[] = {1, 2, 3, 4};
    CHECK_EQ(ngram_lookup(h4, 4, 3, 4, out, &g), 0);
    CHECK_EQ(ngram_lookup(h4, 1, 3, 4, out, &g), 0);
    CHECK_EQ(g, 0);
}

/* ==== The draft length ==== */

/* Drafts that keep being accepted are asked for in full; drafts that keep being refused
 * stop being asked for (plain steps), for that kind of match only. */
TEST(spec_draft_length_follows_acceptance) {
    eddy_model *m = tseq_load("models/qwen35-tiny-f32.gguf");
    REQUIRE(m);
    const eddy_spec_params p = {.type = EDDY_SPEC_NGRAM, .draft_max = 8};
    const eddy_sampler_params sp = eddy_sampler_default_params();
    drafter *d;
    REQUIRE(drafter_new(&p, m, &sp, NULL, &d, NULL) == EDDY_OK);
    const eddy_token g3[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3};   /* "1 2 3" recurs: kind 3 */
    const eddy_token g1[] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 5}; /* only "5" recurs: kind 1 */
    eddy_token out[8];
    int64_t k;
    /* before any step: what the prior's cost line and an acceptance of 1/2 give, a few */
    REQUIRE(drafter_propose(d, g3, 12, 8, out, NULL, &k, NULL) == EDDY_OK);
    CHECKF(k >= 2 && k <= 4, "%lld drafts before any step", (long long)k);
    /* a verify step of x tokens costs 1 + 0.1 x: kind 3 always right, kind 1 always wrong */
    for (int i = 0; i < 30; i++) {
        REQUIRE(drafter_propose(d, g3, 12, 8, out, NULL, &k, NULL) == EDDY_OK);
        if (k) drafter_update(d, k, k, 1 + 0.1 * (double)(k + 1));
        REQUIRE(drafter_propose(d, g1, 11, 8, out, NULL, &k, NULL) == EDDY_OK);
        if (k) drafter_update(d, k, 0, 1 + 0.1 * (double)(k + 1));
    }
    REQUIRE(drafter_propose(d, g3, 12, 8, out, NULL, &k, NULL) == EDDY_OK);
    CHECK_EQ(k, 8);
    REQUIRE(drafter_propose(d, g1, 11, 8, out, NULL, &k, NULL) == EDDY_OK);
    CHECK_EQ(k, 0);
    drafter_free(d);
    eddy_model_free(m);
}

/* A verify step of more tokens than any before is not timed: it wrote state slots no
 * step had used, whose first touch can cost many warm steps. Two drafters that see the
 * same steps, one of them with its first (and so longest-yet) step 50 times as slow,
 * ask for the same draft counts all along. */
TEST(spec_draft_length_ignores_a_cold_step) {
    eddy_model *m = tseq_load("models/qwen35-tiny-f32.gguf");
    REQUIRE(m);
    const eddy_spec_params p = {.type = EDDY_SPEC_NGRAM, .draft_max = 8};
    const eddy_sampler_params sp = eddy_sampler_default_params();
    drafter *d[2];
    REQUIRE(drafter_new(&p, m, &sp, NULL, &d[0], NULL) == EDDY_OK);
    REQUIRE(drafter_new(&p, m, &sp, NULL, &d[1], NULL) == EDDY_OK);
    const eddy_token g3[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3};
    eddy_token out[8];
    int64_t k[2], n_draft = 0;
    for (int i = 0; i < 40; i++) {
        for (int j = 0; j < 2; j++) {
            REQUIRE(drafter_propose(d[j], g3, 12, 8, out, NULL, &k[j], NULL) == EDDY_OK);
            /* a step of x tokens costs 1 + 0.3 x; the drafts are kept at two steps in three */
            const double t = (1 + 0.3 * (double)(k[j] + 1)) * (i == 0 && j == 1 ? 50 : 1);
            drafter_update(d[j], k[j], i % 3 ? k[j] : 0, t);
        }
        CHECKF(k[0] == k[1], "step %d: %lld against %lld drafts", i, (long long)k[0], (long long)k[1]);
        n_draft += k[0];
    }
    CHECK(n_draft > 0);
    drafter_free(d[0]), drafter_free(d[1]);
    eddy_model_free(m);
}

/* Drafts of a kind that stopped paying are tried again now and then (one draft after
 * 16 plain steps, the wait doubling up to 128 while they keep failing), and drafting
 * resumes in full once they have become right: what a drafter guesses well changes
 * within a generation. */
TEST(spec_draft_length_tries_again_after_plain_steps) {
    eddy_model *m = tseq_load("models/qwen35-tiny-f32.gguf");
    REQUIRE(m);
    const eddy_spec_params p = {.type = EDDY_SPEC_NGRAM, .draft_max = 8};
    const eddy_sampler_params sp = eddy_sampler_default_params();
    drafter *d;
    REQUIRE(drafter_new(&p, m, &sp, NULL, &d, NULL) == EDDY_OK);
    const eddy_token g1[] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 5}; /* only "5" recurs: kind 1 */
    eddy_token out[8];
    int64_t k;
    /* a verify step of x tokens costs 1 + 0.5 x; the drafts are always wrong */
    int64_t gaps[64], n_gaps = 0, gap = 0, late_drafts = 0;
    for (int i = 0; i < 1000; i++) {
        REQUIRE(drafter_propose(d, g1, 11, 8, out, NULL, &k, NULL) == EDDY_OK);
        if (i >= 100) late_drafts += k;
        if (!k) {
            gap++;
            continue;
        }
        drafter_update(d, k, 0, 1 + 0.5 * (double)(k + 1));
        if (gap && n_gaps < 64) gaps[n_gaps++] = gap;
        gap = 0;
    }
    /* settled on plain steps, with single-draft probes ever further apart, up to 128 */
    REQUIRE(n_gaps >= 5);
    for (int64_t i = 1; i < n_gaps; i++) CHECKF(gaps[i] >= gaps[i - 1], "gap %lld after %lld", (long long)gaps[i], (long long)gaps[i - 1]);
    CHECK_EQ(gaps[n_gaps - 1], 128);
    CHECK(gap <= 128);
    CHECKF(late_drafts <= 12, "%lld drafts in the last 900 steps", (long long)late_drafts);
    /* now always right: the next probe is kept, and soon it drafts in full again */
    int i = 0;
    for (; i < 400; i++) {
        REQUIRE(drafter_propose(d, g1, 11, 8, out, NULL, &k, NULL) == EDDY_OK);
        if (k == 8) break;
        if (k) drafter_update(d, k, k, 1 + 0.5 * (double)(k + 1));
    }
    CHECKF(i < 128 + 64, "drafting in full after %d steps", i);
    drafter_free(d);
    eddy_model_free(m);
}

/* ==== Chi-square ==== */

/* P(X >= x) for X ~ chi-square with k degrees of freedom (Wilson-Hilferty). */
static double chi2_tail(double x, int k) {
    const double a = 2.0 / (9.0 * k), z = (cbrt(x / k) - (1 - a)) / sqrt(a);
    return 0.5 * erfc(z / sqrt(2.0));
}

/* Pearson's statistic of counts (n draws) against probabilities p over n_cat
 * categories; categories expected fewer than 5 times are pooled. *df gets the degrees
 * of freedom. */
static double chi2_stat(const int64_t *count, const double *p, int n_cat, int64_t n, int *df) {
    double stat = 0, pool_e = 0, pool_o = 0;
    int cats = 0;
    for (int i = 0; i < n_cat; i++) {
        const double e = p[i] * (double)n;
        if (e < 5) {
            pool_e += e, pool_o += (double)count[i];
            continue;
        }
        stat += ((double)count[i] - e) * ((double)count[i] - e) / e, cats++;
    }
    if (pool_e > 0) stat += (pool_o - pool_e) * (pool_o - pool_e) / (pool_e > 1e-9 ? pool_e : 1e-9), cats++;
    *df = cats - 1;
    return stat;
}

/* ==== The acceptance rule ==== */

TEST(spec_accept_sampled_draws_from_p) {
    enum { V = 12, N = 200000 };
    test_rng r = test_rng_new();
    eddy_sampler_params sp = eddy_sampler_default_params();
    sp.seed = test_rng_u64(&r);
    sampler *s;
    REQUIRE(sampler_new(&s, &sp, V, NULL) == EDDY_OK);
    float p[V], q[V], residual[V];
    double pd[V], qd[V], sp_sum = 0, sq_sum = 0;
    for (int i = 0; i < V; i++) {
        p[i] = i == 3 ? 0 : test_rng_uniform(&r, 0, 1); /* a token p never gives */
        q[i] = i == 7 ? 0 : test_rng_uniform(&r, 0, 1) * (i < 4 ? 3 : 1); /* one q never drafts */
        sp_sum += p[i], sq_sum += q[i];
    }
    for (int i = 0; i < V; i++) p[i] /= (float)sp_sum, q[i] /= (float)sq_sum, pd[i] = p[i], qd[i] = q[i];
    int64_t count[V] = {0}, kept_n = 0;
    for (int64_t it = 0; it < N; it++) {
        const eddy_token d = sampler_draw(s, q);
        bool kept;
        const eddy_token y = spec_accept_sampled(s, p, q, d, residual, &kept);
        CHECK(!kept || y == d);
        if (kept) kept_n++;
        else if (y == d) CHECKF(false, "a rejected draft came back");
        count[y]++;
    }
    CHECK_EQ(count[3], 0);
    int df;
    const double stat = chi2_stat(count, pd, V, N, &df), tail = chi2_tail(stat, df);
    CHECKF(tail > 1e-4, "chi-square %.1f on %d degrees of freedom: p-value %.2g", stat, df, tail);
    /* the test has power: the drafts' own distribution is far from what came out */
    const double against_q = chi2_stat(count, qd, V, N, &df);
    CHECKF(chi2_tail(against_q, df) < 1e-12, "the output is not told apart from q (%.1f)", against_q);
    /* the acceptance rate is sum min(p, q) */
    double overlap = 0;
    for (int i = 0; i < V; i++) overlap += pd[i] < qd[i] ? pd[i] : qd[i];
    CHECKF(fabs((double)kept_n / N - overlap) < 0.01, "kept %.4f, sum min(p, q) %.4f", (double)kept_n / N, overlap);
    sampler_free(s);
}

/* ==== Generation with drafts = without ==== */

typedef struct {
    eddy_token toks[512];
    int64_t n, stop_after; /* stop_after > 0: the callback stops the loop at that token */
} collected;

static int collect(void *user, eddy_token t, const char *text, size_t len) {
    (void)text, (void)len;
    collected *c = user;
    if (t >= 0 && c->n < 512) c->toks[c->n++] = t;
    return c->stop_after > 0 && c->n >= c->stop_after;
}

typedef struct {
    collected out;
    eddy_gen_stats st;
    int64_t n_pos;
    float *logits; /* (n_vocab) the sequence's last logits, NULL when it holds none */
} gen_result;

/* Generates from prompt on a fresh context of m (n_ctx positions) with spec (NULL:
 * none) and records everything. A repeat penalty makes the sampler (and the walk) read
 * whole rows; without, steps and verifies give each row's best k alone (with ignore_eog
 * as many more as there are end-of-generation tokens, removed from them). */
static bool gen(eddy_model *m, const eddy_spec_params *spec, float temp, float penalty, bool ignore_eog,
                uint64_t seed, const eddy_token *prompt, int64_t n_prompt, int64_t n_predict, int64_t n_ctx,
                int64_t stop_after, gen_result *r) {
    memset(r, 0, sizeof *r);
    r->out.stop_after = stop_after;
    eddy_error err;
    eddy_ctx *c = NULL;
    eddy_ctx_params cp = {.n_ctx = n_ctx, .n_threads = 2, .n_verify = 17,
                          .mtp = spec && spec->type == EDDY_SPEC_MTP};
    if (!CHECKF(eddy_ctx_new(m, &cp, &c, &err) == EDDY_OK, "%s", err.msg)) return false;
    eddy_sampler_params sp = eddy_sampler_default_params();
    sp.temp = temp, sp.seed = seed, sp.repeat_penalty = penalty;
    eddy_sampler *s = NULL;
    bool ok = CHECK(eddy_sampler_new(&sp, eddy_model_n_vocab(m), &s, NULL) == EDDY_OK);
    eddy_gen_params gp = {.n_predict = n_predict, .ignore_eog = ignore_eog, .spec = spec};
    ok = ok && CHECKF(eddy_generate_ex(c, NULL, s, prompt, n_prompt, &gp, collect, &r->out, &r->st, &err) == EDDY_OK,
                      "%s", err.msg);
    r->n_pos = eddy_ctx_n_pos(c);
    const float *l = eddy_seq_logits(eddy_ctx_seq(c));
    if (l) {
        r->logits = malloc((size_t)eddy_model_n_vocab(m) * sizeof(float));
        memcpy(r->logits, l, (size_t)eddy_model_n_vocab(m) * sizeof(float));
    }
    eddy_sampler_free(s);
    eddy_ctx_free(c);
    return ok;
}

static void same_result(const char *what, const char *file, const gen_result *a, const gen_result *b, int64_t V) {
    CHECKF(a->out.n == b->out.n && !memcmp(a->out.toks, b->out.toks, (size_t)a->out.n * sizeof(eddy_token)),
           "%s: %s: %lld tokens vs %lld, or different ones", file, what, (long long)a->out.n, (long long)b->out.n);
    CHECKF(a->st.stop == b->st.stop, "%s: %s: stopped for reason %d vs %d", file, what, a->st.stop, b->st.stop);
    CHECKF(a->n_pos == b->n_pos, "%s: %s: the sequence holds %lld vs %lld", file, what, (long long)a->n_pos,
           (long long)b->n_pos);
    CHECKF((a->logits == NULL) == (b->logits == NULL) &&
               (!a->logits || !memcmp(a->logits, b->logits, (size_t)V * sizeof(float))),
           "%s: %s: the sequence's last logits differ", file, what);
}

/* A prompt that repeats, so that prompt lookup finds drafts. */
static int64_t repetitive_prompt(eddy_token *p, int64_t V) {
    static const eddy_token motif[] = {11, 42, 7, 99, 23, 5, 64, 31};
    int64_t n = 0;
    for (int rep = 0; rep < 4; rep++)
        for (int i = 0; i < 8; i++) p[n++] = (eddy_token)(motif[i] % V);
    return n;
}

static const struct {
    const char *model, *draft; /* the draft: the same vocabulary */
} pairs[] = {
    {"models/llama-tiny-f32.gguf", "models/llama-tiny-q8_0.gguf"},
    {"models/qwen35-tiny-f32.gguf", "models/qwen3next-tiny-f32.gguf"},
    {"models/qwen35moe-tiny-f32.gguf", "models/qwen35moe-tiny-q8_0.gguf"},
    {"models/qwen3next-tiny-q8_0.gguf", "models/qwen35-tiny-q4_k_m.gguf"},
    {"models/mamba2-tiny-f32.gguf", "models/mamba2-tiny-q8_0.gguf"},
    {"models/nemotron_h-tiny-f32.gguf", "models/nemotron_h-tiny-q8_0.gguf"},
    {"models/granitehybrid-tiny-f32.gguf", "models/granitehybrid-tiny-q8_0.gguf"},
    {"models/granitehybrid-dense-tiny-f32.gguf", "models/qwen35-tiny-f32.gguf"},
};

/* Generation with each of specs against plain generation over runs that end by length,
 * by a full context and by the callback, greedy and sampled (a draft model samples its
 * drafts at temperature > 0: another random stream, skipped here), from whole rows and
 * from each row's best k (the sequence's logits at the end too); the drafts accepted and
 * rejected are added up. */
static void same_as_plain(eddy_model *m, const char *file, const eddy_spec_params *specs, size_t n_specs,
                          int64_t *accepted, int64_t *rejected) {
    const int64_t V = eddy_model_n_vocab(m);
    eddy_token prompt[64];
    const int64_t n_prompt = repetitive_prompt(prompt, V);
    /* (temperature, repeat penalty, n_predict, n_ctx, callback stop, end-of-generation banned) */
    const struct {
        float temp, penalty;
        int64_t n_predict, n_ctx, stop_after;
        bool ignore_eog;
    } runs[] = {{0, 1.1f, 160, 256, 0, false}, {0, 1.1f, 200, 100, 0, false}, {0, 1.1f, 100, 256, 37, false},
                {0.9f, 1.1f, 120, 256, 0, false}, {0, 1, 160, 256, 0, false}, {0, 1, 200, 100, 0, false},
                {0, 1, 100, 256, 37, false}, {0.9f, 1, 120, 256, 0, false}, {0.9f, 1, 120, 256, 0, true},
                {0, 1, 160, 256, 0, true}};
    for (size_t ri = 0; ri < sizeof runs / sizeof runs[0]; ri++) {
        gen_result plain;
        if (!gen(m, NULL, runs[ri].temp, runs[ri].penalty, runs[ri].ignore_eog, 77 + ri, prompt, n_prompt,
                 runs[ri].n_predict, runs[ri].n_ctx, runs[ri].stop_after, &plain))
            continue;
        for (size_t si = 0; si < n_specs; si++) {
            if (runs[ri].temp > 0 && specs[si].type == EDDY_SPEC_DRAFT) continue;
            gen_result got;
            char what[96];
            snprintf(what, sizeof what, "run %zu, drafter %zu", ri, si);
            if (gen(m, &specs[si], runs[ri].temp, runs[ri].penalty, runs[ri].ignore_eog, 77 + ri, prompt, n_prompt,
                    runs[ri].n_predict, runs[ri].n_ctx, runs[ri].stop_after, &got))
                same_result(what, file, &got, &plain, V);
            *accepted += got.st.n_accepted, *rejected += got.st.n_drafted - got.st.n_accepted;
            free(got.logits);
        }
        free(plain.logits);
    }
}

/* Drafts in every way the loop can meet them: accepted runs, rejections, stops in
 * the middle of a verify step (length, callback, a full context). */
TEST(spec_generation_equals_plain_on_every_architecture) {
    int64_t accepted = 0, rejected = 0;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        eddy_model *m = tseq_load(pairs[i].model), *dm = tseq_load(pairs[i].draft);
        eddy_ctx *dc = NULL;
        eddy_ctx_params dp = {.n_ctx = 256, .n_threads = 2, .n_snapshots = 1};
        if (!m || !dm || !CHECK(eddy_ctx_new(dm, &dp, &dc, NULL) == EDDY_OK)) {
            eddy_model_free(m), eddy_model_free(dm);
            continue;
        }
        const eddy_spec_params specs[] = {
            {.type = EDDY_SPEC_NGRAM, .draft_max = 8},
            {.type = EDDY_SPEC_NGRAM, .draft_max = 5, .ngram = 1, .fixed = true},
            {.type = EDDY_SPEC_DRAFT, .draft_max = 6, .draft = dc, .p_min = -1},
            {.type = EDDY_SPEC_DRAFT, .draft_max = 3, .draft = dc, .p_min = 0.2f},
        };
        same_as_plain(m, pairs[i].model, specs, sizeof specs / sizeof specs[0], &accepted, &rejected);
        eddy_ctx_free(dc);
        eddy_model_free(m), eddy_model_free(dm);
    }
    /* the comparisons saw both kinds of draft */
    CHECKF(accepted > 100 && rejected > 100, "accepted %lld, rejected %lld drafts", (long long)accepted,
           (long long)rejected);
}

/* The model's MTP layer as the drafter (chained drafts, verify, accept, the layer's
 * state carried through them): the output and the final state of plain generation. */
TEST(spec_mtp_generation_equals_plain) {
    const char *files[] = {"models/qwen35-mtp-tiny-f32.gguf", "models/qwen35moe-mtp-tiny-q8_0.gguf"};
    const eddy_spec_params specs[] = {
        {.type = EDDY_SPEC_MTP, .draft_max = 3, .p_min = -1, .fixed = true},
        {.type = EDDY_SPEC_MTP, .draft_max = 5, .p_min = 0.01f},
        {.type = EDDY_SPEC_MTP}, /* the defaults: 3 at most, no cut-off, the length rule */
    };
    int64_t accepted = 0, rejected = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        eddy_model *m = tseq_load(files[i]);
        if (m) same_as_plain(m, files[i], specs, sizeof specs / sizeof specs[0], &accepted, &rejected);
        eddy_model_free(m);
    }
    CHECKF(accepted > 100 && rejected > 100, "accepted %lld, rejected %lld drafts", (long long)accepted,
           (long long)rejected);
}

/* ==== A draft model at temperature > 0 keeps the model's distribution ==== */

/* The draft is the same model quantized (Q4_K_M): random models of another kind rank
 * other tokens first, and top-k supports that do not meet would refuse every draft. */

TEST(spec_sampled_drafts_keep_the_distribution) {
    eddy_model *m = tseq_load("models/qwen35-tiny-f32.gguf"), *dm = tseq_load("models/qwen35-tiny-q4_k_m.gguf");
    eddy_ctx *c = NULL, *dc = NULL, *ref = NULL;
    eddy_ctx_params cp = {.n_ctx = 64, .n_threads = 1, .n_snapshots = 4, .n_verify = 5};
    if (!m || !dm || !CHECK(eddy_ctx_new(m, &cp, &c, NULL) == EDDY_OK) ||
        !CHECK(eddy_ctx_new(m, &cp, &ref, NULL) == EDDY_OK) || !CHECK(eddy_ctx_new(dm, &cp, &dc, NULL) == EDDY_OK))
        goto done;
    const int64_t V = eddy_model_n_vocab(m);
    const eddy_token prompt[6] = {17, 250, 3, 900, 41, 77};
    eddy_sampler_params sp = eddy_sampler_default_params();
    sp.temp = 1.0f, sp.top_k = 5, sp.top_p = 1.0f, sp.min_p = 0.0f, sp.repeat_penalty = 1.0f;
    /* the exact marginal of the second token: sum over t1 of p(t1) p(t2 | t1) */
    double *exact = calloc((size_t)V, sizeof *exact);
    float *l = malloc((size_t)V * sizeof *l), *p1 = malloc((size_t)V * sizeof *p1), *p2 = malloc((size_t)V * sizeof *p2);
    sampler *chain;
    REQUIRE(sampler_new(&chain, &sp, V, NULL) == EDDY_OK);
    REQUIRE(eddy_ctx_eval(ref, prompt, 6, l, 0, NULL) == EDDY_OK);
    sampler_probs(chain, l, p1);
    for (eddy_token t1 = 0; t1 < V; t1++) {
        if (p1[t1] == 0) continue;
        eddy_ctx_reset(ref);
        eddy_token seq[7];
        memcpy(seq, prompt, sizeof prompt);
        seq[6] = t1;
        REQUIRE(eddy_ctx_eval(ref, seq, 7, l, 0, NULL) == EDDY_OK);
        sampler_probs(chain, l, p2);
        for (int64_t t = 0; t < V; t++) exact[t] += (double)p1[t1] * p2[t];
    }
    /* many seeds, 2 tokens each: the second is the one a verify decides */
    enum { N = 6000 };
    int64_t *count = calloc((size_t)V, sizeof *count), accepted = 0, drafted = 0;
    const eddy_spec_params spec = {.type = EDDY_SPEC_DRAFT, .draft_max = 4, .draft = dc};
    test_rng r = test_rng_new();
    for (int it = 0; it < N; it++) {
        eddy_ctx_reset(c);
        sp.seed = test_rng_u64(&r);
        eddy_sampler *s;
        REQUIRE(eddy_sampler_new(&sp, V, &s, NULL) == EDDY_OK);
        collected out = {.stop_after = 0};
        eddy_gen_params gp = {.n_predict = 2, .spec = &spec};
        eddy_gen_stats st;
        eddy_error err;
        const bool ok = eddy_generate_ex(c, NULL, s, prompt, 6, &gp, collect, &out, &st, &err) == EDDY_OK;
        eddy_sampler_free(s);
        if (!CHECKF(ok && out.n == 2, "run %d: %s", it, ok ? "not 2 tokens" : err.msg)) break;
        count[out.toks[1]]++;
        accepted += st.n_accepted, drafted += st.n_drafted;
    }
    int df;
    const double stat = chi2_stat(count, exact, (int)V, N, &df), tail = chi2_tail(stat, df);
    CHECKF(df >= 4 && tail > 1e-4, "chi-square %.1f on %d degrees of freedom: p-value %.2g", stat, df, tail);
    /* drafts were both kept and refused (the Q4_K_M draft's q differs from p by about
     * 5% in total variation), so both branches of the rule made the output */
    CHECKF(accepted > N / 2 && drafted - accepted > N / 40, "accepted %lld of %lld drafts", (long long)accepted,
           (long long)drafted);
    sampler_free(chain);
    free(exact), free(l), free(p1), free(p2), free(count);
done:
    eddy_ctx_free(c), eddy_ctx_free(ref), eddy_ctx_free(dc);
    eddy_model_free(m), eddy_model_free(dm);
}

/* ==== Drafts of many sequences at once ==== */

enum { MN = 5, MK = 4, MROUNDS = 10, MOUT = MROUNDS * (MK + 1) };

typedef struct {
    eddy_token drafts[MROUNDS][MN][MK];
    int64_t n_drafts[MROUNDS][MN], drafted;
    eddy_token out[MN][MOUT];
    int64_t n_out[MN];
} rounds_log;

/* MN sequences of m generating greedily, each with a draft model of dm in one draft
 * engine (spec[i]; shared_ctx non-NULL: sequences 0 and 1 share that draft context
 * instead, so their drafting advances one sequence): MROUNDS steps of drafts (all in one
 * eddy_spec_draft_many call, or each sequence's eddy_spec_draft in turn), one verify of
 * every sequence's token and drafts, and each one's accept. Records every draft and
 * every emitted token. */
static bool draft_rounds(eddy_model *m, eddy_model *dm, bool many, bool shared_ctx, rounds_log *log) {
    memset(log, 0, sizeof *log);
    const int64_t V = eddy_model_n_vocab(m);
    eddy_engine *e = tseq_engine(m, (eddy_engine_params){.n_ctx = 128, .n_seq_max = MN,
                                                         .n_verify = MN * (MK + 1), .n_batch = 64});
    eddy_engine *de = tseq_engine(dm, (eddy_engine_params){.n_ctx = 128, .n_seq_max = MN, .n_snapshots = MN});
    eddy_ctx *dc = NULL;
    eddy_ctx_params dcp = {.n_ctx = 128, .n_threads = 2, .n_snapshots = 2};
    eddy_seq *s[MN] = {0};
    eddy_sampler *smp[MN] = {0};
    eddy_spec *sp[MN] = {0};
    float *rows = malloc((size_t)MN * (MK + 1) * (size_t)V * sizeof(float));
    bool ok = e && de && CHECK(rows) && (!shared_ctx || CHECK(eddy_ctx_new(dm, &dcp, &dc, NULL) == EDDY_OK));
    eddy_token next[MN], ids[64], tok[MN * (MK + 1)];
    eddy_seq *owner[MN * (MK + 1)];
    bool live[MN];
    eddy_error err;
    const eddy_sampler_params spar = eddy_sampler_default_params(); /* temperature 0 below */
    for (int i = 0; ok && i < MN; i++) {
        /* prompts of different lengths and contents that repeat, so drafts get kept */
        const int64_t n = 6 + 5 * i;
        for (int64_t j = 0; j < n; j++) ids[j] = (eddy_token)((7 + 13 * i + 29 * (j % (3 + i))) % V);
        eddy_sampler_params p = spar;
        p.temp = 0;
        const eddy_spec_params spec = {.type = EDDY_SPEC_DRAFT, .draft_max = MK, .fixed = true, /* the length rule times steps */
                                       .p_min = i % 3 == 1 ? 0.4f : -1.0f,
                                       .draft = shared_ctx && i < 2 ? dc : NULL,
                                       .draft_engine = shared_ctx && i < 2 ? NULL : de};
        ok = (s[i] = tseq_new(e)) && CHECKF(eddy_seq_eval(s[i], ids, n, rows, 0, &err) == EDDY_OK, "%s", err.msg) &&
             CHECK(eddy_sampler_new(&p, V, &smp[i], NULL) == EDDY_OK) &&
             CHECKF(eddy_spec_new(s[i], smp[i], &spec, &sp[i], &err) == EDDY_OK, "%s", err.msg);
        if (ok) next[i] = eddy_sampler_sample(smp[i], rows), live[i] = true;
    }
    for (int r = 0; ok && r < MROUNDS; r++) {
        eddy_spec *lsp[MN];
        eddy_token lt[MN], *lout[MN];
        int64_t lmax[MN], ln[MN], lidx[MN], n_live = 0;
        for (int i = 0; i < MN; i++)
            if (live[i]) {
                lsp[n_live] = sp[i], lt[n_live] = next[i], lmax[n_live] = MK - (r + i) % 3;
                lout[n_live] = log->drafts[r][i], lidx[n_live++] = i;
            }
        if (n_live == 0) break;
        if (many) ok = CHECKF(eddy_spec_draft_many(lsp, n_live, lt, lmax, lout, ln, &err) == EDDY_OK, "%s", err.msg);
        for (int64_t k = 0; !many && ok && k < n_live; k++)
            ok = CHECKF(eddy_spec_draft(lsp[k], lt[k], lmax[k], lout[k], &ln[k], &err) == EDDY_OK, "%s", err.msg);
        int64_t n_tok = 0, row0[MN];
        for (int64_t k = 0; ok && k < n_live; k++) {
            log->n_drafts[r][lidx[k]] = ln[k], log->drafted += ln[k];
            row0[k] = n_tok;
            tok[n_tok] = lt[k], owner[n_tok++] = s[lidx[k]];
            for (int64_t j = 0; j < ln[k]; j++) tok[n_tok] = lout[k][j], owner[n_tok++] = s[lidx[k]];
        }
        int8_t want[MN * (MK + 1)];
        memset(want, 1, sizeof want);
        const eddy_batch b = {n_tok, tok, owner, want};
        ok = ok && CHECKF(eddy_engine_verify(e, &b, rows, &err) == EDDY_OK, "%s", err.msg);
        for (int64_t k = 0; ok && k < n_live; k++) {
            const int i = (int)lidx[k];
            eddy_token got[MK + 1];
            int64_t n_got;
            eddy_spec_end end;
            ok = CHECKF(eddy_spec_accept(sp[i], rows + row0[k] * V, -1, got, &n_got, &end, &err) == EDDY_OK, "%s",
                        err.msg);
            for (int64_t j = 0; ok && j < n_got && log->n_out[i] < MOUT; j++) log->out[i][log->n_out[i]++] = got[j];
            if (end == EDDY_SPEC_EOG || n_got == 0) live[i] = false;
            else next[i] = got[n_got - 1];
        }
    }
    for (int i = 0; i < MN; i++) eddy_spec_free(sp[i]), eddy_sampler_free(smp[i]), eddy_seq_free(s[i]);
    eddy_ctx_free(dc);
    eddy_engine_free(de), eddy_engine_free(e);
    free(rows);
    return ok;
}

/* eddy_spec_draft_many with a draft model: the draft engine's sequences catch up in one
 * batch and every draft position is one step of the draft model for all of them; each
 * sequence gets the drafts it gets drafting alone, at every step of a generation (the
 * draft sequences rolled back and caught up between steps), so the same output. Two
 * specs whose drafting advances one draft context draft one after the other. */
TEST(spec_draft_model_drafts_of_many_sequences_are_each_ones_own) {
    static const char *const files[][2] = {{"models/qwen35-tiny-f32.gguf", "models/qwen3next-tiny-f32.gguf"},
                                           {"models/llama-tiny-f32.gguf", "models/llama-tiny-q8_0.gguf"}};
    rounds_log *alone = malloc(sizeof *alone), *many = malloc(sizeof *many);
    REQUIRE(alone && many);
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        eddy_model *m = tseq_load(files[f][0]), *dm = tseq_load(files[f][1]);
        for (int shared = 0; m && dm && shared < 2; shared++) {
            if (!draft_rounds(m, dm, false, shared, alone) || !draft_rounds(m, dm, true, shared, many)) continue;
            CHECKF(alone->drafted >= 40, "%s: only %lld drafts", files[f][0], (long long)alone->drafted);
            CHECK_EQ(many->drafted, alone->drafted);
            for (int r = 0; r < MROUNDS; r++)
                for (int i = 0; i < MN; i++)
                    CHECKF(many->n_drafts[r][i] == alone->n_drafts[r][i] &&
                               !memcmp(many->drafts[r][i], alone->drafts[r][i],
                                       (size_t)alone->n_drafts[r][i] * sizeof(eddy_token)),
                           "%s%s: step %d, sequence %d: %lld drafts together, %lld alone, or other ones", files[f][0],
                           shared ? " (shared draft context)" : "", r, i, (long long)many->n_drafts[r][i],
                           (long long)alone->n_drafts[r][i]);
            for (int i = 0; i < MN; i++)
                CHECKF(many->n_out[i] == alone->n_out[i] &&
                           !memcmp(many->out[i], alone->out[i], (size_t)alone->n_out[i] * sizeof(eddy_token)),
                       "%s: sequence %d's output differs", files[f][0], i);
        }
        eddy_model_free(m), eddy_model_free(dm);
    }
    free(alone), free(many);
}

/* ==== Refusals ==== */

/* eddy_spec_accept_top on eddy_engine_verify_top's digests walks as eddy_spec_accept on
 * whole rows (two engines side by side, the same drafts and seeds): the same tokens and
 * ends, step after step; it refuses a digest of fewer than eddy_spec_top's k, and any
 * digest where the sampler needs whole rows (eddy_spec_top 0), changing nothing. */
TEST(spec_accept_top_walks_as_whole_rows) {
    eddy_model *m = tseq_load("models/qwen35-tiny-q8_0.gguf");
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m);
    const eddy_engine_params ep = {.n_ctx = 256, .n_seq_max = 1, .n_verify = 9};
    eddy_engine *e[2] = {tseq_engine(m, ep), tseq_engine(m, ep)};
    REQUIRE(e[0] && e[1]);
    eddy_seq *q[2] = {tseq_new(e[0]), tseq_new(e[1])};
    eddy_sampler_params spar = eddy_sampler_default_params();
    spar.seed = 5, spar.temp = 0.3f; /* sampled, from the best 40, repeating enough for drafts */
    eddy_sampler *smp[2];
    REQUIRE(eddy_sampler_new(&spar, V, &smp[0], NULL) == EDDY_OK &&
            eddy_sampler_new(&spar, V, &smp[1], NULL) == EDDY_OK);
    const eddy_spec_params spec = {.type = EDDY_SPEC_NGRAM, .draft_max = 8, .ngram = 1, .fixed = true};
    eddy_spec *sp[2] = {NULL, NULL};
    eddy_error err;
    eddy_token prompt[64];
    const int64_t n_prompt = repetitive_prompt(prompt, V);
    float *rows = malloc(sizeof *rows * (size_t)(9 * V)), top[9 * 40];
    eddy_token ids[9 * 40], out[2][9], drafts[2][8], t = prompt[n_prompt - 1];
    int32_t counts[9];
    for (int k = 0; k < 2; k++) {
        REQUIRE(q[k] && tseq_feed(q[k], prompt, n_prompt - 1, NULL));
        REQUIRE(CHECKF(eddy_spec_new(q[k], smp[k], &spec, &sp[k], &err) == EDDY_OK, "%s", err.msg));
    }
    CHECK_EQ(eddy_spec_top(sp[1]), 40);
    int64_t drafted = 0, steps = 0;
    for (; steps < 24; steps++) {
        int64_t nd[2], n_out[2];
        eddy_spec_end end[2];
        for (int k = 0; k < 2; k++)
            REQUIRE(CHECKF(eddy_spec_draft(sp[k], t, 8, drafts[k], &nd[k], &err) == EDDY_OK, "%s", err.msg));
        REQUIRE(CHECK_EQ(nd[0], nd[1]) && !memcmp(drafts[0], drafts[1], sizeof(eddy_token) * (size_t)nd[0]));
        drafted += nd[0];
        eddy_token toks[9] = {t};
        memcpy(toks + 1, drafts[0], sizeof(eddy_token) * (size_t)nd[0]);
        eddy_seq *own[2][9];
        int8_t all[9];
        for (int i = 0; i < 9; i++) own[0][i] = q[0], own[1][i] = q[1], all[i] = 1;
        REQUIRE(eddy_engine_verify(e[0], &(eddy_batch){nd[0] + 1, toks, own[0], all}, rows, &err) == EDDY_OK);
        REQUIRE(eddy_engine_verify_top(e[1], &(eddy_batch){nd[0] + 1, toks, own[1], all}, 40, ids, top, counts, NULL,
                                       &err) == EDDY_OK);
        if (steps == 0) { /* too few of each row's best: refused, the walk still waits */
            CHECK_EQ(eddy_spec_accept_top(sp[1], 39, ids, top, counts, -1, out[1], &n_out[1], &end[1], &err),
                     EDDY_ERR_ARG);
            CHECK_CONTAINS(err.msg, "more of each row's best logits");
        }
        REQUIRE(eddy_spec_accept(sp[0], rows, -1, out[0], &n_out[0], &end[0], &err) == EDDY_OK);
        const eddy_status st = eddy_spec_accept_top(sp[1], 40, ids, top, counts, -1, out[1], &n_out[1], &end[1], &err);
        REQUIRE(CHECKF(st == EDDY_OK, "%s", err.msg));
        const bool same = n_out[0] == n_out[1] && end[0] == end[1] &&
                          !memcmp(out[0], out[1], sizeof(eddy_token) * (size_t)n_out[0]);
        if (!CHECKF(same, "step %lld: %lld tokens (end %d) from whole rows, %lld (end %d) from the best 40",
                    (long long)steps, (long long)n_out[0], end[0], (long long)n_out[1], end[1]) ||
            end[0] != EDDY_SPEC_NEXT)
            break;
        t = out[0][n_out[0] - 1];
    }
    CHECKF(steps >= 10 && drafted >= 20, "%lld steps, %lld drafts", (long long)steps, (long long)drafted);
    for (int k = 0; k < 2; k++) eddy_spec_free(sp[k]), sp[k] = NULL;
    /* a sampler with a repeat penalty reads whole rows */
    eddy_sampler_free(smp[1]);
    spar.repeat_penalty = 1.1f;
    REQUIRE(eddy_sampler_new(&spar, V, &smp[1], NULL) == EDDY_OK);
    REQUIRE(eddy_spec_new(q[1], smp[1], &spec, &sp[1], &err) == EDDY_OK);
    CHECK_EQ(eddy_spec_top(sp[1]), 0);
    int64_t nd, n_out;
    eddy_spec_end end;
    REQUIRE(eddy_spec_draft(sp[1], t, 8, drafts[1], &nd, &err) == EDDY_OK);
    const int64_t n_pos = eddy_seq_n_pos(q[1]);
    if (nd == 0)
        REQUIRE(eddy_engine_decode_top(e[1], &(eddy_batch){1, &t, q + 1, NULL}, 40, ids, top, counts, NULL, &err) ==
                EDDY_OK);
    CHECK_EQ(eddy_spec_accept_top(sp[1], 40, ids, top, counts, -1, out[1], &n_out, &end, &err), EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "whole rows of logits");
    CHECK_EQ(eddy_seq_n_pos(q[1]), nd == 0 ? n_pos + 1 : n_pos);
    eddy_spec_free(sp[1]);
    free(rows);
    for (int k = 0; k < 2; k++) eddy_sampler_free(smp[k]), eddy_seq_free(q[k]), eddy_engine_free(e[k]);
    eddy_model_free(m);
}

TEST(spec_refuses_bad_setups) {
    eddy_model *m = tseq_load("models/qwen35-tiny-f32.gguf"), *other = tseq_load("models/llama-tiny-f32.gguf");
    eddy_ctx *c = NULL, *small = NULL, *dc = NULL;
    eddy_ctx_params cp = {.n_ctx = 64, .n_threads = 1, .n_snapshots = 1, .n_verify = 9}, sp0 = {.n_ctx = 64, .n_threads = 1};
    if (!m || !other || !CHECK(eddy_ctx_new(m, &cp, &c, NULL) == EDDY_OK) ||
        !CHECK(eddy_ctx_new(m, &sp0, &small, NULL) == EDDY_OK) || !CHECK(eddy_ctx_new(other, &cp, &dc, NULL) == EDDY_OK))
        goto done;
    eddy_sampler_params spar = eddy_sampler_default_params();
    eddy_sampler *s;
    REQUIRE(eddy_sampler_new(&spar, eddy_model_n_vocab(m), &s, NULL) == EDDY_OK);
    const eddy_token prompt[4] = {1, 2, 1, 2};
    eddy_error err;
    /* another vocabulary */
    eddy_spec_params spec = {.type = EDDY_SPEC_DRAFT, .draft = dc};
    eddy_gen_params gp = {.n_predict = 8, .spec = &spec};
    CHECK(eddy_generate_ex(c, NULL, s, prompt, 4, &gp, NULL, NULL, NULL, &err) == EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "draft model's vocabulary");
    /* no draft context */
    spec.draft = NULL;
    CHECK(eddy_generate_ex(c, NULL, s, prompt, 4, &gp, NULL, NULL, NULL, &err) == EDDY_ERR_ARG);
    /* out-of-range settings */
    spec = (eddy_spec_params){.type = EDDY_SPEC_NGRAM, .draft_max = 1000};
    CHECK(eddy_generate_ex(c, NULL, s, prompt, 4, &gp, NULL, NULL, NULL, &err) == EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "draft-max");
    /* a context without states for a verify: refused, naming the setting, before anything runs */
    spec = (eddy_spec_params){.type = EDDY_SPEC_NGRAM};
    CHECK(eddy_generate_ex(small, NULL, s, prompt, 4, &gp, NULL, NULL, NULL, &err) == EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "speculative decoding needs verify states");
    CHECK_CONTAINS(err.msg, "the engine has 0 (n_verify)");
    CHECK_EQ(eddy_ctx_n_pos(small), 0);
    eddy_sampler_free(s);
done:
    eddy_ctx_free(c), eddy_ctx_free(small), eddy_ctx_free(dc);
    eddy_model_free(m), eddy_model_free(other);
}
