/*
 * ck_device.h — what the kernel files (*.cu) use beyond C++: CUDA's half type, and two
 * macros for the only places where CUDA syntax is not a function call.
 *
 *   CK_LAUNCH(grid, block, shared_bytes, stream, kernel)(args...)   a kernel launch
 *   CK_DYNAMIC_SHARED(type, name);                                   the launch's dynamic
 *                                                                    shared memory as name
 *
 * Built by nvcc the first is a launch that may start early (programmatic dependent launch,
 * below), the second CUDA's own. With EDDY_CUDA_EMU (make CUDA_EMU=1) the same
 * sources are compiled by the host C++ compiler and run on the CPU by the emulator of
 * ck_emu.h, which is how the tests exercise every kernel and the GPU backend on a
 * machine without a GPU.
 */
#ifndef EDDY_CUDA_CK_DEVICE_H
#define EDDY_CUDA_CK_DEVICE_H

#include <stdint.h>

#ifdef EDDY_CUDA_EMU
#include "cuda/ck_emu.h"
#else
#include <cuda_fp16.h>
#define CK_LAUNCH(grid, block, shm, stream, ...) \
    ck_launch(dim3(grid), dim3(block), (size_t)(shm), (cudaStream_t)(stream), __VA_ARGS__)
#define CK_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

/* Programmatic dependent launch. On GPUs of compute capability 9.0 and later (when
 * ck_pdl_enabled, ck_set_pdl) every CK_LAUNCH lets the GPU start the kernel while the one
 * before it in the stream still runs, once every block of that one has called
 * ck_pdl_trigger (or ended); so the launch and the blocks' start overlap the kernel before,
 * and a product loads its weights meanwhile. Hence the rule for every kernel:
 *
 *   ck_pdl_trigger()  first: lets the next kernel start early;
 *   ck_pdl_wait()     in every thread, before it reads anything an earlier kernel wrote or
 *       writes anything one reads: waits until the kernel before has ended and its writes
 *       are visible (and that one waited for its own). ck_pdl_entry() is both, for the
 *       kernels that have nothing to do before.
 *
 * Elsewhere, and on the legacy stream (NULL), the launches are plain and these are no-ops
 * or return at once; the emulator stops at a block whose threads did not all call
 * ck_pdl_wait. */
extern int ck_pdl_enabled;

#if defined(EDDY_CUDA_EMU)
inline void ck_pdl_wait() { emu_pdl_wait(); }
inline void ck_pdl_trigger() {}
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void ck_pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void ck_pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
#else
__device__ __forceinline__ void ck_pdl_wait() {}
__device__ __forceinline__ void ck_pdl_trigger() {}
#endif
__device__ __forceinline__ void ck_pdl_entry() {
    ck_pdl_trigger();
    ck_pdl_wait();
}

/* The key head whose q and k the delta rule's value head h reads, for head_map as
 * gdn_head_map (gdn.h): 0, h mod n_k; 1, h / (n_v / n_k). */
__device__ __forceinline__ int64_t ck_key_head(int64_t h, int64_t n_k, int64_t n_v, int head_map) {
    return head_map == 0 ? h % n_k : h / (n_v / n_k);
}

/* Lets kernel fn have `bytes` of dynamic shared memory (past the 48 KiB every block may
 * have); false where the device has fewer */
static inline bool ck_allow_shared(const void *fn, size_t bytes) {
    if (bytes <= 48 * 1024) return true;
    if (cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) == cudaSuccess) return true;
    cudaGetLastError(); /* not a sticky error */
    return false;
}

/* Blocks of `per` threads (or other items) that cover n */
static inline unsigned blocks_for(int64_t n, int64_t per) { return (unsigned)((n + per - 1) / per); }

#ifndef EDDY_CUDA_EMU
template <typename K> struct ck_launcher {
    K kernel;
    dim3 grid, block;
    size_t shared_bytes;
    cudaStream_t stream;
    template <typename... A> void operator()(A... args) const {
        if (!ck_pdl_enabled || !stream) { /* the legacy stream (the kernel tests') launches plainly */
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
template <typename K> ck_launcher<K> ck_launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t st, K k) {
    return ck_launcher<K>{k, grid, block, shared_bytes, st};
}
#endif

#endif
