/*
 * norm.c — RMSNorm, SwiGLU and softmax (scalar; these are a small share of a
 * forward pass next to the matrix products).
 */
#include "norm.h"

#include "vec.h"

void ops_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    const float scale = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
    if (w)
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
    else
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
}

void ops_rmsnorm_rows(float *y, int64_t sy, const float *x, int64_t sx, const float *w, int64_t n,
                      int64_t n_rows, float eps) {
    for (int64_t r = 0; r < n_rows; r++) ops_rmsnorm(y + r * sy, x + r * sx, w, n, eps);
}

/* Elements a thread should get before another one is woken. */
#define RMSNORM_MIN_WORK ((int64_t)1 << 14)

typedef struct {
    float *y;
    const float *x, *w;
    int64_t sy, sx, n, n_rows;
    float eps;
} rmsnorm_job;

static void rmsnorm_task(void *p, int ith, int nth) {
    const rmsnorm_job *j = p;
    int64_t b, e;
    pool_split(j->n_rows, ith, nth, &b, &e);
    ops_rmsnorm_rows(j->y + b * j->sy, j->sy, j->x + b * j->sx, j->sx, j->w, j->n, e - b, j->eps);
}

void ops_rmsnorm_rows_mt(threadpool *pool, float *y, int64_t sy, const float *x, int64_t sx, const float *w, int64_t n,
                         int64_t n_rows, float eps) {
    const int nth = pool_parts_for(pool, n * n_rows, RMSNORM_MIN_WORK);
    if (nth < 2 || n_rows < 2) {
        ops_rmsnorm_rows(y, sy, x, sx, w, n, n_rows, eps);
        return;
    }
    rmsnorm_job j = {y, x, w, sy, sx, n, n_rows, eps};
    pool_run(pool, rmsnorm_task, &j, nth);
}

void ops_swiglu(float *out, const float *gate, const float *up, int64_t n) { vec_swiglu_f32(out, gate, up, n); }

void ops_softmax(float *x, int64_t n) {
    if (n <= 0) return;
    float max = x[0];
    for (int64_t i = 1; i < n; i++)
        if (x[i] > max) max = x[i];
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}
