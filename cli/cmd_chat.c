/*
 * cmd_chat.c — `eddy chat`: an interactive conversation in the terminal.
 *
 * Each line typed is a user message (-p or -f gives a first one); the reply streams
 * back. The sequence's state carries the conversation: each turn feeds only the
 * tokens that follow what the context already holds (the template's rendering of the
 * history is compared token by token with what was fed; if a template rewrites
 * earlier turns, the whole conversation is fed again). "/reset" starts over; Ctrl-D
 * quits. Ctrl-C during a reply stops it and keeps the conversation (the reply so
 * far stays in the history); Ctrl-C at the prompt, or a second one before the reply
 * has stopped, ends the program as SIGINT does.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

const char usage_chat[] =
    "eddy chat -m MODEL.gguf [OPTIONS of run]\n"
    "        an interactive chat: each line is a user message (-p or -f: the first one); the\n"
    "        sequence's state carries the conversation, so each turn feeds only its new\n"
    "        tokens. /reset starts over; Ctrl-C stops a reply (at the prompt, or twice, it\n"
    "        quits); Ctrl-D quits. A model without a chat template needs --chat-template\n";

/* ==== Ctrl-C ==== */

static volatile sig_atomic_t in_reply;    /* a reply is being generated */
static volatile sig_atomic_t interrupted; /* Ctrl-C during it: stop the reply */

static void on_sigint(int sig) {
    if (in_reply && !interrupted) {
        interrupted = 1;
        return;
    }
    /* at the prompt, or a second time: end as the signal would have */
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The engine's abort hook: stops a long prefill between its steps. */
static int abort_requested(void *user) {
    (void)user;
    return interrupted;
}

/* ==== History and the streaming reply ==== */

typedef struct {
    eddy_chat_message *msgs;
    int64_t n, cap;
} history;

static int history_add(history *h, const char *role, const char *content, size_t len) {
    if (h->n == h->cap) {
        int64_t cap = h->cap ? 2 * h->cap : 16;
        eddy_chat_message *p = realloc(h->msgs, (size_t)cap * sizeof *p);
        if (!p) return cli_error("out of memory");
        h->msgs = p, h->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return cli_error("out of memory");
    memcpy(copy, content, len);
    copy[len] = '\0';
    h->msgs[h->n++] = (eddy_chat_message){role, copy};
    return 0;
}

static void history_clear(history *h, int64_t keep) {
    while (h->n > keep) free((char *)h->msgs[--h->n].content);
}

/* The reply as it streams: printed, and kept for the history. */
typedef struct {
    char *text;
    size_t len, cap;
    eddy_token *toks;
    int64_t n, cap_toks;
    gen_stopper stop;
    bool stopped, failed; /* a stop string ended it; out of memory or a failed write */
} reply;

static int on_token(void *user, eddy_token t, const char *text, size_t len) {
    reply *r = user;
    if (interrupted || r->stopped || r->failed) return 1;
    len = gen_stopper_feed(&r->stop, text, len, &r->stopped);
    if (!cli_out(text, len)) return r->failed = true, 1;
    if (r->len + len + 1 > r->cap) {
        size_t cap = (r->cap ? r->cap : 256);
        while (cap < r->len + len + 1) cap *= 2;
        char *p = realloc(r->text, cap);
        if (!p) return r->failed = true, 1;
        r->text = p, r->cap = cap;
    }
    memcpy(r->text + r->len, text, len);
    r->len += len;
    if (t >= 0) {
        if (r->n == r->cap_toks) {
            int64_t cap = r->cap_toks ? 2 * r->cap_toks : 256;
            eddy_token *p = realloc(r->toks, (size_t)cap * sizeof *p);
            if (!p) return r->failed = true, 1;
            r->toks = p, r->cap_toks = cap;
        }
        r->toks[r->n++] = t;
    }
    return r->stopped;
}

/* ==== Entry ==== */

/* Whether the template can format a conversation at all: checked before the first
 * line, so that a model without one fails at once, naming --chat-template. */
static int check_template(const gen_session *g) {
    eddy_chat_message msgs[2];
    int64_t k = 0;
    if (g->system) msgs[k++] = (eddy_chat_message){"system", g->system};
    msgs[k++] = (eddy_chat_message){"user", "Hello"};
    eddy_error err;
    char *text;
    size_t len;
    if (eddy_chat_format(g->v, msgs, k, &g->chat, &text, &len, &err) == EDDY_OK) {
        eddy_buffer_free(text);
        return 0;
    }
    return cli_error("chat: %s%s", err.msg,
                     strstr(err.msg, "--chat-template") ? "" : " (--chat-template NAME|FILE sets another template)");
}

int cmd_chat(int argc, char **argv) {
    gen_opts o;
    gen_opts_init(&o);
    for (int i = 1; i < argc; i++) {
        int r = gen_opts_parse(&o, argc, argv, &i);
        if (r > 0) return 1;
        if (r == 0) continue;
        const char *a = argv[i];
        /* what `eddy run -cnv ...` brings along means chat already */
        if (strcmp(a, "-cnv") && strcmp(a, "--conversation") && strcmp(a, "--chat")) return cli_bad_arg("chat", a);
    }
    if (!o.model) return cli_error("chat: no model given (-m MODEL.gguf)");
    if (o.prompt && o.prompt_file) return cli_error("chat: give -p or -f, not both");
    o.chat = true;
    gen_session g;
    if (gen_session_open(&o, &g)) return 1;
    if (check_template(&g)) {
        gen_session_close(&g);
        return 1;
    }
    const bool tty = isatty(0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    eddy_engine_set_abort(eddy_ctx_engine(g.c), abort_requested, NULL);

    history h = {0};
    int rc = g.system ? history_add(&h, "system", g.system, strlen(g.system)) : 0;
    const int64_t base = h.n; /* messages that survive /reset */
    eddy_token *fed = NULL;   /* what the context holds, token by token */
    int64_t n_fed = 0;
    char *line = NULL;
    size_t line_cap = 0;
    bool first = g.prompt != NULL; /* -p or -f: the first message, before stdin's */
    if (tty) fprintf(stderr, "eddy chat: %s, %lld tokens of context. Ctrl-D quits, /reset starts over.\n",
                     eddy_model_arch(g.m), (long long)eddy_ctx_n_ctx(g.c));
    while (!rc) {
        const char *msg;
        size_t got;
        if (first) {
            msg = g.prompt, got = g.prompt_len, first = false;
        } else {
            if (tty) fputs("> ", stderr);
            ssize_t n = getline(&line, &line_cap, stdin);
            if (n < 0) break;
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
            if (n == 0) continue;
            if (strlen(line) != (size_t)n) {
                cli_error("chat: a line with a NUL byte (at byte %zu) is not a message", strlen(line));
                if (!tty) rc = 1;
                continue;
            }
            if (!strcmp(line, "/reset")) {
                history_clear(&h, base);
                eddy_ctx_reset(g.c);
                eddy_sampler_reset(g.s);
                n_fed = 0;
                continue;
            }
            msg = line, got = (size_t)n;
        }
        if ((rc = history_add(&h, "user", msg, got))) break;
        eddy_token *ids;
        int64_t n_ids;
        if (cli_chat_tokens(g.v, h.msgs, h.n, &g.chat, &ids, &n_ids)) {
            history_clear(&h, h.n - 1);
            if (!tty) rc = 1; /* a script cannot answer the error */
            continue;
        }
        /* feed only what follows the tokens the context already holds */
        int64_t same = 0;
        while (same < n_fed && same < n_ids && fed[same] == ids[same]) same++;
        eddy_log(EDDY_LOG_DEBUG, "chat: %lld messages, %lld tokens; the context holds %lld, the first %lld of them the same",
                 (long long)h.n, (long long)n_ids, (long long)n_fed, (long long)same);
        if (same < n_fed || same == n_ids) { /* the template rewrote history: start the sequence over */
            eddy_ctx_reset(g.c);
            same = n_fed = 0;
        }
        if (n_ids >= eddy_ctx_n_ctx(g.c)) {
            cli_error("the conversation (%lld tokens) no longer fits the context of %lld; /reset starts over",
                      (long long)n_ids, (long long)eddy_ctx_n_ctx(g.c));
            free(ids);
            history_clear(&h, h.n - 1);
            if (!tty) rc = 1;
            continue;
        }
        reply r = {.stop = {.g = &g}};
        eddy_gen_stats st;
        eddy_error err;
        interrupted = 0;
        in_reply = 1;
        eddy_status s = eddy_generate_ex(g.c, g.v, g.s, ids + same, n_ids - same, &g.gp, on_token, &r, &st, &err);
        in_reply = 0;
        cli_out("\n", 1);
        eddy_log(EDDY_LOG_DEBUG, "chat: a reply of %lld tokens%s", (long long)r.n,
                 interrupted ? ", stopped by Ctrl-C" : r.stopped ? ", ended by a stop string (-r)" : "");
        if (r.failed) { /* a failed write (main names it), else memory ran out */
            rc = cli_out(NULL, 0) ? cli_error("out of memory") : 1;
        } else if (s != EDDY_OK && !(s == EDDY_ERR_CANCELLED && interrupted)) {
            cli_error("%s", err.msg);
            eddy_ctx_reset(g.c);
            n_fed = 0;
            history_clear(&h, h.n - 1);
            if (!tty) rc = 1;
        } else {
            /* the context holds the tokens fed so far: those of the prompt (all of them
             * unless Ctrl-C stopped the prefill), then the reply's but its last */
            eddy_token *all = realloc(fed, (size_t)(n_ids + r.n) * sizeof *all);
            if (!all) {
                rc = cli_error("out of memory");
            } else {
                fed = all;
                memcpy(fed, ids, (size_t)n_ids * sizeof *ids);
                if (r.n) memcpy(fed + n_ids, r.toks, (size_t)r.n * sizeof *r.toks);
                n_fed = eddy_ctx_n_pos(g.c);
                rc = history_add(&h, "assistant", r.text ? r.text : "", r.len);
                if (tty && interrupted) fputs("eddy: reply stopped (Ctrl-C)\n", stderr);
                else if (tty) gen_print_stats(&st);
            }
        }
        free(ids);
        free(r.text);
        free(r.toks);
        gen_stopper_free(&r.stop);
    }
    signal(SIGINT, SIG_DFL);
    history_clear(&h, 0);
    free(h.msgs);
    free(fed);
    free(line);
    gen_session_close(&g);
    return rc;
}
