/*
 * attention_simd_body.h — internal: the attention unit kernel (attention.h,
 * attn_unit) written once over a thin vector-macro layer. attention_avx512.c,
 * attention_avx2.c and attention_neon.c each define the layer and include this
 * file, which then defines the kernel ATTN_KERNEL_NAME. Head dims are multiples of
 * VW (the dispatcher checks), so vector loads never need a tail.
 *
 * The layer: V (vector type), VW (floats per vector), V_ZERO(), V_SET1(x),
 * V_LOAD(p), V_STORE(p, v), V_LOAD_H(p) (VW halves -> floats, exact),
 * V_FMA(a, b, c) = a*b + c, V_MUL(a, b), V_ADD(a, b), V_SUB(a, b), V_MAX(a, b),
 * V_EXP(v), V_HSUM(v), V_HMAX(v), transpose_store(V r[VW], dst, ldd) (column c of
 * the VW x VW tile r to dst + c * ldd). SC_RB: query rows per score pass; PV_RB x
 * PV_NV: rows x vectors of output accumulators per value pass.
 *
 * Per block of ATTN_KB keys (KB_NV = ATTN_KB / VW vectors):
 *   1. the key rows are converted to f32 and transposed into kt (head_dim_k, KB), so
 *      that scores become outer-product updates acc[r] += q[r][d] * kt[d] (no
 *      horizontal sums); f16 values are widened as step 4 loads them when one pass
 *      of PV_RB rows covers the unit (decode), else converted into vb once;
 *   2. scores p[r] = acc[r] * scale, keys a row must not see set to -inf;
 *   3. online softmax per row: m' = max(m, max p[r]); o and l scaled by
 *      exp(m - m') when the max grew; p[r] = exp(p[r] - m'); l += sum p[r];
 *   4. o[r] += sum_j p[r][j] v[j], each value row loaded once for PV_RB rows.
 * Per chunk of ATTN_CHUNK keys (m, l, o) start afresh and are then folded into the
 * row's state with attn_fold (or handed to attention.c as a partial).
 * Every row shares the block's key and value rows, so a KV head's rows are read
 * once per unit whatever the group size.
 */

#include <math.h>
#include <string.h>

#include "ops/attention.h"
#include "quant/fp16.h"

#define AI static inline __attribute__((always_inline))
#define KB_NV (ATTN_KB / VW)

_Static_assert(ATTN_KB % VW == 0 && ATTN_CHUNK % ATTN_KB == 0, "blocks are whole vectors, chunks whole blocks");
_Static_assert(PV_RB == 4 && (SC_RB == 4 || SC_RB == 8), "the row cases of score_block and pv_block");

/* ==== Loading a block ==== */

/* kt[d][jj] = key (jb + jj), dim d, in f32; rows jj >= nk are zero. HALF, FULL
 * (nk == ATTN_KB) are constants in each instance. */
AI void load_keys_as(const bool HALF, const bool FULL, const attn_unit *u, int64_t jb, int64_t nk, float *kt) {
    const attn_args *a = u->a;
    const int64_t dk = u->s->head_dim_k, sk = a->sk;
    const int64_t first = attn_k_row(a, jb) + u->hk * dk; /* element index of key jb's slice; the
                                                            * block's keys are in one KV block */
    const uint16_t *kh = (const uint16_t *)a->k + first;
    const float *kf = (const float *)a->k + first;
    for (int64_t j0 = 0; j0 < ATTN_KB; j0 += VW)
        for (int64_t d0 = 0; d0 < dk; d0 += VW) {
            V r[VW];
#pragma GCC unroll 16
            for (int i = 0; i < VW; i++) {
                const int64_t e = (j0 + i) * sk + d0;
                if (!FULL && j0 + i >= nk) r[i] = V_ZERO();
                else r[i] = HALF ? V_LOAD_H(kh + e) : V_LOAD(kf + e);
            }
            transpose_store(r, kt + d0 * ATTN_KB + j0, ATTN_KB);
        }
}

/* Element offset of the unit's KV head's part of the tile of keys from jb (k_tiled):
 * (dk, ATTN_KB), the layout of kt. */
AI int64_t tile_at(const attn_unit *u, int64_t jb) {
    return attn_k_row(u->a, jb) + u->hk * u->s->head_dim_k * ATTN_KB;
}

/* The same from a tiled cache (attn_args.k_tiled): the tile's rows are kt already, but
 * in the cache's type. */
AI void load_tile_as(const bool HALF, const attn_unit *u, int64_t jb, int64_t nk, float *kt) {
    const attn_args *a = u->a;
    const int64_t dk = u->s->head_dim_k, first = tile_at(u, jb);
    const uint16_t *kh = (const uint16_t *)a->k + first;
    const float *kf = (const float *)a->k + first;
    if (nk == ATTN_KB) {
        for (int64_t i = 0; i < dk * ATTN_KB; i += VW) V_STORE(kt + i, HALF ? V_LOAD_H(kh + i) : V_LOAD(kf + i));
        return;
    }
    for (int64_t d = 0; d < dk; d++) /* the rows past nk hold what the tile held before */
        for (int64_t jj = 0; jj < ATTN_KB; jj++)
            kt[d * ATTN_KB + jj] = jj >= nk ? 0.0f : HALF ? fp16_to_f32(kh[d * ATTN_KB + jj]) : kf[d * ATTN_KB + jj];
}

static void load_keys(const attn_unit *u, int64_t jb, int64_t nk, float *kt) {
    const bool half = u->a->type_k == QTYPE_F16, full = nk == ATTN_KB;
    if (u->a->k_tiled) {
        if (half) load_tile_as(true, u, jb, nk, kt);
        else load_tile_as(false, u, jb, nk, kt);
    } else if (half && full) load_keys_as(true, true, u, jb, nk, kt);
    else if (half) load_keys_as(true, false, u, jb, nk, kt);
    else if (full) load_keys_as(false, true, u, jb, nk, kt);
    else load_keys_as(false, false, u, jb, nk, kt);
}

/* The value rows of keys [jb, jb + nk): a pointer into the cache (f32) or vb (f16). */
AI const float *load_values(const attn_unit *u, int64_t jb, int64_t nk, float *vb, int64_t *stride) {
    const attn_args *a = u->a;
    const int64_t dv = u->s->head_dim_v, off = u->hk * dv;
    if (a->type_v != QTYPE_F16) {
        *stride = a->sv;
        return (const float *)a->v + attn_v_row(a, jb) + off;
    }
    for (int64_t j = 0; j < nk; j++) {
        const uint16_t *src = (const uint16_t *)a->v + attn_v_row(a, jb) + j * a->sv + off;
        for (int64_t d = 0; d < dv; d += VW) V_STORE(vb + j * dv + d, V_LOAD_H(src + d));
    }
    *stride = dv;
    return vb;
}

/* ==== Scores ==== */

/* p[r][jj] = scale * q_r . k_(jb + jj) for NR rows starting at r0; kt (dk, ATTN_KB) in
 * f32, or in f16 (KH: a tile of the cache, widened here). */
AI void score_rows(const int NR, const attn_unit *u, int64_t r0, const void *kt, float *p, const bool KH) {
    const attn_shape *s = u->s;
    const int64_t group = s->n_head / s->n_head_kv, dk = s->head_dim_k;
    const float *q[SC_RB];
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++) {
        const int64_t rr = r0 + r, t = u->t0 + rr / group, h = u->hk * group + rr % group;
        q[r] = u->a->q + t * u->a->sq + h * dk;
    }
    V acc[SC_RB][KB_NV];
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 4
        for (int c = 0; c < KB_NV; c++) acc[r][c] = V_ZERO();
    for (int64_t d = 0; d < dk; d++) {
        V k[KB_NV];
#pragma GCC unroll 4
        for (int c = 0; c < KB_NV; c++)
            k[c] = KH ? V_LOAD_H((const uint16_t *)kt + d * ATTN_KB + c * VW) : V_LOAD((const float *)kt + d * ATTN_KB + c * VW);
#pragma GCC unroll 8
        for (int r = 0; r < NR; r++) {
            V qd = V_SET1(q[r][d]);
#pragma GCC unroll 4
            for (int c = 0; c < KB_NV; c++) acc[r][c] = V_FMA(qd, k[c], acc[r][c]);
        }
    }
    V sc = V_SET1(s->scale);
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 4
        for (int c = 0; c < KB_NV; c++) V_STORE(p + (r0 + r) * ATTN_KB + c * VW, V_MUL(acc[r][c], sc));
}

/* ==== Output accumulation ==== */

/* o[r][d0 .. d0 + NV VW) += sum_jj p[r][jj] v[jj][...] for NR rows from r0; value
 * row jj at v + jj * sv elements, f16 (HALF) or f32. */
AI void pv_tile(const int NR, const int NV, int64_t r0, int64_t d0, const float *p, const void *v, int64_t sv,
                int64_t nk, float *o, int64_t dv, const bool HALF) {
    const uint16_t *vh = v;
    const float *vf = v;
    V acc[PV_RB][PV_NV];
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 8
        for (int c = 0; c < NV; c++) acc[r][c] = V_LOAD(o + (r0 + r) * dv + d0 + c * VW);
    for (int64_t j = 0; j < nk; j++) {
        V x[PV_NV];
#pragma GCC unroll 8
        for (int c = 0; c < NV; c++) x[c] = HALF ? V_LOAD_H(vh + j * sv + d0 + c * VW) : V_LOAD(vf + j * sv + d0 + c * VW);
#pragma GCC unroll 8
        for (int r = 0; r < NR; r++) {
            V pj = V_SET1(p[(r0 + r) * ATTN_KB + j]);
#pragma GCC unroll 8
            for (int c = 0; c < NV; c++) acc[r][c] = V_FMA(pj, x[c], acc[r][c]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 8
        for (int c = 0; c < NV; c++) V_STORE(o + (r0 + r) * dv + d0 + c * VW, acc[r][c]);
}

/* The row count is a constant in each call below, so each tile keeps its
 * accumulators in registers. SC_RB is 4 or 8, PV_RB 4. */
#define SCORE_CASES(KH)                                     \
    switch (rows - r0 < SC_RB ? rows - r0 : SC_RB) {        \
    case 1: score_rows(1, u, r0, kt, p, KH); break;         \
    case 2: score_rows(2, u, r0, kt, p, KH); break;         \
    case 3: score_rows(3, u, r0, kt, p, KH); break;         \
    case 4: score_rows(4, u, r0, kt, p, KH); break;         \
    SCORE_CASES_8(KH)                                       \
    default: break;                                         \
    }
#if SC_RB > 4
#define SCORE_CASES_8(KH)                                   \
    case 5: score_rows(5, u, r0, kt, p, KH); break;         \
    case 6: score_rows(6, u, r0, kt, p, KH); break;         \
    case 7: score_rows(7, u, r0, kt, p, KH); break;         \
    case 8: score_rows(8, u, r0, kt, p, KH); break;
#else
#define SCORE_CASES_8(KH)
#endif
static void score_block(const attn_unit *u, int64_t rows, const void *kt, bool kh, float *p) {
    for (int64_t r0 = 0; r0 < rows; r0 += SC_RB) {
        if (kh) SCORE_CASES(true)
        else SCORE_CASES(false)
    }
}
#undef SCORE_CASES
#undef SCORE_CASES_8

/* Output columns in tiles of PV_NV vectors, then single vectors. */
AI void pv_rows(const int NR, int64_t r0, const float *p, const void *v, int64_t sv, int64_t nk, float *o,
                int64_t dv, const bool HALF) {
    int64_t d0 = 0;
    for (; d0 + PV_NV * VW <= dv; d0 += PV_NV * VW) pv_tile(NR, PV_NV, r0, d0, p, v, sv, nk, o, dv, HALF);
    for (; d0 < dv; d0 += VW) pv_tile(NR, 1, r0, d0, p, v, sv, nk, o, dv, HALF);
}

/* half: v holds f16 rows, widened as they are loaded (else f32 rows). */
static void pv_block(int64_t rows, const float *p, const void *v, int64_t sv, int64_t nk, float *o, int64_t dv,
                     bool half) {
    for (int64_t r0 = 0; r0 < rows; r0 += PV_RB) {
        const int64_t nr = rows - r0 < PV_RB ? rows - r0 : PV_RB;
        if (half) {
            switch (nr) {
            case 1: pv_rows(1, r0, p, v, sv, nk, o, dv, true); break;
            case 2: pv_rows(2, r0, p, v, sv, nk, o, dv, true); break;
            case 3: pv_rows(3, r0, p, v, sv, nk, o, dv, true); break;
            case 4: pv_rows(4, r0, p, v, sv, nk, o, dv, true); break;
            default: break;
            }
        } else {
            switch (nr) {
            case 1: pv_rows(1, r0, p, v, sv, nk, o, dv, false); break;
            case 2: pv_rows(2, r0, p, v, sv, nk, o, dv, false); break;
            case 3: pv_rows(3, r0, p, v, sv, nk, o, dv, false); break;
            case 4: pv_rows(4, r0, p, v, sv, nk, o, dv, false); break;
            default: break;
            }
        }
    }
}

/* ==== Online softmax ==== */

/* Row r of the block: mask the keys it must not see (lim: its last visible key, as
 * an index into the block; nk: keys in the block), fold the block into m, l, o. */
static void softmax_row(float *p, int64_t lim, int64_t nk, float *m, float *l, float *o, int64_t dv) {
    const int64_t end = lim + 1 < nk ? lim + 1 : nk;
    for (int64_t j = end < 0 ? 0 : end; j < ATTN_KB; j++) p[j] = -INFINITY;
    V mx = V_LOAD(p);
#pragma GCC unroll 4
    for (int c = 1; c < KB_NV; c++) mx = V_MAX(mx, V_LOAD(p + c * VW));
    const float bm = V_HMAX(mx), m_old = *m, m_new = bm > m_old ? bm : m_old;
    if (m_new == -INFINITY) { /* no visible key yet: nothing to add */
        memset(p, 0, ATTN_KB * sizeof(float));
        return;
    }
    if (m_new > m_old && m_old != -INFINITY) {
        const float corr = expf(m_old - m_new);
        *l *= corr;
        V vc = V_SET1(corr);
        for (int64_t d = 0; d < dv; d += VW) V_STORE(o + d, V_MUL(V_LOAD(o + d), vc));
    }
    V vm = V_SET1(m_new), sum = V_ZERO();
#pragma GCC unroll 4
    for (int c = 0; c < KB_NV; c++) {
        V e = V_EXP(V_SUB(V_LOAD(p + c * VW), vm));
        V_STORE(p + c * VW, e);
        sum = V_ADD(sum, e);
    }
    *l += V_HSUM(sum);
    *m = m_new;
}

/* ==== The unit ==== */

static void attn_unit_kernel(const attn_unit *u, float *work) {
    const attn_shape *s = u->s;
    const attn_args *a = u->a;
    const int64_t group = s->n_head / s->n_head_kv, dv = s->head_dim_v, rows = u->nt * group;
    attn_work w = attn_work_carve(s, rows, work);
    for (int64_t r = 0; r < rows; r++) w.fm[r] = -INFINITY, w.fl[r] = 0.0f;
    memset(w.fo, 0, (size_t)(rows * dv) * sizeof(float));

    for (int64_t c0 = u->j0; c0 < u->j1; c0 += ATTN_CHUNK) {
        const int64_t c1 = u->j1 - c0 < ATTN_CHUNK ? u->j1 : c0 + ATTN_CHUNK;
        for (int64_t r = 0; r < rows; r++) w.m[r] = -INFINITY, w.l[r] = 0.0f;
        memset(w.o, 0, (size_t)(rows * dv) * sizeof(float));
        for (int64_t jb = c0; jb < c1; jb += ATTN_KB) {
            const int64_t nk = c1 - jb < ATTN_KB ? c1 - jb : ATTN_KB;
            /* a whole tile of a tiled cache is kt already (f16: widened as the scores read it
             * when one or two score passes cover the rows, a decode's or a verify's; more
             * passes, a prefill's, widen it once, into kt) */
            const void *kt = w.kt;
            bool kh = false;
            if (a->k_tiled && nk == ATTN_KB && (a->type_k != QTYPE_F16 || rows <= 2 * SC_RB)) {
                const int64_t at = tile_at(u, jb);
                kh = a->type_k == QTYPE_F16;
                kt = kh ? (const void *)((const uint16_t *)a->k + at) : (const void *)((const float *)a->k + at);
            } else {
                load_keys(u, jb, nk, w.kt);
            }
            /* f16 values: read directly when one pass of PV_RB rows covers the unit, else converted once */
            const bool direct = a->type_v == QTYPE_F16 && rows <= PV_RB;
            int64_t sv = a->sv;
            const void *v = direct ? (const void *)((const uint16_t *)a->v + attn_v_row(a, jb) + u->hk * dv)
                                   : load_values(u, jb, nk, w.vb, &sv);
            score_block(u, rows, kt, kh, w.p);
            for (int64_t r = 0; r < rows; r++) {
                const int64_t lim = a->pos0 + u->t0 + r / group - jb; /* last visible key, block-relative */
                softmax_row(w.p + r * ATTN_KB, lim, nk, &w.m[r], &w.l[r], w.o + r * dv, dv);
            }
            pv_block(rows, w.p, v, sv, nk, w.o, dv, direct);
        }
        for (int64_t r = 0; r < rows; r++) {
            if (u->part) { /* one chunk: its partial, folded by attention.c */
                float *dst = u->part + r * (dv + 2);
                dst[0] = w.m[r], dst[1] = w.l[r];
                memcpy(dst + 2, w.o + r * dv, (size_t)dv * sizeof(float));
            } else {
                attn_fold(&w.fm[r], &w.fl[r], w.fo + r * dv, w.m[r], w.l[r], w.o + r * dv, dv);
            }
        }
    }
    if (u->part) return;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t t = u->t0 + r / group, h = u->hk * group + r % group;
        attn_finish(a->out + t * a->so + h * dv, w.fo + r * dv, w.fl[r], dv);
    }
}

const attn_kernel ATTN_KERNEL_NAME = {ATTN_KERNEL_ISA, VW, attn_unit_kernel};
