/*
 * ssm.h — the shared element-wise ops of the recurrent mixers: the decay gate,
 * causal depthwise conv1d (+ SiLU, + per-head L2 norm) and gated RMSNorm (the
 * per-value-head form of Gated DeltaNet and the per-group form of Mamba-2).
 *
 * Owns the contracts and layouts of these ops. Does not own the gated delta rule
 * (gdn.h), the Mamba-2 scans (mamba2.h) or the choice of ISA (base/isa.h).
 *
 * Every op has a scalar `_ref` (single-threaded, the permanent oracle), an
 * `_isa` entry that runs the threaded driver with one ISA level's block kernels
 * (ISA_REF: the scalar ones), and the plain name, which runs the level in force,
 * isa_active() (ISA_REF under EDDY_FORCE_REF=1). A threadpool may be NULL (runs on
 * the caller). Nothing here allocates.
 *
 * Rows and strides: a "row" is one token or one sequence; consecutive rows of an
 * operand are `*_stride` floats apart, so inputs may be slices of wider rows
 * (e.g. q|k|v inside a projection output). Strides are in floats.
 */
#ifndef EDDY_SSM_H
#define EDDY_SSM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/isa.h"
#include "base/threadpool.h"

/* ==== Decay gate ====
 *
 *   g[r][h]    = a[h] * softplus(alpha(r, h) + dt_bias[h])   (ops_softplus: x > 20 ? x : log1p(exp(x)))
 *   beta[r][h] = sigmoid(b(r, h))
 *
 * a is -exp(A_log) as GGUF stores it (ssm_a); g is the log-decay (<= 0), applied as exp(g).
 * alpha, b: raw gates of n_rows rows, alpha_stride / b_stride floats apart; within a
 *   row the heads come in runs of `group` consecutive floats, runs group_stride floats
 *   apart: alpha(r, h) = alpha[r * alpha_stride + (h / group) * group_stride + h % group].
 *   Contiguous heads: group = group_stride = n_heads. Qwen3-Next's fused b|a
 *   projection (per key head: b of its r value heads, then a of them) is group = r,
 *   group_stride = 2 r, b = the row, alpha = the row + r, both strides 2 n_heads.
 * a, dt_bias: (n_heads).
 * g, beta: (n_rows, n_heads) contiguous outputs. b and beta may both be NULL (no beta).
 * One call serves decode (n_rows = number of sequences) and prefill (n_rows = tokens).
 * Error bound of the optimized path against _ref: exact (it is the same scalar code). */
void ssm_gate(int64_t n_rows, int64_t n_heads, const float *alpha, int64_t alpha_stride, const float *b,
              int64_t b_stride, int64_t group, int64_t group_stride, const float *a, const float *dt_bias, float *g,
              float *beta);
void ssm_gate_ref(int64_t n_rows, int64_t n_heads, const float *alpha, int64_t alpha_stride, const float *b,
                  int64_t b_stride, int64_t group, int64_t group_stride, const float *a, const float *dt_bias,
                  float *g, float *beta);

/* ==== Causal depthwise conv1d + SiLU ====
 *
 * For channel c and token t, with the window [in(t-K+1) .. in(t)] where in(tau) is
 * the raw input x[tau][c] for tau >= 0 and state[K-1+tau][c] for tau < 0:
 *
 *   y[t][c] = silu(bias[c] + sum_{j<K} w[j][c] * in(t-K+1+j))
 *
 * summed in that order (bias first, then taps 0..K-1). With l2_channels > 0 the
 * first l2_channels outputs of each row are then L2-normalized per head of l2_dim
 * channels (the q and k ranges of Gated DeltaNet): y *= 1/sqrt(sum y^2 + l2_eps),
 * the form of fla and transformers.
 *
 * Layouts:
 *   w:     (K, conv_dim) tap-major: tap j of channel c at w[j*conv_dim + c]; tap K-1
 *          multiplies the newest input. GGUF stores (conv_dim, K) (ssm_conv1d.weight,
 *          ne = {K, conv_dim}); repack once at load with conv1d_pack_weights.
 *   bias:  (conv_dim) or NULL.
 *   state: one slot per sequence, (K-1, conv_dim), row 0 the oldest raw input.
 *          A slot is conv1d_state_floats(p) floats; slot i starts at state + i*that.
 * Aliasing: y must not overlap x or state.
 */
typedef struct {
    int64_t conv_dim;    /* channels */
    int K;               /* taps, 2..8 */
    const float *w;      /* (K, conv_dim) */
    const float *bias;   /* (conv_dim) or NULL */
    int64_t l2_channels; /* 0, or leading channels normalized per head (a multiple of l2_dim) */
    int64_t l2_dim;      /* head size of that normalization */
    float l2_eps;        /* 1e-6 in fla / transformers */
} conv1d_params;

#define CONV1D_MAX_K 8

static inline int64_t conv1d_state_floats(const conv1d_params *p) { return (int64_t)(p->K - 1) * p->conv_dim; }

/* w_ck: (conv_dim, K) as GGUF stores it -> w_kc: (K, conv_dim). */
void conv1d_pack_weights(const float *w_ck, int64_t conv_dim, int K, float *w_kc);

/* (a) One decode step for n_seq sequences. Row s of x, y: sequence s (x + s*x_stride).
 * Sequence s uses state slot slot[s] (slot may be NULL: slot s). Reads and rolls each
 * slot once. Threads split (sequence, channel block). */
void conv1d_step(threadpool *pool, const conv1d_params *p, int64_t n_seq, const float *x, int64_t x_stride,
                 float *y, int64_t y_stride, float *state, const int64_t *slot);

/* (b) Sequence scan over T tokens of one sequence: rows t of x and y; state is that
 * sequence's slot, left holding the last K-1 raw inputs. Threads split channels. */
void conv1d_scan(threadpool *pool, const conv1d_params *p, int64_t T, const float *x, int64_t x_stride, float *y,
                 int64_t y_stride, float *state);

/* (c) Token-parallel prefill: the same contract as conv1d_scan and, for a given ISA,
 * bit-identical to it; threads split token tiles of 32, each walked row by row over
 * every channel. */
void conv1d_prefill(threadpool *pool, const conv1d_params *p, int64_t T, const float *x, int64_t x_stride,
                    float *y, int64_t y_stride, float *state);

/* Speculative verify: n_seq sequences of T positions each, row s*T + t of x and y.
 * Like a scan per sequence, except that slot[s] is only read: the window after
 * position t is written to snap[s*T + t], a caller-owned (K-1, conv_dim) slot, so
 * accepting t + 1 positions is taking that snapshot as the window. */
void conv1d_verify(threadpool *pool, const conv1d_params *p, int64_t n_seq, int64_t T, const float *x,
                   int64_t x_stride, float *y, int64_t y_stride, const float *state, const int64_t *slot,
                   float *const *snap);

/* The same with an explicit ISA (tests, benchmarks). */
void conv1d_step_isa(isa_level isa, threadpool *pool, const conv1d_params *p, int64_t n_seq, const float *x,
                     int64_t x_stride, float *y, int64_t y_stride, float *state, const int64_t *slot);
void conv1d_scan_isa(isa_level isa, threadpool *pool, const conv1d_params *p, int64_t T, const float *x,
                     int64_t x_stride, float *y, int64_t y_stride, float *state);
void conv1d_prefill_isa(isa_level isa, threadpool *pool, const conv1d_params *p, int64_t T, const float *x,
                        int64_t x_stride, float *y, int64_t y_stride, float *state);
void conv1d_verify_isa(isa_level isa, threadpool *pool, const conv1d_params *p, int64_t n_seq, int64_t T,
                       const float *x, int64_t x_stride, float *y, int64_t y_stride, const float *state,
                       const int64_t *slot, float *const *snap);

/* Scalar oracles (single-threaded). conv1d_scan_ref is the rolling-window recurrence. */
void conv1d_step_ref(const conv1d_params *p, int64_t n_seq, const float *x, int64_t x_stride, float *y,
                     int64_t y_stride, float *state, const int64_t *slot);
void conv1d_scan_ref(const conv1d_params *p, int64_t T, const float *x, int64_t x_stride, float *y,
                     int64_t y_stride, float *state);
void conv1d_verify_ref(const conv1d_params *p, int64_t n_seq, int64_t T, const float *x, int64_t x_stride,
                       float *y, int64_t y_stride, const float *state, const int64_t *slot, float *const *snap);

/* ==== Gated RMSNorm ====
 *
 * Per value head (Gated DeltaNet, norm before gate), w shared by all heads:
 *   out[r][h][c] = y[r][h][c] / sqrt(mean_c(y[r][h][:]^2) + eps) * w[c] * silu(z[r][h][c])
 *   y, z, out: (n_rows, n_heads, d), rows *_stride apart, heads contiguous within a row.
 *   w: (d).
 *
 * Per group (Mamba-2, gate before norm), w per channel:
 *   x = y * silu(z);  out[r][c] = x[r][c] / sqrt(mean over c's group of x^2 + eps) * w[c]
 *   y, z, out: (n_rows, n_groups * group_size), rows *_stride apart; w: (n_groups * group_size).
 *
 * out may equal y (same stride) for an in-place update; no other overlap.
 * Threads split rows. */
void gated_rmsnorm(threadpool *pool, int64_t n_rows, int64_t n_heads, int64_t d, const float *y, int64_t y_stride,
                   const float *z, int64_t z_stride, const float *w, float eps, float *out, int64_t out_stride);
void gated_rmsnorm_group(threadpool *pool, int64_t n_rows, int64_t n_groups, int64_t group_size, const float *y,
                         int64_t y_stride, const float *z, int64_t z_stride, const float *w, float eps, float *out,
                         int64_t out_stride);

void gated_rmsnorm_isa(isa_level isa, threadpool *pool, int64_t n_rows, int64_t n_heads, int64_t d, const float *y,
                       int64_t y_stride, const float *z, int64_t z_stride, const float *w, float eps, float *out,
                       int64_t out_stride);
void gated_rmsnorm_group_isa(isa_level isa, threadpool *pool, int64_t n_rows, int64_t n_groups, int64_t group_size,
                             const float *y, int64_t y_stride, const float *z, int64_t z_stride, const float *w,
                             float eps, float *out, int64_t out_stride);

void gated_rmsnorm_ref(int64_t n_rows, int64_t n_heads, int64_t d, const float *y, int64_t y_stride, const float *z,
                       int64_t z_stride, const float *w, float eps, float *out, int64_t out_stride);
void gated_rmsnorm_group_ref(int64_t n_rows, int64_t n_groups, int64_t group_size, const float *y, int64_t y_stride,
                             const float *z, int64_t z_stride, const float *w, float eps, float *out,
                             int64_t out_stride);

#endif
