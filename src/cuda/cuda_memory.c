/*
 * cuda_memory.c — the GPU engine's memory: device allocations, copies on the engine's
 * own stream, and the state pool's memory operations (state_mem), whose copies to and
 * from pageable host memory (session files, the weights at upload) go through a pinned
 * staging buffer.
 *
 * Every copy and memset of an engine runs on its stream, which does not wait for the
 * legacy one (cudaStreamNonBlocking): nothing of an engine touches the legacy stream, so
 * two engines stepping in two threads cannot break each other's graph capture (a legacy
 * stream operation while a blocking stream is captured fails that capture).
 *
 * Staging: a copy from the device into pageable memory is cut in windows of half the
 * staging buffer; window k is copied into half k % 2 while window k - 1 is copied out
 * of the other half by the CPU. The other way round, the CPU fills one half while the
 * other half's window crosses the bus.
 */
#include "cuda/cuda_backend.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

/* a staging half's bytes (EDDY_CUDA_STAGING_KIB sets it: the tests' way to cut a copy
 * in many windows) */
#define STAGING_HALF ((size_t)8 << 20)

void *cuda_dev_alloc(cuda_backend *g, size_t bytes) {
    if (bytes == 0) return NULL;
    if (g->n_allocs == g->cap_allocs) {
        const int64_t cap = g->cap_allocs ? 2 * g->cap_allocs : 256;
        void **a = eddy_realloc(g->allocs, (size_t)cap * sizeof *a);
        if (!a) return NULL;
        g->allocs = a, g->cap_allocs = cap;
    }
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError(); /* clear it: the caller reports the failure */
        return NULL;
    }
    g->allocs[g->n_allocs++] = p;
    return p;
}

cudaError_t cuda_copy(cuda_backend *g, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
    if (bytes == 0) return cudaSuccess;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, g->stream);
    /* the host's side may change or be read as soon as this returns */
    if (e == cudaSuccess && kind != cudaMemcpyDeviceToDevice) e = cudaStreamSynchronize(g->stream);
    return e;
}

cudaError_t cuda_zero(cuda_backend *g, void *p, size_t bytes) {
    return bytes ? cudaMemsetAsync(p, 0, bytes, g->stream) : cudaSuccess;
}

void cuda_staging_new(cuda_backend *g) {
    g->staging_half = (size_t)cuda_env_int("EDDY_CUDA_STAGING_KIB", 1, 1 << 20, STAGING_HALF >> 10) << 10;
    if (cudaMallocHost((void **)&g->staging, 2 * g->staging_half) != cudaSuccess) g->staging = NULL;
    if (g->staging && (cudaEventCreateWithFlags(&g->staged[0], cudaEventDisableTiming) != cudaSuccess ||
                       cudaEventCreateWithFlags(&g->staged[1], cudaEventDisableTiming) != cudaSuccess)) {
        cudaFreeHost(g->staging);
        g->staging = NULL;
    }
    cudaGetLastError(); /* without staging, the copies go straight to pageable memory */
}

void cuda_staging_free(cuda_backend *g) {
    for (int i = 0; i < 2; i++)
        if (g->staged[i]) cudaEventDestroy(g->staged[i]);
    if (g->staging) cudaFreeHost(g->staging);
}

/* Whether p is pinned host memory, which copies reach without staging. */
static bool pinned(const void *p) {
    struct cudaPointerAttributes a;
    if (!p) return false; /* an error to clear, maybe with another one before it */
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return a.type == cudaMemoryTypeHost;
}

/* The bytes of window k, of `half` each, of a copy of `total` */
static size_t window_len(size_t total, size_t half, size_t k) {
    return total - k * half < half ? total - k * half : half;
}

static size_t pieces_bytes(const state_piece *p, int64_t n) {
    size_t b = 0;
    for (int64_t i = 0; i < n; i++) b += p[i].bytes;
    return b;
}

/* Queues the copies of window [w, w + len) of the pieces' concatenation to (to_host) or
 * from host memory, host being where the window's first byte goes or comes from; false
 * when one is refused. */
static bool copy_window(cuda_backend *g, const state_piece *p, int64_t n, size_t w, size_t len, char *host,
                        bool to_host) {
    bool ok = true;
    size_t at = 0; /* where piece i begins in the concatenation */
    for (int64_t i = 0; i < n && at < w + len; at += p[i].bytes, i++) {
        const size_t a = at > w ? at : w, b = at + p[i].bytes < w + len ? at + p[i].bytes : w + len;
        if (a >= b) continue;
        char *dev = (char *)p[i].at + (a - at), *h = host + (a - w);
        ok &= (to_host ? cudaMemcpyAsync(h, dev, b - a, cudaMemcpyDeviceToHost, g->stream)
                       : cudaMemcpyAsync(dev, h, b - a, cudaMemcpyHostToDevice, g->stream)) == cudaSuccess;
    }
    return ok;
}

bool cuda_pieces_to_host(cuda_backend *g, void *dst, const state_piece *src, int64_t n) {
    const size_t total = pieces_bytes(src, n), half = g->staging_half;
    if (!g->staging || pinned(dst))
        return copy_window(g, src, n, 0, total, dst, true) && cudaStreamSynchronize(g->stream) == cudaSuccess;
    bool ok = true;
    const size_t windows = (total + half - 1) / half;
    for (size_t k = 0; k <= windows; k++) {
        if (k < windows) { /* half k % 2 was copied out at step k - 1 */
            ok &= copy_window(g, src, n, k * half, window_len(total, half, k), g->staging + k % 2 * half, true);
            ok &= cudaEventRecord(g->staged[k % 2], g->stream) == cudaSuccess;
        }
        if (k > 0) {
            const size_t j = k - 1;
            ok &= cudaEventSynchronize(g->staged[j % 2]) == cudaSuccess;
            memcpy((char *)dst + j * half, g->staging + j % 2 * half, window_len(total, half, j));
        }
    }
    return ok;
}

bool cuda_pieces_from_host(cuda_backend *g, const state_piece *dst, int64_t n, const void *src) {
    const size_t total = pieces_bytes(dst, n), half = g->staging_half;
    if (!g->staging || pinned(src))
        return copy_window(g, dst, n, 0, total, (char *)src, false) && cudaStreamSynchronize(g->stream) == cudaSuccess;
    bool ok = true;
    for (size_t k = 0; k * half < total; k++) {
        const size_t len = window_len(total, half, k);
        if (k >= 2) ok &= cudaEventSynchronize(g->staged[k % 2]) == cudaSuccess; /* window k - 2 left this half */
        memcpy(g->staging + k % 2 * half, (const char *)src + k * half, len);
        ok &= copy_window(g, dst, n, k * half, len, g->staging + k % 2 * half, false);
        ok &= cudaEventRecord(g->staged[k % 2], g->stream) == cudaSuccess;
    }
    /* the caller may free or reuse what the pieces hold once they are on the device */
    return cudaStreamSynchronize(g->stream) == cudaSuccess && ok;
}

/* ==== The state pool's memory operations ==== */

static void *state_alloc(void *ctx, size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    if (cuda_zero(ctx, p, bytes) != cudaSuccess) {
        cudaGetLastError();
        cudaFree(p);
        return NULL;
    }
    return p;
}
static void state_free(void *ctx, void *p) {
    (void)ctx;
    cudaFree(p);
}
static void state_zero(void *ctx, void *p, size_t bytes) { (void)cuda_zero(ctx, p, bytes); }
static void state_copy(void *ctx, void *dst, const void *src, size_t bytes) {
    cuda_copy(ctx, dst, src, bytes, cudaMemcpyDeviceToDevice);
}
static bool state_to_host(void *ctx, void *dst, const state_piece *src, int64_t n) {
    return cuda_pieces_to_host(ctx, dst, src, n);
}
static bool state_from_host(void *ctx, const state_piece *dst, int64_t n, const void *src) {
    return cuda_pieces_from_host(ctx, dst, n, src);
}
/* host slots (snapshots kept off the GPU): pinned, so copies to and from them run at the
 * bus's speed without staging */
static void *state_alloc_host(void *ctx, size_t bytes) {
    (void)ctx;
    void *p = NULL;
    if (cudaMallocHost(&p, bytes) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}
static void state_free_host(void *ctx, void *p) {
    (void)ctx;
    cudaFreeHost(p);
}

void cuda_state_mem(cuda_backend *g) {
    g->mem = (state_mem){.ctx = g, .alloc = state_alloc, .free = state_free, .zero = state_zero, .copy = state_copy,
                         .to_host = state_to_host, .from_host = state_from_host, .alloc_host = state_alloc_host,
                         .free_host = state_free_host};
}
