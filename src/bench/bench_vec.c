/*
 * bench_vec.c — benchmarks of the vector kernels (ops/vec.h): a float32 dot product
 * over a buffer in cache and one far out of it, at each ISA level the CPU has; the argmax
 * of a large vocabulary's logits, chunked and scalar, and with its probability.
 */
#include <stdio.h>

#include "base/alloc.h"
#include "base/isa.h"
#include "bench.h"
#include "ops/vec.h"

void bench_vec_cases(bench_env *env);
void bench_argmax_cases(bench_env *env);

typedef struct {
    float (*dot)(const float *, const float *, int64_t);
    const float *x, *y;
    int64_t n;
    float sink;
} dot_job;

static void run_dot(void *p) {
    dot_job *j = p;
    j->sink += j->dot(j->x, j->y, j->n);
}

typedef struct {
    int64_t (*argmax)(const float *, int64_t);
    const float *x;
    int64_t n, sink;
} argmax_job;

static void run_argmax(void *p) {
    argmax_job *j = p;
    j->sink += j->argmax(j->x, j->n);
}

/* The argmax and its probability (vec_argmax_softmax, a greedy draft's token), against
 * the same from the scalar oracles (vec_argmax_ref, vec_sum_exp_f32_ref's libm expf) */
static int64_t argmax_softmax_ref(const float *x, int64_t n) {
    const int64_t b = vec_argmax_ref(x, n);
    return b + (int64_t)(1.0 / vec_sum_exp_f32_ref(x, n, x[b]) > 2.0); /* the sum kept */
}

static int64_t argmax_softmax(const float *x, int64_t n) {
    float p;
    const int64_t b = vec_argmax_softmax(x, n, &p);
    return b + (int64_t)(p > 2.0f);
}

/* A 151936-token vocabulary's logits (Qwen's), in L2 / L3 as a step leaves them */
void bench_argmax_cases(bench_env *env) {
    const int64_t n = 151936;
    float *x = bench_random_floats(n, 3, 1.0f);
    if (!x) return;
    static const struct {
        const char *op, *variant;
        int64_t (*fn)(const float *, int64_t);
    } cases[] = {{"vec_argmax", "chunked", vec_argmax},
                 {"vec_argmax", "ref", vec_argmax_ref},
                 {"argmax_softmax", "vector", argmax_softmax},
                 {"argmax_softmax", "ref", argmax_softmax_ref}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        argmax_job job = {cases[k].fn, x, n, 0};
        bench_result r = {.op = cases[k].op, .variant = cases[k].variant};
        snprintf(r.shape, sizeof r.shape, "n=%lld (1 thread)", (long long)n);
        r.seconds = bench_median(run_argmax, &job, 200, 0.2);
        r.bytes = (double)n * sizeof(float);
        r.threads = 1;
        r.in_cache = true;
        bench_emit(env, &r);
    }
    eddy_free_aligned(x);
}

void bench_vec_cases(bench_env *env) {
    const int64_t sizes[] = {4096, 64 << 20}; /* 32 KiB pair (L1/L2), 512 MiB pair (memory) */
    for (size_t s = 0; s < 2; s++) {
        int64_t n = sizes[s];
        float *x = bench_random_floats(n, 1, 1.0f), *y = bench_random_floats(n, 2, 1.0f);
        if (!x || !y) {
            eddy_free_aligned(x), eddy_free_aligned(y);
            continue;
        }
        for (int l = 0; l < ISA_COUNT; l++) {
            const vec_kernels *k = vec_kernels_for((isa_level)l);
            if (!k || !isa_available((isa_level)l)) continue;
            dot_job job = {k->dot, x, y, n, 0};
            bench_result r = {.op = "vec_dot_f32", .variant = isa_name((isa_level)l)};
            snprintf(r.shape, sizeof r.shape, "n=%lld (1 thread)", (long long)n);
            r.seconds = bench_median(run_dot, &job, n > 100000 ? 3 : 1000, n > 100000 ? 0.5 : 0.1);
            r.bytes = 2.0 * (double)n * sizeof(float);
            r.flops = 2.0 * (double)n;
            r.threads = 1;
            r.in_cache = n <= 4096;
            bench_emit(env, &r);
        }
        eddy_free_aligned(x), eddy_free_aligned(y);
    }
}
