/*
 * test_ssm_mamba2.c — the Mamba-2 kernels (ssm/mamba2.h): every kernel set's step,
 * verify, sequential and chunked scan against the scalar _ref on a table of shapes,
 * a long scan with extreme values, and golden outputs of the torch reference in
 * transformers (tests/data/mamba2, written by scripts/gen_mamba2_golden.py).
 *
 * Error bounds. Each comparison is elementwise,
 *     |got - ref| <= rtol * mag + atol,
 * where mag is the same computation on |x|, |B|, |C|, |D| and |state| (every term
 * of the sum taken positive: the scale of the rounding errors). rtol per op:
 *     step, verify, sequential scan    4e-6   (FMA against mul+add, sums over d_state)
 *     chunked scan                     2e-5   (exp of summed log-decays instead of products
 *                                              of exps; sums over the chunk and d_state)
 *     golden (torch float32)           2e-5
 * atol is 1e-30 for O(1) inputs; the extreme-value test uses 1e-36 * max(mag), which
 * covers decay factors below FLT_MIN that the SIMD exp flushes to zero.
 * Every case draws fresh inputs from its own seed, printed with any failure.
 */
#include "test.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/cpu.h"
#include "base/threadpool.h"
#include "ssm/mamba2.h"
#include "ssm/mamba2_impl.h"

/* ==== Problems ==== */

typedef struct {
    int64_t n_seq;
    int64_t T[8]; /* tokens per sequence (T[i] for i < n_seq) */
    int64_t H, G, P, N;
    bool strided; /* x|B|C share padded rows, as in the model; dt and y padded too */
    bool clamp;   /* a dt limit of (0.01, 0.5) instead of (0, inf) */
} shape;

#define Y_SENTINEL 12345.0f

typedef struct {
    shape s;
    uint64_t seed;
    mamba2_params p;
    mamba2_io io;   /* io.y points at y below */
    int64_t rows, ld, dt_ld, y_ld, sf; /* sf: floats per state */
    int64_t seq_start[9];
    float *xbc, *dt, *A, *dt_bias, *D, *state0, *y;
} problem;

static float *fmalloc(int64_t n) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!p) abort();
    return p;
}

static void problem_layout(problem *pb, const shape *s) {
    pb->s = *s;
    pb->rows = 0;
    for (int64_t i = 0; i < s->n_seq; i++) pb->seq_start[i] = pb->rows, pb->rows += s->T[i];
    pb->seq_start[s->n_seq] = pb->rows;
    int64_t xw = s->H * s->P, bw = s->G * s->N;
    pb->ld = xw + 2 * bw + (s->strided ? 3 : 0);
    pb->dt_ld = s->H + (s->strided ? 2 : 0);
    pb->y_ld = xw + (s->strided ? 5 : 0);
    pb->sf = s->H * s->N * s->P;
}

static void problem_bind(problem *pb) {
    const shape *s = &pb->s;
    int64_t xw = s->H * s->P, bw = s->G * s->N;
    pb->p = (mamba2_params){.n_heads = s->H, .d_head = s->P, .n_groups = s->G, .d_state = s->N, .A = pb->A,
                            .dt_bias = pb->dt_bias, .D = pb->D, .dt_min = 0.0f, .dt_max = INFINITY};
    if (s->clamp) pb->p.dt_min = 0.01f, pb->p.dt_max = 0.5f;
    pb->io = (mamba2_io){.x = pb->xbc, .x_stride = pb->ld, .B = pb->xbc + xw, .B_stride = pb->ld,
                         .C = pb->xbc + xw + bw, .C_stride = pb->ld, .dt = pb->dt, .dt_stride = pb->dt_ld,
                         .y = pb->y, .y_stride = pb->y_ld};
}

static void problem_alloc(problem *pb, const shape *s) {
    problem_layout(pb, s);
    pb->xbc = fmalloc(pb->rows * pb->ld);
    pb->dt = fmalloc(pb->rows * pb->dt_ld);
    pb->A = fmalloc(s->H), pb->dt_bias = fmalloc(s->H), pb->D = fmalloc(s->H);
    pb->state0 = fmalloc(s->n_seq * pb->sf);
    pb->y = fmalloc(pb->rows * pb->y_ld);
    problem_bind(pb);
}

/* Random inputs of the usual scale: x, B, C ~ N(0, 1), dt = softplus(U(-4, 1) + bias),
 * A = -exp(U(-2, 2.5)), D ~ N(0, 1), initial state ~ N(0, 1/4). */
static void problem_init(problem *pb, const shape *s, uint64_t seed) {
    problem_alloc(pb, s);
    pb->seed = seed;
    test_rng r = {seed};
    for (int64_t i = 0; i < pb->rows * pb->ld; i++) pb->xbc[i] = test_rng_normal(&r);
    for (int64_t i = 0; i < pb->rows * pb->dt_ld; i++) pb->dt[i] = test_rng_uniform(&r, -4.0f, 1.0f);
    for (int64_t h = 0; h < s->H; h++) {
        pb->A[h] = -expf(test_rng_uniform(&r, -2.0f, 2.5f));
        pb->dt_bias[h] = test_rng_uniform(&r, -1.0f, 0.5f);
        pb->D[h] = test_rng_normal(&r);
    }
    for (int64_t i = 0; i < s->n_seq * pb->sf; i++) pb->state0[i] = 0.5f * test_rng_normal(&r);
}

static void problem_free(problem *pb) {
    free(pb->xbc), free(pb->dt), free(pb->A), free(pb->dt_bias), free(pb->D), free(pb->state0), free(pb->y);
}

/* The same problem on |x|, |B|, |C|, |D|, |state|: its outputs bound the error scale. */
static void problem_abs(problem *dst, const problem *src) {
    problem_alloc(dst, &src->s);
    dst->seed = src->seed;
    for (int64_t i = 0; i < src->rows * src->ld; i++) dst->xbc[i] = fabsf(src->xbc[i]);
    memcpy(dst->dt, src->dt, (size_t)(src->rows * src->dt_ld) * sizeof(float));
    for (int64_t h = 0; h < src->s.H; h++)
        dst->A[h] = src->A[h], dst->dt_bias[h] = src->dt_bias[h], dst->D[h] = fabsf(src->D[h]);
    for (int64_t i = 0; i < src->s.n_seq * src->sf; i++) dst->state0[i] = fabsf(src->state0[i]);
    dst->p.dt_min = src->p.dt_min, dst->p.dt_max = src->p.dt_max;
}

/* A state buffer (n_seq * sf) holding the initial states, and its per-sequence pointers. */
static float *states_from(const problem *pb, float **ptrs) {
    float *s = fmalloc(pb->s.n_seq * pb->sf);
    memcpy(s, pb->state0, (size_t)(pb->s.n_seq * pb->sf) * sizeof(float));
    for (int64_t i = 0; i < pb->s.n_seq; i++) ptrs[i] = s + i * pb->sf;
    return s;
}

static void clear_y(problem *pb) {
    for (int64_t i = 0; i < pb->rows * pb->y_ld; i++) pb->y[i] = Y_SENTINEL;
}

/* ==== Comparison ==== */

static double worst_ratio; /* largest |got - ref| / (rtol mag + atol) seen, for EDDY_TEST_VERBOSE */

/* Elementwise |got - ref| <= rtol * mag + atol over n values with stride 1; reports
 * the first mismatch (and any NaN or Inf in got). */
static bool close_vec(const char *what, const problem *pb, const float *got, const float *ref, const float *mag,
                      int64_t n, double rtol, double atol) {
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]), bound = rtol * mag[i] + atol;
        if (bound > 0 && d / bound > worst_ratio) worst_ratio = d / bound;
        if (!isfinite(got[i]) || !(d <= bound)) {
            CHECKF(false, "%s: element %lld: got %.9g, ref %.9g, |diff| %.3g > bound %.3g (case seed %llu)", what,
                   (long long)i, got[i], ref[i], d, bound, (unsigned long long)pb->seed);
            return false;
        }
    }
    return true;
}

/* y (rows, H P) with row stride y_ld; the padding must keep the sentinel. */
static bool close_y(const char *what, const problem *pb, const float *got, const float *ref, const float *mag,
                    double rtol, double atol) {
    int64_t w = pb->s.H * pb->s.P;
    for (int64_t r = 0; r < pb->rows; r++) {
        if (!close_vec(what, pb, got + r * pb->y_ld, ref + r * pb->y_ld, mag + r * pb->y_ld, w, rtol, atol))
            return false;
        for (int64_t c = w; c < pb->y_ld; c++)
            if (!CHECKF(got[r * pb->y_ld + c] == Y_SENTINEL, "%s: wrote into y's row padding (case seed %llu)",
                        what, (unsigned long long)pb->seed))
                return false;
    }
    return true;
}

static void report_worst(const char *test) {
    if (getenv("EDDY_TEST_VERBOSE")) printf("     %s: worst error / bound = %.3g\n", test, worst_ratio);
    worst_ratio = 0;
}

/* ==== Running ==== */

typedef struct {
    float *y;     /* (rows, y_ld) */
    float *state; /* (n_seq, sf) */
} outputs;

static void outputs_free(outputs *o) { free(o->y), free(o->state); }

typedef enum { RUN_REF, RUN_SEQ, RUN_CHUNKED, RUN_DISPATCH } scan_kind;

/* Runs one scan of pb from its initial states; returns y and the final states. */
static outputs run_scan(problem *pb, scan_kind kind, isa_level isa, int64_t chunk, threadpool *pool) {
    float *ptrs[8];
    outputs o = {fmalloc(pb->rows * pb->y_ld), states_from(pb, ptrs)};
    clear_y(pb);
    void *scratch = NULL;
    if (kind == RUN_CHUNKED || kind == RUN_DISPATCH) {
        int64_t c = kind == RUN_DISPATCH ? MAMBA2_CHUNK : chunk;
        scratch = malloc(mamba2_scan_scratch_bytes(&pb->p, c, pool_size(pool)));
    }
    switch (kind) {
    case RUN_REF: mamba2_scan_ref(&pb->p, &pb->io, pb->seq_start, ptrs, pb->s.n_seq, pool); break;
    case RUN_SEQ: mamba2_scan_seq_isa(isa, &pb->p, &pb->io, pb->seq_start, ptrs, pb->s.n_seq, pool); break;
    case RUN_CHUNKED:
        mamba2_scan_chunked_isa(isa, chunk, &pb->p, &pb->io, pb->seq_start, ptrs, pb->s.n_seq, pool, scratch);
        break;
    case RUN_DISPATCH: mamba2_scan(&pb->p, &pb->io, pb->seq_start, ptrs, pb->s.n_seq, pool, scratch); break;
    }
    free(scratch);
    memcpy(o.y, pb->y, (size_t)(pb->rows * pb->y_ld) * sizeof(float));
    return o;
}

static threadpool *test_pool(int n) {
    threadpool *pool = NULL;
    eddy_error err;
    if (pool_create(&pool, n, &err) != EDDY_OK) abort();
    return pool;
}

/* ==== Step ==== */

/* Decode shapes: every head dim and d_state, 1..8 sequences. T is 1 (one row per sequence). */
static const shape step_shapes[] = {
    {1, {1}, 4, 1, 32, 16, false, false},   {2, {1, 1}, 4, 2, 64, 64, true, false},
    {3, {1, 1, 1}, 2, 1, 128, 128, false, true}, {1, {1}, 2, 2, 256, 16, true, false},
    {8, {1, 1, 1, 1, 1, 1, 1, 1}, 4, 4, 64, 128, true, false}, {5, {1, 1, 1, 1, 1}, 6, 3, 256, 16, false, false},
    {4, {1, 1, 1, 1}, 4, 4, 32, 128, true, false}, {1, {1}, 3, 1, 24, 20, false, false},
    {2, {1, 1}, 2, 1, 72, 9, true, true},    {2, {1, 1}, 2, 1, 13, 5, true, false},
    {1, {1}, 4, 2, 50, 3, false, false},
};

TEST(mamba2_step_matches_ref) {
    test_rng rng = test_rng_new();
    threadpool *pool = test_pool(3);
    for (size_t c = 0; c < sizeof step_shapes / sizeof step_shapes[0]; c++) {
        problem pb, ab;
        problem_init(&pb, &step_shapes[c], test_rng_u64(&rng));
        problem_abs(&ab, &pb);
        float *rp[8], *ap[8], *vp[8];
        float *rs = states_from(&pb, rp), *as = states_from(&ab, ap);
        clear_y(&pb);
        mamba2_step_ref(&pb.p, &pb.io, rp, pb.s.n_seq, NULL);
        float *ry = fmalloc(pb.rows * pb.y_ld);
        memcpy(ry, pb.y, (size_t)(pb.rows * pb.y_ld) * sizeof(float));
        mamba2_step_ref(&ab.p, &ab.io, ap, ab.s.n_seq, NULL);
        for (int v = -1; v < ISA_COUNT; v++) { /* -1: the dispatcher */
            if (v >= 0 && !isa_available((isa_level)v)) continue;
            float *vs = states_from(&pb, vp);
            clear_y(&pb);
            if (v < 0) mamba2_step(&pb.p, &pb.io, vp, pb.s.n_seq, pool);
            else mamba2_step_isa((isa_level)v, &pb.p, &pb.io, vp, pb.s.n_seq, c % 2 ? pool : NULL);
            char what[96];
            snprintf(what, sizeof what, "step %s case %zu y", v < 0 ? "dispatch" : isa_name((isa_level)v), c);
            close_y(what, &pb, pb.y, ry, ab.y, 4e-6, 1e-30);
            snprintf(what, sizeof what, "step %s case %zu state", v < 0 ? "dispatch" : isa_name((isa_level)v),
                     c);
            close_vec(what, &pb, vs, rs, as, pb.s.n_seq * pb.sf, 4e-6, 1e-30);
            free(vs);
        }
        free(rs), free(as), free(ry);
        problem_free(&pb), problem_free(&ab);
    }
    pool_destroy(pool);
    report_worst("step");
}

/* ==== Verify ==== */

/* K positions through mamba2_verify give the same outputs and per-position states as K
 * single steps (bit for bit within one kernel set), leave the input state alone, and
 * each set's verify agrees with verify_ref within the step bound. */
TEST(mamba2_verify_matches_steps) {
    test_rng rng = test_rng_new();
    threadpool *pool = test_pool(2);
    static const struct {
        int64_t n_seq, K, H, G, P, N;
    } cases[] = {{1, 1, 4, 1, 64, 16}, {2, 4, 4, 2, 32, 64}, {3, 7, 2, 1, 128, 16}, {1, 3, 2, 2, 64, 128}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t n_seq = cases[c].n_seq, K = cases[c].K;
        shape s = {.n_seq = 1, .T = {n_seq * K}, .H = cases[c].H, .G = cases[c].G, .P = cases[c].P,
                   .N = cases[c].N, .strided = c % 2 == 1};
        problem pb;
        problem_init(&pb, &s, test_rng_u64(&rng));
        int64_t sf = pb.sf;
        /* n_seq initial states (state0 only has one: draw the rest) */
        float *s_in = fmalloc(n_seq * sf), *s_keep = fmalloc(n_seq * sf);
        test_rng r = {pb.seed + 1};
        for (int64_t i = 0; i < n_seq * sf; i++) s_in[i] = 0.5f * test_rng_normal(&r);
        memcpy(s_keep, s_in, (size_t)(n_seq * sf) * sizeof(float));
        const float *in_ptrs[8];
        for (int64_t i = 0; i < n_seq; i++) in_ptrs[i] = s_in + i * sf;
        float *snap = fmalloc(n_seq * K * sf), *snap_ref = fmalloc(n_seq * K * sf);
        float *sp[64];
        for (int64_t i = 0; i < n_seq * K; i++) sp[i] = snap + i * sf;
        float *y_ref = fmalloc(pb.rows * pb.y_ld);

        for (int v = -2; v < ISA_COUNT; v++) { /* -2: ref, -1: dispatch */
            if (v >= 0 && !isa_available((isa_level)v)) continue;
            const char *name = v == -2 ? "_ref" : v == -1 ? "dispatch" : isa_name((isa_level)v);
            clear_y(&pb);
            if (v == -2) mamba2_verify_ref(&pb.p, &pb.io, in_ptrs, sp, n_seq, K, pool);
            else if (v == -1) mamba2_verify(&pb.p, &pb.io, in_ptrs, sp, n_seq, K, pool);
            else mamba2_verify_isa((isa_level)v, &pb.p, &pb.io, in_ptrs, sp, n_seq, K, pool);
            CHECKF(memcmp(s_in, s_keep, (size_t)(n_seq * sf) * sizeof(float)) == 0,
                   "verify %s wrote its input state (case seed %llu)", name, (unsigned long long)pb.seed);
            float *verify_y = fmalloc(pb.rows * pb.y_ld);
            memcpy(verify_y, pb.y, (size_t)(pb.rows * pb.y_ld) * sizeof(float));
            if (v == -2) memcpy(snap_ref, snap, (size_t)(n_seq * K * sf) * sizeof(float)),
                memcpy(y_ref, verify_y, (size_t)(pb.rows * pb.y_ld) * sizeof(float));

            /* K single steps of the same set: position k of every sequence as one batch */
            float *st = fmalloc(n_seq * sf), *stp[8];
            memcpy(st, s_in, (size_t)(n_seq * sf) * sizeof(float));
            for (int64_t i = 0; i < n_seq; i++) stp[i] = st + i * sf;
            clear_y(&pb);
            for (int64_t k = 0; k < K; k++) {
                mamba2_io io = pb.io; /* rows i*K + k for i < n_seq: a row stride of K rows */
                io.x += k * pb.ld, io.B += k * pb.ld, io.C += k * pb.ld, io.dt += k * pb.dt_ld, io.y += k * pb.y_ld;
                io.x_stride *= K, io.B_stride *= K, io.C_stride *= K, io.dt_stride *= K, io.y_stride *= K;
                if (v == -2) mamba2_step_ref(&pb.p, &io, stp, n_seq, NULL);
                else if (v == -1) mamba2_step(&pb.p, &io, stp, n_seq, NULL);
                else mamba2_step_isa((isa_level)v, &pb.p, &io, stp, n_seq, NULL);
                for (int64_t i = 0; i < n_seq; i++)
                    CHECKF(memcmp(st + i * sf, snap + (i * K + k) * sf, (size_t)sf * sizeof(float)) == 0,
                           "verify %s: snapshot of sequence %lld position %lld differs from the step's state "
                           "(case seed %llu)", name, (long long)i, (long long)k, (unsigned long long)pb.seed);
            }
            CHECKF(memcmp(pb.y, verify_y, (size_t)(pb.rows * pb.y_ld) * sizeof(float)) == 0,
                   "verify %s: y differs from the steps' (case seed %llu)", name, (unsigned long long)pb.seed);
            if (v != -2) {
                /* outputs only, from the pool's scratch and from a buffer of our own: the same y,
                 * the input state untouched; replaying sequence i's first k rows on a copy of its
                 * state gives snapshot k - 1 and the same rows of y */
                const isa_level isa = v == -1 ? isa_active() : (isa_level)v;
                const size_t hb = mamba2_verify_scratch_bytes(&pb.p);
                float *own = fmalloc((int64_t)(2 * hb / sizeof(float)));
                REQUIRE(pool_reserve_scratch(pool, hb, NULL) == EDDY_OK);
                for (int from_pool = 0; from_pool < 2; from_pool++) {
                    clear_y(&pb);
                    mamba2_verify_outputs_isa(isa, &pb.p, &pb.io, in_ptrs, n_seq, K, pool, from_pool ? NULL : own);
                    CHECKF(memcmp(s_in, s_keep, (size_t)(n_seq * sf) * sizeof(float)) == 0,
                           "verify outputs %s wrote its input state (case seed %llu)", name,
                           (unsigned long long)pb.seed);
                    CHECKF(memcmp(pb.y, verify_y, (size_t)(pb.rows * pb.y_ld) * sizeof(float)) == 0,
                           "verify outputs %s: y differs from the verify's (case seed %llu)", name,
                           (unsigned long long)pb.seed);
                }
                for (int64_t i = 0; i < n_seq; i++)
                    for (int64_t k = 1; k <= K; k++) {
                        memcpy(st, s_in + i * sf, (size_t)sf * sizeof(float));
                        clear_y(&pb);
                        mamba2_io io = pb.io;
                        io.x += i * K * pb.ld, io.B += i * K * pb.ld, io.C += i * K * pb.ld, io.dt += i * K * pb.dt_ld;
                        io.y += i * K * pb.y_ld;
                        mamba2_replay_isa(isa, &pb.p, &io, k, st, k % 2 ? pool : NULL);
                        CHECKF(memcmp(st, snap + (i * K + k - 1) * sf, (size_t)sf * sizeof(float)) == 0,
                               "replay %s of %lld rows of sequence %lld is not the snapshot (case seed %llu)", name,
                               (long long)k, (long long)i, (unsigned long long)pb.seed);
                        CHECKF(memcmp(io.y, verify_y + i * K * pb.y_ld, (size_t)(k * pb.y_ld) * sizeof(float)) == 0,
                               "replay %s of %lld rows of sequence %lld: other outputs (case seed %llu)", name,
                               (long long)k, (long long)i, (unsigned long long)pb.seed);
                    }
                free(own);
                /* loose check against the reference: the magnitudes bound is exercised by the step test */
                double e = test_nmse(snap, snap_ref, n_seq * K * sf);
                CHECKF(e < 1e-10, "verify %s: snapshots nmse %g against ref (case seed %llu)", name, e,
                       (unsigned long long)pb.seed);
                e = test_nmse(verify_y, y_ref, pb.rows * pb.y_ld);
                CHECKF(e < 1e-10, "verify %s: y nmse %g against ref (case seed %llu)", name, e,
                       (unsigned long long)pb.seed);
            }
            free(st), free(verify_y);
        }
        free(s_in), free(s_keep), free(snap), free(snap_ref), free(y_ref);
        problem_free(&pb);
    }
    pool_destroy(pool);
}

/* ==== Scans ==== */

/* Prefill shapes: T over {1, 2, 7, 63, 64, 65, 257, 1000, 4096}, every head dim and
 * d_state, 1..8 sequences of unequal lengths, strided rows, groups of 1..all heads. */
static const shape scan_shapes[] = {
    {1, {1}, 4, 1, 32, 16, false, false},
    {1, {2}, 4, 2, 64, 16, true, false},
    {2, {7, 7}, 4, 4, 32, 64, false, false},
    {1, {63}, 2, 1, 128, 16, false, true},
    {1, {64}, 1, 1, 64, 128, true, false},
    {4, {65, 0, 64, 1}, 4, 2, 32, 64, true, false},
    {2, {65, 30}, 2, 1, 256, 16, false, false},
    {1, {257}, 2, 2, 32, 16, true, false},
    {1, {1000}, 1, 1, 32, 16, true, false},
    {1, {4096}, 1, 1, 16, 16, false, false},
    {8, {1, 2, 7, 63, 64, 65, 130, 100}, 4, 2, 32, 16, true, true},
    {2, {150, 129}, 1, 1, 128, 16, false, false},
    {1, {129}, 8, 8, 16, 16, true, false},
    {2, {40, 90}, 3, 1, 40, 24, true, false},
    {1, {70}, 2, 1, 13, 5, false, false},
    {2, {33, 18}, 2, 2, 50, 11, true, false},
};

/* Chunk sizes besides MAMBA2_CHUNK, one per case in turn. */
static const int64_t extra_chunks[] = {1, 16, 256, 7, 100, 64 + 1, 32};

TEST(mamba2_scan_matches_ref) {
    test_rng rng = test_rng_new();
    threadpool *pool = test_pool(3);
    for (size_t c = 0; c < sizeof scan_shapes / sizeof scan_shapes[0]; c++) {
        problem pb, ab;
        problem_init(&pb, &scan_shapes[c], test_rng_u64(&rng));
        problem_abs(&ab, &pb);
        if (c % 5 == 4) pb.p.D = ab.p.D = NULL; /* no skip term */
        outputs ref = run_scan(&pb, RUN_REF, 0, 0, NULL), mag = run_scan(&ab, RUN_REF, 0, 0, NULL);
        int64_t chunks[2] = {MAMBA2_CHUNK, extra_chunks[c % (sizeof extra_chunks / sizeof extra_chunks[0])]};
        threadpool *pl = c % 3 == 2 ? NULL : pool;
        char what[128];
        for (int v = 0; v < ISA_COUNT; v++) {
            if (!isa_available((isa_level)v)) continue;
            const char *name = isa_name((isa_level)v);
            outputs o;
            if (v != ISA_REF) { /* the scalar step is covered by the step and kernel tests */
                o = run_scan(&pb, RUN_SEQ, (isa_level)v, 0, pl);
                snprintf(what, sizeof what, "sequential %s case %zu y", name, c);
                close_y(what, &pb, o.y, ref.y, mag.y, 4e-6, 1e-30);
                snprintf(what, sizeof what, "sequential %s case %zu state", name, c);
                close_vec(what, &pb, o.state, ref.state, mag.state, pb.s.n_seq * pb.sf, 4e-6, 1e-30);
                outputs_free(&o);
            }
            for (int k = 0; k < (v == ISA_REF ? 1 : 2); k++) {
                o = run_scan(&pb, RUN_CHUNKED, (isa_level)v, chunks[k], pl);
                snprintf(what, sizeof what, "chunked %s chunk %lld case %zu y", name, (long long)chunks[k], c);
                close_y(what, &pb, o.y, ref.y, mag.y, 2e-5, 1e-30);
                snprintf(what, sizeof what, "chunked %s chunk %lld case %zu state", name, (long long)chunks[k], c);
                close_vec(what, &pb, o.state, ref.state, mag.state, pb.s.n_seq * pb.sf, 2e-5, 1e-30);
                outputs_free(&o);
            }
        }
        if (c % 2) { /* the dispatcher, on every other case */
            outputs o = run_scan(&pb, RUN_DISPATCH, 0, 0, pl);
            snprintf(what, sizeof what, "scan dispatch (%s) case %zu y", mamba2_variant(), c);
            close_y(what, &pb, o.y, ref.y, mag.y, 2e-5, 1e-30);
            snprintf(what, sizeof what, "scan dispatch (%s) case %zu state", mamba2_variant(), c);
            close_vec(what, &pb, o.state, ref.state, mag.state, pb.s.n_seq * pb.sf, 2e-5, 1e-30);
            outputs_free(&o);
        }
        outputs_free(&ref), outputs_free(&mag);
        problem_free(&pb), problem_free(&ab);
    }
    pool_destroy(pool);
    report_worst("scan");
}

/* The chunked scan on the pool's own scratch (scratch argument NULL) gives the same
 * bits as on caller scratch. */
TEST(mamba2_scan_pool_scratch) {
    test_rng rng = test_rng_new();
    threadpool *pool = test_pool(2);
    shape s = {2, {300, 77}, 4, 2, 64, 32, true, false};
    problem pb;
    problem_init(&pb, &s, test_rng_u64(&rng));
    isa_level isa = ISA_REF;
    for (int v = 0; v < ISA_COUNT; v++)
        if (isa_available((isa_level)v)) isa = (isa_level)v;
    outputs a = run_scan(&pb, RUN_CHUNKED, isa, MAMBA2_CHUNK, pool);
    eddy_error err;
    REQUIRE(pool_reserve_scratch(pool, mamba2_scan_scratch_bytes(&pb.p, MAMBA2_CHUNK, 1), &err) == EDDY_OK);
    float *ptrs[8];
    float *st = states_from(&pb, ptrs);
    clear_y(&pb);
    mamba2_scan_chunked_isa(isa, MAMBA2_CHUNK, &pb.p, &pb.io, pb.seq_start, ptrs, pb.s.n_seq, pool, NULL);
    CHECK(memcmp(pb.y, a.y, (size_t)(pb.rows * pb.y_ld) * sizeof(float)) == 0);
    CHECK(memcmp(st, a.state, (size_t)(pb.s.n_seq * pb.sf) * sizeof(float)) == 0);
    free(st);
    outputs_free(&a);
    problem_free(&pb);
    pool_destroy(pool);
}

/* ==== Stability ==== */

static bool simd_supported(void) {
    for (int v = ISA_REF + 1; v < ISA_COUNT; v++)
        if (isa_available((isa_level)v)) return true;
    return false;
}

/* T = 16384 with extreme values: per token dt from tiny (softplus(-90) ~ 1e-39) through
 * huge (1e4), heads with A from -1e4 to -1e-4, x, B and C spanning 1e-20..1e12 in
 * magnitude. No NaN or Inf anywhere, and the chunked and sequential scans agree with
 * the reference. */
TEST(mamba2_scan_extreme_values) {
    test_rng rng = test_rng_new();
    threadpool *pool = test_pool(2);
    shape s = {1, {16384}, 4, 2, 8, 8, false, false};
    problem pb, ab;
    problem_init(&pb, &s, test_rng_u64(&rng));
    test_rng r = {pb.seed ^ 0x5eed};
    static const float As[4] = {-1e4f, -1e-4f, -1.0f, -50.0f};
    for (int64_t h = 0; h < 4; h++) pb.A[h] = As[h], pb.dt_bias[h] = 0.0f;
    for (int64_t t = 0; t < pb.rows; t++) {
        float *row = pb.xbc + t * pb.ld;
        for (int64_t h = 0; h < s.H; h++) {
            float *dt = &pb.dt[t * pb.dt_ld + h];
            switch (test_rng_below(&r, 3)) {
            case 0: *dt = test_rng_uniform(&r, -90.0f, -20.0f); break; /* tiny dt */
            case 1: *dt = test_rng_uniform(&r, 20.0f, 1e4f); break;    /* huge dt */
            default: *dt = test_rng_uniform(&r, -5.0f, 5.0f); break;
            }
        }
        float xs = powf(10.0f, test_rng_uniform(&r, -20.0f, 12.0f));
        float bs = powf(10.0f, test_rng_uniform(&r, -10.0f, 4.0f));
        float cs = powf(10.0f, test_rng_uniform(&r, -10.0f, 4.0f));
        for (int64_t i = 0; i < s.H * s.P; i++) row[i] *= xs;
        for (int64_t i = 0; i < s.G * s.N; i++) row[s.H * s.P + i] *= bs, row[s.H * s.P + s.G * s.N + i] *= cs;
    }
    problem_abs(&ab, &pb);
    outputs ref = run_scan(&pb, RUN_REF, 0, 0, NULL), mag = run_scan(&ab, RUN_REF, 0, 0, NULL);
    double top = 0;
    for (int64_t i = 0; i < pb.rows * pb.y_ld; i++) top = fmax(top, mag.y[i]);
    for (int64_t i = 0; i < pb.sf; i++) top = fmax(top, mag.state[i]);
    REQUIRE(isfinite(top) && top > 0);
    bool finite = true;
    for (int64_t i = 0; i < pb.rows * pb.y_ld; i++) finite = finite && isfinite(ref.y[i]);
    CHECKF(finite, "reference y has NaN or Inf (case seed %llu)", (unsigned long long)pb.seed);
    for (int v = 0; v < ISA_COUNT; v++) {
        if (!isa_available((isa_level)v) || (v == ISA_REF && simd_supported()))
            continue; /* the SIMD sets, or the scalar one where there is none */
        char what[96];
        outputs o = run_scan(&pb, RUN_CHUNKED, (isa_level)v, MAMBA2_CHUNK, pool);
        snprintf(what, sizeof what, "extreme chunked %s y", isa_name((isa_level)v));
        close_y(what, &pb, o.y, ref.y, mag.y, 2e-5, 1e-36 * top);
        snprintf(what, sizeof what, "extreme chunked %s state", isa_name((isa_level)v));
        close_vec(what, &pb, o.state, ref.state, mag.state, pb.sf, 2e-5, 1e-36 * top);
        outputs_free(&o);
        o = run_scan(&pb, RUN_SEQ, (isa_level)v, 0, pool);
        snprintf(what, sizeof what, "extreme sequential %s y", isa_name((isa_level)v));
        close_y(what, &pb, o.y, ref.y, mag.y, 4e-6, 1e-36 * top);
        outputs_free(&o);
    }
    outputs_free(&ref), outputs_free(&mag);
    problem_free(&pb), problem_free(&ab);
    pool_destroy(pool);
    report_worst("extreme");
}

/* ==== Kernel sets, piece by piece ==== */

/* Each SIMD set's three kernels against the scalar set's on odd sizes, with bounds
 * tighter than the scans': mask_row within 4 ulp of expf (plus FLT_MIN for the flush
 * of tiny results), gemm within K ulp of the sum of |terms|, step_head within 4e-6
 * of the sum of |terms| (as the step test). */
TEST(mamba2_kernel_sets_match_scalar) {
    test_rng rng = test_rng_new();
    const mamba2_kernels *sc = mamba2_kernels_for(ISA_REF);
    float *a = fmalloc(80 * 80), *b = fmalloc(80 * 80), *c0 = fmalloc(80 * 80), *c1 = fmalloc(80 * 80);
    float *c2 = fmalloc(80 * 80), *mag = fmalloc(80 * 80), *aa = fmalloc(80 * 80), *ba = fmalloc(80 * 80);
    float *rs = fmalloc(80), *rsa = fmalloc(80);
    for (int v = 1; v < ISA_COUNT; v++) {
        if (!isa_available((isa_level)v)) continue;
        const mamba2_kernels *k = mamba2_kernels_for((isa_level)v);
        const char *name = isa_name((isa_level)v);
        for (int rep = 0; rep < 40; rep++) {
            uint64_t seed = test_rng_u64(&rng);
            test_rng r = {seed};
            /* mask_row: a row t of n, segment sums in [-120, 0] */
            int64_t n = 1 + test_rng_below(&r, 70), t = test_rng_below(&r, (uint32_t)n);
            float *seg0 = a, *seg1 = b, *g = aa, *dt = ba;
            for (int64_t i = 0; i < n; i++) {
                seg0[i] = seg1[i] = test_rng_uniform(&r, -120.0f, 0.0f);
                g[i] = test_rng_normal(&r), dt[i] = test_rng_uniform(&r, 0.0f, 2.0f);
            }
            float av = test_rng_uniform(&r, -3.0f, 0.0f);
            for (int64_t i = 0; i < n; i++) c0[i] = c1[i] = 777.0f;
            sc->mask_row(c0, g, seg0, dt, av, t, n);
            k->mask_row(c1, g, seg1, dt, av, t, n);
            for (int64_t i = 0; i < n; i++) {
                if (!CHECKF(seg0[i] == seg1[i] || i > t, "%s mask_row seg[%lld] %g vs %g (seed %llu)", name,
                            (long long)i, seg1[i], seg0[i], (unsigned long long)seed))
                    break;
                double bound = 4.8e-7 * fabs(c0[i]) + 1.2e-38 * fabs(g[i] * dt[i]);
                if (!CHECKF(fabs((double)c1[i] - c0[i]) <= bound, "%s mask_row m[%lld] %.9g vs %.9g (seed %llu)",
                            name, (long long)i, c1[i], c0[i], (unsigned long long)seed))
                    break;
            }
            /* gemm: M x N += (M x K)(K x N) with padded leading dimensions */
            mamba2_gemm_args ga = {.M = 1 + test_rng_below(&r, 20), .N = 1 + test_rng_below(&r, 70),
                                   .K = 1 + test_rng_below(&r, 70)};
            ga.lda = ga.K + test_rng_below(&r, 3), ga.ldb = ga.N + test_rng_below(&r, 3);
            ga.ldc = ga.N + test_rng_below(&r, 3);
            ga.beta = (float[]){0.0f, 1.0f, 0.7f}[test_rng_below(&r, 3)];
            ga.lower = test_rng_below(&r, 2) == 0;
            bool scaled = test_rng_below(&r, 2) == 0;
            for (int64_t i = 0; i < ga.M * ga.lda; i++) {
                bool zero = ga.lower && i % ga.lda > i / ga.lda;
                a[i] = zero ? 0.0f : test_rng_normal(&r), aa[i] = fabsf(a[i]);
            }
            for (int64_t i = 0; i < ga.K * ga.ldb; i++) b[i] = test_rng_normal(&r), ba[i] = fabsf(b[i]);
            for (int64_t i = 0; i < ga.M; i++) rs[i] = test_rng_normal(&r), rsa[i] = fabsf(rs[i]);
            for (int64_t i = 0; i < ga.M * ga.ldc; i++) c0[i] = c1[i] = test_rng_normal(&r), mag[i] = fabsf(c0[i]);
            ga.A = a, ga.B = b, ga.row_scale = scaled ? rs : NULL;
            ga.C = c0;
            sc->gemm(&ga);
            ga.C = c1;
            k->gemm(&ga);
            mamba2_gemm_args gm = ga;
            gm.A = aa, gm.B = ba, gm.C = mag, gm.row_scale = scaled ? rsa : NULL, gm.beta = fabsf(ga.beta);
            sc->gemm(&gm);
            for (int64_t m = 0; m < ga.M; m++)
                for (int64_t j = 0; j < ga.ldc; j++) {
                    int64_t i = m * ga.ldc + j;
                    if (j >= ga.N) {
                        CHECKF(c1[i] == c0[i], "%s gemm wrote past column N (seed %llu)", name,
                               (unsigned long long)seed);
                        continue;
                    }
                    double bound = (double)(ga.K + 2) * 1.2e-7 * mag[i];
                    if (!CHECKF(fabs((double)c1[i] - c0[i]) <= bound,
                                "%s gemm M=%lld N=%lld K=%lld lower=%d beta=%g (%lld, %lld): %.9g vs %.9g (seed %llu)",
                                name, (long long)ga.M, (long long)ga.N, (long long)ga.K, ga.lower, ga.beta,
                                (long long)m, (long long)j, c1[i], c0[i], (unsigned long long)seed))
                        m = ga.M, j = ga.ldc;
                }
            /* step_head: P x N state, in place or out of place */
            int64_t P = 1 + test_rng_below(&r, 70), N = 1 + test_rng_below(&r, 20);
            float *x = rs, *B = rsa, *C = rsa + 40, dtv = test_rng_uniform(&r, 0.0f, 1.0f);
            float dA = test_rng_uniform(&r, 0.0f, 1.0f), Dv = test_rng_normal(&r);
            for (int64_t i = 0; i < P; i++) x[i] = test_rng_normal(&r);
            for (int64_t i = 0; i < N; i++) B[i] = test_rng_normal(&r), C[i] = test_rng_normal(&r);
            for (int64_t i = 0; i < P * N; i++) a[i] = test_rng_normal(&r);
            float *y0 = c0, *y1 = c1, *yabs = mag, *h0 = b, *h1 = aa, *ha = ba;
            bool in_place = test_rng_below(&r, 2) == 0;
            memcpy(h1, a, (size_t)(P * N) * sizeof(float));
            sc->step_head(a, h0, x, B, C, dtv, dA, Dv, P, N, y0);
            k->step_head(in_place ? h1 : a, h1, x, B, C, dtv, dA, Dv, P, N, y1);
            float xa[80], Ba[40], Ca[40];
            for (int64_t i = 0; i < P; i++) xa[i] = fabsf(x[i]);
            for (int64_t i = 0; i < N; i++) Ba[i] = fabsf(B[i]), Ca[i] = fabsf(C[i]);
            for (int64_t i = 0; i < P * N; i++) c2[i] = fabsf(a[i]);
            sc->step_head(c2, ha, xa, Ba, Ca, dtv, dA, fabsf(Dv), P, N, yabs);
            for (int64_t i = 0; i < P * N; i++)
                if (!CHECKF(fabs((double)h1[i] - h0[i]) <= 4e-6 * ha[i], "%s step state %lld: %.9g vs %.9g (seed %llu)",
                            name, (long long)i, h1[i], h0[i], (unsigned long long)seed))
                    break;
            for (int64_t i = 0; i < P; i++)
                if (!CHECKF(fabs((double)y1[i] - y0[i]) <= 4e-6 * yabs[i], "%s step y %lld: %.9g vs %.9g (seed %llu)",
                            name, (long long)i, y1[i], y0[i], (unsigned long long)seed))
                    break;
        }
    }
    free(a), free(b), free(c0), free(c1), free(c2), free(mag), free(aa), free(ba), free(rs), free(rsa);
}

/* ==== Discretization facts ==== */

/* dt = clamp(softplus(raw + bias)), softplus guarded for large inputs; one element. */
TEST(mamba2_dt_softplus_and_clamp) {
    float A = -0.5f, bias = 0.25f, D = 0.0f, x = 1.0f, B = 1.0f, C = 1.0f;
    static const struct {
        float raw, lo, hi;
    } cases[] = {{0.0f, 0.0f, INFINITY}, {-30.0f, 0.0f, INFINITY}, {1e4f, 0.0f, INFINITY},
                 {0.0f, 0.01f, 0.5f},     {-10.0f, 0.01f, 0.5f},    {3.0f, 0.01f, 0.5f}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mamba2_params p = {.n_heads = 1, .d_head = 1, .n_groups = 1, .d_state = 1, .A = &A, .dt_bias = &bias,
                           .D = &D, .dt_min = cases[c].lo, .dt_max = cases[c].hi};
        float raw = cases[c].raw, y = 0, h = 0, *hp = &h;
        mamba2_io io = {.x = &x, .B = &B, .C = &C, .dt = &raw, .y = &y};
        mamba2_step_ref(&p, &io, &hp, 1, NULL);
        double v = (double)raw + bias, dt = v > 20 ? v : log1p(exp(v));
        dt = fmin(fmax(dt, cases[c].lo), cases[c].hi);
        /* from a zero state one step gives S = dt x B, y = S C */
        CHECKF(fabs(h - dt) <= 1e-6 * dt + 1e-45, "raw %g limit (%g, %g): state %.9g, expected %.9g", raw,
               cases[c].lo, cases[c].hi, h, dt);
        CHECKF(isfinite(y), "raw %g: y %g", raw, y);
    }
}

TEST(mamba2_dispatch_respects_force_ref) {
    CHECK_STR(mamba2_variant(), isa_name(isa_active()));
    if (cpu_force_ref()) CHECK_STR(mamba2_variant(), "ref");
    CHECK(isa_available(ISA_REF) && mamba2_kernels_for(ISA_REF) != NULL);
}

/* ==== Golden outputs of the torch reference ==== */

typedef struct {
    int64_t T, H, P, G, N, K, chunk;
    float lo, hi;
    const float *A, *dt_bias, *D, *state0, *x, *B, *C, *dt, *y, *state_pre, *xs, *Bs, *Cs, *dts, *ys, *state;
} golden;

static bool golden_parse(const uint8_t *buf, size_t n, golden *g) {
    if (n < 72 || memcmp(buf, "EDM2", 4) != 0) return false;
    uint32_t version;
    memcpy(&version, buf + 4, 4);
    if (version != 1) return false;
    int64_t d[7];
    memcpy(d, buf + 8, sizeof d);
    g->T = d[0], g->H = d[1], g->P = d[2], g->G = d[3], g->N = d[4], g->K = d[5], g->chunk = d[6];
    memcpy(&g->lo, buf + 64, 4), memcpy(&g->hi, buf + 68, 4);
    for (int i = 0; i < 7; i++)
        if (d[i] < 0 || d[i] > 100000) return false;
    const float *f = (const float *)(buf + 72);
    int64_t HPN = g->H * g->P * g->N, THP = g->T * g->H * g->P, TGN = g->T * g->G * g->N;
    int64_t KHP = g->K * g->H * g->P, KGN = g->K * g->G * g->N;
    int64_t total = 3 * g->H + HPN + THP + 2 * TGN + g->T * g->H + THP + HPN + KHP + 2 * KGN + g->K * g->H + KHP + HPN;
    if ((size_t)total * 4 + 72 != n) return false;
    g->A = f, f += g->H;
    g->dt_bias = f, f += g->H;
    g->D = f, f += g->H;
    g->state0 = f, f += HPN;
    g->x = f, f += THP;
    g->B = f, f += TGN;
    g->C = f, f += TGN;
    g->dt = f, f += g->T * g->H;
    g->y = f, f += THP;
    g->state_pre = f, f += HPN;
    g->xs = f, f += KHP;
    g->Bs = f, f += KGN;
    g->Cs = f, f += KGN;
    g->dts = f, f += g->K * g->H;
    g->ys = f, f += KHP;
    g->state = f;
    return true;
}

/* torch layout (H, P, N) to ours (H, N, P), optionally taking absolute values. */
static void to_ours(float *dst, const float *src, int64_t H, int64_t P, int64_t N, bool absolute) {
    for (int64_t h = 0; h < H; h++)
        for (int64_t q = 0; q < P; q++)
            for (int64_t n = 0; n < N; n++) {
                float v = src[(h * P + q) * N + n];
                dst[(h * N + n) * P + q] = absolute ? fabsf(v) : v;
            }
}

/* Runs the T-token prefill and then the K steps of g through our kernels (reference
 * kernels when ref, else the dispatchers), with absolute inputs when absolute. Returns
 * y (T, H P), ys (K, H P), the state after the prefill and after the steps (ours). */
static void golden_run(const golden *g, bool ref, bool absolute, float *y, float *ys, float *st_pre, float *st) {
    int64_t HP = g->H * g->P, GN = g->G * g->N, HPN = HP * g->N;
    float *buf = fmalloc(2 * (g->T + g->K) * (HP + 2 * GN) + 3 * g->H);
    float *x = buf, *B = x + (g->T + g->K) * HP, *C = B + (g->T + g->K) * GN, *D = C + (g->T + g->K) * GN;
    for (int64_t i = 0; i < g->T * HP; i++) x[i] = absolute ? fabsf(g->x[i]) : g->x[i];
    for (int64_t i = 0; i < g->K * HP; i++) x[g->T * HP + i] = absolute ? fabsf(g->xs[i]) : g->xs[i];
    for (int64_t i = 0; i < g->T * GN; i++)
        B[i] = absolute ? fabsf(g->B[i]) : g->B[i], C[i] = absolute ? fabsf(g->C[i]) : g->C[i];
    for (int64_t i = 0; i < g->K * GN; i++) {
        B[g->T * GN + i] = absolute ? fabsf(g->Bs[i]) : g->Bs[i];
        C[g->T * GN + i] = absolute ? fabsf(g->Cs[i]) : g->Cs[i];
    }
    for (int64_t h = 0; h < g->H; h++) D[h] = absolute ? fabsf(g->D[h]) : g->D[h];
    mamba2_params p = {.n_heads = g->H, .d_head = g->P, .n_groups = g->G, .d_state = g->N, .A = g->A,
                       .dt_bias = g->dt_bias, .D = D, .dt_min = g->lo, .dt_max = g->hi};
    to_ours(st_pre, g->state0, g->H, g->P, g->N, absolute);
    int64_t seq[2] = {0, g->T};
    mamba2_io io = {.x = x, .x_stride = HP, .B = B, .B_stride = GN, .C = C, .C_stride = GN, .dt = g->dt,
                    .dt_stride = g->H, .y = y, .y_stride = HP};
    float *sp = st_pre;
    if (ref) {
        mamba2_scan_ref(&p, &io, seq, &sp, 1, NULL);
    } else {
        void *scratch = malloc(mamba2_scan_scratch_bytes(&p, MAMBA2_CHUNK, 1));
        mamba2_scan(&p, &io, seq, &sp, 1, NULL, scratch);
        free(scratch);
    }
    memcpy(st, st_pre, (size_t)HPN * sizeof(float));
    sp = st;
    for (int64_t k = 0; k < g->K; k++) {
        mamba2_io s = {.x = x + (g->T + k) * HP, .B = B + (g->T + k) * GN, .C = C + (g->T + k) * GN,
                       .dt = g->dts + k * g->H, .y = ys + k * HP};
        if (ref) mamba2_step_ref(&p, &s, &sp, 1, NULL);
        else mamba2_step(&p, &s, &sp, 1, NULL);
    }
    free(buf);
}

TEST(mamba2_golden) {
    static const char *const files[] = {"mamba2/basic.bin", "mamba2/limit.bin"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        size_t n = 0;
        uint8_t *buf = test_read_file(test_data_path(files[f]), &n);
        if (!CHECKF(buf != NULL, "cannot read %s", test_data_path(files[f]))) continue;
        golden g;
        if (!CHECKF(golden_parse(buf, n, &g), "%s: bad golden file", files[f])) {
            free(buf);
            continue;
        }
        int64_t HP = g.H * g.P, HPN = HP * g.N;
        float *mag = fmalloc(g.T * HP + g.K * HP + 2 * HPN), *got = fmalloc(g.T * HP + g.K * HP + 2 * HPN);
        float *want_pre = fmalloc(HPN), *want = fmalloc(HPN);
        to_ours(want_pre, g.state_pre, g.H, g.P, g.N, false);
        to_ours(want, g.state, g.H, g.P, g.N, false);
        golden_run(&g, true, true, mag, mag + g.T * HP, mag + g.T * HP + g.K * HP, mag + g.T * HP + g.K * HP + HPN);
        problem ctx = {.seed = 0};
        for (int ref = 1; ref >= 0; ref--) {
            float *y = got, *ys = got + g.T * HP, *sp = ys + g.K * HP, *st = sp + HPN;
            golden_run(&g, ref, false, y, ys, sp, st);
            float *my = mag, *mys = mag + g.T * HP, *msp = mys + g.K * HP, *mst = msp + HPN;
            char what[96];
            snprintf(what, sizeof what, "%s %s prefill y", files[f], ref ? "_ref" : mamba2_variant());
            close_vec(what, &ctx, y, g.y, my, g.T * HP, 2e-5, 1e-30);
            snprintf(what, sizeof what, "%s %s prefill state", files[f], ref ? "_ref" : mamba2_variant());
            close_vec(what, &ctx, sp, want_pre, msp, HPN, 2e-5, 1e-30);
            snprintf(what, sizeof what, "%s %s decode y", files[f], ref ? "_ref" : mamba2_variant());
            close_vec(what, &ctx, ys, g.ys, mys, g.K * HP, 2e-5, 1e-30);
            snprintf(what, sizeof what, "%s %s decode state", files[f], ref ? "_ref" : mamba2_variant());
            close_vec(what, &ctx, st, want, mst, HPN, 2e-5, 1e-30);
        }
        free(mag), free(got), free(want_pre), free(want), free(buf);
    }
    report_worst("golden");
}
