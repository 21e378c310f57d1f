/*
 * ck_mma.h — the tensor cores' m16n8k16 product (f16 operands, f32 sums) as one warp-wide
 * call, with its fragment layouts written out (those of PTX's
 * mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32), so that a kernel places operands
 * and reads results by row and column instead of through opaque fragments.
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
inline void mma_16816(float c[4], const unsigned a[4], const unsigned b[2]) {
    struct frag {
        unsigned a[4], b[2];
    } mine = {{a[0], a[1], a[2], a[3]}, {b[0], b[1]}}, all[32];
    emu_warp_gather(&mine, all, sizeof mine);
    const int lane = (int)(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; i++) {
        const int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
        float s = c[i];
        for (int k = 0; k < 16; k++) {
            /* A[row][k] and B[k][col], found by the layouts above */
            const unsigned ar = all[(row & 7) * 4 + ((k & 7) >> 1)].a[(row >> 3) + 2 * (k >> 3)];
            const unsigned br = all[col * 4 + ((k & 7) >> 1)].b[k >> 3];
            s += ck_f16_bits_to_float(ar >> (16 * (k & 1))) * ck_f16_bits_to_float(br >> (16 * (k & 1)));
        }
        c[i] = s;
    }
}
#else
__device__ __forceinline__ void mma_16816(float c[4], const unsigned a[4], const unsigned b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

#endif
