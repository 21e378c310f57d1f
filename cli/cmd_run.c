/*
 * cmd_run.c — `eddy run`: generate a continuation of a prompt.
 *
 * The continuation streams to stdout as it is generated (never half a UTF-8
 * character); prompt and generation speed go to stderr. --chat wraps the prompt as a
 * user message in the model's chat template; -cnv hands everything to `eddy chat`.
 * The flags are gen_opts.c's; usage_run below lists them.
 *
 * --session FILE (llama.cpp's spelling --prompt-cache FILE works too): when FILE holds
 * a session whose tokens begin the prompt, the sequence is restored from it and only
 * the rest of the prompt is evaluated; then the state after the prompt is saved to
 * FILE (with --session-all / --prompt-cache-all, the state after the generated text,
 * saved at the end), unless --session-ro / --prompt-cache-ro.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char usage_run[] =
    "eddy run -m MODEL.gguf (-p PROMPT | -f FILE) [OPTIONS]\n"
    "        generates a continuation of the prompt, streamed to stdout; prefill and decode\n"
    "        speed go to stderr. OPTIONS (llama.cpp's spellings work too):\n"
    "        -p, --prompt TEXT         the prompt\n"
    "        -f, --file FILE           the prompt is all of FILE's bytes (\"-\": standard input)\n"
    "        -e, --escape              turn \\n \\r \\t \\' \\\" \\\\ \\xHH in -p, -f, --system and -r\n"
    "                                  into the bytes they stand for\n"
    "        --chat                    wrap the prompt as a user message in the chat template\n"
    "        --system TEXT             a system message before it (-sys, --system-prompt)\n"
    "        -cnv, --conversation      run eddy chat instead, with these options\n"
    "        -n, --n-predict N         at most N tokens (-1, the default: until the context is full)\n"
    "        --ignore-eos              never sample an end-of-generation token\n"
    "        -r, --reverse-prompt TEXT stop where TEXT appears in the output (up to 16 of them)\n"
    "        --temp T                  temperature: 0.8 (0: greedy)\n"
    "        --top-k K, --top-p P, --min-p P\n"
    "                                  40, 0.95, 0.05 (0, 1, 0: off); defaults as llama.cpp's\n"
    "        --repeat-penalty R, --repeat-last-n N, --presence-penalty P, --frequency-penalty F\n"
    "                                  penalties over the last N tokens: 1, 64, 0, 0 (off)\n"
    "        -s, --seed S              the sampling seed: random unless given (-1: random);\n"
    "                                  EDDY_LOG_LEVEL=info prints it, so a run can be repeated\n"
    "        -t, --threads N           threads: the CPUs eddy may use by default\n"
    "        --device cpu|cuda         where the model runs: the CPU (the default) or the first\n"
    "                                  NVIDIA GPU, the whole model there (a `make CUDA=1` build;\n"
    "                                  docs/cuda.md)\n"
    "        -ngl, --n-gpu-layers N    the model's last N layers on the GPU, the ones before on\n"
    "                                  the CPU (0: the CPU; N >= the layer count: all on the GPU)\n"
    "        -c, --ctx-size N          positions of context: the model's, at most 4096, by default\n"
    "        -b, --batch-size N        tokens per forward step: 512, 2048 on a GPU (-ub N: the same)\n"
    "        -ctk, --cache-type-k T    the element type of the attention layers' key and value\n"
    "        -ctv, --cache-type-v T    cache: f16 (the default, as llama.cpp's: rounded to\n"
    "                                  nearest even, half the memory) or f32 (as computed)\n"
    "        --chat-template NAME|FILE a built-in template (chatml, llama3) or a Jinja file in\n"
    "                                  place of the model's own\n"
    "        --think, --no-think       set the template's enable_thinking\n"
    "        --no-mmap                 read the model into memory (as EDDY_NO_MMAP=1 does)\n"
    "        --mlock                   lock the mapped weights in memory (a warning if refused)\n"
    "        --jinja, -no-cnv          accepted, changing nothing (templates are always Jinja;\n"
    "                                  run is no conversation)\n"
    "        --session FILE            (--prompt-cache) when FILE holds a session whose tokens\n"
    "                                  begin the prompt, restore it and evaluate only the rest;\n"
    "                                  then save the state after the prompt to FILE. A damaged\n"
    "                                  file, or another model's, is refused and left as it is\n"
    "        --session-all             (--prompt-cache-all) save after the generated text instead\n"
    "        --session-ro              (--prompt-cache-ro) restore only, never write FILE\n"
    "        --cache-dir DIR           a prefix cache kept in DIR across runs: the deepest state\n"
    "                                  of this prompt's beginning a run has left there (every 512\n"
    "                                  tokens, and each prompt's end) is restored and only the\n"
    "                                  rest evaluated (--cache-dir-mib N: its budget, 4096; chat:\n"
    "                                  where states leaving --cache-ram go)\n"
    "        --spec-type ngram|draft|mtp\n"
    "                                  speculative decoding: drafts checked several in one step,\n"
    "                                  the output unchanged (docs/speculative.md). ngram: prompt\n"
    "                                  lookup (--lookup-ngram N: the longest n-gram, 3); draft:\n"
    "                                  a smaller model of the same vocabulary, -md FILE; mtp:\n"
    "                                  the model's own multi-token-prediction layer (Qwen3.5\n"
    "                                  files that carry it) (--draft-p-min P: draft and mtp\n"
    "                                  stop drafting below it; draft: 0.75, mtp: none)\n"
    "        -md, --model-draft FILE   the draft model (implies --spec-type draft)\n"
    "        --draft-max N, --draft-min N\n"
    "                                  drafts per step: at most 16 (mtp: 3), at least 1; between,\n"
    "                                  the acceptance rate decides (--draft-fixed: the most); the\n"
    "                                  counts go to stderr at the end\n";

/* ==== Streaming ==== */

typedef struct {
    gen_stopper stop;
    bool stopped;       /* a stop string was printed: the rest is dropped */
} run_out;

static int on_token(void *user, eddy_token t, const char *text, size_t len) {
    (void)t;
    run_out *r = user;
    if (r->stopped) return 1;
    size_t n = gen_stopper_feed(&r->stop, text, len, &r->stopped);
    if (!cli_out(text, n)) return 1;
    return r->stopped;
}

/* ==== Sessions ==== */

typedef struct {
    const char *path;
    bool read_only, all;
} session_opts;

/* Restores what FILE holds when its tokens begin ids (*n_cached of them); else leaves
 * the sequence empty. 1 after printing an error (a damaged file or another model's:
 * the user's file is not overwritten). */
static int session_restore(gen_session *g, const session_opts *so, const eddy_token *ids, int64_t n_ids,
                           int64_t *n_cached) {
    *n_cached = 0;
    FILE *probe = fopen(so->path, "rb");
    if (!probe) return 0; /* no session yet: it is made after the prompt */
    fclose(probe);
    eddy_error err;
    eddy_seq *seq = eddy_ctx_seq(g->c);
    if (eddy_seq_load(seq, NULL, so->path, &err) != EDDY_OK) return cli_error("%s", err.msg);
    const int64_t n = eddy_seq_n_pos(seq);
    const bool prefix = n <= n_ids && !memcmp(eddy_seq_tokens(seq), ids, (size_t)n * sizeof *ids);
    /* the whole prompt restored still needs the logits after it */
    if (!prefix || (n == n_ids && !eddy_seq_logits(seq))) {
        fprintf(stderr, "eddy: session %s (%lld tokens) does not begin this prompt: evaluating the prompt whole\n",
                so->path, (long long)n);
        eddy_ctx_reset(g->c);
        return 0;
    }
    *n_cached = n;
    return 0;
}

static int session_save(gen_session *g, const session_opts *so) {
    eddy_error err;
    if (eddy_seq_save(eddy_ctx_seq(g->c), NULL, so->path, &err) != EDDY_OK) return cli_error("%s", err.msg);
    return 0;
}

/* The prompt with a session file or the prefix cache's disk tier: restore, evaluate
 * the rest, save (or cache); then generate from the held logits. The sampler sees every
 * prompt token, restored or not. */
static int run_with_session(gen_session *g, const session_opts *so, const eddy_token *ids, int64_t n_ids) {
    int64_t n_cached;
    eddy_error err;
    const char *from = so->path ? so->path : "the prefix cache";
    if (so->path && session_restore(g, so, ids, n_ids, &n_cached)) return 1;
    if (!so->path && eddy_seq_restore_prefix(eddy_ctx_seq(g->c), ids, n_ids, &n_cached, &err) != EDDY_OK)
        return cli_error("%s", err.msg);
    const double t0 = cli_now_s();
    if (n_cached < n_ids) { /* the logits after the prompt stay with the sequence */
        float *logits = malloc((size_t)eddy_model_n_vocab(g->m) * sizeof *logits);
        if (!logits) return cli_error("out of memory");
        eddy_status s = eddy_ctx_eval(g->c, ids + n_cached, n_ids - n_cached, logits, 0, &err);
        free(logits);
        if (s != EDDY_OK) return cli_error("%s", err.msg);
    }
    const double t_prompt = cli_now_s() - t0;
    for (int64_t i = 0; i < n_ids; i++) eddy_sampler_accept(g->s, ids[i]);
    if (!so->path && eddy_seq_cache_put(eddy_ctx_seq(g->c), &err) != EDDY_OK) return cli_error("%s", err.msg);
    if (so->path && !so->read_only && !so->all && session_save(g, so)) return 1;
    eddy_gen_stats st;
    run_out out = {.stop = {.g = g}};
    eddy_status s = eddy_generate_ex(g->c, g->v, g->s, NULL, 0, &g->gp, on_token, &out, &st, &err);
    gen_stopper_free(&out.stop);
    const bool written = cli_out("\n", 1); /* false: main reports the failed write */
    if (s != EDDY_OK) return cli_error("%s", err.msg);
    if (!written) return 0;
    if (so->path && !so->read_only && so->all && session_save(g, so)) return 1;
    fprintf(stderr, "eddy: prompt %lld tokens: %lld restored from %s, %lld evaluated in %.2f s\n", (long long)n_ids,
            (long long)n_cached, from, (long long)(n_ids - n_cached), t_prompt);
    st.n_prompt = n_ids - n_cached;
    st.prompt_seconds = t_prompt;
    gen_print_stats(&st);
    return 0;
}

/* At debug level: the prompt's ids (the first 64). */
static void log_prompt(const eddy_token *ids, int64_t n) {
    if (eddy_log_get_level() < EDDY_LOG_DEBUG) return;
    char line[800];
    size_t k = 0;
    for (int64_t i = 0; i < n && i < 64 && k + 16 < sizeof line; i++)
        k += (size_t)snprintf(line + k, sizeof line - k, "%s%d", i ? " " : "", (int)ids[i]);
    eddy_log(EDDY_LOG_DEBUG, "prompt: %lld tokens: %s%s", (long long)n, line, n > 64 ? " ..." : "");
}

/* ==== Entry ==== */

int cmd_run(int argc, char **argv) {
    gen_opts o;
    gen_opts_init(&o);
    session_opts so = {0};
    for (int i = 1; i < argc; i++) {
        int r = gen_opts_parse(&o, argc, argv, &i);
        if (r > 0) return 1;
        if (r == 0) continue;
        const char *a = argv[i];
        if (!strcmp(a, "--chat")) o.chat = true;
        else if (!strcmp(a, "-cnv") || !strcmp(a, "--conversation")) return cmd_chat(argc, argv);
        else if (!strcmp(a, "-no-cnv") || !strcmp(a, "--no-conversation")) continue;
        else if (!strcmp(a, "--session") || !strcmp(a, "--prompt-cache")) {
            if (i + 1 >= argc) return cli_error("%s needs a file name", a);
            so.path = argv[++i];
        } else if (!strcmp(a, "--session-ro") || !strcmp(a, "--prompt-cache-ro")) so.read_only = true;
        else if (!strcmp(a, "--session-all") || !strcmp(a, "--prompt-cache-all")) so.all = true;
        else return cli_bad_arg("run", a);
    }
    if (!o.model) return cli_error("run: no model given (-m MODEL.gguf)");
    if (!o.prompt && !o.prompt_file) return cli_error("run: no prompt given (-p PROMPT or -f FILE)");
    if (o.prompt && o.prompt_file) return cli_error("run: give -p or -f, not both");
    if (o.system && !o.chat) return cli_error("run: --system needs --chat");
    if ((so.read_only || so.all) && !so.path) return cli_error("run: --session-ro and --session-all need --session FILE");

    gen_session g;
    if (gen_session_open(&o, &g)) return 1;
    eddy_token *ids = NULL;
    int64_t n_ids = 0;
    int rc = gen_prompt_tokens(&g, g.prompt, g.prompt_len, o.chat, &ids, &n_ids);
    if (!rc && n_ids == 0) rc = cli_error("run: the prompt is empty");
    if (!rc && n_ids >= eddy_ctx_n_ctx(g.c))
        rc = cli_error("run: the prompt has %lld tokens, the context holds %lld (raise -c)", (long long)n_ids,
                       (long long)eddy_ctx_n_ctx(g.c));
    if (!rc && (so.path || o.cache_dir)) {
        log_prompt(ids, n_ids);
        rc = run_with_session(&g, &so, ids, n_ids);
    } else if (!rc) {
        log_prompt(ids, n_ids);
        run_out out = {.stop = {.g = &g}};
        eddy_gen_stats st;
        eddy_error err;
        eddy_status s = eddy_generate_ex(g.c, g.v, g.s, ids, n_ids, &g.gp, on_token, &out, &st, &err);
        bool written = cli_out("\n", 1); /* false: main reports the failed write */
        if (s != EDDY_OK) rc = cli_error("%s", err.msg);
        else if (written) gen_print_stats(&st);
        gen_stopper_free(&out.stop);
    }
    free(ids);
    gen_session_close(&g);
    return rc;
}
