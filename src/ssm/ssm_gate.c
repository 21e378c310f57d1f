/*
 * ssm_gate.c — the decay gate (g = a * softplus(alpha + dt_bias), beta = sigmoid(b)).
 *
 * The gate is a few hundred scalars per token (one per head), far below the cost
 * of the projections around it, so it has one scalar implementation; the plain
 * name exists so that callers do not depend on that.
 */
#include <math.h>

#include "ssm/ssm.h"

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
