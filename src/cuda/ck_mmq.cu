/*
 * ck_mmq.cu — y = x W^T for a few dozen rows of x (batched decode) on the tensor cores,
 * the weights read once, in their GGUF format, for all the rows: ck_gemv reads them once
 * per 8 rows, cuBLAS reads an f16 copy (2 bytes a weight, where Q4_K takes 0.56).
 *
 * x is quantized per 32-element unit as ck_gemv's integer path does (ck_q8.h: the same
 * levels and scales), into a layout of its own (mmq_x). The weights are decoded from their
 * blocks to 8-bit levels as they are read (ck_levels.h) straight into the registers of the
 * mma's A fragment, and the 8-bit products (mma.sync m16n8k32, or m16n8k16 per half of a
 * unit where the halves have scales of their own) give each unit's integer sums S for 16
 * weight rows and 8 rows of x at once; each is then scaled as ck_levels.h writes out:
 *   y += (d_w d_x) S + (d_w off + m_w) (d_x X)
 * with d_x X (X: the sum of the unit's 8-bit activations) made once per unit of x.
 *
 * A block of MMQ_WARPS warps takes MMQ_ROWS weight rows and every row of x (up to
 * CK_MMQ_TOK; more go in passes): the warps split the row's units between them (warp w
 * takes groups w, w + MMQ_WARPS, ...: a group is what a lane loads at once, a Q4_K
 * super-block, half a Q6_K one, or one unit), and add their sums through shared memory at
 * the end. A lane of quad t holds 8 elements of each unit, the same for every format: 4t
 * .. 4t + 3 and 16 + 4t .. 16 + 4t + 3, so its A words are its two rows' levels there and
 * its B words the same elements of its row of x, which the layout puts side by side.
 */
#include "cuda/ck_device.h"
#include <stdint.h>

#include "cuda/ck.h"
#include "cuda/ck_levels.h"
#include "cuda/ck_mma.h"
#include "cuda/ck_q8.h"

namespace {

#define MMQ_WARPS 4
#define MMQ_ROWS 16

/* x as the kernels read it, for n8 rows (a multiple of 8; rows past x's are zeros):
 *   q  (n8, n_in) int8: each unit's 32 levels in the order mmq_slot gives, so that quad t's
 *      eight (elements 4t..4t+3, then 16+4t..16+4t+3) are the 8 bytes at 8t;
 *   ds (n_in / 32, n8) float2: per unit and row {d, d (X0 + X1)};
 *   dh (n_in / 32, n8) float2: per unit and row {d X0, d X1}.
 * A lane's two rows of C (2t, 2t + 1 of its tile of 8) are a float4 of ds or dh. */
struct mmq_x {
    const int8_t *q;
    const float2 *ds, *dh;
    int64_t n8;
};

__device__ __forceinline__ int mmq_slot(int l) { return 8 * ((l & 15) >> 2) + 4 * (l >> 4) + (l & 3); }

/* One warp per unit of the n8 rows: rows [n, n8) are zeros. */
__global__ void mmq_quantize_kernel(const float *x, int64_t n, int64_t n8, int64_t n_in, int8_t *q, float2 *ds,
                                    float2 *dh) {
    ck_pdl_entry();
    const int lane = threadIdx.x & 31;
    const int64_t n_units = n_in / 32, i = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (i >= n8 * n_units) return; /* i is the warp's: the whole warp leaves */
    const int64_t r = i / n_units, u = i % n_units;
    float d;
    int x0, x1;
    const int level = q8_level(r < n ? x[r * n_in + 32 * u + lane] : 0.0f, &d, &x0, &x1);
    q[r * n_in + 32 * u + mmq_slot(lane)] = (int8_t)level;
    if (lane == 0) {
        ds[u * n8 + r] = float2{d, d * (float)(x0 + x1)};
        dh[u * n8 + r] = float2{d * (float)x0, d * (float)x1};
    }
}

/* What a lane holds of one unit for its two weight rows (g and g + 8 of the block's 16):
 * the A fragment (mma_16832_s8's a) and per row the halves' scales d0, d1 and min terms
 * b0, b1 (b = d off + m). Where the halves share their scale only d0 and b0 are read. */
struct mmq_frag {
    uint32_t a[4];
    float d0[2], d1[2], b0[2], b1[2];
};

/* ==== Where a lane's levels come from: one policy per format (UNITS units a group, HALVES
 * when the halves of a unit have scales of their own; raw: a lane's loads of one group of
 * one row; load; frag: unit j of the group as an mmq_frag) ==== */

template <int T> struct halves_differ { enum { V = T == T_Q2_K || T == T_Q3_K || T == T_Q6_K }; };

/* Any format with a level decoder, a unit at a time: the lane decodes the whole unit
 * (iunit<T>) and keeps its 8 levels. */
template <int T> struct mmq_unit {
    enum { UNITS = 1, HALVES = halves_differ<T>::V };
    struct raw {
        uint32_t w0, w1;
        float d0, d1, b0, b1;
    };
    static __device__ __forceinline__ int64_t groups(int64_t n_in) { return n_in / 32; }
    static __device__ __forceinline__ void load(const uint8_t *row, int64_t gi, int t, raw &r) {
        iw o;
        iunit<T>(row, gi, o);
#pragma unroll
        for (int k = 0; k < 4; k++) /* constant indices: o stays in registers */
            if (k == t) r.w0 = o.q[k], r.w1 = o.q[4 + k];
        r.d0 = o.d0, r.d1 = o.d1;
        r.b0 = o.d0 * (float)o.off + o.m0, r.b1 = o.d1 * (float)o.off + o.m1;
    }
    static __device__ __forceinline__ void frag(const raw &r0, const raw &r1, int, mmq_frag &f) {
        f.a[0] = r0.w0, f.a[1] = r1.w0, f.a[2] = r0.w1, f.a[3] = r1.w1;
        f.d0[0] = r0.d0, f.d1[0] = r0.d1, f.b0[0] = r0.b0, f.b1[0] = r0.b1;
        f.d0[1] = r1.d0, f.d1[1] = r1.d1, f.b0[1] = r1.b0, f.b1[1] = r1.b1;
    }
};

/* Q4_K, a super-block at a time (rows 4-byte aligned): its 16-byte header, and of each pair
 * of units (2p, 2p + 1: the low and high nibbles of 32 bytes) the two words of the lane's
 * elements */
struct mmq_q4k {
    enum { UNITS = 8, HALVES = 0 };
    struct raw {
        uint4 h;
        uint32_t q[8];
    };
    static __device__ __forceinline__ int64_t groups(int64_t n_in) { return n_in / 256; }
    static __device__ __forceinline__ void load(const uint8_t *row, int64_t gi, int t, raw &r) {
        const uint32_t *b = (const uint32_t *)(row + 144 * gi);
        r.h = uint4{b[0], b[1], b[2], b[3]};
#pragma unroll
        for (int p = 0; p < 4; p++) r.q[2 * p] = b[4 + 8 * p + t], r.q[2 * p + 1] = b[4 + 8 * p + 4 + t];
    }
    static __device__ __forceinline__ void scales(const uint4 &h, int j, float *d, float *b) {
        int sc, m;
        k4_scale_min(h, j, &sc, &m);
        *d = __fmul_rn(h2f((uint16_t)(h.x & 0xFFFF)), (float)sc);
        *b = -__fmul_rn(h2f((uint16_t)(h.x >> 16)), (float)m);
    }
    static __device__ __forceinline__ void frag(const raw &r0, const raw &r1, int j, mmq_frag &f) {
        const int p = j >> 1, sh = 4 * (j & 1);
        f.a[0] = (r0.q[2 * p] >> sh) & 0x0F0F0F0Fu, f.a[2] = (r0.q[2 * p + 1] >> sh) & 0x0F0F0F0Fu;
        f.a[1] = (r1.q[2 * p] >> sh) & 0x0F0F0F0Fu, f.a[3] = (r1.q[2 * p + 1] >> sh) & 0x0F0F0F0Fu;
        scales(r0.h, j, &f.d0[0], &f.b0[0]);
        scales(r1.h, j, &f.d0[1], &f.b0[1]);
    }
};

/* Q6_K, half a super-block (its four units e = 0..3) at a time: of the half's low bits
 * ql[l] (units 0 and 2), ql[32 + l] (1 and 3) and its high bits qh[l] (all four), the
 * words of the lane's elements l; its 8 scales and the block's d. Levels minus 32, as
 * signed bytes (signed6): no offset. */
struct mmq_q6k {
    enum { UNITS = 4, HALVES = 1 };
    struct raw {
        uint32_t lo0[2], lo1[2], hi[2], sw[2];
        uint16_t d;
    };
    static __device__ __forceinline__ int64_t groups(int64_t n_in) { return n_in / 128; }
    static __device__ __forceinline__ void load(const uint8_t *row, int64_t gi, int t, raw &r) {
        const uint8_t *b = row + 210 * (gi >> 1);
        const int h = (int)(gi & 1);
#pragma unroll
        for (int s = 0; s < 2; s++) {
            ldw<1>(b + 64 * h + 16 * s + 4 * t, &r.lo0[s]);
            ldw<1>(b + 64 * h + 32 + 16 * s + 4 * t, &r.lo1[s]);
            ldw<1>(b + 128 + 32 * h + 16 * s + 4 * t, &r.hi[s]);
        }
        ldw<2>(b + 192 + 8 * h, r.sw);
        r.d = ld16(b + 208);
    }
    static __device__ __forceinline__ uint32_t word(const raw &r, int e, int s) {
        const uint32_t lo = ((e & 1 ? r.lo1[s] : r.lo0[s]) >> (4 * (e >> 1))) & 0x0F0F0F0Fu;
        return signed6(lo | ((r.hi[s] >> (2 * e)) & 0x03030303u) << 4);
    }
    static __device__ __forceinline__ float scale(const raw &r, int si) {
        return __fmul_rn(h2f(r.d), (float)(int8_t)(r.sw[si >> 2] >> (8 * (si & 3))));
    }
    static __device__ __forceinline__ void frag(const raw &r0, const raw &r1, int e, mmq_frag &f) {
        f.a[0] = word(r0, e, 0), f.a[1] = word(r1, e, 0), f.a[2] = word(r0, e, 1), f.a[3] = word(r1, e, 1);
        f.d0[0] = scale(r0, 2 * e), f.d1[0] = scale(r0, 2 * e + 1);
        f.d0[1] = scale(r1, 2 * e), f.d1[1] = scale(r1, 2 * e + 1);
        f.b0[0] = f.b1[0] = f.b0[1] = f.b1[1] = 0.0f;
    }
};

/* ==== The kernel ==== */

/* Unit u of the lane's two weight rows (f) times the unit of each tile of 8 rows of x,
 * added to acc[tile]: C's layout (ck_mma.h), rows g, g + 8 and x's rows 2t, 2t + 1. */
template <int HALVES, int NT>
__device__ __forceinline__ void mmq_unit_mul(const mmq_frag &f, int64_t u, int64_t n_in, const mmq_x &x,
                                             float acc[NT][4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const float4 *ds = (const float4 *)(x.ds + u * x.n8), *dh = (const float4 *)(x.dh + u * x.n8);
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        const uint2 b = *(const uint2 *)(x.q + (size_t)(8 * nt + g) * n_in + 32 * u + 8 * t);
        const float4 s = ds[4 * nt + t]; /* {d, d X} of x's rows 8 nt + 2t and + 1 */
        if (!HALVES) {
            int c[4] = {0, 0, 0, 0};
            const unsigned bw[2] = {b.x, b.y};
            mma_16832_s8(c, f.a, bw);
            acc[nt][0] += __fmul_rn(f.d0[0], s.x) * (float)c[0] + f.b0[0] * s.y;
            acc[nt][1] += __fmul_rn(f.d0[0], s.z) * (float)c[1] + f.b0[0] * s.w;
            acc[nt][2] += __fmul_rn(f.d0[1], s.x) * (float)c[2] + f.b0[1] * s.y;
            acc[nt][3] += __fmul_rn(f.d0[1], s.z) * (float)c[3] + f.b0[1] * s.w;
        } else {
            int c0[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0};
            const unsigned a0[2] = {f.a[0], f.a[1]}, a1[2] = {f.a[2], f.a[3]};
            mma_16816_s8(c0, a0, b.x);
            mma_16816_s8(c1, a1, b.y);
            const float4 h = dh[4 * nt + t]; /* {d X0, d X1} of the two rows */
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int r = i >> 1;
                const float dx = i & 1 ? s.z : s.x, h0 = i & 1 ? h.z : h.x, h1 = i & 1 ? h.w : h.y;
                const float w = f.d0[r] * (float)c0[i] + f.d1[r] * (float)c1[i];
                acc[nt][i] += dx * w + (f.b0[r] * h0 + f.b1[r] * h1);
            }
        }
    }
}

/* A block takes MMQ_ROWS rows of one of the parts (gemv_parts, ck_levels.h). GROUPED (a
 * mixture of experts' slots grouped by expert, ck_mmq_experts): blockIdx.y is a tile of
 * up to CK_MMQ_TOK rows of x of one expert (tiles, of which the first *n_tiles are live),
 * whose weights begin n_out rows per expert into each part, and whose outputs are rows
 * tile.row.. of the parts' outputs. */
template <class P, int NT, bool GROUPED>
__global__ void __launch_bounds__(32 * MMQ_WARPS)
    mmq_kernel(const gemv_parts ps, int64_t n_in, mmq_x x, int64_t n_tok, const ck_moe_tile *tiles,
               const int32_t *n_tiles) {
    ck_pdl_trigger();
    ck_moe_tile tl = {0, 0, 0};
    if (GROUPED) { /* the tile comes from the grouping kernel: no weight is loaded before the wait */
        ck_pdl_wait();
        if ((int)blockIdx.y >= *n_tiles) return; /* the whole block: the tile does not exist */
        tl = tiles[blockIdx.y];
        x.q += (size_t)tl.row * (size_t)n_in, x.ds += tl.row, x.dh += tl.row; /* tl.row: a multiple of 8 */
        n_tok = tl.n;
    }
    /* the block's part and its first row there */
    int64_t tile = blockIdx.x;
    ck_gemv_part part = ps.p[0];
    bool found = false;
#pragma unroll
    for (int k = 0; k < CK_GEMV_MAX_PARTS; k++) /* constant indices: the parts stay parameters */
        if (!found && k < ps.n) {
            const int64_t tiles = (ps.p[k].n_out + MMQ_ROWS - 1) / MMQ_ROWS;
            if (tile < tiles) found = true, part = ps.p[k];
            else tile -= tiles;
        }
    if (GROUPED) {
        part.W = (const uint8_t *)part.W + (size_t)tl.expert * (size_t)part.n_out * part.row_bytes;
        part.y += (size_t)tl.row * (size_t)part.n_out;
    }
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, w = threadIdx.x >> 5;
    const int64_t r0 = tile * MMQ_ROWS + g, r1 = r0 + 8, last = part.n_out - 1;
    /* rows past the part's end read its last row; their sums are not stored */
    const uint8_t *row0 = (const uint8_t *)part.W + (size_t)(r0 < last ? r0 : last) * part.row_bytes;
    const uint8_t *row1 = (const uint8_t *)part.W + (size_t)(r1 < last ? r1 : last) * part.row_bytes;
    const int64_t n_groups = P::groups(n_in);
    int64_t gi = w;
    typename P::raw c0 = {}, c1 = {};
    if (gi < n_groups) P::load(row0, gi, t, c0), P::load(row1, gi, t, c1);
    ck_pdl_wait(); /* the weights do not depend on the kernels before; x does */
    float acc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
    while (gi < n_groups) {
        /* the next group's loads are issued before this group is multiplied */
        typename P::raw n0 = c0, n1 = c1;
        if (gi + MMQ_WARPS < n_groups) P::load(row0, gi + MMQ_WARPS, t, n0), P::load(row1, gi + MMQ_WARPS, t, n1);
#pragma unroll
        for (int j = 0; j < P::UNITS; j++) {
            mmq_frag f;
            P::frag(c0, c1, j, f);
            mmq_unit_mul<P::HALVES, NT>(f, gi * P::UNITS + j, n_in, x, acc);
        }
        c0 = n0, c1 = n1;
        gi += MMQ_WARPS;
    }
    /* the warps' sums: red[w][x's row][weight row] */
    __shared__ float red[MMQ_WARPS][8 * NT][MMQ_ROWS + 1];
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) red[w][8 * nt + 2 * t + (i & 1)][g + 8 * (i >> 1)] = acc[nt][i];
    __syncthreads();
    for (int e = threadIdx.x; e < 8 * NT * MMQ_ROWS; e += 32 * MMQ_WARPS) {
        const int rr = e % MMQ_ROWS, xr = e / MMQ_ROWS;
        const int64_t r = tile * MMQ_ROWS + rr;
        if (xr < n_tok && r < part.n_out) {
            float s = 0.0f;
            for (int k = 0; k < MMQ_WARPS; k++) s += red[k][xr][rr];
            part.y[(size_t)xr * part.n_out + r] = s;
        }
    }
}

/* The tiles of 8 rows of x that a pass of n rows (n <= CK_MMQ_TOK) takes: 2, 4 or 8, the
 * kernel's instances */
int mmq_tiles(int64_t n) { return n <= 16 ? 2 : n <= 32 ? 4 : 8; }

/* x's n rows quantized into scratch in mmq_x's layout of n8 rows */
static mmq_x mmq_quantize(const float *x, int64_t n, int64_t n8, int64_t n_in, void *scratch, cudaStream_t st) {
    const int64_t units = n_in / 32;
    int8_t *q = (int8_t *)scratch;
    float2 *ds = (float2 *)(q + n8 * n_in), *dh = ds + n8 * units;
    CK_LAUNCH(blocks_for(n8 * units, 8), 256, 0, st, mmq_quantize_kernel)(x, n, n8, n_in, q, ds, dh);
    return mmq_x{q, ds, dh, n8};
}

/* The blocks of MMQ_ROWS weight rows that cover the parts */
static int64_t row_tiles(const gemv_parts &ps) {
    int64_t tiles = 0;
    for (int k = 0; k < ps.n; k++) tiles += (ps.p[k].n_out + MMQ_ROWS - 1) / MMQ_ROWS;
    return tiles;
}

/* One pass: the parts' products with n rows of x (n <= CK_MMQ_TOK), x quantized first */
template <class P>
void mmq_pass(const gemv_parts &ps, int64_t n_in, const float *x, int64_t n, void *scratch, cudaStream_t st) {
    const int nt = mmq_tiles(n);
    const mmq_x xa = mmq_quantize(x, n, 8 * nt, n_in, scratch, st);
    const dim3 grid((unsigned)row_tiles(ps)), block(32 * MMQ_WARPS);
    if (nt == 2) CK_LAUNCH(grid, block, 0, st, mmq_kernel<P, 2, false>)(ps, n_in, xa, n, nullptr, nullptr);
    else if (nt == 4) CK_LAUNCH(grid, block, 0, st, mmq_kernel<P, 4, false>)(ps, n_in, xa, n, nullptr, nullptr);
    else CK_LAUNCH(grid, block, 0, st, mmq_kernel<P, 8, false>)(ps, n_in, xa, n, nullptr, nullptr);
}

/* The grouped products (ck_mmq_experts): x's rows (n, a multiple of 8) quantized, then a
 * block per (MMQ_ROWS weight rows, tile) */
template <class P>
void mmq_grouped(const gemv_parts &ps, int64_t n_in, const float *x, int64_t n, const ck_moe_tile *tiles,
                 const int32_t *n_tiles, int64_t tiles_max, void *scratch, cudaStream_t st) {
    const mmq_x xa = mmq_quantize(x, n, n, n_in, scratch, st);
    const dim3 grid((unsigned)row_tiles(ps), (unsigned)tiles_max), block(32 * MMQ_WARPS);
    CK_LAUNCH(grid, block, 0, st, mmq_kernel<P, CK_MMQ_TOK / 8, true>)(ps, n_in, xa, 0, tiles, n_tiles);
}

/* Whether Q4_K's own decoder may read the parts (its rows 4-byte aligned) */
static bool aligned4(const gemv_parts &ps) {
    uintptr_t align = 0;
    for (int k = 0; k < ps.n; k++) align |= (uintptr_t)ps.p[k].W | ps.p[k].row_bytes;
    return align % 4 == 0;
}

/* The policy for a type: Q4_K's and Q6_K's own, the unit decoder for the other formats
 * that have one; false for the rest (nothing launched) */
template <int T, bool = has_iunit<T>::V> struct mmq_run {
    static bool run(const gemv_parts &, int64_t, const float *, int64_t, void *, cudaStream_t) { return false; }
    static bool grouped(const gemv_parts &, int64_t, const float *, int64_t, const ck_moe_tile *, const int32_t *,
                        int64_t, void *, cudaStream_t) {
        return false;
    }
};
template <int T> struct mmq_run<T, true> {
    static bool run(const gemv_parts &ps, int64_t n_in, const float *x, int64_t n, void *scratch, cudaStream_t st) {
        if (T == T_Q4_K && aligned4(ps)) mmq_pass<mmq_q4k>(ps, n_in, x, n, scratch, st);
        else if (T == T_Q6_K) mmq_pass<mmq_q6k>(ps, n_in, x, n, scratch, st);
        else mmq_pass<mmq_unit<T> >(ps, n_in, x, n, scratch, st);
        return true;
    }
    static bool grouped(const gemv_parts &ps, int64_t n_in, const float *x, int64_t n, const ck_moe_tile *tiles,
                        const int32_t *n_tiles, int64_t tiles_max, void *scratch, cudaStream_t st) {
        if (T == T_Q4_K && aligned4(ps)) mmq_grouped<mmq_q4k>(ps, n_in, x, n, tiles, n_tiles, tiles_max, scratch, st);
        else if (T == T_Q6_K) mmq_grouped<mmq_q6k>(ps, n_in, x, n, tiles, n_tiles, tiles_max, scratch, st);
        else mmq_grouped<mmq_unit<T> >(ps, n_in, x, n, tiles, n_tiles, tiles_max, scratch, st);
        return true;
    }
};

} // namespace

extern "C" size_t ck_mmq_scratch_bytes(int64_t n_in, int64_t n_tok) {
    return ck_mmq_experts_scratch_bytes(n_in, 8 * mmq_tiles(n_tok < CK_MMQ_TOK ? n_tok : CK_MMQ_TOK));
}

extern "C" int ck_mmq_parts(uint32_t type, const ck_gemv_part *parts, int n_parts, int64_t n_in, const float *x,
                            int64_t n_tok, void *scratch, void *stream) {
    if (n_parts <= 0 || n_parts > CK_GEMV_MAX_PARTS || n_tok <= 0 || n_in % 32 || !scratch || !ck_gemv_integer(type))
        return 0;
    for (int64_t t0 = 0; t0 < n_tok; t0 += CK_MMQ_TOK) {
        const int64_t n = n_tok - t0 < CK_MMQ_TOK ? n_tok - t0 : CK_MMQ_TOK;
        gemv_parts ps = {};
        ps.n = n_parts;
        for (int k = 0; k < n_parts; k++) ps.p[k] = parts[k], ps.p[k].y = parts[k].y + t0 * parts[k].n_out;
#define MMQ(T) mmq_run<T>::run(ps, n_in, x + t0 * n_in, n, scratch, (cudaStream_t)stream)
        CK_DISPATCH(type, MMQ)
#undef MMQ
    }
    return 1;
}

extern "C" size_t ck_mmq_experts_scratch_bytes(int64_t n_in, int64_t rows) {
    return (size_t)(rows * n_in) + (size_t)(2 * rows * (n_in / 32)) * sizeof(float2);
}

extern "C" int ck_mmq_experts(uint32_t type, const ck_gemv_part *parts, int n_parts, int64_t n_in, const float *x,
                              int64_t rows, const ck_moe_tile *tiles, const int32_t *n_tiles, int64_t tiles_max,
                              void *scratch, void *stream) {
    if (n_parts <= 0 || n_parts > CK_GEMV_MAX_PARTS || rows <= 0 || rows % 8 || n_in % 32 || !scratch ||
        tiles_max <= 0 || tiles_max > 65535 || !ck_gemv_integer(type))
        return 0;
    gemv_parts ps = {};
    ps.n = n_parts;
    for (int k = 0; k < n_parts; k++) ps.p[k] = parts[k];
    int done = 0;
#define MMQ(T) done = mmq_run<T>::grouped(ps, n_in, x, rows, tiles, n_tiles, tiles_max, scratch, (cudaStream_t)stream)
    CK_DISPATCH(type, MMQ)
#undef MMQ
    return done;
}
