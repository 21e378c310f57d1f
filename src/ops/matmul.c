/*
 * matmul.c — the matrix product y = x · W^T (matmul.h).
 *
 * Two passes, each one pool_run:
 *   1. quantize: token rows of x -> activation rows in scratch (quant_dot_type),
 *      split over threads by token (inline when the rows are few and short);
 *   2. dot: output rows split over threads in contiguous ranges. Decode (n_tok = 1)
 *      streams each thread's weight rows once. Prefill walks its rows in chunks that
 *      fit in L2 and, within a chunk, every group of QDOT_MAX_ACT tokens against
 *      every row: the kernel unpacks a weight block once per token group, and the
 *      chunk comes from memory once for all tokens. Where the variant has 4-row
 *      kernels (qdot_gemm4), rows go four per call, in decode too.
 * Small products run on fewer threads (at least matmul_min_work multiply-adds each), since
 * waking a thread costs microseconds.
 * On CPUs with AMX, prefill products of quantized and BF16 weights run on AMX tiles in
 * bf16 (matmul_amx.h) for their rows in whole blocks of 32; the rows left over, and every
 * decode product, take the path above. The scratch covers both.
 */
#include "matmul.h"

#include <stdint.h>

#include "base/alloc.h"
#include "base/error.h"
#include "quant/qdot.h"
#if defined(__x86_64__)
#include "ops/matmul_amx.h"
#endif

#define ACT_ALIGN 64
#define CHUNK_BYTES ((size_t)256 << 10)   /* weight bytes per prefill chunk (L2-resident) */
#define PREFETCH_BYTES ((size_t)16 << 10) /* decode: software prefetch distance in the weights */

/* ==== Sizes ==== */

bool matmul_weight_init(matmul_weight *w, uint32_t type, int64_t n_in, int64_t n_out, const void *data) {
    const qtype_traits *t = qtype_info(type);
    size_t rb;
    if (!t || !t->supported || n_in < 0 || n_out < 0 || !qtype_row_bytes(type, n_in, &rb)) return false;
    if ((uintptr_t)data % quant_row_align((qtype)type) != 0) return false;
    *w = (matmul_weight){(qtype)type, n_in, n_out, rb, data};
    return true;
}

/* Bytes between activation rows in scratch, or 0 on overflow. */
static size_t act_stride(const matmul_weight *w) {
    size_t rb;
    if (!qtype_row_bytes(quant_dot_type(w->type), w->n_in, &rb) || rb > SIZE_MAX - ACT_ALIGN) return 0;
    return (rb + ACT_ALIGN - 1) / ACT_ALIGN * ACT_ALIGN;
}

/* Bytes of the quantized activation rows (the 8-bit kernels' scratch), SIZE_MAX on overflow. */
static size_t act_scratch_bytes(const matmul_weight *w, int64_t n_tok) {
    EDDY_ASSERT(n_tok >= 0);
    size_t stride = act_stride(w), total;
    if (!stride || !eddy_mul_size(stride, (size_t)n_tok, &total) || total > SIZE_MAX - ACT_ALIGN) return SIZE_MAX;
    return total + ACT_ALIGN; /* room to align the start */
}

size_t matmul_scratch_bytes(const matmul_weight *w, int64_t n_tok) {
    size_t bytes = act_scratch_bytes(w, n_tok);
#if defined(__x86_64__)
    /* the AMX path's bf16 rows follow the activation rows (sized for any n_tok, so the
     * scratch does not depend on which path a call takes) */
    if (bytes != SIZE_MAX && n_tok >= MATMUL_AMX_MIN_TOKENS) {
        const size_t amx = matmul_amx_scratch_bytes(w, n_tok);
        bytes = amx == SIZE_MAX || amx > SIZE_MAX - bytes ? SIZE_MAX : bytes + amx;
    }
#endif
    return bytes;
}

static uint8_t *align_scratch(void *scratch, size_t bytes, size_t need) {
    EDDY_ASSERT(need != SIZE_MAX && bytes >= need);
    uintptr_t p = ((uintptr_t)scratch + ACT_ALIGN - 1) / ACT_ALIGN * ACT_ALIGN;
    return (uint8_t *)p;
}

static void check_args(const matmul_weight *w, int64_t x_stride, int64_t n_tok, int64_t y_stride) {
    EDDY_ASSERT(quant_weight_supported(w->type) && w->n_in >= 0 && w->n_out >= 0 && n_tok >= 0);
    EDDY_ASSERT(x_stride >= w->n_in && y_stride >= w->n_out);
    EDDY_ASSERT((uintptr_t)w->data % quant_row_align(w->type) == 0 && w->row_bytes % quant_row_align(w->type) == 0);
}

/* ==== Reference ==== */

void matmul_ref(const matmul_weight *w, const float *x, int64_t x_stride, int64_t n_tok, float *y, int64_t y_stride,
                void *scratch, size_t scratch_bytes) {
    check_args(w, x_stride, n_tok, y_stride);
    uint8_t *act = align_scratch(scratch, scratch_bytes, act_scratch_bytes(w, n_tok));
    const size_t as = act_stride(w);
    const qtype at = quant_dot_type(w->type);
    for (int64_t t = 0; t < n_tok; t++) quantize_row_ref(at, x + t * x_stride, act + t * as, w->n_in);
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t r = 0; r < w->n_out; r++)
            y[t * y_stride + r] = vec_dot_ref(w->type, w->n_in, (const char *)w->data + r * w->row_bytes, act + t * as);
}

/* ==== Threaded product ==== */

typedef struct {
    const matmul_weight *w;
    qdot_fn kernel;
    qgemm4_fn gemm4; /* 4-row kernels where the variant has them, else NULL */
    qtype act_type;
    const float *x;
    int64_t x_stride, n_tok;
    float *y;
    int64_t y_stride;
    uint8_t *act; /* (n_tok) activation rows at act_stride */
    size_t act_stride;
    int64_t first_row; /* rows [first_row, n_out) are this job's */
} mm_job;

static void quantize_task(void *p, int ith, int nth) {
    mm_job *j = p;
    int64_t t0, t1;
    pool_split(j->n_tok, ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++)
        quantize_row_act(j->act_type, j->x + t * j->x_stride, j->act + t * j->act_stride, j->w->n_in);
}

/* Weight rows [r0, r1) against nc activation rows at a; y[c][r] at yt + c * y_stride.
 * Four rows per call where the variant has 4-row kernels. With `prefetch` (decode),
 * each step first prefetches the weight bytes PREFETCH_BYTES ahead of it: a quantized
 * kernel spends enough instructions per byte that the out-of-order window alone keeps
 * too few cache misses in flight to reach the memory bandwidth. */
static void run_rows(const mm_job *j, int64_t r0, int64_t r1, const uint8_t *a, int nc, float *yt, bool prefetch) {
    const matmul_weight *w = j->w;
    const char *wd = w->data;
    const size_t rb = w->row_bytes, end = (size_t)r1 * rb;
    for (int64_t r = r0; r < r1;) {
        const int step = j->gemm4 && r + 4 <= r1 ? 4 : 1;
        if (prefetch) {
            const size_t at = (size_t)r * rb + PREFETCH_BYTES;
            for (size_t o = at; o < at + (size_t)step * rb && o < end; o += 64) __builtin_prefetch(wd + o, 0, 3);
        }
        float out[4 * QDOT_MAX_ACT];
        if (step == 4) {
            j->gemm4(w->n_in, wd + r * rb, rb, a, j->act_stride, nc, out);
            for (int k = 0; k < 4; k++)
                for (int c = 0; c < nc; c++) yt[c * j->y_stride + r + k] = out[4 * k + c];
        } else {
            j->kernel(w->n_in, wd + r * rb, a, j->act_stride, nc, out);
            for (int c = 0; c < nc; c++) yt[c * j->y_stride + r] = out[c];
        }
        r += step;
    }
}

static void dot_task(void *p, int ith, int nth) {
    const mm_job *j = p;
    const matmul_weight *w = j->w;
    /* whole groups of 4 rows per thread: which rows take the 4-row kernel (its sums
     * may round differently from the 1-row kernel's) must not depend on nth */
    const int64_t n = w->n_out - j->first_row;
    int64_t r0, r1;
    pool_split((n + 3) / 4, ith, nth, &r0, &r1);
    r0 = j->first_row + 4 * r0, r1 = j->first_row + (4 * r1 < n ? 4 * r1 : n);
    if (j->n_tok == 1) {
        run_rows(j, r0, r1, j->act, 1, j->y, true); /* decode: one pass over this thread's rows */
        return;
    }
    int64_t chunk = w->row_bytes ? (int64_t)(CHUNK_BYTES / w->row_bytes) : r1 - r0;
    if (chunk < 4) chunk = 4;
    for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
        const int64_t c1 = c0 + chunk < r1 ? c0 + chunk : r1;
        for (int64_t t = 0; t < j->n_tok; t += QDOT_MAX_ACT) {
            const int nc = j->n_tok - t < QDOT_MAX_ACT ? (int)(j->n_tok - t) : QDOT_MAX_ACT;
            run_rows(j, c0, c1, j->act + t * j->act_stride, nc, j->y + t * j->y_stride, false);
        }
    }
}

int64_t matmul_min_work = (int64_t)1 << 17;

/* Threads worth using for `work` multiply-adds. */
static int threads_for(threadpool *pool, int64_t work, int64_t max_parts) {
    int64_t n = work / (matmul_min_work > 0 ? matmul_min_work : 1);
    if (n > pool_size(pool)) n = pool_size(pool);
    if (n > max_parts) n = max_parts;
    return n < 1 ? 1 : (int)n;
}

void matmul(threadpool *pool, const matmul_weight *w, const float *x, int64_t x_stride, int64_t n_tok, float *y,
            int64_t y_stride, void *scratch, size_t scratch_bytes) {
    check_args(w, x_stride, n_tok, y_stride);
    if (n_tok == 0 || w->n_out == 0) return;
    int64_t first_row = 0; /* rows before it are done */
#if defined(__x86_64__)
    if (matmul_amx_usable(w, n_tok)) {
        const size_t act_bytes = act_scratch_bytes(w, n_tok);
        first_row = w->n_out / MATMUL_AMX_ROWS * MATMUL_AMX_ROWS;
        matmul_amx(pool, w, first_row, x, x_stride, n_tok, y, y_stride, (uint8_t *)scratch + act_bytes,
                   scratch_bytes - act_bytes);
        if (first_row == w->n_out) return;
    }
#endif
    mm_job job = {
        .w = w,
        .kernel = qdot_kernel(w->type),
        .gemm4 = qdot_gemm4(w->type),
        .act_type = quant_dot_type(w->type),
        .x = x,
        .x_stride = x_stride,
        .n_tok = n_tok,
        .y = y,
        .y_stride = y_stride,
        .act = align_scratch(scratch, scratch_bytes, act_scratch_bytes(w, n_tok)),
        .first_row = first_row,
        .act_stride = act_stride(w),
    };
    /* quantizing costs ~ a few multiply-adds' worth per element */
    pool_run(pool, quantize_task, &job, threads_for(pool, n_tok * w->n_in / 8, n_tok));
    const int64_t rows = w->n_out - first_row;
    int64_t work = n_tok * w->n_in * rows; /* < 2^63 for any tensor that fits in memory */
    pool_run(pool, dot_task, &job, threads_for(pool, work, (rows + 3) / 4));
}
