/*
 * test_quant_simd.c — every ISA variant of the dot kernels (quant/qdot.h) and of the
 * activation quantizers against the scalar references, and the matrix product
 * (ops/matmul.h) against matmul_ref. Variants the CPU lacks are skipped; under
 * EDDY_FORCE_REF=1 only "ref" is available, which these tests then check against
 * itself (bit for bit).
 *
 * Error bound of a kernel against vec_dot_ref (u = 2^-24, nb blocks in the row):
 *   Both compute the same integer block sums exactly; they differ only in how the
 *   per-block float terms (scale product times integer sum, plus offset terms) are
 *   rounded and in the order they are added. Each side's float error is at most
 *   (nb + 8) * u * M, where M = sum_i mag_i * |a_i| bounds the sum of the terms'
 *   magnitudes (mag_i = |w_i| for scale-only types, |w_i| + 2 |w0_i| where an offset
 *   can cancel the scaled quant; w0 = the row with zero quants), so
 *     |fast - ref| <= 2 (nb + 8) u M + (nb + 8) 2^-140   (the last for underflow).
 *   Float weights: ref accumulates in double; a kernel in float32 lanes (>= 8 of them),
 *   so |fast - ref| <= (n / 8 + 16) u sum |w_i a_i| + 2^-140 n.
 */
#include "test.h"
#include "test_blocks.h"

#include <float.h>
#include <stdlib.h>

#include "base/threadpool.h"
#include "ops/matmul.h"
#if defined(__x86_64__)
#include "ops/matmul_amx.h"
#endif
#include "quant/qpack.h"
#include "base/alloc.h"
#include "base/isa.h"
#include "quant/qdot.h"

/* ==== Rows ==== */

static const qtype all_types[] = {QTYPE_F32,  QTYPE_F16,    QTYPE_BF16, QTYPE_Q4_0, QTYPE_Q4_1,
                                  QTYPE_Q5_0, QTYPE_Q5_1,   QTYPE_Q8_0, QTYPE_IQ4_NL, QTYPE_Q2_K,
                                  QTYPE_Q3_K, QTYPE_Q4_K,   QTYPE_Q5_K, QTYPE_Q6_K, QTYPE_IQ4_XS};
enum { N_TYPES = sizeof all_types / sizeof all_types[0] };

static bool is_float_type(qtype t) { return t == QTYPE_F32 || t == QTYPE_F16 || t == QTYPE_BF16; }

static size_t row_bytes(qtype t, int64_t n) {
    size_t b = 0;
    if (!qtype_row_bytes(t, n, &b)) b = 0;
    return b;
}

/* A random weight row. Block types: random bytes (every quant and sub-block scale
 * pattern), fp16 scales of random sign with exponents in [-8, 2], or with `extreme`
 * in [-24, 15] (fp16 subnormals up to near the largest finite). Float types:
 * normal(0, 1) times 2^[-2, 2], or 2^[-30, 30] with `extreme`. */
static void rand_weights(test_rng *r, qtype t, void *w, int64_t n, bool extreme) {
    if (is_float_type(t)) {
        for (int64_t i = 0; i < n; i++) {
            int e = extreme ? (int)test_rng_uniform(r, -30, 30) : (int)test_rng_uniform(r, -2, 2);
            float v = ldexpf(test_rng_normal(r), e);
            if (t == QTYPE_F32) ((float *)w)[i] = v;
            if (t == QTYPE_F16) ((uint16_t *)w)[i] = f32_to_fp16(extreme ? ldexpf(v, -16) : v);
            if (t == QTYPE_BF16) ((uint16_t *)w)[i] = f32_to_bf16(v);
        }
        return;
    }
    const qtype_traits *tr = qtype_info(t);
    uint8_t *p = w;
    size_t bytes = row_bytes(t, n);
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)test_rng_u64(r);
    for (int64_t b = 0; b < n / tr->block_size; b++) {
        for (const int *f = test_fp16_fields(t); *f >= 0; f++) {
            int e = extreme ? (int)test_rng_uniform(r, -24, 15.99f) : (int)test_rng_uniform(r, -8, 2);
            float s = ldexpf(test_rng_uniform(r, 1.0f, 1.99f), e);
            if (test_rng_below(r, 2)) s = -s;
            uint16_t h = f32_to_fp16(s);
            memcpy(p + b * tr->type_size + *f, &h, 2);
        }
    }
}

/* The row with every quant zeroed, dequantized: the offset part of each weight (the
 * m of Q4_1/Q5_1, -dmin*m of Q2_K/Q4_K/Q5_K); false for types without offsets. */
static bool offset_part(qtype t, const void *w, int64_t n, float *w0) {
    const qtype_traits *tr = qtype_info(t);
    size_t bytes = row_bytes(t, n);
    uint8_t *z = malloc(bytes + 1);
    memcpy(z, w, bytes);
    bool has = true;
    for (int64_t b = 0; b < n / tr->block_size && has; b++) {
        uint8_t *blk = z + b * tr->type_size;
        switch (t) {
        case QTYPE_Q4_1: memset(((block_q4_1 *)blk)->qs, 0, QK4_1 / 2); break;
        case QTYPE_Q5_1:
            memset(((block_q5_1 *)blk)->qs, 0, QK5_1 / 2);
            memset(((block_q5_1 *)blk)->qh, 0, 4);
            break;
        case QTYPE_Q2_K: memset(((block_q2_K *)blk)->qs, 0, QK_K / 4); break;
        case QTYPE_Q4_K: memset(((block_q4_K *)blk)->qs, 0, QK_K / 2); break;
        case QTYPE_Q5_K:
            memset(((block_q5_K *)blk)->qs, 0, QK_K / 2);
            memset(((block_q5_K *)blk)->qh, 0, QK_K / 8);
            break;
        default: has = false;
        }
    }
    if (has) dequantize_row_ref(t, z, w0, n);
    free(z);
    return has;
}

/* A random activation row of n floats, in blocks of `block`: per block one of zeros,
 * a single spike, all elements of one magnitude with the signs of the weights wd
 * (quants at +-127: the largest integer sums), or normal(0, 1); each block scaled by
 * 2^e, e uniform in [elo, ehi]. */
static void rand_acts(test_rng *r, float *x, const float *wd, int64_t n, int block, float elo, float ehi) {
    for (int64_t b = 0; b < n / block; b++) {
        float s = ldexpf(1.0f, (int)test_rng_uniform(r, elo, ehi));
        uint32_t kind = test_rng_below(r, 10);
        for (int j = 0; j < block; j++) {
            int64_t i = b * block + j;
            float v = test_rng_normal(r) * s;
            if (kind == 0) v = 0.0f;
            if (kind == 1) v = j == block / 3 ? s : 0.0f;
            if (kind == 2 || kind == 3) v = wd[i] < 0 ? -s : s;
            x[i] = v;
        }
    }
}

/* The tolerance for one dot product (see the top of the file). */
static double dot_tolerance(qtype t, int64_t n, const float *wd, const float *w0, bool has_off, const float *ad) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double mag = fabs((double)wd[i]) + (has_off ? 2 * fabs((double)w0[i]) : 0);
        m += mag * fabs((double)ad[i]);
    }
    if (is_float_type(t)) return ((double)n / 8 + 16) * 0x1p-24 * m + 0x1p-140 * (double)(n + 1);
    double nb = (double)(n / qtype_info(t)->block_size);
    return 2 * (nb + 8) * 0x1p-24 * m + (nb + 8) * 0x1p-140;
}

/* ==== Dot kernels ==== */

enum { NMAX = 33 * 32 + 256 * 5 };

typedef struct {
    uint8_t *w;       /* weight row, 64-byte aligned + 2 (or + 4 for F32) */
    uint8_t *act;     /* QDOT_MAX_ACT activation rows at act_stride */
    size_t act_stride;
    float *wd, *w0, *x, *ad;
    bool has_off;
} dot_case;

static void case_alloc(dot_case *dc) {
    /* 8-byte aligned buffers; rows start at small offsets into them */
    dc->w = (uint8_t *)malloc(NMAX * 4 + 64);
    dc->act = (uint8_t *)malloc(QDOT_MAX_ACT * (NMAX * 4 + 64));
    dc->wd = malloc(NMAX * sizeof(float));
    dc->w0 = malloc(NMAX * sizeof(float));
    dc->x = malloc(NMAX * sizeof(float));
    dc->ad = malloc(QDOT_MAX_ACT * NMAX * sizeof(float));
}

static void case_free(dot_case *dc) {
    free(dc->w), free(dc->act), free(dc->wd), free(dc->w0), free(dc->x), free(dc->ad);
}

/* Fills a case: weight row at w + woff, activation rows (quantized with the _ref) at
 * act_stride; returns the weight row pointer. */
static const void *case_fill(test_rng *r, dot_case *dc, qtype t, int64_t n, bool extreme) {
    qtype at = quant_dot_type(t);
    uint8_t *w = dc->w + (t == QTYPE_F32 ? 4 : 2);
    rand_weights(r, t, w, n, extreme);
    dequantize_row_ref(t, w, dc->wd, n);
    dc->has_off = offset_part(t, w, n, dc->w0);
    dc->act_stride = (row_bytes(at, n) + 7) / 8 * 8 + 4; /* 4-byte aligned, not 8 */
    int block = at == QTYPE_F32 ? 1 : (int)qtype_info(at)->block_size;
    float elo = -4, ehi = 4;
    if (extreme) elo = at == QTYPE_Q8_0 ? -30 : -60, ehi = at == QTYPE_Q8_0 ? 20 : 60;
    for (int c = 0; c < QDOT_MAX_ACT; c++) {
        rand_acts(r, dc->x, dc->wd, n, block, elo, ehi);
        quantize_row_ref(at, dc->x, dc->act + c * dc->act_stride, n);
        dequantize_row_ref(at, dc->act + c * dc->act_stride, dc->ad + c * NMAX, n);
    }
    return w;
}

static const int64_t lens_f[] = {1, 7, 16, 31, 33, 100, 1000};
static const int64_t nb_32[] = {1, 2, 3, 7, 33};
static const int64_t nb_256[] = {1, 2, 3, 5};

static int case_lengths(qtype t, int64_t *out) {
    int64_t bs = qtype_info(t)->block_size;
    int k = 0;
    if (bs == 1)
        for (size_t i = 0; i < sizeof lens_f / sizeof lens_f[0]; i++) out[k++] = lens_f[i];
    else if (bs == 32)
        for (size_t i = 0; i < sizeof nb_32 / sizeof nb_32[0]; i++) out[k++] = 32 * nb_32[i];
    else
        for (size_t i = 0; i < sizeof nb_256 / sizeof nb_256[0]; i++) out[k++] = 256 * nb_256[i];
    return k;
}

TEST(qdot_kernels_match_ref) {
    test_rng r = test_rng_new();
    int nv;
    const qdot_variant *v = qdot_variants(&nv);
    dot_case dc;
    case_alloc(&dc);
    for (int ti = 0; ti < N_TYPES; ti++) {
        qtype t = all_types[ti];
        int64_t lens[8];
        int nl = case_lengths(t, lens);
        for (int li = 0; li < nl; li++) {
            int64_t n = lens[li];
            for (int rep = 0; rep < 4; rep++) {
                const void *w = case_fill(&r, &dc, t, n, rep >= 2);
                float ref[QDOT_MAX_ACT];
                double tol[QDOT_MAX_ACT];
                for (int c = 0; c < QDOT_MAX_ACT; c++) {
                    ref[c] = vec_dot_ref(t, n, w, dc.act + c * dc.act_stride);
                    tol[c] = dot_tolerance(t, n, dc.wd, dc.w0, dc.has_off, dc.ad + c * NMAX);
                }
                for (int vi = 0; vi < nv; vi++) {
                    qdot_fn k = v[vi].available ? v[vi].kernel(t) : NULL;
                    if (!k) continue;
                    bool is_ref = !strcmp(v[vi].name, "ref");
                    for (int na = 1; na <= QDOT_MAX_ACT; na++) {
                        float out[QDOT_MAX_ACT + 1];
                        for (int c = 0; c <= QDOT_MAX_ACT; c++) out[c] = -12345.0f;
                        k(n, w, dc.act, dc.act_stride, na, out);
                        CHECKF(out[na] == -12345.0f, "%s %s: wrote past n_act=%d", v[vi].name, qtype_name(t), na);
                        for (int c = 0; c < na; c++) {
                            double err = fabs((double)out[c] - (double)ref[c]);
                            bool ok = is_ref ? out[c] == ref[c] : err <= tol[c];
                            if (!CHECKF(ok, "%s %s n=%lld rep=%d n_act=%d row %d: got %.9g, ref %.9g, |diff| %.3g > tol %.3g",
                                        v[vi].name, qtype_name(t), (long long)n, rep, na, c, (double)out[c],
                                        (double)ref[c], err, tol[c]))
                                goto next_variant;
                        }
                    }
                next_variant:;
                }
                /* the dispatcher picks one of the variants checked above */
                float got = qdot(t, n, w, dc.act);
                CHECKF(fabs((double)got - (double)ref[0]) <= tol[0], "dispatch (%s) %s n=%lld: %.9g vs %.9g",
                       qdot_kernel_name(t), qtype_name(t), (long long)n, (double)got, (double)ref[0]);
            }
        }
    }
    case_free(&dc);
}

TEST(qdot_gemm4_matches_ref) {
    test_rng r = test_rng_new();
    int nv;
    const qdot_variant *v = qdot_variants(&nv);
    dot_case rows[4];
    for (int k = 0; k < 4; k++) case_alloc(&rows[k]);
    for (int ti = 0; ti < N_TYPES; ti++) {
        qtype t = all_types[ti];
        int64_t lens[8];
        int nl = case_lengths(t, lens);
        for (int li = 0; li < nl; li++) {
            int64_t n = lens[li];
            const size_t al = t == QTYPE_F32 ? 4 : 2; /* rows aligned as their type needs, not more */
            size_t rb = row_bytes(t, n) + al;
            uint8_t *wbuf = malloc(4 * rb + 8), *w = wbuf + al;
            for (int rep = 0; rep < 2; rep++) {
                /* four weight rows rb bytes apart; the activations of case 0 for all */
                for (int k = 0; k < 4; k++) {
                    const void *wk = case_fill(&r, &rows[k], t, n, rep == 1);
                    memcpy(w + k * rb, wk, row_bytes(t, n));
                }
                for (int vi = 0; vi < nv; vi++) {
                    qgemm4_fn g = v[vi].available && v[vi].gemm4 ? v[vi].gemm4(t) : NULL;
                    if (!g) continue;
                    for (int na = 1; na <= 4; na++) {
                        float out[17];
                        out[4 * 3 + na] = -5.0f; /* after the last output written */
                        g(n, w, rb, rows[0].act, rows[0].act_stride, na, out);
                        if (na < 4) CHECK(out[4 * 3 + na] == -5.0f);
                        for (int k = 0; k < 4; k++)
                            for (int c = 0; c < na; c++) {
                                const uint8_t *ac = rows[0].act + c * rows[0].act_stride;
                                float ref = vec_dot_ref(t, n, w + k * rb, ac);
                                double tol = dot_tolerance(t, n, rows[k].wd, rows[k].w0, rows[k].has_off,
                                                           rows[0].ad + c * NMAX);
                                CHECKF(fabs((double)out[4 * k + c] - ref) <= tol,
                                       "%s %s gemm4 n=%lld rep=%d n_act=%d row %d act %d: %.9g vs ref %.9g, tol %.3g",
                                       v[vi].name, qtype_name(t), (long long)n, rep, na, k, c,
                                       (double)out[4 * k + c], (double)ref, tol);
                            }
                    }
                }
            }
            free(wbuf);
        }
    }
    for (int k = 0; k < 4; k++) case_free(&rows[k]);
}

TEST(qdot_zero_length_and_zero_acts) {
    int nv;
    const qdot_variant *v = qdot_variants(&nv);
    static uint64_t w[1024], a[4 * 1024];
    memset(a, 0, sizeof a);
    test_rng r = test_rng_new();
    for (int ti = 0; ti < N_TYPES; ti++) {
        qtype t = all_types[ti];
        int64_t n = qtype_info(t)->block_size == 1 ? 300 : 512;
        rand_weights(&r, t, w, n, false);
        for (int vi = 0; vi < nv; vi++) {
            qdot_fn k = v[vi].available ? v[vi].kernel(t) : NULL;
            if (!k) continue;
            float out[4] = {1, 1, 1, 1};
            k(0, w, a, 0, 4, out);
            for (int c = 0; c < 4; c++) CHECKF(out[c] == 0.0f, "%s %s n=0", v[vi].name, qtype_name(t));
            k(n, w, a, 2048, 4, out);
            for (int c = 0; c < 4; c++) CHECKF(out[c] == 0.0f, "%s %s zero acts: %g", v[vi].name, qtype_name(t), (double)out[c]);
        }
    }
}

/* ==== Activation quantization ==== */

/* Rows that stress the rounding: ordinary values over a wide range, exact ties
 * (amax = 127 makes the scale 1, so k + 0.5 stays a tie), zeros and -0, NaN and
 * inf, FLT_MAX, subnormals. */
static void rand_quant_input(test_rng *r, float *x, int64_t n, int block) {
    for (int64_t b = 0; b < n / block; b++) {
        float *y = x + b * block;
        uint32_t kind = test_rng_below(r, 8);
        float s = ldexpf(1.0f, (int)test_rng_uniform(r, -40, 40));
        for (int j = 0; j < block; j++) {
            float v = test_rng_normal(r) * s;
            switch (kind) {
            case 0: v = (float)((int)test_rng_below(r, 254) - 127) + 0.5f; break;
            case 1: v = j % 2 ? -0.0f : 0.0f; break;
            case 2: v = test_rng_below(r, 4) == 0 ? ldexpf(test_rng_normal(r), -140) : v; break;
            case 3: v = j == 5 ? NAN : j == 9 ? INFINITY : j == 11 ? -INFINITY : v; break;
            case 4: v = j == 2 ? FLT_MAX : j == 3 ? -FLT_MAX : v; break;
            case 5: v = ldexpf(test_rng_normal(r), -135); break; /* all subnormal */
            default: break;
            }
            y[j] = v;
        }
        if (kind == 0) y[test_rng_below(r, (uint32_t)block)] = test_rng_below(r, 2) ? 127.0f : -127.0f;
    }
}

TEST(qdot_quantize_bit_identical) {
    test_rng r = test_rng_new();
    int nv;
    const qdot_variant *v = qdot_variants(&nv);
    enum { N = 256 * 12 };
    float *x = malloc(N * sizeof(float));
    uint8_t *want = malloc(N * 2), *got = malloc(N * 2);
    for (int rep = 0; rep < 24; rep++) {
        bool k_type = rep % 2;
        qtype at = k_type ? QTYPE_Q8_K : QTYPE_Q8_0;
        int64_t n = k_type ? 256 * (1 + rep % 12) : 32 * (1 + 5 * (rep / 2));
        rand_quant_input(&r, x, n, k_type ? 256 : 32);
        size_t bytes = row_bytes(at, n);
        quantize_row_ref(at, x, want, n);
        for (int vi = 0; vi < nv; vi++) {
            qquant_fn q = v[vi].available ? (k_type ? v[vi].q8_K : v[vi].q8_0) : NULL;
            if (!q) continue;
            memset(got, 0xa5, bytes + 8);
            q(x, got, n);
            size_t first = bytes;
            for (size_t i = 0; i < bytes && first == bytes; i++)
                if (got[i] != want[i]) first = i;
            CHECKF(first == bytes, "%s %s n=%lld: first differing byte %zu (block %zu)", v[vi].name, qtype_name(at),
                   (long long)n, first, first / qtype_info(at)->type_size);
            CHECKF(got[bytes] == 0xa5, "%s %s wrote past the row", v[vi].name, qtype_name(at));
        }
        /* the dispatched quantizer too */
        quantize_row_act(at, x, got, n);
        CHECK(memcmp(got, want, bytes) == 0);
    }
    free(x);
    free(want);
    free(got);
}

/* ==== Matrix product ==== */

typedef struct {
    int64_t n_in, n_out, n_tok;
} mm_shape;

/* Checks matmul against matmul_ref for one type and shape on `pool`, with padded
 * strides (x_stride = n_in + 3, y_stride = n_out + 2, weight rows 4 bytes apart
 * beyond their size). Tolerance per element as for one dot product. */
static void check_matmul(test_rng *r, threadpool *pool, qtype t, mm_shape s) {
    size_t rb = row_bytes(t, s.n_in) + 4;
    uint8_t *wbuf = malloc(rb * (size_t)s.n_out + 8);
    uint8_t *wdata = wbuf + (t == QTYPE_F32 ? 4 : 2);
    for (int64_t o = 0; o < s.n_out; o++) rand_weights(r, t, wdata + o * rb, s.n_in, false);
    matmul_weight w = {t, s.n_in, s.n_out, rb, wdata, NULL};
    const int64_t xs = s.n_in + 3, ys = s.n_out + 2;
    float *x = malloc(sizeof(float) * (size_t)(xs * s.n_tok + 1));
    for (int64_t i = 0; i < xs * s.n_tok; i++) x[i] = ldexpf(test_rng_normal(r), (int)test_rng_uniform(r, -4, 4));
    if (s.n_tok > 2) memset(x + xs, 0, sizeof(float) * (size_t)s.n_in); /* an all-zero token */
    float *y = malloc(sizeof(float) * (size_t)(ys * s.n_tok + 1)), *yr = malloc(sizeof(float) * (size_t)(ys * s.n_tok + 1));
    for (int64_t i = 0; i < ys * s.n_tok; i++) y[i] = yr[i] = -777.0f;
    size_t sb = matmul_scratch_bytes(&w, s.n_tok);
    uint8_t *scratch = malloc(sb + 1);
    matmul_ref(&w, x, xs, s.n_tok, yr, ys, scratch + 1, sb); /* misaligned scratch is fine */
    matmul(pool, &w, x, xs, s.n_tok, y, ys, scratch, sb);
    /* the same rows packed (where this CPU has a packed kernel for the type) */
    float *yp = malloc(sizeof(float) * (size_t)(ys * s.n_tok + 1));
    for (int64_t i = 0; i < ys * s.n_tok; i++) yp[i] = -777.0f;
    matmul_weight wp = w;
    const size_t pb = matmul_pack_bytes(&w);
    void *pbuf = pb ? eddy_malloc_aligned(pb, 64) : NULL;
    if (pb) {
        REQUIRE(pbuf);
        matmul_pack(&wp, pbuf);
        CHECK(wp.packed == pbuf && matmul_scratch_bytes(&wp, s.n_tok) == sb);
        matmul(pool, &wp, x, xs, s.n_tok, yp, ys, scratch + 1, sb);
    }

    /* dequantized rows for the tolerance */
    qtype at = quant_dot_type(t);
    float *wd = malloc(sizeof(float) * (size_t)s.n_in), *w0 = malloc(sizeof(float) * (size_t)s.n_in);
    float *ad = malloc(sizeof(float) * (size_t)(s.n_in * s.n_tok + 1));
    uint8_t *arow = malloc(row_bytes(at, s.n_in) + 8);
    for (int64_t k = 0; k < s.n_tok; k++) {
        quantize_row_ref(at, x + k * xs, arow, s.n_in);
        dequantize_row_ref(at, arow, ad + k * s.n_in, s.n_in);
    }
    bool exact = !strcmp(qdot_kernel_name(t), "ref");
    int bad = 0;
    /* rows the AMX tiles compute (bf16) have their own oracle in test_amx_matmul.c */
    int64_t o0 = 0;
#if defined(__x86_64__)
    if (matmul_amx_usable(&w, s.n_tok)) o0 = s.n_out / MATMUL_AMX_ROWS * MATMUL_AMX_ROWS;
#endif
    for (int64_t o = o0; o < s.n_out && bad < 3; o++) {
        dequantize_row_ref(t, wdata + o * rb, wd, s.n_in);
        bool off = offset_part(t, wdata + o * rb, s.n_in, w0);
        for (int64_t k = 0; k < s.n_tok && bad < 3; k++) {
            float want = yr[k * ys + o];
            double tol = dot_tolerance(t, s.n_in, wd, w0, off, ad + k * s.n_in);
            for (int p = 0; p < (pb ? 2 : 1); p++) {
                float got = p ? yp[k * ys + o] : y[k * ys + o];
                bool ok = exact ? got == want : fabs((double)got - (double)want) <= tol;
                if (!CHECKF(ok, "%s%s n_in=%lld n_out=%lld n_tok=%lld threads=%d: y[%lld][%lld] = %.9g, ref %.9g, tol %.3g",
                            qtype_name(t), p ? " packed" : "", (long long)s.n_in, (long long)s.n_out,
                            (long long)s.n_tok, pool_size(pool), (long long)k, (long long)o, (double)got, (double)want,
                            tol))
                    bad++;
            }
        }
    }
    /* the padding between rows of y is untouched */
    for (int64_t k = 0; k < s.n_tok; k++) CHECK(y[k * ys + s.n_out] == -777.0f && y[k * ys + s.n_out + 1] == -777.0f);
    for (int64_t k = 0; pb && k < s.n_tok; k++)
        CHECK(yp[k * ys + s.n_out] == -777.0f && yp[k * ys + s.n_out + 1] == -777.0f);
    free(yp), eddy_free_aligned(pbuf);
    free(wbuf), free(x), free(y), free(yr), free(scratch), free(wd), free(w0), free(ad), free(arow);
}

TEST(qmat_matches_ref_all_types) {
    test_rng r = test_rng_new();
    threadpool *pools[4];
    for (int i = 0; i < 4; i++) REQUIRE(pool_create(&pools[i], i + 1, NULL) == EDDY_OK);
    const int64_t toks[] = {1, 2, 3, 4, 5, 7, 17};
    const int64_t saved = matmul_min_work;
    matmul_min_work = 1; /* split even these small products over every thread */
    for (int ti = 0; ti < N_TYPES; ti++) {
        qtype t = all_types[ti];
        int64_t bs = qtype_info(t)->block_size;
        int64_t unit = bs == 1 ? 1 : bs;
        for (int k = 0; k < 7; k++) {
            /* n_in: one block, or a few (odd for float types); n_out: not a multiple of anything */
            int64_t n_in = k % 2 ? unit : (bs == 1 ? 67 : 3 * unit);
            int64_t n_out = k == 6 ? 1 : 5 + 8 * (k % 3);
            mm_shape s = {n_in, n_out, toks[k]};
            check_matmul(&r, pools[k % 4], t, s);
        }
    }
    matmul_min_work = saved;
    for (int i = 0; i < 4; i++) pool_destroy(pools[i]);
}

TEST(qmat_chunks_threads_and_many_tokens) {
    /* more rows than one prefill chunk per thread, and a token count that is not a
     * multiple of the tile */
    test_rng r = test_rng_new();
    threadpool *pool;
    REQUIRE(pool_create(&pool, 3, NULL) == EDDY_OK);
    check_matmul(&r, pool, QTYPE_Q8_0, (mm_shape){1024, 800, 6});
    check_matmul(&r, pool, QTYPE_Q4_K, (mm_shape){2048, 1000, 5});
    check_matmul(&r, pool, QTYPE_F16, (mm_shape){512, 2100, 3});
    check_matmul(&r, NULL, QTYPE_Q6_K, (mm_shape){256, 3, 9});
    /* packed formats: several token tiles and a partial one, groups of 16 and a partial
     * one, more groups than one L2 chunk, fewer groups than threads (tiles split) */
    check_matmul(&r, pool, QTYPE_Q8_0, (mm_shape){2048, 200, 19});
    check_matmul(&r, pool, QTYPE_Q4_0, (mm_shape){96, 33, 17});
    check_matmul(&r, pool, QTYPE_Q4_1, (mm_shape){4096, 70, 9});
    check_matmul(&r, pool, QTYPE_Q4_K, (mm_shape){512, 17, 25});
    check_matmul(&r, pool, QTYPE_Q6_K, (mm_shape){768, 40, 33});
    check_matmul(&r, pool, QTYPE_Q6_K, (mm_shape){4096, 100, 1});
    check_matmul(&r, pool, QTYPE_IQ4_NL, (mm_shape){256, 21, 11});
    check_matmul(&r, pool, QTYPE_Q5_0, (mm_shape){320, 18, 9});
    check_matmul(&r, pool, QTYPE_Q5_1, (mm_shape){160, 35, 10});
    check_matmul(&r, pool, QTYPE_Q5_K, (mm_shape){768, 19, 12});
    check_matmul(&r, pool, QTYPE_IQ4_XS, (mm_shape){512, 33, 9});
    check_matmul(&r, pool, QTYPE_F16, (mm_shape){96, 37, 11});
    check_matmul(&r, pool, QTYPE_BF16, (mm_shape){1024, 50, 1});
    check_matmul(&r, pool, QTYPE_BF16, (mm_shape){320, 19, 21});
    pool_destroy(pool);
}

/* matmul_many: 3 weights of one type (n_out 40, 7, 16) plus, in a second call, one of
 * another type (unfused fallback), against matmul on each; packed where the CPU has a
 * packed kernel, so the fused pass gives exactly what the separate passes give. */
TEST(qmat_many_matches_separate) {
    test_rng r = test_rng_new();
    threadpool *pool;
    REQUIRE(pool_create(&pool, 2, NULL) == EDDY_OK);
    const int64_t saved = matmul_min_work;
    matmul_min_work = 1;
    static const qtype types[] = {QTYPE_Q8_0, QTYPE_Q4_1, QTYPE_Q4_K, QTYPE_Q6_K, QTYPE_F16};
    const int64_t n_in = 768, outs[] = {576, 7, 192, 9};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        for (int64_t n_tok = 1; n_tok <= 17; n_tok += 8) {
            matmul_weight w[4];
            const matmul_weight *wp[4];
            uint8_t *wbuf[4];
            void *pbuf[4] = {NULL, NULL, NULL, NULL};
            float *y[4], *ys[4];
            int64_t yst[4];
            size_t sb = 0;
            for (int i = 0; i < 4; i++) {
                const qtype t = i < 3 ? types[ti] : types[(ti + 1) % 5];
                const size_t rb = row_bytes(t, n_in);
                wbuf[i] = eddy_malloc_aligned(rb * (size_t)outs[i], 64);
                for (int64_t o = 0; o < outs[i]; o++) rand_weights(&r, t, wbuf[i] + o * rb, n_in, false);
                REQUIRE(matmul_weight_init(&w[i], t, n_in, outs[i], wbuf[i]));
                const size_t pb = matmul_pack_bytes(&w[i]);
                if (pb) {
                    pbuf[i] = eddy_malloc_aligned(pb, 64);
                    matmul_pack(&w[i], pbuf[i]);
                }
                wp[i] = &w[i];
                yst[i] = outs[i];
                y[i] = malloc(sizeof(float) * (size_t)(outs[i] * n_tok));
                ys[i] = malloc(sizeof(float) * (size_t)(outs[i] * n_tok));
                const size_t b = matmul_scratch_bytes(&w[i], n_tok);
                if (b > sb) sb = b;
            }
            float *x = malloc(sizeof(float) * (size_t)(n_in * n_tok));
            for (int64_t i = 0; i < n_in * n_tok; i++) x[i] = test_rng_normal(&r);
            uint8_t *scratch = malloc(sb);
            matmul_many(pool, wp, 3, x, n_in, n_tok, y, yst, scratch, sb);
            matmul_many(pool, wp + 2, 2, x, n_in, n_tok, y + 2, yst + 2, scratch, sb); /* mixed: one at a time */
            for (int i = 0; i < 4; i++) matmul(pool, &w[i], x, n_in, n_tok, ys[i], yst[i], scratch, sb);
            for (int i = 0; i < 4; i++)
                CHECKF(memcmp(y[i], ys[i], sizeof(float) * (size_t)(outs[i] * n_tok)) == 0,
                       "%s weight %d n_tok=%lld: fused result differs", qtype_name(w[i].type), i, (long long)n_tok);
            for (int i = 0; i < 4; i++) eddy_free_aligned(wbuf[i]), eddy_free_aligned(pbuf[i]), free(y[i]), free(ys[i]);
            free(x), free(scratch);
        }
    }
    matmul_min_work = saved;
    pool_destroy(pool);
}

/* ==== Packed kernels ==== */

/* Sets every byte of the row that is not an fp16 scale to the largest quant pattern:
 * 0x7f for Q8_0 (q = 127, packed 255), 0xff for the others (every nibble, bit and crumb
 * set; K-quant sub-block scales at their largest too). */
static void max_quants(qtype t, void *w, int64_t n) {
    const qtype_traits *tr = qtype_info(t);
    uint8_t *p = w;
    for (int64_t b = 0; b < n / tr->block_size; b++) {
        uint8_t *blk = p + b * tr->type_size;
        uint8_t keep[4][2];
        const int *f0 = test_fp16_fields(t);
        int nf = 0;
        for (const int *f = f0; *f >= 0; f++, nf++) memcpy(keep[nf], blk + *f, 2);
        memset(blk, t == QTYPE_Q8_0 ? 0x7f : 0xff, tr->type_size);
        nf = 0;
        for (const int *f = f0; *f >= 0; f++, nf++) memcpy(blk + *f, keep[nf], 2);
    }
}

TEST(qpack_kernels_match_ref) {
    /* every packed format and SIMD kernel this CPU runs (AVX-512 VNNI, AVX2, NEON): the kernel and qpack_kernel_ref on the
     * same packed group and tile give identical floats, for 1..8 tokens, 1..16 rows and
     * 1, 2, 3 or 41 units; both write only y[t][r < nrows] */
    test_rng r = test_rng_new();
    static const qtype types[] = {QTYPE_Q8_0, QTYPE_Q4_0, QTYPE_Q4_1, QTYPE_Q4_K, QTYPE_Q6_K,
                                  QTYPE_IQ4_NL, QTYPE_Q5_0, QTYPE_Q5_1, QTYPE_Q5_K, QTYPE_IQ4_XS, QTYPE_Q3_K, QTYPE_Q2_K,
                                  QTYPE_F16, QTYPE_BF16};
    int tested = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const qtype t = types[ti];
        const qpack_format f = qpack_format_of(t);
        REQUIRE(f != QPACK_NONE);
        qpack_kernel_fn ks[2] = {NULL, NULL};
        const char *kn[2] = {"avx512", "avx2"};
#if defined(__x86_64__)
        if (isa_has(ISA_EXT_AVX512VNNI)) ks[0] = qpack_kernel_avx512(f);
        if (isa_available(ISA_AVX2)) ks[1] = qpack_kernel_avx2(f);
#elif defined(__aarch64__)
        kn[0] = "neon";
        if (isa_has(ISA_EXT_DOTPROD)) ks[0] = qpack_kernel_neon(f);
#endif
        if (!ks[0] && !ks[1]) continue;
        tested++;
        static const int units[] = {1, 2, 3, 41}; /* 41: rows longer than one L1 chunk of the AVX2 kernels */
        for (size_t ui = 0; ui < sizeof units / sizeof units[0]; ui++) {
            const int nu = units[ui];
            const int64_t n = nu * qpack_unit(f);
            const size_t rb = row_bytes(t, n);
            uint8_t *w = malloc(rb * QPACK_ROWS);
            /* nu == 3: every quant at its largest and a token's activations all +1 or all -1
             * (quants +127, or -127 / -128 as Q8_0 / Q8_K round them): the largest integer sums
             * the kernels' 16-bit partial sums must hold */
            for (int o = 0; o < QPACK_ROWS; o++) {
                rand_weights(&r, t, w + o * rb, n, nu == 2);
                if (nu == 3 && !is_float_type(t)) max_quants(t, w + o * rb, n);
            }
            uint8_t *g = eddy_malloc_aligned(qpack_weight_bytes(f, n, QPACK_ROWS), 64);
            const qtype at = quant_dot_type(t);
            const size_t as = row_bytes(at, n) + 4;
            uint8_t *act = malloc(as * QPACK_TOK);
            float *x = malloc(sizeof(float) * (size_t)n);
            for (int c = 0; c < QPACK_TOK; c++) {
                for (int64_t i = 0; i < n; i++)
                    x[i] = nu == 3 ? (c % 2 ? -1.0f : 1.0f) : ldexpf(test_rng_normal(&r), (int)test_rng_uniform(&r, -6, 6));
                quantize_row_ref(at, x, act + c * as, n);
            }
            uint8_t *tile = eddy_malloc_aligned((size_t)nu * qpack_act_unit_bytes(f), 64);
            for (int nrows = 1; nrows <= QPACK_ROWS; nrows += nrows < 3 ? 1 : 6) {
                qpack_weights(f, w, rb, n, nrows, g);
                for (int nt = 1; nt <= QPACK_TOK; nt++) {
                    qpack_act_tile(f, act, as, nt, n, tile);
                    float yr[QPACK_TOK][QPACK_ROWS + 1];
                    for (int c = 0; c < QPACK_TOK; c++)
                        for (int o = 0; o <= QPACK_ROWS; o++) yr[c][o] = -777.0f;
                    qpack_kernel_ref(f, nu, g, tile, nt, &yr[0][0], QPACK_ROWS + 1, nrows);
                    for (int ki = 0; ki < 2; ki++) {
                    if (!ks[ki]) continue;
                    float y[QPACK_TOK][QPACK_ROWS + 1];
                    for (int c = 0; c < QPACK_TOK; c++)
                        for (int o = 0; o <= QPACK_ROWS; o++) y[c][o] = -777.0f;
                    ks[ki](nu, g, tile, nt, &y[0][0], QPACK_ROWS + 1, nrows);
                    int bad = 0;
                    for (int c = 0; c < QPACK_TOK && bad < 3; c++)
                        for (int o = 0; o <= QPACK_ROWS && bad < 3; o++) {
                            const bool written = c < nt && o < nrows;
                            const bool ok = memcmp(&y[c][o], &yr[c][o], sizeof(float)) == 0 &&
                                            (written || y[c][o] == -777.0f);
                            if (!CHECKF(ok, "%s %s units=%d rows=%d tokens=%d: y[%d][%d] = %.9g, ref %.9g", kn[ki],
                                        qtype_name(t), nu, nrows, nt, c, o, (double)y[c][o], (double)yr[c][o]))
                                bad++;
                        }
                    }
                }
            }
            free(w), free(act), free(x), eddy_free_aligned(g), eddy_free_aligned(tile);
        }
    }
    if (!tested) printf("  (no packed kernel on this CPU: nothing to compare)\n");
}

/* qpack_unpack_row undoes qpack_weights bit for bit, for every packed format: random
 * bytes (every bit of a block is a quant, a scale or a flag, so any bytes are a block),
 * 35 rows (a padded last group), 3 units, read back in every unit range. */
TEST(qpack_unpack_row_inverts_the_packing) {
    test_rng r = test_rng_new();
    for (int fi = QPACK_NONE + 1; fi < QPACK_COUNT; fi++) {
        const qpack_format f = (qpack_format)fi;
        const int64_t nu = 3, n = nu * qpack_unit(f), n_out = 35;
        const size_t bb = qpack_block_bytes(f), rb = bb * (size_t)nu;
        REQUIRE(bb > 0);
        uint8_t *w = malloc(rb * (size_t)n_out), *back = malloc(rb);
        for (size_t i = 0; i < rb * (size_t)n_out; i++) w[i] = (uint8_t)test_rng_uniform(&r, 0, 256);
        uint8_t *g = eddy_malloc_aligned(qpack_weight_bytes(f, n, n_out), 64);
        qpack_weights(f, w, rb, n, n_out, g);
        const size_t group_bytes = qpack_weight_bytes(f, n, QPACK_ROWS);
        int bad = 0;
        for (int64_t row = 0; row < n_out && bad < 3; row++)
            for (int64_t u0 = 0; u0 < nu; u0++)
                for (int64_t cnt = 1; u0 + cnt <= nu; cnt++) {
                    memset(back, 0xA5, rb);
                    qpack_unpack_row(f, g + (size_t)(row / QPACK_ROWS) * group_bytes, u0, cnt, (int)(row % QPACK_ROWS),
                                     back);
                    if (!CHECKF(memcmp(back, w + (size_t)row * rb + (size_t)u0 * bb, (size_t)cnt * bb) == 0,
                                "format %d row %lld units [%lld, %lld): not the original bytes", fi, (long long)row,
                                (long long)u0, (long long)(u0 + cnt)))
                        bad++;
                }
        free(w), free(back), eddy_free_aligned(g);
    }
}

TEST(qmat_empty_and_weight_init) {
    matmul_weight w;
    static uint16_t data[4096];
    CHECK(matmul_weight_init(&w, QTYPE_Q4_K, 512, 3, data));
    CHECK_EQ(w.row_bytes, 2 * sizeof(block_q4_K));
    CHECK(!matmul_weight_init(&w, QTYPE_Q4_K, 100, 3, data)); /* not a multiple of 256 */
    CHECK(!matmul_weight_init(&w, QTYPE_Q8_1, 32, 3, data));  /* unsupported */
    CHECK(!matmul_weight_init(&w, QTYPE_F32, 32, 3, (const char *)data + 2)); /* misaligned */
    CHECK(!matmul_weight_init(&w, QTYPE_F32, -1, 3, data));
    CHECK(matmul_weight_init(&w, QTYPE_Q8_0, 64, 0, data));
    float x[64] = {0}, y[4] = {5, 5, 5, 5};
    uint8_t scratch[1024];
    CHECK(matmul_scratch_bytes(&w, 2) <= sizeof scratch);
    matmul(NULL, &w, x, 64, 2, y, 0, scratch, sizeof scratch); /* no rows: nothing written */
    CHECK(y[0] == 5);
    CHECK(matmul_weight_init(&w, QTYPE_Q8_0, 64, 4, data));
    matmul(NULL, &w, x, 64, 0, y, 4, scratch, sizeof scratch); /* no tokens */
    CHECK(y[0] == 5);
    CHECK(matmul_scratch_bytes(&w, INT64_MAX / 2) == SIZE_MAX);
}
