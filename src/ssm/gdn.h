/*
 * gdn.h — the gated delta rule (Gated DeltaNet's recurrence): decode step for
 * many sequences, sequential scan (the oracle), chunked prefill (WY / UT
 * transform), and a K-position verify scan with per-position state snapshots.
 *
 * Per value head h, with q and k already L2-normalized (conv1d's fused norm does
 * that) and S the d_k x d_v state:
 *
 *   S = exp(g) S;   u = beta (v - S^T k);   S += k u^T;   o = S^T (scale q)
 *
 * Value head h reads key head kh(h): h % n_k_heads (GDN_KHEAD_MOD, the layout
 * llama.cpp writes for qwen35 / qwen35moe) or h / (n_v_heads / n_k_heads)
 * (GDN_KHEAD_DIV, Hugging Face and qwen3next).
 *
 * ---- State layout (one slot per sequence) ----
 *   state: (n_v_heads, d_k, d_v) f32 — head h, row i (key index) contiguous over j
 *          (value index): S_h[i][j] at state[(h*d_k + i)*d_v + j]. This is the
 *          [H, K, V] layout of fla and transformers, so states compare directly.
 *   One slot is gdn_state_floats(p) floats; slot n starts at state + n*that.
 * Why this layout: the decode step streams the rows i once, accumulating both
 * S^T k and S^T q as vectors over j (one reduction pass serves both, no horizontal
 * sums), then rewrites the rows with S = exp(g) S + k u^T while they are still in
 * cache; o = exp(g) S^T q + u (k.q). Each state is read once and written once.
 * The chunked prefill uses S as the right-hand operand of row-major GEMMs (K S,
 * Q S) and updates it with K^T U, all vectorized over j.
 *
 * ---- Inputs: rows ----
 * A row is one sequence (decode) or one token (scan, prefill, verify):
 *   q: (rows, n_k_heads, d_k)  row r at q + r*q_stride     (likewise k)
 *   v: (rows, n_v_heads, d_v)  row r at v + r*v_stride
 *   g, beta: (rows, n_v_heads) row r at g + r*g_stride, beta + r*beta_stride
 *   o: (rows, n_v_heads, d_v)  row r at o + r*o_stride     (output; must not overlap inputs)
 *
 * Limits: 1 <= d_k, d_v <= GDN_MAX_DIM; n_v_heads a multiple of n_k_heads, at most
 * GDN_MAX_GROUP value heads per key head. The SIMD
 * kernels need d_v to be a multiple of 16 (AVX-512), 8 (AVX2) or 4 (NEON); other
 * shapes run the scalar kernels.
 */
#ifndef EDDY_SSM_GDN_H
#define EDDY_SSM_GDN_H

#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "ssm/ssm.h"

#define GDN_MAX_DIM 256
#define GDN_CHUNK 64
#define GDN_MAX_GROUP 64 /* value heads per key head */

typedef enum { GDN_KHEAD_MOD = 0, GDN_KHEAD_DIV = 1 } gdn_head_map;

typedef struct {
    int64_t n_k_heads, n_v_heads;
    int64_t d_k, d_v;
    gdn_head_map head_map;
    float scale; /* multiplies q; 1/sqrt(d_k) for Qwen3-Next / Qwen3.5 */
} gdn_params;

typedef struct {
    const float *q, *k, *v, *g, *beta;
    int64_t q_stride, k_stride, v_stride, g_stride, beta_stride;
    float *o;
    int64_t o_stride;
} gdn_rows;

static inline int64_t gdn_state_floats(const gdn_params *p) { return p->n_v_heads * p->d_k * p->d_v; }

static inline int64_t gdn_key_head(const gdn_params *p, int64_t h) {
    return p->head_map == GDN_KHEAD_MOD ? h % p->n_k_heads : h / (p->n_v_heads / p->n_k_heads);
}

/* (a) Decode: one token for each of n_seq sequences (row s = sequence s), sequence s
 * on slot slot[s] (NULL: slot s). Each state is read once and written once. Threads
 * split (sequence, head), and heads x column blocks when there are few sequences. */
void gdn_step(threadpool *pool, const gdn_params *p, int64_t n_seq, const gdn_rows *rows, float *state,
              const int64_t *slot);

/* (b) Sequential scan over T tokens of one sequence (row t = token t); state is
 * the sequence's slot, updated in place. Threads split heads x column blocks. */
void gdn_scan(threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows, float *state);

/* (c) Chunked prefill over T tokens of one sequence: chunks of GDN_CHUNK tokens, gates
 * cumulated within a chunk and masked before exp, the last chunk padded with g = 0,
 * beta = 0. Needs gdn_chunked_scratch_size(p) bytes per thread: from `scratch`
 * (pool_size(pool) regions of that size, 64-byte aligned) or, when scratch is NULL,
 * from pool_scratch (reserve it first with pool_reserve_scratch). */
void gdn_chunked(threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows, float *state,
                 void *scratch);
size_t gdn_chunked_scratch_size(const gdn_params *p);

/* Prefill: gdn_scan for T below the measured crossover (gdn_prefill_uses_chunked),
 * otherwise gdn_chunked over the whole chunks and, when the last partial chunk is
 * itself below the crossover, gdn_scan over it. Same scratch contract as gdn_chunked. */
void gdn_prefill(threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows, float *state,
                 void *scratch);
int gdn_prefill_uses_chunked(const gdn_params *p, int64_t T);

/* (d) Speculative verify: n_seq sequences of T positions, row s*T + t. Each sequence
 * runs the scan from slot[s] (NULL: slot s), which is only read: the state after
 * position t is written to snap[s*T + t], a caller-owned slot of gdn_state_floats(p)
 * floats, so accepting t + 1 positions is taking snap[s*T + t] as the new state
 * (the verify contract every recurrent kernel shares: conv1d_verify, mamba2_verify). */
void gdn_verify(threadpool *pool, const gdn_params *p, int64_t n_seq, int64_t T, const gdn_rows *rows,
                const float *state, const int64_t *slot, float *const *snap);

/* (e) Speculative verify without snapshots: as gdn_verify, each sequence from slot[s],
 * which is only read, but only the outputs are kept: each unit runs its head's state in
 * a buffer of its own. Accepting t + 1 positions is then gdn_replay over rows 0..t on
 * the slot. Each part needs gdn_verify_scratch_size(p) bytes: from `scratch`
 * (pool_size(pool) such regions, 64-byte aligned) or, when scratch is NULL, from
 * pool_scratch. So a verify of T positions reads the state once and writes none of it,
 * where gdn_verify writes T states. */
void gdn_verify_outputs(threadpool *pool, const gdn_params *p, int64_t n_seq, int64_t T, const gdn_rows *rows,
                        const float *state, const int64_t *slot, void *scratch);
size_t gdn_verify_scratch_size(const gdn_params *p);

/* (f) Replay: T positions of one sequence in place on state, by the decode step's
 * kernel one token at a time, so the state (and the outputs, in rows' o) are bit for
 * bit those of T gdn_step calls, and of gdn_verify's and gdn_verify_outputs' rows. */
void gdn_replay(threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows, float *state);

/* The same with an explicit ISA's kernels (tests, benchmarks). */
void gdn_step_isa(isa_level isa, threadpool *pool, const gdn_params *p, int64_t n_seq, const gdn_rows *rows,
                  float *state, const int64_t *slot);
void gdn_scan_isa(isa_level isa, threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows,
                  float *state);
void gdn_chunked_isa(isa_level isa, threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows,
                     float *state, void *scratch);
void gdn_verify_isa(isa_level isa, threadpool *pool, const gdn_params *p, int64_t n_seq, int64_t T,
                    const gdn_rows *rows, const float *state, const int64_t *slot, float *const *snap);
void gdn_verify_outputs_isa(isa_level isa, threadpool *pool, const gdn_params *p, int64_t n_seq, int64_t T,
                            const gdn_rows *rows, const float *state, const int64_t *slot, void *scratch);
void gdn_replay_isa(isa_level isa, threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows,
                    float *state);

/* Scalar oracles, single-threaded, written as the equations read. gdn_scan_ref is the
 * reference for every other variant; gdn_step_ref is gdn_scan_ref over one token per
 * sequence. */
void gdn_step_ref(const gdn_params *p, int64_t n_seq, const gdn_rows *rows, float *state, const int64_t *slot);
void gdn_scan_ref(const gdn_params *p, int64_t T, const gdn_rows *rows, float *state);
void gdn_verify_ref(const gdn_params *p, int64_t n_seq, int64_t T, const gdn_rows *rows, const float *state,
                    const int64_t *slot, float *const *snap);

#endif
