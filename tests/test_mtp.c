/*
 * test_mtp.c — the multi-token-prediction layer of Qwen3.5 files (src/model/block_mtp.c)
 * against a reference built from transformers' own modules (scripts/gen_tiny_mtp.py:
 * transformers ignores the mtp.* weights, so the script assembles the layer from the
 * model class's decoder layer, RMSNorm and a linear fc), and the state it keeps
 * through verify/accept, snapshots and forks.
 *
 * <arch>-mtp-tiny.ref: f32 main[40][1024] (the main model's logits on the first 40 ids
 * of qwen-tiny.ids), f32 mtp[39][1024] (the MTP row of token ids[q] with h of position
 * q - 1, q = 1..39), i32 drafts[3] and f32 chain[3][1024] (greedy drafts after the
 * first 20 ids with t = ids[20], each on the one before and the layer's own output).
 */
#include <stdlib.h>
#include <string.h>

#include "model/engine.h"
#include "test.h"
#include "test_seq.h"

#define V 1024
#define N_MAIN 40
#define PROMPT 20
#define N_CHAIN 3

typedef struct {
    float main[N_MAIN][V];
    float mtp[N_MAIN - 1][V];
    int32_t drafts[N_CHAIN];
    float chain[N_CHAIN][V];
} mtp_ref;

static const char *const archs[] = {"qwen35", "qwen35moe"};

static bool read_ids(int32_t *ids, int n) {
    size_t len;
    char *text = test_read_file(test_data_path("models/qwen-tiny.ids"), &len);
    if (!CHECK(text)) return false;
    char *p = text;
    for (int i = 0; i < n; i++) ids[i] = (int32_t)strtol(p, &p, 10);
    free(text);
    return true;
}

static mtp_ref *read_ref(const char *arch) {
    char rel[96];
    snprintf(rel, sizeof rel, "models/%s-mtp-tiny.ref", arch);
    size_t n;
    mtp_ref *r = test_read_file(test_data_path(rel), &n);
    if (!CHECKF(r && n == sizeof *r, "%s: %zu bytes", rel, r ? n : 0)) {
        free(r);
        return NULL;
    }
    return r;
}

static double rel_rms(const float *a, const float *ref) { return sqrt(test_nmse(a, ref, V)); }

static eddy_engine *mtp_engine(const eddy_model *m) {
    return tseq_engine(m, (eddy_engine_params){.n_ctx = 128, .n_seq_max = 4, .n_snapshots = 8, .n_verify = 8,
                                               .n_batch = 64, .mtp = true, .type_k = EDDY_KV_F32,
                                               .type_v = EDDY_KV_F32});
}

static bool draft(eddy_seq *s, int32_t t, int64_t max, int32_t *out, float *logits) {
    int64_t k;
    eddy_error err;
    if (!CHECKF(engine_seq_mtp_draft(s, t, max, -1.0f, out, &k, logits, &err) == EDDY_OK, "%s", err.msg))
        return false;
    return CHECK_EQ(k, max);
}

/* F32 files: the main logits as before, every MTP row and a chain of three drafts
 * within 1e-5 relative RMS of the reference, with the prompt fed in one step and
 * token by token. */
TEST(mtp_matches_reference) {
    int32_t ids[N_MAIN];
    if (!read_ids(ids, N_MAIN)) return;
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
        char rel[96];
        snprintf(rel, sizeof rel, "models/%s-mtp-tiny-f32.gguf", archs[a]);
        eddy_model *m = tseq_load(rel);
        mtp_ref *ref = read_ref(archs[a]);
        eddy_engine *e = m && ref ? mtp_engine(m) : NULL;
        eddy_seq *s = e ? tseq_new(e) : NULL;
        float *l = malloc(sizeof(float) * V * N_MAIN);
        if (s && CHECK(eddy_model_has_mtp(m)) && CHECK_EQ(eddy_model_n_vocab(m), V)) {
            /* the main model, unchanged by the layer after it */
            tseq_feed(s, ids, N_MAIN, l);
            double worst = 0;
            for (int t = 0; t < N_MAIN; t++) worst = fmax(worst, rel_rms(l + t * V, ref->main[t]));
            CHECKF(worst <= 1e-5, "%s main logits: worst relative RMS %g", archs[a], worst);
            /* row q: the sequence holds ids[0, q), the draft goes in with ids[q] */
            eddy_seq_clear(s);
            worst = 0;
            for (int q = 1; q < N_MAIN; q++) {
                int32_t d;
                tseq_feed(s, &ids[q - 1], 1, NULL);
                if (!draft(s, ids[q], 1, &d, l)) break;
                worst = fmax(worst, rel_rms(l, ref->mtp[q - 1]));
            }
            CHECKF(worst <= 1e-5, "%s MTP rows: worst relative RMS %g", archs[a], worst);
            /* the chain, after the prompt fed in one step and token by token */
            for (int one_step = 0; one_step < 2; one_step++) {
                eddy_seq_clear(s);
                if (one_step) tseq_feed(s, ids, PROMPT, NULL);
                else
                    for (int i = 0; i < PROMPT; i++) tseq_feed(s, &ids[i], 1, NULL);
                int32_t d[N_CHAIN];
                if (!draft(s, ids[PROMPT], N_CHAIN, d, l)) break;
                for (int k = 0; k < N_CHAIN; k++) {
                    CHECKF(d[k] == ref->drafts[k], "%s draft %d: %d, reference %d", archs[a], k, d[k], ref->drafts[k]);
                    const double r = rel_rms(l + k * V, ref->chain[k]);
                    CHECKF(r <= 1e-5, "%s draft %d logits: relative RMS %g", archs[a], k, r);
                }
                CHECK_EQ(eddy_seq_n_pos(s), PROMPT); /* drafting leaves the sequence where it was */
            }
        }
        free(l);
        free(ref);
        eddy_engine_free(e);
        eddy_model_free(m);
    }
}

/* What the layer keeps is a sequence's state: after a verify accepting k of 3 drafts,
 * after restoring a snapshot and in a fork, the next drafts are the bits of a
 * sequence fed the same prompt, then the same tokens one by one. */
TEST(mtp_state_follows_the_sequence) {
    eddy_model *m = tseq_load("models/qwen35-mtp-tiny-q8_0.gguf");
    eddy_engine *e = m ? mtp_engine(m) : NULL;
    if (!e) return eddy_model_free(m);
    int32_t ids[N_MAIN];
    if (!read_ids(ids, N_MAIN)) return eddy_engine_free(e), eddy_model_free(m);
    eddy_seq *s = tseq_new(e), *ref = tseq_new(e);
    float *got = malloc(sizeof(float) * V * N_CHAIN), *want = malloc(sizeof(float) * V * N_CHAIN);
    eddy_error err;
    int32_t d[N_CHAIN], dr[N_CHAIN];
    for (int64_t keep = 1; keep <= 4 && s && ref; keep++) {
        eddy_seq_clear(s), eddy_seq_clear(ref);
        tseq_feed(s, ids, PROMPT, NULL);
        const int32_t v[4] = {ids[PROMPT], ids[PROMPT + 1], ids[PROMPT + 2], ids[PROMPT + 3]};
        eddy_seq *owner[4] = {s, s, s, s};
        eddy_batch b = {4, v, owner, NULL};
        REQUIRE(eddy_engine_verify(e, &b, NULL, &err) == EDDY_OK);
        REQUIRE(eddy_seq_accept(s, keep, &err) == EDDY_OK);
        tseq_feed(ref, ids, PROMPT, NULL);
        for (int i = PROMPT; i < PROMPT + keep; i++) tseq_feed(ref, &ids[i], 1, NULL);
        if (!draft(s, ids[30], N_CHAIN, d, got) || !draft(ref, ids[30], N_CHAIN, dr, want)) break;
        CHECKF(!memcmp(got, want, sizeof(float) * V * N_CHAIN), "accept(%lld): the drafts' logits differ",
               (long long)keep);
    }
    /* a snapshot at PROMPT, five more tokens, restored; and a fork of it */
    eddy_snapshot *snap = NULL;
    eddy_seq *fork = NULL;
    eddy_seq_clear(s), eddy_seq_clear(ref);
    tseq_feed(s, ids, PROMPT, NULL);
    tseq_feed(ref, ids, PROMPT, NULL);
    if (CHECK(eddy_seq_snapshot(s, &snap, &err) == EDDY_OK) && CHECK(eddy_seq_fork(s, &fork, &err) == EDDY_OK)) {
        tseq_feed(s, ids + PROMPT, 5, NULL);
        tseq_feed(fork, ids + 30, 3, NULL); /* the fork writes its own cache rows */
        draft(ref, ids[PROMPT], N_CHAIN, dr, want);
        REQUIRE(eddy_seq_restore(s, snap, &err) == EDDY_OK);
        draft(s, ids[PROMPT], N_CHAIN, d, got);
        CHECK(!memcmp(got, want, sizeof(float) * V * N_CHAIN));
        /* the fork's main layers kept the last row they shared when the MTP layer's write
         * one position back copied the block */
        float *lf = malloc(sizeof(float) * V * 3), *lr = malloc(sizeof(float) * V * 3);
        eddy_seq_free(fork);
        eddy_seq *twin = tseq_new(e);
        REQUIRE(eddy_seq_fork(ref, &fork, &err) == EDDY_OK);
        if (twin) {
            tseq_feed(twin, ids, PROMPT, NULL);
            tseq_feed(fork, ids + 30, 3, lf);
            tseq_feed(twin, ids + 30, 3, lr);
            CHECK(!memcmp(lf, lr, sizeof(float) * V * 3));
            eddy_seq_free(twin);
            REQUIRE(eddy_seq_truncate(fork, PROMPT, &err) == EDDY_OK);
        }
        free(lf), free(lr);
        draft(fork, ids[PROMPT], N_CHAIN, d, got);
        CHECK(!memcmp(got, want, sizeof(float) * V * N_CHAIN));
    }
    eddy_snapshot_free(snap);
    free(got), free(want);
    eddy_engine_free(e);
    eddy_model_free(m);
}

/* Drafts of many sequences at once (each chain step one row per sequence still
 * drafting, in groups of MTP_DRAFT_ROWS): every sequence's drafts, their count and
 * their logits are the bits it gets alone, whatever its length, draft count and
 * probability cut-off; refused: a sequence given twice, one of another engine. */
TEST(mtp_drafts_of_many_sequences_are_each_ones_own) {
    enum { N = 11, MAXK = 3 };
    int32_t ids[N_MAIN];
    if (!read_ids(ids, N_MAIN)) return;
    static const char *const files[] = {"models/qwen35-mtp-tiny-q8_0.gguf", "models/qwen35moe-mtp-tiny-f32.gguf"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        eddy_model *m = tseq_load(files[f]);
        eddy_engine *e = m ? tseq_engine(m, (eddy_engine_params){.n_ctx = 64, .n_seq_max = N + 1, .n_batch = 64,
                                                                 .mtp = true})
                           : NULL;
        eddy_engine *other = m ? tseq_engine(m, (eddy_engine_params){.n_ctx = 64, .n_seq_max = 1, .mtp = true}) : NULL;
        float *alone = calloc((size_t)N * MAXK * V, sizeof(float)), *many = calloc((size_t)N * MAXK * V, sizeof(float));
        if (!e || !other || !CHECK(alone && many)) goto next;
        eddy_seq *s[N];
        int32_t t[N], out_a[N][MAXK], out_m[N][MAXK];
        int64_t max[N], k_a[N], k_m[N];
        float p_min[N], *rows[N];
        int32_t *outs[N];
        for (int i = 0; i < N; i++) {
            s[i] = tseq_new(e);
            if (!s[i]) goto next;
            const int len = i == N - 1 ? 0 : 3 + 3 * i; /* the last holds nothing: no drafts */
            if (len) tseq_feed(s[i], ids, len, NULL);
            t[i] = ids[len], max[i] = i % (MAXK + 1), p_min[i] = i % 3 == 2 ? 0.3f : -1.0f;
            rows[i] = many + (size_t)i * MAXK * V, outs[i] = out_m[i];
        }
        eddy_error err;
        for (int i = 0; i < N; i++)
            if (!CHECKF(engine_seq_mtp_draft(s[i], t[i], max[i], p_min[i], out_a[i], &k_a[i],
                                             alone + (size_t)i * MAXK * V, &err) == EDDY_OK, "%s", err.msg))
                goto next;
        if (!CHECKF(engine_mtp_draft_many(e, s, t, max, N, p_min, outs, k_m, rows, &err) == EDDY_OK, "%s", err.msg))
            goto next;
        int64_t drafted = 0;
        for (int i = 0; i < N; i++) {
            drafted += k_a[i];
            CHECKF(k_m[i] == k_a[i], "%s sequence %d: %lld drafts together, %lld alone", files[f], i,
                   (long long)k_m[i], (long long)k_a[i]);
            for (int64_t k = 0; k < k_a[i] && k < k_m[i]; k++) CHECK_EQ(out_m[i][k], out_a[i][k]);
            CHECKF(memcmp(rows[i], alone + (size_t)i * MAXK * V, sizeof(float) * MAXK * V) == 0,
                   "%s sequence %d: logits differ", files[f], i);
            CHECK_EQ(eddy_seq_n_pos(s[i]), i == N - 1 ? 0 : 3 + 3 * i);
        }
        CHECK(drafted >= 8);
        /* through the locked entry, without logits: the same drafts */
        if (CHECKF(engine_seq_mtp_draft_many(s, t, max, N, p_min, outs, k_m, &err) == EDDY_OK, "%s", err.msg))
            for (int i = 0; i < N; i++) CHECK_EQ(k_m[i], k_a[i]);
        /* refused */
        eddy_seq *twice[2] = {s[1], s[1]};
        CHECK_EQ(engine_mtp_draft_many(e, twice, t, max, 2, p_min, outs, k_m, NULL, &err), EDDY_ERR_ARG);
        CHECK(strstr(err.msg, "twice") != NULL);
        eddy_seq *foreign[2] = {s[1], tseq_new(other)};
        if (foreign[1]) {
            CHECK_EQ(engine_mtp_draft_many(e, foreign, t, max, 2, p_min, outs, k_m, NULL, &err), EDDY_ERR_ARG);
            CHECK(strstr(err.msg, "another engine") != NULL);
        }
    next:
        free(alone), free(many);
        eddy_engine_free(other);
        eddy_engine_free(e);
        eddy_model_free(m);
    }
}

/* Refusals: an MTP engine of a model without the layer, MTP drafts on an engine made
 * without it, a draft while a verify awaits accept. */
TEST(mtp_refusals) {
    eddy_model *plain = tseq_load("models/qwen35-tiny-f32.gguf"), *m = tseq_load("models/qwen35-mtp-tiny-q8_0.gguf");
    if (!plain || !m) return eddy_model_free(plain), eddy_model_free(m);
    CHECK(!eddy_model_has_mtp(plain));
    eddy_engine *e = NULL;
    eddy_error err;
    CHECK_EQ(eddy_engine_new(plain, &(eddy_engine_params){.mtp = true, .n_threads = 1}, &e, &err), EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "no multi-token-prediction layer");
    eddy_engine *no_mtp = tseq_engine(m, (eddy_engine_params){.n_ctx = 64, .n_snapshots = 4, .n_verify = 4});
    eddy_seq *s = no_mtp ? tseq_new(no_mtp) : NULL;
    if (s) {
        eddy_sampler *smp;
        eddy_sampler_params sp = eddy_sampler_default_params();
        REQUIRE(eddy_sampler_new(&sp, eddy_model_n_vocab(m), &smp, &err) == EDDY_OK);
        eddy_spec *spec = NULL;
        CHECK_EQ(eddy_spec_new(s, smp, &(eddy_spec_params){.type = EDDY_SPEC_MTP}, &spec, &err), EDDY_ERR_ARG);
        CHECK_CONTAINS(err.msg, "eddy_engine_params.mtp");
        eddy_sampler_free(smp);
    }
    eddy_engine *me = mtp_engine(m);
    eddy_seq *ms = me ? tseq_new(me) : NULL;
    if (ms) {
        const int32_t ids[3] = {1, 2, 3};
        tseq_feed(ms, ids, 2, NULL);
        eddy_seq *owner[2] = {ms, ms};
        REQUIRE(eddy_engine_verify(me, &(eddy_batch){2, ids + 1, owner, NULL}, NULL, &err) == EDDY_OK);
        int32_t d;
        int64_t k;
        CHECK_EQ(engine_seq_mtp_draft(ms, 4, 1, 0, &d, &k, NULL, &err), EDDY_ERR_ARG);
        CHECK_EQ(engine_seq_mtp_draft(ms, -1, 1, 0, &d, &k, NULL, &err), EDDY_ERR_ARG);
    }
    eddy_engine_free(me);
    eddy_engine_free(no_mtp);
    eddy_model_free(plain);
    eddy_model_free(m);
}

/* The layer's state in the prefix cache (a checkpoint inside a prompt keeps h of the
 * position before it) and in a session file: a sequence restored from either drafts
 * the bits of the one that made it. A session of an engine with the layer does not
 * load into one without it. */
TEST(mtp_state_in_the_prefix_cache_and_sessions) {
    eddy_model *m = tseq_load("models/qwen35-mtp-tiny-f32.gguf");
    eddy_engine *e = m ? tseq_engine(m, (eddy_engine_params){.n_ctx = 400, .n_seq_max = 3, .n_snapshots = 4,
                                                             .mtp = true, .cache_bytes = (size_t)64 << 20,
                                                             .cache_every = 256})
                       : NULL;
    eddy_engine *plain = e ? tseq_engine(m, (eddy_engine_params){.n_ctx = 400}) : NULL;
    if (!plain) return eddy_engine_free(e), eddy_model_free(m);
    enum { N = 300 };
    int32_t ids[N], d[N_CHAIN];
    test_rng r = test_rng_new();
    tseq_rand_ids(&r, ids, N, V);
    float *want = malloc(sizeof(float) * V * N_CHAIN), *got = malloc(sizeof(float) * V * N_CHAIN);
    eddy_seq *a = tseq_new(e), *b = tseq_new(e), *c = tseq_new(e), *p = tseq_new(plain);
    eddy_error err;
    if (a && b && c && p && tseq_feed(a, ids, N, NULL) && draft(a, 7, N_CHAIN, d, want)) {
        int64_t n_restored = 0;
        REQUIRE(eddy_seq_restore_prefix(b, ids, N, &n_restored, &err) == EDDY_OK);
        CHECK_EQ(n_restored, 256);
        tseq_feed(b, ids + n_restored, N - n_restored, NULL);
        draft(b, 7, N_CHAIN, d, got);
        CHECKF(!memcmp(got, want, sizeof(float) * V * N_CHAIN), "restored from the cache: the drafts differ");
        void *buf = NULL;
        size_t len = 0;
        REQUIRE(eddy_seq_save_buffer(a, NULL, &buf, &len, &err) == EDDY_OK);
        CHECKF(eddy_seq_load_buffer(c, NULL, buf, len, &err) == EDDY_OK, "%s", err.msg);
        draft(c, 7, N_CHAIN, d, got);
        CHECKF(!memcmp(got, want, sizeof(float) * V * N_CHAIN), "loaded from a session: the drafts differ");
        CHECK_EQ(eddy_seq_load_buffer(p, NULL, buf, len, &err), EDDY_ERR_FORMAT);
        CHECK_CONTAINS(err.msg, "saved with the multi-token-prediction layer");
        eddy_buffer_free(buf);
    }
    free(want), free(got);
    eddy_engine_free(plain);
    eddy_engine_free(e);
    eddy_model_free(m);
}
