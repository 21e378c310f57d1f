/*
 * bench_vec.c — benchmarks of the vector kernels (ops/vec.h): a float32 dot product
 * over a buffer in cache and one far out of it, at each ISA level the CPU has.
 */
#include <stdio.h>

#include "base/alloc.h"
#include "base/isa.h"
#include "bench.h"
#include "ops/vec.h"

void bench_vec_cases(bench_env *env);

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
