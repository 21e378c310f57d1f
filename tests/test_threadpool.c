/*
 * test_threadpool.c — the thread count and the pool under CPU contention: the
 * default follows the affinity mask and the cgroup quota; a pool with more threads
 * than CPUs runs every part exactly once and finishes; a worker that stalls does not
 * hold up runs it took no part in; model logits are bit-identical on any number of
 * threads. No timing assertions: a watchdog (alarm in a forked child) only turns a
 * hang into a failure.
 */
#define _GNU_SOURCE
#include "test.h"

#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

#include "base/cpu.h"
#include "base/threadpool.h"
#include "eddy.h"

/* ==== Quota parsing ==== */

TEST(cpu_max_parses_quota_as_whole_cpus) {
    CHECK_EQ(cpu_parse_cpu_max("max 100000\n"), 0);
    CHECK_EQ(cpu_parse_cpu_max("100000 100000\n"), 1);
    CHECK_EQ(cpu_parse_cpu_max("150000 100000\n"), 2);
    CHECK_EQ(cpu_parse_cpu_max("50000 100000"), 1);
    CHECK_EQ(cpu_parse_cpu_max("400000 100000"), 4);
    CHECK_EQ(cpu_parse_cpu_max(""), 0);
    CHECK_EQ(cpu_parse_cpu_max("12abc 100000"), 0);
    CHECK_EQ(cpu_parse_cpu_max("-1 100000"), 0);
    CHECK_EQ(cpu_parse_cpu_max("100000 0"), 0);
}

static void write_text(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    CHECK(test_write_file(path, text, strlen(text)));
}

static void make_dir(const char *path) { CHECK(mkdir(path, 0755) == 0); }

/* A fake cgroup tree: v2 with a quota on an ancestor (tighter) and on the leaf, v1
 * with the quota at the mount root (a container's view), and none at all. */
TEST(cpu_quota_walks_the_cgroup_and_its_ancestors) {
    char root[256], d[512];
    snprintf(root, sizeof root, "%s", test_tmp_path("cgroup"));
    make_dir(root);
    snprintf(d, sizeof d, "%s/user.slice", root), make_dir(d);
    write_text(d, "cpu.max", "200000 100000\n");
    snprintf(d, sizeof d, "%s/user.slice/job", root), make_dir(d);
    write_text(d, "cpu.max", "350000 100000\n");
    CHECK_EQ(cpu_quota_count(root, "0::/user.slice/job\n"), 2);
    write_text(d, "cpu.max", "max 100000\n");
    CHECK_EQ(cpu_quota_count(root, "0::/user.slice/job\n"), 2);
    write_text(d, "cpu.max", "50000 100000\n");
    CHECK_EQ(cpu_quota_count(root, "0::/user.slice/job\n"), 1);
    CHECK_EQ(cpu_quota_count(root, "0::/elsewhere\n"), 0);

    snprintf(d, sizeof d, "%s/cpu,cpuacct", root), make_dir(d);
    write_text(d, "cpu.cfs_quota_us", "300000\n");
    write_text(d, "cpu.cfs_period_us", "100000\n");
    CHECK_EQ(cpu_quota_count(root, "4:memory:/x\n3:cpu,cpuacct:/docker/abc\n2:cpuset:/\n"), 3);
    write_text(d, "cpu.cfs_quota_us", "-1\n");
    CHECK_EQ(cpu_quota_count(root, "3:cpu,cpuacct:/docker/abc\n"), 0);
    CHECK_EQ(cpu_quota_count(root, "3:cpuacct:/docker/abc\n"), 0); /* not the cpu controller */
    CHECK_EQ(cpu_quota_count(root, ""), 0);
    CHECK_EQ(cpu_quota_count("/nonexistent", "0::/\n"), 0);
}

/* ==== Child processes ==== */

#if defined(__linux__)

/* Runs fn in a forked child with a watchdog of `seconds`; true when it exited 0. */
static bool in_child(int (*fn)(void), unsigned seconds, const char *what) {
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return CHECKF(false, "%s: fork failed", what);
    if (pid == 0) {
        alarm(seconds);
        _exit(fn());
    }
    int status;
    if (!CHECKF(waitpid(pid, &status, 0) == pid, "%s: waitpid", what)) return false;
    if (WIFSIGNALED(status))
        return CHECKF(false, "%s: child killed by signal %d%s", what, WTERMSIG(status),
                      WTERMSIG(status) == SIGALRM ? " (the watchdog: it hung)" : "");
    return CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: child exited %d", what,
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* Pins the calling thread (and the threads it creates) to its first allowed CPU. */
static bool pin_to_one_cpu(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return false;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) {
            CPU_ZERO(&set);
            CPU_SET(c, &set);
            return sched_setaffinity(0, sizeof set, &set) == 0;
        }
    return false;
}

static int child_default_on_one_cpu(void) {
    if (!pin_to_one_cpu()) return 2;
    if (cpu_affinity_count() != 1) return 3;
    if (cpu_usable_count() != 1) return 4;
    if (pool_default_threads() != 1) return 5;
    return 0;
}

TEST(default_threads_follow_the_affinity_mask) {
    cpu_set_t set;
    REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
    CHECK_EQ(cpu_affinity_count(), CPU_COUNT(&set));
    CHECK(cpu_usable_count() >= 1 && cpu_usable_count() <= cpu_affinity_count());
    CHECK_EQ(pool_default_threads(), cpu_usable_count());
    in_child(child_default_on_one_cpu, 60, "default under a one-CPU mask");
}

/* ==== Many threads on one CPU ==== */

typedef struct {
    int n_parts;
    _Atomic int hits[64]; /* (n_parts) runs of each part */
    _Atomic int bad_nth;
} count_job;

static void count_task(void *p, int ith, int nth) {
    count_job *j = p;
    if (nth != j->n_parts || ith < 0 || ith >= nth) {
        atomic_fetch_add(&j->bad_nth, 1);
        return;
    }
    atomic_fetch_add(&j->hits[ith], 1);
}

/* `runs` runs of nth parts on pool; 0 when every part ran exactly once each time. */
static int run_counted(threadpool *pool, int nth, int runs) {
    for (int r = 0; r < runs; r++) {
        count_job j = {.n_parts = nth};
        pool_run(pool, count_task, &j, nth);
        if (atomic_load(&j.bad_nth)) return 10;
        for (int i = 0; i < nth; i++)
            if (atomic_load(&j.hits[i]) != 1) {
                fprintf(stderr, "run %d: part %d of %d ran %d times\n", r, i, nth, atomic_load(&j.hits[i]));
                return 11;
            }
        if (r % 50 == 49) { /* let the workers fall asleep now and then */
            struct timespec ts = {0, 2 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    return 0;
}

static int child_many_threads_on_one_cpu(void) {
    if (!pin_to_one_cpu()) return 2;
    threadpool *pool;
    /* the pool as eddy makes it: 64 threads, one CPU to keep busy */
    if (pool_create(&pool, 64, NULL) != EDDY_OK) return 3;
    int rc = run_counted(pool, 64, 300);
    if (!rc) rc = run_counted(pool, 7, 300);
    pool_destroy(pool);
    if (rc) return rc;
    /* told that 16 CPUs are there: all 16 threads spin and claim on the one CPU */
    if (pool_create_cpus(&pool, 16, 16, NULL) != EDDY_OK) return 4;
    rc = run_counted(pool, 16, 200);
    if (!rc) rc = run_counted(pool, 3, 200);
    pool_destroy(pool);
    return rc;
}

TEST(pool_with_more_threads_than_cpus_runs_each_part_once) {
    in_child(child_many_threads_on_one_cpu, 120, "64 and 16 threads on one CPU");
    /* and in this process, on whatever CPUs it has */
    threadpool *pool;
    REQUIRE(pool_create_cpus(&pool, 9, 9, NULL) == EDDY_OK);
    CHECK_EQ(run_counted(pool, 9, 300), 0);
    CHECK_EQ(run_counted(pool, 5, 300), 0);
    pool_destroy(pool);
}

/* ==== A stalled worker ==== */

static _Atomic int stall_state; /* 1: the worker sits in the handler; 2: released */

static void stall_handler(int sig) {
    (void)sig;
    atomic_store(&stall_state, 1);
    while (atomic_load(&stall_state) != 2) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

typedef struct {
    _Atomic int started1;
    _Atomic long tid1;  /* the thread that ran part 1 */
    _Atomic int waited; /* part 0 saw part 1 start */
} meet_job;

static long this_tid(void) { return (long)syscall(SYS_gettid); }

/* Part 0 (the caller's) waits for part 1 to start elsewhere: a worker must take it. */
static void meet_task(void *p, int ith, int nth) {
    meet_job *j = p;
    (void)nth;
    if (ith == 1) {
        atomic_store(&j->tid1, this_tid());
        atomic_store(&j->started1, 1);
        return;
    }
    for (int i = 0; i < 10000 && !atomic_load(&j->started1); i++) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&j->waited, atomic_load(&j->started1));
}

typedef struct {
    long caller;
    _Atomic int hits[2];
    _Atomic int elsewhere; /* parts run by another thread than the caller */
} where_job;

static void where_task(void *p, int ith, int nth) {
    where_job *j = p;
    (void)nth;
    atomic_fetch_add(&j->hits[ith], 1);
    if (this_tid() != j->caller) atomic_fetch_add(&j->elsewhere, 1);
}

static int child_stalled_worker(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = stall_handler;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0) return 2;
    threadpool *pool;
    if (pool_create_cpus(&pool, 2, 2, NULL) != EDDY_OK) return 3;
    meet_job m = {0};
    pool_run(pool, meet_task, &m, 2);
    if (!atomic_load(&m.waited) || atomic_load(&m.tid1) == this_tid()) return 4;
    /* let the worker settle into its wait, then stop it there */
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    if (syscall(SYS_tgkill, getpid(), atomic_load(&m.tid1), SIGUSR1) != 0) return 5;
    for (int i = 0; i < 10000 && atomic_load(&stall_state) != 1; i++) {
        struct timespec t1 = {0, 1000 * 1000};
        nanosleep(&t1, NULL);
    }
    if (atomic_load(&stall_state) != 1) return 6;
    /* the caller runs both parts itself: nothing waits for the stalled worker */
    int rc = 0;
    for (int r = 0; r < 200 && !rc; r++) {
        where_job w = {.caller = this_tid()};
        pool_run(pool, where_task, &w, 2);
        if (atomic_load(&w.hits[0]) != 1 || atomic_load(&w.hits[1]) != 1) rc = 7;
        if (atomic_load(&w.elsewhere)) rc = 8;
    }
    atomic_store(&stall_state, 2);
    if (!rc) { /* released, the worker takes parts again */
        meet_job m2 = {0};
        pool_run(pool, meet_task, &m2, 2);
        if (!atomic_load(&m2.waited)) rc = 9;
    }
    pool_destroy(pool);
    return rc;
}

TEST(pool_does_not_wait_for_a_stalled_worker) {
    in_child(child_stalled_worker, 60, "runs while a worker is stopped in a signal handler");
}

/* Part 1 runs on a worker and takes 30 ms: the caller waits for it at the join far
 * longer than its own part took (which waits in steps of 1 ms for part 1 to start, a
 * few ms under emulation). */
static void late_helper_task(void *p, int ith, int nth) {
    meet_task(p, ith, nth);
    if (ith == 1) {
        struct timespec ts = {0, 30 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Each part spins for 300 us: long enough for a woken worker to take part 1. */
static void spin_task(void *p, int ith, int nth) {
    where_task(p, ith, nth);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t1);
    while ((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) < 300 * 1000);
}

static int child_sheds_a_cpu(void) {
    threadpool *pool;
    if (pool_create_cpus(&pool, 2, 2, NULL) != EDDY_OK) return 3;
    /* the caller held up twice by a late helper: another process takes a CPU */
    for (int r = 0; r < 2; r++) {
        meet_job m = {0};
        pool_run(pool, late_helper_task, &m, 2);
        if (!atomic_load(&m.waited) || atomic_load(&m.tid1) == this_tid()) return 4;
    }
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct timespec settle = {0, 20 * 1000 * 1000}; /* the worker goes to sleep */
    nanosleep(&settle, NULL);
    /* for the next 100 ms the caller runs every part: no worker is woken (ops that
     * would start after 80 ms, on a machine slowed that much, are not checked) */
    for (int r = 0; r < 20; r++) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > 80 * 1000 * 1000) break;
        where_job w = {.caller = this_tid()};
        pool_run(pool, spin_task, &w, 2);
        if (atomic_load(&w.hits[0]) != 1 || atomic_load(&w.hits[1]) != 1) return 5;
        if (atomic_load(&w.elsewhere)) return 6;
    }
    /* afterwards the worker takes parts again */
    struct timespec hold = {0, 150 * 1000 * 1000};
    nanosleep(&hold, NULL);
    meet_job m = {0};
    pool_run(pool, meet_task, &m, 2);
    if (!atomic_load(&m.waited) || atomic_load(&m.tid1) == this_tid()) return 7;
    pool_destroy(pool);
    return 0;
}

/* A helper that keeps arriving late at the joins (its CPU is shared with another
 * process) is left asleep for a while: the caller runs the ops alone on its CPU. */
TEST(pool_keeps_one_cpu_fewer_busy_while_another_process_takes_one) {
    /* Under emulation (make test's qemu-user pass) a spinning worker sees gaps of its
     * own and the pool sheds before the setup's second late join: the test needs real
     * scheduling, which the native, reference and sanitizer passes have. */
    if (getenv("EDDY_TEST_EMULATED")) return;
    in_child(child_sheds_a_cpu, 60, "leaves a late helper asleep for a while");
}

#endif /* __linux__ */

/* ==== Bit-identical on any thread count ==== */

/* 40 prompt tokens then 6 single-token steps on n_threads: every logit row. */
static float *logits_on(const eddy_model *m, int n_threads, int64_t n_vocab) {
    enum { PROMPT = 40, STEPS = 6 };
    int32_t ids[PROMPT + STEPS];
    for (int i = 0; i < PROMPT + STEPS; i++) ids[i] = (int32_t)((i * 37 + 11) % n_vocab);
    eddy_ctx_params p = {.n_ctx = 128, .n_threads = n_threads};
    eddy_ctx *c;
    eddy_error err;
    if (!CHECKF(eddy_ctx_new(m, &p, &c, &err) == EDDY_OK, "%s", err.msg)) return NULL;
    float *out = malloc(sizeof(float) * (size_t)((PROMPT + STEPS) * n_vocab));
    bool ok = out && eddy_ctx_eval(c, ids, PROMPT, out, 1, &err) == EDDY_OK;
    for (int t = PROMPT; ok && t < PROMPT + STEPS; t++)
        ok = eddy_ctx_eval(c, ids + t, 1, out + t * n_vocab, 0, &err) == EDDY_OK;
    CHECKF(ok, "eval on %d threads: %s", n_threads, err.msg);
    eddy_ctx_free(c);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

TEST(model_logits_are_bit_identical_on_any_thread_count) {
    static const char *const files[] = {
        "models/llama-tiny-q8_0.gguf",         "models/llama-tiny-f32.gguf",
        "models/qwen35-tiny-q8_0.gguf",        "models/qwen35-tiny-f32.gguf",
        "models/qwen3next-tiny-q4_k_m.gguf",   "models/qwen3next-tiny-f32.gguf",
        "models/qwen35moe-tiny-q4_k_m.gguf",   "models/mamba2-tiny-q8_0.gguf",
        "models/mamba2-tiny-f32.gguf",         "models/granitehybrid-tiny-q8_0.gguf",
        "models/granitehybrid-dense-tiny-f32.gguf", "models/nemotron_h-tiny-q8_0.gguf",
    };
    static const int threads[] = {2, 3, 5, 8};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        eddy_model *m;
        eddy_error err;
        if (!CHECKF(eddy_model_load(test_data_path(files[f]), &m, &err) == EDDY_OK, "%s", err.msg)) continue;
        const int64_t n_vocab = eddy_model_n_vocab(m);
        float *ref = logits_on(m, 1, n_vocab);
        for (size_t t = 0; ref && t < sizeof threads / sizeof threads[0]; t++) {
            float *got = logits_on(m, threads[t], n_vocab);
            if (!got) break;
            const size_t n = (size_t)(46 * n_vocab);
            size_t first = n;
            for (size_t i = 0; i < n && first == n; i++)
                if (memcmp(&got[i], &ref[i], sizeof(float))) first = i;
            CHECKF(first == n, "%s on %d threads: row %zu col %zu is %.9g, on 1 thread %.9g", files[f], threads[t],
                   first / (size_t)n_vocab, first % (size_t)n_vocab, first < n ? got[first] : 0.0,
                   first < n ? ref[first] : 0.0);
            free(got);
        }
        free(ref);
        eddy_model_free(m);
    }
}
