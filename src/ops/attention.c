/*
 * attention.c — causal GQA attention: the scalar reference, the threaded fallback,
 * and the driver of the fast kernels (units, their split over threads, the merge of
 * key-range partials). The kernels themselves are in attention_simd_body.h.
 */
#include "attention.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "base/isa.h"
#include "base/error.h"
#include "quant/fp16.h"

/* ==== Reference ==== */

/* Element i of a key or value array of type t. */
static inline float kv_at(const void *p, qtype t, int64_t i) {
    return t == QTYPE_F16 ? fp16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static void one_query_ref(const attn_shape *s, const attn_args *a, int64_t t, int64_t h, float *scores) {
    const int64_t group = s->n_head / s->n_head_kv, hk = h / group;
    const int64_t n_keys = a->pos0 + t + 1;
    const float *q = a->q + t * a->sq + h * s->head_dim_k;
    float max = -INFINITY;
    for (int64_t j = 0; j < n_keys; j++) {
        const int64_t e0 = hk * s->head_dim_k;
        float dot = 0.0f;
        for (int64_t d = 0; d < s->head_dim_k; d++) dot += q[d] * kv_at(a->k, a->type_k, attn_k_elem(a, j, e0 + d));
        scores[j] = dot * s->scale;
        if (scores[j] > max) max = scores[j];
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n_keys; j++) {
        scores[j] = expf(scores[j] - max);
        sum += scores[j];
    }
    const float inv = (float)(1.0 / sum);
    float *out = a->out + t * a->so + h * s->head_dim_v;
    memset(out, 0, (size_t)s->head_dim_v * sizeof(float));
    for (int64_t j = 0; j < n_keys; j++) {
        const float p = scores[j] * inv;
        const int64_t v0 = attn_v_row(a, j) + hk * s->head_dim_v;
        for (int64_t d = 0; d < s->head_dim_v; d++) out[d] += p * kv_at(a->v, a->type_v, v0 + d);
    }
}

static void check_args(const attn_shape *s, const attn_args *a) {
    EDDY_ASSERT(s->n_head_kv > 0 && s->n_head % s->n_head_kv == 0);
    EDDY_ASSERT(a->type_k == QTYPE_F32 || a->type_k == QTYPE_F16);
    EDDY_ASSERT(a->type_v == QTYPE_F32 || a->type_v == QTYPE_F16);
}

void ops_attention_ref(const attn_shape *s, const attn_args *a, float *scores) {
    check_args(s, a);
    for (int64_t t = 0; t < a->n_q; t++)
        for (int64_t h = 0; h < s->n_head; h++) one_query_ref(s, a, t, h, scores);
}

/* ==== Fallback: the reference over (query, head) pairs on the pool ==== */

typedef struct {
    const attn_shape *s;
    const attn_args *a;
    threadpool *pool;
} ref_job;

static void ref_task(void *p, int ith, int nth) {
    ref_job *job = p;
    float *scores = pool_scratch(job->pool, ith);
    int64_t b, e;
    pool_split(job->a->n_q * job->s->n_head, ith, nth, &b, &e);
    for (int64_t i = b; i < e; i++) one_query_ref(job->s, job->a, i / job->s->n_head, i % job->s->n_head, scores);
}

/* ==== Dispatch ==== */

/* The kernel of an ISA level; NULL for ISA_REF (the threaded reference). */
static const attn_kernel *kernel_for(isa_level isa) {
    switch (isa) {
#if defined(__x86_64__)
    case ISA_AVX512: return &attn_kernel_avx512;
    case ISA_AVX2: return &attn_kernel_avx2;
#elif defined(__aarch64__)
    case ISA_NEON: return &attn_kernel_neon;
#endif
    default: return NULL;
    }
}

int attn_kernels_available(const attn_kernel **out, int max) {
    int n = 0;
    for (int l = ISA_COUNT - 1; l > ISA_REF; l--) /* best first */
        if (n < max && isa_available((isa_level)l) && kernel_for((isa_level)l)) out[n++] = kernel_for((isa_level)l);
    return n;
}

/* The best kernel whose vector width divides both head dims, or NULL. */
static const attn_kernel *pick(const attn_shape *s) {
    const attn_kernel *ks[4];
    int n = attn_kernels_available(ks, 4);
    for (int i = 0; i < n; i++)
        if (s->head_dim_k % ks[i]->width == 0 && s->head_dim_v % ks[i]->width == 0) return ks[i];
    return NULL;
}

const char *ops_attention_variant(const attn_shape *s) {
    const attn_kernel *k = pick(s);
    return k ? k->name : "ref";
}

/* ==== The chunk fold ==== */

void attn_fold(float *M, float *L, float *O, float m, float l, const float *o, int64_t dv) {
    if (m == -INFINITY) return; /* a chunk with no visible key adds nothing */
    const float mx = m > *M ? m : *M;
    const float eo = expf(*M - mx), en = expf(m - mx); /* *M = -inf: eo = 0 */
    *L = *L * eo + l * en;
    for (int64_t d = 0; d < dv; d++) O[d] = O[d] * eo + o[d] * en;
    *M = mx;
}

void attn_finish(float *out, const float *O, float L, int64_t dv) {
    const float inv = 1.0f / L;
    for (int64_t d = 0; d < dv; d++) out[d] = O[d] * inv;
}

/* ==== Units and threads ==== */

/* Query rows per unit: queries per block (tq) times the group. */
static int64_t queries_per_unit(const attn_shape *s) {
    const int64_t group = s->n_head / s->n_head_kv;
    return group >= ATTN_ROWS ? 1 : ATTN_ROWS / group;
}

static int64_t rows_max(const attn_shape *s) { return queries_per_unit(s) * (s->n_head / s->n_head_kv); }

/* Floats of one decode unit's partial: a row of (m, l, o) per query head. */
static int64_t part_floats(const attn_shape *s) { return s->n_head / s->n_head_kv * (s->head_dim_v + 2); }

static int64_t n_chunks(int64_t n_keys) { return (n_keys + ATTN_CHUNK - 1) / ATTN_CHUNK; }

/* A few queries (a verify's) split over key chunks like a decode query while their
 * partials fit: the scratch has room for this many of them this far into a sequence. */
#define ATTN_SPLIT_Q 8
#define ATTN_SPLIT_CTX 8192

size_t ops_attention_scratch(const attn_shape *s, int64_t n_ctx, int n_threads) {
    size_t ref = (size_t)n_ctx * sizeof(float);
    /* with more than one thread a decode query splits into (KV head, chunk) units,
     * each thread keeping the partials of its share */
    int64_t parts = 0;
    if (n_threads > 1) {
        const int64_t ctx_q = n_ctx < ATTN_SPLIT_CTX ? n_ctx : ATTN_SPLIT_CTX;
        const int64_t one = (s->n_head_kv * n_chunks(n_ctx) + n_threads - 1) / n_threads;
        const int64_t few = (s->n_head_kv * n_chunks(ctx_q) + n_threads - 1) / n_threads * ATTN_SPLIT_Q;
        parts = (one > few ? one : few) * part_floats(s);
    }
    size_t fast = (size_t)(attn_work_floats(s, rows_max(s)) + parts) * sizeof(float);
    return ref > fast ? ref : fast;
}

/* Work (multiply-adds) a thread should get before another one is woken. */
#define ATTN_MIN_WORK ((int64_t)1 << 16)

typedef struct {
    const attn_shape *s;
    const attn_args *a;
    threadpool *pool;
    const attn_kernel *kern;
    int64_t tq, n_qb, n_split, n_units, rows;
    int64_t part; /* floats of one split unit's partials: n_q * part_floats */
    int nth;
} fast_job;

/* Units, listed most keys first: (query block, KV head), or, split, (chunk, KV head)
 * with n_split chunks: for one decode query on several threads, and for a few queries
 * that fit one block (a verify's) when the scratch holds their partials. Unit k goes to thread
 * snake(k): threads 0..nth-1, then nth-1..0, and so on, so the costly early units
 * spread over all threads; a thread takes one unit per round, so unit k is its
 * (k / nth)-th: the slot of its partial. */
static void plan_units(fast_job *j, int pool_n) {
    const attn_shape *s = j->s;
    const attn_args *a = j->a;
    j->tq = queries_per_unit(s);
    j->n_qb = (a->n_q + j->tq - 1) / j->tq;
    j->rows = rows_max(s);
    const int64_t work = s->n_head * a->n_q * (a->pos0 + (a->n_q + 1) / 2) * (s->head_dim_k + s->head_dim_v);
    int64_t nth = 1 + work / ATTN_MIN_WORK;
    if (nth > pool_n) nth = pool_n;
    /* a split takes every thread of the pool: ops_attention_scratch sized the partial
     * slots of one query for that (ceil(units / pool threads) per thread); a few queries
     * split only while their partials fit the same room (shorter contexts than n_ctx) */
    j->n_split = 1;
    j->part = a->n_q * part_floats(s);
    if (nth > 1 && j->n_qb == 1) {
        const int64_t chunks = n_chunks(a->pos0 + a->n_q), slots = (s->n_head_kv * chunks + pool_n - 1) / pool_n;
        const size_t need = (size_t)(attn_work_floats(s, j->rows) + slots * j->part) * sizeof(float);
        if (a->n_q == 1 || (chunks > 1 && need <= pool_scratch_size(j->pool))) j->n_split = chunks;
    }
    if (j->n_split > 1) nth = pool_n;
    j->n_units = j->n_qb * s->n_head_kv * j->n_split;
    j->nth = (int)(nth < j->n_units ? nth : j->n_units);
    if (j->n_split > 1) {
        const int64_t slots = (j->n_units + j->nth - 1) / j->nth;
        EDDY_ASSERT((size_t)(attn_work_floats(s, j->rows) + slots * j->part) * sizeof(float) <=
                    pool_scratch_size(j->pool));
    }
}

static int snake(int64_t k, int nth) {
    const int64_t round = k / nth, pos = k % nth;
    return (int)(round & 1 ? nth - 1 - pos : pos);
}

static float *part_slot(const fast_job *j, int64_t k) {
    const size_t work = (size_t)attn_work_floats(j->s, j->rows);
    float *base = (float *)pool_scratch(j->pool, snake(k, j->nth)) + work;
    return base + (k / j->nth) * j->part;
}

/* The unit of a split decode query for chunk c of KV head hk. */
static int64_t split_unit(const fast_job *j, int64_t c, int64_t hk) { return c * j->s->n_head_kv + hk; }

static void unit_of(const fast_job *j, int64_t k, attn_unit *u) {
    const attn_args *a = j->a;
    u->s = j->s, u->a = a;
    if (j->n_split > 1) { /* every query: unit (chunk, KV head); chunks of equal size first */
        const int64_t c = k / j->s->n_head_kv;
        u->hk = k % j->s->n_head_kv;
        u->t0 = 0, u->nt = a->n_q;
        u->j0 = c * ATTN_CHUNK;
        u->j1 = c == j->n_split - 1 ? a->pos0 + a->n_q : u->j0 + ATTN_CHUNK;
        u->part = part_slot(j, k);
        return;
    }
    const int64_t qb = j->n_qb - 1 - k / j->s->n_head_kv;
    u->hk = k % j->s->n_head_kv;
    u->t0 = qb * j->tq;
    u->nt = a->n_q - u->t0 < j->tq ? a->n_q - u->t0 : j->tq;
    u->j0 = 0, u->j1 = a->pos0 + u->t0 + u->nt; /* the keys the block's last query sees */
    u->part = NULL;
}

static void fast_task(void *p, int ith, int nth) {
    fast_job *j = p;
    EDDY_ASSERT(nth == j->nth);
    float *work = pool_scratch(j->pool, ith);
    for (int64_t round = 0;; round++) {
        const int64_t k = round * nth + (round & 1 ? nth - 1 - ith : ith);
        if (k >= j->n_units) break;
        attn_unit u;
        unit_of(j, k, &u);
        j->kern->unit(&u, work);
    }
}

/* A split: each query row's chunk partials folded in chunk order (a chunk past a
 * query's last key left m = -inf, which folds to nothing). The fold state lives in out
 * (O) and two floats; out is then normalized in place. */
static void merge_parts(const fast_job *j) {
    const attn_shape *s = j->s;
    const attn_args *a = j->a;
    const int64_t group = s->n_head / s->n_head_kv, dv = s->head_dim_v;
    for (int64_t t = 0; t < a->n_q; t++)
        for (int64_t hk = 0; hk < s->n_head_kv; hk++)
            for (int64_t g = 0; g < group; g++) {
                float *out = a->out + t * a->so + (hk * group + g) * dv, M = -INFINITY, L = 0.0f;
                memset(out, 0, (size_t)dv * sizeof(float));
                for (int64_t c = 0; c < j->n_split; c++) {
                    const float *pc = part_slot(j, split_unit(j, c, hk)) + (t * group + g) * (dv + 2);
                    attn_fold(&M, &L, out, pc[0], pc[1], pc + 2, dv);
                }
                attn_finish(out, out, L, dv);
            }
}

void ops_attention_with(threadpool *pool, const attn_shape *s, const attn_args *a, const attn_kernel *kern) {
    check_args(s, a);
    EDDY_ASSERT(pool != NULL);
    EDDY_ASSERT(pool_scratch_size(pool) >= ops_attention_scratch(s, a->pos0 + a->n_q, pool_size(pool)));
    EDDY_ASSERT(!kern || (s->head_dim_k % kern->width == 0 && s->head_dim_v % kern->width == 0));
    if (a->n_q <= 0) return;
    if (!kern) {
        ref_job job = {s, a, pool};
        int64_t pairs = a->n_q * s->n_head;
        pool_run(pool, ref_task, &job, pairs < pool_size(pool) ? (int)pairs : 0);
        return;
    }
    fast_job j = {.s = s, .a = a, .pool = pool, .kern = kern};
    plan_units(&j, pool_size(pool));
    pool_run(pool, fast_task, &j, j.nth);
    if (j.n_split > 1) merge_parts(&j);
}

void ops_attention(threadpool *pool, const attn_shape *s, const attn_args *a) {
    ops_attention_with(pool, s, a, pick(s));
}
