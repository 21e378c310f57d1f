/*
 * mamba2_chunk.c — the SSD chunked scan for prefill, written once over a kernel set.
 *
 * A sequence is cut into chunks of L tokens. Within a chunk, with a_t = dt_t A (the
 * log-decay of token t) and seg(t, s) = sum of a_r over s < r <= t, every head gives
 *
 *   y_t = exp(seg(t, -1)) C_t . S0                          (the state entering the chunk)
 *       + sum_{s <= t} (C_t . B_s) exp(seg(t, s)) dt_s x_s   (tokens of this chunk)
 *       + D x_t
 *   S1  = exp(seg(L-1, -1)) S0 + sum_s exp(seg(L-1, s)) dt_s B_s x_s^T
 *
 * which are four small matrix products: G = C B^T (L, L) once per group, then per
 * head Y = diag(e) C S0, Y += M X with M = G o exp(seg) o dt (lower triangular, D on
 * its diagonal), and S1 = e_L S0 + B^T diag(w) X, w_s = exp(seg(L-1, s)) dt_s.
 *
 * Segment sums are stable: seg(t, s) is summed directly over r (one running sum per
 * column s, advanced a row at a time), never formed as the difference of two long
 * cumulative sums, and every exponent is <= 0 for A <= 0, so nothing overflows.
 *
 * Threads split the (sequence, head) pairs; each walks its sequences chunk by chunk
 * and its heads within a chunk, rebuilding G when the group changes.
 */
#include <math.h>

#include "base/error.h"
#include "mamba2_impl.h"

/* ==== Scratch ==== */

static int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

/* Floats per thread: BT (d_state, L), Cc (L, d_state), G (L, L), M (L, L),
 * X and Xw (L, d_head), and four (L) vectors. */
static int64_t scratch_floats(const mamba2_params *p, int64_t L) {
    return 2 * round16(p->d_state * L) + 2 * round16(L * L) + 2 * round16(L * p->d_head) + 4 * round16(L);
}

size_t mamba2_scan_scratch_bytes(const mamba2_params *p, int64_t chunk, int n_threads) {
    return (size_t)scratch_floats(p, chunk) * sizeof(float) * (size_t)(n_threads > 0 ? n_threads : 1);
}

/* ==== Driver ==== */

typedef struct {
    const mamba2_params *p;
    const mamba2_io *io;
    const int64_t *seq_start;
    float *const *state;
    int64_t n_seq, Lm;
    const mamba2_kernels *k;
    threadpool *pool;
    float *scratch; /* NULL: the pool's per-thread scratch */
} chunk_job;

typedef struct {
    float *BT, *Cc;          /* (d_state, Lm) B^T, (Lm, d_state) C: the group's rows */
    float *G, *M;            /* (Lm, Lm) each */
    float *X, *Xw;           /* (Lm, d_head): the head's x rows, and w[s] x[s] */
    float *seg, *dt, *e, *w; /* (Lm) each */
} workspace;

/* Rows [r, r + L) of group g: BT = B^T, Cc = C, G = C B^T.
 * Inputs are copied into contiguous blocks first: in the model their row stride is
 * a multiple of 4 KiB (d_inner + 2 G N floats), which would map every row of a
 * chunk to the same few L1 sets while the products stream through them. */
static void group_chunk(const chunk_job *j, workspace *ws, int64_t r, int64_t L, int64_t g) {
    const mamba2_io *io = j->io;
    const int64_t N = j->p->d_state, Lm = j->Lm;
    for (int64_t s = 0; s < L; s++) {
        const float *b = io->B + (r + s) * io->B_stride + g * N;
        for (int64_t n = 0; n < N; n++) ws->BT[n * Lm + s] = b[n];
    }
    j->k->scale_rows(ws->Cc, N, io->C + r * io->C_stride + g * N, io->C_stride, NULL, L, N);
    mamba2_gemm_args G = {.M = L, .N = L, .K = N, .A = ws->Cc, .lda = N, .B = ws->BT, .ldb = Lm, .C = ws->G,
                          .ldc = Lm};
    j->k->gemm(&G);
}

/* Rows [r, r + L) of head h of a sequence whose state block is S; the workspace holds its group's blocks. */
static void head_chunk(const chunk_job *j, workspace *ws, int64_t r, int64_t L, int64_t h, float *S) {
    const mamba2_params *p = j->p;
    const mamba2_io *io = j->io;
    const int64_t P = p->d_head, N = p->d_state, Lm = j->Lm;
    const float A = p->A[h], D = p->D ? p->D[h] : 0.0f;

    float dec = 0.0f; /* seg(t, -1): the decay since the chunk's start */
    for (int64_t t = 0; t < L; t++) {
        ws->dt[t] = mamba2_dt(p, io->dt[(r + t) * io->dt_stride + h], h);
        float a = ws->dt[t] * A;
        dec += a;
        ws->e[t] = expf(dec);
        j->k->mask_row(ws->M + t * Lm, ws->G + t * Lm, ws->seg, ws->dt, a, t, L);
        ws->M[t * Lm + t] += D;
    }
    /* seg now holds seg(L-1, s): the weights of each token in the chunk's final state */
    for (int64_t s = 0; s < L; s++) ws->w[s] = expf(ws->seg[s]) * ws->dt[s];
    j->k->scale_rows(ws->X, P, io->x + r * io->x_stride + h * P, io->x_stride, NULL, L, P);
    j->k->scale_rows(ws->Xw, P, ws->X, P, ws->w, L, P);

    float *y = io->y + r * io->y_stride + h * P;
    mamba2_gemm_args off = {.M = L, .N = P, .K = N, .A = ws->Cc, .lda = N, .B = S, .ldb = P, .C = y,
                            .ldc = io->y_stride, .row_scale = ws->e};
    j->k->gemm(&off);
    mamba2_gemm_args diag = {.M = L, .N = P, .K = L, .A = ws->M, .lda = Lm, .B = ws->X, .ldb = P, .C = y,
                             .ldc = io->y_stride, .beta = 1.0f, .lower = true};
    j->k->gemm(&diag);
    mamba2_gemm_args next = {.M = N, .N = P, .K = L, .A = ws->BT, .lda = Lm, .B = ws->Xw, .ldb = P, .C = S,
                             .ldc = P, .beta = ws->e[L - 1]};
    j->k->gemm(&next);
}

/* Rows [r, r + L) of heads [h0, h1) come from far apart in memory (a row stride
 * apart); fetch them into the outer caches while the chunk before them is computed. */
static void prefetch_chunk(const chunk_job *j, int64_t r, int64_t L, int64_t h0, int64_t h1) {
    const mamba2_params *p = j->p;
    const mamba2_io *io = j->io;
    const int64_t P = p->d_head, N = p->d_state, g0 = mamba2_group_of(p, h0), g1 = mamba2_group_of(p, h1 - 1) + 1;
    for (int64_t t = r; t < r + L; t++) {
        const float *x = io->x + t * io->x_stride, *B = io->B + t * io->B_stride, *C = io->C + t * io->C_stride;
        for (int64_t i = h0 * P; i < h1 * P; i += 16) __builtin_prefetch(x + i, 0, 1);
        for (int64_t i = g0 * N; i < g1 * N; i += 16) {
            __builtin_prefetch(B + i, 0, 1);
            __builtin_prefetch(C + i, 0, 1);
        }
    }
}

static void chunk_task(void *ctx, int ith, int nth) {
    const chunk_job *j = ctx;
    const mamba2_params *p = j->p;
    const int64_t H = p->n_heads, Lm = j->Lm, per = scratch_floats(p, Lm);
    float *base = j->scratch ? j->scratch + (size_t)ith * (size_t)per : pool_scratch(j->pool, ith);
    workspace ws;
    ws.BT = base;
    ws.Cc = ws.BT + round16(p->d_state * Lm);
    ws.G = ws.Cc + round16(p->d_state * Lm);
    ws.M = ws.G + round16(Lm * Lm);
    ws.X = ws.M + round16(Lm * Lm);
    ws.Xw = ws.X + round16(Lm * p->d_head);
    ws.seg = ws.Xw + round16(Lm * p->d_head);
    ws.dt = ws.seg + round16(Lm);
    ws.e = ws.dt + round16(Lm);
    ws.w = ws.e + round16(Lm);

    int64_t b, e;
    pool_split(j->n_seq * H, ith, nth, &b, &e);
    unsigned fp = mamba2_flush_begin();
    for (int64_t i = b / H; i * H < e; i++) {
        int64_t h0 = (b > i * H ? b : i * H) - i * H, h1 = (e < (i + 1) * H ? e : (i + 1) * H) - i * H;
        int64_t r0 = j->seq_start[i], T = j->seq_start[i + 1] - r0;
        for (int64_t c0 = 0; c0 < T; c0 += Lm) {
            int64_t L = T - c0 < Lm ? T - c0 : Lm, g_cur = -1;
            if (c0 + Lm < T) prefetch_chunk(j, r0 + c0 + Lm, T - c0 - Lm < Lm ? T - c0 - Lm : Lm, h0, h1);
            for (int64_t h = h0; h < h1; h++) {
                int64_t g = mamba2_group_of(p, h);
                if (g != g_cur) group_chunk(j, &ws, r0 + c0, L, g), g_cur = g;
                head_chunk(j, &ws, r0 + c0, L, h, j->state[i] + h * p->d_state * p->d_head);
            }
        }
    }
    mamba2_flush_end(fp);
}

void mamba2_scan_chunked_isa(isa_level isa, int64_t chunk, const mamba2_params *p, const mamba2_io *io,
                             const int64_t *seq_start, float *const *state, int64_t n_seq, threadpool *pool,
                             void *scratch) {
    EDDY_ASSERT(p->n_heads > 0 && p->d_head > 0 && p->d_state > 0);
    EDDY_ASSERT(p->n_groups > 0 && p->n_heads % p->n_groups == 0);
    EDDY_ASSERT(chunk >= 1 && chunk <= MAMBA2_CHUNK_MAX);
    EDDY_ASSERT(isa_available(isa) && "Mamba-2 kernel set not available here");
    const mamba2_kernels *k = mamba2_kernels_for(isa);
    if (n_seq <= 0) return;
    if (!scratch) {
        EDDY_ASSERT(pool != NULL && "mamba2 chunked scan: no scratch and no pool");
        EDDY_ASSERT(pool_scratch_size(pool) >= mamba2_scan_scratch_bytes(p, chunk, 1));
    }
    chunk_job j = {.p = p, .io = io, .seq_start = seq_start, .state = state, .n_seq = n_seq, .Lm = chunk,
                   .k = k, .pool = pool, .scratch = scratch};
    pool_run(pool, chunk_task, &j, 0);
}
