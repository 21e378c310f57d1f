/*
 * norm.h — normalization and elementwise activations of the dense layers.
 *
 * Owns: RMSNorm, SiLU, sigmoid, softplus, SwiGLU over float32 rows. Does not own the
 * gated norms of the recurrent mixers (src/ssm/).
 */
#ifndef EDDY_OPS_NORM_H
#define EDDY_OPS_NORM_H

#include <math.h>
#include <stdint.h>

#include "base/threadpool.h"

/* y[i] = x[i] / sqrt(mean_j(x[j]^2) + eps) * w[i]   (w may be NULL: no scale).
 * x, y: (n); y may alias x. The mean is accumulated in double. */
void ops_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);

/* Rows: x, y (n_rows, n) with row strides (in floats) sx, sy; w (n) shared. */
void ops_rmsnorm_rows(float *y, int64_t sy, const float *x, int64_t sx, const float *w, int64_t n,
                      int64_t n_rows, float eps);

/* The same, rows split over the pool's threads when there are enough (each row is
 * normalized exactly as ops_rmsnorm_rows does it, whatever the split). */
void ops_rmsnorm_rows_mt(threadpool *pool, float *y, int64_t sy, const float *x, int64_t sx, const float *w, int64_t n,
                         int64_t n_rows, float eps);

static inline float ops_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float ops_silu(float x) { return x / (1.0f + expf(-x)); }
/* log(1 + exp(x)), guarded: x > 20 returns x (the difference is below float precision). */
static inline float ops_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* out[i] = silu(gate[i]) * up[i]; out may alias either input. */
void ops_swiglu(float *out, const float *gate, const float *up, int64_t n);

/* Softmax of x (n) in place, max-subtracted; sums in double. */
void ops_softmax(float *x, int64_t n);

#endif
