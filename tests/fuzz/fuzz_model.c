/*
 * fuzz_model.c — libFuzzer target for model loading and evaluation.
 *
 * The input is a recipe (tests/fuzz/model_mutate.h): which tiny model of tests/data
 * to start from and which metadata values, arrays and tensors to change (integer
 * hyperparameters to 0, 1, +-1, x2, 2^31-1, x2^31; arrays cut short or grown; token
 * lists cut; special ids out of range; keys retyped or dropped). The rebuilt file is
 * loaded and, when eddy accepts it, run: a context, a 3-token forward, sampling and
 * two generated tokens, all through the public API. A refusal must be one line and
 * must not be out of memory (no request above 256 MiB is allowed: the tiny models
 * need a few MiB); a crash, a sanitizer report, a leak or libFuzzer's memory limit is
 * a failure. Seeds: tests/data/fuzz-seeds/fuzz_model (the committed corpus, which
 * test_model_mutations.c also runs).
 *
 * Run from the repository root (the base models are read from tests/data, or from
 * $EDDY_TEST_DATA):  make fuzz FUZZ_SECONDS=600
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "model_mutate.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *dir = getenv("EDDY_TEST_DATA");
    if (!mm_open_bases(dir ? dir : "tests/data")) {
        fprintf(stderr, "fuzz_model: run it from the repository root, or set EDDY_TEST_DATA\n");
        exit(2);
    }
    eddy_log_set_level(EDDY_LOG_ERROR); /* mutated tokenizers warn about their merges */
    alloc_set_request_limit((size_t)256 << 20);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mm_recipe r = mm_parse(data, size);
    mm_desc d;
    eddy_error err;
    eddy_status s;
    int64_t refusals = alloc_limit_refusals();
    const char *why = mm_check(&r, &s, &d, &err);
    if (!why && alloc_limit_refusals() != refusals) why = "a request above 256 MiB was made";
    if (why) {
        fprintf(stderr, "fuzz_model: %s\n  recipe: %s\n", why, d.text);
        abort();
    }
    return 0;
}
