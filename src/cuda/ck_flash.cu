/*
 * ck_flash.cu — a prefill's causal attention on the tensor cores (ck_attention_prefill_mma):
 * the FlashAttention scheme over an f16 KV cache, with f16 products that keep f32's
 * precision. Oracle: ops_attention_ref (through tests/cuda's attention cases).
 *
 * A block takes 64 consecutive query rows of one sequence and one head (32 where the device
 * has too little shared memory a block for 64: heads of 256 on sm_86 and sm_89); warp w
 * owns rows 16w..16w+15. Per tile of FA_BK = 32 keys: the block copies the keys (rows of
 * hd) and the values (transposed: dv rows of 32 keys) into shared memory; each warp then
 *   S (16 x 32) = Q K^T                 2 hd / 16 x 4 products m16n8k16
 *   online softmax of S's rows, in registers (a row's 32 scores live on 4 lanes)
 *   O (16 x dv) = O corr + P V          2 x 2 x dv / 8 products
 * and at the end writes O / l. Q and P are split into an f16 high part and an f16 low part
 * (x = hi + lo, |lo| <= 2^-11 |x|), each multiplied: with the cache's keys and values
 * exact in f16, S and O come out as f32 sums of f32 products would, to about 2^-22 of each
 * term, where rounding Q and P to f16 alone would leave 2^-11. The product count doubles;
 * the tensor cores have rate to spare here (the kernel waits on shared memory anyway).
 * Q is scaled by a power of two and P by 2^14 first, so that the low parts stay clear of
 * f16's subnormals.
 */
#include "cuda/ck_device.h"
#include <math.h>
#include <stdint.h>

#include "cuda/ck.h"
#include "cuda/ck_block.h"
#include "cuda/ck_kv.h"
#include "cuda/ck_mma.h"

namespace {

/* W warps a block (4, or 2 where the device lets a block have less shared memory), each
 * owning 16 query rows */
#define FA_BQ(W) (16 * (W))
#define FA_BK 32
/* f16 padding of each shared row: rows (hd + 8) or (32 + 8) halves long put the 8 rows a
 * fragment load touches 16 bytes apart modulo 128, in different banks */
#define FA_PAD 8
#define P_SCALE 16384.0f /* 2^14: the softmax weights' scale in the P V products */

/* the 32-bit word of two f16 at p (an even index) */
__device__ __forceinline__ unsigned ld2(const uint16_t *p) { return *(const unsigned *)p; }

/* x = hi + lo, both f16 */
__device__ __forceinline__ void split_f16(float x, uint16_t *hi, uint16_t *lo) {
    const __half_raw h = __float2half_rn(x);
    const __half_raw l = __float2half_rn(x - __half2float(__half(h)));
    *hi = h.x, *lo = l.x;
}

/* two values as (hi, lo) f16 pairs: the A registers' halves for two adjacent columns */
__device__ __forceinline__ void split_pair(float x0, float x1, unsigned *hi, unsigned *lo) {
    uint16_t h0, l0, h1, l1;
    split_f16(x0, &h0, &l0), split_f16(x1, &h1, &l1);
    *hi = (unsigned)h0 | (unsigned)h1 << 16, *lo = (unsigned)l0 | (unsigned)l1 << 16;
}

/* the largest of a row's values over the 4 lanes that hold it (lanes 4g..4g+3) */
__device__ __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/* The shared memory of a block of w warps: Q's high and low parts (16 w rows of hd + FA_PAD),
 * a key tile (FA_BK rows of hd + FA_PAD), a value tile transposed (dv rows of FA_BK + FA_PAD):
 * 105 KiB for 4 warps and heads of 256, 71 KiB for 2. */
size_t flash_shared_bytes(int64_t hd, int64_t dv, int w) {
    return (size_t)((2 * FA_BQ(w) + FA_BK) * (hd + FA_PAD) + dv * (FA_BK + FA_PAD)) * sizeof(uint16_t);
}

/* Online softmax of one row's scores x[nt][e] (this lane's: n-tile nt, element e of 2),
 * whose running max m and this lane's part of the sum l it updates; returns the factor
 * the row's output so far is scaled by. A row with no key yet keeps m = -inf. */
template <int NT> __device__ __forceinline__ float softmax_row(float (&x)[NT][2], float &m, float &l) {
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < NT; nt++) mx = fmaxf(mx, fmaxf(x[nt][0], x[nt][1]));
    const float m_new = fmaxf(m, quad_max(mx));
    const float base = m_new == -INFINITY ? 0.0f : m_new; /* all masked: every weight 0 */
    const float corr = expf(m - base);                    /* 0 while m = -inf */
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int e = 0; e < 2; e++) x[nt][e] = expf(x[nt][e] - base), sum += x[nt][e];
    m = m_new, l = l * corr + sum;
    return corr;
}

template <int DV, int W>
__global__ void __launch_bounds__(32 * W)
    attention_mma_kernel(ck_step s, int64_t n_runs, const float *q, float *out, const uint16_t *kc,
                         const uint16_t *vc, int64_t n_head, int64_t n_kv, int64_t hd, float scale) {
    ck_pdl_entry();
    CK_DYNAMIC_SHARED(uint4, smem); /* uint4: 16-byte aligned */
    const int64_t qs = hd + FA_PAD, vs = FA_BK + FA_PAD;
    uint16_t *Qh = (uint16_t *)smem, *Ql = Qh + FA_BQ(W) * qs, *Ks = Ql + FA_BQ(W) * qs, *Vt = Ks + FA_BK * qs;
    /* block x is tile b of run k: the runs' tiles in order */
    int64_t k = 0, b = blockIdx.x;
    for (; k < n_runs - 1; k++) {
        const int64_t tiles = (s.runs[k].n + FA_BQ(W) - 1) / FA_BQ(W);
        if (b < tiles) break;
        b -= tiles;
    }
    const ck_run run = s.runs[k];
    const int64_t r0 = run.row0 + b * FA_BQ(W), h = blockIdx.y, hk = h / (n_head / n_kv);
    const int nq = run.n - b * FA_BQ(W) < FA_BQ(W) ? (int)(run.n - b * FA_BQ(W)) : FA_BQ(W);
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, g = lane >> 2, t = lane & 3;
    const int64_t K = n_kv * hd, V = n_kv * DV;
    const int32_t *bt = s.blocks + run.bt;
    const int64_t last = s.row_pos[r0 + nq - 1];
    /* Q scaled by 2^qe so that its largest element is in [2^14, 2^15): the low parts of small
     * elements stay clear of f16's subnormals, the high parts clear of its overflow; the
     * scores are scaled back, exactly (a power of two) */
    __shared__ float red[W];
    float amax = 0.0f;
    for (int64_t e = tid; e < (int64_t)nq * hd; e += 32 * W)
        amax = fmaxf(amax, fabsf(q[((r0 + e / hd) * n_head + h) * hd + e % hd]));
    amax = warp_max(amax);
    if (lane == 0) red[w] = amax;
    __syncthreads();
    amax = red[0];
    for (int i = 1; i < W; i++) amax = fmaxf(amax, red[i]);
    int qe = 0;
    if (amax > 0.0f && amax < INFINITY) frexpf(amax, &qe), qe = 15 - qe; /* amax = f 2^e', f in [0.5, 1) */
    for (int64_t e = tid; e < (int64_t)FA_BQ(W) * hd; e += 32 * W) {
        const int64_t i = e / hd, d = e % hd;
        const float x = i < nq ? ldexpf(q[((r0 + i) * n_head + h) * hd + d], qe) : 0.0f;
        split_f16(x, &Qh[i * qs + d], &Ql[i * qs + d]);
    }
    const float s_scale = ldexpf(scale, -qe);
    /* this lane's rows: a = 16w + g and b = a + 8 of the tile; -1: no row */
    const int ia = 16 * w + g, ib = ia + 8;
    const int64_t pos_a = ia < nq ? s.row_pos[r0 + ia] : -1, pos_b = ib < nq ? s.row_pos[r0 + ib] : -1;
    float w_last = fmaxf((float)pos_a, (float)pos_b); /* the warp's last position (< 2^24: exact) */
    w_last = warp_max(w_last);
    float o[DV / 8][4];
#pragma unroll
    for (int nt = 0; nt < DV / 8; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
    for (int64_t j0 = 0; j0 <= last; j0 += FA_BK) {
        const int nk = last + 1 - j0 < FA_BK ? (int)(last + 1 - j0) : FA_BK;
        __syncthreads(); /* the last tile read by every warp; Q written, the first time */
        for (int64_t e = tid; e < (int64_t)FA_BK * (hd / 8); e += 32 * W) {
            const int64_t jj = e / (hd / 8), c = e % (hd / 8) * 8;
            uint4 x = make_uint4(0, 0, 0, 0);
            if (jj < nk) x = *(const uint4 *)(kc + kv_row(bt, j0 + jj) * K + hk * hd + c);
            *(uint4 *)(Ks + jj * qs + c) = x;
        }
        for (int64_t e = tid; e < (int64_t)FA_BK * (DV / 8); e += 32 * W) {
            const int64_t jj = e % FA_BK, c = e / FA_BK * 8; /* consecutive threads: consecutive keys */
            uint4 x = make_uint4(0, 0, 0, 0);
            if (jj < nk) x = *(const uint4 *)(vc + kv_row(bt, j0 + jj) * V + hk * DV + c);
            const unsigned wd[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
                Vt[(c + 2 * i) * vs + jj] = (uint16_t)(wd[i] & 0xffffu);
                Vt[(c + 2 * i + 1) * vs + jj] = (uint16_t)(wd[i] >> 16);
            }
        }
        __syncthreads();
        if ((float)j0 > w_last) continue; /* every key of the tile after the warp's rows */
        /* S = Q K^T: sc[nt] holds keys j0 + 8 nt + 2t, +1 of rows a (0, 1) and b (2, 3) */
        float sc[FA_BK / 8][4];
#pragma unroll
        for (int nt = 0; nt < FA_BK / 8; nt++) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
        for (int64_t k0 = 0; k0 < hd; k0 += 16) {
            const uint16_t *qa = Qh + ia * qs + k0 + 2 * t, *qb = Qh + ib * qs + k0 + 2 * t;
            const unsigned ah[4] = {ld2(qa), ld2(qb), ld2(qa + 8), ld2(qb + 8)};
            const int64_t lo = Ql - Qh;
            const unsigned al[4] = {ld2(qa + lo), ld2(qb + lo), ld2(qa + lo + 8), ld2(qb + lo + 8)};
#pragma unroll
            for (int nt = 0; nt < FA_BK / 8; nt++) {
                const uint16_t *kr = Ks + (8 * nt + g) * qs + k0 + 2 * t;
                const unsigned b[2] = {ld2(kr), ld2(kr + 8)};
                mma_16816(sc[nt], ah, b);
                mma_16816(sc[nt], al, b);
            }
        }
        float xa[FA_BK / 8][2], xb[FA_BK / 8][2];
#pragma unroll
        for (int nt = 0; nt < FA_BK / 8; nt++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int64_t j = j0 + 8 * nt + 2 * t + e;
                xa[nt][e] = j <= pos_a ? sc[nt][e] * s_scale : -INFINITY;
                xb[nt][e] = j <= pos_b ? sc[nt][2 + e] * s_scale : -INFINITY;
            }
        const float ca = softmax_row<FA_BK / 8>(xa, m_a, l_a), cb = softmax_row<FA_BK / 8>(xb, m_b, l_b);
#pragma unroll
        for (int nt = 0; nt < DV / 8; nt++) o[nt][0] *= ca, o[nt][1] *= ca, o[nt][2] *= cb, o[nt][3] *= cb;
        /* O 2^14 += P 2^14 V, 16 keys a step (P's A registers are two n-tiles of the weights,
         * scaled as Q is: weights in [0, 1] whose low parts stay clear of subnormals) */
#pragma unroll
        for (int kk = 0; kk < FA_BK / 16; kk++) {
            unsigned ph[4], pl[4];
            const float u = P_SCALE;
            split_pair(xa[2 * kk][0] * u, xa[2 * kk][1] * u, &ph[0], &pl[0]);
            split_pair(xb[2 * kk][0] * u, xb[2 * kk][1] * u, &ph[1], &pl[1]);
            split_pair(xa[2 * kk + 1][0] * u, xa[2 * kk + 1][1] * u, &ph[2], &pl[2]);
            split_pair(xb[2 * kk + 1][0] * u, xb[2 * kk + 1][1] * u, &ph[3], &pl[3]);
#pragma unroll
            for (int nt = 0; nt < DV / 8; nt++) {
                const uint16_t *vr = Vt + (8 * nt + g) * vs + 16 * kk + 2 * t;
                const unsigned b[2] = {ld2(vr), ld2(vr + 8)};
                mma_16816(o[nt], ph, b);
                mma_16816(o[nt], pl, b);
            }
        }
    }
    const float la = quad_sum(l_a) * P_SCALE, lb = quad_sum(l_b) * P_SCALE;
#pragma unroll
    for (int nt = 0; nt < DV / 8; nt++) {
        const int64_t d = 8 * nt + 2 * t;
        if (pos_a >= 0) {
            float *y = out + ((r0 + ia) * n_head + h) * DV + d;
            y[0] = o[nt][0] / la, y[1] = o[nt][1] / la;
        }
        if (pos_b >= 0) {
            float *y = out + ((r0 + ib) * n_head + h) * DV + d;
            y[0] = o[nt][2] / lb, y[1] = o[nt][3] / lb;
        }
    }
}

/* Launches DV's kernel of W warps once allowed the shared memory it needs (0: the device
 * does not have that much). Asked at each call, not remembered: the answer is the device's. */
template <int DV, int W>
int launch_flash_w(const ck_step *s, const ck_run *runs, int64_t n_runs, const float *q, float *out, const void *kc,
                   const void *vc, int64_t n_head, int64_t n_kv, int64_t hd, float scale, cudaStream_t st) {
    const size_t shm = flash_shared_bytes(hd, DV, W);
    if (!ck_allow_shared((const void *)attention_mma_kernel<DV, W>, shm)) return 0;
    int64_t tiles = 0;
    for (int64_t k = 0; k < n_runs; k++) tiles += (runs[k].n + FA_BQ(W) - 1) / FA_BQ(W);
    const dim3 grid((unsigned)tiles, (unsigned)n_head);
    CK_LAUNCH(grid, 32 * W, shm, st, attention_mma_kernel<DV, W>)
    (*s, n_runs, q, out, (const uint16_t *)kc, (const uint16_t *)vc, n_head, n_kv, hd, scale);
    return 1;
}

/* 4 warps a block, else 2 (heads of 256 on GPUs with 99 KiB a block, as sm_86 and sm_89);
 * 0 where neither fits: the caller takes the FP32 tiles. */
template <int DV>
int launch_flash(const ck_step *s, const ck_run *runs, int64_t n_runs, const float *q, float *out, const void *kc,
                 const void *vc, int64_t n_head, int64_t n_kv, int64_t hd, float scale, cudaStream_t st) {
    return launch_flash_w<DV, 4>(s, runs, n_runs, q, out, kc, vc, n_head, n_kv, hd, scale, st) ||
           launch_flash_w<DV, 2>(s, runs, n_runs, q, out, kc, vc, n_head, n_kv, hd, scale, st);
}

} // namespace

extern "C" int ck_attention_prefill_mma(const ck_step *s, const ck_run *runs, int64_t n_runs, const float *q,
                                        float *out, const void *kc, const void *vc, int kv_f16, int64_t n_head,
                                        int64_t n_kv, int64_t hd, int64_t dv, float scale, void *stream) {
    if (kv_f16 != 3 || hd % 16 || hd > 256 || hd < 16) return 0;
    if (n_runs <= 0) return 1;
    cudaStream_t st = (cudaStream_t)stream;
#define FLASH_CASE(D) \
    case D: return launch_flash<D>(s, runs, n_runs, q, out, kc, vc, n_head, n_kv, hd, scale, st)
    switch (dv) {
        FLASH_CASE(16);
        FLASH_CASE(32);
        FLASH_CASE(64);
        FLASH_CASE(128);
        FLASH_CASE(256);
    default: return 0;
    }
#undef FLASH_CASE
}
