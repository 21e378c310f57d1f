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
 * Packed weights (matmul_pack, quant/qpack.h) take a third path for every n_tok: token
 * rows are quantized and gathered into tiles of QPACK_TOK, and each thread runs groups of
 * 16 rows against tiles, a chunk of groups (L2-sized) at a time.
 * On CPUs with AMX, prefill products of quantized and BF16 weights run on AMX tiles in
 * bf16 (matmul_amx.h) for their rows in whole blocks of 32, reading packed weights back
 * as rows (qpack_unpack_row); the rows left over, and every decode product, take the
 * paths above. The scratch covers all of them.
 */
#include "matmul.h"

#include <stdint.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/isa.h"
#include "quant/qdot.h"
#include "quant/qpack.h"
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
    *w = (matmul_weight){(qtype)type, n_in, n_out, rb, data, NULL};
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

/* Bytes of the packed path's activation tiles (0 for a type without a packed format;
 * sized by type, not by whether w is packed, so that the scratch never depends on it). */
static size_t tile_scratch_bytes(const matmul_weight *w, int64_t n_tok) {
    const qpack_format f = qpack_format_of(w->type);
    if (f == QPACK_NONE || w->n_in % qpack_unit(f) != 0) return 0;
    size_t tile, total;
    if (!eddy_mul_size((size_t)(w->n_in / qpack_unit(f)), qpack_act_unit_bytes(f), &tile) ||
        !eddy_mul_size((size_t)((n_tok + QPACK_TOK - 1) / QPACK_TOK), tile, &total) || total > SIZE_MAX - ACT_ALIGN)
        return SIZE_MAX;
    return total + ACT_ALIGN;
}

/* Bytes of one activation tile. */
static size_t tile_bytes(const matmul_weight *w) {
    const qpack_format f = qpack_format_of(w->type);
    return (size_t)(w->n_in / qpack_unit(f)) * qpack_act_unit_bytes(f);
}

size_t matmul_scratch_bytes(const matmul_weight *w, int64_t n_tok) {
    size_t bytes = act_scratch_bytes(w, n_tok);
    const size_t tiles = tile_scratch_bytes(w, n_tok);
    bytes = bytes == SIZE_MAX || tiles == SIZE_MAX || tiles > SIZE_MAX - bytes ? SIZE_MAX : bytes + tiles;
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

/* ==== Packing ==== */

size_t matmul_pack_bytes(const matmul_weight *w) {
    const qpack_format f = qpack_format_of(w->type);
    if (f == QPACK_NONE || !qpack_kernel(f) || w->n_in % qpack_unit(f) != 0 || w->n_out == 0) return 0;
    const size_t b = qpack_weight_bytes(f, w->n_in, w->n_out);
    return b == SIZE_MAX ? 0 : b;
}

void matmul_pack(matmul_weight *w, void *dst) {
    EDDY_ASSERT(matmul_pack_bytes(w) > 0 && (uintptr_t)dst % 64 == 0);
    qpack_weights(qpack_format_of(w->type), w->data, w->row_bytes, w->n_in, w->n_out, dst);
    w->packed = dst;
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

/* ==== Packed weights ==== */

/* One weight of a packed job: its groups are [g_first, g_first + its group count) of
 * the job's group index. */
typedef struct {
    const matmul_weight *w;
    float *y;
    int64_t y_stride;
    int64_t g_first;
} pk_out;

typedef struct {
    pk_out out[MATMUL_MANY_MAX + 1]; /* out[n_w].g_first = n_groups */
    int n_w;
    qpack_format f;
    qpack_kernel_fn kernel;
    qtype act_type;
    int64_t n_in, n_units;
    size_t group_bytes;
    const float *x;
    int64_t x_stride, n_tok;
    uint8_t *act; /* (n_tok) activation rows, act_stride apart */
    size_t act_stride;
    uint8_t *tiles; /* (n_tiles) tiles, tile_bytes apart */
    size_t tile_bytes;
    int64_t n_tiles, n_groups;
    int split_tiles; /* threads split the tiles (few groups), not the groups */
} pk_job;

/* Tiles [b, e) of this part: quantize their token rows (into act rows of the same
 * tokens) and gather them into tiles. */
static void pk_quantize_task(void *p, int ith, int nth) {
    pk_job *j = p;
    int64_t b, e;
    pool_split(j->n_tiles, ith, nth, &b, &e);
    for (int64_t i = b; i < e; i++) {
        const int64_t t0 = i * QPACK_TOK;
        const int nt = j->n_tok - t0 < QPACK_TOK ? (int)(j->n_tok - t0) : QPACK_TOK;
        uint8_t *rows = j->act + t0 * j->act_stride;
        for (int t = 0; t < nt; t++)
            quantize_row_act(j->act_type, j->x + (t0 + t) * j->x_stride, rows + t * j->act_stride, j->n_in);
        qpack_act_tile(j->f, rows, j->act_stride, nt, j->n_in, j->tiles + i * j->tile_bytes);
    }
}

static void pk_dot_task(void *p, int ith, int nth) {
    const pk_job *j = p;
    int64_t g0 = 0, g1 = j->n_groups, i0 = 0, i1 = j->n_tiles;
    if (j->split_tiles) pool_split(j->n_tiles, ith, nth, &i0, &i1);
    else pool_split(j->n_groups, ith, nth, &g0, &g1);
    /* a chunk of groups stays in L2 while every tile runs through it */
    int64_t chunk = j->group_bytes ? (int64_t)(CHUNK_BYTES / j->group_bytes) : 1;
    if (chunk < 1) chunk = 1;
    for (int64_t c0 = g0; c0 < g1; c0 += chunk) {
        const int64_t c1 = c0 + chunk < g1 ? c0 + chunk : g1;
        for (int64_t i = i0; i < i1; i++) {
            const int64_t t0 = i * QPACK_TOK;
            const int nt = j->n_tok - t0 < QPACK_TOK ? (int)(j->n_tok - t0) : QPACK_TOK;
            int k = 0;
            for (int64_t g = c0; g < c1; g++) {
                while (g >= j->out[k + 1].g_first) k++;
                const pk_out *o = &j->out[k];
                const int64_t r0 = (g - o->g_first) * QPACK_ROWS;
                const int nrows = o->w->n_out - r0 < QPACK_ROWS ? (int)(o->w->n_out - r0) : QPACK_ROWS;
                const uint8_t *gd = (const uint8_t *)o->w->packed + (size_t)(g - o->g_first) * j->group_bytes;
                j->kernel(j->n_units, gd, j->tiles + i * j->tile_bytes, nt, o->y + t0 * o->y_stride + r0, o->y_stride,
                          nrows);
            }
        }
    }
}

int64_t matmul_min_work = (int64_t)1 << 17;

/* Threads worth using for `work` multiply-adds. */
static int threads_for(threadpool *pool, int64_t work, int64_t max_parts) {
    const int n = pool_parts_for(pool, work, matmul_min_work);
    return n <= max_parts ? n : max_parts < 1 ? 1 : (int)max_parts;
}

/* The n_w packed weights (same format and n_in) against x in one quantize pass and one
 * dot pass. */
static void matmul_packed(threadpool *pool, const matmul_weight *const *w, int n_w, const float *x, int64_t x_stride,
                          int64_t n_tok, float *const *y, const int64_t *y_stride, void *scratch,
                          size_t scratch_bytes) {
    const matmul_weight *w0 = w[0];
    const size_t act_bytes = act_scratch_bytes(w0, n_tok), tsb = tile_scratch_bytes(w0, n_tok);
    EDDY_ASSERT(act_bytes != SIZE_MAX && tsb != SIZE_MAX && scratch_bytes >= act_bytes + tsb);
    uint8_t *tiles = (uint8_t *)scratch + scratch_bytes - tsb;
    tiles = (uint8_t *)(((uintptr_t)tiles + ACT_ALIGN - 1) / ACT_ALIGN * ACT_ALIGN);
    const qpack_format f = qpack_format_of(w0->type);
    pk_job job = {
        .n_w = n_w,
        .f = f,
        .kernel = qpack_kernel(f),
        .act_type = quant_dot_type(w0->type),
        .n_in = w0->n_in,
        .n_units = w0->n_in / qpack_unit(f),
        .group_bytes = (size_t)(w0->n_in / qpack_unit(f)) * qpack_unit_bytes(f),
        .x = x,
        .x_stride = x_stride,
        .n_tok = n_tok,
        .act = align_scratch(scratch, scratch_bytes, act_bytes),
        .act_stride = act_stride(w0),
        .tiles = tiles,
        .tile_bytes = tile_bytes(w0),
        .n_tiles = (n_tok + QPACK_TOK - 1) / QPACK_TOK,
    };
    EDDY_ASSERT(job.kernel && n_w >= 1 && n_w <= MATMUL_MANY_MAX);
    int64_t rows = 0;
    for (int i = 0; i < n_w; i++) {
        job.out[i] = (pk_out){w[i], y[i], y_stride[i], job.n_groups};
        job.n_groups += (w[i]->n_out + QPACK_ROWS - 1) / QPACK_ROWS;
        rows += w[i]->n_out;
    }
    job.out[n_w].g_first = job.n_groups;
    pool_run(pool, pk_quantize_task, &job, threads_for(pool, n_tok * w0->n_in / 8, job.n_tiles));
    const int64_t work = n_tok * w0->n_in * rows;
    const int nth = threads_for(pool, work, job.n_groups > job.n_tiles ? job.n_groups : job.n_tiles);
    /* groups split best (each thread reads only its weights); tiles when there are
     * too few groups to keep every thread busy */
    job.split_tiles = job.n_groups < 2 * nth && job.n_tiles > job.n_groups;
    pool_run(pool, pk_dot_task, &job, nth);
}

void matmul(threadpool *pool, const matmul_weight *w, const float *x, int64_t x_stride, int64_t n_tok, float *y,
            int64_t y_stride, void *scratch, size_t scratch_bytes) {
    check_args(w, x_stride, n_tok, y_stride);
    if (n_tok == 0 || w->n_out == 0) return;
    int64_t first_row = 0; /* rows before it are done */
#if defined(__x86_64__)
    if (w->packed && matmul_amx_usable(w, n_tok)) {
        /* the AMX tiles read the packed rows back (qpack_unpack_row); the rows past the
         * last whole block of 32 take the packed kernels, as a view of the later groups */
        first_row = w->n_out / MATMUL_AMX_ROWS * MATMUL_AMX_ROWS;
        matmul_amx(pool, w, first_row, x, x_stride, n_tok, y, y_stride,
                   (uint8_t *)scratch + act_scratch_bytes(w, n_tok), scratch_bytes - act_scratch_bytes(w, n_tok));
        if (first_row == w->n_out) return;
        matmul_weight rest = *w;
        rest.n_out -= first_row;
        rest.packed = (const uint8_t *)w->packed + (size_t)(first_row / QPACK_ROWS) *
                                                       qpack_weight_bytes(qpack_format_of(w->type), w->n_in, QPACK_ROWS);
        const matmul_weight *rp = &rest;
        float *ry = y + first_row;
        matmul_packed(pool, &rp, 1, x, x_stride, n_tok, &ry, &y_stride, scratch, scratch_bytes);
        return;
    }
#endif
    if (w->packed) {
        matmul_packed(pool, &w, 1, x, x_stride, n_tok, &y, &y_stride, scratch, scratch_bytes);
        return;
    }
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

void matmul_many(threadpool *pool, const matmul_weight *const *w, int n_w, const float *x, int64_t x_stride,
                 int64_t n_tok, float *const *y, const int64_t *y_stride, void *scratch, size_t scratch_bytes) {
    EDDY_ASSERT(n_w >= 1 && n_w <= MATMUL_MANY_MAX);
    bool fused = n_tok > 0;
    for (int i = 0; i < n_w; i++) {
        check_args(w[i], x_stride, n_tok, y_stride[i]);
        fused = fused && w[i]->packed && w[i]->n_out > 0 && w[i]->n_in == w[0]->n_in &&
                qpack_format_of(w[i]->type) == qpack_format_of(w[0]->type);
#if defined(__x86_64__)
        fused = fused && !matmul_amx_usable(w[i], n_tok); /* AMX takes them one by one */
#endif
    }
    if (!fused) {
        for (int i = 0; i < n_w; i++) matmul(pool, w[i], x, x_stride, n_tok, y[i], y_stride[i], scratch, scratch_bytes);
        return;
    }
    matmul_packed(pool, w, n_w, x, x_stride, n_tok, y, y_stride, scratch, scratch_bytes);
}
