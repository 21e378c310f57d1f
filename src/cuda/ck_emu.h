/*
 * ck_emu.h — CUDA's device-side language as plain C++, so the kernel files run on the
 * CPU (make CUDA_EMU=1; the runtime is tests/cuda/emu_runtime.cpp).
 *
 * A launch runs its blocks one after the other; the threads of a block are fibers
 * (ucontext) that switch only at __syncthreads and warp shuffles: a barrier releases
 * when every thread of the block that has not returned waits at it, a shuffle when every
 * such thread of the warp does (each gets its partner's value, or its own when the
 * partner has returned). __shared__ variables are static (one block at a time). A
 * barrier nobody can pass aborts with a message: the emulator finds missing or
 * divergent barriers, wrong indexing and wrong results. The threads take their turns, and
 * the blocks theirs, by index, or in reverse or random order (EDDY_EMU_ORDER, in
 * emu_runtime.cpp): a result that changes with the order shows a race, a thread reading
 * what another writes without a barrier or shuffle between them. A launch's pointer
 * arguments, the copies' and memsets' device sides and cuBLAS's matrices must be device
 * memory (kernels may also take pinned host memory), and a copy's host side must not be:
 * anything else stops the emulator; so does a kernel's access past the end of a device
 * allocation or of its dynamic shared memory (an inaccessible page follows each), a load
 * or store from an address not aligned to its type (-fsanitize=alignment: a float4 from
 * one not a multiple of 16 faults on a GPU), and a launch beyond CUDA's limits. It
 * cannot find a host pointer inside a struct passed by value or stored in device memory,
 * an access before a buffer's start or within what its size is rounded up to (256 bytes
 * for device memory, 16 for shared), an overrun of a static __shared__ array, two
 * threads' plain read-modify-writes of one word between barriers (each turn runs whole,
 * so neither is lost), or anything about speed.
 */
#ifndef EDDY_CUDA_CK_EMU_H
#define EDDY_CUDA_CK_EMU_H

#include <cuda_fp16.h>         /* __half and its conversions have host versions */
#include <cuda_runtime_api.h> /* cudaError_t, cudaStream_t, dim3, float4: host-side types */

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>


/* the qualifiers the host headers map to attributes: nothing here, shared is static */
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __constant__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __constant__
#define __forceinline__ inline
#define __launch_bounds__(...)

inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u;
}
/* single roundings: the emulator is compiled with -ffp-contract=off */
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
/* the low word of (hi:lo) >> (shift & 31) */
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)((((uint64_t)hi << 32) | lo) >> (shift & 31));
}
/* c + the sum of the products of a's and b's four signed bytes */
inline int __dp4a(int a, int b, int c) {
    for (int k = 0; k < 4; k++) c += (int)(int8_t)(a >> (8 * k)) * (int)(int8_t)(b >> (8 * k));
    return c;
}

struct emu_idx {
    unsigned x, y, z;
};
const emu_idx &emu_thread_idx();
const emu_idx &emu_block_idx();
const emu_idx &emu_block_dim();
const emu_idx &emu_grid_dim();
#define threadIdx (emu_thread_idx())
#define blockIdx (emu_block_idx())
#define blockDim (emu_block_dim())
#define gridDim (emu_grid_dim())

void __syncthreads();
float __shfl_xor_sync(unsigned mask, float v, int lane_mask);
/* ck_pdl_wait (ck_device.h) in the emulator: notes that the thread waited, which every
 * thread must have done when its block ends */
void emu_pdl_wait();
/* a barrier of the warp's live lanes (a shuffle whose value nobody reads) */
void __syncwarp(unsigned mask = 0xffffffffu);
/* Warp-wide: every live lane of the warp passes `bytes` of its own at mine, and gets all
 * 32 lanes' (lane i's at all + i * bytes; zeros for a lane that has returned): what
 * ck_mma.h builds the tensor cores' products from. */
void emu_warp_gather(const void *mine, void *all, size_t bytes);
inline int __shfl_xor_sync(unsigned, int v, int lane_mask) {
    int all[32];
    emu_warp_gather(&v, all, sizeof v);
    return all[(threadIdx.x & 31) ^ lane_mask];
}
inline double __shfl_xor_sync(unsigned, double v, int lane_mask) {
    double all[32];
    emu_warp_gather(&v, all, sizeof v);
    return all[(threadIdx.x & 31) ^ lane_mask];
}
/* A block's threads switch only at barriers and shuffles, so an atomic add is a plain one */
inline int atomicAdd(int *p, int v) {
    const int old = *p;
    *p = old + v;
    return old;
}
inline unsigned atomicMax(unsigned *p, unsigned v) {
    const unsigned old = *p;
    *p = old > v ? old : v;
    return old;
}
void *emu_dynamic_shared();
#define CK_DYNAMIC_SHARED(type, name) type *name = (type *)emu_dynamic_shared()

/* Runs body on every thread of every block of the grid (emu_runtime.cpp). A kernel (fn)
 * gets more than 48 KiB of dynamic shared memory only after cudaFuncSetAttribute allowed
 * it, as on the GPU; the emulator stops otherwise. */
void emu_run(const void *fn, const char *name, dim3 grid, dim3 block, size_t shared_bytes,
             const std::function<void()> &body);
/* While a stream is being captured into a graph, launches are recorded (their arguments
 * copied) instead of run: emu_record takes the launch and returns true. */
bool emu_record(const std::function<void()> &launch);
/* The same for a kernel launched on stream: a launch on any other stream than the one
 * being captured stops the emulator (CUDA would fail the capture). */
bool emu_record_on(const void *stream, const std::function<void()> &launch);

/* Where a kernel's pointer arguments may point on a GPU: into memory from cudaMalloc (or
 * one past its end), or into pinned host memory from cudaMallocHost, or nowhere (NULL).
 * A launch with any other pointer — pageable host memory, freed device memory — stops
 * the emulator, naming the argument: on a GPU it would read garbage or fault. */
bool emu_device_reachable(const void *p);
void emu_bad_argument(int i, const char *kernel);
template <typename A> void emu_check_argument(const A &a, int i, const char *kernel) {
    if constexpr (std::is_pointer<A>::value)
        if (!emu_device_reachable((const void *)a)) emu_bad_argument(i, kernel);
}

template <typename K> struct emu_launcher {
    K kernel;
    const char *name; /* the kernel as CK_LAUNCH names it, for messages */
    dim3 grid, block;
    size_t shared_bytes;
    const void *stream;
    template <typename... A> void operator()(A... args) const {
        int i = 0;
        (emu_check_argument(args, i++, name), ...);
        const K k = kernel;
        const char *nm = name;
        const dim3 g = grid, b = block;
        const size_t shm = shared_bytes;
        const void *fn = reinterpret_cast<const void *>(k);
        if (emu_record_on(stream, [=] { emu_run(fn, nm, g, b, shm, [&] { k(args...); }); })) return;
        emu_run(fn, name, grid, block, shared_bytes, [&] { kernel(args...); });
    }
};
template <typename K>
emu_launcher<K> emu_launch(dim3 grid, dim3 block, size_t shared_bytes, const void *stream, const char *name,
                           K kernel) {
    return emu_launcher<K>{kernel, name, grid, block, shared_bytes, stream};
}
#define CK_LAUNCH(grid, block, shm, stream, ...) \
    emu_launch(dim3(grid), dim3(block), (size_t)(shm), (const void *)(stream), #__VA_ARGS__, __VA_ARGS__)

#endif
