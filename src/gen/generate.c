/*
 * generate.c — the generation loop: prefill the prompt, then sample, stream and feed
 * back one token at a time until an end-of-generation token, the length limit, a
 * full context or the caller says stop.
 *
 * Every size comes from one place, the context's model: the logits row is n_vocab
 * floats (what eddy_ctx_eval writes), and the vocabulary and the sampler must be of
 * that size (the model's own vocabulary always is: model_load checks it).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/timer.h"
#include "eddy.h"
#include "gen/sampler.h"
#include "gen/spec.h"
#include "model/engine.h"

/* ==== End-of-generation tokens ==== */

static const char *const eog_texts[] = {"<|im_end|>",   "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>",
                                        "<end_of_turn>", "<|end|>",       "<|eom_id|>", "</s>"};

bool eddy_vocab_is_eog(const eddy_vocab *v, eddy_token t) {
    if (t < 0 || t >= eddy_vocab_n_tokens(v)) return false;
    if (t == eddy_vocab_eos(v) || t == eddy_vocab_eot(v)) return true;
    if (!eddy_vocab_is_control(v, t)) return false;
    size_t len;
    const char *text = eddy_vocab_token_text(v, t, &len);
    for (size_t i = 0; i < sizeof eog_texts / sizeof eog_texts[0]; i++)
        if (text && len == strlen(eog_texts[i]) && !memcmp(text, eog_texts[i], len)) return true;
    return false;
}

/* ==== The loop ==== */

/* The end-of-generation ids of v (*n of them; NULL when there are none). */
static eddy_token *eog_list(const eddy_vocab *v, int64_t *n) {
    int64_t n_vocab = eddy_vocab_n_tokens(v), k = 0;
    for (eddy_token t = 0; t < n_vocab; t++) k += eddy_vocab_is_eog(v, t);
    *n = k;
    eddy_token *ids = k ? eddy_malloc((size_t)k * sizeof *ids) : NULL;
    if (ids) {
        k = 0;
        for (eddy_token t = 0; t < n_vocab; t++)
            if (eddy_vocab_is_eog(v, t)) ids[k++] = t;
    }
    return ids;
}

eddy_status eddy_generate(eddy_ctx *c, const eddy_vocab *v, eddy_sampler *s, const eddy_token *prompt,
                          int64_t n_prompt, int64_t n_predict, eddy_token_callback cb, void *user,
                          eddy_gen_stats *stats, eddy_error *err) {
    eddy_gen_params p = {.n_predict = n_predict};
    return eddy_generate_ex(c, v, s, prompt, n_prompt, &p, cb, user, stats, err);
}

eddy_status eddy_generate_ex(eddy_ctx *c, const eddy_vocab *v, eddy_sampler *s, const eddy_token *prompt,
                             int64_t n_prompt, const eddy_gen_params *p, eddy_token_callback cb, void *user,
                             eddy_gen_stats *stats, eddy_error *err) {
    eddy_gen_stats st = {.n_prompt = n_prompt};
    if (!c || !s || (!prompt && n_prompt > 0) || n_prompt < 0)
        return eddy_error_set(err, EDDY_ERR_ARG, "eddy_generate: NULL argument");
    const model *m = eddy_engine_model(eddy_ctx_engine(c));
    const int64_t n_vocab = m->hp.n_vocab;
    if (!v) v = m->vocab;
    if (!v) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_generate: the model has no vocabulary (no tokenizer.ggml.tokens)");
    if (eddy_vocab_n_tokens(v) != n_vocab)
        return eddy_error_set(err, EDDY_ERR_ARG, "eddy_generate: the vocabulary has %lld tokens, the model %lld",
                              (long long)eddy_vocab_n_tokens(v), (long long)n_vocab);
    if (sampler_n_vocab(s) != n_vocab)
        return eddy_error_set(err, EDDY_ERR_ARG, "eddy_generate: the sampler is for %lld tokens, the model has %lld",
                              (long long)sampler_n_vocab(s), (long long)n_vocab);
    /* no prompt: go on from the logits the sequence holds (after a session load, say) */
    const float *held = n_prompt == 0 ? eddy_seq_logits(eddy_ctx_seq(c)) : NULL;
    if (n_prompt == 0 && !held)
        return eddy_error_set(err, EDDY_ERR_ARG, "eddy_generate: no prompt tokens, and the sequence holds no logits "
                              "to go on from");
    if (p && p->spec && p->spec->type != EDDY_SPEC_NONE) {
        const eddy_status ready = spec_check_engine(eddy_ctx_engine(c), err);
        if (ready != EDDY_OK) return ready;
    }
    const int64_t n_predict = p ? p->n_predict : -1;
    int64_t n_eog = 0;
    float *logits = eddy_malloc((size_t)n_vocab * sizeof(float));
    eddy_token *eog = p && p->ignore_eog ? eog_list(v, &n_eog) : NULL; /* (n_eog) ids masked out */
    eddy_detok *d = NULL;
    eddy_status rc = logits && (eog || n_eog == 0) ? eddy_detok_new(v, EDDY_DETOK_SKIP_CONTROL, &d, err)
                                                   : eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    if (rc != EDDY_OK) {
        eddy_free(eog);
        eddy_free(logits);
        return rc;
    }
    double t0 = timer_s();
    if (held) memcpy(logits, held, (size_t)n_vocab * sizeof(float));
    else rc = eddy_ctx_eval(c, prompt, n_prompt, logits, 0, err);
    for (int64_t i = 0; i < n_prompt && rc == EDDY_OK; i++) eddy_sampler_accept(s, prompt[i]);
    st.prompt_seconds = timer_s() - t0;
    st.stop = EDDY_STOP_LENGTH;
    t0 = timer_s();
    /* a sampler that looks at a row's best k alone (eddy_sampler_params_top; with banned
     * end-of-generation tokens, as many more, removed from them) takes only them from each
     * step (on a GPU, 8 k bytes back instead of the row); the sequence gets the last step's
     * logits at the end (engine_seq_keep_logits) */
    const int32_t k_top = eddy_sampler_params_top_banned(sampler_params(s), n_eog);
    int32_t top_ids[EDDY_TOP_MAX], top_n = 0;
    float top_logits[EDDY_TOP_MAX];
    bool from_top = false; /* the last step gave its best k only */
    if (rc == EDDY_OK && p && p->spec && p->spec->type != EDDY_SPEC_NONE) {
        const spec_loop L = {c, v, s, p->spec, n_predict, eog, n_eog, cb, user};
        rc = spec_generate(&L, logits, d, &st, err);
    }
    else while (rc == EDDY_OK) {
        if (n_predict >= 0 && st.n_generated >= n_predict) {
            st.stop = EDDY_STOP_LENGTH;
            break;
        }
        for (int64_t i = 0; i < n_eog; i++) logits[eog[i]] = -INFINITY;
        eddy_token t =
            from_top ? eddy_sampler_sample_top(s, top_ids, top_logits, top_n) : eddy_sampler_sample(s, logits);
        if (eddy_vocab_is_eog(v, t)) {
            st.stop = EDDY_STOP_EOG;
            break;
        }
        eddy_sampler_accept(s, t);
        st.n_generated++;
        const char *text;
        size_t len;
        rc = eddy_detok_push(d, t, &text, &len, err);
        if (rc != EDDY_OK) break;
        if (cb && cb(user, t, text, len)) {
            st.stop = EDDY_STOP_CALLBACK;
            break;
        }
        if (eddy_ctx_n_pos(c) >= eddy_ctx_n_ctx(c)) {
            st.stop = EDDY_STOP_CONTEXT;
            break;
        }
        if (k_top) {
            eddy_seq *seq = eddy_ctx_seq(c);
            const eddy_batch b = {1, &t, &seq, NULL};
            rc = eddy_engine_decode_top(eddy_ctx_engine(c), &b, k_top, top_ids, top_logits, &top_n, NULL, err);
            top_n = eddy_top_remove(top_ids, top_logits, top_n, eog, n_eog);
            from_top = true;
        } else {
            rc = eddy_ctx_eval(c, &t, 1, logits, 0, err);
        }
    }
    if (from_top) engine_seq_keep_logits(eddy_ctx_seq(c));
    if (rc == EDDY_OK && cb) { /* whatever the detokenizer still holds */
        const char *text;
        size_t len;
        eddy_detok_flush(d, &text, &len);
        if (len) cb(user, -1, text, len);
    }
    st.generate_seconds = timer_s() - t0;
    eddy_detok_free(d);
    eddy_free(eog);
    eddy_free(logits);
    if (stats) *stats = st;
    return rc;
}
