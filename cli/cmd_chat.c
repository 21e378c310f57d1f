/*
 * cmd_chat.c — `eddy chat`: an interactive conversation in the terminal.
 *
 *   eddy chat -m MODEL.gguf [--system TEXT] [generation flags as for eddy run]
 *
 * Each line typed is a user message; the reply streams back. The sequence's state
 * carries the conversation: each turn feeds only the tokens that follow what the
 * context already holds (the template's rendering of the history is compared token
 * by token with what was fed; if a template rewrites earlier turns, the whole
 * conversation is fed again). "/reset" starts over; Ctrl-D quits.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

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
} reply;

static int on_token(void *user, eddy_token t, const char *text, size_t len) {
    reply *r = user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    if (r->len + len + 1 > r->cap) {
        size_t cap = (r->cap ? r->cap : 256);
        while (cap < r->len + len + 1) cap *= 2;
        char *p = realloc(r->text, cap);
        if (!p) return 1;
        r->text = p, r->cap = cap;
    }
    memcpy(r->text + r->len, text, len);
    r->len += len;
    if (t >= 0) {
        if (r->n == r->cap_toks) {
            int64_t cap = r->cap_toks ? 2 * r->cap_toks : 256;
            eddy_token *p = realloc(r->toks, (size_t)cap * sizeof *p);
            if (!p) return 1;
            r->toks = p, r->cap_toks = cap;
        }
        r->toks[r->n++] = t;
    }
    return 0;
}

int cmd_chat(int argc, char **argv) {
    gen_opts o;
    gen_opts_init(&o);
    const char *system = NULL;
    for (int i = 1; i < argc; i++) {
        int r = gen_opts_parse(&o, argc, argv, &i);
        if (r > 0) return 1;
        if (r == 0) continue;
        if (!strcmp(argv[i], "--system")) {
            if (i + 1 >= argc) return cli_error("--system needs a text");
            system = argv[++i];
        } else {
            return cli_error("chat: unknown option \"%s\"", argv[i]);
        }
    }
    if (!o.model) return cli_error("chat: no model given (-m MODEL.gguf)");
    gen_session g;
    if (gen_session_open(&o, &g)) return 1;
    const bool tty = isatty(0);
    history h = {0};
    int64_t base = 0; /* messages that survive /reset */
    int rc = system ? history_add(&h, "system", system, strlen(system)) : 0;
    base = h.n;
    eddy_token *fed = NULL; /* what the context holds, token by token */
    int64_t n_fed = 0;
    char *line = NULL;
    size_t line_cap = 0;
    if (tty) fprintf(stderr, "eddy chat: %s, %lld tokens of context. Ctrl-D quits, /reset starts over.\n",
                     eddy_model_arch(g.m), (long long)eddy_ctx_n_ctx(g.c));
    while (!rc) {
        if (tty) fputs("> ", stderr);
        ssize_t got = getline(&line, &line_cap, stdin);
        if (got < 0) break;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = '\0';
        if (got == 0) continue;
        if (!strcmp(line, "/reset")) {
            history_clear(&h, base);
            eddy_ctx_reset(g.c);
            eddy_sampler_reset(g.s);
            n_fed = 0;
            continue;
        }
        if ((rc = history_add(&h, "user", line, (size_t)got))) break;
        eddy_token *ids;
        int64_t n_ids;
        if (cli_chat_tokens(g.v, h.msgs, h.n, &g.chat, &ids, &n_ids)) {
            history_clear(&h, h.n - 1);
            continue;
        }
        /* feed only what follows the tokens the context already holds */
        int64_t same = 0;
        while (same < n_fed && same < n_ids && fed[same] == ids[same]) same++;
        if (same < n_fed || same == n_ids) { /* the template rewrote history: start the sequence over */
            eddy_ctx_reset(g.c);
            same = n_fed = 0;
        }
        if (n_ids >= eddy_ctx_n_ctx(g.c)) {
            cli_error("the conversation (%lld tokens) no longer fits the context of %lld; /reset starts over",
                      (long long)n_ids, (long long)eddy_ctx_n_ctx(g.c));
            free(ids);
            history_clear(&h, h.n - 1);
            continue;
        }
        reply r = {0};
        eddy_gen_stats st;
        eddy_error err;
        eddy_status s = eddy_generate(g.c, g.v, g.s, ids + same, n_ids - same, o.n_predict, on_token, &r, &st, &err);
        fputc('\n', stdout);
        fflush(stdout);
        if (s != EDDY_OK) {
            cli_error("%s", err.msg);
            eddy_ctx_reset(g.c);
            n_fed = 0;
            history_clear(&h, h.n - 1);
        } else {
            eddy_token *all = realloc(fed, (size_t)(n_ids + r.n) * sizeof *all);
            if (!all) {
                rc = cli_error("out of memory");
            } else {
                fed = all;
                memcpy(fed, ids, (size_t)n_ids * sizeof *ids);
                memcpy(fed + n_ids, r.toks, (size_t)r.n * sizeof *r.toks);
                n_fed = eddy_ctx_n_pos(g.c);
                rc = history_add(&h, "assistant", r.text ? r.text : "", r.len);
                if (tty) gen_print_stats(&st);
            }
        }
        free(ids);
        free(r.text);
        free(r.toks);
    }
    history_clear(&h, 0);
    free(h.msgs);
    free(fed);
    free(line);
    gen_session_close(&g);
    return rc;
}
