/*
 * ssm_gate.c — the decay gate of Gated DeltaNet: g = a * softplus(alpha + dt_bias),
 * beta = sigmoid(b) (ssm.h).
 *
 * The gate is a few hundred scalars per token (one per head), far below the cost
 * of the projections around it, so it has one scalar implementation; the plain
 * name exists so that callers do not depend on that.
 */
#include "base/error.h"
#include "ops/norm.h"
#include "ssm/ssm.h"

/* ==== Decay gate ==== */

void ssm_gate_ref(int64_t n_rows, int64_t n_heads, const float *alpha, int64_t alpha_stride, const float *b,
                  int64_t b_stride, int64_t group, int64_t group_stride, const float *a, const float *dt_bias,
                  float *g, float *beta) {
    EDDY_ASSERT(group >= 1 && group_stride >= group);
    for (int64_t r = 0; r < n_rows; r++) {
        const float *al = alpha + r * alpha_stride;
        for (int64_t h = 0; h < n_heads; h++) {
            const int64_t at = h / group * group_stride + h % group;
            g[r * n_heads + h] = a[h] * ops_softplus(al[at] + dt_bias[h]);
        }
        if (!b || !beta) continue;
        const float *br = b + r * b_stride;
        for (int64_t h = 0; h < n_heads; h++)
            beta[r * n_heads + h] = ops_sigmoid(br[h / group * group_stride + h % group]);
    }
}

void ssm_gate(int64_t n_rows, int64_t n_heads, const float *alpha, int64_t alpha_stride, const float *b,
              int64_t b_stride, int64_t group, int64_t group_stride, const float *a, const float *dt_bias, float *g,
              float *beta) {
    ssm_gate_ref(n_rows, n_heads, alpha, alpha_stride, b, b_stride, group, group_stride, a, dt_bias, g, beta);
}
