/*
 * threadpool.c — persistent workers that claim an op's parts from one atomic word.
 *
 * pool_run publishes (fn, ctx) and the job word: generation (32 bits) | nth (16) |
 * next unclaimed part (16). The caller runs part 0, then it and every awake worker
 * claim part `next` with a compare-and-swap of the word (which fails when the
 * generation moved on, so a late worker can never claim a part of a finished op)
 * until none is left. The caller then waits only for the parts in flight, i.e. for
 * `done` to reach nth: workers that took no part are never waited for.
 *
 * Waiting spins briefly, then sleeps (a futex on Linux, a condition variable
 * elsewhere): idle workers spin on the job word for WORKER_SPIN_NS, the caller on
 * `done` for CALLER_SPIN_NS, and whoever finishes the last part wakes a sleeping
 * caller. At most n_cpus threads are kept busy (the CPUs the process may use, read
 * at creation): a worker spins only while at most n_cpus - 1 workers are awake, and
 * pool_run wakes only as many sleepers as leaves room for, so with more threads than
 * CPUs the extra ones sleep and the awake ones take their parts. While another process
 * takes our CPUs (a spinner sees a gap in time, or the caller waits at a join for a
 * descheduled helper), workers sleep between ops for a while instead of spinning; seen
 * twice within that while, one CPU fewer is kept busy too.
 *
 * Owns: the workers, the hand-off, per-part scratch. Not: how ops split their rows
 * (pool_split in the header), the CPU count (cpu.c).
 */
#define _GNU_SOURCE
#include "threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "alloc.h"
#include "cpu.h"
#include "log.h"
#include "timer.h"

#if defined(__linux__) && !defined(EDDY_POOL_CONDVAR)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define POOL_FUTEX 1
#else
#define POOL_FUTEX 0
#endif

#define CACHE_LINE 64
/* Spin budgets before sleeping: an idle worker covers the gap between two ops and
 * a token's sampling; the caller covers the usual spread of its helpers' parts. */
#define WORKER_SPIN_NS 300000
#define CALLER_SPIN_NS 100000
/* A spinning thread that saw this much time pass between two looks at the clock was
 * descheduled: another process wants its CPU. */
#define PREEMPTED_GAP_NS 200000
/* Then workers sleep between ops instead of spinning for this long, after which they
 * try spinning again (and find out within one scheduler slice if it still does not pay). */
#define CONTENDED_HOLD_NS 100000000

struct threadpool {
    int n_threads;
    int n_cpus;         /* threads kept busy at once, at most n_threads */
    int n_started;      /* workers started (all n_threads - 1 once created) */
    pthread_t *threads; /* (n_threads - 1) workers; thread 0 is the caller */

    /* job word, see the top comment; the generation's low 32 bits are mirrored in
     * `gen` for sleeping workers (a futex is 32 bits) */
    _Alignas(CACHE_LINE) _Atomic uint64_t job;
    _Atomic uint32_t gen;
    _Alignas(CACHE_LINE) _Atomic uint32_t done; /* parts finished this generation */
    _Atomic uint32_t caller_sleeping;
    _Alignas(CACHE_LINE) _Atomic int n_sleeping; /* workers asleep or about to be */
    _Atomic uint64_t contended_until;            /* timer_ns() before which workers do not spin */
    _Atomic uint64_t shed_until;                 /* ... and one CPU fewer is kept busy */
    _Atomic bool stop;
    _Atomic bool running; /* guards against nested pool_run */
    pool_task fn;         /* written by the caller only while no part is claimed */
    void *ctx;

#if !POOL_FUTEX
    pthread_mutex_t mutex;
    pthread_cond_t cond; /* every sleeper, caller or worker */
#endif

    uint8_t *scratch;    /* n_threads * scratch_stride bytes, cache-line aligned */
    size_t scratch_size; /* usable bytes per part */
    size_t scratch_stride;
};

/* ==== Job word ==== */

static inline uint32_t job_gen(uint64_t w) { return (uint32_t)(w >> 32); }
static inline uint32_t job_nth(uint64_t w) { return (uint32_t)(w >> 16) & 0xffff; }
static inline uint32_t job_next(uint64_t w) { return (uint32_t)w & 0xffff; }
static inline uint64_t job_make(uint32_t gen, uint32_t nth, uint32_t next) {
    return (uint64_t)gen << 32 | (uint64_t)nth << 16 | next;
}

/* ==== Sleeping and waking ==== */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Sleeps while *word == value (may return early: callers re-check). */
static void sleep_while(threadpool *pool, _Atomic uint32_t *word, uint32_t value) {
#if POOL_FUTEX
    (void)pool;
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
#else
    pthread_mutex_lock(&pool->mutex);
    if (atomic_load(word) == value) pthread_cond_wait(&pool->cond, &pool->mutex);
    pthread_mutex_unlock(&pool->mutex);
#endif
}

/* Wakes up to n threads sleeping on word (after the store that changed it). */
static void wake(threadpool *pool, _Atomic uint32_t *word, int n) {
#if POOL_FUTEX
    (void)pool;
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
#else
    (void)word, (void)n;
    pthread_mutex_lock(&pool->mutex);
    pthread_cond_broadcast(&pool->cond);
    pthread_mutex_unlock(&pool->mutex);
#endif
}

/* ==== Parts ==== */

static void finish_part(threadpool *pool, uint32_t nth) {
    /* seq_cst, as the caller's store of caller_sleeping then load of done: one of
     * the two sides sees the other */
    uint32_t d = atomic_fetch_add(&pool->done, 1) + 1;
    if (d == nth && atomic_load(&pool->caller_sleeping)) wake(pool, &pool->done, 1);
}

/* Claims and runs parts of generation `gen`, starting from the word w, until none
 * is left or the generation has moved on. */
static void run_parts(threadpool *pool, uint64_t w, uint32_t gen) {
    while (job_gen(w) == gen && job_next(w) < job_nth(w)) {
        if (!atomic_compare_exchange_weak_explicit(&pool->job, &w, w + 1, memory_order_acquire,
                                                   memory_order_acquire))
            continue;
        /* the part is ours and unfinished, so the op cannot end: fn and ctx are stable */
        pool->fn(pool->ctx, (int)job_next(w), (int)job_nth(w));
        finish_part(pool, job_nth(w));
        w = atomic_load_explicit(&pool->job, memory_order_acquire);
    }
}

/* ==== Workers ==== */

/* Another process shares our CPUs: a spinning worker would hold a part it claimed
 * through every slice the scheduler gives the other process, and the caller would wait
 * for it at each join. A worker that sleeps between ops uses less than its share, so
 * the scheduler runs it soon after it is woken, and the caller takes the parts it is
 * late for. */
static void mark_contended(threadpool *pool, uint64_t now) {
    /* seen twice within a hold (not a single stolen slice): keep one CPU fewer busy too */
    if (now < atomic_load_explicit(&pool->contended_until, memory_order_relaxed))
        atomic_store_explicit(&pool->shed_until, now + CONTENDED_HOLD_NS, memory_order_relaxed);
    atomic_store_explicit(&pool->contended_until, now + CONTENDED_HOLD_NS, memory_order_relaxed);
}

static bool contended(threadpool *pool, uint64_t now) {
    return now < atomic_load_explicit(&pool->contended_until, memory_order_relaxed);
}

/* The next job word whose generation differs from `seen` (or any, once stopping). */
static uint64_t wait_for_job(threadpool *pool, uint32_t seen) {
    uint64_t w = atomic_load_explicit(&pool->job, memory_order_acquire);
    const int n_workers = pool->n_threads - 1;
    const uint64_t t0 = timer_ns();
    /* spin only while the awake workers (this one included) fit beside the caller */
    if (job_gen(w) == seen && !contended(pool, t0) &&
        n_workers - atomic_load_explicit(&pool->n_sleeping, memory_order_relaxed) <= pool->n_cpus - 1) {
        uint64_t last = t0;
        for (uint32_t i = 1; job_gen(w) == seen; i++) {
            cpu_relax();
            if (i % 64 == 0) {
                const uint64_t t = timer_ns();
                if (t - last > PREEMPTED_GAP_NS) mark_contended(pool, t);
                if (t - t0 > WORKER_SPIN_NS || t - last > PREEMPTED_GAP_NS) break;
                last = t;
            }
            w = atomic_load_explicit(&pool->job, memory_order_acquire);
        }
    }
    if (job_gen(w) != seen) return w;
    /* seq_cst, as pool_run's store of gen then load of n_sleeping */
    atomic_fetch_add(&pool->n_sleeping, 1);
    while (job_gen(w = atomic_load(&pool->job)) == seen) sleep_while(pool, &pool->gen, seen);
    atomic_fetch_sub(&pool->n_sleeping, 1);
    return w;
}

static void *worker_main(void *p) {
    threadpool *pool = p;
    uint32_t seen = 0;
    for (;;) {
        uint64_t w = wait_for_job(pool, seen);
        if (atomic_load_explicit(&pool->stop, memory_order_acquire)) break;
        seen = job_gen(w);
        run_parts(pool, w, seen);
    }
    return NULL;
}

/* ==== Pool ==== */

int pool_default_threads(void) { return cpu_usable_count(); }

static eddy_status create(threadpool **out, int n_threads, int n_cpus, eddy_error *err) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return eddy_error_set(err, EDDY_ERR_ARG, "thread count %d out of range 1..1024", n_threads);
    threadpool *pool = eddy_malloc_aligned(sizeof *pool, CACHE_LINE);
    if (!pool) return eddy_error_set(err, EDDY_ERR_NOMEM, "cannot allocate thread pool");
    memset(pool, 0, sizeof *pool);
    pool->n_threads = n_threads;
    pool->n_cpus = n_cpus < 1 ? 1 : n_cpus > n_threads ? n_threads : n_cpus;
#if !POOL_FUTEX
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->cond, NULL);
#endif
    if (n_threads > 1) {
        pool->threads = eddy_calloc((size_t)(n_threads - 1), sizeof *pool->threads);
        if (!pool->threads) {
            pool_destroy(pool);
            return eddy_error_set(err, EDDY_ERR_NOMEM, "cannot allocate thread pool");
        }
    }
    for (int i = 0; i < n_threads - 1; i++) {
        if (pthread_create(&pool->threads[i], NULL, worker_main, pool) != 0) {
            pool_destroy(pool); /* joins the ones that started */
            return eddy_error_set(err, EDDY_ERR_NOMEM, "cannot start worker thread %d", i + 1);
        }
        pool->n_started = i + 1;
    }
    *out = pool;
    return EDDY_OK;
}

eddy_status pool_create(threadpool **out, int n_threads, eddy_error *err) {
    const int n_cpus = cpu_usable_count();
    eddy_status s = create(out, n_threads, n_cpus, err);
    static _Atomic bool warned;
    if (s == EDDY_OK && n_threads > n_cpus && !atomic_exchange(&warned, true))
        LOG_WARN("%d threads asked for, but this process may use %d CPU%s (affinity mask, cgroup quota): "
                 "at most %d run at once, the others stay idle; use -t %d or fewer",
                 n_threads, n_cpus, n_cpus == 1 ? "" : "s", n_cpus, n_cpus);
    return s;
}

eddy_status pool_create_cpus(threadpool **out, int n_threads, int n_cpus, eddy_error *err) {
    return create(out, n_threads, n_cpus, err);
}

void pool_destroy(threadpool *pool) {
    if (!pool) return;
    atomic_store(&pool->stop, true);
    const uint32_t g = job_gen(atomic_load(&pool->job)) + 1;
    atomic_store(&pool->job, job_make(g, 0, 0));
    atomic_store(&pool->gen, g);
    wake(pool, &pool->gen, pool->n_threads);
    for (int i = 0; i < pool->n_started; i++) pthread_join(pool->threads[i], NULL);
#if !POOL_FUTEX
    pthread_mutex_destroy(&pool->mutex);
    pthread_cond_destroy(&pool->cond);
#endif
    eddy_free(pool->threads);
    eddy_free_aligned(pool->scratch);
    eddy_free_aligned(pool);
}

int pool_size(const threadpool *pool) { return pool ? pool->n_threads : 1; }

/* Wakes the sleepers this job has room for: up to min(nth, cpus) threads busy,
 * the caller and the awake workers counted. */
static void wake_helpers(threadpool *pool, int nth, int cpus) {
    const int sleeping = atomic_load(&pool->n_sleeping);
    if (sleeping == 0) return;
    const int room = (nth < cpus ? nth : cpus) - 1;
    const int awake = pool->n_threads - 1 - sleeping;
    int n = room - awake;
    if (n > sleeping) n = sleeping;
    if (n > 0) wake(pool, &pool->gen, n);
}

void pool_run(threadpool *pool, pool_task fn, void *ctx, int nth) {
    if (!pool || pool->n_threads == 1 || nth == 1) {
        fn(ctx, 0, 1);
        return;
    }
    if (nth <= 0 || nth > pool->n_threads) nth = pool->n_threads;
    bool was_running = atomic_exchange(&pool->running, true);
    EDDY_ASSERT(!was_running && "pool_run called from inside a task");
    /* no part of the last generation is claimed or running: nobody reads these now */
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store_explicit(&pool->done, 0, memory_order_relaxed);
    const uint32_t g = job_gen(atomic_load_explicit(&pool->job, memory_order_relaxed)) + 1;
    /* part 0 is the caller's; the release publishes fn, ctx and done */
    atomic_store_explicit(&pool->job, job_make(g, (uint32_t)nth, 1), memory_order_release);
    atomic_store(&pool->gen, g); /* seq_cst, then the load of n_sleeping */
    const uint64_t t_start = timer_ns();
    /* While another process takes CPUs from us, a part given to a helper that shares
     * its CPU is late at every join: keep one CPU fewer busy, so that the scheduler
     * can give each of our busy threads a CPU of its own. */
    const bool busy_elsewhere =
        pool->n_cpus > 1 && t_start < atomic_load_explicit(&pool->shed_until, memory_order_relaxed);
    wake_helpers(pool, nth, busy_elsewhere ? pool->n_cpus - 1 : pool->n_cpus);
    fn(ctx, 0, nth);
    finish_part(pool, (uint32_t)nth);
    run_parts(pool, atomic_load_explicit(&pool->job, memory_order_acquire), g);

    /* only the parts others claimed are left */
    if (atomic_load_explicit(&pool->done, memory_order_acquire) != (uint32_t)nth) {
        const uint64_t t0 = timer_ns();
        for (uint32_t i = 1; atomic_load_explicit(&pool->done, memory_order_acquire) != (uint32_t)nth; i++) {
            cpu_relax();
            if (i % 64 == 0 && timer_ns() - t0 > CALLER_SPIN_NS) {
                atomic_store(&pool->caller_sleeping, 1); /* seq_cst, then the load of done */
                uint32_t d;
                while ((d = atomic_load(&pool->done)) != (uint32_t)nth) sleep_while(pool, &pool->done, d);
                atomic_store_explicit(&pool->caller_sleeping, 0, memory_order_relaxed);
                break;
            }
        }
        /* waiting for a helper longer than the caller's own parts took, by more than a
         * descheduled thread's gap, means a helper lost its CPU while holding a part */
        const uint64_t t1 = timer_ns();
        if (t1 - t0 > PREEMPTED_GAP_NS + (t0 - t_start)) mark_contended(pool, t1);
    }
    atomic_store(&pool->running, false);
}

/* ==== Scratch ==== */

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
