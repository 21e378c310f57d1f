/*
 * test_base.c — the base layer: allocator hooks, errors, thread pool, CPU features, the
 * kernel ISA level, timers.
 */
#define _POSIX_C_SOURCE 200809L
#include "test.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/cpu.h"
#include "base/error.h"
#include "base/isa.h"
#include "base/mapfile.h"
#include "base/threadpool.h"
#include "base/timer.h"
#include "ops/vec.h"
#include "ssm/mamba2.h"

TEST(alloc_fail_injection) {
    int64_t live0 = alloc_live_count();
    alloc_fail_after(2);
    void *a = eddy_malloc(10), *b = eddy_calloc(3, 4), *c = eddy_malloc(10);
    CHECK(a != NULL);
    CHECK(b != NULL);
    CHECK(c == NULL);
    CHECK(eddy_malloc(1) == NULL); /* stays failed until reset */
    alloc_fail_after(-1);
    void *d = eddy_malloc(1);
    CHECK(d != NULL);
    CHECK_EQ(alloc_live_count(), live0 + 3);
    eddy_free(a);
    eddy_free(b);
    eddy_free(d);
    CHECK_EQ(alloc_live_count(), live0);
}

TEST(alloc_overflow_and_alignment) {
    CHECK(eddy_calloc(SIZE_MAX / 2, 4) == NULL);
    size_t out;
    CHECK(!eddy_mul_size(SIZE_MAX / 2 + 1, 2, &out));
    CHECK(eddy_mul_size(1000, 1000, &out) && out == 1000000);
    void *p = eddy_malloc_aligned(100, 64);
    REQUIRE(p != NULL);
    CHECK(((uintptr_t)p & 63) == 0);
    eddy_free_aligned(p);
    CHECK(eddy_malloc_aligned(10, 3) == NULL); /* not a power of two */
}

/* Big buffers: 64-byte aligned when small, on a 2 MiB boundary from 2 MiB up (so the
 * kernel can back them with huge pages), every byte usable, freed like the others. */
TEST(alloc_big_buffers) {
    const int64_t live0 = alloc_live_count();
    const size_t sizes[] = {1, 100, ((size_t)2 << 20) - 1, (size_t)2 << 20, ((size_t)5 << 20) + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = eddy_malloc_big(sizes[i]);
        REQUIRE(p != NULL);
        const uintptr_t align = sizes[i] >= ((size_t)2 << 20) ? ((uintptr_t)2 << 20) : 64;
        CHECK(((uintptr_t)p & (align - 1)) == 0);
        memset(p, 0xa5, sizes[i]);
        CHECK(p[0] == 0xa5 && p[sizes[i] - 1] == 0xa5);
        eddy_free_aligned(p);
    }
    alloc_fail_after(0);
    CHECK(eddy_malloc_big((size_t)4 << 20) == NULL);
    alloc_fail_after(-1);
    CHECK_EQ(alloc_live_count(), live0);
}

TEST(error_set_is_one_line) {
    eddy_error e;
    eddy_status s = eddy_error_set(&e, EDDY_ERR_FORMAT, "bad\nvalue %d\r", 7);
    CHECK_EQ(s, EDDY_ERR_FORMAT);
    CHECK_EQ(e.code, EDDY_ERR_FORMAT);
    CHECK_STR(e.msg, "bad value 7 ");
    CHECK_EQ(eddy_error_set(NULL, EDDY_ERR_IO, "x"), EDDY_ERR_IO);
    eddy_error_clear(&e);
    CHECK_EQ(e.code, EDDY_OK);
    CHECK_STR(eddy_status_name(EDDY_ERR_NOMEM), "out of memory");
}

/* ==== Thread pool ==== */

typedef struct {
    int64_t n;
    int *hits;              /* (n) how many threads touched each row */
    _Atomic int calls;
    _Atomic int max_ith;
} split_job;

static void split_task(void *p, int ith, int nth) {
    split_job *job = p;
    int64_t b, e;
    pool_split(job->n, ith, nth, &b, &e);
    for (int64_t i = b; i < e; i++) job->hits[i]++;
    atomic_fetch_add(&job->calls, 1);
    int m = atomic_load(&job->max_ith);
    while (ith > m && !atomic_compare_exchange_weak(&job->max_ith, &m, ith)) {}
}

TEST(pool_split_covers_rows_exactly_once) {
    for (int nth = 1; nth <= 7; nth++)
        for (int64_t n = 0; n < 40; n++) {
            int64_t prev_end = 0;
            for (int ith = 0; ith < nth; ith++) {
                int64_t b, e;
                pool_split(n, ith, nth, &b, &e);
                CHECK_EQ(b, prev_end);
                CHECK(e - b == n / nth || e - b == n / nth + 1);
                prev_end = e;
            }
            CHECK_EQ(prev_end, n);
        }
}

TEST(pool_runs_every_thread_many_times) {
    for (int n_threads = 1; n_threads <= 4; n_threads++) {
        threadpool *pool;
        eddy_error err;
        REQUIRE(pool_create(&pool, n_threads, &err) == EDDY_OK);
        CHECK_EQ(pool_size(pool), n_threads);
        int hits[1000];
        for (int rep = 0; rep < 300; rep++) {
            int64_t n = 1 + rep * 3;
            memset(hits, 0, sizeof hits);
            split_job job = {.n = n, .hits = hits};
            pool_run(pool, split_task, &job, 0);
            CHECK_EQ(atomic_load(&job.calls), n_threads);
            for (int64_t i = 0; i < n; i++) CHECK_EQ(hits[i], 1);
        }
        /* fewer threads than the pool has */
        memset(hits, 0, sizeof hits);
        split_job job = {.n = 100, .hits = hits};
        pool_run(pool, split_task, &job, 2);
        CHECK_EQ(atomic_load(&job.calls), n_threads < 2 ? n_threads : 2);
        CHECK(atomic_load(&job.max_ith) < 2);
        for (int i = 0; i < 100; i++) CHECK_EQ(hits[i], 1);
        pool_destroy(pool);
    }
}

TEST(pool_wakes_sleeping_workers) {
    threadpool *pool;
    REQUIRE(pool_create(&pool, 3, NULL) == EDDY_OK);
    int hits[10];
    for (int rep = 0; rep < 3; rep++) {
        struct timespec ts = {0, 30 * 1000 * 1000}; /* long enough for workers to go to sleep */
        nanosleep(&ts, NULL);
        memset(hits, 0, sizeof hits);
        split_job job = {.n = 10, .hits = hits};
        pool_run(pool, split_task, &job, 0);
        CHECK_EQ(atomic_load(&job.calls), 3);
    }
    pool_destroy(pool);
}

TEST(pool_scratch_is_aligned_and_private) {
    threadpool *pool;
    REQUIRE(pool_create(&pool, 3, NULL) == EDDY_OK);
    CHECK(pool_reserve_scratch(pool, 100, NULL) == EDDY_OK);
    CHECK(pool_scratch_size(pool) >= 100);
    for (int i = 0; i < 3; i++) {
        uint8_t *s = pool_scratch(pool, i);
        CHECK(((uintptr_t)s & 63) == 0);
        if (i) CHECK(s - (uint8_t *)pool_scratch(pool, i - 1) >= 100);
    }
    CHECK(pool_create(&(threadpool *){NULL}, 0, NULL) == EDDY_ERR_ARG);
    pool_destroy(pool);
}

TEST(pool_create_out_of_memory_leaks_nothing) {
    int64_t live0 = alloc_live_count();
    for (int k = 0; k < 3; k++) {
        alloc_fail_after(k);
        threadpool *pool = NULL;
        eddy_error err;
        eddy_status s = pool_create(&pool, 4, &err);
        alloc_fail_after(-1);
        if (s == EDDY_OK) {
            pool_destroy(pool);
        } else {
            CHECK_EQ(s, EDDY_ERR_NOMEM);
            CHECK(pool == NULL);
        }
        CHECK_EQ(alloc_live_count(), live0);
    }
}

/* ==== CPU, timers, files ==== */

TEST(cpu_features_are_consistent) {
    cpu_caps c = cpu_detect();
    /* AVX-512 needs AVX2-era state on any real CPU */
    if (c.avx512f) CHECK(c.avx2);
#if defined(__x86_64__)
    CHECK(!c.neon);
#endif
    const char *names = eddy_cpu_features();
    CHECK(names != NULL && names[0] != '\0');
    if (cpu_force_ref()) CHECK_STR(names, "none");
}

/* EDDY_CPU_OFF's names turn off a feature and everything that needs it, nothing else. */
TEST(cpu_turn_off_clears_a_feature_and_what_needs_it) {
    cpu_caps all;
    memset(&all, 1, sizeof all);
    cpu_caps c = all;
    CHECK(cpu_turn_off(&c, "amx"));
    CHECK(!c.amx_bf16 && c.avx512f && c.avx512vnni && c.avx512bf16 && c.avx2 && c.neon);
    c = all;
    CHECK(cpu_turn_off(&c, "vnni"));
    CHECK(!c.avx512vnni && !c.avx_vnni && c.avx512f && c.amx_bf16);
    c = all;
    CHECK(cpu_turn_off(&c, "avx512"));
    CHECK(!c.avx512f && !c.avx512bw && !c.avx512vl && !c.avx512dq && !c.avx512vnni && !c.amx_bf16);
    CHECK(c.avx2 && c.fma && c.f16c && c.avx_vnni);
    c = all;
    CHECK(cpu_turn_off(&c, "avx2"));
    CHECK(!c.avx2 && !c.fma && !c.avx512f && !c.amx_bf16 && !c.avx_vnni && c.neon && c.dotprod);
    c = all;
    CHECK(cpu_turn_off(&c, "neon"));
    CHECK(!c.neon && !c.dotprod && !c.fp16 && c.avx2);
    c = all;
    CHECK(cpu_turn_off(&c, " dotprod,amx "));
    CHECK(!c.dotprod && !c.amx_bf16 && c.neon && c.avx512f);
    c = all;
    CHECK(!cpu_turn_off(&c, "amx,sse9"));
    CHECK(!c.amx_bf16 && c.avx512f);
    c = all;
    CHECK(cpu_turn_off(&c, ""));
    CHECK(memcmp(&c, &all, sizeof c) == 0);
}

/* The level follows the features: the best level of this architecture that
 * cpu_features() allows, every lower one available too, none above; ISA_REF alone
 * under EDDY_FORCE_REF. */
TEST(isa_level_follows_cpu_features) {
    const cpu_caps *c = cpu_features();
    isa_level want = ISA_REF;
#if defined(__x86_64__)
    if (cpu_has_avx2(c)) want = ISA_AVX2;
    if (cpu_has_avx2(c) && cpu_has_avx512(c)) want = ISA_AVX512;
    CHECK(!isa_available(ISA_NEON) && !isa_has(ISA_EXT_DOTPROD));
    CHECK_EQ(isa_has(ISA_EXT_AVX512VNNI), want == ISA_AVX512 && c->avx512vnni);
    CHECK_EQ(isa_has(ISA_EXT_AMX_BF16), want == ISA_AVX512 && c->amx_bf16);
    CHECK_EQ(isa_available(ISA_AVX2), want >= ISA_AVX2);
    CHECK_EQ(isa_available(ISA_AVX512), want == ISA_AVX512);
#elif defined(__aarch64__)
    if (c->neon) want = ISA_NEON;
    CHECK(!isa_available(ISA_AVX2) && !isa_available(ISA_AVX512) && !isa_has(ISA_EXT_AVX512VNNI));
    CHECK_EQ(isa_has(ISA_EXT_DOTPROD), want == ISA_NEON && c->dotprod);
#endif
    (void)c;
    CHECK_EQ(isa_active(), want);
    CHECK(isa_available(ISA_REF) && isa_available(isa_active()));
    CHECK(!isa_available(ISA_COUNT) && !isa_has(ISA_EXT_COUNT));
    CHECK_STR(eddy_cpu_isa(), isa_name(isa_active()));
    CHECK_STR(isa_name(ISA_REF), "ref");
    CHECK_STR(isa_name(ISA_COUNT), "?");
    if (cpu_force_ref()) {
        CHECK_EQ(isa_active(), ISA_REF);
        for (int l = ISA_REF + 1; l < ISA_COUNT; l++) CHECK(!isa_available((isa_level)l));
        for (int e = 0; e < ISA_EXT_COUNT; e++) CHECK(!isa_has((isa_ext)e));
    }
}

/* The level is fixed once chosen: changing EDDY_FORCE_REF afterwards changes no
 * dispatcher (Mamba-2's used to read the environment on every call). */
TEST(isa_level_is_fixed_once_chosen) {
    const isa_level l = isa_active();
    const bool forced = cpu_force_ref();
    REQUIRE(setenv("EDDY_FORCE_REF", forced ? "0" : "1", 1) == 0);
    CHECK_EQ(isa_active(), l);
    CHECK_STR(mamba2_variant(), isa_name(l));
    CHECK_STR(vec_variant(), isa_name(l));
    if (forced) setenv("EDDY_FORCE_REF", "1", 1);
    else unsetenv("EDDY_FORCE_REF");
    CHECK_EQ(cpu_force_ref(), forced);
}

typedef struct {
    int level[8];
    atomic_int n;
} isa_job;

static void isa_task(void *p, int ith, int nth) {
    (void)nth;
    isa_job *j = p;
    j->level[ith] = (int)isa_active();
    atomic_fetch_add(&j->n, 1);
}

TEST(isa_level_is_the_same_on_every_thread) {
    threadpool *pool;
    REQUIRE(pool_create(&pool, 8, NULL) == EDDY_OK);
    isa_job job = {{-1, -1, -1, -1, -1, -1, -1, -1}, 0};
    pool_run(pool, isa_task, &job, 8);
    CHECK(atomic_load(&job.n) >= 1);
    for (int i = 0; i < atomic_load(&job.n); i++) CHECK_EQ(job.level[i], isa_active());
    pool_destroy(pool);
}

TEST(timer_is_monotonic) {
    uint64_t a = timer_ns(), b = timer_ns();
    CHECK(b >= a);
    CHECK(timer_s() > 0);
}

TEST(mapfile_maps_and_reads) {
    const char *path = test_tmp_path("mapfile.bin");
    uint8_t data[1000];
    for (int i = 0; i < 1000; i++) data[i] = (uint8_t)(i * 7);
    REQUIRE(test_write_file(path, data, sizeof data));
    for (int allow = 0; allow <= 1; allow++) {
        mapfile m;
        eddy_error err;
        REQUIRE(mapfile_open(&m, path, allow, &err) == EDDY_OK);
        CHECK_EQ(m.size, 1000);
        CHECK_EQ(m.mapped, allow);
        CHECK(memcmp(m.data, data, 1000) == 0);
        mapfile_close(&m);
    }
    mapfile m;
    eddy_error err;
    CHECK_EQ(mapfile_open(&m, test_tmp_path("does-not-exist"), true, &err), EDDY_ERR_IO);
    CHECK_CONTAINS(err.msg, "does-not-exist");
    CHECK_EQ(mapfile_open(&m, "/tmp", true, &err), EDDY_ERR_IO);
    CHECK_CONTAINS(err.msg, "directory");
}
