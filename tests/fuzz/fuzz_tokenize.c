/*
 * fuzz_tokenize.c — libFuzzer target for the tokenizers and decoders.
 *
 * Tokenizes arbitrary bytes with the Qwen3 vocabulary (and, for a quarter of the
 * inputs, the SentencePiece one), with or without special tokens, then decodes the
 * ids whole and streamed. Checks, beyond "no crash": every streamed piece is valid
 * UTF-8, and decode(encode(x)) == x whenever x needs no normalization (its valid
 * parts pass the NFC quick check).
 *
 * The vocabularies come from tests/data/text (run from the repository root, or set
 * EDDY_TEST_DATA).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "text/unicode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static eddy_vocab *load(const char *name) {
    const char *dir = getenv("EDDY_TEST_DATA");
    char path[1024];
    snprintf(path, sizeof path, "%s/text/%s", dir ? dir : "tests/data", name);
    eddy_gguf *f;
    eddy_vocab *v = NULL;
    eddy_error err;
    if (eddy_gguf_open(path, &f, &err) != EDDY_OK || eddy_vocab_load(f, &v, &err) != EDDY_OK) {
        fprintf(stderr, "fuzz_tokenize: %s\n", err.msg);
        abort();
    }
    eddy_gguf_close(f);
    return v;
}

static bool nfc_stable(const uint8_t *s, size_t n) {
    const uint8_t *table = uni_flag_table();
    size_t i = 0;
    while (i < n) {
        bool inc;
        size_t k = utf8_valid_prefix(s + i, n - i, &inc);
        if (!uni_is_nfc_quick(table, s + i, k)) return false;
        i += k;
        if (i < n) {
            uint32_t cp;
            int bad = utf8_decode(s + i, n - i, &cp);
            i += (size_t)(bad < 0 ? -bad : bad);
        }
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static eddy_vocab *qwen, *spm;
    if (!qwen) {
        qwen = load("qwen3.gguf");
        spm = load("spm.gguf");
    }
    if (size == 0) return 0;
    unsigned mode = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    eddy_vocab *v = (mode & 3) == 3 ? spm : qwen;
    unsigned flags = (mode & 4) ? EDDY_TOKENIZE_NO_SPECIAL : 0;
    eddy_token *ids;
    int64_t n;
    eddy_error err;
    if (eddy_tokenize(v, text, len, flags, &ids, &n, &err) != EDDY_OK) abort();
    char *back;
    size_t blen;
    if (eddy_detokenize(v, ids, n, 0, &back, &blen, &err) != EDDY_OK) abort();
    if (v == qwen && nfc_stable((const uint8_t *)text, len) && (blen != len || memcmp(back, text, len) != 0)) abort();
    eddy_detok *d;
    if (eddy_detok_new(v, 0, &d, &err) != EDDY_OK) abort();
    for (int64_t i = 0; i < n; i++) {
        const char *t;
        size_t tl;
        bool inc;
        if (eddy_detok_push(d, ids[i], &t, &tl, &err) != EDDY_OK) abort();
        if (utf8_valid_prefix((const uint8_t *)t, tl, &inc) != tl) abort();
    }
    eddy_detok_free(d);
    eddy_buffer_free(back);
    eddy_buffer_free(ids);
    return 0;
}
