/*
 * ck_mixers.cu — the sequence-aware parts of a forward step on the GPU: rotary
 * embeddings and the paged KV cache, causal attention, the causal conv1d and its
 * windows, and the gated delta rule. Oracles: ops/rope.c, ops_attention_ref,
 * conv1d_scan_ref, gdn_scan_ref.
 *
 * Every kernel takes the step's rows of many sequences at once: a row finds its
 * position (row_pos) and its run (row_run: the sequence's rows, slot and block table).
 */
#include "cuda/ck_device.h"
#include <math.h>
#include <stdint.h>

#include "cuda/ck.h"
#include "cuda/ck_act.h"
#include "cuda/ck_block.h"
#include "cuda/ck_kv.h"
#include "cuda/ck_mma.h"
#include "cuda/ck_q8.h"
#include "cuda/ck_rows.h"

namespace {

__device__ __forceinline__ float kv_load(const void *slab, int f16, int64_t i) {
    return f16 ? __half2float(((const __half *)slab)[i]) : ((const float *)slab)[i];
}

/* ==== RoPE and the KV cache ==== */

/* the longest rotary half rope_store_kernel takes: the backend refuses heads over 512
 * wide at load (cuda_engine.c), and n_rot is at most the head's width; its heads are at
 * most twice that */
#define ROPE_MAX_HALF 256

/* One block per row; warp w takes heads w, w + warps, ... of the row's n_head query heads
 * and then n_kv key heads, each through a buffer of its own: the head (from qg for a gated
 * q, whose gate half it copies out), its RMSNorm, its rotation; then the head goes back to
 * q or k and a key head into the cache. Then the row's values go to the cache. */
#define ROPE_THREADS 128
#define ROPE_MAX_HD (2 * ROPE_MAX_HALF)
__global__ void __launch_bounds__(ROPE_THREADS)
    rope_store_kernel(ck_step s, ck_rope_pre pre, float *q, float *k, const float *v, int64_t n_head, int64_t n_kv,
                      int64_t hd, int64_t dv, int64_t n_rot, float rope_base, int neox, void *kc, void *vc,
                      int kv_f16) { /* bit 0: keys in f16, bit 1: values */
    ck_pdl_entry();
    __shared__ float cs[ROPE_MAX_HALF], sn[ROPE_MAX_HALF];
    __shared__ float head_buf[ROPE_THREADS / 32][ROPE_MAX_HD];
    const int64_t r = blockIdx.x, pos = s.row_pos[r], half = n_rot / 2;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    /* the row's angles once for all heads; as ops_rope_table: in double, cos and sin
     * rounded once */
    for (int64_t p = threadIdx.x; p < half; p += blockDim.x) {
        const double angle = (double)pos * pow((double)rope_base, -2.0 * (double)p / (double)n_rot);
        cs[p] = (float)cos(angle), sn[p] = (float)sin(angle);
    }
    __syncthreads();
    const ck_run run = s.runs[s.row_run[r]];
    const int64_t at = kv_row(s.blocks + run.bt, pos);
    const int64_t Q = n_head * hd, K = n_kv * hd, V = n_kv * dv;
    float *buf = head_buf[w];
    for (int64_t h = w; h < n_head + n_kv; h += n_warps) {
        const bool is_q = h < n_head;
        float *dst = is_q ? q + r * Q + h * hd : k + r * K + (h - n_head) * hd;
        const float *src = is_q && pre.qg ? pre.qg + r * 2 * Q + h * 2 * hd : dst;
        const float *nw = is_q ? pre.q_norm : pre.k_norm;
        float ss = 0.0f;
        for (int64_t i = lane; i < hd; i += 32) {
            const float x = src[i];
            buf[i] = x, ss += x * x;
            if (is_q && pre.qg) pre.gate[r * Q + h * hd + i] = src[hd + i];
        }
        if (nw) { /* as norm_row: x * scale * w */
            ss = warp_sum(ss);
            const float scale = rsqrtf(ss / (float)hd + pre.eps);
            for (int64_t i = lane; i < hd; i += 32) buf[i] = buf[i] * scale * nw[i];
        }
        __syncwarp();
        for (int64_t p = lane; p < half; p += 32) {
            float *a = neox ? &buf[p] : &buf[2 * p], *b = neox ? &buf[p + half] : &buf[2 * p + 1];
            const float x0 = *a, x1 = *b;
            *a = x0 * cs[p] - x1 * sn[p];
            *b = x0 * sn[p] + x1 * cs[p];
        }
        __syncwarp();
        for (int64_t i = lane; i < hd; i += 32) {
            const float x = buf[i];
            dst[i] = x;
            if (is_q) continue;
            const int64_t c = at * K + (h - n_head) * hd + i;
            if (kv_f16 & 1) ((__half *)kc)[c] = __float2half_rn(x);
            else ((float *)kc)[c] = x;
        }
        __syncwarp(); /* the buffer is read before the next head fills it */
    }
    const float *vr = v + r * V;
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
        if (kv_f16 & 2) ((__half *)vc)[at * V + i] = __float2half_rn(vr[i]);
        else ((float *)vc)[at * V + i] = vr[i];
    }
}

/* ==== Attention ==== */

#define ATT_THREADS 128
#define ATT_MAX_DV 512
/* the most ranges a head's keys of a row are split in (the blocks of ck_attention_grouped
 * take G heads, and G times as many) */
#define ATT_HEAD_SPLITS 16

/* One block per (row, head, split): keys in tiles of ATT_THREADS, one score per thread,
 * an online softmax over the tiles; thread d accumulates output elements d, d + 128, ...
 * With gridDim.y = 1 the block takes all of the row's keys 0..pos and writes the output;
 * with more, split y takes the y-th of gridDim.y even ranges of them (so that a decode
 * step of a few rows over a long context keeps many blocks busy) and writes its running
 * max, sum and unnormalized output (dv + 2 floats) to part, which attention_merge_kernel
 * folds. */
__global__ void __launch_bounds__(ATT_THREADS)
    attention_kernel(ck_step s, const float *q, const float *gate, float *out, const void *kc, const void *vc,
                     int kv_f16, int64_t n_head, int64_t n_kv, int64_t hd, int64_t dv, float scale, float *part) {
    ck_pdl_entry();
    __shared__ float qs[ATT_MAX_DV], p[ATT_THREADS], red[ATT_THREADS / 32];
    const int64_t r = blockIdx.x / n_head, h = blockIdx.x % n_head, hk = h / (n_head / n_kv);
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    const int64_t pos = s.row_pos[r], K = n_kv * hd, V = n_kv * dv;
    const int64_t n_split = gridDim.y, per = (pos + n_split) / n_split; /* ceil((pos + 1) / n_split) */
    const int64_t jb = blockIdx.y * per, je = jb + per < pos + 1 ? jb + per : pos + 1;
    const ck_run run = s.runs[s.row_run[r]];
    const int32_t *bt = s.blocks + run.bt;
    for (int64_t i = tid; i < hd; i += ATT_THREADS) qs[i] = q[(r * n_head + h) * hd + i];
    float acc[ATT_MAX_DV / ATT_THREADS];
#pragma unroll
    for (int i = 0; i < ATT_MAX_DV / ATT_THREADS; i++) acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    __syncthreads();
    for (int64_t j0 = jb; j0 < je; j0 += ATT_THREADS) {
        const int64_t j = j0 + tid;
        float sc = -INFINITY;
        if (j < je) {
            const int64_t row = kv_row(bt, j);
            const int64_t base = row * K + hk * hd;
            float d = 0.0f;
            for (int64_t i = 0; i < hd; i++) d = fmaf(qs[i], kv_load(kc, kv_f16 & 1, base + i), d);
            sc = d * scale;
        }
        /* tile max */
        float mx = sc;
        mx = warp_max(mx);
        if (lane == 0) red[wid] = mx;
        __syncthreads();
        mx = red[0];
        for (int w = 1; w < ATT_THREADS / 32; w++) mx = fmaxf(mx, red[w]);
        const float m_new = fmaxf(m, mx);
        const float pj = j < je ? expf(sc - m_new) : 0.0f;
        p[tid] = pj;
        __syncthreads(); /* red read by all before it is reused below */
        float sum = pj;
        sum = warp_sum(sum);
        if (lane == 0) red[wid] = sum;
        __syncthreads();
        float tile_sum = 0.0f;
        for (int w = 0; w < ATT_THREADS / 32; w++) tile_sum += red[w];
        const float corr = expf(m - m_new); /* 0 on the first tile (m = -inf) */
        l = l * corr + tile_sum;
        m = m_new;
        const int64_t nj = je - j0 < ATT_THREADS ? je - j0 : ATT_THREADS;
#pragma unroll
        for (int a = 0; a < ATT_MAX_DV / ATT_THREADS; a++) {
            const int64_t d = tid + a * ATT_THREADS;
            if (d >= dv) break;
            float o = acc[a] * corr;
            for (int64_t jj = 0; jj < nj; jj++) {
                const int64_t jx = j0 + jj;
                const int64_t row = kv_row(bt, jx);
                o = fmaf(p[jj], kv_load(vc, kv_f16 & 2, row * V + hk * dv + d), o);
            }
            acc[a] = o;
        }
        __syncthreads(); /* p and red are rewritten by the next tile */
    }
    if (n_split == 1) {
        float *o = out + (r * n_head + h) * dv;
        const float *gt = gate ? gate + (r * n_head + h) * dv : NULL;
#pragma unroll
        for (int a = 0; a < ATT_MAX_DV / ATT_THREADS; a++) {
            const int64_t d = tid + a * ATT_THREADS;
            if (d < dv) o[d] = gt ? acc[a] / l * sigmoid(gt[d]) : acc[a] / l;
        }
        return;
    }
    float *pp = part + ((r * n_head + h) * n_split + blockIdx.y) * (dv + 2); /* max, sum, then the output */
    if (tid == 0) pp[0] = m, pp[1] = l; /* an empty range: -inf and 0 */
#pragma unroll
    for (int a = 0; a < ATT_MAX_DV / ATT_THREADS; a++) {
        const int64_t d = tid + a * ATT_THREADS;
        if (d < dv) pp[2 + d] = acc[a];
    }
}

/* Prefill of one sequence: one block per (tile of ATT_QT consecutive rows, head). The
 * tile's queries stay in shared memory and each tile of ATT_KT keys (then of their values)
 * is loaded once for all of them, coalesced (consecutive threads, consecutive elements),
 * where attention_kernel reads a row's keys for each row. Per key tile: the scores of the
 * (row, key) pairs, the online softmax of each row (a warp per row), then thread d
 * accumulates output elements d, d + 128, ... of every row. Rows past a key's position
 * mask it; the first key tile holds key 0, which every row sees. */
#define ATT_QT 16
#define ATT_KT 16
#define ATT_TILE_DV 256

__global__ void __launch_bounds__(ATT_THREADS)
    attention_tile_kernel(ck_step s, int64_t n, const float *q, float *out, const void *kc, const void *vc, int kv_f16,
                          int64_t n_head, int64_t n_kv, int64_t hd, int64_t dv, float scale) {
    ck_pdl_entry();
    CK_DYNAMIC_SHARED(float, sm);
    /* rows of queries and keys hd + 1 floats apart: the threads of a warp read different
     * rows' element x, in different banks */
    const int64_t hs = hd + 1, kvs = hs > dv ? hs : dv;
    float *Qs = sm;                /* (ATT_QT, hs) */
    float *KV = Qs + ATT_QT * hs;  /* (ATT_KT, kvs): keys (rows hs apart), then values (dv apart) */
    float *P = KV + ATT_KT * kvs;  /* (ATT_QT, ATT_KT) scores, then weights */
    float *M = P + ATT_QT * ATT_KT, *L = M + ATT_QT, *Cr = L + ATT_QT; /* (ATT_QT) max, sum, correction */
    const int64_t r0 = (int64_t)blockIdx.x * ATT_QT, h = blockIdx.y, hk = h / (n_head / n_kv);
    const int nq = n - r0 < ATT_QT ? (int)(n - r0) : ATT_QT;
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    const int64_t K = n_kv * hd, V = n_kv * dv;
    const ck_run run = s.runs[s.row_run[r0]];
    const int32_t *bt = s.blocks + run.bt;
    const int64_t last = s.row_pos[r0 + nq - 1];
    for (int64_t e = tid; e < (int64_t)nq * hd; e += ATT_THREADS) {
        const int64_t i = e / hd, d = e % hd;
        Qs[i * hs + d] = q[((r0 + i) * n_head + h) * hd + d];
    }
    if (tid < ATT_QT) M[tid] = -INFINITY, L[tid] = 0.0f;
    float acc[ATT_QT][ATT_TILE_DV / ATT_THREADS];
#pragma unroll
    for (int i = 0; i < ATT_QT; i++)
#pragma unroll
        for (int a = 0; a < ATT_TILE_DV / ATT_THREADS; a++) acc[i][a] = 0.0f;
    for (int64_t j0 = 0; j0 <= last; j0 += ATT_KT) {
        const int nk = last + 1 - j0 < ATT_KT ? (int)(last + 1 - j0) : ATT_KT;
        __syncthreads(); /* the last tile's values and weights read by all */
        for (int64_t e = tid; e < (int64_t)nk * hd; e += ATT_THREADS) {
            const int64_t jj = e / hd, d = e % hd, j = j0 + jj;
            const int64_t row = kv_row(bt, j);
            KV[jj * hs + d] = kv_load(kc, kv_f16 & 1, row * K + hk * hd + d);
        }
        __syncthreads();
        for (int e = tid; e < ATT_QT * ATT_KT; e += ATT_THREADS) {
            const int i = e / ATT_KT, jj = e % ATT_KT;
            float sc = -INFINITY;
            if (i < nq && jj < nk && j0 + jj <= s.row_pos[r0 + i]) {
                float d = 0.0f;
                for (int64_t x = 0; x < hd; x++) d = fmaf(Qs[i * hs + x], KV[jj * hs + x], d);
                sc = d * scale;
            }
            P[e] = sc;
        }
        __syncthreads();
        for (int i = wid; i < nq; i += ATT_THREADS / 32) { /* row i's online softmax, lanes over the keys */
            const float sc = lane < ATT_KT ? P[i * ATT_KT + lane] : -INFINITY;
            float mx = sc;
            mx = warp_max(mx);
            const float m_new = fmaxf(M[i], mx);
            const float pj = sc > -INFINITY ? expf(sc - m_new) : 0.0f;
            float sum = pj;
            sum = warp_sum(sum);
            if (lane < ATT_KT) P[i * ATT_KT + lane] = pj;
            __syncwarp(); /* every lane has read M[i] before lane 0 writes it */
            if (lane == 0) {
                const float corr = expf(M[i] - m_new); /* 0 on the first tile (M = -inf) */
                Cr[i] = corr, L[i] = L[i] * corr + sum, M[i] = m_new;
            }
        }
        __syncthreads(); /* scores read: the buffer takes the values */
        for (int64_t e = tid; e < (int64_t)nk * dv; e += ATT_THREADS) {
            const int64_t jj = e / dv, d = e % dv, j = j0 + jj;
            const int64_t row = kv_row(bt, j);
            KV[jj * dv + d] = kv_load(vc, kv_f16 & 2, row * V + hk * dv + d);
        }
        __syncthreads();
#pragma unroll
        for (int a = 0; a < ATT_TILE_DV / ATT_THREADS; a++) {
            const int64_t d = tid + a * ATT_THREADS;
            if (d >= dv) break;
#pragma unroll
            for (int i = 0; i < ATT_QT; i++) {
                if (i >= nq) break;
                float o = acc[i][a] * Cr[i];
                for (int jj = 0; jj < nk; jj++) o = fmaf(P[i * ATT_KT + jj], KV[jj * dv + d], o);
                acc[i][a] = o;
            }
        }
    }
#pragma unroll
    for (int a = 0; a < ATT_TILE_DV / ATT_THREADS; a++) {
        const int64_t d = tid + a * ATT_THREADS;
        if (d >= dv) break;
#pragma unroll
        for (int i = 0; i < ATT_QT; i++)
            if (i < nq) out[((r0 + i) * n_head + h) * dv + d] = acc[i][a] / L[i];
    }
}

/* One block per (row, head): the splits' partial softmaxes folded into the output, times
 * sigmoid(gate) where there is one (as sigmoid_mul_kernel), and with its 8-bit form where
 * oq is given (dv a multiple of 32: each warp's elements are whole units). */
__global__ void __launch_bounds__(ATT_THREADS)
    attention_merge_kernel(const float *part, int n_split, int64_t dv, const float *gate, float *out, int8_t *oq,
                           q8x *os) {
    ck_pdl_entry();
    __shared__ float f[CK_ATT_SPLITS]; /* each split's weight, e^(its max - the max); 0: no keys */
    const int64_t rh = blockIdx.x;
    const float *pp = part + rh * n_split * (dv + 2);
    float m = -INFINITY;
    for (int k = 0; k < n_split; k++) m = fmaxf(m, pp[k * (dv + 2)]);
    for (int k = threadIdx.x; k < n_split; k += blockDim.x) {
        const float mk = pp[k * (dv + 2)];
        f[k] = mk > -INFINITY ? expf(mk - m) : 0.0f;
    }
    __syncthreads();
    float l = 0.0f;
    for (int k = 0; k < n_split; k++)
        if (f[k] != 0.0f) l = fmaf(pp[k * (dv + 2) + 1], f[k], l);
    for (int64_t d = threadIdx.x; d < dv; d += blockDim.x) {
        float o = 0.0f;
        for (int k = 0; k < n_split; k++)
            if (f[k] != 0.0f) o = fmaf(pp[k * (dv + 2) + 2 + d], f[k], o);
        float v = o / l;
        if (gate) v *= sigmoid(gate[rh * dv + d]);
        out[rh * dv + d] = v;
        if (oq) q8_store_unit(v, (rh * dv + d) / 32, oq, os);
    }
}

/* ==== Causal conv1d ==== */

/* One block per (row, group of `per` channels): a thread per channel (looping where the
 * group is wider than the block) computes the conv and its SiLU; a group inside the first
 * l2_ch channels is one head of the L2-normed ones (per = l2_dim), which the block then
 * norms: the conv and the norm in one pass. With `window`, a run of one row that keeps its
 * slot also gets its new window there: tap j's input is window row j - 1 after the step,
 * written once tap j - 1 has read the old one (the same thread's channel). */
__global__ void conv1d_kernel(ck_step s, const float *x, int64_t xs, float *y, int64_t ys, const float *w,
                              const float *bias, int64_t C, int K, float *state, int window, int64_t per,
                              int64_t l2_ch, float l2_eps) {
    ck_pdl_entry();
    const int64_t groups = (C + per - 1) / per, r = blockIdx.x / groups, c0 = blockIdx.x % groups * per;
    const int64_t c1 = c0 + per < C ? c0 + per : C;
    const ck_run run = s.runs[s.row_run[r]];
    const float *win = state + (int64_t)run.slot_in * (K - 1) * C;
    float *win_out = window && run.n == 1 && run.slot_out >= 0 ? state + (int64_t)run.slot_out * (K - 1) * C : NULL;
    float *yr = y + r * ys;
    float ss = 0.0f;
    for (int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
        float acc = bias ? bias[c] : 0.0f;
        for (int j = 0; j < K; j++) {
            const int64_t tau = r - (K - 1) + j; /* a row index; before the run's first row: its window */
            const float in = tau >= run.row0 ? x[tau * xs + c] : win[(K - 1 + (tau - run.row0)) * C + c];
            acc += w[j * C + c] * in;
            if (win_out && j > 0) win_out[(j - 1) * C + c] = in;
        }
        const float v = silu(acc);
        yr[c] = v, ss += v * v;
    }
    if (c1 > l2_ch) return; /* the whole block: no norm */
    const float inv = 1.0f / sqrtf(block_sum(ss) + l2_eps);
    for (int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x) yr[c] *= inv; /* this thread's own */
}

/* One thread per (item, channel): the K-1 inputs ending at row `end` into slot dst. */
__global__ void conv_window_kernel(const int32_t *items, int64_t n_items, const float *x, int64_t xs, int64_t C, int K,
                                   float *state) {
    ck_pdl_entry();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_items * C) return;
    const int32_t *it = items + 4 * (i / C);
    const int64_t c = i % C, end = it[0], row0 = it[1];
    const float *src = state + (int64_t)it[2] * (K - 1) * C;
    float *dst = state + (int64_t)it[3] * (K - 1) * C;
    float v[8];
    for (int j = 0; j < K - 1; j++) {
        const int64_t tau = end - (K - 2) + j;
        v[j] = tau >= row0 ? x[tau * xs + c] : src[(K - 1 + (tau - row0)) * C + c];
    }
    for (int j = 0; j < K - 1; j++) dst[j * C + c] = v[j];
}

/* ==== Gated delta rule ==== */

/* The row-by-row scans' loads of a row's shared vector (len floats, element i = at(i)),
 * shared by the block's nthr threads: row_fetch takes this thread's first SCAN_PF
 * elements into registers while the row before is computed; row_stash puts them, and the
 * rest read now, into the vector's buffer. */
#define SCAN_PF 4
/* A scan's block has up to 32 columns x 16 row groups (scan_groups) = 512 threads, so each
 * scan kernel must stay within 128 registers a thread: __launch_bounds__(512) holds the
 * compiler to that (sm_80 and sm_90 use 128 or fewer without it; a build for sm_86 or
 * sm_89 alone gave mamba2_kernel 142, which no 512-thread block can launch with) */
template <typename F>
__device__ __forceinline__ void row_fetch(float pf[SCAN_PF], int tid, int nthr, int64_t len, F at) {
#pragma unroll
    for (int c = 0; c < SCAN_PF; c++) {
        const int64_t i = tid + (int64_t)c * nthr;
        if (i < len) pf[c] = at(i);
    }
}
template <typename F>
__device__ __forceinline__ void row_stash(const float pf[SCAN_PF], float *buf, int tid, int nthr, int64_t len, F at) {
#pragma unroll
    for (int c = 0; c < SCAN_PF; c++) {
        const int64_t i = tid + (int64_t)c * nthr;
        if (i < len) buf[i] = pf[c];
    }
    for (int64_t i = tid + (int64_t)SCAN_PF * nthr; i < len; i += nthr) buf[i] = at(i);
}

/* The scans' state write: rows [r0, r1) of column x of the shared slice S (rows of cols
 * floats) into column col of a head's state in global memory (rows of ld floats). */
__device__ __forceinline__ void slice_store(const float *S, int cols, int x, int64_t r0, int64_t r1, float *head,
                                            int64_t ld, int64_t col) {
    for (int64_t r = r0; r < r1; r++) head[r * ld + col] = S[r * cols + x];
}

/* What a scan's block and thread work on (grid: run, head, block of columns; thread (x, y):
 * column x, row group y): the block's run and head h, the thread's column j of the head's
 * state (rows x cols floats) and its rows [i0, i1); the thread's part of the state loaded
 * from slot slot_in into the shared slice S. */
typedef struct {
    ck_run run;
    int64_t h, j, i0, i1;
    bool live; /* j is a column of the state */
} scan_thread;

__device__ __forceinline__ scan_thread scan_thread_at(const ck_run *runs, int64_t rows, int64_t cols_total, float *S,
                                                      const float *state, int64_t slot_floats) {
    scan_thread b;
    b.run = runs[blockIdx.x];
    b.h = blockIdx.y;
    b.j = (int64_t)blockIdx.z * blockDim.x + threadIdx.x;
    b.live = b.j < cols_total;
    const int64_t per = (rows + blockDim.y - 1) / blockDim.y;
    b.i0 = threadIdx.y * per, b.i1 = b.i0 + per < rows ? b.i0 + per : rows;
    const float *head = state + (int64_t)b.run.slot_in * slot_floats + b.h * rows * cols_total;
    if (b.live)
        for (int64_t i = b.i0; i < b.i1; i++) S[i * blockDim.x + threadIdx.x] = head[i * cols_total + b.j];
    return b;
}

/* The chunk of a chunked scan that starts at row t0 of the run: up to C rows, ending at the
 * run's next checkpoint's row (ck: its index) if that comes first (then *at_ck). */
__device__ __forceinline__ int32_t chunk_len(const ck_run &run, const int32_t *ckpts, int32_t ck, int32_t t0, int C,
                                             bool *at_ck) {
    const int32_t nc = run.n - t0 < C ? run.n - t0 : C;
    *at_ck = ck < run.ck + run.n_ck && ckpts[2 * ck] < t0 + nc;
    return *at_ck ? ckpts[2 * ck] - t0 + 1 : nc;
}

/* One block per (run, value head, block of blockDim.x columns); the block's columns of S
 * (d_k x cols) live in shared memory for the whole run. Columns never mix (gdn.c), so
 * thread (x, y) owns column x for the rows of key group y (blockDim.y groups of d_k / y
 * rows), and the two sums over the rows go through `red`. Per row:
 *   S = exp(g) S;  u = beta (v - S^T k);  S += k u^T;  o = S^T (scale q)
 * The rows are a chain, so a row's inputs are loaded while the row before is computed:
 * each thread loads its share of the next row's k and q (row_fetch) and its v, gate and
 * beta into registers, and puts them in the other half of kq before the row's last
 * barrier (row_stash). */

/* The sum of column x of the R row groups' partial sums red (R, cols) */
__device__ __forceinline__ float groups_sum(const float *red, int R, int cols, int x) {
    float s = 0.0f;
    for (int r = 0; r < R; r++) s += red[r * cols + x];
    return s;
}

/* Element i of the (k | scale q) pair of a row (2 d_k floats) */
__device__ __forceinline__ float gdn_kq(const float *kr, const float *qr, int64_t i, int64_t d_k, float scale) {
    return i < d_k ? kr[i] : scale * qr[i - d_k];
}

__global__ void __launch_bounds__(512)
    gdn_kernel(const ck_run *runs, const int32_t *ckpts, const float *qkv, int64_t qkv_s, const float *g,
               const float *beta, float *o, float *state, int64_t n_k, int64_t n_v, int64_t d_k, int64_t d_v,
               int head_map, float scale) {
    ck_pdl_entry();
    CK_DYNAMIC_SHARED(float, sm);
    const int cols = blockDim.x, R = blockDim.y, x = threadIdx.x, y = threadIdx.y;
    const int tid = y * cols + x, nthr = cols * R;
    float *S = sm;                    /* (d_k, cols) */
    float *kq2 = sm + d_k * cols;     /* two buffers of k (d_k) then scale q (d_k) */
    float *red = kq2 + 4 * d_k;       /* (2, R, cols): the groups' partial sums */
    const int64_t slot_floats = n_v * d_k * d_v, key_dim = n_k * d_k;
    const scan_thread b = scan_thread_at(runs, d_k, d_v, S, state, slot_floats);
    const ck_run run = b.run;
    const int64_t h = b.h, kh = ck_key_head(h, n_k, n_v, head_map), j = b.j, i0 = b.i0, i1 = b.i1;
    const bool live = b.live;
    /* the first row's inputs */
    float pf[SCAN_PF], v_next = 0.0f, g_next = 0.0f, b_next = 0.0f;
    if (run.n > 0) {
        const int64_t row = run.row0;
        const float *qr = qkv + row * qkv_s + kh * d_k, *kr = qkv + row * qkv_s + key_dim + kh * d_k;
        const auto at = [&](int64_t i) { return gdn_kq(kr, qr, i, d_k, scale); };
        row_fetch(pf, tid, nthr, 2 * d_k, at);
        row_stash(pf, kq2, tid, nthr, 2 * d_k, at);
        if (live) v_next = qkv[row * qkv_s + 2 * key_dim + h * d_v + j];
        g_next = g[row * n_v + h], b_next = beta[row * n_v + h];
    }
    int32_t ck = run.ck;
    for (int32_t t = 0; t < run.n; t++) {
        const int64_t row = run.row0 + t;
        const float *kq = kq2 + (t & 1) * 2 * d_k;
        float *kq_next = kq2 + ((t + 1) & 1) * 2 * d_k;
        const float decay = expf(g_next), b = b_next, v = v_next;
        __syncthreads(); /* kq filled; red of the previous row read by all */
        const bool more = t + 1 < run.n;
        const float *qn = qkv + (row + 1) * qkv_s + kh * d_k, *kn = qkv + (row + 1) * qkv_s + key_dim + kh * d_k;
        const auto at_next = [&](int64_t i) { return gdn_kq(kn, qn, i, d_k, scale); };
        if (more) {
            row_fetch(pf, tid, nthr, 2 * d_k, at_next);
            if (live) v_next = qkv[(row + 1) * qkv_s + 2 * key_dim + h * d_v + j];
            g_next = g[(row + 1) * n_v + h], b_next = beta[(row + 1) * n_v + h];
        }
        float part = 0.0f;
        if (live)
            for (int64_t i = i0; i < i1; i++) {
                const float sv = S[i * cols + x] * decay;
                S[i * cols + x] = sv;
                part = fmaf(sv, kq[i], part);
            }
        red[y * cols + x] = part;
        __syncthreads();
        const float sk = groups_sum(red, R, cols, x);
        const float u = live ? b * (v - sk) : 0.0f;
        part = 0.0f;
        if (live)
            for (int64_t i = i0; i < i1; i++) {
                const float sv = fmaf(kq[i], u, S[i * cols + x]);
                S[i * cols + x] = sv;
                part = fmaf(sv, kq[d_k + i], part);
            }
        red[(R + y) * cols + x] = part;
        if (more) row_stash(pf, kq_next, tid, nthr, 2 * d_k, at_next); /* nobody reads it in this row */
        __syncthreads();
        if (live && y == 0) {
            const float sq = groups_sum(red + R * cols, R, cols, x);
            o[row * n_v * d_v + h * d_v + j] = sq;
        }
        if (ck < run.ck + run.n_ck && ckpts[2 * ck] == t) { /* a prefix-cache checkpoint */
            if (live) slice_store(S, cols, x, i0, i1, state + ckpts[2 * ck + 1] * slot_floats + h * d_k * d_v, d_v, j);
            ck++;
        }
    }
    if (live && run.slot_out >= 0)
        slice_store(S, cols, x, i0, i1, state + run.slot_out * slot_floats + h * d_k * d_v, d_v, j);
}

} // namespace

extern "C" void ck_rope_store(const ck_step *s, int64_t n, const ck_rope_pre *pre, float *q, float *k, const float *v,
                              int64_t n_head, int64_t n_kv, int64_t hd, int64_t dv, int64_t n_rot, float rope_base,
                              int neox, void *kc, void *vc, int kv_f16, void *stream) {
    const ck_rope_pre none = {NULL, NULL, NULL, NULL, 0.0f};
    if (n > 0)
        CK_LAUNCH((unsigned)n, ROPE_THREADS, 0, (cudaStream_t)stream, rope_store_kernel)
        (*s, pre ? *pre : none, q, k, v, n_head, n_kv, hd, dv, n_rot, rope_base, neox, kc, vc, kv_f16);
}

extern "C" int ck_attention(const ck_step *s, int64_t n, const float *q, const float *gate, float *out, const void *kc,
                            const void *vc, int kv_f16, int64_t n_head, int64_t n_kv, int64_t hd, int64_t dv,
                            float scale, int n_split, float *part, void *q8, void *stream) {
    if (n <= 0) return 0;
    cudaStream_t st = (cudaStream_t)stream;
    if (n_split < 2 || !part) n_split = 1;
    if (n_split > CK_ATT_SPLITS) n_split = CK_ATT_SPLITS;
    /* up to ATT_HEAD_SPLITS ranges of a row's keys a head, so 16 G a block of G heads */
    const int64_t G = n_kv > 0 && n_head % n_kv == 0 ? n_head / n_kv : 1;
    const int grouped = n_split < ATT_HEAD_SPLITS * G ? n_split : (int)(ATT_HEAD_SPLITS * G);
    if (ck_attention_grouped(s, n, q, gate, out, kc, vc, kv_f16, n_head, n_kv, hd, dv, scale, grouped, part, stream)) {
        n_split = grouped;
    } else {
        if (n_split > ATT_HEAD_SPLITS) n_split = ATT_HEAD_SPLITS;
        CK_LAUNCH(dim3((unsigned)(n * n_head), (unsigned)n_split), ATT_THREADS, 0, st, attention_kernel)
        (*s, q, gate, out, kc, vc, kv_f16, n_head, n_kv, hd, dv, scale, part);
    }
    if (n_split == 1) return 0;
    const bool held = q8_fits(q8, n, n_head * dv) && dv % 32 == 0;
    CK_LAUNCH((unsigned)(n * n_head), ATT_THREADS, 0, st, attention_merge_kernel)
    (part, n_split, dv, gate, out, held ? (int8_t *)q8 : NULL, held ? q8_units(q8, n, n_head * dv) : NULL);
    return held;
}

extern "C" int ck_attention_prefill(const ck_step *s, int64_t n, const float *q, float *out, const void *kc,
                                    const void *vc, int kv_f16, int64_t n_head, int64_t n_kv, int64_t hd, int64_t dv,
                                    float scale, void *stream) {
    if (hd > ATT_TILE_DV || dv > ATT_TILE_DV) return 0;
    if (n <= 0) return 1;
    const int64_t hs = hd + 1, kvs = hs > dv ? hs : dv; /* as attention_tile_kernel */
    const size_t shm = (size_t)(ATT_QT * hs + ATT_KT * kvs + ATT_QT * ATT_KT + 3 * ATT_QT) * sizeof(float);
    const dim3 grid((unsigned)((n + ATT_QT - 1) / ATT_QT), (unsigned)n_head);
    CK_LAUNCH(grid, ATT_THREADS, shm, (cudaStream_t)stream, attention_tile_kernel)
    (*s, n, q, out, kc, vc, kv_f16, n_head, n_kv, hd, dv, scale);
    return 1;
}

extern "C" void ck_conv1d(const ck_step *s, int64_t n, const float *x, int64_t xs, float *y, int64_t ys, const float *w,
                          const float *bias, int64_t C, int K, float *state, int window, int64_t l2_ch, int64_t l2_dim,
                          float l2_eps, void *stream) {
    if (n <= 0) return;
    cudaStream_t st = (cudaStream_t)stream;
    /* groups of a head's channels when there are normed ones (l2_ch a multiple of l2_dim),
     * else of 256 */
    const int64_t per = l2_ch > 0 ? l2_dim : 256, groups = (C + per - 1) / per;
    const int threads = per >= 1024 ? 1024 : (int)(per + 31) / 32 * 32;
    CK_LAUNCH((unsigned)(n * groups), threads, 0, st, conv1d_kernel)
    (*s, x, xs, y, ys, w, bias, C, K, state, window, per, l2_ch, l2_eps);
}

extern "C" void ck_conv_window(const int32_t *items, int64_t n_items, const float *x, int64_t xs, int64_t C, int K,
                               float *state, void *stream) {
    if (n_items > 0)
        CK_LAUNCH(blocks_for(n_items * C, 256), 256, 0, (cudaStream_t)stream, conv_window_kernel)
        (items, n_items, x, xs, C, K, state);
}

/* Row groups of a scan's block: up to 4 groups of at least 8 rows; a step of one sequence
 * (decode, a verify, a prefill), whose few blocks would otherwise leave each thread 32
 * rows of a wide state, takes 16 groups of 8 (timed on an H200 for the row-by-row scans:
 * steps of many sequences, with blocks enough, were slower with 16) */
static int scan_groups(int64_t rows, int64_t n_runs) {
    if (rows >= 128 && n_runs == 1) return 16;
    return rows >= 32 ? 4 : rows >= 16 ? 2 : 1;
}

/* The row-by-row scans' block: up to 32 columns, row groups of at least 8 rows, the shared
 * slice (rows x cols), the kernel's vec floats of per-row vectors and the groups' sums
 * within 48 KiB. */
static dim3 scan_block(int64_t rows, int64_t cols_total, int64_t vec, int64_t n_runs, size_t *shm) {
    int cols = cols_total < 32 ? (int)cols_total : 32;
    const int R = scan_groups(rows, n_runs);
    while (cols > 1 && (size_t)(rows * cols + vec + 2 * R * cols) * sizeof(float) > 48 * 1024) cols /= 2;
    *shm = (size_t)(rows * cols + vec + 2 * R * cols) * sizeof(float);
    return dim3((unsigned)cols, (unsigned)R);
}

extern "C" void ck_gdn(const ck_run *runs, int64_t n_runs, const int32_t *ckpts, const float *qkv, int64_t qkv_s,
                       const float *g, const float *beta, float *o, float *state, int64_t n_k, int64_t n_v, int64_t d_k,
                       int64_t d_v, int head_map, float scale, void *stream) {
    if (n_runs <= 0) return;
    size_t shm;
    const dim3 block = scan_block(d_k, d_v, 4 * d_k, n_runs, &shm);
    const dim3 grid((unsigned)n_runs, (unsigned)n_v, (unsigned)((d_v + block.x - 1) / block.x));
    CK_LAUNCH(grid, block, shm, (cudaStream_t)stream, gdn_kernel)
    (runs, ckpts, qkv, qkv_s, g, beta, o, state, n_k, n_v, d_k, d_v, head_map, scale);
}

/* The chunk length and the block of a Mamba-2 chunked scan over a head's state of rows x
 * cols_total: chunks of CK_SCAN_CHUNK rows (fewer for wide states), up to 32 columns,
 * within 48 KiB of shared floats: the slice (rows, cols), two chunk matrices of
 * CHUNK_STRIDE(rows) floats a row (B and C), the (C, C) scores, two (C, cols) and three
 * (C). *C = 0 when none fits, or rows is not a multiple of 4 (the chunk matrices' rows are
 * read 4 elements a load). */
static dim3 chunk_block(int64_t rows, int64_t cols_total, int64_t n_runs, int *C, size_t *shm) {
    for (*C = rows % 4 ? 0 : CK_SCAN_CHUNK; *C >= 4; *C /= 2)
        for (int cols = cols_total < 32 ? (int)cols_total : 32; cols >= 1; cols /= 2) {
            *shm = (size_t)(rows * cols + 2 * *C * CHUNK_STRIDE(rows) + *C * *C + 2 * *C * cols + 3 * *C) *
                   sizeof(float);
            if (*shm <= 48 * 1024) return dim3((unsigned)cols, (unsigned)scan_groups(rows, n_runs));
        }
    *C = 0;
    return dim3(1, 1);
}

/* ==== A decode step of a Gated DeltaNet layer in one kernel ==== */

namespace {

/* For a step whose runs are each one row that updates its own slot (a decode step), one
 * block per (run, value head) does what ssm_gate_kernel, gdn_kernel and
 * gated_rmsnorm_kernel do one after the other, with the same arithmetic: the head's decay
 * and beta, the row of the delta rule, the head's gated RMSNorm (and its 8-bit form).
 * Thread (x, y) = (threadIdx.x % cp, threadIdx.x / cp), cp = d_v rounded up to whole warps,
 * owns column x of the head's state (d_k, d_v), rows [y rpg, (y + 1) rpg), in registers
 * (rpg <= RPT): read once, written once, no shared copy. The norm sums over the outputs
 * of row group 0, whose warps are then whole units of the 8-bit form. */
template <int RPT>
__global__ void __launch_bounds__(512)
    gdn_step_kernel(const ck_run *runs, const float *qkv, int64_t qkv_s, ck_gate_src gs, ck_gated_norm gn, float *o,
                    int8_t *oq, q8x *os, float *state, int64_t n_k, int64_t n_v, int64_t d_k, int64_t d_v,
                    int head_map, float scale, int cp) {
    ck_pdl_entry();
    CK_DYNAMIC_SHARED(float, sm);
    const int R = blockDim.x / cp, x = threadIdx.x % cp, y = threadIdx.x / cp;
    float *kq = sm;            /* k (d_k), then scale q (d_k) */
    float *red = sm + 2 * d_k; /* (2, R, cp): the row groups' partial sums */
    const ck_run run = runs[blockIdx.x];
    const int64_t h = blockIdx.y, kh = ck_key_head(h, n_k, n_v, head_map), row = run.row0;
    const int64_t key_dim = n_k * d_k, slot_floats = n_v * d_k * d_v, rpg = (d_k + R - 1) / R, i0 = y * rpg;
    const int64_t nr = d_k - i0 < rpg ? d_k - i0 : rpg; /* may be 0 or less: a group past the rows */
    const bool live = x < d_v;
    const float *head = state + (int64_t)run.slot_in * slot_floats + h * d_k * d_v;
    float S[RPT];
#pragma unroll
    for (int i = 0; i < RPT; i++) S[i] = live && i < nr ? head[(i0 + i) * d_v + x] : 0.0f;
    const float *qr = qkv + row * qkv_s + kh * d_k, *kr = qr + key_dim;
    for (int64_t i = threadIdx.x; i < 2 * d_k; i += blockDim.x) kq[i] = gdn_kq(kr, qr, i, d_k, scale);
    const int64_t at = h / gs.group * gs.group_stride + h % gs.group; /* as ssm_gate_kernel */
    const float decay = expf(gs.a[h] * softplus(gs.alpha[row * gs.alpha_stride + at] + gs.dt_bias[h]));
    const float beta = sigmoid(gs.b[row * gs.b_stride + at]);
    const float v = live ? qkv[row * qkv_s + 2 * key_dim + h * d_v + x] : 0.0f;
    __syncthreads();
    float part = 0.0f;
#pragma unroll
    for (int i = 0; i < RPT; i++)
        if (i < nr) S[i] *= decay, part = fmaf(S[i], kq[i0 + i], part);
    red[y * cp + x] = part;
    __syncthreads();
    const float u = live ? beta * (v - groups_sum(red, R, cp, x)) : 0.0f;
    part = 0.0f;
#pragma unroll
    for (int i = 0; i < RPT; i++)
        if (i < nr) S[i] = fmaf(kq[i0 + i], u, S[i]), part = fmaf(S[i], kq[d_k + i0 + i], part);
    red[(R + y) * cp + x] = part;
    __syncthreads();
    const float out = groups_sum(red + R * cp, R, cp, x);
    const float ss = block_sum(y == 0 && live ? out * out : 0.0f);
    if (y == 0) {
        const float sc = rsqrtf(ss / (float)d_v + gn.eps);
        const int64_t oi = row * n_v * d_v + h * d_v + x;
        const float val = live ? out * sc * gn.w[x] * silu(gn.z[row * gn.z_stride + h * d_v + x]) : 0.0f;
        if (live) o[oi] = val;
        if (oq) q8_store_unit(val, oi / 32, oq, os); /* d_v a multiple of 32: whole units */
    }
    if (run.slot_out < 0) return;
    float *dst = state + (int64_t)run.slot_out * slot_floats + h * d_k * d_v;
#pragma unroll
    for (int i = 0; i < RPT; i++)
        if (live && i < nr) dst[(i0 + i) * d_v + x] = S[i];
}

} // namespace

extern "C" int ck_gdn_step(const ck_run *runs, int64_t n_runs, const float *qkv, int64_t qkv_s, const ck_gate_src *gate,
                           const ck_gated_norm *norm, float *o, void *q8, float *state, int64_t n_k, int64_t n_v,
                           int64_t d_k, int64_t d_v, int head_map, float scale, void *stream) {
    const int64_t cp = (d_v + 31) / 32 * 32;
    if (cp > 512) return -1;
    const int64_t R = 512 / cp < d_k ? 512 / cp : d_k, rpg = (d_k + R - 1) / R;
    const size_t shm = (size_t)(2 * d_k + 2 * R * cp) * sizeof(float);
    if (rpg > 64 || shm > 48 * 1024) return -1;
    if (n_runs <= 0) return 0;
    const bool q = q8_fits(q8, n_runs, n_v * d_v) && d_v % 32 == 0;
    int8_t *oq = q ? (int8_t *)q8 : NULL;
    q8x *os = q ? q8_units(q8, n_runs, n_v * d_v) : NULL;
    const dim3 grid((unsigned)n_runs, (unsigned)n_v), block((unsigned)(R * cp));
    cudaStream_t st = (cudaStream_t)stream;
    if (rpg <= 32)
        CK_LAUNCH(grid, block, shm, st, gdn_step_kernel<32>)
        (runs, qkv, qkv_s, *gate, *norm, o, oq, os, state, n_k, n_v, d_k, d_v, head_map, scale, (int)cp);
    else
        CK_LAUNCH(grid, block, shm, st, gdn_step_kernel<64>)
        (runs, qkv, qkv_s, *gate, *norm, o, oq, os, state, n_k, n_v, d_k, d_v, head_map, scale, (int)cp);
    return q;
}

/* ==== Verify rows kept for replay ==== */

namespace {

/* One thread per (item, float of the kept row): segment k of a row is seg.width[k]
 * floats at seg.base[k] + row * seg.stride[k], the segments one after another in the
 * slot. */
__global__ void keep_kernel(const int32_t *items, int64_t n_items, int gather, ck_segments seg, int64_t per,
                            float *slab, int64_t slot_floats) {
    ck_pdl_entry();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_items * per) return;
    const int64_t it = i / per;
    int64_t e = i % per, k = 0;
    while (e >= seg.width[k]) e -= seg.width[k++];
    const int64_t row = gather ? it : items[2 * it];
    float *keep = slab + (int64_t)items[2 * it + 1] * slot_floats + (i % per);
    float *at = seg.base[k] + row * seg.stride[k] + e;
    if (gather)
        *at = *keep;
    else
        *keep = *at;
}

} // namespace

extern "C" void ck_keep_rows(const int32_t *items, int64_t n_items, int gather, const ck_segments *seg, float *slab,
                             int64_t slot_floats, void *stream) {
    int64_t per = 0;
    for (int k = 0; k < seg->n; k++) per += seg->width[k];
    ck_segments s = *seg;
    for (int k = seg->n; k < CK_MAX_SEGMENTS; k++) s.width[k] = 1; /* never reached: per stops first */
    if (n_items * per > 0)
        CK_LAUNCH(blocks_for(n_items * per, 256), 256, 0, (cudaStream_t)stream, keep_kernel)
        (items, n_items, gather, s, per, slab, slot_floats);
}

/* ==== Mamba-2 ==== */

namespace {

/* One block per (run, head, block of blockDim.x of the head's d_head columns): the block's
 * columns of S (d_state x cols) in shared memory for the whole run; thread (x, y) owns
 * column x for the state rows of group y, the sum over them through `red`. Per row
 * (g = h / (n_head / n_group)):
 *   dt = softplus(dt_raw + dt_bias);  S = exp(dt A) S + dt B x^T;  y = S^T C + D x
 * As in gdn_kernel, a row's inputs (B and C, dt, x) are loaded into registers while the
 * row before is computed, and put in the other half of BC before its last barrier. */
__device__ __forceinline__ float mamba2_bc(const float *r, int64_t n, int64_t DI, int64_t G, int64_t N, int64_t g) {
    return n < N ? r[DI + g * N + n] : r[DI + G * N + g * N + n - N];
}

__global__ void __launch_bounds__(512)
    mamba2_kernel(const ck_run *runs, const int32_t *ckpts, const float *xbc, int64_t xbc_s, const float *dt_raw,
                  int64_t dt_s, float *y, float *state, int64_t H, int64_t P, int64_t G, int64_t N, const float *A,
                  const float *dt_bias, const float *D) {
    ck_pdl_entry();
    CK_DYNAMIC_SHARED(float, sm);
    const int cols = blockDim.x, R = blockDim.y, tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * cols + tx, nthr = cols * R;
    float *S = sm;             /* (N, cols) */
    float *BC2 = sm + N * cols; /* two buffers of B (N) then C (N) */
    float *red = BC2 + 4 * N;   /* (R, cols) */
    const int64_t slot_floats = H * N * P, DI = H * P;
    const scan_thread b = scan_thread_at(runs, N, P, S, state, slot_floats);
    const ck_run run = b.run;
    const int64_t h = b.h, g = h / (H / G), q = b.j, n0 = b.i0, n1 = b.i1;
    const bool live = b.live;
    float pf[SCAN_PF], x_next = 0.0f, dt_next = 0.0f;
    if (run.n > 0) {
        const float *r = xbc + run.row0 * xbc_s;
        const auto at = [&](int64_t n) { return mamba2_bc(r, n, DI, G, N, g); };
        row_fetch(pf, tid, nthr, 2 * N, at);
        row_stash(pf, BC2, tid, nthr, 2 * N, at);
        x_next = live ? r[h * P + q] : 0.0f;
        dt_next = dt_raw[run.row0 * dt_s + h];
    }
    int32_t ck = run.ck;
    for (int32_t t = 0; t < run.n; t++) {
        const int64_t row = run.row0 + t;
        const float *BC = BC2 + (t & 1) * 2 * N;
        float *BC_next = BC2 + ((t + 1) & 1) * 2 * N;
        const float x = x_next, v = dt_next + dt_bias[h];
        __syncthreads(); /* BC filled; red of the previous row read by all */
        const bool more = t + 1 < run.n;
        const float *rn = xbc + (row + 1) * xbc_s;
        const auto at_next = [&](int64_t n) { return mamba2_bc(rn, n, DI, G, N, g); };
        if (more) {
            row_fetch(pf, tid, nthr, 2 * N, at_next);
            x_next = live ? rn[h * P + q] : 0.0f;
            dt_next = dt_raw[(row + 1) * dt_s + h];
        }
        const float dt = v > 20.0f ? v : log1pf(expf(v));
        const float dA = expf(dt * A[h]), dtx = dt * x;
        float acc = 0.0f;
        if (live)
            for (int64_t n = n0; n < n1; n++) {
                const float sv = dA * S[n * cols + tx] + BC[n] * dtx;
                S[n * cols + tx] = sv;
                acc = fmaf(BC[N + n], sv, acc);
            }
        red[ty * cols + tx] = acc;
        if (more) row_stash(pf, BC_next, tid, nthr, 2 * N, at_next); /* nobody reads it in this row */
        __syncthreads();
        if (live && ty == 0) {
            float sum = 0.0f;
            for (int k = 0; k < R; k++) sum += red[k * cols + tx];
            y[row * DI + h * P + q] = sum + (D ? D[h] : 0.0f) * x;
        }
        if (ck < run.ck + run.n_ck && ckpts[2 * ck] == t) { /* a prefix-cache checkpoint */
            if (live) slice_store(S, cols, tx, n0, n1, state + ckpts[2 * ck + 1] * slot_floats + h * N * P, P, q);
            ck++;
        }
    }
    if (live && run.slot_out >= 0)
        slice_store(S, cols, tx, n0, n1, state + run.slot_out * slot_floats + h * N * P, P, q);
}

/* A chunk's gates, for len rows (nc of them the chunk's, from dt_raw, rows dt_s apart;
 * the rest zero): dt = softplus(dt_raw + bias), G_t = a dt_0 + ... + a dt_t, and
 * wl_t = e^{G_last - G_t} dt_t with G_last that of the chunk's last row. One thread's work. */
__device__ __forceinline__ void chunk_gates(const float *dt_raw, int64_t dt_s, int32_t nc, int len, float a,
                                            float bias, float *dt, float *G, float *wl) {
    float acc = 0.0f;
    for (int t = 0; t < len; t++) {
        const float v = t < nc ? dt_raw[t * dt_s] + bias : 0.0f;
        dt[t] = t >= nc ? 0.0f : v > 20.0f ? v : log1pf(expf(v));
        acc += dt[t] * a;
        G[t] = acc;
    }
    for (int t = 0; t < len; t++) wl[t] = expf(G[nc - 1] - G[t]) * dt[t];
}

/* The same recurrence over chunks of up to C rows (the SSD form; a chunk's state S0 at its
 * start): with a_t = dt_t A, G_t = a_0 + ... + a_t within the chunk,
 *   y_t = e^{G_t} S0^T C_t + sum_{s <= t} e^{G_t - G_s} dt_s (C_t . B_s) x_s + D x_t
 *   S   = e^{G_last} S0 + sum_t e^{G_last - G_t} dt_t B_t x_t^T
 * A chunk ends early at a prefix-cache checkpoint's row. Blocks and threads as
 * mamba2_kernel; three barriers per chunk. */
__global__ void __launch_bounds__(512, 2) /* two blocks of 32 x 16 threads an SM: 64 registers at most */
    mamba2_chunk_kernel(const ck_run *runs, const int32_t *ckpts, const float *xbc, int64_t xbc_s, const float *dt_raw,
                        int64_t dt_s, float *y, float *state, int64_t H, int64_t P, int64_t G, int64_t N,
                        const float *A, const float *dt_bias, const float *D, int C) {
    ck_pdl_entry();
    CK_DYNAMIC_SHARED(float, sm);
    const int cols = blockDim.x, R = blockDim.y, tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * cols + tx, nthr = cols * R;
    float *S = sm;             /* (N, cols) */
    const int64_t ns = CHUNK_STRIDE(N);
    float *Bc = S + N * cols;  /* (C, ns) */
    float *Cc = Bc + C * ns;   /* (C, ns) */
    float *CB = Cc + C * ns;   /* (C, C) e^{G_t - G_s} dt_s (C_t . B_s), s <= t */
    float *CS = CB + C * C;    /* (C, cols) e^{G_t} S0^T C_t */
    float *X = CS + C * cols;  /* (C, cols) the chunk's x */
    float *Gc = X + C * cols;  /* (C) cumulative a */
    float *dt = Gc + C;        /* (C) */
    float *wl = dt + C;        /* (C) e^{G_last - G_t} dt_t */
    const int64_t slot_floats = H * N * P, DI = H * P;
    const scan_thread b = scan_thread_at(runs, N, P, S, state, slot_floats);
    const ck_run run = b.run;
    const int64_t h = b.h, g = h / (H / G), q = b.j, n0 = b.i0, n1 = b.i1;
    const bool live = b.live;
    const float Dh = D ? D[h] : 0.0f;
    int32_t ck = run.ck;
    for (int32_t t0 = 0; t0 < run.n;) {
        bool at_ck;
        const int32_t nc = chunk_len(run, ckpts, ck, t0, C, &at_ck);
        const int64_t row0 = run.row0 + t0;
        __syncthreads(); /* the last chunk's Bc, X and wl read by all */
        for (int64_t e = tid; e < (int64_t)nc * N; e += nthr) {
            const int64_t t = e / N, n = e % N;
            const float *r = xbc + (row0 + t) * xbc_s;
            Bc[t * ns + n] = r[DI + g * N + n];
            Cc[t * ns + n] = r[DI + G * N + g * N + n];
        }
        for (int t = ty; t < nc; t += R) X[t * cols + tx] = live ? xbc[(row0 + t) * xbc_s + h * P + q] : 0.0f;
        if (tid == 0) chunk_gates(dt_raw + row0 * dt_s + h, dt_s, nc, C, A[h], dt_bias[h], dt, Gc, wl);
        __syncthreads();
        for (int e = tid; e < nc * nc; e += nthr) {
            const int t = e / nc, s2 = e % nc;
            float v = 0.0f;
            if (s2 <= t) {
                float cb = 0.0f;
                for (int64_t n = 0; n < N; n += 4) cb = dot4(row4(Cc + t * ns + n), row4(Bc + s2 * ns + n), cb);
                v = expf(Gc[t] - Gc[s2]) * dt[s2] * cb;
            }
            CB[t * C + s2] = v;
        }
        for (int t = ty; t < nc; t += R) {
            float cs = 0.0f;
            if (live)
                for (int64_t n = 0; n < N; n += 4) cs = dot4(row4(Cc + t * ns + n), col4(S, cols, n, tx), cs);
            CS[t * cols + tx] = expf(Gc[t]) * cs;
        }
        __syncthreads();
        for (int t = ty; t < nc; t += R) {
            float ov = CS[t * cols + tx];
            for (int s2 = 0; s2 <= t; s2++) ov = fmaf(CB[t * C + s2], X[s2 * cols + tx], ov);
            if (live) y[(row0 + t) * DI + h * P + q] = ov + Dh * X[t * cols + tx];
        }
        if (live) {
            const float el = expf(Gc[nc - 1]);
            for (int64_t n = n0; n < n1; n++) {
                float sv = el * S[n * cols + tx];
                for (int t = 0; t < nc; t++) sv = fmaf(Bc[t * ns + n] * wl[t], X[t * cols + tx], sv);
                S[n * cols + tx] = sv;
            }
        }
        if (at_ck) {
            if (live) slice_store(S, cols, tx, n0, n1, state + ckpts[2 * ck + 1] * slot_floats + h * N * P, P, q);
            ck++;
        }
        t0 += nc;
    }
    if (live && run.slot_out >= 0)
        slice_store(S, cols, tx, n0, n1, state + run.slot_out * slot_floats + h * N * P, P, q);
}

/* mamba2_chunk_kernel's work on the tensor cores: one block of CK_SCAN_WARPS warps per (run,
 * head, CK_SCAN_COLS columns of the head's P) and chunks of up to SSD_C rows (fewer at a
 * checkpoint or the run's end, zero rows after). With the chunk's B and C (rows of N) and
 * x (its columns), per chunk:
 *   CB[t][s] = e^{G_t - G_s} dt_s (C_t . B_s), s <= t      C B^T, 16 x 8 tiles in turn
 *   Y = e^G (C S0) + CB X + D x                            warp w's tile of the chunk's
 *   S = e^{G_last} S0 + B^T (wl X),  wl_t = e^{G_last - G_t} dt_t    16 x 8 tiles in turn
 * each a TF32 product in three parts (ck_tile_product: about f32's precision). N: a
 * multiple of 16. */
#define SSD_C 32
#define SSD_CBS CHUNK_STRIDE(SSD_C) /* rows of CB */

size_t ssd_mma_shared(int64_t N) {
    return (size_t)(N * CK_SCAN_SS + 2 * SSD_C * CHUNK_STRIDE(N) + SSD_C * SSD_CBS + 2 * SSD_C * CK_SCAN_SS +
                    3 * SSD_C) *
           sizeof(float);
}

__global__ void __launch_bounds__(32 * CK_SCAN_WARPS)
    mamba2_chunk_mma_kernel(const ck_run *runs, const int32_t *ckpts, const float *xbc, int64_t xbc_s,
                            const float *dt_raw, int64_t dt_s, float *y, float *state, int64_t H, int64_t P, int64_t G,
                            int64_t N, const float *A, const float *dt_bias, const float *D) {
    ck_pdl_entry();
    CK_DYNAMIC_SHARED(float, sm);
    const int tid = threadIdx.x, nthr = 32 * CK_SCAN_WARPS, w = tid >> 5, g = (tid & 31) >> 2, t = tid & 3;
    const int64_t ns = CHUNK_STRIDE(N);
    float *S = sm;                       /* (N, CK_SCAN_SS) the block's columns of the state */
    float *Bc = S + N * CK_SCAN_SS;      /* (SSD_C, ns) the chunk's B */
    float *Cc = Bc + SSD_C * ns;         /* (SSD_C, ns) its C */
    float *CB = Cc + SSD_C * ns;         /* (SSD_C, SSD_CBS) */
    float *X = CB + SSD_C * SSD_CBS;     /* (SSD_C, CK_SCAN_SS) its x */
    float *XW = X + SSD_C * CK_SCAN_SS;  /* (SSD_C, CK_SCAN_SS) wl x */
    float *Gc = XW + SSD_C * CK_SCAN_SS; /* (SSD_C) cumulative a */
    float *dt = Gc + SSD_C, *wl = dt + SSD_C;
    const ck_run run = runs[blockIdx.x];
    const int64_t h = blockIdx.y, grp = h / (H / G), j0 = (int64_t)blockIdx.z * CK_SCAN_COLS;
    const int cols = P - j0 < CK_SCAN_COLS ? (int)(P - j0) : CK_SCAN_COLS; /* the live ones */
    const int64_t slot_floats = H * N * P, DI = H * P;
    const float Dh = D ? D[h] : 0.0f;
    /* the block's columns of slot k's head */
    const auto slice_of = [&](int64_t k) { return state + k * slot_floats + h * N * P + j0; };
    slice_in(S, CK_SCAN_SS, slice_of(run.slot_in), P, N, CK_SCAN_COLS, cols, tid, nthr);
    const int mr = 16 * (w >> 1), mc = 8 * (w & 1); /* this warp's tile of Y */
    int32_t ck = run.ck;
    for (int32_t t0 = 0; t0 < run.n;) {
        bool at_ck;
        const int32_t nc = chunk_len(run, ckpts, ck, t0, SSD_C, &at_ck);
        const int64_t row0 = run.row0 + t0;
        __syncthreads(); /* the last chunk's Bc, Cc, CB, X, XW read by all; S written */
        for (int64_t e = tid; e < SSD_C * N; e += nthr) {
            const int64_t r = e / N, n = e % N;
            const float *src = xbc + (row0 + r) * xbc_s + DI + grp * N + n;
            Bc[r * ns + n] = r < nc ? src[0] : 0.0f;
            Cc[r * ns + n] = r < nc ? src[G * N] : 0.0f;
        }
        for (int e = tid; e < SSD_C * CK_SCAN_COLS; e += nthr) {
            const int r = e / CK_SCAN_COLS, c = e % CK_SCAN_COLS;
            X[r * CK_SCAN_SS + c] = r < nc && c < cols ? xbc[(row0 + r) * xbc_s + h * P + j0 + c] : 0.0f;
        }
        if (tid == 0) chunk_gates(dt_raw + row0 * dt_s + h, dt_s, nc, SSD_C, A[h], dt_bias[h], dt, Gc, wl);
        __syncthreads();
        for (int f = w; f < (SSD_C / 16) * (SSD_C / 8); f += CK_SCAN_WARPS) { /* CB: B[n][s] = Bc[s][n] */
            const int r0 = 16 * (f / (SSD_C / 8)), c0 = 8 * (f % (SSD_C / 8));
            float cb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            ck_tile_product(cb, Cc, ns, 1, r0, Bc, 1, ns, c0, N / 8, g, t);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int r = ck_frag_row(r0, i, g), s2 = ck_frag_col(c0, i, t);
                CB[r * SSD_CBS + s2] = s2 <= r ? expf(Gc[r] - Gc[s2]) * dt[s2] * cb[i] : 0.0f;
            }
        }
        for (int e = tid; e < SSD_C * CK_SCAN_COLS; e += nthr) {
            const int r = e / CK_SCAN_COLS, c = e % CK_SCAN_COLS;
            XW[r * CK_SCAN_SS + c] = wl[r] * X[r * CK_SCAN_SS + c];
        }
        float ys[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* e^G C S0 */
        ck_tile_product(ys, Cc, ns, 1, mr, S, CK_SCAN_SS, 1, mc, N / 8, g, t);
#pragma unroll
        for (int i = 0; i < 4; i++) ys[i] *= expf(Gc[ck_frag_row(mr, i, g)]);
        __syncthreads();
        ck_tile_product(ys, CB, SSD_CBS, 1, mr, X, CK_SCAN_SS, 1, mc, SSD_C / 8, g, t);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int r = ck_frag_row(mr, i, g), c = ck_frag_col(mc, i, t);
            if (r < nc && c < cols) y[(row0 + r) * DI + h * P + j0 + c] = ys[i] + Dh * X[r * CK_SCAN_SS + c];
        }
        ck_scan_state(S, N, expf(Gc[nc - 1]), Bc, ns, XW, SSD_C / 8, w, g, t,
                      [&](int64_t i, int c, float v) { S[i * CK_SCAN_SS + c] = v; });
        if (at_ck) {
            __syncthreads();
            slice_out(S, CK_SCAN_SS, slice_of(ckpts[2 * ck + 1]), P, N, CK_SCAN_COLS, cols, tid, nthr);
            ck++;
        }
        t0 += nc;
    }
    if (run.slot_out >= 0) {
        __syncthreads();
        slice_out(S, CK_SCAN_SS, slice_of(run.slot_out), P, N, CK_SCAN_COLS, cols, tid, nthr);
    }
}

} // namespace

extern "C" void ck_mamba2(const ck_run *runs, int64_t n_runs, const int32_t *ckpts, const float *xbc, int64_t xbc_s,
                          const float *dt_raw, int64_t dt_s, float *y, float *state, int64_t H, int64_t P, int64_t G,
                          int64_t N, const float *A, const float *dt_bias, const float *D, void *stream) {
    if (n_runs <= 0) return;
    size_t shm;
    const dim3 block = scan_block(N, P, 4 * N, n_runs, &shm);
    const dim3 grid((unsigned)n_runs, (unsigned)H, (unsigned)((P + block.x - 1) / block.x));
    CK_LAUNCH(grid, block, shm, (cudaStream_t)stream, mamba2_kernel)
    (runs, ckpts, xbc, xbc_s, dt_raw, dt_s, y, state, H, P, G, N, A, dt_bias, D);
}

extern "C" int ck_mamba2_chunked(const ck_run *runs, int64_t n_runs, const int32_t *ckpts, const float *xbc,
                                 int64_t xbc_s, const float *dt_raw, int64_t dt_s, float *y, float *state, int64_t H,
                                 int64_t P, int64_t G, int64_t N, const float *A, const float *dt_bias, const float *D,
                                 int tensor_cores, void *stream) {
    if (n_runs <= 0) return 1;
    const size_t mma_shm = ssd_mma_shared(N);
    if (tensor_cores && N % 16 == 0 && ck_allow_shared((const void *)mamba2_chunk_mma_kernel, mma_shm)) {
        const dim3 grid((unsigned)n_runs, (unsigned)H, blocks_for(P, CK_SCAN_COLS));
        CK_LAUNCH(grid, 32 * CK_SCAN_WARPS, mma_shm, (cudaStream_t)stream, mamba2_chunk_mma_kernel)
        (runs, ckpts, xbc, xbc_s, dt_raw, dt_s, y, state, H, P, G, N, A, dt_bias, D);
        return 1;
    }
    int C;
    size_t shm;
    const dim3 block = chunk_block(N, P, n_runs, &C, &shm);
    if (C == 0) return 0;
    const dim3 grid((unsigned)n_runs, (unsigned)H, (unsigned)((P + block.x - 1) / block.x));
    CK_LAUNCH(grid, block, shm, (cudaStream_t)stream, mamba2_chunk_kernel)
    (runs, ckpts, xbc, xbc_s, dt_raw, dt_s, y, state, H, P, G, N, A, dt_bias, D, C);
    return 1;
}
