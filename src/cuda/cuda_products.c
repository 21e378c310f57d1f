/*
 * cuda_products.c — the GPU engine's products y = x W^T: ck_gemv for steps of up to
 * CK_GEMV_MAX_TOK rows (the weights decoded on the fly, x in 8 bits), ck_mmq_parts for up
 * to mmq_rows (the weights' 8-bit levels on the tensor cores), cuBLAS on f16 copies of the
 * weights for more (weight_f16: made at a weight's first such product, kept while device
 * memory allows); and the account of which input's 8-bit and f16 forms the scratch buffers
 * hold, so that each input is quantized or converted once.
 */
#include "cuda/cuda_backend.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"

/* A weight without the integer path small enough that a step of up to mmq_rows rows
 * multiplies it with ck_gemv, in passes of CK_GEMV_MAX_TOK rows that each read it again,
 * rather than through cuBLAS: the float routers and small gates that files keep beside
 * quantized weights (a router of 512 experts of 2048 is 4 MiB), so that those steps stay
 * replayable as graphs: in a model whose other products all take the integer path. */
#define SMALL_FLOAT_BYTES ((size_t)16 << 20)
bool cuda_small_float(const tensor *t) {
    return !ck_gemv_integer(t->type) && t->row_bytes * (size_t)tensor_rows(t) <= SMALL_FLOAT_BYTES;
}

/* The bytes the f16 copies of the weights may take: EDDY_CUDA_F16_CACHE MiB (0: none), or
 * by default the device memory free at the first product of more than CK_GEMV_MAX_TOK
 * rows (the state pool and the buffers are made by then) less a quarter of the device's,
 * which stays free for the prefix cache's states, cuBLAS and other processes. */
static int64_t f16_budget(void) {
    size_t free_bytes, total;
    if (!cuda_memory_info(&free_bytes, &total)) return 0;
    int64_t budget = (int64_t)free_bytes - (int64_t)(total / 4);
    const char *e = getenv("EDDY_CUDA_F16_CACHE");
    if (e && *e) {
        char *end;
        const double mib = strtod(e, &end);
        if (*end || !(mib >= 0 && mib <= 1e9))
            eddy_log(EDDY_LOG_WARN, "EDDY_CUDA_F16_CACHE=%s is not a number of MiB: using the default", e);
        else {
            const int64_t want = (int64_t)(mib * (1 << 20)), most = (int64_t)free_bytes - ((int64_t)512 << 20);
            budget = want < most ? want : most;
        }
    }
    budget = budget > 0 ? budget : 0;
    eddy_log(EDDY_LOG_DEBUG, "f16 copies of the weights for the tensor-core products: up to %.0f MiB",
             (double)budget / (1 << 20));
    return budget;
}

/* W as f16 for the tensor-core products: a copy made at its first product and kept (keyed
 * by W's bytes, so that a tied output matrix and its embedding share one and each expert
 * of a mixture has its own), or NULL once the copies have used up their budget: then the
 * caller dequantizes W into w16 for this product alone, as every product would without
 * copies. Prefill and batched decode thus read 2 bytes per weight per step instead of
 * writing and reading them. */
static const uint16_t *weight_f16(cuda_backend *g, const tensor *W) {
    for (int64_t i = 0; i < g->n_f16c; i++)
        if (g->f16c[i].data == W->data) return g->f16c[i].f16;
    if (g->f16_budget < 0) g->f16_budget = f16_budget();
    const int64_t n_in = W->ne[0], n_out = tensor_rows(W);
    const size_t bytes = (size_t)(n_in * n_out) * 2;
    if ((int64_t)bytes > g->f16_budget) return NULL;
    if (g->n_f16c == g->cap_f16c) {
        const int64_t cap = g->cap_f16c ? 2 * g->cap_f16c : 64;
        struct f16_copy *a = eddy_realloc(g->f16c, (size_t)cap * sizeof *a);
        if (!a) return NULL;
        g->f16c = a, g->cap_f16c = cap;
    }
    uint16_t *p = cuda_dev_alloc(g, bytes);
    if (!p) {
        g->f16_budget = 0; /* the device is fuller than it said: no more copies */
        return NULL;
    }
    ck_dequant_f16(W->type, W->data, W->row_bytes, n_in, n_out, p, g->stream);
    g->f16c[g->n_f16c++] = (struct f16_copy){W->data, p};
    g->f16_budget -= (int64_t)bytes;
    g->f16_bytes += bytes;
    return p;
}

/* ck_gemv's scratch holds the 8-bit form of x (n rows of cols), or (x NULL) of nothing to
 * rely on; cuda_lin_parts says so of the inputs it quantizes. */
void cuda_q8_holds(cuda_backend *g, const float *x, int64_t n, int64_t cols) {
    g->xq_of = x, g->xq_rows = n, g->xq_cols = cols;
}
bool cuda_q8_held(const cuda_backend *g, const float *x, int64_t n, int64_t cols) {
    return g->xq_of == x && g->xq_rows == n && g->xq_cols == cols;
}

/* g->x16 holds the f16 form of x (n rows of cols), or (x NULL) of nothing to rely on; as
 * cuda_q8_holds, for the products of the steps that go through cuBLAS. */
static void x16_holds(cuda_backend *g, const float *x, int64_t n, int64_t cols) {
    g->x16_of = x, g->x16_rows = n, g->x16_cols = cols;
}
static bool x16_held(const cuda_backend *g, const float *x, int64_t n, int64_t cols) {
    return g->x16_of == x && g->x16_rows == n && g->x16_cols == cols;
}

/* A kernel wrote x (n rows of cols), the input of the products after it, and left its
 * 8-bit form in gemv_q8 (q8) and its f16 form in x16 (f16), or not: every kernel that
 * writes a product's input says so, since the forms held of the x it overwrote are stale. */
void cuda_x_written(cuda_backend *g, const float *x, int64_t n, int64_t cols, bool q8, bool f16) {
    cuda_q8_holds(g, q8 ? x : NULL, n, cols);
    x16_holds(g, f16 ? x : NULL, n, cols);
}

/* Where a kernel whose output is the input of the next product leaves that output's f16
 * form: g->x16 when the products of a step of n rows go through cuBLAS (more than
 * mmq_rows, or no ck_mmq_parts), else NULL. */
uint16_t *cuda_x16_room(const cuda_backend *g, int64_t n) {
    return n > CK_GEMV_MAX_TOK && (n > g->mmq_rows || !g->mmq_q8) ? g->x16 : NULL;
}

/* y (n, rows of W) = x (n, W->ne[0]) W^T on the tensor cores (cuBLAS): steps of more than
 * CK_GEMV_MAX_TOK rows. x16_ready: g->x16 holds x in f16 already (the product before had
 * the same x); returns whether it does afterwards. */
static bool lin_blas(cuda_backend *g, const tensor *W, const float *x, int64_t n, float *y, bool x16_ready) {
    const int64_t n_in = W->ne[0], n_out = tensor_rows(W);
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st;
    /* y^T (n_out, n) = W (n_out, n_in) x^T in cuBLAS's column-major terms: W's rows are
     * the columns of an (n_in, n_out) matrix, transposed */
    if (W->type == QTYPE_F32) {
        PROF(g, PROF_GEMM,
             st = cublasSgemm(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n_out, (int)n, (int)n_in, &one, f32(W),
                              (int)n_in, x, (int)n_in, &zero, y, (int)n_out));
    } else {
        const void *A = NULL;
        PROF(g, PROF_TO_F16, {
            A = W->type == QTYPE_F16 ? (const void *)W->data : (const void *)weight_f16(g, W);
            if (!A) {
                ck_dequant_f16(W->type, W->data, W->row_bytes, n_in, n_out, g->w16, g->stream);
                A = g->w16;
            }
        });
        PROF(g, PROF_GEMM, {
            if (!x16_ready) ck_f32_to_f16(x, g->x16, n * n_in, g->stream), g->n_x16_made++;
            st = cublasGemmEx(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n_out, (int)n, (int)n_in, &one, A, CUDA_R_16F,
                              (int)n_in, g->x16, CUDA_R_16F, (int)n_in, &zero, y, CUDA_R_32F, (int)n_out,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        });
    }
    if (st != CUBLAS_STATUS_SUCCESS && g->blas_status == CUBLAS_STATUS_SUCCESS) g->blas_status = st;
    return W->type != QTYPE_F32 || x16_ready;
}
/* ys[k] = x W[k]^T for n_w <= CK_GEMV_MAX_PARTS weights of one x. A step of up to
 * CK_GEMV_MAX_TOK rows runs each run of consecutive weights of one type in one launch
 * (ck_gemv_parts), or two such runs where ck_gemv_parts_mixed takes their pair of types;
 * up to mmq_rows rows go through ck_mmq_parts (cuda_small_float weights: ck_gemv in passes),
 * more through cuBLAS. same_x: x is unchanged since the kernel that wrote it said so
 * (cuda_x_written), so the forms of it held since (the writer's, or those made by the products
 * of it before) are used again; else x is new. The forms made here are held afterwards,
 * and a product that leaves the scratch alone (a float weight's) keeps what it held. */
void cuda_lin_parts(cuda_backend *g, const tensor *const *W, float *const *ys, int n_w, const float *x, int64_t n,
                    bool same_x) {
    assert(n_w >= 1 && n_w <= CK_GEMV_MAX_PARTS);
    if (!same_x) cuda_x_written(g, x, n, W[0]->ne[0], false, false);
    bool x16 = x16_held(g, x, n, W[0]->ne[0]);
    for (int k = 0, e; k < n_w; k = e) {
        const int64_t n_in = W[k]->ne[0];
        const bool ready = cuda_q8_held(g, x, n, n_in);
        const bool mid = n > CK_GEMV_MAX_TOK && n <= g->mmq_rows && g->mmq_q8;
        /* small float weights take ck_gemv's passes only where that keeps the step a graph */
        const bool mmq = mid && ck_gemv_integer(W[k]->type);
        const bool passes = mid && !g->float_products && cuda_small_float(W[k]);
        if (n > CK_GEMV_MAX_TOK && !mmq && !passes) {
            x16 = lin_blas(g, W[k], x, n, ys[k], x16);
            if (x16) x16_holds(g, x, n, n_in);
            e = k + 1;
            continue;
        }
        ck_gemv_part parts[CK_GEMV_MAX_PARTS];
        for (int i = k; i < n_w; i++)
            parts[i - k] = (ck_gemv_part){W[i]->data, W[i]->row_bytes, tensor_rows(W[i]), ys[i]};
        for (e = k; e < n_w && W[e]->type == W[k]->type && W[e]->ne[0] == n_in; e++) {}
        if (passes) e = k + 1; /* the next weight of its type need not be small */
        int held = -1; /* ck_gemv's integer path: whether gemv_q8 holds x's 8-bit form after */
        if (mmq) {
            PROF(g, PROF_MMQ, ck_mmq_parts(W[k]->type, parts, e - k, n_in, x, n, g->mmq_q8, g->stream));
        } else {
            /* the weights of the next type too, in one launch where ck_gemv_parts_mixed takes the pair */
            int e2 = e, mixed = -1;
            while (e2 < n_w && W[e2]->type == W[e]->type && W[e2]->ne[0] == n_in) e2++;
            if (e2 > e)
                PROF(g, PROF_GEMV,
                     mixed = ck_gemv_parts_mixed(W[k]->type, e - k, W[e]->type, parts, e2 - k, n_in, x, n,
                                                 g->gemv_q8, ready, g->stream));
            if (mixed >= 0) held = mixed, e = e2;
            else
                PROF(g, PROF_GEMV,
                     held = ck_gemv_parts(W[k]->type, parts, e - k, n_in, x, n, g->gemv_q8, ready, g->stream));
            if (!ck_gemv_integer(W[k]->type)) held = -1; /* a float product leaves gemv_q8 alone */
        }
        if (held >= 0) {
            g->n_q8_made += held && !ready;
            cuda_q8_holds(g, held ? x : NULL, n, n_in);
        }
    }
}

void cuda_lin(cuda_backend *g, const tensor *W, const float *x, int64_t n, float *y) {
    cuda_lin_parts(g, &W, &y, 1, x, n, false);
}
/* a product of an x unchanged since its writer's cuda_x_written (cuda_lin_parts' same_x) */
void cuda_lin_again(cuda_backend *g, const tensor *W, const float *x, int64_t n, float *y) {
    cuda_lin_parts(g, &W, &y, 1, x, n, true);
}
