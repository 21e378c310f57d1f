/*
 * ck_ops.cu — the row and element-wise ops of a forward step on the GPU: RMSNorm,
 * residual adds, SwiGLU, the squared ReLU, gates, the Gated DeltaNet decay gate and
 * the per-head gated RMSNorm (ops/norm.c, ssm/ssm_gate.c, ssm/gated_norm.c are the
 * oracles). Row reductions take one block per row and sum in float.
 */
#include <stdint.h>

#include "cuda/ck.h"
#include "cuda/ck_act.h"
#include "cuda/ck_block.h"
#include "cuda/ck_device.h"
#include "cuda/ck_q8.h"

namespace {

/* elements of a row each thread of rmsnorm_kernel holds in registers (rows up to
 * RMS_HELD * 1024 long; longer ones are read twice) */
#define RMS_HELD 8

__device__ __forceinline__ float add_scaled_one(float x, float y, float scale) {
    return scale == 1.0f ? x + y : x + scale * y;
}

/* One row of n: yr = rmsnorm(v) * w (w NULL: no weight), v = xr, or with mr,
 * v = xr + ms * mr (as add_scaled_kernel), then also written to xo. The row is held in
 * registers (RMS_HELD elements a thread) when it fits, else read twice. With yq, yr's
 * 8-bit form too (ck_q8.h; its units yq[32 u], ys[u]; n a multiple of 32: a warp's 32
 * elements are one unit); with yh, its f16 form. */
__device__ __forceinline__ void norm_row(float *yr, const float *xr, const float *mr, float ms, float *xo,
                                         const float *w, int64_t n, float eps, int8_t *yq, q8x *ys, __half *yh) {
    float ss = 0.0f;
    if (n <= RMS_HELD * (int64_t)blockDim.x) { /* all loads in flight together */
        float v[RMS_HELD];
#pragma unroll
        for (int k = 0; k < RMS_HELD; k++) {
            const int64_t i = threadIdx.x + k * (int64_t)blockDim.x;
            v[k] = i >= n ? 0.0f : mr ? add_scaled_one(xr[i], mr[i], ms) : xr[i];
            if (mr && i < n) xo[i] = v[k];
            ss += v[k] * v[k];
        }
        ss = block_sum(ss);
        const float scale = rsqrtf(ss / (float)n + eps);
#pragma unroll
        for (int k = 0; k < RMS_HELD; k++) {
            const int64_t i = threadIdx.x + k * (int64_t)blockDim.x;
            if (i < n) { /* the whole warp, or none of it, when yq is given */
                const float out = w ? v[k] * scale * w[i] : v[k] * scale;
                yr[i] = out;
                if (yq) q8_store_unit(out, i / 32, yq, ys);
                if (yh) yh[i] = __float2half_rn(out);
            }
        }
        return;
    }
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = mr ? add_scaled_one(xr[i], mr[i], ms) : xr[i];
        if (mr) xo[i] = v;
        ss += v * v;
    }
    ss = block_sum(ss);
    const float scale = rsqrtf(ss / (float)n + eps);
    const float *src = mr ? xo : xr; /* each thread reads back only what it wrote */
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float out = w ? src[i] * scale * w[i] : src[i] * scale;
        yr[i] = out;
        if (yq) q8_store_unit(out, i / 32, yq, ys);
        if (yh) yh[i] = __float2half_rn(out);
    }
}

__global__ void rmsnorm_kernel(float *y, int64_t sy, const float *x, int64_t sx, const float *w, int64_t n,
                               const int32_t *rows, float eps) {
    ck_pdl_entry();
    const int64_t r = blockIdx.x;
    norm_row(y + r * sy, x + (rows ? rows[r] : r) * sx, NULL, 0.0f, NULL, w, n, eps, NULL, NULL, NULL);
}

/* x += scale * add (add NULL: x as it is), then y = rmsnorm(x) * w, one block per row of
 * n; with yq, y's 8-bit form too (units yq[32 u], ys[u] of the whole (rows, n)); with yh,
 * its f16 form (rows, n) */
__global__ void add_rmsnorm_kernel(float *x, const float *add, float scale, float *y, const float *w, int64_t n,
                                   float eps, int8_t *yq, q8x *ys, __half *yh) {
    ck_pdl_entry();
    const int64_t r = blockIdx.x;
    norm_row(y + r * n, x + r * n, add ? add + r * n : NULL, scale, x + r * n, w, n, eps, yq ? yq + r * n : NULL,
             yq ? ys + r * (n / 32) : NULL, yh ? yh + r * n : NULL);
}

__global__ void add_scaled_kernel(float *x, const float *y, int64_t n, float scale) {
    ck_pdl_entry();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = add_scaled_one(x[i], y[i], scale);
}

__global__ void scale_kernel(float *x, int64_t n, float scale) {
    ck_pdl_entry();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= scale;
}

/* A candidate of an argmax: value v at index i (i < 0: none yet). The larger value wins,
 * of equal ones the lower index: the first index of the largest. */
struct arg_best {
    float v;
    int i;
};
__device__ __forceinline__ arg_best arg_better(arg_best a, arg_best b) {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    return b.v > a.v || (b.v == a.v && b.i < a.i) ? b : a;
}

/* the best of the warp's candidates, in every lane */
__device__ __forceinline__ arg_best warp_best(arg_best b) {
    for (int o = 16; o > 0; o >>= 1) {
        const arg_best other = {__shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.i, o)};
        b = arg_better(b, other);
    }
    return b;
}

/* with oq (n a multiple of 32: a warp's 32 elements are one unit), out's 8-bit form too */
__global__ void swiglu_kernel(float *out, const float *gate, const float *up, int64_t n, int8_t *oq, q8x *os,
                              __half *oh) {
    ck_pdl_entry();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = silu(gate[i]) * up[i];
        out[i] = v;
        if (oq) q8_store_unit(v, i / 32, oq, os);
        if (oh) oh[i] = __float2half_rn(v);
    }
}

__global__ void relu2_kernel(float *a, int64_t n) {
    ck_pdl_entry();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float r = a[i] > 0.0f ? a[i] : 0.0f;
        a[i] = r * r;
    }
}

__global__ void sigmoid_mul_kernel(float *x, const float *gate, int64_t n) {
    ck_pdl_entry();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= sigmoid(gate[i]);
}

__global__ void ssm_gate_kernel(int64_t n_rows, int64_t n_heads, const float *alpha, int64_t alpha_stride,
                                const float *b, int64_t b_stride, int64_t group, int64_t group_stride, const float *a,
                                const float *dt_bias, float *g, float *beta) {
    ck_pdl_entry();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_rows * n_heads) return;
    const int64_t r = i / n_heads, h = i % n_heads, at = h / group * group_stride + h % group;
    g[i] = a[h] * softplus(alpha[r * alpha_stride + at] + dt_bias[h]);
    if (b && beta) beta[i] = sigmoid(b[r * b_stride + at]);
}

/* one block per (row, head) */
/* with oq (out's rows dense, n_heads * d long, d a multiple of 32), out's 8-bit form too;
 * with oh, its f16 form (rows of n_heads * d) */
__global__ void gated_rmsnorm_kernel(int64_t n_heads, int64_t d, const float *y, int64_t y_stride, const float *z,
                                     int64_t z_stride, const float *w, float eps, float *out, int64_t out_stride,
                                     int8_t *oq, q8x *os, __half *oh) {
    ck_pdl_entry();
    const int64_t r = blockIdx.x / n_heads, h = blockIdx.x % n_heads;
    const float *yr = y + r * y_stride + h * d, *zr = z + r * z_stride + h * d;
    float *o = out + r * out_stride + h * d;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) ss += yr[i] * yr[i];
    ss = block_sum(ss);
    const float scale = rsqrtf(ss / (float)d + eps);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        const float v = yr[i] * scale * w[i] * silu(zr[i]);
        o[i] = v;
        if (oq) q8_store_unit(v, (r * n_heads * d + h * d + i) / 32, oq, os);
        if (oh) oh[r * n_heads * d + h * d + i] = __float2half_rn(v);
    }
}

/* one block per (row, group): gate first, then the norm (Mamba-2) */
__global__ void gated_rmsnorm_group_kernel(int64_t n_groups, int64_t gs, const float *y, int64_t y_stride,
                                           const float *z, int64_t z_stride, const float *w, float eps, float *out,
                                           int64_t out_stride) {
    ck_pdl_entry();
    const int64_t r = blockIdx.x / n_groups, g = blockIdx.x % n_groups;
    const float *yr = y + r * y_stride + g * gs, *zr = z + r * z_stride + g * gs;
    float *o = out + r * out_stride + g * gs;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < gs; i += blockDim.x) {
        const float x = yr[i] * silu(zr[i]);
        ss += x * x;
    }
    ss = block_sum(ss);
    const float scale = 1.0f / sqrtf(ss / (float)gs + eps);
    for (int64_t i = threadIdx.x; i < gs; i += blockDim.x) o[i] = yr[i] * silu(zr[i]) * scale * w[g * gs + i];
}

/* Mixture of experts: one thread per element of the m rows of one expert */
__global__ void gather_rows_kernel(float *dst, const float *src, const int32_t *slots, int64_t k, int64_t m,
                                   int64_t E) {
    ck_pdl_entry();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m * E) dst[i] = src[slots[i / E] / k * E + i % E];
}

__global__ void scatter_add_kernel(float *y, const float *src, const int32_t *slots, int64_t k, const float *w,
                                   int64_t m, int64_t E) {
    ck_pdl_entry();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m * E) return;
    const int32_t slot = slots[i / E];
    float *dst = y + slot / k * E + i % E;
    *dst += w[slot] * src[i];
}

__global__ void add_gated_rows_kernel(float *y, const float *src, const float *gate, int64_t n, int64_t E) {
    ck_pdl_entry();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * E) return;
    const float g = gate ? sigmoid(gate[i / E]) : 1.0f;
    y[i] += g * src[i];
}

/* A mixture of experts' routing, a warp per token: its j-th expert is the largest logit
 * of those ordered after the (j-1)-th (the larger value first, of equal ones the lower
 * index: moe_route's order), so what was taken needs no list; the weights are the softmax
 * of the k chosen logits, which is the softmax over all renormalized over the k. A token
 * short of k ordered logits (NaN) takes expert j with a NaN weight, as the CPU's softmax
 * gives it NaN ones. */
__global__ void moe_route_kernel(const float *logits, int64_t n, int64_t X, int k, int32_t *sel, float *w) {
    ck_pdl_entry();
    const int lane = threadIdx.x & 31;
    const int64_t t = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (t >= n) return; /* the warp's token: the whole warp leaves */
    const float *l = logits + t * X;
    arg_best prev = {INFINITY, -1};
    float top = 0.0f, sum = 0.0f;
    for (int j = 0; j < k; j++) {
        arg_best b = {0.0f, -1};
        for (int64_t e = lane; e < X; e += 32) { /* a lane's indices ascend: of equal values it keeps the first */
            const float v = l[e];
            const bool after = v < prev.v || (v == prev.v && (int)e > prev.i);
            if (after && (b.i < 0 || v > b.v)) b = arg_best{v, (int)e};
        }
        b = warp_best(b);
        if (b.i < 0) b = arg_best{NAN, j < X ? j : 0};
        if (j == 0) top = b.v;
        const float p = expf(b.v - top);
        sum += p;
        if (lane == 0) sel[t * k + j] = b.i, w[t * k + j] = p;
        prev = b;
    }
    if (lane == 0)
        for (int j = 0; j < k; j++) w[t * k + j] /= sum;
}

/* y row t = sum over j < k of w[t k + j] out row pos[t k + j] (pos NULL: t k + j): one
 * thread per element of y */
__global__ void moe_combine_kernel(float *y, const float *out, const float *w, const int32_t *pos, int64_t n,
                                   int64_t k, int64_t E) {
    ck_pdl_entry();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * E) return;
    const int64_t t = i / E, c = i % E;
    float s = 0.0f;
    for (int64_t j = 0; j < k; j++) s += w[t * k + j] * out[(int64_t)(pos ? pos[t * k + j] : t * k + j) * E + c];
    y[i] = s;
}

/* ck_moe_group in one block: each expert's slots counted, their rows' start (a multiple
 * of 8) and tiles laid out by the first thread, then each slot given the next row of its
 * expert (the order within an expert is the atomics'; every row's product is its own, so
 * the outputs do not depend on it). Shared memory: two counters per expert. */
__global__ void moe_group_kernel(const int32_t *sel, int64_t S, int64_t X, int64_t rows, int32_t *pos, int32_t *src,
                                 ck_moe_tile *tiles, int32_t *n_tiles) {
    ck_pdl_entry();
    CK_DYNAMIC_SHARED(int, cnt); /* (X) slots, then (X) the next free row of each expert */
    int *next = cnt + X;
    for (int64_t e = threadIdx.x; e < X; e += blockDim.x) cnt[e] = 0;
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) src[r] = -1;
    __syncthreads();
    for (int64_t s = threadIdx.x; s < S; s += blockDim.x) atomicAdd(&cnt[sel[s]], 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        int row = 0, nt = 0;
        for (int64_t e = 0; e < X; e++) {
            next[e] = row;
            for (int r = 0; r < cnt[e]; r += CK_MMQ_TOK)
                tiles[nt++] = ck_moe_tile{(int32_t)e, row + r, cnt[e] - r < CK_MMQ_TOK ? cnt[e] - r : CK_MMQ_TOK};
            row += (cnt[e] + 7) / 8 * 8;
        }
        *n_tiles = nt;
    }
    __syncthreads();
    for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
        const int r = atomicAdd(&next[sel[s]], 1);
        pos[s] = r, src[r] = (int32_t)s;
    }
}

__global__ void gather_slots_kernel(float *dst, const float *x, const int32_t *src, int64_t k, int64_t rows,
                                    int64_t E) {
    ck_pdl_entry();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * E) return;
    const int32_t s = src[i / E];
    dst[i] = s >= 0 ? x[s / k * E + i % E] : 0.0f;
}

/* Row i of dst = rows row src[i] when src[i] >= 0, else slot -src[i] - 1 of slab */
__global__ void gather_h_kernel(float *dst, const float *rows, const float *slab, int64_t slot_floats,
                                const int32_t *src, int64_t n, int64_t E) {
    ck_pdl_entry();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * E) return;
    const int32_t from = src[i / E];
    dst[i] = from >= 0 ? rows[(int64_t)from * E + i % E] : slab[(int64_t)(-from - 1) * slot_floats + i % E];
}

int row_threads(int64_t n) { return n >= 1024 ? 256 : n >= 256 ? 128 : 32; }
/* rmsnorm_kernel's: up to 4 elements a thread, up to 1024 threads */
static int rms_threads(int64_t n) {
    int t = 32;
    while (t < 1024 && 4 * (int64_t)t < n) t *= 2;
    return t;
}

} // namespace

extern "C" void ck_rmsnorm_rows(float *y, int64_t sy, const float *x, int64_t sx, const float *w, int64_t n,
                                int64_t n_rows, float eps, void *stream) {
    if (n_rows > 0)
        CK_LAUNCH((unsigned)n_rows, rms_threads(n), 0, (cudaStream_t)stream, rmsnorm_kernel)
        (y, sy, x, sx, w, n, (const int32_t *)NULL, eps);
}

extern "C" void ck_rmsnorm_gather(float *y, const float *x, const int32_t *rows, const float *w, int64_t E, int64_t n,
                                  float eps, void *stream) {
    if (n > 0)
        CK_LAUNCH((unsigned)n, rms_threads(E), 0, (cudaStream_t)stream, rmsnorm_kernel)(y, E, x, E, w, E, rows, eps);
}

extern "C" int ck_add_rmsnorm(float *x, const float *add, float scale, float *y, const float *w, int64_t n,
                              int64_t n_rows, float eps, void *q8, uint16_t *f16, void *stream) {
    if (n_rows <= 0) return 0;
    const bool q = q8_fits(q8, n_rows, n);
    CK_LAUNCH((unsigned)n_rows, rms_threads(n), 0, (cudaStream_t)stream, add_rmsnorm_kernel)
    (x, add, scale, y, w, n, eps, q ? (int8_t *)q8 : NULL, q ? q8_units(q8, n_rows, n) : NULL, (__half *)f16);
    return q;
}

extern "C" void ck_add_scaled(float *x, const float *y, int64_t n, float scale, void *stream) {
    if (n > 0) CK_LAUNCH(blocks_for(n, 256), 256, 0, (cudaStream_t)stream, add_scaled_kernel)(x, y, n, scale);
}

extern "C" void ck_scale(float *x, int64_t n, float scale, void *stream) {
    if (n > 0) CK_LAUNCH(blocks_for(n, 256), 256, 0, (cudaStream_t)stream, scale_kernel)(x, n, scale);
}

extern "C" int ck_swiglu(float *out, const float *gate, const float *up, int64_t n_rows, int64_t n, void *q8,
                         uint16_t *f16, void *stream) {
    const int64_t all = n_rows * n;
    if (all <= 0) return 0;
    const bool q = q8_fits(q8, n_rows, n);
    CK_LAUNCH(blocks_for(all, 256), 256, 0, (cudaStream_t)stream, swiglu_kernel)
    (out, gate, up, all, q ? (int8_t *)q8 : NULL, q ? q8_units(q8, n_rows, n) : NULL, (__half *)f16);
    return q;
}

extern "C" void ck_relu2(float *a, int64_t n, void *stream) {
    if (n > 0) CK_LAUNCH(blocks_for(n, 256), 256, 0, (cudaStream_t)stream, relu2_kernel)(a, n);
}

extern "C" void ck_sigmoid_mul(float *x, const float *gate, int64_t n, void *stream) {
    if (n > 0) CK_LAUNCH(blocks_for(n, 256), 256, 0, (cudaStream_t)stream, sigmoid_mul_kernel)(x, gate, n);
}

extern "C" void ck_ssm_gate(int64_t n_rows, int64_t n_heads, const float *alpha, int64_t alpha_stride, const float *b,
                            int64_t b_stride, int64_t group, int64_t group_stride, const float *a, const float *dt_bias,
                            float *g, float *beta, void *stream) {
    const int64_t total = n_rows * n_heads;
    if (total > 0)
        CK_LAUNCH(blocks_for(total, 256), 256, 0, (cudaStream_t)stream, ssm_gate_kernel)
        (n_rows, n_heads, alpha, alpha_stride, b, b_stride, group, group_stride, a, dt_bias, g, beta);
}

extern "C" int ck_gated_rmsnorm(int64_t n_rows, int64_t n_heads, int64_t d, const float *y, int64_t y_stride,
                                const float *z, int64_t z_stride, const float *w, float eps, float *out,
                                int64_t out_stride, void *q8, uint16_t *f16, void *stream) {
    if (n_rows * n_heads <= 0) return 0;
    const bool q = q8_fits(q8, n_rows, n_heads * d) && d % 32 == 0 && out_stride == n_heads * d;
    CK_LAUNCH((unsigned)(n_rows * n_heads), row_threads(d), 0, (cudaStream_t)stream, gated_rmsnorm_kernel)
    (n_heads, d, y, y_stride, z, z_stride, w, eps, out, out_stride, q ? (int8_t *)q8 : NULL,
     q ? q8_units(q8, n_rows, n_heads * d) : NULL, (__half *)f16);
    return q;
}

extern "C" void ck_gated_rmsnorm_group(int64_t n_rows, int64_t n_groups, int64_t group_size, const float *y,
                                       int64_t y_stride, const float *z, int64_t z_stride, const float *w, float eps,
                                       float *out, int64_t out_stride, void *stream) {
    if (n_rows * n_groups > 0)
        CK_LAUNCH((unsigned)(n_rows * n_groups), row_threads(group_size), 0, (cudaStream_t)stream,
                  gated_rmsnorm_group_kernel)
        (n_groups, group_size, y, y_stride, z, z_stride, w, eps, out, out_stride);
}

extern "C" void ck_gather_rows(float *dst, const float *src, const int32_t *slots, int64_t k, int64_t m, int64_t E,
                               void *stream) {
    if (m * E > 0)
        CK_LAUNCH(blocks_for(m * E, 256), 256, 0, (cudaStream_t)stream, gather_rows_kernel)(dst, src, slots, k, m, E);
}

extern "C" void ck_scatter_add(float *y, const float *src, const int32_t *slots, int64_t k, const float *w, int64_t m,
                               int64_t E, void *stream) {
    if (m * E > 0)
        CK_LAUNCH(blocks_for(m * E, 256), 256, 0, (cudaStream_t)stream, scatter_add_kernel)(y, src, slots, k, w, m, E);
}

extern "C" void ck_add_gated_rows(float *y, const float *src, const float *gate, int64_t n, int64_t E, void *stream) {
    if (n * E > 0)
        CK_LAUNCH(blocks_for(n * E, 256), 256, 0, (cudaStream_t)stream, add_gated_rows_kernel)(y, src, gate, n, E);
}

extern "C" void ck_moe_route(const float *logits, int64_t n, int64_t X, int64_t k, int32_t *sel, float *w,
                             void *stream) {
    if (n > 0 && X > 0 && k > 0)
        CK_LAUNCH(blocks_for(n, 4), 128, 0, (cudaStream_t)stream, moe_route_kernel)(logits, n, X, (int)k, sel, w);
}

extern "C" void ck_moe_combine(float *y, const float *out, const float *w, const int32_t *pos, int64_t n, int64_t k,
                               int64_t E, void *stream) {
    if (n * E > 0)
        CK_LAUNCH(blocks_for(n * E, 256), 256, 0, (cudaStream_t)stream, moe_combine_kernel)(y, out, w, pos, n, k, E);
}

/* Each expert's rows start at a multiple of 8 (the tensor cores' kernel reads x's scales
 * two rows at a time), and a tile reads CK_MMQ_TOK rows from its start */
extern "C" int64_t ck_moe_rows(int64_t S, int64_t X) { return (S + 8 * X + 7) / 8 * 8 + CK_MMQ_TOK; }
extern "C" int64_t ck_moe_tiles(int64_t S, int64_t X) { return S / CK_MMQ_TOK + X; }

extern "C" void ck_moe_group(const int32_t *sel, int64_t S, int64_t X, int32_t *pos, int32_t *src,
                             ck_moe_tile *tiles, int32_t *n_tiles, void *stream) {
    if (S > 0 && X > 0 && X <= CK_MOE_GROUP_EXPERTS)
        CK_LAUNCH(1, 1024, 2 * X * sizeof(int), (cudaStream_t)stream, moe_group_kernel)
        (sel, S, X, ck_moe_rows(S, X), pos, src, tiles, n_tiles);
}

extern "C" void ck_gather_slots(float *dst, const float *x, const int32_t *src, int64_t k, int64_t rows, int64_t E,
                                void *stream) {
    if (rows * E > 0)
        CK_LAUNCH(blocks_for(rows * E, 256), 256, 0, (cudaStream_t)stream, gather_slots_kernel)
        (dst, x, src, k, rows, E);
}

extern "C" void ck_gather_h(float *dst, const float *rows, const float *slab, int64_t slot_floats, const int32_t *src,
                            int64_t n, int64_t E, void *stream) {
    if (n * E > 0)
        CK_LAUNCH(blocks_for(n * E, 256), 256, 0, (cudaStream_t)stream, gather_h_kernel)
        (dst, rows, slab, slot_floats, src, n, E);
}
