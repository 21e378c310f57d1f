/*
 * eddy.h — the public interface of libeddy.
 *
 * Everything a program (the eddy CLI, a server, a user's application) may use is
 * declared here: opaque handles, plain functions, status codes. Nothing in this
 * header exposes an internal structure, so the library can change underneath it.
 *
 * Errors: functions that can fail on untrusted input return an eddy_status and,
 * when given a non-NULL eddy_error, fill it with one line naming what is wrong and
 * where. The library never calls exit() and never aborts on bad input.
 */
#ifndef EDDY_H
#define EDDY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EDDY_VERSION_STRING "0.1.0"

/* ==== Status and errors ==== */

typedef enum {
    EDDY_OK = 0,
    EDDY_ERR_IO,          /* a file could not be opened, read or mapped */
    EDDY_ERR_FORMAT,      /* a file is damaged or not what it claims to be */
    EDDY_ERR_UNSUPPORTED, /* valid input that eddy does not handle yet */
    EDDY_ERR_NOMEM,       /* an allocation failed */
    EDDY_ERR_ARG,         /* a caller passed an invalid argument */
    EDDY_ERR_NOT_FOUND,   /* a named key or tensor does not exist */
} eddy_status;

typedef struct {
    eddy_status code;
    char msg[512]; /* one line, no trailing newline */
} eddy_error;

const char *eddy_status_name(eddy_status s);
const char *eddy_version(void);

/* ==== Logging ==== */

typedef enum {
    EDDY_LOG_ERROR = 0,
    EDDY_LOG_WARN = 1,
    EDDY_LOG_INFO = 2,
    EDDY_LOG_DEBUG = 3,
} eddy_log_level;

/* Messages above this level are dropped. Default: WARN, or $EDDY_LOG_LEVEL
 * (error|warn|info|debug) when set. */
void eddy_log_set_level(eddy_log_level level);

/* ==== CPU ==== */

/* Space-separated names of the SIMD features eddy detected and will use, e.g.
 * "avx2 fma f16c avx512f avx512bw avx512vnni". "none" when EDDY_FORCE_REF=1. */
const char *eddy_cpu_features(void);

/* ==== GGUF files ==== */

/* An opened, fully validated GGUF file. Tensor data stays memory-mapped. */
typedef struct eddy_gguf eddy_gguf;

eddy_status eddy_gguf_open(const char *path, eddy_gguf **out, eddy_error *err);
void eddy_gguf_close(eddy_gguf *f);

uint32_t eddy_gguf_version(const eddy_gguf *f);
uint32_t eddy_gguf_alignment(const eddy_gguf *f);
uint64_t eddy_gguf_file_size(const eddy_gguf *f);
uint64_t eddy_gguf_data_offset(const eddy_gguf *f); /* start of the tensor data section */

/* Metadata. Index i runs over [0, eddy_gguf_n_kv). */
int64_t eddy_gguf_n_kv(const eddy_gguf *f);
const char *eddy_gguf_kv_key(const eddy_gguf *f, int64_t i);
/* The value's type name: "u8", "i32", "f32", "bool", "str", "arr[str]", ... */
const char *eddy_gguf_kv_type_name(const eddy_gguf *f, int64_t i);
/* Writes the value as text into buf (always NUL-terminated when buf_size > 0).
 * Arrays longer than max_items show their first max_items elements and their
 * length. Strings are written with control characters escaped. Returns the
 * length the full text would have had (like snprintf). */
size_t eddy_gguf_kv_format(const eddy_gguf *f, int64_t i, char *buf, size_t buf_size,
                           int64_t max_items);

/* Typed look-ups by key; a missing key or a value of another kind yields def. */
int64_t eddy_gguf_get_int(const eddy_gguf *f, const char *key, int64_t def);
double eddy_gguf_get_float(const eddy_gguf *f, const char *key, double def);
const char *eddy_gguf_get_str(const eddy_gguf *f, const char *key, const char *def);

/* Tensors. Index i runs over [0, eddy_gguf_n_tensors). */
typedef struct {
    const char *name;
    const char *type_name; /* "Q4_K", "F32", ... */
    int type;              /* the GGML type id as stored */
    int n_dims;            /* 1..4 */
    int64_t ne[4];         /* ne[0] is the contiguous (row) dimension; unused dims are 1 */
    int64_t n_elements;
    uint64_t offset;       /* byte offset from the start of the file */
    uint64_t n_bytes;
    int supported;         /* 1 when eddy can dequantize this type */
} eddy_tensor_info;

int64_t eddy_gguf_n_tensors(const eddy_gguf *f);
void eddy_gguf_tensor_info(const eddy_gguf *f, int64_t i, eddy_tensor_info *out);
int64_t eddy_gguf_find_tensor(const eddy_gguf *f, const char *name); /* -1 if absent */

/* Dequantizes tensor i into dst, which holds n_elements floats. Fails with
 * EDDY_ERR_UNSUPPORTED (naming the tensor and type) for types eddy cannot read. */
eddy_status eddy_gguf_tensor_to_f32(const eddy_gguf *f, int64_t i, float *dst, eddy_error *err);

/* ==== Models and evaluation ==== */

/* A loaded model: weights stay mapped from the GGUF file. Read-only after loading,
 * so several contexts may share one. */
typedef struct eddy_model eddy_model;

/* A context: one sequence's state (KV cache, recurrent state), a thread pool and
 * work buffers, all allocated when the context is made. */
typedef struct eddy_ctx eddy_ctx;

/* Element type of the attention layers' key/value cache. F16 (the default, as
 * llama.cpp's) rounds each stored element to nearest even and halves the cache;
 * F32 keeps the values as computed. Arithmetic is f32 either way. */
typedef enum {
    EDDY_KV_DEFAULT = 0, /* F16 */
    EDDY_KV_F16,
    EDDY_KV_F32,
} eddy_kv_type;

typedef struct {
    int64_t n_ctx;   /* positions the sequence can hold (0: the model's training context, at most 4096) */
    int n_threads;   /* 0: all online CPUs */
    int64_t n_batch; /* tokens per forward step (0: 512); longer inputs are split */
    eddy_kv_type type_k, type_v; /* key / value cache elements (0: F16) */
} eddy_ctx_params;

eddy_status eddy_model_load(const char *path, eddy_model **out, eddy_error *err);
void eddy_model_free(eddy_model *m);
const char *eddy_model_arch(const eddy_model *m);
int64_t eddy_model_n_vocab(const eddy_model *m);
int64_t eddy_model_n_ctx_train(const eddy_model *m);
/* The underlying GGUF file (metadata, tokenizer data); owned by the model. */
const eddy_gguf *eddy_model_gguf(const eddy_model *m);

eddy_status eddy_ctx_new(const eddy_model *m, const eddy_ctx_params *p, eddy_ctx **out, eddy_error *err);
void eddy_ctx_free(eddy_ctx *c);

/* Feeds n tokens to the sequence after those it already holds. logits receives
 * float32 rows of n_vocab: one per token when all_logits, else one for the last
 * token; NULL for none. Fails (changing nothing) on an id outside the vocabulary or
 * when the context would overflow. */
eddy_status eddy_ctx_eval(eddy_ctx *c, const int32_t *tokens, int64_t n, float *logits, int all_logits,
                          eddy_error *err);
int64_t eddy_ctx_n_pos(const eddy_ctx *c); /* tokens the sequence holds */
int64_t eddy_ctx_n_ctx(const eddy_ctx *c);
void eddy_ctx_reset(eddy_ctx *c);           /* back to an empty sequence */

/* ==== Sampling ==== */

/* The sampling chain, in llama.cpp's order: penalties -> top-k -> top-p -> min-p ->
 * temperature -> draw. Defaults (eddy_sampler_default_params) match llama.cpp's. */
typedef struct {
    float temp;              /* <= 0: greedy; default 0.8 */
    int32_t top_k;           /* <= 0: off; default 40 */
    float top_p;             /* 1: off; default 0.95 */
    float min_p;             /* 0: off; default 0.05 */
    float repeat_penalty;    /* 1: off; default 1.0. Logits of recent tokens: /p if > 0, *p if < 0 */
    int32_t repeat_last_n;   /* tokens the penalties look back; default 64 */
    float presence_penalty;  /* subtracted once from each recent token's logit; default 0 */
    float frequency_penalty; /* subtracted per occurrence; default 0 */
    uint64_t seed;           /* the same seed and inputs give the same tokens */
} eddy_sampler_params;

typedef struct eddy_sampler eddy_sampler;

eddy_sampler_params eddy_sampler_default_params(void);
/* Checks the ranges (temp >= 0 finite, 0 < top_p <= 1, 0 <= min_p <= 1, penalties finite,
 * repeat_penalty > 0, repeat_last_n >= 0). */
eddy_status eddy_sampler_params_check(const eddy_sampler_params *p, eddy_error *err);
eddy_status eddy_sampler_new(const eddy_sampler_params *p, int64_t n_vocab, eddy_sampler **out, eddy_error *err);
void eddy_sampler_free(eddy_sampler *s);
int32_t eddy_sampler_sample(eddy_sampler *s, const float *logits);
void eddy_sampler_accept(eddy_sampler *s, int32_t token);
void eddy_sampler_reset(eddy_sampler *s);

/* ==== Benchmarks ==== */

/* Runs the kernel benchmarks whose name contains filter (NULL: all) on n_threads
 * threads and prints the results to stdout: one JSON object per line when json is
 * non-zero, else a table with each op's fraction of the machine's read bandwidth or
 * f32 FMA peak, both measured in the same run. */
eddy_status eddy_bench_kernels(const char *filter, int n_threads, int json, eddy_error *err);

/* The bytes one decode step (one token) reads from memory, in three parts. */
typedef struct {
    /* Weights: every tensor of the file, except that of the token embedding table one
     * row is read (but when the output matrix is tied to it, the whole table is read
     * as the output matrix); of each mixture-of-experts tensor only n_expert_used of
     * n_expert experts; none of the layers the forward pass leaves out (multi-token
     * prediction layers). */
    uint64_t weights;
    uint64_t state;      /* recurrent state (Gated DeltaNet, Mamba-2), read and written: 2 x its bytes */
    uint64_t kv_per_pos; /* KV cache read per position held (key + value rows as f32; half with an F16 cache) */
} eddy_decode_bytes;

void eddy_model_decode_bytes(const eddy_model *m, eddy_decode_bytes *out);

/* A model benchmark as llama-bench runs one: a prefill test (pp: n_prompt random
 * tokens in one eddy_ctx_eval from an empty sequence, logits of the last only) and a
 * decode test (tg: n_gen single-token evaluations from an empty sequence, each feeding
 * the previous step's argmax), each run once to warm up and then n_reps times timed. */
typedef struct {
    int64_t n_prompt;        /* pp tokens; 0 skips the test */
    int64_t n_gen;           /* tg tokens; 0 skips the test */
    int n_threads;           /* 0: all online CPUs */
    int n_reps;              /* timed repetitions of each test (0: 5) */
    uint64_t seed;           /* the random token ids */
    /* NULL, or the model's vocabulary: control and end-of-generation tokens are then
     * left out of the random ids */
    const struct eddy_vocab *vocab;
} eddy_bench_params;

typedef struct {
    double median, mean, sd; /* tokens/s over the timed repetitions (sd: sample standard
                              * deviation, 0 for one repetition); all 0 for a skipped test */
} eddy_bench_rate;

typedef struct {
    int n_threads;            /* the threads used */
    eddy_bench_rate pp, tg;
    double read_bw;           /* bytes/s: the machine's read bandwidth, measured after the tests
                               * on the same threads (1 GiB buffer, best of 4 passes) */
    eddy_decode_bytes bytes;  /* of one decode step */
    double kv_positions;      /* positions a decode step of the tg test holds on average:
                               * (n_gen + 1) / 2; 1 without a tg test */
    double bytes_per_token;   /* bytes.weights + bytes.state + bytes.kv_per_pos * kv_positions */
    double roofline;          /* tg.median * bytes_per_token / read_bw: 1 would be decode at the
                               * machine's read bandwidth; 0 when tg is skipped */
    double peak_rss;          /* bytes: the process's peak resident set after the tests (taken
                               * before the bandwidth probe allocates its buffer) */
} eddy_bench_result;

eddy_status eddy_bench_model(const eddy_model *m, const eddy_bench_params *p, eddy_bench_result *r,
                             eddy_error *err);

/* ==== Text: vocabulary, tokenizer, detokenizer, chat templates ==== */

/* A model's tokenizer, loaded from a GGUF file's tokenizer.* metadata. Immutable
 * once loaded: any number of threads may use one vocabulary at the same time.
 * It does not refer to the eddy_gguf it came from, which may be closed. */
typedef struct eddy_vocab eddy_vocab;
typedef int32_t eddy_token;

/* Buffers the text functions return (token arrays, strings) are freed with this. */
void eddy_buffer_free(void *p);

eddy_status eddy_vocab_load(const eddy_gguf *f, eddy_vocab **out, eddy_error *err);
void eddy_vocab_free(eddy_vocab *v);

/* A model's own vocabulary, loaded and checked by eddy_model_load: it has exactly
 * eddy_model_n_vocab(m) tokens (a file whose tokenizer.ggml.tokens and token_embd
 * disagree is refused, naming both sizes). Owned by the model; NULL when the file has
 * no tokenizer. */
const eddy_vocab *eddy_model_vocab(const eddy_model *m);

int64_t eddy_vocab_n_tokens(const eddy_vocab *v);
eddy_token eddy_vocab_bos(const eddy_vocab *v); /* -1 when the file names none */
eddy_token eddy_vocab_eos(const eddy_vocab *v);
eddy_token eddy_vocab_eot(const eddy_vocab *v);
/* "qwen2", "smollm", "llama (SentencePiece BPE)", ...: the tokenizer in use. */
const char *eddy_vocab_describe(const eddy_vocab *v);
/* True for control tokens (<|im_end|>, <s>, ...) and the unknown token. */
bool eddy_vocab_is_control(const eddy_vocab *v, eddy_token t);
/* The bytes token t stands for (not NUL-terminated; NULL for an invalid id). */
const char *eddy_vocab_token_text(const eddy_vocab *v, eddy_token t, size_t *len);
/* The file's tokenizer.chat_template, or NULL. */
const char *eddy_vocab_chat_template(const eddy_vocab *v);

enum {
    /* Add BOS / EOS as the file asks (tokenizer.ggml.add_bos_token / add_eos_token). */
    EDDY_TOKENIZE_ADD_SPECIAL = 1u << 0,
    /* Control tokens written in the text (e.g. "<|im_start|>") are plain text;
     * without this flag they are matched atomically, as llama.cpp does for prompts.
     * User-defined added tokens (e.g. "<think>") are matched either way. */
    EDDY_TOKENIZE_NO_SPECIAL = 1u << 1,
};

/* Tokenizes text[0 .. len) (any bytes: invalid UTF-8 becomes byte tokens). On
 * success *out (free with eddy_buffer_free) holds *n_out ids. */
eddy_status eddy_tokenize(const eddy_vocab *v, const char *text, size_t len, unsigned flags,
                          eddy_token **out, int64_t *n_out, eddy_error *err);

enum {
    /* Control tokens produce no text (by default they produce their own text). */
    EDDY_DETOK_SKIP_CONTROL = 1u << 0,
};

/* The bytes the ids stand for, concatenated: decode(encode(s)) == s for valid
 * UTF-8 s (after the tokenizer's normalization, NFC for Qwen). A SentencePiece
 * vocabulary's leading space marker is removed. *out is NUL-terminated; free it
 * with eddy_buffer_free. Fails (EDDY_ERR_ARG) on an id outside the vocabulary. */
eddy_status eddy_detokenize(const eddy_vocab *v, const eddy_token *ids, int64_t n, unsigned flags,
                            char **out, size_t *len, eddy_error *err);

/* A streaming detokenizer: feed tokens one at a time as they are generated; each
 * call returns the text that is now complete. It never returns part of a UTF-8
 * character: bytes of an unfinished character wait for the next token; bytes that
 * cannot become a valid character are replaced by U+FFFD (one per maximal invalid
 * sequence, as Python's errors="replace" does). The concatenation of everything
 * returned, flush included, equals eddy_detokenize's output decoded that way. */
typedef struct eddy_detok eddy_detok;

eddy_status eddy_detok_new(const eddy_vocab *v, unsigned flags, eddy_detok **out, eddy_error *err);
/* *text / *len: valid until the next call on d. */
eddy_status eddy_detok_push(eddy_detok *d, eddy_token t, const char **text, size_t *len,
                            eddy_error *err);
/* The end of the stream: what is still held back, as U+FFFD. Resets d. */
void eddy_detok_flush(eddy_detok *d, const char **text, size_t *len);
void eddy_detok_free(eddy_detok *d);

/* Chat templates. eddy runs the Jinja template a model file carries
 * (tokenizer.chat_template) with its own interpreter of the subset of Jinja that
 * chat templates use (docs/tokenizer.md lists it); the output matches Hugging
 * Face's apply_chat_template byte for byte. A template that needs more fails with
 * EDDY_ERR_UNSUPPORTED and a message naming the construct and the
 * --chat-template override. */
typedef struct {
    const char *role;
    const char *content;
} eddy_chat_message;

typedef struct {
    /* A template's text, or the name of a built-in one ("chatml", "llama3");
     * NULL: the file's tokenizer.chat_template. */
    const char *template_text;
    bool add_generation_prompt;
    /* -1: leave `enable_thinking` undefined (the template's default); 0 / 1: false / true. */
    int enable_thinking;
    /* NULL, or a JSON object whose members become further template variables
     * (e.g. {"tools": [...], "date_string": "26 Jul 2024"}). */
    const char *extra_json;
} eddy_chat_options;

/* The built-in template of that name, or NULL. */
const char *eddy_chat_builtin(const char *name);

/* Formats messages (role, content) into the prompt text. *out is NUL-terminated;
 * free it with eddy_buffer_free. */
eddy_status eddy_chat_format(const eddy_vocab *v, const eddy_chat_message *msgs, int64_t n_msgs,
                             const eddy_chat_options *opt, char **out, size_t *len, eddy_error *err);
/* The same with the messages as a JSON array of objects, which may carry more than
 * role and content (reasoning_content, tool_calls, content parts, ...). */
eddy_status eddy_chat_format_json(const eddy_vocab *v, const char *messages_json,
                                  const eddy_chat_options *opt, char **out, size_t *len,
                                  eddy_error *err);

/* ==== Generation ==== */

typedef enum {
    EDDY_STOP_EOG = 0,    /* the model produced an end-of-generation token */
    EDDY_STOP_LENGTH,     /* n_predict tokens were generated */
    EDDY_STOP_CONTEXT,    /* the context is full */
    EDDY_STOP_CALLBACK,   /* the callback asked to stop */
} eddy_stop_reason;

typedef struct {
    int64_t n_prompt, n_generated;
    double prompt_seconds, generate_seconds; /* prefill, and the decode loop */
    eddy_stop_reason stop;
} eddy_gen_stats;

/* Called for each generated token with the text it completes (possibly empty: a
 * UTF-8 character may span tokens; never part of a character). Return non-zero to
 * stop. */
typedef int (*eddy_token_callback)(void *user, eddy_token token, const char *text, size_t len);

/* True for the tokens that end a reply: the file's EOS and EOT, and control tokens
 * such as <|im_end|>, <|endoftext|>, <|eot_id|>, <end_of_turn>. */
bool eddy_vocab_is_eog(const eddy_vocab *v, eddy_token t);

/* Feeds prompt (n_prompt >= 1 tokens) to the context's sequence after what it holds,
 * then samples up to n_predict tokens (< 0: until the context is full), each fed back
 * to the model, calling cb for each. An end-of-generation token stops the loop and
 * is not fed to the model (nor passed to cb), so the sequence can continue with the
 * next turn. The sampler sees the prompt and every generated token.
 * Sizes come from the context's model: v NULL means the model's vocabulary
 * (eddy_model_vocab); a vocabulary or a sampler of another size than the model's
 * n_vocab is refused with EDDY_ERR_ARG naming both sizes. */
eddy_status eddy_generate(eddy_ctx *c, const eddy_vocab *v, eddy_sampler *s, const eddy_token *prompt,
                          int64_t n_prompt, int64_t n_predict, eddy_token_callback cb, void *user,
                          eddy_gen_stats *stats, eddy_error *err);

#ifdef __cplusplus
}
#endif

#endif /* EDDY_H */
