/*
 * test_generate.c — the generation loop on the tiny models: greedy tokens are the
 * argmax of the logits a single prefill gives for the same sequence, the stream of
 * text equals the detokenized ids, seeds reproduce, limits stop the loop, ignore_eog
 * never lets an end-of-generation token end it.
 */
#include "test.h"

#include <stdlib.h>

#include "eddy.h"
#include "test_seq.h"

typedef struct {
    eddy_token toks[256];
    int64_t n;
    char text[4096];
    size_t len;
} collected;

static int collect(void *user, eddy_token t, const char *text, size_t len) {
    collected *c = user;
    if (t >= 0 && c->n < 256) c->toks[c->n++] = t;
    if (c->len + len < sizeof c->text) memcpy(c->text + c->len, text, len), c->len += len;
    c->text[c->len] = '\0';
    return 0;
}

/* Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static bool utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n) return false;
        unsigned cp = k == 1 ? c : c & (0x7f >> k);
        for (size_t j = 1; j < k; j++) {
            if ((p[i + j] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (p[i + j] & 0x3f);
        }
        static const unsigned min[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += k;
    }
    return true;
}

static bool setup(const char *file, eddy_model **m, eddy_vocab **v, eddy_ctx **c, int64_t n_ctx) {
    eddy_error err;
    if (!CHECKF(eddy_model_load(test_data_path(file), m, &err) == EDDY_OK, "%s", err.msg)) return false;
    if (!CHECKF(eddy_vocab_load(eddy_model_gguf(*m), v, &err) == EDDY_OK, "%s", err.msg)) return false;
    eddy_ctx_params p = {.n_ctx = n_ctx, .n_threads = 1};
    return CHECKF(eddy_ctx_new(*m, &p, c, &err) == EDDY_OK, "%s", err.msg);
}

static void check_greedy_is_argmax(const char *file) {
    eddy_model *m = NULL;
    eddy_vocab *v = NULL;
    eddy_ctx *c = NULL;
    if (!setup(file, &m, &v, &c, 128)) goto done;
    eddy_token prompt[3] = {5, 17, 33};
    eddy_sampler_params sp = eddy_sampler_default_params();
    sp.temp = 0;
    eddy_sampler *s;
    REQUIRE(eddy_sampler_new(&sp, eddy_model_n_vocab(m), &s, NULL) == EDDY_OK);
    collected got = {0};
    eddy_gen_stats st;
    eddy_error err;
    REQUIRE(eddy_generate(c, v, s, prompt, 3, 20, collect, &got, &st, &err) == EDDY_OK);
    CHECK_EQ(st.n_prompt, 3);
    CHECK_EQ(st.n_generated, got.n);
    CHECK(st.stop == EDDY_STOP_LENGTH || st.stop == EDDY_STOP_EOG);
    if (st.stop == EDDY_STOP_LENGTH) CHECK_EQ(got.n, 20);
    /* every generated token was fed back; an end token would not have been */
    CHECK_EQ(eddy_ctx_n_pos(c), 3 + got.n);
    /* the whole sequence as one prefill: each generated token is the argmax before it */
    int64_t n = 3 + got.n, V = eddy_model_n_vocab(m);
    eddy_token *all = malloc((size_t)n * sizeof *all);
    memcpy(all, prompt, sizeof prompt);
    memcpy(all + 3, got.toks, (size_t)got.n * sizeof *all);
    float *logits = malloc((size_t)(n * V) * sizeof(float));
    eddy_ctx_reset(c);
    REQUIRE(eddy_ctx_eval(c, all, n, logits, 1, &err) == EDDY_OK);
    for (int64_t i = 0; i < got.n; i++) {
        const float *row = logits + (2 + i) * V;
        int64_t best = 0;
        for (int64_t j = 1; j < V; j++)
            if (row[j] > row[best]) best = j;
        CHECKF(best == got.toks[i], "%s: token %lld is %d, argmax %lld", file, (long long)i, got.toks[i], (long long)best);
    }
    /* the streamed text is valid UTF-8, and is the detokenized ids (control tokens
     * skipped) whenever those are valid UTF-8 (else the stream shows U+FFFD) */
    char *text;
    size_t len;
    REQUIRE(eddy_detokenize(v, got.toks, got.n, EDDY_DETOK_SKIP_CONTROL, &text, &len, &err) == EDDY_OK);
    CHECKF(utf8_valid(got.text, got.len), "%s: streamed text is not valid UTF-8", file);
    if (utf8_valid(text, len))
        CHECKF(len == got.len && memcmp(text, got.text, len) == 0, "%s: streamed \"%s\" vs \"%s\"", file, got.text,
               text);
    eddy_buffer_free(text);
    free(all), free(logits);
    eddy_sampler_free(s);
done:
    eddy_ctx_free(c);
    eddy_vocab_free(v);
    eddy_model_free(m);
}

TEST(generate_greedy_is_argmax_llama) { check_greedy_is_argmax("models/llama-tiny-q8_0.gguf"); }
TEST(generate_greedy_is_argmax_qwen35) { check_greedy_is_argmax("models/qwen35-tiny-q8_0.gguf"); }

TEST(generate_seed_reproduces_and_limits_stop) {
    eddy_model *m = NULL;
    eddy_vocab *v = NULL;
    eddy_ctx *c = NULL;
    if (!setup("models/llama-tiny-q8_0.gguf", &m, &v, &c, 16)) goto done;
    eddy_sampler_params sp = eddy_sampler_default_params();
    sp.temp = 1.0f, sp.top_k = 0, sp.top_p = 1, sp.min_p = 0, sp.seed = 99;
    collected a = {0}, b = {0};
    eddy_token prompt[2] = {7, 8};
    for (int run = 0; run < 2; run++) {
        eddy_sampler *s;
        REQUIRE(eddy_sampler_new(&sp, eddy_model_n_vocab(m), &s, NULL) == EDDY_OK);
        eddy_ctx_reset(c);
        eddy_gen_stats st;
        REQUIRE(eddy_generate(c, v, s, prompt, 2, -1, collect, run ? &b : &a, &st, NULL) == EDDY_OK);
        /* no length limit: stops at an end token or when the 16-position context is full */
        CHECK(st.stop == EDDY_STOP_CONTEXT || st.stop == EDDY_STOP_EOG);
        CHECK(eddy_ctx_n_pos(c) <= 16);
        eddy_sampler_free(s);
    }
    CHECK_EQ(a.n, b.n);
    CHECK(memcmp(a.toks, b.toks, (size_t)a.n * sizeof a.toks[0]) == 0);
    /* a prompt that does not fit fails without changing the sequence */
    eddy_ctx_reset(c);
    eddy_token big[20] = {0};
    eddy_sampler *s;
    REQUIRE(eddy_sampler_new(&sp, eddy_model_n_vocab(m), &s, NULL) == EDDY_OK);
    eddy_error err;
    CHECK_EQ(eddy_generate(c, v, s, big, 20, 5, NULL, NULL, NULL, &err), EDDY_ERR_ARG);
    CHECK_EQ(eddy_ctx_n_pos(c), 0);
    eddy_sampler_free(s);
done:
    eddy_ctx_free(c);
    eddy_vocab_free(v);
    eddy_model_free(m);
}

/* The tiny Mamba-2 model's greedy continuation of these ids ("Hello" tokenized, as
 * eddy run feeds it) ends with an end token after 64 steps; with ignore_eog none is sampled and n_predict ends the loop. */
TEST(generate_ignore_eog_runs_to_the_limit) {
    eddy_model *m = NULL;
    eddy_vocab *v = NULL;
    eddy_ctx *c = NULL;
    if (!setup("models/mamba2-tiny-q8_0.gguf", &m, &v, &c, 256)) goto done;
    eddy_sampler_params sp = eddy_sampler_default_params();
    sp.temp = 0;
    eddy_token prompt[6] = {1, 430, 469, 431, 289, 434};
    eddy_gen_stats st[2];
    static collected got[2];
    memset(got, 0, sizeof got);
    for (int ignore = 0; ignore < 2; ignore++) {
        eddy_sampler *s;
        REQUIRE(eddy_sampler_new(&sp, eddy_model_n_vocab(m), &s, NULL) == EDDY_OK);
        eddy_ctx_reset(c);
        eddy_gen_params gp = {.n_predict = 200, .ignore_eog = ignore};
        eddy_error err;
        CHECKF(eddy_generate_ex(c, v, s, prompt, 6, &gp, collect, &got[ignore], &st[ignore], &err) == EDDY_OK, "%s",
               err.msg);
        eddy_sampler_free(s);
    }
    CHECKF(st[0].stop == EDDY_STOP_EOG, "stop %d after %lld tokens", (int)st[0].stop, (long long)st[0].n_generated);
    CHECK_EQ(st[1].stop, EDDY_STOP_LENGTH);
    CHECK_EQ(st[1].n_generated, 200);
    for (int64_t i = 0; i < got[1].n; i++) CHECK(!eddy_vocab_is_eog(v, got[1].toks[i]));
    /* greedy: the same tokens up to where the end token was */
    CHECK(got[0].n <= got[1].n && memcmp(got[0].toks, got[1].toks, (size_t)got[0].n * sizeof(eddy_token)) == 0);
done:
    eddy_ctx_free(c);
    eddy_vocab_free(v);
    eddy_model_free(m);
}

/* With run's default sampler the loop takes each step's best 40 only and keeps the last
 * logits (tseq_check_generate_from_the_best) */
TEST(generate_from_the_best_logits) {
    tseq_check_generate_from_the_best("models/llama-tiny-q8_0.gguf", (eddy_ctx_params){.n_threads = 1}, false);
    tseq_check_generate_from_the_best("models/qwen35-tiny-q8_0.gguf", (eddy_ctx_params){.n_threads = 1}, false);
    tseq_check_generate_from_the_best("models/llama-tiny-q8_0.gguf", (eddy_ctx_params){.n_threads = 1}, true);
    tseq_check_generate_from_the_best("models/mamba2-tiny-f32.gguf", (eddy_ctx_params){.n_threads = 1}, true);
}
