/*
 * cuda_profile.h — where a GPU step's time goes: with EDDY_CUDA_PROFILE=1 the CUDA backend
 * brackets each kind of work of its steps with events on its stream, adds up the times
 * after each step, and prints a table when the engine is freed.
 *
 * Owns: the events, the sums, the table. Does not own: the stream or what runs on it
 * (cuda_engine.c, which also turns its decode graphs off while profiling, since a replayed
 * graph cannot be bracketed per kind).
 */
#ifndef EDDY_CUDA_PROFILE_H
#define EDDY_CUDA_PROFILE_H

#include <cuda_runtime_api.h>

typedef enum {
    PROF_GEMV,      /* products of up to CK_GEMV_MAX_TOK rows (ck_gemv) */
    PROF_MMQ,       /* products of more rows on the quantized weights (ck_mmq_parts) */
    PROF_GEMM,      /* products on the tensor cores (cuBLAS) */
    PROF_TO_F16,    /* weights dequantized to f16 for them */
    PROF_ATTENTION, /* rotary embedding, KV store and attention */
    PROF_CONV,      /* causal conv1d and its windows */
    PROF_GDN,       /* the gated delta rule's scan */
    PROF_MAMBA2,    /* Mamba-2's scan */
    PROF_STEP,      /* a whole step, from its first kernel to its logits */
    PROF_KINDS
} prof_kind;

typedef struct cuda_profile cuda_profile;

/* A profile when EDDY_CUDA_PROFILE=1, else NULL (and every call below does nothing). */
cuda_profile *cuda_profile_new(void);

/* Starts timing on st; returns the mark to end (-1: not timing). */
int cuda_profile_begin(cuda_profile *p, cudaStream_t st);
void cuda_profile_end(cuda_profile *p, int mark, prof_kind kind, cudaStream_t st);

/* After a step's work: waits for it and adds its marks to the sums. */
void cuda_profile_step_done(cuda_profile *p);

/* Prints the table (to stderr, headed with the device's name) and frees. */
void cuda_profile_free(cuda_profile *p, const char *device);

#endif
