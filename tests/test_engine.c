/*
 * test_engine.c — engines and sequences (include/eddy.h, src/model/engine*.c) on the
 * tiny model of every architecture:
 *   - N sequences of different prompts and lengths, prefilled in one batch and then
 *     decoded together, give each the logits it gets alone;
 *   - fork then diverge = two independent runs; roll back to p then go on = a run
 *     that never went past p; snapshot -> restore is exact; verify K + accept(k) =
 *     feeding the k tokens; two threads driving one engine = the same run serially;
 *   - bad use (unknown sequence, rollback past the start, exhausted pool, position
 *     beyond the context, a pending verify) is refused with a clear error that
 *     changes nothing.
 *
 * Bound: bit-identical. Every kernel computes a row from that row's inputs alone, in
 * an order fixed by the shapes (products: per token and weight row; attention: keys
 * in fixed chunks; recurrences: per sequence), so batching and splitting do not move a
 * bit — except where the same tokens go through another algorithm: a prefill of T
 * tokens (the chunked delta rule) is not T decode steps. The references below feed
 * tokens in the same groups as the runs they check. The products of quantized weights
 * run on AMX tiles in bf16 for 16 rows or more where the CPU has AMX, a different
 * rounding: the quantized models' batches stay below 16 rows.
 */
#include "test.h"

#include <pthread.h>
#include <stdlib.h>

#include "eddy.h"
#include "test_seq.h"

static const char *const models[] = {
    "models/llama-tiny-f32.gguf",         "models/qwen35-tiny-f32.gguf",    "models/qwen35moe-tiny-f32.gguf",
    "models/qwen3next-tiny-f32.gguf",     "models/mamba2-tiny-f32.gguf",    "models/nemotron_h-tiny-f32.gguf",
    "models/granitehybrid-tiny-f32.gguf", "models/granitehybrid-dense-tiny-f32.gguf",
};
static const char *const quantized[] = {
    "models/qwen35-tiny-q4_k_m.gguf", "models/qwen3next-tiny-q8_0.gguf", "models/mamba2-tiny-q8_0.gguf",
    "models/nemotron_h-tiny-q8_0.gguf", "models/llama-tiny-q8_0.gguf",
};
#define N_MODELS (int)(sizeof models / sizeof models[0])
#define N_QUANTIZED (int)(sizeof quantized / sizeof quantized[0])

/* ==== Helpers ==== */

static eddy_model *load(const char *file) { return tseq_load(file); }

/* n_states snapshot states and as many verify states */
static eddy_engine *new_engine(const eddy_model *m, int n_seq, int n_states, int64_t n_ctx) {
    return tseq_engine(m, (eddy_engine_params){.n_ctx = n_ctx, .n_seq_max = n_seq, .n_snapshots = n_states,
                                               .n_verify = n_states});
}

#define new_seq tseq_new
#define rand_ids tseq_rand_ids
#define feed tseq_feed

/* True when a and b hold the same bits; else reports the worst difference. */
static bool same_rows(const char *what, const char *file, const float *a, const float *b, int64_t n) {
    if (!memcmp(a, b, (size_t)n * sizeof(float))) return true;
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabs((double)a[i] - b[i]) > worst) worst = fabs((double)a[i] - b[i]), at = i;
    return CHECKF(false, "%s: %s differ: worst |diff| %g at %lld (%g vs %g)", file, what, worst, (long long)at,
                  a[at], b[at]);
}

/* ==== Batches against sequences alone ==== */

#define N_SEQ 4
#define N_DEC 5

/* Prompts of lengths len[i] prefilled in one batch (every logit wanted), then N_DEC
 * decode steps of all sequences in one batch each; against each sequence alone,
 * prefilled and decoded token by token, on an engine of its own. */
static void check_batch_matches_alone(const char *file, const int64_t len[N_SEQ]) {
    eddy_model *m = load(file);
    if (!m) return;
    const int64_t V = eddy_model_n_vocab(m);
    test_rng r = test_rng_new();
    int64_t total = 0, off[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) off[i] = total, total += len[i];
    int32_t *prompt = malloc((size_t)total * sizeof *prompt), dec[N_DEC][N_SEQ];
    rand_ids(&r, prompt, total, V);
    rand_ids(&r, &dec[0][0], N_DEC * N_SEQ, V);
    float *batch_pre = malloc((size_t)(total * V) * sizeof(float));
    float *batch_dec = malloc((size_t)(N_DEC * N_SEQ * V) * sizeof(float));
    float *alone = malloc((size_t)(total * V) * sizeof(float));

    eddy_engine *e = new_engine(m, N_SEQ, 0, 64);
    eddy_seq *s[N_SEQ] = {0}, *owner[64];
    for (int i = 0; e && i < N_SEQ; i++) s[i] = new_seq(e);
    eddy_error err;
    if (e) {
        for (int i = 0; i < N_SEQ; i++)
            for (int64_t t = 0; t < len[i]; t++) owner[off[i] + t] = s[i];
        int8_t all[64];
        memset(all, 1, sizeof all);
        eddy_batch b = {total, prompt, owner, all};
        CHECKF(eddy_engine_decode(e, &b, batch_pre, &err) == EDDY_OK, "%s: batch prefill: %s", file, err.msg);
        for (int d = 0; d < N_DEC; d++) {
            eddy_batch bd = {N_SEQ, dec[d], s, NULL}; /* NULL: each sequence's last (only) token */
            CHECKF(eddy_engine_decode(e, &bd, batch_dec + d * N_SEQ * V, &err) == EDDY_OK, "%s: decode: %s", file,
                   err.msg);
        }
        for (int i = 0; i < N_SEQ; i++) CHECK_EQ(eddy_seq_n_pos(s[i]), len[i] + N_DEC);
    }
    for (int i = 0; e && i < N_SEQ; i++) {
        eddy_engine *e1 = new_engine(m, 1, 0, 64);
        eddy_seq *one = e1 ? new_seq(e1) : NULL;
        if (!one) break;
        char what[96];
        if (feed(one, prompt + off[i], len[i], alone)) {
            snprintf(what, sizeof what, "sequence %d's prefill logits (batch vs alone)", i);
            same_rows(what, file, batch_pre + off[i] * V, alone, len[i] * V);
        }
        for (int d = 0; d < N_DEC && feed(one, &dec[d][i], 1, alone); d++) {
            snprintf(what, sizeof what, "sequence %d's decode step %d (batch vs alone)", i, d);
            same_rows(what, file, batch_dec + (d * N_SEQ + i) * V, alone, V);
        }
        eddy_engine_free(e1);
    }
    eddy_engine_free(e);
    eddy_model_free(m);
    free(prompt), free(batch_pre), free(batch_dec), free(alone);
}

TEST(engine_batch_matches_alone) {
    const int64_t len[N_SEQ] = {7, 1, 19, 3};
    for (int i = 0; i < N_MODELS; i++) check_batch_matches_alone(models[i], len);
}

/* Quantized weights: 12 prompt rows, 4 decode rows per step. */
TEST(engine_batch_matches_alone_quantized) {
    const int64_t len[N_SEQ] = {2, 5, 1, 4};
    for (int i = 0; i < N_QUANTIZED; i++) check_batch_matches_alone(quantized[i], len);
}

/* ==== Fork, snapshot, rollback ==== */

#define P_LEN 20
#define X_LEN 10

/* fork after P; A takes X, B takes Y, interleaved token by token so that each writes
 * into the KV block they shared; each must see what a run of its own tokens sees. */
static void check_fork(const char *file) {
    eddy_model *m = load(file);
    eddy_engine *e = m ? new_engine(m, 3, 0, 64) : NULL;
    if (!e) return eddy_model_free(m);
    const int64_t V = eddy_model_n_vocab(m);
    test_rng r = test_rng_new();
    int32_t p[P_LEN], x[X_LEN], y[X_LEN];
    rand_ids(&r, p, P_LEN, V), rand_ids(&r, x, X_LEN, V), rand_ids(&r, y, X_LEN, V);
    float *la = malloc((size_t)(X_LEN * V) * 4), *lb = malloc((size_t)(X_LEN * V) * 4);
    float *ref = malloc((size_t)(P_LEN * V) * 4);
    eddy_seq *a = new_seq(e), *b = NULL;
    eddy_error err;
    if (a && feed(a, p, P_LEN, NULL) && CHECKF(eddy_seq_fork(a, &b, &err) == EDDY_OK, "%s", err.msg)) {
        CHECK_EQ(eddy_seq_n_pos(b), P_LEN);
        CHECK(!memcmp(eddy_seq_tokens(b), p, sizeof p));
        for (int t = 0; t < X_LEN; t++) {
            feed(b, &y[t], 1, lb + t * V);
            feed(a, &x[t], 1, la + t * V);
        }
        const int32_t *mine[2] = {x, y};
        const float *got[2] = {la, lb};
        for (int k = 0; k < 2; k++) {
            eddy_seq *s = new_seq(e);
            if (!s || !feed(s, p, P_LEN, NULL)) break;
            for (int t = 0; t < X_LEN && feed(s, &mine[k][t], 1, ref); t++)
                same_rows(k ? "the fork's logits" : "the original's logits after a fork", file, got[k] + t * V, ref,
                          V);
            eddy_seq_free(s);
        }
    }
    eddy_engine_free(e);
    eddy_model_free(m);
    free(la), free(lb), free(ref);
}

TEST(engine_fork_then_diverge_is_two_runs) {
    for (int i = 0; i < N_MODELS; i++) check_fork(models[i]);
}

/* snapshot after P, X fed, restore, X fed again: the same bits, and the snapshot
 * survives the sequence writing into the KV block it shares. */
static void check_snapshot(const char *file) {
    eddy_model *m = load(file);
    eddy_engine *e = m ? new_engine(m, 1, 1, 64) : NULL;
    if (!e) return eddy_model_free(m);
    const int64_t V = eddy_model_n_vocab(m);
    test_rng r = test_rng_new();
    int32_t p[P_LEN], x[X_LEN];
    rand_ids(&r, p, P_LEN, V), rand_ids(&r, x, X_LEN, V);
    float *l1 = malloc((size_t)(X_LEN * V) * 4), *l2 = malloc((size_t)(X_LEN * V) * 4);
    eddy_seq *s = new_seq(e);
    eddy_snapshot *snap = NULL;
    eddy_error err;
    if (s && feed(s, p, P_LEN, NULL) && CHECKF(eddy_seq_snapshot(s, &snap, &err) == EDDY_OK, "%s", err.msg)) {
        CHECK_EQ(eddy_snapshot_n_pos(snap), P_LEN);
        feed(s, x, 4, l1);
        feed(s, x + 4, X_LEN - 4, l1 + 4 * V);
        CHECK(eddy_seq_restore(s, snap, &err) == EDDY_OK);
        CHECK_EQ(eddy_seq_n_pos(s), P_LEN);
        feed(s, x, 4, l2);
        feed(s, x + 4, X_LEN - 4, l2 + 4 * V);
        same_rows("logits after snapshot -> restore", file, l1, l2, X_LEN * V);
        eddy_snapshot_free(snap);
    }
    eddy_engine_free(e);
    eddy_model_free(m);
    free(l1), free(l2);
}

TEST(engine_snapshot_restore_is_exact) {
    for (int i = 0; i < N_MODELS; i++) check_snapshot(models[i]);
}

/* P, X fed (as two evaluations), rolled back to P + 5, then Y: against a run of the
 * kept tokens that never saw the rest. Without a snapshot the recurrent layers
 * replay the kept tokens from the start as one evaluation, so the reference feeds
 * P + X[0..5) as one; with a snapshot at P they replay X[0..5) after it. */
static void check_truncate(const char *file, bool with_snapshot) {
    eddy_model *m = load(file);
    eddy_engine *e = m ? new_engine(m, 2, 1, 64) : NULL;
    if (!e) return eddy_model_free(m);
    const int64_t V = eddy_model_n_vocab(m), keep = P_LEN + 5;
    test_rng r = test_rng_new();
    int32_t px[P_LEN + X_LEN], y[4];
    rand_ids(&r, px, P_LEN + X_LEN, V), rand_ids(&r, y, 4, V);
    float *got = malloc((size_t)(4 * V) * 4), *ref = malloc((size_t)(4 * V) * 4);
    eddy_seq *s = new_seq(e), *t = new_seq(e);
    eddy_snapshot *snap = NULL;
    eddy_error err;
    if (s && t && feed(s, px, P_LEN, NULL)) {
        if (with_snapshot) CHECKF(eddy_seq_snapshot(s, &snap, &err) == EDDY_OK, "%s", err.msg);
        feed(s, px + P_LEN, X_LEN, NULL);
        CHECKF(eddy_seq_truncate(s, keep, &err) == EDDY_OK, "%s", err.msg);
        CHECK_EQ(eddy_seq_n_pos(s), keep);
        feed(s, y, 4, got);
        if (with_snapshot) {
            feed(t, px, P_LEN, NULL);
            feed(t, px + P_LEN, keep - P_LEN, NULL);
        } else {
            feed(t, px, keep, NULL);
        }
        feed(t, y, 4, ref);
        same_rows(with_snapshot ? "logits after a rollback to a snapshot's path" : "logits after a rollback", file,
                  got, ref, 4 * V);
        /* rolling back to where it is changes nothing; to 0, an empty sequence */
        CHECK(eddy_seq_truncate(s, eddy_seq_n_pos(s), &err) == EDDY_OK);
        CHECK(eddy_seq_truncate(s, 0, &err) == EDDY_OK);
        CHECK_EQ(eddy_seq_n_pos(s), 0);
    }
    eddy_snapshot_free(snap);
    eddy_engine_free(e);
    eddy_model_free(m);
    free(got), free(ref);
}

TEST(engine_rollback_is_a_run_that_stopped_there) {
    for (int i = 0; i < N_MODELS; i++) {
        check_truncate(models[i], false);
        check_truncate(models[i], true);
    }
}

/* ==== Verify and accept ==== */

#define K_DRAFT 4

/* After P, a verify of K drafts, accept(k), then 3 more tokens one by one: the
 * verify's logits are those of the drafts fed one by one, and what follows accept(k)
 * is what follows feeding the first k drafts. */
static void check_verify(const char *file, int64_t k) {
    eddy_model *m = load(file);
    eddy_engine *e = m ? new_engine(m, 3, K_DRAFT, 64) : NULL;
    if (!e) return eddy_model_free(m);
    const int64_t V = eddy_model_n_vocab(m);
    test_rng r = test_rng_new();
    int32_t p[P_LEN], d[K_DRAFT], z[3];
    rand_ids(&r, p, P_LEN, V), rand_ids(&r, d, K_DRAFT, V), rand_ids(&r, z, 3, V);
    float *lv = malloc((size_t)(K_DRAFT * V) * 4), *lz = malloc((size_t)(3 * V) * 4), *ref = malloc((size_t)V * 4);
    eddy_seq *s = new_seq(e), *t = new_seq(e);
    eddy_error err;
    if (s && t && feed(s, p, P_LEN, NULL) && feed(t, p, P_LEN, NULL)) {
        eddy_seq *owner[K_DRAFT] = {s, s, s, s};
        int8_t all[K_DRAFT] = {1, 1, 1, 1};
        eddy_batch b = {K_DRAFT, d, owner, all};
        if (CHECKF(eddy_engine_verify(e, &b, lv, &err) == EDDY_OK, "%s: verify: %s", file, err.msg)) {
            CHECK_EQ(eddy_seq_n_pos(s), P_LEN);
            CHECK(eddy_seq_accept(s, k, &err) == EDDY_OK);
            CHECK_EQ(eddy_seq_n_pos(s), P_LEN + k);
            for (int i = 0; i < 3; i++) feed(s, &z[i], 1, lz + i * V);
            for (int64_t i = 0; i < K_DRAFT; i++) { /* the reference: drafts one by one */
                if (!feed(t, &d[i], 1, ref)) break;
                same_rows("verify logits vs drafts fed one by one", file, lv + i * V, ref, V);
                if (i + 1 == k || (k == 0 && i == 0)) { /* the state after k drafts: go on from there */
                    eddy_seq *u = NULL;
                    if (!CHECK(eddy_seq_fork(t, &u, &err) == EDDY_OK)) break;
                    if (k == 0) CHECK(eddy_seq_truncate(u, P_LEN, &err) == EDDY_OK); /* attention: drop the row */
                    for (int j = 0; j < 3 && feed(u, &z[j], 1, ref); j++)
                        same_rows("logits after accept(k) vs after feeding k drafts", file, lz + j * V, ref, V);
                    eddy_seq_free(u);
                }
            }
        }
    }
    eddy_engine_free(e);
    eddy_model_free(m);
    free(lv), free(lz), free(ref);
}

TEST(engine_verify_accept_is_feeding_k_tokens) {
    const int64_t keep[3] = {0, 1, K_DRAFT};
    for (int i = 0; i < N_MODELS; i++)
        for (int j = 0; j < 3; j++) check_verify(models[i], keep[j]);
}

/* Two sequences of one engine, each verified in the same batch, accept different
 * counts; the states do not mix. */
TEST(engine_verify_two_sequences) {
    eddy_model *m = load("models/qwen35-tiny-f32.gguf");
    eddy_engine *e = m ? new_engine(m, 3, 6, 64) : NULL;
    if (!e) return eddy_model_free(m);
    const int64_t V = eddy_model_n_vocab(m);
    test_rng r = test_rng_new();
    int32_t p[2][P_LEN], d[6];
    rand_ids(&r, &p[0][0], 2 * P_LEN, V), rand_ids(&r, d, 6, V);
    eddy_seq *a = new_seq(e), *b = new_seq(e), *ref = new_seq(e);
    float *lv = malloc((size_t)(6 * V) * 4), *l = malloc((size_t)V * 4), *lr = malloc((size_t)V * 4);
    eddy_error err;
    if (a && b && ref && feed(a, p[0], P_LEN, NULL) && feed(b, p[1], P_LEN, NULL)) {
        eddy_seq *owner[6] = {a, a, a, b, b, b};
        eddy_batch batch = {6, d, owner, NULL}; /* each sequence's last token's logits */
        REQUIRE(eddy_engine_verify(e, &batch, lv, &err) == EDDY_OK);
        /* a verify state per verified position is taken: the engine has 6, a seventh is
         * refused; the snapshot states are the verify's no more */
        eddy_batch one = {1, d, &ref, NULL};
        CHECK_EQ(eddy_engine_verify(e, &one, NULL, &err), EDDY_ERR_NOMEM);
        eddy_snapshot *snap = NULL;
        CHECK(eddy_seq_snapshot(ref, &snap, &err) == EDDY_OK);
        eddy_snapshot_free(snap);
        CHECK(eddy_seq_accept(a, 1, &err) == EDDY_OK && eddy_seq_accept(b, 3, &err) == EDDY_OK);
        const int32_t next = 5;
        for (int k = 0; k < 2; k++) {
            eddy_seq *s = k ? b : a;
            const int64_t n = k ? 3 : 1;
            eddy_seq_clear(ref);
            feed(ref, p[k], P_LEN, NULL);
            for (int64_t i = 0; i < n; i++) feed(ref, &d[3 * k + i], 1, NULL);
            feed(ref, &next, 1, lr);
            feed(s, &next, 1, l);
            same_rows(k ? "b after accept(3)" : "a after accept(1)", "qwen35", l, lr, V);
        }
    }
    eddy_engine_free(e);
    eddy_model_free(m);
    free(lv), free(l), free(lr);
}

/* ==== Threads ==== */

typedef struct {
    eddy_seq *s;
    const int32_t *ids;
    float *out;
    int64_t V;
} drive_job;

static void *drive(void *arg) {
    drive_job *j = arg;
    for (int t = 0; t < 12; t++) eddy_seq_eval(j->s, &j->ids[t], 1, j->out + t * j->V, 0, NULL);
    return NULL;
}

/* Two threads decoding their own sequences of one engine at once: the same logits as
 * the same steps taken one after the other. */
TEST(engine_two_threads_drive_one_engine) {
    eddy_model *m = load("models/qwen35-tiny-f32.gguf");
    eddy_engine *e = m ? new_engine(m, 2, 0, 64) : NULL;
    if (!e) return eddy_model_free(m);
    const int64_t V = eddy_model_n_vocab(m);
    test_rng r = test_rng_new();
    int32_t ids[2][12];
    rand_ids(&r, &ids[0][0], 24, V);
    float *out[2], *ref = malloc((size_t)(12 * V) * 4);
    drive_job jobs[2];
    pthread_t th[2];
    for (int k = 0; k < 2; k++) {
        out[k] = calloc((size_t)(12 * V), 4);
        jobs[k] = (drive_job){new_seq(e), ids[k], out[k], V};
        REQUIRE(jobs[k].s != NULL);
    }
    for (int k = 0; k < 2; k++) pthread_create(&th[k], NULL, drive, &jobs[k]);
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < 2; k++) {
        eddy_seq_clear(jobs[k].s);
        for (int t = 0; t < 12; t++) feed(jobs[k].s, &ids[k][t], 1, ref + t * V);
        same_rows("logits of a sequence driven from its own thread", "qwen35", out[k], ref, 12 * V);
        free(out[k]);
    }
    eddy_engine_free(e);
    eddy_model_free(m);
    free(ref);
}

/* ==== Bad use ==== */

/* eddy_engine_decode_logprob gives each wanted row vec_logprob of the logits
 * eddy_engine_decode gives, bit for bit (tseq_check_decode_logprob) */
TEST(engine_decode_logprob_is_the_logits_logprob) {
    tseq_check_decode_logprob("models/qwen35-tiny-q4_k_m.gguf", (eddy_engine_params){0}, 0);
    tseq_check_decode_logprob("models/mamba2-tiny-f32.gguf", (eddy_engine_params){0}, 0);
}

/* eddy_engine_decode_argmax and eddy_engine_decode_top give each wanted row the argmax
 * and the best k of the logits eddy_engine_decode gives, and their log-sum-exp, bit for
 * bit (tseq_check_decode_top) */
TEST(engine_decode_argmax_and_top_are_the_logits_best) {
    tseq_check_decode_top("models/qwen35-tiny-q4_k_m.gguf", (eddy_engine_params){0}, 0);
    tseq_check_decode_top("models/llama-tiny-f32.gguf", (eddy_engine_params){0}, 0);
}

/* engine_decode_best (a draft model's greedy drafts) gives vec_argmax_softmax of the logits
 * eddy_engine_decode gives, bit for bit (tseq_check_decode_best) */
TEST(engine_decode_best_is_the_logits_best) {
    tseq_check_decode_best("models/qwen35-tiny-q4_k_m.gguf", (eddy_engine_params){0}, 0);
    tseq_check_decode_best("models/llama-tiny-f32.gguf", (eddy_engine_params){0}, 0);
}

/* eddy_engine_verify_top gives the best k of eddy_engine_verify's rows, and a verify of
 * one sequence leaves the kept row for the sequence (tseq_check_verify_top) */
TEST(engine_verify_top_is_the_verify_best) {
    tseq_check_verify_top("models/qwen35-tiny-q4_k_m.gguf", (eddy_engine_params){0}, 0);
    tseq_check_verify_top("models/mamba2-tiny-f32.gguf", (eddy_engine_params){0}, 0);
    tseq_check_verify_top("models/llama-tiny-f32.gguf", (eddy_engine_params){0}, 0);
}

TEST(engine_refuses_bad_use) {
    eddy_model *m = load("models/qwen35-tiny-f32.gguf");
    eddy_engine *e = m ? new_engine(m, 2, 1, 16) : NULL, *other = m ? new_engine(m, 1, 0, 16) : NULL;
    if (!e || !other) {
        eddy_engine_free(e), eddy_engine_free(other);
        return eddy_model_free(m);
    }
    eddy_error err;
    eddy_seq *a = new_seq(e), *b = new_seq(e), *c = NULL, *x = new_seq(other);
    REQUIRE(a && b && x);
    /* the pool is sized at creation: a third sequence does not fit */
    CHECK_EQ(eddy_seq_new(e, &c, &err), EDDY_ERR_NOMEM);
    CHECK_CONTAINS(err.msg, "all 2 sequences of the engine are in use");
    CHECK(c == NULL);
    const int32_t ids[20] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    feed(a, ids, 3, NULL);
    /* a sequence of another engine in a batch */
    eddy_seq *owner[3] = {a, x, b};
    eddy_batch batch = {3, ids, owner, NULL};
    CHECK_EQ(eddy_engine_decode(e, &batch, NULL, &err), EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "token 1 names no sequence of this engine");
    /* a sequence's tokens apart */
    eddy_seq *apart[3] = {a, b, a};
    batch.seq = apart;
    CHECK_EQ(eddy_engine_decode(e, &batch, NULL, &err), EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "are not together");
    /* a token outside the vocabulary */
    const int32_t bad[3] = {1, 2, 1 << 30};
    eddy_seq *fine[3] = {a, a, b};
    eddy_batch bb = {3, bad, fine, NULL};
    CHECK_EQ(eddy_engine_decode(e, &bb, NULL, &err), EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "outside the vocabulary");
    /* beyond the context (16 positions; a holds 3) */
    CHECK_EQ(eddy_seq_eval(a, ids, 14, NULL, 0, &err), EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "14 tokens do not fit");
    /* rollback past the start, or forward */
    CHECK_EQ(eddy_seq_truncate(a, -1, &err), EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "cannot roll back to position -1");
    CHECK_EQ(eddy_seq_truncate(a, 4, &err), EDDY_ERR_ARG);
    /* nothing above changed a */
    CHECK_EQ(eddy_seq_n_pos(a), 3);
    CHECK_EQ(eddy_seq_n_pos(b), 0);
    /* snapshots: one fits, a second does not */
    eddy_snapshot *s1 = NULL, *s2 = NULL;
    CHECK(eddy_seq_snapshot(a, &s1, &err) == EDDY_OK);
    CHECK_EQ(eddy_seq_snapshot(a, &s2, &err), EDDY_ERR_NOMEM);
    CHECK_CONTAINS(err.msg, "snapshot states of the engine are in use");
    CHECK_EQ(eddy_seq_restore(x, s1, &err), EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "another engine");
    /* a verify needs a free verify state per token (a snapshot held takes none of them),
     * and a pending verify blocks the sequence */
    eddy_seq *owner2[2] = {a, a};
    eddy_batch vb = {2, ids, owner2, NULL};
    CHECK_EQ(eddy_engine_verify(e, &vb, NULL, &err), EDDY_ERR_NOMEM);
    CHECK_CONTAINS(err.msg, "needs as many free verify states; 1 of the engine's 1 are free");
    eddy_batch xb = {1, ids, &x, NULL};
    CHECK_EQ(eddy_engine_verify(other, &xb, NULL, &err), EDDY_ERR_NOMEM);
    CHECK_CONTAINS(err.msg, "0 of the engine's 0 are free (n_verify)");
    CHECK_EQ(eddy_seq_n_pos(x), 0);
    vb.n_tokens = 1;
    CHECK(eddy_engine_verify(e, &vb, NULL, &err) == EDDY_OK);
    eddy_snapshot_free(s1);
    CHECK_EQ(eddy_seq_eval(a, ids, 1, NULL, 0, &err), EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "awaiting eddy_seq_accept");
    CHECK_EQ(eddy_seq_accept(a, 2, &err), EDDY_ERR_ARG);
    CHECK(eddy_seq_accept(a, 1, &err) == EDDY_OK);
    CHECK_EQ(eddy_seq_n_pos(a), 4);
    CHECK_EQ(eddy_seq_accept(a, 1, &err), EDDY_ERR_ARG); /* nothing pending any more */
    /* a sequence freed makes room for a new one */
    eddy_seq_free(b);
    CHECK(eddy_seq_new(e, &c, &err) == EDDY_OK);
    eddy_engine_free(e);
    eddy_engine_free(other);
    eddy_model_free(m);
}

TEST(engine_refuses_bad_params) {
    eddy_model *m = load("models/llama-tiny-f32.gguf");
    if (!m) return;
    eddy_engine *e = NULL;
    eddy_error err;
    eddy_engine_params p = {.n_seq_max = -1};
    CHECK_EQ(eddy_engine_new(m, &p, &e, &err), EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "sequences out of range");
    p = (eddy_engine_params){.n_snapshots = 1 << 20};
    CHECK_EQ(eddy_engine_new(m, &p, &e, &err), EDDY_ERR_ARG);
    p = (eddy_engine_params){.n_verify = -1};
    CHECK_EQ(eddy_engine_new(m, &p, &e, &err), EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "verify states out of range");
    p = (eddy_engine_params){.n_ctx = -5};
    CHECK_EQ(eddy_engine_new(m, &p, &e, &err), EDDY_ERR_ARG);
    CHECK(e == NULL);
    /* the bytes a slot and a position cost, as docs/sequences.md says */
    p = (eddy_engine_params){.n_ctx = 32, .n_threads = 1};
    REQUIRE(eddy_engine_new(m, &p, &e, &err) == EDDY_OK);
    CHECK_EQ(eddy_engine_state_bytes(e), 0); /* attention only: no recurrent state */
    CHECK_EQ(eddy_engine_row_bytes(e), 0);
    CHECK(eddy_engine_kv_bytes_per_pos(e) > 0);
    eddy_engine_free(e);
    eddy_model_free(m);
}
