/*
 * bench.h — kernel benchmarks behind `eddy bench --kernels`.
 *
 * Owns: the table of kernel benchmark cases, timing (median seconds per call), the
 * machine limits measured in the same run (read bandwidth, f32 FMA peak), and the
 * output (one JSON object per line, or a table with each case's fraction of the
 * relevant limit). Each area of kernels adds its cases in its own bench_<area>.c and
 * lists them in bench.c's table.
 *
 * A case gets a bench_env (thread pool, limits) and reports one or more results
 * with bench_emit. Timing never feeds a test: these are measurements, not checks.
 */
#ifndef EDDY_BENCH_H
#define EDDY_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "eddy.h"

typedef struct {
    threadpool *pool;
    int n_threads;
    bool json;
    /* this run's measurements, [0] on one thread, [1] on n_threads */
    double read_bw[2];  /* bytes/s */
    double fma_peak[2]; /* f32 flop/s */
    double dot8_peak[2]; /* 8-bit integer multiply-adds x 2 per s (vpdpbusd chains); 0 where the
                          * ISA level has no such loop */
} bench_env;

typedef struct {
    const char *op;      /* "gdn_step" */
    const char *variant; /* "ref", "avx2", "chunked" ... */
    char shape[192];     /* human-readable, e.g. "n_seq=1 h=32 dk=128 dv=128" */
    double seconds;      /* median per call */
    double bytes;        /* least bytes that must move per call */
    double flops;        /* floating-point operations per call (int8: 2 per multiply-add) */
    int threads;         /* threads the case ran on; 0: env->n_threads */
    bool in_cache;       /* the bytes come from cache: no memory-bandwidth fraction */
    bool int8;           /* the flops are 8-bit integer multiply-adds: compared with dot8_peak */
} bench_result;

typedef void (*bench_case_fn)(bench_env *env);

typedef struct {
    const char *name; /* matched by --filter */
    bench_case_fn fn;
} bench_case;

/* Median seconds per call of fn(ctx): warms up once, then repeats until at least
 * min_reps calls and min_seconds have passed (at most 10000 calls). */
double bench_median(void (*fn)(void *ctx), void *ctx, int min_reps, double min_seconds);

/* Prints one result (JSON line or table row with its roofline fraction). */
void bench_emit(const bench_env *env, const bench_result *r);

/* Measured machine limits (called once per run). */
double bench_measure_read_bw(threadpool *pool, int n_threads);
double bench_measure_fma_peak(threadpool *pool, int n_threads);
double bench_measure_dot8_peak(threadpool *pool, int n_threads);

/* Peak-FMA loop per ISA: runs `iters` iterations of independent FMA chains and
 * returns the flops done (the sum keeps the work from being optimized away via *sink). */
double bench_fma_loop_ref(int64_t iters, float *sink);
double bench_fma_loop_avx2(int64_t iters, float *sink);
double bench_fma_loop_avx512(int64_t iters, float *sink);
double bench_fma_loop_neon(int64_t iters, float *sink);
/* The same for 8-bit dot products (AVX-512 VNNI vpdpbusd): returns 2 x the multiply-adds. */
double bench_dot8_loop_avx512(int64_t iters, float *sink);

/* A buffer of `bytes` filled with small random floats (eddy_malloc_aligned;
 * free with eddy_free_aligned). NULL on failure. */
float *bench_random_floats(int64_t n, uint64_t seed, float scale);

/* ==== Helpers of the model benchmarks (bench_model.c) ==== */

/* A random id the model accepts (xorshift state *s, non-zero); with a vocabulary, one
 * of its ordinary tokens (control and end-of-generation tokens are drawn again, 64
 * tries at most). */
int32_t bench_random_token(uint64_t *s, int64_t n_vocab, const eddy_vocab *v);
int32_t bench_argmax(const float *x, int64_t n);
/* Median, mean and sample standard deviation of rates[0 .. n) (sorts rates). */
eddy_bench_rate bench_rate_stats(double *rates, int n);

#endif
