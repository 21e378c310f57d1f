/*
 * qpack.c — packed weight formats: repacking, activation tiles, the scalar reference
 * kernel and dispatch (qpack.h).
 *
 * Byte layouts, per group of 16 rows and unit (r = row in the group, 0..15):
 *
 *   QPACK_Q8_0 (unit 32, 544 B): u8 q[j][r][4] = q + 128 of element 4j + i (512 B),
 *                                fp16 d[r] (32 B)
 *   QPACK_Q4_0 (unit 32, 288 B): nibbles n[v][r][4] (256 B): low nibble element 4v + i,
 *                                high nibble element 16 + 4v + i (the Q4_0 byte itself);
 *                                fp16 d[r]
 *   QPACK_Q4_1 (unit 32, 320 B): as Q4_0, then fp16 m[r]
 *   QPACK_IQ4_NL (unit 32, 288 B): as Q4_0 (the nibbles are table indices)
 *   QPACK_Q5_0 (unit 32, 352 B): as Q4_0's nibbles (the low 4 bits); then 8 64-bit masks
 *                                h[j], bit 4r + i = bit 4 of element 4j + i of row r
 *                                (64 B); fp16 d[r] at 320
 *   QPACK_Q5_1 (unit 32, 384 B): as Q5_0, then fp16 m[r] at 352
 *   QPACK_Q4_K (unit 256, 2368 B): sub-block s (32 elements) as Q4_0's nibbles at 256 s
 *                                (2048 B); u8 sc[s][r] (128 B); u8 m[s][r] (128 B);
 *                                fp16 d[r]; fp16 dmin[r]
 *   QPACK_Q5_K (unit 256, 2880 B): as Q4_K's nibbles (2048 B); bit 4 as Q5_0's masks per
 *                                sub-block s at 2048 + 64 s (512 B); u8 sc[s][r] at 2560,
 *                                m[s][r] at 2688; fp16 d[r] at 2816, dmin[r] at 2848
 *   QPACK_IQ4_XS (unit 256, 2208 B): table indices as Q4_K's nibbles (2048 B); i8
 *                                ls[s][r] - 32 at 2048 (128 B); fp16 d[r] at 2176
 *   QPACK_Q6_K (unit 256, 3360 B): the low 4 bits of the 6-bit q (0..63) as Q4_0's
 *                                nibbles per 32 elements p (2048 B); the high 2 bits
 *                                per 32 elements p at 2048 + 128 p: c[c][r][4], bits
 *                                2k..2k+1 of byte i = element 32p + 4(4c + k) + i
 *                                (1024 B); i8 sc[s16][r] (256 B); fp16 d[r]
 *   QPACK_Q3_K (unit 256, 1824 B): the 3-bit q + 4 (0..7): its low 2 bits per 32 elements
 *                                p at 128 p as Q6_K's high bits (1024 B); bit 2 as Q5_0's
 *                                masks per 32 elements p at 1024 + 64 p (512 B); i8
 *                                sc[s16][r] - 32 at 1536 (256 B); fp16 d[r] at 1792
 *   QPACK_Q2_K (unit 256, 1344 B): the 2-bit q (0..3) as Q3_K's low bits (1024 B); the
 *                                Q2_K scale byte (scale | min << 4) u8 sm[s16][r] at 1024
 *                                (256 B); fp16 d[r] at 1280, dmin[r] at 1312
 *
 * Activation tile, per unit (t = token in the tile, 0..7):
 *   32-element formats (320 B): i8 qs[t][32]; f32 d[t]; then Q8_0/Q4_0/IQ4_NL/Q5_0:
 *     i32 cs[t] = -off * sum(qs) (off 128 / 8 / 128 / 16), Q4_1/Q5_1: f32 ds[t] = d * sum(qs)
 *   Q4_K (2336 B): i8 qs[s][t][32] (s = 32-element sub-block); f32 d[t]; f32
 *     fs[s][t] = sum of the sub-block's quants
 *   Q6_K (2592 B): i8 qs[s][t][32]; f32 d[t]; i32 cs[s16][t] = -32 * bsums[s16]
 *   Q3_K (2592 B): as Q6_K with cs[s16][t] = -4 * bsums[s16]
 *   Q2_K (2592 B): as Q6_K with cs[s16][t] = bsums[s16] (the sums the mins multiply)
 *   Q5_K: as Q4_K; IQ4_XS (2336 B): as Q4_K but i32 cs[s][t] = -128 * (sub-block sum)
 */
#include "qpack.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/isa.h"

/* ==== Formats ==== */

qpack_format qpack_format_of(qtype t) {
    switch (t) {
    case QTYPE_Q8_0: return QPACK_Q8_0;
    case QTYPE_Q4_0: return QPACK_Q4_0;
    case QTYPE_Q4_1: return QPACK_Q4_1;
    case QTYPE_Q4_K: return QPACK_Q4_K;
    case QTYPE_Q6_K: return QPACK_Q6_K;
    case QTYPE_IQ4_NL: return QPACK_IQ4_NL;
    case QTYPE_Q5_0: return QPACK_Q5_0;
    case QTYPE_Q5_1: return QPACK_Q5_1;
    case QTYPE_Q5_K: return QPACK_Q5_K;
    case QTYPE_IQ4_XS: return QPACK_IQ4_XS;
    case QTYPE_Q3_K: return QPACK_Q3_K;
    case QTYPE_Q2_K: return QPACK_Q2_K;
    case QTYPE_F16: return QPACK_F16;
    case QTYPE_BF16: return QPACK_BF16;
    default: return QPACK_NONE;
    }
}

static bool is_k(qpack_format f) {
    return f == QPACK_Q4_K || f == QPACK_Q6_K || f == QPACK_Q5_K || f == QPACK_IQ4_XS || f == QPACK_Q3_K ||
           f == QPACK_Q2_K;
}

int64_t qpack_unit(qpack_format f) { return is_k(f) ? QK_K : 32; }

size_t qpack_unit_bytes(qpack_format f) {
    switch (f) {
    case QPACK_Q8_0: return 544;
    case QPACK_Q4_0: return 288;
    case QPACK_Q4_1: return 320;
    case QPACK_IQ4_NL: return 288;
    case QPACK_Q5_0: return 352;
    case QPACK_Q5_1: return 384;
    case QPACK_Q5_K: return 2880;
    case QPACK_IQ4_XS: return 2208;
    case QPACK_Q4_K: return 2368;
    case QPACK_Q6_K: return 3360;
    case QPACK_Q3_K: return 1824;
    case QPACK_Q2_K: return 1344;
    case QPACK_F16:
    case QPACK_BF16: return 1024;
    default: return 0;
    }
}

size_t qpack_act_unit_bytes(qpack_format f) {
    switch (f) {
    case QPACK_Q4_K:
    case QPACK_Q5_K:
    case QPACK_IQ4_XS: return 2336;
    case QPACK_Q6_K:
    case QPACK_Q3_K:
    case QPACK_Q2_K: return 2592;
    case QPACK_F16:
    case QPACK_BF16: return 1024;
    case QPACK_NONE:
    case QPACK_COUNT: return 0;
    default: return 320;
    }
}

size_t qpack_weight_bytes(qpack_format f, int64_t n_in, int64_t n_out) {
    EDDY_ASSERT(f > QPACK_NONE && f < QPACK_COUNT && n_in >= 0 && n_out >= 0 && n_in % qpack_unit(f) == 0);
    const size_t groups = (size_t)((n_out + QPACK_ROWS - 1) / QPACK_ROWS), units = (size_t)(n_in / qpack_unit(f));
    size_t per_group, total;
    if (!eddy_mul_size(units, qpack_unit_bytes(f), &per_group) || !eddy_mul_size(groups, per_group, &total))
        return SIZE_MAX;
    return total;
}

/* ==== Repacking ==== */

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/* The 256 6-bit quants (0..63) of a Q6_K block. */
static void q6_all(const block_q6_K *b, uint8_t *q) {
    for (int e = 0; e < QK_K; e++) {
        const int h = e / 128, r = e % 128;
        const int lo = (b->ql[64 * h + r % 64] >> (4 * (r / 64))) & 15;
        const int hi = (b->qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        q[e] = (uint8_t)(lo | hi << 4);
    }
}

/* The two bits of element e = 128 h + 32 s + l in the qs of a Q2_K or Q3_K block:
 * qs[32 h + l] >> 2 s; and the same place set to v (the byte cleared before). */
static int k_crumb(const uint8_t *qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3; }
static void put_k_crumb(uint8_t *qs, int e, int v) {
    qs[32 * (e / 128) + e % 32] |= (uint8_t)(v << (2 * ((e / 32) % 4)));
}

/* The 256 3-bit quants of a Q3_K block plus 4 (0..7): element e has its low 2 bits at
 * k_crumb and bit 2 in hmask[e % 32] >> (e / 32). */
static void q3_all(const block_q3_K *b, uint8_t *q) {
    for (int e = 0; e < QK_K; e++) q[e] = (uint8_t)(k_crumb(b->qs, e) | ((b->hmask[e % 32] >> (e / 32)) & 1) << 2);
}

/* The 16 six-bit scales of a Q3_K block (0..63; the weight's scale is sc - 32). */
static void q3_scales(const uint8_t *s8, uint8_t *sc) {
    for (int j = 0; j < 16; j++)
        sc[j] = (uint8_t)(((j < 8 ? s8[j] : s8[j - 8] >> 4) & 15) | ((s8[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

/* Quants 4j..4j+3 of row r go to bytes (j * 16 + r) * 4 of a 32-element piece. */
static uint8_t *slot(uint8_t *piece, int j, int r) { return piece + (j * 16 + r) * 4; }

/* The low 2 bits of element e (0..31) of row r in a piece's crumbs (put_crumbs) */
static int crumb_at(const uint8_t *piece, int r, int e) {
    return (piece[((e / 16) * 16 + r) * 4 + e % 4] >> (2 * ((e % 16) / 4))) & 3;
}

/* 32 nibbles (lo: elements 0..15, hi: 16..31, values 0..15) into the piece's 4 vectors */
static void put_nibbles(uint8_t *piece, int r, const uint8_t *q32) {
    for (int v = 0; v < 4; v++)
        for (int i = 0; i < 4; i++) slot(piece, v, r)[i] = (uint8_t)(q32[4 * v + i] | q32[16 + 4 * v + i] << 4);
}

/* Bits sh, sh + 1 of 32 quants into the piece's crumbs: bits 2k..2k+1 of byte i of
 * c[c][r] = element 4 (4c + k) + i. */
static void put_crumbs(uint8_t *piece, int r, const uint8_t *q32, int sh) {
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 4; i++) {
            int v = 0;
            for (int k = 0; k < 4; k++) v |= ((q32[4 * (4 * c + k) + i] >> sh) & 3) << (2 * k);
            piece[(c * 16 + r) * 4 + i] = (uint8_t)v;
        }
}

/* One unit of one row r (0..15) into the group's unit at u; src is the row's unit. */
static void pack_row_unit(qpack_format f, const uint8_t *src, int r, uint8_t *u) {
    switch (f) {
    case QPACK_F16:
    case QPACK_BF16:
        for (int j = 0; j < 32; j++) memcpy(u + 2 * (16 * j + r), src + 2 * j, 2);
        break;
    case QPACK_Q8_0: {
        const block_q8_0 *b = (const block_q8_0 *)src;
        for (int j = 0; j < 8; j++) {
            uint32_t v;
            memcpy(&v, b->qs + 4 * j, 4);
            v ^= 0x80808080u; /* q + 128 */
            memcpy(slot(u, j, r), &v, 4);
        }
        put16(u + 512 + 2 * r, b->d);
        break;
    }
    case QPACK_Q4_0:
    case QPACK_Q4_1: {
        /* a Q4_0 byte holds element e (low nibble) and e + 16 (high): the packed byte itself */
        const uint8_t *qs = f == QPACK_Q4_0 ? ((const block_q4_0 *)src)->qs : ((const block_q4_1 *)src)->qs;
        for (int v = 0; v < 4; v++) memcpy(slot(u, v, r), qs + 4 * v, 4);
        if (f == QPACK_Q4_0) {
            put16(u + 256 + 2 * r, ((const block_q4_0 *)src)->d);
        } else {
            put16(u + 256 + 2 * r, ((const block_q4_1 *)src)->d);
            put16(u + 288 + 2 * r, ((const block_q4_1 *)src)->m);
        }
        break;
    }
    case QPACK_IQ4_NL: {
        const block_iq4_nl *b = (const block_iq4_nl *)src;
        for (int v = 0; v < 4; v++) memcpy(slot(u, v, r), b->qs + 4 * v, 4);
        put16(u + 256 + 2 * r, b->d);
        break;
    }
    case QPACK_Q5_0:
    case QPACK_Q5_1: {
        const uint8_t *qs = f == QPACK_Q5_0 ? ((const block_q5_0 *)src)->qs : ((const block_q5_1 *)src)->qs;
        const uint8_t *qh = f == QPACK_Q5_0 ? ((const block_q5_0 *)src)->qh : ((const block_q5_1 *)src)->qh;
        uint32_t h;
        memcpy(&h, qh, 4);
        for (int v = 0; v < 4; v++) memcpy(slot(u, v, r), qs + 4 * v, 4);
        for (int j = 0; j < 8; j++) {
            uint64_t mask;
            memcpy(&mask, u + 256 + 8 * j, 8);
            for (int i = 0; i < 4; i++) mask |= (uint64_t)((h >> (4 * j + i)) & 1) << (4 * r + i);
            memcpy(u + 256 + 8 * j, &mask, 8);
        }
        if (f == QPACK_Q5_0) {
            put16(u + 320 + 2 * r, ((const block_q5_0 *)src)->d);
        } else {
            put16(u + 320 + 2 * r, ((const block_q5_1 *)src)->d);
            put16(u + 352 + 2 * r, ((const block_q5_1 *)src)->m);
        }
        break;
    }
    case QPACK_Q4_K: {
        const block_q4_K *b = (const block_q4_K *)src;
        for (int s = 0; s < 8; s++) {
            const uint8_t *q = b->qs + 32 * (s / 2);
            const int sh = 4 * (s % 2);
            uint8_t q32[32];
            for (int e = 0; e < 32; e++) q32[e] = (q[e] >> sh) & 15;
            put_nibbles(u + 256 * s, r, q32);
            uint8_t sc, m;
            quant_get_scale_min_k4(b->scales, s, &sc, &m);
            u[2048 + 16 * s + r] = sc;
            u[2176 + 16 * s + r] = m;
        }
        put16(u + 2304 + 2 * r, b->d);
        put16(u + 2336 + 2 * r, b->dmin);
        break;
    }
    case QPACK_Q5_K: {
        const block_q5_K *b = (const block_q5_K *)src;
        for (int s = 0; s < 8; s++) {
            const uint8_t *q = b->qs + 32 * (s / 2);
            const int sh = 4 * (s % 2);
            uint8_t q32[32];
            for (int e = 0; e < 32; e++) q32[e] = (q[e] >> sh) & 15;
            put_nibbles(u + 256 * s, r, q32);
            for (int j = 0; j < 8; j++) {
                uint64_t mask;
                memcpy(&mask, u + 2048 + 64 * s + 8 * j, 8);
                for (int i = 0; i < 4; i++) mask |= (uint64_t)((b->qh[4 * j + i] >> s) & 1) << (4 * r + i);
                memcpy(u + 2048 + 64 * s + 8 * j, &mask, 8);
            }
            uint8_t sc, m;
            quant_get_scale_min_k4(b->scales, s, &sc, &m);
            u[2560 + 16 * s + r] = sc;
            u[2688 + 16 * s + r] = m;
        }
        put16(u + 2816 + 2 * r, b->d);
        put16(u + 2848 + 2 * r, b->dmin);
        break;
    }
    case QPACK_IQ4_XS: {
        const block_iq4_xs *b = (const block_iq4_xs *)src;
        for (int s = 0; s < 8; s++) {
            for (int v = 0; v < 4; v++) memcpy(slot(u + 256 * s, v, r), b->qs + 16 * s + 4 * v, 4);
            const int ls = ((b->scales_l[s / 2] >> (4 * (s % 2))) & 15) | (((b->scales_h >> (2 * s)) & 3) << 4);
            u[2048 + 16 * s + r] = (uint8_t)(int8_t)(ls - 32);
        }
        put16(u + 2176 + 2 * r, b->d);
        break;
    }
    case QPACK_Q6_K: {
        const block_q6_K *b = (const block_q6_K *)src;
        uint8_t q[QK_K];
        q6_all(b, q);
        for (int p = 0; p < 8; p++) {
            uint8_t q32[32];
            for (int e = 0; e < 32; e++) q32[e] = q[32 * p + e] & 15;
            put_nibbles(u + 256 * p, r, q32);
            put_crumbs(u + 2048 + 128 * p, r, q + 32 * p, 4);
        }
        for (int s = 0; s < 16; s++) u[3072 + 16 * s + r] = (uint8_t)b->scales[s];
        put16(u + 3328 + 2 * r, b->d);
        break;
    }
    case QPACK_Q2_K: {
        const block_q2_K *b = (const block_q2_K *)src;
        uint8_t q[QK_K];
        for (int e = 0; e < QK_K; e++) q[e] = (uint8_t)k_crumb(b->qs, e);
        for (int p = 0; p < 8; p++) put_crumbs(u + 128 * p, r, q + 32 * p, 0);
        for (int s = 0; s < 16; s++) u[1024 + 16 * s + r] = b->scales[s];
        put16(u + 1280 + 2 * r, b->d);
        put16(u + 1312 + 2 * r, b->dmin);
        break;
    }
    case QPACK_Q3_K: {
        const block_q3_K *b = (const block_q3_K *)src;
        uint8_t q[QK_K], sc[16];
        q3_all(b, q);
        for (int p = 0; p < 8; p++) {
            put_crumbs(u + 128 * p, r, q + 32 * p, 0);
            for (int j = 0; j < 8; j++) {
                uint64_t mask;
                memcpy(&mask, u + 1024 + 64 * p + 8 * j, 8);
                for (int i = 0; i < 4; i++) mask |= (uint64_t)(q[32 * p + 4 * j + i] >> 2) << (4 * r + i);
                memcpy(u + 1024 + 64 * p + 8 * j, &mask, 8);
            }
        }
        q3_scales(b->scales, sc);
        for (int s = 0; s < 16; s++) u[1536 + 16 * s + r] = (uint8_t)(int8_t)(sc[s] - 32);
        put16(u + 1792 + 2 * r, b->d);
        break;
    }
    default: EDDY_ASSERT(0);
    }
}

/* The bytes of one unit of a row that is padding: zero quants (Q8_0: 128), zero scales. */
static void pack_pad_unit(qpack_format f, int r, uint8_t *u) {
    if (f == QPACK_Q8_0)
        for (int j = 0; j < 8; j++) memset(u + (j * 16 + r) * 4, 128, 4);
    /* every other format's zero quant is byte 0, and the group was zeroed */
}

size_t qpack_block_bytes(qpack_format f) {
    static const size_t bytes[QPACK_COUNT] = {0,
                                              sizeof(block_q8_0),
                                              sizeof(block_q4_0),
                                              sizeof(block_q4_1),
                                              sizeof(block_q4_K),
                                              sizeof(block_q6_K),
                                              sizeof(block_iq4_nl),
                                              sizeof(block_q5_0),
                                              sizeof(block_q5_1),
                                              sizeof(block_q5_K),
                                              sizeof(block_iq4_xs),
                                              sizeof(block_q3_K),
                                              sizeof(block_q2_K),
                                              64,
                                              64};
    return f > QPACK_NONE && f < QPACK_COUNT ? bytes[f] : 0;
}

void qpack_weights(qpack_format f, const void *w, size_t row_bytes, int64_t n_in, int64_t n_out, void *dst) {
    const int64_t units = n_in / qpack_unit(f), groups = (n_out + QPACK_ROWS - 1) / QPACK_ROWS;
    const size_t ub = qpack_unit_bytes(f), src_ub = qpack_block_bytes(f);
    uint8_t *out = dst;
    for (int64_t g = 0; g < groups; g++) {
        uint8_t *gd = out + (size_t)g * (size_t)units * ub;
        memset(gd, 0, (size_t)units * ub);
        for (int r = 0; r < QPACK_ROWS; r++) {
            const int64_t row = g * QPACK_ROWS + r;
            for (int64_t k = 0; k < units; k++) {
                if (row < n_out)
                    pack_row_unit(f, (const uint8_t *)w + (size_t)row * row_bytes + (size_t)k * src_ub, r,
                                  gd + (size_t)k * ub);
                else
                    pack_pad_unit(f, r, gd + (size_t)k * ub);
            }
        }
    }
}

/* ==== Unpacking ==== */

static uint16_t get16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static const uint8_t *cslot(const uint8_t *piece, int j, int r) { return piece + (j * 16 + r) * 4; }

/* The 16 bytes of row r of a piece (its 4 vectors' 4-byte slots), in element order. */
static void piece_bytes(const uint8_t *piece, int r, uint8_t *b16) {
    for (int v = 0; v < 4; v++) memcpy(b16 + 4 * v, cslot(piece, v, r), 4);
}

/* The inverse of quant_get_scale_min_k4: 8 six-bit scales and mins into 12 bytes. */
static void put_scale_min_k4(const uint8_t *sc, const uint8_t *m, uint8_t *q) {
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        q[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        q[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
}

/* The 5th bits of row r in the 8 masks at h: bit 4j + i of the result = element 4j + i. */
static uint32_t get_high_bits(const uint8_t *h, int r) {
    uint32_t out = 0;
    for (int j = 0; j < 8; j++) {
        uint64_t mask;
        memcpy(&mask, h + 8 * j, 8);
        out |= (uint32_t)((mask >> (4 * r)) & 15) << (4 * j);
    }
    return out;
}

/* One unit of row r of the group's unit at u back into the row's block at dst. */
static void unpack_row_unit(qpack_format f, const uint8_t *u, int r, uint8_t *dst) {
    switch (f) {
    case QPACK_F16:
    case QPACK_BF16:
        for (int j = 0; j < 32; j++) memcpy(dst + 2 * j, u + 2 * (16 * j + r), 2);
        break;
    case QPACK_Q8_0: {
        block_q8_0 *b = (block_q8_0 *)dst;
        for (int j = 0; j < 8; j++) {
            uint32_t v;
            memcpy(&v, cslot(u, j, r), 4);
            v ^= 0x80808080u;
            memcpy(b->qs + 4 * j, &v, 4);
        }
        b->d = get16(u + 512 + 2 * r);
        break;
    }
    case QPACK_Q4_0:
    case QPACK_IQ4_NL: {
        block_q4_0 *b = (block_q4_0 *)dst; /* IQ4_NL has the same bytes: d, then 16 of nibbles */
        _Static_assert(sizeof(block_q4_0) == sizeof(block_iq4_nl), "Q4_0 and IQ4_NL blocks alike");
        for (int v = 0; v < 4; v++) memcpy(b->qs + 4 * v, cslot(u, v, r), 4);
        b->d = get16(u + 256 + 2 * r);
        break;
    }
    case QPACK_Q4_1: {
        block_q4_1 *b = (block_q4_1 *)dst;
        for (int v = 0; v < 4; v++) memcpy(b->qs + 4 * v, cslot(u, v, r), 4);
        b->d = get16(u + 256 + 2 * r);
        b->m = get16(u + 288 + 2 * r);
        break;
    }
    case QPACK_Q5_0:
    case QPACK_Q5_1: {
        const bool q50 = f == QPACK_Q5_0;
        uint8_t *qs = q50 ? ((block_q5_0 *)dst)->qs : ((block_q5_1 *)dst)->qs;
        uint8_t *qh = q50 ? ((block_q5_0 *)dst)->qh : ((block_q5_1 *)dst)->qh;
        for (int v = 0; v < 4; v++) memcpy(qs + 4 * v, cslot(u, v, r), 4);
        const uint32_t h = get_high_bits(u + 256, r);
        memcpy(qh, &h, 4);
        if (q50) {
            ((block_q5_0 *)dst)->d = get16(u + 320 + 2 * r);
        } else {
            ((block_q5_1 *)dst)->d = get16(u + 320 + 2 * r);
            ((block_q5_1 *)dst)->m = get16(u + 352 + 2 * r);
        }
        break;
    }
    case QPACK_Q4_K:
    case QPACK_Q5_K: {
        const bool q5 = f == QPACK_Q5_K;
        uint8_t *qs = q5 ? ((block_q5_K *)dst)->qs : ((block_q4_K *)dst)->qs;
        uint8_t sc[8], m[8];
        for (int c = 0; c < 4; c++) {
            /* sub-blocks 2c (low nibbles of qs[32c..]) and 2c + 1 (high): each piece's byte j
             * holds element j (low nibble) and 16 + j (high) of its sub-block */
            uint8_t b0[16], b1[16];
            piece_bytes(u + 256 * (2 * c), r, b0);
            piece_bytes(u + 256 * (2 * c + 1), r, b1);
            for (int j = 0; j < 16; j++) {
                qs[32 * c + j] = (uint8_t)((b0[j] & 15) | b1[j] << 4);
                qs[32 * c + 16 + j] = (uint8_t)(b0[j] >> 4 | (b1[j] & 0xF0));
            }
        }
        if (q5) {
            uint8_t *qh = ((block_q5_K *)dst)->qh;
            memset(qh, 0, QK_K / 8);
            for (int s8 = 0; s8 < 8; s8++) {
                const uint32_t h = get_high_bits(u + 2048 + 64 * s8, r);
                for (int e = 0; e < 32; e++) qh[e] |= (uint8_t)(((h >> e) & 1) << s8);
            }
        }
        for (int s8 = 0; s8 < 8; s8++) {
            sc[s8] = u[(q5 ? 2560 : 2048) + 16 * s8 + r];
            m[s8] = u[(q5 ? 2688 : 2176) + 16 * s8 + r];
        }
        if (q5) {
            block_q5_K *b = (block_q5_K *)dst;
            put_scale_min_k4(sc, m, b->scales);
            b->d = get16(u + 2816 + 2 * r);
            b->dmin = get16(u + 2848 + 2 * r);
        } else {
            block_q4_K *b = (block_q4_K *)dst;
            put_scale_min_k4(sc, m, b->scales);
            b->d = get16(u + 2304 + 2 * r);
            b->dmin = get16(u + 2336 + 2 * r);
        }
        break;
    }
    case QPACK_IQ4_XS: {
        block_iq4_xs *b = (block_iq4_xs *)dst;
        memset(b->scales_l, 0, sizeof b->scales_l);
        b->scales_h = 0;
        for (int s = 0; s < 8; s++) {
            for (int v = 0; v < 4; v++) memcpy(b->qs + 16 * s + 4 * v, cslot(u + 256 * s, v, r), 4);
            const int ls = (int8_t)u[2048 + 16 * s + r] + 32;
            b->scales_l[s / 2] |= (uint8_t)((ls & 15) << (4 * (s % 2)));
            b->scales_h |= (uint16_t)(((ls >> 4) & 3) << (2 * s));
        }
        b->d = get16(u + 2176 + 2 * r);
        break;
    }
    case QPACK_Q6_K: {
        block_q6_K *b = (block_q6_K *)dst;
        uint8_t q[QK_K];
        for (int p = 0; p < 8; p++) {
            /* byte j of the piece: low 4 bits of elements j and 16 + j; the crumbs: their high 2 bits */
            uint8_t nb[16];
            piece_bytes(u + 256 * p, r, nb);
            for (int j = 0; j < 16; j++) {
                q[32 * p + j] = (uint8_t)((nb[j] & 15) | crumb_at(u + 2048 + 128 * p, r, j) << 4);
                q[32 * p + 16 + j] = (uint8_t)(nb[j] >> 4 | crumb_at(u + 2048 + 128 * p, r, 16 + j) << 4);
            }
        }
        /* the inverse of q6_all: ql[64h + j] holds elements 128h + j (low) and 128h + 64 + j
         * (high nibble); qh[32h + j] the high bits of 128h + j + 32n in bits 2n, 2n + 1 */
        for (int h = 0; h < 2; h++) {
            const uint8_t *qq = q + 128 * h;
            for (int j = 0; j < 64; j++) b->ql[64 * h + j] = (uint8_t)((qq[j] & 15) | qq[64 + j] << 4);
            for (int j = 0; j < 32; j++)
                b->qh[32 * h + j] =
                    (uint8_t)(qq[j] >> 4 | (qq[32 + j] >> 4) << 2 | (qq[64 + j] >> 4) << 4 | (qq[96 + j] >> 4) << 6);
        }
        for (int s16 = 0; s16 < 16; s16++) b->scales[s16] = (int8_t)u[3072 + 16 * s16 + r];
        b->d = get16(u + 3328 + 2 * r);
        break;
    }
    case QPACK_Q2_K: {
        block_q2_K *b = (block_q2_K *)dst;
        memset(b->qs, 0, sizeof b->qs);
        for (int e = 0; e < QK_K; e++) put_k_crumb(b->qs, e, crumb_at(u + 128 * (e / 32), r, e % 32));
        for (int s = 0; s < 16; s++) b->scales[s] = u[1024 + 16 * s + r];
        b->d = get16(u + 1280 + 2 * r);
        b->dmin = get16(u + 1312 + 2 * r);
        break;
    }
    case QPACK_Q3_K: {
        block_q3_K *b = (block_q3_K *)dst;
        memset(b, 0, sizeof *b);
        for (int p = 0; p < 8; p++) {
            const uint32_t h = get_high_bits(u + 1024 + 64 * p, r);
            for (int e = 0; e < 32; e++) {
                const int el = 32 * p + e;
                put_k_crumb(b->qs, el, crumb_at(u + 128 * p, r, e));
                b->hmask[el % 32] |= (uint8_t)(((h >> e) & 1) << (el / 32));
            }
        }
        for (int j = 0; j < 16; j++) {
            const int sc = (int8_t)u[1536 + 16 * j + r] + 32;
            b->scales[j % 8] |= (uint8_t)((sc & 15) << (j < 8 ? 0 : 4));
            b->scales[8 + j % 4] |= (uint8_t)((sc >> 4) << (2 * (j / 4)));
        }
        b->d = get16(u + 1792 + 2 * r);
        break;
    }
    default: EDDY_ASSERT(0);
    }
}

void qpack_unpack_row(qpack_format f, const void *group, int64_t unit0, int64_t n_units, int r, void *dst) {
    EDDY_ASSERT(f > QPACK_NONE && f < QPACK_COUNT && r >= 0 && r < QPACK_ROWS && unit0 >= 0 && n_units >= 0);
    const size_t ub = qpack_unit_bytes(f), bb = qpack_block_bytes(f);
    for (int64_t k = 0; k < n_units; k++)
        unpack_row_unit(f, (const uint8_t *)group + (size_t)(unit0 + k) * ub, r, (uint8_t *)dst + (size_t)k * bb);
}

/* ==== Activation tiles ==== */

void qpack_act_tile(qpack_format f, const void *act, size_t act_stride, int nt, int64_t n_in, void *dst) {
    EDDY_ASSERT(nt >= 1 && nt <= QPACK_TOK);
    const int64_t units = n_in / qpack_unit(f);
    const size_t ab = qpack_act_unit_bytes(f);
    for (int64_t k = 0; k < units; k++) {
        uint8_t *u = (uint8_t *)dst + (size_t)k * ab;
        for (int t = 0; t < nt; t++) {
            const uint8_t *row = (const uint8_t *)act + (size_t)t * act_stride;
            if (f == QPACK_F16 || f == QPACK_BF16) { /* f32 rows */
                memcpy(u + 128 * t, row + 128 * k, 128);
            } else if (is_k(f)) {
                const block_q8_K *b = (const block_q8_K *)row + k;
                for (int s = 0; s < 8; s++) memcpy(u + 256 * s + 32 * t, b->qs + 32 * s, 32);
                memcpy(u + 2048 + 4 * t, &b->d, 4);
                if (f == QPACK_IQ4_XS) {
                    for (int s = 0; s < 8; s++) {
                        const int32_t cs = -128 * (b->bsums[2 * s] + b->bsums[2 * s + 1]);
                        memcpy(u + 2080 + 4 * (8 * s + t), &cs, 4);
                    }
                } else if (f == QPACK_Q4_K || f == QPACK_Q5_K) {
                    for (int s = 0; s < 8; s++) {
                        const float fs = (float)(b->bsums[2 * s] + b->bsums[2 * s + 1]);
                        memcpy(u + 2080 + 4 * (8 * s + t), &fs, 4);
                    }
                } else {
                    /* Q3_K: q + 4, Q6_K: q as stored (q - 32), Q2_K: the plain sums, for its mins */
                    const int off = f == QPACK_Q3_K ? 4 : f == QPACK_Q2_K ? -1 : 32;
                    for (int s = 0; s < 16; s++) {
                        const int32_t cs = -off * b->bsums[s];
                        memcpy(u + 2080 + 4 * (8 * s + t), &cs, 4);
                    }
                }
            } else {
                const block_q8_0 *b = (const block_q8_0 *)row + k;
                memcpy(u + 32 * t, b->qs, 32);
                const float d = fp16_to_f32(b->d);
                memcpy(u + 256 + 4 * t, &d, 4);
                int32_t sum = 0;
                for (int e = 0; e < 32; e++) sum += b->qs[e];
                if (f == QPACK_Q4_1 || f == QPACK_Q5_1) {
                    const float ds = d * (float)sum;
                    memcpy(u + 288 + 4 * t, &ds, 4);
                } else {
                    const int off = f == QPACK_Q4_0 ? 8 : f == QPACK_Q5_0 ? 16 : 128;
                    const int32_t cs = -off * sum;
                    memcpy(u + 288 + 4 * t, &cs, 4);
                }
            }
        }
    }
}

/* ==== Reference kernel ==== */

static float rd_f32(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}
static int32_t rd_i32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}
static float rd_f16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return fp16_to_f32(v);
}

static float rd_bf16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return bf16_to_f32(v);
}

/* The unsigned weight of quant j*4+i (j < 8) of row r in a 32-element piece: Q8_0 bytes
 * at q, nibbles at q (low for j < 4, high for j >= 4), Q6_K: nibbles plus crumbs at c,
 * Q3_K: crumbs at q plus bit-2 masks at c, Q2_K: crumbs at q. */
static int wq(qpack_format f, const uint8_t *q, const uint8_t *c, int j, int r, int i) {
    if (f == QPACK_Q8_0) return q[(j * 16 + r) * 4 + i];
    if (f == QPACK_Q3_K || f == QPACK_Q2_K) {
        const int lo = crumb_at(q, r, 4 * j + i);
        if (f == QPACK_Q2_K) return lo;
        uint64_t mask;
        memcpy(&mask, c + 8 * j, 8);
        return lo | (int)((mask >> (4 * r + i)) & 1) << 2;
    }
    const int n = q[((j % 4) * 16 + r) * 4 + i];
    int v = j < 4 ? n & 15 : n >> 4;
    if (f == QPACK_Q6_K) v |= crumb_at(c, r, 4 * j + i) << 4;
    if (f == QPACK_IQ4_NL || f == QPACK_IQ4_XS) v = kvalues_iq4nl[v] + 128;
    if (f == QPACK_Q5_K) {
        uint64_t mask;
        memcpy(&mask, c + 8 * j, 8);
        v += (int)((mask >> (4 * r + i)) & 1) << 4;
    }
    if (f == QPACK_Q5_0 || f == QPACK_Q5_1) {
        uint64_t mask;
        memcpy(&mask, q + 256 + 8 * j, 8);
        v += (int)((mask >> (4 * r + i)) & 1) << 4;
    }
    return v;
}

/* sum over j in [j0, j1) of the 4 products of row r with token t's quants a (32 bytes) */
static int32_t dot_piece(qpack_format f, const uint8_t *q, const uint8_t *c, const int8_t *a, int r, int j0,
                         int j1) {
    int32_t s = 0;
    for (int j = j0; j < j1; j++)
        for (int i = 0; i < 4; i++) s += wq(f, q, c, j, r, i) * a[4 * j + i];
    return s;
}

void qpack_kernel_ref(qpack_format f, int64_t n_units, const void *group, const void *tile, int nt, float *y,
                      int64_t y_stride, int nrows) {
    EDDY_ASSERT(nt >= 1 && nt <= QPACK_TOK && nrows >= 1 && nrows <= QPACK_ROWS);
    const size_t ub = qpack_unit_bytes(f), ab = qpack_act_unit_bytes(f);
    for (int t = 0; t < nt; t++) {
        for (int r = 0; r < nrows; r++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < n_units; k++) {
                const uint8_t *w = (const uint8_t *)group + (size_t)k * ub, *a = (const uint8_t *)tile + (size_t)k * ab;
                if (f == QPACK_F16 || f == QPACK_BF16) {
                    float s[2] = {0.0f, 0.0f};
                    for (int j = 0; j < 32; j++) {
                        const uint8_t *e = w + 2 * (16 * j + r);
                        const float wv = f == QPACK_F16 ? rd_f16(e) : rd_bf16(e);
                        s[j % 2] = fmaf(wv, rd_f32(a + 4 * (32 * t + j)), s[j % 2]);
                    }
                    acc += s[0] + s[1];
                } else if (is_k(f)) {
                    const float da = rd_f32(a + 2048 + 4 * t);
                    float sb = 0.0f;
                    if (f == QPACK_Q4_K || f == QPACK_Q5_K) {
                        const bool q5 = f == QPACK_Q5_K;
                        const size_t so = q5 ? 2560 : 2048, doff = q5 ? 2816 : 2304;
                        const float dv = rd_f16(w + doff + 2 * r), mv = rd_f16(w + doff + 32 + 2 * r);
                        for (int s = 0; s < 8; s++) {
                            const int32_t i = dot_piece(f, w + 256 * s, q5 ? w + 2048 + 64 * s : NULL,
                                                        (const int8_t *)(a + 256 * s + 32 * t), r, 0, 8);
                            const float dws = dv * (float)w[so + 16 * s + r];
                            const float mws = mv * (float)w[so + 128 + 16 * s + r];
                            sb = fmaf((float)i, dws, sb);
                            sb = fmaf(-mws, rd_f32(a + 2080 + 4 * (8 * s + t)), sb);
                        }
                    } else if (f == QPACK_IQ4_XS) {
                        const float dv = rd_f16(w + 2176 + 2 * r);
                        for (int s = 0; s < 8; s++) {
                            const int32_t i = rd_i32(a + 2080 + 4 * (8 * s + t)) +
                                              dot_piece(f, w + 256 * s, NULL, (const int8_t *)(a + 256 * s + 32 * t),
                                                        r, 0, 8);
                            const float dws = dv * (float)(int8_t)w[2048 + 16 * s + r];
                            sb = fmaf((float)i, dws, sb);
                        }
                    } else if (f == QPACK_Q2_K) {
                        /* the scales and mins in integers, as vec_dot_ref */
                        int32_t isb = 0, msb = 0;
                        for (int s = 0; s < 16; s++) {
                            const int p = s / 2, h = s % 2;
                            const int8_t *x = (const int8_t *)(a + 256 * p + 32 * t);
                            const int sm = w[1024 + 16 * s + r];
                            isb += (sm & 15) * dot_piece(f, w + 128 * p, NULL, x, r, 4 * h, 4 * h + 4);
                            msb += (sm >> 4) * rd_i32(a + 2080 + 4 * (8 * s + t));
                        }
                        acc = fmaf((float)isb, rd_f16(w + 1280 + 2 * r) * da, acc);
                        acc = fmaf((float)msb, -(rd_f16(w + 1312 + 2 * r) * da), acc);
                        continue;
                    } else {
                        /* Q6_K, Q3_K: the sub-block scales in integers, as vec_dot_ref (|sum| < 2^31) */
                        const bool q3 = f == QPACK_Q3_K;
                        const float dv = rd_f16(w + (q3 ? 1792 : 3328) + 2 * r);
                        int32_t isb = 0;
                        for (int s = 0; s < 16; s++) {
                            const int p = s / 2, h = s % 2;
                            const uint8_t *q = q3 ? w + 128 * p : w + 256 * p;
                            const uint8_t *c = q3 ? w + 1024 + 64 * p : w + 2048 + 128 * p;
                            const int8_t *x = (const int8_t *)(a + 256 * p + 32 * t);
                            const int32_t i =
                                rd_i32(a + 2080 + 4 * (8 * s + t)) + dot_piece(f, q, c, x, r, 4 * h, 4 * h + 4);
                            isb += (int8_t)w[(q3 ? 1536 : 3072) + 16 * s + r] * i;
                        }
                        acc = fmaf((float)isb, dv * da, acc);
                        continue;
                    }
                    acc = fmaf(sb, da, acc);
                } else {
                    const float da = rd_f32(a + 256 + 4 * t);
                    const bool q5 = f == QPACK_Q5_0 || f == QPACK_Q5_1, has_min = f == QPACK_Q4_1 || f == QPACK_Q5_1;
                    const float dw = rd_f16(w + (f == QPACK_Q8_0 ? 512 : q5 ? 320 : 256) + 2 * r);
                    int32_t i = has_min ? 0 : rd_i32(a + 288 + 4 * t);
                    i += dot_piece(f, w, NULL, (const int8_t *)(a + 32 * t), r, 0, 8);
                    acc = fmaf((float)i, dw * da, acc);
                    if (has_min) acc = fmaf(rd_f16(w + (q5 ? 352 : 288) + 2 * r), rd_f32(a + 288 + 4 * t), acc);
                }
            }
            y[t * y_stride + r] = acc;
        }
    }
}

/* ==== Dispatch ==== */

qpack_kernel_fn qpack_kernel(qpack_format f) {
    if (f <= QPACK_NONE || f >= QPACK_COUNT) return NULL;
#if defined(__x86_64__)
    if (isa_has(ISA_EXT_AVX512VNNI)) return qpack_kernel_avx512(f);
    if (isa_available(ISA_AVX2)) return qpack_kernel_avx2(f);
#elif defined(__aarch64__)
    if (isa_has(ISA_EXT_DOTPROD)) return qpack_kernel_neon(f);
#endif
    return NULL;
}
