/*
 * main.c — the eddy command: the table of subcommands (name, entry, help text),
 * `eddy --help` made from it, dispatch, and the checked close of standard output
 * after the subcommand; also the small helpers every subcommand uses (errors,
 * reading a file, numbers).
 *
 * A new subcommand: its cmd_NAME and usage_NAME (cli.h), one row in `commands`.
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

int cli_parse_device_flag(const char *a, const char *val, eddy_device *device, int *gpu_layers) {
    if (!strcmp(a, "--device")) {
        if (!val) return cli_error("--device needs a device (cpu or cuda)");
        if (!strcmp(val, "cpu")) *device = EDDY_DEVICE_CPU;
        else if (!strcmp(val, "cuda") || !strcmp(val, "cuda0") || !strcmp(val, "gpu")) *device = EDDY_DEVICE_CUDA;
        else return cli_error("--device: unknown device \"%s\" (cpu or cuda)", val);
        (void)gpu_layers; /* an -ngl before it still counts */
        return 0;
    }
    if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers") || !strcmp(a, "--gpu-layers")) {
        long long n;
        if (cli_parse_int(a, val, 0, 1 << 20, &n)) return 1;
        *device = n > 0 ? EDDY_DEVICE_CUDA : EDDY_DEVICE_CPU;
        *gpu_layers = (int)n;
        return 0;
    }
    return -1;
}

/* ==== Standard output ==== */

static int out_errno; /* the reason of the first failed write; 0: none yet */

bool cli_out(const void *p, size_t n) {
    if (out_errno) return false;
    errno = 0;
    if ((n && fwrite(p, 1, n, stdout) != n) || fflush(stdout) != 0) out_errno = errno ? errno : EIO;
    return !out_errno;
}

/* Flushes and closes stdout: 0, or 1 after "writing standard output: REASON". */
static int close_stdout(void) {
    errno = 0;
    if (fflush(stdout) != 0 && !out_errno) out_errno = errno ? errno : EIO;
    if (ferror(stdout) && !out_errno) out_errno = EIO;
    errno = 0;
    if (fclose(stdout) != 0 && !out_errno) out_errno = errno ? errno : EIO;
    return out_errno ? cli_error("writing standard output: %s", strerror(out_errno)) : 0;
}

/* ==== Subcommands ==== */

static int cmd_version(int argc, char **argv);
static int cmd_help(int argc, char **argv);

static const char usage_version[] =
    "eddy version\n"
    "        version, the CPU features eddy detected and uses, and the ISA level its kernels run at\n"
    "        (\"kernels: avx512\", \"avx2\", \"neon\" or \"ref\")\n";
static const char usage_help[] =
    "eddy help [COMMAND]\n"
    "        this text, or one command's part of it (as eddy COMMAND --help does)\n";

/* In the order `eddy --help` (and the README) lists them. */
static const struct {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the name; returns the exit status */
    const char *usage;
} commands[] = {
    {"inspect", cmd_inspect, usage_inspect},
    {"run", cmd_run, usage_run},
    {"batch", cmd_batch, usage_batch},
    {"chat", cmd_chat, usage_chat},
#ifndef EDDY_NO_SERVER
    {"serve", cmd_serve, usage_serve},
#endif
    {"tokenize", cmd_tokenize, usage_tokenize},
    {"detokenize", cmd_detokenize, usage_detokenize},
    {"chat-format", cmd_chat_format, usage_chat_format},
    {"perplexity", cmd_perplexity, usage_perplexity},
    {"logits", cmd_logits, usage_logits},
    {"bench", cmd_bench, usage_bench},
    {"version", cmd_version, usage_version},
    {"help", cmd_help, usage_help},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const char usage_head[] = "usage: eddy COMMAND [ARGS]   (eddy COMMAND --help: that command's part of this text)\n\n";

static void usage_all(FILE *out) {
    fputs(usage_head, out);
    for (size_t i = 0; i < N_COMMANDS; i++) fputs(commands[i].usage, out);
}

/* Through cli_out, so that a failed write is reported with its own reason. */
int cli_usage(const char *cmd) {
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(commands[i].name, cmd)) {
            cli_out(commands[i].usage, strlen(commands[i].usage));
            return 0;
        }
    cli_out(usage_head, strlen(usage_head));
    for (size_t i = 0; i < N_COMMANDS; i++) cli_out(commands[i].usage, strlen(commands[i].usage));
    return 0;
}

static int cmd_version(int argc, char **argv) {
    if (argc > 1) return cli_bad_arg("version", argv[1]);
    printf("eddy %s\ncpu features: %s\nkernels: %s\n", eddy_version(), eddy_cpu_features(), eddy_cpu_isa());
    return 0;
}

static int cmd_help(int argc, char **argv) {
    if (argc > 2) return cli_error("help: one command at a time");
    if (argc == 2) {
        for (size_t i = 0; i < N_COMMANDS; i++)
            if (!strcmp(commands[i].name, argv[1])) return cli_usage(argv[1]);
        if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return cli_usage("help");
        return cli_error("help: unknown command \"%s\" (eddy help lists them)", argv[1]);
    }
    usage_all(stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage_all(stderr);
        return 1;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--version")) cmd = "version";
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) cmd = "help";
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(commands[i].name, cmd)) continue;
        int rc = commands[i].run(argc - 1, argv + 1);
        return close_stdout() ? 1 : rc;
    }
    return cli_error("unknown command \"%s\" (run \"eddy help\")", cmd);
}
