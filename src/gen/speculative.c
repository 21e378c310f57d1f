/*
 * speculative.c — the generation loop with drafts, and the acceptance rule of
 * speculative sampling (spec.h, docs/speculative.md).
 *
 * A step: the token t just sampled (not yet fed) and up to K drafts d1..dK go through
 * one eddy_engine_verify, which gives the logits after each of t, d1, ..., dK and keeps
 * the state after each. The model then samples position by position exactly as plain
 * generation would — each from the logits after the tokens before it, the sampler
 * having seen them — and while what it samples is the next draft, that draft is
 * already fed and the walk goes on. The first token that differs (or the one after
 * the last draft) is the next step's t; eddy_seq_accept keeps the state after the
 * drafts that matched. Plain generation would have fed the same tokens and sampled
 * from the same logits (a verify's rows are the bits of feeding them one by one) with
 * the same random numbers, so the output is the same, token for token.
 *
 * With sampled drafts (a draft model at temperature > 0) a position does not sample
 * and compare: it keeps the draft with probability min(1, p/q) or draws from the
 * residual (spec_accept_sampled), which gives the model's distribution p exactly
 * (Leviathan et al. 2023, Chen et al. 2023) though not the same random stream.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/timer.h"
#include "gen/spec.h"
#include "model/engine.h"

/* ==== The acceptance rule ==== */

eddy_token spec_accept_sampled(sampler *s, const float *p, const float *q, eddy_token d, float *residual,
                               bool *kept) {
    const double r = sampler_uniform(s);
    /* keep d with probability min(1, p[d] / q[d]): r * q[d] < p[d] */
    if (r * (double)q[d] < (double)p[d]) {
        *kept = true;
        return d;
    }
    *kept = false;
    const int64_t n = sampler_n_vocab(s);
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        const float x = p[i] - q[i];
        residual[i] = x > 0 ? x : 0;
        total += residual[i];
    }
    residual[d] = 0; /* p[d] < q[d] here already; rounding must not bring it back */
    return total > 0 ? sampler_draw(s, residual) : sampler_draw(s, p);
}

/* ==== The loop ==== */

typedef struct {
    const spec_loop *L;
    eddy_detok *dt;
    eddy_gen_stats *st;
    eddy_token *hist; /* (n_ctx + 1) the sequence's tokens, then the token about to be fed */
    int64_t n_hist;
} walk;

/* A generated token: the sampler and the history see it, the caller gets its text.
 * Returns false when the caller asks to stop (st->stop set). */
static bool emit(walk *w, eddy_token t, eddy_status *rc, eddy_error *err) {
    sampler_accept(w->L->s, t);
    w->st->n_generated++;
    w->hist[w->n_hist++] = t;
    const char *text;
    size_t len;
    *rc = eddy_detok_push(w->dt, t, &text, &len, err);
    if (*rc != EDDY_OK) return false;
    if (w->L->cb && w->L->cb(w->L->user, t, text, len)) {
        w->st->stop = EDDY_STOP_CALLBACK;
        return false;
    }
    return true;
}

static void mask_eog(const spec_loop *L, float *row) {
    for (int64_t i = 0; i < L->n_eog; i++) row[L->eog_mask[i]] = -INFINITY;
}

eddy_status spec_generate(const spec_loop *L, float *logits, eddy_detok *dt, eddy_gen_stats *st, eddy_error *err) {
    eddy_engine *e = eddy_ctx_engine(L->c);
    eddy_seq *seq = eddy_ctx_seq(L->c);
    const int64_t n_ctx = eddy_engine_n_ctx(e), n_vocab = sampler_n_vocab(L->s);
    drafter *d = NULL;
    eddy_status rc = drafter_new(L->spec, L->c, sampler_params(L->s), &d, err);
    if (rc != EDDY_OK) return rc;
    const int64_t k_cap = drafter_max(d);
    const bool sampled = drafter_sampled(d);
    walk w = {L, dt, st, eddy_malloc((size_t)(n_ctx + 1) * sizeof *w.hist), 0};
    float *rows = eddy_malloc((size_t)(k_cap + 1) * (size_t)n_vocab * sizeof *rows); /* (K + 1, n_vocab) */
    float *q = sampled ? eddy_malloc((size_t)k_cap * (size_t)n_vocab * sizeof *q) : NULL; /* (K, n_vocab) */
    float *p = sampled ? eddy_malloc(2 * (size_t)n_vocab * sizeof *p) : NULL; /* p, then the residual */
    eddy_token *tok = eddy_malloc((size_t)(k_cap + 1) * sizeof *tok); /* t, d1..dK */
    eddy_seq **owner = eddy_malloc((size_t)(k_cap + 1) * sizeof *owner);
    int8_t *want = eddy_malloc((size_t)(k_cap + 1));
    if (!w.hist || !rows || (sampled && (!q || !p)) || !tok || !owner || !want) {
        rc = eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory for speculative decoding");
        goto done;
    }
    for (int64_t i = 0; i <= k_cap; i++) owner[i] = seq, want[i] = 1;
    w.n_hist = eddy_seq_n_pos(seq);
    memcpy(w.hist, eddy_seq_tokens(seq), (size_t)w.n_hist * sizeof *w.hist);

    /* the first token comes from the prompt's logits, as without drafts */
    if (L->n_predict >= 0 && st->n_generated >= L->n_predict) goto done;
    mask_eog(L, logits);
    eddy_token t = sampler_sample(L->s, logits);
    if (eddy_vocab_is_eog(L->v, t)) {
        st->stop = EDDY_STOP_EOG;
        goto done;
    }
    if (!emit(&w, t, &rc, err)) goto done;
    bool go = true;
    while (go && rc == EDDY_OK) {
        const int64_t base = eddy_seq_n_pos(seq); /* t is not fed yet */
        if (base >= n_ctx) {
            st->stop = EDDY_STOP_CONTEXT;
            break;
        }
        /* drafts: no more than the length rule asks for, than plain generation would still
         * emit, than fit the context behind t, and than the verify has states for */
        int64_t k_max = drafter_length(d);
        if (L->n_predict >= 0 && k_max > L->n_predict - st->n_generated) k_max = L->n_predict - st->n_generated;
        if (k_max > n_ctx - base - 1) k_max = n_ctx - base - 1;
        const int64_t room = engine_verify_room(e) - 1;
        if (k_max > room) k_max = room;
        int64_t k = 0;
        if (k_max >= drafter_min(d) && (rc = drafter_propose(d, w.hist, w.n_hist, k_max, tok + 1, q, &k, err)) != EDDY_OK)
            break;
        if (k < drafter_min(d)) k = 0;
        tok[0] = t;
        const double t0 = timer_s();
        if (k == 0) {
            rc = eddy_seq_eval(seq, &t, 1, rows, 0, err);
        } else {
            eddy_batch b = {k + 1, tok, owner, want};
            rc = eddy_engine_verify(e, &b, rows, err);
        }
        if (rc != EDDY_OK) break;
        const double step_s = timer_s() - t0;
        /* walk the positions: rows[i] follows t, d1..di, all fed */
        int64_t i = 0;
        for (;; i++) {
            float *row = rows + i * n_vocab;
            if (L->n_predict >= 0 && st->n_generated >= L->n_predict) {
                st->stop = EDDY_STOP_LENGTH, go = false;
                break;
            }
            mask_eog(L, row);
            eddy_token y;
            bool kept = false;
            if (sampled && i < k) {
                sampler_probs(L->s, row, p);
                y = spec_accept_sampled(L->s, p, q + i * n_vocab, tok[i + 1], p + n_vocab, &kept);
            } else {
                y = sampler_sample(L->s, row);
                kept = i < k && y == tok[i + 1];
            }
            if (eddy_vocab_is_eog(L->v, y)) {
                st->stop = EDDY_STOP_EOG, go = false;
                break;
            }
            if (!emit(&w, y, &rc, err)) {
                go = false;
                break;
            }
            if (!kept) { /* y is the next step's t */
                t = y;
                break;
            }
        }
        /* keep t and the i drafts that matched; the logits after them are rows[i] */
        if (k > 0) {
            if (rc == EDDY_OK) rc = eddy_seq_accept(seq, i + 1, err);
            else eddy_seq_accept(seq, i + 1, NULL);
            if (rc == EDDY_OK) engine_seq_set_logits(seq, rows + i * n_vocab);
            st->n_spec_steps++, st->n_drafted += k, st->n_accepted += i;
            drafter_update(d, k, i, step_s);
        }
    }
done:
    drafter_free(d);
    eddy_free(w.hist), eddy_free(rows), eddy_free(q), eddy_free(p), eddy_free(tok), eddy_free(owner), eddy_free(want);
    return rc;
}
