/*
 * alloc.h — the one allocation wrapper every part of eddy goes through.
 *
 * Owns: malloc/calloc/realloc/free indirection, aligned allocation, overflow-checked
 * array sizes, and the hooks tests use to inject out-of-memory. Does not own: mmap of
 * files (mapfile.h) or long-lived arenas.
 */
#ifndef EDDY_BASE_ALLOC_H
#define EDDY_BASE_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void *eddy_malloc(size_t n);
void *eddy_calloc(size_t count, size_t size);
void *eddy_realloc(void *p, size_t n);
void eddy_free(void *p);

/* Memory aligned to `align` (a power of two, >= sizeof(void *)). Free with eddy_free_aligned. */
void *eddy_malloc_aligned(size_t n, size_t align);
void eddy_free_aligned(void *p);

/* A large buffer streamed on every step (packed weights, state slabs): 64-byte
 * aligned, and from 2 MiB up starting on a 2 MiB boundary, its whole 2 MiB pages
 * marked for huge pages (madvise MADV_HUGEPAGE, where Linux has it), which spares the
 * page walks of reading hundreds of MB per token through 4 KiB pages; the tail past
 * the last whole one keeps small pages. Free with eddy_free_aligned. */
void *eddy_malloc_big(size_t n);

/* A large buffer touched in small pieces, some of them never: 4 KiB aligned and kept
 * in 4 KiB pages (madvise MADV_NOHUGEPAGE, where Linux has it), since the first touch
 * of a byte in a huge page makes the system zero all 2 MiB of it. Free with
 * eddy_free_aligned. */
void *eddy_malloc_small_pages(size_t n);

/* count * size, or false when it would overflow size_t. */
static inline bool eddy_mul_size(size_t count, size_t size, size_t *out) {
    if (size != 0 && count > SIZE_MAX / size) return false;
    *out = count * size;
    return true;
}

/* ==== Test hooks ==== */

/* After `n` more successful allocations, every allocation fails until the hook is
 * reset with n < 0. Used by tests to walk every out-of-memory path. */
void alloc_fail_after(int64_t n);
/* Number of allocations not yet freed (eddy_malloc/calloc/realloc/aligned). */
int64_t alloc_live_count(void);
/* Every single request above n bytes fails from now on (0: no limit), and is counted
 * by alloc_limit_refusals. */
void alloc_set_request_limit(size_t n);
int64_t alloc_limit_refusals(void);

#endif
