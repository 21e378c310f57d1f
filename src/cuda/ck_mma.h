/*
 * ck_mma.h — the tensor cores' m16n8k16 product (f16 operands, f32 sums), and the TF32 and
 * 8-bit integer ones below, each as one warp-wide call with its fragment layouts written out
 * (PTX's mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 here), so that a kernel places
 * operands and reads results by row and column instead of through opaque fragments.
 *
 * Lane l of the warp (1-D blocks: l = threadIdx.x % 32) has g = l / 4 and t = l % 4.
 * A register of A or B holds two f16, the lower index in the low 16 bits:
 *   A (16 x 16, row-major) a[0] = A[g][2t, 2t+1]      a[1] = A[g+8][2t, 2t+1]
 *                          a[2] = A[g][2t+8, 2t+9]    a[3] = A[g+8][2t+8, 2t+9]
 *   B (16 x 8, k by n)     b[0] = B[2t, 2t+1][g]      b[1] = B[2t+8, 2t+9][g]
 *   C (16 x 8, f32)        c[0] = C[g][2t]  c[1] = C[g][2t+1]  c[2] = C[g+8][2t]  c[3] = C[g+8][2t+1]
 * mma_16816(c, a, b): C += A B. Every lane of the warp must call it together.
 *
 * On the emulator the lanes swap their registers (emu_warp_gather) and each computes its
 * four sums in float, k in order: the products of two f16 are exact in f32 on both, the
 * order of the sums is the hardware's own there.
 */
#ifndef EDDY_CUDA_CK_MMA_H
#define EDDY_CUDA_CK_MMA_H

#include "cuda/ck_device.h"

/* the f16 of bits h (the low 16 bits) as a float */
__device__ __forceinline__ float ck_f16_bits_to_float(unsigned h) {
    __half_raw r;
    r.x = (unsigned short)(h & 0xffffu);
    return __half2float(__half(r));
}

#ifdef EDDY_CUDA_EMU
/* The operand registers of a lane */
struct emu_frag {
    unsigned a[4], b[2];
};
/* C += A B (K deep) in float, k in order, for this lane's four elements of C; a_at(all, row,
 * k) and b_at(all, k, col) read A[row][k] and B[k][col] from the warp's registers */
template <typename FA, typename FB>
inline void emu_mma_f32(float c[4], const unsigned a[4], const unsigned b[2], int K, FA a_at, FB b_at) {
    emu_frag mine = {{a[0], a[1], a[2], a[3]}, {b[0], b[1]}}, all[32];
    emu_warp_gather(&mine, all, sizeof mine);
    const int lane = (int)(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; i++) {
        const int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
        float s = c[i];
        for (int k = 0; k < K; k++) s += a_at(all, row, k) * b_at(all, k, col);
        c[i] = s;
    }
}
inline void mma_16816(float c[4], const unsigned a[4], const unsigned b[2]) {
    /* A[row][k] and B[k][col], found by the layouts above */
    emu_mma_f32(
        c, a, b, 16,
        [](const emu_frag *all, int row, int k) {
            return ck_f16_bits_to_float(all[(row & 7) * 4 + ((k & 7) >> 1)].a[(row >> 3) + 2 * (k >> 3)] >>
                                        (16 * (k & 1)));
        },
        [](const emu_frag *all, int k, int col) {
            return ck_f16_bits_to_float(all[col * 4 + ((k & 7) >> 1)].b[k >> 3] >> (16 * (k & 1)));
        });
}
#else
__device__ __forceinline__ void mma_16816(float c[4], const unsigned a[4], const unsigned b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

/* The TF32 product m16n8k8 (PTX's mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32): a
 * register of A or B holds one TF32 value (a float with its 13 low bits zero, ck_tf32);
 * C is as above, in f32.
 *   A (16 x 8)  a[0] = A[g][t]  a[1] = A[g+8][t]  a[2] = A[g][t+4]  a[3] = A[g+8][t+4]
 *   B (8 x 8)   b[0] = B[t][g]  b[1] = B[t+4][g]
 * mma_1688_tf32(c, a, b): C += A B; the products of two TF32 values are exact in f32.
 * ck_tf32_split(x, &hi, &lo): x = hi + lo to about 2^-22 of x, both TF32, so that three
 * products (lo hi, hi lo, hi hi) give what f32 operands would to that precision, with
 * f32's range (where f16 pairs would need scaling). */
#ifdef EDDY_CUDA_EMU
/* cvt.rna.tf32.f32: to 10 bits after the point, halves away from zero (finite x) */
inline unsigned ck_tf32(float x) { return (__float_as_uint(x) + 0x1000u) & 0xffffe000u; }
inline void mma_1688_tf32(float c[4], const unsigned a[4], const unsigned b[2]) {
    emu_mma_f32(
        c, a, b, 8,
        [](const emu_frag *all, int row, int k) {
            return __uint_as_float(all[(row & 7) * 4 + (k & 3)].a[(row >> 3) + 2 * (k >> 2)]);
        },
        [](const emu_frag *all, int k, int col) { return __uint_as_float(all[col * 4 + (k & 3)].b[k >> 2]); });
}
#else
__device__ __forceinline__ unsigned ck_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ void mma_1688_tf32(float c[4], const unsigned a[4], const unsigned b[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif
__device__ __forceinline__ void ck_tf32_split(float x, unsigned *hi, unsigned *lo) {
    *hi = ck_tf32(x);
    *lo = ck_tf32(x - __uint_as_float(*hi));
}

/* Products of f32 matrices in shared memory through mma_1688_tf32 in three parts: a
 * warp's 16 x 8 tile of A B at a time (ck_tile_product), each lane holding its c[4] as
 * mma_1688_tf32's C. */

/* An A fragment (16 x 8) in TF32 parts: A[r][k] at a[r ar + k ak] (ar = 1: a transposed) */
struct ck_tf32_a {
    unsigned hi[4], lo[4];
};
__device__ __forceinline__ ck_tf32_a ck_load_a(const float *a, int64_t ar, int64_t ak, int g, int t) {
    ck_tf32_a f;
    ck_tf32_split(a[g * ar + t * ak], &f.hi[0], &f.lo[0]);
    ck_tf32_split(a[(g + 8) * ar + t * ak], &f.hi[1], &f.lo[1]);
    ck_tf32_split(a[g * ar + (t + 4) * ak], &f.hi[2], &f.lo[2]);
    ck_tf32_split(a[(g + 8) * ar + (t + 4) * ak], &f.hi[3], &f.lo[3]);
    return f;
}
/* A B fragment (8 x 8): B[k][n] at b[k bk + n bn] */
struct ck_tf32_b {
    unsigned hi[2], lo[2];
};
__device__ __forceinline__ ck_tf32_b ck_load_b(const float *b, int64_t bk, int64_t bn, int g, int t) {
    ck_tf32_b f;
    ck_tf32_split(b[t * bk + g * bn], &f.hi[0], &f.lo[0]);
    ck_tf32_split(b[(t + 4) * bk + g * bn], &f.hi[1], &f.lo[1]);
    return f;
}
/* C += A B: the high parts' products into c, the cross terms into e (c + e at the end) */
__device__ __forceinline__ void ck_mma3(float c[4], float e[4], const ck_tf32_a &a, const ck_tf32_b &b) {
    mma_1688_tf32(e, a.lo, b.hi);
    mma_1688_tf32(e, a.hi, b.lo);
    mma_1688_tf32(c, a.hi, b.hi);
}

/* c += the (16 x 8) tile at row r0, column c0 of A B: A (16 x 8 kn) with A[r][k] at
 * a[(r0 + r) ar + k ak], B (8 kn x 8) with B[k][n] at b[k bk + (c0 + n) bn] */
__device__ __forceinline__ void ck_tile_product(float c[4], const float *a, int64_t ar, int64_t ak, int r0,
                                                const float *b, int64_t bk, int64_t bn, int c0, int64_t kn, int g,
                                                int t) {
    float e[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t kk = 0; kk < kn; kk++)
        ck_mma3(c, e, ck_load_a(a + r0 * ar + 8 * kk * ak, ar, ak, g, t),
                ck_load_b(b + 8 * kk * bk + c0 * bn, bk, bn, g, t));
#pragma unroll
    for (int i = 0; i < 4; i++) c[i] += e[i];
}

/* Element i of a lane's c: (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1) of the tile at
 * (r0, c0) of a matrix of rows ld apart */
__device__ __forceinline__ int ck_frag_row(int r0, int i, int g) { return r0 + g + (i >= 2 ? 8 : 0); }
__device__ __forceinline__ int ck_frag_col(int c0, int i, int t) { return c0 + 2 * t + (i & 1); }
__device__ __forceinline__ float &ck_frag_at(float *m, int64_t ld, int r0, int c0, int i, int g, int t) {
    return m[ck_frag_row(r0, i, g) * ld + ck_frag_col(c0, i, t)];
}

/* The tensor-core scans (ck_gdn_tiles.cu's delta rule tiles, ck_mixers.cu's Mamba-2
 * chunks): a block of CK_SCAN_WARPS warps per (run, head, CK_SCAN_COLS columns of the
 * state), the slice's rows CK_SCAN_SS floats apart (24: a B fragment's 32 loads, rows t and
 * columns g, fall in 32 different banks). */
#define CK_SCAN_COLS 16
#define CK_SCAN_WARPS 4
#define CK_SCAN_SS (CK_SCAN_COLS + 8)

/* A scan's state slice after a tile or chunk, el S + A^T W: S (rows x CK_SCAN_COLS, rows
 * CK_SCAN_SS apart), A (8 kn x rows) at a with rows lda apart (the keys, or Mamba-2's B), W
 * (8 kn x CK_SCAN_COLS, rows CK_SCAN_SS apart); warp w of the block takes 16 x 8 tiles in
 * turn and passes each element to put(i, c, value) (S itself: each lane rewrites only the
 * elements it read). */
template <typename F>
__device__ __forceinline__ void ck_scan_state(const float *S, int64_t rows, float el, const float *a, int64_t lda,
                                              const float *W, int64_t kn, int w, int g, int t, F put) {
    for (int64_t f = w; f < rows / 16 * (CK_SCAN_COLS / 8); f += CK_SCAN_WARPS) { /* the same for a whole warp */
        const int r0 = (int)(f / (CK_SCAN_COLS / 8)) * 16, c0 = (int)(f % (CK_SCAN_COLS / 8)) * 8;
        float s[4];
#pragma unroll
        for (int i = 0; i < 4; i++) s[i] = el * S[ck_frag_row(r0, i, g) * CK_SCAN_SS + ck_frag_col(c0, i, t)];
        ck_tile_product(s, a, 1, lda, r0, W, CK_SCAN_SS, 1, c0, kn, g, t); /* A^T: A[i][k] = a[k][i] */
#pragma unroll
        for (int i = 0; i < 4; i++) put(ck_frag_row(r0, i, g), ck_frag_col(c0, i, t), s[i]);
    }
}

/* The 8-bit integer products (PTX's mma.sync.aligned.m16n8k32 and m16n8k16
 * .row.col.s32.s8.s8.s32): a register of A or B holds four s8, the lowest index in the
 * low byte; C is as above, in s32.
 *   m16n8k32: A (16 x 32)  a[0] = A[g][4t..4t+3]       a[1] = A[g+8][4t..4t+3]
 *                          a[2] = A[g][16+4t..16+4t+3]  a[3] = A[g+8][16+4t..16+4t+3]
 *             B (32 x 8)   b[0] = B[4t..4t+3][g]        b[1] = B[16+4t..16+4t+3][g]
 *   m16n8k16: A (16 x 16)  a[0] = A[g][4t..4t+3]       a[1] = A[g+8][4t..4t+3]
 *             B (16 x 8)   b    = B[4t..4t+3][g]
 * mma_16832_s8(c, a, b) and mma_16816_s8(c, a, b): C += A B, exact (no saturation). */
#ifdef EDDY_CUDA_EMU
/* K = 16 k2 (k2 = 1 or 2): A[row][k] is byte k % 4 of lane (row % 8) * 4 + (k % 16) / 4's
 * register row / 8 + 2 (k / 16), B[k][col] of lane col * 4 + (k % 16) / 4's register k / 16 */
inline void mma_s8_emu(int c[4], const unsigned *a, const unsigned *b, int k2) {
    struct frag {
        unsigned a[4], b[2];
    } mine = {{a[0], a[1], k2 > 1 ? a[2] : 0u, k2 > 1 ? a[3] : 0u}, {b[0], k2 > 1 ? b[1] : 0u}}, all[32];
    emu_warp_gather(&mine, all, sizeof mine);
    const int lane = (int)(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; i++) {
        const int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
        int s = c[i];
        for (int k = 0; k < 16 * k2; k++) {
            const unsigned ar = all[(row & 7) * 4 + ((k & 15) >> 2)].a[(row >> 3) + 2 * (k >> 4)];
            const unsigned br = all[col * 4 + ((k & 15) >> 2)].b[k >> 4];
            s += (int)(int8_t)(ar >> (8 * (k & 3))) * (int)(int8_t)(br >> (8 * (k & 3)));
        }
        c[i] = s;
    }
}
inline void mma_16832_s8(int c[4], const unsigned a[4], const unsigned b[2]) { mma_s8_emu(c, a, b, 2); }
inline void mma_16816_s8(int c[4], const unsigned a[2], unsigned b) { mma_s8_emu(c, a, &b, 1); }
#else
__device__ __forceinline__ void mma_16832_s8(int c[4], const unsigned a[4], const unsigned b[2]) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_16816_s8(int c[4], const unsigned a[2], unsigned b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
                 "{%0, %1, %2, %3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b));
}
#endif

#endif
