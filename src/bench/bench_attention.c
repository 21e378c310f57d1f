/*
 * bench_attention.c — benchmarks of causal GQA attention (ops/attention.h): one
 * decode query and a 512-token prefill block, SmolLM2-135M's heads (9 query / 3 KV
 * heads of 64) and Qwen3.5-like ones (16 / 2 heads of 256), f16 and f32 caches,
 * each kernel the CPU has and the threaded reference. A decode call reads one of 32
 * layers' caches in turn, so the rows come from where a model's would (L3 or
 * memory), not from L1. Bytes: the key and value rows read; flops: 2 per
 * multiply-add of q k^T and p v.
 */
#include <stdio.h>

#include "base/alloc.h"
#include "bench.h"
#include "ops/attention.h"
#include "quant/fp16.h"

void bench_attention_cases(bench_env *env);

enum { N_LAYERS = 32 };

typedef struct {
    threadpool *pool;
    const attn_shape *s;
    attn_args a;
    const void *k[N_LAYERS], *v[N_LAYERS];
    int layers, next;
    const attn_kernel *kern;
} attn_job;

static void run_attn(void *p) {
    attn_job *j = p;
    j->a.k = j->k[j->next], j->a.v = j->v[j->next];
    j->next = (j->next + 1) % j->layers;
    ops_attention_with(j->pool, j->s, &j->a, j->kern);
}

/* A cache of n elements in type t, random N(0, 1)-ish values. */
static void *make_cache(int64_t n, qtype t, uint64_t seed) {
    float *f = bench_random_floats(n, seed, 1.0f);
    if (!f || t == QTYPE_F32) return f;
    uint16_t *h = eddy_malloc_aligned((size_t)n * sizeof(uint16_t), 64);
    if (h)
        for (int64_t i = 0; i < n; i++) h[i] = f32_to_fp16(f[i]);
    eddy_free_aligned(f);
    return h;
}

static void one_shape(bench_env *env, const char *model, attn_shape s, int64_t n_q, int64_t pos0, qtype t) {
    const int64_t n_kv = pos0 + n_q, K = s.n_head_kv * s.head_dim_k, V = s.n_head_kv * s.head_dim_v;
    const int layers = n_q == 1 ? N_LAYERS : 1;
    attn_job j = {.pool = env->pool, .s = &s, .layers = layers};
    float *q = bench_random_floats(n_q * s.n_head * s.head_dim_k, 7, 1.0f);
    float *out = eddy_malloc_aligned((size_t)(n_q * s.n_head * s.head_dim_v) * sizeof(float), 64);
    bool ok = q && out;
    for (int l = 0; l < layers; l++) {
        j.k[l] = make_cache((n_kv + ATTN_KB - 1) / ATTN_KB * ATTN_KB * K, t, 100 + l); /* whole tiles */
        j.v[l] = make_cache(n_kv * V, t, 200 + l);
        ok = ok && j.k[l] && j.v[l];
    }
    if (ok && pool_reserve_scratch(env->pool, ops_attention_scratch(&s, n_kv, pool_size(env->pool)), NULL) == EDDY_OK) {
        j.a = (attn_args){out, q, j.k[0], j.v[0], s.n_head * s.head_dim_v, s.n_head * s.head_dim_k, K, V, n_q,
                          pos0, t, t, NULL, 0, 0, true}; /* keys in tiles, as the engine keeps them */
        const attn_kernel *ks[4];
        int nk = attn_kernels_available(ks, 4);
        const double elem = t == QTYPE_F16 ? 2.0 : 4.0;
        const double keys = (double)n_q * pos0 + (double)n_q * (n_q + 1) / 2; /* query-key pairs per head */
        for (int ki = -1; ki < nk; ki++) {
            j.kern = ki < 0 ? NULL : ks[ki];
            if (j.kern && (s.head_dim_k % j.kern->width || s.head_dim_v % j.kern->width)) continue;
            if (!j.kern && n_q * pos0 > 100000) continue; /* the scalar reference would take seconds */
            bench_result r = {.op = "attention", .variant = j.kern ? j.kern->name : "ref"};
            snprintf(r.shape, sizeof r.shape, "%s heads=%lld/%lld dk=%lld n_q=%lld pos0=%lld %s", model,
                     (long long)s.n_head, (long long)s.n_head_kv, (long long)s.head_dim_k, (long long)n_q,
                     (long long)pos0, t == QTYPE_F16 ? "f16" : "f32");
            r.seconds = bench_median(run_attn, &j, 5, 0.3);
            r.bytes = (double)n_kv * (K + V) * elem;
            r.flops = 2.0 * keys * (double)s.n_head * (double)(s.head_dim_k + s.head_dim_v);
            bench_emit(env, &r);
        }
    }
    for (int l = 0; l < layers; l++) eddy_free_aligned((void *)j.k[l]), eddy_free_aligned((void *)j.v[l]);
    eddy_free_aligned(q), eddy_free_aligned(out);
}

void bench_attention_cases(bench_env *env) {
    const attn_shape smol = {9, 3, 64, 64, 0.125f}, qwen = {16, 2, 256, 256, 0.0625f};
    for (int half = 1; half >= 0; half--) {
        const qtype t = half ? QTYPE_F16 : QTYPE_F32;
        one_shape(env, "smollm2", smol, 1, 800, t);
        one_shape(env, "smollm2", smol, 512, 0, t);
        one_shape(env, "qwen", qwen, 1, 4000, t);
        one_shape(env, "qwen", qwen, 512, 512, t);
        one_shape(env, "qwen", qwen, 48, 4000, t);
    }
}
