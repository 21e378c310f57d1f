/*
 * test_text.c — unit tests of src/text: UTF-8, NFC, vocabulary loading and its
 * errors, tokenizer options, the streaming decoder, out-of-memory paths, and the
 * chat-template language (each snippet's expected output is what Jinja2 3.1.6
 * renders under transformers' chat-template environment).
 * The id-for-id parity with the reference tokenizers is test_text_parity.c.
 */
#include <stdlib.h>

#include "test.h"
#include "eddy.h"
#include "base/alloc.h"
#include "gguf/gguf.h"
#include "text/jinja.h"
#include "text/unicode.h"
#include "text/vocab.h"

static eddy_vocab *load_rel(const char *rel) {
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

/* Tokenizes s (flags) and compares with want[0 .. n). */
static bool tok_is(const eddy_vocab *v, const char *s, size_t len, unsigned flags, const int32_t *want, int64_t n) {
    eddy_token *ids;
    int64_t k;
    eddy_error err;
    if (!CHECKF(eddy_tokenize(v, s, len, flags, &ids, &k, &err) == EDDY_OK, "%s", err.msg)) return false;
    bool same = k == n && (n == 0 || memcmp(ids, want, (size_t)n * sizeof *ids) == 0);
    if (!same) {
        fprintf(stderr, "  tokens of \"%.*s\":", (int)len, s);
        for (int64_t i = 0; i < k; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    eddy_buffer_free(ids);
    return CHECKF(same, "unexpected tokens for \"%.*s\"", (int)len, s);
}

/* ==== UTF-8 ==== */

TEST(text_utf8_decode) {
    struct {
        const char *s;
        int want; /* length, or -(maximal subpart) */
        uint32_t cp;
    } cases[] = {
        {"A", 1, 0x41},          {"\xC3\xA9", 2, 0xE9},      {"\xE2\x82\xAC", 3, 0x20AC},
        {"\xF0\x9F\x98\x80", 4, 0x1F600}, {"\xF4\x8F\xBF\xBF", 4, 0x10FFFF},
        {"\x80", -1, 0},         {"\xC0\xAF", -1, 0},        {"\xC1\xBF", -1, 0}, /* overlong leads */
        {"\xE0\x80\x80", -1, 0}, {"\xE0\xA0", -2, 0},        /* overlong; truncated */
        {"\xED\xA0\x80", -1, 0}, /* surrogate */
        {"\xF4\x90\x80\x80", -1, 0}, {"\xF5\x80", -1, 0}, {"\xFF", -1, 0},
        {"\xE4\xB8", -2, 0},     {"\xE4\xB8x", -2, 0},       {"\xF0\x9F\x98", -3, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t cp = 0;
        int k = utf8_decode((const uint8_t *)cases[i].s, strlen(cases[i].s), &cp);
        CHECKF(k == cases[i].want, "case %zu: %d vs %d", i, k, cases[i].want);
        if (k > 0) CHECK_EQ(cp, cases[i].cp);
    }
    uint8_t buf[4];
    for (uint32_t cp = 0; cp <= UNI_MAX_CP; cp += cp < 0x800 ? 1 : 97) {
        if (cp >= 0xD800 && cp < 0xE000) continue;
        int n = utf8_encode(cp, buf);
        uint32_t back;
        if (!CHECK_EQ(utf8_decode(buf, (size_t)n, &back), n) || !CHECK_EQ(back, cp)) break;
    }
    bool inc;
    CHECK_EQ(utf8_valid_prefix((const uint8_t *)"ab\xE4\xB8", 4, &inc), 2);
    CHECK(inc);
    CHECK_EQ(utf8_valid_prefix((const uint8_t *)"ab\xFF", 3, &inc), 2);
    CHECK(!inc);
    CHECK_EQ(utf8_valid_prefix((const uint8_t *)"ab\xE4x", 4, &inc), 2);
    CHECK(!inc);
}

TEST(text_nfc) {
    const struct {
        const char *in, *out;
    } cases[] = {
        {"e\xCC\x81", "\xC3\xA9"},                   /* e + acute -> é */
        {"\xE2\x84\xAB", "\xC3\x85"},                /* ANGSTROM SIGN -> Å (singleton) */
        {"a\xCC\x87\xCC\xA3", "\xE1\xBA\xA1\xCC\x87"}, /* reordered: a + dot below + dot above */
        {"\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81"}, /* Hangul L V T -> 각 */
        {"\xEA\xB0\x80\xE1\x86\xA8", "\xEA\xB0\x81"}, /* LV + T */
        {"\xEF\xAC\x81", "\xEF\xAC\x81"},            /* ﬁ: compatibility only, unchanged */
        {"\xCC\x81x", "\xCC\x81x"},                  /* a mark with nothing before it */
        {"\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC"}, /* excluded composition stays decomposed */
    };
    const uint8_t *table = uni_flag_table();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *out = NULL;
        size_t n = 0, cap = 0;
        uni_cpbuf work = {0};
        const char *in = cases[i].in;
        REQUIRE(uni_nfc((const uint8_t *)in, strlen(in), &out, &n, &cap, &work));
        CHECKF(n == strlen(cases[i].out) && memcmp(out, cases[i].out, n) == 0, "NFC case %zu", i);
        CHECK(!uni_is_nfc_quick(table, (const uint8_t *)in, strlen(in)) || strcmp(in, cases[i].out) == 0);
        eddy_free(out);
        uni_cpbuf_free(&work);
    }
    CHECK(uni_is_nfc_quick(table, (const uint8_t *)"plain ascii \xC3\xA9", 14));
}

/* ==== Tokenizer behaviour ==== */

TEST(text_special_tokens) {
    eddy_vocab *v = load_rel("text/qwen3.gguf");
    REQUIRE(v != NULL);
    CHECK_STR(eddy_vocab_describe(v), "qwen2");
    CHECK_EQ(eddy_vocab_n_tokens(v), 151936);
    CHECK_EQ(eddy_vocab_eos(v), 151645);
    CHECK(eddy_vocab_is_control(v, 151644));
    CHECK(!eddy_vocab_is_control(v, 151667)); /* <think> is user-defined */
    CHECK(eddy_vocab_chat_template(v) != NULL);
    const char *s = "<|im_start|>user<think>";
    const int32_t atomic[] = {151644, 872, 151667};
    tok_is(v, s, strlen(s), 0, atomic, 3);
    /* --no-special: the control token is text, the user-defined one still atomic */
    const int32_t as_text[] = {27, 91, 318, 4906, 91, 29, 872, 151667};
    tok_is(v, s, strlen(s), EDDY_TOKENIZE_NO_SPECIAL, as_text, 8);
    /* invalid bytes become byte tokens, and come back byte for byte */
    const char bad[] = "a\xFF\xE4\xB8z";
    eddy_token *ids;
    int64_t n;
    eddy_error err;
    REQUIRE(eddy_tokenize(v, bad, sizeof bad - 1, 0, &ids, &n, &err) == EDDY_OK);
    char *back;
    size_t len;
    REQUIRE(eddy_detokenize(v, ids, n, 0, &back, &len, &err) == EDDY_OK);
    CHECK(len == sizeof bad - 1 && memcmp(back, bad, len) == 0);
    eddy_buffer_free(back);
    eddy_buffer_free(ids);
    /* detokenize: control tokens can be left out; bad ids are errors */
    const eddy_token some[] = {151644, 872, 151645};
    REQUIRE(eddy_detokenize(v, some, 3, EDDY_DETOK_SKIP_CONTROL, &back, &len, &err) == EDDY_OK);
    CHECK_STR(back, "user");
    eddy_buffer_free(back);
    const eddy_token wrong[] = {5, 999999};
    CHECK(eddy_detokenize(v, wrong, 2, 0, &back, &len, &err) == EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "999999");
    eddy_vocab_free(v);
}

TEST(text_spm_bos_and_bytes) {
    eddy_vocab *v = load_rel("text/spm.gguf");
    REQUIRE(v != NULL);
    eddy_token *ids;
    int64_t n;
    eddy_error err;
    REQUIRE(eddy_tokenize(v, "Call me Ishmael.", 16, EDDY_TOKENIZE_ADD_SPECIAL, &ids, &n, &err) == EDDY_OK);
    CHECK(n >= 2 && ids[0] == eddy_vocab_bos(v));
    char *text;
    size_t len;
    REQUIRE(eddy_detokenize(v, ids, n, EDDY_DETOK_SKIP_CONTROL, &text, &len, &err) == EDDY_OK);
    CHECK_STR(text, "Call me Ishmael.");
    eddy_buffer_free(text);
    eddy_buffer_free(ids);
    /* characters the vocabulary lacks fall back to <0xNN> byte tokens; invalid bytes too */
    const char s[] = "\xE4\xB8\xAD\xFF";
    REQUIRE(eddy_tokenize(v, s, sizeof s - 1, 0, &ids, &n, &err) == EDDY_OK);
    REQUIRE(eddy_detokenize(v, ids, n, 0, &text, &len, &err) == EDDY_OK);
    CHECK(len == sizeof s - 1 && memcmp(text, s, len) == 0); /* the marker put in front is dropped again */
    eddy_buffer_free(text);
    eddy_buffer_free(ids);
    eddy_vocab_free(v);
}

/* The streaming decoder holds back incomplete characters and replaces invalid ones. */
TEST(text_detok_stream) {
    eddy_vocab *v = load_rel("text/qwen3.gguf");
    REQUIRE(v != NULL);
    eddy_detok *d;
    eddy_error err;
    REQUIRE(eddy_detok_new(v, 0, &d, &err) == EDDY_OK);
    const char *t;
    size_t len;
    const uint8_t thumbs[] = {0xF0, 0x9F, 0x91, 0x8D};
    for (int i = 0; i < 3; i++) {
        REQUIRE(eddy_detok_push(d, v->byte_token[thumbs[i]], &t, &len, &err) == EDDY_OK);
        CHECK_EQ(len, 0);
    }
    REQUIRE(eddy_detok_push(d, v->byte_token[thumbs[3]], &t, &len, &err) == EDDY_OK);
    CHECK(len == 4 && memcmp(t, thumbs, 4) == 0);
    /* a broken sequence: the held bytes become one U+FFFD, the next text follows */
    REQUIRE(eddy_detok_push(d, v->byte_token[0xE4], &t, &len, &err) == EDDY_OK);
    CHECK_EQ(len, 0);
    REQUIRE(eddy_detok_push(d, v->byte_token['x'], &t, &len, &err) == EDDY_OK);
    CHECK(len == 4 && memcmp(t, "\xEF\xBF\xBDx", 4) == 0);
    REQUIRE(eddy_detok_push(d, v->byte_token[0xFF], &t, &len, &err) == EDDY_OK);
    CHECK(len == 3 && memcmp(t, "\xEF\xBF\xBD", 3) == 0);
    /* an unfinished character at the end */
    REQUIRE(eddy_detok_push(d, v->byte_token[0xC3], &t, &len, &err) == EDDY_OK);
    CHECK_EQ(len, 0);
    eddy_detok_flush(d, &t, &len);
    CHECK(len == 3 && memcmp(t, "\xEF\xBF\xBD", 3) == 0);
    CHECK(eddy_detok_push(d, -1, &t, &len, &err) == EDDY_ERR_ARG);
    eddy_detok_free(d);

    /* random byte soup: every piece is valid UTF-8 and together they equal
     * the whole decode with U+FFFD for invalid sequences */
    test_rng r = test_rng_new();
    for (int round = 0; round < 50; round++) {
        int64_t n = 1 + test_rng_below(&r, 40);
        eddy_token ids[40];
        for (int64_t i = 0; i < n; i++)
            ids[i] = test_rng_below(&r, 4) ? v->byte_token[test_rng_below(&r, 256)] : (eddy_token)test_rng_below(&r, 151000);
        REQUIRE(eddy_detok_new(v, 0, &d, &err) == EDDY_OK);
        char acc[2048];
        size_t k = 0;
        bool inc;
        for (int64_t i = 0; i < n; i++) {
            REQUIRE(eddy_detok_push(d, ids[i], &t, &len, &err) == EDDY_OK);
            CHECK(utf8_valid_prefix((const uint8_t *)t, len, &inc) == len);
            if (k + len < sizeof acc) memcpy(acc + k, t, len), k += len;
        }
        eddy_detok_flush(d, &t, &len);
        if (k + len < sizeof acc) memcpy(acc + k, t, len), k += len;
        CHECK(utf8_valid_prefix((const uint8_t *)acc, k, &inc) == k);
        eddy_detok_free(d);
    }
    eddy_vocab_free(v);
}

/* ==== Loading: bad metadata is a one-line error ==== */

static eddy_status load_built(gguf_writer *w, eddy_vocab **v, eddy_error *err) {
    uint8_t *buf;
    uint64_t size;
    eddy_status st = gguf_writer_finish(w, &buf, &size, err);
    gguf_writer_free(w);
    if (st != EDDY_OK) return st;
    gguf_file *f;
    st = gguf_open_memory(&f, buf, size, "test.gguf", err);
    if (st == EDDY_OK) {
        st = eddy_vocab_load(f, v, err);
        gguf_close(f);
    }
    eddy_free(buf);
    return st;
}

/* A tiny byte-level BPE vocabulary: the 256 byte tokens, "ab", "abc", <|end|>. */
static gguf_writer *tiny_bpe(const char *pre, int32_t bos) {
    static char names[259][16];
    static const char *toks[259];
    int next = 0x100;
    for (int b = 0; b < 256; b++) {
        bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        uint32_t cp = self ? (uint32_t)b : (uint32_t)next++;
        int n = utf8_encode(cp, (uint8_t *)names[b]);
        names[b][n] = '\0';
        toks[b] = names[b];
    }
    toks[256] = "ab";
    toks[257] = "abc";
    toks[258] = "<|end|>";
    int32_t types[259];
    for (int i = 0; i < 259; i++) types[i] = i == 258 ? TOKTYPE_CONTROL : TOKTYPE_NORMAL;
    const char *merges[] = {"a b", "ab c"};
    gguf_writer *w = gguf_writer_new(3, 32);
    gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
    if (pre) gguf_writer_add_str(w, "tokenizer.ggml.pre", pre);
    gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, 259);
    gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 259);
    gguf_writer_add_str_array(w, "tokenizer.ggml.merges", merges, 2);
    gguf_writer_add_int(w, "tokenizer.ggml.bos_token_id", GGUF_TYPE_INT32, bos);
    gguf_writer_add_str(w, "tokenizer.chat_template", "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}");
    return w;
}

TEST(text_vocab_errors) {
    eddy_vocab *v = NULL;
    eddy_error err;
    CHECK(load_built(tiny_bpe("gpt-2", 258), &v, &err) == EDDY_OK);
    if (v) {
        eddy_token *ids;
        int64_t n;
        REQUIRE(eddy_tokenize(v, "abc<|end|>", 10, 0, &ids, &n, &err) == EDDY_OK);
        CHECK(n == 2 && ids[0] == 257 && ids[1] == 258);
        eddy_buffer_free(ids);
        eddy_vocab_free(v);
    }
    CHECK(load_built(tiny_bpe("no-such-pre", 0), &v, &err) == EDDY_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "tokenizer.ggml.pre \"no-such-pre\" is not supported");
    CHECK(load_built(tiny_bpe("gpt-2", 5000), &v, &err) == EDDY_ERR_FORMAT);
    CHECK_CONTAINS(err.msg, "tokenizer.ggml.bos_token_id: token id 5000 is outside the vocabulary");

    gguf_writer *w = gguf_writer_new(3, 32);
    gguf_writer_add_str(w, "general.name", "no tokenizer");
    CHECK(load_built(w, &v, &err) == EDDY_ERR_NOT_FOUND);
    CHECK_CONTAINS(err.msg, "tokenizer.ggml.model is missing");

    w = gguf_writer_new(3, 32);
    gguf_writer_add_str(w, "tokenizer.ggml.model", "bert");
    CHECK(load_built(w, &v, &err) == EDDY_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "\"bert\" is not supported");

    const char *toks[] = {"a", "b"};
    const int32_t types[] = {1};
    w = gguf_writer_new(3, 32);
    gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
    gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, 2);
    gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 1);
    CHECK(load_built(w, &v, &err) == EDDY_ERR_FORMAT);
    CHECK_CONTAINS(err.msg, "tokenizer.ggml.token_type: expected 2 integers");

    const char *bad_merge[] = {"ab"};
    w = gguf_writer_new(3, 32);
    gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, 2);
    gguf_writer_add_str_array(w, "tokenizer.ggml.merges", bad_merge, 1);
    CHECK(load_built(w, &v, &err) == EDDY_ERR_FORMAT);
    CHECK_CONTAINS(err.msg, "tokenizer.ggml.merges[0]");
}

/* Every allocation of loading and tokenizing fails in turn: an error, no leak. */
TEST(text_out_of_memory) {
    uint8_t *buf;
    uint64_t size;
    eddy_error err;
    gguf_writer *w = tiny_bpe("qwen2", 258);
    REQUIRE(gguf_writer_finish(w, &buf, &size, &err) == EDDY_OK);
    gguf_writer_free(w);
    gguf_file *f;
    REQUIRE(gguf_open_memory(&f, buf, size, "tiny", &err) == EDDY_OK);
    int64_t live0 = alloc_live_count();
    bool done = false;
    for (int k = 0; k < 400 && !done; k++) {
        alloc_fail_after(k);
        eddy_vocab *v = NULL;
        eddy_status st = eddy_vocab_load(f, &v, &err);
        eddy_token *ids = NULL;
        int64_t n;
        char *text = NULL;
        size_t len;
        const eddy_chat_message m = {"user", "hi"};
        if (st == EDDY_OK) st = eddy_tokenize(v, "abc abc e\xCC\x81 <|end|>", 20, 0, &ids, &n, &err);
        if (st == EDDY_OK) st = eddy_detokenize(v, ids, n, 0, &text, &len, &err);
        eddy_buffer_free(text);
        text = NULL;
        if (st == EDDY_OK) st = eddy_chat_format(v, &m, 1, NULL, &text, &len, &err);
        alloc_fail_after(-1);
        CHECKF(st == EDDY_OK || st == EDDY_ERR_NOMEM, "allocation %d: %s", k, err.msg);
        done = st == EDDY_OK;
        eddy_buffer_free(text);
        eddy_buffer_free(ids);
        eddy_vocab_free(v);
        CHECKF(alloc_live_count() == live0, "allocation %d leaked %lld blocks", k, (long long)(alloc_live_count() - live0));
    }
    CHECK(done);
    gguf_close(f);
    eddy_free(buf);
}

/* ==== Chat templates ==== */

static const struct {
    const char *tmpl, *want;
} jinja_cases[] = {
#include "test_text_jinja.inc"
};

TEST(text_jinja_language) {
    for (size_t i = 0; i < sizeof jinja_cases / sizeof jinja_cases[0]; i++) {
        jarena *a = jarena_new();
        jtemplate t;
        eddy_error err;
        jbuf out = {0};
        eddy_status st = jinja_parse(a, jinja_cases[i].tmpl, strlen(jinja_cases[i].tmpl), &t, &err);
        if (st == EDDY_OK) st = jinja_render(a, &t, jv_dict_new(a), &out, &err);
        if (CHECKF(st == EDDY_OK, "snippet %zu: %s", i, err.msg))
            CHECKF(out.n == strlen(jinja_cases[i].want) && memcmp(out.p, jinja_cases[i].want, out.n) == 0,
                   "snippet %zu:\n  %s\n  eddy:     %s\n  expected: %s", i, jinja_cases[i].tmpl, out.p ? out.p : "",
                   jinja_cases[i].want);
        jbuf_free(&out);
        jarena_free(a);
    }
}

static eddy_status fmt(const eddy_vocab *v, const char *tmpl, const char *msgs_json, char **out) {
    eddy_chat_options opt = {tmpl, true, -1, NULL};
    size_t len;
    eddy_error err;
    eddy_status st = eddy_chat_format_json(v, msgs_json, &opt, out, &len, &err);
    if (st != EDDY_OK) {
        *out = NULL;
        fprintf(stderr, "  (%s)\n", err.msg);
    }
    return st;
}

TEST(text_chat_api) {
    eddy_vocab *v = load_rel("text/smollm2.gguf");
    REQUIRE(v != NULL);
    /* the struct API, the file's template, and the special tokens from the file */
    const eddy_chat_message msgs[] = {{"user", "Hi"}};
    eddy_chat_options opt = {NULL, true, -1, NULL};
    char *out;
    size_t len;
    eddy_error err;
    REQUIRE(eddy_chat_format(v, msgs, 1, &opt, &out, &len, &err) == EDDY_OK);
    CHECK_STR(out, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                   "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    eddy_buffer_free(out);
    REQUIRE(fmt(v, "{{ bos_token }}|{{ eos_token }}|{{ tools }}|{{ add_generation_prompt }}", "[]", &out) == EDDY_OK);
    CHECK_STR(out, "<|im_start|>|<|im_end|>|None|True");
    eddy_buffer_free(out);
    /* built-in templates */
    opt.template_text = "chatml";
    REQUIRE(eddy_chat_format(v, msgs, 1, &opt, &out, &len, &err) == EDDY_OK);
    CHECK_STR(out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    eddy_buffer_free(out);
    opt.template_text = "llama3";
    opt.add_generation_prompt = false;
    REQUIRE(eddy_chat_format(v, msgs, 1, &opt, &out, &len, &err) == EDDY_OK);
    CHECK_STR(out, "<|im_start|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
    eddy_buffer_free(out);
    /* enable_thinking and extra variables */
    opt.template_text = "{{ enable_thinking }} {{ x }}";
    opt.enable_thinking = 0;
    opt.extra_json = "{\"x\": [1, \"two\"]}";
    REQUIRE(eddy_chat_format(v, msgs, 1, &opt, &out, &len, &err) == EDDY_OK);
    CHECK_STR(out, "False [1, 'two']");
    eddy_buffer_free(out);
    /* reasoning fields are aliased as transformers does */
    REQUIRE(fmt(v, "{% for m in messages %}{{ m|tojson }}{% endfor %}",
                "[{\"role\": \"assistant\", \"content\": \"x\", \"reasoning\": \"r\"}]", &out) == EDDY_OK);
    CHECK_STR(out, "{\"thinking\": \"r\", \"role\": \"assistant\", \"content\": \"x\", \"reasoning\": \"r\", "
                   "\"reasoning_content\": \"r\"}");
    eddy_buffer_free(out);

    /* errors: one line each, unsupported constructs name the override */
    opt = (eddy_chat_options){"{% include 'x' %}", true, -1, NULL};
    CHECK(eddy_chat_format(v, msgs, 1, &opt, &out, &len, &err) == EDDY_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "'include' statement is not supported");
    CHECK_CONTAINS(err.msg, "--chat-template");
    opt.template_text = "{{ messages|wordcount }}";
    CHECK(eddy_chat_format(v, msgs, 1, &opt, &out, &len, &err) == EDDY_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "the filter 'wordcount'");
    CHECK_CONTAINS(err.msg, "--chat-template");
    opt.template_text = "{{ raise_exception('Only user and assistant roles') }}";
    CHECK(eddy_chat_format(v, msgs, 1, &opt, &out, &len, &err) == EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "Only user and assistant roles");
    opt.template_text = "{{ nothing.here }}";
    CHECK(eddy_chat_format(v, msgs, 1, &opt, &out, &len, &err) == EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "'nothing' is undefined");
    opt.template_text = "{% for x in y %}";
    CHECK(eddy_chat_format(v, msgs, 1, &opt, &out, &len, &err) == EDDY_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "endfor");
    opt.template_text = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
    CHECK(eddy_chat_format(v, msgs, 1, &opt, &out, &len, &err) == EDDY_ERR_ARG);
    CHECK(strstr(err.msg, "too long") || strstr(err.msg, "MiB"));
    opt.template_text = "{{ 'x' * 100000000 }}";
    CHECK(eddy_chat_format(v, msgs, 1, &opt, &out, &len, &err) == EDDY_ERR_ARG);
    opt.template_text = "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}";
    CHECK(eddy_chat_format(v, msgs, 1, &opt, &out, &len, &err) == EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "nested too deeply");
    CHECK(eddy_chat_format_json(v, "[{\"role\": ", &opt, &out, &len, &err) == EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "messages: JSON");
    opt.extra_json = "[1]";
    CHECK(eddy_chat_format(v, msgs, 1, &opt, &out, &len, &err) == EDDY_ERR_ARG);
    eddy_vocab_free(v);

    /* a file without a template */
    eddy_vocab *spm = load_rel("text/spm.gguf");
    REQUIRE(spm != NULL);
    opt = (eddy_chat_options){NULL, true, -1, NULL};
    CHECK(eddy_chat_format(spm, msgs, 1, &opt, &out, &len, &err) == EDDY_ERR_NOT_FOUND);
    CHECK_CONTAINS(err.msg, "--chat-template");
    eddy_vocab_free(spm);
}
