/*
 * cmd_run.c — `eddy run`: generate a continuation of a prompt.
 *
 * The continuation streams to stdout as it is generated (never half a UTF-8
 * character); prompt and generation speed go to stderr. --chat wraps the prompt as a
 * user message in the model's chat template; -cnv hands everything to `eddy chat`.
 * The flags are gen_opts.c's; usage_run below lists them.
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
    "        -t, --threads N           threads: all online CPUs by default\n"
    "        -c, --ctx-size N          positions of context: the model's, at most 4096, by default\n"
    "        -b, --batch-size N        tokens per forward step: 512 (-ub, --ubatch-size N: the same)\n"
    "        -ctk, --cache-type-k T    the element type of the attention layers' key and value\n"
    "        -ctv, --cache-type-v T    cache: f16 (the default, as llama.cpp's: rounded to\n"
    "                                  nearest even, half the memory) or f32 (as computed)\n"
    "        --chat-template NAME|FILE a built-in template (chatml, llama3) or a Jinja file in\n"
    "                                  place of the model's own\n"
    "        --think, --no-think       set the template's enable_thinking\n"
    "        --no-mmap                 read the model into memory (as EDDY_NO_MMAP=1 does)\n"
    "        --mlock                   lock the mapped weights in memory (a warning if refused)\n"
    "        --jinja, -no-cnv          accepted, changing nothing (templates are always Jinja;\n"
    "                                  run is no conversation)\n";

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

/* The prompt's tokens: its bytes as plain text (BOS as the file asks), or a chat turn. */
static int prompt_tokens(gen_session *g, eddy_token **ids, int64_t *n, bool chat) {
    if (chat) {
        eddy_chat_message msgs[2];
        int64_t k = 0;
        if (g->system) msgs[k++] = (eddy_chat_message){"system", g->system};
        msgs[k++] = (eddy_chat_message){"user", g->prompt};
        return cli_chat_tokens(g->v, msgs, k, &g->chat, ids, n);
    }
    eddy_error err;
    eddy_token *t;
    if (eddy_tokenize(g->v, g->prompt, g->prompt_len, EDDY_TOKENIZE_ADD_SPECIAL, &t, n, &err) != EDDY_OK)
        return cli_error("%s", err.msg);
    *ids = malloc((size_t)(*n ? *n : 1) * sizeof **ids);
    if (*ids) memcpy(*ids, t, (size_t)*n * sizeof *t);
    eddy_buffer_free(t);
    return *ids ? 0 : cli_error("out of memory");
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
    for (int i = 1; i < argc; i++) {
        int r = gen_opts_parse(&o, argc, argv, &i);
        if (r > 0) return 1;
        if (r == 0) continue;
        const char *a = argv[i];
        if (!strcmp(a, "--chat")) o.chat = true;
        else if (!strcmp(a, "-cnv") || !strcmp(a, "--conversation")) return cmd_chat(argc, argv);
        else if (!strcmp(a, "-no-cnv") || !strcmp(a, "--no-conversation")) continue;
        else return cli_bad_arg("run", a);
    }
    if (!o.model) return cli_error("run: no model given (-m MODEL.gguf)");
    if (!o.prompt && !o.prompt_file) return cli_error("run: no prompt given (-p PROMPT or -f FILE)");
    if (o.prompt && o.prompt_file) return cli_error("run: give -p or -f, not both");
    if (o.system && !o.chat) return cli_error("run: --system needs --chat");

    gen_session g;
    if (gen_session_open(&o, &g)) return 1;
    eddy_token *ids = NULL;
    int64_t n_ids = 0;
    int rc = prompt_tokens(&g, &ids, &n_ids, o.chat);
    if (!rc && n_ids == 0) rc = cli_error("run: the prompt is empty");
    if (!rc && n_ids >= eddy_ctx_n_ctx(g.c))
        rc = cli_error("run: the prompt has %lld tokens, the context holds %lld (raise -c)", (long long)n_ids,
                       (long long)eddy_ctx_n_ctx(g.c));
    if (!rc) {
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
