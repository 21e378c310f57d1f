/*
 * ck_device.h — what the kernel files (*.cu) use beyond C++: CUDA's half type, and two
 * macros for the only places where CUDA syntax is not a function call.
 *
 *   CK_LAUNCH(grid, block, shared_bytes, stream, kernel)(args...)   a kernel launch
 *   CK_DYNAMIC_SHARED(type, name);                                   the launch's dynamic
 *                                                                    shared memory as name
 *
 * Built by nvcc these are CUDA's own. With EDDY_CUDA_EMU (make CUDA_EMU=1) the same
 * sources are compiled by the host C++ compiler and run on the CPU by the emulator of
 * ck_emu.h, which is how the tests exercise every kernel and the GPU backend on a
 * machine without a GPU.
 */
#ifndef EDDY_CUDA_CK_DEVICE_H
#define EDDY_CUDA_CK_DEVICE_H

#ifdef EDDY_CUDA_EMU
#include "cuda/ck_emu.h"
#else
#include <cuda_fp16.h>
#define CK_LAUNCH(grid, block, shm, stream, ...) __VA_ARGS__<<<grid, block, shm, stream>>>
#define CK_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

#endif
