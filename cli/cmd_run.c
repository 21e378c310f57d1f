/*
 * cmd_run.c — `eddy run`: generate a continuation of a prompt.
 *
 *   eddy run -m MODEL.gguf (-p PROMPT | -f FILE) [--chat [--system TEXT]] [-n N]
 *            [--temp T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]
 *            [--repeat-last-n N] [--presence-penalty P] [--frequency-penalty F]
 *            [--seed S] [-t THREADS] [-c CTX] [-ctk f16|f32] [-ctv f16|f32]
 *            [--chat-template NAME|FILE] [--think|--no-think]
 *            [--session FILE [--session-ro] [--session-all]]
 *
 * The continuation streams to stdout as it is generated (never half a UTF-8
 * character); prompt and generation speed go to stderr. --chat wraps the prompt as a
 * user message in the model's chat template.
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

static int on_token(void *user, eddy_token t, const char *text, size_t len) {
    (void)user, (void)t;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}

/* The prompt's tokens: plain text (BOS as the file asks), or a chat turn. */
static int prompt_tokens(gen_session *g, const char *prompt, bool chat, const char *system, eddy_token **ids,
                         int64_t *n) {
    if (chat) {
        eddy_chat_message msgs[2];
        int64_t k = 0;
        if (system) msgs[k++] = (eddy_chat_message){"system", system};
        msgs[k++] = (eddy_chat_message){"user", prompt};
        return cli_chat_tokens(g->v, msgs, k, &g->chat, ids, n);
    }
    eddy_error err;
    eddy_token *t;
    if (eddy_tokenize(g->v, prompt, strlen(prompt), EDDY_TOKENIZE_ADD_SPECIAL, &t, n, &err) != EDDY_OK)
        return cli_error("%s", err.msg);
    *ids = malloc((size_t)(*n ? *n : 1) * sizeof **ids);
    if (*ids) memcpy(*ids, t, (size_t)*n * sizeof *t);
    eddy_buffer_free(t);
    return *ids ? 0 : cli_error("out of memory");
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

/* The prompt with a session: restore, evaluate the rest, save; then generate from the
 * held logits. The sampler sees every prompt token, restored or not. */
static int run_with_session(gen_session *g, const session_opts *so, const gen_opts *o, const eddy_token *ids,
                            int64_t n_ids) {
    int64_t n_cached;
    if (session_restore(g, so, ids, n_ids, &n_cached)) return 1;
    eddy_error err;
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
    if (!so->read_only && !so->all && session_save(g, so)) return 1;
    eddy_gen_stats st;
    eddy_status s = eddy_generate(g->c, g->v, g->s, NULL, 0, o->n_predict, on_token, NULL, &st, &err);
    fputc('\n', stdout);
    fflush(stdout);
    if (s != EDDY_OK) return cli_error("%s", err.msg);
    if (!so->read_only && so->all && session_save(g, so)) return 1;
    fprintf(stderr, "eddy: prompt %lld tokens: %lld restored from %s, %lld evaluated in %.2f s\n", (long long)n_ids,
            (long long)n_cached, so->path, (long long)(n_ids - n_cached), t_prompt);
    st.n_prompt = n_ids - n_cached;
    st.prompt_seconds = t_prompt;
    gen_print_stats(&st);
    return 0;
}

int cmd_run(int argc, char **argv) {
    gen_opts o;
    gen_opts_init(&o);
    const char *prompt_arg = NULL, *prompt_file = NULL, *system = NULL;
    bool chat = false;
    session_opts so = {0};
    for (int i = 1; i < argc; i++) {
        int r = gen_opts_parse(&o, argc, argv, &i);
        if (r > 0) return 1;
        if (r == 0) continue;
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!val) return cli_error("%s needs a prompt", a);
            prompt_arg = val, i++;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!val) return cli_error("%s needs a file name", a);
            prompt_file = val, i++;
        } else if (!strcmp(a, "--system")) {
            if (!val) return cli_error("%s needs a text", a);
            system = val, i++;
        } else if (!strcmp(a, "--chat")) {
            chat = true;
        } else if (!strcmp(a, "--session") || !strcmp(a, "--prompt-cache")) {
            if (!val) return cli_error("%s needs a file name", a);
            so.path = val, i++;
        } else if (!strcmp(a, "--session-ro") || !strcmp(a, "--prompt-cache-ro")) {
            so.read_only = true;
        } else if (!strcmp(a, "--session-all") || !strcmp(a, "--prompt-cache-all")) {
            so.all = true;
        } else {
            return cli_error("run: unknown option \"%s\"", a);
        }
    }
    if (!o.model) return cli_error("run: no model given (-m MODEL.gguf)");
    if (!prompt_arg && !prompt_file) return cli_error("run: no prompt given (-p PROMPT or -f FILE)");
    if (prompt_arg && prompt_file) return cli_error("run: give -p or -f, not both");
    if (system && !chat) return cli_error("run: --system needs --chat");
    if ((so.read_only || so.all) && !so.path) return cli_error("run: --session-ro and --session-all need --session FILE");
    char *file_text = NULL;
    if (prompt_file && !(file_text = cli_read_file(prompt_file, NULL)))
        return cli_error("%s: cannot read the prompt file", prompt_file);

    gen_session g;
    int rc = gen_session_open(&o, &g);
    eddy_token *ids = NULL;
    int64_t n_ids = 0;
    if (!rc) rc = prompt_tokens(&g, file_text ? file_text : prompt_arg, chat, system, &ids, &n_ids);
    if (!rc && n_ids == 0) rc = cli_error("run: the prompt is empty");
    if (!rc && n_ids >= eddy_ctx_n_ctx(g.c))
        rc = cli_error("run: the prompt has %lld tokens, the context holds %lld (raise -c)", (long long)n_ids,
                       (long long)eddy_ctx_n_ctx(g.c));
    if (!rc && so.path) {
        rc = run_with_session(&g, &so, &o, ids, n_ids);
    } else if (!rc) {
        eddy_gen_stats st;
        eddy_error err;
        eddy_status s = eddy_generate(g.c, g.v, g.s, ids, n_ids, o.n_predict, on_token, NULL, &st, &err);
        fputc('\n', stdout);
        fflush(stdout);
        if (s != EDDY_OK) rc = cli_error("%s", err.msg);
        else gen_print_stats(&st);
    }
    free(ids);
    gen_session_close(&g);
    free(file_text);
    return rc;
}
