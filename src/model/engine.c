/*
 * engine.c — engines: the eddy_model and eddy_engine functions of include/eddy.h.
 * Checks the caller's parameters, sizes every buffer and the state pool up front
 * (evaluation allocates nothing), and frees it all. Sequences and snapshots are in
 * engine_seq.c, forward steps in engine_step.c.
 */
#include "model/engine.h"

#include <inttypes.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "cuda/cuda.h"
#include "model/linear.h"
#include "ops/attention.h"
#include "ssm/mamba2.h"

_Static_assert(STATE_KV_BLOCK == ATTN_CHUNK, "a KV block is one chunk of the attention kernels");
_Static_assert(STATE_KV_TILE == ATTN_KB, "a tile of keys is one block of the attention kernels");

/* ==== Models ==== */

eddy_status eddy_model_load(const char *path, eddy_model **out, eddy_error *err) {
    if (!path || !out) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_model_load: NULL argument");
    return model_load(out, path, err);
}

void eddy_model_free(eddy_model *m) { model_free(m); }
const char *eddy_model_arch(const eddy_model *m) { return m->arch_name; }
int64_t eddy_model_n_vocab(const eddy_model *m) { return m->hp.n_vocab; }
int64_t eddy_model_n_ctx_train(const eddy_model *m) { return m->hp.n_ctx_train; }
bool eddy_model_has_mtp(const eddy_model *m) { return m && m->mtp; }
const eddy_gguf *eddy_model_gguf(const eddy_model *m) { return m->file; }

/* ==== Work buffers ==== */

/* The cache element type of a public KV type; false for a value outside the enum. */
static bool kv_qtype(eddy_kv_type t, qtype *out) {
    switch (t) {
    case EDDY_KV_DEFAULT:
    case EDDY_KV_F16: *out = QTYPE_F16; return true;
    case EDDY_KV_F32: *out = QTYPE_F32; return true;
    }
    return false;
}

/* The largest activation scratch any weight's linear() needs for n_batch rows. */
static size_t max_linear_scratch(const model *m, int64_t n_batch) {
    size_t best = linear_scratch_bytes(&m->output, n_batch);
    if (m->mtp) {
        const size_t a = linear_scratch_bytes(&m->mtp_eh_proj, n_batch), b = linear_scratch_bytes(&m->mtp_head, 1);
        best = a > best ? a : best;
        best = b > best ? b : best;
    }
    for (int64_t il = 0; il < m->hp.n_layer + (m->mtp ? 1 : 0); il++) {
        const model_layer *l = &m->layers[il];
        const tensor *ts[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->ffn_gate, &l->ffn_up, &l->ffn_down,
                              &l->ssm_qkv, &l->ssm_z, &l->ssm_beta, &l->ssm_alpha, &l->ssm_ba, &l->ssm_out,
                              &l->moe_router, &l->moe_gate, &l->moe_up, &l->moe_down, &l->shexp_gate,
                              &l->shexp_up, &l->shexp_down, &l->shexp_router, &l->ssm_in};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
            if (!ts[i]->name) continue;
            size_t b = linear_scratch_bytes(ts[i], n_batch);
            if (b > best) best = b;
        }
    }
    return best;
}

/* (rows, cols) floats, or NULL when cols is 0 (a buffer this model does not use). */
static float *alloc_rows(int64_t rows, int64_t cols, bool *ok) {
    if (cols <= 0) return NULL;
    float *p = eddy_malloc_aligned((size_t)(rows * cols) * sizeof(float), 64);
    *ok = *ok && p != NULL;
    return p;
}

/* n int32, or NULL when n is 0. */
static int32_t *alloc_ints(int64_t n, bool *ok) {
    if (n <= 0) return NULL;
    int32_t *p = eddy_malloc((size_t)n * sizeof(int32_t));
    *ok = *ok && p != NULL;
    return p;
}

static int64_t max3(int64_t a, int64_t b, int64_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }


/* Per-thread scratch: attention's blocks and partials, the chunked scans' buffers. */
static size_t thread_scratch_bytes(const model_hparams *hp, int64_t n_ctx, int n_threads) {
    attn_shape as = {hp->n_head, hp->n_head_kv, hp->head_dim_k, hp->head_dim_v, 1.0f};
    size_t need = hp->n_head > 0 && hp->n_head_kv > 0 ? ops_attention_scratch(&as, n_ctx, n_threads) : 0;
    if (hp->ssm_n_head > 0) {
        mamba2_params mp = {hp->ssm_n_head, hp->ssm_d_inner / hp->ssm_n_head, hp->ssm_n_group, hp->ssm_d_state,
                            NULL, NULL, NULL, 0.0f, 0.0f};
        size_t mb = mamba2_scan_scratch_bytes(&mp, MAMBA2_CHUNK, 1);
        if (mb > need) need = mb;
        if (mamba2_verify_scratch_bytes(&mp) > need) need = mamba2_verify_scratch_bytes(&mp);
    }
    if (hp->ssm_n_v > 0) {
        gdn_params gp = {hp->ssm_n_k, hp->ssm_n_v, hp->ssm_d_k, hp->ssm_d_v, hp->ssm_head_map, 1.0f};
        size_t gb = gdn_chunked_scratch_size(&gp);
        if (gb > need) need = gb;
        if (gdn_verify_scratch_size(&gp) > need) need = gdn_verify_scratch_size(&gp);
    }
    return need;
}

static void free_buffers(engine *c) {
    float *bufs[] = {c->x,     c->xn,    c->mix,   c->qg,    c->q,     c->k,      c->v,      c->attn,
                     c->rope,  c->gdn_qkv, c->gdn_z, c->gdn_b, c->gdn_a, c->gdn_o, c->conv_in, c->ff_a,
                     c->ff_b,  c->router, c->ff_out, c->mb_in, c->gdn_g, c->gdn_beta, c->moe_x, c->moe_w,
                     c->h,     c->mtp_cat, c->mtp_logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) eddy_free_aligned(bufs[i]);
    eddy_free(c->moe_sel);
    eddy_free(c->moe_order);
    eddy_free(c->moe_start);
    eddy_free(c->mtp_tok);
    eddy_free(c->mtp_src);
    eddy_free(c->mtp_writes);
    eddy_free_aligned(c->act);
    eddy_free(c->plan.runs);
    eddy_free(c->plan.pos);
    eddy_free(c->plan.slots);
    eddy_free(c->plan.out);
    eddy_free(c->plan.ckpt_pos);
    eddy_free(c->plan.ckpt_slot);
    eddy_free(c->one_seq);
    eddy_free(c->all_rows);
    eddy_free(c->digest_logits);
    eddy_free(c->plan.ptrs);
    eddy_free(c->mtp_plan.runs);
    eddy_free(c->mtp_plan.pos);
}

static bool alloc_buffers(engine *c) {
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    bool ok = true;
    const int64_t B = c->n_batch, E = hp->n_embd, Q = hp->n_head * hp->head_dim_k;
    const bool gdn = hp->ssm_n_v > 0, mamba = hp->ssm_n_head > 0;
    const int64_t conv_dim = gdn ? model_gdn_conv_dim(hp) : mamba ? mamba2_conv_dim(hp) : 0;
    c->x = alloc_rows(B, E, &ok);
    c->xn = alloc_rows(B, E, &ok);
    c->mix = alloc_rows(B, E, &ok);
    c->qg = alloc_rows(B, hp->attn_gated ? 2 * Q : 0, &ok);
    c->q = alloc_rows(B, Q, &ok);
    c->k = alloc_rows(B, hp->n_head_kv * hp->head_dim_k, &ok);
    c->v = alloc_rows(B, hp->n_head_kv * hp->head_dim_v, &ok);
    c->attn = alloc_rows(B, hp->n_head * hp->head_dim_v, &ok);
    c->rope = alloc_rows(B, hp->n_rot, &ok); /* a table per row: rows go to threads */
    c->gdn_qkv = alloc_rows(B, conv_dim, &ok);
    c->gdn_z = alloc_rows(B, hp->ssm_n_v * hp->ssm_d_v, &ok);
    c->mb_in = alloc_rows(B, mamba ? mamba2_in_dim(hp) : 0, &ok);
    c->gdn_b = alloc_rows(B, 2 * hp->ssm_n_v, &ok);
    c->gdn_a = alloc_rows(B, hp->ssm_n_v, &ok);
    c->gdn_g = alloc_rows(B, hp->ssm_n_v, &ok);
    c->gdn_beta = alloc_rows(B, hp->ssm_n_v, &ok);
    c->gdn_o = alloc_rows(B, gdn ? hp->ssm_n_v * hp->ssm_d_v : hp->ssm_d_inner, &ok);
    c->conv_in = alloc_rows(B, gdn ? model_gdn_conv_dim(hp) : 0, &ok);
    c->ff_a = alloc_rows(B, max3(hp->n_ff, hp->n_ff_exp, hp->n_ff_shexp), &ok);
    c->ff_b = alloc_rows(B, max3(hp->n_ff, hp->n_ff_exp, hp->n_ff_shexp), &ok);
    c->router = alloc_rows(B, hp->n_expert, &ok);
    const int64_t X = hp->n_expert, K = hp->n_expert_used;
    c->ff_out = alloc_rows(B, X ? E : 0, &ok);
    c->moe_x = alloc_rows(B, X ? E : 0, &ok);
    c->moe_w = alloc_rows(B, K, &ok);
    c->moe_sel = alloc_ints(X ? B * K : 0, &ok);
    c->moe_order = alloc_ints(X ? B * K : 0, &ok);
    c->moe_start = alloc_ints(X ? X + 1 : 0, &ok);
    c->act = eddy_malloc_aligned(max_linear_scratch(m, B), 64);
    c->plan.runs = eddy_malloc((size_t)B * sizeof *c->plan.runs);
    c->plan.pos = eddy_malloc((size_t)B * sizeof *c->plan.pos);
    c->plan.slots = eddy_malloc((size_t)B * sizeof *c->plan.slots);
    c->plan.out = eddy_malloc((size_t)B * sizeof *c->plan.out);
    c->plan.ckpt_pos = eddy_malloc((size_t)B * sizeof *c->plan.ckpt_pos);
    c->plan.ckpt_slot = eddy_malloc((size_t)B * sizeof *c->plan.ckpt_slot);
    c->one_seq = eddy_malloc((size_t)B * sizeof *c->one_seq);
    c->all_rows = eddy_malloc((size_t)B);
    if (c->all_rows) memset(c->all_rows, 1, (size_t)B);
    c->plan.ptrs = eddy_malloc((size_t)(2 * B) * sizeof *c->plan.ptrs);
    if (c->mtp) {
        c->h = alloc_rows(B, E, &ok);
        c->mtp_cat = alloc_rows(B, 2 * E, &ok);
        c->mtp_logits = alloc_rows(B < MTP_DRAFT_ROWS ? B : MTP_DRAFT_ROWS, hp->n_vocab, &ok);
        c->mtp_plan.runs = eddy_malloc((size_t)B * sizeof *c->mtp_plan.runs);
        c->mtp_plan.pos = eddy_malloc((size_t)B * sizeof *c->mtp_plan.pos);
        c->mtp_tok = alloc_ints(B, &ok);
        c->mtp_src = alloc_ints(B, &ok);
        c->mtp_writes = alloc_ints(2 * B, &ok);
        ok = ok && c->mtp_plan.runs && c->mtp_plan.pos;
    }
    return ok && c->act && c->plan.runs && c->plan.pos && c->plan.slots && c->plan.out && c->plan.ptrs && c->one_seq &&
           c->plan.ckpt_pos && c->plan.ckpt_slot &&
           c->all_rows;
}

/* ==== Engines ==== */

/* The KV blocks of the snapshot states in a pool on the GPU. The CPU's bound — a whole
 * context each, whose pages cost nothing until they are touched — commits memory on a
 * GPU, where a snapshot shares its sequence's blocks and takes blocks of its own only for
 * what is written after the two parted (a pinned session: what its sequence wrote since):
 * a server with 4 slots of 32,768 positions and 16 pinned sessions would hold 20
 * contexts of keys and values. So they get a whole context each where the pool fits in
 * seven eighths of the free device memory (an eighth stays for the weights' f16 copies
 * and cuBLAS); else what fits there once the slots (slots_bytes: recurrent and row
 * slots) and the sequences' and the prefix cache's blocks are counted, one block each at
 * least. A step that needs more than is free fails with "the KV cache has no free
 * block". */
static int64_t device_snapshot_blocks(const engine *c, size_t free_bytes, double slots_bytes, int64_t n_own_blocks,
                                      size_t block_bytes) {
    const int64_t most = c->n_snap_max * seq_state_n_blocks(c->n_ctx);
    if (block_bytes == 0) return most; /* the GPU's layers keep no KV (a split model's CPU layers may) */
    const double room = (double)free_bytes * 7 / 8;
    const double left = room - slots_bytes - (double)n_own_blocks * (double)block_bytes;
    const double fit = block_bytes && left > 0 ? left / (double)block_bytes : 0;
    int64_t n = fit < (double)most ? (int64_t)fit : most;
    if (n < c->n_snap_max) n = c->n_snap_max;
    if (n < most)
        eddy_log(EDDY_LOG_INFO, "GPU: the snapshot states share %" PRId64 " KV blocks of %d positions (%.1f MiB), "
                 "not %" PRId64 " (a whole context each)", n, STATE_KV_BLOCK,
                 (double)n * (double)block_bytes / (1 << 20), most);
    return n;
}

/* Of the bytes of a recurrent slot, a row slot and a KV block (all layers), the GPU's
 * share: its layers' (c->gpu_from on). */
static void device_share(const engine *c, qtype type_k, qtype type_v, size_t *slot_bytes, size_t *row_bytes,
                         size_t *block_bytes) {
    size_t slot_cpu, row_cpu, block_cpu;
    cache_sizes(c->m, c->gpu_from, type_k, type_v, &slot_cpu, &row_cpu, &block_cpu);
    *slot_bytes -= slot_cpu, *row_bytes -= row_cpu, *block_bytes -= block_cpu;
}

static eddy_status new_state_pool(engine *c, const state_mem *mem, int64_t n_cache_blocks, qtype type_k,
                                  qtype type_v, size_t slot_bytes, size_t row_bytes, size_t block_bytes,
                                  eddy_error *err) {
    if (c->gpu) device_share(c, type_k, type_v, &slot_bytes, &row_bytes, &block_bytes); /* what it commits */
    /* recurrent slots for the sequences, the snapshots (unless host slots hold them) and
     * the prefix cache's entries */
    const int64_t n_host = c->host_snapshots ? c->n_snap_max : 0;
    const int64_t n_states = c->n_seq_max + c->n_snap_max - n_host + c->n_cache_max;
    const model_hparams *hp = &c->m->hp;
    const int64_t n_layers = hp->n_layer + (c->mtp ? 1 : 0); /* the MTP layer's state after the others */
    state_layer_shape *shapes = eddy_calloc((size_t)(n_layers > 0 ? n_layers : 1), sizeof *shapes);
    if (!shapes) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    for (int64_t il = 0; il < n_layers; il++) shapes[il] = model_state_shape(c->m, il);
    const int64_t n_rows = c->n_verify_max;
    /* every sequence and snapshot may hold a whole context of blocks of its own, and
     * the prefix cache as many as its budget pays for: the KV pool never runs out
     * before the slots or the budget do; pages of blocks never used are never touched
     * (on the CPU; on a GPU the snapshots' share is bounded: device_snapshot_blocks) */
    const int64_t own = c->n_seq_max * seq_state_n_blocks(c->n_ctx) + n_cache_blocks;
    const size_t free_before = c->gpu ? cuda_backend_free_bytes(c->gpu) : 0;
    const double slots_bytes = (double)n_states * (double)slot_bytes + (double)n_rows * (double)row_bytes;
    const int64_t n_snap_blocks = c->gpu ? device_snapshot_blocks(c, free_before, slots_bytes, own, block_bytes)
                                         : c->n_snap_max * seq_state_n_blocks(c->n_ctx);
    const int64_t n_blocks = own + n_snap_blocks;
    eddy_status s = n_blocks > INT32_MAX
                        ? eddy_error_set(err, EDDY_ERR_ARG, "%" PRId64 " states of %" PRId64 " positions are too many",
                                         n_states, c->n_ctx)
                        : state_pool_new_in(&c->sp, mem, shapes, n_layers,
                                            &(state_pool_size){n_states, n_rows, n_host, n_blocks, c->gpu_from},
                                            type_k, type_v, err);
    const double pool_bytes = slots_bytes + (double)n_blocks * (double)block_bytes;
    if (s == EDDY_ERR_NOMEM && c->gpu) {
        s = eddy_error_set(err, EDDY_ERR_NOMEM, "cannot allocate %.1f MiB of sequence state on the GPU (%.1f MiB "
                           "free after the weights and buffers): fewer sequences, a shorter context%s or fewer "
                           "snapshot or verify states need less", pool_bytes / (1 << 20),
                           (double)free_before / (1 << 20),
                           n_cache_blocks ? ", a smaller prefix cache (cache_bytes, --cache-ram)" : "");
    }
    eddy_free(shapes);
    if (s == EDDY_OK && c->gpu) /* in bytes: what a test needs to size an emulated GPU */
        eddy_log(EDDY_LOG_INFO, "GPU: the state pool takes %.1f MiB: %" PRId64 " states of %zu bytes, %" PRId64
                 " verify row states of %zu bytes, %" PRId64 " KV blocks of %zu bytes (%" PRId64
                 " the snapshot states'); %zu bytes were free before it; %" PRId64 " snapshot states in host memory "
                 "(%.1f MiB pinned)", pool_bytes / (1 << 20), n_states, slot_bytes, n_rows, row_bytes, n_blocks,
                 block_bytes, n_snap_blocks, free_before, n_host, (double)c->sp->host_bytes / (1 << 20));
    if (s == EDDY_OK && c->n_cache_max) { /* the prefix cache counts the blocks its entries hold */
        c->cache_block_refs = eddy_calloc((size_t)(n_blocks > 0 ? n_blocks : 1), sizeof *c->cache_block_refs);
        if (!c->cache_block_refs) s = eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    }
    return s;
}

void eddy_engine_free(eddy_engine *c) {
    if (!c) return;
    for (int64_t i = 0; c->seqs && i < c->n_seq_max; i++) eddy_seq_free(c->seqs[i]);
    for (int64_t i = 0; c->snaps && i < c->n_snap_max; i++) eddy_snapshot_free(c->snaps[i]);
    eddy_free(c->seqs);
    eddy_free(c->snaps);
    cache_free(c);
    pool_destroy(c->pool);
    state_pool_free(c->sp);
    cuda_backend_free(c->gpu);
    free_buffers(c);
    pthread_mutex_destroy(&c->lock);
    eddy_free(c);
}

eddy_status eddy_engine_new(const eddy_model *m, const eddy_engine_params *p, eddy_engine **out, eddy_error *err) {
    if (!m || !out) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_engine_new: NULL argument");
    *out = NULL;
    eddy_engine_params d = {0};
    if (!p) p = &d;
    const model_hparams *hp = &m->hp;
    int64_t n_ctx = p->n_ctx > 0 ? p->n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    /* a GPU's products and attention fill it only with long steps: 2048 rows there */
    int64_t n_batch = p->n_batch > 0 ? p->n_batch : p->device == EDDY_DEVICE_CUDA ? 2048 : 512;
    if (p->n_ctx < 0 || n_ctx > ((int64_t)1 << 24))
        return eddy_error_set(err, EDDY_ERR_ARG, "context of %" PRId64 " tokens out of range 1..%d", p->n_ctx,
                              1 << 24);
    if (p->n_batch < 0 || n_batch > ((int64_t)1 << 20))
        return eddy_error_set(err, EDDY_ERR_ARG, "batch of %" PRId64 " tokens out of range 1..%d", p->n_batch,
                              1 << 20);
    /* a step holds at most a context for each sequence */
    const int64_t n_seq_rows = n_ctx * (p->n_seq_max > 0 ? p->n_seq_max : 1);
    if (n_batch > n_seq_rows) n_batch = n_seq_rows;
    if (p->n_threads < 0 || p->n_threads > 1024)
        return eddy_error_set(err, EDDY_ERR_ARG, "thread count %d out of range 1..1024", p->n_threads);
    if (p->n_seq_max < 0 || p->n_seq_max > 65536)
        return eddy_error_set(err, EDDY_ERR_ARG, "%d sequences out of range 1..65536", p->n_seq_max);
    if (p->n_snapshots < 0 || p->n_snapshots > 65536)
        return eddy_error_set(err, EDDY_ERR_ARG, "%d snapshot states out of range 0..65536", p->n_snapshots);
    if (p->n_verify < 0 || p->n_verify > 65536)
        return eddy_error_set(err, EDDY_ERR_ARG, "%d verify states out of range 0..65536", p->n_verify);
    if (p->cache_every < 0 || p->cache_every % STATE_KV_BLOCK != 0 || p->cache_every > ((int64_t)1 << 24))
        return eddy_error_set(err, EDDY_ERR_ARG, "cache interval %" PRId64 " is not a multiple of %d in 0..%d",
                              p->cache_every, STATE_KV_BLOCK, 1 << 24);
    if (p->mtp && !m->mtp)
        return eddy_error_set(err, EDDY_ERR_ARG, "the model has no multi-token-prediction layer (its file counts "
                              "no nextn_predict_layers or holds no blk.%" PRId64 ".nextn tensors)", hp->n_layer);
    if (p->device != EDDY_DEVICE_CPU && p->device != EDDY_DEVICE_CUDA)
        return eddy_error_set(err, EDDY_ERR_ARG, "device %d is not an eddy_device", (int)p->device);
    if (p->gpu_layers < 0)
        return eddy_error_set(err, EDDY_ERR_ARG, "%d GPU layers: not a count (0: all of them)", p->gpu_layers);
    int n_threads = p->n_threads > 0 ? p->n_threads : pool_default_threads();
    qtype type_k, type_v;
    if (!kv_qtype(p->type_k, &type_k))
        return eddy_error_set(err, EDDY_ERR_ARG, "key cache type %d is not an eddy_kv_type", (int)p->type_k);
    if (!kv_qtype(p->type_v, &type_v))
        return eddy_error_set(err, EDDY_ERR_ARG, "value cache type %d is not an eddy_kv_type", (int)p->type_v);

    eddy_engine *c = eddy_calloc(1, sizeof *c);
    if (!c) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&c->lock, NULL);
    c->m = m;
    c->n_ctx = n_ctx;
    c->n_batch = n_batch;
    c->n_seq_max = p->n_seq_max > 0 ? p->n_seq_max : 1;
    c->n_snap_max = p->n_snapshots;
    c->n_verify_max = p->n_verify;
    c->host_snapshots = p->host_snapshots && p->device == EDDY_DEVICE_CUDA;
    c->mtp = p->mtp;
    c->mtp_il = hp->n_layer;
    /* the last gpu_layers layers on the GPU, the ones before them on the CPU */
    if (p->device == EDDY_DEVICE_CUDA && p->gpu_layers > 0 && p->gpu_layers < hp->n_layer)
        c->gpu_from = hp->n_layer - p->gpu_layers;
    c->seqs = eddy_calloc((size_t)c->n_seq_max, sizeof *c->seqs);
    c->snaps = eddy_calloc((size_t)(c->n_snap_max > 0 ? c->n_snap_max : 1), sizeof *c->snaps);
    eddy_status s = c->seqs && c->snaps ? pool_create(&c->pool, n_threads, err)
                                        : eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    if (s == EDDY_OK) s = pool_reserve_scratch(c->pool, thread_scratch_bytes(hp, n_ctx, n_threads), err);
    size_t slot_bytes = 0, row_bytes = 0, block_bytes = 0;
    if (s == EDDY_OK) {
        cache_sizes(m, hp->n_layer + (c->mtp ? 1 : 0), type_k, type_v, &slot_bytes, &row_bytes, &block_bytes);
        s = cache_init(c, p->cache_bytes, p->cache_every, slot_bytes, block_bytes, p->device == EDDY_DEVICE_CUDA,
                       err);
    }
    if (s == EDDY_OK && p->cache_dir)
        s = p->cache_bytes ? cache_disk_init(c, p->cache_dir, p->cache_dir_bytes, err)
                           : eddy_error_set(err, EDDY_ERR_ARG, "a prefix cache directory needs a memory budget too "
                                            "(cache_bytes; --cache-ram)");
    const state_mem *mem = NULL; /* host memory */
    if (s == EDDY_OK && p->device == EDDY_DEVICE_CUDA) s = cuda_backend_new(c, &c->gpu, &mem, err);
    for (size_t budget = c->cache_budget; s == EDDY_OK;) {
        s = new_state_pool(c, mem, c->cache_blocks_max, type_k, type_v, slot_bytes, row_bytes, block_bytes, err);
        /* cache_fit: a smaller cache where the pool does not fit on the GPU (the weights
         * stay uploaded); none below 64 MiB, unless a disk tier needs one */
        if (s != EDDY_ERR_NOMEM || !c->gpu || !p->cache_fit || budget == 0) break;
        budget = budget > ((size_t)64 << 20) ? budget / 2 : 0;
        if (budget == 0 && c->cache_dir) break;
        cache_entries_free(c);
        s = cache_init(c, budget, p->cache_every, slot_bytes, block_bytes, true, err);
    }
    if (s == EDDY_OK && !alloc_buffers(c))
        s = eddy_error_set(err, EDDY_ERR_NOMEM, "cannot allocate work buffers for a batch of %" PRId64 " tokens",
                           n_batch);
    if (s != EDDY_OK) {
        eddy_engine_free(c);
        return s;
    }
    *out = c;
    return EDDY_OK;
}

const eddy_model *eddy_engine_model(const eddy_engine *c) { return c->m; }
int64_t eddy_engine_n_ctx(const eddy_engine *c) { return c->n_ctx; }
int eddy_engine_n_threads(const eddy_engine *c) { return pool_size(c->pool); }
int64_t eddy_engine_n_batch(const eddy_engine *c) { return c->n_batch; }
const char *eddy_engine_device_name(const eddy_engine *c) { return c->gpu ? cuda_backend_name(c->gpu) : "cpu"; }
size_t eddy_engine_state_bytes(const eddy_engine *c) { return state_slot_bytes(c->sp); }
size_t eddy_engine_kv_bytes_per_pos(const eddy_engine *c) { return state_block_bytes(c->sp) / STATE_KV_BLOCK; }
size_t eddy_engine_row_bytes(const eddy_engine *c) { return state_row_bytes(c->sp); }

void eddy_engine_set_abort(eddy_engine *c, int (*cb)(void *user), void *user) {
    pthread_mutex_lock(&c->lock);
    c->abort_cb = cb;
    c->abort_user = user;
    pthread_mutex_unlock(&c->lock);
}
