/*
 * conv1d.c — causal depthwise conv1d + SiLU (+ per-head L2 norm): the scalar
 * oracles, the scalar block kernels, and the threaded drivers that every ISA
 * shares (decode step, scan, token-parallel prefill, verify with snapshots).
 *
 * The drivers own everything that is not arithmetic: splitting work into units
 * ((sequence, channel block) for decode, scan and verify; token tiles over every
 * channel for the prefill), rolling the state, writing snapshots and applying the
 * L2 norm to whole heads. A channel block never straddles a head of the normalized
 * range, so a unit can normalize what it computed.
 */
#include <string.h>

#include "base/error.h"
#include "ssm/ssm.h"
#include "ssm/ssm_kernels.h"

/* ==== Scalar oracle ==== */

void conv1d_pack_weights(const float *w_ck, int64_t conv_dim, int K, float *w_kc) {
    for (int64_t c = 0; c < conv_dim; c++)
        for (int j = 0; j < K; j++) w_kc[j * conv_dim + c] = w_ck[c * K + j];
}

static void check_params(const conv1d_params *p) {
    EDDY_ASSERT(p->K >= 2 && p->K <= CONV1D_MAX_K && p->conv_dim >= 1);
    EDDY_ASSERT(p->l2_channels == 0 ||
                (p->l2_dim > 0 && p->l2_channels % p->l2_dim == 0 && p->l2_channels <= p->conv_dim));
}

/* The output of one channel from its window in[0..K-1] (in[K-1] the newest input):
 * bias first, then taps in order. Every scalar path goes through here. */
static inline float conv_point_ref(const conv1d_params *p, int64_t c, const float *in) {
    float acc = p->bias ? p->bias[c] : 0.0f;
    for (int j = 0; j < p->K; j++) acc += p->w[j * p->conv_dim + c] * in[j];
    return ssm_silu_ref(acc);
}

static void l2norm_ref(float *y, int64_t n, float eps) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += y[i] * y[i];
    float s = 1.0f / sqrtf(ss + eps);
    for (int64_t i = 0; i < n; i++) y[i] *= s;
}

/* The recurrence as written: per token, every channel reads its window (state rows
 * then the new input), then the state rolls by one raw input. */
void conv1d_scan_ref(const conv1d_params *p, int64_t T, const float *x, int64_t x_stride, float *y,
                     int64_t y_stride, float *state) {
    check_params(p);
    const int64_t C = p->conv_dim;
    const int km1 = p->K - 1;
    for (int64_t t = 0; t < T; t++) {
        const float *xt = x + t * x_stride;
        float *yt = y + t * y_stride;
        for (int64_t c = 0; c < C; c++) {
            float in[CONV1D_MAX_K];
            for (int j = 0; j < km1; j++) in[j] = state[j * C + c];
            in[km1] = xt[c];
            yt[c] = conv_point_ref(p, c, in);
            for (int j = 0; j < km1; j++) state[j * C + c] = in[j + 1];
        }
        for (int64_t h = 0; h < p->l2_channels; h += p->l2_dim) l2norm_ref(yt + h, p->l2_dim, p->l2_eps);
    }
}

void conv1d_step_ref(const conv1d_params *p, int64_t n_seq, const float *x, int64_t x_stride, float *y,
                     int64_t y_stride, float *state, const int64_t *slot) {
    for (int64_t s = 0; s < n_seq; s++)
        conv1d_scan_ref(p, 1, x + s * x_stride, x_stride, y + s * y_stride, y_stride,
                        state + (slot ? slot[s] : s) * conv1d_state_floats(p));
}

void conv1d_verify_ref(const conv1d_params *p, int64_t n_seq, int64_t T, const float *x, int64_t x_stride,
                       float *y, int64_t y_stride, const float *state, const int64_t *slot, float *const *snap) {
    const int64_t n = conv1d_state_floats(p);
    for (int64_t s = 0; s < n_seq; s++) {
        for (int64_t t = 0; t < T; t++) {
            const int64_t r = s * T + t;
            const float *prev = t == 0 ? state + (slot ? slot[s] : s) * n : snap[r - 1];
            memcpy(snap[r], prev, (size_t)n * sizeof(float));
            conv1d_scan_ref(p, 1, x + r * x_stride, x_stride, y + r * y_stride, y_stride, snap[r]);
        }
    }
}

/* ==== Scalar block kernels (the ISA_REF table) ==== */

static void tile_ref(const conv1d_params *p, int64_t c0, int64_t c1, int64_t t0, int64_t t1, const float *x,
                     int64_t x_stride, const float *state, float *y, int64_t y_stride) {
    const int64_t C = p->conv_dim;
    const int K = p->K;
    for (int64_t t = t0; t < t1; t++) {
        const float *src[CONV1D_MAX_K];
        for (int j = 0; j < K; j++) {
            int64_t tau = t - (K - 1) + j;
            src[j] = tau >= 0 ? x + tau * x_stride : state + (K - 1 + tau) * C;
        }
        for (int64_t c = c0; c < c1; c++) {
            float in[CONV1D_MAX_K];
            for (int j = 0; j < K; j++) in[j] = src[j][c];
            y[t * y_stride + c] = conv_point_ref(p, c, in);
        }
    }
}

static void scan_ref(const conv1d_params *p, int64_t c0, int64_t c1, int64_t T, const float *x, int64_t x_stride,
                     const float *state, float *y, int64_t y_stride) {
    const int64_t C = p->conv_dim;
    const int km1 = p->K - 1;
    for (int64_t c = c0; c < c1; c++) {
        float in[CONV1D_MAX_K];
        for (int j = 0; j < km1; j++) in[j] = state[j * C + c];
        for (int64_t t = 0; t < T; t++) {
            in[km1] = x[t * x_stride + c];
            y[t * y_stride + c] = conv_point_ref(p, c, in);
            for (int j = 0; j < km1; j++) in[j] = in[j + 1];
        }
    }
}

const conv1d_kernels conv1d_kernels_ref = {tile_ref, scan_ref, l2norm_ref};

/* ==== Threaded drivers ==== */

static const conv1d_kernels *kernels_for(isa_level isa) {
    EDDY_ASSERT(isa_available(isa));
    switch (isa) {
#if defined(__x86_64__)
    case ISA_AVX512: return &conv1d_kernels_avx512;
    case ISA_AVX2: return &conv1d_kernels_avx2;
#elif defined(__aarch64__)
    case ISA_NEON: return &conv1d_kernels_neon;
#endif
    default: return &conv1d_kernels_ref;
    }
}

/* Channels per unit of work: about 256, a whole number of normalized heads. */
static int64_t block_channels(const conv1d_params *p) {
    if (p->l2_channels <= 0) return 256;
    return p->l2_dim >= 256 ? p->l2_dim : 256 / p->l2_dim * p->l2_dim;
}

/* Writes, for channels [c0, c1), the window that follows `n_in` more inputs:
 * row r of dst = the (n_in + r)-th entry of [old state rows; x rows]. dst may be
 * the old state itself (rows are read ahead of where they are written). */
static void window_after(const conv1d_params *p, int64_t c0, int64_t c1, int64_t n_in, const float *x,
                         int64_t x_stride, const float *old_state, float *dst) {
    const int64_t C = p->conv_dim;
    const int km1 = p->K - 1;
    const size_t bytes = (size_t)(c1 - c0) * sizeof(float);
    if (n_in <= 0) return;
    for (int r = 0; r < km1; r++) {
        int64_t src = n_in + r;
        const float *from = src < km1 ? old_state + src * C : x + (src - km1) * x_stride;
        memcpy(dst + r * C + c0, from + c0, bytes);
    }
}

static void normalize_rows(const conv1d_kernels *kk, const conv1d_params *p, int64_t c0, int64_t c1, float *y,
                           int64_t y_stride, int64_t t0, int64_t t1) {
    int64_t end = c1 < p->l2_channels ? c1 : p->l2_channels;
    if (c0 >= end) return;
    for (int64_t t = t0; t < t1; t++)
        for (int64_t h = c0; h < end; h += p->l2_dim) kk->l2norm(y + t * y_stride + h, p->l2_dim, p->l2_eps);
}

/* Threads for a job of `units` units of about `work` floats each: one thread for
 * small jobs, where waking workers costs more than it saves. */
static int threads_for(threadpool *pool, int64_t units, double work) {
    int n = pool_size(pool);
    if (work * (double)units < 65536.0) return 1;
    return units < n ? (int)units : n;
}

typedef struct {
    const conv1d_kernels *kk;
    const conv1d_params *p;
    int64_t n_seq, T, block, n_blocks, tile;
    const float *x;
    int64_t x_stride;
    float *y;
    int64_t y_stride;
    float *state;
    const int64_t *slot;
    float *const *snap;
} conv_job;

static float *slot_state(const conv_job *j, int64_t s) {
    return j->state + (j->slot ? j->slot[s] : s) * conv1d_state_floats(j->p);
}

static void step_task(void *ctx, int ith, int nth) {
    const conv_job *j = ctx;
    int64_t b, e;
    pool_split(j->n_seq * j->n_blocks, ith, nth, &b, &e);
    for (int64_t u = b; u < e; u++) {
        int64_t s = u / j->n_blocks, c0 = u % j->n_blocks * j->block;
        int64_t c1 = c0 + j->block < j->p->conv_dim ? c0 + j->block : j->p->conv_dim;
        const float *x = j->x + s * j->x_stride;
        float *y = j->y + s * j->y_stride, *st = slot_state(j, s);
        j->kk->tile(j->p, c0, c1, 0, 1, x, j->x_stride, st, y, j->y_stride);
        normalize_rows(j->kk, j->p, c0, c1, y, j->y_stride, 0, 1);
        window_after(j->p, c0, c1, 1, x, j->x_stride, st, st);
    }
}

void conv1d_step_isa(isa_level isa, threadpool *pool, const conv1d_params *p, int64_t n_seq, const float *x,
                     int64_t x_stride, float *y, int64_t y_stride, float *state, const int64_t *slot) {
    check_params(p);
    int64_t block = block_channels(p);
    conv_job j = {kernels_for(isa), p, n_seq, 1, block, (p->conv_dim + block - 1) / block, 0,
                  x, x_stride, y, y_stride, state, slot, NULL};
    int64_t units = n_seq * j.n_blocks;
    pool_run(pool, step_task, &j, threads_for(pool, units, (double)block * p->K));
}

/* A unit is a tile of PREFILL_TILE tokens over every channel, walked row by row, so
 * that input and output rows stream through memory in order. Only tile 0 reads the
 * old state (a tile is at least K-1 tokens long), so its unit also advances the
 * state afterwards. */
#define PREFILL_TILE 32

static void prefill_task(void *ctx, int ith, int nth) {
    const conv_job *j = ctx;
    const int64_t C = j->p->conv_dim;
    int64_t n_tiles = (j->T + j->tile - 1) / j->tile, b, e;
    pool_split(n_tiles, ith, nth, &b, &e);
    for (int64_t ti = b; ti < e; ti++) {
        int64_t t0 = ti * j->tile, t1 = t0 + j->tile < j->T ? t0 + j->tile : j->T;
        for (int64_t t = t0; t < t1; t++) {
            j->kk->tile(j->p, 0, C, t, t + 1, j->x, j->x_stride, j->state, j->y, j->y_stride);
            normalize_rows(j->kk, j->p, 0, C, j->y, j->y_stride, t, t + 1);
        }
        if (ti == 0) window_after(j->p, 0, C, j->T, j->x, j->x_stride, j->state, j->state);
    }
}

void conv1d_prefill_isa(isa_level isa, threadpool *pool, const conv1d_params *p, int64_t T, const float *x,
                        int64_t x_stride, float *y, int64_t y_stride, float *state) {
    check_params(p);
    if (T <= 0) return;
    conv_job j = {kernels_for(isa), p, 1, T, p->conv_dim, 1, PREFILL_TILE, x, x_stride, y, y_stride, state, NULL, NULL};
    int64_t units = (T + PREFILL_TILE - 1) / PREFILL_TILE;
    pool_run(pool, prefill_task, &j, threads_for(pool, units, (double)p->conv_dim * PREFILL_TILE * p->K));
}

/* Scan and verify: a unit is (sequence, channel block) over all T tokens. */
static void scan_task(void *ctx, int ith, int nth) {
    const conv_job *j = ctx;
    int64_t b, e;
    pool_split(j->n_seq * j->n_blocks, ith, nth, &b, &e);
    for (int64_t u = b; u < e; u++) {
        int64_t s = u / j->n_blocks, c0 = u % j->n_blocks * j->block;
        int64_t c1 = c0 + j->block < j->p->conv_dim ? c0 + j->block : j->p->conv_dim;
        const float *x = j->x + s * j->T * j->x_stride;
        float *y = j->y + s * j->T * j->y_stride, *st = slot_state(j, s);
        j->kk->scan(j->p, c0, c1, j->T, x, j->x_stride, st, y, j->y_stride);
        normalize_rows(j->kk, j->p, c0, c1, y, j->y_stride, 0, j->T);
        if (j->snap) /* verify: the live window is only read */
            for (int64_t t = 0; t < j->T; t++)
                window_after(j->p, c0, c1, t + 1, x, j->x_stride, st, j->snap[s * j->T + t]);
        else
            window_after(j->p, c0, c1, j->T, x, j->x_stride, st, st);
    }
}

void conv1d_scan_isa(isa_level isa, threadpool *pool, const conv1d_params *p, int64_t T, const float *x,
                     int64_t x_stride, float *y, int64_t y_stride, float *state) {
    check_params(p);
    if (T <= 0) return;
    int64_t block = block_channels(p);
    conv_job j = {kernels_for(isa), p, 1, T, block, (p->conv_dim + block - 1) / block, 0,
                  x, x_stride, y, y_stride, state, NULL, NULL};
    pool_run(pool, scan_task, &j, threads_for(pool, j.n_blocks, (double)block * T * p->K));
}

void conv1d_verify_isa(isa_level isa, threadpool *pool, const conv1d_params *p, int64_t n_seq, int64_t T,
                       const float *x, int64_t x_stride, float *y, int64_t y_stride, const float *state,
                       const int64_t *slot, float *const *snap) {
    check_params(p);
    if (T <= 0) return;
    int64_t block = block_channels(p);
    conv_job j = {kernels_for(isa), p, n_seq, T, block, (p->conv_dim + block - 1) / block, 0,
                  x, x_stride, y, y_stride, (float *)state, slot, snap}; /* only read: see scan_task */
    pool_run(pool, scan_task, &j, threads_for(pool, n_seq * j.n_blocks, (double)block * T * p->K));
}

/* ==== Dispatch ==== */

void conv1d_step(threadpool *pool, const conv1d_params *p, int64_t n_seq, const float *x, int64_t x_stride,
                 float *y, int64_t y_stride, float *state, const int64_t *slot) {
    conv1d_step_isa(isa_active(), pool, p, n_seq, x, x_stride, y, y_stride, state, slot);
}

void conv1d_scan(threadpool *pool, const conv1d_params *p, int64_t T, const float *x, int64_t x_stride, float *y,
                 int64_t y_stride, float *state) {
    conv1d_scan_isa(isa_active(), pool, p, T, x, x_stride, y, y_stride, state);
}

void conv1d_prefill(threadpool *pool, const conv1d_params *p, int64_t T, const float *x, int64_t x_stride,
                    float *y, int64_t y_stride, float *state) {
    conv1d_prefill_isa(isa_active(), pool, p, T, x, x_stride, y, y_stride, state);
}

void conv1d_verify(threadpool *pool, const conv1d_params *p, int64_t n_seq, int64_t T, const float *x,
                   int64_t x_stride, float *y, int64_t y_stride, const float *state, const int64_t *slot,
                   float *const *snap) {
    conv1d_verify_isa(isa_active(), pool, p, n_seq, T, x, x_stride, y, y_stride, state, slot, snap);
}
