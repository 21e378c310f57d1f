/*
 * test_model_footprint.c — the bytes one decode step reads (eddy_model_decode_bytes),
 * checked on the tiny models against a count made here from the file alone: the
 * tensor table (eddy_gguf_tensor_info) and tensor shapes, not the model's hyperparameters.
 */
#include "test.h"

#include <stdlib.h>

#include "eddy.h"
#include "gguf/gguf.h"

/* ==== The count from the file ==== */

static int64_t find(const eddy_gguf *f, const char *fmt, int64_t il, eddy_tensor_info *out) {
    char name[128];
    snprintf(name, sizeof name, fmt, (int)il);
    int64_t i = eddy_gguf_find_tensor(f, name);
    if (i >= 0) eddy_gguf_tensor_info(f, i, out);
    return i;
}

/* Weights: the sum of every tensor's bytes, but one row of token_embd.weight (ne[1]
 * rows), plus the whole table again when there is no output.weight (tied), and
 * expert_used_count of the expert_count experts of each *_exps tensor. */
static uint64_t file_weight_bytes(const eddy_gguf *f) {
    const char *arch = eddy_gguf_get_str(f, "general.architecture", "");
    char key[128];
    snprintf(key, sizeof key, "%s.expert_used_count", arch);
    const uint64_t used = (uint64_t)eddy_gguf_get_int(f, key, 0);
    snprintf(key, sizeof key, "%s.expert_count", arch);
    const uint64_t count = (uint64_t)eddy_gguf_get_int(f, key, 0);
    uint64_t sum = 0;
    for (int64_t i = 0; i < eddy_gguf_n_tensors(f); i++) {
        eddy_tensor_info t;
        eddy_gguf_tensor_info(f, i, &t);
        if (!strcmp(t.name, "token_embd.weight")) {
            sum += t.n_bytes / (uint64_t)t.ne[1];
            if (eddy_gguf_find_tensor(f, "output.weight") < 0) sum += t.n_bytes;
        } else if (strstr(t.name, "_exps.weight")) {
            sum += t.n_bytes / count * used;
        } else {
            sum += t.n_bytes;
        }
    }
    return sum;
}

/* State: a layer with blk.N.ssm_conv1d.weight ([K, channels]) is recurrent and keeps
 * K - 1 conv inputs of `channels` floats plus a state of ssm.state_size x (the
 * out-projection's input width: n_v * d_v for Gated DeltaNet, d_inner for Mamba-2)
 * floats, read and written each token. KV: a layer with attn_k/attn_v holds one key
 * row (attn_k's output width) and one value row per position, float32. */
static void file_state_bytes(const eddy_gguf *f, uint64_t *state, uint64_t *kv) {
    const char *arch = eddy_gguf_get_str(f, "general.architecture", "");
    char key[128];
    snprintf(key, sizeof key, "%s.block_count", arch);
    const int64_t n_layer = eddy_gguf_get_int(f, key, 0);
    snprintf(key, sizeof key, "%s.ssm.state_size", arch);
    const uint64_t d_state = (uint64_t)eddy_gguf_get_int(f, key, 0);
    *state = *kv = 0;
    for (int64_t il = 0; il < n_layer; il++) {
        eddy_tensor_info conv, out, k, v;
        if (find(f, "blk.%d.ssm_conv1d.weight", il, &conv) >= 0 && find(f, "blk.%d.ssm_out.weight", il, &out) >= 0) {
            uint64_t floats = (uint64_t)((conv.ne[0] - 1) * conv.ne[1]) + d_state * (uint64_t)out.ne[0];
            *state += 2 * 4 * floats;
        }
        if (find(f, "blk.%d.attn_k.weight", il, &k) >= 0 && find(f, "blk.%d.attn_v.weight", il, &v) >= 0)
            *kv += 4 * (uint64_t)(k.ne[1] + v.ne[1]);
    }
}

/* ==== Tests ==== */

static void check_model(const char *file, bool recurrent, bool attention) {
    eddy_model *m;
    eddy_error err;
    if (!CHECKF(eddy_model_load(test_data_path(file), &m, &err) == EDDY_OK, "%s", err.msg)) return;
    const eddy_gguf *f = eddy_model_gguf(m);
    eddy_decode_bytes got;
    eddy_model_decode_bytes(m, &got);
    uint64_t state, kv;
    file_state_bytes(f, &state, &kv);
    CHECKF(got.weights == file_weight_bytes(f), "%s: weights %llu, file count %llu", file,
           (unsigned long long)got.weights, (unsigned long long)file_weight_bytes(f));
    CHECKF(got.state == state, "%s: state %llu, file count %llu", file, (unsigned long long)got.state,
           (unsigned long long)state);
    CHECKF(got.kv_per_pos == kv, "%s: kv %llu, file count %llu", file, (unsigned long long)got.kv_per_pos,
           (unsigned long long)kv);
    CHECKF((got.state > 0) == recurrent && (got.kv_per_pos > 0) == attention, "%s: state %llu, kv %llu", file,
           (unsigned long long)got.state, (unsigned long long)got.kv_per_pos);
    eddy_model_free(m);
}

/* qwen35 and mamba2 tie the output to the embedding, llama and qwen35moe do not;
 * qwen35moe and qwen3next have experts (2 of 8 per token). */
TEST(model_decode_bytes_match_the_file) {
    check_model("models/llama-tiny-q8_0.gguf", false, true);
    check_model("models/llama-tiny-f32.gguf", false, true);
    check_model("models/qwen35-tiny-q8_0.gguf", true, true);
    check_model("models/qwen35-tiny-q4_k_m.gguf", true, true);
    check_model("models/qwen35moe-tiny-q8_0.gguf", true, true);
    check_model("models/qwen3next-tiny-q4_k_m.gguf", true, true);
    check_model("models/mamba2-tiny-q8_0.gguf", true, false);
}

/* A worked case, summed by hand from `eddy inspect` of llama-tiny-q8_0.gguf (2 layers,
 * n_embd 64, 2 kv heads of 16, vocabulary 512, output not tied): the file's tensors
 * total 149248 bytes, of which token_embd.weight is 34816 (512 rows of 68); a step reads
 * all but 511 of its rows. KV per position: 2 layers x (32 + 32) floats x 4 bytes. */
TEST(model_decode_bytes_llama_by_hand) {
    eddy_model *m;
    eddy_error err;
    REQUIRE(eddy_model_load(test_data_path("models/llama-tiny-q8_0.gguf"), &m, &err) == EDDY_OK);
    eddy_decode_bytes b;
    eddy_model_decode_bytes(m, &b);
    uint64_t total = 0;
    for (int64_t i = 0; i < eddy_gguf_n_tensors(eddy_model_gguf(m)); i++) {
        eddy_tensor_info t;
        eddy_gguf_tensor_info(eddy_model_gguf(m), i, &t);
        total += t.n_bytes;
    }
    CHECK_EQ(total, 149248);
    CHECK_EQ(b.weights, 149248 - 34816 + 68);
    CHECK_EQ(b.state, 0);
    CHECK_EQ(b.kv_per_pos, 2 * (32 + 32) * 4);
    eddy_model_free(m);
}

/* Layers past the main stack (multi-token prediction, nextn_predict_layers) are not
 * read by a decode step: a copy of qwen35-tiny with a fifth layer (a copy of the
 * fourth's tensors) counted as nextn reads exactly what the original reads. */
TEST(model_decode_bytes_leave_out_nextn_layers) {
    gguf_file *f;
    REQUIRE(gguf_open(&f, test_data_path("models/qwen35-tiny-f32.gguf"), NULL) == EDDY_OK);
    gguf_writer *w = gguf_writer_new(3, 32);
    gguf_writer_add_uint(w, "qwen35.block_count", GGUF_TYPE_UINT32, 5);
    gguf_writer_add_uint(w, "qwen35.nextn_predict_layers", GGUF_TYPE_UINT32, 1);
    for (int64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        if (strcmp(kv->key, "qwen35.block_count") != 0) gguf_writer_add_value(w, kv->key, &kv->val);
    }
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
        if (!strncmp(t->name, "blk.3.", 6)) {
            char name[256];
            snprintf(name, sizeof name, "blk.4.%s", t->name + 6);
            gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data);
        }
    }
    const char *path = test_tmp_path("nextn-bytes.gguf");
    eddy_status s = gguf_writer_write_file(w, path, NULL);
    gguf_writer_free(w);
    gguf_close(f);
    REQUIRE(s == EDDY_OK);
    eddy_model *m0, *m1;
    eddy_error err;
    REQUIRE(eddy_model_load(test_data_path("models/qwen35-tiny-f32.gguf"), &m0, &err) == EDDY_OK);
    if (CHECKF(eddy_model_load(path, &m1, &err) == EDDY_OK, "%s", err.msg)) {
        eddy_decode_bytes b0, b1;
        eddy_model_decode_bytes(m0, &b0);
        eddy_model_decode_bytes(m1, &b1);
        CHECK_EQ(b1.weights, b0.weights);
        CHECK_EQ(b1.state, b0.state);
        CHECK_EQ(b1.kv_per_pos, b0.kv_per_pos);
        eddy_model_free(m1);
    }
    eddy_model_free(m0);
}
