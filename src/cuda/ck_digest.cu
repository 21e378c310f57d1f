/*
 * ck_digest.cu — what a step's rows of logits come down to when the host wants less than
 * the rows: each row's k best logits (ck_top_rows), so that a step that samples with a
 * top-k (or greedily) copies back k ids and logits a row instead of the vocabulary's; and
 * each row's log-probability of a given token (ck_logprob_rows), what perplexity scores, or
 * its log-sum-exp, which turns the best k logits into log-probabilities.
 * Oracles: vec_top_k, vec_logprob and vec_logsumexp (src/ops/vec.c), through tests/cuda's
 * digest cases.
 *
 * ck_top_rows:
 * One block per row, in two reads of the row:
 *   1. each thread's largest key (top_key: the logits' order as unsigned integers); each
 *      warp's j-th largest of its lanes' keys (j = ceil(k / 32), 1 or 2); and the largest
 *      value L that the values of q = ceil(k / j) warps reach: then j q >= k elements
 *      reach L, so L is a floor under the k-th best key;
 *   2. every element at or above L joins the block's candidates, which for a vocabulary's
 *      logits are a few times k; ranking them (each against all) puts the k best in order.
 * Where more than TOP_ROOM reach L (many equal logits, or few usable ones spread so that
 * some warps see fewer than j), the row is read again in chunks of a block's width, each
 * chunk's elements that beat the k best so far ranked with them.
 */
#include "cuda/ck_device.h"
#include <math.h>
#include <stdint.h>

#include "cuda/ck.h"
#include "cuda/ck_block.h"

namespace {

#define TOP_THREADS 1024 /* 32 warps: the floor's warp values are one warp's lanes */
#define TOP_ROOM (TOP_THREADS + CK_TOP_MAX) /* the candidates a block holds: a chunk and the k best */
#define LOGPROB_THREADS 1024

/* A logit's key: its order as an unsigned integer is the logits' order; -0 and +0 alike;
 * 0 for NaN and -inf, which are never candidates. */
__device__ __forceinline__ unsigned top_key(float v) {
    if (!(v > -INFINITY)) return 0u;
    const unsigned u = __float_as_uint(v == 0.0f ? 0.0f : v);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* The largest of v over the warp, in every lane */
__device__ __forceinline__ unsigned warp_max_key(unsigned v) {
    for (int o = 16; o > 0; o >>= 1) {
        const unsigned w = (unsigned)__shfl_xor_sync(0xffffffffu, (int)v, o);
        v = w > v ? w : v;
    }
    return v;
}

/* Sum of v over the warp, in every lane */
__device__ __forceinline__ double warp_sum_double(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The number of the warp's lanes where c holds, in every lane */
__device__ __forceinline__ int warp_count(bool c) {
    int n = c;
    for (int o = 16; o > 0; o >>= 1) n += __shfl_xor_sync(0xffffffffu, n, o);
    return n;
}

/* The j-th largest (j 1 or 2) of the warp's values v, in every lane */
__device__ __forceinline__ unsigned warp_jth_key(unsigned v, int j) {
    const unsigned first = warp_max_key(v);
    if (j == 1 || warp_count(v == first) >= 2) return first;
    return warp_max_key(v < first ? v : 0u);
}

/* Whether candidate (ka, ia) goes before (kb, ib): the larger key, of equal ones the lower index */
__device__ __forceinline__ bool top_before(unsigned ka, int ia, unsigned kb, int ib) {
    return ka > kb || (ka == kb && ia < ib);
}

/* The first k (in order) of the n candidates (keys, idx) (indices distinct) into (bk, bi),
 * which must be other buffers: each thread ranks its candidates against all of them. */
__device__ __forceinline__ void top_rank(const unsigned *keys, const int *idx, int n, int k, unsigned *bk, int *bi) {
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const unsigned kj = keys[j];
        const int ij = idx[j];
        int rank = 0;
        for (int u = 0; u < n; u++) rank += top_before(keys[u], idx[u], kj, ij);
        if (rank < k) bk[rank] = kj, bi[rank] = ij;
    }
}

/* One block per row of x (rows of n < 2^31 floats): its k best into row blockIdx.x of ids
 * and vals (k each, the entries past the count 0 and -inf) and counts. */
__global__ void __launch_bounds__(TOP_THREADS)
    top_rows_kernel(const float *x, int64_t n, int k, int32_t *ids, float *vals, int32_t *counts) {
    ck_pdl_entry();
    __shared__ unsigned warp_keys[TOP_THREADS / 32], ck[TOP_ROOM], bk[CK_TOP_MAX];
    __shared__ int ci[TOP_ROOM], bi[CK_TOP_MAX];
    __shared__ int n_cand;
    __shared__ unsigned floor_key;
    const int tid = threadIdx.x, nthr = blockDim.x, lane = tid & 31, n_warps = nthr / 32;
    const float *r = x + (size_t)blockIdx.x * n;
    unsigned m = 0;
    for (int64_t i = tid; i < n; i += nthr) {
        const unsigned key = top_key(r[i]);
        m = key > m ? key : m;
    }
    const int per_warp = (k + 31) / 32, warps_needed = (k + per_warp - 1) / per_warp; /* j and q above */
    const unsigned wj = warp_jth_key(m, per_warp);
    if (lane == 0) warp_keys[tid / 32] = wj;
    if (tid == 0) n_cand = 0;
    __syncthreads();
    if (tid < 32) { /* the largest warp value that q warps' values reach (0 past the warps) */
        const unsigned v = lane < n_warps ? warp_keys[lane] : 0u;
        int reach = 0;
        for (int u = 0; u < n_warps; u++) reach += warp_keys[u] >= v;
        const unsigned best = warp_max_key(v > 0 && reach >= warps_needed ? v : 0u);
        if (lane == 0) floor_key = best > 0 ? best : 1u; /* 1: every usable element */
    }
    __syncthreads();
    const unsigned floor = floor_key;
    for (int64_t i = tid; i < n; i += nthr) {
        const unsigned key = top_key(r[i]);
        if (key < floor) continue;
        const int at = atomicAdd(&n_cand, 1);
        if (at < TOP_ROOM) ck[at] = key, ci[at] = (int)i;
    }
    __syncthreads();
    int got = n_cand;
    __syncthreads(); /* n_cand read by all before the chunks below reset it */
    if (got <= TOP_ROOM) {
        top_rank(ck, ci, got, k, bk, bi);
    } else { /* too many reach the floor: the best so far (bk, bi) met by each chunk in turn */
        got = 0;
        for (int64_t c0 = 0; c0 < n; c0 += nthr) {
            if (tid < got) ck[tid] = bk[tid], ci[tid] = bi[tid];
            if (tid == 0) n_cand = got;
            __syncthreads();
            const int64_t i = c0 + tid;
            const unsigned key = i < n ? top_key(r[i]) : 0u;
            if (key && (got < k || top_before(key, (int)i, bk[got - 1], bi[got - 1]))) {
                const int at = atomicAdd(&n_cand, 1);
                ck[at] = key, ci[at] = (int)i;
            }
            __syncthreads();
            const int nc = n_cand;
            top_rank(ck, ci, nc, k, bk, bi);
            __syncthreads();
            got = nc < k ? nc : k;
        }
    }
    got = got < k ? got : k;
    __syncthreads();
    const size_t row = (size_t)blockIdx.x * k;
    for (int j = tid; j < k; j += nthr) {
        ids[row + j] = j < got ? bi[j] : 0;
        vals[row + j] = j < got ? r[bi[j]] : -INFINITY;
    }
    if (tid == 0) counts[blockIdx.x] = got;
}

} // namespace

/* One block per row of x: out[row] = x[t] - max - log(sum exp(x - max)), t = targets[row],
 * or with targets NULL the row's log-sum-exp, max + log(sum exp(x - max)); each thread's
 * exps summed in double (vec_logprob's), then the block's. */
__global__ void __launch_bounds__(LOGPROB_THREADS)
    logprob_rows_kernel(const float *x, int64_t n, const int32_t *targets, double *out) {
    ck_pdl_entry();
    __shared__ float part_max[LOGPROB_THREADS / 32];
    __shared__ double part_sum[LOGPROB_THREADS / 32];
    const int tid = threadIdx.x, lane = tid & 31, w = tid / 32, n_warps = blockDim.x / 32;
    const float *r = x + (size_t)blockIdx.x * n;
    float m = -INFINITY;
    for (int64_t i = tid; i < n; i += blockDim.x) m = r[i] > m ? r[i] : m; /* NaN never taken, as vec_logprob */
    m = warp_max(m);
    if (lane == 0) part_max[w] = m;
    __syncthreads();
    m = part_max[0];
    for (int u = 1; u < n_warps; u++) m = part_max[u] > m ? part_max[u] : m;
    double s = 0;
    for (int64_t i = tid; i < n; i += blockDim.x) s += (double)expf(r[i] - m);
    s = warp_sum_double(s);
    if (lane == 0) part_sum[w] = s;
    __syncthreads();
    if (tid == 0) {
        double total = 0;
        for (int u = 0; u < n_warps; u++) total += part_sum[u];
        out[blockIdx.x] = targets ? (double)r[targets[blockIdx.x]] - m - log(total) : (double)m + log(total);
    }
}

extern "C" void ck_top_rows(const float *x, int64_t rows, int64_t n, int k, int32_t *ids, float *vals,
                            int32_t *counts, void *stream) {
    if (rows > 0 && n > 0 && k >= 1 && k <= CK_TOP_MAX)
        CK_LAUNCH((unsigned)rows, TOP_THREADS, 0, (cudaStream_t)stream, top_rows_kernel)(x, n, k, ids, vals, counts);
}

extern "C" void ck_logprob_rows(const float *x, int64_t rows, int64_t n, const int32_t *targets, double *out,
                                void *stream) {
    if (rows > 0 && n > 0)
        CK_LAUNCH((unsigned)rows, LOGPROB_THREADS, 0, (cudaStream_t)stream, logprob_rows_kernel)(x, n, targets, out);
}
