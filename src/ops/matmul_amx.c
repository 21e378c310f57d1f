/*
 * matmul_amx.c — prefill matrix products on AMX tiles (matmul_amx.h).
 *
 * Tiles (palette 1, each 16 rows of 64 bytes):
 *   C0..C3 (tiles 0-3): float32 y blocks, 16 tokens x 16 weight rows, as a 2 x 2 grid
 *   A0, A1 (tiles 4, 5): bf16 activations, 16 tokens x 32 k, straight from the
 *                        row-major bf16 copy of x (stride n_in)
 *   B0, B1 (tiles 6, 7): bf16 weights, 32 k x 16 rows in the pair layout the
 *                        instruction wants: tile row p holds, for each of the 16
 *                        weight rows, the two values at k = 2p, 2p + 1
 * Each thread takes blocks of MATMUL_AMX_ROWS weight rows, GROUP blocks at a time. Per
 * group, per chunk of PANEL_K k: dequantize each block's 32 rows of the chunk to
 * float32, round to bf16 and transpose into the pair layout (a panel, 32 KiB; the
 * group's panels stay in L2), then run every token block through the group's panels,
 * accumulating in y itself (loaded back for every chunk after the first). A partial
 * last token block accumulates in per-thread buffers instead.
 */
#include "matmul_amx.h"

#include <immintrin.h>
#include <string.h>

#include "base/alloc.h"
#include "base/isa.h"
#include "base/error.h"
#include "quant/qpack.h"
#include "quant/quant.h"

#define PANEL_K 512 /* k per panel; a multiple of every block size (32, 256) */
#define ACT_ALIGN 64
#define GROUP 4 /* weight-row blocks whose panels are built together */

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static void tiles_configure(void) {
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        cfg.rows[i] = 16;
        cfg.colsb[i] = 64;
    }
    _tile_loadconfig(&cfg);
}

/* ==== Which products ==== */

bool matmul_amx_usable(const matmul_weight *w, int64_t n_tok) {
    if (!isa_has(ISA_EXT_AMX_BF16)) return false;
    if (n_tok < MATMUL_AMX_MIN_TOKENS || w->n_out < MATMUL_AMX_ROWS || w->n_in % 32 != 0) return false;
    return w->type != QTYPE_F32 && w->type != QTYPE_F16 && quant_weight_supported(w->type);
}

static int64_t padded_tokens(int64_t n_tok) {
    return (n_tok + MATMUL_AMX_TOKENS - 1) / MATMUL_AMX_TOKENS * MATMUL_AMX_TOKENS;
}

size_t matmul_amx_scratch_bytes(const matmul_weight *w, int64_t n_tok) {
    size_t total;
    if (!eddy_mul_size((size_t)padded_tokens(n_tok), (size_t)w->n_in * 2, &total) || total > SIZE_MAX - ACT_ALIGN)
        return SIZE_MAX;
    return total + ACT_ALIGN;
}

/* ==== Dequantizing a chunk of one weight row to float32 ==== */

static __m512 f16_scale(uint16_t h) { return _mm512_set1_ps(fp16_to_f32(h)); }

/* 16 int8 -> 16 floats */
static __m512 i8x16_to_ps(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)); }

static void dequant_q8_0(const block_q8_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 32) {
        const __m512 d = f16_scale(b[i].d);
        _mm512_storeu_ps(y, _mm512_mul_ps(d, i8x16_to_ps(_mm_loadu_si128((const __m128i *)b[i].qs))));
        _mm512_storeu_ps(y + 16, _mm512_mul_ps(d, i8x16_to_ps(_mm_loadu_si128((const __m128i *)(b[i].qs + 16)))));
    }
}

/* the 32 nibbles of 16 bytes: low nibbles are elements 0..15, high ones 16..31 */
static void nibbles(const uint8_t *qs, __m512 *lo, __m512 *hi) {
    const __m128i q = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(0x0f);
    *lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(q, m)));
    *hi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(q, 4), m)));
}

static void dequant_q4_0(const block_q4_0 *b, float *y, int64_t nb) {
    const __m512 eight = _mm512_set1_ps(8.0f);
    for (int64_t i = 0; i < nb; i++, y += 32) {
        const __m512 d = f16_scale(b[i].d);
        __m512 lo, hi;
        nibbles(b[i].qs, &lo, &hi);
        _mm512_storeu_ps(y, _mm512_mul_ps(d, _mm512_sub_ps(lo, eight)));
        _mm512_storeu_ps(y + 16, _mm512_mul_ps(d, _mm512_sub_ps(hi, eight)));
    }
}

static void dequant_q4_1(const block_q4_1 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += 32) {
        const __m512 d = f16_scale(b[i].d), m = f16_scale(b[i].m);
        __m512 lo, hi;
        nibbles(b[i].qs, &lo, &hi);
        _mm512_storeu_ps(y, _mm512_add_ps(_mm512_mul_ps(d, lo), m));
        _mm512_storeu_ps(y + 16, _mm512_add_ps(_mm512_mul_ps(d, hi), m));
    }
}

/* Q4_K: per 64 elements, 32 bytes of nibbles; low nibbles are sub-block 2j, high 2j+1;
 * y = d * scale * q - dmin * min (the reference's order of operations) */
static void dequant_q4_K(const block_q4_K *b, float *y, int64_t nb) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int j = 0; j < 4; j++, q += 32) {
            uint8_t sc0, m0, sc1, m1;
            quant_get_scale_min_k4(b[i].scales, 2 * j, &sc0, &m0);
            quant_get_scale_min_k4(b[i].scales, 2 * j + 1, &sc1, &m1);
            const __m256i v = _mm256_loadu_si256((const __m256i *)q);
            const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            const __m512 d0 = _mm512_set1_ps(d * sc0), mm0 = _mm512_set1_ps(dmin * m0);
            const __m512 d1 = _mm512_set1_ps(d * sc1), mm1 = _mm512_set1_ps(dmin * m1);
            for (int h = 0; h < 2; h++) {
                const __m128i l = h ? _mm256_extracti128_si256(lo, 1) : _mm256_castsi256_si128(lo);
                const __m128i u = h ? _mm256_extracti128_si256(hi, 1) : _mm256_castsi256_si128(hi);
                _mm512_storeu_ps(y + 64 * j + 16 * h,
                                 _mm512_sub_ps(_mm512_mul_ps(d0, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(l))), mm0));
                _mm512_storeu_ps(y + 64 * j + 32 + 16 * h,
                                 _mm512_sub_ps(_mm512_mul_ps(d1, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(u))), mm1));
            }
        }
        y += QK_K;
    }
}

/* Q6_K: per 128 elements, 64 bytes of low nibbles (ql) and 32 of high bit pairs (qh);
 * element l + 32 s (s = 0..3) takes ql[l + 32 (s & 1)] >> 4 (s >= 2) and qh[l] >> 2 s */
static void dequant_q6_K(const block_q6_K *b, float *y, int64_t nb) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x03), c32 = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < nb; i++) {
        const float d = fp16_to_f32(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, y += 128) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i h = _mm256_loadu_si256((const __m256i *)qh);
            const __m256i lows[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                                     _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                     _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
            for (int s = 0; s < 4; s++) {
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(h, 2 * s), m2);
                const __m256i q = _mm256_sub_epi8(_mm256_or_si256(lows[s], _mm256_slli_epi16(hb, 4)), c32);
                for (int part = 0; part < 2; part++) { /* 16 elements each, scale index l / 16 */
                    const __m128i qq = part ? _mm256_extracti128_si256(q, 1) : _mm256_castsi256_si128(q);
                    const __m512 ds = _mm512_set1_ps(d * (float)sc[part + 2 * s]);
                    _mm512_storeu_ps(y + 32 * s + 16 * part, _mm512_mul_ps(ds, i8x16_to_ps(qq)));
                }
            }
        }
    }
}

static void dequant_bf16(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(x + i));
        _mm512_storeu_ps(y + i, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16)));
    }
}

/* y[0..n) = elements [k0, k0 + n) of a weight row; k0 and n multiples of the block size. */
static void dequant_chunk(qtype type, const uint8_t *row, int64_t k0, int64_t n, float *y) {
    const qtype_traits *t = qtype_info(type);
    const uint8_t *src = row + (size_t)(k0 / t->block_size) * t->type_size;
    const int64_t nb = n / t->block_size;
    switch (type) {
    case QTYPE_Q8_0: dequant_q8_0((const block_q8_0 *)src, y, nb); break;
    case QTYPE_Q4_0: dequant_q4_0((const block_q4_0 *)src, y, nb); break;
    case QTYPE_Q4_1: dequant_q4_1((const block_q4_1 *)src, y, nb); break;
    case QTYPE_Q4_K: dequant_q4_K((const block_q4_K *)src, y, nb); break;
    case QTYPE_Q6_K: dequant_q6_K((const block_q6_K *)src, y, nb); break;
    case QTYPE_BF16: dequant_bf16((const uint16_t *)src, y, n); break;
    default: dequantize_row_ref(type, src, y, n); break;
    }
}

/* ==== Panels ==== */

/* Transposes a 16 x 16 matrix of 32-bit words in place: r[i] word j <-> r[j] word i. */
static void transpose16(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    /* u[4g + e] holds, per 128-bit lane L, word 4L + e of rows 4g..4g+3 */
    for (int g = 0; g < 4; g++) {
        const __m512i *s = t + 4 * g;
        u[4 * g + 0] = _mm512_unpacklo_epi64(s[0], s[2]);
        u[4 * g + 1] = _mm512_unpackhi_epi64(s[0], s[2]);
        u[4 * g + 2] = _mm512_unpacklo_epi64(s[1], s[3]);
        u[4 * g + 3] = _mm512_unpackhi_epi64(s[1], s[3]);
    }
    for (int e = 0; e < 4; e++) {
        const __m512i v0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x88), v1 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xdd);
        const __m512i w0 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x88);
        const __m512i w1 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xdd);
        r[e] = _mm512_shuffle_i32x4(v0, w0, 0x88);
        r[8 + e] = _mm512_shuffle_i32x4(v0, w0, 0xdd);
        r[4 + e] = _mm512_shuffle_i32x4(v1, w1, 0x88);
        r[12 + e] = _mm512_shuffle_i32x4(v1, w1, 0xdd);
    }
}

/* Builds the panel of weight rows [r0, r0 + 32) x k [k0, k0 + kc): for each step of 32 k,
 * two B tiles (rows r0..r0+15, then r0+16..r0+31) of 16 x 64 bytes.
 * f: (16, PANEL_K) float scratch. panel: (kc / 32) * 2 tiles of 1 KiB. */
static void build_panel(const matmul_weight *w, int64_t r0, int64_t k0, int64_t kc, float *f, uint16_t *panel) {
    const qpack_format pf = w->packed ? qpack_format_of(w->type) : QPACK_NONE;
    for (int half = 0; half < 2; half++) {
        for (int c = 0; c < 16; c++) {
            if (pf == QPACK_NONE) {
                dequant_chunk(w->type, (const uint8_t *)w->data + (size_t)(r0 + 16 * half + c) * w->row_bytes, k0,
                              kc, f + c * PANEL_K);
                continue;
            }
            /* packed weights: the row's blocks back from its group (r0 is a multiple of 32) */
            /* 64 B per 32 elements: the most of any packed format (F16, BF16; Q8_0: 34) */
            _Alignas(64) uint8_t blocks[PANEL_K / 32 * 64];
            const int64_t unit = qpack_unit(pf), group = (r0 + 16 * half) / QPACK_ROWS;
            const uint8_t *g = (const uint8_t *)w->packed + (size_t)group * qpack_weight_bytes(pf, w->n_in, QPACK_ROWS);
            EDDY_ASSERT((size_t)(kc / unit) * qpack_block_bytes(pf) <= sizeof blocks);
            qpack_unpack_row(pf, g, k0 / unit, kc / unit, c, blocks);
            dequant_chunk(w->type, blocks, 0, kc, f + c * PANEL_K);
        }
        for (int64_t ks = 0; ks < kc / 32; ks++) {
            __m512i r[16];
            for (int c = 0; c < 16; c++) {
                const float *src = f + c * PANEL_K + 32 * ks;
                /* bf16 of 32 consecutive k: word p = the pair (2p, 2p + 1) */
                r[c] = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 16), _mm512_loadu_ps(src));
            }
            transpose16(r); /* r[p]: pair p of each of the 16 rows = tile row p */
            uint16_t *tile = panel + (size_t)(2 * ks + half) * 512;
            for (int p = 0; p < 16; p++) _mm512_store_si512((__m512i *)(tile + 32 * p), r[p]);
        }
    }
}

/* ==== The product ==== */

typedef struct {
    const matmul_weight *w;
    int64_t n_rows;
    const float *x;
    int64_t x_stride, n_tok, n_pad;
    float *y;
    int64_t y_stride;
    uint16_t *xb; /* (n_pad, n_in) bf16, rows n_tok.. zero */
} amx_job;

static void convert_task(void *p, int ith, int nth) {
    const amx_job *j = p;
    const int64_t K = j->w->n_in;
    int64_t t0, t1;
    pool_split(j->n_pad, ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        uint16_t *dst = j->xb + t * K;
        if (t >= j->n_tok) {
            memset(dst, 0, (size_t)K * 2);
            continue;
        }
        const float *src = j->x + t * j->x_stride;
        for (int64_t k = 0; k < K; k += 32)
            _mm512_storeu_si512((__m512i *)(dst + k),
                                (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + k + 16), _mm512_loadu_ps(src + k)));
    }
}

/* One token block against one panel: C tiles from/to out (stride os floats). */
static void run_block(const uint16_t *xa, int64_t K, const uint16_t *panel, int64_t steps, float *out, int64_t os,
                      bool first) {
    const size_t ob = (size_t)os * sizeof(float), ab = (size_t)K * 2;
    if (first) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    } else {
        _tile_loadd(0, out, ob);
        _tile_loadd(1, out + 16, ob);
        _tile_loadd(2, out + 16 * os, ob);
        _tile_loadd(3, out + 16 * os + 16, ob);
    }
    for (int64_t s = 0; s < steps; s++) {
        _tile_loadd(4, xa + 32 * s, ab);
        _tile_loadd(5, xa + 16 * K + 32 * s, ab);
        _tile_loadd(6, panel + (size_t)2 * s * 512, 64);
        _tile_loadd(7, panel + (size_t)(2 * s + 1) * 512, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, out, ob);
    _tile_stored(1, out + 16, ob);
    _tile_stored(2, out + 16 * os, ob);
    _tile_stored(3, out + 16 * os + 16, ob);
}

static void product_task(void *p, int ith, int nth) {
    const amx_job *j = p;
    const int64_t K = j->w->n_in, full = j->n_tok / MATMUL_AMX_TOKENS * MATMUL_AMX_TOKENS;
    /* 160 KiB of stack (pool threads and callers have the default megabytes): up to
     * GROUP panels, so that each token block's activation slice (32 tokens x PANEL_K,
     * 32 KiB) is loaded from L1 for every panel of the group */
    _Alignas(64) float f[16 * PANEL_K];
    _Alignas(64) uint16_t panel[GROUP][MATMUL_AMX_ROWS * PANEL_K];
    _Alignas(64) float tail[GROUP][MATMUL_AMX_TOKENS * MATMUL_AMX_ROWS];
    int64_t b0, b1;
    pool_split(j->n_rows / MATMUL_AMX_ROWS, ith, nth, &b0, &b1);
    if (b0 >= b1) return;
    tiles_configure();
    for (int64_t g0 = b0; g0 < b1; g0 += GROUP) {
        const int ng = b1 - g0 < GROUP ? (int)(b1 - g0) : GROUP;
        for (int64_t k0 = 0; k0 < K; k0 += PANEL_K) {
            const int64_t kc = K - k0 < PANEL_K ? K - k0 : PANEL_K;
            for (int g = 0; g < ng; g++) build_panel(j->w, (g0 + g) * MATMUL_AMX_ROWS, k0, kc, f, panel[g]);
            for (int64_t t = 0; t < j->n_pad; t += MATMUL_AMX_TOKENS) {
                const bool partial = t >= full;
                for (int g = 0; g < ng; g++) {
                    float *out = partial ? tail[g] : j->y + t * j->y_stride + (g0 + g) * MATMUL_AMX_ROWS;
                    run_block(j->xb + t * K + k0, K, panel[g], kc / 32, out,
                              partial ? MATMUL_AMX_ROWS : j->y_stride, k0 == 0);
                }
            }
        }
        for (int g = 0; g < ng; g++)
            for (int64_t t = full; t < j->n_tok; t++)
                memcpy(j->y + t * j->y_stride + (g0 + g) * MATMUL_AMX_ROWS, tail[g] + (t - full) * MATMUL_AMX_ROWS,
                       MATMUL_AMX_ROWS * sizeof(float));
    }
    _tile_release();
}

void matmul_amx(threadpool *pool, const matmul_weight *w, int64_t n_rows, const float *x, int64_t x_stride,
                int64_t n_tok, float *y, int64_t y_stride, void *scratch, size_t scratch_bytes) {
    EDDY_ASSERT(matmul_amx_usable(w, n_tok) && n_rows % MATMUL_AMX_ROWS == 0 && n_rows <= w->n_out);
    EDDY_ASSERT(scratch_bytes >= matmul_amx_scratch_bytes(w, n_tok));
    amx_job j = {w, n_rows, x, x_stride, n_tok, padded_tokens(n_tok), y, y_stride, NULL};
    j.xb = (uint16_t *)(((uintptr_t)scratch + ACT_ALIGN - 1) / ACT_ALIGN * ACT_ALIGN);
    const int nth = pool ? pool_size(pool) : 1;
    if (pool) {
        pool_run(pool, convert_task, &j, nth);
        pool_run(pool, product_task, &j, nth);
    } else {
        convert_task(&j, 0, 1);
        product_task(&j, 0, 1);
    }
}
