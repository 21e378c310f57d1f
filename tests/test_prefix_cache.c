/*
 * test_prefix_cache.c — the engine's prefix cache (src/model/engine_cache.c) and the
 * pieces a sequence's tokens go through the recurrent layers in:
 *   - logits with the cache on and off are the same bits; a prompt that shares a
 *     prefix with an earlier one restores the deepest checkpoint and, evaluating only
 *     the rest, gets the logits of evaluating it all, on every architecture;
 *   - two sequences restored from one checkpoint share its KV blocks;
 *   - a small budget evicts the least recently used states and stays correct; the
 *     budget counts the KV blocks the entries share once; so does the pool's share of
 *     blocks for the entries;
 *   - long prompts of several sequences in one batch, cut into steps, give each the
 *     logits it gets alone (steps only cut a sequence where a piece ends);
 *   - the disk tier: states evicted from memory, and those cached when the engine is
 *     freed, come back from their files — in the same engine and in a new one —, giving
 *     the logits of evaluating everything; damaged files and other models' files are
 *     passed over (a damaged one removed); the disk budget removes the oldest files.
 */
#include "test.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "eddy.h"
#include "model/engine.h"
#include "state/state.h"
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

/* The entries of one sequence share its KV blocks, and the budget counts each block
 * once: checkpoints at 256 and 512 and the state at 600 hold three recurrent slots and
 * the 600 positions' three blocks (counted as one entry each, they would be six); the
 * sequence leaving changes nothing. */
TEST(prefix_cache_counts_shared_blocks_once) {
    eddy_model *m = NULL;
    REQUIRE(eddy_model_load(test_data_path("models/qwen35-tiny-f32.gguf"), &m, NULL) == EDDY_OK);
    const int64_t V = eddy_model_n_vocab(m);
    eddy_engine *e = new_engine(m, (size_t)64 << 20, 1);
    eddy_seq *s = e ? new_seq(e) : NULL;
    int32_t t[600];
    for (int i = 0; i < 600; i++) t[i] = (int32_t)((i * 37 + 5) % V);
    if (s && feed(s, t, 600, NULL)) {
        const size_t slot = eddy_engine_state_bytes(e), block = STATE_KV_BLOCK * eddy_engine_kv_bytes_per_pos(e);
        CHECK(eddy_seq_cache_put(s, NULL) == EDDY_OK);
        eddy_cache_stats st;
        eddy_engine_cache_stats(e, &st);
        const size_t want = 3 * slot + 3 * block; /* blocks of [0, 256), [256, 512), [512, 600) */
        CHECKF(st.entries == 3 && st.bytes == want, "%lld entries, %zu bytes, want %zu", (long long)st.entries,
               st.bytes, want);
        eddy_seq_free(s);
        s = NULL;
        eddy_engine_cache_stats(e, &st);
        CHECKF(st.entries == 3 && st.bytes == want, "after the sequence left: %zu bytes", st.bytes);
    }
    eddy_seq_free(s);
    eddy_engine_free(e);
    eddy_model_free(m);
}

/* Five prompts of 300 tokens, each of which leaves a checkpoint at 256. */
static void five_prompts(int32_t t[5][300], int64_t V) {
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < 300; i++) t[k][i] = (int32_t)((k * 131 + i * 7 + 3) % V);
}

/* u restores t's checkpoint at 256 and evaluates the next 44 tokens: the logits of ref
 * (another engine's sequence) evaluating all 300. */
static void check_continuation(eddy_seq *u, eddy_seq *ref, const int32_t *t, int64_t V) {
    float *l1 = malloc((size_t)(44 * V) * 4), *l2 = malloc((size_t)(44 * V) * 4);
    int64_t held = -1;
    if (l1 && l2 && CHECK(eddy_seq_restore_prefix(u, t, 300, &held, NULL) == EDDY_OK && held == 256)) {
        feed(u, t + 256, 44, l1);
        eddy_seq_clear(ref);
        feed(ref, t, 256, NULL);
        feed(ref, t + 256, 44, l2);
        CHECK(same(l1, l2, 44 * V));
    }
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
    five_prompts(t, V);
    eddy_seq *s = e ? new_seq(e) : NULL, *u = e ? new_seq(e) : NULL, *ref = plain ? new_seq(plain) : NULL;
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
        check_continuation(u, ref, t[4], V); /* the last one's continuation, restored or not, is the same */
    }
    eddy_engine_free(e), eddy_engine_free(plain);
    eddy_model_free(m);
}

/* The entries' KV blocks are bounded by the pool's share (cache_blocks_max), which on a
 * GPU is the budget less the entries' slots (engine_cache.c), not by the budget alone:
 * with a share of 3 blocks and a budget far larger, five prompts that each leave a
 * checkpoint of one block leave three, the most recent, and the count of blocks held
 * never passes the share; what is kept restores to the logits of evaluating it all. */
TEST(prefix_cache_evicts_for_its_blocks) {
    eddy_model *m = NULL;
    REQUIRE(eddy_model_load(test_data_path("models/qwen35-tiny-f32.gguf"), &m, NULL) == EDDY_OK);
    const int64_t V = eddy_model_n_vocab(m);
    eddy_engine *e = new_engine(m, (size_t)64 << 20, 2), *plain = new_engine(m, 0, 1);
    int32_t t[5][300];
    five_prompts(t, V);
    eddy_seq *s = e ? new_seq(e) : NULL, *u = e ? new_seq(e) : NULL, *ref = plain ? new_seq(plain) : NULL;
    eddy_error err;
    if (s && u && ref) {
        e->cache_blocks_max = 3;
        for (int k = 0; k < 5; k++) { /* each leaves a checkpoint at 256: one block */
            eddy_seq_clear(s);
            feed(s, t[k], 300, NULL);
            CHECKF(e->cache_blocks_held <= 3, "prompt %d: %lld blocks held", k, (long long)e->cache_blocks_held);
        }
        eddy_cache_stats st;
        eddy_engine_cache_stats(e, &st);
        CHECKF(st.entries == 3 && e->cache_blocks_held == 3, "%lld entries, %lld blocks", (long long)st.entries,
               (long long)e->cache_blocks_held);
        int64_t held;
        for (int k = 0; k < 5; k++) {
            CHECK(eddy_seq_restore_prefix(u, t[k], 300, &held, &err) == EDDY_OK);
            CHECKF(held == (k >= 2 ? 256 : 0), "prompt %d: restored %lld", k, (long long)held);
        }
        check_continuation(u, ref, t[2], V);
    }
    eddy_engine_free(e), eddy_engine_free(plain);
    eddy_model_free(m);
}

/* ==== The disk tier ==== */

/* Files named *.eddy in dir, and their bytes. */
static int64_t eddy_files(const char *dir, size_t *bytes) {
    DIR *d = opendir(dir);
    int64_t n = 0;
    *bytes = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        const size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 5, ".eddy") != 0) continue;
        char path[4400];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (stat(path, &sb) == 0) *bytes += (size_t)sb.st_size, n++;
    }
    if (d) closedir(d);
    return n;
}

static eddy_engine *disk_engine(const eddy_model *m, size_t ram, const char *dir, size_t dir_bytes) {
    return tseq_engine(m, (eddy_engine_params){.n_ctx = 1024, .n_seq_max = 2, .cache_bytes = ram,
                                               .cache_every = 256, .cache_dir = dir, .cache_dir_bytes = dir_bytes});
}

static void check_disk_tier(const char *file) {
    eddy_model *m = tseq_load(file);
    if (!m) return;
    const int64_t V = eddy_model_n_vocab(m);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", test_tmp_path("cache-dir"));
    char dir_model[4400];
    snprintf(dir_model, sizeof dir_model, "%s/%s", dir, strrchr(file, '/') + 1);
    eddy_engine *probe = new_engine(m, 0, 1);
    if (!probe) return eddy_model_free(m);
    const size_t one = eddy_engine_state_bytes(probe) + 256 * eddy_engine_kv_bytes_per_pos(probe);
    eddy_engine_free(probe);
    mkdir(dir, 0777);
    /* memory for one state: each new checkpoint pushes the last one to disk */
    eddy_engine *e = disk_engine(m, one + one / 2, dir_model, 0), *plain = new_engine(m, 0, 1);
    int32_t t[3][300];
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 300; i++) t[k][i] = (int32_t)((k * 131 + i * 7 + 3) % V);
    float *l1 = malloc((size_t)(44 * V) * 4), *l2 = malloc((size_t)(44 * V) * 4);
    eddy_seq *s = e ? new_seq(e) : NULL, *ref = plain ? new_seq(plain) : NULL;
    eddy_error err;
    int64_t held;
    size_t bytes;
    if (s && ref) {
        for (int k = 0; k < 3; k++) { /* each leaves a checkpoint at 256 */
            eddy_seq_clear(s);
            feed(s, t[k], 300, NULL);
        }
        CHECKF(eddy_files(dir_model, &bytes) == 2, "%s: %lld files after two evictions", file,
               (long long)eddy_files(dir_model, &bytes));
        /* t[0] was evicted: it comes back from its file, and goes on as a run of it all */
        CHECK(eddy_seq_restore_prefix(s, t[0], 300, &held, &err) == EDDY_OK);
        CHECKF(held == 256, "%s: restored %lld from disk, want 256", file, (long long)held);
        feed(s, t[0] + held, 44, l1);
        feed(ref, t[0], 256, NULL);
        feed(ref, t[0] + 256, 44, l2);
        CHECKF(same(l1, l2, 44 * V), "%s: restored from disk + rest differs from evaluating all", file);
        eddy_cache_stats st;
        eddy_engine_cache_stats(e, &st);
        CHECK(st.disk_hits == 1 && st.disk_files == 2);
    }
    eddy_engine_free(e); /* t[2]'s checkpoint, in memory, goes to disk too */
    CHECKF(eddy_files(dir_model, &bytes) == 3, "%s: %lld files after the engine was freed", file,
           (long long)eddy_files(dir_model, &bytes));
    /* a new engine (another process, as far as the files go) restores each of them */
    e = disk_engine(m, one + one / 2, dir_model, 0);
    s = e ? new_seq(e) : NULL;
    for (int k = 0; s && k < 3; k++) {
        CHECK(eddy_seq_restore_prefix(s, t[k], 300, &held, &err) == EDDY_OK);
        CHECKF(held == 256, "%s: prompt %d restored %lld in a new engine", file, k, (long long)held);
    }
    if (s) {
        feed(s, t[2] + 256, 44, l1);
        eddy_seq_clear(ref);
        feed(ref, t[2], 256, NULL);
        feed(ref, t[2] + 256, 44, l2);
        CHECKF(same(l1, l2, 44 * V), "%s: a new engine's restore + rest differs from evaluating all", file);
    }
    eddy_engine_free(e);
    eddy_engine_free(plain);
    eddy_model_free(m);
    free(l1), free(l2);
}

TEST(prefix_cache_disk_tier_restores_across_engines) {
    const char *const files[] = {"models/qwen35-tiny-f32.gguf", "models/mamba2-tiny-f32.gguf",
                                 "models/llama-tiny-f32.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) check_disk_tier(files[i]);
}

/* Damaged files are passed over and removed; another model's files are left alone; the
 * budget keeps the newest files. */
TEST(prefix_cache_disk_tier_damage_and_budget) {
    eddy_model *m = tseq_load("models/qwen35-tiny-f32.gguf"), *other = tseq_load("models/qwen3next-tiny-f32.gguf");
    eddy_engine *probe = m ? new_engine(m, 0, 1) : NULL;
    if (!probe || !other) {
        eddy_engine_free(probe);
        eddy_model_free(m), eddy_model_free(other);
        return;
    }
    const int64_t V = eddy_model_n_vocab(m);
    const size_t one = eddy_engine_state_bytes(probe) + 256 * eddy_engine_kv_bytes_per_pos(probe);
    eddy_engine_free(probe);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", test_tmp_path("cache-dir-damage"));
    int32_t t[4][300];
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 300; i++) t[k][i] = (int32_t)((k * 97 + i * 13 + 5) % V);
    /* the other model leaves its file of t[0] in the same directory */
    eddy_engine *e = disk_engine(other, 4 * one, dir, 0);
    eddy_seq *s = e ? new_seq(e) : NULL;
    if (s) feed(s, t[0], 300, NULL);
    eddy_engine_free(e);
    size_t bytes;
    REQUIRE(eddy_files(dir, &bytes) == 1);
    char other_name[300] = "";
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d));)
        if (strstr(de->d_name, ".eddy")) snprintf(other_name, sizeof other_name, "%s", de->d_name);
    if (d) closedir(d);
    /* this model's files of t[0] and t[1], then a byte flipped in the middle of each */
    e = disk_engine(m, 4 * one, dir, 0);
    s = e ? new_seq(e) : NULL;
    for (int k = 0; s && k < 2; k++) {
        eddy_seq_clear(s);
        feed(s, t[k], 300, NULL);
    }
    eddy_engine_free(e);
    CHECK_EQ(eddy_files(dir, &bytes), 3);
    int damaged = 0;
    d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d));) {
        if (!strstr(de->d_name, ".eddy") || !strcmp(de->d_name, other_name)) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        size_t n;
        uint8_t *buf = test_read_file(path, &n);
        if (buf && n > 8192) {
            buf[n / 2] ^= 0x5a;
            damaged += test_write_file(path, buf, n);
        }
        free(buf);
    }
    if (d) closedir(d);
    CHECK_EQ(damaged, 2);
    /* both refused (and removed), the prompts evaluated instead; the other model's file stays */
    e = disk_engine(m, 4 * one, dir, 0);
    s = e ? new_seq(e) : NULL;
    eddy_error err;
    int64_t held = -1;
    for (int k = 0; s && k < 2; k++) {
        CHECK(eddy_seq_restore_prefix(s, t[k], 300, &held, &err) == EDDY_OK);
        CHECKF(held == 0, "a damaged file restored %lld positions", (long long)held);
    }
    eddy_cache_stats st;
    if (e) eddy_engine_cache_stats(e, &st);
    CHECK(e && st.disk_files == 0 && st.disk_hits == 0);
    CHECK_EQ(eddy_files(dir, &bytes), 1);
    eddy_engine_free(e);
    /* a budget of about two files: four prompts leave the newest two */
    e = disk_engine(m, 4 * one, dir, 2 * one + one / 2);
    s = e ? new_seq(e) : NULL;
    for (int k = 0; s && k < 4; k++) {
        eddy_seq_clear(s);
        feed(s, t[k], 300, NULL);
    }
    eddy_engine_free(e);
    e = disk_engine(m, 4 * one, dir, 2 * one + one / 2);
    s = e ? new_seq(e) : NULL;
    if (e) eddy_engine_cache_stats(e, &st);
    CHECKF(e && st.disk_files == 2 && st.disk_bytes <= 2 * one + one / 2, "this model's files: %lld, %zu bytes",
           (long long)st.disk_files, st.disk_bytes);
    for (int k = 0; s && k < 4; k++) {
        CHECK(eddy_seq_restore_prefix(s, t[k], 300, &held, &err) == EDDY_OK);
        CHECKF(held == (k >= 2 ? 256 : 0), "prompt %d restored %lld", k, (long long)held);
    }
    eddy_engine_free(e);
    eddy_model_free(m), eddy_model_free(other);
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
