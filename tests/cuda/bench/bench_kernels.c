/*
 * bench_kernels.c — the CUDA kernels of a decode step, one at a time, and the delta rule (and
 * a Mamba-2 layer) of a prefill, at the device check's 4B-parameter-shaped Qwen3.5 (hidden 2560, FFN 9216, 32
 * Gated DeltaNet value heads of 128 x 128, 16 attention heads of 256, vocabulary 151936),
 * against the device's own read bandwidth measured in the same run. What a step's profile cannot say: each
 * kernel's time at the GPU's real clocks, alone and back to back, and what each variant
 * (load depth, early start) does to it.
 *
 *   build/cuda/eddy-cuda-bench [REPS [DIV]]  (make CUDA=1 cuda-tests; scripts/device_check.sh)
 *
 * DIV divides the products' rows, the prefills', the contexts and the copy (a quick run: the
 * CPU emulator's smoke test).
 * Every figure is the median of REPS (default 50) timings with CUDA events on one stream;
 * "chained" times REPS launches in a row (programmatic dependent launch on, as a decode
 * step's graph runs them: each starts loading its weights while the one before ends) and
 * divides. Weights are random bytes with finite scales: their values do not matter here.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/ck.h"

enum { T_Q4_K = 12, T_Q6_K = 14 };

static int reps = 50;
static int64_t div_rows = 1; /* the products' rows are divided by it */

static void die(const char *what) {
    const char *e = ck_check(1);
    fprintf(stderr, "eddy-cuda-bench: %s: %s\n", what, e ? e : "failed");
    exit(1);
}

static void *dev_alloc(size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) die("cudaMalloc");
    return p;
}

/* n random bytes, then every block's f16 scales (at the type's offsets) set to small values */
static void *rand_weights(int type, int64_t n_in, int64_t rows, size_t *row_bytes) {
    const size_t block = type == T_Q4_K ? 144 : 210, n_blocks = (size_t)(n_in / 256 * rows);
    *row_bytes = block * (size_t)(n_in / 256);
    uint8_t *h = malloc(block * n_blocks);
    if (!h) die("out of host memory");
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < block * n_blocks; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        h[i] = (uint8_t)s;
    }
    const uint16_t d = 0x1c00; /* f16 0.0039 */
    for (size_t b = 0; b < n_blocks; b++) {
        memcpy(h + b * block + (type == T_Q4_K ? 0 : 208), &d, 2);
        if (type == T_Q4_K) memcpy(h + b * block + 2, &d, 2);
    }
    void *w = dev_alloc(block * n_blocks);
    cudaMemcpy(w, h, block * n_blocks, cudaMemcpyHostToDevice);
    free(h);
    return w;
}

static float *rand_floats(int64_t n) {
    float *h = malloc((size_t)n * sizeof *h);
    if (!h) die("out of host memory");
    for (int64_t i = 0; i < n; i++) h[i] = (float)((i * 7919) % 2003) / 1001.0f - 1.0f;
    float *d = dev_alloc((size_t)n * sizeof *d);
    cudaMemcpy(d, h, (size_t)n * sizeof *d, cudaMemcpyHostToDevice);
    free(h);
    return d;
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The median time in microseconds of `launch` (chained: of one launch among reps in a row) */
typedef void (*launch_fn)(void *arg, cudaStream_t st);
static double time_us(launch_fn launch, void *arg, cudaStream_t st, int chained) {
    cudaEvent_t a, b;
    cudaEventCreate(&a), cudaEventCreate(&b);
    for (int i = 0; i < 3; i++) launch(arg, st); /* warm-up */
    float *t = malloc((size_t)reps * sizeof *t);
    const int n = chained ? 5 : reps;
    for (int r = 0; r < n; r++) {
        cudaEventRecord(a, st);
        for (int k = 0; k < (chained ? reps : 1); k++) launch(arg, st);
        cudaEventRecord(b, st);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&t[r], a, b);
        if (chained) t[r] /= (float)reps;
    }
    if (ck_check(1)) die("a timed kernel");
    qsort(t, (size_t)n, sizeof *t, cmp_float);
    const double us = 1e3 * t[n / 2];
    free(t);
    cudaEventDestroy(a), cudaEventDestroy(b);
    return us;
}

/* ==== The device's read bandwidth: a device-to-device copy ==== */

typedef struct {
    void *dst, *src;
    size_t bytes;
} copy_arg;
static void run_copy(void *p, cudaStream_t st) {
    const copy_arg *c = p;
    cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, st);
}

/* ==== Products ==== */

typedef struct {
    int type;
    ck_gemv_part parts[2];
    int n_parts;
    int64_t n_in, n_tok;
    const float *x;
    void *scratch;
    int ready, mmq;
} gemv_arg;
static void run_gemv(void *p, cudaStream_t st) {
    const gemv_arg *g = p;
    if (g->mmq) ck_mmq_parts((uint32_t)g->type, g->parts, g->n_parts, g->n_in, g->x, g->n_tok, g->scratch, st);
    else ck_gemv_parts((uint32_t)g->type, g->parts, g->n_parts, g->n_in, g->x, g->n_tok, g->scratch, g->ready, st);
}

static void bench_product(const char *name, int type, int64_t n_in, int64_t n_out, int n_parts, double copy_gbs,
                          cudaStream_t st) {
    n_out /= div_rows;
    gemv_arg g = {.type = type, .n_parts = n_parts, .n_in = n_in};
    size_t rb = 0;
    for (int k = 0; k < n_parts; k++) {
        g.parts[k].W = rand_weights(type, n_in, n_out, &rb);
        g.parts[k].row_bytes = rb, g.parts[k].n_out = n_out;
        g.parts[k].y = dev_alloc((size_t)(64 * n_out) * sizeof(float));
    }
    const double bytes = (double)rb * (double)(n_out * n_parts);
    float *x = rand_floats(64 * n_in);
    g.x = x;
    void *q8 = dev_alloc(ck_gemv_scratch_bytes(n_in, 8)), *mq = dev_alloc(ck_mmq_scratch_bytes(n_in, 64));
    static const int64_t toks[] = {1, 2, 8, 32, 64};
    for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++) {
        g.n_tok = toks[i], g.mmq = toks[i] > 8, g.scratch = g.mmq ? mq : q8;
        g.ready = 0;
        run_gemv(&g, st); /* x's 8-bit form, for the runs that reuse it */
        g.ready = !g.mmq;
        const double alone = time_us(run_gemv, &g, st, 0), chained = time_us(run_gemv, &g, st, 1);
        g.ready = 0;
        const double quant = g.mmq ? alone : time_us(run_gemv, &g, st, 1);
        printf("%-34s %2lld rows  %8.1f us alone  %8.1f chained  %6.0f GB/s = %3.0f%% of the copy's  "
               "(%s%.1f us with x quantized)\n",
               name, (long long)toks[i], alone, chained, bytes / chained * 1e-3, 100.0 * bytes / chained * 1e-3 / copy_gbs,
               g.mmq ? "ck_mmq_parts, " : "", quant);
    }
    for (int k = 0; k < n_parts; k++) cudaFree((void *)g.parts[k].W), cudaFree(g.parts[k].y);
    cudaFree(x), cudaFree(q8), cudaFree(mq);
}

/* ==== A mixture of experts' routed experts on the GPU: each slot's own products (decode),
 * or the slots grouped by expert (prefill) ==== */

typedef struct {
    const float *router, *x;
    float *sel_w, *a, *b, *y, *out, *gx;
    int32_t *sel, *pos, *src, *n_tiles;
    ck_moe_tile *tiles;
    ck_gemv_part gu[2], down;
    int64_t n, X, k, E, F, rows, tiles_max;
    void *xq, *hq;
    int grouped;
} moe_arg;
static void run_moe(void *p, cudaStream_t st) {
    const moe_arg *m = p;
    const int64_t S = m->n * m->k;
    ck_moe_route(m->router, m->n, m->X, m->k, m->sel, m->sel_w, st);
    if (m->grouped) {
        ck_moe_group(m->sel, S, m->X, m->pos, m->src, m->tiles, m->n_tiles, st);
        ck_gather_slots(m->gx, m->x, m->src, m->k, m->rows, m->E, st);
        ck_mmq_experts(T_Q4_K, m->gu, 2, m->E, m->gx, m->rows, m->tiles, m->n_tiles, m->tiles_max, m->xq, st);
        ck_swiglu(m->a, m->a, m->b, m->rows, m->F, NULL, NULL, st);
        ck_mmq_experts(T_Q6_K, &m->down, 1, m->F, m->a, m->rows, m->tiles, m->n_tiles, m->tiles_max, m->xq, st);
        ck_moe_combine(m->out, m->y, m->sel_w, m->pos, m->n, m->k, m->E, st);
        return;
    }
    ck_gemv_experts(T_Q4_K, m->gu, 2, m->E, m->x, m->n, m->sel, S, m->xq, m->n <= CK_GEMV_MAX_TOK, st);
    const int h = ck_swiglu(m->a, m->a, m->b, S, m->F, S <= CK_GEMV_MAX_TOK ? m->hq : NULL, NULL, st);
    ck_gemv_experts(T_Q6_K, &m->down, 1, m->F, m->a, S, m->sel, S, m->hq, h, st);
    ck_moe_combine(m->out, m->y, m->sel_w, NULL, m->n, m->k, m->E, st);
}

/* Qwen3.5 35B-A3B's experts: 256 of 512 x 2048 (gate and up Q4_K, down Q6_K), 8 a token;
 * the bytes counted are the slots' experts' (a slot reads its expert for itself), or
 * grouped, every expert's once, and the rate the products' multiply-adds */
static void bench_moe(int64_t n, int grouped, double copy_gbs, cudaStream_t st) {
    moe_arg m = {.n = n, .X = 256 / div_rows > 8 ? 256 / div_rows : 8, .k = 8, .grouped = grouped};
    m.E = 2048 / div_rows > 256 ? 2048 / div_rows : 256, m.F = 512 / div_rows > 256 ? 512 / div_rows : 256;
    const int64_t S = n * m.k, R = grouped ? ck_moe_rows(S, m.X) : S; /* rows of the products' outputs */
    m.rows = R, m.tiles_max = ck_moe_tiles(S, m.X);
    size_t rb = 0, rd = 0;
    for (int i = 0; i < 2; i++) {
        m.gu[i].W = rand_weights(T_Q4_K, m.E, m.X * m.F, &rb);
        m.gu[i].row_bytes = rb, m.gu[i].n_out = m.F;
    }
    m.a = dev_alloc((size_t)(R * m.F) * sizeof(float)), m.b = dev_alloc((size_t)(R * m.F) * sizeof(float));
    m.gu[0].y = m.a, m.gu[1].y = m.b;
    m.y = dev_alloc((size_t)(R * m.E) * sizeof(float));
    m.down = (ck_gemv_part){rand_weights(T_Q6_K, m.F, m.X * m.E, &rd), rd, m.E, m.y};
    float *router = rand_floats(n * m.X), *x = rand_floats(n * m.E);
    m.router = router, m.x = x;
    m.sel = dev_alloc((size_t)S * sizeof(int32_t)), m.sel_w = dev_alloc((size_t)S * sizeof(float));
    m.out = dev_alloc((size_t)(n * m.E) * sizeof(float));
    if (grouped) {
        m.pos = dev_alloc((size_t)S * sizeof(int32_t)), m.src = dev_alloc((size_t)R * sizeof(int32_t));
        m.n_tiles = dev_alloc(sizeof(int32_t)), m.tiles = dev_alloc((size_t)m.tiles_max * sizeof(ck_moe_tile));
        m.gx = dev_alloc((size_t)(R * m.E) * sizeof(float));
        m.xq = dev_alloc(ck_mmq_experts_scratch_bytes(m.E, R));
    } else {
        m.xq = dev_alloc(ck_gemv_experts_scratch_bytes(m.E, n));
        m.hq = dev_alloc(ck_gemv_experts_scratch_bytes(m.F, S));
        /* the routing, and x's 8-bit form, which the norm before leaves in a decode step */
        ck_moe_route(m.router, n, m.X, m.k, m.sel, m.sel_w, st);
        ck_gemv_experts(T_Q4_K, m.gu, 2, m.E, m.x, n, m.sel, S, m.xq, 0, st);
    }
    const double expert = (double)(2 * m.F) * (double)rb + (double)m.E * (double)rd;
    const double bytes = grouped ? (double)m.X * expert : (double)S * expert;
    const double alone = time_us(run_moe, &m, st, 0), chained = time_us(run_moe, &m, st, 1);
    printf("%s, %4lld tokens %8.1f us alone  %8.1f chained  %6.0f GB/s = %3.0f%% of the copy's, %5.1f TOP/s\n",
           grouped ? "grouped experts" : "routed experts ", (long long)n, alone, chained, bytes / chained * 1e-3,
           100.0 * bytes / chained * 1e-3 / copy_gbs, 2.0 * (double)S * 3.0 * (double)(m.E * m.F) / chained * 1e-6);
    cudaFree((void *)m.gu[0].W), cudaFree((void *)m.gu[1].W), cudaFree((void *)m.down.W);
    cudaFree(m.a), cudaFree(m.b), cudaFree(m.y), cudaFree(router), cudaFree(x), cudaFree(m.sel), cudaFree(m.sel_w);
    cudaFree(m.out), cudaFree(m.xq), cudaFree(m.hq), cudaFree(m.pos), cudaFree(m.src), cudaFree(m.n_tiles);
    cudaFree(m.tiles), cudaFree(m.gx);
}

/* ==== A Gated DeltaNet layer's decode: ck_gdn_step against the kernels it fuses ==== */

typedef struct {
    const ck_run *runs;
    int64_t n_runs, conv_dim;
    float *qkv, *ab, *g, *beta, *z, *o, *a, *dt, *w, *state;
    int32_t *ckpts;
    void *q8;
    int fused;
} gdn_arg;
enum { NK = 16, NV = 32, DK = 128, DV = 128 };
static void run_gdn(void *p, cudaStream_t st) {
    const gdn_arg *d = p;
    const int64_t n = d->n_runs, V = NV * DV;
    const ck_gate_src gs = {d->ab + n * NV, NV, d->ab, NV, NV, NV, d->a, d->dt};
    const ck_gated_norm gn = {d->z, V, d->w, 1e-6f};
    if (d->fused) {
        ck_gdn_step(d->runs, n, d->qkv, d->conv_dim, &gs, &gn, d->o, d->q8, d->state, NK, NV, DK, DV, 1, 0.088f, st);
        return;
    }
    ck_ssm_gate(n, NV, gs.alpha, NV, gs.b, NV, NV, NV, d->a, d->dt, d->g, d->beta, st);
    ck_gdn(d->runs, n, d->ckpts, d->qkv, d->conv_dim, d->g, d->beta, d->o, d->state, NK, NV, DK, DV, 1, 0.088f, st);
    ck_gated_rmsnorm(n, NV, DV, d->o, V, d->z, V, d->w, 1e-6f, d->o, V, d->q8, NULL, st);
}

static void bench_gdn(int64_t n_runs, double copy_gbs, cudaStream_t st) {
    const int64_t conv_dim = 2 * NK * DK + NV * DV, V = NV * DV, slot = NV * DK * DV;
    ck_run runs[32];
    for (int64_t k = 0; k < n_runs; k++) runs[k] = (ck_run){(int32_t)k, 1, (int32_t)k, (int32_t)k, 0, 0, 0};
    gdn_arg d = {.n_runs = n_runs, .conv_dim = conv_dim};
    ck_run *druns = dev_alloc(sizeof runs);
    cudaMemcpy(druns, runs, sizeof runs, cudaMemcpyHostToDevice);
    d.runs = druns;
    d.qkv = rand_floats(n_runs * conv_dim), d.ab = rand_floats(2 * n_runs * NV), d.z = rand_floats(n_runs * V);
    d.g = dev_alloc((size_t)(n_runs * NV) * 4), d.beta = dev_alloc((size_t)(n_runs * NV) * 4);
    d.o = dev_alloc((size_t)(n_runs * V) * 4), d.a = rand_floats(NV), d.dt = rand_floats(NV), d.w = rand_floats(DV);
    d.state = rand_floats(n_runs * slot), d.ckpts = dev_alloc(8), d.q8 = dev_alloc(ck_gemv_scratch_bytes(V, 8));
    const double bytes = 2.0 * 4.0 * (double)(n_runs * slot); /* the state read and written */
    for (int fused = 1; fused >= 0; fused--) {
        d.fused = fused;
        const double alone = time_us(run_gdn, &d, st, 0), chained = time_us(run_gdn, &d, st, 1);
        printf("%-34s %2lld seqs  %8.1f us alone  %8.1f chained  %6.0f GB/s = %3.0f%% of the copy's\n",
               fused ? "gdn_step (gate, scan, norm)" : "ssm_gate + gdn + gated_rmsnorm", (long long)n_runs, alone,
               chained, bytes / chained * 1e-3, 100.0 * bytes / chained * 1e-3 / copy_gbs);
    }
    cudaFree(druns), cudaFree(d.qkv), cudaFree(d.ab), cudaFree(d.z), cudaFree(d.g), cudaFree(d.beta), cudaFree(d.o);
    cudaFree(d.a), cudaFree(d.dt), cudaFree(d.w), cudaFree(d.state), cudaFree(d.ckpts), cudaFree(d.q8);
}

/* ==== A Gated DeltaNet layer's prefill: the tiles (tensor cores, CUDA cores) against the row-by-row scan ==== */

typedef struct {
    gdn_arg d;
    int64_t n, tiles;
    float *work;
    int tiled; /* 0: row by row; 1: tiles on the CUDA cores; 2: on the tensor cores */
} prefill_arg;
static void run_prefill(void *p, cudaStream_t st) {
    const prefill_arg *a = p;
    const gdn_arg *d = &a->d;
    if (!a->tiled)
        ck_gdn(d->runs, 1, d->ckpts, d->qkv, d->conv_dim, d->g, d->beta, d->o, d->state, NK, NV, DK, DV, 1, 0.088f, st);
    else if (!ck_gdn_chunked(d->runs, 1, a->n, d->ckpts, d->qkv, d->conv_dim, d->g, d->beta, d->o, d->state, NK, NV, DK,
                             DV, 1, 0.088f, a->work, a->tiles, a->tiled == 2, st))
        die("ck_gdn_chunked refused the shape");
}

/* One sequence's n rows (gates and values random: the time does not depend on them) */
static void bench_prefill(int64_t n, cudaStream_t st) {
    const int64_t conv_dim = 2 * NK * DK + NV * DV, V = NV * DV;
    const ck_run run = {0, (int32_t)n, 0, 0, 0, 0, 0};
    prefill_arg a = {.n = n, .tiles = ck_gdn_tiles_max(n, 1)};
    gdn_arg *d = &a.d;
    ck_run *druns = dev_alloc(sizeof run);
    cudaMemcpy(druns, &run, sizeof run, cudaMemcpyHostToDevice);
    d->runs = druns, d->conv_dim = conv_dim;
    d->qkv = rand_floats(n * conv_dim), d->g = rand_floats(n * NV), d->beta = rand_floats(n * NV);
    d->o = dev_alloc((size_t)(n * V) * 4), d->state = rand_floats(NV * DK * DV), d->ckpts = dev_alloc(8);
    a.work = dev_alloc((size_t)(a.tiles * NV * CK_GDN_TILE_WORK) * 4);
    double us[3];
    for (int tiled = 2; tiled >= 0; tiled--) a.tiled = tiled, us[tiled] = time_us(run_prefill, &a, st, 0);
    printf("gdn prefill, %5lld rows               %8.1f us in tiles on tensor cores  %8.1f on CUDA cores  %8.1f row "
           "by row  (%.1fx, %.1fx; %.2f us a row)\n",
           (long long)n, us[2], us[1], us[0], us[1] / us[2], us[0] / us[2], us[2] / (double)n);
    cudaFree(druns), cudaFree(d->qkv), cudaFree(d->g), cudaFree(d->beta), cudaFree(d->o), cudaFree(d->state);
    cudaFree(d->ckpts), cudaFree(a.work);
}

/* ==== A Mamba-2 layer's prefill: chunks (tensor cores, CUDA cores) against the row-by-row scan ==== */

/* Nemotron-H 8B's mixer: 128 heads of 64, 8 groups, state 128 */
enum { M2_H = 128, M2_P = 64, M2_G = 8, M2_N = 128 };

typedef struct {
    const ck_run *runs;
    const int32_t *ckpts;
    float *xbc, *dt, *y, *state, *A, *bias, *D;
    int how; /* 0: row by row; 1: chunks on the CUDA cores; 2: on the tensor cores */
} mamba2_arg;
static void run_mamba2(void *p, cudaStream_t st) {
    const mamba2_arg *a = p;
    const int64_t CD = M2_H * M2_P + 2 * M2_G * M2_N;
    if (!a->how)
        ck_mamba2(a->runs, 1, a->ckpts, a->xbc, CD, a->dt, M2_H, a->y, a->state, M2_H, M2_P, M2_G, M2_N, a->A, a->bias,
                  a->D, st);
    else if (!ck_mamba2_chunked(a->runs, 1, a->ckpts, a->xbc, CD, a->dt, M2_H, a->y, a->state, M2_H, M2_P, M2_G, M2_N,
                                a->A, a->bias, a->D, a->how == 2, st))
        die("ck_mamba2_chunked refused the shape");
}

static void bench_mamba2_prefill(int64_t n, cudaStream_t st) {
    const int64_t CD = M2_H * M2_P + 2 * M2_G * M2_N;
    const ck_run run = {0, (int32_t)n, 0, 0, 0, 0, 0};
    ck_run *druns = dev_alloc(sizeof run);
    cudaMemcpy(druns, &run, sizeof run, cudaMemcpyHostToDevice);
    mamba2_arg a = {druns, dev_alloc(8), rand_floats(n * CD), rand_floats(n * M2_H), NULL,
                    rand_floats(M2_H * M2_N * M2_P), rand_floats(M2_H), rand_floats(M2_H), rand_floats(M2_H), 0};
    a.y = dev_alloc((size_t)(n * M2_H * M2_P) * 4);
    double us[3];
    for (int how = 2; how >= 0; how--) a.how = how, us[how] = time_us(run_mamba2, &a, st, 0);
    printf("mamba2 prefill, %5lld rows            %8.1f us in chunks on tensor cores  %8.1f on CUDA cores  %8.1f row "
           "by row  (%.1fx, %.1fx)\n",
           (long long)n, us[2], us[1], us[0], us[1] / us[2], us[0] / us[2]);
    cudaFree(druns), cudaFree((void *)a.ckpts), cudaFree(a.xbc), cudaFree(a.dt), cudaFree(a.y), cudaFree(a.state);
    cudaFree(a.A), cudaFree(a.bias), cudaFree(a.D);
}

/* ==== Decode attention over a long context: the heads of a KV head in one block, or one at a time ==== */

typedef struct {
    ck_step s;
    const float *q;
    float *out, *part;
    const void *kc, *vc;
} attn_arg;
enum { AH = 16, AKV = 4, AD = 256 };
static void run_attn(void *p, cudaStream_t st) {
    const attn_arg *a = p;
    ck_attention(&a->s, 1, a->q, NULL, a->out, a->kc, a->vc, 3, AH, AKV, AD, AD, 0.0625f, CK_ATT_SPLITS, a->part, NULL,
                 st);
}

/* One row at position ctx - 1 of an f16 cache (values do not matter: zeros) */
static void bench_attention(int64_t ctx, double copy_gbs, cudaStream_t st) {
    const int64_t n_blocks = (ctx + 255) / 256, rows = n_blocks * 256;
    int32_t *hb = malloc((size_t)n_blocks * sizeof *hb), pos = (int32_t)(ctx - 1), run_of = 0;
    if (!hb) die("out of host memory");
    for (int64_t b = 0; b < n_blocks; b++) hb[b] = (int32_t)(n_blocks - 1 - b); /* blocks in reverse order */
    const ck_run run = {0, 1, 0, 0, 0, 0, 0};
    int32_t *dpos = dev_alloc(4), *drun = dev_alloc(4), *dblocks = dev_alloc((size_t)n_blocks * 4);
    ck_run *druns = dev_alloc(sizeof run);
    cudaMemcpy(dpos, &pos, 4, cudaMemcpyHostToDevice), cudaMemcpy(drun, &run_of, 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dblocks, hb, (size_t)n_blocks * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(druns, &run, sizeof run, cudaMemcpyHostToDevice);
    const size_t cache = (size_t)(rows * AKV * AD) * 2;
    attn_arg a = {{dpos, drun, dblocks, druns}, rand_floats(AH * AD), dev_alloc(AH * AD * 4),
                  dev_alloc((size_t)(AH * CK_ATT_SPLITS * (AD + 2)) * 4), dev_alloc(cache), dev_alloc(cache)};
    cudaMemset((void *)a.kc, 0, cache), cudaMemset((void *)a.vc, 0, cache);
    const double bytes = 2.0 * (double)(ctx * AKV * AD) * 2.0; /* keys and values read once */
    double us[2];
    for (int grouped = 1; grouped >= 0; grouped--) {
        ck_attention_set_grouped(grouped);
        us[grouped] = time_us(run_attn, &a, st, 1);
    }
    ck_attention_set_grouped(1);
    printf("attention, context %6lld              %8.1f us grouped  %8.1f a head at a time  (%.1fx; grouped reads "
           "the cache at %.0f GB/s = %.0f%% of the copy's)\n",
           (long long)ctx, us[1], us[0], us[0] / us[1], bytes / us[1] * 1e-3, 100.0 * bytes / us[1] * 1e-3 / copy_gbs);
    cudaFree(dpos), cudaFree(drun), cudaFree(dblocks), cudaFree(druns), cudaFree((void *)a.q), cudaFree(a.out);
    cudaFree(a.part), cudaFree((void *)a.kc), cudaFree((void *)a.vc);
    free(hb);
}

/* ==== The residual add and the next norm, a row of 2560 ==== */

typedef struct {
    float *x, *mix, *y, *w;
    void *q8;
} norm_arg;
static void run_norm(void *p, cudaStream_t st) {
    const norm_arg *a = p;
    ck_add_rmsnorm(a->x, a->mix, 1.0f, a->y, a->w, 2560, 1, 1e-6f, a->q8, NULL, st);
}

/* ==== The output's digest: what a step copies back instead of its rows of logits ==== */

typedef struct {
    const float *logits;
    int64_t rows, n;
    int kind; /* 0: the rows copied to the host, 1: their best 40, 2: a target's log-probability */
    float *host;
    int32_t *ids, *counts, *targets;
    float *vals;
    double *lp;
} digest_arg;
static void run_digest(void *p, cudaStream_t st) {
    const digest_arg *a = p;
    if (a->kind == 0)
        cudaMemcpyAsync(a->host, a->logits, (size_t)(a->rows * a->n) * sizeof(float), cudaMemcpyDeviceToHost, st);
    else if (a->kind == 1) ck_top_rows(a->logits, a->rows, a->n, 40, a->ids, a->vals, a->counts, st);
    else ck_logprob_rows(a->logits, a->rows, a->n, a->targets, a->lp, st);
}

static void bench_digest(int64_t rows, cudaStream_t st) {
    const int64_t n = 151936;
    digest_arg a = {.logits = rand_floats(rows * n), .rows = rows, .n = n, .host = malloc((size_t)(rows * n) * 4),
                    .ids = dev_alloc((size_t)rows * 40 * 4), .counts = dev_alloc((size_t)rows * 4),
                    .targets = dev_alloc((size_t)rows * 4), .vals = dev_alloc((size_t)rows * 40 * 4),
                    .lp = dev_alloc((size_t)rows * 8)};
    cudaMemset(a.targets, 0, (size_t)rows * 4);
    double us[3];
    for (int k = 0; k < 3; k++) a.kind = k, us[k] = time_us(run_digest, &a, st, 0);
    printf("%3lld rows of %lld logits: to the host (pageable) %8.1f us, best 40 %8.1f us, a log-probability %8.1f us\n",
           (long long)rows, (long long)n, us[0], us[1], us[2]);
    cudaFree((void *)a.logits), cudaFree(a.ids), cudaFree(a.counts), cudaFree(a.targets), cudaFree(a.vals);
    cudaFree(a.lp);
    free(a.host);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* each line out as it is made: a run cut short by a timeout keeps them */
    if (argc > 1) reps = atoi(argv[1]) > 0 ? atoi(argv[1]) : reps;
    if (argc > 2) div_rows = atoi(argv[2]) > 0 ? atoi(argv[2]) : 1;
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) die("no CUDA device");
    ck_set_pdl(prop.major >= 9);
    cudaStream_t st;
    if (cudaStreamCreate(&st) != cudaSuccess) die("cudaStreamCreate");
    printf("eddy-cuda-bench on %s, %d SMs, median of %d\n", prop.name, prop.multiProcessorCount, reps);
    copy_arg c = {.bytes = ((size_t)1 << 30) / (size_t)div_rows};
    c.dst = dev_alloc(c.bytes), c.src = dev_alloc(c.bytes);
    cudaMemset(c.src, 1, c.bytes);
    const double copy_us = time_us(run_copy, &c, st, 0), copy_gbs = 2.0 * (double)c.bytes / copy_us * 1e-3;
    printf("device-to-device copy of %zu MiB: %.0f GB/s (bytes read and written)\n", c.bytes >> 20, copy_gbs);
    cudaFree(c.dst), cudaFree(c.src);
    for (int depth = 4; depth >= 1; depth -= 3) {
        ck_gemv_set_depth(depth);
        printf("== products, %d item%s a lane in flight\n", depth, depth > 1 ? "s" : "");
        bench_product("Q4_K 2560 -> 2 x 9216 (gate, up)", T_Q4_K, 2560, 9216, 2, copy_gbs, st);
        bench_product("Q4_K 9216 -> 2560 (down)", T_Q4_K, 9216, 2560, 1, copy_gbs, st);
        bench_product("Q6_K 2560 -> 12288 (GDN qkv)", T_Q6_K, 2560, 12288, 1, copy_gbs, st);
        bench_product("Q4_K 4096 -> 2560 (GDN out)", T_Q4_K, 4096, 2560, 1, copy_gbs, st);
        if (depth == 4) bench_product("Q6_K 2560 -> 151936 (output)", T_Q6_K, 2560, 151936, 1, copy_gbs, st);
    }
    ck_gemv_set_depth(4);
    printf("== a Gated DeltaNet layer's decode (32 heads of 128 x 128)\n");
    bench_gdn(1, copy_gbs, st);
    bench_gdn(32, copy_gbs, st);
    printf("== decode attention, one row, 16 query heads on 4 KV heads of 256, f16 cache\n");
    for (int64_t ctx = 2048; ctx <= 32768; ctx *= 4) bench_attention(ctx / div_rows > 1 ? ctx / div_rows : 1, copy_gbs, st);
    printf("== a Gated DeltaNet layer's prefill (one sequence, 32 heads of 128 x 128)\n");
    for (int64_t n = 512; n <= 2048; n *= 4) bench_prefill(n / div_rows > 1 ? n / div_rows : 1, st);
    printf("== a Mamba-2 layer's prefill (one sequence, Nemotron-H 8B's: 128 heads of 64, 8 groups, state 128)\n");
    bench_mamba2_prefill(2048 / div_rows > 1 ? 2048 / div_rows : 1, st);
    printf("== a mixture of experts' routed experts: routing, gate/up, SwiGLU, down, weighted sum\n");
    static const int64_t moe_toks[] = {1, 8, 32};
    for (size_t i = 0; i < sizeof moe_toks / sizeof moe_toks[0]; i++) bench_moe(moe_toks[i], 0, copy_gbs, st);
    bench_moe(512 / div_rows > 8 ? 512 / div_rows : 8, 1, copy_gbs, st); /* a prefill's, grouped by expert */
    printf("== the output's rows: copied to the host, or their digest on the GPU (ck_top_rows, ck_logprob_rows)\n");
    for (int64_t rows = 1; rows <= 32; rows *= 32) bench_digest(rows, st);
    printf("== residual add + RMSNorm + 8-bit form, one row of 2560\n");
    norm_arg na = {rand_floats(2560), rand_floats(2560), dev_alloc(2560 * 4), rand_floats(2560),
                   dev_alloc(ck_gemv_scratch_bytes(2560, 1))};
    printf("add_rmsnorm                         %8.1f us alone  %8.1f chained\n", time_us(run_norm, &na, st, 0),
           time_us(run_norm, &na, st, 1));
    cudaStreamDestroy(st);
    return 0;
}
