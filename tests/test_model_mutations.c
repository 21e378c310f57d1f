/*
 * test_model_mutations.c — damaged model files and scarce memory, through the public
 * API: the vocabulary rule (tokenizer.ggml.tokens has one entry per row of
 * token_embd), a walk of every single mutation tests/fuzz/model_mutate.h knows over
 * every metadata key of the tiny models, the committed corpus of recipes
 * (tests/data/fuzz-seeds/fuzz_model, also the model fuzzer's seeds), and every
 * allocation of model loading, context creation, the sampler and generation failing
 * in turn.
 *
 * Each mutated file must be refused with one line, or load and run; no request may
 * exceed 256 MiB (an absurd size believed), and under ASan nothing may overflow.
 *
 * EDDY_WRITE_MODEL_CORPUS=1 makes model_mutations_corpus (re)write the corpus files of
 * its table (corpus_table below) into tests/data/fuzz-seeds/fuzz_model first.
 */
#include "test.h"

#include <dirent.h>
#include <stdlib.h>

#include "fuzz/model_mutate.h"

#define LIMIT ((size_t)256 << 20)

static bool open_bases(void) {
    const char *dir = getenv("EDDY_TEST_DATA");
    return CHECK(mm_open_bases(dir ? dir : "tests/data"));
}

/* A refusal names what is wrong: the key itself, a tensor, or some metadata key (after
 * the file name that starts every message). */
static bool names_something(const char *msg, const char *key) {
    const char *p = strstr(msg, "mutated.gguf: ");
    if (p) msg = p + strlen("mutated.gguf: ");
    if (key && strstr(msg, key)) return true;
    static const char *const marks[] = {"tensor ", "tokenizer.", "general.", "blk.", "llama.", "qwen35.", "qwen35moe.",
                                        "qwen3next.", "mamba2.", "nemotron_h.", "granitehybrid.", "architecture"};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (strstr(msg, marks[i])) return true;
    return false;
}

/* Runs recipe r; counts it; a failure names the recipe. */
static void check_recipe(const mm_recipe *r, const char *key, int *n_ran, int *n_refused) {
    mm_desc d;
    eddy_error err;
    eddy_status s;
    int64_t live0 = alloc_live_count(), refusals0 = alloc_limit_refusals();
    const char *why = mm_check(r, &s, &d, &err);
    CHECKF(why == NULL, "%s", why ? why : "");
    CHECKF(alloc_limit_refusals() == refusals0, "%s: a request above 256 MiB was made (%s)", d.text,
           s ? err.msg : "and the file ran");
    CHECKF(alloc_live_count() == live0, "%s: %lld blocks leaked", d.text, (long long)(alloc_live_count() - live0));
    if (s == EDDY_OK) {
        (*n_ran)++;
    } else {
        (*n_refused)++;
        CHECKF(names_something(err.msg, key), "%s: the refusal names nothing: %s", d.text, err.msg);
    }
}

/* Appends a recipe group naming its target (the form the corpus uses). */
static size_t mm_put_named(uint8_t *out, size_t at, const char *name, int op, int a, int b) {
    size_t len = strlen(name);
    out[at++] = 0xFF, out[at++] = (uint8_t)op, out[at++] = (uint8_t)a, out[at++] = (uint8_t)b;
    out[at++] = (uint8_t)len;
    memcpy(out + at, name, len);
    return at + len;
}

/* A one-edit recipe on base b, target by index. */
static mm_recipe one_edit(int b, int64_t target, int op, int a, int bb) {
    mm_recipe r = {.base = b, .n_edits = 1};
    r.edits[0] = (mm_edit){.target = target, .op = (uint8_t)op, .a = (uint8_t)a, .b = (uint8_t)bb};
    return r;
}

/* A one-edit recipe on base b, target by name. */
static mm_recipe named_edit(int b, const char *key, int op, int a, int bb) {
    uint8_t buf[80];
    buf[0] = (uint8_t)b;
    size_t n = mm_put_named(buf, 1, key, op, a, bb);
    return mm_parse(buf, n);
}

/* ==== The vocabulary rule ==== */

/* The same array edit of n named keys of base b. */
static mm_recipe whole_vocab_edit(int b, const char *const *keys, int n, int op, int a, int bb) {
    uint8_t buf[200];
    buf[0] = (uint8_t)b;
    size_t len = 1;
    for (int k = 0; k < n; k++) len = mm_put_named(buf, len, keys[k], op, a, bb);
    return mm_parse(buf, len);
}

/* Writes the file of recipe r and loads it as a user would. */
static eddy_status load_recipe_file(const mm_recipe *r, const char *name, eddy_model **m, eddy_error *err) {
    uint8_t *bytes;
    uint64_t size;
    if (mm_build(r, &bytes, &size, NULL) != EDDY_OK) return EDDY_ERR_NOMEM;
    const char *path = test_tmp_path(name);
    bool ok = test_write_file(path, bytes, (size_t)size);
    eddy_free(bytes);
    if (!ok) return EDDY_ERR_IO;
    return eddy_model_load(path, m, err);
}

TEST(model_vocab_must_match_embedding) {
    REQUIRE(open_bases());
    eddy_model *m = NULL;
    eddy_error err;
    /* the unchanged file: the model's vocabulary has n_vocab tokens */
    mm_recipe same = {.base = 0};
    REQUIRE(load_recipe_file(&same, "vocab-same.gguf", &m, &err) == EDDY_OK);
    REQUIRE(eddy_model_vocab(m) != NULL);
    CHECK_EQ(eddy_vocab_n_tokens(eddy_model_vocab(m)), eddy_model_n_vocab(m));
    CHECK_EQ(eddy_model_n_vocab(m), 512);
    eddy_model_free(m);
    /* fewer tokens than embedding rows (the logits buffer overflowed here), and more */
    static const char *const vocab_keys[3] = {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                                               "tokenizer.ggml.scores"};
    mm_recipe cut = whole_vocab_edit(0, vocab_keys, 3, MM_ARR_CUT, 1, 44); /* 300 of 512 */
    eddy_status s = load_recipe_file(&cut, "vocab-cut.gguf", &m, &err);
    CHECK_EQ(s, EDDY_ERR_FORMAT);
    CHECK_CONTAINS(err.msg, "tokenizer.ggml.tokens has 300 entries, token_embd.weight has 512 rows");
    CHECK(strchr(err.msg, '\n') == NULL);
    if (s == EDDY_OK) eddy_model_free(m);
    mm_recipe grow = whole_vocab_edit(1, vocab_keys, 2, MM_ARR_GROW, 0, 0);
    s = load_recipe_file(&grow, "vocab-grow.gguf", &m, &err);
    CHECK_EQ(s, EDDY_ERR_FORMAT);
    CHECK_CONTAINS(err.msg, "tokenizer.ggml.tokens has 1025 entries, token_embd.weight has 1024 rows");
    if (s == EDDY_OK) eddy_model_free(m);
    /* a tokenizer model without tokens, and a file with no tokenizer at all */
    mm_recipe notok = named_edit(0, "tokenizer.ggml.tokens", MM_ARR_DROP, 0, 0);
    CHECK_EQ(load_recipe_file(&notok, "vocab-none.gguf", &m, &err), EDDY_ERR_FORMAT);
    CHECK_CONTAINS(err.msg, "tokenizer.ggml.tokens is missing");
    mm_recipe bare = {.base = 0, .n_edits = 0};
    const gguf_file *f = mm_bases[0].f;
    for (int64_t i = 0; i < f->n_kv && bare.n_edits < MM_MAX_GROUPS; i++)
        if (!strncmp(f->kv[i].key, "tokenizer.", 10))
            bare.edits[bare.n_edits++] = (mm_edit){.target = i, .op = MM_DROP};
    s = load_recipe_file(&bare, "vocab-bare.gguf", &m, &err);
    if (CHECKF(s == EDDY_OK, "%s", err.msg)) {
        CHECK(eddy_model_vocab(m) == NULL);
        eddy_ctx *c;
        REQUIRE(eddy_ctx_new(m, &(eddy_ctx_params){.n_ctx = 8, .n_threads = 1}, &c, &err) == EDDY_OK);
        eddy_sampler_params sp = eddy_sampler_default_params();
        eddy_sampler *smp;
        REQUIRE(eddy_sampler_new(&sp, eddy_model_n_vocab(m), &smp, NULL) == EDDY_OK);
        eddy_token t = 1;
        CHECK_EQ(eddy_generate(c, NULL, smp, &t, 1, 2, NULL, NULL, NULL, &err), EDDY_ERR_ARG);
        CHECK_CONTAINS(err.msg, "no vocabulary");
        eddy_sampler_free(smp);
        eddy_ctx_free(c);
        eddy_model_free(m);
    }
}

/* eddy_generate takes every size from the context's model: a sampler or a vocabulary
 * of another size is refused before anything is written. */
TEST(generate_refuses_mismatched_sizes) {
    eddy_model *m, *other;
    eddy_error err;
    REQUIRE(eddy_model_load(test_data_path("models/llama-tiny-q8_0.gguf"), &m, &err) == EDDY_OK);
    REQUIRE(eddy_model_load(test_data_path("models/qwen35-tiny-q8_0.gguf"), &other, &err) == EDDY_OK);
    REQUIRE(eddy_model_n_vocab(m) != eddy_model_n_vocab(other));
    eddy_ctx *c;
    REQUIRE(eddy_ctx_new(m, &(eddy_ctx_params){.n_ctx = 16, .n_threads = 1}, &c, &err) == EDDY_OK);
    eddy_sampler_params sp = eddy_sampler_default_params();
    sp.temp = 0;
    eddy_sampler *small, *right;
    REQUIRE(eddy_sampler_new(&sp, eddy_model_n_vocab(m) - 1, &small, NULL) == EDDY_OK);
    REQUIRE(eddy_sampler_new(&sp, eddy_model_n_vocab(m), &right, NULL) == EDDY_OK);
    eddy_token prompt[2] = {1, 5};
    CHECK_EQ(eddy_generate(c, NULL, small, prompt, 2, 3, NULL, NULL, NULL, &err), EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "the sampler is for 511 tokens, the model has 512");
    CHECK_EQ(eddy_generate(c, eddy_model_vocab(other), right, prompt, 2, 3, NULL, NULL, NULL, &err), EDDY_ERR_ARG);
    CHECK_CONTAINS(err.msg, "the vocabulary has");
    CHECK_EQ(eddy_ctx_n_pos(c), 0);
    eddy_gen_stats st;
    CHECKF(eddy_generate(c, NULL, right, prompt, 2, 3, NULL, NULL, &st, &err) == EDDY_OK, "%s", err.msg);
    CHECK_EQ(st.n_generated + 2, eddy_ctx_n_pos(c) + (st.stop == EDDY_STOP_EOG));
    eddy_sampler_free(small);
    eddy_sampler_free(right);
    eddy_ctx_free(c);
    eddy_model_free(other);
    eddy_model_free(m);
}

/* ==== Every single mutation ==== */

/* The (a, b) arguments walked for each op of a kind. */
typedef struct {
    uint8_t op, a, b;
} op_args;

static int int_cases(op_args *o) {
    int n = 0;
    for (int op = 0; op < MM_INT_N_OPS; op++) {
        if (op == MM_INT_NTOK)
            for (int a = 0; a < 3; a++) o[n++] = (op_args){(uint8_t)op, (uint8_t)a, 0};
        else if (op == MM_INT_RETYPE)
            for (int a = 0; a < 11; a++) o[n++] = (op_args){(uint8_t)op, (uint8_t)a, 0};
        else if (op == MM_INT_RAW) o[n++] = (op_args){(uint8_t)op, 1, 0};
        else o[n++] = (op_args){(uint8_t)op, 0, 0};
    }
    return n;
}

static int arr_cases(op_args *o) {
    int n = 0;
    for (int op = 0; op < MM_ARR_N_OPS; op++) {
        if (op == MM_ARR_CUT) o[n++] = (op_args){(uint8_t)op, 0, 1};
        else if (op == MM_ARR_ELEM) {
            /* element b % n, integer op b % 12: zero, x2, i32max, x2^31, -1, ntok */
            static const uint8_t bs[] = {0, 12 + 4, 24 + 5, 36 + 6, 48 + 7, 60 + 8, 1, 13 + 4};
            for (size_t k = 0; k < sizeof bs; k++) o[n++] = (op_args){(uint8_t)op, 0, bs[k]};
        } else if (op == MM_ARR_RETYPE)
            for (int a = 0; a < 4; a++) o[n++] = (op_args){(uint8_t)op, (uint8_t)a, 0};
        else o[n++] = (op_args){(uint8_t)op, 0, 0};
    }
    return n;
}

static int simple_cases(op_args *o, int n_ops) {
    for (int op = 0; op < n_ops; op++) o[op] = (op_args){(uint8_t)op, (uint8_t)(op == MM_FLT_INF), 0};
    return n_ops;
}

static int str_cases(op_args *o) {
    int n = 0;
    for (int op = 0; op < MM_STR_N_OPS; op++) {
        if (op == MM_STR_TABLE)
            for (size_t a = 0; a < sizeof mm_str_table / sizeof mm_str_table[0]; a++)
                o[n++] = (op_args){(uint8_t)op, (uint8_t)a, 0};
        else o[n++] = (op_args){(uint8_t)op, 0, 0};
    }
    return n;
}

static int ten_cases(op_args *o) {
    int n = 0;
    o[n++] = (op_args){MM_TEN_DROP, 0, 0};
    o[n++] = (op_args){MM_TEN_NE0, 0, 0};
    o[n++] = (op_args){MM_TEN_NE0, 2, 0};
    o[n++] = (op_args){MM_TEN_NE1, 0, 0};
    o[n++] = (op_args){MM_TEN_NE1, 1, 0};
    for (int a = 0; a < 4; a++) o[n++] = (op_args){MM_TEN_TYPE, (uint8_t)a, 0};
    o[n++] = (op_args){MM_TEN_DIM, 0, 0};
    o[n++] = (op_args){MM_TEN_DIM, 1, 0};
    return n;
}

/* Every op of every metadata key of base b (the chat template's text is left to
 * fuzz_chat_template), then of every tensor when tensors is set. */
static void walk_base(int b, bool tensors, int *n_ran, int *n_refused) {
    const gguf_file *f = mm_bases[b].f;
    op_args cases[64];
    for (int64_t i = 0; i < f->n_kv; i++) {
        const gguf_value *v = &f->kv[i].val;
        if (!strcmp(f->kv[i].key, "tokenizer.chat_template")) continue;
        int n;
        if (gguf_type_is_int(v->type)) n = int_cases(cases);
        else if (v->type == GGUF_TYPE_ARRAY) n = arr_cases(cases);
        else if (v->type == GGUF_TYPE_STRING) n = str_cases(cases);
        else if (v->type == GGUF_TYPE_BOOL) n = simple_cases(cases, MM_BOOL_N_OPS);
        else n = simple_cases(cases, MM_FLT_N_OPS);
        for (int k = 0; k < n; k++) {
            mm_recipe r = one_edit(b, i, cases[k].op, cases[k].a, cases[k].b);
            check_recipe(&r, f->kv[i].key, n_ran, n_refused);
        }
    }
    if (!tensors) return;
    int n = ten_cases(cases);
    for (int64_t i = 0; i < f->n_tensors; i++)
        for (int k = 0; k < n; k++) {
            mm_recipe r = one_edit(b, f->n_kv + i, cases[k].op, cases[k].a, cases[k].b);
            check_recipe(&r, f->tensors[i].name, n_ran, n_refused);
        }
}

TEST(model_mutations_of_every_key) {
    REQUIRE(open_bases());
    eddy_log_level quiet = EDDY_LOG_ERROR;
    eddy_log_set_level(quiet); /* mutated merges and token types warn */
    alloc_set_request_limit(LIMIT);
    int n_ran = 0, n_refused = 0;
    for (int b = 0; b < MM_N_BASES; b++) walk_base(b, false, &n_ran, &n_refused);
    alloc_set_request_limit(0);
    eddy_log_set_level(EDDY_LOG_WARN);
    printf("  (model mutations, metadata: %d ran, %d refused)\n", n_ran, n_refused);
    CHECK(n_ran > 0 && n_refused > 0);
}

/* Tensor damage is checked by name and shape in one place (bind), so three bases that
 * between them have every kind of layer (attention, Gated DeltaNet, Mamba-2, dense and
 * expert feed-forward parts) are walked. */
TEST(model_mutations_of_every_tensor) {
    REQUIRE(open_bases());
    eddy_log_set_level(EDDY_LOG_ERROR);
    alloc_set_request_limit(LIMIT);
    int n_ran = 0, n_refused = 0;
    static const int bases[] = {0, 2, 6}; /* llama, qwen35moe, granitehybrid */
    for (size_t k = 0; k < sizeof bases / sizeof bases[0]; k++) walk_base(bases[k], true, &n_ran, &n_refused);
    alloc_set_request_limit(0);
    eddy_log_set_level(EDDY_LOG_WARN);
    printf("  (model mutations, tensors and metadata: %d ran, %d refused)\n", n_ran, n_refused);
}

/* ==== The committed corpus ==== */

#define CORPUS_DIR "fuzz-seeds/fuzz_model"

/* Recipes written into the corpus by EDDY_WRITE_MODEL_CORPUS=1: the mutations the task
 * of keeping eddy safe names, on each base, by key name (so they survive a rebuilt
 * base). The fuzzer's finds are added as further files. */
typedef struct {
    const char *key; /* NULL: no edit (the base itself); "%s." is the architecture prefix */
    int op, a, b;
    const char *tag;
    bool whole_vocab; /* the same edit of token_type and scores too (those the file has) */
} corpus_entry;

static const corpus_entry corpus_table[] = {
    {NULL, 0, 0, 0, "base", false},
    {"%s.block_count", MM_INT_X2, 0, 0, "block_count-x2", false},
    {"%s.block_count", MM_INT_I32MAX, 0, 0, "block_count-i32max", false},
    {"%s.block_count", MM_INT_ZERO, 0, 0, "block_count-0", false},
    {"%s.embedding_length", MM_INT_X2P31, 0, 0, "embedding_length-x2p31", false},
    {"%s.embedding_length", MM_INT_ONE, 0, 0, "embedding_length-1", false},
    {"%s.context_length", MM_INT_I32MAX, 0, 0, "context_length-i32max", false},
    {"%s.context_length", MM_INT_X2P31, 0, 0, "context_length-x2p31", false},
    {"%s.attention.head_count", MM_INT_X2, 0, 0, "head_count-x2", false},
    {"%s.attention.head_count", MM_INT_ZERO, 0, 0, "head_count-0", false},
    {"%s.attention.head_count_kv", MM_ARR_CUT1, 0, 0, "head_count_kv-cut", false},
    {"%s.attention.head_count_kv", MM_INT_INC, 0, 0, "head_count_kv-inc", false},
    {"%s.attention.key_length", MM_INT_X2P31, 0, 0, "key_length-x2p31", false},
    {"%s.feed_forward_length", MM_ARR_CUT1, 0, 0, "feed_forward_length-cut", false},
    {"%s.feed_forward_length", MM_INT_DEC, 0, 0, "feed_forward_length-dec", false},
    {"%s.rope.dimension_count", MM_INT_DEC, 0, 0, "rope_dims-dec", false},
    {"%s.expert_used_count", MM_INT_X2P31, 0, 0, "expert_used-x2p31", false},
    {"%s.expert_count", MM_INT_NEG1, 0, 0, "expert_count-neg1", false},
    {"%s.ssm.state_size", MM_INT_X2, 0, 0, "ssm_state-x2", false},
    {"%s.ssm.conv_kernel", MM_INT_I32MAX, 0, 0, "ssm_conv-i32max", false},
    {"%s.ssm.time_step_rank", MM_INT_ZERO, 0, 0, "ssm_rank-0", false},
    {"%s.ssm.group_count", MM_INT_X2P31, 0, 0, "ssm_groups-x2p31", false},
    {"%s.attention.recurrent_layers", MM_ARR_HALF, 0, 0, "recurrent_layers-half", false},
    {"%s.full_attention_interval", MM_INT_ZERO, 0, 0, "attention_interval-0", false},
    {"%s.attention.layer_norm_rms_epsilon", MM_FLT_NAN, 0, 0, "rms_eps-nan", false},
    {"tokenizer.ggml.tokens", MM_ARR_CUT1, 0, 0, "tokens-cut1", false},
    {"tokenizer.ggml.tokens", MM_ARR_HALF, 0, 0, "tokens-half", false},
    {"tokenizer.ggml.tokens", MM_ARR_GROW, 0, 0, "tokens-grow", false},
    /* a consistent tokenizer shorter or longer than the embedding: the logits overflow of old */
    {"tokenizer.ggml.tokens", MM_ARR_CUT1, 0, 0, "vocab-cut1", true},
    {"tokenizer.ggml.tokens", MM_ARR_HALF, 0, 0, "vocab-half", true},
    {"tokenizer.ggml.tokens", MM_ARR_GROW, 0, 0, "vocab-grow", true},
    {"tokenizer.ggml.token_type", MM_ARR_CUT1, 0, 0, "token_type-cut", false},
    {"tokenizer.ggml.merges", MM_ARR_HALF, 0, 0, "merges-half", false},
    {"tokenizer.ggml.bos_token_id", MM_INT_NTOK, 1, 0, "bos-ntok", false},
    {"tokenizer.ggml.eos_token_id", MM_INT_NTOK, 2, 0, "eos-ntok1", false},
    {"tokenizer.ggml.eos_token_id", MM_INT_NEG1, 0, 0, "eos-neg1", false},
    {"tokenizer.ggml.eot_token_id", MM_INT_NTOK, 1, 0, "eot-ntok", false},
};

/* Short names of the bases, for corpus file names. */
static const char *const base_tags[MM_N_BASES] = {"llama", "qwen35", "qwen35moe", "qwen3next", "mamba2", "nemotron_h",
                                                  "granite", "granite-dense"};

static void write_corpus(const char *dir) { /* dir: < 4096 bytes */
    for (int b = 0; b < MM_N_BASES; b++) {
        const char *arch = gguf_get_str(mm_bases[b].f, "general.architecture", "");
        for (size_t k = 0; k < sizeof corpus_table / sizeof corpus_table[0]; k++) {
            const corpus_entry *e = &corpus_table[k];
            uint8_t buf[160];
            size_t n = 1;
            buf[0] = (uint8_t)b;
            if (e->key) {
                char key[64];
                snprintf(key, sizeof key, e->key, arch);
                if (gguf_find_key(mm_bases[b].f, key) < 0) continue; /* this architecture has no such key */
                n = mm_put_named(buf, 1, key, e->op, e->a, e->b);
                static const char *const more[] = {"tokenizer.ggml.token_type", "tokenizer.ggml.scores"};
                for (size_t j = 0; e->whole_vocab && j < 2; j++)
                    if (gguf_find_key(mm_bases[b].f, more[j]) >= 0) n = mm_put_named(buf, n, more[j], e->op, e->a, e->b);
            }
            char path[4200];
            snprintf(path, sizeof path, "%s/%s.%s", dir, base_tags[b], e->tag);
            CHECKF(test_write_file(path, buf, n), "cannot write %s", path);
        }
    }
}

TEST(model_mutations_corpus) {
    REQUIRE(open_bases());
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", test_data_path(CORPUS_DIR));
    const char *w = getenv("EDDY_WRITE_MODEL_CORPUS");
    if (w && *w == '1') write_corpus(dir);
    DIR *dp = opendir(dir);
    REQUIRE(dp != NULL);
    eddy_log_set_level(EDDY_LOG_ERROR);
    alloc_set_request_limit(LIMIT);
    int n_ran = 0, n_refused = 0, n_files = 0;
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        if (de->d_name[0] == '.' || strstr(de->d_name, ".md")) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        size_t n;
        uint8_t *bytes = test_read_file(path, &n);
        if (!CHECKF(bytes != NULL, "cannot read %s", path)) continue;
        mm_recipe r = mm_parse(bytes, n);
        free(bytes);
        n_files++;
        int ran0 = n_ran;
        check_recipe(&r, NULL, &n_ran, &n_refused);
        /* the unchanged bases run */
        if (strstr(de->d_name, ".base")) CHECKF(n_ran == ran0 + 1, "%s did not run", de->d_name);
    }
    closedir(dp);
    alloc_set_request_limit(0);
    eddy_log_set_level(EDDY_LOG_WARN);
    printf("  (model corpus: %d files, %d ran, %d refused)\n", n_files, n_ran, n_refused);
    CHECK(n_files >= MM_N_BASES);
}

/* ==== Out of memory ==== */

/* Allocation k failing: status NOMEM or OK (past the last allocation), nothing leaked. */
#define OOM_STEP(k, st, err) \
    CHECKF((st) == EDDY_OK || (st) == EDDY_ERR_NOMEM, "allocation %d: %s: %s", (k), eddy_status_name(st), (err).msg)

TEST(model_load_out_of_memory_at_every_allocation) {
    int walked = 0;
    for (int b = 0; b < MM_N_BASES; b++) {
        const char *path = test_data_path(mm_base_files[b]);
        char p[4096];
        snprintf(p, sizeof p, "%s", path);
        int64_t live0 = alloc_live_count();
        bool done = false;
        int k;
        for (k = 0; k < 100000 && !done; k++) {
            eddy_model *m = NULL;
            eddy_error err = {0};
            alloc_fail_after(k);
            eddy_status s = eddy_model_load(p, &m, &err);
            alloc_fail_after(-1);
            OOM_STEP(k, s, err);
            if (s != EDDY_OK && s != EDDY_ERR_NOMEM) break;
            done = s == EDDY_OK;
            if (!done) CHECK(m == NULL);
            eddy_model_free(m);
            if (!CHECKF(alloc_live_count() == live0, "%s: allocation %d leaked %lld blocks", p, k,
                        (long long)(alloc_live_count() - live0)))
                break;
        }
        CHECKF(done, "%s: never loaded", p);
        walked += k;
    }
    printf("  (model load: %d allocations failed in turn over %d models)\n", walked, MM_N_BASES);
}

TEST(ctx_new_out_of_memory_at_every_allocation) {
    int walked = 0;
    for (int b = 0; b < MM_N_BASES; b++) {
        eddy_model *m;
        eddy_error err;
        REQUIRE(eddy_model_load(test_data_path(mm_base_files[b]), &m, &err) == EDDY_OK);
        int64_t live0 = alloc_live_count();
        bool done = false;
        int k;
        for (k = 0; k < 10000 && !done; k++) {
            eddy_ctx *c = NULL;
            err.msg[0] = '\0';
            alloc_fail_after(k);
            eddy_status s = eddy_ctx_new(m, &(eddy_ctx_params){.n_ctx = 32, .n_threads = 2}, &c, &err);
            alloc_fail_after(-1);
            OOM_STEP(k, s, err);
            if (s != EDDY_OK && s != EDDY_ERR_NOMEM) break;
            done = s == EDDY_OK;
            if (done) { /* the context works after all that */
                int32_t t[2] = {1, 2};
                CHECK(eddy_ctx_eval(c, t, 2, NULL, 0, &err) == EDDY_OK);
            } else {
                CHECK(c == NULL);
            }
            eddy_ctx_free(c);
            if (!CHECKF(alloc_live_count() == live0, "%s: allocation %d leaked %lld blocks", mm_base_files[b], k,
                        (long long)(alloc_live_count() - live0)))
                break;
        }
        CHECK(done);
        walked += k;
        eddy_model_free(m);
    }
    printf("  (context creation: %d allocations failed in turn over %d models)\n", walked, MM_N_BASES);
}

TEST(sampler_and_generate_out_of_memory_at_every_allocation) {
    eddy_model *m;
    eddy_error err;
    REQUIRE(eddy_model_load(test_data_path("models/qwen35-tiny-q8_0.gguf"), &m, &err) == EDDY_OK);
    eddy_ctx *c;
    REQUIRE(eddy_ctx_new(m, &(eddy_ctx_params){.n_ctx = 32, .n_threads = 1}, &c, &err) == EDDY_OK);
    eddy_sampler_params sp = eddy_sampler_default_params();
    sp.repeat_penalty = 1.1f;
    int64_t live0 = alloc_live_count();
    bool done = false;
    /* the sampler */
    for (int k = 0; k < 1000 && !done; k++) {
        eddy_sampler *s = NULL;
        alloc_fail_after(k);
        eddy_status st = eddy_sampler_new(&sp, eddy_model_n_vocab(m), &s, &err);
        alloc_fail_after(-1);
        OOM_STEP(k, st, err);
        done = st == EDDY_OK;
        if (!done) CHECK(s == NULL);
        eddy_sampler_free(s);
        CHECKF(alloc_live_count() == live0, "sampler: allocation %d leaked", k);
    }
    CHECK(done);
    /* generation: a prompt, a few tokens, streamed through the detokenizer */
    eddy_sampler *s;
    REQUIRE(eddy_sampler_new(&sp, eddy_model_n_vocab(m), &s, &err) == EDDY_OK);
    live0 = alloc_live_count();
    done = false;
    const eddy_token prompt[4] = {10, 200, 31, 7};
    for (int k = 0; k < 1000 && !done; k++) {
        eddy_ctx_reset(c);
        eddy_sampler_reset(s);
        eddy_gen_stats gs;
        alloc_fail_after(k);
        eddy_status st = eddy_generate(c, NULL, s, prompt, 4, 6, NULL, NULL, &gs, &err);
        alloc_fail_after(-1);
        OOM_STEP(k, st, err);
        done = st == EDDY_OK;
        CHECKF(alloc_live_count() == live0, "generate: allocation %d leaked", k);
    }
    CHECK(done);
    eddy_sampler_free(s);
    eddy_ctx_free(c);
    eddy_model_free(m);
}
