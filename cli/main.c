/*
 * main.c — the eddy command: dispatches to a subcommand.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

char *cli_read_file(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
                errno = ENOMEM;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
        errno = EIO;
    }
    if (f != stdin) fclose(f);
    if (!buf) return NULL;
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

double cli_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cli_error(const char *fmt, ...) {
    fputs("eddy: error: ", stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

int cli_parse_int(const char *flag, const char *s, long long lo, long long hi, long long *out) {
    if (!s) return cli_error("%s needs a value", flag);
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0')
        return cli_error("%s: \"%s\" is not an integer", flag, s);
    if (v < lo || v > hi) return cli_error("%s: %lld is out of range %lld..%lld", flag, v, lo, hi);
    *out = v;
    return 0;
}

int cli_parse_float(const char *flag, const char *s, double lo, double hi, double *out) {
    if (!s) return cli_error("%s needs a value", flag);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || v != v) return cli_error("%s: \"%s\" is not a number", flag, s);
    if (v < lo || v > hi) return cli_error("%s: %g is out of range %g..%g", flag, v, lo, hi);
    *out = v;
    return 0;
}

int cli_parse_kv_flag(const char *a, const char *val, eddy_kv_type *type_k, eddy_kv_type *type_v) {
    eddy_kv_type *dst;
    if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k")) dst = type_k;
    else if (!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v")) dst = type_v;
    else return -1;
    if (!val) return cli_error("%s needs a cache type (f16 or f32)", a);
    if (!strcmp(val, "f16")) *dst = EDDY_KV_F16;
    else if (!strcmp(val, "f32")) *dst = EDDY_KV_F32;
    else return cli_error("%s: unsupported cache type \"%s\" (f16 or f32)", a, val);
    return 0;
}

static void usage(FILE *out) {
    fprintf(out,
            "usage: eddy COMMAND [ARGS]\n"
            "\n"
            "commands:\n"
            "  inspect MODEL.gguf [--max-items N]      metadata and tensor table\n"
            "  inspect MODEL.gguf --tensor NAME --out FILE\n"
            "                                          write one tensor as little-endian float32\n"
            "  run -m MODEL.gguf -p PROMPT [--chat [--system TEXT]] [-n N] [--temp T] [--top-k K]\n"
            "      [--top-p P] [--min-p P] [--seed S] [--repeat-penalty R] [-t THREADS] [-c CTX]\n"
            "      [-ctk f16|f32] [-ctv f16|f32]\n"
            "                                          generate a continuation, streamed to stdout\n"
            "  batch -m MODEL.gguf -f PROMPTS.txt [-np N] [-n N] [--jsonl] [options of run]\n"
            "                                          many prompts (one per line) decoded together\n"
            "  chat -m MODEL.gguf [--system TEXT] [options of run]\n"
            "                                          interactive chat (Ctrl-D quits, /reset starts over)\n"
            "  perplexity -m MODEL.gguf -f TEXT [-c CTX] [--chunks N] [-t N] [-ctk T] [-ctv T]\n"
            "                                          perplexity, chunked as llama.cpp's\n"
            "  logits -m MODEL.gguf --ids \"ID ID ...\" --out FILE [-t N] [-c CTX] [-ctk T] [-ctv T]\n"
            "                                          float32 logits for every position\n"
            "  bench -m MODEL.gguf [-p 512] [-n 128] [-t N] [-r REPS] [--json]\n"
            "                                          prefill and decode t/s, roofline fraction, peak RSS\n"
            "  bench -m MODEL.gguf --npl 1,2,4,8 [-p 512] [-n 128] [-t N] [-r REPS] [--json]\n"
            "                                          many sequences at once, as llama-batched-bench\n"
            "  bench --kernels [--json] [-t N] [--filter NAME]\n"
            "                                          kernel benchmarks against this machine's limits\n"
            "  tokenize -m MODEL.gguf [--file PATH | TEXT] [--no-special] [--no-bos]\n"
            "                                          token ids, space-separated, one line\n"
            "  detokenize -m MODEL.gguf [--skip-control] ID...\n"
            "                                          the text of token ids\n"
            "  chat-format -m MODEL.gguf [--system|--user|--assistant TEXT]... [--messages FILE.json]\n"
            "              [--chat-template NAME|FILE] [--no-generation-prompt] [--think|--no-think]\n"
            "                                          the prompt the model's chat template makes\n"
            "  version                                 version, detected CPU features, kernel ISA level\n"
            "  help                                    this text\n"
            "\n"
            "run, chat, logits and perplexity take -ctk/--cache-type-k and -ctv/--cache-type-v\n"
            "f16|f32: the element type of the KV cache's keys and values (default f16, as llama.cpp)\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 1;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "inspect")) return cmd_inspect(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "logits")) return cmd_logits(argc - 1, argv + 1);
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "batch")) return cmd_batch(argc - 1, argv + 1);
    if (!strcmp(cmd, "chat")) return cmd_chat(argc - 1, argv + 1);
    if (!strcmp(cmd, "perplexity")) return cmd_perplexity(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize")) return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "detokenize")) return cmd_detokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "chat-format")) return cmd_chat_format(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("eddy %s\ncpu features: %s\nkernels: %s\n", eddy_version(), eddy_cpu_features(), eddy_cpu_isa());
        return 0;
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    cli_error("unknown command \"%s\" (run \"eddy help\")", cmd);
    return 1;
}
