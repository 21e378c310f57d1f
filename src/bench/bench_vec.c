/*
 * bench_vec.c — benchmarks of the vector kernels (ops/vec.h): a float32 dot product
 * over a buffer in cache and one far out of it, each variant the CPU has.
 */
#include <stdio.h>

#include "base/alloc.h"
#include "base/cpu.h"
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
    struct {
        const char *name;
        float (*fn)(const float *, const float *, int64_t);
        bool ok;
    } variants[] = {
        {"ref", vec_dot_f32_ref, true},
#if defined(__x86_64__)
        {"avx2", vec_dot_f32_avx2, cpu_has_avx2(cpu_features())},
        {"avx512", vec_dot_f32_avx512, cpu_has_avx512(cpu_features())},
#elif defined(__aarch64__)
        {"neon", vec_dot_f32_neon, cpu_features()->neon},
#endif
    };
    const int64_t sizes[] = {4096, 64 << 20}; /* 32 KiB pair (L1/L2), 512 MiB pair (memory) */
    for (size_t s = 0; s < 2; s++) {
        int64_t n = sizes[s];
        float *x = bench_random_floats(n, 1, 1.0f), *y = bench_random_floats(n, 2, 1.0f);
        if (!x || !y) {
            eddy_free_aligned(x), eddy_free_aligned(y);
            continue;
        }
        for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
            if (!variants[v].ok) continue;
            dot_job job = {variants[v].fn, x, y, n, 0};
            bench_result r = {.op = "vec_dot_f32", .variant = variants[v].name};
            snprintf(r.shape, sizeof r.shape, "n=%lld (1 thread)", (long long)n);
            r.seconds = bench_median(run_dot, &job, n > 100000 ? 3 : 1000, n > 100000 ? 0.5 : 0.1);
            r.bytes = 2.0 * (double)n * sizeof(float);
            r.flops = 2.0 * (double)n;
            bench_emit(env, &r);
        }
        eddy_free_aligned(x), eddy_free_aligned(y);
    }
}
