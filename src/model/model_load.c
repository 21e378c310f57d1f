/*
 * model_load.c — from a GGUF file to a model: the architecture table, the checked
 * readers of hyperparameters and tensors that every architecture's loader uses, and
 * the pieces they share (attention, dense feed-forward, embeddings).
 *
 * Every value read from the file is checked before use: a missing key, a value out
 * of range, a missing tensor, a tensor of the wrong shape or of a type eddy cannot
 * compute with each give one line naming it (`tensor blk.3.attn_q.weight: expected
 * shape [256, 256], file has [256, 128]`). The model loads the file's vocabulary too
 * and holds it to one size with the embedding (see "Vocabulary" below).
 */
#define _DEFAULT_SOURCE /* madvise */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/env.h"
#include "base/log.h"
#include "ops/matmul.h"
#include "model/model_loader.h"
#include "ssm/ssm.h"
#include "quant/quant.h"

/* ==== Architectures ==== */

static const struct {
    const char *name;
    void (*load)(loader *L);
} archs[ARCH_COUNT] = {
    [ARCH_LLAMA] = {"llama", load_llama},
    [ARCH_QWEN35] = {"qwen35", load_qwen},
    [ARCH_QWEN35MOE] = {"qwen35moe", load_qwen},
    [ARCH_QWEN3NEXT] = {"qwen3next", load_qwen},
    [ARCH_MAMBA2] = {"mamba2", load_mamba2},
    [ARCH_NEMOTRON_H] = {"nemotron_h", load_nemotron_h},
    [ARCH_GRANITEHYBRID] = {"granitehybrid", load_granitehybrid},
};

/* Architectures eddy knows of but cannot run yet, for a helpful refusal. */
static const char *const planned_archs[] = {"nemotron_h_moe", "granite", "granitemoe"};

/* ==== Errors ==== */

bool loader_fail(loader *L, const char *fmt, ...) {
    if (L->status != EDDY_OK) return false;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    L->status = eddy_error_set(L->err, EDDY_ERR_FORMAT, "%s: %s", L->m->file->path, msg);
    return false;
}

bool loader_nomem(loader *L, const char *what) {
    if (L->status == EDDY_OK) L->status = eddy_error_set(L->err, EDDY_ERR_NOMEM, "out of memory for %s", what);
    return false;
}

/* ==== Hyperparameters ==== */

int64_t hp_int(loader *L, const char *key, int64_t def, int64_t lo, int64_t hi) {
    char full[128];
    snprintf(full, sizeof full, "%s%s", L->prefix, key);
    const gguf_value *v = gguf_get(L->m->file, full);
    if (!v) {
        if (def < 0) loader_fail(L, "metadata key %s is missing", full);
        return def;
    }
    if (!gguf_type_is_int(v->type)) {
        loader_fail(L, "metadata key %s has type %s, expected an integer", full, gguf_type_name(v->type));
        return def;
    }
    int64_t x = gguf_get_int(L->m->file, full, INT64_MIN);
    if (x == INT64_MIN || x < lo || x > hi) {
        loader_fail(L, "metadata key %s is out of range %" PRId64 "..%" PRId64, full, lo, hi);
        return def;
    }
    return x;
}

double hp_float(loader *L, const char *key, double def, double lo, double hi) {
    char full[128];
    snprintf(full, sizeof full, "%s%s", L->prefix, key);
    const gguf_value *v = gguf_get(L->m->file, full);
    if (!v) return def;
    double x = gguf_get_float(L->m->file, full, NAN);
    if (!(x >= lo && x <= hi)) {
        loader_fail(L, "metadata key %s = %g is out of range %g..%g", full, x, lo, hi);
        return def;
    }
    return x;
}

const gguf_value *hp_array(loader *L, const char *key) {
    char full[128];
    snprintf(full, sizeof full, "%s%s", L->prefix, key);
    return gguf_get_array(L->m->file, full, GGUF_TYPE_COUNT);
}

/* Value for layer il of a key written either per layer (an array) or once (a scalar). */
int64_t hp_layer_int(loader *L, const char *key, int il, int64_t hi) {
    const gguf_value *arr = hp_array(L, key);
    if (!arr) return hp_int(L, key, -1, 0, hi);
    if (!gguf_type_is_int(arr->arr.elem_type)) {
        loader_fail(L, "%s%s holds %s, expected integers", L->prefix, key, gguf_type_name(arr->arr.elem_type));
        return 0;
    }
    if ((int64_t)arr->arr.n < L->m->hp.n_layer) {
        loader_fail(L, "%s%s has %" PRIu64 " entries for %" PRId64 " layers", L->prefix, key, arr->arr.n,
                    L->m->hp.n_layer);
        return 0;
    }
    int64_t v = gguf_arr_int(arr, (uint64_t)il);
    if (v < 0 || v > hi) {
        loader_fail(L, "%s%s[%d] = %" PRId64 " is out of range 0..%" PRId64, L->prefix, key, il, v, hi);
        return 0;
    }
    return v;
}

/* Keeps the first nonzero value seen for a size that must be the same in every layer
 * that has it (eddy sizes its buffers and caches once per model). */
void hp_same_in_layers(loader *L, int64_t *kept, int64_t v, const char *key, int il) {
    if (v == 0 || L->status != EDDY_OK) return;
    if (*kept == 0) *kept = v;
    else if (*kept != v)
        loader_fail(L, "%s%s[%d] = %" PRId64 " differs from an earlier layer's %" PRId64
                    " (per-layer sizes are not supported)", L->prefix, key, il, v, *kept);
}

/* ==== Tensors ==== */

static void format_shape(char *buf, size_t n, const int64_t *ne, int n_dims) {
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < n_dims && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, "%s%" PRId64, d ? ", " : "", ne[d]);
    if (len < n) snprintf(buf + len, n - len, "]");
}

static bool bind_typed(loader *L, tensor *t, bool required, bool need_f32, int n_dims, const int64_t *ne,
                       const char *fmt, int layer) {
    memset(t, 0, sizeof *t);
    if (L->status != EDDY_OK) return false;
    char name[GGUF_MAX_NAME + 1];
    snprintf(name, sizeof name, fmt, layer);
    int64_t i = gguf_find_tensor(L->m->file, name);
    if (i < 0) return required ? loader_fail(L, "tensor %s is missing", name) : true;
    const gguf_tensor *g = &L->m->file->tensors[i];
    bool same = true;
    for (int d = 0; d < 4; d++) same &= g->ne[d] == (d < n_dims ? ne[d] : 1);
    if (!same) {
        char want[96], have[96];
        format_shape(want, sizeof want, ne, n_dims);
        format_shape(have, sizeof have, g->ne, g->n_dims);
        return loader_fail(L, "tensor %s: expected shape %s, file has %s", name, want, have);
    }
    const qtype_traits *tt = qtype_info(g->type);
    if (need_f32 && g->type != QTYPE_F32) return loader_fail(L, "tensor %s has type %s, expected F32", name, tt->name);
    if (!tt->supported) return loader_fail(L, "tensor %s has type %s, which eddy does not support yet", name, tt->name);
    t->name = g->name;
    t->type = g->type;
    for (int d = 0; d < 4; d++) t->ne[d] = g->ne[d];
    EDDY_ASSERT(qtype_row_bytes(g->type, g->ne[0], &t->row_bytes));
    t->data = g->data;
    return true;
}

bool bind(loader *L, tensor *t, bool required, int n_dims, const int64_t *ne, const char *fmt, int layer) {
    return bind_typed(L, t, required, false, n_dims, ne, fmt, layer);
}

bool bind_f32(loader *L, tensor *t, bool required, int n_dims, const int64_t *ne, const char *fmt, int layer) {
    return bind_typed(L, t, required, true, n_dims, ne, fmt, layer);
}

void tensor_row_f32(const tensor *t, int64_t row, float *dst) {
    EDDY_ASSERT(row >= 0 && row < t->ne[1] * t->ne[2] * t->ne[3]);
    dequantize_row_ref((qtype)t->type, t->data + (size_t)row * t->row_bytes, dst, t->ne[0]);
}

tensor tensor_expert(const tensor *t, int64_t e) {
    EDDY_ASSERT(e >= 0 && e < t->ne[2] && t->ne[3] == 1);
    tensor v = *t;
    v.ne[2] = 1;
    v.data = t->data + (size_t)e * (size_t)t->ne[1] * t->row_bytes;
    return v;
}

/* ==== Shared parts ==== */

void load_common(loader *L) {
    model *m = L->m;
    model_hparams *hp = &m->hp;
    const int64_t big = (int64_t)1 << 24;
    hp->n_embd = hp_int(L, "embedding_length", -1, 1, big);
    hp->n_layer = hp_int(L, "block_count", -1, 1, 4096);
    /* block_count includes the multi-token-prediction (nextn) layers that follow the
     * main stack; the main forward pass leaves them out (qwen files bind the first as
     * m->mtp) */
    hp->n_layer -= load_n_mtp(L);
    hp->n_head = hp_int(L, "attention.head_count", -1, 1, 4096);
    hp->n_head_kv = hp_int(L, "attention.head_count_kv", hp->n_head, 1, hp->n_head > 0 ? hp->n_head : 1);
    hp->n_ctx_train = hp_int(L, "context_length", 4096, 1, (int64_t)1 << 32);
    if (L->status != EDDY_OK) return;
    if (hp->n_head % hp->n_head_kv != 0)
        loader_fail(L, "%sattention.head_count %" PRId64 " is not a multiple of head_count_kv %" PRId64, L->prefix,
                    hp->n_head, hp->n_head_kv);
    hp->head_dim_k = hp_int(L, "attention.key_length", hp->n_embd / hp->n_head, 1, 4096);
    hp->head_dim_v = hp_int(L, "attention.value_length", hp->head_dim_k, 1, 4096);
    hp->n_rot = hp_int(L, "rope.dimension_count", hp->head_dim_k, 2, hp->head_dim_k);
    if (hp->n_rot % 2) loader_fail(L, "%srope.dimension_count %" PRId64 " is odd", L->prefix, hp->n_rot);
    hp->rope_base = (float)hp_float(L, "rope.freq_base", 10000.0, 1.0, 1e12);
    hp->rms_eps = (float)hp_float(L, "attention.layer_norm_rms_epsilon", 1e-5, 0.0, 1.0);
    char key[128];
    snprintf(key, sizeof key, "%srope.scaling.type", L->prefix);
    const char *scaling = gguf_get_str(m->file, key, "none");
    if (strcmp(scaling, "none") != 0) loader_fail(L, "rope scaling \"%s\" (%s) is not supported yet", scaling, key);
    load_embeddings(L);
}

int64_t load_n_mtp(loader *L) {
    const int64_t n = L->m->hp.n_layer;
    return hp_int(L, "nextn_predict_layers", 0, 0, n > 0 ? n - 1 : 0);
}

int64_t load_n_mtp_file(loader *L) { return hp_int(L, "nextn_predict_layers", 0, 0, 4096); }

void load_embeddings(loader *L) {
    model *m = L->m;
    model_hparams *hp = &m->hp;
    if (L->status != EDDY_OK) return;
    /* the vocabulary size comes from the embedding matrix */
    int64_t ie = gguf_find_tensor(m->file, "token_embd.weight");
    if (ie < 0) {
        loader_fail(L, "tensor token_embd.weight is missing");
        return;
    }
    hp->n_vocab = m->file->tensors[ie].ne[1];
    const int64_t E = hp->n_embd;
    bind(L, &m->tok_embd, true, 2, (int64_t[]){E, hp->n_vocab}, "token_embd.weight", 0);
    bind_f32(L, &m->output_norm, true, 1, (int64_t[]){E}, "output_norm.weight", 0);
    bind(L, &m->output, false, 2, (int64_t[]){E, hp->n_vocab}, "output.weight", 0);
    if (L->status == EDDY_OK && !m->output.name) m->output = m->tok_embd; /* tied embeddings */

    m->layers = eddy_calloc((size_t)hp->n_layer + 1, sizeof *m->layers); /* and room for an MTP layer */
    if (!m->layers) loader_nomem(L, "layers");
}

void bind_attention(loader *L, model_layer *l, int il, bool qk_norm) {
    const model_hparams *hp = &L->m->hp;
    const int64_t E = hp->n_embd, Q = hp->n_head * hp->head_dim_k * (hp->attn_gated ? 2 : 1);
    const int64_t K = hp->n_head_kv * hp->head_dim_k, V = hp->n_head_kv * hp->head_dim_v;
    l->mixer = MIXER_ATTENTION;
    bind(L, &l->wq, true, 2, (int64_t[]){E, Q}, "blk.%d.attn_q.weight", il);
    bind(L, &l->wk, true, 2, (int64_t[]){E, K}, "blk.%d.attn_k.weight", il);
    bind(L, &l->wv, true, 2, (int64_t[]){E, V}, "blk.%d.attn_v.weight", il);
    bind(L, &l->wo, true, 2, (int64_t[]){hp->n_head * hp->head_dim_v, E}, "blk.%d.attn_output.weight", il);
    if (qk_norm) {
        bind_f32(L, &l->q_norm, true, 1, (int64_t[]){hp->head_dim_k}, "blk.%d.attn_q_norm.weight", il);
        bind_f32(L, &l->k_norm, true, 1, (int64_t[]){hp->head_dim_k}, "blk.%d.attn_k_norm.weight", il);
    }
}

void bind_ffn_dense(loader *L, model_layer *l, int il, const char *norm_name) {
    const int64_t E = L->m->hp.n_embd, F = L->m->hp.n_ff;
    l->ffn = FFN_DENSE;
    bind_f32(L, &l->ffn_norm, true, 1, (int64_t[]){E}, norm_name, il);
    bind(L, &l->ffn_gate, true, 2, (int64_t[]){E, F}, "blk.%d.ffn_gate.weight", il);
    bind(L, &l->ffn_up, true, 2, (int64_t[]){E, F}, "blk.%d.ffn_up.weight", il);
    bind(L, &l->ffn_down, true, 2, (int64_t[]){F, E}, "blk.%d.ffn_down.weight", il);
}

void bind_ffn_moe(loader *L, model_layer *l, int il, const char *norm_name) {
    const model_hparams *hp = &L->m->hp;
    const int64_t E = hp->n_embd, X = hp->n_expert, F = hp->n_ff_exp, S = hp->n_ff_shexp;
    l->ffn = FFN_MOE;
    bind_f32(L, &l->ffn_norm, true, 1, (int64_t[]){E}, norm_name, il);
    bind(L, &l->moe_router, true, 2, (int64_t[]){E, X}, "blk.%d.ffn_gate_inp.weight", il);
    bind(L, &l->moe_gate, true, 3, (int64_t[]){E, F, X}, "blk.%d.ffn_gate_exps.weight", il);
    bind(L, &l->moe_up, true, 3, (int64_t[]){E, F, X}, "blk.%d.ffn_up_exps.weight", il);
    bind(L, &l->moe_down, true, 3, (int64_t[]){F, E, X}, "blk.%d.ffn_down_exps.weight", il);
    if (S > 0) {
        bind(L, &l->shexp_gate, true, 2, (int64_t[]){E, S}, "blk.%d.ffn_gate_shexp.weight", il);
        bind(L, &l->shexp_up, true, 2, (int64_t[]){E, S}, "blk.%d.ffn_up_shexp.weight", il);
        bind(L, &l->shexp_down, true, 2, (int64_t[]){S, E}, "blk.%d.ffn_down_shexp.weight", il);
        bind(L, &l->shexp_router, false, 2, (int64_t[]){E, 1}, "blk.%d.ffn_gate_inp_shexp.weight", il);
    }
}

int64_t model_gdn_conv_dim(const model_hparams *hp) { return 2 * hp->ssm_n_k * hp->ssm_d_k + hp->ssm_n_v * hp->ssm_d_v; }

int64_t mamba2_conv_dim(const model_hparams *hp) { return hp->ssm_d_inner + 2 * hp->ssm_n_group * hp->ssm_d_state; }
int64_t mamba2_in_dim(const model_hparams *hp) { return hp->ssm_d_inner + mamba2_conv_dim(hp) + hp->ssm_n_head; }

/* ==== Entry ==== */

/* ==== Vocabulary ==== */

/* The vocabulary rule: a file with a tokenizer (tokenizer.ggml.model or .tokens) must
 * list exactly one token per row of token_embd, so that token ids, logits rows and the
 * sampler all have one size, n_vocab. llama.cpp's converter pads the token list of a
 * model whose embedding has spare rows with [PAD] tokens, so real files satisfy it; a
 * file that does not is refused naming both sizes. */
static void load_vocab(loader *L) {
    model *m = L->m;
    const gguf_value *tokens = gguf_get(m->file, "tokenizer.ggml.tokens");
    if (L->status != EDDY_OK || (!tokens && !gguf_get(m->file, "tokenizer.ggml.model"))) return;
    if (tokens && tokens->type == GGUF_TYPE_ARRAY && (int64_t)tokens->arr.n != m->hp.n_vocab) {
        loader_fail(L, "tokenizer.ggml.tokens has %" PRIu64 " entries, token_embd.weight has %" PRId64
                    " rows (the vocabulary and the embedding must have the same size)", tokens->arr.n, m->hp.n_vocab);
        return;
    }
    eddy_error verr;
    eddy_status s = eddy_vocab_load(m->file, &m->vocab, &verr);
    if (s == EDDY_ERR_NOT_FOUND) s = EDDY_ERR_FORMAT; /* tokenizer.ggml.tokens without tokenizer.ggml.model */
    if (s != EDDY_OK) L->status = eddy_error_set(L->err, s, "%s: %s", m->file->path, verr.msg);
    else EDDY_ASSERT(eddy_vocab_n_tokens(m->vocab) == m->hp.n_vocab);
}

const eddy_vocab *eddy_model_vocab(const eddy_model *m) { return m ? m->vocab : NULL; }

/* ==== Packed weights ==== */

/* The tensors linear() reads, NULL-terminated into out (room for 17 per layer, the MTP
 * layer's among them, + 4). The
 * output head is one of them even when it is the token embedding: the packed copy
 * serves the head, while the embedding look-up keeps reading the file's rows (their
 * pages dropped below come back one row's page at a time, for the tokens looked up). */
static int64_t linear_tensors(model *m, tensor **out) {
    int64_t n = 0;
    for (int64_t il = 0; il < m->hp.n_layer + (m->mtp ? 1 : 0); il++) {
        model_layer *l = &m->layers[il];
        tensor *ts[] = {&l->wq,      &l->wk,      &l->wv,        &l->wo,         &l->ssm_qkv,    &l->ssm_z,
                        &l->ssm_beta, &l->ssm_alpha, &l->ssm_ba, &l->ssm_out,   &l->ssm_in,     &l->ffn_gate,
                        &l->ffn_up,  &l->ffn_down, &l->shexp_gate, &l->shexp_up, &l->shexp_down};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
            if (ts[i]->name && ts[i]->ne[2] == 1 && ts[i]->ne[3] == 1) out[n++] = ts[i];
    }
    if (m->output.name) out[n++] = &m->output;
    if (m->mtp) {
        out[n++] = &m->mtp_eh_proj;
        if (m->mtp_head.data != m->output.data) out[n++] = &m->mtp_head;
    }
    out[n] = NULL;
    return n;
}

/* Drops the whole pages of [p, p + bytes) of a mapped file from this process. */
static void drop_pages(const void *p, size_t bytes, long page) {
    const uintptr_t b = ((uintptr_t)p + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
    const uintptr_t e = ((uintptr_t)p + bytes) / (uintptr_t)page * (uintptr_t)page;
    if (e > b) (void)madvise((void *)b, e - b, MADV_DONTNEED);
}

/* Packs t into dst (matmul_pack_bytes of it) a slice of rows at a time, dropping each
 * slice's original pages once it is packed (page > 0), so that at no time are both
 * copies of more than one slice resident. */
static void pack_tensor(tensor *t, uint8_t *dst, long page) {
    matmul_weight w;
    EDDY_ASSERT(matmul_weight_init(&w, t->type, t->ne[0], t->ne[1], t->data));
    const size_t group_bytes = matmul_pack_bytes(&w) / (size_t)((w.n_out + 15) / 16);
    const int64_t slice = 1024; /* rows: a multiple of the 16-row group */
    for (int64_t r0 = 0; r0 < w.n_out; r0 += slice) {
        matmul_weight ws = w;
        ws.n_out = w.n_out - r0 < slice ? w.n_out - r0 : slice;
        ws.data = (const uint8_t *)w.data + (size_t)r0 * w.row_bytes;
        matmul_pack(&ws, dst + (size_t)(r0 / 16) * group_bytes);
        if (page > 0) drop_pages(ws.data, (size_t)ws.n_out * w.row_bytes, page);
    }
    t->packed = dst;
}

/* Repacks every linear() weight this CPU has a packed kernel for (matmul_pack_bytes)
 * into one private allocation, and, when the file is memory-mapped, drops the pages of
 * the originals from this process (madvise MADV_DONTNEED on the read-only private file
 * mapping: the memory is not doubled, and a page read again later, e.g. by matmul_ref,
 * comes back from the file). Without memory, or with EDDY_NO_PACK=1, nothing is packed
 * and the row kernels run as before. */
static void pack_weights(loader *L) {
    model *m = L->m;
    if (env_flag("EDDY_NO_PACK") || m->hp.n_layer < 0) return;
    tensor **ts = eddy_malloc(sizeof(tensor *) * (size_t)(17 * (m->hp.n_layer + 1) + 4));
    if (!ts) return;
    const int64_t n = linear_tensors(m, ts);
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        matmul_weight w;
        if (!matmul_weight_init(&w, ts[i]->type, ts[i]->ne[0], ts[i]->ne[1], ts[i]->data)) continue;
        const size_t b = (matmul_pack_bytes(&w) + 63) / 64 * 64;
        if (b > SIZE_MAX - total) {
            eddy_free(ts);
            return;
        }
        total += b;
    }
    if (total) m->packed = eddy_malloc_big(total);
    if (!m->packed) {
        if (total) LOG_WARN("not enough memory to repack the weights (%zu MiB): using them as they are", total >> 20);
        eddy_free(ts);
        return;
    }
    m->packed_bytes = total;
    const long page = sysconf(_SC_PAGESIZE);
    size_t at = 0;
    int64_t n_packed = 0;
    for (int64_t i = 0; i < n; i++) {
        matmul_weight w;
        if (!matmul_weight_init(&w, ts[i]->type, ts[i]->ne[0], ts[i]->ne[1], ts[i]->data)) continue;
        const size_t b = matmul_pack_bytes(&w);
        if (!b) continue;
        pack_tensor(ts[i], m->packed + at, m->file->map.mapped ? page : 0);
        at += (b + 63) / 64 * 64;
        n_packed++;
    }
    LOG_INFO("repacked %" PRId64 " weight tensors for the matrix kernels (%.1f MiB)%s", n_packed,
             (double)total / (1 << 20), m->file->map.mapped ? ", their mapped pages dropped" : "");
    eddy_free(ts);
}

/* ==== Entry ==== */

eddy_status model_load(model **out, const char *path, eddy_error *err) {
    *out = NULL;
    gguf_file *f;
    eddy_status s = gguf_open(&f, path, err);
    return s == EDDY_OK ? model_load_gguf(out, f, err) : s;
}

eddy_status model_load_gguf(model **out, gguf_file *f, eddy_error *err) {
    *out = NULL;
    model *m = eddy_calloc(1, sizeof *m);
    if (!m) {
        gguf_close(f);
        return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    }
    m->file = f;
    const char *path = f->path;
    eddy_status s;
    const char *arch = gguf_get_str(m->file, "general.architecture", NULL);
    if (!arch) {
        s = eddy_error_set(err, EDDY_ERR_FORMAT, "%s: metadata key general.architecture is missing", path);
        model_free(m);
        return s;
    }
    m->arch = ARCH_COUNT;
    for (int a = 0; a < ARCH_COUNT; a++)
        if (!strcmp(arch, archs[a].name)) m->arch = (model_arch)a;
    if (m->arch == ARCH_COUNT) {
        bool planned = false;
        for (size_t i = 0; i < sizeof planned_archs / sizeof planned_archs[0]; i++)
            planned |= !strcmp(arch, planned_archs[i]);
        s = eddy_error_set(err, EDDY_ERR_UNSUPPORTED, "%s: architecture \"%s\" is not supported%s", path, arch,
                           planned ? " yet" : "");
        model_free(m);
        return s;
    }
    m->arch_name = archs[m->arch].name;
    loader L = {.m = m, .err = err};
    snprintf(L.prefix, sizeof L.prefix, "%s.", arch);
    m->hp.embd_scale = m->hp.residual_scale = m->hp.logit_scale = 1.0f;
    archs[m->arch].load(&L);
    for (int64_t il = 0; il < m->hp.n_layer && L.status == EDDY_OK; il++) {
        model_layer *l = &m->layers[il];
        if (!l->ssm_conv.name) continue;
        const int64_t K = l->ssm_conv.ne[0], conv_dim = l->ssm_conv.ne[1];
        l->conv_w = eddy_malloc((size_t)(K * conv_dim) * sizeof(float));
        if (!l->conv_w) loader_nomem(&L, "conv weights");
        else conv1d_pack_weights((const float *)l->ssm_conv.data, conv_dim, (int)K, l->conv_w);
    }
    load_vocab(&L);
    if (L.status != EDDY_OK) {
        model_free(m);
        return L.status;
    }
    pack_weights(&L);
    if (m->mtp && m->mtp_head.data == m->output.data) m->mtp_head = m->output; /* its packed copy too */
    *out = m;
    return EDDY_OK;
}

void model_free(model *m) {
    if (!m) return;
    for (int64_t il = 0; m->layers && il < m->hp.n_layer; il++) eddy_free(m->layers[il].conv_w);
    eddy_free(m->layers);
    eddy_free_aligned(m->packed);
    eddy_vocab_free(m->vocab);
    gguf_close(m->file);
    eddy_free(m);
}
