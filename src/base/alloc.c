/*
 * alloc.c — allocation wrapper with an out-of-memory injection hook.
 *
 * Every allocation in libeddy goes through here, so a test can make the N-th one
 * fail and check that the caller reports EDDY_ERR_NOMEM and leaks nothing, or make
 * every request above a size fail (and count them), to show that no input makes eddy
 * ask for an absurd amount of memory.
 */
#define _DEFAULT_SOURCE /* madvise */
#include "alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "env.h"

static _Atomic int64_t fail_countdown = -1; /* < 0: never fail */
static _Atomic int64_t live_count = 0;
static _Atomic uint64_t request_limit = 0; /* 0: none */
static _Atomic int64_t limit_refusals = 0;

void alloc_fail_after(int64_t n) { atomic_store(&fail_countdown, n); }
int64_t alloc_live_count(void) { return atomic_load(&live_count); }
void alloc_set_request_limit(size_t n) { atomic_store(&request_limit, (uint64_t)n); }
int64_t alloc_limit_refusals(void) { return atomic_load(&limit_refusals); }

/* True when the injection hooks say this allocation of n bytes must fail. */
static bool should_fail_n(size_t n) {
    uint64_t lim = atomic_load(&request_limit);
    if (lim && (uint64_t)n > lim) {
        atomic_fetch_add(&limit_refusals, 1);
        return true;
    }
    int64_t c = atomic_load(&fail_countdown);
    while (c >= 0) {
        if (c == 0) return true;
        if (atomic_compare_exchange_weak(&fail_countdown, &c, c - 1)) return false;
    }
    return false;
}

void *eddy_malloc(size_t n) {
    if (should_fail_n(n)) return NULL;
    void *p = malloc(n ? n : 1);
    if (p) atomic_fetch_add(&live_count, 1);
    return p;
}

void *eddy_calloc(size_t count, size_t size) {
    size_t total;
    if (!eddy_mul_size(count, size, &total)) {
        if (atomic_load(&request_limit)) atomic_fetch_add(&limit_refusals, 1); /* as absurd as any */
        return NULL;
    }
    if (should_fail_n(total)) return NULL;
    void *p = calloc(total ? count : 1, total ? size : 1);
    if (p) atomic_fetch_add(&live_count, 1);
    return p;
}

void *eddy_realloc(void *p, size_t n) {
    if (!p) return eddy_malloc(n);
    if (should_fail_n(n)) return NULL;
    return realloc(p, n ? n : 1); /* live count unchanged: one block in, one out */
}

void eddy_free(void *p) {
    if (!p) return;
    atomic_fetch_sub(&live_count, 1);
    free(p);
}

void *eddy_malloc_aligned(size_t n, size_t align) {
    if (align < sizeof(void *) || (align & (align - 1)) != 0) return NULL;
    if (should_fail_n(n)) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align, n ? n : 1) != 0) return NULL;
    atomic_fetch_add(&live_count, 1);
    return p;
}

void eddy_free_aligned(void *p) { eddy_free(p); }

void *eddy_malloc_small_pages(size_t n) {
    void *p = eddy_malloc_aligned(n, 4096);
#ifdef MADV_NOHUGEPAGE
    if (p && n >= ((size_t)2 << 20)) (void)madvise(p, n, MADV_NOHUGEPAGE);
#endif
    return p;
}

void *eddy_malloc_big(size_t n) {
    const size_t huge = (size_t)2 << 20;
    if (n < huge) return eddy_malloc_aligned(n, 64);
    void *p = eddy_malloc_aligned(n, huge);
#ifdef MADV_HUGEPAGE
    /* only the whole huge pages inside the buffer: the tail stays in small pages, so
     * no more is resident than was asked for */
    if (p && !env_flag("EDDY_NO_HUGEPAGES")) (void)madvise(p, n / huge * huge, MADV_HUGEPAGE);
#endif
    return p;
}
