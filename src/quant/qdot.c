/*
 * qdot.c — the variant table and run-time dispatch of the fast dot kernels and
 * activation quantizers (qdot.h); the reference kernel adaptors.
 *
 * The choice is made once per process, from the ISA level in force and its
 * extensions (base/isa.h; at ISA_REF, e.g. under EDDY_FORCE_REF=1, only "ref" is
 * available).
 */
#include "qdot.h"

#include <pthread.h>
#include <string.h>

#include "base/isa.h"
#include "base/error.h"

/* ==== Reference kernels ==== */

void qdot_ref(qtype weight_type, int64_t n, const void *w_row, const void *act, size_t act_stride, int n_act,
              float *out) {
    EDDY_ASSERT(n_act >= 1 && n_act <= QDOT_MAX_ACT);
    for (int c = 0; c < n_act; c++) out[c] = vec_dot_ref(weight_type, n, w_row, (const char *)act + c * act_stride);
}

#define REF_KERNEL(T)                                                                                        \
    static void ref_##T(int64_t n, const void *w, const void *a, size_t as, int na, float *out) {            \
        qdot_ref(QTYPE_##T, n, w, a, as, na, out);                                                           \
    }
REF_KERNEL(F32)
REF_KERNEL(F16)
REF_KERNEL(BF16)
REF_KERNEL(Q4_0)
REF_KERNEL(Q4_1)
REF_KERNEL(Q5_0)
REF_KERNEL(Q5_1)
REF_KERNEL(Q8_0)
REF_KERNEL(IQ4_NL)
REF_KERNEL(Q2_K)
REF_KERNEL(Q3_K)
REF_KERNEL(Q4_K)
REF_KERNEL(Q5_K)
REF_KERNEL(Q6_K)
REF_KERNEL(IQ4_XS)

static qdot_fn qdot_kernel_ref(qtype t) {
    switch (t) {
    case QTYPE_F32: return ref_F32;
    case QTYPE_F16: return ref_F16;
    case QTYPE_BF16: return ref_BF16;
    case QTYPE_Q4_0: return ref_Q4_0;
    case QTYPE_Q4_1: return ref_Q4_1;
    case QTYPE_Q5_0: return ref_Q5_0;
    case QTYPE_Q5_1: return ref_Q5_1;
    case QTYPE_Q8_0: return ref_Q8_0;
    case QTYPE_IQ4_NL: return ref_IQ4_NL;
    case QTYPE_Q2_K: return ref_Q2_K;
    case QTYPE_Q3_K: return ref_Q3_K;
    case QTYPE_Q4_K: return ref_Q4_K;
    case QTYPE_Q5_K: return ref_Q5_K;
    case QTYPE_Q6_K: return ref_Q6_K;
    case QTYPE_IQ4_XS: return ref_IQ4_XS;
    default: return NULL;
    }
}

/* ==== The variant table ==== */

enum { MAX_VARIANTS = 4 };
static qdot_variant variants[MAX_VARIANTS];
static int n_variants;

typedef struct {
    const char *name;
    qdot_fn kernel;
    qgemm4_fn gemm4;
} choice;
static choice chosen[QTYPE_COUNT];
static qquant_fn chosen_q8_0, chosen_q8_K;

static void init_variants(void) {
    int n = 0;
    variants[n++] = (qdot_variant){"ref", true, qdot_kernel_ref, quantize_row_q8_0_ref, quantize_row_q8_K_ref, NULL};
#if defined(__x86_64__)
    variants[n++] = (qdot_variant){"avx2", isa_available(ISA_AVX2), qdot_kernel_avx2, quantize_row_q8_0_avx2,
                                   quantize_row_q8_K_avx2, NULL};
    variants[n++] = (qdot_variant){"avx512", isa_has(ISA_EXT_AVX512VNNI), qdot_kernel_avx512,
                                   quantize_row_q8_0_avx512, quantize_row_q8_K_avx512, qdot_gemm4_avx512};
#elif defined(__aarch64__)
    variants[n++] = (qdot_variant){"neon", isa_available(ISA_NEON), qdot_kernel_neon, quantize_row_q8_0_neon,
                                   quantize_row_q8_K_neon, NULL};
    variants[n++] = (qdot_variant){"neon_dotprod", isa_has(ISA_EXT_DOTPROD), qdot_kernel_neon_dotprod, NULL, NULL,
                                   NULL};
#endif
    n_variants = n;
    /* best last: the last available variant with a kernel wins */
    for (int t = 0; t < QTYPE_COUNT; t++) {
        if (!quant_weight_supported((qtype)t)) continue;
        for (int v = 0; v < n; v++) {
            qdot_fn k = variants[v].available ? variants[v].kernel((qtype)t) : NULL;
            if (k) chosen[t] = (choice){variants[v].name, k, variants[v].gemm4 ? variants[v].gemm4((qtype)t) : NULL};
        }
    }
    for (int v = 0; v < n; v++) {
        if (!variants[v].available) continue;
        if (variants[v].q8_0) chosen_q8_0 = variants[v].q8_0;
        if (variants[v].q8_K) chosen_q8_K = variants[v].q8_K;
    }
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

const qdot_variant *qdot_variants(int *n) {
    pthread_once(&once, init_variants);
    *n = n_variants;
    return variants;
}

/* ==== Dispatch ==== */

qdot_fn qdot_kernel(qtype weight_type) {
    pthread_once(&once, init_variants);
    EDDY_ASSERT((unsigned)weight_type < QTYPE_COUNT && chosen[weight_type].kernel);
    return chosen[weight_type].kernel;
}

const char *qdot_kernel_name(qtype weight_type) {
    pthread_once(&once, init_variants);
    EDDY_ASSERT((unsigned)weight_type < QTYPE_COUNT && chosen[weight_type].kernel);
    return chosen[weight_type].name;
}

qgemm4_fn qdot_gemm4(qtype weight_type) {
    pthread_once(&once, init_variants);
    EDDY_ASSERT((unsigned)weight_type < QTYPE_COUNT && chosen[weight_type].kernel);
    return chosen[weight_type].gemm4;
}

float qdot(qtype weight_type, int64_t n, const void *w_row, const void *act_row) {
    float out;
    qdot_kernel(weight_type)(n, w_row, act_row, 0, 1, &out);
    return out;
}

void quantize_row_act(qtype act_type, const float *x, void *dst, int64_t n) {
    pthread_once(&once, init_variants);
    switch (act_type) {
    case QTYPE_Q8_0: chosen_q8_0(x, dst, n); break;
    case QTYPE_Q8_K: chosen_q8_K(x, dst, n); break;
    default: quantize_row_ref(act_type, x, dst, n); break;
    }
}
