/*
 * bench_matmul.c — benchmarks of the matrix product (ops/matmul.h) per weight type:
 *
 *   matmul_gemv: decode, one token, at model shapes. Bandwidth-bound: bytes = weight
 *     bytes + activation and output bytes, compared with the read bandwidth measured
 *     in the same run. Each call reads a different window of a 1 GiB arena of weights,
 *     so every call streams its weights from memory, not from the last-level cache.
 *   matmul_gemm: prefill, 512 tokens. Compute-bound: flops = 2 n_tok n_in n_out,
 *     compared with the f32 FMA peak for the float types and with the 8-bit dot peak
 *     (vpdpbusd chains, where the CPU has them) for the quantized ones, which run on
 *     integer dot instructions.
 *   qpack_kernel: the packed kernel alone (quant/qpack.h), one thread, 32 groups of 16
 *     rows of 1024 in L2 against one tile of 1, 2, 4, 5 or 8 tokens: what the kernel
 *     does per core when memory is not the limit.
 *
 * Weights are random quants with sane scales (no inf, NaN or subnormal floats, which
 * could trigger slow paths real weights never hit).
 */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "bench.h"
#include "ops/matmul.h"
#include "quant/qdot.h"
#include "quant/qpack.h"

void bench_matmul_gemv_cases(bench_env *env);
void bench_matmul_gemm_cases(bench_env *env);
void bench_matmul_few_cases(bench_env *env);
void bench_qpack_kernel_cases(bench_env *env);

static const qtype bench_types[] = {QTYPE_F32,  QTYPE_F16,  QTYPE_BF16, QTYPE_Q8_0, QTYPE_Q4_0,
                                    QTYPE_Q4_1, QTYPE_Q5_0, QTYPE_Q5_1, QTYPE_IQ4_NL, QTYPE_Q2_K,
                                    QTYPE_Q3_K, QTYPE_Q4_K, QTYPE_Q5_K, QTYPE_Q6_K, QTYPE_IQ4_XS};

/* ==== Weight arena ==== */

#define ARENA_BYTES ((size_t)1 << 30)

static uint64_t mix(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* Fills `bytes` of p with weights of type t: random quants, fp16 scales in [2^-9, 2^-7)
 * of random sign; float types: values in (-1, 1). */
static void fill_weights(qtype t, uint8_t *p, size_t bytes, uint64_t seed) {
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    if (t == QTYPE_F32) {
        float *f = (float *)p;
        for (size_t i = 0; i < bytes / 4; i++) f[i] = (float)(int32_t)(mix(&s) >> 40 & 0xffffff) / (float)(1 << 24) - 0.5f;
        return;
    }
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        uint64_t v = mix(&s);
        memcpy(p + i, &v, 8);
    }
    if (t == QTYPE_F16 || t == QTYPE_BF16) {
        uint16_t *h = (uint16_t *)p;
        for (size_t i = 0; i < bytes / 2; i++) {
            float v = (float)(h[i] & 0x7fff) / 32768.0f - 0.5f;
            h[i] = t == QTYPE_F16 ? f32_to_fp16(v) : f32_to_bf16(v);
        }
        return;
    }
    const qtype_traits *tr = qtype_info(t);
    int offs[2] = {-1, -1};
    switch (t) {
    case QTYPE_Q4_1:
    case QTYPE_Q5_1:
    case QTYPE_Q4_K:
    case QTYPE_Q5_K: offs[0] = 0, offs[1] = 2; break;
    case QTYPE_Q2_K: offs[0] = 80, offs[1] = 82; break;
    case QTYPE_Q3_K: offs[0] = 108; break;
    case QTYPE_Q6_K: offs[0] = 208; break;
    default: offs[0] = 0; break;
    }
    for (size_t b = 0; b + tr->type_size <= bytes; b += tr->type_size)
        for (int k = 0; k < 2; k++) {
            if (offs[k] < 0) continue;
            uint16_t h;
            memcpy(&h, p + b + offs[k], 2);
            h = (uint16_t)((h & 0x87ff) | 0x1800); /* exponent field 6 or 7: |d| in [2^-9, 2^-7) */
            memcpy(p + b + offs[k], &h, 2);
        }
}

/* ==== Timed call ==== */

typedef struct {
    threadpool *pool;
    matmul_weight w;
    const uint8_t *arena;
    size_t window, n_windows, next; /* decode: a different window of the arena per call */
    uint8_t *packed;                /* packed copies, pwindow bytes apart, or NULL */
    size_t pwindow;
    const float *x;
    int64_t n_tok;
    float *y;
    void *scratch;
    size_t scratch_bytes;
} mm_call;

static void run_mm(void *p) {
    mm_call *c = p;
    if (c->n_windows) {
        c->w.data = c->arena + c->next * c->window;
        if (c->packed) c->w.packed = c->packed + c->next * c->pwindow;
        c->next = (c->next + 1) % c->n_windows;
    }
    matmul(c->pool, &c->w, c->x, c->w.n_in, c->n_tok, c->y, c->w.n_out, c->scratch, c->scratch_bytes);
}

#define PACKED_ARENA_BYTES ((size_t)256 << 20) /* decode: packed windows (past the last-level cache) */
#define FEW_TOKENS 8 /* up to this many tokens (a verify step, a small batch) time as decode does */

static void bench_one(bench_env *env, qtype t, int64_t n_in, int64_t n_out, int64_t n_tok, uint8_t *arena,
                      size_t arena_bytes) {
    mm_call c = {.pool = env->pool, .arena = arena, .n_tok = n_tok};
    if (!matmul_weight_init(&c.w, t, n_in, n_out, arena)) return;
    size_t wbytes = c.w.row_bytes * (size_t)n_out;
    if (wbytes > arena_bytes) return;
    c.window = (wbytes + 4095) / 4096 * 4096;
    /* a few tokens stream their weights from memory as decode does: a window per call */
    const bool stream = n_tok <= FEW_TOKENS;
    c.n_windows = stream ? arena_bytes / c.window : 0;
    float *x = bench_random_floats(n_in * n_tok, 3, 2.0f);
    float *y = eddy_malloc_aligned(sizeof(float) * (size_t)(n_out * n_tok), 64);
    c.scratch_bytes = matmul_scratch_bytes(&c.w, n_tok);
    c.scratch = eddy_malloc_aligned(c.scratch_bytes, 64);
    /* each type runs as the rows are, then packed where this CPU has a packed kernel */
    const size_t pbytes = matmul_pack_bytes(&c.w);
    for (int pk = 0; pk < (pbytes ? 2 : 1) && x && y && c.scratch; pk++) {
        const size_t n_win = stream ? arena_bytes / c.window : 1;
        if (pk) {
            c.pwindow = (pbytes + 4095) / 4096 * 4096;
            size_t n_pw = stream ? PACKED_ARENA_BYTES / c.pwindow : 1;
            if (n_pw > n_win) n_pw = n_win;
            if (n_pw < 1) n_pw = 1;
            c.packed = eddy_malloc_aligned(c.pwindow * n_pw, 4096);
            if (!c.packed) break;
            for (size_t i = 0; i < n_pw; i++) {
                matmul_weight wi = c.w;
                wi.data = arena + i * c.window;
                matmul_pack(&wi, c.packed + i * c.pwindow);
            }
            c.w.packed = c.packed;
            if (stream) c.n_windows = n_pw;
        }
        c.x = x, c.y = y, c.next = 0;
        bench_result r = {.op = n_tok == 1 ? "matmul_gemv" : stream ? "matmul_few" : "matmul_gemm",
                          .variant = pk ? "packed" : qdot_kernel_name(t)};
        snprintf(r.shape, sizeof r.shape, "%-6s n_in=%lld n_out=%lld n_tok=%lld", qtype_name(t), (long long)n_in,
                 (long long)n_out, (long long)n_tok);
        r.seconds = bench_median(run_mm, &c, stream ? 20 : 3, stream ? 0.3 : 0.5);
        r.bytes = (double)(pk ? pbytes : wbytes) + 4.0 * (double)(n_in + n_out) * (double)n_tok;
        r.flops = 2.0 * (double)n_tok * (double)n_in * (double)n_out;
        r.int8 = quant_dot_type(t) != QTYPE_F32 && strcmp(r.variant, "ref") != 0;
        bench_emit(env, &r);
        eddy_free_aligned(c.packed);
        c.packed = NULL, c.w.packed = NULL, c.w.data = arena;
    }
    eddy_free_aligned(x);
    eddy_free_aligned(y);
    eddy_free_aligned(c.scratch);
}

/* ==== Cases ==== */

void bench_matmul_gemv_cases(bench_env *env) {
    uint8_t *arena = eddy_malloc_aligned(ARENA_BYTES, 4096);
    if (!arena) return;
    static const int64_t shapes[][2] = {{1024, 3584}, {3584, 1024}, {4096, 4096}, {1024, 65536}};
    for (size_t ti = 0; ti < sizeof bench_types / sizeof bench_types[0]; ti++) {
        qtype t = bench_types[ti];
        fill_weights(t, arena, ARENA_BYTES, ti + 1);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            bench_one(env, t, shapes[s][0], shapes[s][1], 1, arena, ARENA_BYTES);
    }
    eddy_free_aligned(arena);
}

/* What a verify step or a small batch adds to decode: the same products with 1, 2, 5
 * and 8 tokens, each call on weights not in cache. */
void bench_matmul_few_cases(bench_env *env) {
    uint8_t *arena = eddy_malloc_aligned(ARENA_BYTES, 4096);
    if (!arena) return;
    static const qtype types[] = {QTYPE_Q8_0, QTYPE_Q4_1, QTYPE_Q4_K, QTYPE_Q6_K};
    static const int64_t n_toks[] = {1, 2, 5, 8};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        fill_weights(types[ti], arena, ARENA_BYTES, ti + 1);
        for (size_t k = 0; k < sizeof n_toks / sizeof n_toks[0]; k++)
            bench_one(env, types[ti], 1024, 3584, n_toks[k], arena, ARENA_BYTES);
    }
    eddy_free_aligned(arena);
}

void bench_matmul_gemm_cases(bench_env *env) {
    const int64_t n_in = 4096, n_out = 4096, n_tok = 512;
    size_t bytes = (size_t)n_in * (size_t)n_out * 4;
    uint8_t *w = eddy_malloc_aligned(bytes, 4096);
    if (!w) return;
    for (size_t ti = 0; ti < sizeof bench_types / sizeof bench_types[0]; ti++) {
        qtype t = bench_types[ti];
        fill_weights(t, w, bytes, ti + 1);
        bench_one(env, t, n_in, n_out, n_tok, w, bytes);
    }
    eddy_free_aligned(w);
}

/* ==== The packed kernel alone ==== */

typedef struct {
    qpack_kernel_fn fn;
    const uint8_t *groups, *tile;
    size_t group_bytes;
    int64_t n_units, n_groups;
    int nt;
    float y[QPACK_TOK * QPACK_ROWS];
} qk_call;

static void run_qk(void *p) {
    qk_call *c = p;
    for (int64_t g = 0; g < c->n_groups; g++)
        c->fn(c->n_units, c->groups + g * c->group_bytes, c->tile, c->nt, c->y, QPACK_ROWS, QPACK_ROWS);
}

void bench_qpack_kernel_cases(bench_env *env) {
    const int64_t n_in = 1024, n_groups = 32, n_out = n_groups * QPACK_ROWS;
    static const int n_toks[] = {1, 2, 4, 5, 8};
    for (size_t ti = 0; ti < sizeof bench_types / sizeof bench_types[0]; ti++) {
        const qtype t = bench_types[ti];
        const qpack_format f = qpack_format_of(t);
        qk_call c = {.fn = qpack_kernel(f), .n_groups = n_groups};
        if (f == QPACK_NONE || !c.fn) continue;
        c.n_units = n_in / qpack_unit(f);
        c.group_bytes = qpack_weight_bytes(f, n_in, QPACK_ROWS);
        const qtype at = quant_dot_type(t);
        size_t row = 0, arow = 0;
        if (!qtype_row_bytes(t, n_in, &row) || !qtype_row_bytes(at, n_in, &arow)) continue;
        uint8_t *w = eddy_malloc_aligned(row * (size_t)n_out, 64);
        uint8_t *groups = eddy_malloc_aligned(c.group_bytes * (size_t)n_groups, 64);
        uint8_t *act = eddy_malloc_aligned(arow * QPACK_TOK, 64);
        uint8_t *tile = eddy_malloc_aligned(qpack_act_unit_bytes(f) * (size_t)c.n_units, 64);
        float *x = bench_random_floats(n_in * QPACK_TOK, 5, 2.0f);
        if (w && groups && act && tile && x) {
            fill_weights(t, w, row * (size_t)n_out, ti + 1);
            qpack_weights(f, w, row, n_in, n_out, groups);
            for (int k = 0; k < QPACK_TOK; k++) quantize_row_act(at, x + k * n_in, act + (size_t)k * arow, n_in);
            c.groups = groups, c.tile = tile;
            for (size_t k = 0; k < sizeof n_toks / sizeof n_toks[0]; k++) {
                c.nt = n_toks[k];
                qpack_act_tile(f, act, arow, c.nt, n_in, tile);
                bench_result r = {.op = "qpack_kernel", .variant = "packed", .threads = 1, .in_cache = true,
                                  .int8 = true};
                snprintf(r.shape, sizeof r.shape, "%-6s n_in=%lld rows=%lld n_tok=%d (1 thread)", qtype_name(t),
                         (long long)n_in, (long long)n_out, c.nt);
                r.seconds = bench_median(run_qk, &c, 20, 0.2);
                r.bytes = (double)(c.group_bytes * (size_t)n_groups);
                r.flops = 2.0 * (double)c.nt * (double)n_in * (double)n_out;
                bench_emit(env, &r);
            }
        }
        eddy_free_aligned(w), eddy_free_aligned(groups), eddy_free_aligned(act), eddy_free_aligned(tile);
        eddy_free_aligned(x);
    }
}
