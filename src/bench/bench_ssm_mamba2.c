/*
 * bench_ssm_mamba2.c — benchmarks of the Mamba-2 kernels (ssm/mamba2.h) at a real
 * model's shape: d_inner 4096 (64 heads of 64), d_state 128, 8 groups.
 *
 *   mamba2_step     one decode token for 1 and 8 sequences, with each kernel set
 *                   (one per ISA level the CPU has: "ref" is the portable set). Each call takes the next
 *                   states from a ring of 1 GiB (three times the 300 MiB last-level
 *                   cache of the machine first measured), so the state really comes
 *                   from memory. bytes = state read + written + inputs (x, B, C, dt)
 *                   + y.
 *   mamba2_prefill  T = 4096 tokens of one sequence: the sequential scan and the
 *                   chunked scan at several chunk sizes, with each kernel set.
 *                   flops = T H (5 P N + 3 P): the recurrence's own operations
 *                   (dA h: 1, + B (dt x): 2, y += C h: 2 per state element; dt x: 1
 *                   and y += D x: 2 per channel), the same count for every variant.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "bench.h"
#include "ssm/mamba2.h"

void bench_mamba2_cases(bench_env *env);

enum { H = 64, P = 64, G = 8, N = 128 };

#define RING_BYTES ((int64_t)1 << 30)

typedef struct {
    mamba2_params p;
    float A[H], dt_bias[H], D[H];
} model;

static void model_init(model *m) {
    for (int h = 0; h < H; h++) {
        m->A[h] = -expf(-1.0f + 3.0f * (float)h / H); /* -0.37 .. -7 */
        m->dt_bias[h] = -1.0f + (float)(h % 8) / 8.0f;
        m->D[h] = 1.0f;
    }
    m->p = (mamba2_params){.n_heads = H, .d_head = P, .n_groups = G, .d_state = N, .A = m->A,
                           .dt_bias = m->dt_bias, .D = m->D, .dt_min = 0.0f, .dt_max = INFINITY};
}

/* ==== Decode step ==== */

typedef struct {
    const mamba2_params *p;
    mamba2_io io;
    float *ring;
    int64_t n_slots, next, n_seq, sf;
    threadpool *pool;
    isa_level isa;
} step_job;

static void run_step(void *ctx) {
    step_job *j = ctx;
    float *st[8];
    for (int64_t i = 0; i < j->n_seq; i++) {
        st[i] = j->ring + j->next * j->sf;
        j->next = (j->next + 1) % j->n_slots;
    }
    mamba2_step_isa(j->isa, j->p, &j->io, st, j->n_seq, j->pool);
}

static void bench_step(bench_env *env, const model *m) {
    const int64_t sf = H * N * P, n_slots = RING_BYTES / (sf * (int64_t)sizeof(float));
    const int64_t xw = H * P, row = xw + 2 * G * N;
    float *ring = bench_random_floats(n_slots * sf, 11, 1.0f);
    float *in = bench_random_floats(8 * (row + H), 12, 2.0f), *y = bench_random_floats(8 * xw, 13, 0.0f);
    if (!ring || !in || !y) goto done;
    for (int64_t n_seq = 1; n_seq <= 8; n_seq *= 8) {
        for (int v = 0; v < ISA_COUNT; v++) {
            if (!isa_available((isa_level)v)) continue;
            const bool slow = v == ISA_REF;
            step_job j = {.p = &m->p, .ring = ring, .n_slots = n_slots, .n_seq = n_seq, .sf = sf, .pool = env->pool,
                          .isa = (isa_level)v};
            j.io = (mamba2_io){.x = in, .x_stride = row, .B = in + xw, .B_stride = row, .C = in + xw + G * N,
                               .C_stride = row, .dt = in + 8 * row, .dt_stride = H, .y = y, .y_stride = xw};
            bench_result r = {.op = "mamba2_step", .variant = isa_name((isa_level)v)};
            snprintf(r.shape, sizeof r.shape, "n_seq=%lld h=%d p=%d n=%d g=%d", (long long)n_seq, H, P, N, G);
            r.seconds = bench_median(run_step, &j, slow ? 20 : 200, slow ? 0.3 : 0.5);
            r.bytes = (double)n_seq * (2.0 * (double)sf + (double)(2 * xw + 2 * G * N + H)) * sizeof(float);
            r.flops = (double)n_seq * H * (5.0 * P * N + 3.0 * P);
            bench_emit(env, &r);
        }
    }
done:
    eddy_free_aligned(ring), eddy_free_aligned(in), eddy_free_aligned(y);
}

/* ==== Prefill ==== */

enum { T = 4096 };

typedef struct {
    const mamba2_params *p;
    mamba2_io io;
    float *state;
    threadpool *pool;
    void *scratch;
    isa_level isa;
    int64_t chunk; /* 0: sequential */
} scan_job;

static void run_scan(void *ctx) {
    scan_job *j = ctx;
    int64_t seq[2] = {0, T};
    if (!j->chunk) mamba2_scan_seq_isa(j->isa, j->p, &j->io, seq, &j->state, 1, j->pool);
    else mamba2_scan_chunked_isa(j->isa, j->chunk, j->p, &j->io, seq, &j->state, 1, j->pool, j->scratch);
}

static void bench_prefill(bench_env *env, const model *m) {
    const int64_t sf = H * N * P, xw = H * P, row = xw + 2 * G * N;
    float *in = bench_random_floats(T * row, 21, 2.0f), *dt = bench_random_floats(T * H, 22, 4.0f);
    float *y = bench_random_floats(T * xw, 23, 0.0f), *state = bench_random_floats(sf, 24, 1.0f);
    void *scratch = eddy_malloc_aligned(mamba2_scan_scratch_bytes(&m->p, MAMBA2_CHUNK_MAX, env->n_threads), 64);
    if (!in || !dt || !y || !state || !scratch) goto done;
    static const int64_t chunks[] = {0, 32, 64, 128, 256};
    for (int v = 0; v < ISA_COUNT; v++) {
        if (!isa_available((isa_level)v)) continue;
        const bool slow = v == ISA_REF;
        for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
            if (slow && chunks[c] != 0 && chunks[c] != MAMBA2_CHUNK) continue; /* ref: what mamba2_scan runs */
            scan_job j = {.p = &m->p, .state = state, .pool = env->pool, .scratch = scratch, .isa = (isa_level)v,
                          .chunk = chunks[c]};
            j.io = (mamba2_io){.x = in, .x_stride = row, .B = in + xw, .B_stride = row, .C = in + xw + G * N,
                               .C_stride = row, .dt = dt, .dt_stride = H, .y = y, .y_stride = xw};
            char variant[32];
            if (!chunks[c]) snprintf(variant, sizeof variant, "seq.%s", isa_name((isa_level)v));
            else snprintf(variant, sizeof variant, "c%lld.%s", (long long)chunks[c], isa_name((isa_level)v));
            bench_result r = {.op = "mamba2_prefill", .variant = variant};
            snprintf(r.shape, sizeof r.shape, "T=%d h=%d p=%d n=%d g=%d", T, H, P, N, G);
            r.seconds = bench_median(run_scan, &j, slow ? 1 : 5, slow ? 0.0 : 1.0);
            r.bytes = ((double)T * (2 * xw + 2 * G * N + H) + 2.0 * (double)sf) * sizeof(float);
            r.flops = (double)T * H * (5.0 * P * N + 3.0 * P);
            bench_emit(env, &r);
        }
    }
done:
    eddy_free_aligned(in), eddy_free_aligned(dt), eddy_free_aligned(y), eddy_free_aligned(state);
    eddy_free_aligned(scratch);
}

void bench_mamba2_cases(bench_env *env) {
    model m;
    model_init(&m);
    bench_step(env, &m);
    bench_prefill(env, &m);
}
