/*
 * cuda.h — the CUDA backend as the engine sees it: an engine made with
 * EDDY_DEVICE_CUDA holds a cuda_backend (c->gpu) with the model's weights, the work
 * buffers of a step and the state pool's slabs in GPU memory, and runs its forward
 * steps here instead of forward.c. Sequences, snapshots, forks, rollback and verify
 * are the engine's as on the CPU: they move slots and blocks of the pool, whose
 * memory operations (state_mem) the backend provides.
 *
 * Owns: the device copy of a model, the forward pass on the GPU (cuda_engine.c, over
 * the kernels of ck.h). In a build without CUDA (cuda_off.c) cuda_backend_new fails
 * with EDDY_ERR_UNSUPPORTED and nothing else is ever called.
 */
#ifndef EDDY_CUDA_CUDA_H
#define EDDY_CUDA_CUDA_H

#include "model/engine.h"

typedef struct cuda_backend cuda_backend;

/* Checks that the GPU backend runs engine c's model and parameters (c->m, n_batch,
 * n_ctx set), uploads the weights and allocates the step's buffers; *mem receives the
 * pool's device memory operations. Errors name what is missing or unsupported. */
eddy_status cuda_backend_new(engine *c, cuda_backend **out, const state_mem **mem, eddy_error *err);
void cuda_backend_free(cuda_backend *g);

/* Device memory free now (cudaMemGetInfo), or 0 when it cannot be known. */
size_t cuda_backend_free_bytes(const cuda_backend *g);
/* "cuda: <GPU name>" */
const char *cuda_backend_name(const cuda_backend *g);
/* Device bytes held by the f16 copies of the weights (cuda_engine.c, weight_f16). */
size_t cuda_backend_f16_bytes(const cuda_backend *g);
/* Step graphs held (captured, not yet evicted) for steps of `rows` rows: what a test
 * checks a kind of step was captured by. */
int cuda_backend_graphs(const cuda_backend *g, int64_t rows);
/* Product inputs the engine quantized to 8 bits (ck_gemv's integer path) and converted to f16
 * (cuBLAS) since it was made, where no form of them was held: the kernels that write an
 * input leave its forms, and the products after the first of one input reuse them. What a
 * test checks that reuse by. */
void cuda_backend_forms_made(const cuda_backend *g, int64_t *q8, int64_t *f16);

/* forward() on the GPU (same contract, engine.h); logits land in host memory, or (logits
 * NULL) each output row's digest in dg, found on the GPU (ck_top_rows, ck_logprob_rows).
 * Fails only on a CUDA error, named in err. */
eddy_status cuda_forward(engine *c, const int32_t *tokens, const step_plan *plan, float *logits, const step_digest *dg,
                         const int64_t *out_rows, int64_t n_out, eddy_error *err);

/* Row `row` of the last step's logits, still in the backend's logits buffer, into dst
 * (n_vocab floats on the host). */
void cuda_logits_row(engine *c, int64_t row, float *dst);
/* How many rows of a step's logits stay in that buffer: a step of more leaves only its
 * last group of them there */
int64_t cuda_logit_rows(const engine *c);

/* block_gdn_accept / block_mamba2_accept on the GPU: the kept rows replayed on sequence
 * s's slot in recurrent layer il. */
void cuda_accept(engine *c, int64_t il, eddy_seq *s, int64_t n_keep);

/* The MTP layer's drafts on the GPU (block_mtp.c's draft_group): h of the MTP layer's
 * state in slot into row `row` of the backend's h rows; one chain step over the plan's
 * rows (row j: token tok[j] and h row j; afterwards h row j is the next row's h, and
 * c->mtp_logits row j, on the host, the step's logits, or, where best is given, best[j]
 * and p[j] their argmax (the first of equal values) and its probability, found on the
 * GPU, the logits left there); h row src moved to row dst. */
void cuda_mtp_h_from_state(engine *c, int64_t row, int64_t slot);
void cuda_mtp_chain_step(engine *c, const step_plan *mp, const int32_t *tok, int32_t *best, float *p);
void cuda_mtp_h_move(engine *c, int64_t dst, int64_t src);

/* The GPU's memory bandwidth: a device-to-device copy of 1 GiB, bytes read plus bytes
 * written over its time (best of 5); 0 when it cannot be measured. */
double cuda_copy_bandwidth(void);

#endif
