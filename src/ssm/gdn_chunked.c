/*
 * gdn_chunked.c — chunked prefill of the gated delta rule (gdn.h) and the choice
 * between it and the sequential scan; also the scalar chunk kernels (GEMM and
 * friends) of the SSM_ISA_REF table.
 *
 * ---- The chunk algorithm (one head, chunk of C = 64 tokens, state S0 at its start) ----
 * Gates are cumulated within the chunk only: G_t = g_0 + ... + g_t, and the decay
 * between tokens s <= t is Gamma[t][s] = exp(D[t][s]) with D[t][s] = g_{s+1} + ... + g_t,
 * built row by row (D[t][s] = D[t-1][s] + g_t) so it never takes the difference of two
 * large sums; entries with s > t are never exponentiated (they are set to 0 after).
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
 * operands (K S0 and Qs S0 as one GEMM, K^T U) — the 6 T d^2 flops every method
 * needs — plus about 1.5 C^2 d for K K^T, Qs K^T, P U and the solve. The last chunk
 * is padded with g = 0, beta = 0 and zero rows, which contribute nothing.
 *
 * Every product is a call into the ISA's kernel table; this file holds only the
 * order of operations, so the scalar and SIMD paths share it.
 */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "ssm/gdn.h"
#include "ssm/ssm_kernels.h"

const gdn_kernels *gdn_kernels_for(ssm_isa isa, const gdn_params *p);
int64_t gdn_column_blocks(const gdn_params *p, const gdn_kernels *kk, int64_t units, int nth);

/* ==== Scalar chunk kernels (the SSM_ISA_REF table) ==== */

void gdn_gemm_ref(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B, int64_t ldb,
                  const float *Cin, int64_t ldcin, float cin_scale, float *C, int64_t ldc, int flags);
void gdn_expv_ref(float *x, int64_t n);
void gdn_scale_ref(float *y, const float *x, float a, int64_t n);
void gdn_axpby_ref(float *y, float a, const float *x, float b, int64_t n);
void gdn_hadamard_ref(float *y, float a, const float *x, const float *z, int64_t n);
void gdn_transpose_ref(int64_t m, int64_t n, const float *A, int64_t lda, float *B, int64_t ldb);

void gdn_gemm_ref(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B, int64_t ldb,
                  const float *Cin, int64_t ldcin, float cin_scale, float *C, int64_t ldc, int flags) {
    float acc[GDN_MAX_DIM];
    EDDY_ASSERT(n <= GDN_MAX_DIM);
    for (int64_t i = 0; i < m; i++) {
        int64_t pend = (flags & GDN_GEMM_A_LOWER) && i + 1 < k ? i + 1 : k;
        for (int64_t j = 0; j < n; j++) acc[j] = 0.0f;
        for (int64_t p = 0; p < pend; p++) {
            float a = A[i * lda + p];
            for (int64_t j = 0; j < n; j++) acc[j] += a * B[p * ldb + j];
        }
        for (int64_t j = 0; j < n; j++) C[i * ldc + j] = Cin ? cin_scale * Cin[i * ldcin + j] + acc[j] : acc[j];
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
    int64_t Kc, Qc, KQd, KT, Aneg, P, Gm, XS, vec, total;
} chunk_layout;

static chunk_layout layout(const gdn_params *p) {
    chunk_layout L;
    int64_t o = 0, dk = p->d_k, dv = p->d_v;
    L.Kc = o, o += round16(C_ * dk);       /* (C, d_k) k rows */
    L.Qc = o, o += round16(C_ * dk);       /* (C, d_k) scale * q rows */
    L.KQd = o, o += round16(2 * C_ * dk);  /* (2C, d_k) beta e^G k rows, then e^G scale q rows */
    L.KT = o, o += round16(dk * C_);       /* (d_k, C) k columns */
    L.Aneg = o, o += round16(C_ * C_);     /* (C, C) -A, strictly lower */
    L.P = o, o += round16(C_ * C_);        /* (C, C) Gamma o Qs K^T, lower */
    L.Gm = o, o += round16(C_ * C_);       /* (C, C) Gamma, lower */
    L.XS = o, o += round16(2 * C_ * dv);   /* (2C, d_v) B then U; then e^G Qs S0 then O */
    L.vec = o, o += round16(4 * C_);       /* g, beta, e^G, e^{D[last]} */
    L.total = o;
    return L;
}

size_t gdn_chunked_scratch_size(const gdn_params *p) { return (size_t)layout(p).total * sizeof(float) + 64; }

/* ==== One head ==== */

/* B <- (I - Aneg)^{-1} B for a strictly lower Aneg (m x m): forward substitution in
 * row blocks of 4 — a GEMM against the finished rows, then the 4-row triangle. */
static void tri_solve(const gdn_kernels *kk, int64_t m, int64_t n, const float *Aneg, int64_t lda, float *B,
                      int64_t ldb) {
    for (int64_t t0 = 0; t0 < m; t0 += 4) {
        int64_t mb = m - t0 < 4 ? m - t0 : 4;
        float *Bt = B + t0 * ldb;
        if (t0 > 0) kk->gemm(mb, n, t0, Aneg + t0 * lda, lda, B, ldb, Bt, ldb, 1.0f, Bt, ldb, 0);
        for (int64_t r = 1; r < mb; r++)
            kk->gemm(1, n, r, Aneg + (t0 + r) * lda + t0, lda, Bt, ldb, Bt + r * ldb, ldb, 1.0f, Bt + r * ldb, ldb, 0);
    }
}

/* Asks for row t of the head's inputs ahead of use: the rows of one head are a
 * conv-output row apart (32 KiB at Qwen3-Next sizes), too far for the hardware
 * prefetchers to follow. */
static void prefetch_row(const gdn_rows *r, int64_t t, int64_t dk, int64_t j0, int64_t nv) {
    const char *q = (const char *)(r->q + t * r->q_stride), *k = (const char *)(r->k + t * r->k_stride);
    const char *v = (const char *)(r->v + t * r->v_stride + j0);
    for (int64_t b = 0; b < dk * (int64_t)sizeof(float); b += 64) __builtin_prefetch(q + b), __builtin_prefetch(k + b);
    for (int64_t b = 0; b < nv * (int64_t)sizeof(float); b += 64) __builtin_prefetch(v + b);
    __builtin_prefetch(r->g + t * r->g_stride), __builtin_prefetch(r->beta + t * r->beta_stride);
}

/* Tokens [0, T) of one head (rows r at the head's key / value offsets), value
 * columns [j0, j1) of its state S (d_k, d_v). */
static void chunked_head(const gdn_kernels *kk, const gdn_params *p, int64_t T, const gdn_rows *r, float *S,
                         int64_t j0, int64_t j1, float *scratch) {
    const int64_t dk = p->d_k, dv = p->d_v, nv = j1 - j0;
    const chunk_layout L = layout(p);
    float *Kc = scratch + L.Kc, *Qc = scratch + L.Qc, *KQd = scratch + L.KQd, *KT = scratch + L.KT;
    float *Aneg = scratch + L.Aneg, *P = scratch + L.P, *Gm = scratch + L.Gm;
    float *U = scratch + L.XS, *XSq = scratch + L.XS + C_ * nv;
    float *g = scratch + L.vec, *beta = g + C_, *eG = beta + C_;

    for (int64_t t = 0; t < C_ && t < T; t++) prefetch_row(r, t, dk, j0, nv);
    for (int64_t t0 = 0; t0 < T; t0 += C_) {
        const int64_t n = T - t0 < C_ ? T - t0 : C_;
        const int64_t n_next = T - t0 - n < C_ ? T - t0 - n : C_;

        /* gates: padding rows get g = 0, beta = 0 */
        float G = 0.0f;
        for (int64_t t = 0; t < C_; t++) {
            g[t] = t < n ? r->g[(t0 + t) * r->g_stride] : 0.0f;
            beta[t] = t < n ? r->beta[(t0 + t) * r->beta_stride] : 0.0f;
            G += g[t];
            eG[t] = G;
        }
        kk->expv(eG, C_);
        /* D[t][s] = g_{s+1} + ... + g_t for s <= t, row by row, and -inf above the
         * diagonal (masked before exp); then Gamma = exp(D), 0 above the diagonal */
        for (int64_t t = 0; t < C_; t++) {
            float *row = Gm + t * C_;
            for (int64_t s = 0; s < t; s++) row[s] = row[s - C_] + g[t];
            row[t] = 0.0f;
            for (int64_t s = t + 1; s < C_; s++) row[s] = -INFINITY;
        }
        kk->expv(Gm, C_ * C_);
        const float *eC = Gm + (C_ - 1) * C_; /* e^{G_last - G_s} */
        const float eGlast = eG[C_ - 1];

        /* rows of k, scale q, and their decayed forms; the next chunk's rows are requested */
        for (int64_t t = 0; t < n; t++) {
            const float *kt = r->k + (t0 + t) * r->k_stride, *qt = r->q + (t0 + t) * r->q_stride;
            if (t < n_next) prefetch_row(r, t0 + C_ + t, dk, j0, nv);
            memcpy(Kc + t * dk, kt, (size_t)dk * sizeof(float));
            kk->scale(Qc + t * dk, qt, p->scale, dk);
            kk->scale(KQd + t * dk, kt, beta[t] * eG[t], dk);
            kk->scale(KQd + (C_ + t) * dk, Qc + t * dk, eG[t], dk);
        }
        if (n < C_) {
            size_t pad = (size_t)((C_ - n) * dk) * sizeof(float);
            memset(Kc + n * dk, 0, pad);
            memset(Qc + n * dk, 0, pad);
            memset(KQd + n * dk, 0, pad);
            memset(KQd + (C_ + n) * dk, 0, pad);
        }
        kk->transpose(C_, dk, Kc, dk, KT, C_);

        /* Aneg = -A = -beta_t Gamma o K K^T (s < t); P = Gamma o Qs K^T (s <= t). Only
         * these entries are read later, plus P up to the end of each GEMM row block
         * (GDN_GEMM_A_LOWER), where Gamma is 0. */
        kk->gemm(C_, C_, dk, Kc, dk, KT, C_, NULL, 0, 0.0f, Aneg, C_, GDN_GEMM_OUT_LOWER);
        kk->gemm(C_, C_, dk, Qc, dk, KT, C_, NULL, 0, 0.0f, P, C_, GDN_GEMM_OUT_LOWER);
        for (int64_t t = 0; t < C_; t++) {
            kk->hadamard(Aneg + t * C_, -beta[t], Gm + t * C_, Aneg + t * C_, t);
            kk->hadamard(P + t * C_, 1.0f, Gm + t * C_, P + t * C_, (t | (GDN_GEMM_MR - 1)) + 1);
        }

        /* [beta e^G K; e^G Qs] S0 in one GEMM, then B = beta V - (first half) */
        kk->gemm(2 * C_, nv, dk, KQd, dk, S + j0, dv, NULL, 0, 0.0f, U, nv, 0);
        for (int64_t t = 0; t < n; t++) kk->axpby(U + t * nv, beta[t], r->v + (t0 + t) * r->v_stride + j0, -1.0f, nv);

        /* U = (I + A)^{-1} B */
        tri_solve(kk, C_, nv, Aneg, C_, U, nv);

        /* O = e^G Qs S0 + P U, straight into the output rows unless the chunk is padded */
        if (n == C_) {
            kk->gemm(C_, nv, C_, P, C_, U, nv, XSq, nv, 1.0f, r->o + t0 * r->o_stride + j0, r->o_stride,
                     GDN_GEMM_A_LOWER);
        } else {
            kk->gemm(C_, nv, C_, P, C_, U, nv, XSq, nv, 1.0f, XSq, nv, GDN_GEMM_A_LOWER);
            for (int64_t t = 0; t < n; t++)
                memcpy(r->o + (t0 + t) * r->o_stride + j0, XSq + t * nv, (size_t)nv * sizeof(float));
        }

        /* S = e^{G_last} S0 + K^T diag(e^{D[last]}) U */
        for (int64_t s = 0; s < C_; s++) kk->scale(U + s * nv, U + s * nv, eC[s], nv);
        kk->gemm(dk, nv, C_, KT, C_, U, nv, S + j0, dv, eGlast, S + j0, dv, 0);
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
    const int64_t dk = p->d_k, dv = p->d_v;
    uint8_t *base = j->scratch ? j->scratch + (size_t)ith * j->scratch_stride : pool_scratch(j->pool, ith);
    float *scratch = (float *)(((uintptr_t)base + 63) & ~(uintptr_t)63);
    int64_t b, e;
    pool_split(p->n_v_heads * j->ncb, ith, nth, &b, &e);
    for (int64_t u = b; u < e; u++) {
        int64_t h = u / j->ncb, cb = u % j->ncb, kh = gdn_key_head(p, h);
        int64_t w = dv / j->ncb, j0 = cb * w, j1 = cb == j->ncb - 1 ? dv : j0 + w;
        gdn_rows r = *j->rows;
        r.q += kh * dk, r.k += kh * dk, r.v += h * dv, r.g += h, r.beta += h, r.o += h * dv;
        chunked_head(j->kk, p, j->T, &r, j->state + h * dk * dv, j0, j1, scratch);
    }
}

void gdn_chunked_isa(ssm_isa isa, threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows,
                     float *state, void *scratch) {
    EDDY_ASSERT(p->d_k >= 1 && p->d_k <= GDN_MAX_DIM && p->d_v >= 1 && p->d_v <= GDN_MAX_DIM);
    EDDY_ASSERT(p->n_k_heads >= 1 && p->n_v_heads % p->n_k_heads == 0);
    if (T <= 0) return;
    const gdn_kernels *kk = gdn_kernels_for(isa, p);
    size_t need = gdn_chunked_scratch_size(p);
    /* the 64 bytes of slack in `need` cover aligning each region */
    if (!scratch) EDDY_ASSERT(pool != NULL && pool_scratch_size(pool) >= need);
    int nth = pool_size(pool);
    if (p->n_v_heads < nth && gdn_column_blocks(p, kk, p->n_v_heads, nth) == 1) nth = (int)p->n_v_heads;
    int64_t ncb = gdn_column_blocks(p, kk, p->n_v_heads, nth);
    chunk_job j = {kk, p, T, ncb, rows, state, pool, scratch, need};
    pool_run(pool, chunk_task, &j, nth);
}

/* ==== Dispatch ==== */

/* Tokens from which the chunked form beats the sequential scan (measured; see
 * docs/kernels-gdn.md). */
#define GDN_CHUNKED_MIN_T 64

int gdn_prefill_uses_chunked(const gdn_params *p, int64_t T) {
    (void)p;
    return T >= GDN_CHUNKED_MIN_T;
}

void gdn_chunked(threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows, float *state,
                 void *scratch) {
    gdn_chunked_isa(ssm_isa_best(), pool, p, T, rows, state, scratch);
}

void gdn_prefill(threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows, float *state,
                 void *scratch) {
    if (gdn_prefill_uses_chunked(p, T))
        gdn_chunked(pool, p, T, rows, state, scratch);
    else
        gdn_scan(pool, p, T, rows, state);
}
