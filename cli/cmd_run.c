/*
 * cmd_run.c — `eddy run`: generate a continuation of a prompt.
 *
 *   eddy run -m MODEL.gguf (-p PROMPT | -f FILE) [--chat [--system TEXT]] [-n N]
 *            [--temp T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]
 *            [--repeat-last-n N] [--presence-penalty P] [--frequency-penalty F]
 *            [--seed S] [-t THREADS] [-c CTX] [-ctk f16|f32] [-ctv f16|f32]
 *            [--chat-template NAME|FILE] [--think|--no-think]
 *
 * The continuation streams to stdout as it is generated (never half a UTF-8
 * character); prompt and generation speed go to stderr. --chat wraps the prompt as a
 * user message in the model's chat template.
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

int cmd_run(int argc, char **argv) {
    gen_opts o;
    gen_opts_init(&o);
    const char *prompt_arg = NULL, *prompt_file = NULL, *system = NULL;
    bool chat = false;
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
        } else {
            return cli_error("run: unknown option \"%s\"", a);
        }
    }
    if (!o.model) return cli_error("run: no model given (-m MODEL.gguf)");
    if (!prompt_arg && !prompt_file) return cli_error("run: no prompt given (-p PROMPT or -f FILE)");
    if (prompt_arg && prompt_file) return cli_error("run: give -p or -f, not both");
    if (system && !chat) return cli_error("run: --system needs --chat");
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
    if (!rc) {
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
