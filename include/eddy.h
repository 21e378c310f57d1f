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

/* libeddy is built with hidden visibility; what is declared from here to the end of
 * this header is its exported API. A no-op for compilers without the pragma. */
#if defined(__GNUC__) && !defined(_WIN32) && !defined(__CYGWIN__)
#pragma GCC visibility push(default)
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
    EDDY_ERR_CANCELLED,   /* the caller's abort callback stopped the work */
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
eddy_log_level eddy_log_get_level(void);

/* Where messages go. By default each is one line on stderr, "eddy: LEVEL: text";
 * with a callback set, fn(user, level, text) receives each message at or below the
 * level instead (text: one line, no newline, valid during the call). fn may run on
 * any thread that calls eddy, and must not set the callback itself. NULL: stderr. */
typedef void (*eddy_log_callback)(void *user, eddy_log_level level, const char *text);
void eddy_log_set_callback(eddy_log_callback fn, void *user);

/* Logs a message (printf format) the way eddy's own go: for a program that wants
 * its lines to follow the same level and callback. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void eddy_log(eddy_log_level level, const char *fmt, ...);

/* ==== CPU ==== */

/* Space-separated names of the SIMD features eddy detected and will use, e.g.
 * "avx2 fma f16c avx512f avx512bw avx512vnni". "none" when EDDY_FORCE_REF=1. */
const char *eddy_cpu_features(void);

/* The instruction-set level eddy's CPU kernels run at, chosen once per process:
 * "avx512", "avx2", "neon", or "ref" (portable C: EDDY_FORCE_REF=1, or a CPU
 * without those). */
const char *eddy_cpu_isa(void);

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

/* A context: an engine holding one sequence — the simple interface for one stream
 * of tokens (eddy_engine below runs many). */
typedef struct eddy_ctx eddy_ctx;

/* Element type of the attention layers' key/value cache. F16 (the default, as
 * llama.cpp's) rounds each stored element to nearest even and halves the cache;
 * F32 keeps the values as computed. Arithmetic is f32 either way. */
typedef enum {
    EDDY_KV_DEFAULT = 0, /* F16 */
    EDDY_KV_F16,
    EDDY_KV_F32,
} eddy_kv_type;

/* Where an engine runs its forward steps and keeps its state. */
typedef enum {
    EDDY_DEVICE_CPU = 0,  /* the default */
    EDDY_DEVICE_CUDA = 1, /* the first NVIDIA GPU: weights, state pool and KV cache in its memory,
                           * all of them or those of the layers it runs (gpu_layers) (a build
                           * with `make CUDA=1`; docs/cuda.md says what it runs) */
} eddy_device;

typedef struct {
    int64_t n_ctx;   /* positions the sequence can hold (0: the model's training context, at most 4096) */
    int n_threads;   /* 0: the CPUs this process may use (affinity, cgroup quota) */
    int64_t n_batch; /* tokens per forward step (0: 512, 2048 on a GPU); longer inputs are split */
    eddy_kv_type type_k, type_v; /* key / value cache elements (0: F16) */
    int n_snapshots;   /* snapshots of the sequence at once (eddy_seq_snapshot on eddy_ctx_seq; 0: none) */
    size_t cache_bytes; /* prefix cache budget (eddy_engine_params; 0: none) */
    const char *cache_dir;  /* its disk tier and that tier's budget (eddy_engine_params) */
    size_t cache_dir_bytes;
    bool mtp;           /* run the multi-token-prediction layer (eddy_engine_params) */
    eddy_device device; /* where it runs (eddy_engine_params) */
    int n_verify;       /* tokens of verifies awaiting accept at once (eddy_engine_params; 0: none) */
    bool host_snapshots; /* on a GPU, the snapshots' state in host memory (eddy_engine_params) */
    bool cache_fit;      /* on a GPU, a cache_bytes that does not fit is halved (eddy_engine_params) */
    int gpu_layers;      /* with EDDY_DEVICE_CUDA: the last layers on the GPU (eddy_engine_params; 0: all) */
} eddy_ctx_params;

eddy_status eddy_model_load(const char *path, eddy_model **out, eddy_error *err);
void eddy_model_free(eddy_model *m);
const char *eddy_model_arch(const eddy_model *m);
int64_t eddy_model_n_vocab(const eddy_model *m);
int64_t eddy_model_n_ctx_train(const eddy_model *m);
/* True when the file carries a multi-token-prediction layer eddy can run (Qwen3.5 and
 * Qwen3-Next files converted with their MTP weights: nextn_predict_layers). */
bool eddy_model_has_mtp(const eddy_model *m);
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

/* ==== Engines and sequences ====
 *
 * An engine holds one model, a thread pool and a state pool sized once: slots for
 * n_seq_max sequences of up to n_ctx positions each, for n_snapshots further states
 * (snapshots), and for n_verify tokens of verifies awaiting accept. Sequences
 * advance together: one forward step evaluates the tokens of many sequences,
 * reading each weight once for all of them. A sequence's state can be forked,
 * snapshotted, restored and rolled back (docs/sequences.md).
 *
 * Every function below takes the engine's lock: one thread may drive an engine
 * while others tokenize or sample. An exhausted pool, a position beyond n_ctx or a
 * sequence of another engine is an error (EDDY_ERR_NOMEM / EDDY_ERR_ARG) that
 * changes nothing. */
/* A token id. */
typedef int32_t eddy_token;

typedef struct eddy_engine eddy_engine;
typedef struct eddy_seq eddy_seq;
typedef struct eddy_snapshot eddy_snapshot;

typedef struct {
    int64_t n_ctx;       /* positions each sequence can hold (0: the model's training context, at most 4096) */
    int n_seq_max;       /* sequences at once (0: 1) */
    int n_snapshots;     /* states beyond one per sequence: each snapshot takes one (0: none) */
    int n_threads;       /* 0: the CPUs this process may run on */
    int64_t n_batch;     /* tokens per forward step (0: 512, 2048 on a GPU); longer batches are split */
    eddy_kv_type type_k, type_v; /* key / value cache elements (0: F16) */
    /* Prefix cache: checkpoints of sequences' states at every multiple of cache_every
     * positions (and where eddy_seq_cache_put says), kept under a budget of
     * cache_bytes, least recently used first out; 0: no cache. */
    size_t cache_bytes;
    int64_t cache_every; /* a multiple of 256 (0: 512). Recurrent layers evaluate a prompt in
                          * pieces that end at its multiples, cache or not, so the logits with
                          * and without the cache are the same bits */
    /* The cache's disk tier (NULL: none; needs cache_bytes > 0): states leaving the memory
     * budget, and those cached when the engine is freed, are written to session files in
     * this directory (made if missing), and a lookup restores the deepest of them — in this
     * process or a later one on the same model (docs/sequences.md). cache_dir_bytes: its
     * budget, least recently used files removed first (0: no limit). */
    const char *cache_dir;
    size_t cache_dir_bytes;
    /* Run the model's multi-token-prediction layer (eddy_model_has_mtp) in every step, for
     * EDDY_SPEC_MTP drafts: each position costs one more layer and keeps that layer's key,
     * value and last hidden state in the sequence's state (docs/speculative.md). */
    bool mtp;
    /* Where the engine runs (0: the CPU). EDDY_DEVICE_CUDA fails with EDDY_ERR_UNSUPPORTED,
     * naming the reason, in a build without CUDA, without a GPU, or for what the GPU
     * backend does not run yet (docs/cuda.md). */
    eddy_device device;
    /* Tokens of verifies awaiting eddy_seq_accept at once, over all sequences (speculative
     * decoding: each sequence's t and drafts; 0: none, eddy_engine_verify refuses). Each
     * holds a row state until then: the conv windows after the token and the recurrent
     * layers' inputs to replay it from, a small part of a sequence's state
     * (eddy_engine_row_bytes; nothing for a model without recurrent layers). */
    int n_verify;
    /* On a GPU, whose memory the state pool commits when the engine is made: a prefix cache
     * of cache_bytes that does not fit beside the weights and the states is halved until it
     * does (none below 64 MiB, unless cache_dir needs one), the weights uploaded once;
     * eddy_engine_cache_stats' budget says what it got. false: the engine is refused
     * (EDDY_ERR_NOMEM, naming the cache). */
    bool cache_fit;
    /* On a GPU: the snapshot states' recurrent state lives in pinned host memory, not the
     * GPU's (their KV rows stay there, shared with their sequences). Taking or restoring a
     * snapshot then copies the state across the bus (eddy_engine_state_bytes: 50 MiB for
     * the 4B Qwen3.5 shape) instead of within the GPU: for snapshots kept long and used
     * now and then (a server's pinned sessions, a chat's undo), not a rollback every
     * step. The CPU ignores it. */
    bool host_snapshots;
    /* With EDDY_DEVICE_CUDA: how many of the model's layers run on the GPU, counted from the
     * last (llama.cpp's -ngl); the CPU runs the ones before them, from the token embeddings
     * on, and hands each step's hidden states to the GPU, which runs the rest, the output
     * layer and the MTP layer. Each layer's weights and state are where it runs. 0, or the
     * layer count or more: the whole model on the GPU (docs/cuda.md); negative:
     * EDDY_ERR_ARG. The CPU ignores it. */
    int gpu_layers;
} eddy_engine_params;

eddy_status eddy_engine_new(const eddy_model *m, const eddy_engine_params *p, eddy_engine **out, eddy_error *err);
/* Frees the engine with its sequences and snapshots. */
void eddy_engine_free(eddy_engine *e);
const eddy_model *eddy_engine_model(const eddy_engine *e);
int64_t eddy_engine_n_ctx(const eddy_engine *e);
int eddy_engine_n_threads(const eddy_engine *e);
/* Tokens per forward step, as the engine resolved n_batch. */
int64_t eddy_engine_n_batch(const eddy_engine *e);
/* "cpu", or "cuda: " and the GPU's name, and for a model split between the CPU and the
 * GPU (gpu_layers) " (layers A..B; the CPU runs 0..C)". */
const char *eddy_engine_device_name(const eddy_engine *e);
/* Bytes of one sequence's recurrent state, of its KV cache per position, and of one row
 * state of a verify (all layers each). */
size_t eddy_engine_state_bytes(const eddy_engine *e);
size_t eddy_engine_kv_bytes_per_pos(const eddy_engine *e);
size_t eddy_engine_row_bytes(const eddy_engine *e);

/* Called between forward steps of a long evaluation; non-zero stops it with
 * EDDY_ERR_CANCELLED (the sequences keep the steps already done). NULL: none. */
void eddy_engine_set_abort(eddy_engine *e, int (*cb)(void *user), void *user);

/* A new empty sequence. */
eddy_status eddy_seq_new(eddy_engine *e, eddy_seq **out, eddy_error *err);
void eddy_seq_free(eddy_seq *s);
int64_t eddy_seq_n_pos(const eddy_seq *s);
/* The tokens the sequence holds, [0, n_pos); valid until it changes. */
const eddy_token *eddy_seq_tokens(const eddy_seq *s);

/* The n_vocab logits after the sequence's last token, when the evaluation that fed it
 * computed them (or a session file brought them); NULL after anything else changed
 * the sequence (a rollback, restore, accept, fork or clear). Valid until it changes. */
const float *eddy_seq_logits(const eddy_seq *s);

/* A new sequence holding what src holds: the recurrent state copied, the KV cache
 * shared until either writes to it (copy-on-write blocks). */
eddy_status eddy_seq_fork(eddy_seq *src, eddy_seq **out, eddy_error *err);
/* Back to an empty sequence. */
void eddy_seq_clear(eddy_seq *s);
/* Rolls back to n_pos positions (0 <= n_pos <= eddy_seq_n_pos): attention layers
 * drop the KV rows past it; recurrent layers restore the latest snapshot of the
 * same tokens at or before n_pos and replay the tokens after it (from the start
 * when there is none). The result is that of a sequence that never went past n_pos. */
eddy_status eddy_seq_truncate(eddy_seq *s, int64_t n_pos, eddy_error *err);

/* ==== Prefix cache ====
 * When the engine has a cache (eddy_engine_params.cache_bytes), a sequence about to
 * take tokens[0, n) restores the deepest cached state whose tokens begin them (at
 * most n - 1 of them, so the last token is evaluated and gives logits), unless what
 * it holds already begins them and is deeper: *n_restored (may be NULL) says how many
 * it holds afterwards, and only tokens[*n_restored, n) remain to evaluate. A sequence
 * holding something else is cleared. The KV blocks of a restored prefix are shared. */
eddy_status eddy_seq_restore_prefix(eddy_seq *s, const eddy_token *tokens, int64_t n, int64_t *n_restored,
                                    eddy_error *err);
/* Caches the sequence's state as it is now (a chat turn's end, say); nothing when the
 * engine has no cache or the state is cached already. */
eddy_status eddy_seq_cache_put(eddy_seq *s, eddy_error *err);

typedef struct {
    int64_t entries;         /* states held */
    int64_t lookups, hits;   /* eddy_seq_restore_prefix calls, and those that restored a cached state */
    int64_t tokens_restored; /* positions those hits did not have to evaluate */
    size_t bytes, budget;    /* charged to the held states (recurrent slot + KV blocks each), and the budget */
    int64_t disk_files, disk_hits; /* the disk tier's files of this model, and the hits they served */
    size_t disk_bytes;
} eddy_cache_stats;

void eddy_engine_cache_stats(eddy_engine *e, eddy_cache_stats *out);

/* A copy of the sequence's state as it is now; restoring it is exact (bit for bit). */
eddy_status eddy_seq_snapshot(eddy_seq *s, eddy_snapshot **out, eddy_error *err);
eddy_status eddy_seq_restore(eddy_seq *s, const eddy_snapshot *snap, eddy_error *err);
int64_t eddy_snapshot_n_pos(const eddy_snapshot *snap);
void eddy_snapshot_free(eddy_snapshot *snap);

/* A batch of tokens of one or more sequences. Each sequence's tokens come together
 * and in order; they follow what the sequence holds. */
typedef struct {
    int64_t n_tokens;
    const eddy_token *tokens; /* (n_tokens) */
    eddy_seq *const *seq;     /* (n_tokens) the sequence of each token */
    const int8_t *logits;     /* (n_tokens) non-zero: this token's logits are wanted;
                               * NULL: the last token of each sequence */
} eddy_batch;

/* Evaluates the batch in one forward step (split into steps of n_batch tokens when
 * longer). logits receives one row of n_vocab floats per wanted token, in batch
 * order (NULL: none). Checks everything before changing anything: a refusal
 * (EDDY_ERR_ARG, EDDY_ERR_NOMEM: no free KV block, no memory for the logits) leaves
 * the engine as it was. On a GPU a step that fails there (EDDY_ERR_IO, the CUDA error)
 * may leave states half written: the engine refuses every later step (EDDY_ERR_IO)
 * and a new one is needed. */
eddy_status eddy_engine_decode(eddy_engine *e, const eddy_batch *b, float *logits, eddy_error *err);
/* The same, giving each wanted token's most likely next token instead of its logits: ids
 * receives one id per wanted token, in batch order: the first index of the largest logit
 * that is neither NaN nor -inf, 0 when there is none (what a greedy eddy_sampler without
 * penalties picks). On a GPU the ids are found there and only they come back (4 bytes a
 * row, where the logits take 4 n_vocab). ids may be b->tokens. The batch's sequences
 * keep no logits afterwards (eddy_seq_logits: NULL), as with logits NULL. */
eddy_status eddy_engine_decode_argmax(eddy_engine *e, const eddy_batch *b, eddy_token *ids, eddy_error *err);
/* The same, giving each wanted token's k best next tokens (1 <= k <= EDDY_TOP_MAX) instead
 * of its logits: ids and logits receive k entries per wanted token, in batch order (row r
 * at r * k), best first (of equal logits the lower id first), and counts one per wanted
 * token: how many of its k entries are set (fewer than k only where fewer logits are
 * neither NaN nor -inf). lse, unless NULL, receives one per wanted token: the log of the
 * sum of exp over its whole row of logits (the exponentials summed in double), so that
 * logits[r * k + j] - lse[r] is the log-probability of ids[r * k + j]. What
 * eddy_sampler_sample_top samples from; on a GPU they are found there and only they come
 * back (8 k + 4 bytes a row, 8 more with lse, where the logits take 4 n_vocab). The
 * sequences keep no logits afterwards, as with eddy_engine_decode_argmax. */
#define EDDY_TOP_MAX 64
eddy_status eddy_engine_decode_top(eddy_engine *e, const eddy_batch *b, int32_t k, eddy_token *ids, float *logits,
                                   int32_t *counts, double *lse, eddy_error *err);
/* The same, giving each wanted token's log-probability of a given next token instead of
 * its logits: targets holds one token id per wanted token, in batch order, and logprobs
 * receives log softmax(logits)[target] for each (natural logarithm; the exponentials
 * summed in double): what eddy perplexity scores. On a GPU it is computed there and 8
 * bytes a row come back. A target outside the vocabulary is refused before anything
 * runs. The sequences keep no logits afterwards. */
eddy_status eddy_engine_decode_logprob(eddy_engine *e, const eddy_batch *b, const eddy_token *targets,
                                       double *logprobs, eddy_error *err);

/* Speculative verification: like eddy_engine_decode (at most n_batch tokens), but
 * every sequence of the batch keeps the state after each of its tokens until
 * eddy_seq_accept says how many to keep. Each token takes one of the engine's n_verify
 * row states meanwhile (EDDY_ERR_NOMEM when too few are free). */
eddy_status eddy_engine_verify(eddy_engine *e, const eddy_batch *b, float *logits, eddy_error *err);
/* The same, giving each wanted token's k best next tokens (and with lse the log-sum-exp of
 * its row) instead of its logits, as eddy_engine_decode_top does (what eddy_spec_accept_top
 * walks; on a GPU 8 k + 4 bytes a row come back). */
eddy_status eddy_engine_verify_top(eddy_engine *e, const eddy_batch *b, int32_t k, eddy_token *ids, float *logits,
                                   int32_t *counts, double *lse, eddy_error *err);
/* Keeps the first n_keep tokens of the sequence's last verify (0 <= n_keep <= their
 * count): exactly the state that feeding those n_keep tokens would have given. */
eddy_status eddy_seq_accept(eddy_seq *s, int64_t n_keep, eddy_error *err);

/* One sequence's tokens as one batch (its logits: all, or the last row only). */
eddy_status eddy_seq_eval(eddy_seq *s, const eddy_token *tokens, int64_t n, float *logits, int all_logits,
                          eddy_error *err);

/* The engine and the sequence a context is made of (owned by the context). */
eddy_engine *eddy_ctx_engine(eddy_ctx *c);
eddy_seq *eddy_ctx_seq(eddy_ctx *c);

/* ==== Session files ====
 *
 * A sequence's whole state — its tokens, the logits after its last token, the
 * recurrent state and the KV rows it holds — and optionally a sampler's state, in a
 * versioned, checksummed format (docs/session-format.md) tied to the model by a
 * fingerprint: a session never loads into another model. Loading checks every size,
 * offset and checksum before it touches the sequence; a refused file changes nothing
 * and the message names the problem. Saving to a path is atomic: the file at path is
 * the old one or the new one, never a torn one, whenever the process dies. */
typedef struct eddy_sampler eddy_sampler;

/* sampler may be NULL (no sampler state saved). */
eddy_status eddy_seq_save(eddy_seq *s, const eddy_sampler *sampler, const char *path, eddy_error *err);
/* The same with the caller's own bytes kept beside the state (a chat's messages, say:
 * app_len bytes, checksummed like the rest); eddy_seq_load_app gives them back in *app
 * (free with eddy_buffer_free; NULL and 0 when the file has none). */
eddy_status eddy_seq_save_app(eddy_seq *s, const eddy_sampler *sampler, const void *app, size_t app_len,
                              const char *path, eddy_error *err);
eddy_status eddy_seq_load_app(eddy_seq *s, eddy_sampler *sampler, const char *path, void **app, size_t *app_len,
                              eddy_error *err);
/* The same into memory: *out (free with eddy_buffer_free) holds *len bytes. */
eddy_status eddy_seq_save_buffer(eddy_seq *s, const eddy_sampler *sampler, void **out, size_t *len,
                                 eddy_error *err);
/* Replaces what s holds with the saved state (and, when both the file and sampler
 * have one, the sampler's), its last logits included (eddy_seq_logits), so
 * generation can go on without evaluating anything. */
eddy_status eddy_seq_load(eddy_seq *s, eddy_sampler *sampler, const char *path, eddy_error *err);
eddy_status eddy_seq_load_buffer(eddy_seq *s, eddy_sampler *sampler, const void *buf, size_t len,
                                 eddy_error *err);

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

eddy_sampler_params eddy_sampler_default_params(void);
/* Checks the ranges (temp >= 0 finite, 0 < top_p <= 1, 0 <= min_p <= 1, penalties finite,
 * repeat_penalty > 0, repeat_last_n >= 0). */
eddy_status eddy_sampler_params_check(const eddy_sampler_params *p, eddy_error *err);
/* True when a sampler of these parameters always picks what eddy_engine_decode_argmax
 * gives (temperature 0, no penalties), so a caller may take the ids without the logits. */
bool eddy_sampler_params_greedy(const eddy_sampler_params *p);
/* How many of a row's best logits a sampler of these parameters looks at, when they are all
 * it looks at: 1 when greedy (eddy_sampler_params_greedy), top_k for a temperature above 0
 * without penalties and a top_k of 1..EDDY_TOP_MAX (top-p, min-p and the temperature
 * then see only those); 0 when it needs the whole row. A caller may then take
 * eddy_engine_decode_top's k best with k at least that, and eddy_sampler_sample_top. */
int32_t eddy_sampler_params_top(const eddy_sampler_params *p);
eddy_status eddy_sampler_new(const eddy_sampler_params *p, int64_t n_vocab, eddy_sampler **out, eddy_error *err);
void eddy_sampler_free(eddy_sampler *s);
int32_t eddy_sampler_sample(eddy_sampler *s, const float *logits);
/* The same from a row's n best candidates alone (ids and their logits, best first, as
 * eddy_engine_decode_top gives them): the same token, and the same draws of the random
 * generator, as eddy_sampler_sample on the whole row whenever n is at least
 * eddy_sampler_params_top of the sampler's parameters, or the row has no more than n
 * logits that are neither NaN nor -inf. With other parameters the chain runs on the
 * candidates as if they were the whole row, without penalties. */
int32_t eddy_sampler_sample_top(eddy_sampler *s, const eddy_token *ids, const float *logits, int32_t n);
/* Removes the tokens banned[0, n_banned) from a row's n best candidates (ids and logits,
 * best first), keeping the others' order; returns how many are left. Sampling those is
 * sampling the row with the banned tokens' logits at -inf (--ignore-eos) whenever n was
 * at least eddy_sampler_params_top + n_banned (eddy_sampler_params_top_banned). */
int32_t eddy_top_remove(eddy_token *ids, float *logits, int32_t n, const eddy_token *banned, int64_t n_banned);
/* How many of a row's best logits a sampler of these parameters needs when n_banned
 * tokens are banned from the row (eddy_top_remove): eddy_sampler_params_top plus n_banned
 * when that is at most EDDY_TOP_MAX, else 0 (the whole row). */
int32_t eddy_sampler_params_top_banned(const eddy_sampler_params *p, int64_t n_banned);
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
    int n_threads;           /* 0: the CPUs this process may use, as for a context */
    int n_reps;              /* timed repetitions of each test (0: 5) */
    uint64_t seed;           /* the random token ids */
    /* NULL, or the model's vocabulary: control and end-of-generation tokens are then
     * left out of the random ids */
    const struct eddy_vocab *vocab;
    /* where the model runs (eddy_engine_params); on the GPU, read_bw is the GPU memory's
     * (a device-to-device copy, bytes read plus bytes written over its time) */
    eddy_device device;
    int64_t n_batch; /* tokens per forward step (0: the engine's default, 512, 2048 on a GPU) */
    /* eddy_bench_model: positions the sequence holds before each test, as llama-bench's
     * -d: random tokens prefilled once, untimed, and restored from a snapshot before each
     * run (0: every test from an empty sequence) */
    int64_t n_depth;
    /* eddy_bench_batched: how each step picks every sequence's next token; eddy_bench_verify:
     * what its steps give each row (the argmax, the best 40 or the logits) */
    enum {
        EDDY_BENCH_ARGMAX = 0,    /* the argmax (eddy_engine_decode_argmax), as llama-batched-bench */
        EDDY_BENCH_SAMPLE_TOP,    /* eddy run's default sampler, one a sequence, from each row's best 40
                                   * (eddy_engine_decode_top, eddy_sampler_sample_top) */
        EDDY_BENCH_SAMPLE_LOGITS, /* the same samplers on whole rows of logits (eddy_engine_decode):
                                   * the same tokens as EDDY_BENCH_SAMPLE_TOP */
    } sampling;
    int gpu_layers; /* with EDDY_DEVICE_CUDA: the last layers on the GPU (eddy_engine_params; 0: all) */
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
    double kv_positions;      /* positions a decode step of the tg test holds on average: n_depth +
                               * (n_gen + 1) / 2; 1 without a tg test */
    double bytes_per_token;   /* bytes.weights + bytes.state + bytes.kv_per_pos * kv_positions */
    double roofline;          /* tg.median * bytes_per_token / read_bw: 1 would be decode at the
                               * machine's read bandwidth; 0 when tg is skipped, or for a model
                               * split between the CPU and the GPU (gpu_layers), which the two
                               * memories bound together */
    char device[96];          /* where it ran: "cpu", or "cuda: " and the GPU's name (and which
                               * layers it ran, for a split model) */
    double peak_rss;          /* bytes: the process's peak resident set after the tests (taken
                               * before the bandwidth probe allocates its buffer) */
    int64_t n_batch;          /* tokens per forward step, as the engine resolved it */
} eddy_bench_result;

eddy_status eddy_bench_model(const eddy_model *m, const eddy_bench_params *p, eddy_bench_result *r,
                             eddy_error *err);

/* Many sequences at once, as llama.cpp's llama-batched-bench measures them: n_seq
 * sequences of n_prompt random tokens prefilled in one batch (pp), then n_gen steps
 * each decoding one token of every sequence in one batch (tg), from empty sequences;
 * one warm-up, then the median of n_reps timed runs. Rates count the tokens of all
 * sequences (aggregate); per sequence, divide by n_seq. */
typedef struct {
    int64_t n_seq;
    int n_threads;
    double pp_seconds, tg_seconds; /* medians */
    double pp_tps, tg_tps;         /* n_seq * n_prompt / pp_seconds, n_seq * n_gen / tg_seconds */
} eddy_bench_batched_result;

eddy_status eddy_bench_batched(const eddy_model *m, const eddy_bench_params *p, int64_t n_seq,
                               eddy_bench_batched_result *r, eddy_error *err);

/* One speculative verify step against one plain decode step (docs/speculative.md): a
 * sequence prefilled with n_prompt random tokens, then rounds of n_gen plain steps (one
 * token each) and n_gen verify steps of 1 + K tokens for each K of ks (each keeping
 * one, so every step advances the sequence by one); a warm-up round, then n_reps timed
 * rounds. */
#define EDDY_BENCH_VERIFY_MAX 16
typedef struct {
    int n_threads;
    int64_t depth;                                /* the prefilled positions */
    int n_k;
    int64_t k[EDDY_BENCH_VERIFY_MAX];             /* drafts per verify */
    double plain_seconds;                         /* median seconds per plain step */
    double verify_seconds[EDDY_BENCH_VERIFY_MAX]; /* median seconds per verify step */
    double ratio[EDDY_BENCH_VERIFY_MAX];          /* median over the rounds of verify / plain */
    /* A model with a multi-token-prediction layer (eddy_model_has_mtp) is also run in an
     * engine with the layer, at the same depth: its plain step, and one MTP draft (one
     * token, the layer alone), as medians over the rounds of their ratios to plain_seconds. */
    bool mtp;
    double mtp_plain_ratio, mtp_draft_ratio;
} eddy_bench_verify_result;

eddy_status eddy_bench_verify(const eddy_model *m, const eddy_bench_params *p, const int64_t *ks, int n_k,
                              eddy_bench_verify_result *r, eddy_error *err);

/* The next turn of a conversation of n_prompt tokens, n_gen new tokens long, three
 * ways (best of n_reps after a warm-up): evaluating the whole conversation again;
 * loading a session file of it from disk (its pages dropped from the page cache
 * first) and evaluating the new tokens; restoring it from the engine's prefix cache
 * and evaluating the new tokens. The disk's sequential read speed is measured in the
 * same run on a file of the session's size in dir, also cold. */
typedef struct {
    int64_t n_prompt, n_turn;
    double file_bytes;
    double t_reprocess;          /* seconds: n_prompt + n_turn tokens from an empty sequence */
    double t_load, t_file_turn;  /* the session load alone; load + the turn */
    double t_cache_turn;         /* prefix-cache restore + the turn */
    double t_save;               /* writing the session (atomic, with fsync) */
    double disk_read_bps;        /* sequential read, cold, this run */
    char device[96];             /* where the engine ran (eddy_bench_params.device): "cpu", or "cuda: " and the GPU */
} eddy_bench_session_result;

eddy_status eddy_bench_session(const eddy_model *m, const eddy_bench_params *p, const char *dir,
                               eddy_bench_session_result *r, eddy_error *err);

/* ==== Text: vocabulary, tokenizer, detokenizer, chat templates ==== */

/* A model's tokenizer, loaded from a GGUF file's tokenizer.* metadata. Immutable
 * once loaded: any number of threads may use one vocabulary at the same time.
 * It does not refer to the eddy_gguf it came from, which may be closed. */
typedef struct eddy_vocab eddy_vocab;

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
    /* Speculative decoding (zero without it): verify steps, the drafts they checked,
     * and those accepted. Each step also yields one token of the model's own, so it
     * advances accepted / steps + 1 tokens on average. */
    int64_t n_spec_steps, n_drafted, n_accepted;
} eddy_gen_stats;

/* Called for each generated token with the text it completes (possibly empty: a
 * UTF-8 character may span tokens; never part of a character). Return non-zero to
 * stop. */
typedef int (*eddy_token_callback)(void *user, eddy_token token, const char *text, size_t len);

/* True for the tokens that end a reply: the file's EOS and EOT, and control tokens
 * such as <|im_end|>, <|endoftext|>, <|eot_id|>, <end_of_turn>. */
bool eddy_vocab_is_eog(const eddy_vocab *v, eddy_token t);

/* Feeds prompt (n_prompt tokens) to the context's sequence after what it holds,
 * then samples up to n_predict tokens (< 0: until the context is full), each fed back
 * to the model, calling cb for each. With n_prompt 0 it goes on from the logits the
 * sequence holds (eddy_seq_logits: after a session load, say). An end-of-generation token stops the loop and
 * is not fed to the model (nor passed to cb), so the sequence can continue with the
 * next turn. The sampler sees the prompt and every generated token.
 * Sizes come from the context's model: v NULL means the model's vocabulary
 * (eddy_model_vocab); a vocabulary or a sampler of another size than the model's
 * n_vocab is refused with EDDY_ERR_ARG naming both sizes. */
eddy_status eddy_generate(eddy_ctx *c, const eddy_vocab *v, eddy_sampler *s, const eddy_token *prompt,
                          int64_t n_prompt, int64_t n_predict, eddy_token_callback cb, void *user,
                          eddy_gen_stats *stats, eddy_error *err);

/* ==== Speculative decoding ====
 *
 * A drafter guesses the tokens that come next; the model checks all of them in one
 * forward step (eddy_engine_verify) and keeps the longest run it agrees with, plus one
 * token of its own. The output is the one generation without drafts gives: with
 * temperature 0, or with drafts that are plain guesses (prompt lookup, or a draft
 * model at temperature 0), the same tokens, bit for bit, for the same seed — the model
 * samples each position from the same logits with the same random numbers and a draft
 * only decides how many positions one step evaluates. A draft model at temperature > 0
 * samples its drafts, and speculative sampling (keep draft d with probability
 * min(1, p(d) / q(d)), else draw from max(0, p - q) renormalized) keeps the output's
 * distribution exactly the model's (docs/speculative.md). */
typedef enum {
    EDDY_SPEC_NONE = 0,
    EDDY_SPEC_NGRAM, /* prompt lookup: the tokens that followed the latest earlier occurrence
                      * of the last n tokens (prompt and output), n from ngram down to 1 */
    EDDY_SPEC_DRAFT, /* a smaller model with the same vocabulary, in its own context */
    EDDY_SPEC_MTP,   /* the model's own multi-token-prediction layer, chained (an engine made
                      * with eddy_engine_params.mtp) */
} eddy_spec_type;

typedef struct {
    eddy_spec_type type;
    int draft_max;    /* drafts per step at most (0: 16) */
    int draft_min;    /* fewer drafts than this: a plain step instead (0: 1) */
    bool fixed;       /* false: the draft length follows the acceptance rate (docs/speculative.md);
                       * true: always draft_max (as many as the drafter finds) */
    int ngram;        /* EDDY_SPEC_NGRAM: the longest n-gram looked up (0: 3) */
    /* EDDY_SPEC_DRAFT: a context of the draft model, made with n_snapshots >= 1 (its
     * sequence is kept in step with the generation's; what it held is replaced), or an
     * engine of it shared by many eddy_spec (each takes a sequence of its own and one
     * snapshot state while it lives: n_seq_max and n_snapshots >= their number); and
     * the smallest probability of the draft's best token to go on drafting (0: 0.75,
     * EDDY_SPEC_MTP: none; below 0: no limit; temperature 0 only — sampled drafts always
     * go on) */
    eddy_ctx *draft;
    eddy_engine *draft_engine;
    float p_min;
} eddy_spec_params;

/* Speculative decoding step by step, for programs that run the forward steps
 * themselves (many sequences in one eddy_engine_verify, as `eddy batch` does); the loop
 * of eddy_generate_ex is built on it. One eddy_spec per sequence holds its drafter, the
 * draft length rule and the counts. A step:
 *   1. t, the token just sampled (not yet fed): eddy_spec_draft gives n drafts;
 *   2. feed t and the drafts: eddy_engine_verify with logits of every token (t alone,
 *      when n == 0, may go in a plain evaluation instead);
 *   3. eddy_spec_accept with those n + 1 logits rows: samples each position as plain
 *      generation would (the sampler sees every token it returns), keeps the state after
 *      the drafts the model agreed with, and returns the tokens generated; the last is the
 *      next step's t unless the walk ended otherwise (*end).
 * A draft model context (p->draft) serves one sequence at a time; a draft engine
 * (p->draft_engine) one sequence per eddy_spec. */
typedef struct eddy_spec eddy_spec;

typedef enum {
    EDDY_SPEC_NEXT = 0, /* the last token returned is the next step's t */
    EDDY_SPEC_EOG,      /* the model produced an end-of-generation token (not returned) */
    EDDY_SPEC_LIMIT,    /* max_emit tokens were returned, all fed */
} eddy_spec_end;

eddy_status eddy_spec_new(eddy_seq *s, eddy_sampler *smp, const eddy_spec_params *p, eddy_spec **out,
                          eddy_error *err);
void eddy_spec_free(eddy_spec *sp);
/* Up to max drafts to follow t (fewer when the length rule, the sequence's context or the
 * engine's free states say so) into drafts, *n of them; 0: feed t alone. */
eddy_status eddy_spec_draft(eddy_spec *sp, eddy_token t, int64_t max, eddy_token *drafts, int64_t *n,
                            eddy_error *err);
/* eddy_spec_draft for n eddy_spec of distinct sequences, as one step of many sequences
 * needs: t[i], max[i], drafts[i] (room for max[i]) and n_drafts[i] are eddy_spec_draft's
 * for sp[i]. The drafts are the ones eddy_spec_draft gives each; drafters that share an
 * engine draft together, each draft position one forward step for all of them (MTP
 * drafters of one engine: the MTP layer; draft models of one draft engine: the draft
 * model, after one batch that brings every draft sequence up to its history). */
eddy_status eddy_spec_draft_many(eddy_spec *const *sp, int64_t n, const eddy_token *t, const int64_t *max,
                                 eddy_token *const *drafts, int64_t *n_drafts, eddy_error *err);
/* rows: (n + 1, n_vocab) the logits after t and each draft (used as scratch). At most
 * max_emit tokens (< 0: no limit) go to out (room for n + 1), *n_out of them. */
eddy_status eddy_spec_accept(eddy_spec *sp, float *rows, int64_t max_emit, eddy_token *out, int64_t *n_out,
                             eddy_spec_end *end, eddy_error *err);
/* How many best logits of each row eddy_spec_accept_top needs (eddy_engine_verify_top's
 * k): eddy_sampler_params_top of the sequence's sampler, or 0 where the walk needs whole
 * rows (a sampler that looks at more, or a draft model that samples its drafts). */
int32_t eddy_spec_top(const eddy_spec *sp);
/* eddy_spec_accept from the verify's digest (eddy_engine_verify_top with k at least
 * eddy_spec_top; ids and logits (n + 1, k), counts (n + 1)): the same tokens, the same
 * draws of the sampler's generator. The sequence keeps no logits afterwards
 * (eddy_seq_logits: NULL), as after eddy_engine_decode_top. EDDY_ERR_ARG, before anything
 * changes, where eddy_spec_top is 0 or above k. */
eddy_status eddy_spec_accept_top(eddy_spec *sp, int32_t k, const eddy_token *ids, const float *logits,
                                 const int32_t *counts, int64_t max_emit, eddy_token *out, int64_t *n_out,
                                 eddy_spec_end *end, eddy_error *err);
/* The counts so far: verify steps, drafts checked, drafts accepted. */
void eddy_spec_counts(const eddy_spec *sp, int64_t *steps, int64_t *drafted, int64_t *accepted);

/* What eddy_generate_ex takes beyond eddy_generate's arguments. */
typedef struct {
    int64_t n_predict; /* as eddy_generate's */
    /* Never sample an end-of-generation token (eddy_vocab_is_eog; their logits become
     * -inf), so that only n_predict or a full context ends the loop (llama.cpp's
     * --ignore-eos). */
    bool ignore_eog;
    /* Speculative decoding (NULL or EDDY_SPEC_NONE: none). The context needs
     * n_verify >= draft_max + 1 (a verify holds a row state for each of its tokens);
     * a draft model's vocabulary must be the model's, token for token. */
    const eddy_spec_params *spec;
} eddy_gen_params;

/* eddy_generate with p's settings (NULL: n_predict -1, nothing else). */
eddy_status eddy_generate_ex(eddy_ctx *c, const eddy_vocab *v, eddy_sampler *s, const eddy_token *prompt,
                             int64_t n_prompt, const eddy_gen_params *p, eddy_token_callback cb, void *user,
                             eddy_gen_stats *stats, eddy_error *err);
#if defined(__GNUC__) && !defined(_WIN32) && !defined(__CYGWIN__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* EDDY_H */
