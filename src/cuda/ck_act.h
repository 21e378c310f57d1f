/*
 * ck_act.h — the activation functions of the kernel files, written once so that every
 * kernel that applies one (a fused one and the plain one it replaces) rounds alike.
 */
#ifndef EDDY_CUDA_CK_ACT_H
#define EDDY_CUDA_CK_ACT_H

#include "cuda/ck_device.h"

static __device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
static __device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static __device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

#endif
