/*
 * mamba2.c — the Mamba-2 reference kernels (plain scalar C, the oracle), the
 * token-by-token drivers (decode step, verify, sequential scan) that run a kernel
 * set, and the dispatch (the set of isa_active()). The SSD chunked scan lives in
 * mamba2_chunk.c, the kernel sets in mamba2_scalar.c and mamba2_<isa>.c.
 */
#include "mamba2.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "mamba2_impl.h"

int64_t mamba2_state_floats(const mamba2_params *p) { return p->n_heads * p->d_state * p->d_head; }

static void check_params(const mamba2_params *p) {
    EDDY_ASSERT(p->n_heads > 0 && p->d_head > 0 && p->d_state > 0);
    EDDY_ASSERT(p->n_groups > 0 && p->n_heads % p->n_groups == 0);
    EDDY_ASSERT(p->A && p->dt_bias);
}

/* ==== Reference ==== */

/* One token of head h: Sout = dA Sin + dt B x^T, y = Sout^T C + D x, with S (d_state,
 * d_head) row-major. x, y: the head's (d_head) slices; B, C: its group's (d_state). */
static void ref_token(const mamba2_params *p, int64_t h, const float *Sin, float *Sout, const float *x,
                      const float *B, const float *C, float dt_raw, float *y) {
    const int64_t P = p->d_head, N = p->d_state;
    float dt = mamba2_dt(p, dt_raw, h);
    float dA = expf(dt * p->A[h]);
    float D = p->D ? p->D[h] : 0.0f;
    for (int64_t q = 0; q < P; q++) y[q] = 0.0f;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t q = 0; q < P; q++) {
            float s = dA * Sin[n * P + q] + B[n] * (dt * x[q]);
            Sout[n * P + q] = s;
            y[q] += C[n] * s;
        }
    }
    for (int64_t q = 0; q < P; q++) y[q] += D * x[q];
}

/* ==== Token-by-token drivers (reference or a kernel set) ==== */

typedef enum { JOB_STEP, JOB_VERIFY, JOB_VERIFY_OUT, JOB_SCAN } job_kind;

typedef struct {
    job_kind kind;
    const mamba2_params *p;
    const mamba2_io *io;
    float *const *state;        /* STEP, SCAN: (n_seq) updated in place */
    const float *const *s_in;   /* VERIFY, VERIFY_OUT: (n_seq) read only */
    float *const *snap;         /* VERIFY: (n_seq * K) */
    threadpool *pool;           /* VERIFY_OUT: whose scratch holds the head states, when work is NULL */
    uint8_t *work;              /* VERIFY_OUT: the head states, mamba2_verify_scratch_bytes apart */
    const int64_t *seq_start;   /* SCAN: (n_seq + 1) */
    int64_t n_seq, K;
    const mamba2_kernels *k;    /* NULL: reference */
} token_job;

/* Row r, head h: from Sin to Sout (each the head's (d_state, d_head) block). */
static void run_token(const token_job *j, int64_t r, int64_t h, const float *Sin, float *Sout) {
    const mamba2_params *p = j->p;
    const mamba2_io *io = j->io;
    const int64_t P = p->d_head, N = p->d_state, g = mamba2_group_of(p, h);
    const float *x = io->x + r * io->x_stride + h * P;
    const float *B = io->B + r * io->B_stride + g * N;
    const float *C = io->C + r * io->C_stride + g * N;
    float raw = io->dt[r * io->dt_stride + h];
    float *y = io->y + r * io->y_stride + h * P;
    if (!j->k) {
        ref_token(p, h, Sin, Sout, x, B, C, raw, y);
        return;
    }
    float dt = mamba2_dt(p, raw, h);
    j->k->step_head(Sin, Sout, x, B, C, dt, expf(dt * p->A[h]), p->D ? p->D[h] : 0.0f, P, N, y);
}

/* The scan walks one head through every row, so consecutive reads are a row stride
 * apart (often a multiple of 4 KiB), which the hardware prefetchers do not follow:
 * fetch the head's slices of row r early. */
#define SCAN_PREFETCH 1

static void prefetch_span(const float *p, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) __builtin_prefetch(p + i);
    __builtin_prefetch(p + n - 1);
}

static void prefetch_span_w(float *p, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) __builtin_prefetch(p + i, 1);
    __builtin_prefetch(p + n - 1, 1);
}

static void prefetch_row(const token_job *j, int64_t r, int64_t h) {
    const mamba2_params *p = j->p;
    const mamba2_io *io = j->io;
    const int64_t P = p->d_head, N = p->d_state, g = mamba2_group_of(p, h);
    prefetch_span(io->x + r * io->x_stride + h * P, P);
    prefetch_span(io->B + r * io->B_stride + g * N, N);
    prefetch_span(io->C + r * io->C_stride + g * N, N);
    __builtin_prefetch(io->dt + r * io->dt_stride + h);
    prefetch_span_w(io->y + r * io->y_stride + h * P, P);
}

static void token_task(void *ctx, int ith, int nth) {
    const token_job *j = ctx;
    const int64_t H = j->p->n_heads, hs = j->p->d_state * j->p->d_head;
    int64_t b, e;
    pool_split(j->n_seq * H, ith, nth, &b, &e);
    unsigned fp = j->k ? mamba2_flush_begin() : 0;
    for (int64_t it = b; it < e; it++) {
        int64_t i = it / H, h = it % H, off = h * hs;
        switch (j->kind) {
        case JOB_STEP: run_token(j, i, h, j->state[i] + off, j->state[i] + off); break;
        case JOB_VERIFY:
            for (int64_t k = 0; k < j->K; k++) {
                const float *in = k == 0 ? j->s_in[i] + off : j->snap[i * j->K + k - 1] + off;
                run_token(j, i * j->K + k, h, in, j->snap[i * j->K + k] + off);
            }
            break;
        case JOB_VERIFY_OUT: {
            float *buf = j->work ? (float *)(j->work + (size_t)ith * mamba2_verify_scratch_bytes(j->p))
                                 : pool_scratch(j->pool, ith);
            for (int64_t k = 0; k < j->K; k++) run_token(j, i * j->K + k, h, k == 0 ? j->s_in[i] + off : buf, buf);
            break;
        }
        case JOB_SCAN:
            for (int64_t r = j->seq_start[i]; r < j->seq_start[i + 1]; r++) {
                if (j->k && r + SCAN_PREFETCH < j->seq_start[i + 1]) prefetch_row(j, r + SCAN_PREFETCH, h);
                run_token(j, r, h, j->state[i] + off, j->state[i] + off);
            }
            break;
        }
    }
    if (j->k) mamba2_flush_end(fp);
}

static void run_job(token_job *j, threadpool *pool) {
    check_params(j->p);
    if (j->n_seq <= 0) return;
    pool_run(pool, token_task, j, 0);
}

void mamba2_step_ref(const mamba2_params *p, const mamba2_io *io, float *const *state, int64_t n_seq,
                     threadpool *pool) {
    token_job j = {.kind = JOB_STEP, .p = p, .io = io, .state = state, .n_seq = n_seq};
    run_job(&j, pool);
}

void mamba2_verify_ref(const mamba2_params *p, const mamba2_io *io, const float *const *state,
                       float *const *snap, int64_t n_seq, int64_t K, threadpool *pool) {
    token_job j = {.kind = JOB_VERIFY, .p = p, .io = io, .s_in = state, .snap = snap, .n_seq = n_seq, .K = K};
    run_job(&j, pool);
}

void mamba2_scan_ref(const mamba2_params *p, const mamba2_io *io, const int64_t *seq_start, float *const *state,
                     int64_t n_seq, threadpool *pool) {
    token_job j = {.kind = JOB_SCAN, .p = p, .io = io, .state = state, .seq_start = seq_start, .n_seq = n_seq};
    run_job(&j, pool);
}

/* ==== Kernel sets ==== */

const mamba2_kernels *mamba2_kernels_for(isa_level isa) {
    switch (isa) {
    case ISA_REF: return &mamba2_kernels_scalar;
#if defined(__x86_64__)
    case ISA_AVX2: return &mamba2_kernels_avx2;
    case ISA_AVX512: return &mamba2_kernels_avx512;
#elif defined(__aarch64__)
    case ISA_NEON: return &mamba2_kernels_neon;
#endif
    default: return NULL;
    }
}

const char *mamba2_variant(void) { return isa_name(isa_active()); }

static const mamba2_kernels *kernels_checked(isa_level isa) {
    EDDY_ASSERT(isa_available(isa) && "Mamba-2 kernel set not available here");
    return mamba2_kernels_for(isa);
}

void mamba2_step_isa(isa_level isa, const mamba2_params *p, const mamba2_io *io, float *const *state,
                     int64_t n_seq, threadpool *pool) {
    token_job j = {.kind = JOB_STEP, .p = p, .io = io, .state = state, .n_seq = n_seq, .k = kernels_checked(isa)};
    run_job(&j, pool);
}

void mamba2_verify_isa(isa_level isa, const mamba2_params *p, const mamba2_io *io, const float *const *state,
                       float *const *snap, int64_t n_seq, int64_t K, threadpool *pool) {
    token_job j = {.kind = JOB_VERIFY, .p = p, .io = io, .s_in = state, .snap = snap, .n_seq = n_seq, .K = K,
                   .k = kernels_checked(isa)};
    run_job(&j, pool);
}

size_t mamba2_verify_scratch_bytes(const mamba2_params *p) {
    return ((size_t)(p->d_state * p->d_head) * sizeof(float) + 63) / 64 * 64;
}

void mamba2_verify_outputs_isa(isa_level isa, const mamba2_params *p, const mamba2_io *io,
                               const float *const *state, int64_t n_seq, int64_t K, threadpool *pool,
                               void *scratch) {
    EDDY_ASSERT(scratch || pool_scratch_size(pool) >= mamba2_verify_scratch_bytes(p));
    token_job j = {.kind = JOB_VERIFY_OUT, .p = p, .io = io, .s_in = state, .n_seq = n_seq, .K = K,
                   .pool = pool, .work = scratch, .k = kernels_checked(isa)};
    run_job(&j, pool);
}

void mamba2_replay_isa(isa_level isa, const mamba2_params *p, const mamba2_io *io, int64_t T, float *state,
                       threadpool *pool) {
    const int64_t seq_start[2] = {0, T};
    mamba2_scan_seq_isa(isa, p, io, seq_start, &state, 1, pool);
}

void mamba2_scan_seq_isa(isa_level isa, const mamba2_params *p, const mamba2_io *io, const int64_t *seq_start,
                         float *const *state, int64_t n_seq, threadpool *pool) {
    token_job j = {.kind = JOB_SCAN, .p = p, .io = io, .state = state, .seq_start = seq_start, .n_seq = n_seq,
                   .k = kernels_checked(isa)};
    run_job(&j, pool);
}

/* ==== Dispatch ==== */

void mamba2_step(const mamba2_params *p, const mamba2_io *io, float *const *state, int64_t n_seq,
                 threadpool *pool) {
    mamba2_step_isa(isa_active(), p, io, state, n_seq, pool);
}

void mamba2_verify(const mamba2_params *p, const mamba2_io *io, const float *const *state,
                   float *const *snap, int64_t n_seq, int64_t K, threadpool *pool) {
    mamba2_verify_isa(isa_active(), p, io, state, snap, n_seq, K, pool);
}

void mamba2_verify_outputs(const mamba2_params *p, const mamba2_io *io, const float *const *state, int64_t n_seq,
                           int64_t K, threadpool *pool, void *scratch) {
    mamba2_verify_outputs_isa(isa_active(), p, io, state, n_seq, K, pool, scratch);
}

void mamba2_replay(const mamba2_params *p, const mamba2_io *io, int64_t T, float *state, threadpool *pool) {
    mamba2_replay_isa(isa_active(), p, io, T, state, pool);
}

/* Below this many tokens in its longest sequence a batch takes the sequential scan:
 * at d_head 64, d_state 128 the two cost the same at 4 tokens, the chunked scan
 * takes 0.75x the time at 8 and 0.6x from 16 on (AVX-512, one thread). */
#define CHUNKED_MIN_TOKENS 4

void mamba2_scan(const mamba2_params *p, const mamba2_io *io, const int64_t *seq_start, float *const *state,
                 int64_t n_seq, threadpool *pool, void *scratch) {
    const isa_level isa = isa_active();
    int64_t longest = 0;
    for (int64_t i = 0; i < n_seq; i++)
        if (seq_start[i + 1] - seq_start[i] > longest) longest = seq_start[i + 1] - seq_start[i];
    if (longest < CHUNKED_MIN_TOKENS)
        mamba2_scan_seq_isa(isa, p, io, seq_start, state, n_seq, pool);
    else
        mamba2_scan_chunked_isa(isa, MAMBA2_CHUNK, p, io, seq_start, state, n_seq, pool, scratch);
}
