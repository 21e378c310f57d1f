/*
 * cli.h — shared pieces of the eddy command: error reporting and the subcommands.
 *
 * The CLI uses only include/eddy.h; every subcommand returns the process exit
 * status (0 success, 1 error) and reports errors as one line "eddy: error: ...".
 */
#ifndef EDDY_CLI_H
#define EDDY_CLI_H

#include "eddy.h"

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
int cli_error(const char *fmt, ...); /* prints "eddy: error: ..." and returns 1 */
/* A whole file ("-": stdin), NUL-terminated; *len (may be NULL) gets its size. NULL,
 * with errno set, when it cannot be opened or read or memory runs out; prints nothing
 * (each caller says what the file was for). */
char *cli_read_file(const char *path, size_t *len);

/* Parses a non-negative integer argument; on failure prints an error naming flag. */
int cli_parse_int(const char *flag, const char *s, long long lo, long long hi, long long *out);

/* Parses a number in [lo, hi]; on failure prints an error naming flag. */
int cli_parse_float(const char *flag, const char *s, double lo, double hi, double *out);

/* -ctk/--cache-type-k and -ctv/--cache-type-v TYPE (llama.cpp's spelling; TYPE f16
 * or f32): -1 when a is neither, 0 after storing the type in *type_k or *type_v,
 * 1 after printing an error naming the flag and the value. */
int cli_parse_kv_flag(const char *a, const char *val, eddy_kv_type *type_k, eddy_kv_type *type_v);

/* The conversation formatted by the chat template and tokenized (special tokens
 * matched; BOS added when the vocabulary wants it and the template did not write
 * it). *out is freed with free(). Prints the error and returns 1 on failure. */
int cli_chat_tokens(const eddy_vocab *v, const eddy_chat_message *msgs, int64_t n, const eddy_chat_options *opt,
                    eddy_token **out, int64_t *n_out);
/* --chat-template ARG: a built-in template's name or a file to read (*owned, freed
 * by the caller). NULL arg: the model's own template. */
int cli_chat_template(const char *arg, const char **tmpl, char **owned);

/* ==== Generation flags shared by run and chat ==== */

typedef struct {
    const char *model, *chat_template;
    long long n_predict, threads, n_ctx;
    int enable_thinking; /* -1: the template's default */
    eddy_kv_type type_k, type_v;
    eddy_sampler_params sp;
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
} gen_session;

/* Loads the model, its vocabulary, a context and a sampler; 1 after printing an error. */
int gen_session_open(const gen_opts *o, gen_session *g);
void gen_session_close(gen_session *g);
void gen_print_stats(const eddy_gen_stats *st);

int cmd_inspect(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_chat_format(int argc, char **argv);

#endif
