/*
 * cmd_run.c — `eddy run`: generate a continuation of a prompt.
 *
 *   eddy run -m MODEL.gguf -p PROMPT [-f FILE] [-n N] [--temp T] [--top-k K] [--top-p P]
 *            [--min-p P] [--repeat-penalty R] [--repeat-last-n N] [--presence-penalty P]
 *            [--frequency-penalty F] [--seed S] [-t THREADS] [-c CTX]
 *
 * The continuation streams to stdout as it is generated (never half a UTF-8
 * character); prompt and generation speed go to stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct {
    const char *model, *prompt, *prompt_file;
    long long n_predict, threads, n_ctx, seed;
    eddy_sampler_params sp;
} run_opts;

static int on_token(void *user, eddy_token t, const char *text, size_t len) {
    (void)user, (void)t;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}

/* Parses the shared generation flags; returns 1 on error, 0 when flag was one of them,
 * -1 when it was not. */
static int parse_gen_flag(run_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *val = *i + 1 < argc ? argv[*i + 1] : NULL;
    double d;
    long long v;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
        if (!val) return cli_error("%s needs a model file", a);
        o->model = val;
    } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
        if (cli_parse_int(a, val, -1, 1 << 30, &o->n_predict)) return 1;
    } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        if (cli_parse_int(a, val, 1, 1024, &o->threads)) return 1;
    } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
        if (cli_parse_int(a, val, 1, 1 << 24, &o->n_ctx)) return 1;
    } else if (!strcmp(a, "--seed") || !strcmp(a, "-s")) {
        if (cli_parse_int(a, val, 0, (long long)1 << 62, &o->seed)) return 1;
        o->sp.seed = (uint64_t)o->seed;
    } else if (!strcmp(a, "--temp")) {
        if (cli_parse_float(a, val, 0, 100, &d)) return 1;
        o->sp.temp = (float)d;
    } else if (!strcmp(a, "--top-k")) {
        if (cli_parse_int(a, val, 0, 1 << 30, &v)) return 1;
        o->sp.top_k = (int32_t)v;
    } else if (!strcmp(a, "--top-p")) {
        if (cli_parse_float(a, val, 1e-6, 1, &d)) return 1;
        o->sp.top_p = (float)d;
    } else if (!strcmp(a, "--min-p")) {
        if (cli_parse_float(a, val, 0, 1, &d)) return 1;
        o->sp.min_p = (float)d;
    } else if (!strcmp(a, "--repeat-penalty")) {
        if (cli_parse_float(a, val, 1e-3, 100, &d)) return 1;
        o->sp.repeat_penalty = (float)d;
    } else if (!strcmp(a, "--repeat-last-n")) {
        if (cli_parse_int(a, val, 0, 1 << 20, &v)) return 1;
        o->sp.repeat_last_n = (int32_t)v;
    } else if (!strcmp(a, "--presence-penalty")) {
        if (cli_parse_float(a, val, -100, 100, &d)) return 1;
        o->sp.presence_penalty = (float)d;
    } else if (!strcmp(a, "--frequency-penalty")) {
        if (cli_parse_float(a, val, -100, 100, &d)) return 1;
        o->sp.frequency_penalty = (float)d;
    } else {
        return -1;
    }
    (*i)++;
    return 0;
}

static char *read_text_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len - 1 == 0) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger) free(buf);
            buf = bigger;
        }
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    return buf;
}

int cmd_run(int argc, char **argv) {
    run_opts o = {.n_predict = -1, .sp = eddy_sampler_default_params()};
    for (int i = 1; i < argc; i++) {
        int r = parse_gen_flag(&o, argc, argv, &i);
        if (r > 0) return 1;
        if (r == 0) continue;
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!val) return cli_error("%s needs a prompt", a);
            o.prompt = val, i++;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!val) return cli_error("%s needs a file name", a);
            o.prompt_file = val, i++;
        } else {
            return cli_error("run: unknown option \"%s\"", a);
        }
    }
    if (!o.model) return cli_error("run: no model given (-m MODEL.gguf)");
    if (!o.prompt && !o.prompt_file) return cli_error("run: no prompt given (-p PROMPT or -f FILE)");
    if (o.prompt && o.prompt_file) return cli_error("run: give -p or -f, not both");
    char *file_text = NULL;
    if (o.prompt_file && !(file_text = read_text_file(o.prompt_file)))
        return cli_error("%s: cannot read the prompt file", o.prompt_file);
    const char *prompt = file_text ? file_text : o.prompt;

    eddy_error err;
    eddy_model *m = NULL;
    eddy_vocab *v = NULL;
    eddy_ctx *c = NULL;
    eddy_sampler *s = NULL;
    eddy_token *ids = NULL;
    int64_t n_ids = 0;
    int rc = 0;
    eddy_ctx_params cp = {.n_ctx = o.n_ctx, .n_threads = (int)o.threads};
    if (eddy_model_load(o.model, &m, &err) != EDDY_OK || eddy_vocab_load(eddy_model_gguf(m), &v, &err) != EDDY_OK ||
        eddy_tokenize(v, prompt, strlen(prompt), EDDY_TOKENIZE_ADD_SPECIAL, &ids, &n_ids, &err) != EDDY_OK ||
        eddy_ctx_new(m, &cp, &c, &err) != EDDY_OK ||
        eddy_sampler_new(&o.sp, eddy_model_n_vocab(m), &s, &err) != EDDY_OK) {
        rc = cli_error("%s", err.msg);
    } else if (n_ids == 0) {
        rc = cli_error("run: the prompt is empty");
    } else if (n_ids >= eddy_ctx_n_ctx(c)) {
        rc = cli_error("run: the prompt has %lld tokens, the context holds %lld (raise -c)", (long long)n_ids,
                       (long long)eddy_ctx_n_ctx(c));
    } else {
        eddy_gen_stats st;
        if (eddy_generate(c, v, s, ids, n_ids, o.n_predict, on_token, NULL, &st, &err) != EDDY_OK) {
            fputc('\n', stdout);
            rc = cli_error("%s", err.msg);
        } else {
            fputc('\n', stdout);
            fflush(stdout);
            fprintf(stderr, "eddy: prompt %lld tokens in %.2f s (%.1f t/s); generated %lld tokens in %.2f s (%.1f t/s)%s\n",
                    (long long)st.n_prompt, st.prompt_seconds, st.n_prompt / (st.prompt_seconds > 0 ? st.prompt_seconds : 1e-9),
                    (long long)st.n_generated, st.generate_seconds,
                    st.n_generated / (st.generate_seconds > 0 ? st.generate_seconds : 1e-9),
                    st.stop == EDDY_STOP_CONTEXT ? "; stopped: context full" : "");
        }
    }
    eddy_buffer_free(ids);
    eddy_sampler_free(s);
    eddy_ctx_free(c);
    eddy_vocab_free(v);
    eddy_model_free(m);
    free(file_text);
    return rc;
}
