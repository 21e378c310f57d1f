/*
 * ssm_gate.c — the decay gate (g = a * softplus(alpha + dt_bias), beta = sigmoid(b))
 * and the ISA selection shared by every kernel under src/ssm/.
 *
 * The gate is a few hundred scalars per token (one per head), far below the cost
 * of the projections around it, so it has one scalar implementation; the plain
 * name exists so that callers do not depend on that.
 */
#include <math.h>

#include "base/cpu.h"
#include "ssm/ssm.h"

/* ==== ISA selection ==== */

bool ssm_isa_available(ssm_isa isa) {
    const cpu_caps *c = cpu_features();
    switch (isa) {
    case SSM_ISA_REF: return true;
#if defined(__x86_64__)
    case SSM_ISA_AVX2: return cpu_has_avx2(c);
    case SSM_ISA_AVX512: return cpu_has_avx512(c) && c->fma;
#elif defined(__aarch64__)
    case SSM_ISA_NEON: return c->neon;
#endif
    default: (void)c; return false;
    }
}

ssm_isa ssm_isa_best(void) {
    if (ssm_isa_available(SSM_ISA_AVX512)) return SSM_ISA_AVX512;
    if (ssm_isa_available(SSM_ISA_AVX2)) return SSM_ISA_AVX2;
    if (ssm_isa_available(SSM_ISA_NEON)) return SSM_ISA_NEON;
    return SSM_ISA_REF;
}

const char *ssm_isa_name(ssm_isa isa) {
    static const char *names[SSM_ISA_COUNT] = {"ref", "avx2", "avx512", "neon"};
    return (unsigned)isa < SSM_ISA_COUNT ? names[isa] : "?";
}

/* ==== Decay gate ==== */

static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

void ssm_gate_ref(int64_t n_rows, int64_t n_heads, const float *alpha, int64_t alpha_stride, const float *b,
                  int64_t b_stride, const float *a, const float *dt_bias, float *g, float *beta) {
    for (int64_t r = 0; r < n_rows; r++) {
        const float *al = alpha + r * alpha_stride;
        for (int64_t h = 0; h < n_heads; h++) g[r * n_heads + h] = a[h] * softplus(al[h] + dt_bias[h]);
        if (!b || !beta) continue;
        const float *br = b + r * b_stride;
        for (int64_t h = 0; h < n_heads; h++) beta[r * n_heads + h] = 1.0f / (1.0f + expf(-br[h]));
    }
}

void ssm_gate(int64_t n_rows, int64_t n_heads, const float *alpha, int64_t alpha_stride, const float *b,
              int64_t b_stride, const float *a, const float *dt_bias, float *g, float *beta) {
    ssm_gate_ref(n_rows, n_heads, alpha, alpha_stride, b, b_stride, a, dt_bias, g, beta);
}
