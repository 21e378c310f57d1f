/*
 * test_text_parity.c — eddy's tokenizers against the reference tokenizers, id for
 * id, on the committed cases (tests/data/text, made by scripts/gen_text_data.py):
 * Qwen3 and SmolLM2 with Hugging Face tokenizers, the Llama-3 / Qwen3.5 / GPT-2
 * pre-tokenizers over Qwen3's vocabulary, and SentencePiece BPE with the
 * sentencepiece library. The bar is 100% identical ids; the first mismatches are
 * printed with the case, eddy's ids and the expected ones.
 *
 * Also: decode(encode(s)) == s on the same cases (after NFC where the tokenizer
 * applies it), and the streaming decoder against the whole-sequence one.
 */
#include <stdlib.h>

#include "test.h"
#include "eddy.h"
#include "text/unicode.h"
#include "text/vocab.h"

/* ==== Loading the cases ==== */

typedef struct {
    char *text;
    size_t len;
} tcase;

typedef struct {
    tcase *c;
    int64_t n;
} tcases;

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Reads cases.txt: one case per line, escaped as the generator writes it. */
static bool load_cases(tcases *out) {
    size_t n;
    char *buf = test_read_file(test_data_path("text/cases.txt"), &n);
    if (!buf) return false;
    int64_t lines = 0;
    for (size_t i = 0; i < n; i++) lines += buf[i] == '\n';
    out->c = calloc((size_t)lines + 1, sizeof *out->c);
    out->n = 0;
    size_t i = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && buf[e] != '\n') e++;
        char *t = malloc(e - i + 1);
        size_t k = 0;
        for (size_t j = i; j < e; j++) {
            if (buf[j] != '\\' || j + 1 >= e) {
                t[k++] = buf[j];
                continue;
            }
            char x = buf[++j];
            if (x == 'n') t[k++] = '\n';
            else if (x == 'r') t[k++] = '\r';
            else if (x == 't') t[k++] = '\t';
            else if (x == 'x' && j + 2 < e) {
                t[k++] = (char)(hexval(buf[j + 1]) * 16 + hexval(buf[j + 2]));
                j += 2;
            } else
                t[k++] = x;
        }
        t[k] = '\0';
        out->c[out->n].text = t;
        out->c[out->n].len = k;
        out->n++;
        i = e + 1;
    }
    free(buf);
    return true;
}

static void free_cases(tcases *c) {
    for (int64_t i = 0; i < c->n; i++) free(c->c[i].text);
    free(c->c);
}

/* ==== Expected ids ==== */

typedef struct {
    int64_t index; /* case index */
    int32_t *ids;
    int64_t n;
} expect_row;

/* Reads NAME.ids: either one line per case, or "INDEX: ids" lines. */
static expect_row *load_ids(const char *name, int64_t *n_rows) {
    char rel[128];
    snprintf(rel, sizeof rel, "text/%s", name);
    size_t n;
    char *buf = test_read_file(test_data_path(rel), &n);
    if (!buf) return NULL;
    int64_t lines = 0;
    for (size_t i = 0; i < n; i++) lines += buf[i] == '\n';
    expect_row *rows = calloc((size_t)lines + 1, sizeof *rows);
    int64_t r = 0;
    char *p = buf, *end = buf + n;
    while (p < end) {
        char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e) e = end;
        *e = '\0';
        char *colon = strchr(p, ':');
        rows[r].index = colon ? strtoll(p, NULL, 10) : r;
        char *q = colon ? colon + 1 : p;
        int64_t cnt = 0;
        for (char *s = q; *s; s++)
            if (*s >= '0' && *s <= '9' && (s == q || s[-1] == ' ')) cnt++;
        rows[r].ids = malloc((size_t)(cnt + 1) * sizeof(int32_t));
        for (int64_t k = 0; k < cnt; k++) rows[r].ids[k] = (int32_t)strtol(q, &q, 10);
        rows[r].n = cnt;
        r++;
        p = e + 1;
    }
    free(buf);
    *n_rows = r;
    return rows;
}

static void free_rows(expect_row *rows, int64_t n) {
    for (int64_t i = 0; i < n; i++) free(rows[i].ids);
    free(rows);
}

static eddy_vocab *load_vocab(const char *rel) {
    eddy_gguf *f;
    eddy_error err;
    if (eddy_gguf_open(test_data_path(rel), &f, &err) != EDDY_OK) {
        CHECKF(false, "%s", err.msg);
        return NULL;
    }
    eddy_vocab *v = NULL;
    if (eddy_vocab_load(f, &v, &err) != EDDY_OK) CHECKF(false, "%s", err.msg);
    eddy_gguf_close(f);
    return v;
}

static void print_case(const tcase *c) {
    fprintf(stderr, "    case \"");
    for (size_t i = 0; i < c->len && i < 200; i++) {
        unsigned char x = (unsigned char)c->text[i];
        if (x == '\n') fprintf(stderr, "\\n");
        else if (x < 0x20 || x == 0x7F) fprintf(stderr, "\\x%02x", x);
        else fputc(x, stderr);
    }
    fprintf(stderr, "\"%s\n", c->len > 200 ? " ..." : "");
}

static void print_ids(const char *what, const int32_t *ids, int64_t n) {
    fprintf(stderr, "    %s:", what);
    for (int64_t i = 0; i < n && i < 60; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "%s\n", n > 60 ? " ..." : "");
}

/* Tokenizes every case that has an expected row and compares. Returns matches. */
static int64_t compare_all(const char *label, const eddy_vocab *v, const tcases *cases, const char *ids_file,
                           unsigned flags, int64_t *n_rows_out) {
    int64_t n_rows = 0;
    expect_row *rows = load_ids(ids_file, &n_rows);
    *n_rows_out = n_rows;
    if (!CHECKF(rows != NULL, "cannot read %s", ids_file)) return 0;
    int64_t ok = 0, shown = 0;
    for (int64_t r = 0; r < n_rows; r++) {
        if (!CHECK(rows[r].index >= 0 && rows[r].index < cases->n)) break;
        const tcase *c = &cases->c[rows[r].index];
        eddy_token *ids = NULL;
        int64_t n = 0;
        eddy_error err;
        if (eddy_tokenize(v, c->text, c->len, flags, &ids, &n, &err) != EDDY_OK) {
            CHECKF(false, "%s: case %lld: %s", label, (long long)rows[r].index, err.msg);
            continue;
        }
        bool same = n == rows[r].n && (n == 0 || memcmp(ids, rows[r].ids, (size_t)n * sizeof *ids) == 0);
        if (same) {
            ok++;
        } else if (shown++ < 5) {
            fprintf(stderr, "  %s: case %lld differs\n", label, (long long)rows[r].index);
            print_case(c);
            print_ids("eddy    ", ids, n);
            print_ids("expected", rows[r].ids, rows[r].n);
        }
        eddy_buffer_free(ids);
    }
    CHECKF(ok == n_rows, "%s: %lld of %lld cases identical", label, (long long)ok, (long long)n_rows);
    if (getenv("EDDY_TEST_VERBOSE"))
        printf("  %s: %lld/%lld cases identical\n", label, (long long)ok, (long long)n_rows);
    free_rows(rows, n_rows);
    return ok;
}

/* ==== The parity tests ==== */

TEST(text_parity_qwen3) {
    tcases cases;
    REQUIRE(load_cases(&cases));
    CHECK(cases.n >= 20000);
    eddy_vocab *v = load_vocab("text/qwen3.gguf");
    if (v) {
        int64_t n;
        compare_all("qwen3", v, &cases, "qwen3.ids", 0, &n);
        CHECK(n == cases.n);
        eddy_vocab_free(v);
    }
    free_cases(&cases);
}

TEST(text_parity_smollm2) {
    tcases cases;
    REQUIRE(load_cases(&cases));
    eddy_vocab *v = load_vocab("text/smollm2.gguf");
    if (v) {
        int64_t n;
        compare_all("smollm2", v, &cases, "smollm2.ids", 0, &n);
        CHECK(n == cases.n);
        eddy_vocab_free(v);
    }
    free_cases(&cases);
}

/* The other pre-tokenizers, over Qwen3's vocabulary (the reference was configured
 * the same way: see scripts/gen_text_data.py). */
TEST(text_parity_pretokenizers) {
    tcases cases;
    REQUIRE(load_cases(&cases));
    eddy_vocab *v = load_vocab("text/qwen3.gguf");
    if (v) {
        int64_t n;
        v->pre = PRE_LLAMA3, v->nfc = false, v->ignore_merges = true;
        compare_all("llama3 pre-tokenizer", v, &cases, "qwen3-llama3.ids", 0, &n);
        v->pre = PRE_QWEN35, v->nfc = true, v->ignore_merges = false;
        compare_all("qwen35 pre-tokenizer", v, &cases, "qwen3-qwen35.ids", 0, &n);
        v->pre = PRE_GPT2, v->nfc = false, v->ignore_merges = false;
        compare_all("gpt2 pre-tokenizer", v, &cases, "qwen3-gpt2.ids", 0, &n);
        eddy_vocab_free(v);
    }
    free_cases(&cases);
}

TEST(text_parity_spm) {
    tcases cases;
    REQUIRE(load_cases(&cases));
    eddy_vocab *v = load_vocab("text/spm.gguf");
    if (v) {
        int64_t n;
        /* sentencepiece knows no special tokens: they are text there */
        compare_all("spm", v, &cases, "spm.ids", EDDY_TOKENIZE_NO_SPECIAL, &n);
        CHECK(n > 4000);
        eddy_vocab_free(v);
    }
    free_cases(&cases);
}

/* ==== Round trips over the same cases ==== */

static bool valid_utf8(const char *s, size_t n) {
    bool inc;
    return utf8_valid_prefix((const uint8_t *)s, n, &inc) == n;
}

/* decode(encode(s)) == s for valid UTF-8 (already in NFC when the tokenizer
 * normalizes: other strings come back normalized) made of bytes the vocabulary has
 * tokens for (a byte-level vocabulary may lack some, which are dropped). */
static void round_trip_all(const char *rel, bool require_nfc) {
    tcases cases;
    REQUIRE(load_cases(&cases));
    eddy_vocab *v = load_vocab(rel);
    if (!v) {
        free_cases(&cases);
        return;
    }
    const uint8_t *table = uni_flag_table();
    int64_t checked = 0, bad = 0;
    for (int64_t i = 0; i < cases.n; i++) {
        tcase *c = &cases.c[i];
        if (!valid_utf8(c->text, c->len)) continue;
        if (require_nfc && !uni_is_nfc_quick(table, (const uint8_t *)c->text, c->len)) continue;
        bool has_all = true; /* SmolLM2 has no tokens for bytes 0x1C..0x1F: they are dropped */
        for (size_t j = 0; j < c->len; j++) has_all &= v->byte_token[(uint8_t)c->text[j]] >= 0;
        if (!has_all) continue;
        eddy_token *ids;
        int64_t n;
        eddy_error err;
        if (!CHECK(eddy_tokenize(v, c->text, c->len, 0, &ids, &n, &err) == EDDY_OK)) continue;
        char *back;
        size_t len;
        if (CHECK(eddy_detokenize(v, ids, n, 0, &back, &len, &err) == EDDY_OK)) {
            checked++;
            if ((len != c->len || memcmp(back, c->text, len) != 0) && bad++ < 5) {
                fprintf(stderr, "  %s: round trip differs on case %lld\n", rel, (long long)i);
                print_case(c);
            }
            /* streaming, one token at a time, gives the same text */
            eddy_detok *d;
            if (CHECK(eddy_detok_new(v, 0, &d, &err) == EDDY_OK)) {
                char *acc = malloc(len + 8);
                size_t k = 0;
                bool fits = true;
                for (int64_t j = 0; j < n && fits; j++) {
                    const char *t;
                    size_t tl;
                    CHECK(eddy_detok_push(d, ids[j], &t, &tl, &err) == EDDY_OK);
                    CHECK(valid_utf8(t, tl));
                    if (k + tl > len) fits = false;
                    else memcpy(acc + k, t, tl), k += tl;
                }
                const char *t;
                size_t tl;
                eddy_detok_flush(d, &t, &tl);
                CHECKF(fits && tl == 0 && k == len && memcmp(acc, back, len) == 0,
                       "%s: streamed text differs on case %lld", rel, (long long)i);
                free(acc);
                eddy_detok_free(d);
            }
            eddy_buffer_free(back);
        }
        eddy_buffer_free(ids);
    }
    CHECKF(bad == 0, "%s: %lld of %lld round trips differ", rel, (long long)bad, (long long)checked);
    CHECK(checked > 1000);
    eddy_vocab_free(v);
    free_cases(&cases);
}

TEST(text_round_trip_qwen3) { round_trip_all("text/qwen3.gguf", true); }
TEST(text_round_trip_smollm2) { round_trip_all("text/smollm2.gguf", false); }
TEST(text_round_trip_spm) { round_trip_all("text/spm.gguf", false); }
