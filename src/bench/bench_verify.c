/*
 * bench_verify.c — `eddy bench -m --verify K,...`: what one speculative verify step
 * costs against one plain decode step, on the same sequence at the same depth.
 *
 * Owns: the timing of eddy_bench_verify. A plain step feeds one token; a verify step
 * feeds a token and K drafts through eddy_engine_verify and keeps one of them
 * (eddy_seq_accept(s, 1)), so both advance the sequence by one position and the runs
 * stay at the same depth. Plain and verify runs alternate, repetition by repetition,
 * so the machine's slow drifts hit both alike. Both steps give what the walk samples
 * from (eddy_bench_params.sampling): each row's argmax, its best 40 (eddy_engine_decode_top,
 * eddy_engine_verify_top) or its logits.
 * With a model that carries a multi-token-prediction layer, a second engine runs it:
 * its plain steps and its one-token drafts join every round.
 * Does not own: the drafts' quality (that is the drafter's; see docs/speculative.md).
 */
#include <inttypes.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/timer.h"
#include "bench.h"
#include "model/engine.h"

/* What a step gives each row: its best k_top (ids, top, counts), or (k_top 0) its logits */
typedef struct {
    int32_t k_top;
    eddy_token *ids;
    float *top, *logits;
    int32_t *counts;
} step_out;

/* Seconds per step of n steps from s's current position: plain (k = 0) or verify of
 * 1 + k tokens keeping one. */
static eddy_status time_steps(eddy_engine *e, eddy_seq *s, int64_t k, int64_t n, uint64_t *rng, int64_t V,
                              const eddy_vocab *v, eddy_token *tok, eddy_seq **owner, int8_t *want, const step_out *o,
                              double *secs, eddy_error *err) {
    eddy_status st = EDDY_OK;
    const double t0 = timer_s();
    for (int64_t i = 0; i < n && st == EDDY_OK; i++) {
        for (int64_t j = 0; j <= k; j++) tok[j] = bench_random_token(rng, V, v), owner[j] = s, want[j] = 1;
        const eddy_batch b = {k + 1, tok, owner, want};
        if (k == 0 && o->k_top) {
            st = eddy_engine_decode_top(e, &b, o->k_top, o->ids, o->top, o->counts, NULL, err);
        } else if (k == 0) {
            st = eddy_seq_eval(s, tok, 1, o->logits, 0, err);
        } else {
            st = o->k_top ? eddy_engine_verify_top(e, &b, o->k_top, o->ids, o->top, o->counts, NULL, err)
                          : eddy_engine_verify(e, &b, o->logits, err);
            if (st == EDDY_OK) st = eddy_seq_accept(s, 1, err);
        }
    }
    *secs = (timer_s() - t0) / (double)n;
    return st;
}

/* Seconds per MTP draft of one token after a random one, over n drafts (the sequence
 * stays where it is). */
static eddy_status time_drafts(eddy_seq *s, int64_t n, uint64_t *rng, int64_t V, const eddy_vocab *v, float *logits,
                               double *secs, eddy_error *err) {
    eddy_status st = EDDY_OK;
    const double t0 = timer_s();
    for (int64_t i = 0; i < n && st == EDDY_OK; i++) {
        eddy_token d;
        int64_t k;
        st = engine_seq_mtp_draft(s, bench_random_token(rng, V, v), 1, -1.0f, &d, &k, logits, err);
    }
    *secs = (timer_s() - t0) / (double)n;
    return st;
}

eddy_status eddy_bench_verify(const eddy_model *m, const eddy_bench_params *p, const int64_t *ks, int n_k,
                              eddy_bench_verify_result *r, eddy_error *err) {
    if (!m || !p || !ks || !r || n_k < 1 || n_k > EDDY_BENCH_VERIFY_MAX) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_bench_verify: bad argument");
    int64_t k_max = 0;
    for (int i = 0; i < n_k; i++) {
        if (ks[i] < 1 || ks[i] > 64)
            return eddy_error_set(err, EDDY_ERR_ARG, "bench: %" PRId64 " drafts per verify (1..64)", ks[i]);
        if (ks[i] > k_max) k_max = ks[i];
    }
    const int reps = p->n_reps > 0 ? p->n_reps : 5;
    const int64_t steps = p->n_gen > 0 ? p->n_gen : 32, depth = p->n_prompt > 0 ? p->n_prompt : 1;
    /* every repetition of every test advances the sequence by `steps` */
    const int64_t n_ctx = depth + steps * (int64_t)(n_k + 1) * (reps + 1) + k_max + 1;
    eddy_engine_params ep = {.n_ctx = n_ctx, .n_seq_max = 1, .n_verify = (int)k_max + 1,
                             .n_threads = p->n_threads, .device = p->device, .gpu_layers = p->gpu_layers,
                             .n_batch = p->n_batch};
    eddy_engine *e = NULL;
    eddy_status st = eddy_engine_new(m, &ep, &e, err);
    if (st != EDDY_OK) return st;
    const int64_t V = eddy_model_n_vocab(m);
    uint64_t rng = p->seed ? p->seed : 0x5eed;
    eddy_token *tok = eddy_malloc((size_t)(depth > k_max + 1 ? depth : k_max + 1) * sizeof *tok);
    eddy_seq **owner = eddy_malloc((size_t)(k_max + 1) * sizeof *owner);
    int8_t *want = eddy_malloc((size_t)(k_max + 1));
    float *logits = eddy_malloc((size_t)(k_max + 1) * (size_t)V * sizeof *logits);
    eddy_sampler_params sp = eddy_sampler_default_params();
    const int32_t k_top = p->sampling == EDDY_BENCH_ARGMAX ? 1
                          : p->sampling == EDDY_BENCH_SAMPLE_TOP  ? eddy_sampler_params_top(&sp)
                                                                  : 0;
    const step_out o = {k_top, eddy_malloc((size_t)(k_max + 1) * EDDY_TOP_MAX * sizeof(eddy_token)),
                        eddy_malloc((size_t)(k_max + 1) * EDDY_TOP_MAX * sizeof(float)), logits,
                        eddy_malloc((size_t)(k_max + 1) * sizeof(int32_t))};
    double *plain = eddy_malloc((size_t)reps * sizeof *plain), *ver = eddy_malloc((size_t)reps * n_k * sizeof *ver);
    double *ratio = eddy_malloc((size_t)reps * sizeof *ratio);
    /* with the MTP layer: its engine's plain steps and drafts, per round */
    const bool mtp = eddy_model_has_mtp(m);
    double *mtp_plain = eddy_malloc((size_t)reps * sizeof *mtp_plain), *mtp_draft = eddy_malloc((size_t)reps * sizeof *mtp_draft);
    eddy_engine *e2 = NULL;
    eddy_seq *s = NULL, *s2 = NULL;
    if (!tok || !owner || !want || !logits || !o.ids || !o.top || !o.counts || !plain || !ver || !ratio || !mtp_plain ||
        !mtp_draft)
        st = eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    if (st == EDDY_OK) st = eddy_seq_new(e, &s, err);
    if (st == EDDY_OK && mtp) {
        ep.mtp = true;
        st = eddy_engine_new(m, &ep, &e2, err);
        if (st == EDDY_OK) st = eddy_seq_new(e2, &s2, err);
    }
    for (int64_t i = 0; st == EDDY_OK && i < depth; i++) tok[i] = bench_random_token(&rng, V, p->vocab);
    if (st == EDDY_OK) st = eddy_seq_eval(s, tok, depth, NULL, 0, err);
    if (st == EDDY_OK && mtp) st = eddy_seq_eval(s2, tok, depth, NULL, 0, err);
    /* a warm-up of each, then reps rounds: plain, then every K */
    for (int rep = -1; st == EDDY_OK && rep < reps; rep++) {
        double secs;
        st = time_steps(e, s, 0, steps, &rng, V, p->vocab, tok, owner, want, &o, &secs, err);
        if (rep >= 0) plain[rep] = secs;
        for (int i = 0; st == EDDY_OK && i < n_k; i++) {
            st = time_steps(e, s, ks[i], steps, &rng, V, p->vocab, tok, owner, want, &o, &secs, err);
            if (rep >= 0) ver[i * reps + rep] = secs;
        }
        if (st == EDDY_OK && mtp) {
            st = time_steps(e2, s2, 0, steps, &rng, V, p->vocab, tok, owner, want, &o, &secs, err);
            if (rep >= 0) mtp_plain[rep] = secs;
        }
        if (st == EDDY_OK && mtp) {
            st = time_drafts(s2, steps, &rng, V, p->vocab, k_top ? NULL : logits, &secs, err);
            if (rep >= 0) mtp_draft[rep] = secs;
        }
    }
    if (st == EDDY_OK) {
        memset(r, 0, sizeof *r);
        r->n_threads = eddy_engine_n_threads(e);
        r->depth = depth;
        r->n_k = n_k;
        for (int i = 0; i < n_k; i++) { /* ratios within a round first: plain is sorted below */
            r->k[i] = ks[i];
            for (int rep = 0; rep < reps; rep++) ratio[rep] = ver[i * reps + rep] / plain[rep];
            r->ratio[i] = bench_rate_stats(ratio, reps).median;
            r->verify_seconds[i] = bench_rate_stats(ver + i * reps, reps).median;
        }
        r->plain_seconds = bench_rate_stats(plain, reps).median;
        r->mtp = mtp;
        if (mtp) {
            for (int rep = 0; rep < reps; rep++) ratio[rep] = mtp_plain[rep] / plain[rep];
            r->mtp_plain_ratio = bench_rate_stats(ratio, reps).median;
            for (int rep = 0; rep < reps; rep++) ratio[rep] = mtp_draft[rep] / plain[rep];
            r->mtp_draft_ratio = bench_rate_stats(ratio, reps).median;
        }
    }
    eddy_engine_free(e2);
    eddy_free(mtp_plain), eddy_free(mtp_draft);
    eddy_engine_free(e);
    eddy_free(tok), eddy_free(owner), eddy_free(want), eddy_free(logits), eddy_free(plain), eddy_free(ver), eddy_free(ratio);
    eddy_free(o.ids), eddy_free(o.top), eddy_free(o.counts);
    return st;
}
