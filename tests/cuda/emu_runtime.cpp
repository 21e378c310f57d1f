/*
 * emu_runtime.cpp — the CPU side of the CUDA emulator (src/cuda/ck_emu.h): the fiber
 * scheduler that runs a launch's threads, and the CUDA runtime and cuBLAS functions
 * eddy calls, on host memory. Linked instead of libcudart and libcublas by
 * `make CUDA_EMU=1`.
 */
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cuda/ck_device.h" /* ck_emu.h, and ck_pdl_enabled */
#include "quant/fp16.h"

/* ==== Fibers ==== */

namespace {

enum { RUN, AT_BARRIER, AT_SHUFFLE, AT_GATHER, DONE };
const size_t STACK = 128 * 1024;

/* A fiber starts on its own stack through makecontext/setcontext; after that, switches
 * use _setjmp/_longjmp, which do not save and restore the signal mask (a system call
 * each time with swapcontext). */
struct fiber {
    ucontext_t ctx;
    jmp_buf jb;
    bool started = false;
    char *stack = nullptr;
    int state = RUN;
    float shfl_val = 0, shfl_res = 0;
    int shfl_mask = 0;
    const void *gather_src = nullptr; /* emu_warp_gather's arguments */
    void *gather_dst = nullptr;
    size_t gather_bytes = 0;
    emu_idx tid{};
    bool waited = false; /* called ck_pdl_wait */
};

struct launch {
    std::vector<fiber> fibers;
    jmp_buf sched;
    size_t cur = 0, n = 0;
    emu_idx block{}, bdim{}, gdim{};
    unsigned char *shared = nullptr; /* the launch's dynamic shared memory: it ends at shared_guard */
    size_t shared_bytes = 0;
    const std::function<void()> *body = nullptr;
};

launch L;

void trampoline() {
    (*L.body)();
    L.fibers[L.cur].state = DONE;
    _longjmp(L.sched, 1);
}

void suspend(int state) {
    fiber &f = L.fibers[L.cur];
    f.state = state;
    if (_setjmp(f.jb) == 0) _longjmp(L.sched, 1);
}

/* Runs fiber i until it waits or returns. */
void resume(size_t i) {
    L.cur = i;
    fiber &f = L.fibers[i];
    if (_setjmp(L.sched) != 0) return;
    if (!f.started) {
        f.started = true;
        setcontext(&f.ctx);
    }
    _longjmp(f.jb, 1);
}

/* The gather of the warp from w0 to w1, all of whose live threads wait at one. */
void release_gather(size_t w0, size_t w1) {
    const size_t bytes = L.fibers[w0].gather_bytes;
    for (size_t i = w0; i < w1; i++)
        if (L.fibers[i].state == AT_GATHER && L.fibers[i].gather_bytes != bytes) {
            fprintf(stderr, "emu: the lanes of a warp gather different sizes (%zu, %zu bytes)\n", bytes,
                    L.fibers[i].gather_bytes);
            abort();
        }
    for (size_t i = w0; i < w1; i++) {
        fiber &f = L.fibers[i];
        if (f.state != AT_GATHER || !bytes) continue;
        for (size_t p = w0; p < w0 + 32; p++) {
            unsigned char *to = (unsigned char *)f.gather_dst + (p - w0) * bytes;
            if (p < w1 && L.fibers[p].state == AT_GATHER) memcpy(to, L.fibers[p].gather_src, bytes);
            else memset(to, 0, bytes);
        }
    }
}

/* Releases what can go on after every thread stopped: a warp whose live threads all
 * wait at a shuffle (or all at a gather), else the block when all its live threads wait
 * at the barrier. */
bool release() {
    bool any = false;
    for (size_t w0 = 0; w0 < L.n; w0 += 32) {
        const size_t w1 = w0 + 32 < L.n ? w0 + 32 : L.n;
        int kind = -1; /* AT_SHUFFLE or AT_GATHER where every live thread waits at that */
        for (size_t i = w0; i < w1; i++) {
            const int st = L.fibers[i].state;
            if (st == DONE) continue;
            if (kind == -1 && (st == AT_SHUFFLE || st == AT_GATHER)) kind = st;
            else if (st != kind) kind = -2;
        }
        if (kind < 0) continue;
        if (kind == AT_GATHER) release_gather(w0, w1);
        else
            for (size_t i = w0; i < w1; i++) {
                fiber &f = L.fibers[i];
                if (f.state != AT_SHUFFLE) continue;
                const size_t p = w0 + (((i - w0) ^ (size_t)f.shfl_mask) & 31);
                f.shfl_res = p < w1 && L.fibers[p].state == AT_SHUFFLE ? L.fibers[p].shfl_val : f.shfl_val;
            }
        for (size_t i = w0; i < w1; i++)
            if (L.fibers[i].state == kind) L.fibers[i].state = RUN;
        any = true;
    }
    if (any) return true;
    bool all = true, some = false;
    for (size_t i = 0; i < L.n; i++) {
        if (L.fibers[i].state == DONE) continue;
        all &= L.fibers[i].state == AT_BARRIER;
        some = true;
    }
    if (!all || !some) return false;
    for (size_t i = 0; i < L.n; i++)
        if (L.fibers[i].state == AT_BARRIER) L.fibers[i].state = RUN;
    return true;
}

} // namespace

const emu_idx &emu_thread_idx() { return L.fibers[L.cur].tid; }
const emu_idx &emu_block_idx() { return L.block; }
const emu_idx &emu_block_dim() { return L.bdim; }
const emu_idx &emu_grid_dim() { return L.gdim; }
void *emu_dynamic_shared() { return L.shared; }

void __syncthreads() { suspend(AT_BARRIER); }

float __shfl_xor_sync(unsigned, float v, int lane_mask) {
    fiber &f = L.fibers[L.cur];
    f.shfl_val = v;
    f.shfl_mask = lane_mask;
    suspend(AT_SHUFFLE);
    return L.fibers[L.cur].shfl_res;
}

void emu_pdl_wait() { L.fibers[L.cur].waited = true; }

void __syncwarp(unsigned mask) { __shfl_xor_sync(mask, 0.0f, 0); }

void emu_warp_gather(const void *mine, void *all, size_t bytes) {
    fiber &f = L.fibers[L.cur];
    f.gather_src = mine, f.gather_dst = all, f.gather_bytes = bytes;
    suspend(AT_GATHER);
}

namespace {
/* the dynamic shared memory each kernel was allowed beyond the default (cudaFuncSetAttribute) */
std::mutex shared_mu;
std::unordered_map<const void *, int> shared_allowed;
const size_t SHARED_DEFAULT = 48 * 1024;
/* the most a kernel may be allowed: sm_90's 227 KiB, or EDDY_EMU_SHARED_OPTIN bytes (another
 * GPU's: 99 KiB on sm_86 and sm_89), read at each call so that a test can change it */
size_t shared_most() {
    const char *e = getenv("EDDY_EMU_SHARED_OPTIN");
    return e && *e ? (size_t)strtoull(e, nullptr, 10) : 227 * 1024;
}
} // namespace

namespace {

/* The order the threads of a block take their turns between two barriers or shuffles, and
 * the order of a launch's blocks (EDDY_EMU_ORDER): any order is one a GPU may run, and a
 * kernel whose result depends on it has a race — a thread reading what another writes
 * before a barrier between them, a block reading another block's output. `forward`
 * (the default) runs them by index, `reverse` the other way round, and `shuffle[:SEED]` a
 * new random order at each turn (the seed is printed once, to replay). */
enum sched_order { FORWARD, REVERSE, SHUFFLE };
uint64_t shuffle_state = 0;

sched_order order() {
    static int how = -1;
    if (how >= 0) return (sched_order)how;
    const char *e = getenv("EDDY_EMU_ORDER");
    how = FORWARD;
    if (!e || !*e || !strcmp(e, "forward")) return FORWARD;
    if (!strcmp(e, "reverse")) return (sched_order)(how = REVERSE);
    if (strncmp(e, "shuffle", 7) || (e[7] && e[7] != ':')) {
        fprintf(stderr, "emu: EDDY_EMU_ORDER=%s: expected forward, reverse, shuffle or shuffle:SEED\n", e);
        abort();
    }
    shuffle_state = e[7] ? strtoull(e + 8, nullptr, 10) : (uint64_t)time(nullptr) ^ (uint64_t)clock();
    fprintf(stderr, "emu: threads and blocks shuffled (replay with EDDY_EMU_ORDER=shuffle:%llu)\n",
            (unsigned long long)shuffle_state);
    return (sched_order)(how = SHUFFLE);
}

/* splitmix64: the shuffles' random numbers */
uint64_t shuffle_next() {
    uint64_t z = (shuffle_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Puts the indices in v (0..n-1 by index) in the turn order how asks for. */
void arrange(std::vector<size_t> &v, sched_order how) {
    if (how == REVERSE) std::reverse(v.begin(), v.end());
    if (how == SHUFFLE)
        for (size_t i = v.size(); i > 1; i--) std::swap(v[i - 1], v[shuffle_next() % i]);
}

/* Runs one block of the launch L describes: its threads as fibers, in turns until all
 * have returned. */
void run_block(emu_idx at, dim3 block, sched_order how) {
    const size_t n = L.n;
    L.block = at;
    for (size_t i = 0; i < n; i++) {
        fiber &f = L.fibers[i];
        f.state = RUN;
        f.started = false;
        f.waited = false;
        const size_t plane = (size_t)block.x * block.y;
        f.tid = {(unsigned)(i % block.x), (unsigned)(i / block.x % block.y), (unsigned)(i / plane)};
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = STACK;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, trampoline, 0);
    }
    std::vector<size_t> turns(n);
    for (;;) {
        for (size_t i = 0; i < n; i++) turns[i] = i;
        arrange(turns, how);
        for (size_t i : turns)
            if (L.fibers[i].state == RUN) resume(i);
        bool live = false;
        for (size_t i = 0; i < n && !live; i++) live = L.fibers[i].state != DONE;
        if (!live) break;
        if (!release()) {
            fprintf(stderr, "emu: block (%u, %u, %u) cannot go on: its threads wait at different barriers or "
                            "shuffles\n", at.x, at.y, at.z);
            abort();
        }
    }
    /* every launch may start early on a GPU (ck_device.h): a thread that never waited may
     * have read what the kernel before wrote */
    for (size_t i = 0; i < n; i++)
        if (!L.fibers[i].waited) {
            fprintf(stderr, "emu: thread %zu of block (%u, %u, %u) returned without ck_pdl_wait\n", i, at.x, at.y,
                    at.z);
            abort();
        }
}

} // namespace

/* Kernel launches run so far: what a test counts to see that a step took its fused kernels */
static std::atomic<long long> launches_run{0};
extern "C" long long emu_launches(void) { return launches_run; }

/* Operations on the legacy stream (cudaMemcpy, cudaMemset, a launch or an asynchronous
 * copy given stream 0, a wait for it) and waits for the whole device: an engine makes
 * none, its work all going to its own stream, which a test counts */
static std::atomic<long long> legacy_ops{0};
extern "C" long long emu_legacy_ops(void) { return legacy_ops; }
/* Counts one; with EDDY_EMU_LEGACY_STREAM=fail (the command-line suites' setting) stops */
namespace {
void invalidate_blocking_captures();
}
static void legacy_op(const char *what) {
    legacy_ops++;
    invalidate_blocking_captures();
    const char *e = getenv("EDDY_EMU_LEGACY_STREAM");
    if (!e || strcmp(e, "fail")) return;
    fprintf(stderr, "emu: %s on the legacy stream (EDDY_EMU_LEGACY_STREAM=fail)\n", what);
    abort();
}
/* Copies between device memory and pageable host memory (neither device nor pinned
 * memory): what a test counts to see that session files go through pinned memory */
static std::atomic<long long> pageable_copies{0};
extern "C" long long emu_pageable_copies(void) { return pageable_copies; }

/* The kernel running now, for the message of an access past a device allocation's end */
static const char *running_kernel = nullptr;

/* Dynamic shared memory lies at the end of a mapping followed by an inaccessible page
 * (shared_guard), so that a kernel reading or writing past its end faults (on_fault);
 * the mapping grows to the largest launch's. Filled with 0xa5, not zero: kernels must
 * write before they read. */
static unsigned char *shared_guard = nullptr;
static size_t shared_room = 0;
static size_t page_bytes();
static void catch_overruns();
static void place_shared(size_t bytes) {
    const size_t page = page_bytes(), need = (bytes + 15) / 16 * 16;
    if (need > shared_room || !shared_guard) {
        if (shared_guard) munmap(shared_guard - shared_room, shared_room + page);
        const size_t room = (need + page - 1) / page * page + page;
        unsigned char *base = (unsigned char *)mmap(NULL, room + page, PROT_READ | PROT_WRITE,
                                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED || mprotect(base + room, page, PROT_NONE) != 0) {
            fprintf(stderr, "emu: no memory for %zu bytes of dynamic shared memory\n", bytes);
            abort();
        }
        catch_overruns();
        shared_guard = base + room, shared_room = room;
    }
    L.shared = shared_guard - need, L.shared_bytes = bytes;
    memset(L.shared, 0xa5, need);
}

/* EDDY_EMU_FAIL_FILE=PATH stands for a GPU that faults: once PATH exists, the next
 * launch does not run and the device keeps the error, as a GPU keeps a sticky one (an
 * illegal address): no kernel or copy runs after it, and cudaGetLastError,
 * cudaDeviceSynchronize and the copies report it. */
static std::atomic<cudaError_t> sticky_error{cudaSuccess};
/* The device back (a test's stand-in for a new process) */
extern "C" void emu_clear_fault(void) { sticky_error = cudaSuccess; }
static bool device_faulted() {
    const char *path = getenv("EDDY_EMU_FAIL_FILE");
    if (sticky_error == cudaSuccess && path && access(path, F_OK) == 0) {
        fprintf(stderr, "emu: %s exists: the device faults from this launch on\n", path);
        sticky_error = cudaErrorIllegalAddress;
    }
    return sticky_error != cudaSuccess;
}

/* The emulated device runs one piece of work (a launch, a copy, a product) at a time,
 * whichever host thread asks: its fibers, shared memory and counters are one set. */
static std::recursive_mutex device_mu;

void emu_run(const void *fn, const char *name, dim3 grid, dim3 block, size_t shared_bytes,
             const std::function<void()> &body) {
    std::lock_guard<std::recursive_mutex> hold(device_mu);
    if (device_faulted()) return;
    launches_run++;
    running_kernel = name;
    static FILE *trace = getenv("EDDY_EMU_TRACE") ? fopen(getenv("EDDY_EMU_TRACE"), "w") : nullptr;
    if (trace) fprintf(trace, "%s\n", name), fflush(trace); /* each kernel run, by name */
    const size_t n = (size_t)block.x * block.y * block.z;
    /* CUDA's limits: a GPU refuses the launch beyond them */
    if (n == 0 || n > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu ||
        grid.y > 65535 || grid.z > 65535) {
        fprintf(stderr, "emu: bad launch of %s: grid %u x %u x %u, block %u x %u x %u\n", name, grid.x, grid.y, grid.z,
                block.x, block.y, block.z);
        abort();
    }
    if (shared_bytes > SHARED_DEFAULT) {
        std::lock_guard<std::mutex> lock(shared_mu);
        const auto it = shared_allowed.find(fn);
        if (it == shared_allowed.end() || (size_t)it->second < shared_bytes || shared_bytes > shared_most()) {
            fprintf(stderr, "emu: a launch with %zu bytes of dynamic shared memory, more than the kernel was "
                            "allowed (cudaFuncSetAttribute)\n", shared_bytes);
            abort();
        }
    }
    if (L.fibers.size() < n) L.fibers.resize(n);
    for (size_t i = 0; i < n; i++)
        if (!L.fibers[i].stack) L.fibers[i].stack = (char *)malloc(STACK);
    place_shared(shared_bytes);
    L.n = n, L.body = &body;
    L.bdim = {block.x, block.y, block.z}, L.gdim = {grid.x, grid.y, grid.z};
    const sched_order how = order();
    std::vector<size_t> blocks((size_t)grid.x * grid.y * grid.z);
    for (size_t b = 0; b < blocks.size(); b++) blocks[b] = b;
    arrange(blocks, how);
    for (size_t b : blocks)
        run_block({(unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y), (unsigned)(b / ((size_t)grid.x * grid.y))},
                  block, how);
    running_kernel = nullptr;
}

/* ==== Streams and graphs ==== */

namespace {

/* A graph is the list of launches recorded while its stream was captured. */
struct emu_graph {
    std::vector<std::function<void()>> launches;
};
/* A thread's capture (CUDA's cudaStreamCaptureModeThreadLocal: another thread's work
 * goes on as usual) */
thread_local emu_graph *capturing = nullptr;
thread_local cudaStream_t capture_stream; /* the stream being captured */
/* EDDY_EMU_PDL_CAPTURE_FAILS=1 stands for a driver that cannot capture programmatic
 * dependent launches: a capture with a launch made while ck_pdl_enabled fails at its end */
thread_local bool capture_refused = false;

/* A stream is one byte: whether it waits for the legacy stream (cudaStreamCreate) or not
 * (cudaStreamNonBlocking). The captures of blocking streams under way, in any thread: an
 * operation on the legacy stream meanwhile invalidates them (it would wait for them). */
std::mutex captures_mu;
std::map<emu_graph *, bool> blocking_captures; /* graph -> invalidated */

/* A legacy-stream operation: every blocking stream's capture under way fails at its end. */
void invalidate_blocking_captures() {
    std::lock_guard<std::mutex> hold(captures_mu);
    for (auto &c : blocking_captures) c.second = true;
}

/* The runtime calls that must not happen inside the calling thread's capture (they would
 * run at once, not at the graph's launch): the emulator stops there, as CUDA fails the
 * capture. */
void not_while_capturing(const char *what) {
    if (!capturing) return;
    fprintf(stderr, "emu: %s while a stream is being captured\n", what);
    abort();
}

} // namespace

bool emu_record(const std::function<void()> &launch) {
    if (!capturing) return false;
    capturing->launches.push_back(launch);
    /* EDDY_EMU_CAPTURE_US=N: each recorded launch takes N microseconds, so that a capture
     * lasts as long as the other threads' steps (a test of two engines in two threads) */
    const char *us = getenv("EDDY_EMU_CAPTURE_US");
    if (us && atoi(us) > 0) usleep((useconds_t)atoi(us));
    return true;
}

bool emu_record_on(const void *stream, const std::function<void()> &launch) {
    if (!stream) legacy_op("a launch");
    if (capturing && (cudaStream_t)stream != capture_stream) {
        /* CUDA fails the capture (the legacy stream waits for the captured one) */
        fprintf(stderr, "emu: a launch on %s while another stream is being captured\n",
                stream ? "a stream" : "the legacy stream (NULL)");
        abort();
    }
    const char *refuse = getenv("EDDY_EMU_PDL_CAPTURE_FAILS");
    if (capturing && ck_pdl_enabled && stream && refuse && !strcmp(refuse, "1")) capture_refused = true;
    return emu_record(launch);
}

/* Device memory: EDDY_EMU_GPU_MIB (default 16384; fractions too) of it, counted over the live allocations.
 * The live allocations of device and of pinned host memory, by address, say where a
 * pointer points (emu_device_reachable, and the copies' directions). */
static std::mutex mem_lock;
static std::map<uintptr_t, size_t> mem_live, pinned_live;
static size_t mem_used;

/* Whether p is inside (or one past the end of) a live allocation of `live` */
static bool inside(const std::map<uintptr_t, size_t> &live, const void *p) {
    auto it = live.upper_bound((uintptr_t)p);
    if (it == live.begin()) return false;
    --it;
    return (uintptr_t)p <= it->first + it->second;
}
static bool on_device(const void *p) {
    std::lock_guard<std::mutex> hold(mem_lock);
    return inside(mem_live, p);
}
bool emu_device_reachable(const void *p) {
    std::lock_guard<std::mutex> hold(mem_lock);
    return !p || inside(mem_live, p) || inside(pinned_live, p);
}
void emu_bad_argument(int i, const char *kernel) {
    fprintf(stderr, "emu: argument %d of a launch of %s points neither into device memory nor into pinned host "
                    "memory\n", i, kernel);
    abort();
}
/* A copy or memset whose device side is not device memory (or whose host side is) fails
 * on a GPU, or writes where it should not: the emulator stops. */
static void check_side(const void *p, bool device, const char *what, const char *side) {
    if (on_device(p) == device) return;
    fprintf(stderr, "emu: %s: the %s %p is %s\n", what, side, p,
            device ? "not in device memory" : "in device memory, where the copy's kind says host");
    abort();
}
static size_t page_bytes() { return (size_t)sysconf(_SC_PAGESIZE); }

/* A kernel that reads or writes past the end of a device allocation touches the page
 * after it, which cudaMalloc left inaccessible: the fault is reported with the kernel's
 * name (on a GPU the access would read another buffer's bytes, or fault). */
static void on_fault(int sig, siginfo_t *info, void *) {
    const uintptr_t at = (uintptr_t)info->si_addr;
    auto it = mem_live.upper_bound(at); /* no lock: the process ends here either way */
    if (it != mem_live.begin()) {
        --it;
        const uintptr_t end = it->first + it->second;
        if (at >= end && at < end + page_bytes()) {
            fprintf(stderr, "emu: %s touched byte %zu of a device allocation of %zu bytes, past its end\n",
                    running_kernel ? running_kernel : "the host", (size_t)(at - it->first), it->second);
            abort();
        }
    }
    if (shared_guard && at >= (uintptr_t)shared_guard && at < (uintptr_t)shared_guard + page_bytes()) {
        fprintf(stderr, "emu: %s touched byte %zu of its %zu bytes of dynamic shared memory, past their end\n",
                running_kernel ? running_kernel : "the host", (size_t)(at - (uintptr_t)L.shared), L.shared_bytes);
        abort();
    }
    signal(sig, SIG_DFL); /* not ours: the fault happens again, as it would have */
}
static void catch_overruns() {
    static bool installed = false;
    if (installed) return;
    installed = true;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
}

/* ==== The CUDA runtime, on host memory ==== */

extern "C" {

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
    *s = (cudaStream_t)malloc(1);
    *(unsigned char *)*s = !(flags & cudaStreamNonBlocking);
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    free(s);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) { /* the work has run when it was issued */
    not_while_capturing("cudaStreamSynchronize");
    if (!s) legacy_op("cudaStreamSynchronize");
    return sticky_error;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode) {
    if (capturing) return cudaErrorIllegalState;
    capturing = new emu_graph;
    capture_stream = s;
    if (s && *(unsigned char *)s) {
        std::lock_guard<std::mutex> hold(captures_mu);
        blocking_captures[capturing] = false;
    }
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t *g) {
    *g = (cudaGraph_t)capturing;
    bool invalidated = false;
    {
        std::lock_guard<std::mutex> hold(captures_mu);
        const auto it = blocking_captures.find(capturing);
        if (it != blocking_captures.end()) invalidated = it->second, blocking_captures.erase(it);
    }
    capturing = nullptr;
    if (*g && invalidated) { /* another thread used the legacy stream meanwhile */
        delete (emu_graph *)*g;
        *g = nullptr;
        return cudaErrorStreamCaptureInvalidated;
    }
    if (*g && capture_refused) {
        capture_refused = false;
        delete (emu_graph *)*g;
        *g = nullptr;
        return cudaErrorStreamCaptureUnsupported;
    }
    return *g ? cudaSuccess : cudaErrorIllegalState;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t g, unsigned long long) {
    *exec = (cudaGraphExec_t) new emu_graph(*(emu_graph *)g);
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t) {
    not_while_capturing("cudaGraphLaunch");
    std::lock_guard<std::recursive_mutex> hold(device_mu);
    for (const auto &l : ((emu_graph *)exec)->launches) l();
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    delete (emu_graph *)g;
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    delete (emu_graph *)exec;
    return cudaSuccess;
}

static size_t mem_total() { /* fractions of a MiB too, for a test to leave a few bytes spare */
    const char *e = getenv("EDDY_EMU_GPU_MIB");
    const double mib = e ? strtod(e, nullptr) : 0;
    return mib > 0 ? (size_t)(mib * (1 << 20)) : (size_t)16384 << 20;
}
cudaError_t cudaMalloc(void **p, size_t bytes) {
    not_while_capturing("cudaMalloc");
    const size_t rounded = bytes ? (bytes + 255) / 256 * 256 : 256;
    std::lock_guard<std::mutex> hold(mem_lock);
    *p = NULL;
    if (mem_used + rounded > mem_total()) return cudaErrorMemoryAllocation;
    /* the allocation ends where an inaccessible page begins */
    const size_t page = page_bytes(), span = (rounded + page - 1) / page * page + page;
    void *base = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return cudaErrorMemoryAllocation;
    if (mprotect((char *)base + span - page, page, PROT_NONE) != 0) {
        munmap(base, span);
        return cudaErrorMemoryAllocation;
    }
    catch_overruns();
    *p = (char *)base + span - page - rounded;
    mem_live[(uintptr_t)*p] = rounded, mem_used += rounded;
    memset(*p, 0xff, bytes); /* uninitialized device memory: NaN floats */
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    std::lock_guard<std::mutex> hold(mem_lock);
    auto it = mem_live.find((uintptr_t)p);
    if (it == mem_live.end()) return p ? cudaErrorInvalidValue : cudaSuccess;
    const size_t page = page_bytes(), rounded = it->second, span = (rounded + page - 1) / page * page + page;
    munmap((char *)p + rounded + page - span, span);
    mem_used -= rounded, mem_live.erase(it);
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    std::lock_guard<std::mutex> hold(mem_lock);
    *total_bytes = mem_total();
    *free_bytes = *total_bytes > mem_used ? *total_bytes - mem_used : 0;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t bytes) { /* pinned host memory: not the device's */
    not_while_capturing("cudaMallocHost");
    const size_t rounded = (bytes + 255) / 256 * 256 + 256;
    *p = aligned_alloc(256, rounded);
    if (!*p) return cudaErrorMemoryAllocation;
    std::lock_guard<std::mutex> hold(mem_lock);
    pinned_live[(uintptr_t)*p] = rounded;
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void *p) {
    {
        std::lock_guard<std::mutex> hold(mem_lock);
        pinned_live.erase((uintptr_t)p);
    }
    free(p);
    return cudaSuccess;
}
static bool pinned(const void *p) {
    std::lock_guard<std::mutex> hold(mem_lock);
    return inside(pinned_live, p);
}
static cudaError_t copy_now(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, const char *what) {
    not_while_capturing(what);
    if (bytes && kind != cudaMemcpyDefault) {
        const bool to_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
        const bool from_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
        check_side(dst, to_device, what, "destination");
        check_side(src, from_device, what, "source");
        if ((!to_device && !pinned(dst)) || (!from_device && !pinned(src))) pageable_copies++;
    }
    std::lock_guard<std::recursive_mutex> hold(device_mu);
    if (device_faulted()) return sticky_error;
    memmove(dst, src, bytes);
    return cudaSuccess;
}
static cudaError_t set_now(void *p, int v, size_t bytes, const char *what) {
    not_while_capturing(what);
    if (bytes) check_side(p, true, what, "destination");
    std::lock_guard<std::recursive_mutex> hold(device_mu);
    if (device_faulted()) return sticky_error;
    memset(p, v, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
    legacy_op("cudaMemcpy");
    return copy_now(dst, src, bytes, kind, "cudaMemcpy");
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s) {
    if (!s) legacy_op("cudaMemcpyAsync");
    return copy_now(dst, src, bytes, kind, "cudaMemcpyAsync"); /* streams run in order, at once */
}
cudaError_t cudaMemset(void *p, int v, size_t bytes) {
    legacy_op("cudaMemset");
    return set_now(p, v, bytes, "cudaMemset");
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s) {
    if (!s) legacy_op("cudaMemsetAsync");
    return set_now(p, v, bytes, "cudaMemsetAsync");
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p) {
    memset(a, 0, sizeof *a);
    a->type = on_device(p) ? cudaMemoryTypeDevice : pinned(p) ? cudaMemoryTypeHost : cudaMemoryTypeUnregistered;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int *n) {
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "emulated on the CPU");
    p->major = 9; /* as the H200 it stands for (its shared memory too) */
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return sticky_error; }
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int) {
    if (attr != cudaDevAttrMaxSharedMemoryPerBlockOptin) return cudaErrorInvalidValue;
    *value = (int)shared_most();
    return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void *fn, enum cudaFuncAttribute attr, int value) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
    if (value < 0 || (size_t)value > shared_most()) return cudaErrorInvalidValue;
    std::lock_guard<std::mutex> lock(shared_mu);
    shared_allowed[fn] = value;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
    not_while_capturing("cudaDeviceSynchronize");
    legacy_op("cudaDeviceSynchronize");
    return sticky_error;
}
const char *cudaGetErrorString(cudaError_t e) {
    return e == cudaSuccess ? "no error" : e == cudaErrorIllegalAddress ? "an illegal memory access was encountered"
                                                                          : "emulated error";
}
cudaError_t cudaEventCreate(cudaEvent_t *e) {
    *e = (cudaEvent_t)malloc(sizeof(double));
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int) { return cudaEventCreate(e); }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    *(double *)e = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    *ms = (float)((*(double *)b - *(double *)a) * 1e3);
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    free(e);
    return cudaSuccess;
}

/* ==== cuBLAS: column-major C = alpha op(A) op(B) + beta C, sums in float ==== */

static float elem(const void *p, cudaDataType t, size_t i) {
    return t == CUDA_R_16F ? fp16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static cublasStatus_t gemm_now(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                           const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt, int ldb, float beta,
                           float *C, int ldc) {
    std::lock_guard<std::recursive_mutex> hold(device_mu);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float s = 0.0f;
            for (int l = 0; l < k; l++) {
                const size_t ai = ta == CUBLAS_OP_N ? (size_t)l * lda + i : (size_t)i * lda + l;
                const size_t bi = tb == CUBLAS_OP_N ? (size_t)j * ldb + l : (size_t)l * ldb + j;
                s += elem(A, at, ai) * elem(B, bt, bi);
            }
            float *c = C + (size_t)j * ldc + i;
            *c = alpha * s + (beta != 0.0f ? beta * *c : 0.0f);
        }
    return CUBLAS_STATUS_SUCCESS;
}

/* A product inside a capture runs at the graph's launch, with the arguments of now. */
static cublasStatus_t gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, const void *A,
                           cudaDataType at, int lda, const void *B, cudaDataType bt, int ldb, float beta, float *C,
                           int ldc) {
    check_side(A, true, "a cuBLAS product", "matrix A");
    check_side(B, true, "a cuBLAS product", "matrix B");
    check_side(C, true, "a cuBLAS product", "matrix C");
    if (emu_record([=] { gemm_now(ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ldc); }))
        return CUBLAS_STATUS_SUCCESS;
    return gemm_now(ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ldc);
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }

cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
    *h = (cublasHandle_t)malloc(1);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSgemm_v2(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc) {
    return gemm(ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, *beta, C, ldc);
}
cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt,
                            int ldb, const void *beta, void *C, cudaDataType ct, int ldc, cublasComputeType_t,
                            cublasGemmAlgo_t) {
    if (ct != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    return gemm(ta, tb, m, n, k, *(const float *)alpha, A, at, lda, B, bt, ldb, *(const float *)beta, (float *)C, ldc);
}

} // extern "C"
