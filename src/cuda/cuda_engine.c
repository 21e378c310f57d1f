/*
 * cuda_engine.c — the forward pass on an NVIDIA GPU (cuda.h): the model's weights
 * uploaded once in their GGUF formats, a step's buffers and the state pool in device
 * memory, and per step one upload of its plan (rows, runs, block tables), then the
 * layers as forward.c runs them, kernel after kernel on the engine's stream; decode steps
 * captured as CUDA graphs and replayed.
 *
 * Here: the backend's making and freeing, the plan, the mixers (attention, Gated
 * DeltaNet, Mamba-2: each sequence-aware kernel taking all runs of the step at once), the
 * residual stream, the MTP layer, the logits and the graphs. The products are
 * cuda_products.c's, the feed-forward blocks (mixtures of experts among them) cuda_ffn.c's.
 * The state pool's memory operations (device_mem) let the engine fork, snapshot, restore,
 * cache prefixes and write session files as on the CPU. The MTP layer runs in every step
 * of an engine made with it, and its drafts chain on the GPU (block_mtp.c keeps the
 * drafting logic; the hooks at its end are here). Prefill runs the scans in tiles and
 * chunks (ck_gdn_chunked, ck_mamba2_chunked) and one sequence's attention in tiles of
 * queries; decode splits attention over the keys. EDDY_CUDA_PROFILE=1 times each kind of
 * work (cuda_profile.h).
 */
#include "cuda/cuda_backend.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "ssm/mamba2.h"

/* Tokens of a prefill whose experts are grouped at once (the layout's buffers: for 256
 * experts of 512 x 2048, 8 a token, about 150 MB) */
#define MOE_CHUNK 512

/* ==== Weights ==== */


static size_t tensor_bytes(const tensor *t) { return t->name ? t->row_bytes * (size_t)tensor_rows(t) : 0; }

/* Bytes of a recurrent layer's conv taps as the GPU holds them, repacked (K, conv_dim); 0
 * for another layer */
static size_t conv_taps_bytes(const model_hparams *hp, const model_layer *l) {
    if (l->mixer != MIXER_GDN && l->mixer != MIXER_MAMBA2) return 0;
    const int64_t cd = l->mixer == MIXER_GDN ? model_gdn_conv_dim(hp) : mamba2_conv_dim(hp);
    return (size_t)(hp->ssm_d_conv * cd) * sizeof(float);
}

/* The MTP layer's end tensors, which may be the model's (tok_embd, output, output_norm) */
#define MTP_ENDS 6
static void mtp_ends(const model *m, const tensor *ts[MTP_ENDS]) {
    const tensor *all[MTP_ENDS] = {&m->mtp_eh_proj,   &m->mtp_enorm, &m->mtp_hnorm,
                                   &m->mtp_head_norm, &m->mtp_embd,  &m->mtp_head};
    memcpy(ts, all, sizeof all);
}

/* out = t with its bytes in GPU memory (a tensor the file lacks stays absent). */
static bool upload(cuda_backend *g, const tensor *t, tensor *out) {
    *out = *t;
    out->packed = NULL;
    if (!t->name) return true;
    const size_t bytes = tensor_bytes(t);
    g->weight_bytes += bytes;
    void *d = cuda_dev_alloc(g, bytes);
    if (!d || !cuda_pieces_from_host(g, &(state_piece){d, bytes}, 1, t->data)) return false;
    out->data = d;
    return true;
}

/* The f16 elements the largest weight a product dequantizes takes (of an expert tensor,
 * one expert's matrix). */
static void note_linear(const tensor *t, int64_t *w16, int64_t *max_in) {
    if (!t->name) return;
    const int64_t rows = t->ne[2] > 1 ? t->ne[1] : tensor_rows(t);
    if (t->type != QTYPE_F32 && t->type != QTYPE_F16 && t->ne[0] * rows > *w16) *w16 = t->ne[0] * rows;
    if (t->ne[0] > *max_in) *max_in = t->ne[0];
}

static const char *check_linear(const tensor *t) {
    if (!t->name || ck_type_supported(t->type, t->ne[0])) return NULL;
    return t->name;
}

/* The tensors of a layer the GPU reads (every kind of layer's; absent ones stay absent),
 * and whether each is a product's weight */
#define NORM(f) {offsetof(model_layer, f), false}
#define PRODUCT(f) {offsetof(model_layer, f), true}
static const struct {
    size_t at;
    bool product;
} layer_tensors[] = {
    NORM(attn_norm),     PRODUCT(wq),       PRODUCT(wk),         PRODUCT(wv),          PRODUCT(wo),
    NORM(q_norm),        NORM(k_norm),      PRODUCT(ssm_qkv),    PRODUCT(ssm_z),       PRODUCT(ssm_beta),
    PRODUCT(ssm_alpha),  PRODUCT(ssm_ba),   NORM(ssm_a),         NORM(ssm_dt_bias),    NORM(ssm_norm),
    PRODUCT(ssm_out),    PRODUCT(ssm_in),   NORM(ssm_conv_bias), NORM(ssm_d),          NORM(ffn_norm),
    PRODUCT(ffn_gate),   PRODUCT(ffn_up),   PRODUCT(ffn_down),   PRODUCT(moe_router),  PRODUCT(moe_gate),
    PRODUCT(moe_up),     PRODUCT(moe_down), PRODUCT(shexp_gate), PRODUCT(shexp_up),    PRODUCT(shexp_down),
    PRODUCT(shexp_router)};
#undef NORM
#undef PRODUCT

/* Whether some product's weight lacks the integer path and is not cuda_small_float (cuBLAS then
 * multiplies it in every step of more than CK_GEMV_MAX_TOK rows) */
static bool has_float_products(const model *m, int64_t from) {
    if (m->output.name && !ck_gemv_integer(m->output.type) && !cuda_small_float(&m->output)) return true;
    for (int64_t il = from; il < m->hp.n_layer; il++)
        for (size_t i = 0; i < sizeof layer_tensors / sizeof layer_tensors[0]; i++) {
            const tensor *t = (const tensor *)((const char *)&m->layers[il] + layer_tensors[i].at);
            if (layer_tensors[i].product && t->name && !ck_gemv_integer(t->type) && !cuda_small_float(t)) return true;
        }
    return false;
}

/* A tensor that may be one of the model's end tensors (the MTP layer's embedding, head and
 * norm default to them): their device copy, else its own. */
static bool upload_or_share(cuda_backend *g, const model *m, const tensor *t, tensor *out) {
    if (t->data == m->tok_embd.data) return *out = g->tok_embd, true;
    if (t->data == m->output.data) return *out = g->output, true;
    if (t->data == m->output_norm.data) return *out = g->output_norm, true;
    return upload(g, t, out);
}

/* Whether the GPU reads the token embeddings when it runs layers gpu_from on: it runs the
 * first layer, or the output layer or one of the MTP layer's tensors is that matrix. */
static bool embeddings_on_gpu(const engine *c, int64_t gpu_from) {
    const model *m = c->m;
    const void *e = m->tok_embd.data;
    return gpu_from == 0 || m->output.data == e || (c->mtp && (m->mtp_embd.data == e || m->mtp_head.data == e));
}

/* Bytes of layer l's weights on the GPU, its conv taps with them */
static size_t layer_weight_bytes(const model_hparams *hp, const model_layer *l) {
    size_t b = conv_taps_bytes(hp, l);
    for (size_t i = 0; i < sizeof layer_tensors / sizeof layer_tensors[0]; i++)
        b += tensor_bytes((const tensor *)((const char *)l + layer_tensors[i].at));
    return b;
}

/* Bytes of the weights upload_model puts on the GPU when it runs layers gpu_from on */
static size_t gpu_weight_bytes(const engine *c, int64_t gpu_from) {
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    const void *e = m->tok_embd.data;
    size_t b = tensor_bytes(&m->output_norm) + (m->output.data == e ? 0 : tensor_bytes(&m->output));
    if (embeddings_on_gpu(c, gpu_from)) b += tensor_bytes(&m->tok_embd);
    if (c->mtp) {
        const tensor *ts[MTP_ENDS];
        mtp_ends(m, ts);
        for (size_t i = 0; i < MTP_ENDS; i++) /* the end tensors they may be are counted */
            if (ts[i]->data != e && ts[i]->data != m->output.data && ts[i]->data != m->output_norm.data)
                b += tensor_bytes(ts[i]);
        b += layer_weight_bytes(hp, m->mtp);
    }
    for (int64_t il = gpu_from; il < hp->n_layer; il++) b += layer_weight_bytes(hp, &m->layers[il]);
    return b;
}

/* The weights of engine c's GPU part did not fit in the free_bytes the GPU had: the error,
 * with how many of the model's last layers would (gpu_layers, -ngl) beside the output layer. */
static eddy_status weights_too_large(const engine *c, size_t free_bytes, eddy_error *err) {
    const int64_t n_layer = c->m->hp.n_layer;
    int64_t fit = n_layer - c->gpu_from - 1; /* fewer than failed */
    while (fit > 0 && gpu_weight_bytes(c, n_layer - fit) > free_bytes) fit--;
    char hint[320] = "";
    if (fit > 0)
        snprintf(hint, sizeof hint, "; with gpu_layers %" PRId64 " (-ngl) the weights of its last %" PRId64
                 " layer(s) and the output layer take %.1f MiB there (the step's buffers and the sequences' state "
                 "need room beside them), and the CPU runs the others", fit, fit,
                 (double)gpu_weight_bytes(c, n_layer - fit) / (1 << 20));
    return eddy_error_set(err, EDDY_ERR_NOMEM, "cannot upload the weights to the GPU: they take %.1f MiB and %.1f MiB "
                          "were free%s", (double)gpu_weight_bytes(c, c->gpu_from) / (1 << 20),
                          (double)free_bytes / (1 << 20), hint);
}

/* The end tensors, and the layers from c->gpu_from on (with the MTP layer); the layers
 * before stay zero in g->layers (the CPU runs them). */
static eddy_status upload_model(cuda_backend *g, const engine *c, int64_t *w16, int64_t *max_in, eddy_error *err) {
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    const bool mtp = c->mtp;
    const int64_t n_layers = hp->n_layer + (mtp ? 1 : 0);
    g->layers = eddy_calloc((size_t)(n_layers > 0 ? n_layers : 1), sizeof *g->layers);
    if (!g->layers) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    size_t free_bytes, total;
    cuda_memory_info(&free_bytes, &total);
    bool ok = (!embeddings_on_gpu(c, c->gpu_from) || upload(g, &m->tok_embd, &g->tok_embd)) &&
              upload(g, &m->output_norm, &g->output_norm);
    if (ok && m->output.data == m->tok_embd.data) g->output = g->tok_embd;
    else ok = ok && upload(g, &m->output, &g->output);
    note_linear(&m->output, w16, max_in);
    if (ok && mtp) {
        const tensor *src[MTP_ENDS];
        mtp_ends(m, src);
        tensor *dst[MTP_ENDS] = {&g->mtp_eh_proj,   &g->mtp_enorm, &g->mtp_hnorm,
                                 &g->mtp_head_norm, &g->mtp_embd,  &g->mtp_head};
        for (size_t i = 0; ok && i < MTP_ENDS; i++) {
            ok = upload_or_share(g, m, src[i], dst[i]);
            note_linear(src[i], w16, max_in);
        }
    }
    for (int64_t il = c->gpu_from; ok && il < n_layers; il++) {
        const model_layer *l = il < hp->n_layer ? &m->layers[il] : m->mtp;
        model_layer *d = &g->layers[il];
        *d = *l;
        for (size_t i = 0; ok && i < sizeof layer_tensors / sizeof layer_tensors[0]; i++) {
            const tensor *t = (const tensor *)((const char *)l + layer_tensors[i].at);
            ok = upload(g, t, (tensor *)((char *)d + layer_tensors[i].at));
            note_linear(t, w16, max_in);
        }
        const size_t bytes = conv_taps_bytes(hp, l);
        if (ok && bytes) { /* conv taps, repacked (K, conv_dim) */
            float *w = cuda_dev_alloc(g, bytes);
            ok = w && cuda_copy(g, w, l->conv_w, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
            d->conv_w = w;
        }
    }
    const cudaError_t e = cudaGetLastError(); /* of the copies (a failed allocation clears its own) */
    if (e != cudaSuccess && e != cudaErrorMemoryAllocation) /* a device that failed, not one that is full */
        return eddy_error_set(err, EDDY_ERR_IO, "cannot upload the weights to the GPU: %s", cudaGetErrorString(e));
    if (!ok) return weights_too_large(c, free_bytes, err);
    return EDDY_OK;
}

/* What the backend does not run yet of engine c's layers from c->gpu_from on, or NULL. */
static const char *unsupported(const engine *c, char *buf, size_t cap) {
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    for (int64_t il = c->gpu_from; il < hp->n_layer; il++) {
        const model_layer *l = &m->layers[il];
        const tensor *ts[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->ssm_qkv, &l->ssm_z, &l->ssm_beta, &l->ssm_alpha,
                              &l->ssm_ba, &l->ssm_out, &l->ffn_gate, &l->ffn_up, &l->ffn_down, &l->ssm_in,
                              &l->moe_router, &l->moe_gate, &l->moe_up, &l->moe_down, &l->shexp_gate,
                              &l->shexp_up, &l->shexp_down, &l->shexp_router};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
            const char *bad = check_linear(ts[i]);
            if (bad) {
                snprintf(buf, cap, "tensor %s in %s", bad, qtype_name(ts[i]->type));
                return buf;
            }
        }
    }
    const tensor *ends[] = {&m->output, &m->tok_embd};
    for (size_t i = 0; i < (embeddings_on_gpu(c, c->gpu_from) ? 2u : 1u); i++)
        if (check_linear(ends[i])) {
            snprintf(buf, cap, "tensor %s in %s", ends[i]->name, qtype_name(ends[i]->type));
            return buf;
        }
    if (hp->n_head > 0 && (hp->head_dim_k > 512 || hp->head_dim_v > 512)) return "attention heads over 512 wide";
    if (hp->ssm_n_v > 0 && (hp->ssm_d_k > 256 || hp->ssm_d_v > 256 || hp->ssm_d_conv > 8))
        return "Gated DeltaNet heads over 256 wide";
    /* the row-by-row scan's block holds 5 d_state + 32 floats of shared memory at least
     * (ck_mamba2's scan_block, one column): within the 48 KiB a block has without opting in */
    if (hp->ssm_n_head > 0 && (hp->ssm_d_state > 2048 || hp->ssm_d_conv > 8)) return "Mamba-2 states over 2048";
    return NULL;
}

/* ==== Backend ==== */

void cuda_backend_free(cuda_backend *g) {
    if (!g) return;
    cuda_profile_free(g->prof, g->name);
    for (int i = 0; i < GRAPH_CACHE; i++)
        if (g->graph[i].n) cudaGraphExecDestroy(g->graph[i].exec);
    cuda_staging_free(g);
    if (g->stream) cudaStreamDestroy(g->stream);
    for (int64_t i = 0; i < g->n_allocs; i++) cudaFree(g->allocs[i]);
    eddy_free(g->allocs);
    eddy_free(g->f16c);
    if (g->h_plan) cudaFreeHost(g->h_plan);
    if (g->digest_host) cudaFreeHost(g->digest_host);
    if (g->blas) cublasDestroy(g->blas);
    eddy_free(g->layers);
    eddy_free(g);
}

const char *cuda_backend_name(const cuda_backend *g) { return g->name; }

size_t cuda_backend_f16_bytes(const cuda_backend *g) { return g->f16_bytes; }

bool cuda_memory_info(size_t *free_bytes, size_t *total) {
    if (cudaMemGetInfo(free_bytes, total) == cudaSuccess) return true;
    cudaGetLastError();
    *free_bytes = *total = 0;
    return false;
}

size_t cuda_backend_free_bytes(const cuda_backend *g) {
    (void)g;
    size_t free_bytes, total;
    cuda_memory_info(&free_bytes, &total);
    return free_bytes;
}

void cuda_backend_forms_made(const cuda_backend *g, int64_t *q8, int64_t *f16) {
    *q8 = g->n_q8_made, *f16 = g->n_x16_made;
}

int cuda_backend_graphs(const cuda_backend *g, int64_t rows) {
    int n = 0;
    for (int i = 0; i < GRAPH_CACHE; i++) n += g->graph[i].n > 0 && g->graph[i].n == rows;
    return n;
}

static float *dev_rows(cuda_backend *g, int64_t rows, int64_t cols, bool *ok) {
    if (cols <= 0) return NULL;
    float *p = cuda_dev_alloc(g, (size_t)(rows * cols) * sizeof(float));
    *ok = *ok && p;
    return p;
}

/* Whether a switch of the environment leaves its feature on: anything but "0" (unset too) */
static bool env_not_off(const char *name) {
    const char *v = getenv(name);
    return !(v && !strcmp(v, "0"));
}

int64_t cuda_env_int(const char *name, int64_t lo, int64_t hi, int64_t dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    errno = 0;
    const long long n = strtoll(v, &end, 10);
    if (*end || errno || n < lo || n > hi) {
        eddy_log(EDDY_LOG_WARN, "%s=%s is not a number from %lld to %lld: using %lld", name, v, (long long)lo,
                 (long long)hi, (long long)dflt);
        return dflt;
    }
    return n;
}

eddy_status cuda_backend_new(engine *c, cuda_backend **out, const state_mem **mem, eddy_error *err) {
    *out = NULL;
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    char why[256];
    const char *bad = unsupported(c, why, sizeof why);
    if (bad)
        return eddy_error_set(err, EDDY_ERR_UNSUPPORTED, "the CUDA backend does not run %s yet (model %s)", bad,
                              m->arch_name);
    int n_dev = 0;
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
        cudaGetLastError();
        return eddy_error_set(err, EDDY_ERR_UNSUPPORTED, "no CUDA GPU is visible to this process");
    }
    cuda_backend *g = eddy_calloc(1, sizeof *g);
    if (!g) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    struct cudaDeviceProp prop;
    const bool have_prop = cudaGetDeviceProperties(&prop, 0) == cudaSuccess;
    int at = snprintf(g->name, sizeof g->name, "cuda%s%s", have_prop ? ": " : "", have_prop ? prop.name : "");
    if (c->gpu_from > 0 && at > 0 && (size_t)at < sizeof g->name)
        snprintf(g->name + at, sizeof g->name - (size_t)at, " (layers %" PRId64 "..%" PRId64 "; the CPU runs 0..%"
                 PRId64 ")", c->gpu_from, hp->n_layer - 1, c->gpu_from - 1);
    /* products that start while the kernel before them still runs (compute capability 9.0
     * and later; EDDY_CUDA_PDL=0: plain launches, to measure what it gains) */
    ck_set_pdl(have_prop && prop.major >= 9 && env_not_off("EDDY_CUDA_PDL"));
    if (cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking) != cudaSuccess ||
        cublasCreate(&g->blas) != CUBLAS_STATUS_SUCCESS ||
        cublasSetStream(g->blas, g->stream) != CUBLAS_STATUS_SUCCESS) {
        cudaGetLastError();
        cuda_backend_free(g);
        return eddy_error_set(err, EDDY_ERR_UNSUPPORTED, "cannot start a stream and cuBLAS on the GPU");
    }
    cuda_staging_new(g);
    g->f16_budget = -1;
    g->graphs = env_not_off("EDDY_CUDA_GRAPHS");
    g->chunked = env_not_off("EDDY_CUDA_CHUNKED");
    g->scan_mma = env_not_off("EDDY_CUDA_SCAN_MMA");
    g->flash = env_not_off("EDDY_CUDA_FLASH");
    g->fused = env_not_off("EDDY_CUDA_FUSED");
    /* EDDY_CUDA_GEMV_DEPTH=1: the products load one item a lane at a time (to measure
     * what loading four ahead gains) */
    ck_gemv_set_depth((int)cuda_env_int("EDDY_CUDA_GEMV_DEPTH", 1, 4, 4)); /* 1 or 4 */
    g->prof = cuda_profile_new();
    if (g->prof) g->graphs = false; /* a replayed graph is one piece of work */
    for (int64_t il = c->gpu_from; il < hp->n_layer; il++) g->moe |= m->layers[il].ffn == FFN_MOE;
    g->float_products = has_float_products(m, c->gpu_from);
    int64_t w16 = 0, max_in = 0;
    eddy_status s = upload_model(g, c, &w16, &max_in, err);
    if (s != EDDY_OK) {
        cuda_backend_free(g);
        return s;
    }
    bool ok = true;
    const int64_t B = c->n_batch, E = hp->n_embd, Q = hp->n_head * hp->head_dim_k;
    const bool gdn = hp->ssm_n_v > 0, mamba = hp->ssm_n_head > 0;
    const int64_t conv_dim = gdn ? model_gdn_conv_dim(hp) : mamba ? mamba2_conv_dim(hp) : 0;
    const int64_t V = gdn ? hp->ssm_n_v * hp->ssm_d_v : hp->ssm_d_inner;
    g->x = dev_rows(g, B, E, &ok);
    g->xn = dev_rows(g, B, E, &ok);
    g->mix = dev_rows(g, B, E, &ok);
    g->qg = dev_rows(g, B, hp->attn_gated ? 2 * Q : 0, &ok);
    g->q = dev_rows(g, B, Q, &ok);
    g->gate = dev_rows(g, B, hp->attn_gated ? Q : 0, &ok);
    g->k = dev_rows(g, B, hp->n_head_kv * hp->head_dim_k, &ok);
    g->v = dev_rows(g, B, hp->n_head_kv * hp->head_dim_v, &ok);
    g->attn = dev_rows(g, B, hp->n_head * hp->head_dim_v, &ok);
    g->conv_in = dev_rows(g, B, conv_dim, &ok);
    g->gdn_qkv = dev_rows(g, B, conv_dim, &ok);
    g->gdn_z = dev_rows(g, B, V, &ok);
    g->gdn_b = dev_rows(g, B, 2 * hp->ssm_n_v, &ok);
    g->gdn_a = dev_rows(g, B, hp->ssm_n_v, &ok);
    g->gdn_g = dev_rows(g, B, hp->ssm_n_v, &ok);
    g->gdn_beta = dev_rows(g, B, hp->ssm_n_v, &ok);
    g->gdn_o = dev_rows(g, B, V, &ok);
    g->mb_in = dev_rows(g, B, mamba ? mamba2_in_dim(hp) : 0, &ok);
    const int64_t F = hp->n_ff > hp->n_ff_exp ? (hp->n_ff > hp->n_ff_shexp ? hp->n_ff : hp->n_ff_shexp)
                                              : (hp->n_ff_exp > hp->n_ff_shexp ? hp->n_ff_exp : hp->n_ff_shexp);
    g->ff_a = dev_rows(g, B, F, &ok);
    g->ff_b = dev_rows(g, B, F, &ok);
    const int64_t X = hp->n_expert, KX = hp->n_expert_used;
    /* EDDY_CUDA_DP4A=0: the float products for every type (to measure what the integer ones gain) */
    const bool integer = env_not_off("EDDY_CUDA_DP4A");
    g->moe_rows = X ? cuda_moe_rows(X, KX, B) : 0;
    /* the steps of more rows group their experts' slots on the GPU, or route on the host */
    g->moe_grouped = X && integer && cuda_moe_groups(c->m, c->gpu_from) && B > g->moe_rows &&
                     env_not_off("EDDY_CUDA_MOE_GROUPED");
    const bool by_host = X && !g->moe_grouped && B > g->moe_rows;
    g->router = dev_rows(g, B, X, &ok);
    g->moe_x = dev_rows(g, B, by_host ? E : 0, &ok);
    g->ff_out = dev_rows(g, B, X ? E : 0, &ok); /* the shared expert's, and an expert's on the host's route */
    g->moe_w = dev_rows(g, B, KX, &ok);
    g->sh_gate = dev_rows(g, B, X ? 1 : 0, &ok);
    g->moe_order = (int32_t *)dev_rows(g, B, by_host ? KX : 0, &ok);
    g->moe_chunk = X ? (B < MOE_CHUNK ? B : MOE_CHUNK) : 0;
    const int64_t chunk = cuda_env_int("EDDY_CUDA_MOE_CHUNK", 1, MOE_CHUNK, MOE_CHUNK); /* a test's smaller chunks */
    if (X && chunk < g->moe_chunk) g->moe_chunk = chunk;
    const int64_t slots = g->moe_rows * KX; /* of the steps routed on the GPU */
    const int64_t F_exp = X ? hp->n_ff_exp : 0;
    const int64_t routed = g->moe_rows > g->moe_chunk ? g->moe_rows : g->moe_chunk; /* tokens a routing takes */
    g->moe_sel = (int32_t *)dev_rows(g, routed * KX, X ? 1 : 0, &ok);
    g->moe_a = dev_rows(g, slots, F_exp, &ok);
    g->moe_b = dev_rows(g, slots, F_exp, &ok);
    g->moe_y = dev_rows(g, slots, X ? E : 0, &ok);
    /* logits for at most 512 rows at once (a 2048-row step of a 152k vocabulary would take
     * 1.2 GB for them): more are made and copied out in groups (cuda_forward) */
    g->logit_rows = B < 512 ? B : 512;
    g->logits = dev_rows(g, g->logit_rows, hp->n_vocab, &ok);
    g->digest = (int32_t *)dev_rows(g, g->logit_rows, CUDA_DIGEST_INTS, &ok);
    if (hp->n_head > 0) { /* decode steps split each row's keys in up to CK_ATT_SPLITS ranges */
        g->att_rows = B < CK_GEMV_MAX_TOK ? B : CK_GEMV_MAX_TOK;
        g->att_part = dev_rows(g, g->att_rows * hp->n_head * CK_ATT_SPLITS, hp->head_dim_v + 2, &ok);
    }
    g->h = dev_rows(g, B, c->mtp ? E : 0, &ok);
    g->mtp_cat = dev_rows(g, B, c->mtp ? 2 * E : 0, &ok);
    if (integer) {
        g->gemv_q8 = cuda_dev_alloc(g, ck_gemv_scratch_bytes(max_in, B));
        ok = ok && g->gemv_q8;
        if (X > 0) {
            const size_t hq = ck_gemv_experts_scratch_bytes(F_exp, slots);
            const size_t xq = ck_gemv_experts_scratch_bytes(E, g->moe_rows);
            g->moe_q8 = cuda_dev_alloc(g, hq > xq ? hq : xq);
            ok = ok && g->moe_q8;
        }
        if (g->moe_grouped) {
            const int64_t S = g->moe_chunk * KX, rows = ck_moe_rows(S, X), tiles = ck_moe_tiles(S, X);
            g->moe_pos = (int32_t *)dev_rows(g, S, 1, &ok);
            g->moe_src = (int32_t *)dev_rows(g, rows, 1, &ok);
            g->moe_n_tiles = (int32_t *)dev_rows(g, 1, 1, &ok);
            g->moe_tiles = cuda_dev_alloc(g, (size_t)tiles * sizeof(ck_moe_tile));
            g->moe_gx = dev_rows(g, rows, E, &ok);
            g->moe_ga = dev_rows(g, rows, F_exp, &ok);
            g->moe_gb = dev_rows(g, rows, F_exp, &ok);
            g->moe_gy = dev_rows(g, rows, E, &ok);
            g->moe_mq = cuda_dev_alloc(g, ck_mmq_experts_scratch_bytes(E > F_exp ? E : F_exp, rows));
            ok = ok && g->moe_tiles && g->moe_mq;
        }
        /* products of 9 to 128 rows (batched decode, verify of long drafts) multiply the
         * quantized weights on the tensor cores (ck_mmq_parts), more rows (prefill) an f16
         * copy through cuBLAS; EDDY_CUDA_MMQ=N moves the bound (0: cuBLAS from 9 rows on) */
        g->mmq_rows = cuda_env_int("EDDY_CUDA_MMQ", 0, 1 << 20, 128);
        if (B > CK_GEMV_MAX_TOK && g->mmq_rows > CK_GEMV_MAX_TOK) {
            g->mmq_q8 = cuda_dev_alloc(g, ck_mmq_scratch_bytes(max_in, B < g->mmq_rows ? B : g->mmq_rows));
            ok = ok && g->mmq_q8;
        }
    }
    if (B > CK_GEMV_MAX_TOK) {
        g->w16 = w16 ? cuda_dev_alloc(g, (size_t)w16 * 2) : NULL;
        g->x16 = cuda_dev_alloc(g, (size_t)(B * max_in) * 2);
        ok = ok && (g->w16 || !w16) && g->x16;
    }
    /* the plan: tokens, positions, runs of rows, output rows, conv window items (4 ints:
     * one per verify row, run end and checkpoint), kept verify rows (2 ints), checkpoints
     * (2 ints), block tables; a step holds at most one run per sequence */
    const int64_t runs_max = B < c->n_seq_max ? B : c->n_seq_max;
    g->o_tokens = 0, g->o_pos = B, g->o_run = 2 * B, g->o_runs = 3 * B;
    g->o_out = g->o_runs + runs_max * (int64_t)(sizeof(ck_run) / sizeof(int32_t));
    g->o_conv = g->o_out + B, g->o_keep = g->o_conv + 8 * B, g->o_ckpt = g->o_keep + 2 * B;
    g->o_blocks = g->o_ckpt + 2 * B;
    g->plan_ints = g->o_blocks + runs_max * seq_state_n_blocks(c->n_ctx);
    if (gdn && B >= CK_SCAN_CHUNK) { /* a step that can take the delta rule in tiles */
        g->gdn_work_tiles = ck_gdn_tiles_max(B, runs_max);
        g->gdn_work = dev_rows(g, g->gdn_work_tiles, hp->ssm_n_v * CK_GDN_TILE_WORK, &ok);
    }
    g->d_plan = cuda_dev_alloc(g, (size_t)g->plan_ints * sizeof(int32_t));
    if (cudaMallocHost((void **)&g->h_plan, (size_t)g->plan_ints * sizeof(int32_t)) != cudaSuccess) g->h_plan = NULL;
    const size_t digest_bytes = (size_t)(g->logit_rows * CUDA_DIGEST_INTS) * sizeof(int32_t);
    if (cudaMallocHost((void **)&g->digest_host, digest_bytes) != cudaSuccess) g->digest_host = NULL;
    ok = ok && g->d_plan && g->h_plan && g->digest_host;
    if (!ok) {
        cuda_backend_free(g);
        return eddy_error_set(err, EDDY_ERR_NOMEM, "cannot allocate the GPU work buffers for a batch of %" PRId64
                              " tokens beside the weights (a smaller batch, n_batch or -b, needs less)", B);
    }
    g->step = (ck_step){g->d_plan + g->o_pos, g->d_plan + g->o_run, g->d_plan + g->o_blocks,
                        (const ck_run *)(g->d_plan + g->o_runs)};
    *out = g;
    cuda_state_mem(g);
    *mem = &g->mem;
    return EDDY_OK;
}

/* ==== A step ==== */



/* A conv window item: the window after row `end` of the run from row0 (its old window in
 * slot src) into slot dst. */
static void conv_item(int32_t *it, int64_t end, int64_t row0, int64_t src, int64_t dst) {
    it[0] = (int32_t)end, it[1] = (int32_t)row0, it[2] = (int32_t)src, it[3] = (int32_t)dst;
}

/* The plan of the step into pinned memory, then to the GPU in one copy. The conv
 * windows of checkpoints come first: they are written by a launch of their own, before
 * the runs' slots (which they may read) change. */
static void upload_plan(cuda_backend *g, const state_pool *sp, const int32_t *tokens, const step_plan *plan,
                        const int64_t *out_rows, int64_t n_out) {
    int32_t *h = g->h_plan;
    const int64_t n = plan->n;
    for (int64_t t = 0; t < n; t++) h[g->o_tokens + t] = tokens[t], h[g->o_pos + t] = (int32_t)plan->pos[t];
    ck_run *runs = (ck_run *)(h + g->o_runs);
    int32_t *conv = h + g->o_conv, *keep = h + g->o_keep, *ckpt = h + g->o_ckpt;
    int64_t nb = 0, nc = 0, nk = 0, ncp = 0;
    for (int64_t r = 0; r < plan->n_runs; r++) {
        const step_run *run = &plan->runs[r];
        if (run->snap) continue;
        for (int64_t k = 0; k < run->n_ckpt; k++) {
            const int64_t t = run->ckpt_pos[k] - run->pos0 - 1; /* the state after row t */
            conv_item(conv + 4 * nc++, run->row0 + t, run->row0, run->slot, run->ckpt_slot[k]);
        }
    }
    g->n_conv_ck = nc;
    for (int64_t r = 0; r < plan->n_runs; r++) {
        const step_run *run = &plan->runs[r];
        const int64_t need = (run->pos0 + run->n - 1) / STATE_KV_BLOCK + 1;
        runs[r] = (ck_run){(int32_t)run->row0, (int32_t)run->n, (int32_t)run->slot, run->snap ? -1 : (int32_t)run->slot,
                           (int32_t)nb, (int32_t)ncp, 0};
        memcpy(h + g->o_blocks + nb, run->seq->st.blocks, (size_t)need * sizeof(int32_t));
        nb += need;
        for (int64_t t = 0; t < run->n; t++) h[g->o_run + run->row0 + t] = (int32_t)r;
        if (run->snap) { /* a verify: the window after each row and its inputs go to its row slot */
            for (int64_t t = 0; t < run->n; t++) {
                conv_item(conv + 4 * nc++, run->row0 + t, run->row0, run->slot, run->snap[t]);
                keep[2 * nk] = (int32_t)(run->row0 + t), keep[2 * nk + 1] = (int32_t)(run->snap[t] - sp->n_slots);
                nk++;
            }
            continue;
        }
        conv_item(conv + 4 * nc++, run->row0 + run->n - 1, run->row0, run->slot, run->slot);
        for (int64_t k = 0; k < run->n_ckpt; k++, ncp++) {
            ckpt[2 * ncp] = (int32_t)(run->ckpt_pos[k] - run->pos0 - 1);
            ckpt[2 * ncp + 1] = (int32_t)run->ckpt_slot[k];
        }
        runs[r].n_ck = (int32_t)run->n_ckpt;
    }
    for (int64_t i = 0; i < n_out; i++) h[g->o_out + i] = (int32_t)out_rows[i];
    g->n_runs = plan->n_runs, g->n_conv = nc, g->n_keep = nk;
    g->decode_step = plan->n_runs == n && nk == 0 && g->n_conv_ck == 0;
    g->longest_run = 0;
    for (int64_t r = 0; r < plan->n_runs; r++)
        if (plan->runs[r].n > g->longest_run) g->longest_run = plan->runs[r].n;
    cuda_copy(g, g->d_plan, h, (size_t)(g->o_blocks + nb) * sizeof(int32_t), cudaMemcpyHostToDevice);
}

/* The conv windows of the step: checkpoints', then the runs'. */
static void conv_windows(cuda_backend *g, const float *x, int64_t xs, int64_t C, int K, float *state) {
    ck_conv_window(g->d_plan + g->o_conv, g->n_conv_ck, x, xs, C, K, state, g->stream);
    ck_conv_window(g->d_plan + g->o_conv + 4 * g->n_conv_ck, g->n_conv - g->n_conv_ck, x, xs, C, K, state, g->stream);
}

/* The ranges a step of n rows splits each row's keys in: as many as att_part holds for n
 * rows (CK_ATT_SPLITS up to att_rows rows, then fewer: 16 for a batch of 32 decoding
 * sequences), none (1) where fewer than 2 fit (prefill) */
static int att_splits(const cuda_backend *g, int64_t n) {
    const int64_t fit = g->att_rows * CK_ATT_SPLITS / n;
    return fit < 2 ? 1 : fit < CK_ATT_SPLITS ? (int)fit : CK_ATT_SPLITS;
}

/* g->attn = attention of the step's n rows over the layer's cache kc, vc: a step with a
 * prefill in it (a run of more than CK_GEMV_MAX_TOK rows) on the tensor cores where they
 * take it, every run in tiles of queries; else one sequence's prefill in FP32 tiles of
 * queries; other steps (decode, batches of decoding sequences) split each row's keys over
 * blocks, times sigmoid(gate) (gate NULL: none) in the same pass, with g->attn's 8-bit
 * form left where it fits. Returns 1 when that form is left, 0 when not, -1 when the gate
 * is still to be applied. */
static int attend(cuda_backend *g, const model_hparams *hp, void *kc, void *vc, int kv_f16, float scale, int64_t n,
                  const float *gate) {
    const int64_t hd = hp->head_dim_k, dv = hp->head_dim_v, H = hp->n_head, H_kv = hp->n_head_kv;
    const ck_run *runs = (const ck_run *)(g->h_plan + g->o_runs); /* the host's copy of the step's runs */
    if (g->longest_run > CK_GEMV_MAX_TOK && g->flash &&
        ck_attention_prefill_mma(&g->step, runs, g->n_runs, g->q, g->attn, kc, vc, kv_f16, H, H_kv, hd, dv, scale,
                                 g->stream))
        return -1;
    if (g->n_runs == 1 && n > CK_GEMV_MAX_TOK &&
        ck_attention_prefill(&g->step, n, g->q, g->attn, kc, vc, kv_f16, H, H_kv, hd, dv, scale, g->stream))
        return -1;
    const int held = ck_attention(&g->step, n, g->q, g->fused ? gate : NULL, g->attn, kc, vc, kv_f16, H, H_kv, hd, dv,
                                  scale, att_splits(g, n), g->att_part,
                                  g->fused ? g->gemv_q8 : NULL, g->stream);
    return g->fused ? held : -1;
}

static void layer_attention(engine *c, cuda_backend *g, const model_layer *l, int64_t il, int64_t n) {
    const model_hparams *hp = &c->m->hp;
    const state_pool *sp = c->sp;
    const int64_t hd = hp->head_dim_k, dv = hp->head_dim_v, O = hp->n_head * dv;
    const tensor *const W[3] = {&l->wq, &l->wk, &l->wv};
    float *const ys[3] = {hp->attn_gated ? g->qg : g->q, g->k, g->v};
    cuda_lin_parts(g, W, ys, 3, g->xn, n, true);
    /* the gated q's split and the per-head norms, in the rotation's pass */
    const ck_rope_pre pre = {hp->attn_gated ? g->qg : NULL, g->gate, l->q_norm.name ? f32(&l->q_norm) : NULL,
                             l->q_norm.name ? f32(&l->k_norm) : NULL, hp->rms_eps};
    const int kv_f16 = (sp->type_k == QTYPE_F16 ? 1 : 0) | (sp->type_v == QTYPE_F16 ? 2 : 0);
    const float scale = hp->attn_scale > 0 ? hp->attn_scale : 1.0f / sqrtf((float)hd);
    int held = -1;
    PROF(g, PROF_ATTENTION, {
        ck_rope_store(&g->step, n, &pre, g->q, g->k, g->v, hp->n_head, hp->n_head_kv, hd, dv, hp->n_rot,
                      hp->rope_base, hp->rope_style == ROPE_NEOX, sp->k[il], sp->v[il], kv_f16, g->stream);
        held = attend(g, hp, sp->k[il], sp->v[il], kv_f16, scale, n, hp->attn_gated ? g->gate : NULL);
    });
    if (held < 0 && hp->attn_gated) ck_sigmoid_mul(g->attn, g->gate, n * O, g->stream);
    cuda_x_written(g, g->attn, n, O, held > 0, false);
    cuda_lin_again(g, &l->wo, g->attn, n, g->mix);
}

/* What a GDN verify row keeps for replay: its conv output, g and beta. */
static ck_segments gdn_kept(cuda_backend *g, int64_t conv_dim, int64_t n_v) {
    return (ck_segments){3, {g->gdn_qkv, g->gdn_g, g->gdn_beta}, {conv_dim, n_v, n_v}, {conv_dim, n_v, n_v}};
}

/* What a Mamba-2 verify row keeps: its conv output x|B|C and its raw dt. */
static ck_segments mamba2_kept(cuda_backend *g, const model_hparams *hp) {
    const int64_t CD = mamba2_conv_dim(hp), IN = mamba2_in_dim(hp);
    return (ck_segments){2, {g->gdn_qkv, g->mb_in + hp->ssm_d_inner + CD}, {CD, IN}, {CD, hp->ssm_n_head}};
}

static void layer_gdn(engine *c, cuda_backend *g, const model_layer *l, int64_t il, int64_t n) {
    const model_hparams *hp = &c->m->hp;
    const state_pool *sp = c->sp;
    const int64_t n_k = hp->ssm_n_k, n_v = hp->ssm_n_v, d_k = hp->ssm_d_k, d_v = hp->ssm_d_v;
    const int64_t conv_dim = model_gdn_conv_dim(hp), key_dim = n_k * d_k, V = n_v * d_v, r = n_v / n_k;
    const int K = (int)hp->ssm_d_conv;
    const bool ba = l->ssm_ba.name != NULL;
    /* the four input projections (qwen3next: three, b|a fused) in as few launches as their types allow */
    const tensor *const W[4] = {&l->ssm_qkv, &l->ssm_z, ba ? &l->ssm_ba : &l->ssm_beta, &l->ssm_alpha};
    float *const ys[4] = {g->conv_in, g->gdn_z, g->gdn_b, g->gdn_a};
    cuda_lin_parts(g, W, ys, ba ? 3 : 4, g->xn, n, true);
    const float *a_log_neg = f32(&l->ssm_a), *dt_bias = f32(&l->ssm_dt_bias);
    /* qwen3next's fused b|a: per key head, b of its r value heads, then a of them */
    const ck_gate_src gate = ba ? (ck_gate_src){g->gdn_b + r, 2 * n_v, g->gdn_b, 2 * n_v, r, 2 * r, a_log_neg, dt_bias}
                                : (ck_gate_src){g->gdn_a, n_v, g->gdn_b, n_v, n_v, n_v, a_log_neg, dt_bias};
    const ck_gated_norm norm = {g->gdn_z, V, f32(&l->ssm_norm), hp->rms_eps};
    const int map = hp->ssm_head_map == GDN_KHEAD_MOD ? 0 : 1;
    const float scale = 1.0f / sqrtf((float)d_k);
    /* a decode step: the conv writes the windows, and one kernel the rest up to the norm */
    const bool fused = g->fused && g->decode_step;
    PROF(g, PROF_CONV, {
        ck_conv1d(&g->step, n, g->conv_in, conv_dim, g->gdn_qkv, conv_dim, l->conv_w, NULL, conv_dim, K, sp->conv[il],
                  fused, 2 * key_dim, d_k, 1e-6f, g->stream);
        if (!fused) conv_windows(g, g->conv_in, conv_dim, conv_dim, K, sp->conv[il]);
    });
    int held = -1;
    uint16_t *h16 = NULL;
    if (fused)
        PROF(g, PROF_GDN, {
            held = ck_gdn_step(g->step.runs, g->n_runs, g->gdn_qkv, conv_dim, &gate, &norm, g->gdn_o, g->gemv_q8,
                               sp->rec[il], n_k, n_v, d_k, d_v, map, scale, g->stream);
        });
    if (held < 0) {
        ck_ssm_gate(n, n_v, gate.alpha, gate.alpha_stride, gate.b, gate.b_stride, gate.group, gate.group_stride,
                    a_log_neg, dt_bias, g->gdn_g, g->gdn_beta, g->stream);
        const ck_segments keep = gdn_kept(g, conv_dim, n_v);
        if (g->n_keep)
            ck_keep_rows(g->d_plan + g->o_keep, g->n_keep, 0, &keep, sp->keep[il], sp->shape[il].keep_floats,
                         g->stream);
        PROF(g, PROF_GDN, {
            /* a prefill in tiles; decode and verify rows (and shapes a tile does not take) row by row */
            if (!(g->chunked && g->longest_run >= CK_SCAN_CHUNK &&
                  ck_gdn_chunked(g->step.runs, g->n_runs, n, g->d_plan + g->o_ckpt, g->gdn_qkv, conv_dim, g->gdn_g,
                                 g->gdn_beta, g->gdn_o, sp->rec[il], n_k, n_v, d_k, d_v, map, scale, g->gdn_work,
                                 g->gdn_work_tiles, g->scan_mma, g->stream)))
                ck_gdn(g->step.runs, g->n_runs, g->d_plan + g->o_ckpt, g->gdn_qkv, conv_dim, g->gdn_g, g->gdn_beta,
                       g->gdn_o, sp->rec[il], n_k, n_v, d_k, d_v, map, scale, g->stream);
        });
        h16 = cuda_x16_room(g, n);
        held = ck_gated_rmsnorm(n, n_v, d_v, g->gdn_o, V, norm.z, norm.z_stride, norm.w, norm.eps, g->gdn_o, V,
                                g->gemv_q8, h16, g->stream);
    }
    cuda_x_written(g, g->gdn_o, n, V, held, h16);
    cuda_lin_again(g, &l->ssm_out, g->gdn_o, n, g->mix);
}

/* block_mamba2.c on the GPU: the conv output goes to gdn_qkv, the scan output to gdn_o */
static void layer_mamba2(engine *c, cuda_backend *g, const model_layer *l, int64_t il, int64_t n) {
    const model_hparams *hp = &c->m->hp;
    const state_pool *sp = c->sp;
    const int64_t DI = hp->ssm_d_inner, CD = mamba2_conv_dim(hp), IN = mamba2_in_dim(hp), H = hp->ssm_n_head;
    const int K = (int)hp->ssm_d_conv;
    cuda_lin_again(g, &l->ssm_in, g->xn, n, g->mb_in);
    PROF(g, PROF_CONV, {
        const bool fused = g->fused && g->decode_step; /* the conv writes the windows */
        ck_conv1d(&g->step, n, g->mb_in + DI, IN, g->gdn_qkv, CD, l->conv_w, f32(&l->ssm_conv_bias), CD, K,
                  sp->conv[il], fused, 0, 1, 0.0f, g->stream);
        if (!fused) conv_windows(g, g->mb_in + DI, IN, CD, K, sp->conv[il]);
    });
    const ck_segments keep = mamba2_kept(g, hp);
    if (g->n_keep)
        ck_keep_rows(g->d_plan + g->o_keep, g->n_keep, 0, &keep, sp->keep[il], sp->shape[il].keep_floats, g->stream);
    PROF(g, PROF_MAMBA2, {
        /* a prefill in chunks */
        if (!(g->chunked && g->longest_run >= CK_SCAN_CHUNK &&
              ck_mamba2_chunked(g->step.runs, g->n_runs, g->d_plan + g->o_ckpt, g->gdn_qkv, CD, g->mb_in + DI + CD, IN,
                                g->gdn_o, sp->rec[il], H, DI / H, hp->ssm_n_group, hp->ssm_d_state, f32(&l->ssm_a),
                                f32(&l->ssm_dt_bias), f32(&l->ssm_d), g->scan_mma, g->stream)))
            ck_mamba2(g->step.runs, g->n_runs, g->d_plan + g->o_ckpt, g->gdn_qkv, CD, g->mb_in + DI + CD, IN, g->gdn_o,
                      sp->rec[il], H, DI / H, hp->ssm_n_group, hp->ssm_d_state, f32(&l->ssm_a), f32(&l->ssm_dt_bias),
                      f32(&l->ssm_d), g->stream);
    });
    ck_gated_rmsnorm_group(n, hp->ssm_n_group, DI / hp->ssm_n_group, g->gdn_o, DI, g->mb_in, IN, f32(&l->ssm_norm),
                           hp->rms_eps, g->gdn_o, DI, g->stream);
    cuda_lin(g, &l->ssm_out, g->gdn_o, n, g->mix);
}


/* xn = the block's norm of x, after x += residual_scale * mix when a block's output is
 * still to be added (*pending): the residual and the next norm in one pass. */
static void block_input(engine *c, cuda_backend *g, const tensor *norm, int64_t n, bool *pending) {
    const model_hparams *hp = &c->m->hp;
    const int64_t E = hp->n_embd;
    uint16_t *h16 = cuda_x16_room(g, n);
    const int held = ck_add_rmsnorm(g->x, *pending ? g->mix : NULL, hp->residual_scale, g->xn, f32(norm), E, n,
                                    hp->rms_eps, g->gemv_q8, h16, g->stream);
    cuda_x_written(g, g->xn, n, E, held, h16);
    *pending = false;
}

/* x += residual_scale * mix, when a block's output is still to be added */
static void block_output(engine *c, cuda_backend *g, int64_t n, bool *pending) {
    const model_hparams *hp = &c->m->hp;
    if (*pending) ck_add_scaled(g->x, g->mix, n * hp->n_embd, hp->residual_scale, g->stream);
    *pending = false;
}

/* forward_layer on the GPU: layer il over the uploaded plan's n rows of x. Each block's
 * output (mix) is added to x by the next block's norm: *pending says that one is due on
 * entry, and is set on return (block_output adds it). */
static void gpu_layer(engine *c, cuda_backend *g, int64_t il, int64_t n, bool *pending) {
    const model_layer *l = &g->layers[il];
    if (l->mixer != MIXER_NONE) {
        block_input(c, g, &l->attn_norm, n, pending);
        if (l->mixer == MIXER_ATTENTION) layer_attention(c, g, l, il, n);
        else if (l->mixer == MIXER_GDN) layer_gdn(c, g, l, il, n);
        else layer_mamba2(c, g, l, il, n);
        *pending = true;
    }
    if (l->ffn != FFN_NONE) {
        block_input(c, g, &l->ffn_norm, n, pending);
        cuda_layer_ffn(c, g, l, n);
        *pending = true;
    }
}

/* ==== The MTP layer (block_mtp.c on the GPU) ==== */

/* Rows [0, n) of mtp_cat for the uploaded plan's tokens and the sources of their previous
 * h (ck_gather_h codes, in the plan's checkpoint area): [enorm(embed(token)); hnorm(h)]. */
static void mtp_inputs(engine *c, cuda_backend *g, int64_t n) {
    const model_hparams *hp = &c->m->hp;
    const state_pool *sp = c->sp;
    const int64_t E = hp->n_embd, il = c->mtp_il;
    ck_embed(g->mtp_embd.type, g->mtp_embd.data, g->mtp_embd.row_bytes, E, g->d_plan + g->o_tokens, n, 1.0f, g->xn,
             g->stream);
    ck_rmsnorm_rows(g->mtp_cat, 2 * E, g->xn, E, f32(&g->mtp_enorm), E, n, hp->rms_eps, g->stream);
    ck_gather_h(g->mix, g->h, sp->conv[il], sp->shape[il].conv_floats, g->d_plan + g->o_ckpt, n, E, g->stream);
    ck_rmsnorm_rows(g->mtp_cat + E, 2 * E, g->mix, E, f32(&g->mtp_hnorm), E, n, hp->rms_eps, g->stream);
    cuda_x_written(g, g->xn, n, E, false, false);
}

/* x = eh_proj(mtp_cat), then the layer, over the uploaded plan's n rows. */
static void mtp_layer(engine *c, cuda_backend *g, int64_t n) {
    cuda_lin(g, &g->mtp_eh_proj, g->mtp_cat, n, g->x);
    bool pending = false;
    gpu_layer(c, g, c->mtp_il, n, &pending);
    block_output(c, g, n, &pending);
}

/* block_mtp: the step's rows through the MTP layer (each reading h of the row before, or
 * of the sequence's state for a run's first row), and h of each run's last row (a
 * verify: of each row; a checkpoint: of its position) into the layer's state. The
 * inputs are read before the state changes. */
static void gpu_block_mtp(engine *c, cuda_backend *g, const int32_t *tokens, const step_plan *plan) {
    const int64_t il = c->mtp_il, E = c->m->hp.n_embd;
    state_pool *sp = c->sp;
    const step_plan *mp = &c->mtp_plan;
    mtp_plan_rows(c, tokens, plan);
    if (mp->n > 0) upload_plan(g, c->sp, c->mtp_tok, mp, NULL, 0);
    /* the state writes (row, slot) and the h sources go in the plan's keep and checkpoint areas */
    const int64_t ni = mtp_state_rows(plan, g->h_plan + g->o_keep);
    memcpy(g->h_plan + g->o_ckpt, c->mtp_src, (size_t)mp->n * sizeof(int32_t));
    cuda_copy(g, g->d_plan + g->o_keep, g->h_plan + g->o_keep, (size_t)(g->o_blocks - g->o_keep) * sizeof(int32_t),
              cudaMemcpyHostToDevice);
    if (mp->n > 0) mtp_inputs(c, g, mp->n);
    const ck_segments h_rows = {1, {g->h}, {E}, {E}};
    ck_keep_rows(g->d_plan + g->o_keep, ni, 0, &h_rows, sp->conv[il], sp->shape[il].conv_floats, g->stream);
    if (mp->n > 0) mtp_layer(c, g, mp->n);
}

void cuda_mtp_h_from_state(engine *c, int64_t row, int64_t slot) {
    cuda_backend *g = c->gpu;
    const int64_t E = c->m->hp.n_embd;
    cuda_copy(g, g->h + row * E, state_conv(c->sp, c->mtp_il, slot), (size_t)E * sizeof(float),
              cudaMemcpyDeviceToDevice);
}

void cuda_mtp_h_move(engine *c, int64_t dst, int64_t src) {
    cuda_backend *g = c->gpu;
    const int64_t E = c->m->hp.n_embd;
    cuda_copy(g, g->h + dst * E, g->h + src * E, (size_t)E * sizeof(float), cudaMemcpyDeviceToDevice);
}

/* Each of the n rows of logits in g->logits: its argmax into best and that token's
 * probability into p, found on the GPU (ck_top_rows with k 1, then ck_logprob_rows with
 * those ids as targets; g->digest holds the log-probabilities (doubles, first: aligned),
 * then the ids, values and counts), 12 bytes a row copied back. A row with no usable
 * logit: p 0. */
static void best_of_rows(cuda_backend *g, int64_t n, int64_t n_vocab, int32_t *best, float *p) {
    int32_t *d = g->digest, *ids = d + 2 * n;
    ck_top_rows(g->logits, n, n_vocab, 1, ids, (float *)(ids + n), ids + 2 * n, g->stream);
    ck_logprob_rows(g->logits, n, n_vocab, ids, (double *)d, g->stream);
    cuda_copy(g, g->digest_host, d, (size_t)(5 * n) * sizeof(int32_t), cudaMemcpyDeviceToHost);
    const double *lp = (const double *)g->digest_host;
    const int32_t *h_ids = g->digest_host + 2 * n, *counts = h_ids + 2 * n;
    for (int64_t j = 0; j < n; j++) best[j] = h_ids[j], p[j] = counts[j] ? (float)exp(lp[j]) : 0.0f;
}

void cuda_mtp_chain_step(engine *c, const step_plan *mp, const int32_t *tok, int32_t *best, float *p) {
    cuda_backend *g = c->gpu;
    const model_hparams *hp = &c->m->hp;
    const int64_t E = hp->n_embd, n = mp->n;
    upload_plan(g, c->sp, tok, mp, NULL, 0);
    for (int64_t j = 0; j < n; j++) g->h_plan[g->o_ckpt + j] = (int32_t)j; /* row j reads h row j */
    cuda_copy(g, g->d_plan + g->o_ckpt, g->h_plan + g->o_ckpt, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice);
    mtp_inputs(c, g, n);
    mtp_layer(c, g, n);
    ck_rmsnorm_rows(g->h, E, g->x, E, f32(&g->mtp_head_norm), E, n, hp->rms_eps, g->stream); /* the next row's h */
    cuda_lin(g, &g->mtp_head, g->h, n, g->logits);
    if (best) {
        if (hp->logit_scale != 1.0f) ck_scale(g->logits, n * hp->n_vocab, 1.0f / hp->logit_scale, g->stream);
        best_of_rows(g, n, hp->n_vocab, best, p);
    } else {
        cuda_copy(g, c->mtp_logits, g->logits, (size_t)(n * hp->n_vocab) * sizeof(float), cudaMemcpyDeviceToHost);
    }
    const char *e = ck_check_stream(g->stream);
    if (e) eddy_log(EDDY_LOG_ERROR, "CUDA error in an MTP draft step: %s", e);
}

static eddy_status step_status(cuda_backend *g, eddy_error *err) {
    const char *e = ck_check_stream(g->stream);
    if (e) return eddy_error_set(err, EDDY_ERR_IO, "CUDA error in a forward step: %s", e);
    if (g->blas_status != CUBLAS_STATUS_SUCCESS) {
        const int st = (int)g->blas_status;
        g->blas_status = CUBLAS_STATUS_SUCCESS;
        return eddy_error_set(err, EDDY_ERR_IO, "cuBLAS error %d in a forward step", st);
    }
    return EDDY_OK;
}

/* Logits of output rows [first, first + k) of the step (k <= logit_rows) into g->logits. */
static void output_rows(engine *c, cuda_backend *g, int64_t first, int64_t k) {
    const model_hparams *hp = &c->m->hp;
    const int64_t E = hp->n_embd;
    ck_rmsnorm_gather(g->xn, g->x, g->d_plan + g->o_out + first, f32(&g->output_norm), E, k, hp->rms_eps, g->stream);
    cuda_lin(g, &g->output, g->xn, k, g->logits);
    if (hp->logit_scale != 1.0f) ck_scale(g->logits, k * hp->n_vocab, 1.0f / hp->logit_scale, g->stream);
}

/* The device work of a step after its plan is uploaded, up to the logits of its first
 * logit_rows output rows in g->logits (cuda_forward makes the others, in groups). */
static void step_kernels(engine *c, cuda_backend *g, int64_t n, int64_t n_out) {
    const model_hparams *hp = &c->m->hp;
    const int64_t E = hp->n_embd;
    cuda_x_written(g, NULL, 0, 0, false, false); /* nothing of the last step is held */
    if (c->gpu_from == 0) /* else cuda_forward uploaded x after the CPU's layers */
        ck_embed(g->tok_embd.type, g->tok_embd.data, g->tok_embd.row_bytes, E, g->d_plan + g->o_tokens, n,
                 hp->embd_scale, g->x, g->stream);
    bool pending = false;
    for (int64_t il = c->gpu_from; il < hp->n_layer; il++) gpu_layer(c, g, il, n, &pending);
    block_output(c, g, n, &pending);
    if (c->mtp) ck_rmsnorm_rows(g->h, E, g->x, E, f32(&g->output_norm), E, n, hp->rms_eps, g->stream);
    if (n_out > 0) output_rows(c, g, 0, n_out < g->logit_rows ? n_out : g->logit_rows);
}

/* A step's kernels captured as a graph, instantiated into *exec; false when that failed. */
static bool capture_step(engine *c, cuda_backend *g, int64_t n, int64_t n_out, cudaGraphExec_t *exec) {
    cudaGraph_t graph = NULL;
    bool ok = cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
    if (ok) step_kernels(c, g, n, n_out);
    ok = cudaStreamEndCapture(g->stream, &graph) == cudaSuccess && ok;
    ok = ok && cudaGraphInstantiate(exec, graph, 0) == cudaSuccess;
    if (graph) cudaGraphDestroy(graph);
    return ok;
}

/* Whether a step of n rows runs the same kernels for every plan of its key (graph
 * shape): up to CK_GEMV_MAX_TOK rows, or (batched decode, verifies) up to g->mmq_rows
 * without a run longer than that (no prefill kernels) and with every product in
 * ck_mmq_parts (cuBLAS may allocate its f16 copies, which a capture cannot). */
static bool step_fits_graph(const cuda_backend *g, int64_t n) {
    if (n <= CK_GEMV_MAX_TOK) return true;
    return n <= g->mmq_rows && g->mmq_q8 && !g->float_products && g->longest_run <= CK_GEMV_MAX_TOK;
}

/* The cached graph of a step of this shape, captured now when there is none; NULL when
 * the step runs without one: graphs off, a step that does not fit one (prefill, cuBLAS
 * products: few launches per token anyway), or a mixture of experts' step of more than
 * moe_rows rows routed on the host (experts_by_host). The MTP layer's rows run after the graph,
 * launched (gpu_block_mtp: its plan is the host's). A capture that fails with
 * programmatic dependent launch is tried again without it (for the process); one that
 * still fails turns graphs off for the engine, with a warning. */
static step_graph *step_graph_for(engine *c, cuda_backend *g, int64_t n, int64_t n_out) {
    if (!g->graphs || (g->moe && n > g->moe_rows && !g->moe_grouped) || !step_fits_graph(g, n)) return NULL;
    const step_graph key = {n, g->n_runs, g->n_conv, g->n_conv_ck, g->n_keep, n_out, NULL, 0};
    step_graph *slot = &g->graph[0];
    for (int i = 0; i < GRAPH_CACHE; i++) {
        step_graph *e = &g->graph[i];
        if (e->n && e->n == key.n && e->n_runs == key.n_runs && e->n_conv == key.n_conv &&
            e->n_conv_ck == key.n_conv_ck && e->n_keep == key.n_keep && e->n_out == key.n_out) {
            e->last_use = ++g->graph_clock;
            return e;
        }
        if (e->last_use < slot->last_use) slot = e; /* the least recently used, or an empty one */
    }
    cudaGraphExec_t exec = NULL;
    bool ok = capture_step(c, g, n, n_out, &exec);
    if (!ok && ck_set_pdl(0)) { /* a driver that cannot capture early-starting launches: plain ones */
        cudaGetLastError();
        eddy_log(EDDY_LOG_WARN, "CUDA: kernels launch plainly: capturing a decode step with programmatic "
                                "dependent launch failed");
        ok = capture_step(c, g, n, n_out, &exec);
    }
    if (!ok) {
        cudaGetLastError();
        g->graphs = false;
        eddy_log(EDDY_LOG_WARN, "CUDA graphs are off: capturing a decode step failed");
        return NULL;
    }
    if (slot->n) cudaGraphExecDestroy(slot->exec);
    eddy_log(EDDY_LOG_DEBUG, "CUDA graph captured: a step of %" PRId64 " rows in %" PRId64 " runs", n, key.n_runs);
    *slot = key;
    slot->exec = exec;
    slot->last_use = ++g->graph_clock;
    return slot;
}

/* The digest of the k_rows rows of logits in g->logits into dg (from its row `first` on),
 * found on the GPU: one copy back of 8 k + 4 bytes a row (the best k; 8 more with their
 * log-sum-exp), or 8 (a target's log-probability; the targets go up first). g->digest
 * holds the log-sum-exps (doubles, first: aligned), ids, logits and counts, or the
 * log-probabilities and the targets. */
static void digest_rows(cuda_backend *g, int64_t n_vocab, int64_t k_rows, const step_digest *dg, int64_t first) {
    const step_digest to = step_digest_from(dg, first);
    int32_t *d = g->digest, *h = g->digest_host;
    if (dg->k == 0) {
        cuda_copy(g, d + 2 * k_rows, to.targets, (size_t)k_rows * sizeof(int32_t), cudaMemcpyHostToDevice);
        ck_logprob_rows(g->logits, k_rows, n_vocab, d + 2 * k_rows, (double *)d, g->stream);
        cuda_copy(g, h, d, (size_t)k_rows * sizeof(double), cudaMemcpyDeviceToHost);
        memcpy(to.logprobs, h, (size_t)k_rows * sizeof(double));
        return;
    }
    if (dg->p) {
        best_of_rows(g, k_rows, n_vocab, to.ids, to.p);
        return;
    }
    const int64_t k = dg->k, nk = k_rows * k, at = to.lse ? 2 * k_rows : 0; /* the ids after the lse */
    ck_top_rows(g->logits, k_rows, n_vocab, (int)k, d + at, (float *)(d + at + nk), d + at + 2 * nk, g->stream);
    if (to.lse) ck_logprob_rows(g->logits, k_rows, n_vocab, NULL, (double *)d, g->stream);
    cuda_copy(g, h, d, (size_t)(at + 2 * nk + k_rows) * sizeof(int32_t), cudaMemcpyDeviceToHost);
    if (to.lse) memcpy(to.lse, h, (size_t)k_rows * sizeof(double));
    memcpy(to.ids, h + at, (size_t)nk * sizeof(int32_t));
    if (to.logits) memcpy(to.logits, h + at + nk, (size_t)nk * sizeof(float));
    if (to.counts) memcpy(to.counts, h + at + 2 * nk, (size_t)k_rows * sizeof(int32_t));
}

eddy_status cuda_forward(engine *c, const int32_t *tokens, const step_plan *plan, float *logits, const step_digest *dg,
                         const int64_t *out_rows, int64_t n_out, eddy_error *err) {
    _Static_assert(CK_TOP_MAX == EDDY_TOP_MAX, "ck_top_rows takes every k eddy_engine_decode_top does");
    cuda_backend *g = c->gpu;
    const model_hparams *hp = &c->m->hp;
    const int64_t n = plan->n;
    if (!logits && !dg) n_out = 0;
    upload_plan(g, c->sp, tokens, plan, out_rows, n_out);
    if (c->gpu_from > 0) /* the residual stream after the CPU's layers (forward_front), through staging */
        (void)cuda_pieces_from_host(g, &(state_piece){g->x, (size_t)(n * hp->n_embd) * sizeof(float)}, 1, c->x);
    step_graph *sg = step_graph_for(c, g, n, n_out);
    if (sg) cudaGraphLaunch(sg->exec, g->stream);
    else PROF(g, PROF_STEP, step_kernels(c, g, n, n_out));
    cuda_profile_step_done(g->prof);
    for (int64_t first = 0; first < n_out; first += g->logit_rows) { /* the first group: step_kernels' */
        const int64_t k = n_out - first < g->logit_rows ? n_out - first : g->logit_rows;
        if (first > 0) output_rows(c, g, first, k);
        if (logits) {
            cuda_copy(g, logits + first * hp->n_vocab, g->logits, (size_t)(k * hp->n_vocab) * sizeof(float),
                      cudaMemcpyDeviceToHost);
        } else {
            digest_rows(g, hp->n_vocab, k, dg, first);
        }
    }
    if (c->mtp) gpu_block_mtp(c, g, tokens, plan);
    return step_status(g, err);
}

void cuda_logits_row(engine *c, int64_t row, float *dst) {
    const int64_t n_vocab = c->m->hp.n_vocab;
    cuda_copy(c->gpu, dst, c->gpu->logits + row * n_vocab, (size_t)n_vocab * sizeof(float), cudaMemcpyDeviceToHost);
}

int64_t cuda_logit_rows(const engine *c) { return c->gpu->logit_rows; }

void cuda_accept(engine *c, int64_t il, eddy_seq *s, int64_t n_keep) {
    cuda_backend *g = c->gpu;
    const model_hparams *hp = &c->m->hp;
    const model_layer *l = &g->layers[il];
    state_pool *sp = c->sp;
    EDDY_ASSERT(n_keep >= 1 && n_keep <= s->n_pending && n_keep <= c->n_batch);
    /* the kept rows' inputs gathered into rows 0.. of the step's buffers, replayed on the slot */
    int32_t *h = g->h_plan;
    for (int64_t t = 0; t < n_keep; t++)
        h[g->o_keep + 2 * t] = (int32_t)t, h[g->o_keep + 2 * t + 1] = (int32_t)(s->pending[t] - sp->n_slots);
    ck_run *run = (ck_run *)(h + g->o_runs);
    *run = (ck_run){0, (int32_t)n_keep, (int32_t)s->st.slot, (int32_t)s->st.slot, 0, 0, 0};
    cuda_copy(g, g->d_plan, h, (size_t)g->o_blocks * sizeof(int32_t), cudaMemcpyHostToDevice);
    if (l->mixer == MIXER_GDN) {
        const int64_t n_k = hp->ssm_n_k, n_v = hp->ssm_n_v, d_k = hp->ssm_d_k, d_v = hp->ssm_d_v;
        const int64_t conv_dim = model_gdn_conv_dim(hp);
        const ck_segments keep = gdn_kept(g, conv_dim, n_v);
        ck_keep_rows(g->d_plan + g->o_keep, n_keep, 1, &keep, sp->keep[il], sp->shape[il].keep_floats, g->stream);
        ck_gdn(g->step.runs, 1, g->d_plan + g->o_ckpt, g->gdn_qkv, conv_dim, g->gdn_g, g->gdn_beta, g->gdn_o,
               sp->rec[il], n_k, n_v, d_k, d_v, hp->ssm_head_map == GDN_KHEAD_MOD ? 0 : 1, 1.0f / sqrtf((float)d_k),
               g->stream);
    } else {
        const int64_t DI = hp->ssm_d_inner, CD = mamba2_conv_dim(hp), IN = mamba2_in_dim(hp), H = hp->ssm_n_head;
        const ck_segments keep = mamba2_kept(g, hp);
        ck_keep_rows(g->d_plan + g->o_keep, n_keep, 1, &keep, sp->keep[il], sp->shape[il].keep_floats, g->stream);
        ck_mamba2(g->step.runs, 1, g->d_plan + g->o_ckpt, g->gdn_qkv, CD, g->mb_in + DI + CD, IN, g->gdn_o,
                  sp->rec[il], H, DI / H, hp->ssm_n_group, hp->ssm_d_state, f32(&l->ssm_a), f32(&l->ssm_dt_bias),
                  f32(&l->ssm_d), g->stream);
    }
    cuda_copy(g, state_conv(sp, il, s->st.slot), state_conv(sp, il, s->pending[n_keep - 1]),
              (size_t)sp->shape[il].conv_floats * sizeof(float), cudaMemcpyDeviceToDevice);
}
double cuda_copy_bandwidth(void) {
    const size_t bytes = (size_t)1 << 30;
    void *a = NULL, *b = NULL;
    cudaStream_t st = NULL; /* its own, as the engines': never the legacy stream */
    cudaEvent_t t0 = NULL, t1 = NULL;
    double best = 0.0;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
        cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess || cudaEventCreate(&t0) != cudaSuccess ||
        cudaEventCreate(&t1) != cudaSuccess)
        goto done;
    cudaMemsetAsync(a, 1, bytes, st);
    for (int i = 0; i < 6; i++) {
        cudaEventRecord(t0, st);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, st);
        cudaEventRecord(t1, st);
        cudaEventSynchronize(t1);
        float ms = 0;
        cudaEventElapsedTime(&ms, t0, t1);
        const double bw = 2.0 * (double)bytes / (ms * 1e-3);
        if (i > 0 && bw > best) best = bw; /* the first warms up */
    }
done:
    if (t0) cudaEventDestroy(t0);
    if (t1) cudaEventDestroy(t1);
    if (st) cudaStreamDestroy(st);
    cudaFree(a);
    cudaFree(b);
    cudaGetLastError();
    return best;
}
