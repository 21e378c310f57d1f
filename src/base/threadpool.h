/*
 * threadpool.h — one persistent pool of worker threads for all ops.
 *
 * An op is a function run once per thread as fn(ctx, ith, nth); each call splits
 * its rows with pool_split(n, ith, nth, ...). The calling thread is thread 0, so a
 * pool of 1 runs everything inline. Workers spin briefly between ops (decode issues
 * hundreds of small ops per token) and then sleep on a condition variable.
 *
 * Per-thread scratch: each thread owns a cache-line-aligned scratch region of
 * pool_scratch_size() bytes, obtained with pool_scratch(pool, ith).
 */
#ifndef EDDY_BASE_THREADPOOL_H
#define EDDY_BASE_THREADPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct threadpool threadpool;
typedef void (*pool_task)(void *ctx, int ith, int nth);

/* n_threads >= 1 (the caller counts as one). */
eddy_status pool_create(threadpool **out, int n_threads, eddy_error *err);
void pool_destroy(threadpool *pool);
int pool_size(const threadpool *pool);

/* Runs fn on min(nth, pool_size) threads and returns when all have finished.
 * nth <= 0 means all threads. pool may be NULL (runs fn(ctx, 0, 1) inline).
 * Must not be called from inside a task. */
void pool_run(threadpool *pool, pool_task fn, void *ctx, int nth);

/* Makes every thread's scratch at least `bytes` long (call between runs). */
eddy_status pool_reserve_scratch(threadpool *pool, size_t bytes, eddy_error *err);
size_t pool_scratch_size(const threadpool *pool);
void *pool_scratch(threadpool *pool, int ith);

/* Thread ith of nth takes rows [*begin, *end) of n: contiguous, sizes differ by at most 1. */
static inline void pool_split(int64_t n, int ith, int nth, int64_t *begin, int64_t *end) {
    int64_t base = n / nth, extra = n % nth;
    *begin = ith * base + (ith < extra ? ith : extra);
    *end = *begin + base + (ith < extra ? 1 : 0);
}

/* The number of online CPUs (at least 1). */
int pool_default_threads(void);

#endif
