/*
 * ck_gdn_tiles.cu — a prefill's gated delta rule in tiles of rows (ck_gdn_chunked).
 * Oracle: gdn_scan_ref (through tests/cuda's gdn cases).
 *
 * Each run's rows go in tiles of CK_GDN_TILE (32) from its first row, its last tile
 * shorter. With, within a tile, G_t = g_0 + ... + g_t, Gamma[t][s] = exp(G_t - G_s), the
 * scaled queries qs = scale q, and S0 the state (d_k x d_v) entering the tile, the rows'
 * corrections U (what row t adds to the state is k_t U_t^T) solve
 *   (I + A) U = diag(beta) (V - e^G (K S0)),   A[t][s] = beta_t Gamma[t][s] (k_t . k_s), s < t
 * and then
 *   O = e^G (Qs S0) + P U,                      P[t][s] = Gamma[t][s] (qs_t . k_s), s <= t
 *   S after row r = e^{G_r} S0 + sum_{t <= r} e^{G_r - G_t} k_t U_t^T
 * Two kernels:
 *   gdn_tile_prep_kernel, every (tile, value head) at once: T = (I + A)^-1 diag(beta), P
 *       and G into the work buffer; all that needs only the tile's keys, queries, gates;
 *   gdn_tile_scan_kernel, a run's tiles in order, one block per (run, value head, 16
 *       columns of the state): U = T (V - e^G (K S0)), O, the new state, and the state
 *       after a prefix-cache checkpoint's row (the same sum, cut at that row).
 * So what is sequential (the second kernel) is products of the tile with the state, about
 * 3 d_k d_v multiply-adds a row, four barriers a tile; the forward substitution and the
 * pairs' scores, which made a chunk a chain of dependent steps, run beside each other for
 * all tiles in the first. The second has two forms: on the CUDA cores (gdn_tile_scan_kernel)
 * and on the tensor cores (gdn_tile_scan_mma_kernel: TF32 products in three parts, about
 * f32's precision; d_k a multiple of 16).
 */
#include "cuda/ck_device.h"
#include <math.h>
#include <stdint.h>

#include "cuda/ck.h"
#include "cuda/ck_mma.h"
#include "cuda/ck_rows.h"

namespace {

#define TILE CK_GDN_TILE
/* rows of T and P in shared memory: 4 floats longer, as CHUNK_STRIDE */
#define TILE_STRIDE CHUNK_STRIDE(TILE)
/* the scan's row groups: thread (x, y) takes rows y, y + 8, ... of a tile (TILE / 8 of them) */
#define SCAN_Y 8
#define ROWS_PER (TILE / SCAN_Y)
/* the scan's columns a block */
#define SCAN_COLS 16
#define PREP_THREADS 128

/* The tiles of a run of n rows */
__device__ __forceinline__ int64_t tiles_of(int32_t n) { return (n + TILE - 1) / TILE; }

/* The rows of the run's tile that starts at its row t0: TILE, fewer for the last */
__device__ __forceinline__ int32_t tile_rows(const ck_run &run, int32_t t0) {
    return run.n - t0 < TILE ? run.n - t0 : TILE;
}

/* The tile's keys and scaled queries (key head kh of the rows from row0, nc of them)
 * into K and Q, rows ks floats apart, zero past the tile's rows; threads tid of nthr */
__device__ __forceinline__ void tile_keys_queries(float *K, float *Q, int64_t ks, const float *qkv, int64_t qkv_s,
                                                  int64_t row0, int32_t nc, int64_t kh, int64_t d_k, int64_t key_dim,
                                                  float scale, int tid, int nthr) {
    for (int64_t e = tid; e < TILE * d_k; e += nthr) {
        const int64_t t = e / d_k, i = e % d_k;
        const float *qr = qkv + (row0 + t) * qkv_s + kh * d_k;
        K[t * ks + i] = t < nc ? qr[key_dim + i] : 0.0f;
        Q[t * ks + i] = t < nc ? scale * qr[i] : 0.0f;
    }
}

/* Where a scan's tiles read their keys, queries and values */
struct tile_src {
    const float *qkv;
    int64_t qkv_s, kh, h, d_k, d_v, key_dim;
    float scale;
};

/* A scan's inputs for the tile of nc rows from row0: the keys and scaled queries (K, Q:
 * rows ks apart), T and P (rows TILE_STRIDE apart) and G from the tile's work wt, and the
 * values of columns j0.. (X: xw columns, rows xs apart, zero past the tile's rows and d_v) */
__device__ __forceinline__ void tile_inputs(const tile_src &src, const float *wt, int64_t row0, int32_t nc, int64_t j0,
                                            float *K, float *Q, int64_t ks, float *T, float *P, float *X, int xw,
                                            int64_t xs, float *G, int tid, int nthr) {
    tile_keys_queries(K, Q, ks, src.qkv, src.qkv_s, row0, nc, src.kh, src.d_k, src.key_dim, src.scale, tid, nthr);
    for (int e = tid; e < TILE * TILE; e += nthr) {
        const int t = e / TILE, s = e % TILE;
        T[t * TILE_STRIDE + s] = wt[e], P[t * TILE_STRIDE + s] = wt[TILE * TILE + e];
    }
    const float *v = src.qkv + 2 * src.key_dim + src.h * src.d_v + j0;
    for (int e = tid; e < TILE * xw; e += nthr) {
        const int t = e / xw, c = e % xw;
        X[t * xs + c] = t < nc && j0 + c < src.d_v ? v[(row0 + t) * src.qkv_s + c] : 0.0f;
    }
    for (int t = tid; t < TILE; t += nthr) G[t] = wt[2 * TILE * TILE + t]; /* a block of 3 columns has 24 threads */
}

/* The tiles of runs [0, r): where run r's tiles start in the work buffer */
__device__ __forceinline__ int64_t tiles_before(const ck_run *runs, int64_t r) {
    int64_t first = 0;
    for (int64_t k = 0; k < r; k++) first += tiles_of(runs[k].n);
    return first;
}

/* One block per (tile, value head); blocks past the last tile return. */
__global__ void __launch_bounds__(PREP_THREADS)
    gdn_tile_prep_kernel(const ck_run *runs, int64_t n_runs, const float *qkv, int64_t qkv_s, const float *g,
                         const float *beta, float *work, int64_t n_k, int64_t n_v, int64_t d_k, int head_map,
                         float scale) {
    ck_pdl_entry();
    CK_DYNAMIC_SHARED(float, sm);
    const int tid = threadIdx.x, nthr = blockDim.x;
    const int64_t ks = CHUNK_STRIDE(d_k);
    float *K = sm;           /* (TILE, ks) the tile's keys, zero past its rows */
    float *Q = K + TILE * ks; /* (TILE, ks) its scaled queries */
    float *A = Q + TILE * ks; /* (TILE, TILE) */
    float *gr = A + TILE * TILE, *G = gr + TILE, *bt = G + TILE; /* (TILE) each */
    int64_t r = 0, first = 0;
    for (; r < n_runs; r++) {
        const int64_t nt = tiles_of(runs[r].n);
        if ((int64_t)blockIdx.x < first + nt) break;
        first += nt;
    }
    if (r == n_runs) return;
    const ck_run run = runs[r];
    const int64_t h = blockIdx.y, kh = ck_key_head(h, n_k, n_v, head_map), key_dim = n_k * d_k;
    const int32_t t0 = (int32_t)(blockIdx.x - first) * TILE, nc = tile_rows(run, t0);
    const int64_t row0 = run.row0 + t0;
    tile_keys_queries(K, Q, ks, qkv, qkv_s, row0, nc, kh, d_k, key_dim, scale, tid, nthr);
    if (tid < TILE) {
        gr[tid] = tid < nc ? g[(row0 + tid) * n_v + h] : 0.0f;
        bt[tid] = tid < nc ? beta[(row0 + tid) * n_v + h] : 0.0f;
    }
    __syncthreads();
    if (tid < TILE) { /* G_t summed from g_0 up, as a running sum would */
        float s = 0.0f;
        for (int u = 0; u <= tid; u++) s += gr[u];
        G[tid] = s;
    }
    __syncthreads();
    float *Tw = work + ((int64_t)blockIdx.x * n_v + h) * CK_GDN_TILE_WORK, *Pw = Tw + TILE * TILE, *Gw = Pw + TILE * TILE;
    for (int e = tid; e < TILE * TILE; e += nthr) { /* the pairs' scores, (t, s) with s <= t */
        const int t = e / TILE, s = e % TILE;
        float a = 0.0f, p = 0.0f;
        if (s <= t) {
            float kk = 0.0f, qk = 0.0f;
            for (int64_t i = 0; i < d_k; i += 4) {
                const float4 k_s = row4(K + s * ks + i);
                kk = dot4(row4(K + t * ks + i), k_s, kk), qk = dot4(row4(Q + t * ks + i), k_s, qk);
            }
            const float gam = expf(G[t] - G[s]);
            a = s < t ? bt[t] * gam * kk : 0.0f;
            p = gam * qk;
        }
        A[e] = a;
        Pw[e] = p;
    }
    if (tid < TILE) Gw[tid] = G[tid];
    __syncthreads();
    if (tid < 32) { /* lane j: column j of T, (I + A) y = e_j by forward substitution, in registers */
        const int j = tid;
        float y[TILE];
#pragma unroll
        for (int t = 0; t < TILE; t++) {
            float v = t == j ? 1.0f : 0.0f;
#pragma unroll
            for (int s = 0; s < t; s++) v = fmaf(-A[t * TILE + s], y[s], v);
            y[t] = v;
        }
        const float bj = bt[j];
#pragma unroll
        for (int t = 0; t < TILE; t++) Tw[t * TILE + j] = y[t] * bj;
    }
}

/* Column x's state after row r of the tile, from the state entering it (St_x: the column,
 * d_k floats) and the tile's corrections (U, rows of cols): rows i = 4 y, 4 y + 1, ...,
 * 4 at a time, each passed to put(i, float4). */
template <typename F>
__device__ __forceinline__ void tile_state(const float *St_x, const float *K, int64_t ks, const float *U, int cols,
                                           int x, const float *G, int r, int y, int64_t d_k, F put) {
    float uw[TILE];
    const float Gr = G[r];
#pragma unroll
    for (int t = 0; t < TILE; t++) uw[t] = t <= r ? expf(Gr - G[t]) * U[t * cols + x] : 0.0f;
    const float el = expf(Gr);
    for (int64_t i = 4 * y; i < d_k; i += 4 * SCAN_Y) {
        const float4 s0 = row4(St_x + i);
        float4 s = make_float4(el * s0.x, el * s0.y, el * s0.z, el * s0.w);
#pragma unroll
        for (int t = 0; t < TILE; t++) s = axpy4(row4(K + t * ks + i), uw[t], s);
        put(i, s);
    }
}

/* Rows i..i+3 of column j of a head's state (rows of ld floats) */
__device__ __forceinline__ void put_col4(float *head, int64_t ld, int64_t i, int64_t j, float4 s) {
    head[i * ld + j] = s.x, head[(i + 1) * ld + j] = s.y, head[(i + 2) * ld + j] = s.z, head[(i + 3) * ld + j] = s.w;
}

/* One block per (run, value head, blockDim.x columns of the state); thread (x, y) owns
 * column x of the block's slice St (kept transposed: a column's d_k floats a row) for
 * rows 4 y.. 4 y + 3, 4 y + 32, ..., and computes rows y, y + 8, ... of each tile's
 * corrections and outputs. */
__global__ void __launch_bounds__(SCAN_COLS * SCAN_Y)
    gdn_tile_scan_kernel(const ck_run *runs, const int32_t *ckpts, const float *qkv, int64_t qkv_s,
                         const float *work, float *o, float *state, int64_t n_k, int64_t n_v, int64_t d_k, int64_t d_v,
                         int head_map, float scale) {
    ck_pdl_entry();
    CK_DYNAMIC_SHARED(float, sm);
    const int cols = blockDim.x, x = threadIdx.x, y = threadIdx.y;
    const int tid = y * cols + x, nthr = cols * SCAN_Y;
    const int64_t ks = CHUNK_STRIDE(d_k);
    float *St = sm;                  /* (cols, ks) the block's columns of the state */
    float *K = St + cols * ks;       /* (TILE, ks) the tile's keys */
    float *Q = K + TILE * ks;        /* (TILE, ks) its scaled queries */
    float *X = Q + TILE * ks;        /* (TILE, cols) V, then V - e^G (K S0) */
    float *U = X + TILE * cols;      /* (TILE, cols) the corrections */
    float *T = U + TILE * cols;      /* (TILE, TILE_STRIDE) */
    float *P = T + TILE * TILE_STRIDE; /* (TILE, TILE_STRIDE) */
    float *G = P + TILE * TILE_STRIDE; /* (TILE) */
    const ck_run run = runs[blockIdx.x];
    const int64_t first = tiles_before(runs, blockIdx.x);
    const int64_t h = blockIdx.y, kh = ck_key_head(h, n_k, n_v, head_map), key_dim = n_k * d_k;
    const tile_src src = {qkv, qkv_s, kh, h, d_k, d_v, key_dim, scale};
    const int64_t j0 = (int64_t)blockIdx.z * cols, j = j0 + x;
    const bool live = j < d_v;
    const int64_t slot_floats = n_v * d_k * d_v;
    float *St_x = St + x * ks;
    {
        const float *head = state + (int64_t)run.slot_in * slot_floats + h * d_k * d_v;
        for (int64_t i = 4 * y; i < d_k; i += 4 * SCAN_Y)
            for (int c = 0; c < 4; c++) St_x[i + c] = live ? head[(i + c) * d_v + j] : 0.0f;
    }
    int32_t ck = run.ck;
    const int32_t ck_end = run.ck + run.n_ck;
    const int64_t nt = tiles_of(run.n);
    for (int64_t tile = 0; tile < nt; tile++) {
        const int32_t t0 = (int32_t)tile * TILE, nc = tile_rows(run, t0);
        const int64_t row0 = run.row0 + t0;
        __syncthreads(); /* the last tile's K, U, T and P read by all; St written */
        tile_inputs(src, work + ((first + tile) * n_v + h) * CK_GDN_TILE_WORK, row0, nc, j0, K, Q, ks, T, P, X, cols,
                    cols, G, tid, nthr);
        __syncthreads();
        /* K S0 and Qs S0 for this thread's rows of column x */
        float kS[ROWS_PER], qS[ROWS_PER];
#pragma unroll
        for (int m = 0; m < ROWS_PER; m++) kS[m] = qS[m] = 0.0f;
        for (int64_t i = 0; i < d_k; i += 4) {
            const float4 s4 = row4(St_x + i);
#pragma unroll
            for (int m = 0; m < ROWS_PER; m++) {
                const int64_t t = y + SCAN_Y * m;
                kS[m] = dot4(row4(K + t * ks + i), s4, kS[m]), qS[m] = dot4(row4(Q + t * ks + i), s4, qS[m]);
            }
        }
#pragma unroll
        for (int m = 0; m < ROWS_PER; m++) { /* rows past the tile's: zero keys and values, X stays 0 */
            const int t = y + SCAN_Y * m;
            X[t * cols + x] -= expf(G[t]) * kS[m];
        }
        __syncthreads();
        float acc[ROWS_PER];
#pragma unroll
        for (int m = 0; m < ROWS_PER; m++) acc[m] = 0.0f;
        for (int s = 0; s < TILE; s += 4) { /* U = T X (T is zero above its diagonal) */
            const float4 x4 = col4(X, cols, s, x);
#pragma unroll
            for (int m = 0; m < ROWS_PER; m++) acc[m] = dot4(row4(T + (y + SCAN_Y * m) * TILE_STRIDE + s), x4, acc[m]);
        }
#pragma unroll
        for (int m = 0; m < ROWS_PER; m++) U[(y + SCAN_Y * m) * cols + x] = acc[m];
        __syncthreads();
#pragma unroll
        for (int m = 0; m < ROWS_PER; m++) acc[m] = expf(G[y + SCAN_Y * m]) * qS[m];
        for (int s = 0; s < TILE; s += 4) { /* O = e^G Qs S0 + P U (P is zero above its diagonal) */
            const float4 u4 = col4(U, cols, s, x);
#pragma unroll
            for (int m = 0; m < ROWS_PER; m++) acc[m] = dot4(row4(P + (y + SCAN_Y * m) * TILE_STRIDE + s), u4, acc[m]);
        }
#pragma unroll
        for (int m = 0; m < ROWS_PER; m++) {
            const int t = y + SCAN_Y * m;
            if (live && t < nc) o[(row0 + t) * n_v * d_v + h * d_v + j] = acc[m];
        }
        if (live) /* the tile's prefix-cache checkpoints: the state after their rows */
            for (; ck < ck_end && ckpts[2 * ck] < t0 + nc; ck++) {
                float *head = state + (int64_t)ckpts[2 * ck + 1] * slot_floats + h * d_k * d_v;
                tile_state(St_x, K, ks, U, cols, x, G, ckpts[2 * ck] - t0, y, d_k,
                           [&](int64_t i, float4 s) { put_col4(head, d_v, i, j, s); });
            }
        /* the state after the tile: each thread rewrites only its own rows of St_x */
        tile_state(St_x, K, ks, U, cols, x, G, nc - 1, y, d_k, [&](int64_t i, float4 s) { *(float4 *)(St_x + i) = s; });
    }
    if (live && run.slot_out >= 0) {
        float *head = state + (int64_t)run.slot_out * slot_floats + h * d_k * d_v;
        for (int64_t i = 4 * y; i < d_k; i += 4 * SCAN_Y) put_col4(head, d_v, i, j, row4(St_x + i));
    }
}

/* The tensor cores' scan's columns of the state after row r of the tile, e^{G_r} S0 + K^T W
 * with W[t] = e^{G_r - G_t} U[t] for t <= r (0 after), each element passed to put(i, c,
 * value): W made by the block, then ck_scan_state's 16 x 8 tiles, a warp's in turn */
template <typename F>
__device__ __forceinline__ void tile_state_mma(const float *S, const float *K, int64_t ks, const float *U, float *W,
                                               const float *G, int r, int64_t d_k, int tid, F put) {
    __syncthreads(); /* U written; a W before read by all */
    for (int e = tid; e < TILE * CK_SCAN_COLS; e += 32 * CK_SCAN_WARPS) {
        const int t = e / CK_SCAN_COLS, c = e % CK_SCAN_COLS;
        W[t * CK_SCAN_SS + c] = t <= r ? expf(G[r] - G[t]) * U[t * CK_SCAN_SS + c] : 0.0f;
    }
    __syncthreads();
    ck_scan_state(S, d_k, expf(G[r]), K, ks, W, TILE / 8, tid >> 5, (tid & 31) >> 2, tid & 3, put);
}

/* gdn_tile_scan_kernel's work on the tensor cores: one block of CK_SCAN_WARPS warps per (run,
 * value head, CK_SCAN_COLS columns of the state); warp w owns the (16 x 8) tile at rows
 * 16 (w / 2), columns 8 (w % 2) of each tile's K S0, Qs S0, U and O, each a TF32 m16n8k8
 * product in three parts (ck_tile_product). d_k: a multiple of 16. */
__global__ void __launch_bounds__(32 * CK_SCAN_WARPS)
    gdn_tile_scan_mma_kernel(const ck_run *runs, const int32_t *ckpts, const float *qkv, int64_t qkv_s,
                             const float *work, float *o, float *state, int64_t n_k, int64_t n_v, int64_t d_k,
                             int64_t d_v, int head_map, float scale) {
    ck_pdl_entry();
    CK_DYNAMIC_SHARED(float, sm);
    const int tid = threadIdx.x, nthr = 32 * CK_SCAN_WARPS, w = tid >> 5, g = (tid & 31) >> 2, t = tid & 3;
    const int64_t ks = CHUNK_STRIDE(d_k);
    float *S = sm;                     /* (d_k, CK_SCAN_SS) the block's columns of the state */
    float *K = S + d_k * CK_SCAN_SS;   /* (TILE, ks) the tile's keys */
    float *Q = K + TILE * ks;          /* (TILE, ks) its scaled queries */
    float *X = Q + TILE * ks;          /* (TILE, CK_SCAN_SS) V, then V - e^G (K S0) */
    float *U = X + TILE * CK_SCAN_SS;  /* (TILE, CK_SCAN_SS) the corrections */
    float *W = U + TILE * CK_SCAN_SS;  /* (TILE, CK_SCAN_SS) the corrections weighted for a state */
    float *T = W + TILE * CK_SCAN_SS;  /* (TILE, TILE_STRIDE) */
    float *P = T + TILE * TILE_STRIDE; /* (TILE, TILE_STRIDE) */
    float *G = P + TILE * TILE_STRIDE; /* (TILE) */
    const ck_run run = runs[blockIdx.x];
    const int64_t first = tiles_before(runs, blockIdx.x);
    const int64_t h = blockIdx.y, kh = ck_key_head(h, n_k, n_v, head_map), key_dim = n_k * d_k;
    const tile_src src = {qkv, qkv_s, kh, h, d_k, d_v, key_dim, scale};
    const int64_t j0 = (int64_t)blockIdx.z * CK_SCAN_COLS, slot_floats = n_v * d_k * d_v;
    const int cols = d_v - j0 < CK_SCAN_COLS ? (int)(d_v - j0) : CK_SCAN_COLS; /* the live ones */
    /* the block's columns of slot k's head */
    const auto slice_of = [&](int64_t k) { return state + k * slot_floats + h * d_k * d_v + j0; };
    slice_in(S, CK_SCAN_SS, slice_of(run.slot_in), d_v, d_k, CK_SCAN_COLS, cols, tid, nthr);
    const int mr = 16 * (w >> 1), mc = 8 * (w & 1); /* this warp's tile of the tile's products */
    int32_t ck = run.ck;
    const int32_t ck_end = run.ck + run.n_ck;
    const int64_t nt = tiles_of(run.n);
    for (int64_t tile = 0; tile < nt; tile++) {
        const int32_t t0 = (int32_t)tile * TILE, nc = tile_rows(run, t0);
        const int64_t row0 = run.row0 + t0;
        __syncthreads(); /* the last tile's K, X, U, T and P read by all; S written */
        tile_inputs(src, work + ((first + tile) * n_v + h) * CK_GDN_TILE_WORK, row0, nc, j0, K, Q, ks, T, P, X,
                    CK_SCAN_COLS, CK_SCAN_SS, G, tid, nthr);
        __syncthreads();
        float kS[4] = {0.0f, 0.0f, 0.0f, 0.0f}, qS[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        {
            float kE[4] = {0.0f, 0.0f, 0.0f, 0.0f}, qE[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int64_t kk = 0; kk < d_k / 8; kk++) { /* K S0 and Qs S0: one B fragment of S0 for both */
                const ck_tf32_b b = ck_load_b(S + 8 * kk * CK_SCAN_SS + mc, CK_SCAN_SS, 1, g, t);
                ck_mma3(kS, kE, ck_load_a(K + mr * ks + 8 * kk, ks, 1, g, t), b);
                ck_mma3(qS, qE, ck_load_a(Q + mr * ks + 8 * kk, ks, 1, g, t), b);
            }
#pragma unroll
            for (int i = 0; i < 4; i++) kS[i] += kE[i], qS[i] += qE[i];
        }
#pragma unroll
        for (int i = 0; i < 4; i++) /* rows past the tile's: zero keys and values, X stays 0 */
            ck_frag_at(X, CK_SCAN_SS, mr, mc, i, g, t) -= expf(G[ck_frag_row(mr, i, g)]) * kS[i];
        __syncthreads();
        float u[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        ck_tile_product(u, T, TILE_STRIDE, 1, mr, X, CK_SCAN_SS, 1, mc, TILE / 8, g, t); /* U = T X */
#pragma unroll
        for (int i = 0; i < 4; i++) ck_frag_at(U, CK_SCAN_SS, mr, mc, i, g, t) = u[i];
        __syncthreads();
        float out[4]; /* O = e^G Qs S0 + P U */
#pragma unroll
        for (int i = 0; i < 4; i++) out[i] = expf(G[ck_frag_row(mr, i, g)]) * qS[i];
        ck_tile_product(out, P, TILE_STRIDE, 1, mr, U, CK_SCAN_SS, 1, mc, TILE / 8, g, t);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int r = ck_frag_row(mr, i, g), c = ck_frag_col(mc, i, t);
            if (r < nc && c < cols) o[(row0 + r) * n_v * d_v + h * d_v + j0 + c] = out[i];
        }
        for (; ck < ck_end && ckpts[2 * ck] < t0 + nc; ck++) { /* the tile's prefix-cache checkpoints */
            float *head = slice_of(ckpts[2 * ck + 1]);
            tile_state_mma(S, K, ks, U, W, G, ckpts[2 * ck] - t0, d_k, tid, [&](int64_t i, int c, float v) {
                if (c < cols) head[i * d_v + c] = v;
            });
        }
        /* the state after the tile: each lane rewrites only the elements it read */
        tile_state_mma(S, K, ks, U, W, G, nc - 1, d_k, tid,
                       [&](int64_t i, int c, float v) { S[i * CK_SCAN_SS + c] = v; });
    }
    if (run.slot_out >= 0) {
        __syncthreads();
        slice_out(S, CK_SCAN_SS, slice_of(run.slot_out), d_v, d_k, CK_SCAN_COLS, cols, tid, nthr);
    }
}

} // namespace

extern "C" int64_t ck_gdn_tiles_max(int64_t n, int64_t n_runs) { return (n + n_runs * (TILE - 1)) / TILE; }

extern "C" int ck_gdn_chunked(const ck_run *runs, int64_t n_runs, int64_t n, const int32_t *ckpts, const float *qkv,
                              int64_t qkv_s, const float *g, const float *beta, float *o, float *state, int64_t n_k,
                              int64_t n_v, int64_t d_k, int64_t d_v, int head_map, float scale, float *work,
                              int64_t work_tiles, int tensor_cores, void *stream) {
    if (n_runs <= 0) return 1;
    const int64_t tiles = ck_gdn_tiles_max(n, n_runs);
    if (d_k % 4 || tiles > work_tiles || !work) return 0;
    const int cols = d_v < SCAN_COLS ? (int)d_v : SCAN_COLS;
    const int64_t ks = CHUNK_STRIDE(d_k);
    const size_t prep_shm = (size_t)(2 * TILE * ks + TILE * TILE + 3 * TILE) * sizeof(float);
    const size_t scan_shm =
        (size_t)(cols * ks + 2 * TILE * ks + 2 * TILE * cols + 2 * TILE * TILE_STRIDE + TILE) * sizeof(float);
    const size_t mma_shm =
        (size_t)(d_k * CK_SCAN_SS + 2 * TILE * ks + 3 * TILE * CK_SCAN_SS + 2 * TILE * TILE_STRIDE + TILE) *
        sizeof(float);
    const bool mma = tensor_cores && d_k % 16 == 0 && ck_allow_shared((const void *)gdn_tile_scan_mma_kernel, mma_shm);
    if (!ck_allow_shared((const void *)gdn_tile_prep_kernel, prep_shm) ||
        (!mma && !ck_allow_shared((const void *)gdn_tile_scan_kernel, scan_shm)))
        return 0;
    cudaStream_t st = (cudaStream_t)stream;
    if (tiles > 0)
        CK_LAUNCH(dim3((unsigned)tiles, (unsigned)n_v), PREP_THREADS, prep_shm, st, gdn_tile_prep_kernel)
        (runs, n_runs, qkv, qkv_s, g, beta, work, n_k, n_v, d_k, head_map, scale);
    if (mma) {
        const dim3 grid((unsigned)n_runs, (unsigned)n_v, blocks_for(d_v, CK_SCAN_COLS));
        CK_LAUNCH(grid, 32 * CK_SCAN_WARPS, mma_shm, st, gdn_tile_scan_mma_kernel)
        (runs, ckpts, qkv, qkv_s, work, o, state, n_k, n_v, d_k, d_v, head_map, scale);
        return 1;
    }
    const dim3 grid((unsigned)n_runs, (unsigned)n_v, (unsigned)((d_v + cols - 1) / cols));
    CK_LAUNCH(grid, dim3((unsigned)cols, SCAN_Y), scan_shm, st, gdn_tile_scan_kernel)
    (runs, ckpts, qkv, qkv_s, work, o, state, n_k, n_v, d_k, d_v, head_map, scale);
    return 1;
}
