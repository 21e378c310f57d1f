/*
 * attention.c — causal GQA attention: scalar reference and the threaded version.
 */
#include "attention.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "ops/vec.h"

/* ==== Reference ==== */

static void one_query_ref(const attn_shape *s, const attn_args *a, int64_t t, int64_t h, float *scores) {
    const int64_t group = s->n_head / s->n_head_kv, hk = h / group;
    const int64_t n_keys = a->pos0 + t + 1;
    const float *q = a->q + t * a->sq + h * s->head_dim_k;
    float max = -INFINITY;
    for (int64_t j = 0; j < n_keys; j++) {
        const float *k = a->k + j * a->sk + hk * s->head_dim_k;
        float dot = 0.0f;
        for (int64_t d = 0; d < s->head_dim_k; d++) dot += q[d] * k[d];
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
        const float *v = a->v + j * a->sv + hk * s->head_dim_v;
        for (int64_t d = 0; d < s->head_dim_v; d++) out[d] += p * v[d];
    }
}

void ops_attention_ref(const attn_shape *s, const attn_args *a, float *scores) {
    EDDY_ASSERT(s->n_head_kv > 0 && s->n_head % s->n_head_kv == 0);
    for (int64_t t = 0; t < a->n_q; t++)
        for (int64_t h = 0; h < s->n_head; h++) one_query_ref(s, a, t, h, scores);
}

/* ==== Threaded ==== */

typedef struct {
    const attn_shape *s;
    const attn_args *a;
    threadpool *pool;
} attn_job;

static void one_query(const attn_shape *s, const attn_args *a, int64_t t, int64_t h, float *scores) {
    const int64_t group = s->n_head / s->n_head_kv, hk = h / group;
    const int64_t n_keys = a->pos0 + t + 1;
    const float *q = a->q + t * a->sq + h * s->head_dim_k;
    float max = -INFINITY;
    for (int64_t j = 0; j < n_keys; j++) {
        scores[j] = vec_dot_f32(q, a->k + j * a->sk + hk * s->head_dim_k, s->head_dim_k) * s->scale;
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
    for (int64_t j = 0; j < n_keys; j++)
        vec_axpy_f32(out, scores[j] * inv, a->v + j * a->sv + hk * s->head_dim_v, s->head_dim_v);
}

static void attn_task(void *p, int ith, int nth) {
    attn_job *job = p;
    float *scores = pool_scratch(job->pool, ith);
    int64_t b, e;
    pool_split(job->a->n_q * job->s->n_head, ith, nth, &b, &e);
    for (int64_t i = b; i < e; i++) one_query(job->s, job->a, i / job->s->n_head, i % job->s->n_head, scores);
}

void ops_attention(threadpool *pool, const attn_shape *s, const attn_args *a) {
    EDDY_ASSERT(s->n_head_kv > 0 && s->n_head % s->n_head_kv == 0);
    EDDY_ASSERT(pool != NULL);
    EDDY_ASSERT(pool_scratch_size(pool) >= (size_t)ops_attention_scratch(a->pos0, a->n_q) * sizeof(float));
    attn_job job = {s, a, pool};
    int64_t pairs = a->n_q * s->n_head;
    pool_run(pool, attn_task, &job, pairs < pool_size(pool) ? (int)pairs : 0);
}
