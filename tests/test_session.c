/*
 * test_session.c — session files (eddy_seq_save / eddy_seq_load, src/state/session.c):
 *   - save -> load -> continue gives the logits of never stopping, bit for bit, on the
 *     tiny model of every architecture, through a file and through memory, into the
 *     same engine and into another one; the sampler's state goes with it;
 *   - damaged, truncated, other-version, other-model, other-cache-type and too-long
 *     sessions are refused with a message naming the problem, and the sequence they
 *     were loaded into is left as it was;
 *   - a load with no KV block to spare works as one with blocks to spare, and a
 *     refused load leaves the pool's free blocks as they were;
 *   - a process killed at random moments of a save leaves at the path either nothing
 *     or a whole session file, never a torn one.
 */
#include "test.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "eddy.h"
#include "model/engine.h"
#include "test_seq.h"

static const char *const models[] = {
    "models/llama-tiny-f32.gguf",         "models/qwen35-tiny-f32.gguf",    "models/qwen35moe-tiny-q8_0.gguf",
    "models/qwen3next-tiny-f32.gguf",     "models/mamba2-tiny-f32.gguf",    "models/nemotron_h-tiny-f32.gguf",
    "models/granitehybrid-tiny-f32.gguf", "models/qwen35-tiny-q4_k_m.gguf",
};

#define load tseq_load
#define new_seq tseq_new

static eddy_engine *new_engine(const eddy_model *m, int64_t n_ctx, eddy_kv_type kv) {
    return tseq_engine(m, (eddy_engine_params){.n_ctx = n_ctx, .n_seq_max = 3, .type_k = kv, .type_v = kv});
}

/* Feeds ids as one evaluation; the last token's logits into out (may be NULL). */
static bool feed(eddy_seq *s, const int32_t *ids, int64_t n, float *out) {
    eddy_error err;
    return CHECKF(eddy_seq_eval(s, ids, n, out, 0, &err) == EDDY_OK, "eval: %s", err.msg);
}

/* ==== Save, load, continue ==== */

#define P_LEN 21
#define X_LEN 6

/* After P, the sequence is saved; one copy loaded into a fresh sequence of the same
 * engine (from memory), one into another engine (from the file); all three then take
 * X token by token and must agree bit for bit. */
static void check_roundtrip(const char *file) {
    eddy_model *m = load(file);
    eddy_engine *e = m ? new_engine(m, 64, EDDY_KV_DEFAULT) : NULL, *e2 = m ? new_engine(m, 64, EDDY_KV_DEFAULT) : NULL;
    if (!e || !e2) {
        eddy_engine_free(e), eddy_engine_free(e2);
        return eddy_model_free(m);
    }
    const int64_t V = eddy_model_n_vocab(m);
    test_rng r = test_rng_new();
    int32_t p[P_LEN], x[X_LEN];
    for (int i = 0; i < P_LEN; i++) p[i] = (int32_t)test_rng_below(&r, (uint32_t)V);
    for (int i = 0; i < X_LEN; i++) x[i] = (int32_t)test_rng_below(&r, (uint32_t)V);
    float *la = malloc((size_t)V * 4), *lb = malloc((size_t)V * 4), *lc = malloc((size_t)V * 4);
    eddy_seq *a = new_seq(e), *b = new_seq(e), *c = new_seq(e2);
    const char *path = test_tmp_path("roundtrip.session");
    eddy_error err;
    void *buf = NULL;
    size_t len = 0;
    if (a && b && c && feed(a, p, P_LEN, la) && CHECK(eddy_seq_save(a, NULL, path, &err) == EDDY_OK) &&
        CHECK(eddy_seq_save_buffer(a, NULL, &buf, &len, &err) == EDDY_OK)) {
        feed(b, x, 2, NULL); /* b held something else: a load replaces it */
        CHECKF(eddy_seq_load_buffer(b, NULL, buf, len, &err) == EDDY_OK, "%s: %s", file, err.msg);
        CHECKF(eddy_seq_load(c, NULL, path, &err) == EDDY_OK, "%s: %s", file, err.msg);
        CHECK_EQ(eddy_seq_n_pos(b), P_LEN);
        CHECK_EQ(eddy_seq_n_pos(c), P_LEN);
        CHECK(!memcmp(eddy_seq_tokens(c), p, sizeof p));
        const float *lgb = eddy_seq_logits(b), *lgc = eddy_seq_logits(c);
        CHECKF(lgb && lgc && !memcmp(lgb, la, (size_t)V * 4) && !memcmp(lgc, la, (size_t)V * 4),
               "%s: the last logits did not come back", file);
        for (int t = 0; t < X_LEN; t++) {
            feed(a, &x[t], 1, la), feed(b, &x[t], 1, lb), feed(c, &x[t], 1, lc);
            CHECKF(!memcmp(la, lb, (size_t)V * 4) && !memcmp(la, lc, (size_t)V * 4),
                   "%s: step %d after a load differs from never stopping", file, t);
        }
    }
    eddy_buffer_free(buf);
    eddy_engine_free(e), eddy_engine_free(e2);
    eddy_model_free(m);
    free(la), free(lb), free(lc);
}

TEST(session_save_load_continue_is_exact) {
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) check_roundtrip(models[i]);
}

/* A load first reserves KV blocks for the session beside the sequence's own, to ready
 * them while the file is checked; with no block to spare it frees the sequence's and
 * takes them after the checks: both ways the logits of never stopping. A refused file
 * gives every reserved block back. */
TEST(session_load_with_no_spare_blocks_and_refused_loads_keep_the_pool) {
    eddy_model *m = load("models/qwen35-tiny-f32.gguf");
    if (!m) return;
    /* one sequence of 64 positions: the pool has one block, which the sequence holds */
    eddy_engine *e = tseq_engine(m, (eddy_engine_params){.n_ctx = 64, .n_seq_max = 1});
    eddy_engine *e3 = tseq_engine(m, (eddy_engine_params){.n_ctx = 64, .n_seq_max = 3});
    const int64_t V = eddy_model_n_vocab(m);
    int32_t p[P_LEN];
    for (int i = 0; i < P_LEN; i++) p[i] = (int32_t)((i * 29 + 3) % V);
    eddy_seq *a = e ? new_seq(e) : NULL, *b = e3 ? new_seq(e3) : NULL;
    float *want = malloc((size_t)V * 4), *got = malloc((size_t)V * 4);
    void *buf = NULL;
    size_t len = 0;
    eddy_error err;
    if (a && b && feed(a, p, P_LEN, NULL) && CHECK(eddy_seq_save_buffer(a, NULL, &buf, &len, &err) == EDDY_OK)) {
        feed(a, p, 1, want);
        CHECK_EQ(((engine *)e)->sp->n_blocks_free, 0);
        CHECKF(eddy_seq_load_buffer(a, NULL, buf, len, &err) == EDDY_OK, "%s", err.msg);
        CHECK_EQ(eddy_seq_n_pos(a), P_LEN);
        feed(a, p, 1, got);
        CHECK(!memcmp(want, got, (size_t)V * 4));
        CHECK_EQ(((engine *)e)->sp->n_blocks_free, 0);
        /* refused loads (a damaged byte in a section; too short) leave the free blocks as they were */
        const int64_t free_before = ((engine *)e3)->sp->n_blocks_free;
        uint8_t *bad = malloc(len);
        memcpy(bad, buf, len);
        bad[len - 8] ^= 1;
        CHECK(eddy_seq_load_buffer(b, NULL, bad, len, &err) != EDDY_OK);
        CHECK(eddy_seq_load_buffer(b, NULL, bad, len / 2, &err) != EDDY_OK);
        CHECK_EQ(((engine *)e3)->sp->n_blocks_free, free_before);
        CHECKF(eddy_seq_load_buffer(b, NULL, buf, len, &err) == EDDY_OK, "%s", err.msg);
        CHECK_EQ(((engine *)e3)->sp->n_blocks_free, free_before - 1);
        free(bad);
    }
    eddy_buffer_free(buf);
    free(want), free(got);
    eddy_engine_free(e), eddy_engine_free(e3);
    eddy_model_free(m);
}

/* Little-endian fields of a saved file (docs/session-format.md). */
static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* The file holds keys as rows in position order (docs/session-format.md) though host
 * pools keep them in transposed tiles: each key section's row r, element e is the
 * pool's element as the attention kernels find it (state_k_elem), for both cache types
 * and a partial last tile. A round trip alone would miss a permutation that saving and
 * loading undo together. */
TEST(session_keys_are_rows_in_position_order) {
    const eddy_kv_type kinds[2] = {EDDY_KV_F32, EDDY_KV_F16};
    eddy_model *m = load("models/qwen35-tiny-f32.gguf");
    if (!m) return;
    for (int k = 0; k < 2; k++) {
        eddy_engine *e = new_engine(m, 64, kinds[k]);
        eddy_seq *a = e ? new_seq(e) : NULL;
        const int64_t V = eddy_model_n_vocab(m);
        test_rng r = test_rng_new();
        int32_t p[P_LEN];
        for (int i = 0; i < P_LEN; i++) p[i] = (int32_t)test_rng_below(&r, (uint32_t)V);
        uint8_t *buf = NULL;
        size_t len = 0;
        eddy_error err;
        if (a && feed(a, p, P_LEN, NULL) && CHECK(eddy_seq_save_buffer(a, NULL, (void **)&buf, &len, &err) == EDDY_OK)) {
            const state_pool *sp = ((engine *)e)->sp;
            const size_t el = kinds[k] == EDDY_KV_F32 ? 4 : 2;
            const uint32_t n_sec = rd32(buf + 60);
            int n_keys = 0;
            for (uint32_t i = 0; i < n_sec; i++) {
                const uint8_t *ent = buf + 128 + 32 * i;
                if (rd32(ent) != 6) continue; /* keys */
                const int64_t il = rd32(ent + 4), kv_k = sp->shape[il].kv_k;
                const uint64_t off = rd64(ent + 8);
                REQUIRE(rd64(ent + 16) == (uint64_t)(P_LEN * kv_k) * el && off + rd64(ent + 16) <= len);
                n_keys++;
                int bad = 0;
                for (int64_t row = 0; row < P_LEN; row++) {
                    const int64_t blk = a->st.blocks[row / STATE_KV_BLOCK], in = row % STATE_KV_BLOCK;
                    for (int64_t x = 0; x < kv_k; x++) {
                        const uint8_t *want = (const uint8_t *)sp->k[il] +
                                              (size_t)(blk * state_block_elems_k(sp, il) + state_k_elem(sp, il, in, x)) * el;
                        bad += memcmp(buf + off + (size_t)(row * kv_k + x) * el, want, el) != 0;
                    }
                }
                CHECKF(bad == 0, "cache %d, layer %lld: %d key elements of the file are not the pool's row order", k,
                       (long long)il, bad);
            }
            CHECK(n_keys > 0);
        }
        eddy_buffer_free(buf);
        eddy_engine_free(e);
    }
    eddy_model_free(m);
}

/* The sampler's generator and history come back: the same draws follow. */
TEST(session_keeps_the_sampler) {
    eddy_model *m = load("models/qwen35-tiny-f32.gguf");
    eddy_engine *e = m ? new_engine(m, 64, EDDY_KV_DEFAULT) : NULL;
    if (!e) return eddy_model_free(m);
    const int64_t V = eddy_model_n_vocab(m);
    eddy_sampler_params sp = eddy_sampler_default_params();
    sp.seed = 99, sp.repeat_penalty = 1.3f, sp.repeat_last_n = 8;
    eddy_sampler *s1, *s2;
    REQUIRE(eddy_sampler_new(&sp, V, &s1, NULL) == EDDY_OK);
    sp.seed = 1; /* another seed: the loaded state must override it */
    REQUIRE(eddy_sampler_new(&sp, V, &s2, NULL) == EDDY_OK);
    const int32_t p[12] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
    eddy_seq *a = new_seq(e), *b = new_seq(e);
    float *logits = malloc((size_t)V * 4);
    eddy_error err;
    void *buf = NULL;
    size_t len;
    if (a && b && feed(a, p, 12, logits)) {
        for (int i = 0; i < 12; i++) eddy_sampler_accept(s1, p[i]);
        for (int i = 0; i < 3; i++) eddy_sampler_accept(s1, eddy_sampler_sample(s1, logits));
        REQUIRE(eddy_seq_save_buffer(a, s1, &buf, &len, &err) == EDDY_OK);
        REQUIRE(eddy_seq_load_buffer(b, s2, buf, len, &err) == EDDY_OK);
        for (int i = 0; i < 20; i++) {
            const int32_t t1 = eddy_sampler_sample(s1, logits), t2 = eddy_sampler_sample(s2, logits);
            CHECKF(t1 == t2, "draw %d: %d vs %d", i, t1, t2);
            eddy_sampler_accept(s1, t1), eddy_sampler_accept(s2, t2);
        }
    }
    eddy_buffer_free(buf);
    eddy_sampler_free(s1), eddy_sampler_free(s2);
    eddy_engine_free(e);
    eddy_model_free(m);
    free(logits);
}

/* ==== Refused files ==== */

/* Loading bytes into s must fail with want in the message and leave s as it was. */
static void expect_refused(eddy_seq *s, const void *bytes, size_t n, const char *want, const char *what) {
    eddy_error err;
    const int64_t before = eddy_seq_n_pos(s);
    const eddy_status st = eddy_seq_load_buffer(s, NULL, bytes, n, &err);
    if (CHECKF(st != EDDY_OK, "%s: accepted", what)) CHECKF(strstr(err.msg, want) != NULL, "%s: \"%s\" lacks \"%s\"", what, err.msg, want);
    CHECKF(eddy_seq_n_pos(s) == before, "%s: the sequence changed", what);
}

TEST(session_refuses_bad_files) {
    eddy_model *m = load("models/qwen35-tiny-f32.gguf"), *other = load("models/qwen3next-tiny-f32.gguf");
    eddy_engine *e = m ? new_engine(m, 64, EDDY_KV_DEFAULT) : NULL, *eo = other ? new_engine(other, 64, EDDY_KV_DEFAULT) : NULL;
    eddy_engine *e32 = m ? new_engine(m, 64, EDDY_KV_F32) : NULL, *small = m ? new_engine(m, 8, EDDY_KV_DEFAULT) : NULL;
    if (!e || !eo || !e32 || !small) goto done;
    const int32_t p[P_LEN] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25};
    eddy_seq *a = new_seq(e), *b = new_seq(e);
    eddy_error err;
    uint8_t *buf = NULL;
    size_t len;
    if (!a || !b || !feed(a, p, P_LEN, NULL) || !feed(b, p, 3, NULL) ||
        !CHECK(eddy_seq_save_buffer(a, NULL, (void **)&buf, &len, &err) == EDDY_OK))
        goto done;
    uint8_t *bad = malloc(len);
    /* another model, other cache types, a context too small */
    eddy_seq *so = new_seq(eo), *s32 = new_seq(e32), *ss = new_seq(small);
    if (so) expect_refused(so, buf, len, "saved with another model", "other model");
    if (s32) expect_refused(s32, buf, len, "KV cache is f16/f16, this engine's f32/f32", "other cache type");
    if (ss) expect_refused(ss, buf, len, "holds 21 positions, the context 8", "context too small");
    /* not a session, truncated, extended, another version */
    expect_refused(b, "hello", 5, "not a session file", "5 bytes");
    memcpy(bad, buf, len);
    bad[0] = 'X';
    expect_refused(b, bad, len, "bad magic", "magic");
    for (size_t cut = 1; cut < len; cut += len / 13 + 1) expect_refused(b, buf, len - cut, "", "truncated");
    expect_refused(b, buf, len - 1, "truncated or extended", "one byte short");
    memcpy(bad, buf, len);
    bad[8] = 2; /* another version: said before the checksum (another version's header may differ) */
    expect_refused(b, bad, len, "session format version 2, this eddy reads version 1", "version");
    /* every byte region flipped in turn: header, table, each section */
    const uint32_t n_sec = rd32(buf + 60);
    memcpy(bad, buf, len);
    bad[100] ^= 1;
    expect_refused(b, bad, len, "header is damaged", "header");
    memcpy(bad, buf, len);
    bad[128 + 5] ^= 1;
    expect_refused(b, bad, len, "section table is damaged", "table");
    for (uint32_t i = 0; i < n_sec; i++) {
        const uint8_t *entry = buf + 128 + 32 * i;
        const uint64_t off = rd64(entry + 8), bytes = rd64(entry + 16);
        if (bytes == 0) continue;
        memcpy(bad, buf, len);
        bad[off + bytes / 2] ^= 0x40;
        char what[64];
        snprintf(what, sizeof what, "section %u", i);
        expect_refused(b, bad, len, "is damaged (checksum mismatch)", what);
    }
    /* b was never changed: it still continues as a 3-token sequence does */
    CHECK_EQ(eddy_seq_n_pos(b), 3);
    free(bad);
    eddy_buffer_free(buf);
    const char *missing = test_tmp_path("no-such.session");
    CHECK_EQ(eddy_seq_load(b, NULL, missing, &err), EDDY_ERR_IO);
    CHECK_CONTAINS(err.msg, "cannot open the session");
done:
    eddy_engine_free(e), eddy_engine_free(eo), eddy_engine_free(e32), eddy_engine_free(small);
    eddy_model_free(m), eddy_model_free(other);
}

/* ==== Atomic saves ==== */

/* A child saves two states of different lengths in turn to one path, forever; it is
 * killed (SIGKILL) after a random delay, 40 times. Each time the file at the path is
 * absent (killed before the first rename) or a whole session of one of the two
 * states. */
TEST(session_save_survives_kill) {
    eddy_model *m = load("models/qwen35-tiny-f32.gguf");
    eddy_engine *e = m ? new_engine(m, 256, EDDY_KV_F32) : NULL;
    if (!e) return eddy_model_free(m);
    int32_t p[200];
    for (int i = 0; i < 200; i++) p[i] = (int32_t)(i * 7 % 500);
    eddy_seq *a = new_seq(e), *b = new_seq(e), *check = new_seq(e);
    REQUIRE(a && b && check && feed(a, p, 200, NULL) && feed(b, p, 150, NULL));
    const char *path0 = test_tmp_path("killed.session");
    char path[4096];
    snprintf(path, sizeof path, "%s", path0);
    test_rng r = test_rng_new();
    int whole = 0;
    for (int round = 0; round < 40; round++) {
        unlink(path);
        const pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            for (;;) {
                eddy_seq_save(a, NULL, path, NULL);
                eddy_seq_save(b, NULL, path, NULL);
            }
        }
        const struct timespec ts = {0, (long)test_rng_below(&r, 20000000)}; /* 0-20 ms */
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        eddy_error err;
        if (access(path, F_OK) != 0) continue;
        const bool loaded = eddy_seq_load(check, NULL, path, &err) == EDDY_OK;
        CHECKF(loaded, "round %d: a killed save left a bad file: %s", round, err.msg);
        if (loaded) {
            CHECKF(eddy_seq_n_pos(check) == 200 || eddy_seq_n_pos(check) == 150, "round %d: %lld positions", round,
                   (long long)eddy_seq_n_pos(check));
            whole++;
        }
    }
    CHECKF(whole > 0, "no round got as far as a whole file");
    eddy_engine_free(e);
    eddy_model_free(m);
}

/* The caller's bytes come back as they were saved; a plain load ignores them, and a
 * file without them gives none. */
TEST(session_keeps_app_bytes) {
    eddy_model *m = load("models/llama-tiny-f32.gguf");
    eddy_engine *e = m ? new_engine(m, 64, EDDY_KV_DEFAULT) : NULL;
    if (!e) return eddy_model_free(m);
    eddy_seq *a = new_seq(e), *b = new_seq(e);
    const int32_t p[5] = {3, 1, 4, 1, 5};
    const char app[] = "user\0hello\0assistant\0hi there\0";
    const char *path = test_tmp_path("app.session"), *plain = test_tmp_path("plain.session");
    eddy_error err;
    void *got = NULL;
    size_t len = 0;
    if (a && b && feed(a, p, 5, NULL) && CHECK(eddy_seq_save_app(a, NULL, app, sizeof app, path, &err) == EDDY_OK)) {
        CHECK(eddy_seq_load_app(b, NULL, path, &got, &len, &err) == EDDY_OK);
        CHECK(got && len == sizeof app && !memcmp(got, app, sizeof app));
        eddy_buffer_free(got);
        CHECK(eddy_seq_load(b, NULL, path, &err) == EDDY_OK && eddy_seq_n_pos(b) == 5);
        CHECK(eddy_seq_save(a, NULL, plain, &err) == EDDY_OK);
        CHECK(eddy_seq_load_app(b, NULL, plain, &got, &len, &err) == EDDY_OK && got == NULL && len == 0);
    }
    eddy_engine_free(e);
    eddy_model_free(m);
}
