/*
 * test_attention.c — causal GQA attention (ops/attention.h): the scalar reference
 * against a double-precision formulation, its f16 reads, and every fast kernel the
 * CPU runs (and the dispatched one) against the reference on a table of shapes:
 * head dims 24..256 (k and v apart too), groups 1..40, one query (decode, split over
 * key ranges) and 37 (prefill), first positions 0 and 700+, f16 / f32 / mixed caches,
 * strided rows, 1-4 threads.
 */
#include "test.h"

#include <stdlib.h>

#include "base/threadpool.h"
#include "ops/attention.h"
#include "quant/fp16.h"

/* ==== Inputs ==== */

/* A cache of n floats ~ N(0, 1) in type t (f16: rounded to nearest even); *exact
 * receives the values it holds, as floats. */
static void *rand_cache(test_rng *r, int64_t n, qtype t, float **exact) {
    float *f = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) f[i] = test_rng_normal(r);
    if (t == QTYPE_F32) {
        *exact = f;
        float *copy = malloc((size_t)(n ? n : 1) * sizeof(float));
        memcpy(copy, f, (size_t)n * sizeof(float));
        return copy;
    }
    uint16_t *h = malloc((size_t)(n ? n : 1) * sizeof(uint16_t));
    for (int64_t i = 0; i < n; i++) f[i] = fp16_to_f32(h[i] = f32_to_fp16(f[i]));
    *exact = f;
    return h;
}

static float *rand_floats(test_rng *r, int64_t n, float scale) {
    float *v = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = scale * test_rng_normal(r);
    return v;
}

/* softmax(q k^T scale) v in double over f32 arrays (k, v as floats). */
static void attention_double(const attn_shape *s, const attn_args *a, const float *k, const float *v, double *out) {
    int64_t group = s->n_head / s->n_head_kv;
    for (int64_t t = 0; t < a->n_q; t++)
        for (int64_t h = 0; h < s->n_head; h++) {
            int64_t hk = h / group, n = a->pos0 + t + 1;
            double *sc = malloc((size_t)n * sizeof(double)), max = -1e300, sum = 0;
            for (int64_t j = 0; j < n; j++) {
                double d = 0;
                for (int64_t i = 0; i < s->head_dim_k; i++)
                    d += (double)a->q[t * a->sq + h * s->head_dim_k + i] * k[j * a->sk + hk * s->head_dim_k + i];
                sc[j] = d * s->scale;
                if (sc[j] > max) max = sc[j];
            }
            for (int64_t j = 0; j < n; j++) sum += sc[j] = exp(sc[j] - max);
            for (int64_t i = 0; i < s->head_dim_v; i++) {
                double o = 0;
                for (int64_t j = 0; j < n; j++) o += sc[j] / sum * v[j * a->sv + hk * s->head_dim_v + i];
                out[(t * s->n_head + h) * s->head_dim_v + i] = o;
            }
            free(sc);
        }
}

/* ==== Reference ==== */

/* Attention output is a convex combination of values: error vs double is a few
 * float ulps of max|v| per term -> bound 1e-5 * max|v| (scores O(1), |v| <~ 5).
 * Reading an f16 cache gives exactly what reading its values as floats gives. */
TEST(attention_ref_matches_double_and_reads_f16) {
    test_rng r = test_rng_new();
    struct { int64_t n_head, n_head_kv, dk, dv, n_q, pos0; } cases[] = {
        {4, 2, 64, 64, 1, 0}, {4, 2, 64, 64, 1, 37}, {8, 8, 32, 16, 7, 0}, {6, 2, 16, 16, 13, 5},
        {4, 1, 128, 128, 3, 200}, {2, 2, 8, 8, 65, 0},
    };
    for (int c = 0; c < 6; c++)
        for (int half = 0; half <= 1; half++) {
            const qtype t = half ? QTYPE_F16 : QTYPE_F32;
            attn_shape s = {cases[c].n_head, cases[c].n_head_kv, cases[c].dk, cases[c].dv,
                            1.0f / sqrtf((float)cases[c].dk)};
            int64_t n_q = cases[c].n_q, n_kv = cases[c].pos0 + n_q, pad = 5; /* strided rows */
            int64_t sq = s.n_head * s.head_dim_k + pad, sk = s.n_head_kv * s.head_dim_k + pad;
            int64_t sv = s.n_head_kv * s.head_dim_v + pad, so = s.n_head * s.head_dim_v + pad;
            float *q = rand_floats(&r, n_q * sq, 1), *kf, *vf;
            void *k = rand_cache(&r, n_kv * sk, t, &kf), *v = rand_cache(&r, n_kv * sv, t, &vf);
            float *o1 = calloc((size_t)(n_q * so), 4), *o2 = calloc((size_t)(n_q * so), 4);
            double *want = malloc((size_t)(n_q * s.n_head * s.head_dim_v) * sizeof(double));
            float *scores = malloc((size_t)n_kv * 4);
            attn_args a = {o1, q, k, v, so, sq, sk, sv, n_q, cases[c].pos0, t, t, NULL, 0, 0, false};
            ops_attention_ref(&s, &a, scores);
            attention_double(&s, &a, kf, vf, want);
            for (int64_t i = 0; i < n_q * so; i++) {
                int64_t tt = i / so, e = i % so;
                if (e >= s.n_head * s.head_dim_v) continue;
                double w = want[tt * s.n_head * s.head_dim_v + e];
                if (!CHECKF(fabs(o1[i] - w) <= 1e-5, "case %d %s t=%lld e=%lld: %g vs %g", c, half ? "f16" : "f32",
                            (long long)tt, (long long)e, o1[i], w))
                    break;
            }
            /* the same values as floats: identical output */
            attn_args af = {o2, q, kf, vf, so, sq, sk, sv, n_q, cases[c].pos0, QTYPE_F32, QTYPE_F32, NULL, 0, 0, false};
            ops_attention_ref(&s, &af, scores);
            CHECKF(memcmp(o1, o2, (size_t)(n_q * so) * 4) == 0, "case %d %s: f16 read differs", c,
                   half ? "f16" : "f32");
            free(q), free(k), free(v), free(kf), free(vf), free(o1), free(o2), free(want), free(scores);
        }
}

/* ==== Fast kernels against the reference ==== */

typedef struct {
    int64_t n_head_kv, group, dk, dv, n_q, pos0;
    qtype tk, tv;
    float q_scale; /* 4: peaked softmax (scores with std ~4) */
} attn_case;

#define F16 QTYPE_F16
#define F32 QTYPE_F32
static const attn_case fast_cases[] = {
    {3, 3, 64, 64, 1, 0, F16, F16, 1},      /* SmolLM2: 9 heads / 3 KV heads, first token */
    {3, 3, 64, 64, 1, 757, F16, F16, 1},    /* SmolLM2 decode at 758 keys: split over key ranges */
    {3, 3, 64, 64, 37, 0, F32, F32, 1},     /* prefill from empty */
    {3, 3, 64, 64, 37, 700, F16, F16, 4},   /* prefill after 700 */
    {2, 1, 80, 80, 1, 731, F32, F32, 1},    /* group 1, head dim 80 */
    {2, 1, 80, 80, 37, 5, F16, F32, 4},     /* mixed types */
    {1, 4, 128, 128, 1, 703, F16, F16, 4},  /* group 4 */
    {1, 4, 128, 128, 37, 711, F32, F16, 1},
    {2, 8, 256, 256, 1, 0, F32, F32, 1},    /* Qwen3.5-like: group 8, head dim 256 */
    {2, 8, 256, 256, 1, 777, F16, F16, 1},
    {2, 8, 256, 256, 37, 0, F16, F16, 4},
    {1, 8, 256, 256, 37, 700, F32, F32, 1},
    {4, 4, 128, 64, 37, 19, F16, F16, 1},   /* head_dim_k != head_dim_v */
    {2, 3, 64, 128, 1, 900, F32, F16, 4},
    {5, 1, 64, 64, 1, 63, F16, F16, 1},     /* 64 keys: block and range edges */
    {3, 3, 64, 64, 16, 16, F16, F16, 1},    /* queries and keys on block edges */
    {1, 16, 64, 64, 3, 100, F16, F16, 1},   /* 16 heads per KV head: 2 queries per unit */
    {1, 40, 64, 64, 2, 50, F32, F32, 1},    /* 40 rows per query: more than ATTN_ROWS */
    {2, 2, 24, 40, 37, 9, F16, F16, 1},     /* dims AVX-512 cannot take (multiples of 8) */
    {2, 2, 20, 12, 5, 3, F32, F32, 1},      /* multiples of 4 only: the reference on x86 */
    {1, 1, 64, 64, 1, 600, F16, F16, 1},    /* a small decode split over 3 chunks on fewer threads than the pool */
};
#undef F16
#undef F32

/* The outputs of the fast kernels are the reference's up to float rounding: f32
 * sums in another order, exp as a polynomial (2 ulp) instead of expf, partial
 * results merged. Bound 2e-6 + 2e-5 |ref| + 1e-6 max|v| elementwise (measured
 * worst 7e-7 absolute with O(1) scores, 4.4e-6 with the peaked ones, |ref| ~ 1-3). */
static bool close_enough(float got, float want, float vmax) {
    return fabsf(got - want) <= 2e-6f + 2e-5f * fabsf(want) + 1e-6f * vmax;
}

static void run_case(const attn_case *cs, int ci, threadpool **pools, int n_pools, test_rng *r) {
    attn_shape s = {cs->n_head_kv * cs->group, cs->n_head_kv, cs->dk, cs->dv, 1.0f / sqrtf((float)cs->dk)};
    const int64_t n_q = cs->n_q, n_kv = cs->pos0 + n_q, pad = 3;
    const int64_t sq = s.n_head * s.head_dim_k + pad, sk = s.n_head_kv * s.head_dim_k + pad;
    const int64_t sv = s.n_head_kv * s.head_dim_v + pad, so = s.n_head * s.head_dim_v + pad;
    float *q = rand_floats(r, n_q * sq, cs->q_scale), *kf, *vf;
    void *k = rand_cache(r, n_kv * sk, cs->tk, &kf), *v = rand_cache(r, n_kv * sv, cs->tv, &vf);
    float vmax = 0;
    for (int64_t i = 0; i < n_kv * sv; i++) vmax = fmaxf(vmax, fabsf(vf[i]));
    float *want = calloc((size_t)(n_q * so), 4), *got = malloc((size_t)(n_q * so) * 4);
    float *scores = malloc((size_t)n_kv * 4);
    attn_args a = {want, q, k, v, so, sq, sk, sv, n_q, cs->pos0, cs->tk, cs->tv, NULL, 0, 0, false};
    ops_attention_ref(&s, &a, scores);

    const attn_kernel *ks[4];
    int nk = attn_kernels_available(ks, 4);
    for (int ki = -1; ki < nk; ki++) { /* -1: the dispatched ops_attention */
        const attn_kernel *kern = ki < 0 ? NULL : ks[ki];
        if (kern && (s.head_dim_k % kern->width || s.head_dim_v % kern->width)) continue;
        const char *name = kern ? kern->name : ops_attention_variant(&s);
        for (int pi = 0; pi < n_pools; pi++) {
            REQUIRE(pool_reserve_scratch(pools[pi], ops_attention_scratch(&s, n_kv, pool_size(pools[pi])), NULL) == EDDY_OK);
            memset(got, 0xff, (size_t)(n_q * so) * 4); /* NaN: rows left unwritten show */
            a.out = got;
            if (kern) ops_attention_with(pools[pi], &s, &a, kern);
            else ops_attention(pools[pi], &s, &a);
            float worst = 0;
            int64_t bad = -1;
            for (int64_t t = 0; t < n_q; t++)
                for (int64_t i = 0; i < s.n_head * s.head_dim_v; i++) {
                    const float g = got[t * so + i], w = want[t * so + i];
                    if (!(fabsf(g - w) <= worst)) worst = fabsf(g - w);
                    if (bad < 0 && !close_enough(g, w, vmax)) bad = t * so + i;
                }
            CHECKF(bad < 0, "case %d (%s, %d threads): t=%lld i=%lld: %g vs %g (worst %g)", ci, name,
                   pool_size(pools[pi]), (long long)(bad / so), (long long)(bad % so), bad < 0 ? 0 : got[bad],
                   bad < 0 ? 0 : want[bad], worst);
        }
    }
    free(q), free(k), free(v), free(kf), free(vf), free(want), free(got), free(scores);
}

TEST(attention_fast_matches_ref) {
    test_rng r = test_rng_new();
    for (int c = 0; c < (int)(sizeof fast_cases / sizeof fast_cases[0]); c++) {
        /* fresh pools: each case runs with exactly the scratch ops_attention_scratch asks for */
        threadpool *pools[4];
        for (int i = 0; i < 4; i++) REQUIRE(pool_create(&pools[i], i + 1, NULL) == EDDY_OK);
        run_case(&fast_cases[c], c, pools, 4, &r);
        for (int i = 0; i < 4; i++) pool_destroy(pools[i]);
    }
}

/* A row's arithmetic depends neither on the other queries of its batch nor on the
 * thread count (keys go in fixed chunks, folded in order): every query of a batch,
 * alone (a decode step, split over chunks on several threads) or in the batch, on
 * 1-4 threads, gives the same bits — so decoding token by token reproduces a
 * prefill exactly. 37 queries after 600 keys span three chunks. */
TEST(attention_fast_rows_independent_of_batch_and_threads) {
    test_rng r = test_rng_new();
    attn_shape s = {9, 3, 64, 64, 0.125f};
    const int64_t n_q = 37, pos0 = 600, n_kv = pos0 + n_q, sq = 9 * 64, sk = 3 * 64, so = 9 * 64;
    float *q = rand_floats(&r, n_q * sq, 2), *kf, *vf;
    void *k = rand_cache(&r, n_kv * sk, QTYPE_F16, &kf), *v = rand_cache(&r, n_kv * sk, QTYPE_F16, &vf);
    float *want = malloc((size_t)(n_q * so) * 4), *all = malloc((size_t)(n_q * so) * 4), *one = malloc((size_t)so * 4);
    const attn_kernel *ks[4];
    int nk = attn_kernels_available(ks, 4);
    for (int ki = 0; ki < nk; ki++)
        for (int n_threads = 1; n_threads <= 4; n_threads++) {
            threadpool *pool;
            REQUIRE(pool_create(&pool, n_threads, NULL) == EDDY_OK);
            REQUIRE(pool_reserve_scratch(pool, ops_attention_scratch(&s, n_kv, n_threads), NULL) == EDDY_OK);
            attn_args a = {n_threads == 1 ? want : all, q, k, v, so, sq, sk, sk, n_q, pos0, QTYPE_F16, QTYPE_F16,
                           NULL, 0, 0, false};
            ops_attention_with(pool, &s, &a, ks[ki]);
            if (n_threads > 1)
                CHECKF(memcmp(all, want, (size_t)(n_q * so) * 4) == 0, "%s: %d threads differ from 1", ks[ki]->name,
                       n_threads);
            for (int64_t t = 0; t < n_q; t += 9) {
                attn_args b = {one, q + t * sq, k, v, so, sq, sk, sk, 1, pos0 + t, QTYPE_F16, QTYPE_F16, NULL, 0, 0, false};
                ops_attention_with(pool, &s, &b, ks[ki]);
                CHECKF(memcmp(one, want + t * so, (size_t)so * 4) == 0, "%s, %d threads: query %lld alone differs",
                       ks[ki]->name, n_threads, (long long)t);
            }
            /* a verify's few queries (split over key chunks on several threads) */
            for (int64_t nv = 2; nv <= 8; nv += 3) {
                const int64_t t0 = 20;
                attn_args b = {all, q + t0 * sq, k, v, so, sq, sk, sk, nv, pos0 + t0, QTYPE_F16, QTYPE_F16, NULL, 0, 0, false};
                ops_attention_with(pool, &s, &b, ks[ki]);
                CHECKF(memcmp(all, want + t0 * so, (size_t)(nv * so) * 4) == 0,
                       "%s, %d threads: %lld queries after %lld differ", ks[ki]->name, n_threads, (long long)nv,
                       (long long)(pos0 + t0));
            }
            pool_destroy(pool);
        }
    free(q), free(k), free(v), free(kf), free(vf), free(want), free(all), free(one);
}

/* The KV cache's paging: rows in blocks of ATTN_CHUNK positions, found through a
 * block table in any order, give the same bits as the same rows laid out in one
 * array — for the reference and every fast kernel, decode and prefill, f16 and f32.
 * 800 keys span four blocks, the last one partly filled. */
TEST(attention_paged_and_tiled_keys_match_contiguous) {
    test_rng r = test_rng_new();
    attn_shape s = {8, 2, 64, 64, 0.125f};
    const int64_t sq = 8 * 64, sk = 2 * 64, so = 8 * 64, n_blk = 4, n_kv_max = n_blk * ATTN_CHUNK;
    const int32_t table[4] = {3, 0, 4, 1}; /* block i of the sequence sits at slab block table[i] */
    const qtype types[2] = {QTYPE_F16, QTYPE_F32};
    /* (n_q, pos0): the last two end inside a tile of keys */
    const int64_t shapes[4][2] = {{1, 799}, {37, 763}, {2, 807}, {3, 790}};
    threadpool *pool;
    REQUIRE(pool_create(&pool, 3, NULL) == EDDY_OK);
    REQUIRE(pool_reserve_scratch(pool, ops_attention_scratch(&s, n_kv_max, 3), NULL) == EDDY_OK);
    const attn_kernel *ks[4];
    const int nk = attn_kernels_available(ks, 4);
    for (int ti = 0; ti < 2; ti++)
        for (int si = 0; si < 4; si++) {
            const qtype t = types[ti];
            const int64_t n_q = shapes[si][0], pos0 = shapes[si][1], n_kv = pos0 + n_q;
            const size_t es = t == QTYPE_F16 ? 2 : 4, row = (size_t)sk * es, blk = ATTN_CHUNK * row;
            float *q = rand_floats(&r, n_q * sq, 2), *kf, *vf;
            char *k = rand_cache(&r, n_kv * sk, t, &kf), *v = rand_cache(&r, n_kv * sk, t, &vf);
            char *pk = calloc(5, blk), *pv = calloc(5, blk), *tk = malloc(5 * blk);
            memset(tk, 0x7e, 5 * blk); /* what a tile's unwritten rows hold must not matter: f16 NaN or f32 ~1e38 */
            for (int64_t j = 0; j < n_kv; j++) {
                const size_t at = (size_t)table[j / ATTN_CHUNK] * blk + (size_t)(j % ATTN_CHUNK) * row;
                memcpy(pk + at, k + (size_t)j * row, row);
                memcpy(pv + at, v + (size_t)j * row, row);
                /* the tiled layout: element e of key j at e * ATTN_KB + j % ATTN_KB of its tile */
                const size_t tile = at - (size_t)(j % ATTN_KB) * row;
                for (int64_t e = 0; e < sk; e++)
                    memcpy(tk + tile + (size_t)(e * ATTN_KB + j % ATTN_KB) * es, k + (size_t)j * row + (size_t)e * es, es);
            }
            float *flat = malloc((size_t)(n_q * so) * 4), *paged = malloc((size_t)(n_q * so) * 4);
            float *tiled = malloc((size_t)(n_q * so) * 4);
            float *scores = malloc((size_t)n_kv * 4);
            for (int ki = -1; ki < nk; ki++) { /* -1: the reference */
                attn_args a = {flat, q, k, v, so, sq, sk, sk, n_q, pos0, t, t, NULL, 0, 0, false};
                attn_args b = {paged, q, pk, pv, so, sq, sk, sk, n_q, pos0, t, t, table, ATTN_CHUNK * sk,
                               ATTN_CHUNK * sk, false};
                attn_args c = b;
                c.out = tiled, c.k = tk, c.k_tiled = true;
                if (ki < 0) {
                    ops_attention_ref(&s, &a, scores);
                    ops_attention_ref(&s, &b, scores);
                    ops_attention_ref(&s, &c, scores);
                } else {
                    ops_attention_with(pool, &s, &a, ks[ki]);
                    ops_attention_with(pool, &s, &b, ks[ki]);
                    ops_attention_with(pool, &s, &c, ks[ki]);
                }
                CHECKF(memcmp(flat, paged, (size_t)(n_q * so) * 4) == 0, "%s, %s cache, %lld queries after %lld: "
                       "paged rows differ", ki < 0 ? "ref" : ks[ki]->name, t == QTYPE_F16 ? "f16" : "f32",
                       (long long)n_q, (long long)pos0);
                CHECKF(memcmp(flat, tiled, (size_t)(n_q * so) * 4) == 0, "%s, %s cache, %lld queries after %lld: "
                       "tiled keys differ", ki < 0 ? "ref" : ks[ki]->name, t == QTYPE_F16 ? "f16" : "f32",
                       (long long)n_q, (long long)pos0);
            }
            free(q), free(k), free(v), free(kf), free(vf), free(pk), free(pv), free(tk), free(flat), free(paged);
            free(tiled), free(scores);
        }
    pool_destroy(pool);
}
