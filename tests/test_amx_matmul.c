/*
 * test_amx_matmul.c — the AMX prefill product (ops/matmul_amx.h), through matmul().
 *
 * Oracle: the same product in double over the bf16-rounded operands,
 *   want[t][r] = sum_k bf16(W[r][k]) * bf16(x[t][k]),  W as dequantize_row_ref gives it.
 * AMX multiplies bf16 pairs exactly and accumulates in float32, 32 k per tile step, so
 *   |got - want| <= (n_in / 32 + 64) * 2^-23 * sum_k |bf16(W[r][k]) * bf16(x[t][k])| + 2^-120
 * (each step adds its 16 pair products into one float32: a rounding per step and per
 * pair sum, with room). Shapes cover partial token blocks, rows left to the 8-bit
 * kernels (n_out not a multiple of 32), partial weight panels (n_in not a multiple of
 * 512), several threads, the SIMD dequantizers (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K, BF16)
 * and the reference one (others), and each with its weights packed (qpack.h), which
 * the tiles read back bit for bit. Where the CPU or OS lacks AMX the test says so and
 * checks nothing.
 */
#include "test.h"
#include "test_blocks.h"

#include <math.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/isa.h"
#include "base/threadpool.h"
#include "ops/matmul.h"
#if defined(__x86_64__)
#include "ops/matmul_amx.h"

static float bf16_round(float v) { return bf16_to_f32(f32_to_bf16(v)); }

/* Random weight rows: random bytes with every fp16 scale field in a sane range. */
static void fill_weights(test_rng *r, qtype t, uint8_t *w, size_t rb, int64_t n_in, int64_t n_out) {
    const qtype_traits *tr = qtype_info(t);
    for (int64_t o = 0; o < n_out; o++) {
        uint8_t *row = w + o * rb;
        if (t == QTYPE_BF16) {
            for (int64_t i = 0; i < n_in; i++) ((uint16_t *)row)[i] = f32_to_bf16(test_rng_normal(r));
            continue;
        }
        for (size_t i = 0; i < rb; i++) row[i] = (uint8_t)test_rng_u64(r);
        for (int64_t b = 0; b < n_in / tr->block_size; b++) {
            uint8_t *blk = row + b * tr->type_size;
            for (const int *f = test_fp16_fields(t); *f >= 0; f++) {
                uint16_t h = f32_to_fp16(test_rng_uniform(r, -0.05f, 0.05f));
                memcpy(blk + *f, &h, 2);
            }
        }
    }
}

static void check_amx(test_rng *r, threadpool *pool, qtype t, int64_t n_in, int64_t n_out, int64_t n_tok) {
    size_t rb;
    REQUIRE(qtype_row_bytes(t, n_in, &rb));
    uint8_t *wdata = malloc(rb * (size_t)n_out);
    fill_weights(r, t, wdata, rb, n_in, n_out);
    matmul_weight w;
    REQUIRE(matmul_weight_init(&w, t, n_in, n_out, wdata));
    const int64_t xs = n_in + 5, ys = n_out + 3;
    float *x = malloc(sizeof(float) * (size_t)(xs * n_tok)), *y = malloc(sizeof(float) * (size_t)(ys * n_tok));
    for (int64_t i = 0; i < xs * n_tok; i++) x[i] = test_rng_normal(r);
    for (int64_t i = 0; i < ys * n_tok; i++) y[i] = -777.0f;
    size_t sb = matmul_scratch_bytes(&w, n_tok);
    void *scratch = malloc(sb);
    matmul(pool, &w, x, xs, n_tok, y, ys, scratch, sb);
    /* packed weights (where this CPU packs the type): the tiles read the rows back from
     * the packed copy, so their rows come out bit for bit as from the rows; the rows
     * left over take the packed kernels */
    const size_t pb = matmul_pack_bytes(&w);
    matmul_weight wp = w;
    void *pbuf = pb ? eddy_malloc_aligned(pb, 64) : NULL;
    float *yp = malloc(sizeof(float) * (size_t)(ys * n_tok));
    for (int64_t i = 0; i < ys * n_tok; i++) yp[i] = -777.0f;
    if (pb) {
        REQUIRE(pbuf);
        matmul_pack(&wp, pbuf);
        matmul(pool, &wp, x, xs, n_tok, yp, ys, scratch, sb);
    }

    float *wd = malloc(sizeof(float) * (size_t)n_in);
    int bad = 0;
    const int64_t amx_rows = n_out / 32 * 32;
    for (int64_t o = 0; o < n_out && bad < 3; o++) {
        dequantize_row_ref(t, wdata + o * rb, wd, n_in);
        for (int64_t k = 0; k < n_in; k++) wd[k] = bf16_round(wd[k]);
        for (int64_t tk = 0; tk < n_tok && bad < 3; tk++) {
            double want = 0, mag = 0;
            for (int64_t k = 0; k < n_in; k++) {
                double p = (double)wd[k] * bf16_round(x[tk * xs + k]);
                want += p;
                mag += fabs(p);
            }
            const double got = y[tk * ys + o];
            /* rows past the last whole block of 32 run on the 8-bit kernels: 1% of the
             * magnitude covers their activation quantization */
            double tol = o < amx_rows ? (n_in / 32.0 + 64) * ldexp(1, -23) * mag + 1e-36 : 0.01 * mag;
            if (!CHECKF(fabs(got - want) <= tol, "%s %lldx%lld n_tok %lld threads %d: y[%lld][%lld] = %.9g, want %.9g",
                        qtype_name(t), (long long)n_in, (long long)n_out, (long long)n_tok, pool_size(pool),
                        (long long)tk, (long long)o, got, want))
                bad++;
            if (!pb) continue;
            const float gp = yp[tk * ys + o], g32 = y[tk * ys + o];
            const bool ok = o < amx_rows ? memcmp(&gp, &g32, sizeof gp) == 0 : fabs(gp - want) <= tol;
            if (!CHECKF(ok, "%s packed %lldx%lld n_tok %lld: y[%lld][%lld] = %.9g, from the rows %.9g, want %.9g",
                        qtype_name(t), (long long)n_in, (long long)n_out, (long long)n_tok, (long long)tk,
                        (long long)o, (double)gp, (double)g32, want))
                bad++;
        }
    }
    for (int64_t tk = 0; tk < n_tok; tk++) CHECK(y[tk * ys + n_out] == -777.0f);

    free(wdata), free(x), free(y), free(yp), free(scratch), free(wd);
    eddy_free_aligned(pbuf);
}

#endif

TEST(matmul_amx_matches_bf16_oracle) {
#if defined(__x86_64__)
    if (!isa_has(ISA_EXT_AMX_BF16)) {
        printf("  (no AMX-BF16 here, or EDDY_FORCE_REF: nothing to check)\n");
        return;
    }
    test_rng r = test_rng_new();
    threadpool *pool;
    REQUIRE(pool_create(&pool, 3, NULL) == EDDY_OK);
    const qtype fast[] = {QTYPE_Q8_0, QTYPE_Q4_0, QTYPE_Q4_1, QTYPE_BF16};
    for (int i = 0; i < 4; i++) {
        check_amx(&r, pool, fast[i], 544, 100, 33); /* partial panel, tail rows, partial token block */
        check_amx(&r, NULL, fast[i], 64, 32, 16);
    }
    check_amx(&r, pool, QTYPE_Q4_K, 1280, 96, 70);
    check_amx(&r, pool, QTYPE_Q6_K, 768, 64, 32);
    check_amx(&r, pool, QTYPE_Q5_K, 512, 40, 17);  /* the reference dequantizer */
    check_amx(&r, pool, QTYPE_Q2_K, 256, 33, 48);
    /* every other packed format, with rows left over */
    check_amx(&r, pool, QTYPE_Q6_K, 512, 50, 20);
    check_amx(&r, pool, QTYPE_Q5_0, 320, 40, 20);
    check_amx(&r, pool, QTYPE_Q5_1, 160, 48, 16);
    check_amx(&r, pool, QTYPE_IQ4_NL, 256, 35, 18);
    check_amx(&r, pool, QTYPE_IQ4_XS, 512, 64, 17);
    CHECK(matmul_amx_usable(&(matmul_weight){QTYPE_Q8_0, 64, 32, 68, NULL, NULL}, 16));
    CHECK(!matmul_amx_usable(&(matmul_weight){QTYPE_Q8_0, 64, 32, 68, NULL, NULL}, 15)); /* too few tokens */
    CHECK(!matmul_amx_usable(&(matmul_weight){QTYPE_F32, 64, 32, 256, NULL, NULL}, 64));  /* keeps f32 precision */
    CHECK(!matmul_amx_usable(&(matmul_weight){QTYPE_Q8_0, 64, 31, 68, NULL, NULL}, 64));  /* not one block of rows */
    pool_destroy(pool);
#else
    printf("  (not x86-64: nothing to check)\n");
#endif
}
