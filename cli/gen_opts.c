/*
 * gen_opts.c — the flags `eddy run` and `eddy chat` share (model, context, threads,
 * KV cache types, sampling, chat template) and opening everything a generation needs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void gen_opts_init(gen_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = -1;
    o->enable_thinking = -1;
    o->sp = eddy_sampler_default_params();
}

int gen_opts_parse(gen_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *val = *i + 1 < argc ? argv[*i + 1] : NULL;
    double d;
    long long v;
    if (!strcmp(a, "--think") || !strcmp(a, "--no-think")) {
        o->enable_thinking = a[2] == 't';
        return 0;
    }
    int kv = cli_parse_kv_flag(a, val, &o->type_k, &o->type_v);
    if (kv >= 0) {
        if (kv == 0) (*i)++;
        return kv;
    }
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
        if (!val) return cli_error("%s needs a model file", a);
        o->model = val;
    } else if (!strcmp(a, "--chat-template")) {
        if (!val) return cli_error("%s needs a template name or file", a);
        o->chat_template = val;
    } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
        if (cli_parse_int(a, val, -1, 1 << 30, &o->n_predict)) return 1;
    } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        if (cli_parse_int(a, val, 1, 1024, &o->threads)) return 1;
    } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
        if (cli_parse_int(a, val, 1, 1 << 24, &o->n_ctx)) return 1;
    } else if (!strcmp(a, "--seed") || !strcmp(a, "-s")) {
        if (cli_parse_int(a, val, 0, (long long)1 << 62, &v)) return 1;
        o->sp.seed = (uint64_t)v;
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

const eddy_vocab *cli_model_vocab(const eddy_model *m, const char *path) {
    const eddy_vocab *v = eddy_model_vocab(m);
    if (!v) cli_error("%s: the file has no tokenizer (tokenizer.ggml.tokens is missing)", path);
    return v;
}

int gen_session_open(const gen_opts *o, gen_session *g) {
    memset(g, 0, sizeof *g);
    eddy_error err;
    eddy_ctx_params cp = {.n_ctx = o->n_ctx, .n_threads = (int)o->threads, .type_k = o->type_k, .type_v = o->type_v};
    if (cli_chat_template(o->chat_template, &g->chat.template_text, &g->template_owned)) return 1;
    g->chat.add_generation_prompt = true;
    g->chat.enable_thinking = o->enable_thinking;
    if (eddy_model_load(o->model, &g->m, &err) != EDDY_OK) {
        cli_error("%s", err.msg);
        gen_session_close(g);
        return 1;
    }
    if (!(g->v = cli_model_vocab(g->m, o->model))) {
        gen_session_close(g);
        return 1;
    }
    if (eddy_ctx_new(g->m, &cp, &g->c, &err) != EDDY_OK ||
        eddy_sampler_new(&o->sp, eddy_model_n_vocab(g->m), &g->s, &err) != EDDY_OK) {
        cli_error("%s", err.msg);
        gen_session_close(g);
        return 1;
    }
    return 0;
}

void gen_session_close(gen_session *g) {
    eddy_sampler_free(g->s);
    eddy_ctx_free(g->c);
    eddy_model_free(g->m);
    free(g->template_owned);
    memset(g, 0, sizeof *g);
}

void gen_print_stats(const eddy_gen_stats *st) {
    double tp = st->prompt_seconds > 0 ? st->prompt_seconds : 1e-9;
    double tg = st->generate_seconds > 0 ? st->generate_seconds : 1e-9;
    fprintf(stderr, "eddy: prompt %lld tokens in %.2f s (%.1f t/s); generated %lld tokens in %.2f s (%.1f t/s)%s\n",
            (long long)st->n_prompt, st->prompt_seconds, st->n_prompt / tp, (long long)st->n_generated,
            st->generate_seconds, st->n_generated / tg, st->stop == EDDY_STOP_CONTEXT ? "; stopped: context full" : "");
}
