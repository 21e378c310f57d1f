/*
 * test_seq.c — the helpers of test_seq.h.
 */
#include "test.h"
#include "test_seq.h"

#include <stdlib.h>

#include "model/engine.h"
#include "ops/vec.h"

eddy_model *tseq_load(const char *file) {
    eddy_model *m = NULL;
    eddy_error err;
    CHECKF(eddy_model_load(test_data_path(file), &m, &err) == EDDY_OK, "%s: %s", file, err.msg);
    return m;
}

eddy_engine *tseq_engine(const eddy_model *m, eddy_engine_params p) {
    if (p.n_threads == 0) p.n_threads = 2;
    eddy_engine *e = NULL;
    eddy_error err;
    CHECKF(eddy_engine_new(m, &p, &e, &err) == EDDY_OK, "%s", err.msg);
    return e;
}

eddy_seq *tseq_new(eddy_engine *e) {
    eddy_seq *s = NULL;
    eddy_error err;
    CHECKF(eddy_seq_new(e, &s, &err) == EDDY_OK, "%s", err.msg);
    return s;
}

bool tseq_feed(eddy_seq *s, const int32_t *ids, int64_t n, float *out) {
    eddy_error err;
    return CHECKF(eddy_seq_eval(s, ids, n, out, out != NULL, &err) == EDDY_OK, "eval of %lld tokens: %s",
                  (long long)n, err.msg);
}

void tseq_rand_ids(test_rng *r, int32_t *ids, int64_t n, int64_t n_vocab) {
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)test_rng_below(r, (uint32_t)n_vocab);
}

/* Row r of a decode_top (k entries at ids + r k, logits + r k, counts[r]) against
 * vec_top_k of the same row of logits, bit for bit */
static void check_top_row(const char *file, const char *what, int r, const float *row, int64_t V, int32_t k,
                          const int32_t *ids, const float *vals, const int32_t *counts) {
    int32_t want_ids[EDDY_TOP_MAX];
    float want_vals[EDDY_TOP_MAX];
    const int64_t want = vec_top_k(row, V, k, want_ids, want_vals);
    CHECKF(counts[r] == want, "%s: %s row %d: %d of %d best", file, what, r, counts[r], k);
    for (int64_t i = 0; i < want && i < counts[r]; i++)
        CHECKF(ids[r * k + i] == want_ids[i] && !memcmp(&vals[r * k + i], &want_vals[i], sizeof *vals),
               "%s: %s row %d, entry %lld: %d (%g), the logits' %d (%g)", file, what, r, (long long)i, ids[r * k + i],
               vals[r * k + i], want_ids[i], want_vals[i]);
}

/* Model file, two engines of it with params p (n_seq_max 2, n_ctx 64) and two sequences
 * each (s[k] engine k's); NULL when something could not be made (the test has failed then) */
static eddy_model *two_engines(const char *file, eddy_engine_params p, eddy_engine *e[2], eddy_seq *s[2][2]) {
    eddy_model *m = tseq_load(file);
    p.n_seq_max = 2, p.n_ctx = 64;
    e[0] = m ? tseq_engine(m, p) : NULL, e[1] = m ? tseq_engine(m, p) : NULL;
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 2; j++) s[k][j] = e[k] ? tseq_new(e[k]) : NULL;
    return s[0][0] && s[0][1] && s[1][0] && s[1][1] ? m : NULL;
}

static void free_two_engines(eddy_model *m, eddy_engine *e[2], eddy_seq *s[2][2]) {
    for (int k = 0; k < 2; k++) {
        for (int j = 0; j < 2; j++) eddy_seq_free(s[k][j]);
        eddy_engine_free(e[k]);
    }
    eddy_model_free(m);
}

/* Row r's log-sum-exp from a digest step against vec_logsumexp of the logits' row, within
 * tol (0: bit for bit) */
static void check_lse(const char *file, const char *what, int r, const float *row, int64_t V, const double *lse,
                      double tol) {
    const double want = vec_logsumexp(row, V);
    CHECKF(tol == 0 ? lse[r] == want : fabs(lse[r] - want) <= tol, "%s: %s row %d: log-sum-exp %.12g, the logits' %.12g",
           file, what, r, lse[r], want);
}

void tseq_check_decode_top(const char *file, eddy_engine_params p, double lse_tol) {
    enum { S = 3, STEPS = 3, E = 3 };
    eddy_model *m = tseq_load(file);
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m);
    p.n_seq_max = S, p.n_ctx = 64;
    /* engine 0 gives logits, 1 argmax ids, 2 the best k */
    eddy_engine *e[E] = {tseq_engine(m, p), tseq_engine(m, p), tseq_engine(m, p)};
    REQUIRE(e[0] && e[1] && e[2]);
    eddy_seq *s[E][S];
    for (int k = 0; k < E; k++)
        for (int j = 0; j < S; j++) REQUIRE(s[k][j] = tseq_new(e[k]));
    test_rng r = test_rng_new();
    int32_t prompt[14], tok[S], top_tok[S];
    tseq_rand_ids(&r, prompt, 14, V);
    eddy_seq *owner[E][14];
    int8_t want[14] = {0};
    for (int i = 0; i < 14; i++) /* sequence 0's rows 0..4, 1's 5..6, 2's 7..13 */
        for (int k = 0; k < E; k++) owner[k][i] = s[k][i < 5 ? 0 : i < 7 ? 1 : 2];
    want[1] = want[4] = want[6] = want[9] = want[13] = 1;
    float *logits = malloc(sizeof *logits * (size_t)(5 * V)), top_vals[5 * EDDY_TOP_MAX];
    int32_t ids[5], top_ids[5 * EDDY_TOP_MAX], counts[5];
    double lse[5];
    eddy_error err;
    eddy_batch b0 = {14, prompt, owner[0], want}, b1 = {14, prompt, owner[1], want}, b2 = {14, prompt, owner[2], want};
    REQUIRE(CHECKF(eddy_engine_decode(e[0], &b0, logits, &err) == EDDY_OK, "%s", err.msg));
    REQUIRE(CHECKF(eddy_engine_decode_argmax(e[1], &b1, ids, &err) == EDDY_OK, "%s", err.msg));
    REQUIRE(CHECKF(eddy_engine_decode_top(e[2], &b2, 40, top_ids, top_vals, counts, lse, &err) == EDDY_OK, "%s",
                   err.msg));
    for (int k = 0; k < 5; k++) {
        CHECKF(ids[k] == vec_argmax_ref(logits + k * V, V), "%s: prefill row %d: %d, the logits' argmax %lld", file,
               k, ids[k], (long long)vec_argmax_ref(logits + k * V, V));
        check_top_row(file, "prefill", k, logits + k * V, V, 40, top_ids, top_vals, counts);
        check_lse(file, "prefill", k, logits + k * V, V, lse, lse_tol);
    }
    for (int j = 0; j < S; j++) tok[j] = top_tok[j] = ids[j == 0 ? 1 : j == 1 ? 2 : 4]; /* each one's last row */
    const int32_t ks[STEPS] = {1, 7, EDDY_TOP_MAX};
    for (int t = 0; t < STEPS; t++) {
        eddy_batch d0 = {S, tok, s[0], NULL}, d1 = {S, tok, s[1], NULL}, d2 = {S, top_tok, s[2], NULL};
        REQUIRE(CHECKF(eddy_engine_decode(e[0], &d0, logits, &err) == EDDY_OK, "%s", err.msg));
        REQUIRE(CHECKF(eddy_engine_decode_argmax(e[1], &d1, tok, &err) == EDDY_OK, "%s", err.msg));
        /* the log-sum-exps asked for in the middle step only */
        REQUIRE(CHECKF(eddy_engine_decode_top(e[2], &d2, ks[t], top_ids, top_vals, counts, t == 1 ? lse : NULL,
                                              &err) == EDDY_OK, "%s", err.msg));
        for (int j = 0; j < S; j++) {
            CHECKF(tok[j] == vec_argmax_ref(logits + j * V, V), "%s: step %d, sequence %d: %d, the logits' argmax %lld",
                   file, t, j, tok[j], (long long)vec_argmax_ref(logits + j * V, V));
            check_top_row(file, "step", j, logits + j * V, V, ks[t], top_ids, top_vals, counts);
            if (t == 1) check_lse(file, "step", j, logits + j * V, V, lse, lse_tol);
            top_tok[j] = top_ids[j * ks[t]];
        }
    }
    for (int j = 0; j < S; j++)
        CHECK(eddy_seq_logits(s[1][j]) == NULL && eddy_seq_logits(s[2][j]) == NULL && eddy_seq_logits(s[0][j]) != NULL);
    CHECK_EQ(eddy_engine_decode_argmax(e[1], &b1, NULL, &err), EDDY_ERR_ARG);
    CHECK_EQ(eddy_engine_decode_top(e[2], &b2, 0, top_ids, top_vals, counts, NULL, &err), EDDY_ERR_ARG);
    CHECK_EQ(eddy_engine_decode_top(e[2], &b2, EDDY_TOP_MAX + 1, top_ids, top_vals, counts, NULL, &err), EDDY_ERR_ARG);
    CHECK_EQ(eddy_engine_decode_top(e[2], &b2, 4, top_ids, NULL, counts, NULL, &err), EDDY_ERR_ARG);
    free(logits);
    for (int k = 0; k < E; k++) {
        for (int j = 0; j < S; j++) eddy_seq_free(s[k][j]);
        eddy_engine_free(e[k]);
    }
    eddy_model_free(m);
}

void tseq_check_decode_logprob(const char *file, eddy_engine_params p, double tol) {
    enum { N = 11, W = 4 };
    eddy_engine *e[2];
    eddy_seq *s[2][2];
    eddy_model *m = two_engines(file, p, e, s);
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m);
    test_rng r = test_rng_new();
    int32_t prompt[N], targets[W];
    tseq_rand_ids(&r, prompt, N, V);
    eddy_seq *owner[2][N];
    int8_t want[N] = {0};
    for (int i = 0; i < N; i++) /* sequence 0's rows 0..5, 1's 6..10 */
        for (int k = 0; k < 2; k++) owner[k][i] = s[k][i < 6 ? 0 : 1];
    want[2] = want[5] = want[8] = want[10] = 1;
    float *logits = malloc(sizeof *logits * (size_t)(W * V));
    double lp[W];
    eddy_error err;
    const eddy_batch b0 = {N, prompt, owner[0], want}, b1 = {N, prompt, owner[1], want};
    REQUIRE(CHECKF(eddy_engine_decode(e[0], &b0, logits, &err) == EDDY_OK, "%s", err.msg));
    targets[0] = (int32_t)vec_argmax_ref(logits, V), targets[1] = 0, targets[2] = (int32_t)(V - 1), targets[3] = 7;
    for (int64_t i = 0; i < V; i++) /* row 1's smallest logit */
        if (logits[V + i] < logits[V + targets[1]]) targets[1] = (int32_t)i;
    targets[2] = V; /* outside the vocabulary: refused before anything runs */
    CHECK_EQ(eddy_engine_decode_logprob(e[1], &b1, targets, lp, &err), EDDY_ERR_ARG);
    CHECK(eddy_seq_n_pos(s[1][0]) == 0 && eddy_seq_n_pos(s[1][1]) == 0);
    targets[2] = (int32_t)(V - 1);
    REQUIRE(CHECKF(eddy_engine_decode_logprob(e[1], &b1, targets, lp, &err) == EDDY_OK, "%s", err.msg));
    for (int k = 0; k < W; k++) {
        const double want_lp = vec_logprob(logits + k * V, V, targets[k]);
        CHECKF(tol == 0 ? lp[k] == want_lp : fabs(lp[k] - want_lp) <= tol, "%s: row %d, target %d: %.12g, %.12g",
               file, k, targets[k], lp[k], want_lp);
    }
    /* a decode step of both: each sequence's last token */
    int32_t tok[2] = {3, 5}, next[2] = {1, 2};
    const eddy_batch d0 = {2, tok, s[0], NULL}, d1 = {2, tok, s[1], NULL};
    REQUIRE(CHECKF(eddy_engine_decode(e[0], &d0, logits, &err) == EDDY_OK, "%s", err.msg));
    REQUIRE(CHECKF(eddy_engine_decode_logprob(e[1], &d1, next, lp, &err) == EDDY_OK, "%s", err.msg));
    for (int k = 0; k < 2; k++) {
        const double want_lp = vec_logprob(logits + k * V, V, next[k]);
        CHECKF(tol == 0 ? lp[k] == want_lp : fabs(lp[k] - want_lp) <= tol, "%s: step row %d: %.12g, %.12g", file, k,
               lp[k], want_lp);
        CHECK(eddy_seq_logits(s[1][k]) == NULL);
    }
    CHECK_EQ(eddy_engine_decode_logprob(e[1], &d1, NULL, lp, &err), EDDY_ERR_ARG);
    free(logits);
    free_two_engines(m, e, s);
}

typedef struct {
    eddy_token toks[64];
    int64_t n;
} gen_tokens;

static int gen_collect(void *user, eddy_token t, const char *text, size_t len) {
    (void)text, (void)len;
    gen_tokens *g = user;
    if (t >= 0 && g->n < 64) g->toks[g->n++] = t;
    return 0;
}

void tseq_check_generate_from_the_best(const char *file, eddy_ctx_params cp, bool ignore_eog) {
    eddy_error err;
    eddy_model *m = tseq_load(file);
    REQUIRE(m);
    eddy_vocab *v = NULL;
    REQUIRE(CHECKF(eddy_vocab_load(eddy_model_gguf(m), &v, &err) == EDDY_OK, "%s", err.msg));
    cp.n_ctx = 128;
    eddy_ctx *c = NULL, *ref = NULL;
    REQUIRE(CHECKF(eddy_ctx_new(m, &cp, &c, &err) == EDDY_OK, "%s", err.msg));
    REQUIRE(CHECKF(eddy_ctx_new(m, &cp, &ref, &err) == EDDY_OK, "%s", err.msg));
    eddy_sampler_params sp = eddy_sampler_default_params();
    sp.seed = 77, sp.temp = 1.5f; /* a wide distribution: many draws below the top */
    REQUIRE(eddy_sampler_params_top(&sp) == 40);
    const int64_t V = eddy_model_n_vocab(m);
    eddy_sampler *s = NULL, *s_ref = NULL;
    REQUIRE(eddy_sampler_new(&sp, V, &s, &err) == EDDY_OK && eddy_sampler_new(&sp, V, &s_ref, &err) == EDDY_OK);
    const eddy_token prompt[3] = {5, 17, 33};
    gen_tokens got = {0};
    const eddy_gen_params gp = {.n_predict = 30, .ignore_eog = ignore_eog};
    eddy_token *eog = malloc((size_t)V * sizeof *eog);
    int64_t n_eog = 0, eog_in_top = 0; /* rows whose best 40 held a banned token */
    for (eddy_token t = 0; eog && ignore_eog && t < V; t++)
        if (eddy_vocab_is_eog(v, t)) eog[n_eog++] = t;
    REQUIRE(CHECKF(eddy_generate_ex(c, v, s, prompt, 3, &gp, gen_collect, &got, NULL, &err) == EDDY_OK, "%s",
                   err.msg));
    /* the same draws from whole rows, fed one at a time */
    float *logits = malloc((size_t)V * sizeof *logits);
    REQUIRE(logits && eddy_ctx_eval(ref, prompt, 3, logits, 0, &err) == EDDY_OK);
    for (int i = 0; i < 3; i++) eddy_sampler_accept(s_ref, prompt[i]);
    int64_t n = 0;
    bool same = true;
    for (; n < 30 && same; n++) {
        int32_t top_ids[40];
        float top_vals[40];
        const int64_t n_top = vec_top_k(logits, V, 40, top_ids, top_vals);
        for (int64_t j = 0; j < n_eog; j++) {
            for (int64_t i = 0; i < n_top; i++) eog_in_top += top_ids[i] == eog[j];
            logits[eog[j]] = -INFINITY;
        }
        const eddy_token t = eddy_sampler_sample(s_ref, logits);
        if (eddy_vocab_is_eog(v, t)) break;
        eddy_sampler_accept(s_ref, t);
        same = CHECKF(n < got.n && got.toks[n] == t, "%s: token %lld: %d, from whole rows %d", file, (long long)n,
                      n < got.n ? got.toks[n] : -1, t);
        if (same) REQUIRE(eddy_ctx_eval(ref, &t, 1, logits, 0, &err) == EDDY_OK);
    }
    if (same) {
        CHECKF(n == got.n, "%s: %lld tokens, from whole rows %lld", file, (long long)got.n, (long long)n);
        const float *kept = eddy_seq_logits(eddy_ctx_seq(c));
        CHECKF(kept && !memcmp(kept, logits, (size_t)V * sizeof *logits), "%s: the sequence's last logits", file);
        gen_tokens more = {0}; /* no prompt: the loop goes on from the kept logits */
        const eddy_gen_params gp2 = {.n_predict = 4};
        CHECKF(eddy_generate_ex(c, v, s, NULL, 0, &gp2, gen_collect, &more, NULL, &err) == EDDY_OK, "%s", err.msg);
    }
    CHECKF(!ignore_eog || (n_eog > 0 && eog_in_top > 0), "%s: %lld banned tokens, in the best 40 of %lld rows", file,
           (long long)n_eog, (long long)eog_in_top);
    free(logits), free(eog);
    eddy_sampler_free(s), eddy_sampler_free(s_ref);
    eddy_ctx_free(c), eddy_ctx_free(ref);
    eddy_vocab_free(v);
    eddy_model_free(m);
}

void tseq_check_verify_top(const char *file, eddy_engine_params p, double lse_tol) {
    p.n_verify = 8;
    /* engine 0 verifies with logits, 1 with the best k */
    eddy_engine *e[2];
    eddy_seq *s[2][2];
    eddy_model *m = two_engines(file, p, e, s);
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m);
    test_rng r = test_rng_new();
    int32_t ids[20];
    tseq_rand_ids(&r, ids, 20, V);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 2; j++) REQUIRE(tseq_feed(s[k][j], ids + 6 * j, 6, NULL));
    float *logits = malloc(sizeof *logits * (size_t)(7 * V)), *kept = malloc(sizeof *kept * (size_t)V);
    float top_vals[7 * EDDY_TOP_MAX];
    int32_t top_ids[7 * EDDY_TOP_MAX], counts[7];
    double lse[7];
    eddy_error err;
    /* sequence 0's 4 tokens and 1's 3, all rows wanted; then sequence 0's 3 alone */
    eddy_seq *owner[2][7];
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 7; i++) owner[k][i] = s[k][i < 4 ? 0 : 1];
    int8_t all[7] = {1, 1, 1, 1, 1, 1, 1};
    const eddy_batch w0 = {7, ids + 12, owner[0], all}, w1 = {7, ids + 12, owner[1], all};
    REQUIRE(CHECKF(eddy_engine_verify(e[0], &w0, logits, &err) == EDDY_OK, "%s", err.msg));
    REQUIRE(CHECKF(eddy_engine_verify_top(e[1], &w1, 40, top_ids, top_vals, counts, lse, &err) == EDDY_OK, "%s",
                   err.msg));
    for (int i = 0; i < 7; i++) {
        check_top_row(file, "verify of two", i, logits + i * V, V, 40, top_ids, top_vals, counts);
        check_lse(file, "verify of two", i, logits + i * V, V, lse, lse_tol);
    }
    for (int k = 0; k < 2; k++) {
        REQUIRE(eddy_seq_accept(s[k][0], 2, &err) == EDDY_OK && eddy_seq_accept(s[k][1], 3, &err) == EDDY_OK);
        engine_seq_keep_logits(s[k][0]), engine_seq_keep_logits(s[k][1]);
    }
    CHECKF(!eddy_seq_logits(s[1][0]) && !eddy_seq_logits(s[1][1]), "%s: a verify of two left logits", file);
    const eddy_batch a0 = {3, ids + 17, owner[0], all}, a1 = {3, ids + 17, owner[1], all};
    REQUIRE(CHECKF(eddy_engine_verify(e[0], &a0, logits, &err) == EDDY_OK, "%s", err.msg));
    REQUIRE(CHECKF(eddy_engine_verify_top(e[1], &a1, 5, top_ids, top_vals, counts, NULL, &err) == EDDY_OK, "%s",
                   err.msg));
    for (int i = 0; i < 3; i++)
        check_top_row(file, "verify of one", i, logits + i * V, V, 5, top_ids, top_vals, counts);
    for (int k = 0; k < 2; k++) REQUIRE(eddy_seq_accept(s[k][0], 2, &err) == EDDY_OK);
    engine_seq_keep_logits(s[1][0]);
    const float *l = eddy_seq_logits(s[1][0]);
    CHECKF(l && !memcmp(l, logits + V, sizeof *l * (size_t)V), "%s: the kept row of a verify of one: %s", file,
           l ? "other logits" : "none");
    /* the same again, with another sequence's step between the accept and the keeping */
    int32_t t1 = ids[19];
    REQUIRE(CHECKF(eddy_engine_verify_top(e[1], &a1, 5, top_ids, top_vals, counts, NULL, &err) == EDDY_OK, "%s",
                   err.msg));
    REQUIRE(eddy_seq_accept(s[1][0], 1, &err) == EDDY_OK);
    REQUIRE(tseq_feed(s[1][1], &t1, 1, NULL));
    engine_seq_keep_logits(s[1][0]);
    CHECKF(!eddy_seq_logits(s[1][0]), "%s: logits kept through another sequence's step", file);
    REQUIRE(CHECKF(eddy_engine_verify(e[0], &a0, logits, &err) == EDDY_OK, "%s", err.msg));
    REQUIRE(eddy_seq_accept(s[0][0], 1, &err) == EDDY_OK);
    REQUIRE(tseq_feed(s[0][1], &t1, 1, NULL));
    /* the states after the accepts: the same logits from a step of each sequence */
    for (int j = 0; j < 2; j++) {
        int32_t t = ids[j];
        REQUIRE(tseq_feed(s[0][j], &t, 1, logits) && tseq_feed(s[1][j], &t, 1, kept));
        CHECKF(!memcmp(logits, kept, sizeof *kept * (size_t)V), "%s: sequence %d after the accepts: other logits",
               file, j);
    }
    CHECK_EQ(eddy_engine_verify_top(e[1], &a1, 0, top_ids, top_vals, counts, NULL, &err), EDDY_ERR_ARG);
    CHECK_EQ(eddy_engine_verify_top(e[1], &a1, EDDY_TOP_MAX + 1, top_ids, top_vals, counts, NULL, &err), EDDY_ERR_ARG);
    CHECK_EQ(eddy_engine_verify_top(e[1], &a1, 4, top_ids, top_vals, NULL, NULL, &err), EDDY_ERR_ARG);
    free(logits), free(kept);
    free_two_engines(m, e, s);
}

void tseq_check_decode_best(const char *file, eddy_engine_params p, double tol) {
    eddy_engine *e[2];
    eddy_seq *s[2][2];
    eddy_model *m = two_engines(file, p, e, s);
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m);
    test_rng r = test_rng_new();
    int32_t prompt[9], ids[2];
    tseq_rand_ids(&r, prompt, 9, V);
    float *logits = malloc(sizeof *logits * (size_t)(2 * V)), best_p[2];
    eddy_seq *owner[2][9];
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 9; i++) owner[k][i] = s[k][i < 4 ? 0 : 1];
    eddy_error err;
    for (int step = 0; step < 2 && logits; step++) { /* the prompts (each one's last row), then a token each */
        const int64_t n = step ? 2 : 9;
        const int32_t *toks = step ? ids : prompt;
        const eddy_batch b0 = {n, toks, step ? s[0] : owner[0], NULL}, b1 = {n, toks, step ? s[1] : owner[1], NULL};
        int32_t got[2];
        REQUIRE(CHECKF(eddy_engine_decode(e[0], &b0, logits, &err) == EDDY_OK, "%s", err.msg));
        REQUIRE(CHECKF(engine_decode_best(e[1], &b1, got, best_p, &err) == EDDY_OK, "%s", err.msg));
        for (int j = 0; j < 2; j++) {
            float want_p;
            const int32_t want = (int32_t)vec_argmax_softmax(logits + j * V, V, &want_p);
            CHECKF(got[j] == want && (tol == 0 ? best_p[j] == want_p : fabs(best_p[j] - want_p) <= tol * want_p),
                   "%s: step %d, row %d: %d (p %.9g), the logits' %d (p %.9g)", file, step, j, got[j], best_p[j], want,
                   want_p);
            CHECK(eddy_seq_logits(s[1][j]) == NULL);
            ids[j] = got[j];
        }
    }
    free(logits);
    free_two_engines(m, e, s);
}
