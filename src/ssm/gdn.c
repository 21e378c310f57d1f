/*
 * gdn.c — the gated delta rule (gdn.h): the scalar oracles, the scalar per-head
 * kernels, and the threaded drivers of the decode step, the sequential scan and
 * the verify scan. The chunked prefill lives in gdn_chunked.c.
 *
 * A unit of work is one (sequence, value head, value-column block): the columns
 * of S are independent of one another (column j of S, u and o only ever mixes
 * with column j), so a head can be split by columns when there are fewer heads
 * than threads, without any exchange between threads.
 */
#include <stdbool.h>
#include <string.h>

#include "base/error.h"
#include "ssm/gdn.h"
#include "ssm/ssm_kernels.h"

/* ==== Scalar oracle ==== */

static void check_params(const gdn_params *p) {
    EDDY_ASSERT(p->n_k_heads >= 1 && p->n_v_heads >= 1 && p->n_v_heads % p->n_k_heads == 0);
    EDDY_ASSERT(p->d_k >= 1 && p->d_k <= GDN_MAX_DIM && p->d_v >= 1 && p->d_v <= GDN_MAX_DIM);
    EDDY_ASSERT(p->head_map == GDN_KHEAD_MOD || p->head_map == GDN_KHEAD_DIV);
}

/* One token of one head, as the equations read:
 *   S = exp(g) S;  u = beta (v - S^T k);  S += k u^T;  o = S^T (scale q) */
static void token_ref(const gdn_params *p, const float *q, const float *k, const float *v, float g, float beta,
                      float *S, float *o) {
    const int64_t dk = p->d_k, dv = p->d_v;
    float decay = expf(g), u[GDN_MAX_DIM];
    for (int64_t i = 0; i < dk * dv; i++) S[i] *= decay;
    for (int64_t j = 0; j < dv; j++) {
        float sk = 0.0f;
        for (int64_t i = 0; i < dk; i++) sk += S[i * dv + j] * k[i];
        u[j] = beta * (v[j] - sk);
    }
    for (int64_t i = 0; i < dk; i++)
        for (int64_t j = 0; j < dv; j++) S[i * dv + j] += k[i] * u[j];
    for (int64_t j = 0; j < dv; j++) {
        float sq = 0.0f;
        for (int64_t i = 0; i < dk; i++) sq += S[i * dv + j] * (p->scale * q[i]);
        o[j] = sq;
    }
}

void gdn_scan_ref(const gdn_params *p, int64_t T, const gdn_rows *r, float *state) {
    check_params(p);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < p->n_v_heads; h++) {
            int64_t kh = gdn_key_head(p, h);
            token_ref(p, r->q + t * r->q_stride + kh * p->d_k, r->k + t * r->k_stride + kh * p->d_k,
                      r->v + t * r->v_stride + h * p->d_v, r->g[t * r->g_stride + h], r->beta[t * r->beta_stride + h],
                      state + h * p->d_k * p->d_v, r->o + t * r->o_stride + h * p->d_v);
        }
}

/* Rows of sequence s, token t of a (sequence, position) layout with T positions each. */
static gdn_rows rows_at(const gdn_rows *r, int64_t row) {
    gdn_rows x = *r;
    x.q += row * r->q_stride, x.k += row * r->k_stride, x.v += row * r->v_stride;
    x.g += row * r->g_stride, x.beta += row * r->beta_stride, x.o += row * r->o_stride;
    return x;
}

void gdn_step_ref(const gdn_params *p, int64_t n_seq, const gdn_rows *rows, float *state, const int64_t *slot) {
    for (int64_t s = 0; s < n_seq; s++) {
        gdn_rows x = rows_at(rows, s);
        gdn_scan_ref(p, 1, &x, state + (slot ? slot[s] : s) * gdn_state_floats(p));
    }
}

void gdn_verify_ref(const gdn_params *p, int64_t n_seq, int64_t T, const gdn_rows *rows, const float *state,
                    const int64_t *slot, float *const *snap) {
    const int64_t n = gdn_state_floats(p);
    for (int64_t s = 0; s < n_seq; s++) {
        for (int64_t t = 0; t < T; t++) {
            const int64_t r = s * T + t;
            const float *prev = t == 0 ? state + (slot ? slot[s] : s) * n : snap[r - 1];
            memcpy(snap[r], prev, (size_t)n * sizeof(float));
            gdn_rows x = rows_at(rows, r);
            gdn_scan_ref(p, 1, &x, snap[r]);
        }
    }
}

/* ==== Scalar per-head kernels (the ISA_REF table) ==== */

/* The decode form: one pass reads S_in for both S^T k and S^T q, a second writes
 * S_out = e S_in + k u^T; o = e S^T q_s + u (k . q_s) with q_s = scale q. */
static void head_step_ref(const float *q, const float *k, const float *v, float g, float beta, float scale,
                          const float *S_in, float *S_out, int64_t d_k, int64_t d_v, int64_t j0, int64_t j1,
                          float *o) {
    float e = expf(g), kq = 0.0f, sk[GDN_MAX_DIM], sq[GDN_MAX_DIM], u[GDN_MAX_DIM];
    for (int64_t i = 0; i < d_k; i++) kq += k[i] * q[i];
    kq *= scale;
    for (int64_t j = j0; j < j1; j++) sk[j] = sq[j] = 0.0f;
    for (int64_t i = 0; i < d_k; i++)
        for (int64_t j = j0; j < j1; j++) {
            sk[j] += S_in[i * d_v + j] * k[i];
            sq[j] += S_in[i * d_v + j] * q[i];
        }
    for (int64_t j = j0; j < j1; j++) {
        u[j] = beta * (v[j] - e * sk[j]);
        o[j] = e * scale * sq[j] + u[j] * kq;
    }
    for (int64_t i = 0; i < d_k; i++)
        for (int64_t j = j0; j < j1; j++) S_out[i * d_v + j] = e * S_in[i * d_v + j] + k[i] * u[j];
}

static void head_scan_ref(const gdn_rows *r, int64_t T, float scale, float *S, int64_t d_k, int64_t d_v, int64_t j0,
                          int64_t j1) {
    for (int64_t t = 0; t < T; t++)
        head_step_ref(r->q + t * r->q_stride, r->k + t * r->k_stride, r->v + t * r->v_stride, r->g[t * r->g_stride],
                      r->beta[t * r->beta_stride], scale, S, S, d_k, d_v, j0, j1, r->o + t * r->o_stride);
}

/* The chunk kernels of the scalar table (gemm & co.) are in gdn_chunked.c. */

const gdn_kernels gdn_kernels_ref = {
    .head_step = head_step_ref,
    .head_scan = head_scan_ref,
    .gemm = gdn_gemm_ref,
    .expv = gdn_expv_ref,
    .scale = gdn_scale_ref,
    .axpby = gdn_axpby_ref,
    .add_scalar = gdn_add_scalar_ref,
    .hadamard = gdn_hadamard_ref,
    .transpose = gdn_transpose_ref,
    .width = 1,
};

/* ==== Kernel selection and work split (shared with gdn_chunked.c) ==== */

const gdn_kernels *gdn_kernels_for(isa_level isa, const gdn_params *p) {
    EDDY_ASSERT(isa_available(isa));
    const gdn_kernels *kk = &gdn_kernels_ref;
    switch (isa) {
#if defined(__x86_64__)
    case ISA_AVX512: kk = &gdn_kernels_avx512; break;
    case ISA_AVX2: kk = &gdn_kernels_avx2; break;
#elif defined(__aarch64__)
    case ISA_NEON: kk = &gdn_kernels_neon; break;
#endif
    default: break;
    }
    return p->d_v % kk->width == 0 ? kk : &gdn_kernels_ref;
}

/* How many column blocks to cut each head into so that `units` (sequence, head)
 * pairs keep nth threads busy: 1 when there are at least 2 units per thread,
 * otherwise up to d_v / 32 blocks (each a multiple of the kernel width). */
int64_t gdn_column_blocks(const gdn_params *p, const gdn_kernels *kk, int64_t units, int nth) {
    int64_t ncb = 1;
    while (units * ncb < 2 * nth && p->d_v / (ncb * 2) >= 32 && (p->d_v / (ncb * 2)) % kk->width == 0) ncb *= 2;
    return ncb;
}

static void column_range(const gdn_params *p, int64_t ncb, int64_t cb, int64_t *j0, int64_t *j1) {
    int64_t w = p->d_v / ncb;
    *j0 = cb * w;
    *j1 = cb == ncb - 1 ? p->d_v : *j0 + w;
}

static int threads_for(threadpool *pool, int64_t units, double floats_per_unit) {
    int n = pool_size(pool);
    if ((double)units * floats_per_unit < 32768.0) return 1;
    return units < n ? (int)units : n;
}

/* ==== Decode step and verify ==== */

typedef struct {
    const gdn_kernels *kk;
    const gdn_params *p;
    int64_t n_seq, T, ncb;
    const gdn_rows *rows;
    float *state;
    const int64_t *slot;
    float *const *snap;  /* the state after each row, or NULL */
    threadpool *pool;
    uint8_t *work;       /* outputs only: each part runs the state in its own buffer (NULL: pool_scratch) */
    bool outputs_only;
} step_job;

/* Units (sequence, head, column block), each token by token through head_step: the
 * decode step (T = 1) and the replay (T > 1) in place on the slot; a verify from the
 * slot, which it only reads, into the snapshots or, outputs only, a buffer of one
 * head's state. The same head_step calls in the same order in every mode, so their
 * outputs and states agree bit for bit. */
static void step_task(void *ctx, int ith, int nth) {
    const step_job *j = ctx;
    const gdn_params *p = j->p;
    const int64_t H = p->n_v_heads, dk = p->d_k, dv = p->d_v, head = dk * dv;
    float *buf = NULL;
    if (j->outputs_only)
        buf = j->work ? (float *)(j->work + (size_t)ith * gdn_verify_scratch_size(p)) : pool_scratch(j->pool, ith);
    int64_t b, e;
    pool_split(j->n_seq * H * j->ncb, ith, nth, &b, &e);
    for (int64_t u = b; u < e; u++) {
        int64_t s = u / (H * j->ncb), h = u / j->ncb % H, j0, j1;
        column_range(p, j->ncb, u % j->ncb, &j0, &j1);
        int64_t kh = gdn_key_head(p, h);
        float *live = j->state + (j->slot ? j->slot[s] : s) * gdn_state_floats(p) + h * head;
        for (int64_t t = 0; t < j->T; t++) {
            gdn_rows r = rows_at(j->rows, s * j->T + t);
            const float *S_in;
            float *S_out;
            if (buf) {
                S_in = t == 0 ? live : buf, S_out = buf;
            } else if (j->snap) {
                S_in = t == 0 ? live : j->snap[s * j->T + t - 1] + h * head;
                S_out = j->snap[s * j->T + t] + h * head;
            } else {
                S_in = S_out = live;
            }
            j->kk->head_step(r.q + kh * dk, r.k + kh * dk, r.v + h * dv, r.g[h], r.beta[h], p->scale, S_in, S_out, dk,
                             dv, j0, j1, r.o + h * dv);
        }
    }
}

static void run_steps(isa_level isa, threadpool *pool, const gdn_params *p, int64_t n_seq, int64_t T,
                      const gdn_rows *rows, float *state, const int64_t *slot, float *const *snap, bool outputs_only,
                      void *work) {
    check_params(p);
    if (T <= 0 || n_seq <= 0) return;
    const gdn_kernels *kk = gdn_kernels_for(isa, p);
    int nth = threads_for(pool, n_seq * p->n_v_heads, (double)p->d_k * p->d_v * T);
    step_job j = {kk,   p,    n_seq, T,    gdn_column_blocks(p, kk, n_seq * p->n_v_heads, nth),
                  rows, state, slot, snap, pool, work, outputs_only};
    EDDY_ASSERT(!outputs_only || work || pool_scratch_size(pool) >= gdn_verify_scratch_size(p));
    pool_run(pool, step_task, &j, nth);
}

void gdn_step_isa(isa_level isa, threadpool *pool, const gdn_params *p, int64_t n_seq, const gdn_rows *rows,
                  float *state, const int64_t *slot) {
    run_steps(isa, pool, p, n_seq, 1, rows, state, slot, NULL, false, NULL);
}

void gdn_verify_isa(isa_level isa, threadpool *pool, const gdn_params *p, int64_t n_seq, int64_t T,
                    const gdn_rows *rows, const float *state, const int64_t *slot, float *const *snap) {
    EDDY_ASSERT(snap != NULL);
    /* with snapshots the live slots are only read (step_task writes to snap) */
    run_steps(isa, pool, p, n_seq, T, rows, (float *)state, slot, snap, false, NULL);
}

size_t gdn_verify_scratch_size(const gdn_params *p) {
    return ((size_t)gdn_state_floats(p) / (size_t)p->n_v_heads * sizeof(float) + 63) / 64 * 64;
}

void gdn_verify_outputs_isa(isa_level isa, threadpool *pool, const gdn_params *p, int64_t n_seq, int64_t T,
                            const gdn_rows *rows, const float *state, const int64_t *slot, void *scratch) {
    run_steps(isa, pool, p, n_seq, T, rows, (float *)state, slot, NULL, true, scratch);
}

void gdn_replay_isa(isa_level isa, threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows,
                    float *state) {
    run_steps(isa, pool, p, 1, T, rows, state, NULL, NULL, false, NULL);
}

/* ==== Sequential scan ==== */

typedef struct {
    const gdn_kernels *kk;
    const gdn_params *p;
    int64_t T, ncb;
    const gdn_rows *rows;
    float *state;
} scan_job;

static void scan_task(void *ctx, int ith, int nth) {
    const scan_job *j = ctx;
    const gdn_params *p = j->p;
    const int64_t dk = p->d_k, dv = p->d_v;
    int64_t b, e;
    pool_split(p->n_v_heads * j->ncb, ith, nth, &b, &e);
    for (int64_t u = b; u < e; u++) {
        int64_t h = u / j->ncb, kh = gdn_key_head(p, h), j0, j1;
        column_range(p, j->ncb, u % j->ncb, &j0, &j1);
        gdn_rows r = *j->rows;
        r.q += kh * dk, r.k += kh * dk, r.v += h * dv, r.g += h, r.beta += h, r.o += h * dv;
        j->kk->head_scan(&r, j->T, p->scale, j->state + h * dk * dv, dk, dv, j0, j1);
    }
}

void gdn_scan_isa(isa_level isa, threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows,
                  float *state) {
    check_params(p);
    if (T <= 0) return;
    const gdn_kernels *kk = gdn_kernels_for(isa, p);
    int nth = threads_for(pool, p->n_v_heads, (double)p->d_k * p->d_v * T);
    scan_job j = {kk, p, T, gdn_column_blocks(p, kk, p->n_v_heads, nth), rows, state};
    pool_run(pool, scan_task, &j, nth);
}

/* ==== Dispatch ==== */

void gdn_step(threadpool *pool, const gdn_params *p, int64_t n_seq, const gdn_rows *rows, float *state,
              const int64_t *slot) {
    gdn_step_isa(isa_active(), pool, p, n_seq, rows, state, slot);
}

void gdn_scan(threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows, float *state) {
    gdn_scan_isa(isa_active(), pool, p, T, rows, state);
}

void gdn_verify(threadpool *pool, const gdn_params *p, int64_t n_seq, int64_t T, const gdn_rows *rows,
                const float *state, const int64_t *slot, float *const *snap) {
    gdn_verify_isa(isa_active(), pool, p, n_seq, T, rows, state, slot, snap);
}

void gdn_verify_outputs(threadpool *pool, const gdn_params *p, int64_t n_seq, int64_t T, const gdn_rows *rows,
                        const float *state, const int64_t *slot, void *scratch) {
    gdn_verify_outputs_isa(isa_active(), pool, p, n_seq, T, rows, state, slot, scratch);
}

void gdn_replay(threadpool *pool, const gdn_params *p, int64_t T, const gdn_rows *rows, float *state) {
    gdn_replay_isa(isa_active(), pool, p, T, rows, state);
}
