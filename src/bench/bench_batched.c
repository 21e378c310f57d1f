/*
 * bench_batched.c — `eddy bench -m --npl`: the speed of many sequences in one engine,
 * measured as llama.cpp's llama-batched-bench measures it.
 *
 * Owns: the two phases (pp: n_seq random prompts of n_prompt tokens in one batch from
 * empty sequences, then each sequence's next token; tg: n_gen steps, each one batch
 * holding one token of every sequence, each feeding that sequence's next token), their
 * warm-up and timed repetitions, and the medians. The next token is the argmax (as greedy
 * decoding runs, eddy_engine_decode_argmax, so on a GPU only the ids come back), or one
 * drawn by eddy run's default sampler from the row's best 40 or from its whole row
 * (eddy_bench_params.sampling: what sampling costs a step both ways).
 * Does not own: the single-sequence benchmark (bench_model.c) or the output
 * (cli/cmd_bench.c).
 */
#include <inttypes.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/timer.h"
#include "bench.h"

typedef struct {
    eddy_engine *e;
    eddy_seq **seqs;   /* (n_seq) */
    int64_t n_seq, n_prompt, n_gen, n_vocab;
    int32_t *tokens;   /* (n_seq) the step's tokens */
    eddy_seq **owner;  /* (n_seq * max(n_prompt, 1)) */
    const int32_t *prompts;
    int sampling;          /* eddy_bench_params.sampling */
    eddy_sampler **samplers; /* (n_seq) with sampling */
    float *logits;         /* (n_seq, n_vocab) EDDY_BENCH_SAMPLE_LOGITS's rows */
    int32_t k_top;         /* the best logits the samplers look at (eddy_sampler_params_top: 40) */
    int32_t *top_ids, *top_counts; /* (n_seq, k_top), (n_seq): EDDY_BENCH_SAMPLE_TOP's */
    float *top_logits;
} run;

/* One forward step of batch b, each sequence's next token into r->tokens */
static eddy_status step(run *r, const eddy_batch *b, eddy_error *err) {
    eddy_status st;
    switch (r->sampling) {
    case EDDY_BENCH_SAMPLE_TOP:
        st = eddy_engine_decode_top(r->e, b, r->k_top, r->top_ids, r->top_logits, r->top_counts, NULL, err);
        for (int64_t s = 0; st == EDDY_OK && s < r->n_seq; s++)
            r->tokens[s] = eddy_sampler_sample_top(r->samplers[s], r->top_ids + s * r->k_top,
                                                   r->top_logits + s * r->k_top, r->top_counts[s]);
        return st;
    case EDDY_BENCH_SAMPLE_LOGITS:
        st = eddy_engine_decode(r->e, b, r->logits, err);
        for (int64_t s = 0; st == EDDY_OK && s < r->n_seq; s++)
            r->tokens[s] = eddy_sampler_sample(r->samplers[s], r->logits + s * r->n_vocab);
        return st;
    default:
        return eddy_engine_decode_argmax(r->e, b, r->tokens, err);
    }
}

/* One pp phase then one tg phase from empty sequences; their times. */
static eddy_status run_once(run *r, double *t_pp, double *t_tg, eddy_error *err) {
    for (int64_t s = 0; s < r->n_seq; s++) {
        eddy_seq_clear(r->seqs[s]);
        if (r->samplers) eddy_sampler_reset(r->samplers[s]); /* each run draws the same tokens */
    }
    eddy_status st = EDDY_OK;
    double t0 = timer_s();
    if (r->n_prompt > 0) {
        for (int64_t s = 0; s < r->n_seq; s++)
            for (int64_t i = 0; i < r->n_prompt; i++) r->owner[s * r->n_prompt + i] = r->seqs[s];
        eddy_batch b = {r->n_seq * r->n_prompt, r->prompts, r->owner, NULL};
        st = step(r, &b, err); /* each sequence's first token */
    } else {
        for (int64_t s = 0; s < r->n_seq; s++) r->tokens[s] = 0;
    }
    *t_pp = timer_s() - t0;
    for (int64_t s = 0; s < r->n_seq; s++) r->owner[s] = r->seqs[s];
    t0 = timer_s();
    for (int64_t i = 0; i < r->n_gen && st == EDDY_OK; i++) {
        eddy_batch b = {r->n_seq, r->tokens, r->owner, NULL};
        st = step(r, &b, err);
    }
    *t_tg = timer_s() - t0;
    return st;
}

eddy_status eddy_bench_batched(const eddy_model *m, const eddy_bench_params *p, int64_t n_seq,
                               eddy_bench_batched_result *res, eddy_error *err) {
    if (!m || !p || !res) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_bench_batched: NULL argument");
    const int64_t max_tokens = (int64_t)1 << 20;
    if (n_seq < 1 || n_seq > 4096)
        return eddy_error_set(err, EDDY_ERR_ARG, "bench: %" PRId64 " sequences out of range 1..4096", n_seq);
    if (p->n_prompt < 0 || p->n_gen < 0 || p->n_prompt > max_tokens || p->n_gen > max_tokens ||
        n_seq * p->n_prompt > max_tokens)
        return eddy_error_set(err, EDDY_ERR_ARG, "bench: %" PRId64 " sequences of %" PRId64 " + %" PRId64
                              " tokens: too many", n_seq, p->n_prompt, p->n_gen);
    if (p->n_prompt + p->n_gen == 0)
        return eddy_error_set(err, EDDY_ERR_ARG, "bench: nothing to run: the prompt and decode tokens are both 0");
    if (p->sampling < EDDY_BENCH_ARGMAX || p->sampling > EDDY_BENCH_SAMPLE_LOGITS)
        return eddy_error_set(err, EDDY_ERR_ARG, "bench: sampling %d is none of eddy_bench_params' kinds",
                              (int)p->sampling);
    if (p->n_reps < 0 || p->n_reps > 1000)
        return eddy_error_set(err, EDDY_ERR_ARG, "bench: %d repetitions out of range 1..1000", p->n_reps);
    const int reps = p->n_reps > 0 ? p->n_reps : 5;
    eddy_engine_params ep = {.n_ctx = p->n_prompt + p->n_gen, .n_seq_max = (int)n_seq, .n_threads = p->n_threads,
                             .device = p->device, .gpu_layers = p->gpu_layers, .n_batch = p->n_batch};
    run r = {.n_seq = n_seq, .n_prompt = p->n_prompt, .n_gen = p->n_gen, .n_vocab = eddy_model_n_vocab(m),
             .sampling = p->sampling};
    eddy_status st = eddy_engine_new(m, &ep, &r.e, err);
    if (st != EDDY_OK) return st;
    const int64_t n_rows = n_seq * (p->n_prompt > 0 ? p->n_prompt : 1);
    r.seqs = eddy_calloc((size_t)n_seq, sizeof *r.seqs);
    int32_t *prompts = eddy_malloc((size_t)n_rows * sizeof *prompts);
    r.tokens = eddy_malloc((size_t)n_seq * sizeof *r.tokens);
    r.owner = eddy_malloc((size_t)n_rows * sizeof *r.owner);
    double *pp = eddy_malloc((size_t)reps * sizeof *pp), *tg = eddy_malloc((size_t)reps * sizeof *tg);
    bool room = r.seqs && prompts && r.tokens && r.owner && pp && tg;
    if (room && p->sampling != EDDY_BENCH_ARGMAX) {
        const bool top = p->sampling == EDDY_BENCH_SAMPLE_TOP;
        eddy_sampler_params sp = eddy_sampler_default_params();
        r.k_top = eddy_sampler_params_top(&sp);
        r.samplers = eddy_calloc((size_t)n_seq, sizeof *r.samplers);
        r.logits = top ? NULL : eddy_malloc((size_t)(n_seq * r.n_vocab) * sizeof *r.logits);
        r.top_ids = top ? eddy_malloc((size_t)(n_seq * r.k_top) * sizeof *r.top_ids) : NULL;
        r.top_logits = top ? eddy_malloc((size_t)(n_seq * r.k_top) * sizeof *r.top_logits) : NULL;
        r.top_counts = top ? eddy_malloc((size_t)n_seq * sizeof *r.top_counts) : NULL;
        room = r.samplers && (top ? r.top_ids && r.top_logits && r.top_counts : r.logits != NULL);
        for (int64_t s = 0; room && s < n_seq; s++) {
            sp.seed = (uint64_t)s + 1;
            room = eddy_sampler_new(&sp, r.n_vocab, &r.samplers[s], err) == EDDY_OK;
        }
    }
    if (!room) st = eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    for (int64_t s = 0; st == EDDY_OK && s < n_seq; s++) st = eddy_seq_new(r.e, &r.seqs[s], err);
    if (st == EDDY_OK) {
        /* random ordinary tokens: the vocabulary's, when given, keeps control tokens out */
        uint64_t rng = p->seed * 0x9e3779b97f4a7c15ull + 7;
        if (!rng) rng = 1;
        for (int64_t i = 0; i < n_rows; i++) prompts[i] = bench_random_token(&rng, r.n_vocab, p->vocab);
        r.prompts = prompts;
        double a, b;
        st = run_once(&r, &a, &b, err); /* warm-up */
        for (int i = 0; i < reps && st == EDDY_OK; i++) st = run_once(&r, &pp[i], &tg[i], err);
    }
    if (st == EDDY_OK) {
        *res = (eddy_bench_batched_result){.n_seq = n_seq, .n_threads = eddy_engine_n_threads(r.e)};
        res->pp_seconds = bench_rate_stats(pp, reps).median;
        res->tg_seconds = bench_rate_stats(tg, reps).median;
        res->pp_tps = p->n_prompt > 0 ? (double)(n_seq * p->n_prompt) / (res->pp_seconds > 1e-9 ? res->pp_seconds : 1e-9) : 0;
        res->tg_tps = p->n_gen > 0 ? (double)(n_seq * p->n_gen) / (res->tg_seconds > 1e-9 ? res->tg_seconds : 1e-9) : 0;
    }
    eddy_engine_free(r.e);
    eddy_free(r.seqs), eddy_free(prompts), eddy_free(r.tokens), eddy_free(r.owner);
    eddy_free(pp), eddy_free(tg);
    for (int64_t s = 0; r.samplers && s < n_seq; s++) eddy_sampler_free(r.samplers[s]);
    eddy_free(r.samplers), eddy_free(r.logits), eddy_free(r.top_ids), eddy_free(r.top_logits), eddy_free(r.top_counts);
    return st;
}
