/*
 * roofline.c — the machine limits a benchmark is compared with, measured in the
 * same run: read bandwidth (all threads streaming a buffer far larger than the
 * caches), f32 FMA peak and 8-bit dot-product peak (independent chains in registers).
 * The chains start from distinct values: chains that start equal compute the same
 * values, a compiler merges them, and the loop then runs at the latency of one chain
 * while being counted as ten (that once made the FMA "peak" 2.5x the real one).
 */
#include <stdlib.h>

#include "base/alloc.h"
#include "base/isa.h"
#include "base/timer.h"
#include "bench.h"
#include "ops/vec.h"

/* ==== Read bandwidth ==== */

#define BW_BYTES ((int64_t)1 << 30) /* 1 GiB: far past any last-level cache */

typedef struct {
    const float *buf;
    int64_t n;
    float sums[256];
} bw_job;

static void bw_task(void *p, int ith, int nth) {
    bw_job *job = p;
    int64_t b, e;
    pool_split(job->n, ith, nth, &b, &e);
    /* x . x reads each byte once (both operands come from the same cache line) */
    job->sums[ith % 256] += vec_dot_f32(job->buf + b, job->buf + b, e - b);
}

double bench_measure_read_bw(threadpool *pool, int n_threads) {
    int64_t n = BW_BYTES / (int64_t)sizeof(float);
    float *buf = bench_random_floats(n, 7, 1.0f);
    if (!buf) return 0;
    bw_job job = {.buf = buf, .n = n};
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = timer_s();
        pool_run(pool, bw_task, &job, n_threads);
        double dt = timer_s() - t0;
        if (rep > 0 && (double)BW_BYTES / dt > best) best = (double)BW_BYTES / dt; /* rep 0 faults pages in */
    }
    eddy_free_aligned(buf);
    return best;
}

/* ==== FMA peak ==== */

double bench_fma_loop_ref(int64_t iters, float *sink) {
    float a[8] = {1.0f, 1.001f, 1.002f, 1.003f, 1.004f, 1.005f, 1.006f, 1.007f}; /* distinct: see roofline_avx512.c */
    const float m = 0.999999f, c = 1e-7f;
    for (int64_t i = 0; i < iters; i++)
        for (int k = 0; k < 8; k++) a[k] = a[k] * m + c;
    float s = 0;
    for (int k = 0; k < 8; k++) s += a[k];
    *sink += s;
    return (double)iters * 8 * 2;
}

typedef struct {
    int64_t iters;
    double flops[256];
    float sink[256];
} fma_job;

static void fma_task(void *p, int ith, int nth) {
    (void)nth;
    fma_job *job = p;
    double f;
    switch (isa_active()) {
#if defined(__x86_64__)
    case ISA_AVX512: f = bench_fma_loop_avx512(job->iters, &job->sink[ith % 256]); break;
    case ISA_AVX2: f = bench_fma_loop_avx2(job->iters, &job->sink[ith % 256]); break;
#elif defined(__aarch64__)
    case ISA_NEON: f = bench_fma_loop_neon(job->iters, &job->sink[ith % 256]); break;
#endif
    default: f = bench_fma_loop_ref(job->iters, &job->sink[ith % 256]); break;
    }
    job->flops[ith % 256] = f;
}

static void dot8_task(void *p, int ith, int nth) {
    (void)nth;
    fma_job *job = p;
    double f = 0;
#if defined(__x86_64__)
    if (isa_has(ISA_EXT_AVX512VNNI)) f = bench_dot8_loop_avx512(job->iters, &job->sink[ith % 256]);
#endif
    job->flops[ith % 256] = f;
}

static double measure_peak(threadpool *pool, int n_threads, void (*task)(void *, int, int)) {
    fma_job job = {.iters = 2000000};
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = timer_s();
        pool_run(pool, task, &job, n_threads);
        double dt = timer_s() - t0, total = 0;
        for (int i = 0; i < n_threads && i < 256; i++) total += job.flops[i];
        if (total / dt > best) best = total / dt;
    }
    return best;
}

double bench_measure_fma_peak(threadpool *pool, int n_threads) { return measure_peak(pool, n_threads, fma_task); }

double bench_measure_dot8_peak(threadpool *pool, int n_threads) { return measure_peak(pool, n_threads, dot8_task); }
