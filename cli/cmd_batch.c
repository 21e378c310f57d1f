/*
 * cmd_batch.c — `eddy batch`: many prompts decoded together on one engine.
 *
 *   eddy batch -m MODEL.gguf -f PROMPTS.txt [-np N] [-n N] [--jsonl] [--chat [--system TEXT]]
 *              [the sampling, context, thread and cache flags of run]
 *
 * One prompt per line of PROMPTS.txt (empty lines are skipped). Up to N sequences run
 * at once (-np, default: the number of prompts, at most 8); each forward step carries
 * the new prompts' tokens and one token of every running sequence, so the weights are
 * read once per step for all of them. When a sequence ends, the next prompt takes its
 * slot. Each prompt gets its own sampler with the same seed, and the kernels compute
 * a row the same way whatever else is in the batch, so each output is the one
 * `eddy run` gives for that prompt alone. Outputs go to stdout in input order once all
 * are done (--jsonl: one JSON object per line); per-sequence and aggregate speeds go
 * to stderr. A prompt that cannot run (too long for the context) is reported and the
 * others carry on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct {
    const char *text;    /* the prompt line, NUL-terminated in the file's buffer */
    eddy_token *ids;     /* (n_ids) */
    int64_t n_ids;
    eddy_seq *seq;       /* while running */
    eddy_sampler *s;
    eddy_detok *d;
    char *out;           /* the continuation, (out_len) bytes */
    size_t out_len, out_cap;
    int64_t n_gen;
    eddy_token next;     /* the token to feed in the next step */
    eddy_spec *spec;     /* speculative decoding (--spec-type ngram), while running */
    int64_t row0, n_rows; /* its rows in a verify step's logits */
    bool started, done;
    const char *stop;    /* why it ended: "eog", "length", "context", or an error */
    double t_first, t_end; /* first sampled token, end */
} job;

static bool append(job *j, const char *text, size_t len) {
    if (j->out_len + len + 1 > j->out_cap) {
        size_t cap = j->out_cap ? j->out_cap : 256;
        while (cap < j->out_len + len + 1) cap *= 2;
        char *bigger = realloc(j->out, cap);
        if (!bigger) return false;
        j->out = bigger, j->out_cap = cap;
    }
    memcpy(j->out + j->out_len, text, len);
    j->out_len += len;
    j->out[j->out_len] = '\0';
    return true;
}

/* ==== Prompts ==== */

/* Splits text into its non-empty lines (a trailing '\r' dropped), in place. */
static int64_t split_lines(char *text, size_t len, job **out) {
    int64_t n = 0, cap = 16;
    job *jobs = calloc((size_t)cap, sizeof *jobs);
    for (size_t i = 0; jobs && i < len;) {
        size_t e = i;
        while (e < len && text[e] != '\n') e++;
        size_t end = e > i && text[e - 1] == '\r' ? e - 1 : e;
        text[end] = '\0';
        if (end > i) {
            if (n == cap) {
                job *bigger = realloc(jobs, (size_t)(cap *= 2) * sizeof *jobs);
                if (!bigger) {
                    free(jobs);
                    return -1;
                }
                jobs = bigger;
            }
            memset(&jobs[n], 0, sizeof jobs[n]);
            jobs[n++].text = text + i;
        }
        i = e + 1;
    }
    *out = jobs;
    return jobs ? n : -1;
}

/* ==== The loop ==== */

typedef struct {
    eddy_engine *e;
    const eddy_model *m;
    const eddy_vocab *v;
    const eddy_sampler_params *sp;
    int64_t n_predict, n_ctx, n_vocab;
    job **active;        /* (np) the running jobs, in batch order */
    int64_t n_active;
    eddy_token *tokens;  /* batch buffers, grown as needed */
    eddy_seq **owner;
    int8_t *want;
    int64_t cap;
    float *logits;       /* (np, n_vocab); with drafts (np * (draft_max + 1), n_vocab) */
    const eddy_spec_params *spec; /* NULL: no drafts */
    int64_t draft_max;   /* drafts per job and step */
    eddy_token *drafted; /* (np, draft_max + 1) scratch: each job's drafts, then its tokens */
    /* the best logits the sampler looks at, when that is all it looks at (greedy: 1; a
     * top-k without penalties; 0: none such), and a step's (rows, k_top) best tokens, their
     * logits and (rows) how many, which the engine then gives instead of the logits (rows:
     * np, or a verify's np (draft_max + 1)) */
    int32_t k_top;
    eddy_token *top_ids;
    float *top_logits;
    int32_t *top_counts;
    /* (np) a step's drafts: eddy_spec_draft_many's arguments */
    eddy_spec **d_spec;
    eddy_token *d_t, **d_out;
    int64_t *d_max, *d_n;
    int64_t steps, n_drafted, n_accepted;
} sched;

static void finish(sched *sc, job *j, const char *stop) {
    if (j->d) {
        const char *text;
        size_t len;
        eddy_detok_flush(j->d, &text, &len);
        if (len && !append(j, text, len)) stop = "out of memory";
    }
    j->stop = stop;
    j->done = true;
    j->t_end = cli_now_s();
    if (j->spec) {
        int64_t st, dr, ac;
        eddy_spec_counts(j->spec, &st, &dr, &ac);
        sc->steps += st, sc->n_drafted += dr, sc->n_accepted += ac;
        eddy_spec_free(j->spec);
        j->spec = NULL;
    }
    eddy_detok_free(j->d);
    eddy_sampler_free(j->s);
    eddy_seq_free(j->seq);
    j->d = NULL, j->s = NULL, j->seq = NULL;
}

/* Gives job j a sequence, a sampler and a detokenizer; false (j finished with the
 * reason) when it cannot run. */
static bool start(sched *sc, job *j) {
    eddy_error err;
    j->started = true;
    if (j->n_ids == 0) return finish(sc, j, "empty prompt"), false;
    if (j->n_ids >= sc->n_ctx) return finish(sc, j, "prompt longer than the context (raise -c)"), false;
    if (eddy_seq_new(sc->e, &j->seq, &err) != EDDY_OK || eddy_sampler_new(sc->sp, sc->n_vocab, &j->s, &err) != EDDY_OK ||
        eddy_detok_new(sc->v, EDDY_DETOK_SKIP_CONTROL, &j->d, &err) != EDDY_OK ||
        (sc->spec && eddy_spec_new(j->seq, j->s, sc->spec, &j->spec, &err) != EDDY_OK)) {
        cli_error("%s", err.msg);
        return finish(sc, j, "could not start"), false;
    }
    return true;
}

static bool reserve(sched *sc, int64_t n) {
    if (n <= sc->cap) return true;
    int64_t cap = sc->cap ? sc->cap : 256;
    while (cap < n) cap *= 2;
    eddy_token *t = realloc(sc->tokens, (size_t)cap * sizeof *t);
    if (t) sc->tokens = t;
    eddy_seq **o = realloc(sc->owner, (size_t)cap * sizeof *o);
    if (o) sc->owner = o;
    int8_t *w = realloc(sc->want, (size_t)cap);
    if (w) sc->want = w;
    if (!t || !o || !w) return false;
    sc->cap = cap;
    return true;
}

/* Job j generated t: its text, its count; false when it must end (finished). */
static bool take(sched *sc, job *j, eddy_token t) {
    eddy_error err;
    j->n_gen++;
    const char *text;
    size_t len;
    if (eddy_detok_push(j->d, t, &text, &len, &err) != EDDY_OK || !append(j, text, len)) {
        finish(sc, j, "out of memory");
        return false;
    }
    return true;
}

/* After job j's token j->next went in (and it sampled what followed): ends it at the
 * length limit or a full context. */
static void go_on_or_end(sched *sc, job *j) {
    if (sc->n_predict >= 0 && j->n_gen >= sc->n_predict) finish(sc, j, "length");
    else if (eddy_seq_n_pos(j->seq) >= sc->n_ctx) finish(sc, j, "context");
}

/* One verify step over every active job (all past their prompts): each job's next token
 * and its drafts; then each keeps the drafts it agrees with and one token of its own. */
static int spec_step(sched *sc) {
    eddy_error err;
    /* every job's drafts in one call (MTP drafts of all jobs run together) */
    const int64_t na = sc->n_active;
    for (int64_t k = 0; k < na; k++) {
        job *j = sc->active[k];
        const int64_t left = sc->n_predict >= 0 ? sc->n_predict - j->n_gen : sc->draft_max;
        sc->d_spec[k] = j->spec, sc->d_t[k] = j->next, sc->d_max[k] = left < sc->draft_max ? left : sc->draft_max;
        sc->d_out[k] = sc->drafted + k * (sc->draft_max + 1);
    }
    if (eddy_spec_draft_many(sc->d_spec, na, sc->d_t, sc->d_max, sc->d_out, sc->d_n, &err) != EDDY_OK)
        return cli_error("%s", err.msg);
    int64_t n = 0;
    for (int64_t k = 0; k < na; k++) {
        job *j = sc->active[k];
        const int64_t nd = sc->d_n[k];
        if (!reserve(sc, n + nd + 1)) return cli_error("out of memory");
        j->row0 = n, j->n_rows = nd + 1;
        sc->tokens[n] = j->next;
        memcpy(sc->tokens + n + 1, sc->d_out[k], (size_t)nd * sizeof *sc->tokens);
        for (int64_t t = 0; t <= nd; t++) sc->owner[n + t] = j->seq, sc->want[n + t] = 1;
        n += nd + 1;
    }
    /* the best logits alone when every walk needs no more (a draft model's sampled drafts need whole rows) */
    int32_t k_top = sc->k_top;
    for (int64_t k = 0; k < na && k_top; k++) k_top = eddy_spec_top(sc->active[k]->spec) ? k_top : 0;
    eddy_batch b = {n, sc->tokens, sc->owner, sc->want};
    if ((k_top ? eddy_engine_verify_top(sc->e, &b, k_top, sc->top_ids, sc->top_logits, sc->top_counts, NULL, &err)
               : eddy_engine_verify(sc->e, &b, sc->logits, &err)) != EDDY_OK)
        return cli_error("%s", err.msg);
    for (int64_t k = 0; k < sc->n_active; k++) {
        job *j = sc->active[k];
        const int64_t left = sc->n_predict >= 0 ? sc->n_predict - j->n_gen : -1, kt = j->row0 * k_top;
        int64_t n_out;
        eddy_spec_end end;
        if ((k_top ? eddy_spec_accept_top(j->spec, k_top, sc->top_ids + kt, sc->top_logits + kt,
                                          sc->top_counts + j->row0, left, sc->drafted, &n_out, &end, &err)
                   : eddy_spec_accept(j->spec, sc->logits + j->row0 * sc->n_vocab, left, sc->drafted, &n_out, &end,
                                      &err)) != EDDY_OK) {
            cli_error("%s", err.msg);
            finish(sc, j, "error");
            continue;
        }
        bool ok = true;
        for (int64_t i = 0; ok && i < n_out; i++) ok = take(sc, j, sc->drafted[i]);
        if (!ok) continue;
        if (end == EDDY_SPEC_EOG) {
            finish(sc, j, "eog");
            continue;
        }
        j->next = sc->drafted[n_out - 1];
        go_on_or_end(sc, j);
    }
    return 0;
}

/* One forward step over every active job, then one sampled token for each. */
static int step(sched *sc) {
    bool prefilling = false;
    for (int64_t k = 0; k < sc->n_active; k++) prefilling |= sc->active[k]->t_first == 0;
    if (sc->spec && !prefilling) return spec_step(sc);
    int64_t n = 0;
    for (int64_t k = 0; k < sc->n_active; k++) {
        job *j = sc->active[k];
        const bool prefill = j->n_gen == 0 && j->t_first == 0;
        const int64_t len = prefill ? j->n_ids : 1;
        if (!reserve(sc, n + len)) return cli_error("out of memory");
        memcpy(sc->tokens + n, prefill ? j->ids : &j->next, (size_t)len * sizeof *sc->tokens);
        for (int64_t t = 0; t < len; t++) sc->owner[n + t] = j->seq;
        n += len;
    }
    eddy_batch b = {n, sc->tokens, sc->owner, NULL}; /* logits: each sequence's last token */
    eddy_error err;
    /* the best logits alone when they are all the sampler looks at (on a GPU the logits stay there) */
    const eddy_status st =
        sc->k_top
            ? eddy_engine_decode_top(sc->e, &b, sc->k_top, sc->top_ids, sc->top_logits, sc->top_counts, NULL, &err)
            : eddy_engine_decode(sc->e, &b, sc->logits, &err);
    if (st != EDDY_OK) return cli_error("%s", err.msg);
    for (int64_t k = 0; k < sc->n_active; k++) {
        job *j = sc->active[k];
        if (j->t_first == 0) { /* the prompt went in: the sampler sees it, as eddy run's */
            for (int64_t i = 0; i < j->n_ids; i++) eddy_sampler_accept(j->s, j->ids[i]);
            j->t_first = cli_now_s();
        }
        if (sc->n_predict >= 0 && j->n_gen >= sc->n_predict) {
            finish(sc, j, "length");
            continue;
        }
        const int64_t kt = k * sc->k_top;
        const eddy_token t =
            sc->k_top ? eddy_sampler_sample_top(j->s, sc->top_ids + kt, sc->top_logits + kt, sc->top_counts[k])
                      : eddy_sampler_sample(j->s, sc->logits + k * sc->n_vocab);
        if (eddy_vocab_is_eog(sc->v, t)) {
            finish(sc, j, "eog");
            continue;
        }
        eddy_sampler_accept(j->s, t);
        if (!take(sc, j, t)) continue;
        j->next = t;
        go_on_or_end(sc, j);
    }
    return 0;
}

/* ==== Output ==== */

static void print_json_string(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void print_results(const job *jobs, int64_t n, bool jsonl) {
    for (int64_t i = 0; i < n; i++) {
        const job *j = &jobs[i];
        if (jsonl) {
            printf("{\"index\":%lld,\"prompt\":", (long long)i);
            print_json_string(j->text, strlen(j->text));
            fputs(",\"text\":", stdout);
            print_json_string(j->out ? j->out : "", j->out_len);
            printf(",\"tokens_prompt\":%lld,\"tokens_generated\":%lld,\"stop\":", (long long)j->n_ids,
                   (long long)j->n_gen);
            print_json_string(j->stop, strlen(j->stop));
            fputs("}\n", stdout);
        } else {
            printf("=== %lld ===\n", (long long)i + 1);
            if (j->out_len) fwrite(j->out, 1, j->out_len, stdout);
            fputc('\n', stdout);
        }
    }
}

static void print_stats(const job *jobs, int64_t n, int64_t np, double t_prefill0, double t_end) {
    int64_t n_prompt = 0, n_gen = 0;
    for (int64_t i = 0; i < n; i++) {
        const job *j = &jobs[i];
        const double dt = j->t_end - j->t_first;
        fprintf(stderr, "eddy: [%lld] prompt %lld tokens, generated %lld tokens in %.2f s (%.1f t/s), stop: %s\n",
                (long long)i + 1, (long long)j->n_ids, (long long)j->n_gen, dt > 0 ? dt : 0,
                dt > 0 ? j->n_gen / dt : 0, j->stop);
        n_prompt += j->n_gen || j->t_first ? j->n_ids : 0;
        n_gen += j->n_gen;
    }
    const double dt = t_end - t_prefill0;
    fprintf(stderr, "eddy: %lld prompts, %lld at a time: %lld prompt + %lld generated tokens in %.2f s "
            "(%.1f generated t/s aggregate)\n", (long long)n, (long long)np, (long long)n_prompt, (long long)n_gen,
            dt, dt > 0 ? n_gen / dt : 0);
}

const char usage_batch[] =
    "eddy batch -m MODEL.gguf -f PROMPTS.txt [-np N] [-n N] [--jsonl] [--chat [--system TEXT]]\n"
    "           [the sampling, context, thread, device and cache options of run]\n"
    "           [--spec-type ... | -md FILE]\n"
    "        many prompts, one per line (empty lines skipped), up to N (default: the number of\n"
    "        prompts, at most 8) decoded together on one engine; a finished sequence's slot goes\n"
    "        to the next prompt. Outputs in input order (\"=== i ===\" blocks, or --jsonl: one JSON\n"
    "        object per line with the text, token counts and why it stopped); per-sequence and\n"
    "        aggregate t/s on stderr. Each output is the one eddy run gives for that prompt alone\n"
    "        with the same options and seed; a prompt that cannot run is reported, the rest carry on.\n"
    "        --spec-type ngram|mtp or -md FILE (and the draft flags of run) drafts for every\n"
    "        sequence, all verified in one step\n";

int cmd_batch(int argc, char **argv) {
    gen_opts o;
    gen_opts_init(&o);
    long long np = 0;
    bool jsonl = false;
    for (int i = 1; i < argc; i++) {
        int r = gen_opts_parse(&o, argc, argv, &i);
        if (r > 0) return 1;
        if (r == 0) continue;
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-np") || !strcmp(a, "--parallel")) {
            if (cli_parse_int(a, val, 1, 4096, &np)) return 1;
            i++;
        } else if (!strcmp(a, "--chat")) {
            o.chat = true;
        } else if (!strcmp(a, "--jsonl")) {
            jsonl = true;
        } else {
            return cli_bad_arg("batch", a);
        }
    }
    const char *file = o.prompt_file;
    if (!o.model) return cli_error("batch: no model given (-m MODEL.gguf)");
    if (o.prompt) return cli_error("batch: the prompts come from a file (-f PROMPTS.txt, one per line), not -p");
    if (!file) return cli_error("batch: no prompt file given (-f PROMPTS.txt, one prompt per line)");
    if (o.system && !o.chat) return cli_error("batch: --system needs --chat");
    if (o.n_stop || o.ignore_eos) return cli_error("batch: -r and --ignore-eos are options of run and chat only");
    if (o.seed_random) { /* one seed for every prompt, so each output is run's with that seed */
        o.sp.seed = cli_random_seed();
        o.seed_random = false;
    }
    const bool chat = o.chat;
    size_t len;
    char *text = cli_read_file(file, &len);
    if (!text) return cli_error("%s: cannot read the prompt file", file);
    job *jobs = NULL;
    const int64_t n_jobs = split_lines(text, len, &jobs);
    if (n_jobs <= 0) {
        free(text), free(jobs);
        return n_jobs < 0 ? cli_error("out of memory") : cli_error("%s: no prompts (one per line)", file);
    }
    if (np == 0) np = n_jobs < 8 ? n_jobs : 8;
    if (np > n_jobs) np = n_jobs;

    gen_session g;
    int rc = gen_session_open(&o, &g); /* model, vocabulary, template (its one-sequence context goes unused) */
    for (int64_t i = 0; !rc && i < n_jobs; i++)
        rc = gen_prompt_tokens(&g, jobs[i].text, strlen(jobs[i].text), chat, &jobs[i].ids, &jobs[i].n_ids);
    sched sc = {0};
    if (!rc) {
        eddy_error err;
        /* drafts: a verify holds a state per token, each job's next token and drafts */
        sc.draft_max = o.spec.type != EDDY_SPEC_NONE ? gen_draft_max(&o.spec) : 0;
        eddy_engine_params ep = {.n_ctx = o.n_ctx, .n_seq_max = (int)np, .n_threads = (int)o.threads,
                                 .type_k = o.type_k, .type_v = o.type_v,
                                 .n_verify = (int)(np * (sc.draft_max ? sc.draft_max + 1 : 0)),
                                 .n_batch = sc.draft_max ? np * (sc.draft_max + 1) > 512 ? np * (sc.draft_max + 1) : 512
                                                         : 0,
                                 .mtp = o.spec.type == EDDY_SPEC_MTP, .device = o.device,
                                 .gpu_layers = o.gpu_layers};
        eddy_ctx_free(g.c); /* its memory goes to the engine's sequences */
        g.c = NULL;
        if (eddy_engine_new(g.m, &ep, &sc.e, &err) != EDDY_OK) rc = cli_error("%s", err.msg);
    }
    eddy_engine *draft = NULL; /* -md: one draft sequence and one snapshot per running prompt */
    if (!rc && g.dm) {
        eddy_error err;
        eddy_engine_params dp = {.n_ctx = eddy_engine_n_ctx(sc.e), .n_seq_max = (int)np, .n_snapshots = (int)np,
                                 .n_threads = (int)o.threads, .device = o.device};
        eddy_ctx_free(g.dc);
        g.dc = NULL;
        if (eddy_engine_new(g.dm, &dp, &draft, &err) != EDDY_OK) rc = cli_error("-md %s: %s", o.draft_model, err.msg);
        o.spec.draft_engine = draft;
    }
    if (!rc) {
        sc.m = g.m, sc.v = g.v, sc.sp = &o.sp, sc.n_predict = o.n_predict;
        sc.n_ctx = eddy_engine_n_ctx(sc.e), sc.n_vocab = eddy_model_n_vocab(g.m);
        sc.active = calloc((size_t)np, sizeof *sc.active);
        sc.logits = malloc((size_t)(np * (sc.draft_max + 1) * sc.n_vocab) * sizeof(float));
        sc.drafted = malloc((size_t)(np * (sc.draft_max + 1)) * sizeof *sc.drafted);
        sc.d_spec = malloc((size_t)np * sizeof *sc.d_spec), sc.d_t = malloc((size_t)np * sizeof *sc.d_t);
        sc.d_out = malloc((size_t)np * sizeof *sc.d_out), sc.d_max = malloc((size_t)np * sizeof *sc.d_max);
        sc.d_n = malloc((size_t)np * sizeof *sc.d_n);
        sc.spec = sc.draft_max ? &o.spec : NULL;
        sc.k_top = eddy_sampler_params_top(&o.sp);
        const int64_t rows = np * (sc.draft_max + 1); /* of a step, or of a verify with drafts */
        sc.top_ids = malloc((size_t)(rows * EDDY_TOP_MAX) * sizeof *sc.top_ids);
        sc.top_logits = malloc((size_t)(rows * EDDY_TOP_MAX) * sizeof *sc.top_logits);
        sc.top_counts = malloc((size_t)rows * sizeof *sc.top_counts);
        if (!sc.active || !sc.logits || !sc.drafted || !sc.d_spec || !sc.d_t || !sc.d_out || !sc.d_max || !sc.d_n ||
            !sc.top_ids || !sc.top_logits || !sc.top_counts)
            rc = cli_error("out of memory");
    }
    const double t0 = cli_now_s();
    int64_t next = 0;
    while (!rc) {
        /* finished jobs leave, waiting ones take their slots */
        int64_t kept = 0;
        for (int64_t k = 0; k < sc.n_active; k++)
            if (!sc.active[k]->done) sc.active[kept++] = sc.active[k];
        sc.n_active = kept;
        while (sc.n_active < np && next < n_jobs) {
            job *j = &jobs[next++];
            if (start(&sc, j)) sc.active[sc.n_active++] = j;
        }
        if (sc.n_active == 0) break;
        rc = step(&sc);
    }
    const double t1 = cli_now_s();
    for (int64_t k = 0; rc && k < sc.n_active; k++)
        if (!sc.active[k]->done) finish(&sc, sc.active[k], "error");
    if (!rc) {
        print_results(jobs, n_jobs, jsonl);
        if (fflush(stdout) != 0 || ferror(stdout)) rc = cli_error("writing standard output failed");
        print_stats(jobs, n_jobs, np, t0, t1);
        if (sc.steps > 0)
            fprintf(stderr, "eddy: speculative: %lld verify steps (per sequence), %lld drafted, %lld accepted (%.1f%%), "
                    "%.2f tokens per verify step\n", (long long)sc.steps, (long long)sc.n_drafted,
                    (long long)sc.n_accepted, 100.0 * (double)sc.n_accepted / (double)sc.n_drafted,
                    (double)(sc.n_accepted + sc.steps) / (double)sc.steps);
    }
    for (int64_t i = 0; i < n_jobs; i++) {
        if (jobs[i].started && !jobs[i].done) finish(&sc, &jobs[i], "error");
        free(jobs[i].ids);
        free(jobs[i].out);
    }
    eddy_engine_free(sc.e);
    eddy_engine_free(draft);
    free(sc.active), free(sc.logits), free(sc.tokens), free(sc.owner), free(sc.want), free(sc.drafted);
    free(sc.top_ids), free(sc.top_logits), free(sc.top_counts);
    free(sc.d_spec), free(sc.d_t), free(sc.d_out), free(sc.d_max), free(sc.d_n);
    gen_session_close(&g);
    free(jobs);
    free(text);
    return rc;
}
