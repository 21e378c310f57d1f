/*
 * gen_opts.c — the flags `eddy run` and `eddy chat` share (model, prompt, context,
 * threads, KV cache types, sampling, stop strings, chat template, llama.cpp's
 * spellings of them), opening everything a generation needs, and stop strings.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ==== Flags ==== */

void gen_opts_init(gen_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = -1;
    o->enable_thinking = -1;
    o->sp = eddy_sampler_default_params();
    o->seed_random = true;
    o->cache_mib = -1;
    o->cache_dir_mib = 4096;
}

/* a is one of the spellings in the NULL-terminated list */
static bool is(const char *a, const char *const *names) {
    for (; *names; names++)
        if (!strcmp(a, *names)) return true;
    return false;
}
#define IS(a, ...) is(a, (const char *const[]){__VA_ARGS__, NULL})

int gen_opts_parse(gen_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *val = *i + 1 < argc ? argv[*i + 1] : NULL;
    double d;
    long long v;
    /* flags without a value */
    if (!strcmp(a, "--think") || !strcmp(a, "--no-think")) {
        o->enable_thinking = a[2] == 't';
        return 0;
    }
    if (IS(a, "-e", "--escape") || IS(a, "--no-escape")) {
        o->escape = a[2] != 'n';
        return 0;
    }
    if (!strcmp(a, "--ignore-eos")) return o->ignore_eos = true, 0;
    if (!strcmp(a, "--draft-fixed")) return o->spec.fixed = true, 0;
    if (!strcmp(a, "--no-mmap")) return o->no_mmap = true, 0;
    if (!strcmp(a, "--mlock")) return o->mlock = true, 0;
    if (!strcmp(a, "--jinja")) return 0; /* llama.cpp's switch to Jinja templates: eddy always runs them */
    int kv = cli_parse_kv_flag(a, val, &o->type_k, &o->type_v);
    if (kv < 0) kv = cli_parse_device_flag(a, val, &o->device, &o->gpu_layers);
    if (kv >= 0) {
        if (kv == 0) (*i)++;
        return kv;
    }
    /* flags with a value */
    if (IS(a, "-m", "--model")) {
        if (!val) return cli_error("%s needs a model file", a);
        o->model = val;
    } else if (IS(a, "-p", "--prompt")) {
        if (!val) return cli_error("%s needs a prompt", a);
        o->prompt = val;
    } else if (IS(a, "-f", "--file")) {
        if (!val) return cli_error("%s needs a file name", a);
        o->prompt_file = val;
    } else if (IS(a, "--system", "-sys", "--system-prompt")) {
        if (!val) return cli_error("%s needs a text", a);
        o->system = val;
    } else if (IS(a, "-r", "--reverse-prompt")) {
        if (!val || !*val) return cli_error("%s needs a text to stop at", a);
        if (o->n_stop == GEN_MAX_STOPS) return cli_error("%s: at most %d stop strings", a, GEN_MAX_STOPS);
        o->stop[o->n_stop++] = val;
    } else if (!strcmp(a, "--chat-template")) {
        if (!val) return cli_error("%s needs a template name or file", a);
        o->chat_template = val;
    } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
        if (cli_parse_int(a, val, -1, 1 << 30, &o->n_predict)) return 1;
    } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        if (cli_parse_int(a, val, 1, 1024, &o->threads)) return 1;
    } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
        if (cli_parse_int(a, val, 1, 1 << 24, &o->n_ctx)) return 1;
    } else if (IS(a, "-b", "--batch-size")) {
        if (cli_parse_int(a, val, 1, 1 << 20, &o->n_batch)) return 1;
    } else if (IS(a, "-ub", "--ubatch-size")) {
        if (cli_parse_int(a, val, 1, 1 << 20, &o->n_ubatch)) return 1;
    } else if (IS(a, "--cache-ram", "-cram")) {
        if (cli_parse_int(a, val, 0, (long long)1 << 30, &o->cache_mib)) return 1;
    } else if (!strcmp(a, "--cache-dir")) {
        if (!val || !*val) return cli_error("%s needs a directory", a);
        o->cache_dir = val;
    } else if (!strcmp(a, "--cache-dir-mib")) {
        if (cli_parse_int(a, val, 0, (long long)1 << 40, &o->cache_dir_mib)) return 1;
    } else if (IS(a, "--seed", "-s")) {
        if (cli_parse_int(a, val, -1, (long long)1 << 62, &v)) return 1;
        o->seed_random = v < 0;
        o->sp.seed = v < 0 ? 0 : (uint64_t)v;
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
    } else if (!strcmp(a, "--spec-type")) {
        if (!val) return cli_error("%s needs none, ngram, draft or mtp", a);
        /* llama.cpp's newer names where the meaning is the same */
        if (!strcmp(val, "none")) o->spec.type = EDDY_SPEC_NONE;
        else if (IS(val, "ngram", "ngram-simple")) o->spec.type = EDDY_SPEC_NGRAM;
        else if (IS(val, "draft", "draft-simple")) o->spec.type = EDDY_SPEC_DRAFT;
        else if (IS(val, "mtp", "draft-mtp")) o->spec.type = EDDY_SPEC_MTP;
        else return cli_error("%s \"%s\": expected none, ngram, draft or mtp", a, val);
    } else if (IS(a, "-md", "--model-draft", "--spec-draft-model")) {
        if (!val) return cli_error("%s needs a model file", a);
        o->draft_model = val;
        if (o->spec.type == EDDY_SPEC_NONE) o->spec.type = EDDY_SPEC_DRAFT;
    } else if (IS(a, "--lookup-ngram", "--spec-ngram-simple-size-n")) {
        if (cli_parse_int(a, val, 1, 64, &v)) return 1;
        o->spec.ngram = (int)v;
        if (o->spec.type == EDDY_SPEC_NONE) o->spec.type = EDDY_SPEC_NGRAM;
    } else if (IS(a, "--draft-max", "--draft", "--draft-n", "--spec-draft-n-max")) {
        if (cli_parse_int(a, val, 1, 256, &v)) return 1;
        o->spec.draft_max = (int)v;
    } else if (IS(a, "--draft-min", "--draft-n-min", "--spec-draft-n-min")) {
        if (cli_parse_int(a, val, 0, 256, &v)) return 1;
        o->spec.draft_min = (int)v;
    } else if (IS(a, "--draft-p-min", "--spec-draft-p-min")) {
        if (cli_parse_float(a, val, 0, 1, &d)) return 1;
        o->spec.p_min = d > 0 ? (float)d : -1.0f; /* the library's 0 is its default */
    } else if (!strcmp(a, "--frequency-penalty")) {
        if (cli_parse_float(a, val, -100, 100, &d)) return 1;
        o->sp.frequency_penalty = (float)d;
    } else {
        return -1;
    }
    (*i)++;
    return 0;
}

/* ==== Texts from the flags ==== */

/* A copy of s[0 .. len), escapes processed when asked; NULL when memory runs out. */
static char *text_copy(const char *s, size_t len, bool escape, size_t *out_len) {
    char *t = malloc(len + 1);
    if (!t) return NULL;
    memcpy(t, s, len);
    t[len] = '\0';
    *out_len = escape ? cli_unescape(t, len) : len;
    t[*out_len] = '\0';
    return t;
}

/* -p or -f, --system and -r as bytes, -e applied; a chat's texts hold no NUL byte. */
static int read_texts(const gen_opts *o, gen_session *g) {
    if (o->prompt_file) {
        size_t len;
        char *raw = cli_read_file(o->prompt_file, &len);
        if (!raw && errno == ENOMEM) return cli_error("out of memory");
        if (!raw) return cli_error("%s: cannot read the prompt file (%s)", o->prompt_file, strerror(errno));
        g->prompt = o->escape ? text_copy(raw, len, true, &g->prompt_len) : raw;
        if (o->escape) free(raw);
        else g->prompt_len = len;
    } else if (o->prompt) {
        g->prompt = text_copy(o->prompt, strlen(o->prompt), o->escape, &g->prompt_len);
    }
    if ((o->prompt || o->prompt_file) && !g->prompt) return cli_error("out of memory");
    size_t len;
    if (o->system && !(g->system = text_copy(o->system, strlen(o->system), o->escape, &len)))
        return cli_error("out of memory");
    if (o->chat && g->prompt && cli_check_no_nul(o->prompt_file ? o->prompt_file : "the prompt", g->prompt, g->prompt_len))
        return 1;
    if (g->system && cli_check_no_nul("--system", g->system, len)) return 1;
    for (int i = 0; i < o->n_stop; i++) {
        if (!(g->stop[i] = text_copy(o->stop[i], strlen(o->stop[i]), o->escape, &g->stop_len[i])))
            return cli_error("out of memory");
        g->n_stop++;
        if (g->stop_len[i] == 0) return cli_error("-r: \"%s\" is an empty text", o->stop[i]);
    }
    return 0;
}

/* ==== Sessions ==== */

const eddy_vocab *cli_model_vocab(const eddy_model *m, const char *path) {
    const eddy_vocab *v = eddy_model_vocab(m);
    if (!v) cli_error("%s: the file has no tokenizer (tokenizer.ggml.tokens is missing)", path);
    return v;
}

int gen_draft_max(const eddy_spec_params *p) {
    return p->draft_max > 0 ? p->draft_max : p->type == EDDY_SPEC_MTP ? 3 : 16; /* draft.c's defaults */
}

int gen_session_open(const gen_opts *o, gen_session *g) {
    memset(g, 0, sizeof *g);
    if (read_texts(o, g)) {
        gen_session_close(g);
        return 1;
    }
    eddy_error err;
    /* llama.cpp's -b is the logical batch and -ub the physical one; eddy's n_batch is
     * the tokens of one forward step, the physical one */
    /* a verify holds a state per token: the draft and the token before it; the snapshots
     * (chat's undo stack) are kept long and restored now and then: in host memory on a GPU */
    const int spec_states = o->spec.type != EDDY_SPEC_NONE ? gen_draft_max(&o->spec) + 1 : 0;
    eddy_ctx_params cp = {.n_ctx = o->n_ctx, .n_threads = (int)o->threads,
                          .n_batch = o->n_ubatch > 0 ? o->n_ubatch : o->n_batch, .type_k = o->type_k,
                          .type_v = o->type_v, .n_snapshots = o->n_snapshots, .n_verify = spec_states,
                          .cache_bytes = o->cache_mib > 0 ? (size_t)o->cache_mib << 20 : 0,
                          .cache_dir = o->cache_dir, .cache_dir_bytes = (size_t)o->cache_dir_mib << 20,
                          .mtp = o->spec.type == EDDY_SPEC_MTP, .device = o->device, .gpu_layers = o->gpu_layers,
                          .host_snapshots = true,
                          .cache_fit = o->cache_fit || o->cache_mib < 0};
    /* the disk tier stages its states in memory: 256 MiB unless --cache-ram says */
    if (o->cache_dir && o->cache_mib < 0) cp.cache_bytes = (size_t)256 << 20;
    if (o->cache_dir && o->cache_mib == 0) {
        gen_session_close(g);
        return cli_error("--cache-dir needs a memory budget too (--cache-ram 0 turns the cache off)");
    }
    if (o->spec.type == EDDY_SPEC_DRAFT && !o->draft_model) {
        gen_session_close(g);
        return cli_error("--spec-type draft needs a draft model (-md FILE)");
    }
    eddy_sampler_params sp = o->sp;
    if (o->seed_random) sp.seed = cli_random_seed();
    g->gp = (eddy_gen_params){.n_predict = o->n_predict, .ignore_eog = o->ignore_eos};
    if (cli_chat_template(o->chat_template, &g->chat.template_text, &g->template_owned)) {
        gen_session_close(g);
        return 1;
    }
    g->chat.add_generation_prompt = true;
    g->chat.enable_thinking = o->enable_thinking;
    if (o->no_mmap && setenv("EDDY_NO_MMAP", "1", 1) != 0) {
        gen_session_close(g);
        return cli_error("--no-mmap: cannot set EDDY_NO_MMAP (%s)", strerror(errno));
    }
    if (eddy_model_load(o->model, &g->m, &err) != EDDY_OK) goto fail;
    cli_log_model(o->model, g->m);
    if (o->mlock) cli_lock_model(o->model);
    if (!(g->v = cli_model_vocab(g->m, o->model))) {
        gen_session_close(g);
        return 1;
    }
    if (eddy_ctx_new(g->m, &cp, &g->c, &err) != EDDY_OK) goto fail;
    cli_log_ctx(g->c, &cp);
    cli_warn_cache_fit(eddy_ctx_engine(g->c), cp.cache_bytes, "", "the model");
    if (o->spec.type != EDDY_SPEC_NONE) {
        g->spec = o->spec;
        g->gp.spec = &g->spec;
    }
    if (o->spec.type == EDDY_SPEC_DRAFT) {
        /* the draft model's own context: as long as the model's, one snapshot (the point
         * each round of drafts comes back to) */
        eddy_ctx_params dp = {.n_ctx = eddy_ctx_n_ctx(g->c), .n_threads = (int)o->threads, .n_snapshots = 1,
                              .device = o->device}; /* the draft runs where the model does */
        if (eddy_model_load(o->draft_model, &g->dm, &err) != EDDY_OK ||
            eddy_ctx_new(g->dm, &dp, &g->dc, &err) != EDDY_OK) {
            cli_error("-md %s: %s", o->draft_model, err.msg);
            gen_session_close(g);
            return 1;
        }
        cli_log_model(o->draft_model, g->dm);
        g->spec.draft = g->dc;
    }
    if (eddy_sampler_new(&sp, eddy_model_n_vocab(g->m), &g->s, &err) != EDDY_OK) goto fail;
    if (o->spec.type != EDDY_SPEC_NONE) { /* the settings and the draft's vocabulary, checked once here */
        eddy_spec *probe;
        if (eddy_spec_new(eddy_ctx_seq(g->c), g->s, &g->spec, &probe, &err) != EDDY_OK) goto fail;
        eddy_spec_free(probe);
    }
    char seed[96] = "";
    if (o->seed_random)
        snprintf(seed, sizeof seed, " (random: --seed %llu repeats this run)", (unsigned long long)sp.seed);
    eddy_log(EDDY_LOG_INFO,
             "sampling: seed %llu%s, temp %g, top-k %d, top-p %g, min-p %g, repeat penalty %g over %d, "
             "presence %g, frequency %g%s",
             (unsigned long long)sp.seed, seed, (double)sp.temp, (int)sp.top_k, (double)sp.top_p, (double)sp.min_p,
             (double)sp.repeat_penalty, (int)sp.repeat_last_n, (double)sp.presence_penalty,
             (double)sp.frequency_penalty, o->ignore_eos ? "; end-of-generation tokens ignored" : "");
    return 0;
fail:
    cli_error("%s", err.msg);
    gen_session_close(g);
    return 1;
}

void gen_session_close(gen_session *g) {
    eddy_ctx_free(g->dc);
    eddy_model_free(g->dm);
    eddy_sampler_free(g->s);
    eddy_ctx_free(g->c);
    eddy_model_free(g->m);
    free(g->template_owned);
    free(g->prompt);
    free(g->system);
    for (int i = 0; i < g->n_stop; i++) free(g->stop[i]);
    memset(g, 0, sizeof *g);
}

int gen_prompt_tokens(const gen_session *g, const char *text, size_t len, bool chat, eddy_token **ids, int64_t *n) {
    if (chat) {
        eddy_chat_message msgs[2];
        int64_t k = 0;
        if (g->system) msgs[k++] = (eddy_chat_message){"system", g->system};
        msgs[k++] = (eddy_chat_message){"user", text};
        return cli_chat_tokens(g->v, msgs, k, &g->chat, ids, n);
    }
    eddy_error err;
    eddy_token *t;
    if (eddy_tokenize(g->v, text, len, EDDY_TOKENIZE_ADD_SPECIAL, &t, n, &err) != EDDY_OK)
        return cli_error("%s", err.msg);
    *ids = malloc((size_t)(*n ? *n : 1) * sizeof **ids);
    if (*ids) memcpy(*ids, t, (size_t)*n * sizeof *t);
    eddy_buffer_free(t);
    return *ids ? 0 : cli_error("out of memory");
}

void gen_print_stats(const eddy_gen_stats *st) {
    double tp = st->prompt_seconds > 0 ? st->prompt_seconds : 1e-9;
    double tg = st->generate_seconds > 0 ? st->generate_seconds : 1e-9;
    fprintf(stderr, "eddy: prompt %lld tokens in %.2f s (%.1f t/s); generated %lld tokens in %.2f s (%.1f t/s)%s\n",
            (long long)st->n_prompt, st->prompt_seconds, st->n_prompt / tp, (long long)st->n_generated,
            st->generate_seconds, st->n_generated / tg, st->stop == EDDY_STOP_CONTEXT ? "; stopped: context full" : "");
    if (st->n_spec_steps > 0)
        fprintf(stderr, "eddy: speculative: %lld verify steps, %lld drafted, %lld accepted (%.1f%%), "
                "%.2f tokens per verify step\n", (long long)st->n_spec_steps, (long long)st->n_drafted,
                (long long)st->n_accepted, 100.0 * (double)st->n_accepted / (double)st->n_drafted,
                (double)(st->n_accepted + st->n_spec_steps) / (double)st->n_spec_steps);
}

/* ==== Stop strings ==== */

size_t gen_stopper_feed(gen_stopper *st, const char *text, size_t len, bool *stop) {
    const gen_session *g = st->g;
    *stop = false;
    if (!g->n_stop || !len) return len;
    size_t longest = 0;
    for (int i = 0; i < g->n_stop; i++)
        if (g->stop_len[i] > longest) longest = g->stop_len[i];
    /* the window: the kept tail, then text */
    size_t n = st->n_tail + len;
    if (n > st->cap) {
        char *p = realloc(st->tail, n);
        if (!p) return len; /* out of memory: no matching, the output goes on */
        st->tail = p, st->cap = n;
    }
    memcpy(st->tail + st->n_tail, text, len);
    size_t end = n + 1; /* the earliest end of a match inside the new bytes */
    for (int i = 0; i < g->n_stop; i++) {
        size_t k = g->stop_len[i];
        for (size_t at = 0; at + k <= n; at++) {
            if (at + k <= st->n_tail) continue; /* ended before: would have stopped then */
            if (at + k >= end) break;
            if (!memcmp(st->tail + at, g->stop[i], k)) {
                end = at + k;
                break;
            }
        }
    }
    size_t keep = longest - 1 < n ? longest - 1 : n;
    size_t out = len;
    if (end <= n) {
        *stop = true;
        out = end - st->n_tail;
    }
    memmove(st->tail, st->tail + n - keep, keep);
    st->n_tail = keep;
    return out;
}

void gen_stopper_free(gen_stopper *st) {
    free(st->tail);
    memset(st, 0, sizeof *st);
}
