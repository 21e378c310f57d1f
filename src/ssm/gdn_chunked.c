/*
 * gdn_chunked.c — chunked prefill of the gated delta rule (gdn.h) and the choice
 * between it and the sequential scan; also the scalar chunk kernels (GEMM and
 * friends) of the ISA_REF table.
 *
 * ---- The chunk algorithm (one head, chunk of C = 64 tokens, state S0 at its start) ----
 * Gates are cumulated within the chunk only: G_t = g_0 + ... + g_t, and the decay
 * between tokens s <= t is Gamma[t][s] = exp(D[t][s]) with D[t][s] = g_{s+1} + ... + g_t,
 * built row by row (D[t][s] = D[t-1][s] + g_t) so it never takes the difference of two
 * large sums; entries with s > t are -inf before the exponential (masked), so Gamma
 * is exactly 0 there and nothing positive is ever exponentiated.
 * Unrolling the recurrence over the chunk gives, with u_t the delta-rule update:
 *
 *   u_t = beta_t (v_t - e^{G_t} S0^T k_t - sum_{s<t} Gamma[t][s] (k_t.k_s) u_s)
 *   (I + A) U = B,  A[t][s] = beta_t Gamma[t][s] (k_t.k_s) (s < t),  B = diag(beta) V - diag(beta e^G) K S0
 *   O = diag(e^G) Qs S0 + (Gamma o (Qs K^T), lower incl. diagonal) U          (Qs = scale Q)
 *   S = e^{G_last} S0 + K^T diag(Gamma[last][:]) U
 *
 * The UT transform (I + A)^{-1} is applied to B by blocked forward substitution
 * (GEMMs over finished row blocks plus a 4-row triangle), never formed. Per chunk
 * that is, with d = d_k = d_v: 3 C d^2 multiply-adds of GEMM against state-sized
 * operands (K S0, Qs S0, K^T U) — the 6 T d^2 flops every method needs — plus
 * C^2 d / 2 each for P U and the solve, and C^2 d / 2 each for K K^T and Qs K^T,
 * which the value heads sharing a key head compute once. The row scalings
 * (beta, e^G) ride in the GEMM epilogues. The last chunk is padded with g = 0,
 * beta = 0 and zero rows, which contribute nothing.
 *
 * A unit of work is one key head with the value heads that read it (and a block
 * of value columns when heads are fewer than threads). Every product is a call
 * into the ISA's kernel table; this file holds only the order of operations, so
 * the scalar and SIMD paths share it.
 */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "ssm/gdn.h"
#include "ssm/ssm_kernels.h"

/* ==== Scalar chunk kernels (the ISA_REF table) ==== */

void gdn_gemm_ref(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B, int64_t ldb,
                  const float *Cin, int64_t ldcin, float cin_scale, const float *cin_rows, const float *acc_rows,
                  float *C, int64_t ldc, int flags) {
    float acc[GDN_MAX_DIM];
    EDDY_ASSERT(n <= GDN_MAX_DIM);
    for (int64_t i = 0; i < m; i++) {
        /* A_LOWER: the k loop of row i stops at the end of its row block */
        int64_t blk_end = (i / GDN_GEMM_MR + 1) * GDN_GEMM_MR;
        int64_t pend = (flags & GDN_GEMM_A_LOWER) && blk_end < k ? blk_end : k;
        for (int64_t j = 0; j < n; j++) acc[j] = 0.0f;
        for (int64_t p = 0; p < pend; p++) {
            float a = A[i * lda + p];
            for (int64_t j = 0; j < n; j++) acc[j] += a * B[p * ldb + j];
        }
        float as = acc_rows ? acc_rows[i] : 1.0f, cs = cin_rows ? cin_rows[i] : cin_scale;
        for (int64_t j = 0; j < n; j++) {
            float x = acc_rows ? as * acc[j] : acc[j];
            C[i * ldc + j] = Cin ? cs * Cin[i * ldcin + j] + x : x;
        }
    }
}

void gdn_expv_ref(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = expf(x[i]);
}

void gdn_scale_ref(float *y, const float *x, float a, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a * x[i];
}

void gdn_axpby_ref(float *y, float a, const float *x, float b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a * x[i] + b * y[i];
}

void gdn_add_scalar_ref(float *y, const float *x, float a, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] + a;
}

void gdn_hadamard_ref(float *y, float a, const float *x, const float *z, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a * x[i] * z[i];
}

void gdn_transpose_ref(int64_t m, int64_t n, const float *A, int64_t lda, float *B, int64_t ldb) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) B[j * ldb + i] = A[i * lda + j];
}

/* ==== Scratch ==== */

#define C_ GDN_CHUNK

static int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

/* Float offsets of the per-thread buffers (each 64-byte aligned). */
typedef struct {
    int64_t Kc, Qc, KT, KK, QK, Aneg, P, Gm, U, XSq, Vpad, vec, total;
} chunk_layout;

static chunk_layout layout(const gdn_params *p) {
    chunk_layout L;
    int64_t o = 0, dk = p->d_k, dv = p->d_v;
    L.Kc = o, o += round16(C_ * dk);   /* (C, d_k) k rows of the key head */
    L.Qc = o, o += round16(C_ * dk);   /* (C, d_k) scale * q rows */
    L.KT = o, o += round16(dk * C_);   /* (d_k, C) k columns */
    L.KK = o, o += round16(C_ * C_);   /* (C, C) K K^T, lower */
    L.QK = o, o += round16(C_ * C_);   /* (C, C) Qs K^T, lower */
    L.Aneg = o, o += round16(C_ * C_); /* (C, C) -A of one value head, strictly lower */
    L.P = o, o += round16(C_ * C_);    /* (C, C) Gamma o Qs K^T, lower */
    L.Gm = o, o += round16(C_ * C_);   /* (C, C) D, then Gamma = exp(D) (0 above the diagonal) */
    L.U = o, o += round16(C_ * dv);    /* (C, d_v) B, then U */
    L.XSq = o, o += round16(C_ * dv);  /* (C, d_v) e^G Qs S0, then O */
    L.Vpad = o, o += round16(C_ * dv); /* (C, d_v) v rows of a padded last chunk */
    L.vec = o, o += round16(5 * C_);   /* g, beta, e^G, -beta e^G, spare */
    L.total = o;
    return L;
}

size_t gdn_chunked_scratch_size(const gdn_params *p) { return (size_t)layout(p).total * sizeof(float) + 64; }

/* ==== One key head and its value heads ==== */

/* B <- (I - Aneg)^{-1} B for a strictly lower Aneg (m x m): forward substitution in
 * row blocks of GDN_GEMM_MR — a GEMM against the finished rows, then the small
 * triangle row by row. */
static void tri_solve(const gdn_kernels *kk, int64_t m, int64_t n, const float *Aneg, int64_t lda, float *B,
                      int64_t ldb) {
    for (int64_t t0 = 0; t0 < m; t0 += GDN_GEMM_MR) {
        int64_t mb = m - t0 < GDN_GEMM_MR ? m - t0 : GDN_GEMM_MR;
        float *Bt = B + t0 * ldb;
        if (t0 > 0) kk->gemm(mb, n, t0, Aneg + t0 * lda, lda, B, ldb, Bt, ldb, 1.0f, NULL, NULL, Bt, ldb, 0);
        for (int64_t r = 1; r < mb; r++)
            for (int64_t q = 0; q < r; q++) kk->axpby(Bt + r * ldb, Aneg[(t0 + r) * lda + t0 + q], Bt + q * ldb, 1.0f, n);
    }
}

/* Asks for row t of the inputs ahead of use: the rows of one head are a
 * conv-output row apart (32 KiB at Qwen3-Next sizes), too far for the hardware
 * prefetchers to follow. */
static void prefetch_span(const float *p, int64_t n) {
    const char *c = (const char *)p;
    for (int64_t b = 0; b < n * (int64_t)sizeof(float); b += 64) __builtin_prefetch(c + b);
}

typedef struct {
    const gdn_rows *rows; /* the layer's rows, row 0 = token 0 */
    int64_t kh;           /* key head */
    int64_t heads[GDN_MAX_GROUP];
    int64_t n_heads; /* value heads reading kh */
    float *state;    /* the sequence's state */
} head_group;

static void prefetch_row(const gdn_params *p, const head_group *hg, int64_t t, int64_t j0, int64_t nv) {
    const gdn_rows *r = hg->rows;
    prefetch_span(r->q + t * r->q_stride + hg->kh * p->d_k, p->d_k);
    prefetch_span(r->k + t * r->k_stride + hg->kh * p->d_k, p->d_k);
    for (int64_t i = 0; i < hg->n_heads; i++) prefetch_span(r->v + t * r->v_stride + hg->heads[i] * p->d_v + j0, nv);
    __builtin_prefetch(r->g + t * r->g_stride), __builtin_prefetch(r->beta + t * r->beta_stride);
}

/* Tokens [0, T) of one key head's group, value columns [j0, j1) of each state. */
static void chunked_group(const gdn_kernels *kk, const gdn_params *p, int64_t T, const head_group *hg, int64_t j0,
                          int64_t j1, float *scratch) {
    const int64_t dk = p->d_k, dv = p->d_v, nv = j1 - j0;
    const gdn_rows *r = hg->rows;
    const chunk_layout L = layout(p);
    float *Kc = scratch + L.Kc, *Qc = scratch + L.Qc, *KT = scratch + L.KT, *KK = scratch + L.KK;
    float *QK = scratch + L.QK, *Aneg = scratch + L.Aneg, *P = scratch + L.P, *Gm = scratch + L.Gm;
    float *U = scratch + L.U, *XSq = scratch + L.XSq, *Vpad = scratch + L.Vpad;
    float *g = scratch + L.vec, *beta = g + C_, *eG = beta + C_, *nbeG = eG + C_;
    const float *q_head = r->q + hg->kh * dk, *k_head = r->k + hg->kh * dk;

    for (int64_t t = 0; t < C_ && t < T; t++) prefetch_row(p, hg, t, j0, nv);
    for (int64_t t0 = 0; t0 < T; t0 += C_) {
        const int64_t n = T - t0 < C_ ? T - t0 : C_;
        const int64_t n_next = T - t0 - n < C_ ? T - t0 - n : C_;

        /* ---- shared by the group: k and scale q rows, K^T, K K^T, Qs K^T ---- */
        for (int64_t t = 0; t < n; t++) {
            if (t < n_next) prefetch_row(p, hg, t0 + C_ + t, j0, nv);
            memcpy(Kc + t * dk, k_head + (t0 + t) * r->k_stride, (size_t)dk * sizeof(float));
            kk->scale(Qc + t * dk, q_head + (t0 + t) * r->q_stride, p->scale, dk);
        }
        if (n < C_) {
            memset(Kc + n * dk, 0, (size_t)((C_ - n) * dk) * sizeof(float));
            memset(Qc + n * dk, 0, (size_t)((C_ - n) * dk) * sizeof(float));
        }
        kk->transpose(C_, dk, Kc, dk, KT, C_);
        kk->gemm(C_, C_, dk, Kc, dk, KT, C_, NULL, 0, 0.0f, NULL, NULL, KK, C_, GDN_GEMM_OUT_LOWER);
        kk->gemm(C_, C_, dk, Qc, dk, KT, C_, NULL, 0, 0.0f, NULL, NULL, QK, C_, GDN_GEMM_OUT_LOWER);

        for (int64_t hi = 0; hi < hg->n_heads; hi++) {
            const int64_t h = hg->heads[hi];
            float *S = hg->state + h * dk * dv + j0;
            float *o = r->o + t0 * r->o_stride + h * dv + j0;

            /* gates: padding rows get g = 0, beta = 0 */
            float G = 0.0f;
            for (int64_t t = 0; t < C_; t++) {
                g[t] = t < n ? r->g[(t0 + t) * r->g_stride + h] : 0.0f;
                beta[t] = t < n ? r->beta[(t0 + t) * r->beta_stride + h] : 0.0f;
                G += g[t];
                eG[t] = G;
            }
            kk->expv(eG, C_);
            for (int64_t t = 0; t < C_; t++) nbeG[t] = -beta[t] * eG[t];
            /* D[t][s] = g_{s+1} + ... + g_t for s <= t, row by row (D[t] = D[t-1] + g_t),
             * -inf above the diagonal (masked before exp); Gamma = exp(D) */
            Gm[0] = 0.0f;
            for (int64_t s = 1; s < C_; s++) Gm[s] = -INFINITY;
            for (int64_t t = 1; t < C_; t++) {
                kk->add_scalar(Gm + t * C_, Gm + (t - 1) * C_, g[t], C_);
                Gm[t * C_ + t] = 0.0f;
            }
            kk->expv(Gm, C_ * C_);
            const float *eC = Gm + (C_ - 1) * C_; /* e^{G_last - G_s} */
            const float eGlast = eG[C_ - 1];

            /* Aneg = -beta_t Gamma o K K^T (s < t); P = Gamma o Qs K^T (s <= t). Only these
             * entries are read, plus P up to the end of each GEMM row block (A_LOWER),
             * where Gamma is 0. */
            for (int64_t t = 0; t < C_; t++) {
                kk->hadamard(Aneg + t * C_, -beta[t], Gm + t * C_, KK + t * C_, t);
                kk->hadamard(P + t * C_, 1.0f, Gm + t * C_, QK + t * C_, (t | (GDN_GEMM_MR - 1)) + 1);
            }

            /* B = beta V - beta e^G (K S0);  e^G Qs S0 */
            const float *V = r->v + t0 * r->v_stride + h * dv + j0;
            int64_t ldv = r->v_stride;
            if (n < C_) { /* padded chunk: the missing rows must read as zeros */
                for (int64_t t = 0; t < n; t++) memcpy(Vpad + t * nv, V + t * ldv, (size_t)nv * sizeof(float));
                memset(Vpad + n * nv, 0, (size_t)((C_ - n) * nv) * sizeof(float));
                V = Vpad, ldv = nv;
            }
            kk->gemm(C_, nv, dk, Kc, dk, S, dv, V, ldv, 0.0f, beta, nbeG, U, nv, 0);
            kk->gemm(C_, nv, dk, Qc, dk, S, dv, NULL, 0, 0.0f, NULL, eG, XSq, nv, 0);

            /* U = (I + A)^{-1} B */
            tri_solve(kk, C_, nv, Aneg, C_, U, nv);

            /* O = e^G Qs S0 + P U, straight into the output rows unless the chunk is padded */
            if (n == C_) {
                kk->gemm(C_, nv, C_, P, C_, U, nv, XSq, nv, 1.0f, NULL, NULL, o, r->o_stride, GDN_GEMM_A_LOWER);
            } else {
                kk->gemm(C_, nv, C_, P, C_, U, nv, XSq, nv, 1.0f, NULL, NULL, XSq, nv, GDN_GEMM_A_LOWER);
                for (int64_t t = 0; t < n; t++) memcpy(o + t * r->o_stride, XSq + t * nv, (size_t)nv * sizeof(float));
            }

            /* S = e^{G_last} S0 + K^T diag(e^{D[last]}) U */
            for (int64_t s = 0; s < C_; s++) kk->scale(U + s * nv, U + s * nv, eC[s], nv);
            kk->gemm(dk, nv, C_, KT, C_, U, nv, S, dv, eGlast, NULL, NULL, S, dv, 0);
        }
    }
}

/* ==== Threaded driver ==== */

typedef struct {
    const gdn_kernels *kk;
    const gdn_params *p;
    int64_t T, ncb;
    const gdn_rows *rows;
    float *state;
    threadpool *pool;
    uint8_t *scratch;
    size_t scratch_stride;
} chunk_job;

static void chunk_task(void *ctx, int ith, int nth) {
    const chunk_job *j = ctx;
    const gdn_params *p = j->p;
    const int64_t ratio = p->n_v_heads / p->n_k_heads, dv = p->d_v;
    uint8_t *base = j->scratch ? j->scratch + (size_t)ith * j->scratch_stride : pool_scratch(j->pool, ith);
    float *scratch = (float *)(((uintptr_t)base + 63) & ~(uintptr_t)63);
    int64_t b, e;
    pool_split(p->n_k_heads * j->ncb, ith, nth, &b, &e);
    for (int64_t u = b; u < e; u++) {
        int64_t kh = u / j->ncb, cb = u % j->ncb;
        int64_t w = dv / j->ncb, j0 = cb * w, j1 = cb == j->ncb - 1 ? dv : j0 + w;
        head_group hg = {j->rows, kh, {0}, ratio, j->state};
        for (int64_t i = 0; i < ratio; i++)
            hg.heads[i] = p->head_map == GDN_KHEAD_MOD ? kh + i * p->n_k_heads : kh * ratio + i;
        chunked_group(j->kk, p, j->T, &hg, j0, j1, scratch);
    }
}

void gdn_chunked_isa(isa_level isa, threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows,
                     float *state, void *scratch) {
    EDDY_ASSERT(p->d_k >= 1 && p->d_k <= GDN_MAX_DIM && p->d_v >= 1 && p->d_v <= GDN_MAX_DIM);
    EDDY_ASSERT(p->n_k_heads >= 1 && p->n_v_heads % p->n_k_heads == 0);
    EDDY_ASSERT(p->n_v_heads / p->n_k_heads <= GDN_MAX_GROUP);
    if (T <= 0) return;
    const gdn_kernels *kk = gdn_kernels_for(isa, p);
    size_t need = gdn_chunked_scratch_size(p);
    /* the 64 bytes of slack in `need` cover aligning each region */
    if (!scratch) EDDY_ASSERT(pool != NULL && pool_scratch_size(pool) >= need);
    int nth = pool_size(pool);
    int64_t ncb = gdn_column_blocks(p, kk, p->n_k_heads, nth);
    if (p->n_k_heads * ncb < nth) nth = (int)(p->n_k_heads * ncb);
    chunk_job j = {kk, p, T, ncb, rows, state, pool, scratch, need};
    pool_run(pool, chunk_task, &j, nth);
}

/* ==== Dispatch ==== */

/* Tokens from which the chunked form beats the sequential scan: one chunk of 64
 * costs about as much as 50-60 tokens of the scan at Qwen3-Next sizes (d_k = d_v =
 * 128, AVX-512; measured, see docs/kernels-gdn.md). */
#define GDN_CHUNKED_MIN_T 56

int gdn_prefill_uses_chunked(const gdn_params *p, int64_t T) {
    (void)p;
    return T >= GDN_CHUNKED_MIN_T;
}

void gdn_chunked(threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows, float *state,
                 void *scratch) {
    gdn_chunked_isa(isa_active(), pool, p, T, rows, state, scratch);
}

/* The chunked form over whole chunks; a last partial chunk shorter than the
 * crossover goes through the scan instead of being padded. */
void gdn_prefill(threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows, float *state,
                 void *scratch) {
    int64_t full = T / GDN_CHUNK * GDN_CHUNK, tail = T - full;
    if (!gdn_prefill_uses_chunked(p, T)) {
        gdn_scan(pool, p, T, rows, state);
    } else if (tail == 0 || gdn_prefill_uses_chunked(p, tail)) {
        gdn_chunked(pool, p, T, rows, state, scratch);
    } else {
        gdn_chunked(pool, p, full, rows, state, scratch);
        gdn_rows r = *rows;
        r.q += full * r.q_stride, r.k += full * r.k_stride, r.v += full * r.v_stride;
        r.g += full * r.g_stride, r.beta += full * r.beta_stride, r.o += full * r.o_stride;
        gdn_scan(pool, p, tail, &r, state);
    }
}
