/*
 * ck_levels.h — reading the GGUF block formats on the GPU as 8-bit levels: the type ids,
 * aligned loads of the blocks' fields, and per format a decoder of one 32-element unit
 * into int8 levels with an integer offset and, per half of 16, a scale and a min
 * (iunit<T>), which the integer products multiply with 8-bit activations (ck_quant.cu's
 * __dp4a kernels, ck_mmq.cu's tensor-core kernels), and the weights one launch of those
 * kernels takes (gemv_parts). Included by the kernel files only,
 * in an anonymous namespace: each has its own copy.
 *
 * A unit's dot product with the 8-bit activations x of the same 32 elements is
 *   d_x * sum_h (d_h * (S_h + off * X_h) + m_h * X_h),   S_h = sum of q_w * q_x over half h
 * (X_h: the half's sum of q_x). S_h + off * X_h is exact in integers: the levels of the
 * offset formats (Q4_0: q - 8, ...) are taken unsigned and their offset goes through X_h.
 * The decoders read the blocks (only 2-byte aligned) through aligned 32-bit loads joined
 * by funnel shifts (ldw), and follow dequant_ref.c's arithmetic for each scale.
 */
#ifndef EDDY_CUDA_CK_LEVELS_H
#define EDDY_CUDA_CK_LEVELS_H

#include <stdint.h>

#include "cuda/ck.h"
#include "cuda/ck_device.h"

namespace {

/* The weights of one launch of the integer kernels (ck_gemv_parts, ck_mmq_parts,
 * ck_gemv_parts_mixed): up to CK_GEMV_MAX_PARTS matrices of one input width and one type
 * (or, mixed, Q6_K's then Q4_K's), each with its own output, their rows numbered one after
 * the other. */
struct gemv_parts {
    ck_gemv_part p[CK_GEMV_MAX_PARTS];
    int n;
};

/* GGML type ids (quant/qtypes.h) */
enum {
    T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q4_1 = 3, T_Q5_0 = 6, T_Q5_1 = 7, T_Q8_0 = 8, T_Q2_K = 10, T_Q3_K = 11,
    T_Q4_K = 12, T_Q5_K = 13, T_Q6_K = 14, T_IQ4_NL = 20, T_IQ4_XS = 23, T_BF16 = 30
};

__constant__ int8_t kvalues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

__device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ uint16_t ld16(const uint8_t *p) { return *(const uint16_t *)p; }
__device__ __forceinline__ uint32_t ld32(const uint8_t *p) { return (uint32_t)ld16(p) | (uint32_t)ld16(p + 2) << 16; }
/* N little-endian words from a 2-byte aligned address: N aligned 32-bit loads and, when the
 * address is not 4-byte aligned, a 16-bit load of the last half word (nothing past the
 * field is read), joined by funnel shifts: about half the load instructions of 16-bit loads */
template <int N> __device__ __forceinline__ void ldw(const uint8_t *p, uint32_t w[N]) {
    const uintptr_t a = (uintptr_t)p;
    const uint32_t *q = (const uint32_t *)(a & ~(uintptr_t)3);
    const unsigned sh = (unsigned)(a & 3) * 8;
    uint32_t v[N + 1];
#pragma unroll
    for (int i = 0; i < N; i++) v[i] = q[i];
    v[N] = sh ? (uint32_t)*(const uint16_t *)(q + N) : 0u; /* sh is 0 or 16 */
#pragma unroll
    for (int i = 0; i < N; i++) w[i] = __funnelshift_r(v[i], v[i + 1], sh);
}
/* 16 bytes at a 2-byte aligned address, as four little-endian words */
__device__ __forceinline__ void ld128(const uint8_t *p, uint32_t w[4]) { ldw<4>(p, w); }
__device__ __forceinline__ int byte_of(const uint32_t w[4], int i) { return (w[i >> 2] >> (8 * (i & 3))) & 255; }

/* From the three bytes of the 12 scale bytes s that hold it, a = s[j % 4], b = s[j % 4 + 4]
 * and c = s[j % 4 + 8]: sub-block j's 6-bit scale and min (j < 4: the low 6 bits of a and
 * b; else c's nibbles with a's and b's top 2 bits) */
__device__ __forceinline__ void scale_min_k4_bytes(int a, int b, int c, int j, int *sc, int *m) {
    if (j < 4) *sc = a & 63, *m = b & 63;
    else *sc = (c & 15) | (a >> 6) << 4, *m = (c >> 4) | (b >> 6) << 4;
}
__device__ __forceinline__ void scale_min_k4(const uint8_t *s, int j, int *sc, int *m) {
    scale_min_k4_bytes(s[j & 3], s[(j & 3) + 4], s[(j & 3) + 8], j, sc, m);
}

/* A weight unit as 8-bit levels */
struct iw {
    uint32_t q[8];
    int off;
    float d0, d1, m0, m1;
};

/* the low bits of x (bits 0..3) to bit 4 of the bytes 0..3 */
__device__ __forceinline__ uint32_t spread4(uint32_t x) {
    return (x & 1u) << 4 | (x & 2u) << 11 | (x & 4u) << 18 | (x & 8u) << 25;
}
/* four nibbles (one per byte) through the IQ4 table */
__device__ __forceinline__ uint32_t iq4_word(uint32_t n) {
    uint32_t v = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) v |= (uint32_t)(uint8_t)kvalues[(n >> (8 * k)) & 15] << (8 * k);
    return v;
}
/* 16 bytes of packed nibbles (element j low, j + 16 high) as the unit's 8 words */
__device__ __forceinline__ void nibble_words(const uint8_t *p, uint32_t q[8]) {
    uint32_t w[4];
    ld128(p, w);
#pragma unroll
    for (int i = 0; i < 4; i++) q[i] = w[i] & 0x0F0F0F0Fu, q[4 + i] = (w[i] >> 4) & 0x0F0F0F0Fu;
}
__device__ __forceinline__ void same_scale(iw &o, int off, float d, float m) {
    o.off = off, o.d0 = o.d1 = d, o.m0 = o.m1 = m;
}

template <int T> struct has_iunit { enum { V = 0 }; };
#define IUNIT(T)                                                                                                     \
    template <> struct has_iunit<T> { enum { V = 1 }; };                                                            \
    template <> __device__ __forceinline__ void iunit<T>(const uint8_t *row, int64_t u, iw &o)
template <int T> __device__ __forceinline__ void iunit(const uint8_t *row, int64_t u, iw &o);

IUNIT(T_Q8_0) {
    const uint8_t *b = row + 34 * u;
    ldw<8>(b + 2, o.q);
    same_scale(o, 0, h2f(ld16(b)), 0.0f);
}
IUNIT(T_Q4_0) {
    const uint8_t *b = row + 18 * u;
    nibble_words(b + 2, o.q);
    same_scale(o, -8, h2f(ld16(b)), 0.0f);
}
IUNIT(T_IQ4_NL) {
    const uint8_t *b = row + 18 * u;
    nibble_words(b + 2, o.q);
#pragma unroll
    for (int i = 0; i < 8; i++) o.q[i] = iq4_word(o.q[i]);
    same_scale(o, 0, h2f(ld16(b)), 0.0f);
}
IUNIT(T_Q4_1) {
    const uint8_t *b = row + 20 * u;
    nibble_words(b + 4, o.q);
    same_scale(o, 0, h2f(ld16(b)), h2f(ld16(b + 2)));
}
/* Q5_0 and Q5_1: the 32 fifth bits (element j's at bit j) at qh, then the nibbles */
__device__ __forceinline__ void q5_words(const uint8_t *qh_at, uint32_t q[8]) {
    const uint32_t qh = ld32(qh_at);
    nibble_words(qh_at + 4, q);
#pragma unroll
    for (int i = 0; i < 4; i++) q[i] |= spread4(qh >> (4 * i)), q[4 + i] |= spread4(qh >> (16 + 4 * i));
}
IUNIT(T_Q5_0) {
    const uint8_t *b = row + 22 * u;
    q5_words(b + 2, o.q);
    same_scale(o, -16, h2f(ld16(b)), 0.0f);
}
IUNIT(T_Q5_1) {
    const uint8_t *b = row + 24 * u;
    q5_words(b + 4, o.q);
    same_scale(o, 0, h2f(ld16(b)), h2f(ld16(b + 2)));
}
IUNIT(T_Q2_K) {
    const uint8_t *b = row + 84 * (u >> 3);
    const int sub = (int)(u & 7), h = sub >> 2, s = sub & 3;
    const float d = h2f(ld16(b + 80)), dmin = h2f(ld16(b + 82));
    ldw<8>(b + 16 + 32 * h, o.q);
#pragma unroll
    for (int i = 0; i < 8; i++) o.q[i] = (o.q[i] >> (2 * s)) & 0x03030303u;
    const int sc0 = b[2 * sub], sc1 = b[2 * sub + 1];
    o.off = 0;
    o.d0 = __fmul_rn(d, (float)(sc0 & 15)), o.d1 = __fmul_rn(d, (float)(sc1 & 15));
    o.m0 = -__fmul_rn(dmin, (float)(sc0 >> 4)), o.m1 = -__fmul_rn(dmin, (float)(sc1 >> 4));
}
IUNIT(T_Q3_K) {
    const uint8_t *b = row + 110 * (u >> 3);
    const int sub = (int)(u & 7), h = sub >> 2, s = sub & 3;
    const float d = h2f(ld16(b + 108));
    const uint8_t *sc = b + 96;
    /* level = low 2 bits + 4 * the mask bit, offset -4 (dequant_ref: minus 4 where the bit is clear) */
    uint32_t hm[8];
    ldw<8>(b + 32 + 32 * h, o.q);
    ldw<8>(b, hm);
#pragma unroll
    for (int i = 0; i < 8; i++) o.q[i] = ((o.q[i] >> (2 * s)) & 0x03030303u) | ((hm[i] >> sub) & 0x01010101u) << 2;
    float dl[2];
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int j = 2 * sub + half;
        const int lo = (j < 8 ? sc[j] : sc[j - 8] >> 4) & 15, hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
        dl[half] = __fmul_rn(d, (float)((lo | hi << 4) - 32));
    }
    o.off = -4, o.d0 = dl[0], o.d1 = dl[1], o.m0 = o.m1 = 0.0f;
}
IUNIT(T_Q4_K) {
    const uint8_t *b = row + 144 * (u >> 3);
    const int j = (int)(u & 7), shift = 4 * (j % 2);
    int sc, m;
    scale_min_k4(b + 4, j, &sc, &m);
    ldw<8>(b + 16 + 32 * (j / 2), o.q);
#pragma unroll
    for (int i = 0; i < 8; i++) o.q[i] = (o.q[i] >> shift) & 0x0F0F0F0Fu;
    same_scale(o, 0, __fmul_rn(h2f(ld16(b)), (float)sc), -__fmul_rn(h2f(ld16(b + 2)), (float)m));
}
IUNIT(T_Q5_K) {
    const uint8_t *b = row + 176 * (u >> 3);
    const int j = (int)(u & 7), shift = 4 * (j % 2);
    int sc, m;
    scale_min_k4(b + 4, j, &sc, &m);
    uint32_t qh[8];
    ldw<8>(b + 48 + 32 * (j / 2), o.q);
    ldw<8>(b + 16, qh);
#pragma unroll
    for (int i = 0; i < 8; i++) o.q[i] = ((o.q[i] >> shift) & 0x0F0F0F0Fu) | ((qh[i] >> j) & 0x01010101u) << 4;
    same_scale(o, 0, __fmul_rn(h2f(ld16(b)), (float)sc), -__fmul_rn(h2f(ld16(b + 2)), (float)m));
}
IUNIT(T_Q6_K) {
    const uint8_t *b = row + 210 * (u >> 3);
    const int sub = (int)(u & 7), h = sub >> 2, r0 = 32 * (sub & 3);
    const int lshift = 4 * (r0 / 64), hshift = 2 * (r0 / 32);
    const float d = h2f(ld16(b + 208));
    uint32_t qh[8];
    ldw<8>(b + 64 * h + (r0 % 64), o.q);
    ldw<8>(b + 128 + 32 * h, qh);
#pragma unroll
    for (int i = 0; i < 8; i++) o.q[i] = ((o.q[i] >> lshift) & 0x0F0F0F0Fu) | ((qh[i] >> hshift) & 0x03030303u) << 4;
    o.off = -32, o.m0 = o.m1 = 0.0f;
    o.d0 = __fmul_rn(d, (float)(int8_t)b[192 + 2 * sub]), o.d1 = __fmul_rn(d, (float)(int8_t)b[192 + 2 * sub + 1]);
}
IUNIT(T_IQ4_XS) {
    const uint8_t *b = row + 136 * (u >> 3);
    const int j = (int)(u & 7);
    const int scales_h = ld16(b + 2);
    const int ls = ((b[4 + j / 2] >> (4 * (j % 2))) & 15) | (((scales_h >> (2 * j)) & 3) << 4);
    nibble_words(b + 8 + 16 * j, o.q);
#pragma unroll
    for (int i = 0; i < 8; i++) o.q[i] = iq4_word(o.q[i]);
    same_scale(o, 0, __fmul_rn(h2f(ld16(b)), (float)(ls - 32)), 0.0f);
}
#undef IUNIT

/* scale_min_k4 with the 12 scale bytes in registers: bytes 4..15 of the block's header
 * (h.y, h.z, h.w) */
__device__ __forceinline__ void k4_scale_min(const uint4 &h, int j, int *sc, int *m) {
    const int k = 8 * (j & 3);
    scale_min_k4_bytes((int)(h.y >> k) & 255, (int)(h.z >> k) & 255, (int)(h.w >> k) & 255, j, sc, m);
}

/* four 6-bit levels (one per byte, 0..63) minus 32, as signed bytes */
__device__ __forceinline__ uint32_t signed6(uint32_t v) {
    const uint32_t x = v ^ 0x20202020u, sign = x & 0x20202020u;
    return x | sign << 1 | sign << 2;
}

} // namespace

/* CALL(T) for the weight type `type` at run time (T a constant: a template argument). */
#define CK_DISPATCH(type, CALL)                                                                                      \
    switch (type) {                                                                                                  \
    case T_F32: CALL(T_F32); break;                                                                                  \
    case T_F16: CALL(T_F16); break;                                                                                  \
    case T_BF16: CALL(T_BF16); break;                                                                                \
    case T_Q4_0: CALL(T_Q4_0); break;                                                                                \
    case T_Q4_1: CALL(T_Q4_1); break;                                                                                \
    case T_Q5_0: CALL(T_Q5_0); break;                                                                                \
    case T_Q5_1: CALL(T_Q5_1); break;                                                                                \
    case T_Q8_0: CALL(T_Q8_0); break;                                                                                \
    case T_IQ4_NL: CALL(T_IQ4_NL); break;                                                                            \
    case T_Q2_K: CALL(T_Q2_K); break;                                                                                \
    case T_Q3_K: CALL(T_Q3_K); break;                                                                                \
    case T_Q4_K: CALL(T_Q4_K); break;                                                                                \
    case T_Q5_K: CALL(T_Q5_K); break;                                                                                \
    case T_Q6_K: CALL(T_Q6_K); break;                                                                                \
    case T_IQ4_XS: CALL(T_IQ4_XS); break;                                                                            \
    default: break;                                                                                                  \
    }

#endif
