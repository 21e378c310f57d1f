/*
 * qpack_kernels.h — internal: the packed formats each SIMD file of qpack.h has a kernel
 * for, with the kernel's name there, so that qpack_avx512.c, qpack_avx2.c and
 * qpack_neon.c define and dispatch the same list: X(format, name) for each.
 */
#ifndef EDDY_QPACK_KERNELS_H
#define EDDY_QPACK_KERNELS_H

#define QPACK_KERNELS(X)                                                                                       \
    X(QPACK_Q8_0, q8_0)                                                                                        \
    X(QPACK_Q4_0, q4_0)                                                                                        \
    X(QPACK_Q4_1, q4_1)                                                                                        \
    X(QPACK_IQ4_NL, iq4_nl)                                                                                    \
    X(QPACK_Q5_0, q5_0)                                                                                        \
    X(QPACK_Q5_1, q5_1)                                                                                        \
    X(QPACK_Q4_K, q4_K)                                                                                        \
    X(QPACK_Q5_K, q5_K)                                                                                        \
    X(QPACK_IQ4_XS, iq4_xs)                                                                                    \
    X(QPACK_Q6_K, q6_K)                                                                                        \
    X(QPACK_Q3_K, q3_K)                                                                                        \
    X(QPACK_Q2_K, q2_K)                                                                                        \
    X(QPACK_F16, f16)                                                                                          \
    X(QPACK_BF16, bf16)

/* case F: return NAME; for a switch over the list */
#define QPACK_KERNEL_CASE(F, NAME) \
    case F: return NAME;

#endif
