/*
 * bench.c — the kernel benchmark runner: case table, timing, output.
 */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/cpu.h"
#include "base/timer.h"
#include "eddy.h"

/* ==== The case table: each area's cases ==== */

void bench_vec_cases(bench_env *env);
void bench_argmax_cases(bench_env *env);
void bench_sampler_cases(bench_env *env);
void bench_matmul_gemv_cases(bench_env *env);
void bench_matmul_gemm_cases(bench_env *env);
void bench_matmul_few_cases(bench_env *env);
void bench_qpack_kernel_cases(bench_env *env);
void bench_mamba2_cases(bench_env *env);
void bench_gdn_step_cases(bench_env *env);
void bench_gdn_prefill_cases(bench_env *env);
void bench_gdn_crossover_cases(bench_env *env);
void bench_conv1d_step_cases(bench_env *env);
void bench_conv1d_prefill_cases(bench_env *env);
void bench_gated_norm_cases(bench_env *env);
void bench_attention_cases(bench_env *env);
void bench_pool_cases(bench_env *env);

static const bench_case cases[] = {
    {"vec_dot", bench_vec_cases},
    {"argmax", bench_argmax_cases},
    {"sampler", bench_sampler_cases},
    {"matmul_gemv", bench_matmul_gemv_cases},
    {"matmul_few", bench_matmul_few_cases},
    {"matmul_gemm", bench_matmul_gemm_cases},
    {"qpack_kernel", bench_qpack_kernel_cases},
    {"mamba2", bench_mamba2_cases},
    {"gdn_step", bench_gdn_step_cases},
    {"gdn_prefill", bench_gdn_prefill_cases},
    {"gdn_crossover", bench_gdn_crossover_cases},
    {"conv1d_step", bench_conv1d_step_cases},
    {"conv1d_prefill", bench_conv1d_prefill_cases},
    {"gated_norm", bench_gated_norm_cases},
    {"attention", bench_attention_cases},
    {"pool_run", bench_pool_cases},
};

/* ==== Timing ==== */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(void (*fn)(void *ctx), void *ctx, int min_reps, double min_seconds) {
    enum { MAX_REPS = 10000 };
    static double times[MAX_REPS];
    fn(ctx); /* warm-up */
    int n = 0;
    double start = timer_s();
    while (n < MAX_REPS && (n < min_reps || timer_s() - start < min_seconds)) {
        double t0 = timer_s();
        fn(ctx);
        times[n++] = timer_s() - t0;
    }
    qsort(times, (size_t)n, sizeof times[0], cmp_double);
    return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

float *bench_random_floats(int64_t n, uint64_t seed, float scale) {
    float *p = eddy_malloc_big((size_t)n * sizeof(float));
    if (!p) return NULL;
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = scale * ((float)(s >> 40) / (float)(1 << 24) - 0.5f);
    }
    return p;
}

/* ==== Output ==== */

void bench_emit(const bench_env *env, const bench_result *r) {
    double bw = r->seconds > 0 ? r->bytes / r->seconds : 0;
    double fl = r->seconds > 0 ? r->flops / r->seconds : 0;
    const int threads = r->threads > 0 ? r->threads : env->n_threads;
    const int li = threads > 1 ? 1 : 0; /* the limits measured on as many threads */
    const double read_bw = env->read_bw[li];
    /* integer dots against the integer peak where there is one, else against f32 FMA */
    const bool vs_dot8 = r->int8 && env->dot8_peak[li] > 0;
    const double peak = vs_dot8 ? env->dot8_peak[li] : env->fma_peak[li];
    if (env->json) {
        printf("{\"op\": \"%s\", \"variant\": \"%s\", \"shape\": \"%s\", \"threads\": %d, "
               "\"seconds\": %.9g, \"bytes\": %.0f, \"flops\": %.0f, \"in_cache\": %s, \"int8\": %s, "
               "\"read_bw\": %.4g, \"fma_peak\": %.4g, \"dot8_peak\": %.4g}\n",
               r->op, r->variant, r->shape, threads, r->seconds, r->bytes, r->flops, r->in_cache ? "true" : "false",
               r->int8 ? "true" : "false", read_bw, env->fma_peak[li], env->dot8_peak[li]);
    } else {
        /* the limit that matters: whichever of bandwidth and compute the op is closer to;
         * data served from cache has no memory-bandwidth limit to compare with */
        double f_bw = read_bw > 0 && !r->in_cache ? bw / read_bw : 0;
        double f_fl = peak > 0 ? fl / peak : 0;
        const char *what = f_bw > f_fl ? "of bandwidth" : vs_dot8 ? "of int8 dot peak" : "of FMA peak";
        printf("%-16s %-10s %-44s %11.3f us %9.2f GB/s %9.2f GF/s", r->op, r->variant, r->shape, r->seconds * 1e6,
               bw / 1e9, fl / 1e9);
        if (f_bw > 0 || f_fl > 0)
            printf("   %5.1f%% %s\n", 100 * (f_bw > f_fl ? f_bw : f_fl), what);
        else
            printf("   -\n");
    }
    fflush(stdout);
}

/* ==== Entry ==== */

eddy_status eddy_bench_kernels(const char *filter, int n_threads, int json, eddy_error *err) {
    int matches = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) matches += !filter || strstr(cases[i].name, filter);
    if (!matches) return eddy_error_set(err, EDDY_ERR_ARG, "no kernel benchmark matches \"%s\"", filter);
    bench_env env = {.n_threads = n_threads, .json = json != 0};
    eddy_status s = pool_create(&env.pool, n_threads, err);
    if (s != EDDY_OK) return s;
    for (int li = 0; li < 2; li++) {
        const int nt = li ? n_threads : 1;
        if (li && n_threads == 1) {
            env.read_bw[1] = env.read_bw[0], env.fma_peak[1] = env.fma_peak[0], env.dot8_peak[1] = env.dot8_peak[0];
            break;
        }
        env.read_bw[li] = bench_measure_read_bw(env.pool, nt);
        env.fma_peak[li] = bench_measure_fma_peak(env.pool, nt);
        env.dot8_peak[li] = bench_measure_dot8_peak(env.pool, nt);
    }
    if (!json) {
        printf("eddy kernel benchmarks: %d threads, cpu features: %s, kernels: %s\n", n_threads,
               eddy_cpu_features(), eddy_cpu_isa());
        for (int li = n_threads > 1; li >= 0; li--)
            printf("machine limits measured now, %d thread%s: read bandwidth %.2f GB/s, f32 FMA peak %.1f GFLOP/s, "
                   "int8 dot peak %.1f GOP/s\n",
                   li ? n_threads : 1, li && n_threads > 1 ? "s" : "", env.read_bw[li] / 1e9, env.fma_peak[li] / 1e9,
                   env.dot8_peak[li] / 1e9);
        printf("(each result is compared with the limits for its thread count; in-cache data with compute only)\n\n");
        printf("%-16s %-10s %-44s %14s %14s %14s   %s\n", "op", "variant", "shape", "time/call",
               "bandwidth", "compute", "fraction of limit");
    } else {
        printf("{\"machine\": true, \"threads\": %d, \"read_bw\": %.4g, \"fma_peak\": %.4g, \"dot8_peak\": %.4g, "
               "\"read_bw_1\": %.4g, \"fma_peak_1\": %.4g, \"dot8_peak_1\": %.4g, \"cpu\": \"%s\", \"isa\": \"%s\"}\n",
               n_threads, env.read_bw[1], env.fma_peak[1], env.dot8_peak[1], env.read_bw[0], env.fma_peak[0],
               env.dot8_peak[0], eddy_cpu_features(), eddy_cpu_isa());
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!filter || strstr(cases[i].name, filter)) cases[i].fn(&env);
    pool_destroy(env.pool);
    return EDDY_OK;
}
