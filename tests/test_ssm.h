/*
 * test_ssm.h — helpers shared by the tests of src/ssm/ (test_ssm_*.c): random
 * buffers, comparisons with a stated bound that print the first mismatch, the
 * list of ISAs to try, and the reader of the golden files in tests/data/ssm/.
 */
#ifndef EDDY_TEST_SSM_H
#define EDDY_TEST_SSM_H

#include <stdlib.h>

#include "base/threadpool.h"
#include "ssm/ssm.h"
#include "test.h"

static inline float *ssm_test_alloc(int64_t n) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (p)
        for (int64_t i = 0; i < n; i++) p[i] = NAN; /* unwritten outputs show up */
    return p;
}

static inline void ssm_test_normal(test_rng *rng, float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] = scale * test_rng_normal(rng);
}

/* Every ISA this machine can run, scalar kernels (threaded driver) first. With
 * small == false the scalar kernels are left out when a SIMD ISA exists: large
 * cases then run them only in the EDDY_FORCE_REF pass of `make test`, which keeps
 * the sanitizer and emulator passes short. */
static inline int ssm_test_isas_for(isa_level *out, bool small) {
    int n = 0;
    for (int i = 0; i < ISA_COUNT; i++)
        if (isa_available((isa_level)i)) out[n++] = (isa_level)i;
    if (!small && n > 1) {
        for (int i = 1; i < n; i++) out[i - 1] = out[i];
        n--;
    }
    return n;
}
static inline int ssm_test_isas(isa_level *out) { return ssm_test_isas_for(out, true); }

static inline bool ssm_test_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

/* Normalized MSE of got against ref over n elements at a stride (rows of `len`
 * floats, `stride` apart), with the first element that differs most printed on
 * failure. Returns true when nmse <= bound. The error is normalized by the
 * reference's mean square, or by floor² when that is larger: an output that is
 * one dot product can cancel to almost nothing, and its rounding error, which
 * follows the size of the terms and not of their sum, would then count as large. */
static inline bool ssm_test_close_rows_floor(const char *file, int line, const char *what, const float *got,
                                             const float *ref, int64_t rows, int64_t len, int64_t stride,
                                             double bound, double floor) {
    double num = 0, den = 0, worst = -1;
    int64_t wr = 0, wc = 0;
    bool finite = true;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < len; c++) {
            double a = got[r * stride + c], b = ref[r * stride + c], d = a - b;
            if (!isfinite(a) && isfinite(b)) finite = false;
            num += d * d, den += b * b;
            if (fabs(d) > worst || !isfinite(d)) worst = isfinite(d) ? fabs(d) : INFINITY, wr = r, wc = c;
        }
    den = fmax(den, (double)(rows * len) * floor * floor);
    double nmse = den > 0 ? num / den : (num > 0 ? INFINITY : 0);
    bool ok = finite && nmse <= bound;
    return test_check(ok, file, line, "%s: nmse %.3g > %.3g%s (worst at row %lld col %lld: %.9g vs %.9g)", what, nmse,
                      bound, finite ? "" : " (non-finite)", (long long)wr, (long long)wc,
                      (double)got[wr * stride + wc], (double)ref[wr * stride + wc]);
}
#define CLOSE_ROWS(what, got, ref, rows, len, stride, bound) \
    ssm_test_close_rows_floor(__FILE__, __LINE__, what, got, ref, rows, len, stride, bound, 0.0)
#define CLOSE_ROWS_FLOOR(what, got, ref, rows, len, stride, bound, floor) \
    ssm_test_close_rows_floor(__FILE__, __LINE__, what, got, ref, rows, len, stride, bound, floor)
#define CLOSE(what, got, ref, n, bound) CLOSE_ROWS(what, got, ref, 1, n, n, bound)

/* ==== Golden files (scripts/gen_ssm_golden.py) ====
 * "EDSG", u32 version (1), u32 count; then per array: char name[32] (NUL-padded),
 * u32 ndim, u32 dims[4], float32 data (product of dims). Little-endian. */
typedef struct {
    void *blob;
    size_t size;
} ssm_golden;

static inline bool ssm_golden_open(ssm_golden *g, const char *rel) {
    g->blob = test_read_file(test_data_path(rel), &g->size);
    return g->blob && g->size >= 12 && !memcmp(g->blob, "EDSG", 4);
}

/* The array called name (NULL if absent); *n gets its element count. */
static inline const float *ssm_golden_get(const ssm_golden *g, const char *name, int64_t *n) {
    const uint8_t *p = g->blob, *end = p + g->size;
    uint32_t count;
    memcpy(&count, p + 8, 4);
    p += 12;
    for (uint32_t i = 0; i < count && p + 52 <= end; i++) {
        uint32_t ndim, dims[4];
        memcpy(&ndim, p + 32, 4);
        memcpy(dims, p + 36, 16);
        int64_t len = 1;
        for (uint32_t d = 0; d < ndim && d < 4; d++) len *= dims[d];
        const uint8_t *data = p + 52;
        if (data + len * 4 > end) return NULL;
        if (!strncmp((const char *)p, name, 32)) {
            if (n) *n = len;
            return (const float *)data; /* 4-byte aligned: headers and data are multiples of 4 */
        }
        p = data + len * 4;
    }
    return NULL;
}

static inline void ssm_golden_close(ssm_golden *g) { free(g->blob); }

#endif
