/*
 * bench_pool.c — the thread pool's hand-off cost: one pool_run of an empty task on
 * every thread of the run's pool (publish, wake or spin, join). A decode step makes a
 * few hundred such hand-offs (one or two per product and per kernel), so this times
 * that count gives the per-token overhead at 1 and 2 threads (`-t 1`, `-t 2`).
 */
#include <stdio.h>

#include "bench/bench.h"

void bench_pool_cases(bench_env *env);


static void empty_task(void *ctx, int ith, int nth) {
    (void)ctx, (void)ith, (void)nth;
}

static void run_handoff(void *p) {
    bench_env *env = p;
    pool_run(env->pool, empty_task, NULL, env->n_threads);
}

void bench_pool_cases(bench_env *env) {
    bench_result r = {.op = "pool_run", .variant = "empty"};
    snprintf(r.shape, sizeof r.shape, "nth=%d (one hand-off)", env->n_threads);
    r.seconds = bench_median(run_handoff, env, 20000, 0.2);
    bench_emit(env, &r);
}
