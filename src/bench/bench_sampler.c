/*
 * bench_sampler.c — `eddy bench --kernels --filter sampler`: the time the sampling chain
 * (gen/sampler.c) takes for one token of a 151936-token vocabulary (Qwen's), at eddy
 * run's default settings, greedy, and temperature 1 without filters (the whole vocabulary
 * sorted). On a GPU that makes a token in a few milliseconds this is part of every token.
 */
#include <stdio.h>

#include "base/alloc.h"
#include "bench.h"
#include "gen/sampler.h"

void bench_sampler_cases(bench_env *env);

typedef struct {
    sampler *s;
    const float *logits;
    int64_t sink;
} sample_job;

static void run_sample(void *p) {
    sample_job *j = p;
    j->sink += sampler_sample(j->s, j->logits);
}

void bench_sampler_cases(bench_env *env) {
    const int64_t n = 151936;
    float *logits = bench_random_floats(n, 4, 3.0f); /* logits of a spread like a model's */
    if (!logits) return;
    static const char *const names[] = {"default", "greedy", "no_filter"};
    for (int k = 0; k < 3; k++) {
        eddy_sampler_params p = eddy_sampler_default_params(); /* temp 0.8, top-k 40, top-p 0.95, min-p 0.05 */
        if (k == 1) p.temp = 0.0f;
        if (k == 2) p.temp = 1.0f, p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f;
        sample_job job = {NULL, logits, 0};
        if (sampler_new(&job.s, &p, n, NULL) != EDDY_OK) continue;
        bench_result r = {.op = "sampler", .variant = names[k]};
        snprintf(r.shape, sizeof r.shape, "a token of %lld logits", (long long)n);
        r.seconds = bench_median(run_sample, &job, k == 2 ? 10 : 100, 0.2);
        r.bytes = (double)n * sizeof(float);
        r.threads = 1;
        r.in_cache = true;
        bench_emit(env, &r);
        sampler_free(job.s);
    }
    eddy_free_aligned(logits);
}
