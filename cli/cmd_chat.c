/*
 * cmd_chat.c — `eddy chat`: an interactive conversation in the terminal.
 *
 * Each line typed is a user message (-p or -f gives a first one); the reply streams
 * back. The sequence's state carries the conversation: each turn feeds only the
 * tokens that follow what the context already holds (the template's rendering of the
 * history is compared token by token with what was fed; if a template rewrites
 * earlier turns, the prefix cache's deepest state of it is restored). /undo, /regen,
 * /save, /load and --session are in usage_chat. "/reset" starts over; Ctrl-D
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
    "eddy chat -m MODEL.gguf [--session FILE] [--cache-ram MiB] [OPTIONS of run]\n"
    "        an interactive chat: each line is a user message (-p or -f: the first one); the\n"
    "        sequence's state carries the conversation, so each turn feeds only its new\n"
    "        tokens, and a template that re-renders history restores the deepest state of it\n"
    "        the prefix cache holds (--cache-ram; default 256 MiB, halved until it fits on a\n"
    "        GPU). /undo drops the last\n"
    "        exchange and /regen regenerates the last reply, both from a snapshot, with no\n"
    "        reprocessing; /save FILE and /load FILE keep and resume a conversation (state\n"
    "        and messages); --session FILE resumes FILE's conversation and saves it after\n"
    "        every reply. A conversation that outgrows the context drops its oldest turns\n"
    "        (the system message stays), with a notice. /reset starts over; Ctrl-C stops a\n"
    "        reply (at the prompt, or twice, it quits); Ctrl-D quits. A model without a chat\n"
    "        template needs --chat-template\n";

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

/* ==== Undo: a snapshot before each turn ==== */

#define UNDO_DEPTH 16

typedef struct {
    eddy_snapshot *snap[UNDO_DEPTH]; /* the state before each of the last turns, oldest first */
    int64_t n_msgs[UNDO_DEPTH];      /* the history's length then */
    int n;
} undo_stack;

static void undo_clear(undo_stack *u) {
    for (int i = 0; i < u->n; i++) eddy_snapshot_free(u->snap[i]);
    u->n = 0;
}

/* Remembers the state as it is now, before a turn that starts at message n_msgs. */
static void undo_push(undo_stack *u, eddy_seq *s, int64_t n_msgs) {
    if (u->n == UNDO_DEPTH) { /* the oldest goes */
        eddy_snapshot_free(u->snap[0]);
        memmove(u->snap, u->snap + 1, (UNDO_DEPTH - 1) * sizeof *u->snap);
        memmove(u->n_msgs, u->n_msgs + 1, (UNDO_DEPTH - 1) * sizeof *u->n_msgs);
        u->n--;
    }
    eddy_error err;
    if (eddy_seq_snapshot(s, &u->snap[u->n], &err) != EDDY_OK) {
        eddy_log(EDDY_LOG_WARN, "chat: no snapshot for /undo: %s", err.msg);
        return;
    }
    u->n_msgs[u->n++] = n_msgs;
}

/* ==== Saved conversations: the messages beside the state ==== */

/* The messages as "role\0content\0" pairs; *out freed with free(). */
static int history_pack(const history *h, char **out, size_t *len) {
    size_t n = 0;
    for (int64_t i = 0; i < h->n; i++) n += strlen(h->msgs[i].role) + strlen(h->msgs[i].content) + 2;
    char *p = malloc(n ? n : 1);
    if (!p) return cli_error("out of memory");
    size_t k = 0;
    for (int64_t i = 0; i < h->n; i++) {
        const size_t r = strlen(h->msgs[i].role) + 1, c = strlen(h->msgs[i].content) + 1;
        memcpy(p + k, h->msgs[i].role, r), k += r;
        memcpy(p + k, h->msgs[i].content, c), k += c;
    }
    *out = p, *len = n;
    return 0;
}

/* The messages of history_pack's bytes into h (emptied first); 1 after an error
 * naming path when they are not such pairs. */
static int history_unpack(history *h, const char *p, size_t n, const char *path) {
    static const char *const roles[] = {"system", "user", "assistant"};
    history_clear(h, 0);
    for (size_t k = 0; k < n;) {
        const char *role = p + k, *end = memchr(role, '\0', n - k);
        const char *content = end ? end + 1 : NULL;
        const char *cend = content && content < p + n ? memchr(content, '\0', (size_t)(p + n - content)) : NULL;
        const char *known = NULL;
        for (int i = 0; end && i < 3; i++)
            if (!strcmp(role, roles[i])) known = roles[i];
        if (!cend || !known) return cli_error("%s: the session holds no chat messages (made by eddy run?)", path);
        if (history_add(h, known, content, (size_t)(cend - content))) return 1;
        k = (size_t)(cend + 1 - p);
    }
    return 0;
}

static int chat_save(gen_session *g, const history *h, const char *path) {
    char *app = NULL;
    size_t len = 0;
    if (history_pack(h, &app, &len)) return 1;
    eddy_error err;
    const eddy_status s = eddy_seq_save_app(eddy_ctx_seq(g->c), g->s, app, len, path, &err);
    free(app);
    return s == EDDY_OK ? 0 : cli_error("%s", err.msg);
}

/* The conversation of path into the context, the sampler and h; on failure nothing
 * changes. */
static int chat_load(gen_session *g, history *h, const char *path) {
    void *app = NULL;
    size_t len = 0;
    eddy_error err;
    eddy_snapshot *before = NULL;
    eddy_seq *seq = eddy_ctx_seq(g->c);
    if (eddy_seq_snapshot(seq, &before, &err) != EDDY_OK) before = NULL; /* to put back if the messages are bad */
    int rc = eddy_seq_load_app(seq, g->s, path, &app, &len, &err) == EDDY_OK ? 0 : cli_error("%s", err.msg);
    if (!rc && !app) {
        rc = cli_error("%s: the session holds no chat messages (made by eddy run?)", path);
        if (before) eddy_seq_restore(seq, before, &err);
    } else if (!rc) {
        history tmp = {0};
        rc = history_unpack(&tmp, app, len, path);
        if (!rc) {
            history_clear(h, 0);
            free(h->msgs);
            *h = tmp;
        } else {
            history_clear(&tmp, 0);
            free(tmp.msgs);
            if (before) eddy_seq_restore(seq, before, &err);
        }
    }
    eddy_buffer_free(app);
    eddy_snapshot_free(before);
    return rc;
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
    const char *session = NULL;
    for (int i = 1; i < argc; i++) {
        int r = gen_opts_parse(&o, argc, argv, &i);
        if (r > 0) return 1;
        if (r == 0) continue;
        const char *a = argv[i];
        if (!strcmp(a, "--session") || !strcmp(a, "--prompt-cache")) {
            if (i + 1 >= argc) return cli_error("%s needs a file name", a);
            session = argv[++i];
            continue;
        }
        /* what `eddy run -cnv ...` brings along means chat already */
        if (strcmp(a, "-cnv") && strcmp(a, "--conversation") && strcmp(a, "--chat")) return cli_bad_arg("chat", a);
    }
    o.n_snapshots = UNDO_DEPTH + 1; /* the undo stack, and one for /load to fall back on */
    if (o.cache_mib < 0) o.cache_mib = 256, o.cache_fit = true;
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
    eddy_seq *seq = eddy_ctx_seq(g.c);
    undo_stack undo = {0};
    char *line = NULL;
    size_t line_cap = 0;
    if (!rc && session) {
        FILE *probe = fopen(session, "rb");
        if (probe) { /* resume it */
            fclose(probe);
            rc = chat_load(&g, &h, session);
            if (!rc && tty)
                fprintf(stderr, "eddy chat: resumed %s: %lld messages, %lld tokens\n", session, (long long)h.n,
                        (long long)eddy_seq_n_pos(seq));
        }
    }
    bool first = g.prompt != NULL; /* -p or -f: the first message, before stdin's */
    bool regen = false;            /* the last user message again (/regen) */
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
                undo_clear(&undo);
                continue;
            }
            if (!strncmp(line, "/save ", 6) || !strncmp(line, "/load ", 6)) {
                const bool save = line[1] == 's';
                const int r = save ? chat_save(&g, &h, line + 6) : chat_load(&g, &h, line + 6);
                if (!r && !save) undo_clear(&undo);
                if (!r && tty)
                    fprintf(stderr, "eddy: %s %s: %lld messages, %lld tokens\n", save ? "saved" : "loaded", line + 6,
                            (long long)h.n, (long long)eddy_seq_n_pos(seq));
                if (r && !tty) rc = 1;
                continue;
            }
            if (!strcmp(line, "/undo") || !strcmp(line, "/regen")) {
                if (undo.n == 0) {
                    cli_error("chat: %s: no exchange to go back to", line);
                    if (!tty) rc = 1;
                    continue;
                }
                /* back to the state before the last user message: nothing is reprocessed */
                eddy_error err;
                const int top = --undo.n;
                if (eddy_seq_restore(seq, undo.snap[top], &err) != EDDY_OK) rc = cli_error("%s", err.msg);
                eddy_snapshot_free(undo.snap[top]);
                if (rc) break;
                if (line[1] == 'u') { /* the exchange goes */
                    history_clear(&h, undo.n_msgs[top]);
                    if (tty) fputs("eddy: dropped the last exchange\n", stderr);
                    continue;
                }
                /* /regen: the same user message again, a new reply */
                history_clear(&h, undo.n_msgs[top] + 1);
                regen = true;
            }
            if (!regen) msg = line, got = (size_t)n;
        }
        if (!regen && (rc = history_add(&h, "user", msg, got))) break;
        const int64_t turn_start = h.n - 1;
        regen = false;
        eddy_token *ids;
        int64_t n_ids;
        if (cli_chat_tokens(g.v, h.msgs, h.n, &g.chat, &ids, &n_ids)) {
            history_clear(&h, h.n - 1);
            if (!tty) rc = 1; /* a script cannot answer the error */
            continue;
        }
        /* a conversation that outgrew the context: its oldest turns go (the system
         * message and the new message stay), with a notice */
        int64_t dropped = 0;
        while (n_ids >= eddy_ctx_n_ctx(g.c) && h.n - base > 1) {
            free((char *)h.msgs[base].content);
            memmove(h.msgs + base, h.msgs + base + 1, (size_t)(h.n - base - 1) * sizeof *h.msgs);
            h.n--, dropped++;
            free(ids);
            if (cli_chat_tokens(g.v, h.msgs, h.n, &g.chat, &ids, &n_ids)) {
                ids = NULL;
                break;
            }
        }
        if (dropped) {
            undo_clear(&undo); /* the snapshots' histories are gone */
            fprintf(stderr, "eddy: the conversation no longer fit the context of %lld tokens: dropped its %lld oldest "
                    "messages\n", (long long)eddy_ctx_n_ctx(g.c), (long long)dropped);
        }
        if (!ids || n_ids >= eddy_ctx_n_ctx(g.c)) {
            if (ids) cli_error("the message (%lld tokens with the system message) does not fit the context of %lld",
                               (long long)n_ids, (long long)eddy_ctx_n_ctx(g.c));
            free(ids);
            history_clear(&h, h.n - 1);
            if (!tty) rc = 1;
            continue;
        }
        undo_push(&undo, seq, dropped ? h.n - 1 : turn_start);
        /* feed only what follows the deepest state of these tokens the context or the
         * prefix cache holds (a template that rewrote history finds a checkpoint) */
        int64_t same = 0;
        eddy_error rerr;
        if (eddy_seq_restore_prefix(seq, ids, n_ids, &same, &rerr) != EDDY_OK) same = 0, eddy_ctx_reset(g.c);
        eddy_log(EDDY_LOG_DEBUG, "chat: %lld messages, %lld tokens; %lld of them restored, %lld to evaluate",
                 (long long)h.n, (long long)n_ids, (long long)same, (long long)(n_ids - same));
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
            history_clear(&h, h.n - 1);
            if (undo.n) eddy_snapshot_free(undo.snap[--undo.n]);
            if (!tty) rc = 1;
        } else {
            /* the sequence holds the prompt (all of it unless Ctrl-C stopped the prefill)
             * and the reply but its last token; the next turn restores from there */
            rc = history_add(&h, "assistant", r.text ? r.text : "", r.len);
            eddy_seq_cache_put(seq, NULL);
            if (!rc && session) rc = chat_save(&g, &h, session);
            if (tty && interrupted) fputs("eddy: reply stopped (Ctrl-C)\n", stderr);
            else if (tty) gen_print_stats(&st);
        }
        free(ids);
        free(r.text);
        free(r.toks);
        gen_stopper_free(&r.stop);
    }
    signal(SIGINT, SIG_DFL);
    undo_clear(&undo);
    history_clear(&h, 0);
    free(h.msgs);
    free(line);
    gen_session_close(&g);
    return rc;
}
