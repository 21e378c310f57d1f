/*
 * test_cuda_kernels.c — every CUDA kernel of src/cuda/ck.h against the CPU's scalar
 * oracle on random inputs of awkward shapes. Runs on a machine with an NVIDIA GPU
 * (build/cuda/eddy-cuda-tests, scripts/device_check.sh).
 *
 * Bounds: dequantization and embedding rows are bit-exact (same operations in the same
 * order); f16 dequantization equals the reference rounded to f16; products and
 * reductions sum in another order than the CPU: relative error (test_nmse, a squared
 * ratio) below 1e-10, i.e. about 1e-5 in norm.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "cuda/ck.h"
#include "model/engine.h"
#include "ops/attention.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "ops/vec.h"
#include "quant/fp16.h"
#include "quant/quant.h"
#include "ssm/gdn.h"
#include "ssm/mamba2.h"
#include "ssm/ssm.h"
#include "test.h"

#define NMSE_MAX 1e-10

static void *dev(const void *host, size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) return NULL;
    if (host) cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice);
    else cudaMemset(p, 0xff, bytes); /* poisoned: NaN floats where nothing was written */
    return p;
}

static void back(void *host, const void *d, size_t bytes) { cudaMemcpy(host, d, bytes, cudaMemcpyDeviceToHost); }

static bool ok_cuda(const char *what) {
    const char *e = ck_check(1);
    return CHECKF(!e, "%s: %s", what, e ? e : "");
}

static float *rand_floats(test_rng *r, int64_t n, float scale) {
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = scale * test_rng_normal(r);
    return x;
}

/* ==== Weights ==== */

/* Random rows of a type: random bytes, with every block's scales set to finite fp16. */
static uint8_t *rand_weights(test_rng *r, qtype t, int64_t n_in, int64_t n_rows, size_t *row_bytes) {
    const qtype_traits *tr = qtype_info(t);
    qtype_row_bytes(t, n_in, row_bytes);
    uint8_t *w = malloc(*row_bytes * (size_t)n_rows);
    for (size_t i = 0; i < *row_bytes * (size_t)n_rows; i++) w[i] = (uint8_t)test_rng_below(r, 256);
    if (t == QTYPE_F32 || t == QTYPE_F16 || t == QTYPE_BF16) {
        for (int64_t i = 0; i < n_in * n_rows; i++) {
            const float v = test_rng_normal(r);
            if (t == QTYPE_F32) ((float *)w)[i] = v;
            else if (t == QTYPE_F16) ((uint16_t *)w)[i] = f32_to_fp16(v);
            else ((uint16_t *)w)[i] = (uint16_t)(f32_to_bf16(v));
        }
        return w;
    }
    /* byte offsets of the fp16 scales in each block */
    int off[2] = {0, -1};
    switch (t) {
    case QTYPE_Q4_1: case QTYPE_Q5_1: case QTYPE_Q4_K: case QTYPE_Q5_K: off[1] = 2; break;
    case QTYPE_Q2_K: off[0] = 80, off[1] = 82; break;
    case QTYPE_Q3_K: off[0] = 108; break;
    case QTYPE_Q6_K: off[0] = 208; break;
    default: break;
    }
    const int64_t nb = n_in / tr->block_size * n_rows;
    for (int64_t b = 0; b < nb; b++)
        for (int k = 0; k < 2; k++) {
            if (off[k] < 0) continue;
            const uint16_t h = f32_to_fp16(test_rng_uniform(r, 0.001f, 0.02f) * (k ? -1.0f : 1.0f));
            memcpy(w + b * tr->type_size + off[k], &h, 2);
        }
    return w;
}

static const qtype weight_types[] = {QTYPE_F32,  QTYPE_F16,  QTYPE_BF16, QTYPE_Q4_0, QTYPE_Q4_1,
                                     QTYPE_Q5_0, QTYPE_Q5_1, QTYPE_Q8_0, QTYPE_Q2_K, QTYPE_Q3_K,
                                     QTYPE_Q4_K, QTYPE_Q5_K, QTYPE_Q6_K, QTYPE_IQ4_NL, QTYPE_IQ4_XS};

/* x (rows, n_in) as the integer products see it: quantized per 32 as quantize_row_q8_0_ref
 * does, and back */
static void as_8bit(float *x, int64_t rows, int64_t n_in) {
    block_q8_0 *xb = malloc((size_t)(n_in / 32) * sizeof *xb);
    for (int64_t a = 0; a < rows; a++) {
        quantize_row_q8_0_ref(x + a * n_in, xb, n_in);
        dequantize_row_ref(QTYPE_Q8_0, xb, x + a * n_in, n_in);
    }
    free(xb);
}

/* y (rows, n_out) = x (rows, n_in) w^T, summed in double */
static float *product_ref(const float *x, const float *w, int64_t rows, int64_t n_in, int64_t n_out) {
    float *y = malloc((size_t)(rows * n_out) * sizeof *y);
    for (int64_t a = 0; a < rows; a++)
        for (int64_t o = 0; o < n_out; o++) {
            double s = 0;
            for (int64_t i = 0; i < n_in; i++) s += (double)x[a * n_in + i] * w[o * n_in + i];
            y[a * n_out + o] = (float)s;
        }
    return y;
}

/* The outputs of three products whose parts are rows [cut[p], cut[p + 1]) of one matrix,
 * part p's (nt, its rows) at parts + nt cut[p], as one (nt, cut[3]) result y */
static void join_parts(float *y, const float *parts, const int64_t cut[4], int64_t nt) {
    const int64_t n_out = cut[3];
    for (int p = 0; p < 3; p++)
        for (int64_t a = 0; a < nt; a++)
            for (int64_t o = cut[p]; o < cut[p + 1]; o++)
                y[a * n_out + o] = parts[nt * cut[p] + a * (cut[p + 1] - cut[p]) + (o - cut[p])];
}

TEST(cuda_gemv_dequant_embed_match_ref) {
    test_rng r = test_rng_new();
    /* two widths: a row of a few items, and one long enough that several warps share it */
    for (size_t ti = 0; ti < 2 * (sizeof weight_types / sizeof weight_types[0]); ti++) {
        const qtype t = weight_types[ti / 2];
        const int64_t bs = qtype_info(t)->block_size;
        const int64_t n_in = ti % 2 == 0 ? (bs == 256 ? 256 * 3 : bs == 32 ? 32 * 7 : 100)
                                         : (bs == 256 ? 256 * 9 : bs == 32 ? 32 * 75 : 300),
                      n_out = 37;
        CHECKF(ck_type_supported(t, n_in), "%s", qtype_name(t));
        size_t rb;
        uint8_t *w = rand_weights(&r, t, n_in, n_out, &rb);
        float *ref = malloc((size_t)(n_in * n_out) * sizeof *ref);
        for (int64_t o = 0; o < n_out; o++) dequantize_row_ref(t, w + o * rb, ref + o * n_in, n_in);
        void *dw = dev(w, rb * (size_t)n_out);
        /* dequantization to f16: the reference rounded */
        uint16_t *h16 = malloc((size_t)(n_in * n_out) * 2), *dh = dev(NULL, (size_t)(n_in * n_out) * 2);
        ck_dequant_f16(t, dw, rb, n_in, n_out, dh, NULL);
        back(h16, dh, (size_t)(n_in * n_out) * 2);
        int64_t bad = 0;
        for (int64_t i = 0; i < n_in * n_out; i++) bad += h16[i] != f32_to_fp16(ref[i]);
        CHECKF(bad == 0, "%s: %lld f16 elements differ", qtype_name(t), (long long)bad);
        /* embedding rows: bit-exact */
        const int32_t tok[3] = {5, 0, 36};
        int32_t *dtok = dev(tok, sizeof tok);
        float *emb = malloc((size_t)(3 * n_in) * sizeof *emb), *demb = dev(NULL, (size_t)(3 * n_in) * sizeof *emb);
        ck_embed(t, dw, rb, n_in, dtok, 3, 1.0f, demb, NULL);
        back(emb, demb, (size_t)(3 * n_in) * sizeof *emb);
        for (int k = 0; k < 3; k++)
            CHECKF(!memcmp(emb + k * n_in, ref + tok[k] * n_in, (size_t)n_in * sizeof *emb), "%s: embedding row %d",
                   qtype_name(t), tok[k]);
        /* products for 1..8 rows (and 11: two passes): with the float activations (no
         * scratch), and with 8-bit ones where the type has the integer path, against x as
         * quantize_row_q8_0_ref leaves it */
        const int64_t toks[] = {1, 2, 3, 5, 8, 11};
        for (size_t k = 0; k < sizeof toks / sizeof toks[0]; k++)
            for (int q8 = 0; q8 < 1 + ck_gemv_integer(t); q8++) {
                const int64_t nt = toks[k];
                float *x = rand_floats(&r, nt * n_in, 1.0f), *y = malloc((size_t)(nt * n_out) * sizeof *y);
                if (k == 0) x[3] = 0.0f, x[5] = -x[7]; /* ties and zeros in the quantizer */
                if (q8) as_8bit(x, nt, n_in);
                float *yr = product_ref(x, ref, nt, n_in, n_out);
                float *dx = dev(x, (size_t)(nt * n_in) * sizeof *x), *dy = dev(NULL, (size_t)(nt * n_out) * sizeof *y);
                void *scratch = q8 ? dev(NULL, ck_gemv_scratch_bytes(n_in, nt)) : NULL;
                const int held = ck_gemv(t, dw, rb, n_in, n_out, dx, nt, dy, scratch, 0, NULL);
                CHECKF(held == (q8 && nt <= CK_GEMV_MAX_TOK), "%s, %lld rows: ck_gemv says the scratch %s x",
                       qtype_name(t), (long long)nt, held ? "holds" : "does not hold");
                /* the same rows as three parts of one launch: rows [0, 10), [10, 11), [11, 37) */
                float *dz = dev(NULL, (size_t)(nt * n_out) * sizeof *y);
                const int64_t cut[4] = {0, 10, 11, n_out};
                ck_gemv_part parts[3];
                for (int k2 = 0; k2 < 3; k2++)
                    parts[k2] = (ck_gemv_part){(uint8_t *)dw + cut[k2] * rb, rb, cut[k2 + 1] - cut[k2],
                                               dz + nt * cut[k2]};
                const int held3 = ck_gemv_parts(t, parts, 3, n_in, dx, nt, scratch, 0, NULL);
                if (ok_cuda("ck_gemv_parts")) {
                    float *z = malloc((size_t)(nt * n_out) * sizeof *z);
                    back(y, dz, (size_t)(nt * n_out) * sizeof *y);
                    join_parts(z, y, cut, nt);
                    const double e = test_nmse(z, yr, nt * n_out);
                    CHECKF(e < NMSE_MAX && held3 == held, "%s, %lld rows in three parts%s: nmse %g", qtype_name(t),
                           (long long)nt, q8 ? ", 8-bit activations" : "", e);
                    free(z);
                }
                cudaFree(dz);
                if (held) { /* again from the 8-bit x it left, with x itself gone */
                    cudaMemset(dy, 0xff, (size_t)(nt * n_out) * sizeof *y);
                    cudaMemset(dx, 0xff, (size_t)(nt * n_in) * sizeof *x);
                    ck_gemv(t, dw, rb, n_in, n_out, dx, nt, dy, scratch, 1, NULL);
                }
                if (ok_cuda("ck_gemv")) {
                    back(y, dy, (size_t)(nt * n_out) * sizeof *y);
                    const double e = test_nmse(y, yr, nt * n_out);
                    CHECKF(e < NMSE_MAX, "%s, %lld rows%s: nmse %g", qtype_name(t), (long long)nt,
                           q8 ? ", 8-bit activations" : "", e);
                }
                cudaFree(dx), cudaFree(dy), cudaFree(scratch);
                free(x), free(y), free(yr);
            }
        cudaFree(dw), cudaFree(dh), cudaFree(dtok), cudaFree(demb);
        free(w), free(ref), free(h16), free(emb);
    }
}

/* The integer products give the same bits whether a lane loads one item at a time or four
 * ahead (ck_gemv_set_depth), and match x W^T: rows wide enough that a lane takes more than
 * one group of four (5120 elements: 160 Q4_K/Q6_K pieces, 160 units), a row the
 * lanes share unevenly (1056: 33 units), and three parts in one launch. */
TEST(cuda_gemv_depths_agree) {
    test_rng r = test_rng_new();
    static const qtype types[] = {QTYPE_Q4_K, QTYPE_Q6_K, QTYPE_Q8_0, QTYPE_Q4_0, QTYPE_Q5_K};
    static const int64_t widths[] = {5120, 1056};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t wi = 0; wi < 2; wi++) {
            const qtype t = types[ti];
            const int64_t n_in = widths[wi], n_out = 21;
            if (n_in % qtype_info(t)->block_size) continue;
            size_t rb;
            uint8_t *w = rand_weights(&r, t, n_in, n_out, &rb);
            float *ref = malloc((size_t)(n_in * n_out) * sizeof *ref);
            for (int64_t o = 0; o < n_out; o++) dequantize_row_ref(t, w + o * rb, ref + o * n_in, n_in);
            void *dw = dev(w, rb * (size_t)n_out);
            for (int64_t nt = 1; nt <= 4; nt += 3) {
                float *x = rand_floats(&r, nt * n_in, 1.0f);
                as_8bit(x, nt, n_in);
                float *yr = product_ref(x, ref, nt, n_in, n_out);
                float *dx = dev(x, (size_t)(nt * n_in) * sizeof *x);
                void *scratch = dev(NULL, ck_gemv_scratch_bytes(n_in, nt));
                float *y[2], *dy[2];
                for (int k = 0; k < 2; k++) {
                    const int old = ck_gemv_set_depth(k == 0 ? 1 : 4);
                    y[k] = malloc((size_t)(nt * n_out) * sizeof *y[k]);
                    dy[k] = dev(NULL, (size_t)(nt * n_out) * sizeof *y[k]);
                    /* rows [0, 8), [8, 9), [9, 21) as three parts of one launch */
                    const int64_t cut[4] = {0, 8, 9, n_out};
                    ck_gemv_part parts[3];
                    for (int p = 0; p < 3; p++)
                        parts[p] = (ck_gemv_part){(uint8_t *)dw + cut[p] * rb, rb, cut[p + 1] - cut[p],
                                                  dy[k] + nt * cut[p]};
                    ck_gemv_parts(t, parts, 3, n_in, dx, nt, scratch, 0, NULL);
                    ck_gemv_set_depth(old);
                    ok_cuda("ck_gemv_parts");
                    float *part = malloc((size_t)(nt * n_out) * sizeof *part);
                    back(part, dy[k], (size_t)(nt * n_out) * sizeof *part);
                    join_parts(y[k], part, cut, nt);
                    free(part);
                }
                const double e = test_nmse(y[1], yr, nt * n_out);
                CHECKF(e < NMSE_MAX, "%s, %lld wide, %lld rows, depth 4: nmse %g", qtype_name(t), (long long)n_in,
                       (long long)nt, e);
                CHECKF(!memcmp(y[0], y[1], (size_t)(nt * n_out) * sizeof *y[0]),
                       "%s, %lld wide, %lld rows: depth 1 and depth 4 differ", qtype_name(t), (long long)n_in,
                       (long long)nt);
                for (int k = 0; k < 2; k++) free(y[k]), cudaFree(dy[k]);
                cudaFree(dx), cudaFree(scratch);
                free(x), free(yr);
            }
            cudaFree(dw);
            free(w), free(ref);
        }
}

/* Products of one x on Q6_K and Q4_K weights in one launch (ck_gemv_parts_mixed) give the
 * bits of each type's own launch (ck_gemv_parts): either type first, 1, 3 and 8 rows of x,
 * parts of 3 to 700 rows (one row of x splits a row over warps when the parts are small);
 * other types, 9 rows of x, and Q4_K rows not 16-byte aligned are refused. */
TEST(cuda_gemv_mixed_parts_match_separate) {
    test_rng r = test_rng_new();
    const int64_t n_in = 1280;
    for (int q6_first = 0; q6_first < 2; q6_first++)
        for (int big = 0; big < 2; big++) {
            const qtype ta = q6_first ? QTYPE_Q6_K : QTYPE_Q4_K, tb = q6_first ? QTYPE_Q4_K : QTYPE_Q6_K;
            const int na = q6_first ? 1 : 2, nb = q6_first ? 3 : 1;
            const int64_t rows[4] = {big ? 700 : 5, big ? 300 : 3, big ? 129 : 17, 9};
            ck_gemv_part parts[4], own[4];
            void *dw[4];
            size_t rb[4];
            float *dy[4], *dz[4];
            for (int k = 0; k < na + nb; k++) {
                uint8_t *w = rand_weights(&r, k < na ? ta : tb, n_in, rows[k], &rb[k]);
                dw[k] = dev(w, rb[k] * (size_t)rows[k]);
                free(w);
                dy[k] = dev(NULL, (size_t)(8 * rows[k]) * 4), dz[k] = dev(NULL, (size_t)(8 * rows[k]) * 4);
                parts[k] = (ck_gemv_part){dw[k], rb[k], rows[k], dy[k]};
                own[k] = (ck_gemv_part){dw[k], rb[k], rows[k], dz[k]};
            }
            for (int64_t nt = 1; nt <= 8; nt = nt == 1 ? 3 : nt + 5) {
                float *x = rand_floats(&r, nt * n_in, 1.0f), *dx = dev(x, (size_t)(nt * n_in) * 4);
                void *q8 = dev(NULL, ck_gemv_scratch_bytes(n_in, nt));
                const int held = ck_gemv_parts_mixed(ta, na, tb, parts, na + nb, n_in, dx, nt, q8, 0, NULL);
                ck_gemv_parts(ta, own, na, n_in, dx, nt, q8, 0, NULL);
                ck_gemv_parts(tb, own + na, nb, n_in, dx, nt, q8, 1, NULL);
                bool same = ok_cuda("mixed products") && held == 1;
                for (int k = 0; k < na + nb && same; k++) {
                    const size_t bytes = (size_t)(nt * rows[k]) * 4;
                    float *a = malloc(bytes), *b = malloc(bytes);
                    back(a, dy[k], bytes), back(b, dz[k], bytes);
                    same = !memcmp(a, b, bytes);
                    free(a), free(b);
                }
                CHECKF(same, "%s then %s, %s parts, %lld rows of x: the one launch differs (held %d)", qtype_name(ta),
                       qtype_name(tb), big ? "large" : "small", (long long)nt, held);
                cudaFree(dx), cudaFree(q8);
                free(x);
            }
            for (int k = 0; k < na + nb; k++) cudaFree(dw[k]), cudaFree(dy[k]), cudaFree(dz[k]);
        }
    /* refused: nothing launched */
    size_t rb;
    uint8_t *w = rand_weights(&r, QTYPE_Q4_K, n_in, 2, &rb);
    uint8_t *dw = dev(NULL, rb * 2 + 16);
    cudaMemcpy(dw + 2, w, rb * 2, cudaMemcpyHostToDevice);
    float *dx = dev(NULL, (size_t)(9 * n_in) * 4), *dy = dev(NULL, 9 * 2 * 4);
    void *q8 = dev(NULL, ck_gemv_scratch_bytes(n_in, 8));
    const ck_gemv_part two[2] = {{dw, rb, 1, dy}, {dw + 2, rb, 1, dy}};
    CHECK(ck_gemv_parts_mixed(QTYPE_Q8_0, 1, QTYPE_Q4_K, two, 2, n_in, dx, 1, q8, 0, NULL) == -1);
    CHECK(ck_gemv_parts_mixed(QTYPE_Q6_K, 1, QTYPE_Q4_K, two, 2, n_in, dx, 9, q8, 0, NULL) == -1);
    CHECK(ck_gemv_parts_mixed(QTYPE_Q6_K, 1, QTYPE_Q4_K, two, 2, n_in, dx, 1, q8, 0, NULL) == -1); /* Q4_K at +2 */
    CHECK(ck_gemv_parts_mixed(QTYPE_Q6_K, 1, QTYPE_Q4_K, two, 2, n_in, dx, 1, NULL, 0, NULL) == -1);
    CHECK(ok_cuda("refused mixed products"));
    cudaFree(dw), cudaFree(dx), cudaFree(dy), cudaFree(q8);
    free(w);
}

/* ==== Mixtures of experts ==== */

/* The routing on the GPU (ck_moe_route) picks moe_route_token's experts in its order, with
 * its weights: 1 to 9 tokens, 7 to 300 experts, 1 to 10 a token; equal logits (the lower
 * index first) and -inf ones (never before a finite one) among them. */
TEST(cuda_moe_route_matches_ref) {
    test_rng r = test_rng_new();
    static const int64_t shapes[][3] = {{1, 7, 1}, {5, 7, 7}, {9, 60, 4}, {3, 300, 10}, {8, 64, 8}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t n = shapes[si][0], X = shapes[si][1], k = shapes[si][2];
        float *l = rand_floats(&r, n * X, 2.0f), *p = malloc((size_t)(n * X) * sizeof *p);
        for (int64_t t = 0; t < n; t++) {
            l[t * X + X - 1] = l[t * X + X / 2]; /* a tie */
            if (t % 2 && X > k) l[t * X + (t * 7) % X] = -INFINITY;
        }
        memcpy(p, l, (size_t)(n * X) * sizeof *p);
        int32_t *sel = malloc((size_t)(n * k) * sizeof *sel), *gsel = malloc((size_t)(n * k) * sizeof *gsel);
        float *w = malloc((size_t)(n * k) * sizeof *w), *gw = malloc((size_t)(n * k) * sizeof *gw);
        for (int64_t t = 0; t < n; t++) moe_route_token(p + t * X, X, k, sel + t * k, w + t * k);
        float *dl = dev(l, (size_t)(n * X) * sizeof *l), *dw = dev(NULL, (size_t)(n * k) * sizeof *w);
        int32_t *ds = dev(NULL, (size_t)(n * k) * sizeof *sel);
        ck_moe_route(dl, n, X, k, ds, dw, NULL);
        if (ok_cuda("ck_moe_route")) {
            back(gsel, ds, (size_t)(n * k) * sizeof *gsel), back(gw, dw, (size_t)(n * k) * sizeof *gw);
            CHECKF(!memcmp(gsel, sel, (size_t)(n * k) * sizeof *sel), "%lld tokens of %lld experts, %lld each: "
                   "other experts (first %d, the CPU's %d)", (long long)n, (long long)X, (long long)k, gsel[0], sel[0]);
            const double e = test_nmse(gw, w, n * k);
            CHECKF(e < NMSE_MAX, "%lld tokens of %lld experts, %lld each: weights nmse %g", (long long)n, (long long)X,
                   (long long)k, e);
        }
        cudaFree(dl), cudaFree(dw), cudaFree(ds);
        free(l), free(p), free(sel), free(gsel), free(w), free(gw);
    }
}

/* X experts of n_out rows of type t, n_in wide, one after the other (a GGUF tensor of
 * experts): on the device, and dequantized into *ref (X n_out, n_in) */
static void *experts_dev(test_rng *r, qtype t, int64_t n_in, int64_t X, int64_t n_out, size_t *rb, float **ref) {
    uint8_t *w = rand_weights(r, t, n_in, X * n_out, rb);
    *ref = malloc((size_t)(X * n_out * n_in) * sizeof **ref);
    for (int64_t o = 0; o < X * n_out; o++) dequantize_row_ref(t, w + o * *rb, *ref + o * n_in, n_in);
    void *d = dev(w, *rb * (size_t)(X * n_out));
    free(w);
    return d;
}

/* (S, n_out): slot s's row of x (s / x_div) times its expert's matrix (sel[s]'s in ref) */
static float *experts_product_ref(const float *x, int64_t x_div, const float *ref, const int32_t *sel, int64_t S,
                                  int64_t n_in, int64_t n_out) {
    float *y = malloc((size_t)(S * n_out) * sizeof *y);
    for (int64_t s = 0; s < S; s++) {
        float *row = product_ref(x + s / x_div * n_in, ref + sel[s] * n_out * n_in, 1, n_in, n_out);
        memcpy(y + s * n_out, row, (size_t)n_out * sizeof *row);
        free(row);
    }
    return y;
}

/* The experts' products of each slot (ck_gemv_experts) match x W_e^T for its row of x and
 * its expert's matrix: gate and up of 3 tokens of 4 slots each (a row of x per 4 slots),
 * then down of the 12 slots (a row each), two parts in one launch; rows of 9 super-blocks
 * (several warps share a row) or of 7 units; the integer path (x quantized here, then
 * again from the form it left) and the float one; shapes that do not divide refused. */
TEST(cuda_gemv_experts_match_ref) {
    test_rng r = test_rng_new();
    static const qtype types[] = {QTYPE_Q4_K, QTYPE_Q6_K, QTYPE_Q8_0, QTYPE_Q4_0, QTYPE_F32, QTYPE_F16};
    const int64_t X = 5, n_out[2] = {37, 21}, n_tok = 3, k = 4, S = n_tok * k;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const qtype t = types[ti];
        const int64_t n_in = qtype_info(t)->block_size == 256 ? 256 * 9 : 32 * 7;
        size_t rb[2];
        float *ref[2];
        void *dwt[2];
        for (int p = 0; p < 2; p++) dwt[p] = experts_dev(&r, t, n_in, X, n_out[p], &rb[p], &ref[p]);
        int32_t sel[12];
        for (int64_t s = 0; s < S; s++) sel[s] = (int32_t)test_rng_below(&r, X);
        sel[1] = sel[0]; /* one token's two slots on one expert */
        int32_t *dsel = dev(sel, sizeof sel);
        for (int64_t n_x = n_tok; n_x <= S; n_x += S - n_tok)
            for (int q8 = 0; q8 < 1 + ck_gemv_integer(t); q8++) {
                float *x = rand_floats(&r, n_x * n_in, 1.0f);
                if (q8) as_8bit(x, n_x, n_in);
                float *dx = dev(x, (size_t)(n_x * n_in) * sizeof *x);
                void *scratch = q8 ? dev(NULL, ck_gemv_experts_scratch_bytes(n_in, n_x)) : NULL;
                float *dy[2];
                ck_gemv_part parts[2];
                for (int p = 0; p < 2; p++) {
                    dy[p] = dev(NULL, (size_t)(S * n_out[p]) * sizeof(float));
                    parts[p] = (ck_gemv_part){dwt[p], rb[p], n_out[p], dy[p]};
                }
                for (int again = 0; again < 1 + q8; again++) {
                    if (again) /* from the 8-bit form the first call left, x itself gone */
                        cudaMemset(dx, 0xff, (size_t)(n_x * n_in) * sizeof *x);
                    const int held = ck_gemv_experts(t, parts, 2, n_in, dx, n_x, dsel, S, scratch, again, NULL);
                    if (!ok_cuda("ck_gemv_experts")) continue;
                    CHECKF(held == q8, "%s: ck_gemv_experts says the scratch %s x", qtype_name(t),
                           held ? "holds" : "does not hold");
                    for (int p = 0; p < 2; p++) {
                        float *y = malloc((size_t)(S * n_out[p]) * sizeof *y);
                        float *yr = experts_product_ref(x, S / n_x, ref[p], sel, S, n_in, n_out[p]);
                        back(y, dy[p], (size_t)(S * n_out[p]) * sizeof *y);
                        const double e = test_nmse(y, yr, S * n_out[p]);
                        CHECKF(e < NMSE_MAX, "%s, %lld rows of x for %lld slots, part %d%s%s: nmse %g", qtype_name(t),
                               (long long)n_x, (long long)S, p, q8 ? ", 8-bit activations" : "",
                               again ? ", x ready" : "", e);
                        free(y), free(yr);
                    }
                }
                for (int p = 0; p < 2; p++) cudaFree(dy[p]);
                cudaFree(dx), cudaFree(scratch);
                free(x);
            }
        const ck_gemv_part one = {dwt[0], rb[0], n_out[0], NULL};
        CHECK(ck_gemv_experts(t, &one, 1, n_in, NULL, 5, dsel, S, NULL, 0, NULL) == -1);
        CHECK(ck_gemv_experts(t, &one, 0, n_in, NULL, n_tok, dsel, S, NULL, 0, NULL) == -1);
        cudaFree(dsel);
        for (int p = 0; p < 2; p++) cudaFree(dwt[p]), free(ref[p]);
    }
}

/* ck_moe_combine: each token's slots weighted and summed, in the order of its slots, their
 * outputs in slot order or at the rows pos gives (reversed here) */
TEST(cuda_moe_combine_matches_ref) {
    test_rng r = test_rng_new();
    const int64_t n = 3, k = 5, E = 77;
    float *out = rand_floats(&r, n * k * E, 1.0f), *w = rand_floats(&r, n * k, 0.5f);
    int32_t pos[15];
    for (int64_t s = 0; s < n * k; s++) pos[s] = (int32_t)(n * k - 1 - s);
    int32_t *dpos = dev(pos, sizeof pos);
    float *dout = dev(out, (size_t)(n * k * E) * sizeof *out), *dw = dev(w, (size_t)(n * k) * sizeof *w);
    float *dy = dev(NULL, (size_t)(n * E) * sizeof(float));
    for (int perm = 0; perm < 2; perm++) {
        float *y = malloc((size_t)(n * E) * sizeof *y), *yr = calloc((size_t)(n * E), sizeof *yr);
        for (int64_t t = 0; t < n; t++)
            for (int64_t j = 0; j < k; j++)
                for (int64_t c = 0; c < E; c++)
                    yr[t * E + c] += w[t * k + j] * out[(perm ? pos[t * k + j] : t * k + j) * E + c];
        ck_moe_combine(dy, dout, dw, perm ? dpos : NULL, n, k, E, NULL);
        if (ok_cuda("ck_moe_combine")) {
            back(y, dy, (size_t)(n * E) * sizeof *y);
            CHECKF(test_nmse(y, yr, n * E) < NMSE_MAX, "rows %s: nmse %g", perm ? "by pos" : "in slot order",
                   test_nmse(y, yr, n * E));
        }
        free(y), free(yr);
    }
    cudaFree(dout), cudaFree(dw), cudaFree(dy), cudaFree(dpos);
    free(out), free(w);
}

/* A prefill's slots grouped by expert on the GPU (ck_moe_group, ck_gather_slots) and their
 * products on the tensor cores (ck_mmq_experts): every slot has its own row, each expert's
 * rows start at a multiple of 8 and its tiles cover them (an expert of 70 slots takes two,
 * one of none takes none), the padding rows are zeros, and each slot's row of each part
 * is x W_e^T for its token's x (as the integer products see it) and its expert's matrix;
 * two parts of 37 and 21 rows, rows of 2 super-blocks or 5 units. */
TEST(cuda_mmq_experts_match_ref) {
    test_rng r = test_rng_new();
    static const qtype types[] = {QTYPE_Q4_K, QTYPE_Q6_K, QTYPE_Q8_0, QTYPE_Q4_0};
    const int64_t X = 6, k = 3, n = 40, S = n * k, n_out[2] = {37, 21};
    const int64_t rows = ck_moe_rows(S, X), tiles_max = ck_moe_tiles(S, X);
    int32_t sel[120];
    for (int64_t s = 0; s < S; s++) sel[s] = s < 70 ? 2 : (int32_t)test_rng_below(&r, X - 1); /* X - 1: none */
    int32_t *dsel = dev(sel, sizeof sel), *dpos = dev(NULL, sizeof sel), *dsrc = dev(NULL, (size_t)rows * 4);
    int32_t *dnt = dev(NULL, 4);
    ck_moe_tile *dtiles = dev(NULL, (size_t)tiles_max * sizeof(ck_moe_tile));
    ck_moe_group(dsel, S, X, dpos, dsrc, dtiles, dnt, NULL);
    int32_t pos[120], nt = 0, *src = malloc((size_t)rows * sizeof *src);
    ck_moe_tile *tiles = malloc((size_t)tiles_max * sizeof *tiles);
    back(pos, dpos, sizeof pos), back(src, dsrc, (size_t)rows * sizeof *src), back(&nt, dnt, 4);
    back(tiles, dtiles, (size_t)tiles_max * sizeof *tiles);
    REQUIRE(ok_cuda("ck_moe_group") && nt > 0 && nt <= tiles_max);
    int64_t covered[120] = {0}, bad = 0;
    for (int64_t s = 0; s < S; s++) bad += pos[s] < 0 || pos[s] >= rows || src[pos[s]] != s;
    for (int32_t t = 0; t < nt; t++) {
        bad += tiles[t].row % 8 != 0 || tiles[t].n < 1 || tiles[t].n > CK_MMQ_TOK;
        for (int32_t i = 0; i < tiles[t].n && tiles[t].row + i < rows; i++) {
            const int32_t s = src[tiles[t].row + i];
            bad += s < 0 || sel[s] != tiles[t].expert;
            if (s >= 0) covered[s]++;
        }
    }
    for (int64_t s = 0; s < S; s++) bad += covered[s] != 1;
    CHECKF(bad == 0 && nt == 1 + (X - 1), "%lld slots misplaced; %d tiles", (long long)bad, nt);
    float *x = rand_floats(&r, n * 512, 1.0f);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const qtype t = types[ti];
        const int64_t n_in = qtype_info(t)->block_size == 256 ? 512 : 160;
        float *xq = malloc((size_t)(n * n_in) * sizeof *xq);
        memcpy(xq, x, (size_t)(n * n_in) * sizeof *xq);
        as_8bit(xq, n, n_in);
        float *dx = dev(x, (size_t)(n * n_in) * sizeof *x), *dg = dev(NULL, (size_t)(rows * n_in) * sizeof(float));
        ck_gather_slots(dg, dx, dsrc, k, rows, n_in, NULL);
        float *g = malloc((size_t)(rows * n_in) * sizeof *g);
        back(g, dg, (size_t)(rows * n_in) * sizeof *g);
        int64_t wrong = 0;
        for (int64_t row = 0; row < rows; row++)
            for (int64_t i = 0; i < n_in; i++)
                wrong += g[row * n_in + i] != (src[row] >= 0 ? x[src[row] / k * n_in + i] : 0.0f);
        CHECKF(wrong == 0, "%s: %lld gathered elements wrong", qtype_name(t), (long long)wrong);
        ck_gemv_part parts[2];
        float *ref[2];
        size_t rb[2];
        for (int p = 0; p < 2; p++) {
            void *dw = experts_dev(&r, t, n_in, X, n_out[p], &rb[p], &ref[p]);
            parts[p] = (ck_gemv_part){dw, rb[p], n_out[p], dev(NULL, (size_t)(rows * n_out[p]) * sizeof(float))};
        }
        void *scratch = dev(NULL, ck_mmq_experts_scratch_bytes(n_in, rows));
        const int done = ck_mmq_experts(t, parts, 2, n_in, dg, rows, dtiles, dnt, tiles_max, scratch, NULL);
        if (CHECKF(done == 1, "%s: ck_mmq_experts refused", qtype_name(t)) && ok_cuda("ck_mmq_experts"))
            for (int p = 0; p < 2; p++) {
                float *y = malloc((size_t)(rows * n_out[p]) * sizeof *y);
                float *got = malloc((size_t)(S * n_out[p]) * sizeof *got);
                float *want = experts_product_ref(xq, k, ref[p], sel, S, n_in, n_out[p]);
                back(y, parts[p].y, (size_t)(rows * n_out[p]) * sizeof *y);
                for (int64_t s = 0; s < S; s++)
                    memcpy(got + s * n_out[p], y + pos[s] * n_out[p], (size_t)n_out[p] * sizeof *got);
                const double e = test_nmse(got, want, S * n_out[p]);
                CHECKF(e < NMSE_MAX, "%s, part %d: nmse %g", qtype_name(t), p, e);
                free(y), free(got), free(want);
            }
        CHECK(ck_mmq_experts(QTYPE_F32, parts, 2, n_in, dg, rows, dtiles, dnt, tiles_max, scratch, NULL) == 0);
        for (int p = 0; p < 2; p++) cudaFree((void *)parts[p].W), cudaFree(parts[p].y), free(ref[p]);
        cudaFree(dx), cudaFree(dg), cudaFree(scratch);
        free(xq), free(g);
    }
    cudaFree(dsel), cudaFree(dpos), cudaFree(dsrc), cudaFree(dnt), cudaFree(dtiles);
    free(x), free(src), free(tiles);
}

/* The tensor-core products of 9 rows and more (ck_mmq_parts) match x W^T with x as the
 * integer products see it, for every type with the integer path: three parts in one
 * launch whose tiles of 16 rows end inside a part (rows [0, 10), [10, 11), [11, 37)); rows
 * of 5 super-blocks or 37 units, which the block's 4 warps share unevenly (and Q6_K's
 * odd super-blocks 2-byte aligned); 9 to 70 rows of x, 70 in two passes; Q4_K also from
 * rows only 2-byte aligned, which take the unit decoder instead of its own. */
TEST(cuda_mmq_matches_ref) {
    test_rng r = test_rng_new();
    static const qtype types[] = {QTYPE_Q4_0, QTYPE_Q4_1, QTYPE_Q5_0, QTYPE_Q5_1, QTYPE_Q8_0,   QTYPE_Q2_K, QTYPE_Q3_K,
                                  QTYPE_Q4_K, QTYPE_Q5_K, QTYPE_Q6_K, QTYPE_IQ4_NL, QTYPE_IQ4_XS, QTYPE_Q4_K};
    static const int64_t toks[] = {9, 17, 33, 64, 70};
    const size_t n_types = sizeof types / sizeof types[0];
    for (size_t ti = 0; ti < n_types; ti++) {
        const qtype t = types[ti];
        const bool shifted = ti == n_types - 1; /* the weights 2 bytes past an aligned address */
        const int64_t n_in = qtype_info(t)->block_size == 256 ? 256 * 5 : 32 * 37, n_out = 37;
        size_t rb;
        uint8_t *w = rand_weights(&r, t, n_in, n_out, &rb);
        float *ref = malloc((size_t)(n_in * n_out) * sizeof *ref);
        for (int64_t o = 0; o < n_out; o++) dequantize_row_ref(t, w + o * rb, ref + o * n_in, n_in);
        uint8_t *base = dev(NULL, rb * (size_t)n_out + 2), *dw = base + (shifted ? 2 : 0);
        cudaMemcpy(dw, w, rb * (size_t)n_out, cudaMemcpyHostToDevice);
        for (size_t k = 0; k < sizeof toks / sizeof toks[0]; k++) {
            const int64_t nt = toks[k];
            if (shifted && nt != 33) continue;
            float *x = rand_floats(&r, nt * n_in, 1.0f);
            x[3] = 0.0f, x[5] = -x[7]; /* ties and zeros in the quantizer */
            float *dx = dev(x, (size_t)(nt * n_in) * sizeof *x);
            as_8bit(x, nt, n_in);
            float *yr = product_ref(x, ref, nt, n_in, n_out);
            float *dy = dev(NULL, (size_t)(nt * n_out) * sizeof *dy), *y = malloc((size_t)(nt * n_out) * sizeof *y);
            void *scratch = dev(NULL, ck_mmq_scratch_bytes(n_in, nt));
            const int64_t cut[4] = {0, 10, 11, n_out};
            ck_gemv_part parts[3];
            for (int p = 0; p < 3; p++)
                parts[p] = (ck_gemv_part){dw + cut[p] * rb, rb, cut[p + 1] - cut[p], dy + nt * cut[p]};
            const int ran = ck_mmq_parts(t, parts, 3, n_in, dx, nt, scratch, NULL);
            if (CHECKF(ran, "%s: ck_mmq_parts refused", qtype_name(t)) && ok_cuda("ck_mmq_parts")) {
                float *part = malloc((size_t)(nt * n_out) * sizeof *part);
                back(part, dy, (size_t)(nt * n_out) * sizeof *part);
                join_parts(y, part, cut, nt);
                free(part);
                const double e = test_nmse(y, yr, nt * n_out);
                CHECKF(e < NMSE_MAX, "%s%s, %lld rows of x: nmse %g", qtype_name(t), shifted ? " (2-byte aligned)" : "",
                       (long long)nt, e);
            }
            if (k == 0) /* no integer path: refused, nothing launched */
                CHECK(!ck_mmq_parts(QTYPE_F16, parts, 3, n_in, dx, nt, scratch, NULL));
            cudaFree(dx), cudaFree(dy), cudaFree(scratch);
            free(x), free(y), free(yr);
        }
        cudaFree(base);
        free(w), free(ref);
    }
}

/* The 8-bit forms that the norms and SwiGLU leave for the next product are ck_gemv's own:
 * a product that takes them (x_ready) equals, bit for bit, one that quantizes the kernel's
 * output itself. Rows over CK_GEMV_MAX_TOK or of a length not a multiple of 32 leave none.
 * Their f16 forms (for the products through cuBLAS) are ck_f32_to_f16's bits. */
/* Whether q8 holds the 8-bit form of dx (rows, n) as ck_gemv makes it: a product from it
 * gives the same bits as one that quantizes dx itself. */
static bool q8_form_matches(test_rng *r, const float *dx, void *q8, int64_t rows, int64_t n) {
    const int64_t n_out = 13;
    size_t rb;
    uint8_t *w = rand_weights(r, QTYPE_Q8_0, n, n_out, &rb);
    void *dw = dev(w, rb * (size_t)n_out), *fresh = dev(NULL, ck_gemv_scratch_bytes(n, rows));
    float *dp1 = dev(NULL, (size_t)(rows * n_out) * 4), *dp2 = dev(NULL, (size_t)(rows * n_out) * 4);
    float *y1 = malloc((size_t)(rows * n_out) * 4), *y2 = malloc((size_t)(rows * n_out) * 4);
    ck_gemv(QTYPE_Q8_0, dw, rb, n, n_out, dx, rows, dp1, q8, 1, NULL);
    ck_gemv(QTYPE_Q8_0, dw, rb, n, n_out, dx, rows, dp2, fresh, 0, NULL);
    back(y1, dp1, (size_t)(rows * n_out) * 4);
    back(y2, dp2, (size_t)(rows * n_out) * 4);
    const bool same = ok_cuda("gemv") && !memcmp(y1, y2, (size_t)(rows * n_out) * 4);
    cudaFree(dw), cudaFree(fresh), cudaFree(dp1), cudaFree(dp2);
    free(w), free(y1), free(y2);
    return same;
}

TEST(cuda_fused_8bit_forms_match_gemv) {
    test_rng r = test_rng_new();
    const int64_t shapes[][2] = {{3, 256}, {2, 2560}, {8, 96}}; /* rows, n */
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t rows = shapes[si][0], n = shapes[si][1], all = rows * n;
        float *a = rand_floats(&r, all, 2.0f), *b = rand_floats(&r, all, 1.0f), *wn = rand_floats(&r, n, 1.0f);
        void *q8 = dev(NULL, ck_gemv_scratch_bytes(n, rows));
        float *da = dev(a, (size_t)all * 4), *db = dev(b, (size_t)all * 4), *dwn = dev(wn, (size_t)n * 4);
        float *dy = dev(NULL, (size_t)all * 4);
        uint16_t *h16 = dev(NULL, (size_t)all * 2), *c16 = dev(NULL, (size_t)all * 2);
        uint16_t *got16 = malloc((size_t)all * 2), *want16 = malloc((size_t)all * 2);
        static const char *const kinds[] = {"add + rmsnorm", "rmsnorm", "swiglu", "gated rmsnorm (heads of 32)"};
        for (int kind = 0; kind < 4; kind++) {
            int held = 0;
            if (kind == 0) held = ck_add_rmsnorm(da, db, 0.5f, dy, dwn, n, rows, 1e-6f, q8, h16, NULL);
            else if (kind == 1) held = ck_add_rmsnorm(da, NULL, 1.0f, dy, dwn, n, rows, 1e-6f, q8, h16, NULL);
            else if (kind == 2) held = ck_swiglu(dy, da, db, rows, n, q8, h16, NULL);
            else held = ck_gated_rmsnorm(rows, n / 32, 32, da, n, db, n, dwn, 1e-6f, dy, n, q8, h16, NULL);
            CHECKF(ok_cuda(kinds[kind]) && held && q8_form_matches(&r, dy, q8, rows, n), "%s, %lld rows of %lld: %s",
                   kinds[kind], (long long)rows, (long long)n, held ? "the products differ" : "no 8-bit form left");
            /* the f16 form: the bits of the conversion a product through cuBLAS would make */
            ck_f32_to_f16(dy, c16, all, NULL);
            back(got16, h16, (size_t)all * 2);
            back(want16, c16, (size_t)all * 2);
            CHECKF(!memcmp(got16, want16, (size_t)all * 2), "%s, %lld rows of %lld: the f16 form differs",
                   kinds[kind], (long long)rows, (long long)n);
        }
        cudaFree(h16), cudaFree(c16), free(got16), free(want16);
        CHECK(!ck_swiglu(dy, da, db, CK_GEMV_MAX_TOK + 1, 32, q8, NULL, NULL));
        CHECK(!ck_add_rmsnorm(da, NULL, 1.0f, dy, dwn, 48, 2, 1e-6f, q8, NULL, NULL));
        CHECK(!ck_add_rmsnorm(da, NULL, 1.0f, dy, dwn, n, rows, 1e-6f, NULL, NULL, NULL));
        cudaFree(q8), cudaFree(da), cudaFree(db), cudaFree(dwn), cudaFree(dy);
        free(a), free(b), free(wn);
    }
}

/* ==== Row ops ==== */

/* ck_top_rows on rows of n (k best each) against vec_top_k, ids and values bit for bit,
 * counts, and the entries past a count 0 and -inf; returns whether all matched. */
static bool top_rows_match(const float *x, int64_t rows, int64_t n, int k) {
    float *dx = dev(x, (size_t)(rows * n) * sizeof *x), *dv = dev(NULL, (size_t)(rows * k) * sizeof(float));
    int32_t *di = dev(NULL, (size_t)(rows * k) * sizeof(int32_t)), *dc = dev(NULL, (size_t)rows * sizeof(int32_t));
    int32_t *ids = malloc((size_t)(rows * k) * sizeof *ids), *counts = malloc((size_t)rows * sizeof *counts);
    float *vals = malloc((size_t)(rows * k) * sizeof *vals);
    ck_top_rows(dx, rows, n, k, di, dv, dc, NULL);
    back(ids, di, (size_t)(rows * k) * sizeof *ids), back(vals, dv, (size_t)(rows * k) * sizeof *vals);
    back(counts, dc, (size_t)rows * sizeof *counts);
    bool ok = ok_cuda("ck_top_rows");
    for (int64_t r = 0; ok && r < rows; r++) {
        int32_t want_ids[CK_TOP_MAX];
        float want_vals[CK_TOP_MAX];
        const int64_t want = vec_top_k(x + r * n, n, k, want_ids, want_vals);
        ok = CHECKF(counts[r] == want, "n %lld k %d row %lld: %d best, vec_top_k %lld", (long long)n, k, (long long)r,
                    counts[r], (long long)want);
        for (int64_t i = 0; ok && i < k; i++) {
            const int32_t wi = i < want ? want_ids[i] : 0;
            const float wv = i < want ? want_vals[i] : -INFINITY;
            ok = CHECKF(ids[r * k + i] == wi && !memcmp(&vals[r * k + i], &wv, sizeof wv),
                        "n %lld k %d row %lld entry %lld: %d (%g), vec_top_k %d (%g)", (long long)n, k, (long long)r,
                        (long long)i, ids[r * k + i], vals[r * k + i], wi, wv);
        }
    }
    cudaFree(dx), cudaFree(dv), cudaFree(di), cudaFree(dc);
    free(ids), free(vals), free(counts);
    return ok;
}

/* ck_top_rows is vec_top_k on every row, for k 1 (the greedy sampler's choice), 40 and
 * 64: a vocabulary-wide row with the best value three times (the lowest index first,
 * across the block's threads), NaNs around a best one, all -inf, all NaN, zeros of both
 * signs behind -1s (more equal values than the block's candidates hold: its chunks), the
 * best at the very end, NaN then -inf, the best values all in one thread's share of the
 * row, usable values in half the warps' shares only (for k 40 and 64 too few warps have
 * two: no floor, the chunks again), and rows shorter than the block, than k, or with
 * fewer usable values than k. */
TEST(cuda_top_rows_match_ref) {
    test_rng r = test_rng_new();
    const int64_t n = 151936, rows = 9;
    float *x = rand_floats(&r, rows * n, 1.0f);
    x[0 * n + 70001] = 9.0f, x[0 * n + 151000] = 9.0f, x[0 * n + 513] = 9.0f;
    for (int64_t i = 0; i < n; i += 7) x[1 * n + i] = NAN;
    x[1 * n + 3] = 50.0f, x[1 * n + 4] = NAN;
    for (int64_t i = 0; i < n; i++) x[2 * n + i] = -INFINITY, x[3 * n + i] = NAN;
    for (int64_t i = 0; i < n; i++) x[4 * n + i] = i < 1000 ? -1.0f : i % 3 ? 0.0f : -0.0f;
    x[5 * n + n - 1] = 100.0f;
    for (int64_t i = 0; i < n; i++) x[6 * n + i] = i == 0 ? NAN : -INFINITY;
    for (int64_t i = 5; i < n; i += 1024) x[7 * n + i] = 10.0f + (float)(i % 97); /* thread 5's share */
    for (int64_t i = 0; i < n; i++) /* usable values in half the warps' shares only */
        if (i % 1024 >= 512) x[8 * n + i] = i % 2 ? NAN : -INFINITY;
    const int ks[] = {1, 40, 64};
    for (int i = 0; i < 3; i++) REQUIRE(top_rows_match(x, rows, n, ks[i]));
    int32_t best;
    float best_v, *short_rows = rand_floats(&r, 3 * 1000, 1.0f);
    CHECK(vec_top_k(x, n, 1, &best, &best_v) == 1 && best == 513);
    for (int64_t i = 0; i < 1000; i++) short_rows[2 * 1000 + i] = i % 100 ? -INFINITY : (float)(i % 300);
    REQUIRE(top_rows_match(short_rows, 3, 1000, 64)); /* rows of 1000 (one with 10 usable values, tied in threes) */
    REQUIRE(top_rows_match(short_rows, 3, 3, 7));     /* rows of 3 */
    REQUIRE(top_rows_match(short_rows, 1, 1, 1));
    free(short_rows);
    free(x);
}

/* ck_logprob_rows against vec_logprob: rows of a vocabulary's size and of 1, 3 and 1000,
 * the target the best, the worst or -inf, -inf elsewhere in a row, within 1e-5 (the GPU's
 * expf and another order of summation); a NaN anywhere, or a row all -inf, gives NaN.
 * Without targets, each row's log-sum-exp against vec_logsumexp, within the same. */
TEST(cuda_logprob_rows_match_ref) {
    test_rng r = test_rng_new();
    const int64_t lens[] = {151936, 1000, 3, 1};
    for (int li = 0; li < 4; li++) {
        const int64_t n = lens[li], rows = 6;
        float *x = rand_floats(&r, rows * n, 4.0f);
        int32_t t[6];
        for (int64_t k = 0; k < rows; k++) t[k] = (int32_t)test_rng_below(&r, (uint32_t)n);
        t[0] = (int32_t)vec_argmax_ref(x, n);
        for (int64_t i = 0; i < n; i += 3) x[1 * n + i] = -INFINITY; /* -inf around, the target too */
        t[1] = 0;
        x[2 * n + n / 2] = NAN;
        for (int64_t i = 0; i < n; i++) x[3 * n + i] = -INFINITY;
        x[4 * n + t[4]] = 60.0f; /* far above the rest */
        float *dx = dev(x, (size_t)(rows * n) * sizeof *x);
        int32_t *dt = dev(t, sizeof t);
        double got[6], *dout = dev(NULL, sizeof got);
        ck_logprob_rows(dx, rows, n, dt, dout, NULL);
        back(got, dout, sizeof got);
        if (ok_cuda("ck_logprob_rows"))
            for (int64_t k = 0; k < rows; k++) {
                const double want = vec_logprob(x + k * n, n, t[k]);
                CHECKF(isnan(want) ? isnan(got[k]) : want == got[k] || fabs(got[k] - want) <= 1e-5,
                       "n %lld row %lld target %d: %.12g, vec_logprob %.12g", (long long)n, (long long)k, t[k], got[k],
                       want);
            }
        CHECK(isnan(got[3]) && isnan(got[2]) && (n == 1 ? isnan(got[1]) : got[1] == -INFINITY));
        ck_logprob_rows(dx, rows, n, NULL, dout, NULL);
        back(got, dout, sizeof got);
        if (ok_cuda("ck_logprob_rows without targets"))
            for (int64_t k = 0; k < rows; k++) {
                const double want = vec_logsumexp(x + k * n, n);
                CHECKF(isnan(want) ? isnan(got[k]) : want == got[k] || fabs(got[k] - want) <= 1e-5,
                       "n %lld row %lld: log-sum-exp %.12g, vec_logsumexp %.12g", (long long)n, (long long)k, got[k],
                       want);
            }
        CHECK(isnan(got[3]) && isnan(got[2]) && (n == 1 ? isnan(got[1]) : isfinite(got[1])));
        cudaFree(dx), cudaFree(dt), cudaFree(dout);
        free(x);
    }
}

TEST(cuda_row_ops_match_ref) {
    test_rng r = test_rng_new();
    const int64_t rows = 5, n = 300;
    float *x = rand_floats(&r, rows * n, 2.0f), *w = rand_floats(&r, n, 1.0f), *z = rand_floats(&r, rows * n, 1.0f);
    float *ref = malloc((size_t)(rows * n) * sizeof *ref), *got = malloc((size_t)(rows * n) * sizeof *got);
    float *dx = dev(x, (size_t)(rows * n) * 4), *dw = dev(w, (size_t)n * 4), *dz = dev(z, (size_t)(rows * n) * 4);
    float *dy = dev(NULL, (size_t)(rows * n) * 4);
    /* RMSNorm */
    ops_rmsnorm_rows(ref, n, x, n, w, n, rows, 1e-6f);
    ck_rmsnorm_rows(dy, n, dx, n, dw, n, rows, 1e-6f, NULL);
    back(got, dy, (size_t)(rows * n) * 4);
    CHECKF(ok_cuda("rmsnorm") && test_nmse(got, ref, rows * n) < NMSE_MAX, "rmsnorm nmse %g",
           test_nmse(got, ref, rows * n));
    /* gathered rows 3 and 1 */
    const int32_t sel[2] = {3, 1};
    int32_t *dsel = dev(sel, sizeof sel);
    ck_rmsnorm_gather(dy, dx, dsel, dw, n, 2, 1e-6f, NULL);
    back(got, dy, (size_t)(2 * n) * 4);
    ops_rmsnorm_rows(ref, n, x + 3 * n, n, w, n, 1, 1e-6f);
    ops_rmsnorm_rows(ref + n, n, x + 1 * n, n, w, n, 1, 1e-6f);
    CHECKF(ok_cuda("gather") && test_nmse(got, ref, 2 * n) < NMSE_MAX, "rmsnorm gather");
    /* a residual added, then the norm: rows of 300 (held in registers) and of 9000 (read
     * twice); x + 0.5 z (0.5 z exact: a fused multiply-add rounds as the CPU does), x + z */
    for (int wide = 0; wide < 2; wide++) {
        const int64_t m = wide ? 9000 : n, nr = wide ? 2 : rows;
        const float rs = wide ? 1.0f : 0.5f;
        float *a = rand_floats(&r, nr * m, 2.0f), *b = rand_floats(&r, nr * m, 1.0f), *wm = rand_floats(&r, m, 1.0f);
        float *xa = malloc((size_t)(nr * m) * 4), *ya = malloc((size_t)(nr * m) * 4);
        float *yg = malloc((size_t)(nr * m) * 4);
        float *da = dev(a, (size_t)(nr * m) * 4), *db = dev(b, (size_t)(nr * m) * 4), *dwm = dev(wm, (size_t)m * 4);
        float *dya = dev(NULL, (size_t)(nr * m) * 4);
        for (int64_t i = 0; i < nr * m; i++) a[i] = rs == 1.0f ? a[i] + b[i] : a[i] + rs * b[i];
        ops_rmsnorm_rows(ya, m, a, m, wm, m, nr, 1e-6f);
        ck_add_rmsnorm(da, db, rs, dya, dwm, m, nr, 1e-6f, NULL, NULL, NULL);
        back(xa, da, (size_t)(nr * m) * 4);
        back(yg, dya, (size_t)(nr * m) * 4);
        CHECKF(ok_cuda("add_rmsnorm") && !memcmp(xa, a, (size_t)(nr * m) * 4) && test_nmse(yg, ya, nr * m) < NMSE_MAX,
               "add + rmsnorm, rows of %lld: nmse %g", (long long)m, test_nmse(yg, ya, nr * m));
        ck_rmsnorm_rows(dya, m, da, m, dwm, m, nr, 1e-6f, NULL);
        back(yg, dya, (size_t)(nr * m) * 4);
        CHECKF(ok_cuda("rmsnorm") && test_nmse(yg, ya, nr * m) < NMSE_MAX, "rmsnorm, rows of %lld", (long long)m);
        cudaFree(da), cudaFree(db), cudaFree(dwm), cudaFree(dya);
        free(a), free(b), free(wm), free(xa), free(ya), free(yg);
    }
    /* SwiGLU */
    ops_swiglu(ref, x, z, rows * n);
    ck_swiglu(dy, dx, dz, rows, n, NULL, NULL, NULL);
    back(got, dy, (size_t)(rows * n) * 4);
    CHECKF(ok_cuda("swiglu") && test_nmse(got, ref, rows * n) < NMSE_MAX, "swiglu");
    /* per-head gated RMSNorm: 3 heads of 100 */
    gated_rmsnorm_ref(rows, 3, 100, x, n, z, n, w, 1e-6f, ref, n);
    ck_gated_rmsnorm(rows, 3, 100, dx, n, dz, n, dw, 1e-6f, dy, n, NULL, NULL, NULL);
    back(got, dy, (size_t)(rows * n) * 4);
    CHECKF(ok_cuda("gated_rmsnorm") && test_nmse(got, ref, rows * n) < NMSE_MAX, "gated rmsnorm");
    /* decay gate, qwen3next's interleaved form: 6 heads in groups of 2 */
    const int64_t H = 6, grp = 2;
    float *a = rand_floats(&r, H, 1.0f), *dt = rand_floats(&r, H, 1.0f);
    float g_ref[5 * 6], b_ref[5 * 6], g_got[5 * 6], b_got[5 * 6];
    float *da = dev(a, H * 4), *ddt = dev(dt, H * 4), *dg = dev(NULL, rows * H * 4), *db = dev(NULL, rows * H * 4);
    ssm_gate_ref(rows, H, x + grp, 2 * H, x, 2 * H, grp, 2 * grp, a, dt, g_ref, b_ref);
    ck_ssm_gate(rows, H, dx + grp, 2 * H, dx, 2 * H, grp, 2 * grp, da, ddt, dg, db, NULL);
    back(g_got, dg, sizeof g_got);
    back(b_got, db, sizeof b_got);
    CHECKF(ok_cuda("ssm_gate") && test_nmse(g_got, g_ref, rows * H) < NMSE_MAX &&
               test_nmse(b_got, b_ref, rows * H) < NMSE_MAX, "ssm gate");
    cudaFree(dx), cudaFree(dw), cudaFree(dz), cudaFree(dy), cudaFree(dsel), cudaFree(da), cudaFree(ddt);
    cudaFree(dg), cudaFree(db);
    free(x), free(w), free(z), free(ref), free(got), free(a), free(dt);
}

/* ==== Mixers ==== */

/* A step of runs of these lengths, run k of sequence k on slot 2k + 1 (slots are spread
 * so that a wrong slot reads another sequence's state), with the plan uploaded. */
typedef struct {
    int64_t n, n_runs;
    int32_t pos[128], run_of[128], blocks[64];
    ck_run runs[8];
    ck_step d;
    void *mem[4];
} step_fixture;

static void step_make(step_fixture *f, const int64_t *lens, const int64_t *pos0, int64_t n_runs, bool verify) {
    memset(f, 0, sizeof *f);
    f->n_runs = n_runs;
    int nb = 0;
    for (int64_t k = 0; k < n_runs; k++) {
        f->runs[k] = (ck_run){(int32_t)f->n, (int32_t)lens[k], (int32_t)(2 * k + 1), verify ? -1 : (int32_t)(2 * k + 1),
                              nb, 0, 0};
        const int64_t need = (pos0[k] + lens[k] - 1) / 256 + 1;
        for (int64_t b = 0; b < need; b++) f->blocks[nb++] = (int32_t)(3 * k + 7 * b + 1) % 40; /* scattered blocks */
        for (int64_t t = 0; t < lens[k]; t++) f->pos[f->n] = (int32_t)(pos0[k] + t), f->run_of[f->n++] = (int32_t)k;
    }
    f->mem[0] = dev(f->pos, sizeof f->pos), f->mem[1] = dev(f->run_of, sizeof f->run_of);
    f->mem[2] = dev(f->blocks, sizeof f->blocks), f->mem[3] = dev(f->runs, sizeof f->runs);
    f->d = (ck_step){f->mem[0], f->mem[1], f->mem[2], f->mem[3]};
}

static void step_free(step_fixture *f) {
    for (int i = 0; i < 4; i++) cudaFree(f->mem[i]);
}

/* C channels, the first l2 of them L2-normed in heads of l2_dim, with or without a bias,
 * over runs of 1, 5, 1 and 2 rows, then the windows after each run; or (decode) over four
 * runs of one row, the conv writing the windows itself. */
static void conv1d_case(test_rng *r, int64_t C, int64_t l2, int64_t l2_dim, bool bias, bool decode) {
    const int K = 4;
    const int64_t lens[] = {1, 5, 1, 2}, ones[] = {1, 1, 1, 1}, pos0[] = {9, 0, 3, 30};
    step_fixture f;
    step_make(&f, decode ? ones : lens, pos0, 4, false);
    const int64_t n = f.n, n_slots = 9, sf = (K - 1) * C;
    float *x = rand_floats(r, n * C, 1.0f), *w = rand_floats(r, K * C, 0.5f), *b = rand_floats(r, C, 0.1f);
    float *state = rand_floats(r, n_slots * sf, 1.0f);
    float *dx = dev(x, (size_t)(n * C) * 4), *dw = dev(w, (size_t)(K * C) * 4), *db = dev(b, (size_t)C * 4);
    float *dst = dev(state, (size_t)(n_slots * sf) * 4), *dy = dev(NULL, (size_t)(n * C) * 4);
    ck_conv1d(&f.d, n, dx, C, dy, C, dw, bias ? db : NULL, C, K, dst, decode, l2, l2_dim, 1e-6f, NULL);
    int32_t items[4 * 4];
    for (int k = 0; k < 4; k++) {
        const ck_run *rk = &f.runs[k];
        items[4 * k] = rk->row0 + rk->n - 1, items[4 * k + 1] = rk->row0, items[4 * k + 2] = items[4 * k + 3] = rk->slot_in;
    }
    int32_t *ditems = dev(items, sizeof items);
    if (!decode) ck_conv_window(ditems, 4, dx, C, C, K, dst, NULL);
    float *y = malloc((size_t)(n * C) * 4), *yr = malloc((size_t)(n * C) * 4), *st = malloc((size_t)(n_slots * sf) * 4);
    back(y, dy, (size_t)(n * C) * 4);
    back(st, dst, (size_t)(n_slots * sf) * 4);
    conv1d_params p = {C, K, w, bias ? b : NULL, l2, l2_dim, 1e-6f};
    for (int k = 0; k < 4; k++) {
        const ck_run *rk = &f.runs[k];
        conv1d_scan_ref(&p, rk->n, x + rk->row0 * C, C, yr + rk->row0 * C, C, state + rk->slot_in * sf);
    }
    const double e = test_nmse(y, yr, n * C);
    CHECKF(ok_cuda("conv1d") && e < NMSE_MAX, "conv1d of %lld channels, %lld normed in heads of %lld, decode %d: "
           "nmse %g", (long long)C, (long long)l2, (long long)l2_dim, decode, e);
    CHECKF(!memcmp(st, state, (size_t)(n_slots * sf) * 4), "conv windows differ (decode %d)", decode);
    cudaFree(dx), cudaFree(dw), cudaFree(db), cudaFree(dst), cudaFree(dy), cudaFree(ditems);
    free(x), free(w), free(b), free(state), free(y), free(yr), free(st);
    step_free(&f);
}

TEST(cuda_conv1d_matches_scan_ref) {
    test_rng r = test_rng_new();
    for (int decode = 0; decode < 2; decode++) {
        conv1d_case(&r, 70, 40, 20, true, decode);      /* heads narrower than a warp, a partial group after */
        conv1d_case(&r, 320, 256, 128, false, decode);  /* the delta rule's q and k heads, then v */
        conv1d_case(&r, 2100, 2048, 2048, false, decode); /* a head wider than a block: two channels a thread */
        conv1d_case(&r, 300, 0, 1, true, decode);       /* no norm (Mamba-2): groups of 256 */
    }
}

/* Runs of 1, 7, 1 and 3 rows, or (long) of 1, 45, 3 and 75 with checkpoints after row 20
 * of the second (to slot 8; inside a tile of 32) and rows 31 and 64 of the fourth (to
 * slots 0 and 2: a tile's last row, then the first row of a tile): the row-by-row kernel
 * (chunked 0), the tiled one on the CUDA cores (1) or on the tensor cores (2). single: the
 * second run alone (a one-sequence step). */
static void gdn_case(test_rng *r, int64_t n_k, int64_t n_v, int64_t d_k, int64_t d_v, int map, bool verify,
                     int chunked, bool longer, bool single) {
    const int64_t lens[] = {1, 7, 1, 3}, pos0[] = {0, 0, 5, 2}, long_lens[] = {1, 45, 3, 75};
    step_fixture f;
    const int skip = single ? 1 : 0; /* single: the second run alone */
    step_make(&f, (longer ? long_lens : lens) + skip, pos0 + skip, single ? 1 : 4, verify);
    const int32_t ckpt[6] = {20, 8, 31, 0, 64, 2};
    if (longer && !verify) {
        f.runs[1 - skip].ck = 0, f.runs[1 - skip].n_ck = 1;
        if (!single) f.runs[3].ck = 1, f.runs[3].n_ck = 2;
        cudaMemcpy(f.mem[3], f.runs, sizeof f.runs, cudaMemcpyHostToDevice);
    }
    int32_t *dck = dev(ckpt, sizeof ckpt);
    const int64_t n = f.n, key_dim = n_k * d_k, C = 2 * key_dim + n_v * d_v, n_slots = 9, sf = n_v * d_k * d_v;
    float *qkv = rand_floats(r, n * C, 1.0f), *g = malloc((size_t)(n * n_v) * 4), *beta = malloc((size_t)(n * n_v) * 4);
    for (int64_t i = 0; i < n * n_v; i++) g[i] = -test_rng_uniform(r, 0.0f, 1.0f), beta[i] = test_rng_uniform(r, 0, 1);
    /* q and k L2-normed per head, as the conv leaves them */
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < 2 * n_k; h++) {
            float *v = qkv + t * C + h * d_k, ss = 0;
            for (int64_t i = 0; i < d_k; i++) ss += v[i] * v[i];
            for (int64_t i = 0; i < d_k; i++) v[i] /= sqrtf(ss + 1e-6f);
        }
    float *state = rand_floats(r, n_slots * sf, 0.3f);
    float *dq = dev(qkv, (size_t)(n * C) * 4), *dg = dev(g, (size_t)(n * n_v) * 4), *db = dev(beta, (size_t)(n * n_v) * 4);
    float *ds = dev(state, (size_t)(n_slots * sf) * 4), *dout = dev(NULL, (size_t)(n * n_v * d_v) * 4);
    const float scale = 1.0f / sqrtf((float)d_k);
    const int64_t tiles = ck_gdn_tiles_max(n, f.n_runs);
    float *dwork = dev(NULL, (size_t)(tiles * n_v * CK_GDN_TILE_WORK) * 4);
    if (chunked) {
        /* too little work room: refused, nothing launched */
        CHECK(!ck_gdn_chunked(f.d.runs, f.n_runs, n, dck, dq, C, dg, db, dout, ds, n_k, n_v, d_k, d_v, map, scale,
                              dwork, tiles - 1, chunked == 2, NULL));
        CHECK(ck_gdn_chunked(f.d.runs, f.n_runs, n, dck, dq, C, dg, db, dout, ds, n_k, n_v, d_k, d_v, map, scale, dwork,
                             tiles, chunked == 2, NULL));
    } else
        ck_gdn(f.d.runs, f.n_runs, dck, dq, C, dg, db, dout, ds, n_k, n_v, d_k, d_v, map, scale, NULL);
    float *o = malloc((size_t)(n * n_v * d_v) * 4), *oref = malloc((size_t)(n * n_v * d_v) * 4);
    float *st = malloc((size_t)(n_slots * sf) * 4), *sref = malloc((size_t)(n_slots * sf) * 4);
    back(o, dout, (size_t)(n * n_v * d_v) * 4);
    back(st, ds, (size_t)(n_slots * sf) * 4);
    memcpy(sref, state, (size_t)(n_slots * sf) * 4);
    gdn_params p = {n_k, n_v, d_k, d_v, map ? GDN_KHEAD_DIV : GDN_KHEAD_MOD, scale};
    float *tmp = malloc((size_t)sf * 4);
    for (int k = 0; k < f.n_runs; k++) {
        const ck_run *rk = &f.runs[k];
        const float *q0 = qkv + rk->row0 * C;
        gdn_rows rows = {q0, q0 + key_dim, q0 + 2 * key_dim, g + rk->row0 * n_v, beta + rk->row0 * n_v, C, C, C, n_v,
                         n_v, oref + rk->row0 * n_v * d_v, n_v * d_v};
        float *S = verify ? tmp : sref + rk->slot_in * sf;
        if (verify) memcpy(tmp, sref + rk->slot_in * sf, (size_t)sf * 4);
        int64_t done = 0;
        for (int32_t c = rk->ck; c < rk->ck + rk->n_ck; c++) { /* up to a checkpoint, its state to its slot */
            gdn_scan_ref(&p, ckpt[2 * c] + 1 - done, &rows, S);
            memcpy(sref + ckpt[2 * c + 1] * sf, S, (size_t)sf * 4);
            const int64_t step = ckpt[2 * c] + 1 - done;
            rows.q += step * C, rows.k += step * C, rows.v += step * C, rows.g += step * n_v, rows.beta += step * n_v;
            rows.o += step * n_v * d_v, done += step;
        }
        gdn_scan_ref(&p, rk->n - done, &rows, S);
    }
    const double eo = test_nmse(o, oref, n * n_v * d_v), es = test_nmse(st, sref, n_slots * sf);
    CHECKF(ok_cuda("gdn") && eo < NMSE_MAX && es < NMSE_MAX, "gdn %lldx%lld heads %lldx%lld map %d verify %d chunked %d "
           "long %d: outputs nmse %g, states %g", (long long)n_k, (long long)n_v, (long long)d_k, (long long)d_v, map,
           verify, chunked, longer, eo, es);
    cudaFree(dck), cudaFree(dq), cudaFree(dg), cudaFree(db), cudaFree(ds), cudaFree(dout), cudaFree(dwork);
    free(qkv), free(g), free(beta), free(state), free(o), free(oref), free(st), free(sref), free(tmp);
    step_free(&f);
}

TEST(cuda_gdn_matches_scan_ref) {
    test_rng r = test_rng_new();
    for (int chunked = 0; chunked < 3; chunked++)
        for (int longer = 0; longer < 2; longer++) {
            gdn_case(&r, 2, 4, 16, 16, 0, false, chunked, longer, false);
            gdn_case(&r, 2, 6, 32, 48, 1, false, chunked, longer, false);
            gdn_case(&r, 1, 2, 128, 128, 0, false, chunked, longer, false);
            gdn_case(&r, 1, 2, 128, 128, 0, false, chunked, longer, true); /* one sequence: 16 row groups */
            gdn_case(&r, 2, 4, 256, 96, 0, false, chunked, longer, false); /* the shared slice at its largest */
            /* 12 threads: k, q partly loaded after a row */
            gdn_case(&r, 1, 2, 64, 3, 0, false, chunked, longer, false);
            gdn_case(&r, 2, 4, 16, 16, 0, true, chunked, longer, false); /* a verify: outputs only, slots untouched */
        }
}

/* A decode step of n_runs sequences through ck_gdn_step against ssm_gate_ref, gdn_scan_ref
 * and gated_rmsnorm_ref one after the other; `ba`: qwen3next's interleaved b|a (groups
 * of n_v / n_k heads), else separate rows of a and b. Where the outputs' 8-bit form is
 * left, a product from it must equal one that quantizes the outputs itself. */
static void gdn_step_case(test_rng *r, int64_t n_k, int64_t n_v, int64_t d_k, int64_t d_v, int map, bool ba,
                          int64_t n_runs) {
    const int64_t pos0[8] = {3, 0, 17, 5, 2, 40, 9, 1}, ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    step_fixture f;
    step_make(&f, ones, pos0, n_runs, false);
    const int64_t n = f.n, key_dim = n_k * d_k, V = n_v * d_v, C = 2 * key_dim + V, n_slots = 2 * n_runs + 1;
    const int64_t sf = n_v * d_k * d_v, grp = n_v / n_k;
    float *qkv = rand_floats(r, n * C, 1.0f), *ab = rand_floats(r, 2 * n * n_v, 1.5f), *z = rand_floats(r, n * V, 1.0f);
    float *a = malloc((size_t)n_v * 4), *dt = rand_floats(r, n_v, 1.0f), *w = rand_floats(r, d_v, 1.0f);
    for (int64_t h = 0; h < n_v; h++) a[h] = -test_rng_uniform(r, 0.2f, 2.0f);
    for (int64_t t = 0; t < n; t++) /* q and k L2-normed per head, as the conv leaves them */
        for (int64_t h = 0; h < 2 * n_k; h++) {
            float *v = qkv + t * C + h * d_k, ss = 0;
            for (int64_t i = 0; i < d_k; i++) ss += v[i] * v[i];
            for (int64_t i = 0; i < d_k; i++) v[i] /= sqrtf(ss + 1e-6f);
        }
    float *state = rand_floats(r, n_slots * sf, 0.3f);
    float *dq = dev(qkv, (size_t)(n * C) * 4), *dab = dev(ab, (size_t)(2 * n * n_v) * 4);
    float *dz = dev(z, (size_t)(n * V) * 4);
    float *da = dev(a, (size_t)n_v * 4), *ddt = dev(dt, (size_t)n_v * 4), *dw = dev(w, (size_t)d_v * 4);
    float *ds = dev(state, (size_t)(n_slots * sf) * 4), *dout = dev(NULL, (size_t)(n * V) * 4);
    void *q8 = dev(NULL, ck_gemv_scratch_bytes(V, n));
    /* b|a interleaved per key head (b of its grp heads, then a), or a's rows after b's */
    const ck_gate_src gs = ba ? (ck_gate_src){dab + grp, 2 * n_v, dab, 2 * n_v, grp, 2 * grp, da, ddt}
                              : (ck_gate_src){dab + n * n_v, n_v, dab, n_v, n_v, n_v, da, ddt};
    const ck_gated_norm gn = {dz, V, dw, 1e-6f};
    const float scale = 1.0f / sqrtf((float)d_k);
    const int held = ck_gdn_step(f.d.runs, n_runs, dq, C, &gs, &gn, dout, q8, ds, n_k, n_v, d_k, d_v, map, scale, NULL);
    CHECKF(ok_cuda("gdn_step") && held == (d_v % 32 == 0), "gdn step of heads %lldx%lld: held %d", (long long)d_k,
           (long long)d_v, held);
    /* the reference */
    float *g = malloc((size_t)(n * n_v) * 4), *beta = malloc((size_t)(n * n_v) * 4);
    if (ba) ssm_gate_ref(n, n_v, ab + grp, 2 * n_v, ab, 2 * n_v, grp, 2 * grp, a, dt, g, beta);
    else ssm_gate_ref(n, n_v, ab + n * n_v, n_v, ab, n_v, n_v, n_v, a, dt, g, beta);
    float *raw = malloc((size_t)(n * V) * 4), *oref = malloc((size_t)(n * V) * 4), *o = malloc((size_t)(n * V) * 4);
    float *sref = malloc((size_t)(n_slots * sf) * 4), *st = malloc((size_t)(n_slots * sf) * 4);
    memcpy(sref, state, (size_t)(n_slots * sf) * 4);
    gdn_params p = {n_k, n_v, d_k, d_v, map ? GDN_KHEAD_DIV : GDN_KHEAD_MOD, scale};
    for (int64_t k = 0; k < n_runs; k++) {
        const ck_run *rk = &f.runs[k];
        const float *q0 = qkv + rk->row0 * C;
        gdn_rows rows = {q0, q0 + key_dim, q0 + 2 * key_dim, g + rk->row0 * n_v, beta + rk->row0 * n_v, C, C, C, n_v,
                         n_v, raw + rk->row0 * V, V};
        gdn_scan_ref(&p, 1, &rows, sref + rk->slot_in * sf);
    }
    gated_rmsnorm_ref(n, n_v, d_v, raw, V, z, V, w, 1e-6f, oref, V);
    back(o, dout, (size_t)(n * V) * 4);
    back(st, ds, (size_t)(n_slots * sf) * 4);
    const double eo = test_nmse(o, oref, n * V), es = test_nmse(st, sref, n_slots * sf);
    CHECKF(eo < NMSE_MAX && es < NMSE_MAX, "gdn step %lldx%lld heads of %lldx%lld map %d ba %d, %lld runs: outputs "
           "nmse %g, states %g", (long long)n_k, (long long)n_v, (long long)d_k, (long long)d_v, map, ba,
           (long long)n_runs, eo, es);
    if (held)
        CHECKF(q8_form_matches(r, dout, q8, n, V), "gdn step %lldx%lld: the product of its 8-bit form differs",
               (long long)d_k, (long long)d_v);
    cudaFree(dq), cudaFree(dab), cudaFree(dz), cudaFree(da), cudaFree(ddt), cudaFree(dw), cudaFree(ds), cudaFree(dout);
    cudaFree(q8);
    free(qkv), free(ab), free(z), free(a), free(dt), free(w), free(state), free(g), free(beta), free(raw), free(oref);
    free(o), free(sref), free(st);
    step_free(&f);
}

TEST(cuda_gdn_step_matches_refs) {
    test_rng r = test_rng_new();
    gdn_step_case(&r, 2, 4, 16, 16, 0, false, 3);   /* heads narrower than a warp: no 8-bit form */
    gdn_step_case(&r, 1, 2, 128, 128, 0, false, 1); /* one sequence, 32 state rows a thread */
    gdn_step_case(&r, 2, 6, 32, 64, 1, true, 5);    /* qwen3next's b|a, value heads grouped per key head */
    gdn_step_case(&r, 2, 4, 256, 96, 0, false, 2);  /* 52 state rows a thread (the 64-row kernel) */
    gdn_step_case(&r, 1, 2, 64, 3, 1, false, 8);    /* 3 columns: most of the block's threads idle */
    /* refused: heads wider than a block, and more than 64 state rows a thread */
    const ck_gate_src gs = {0};
    const ck_gated_norm gn = {0};
    CHECK(ck_gdn_step(NULL, 1, NULL, 0, &gs, &gn, NULL, NULL, NULL, 1, 1, 128, 544, 0, 1.0f, NULL) == -1);
    CHECK(ck_gdn_step(NULL, 1, NULL, 0, &gs, &gn, NULL, NULL, NULL, 1, 1, 1024, 256, 0, 1.0f, NULL) == -1);
}

/* The NMSE of a cache (n elements of e bytes: f16 or f32) against another */
static double cache_nmse(const uint8_t *got, const uint8_t *want, size_t e, int64_t n) {
    float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
        a[i] = e == 2 ? fp16_to_f32(((const uint16_t *)got)[i]) : ((const float *)got)[i];
        b[i] = e == 2 ? fp16_to_f32(((const uint16_t *)want)[i]) : ((const float *)want)[i];
    }
    const double err = test_nmse(a, b, n);
    free(a), free(b);
    return err;
}

/* Runs of 1, 6 and 1 rows at positions 300, 0 and 40 (ck_attention, and
 * ck_attention_prefill_mma: a tile a run), or (prefill) one run of 37 rows from position
 * 250 (across a KV block), or (prefill 2) of 100 rows from 210 (two tiles of
 * ck_attention_prefill_mma's 64 rows, the second part full), which ck_attention_prefill
 * takes too, or (prefill 3) runs of 1, 70 and 1 rows at 300, 10 and 40: a server's step of
 * two decoding sequences and a prompt (ck_attention and ck_attention_prefill_mma). */
static void attention_case(test_rng *r, int64_t n_head, int64_t n_kv, int64_t hd, int64_t dv, int64_t n_rot, int neox,
                           int kv_f16, int prefill, bool pre) {
    const int64_t lens[] = {1, 6, 1}, pos0[] = {300, 0, 40}, mixed_lens[] = {1, 70, 1}, mixed_pos0[] = {300, 10, 40};
    const int64_t pf_len[] = {prefill == 2 ? 100 : 37}, pf_pos0[] = {prefill == 2 ? 210 : 250};
    step_fixture f;
    if (prefill == 3) step_make(&f, mixed_lens, mixed_pos0, 3, false);
    else step_make(&f, prefill ? pf_len : lens, prefill ? pf_pos0 : pos0, prefill ? 1 : 3, false);
    const int64_t n = f.n, K = n_kv * hd, V = n_kv * dv, n_blocks = 40, Q = n_head * hd;
    const size_t ek = kv_f16 & 1 ? 2 : 4, ev = kv_f16 & 2 ? 2 : 4;
    /* the cache: random rows for positions before each run, written by the kernel after */
    float *q = rand_floats(r, n * Q, 1.0f), *k = rand_floats(r, n * K, 1.0f), *v = rand_floats(r, n * V, 1.0f);
    uint8_t *kc = malloc((size_t)(n_blocks * 256 * K) * ek), *vc = malloc((size_t)(n_blocks * 256 * V) * ev);
    for (int64_t i = 0; i < n_blocks * 256 * K; i++) {
        const float x = test_rng_normal(r);
        if (ek == 2) ((uint16_t *)kc)[i] = f32_to_fp16(x);
        else ((float *)kc)[i] = x;
    }
    for (int64_t i = 0; i < n_blocks * 256 * V; i++) {
        const float x = test_rng_normal(r);
        if (ev == 2) ((uint16_t *)vc)[i] = f32_to_fp16(x);
        else ((float *)vc)[i] = x;
    }
    float *dq = dev(q, (size_t)(n * Q) * 4), *dk = dev(k, (size_t)(n * K) * 4), *dvv = dev(v, (size_t)(n * V) * 4);
    void *dkc = dev(kc, (size_t)(n_blocks * 256 * K) * ek), *dvc = dev(vc, (size_t)(n_blocks * 256 * V) * ev);
    float *dout = dev(NULL, (size_t)(n * n_head * dv) * 4);
    const float rope_base = 10000.0f, scale = 1.0f / sqrtf((float)hd);
    /* with pre: q and its gate from a gated projection (per head q, then gate), q and k
     * normed per head, in the rotation's pass */
    float *qg = pre ? rand_floats(r, 2 * n * Q, 1.0f) : NULL, *gate = malloc((size_t)(n * Q) * 4);
    float *qn = rand_floats(r, hd, 1.0f), *kn = rand_floats(r, hd, 1.0f);
    float *dqg = pre ? dev(qg, (size_t)(2 * n * Q) * 4) : NULL, *dgate = dev(NULL, (size_t)(n * Q) * 4);
    float *dqn = dev(qn, (size_t)hd * 4), *dkn = dev(kn, (size_t)hd * 4);
    const ck_rope_pre rp = {dqg, dgate, dqn, dkn, 1e-6f};
    ck_rope_store(&f.d, n, pre ? &rp : NULL, dq, dk, dvv, n_head, n_kv, hd, dv, n_rot, rope_base, neox, dkc, dvc,
                  kv_f16, NULL);
    /* the reference: the same split, norms, rotation and stores on the host, then
     * ops_attention_ref per run */
    for (int64_t h = 0; pre && h < n * n_head; h++) {
        memcpy(q + h * hd, qg + h * 2 * hd, (size_t)hd * 4);
        memcpy(gate + h * hd, qg + h * 2 * hd + hd, (size_t)hd * 4);
        ops_rmsnorm(q + h * hd, q + h * hd, qn, hd, 1e-6f);
    }
    for (int64_t h = 0; pre && h < n * n_kv; h++) ops_rmsnorm(k + h * hd, k + h * hd, kn, hd, 1e-6f);
    float *cs = malloc((size_t)n_rot * 4 + 8);
    for (int64_t t = 0; t < n; t++) {
        if (n_rot) {
            ops_rope_table(cs, f.pos[t], n_rot, rope_base);
            ops_rope_apply(q + t * Q, n_head, hd, n_rot, cs, neox ? ROPE_NEOX : ROPE_NORM);
            ops_rope_apply(k + t * K, n_kv, hd, n_rot, cs, neox ? ROPE_NEOX : ROPE_NORM);
        }
        const ck_run *rk = &f.runs[f.run_of[t]];
        const int64_t at = (int64_t)f.blocks[rk->bt + f.pos[t] / 256] * 256 + f.pos[t] % 256;
        for (int64_t i = 0; i < K; i++) {
            if (ek == 2) ((uint16_t *)kc)[at * K + i] = f32_to_fp16(k[t * K + i]);
            else ((float *)kc)[at * K + i] = k[t * K + i];
        }
        for (int64_t i = 0; i < V; i++) {
            if (ev == 2) ((uint16_t *)vc)[at * V + i] = f32_to_fp16(v[t * V + i]);
            else ((float *)vc)[at * V + i] = v[t * V + i];
        }
    }
    { /* the cache as the kernel wrote it is the host's, within the rounding to f16 of keys a float
       * ulp apart; the reference then reads the kernel's, so that a key on a rounding boundary
       * does not move the attention past the bound */
        const size_t kb = (size_t)(n_blocks * 256 * K) * ek, vb = (size_t)(n_blocks * 256 * V) * ev;
        uint8_t *kd = malloc(kb), *vd = malloc(vb);
        back(kd, dkc, kb);
        back(vd, dvc, vb);
        const double e = cache_nmse(kd, kc, ek, n_blocks * 256 * K) + cache_nmse(vd, vc, ev, n_blocks * 256 * V);
        CHECKF(ok_cuda("kv store") && e < NMSE_MAX, "the KV cache of %lld/%lld heads, %lld/%lld wide, kv %d: nmse %g",
               (long long)n_head, (long long)n_kv, (long long)hd, (long long)dv, kv_f16, e);
        memcpy(kc, kd, kb), memcpy(vc, vd, vb);
        free(kd), free(vd);
    }
    float *out = malloc((size_t)(n * n_head * dv) * 4), *ref = malloc((size_t)(n * n_head * dv) * 4);
    float *scores = malloc((size_t)(400) * 4);
    { /* the rotated q, and the gate as it was */
        float *qd = malloc((size_t)(n * Q) * 4);
        back(qd, dq, (size_t)(n * Q) * 4);
        const double e = test_nmse(qd, q, n * Q);
        CHECKF(ok_cuda("rope") && e < NMSE_MAX, "rope %lld heads of %lld, rot %lld, pre %d: q nmse %g",
               (long long)n_head, (long long)hd, (long long)n_rot, pre, e);
        if (pre) {
            back(qd, dgate, (size_t)(n * Q) * 4);
            CHECKF(!memcmp(qd, gate, (size_t)(n * Q) * 4), "rope %lld heads of %lld: the gate differs",
                   (long long)n_head, (long long)hd);
        }
        free(qd);
    }
    attn_shape sh = {n_head, n_kv, hd, dv, scale};
    for (int64_t kx = 0; kx < f.n_runs; kx++) {
        const ck_run *rk = &f.runs[kx];
        attn_args a = {ref + rk->row0 * n_head * dv, q + rk->row0 * Q, kc, vc, n_head * dv, Q, K, V, rk->n,
                       f.pos[rk->row0], ek == 2 ? QTYPE_F16 : QTYPE_F32, ev == 2 ? QTYPE_F16 : QTYPE_F32,
                       f.blocks + rk->bt, 256 * K, 256 * V, false}; /* the device keeps rows */
        ops_attention_ref(&sh, &a, scores);
    }
    /* each row's keys in one block, in 5 ranges (one key each for the 6 positions of run 1's
     * first row), and in CK_ATT_SPLITS; then a prefill's kernels: FP32 tiles, and the tensor
     * cores' for the f16 caches of the shapes they have kernels for, with the same bound
     * (their f16 pairs keep f32's precision; Q in f16 alone misses it 10,000 times over). */
    const int splits[] = {1, 5, CK_ATT_SPLITS, 0, -1}; /* 0: ck_attention_prefill, -1: its _mma */
    /* the shared memory of its smallest block (2 warps: 64 rows of Q's parts, 32 keys, dv rows
     * of 32 values), against what the device lets a block have */
    int optin = 0;
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
    const bool mma_fits = kv_f16 == 3 && hd % 16 == 0 && hd <= 256 &&
                          (dv == 16 || dv == 32 || dv == 64 || dv == 128 || dv == 256) &&
                          (96 * (hd + 8) + dv * 40) * 2 <= optin;
    float *dpart = dev(NULL, (size_t)(n * n_head * CK_ATT_SPLITS * (dv + 2)) * 4);
    for (int k2 = 0; k2 < 5; k2++) {
        if (splits[k2] == 0 && (!prefill || prefill == 3)) continue; /* the FP32 tiles: one sequence's rows */
        if (splits[k2] > 0)
            ck_attention(&f.d, n, dq, NULL, dout, dkc, dvc, kv_f16, n_head, n_kv, hd, dv, scale, splits[k2], dpart,
                         NULL, NULL);
        else if (splits[k2] == 0)
            CHECK(ck_attention_prefill(&f.d, n, dq, dout, dkc, dvc, kv_f16, n_head, n_kv, hd, dv, scale, NULL));
        else {
            cudaMemset(dout, 0xff, (size_t)(n * n_head * dv) * 4); /* NaNs, unless every output is written */
            const int took = ck_attention_prefill_mma(&f.d, f.runs, f.n_runs, dq, dout, dkc, dvc, kv_f16, n_head,
                                                      n_kv, hd, dv, scale, NULL);
            CHECKF(took == mma_fits, "attention on the tensor cores, %lld/%lld wide, kv %d: took %d", (long long)hd,
                   (long long)dv, kv_f16, took);
            if (!took) continue;
        }
        back(out, dout, (size_t)(n * n_head * dv) * 4);
        const double e = test_nmse(out, ref, n * n_head * dv);
        if (getenv("EDDY_TEST_VERBOSE"))
            printf("attention %lld/%lld wide, kv %d, splits %d: nmse %g\n", (long long)hd, (long long)dv, kv_f16,
                   splits[k2], e);
        CHECKF(ok_cuda("attention") && e < NMSE_MAX, "attention %lld/%lld heads, %lld/%lld wide, rot %lld neox %d kv %d, "
               "%d splits: nmse %g", (long long)n_head, (long long)n_kv, (long long)hd, (long long)dv, (long long)n_rot,
               neox, kv_f16, splits[k2], e);
    }
    /* a decode step's attention with its gate and 8-bit form (one pass over the splits), and
     * the same without splits (the gate only) */
    if (prefill != 1 && prefill != 2) {
        const int64_t O = n * n_head * dv;
        float *gt = rand_floats(r, O, 2.0f), *gref = malloc((size_t)O * 4);
        for (int64_t i = 0; i < O; i++) gref[i] = ref[i] * (1.0f / (1.0f + expf(-gt[i])));
        float *dgt = dev(gt, (size_t)O * 4);
        void *q8 = dev(NULL, ck_gemv_scratch_bytes(n_head * dv, n));
        for (int split = 0; split < 2; split++) {
            const int held = ck_attention(&f.d, n, dq, dgt, dout, dkc, dvc, kv_f16, n_head, n_kv, hd, dv, scale,
                                          split ? CK_ATT_SPLITS : 1, dpart, q8, NULL);
            back(out, dout, (size_t)O * 4);
            const double e = test_nmse(out, gref, O);
            const int want = split && dv % 32 == 0 && n <= CK_GEMV_MAX_TOK;
            CHECKF(ok_cuda("gated attention") && e < NMSE_MAX && held == want,
                   "gated attention %lld/%lld wide, splits %d: nmse %g, held %d", (long long)hd, (long long)dv,
                   split ? CK_ATT_SPLITS : 1, e, held);
            if (held)
                CHECKF(q8_form_matches(r, dout, q8, n, n_head * dv), "attention %lld wide: its 8-bit form differs",
                       (long long)dv);
        }
        cudaFree(dgt), cudaFree(q8);
        free(gt), free(gref);
    }
    cudaFree(dpart), cudaFree(dq), cudaFree(dk), cudaFree(dvv), cudaFree(dkc), cudaFree(dvc), cudaFree(dout);
    cudaFree(dqg), cudaFree(dgate), cudaFree(dqn), cudaFree(dkn);
    free(q), free(k), free(v), free(kc), free(vc), free(cs), free(out), free(ref), free(scores);
    free(qg), free(gate), free(qn), free(kn);
    step_free(&f);
}

TEST(cuda_attention_matches_ref) {
    test_rng r = test_rng_new();
    for (int prefill = 0; prefill < 2; prefill++) {
        attention_case(&r, 4, 2, 32, 32, 32, 0, 0, prefill, false);
        attention_case(&r, 6, 2, 64, 48, 16, 1, 3, prefill, true);  /* partial rotary, f16 cache */
        attention_case(&r, 8, 1, 256, 256, 64, 1, 1, prefill, true); /* Qwen3.5's wide heads */
        attention_case(&r, 3, 3, 24, 40, 0, 0, 2, prefill, true);
        /* the heads that share a KV head in one block (ck_attention_grouped): Qwen3.5 4B's
         * 16 / 4 heads of 256, then groups of 8, 1 and 2 heads of 128, 64 and 32 */
        attention_case(&r, 16, 4, 256, 256, 64, 1, 3, prefill, true);
        attention_case(&r, 8, 1, 128, 128, 0, 0, 3, prefill, false);
        attention_case(&r, 3, 3, 64, 64, 32, 0, 3, prefill, false);
        attention_case(&r, 4, 2, 32, 32, 16, 1, 3, prefill, false);
    }
    /* the tensor cores' prefill: every kernel it has, GQA, keys of another width */
    attention_case(&r, 4, 1, 256, 256, 64, 1, 3, 2, false); /* Qwen3.5's wide heads, 2 tiles */
    /* on the emulator, the same on a GPU with 99 KiB a block (sm_86, sm_89): blocks of 2
     * warps; with 64 KiB none fits, and the tensor cores take nothing (a GPU says its own) */
    setenv("EDDY_EMU_SHARED_OPTIN", "101376", 1);
    attention_case(&r, 4, 1, 256, 256, 64, 1, 3, 2, false);
    setenv("EDDY_EMU_SHARED_OPTIN", "65536", 1);
    attention_case(&r, 2, 1, 256, 256, 64, 1, 3, 1, false);
    unsetenv("EDDY_EMU_SHARED_OPTIN");
    attention_case(&r, 4, 2, 32, 32, 32, 0, 3, 1, false);
    attention_case(&r, 3, 3, 48, 64, 16, 1, 3, 2, false);
    attention_case(&r, 2, 2, 128, 128, 0, 0, 3, 1, false);
    attention_case(&r, 4, 2, 16, 16, 16, 1, 3, 2, false);
    /* several sequences in one step: a tile (or two) a run */
    attention_case(&r, 4, 2, 64, 64, 32, 0, 3, 0, false);
    attention_case(&r, 4, 1, 256, 256, 64, 1, 3, 3, true);
}

/* Runs of 1, 6, 1 and 3 rows, or (long) of 1, 45, 3 and 20 with a checkpoint after row 20
 * of the second (to slot 8): the row-by-row kernel (chunked 0) or the chunked one on the
 * CUDA cores (1) or the tensor cores (2); single: the second run alone. */
static void mamba2_case(test_rng *r, int64_t H, int64_t P, int64_t G, int64_t N, bool with_d, bool verify,
                        int chunked, bool longer, bool single) {
    const int64_t lens[] = {1, 6, 1, 3}, pos0[] = {0, 0, 4, 2}, long_lens[] = {1, 45, 3, 20};
    step_fixture f;
    const int skip = single ? 1 : 0; /* single: the second run alone */
    step_make(&f, (longer ? long_lens : lens) + skip, pos0 + skip, single ? 1 : 4, verify);
    const int32_t ckpt[2] = {20, 8};
    if (longer && !verify)
        f.runs[1 - skip].n_ck = 1, cudaMemcpy(f.mem[3], f.runs, sizeof f.runs, cudaMemcpyHostToDevice);
    int32_t *dck = dev(ckpt, sizeof ckpt);
    const int64_t n = f.n, DI = H * P, CD = DI + 2 * G * N, n_slots = 9, sf = H * N * P;
    float *xbc = rand_floats(r, n * CD, 1.0f), *dt = rand_floats(r, n * H, 1.0f);
    float *A = malloc((size_t)H * 4), *bias = rand_floats(r, H, 0.5f), *D = rand_floats(r, H, 1.0f);
    for (int64_t h = 0; h < H; h++) A[h] = -expf(test_rng_uniform(r, -1.0f, 1.0f));
    float *state = rand_floats(r, n_slots * sf, 0.3f);
    float *dx = dev(xbc, (size_t)(n * CD) * 4), *ddt = dev(dt, (size_t)(n * H) * 4), *dA = dev(A, (size_t)H * 4);
    float *db = dev(bias, (size_t)H * 4), *dD = dev(D, (size_t)H * 4), *ds = dev(state, (size_t)(n_slots * sf) * 4);
    float *dy = dev(NULL, (size_t)(n * DI) * 4);
    if (chunked)
        CHECK(ck_mamba2_chunked(f.d.runs, f.n_runs, dck, dx, CD, ddt, H, dy, ds, H, P, G, N, dA, db, with_d ? dD : NULL,
                                chunked == 2, NULL));
    else ck_mamba2(f.d.runs, f.n_runs, dck, dx, CD, ddt, H, dy, ds, H, P, G, N, dA, db, with_d ? dD : NULL, NULL);
    float *y = malloc((size_t)(n * DI) * 4), *yr = malloc((size_t)(n * DI) * 4);
    float *st = malloc((size_t)(n_slots * sf) * 4), *sref = malloc((size_t)(n_slots * sf) * 4);
    back(y, dy, (size_t)(n * DI) * 4);
    back(st, ds, (size_t)(n_slots * sf) * 4);
    memcpy(sref, state, (size_t)(n_slots * sf) * 4);
    const mamba2_params p = {H, P, G, N, A, bias, with_d ? D : NULL, 0.0f, INFINITY};
    float *tmp = malloc((size_t)sf * 4);
    for (int k = 0; k < f.n_runs; k++) {
        const ck_run *rk = &f.runs[k];
        const float *x0 = xbc + rk->row0 * CD;
        const mamba2_io io = {x0, CD, x0 + DI, CD, x0 + DI + G * N, CD, dt + rk->row0 * H, H, yr + rk->row0 * DI, DI};
        float *S = verify ? tmp : sref + rk->slot_in * sf;
        if (verify) memcpy(tmp, sref + rk->slot_in * sf, (size_t)sf * 4);
        if (rk->n_ck) { /* the state after row 20 to slot 8, then the rest */
            const int64_t done = ckpt[0] + 1, first[2] = {0, done}, rest_start[2] = {0, rk->n - done};
            mamba2_scan_ref(&p, &io, first, &S, 1, NULL);
            memcpy(sref + ckpt[1] * sf, S, (size_t)sf * 4);
            const float *x1 = x0 + done * CD;
            const mamba2_io rest = {x1, CD, x1 + DI, CD, x1 + DI + G * N, CD, dt + (rk->row0 + done) * H, H,
                                    yr + (rk->row0 + done) * DI, DI};
            mamba2_scan_ref(&p, &rest, rest_start, &S, 1, NULL);
        } else {
            const int64_t seq_start[2] = {0, rk->n};
            mamba2_scan_ref(&p, &io, seq_start, &S, 1, NULL);
        }
    }
    const double ey = test_nmse(y, yr, n * DI), es = test_nmse(st, sref, n_slots * sf);
    CHECKF(ok_cuda("mamba2") && ey < NMSE_MAX && es < NMSE_MAX, "mamba2 %lld heads of %lld, %lld groups, state %lld, "
           "D %d verify %d chunked %d long %d: outputs nmse %g, states %g", (long long)H, (long long)P, (long long)G,
           (long long)N, with_d, verify, chunked, longer, ey, es);
    cudaFree(dck), cudaFree(dx), cudaFree(ddt), cudaFree(dA), cudaFree(db), cudaFree(dD), cudaFree(ds), cudaFree(dy);
    free(xbc), free(dt), free(A), free(bias), free(D), free(state), free(y), free(yr), free(st), free(sref), free(tmp);
    step_free(&f);
}

TEST(cuda_mamba2_matches_scan_ref) {
    test_rng r = test_rng_new();
    for (int chunked = 0; chunked < 3; chunked++)
        for (int longer = 0; longer < 2; longer++) {
            mamba2_case(&r, 8, 16, 2, 16, true, false, chunked, longer, false);
            /* two column blocks, the last partial */
            mamba2_case(&r, 4, 80, 1, 24, false, false, chunked, longer, false);
            mamba2_case(&r, 2, 64, 2, 128, true, false, chunked, longer, false);
            mamba2_case(&r, 2, 64, 2, 128, true, false, chunked, longer, true); /* one sequence */
            mamba2_case(&r, 2, 64, 1, 512, true, false, chunked, longer, false); /* a state too large for 64 columns */
            mamba2_case(&r, 8, 16, 2, 16, true, true, chunked, longer, false);
        }
}

TEST(cuda_group_norm_and_kept_rows) {
    test_rng r = test_rng_new();
    const int64_t rows = 4, G = 3, gs = 40, n = G * gs;
    float *y = rand_floats(&r, rows * n, 2.0f), *z = rand_floats(&r, rows * n, 1.0f), *w = rand_floats(&r, n, 1.0f);
    float *ref = malloc((size_t)(rows * n) * 4), *got = malloc((size_t)(rows * n) * 4);
    float *dy = dev(y, (size_t)(rows * n) * 4), *dz = dev(z, (size_t)(rows * n) * 4), *dw = dev(w, (size_t)n * 4);
    float *dout = dev(NULL, (size_t)(rows * n) * 4);
    gated_rmsnorm_group_ref(rows, G, gs, y, n, z, n, w, 1e-5f, ref, n);
    ck_gated_rmsnorm_group(rows, G, gs, dy, n, dz, n, dw, 1e-5f, dout, n, NULL);
    back(got, dout, (size_t)(rows * n) * 4);
    CHECKF(ok_cuda("group norm") && test_nmse(got, ref, rows * n) < NMSE_MAX, "group norm nmse %g",
           test_nmse(got, ref, rows * n));
    /* rows 2 and 0 kept in slots 3 and 1 (segments: 7 floats of y, 5 of z), then gathered
     * back into rows 0 and 1 of zeroed buffers */
    const int32_t items[4] = {2, 3, 0, 1};
    int32_t *ditems = dev(items, sizeof items);
    const int64_t rec_floats = 20;
    float *drec = dev(NULL, (size_t)(5 * rec_floats) * 4);
    ck_segments seg = {2, {dy, dz}, {n, n}, {7, 5}};
    ck_keep_rows(ditems, 2, 0, &seg, drec, rec_floats, NULL);
    cudaMemset(dy, 0, (size_t)(rows * n) * 4);
    cudaMemset(dz, 0, (size_t)(rows * n) * 4);
    ck_keep_rows(ditems, 2, 1, &seg, drec, rec_floats, NULL);
    float *y2 = malloc((size_t)(rows * n) * 4), *z2 = malloc((size_t)(rows * n) * 4);
    back(y2, dy, (size_t)(rows * n) * 4);
    back(z2, dz, (size_t)(rows * n) * 4);
    CHECK(ok_cuda("keep rows"));
    CHECK(!memcmp(y2, y + 2 * n, 7 * 4) && !memcmp(z2, z + 2 * n, 5 * 4));
    CHECK(!memcmp(y2 + n, y, 7 * 4) && !memcmp(z2 + n, z, 5 * 4));
    CHECK(y2[7] == 0.0f && z2[5] == 0.0f); /* nothing past the segments */
    cudaFree(dy), cudaFree(dz), cudaFree(dw), cudaFree(dout), cudaFree(ditems), cudaFree(drec);
    free(y), free(z), free(w), free(ref), free(got), free(y2), free(z2);
}
