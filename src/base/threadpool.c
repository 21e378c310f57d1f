/*
 * threadpool.c — persistent workers woken by a generation counter.
 *
 * pool_run publishes (fn, ctx, nth) and bumps `generation`; workers that are
 * spinning see it at once, sleeping ones are woken by a broadcast (taken only when
 * some worker sleeps). Every worker decrements `pending` when done with a
 * generation, active or not, and the caller spins until it reaches zero.
 */
#define _GNU_SOURCE
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"

#define CACHE_LINE 64
#define SPIN_ITERS 20000

struct threadpool {
    int n_threads;
    pthread_t *threads;      /* (n_threads - 1) workers; thread 0 is the caller */
    struct worker_arg *args; /* (n_threads - 1) */

    _Atomic uint64_t generation;
    _Atomic int pending;
    _Atomic int n_sleeping;
    _Atomic bool stop;
    _Atomic bool running; /* guards against nested pool_run */
    pool_task fn;
    void *ctx;
    int nth_active;

    pthread_mutex_t mutex;
    pthread_cond_t wake;

    uint8_t *scratch;    /* n_threads * scratch_stride bytes, cache-line aligned */
    size_t scratch_size; /* usable bytes per thread */
    size_t scratch_stride;
};

struct worker_arg {
    threadpool *pool;
    int ith;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static uint64_t wait_for_generation(threadpool *pool, uint64_t seen) {
    for (int i = 0; i < SPIN_ITERS; i++) {
        uint64_t g = atomic_load_explicit(&pool->generation, memory_order_acquire);
        if (g != seen) return g;
        cpu_relax();
    }
    pthread_mutex_lock(&pool->mutex);
    atomic_fetch_add(&pool->n_sleeping, 1);
    uint64_t g;
    while ((g = atomic_load(&pool->generation)) == seen) pthread_cond_wait(&pool->wake, &pool->mutex);
    atomic_fetch_sub(&pool->n_sleeping, 1);
    pthread_mutex_unlock(&pool->mutex);
    return g;
}

static void *worker_main(void *p) {
    struct worker_arg *arg = p;
    threadpool *pool = arg->pool;
    uint64_t seen = 0;
    for (;;) {
        seen = wait_for_generation(pool, seen);
        if (atomic_load(&pool->stop)) break;
        if (arg->ith < pool->nth_active) pool->fn(pool->ctx, arg->ith, pool->nth_active);
        atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_release);
    }
    return NULL;
}

int pool_default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

eddy_status pool_create(threadpool **out, int n_threads, eddy_error *err) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return eddy_error_set(err, EDDY_ERR_ARG, "thread count %d out of range 1..1024", n_threads);
    threadpool *pool = eddy_calloc(1, sizeof *pool);
    if (!pool) return eddy_error_set(err, EDDY_ERR_NOMEM, "cannot allocate thread pool");
    pool->n_threads = n_threads;
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->wake, NULL);
    int n_workers = n_threads - 1;
    if (n_workers > 0) {
        pool->threads = eddy_calloc((size_t)n_workers, sizeof *pool->threads);
        pool->args = eddy_calloc((size_t)n_workers, sizeof *pool->args);
        if (!pool->threads || !pool->args) {
            pool->n_threads = 1;
            pool_destroy(pool);
            return eddy_error_set(err, EDDY_ERR_NOMEM, "cannot allocate thread pool");
        }
    }
    for (int i = 0; i < n_workers; i++) {
        pool->args[i].pool = pool;
        pool->args[i].ith = i + 1;
        if (pthread_create(&pool->threads[i], NULL, worker_main, &pool->args[i]) != 0) {
            pool->n_threads = i + 1; /* join only the ones that started */
            pool_destroy(pool);
            return eddy_error_set(err, EDDY_ERR_NOMEM, "cannot start worker thread %d", i + 1);
        }
    }
    *out = pool;
    return EDDY_OK;
}

void pool_destroy(threadpool *pool) {
    if (!pool) return;
    atomic_store(&pool->stop, true);
    pthread_mutex_lock(&pool->mutex);
    atomic_fetch_add(&pool->generation, 1);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mutex);
    for (int i = 0; i < pool->n_threads - 1; i++) pthread_join(pool->threads[i], NULL);
    pthread_mutex_destroy(&pool->mutex);
    pthread_cond_destroy(&pool->wake);
    eddy_free(pool->threads);
    eddy_free(pool->args);
    eddy_free_aligned(pool->scratch);
    eddy_free(pool);
}

int pool_size(const threadpool *pool) { return pool ? pool->n_threads : 1; }

void pool_run(threadpool *pool, pool_task fn, void *ctx, int nth) {
    if (!pool || pool->n_threads == 1 || nth == 1) {
        fn(ctx, 0, 1);
        return;
    }
    if (nth <= 0 || nth > pool->n_threads) nth = pool->n_threads;
    bool was_running = atomic_exchange(&pool->running, true);
    EDDY_ASSERT(!was_running && "pool_run called from inside a task");
    pool->fn = fn;
    pool->ctx = ctx;
    pool->nth_active = nth;
    atomic_store(&pool->pending, pool->n_threads - 1);
    atomic_fetch_add(&pool->generation, 1); /* seq_cst: publishes fn/ctx/nth */
    if (atomic_load(&pool->n_sleeping) > 0) {
        pthread_mutex_lock(&pool->mutex);
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->mutex);
    }
    fn(ctx, 0, nth);
    for (int i = 0; atomic_load_explicit(&pool->pending, memory_order_acquire) > 0; i++) {
        if (i < SPIN_ITERS)
            cpu_relax();
        else
            sched_yield();
    }
    atomic_store(&pool->running, false);
}

eddy_status pool_reserve_scratch(threadpool *pool, size_t bytes, eddy_error *err) {
    EDDY_ASSERT(pool != NULL);
    if (bytes <= pool->scratch_size) return EDDY_OK;
    size_t stride = (bytes + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE, total;
    if (stride < bytes || !eddy_mul_size(stride, (size_t)pool->n_threads, &total))
        return eddy_error_set(err, EDDY_ERR_NOMEM, "scratch of %zu bytes per thread overflows", bytes);
    uint8_t *p = eddy_malloc_aligned(total, CACHE_LINE);
    if (!p) return eddy_error_set(err, EDDY_ERR_NOMEM, "cannot allocate %zu bytes of scratch", total);
    eddy_free_aligned(pool->scratch);
    pool->scratch = p;
    pool->scratch_size = stride;
    pool->scratch_stride = stride;
    return EDDY_OK;
}

size_t pool_scratch_size(const threadpool *pool) { return pool ? pool->scratch_size : 0; }

void *pool_scratch(threadpool *pool, int ith) {
    EDDY_ASSERT(pool != NULL && ith >= 0 && ith < pool->n_threads);
    return pool->scratch ? pool->scratch + (size_t)ith * pool->scratch_stride : NULL;
}
