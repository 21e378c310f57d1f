/*
 * ck_rows.h — 4-wide reads of the rows the chunked scans keep in shared memory, and their
 * slices of a head's state in and out
 * (ck_mixers.cu's Mamba-2 chunks, ck_gdn_tiles.cu's delta rule tiles).
 */
#ifndef EDDY_CUDA_CK_ROWS_H
#define EDDY_CUDA_CK_ROWS_H

#include "cuda/ck_device.h"

/* Rows of n floats (n a multiple of 4) kept CHUNK_STRIDE(n) floats apart: 16-byte
 * aligned, so a row is read 4 elements a load, and 4 banks apart, so 8 threads reading 4
 * elements of 8 different rows at once hit 32 different banks. */
#define CHUNK_STRIDE(n) ((n) + 4)

/* 4 elements of a row (16-byte aligned) in one load */
__device__ __forceinline__ float4 row4(const float *p) { return *(const float4 *)p; }
/* elements i..i+3 of column x of a slice of rows `cols` floats long */
__device__ __forceinline__ float4 col4(const float *S, int cols, int64_t i, int x) {
    return make_float4(S[i * cols + x], S[(i + 1) * cols + x], S[(i + 2) * cols + x], S[(i + 3) * cols + x]);
}
/* acc + a . b, the 4 products added in order */
__device__ __forceinline__ float dot4(float4 a, float4 b, float acc) {
    return fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, fmaf(a.x, b.x, acc))));
}
/* acc + a b for each of the 4 */
__device__ __forceinline__ float4 axpy4(float4 a, float b, float4 acc) {
    return make_float4(fmaf(a.x, b, acc.x), fmaf(a.y, b, acc.y), fmaf(a.z, b, acc.z), fmaf(a.w, b, acc.w));
}

/* A block's slice of a head's state in shared memory (rows ss floats apart, `width`
 * columns) from and to the head's columns j0.. (rows ld floats apart; `live` of the width
 * exist, the slice zero past them), by threads tid of nthr. head points at column j0. */
__device__ __forceinline__ void slice_in(float *S, int64_t ss, const float *head, int64_t ld, int64_t rows, int width,
                                         int live, int tid, int nthr) {
    for (int64_t e = tid; e < rows * width; e += nthr) {
        const int64_t i = e / width, c = e % width;
        S[i * ss + c] = c < live ? head[i * ld + c] : 0.0f;
    }
}
__device__ __forceinline__ void slice_out(const float *S, int64_t ss, float *head, int64_t ld, int64_t rows, int width,
                                          int live, int tid, int nthr) {
    for (int64_t e = tid; e < rows * width; e += nthr) {
        const int64_t i = e / width, c = e % width;
        if (c < live) head[i * ld + c] = S[i * ss + c];
    }
}

#endif
