/*
 * cuda_backend.h — what the GPU engine's files share (src/cuda/cuda_*.c): the backend's
 * state (struct cuda_backend: the weights' device copies, a step's buffers, its plan, the
 * graphs), the products (cuda_products.c) and the feed-forward blocks (cuda_ffn.c) that
 * the forward pass (cuda_engine.c) calls. Internal to the backend; the engine sees cuda.h.
 */
#ifndef EDDY_CUDA_CUDA_BACKEND_H
#define EDDY_CUDA_CUDA_BACKEND_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "cuda/ck.h"
#include "cuda/cuda.h"
#include "cuda/cuda_profile.h"

/* the digest's 32-bit words a row: the best k's ids and logits, a count, a double */
#define CUDA_DIGEST_INTS (2 * CK_TOP_MAX + 3)

/* A captured decode step (CUDA graph), replayed by the steps of the same shape: the
 * plan's contents (positions, slots, block tables) are read from device memory by the
 * kernels, so only the counts below fix a step's launches. */
#define GRAPH_CACHE 8
typedef struct {
    int64_t n, n_runs, n_conv, n_conv_ck, n_keep, n_out; /* the key; n 0: an empty entry */
    cudaGraphExec_t exec;
    uint64_t last_use;
} step_graph;

struct cuda_backend {
    char name[320];
    cudaStream_t stream; /* every kernel, product, copy and memset of the engine; it does not
                          * wait for the legacy stream, which the engine never uses */
    state_mem mem;       /* the state pool's memory operations (cuda_memory.c), ctx this */
    char *staging;       /* pinned, two halves of staging_half bytes (NULL: copies go straight
                          * to pageable memory) */
    size_t staging_half;
    cudaEvent_t staged[2]; /* the last copies through each half */
    bool graphs;         /* decode steps as CUDA graphs (EDDY_CUDA_GRAPHS=0: off; off after a failure) */
    bool chunked;        /* the scans in tiles or chunks for steps with a run of CK_SCAN_CHUNK rows or more
                          * (EDDY_CUDA_CHUNKED=0: row by row always) */
    bool scan_mma;       /* the delta rule's tiles and Mamba-2's chunks multiply on the tensor cores,
                          * TF32 in three parts (EDDY_CUDA_SCAN_MMA=0: on the CUDA cores) */
    bool flash;          /* a prefill's attention on the tensor cores where ck_attention_prefill_mma
                          * can (EDDY_CUDA_FLASH=0: FP32 tiles always) */
    bool fused;          /* decode steps' fused kernels (EDDY_CUDA_FUSED=0: the kernels they fuse) */
    int64_t longest_run; /* of the uploaded step */
    bool decode_step;    /* every run of the uploaded step is one row that updates its own slot,
                          * without checkpoints: fixed by the graph key (n_runs == n, no kept
                          * rows, no checkpoint windows) */
    bool float_products; /* a product's weight lacks the integer path (cuBLAS takes it past 8 rows) */
    bool moe;            /* the model has mixture-of-experts layers: steps of more than
                          * moe_rows rows group their slots by expert (layer_moe), or
                          * route on the host where moe_grouped is off */
    step_graph graph[GRAPH_CACHE];
    uint64_t graph_clock;
    cublasHandle_t blas;
    cublasStatus_t blas_status; /* the first failure of a step */
    /* device views of the weights: the model's tensors with data in GPU memory */
    model_layer *layers; /* (n_layer, and the MTP layer after them in an engine with it) */
    tensor tok_embd, output, output_norm;
    tensor mtp_eh_proj, mtp_enorm, mtp_hnorm, mtp_head_norm, mtp_embd, mtp_head;
    float *h, *mtp_cat; /* the MTP layer's (engine.h's of the same names) */
    int64_t logit_rows; /* rows of logits the buffer holds: a step with more makes them in groups */
    void **allocs;
    int64_t n_allocs, cap_allocs;
    size_t weight_bytes; /* uploaded so far */
    /* the step's buffers (device), as engine.h's of the same names */
    float *x, *xn, *mix, *qg, *q, *k, *v, *attn, *gate;
    float *conv_in, *gdn_qkv, *gdn_z, *gdn_b, *gdn_a, *gdn_g, *gdn_beta, *gdn_o;
    float *gdn_work;        /* the delta rule's tiles (ck_gdn_chunked): gdn_work_tiles of them */
    int64_t gdn_work_tiles;
    float *mb_in; /* (n_batch, mamba2_in_dim) Mamba-2's z | xBC | dt */
    /* mixture of experts: router logits, one expert's input and output rows, the
     * routing (token slots by expert, their weights) copied from the host's plan; for
     * steps routed on the GPU, each slot's expert, its gate and up outputs, its output
     * row, and the 8-bit form of its SwiGLU for the down product */
    float *router, *moe_x, *ff_out, *moe_w, *sh_gate;
    int32_t *moe_order, *moe_sel;
    float *moe_a, *moe_b, *moe_y;
    void *moe_q8;
    int64_t moe_rows; /* the most rows of a step whose experts are routed on the GPU (moe_gpu_rows) */
    /* longer steps' experts grouped on the GPU (experts_grouped), moe_chunk tokens at a
     * time: each slot's row in the layout by expert and each row's slot, the tiles, the
     * layout's inputs, gate and up outputs and outputs, and its 8-bit form */
    bool moe_grouped;
    int64_t moe_chunk;
    int32_t *moe_pos, *moe_src, *moe_n_tiles;
    ck_moe_tile *moe_tiles;
    float *moe_gx, *moe_ga, *moe_gb, *moe_gy;
    void *moe_mq;
    float *ff_a, *ff_b, *logits;
    /* the digest of logit_rows rows of logits (cuda_forward's dg), on the device and in
     * pinned host memory for the one copy back (CUDA_DIGEST_INTS a row): the best k
     * (ck_top_rows) as ids (rows, k), logits (rows, k), counts (rows) one after the other,
     * after their log-sum-exps as doubles (rows) when wanted; or the log-probabilities
     * (ck_logprob_rows) as doubles (rows), then the targets (rows) */
    int32_t *digest, *digest_host;
    uint16_t *w16, *x16; /* f16 copies of a weight and of the activations for the tensor cores */
    void *gemv_q8;       /* ck_gemv's 8-bit activations */
    void *mmq_q8;        /* ck_mmq_parts' (NULL: products of more rows all go through cuBLAS) */
    int64_t mmq_rows;    /* the most rows of a product that go through ck_mmq_parts */
    const float *xq_of;  /* the x whose 8-bit form gemv_q8 holds, (xq_rows, xq_cols); NULL: none */
    int64_t xq_rows, xq_cols;
    const float *x16_of; /* the x whose f16 form x16 holds, (x16_rows, x16_cols); NULL: none */
    int64_t x16_rows, x16_cols;
    int64_t n_q8_made, n_x16_made; /* inputs quantized to 8 bits for ck_gemv, converted to f16 for cuBLAS */
    float *att_part;     /* the split attention's partial softmaxes (ck_attention): CK_ATT_SPLITS
                          * ranges of att_rows rows */
    int64_t att_rows;
    /* f16 copies of the weights the tensor-core products read (weight_f16), by the
     * weight's bytes; the budget left for more (-1: not measured yet) */
    struct f16_copy {
        const void *data;
        uint16_t *f16;
    } *f16c;
    int64_t n_f16c, cap_f16c, f16_budget;
    size_t f16_bytes;
    cuda_profile *prof; /* EDDY_CUDA_PROFILE=1: the time of each kind of work (cuda_profile.h) */
    /* the step's plan: built in pinned host memory, copied in one piece */
    int32_t *h_plan, *d_plan;
    int64_t o_tokens, o_pos, o_run, o_runs, o_out, o_conv, o_keep, o_ckpt, o_blocks, plan_ints;
    int64_t n_runs, n_conv, n_conv_ck, n_keep;
    ck_step step;
};

static inline int64_t tensor_rows(const tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }
static inline const float *f32(const tensor *t) { return (const float *)t->data; }

/* The work (statements), timed as kind when profiling */
#define PROF(g, kind, ...)                                                                                           \
    do {                                                                                                             \
        const int mark_ = cuda_profile_begin((g)->prof, (g)->stream);                                                \
        __VA_ARGS__;                                                                                                 \
        cuda_profile_end((g)->prof, mark_, kind, (g)->stream);                                                       \
    } while (0)

/* Device memory of size bytes, freed with the backend (NULL: none, or bytes 0) */
/* The number name=N of the environment sets, lo <= N <= hi; dflt where it is unset or not
 * such a number (with a warning naming it). */
int64_t cuda_env_int(const char *name, int64_t lo, int64_t hi, int64_t dflt);

/* cuda_memory.c: device memory (freed with the backend), copies and memsets on the
 * engine's stream (a copy with a host side returns once it is done), the pinned staging
 * buffer and the pool's memory operations */
void *cuda_dev_alloc(cuda_backend *g, size_t bytes);
cudaError_t cuda_copy(cuda_backend *g, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind);
cudaError_t cuda_zero(cuda_backend *g, void *p, size_t bytes);
void cuda_staging_new(cuda_backend *g);
void cuda_staging_free(cuda_backend *g);
/* n pieces of device memory into host memory, back to back, and out of it: through the
 * staging buffer unless the host side is pinned; false when the GPU refused a copy or
 * failed (a sticky error) */
bool cuda_pieces_to_host(cuda_backend *g, void *dst, const state_piece *src, int64_t n);
bool cuda_pieces_from_host(cuda_backend *g, const state_piece *dst, int64_t n, const void *src);
void cuda_state_mem(cuda_backend *g);
/* The device's free and total memory (cudaMemGetInfo); false, and both 0, when it cannot
 * say (the error is cleared) */
bool cuda_memory_info(size_t *free_bytes, size_t *total);

/* ==== Products (cuda_products.c) ==== */

/* A float weight small enough for ck_gemv's passes in steps of up to mmq_rows rows */
bool cuda_small_float(const tensor *t);

/* ys[k] = x W[k]^T for the n_w weights of one x of n rows; same_x: x is unchanged since
 * its writer's cuda_x_written (its forms held are used again), else x is new */
void cuda_lin_parts(cuda_backend *g, const tensor *const *W, float *const *ys, int n_w, const float *x, int64_t n,
                    bool same_x);
/* y = x W^T of a new x, and of an x unchanged since its writer's cuda_x_written */
void cuda_lin(cuda_backend *g, const tensor *W, const float *x, int64_t n, float *y);
void cuda_lin_again(cuda_backend *g, const tensor *W, const float *x, int64_t n, float *y);
/* A kernel wrote x (n rows of cols), a product's input, and left its 8-bit form in
 * gemv_q8 (q8) and its f16 form in x16 (f16), or not */
void cuda_x_written(cuda_backend *g, const float *x, int64_t n, int64_t cols, bool q8, bool f16);
/* gemv_q8 holds the 8-bit form of x (NULL: of nothing); whether it holds x's */
void cuda_q8_holds(cuda_backend *g, const float *x, int64_t n, int64_t cols);
bool cuda_q8_held(const cuda_backend *g, const float *x, int64_t n, int64_t cols);
/* Where a kernel that makes the input of a step of n rows' products leaves its f16 form
 * (NULL: those products take none) */
uint16_t *cuda_x16_room(const cuda_backend *g, int64_t n);

/* ==== Feed-forward blocks (cuda_ffn.c) ==== */

/* The layer's feed-forward block over the step's n rows of xn into mix: SwiGLU, squared
 * ReLU, or a mixture of experts */
void cuda_layer_ffn(engine *c, cuda_backend *g, const model_layer *l, int64_t n);
/* The most rows of a step whose experts take a launch for all the token slots, and
 * whether the experts of every layer from gpu_from on take the grouped products (cuda_ffn.c
 * says why) */
int64_t cuda_moe_rows(int64_t X, int64_t k, int64_t B);
bool cuda_moe_groups(const model *m, int64_t gpu_from);

#endif
