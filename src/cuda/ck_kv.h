/*
 * ck_kv.h — where a position's keys and values live in the paged KV cache, for the kernel
 * files that read or write it (ck_mixers.cu, ck_flash.cu).
 */
#ifndef EDDY_CUDA_CK_KV_H
#define EDDY_CUDA_CK_KV_H

#include "cuda/ck_device.h"
#include <stdint.h>

#define KV_BLOCK 256 /* positions per KV block: state.h STATE_KV_BLOCK */

/* The cache row of position pos of a sequence whose block table is bt */
__device__ __forceinline__ int64_t kv_row(const int32_t *bt, int64_t pos) {
    return (int64_t)bt[pos / KV_BLOCK] * KV_BLOCK + pos % KV_BLOCK;
}

#endif
