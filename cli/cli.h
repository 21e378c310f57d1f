/*
 * cli.h — shared pieces of the eddy command: error reporting, standard output, the
 * subcommands and their help, and the flags run and chat share.
 *
 * The CLI uses only include/eddy.h; every subcommand returns the process exit
 * status (0 success, 1 error) and reports errors as one line "eddy: error: ...".
 */
#ifndef EDDY_CLI_H
#define EDDY_CLI_H

#include "eddy.h"

/* ==== Errors, files, numbers (main.c) ==== */

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
int cli_error(const char *fmt, ...); /* prints "eddy: error: ..." and returns 1 */
/* A whole file ("-": stdin), NUL-terminated; *len (may be NULL) gets its size. NULL,
 * with errno set, when it cannot be opened or read or memory runs out; prints nothing
 * (each caller says what the file was for). */
char *cli_read_file(const char *path, size_t *len);

/* Seconds on a monotonic clock. */
double cli_now_s(void);

/* Parses a non-negative integer argument; on failure prints an error naming flag. */
int cli_parse_int(const char *flag, const char *s, long long lo, long long hi, long long *out);

/* Parses a number in [lo, hi]; on failure prints an error naming flag. */
int cli_parse_float(const char *flag, const char *s, double lo, double hi, double *out);

/* -ctk/--cache-type-k and -ctv/--cache-type-v TYPE (llama.cpp's spelling; TYPE f16
 * or f32): -1 when a is neither, 0 after storing the type in *type_k or *type_v,
 * 1 after printing an error naming the flag and the value. */
int cli_parse_kv_flag(const char *a, const char *val, eddy_kv_type *type_k, eddy_kv_type *type_v);

/* --device cpu|cuda (cuda: the whole model on the GPU, or the last layers an -ngl gives),
 * and llama.cpp's -ngl/--n-gpu-layers N (0: the CPU; N >= 1: the model's last N layers on
 * the GPU, the ones before on the CPU; N at or above the layer count: all of them): -1 when a is neither, 0 after storing the
 * device and *gpu_layers (eddy_engine_params's), 1 after printing an error naming the flag
 * and the value. */
int cli_parse_device_flag(const char *a, const char *val, eddy_device *device, int *gpu_layers);

/* ==== Standard output (main.c) ====
 *
 * main() flushes and closes stdout after the subcommand; a failed write anywhere
 * makes the exit status 1 with "eddy: error: writing standard output: REASON". */

/* Writes n bytes to stdout and flushes them; false (the reason kept for main's
 * message) when that or an earlier write failed: a streaming caller stops. */
bool cli_out(const void *p, size_t n);

/* ==== Subcommands and their help (main.c, args.c) ==== */

/* Prints the help of command cmd (its part of `eddy --help`) to stdout; returns 0. */
int cli_usage(const char *cmd);
/* An argument subcommand cmd does not take. --help or -h prints cmd's help and
 * returns 0, which the caller returns as its exit status; anything else prints
 * "unknown option '-x' for 'cmd'" (with a hint for a llama.cpp option eddy lacks)
 * or "unexpected argument" and returns 1. */
int cli_bad_arg(const char *cmd, const char *arg);

/* Each command's part of `eddy --help` (the README's "Using eddy" block is that text). */
extern const char usage_inspect[], usage_run[], usage_chat[], usage_tokenize[], usage_detokenize[],
    usage_chat_format[], usage_perplexity[], usage_logits[], usage_bench[], usage_batch[], usage_serve[];

int cmd_inspect(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_batch(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_chat_format(int argc, char **argv);
int cmd_serve(int argc, char **argv); /* serve_http.c; absent when built with SERVER=0 */

/* ==== Text arguments, seeds (args.c) ==== */

/* llama.cpp's -e: \n \r \t \' \" \\ and \xHH in s[0 .. len) become the bytes they
 * stand for, in place (other backslashes stay); returns the new length. */
size_t cli_unescape(char *s, size_t len);
/* 0 when s[0 .. len) holds no NUL byte; else prints "WHAT: byte N is a NUL byte, ..."
 * and returns 1 (chat messages are C strings). */
int cli_check_no_nul(const char *what, const char *s, size_t len);
/* A seed from the system's random source (the time and process id without one). */
uint64_t cli_random_seed(void);

/* ==== What runs, at info level; --mlock (model_info.c) ==== */

/* The model (architecture, parameters, file type, weights), the CPU features. */
void cli_log_model(const char *path, const eddy_model *m);
/* A context as made from p: positions, batch, threads, KV cache types, the memory
 * of the sequence's state. */
void cli_log_ctx(eddy_ctx *c, const eddy_ctx_params *p);
/* A warning when engine e's prefix cache got less than the command's default budget of
 * asked bytes (a GPU without room for it, cache_fit): prefix begins the line, beside
 * names what took the room. */
void cli_warn_cache_fit(eddy_engine *e, size_t asked, const char *prefix, const char *beside);
/* --mlock: locks the pages where the model file at path is mapped (its weights) in
 * memory; a warning when the system refuses or the file was read, not mapped. */
void cli_lock_model(const char *path);

/* ==== Chat templates (chat_util.c) ==== */

/* The conversation formatted by the chat template and tokenized (special tokens
 * matched; BOS added when the vocabulary wants it and the template did not write
 * it). *out is freed with free(). Prints the error and returns 1 on failure. */
int cli_chat_tokens(const eddy_vocab *v, const eddy_chat_message *msgs, int64_t n, const eddy_chat_options *opt,
                    eddy_token **out, int64_t *n_out);
/* --chat-template ARG: a built-in template's name or a file to read (*owned, freed
 * by the caller). NULL arg: the model's own template. */
int cli_chat_template(const char *arg, const char **tmpl, char **owned);

/* ==== Generation flags shared by run and chat (gen_opts.c) ==== */

#define GEN_MAX_STOPS 16

typedef struct {
    const char *model, *chat_template;
    long long n_predict, threads, n_ctx, n_batch, n_ubatch;
    int enable_thinking; /* -1: the template's default */
    eddy_kv_type type_k, type_v;
    eddy_device device;
    int gpu_layers;      /* with device cuda: the last layers on the GPU (-ngl N; 0: all) */
    eddy_sampler_params sp;
    bool seed_random;    /* no --seed S (S >= 0): sp.seed is drawn when the session opens */
    bool ignore_eos, escape, no_mmap, mlock, chat;
    int n_snapshots;     /* the context's snapshots (chat: its /undo depth) */
    long long cache_mib; /* --cache-ram MiB: the prefix cache's budget (-1: the command's default) */
    bool cache_fit;      /* cache_mib is the command's default: on a GPU it shrinks to fit */
    const char *cache_dir;   /* --cache-dir DIR: its disk tier (NULL: none) */
    long long cache_dir_mib; /* --cache-dir-mib MiB: the disk tier's budget (0: no limit) */
    const char *prompt, *prompt_file, *system; /* as given (-p, -f, --system) */
    const char *stop[GEN_MAX_STOPS];           /* -r TEXT, as given */
    int n_stop;
    eddy_spec_params spec;   /* --spec-type and the draft flags; spec.draft is opened with the session */
    const char *draft_model; /* -md FILE */
} gen_opts;

void gen_opts_init(gen_opts *o);
/* Parses argv[*i] if it is a generation flag (advancing *i past its value): 0 when it
 * was, -1 when it was not one, 1 after printing an error. */
int gen_opts_parse(gen_opts *o, int argc, char **argv, int *i);

/* The model's vocabulary (eddy_model_vocab), or NULL after printing an error naming
 * path when the file has no tokenizer. */
const eddy_vocab *cli_model_vocab(const eddy_model *m, const char *path);

typedef struct {
    eddy_model *m;
    const eddy_vocab *v; /* the model's */
    eddy_ctx *c;
    eddy_sampler *s;
    eddy_chat_options chat;
    char *template_owned;
    char *prompt, *system; /* -p or -f's bytes (NULL without either), --system; -e applied */
    size_t prompt_len;
    char *stop[GEN_MAX_STOPS]; /* -r's strings, -e applied */
    size_t stop_len[GEN_MAX_STOPS];
    int n_stop;
    eddy_gen_params gp;
    eddy_spec_params spec; /* gp.spec points here when speculative decoding is on */
    eddy_model *dm;        /* the draft model (-md), and its context */
    eddy_ctx *dc;
} gen_session;

/* Reads the prompt, loads the model, its vocabulary, a context and a sampler (the
 * seed drawn if none was given) and logs them at info level; 1 after printing an
 * error. */
int gen_session_open(const gen_opts *o, gen_session *g);
/* The most drafts per step p asks for, defaults applied (draft.c's). */
int gen_draft_max(const eddy_spec_params *p);
void gen_session_close(gen_session *g);
void gen_print_stats(const eddy_gen_stats *st);
/* The tokens of a prompt text[0 .. len): as plain text (BOS as the file asks), or,
 * with chat, a user message after the session's system message in the chat template
 * (text NUL-terminated then). *ids is freed with free(); 1 after printing an error. */
int gen_prompt_tokens(const gen_session *g, const char *text, size_t len, bool chat, eddy_token **ids, int64_t *n);

/* Stop strings (-r) over a stream of text: keeps the tail that a match could still
 * need. */
typedef struct {
    const gen_session *g;
    char *tail;         /* the last bytes of the output (at most the longest stop string - 1) */
    size_t n_tail, cap;
} gen_stopper;

/* How many of text's len bytes to print: len when no stop string ends in them, else
 * the bytes up to the end of the first match, with *stop set. */
size_t gen_stopper_feed(gen_stopper *st, const char *text, size_t len, bool *stop);
void gen_stopper_free(gen_stopper *st);

#endif
