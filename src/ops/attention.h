/*
 * attention.h — causal grouped-query attention over a sequence's key/value rows.
 *
 * Owns: softmax(q k^T * scale) v for one sequence, queries at consecutive positions,
 * keys and values read in f32 or f16. Does not own: where the keys and values live
 * (the KV cache in src/state) or the projections and rotary embedding around it
 * (src/model).
 *
 * Shapes (row strides in elements of each array's type, so q/k/v can be slices of
 * wider rows):
 *   q   (n_q,  n_head,    head_dim_k)  f32            stride sq   query t is at position pos0 + t
 *   k   (n_kv, n_head_kv, head_dim_k)  type_k         stride sk   row j holds position j
 *   v   (n_kv, n_head_kv, head_dim_v)  type_v         stride sv
 *   out (n_q,  n_head,    head_dim_v)  f32            stride so
 * type_k / type_v: QTYPE_F32 or QTYPE_F16 (raw IEEE half bits). Query t sees keys
 * 0 .. pos0 + t (causal); query head h reads key/value head h / (n_head / n_head_kv).
 *
 * Variants:
 *   ops_attention_ref   the scalar oracle, one (query, head) pair at a time, exact
 *                       expf, the softmax sum in double
 *   ops_attention       the fast version (attention_avx512.c / _avx2.c / _neon.c over
 *                       attention_simd_body.h): all query heads of one KV head and a
 *                       block of queries read each key/value row once, in blocks of
 *                       ATTN_KB keys with an online softmax and a vector exp. Each
 *                       row's keys are taken in fixed chunks of ATTN_CHUNK (positions
 *                       [c * ATTN_CHUNK, (c + 1) * ATTN_CHUNK)), each from a fresh
 *                       softmax state, folded in order by attn_fold: so a row's result
 *                       depends neither on the thread count nor on the other queries
 *                       of its batch (decoding reproduces a prefill bit for bit).
 *                       Threads take (KV head x query block) units; a decode query
 *                       also splits over chunks, whose partials are folded afterwards.
 *                       The kernel is the best available ISA level's (base/isa.h)
 *                       whose vector width divides both head dims, trying lower
 *                       levels after higher ones; at ISA_REF (EDDY_FORCE_REF=1), or
 *                       when none fits, the reference runs, threaded over (query,
 *                       head) pairs.
 * The two agree within float rounding: tests/test_attention.c states the bound.
 */
#ifndef EDDY_OPS_ATTENTION_H
#define EDDY_OPS_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "quant/qtypes.h"

typedef struct {
    int64_t n_head, n_head_kv, head_dim_k, head_dim_v;
    float scale; /* usually 1/sqrt(head_dim_k) */
} attn_shape;

typedef struct {
    float *out;
    const float *q;
    const void *k, *v;      /* in type_k / type_v */
    int64_t so, sq, sk, sv; /* row strides, in elements */
    int64_t n_q, pos0;
    qtype type_k, type_v;   /* QTYPE_F32 (0, the default) or QTYPE_F16 */
    /* NULL: rows j at k + j*sk (and v + j*sv). Else the rows are in blocks of
     * ATTN_CHUNK positions: row j at k + blocks[j / ATTN_CHUNK] * k_block + (j % ATTN_CHUNK) * sk,
     * k_block / v_block elements from one block to the next (the KV cache's paging) */
    const int32_t *blocks;
    int64_t k_block, v_block;
    /* false: as above. true: each ATTN_KB key rows from a multiple of ATTN_KB are
     * stored transposed in the room of those rows: element e of key j at
     * attn_k_row(a, j - j % ATTN_KB) + e * ATTN_KB + j % ATTN_KB (sk = the row's
     * elements, the KV cache's host layout, state.h); the keys then fill whole tiles */
    bool k_tiled;
} attn_args;

/* Element offsets of key row j and value row j from a->k / a->v (of a tile of keys
 * from j, j a multiple of ATTN_KB, when k_tiled); of element e of key j. */
static inline int64_t attn_k_row(const attn_args *a, int64_t j);
static inline int64_t attn_v_row(const attn_args *a, int64_t j);
static inline int64_t attn_k_elem(const attn_args *a, int64_t j, int64_t e);

/* Bytes of per-thread pool scratch ops_attention needs on a pool of n_threads for
 * any call with pos0 + n_q <= n_ctx (reserve with pool_reserve_scratch). */
size_t ops_attention_scratch(const attn_shape *s, int64_t n_ctx, int n_threads);

/* The fast version, on the pool's threads (see above). */
void ops_attention(threadpool *pool, const attn_shape *s, const attn_args *a);

/* The scalar oracle; scores: (pos0 + n_q) floats. */
void ops_attention_ref(const attn_shape *s, const attn_args *a, float *scores);

/* The name of the variant ops_attention uses for this shape ("avx512", "avx2",
 * "neon" or "ref"). */
const char *ops_attention_variant(const attn_shape *s);

/* ==== Internal: the ISA kernels and their contract (attention_simd_body.h) ==== */

/* Keys per block: scores of a block are one row of ATTN_KB floats per query row. */
#define ATTN_KB 16
/* Keys per chunk (a multiple of ATTN_KB): the unit of the softmax fold. */
#define ATTN_CHUNK 256
/* Query rows (query x head of one group) per unit, when the group is smaller. */
#define ATTN_ROWS 32

static inline int64_t attn_k_row(const attn_args *a, int64_t j) {
    return a->blocks ? a->blocks[j / ATTN_CHUNK] * a->k_block + j % ATTN_CHUNK * a->sk : j * a->sk;
}
static inline int64_t attn_v_row(const attn_args *a, int64_t j) {
    return a->blocks ? a->blocks[j / ATTN_CHUNK] * a->v_block + j % ATTN_CHUNK * a->sv : j * a->sv;
}
static inline int64_t attn_k_elem(const attn_args *a, int64_t j, int64_t e) {
    if (!a->k_tiled) return attn_k_row(a, j) + e;
    return attn_k_row(a, j - j % ATTN_KB) + e * ATTN_KB + j % ATTN_KB;
}

/* One unit of work: query rows of KV head hk against keys [j0, j1), j0 a multiple
 * of ATTN_CHUNK. Rows: r = (t - t0) * group + g for queries t0 <= t < t0 + nt and
 * heads h = hk * group + g; row r sees keys j <= pos0 + t. part NULL: folds the
 * unit's chunks and writes the normalized rows to out. Else the unit is one chunk
 * and writes per row its partial (m, l, o[head_dim_v]): the max of the scaled
 * scores it saw (-inf for none), the sum of exp(score - m), and sum exp(score - m) v,
 * for attention.c to fold. */
typedef struct {
    const attn_shape *s;
    const attn_args *a;
    int64_t hk, t0, nt, j0, j1;
    float *part; /* NULL, or (nt * group, head_dim_v + 2) */
} attn_unit;

/* The fold of one chunk's partial (m, l, o) into a row's state (M, L, O), o and O
 * of dv floats: M' = max(M, m), O' = O e^(M - M') + o e^(m - M'), L' likewise.
 * From M = -inf, L = 0, O = 0 the first fold gives (m, l, o) exactly. Every path
 * folds with this one function, in chunk order, so they agree bit for bit. */
void attn_fold(float *M, float *L, float *O, float m, float l, const float *o, int64_t dv);

/* out = O / L. */
void attn_finish(float *out, const float *O, float L, int64_t dv);

/* A unit's work area in the thread's scratch (floats, each part 64-byte aligned):
 *   kt (head_dim_k, ATTN_KB)   the key block, transposed, in f32
 *   vb (ATTN_KB, head_dim_v)   the value block in f32 (used when values are f16)
 *   p  (rows, ATTN_KB)         scores, then exp(score - m)
 *   o  (rows, head_dim_v)      the chunk's sum exp(score - m) v so far
 *   m, l (rows)                the chunk's running max and sum of exp(score - m)
 *   fo (rows, head_dim_v), fm, fl (rows)   the folded state of the chunks before */
typedef struct {
    float *kt, *vb, *p, *o, *m, *l, *fo, *fm, *fl;
} attn_work;

static inline int64_t attn_pad16(int64_t n) { return (n + 15) & ~(int64_t)15; }

static inline int64_t attn_work_floats(const attn_shape *s, int64_t rows) {
    return attn_pad16(s->head_dim_k * ATTN_KB) + attn_pad16(ATTN_KB * s->head_dim_v) + attn_pad16(rows * ATTN_KB) +
           2 * attn_pad16(rows * s->head_dim_v) + 4 * attn_pad16(rows);
}

/* work: cache-line aligned, attn_work_floats(s, rows) floats. */
static inline attn_work attn_work_carve(const attn_shape *s, int64_t rows, float *work) {
    attn_work w;
    w.kt = work, work += attn_pad16(s->head_dim_k * ATTN_KB);
    w.vb = work, work += attn_pad16(ATTN_KB * s->head_dim_v);
    w.p = work, work += attn_pad16(rows * ATTN_KB);
    w.o = work, work += attn_pad16(rows * s->head_dim_v);
    w.fo = work, work += attn_pad16(rows * s->head_dim_v);
    w.m = work, work += attn_pad16(rows);
    w.l = work, work += attn_pad16(rows);
    w.fm = work, work += attn_pad16(rows);
    w.fl = work;
    return w;
}

typedef void (*attn_unit_fn)(const attn_unit *u, float *work);

typedef struct {
    const char *name;
    int64_t width; /* floats per vector: head dims must be multiples of it */
    attn_unit_fn unit;
} attn_kernel;

extern const attn_kernel attn_kernel_avx512, attn_kernel_avx2, attn_kernel_neon;

/* The kernels of the levels isa_available() accepts (none at ISA_REF), best first,
 * into out (up to max); returns the count. */
int attn_kernels_available(const attn_kernel **out, int max);

/* ops_attention with kernel k (its width divides both head dims), or the threaded
 * reference when k is NULL. For the tests. */
void ops_attention_with(threadpool *pool, const attn_shape *s, const attn_args *a, const attn_kernel *k);

#endif
