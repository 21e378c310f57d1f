/*
 * bench_sampler.c — `eddy bench --kernels --filter sampler`: the time the sampling chain
 * (gen/sampler.c) takes for one token of a 151936-token vocabulary (Qwen's), at eddy
 * run's default settings, greedy, and temperature 1 without filters (the whole vocabulary
 * sorted); and the default settings from the row's best 40 alone (top_40:
 * sampler_sample_top on what eddy_engine_decode_top gives, on a GPU found there). On a GPU
 * that makes a token in a few milliseconds this is part of every token. Also a scored token's
 * log-probability (op logprob): vec_logprob against the scalar loop in double that
 * eddy perplexity ran before.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "base/alloc.h"
#include "bench.h"
#include "gen/sampler.h"
#include "ops/vec.h"

void bench_sampler_cases(bench_env *env);

typedef struct {
    sampler *s;
    const float *logits;
    int64_t sink;
    const int32_t *top_ids; /* non-NULL: sample from the row's best n_top alone */
    const float *top_logits;
    int32_t n_top;
} sample_job;

static void run_sample(void *p) {
    sample_job *j = p;
    j->sink += j->top_ids ? sampler_sample_top(j->s, j->top_ids, j->top_logits, j->n_top)
                          : sampler_sample(j->s, j->logits);
}

typedef struct {
    const float *logits;
    int64_t n;
    bool in_double;
    double sink;
} logprob_job;

static void run_logprob(void *p) {
    logprob_job *j = p;
    if (!j->in_double) {
        j->sink += vec_logprob(j->logits, j->n, 7);
        return;
    }
    float max = j->logits[0];
    for (int64_t i = 1; i < j->n; i++) max = j->logits[i] > max ? j->logits[i] : max;
    double sum = 0;
    for (int64_t i = 0; i < j->n; i++) sum += exp((double)j->logits[i] - max);
    j->sink += (double)j->logits[7] - max - log(sum);
}

void bench_sampler_cases(bench_env *env) {
    const int64_t n = 151936;
    float *logits = bench_random_floats(n, 4, 3.0f); /* logits of a spread like a model's */
    if (!logits) return;
    static const char *const names[] = {"default", "greedy", "no_filter", "top_40"};
    int32_t top_ids[40];
    float top_logits[40];
    const int32_t n_top = (int32_t)vec_top_k(logits, n, 40, top_ids, top_logits);
    for (int k = 0; k < 4; k++) {
        eddy_sampler_params p = eddy_sampler_default_params(); /* temp 0.8, top-k 40, top-p 0.95, min-p 0.05 */
        if (k == 1) p.temp = 0.0f;
        if (k == 2) p.temp = 1.0f, p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f;
        sample_job job = {NULL, logits, 0, k == 3 ? top_ids : NULL, top_logits, n_top};
        if (sampler_new(&job.s, &p, n, NULL) != EDDY_OK) continue;
        bench_result r = {.op = "sampler", .variant = names[k]};
        if (k == 3) snprintf(r.shape, sizeof r.shape, "a token from the best 40 of %lld logits", (long long)n);
        else snprintf(r.shape, sizeof r.shape, "a token of %lld logits", (long long)n);
        r.seconds = bench_median(run_sample, &job, k == 2 ? 10 : 100, 0.2);
        r.bytes = k == 3 ? (double)n_top * (sizeof(int32_t) + sizeof(float)) : (double)n * sizeof(float);
        r.threads = 1;
        r.in_cache = true;
        bench_emit(env, &r);
        sampler_free(job.s);
    }
    /* a scored token's log-probability, as eddy perplexity takes it: vec_logprob, and the
     * loop it replaced (exp in double, one element at a time) */
    for (int k = 0; k < 2; k++) {
        logprob_job job = {logits, n, k == 1, 0};
        bench_result r = {.op = "logprob", .variant = k ? "exp_in_double" : "vec_logprob"};
        snprintf(r.shape, sizeof r.shape, "a token of %lld logits", (long long)n);
        r.seconds = bench_median(run_logprob, &job, 20, 0.2);
        r.bytes = (double)n * sizeof(float);
        r.threads = 1;
        r.in_cache = true;
        bench_emit(env, &r);
    }
    eddy_free_aligned(logits);
}
