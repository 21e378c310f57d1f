/*
 * bench_ssm_gdn.c — benchmarks of the Gated DeltaNet kernels (ssm/gdn.h, ssm/ssm.h)
 * at the shapes of Qwen3-Next / Qwen3.5: 32 value heads, 16 key heads,
 * d_k = d_v = 128, conv_dim 8192 (q|k|v), K = 4.
 *
 *   gdn_step       decode, 1 and 8 sequences; states rotate over 1 GiB (past the
 *                  last-level cache); bytes = state read + state written.
 *   gdn_prefill    one sequence of T = 4096, chunked and scan; flops = 6 T H d_k d_v.
 *   gdn_crossover  scan against chunked for T = 1 .. 512 (gdn_prefill's threshold).
 *   conv1d_step    decode, 1 and 8 sequences; conv states rotate over 1 GiB; bytes =
 *                  state read + written + input row read + output row written.
 *   conv1d_prefill one sequence of T = 4096; bytes = input read + output written.
 *   gated_norm     per-head gated RMSNorm over 4096 tokens x 32 heads x 128.
 */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "bench.h"
#include "ssm/gdn.h"
#include "ssm/ssm.h"

void bench_gdn_step_cases(bench_env *env);
void bench_gdn_prefill_cases(bench_env *env);
void bench_gdn_crossover_cases(bench_env *env);
void bench_conv1d_step_cases(bench_env *env);
void bench_conv1d_prefill_cases(bench_env *env);
void bench_gated_norm_cases(bench_env *env);

#define NK 16
#define NV 32
#define DK 128
#define DV 128
#define CONV_DIM (2 * NK * DK + NV * DV)
#define KTAPS 4

static const gdn_params qwen_gdn = {NK, NV, DK, DV, GDN_KHEAD_MOD, 0.08838834764831845f};

/* Every ISA the CPU has; `with_ref` adds the scalar kernels. */
static int isas(isa_level *out, bool with_ref) {
    int n = 0;
    for (int i = with_ref ? 0 : 1; i < ISA_COUNT; i++)
        if (isa_available((isa_level)i)) out[n++] = (isa_level)i;
    return n;
}

/* Token rows as the model lays them out: q | k | v of one conv output row, then
 * the gates of the token. */
typedef struct {
    float *qkv, *g, *beta, *o;
    int64_t rows;
} gdn_inputs;

static bool make_inputs(gdn_inputs *in, int64_t rows) {
    in->rows = rows;
    in->qkv = bench_random_floats(rows * CONV_DIM, 11, 0.15f);
    in->g = bench_random_floats(rows * NV, 12, 0.1f);
    in->beta = bench_random_floats(rows * NV, 13, 0.5f);
    in->o = bench_random_floats(rows * NV * DV, 14, 1.0f);
    if (!in->qkv || !in->g || !in->beta || !in->o) return false;
    for (int64_t i = 0; i < rows * NV; i++) in->g[i] = in->g[i] - 0.06f, in->beta[i] += 0.5f; /* g < 0, beta in (0, 1) */
    return true;
}

static void free_inputs(gdn_inputs *in) {
    eddy_free_aligned(in->qkv), eddy_free_aligned(in->g), eddy_free_aligned(in->beta), eddy_free_aligned(in->o);
}

static gdn_rows rows_of(const gdn_inputs *in) {
    gdn_rows r = {in->qkv, in->qkv + NK * DK, in->qkv + 2 * NK * DK, in->g, in->beta,
                  CONV_DIM, CONV_DIM, CONV_DIM, NV, NV, in->o, NV * DV};
    return r;
}

/* ==== gdn_step ==== */

typedef struct {
    isa_level isa;
    threadpool *pool;
    int64_t n_seq, n_slots, next;
    int64_t slot[64];
    gdn_rows rows;
    float *state;
} step_job;

static void run_gdn_step(void *p) {
    step_job *j = p;
    for (int64_t s = 0; s < j->n_seq; s++) j->slot[s] = (j->next + s) % j->n_slots;
    j->next = (j->next + j->n_seq) % j->n_slots;
    gdn_step_isa(j->isa, j->pool, &qwen_gdn, j->n_seq, &j->rows, j->state, j->slot);
}

void bench_gdn_step_cases(bench_env *env) {
    const int64_t ns = gdn_state_floats(&qwen_gdn), n_slots = 512; /* 512 x 2 MiB = 1 GiB, well past a 300 MiB L3 */
    float *state = bench_random_floats(n_slots * ns, 21, 0.1f);
    gdn_inputs in;
    if (!state || !make_inputs(&in, 8)) {
        fprintf(stderr, "gdn_step: out of memory\n");
        eddy_free_aligned(state);
        return;
    }
    isa_level list[ISA_COUNT];
    int n = isas(list, true);
    static const int64_t seqs[] = {1, 8};
    for (int si = 0; si < 2; si++)
        for (int v = 0; v < n; v++) {
            step_job j = {list[v], env->pool, seqs[si], n_slots, 0, {0}, rows_of(&in), state};
            bench_result r = {.op = "gdn_step", .variant = isa_name(list[v])};
            snprintf(r.shape, sizeof r.shape, "n_seq=%lld hv=%d hk=%d dk=%d dv=%d (1 GiB of states)",
                     (long long)seqs[si], NV, NK, DK, DV);
            r.seconds = bench_median(run_gdn_step, &j, list[v] == ISA_REF ? 5 : 50, 0.5);
            r.bytes = 2.0 * (double)seqs[si] * (double)ns * sizeof(float);
            r.flops = 6.0 * (double)seqs[si] * NV * DK * DV;
            bench_emit(env, &r);
        }
    free_inputs(&in);
    eddy_free_aligned(state);
}

/* ==== gdn_prefill and the crossover ==== */

typedef struct {
    isa_level isa;
    bool chunked;
    threadpool *pool;
    int64_t T;
    gdn_rows rows;
    float *state;
} prefill_job;

static void run_gdn_prefill(void *p) {
    prefill_job *j = p;
    if (j->chunked)
        gdn_chunked_isa(j->isa, j->pool, &qwen_gdn, j->T, &j->rows, j->state, NULL);
    else
        gdn_scan_isa(j->isa, j->pool, &qwen_gdn, j->T, &j->rows, j->state);
}

static void prefill_cases(bench_env *env, const char *op, const int64_t *Ts, int n_T, int min_reps) {
    int64_t T_max = 0;
    for (int i = 0; i < n_T; i++) T_max = Ts[i] > T_max ? Ts[i] : T_max;
    float *state = bench_random_floats(gdn_state_floats(&qwen_gdn), 31, 0.1f);
    gdn_inputs in;
    if (!state || !make_inputs(&in, T_max) ||
        pool_reserve_scratch(env->pool, gdn_chunked_scratch_size(&qwen_gdn), NULL) != EDDY_OK) {
        fprintf(stderr, "%s: out of memory\n", op);
        eddy_free_aligned(state);
        return;
    }
    isa_level list[ISA_COUNT];
    int n = isas(list, false);
    for (int ti = 0; ti < n_T; ti++)
        for (int v = 0; v < n; v++)
            for (int chunked = 1; chunked >= 0; chunked--) {
                prefill_job j = {list[v], chunked != 0, env->pool, Ts[ti], rows_of(&in), state};
                char variant[32];
                snprintf(variant, sizeof variant, "%s-%s", chunked ? "chunked" : "scan", isa_name(list[v]));
                bench_result r = {.op = op, .variant = variant};
                snprintf(r.shape, sizeof r.shape, "T=%lld hv=%d hk=%d dk=%d dv=%d", (long long)Ts[ti], NV, NK, DK,
                         DV);
                r.seconds = bench_median(run_gdn_prefill, &j, min_reps, Ts[ti] >= 1024 ? 1.0 : 0.2);
                r.flops = 6.0 * (double)Ts[ti] * NV * DK * DV;
                r.bytes = (double)Ts[ti] * (CONV_DIM + 2 * NV + NV * DV) * sizeof(float);
                bench_emit(env, &r);
            }
    free_inputs(&in);
    eddy_free_aligned(state);
}

void bench_gdn_prefill_cases(bench_env *env) {
    static const int64_t Ts[] = {4096};
    prefill_cases(env, "gdn_prefill", Ts, 1, 3);
}

void bench_gdn_crossover_cases(bench_env *env) {
    static const int64_t Ts[] = {1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 256, 512};
    prefill_cases(env, "gdn_crossover", Ts, (int)(sizeof Ts / sizeof Ts[0]), 5);
}

/* ==== conv1d ==== */

typedef struct {
    isa_level isa;
    threadpool *pool;
    conv1d_params p;
    int64_t n_seq, n_slots, next, T;
    int64_t slot[64];
    const float *x;
    float *y, *state;
} conv_job;

static void run_conv_step(void *p) {
    conv_job *j = p;
    for (int64_t s = 0; s < j->n_seq; s++) j->slot[s] = (j->next + s) % j->n_slots;
    j->next = (j->next + j->n_seq) % j->n_slots;
    conv1d_step_isa(j->isa, j->pool, &j->p, j->n_seq, j->x, CONV_DIM, j->y, CONV_DIM, j->state, j->slot);
}

static void run_conv_prefill(void *p) {
    conv_job *j = p;
    conv1d_prefill_isa(j->isa, j->pool, &j->p, j->T, j->x, CONV_DIM, j->y, CONV_DIM, j->state);
}

static bool conv_setup(conv_job *j, float **w, int64_t rows, int64_t n_slots) {
    *w = bench_random_floats(KTAPS * CONV_DIM, 41, 0.5f);
    j->x = bench_random_floats(rows * CONV_DIM, 42, 1.0f);
    j->y = bench_random_floats(rows * CONV_DIM, 43, 1.0f);
    j->state = bench_random_floats(n_slots * (KTAPS - 1) * CONV_DIM, 44, 1.0f);
    j->p = (conv1d_params){CONV_DIM, KTAPS, *w, NULL, 2 * NK * DK, DK, 1e-6f};
    j->n_slots = n_slots;
    return *w && j->x && j->y && j->state;
}

static void conv_free(conv_job *j, float *w) {
    eddy_free_aligned(w), eddy_free_aligned((void *)j->x), eddy_free_aligned(j->y), eddy_free_aligned(j->state);
}

void bench_conv1d_step_cases(bench_env *env) {
    const int64_t n_slots = 10923; /* x 96 KiB = 1 GiB, well past a 300 MiB L3 */
    conv_job j;
    float *w;
    memset(&j, 0, sizeof j);
    if (!conv_setup(&j, &w, 8, n_slots)) {
        fprintf(stderr, "conv1d_step: out of memory\n");
        conv_free(&j, w);
        return;
    }
    isa_level list[ISA_COUNT];
    int n = isas(list, true);
    static const int64_t seqs[] = {1, 8};
    for (int si = 0; si < 2; si++)
        for (int v = 0; v < n; v++) {
            j.isa = list[v], j.pool = env->pool, j.n_seq = seqs[si], j.next = 0;
            bench_result r = {.op = "conv1d_step", .variant = isa_name(list[v])};
            snprintf(r.shape, sizeof r.shape, "n_seq=%lld conv_dim=%d K=%d +l2 (1 GiB of states)",
                     (long long)seqs[si], CONV_DIM, KTAPS);
            r.seconds = bench_median(run_conv_step, &j, 200, 0.3);
            r.bytes = (double)seqs[si] * CONV_DIM * sizeof(float) * (2.0 * (KTAPS - 1) + 2.0);
            r.flops = (double)seqs[si] * CONV_DIM * 2.0 * KTAPS;
            bench_emit(env, &r);
        }
    conv_free(&j, w);
}

void bench_conv1d_prefill_cases(bench_env *env) {
    const int64_t T = 4096;
    conv_job j;
    float *w;
    memset(&j, 0, sizeof j);
    if (!conv_setup(&j, &w, T, 1)) {
        fprintf(stderr, "conv1d_prefill: out of memory\n");
        conv_free(&j, w);
        return;
    }
    isa_level list[ISA_COUNT];
    int n = isas(list, true);
    for (int v = 0; v < n; v++) {
        j.isa = list[v], j.pool = env->pool, j.T = T;
        bench_result r = {.op = "conv1d_prefill", .variant = isa_name(list[v])};
        snprintf(r.shape, sizeof r.shape, "T=%lld conv_dim=%d K=%d +l2", (long long)T, CONV_DIM, KTAPS);
        r.seconds = bench_median(run_conv_prefill, &j, 3, 0.5);
        r.bytes = 2.0 * (double)T * CONV_DIM * sizeof(float);
        r.flops = (double)T * CONV_DIM * 2.0 * KTAPS;
        bench_emit(env, &r);
    }
    conv_free(&j, w);
}

/* ==== gated RMSNorm ==== */

typedef struct {
    isa_level isa;
    threadpool *pool;
    int64_t rows;
    const float *y, *z, *w;
    float *out;
} norm_job;

static void run_norm(void *p) {
    norm_job *j = p;
    gated_rmsnorm_isa(j->isa, j->pool, j->rows, NV, DV, j->y, NV * DV, j->z, NV * DV, j->w, 1e-6f, j->out, NV * DV);
}

void bench_gated_norm_cases(bench_env *env) {
    const int64_t rows = 4096;
    float *y = bench_random_floats(rows * NV * DV, 51, 1.0f), *z = bench_random_floats(rows * NV * DV, 52, 2.0f);
    float *w = bench_random_floats(DV, 53, 1.0f), *out = bench_random_floats(rows * NV * DV, 54, 1.0f);
    if (y && z && w && out) {
        isa_level list[ISA_COUNT];
        int n = isas(list, true);
        for (int v = 0; v < n; v++) {
            norm_job j = {list[v], env->pool, rows, y, z, w, out};
            bench_result r = {.op = "gated_norm", .variant = isa_name(list[v])};
            snprintf(r.shape, sizeof r.shape, "rows=%lld heads=%d d=%d", (long long)rows, NV, DV);
            r.seconds = bench_median(run_norm, &j, 3, 0.3);
            r.bytes = 3.0 * (double)rows * NV * DV * sizeof(float);
            r.flops = 8.0 * (double)rows * NV * DV;
            bench_emit(env, &r);
        }
    }
    eddy_free_aligned(y), eddy_free_aligned(z), eddy_free_aligned(w), eddy_free_aligned(out);
}
