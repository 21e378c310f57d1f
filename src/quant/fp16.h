/*
 * fp16.h — IEEE half (binary16) and bfloat16 <-> float32 conversions, portable C.
 *
 * Owns: the four scalar conversions every block format uses for its scales and
 * the F16/BF16 tensor types. Does not own: vector (F16C / NEON fp16) conversions,
 * which live beside the SIMD kernels and are tested against these.
 *
 * Rules:
 *   - widening (fp16 -> f32, bf16 -> f32) is exact for every one of the 65536
 *     inputs; NaN payloads move with the bits (a signalling NaN stays signalling).
 *   - narrowing (f32 -> fp16, f32 -> bf16) rounds to nearest, ties to even;
 *     values past the largest finite become +-inf; NaN stays NaN (made quiet,
 *     high payload bits kept, sign kept).
 */
#ifndef EDDY_QUANT_FP16_H
#define EDDY_QUANT_FP16_H

#include <stdint.h>
#include <string.h>

static inline float fp16_bits_as_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t fp16_f32_as_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* binary16: sign 1, exponent 5 (bias 15), mantissa 10. */
static inline float fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1fu) {
        bits = sign | 0x7f800000u | (man << 13); /* inf, or NaN with its payload */
    } else if (exp != 0) {
        bits = sign | ((exp + (127 - 15)) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign; /* +-0 */
    } else {
        /* subnormal man * 2^-24: shift the leading 1 up to the implicit position */
        uint32_t e = 127 - 15 + 1;
        while (!(man & 0x400u)) {
            man <<= 1;
            e--;
        }
        bits = sign | (e << 23) | ((man & 0x3ffu) << 13);
    }
    return fp16_bits_as_f32(bits);
}

static inline uint16_t f32_to_fp16(float f) {
    uint32_t x = fp16_f32_as_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet bit set, top payload bits kept */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x1ffu));
    if (ax >= 0x477ff000u) /* >= 65520 (65504 + half an ulp, ties to inf) */
        return (uint16_t)(sign | 0x7c00u);
    uint32_t e = ax >> 23;
    if (ax < 0x38800000u) {
        /* below 2^-14: subnormal result q * 2^-24 (or 0). The value is m * 2^(e-150)
         * with m the 24-bit significand, i.e. m >> (126 - e) units of 2^-24. */
        uint32_t shift = 126 - e;
        if (shift >= 25) return sign; /* < 2^-25, or exactly 2^-25 (tie to even 0) */
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++; /* q may become 0x400: 2^-14 */
        return (uint16_t)(sign | q);
    }
    uint32_t h = ((e - (127 - 15)) << 10) | ((ax >> 13) & 0x3ffu);
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry bumps the exponent */
    return (uint16_t)(sign | h);
}

/* bfloat16: the top half of a float32. */
static inline float bf16_to_f32(uint16_t b) { return fp16_bits_as_f32((uint32_t)b << 16); }

static inline uint16_t f32_to_bf16(float f) {
    uint32_t x = fp16_f32_as_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u); /* quiet NaN */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16); /* overflow carries to inf */
}

#endif
