/*
 * test_quant.c — the block formats: layouts, fp16/bf16 conversions, dequantization
 * against golden data from the `gguf` Python package, activation quantization, and
 * the reference dot products against a float64 dot of dequantized rows.
 *
 * Golden files: tests/data/quant/<TYPE>.bin, made by scripts/gen_quant_golden.py (format
 * described there and in tests/data/quant/README.md).
 */
#include "test.h"
#include "test_blocks.h"

#include <float.h>
#include <stdlib.h>

#include "quant/quant.h"

/* ==== Helpers ==== */

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Bit-identical, except that any NaN matches any NaN. */
static bool same_float(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return f32_bits(a) == f32_bits(b);
}

static bool fp16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

/* Compares n floats bit for bit; prints the first few differences. */
static bool check_floats_bitexact(const char *what, const float *got, const float *want, int64_t n) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (same_float(got[i], want[i])) continue;
        if (bad++ < 5)
            CHECKF(false, "%s[%lld]: got %.9g (0x%08x), want %.9g (0x%08x)", what, (long long)i,
                   (double)got[i], f32_bits(got[i]), (double)want[i], f32_bits(want[i]));
    }
    return CHECKF(bad == 0, "%s: %lld of %lld values differ", what, (long long)bad, (long long)n);
}

/* ==== Golden files ==== */

typedef struct {
    uint32_t kind; /* 0: bytes -> floats (dequantize); 1: floats -> bytes (quantize) */
    uint32_t type;
    int64_t n;        /* elements */
    size_t n_bytes;
    uint8_t *bytes;   /* (n_bytes) malloc'd, suitably aligned */
    float *vals;      /* (n) */
} golden;

static uint32_t rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd_u64(const uint8_t *p) { return rd_u32(p) | (uint64_t)rd_u32(p + 4) << 32; }

static bool golden_load(const char *name, uint32_t kind, uint32_t type, golden *g) {
    char rel[256];
    snprintf(rel, sizeof rel, "quant/%s", name);
    size_t size = 0;
    uint8_t *file = test_read_file(test_data_path(rel), &size);
    memset(g, 0, sizeof *g);
    if (!CHECKF(file != NULL, "cannot read %s", test_data_path(rel))) return false;
    bool ok = CHECKF(size >= 32 && memcmp(file, "EDQG", 4) == 0 && rd_u32(file + 4) == 1,
                     "%s: bad header", name);
    if (ok) {
        g->kind = rd_u32(file + 8);
        g->type = rd_u32(file + 12);
        uint64_t n = rd_u64(file + 16), nb = rd_u64(file + 24);
        size_t want_bytes = 0;
        ok = CHECKF(g->kind == kind && g->type == type, "%s: kind %u type %u", name, g->kind, g->type) &&
             CHECKF(n < (1u << 24) && qtype_row_bytes(type, (int64_t)n, &want_bytes) &&
                        want_bytes == nb && size == 32 + nb + 4 * n,
                    "%s: sizes do not add up", name);
        if (ok) {
            g->n = (int64_t)n;
            g->n_bytes = (size_t)nb;
            g->bytes = malloc(nb + 1);
            g->vals = malloc(4 * n + 4);
            memcpy(g->bytes, file + 32, nb);
            memcpy(g->vals, file + 32 + nb, 4 * n);
        }
    }
    free(file);
    return ok;
}

static void golden_free(golden *g) {
    free(g->bytes);
    free(g->vals);
}

/* ==== Type table and layouts ==== */

static const qtype supported_types[] = {
    QTYPE_F32,  QTYPE_F16,  QTYPE_BF16, QTYPE_Q4_0, QTYPE_Q4_1,   QTYPE_Q5_0,   QTYPE_Q5_1, QTYPE_Q8_0,
    QTYPE_Q2_K, QTYPE_Q3_K, QTYPE_Q4_K, QTYPE_Q5_K, QTYPE_Q6_K, QTYPE_IQ4_NL, QTYPE_IQ4_XS,
};
#define N_SUPPORTED (int)(sizeof supported_types / sizeof supported_types[0])

static bool is_supported_here(uint32_t t) {
    for (int i = 0; i < N_SUPPORTED; i++)
        if (supported_types[i] == t) return true;
    return false;
}

TEST(quant_struct_sizes_match_table) {
    struct {
        qtype t;
        int64_t block;
        size_t size;
    } cases[] = {
        {QTYPE_F32, 1, sizeof(float)},
        {QTYPE_F16, 1, sizeof(uint16_t)},
        {QTYPE_BF16, 1, sizeof(uint16_t)},
        {QTYPE_Q4_0, QK4_0, sizeof(block_q4_0)},
        {QTYPE_Q4_1, QK4_1, sizeof(block_q4_1)},
        {QTYPE_Q5_0, QK5_0, sizeof(block_q5_0)},
        {QTYPE_Q5_1, QK5_1, sizeof(block_q5_1)},
        {QTYPE_Q8_0, QK8_0, sizeof(block_q8_0)},
        {QTYPE_Q2_K, QK_K, sizeof(block_q2_K)},
        {QTYPE_Q3_K, QK_K, sizeof(block_q3_K)},
        {QTYPE_Q4_K, QK_K, sizeof(block_q4_K)},
        {QTYPE_Q5_K, QK_K, sizeof(block_q5_K)},
        {QTYPE_Q6_K, QK_K, sizeof(block_q6_K)},
        {QTYPE_IQ4_NL, QK4_NL, sizeof(block_iq4_nl)},
        {QTYPE_IQ4_XS, QK_K, sizeof(block_iq4_xs)},
        {QTYPE_Q8_K, QK_K, sizeof(block_q8_K)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const qtype_traits *t = qtype_info(cases[i].t);
        REQUIRE(t != NULL);
        CHECKF(t->block_size == cases[i].block && t->type_size == cases[i].size,
               "%s: table says %lld/%zu, struct %lld/%zu", t->name, (long long)t->block_size,
               t->type_size, (long long)cases[i].block, cases[i].size);
    }
}

TEST(quant_supported_flags) {
    /* exactly the 15 weight types above are supported; everything else is not */
    for (uint32_t id = 0; id < QTYPE_COUNT; id++) {
        const qtype_traits *t = qtype_info(id);
        if (!t) continue;
        CHECKF(t->supported == is_supported_here(id), "%s supported=%d", t->name, t->supported);
        CHECK(quant_weight_supported((qtype)id) == is_supported_here(id));
    }
    const qtype unsupported[] = {QTYPE_Q8_1,  QTYPE_Q8_K,  QTYPE_IQ2_XXS, QTYPE_IQ2_XS, QTYPE_IQ3_XXS,
                                 QTYPE_IQ1_S, QTYPE_IQ3_S, QTYPE_IQ2_S,   QTYPE_IQ1_M,  QTYPE_TQ1_0,
                                 QTYPE_TQ2_0, QTYPE_MXFP4, QTYPE_I8,      QTYPE_I32,    QTYPE_F64};
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
        const qtype_traits *t = qtype_info(unsupported[i]);
        REQUIRE(t != NULL);
        CHECKF(!t->supported, "%s should be unsupported", t->name);
    }
    CHECK(!quant_weight_supported((qtype)4)); /* removed id */
}

TEST(quant_dot_type_map) {
    CHECK_EQ(quant_dot_type(QTYPE_F32), QTYPE_F32);
    CHECK_EQ(quant_dot_type(QTYPE_F16), QTYPE_F32);
    CHECK_EQ(quant_dot_type(QTYPE_BF16), QTYPE_F32);
    const qtype q8_0[] = {QTYPE_Q4_0, QTYPE_Q4_1, QTYPE_Q5_0, QTYPE_Q5_1, QTYPE_Q8_0, QTYPE_IQ4_NL};
    for (size_t i = 0; i < sizeof q8_0 / sizeof q8_0[0]; i++) CHECK_EQ(quant_dot_type(q8_0[i]), QTYPE_Q8_0);
    const qtype q8_k[] = {QTYPE_Q2_K, QTYPE_Q3_K, QTYPE_Q4_K, QTYPE_Q5_K, QTYPE_Q6_K, QTYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof q8_k / sizeof q8_k[0]; i++) CHECK_EQ(quant_dot_type(q8_k[i]), QTYPE_Q8_K);
}

/* ==== fp16 / bf16 conversions ==== */

TEST(fp16_every_value_round_trips) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fp16_to_f32((uint16_t)h);
        uint16_t back = f32_to_fp16(f);
        if (fp16_is_nan((uint16_t)h)) {
            CHECKF(isnan(f) && fp16_is_nan(back) && (back & 0x8000) == (h & 0x8000) &&
                       (back & 0x1ff) == (h & 0x1ff),
                   "NaN 0x%04x -> 0x%08x -> 0x%04x", h, f32_bits(f), back);
        } else {
            CHECKF(back == h, "0x%04x -> %.9g -> 0x%04x", h, (double)f, back);
        }
    }
    /* a few exact values */
    CHECK(fp16_to_f32(0x3c00) == 1.0f);
    CHECK(fp16_to_f32(0x7bff) == 65504.0f);
    CHECK(fp16_to_f32(0x0001) == ldexpf(1.0f, -24));
    CHECK(fp16_to_f32(0x03ff) == ldexpf(1023.0f, -24));
    CHECK(fp16_to_f32(0xc000) == -2.0f);
    CHECK(isinf(fp16_to_f32(0x7c00)) && fp16_to_f32(0xfc00) < 0);
}

TEST(fp16_rounds_to_nearest_even) {
    /* every pair of adjacent finite halves of either sign: the midpoint (exact in
     * float32) goes to the even one, one float32 ulp either side to the nearer one */
    for (uint32_t h = 0; h < 0x7bff; h++) {
        for (uint32_t sign = 0; sign <= 0x8000; sign += 0x8000) {
            uint16_t lo = (uint16_t)(h | sign), hi = (uint16_t)((h + 1) | sign);
            float a = fp16_to_f32(lo), b = fp16_to_f32(hi);
            float mid = (a + b) * 0.5f;
            uint16_t even = (h & 1) ? hi : lo;
            CHECKF(f32_to_fp16(mid) == even, "tie between 0x%04x and 0x%04x", lo, hi);
            float toward_a = nextafterf(mid, a), toward_b = nextafterf(mid, b);
            CHECKF(f32_to_fp16(toward_a) == lo && f32_to_fp16(toward_b) == hi, "near tie 0x%04x", lo);
        }
    }
    CHECK_EQ(f32_to_fp16(65519.996f), 0x7bff);
    CHECK_EQ(f32_to_fp16(65520.0f), 0x7c00);
    CHECK_EQ(f32_to_fp16(-1e30f), 0xfc00);
    CHECK_EQ(f32_to_fp16(INFINITY), 0x7c00);
    CHECK_EQ(f32_to_fp16(ldexpf(1.0f, -25)), 0x0000);                         /* tie to 0 */
    CHECK_EQ(f32_to_fp16(nextafterf(ldexpf(1.0f, -25), 1.0f)), 0x0001);
    CHECK_EQ(f32_to_fp16(ldexpf(3.0f, -25)), 0x0002);                         /* 1.5 -> 2 */
    CHECK_EQ(f32_to_fp16(-ldexpf(1.0f, -26)), 0x8000);
    CHECK_EQ(f32_to_fp16(f32_from(0x00000001)), 0x0000);                      /* f32 subnormal */
    CHECK(fp16_is_nan(f32_to_fp16(NAN)));
    CHECK(fp16_is_nan(f32_to_fp16(f32_from(0x7f800001)))); /* payload only in low bits */
    CHECK(fp16_is_nan(f32_to_fp16(f32_from(0xff800001))));
}

TEST(fp16_quantize_matches_numpy) {
    golden g;
    if (!golden_load("F16_quant.bin", 1, QTYPE_F16, &g)) return;
    uint16_t *got = malloc((size_t)g.n * 2);
    quantize_row_ref(QTYPE_F16, g.vals, got, g.n);
    int64_t bad = 0;
    for (int64_t i = 0; i < g.n; i++) {
        uint16_t want = (uint16_t)(g.bytes[2 * i] | g.bytes[2 * i + 1] << 8);
        bool ok = fp16_is_nan(want) ? fp16_is_nan(got[i]) : got[i] == want;
        if (!ok && bad++ < 5)
            CHECKF(false, "f32 0x%08x: got 0x%04x want 0x%04x", f32_bits(g.vals[i]), got[i], want);
    }
    CHECK_EQ(bad, 0);
    free(got);
    golden_free(&g);
}

TEST(bf16_every_value_round_trips) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = bf16_to_f32((uint16_t)h);
        CHECK_EQ(f32_bits(f), h << 16);
        bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
        uint16_t want = nan ? (uint16_t)(h | 0x40) : (uint16_t)h; /* NaNs come back quiet */
        CHECKF(f32_to_bf16(f) == want, "0x%04x", h);
    }
    CHECK_EQ(f32_to_bf16(f32_from(0x3f808000)), 0x3f80); /* tie to even (down) */
    CHECK_EQ(f32_to_bf16(f32_from(0x3f818000)), 0x3f82); /* tie to even (up) */
    CHECK_EQ(f32_to_bf16(f32_from(0x3f808001)), 0x3f81);
    CHECK_EQ(f32_to_bf16(FLT_MAX), 0x7f80); /* rounds past the largest bf16 */
}

TEST(bf16_quantize_matches_gguf) {
    golden g;
    if (!golden_load("BF16_quant.bin", 1, QTYPE_BF16, &g)) return;
    uint16_t *got = malloc((size_t)g.n * 2);
    quantize_row_ref(QTYPE_BF16, g.vals, got, g.n);
    int64_t bad = 0;
    for (int64_t i = 0; i < g.n; i++) {
        uint16_t want = (uint16_t)(g.bytes[2 * i] | g.bytes[2 * i + 1] << 8);
        if (got[i] != want && bad++ < 5)
            CHECKF(false, "f32 0x%08x: got 0x%04x want 0x%04x", f32_bits(g.vals[i]), got[i], want);
    }
    CHECK_EQ(bad, 0); /* bit-exact, NaNs included: same quieting rule */
    free(got);
    golden_free(&g);
}

/* ==== Dequantization against gguf.quants ==== */

TEST(quant_dequant_matches_gguf) {
    for (int i = 0; i < N_SUPPORTED; i++) {
        qtype t = supported_types[i];
        char name[64];
        snprintf(name, sizeof name, "%s.bin", qtype_name(t));
        golden g;
        if (!golden_load(name, 0, t, &g)) continue;
        float *got = malloc((size_t)g.n * sizeof(float));
        dequantize_row_ref(t, g.bytes, got, g.n);
        check_floats_bitexact(qtype_name(t), got, g.vals, g.n);
        /* the same row one block at a time */
        const qtype_traits *tr = qtype_info(t);
        for (int64_t b = 0; b < g.n / tr->block_size; b++)
            dequantize_row_ref(t, g.bytes + b * tr->type_size, got + b * tr->block_size, tr->block_size);
        check_floats_bitexact(qtype_name(t), got, g.vals, g.n);
        free(got);
        golden_free(&g);
    }
}

/* ==== Activation quantization ==== */

TEST(quant_q8_0_matches_gguf) {
    golden g;
    if (!golden_load("Q8_0_quant.bin", 1, QTYPE_Q8_0, &g)) return;
    uint8_t *got = malloc(g.n_bytes);
    quantize_row_q8_0_ref(g.vals, got, g.n);
    for (size_t b = 0; b < g.n_bytes / sizeof(block_q8_0); b++) {
        const uint8_t *x = got + b * sizeof(block_q8_0), *y = g.bytes + b * sizeof(block_q8_0);
        CHECKF(memcmp(x, y, sizeof(block_q8_0)) == 0, "block %zu differs (d 0x%02x%02x vs 0x%02x%02x)", b,
               x[1], x[0], y[1], y[0]);
    }
    free(got);
    golden_free(&g);
}

/* A row of n floats of random magnitudes: normal(0, 1) * 2^[-e, e], with some
 * all-zero and single-spike blocks. */
static void random_acts(test_rng *r, float *x, int64_t n, int block, float e) {
    for (int64_t b = 0; b < n / block; b++) {
        float s = ldexpf(1.0f, (int)test_rng_uniform(r, -e, e));
        uint32_t kind = test_rng_below(r, 8);
        for (int j = 0; j < block; j++) {
            float v = kind == 0 ? 0.0f : test_rng_normal(r) * s;
            if (kind == 1) v = j == 3 ? s : 0.0f;
            x[b * block + j] = v;
        }
    }
}

TEST(quant_q8_0_properties) {
    test_rng r = test_rng_new();
    enum { N = 32 * 64 };
    static float x[N], y[N];
    static block_q8_0 q[N / 32];
    for (int rep = 0; rep < 20; rep++) {
        random_acts(&r, x, N, 32, 12.0f); /* |x| well inside fp16 d's range */
        quantize_row_q8_0_ref(x, q, N);
        dequantize_row_ref(QTYPE_Q8_0, q, y, N);
        for (int b = 0; b < N / 32; b++) {
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
            int qmax = 0;
            for (int j = 0; j < 32; j++) qmax = abs(q[b].qs[j]) > qmax ? abs(q[b].qs[j]) : qmax;
            if (amax == 0) {
                CHECK(q[b].d == 0 && qmax == 0);
                continue;
            }
            CHECK_EQ(qmax, 127);
            /* half a step, plus the fp16 rounding of d (2^-11 relative, or 2^-25 absolute
             * where d is an fp16 subnormal) times |q| <= 127 */
            float d = amax / 127;
            float bound = (0.5f * d + 127 * fmaxf(d * 0x1p-11f, 0x1p-25f)) * 1.0001f;
            for (int j = 0; j < 32; j++)
                CHECKF(fabsf(x[32 * b + j] - y[32 * b + j]) <= bound, "block %d elem %d: %g vs %g", b, j,
                       (double)x[32 * b + j], (double)y[32 * b + j]);
        }
    }
}

TEST(quant_q8_0_nonfinite_inputs_stay_defined) {
    /* NaN, inf and a subnormal maximum (1/d overflows) must not be undefined
     * behaviour (the sanitizer build checks the float->int conversions). */
    float x[96];
    for (int j = 0; j < 96; j++) x[j] = (float)j - 40.0f;
    x[1] = NAN;
    x[33] = INFINITY;
    for (int j = 64; j < 96; j++) x[j] = j == 70 ? 1e-38f : 0.0f; /* d = 7.9e-41, 1/d = inf */
    block_q8_0 q[3];
    quantize_row_q8_0_ref(x, q, 96);
    for (int b = 0; b < 3; b++)
        for (int j = 0; j < 32; j++) CHECK(q[b].qs[j] >= -127 && q[b].qs[j] <= 127);
    CHECK_EQ(q[0].qs[1], 0);
    CHECK_EQ(q[2].qs[6], 127);
    CHECK_EQ(q[2].qs[7], 0);
}

static void check_q8_K_block(const float *x, const block_q8_K *q, const float *y, int b) {
    float amax = 0;
    for (int j = 0; j < QK_K; j++) amax = fmaxf(amax, fabsf(x[j]));
    int qmax = 0;
    for (int i = 0; i < QK_K / 16; i++) {
        int s = 0;
        for (int j = 0; j < 16; j++) {
            s += q->qs[16 * i + j];
            CHECK(q->qs[16 * i + j] >= -127 && q->qs[16 * i + j] <= 127);
            qmax = abs(q->qs[16 * i + j]) > qmax ? abs(q->qs[16 * i + j]) : qmax;
        }
        CHECKF(q->bsums[i] == s, "block %d bsums[%d] = %d, sum %d", b, i, q->bsums[i], s);
    }
    if (amax == 0) {
        CHECK(q->d == 0 && qmax == 0);
        return;
    }
    CHECKF(qmax == 127, "block %d: qmax %d", b, qmax);
    CHECK(isfinite(q->d) && q->d >= 0);
    /* q = round(x * 127 / amax) is within half a step; d = amax / 127 rounded to
     * float32 adds |q| * (ulp of d) / 2 <= amax * 2^-24; the product d * q rounds once
     * more (2^-24 relative); a subnormal d adds up to 2^-150 * 128 absolute. */
    float bound = amax / 127 * 0.5f * 1.00001f + amax * 0x1p-22f + 0x1p-140f;
    for (int j = 0; j < QK_K; j++) {
        CHECK(!isnan(y[j]) && isfinite(y[j]));
        CHECKF(fabsf(x[j] - y[j]) <= bound, "block %d elem %d: %g vs %g (bound %g)", b, j, (double)x[j],
               (double)y[j], (double)bound);
    }
}

TEST(quant_q8_K_properties) {
    test_rng r = test_rng_new();
    enum { N = QK_K * 16 };
    static float x[N], y[N];
    static block_q8_K q[N / QK_K];
    /* scale exponents: ordinary, tiny (down into float32 subnormals), huge */
    const float exps[] = {6, 0, 100, 125};
    const float centre[] = {0, -140, 0, 0};
    for (int rep = 0; rep < 16; rep++) {
        int k = rep % 4;
        for (int64_t b = 0; b < N / QK_K; b++) {
            float s = ldexpf(1.0f, (int)(centre[k] + test_rng_uniform(&r, -exps[k], exps[k])));
            uint32_t kind = test_rng_below(&r, 8);
            for (int j = 0; j < QK_K; j++) {
                float v = kind == 0 ? 0.0f : test_rng_normal(&r) * s;
                if (kind == 1) v = j == 200 ? -s : 0.0f;
                if (kind == 2 && j == 17) v = FLT_MAX; /* largest finite */
                x[b * QK_K + j] = v;
            }
        }
        quantize_row_q8_K_ref(x, q, N);
        dequantize_row_ref(QTYPE_Q8_K, q, y, N);
        for (int b = 0; b < N / QK_K; b++) check_q8_K_block(x + b * QK_K, &q[b], y + b * QK_K, b);
    }
    /* all zeros, and -0 */
    for (int j = 0; j < QK_K; j++) x[j] = j % 2 ? -0.0f : 0.0f;
    quantize_row_q8_K_ref(x, q, QK_K);
    CHECK(q[0].d == 0);
    for (int j = 0; j < QK_K; j++) CHECK_EQ(q[0].qs[j], 0);
    /* NaN and inf do not trip the sanitizer */
    x[5] = NAN;
    x[6] = -INFINITY;
    x[7] = 1.0f;
    quantize_row_q8_K_ref(x, q, QK_K);
    for (int j = 0; j < QK_K; j++) CHECK(q[0].qs[j] >= -127 && q[0].qs[j] <= 127);
}

/* ==== Dot products ==== */

/* A random weight row: floats for F32/F16/BF16; random bytes with moderate random
 * fp16 scales (|s| in [2^-8, 2^2]) for block types. */
static void random_weights(test_rng *r, qtype t, void *w, int64_t n) {
    const qtype_traits *tr = qtype_info(t);
    size_t bytes = 0;
    qtype_row_bytes(t, n, &bytes);
    if (t == QTYPE_F32 || t == QTYPE_F16 || t == QTYPE_BF16) {
        for (int64_t i = 0; i < n; i++) {
            float v = test_rng_normal(r);
            if (t == QTYPE_F32) ((float *)w)[i] = v;
            if (t == QTYPE_F16) ((uint16_t *)w)[i] = f32_to_fp16(v);
            if (t == QTYPE_BF16) ((uint16_t *)w)[i] = f32_to_bf16(v);
        }
        return;
    }
    uint8_t *p = w;
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)test_rng_u64(r);
    for (int64_t b = 0; b < n / tr->block_size; b++) {
        for (const int *f = test_fp16_fields(t); *f >= 0; f++) {
            float s = ldexpf(test_rng_uniform(r, 1.0f, 2.0f), (int)test_rng_uniform(r, -8, 2));
            if (test_rng_below(r, 2)) s = -s;
            uint16_t h = f32_to_fp16(s);
            memcpy(p + b * tr->type_size + *f, &h, 2);
        }
    }
}

/* The same row with every quant set to zero, so that dequantizing it yields only the
 * offset term (m of Q4_1/Q5_1, -dmin*m of Q2_K/Q4_K/Q5_K); false for types without one. */
static bool zero_quants(qtype t, void *w, int64_t n) {
    const qtype_traits *tr = qtype_info(t);
    for (int64_t b = 0; b < n / tr->block_size; b++) {
        uint8_t *blk = (uint8_t *)w + b * tr->type_size;
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
        default: return false;
        }
    }
    return true;
}

/*
 * vec_dot_ref against sum_i w_i * a_i in float64, with w and a the dequantized
 * weight and activation rows. Tolerance, with u = 2^-24 and nb blocks:
 *   quantized types: the kernel forms each block as (dw*da)*isum (+ (m*da)*asum):
 *   about 4 roundings relative to sum over the block of |w_i a_i| magnitudes, while
 *   the dequantized w_i and a_i carry 2-3 roundings each; the float32 sum across
 *   blocks adds at most nb roundings of the running total. So
 *     |err| <= (nb + 8) * u * M, M = sum_i mag_i |a_i|, and we allow 2x that.
 *   mag_i = |w_i| for scale-only types; for types with an offset term,
 *   mag_i = |w_i| + 2 |w0_i| (w0 = the row with zero quants) bounds |d*sc*q| + |min|,
 *   because the offset can cancel the scaled quant and leave w_i small.
 *   float types: double accumulation, one final rounding: 2u * sum |w_i a_i|.
 */
TEST(quant_vec_dot_vs_f64) {
    test_rng r = test_rng_new();
    const int64_t lens32[] = {32, 96, 1024, 4128}, lens256[] = {256, 768, 4096},
                  lensf[] = {1, 7, 33, 1000, 4099};
    enum { NMAX = 4128 + 32 };
    float *xa = malloc(NMAX * sizeof(float)), *wa = malloc(NMAX * sizeof(float)),
          *aa = malloc(NMAX * sizeof(float)), *w0 = malloc(NMAX * sizeof(float));
    /* 8-byte aligned scratch for one weight row, its zero-quant copy, one activation row */
    uint64_t *wbuf = malloc(NMAX * 4 + 64), *zbuf = malloc(NMAX * 4 + 64), *abuf = malloc(NMAX * 4 + 64);
    for (int ti = 0; ti < N_SUPPORTED; ti++) {
        qtype t = supported_types[ti];
        const qtype_traits *tr = qtype_info(t);
        const int64_t *lens = tr->block_size == 1 ? lensf : tr->block_size == 32 ? lens32 : lens256;
        int n_lens = tr->block_size == 1 ? 5 : tr->block_size == 32 ? 4 : 3;
        qtype at = quant_dot_type(t);
        for (int li = 0; li < n_lens; li++) {
            int64_t n = lens[li];
            for (int rep = 0; rep < 3; rep++) {
                random_weights(&r, t, wbuf, n);
                random_acts(&r, xa, n, (int)(at == QTYPE_F32 ? 1 : qtype_info(at)->block_size), 4.0f);
                quantize_row_ref(at, xa, abuf, n);
                dequantize_row_ref(t, wbuf, wa, n);
                dequantize_row_ref(at, abuf, aa, n);
                size_t wbytes = 0;
                qtype_row_bytes(t, n, &wbytes);
                memcpy(zbuf, wbuf, wbytes);
                bool has_min = zero_quants(t, zbuf, n);
                if (has_min) dequantize_row_ref(t, zbuf, w0, n);
                double ref = 0, mag = 0;
                for (int64_t i = 0; i < n; i++) {
                    ref += (double)wa[i] * (double)aa[i];
                    double m = fabs((double)wa[i]) + (has_min ? 2 * fabs((double)w0[i]) : 0);
                    mag += m * fabs((double)aa[i]);
                }
                float got = vec_dot_ref(t, n, wbuf, abuf);
                double nb = (double)(n / tr->block_size);
                double tol = tr->block_size == 1 ? 2 * 0x1p-24 * mag : 2 * (nb + 8) * 0x1p-24 * mag;
                CHECKF(fabs((double)got - ref) <= tol, "%s n=%lld: got %.9g, f64 %.9g, |diff| %.3g > tol %.3g",
                       tr->name, (long long)n, (double)got, ref, fabs((double)got - ref), tol);
            }
        }
    }
    free(xa);
    free(wa);
    free(aa);
    free(w0);
    free(wbuf);
    free(zbuf);
    free(abuf);
}

TEST(quant_vec_dot_zero_length_and_zero_rows) {
    /* n = 0 gives 0; an all-zero activation row gives 0 for every type */
    static uint64_t w[4096], a[4096];
    memset(a, 0, sizeof a);
    test_rng r = test_rng_new();
    for (int ti = 0; ti < N_SUPPORTED; ti++) {
        qtype t = supported_types[ti];
        CHECK(vec_dot_ref(t, 0, w, a) == 0.0f);
        int64_t n = 512;
        random_weights(&r, t, w, n);
        CHECKF(vec_dot_ref(t, n, w, a) == 0.0f, "%s", qtype_name(t));
    }
}
