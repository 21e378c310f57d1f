/*
 * threadpool.h — one persistent pool of worker threads for all ops.
 *
 * An op is split into nth parts, fn(ctx, ith, nth) for ith = 0..nth-1, each run
 * exactly once; each part takes its rows with pool_split(n, ith, nth, ...). nth is
 * at most the pool's size, so up to that many parts run at once. Which thread runs
 * part ith is not fixed: the caller runs part 0, then every awake thread claims the
 * next unclaimed part, so a worker that is late or descheduled holds up only a part
 * it has claimed. A part's work, and so the op's result, depends only on (ith, nth),
 * never on the thread: results are bit-identical whoever runs what. A pool of 1
 * runs everything inline. Workers spin briefly between ops (decode issues hundreds
 * of small ops per token), then sleep; at most as many threads as the process has
 * CPUs are kept busy (cpu_usable_count()), so a pool larger than that degrades to
 * the speed of one that fits instead of collapsing.
 *
 * Per-part scratch: part ith owns a cache-line-aligned scratch region of
 * pool_scratch_size() bytes, pool_scratch(pool, ith), for as long as it runs.
 */
#ifndef EDDY_BASE_THREADPOOL_H
#define EDDY_BASE_THREADPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct threadpool threadpool;
typedef void (*pool_task)(void *ctx, int ith, int nth);

/* n_threads in 1..1024 (the caller counts as one). Logs one warning per process
 * when n_threads exceeds the CPUs this process may use. */
eddy_status pool_create(threadpool **out, int n_threads, eddy_error *err);
/* As pool_create, but keeping up to n_cpus threads busy at once (n_cpus >= 1)
 * whatever the process's CPUs are, and without the warning: tests oversubscribe
 * with it on purpose. */
eddy_status pool_create_cpus(threadpool **out, int n_threads, int n_cpus, eddy_error *err);
void pool_destroy(threadpool *pool);
int pool_size(const threadpool *pool);

/* Runs the parts fn(ctx, ith, n) for ith < n = min(nth, pool_size) and returns when
 * all have finished (their writes are then visible to the caller). nth <= 0 means
 * pool_size parts. pool may be NULL (runs fn(ctx, 0, 1) inline). Must not be called
 * from inside a part. */
void pool_run(threadpool *pool, pool_task fn, void *ctx, int nth);

/* Makes every part's scratch at least `bytes` long (call between runs). */
eddy_status pool_reserve_scratch(threadpool *pool, size_t bytes, eddy_error *err);
size_t pool_scratch_size(const threadpool *pool);
void *pool_scratch(threadpool *pool, int ith);

/* The parts worth running for `work` units of an op when each part should get at
 * least min_work of them (waking a thread costs microseconds): work / min_work, at
 * least 1, at most the pool's size. */
static inline int pool_parts_for(const threadpool *pool, int64_t work, int64_t min_work) {
    const int64_t n = work / (min_work > 0 ? min_work : 1), size = pool_size(pool);
    return n < 1 ? 1 : n > size ? (int)size : (int)n;
}

/* Thread ith of nth takes rows [*begin, *end) of n: contiguous, sizes differ by at most 1. */
static inline void pool_split(int64_t n, int ith, int nth, int64_t *begin, int64_t *end) {
    int64_t base = n / nth, extra = n % nth;
    *begin = ith * base + (ith < extra ? ith : extra);
    *end = *begin + base + (ith < extra ? 1 : 0);
}

/* The default thread count: the CPUs this process may use (its affinity mask, so
 * taskset and cpusets count, lowered to its cgroup's CPU quota), at least 1. */
int pool_default_threads(void);

#endif
