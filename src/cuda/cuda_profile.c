/*
 * cuda_profile.c — the step profile of the CUDA backend (cuda_profile.h).
 *
 * A step's marks are pairs of events recorded on the backend's stream around one piece of
 * work; cuda_profile_step_done synchronizes once and reads every pair's elapsed time. The
 * events are made once (MARKS pairs: more marks in one step than that go untimed, which the
 * table says). Times include the gaps in which the GPU waits for the host to launch, so a
 * step's total against the sum of its kinds shows how much of it is launching.
 */
#include "cuda/cuda_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

#define MARKS 4096

struct cuda_profile {
    cudaEvent_t ev[2 * MARKS];
    prof_kind kind[MARKS];
    int n_marks, n_made; /* marks of this step; event pairs made so far */
    double ms[PROF_KINDS];
    long long calls[PROF_KINDS], steps, untimed;
};

static const char *const kind_names[PROF_KINDS] = {
    "products of up to 8 rows (ck_gemv)", "products of 9+ rows, quantized (ck_mmq)",
    "products on the tensor cores (cuBLAS)", "weights dequantized to f16",
    "attention (rope, KV store, attention)", "causal conv1d", "gated delta rule scan", "Mamba-2 scan", "whole steps"};

cuda_profile *cuda_profile_new(void) {
    const char *e = getenv("EDDY_CUDA_PROFILE");
    if (!e || strcmp(e, "1") != 0) return NULL;
    return eddy_calloc(1, sizeof(cuda_profile));
}

int cuda_profile_begin(cuda_profile *p, cudaStream_t st) {
    if (!p) return -1;
    const int i = p->n_marks;
    if (i == MARKS) {
        p->untimed++;
        return -1;
    }
    if (i == p->n_made) {
        if (cudaEventCreate(&p->ev[2 * i]) != cudaSuccess) return -1;
        if (cudaEventCreate(&p->ev[2 * i + 1]) != cudaSuccess) {
            cudaEventDestroy(p->ev[2 * i]);
            return -1;
        }
        p->n_made++;
    }
    cudaEventRecord(p->ev[2 * i], st);
    p->kind[i] = PROF_STEP;
    p->n_marks++;
    return i;
}

void cuda_profile_end(cuda_profile *p, int mark, prof_kind kind, cudaStream_t st) {
    if (!p || mark < 0) return;
    p->kind[mark] = kind;
    cudaEventRecord(p->ev[2 * mark + 1], st);
}

void cuda_profile_step_done(cuda_profile *p) {
    if (!p || p->n_marks == 0) return;
    cudaEventSynchronize(p->ev[2 * (p->n_marks - 1) + 1]);
    for (int i = 0; i < p->n_marks; i++) {
        float ms = 0.0f;
        if (cudaEventElapsedTime(&ms, p->ev[2 * i], p->ev[2 * i + 1]) == cudaSuccess) {
            p->ms[p->kind[i]] += ms;
            p->calls[p->kind[i]]++;
        }
    }
    cudaGetLastError();
    p->steps++;
    p->n_marks = 0;
}

void cuda_profile_free(cuda_profile *p, const char *device) {
    if (!p) return;
    const double total = p->ms[PROF_STEP];
    fprintf(stderr, "eddy: CUDA profile on %s: %lld steps, %.3f ms of GPU time in them%s\n", device, p->steps, total,
            p->untimed ? " (some work of the largest steps untimed)" : "");
    double kinds = 0.0;
    for (int k = 0; k < PROF_STEP; k++) {
        if (!p->calls[k]) continue;
        kinds += p->ms[k];
        fprintf(stderr, "  %-40s %9lld calls %11.3f ms %6.1f%%\n", kind_names[k], p->calls[k], p->ms[k],
                total > 0 ? 100.0 * p->ms[k] / total : 0.0);
    }
    fprintf(stderr, "  %-40s %9s       %11.3f ms %6.1f%%\n", "everything else (and launch gaps)", "",
            total - kinds, total > 0 ? 100.0 * (total - kinds) / total : 0.0);
    for (int i = 0; i < p->n_made; i++) cudaEventDestroy(p->ev[2 * i]), cudaEventDestroy(p->ev[2 * i + 1]);
    eddy_free(p);
}
