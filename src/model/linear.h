/*
 * linear.h — y = x W^T for a weight tensor in any supported format.
 *
 *   x (n_tok, n_in) f32, rows contiguous; W (n_out rows of n_in) in its GGUF type;
 *   y (n_tok, n_out) f32, rows contiguous.
 * Each activation row is converted once to the weight type's dot format
 * (quant_dot_type) in caller-provided scratch, then output rows are split over the
 * thread pool.
 */
#ifndef EDDY_MODEL_LINEAR_H
#define EDDY_MODEL_LINEAR_H

#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "model/model.h"

/* Scratch bytes linear() needs for n_tok rows of W's input. */
size_t linear_scratch_bytes(const tensor *W, int64_t n_tok);

void linear(threadpool *pool, const tensor *W, const float *x, int64_t n_tok, float *y, void *scratch);

/* y[i] = x W[i]^T for i < n (at most MATMUL_MANY_MAX) weights reading the same x: one
 * pass over the threads when they are packed alike (ops/matmul.h matmul_many); scratch
 * as for the largest of them. */
void linear_many(threadpool *pool, const tensor *const *W, int n, const float *x, int64_t n_tok, float *const *y,
                 void *scratch);

#endif
