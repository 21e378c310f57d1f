/*
 * ck_attn_group.cu — attention of a few rows over an f16 KV cache (decode, verify,
 * batches of decoding sequences) with each key and value row read once for all the query
 * heads that share it (ck_attention_grouped). Oracle: ops_attention_ref (through
 * tests/cuda's attention cases).
 *
 * One block per (row, KV head, split of the row's keys), four warps; warp w takes keys
 * w, w + 4, ... of the split, two at a time (both rows' loads in flight before either is
 * used). A key row of D = 32 P halves is one coalesced load of P halves a lane; each lane
 * keeps P elements of the G query heads' q and of their running outputs, so a key costs
 * G dot products summed across the warp and an online-softmax step per head, and its value
 * row is read once for the G heads (where ck_mixers.cu's attention_kernel reads a key row
 * a thread, per head). At the end the warps' partial softmaxes are folded in shared
 * memory, into the output (one split) or into part for attention_merge_kernel (more).
 */
#include "cuda/ck_device.h"
#include <math.h>
#include <stdint.h>

#include "cuda/ck.h"
#include "cuda/ck_act.h"
#include "cuda/ck_block.h"
#include "cuda/ck_kv.h"

namespace {

#define GA_WARPS 4

/* P consecutive f16 of a cache row (aligned to 2 P bytes) as floats: one load */
__device__ __forceinline__ float f16_lo(uint32_t w) { return __half2float(__ushort_as_half((unsigned short)w)); }
__device__ __forceinline__ float f16_hi(uint32_t w) { return __half2float(__ushort_as_half((unsigned short)(w >> 16))); }
template <int P> __device__ __forceinline__ void halves(const uint16_t *p, float f[P]) {
    if constexpr (P == 1) {
        f[0] = __half2float(__ushort_as_half(p[0]));
    } else if constexpr (P == 2) {
        const uint32_t u = *(const uint32_t *)p;
        f[0] = f16_lo(u), f[1] = f16_hi(u);
    } else if constexpr (P == 4) {
        const uint2 u = *(const uint2 *)p;
        f[0] = f16_lo(u.x), f[1] = f16_hi(u.x), f[2] = f16_lo(u.y), f[3] = f16_hi(u.y);
    } else {
        static_assert(P == 8, "rows of 32, 64, 128 or 256 halves");
        const uint4 u = *(const uint4 *)p;
        f[0] = f16_lo(u.x), f[1] = f16_hi(u.x), f[2] = f16_lo(u.y), f[3] = f16_hi(u.y);
        f[4] = f16_lo(u.z), f[5] = f16_hi(u.z), f[6] = f16_lo(u.w), f[7] = f16_hi(u.w);
    }
}

/* One key (k, v: this lane's P elements of its rows) into the G heads' running softmaxes */
template <int P, int G>
__device__ __forceinline__ void attend_key(const float (&qv)[G][P], const float (&k)[P], const float (&v)[P],
                                           float scale, float (&m)[G], float (&l)[G], float (&acc)[G][P]) {
#pragma unroll
    for (int g = 0; g < G; g++) {
        float d = 0.0f;
#pragma unroll
        for (int i = 0; i < P; i++) d = fmaf(qv[g][i], k[i], d);
        const float sc = warp_sum(d) * scale;
        const float mn = fmaxf(m[g], sc), corr = expf(m[g] - mn), p = expf(sc - mn); /* corr 0 on the first key */
        l[g] = l[g] * corr + p;
#pragma unroll
        for (int i = 0; i < P; i++) acc[g][i] = fmaf(p, v[i], acc[g][i] * corr);
        m[g] = mn;
    }
}

template <int P, int G>
__global__ void __launch_bounds__(32 * GA_WARPS)
    attention_group_kernel(ck_step s, const float *q, const float *gate, float *out, const uint16_t *kc,
                           const uint16_t *vc, int64_t n_head, int64_t n_kv, float scale, float *part) {
    ck_pdl_entry();
    constexpr int D = 32 * P;
    __shared__ float wm[GA_WARPS][G], wl[GA_WARPS][G], wacc[GA_WARPS][G][D];
    const int64_t r = blockIdx.x / n_kv, hk = blockIdx.x % n_kv, K = n_kv * D;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int64_t pos = s.row_pos[r], n_split = gridDim.y, per = (pos + n_split) / n_split; /* ceil((pos + 1) / n_split) */
    const int64_t jb = blockIdx.y * per, je = jb + per < pos + 1 ? jb + per : pos + 1;
    const ck_run run = s.runs[s.row_run[r]];
    const int32_t *bt = s.blocks + run.bt;
    float qv[G][P], acc[G][P], m[G], l[G];
#pragma unroll
    for (int g = 0; g < G; g++) {
        const float *qr = q + (r * n_head + hk * G + g) * D + lane * P;
#pragma unroll
        for (int i = 0; i < P; i++) qv[g][i] = qr[i], acc[g][i] = 0.0f;
        m[g] = -INFINITY, l[g] = 0.0f;
    }
    const int64_t col = hk * D + lane * P;
    for (int64_t j = jb + w; j < je; j += 2 * GA_WARPS) {
        const bool two = j + GA_WARPS < je;
        float k0[P], v0[P], k1[P], v1[P];
        const int64_t row0 = kv_row(bt, j), row1 = two ? kv_row(bt, j + GA_WARPS) : row0;
        halves<P>(kc + row0 * K + col, k0);
        halves<P>(vc + row0 * K + col, v0);
        halves<P>(kc + row1 * K + col, k1);
        halves<P>(vc + row1 * K + col, v1);
        attend_key<P, G>(qv, k0, v0, scale, m, l, acc);
        if (two) attend_key<P, G>(qv, k1, v1, scale, m, l, acc);
    }
#pragma unroll
    for (int g = 0; g < G; g++) {
        if (lane == 0) wm[w][g] = m[g], wl[w][g] = l[g];
#pragma unroll
        for (int i = 0; i < P; i++) wacc[w][g][lane * P + i] = acc[g][i];
    }
    __syncthreads();
    /* the warps' partial softmaxes folded: thread t takes elements t, t + 128, ... of the G heads' outputs */
    for (int e = threadIdx.x; e < G * D; e += 32 * GA_WARPS) {
        const int g = e / D, d = e % D;
        float M = -INFINITY;
        for (int u = 0; u < GA_WARPS; u++) M = fmaxf(M, wm[u][g]);
        float L = 0.0f, O = 0.0f;
        for (int u = 0; u < GA_WARPS; u++) {
            const float f = wm[u][g] > -INFINITY ? expf(wm[u][g] - M) : 0.0f; /* a warp without keys adds nothing */
            L = fmaf(wl[u][g], f, L), O = fmaf(wacc[u][g][d], f, O);
        }
        const int64_t rh = r * n_head + hk * G + g;
        if (n_split == 1) {
            out[rh * D + d] = gate ? O / L * sigmoid(gate[rh * D + d]) : O / L;
        } else {
            float *pp = part + (rh * n_split + blockIdx.y) * (D + 2); /* max, sum, then the output */
            if (d == 0) pp[0] = M, pp[1] = L; /* an empty range: -inf and 0 */
            pp[2 + d] = O;
        }
    }
}

template <int P, int G>
void launch_group(const ck_step *s, int64_t n, const float *q, const float *gate, float *out, const void *kc,
                  const void *vc, int64_t n_head, int64_t n_kv, float scale, int n_split, float *part,
                  cudaStream_t st) {
    CK_LAUNCH(dim3((unsigned)(n * n_kv), (unsigned)n_split), 32 * GA_WARPS, 0, st, attention_group_kernel<P, G>)
    (*s, q, gate, out, (const uint16_t *)kc, (const uint16_t *)vc, n_head, n_kv, scale, part);
}

template <int P>
bool launch_group_p(int64_t G, const ck_step *s, int64_t n, const float *q, const float *gate, float *out,
                    const void *kc, const void *vc, int64_t n_head, int64_t n_kv, float scale, int n_split,
                    float *part, cudaStream_t st) {
    switch (G) {
    case 1: launch_group<P, 1>(s, n, q, gate, out, kc, vc, n_head, n_kv, scale, n_split, part, st); return true;
    case 2: launch_group<P, 2>(s, n, q, gate, out, kc, vc, n_head, n_kv, scale, n_split, part, st); return true;
    case 4: launch_group<P, 4>(s, n, q, gate, out, kc, vc, n_head, n_kv, scale, n_split, part, st); return true;
    case 8: launch_group<P, 8>(s, n, q, gate, out, kc, vc, n_head, n_kv, scale, n_split, part, st); return true;
    default: return false;
    }
}

} // namespace

static int ck_att_grouped = 1; /* ck_attention_set_grouped */
extern "C" void ck_attention_set_grouped(int on) { ck_att_grouped = on; }

extern "C" int ck_attention_grouped(const ck_step *s, int64_t n, const float *q, const float *gate, float *out,
                                    const void *kc, const void *vc, int kv_f16, int64_t n_head, int64_t n_kv,
                                    int64_t hd, int64_t dv, float scale, int n_split, float *part, void *stream) {
    if (!ck_att_grouped || kv_f16 != 3 || hd != dv || n_kv <= 0 || n_head % n_kv || (n_split > 1 && !part)) return 0;
    const int64_t G = n_head / n_kv;
    if (n <= 0) return 1;
    cudaStream_t st = (cudaStream_t)stream;
    const int ns = n_split > 1 ? n_split : 1;
    switch (hd) {
    case 32: return launch_group_p<1>(G, s, n, q, gate, out, kc, vc, n_head, n_kv, scale, ns, part, st);
    case 64: return launch_group_p<2>(G, s, n, q, gate, out, kc, vc, n_head, n_kv, scale, ns, part, st);
    case 128: return launch_group_p<4>(G, s, n, q, gate, out, kc, vc, n_head, n_kv, scale, ns, part, st);
    case 256: return launch_group_p<8>(G, s, n, q, gate, out, kc, vc, n_head, n_kv, scale, ns, part, st);
    default: return 0;
    }
}
