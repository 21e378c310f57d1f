/*
 * cuda_ffn.c — the feed-forward blocks on the GPU (block_ffn.c's): SwiGLU, squared ReLU,
 * and mixtures of experts, routed on the GPU: each token slot's products in one launch for
 * decode and batched decode (experts_on_gpu), the slots grouped by expert for a prefill
 * (experts_grouped), or sorted by expert on the host where the experts' types have no integer
 * kernels (experts_by_host); then the gated shared expert.
 */
#include "cuda/cuda_backend.h"

#include <stdlib.h>

/* The most rows of a step whose experts take a launch for all the token slots
 * (experts_on_gpu), of a batch of at most B, for X experts, k a token: every step of up to
 * CK_GEMV_MAX_TOK rows, and up to 128 while the n k token slots are at most 4 X. Each slot
 * there reads its expert's rows for itself, so the bytes read grow with n k where grouping
 * the slots by expert (experts_grouped) reads each expert with tokens once (at most X);
 * but grouping takes twice the launches, a layout made by one block, and products of up to
 * 64 rows on tiles mostly empty at decode's few slots an expert. The bound is an estimate:
 * EDDY_CUDA_MOE_ROWS=N sets it (1 to 128), for scripts/device_check_moe.sh to time both. */
int64_t cuda_moe_rows(int64_t X, int64_t k, int64_t B) {
    int64_t rows = 4 * X / k < 128 ? 4 * X / k : 128;
    if (rows < CK_GEMV_MAX_TOK) rows = CK_GEMV_MAX_TOK;
    rows = cuda_env_int("EDDY_CUDA_MOE_ROWS", 1, 128, rows);
    return rows < B ? rows : B;
}

/* Whether every mixture-of-experts layer's experts take the grouped products
 * (experts_grouped: ck_mmq_experts' types, rows of a multiple of 32, experts that one
 * block's shared memory counts) */
bool cuda_moe_groups(const model *m, int64_t gpu_from) {
    const model_hparams *hp = &m->hp;
    if (hp->n_expert > CK_MOE_GROUP_EXPERTS || hp->n_embd % 32 || hp->n_ff_exp % 32) return false;
    for (int64_t il = gpu_from; il < hp->n_layer; il++) {
        const model_layer *l = &m->layers[il];
        if (l->ffn == FFN_MOE && !(ck_gemv_integer(l->moe_gate.type) && ck_gemv_integer(l->moe_up.type) &&
                                   ck_gemv_integer(l->moe_down.type)))
            return false;
    }
    return true;
}

/* out (m, n_embd) = down(silu(gate x) * up x) for m rows x */
static void swiglu_expert(cuda_backend *g, const tensor *gate, const tensor *up, const tensor *down, const float *x,
                          int64_t m, float *out) {
    const int64_t F = gate->ne[1];
    const tensor *const W[2] = {gate, up};
    float *const ys[2] = {g->ff_a, g->ff_b};
    cuda_lin_parts(g, W, ys, 2, x, m, true);
    uint16_t *h16 = cuda_x16_room(g, m);
    const int held = ck_swiglu(g->ff_a, g->ff_a, g->ff_b, m, F, g->gemv_q8, h16, g->stream);
    cuda_x_written(g, g->ff_a, m, F, held, h16);
    cuda_lin_again(g, down, g->ff_a, m, out);
}

/* The experts' gate (part 0, into a) and up (part 1, into b) matrices of F rows as parts
 * of the experts' products; returns the end of the run of parts from `first` that one
 * launch takes: both when they share a type. */
static int gate_up_parts(const model_layer *l, int64_t F, float *a, float *b, ck_gemv_part parts[2], int first) {
    parts[0] = (ck_gemv_part){l->moe_gate.data, l->moe_gate.row_bytes, F, a};
    parts[1] = (ck_gemv_part){l->moe_up.data, l->moe_up.row_bytes, F, b};
    return first == 0 && l->moe_gate.type == l->moe_up.type ? 2 : first + 1;
}
static uint32_t gu_type(const model_layer *l, int part) { return part ? l->moe_up.type : l->moe_gate.type; }

/* The routed experts of a step of up to moe_rows rows (decode, batches of decoding
 * sequences, verify) into mix without the host: the routing (ck_moe_route), each token
 * slot's gate and up products with its expert, SwiGLU and its down product
 * (ck_gemv_experts, a launch for all the slots), and the slots' outputs weighted and
 * summed (in the order of the slots, where the CPU adds in the experts' order). Nothing
 * comes back to the host, so these steps are captured as graphs like the others. */
static void experts_on_gpu(engine *c, cuda_backend *g, const model_layer *l, int64_t n) {
    const model_hparams *hp = &c->m->hp;
    const int64_t E = hp->n_embd, X = hp->n_expert, k = hp->n_expert_used, S = n * k;
    const int64_t F = l->moe_gate.ne[1];
    /* in a step of up to CK_GEMV_MAX_TOK rows gemv_q8 may hold xn's 8-bit form (from its norm,
     * or the router's product); longer steps quantize it into moe_q8 */
    const bool few = n <= CK_GEMV_MAX_TOK;
    cuda_lin_again(g, &l->moe_router, g->xn, n, g->router);
    int ready = few && cuda_q8_held(g, g->xn, n, E);
    ck_moe_route(g->router, n, X, k, g->moe_sel, g->moe_w, g->stream);
    ck_gemv_part gu[2];
    for (int i = 0, e; i < 2; i = e) {
        e = gate_up_parts(l, F, g->moe_a, g->moe_b, gu, i);
        const int was = ready;
        PROF(g, PROF_GEMV,
             ready = ck_gemv_experts(gu_type(l, i), gu + i, e - i, E, g->xn, n, g->moe_sel, S,
                                     few ? g->gemv_q8 : g->moe_q8, ready, g->stream) == 1);
        g->n_q8_made += ready && !was;
    }
    if (few) cuda_q8_holds(g, ready ? g->xn : NULL, n, E);
    const int h_ready =
        ck_swiglu(g->moe_a, g->moe_a, g->moe_b, S, F, S <= CK_GEMV_MAX_TOK ? g->moe_q8 : NULL, NULL, g->stream);
    const ck_gemv_part down = {l->moe_down.data, l->moe_down.row_bytes, E, g->moe_y};
    int h_made = 0;
    PROF(g, PROF_GEMV,
         h_made = ck_gemv_experts(l->moe_down.type, &down, 1, F, g->moe_a, S, g->moe_sel, S, g->moe_q8, h_ready,
                                  g->stream) == 1 && !h_ready);
    g->n_q8_made += h_made;
    ck_moe_combine(g->mix, g->moe_y, g->moe_w, NULL, n, k, E, g->stream);
}

/* The routed experts of a longer step into mix (a prefill) where the experts' types have
 * no grouped kernels: the GPU routes (ck_moe_route, as for every other step, so that a
 * step's experts and weights do not depend on its route), the experts come back to the
 * host, which sorts the slots by expert (moe_sort_slots, the CPU's code) and sends them
 * back; each expert with tokens then runs over its gathered rows, so that its weights are
 * read once for all of them, its outputs added with their weights in expert order. */
static void experts_by_host(engine *c, cuda_backend *g, const model_layer *l, int64_t n) {
    const model_hparams *hp = &c->m->hp;
    const int64_t E = hp->n_embd, X = hp->n_expert, k = hp->n_expert_used;
    cuda_lin_again(g, &l->moe_router, g->xn, n, g->router);
    /* moe_order holds the experts (n, k) first, then the slots sorted by expert */
    ck_moe_route(g->router, n, X, k, g->moe_order, g->moe_w, g->stream);
    cuda_copy(g, c->moe_sel, g->moe_order, (size_t)(n * k) * sizeof(int32_t), cudaMemcpyDeviceToHost);
    moe_sort_slots(c, n);
    cuda_copy(g, g->moe_order, c->moe_order, (size_t)(n * k) * sizeof(int32_t), cudaMemcpyHostToDevice);
    cuda_zero(g, g->mix, (size_t)(n * E) * sizeof(float));
    for (int64_t e = 0; e < X; e++) {
        const int64_t m = c->moe_start[e + 1] - c->moe_start[e];
        if (m == 0) continue;
        const int32_t *slots = g->moe_order + c->moe_start[e];
        ck_gather_rows(g->moe_x, g->xn, slots, k, m, E, g->stream);
        cuda_x_written(g, g->moe_x, m, E, false, false);
        const tensor ge = tensor_expert(&l->moe_gate, e), ue = tensor_expert(&l->moe_up, e);
        const tensor de = tensor_expert(&l->moe_down, e);
        swiglu_expert(g, &ge, &ue, &de, g->moe_x, m, g->ff_out);
        ck_scatter_add(g->mix, g->ff_out, slots, k, g->moe_w, m, E, g->stream);
    }
}

/* The routed experts of a longer step into mix (a prefill) grouped on the GPU, moe_chunk
 * tokens at a time: the routing (ck_moe_route), the token slots laid out by expert
 * (ck_moe_group, ck_gather_slots), each expert's rows times its gate and up matrices on the
 * tensor cores (ck_mmq_experts: the expert's weights read once per 64 of its rows),
 * SwiGLU, the down products the same way, and each token's slots weighted and summed
 * (ck_moe_combine). About ten launches a layer and chunk, where routing by the host takes
 * a copy to the host and back and five launches per expert with tokens. */
static void experts_grouped(engine *c, cuda_backend *g, const model_layer *l, int64_t n) {
    const model_hparams *hp = &c->m->hp;
    const int64_t E = hp->n_embd, X = hp->n_expert, k = hp->n_expert_used, F = l->moe_gate.ne[1];
    cuda_lin_again(g, &l->moe_router, g->xn, n, g->router);
    for (int64_t t0 = 0; t0 < n; t0 += g->moe_chunk) {
        const int64_t m = n - t0 < g->moe_chunk ? n - t0 : g->moe_chunk, S = m * k;
        const int64_t rows = ck_moe_rows(S, X), tiles = ck_moe_tiles(S, X);
        ck_moe_route(g->router + t0 * X, m, X, k, g->moe_sel, g->moe_w, g->stream);
        ck_moe_group(g->moe_sel, S, X, g->moe_pos, g->moe_src, g->moe_tiles, g->moe_n_tiles, g->stream);
        ck_gather_slots(g->moe_gx, g->xn + t0 * E, g->moe_src, k, rows, E, g->stream);
        ck_gemv_part gu[2];
        for (int i = 0, e; i < 2; i = e) {
            e = gate_up_parts(l, F, g->moe_ga, g->moe_gb, gu, i);
            PROF(g, PROF_MMQ,
                 ck_mmq_experts(gu_type(l, i), gu + i, e - i, E, g->moe_gx, rows, g->moe_tiles, g->moe_n_tiles, tiles,
                                g->moe_mq, g->stream));
        }
        ck_swiglu(g->moe_ga, g->moe_ga, g->moe_gb, rows, F, NULL, NULL, g->stream);
        const ck_gemv_part down = {l->moe_down.data, l->moe_down.row_bytes, E, g->moe_gy};
        PROF(g, PROF_MMQ,
             ck_mmq_experts(l->moe_down.type, &down, 1, F, g->moe_ga, rows, g->moe_tiles, g->moe_n_tiles, tiles,
                            g->moe_mq, g->stream));
        ck_moe_combine(g->mix + t0 * E, g->moe_gy, g->moe_w, g->moe_pos, m, k, E, g->stream);
    }
}

/* block_ffn_moe on the GPU: the routed experts, then the shared expert. */
static void layer_moe(engine *c, cuda_backend *g, const model_layer *l, int64_t n) {
    const int64_t E = c->m->hp.n_embd;
    if (n <= g->moe_rows) experts_on_gpu(c, g, l, n);
    else if (g->moe_grouped) experts_grouped(c, g, l, n);
    else experts_by_host(c, g, l, n);
    if (l->shexp_gate.name) {
        swiglu_expert(g, &l->shexp_gate, &l->shexp_up, &l->shexp_down, g->xn, n, g->ff_out);
        if (l->shexp_router.name) cuda_lin_again(g, &l->shexp_router, g->xn, n, g->sh_gate);
        ck_add_gated_rows(g->mix, g->ff_out, l->shexp_router.name ? g->sh_gate : NULL, n, E, g->stream);
    }
}

void cuda_layer_ffn(engine *c, cuda_backend *g, const model_layer *l, int64_t n) {
    if (l->ffn == FFN_MOE) {
        layer_moe(c, g, l, n);
        return;
    }
    if (l->ffn == FFN_RELU2) {
        const int64_t F = l->ffn_up.ne[1];
        cuda_lin_again(g, &l->ffn_up, g->xn, n, g->ff_a);
        ck_relu2(g->ff_a, n * F, g->stream);
        cuda_lin(g, &l->ffn_down, g->ff_a, n, g->mix);
    } else {
        swiglu_expert(g, &l->ffn_gate, &l->ffn_up, &l->ffn_down, g->xn, n, g->mix);
    }
}
