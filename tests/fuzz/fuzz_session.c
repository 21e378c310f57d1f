/*
 * fuzz_session.c — libFuzzer target for the session-file loader (src/state/session.c).
 *
 * Session files are untrusted input: any bytes given to eddy_seq_load_buffer must
 * load or be refused with an error — never crash, read out of bounds or change the
 * sequence when refused. Each input is tried twice: as it is (which the checksums
 * mostly stop at the header), and with its header, table and section checksums
 * recomputed over whatever the mutations left, so the checks behind them (sizes,
 * offsets, kinds, layers, token ids, the sampler state) are reached too. The model is
 * the tiny Qwen3.5 hybrid (attention, conv and delta-rule sections); the seeds
 * (tests/data/fuzz-seeds/fuzz_session) are sessions saved from it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "eddy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static eddy_model *model;
static eddy_engine *engine;
static eddy_seq *seq;
static eddy_sampler *sampler;

static void setup(void) {
    const char *dir = getenv("EDDY_TEST_DATA");
    char path[4096];
    snprintf(path, sizeof path, "%s/models/qwen35-tiny-f32.gguf", dir ? dir : "tests/data");
    eddy_engine_params ep = {.n_ctx = 512, .n_seq_max = 1, .n_threads = 1};
    eddy_sampler_params sp = eddy_sampler_default_params();
    if (eddy_model_load(path, &model, NULL) != EDDY_OK || eddy_engine_new(model, &ep, &engine, NULL) != EDDY_OK ||
        eddy_seq_new(engine, &seq, NULL) != EDDY_OK ||
        eddy_sampler_new(&sp, eddy_model_n_vocab(model), &sampler, NULL) != EDDY_OK) {
        fprintf(stderr, "fuzz_session: cannot load %s (run from the repository root or set EDDY_TEST_DATA)\n", path);
        abort();
    }
}

static uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static void wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Recomputes every checksum of a would-be session file in place (and the size). */
static void fix_checksums(uint8_t *b, size_t n) {
    if (n < 128) return;
    const uint64_t n_sec = (uint64_t)b[60] | (uint64_t)b[61] << 8 | (uint64_t)b[62] << 16 | (uint64_t)b[63] << 24;
    if (n_sec <= (n - 128) / 32) {
        for (uint64_t i = 0; i < n_sec; i++) {
            uint8_t *e = b + 128 + 32 * i;
            const uint64_t off = rd64(e + 8), bytes = rd64(e + 16);
            if (off <= n && bytes <= n - off) wr64(e + 24, XXH3_64bits(b + off, (size_t)bytes));
        }
        wr64(b + 72, XXH3_64bits(b + 128, (size_t)(32 * n_sec)));
    }
    wr64(b + 64, n);
    wr64(b + 120, XXH3_64bits(b, 120));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!model) setup();
    eddy_error err;
    const int32_t one = 1;
    eddy_seq_clear(seq);
    eddy_seq_eval(seq, &one, 1, NULL, 0, NULL); /* a refused load must leave this alone */
    if (eddy_seq_load_buffer(seq, sampler, data, size, &err) != EDDY_OK && eddy_seq_n_pos(seq) != 1) abort();
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    fix_checksums(copy, size);
    eddy_seq_clear(seq);
    eddy_seq_eval(seq, &one, 1, NULL, 0, NULL);
    if (eddy_seq_load_buffer(seq, sampler, copy, size, &err) == EDDY_OK) {
        /* a loaded state must be usable */
        if (eddy_seq_n_pos(seq) < eddy_engine_n_ctx(engine)) eddy_seq_eval(seq, &one, 1, NULL, 0, NULL);
    } else if (eddy_seq_n_pos(seq) != 1) {
        abort();
    }
    free(copy);
    return 0;
}
