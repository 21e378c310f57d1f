/*
 * ck_block.h — reductions over a kernel's warp or block, shared by the kernel files.
 */
#ifndef EDDY_CUDA_CK_BLOCK_H
#define EDDY_CUDA_CK_BLOCK_H

#include "cuda/ck_device.h"

/* Sum of v over the warp (every lane calls it and gets the sum) */
static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Max of v over the warp (every lane calls it and gets the max) */
static __device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum of v over the block (blockDim.x a multiple of 32, at most 1024, blockDim.y 1); every
 * thread of the block calls it and gets the sum. */
static __device__ __forceinline__ float block_sum(float v) {
    __shared__ float part[32];
    v = warp_sum(v);
    const int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads(); /* part may still be read by an earlier call */
    if ((threadIdx.x & 31) == 0) part[w] = v;
    __syncthreads();
    float s = 0.0f;
    for (int i = 0; i < nw; i++) s += part[i];
    return s;
}

#endif
