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

/* Programmatic dependent launch (sm_90 and later; elsewhere, and in the emulator, these
 * are plain launches and no-ops):
 *
 *   CK_LAUNCH_PDL(grid, block, shared_bytes, stream, kernel)(args...)
 *       a launch the GPU may start while the kernel before it in the stream still runs,
 *       once every block of that one has passed ck_pdl_trigger (or ended): its blocks
 *       can load what does not depend on that kernel (a product's weights) meanwhile.
 *   ck_pdl_wait()     in a kernel launched so, in every thread, before it reads anything
 *       an earlier kernel wrote or writes anything one reads: waits until the kernel
 *       before has ended and its writes are visible (and that one waited for its own).
 *   ck_pdl_trigger()  at a kernel's start: lets the next launch start early.
 *
 * ck_pdl_enabled (ck_set_pdl) switches the launches to plain ones. */
extern int ck_pdl_enabled;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void ck_pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void ck_pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
#else
__device__ __forceinline__ void ck_pdl_wait() {}
__device__ __forceinline__ void ck_pdl_trigger() {}
#endif

#ifdef EDDY_CUDA_EMU
#define CK_LAUNCH_PDL CK_LAUNCH
#else
template <typename K> struct ck_pdl_launcher {
    K kernel;
    dim3 grid, block;
    size_t shared_bytes;
    cudaStream_t stream;
    template <typename... A> void operator()(A... args) const {
        if (!ck_pdl_enabled) {
            kernel<<<grid, block, shared_bytes, stream>>>(args...);
            return;
        }
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = shared_bytes, cfg.stream = stream;
        cfg.attrs = at, cfg.numAttrs = 1;
        cudaLaunchKernelEx(&cfg, kernel, args...);
    }
};
template <typename K> ck_pdl_launcher<K> ck_launch_pdl(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t st, K k) {
    return ck_pdl_launcher<K>{k, grid, block, shared_bytes, st};
}
#define CK_LAUNCH_PDL(grid, block, shm, stream, ...) \
    ck_launch_pdl(dim3(grid), dim3(block), (size_t)(shm), (cudaStream_t)(stream), __VA_ARGS__)
#endif

#endif
