/*
 * test_cuda_model.c — whole models on the GPU backend against independent references
 * and against the CPU engine, on the tiny models of tests/data/models.
 *
 * Bounds (relative RMS over a row of logits):
 *   F32 files against transformers: 1e-4 (the products sum in float in another order
 *     than transformers; prefill runs SGEMM, decode the on-the-fly kernels; attention
 *     and the delta rule are the plain forms of ck_mixers.cu).
 *   Quantized files against the CPU engine: 3e-2 on average over 80 positions, 0.15 at
 *     worst (both quantize activations to 8 bits for decode's products, the CPU in blocks
 *     of 32 or 256, the GPU of 32; in prefill the GPU keeps them in f16; measured means
 *     0.5-1.8%, worst 1-3%, and up to 8% where a mixture of experts picks another expert
 *     at a near tie).
 *   The GPU against itself (a batch of sequences against each alone, verify + accept
 *     against feeding the kept tokens, snapshot / restore): 1e-5 (decode batches of up
 *     to 8 rows run the same per-row arithmetic; verify rows run the scan kernel).
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eddy.h"
#include "cuda/ck.h"
#include "cuda/cuda.h"
#include "cuda/cuda_backend.h"
#include "model/engine.h"
#include "ops/vec.h"
#include "test.h"
#include "test_seq.h"

#define VOCAB 1024
#define N_IDS 100

static double rel_rms(const float *a, const float *ref, int64_t n) { return sqrt(test_nmse(a, ref, n)); }

/* The relative RMS of each of n rows of V logits against ref's: their mean and the worst */
static void rows_rel_rms(const float *a, const float *ref, int64_t n, int64_t V, double *mean, double *worst) {
    double sum = 0, w = 0;
    for (int64_t t = 0; t < n; t++) {
        const double e2 = rel_rms(a + t * V, ref + t * V, V);
        if (!(e2 <= w)) w = e2;
        sum += e2;
    }
    *mean = sum / (double)n, *worst = w;
}

static int64_t read_ids(const char *file, int32_t *ids, int64_t max) {
    size_t n;
    char *raw = test_read_file(test_data_path(file), &n), *text = raw ? realloc(raw, n + 1) : NULL;
    if (!text) return free(raw), 0;
    text[n] = '\0';
    char *p = text;
    int64_t count = 0;
    while (count < max) {
        char *end;
        const long v = strtol(p, &end, 10);
        if (end == p) break;
        ids[count++] = (int32_t)v;
        p = end;
    }
    free(text);
    return count;
}

/* n_states snapshot states and as many verify states; the model's last gpu_layers
 * layers on the GPU, the ones before on the CPU (0: all on the GPU) */
static eddy_engine *split_engine(const eddy_model *m, int n_seq, int n_states, eddy_kv_type kv, int gpu_layers) {
    eddy_engine_params p = {.n_seq_max = n_seq, .n_snapshots = n_states, .n_verify = n_states,
                            .device = EDDY_DEVICE_CUDA, .gpu_layers = gpu_layers, .n_ctx = 512, .type_k = kv,
                            .type_v = kv};
    return tseq_engine(m, p);
}

static eddy_engine *gpu_engine(const eddy_model *m, int n_seq, int n_states, eddy_kv_type kv) {
    return split_engine(m, n_seq, n_states, kv, 0);
}

/* ids [0, n_prefill) in one step, then one-token steps to n: the logits of all n rows of
 * V into logits (a failing step stops there, failing the test) */
static void prefill_then_decode(eddy_seq *s, const int32_t *ids, int64_t n_prefill, int64_t n, int64_t V,
                                float *logits) {
    if (!tseq_feed(s, ids, n_prefill, logits)) return;
    for (int64_t t = n_prefill; t < n; t++) {
        eddy_error err;
        if (!CHECKF(eddy_seq_eval(s, ids + t, 1, logits + t * V, 0, &err) == EDDY_OK, "%s", err.msg)) return;
    }
}

/* ==== Against transformers ==== */

/* The file's logits for 100 ids: ref holds the first cols columns of each row. The
 * model's last gpu_layers layers on the GPU (0: all). */
static void check_split_against_transformers(const char *gguf, const char *ids_file, const char *logits_file,
                                             int64_t cols, int gpu_layers) {
    int32_t ids[N_IDS];
    REQUIRE_EQ(read_ids(ids_file, ids, N_IDS), N_IDS);
    size_t bytes;
    float *ref = test_read_file(test_data_path(logits_file), &bytes);
    REQUIRE(ref && bytes == sizeof(float) * N_IDS * (size_t)cols);
    eddy_model *m = tseq_load(gguf);
    if (!m) return free(ref);
    eddy_engine *e = split_engine(m, 1, 0, EDDY_KV_F32, gpu_layers);
    eddy_seq *s = e ? tseq_new(e) : NULL;
    const int64_t V = eddy_model_n_vocab(m);
    float *got = malloc(sizeof(float) * N_IDS * (size_t)V);
    if (s && got && CHECK(V >= cols)) {
        /* a prefill of 60 (tensor-core and SGEMM products), then 40 one-token decodes */
        prefill_then_decode(s, ids, 60, N_IDS, V, got);
        double worst = 0;
        int64_t at = -1;
        for (int64_t t = 0; t < N_IDS; t++) {
            const double e2 = rel_rms(got + t * V, ref + t * cols, cols);
            if (!(e2 <= worst)) worst = e2, at = t;
        }
        CHECKF(worst <= 1e-4, "%s (%d GPU layers): worst relative RMS %g at position %lld", gguf, gpu_layers, worst,
               (long long)at);
    }
    free(got), free(ref);
    eddy_seq_free(s);
    eddy_engine_free(e);
    eddy_model_free(m);
}

static void check_against_transformers(const char *gguf, const char *ids_file, const char *logits_file,
                                       int64_t cols) {
    check_split_against_transformers(gguf, ids_file, logits_file, cols, 0);
}

TEST(cuda_qwen35_f32_matches_transformers) {
    check_against_transformers("models/qwen35-tiny-f32.gguf", "models/qwen-tiny.ids", "models/qwen35-tiny.logits.f32",
                               VOCAB);
}

TEST(cuda_mamba2_f32_matches_transformers) {
    check_against_transformers("models/mamba2-tiny-f32.gguf", "models/mamba2-tiny.ids", "models/mamba2-tiny.logits.f32",
                               512);
}

TEST(cuda_nemotron_h_f32_matches_transformers) {
    check_against_transformers("models/nemotron_h-tiny-f32.gguf", "models/qwen-tiny.ids",
                               "models/nemotron_h-tiny.logits.f32", VOCAB);
}

TEST(cuda_moe_f32_match_transformers) {
    check_against_transformers("models/qwen35moe-tiny-f32.gguf", "models/qwen-tiny.ids",
                               "models/qwen35moe-tiny.logits.f32", VOCAB);
    check_against_transformers("models/qwen3next-tiny-f32.gguf", "models/qwen-tiny.ids",
                               "models/qwen3next-tiny.logits.f32", VOCAB);
    check_against_transformers("models/granitehybrid-tiny-f32.gguf", "models/qwen-tiny.ids",
                               "models/granitehybrid-tiny.logits.f32", VOCAB);
}

TEST(cuda_granite_dense_f32_matches_transformers) {
    check_against_transformers("models/granitehybrid-dense-tiny-f32.gguf", "models/qwen-tiny.ids",
                               "models/granitehybrid-dense-tiny.logits.f32", VOCAB);
}

TEST(cuda_llama_f32_matches_transformers) {
    int32_t ids[256];
    const int64_t n_ids = read_ids("models/llama-tiny.ids", ids, 256);
    size_t bytes;
    float *ref = test_read_file(test_data_path("models/llama-tiny.logits.f32"), &bytes);
    eddy_model *m = tseq_load("models/llama-tiny-f32.gguf");
    REQUIRE(ref && m);
    const int64_t V = eddy_model_n_vocab(m);
    const int64_t n = (int64_t)(bytes / sizeof(float) / (size_t)V);
    REQUIRE(n >= 2 && n <= n_ids);
    eddy_engine *e = gpu_engine(m, 1, 0, EDDY_KV_F32);
    eddy_seq *s = e ? tseq_new(e) : NULL;
    float *got = malloc(sizeof(float) * (size_t)(n * V));
    if (s && tseq_feed(s, ids, n, got)) {
        double worst = 0;
        for (int64_t t = 0; t < n; t++) {
            const double e2 = rel_rms(got + t * V, ref + t * V, V);
            if (!(e2 <= worst)) worst = e2;
        }
        CHECKF(worst <= 1e-4, "worst relative RMS %g", worst);
    }
    free(got), free(ref);
    eddy_seq_free(s);
    eddy_engine_free(e);
    eddy_model_free(m);
}

/* ==== Against the CPU engine ==== */

static void check_split_against_cpu(const char *gguf, int gpu_layers) {
    eddy_model *m = tseq_load(gguf);
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m);
    test_rng r = test_rng_new();
    int32_t ids[80];
    tseq_rand_ids(&r, ids, 80, V);
    eddy_engine *ec = tseq_engine(m, (eddy_engine_params){.n_ctx = 512});
    eddy_engine *eg = split_engine(m, 1, 0, EDDY_KV_F16, gpu_layers);
    eddy_seq *sc = ec ? tseq_new(ec) : NULL, *sg = eg ? tseq_new(eg) : NULL;
    float *a = malloc(sizeof(float) * (size_t)(80 * V)), *b = malloc(sizeof(float) * (size_t)(80 * V));
    if (sc && sg && tseq_feed(sc, ids, 70, a) && tseq_feed(sg, ids, 70, b)) {
        bool ok = true;
        for (int64_t t = 70; t < 80 && ok; t++)
            ok = tseq_feed(sc, ids + t, 1, a + t * V) && tseq_feed(sg, ids + t, 1, b + t * V);
        double mean = 0, worst = 0;
        if (ok) rows_rel_rms(b, a, 80, V, &mean, &worst);
        if (getenv("EDDY_TEST_VERBOSE")) printf("%s: against the CPU: mean %.3g, worst %.3g\n", gguf, mean, worst);
        CHECKF(ok && mean <= 3e-2 && worst <= 1.5e-1, "%s: relative RMS against the CPU: mean %g, worst %g", gguf,
               mean, worst);
    }
    free(a), free(b);
    eddy_seq_free(sc), eddy_seq_free(sg);
    eddy_engine_free(ec), eddy_engine_free(eg);
    eddy_model_free(m);
}

static void check_against_cpu(const char *gguf) { check_split_against_cpu(gguf, 0); }

TEST(cuda_quantized_models_match_cpu) {
    check_against_cpu("models/qwen35-tiny-q8_0.gguf");
    check_against_cpu("models/qwen35-tiny-q4_k_m.gguf");
    check_against_cpu("models/llama-tiny-q8_0.gguf");
    check_against_cpu("models/tiny-hybrid-q8_0.gguf");
    check_against_cpu("models/mamba2-tiny-q8_0.gguf");
    check_against_cpu("models/nemotron_h-tiny-q8_0.gguf");
    check_against_cpu("models/qwen35moe-tiny-q8_0.gguf");
    check_against_cpu("models/qwen3next-tiny-q4_k_m.gguf");
    check_against_cpu("models/granitehybrid-tiny-q8_0.gguf");
    /* the prefill's products through cuBLAS on f16 copies (each x converted to f16 once for
     * the products that share it), not ck_mmq_parts */
    setenv("EDDY_CUDA_MMQ", "0", 1);
    check_against_cpu("models/qwen35-tiny-q4_k_m.gguf");
    check_against_cpu("models/llama-tiny-q8_0.gguf");
    unsetenv("EDDY_CUDA_MMQ");
}

/* The f16 copies the tensor-core products keep of the weights (all of them, none, or as many
 * as 256 KiB hold) change no logit of a prefill, of a later batch of rows, or of decode.
 * EDDY_CUDA_MMQ=0: the steps of 70 and 30 rows take cuBLAS, not ck_mmq_parts. */
static void check_f16_copies(const char *gguf) {
    setenv("EDDY_CUDA_MMQ", "0", 1);
    eddy_model *m = tseq_load(gguf);
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m);
    test_rng r = test_rng_new();
    int32_t ids[104];
    tseq_rand_ids(&r, ids, 104, V);
    const char *budgets[] = {"0", NULL, "0.25"};
    float *logits[3];
    size_t held[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) {
        logits[k] = calloc((size_t)(104 * V), sizeof(float));
        if (budgets[k]) setenv("EDDY_CUDA_F16_CACHE", budgets[k], 1);
        else unsetenv("EDDY_CUDA_F16_CACHE");
        eddy_engine *e = gpu_engine(m, 1, 0, EDDY_KV_F16);
        eddy_seq *sq = e ? tseq_new(e) : NULL;
        CHECKF(sq && tseq_feed(sq, ids, 70, logits[k]) && tseq_feed(sq, ids + 70, 30, logits[k] + 70 * V) &&
                   tseq_feed(sq, ids + 100, 1, logits[k] + 100 * V) && tseq_feed(sq, ids + 101, 3, logits[k] + 101 * V),
               "%s: feeding with EDDY_CUDA_F16_CACHE=%s", gguf, budgets[k] ? budgets[k] : "(default)");
        if (e) held[k] = cuda_backend_f16_bytes(e->gpu);
        eddy_seq_free(sq);
        eddy_engine_free(e);
    }
    unsetenv("EDDY_CUDA_F16_CACHE");
    unsetenv("EDDY_CUDA_MMQ");
    if (getenv("EDDY_TEST_VERBOSE"))
        printf("%s: f16 copies: %zu bytes (default), %zu (256 KiB)\n", gguf, held[1], held[2]);
    CHECKF(held[0] == 0 && held[1] > held[2] && held[2] > 0 && held[2] <= (1u << 18), "%s: f16 copies of %zu, %zu, %zu bytes",
           gguf, held[0], held[1], held[2]);
    for (int k = 1; k < 3; k++)
        CHECKF(!memcmp(logits[k], logits[0], sizeof(float) * (size_t)(104 * V)), "%s: logits differ with copies (%s)",
               gguf, budgets[k] ? budgets[k] : "default");
    for (int k = 0; k < 3; k++) free(logits[k]);
    eddy_model_free(m);
}

TEST(cuda_f16_copies_of_weights_change_nothing) {
    check_f16_copies("models/qwen35-tiny-q4_k_m.gguf");
    check_f16_copies("models/qwen35moe-tiny-q8_0.gguf");
}

/* A prefill's attention on the tensor cores (f16 pairs) gives the logits the FP32 tiles
 * give (EDDY_CUDA_FLASH=0) within `bound` relative RMS, for a prefill of 300 positions, the
 * next 40 in one step, then a decode step. F32 files: no 8-bit or f16 rounding of
 * activations to flip. Measured on the emulator over random ids: qwen35 1.7-1.8e-7, llama
 * 3.9e-7-4.6e-6 (its attention is more sensitive); with Q and P in one f16 each instead
 * of pairs, 3.9e-5 and 3.0e-5. */
static void check_flash(const char *gguf, double bound) {
    eddy_model *m = tseq_load(gguf);
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m);
    test_rng r = test_rng_new();
    int32_t ids[341];
    tseq_rand_ids(&r, ids, 341, V);
    float *logits[2];
    for (int k = 0; k < 2; k++) {
        logits[k] = calloc((size_t)(341 * V), sizeof(float));
        if (k) setenv("EDDY_CUDA_FLASH", "0", 1);
        eddy_engine *e = gpu_engine(m, 1, 0, EDDY_KV_F16);
        unsetenv("EDDY_CUDA_FLASH");
        eddy_seq *sq = e ? tseq_new(e) : NULL;
        CHECKF(sq && tseq_feed(sq, ids, 300, logits[k]) && tseq_feed(sq, ids + 300, 40, logits[k] + 300 * V) &&
                   tseq_feed(sq, ids + 340, 1, logits[k] + 340 * V),
               "%s: feeding, attention on the %s", gguf, k ? "FP32 tiles" : "tensor cores");
        eddy_seq_free(sq);
        eddy_engine_free(e);
    }
    const double e2 = rel_rms(logits[0], logits[1], 341 * V);
    if (getenv("EDDY_TEST_VERBOSE")) printf("%s: tensor cores against FP32 tiles: %g\n", gguf, e2);
    CHECKF(e2 <= bound && memcmp(logits[0], logits[1], sizeof(float) * (size_t)(341 * V)),
           "%s: the tensor cores' attention against the FP32 tiles: %g (or the same bits: not taken)", gguf, e2);
    for (int k = 0; k < 2; k++) free(logits[k]);
    eddy_model_free(m);
}

TEST(cuda_flash_attention_matches_tiles) {
    check_flash("models/qwen35-tiny-f32.gguf", 2e-6);
    check_flash("models/llama-tiny-f32.gguf", 1.2e-5);
}

/* A model the GPU's kernels cannot take is refused when the engine is made, naming why,
 * not at its first step's launch: a Mamba-2 file whose states are wider than the
 * row-by-row scan's shared memory holds (here the tiny model with d_state set past 2048) */
TEST(cuda_refuses_states_too_wide) {
    eddy_model *m = tseq_load("models/mamba2-tiny-f32.gguf");
    REQUIRE(m);
    const int64_t d_state = m->hp.ssm_d_state;
    m->hp.ssm_d_state = 2049;
    eddy_engine_params p = {.n_seq_max = 1, .n_ctx = 64, .device = EDDY_DEVICE_CUDA};
    eddy_engine *e = NULL;
    eddy_error err;
    CHECK_EQ(eddy_engine_new(m, &p, &e, &err), EDDY_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "Mamba-2 states over 2048");
    CHECK(e == NULL);
    m->hp.ssm_d_state = d_state;
    REQUIRE(CHECKF(eddy_engine_new(m, &p, &e, &err) == EDDY_OK, "%s", err.msg));
    eddy_engine_free(e);
    eddy_model_free(m);
}

/* A step with more rows of logits than the device's buffer holds (512) gives every row's
 * logits, in order: one step of 600 rows against steps of at most 256 (1e-5: the products
 * of the two step sizes sum in other orders). */
TEST(cuda_logits_of_long_steps) {
    eddy_model *m = tseq_load("models/qwen35-tiny-f32.gguf");
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m), n = 600;
    test_rng r = test_rng_new();
    int32_t ids[600];
    tseq_rand_ids(&r, ids, n, V);
    float *logits[2];
    const int64_t n_batch[2] = {0, 256}; /* 0: the default, 2048 on a GPU, here the context's 700 */
    for (int k = 0; k < 2; k++) {
        logits[k] = calloc((size_t)(n * V), sizeof(float));
        eddy_engine_params p = {.device = EDDY_DEVICE_CUDA, .n_ctx = 700, .n_batch = n_batch[k]};
        eddy_engine *e = tseq_engine(m, p);
        CHECK(!e || eddy_engine_n_batch(e) == (k ? 256 : 700));
        eddy_seq *sq = e ? tseq_new(e) : NULL;
        CHECK(sq && tseq_feed(sq, ids, n, logits[k]));
        eddy_seq_free(sq);
        eddy_engine_free(e);
    }
    CHECKF(rel_rms(logits[0], logits[1], n * V) <= 1e-5, "one step of 600 rows against steps of 256: %g",
           rel_rms(logits[0], logits[1], n * V));
    for (int k = 0; k < 2; k++) free(logits[k]);
    eddy_model_free(m);
}

/* The emulator's count of kernel launches (tests/cuda/emu_runtime.cpp); absent on a GPU */
long long emu_launches(void) __attribute__((weak));

/* Three sequences on engine e, the way decoding goes in a server: each prefilled with the
 * first n_pf of its ids (ids and logits: per_seq = n_pf + n_dec + n_bd rows a sequence,
 * row r of sequence q's logits at (q per_seq + r) V), then n_dec decode steps of the first
 * alone, then n_bd steps of the three at once. *launches: the kernels the emulator
 * launched in the decode steps (0 on a GPU). Returns whether every step ran. */
static bool three_sequences(eddy_engine *e, const int32_t *ids, int64_t n_pf, int64_t n_dec, int64_t n_bd, int64_t V,
                            float *logits, long long *launches) {
    const int64_t per_seq = n_pf + n_dec + n_bd;
    eddy_seq *sq[3] = {NULL, NULL, NULL};
    bool ok = true;
    for (int64_t q = 0; q < 3; q++) {
        sq[q] = tseq_new(e);
        ok = ok && sq[q] && tseq_feed(sq[q], ids + q * per_seq, n_pf, logits + q * per_seq * V);
    }
    const long long before = emu_launches ? emu_launches() : 0;
    for (int64_t t = 0; ok && t < n_dec; t++) /* one sequence's decode steps */
        ok = tseq_feed(sq[0], ids + n_pf + t, 1, logits + (n_pf + t) * V);
    float *out = malloc(sizeof(float) * (size_t)(3 * V));
    for (int64_t t = 0; ok && t < n_bd; t++) { /* the three sequences' decode steps together */
        int32_t tok[3];
        for (int64_t q = 0; q < 3; q++) tok[q] = ids[q * per_seq + (q ? n_pf + t : n_pf + n_dec + t)];
        const eddy_batch b = {3, tok, sq, NULL};
        ok = eddy_engine_decode(e, &b, out, NULL) == EDDY_OK;
        for (int64_t q = 0; ok && q < 3; q++) {
            const int64_t at = q ? n_pf + t : n_pf + n_dec + t;
            memcpy(logits + (q * per_seq + at) * V, out + q * V, sizeof(float) * (size_t)V);
        }
    }
    free(out);
    *launches = emu_launches ? emu_launches() - before : 0;
    for (int64_t q = 0; q < 3; q++) eddy_seq_free(sq[q]);
    return ok;
}

/* Decode steps through the fused kernels (the conv writing its windows, ck_gdn_step,
 * attention with its gate and 8-bit form) give the logits of the kernels they fuse
 * (EDDY_CUDA_FUSED=0) within 1e-5 relative RMS (sums in another order; measured on the
 * emulator: 1e-7 to 1e-6), over a prefill of 20 positions and 4 decode steps of one
 * sequence, then 3 steps of 3 sequences at once. On the emulator, the fused steps also
 * launch at least 3 kernels fewer per Gated DeltaNet layer and 1 per Mamba-2 layer: the
 * fusions are taken. */
static void check_fused(const char *gguf) {
    eddy_model *m = tseq_load(gguf);
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m), n_pf = 20, n_dec = 4, n_seq = 3, n_bd = 3;
    const int64_t per_seq = n_pf + n_dec + n_bd;
    test_rng r = test_rng_new();
    int32_t ids[3 * 27];
    tseq_rand_ids(&r, ids, n_seq * per_seq, V);
    float *logits[2];
    long long launches[2] = {0, 0};
    int64_t n_gdn = 0, n_mamba = 0;
    setenv("EDDY_CUDA_GRAPHS", "0", 1); /* each launch runs (and is counted) where it is made */
    for (int k = 0; k < 2; k++) {
        logits[k] = calloc((size_t)(n_seq * per_seq * V), sizeof(float));
        if (k) setenv("EDDY_CUDA_FUSED", "0", 1);
        eddy_engine *e = gpu_engine(m, (int)n_seq, 0, EDDY_KV_F32);
        unsetenv("EDDY_CUDA_FUSED");
        REQUIRE(e);
        for (int64_t il = 0; il < e->m->hp.n_layer; il++) {
            n_gdn += !k && e->m->layers[il].mixer == MIXER_GDN;
            n_mamba += !k && e->m->layers[il].mixer == MIXER_MAMBA2;
        }
        CHECKF(three_sequences(e, ids, n_pf, n_dec, n_bd, V, logits[k], &launches[k]), "%s: decoding (fused %d)", gguf,
               !k);
        eddy_engine_free(e);
    }
    unsetenv("EDDY_CUDA_GRAPHS");
    const double e2 = rel_rms(logits[0], logits[1], n_seq * per_seq * V);
    if (getenv("EDDY_TEST_VERBOSE"))
        printf("%s: fused against unfused %g; launches %lld against %lld\n", gguf, e2, launches[0], launches[1]);
    CHECKF(e2 <= 1e-5, "%s: fused decode steps against unfused: %g", gguf, e2);
    const int64_t steps = n_dec + n_bd;
    CHECKF(!emu_launches || launches[0] + steps * (3 * n_gdn + n_mamba) <= launches[1],
           "%s: %lld launches fused, %lld not (%lld GDN, %lld Mamba-2 layers)", gguf, launches[0], launches[1],
           (long long)n_gdn, (long long)n_mamba);
    for (int k = 0; k < 2; k++) free(logits[k]);
    eddy_model_free(m);
}

TEST(cuda_fused_decode_matches_unfused) {
    check_fused("models/qwen35-tiny-f32.gguf");
    check_fused("models/qwen3next-tiny-f32.gguf");
    check_fused("models/nemotron_h-tiny-f32.gguf");
}

/* Decode graphs on a driver that cannot capture programmatic dependent launches (the
 * emulator standing for one): the first capture fails, the engine turns them off and
 * captures again, and the logits are those of a run that captured them. On a GPU, whose
 * driver decides for itself, only that the two runs agree. */
TEST(cuda_graphs_without_early_launches) {
    eddy_model *m = tseq_load("models/qwen35-tiny-f32.gguf");
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m), n = 16;
    test_rng r = test_rng_new();
    int32_t ids[16];
    tseq_rand_ids(&r, ids, n, V);
    float *logits[2];
    for (int refuse = 0; refuse < 2; refuse++) {
        if (refuse) setenv("EDDY_EMU_PDL_CAPTURE_FAILS", "1", 1);
        logits[refuse] = calloc((size_t)(n * V), sizeof(float));
        eddy_engine *e = gpu_engine(m, 1, 0, EDDY_KV_F32);
        eddy_seq *sq = e ? tseq_new(e) : NULL;
        if (sq) prefill_then_decode(sq, ids, 8, n, V, logits[refuse]); /* the decodes in graphs */
        const int pdl = ck_set_pdl(1); /* the engine's choice, then the emulated H200's back */
        if (e && strstr(eddy_engine_device_name(e), "emulated"))
            CHECKF(pdl == !refuse, "programmatic dependent launch %s after %s capture", pdl ? "on" : "off",
                   refuse ? "a refused" : "a good");
        else ck_set_pdl(pdl);
        unsetenv("EDDY_EMU_PDL_CAPTURE_FAILS");
        eddy_seq_free(sq);
        eddy_engine_free(e);
    }
    CHECKF(rel_rms(logits[1], logits[0], n * V) <= 1e-6, "the logits without early launches: %g",
           rel_rms(logits[1], logits[0], n * V));
    for (int k = 0; k < 2; k++) free(logits[k]);
    eddy_model_free(m);
}

/* A mixture of experts' decode steps route on the GPU (ck_moe_route, ck_gemv_experts), so
 * they are captured as graphs: one sequence's decode and three decoding together give the
 * logits of the same steps without graphs (EDDY_CUDA_GRAPHS=0), and the engine holds a
 * graph for each shape. With EDDY_CUDA_MOE_ROWS=1 the steps of more than one row (the
 * prefills of 12 and the steps of three) group their slots by expert instead
 * (experts_grouped, as a longer prefill does), in graphs too, within 1e-2 relative RMS a
 * row on average and 0.15 at worst (the quantized files against the CPU: 3e-2 and 0.15):
 * the two sum in different orders, and where that moves one of SwiGLU's outputs across an
 * 8-bit level the expert's output moves by about 1e-3 (seed 39279272503106: 4e-4 in one
 * row's experts, 4e-3 to 7e-3 in 9 of 57 rows' logits, the others equal). The routed steps
 * themselves are held to transformers' logits (cuda_moe_f32_match_transformers) and to the
 * CPU (cuda_quantized_models_match_cpu). */
TEST(cuda_moe_decode_in_graphs) {
    eddy_model *m = tseq_load("models/qwen35moe-tiny-q8_0.gguf");
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m), n_pf = 12, n_dec = 4, n_bd = 3, n = 3 * (n_pf + n_dec + n_bd);
    test_rng r = test_rng_new();
    int32_t ids[3 * 19];
    tseq_rand_ids(&r, ids, n, V);
    static const char *const env[3][2] = {{NULL, NULL}, {"EDDY_CUDA_GRAPHS", "0"}, {"EDDY_CUDA_MOE_ROWS", "1"}};
    float *logits[3];
    int graphs[3][2] = {{0, 0}, {0, 0}, {0, 0}}; /* [way][steps of one row, of three] */
    for (int k = 0; k < 3; k++) {
        if (env[k][0]) setenv(env[k][0], env[k][1], 1);
        logits[k] = calloc((size_t)(n * V), sizeof(float));
        eddy_engine *e = gpu_engine(m, 3, 0, EDDY_KV_F16);
        REQUIRE(e);
        long long launches;
        CHECKF(three_sequences(e, ids, n_pf, n_dec, n_bd, V, logits[k], &launches), "decoding (%s)",
               env[k][0] ? env[k][0] : "default");
        graphs[k][0] = cuda_backend_graphs(e->gpu, 1), graphs[k][1] = cuda_backend_graphs(e->gpu, 3);
        eddy_engine_free(e);
        if (env[k][0]) unsetenv(env[k][0]);
    }
    CHECKF(graphs[0][0] == 1 && graphs[0][1] == 1 && !graphs[1][0] && !graphs[1][1] && graphs[2][1] == 1,
           "graphs held for steps of one row and of three: %d, %d with graphs; %d, %d without; %d, %d grouped",
           graphs[0][0], graphs[0][1], graphs[1][0], graphs[1][1], graphs[2][0], graphs[2][1]);
    const double e2 = rel_rms(logits[0], logits[1], n * V);
    CHECKF(e2 <= 1e-6, "decode in graphs against without: %g", e2);
    double mean, worst;
    rows_rel_rms(logits[2], logits[0], n, V, &mean, &worst);
    if (getenv("EDDY_TEST_VERBOSE")) printf("grouped against per slot: mean %g, worst %g\n", mean, worst);
    CHECKF(mean <= 1e-2 && worst <= 0.15, "steps grouped by expert against routed per slot: mean %g, worst %g", mean,
           worst);
    for (int k = 0; k < 3; k++) free(logits[k]);
    eddy_model_free(m);
}

/* A mixture of experts' prefill with the slots grouped by expert on the GPU
 * (experts_grouped) gives the same bits in chunks of 32 tokens (EDDY_CUDA_MOE_CHUNK: each
 * token's products are its own) as in one, and the logits of the slots sorted by expert
 * on the host (EDDY_CUDA_MOE_GROUPED=0: the same routing, each expert's rows through
 * ck_mmq_parts, whose sums for a row are the grouped kernel's) within 1e-6: only the
 * order in which a token's experts are added differs (with 2 experts a token, not even
 * that: equal on the emulator). Weights from another routing (the host's softmax, which
 * rounds differently in the last bit) fail it now and then: a 1-bit change of an
 * activation moves its 8-bit form for some seeds. A prefill of 70 rows, then 2 decode
 * steps. */
TEST(cuda_moe_prefill_grouped) {
    eddy_model *m = tseq_load("models/qwen35moe-tiny-q8_0.gguf");
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m), n = 72;
    test_rng r = test_rng_new();
    int32_t ids[72];
    tseq_rand_ids(&r, ids, n, V);
    static const char *const env[3][2] = {{NULL, NULL}, {"EDDY_CUDA_MOE_CHUNK", "32"}, {"EDDY_CUDA_MOE_GROUPED", "0"}};
    float *logits[3];
    for (int k = 0; k < 3; k++) {
        if (env[k][0]) setenv(env[k][0], env[k][1], 1);
        logits[k] = calloc((size_t)(n * V), sizeof(float));
        eddy_engine *e = gpu_engine(m, 1, 0, EDDY_KV_F16);
        eddy_seq *sq = e ? tseq_new(e) : NULL;
        if (CHECKF(sq, "a sequence (%s)", env[k][0] ? env[k][0] : "default"))
            prefill_then_decode(sq, ids, 70, n, V, logits[k]);
        eddy_seq_free(sq);
        eddy_engine_free(e);
        if (env[k][0]) unsetenv(env[k][0]);
    }
    const double e_host = rel_rms(logits[0], logits[2], n * V);
    if (getenv("EDDY_TEST_VERBOSE")) printf("grouped against routed on the host: %g\n", e_host);
    CHECKF(!memcmp(logits[0], logits[1], sizeof(float) * (size_t)(n * V)), "chunks of 32 differ: %g",
           rel_rms(logits[1], logits[0], n * V));
    CHECKF(e_host <= 1e-6, "grouped against routed on the host: %g", e_host);
    for (int k = 0; k < 3; k++) free(logits[k]);
    eddy_model_free(m);
}

/* The forms of a product's input (its 8-bit rows for ck_gemv, its f16 rows for cuBLAS) are
 * made once: by the kernel that writes the input (the norms, SwiGLU, the delta rule's gated
 * norm, the decode attention), else by its first product, and kept through products that
 * leave them alone (an F32 router's). On the MoE file (3 Gated DeltaNet layers and 1 of
 * attention; F32 routers and shared-expert gates, the other products integer): a prefill of
 * 200 rows in one step (cuBLAS) converts only the attention output (no kernel leaves its
 * f16 form), once per attention layer, where dropping the forms at the router converted
 * each MoE layer's input again for its shared expert; its last row's logits quantize the
 * output head's input, and so does each decode step (graphs off: a replay launches nothing
 * from the host), with each Gated DeltaNet layer's output where its heads are narrower than
 * the 32 elements of a unit (ck_gdn_step then leaves no 8-bit form: this file's are 16). */
TEST(cuda_products_reuse_input_forms) {
    eddy_model *m = tseq_load("models/qwen35moe-tiny-q4_k_m.gguf");
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m), n_pf = 200, n_dec = 3;
    int64_t n_attn = 0, n_gdn = 0;
    for (int64_t il = 0; il < m->hp.n_layer; il++)
        n_attn += m->layers[il].mixer == MIXER_ATTENTION, n_gdn += m->layers[il].mixer == MIXER_GDN;
    const int64_t q8_step = 1 + (m->hp.ssm_d_v % 32 ? n_gdn : 0);
    test_rng r = test_rng_new();
    int32_t ids[203];
    tseq_rand_ids(&r, ids, n_pf + n_dec, V);
    setenv("EDDY_CUDA_GRAPHS", "0", 1);
    eddy_engine *e = gpu_engine(m, 1, 0, EDDY_KV_F16);
    eddy_seq *sq = e ? tseq_new(e) : NULL;
    float *logits = calloc((size_t)V, sizeof(float));
    eddy_error err;
    if (CHECKF(sq && logits, "a sequence") &&
        CHECKF(eddy_seq_eval(sq, ids, n_pf, logits, 0, &err) == EDDY_OK, "prefill: %s", err.msg)) {
        int64_t q8, f16;
        cuda_backend_forms_made(e->gpu, &q8, &f16);
        CHECKF(f16 == n_attn && q8 == 1, "a prefill made %lld f16 and %lld 8-bit forms, not %lld and 1",
               (long long)f16, (long long)q8, (long long)n_attn);
        for (int64_t t = 0; t < n_dec; t++) {
            const int64_t q8_before = q8;
            if (!CHECKF(eddy_seq_eval(sq, ids + n_pf + t, 1, logits, 0, &err) == EDDY_OK, "decode: %s", err.msg))
                break;
            cuda_backend_forms_made(e->gpu, &q8, &f16);
            CHECKF(q8 - q8_before == q8_step && f16 == n_attn,
                   "decode step %lld made %lld 8-bit forms, not %lld (and %lld f16)", (long long)t,
                   (long long)(q8 - q8_before), (long long)q8_step, (long long)(f16 - n_attn));
        }
    }
    free(logits);
    eddy_seq_free(sq);
    eddy_engine_free(e);
    unsetenv("EDDY_CUDA_GRAPHS");
    eddy_model_free(m);
}

/* A step that fails on the GPU (an emulated fault: EDDY_EMU_FAIL_FILE exists) fails with
 * the device's error, and the engine runs no step after it, though the device comes back:
 * kernels may have written part of the step's states. A new engine gives the logits of
 * one that never failed. Only on the emulator, which can fault on request. */
void emu_clear_fault(void) __attribute__((weak));
/* An empty file at path (the emulator's EDDY_EMU_FAIL_FILE: the GPU faults from then on) */
static bool make_file(const char *path) {
    FILE *f = fopen(path, "w");
    return f && fclose(f) == 0;
}

TEST(cuda_engine_after_a_gpu_fault) {
    if (!emu_clear_fault) return;
    eddy_model *m = tseq_load("models/qwen35-tiny-f32.gguf");
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m);
    char flag[64];
    snprintf(flag, sizeof flag, "/tmp/eddy-emu-fault-%d", (int)getpid());
    setenv("EDDY_EMU_FAIL_FILE", flag, 1);
    const eddy_engine_params p = {.n_ctx = 64, .device = EDDY_DEVICE_CUDA};
    eddy_engine *e = tseq_engine(m, p);
    eddy_seq *s = e ? tseq_new(e) : NULL;
    int32_t ids[12];
    test_rng r = test_rng_new();
    tseq_rand_ids(&r, ids, 12, V);
    float *x1 = malloc(sizeof(float) * (size_t)V), *x2 = malloc(sizeof(float) * (size_t)V);
    eddy_error err;
    void *saved = NULL;
    size_t saved_len = 0;
    if (s && x1 && x2 && tseq_feed(s, ids, 8, NULL) &&
        CHECKF(eddy_seq_save_buffer(s, NULL, &saved, &saved_len, &err) == EDDY_OK, "%s", err.msg)) {
        REQUIRE(CHECKF(make_file(flag), "cannot make %s", flag));
        eddy_status st = eddy_seq_eval(s, ids + 8, 4, x1, 0, &err);
        CHECKF(st == EDDY_ERR_IO && strstr(err.msg, "illegal memory access"), "the step the fault hit: %d %s",
               (int)st, st ? err.msg : "");
        remove(flag);
        emu_clear_fault();
        st = eddy_seq_eval(s, ids + 8, 4, x1, 0, &err);
        CHECKF(st == EDDY_ERR_IO && strstr(err.msg, "an earlier step or copy on the GPU failed") &&
               strstr(err.msg, "illegal memory access"), "a step after it: %d %s", (int)st, st ? err.msg : "");
        /* nor does it save or load a session: no state of it is trusted */
        void *lost = NULL;
        size_t lost_len = 0;
        st = eddy_seq_save_buffer(s, NULL, &lost, &lost_len, &err);
        CHECKF(st == EDDY_ERR_IO && !lost && strstr(err.msg, "illegal memory access"), "a save after it: %d %s",
               (int)st, st ? err.msg : "");
        st = eddy_seq_load_buffer(s, NULL, saved, saved_len, &err);
        CHECKF(st == EDDY_ERR_IO && strstr(err.msg, "states are lost"), "a load after it: %d %s", (int)st,
               st ? err.msg : "");
        eddy_seq_free(s), s = NULL;
        eddy_engine_free(e);
        e = tseq_engine(m, p);
        s = e ? tseq_new(e) : NULL;
        eddy_engine *cpu = tseq_engine(m, (eddy_engine_params){.n_ctx = 64});
        eddy_seq *c = cpu ? tseq_new(cpu) : NULL;
        if (s && c && tseq_feed(s, ids, 11, NULL) && tseq_feed(s, ids + 11, 1, x1) && tseq_feed(c, ids, 11, NULL) &&
            tseq_feed(c, ids + 11, 1, x2))
            CHECKF(rel_rms(x1, x2, V) <= 1e-4, "a new engine after the fault: %g", rel_rms(x1, x2, V));
        /* a fault in the copies of a save: the save fails, no bytes come back, and the
         * engine refuses its next step; a load whose copies fault leaves the sequence empty */
        REQUIRE(CHECKF(make_file(flag), "cannot make %s", flag));
        lost = NULL;
        st = s ? eddy_seq_save_buffer(s, NULL, &lost, &lost_len, &err) : EDDY_OK;
        CHECKF(st == EDDY_ERR_IO && !lost && strstr(err.msg, "a copy from the GPU failed"), "a save that faults: %d %s",
               (int)st, st ? err.msg : "");
        remove(flag);
        emu_clear_fault();
        st = s ? eddy_seq_eval(s, ids + 11, 1, x1, 0, &err) : EDDY_OK;
        CHECKF(st == EDDY_ERR_IO && strstr(err.msg, "a copy from the GPU failed"), "a step after it: %d %s", (int)st,
               st ? err.msg : "");
        eddy_seq_free(s), s = NULL;
        eddy_engine_free(e);
        e = tseq_engine(m, p);
        s = e ? tseq_new(e) : NULL;
        REQUIRE(CHECKF(make_file(flag), "cannot make %s", flag));
        st = s ? eddy_seq_load_buffer(s, NULL, saved, saved_len, &err) : EDDY_OK;
        CHECKF(st == EDDY_ERR_IO && strstr(err.msg, "a copy to the GPU failed") && s && eddy_seq_n_pos(s) == 0,
               "a load that faults: %d %s", (int)st, st ? err.msg : "");
        remove(flag);
        emu_clear_fault();
        eddy_seq_free(c);
        eddy_engine_free(cpu);
    }
    free(saved);
    remove(flag);
    unsetenv("EDDY_EMU_FAIL_FILE");
    emu_clear_fault();
    free(x1), free(x2);
    eddy_seq_free(s);
    eddy_engine_free(e);
    eddy_model_free(m);
}

/* A device that is not one is refused. */
/* The numbers the backend's switches take (EDDY_CUDA_MMQ and the others): within their
 * bounds, else the default; unset, empty, trailing text, out of range or of long long's
 * range the default too. */
TEST(cuda_env_numbers) {
    const char *n = "EDDY_TEST_CUDA_NUMBER";
    unsetenv(n);
    CHECK_EQ(cuda_env_int(n, 1, 128, 7), 7);
    const struct {
        const char *v;
        int64_t lo, want;
    } cases[] = {{"12", 1, 12}, {"1", 1, 1}, {"128", 1, 128}, {"0", 1, 7}, {"129", 1, 7}, {"12x", 1, 7},
                 {"", 1, 7}, {" 5", 1, 5}, {"-3", -5, -3}, {"99999999999999999999", 1, 7}, {"abc", 1, 7}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv(n, cases[i].v, 1);
        CHECKF(cuda_env_int(n, cases[i].lo, 128, 7) == cases[i].want, "%s=\"%s\": %lld", n, cases[i].v,
               (long long)cuda_env_int(n, cases[i].lo, 128, 7));
    }
    unsetenv(n);
}

TEST(cuda_refuses_unknown_device) {
    eddy_model *m = tseq_load("models/qwen35-mtp-tiny-q8_0.gguf");
    REQUIRE(m);
    eddy_engine *e = NULL;
    eddy_error err;
    eddy_engine_params p = {.device = (eddy_device)7};
    CHECK(eddy_engine_new(m, &p, &e, &err) == EDDY_ERR_ARG);
    eddy_model_free(m);
}

/* On a GPU the snapshot states' KV blocks are bounded by the device memory
 * (device_snapshot_blocks in engine.c): a whole context each where that fits. In a GPU
 * half a block larger than an engine whose 2 snapshots get one block each, where a whole
 * context each would not fit, the engine is made with those 2 blocks; a snapshot still
 * rolls back exactly; the sequence, whose 4 blocks a snapshot holds, runs out of blocks at
 * its third when it fills its context again, with the KV cache's error, and fills it once
 * the snapshot is freed. */
TEST(cuda_snapshot_blocks_fit_the_gpu) {
    eddy_model *m = tseq_load("models/qwen35-tiny-f32.gguf");
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m), n_ctx = 4 * STATE_KV_BLOCK, own = 4, most = 2 * 4;
    const eddy_engine_params p = {.n_ctx = n_ctx, .n_seq_max = 1, .n_snapshots = 2, .n_batch = STATE_KV_BLOCK,
                                  .type_k = EDDY_KV_F32, .type_v = EDDY_KV_F32, .device = EDDY_DEVICE_CUDA};
    /* in the emulator's 16 GiB the snapshots get a whole context each */
    unsetenv("EDDY_EMU_GPU_MIB");
    eddy_engine *e = tseq_engine(m, p);
    REQUIRE(e);
    const size_t free_all = cuda_backend_free_bytes(e->gpu), block = eddy_engine_kv_bytes_per_pos(e) * STATE_KV_BLOCK;
    CHECK_EQ(e->sp->n_blocks, own + most);
    eddy_engine_free(e);
    const size_t used_least = ((size_t)16384 << 20) - free_all - (size_t)(most - 2) * block;
    char mib[40];
    snprintf(mib, sizeof mib, "%.6f", (double)(used_least + block / 2) / (1 << 20));
    setenv("EDDY_EMU_GPU_MIB", mib, 1);
    e = tseq_engine(m, p);
    unsetenv("EDDY_EMU_GPU_MIB");
    REQUIRE(e);
    CHECKF(e->sp->n_blocks == own + 2, "%lld blocks in %s MiB, expected %lld", (long long)e->sp->n_blocks, mib,
           (long long)(own + 2));
    test_rng r = test_rng_new();
    int32_t ids[4 * STATE_KV_BLOCK];
    tseq_rand_ids(&r, ids, n_ctx, V);
    eddy_seq *a = tseq_new(e);
    eddy_snapshot *snap = NULL;
    eddy_error err;
    float x1[1024], x2[1024];
    REQUIRE(a && V <= 1024);
    /* a snapshot in the middle of a block, 300 positions on, back, the same 300 again */
    tseq_feed(a, ids, 300, NULL);
    REQUIRE(CHECKF(eddy_seq_snapshot(a, &snap, &err) == EDDY_OK, "%s", err.msg));
    tseq_feed(a, ids + 300, 300, NULL);
    tseq_feed(a, ids + 600, 1, x1);
    REQUIRE(CHECKF(eddy_seq_restore(a, snap, &err) == EDDY_OK, "%s", err.msg));
    tseq_feed(a, ids + 300, 300, NULL);
    tseq_feed(a, ids + 600, 1, x2);
    CHECK(!memcmp(x1, x2, sizeof(float) * (size_t)V));
    eddy_snapshot_free(snap);
    /* the whole context; a snapshot of it holds its 4 blocks while a starts again */
    eddy_seq_clear(a);
    tseq_feed(a, ids, n_ctx - 1, NULL);
    tseq_feed(a, ids + n_ctx - 1, 1, x1);
    REQUIRE(CHECKF(eddy_seq_snapshot(a, &snap, &err) == EDDY_OK, "%s", err.msg));
    eddy_seq_clear(a);
    int64_t fed = 0;
    eddy_status st = EDDY_OK;
    for (; fed < n_ctx && st == EDDY_OK; fed += STATE_KV_BLOCK)
        st = eddy_seq_eval(a, ids + fed, STATE_KV_BLOCK, NULL, false, &err);
    CHECKF(st == EDDY_ERR_NOMEM && strstr(err.msg, "no free block") && fed == 3 * STATE_KV_BLOCK,
           "status %d after %lld positions: %s", (int)st, (long long)fed, st ? err.msg : "");
    /* without the snapshot the context fits again, to the same logits */
    eddy_snapshot_free(snap);
    eddy_seq_clear(a);
    tseq_feed(a, ids, n_ctx - 1, NULL);
    tseq_feed(a, ids + n_ctx - 1, 1, x2);
    CHECKF(rel_rms(x2, x1, V) <= 1e-5, "the context filled again: %g", rel_rms(x2, x1, V));
    eddy_seq_free(a);
    eddy_engine_free(e);
    eddy_model_free(m);
}

/* A GPU commits the pool when it is made: the prefix cache's slots and KV blocks there
 * come to its budget and a block at most, where on the CPU (whose untouched pages cost
 * nothing) the entries may take the whole budget in slots or in blocks; with a cache
 * interval of 512 the GPU's entries are fewer than the CPU's (each pays for a slot and
 * two blocks, not one). */
TEST(cuda_prefix_cache_commits_its_budget) {
    eddy_model *m = tseq_load("models/qwen35-tiny-f32.gguf");
    REQUIRE(m);
    const size_t budget = (size_t)64 << 20;
    eddy_engine_params p = {.n_ctx = 1024, .n_seq_max = 2, .cache_bytes = budget, .cache_every = 512};
    eddy_engine *cpu = tseq_engine(m, p);
    p.device = EDDY_DEVICE_CUDA;
    eddy_engine *gpu = tseq_engine(m, p);
    if (cpu && gpu) {
        const size_t slot = eddy_engine_state_bytes(gpu), block = STATE_KV_BLOCK * eddy_engine_kv_bytes_per_pos(gpu);
        const size_t on_gpu = (size_t)gpu->n_cache_max * slot + (size_t)gpu->cache_blocks_max * block;
        const size_t on_cpu = (size_t)cpu->n_cache_max * slot + (size_t)cpu->cache_blocks_max * block;
        CHECKF(on_gpu <= budget + block && on_gpu + slot + block > budget, "the GPU's cache takes %zu bytes of %zu",
               on_gpu, budget);
        CHECKF(on_cpu > budget + block, "the CPU's cache: %zu bytes of %zu", on_cpu, budget);
        CHECKF(gpu->n_cache_max == (int64_t)(budget / (slot + 2 * block)) &&
               cpu->n_cache_max == (int64_t)(budget / (slot + block)),
               "%lld entries on the GPU, %lld on the CPU", (long long)gpu->n_cache_max, (long long)cpu->n_cache_max);
    }
    eddy_engine_free(cpu), eddy_engine_free(gpu);
    eddy_model_free(m);
}

/* The device memory left free with an engine of p made (0 when it could not be), and its
 * pool's bytes into *pool (NULL: not wanted); the engine is freed again. */
static size_t free_beside(const eddy_model *m, eddy_engine_params p, size_t *pool) {
    eddy_engine *e = tseq_engine(m, p);
    const size_t free_bytes = e ? cuda_backend_free_bytes(e->gpu) : 0;
    if (pool) *pool = e ? e->sp->bytes : 0;
    eddy_engine_free(e);
    return free_bytes;
}

/* On engine e (of model m, 256 positions, F32 cache, a snapshot state): a snapshot
 * after 30 tokens, restored, gives the bits the sequence had after 10 more, and a
 * rollback past it (to 35, then the last 5 again) the CPU's logits. */
static void check_snapshot_rollback(const eddy_model *m, eddy_engine *e) {
    const int64_t V = eddy_model_n_vocab(m);
    eddy_engine *cpu = tseq_engine(m, (eddy_engine_params){.n_ctx = 256, .type_k = EDDY_KV_F32,
                                                           .type_v = EDDY_KV_F32});
    eddy_seq *s = tseq_new(e), *ref = cpu ? tseq_new(cpu) : NULL;
    test_rng r = test_rng_new();
    int32_t ids[40];
    tseq_rand_ids(&r, ids, 40, V);
    float *l1 = malloc((size_t)V * sizeof(float)), *l2 = malloc((size_t)V * sizeof(float)),
          *lc = malloc((size_t)V * sizeof(float));
    eddy_snapshot *snap = NULL;
    eddy_error err;
    if (s && ref && l1 && l2 && lc) {
        tseq_feed(s, ids, 30, NULL);
        REQUIRE(CHECKF(eddy_seq_snapshot(s, &snap, &err) == EDDY_OK, "%s", err.msg));
        CHECK(eddy_seq_eval(s, ids + 30, 10, l1, false, &err) == EDDY_OK);
        REQUIRE(eddy_seq_restore(s, snap, &err) == EDDY_OK);
        CHECK_EQ(eddy_seq_n_pos(s), 30);
        CHECK(eddy_seq_eval(s, ids + 30, 10, l2, false, &err) == EDDY_OK);
        CHECK(memcmp(l1, l2, (size_t)V * sizeof(float)) == 0);
        REQUIRE(eddy_seq_truncate(s, 35, &err) == EDDY_OK);
        CHECK(eddy_seq_eval(s, ids + 35, 5, l2, false, &err) == EDDY_OK);
        CHECK(eddy_seq_eval(ref, ids, 40, lc, false, &err) == EDDY_OK);
        CHECKF(rel_rms(l2, lc, V) <= 1e-4, "after a rollback through the host snapshot: %g", rel_rms(l2, lc, V));
    }
    eddy_snapshot_free(snap);
    eddy_seq_free(s), eddy_seq_free(ref);
    free(l1), free(l2), free(lc);
    eddy_engine_free(cpu);
}

/* host_snapshots: 4 snapshot states take their recurrent slots' bytes in host memory, not
 * the GPU's (the device keeps 4 slots more free than without it, within the slabs'
 * rounding); a snapshot restored gives the bits the sequence had, and a rollback past
 * it (restore, then the tokens after it again) the CPU's logits. */
TEST(cuda_snapshots_in_host_memory) {
    eddy_model *m = tseq_load("models/qwen35-tiny-f32.gguf");
    REQUIRE(m);
    eddy_engine_params p = {.n_ctx = 256, .n_snapshots = 4, .device = EDDY_DEVICE_CUDA, .type_k = EDDY_KV_F32,
                            .type_v = EDDY_KV_F32};
    const size_t free_device = free_beside(m, p, NULL);
    p.host_snapshots = true;
    eddy_engine *e = tseq_engine(m, p);
    REQUIRE(e);
    const size_t slot = eddy_engine_state_bytes(e), slack = (size_t)e->sp->n_layer * 2 * 64 + ((size_t)1 << 16);
    const size_t gained = cuda_backend_free_bytes(e->gpu) - free_device;
    CHECKF(e->sp->n_host == 4 && gained + slack >= 4 * slot && gained <= 4 * slot + slack,
           "%lld host slots; the device kept %zu bytes more free for 4 slots of %zu", (long long)e->sp->n_host, gained,
           slot);
    check_snapshot_rollback(m, e);
    eddy_engine_free(e);
    eddy_model_free(m);
}

/* cache_fit on a GPU with 100 MiB free beside an engine without a cache: a budget of
 * 256 MiB is halved to the 64 MiB that fit (128 do not) and the engine runs; without
 * cache_fit the engine is refused, naming the cache. */
TEST(cuda_prefix_cache_fits_the_gpu) {
    eddy_model *m = tseq_load("models/qwen35-tiny-f32.gguf");
    REQUIRE(m);
    eddy_engine_params p = {.n_ctx = 512, .device = EDDY_DEVICE_CUDA};
    unsetenv("EDDY_EMU_GPU_MIB");
    const size_t free_bytes = free_beside(m, p, NULL);
    REQUIRE(free_bytes > 0);
    const size_t used = ((size_t)16384 << 20) - free_bytes;
    char mib[40];
    snprintf(mib, sizeof mib, "%.6f", (double)(used + ((size_t)100 << 20)) / (1 << 20));
    setenv("EDDY_EMU_GPU_MIB", mib, 1);
    p.cache_bytes = (size_t)256 << 20;
    eddy_error err;
    eddy_engine *e = NULL;
    CHECK_EQ(eddy_engine_new(m, &p, &e, &err), EDDY_ERR_NOMEM);
    CHECK_CONTAINS(err.msg, "a smaller prefix cache");
    p.cache_fit = true;
    e = tseq_engine(m, p);
    unsetenv("EDDY_EMU_GPU_MIB");
    if (e) {
        eddy_cache_stats cs;
        eddy_engine_cache_stats(e, &cs);
        CHECKF(cs.budget == (size_t)64 << 20, "a budget of %zu MiB in %s MiB", cs.budget >> 20, mib);
        eddy_seq *s = tseq_new(e);
        const int32_t ids[3] = {1, 2, 3};
        float l[1024];
        REQUIRE(s && eddy_model_n_vocab(m) <= 1024);
        CHECK(eddy_seq_eval(s, ids, 3, l, false, &err) == EDDY_OK);
    }
    eddy_engine_free(e);
    eddy_model_free(m);
}

/* A verify's tokens take row slots on the GPU, not states: an engine with 32 verify
 * states commits 32 row slots' bytes more device memory than one with none (within the
 * slabs' 64-byte rounding), a fraction of 32 recurrent slots; and a verify on it of 2
 * sequences' 16 tokens each, accepted in part, leaves each sequence with the logits of
 * feeding the kept tokens on the CPU. */
TEST(cuda_verify_states_are_row_states) {
    eddy_model *m = tseq_load("models/qwen35-tiny-f32.gguf");
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m);
    eddy_engine_params p = {.n_ctx = 256, .n_seq_max = 2, .device = EDDY_DEVICE_CUDA, .type_k = EDDY_KV_F32,
                            .type_v = EDDY_KV_F32};
    size_t bytes_none;
    const size_t free_none = free_beside(m, p, &bytes_none);
    p.n_verify = 32;
    eddy_engine *e = tseq_engine(m, p);
    REQUIRE(e);
    const size_t row = eddy_engine_row_bytes(e), slot = eddy_engine_state_bytes(e);
    const size_t slack = (size_t)e->sp->n_layer * 3 * 64;
    CHECKF(row > 0 && 2 * row < slot, "a row slot takes %zu bytes, a recurrent slot %zu", row, slot);
    CHECKF(e->sp->bytes - bytes_none >= 32 * row && e->sp->bytes - bytes_none <= 32 * row + slack,
           "the pool grew by %zu bytes for 32 row slots of %zu", e->sp->bytes - bytes_none, row);
    CHECKF(free_none - cuda_backend_free_bytes(e->gpu) <= 32 * row + slack + ((size_t)1 << 16),
           "the device lost %zu bytes for 32 row slots of %zu", free_none - cuda_backend_free_bytes(e->gpu), row);
    eddy_engine *cpu = tseq_engine(m, (eddy_engine_params){.n_ctx = 256, .type_k = EDDY_KV_F32,
                                                           .type_v = EDDY_KV_F32});
    eddy_seq *s[2] = {tseq_new(e), tseq_new(e)}, *ref = cpu ? tseq_new(cpu) : NULL;
    test_rng r = test_rng_new();
    int32_t ids[2][40];
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 40; i++) ids[k][i] = (int32_t)(test_rng_u64(&r) % (uint64_t)V);
    float *lg = malloc((size_t)V * sizeof(float)), *lc = malloc((size_t)V * sizeof(float));
    eddy_error err;
    if (s[0] && s[1] && ref && lg && lc) {
        tseq_feed(s[0], ids[0], 20, NULL), tseq_feed(s[1], ids[1], 20, NULL);
        eddy_seq *owner[32];
        int32_t toks[32];
        for (int i = 0; i < 32; i++) owner[i] = s[i / 16], toks[i] = ids[i / 16][20 + i % 16];
        REQUIRE(CHECKF(eddy_engine_verify(e, &(eddy_batch){32, toks, owner, NULL}, NULL, &err) == EDDY_OK, "%s",
                       err.msg));
        const int64_t keep[2] = {5, 16};
        for (int k = 0; k < 2; k++) {
            REQUIRE(eddy_seq_accept(s[k], keep[k], &err) == EDDY_OK);
            const int32_t next = 7;
            tseq_feed(s[k], &next, 1, lg);
            eddy_seq_clear(ref);
            tseq_feed(ref, ids[k], 20 + keep[k], NULL);
            tseq_feed(ref, &next, 1, lc);
            CHECKF(rel_rms(lg, lc, V) <= 1e-4, "sequence %d after accepting %lld of 16: %g", k,
                   (long long)keep[k], rel_rms(lg, lc, V));
        }
    }
    free(lg), free(lc);
    eddy_engine_free(e), eddy_engine_free(cpu);
    eddy_model_free(m);
}

/* The prefix cache on the GPU: a sequence's checkpoint at 256 positions (taken inside a
 * longer prefill) serves another sequence with the same first tokens, which then gets
 * the first one's logits; the same with the model split (the CPU's layers checkpoint
 * their part). EDDY_CUDA_MMQ=0: the 40-row step takes cuBLAS's f16 products
 * as the 300-row one does (ck_mmq_parts' 8-bit activations move these tiny models'
 * logits by about 1%). */
TEST(cuda_prefix_cache) {
    const char *files[] = {"models/qwen35-tiny-q8_0.gguf", "models/nemotron_h-tiny-q8_0.gguf"};
    setenv("EDDY_CUDA_MMQ", "0", 1);
    for (int f = 0; f < 4; f++) { /* each file whole on the GPU, then split (its last 2 layers there) */
        eddy_model *m = tseq_load(files[f % 2]);
        if (!m) continue;
        const int64_t V = eddy_model_n_vocab(m);
        eddy_engine_params p = {.device = EDDY_DEVICE_CUDA, .gpu_layers = f < 2 ? 0 : 2, .n_seq_max = 2,
                                .n_ctx = 512, .cache_bytes = 64 << 20, .cache_every = 256};
        eddy_engine *e = tseq_engine(m, p);
        eddy_seq *a = e ? tseq_new(e) : NULL, *b = a ? tseq_new(e) : NULL;
        test_rng r = test_rng_new();
        int32_t ids[300];
        tseq_rand_ids(&r, ids, 300, V);
        float *la = malloc(sizeof(float) * (size_t)(300 * V)), *lb = malloc(sizeof(float) * (size_t)(40 * V));
        eddy_error err;
        int64_t restored = -1;
        if (b && tseq_feed(a, ids, 300, la) &&
            CHECKF(eddy_seq_restore_prefix(b, ids, 290, &restored, &err) == EDDY_OK, "%s", err.msg)) {
            CHECKF(restored == 256, "%s (%d GPU layers): restored %lld positions", files[f % 2], p.gpu_layers,
                   (long long)restored);
            if (restored == 256 && tseq_feed(b, ids + 256, 40, lb))
                CHECKF(rel_rms(lb, la + 256 * V, 40 * V) <= 1e-4, "%s (%d GPU layers): after the cached prefix: %g",
                       files[f % 2], p.gpu_layers, rel_rms(lb, la + 256 * V, 40 * V));
        }
        free(la), free(lb);
        eddy_seq_free(a), eddy_seq_free(b);
        eddy_engine_free(e);
        eddy_model_free(m);
    }
    unsetenv("EDDY_CUDA_MMQ");
}

/* ==== Sequences on the GPU ==== */

/* Three sequences with prompts of different lengths decoded in one batch give each
 * one's logits alone; verify 4 + accept 2 = feeding the 2; snapshot / restore. */
static void check_split_sequences(const char *gguf, int gpu_layers) {
    eddy_model *m = tseq_load(gguf);
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m);
    test_rng r = test_rng_new();
    eddy_engine *e = split_engine(m, 5, 16, EDDY_KV_F16, gpu_layers);
    REQUIRE(e);
    int32_t p[3][40], next[3][6];
    const int64_t len[3] = {40, 7, 23};
    for (int k = 0; k < 3; k++) tseq_rand_ids(&r, p[k], len[k], V), tseq_rand_ids(&r, next[k], 6, V);
    /* alone: each on one sequence, then freed */
    float *alone = malloc(sizeof(float) * (size_t)(3 * 6 * V)), *batched = malloc(sizeof(float) * (size_t)(3 * 6 * V));
    for (int k = 0; k < 3; k++) {
        eddy_seq *s = tseq_new(e);
        if (!s) break;
        tseq_feed(s, p[k], len[k], NULL);
        for (int t = 0; t < 6; t++) tseq_feed(s, next[k] + t, 1, alone + (k * 6 + t) * V);
        eddy_seq_free(s);
    }
    eddy_seq *s[3];
    for (int k = 0; k < 3; k++) {
        s[k] = tseq_new(e);
        tseq_feed(s[k], p[k], len[k], NULL);
    }
    for (int t = 0; t < 6; t++) {
        eddy_token tok[3] = {next[0][t], next[1][t], next[2][t]};
        float out[3 * 1024];
        REQUIRE(V <= 1024);
        eddy_batch b = {3, tok, s, NULL};
        eddy_error err;
        REQUIRE(CHECKF(eddy_engine_decode(e, &b, out, &err) == EDDY_OK, "%s", err.msg));
        for (int k = 0; k < 3; k++) memcpy(batched + (k * 6 + t) * V, out + k * V, sizeof(float) * (size_t)V);
    }
    CHECKF(rel_rms(batched, alone, 3 * 6 * V) <= 1e-5, "%s: batch against alone: %g", gguf, rel_rms(batched, alone, 3 * 6 * V));

    /* verify 4 drafts on s[0], accept 2: the state after = after feeding those 2 */
    eddy_seq *twin = NULL;
    eddy_error err;
    REQUIRE(eddy_seq_fork(s[0], &twin, &err) == EDDY_OK);
    int32_t drafts[4];
    tseq_rand_ids(&r, drafts, 4, V);
    eddy_seq *four[4] = {s[0], s[0], s[0], s[0]};
    float vout[4 * 1024];
    const int8_t all4[4] = {1, 1, 1, 1};
    eddy_batch vb = {4, drafts, four, all4};
    REQUIRE(CHECKF(eddy_engine_verify(e, &vb, vout, &err) == EDDY_OK, "%s", err.msg));
    REQUIRE(CHECKF(eddy_seq_accept(s[0], 2, &err) == EDDY_OK, "%s", err.msg));
    float fed[2 * 1024], after_v[1024], after_f[1024];
    tseq_feed(twin, drafts, 2, fed);
    CHECKF(rel_rms(vout, fed, 2 * V) <= 1e-5, "%s: verify rows against fed rows: %g", gguf, rel_rms(vout, fed, 2 * V));
    int32_t probe = 3;
    tseq_feed(s[0], &probe, 1, after_v);
    tseq_feed(twin, &probe, 1, after_f);
    CHECKF(rel_rms(after_v, after_f, V) <= 1e-5, "%s: after accept: %g", gguf, rel_rms(after_v, after_f, V));

    /* snapshot, go on, restore, go on the same way: the same logits */
    eddy_snapshot *snap = NULL;
    REQUIRE(eddy_seq_snapshot(s[1], &snap, &err) == EDDY_OK);
    float x1[1024], x2[1024];
    tseq_feed(s[1], next[2], 5, NULL);
    tseq_feed(s[1], &probe, 1, x1);
    REQUIRE(eddy_seq_restore(s[1], snap, &err) == EDDY_OK);
    tseq_feed(s[1], next[2], 5, NULL);
    tseq_feed(s[1], &probe, 1, x2);
    CHECKF(!memcmp(x1, x2, sizeof(float) * (size_t)V), "%s: snapshot / restore", gguf);
    /* roll back 3 positions and re-feed them: as before */
    REQUIRE(eddy_seq_truncate(s[1], eddy_seq_n_pos(s[1]) - 3, &err) == EDDY_OK);
    int32_t again[3] = {next[2][3], next[2][4], probe};
    float x3[3 * 1024];
    tseq_feed(s[1], again, 3, x3);
    CHECKF(rel_rms(x3 + 2 * V, x1, V) <= 1e-5, "%s: after rollback: %g", gguf, rel_rms(x3 + 2 * V, x1, V));

    /* a session saved from the GPU loads into another sequence on it (the same logits
     * after the same next token) and into an engine on the CPU (within the CPU bound) */
    void *buf = NULL;
    size_t blen = 0;
    REQUIRE(CHECKF(eddy_seq_save_buffer(s[1], NULL, &buf, &blen, &err) == EDDY_OK, "%s", err.msg));
    eddy_seq *back = tseq_new(e);
    eddy_engine *ec = tseq_engine(m, (eddy_engine_params){.n_ctx = 512});
    eddy_seq *cpu = ec ? tseq_new(ec) : NULL;
    float y1[1024], y2[1024], y3[1024];
    if (back && cpu && CHECKF(eddy_seq_load_buffer(back, NULL, buf, blen, &err) == EDDY_OK, "%s", err.msg) &&
        CHECKF(eddy_seq_load_buffer(cpu, NULL, buf, blen, &err) == EDDY_OK, "%s", err.msg)) {
        tseq_feed(s[1], &probe, 1, y1);
        tseq_feed(back, &probe, 1, y2);
        tseq_feed(cpu, &probe, 1, y3);
        CHECKF(rel_rms(y2, y1, V) <= 1e-5, "%s: session reloaded on the GPU: %g", gguf, rel_rms(y2, y1, V));
        CHECKF(rel_rms(y3, y1, V) <= 5e-2, "%s: session loaded on the CPU: %g", gguf, rel_rms(y3, y1, V));
    }
    free(buf);
    eddy_seq_free(back);
    eddy_seq_free(cpu);
    eddy_engine_free(ec);
    eddy_snapshot_free(snap);
    eddy_seq_free(twin);
    for (int k = 0; k < 3; k++) eddy_seq_free(s[k]);
    free(alone), free(batched);
    eddy_engine_free(e);
    eddy_model_free(m);
}

static void check_sequences(const char *gguf) { check_split_sequences(gguf, 0); }

enum { WIDE_N = 12, WIDE_STEPS = 3 };

/* The WIDE_N sequences' prompts (sequence k's 1 + k % 8 tokens), then WIDE_STEPS steps
 * decoding next[k][t] of every sequence in one batch, on a new engine: the logits of
 * sequence k's step t into out row k WIDE_STEPS + t */
static bool decode_together(const eddy_model *m, int32_t prompt[WIDE_N][8], int32_t next[WIDE_N][WIDE_STEPS],
                            float *out, int *graphs) {
    const int64_t V = eddy_model_n_vocab(m);
    eddy_engine *e = gpu_engine(m, WIDE_N, 0, EDDY_KV_F16);
    eddy_seq *s[WIDE_N] = {NULL};
    bool ok = e != NULL;
    for (int k = 0; ok && k < WIDE_N; k++) ok = (s[k] = tseq_new(e)) && tseq_feed(s[k], prompt[k], 1 + k % 8, NULL);
    float *step = malloc(sizeof *step * (size_t)(WIDE_N * V));
    for (int t = 0; ok && t < WIDE_STEPS; t++) {
        eddy_token tok[WIDE_N];
        for (int k = 0; k < WIDE_N; k++) tok[k] = next[k][t];
        eddy_batch b = {WIDE_N, tok, s, NULL};
        eddy_error err;
        ok = CHECKF(eddy_engine_decode(e, &b, step, &err) == EDDY_OK, "%s", err.msg);
        for (int k = 0; ok && k < WIDE_N; k++)
            memcpy(out + (k * WIDE_STEPS + t) * V, step + k * V, sizeof(float) * (size_t)V);
    }
    free(step);
    *graphs = e ? cuda_backend_graphs(e->gpu, WIDE_N) : 0;
    for (int k = 0; k < WIDE_N; k++) eddy_seq_free(s[k]);
    eddy_engine_free(e);
    return ok;
}

/* Twelve sequences decoded in one batch (steps of 12 rows: ck_mmq_parts on the quantized
 * weights, replayed as a CUDA graph after the first) give each one's logits alone (steps
 * of one row: ck_gemv), within 1e-2: both quantize x to 8 bits the same way, but the x
 * of a 12-row step differs from a 1-row step's by float rounding (other attention and
 * scan kernels), and a level that rounds the other way moves these tiny random models'
 * logits by a few 1e-3 (measured 1e-3 to 3e-3 on the emulator; cuBLAS's float
 * activations, EDDY_CUDA_MMQ=0: 8e-3 to 1.4e-2). A wrong scale, min or row of one unit
 * moves them by more than 1e-1. Without graphs (EDDY_CUDA_GRAPHS=0) the batch gives the
 * same bits: the replayed steps read their plan as the launched ones do. The 12-row steps
 * are replayed: a graph is held for them (the files' float routers and gates take ck_gemv
 * in passes, not cuBLAS, which a capture cannot hold). */
static void check_wide_batch(const char *gguf) {
    eddy_model *m = tseq_load(gguf);
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m), n = WIDE_N * WIDE_STEPS * V;
    test_rng r = test_rng_new();
    int32_t prompt[WIDE_N][8], next[WIDE_N][WIDE_STEPS];
    for (int k = 0; k < WIDE_N; k++)
        tseq_rand_ids(&r, prompt[k], 1 + k % 8, V), tseq_rand_ids(&r, next[k], WIDE_STEPS, V);
    float *alone = malloc(sizeof(float) * (size_t)n), *batched = malloc(sizeof(float) * (size_t)n);
    float *plain = malloc(sizeof(float) * (size_t)n);
    eddy_engine *e = gpu_engine(m, 1, 0, EDDY_KV_F16);
    for (int k = 0; e && k < WIDE_N; k++) {
        eddy_seq *s = tseq_new(e);
        if (!s) break;
        tseq_feed(s, prompt[k], 1 + k % 8, NULL);
        for (int t = 0; t < WIDE_STEPS; t++) tseq_feed(s, next[k] + t, 1, alone + (k * WIDE_STEPS + t) * V);
        eddy_seq_free(s);
    }
    eddy_engine_free(e);
    int graphs[2] = {0, 0};
    bool ok = decode_together(m, prompt, next, batched, &graphs[0]);
    setenv("EDDY_CUDA_GRAPHS", "0", 1);
    ok = ok && decode_together(m, prompt, next, plain, &graphs[1]);
    unsetenv("EDDY_CUDA_GRAPHS");
    if (ok) {
        CHECKF(graphs[0] >= 1 && graphs[1] == 0, "%s: graphs held: %d with graphs, %d without", gguf, graphs[0],
               graphs[1]);
        CHECKF(rel_rms(batched, alone, n) <= 1e-2, "%s: a batch of %d against each alone: %g", gguf, WIDE_N,
               rel_rms(batched, alone, n));
        CHECKF(!memcmp(batched, plain, sizeof(float) * (size_t)n), "%s: the batch with and without graphs: %g", gguf,
               rel_rms(batched, plain, n));
    }
    free(alone), free(batched), free(plain);
    eddy_model_free(m);
}

TEST(cuda_wide_batch_matches_alone) {
    check_wide_batch("models/qwen35-tiny-q4_k_m.gguf");
    check_wide_batch("models/nemotron_h-tiny-q8_0.gguf");
    /* 8 experts, 2 a token: steps of up to 16 rows route on the GPU, here 24 slots a step */
    check_wide_batch("models/qwen35moe-tiny-q8_0.gguf");
}

/* eddy_engine_decode_argmax and eddy_engine_decode_top on the GPU (found there, only the
 * ids and their logits copied back) give the argmax and the best k of the logits
 * eddy_engine_decode gives there (tseq_check_decode_top), bit for bit, and their
 * log-sum-exps within 1e-5 (the GPU's expf, another order of summation). */
TEST(cuda_decode_argmax_and_top_are_the_logits_best) {
    tseq_check_decode_top("models/qwen35-tiny-q8_0.gguf",
                          (eddy_engine_params){.device = EDDY_DEVICE_CUDA, .type_k = EDDY_KV_F16,
                                               .type_v = EDDY_KV_F16},
                          1e-5);
}

/* eddy_generate_ex on the GPU takes each step's best 40 there (with the end-of-generation
 * tokens banned, as many more) and gives the sequence the last step's logits from the
 * GPU's buffer at the end (tseq_check_generate_from_the_best: the same tokens and logits
 * as whole rows from the GPU). */
TEST(cuda_generate_from_the_best_logits) {
    const eddy_ctx_params cp = {.device = EDDY_DEVICE_CUDA};
    tseq_check_generate_from_the_best("models/qwen35-tiny-q8_0.gguf", cp, false);
    tseq_check_generate_from_the_best("models/llama-tiny-q8_0.gguf", cp, true);
}

/* eddy_engine_verify_top on the GPU gives the best k of eddy_engine_verify's rows there,
 * bit for bit, and a verify of one sequence leaves the kept row in the GPU's buffer for
 * it (tseq_check_verify_top) */
TEST(cuda_verify_top_is_the_verify_best) {
    tseq_check_verify_top("models/qwen35-tiny-q8_0.gguf", (eddy_engine_params){.device = EDDY_DEVICE_CUDA}, 1e-5);
}

static int count_token(void *user, eddy_token t, const char *text, size_t len) {
    (void)text, (void)len;
    eddy_token *last = user;
    if (t >= 0) last[0] = t, last[1]++; /* (-1: the text left at the end) */
    return 0;
}

/* Greedy generation with MTP drafts on the GPU walks each verify's best logit; the
 * sequence ends with the logits the last token came from (the kept row of the last
 * verify, copied from the GPU's buffer, which every MTP draft overwrites): their
 * argmax is that token, and they are the logits of feeding the same tokens again. */
TEST(cuda_mtp_generation_keeps_the_last_logits) {
    eddy_model *m = tseq_load("models/qwen35-mtp-tiny-f32.gguf");
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m);
    const eddy_ctx_params cp = {.n_ctx = 128, .device = EDDY_DEVICE_CUDA, .mtp = true, .n_verify = 4};
    eddy_ctx *c = NULL, *again = NULL;
    eddy_error err;
    REQUIRE(CHECKF(eddy_ctx_new(m, &cp, &c, &err) == EDDY_OK && eddy_ctx_new(m, &cp, &again, &err) == EDDY_OK, "%s",
                   err.msg));
    eddy_sampler_params spar = eddy_sampler_default_params();
    spar.temp = 0;
    eddy_sampler *s = NULL;
    REQUIRE(eddy_sampler_new(&spar, V, &s, NULL) == EDDY_OK);
    test_rng r = test_rng_new();
    int32_t prompt[12];
    tseq_rand_ids(&r, prompt, 12, V);
    const eddy_spec_params spec = {.type = EDDY_SPEC_MTP, .draft_max = 3, .p_min = -1, .fixed = true};
    const eddy_gen_params gp = {.n_predict = 30, .spec = &spec};
    eddy_token last[2] = {-1, 0};
    eddy_gen_stats st;
    REQUIRE(CHECKF(eddy_generate_ex(c, NULL, s, prompt, 12, &gp, count_token, last, &st, &err) == EDDY_OK, "%s",
                   err.msg));
    const float *l = eddy_seq_logits(eddy_ctx_seq(c));
    const int64_t n_pos = eddy_ctx_n_pos(c);
    CHECKF(st.n_drafted > 0 && last[1] == 30, "%lld drafts, %d tokens", (long long)st.n_drafted, (int)last[1]);
    /* the sequence holds the prompt and the tokens, the last one too where it was a draft
     * the verify fed; where it was not, it came from the logits the sequence holds */
    CHECKF(n_pos == 12 + 30 || n_pos == 12 + 29, "the sequence holds %lld positions", (long long)n_pos);
    if (CHECKF(l, "no logits after the generation") && n_pos == 12 + 29)
        CHECKF(vec_argmax_ref(l, V) == last[0], "the logits' argmax %lld, the last token %d",
               (long long)vec_argmax_ref(l, V), last[0]);
    float *want = malloc(sizeof *want * (size_t)V);
    if (l && want &&
        CHECKF(eddy_seq_eval(eddy_ctx_seq(again), eddy_seq_tokens(eddy_ctx_seq(c)), n_pos, want, 0, &err) == EDDY_OK,
               "%s", err.msg))
        CHECKF(rel_rms(l, want, V) <= 1e-4, "the kept logits against feeding the tokens: %g", rel_rms(l, want, V));
    free(want);
    eddy_sampler_free(s);
    eddy_ctx_free(c), eddy_ctx_free(again);
    eddy_model_free(m);
}

/* engine_decode_best on the GPU (a draft model's greedy drafts: ck_top_rows and
 * ck_logprob_rows there, 12 bytes a row back) gives vec_argmax_softmax's token of the
 * logits eddy_engine_decode gives there and its probability within 1e-5 (tseq_check_decode_best) */
TEST(cuda_decode_best_is_the_logits_best) {
    tseq_check_decode_best("models/qwen35-tiny-q8_0.gguf", (eddy_engine_params){.device = EDDY_DEVICE_CUDA}, 1e-5);
}

/* eddy_engine_decode_logprob on the GPU (ck_logprob_rows there, 8 bytes a row back) gives
 * vec_logprob of the logits eddy_engine_decode gives there, within 1e-5: the GPU's expf
 * and another order of summation (tseq_check_decode_logprob). */
TEST(cuda_decode_logprob_is_the_logits_logprob) {
    tseq_check_decode_logprob("models/qwen35-tiny-q8_0.gguf", (eddy_engine_params){.device = EDDY_DEVICE_CUDA}, 1e-5);
}


/* The emulator's counts (tests/cuda/emu_runtime.cpp), absent on a GPU: operations on the
 * legacy stream or waits for the whole device, and copies between the device and
 * pageable host memory */
long long emu_legacy_ops(void) __attribute__((weak));
long long emu_pageable_copies(void) __attribute__((weak));

TEST(cuda_sequences_batch_verify_snapshot) {
    const long long legacy = emu_legacy_ops ? emu_legacy_ops() : 0;
    check_sequences("models/qwen35-tiny-q8_0.gguf");
    check_sequences("models/nemotron_h-tiny-q8_0.gguf");
    check_sequences("models/qwen35moe-tiny-q8_0.gguf");
    /* an engine's whole life (upload, steps, graphs, verify, snapshots, sessions) stays on
     * its own stream, so another engine's graph capture in another thread cannot fail */
    CHECKF(!emu_legacy_ops || emu_legacy_ops() == legacy, "the engines made %lld operations on the legacy stream",
           emu_legacy_ops ? emu_legacy_ops() - legacy : 0);
}

/* Two GPU engines, each stepped by its own thread at the same time: a 20-token prompt,
 * then 10 tokens one at a time (decode steps, captured as graphs): each gives the logits
 * it gives alone, bit for bit, and keeps its graphs (a capture another thread's work
 * broke would have turned them off: on a GPU, a blocking stream's capture fails when any
 * thread touches the legacy stream meanwhile, which the emulator stands for too). */
#define TT_PROMPT 20
#define TT_STEPS 10
typedef struct {
    eddy_engine *e;
    const int32_t *ids; /* TT_PROMPT + TT_STEPS */
    float *logits;      /* (TT_STEPS, V): after each token fed alone */
    int64_t V;
    bool ok;
} tt_job;

static void *tt_run(void *arg) { /* no CHECK here: the test's records belong to its thread */
    tt_job *j = arg;
    eddy_seq *s = NULL;
    j->ok = eddy_seq_new(j->e, &s, NULL) == EDDY_OK && eddy_seq_eval(s, j->ids, TT_PROMPT, NULL, 0, NULL) == EDDY_OK;
    for (int t = 0; j->ok && t < TT_STEPS; t++)
        j->ok = eddy_seq_eval(s, j->ids + TT_PROMPT + t, 1, j->logits + t * j->V, 0, NULL) == EDDY_OK;
    eddy_seq_free(s);
    return NULL;
}

TEST(cuda_two_engines_in_two_threads) {
    eddy_model *m = tseq_load("models/qwen35-tiny-q8_0.gguf");
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m);
    const eddy_engine_params p = {.n_seq_max = 1, .device = EDDY_DEVICE_CUDA, .n_ctx = 64};
    int32_t ids[2][TT_PROMPT + TT_STEPS];
    test_rng r = test_rng_new();
    tseq_rand_ids(&r, ids[0], TT_PROMPT + TT_STEPS, V), tseq_rand_ids(&r, ids[1], TT_PROMPT + TT_STEPS, V);
    float *alone = malloc(sizeof(float) * (size_t)(2 * TT_STEPS * V));
    float *together = malloc(sizeof(float) * (size_t)(2 * TT_STEPS * V));
    REQUIRE(alone && together);
    tt_job job[2];
    for (int k = 0; k < 2; k++) { /* alone: one engine at a time */
        job[k] = (tt_job){tseq_engine(m, p), ids[k], alone + k * TT_STEPS * V, V, false};
        if (job[k].e) tt_run(&job[k]);
        REQUIRE(CHECKF(job[k].ok, "engine %d alone", k));
        eddy_engine_free(job[k].e);
    }
    for (int k = 0; k < 2; k++) job[k] = (tt_job){tseq_engine(m, p), ids[k], together + k * TT_STEPS * V, V, false};
    pthread_t th[2];
    bool started[2] = {false, false};
    const int pdl = ck_set_pdl(0); /* as the engines set it (a process's setting) */
    ck_set_pdl(pdl);
    setenv("EDDY_EMU_CAPTURE_US", "2000", 1); /* the emulator's captures as long as a step */
    for (int k = 0; k < 2; k++) started[k] = job[k].e && pthread_create(&th[k], NULL, tt_run, &job[k]) == 0;
    for (int k = 0; k < 2; k++)
        if (started[k]) pthread_join(th[k], NULL);
    unsetenv("EDDY_EMU_CAPTURE_US");
    const int pdl_after = ck_set_pdl(pdl);
    CHECKF(pdl_after == pdl, "a capture failed: kernels launch without programmatic dependent launch now");
    for (int k = 0; k < 2; k++) {
        CHECKF(started[k] && job[k].ok, "engine %d in its thread", k);
        CHECKF(!memcmp(alone + k * TT_STEPS * V, together + k * TT_STEPS * V, sizeof(float) * (size_t)(TT_STEPS * V)),
               "engine %d: its logits beside another engine differ from alone", k);
        CHECKF(job[k].e && cuda_backend_graphs(job[k].e->gpu, 1) == 1, "engine %d lost its decode graph", k);
        eddy_engine_free(job[k].e);
    }
    free(alone), free(together);
    eddy_model_free(m);
}

/* A session of 600 positions (three KV blocks a layer) saved from and loaded into a GPU
 * engine whose pinned staging halves are 1 KiB, so that windows cut blocks and pieces:
 * no copy touches pageable memory, a load then a save gives the same bytes, and the
 * state loaded on the GPU and on the CPU goes on as the sequence saved. */
TEST(cuda_session_files_through_pinned_memory) {
    eddy_model *m = tseq_load("models/qwen35-tiny-q8_0.gguf");
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m), n = 600;
    REQUIRE(V <= 1024);
    setenv("EDDY_CUDA_STAGING_KIB", "1", 1);
    eddy_engine *e = tseq_engine(m, (eddy_engine_params){.n_seq_max = 2, .device = EDDY_DEVICE_CUDA, .n_ctx = 1024});
    unsetenv("EDDY_CUDA_STAGING_KIB");
    eddy_engine *ec = tseq_engine(m, (eddy_engine_params){.n_ctx = 1024});
    eddy_seq *s = e ? tseq_new(e) : NULL, *back = e ? tseq_new(e) : NULL, *cpu = ec ? tseq_new(ec) : NULL;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    test_rng r = test_rng_new();
    tseq_rand_ids(&r, ids, n, V);
    void *buf = NULL, *again = NULL;
    size_t len = 0, len_again = 0;
    eddy_error err;
    if (s && back && cpu && ids && tseq_feed(s, ids, n, NULL)) {
        const long long pageable = emu_pageable_copies ? emu_pageable_copies() : 0;
        REQUIRE(CHECKF(eddy_seq_save_buffer(s, NULL, &buf, &len, &err) == EDDY_OK, "%s", err.msg));
        REQUIRE(CHECKF(eddy_seq_load_buffer(back, NULL, buf, len, &err) == EDDY_OK, "%s", err.msg));
        REQUIRE(CHECKF(eddy_seq_save_buffer(back, NULL, &again, &len_again, &err) == EDDY_OK, "%s", err.msg));
        CHECKF(!emu_pageable_copies || emu_pageable_copies() == pageable,
               "%lld copies between the GPU and pageable memory", emu_pageable_copies() - pageable);
        CHECKF(len == len_again && !memcmp(buf, again, len), "a session loaded and saved again differs");
        REQUIRE(CHECKF(eddy_seq_load_buffer(cpu, NULL, buf, len, &err) == EDDY_OK, "%s", err.msg));
        int32_t probe = 5;
        float y1[1024], y2[1024], y3[1024];
        tseq_feed(s, &probe, 1, y1);
        tseq_feed(back, &probe, 1, y2);
        tseq_feed(cpu, &probe, 1, y3);
        CHECKF(rel_rms(y2, y1, V) <= 1e-5, "session reloaded on the GPU: %g", rel_rms(y2, y1, V));
        CHECKF(rel_rms(y3, y1, V) <= 5e-2, "session loaded on the CPU: %g", rel_rms(y3, y1, V));
    } else {
        CHECK(!"engines and sequences made, the prompt fed");
    }
    free(buf), free(again), free(ids);
    eddy_seq_free(s), eddy_seq_free(back), eddy_seq_free(cpu);
    eddy_engine_free(e), eddy_engine_free(ec);
    eddy_model_free(m);
}

/* ==== The MTP layer on the GPU ==== */

/* Against the reference of tests/data/models/<arch>-mtp-tiny.ref (test_mtp.c says what
 * it holds): the MTP rows and a chain of three greedy drafts, within 1e-4; then a verify
 * of three drafts accepting two leaves the layer's state of a sequence fed those tokens. */
typedef struct {
    float main[40][1024];
    float mtp[39][1024];
    int32_t drafts[3];
    float chain[3][1024];
} mtp_ref;

static void check_mtp(const char *arch, int gpu_layers) {
    char gguf[96], ref_file[96];
    snprintf(gguf, sizeof gguf, "models/%s-mtp-tiny-f32.gguf", arch);
    snprintf(ref_file, sizeof ref_file, "models/%s-mtp-tiny.ref", arch);
    int32_t ids[40];
    REQUIRE_EQ(read_ids("models/qwen-tiny.ids", ids, 40), 40);
    size_t n;
    mtp_ref *ref = test_read_file(test_data_path(ref_file), &n);
    eddy_model *m = tseq_load(gguf);
    if (!CHECK(ref && n == sizeof *ref && m)) {
        free(ref);
        eddy_model_free(m);
        return;
    }
    eddy_engine *e = tseq_engine(m, (eddy_engine_params){.n_ctx = 128, .n_seq_max = 4, .n_snapshots = 8,
                                                         .n_verify = 8, .n_batch = 64, .mtp = true, .type_k = EDDY_KV_F32, .type_v = EDDY_KV_F32,
                                                         .device = EDDY_DEVICE_CUDA, .gpu_layers = gpu_layers});
    eddy_seq *s = e ? tseq_new(e) : NULL, *t = e ? tseq_new(e) : NULL;
    float *l = malloc(sizeof(float) * 1024 * 40);
    eddy_error err;
    if (s && t) {
        double worst = 0;
        for (int q = 1; q < 40; q++) { /* row q: the sequence holds ids[0, q), the draft goes in with ids[q] */
            int32_t d;
            int64_t k;
            tseq_feed(s, &ids[q - 1], 1, NULL);
            if (!CHECKF(engine_seq_mtp_draft(s, ids[q], 1, -1.0f, &d, &k, l, &err) == EDDY_OK, "%s", err.msg)) break;
            worst = fmax(worst, rel_rms(l, ref->mtp[q - 1], 1024));
        }
        CHECKF(worst <= 1e-4, "%s MTP rows on the GPU: worst relative RMS %g", arch, worst);
        eddy_seq_clear(s);
        tseq_feed(s, ids, 20, NULL);
        int32_t d[3];
        int64_t k = 0;
        if (CHECKF(engine_seq_mtp_draft(s, ids[20], 3, -1.0f, d, &k, l, &err) == EDDY_OK, "%s", err.msg) &&
            CHECK_EQ(k, 3))
            for (int j = 0; j < 3; j++) {
                CHECKF(d[j] == ref->drafts[j], "%s draft %d: %d, reference %d", arch, j, d[j], ref->drafts[j]);
                CHECKF(rel_rms(l + j * 1024, ref->chain[j], 1024) <= 1e-4, "%s draft %d logits: %g", arch, j,
                       rel_rms(l + j * 1024, ref->chain[j], 1024));
            }
        /* the same drafts without their rows (each one's argmax and probability found on the
         * GPU), and a floor on the probability cuts them where the rows' own say */
        int32_t d2[3];
        float p[3];
        for (int j = 0; j < 3; j++) vec_argmax_softmax(l + j * 1024, 1024, &p[j]);
        for (int j = -1; j < 3; j++) {
            const float floor = j < 0 ? -1.0f : p[j] * 1.001f;
            int64_t want = 0, k2 = -1;
            while (want < 3 && p[want] >= floor) want++;
            if (CHECKF(engine_seq_mtp_draft(s, ids[20], 3, floor, d2, &k2, NULL, &err) == EDDY_OK, "%s", err.msg))
                CHECKF(k2 == want && !memcmp(d, d2, sizeof *d * (size_t)want),
                       "%s drafts from the GPU's best (floor %g): %lld, from the rows %lld", arch, floor,
                       (long long)k2, (long long)want);
        }
        /* verify [ids[20], d0, d1] on s, keep 2; t is fed ids[0, 22) */
        const int32_t v[3] = {ids[20], ids[21], ids[22]};
        eddy_seq *three[3] = {s, s, s};
        float vout[3 * 1024];
        eddy_batch b = {3, v, three, NULL};
        tseq_feed(t, ids, 22, NULL);
        if (CHECKF(eddy_engine_verify(e, &b, vout, &err) == EDDY_OK, "%s", err.msg) &&
            CHECKF(eddy_seq_accept(s, 2, &err) == EDDY_OK, "%s", err.msg)) {
            int32_t ds[2], dt[2];
            float ls[2 * 1024], lt[2 * 1024];
            int64_t ks = 0, kt = 0;
            engine_seq_mtp_draft(s, ids[22], 2, -1.0f, ds, &ks, ls, &err);
            engine_seq_mtp_draft(t, ids[22], 2, -1.0f, dt, &kt, lt, &err);
            CHECKF(ks == 2 && kt == 2 && ds[0] == dt[0] && ds[1] == dt[1] && rel_rms(ls, lt, 2 * 1024) <= 1e-5,
                   "%s drafts after verify + accept: %g", arch, rel_rms(ls, lt, 2 * 1024));
        }
    }
    free(l), free(ref);
    eddy_seq_free(s), eddy_seq_free(t);
    eddy_engine_free(e);
    eddy_model_free(m);
}

TEST(cuda_mtp_matches_reference) {
    check_mtp("qwen35", 0);
    check_mtp("qwen35moe", 0);
    check_mtp("qwen35", 1); /* the model split: the MTP layer runs on the GPU after its last layer */
}

/* ==== A model split between the CPU and the GPU (gpu_layers) ==== */

/* The model's last gpu_layers layers on the GPU and the ones before on the CPU, wherever
 * the split falls (after recurrent layers, attention layers, feed-forward-only layers):
 * each architecture's F32 logits against transformers within the whole GPU's bound (1e-4;
 * the CPU's layers are within 1e-6 of it), and a quantized transformer against the CPU
 * engine within the quantized bound. */
TEST(cuda_split_models_match_transformers) {
    const char *q = "models/qwen-tiny.ids";
    check_split_against_transformers("models/qwen35-tiny-f32.gguf", q, "models/qwen35-tiny.logits.f32", VOCAB, 1);
    check_split_against_transformers("models/qwen35-tiny-f32.gguf", q, "models/qwen35-tiny.logits.f32", VOCAB, 3);
    check_split_against_transformers("models/mamba2-tiny-f32.gguf", "models/mamba2-tiny.ids",
                                     "models/mamba2-tiny.logits.f32", 512, 1);
    check_split_against_transformers("models/nemotron_h-tiny-f32.gguf", q, "models/nemotron_h-tiny.logits.f32", VOCAB,
                                     3);
    check_split_against_transformers("models/nemotron_h-tiny-f32.gguf", q, "models/nemotron_h-tiny.logits.f32", VOCAB,
                                     5);
    check_split_against_transformers("models/qwen35moe-tiny-f32.gguf", q, "models/qwen35moe-tiny.logits.f32", VOCAB,
                                     2);
    check_split_against_transformers("models/qwen3next-tiny-f32.gguf", q, "models/qwen3next-tiny.logits.f32", VOCAB,
                                     2);
    check_split_against_transformers("models/granitehybrid-tiny-f32.gguf", q, "models/granitehybrid-tiny.logits.f32",
                                     VOCAB, 2);
    check_split_against_cpu("models/llama-tiny-q8_0.gguf", 1);
}

/* A split engine's sequences as the whole GPU's (check_sequences): a batch against each
 * alone, verify + accept against feeding the kept tokens (row states on both sides),
 * snapshot / restore, rollback, and a session saved from it that loads on it and on the
 * CPU. */
TEST(cuda_split_sequences_batch_verify_snapshot) {
    check_split_sequences("models/qwen35-tiny-q8_0.gguf", 2);
    check_split_sequences("models/nemotron_h-tiny-q8_0.gguf", 3);
}

/* What a split engine holds where: only its layers' weights and state on the GPU (less
 * than the whole model's), the pool's layers before the split in host memory; its name
 * says which layers; gpu_layers at or above the layer count is the whole model, a
 * negative count is refused. With host_snapshots, a snapshot restored gives the bits the
 * sequence had and a rollback through it the CPU's logits. */
TEST(cuda_split_memory_and_snapshots) {
    eddy_model *m = tseq_load("models/qwen35-tiny-f32.gguf");
    REQUIRE(m);
    eddy_engine_params p = {.n_ctx = 256, .n_snapshots = 2, .device = EDDY_DEVICE_CUDA, .type_k = EDDY_KV_F32,
                            .type_v = EDDY_KV_F32};
    eddy_engine *whole = tseq_engine(m, p);
    p.gpu_layers = 4;
    eddy_engine *four = tseq_engine(m, p);
    p.gpu_layers = 1, p.host_snapshots = true;
    eddy_engine *e = tseq_engine(m, p);
    REQUIRE(whole && four && e);
    CHECK(whole->gpu_from == 0 && four->gpu_from == 0 && e->gpu_from == 3 && e->sp->mem_from == 3);
    CHECKF(e->gpu->weight_bytes < whole->gpu->weight_bytes / 2, "the GPU holds %zu bytes of weights of the "
           "whole model's %zu", e->gpu->weight_bytes, whole->gpu->weight_bytes);
    /* (its one layer is the attention layer, whose keys and values are most of the state) */
    CHECKF(e->sp->bytes < whole->sp->bytes, "the GPU holds %zu bytes of state, the whole model %zu", e->sp->bytes,
           whole->sp->bytes);
    CHECK(state_layer_mem(e->sp, 0)->host && !state_layer_mem(e->sp, 3)->host && state_k_tiled(e->sp, 2));
    CHECKF(strstr(eddy_engine_device_name(e), "(layers 3..3; the CPU runs 0..2)") != NULL, "%s",
           eddy_engine_device_name(e));
    eddy_engine_free(whole), eddy_engine_free(four);
    eddy_error err;
    eddy_engine *bad = NULL;
    p.gpu_layers = -1;
    CHECK(eddy_engine_new(m, &p, &bad, &err) == EDDY_ERR_ARG && !bad && strstr(err.msg, "GPU layers"));

    check_snapshot_rollback(m, e);
    eddy_engine_free(e);
    eddy_model_free(m);
}
