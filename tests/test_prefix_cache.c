/*
 * test_prefix_cache.c — the engine's prefix cache (src/model/engine_cache.c) and the
 * pieces a sequence's tokens go through the recurrent layers in:
 *   - logits with the cache on and off are the same bits; a prompt that shares a
 *     prefix with an earlier one restores the deepest checkpoint and, evaluating only
 *     the rest, gets the logits of evaluating it all, on every architecture;
 *   - two sequences restored from one checkpoint share its KV blocks;
 *   - a small budget evicts the least recently used states and stays correct;
 *   - long prompts of several sequences in one batch, cut into steps, give each the
 *     logits it gets alone (steps only cut a sequence where a piece ends).
 */
#include "test.h"

#include <stdlib.h>

#include "eddy.h"
#include "model/engine.h"
#include "test_seq.h"

static const char *const models[] = {
    "models/llama-tiny-f32.gguf", "models/qwen35-tiny-f32.gguf", "models/qwen3next-tiny-f32.gguf",
    "models/mamba2-tiny-f32.gguf", "models/nemotron_h-tiny-f32.gguf", "models/granitehybrid-tiny-f32.gguf",
};

static eddy_engine *new_engine(const eddy_model *m, size_t cache_bytes, int n_seq) {
    return tseq_engine(m, (eddy_engine_params){.n_ctx = 1024, .n_seq_max = n_seq, .cache_bytes = cache_bytes,
                                               .cache_every = 256});
}

#define new_seq tseq_new
#define feed tseq_feed

static bool same(const float *a, const float *b, int64_t n) { return !memcmp(a, b, (size_t)n * sizeof(float)); }

#define P_LEN 700
#define SHARED 600
#define Q_LEN 60

static void check_cache(const char *file) {
    eddy_model *m = NULL;
    eddy_error err;
    if (!CHECKF(eddy_model_load(test_data_path(file), &m, &err) == EDDY_OK, "%s", err.msg)) return;
    const int64_t V = eddy_model_n_vocab(m);
    eddy_engine *off = new_engine(m, 0, 2), *on = new_engine(m, (size_t)64 << 20, 3);
    test_rng r = test_rng_new();
    int32_t p[P_LEN], q[SHARED + Q_LEN];
    for (int i = 0; i < P_LEN; i++) p[i] = (int32_t)test_rng_below(&r, (uint32_t)V);
    memcpy(q, p, SHARED * sizeof *q);
    for (int i = SHARED; i < SHARED + Q_LEN; i++) q[i] = (int32_t)test_rng_below(&r, (uint32_t)V);
    float *l_off = malloc((size_t)(P_LEN * V) * 4), *l_on = malloc((size_t)(P_LEN * V) * 4);
    eddy_seq *a = off ? new_seq(off) : NULL, *b = on ? new_seq(on) : NULL;
    if (a && b && feed(a, p, P_LEN, l_off) && feed(b, p, P_LEN, l_on)) {
        CHECKF(same(l_off, l_on, P_LEN * V), "%s: logits with the cache differ from without", file);
        eddy_cache_stats st;
        eddy_engine_cache_stats(on, &st);
        CHECKF(st.entries == 2 && st.bytes <= st.budget, "%s: %lld entries after a 700-token prompt (256, 512)", file,
               (long long)st.entries);
        /* q shares 600 tokens with p: the checkpoint at 512 comes back, 148 tokens are evaluated */
        eddy_seq *c = new_seq(on), *d = new_seq(on);
        int64_t held = -1;
        if (c && d && CHECK(eddy_seq_restore_prefix(c, q, SHARED + Q_LEN, &held, &err) == EDDY_OK)) {
            CHECKF(held == 512, "%s: restored %lld positions, want 512", file, (long long)held);
            const int64_t rest = SHARED + Q_LEN - held;
            if (feed(c, q + held, rest, l_on)) {
                eddy_seq_clear(a);
                feed(a, q, SHARED + Q_LEN, l_off);
                CHECKF(same(l_off + held * V, l_on, rest * V), "%s: restored + rest differs from evaluating all", file);
            }
            /* a second restore of the same prefix shares the checkpoint's blocks */
            CHECK(eddy_seq_restore_prefix(d, q, SHARED, &held, &err) == EDDY_OK && held == 512);
            if (d->st.blocks[0] >= 0) CHECK(d->st.blocks[0] == c->st.blocks[0] || c->st.blocks[0] < 0);
            eddy_engine_cache_stats(on, &st);
            CHECK(st.hits == 2 && st.tokens_restored == 1024 && st.lookups == 2);
        }
    }
    eddy_engine_free(off), eddy_engine_free(on);
    eddy_model_free(m);
    free(l_off), free(l_on);
}

TEST(prefix_cache_on_off_identical_and_restores) {
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) check_cache(models[i]);
}

/* eddy_seq_cache_put at a turn's end (37 tokens, no multiple of 256): the next
 * prompt that begins with them restores 37 and evaluates the rest, as a run of it
 * all. A sequence that already holds a deeper prefix keeps it. */
TEST(prefix_cache_put_and_own_prefix) {
    eddy_model *m = NULL;
    REQUIRE(eddy_model_load(test_data_path("models/qwen35-tiny-f32.gguf"), &m, NULL) == EDDY_OK);
    const int64_t V = eddy_model_n_vocab(m);
    eddy_engine *e = new_engine(m, (size_t)16 << 20, 3);
    int32_t t[50];
    for (int i = 0; i < 50; i++) t[i] = (int32_t)((i * 37 + 11) % V);
    float *l1 = malloc((size_t)(50 * V) * 4), *l2 = malloc((size_t)(50 * V) * 4);
    eddy_seq *a = e ? new_seq(e) : NULL, *b = e ? new_seq(e) : NULL, *ref = e ? new_seq(e) : NULL;
    eddy_error err;
    int64_t held = -1;
    if (a && b && ref && feed(a, t, 37, NULL) && CHECK(eddy_seq_cache_put(a, &err) == EDDY_OK)) {
        feed(a, t + 37, 3, NULL); /* a moves on; the cached state stays as it was */
        CHECK(eddy_seq_restore_prefix(b, t, 50, &held, &err) == EDDY_OK);
        CHECK_EQ(held, 37);
        feed(b, t + 37, 13, l1);
        feed(ref, t, 37, NULL);
        feed(ref, t + 37, 13, l2);
        CHECK(same(l1, l2, 13 * V));
        /* a holds 40 of them: deeper than the cached 37, so it keeps its own */
        CHECK(eddy_seq_restore_prefix(a, t, 50, &held, &err) == EDDY_OK);
        CHECK_EQ(held, 40);
        CHECK_EQ(eddy_seq_n_pos(a), 40);
        /* a prompt that does not begin with what b holds, nor with anything cached: b is cleared */
        const int32_t other[3] = {1, 2, 3};
        CHECK(eddy_seq_restore_prefix(b, other, 3, &held, &err) == EDDY_OK);
        CHECK_EQ(held, 0);
        CHECK_EQ(eddy_seq_n_pos(b), 0);
    }
    eddy_engine_free(e);
    eddy_model_free(m);
    free(l1), free(l2);
}

/* A budget of about two states: five prompts leave at most two, the most recent;
 * restoring still gives the logits of evaluating everything. */
TEST(prefix_cache_evicts_under_budget) {
    eddy_model *m = NULL;
    REQUIRE(eddy_model_load(test_data_path("models/qwen35-tiny-f32.gguf"), &m, NULL) == EDDY_OK);
    const int64_t V = eddy_model_n_vocab(m);
    eddy_engine *probe = new_engine(m, 0, 1);
    if (!probe) return eddy_model_free(m);
    const size_t one = eddy_engine_state_bytes(probe) + 256 * eddy_engine_kv_bytes_per_pos(probe);
    eddy_engine_free(probe);
    eddy_engine *e = new_engine(m, 2 * one + one / 2, 2), *plain = new_engine(m, 0, 1);
    int32_t t[5][300];
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < 300; i++) t[k][i] = (int32_t)((k * 131 + i * 7 + 3) % V);
    eddy_seq *s = e ? new_seq(e) : NULL, *u = e ? new_seq(e) : NULL, *ref = plain ? new_seq(plain) : NULL;
    float *l1 = malloc((size_t)(44 * V) * 4), *l2 = malloc((size_t)(44 * V) * 4);
    eddy_error err;
    if (s && u && ref) {
        for (int k = 0; k < 5; k++) { /* each leaves a checkpoint at 256 */
            eddy_seq_clear(s);
            feed(s, t[k], 300, NULL);
        }
        eddy_cache_stats st;
        eddy_engine_cache_stats(e, &st);
        CHECKF(st.entries == 2 && st.bytes <= st.budget, "%lld entries, %zu of %zu bytes", (long long)st.entries,
               st.bytes, st.budget);
        int64_t held;
        const int order[3] = {4, 3, 0}; /* the two kept, then an evicted one */
        for (int j = 0; j < 3; j++) {
            const int k = order[j];
            CHECK(eddy_seq_restore_prefix(u, t[k], 300, &held, &err) == EDDY_OK);
            CHECKF(held == (k >= 3 ? 256 : 0), "prompt %d: restored %lld", k, (long long)held);
            feed(u, t[k] + held, 300 - held, NULL);
            CHECK(eddy_seq_n_pos(u) == 300);
        }
        /* t[0] came back in, pushing out the least recently used (t[4]); t[3] stays */
        CHECK(eddy_seq_restore_prefix(u, t[3], 300, &held, &err) == EDDY_OK && held == 256);
        CHECK(eddy_seq_restore_prefix(u, t[0], 300, &held, &err) == EDDY_OK && held == 256);
        CHECK(eddy_seq_restore_prefix(u, t[4], 300, &held, &err) == EDDY_OK && held == 0);
        feed(u, t[4], 300, NULL); /* and t[4] back in, evicting t[3] */
        /* the last one's continuation, restored or not, is the same */
        CHECK(eddy_seq_restore_prefix(u, t[4], 300, &held, &err) == EDDY_OK && held == 256);
        feed(u, t[4] + 256, 44, l1);
        eddy_seq_clear(ref);
        feed(ref, t[4], 256, NULL);
        feed(ref, t[4] + 256, 44, l2);
        CHECK(same(l1, l2, 44 * V));
    }
    eddy_engine_free(e), eddy_engine_free(plain);
    eddy_model_free(m);
    free(l1), free(l2);
}

/* Prompts of 300 and 700 tokens in one batch (a 512-row step cuts it): each gets,
 * bit for bit, what it gets alone, on the hybrid and Mamba-2 models. */
TEST(engine_long_prompts_in_one_batch_match_alone) {
    const char *files[] = {"models/qwen35-tiny-f32.gguf", "models/mamba2-tiny-f32.gguf"};
    for (int f = 0; f < 2; f++) {
        eddy_model *m = NULL;
        if (!CHECK(eddy_model_load(test_data_path(files[f]), &m, NULL) == EDDY_OK)) continue;
        const int64_t V = eddy_model_n_vocab(m), n = 1000;
        eddy_engine *e = new_engine(m, 0, 2);
        int32_t *ids = malloc((size_t)n * sizeof *ids);
        for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)((i * 13 + 5) % V);
        eddy_seq *a = e ? new_seq(e) : NULL, *b = e ? new_seq(e) : NULL;
        eddy_seq **owner = malloc((size_t)n * sizeof *owner);
        float *lb = malloc((size_t)(n * V) * 4), *la = malloc((size_t)(700 * V) * 4);
        int8_t *want = malloc((size_t)n);
        memset(want, 1, (size_t)n);
        for (int64_t i = 0; i < n; i++) owner[i] = i < 300 ? a : b;
        eddy_batch batch = {n, ids, owner, want};
        eddy_error err;
        if (a && b && CHECKF(eddy_engine_decode(e, &batch, lb, &err) == EDDY_OK, "%s", err.msg)) {
            eddy_seq_clear(a);
            feed(a, ids, 300, la);
            CHECKF(same(la, lb, 300 * V), "%s: the 300-token prompt in a batch differs from alone", files[f]);
            eddy_seq_clear(a);
            feed(a, ids + 300, 700, la);
            CHECKF(same(la, lb + 300 * V, 700 * V), "%s: the 700-token prompt in a batch differs from alone", files[f]);
        }
        eddy_engine_free(e);
        eddy_model_free(m);
        free(ids), free(owner), free(lb), free(la), free(want);
    }
}
