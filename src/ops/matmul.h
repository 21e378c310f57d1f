/*
 * matmul.h — y = x · W^T for a weight matrix W in any supported GGUF type.
 *
 * Owns: the matrix product over tokens and output rows: activation quantization
 * (once per token row, into caller-provided scratch), the split of output rows over
 * the thread pool, and the prefill tiles that reuse each weight row for several
 * tokens. Does not own: the per-type dot kernels (quant/qdot.h) or the block
 * formats (quant/quant.h). Allocates nothing.
 *
 * Shapes (GGUF order: a weight tensor has ne = {n_in, n_out}):
 *   W: (n_out, n_in), row r at (const char *)data + r * row_bytes, in `type`
 *   x: (n_tok, n_in) float32, row t at x + t * x_stride
 *   y: (n_tok, n_out) float32, row t at y + t * y_stride
 * Each y[t][r] is the dispatched kernel's dot of W row r with x row t quantized to
 * quant_dot_type(type); matmul_ref computes the same with vec_dot_ref, and the two
 * agree within the kernels' bound (docs/kernels-matmul.md).
 */
#ifndef EDDY_OPS_MATMUL_H
#define EDDY_OPS_MATMUL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "quant/quant.h"

typedef struct {
    qtype type;
    int64_t n_in;     /* elements per row (ne0), a multiple of the type's block size */
    int64_t n_out;    /* rows (ne1) */
    size_t row_bytes; /* bytes from one row to the next */
    const void *data; /* row 0, aligned as quant_row_align(type) says */
    const void *packed; /* NULL, or the same rows repacked by matmul_pack (quant/qpack.h) */
} matmul_weight;

/* A view of a packed weight tensor (rows back to back). False, and *w untouched, when
 * the type is not supported, n_in is not a multiple of its block size, a count is
 * negative, or the data is misaligned; the caller reports that as a bad tensor. */
bool matmul_weight_init(matmul_weight *w, uint32_t type, int64_t n_in, int64_t n_out, const void *data);

/* Bytes of the packed copy of w that matmul_pack writes, or 0 when this CPU has no
 * packed kernel for w's type (or one would not pay: with AMX, prefill reads the rows
 * as they are). */
size_t matmul_pack_bytes(const matmul_weight *w);

/* Repacks w's rows into dst (matmul_pack_bytes(w) bytes, 64-byte aligned) and points
 * w->packed at it; from then on matmul reads only the packed copy (matmul_ref still
 * reads w->data). */
void matmul_pack(matmul_weight *w, void *dst);

/* Bytes of scratch matmul and matmul_ref need for n_tok token rows (SIZE_MAX if the
 * size overflows). The scratch needs no particular alignment. */
size_t matmul_scratch_bytes(const matmul_weight *w, int64_t n_tok);

/* y = x · W^T on up to pool_size(pool) threads (pool may be NULL: one thread).
 * scratch holds at least matmul_scratch_bytes(w, n_tok) bytes; x and y do not overlap
 * it or each other. Not to be called from inside a pool task. */
void matmul(threadpool *pool, const matmul_weight *w, const float *x, int64_t x_stride, int64_t n_tok, float *y,
            int64_t y_stride, void *scratch, size_t scratch_bytes);

/* Several products of the same x at once, y[i] = x . W[i]^T for i < n_w (at most
 * MATMUL_MANY_MAX): when every W[i] is packed in the same format, x is quantized once
 * and all their rows go in one pass over the threads (one hand-off instead of n_w,
 * which is what bounds small models' decode); otherwise one matmul each. scratch holds
 * the largest matmul_scratch_bytes of them. */
#define MATMUL_MANY_MAX 4
void matmul_many(threadpool *pool, const matmul_weight *const *w, int n_w, const float *x, int64_t x_stride,
                 int64_t n_tok, float *const *y, const int64_t *y_stride, void *scratch, size_t scratch_bytes);

/* Multiply-adds each thread must get before matmul uses another thread (waking one
 * costs microseconds). Default 2^17; tests lower it to exercise the split. */
extern int64_t matmul_min_work;

/* The oracle: quantize_row_ref and vec_dot_ref for every element, one thread. */
void matmul_ref(const matmul_weight *w, const float *x, int64_t x_stride, int64_t n_tok, float *y, int64_t y_stride,
                void *scratch, size_t scratch_bytes);

#endif
