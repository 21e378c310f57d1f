/*
 * cuda_off.c — the CUDA backend in a build without it (the default `make`): asking
 * for the GPU says how to get it. `make CUDA=1` compiles cuda_engine.c instead.
 */
#include "cuda/cuda.h"

eddy_status cuda_backend_new(engine *c, cuda_backend **out, const state_mem **mem, eddy_error *err) {
    (void)c, (void)mem;
    *out = NULL;
    return eddy_error_set(err, EDDY_ERR_UNSUPPORTED, "this eddy was built without CUDA: rebuild with `make CUDA=1` "
                          "(needs the CUDA toolkit) to run on an NVIDIA GPU");
}

void cuda_backend_free(cuda_backend *g) { (void)g; }

const char *cuda_backend_name(const cuda_backend *g) {
    (void)g;
    return "cpu";
}

size_t cuda_backend_f16_bytes(const cuda_backend *g) {
    (void)g;
    return 0;
}

int cuda_backend_graphs(const cuda_backend *g, int64_t rows) {
    (void)g, (void)rows;
    return 0;
}

void cuda_backend_forms_made(const cuda_backend *g, int64_t *q8, int64_t *f16) {
    (void)g;
    *q8 = *f16 = 0;
}

eddy_status cuda_forward(engine *c, const int32_t *tokens, const step_plan *plan, float *logits, const step_digest *dg,
                         const int64_t *out_rows, int64_t n_out, eddy_error *err) {
    (void)c, (void)tokens, (void)plan, (void)logits, (void)dg, (void)out_rows, (void)n_out;
    return eddy_error_set(err, EDDY_ERR_UNSUPPORTED, "no CUDA backend in this build");
}

void cuda_logits_row(engine *c, int64_t row, float *dst) { (void)c, (void)row, (void)dst; }

int64_t cuda_logit_rows(const engine *c) {
    (void)c;
    return 0;
}

void cuda_accept(engine *c, int64_t il, eddy_seq *s, int64_t n_keep) {
    (void)c, (void)il, (void)s, (void)n_keep;
}

double cuda_copy_bandwidth(void) { return 0.0; }
size_t cuda_backend_free_bytes(const cuda_backend *g) {
    (void)g;
    return 0;
}

void cuda_mtp_h_from_state(engine *c, int64_t row, int64_t slot) { (void)c, (void)row, (void)slot; }
void cuda_mtp_chain_step(engine *c, const step_plan *mp, const int32_t *tok, int32_t *best, float *p) {
    (void)c, (void)mp, (void)tok, (void)best, (void)p;
}
void cuda_mtp_h_move(engine *c, int64_t dst, int64_t src) { (void)c, (void)dst, (void)src; }
