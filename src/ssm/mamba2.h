/*
 * mamba2.h — the Mamba-2 selective-state kernels: decode step, K-position verify
 * scan, sequential scan (the oracle) and the SSD chunked scan for prefill.
 *
 * Owns: the selective state update and its output, from the inputs the model has
 * after the in-projection and the causal conv (x, B, C, raw dt). Does not own: the
 * conv1d, the gated RMSNorm and the gating by z (the model applies them around these
 * kernels), nor where states live (the caller hands in state pointers).
 *
 * Per head h of a sequence, at each token t (g = h / (n_heads / n_groups)):
 *
 *     dt  = clamp(softplus(dt_raw[t][h] + dt_bias[h]), dt_min, dt_max)
 *           softplus(v) = v > 20 ? v : log1p(exp(v))
 *     dA  = exp(dt * A[h])                        A[h] < 0 (GGUF ssm_a = -exp(A_log))
 *     S   = dA * S + dt * B[t][g] x[t][h]^T       S: (d_state, d_head) per head
 *     y[t][h] = S^T C[t][g] + D[h] * x[t][h]
 *
 * The clamp is Mamba-2's time_step_limit; its default (0, inf) changes nothing
 * (softplus >= 0), so models without a limit pass dt_min = 0, dt_max = INFINITY.
 *
 * State layout (ours, chosen for speed): one sequence's state is
 *     (n_heads, d_state, d_head) f32, row n of head h contiguous over p,
 * i.e. S_h[n][p] = state[(h * d_state + n) * d_head + p]. That is the transpose of
 * the (head_dim, state_size) layout of the reference implementations: a decode
 * step then updates whole rows with a broadcast B[n] and accumulates y over rows
 * with a broadcast C[n], with no horizontal reductions.
 *
 * Inputs are row-major with row strides in floats (the model slices x, B and C
 * out of one conv output row, dt out of the in-projection row):
 *     x  (rows, n_heads * d_head)     B, C (rows, n_groups * d_state)
 *     dt (rows, n_heads) raw           y    (rows, n_heads * d_head) before the norm
 *
 * Every kernel takes a threadpool (may be NULL) and splits the (sequence, head)
 * pairs over its threads. The step and verify kernels allocate nothing and need no
 * scratch; the chunked scan takes per-thread scratch (see mamba2_scan_scratch_bytes).
 *
 * Variants: the _ref kernels are plain scalar C, kept forever as the oracle (the
 * sequential scan is the oracle for the chunked one). The others run a kernel set,
 * one per ISA level (base/isa.h): ISA_REF's is portable C (mamba2_scalar.c, not
 * the oracle), the others SIMD. The plain names run the set of isa_active(), so
 * EDDY_FORCE_REF=1 runs the portable set, as a CPU without SIMD does.
 */
#ifndef EDDY_SSM_MAMBA2_H
#define EDDY_SSM_MAMBA2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/isa.h"
#include "base/threadpool.h"

/* ==== Parameters and inputs ==== */

typedef struct {
    int64_t n_heads, d_head;   /* d_inner = n_heads * d_head */
    int64_t n_groups, d_state; /* n_heads % n_groups == 0 */
    const float *A;            /* (n_heads) negative */
    const float *dt_bias;      /* (n_heads) */
    const float *D;            /* (n_heads) skip weight; NULL for none */
    float dt_min, dt_max;      /* clamp after softplus; (0, INFINITY) for none */
} mamba2_params;

typedef struct {
    const float *x;  int64_t x_stride;  /* (rows, n_heads * d_head) */
    const float *B;  int64_t B_stride;  /* (rows, n_groups * d_state) */
    const float *C;  int64_t C_stride;  /* (rows, n_groups * d_state) */
    const float *dt; int64_t dt_stride; /* (rows, n_heads) raw, before bias and softplus */
    float *y;        int64_t y_stride;  /* (rows, n_heads * d_head) output */
} mamba2_io;

/* Floats in one sequence's state: n_heads * d_state * d_head. */
int64_t mamba2_state_floats(const mamba2_params *p);

/* ==== Kernel sets ==== */

/* The `_isa` entries below take a level for which isa_available() holds. The name
 * of the set the plain names run: isa_name(isa_active()). */
const char *mamba2_variant(void);

/* ==== Decode step: one token for each of n_seq sequences ==== */

/* Row i of io is sequence i; state[i] (n_heads, d_state, d_head) is updated in place. */
void mamba2_step(const mamba2_params *p, const mamba2_io *io, float *const *state, int64_t n_seq,
                 threadpool *pool);
void mamba2_step_ref(const mamba2_params *p, const mamba2_io *io, float *const *state, int64_t n_seq,
                     threadpool *pool);
void mamba2_step_isa(isa_level isa, const mamba2_params *p, const mamba2_io *io, float *const *state,
                     int64_t n_seq, threadpool *pool);

/* ==== Verify: K positions per sequence, every position's state kept ==== */

/* Row i*K + k of io is position k of sequence i. state[i] is read, never written;
 * snap[i*K + k] receives the state after position k, so accepting j + 1 draft tokens
 * is taking snap[i*K + j] as the new state. Same results as K mamba2_step calls. */
void mamba2_verify(const mamba2_params *p, const mamba2_io *io, const float *const *state,
                   float *const *snap, int64_t n_seq, int64_t K, threadpool *pool);
void mamba2_verify_ref(const mamba2_params *p, const mamba2_io *io, const float *const *state,
                       float *const *snap, int64_t n_seq, int64_t K, threadpool *pool);
void mamba2_verify_isa(isa_level isa, const mamba2_params *p, const mamba2_io *io, const float *const *state,
                       float *const *snap, int64_t n_seq, int64_t K, threadpool *pool);

/* ==== Verify without snapshots, and the replay that accepts ==== */

/* As mamba2_verify, but only the outputs are kept: each (sequence, head) runs its K
 * positions from state[i], which is only read, in a buffer of one head's state
 * (d_state * d_head floats) of its own, so a verify reads each state once and writes
 * none. The buffers: `scratch` (pool_size(pool) regions of mamba2_verify_scratch_bytes,
 * 64 bytes apart, or one when pool is NULL) or, when scratch is NULL, the pool's
 * per-thread scratch, reserved beforehand. Accepting j + 1 positions is then
 * mamba2_replay over rows 0..j on the state. */
size_t mamba2_verify_scratch_bytes(const mamba2_params *p);
void mamba2_verify_outputs(const mamba2_params *p, const mamba2_io *io, const float *const *state, int64_t n_seq,
                           int64_t K, threadpool *pool, void *scratch);
void mamba2_verify_outputs_isa(isa_level isa, const mamba2_params *p, const mamba2_io *io,
                               const float *const *state, int64_t n_seq, int64_t K, threadpool *pool,
                               void *scratch);

/* T positions of one sequence, in place on state, by the decode step's kernel one
 * token at a time: the state and outputs are bit for bit those of T mamba2_step calls,
 * and of mamba2_verify's and mamba2_verify_outputs' rows. */
void mamba2_replay(const mamba2_params *p, const mamba2_io *io, int64_t T, float *state, threadpool *pool);
void mamba2_replay_isa(isa_level isa, const mamba2_params *p, const mamba2_io *io, int64_t T, float *state,
                       threadpool *pool);

/* ==== Scan (prefill): T_i tokens for each of n_seq sequences ==== */

/* Sequence i owns rows [seq_start[i], seq_start[i+1]) of io (seq_start: n_seq + 1
 * non-decreasing offsets) and state[i], which holds the state before its first row
 * and receives the state after its last.
 *
 * mamba2_scan picks the chunked scan for long sequences and the sequential one for
 * short ones. The chunked scan needs scratch: `scratch` of mamba2_scan_scratch_bytes
 * (p, chunk, pool_size(pool)) bytes, or, when scratch is NULL, the pool's per-thread
 * scratch, reserved beforehand with pool_reserve_scratch(pool,
 * mamba2_scan_scratch_bytes(p, chunk, 1)). mamba2_scan uses chunk MAMBA2_CHUNK. */
#define MAMBA2_CHUNK 64
#define MAMBA2_CHUNK_MAX 512

size_t mamba2_scan_scratch_bytes(const mamba2_params *p, int64_t chunk, int n_threads);

void mamba2_scan(const mamba2_params *p, const mamba2_io *io, const int64_t *seq_start, float *const *state,
                 int64_t n_seq, threadpool *pool, void *scratch);
/* The sequential scan in plain C: the oracle. */
void mamba2_scan_ref(const mamba2_params *p, const mamba2_io *io, const int64_t *seq_start, float *const *state,
                     int64_t n_seq, threadpool *pool);
/* The sequential scan with one kernel set. */
void mamba2_scan_seq_isa(isa_level isa, const mamba2_params *p, const mamba2_io *io, const int64_t *seq_start,
                         float *const *state, int64_t n_seq, threadpool *pool);
/* The SSD chunked scan with one kernel set; 1 <= chunk <= MAMBA2_CHUNK_MAX. */
void mamba2_scan_chunked_isa(isa_level isa, int64_t chunk, const mamba2_params *p, const mamba2_io *io,
                             const int64_t *seq_start, float *const *state, int64_t n_seq, threadpool *pool,
                             void *scratch);

#endif
