/*
 * serve_http.c — the HTTP side of `eddy serve`: libmicrohttpd's handler, one thread
 * per connection, the OpenAI-compatible endpoints, their JSON (jansson), and the
 * `eddy serve` command itself (flags, start, signals, shutdown).
 *
 * A generation request is read whole (up to SRV_MAX_BODY bytes), parsed and checked
 * field by field (a wrong type or value is a 400 naming the field), rendered with the
 * chat template and tokenized here, in the connection's thread, then handed to the
 * scheduler (serve_sched.c). A plain answer waits for the request to finish; a stream
 * is a response whose content reader waits for each new piece of text and writes it as
 * server-sent events, so a slow reader only ever holds up its own connection. While
 * waiting, the thread looks at the socket every SRV_POLL_MS: a client that has gone
 * cancels its request and the scheduler frees the slot at its next step.
 *
 * Not here: the engine and the batching (serve_sched.c).
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

#define SRV_MAX_BODY (8u << 20) /* bytes of a request body */
#define SRV_POLL_MS 50          /* how often a waiting connection looks at its socket */
#define SRV_IDLE_TIMEOUT 30     /* seconds a connection may sit idle (or trickle headers) */
#define SRV_MAX_CONNECTIONS 512

/* ==== The server ==== */

typedef struct {
    const eddy_vocab *v;
    srv_sched *sched;
    const char *model_name;
    const char *api_key;      /* NULL: none */
    double timeout;           /* seconds per request (0: none) */
    eddy_sampler_params sp;   /* defaults of requests */
    bool seed_fixed;          /* --seed S: sp.seed for requests without a seed (else a random one) */
    long long n_predict;      /* default max_tokens (-1: until the context is full) */
    eddy_chat_options chat;
    bool wants_bos;           /* the vocabulary adds BOS to prompts */
    int64_t n_ctx, n_vocab;
    int64_t created;
} server;

typedef struct {
    char *body;
    size_t len, cap;
    bool too_big;
} conn;

/* ==== JSON helpers ==== */

/* A JSON string of s[0 .. n); invalid UTF-8 becomes U+FFFD, so this never fails on
 * bytes (a token's text may be part of a character). */
static json_t *jstr(const char *s, size_t n) {
    json_t *j = json_stringn(s, n);
    if (j) return j;
    char *t = malloc(3 * n + 1);
    if (!t) return json_string("");
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        const unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool okc = len > 0 && i + len <= n && c != 0;
        for (size_t q = 1; okc && q < len; q++) okc = ((unsigned char)s[i + q] >> 6) == 2;
        if (okc && len > 1) {
            json_t *probe = json_stringn(s + i, len); /* overlongs, surrogates */
            okc = probe != NULL;
            json_decref(probe);
        }
        if (okc) {
            memcpy(t + k, s + i, len);
            k += len, i += len;
        } else {
            memcpy(t + k, "\xEF\xBF\xBD", 3);
            k += 3, i += 1;
        }
    }
    j = json_stringn(t, k);
    free(t);
    return j ? j : json_string("");
}

static json_t *token_json(const server *sv, eddy_token t) {
    size_t len = 0;
    const char *p = eddy_vocab_token_text(sv->v, t, &len);
    return jstr(p ? p : "", p ? len : 0);
}

static json_t *token_bytes(const server *sv, eddy_token t) {
    size_t len = 0;
    const char *p = eddy_vocab_token_text(sv->v, t, &len);
    json_t *a = json_array();
    for (size_t i = 0; p && i < len; i++) json_array_append_new(a, json_integer((unsigned char)p[i]));
    return a;
}

/* ==== Responses ==== */

static enum MHD_Result respond(server *sv, struct MHD_Connection *c, unsigned status, const char *type,
                               char *body, size_t len, const char *retry_after) {
    struct MHD_Response *res = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!res) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(res, "Content-Type", type);
    MHD_add_response_header(res, "Access-Control-Allow-Origin", "*");
    if (retry_after) MHD_add_response_header(res, "Retry-After", retry_after);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(res, "Allow", "GET, POST, OPTIONS");
    if (status == MHD_HTTP_UNAUTHORIZED) MHD_add_response_header(res, "WWW-Authenticate", "Bearer");
    enum MHD_Result r = MHD_queue_response(c, status, res);
    MHD_destroy_response(res);
    srv_metrics_http(sv->sched, (int)status);
    return r;
}

static enum MHD_Result respond_json(server *sv, struct MHD_Connection *c, unsigned status, json_t *j) {
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}";
        char *copy = strdup(oom);
        return copy ? respond(sv, c, 500, "application/json", copy, strlen(copy), NULL) : MHD_NO;
    }
    return respond(sv, c, status, "application/json", s, strlen(s), NULL);
}

static const char *error_type(unsigned status) {
    switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 500: case 503: case 504: return "server_error";
    default: return "invalid_request_error";
    }
}

/* OpenAI's error object: {"error":{"message","type","param","code"}}. */
static json_t *error_json(unsigned status, const char *msg, const char *param, const char *code) {
    return json_pack("{s:{s:o,s:s,s:o,s:o}}", "error", "message", jstr(msg, strlen(msg)), "type",
                     error_type(status), "param", param ? json_string(param) : json_null(), "code",
                     code ? json_string(code) : json_null());
}

static enum MHD_Result respond_error(server *sv, struct MHD_Connection *c, unsigned status, const char *msg,
                                     const char *param, const char *code) {
    json_t *j = error_json(status, msg, param, code);
    if (status == 429 || status == 503) {
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!s) return MHD_NO;
        return respond(sv, c, status, "application/json", s, strlen(s), "1");
    }
    return respond_json(sv, c, status, j);
}

/* Whether a step on the GPU failed (srv_sched_failed): then msg is the 503's message. */
static bool gpu_failed(server *sv, char *msg, size_t cap) {
    char failed[512];
    if (!srv_sched_failed(sv->sched, failed, sizeof failed)) return false;
    snprintf(msg, cap, "the GPU failed (%s); restart the server", failed);
    return true;
}

/* ==== Request fields ==== */

/* A field's problem: the message and the field's name, for a 400. */
typedef struct {
    char msg[768]; /* room for an eddy_error's message and a sentence around it */
    const char *param;
    const char *code;
} bad_field;

static int bad(bad_field *b, const char *param, const char *fmt, const char *detail) {
    b->param = param;
    snprintf(b->msg, sizeof b->msg, fmt, param, detail ? detail : "");
    return 1;
}

/* The member, or NULL when absent or null. */
static json_t *field(json_t *o, const char *name) {
    json_t *j = json_object_get(o, name);
    return j && !json_is_null(j) ? j : NULL;
}

static int get_number(json_t *o, const char *name, double lo, double hi, double *out, bad_field *b) {
    json_t *j = field(o, name);
    if (!j) return 0;
    if (!json_is_number(j)) return bad(b, name, "'%s' must be a number%s", NULL);
    const double x = json_number_value(j);
    if (!isfinite(x) || x < lo || x > hi) {
        char range[96];
        snprintf(range, sizeof range, " between %g and %g", lo, hi);
        return bad(b, name, "'%s' must be a number%s", range);
    }
    *out = x;
    return 0;
}

static int get_int(json_t *o, const char *name, long long lo, long long hi, long long *out, bad_field *b) {
    json_t *j = field(o, name);
    if (!j) return 0;
    if (!json_is_integer(j)) return bad(b, name, "'%s' must be an integer%s", NULL);
    const long long x = json_integer_value(j);
    if (x < lo || x > hi) {
        char range[96];
        snprintf(range, sizeof range, " between %lld and %lld", lo, hi);
        return bad(b, name, "'%s' must be an integer%s", range);
    }
    *out = x;
    return 0;
}

static int get_bool(json_t *o, const char *name, bool *out, bad_field *b) {
    json_t *j = field(o, name);
    if (!j) return 0;
    if (!json_is_boolean(j)) return bad(b, name, "'%s' must be a boolean%s", NULL);
    *out = json_is_true(j);
    return 0;
}

/* ==== Generation requests ==== */

typedef enum { EP_CHAT, EP_COMPLETION } endpoint;

/* What the answer's JSON needs beyond the scheduler's request. */
typedef struct {
    server *sv;
    endpoint ep;
    srv_request *r;
    bool stream, include_usage;
    char id[48];
    int64_t created;
    struct MHD_Connection *c;
    /* streaming */
    char *pend;          /* serialized events not yet written, [pend_off, pend_len) */
    size_t pend_len, pend_off, pend_cap;
    size_t text_sent;    /* bytes of r->text already sent */
    int64_t lp_sent;     /* logprob entries already sent */
    bool role_sent, ended;
} gen;

static void new_id(char *out, size_t n, const char *prefix) {
    snprintf(out, n, "%s%016llx", prefix, (unsigned long long)cli_random_seed());
}

/* Content given as an array of parts becomes the string of its text parts (joined by
 * newlines), as templates expect a string; other kinds of parts are refused. */
static int flatten_parts(json_t *msgs, bad_field *b) {
    size_t i, k;
    json_t *m, *part;
    json_array_foreach(msgs, i, m) {
        json_t *content = json_object_get(m, "content");
        if (!json_is_array(content)) continue;
        size_t len = 0;
        json_array_foreach(content, k, part) {
            json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
            if (!json_is_object(part) || !json_is_string(type) || strcmp(json_string_value(type), "text") ||
                !json_is_string(text))
                return bad(b, "messages", "a content part in '%s' must be {\"type\": \"text\", \"text\": ...}%s",
                           NULL);
            len += json_string_length(text) + 1;
        }
        char *joined = malloc(len + 1), *at = joined;
        if (!joined) return bad(b, "messages", "out of memory reading '%s'%s", NULL);
        json_array_foreach(content, k, part) {
            json_t *text = json_object_get(part, "text");
            if (k) *at++ = '\n';
            memcpy(at, json_string_value(text), json_string_length(text));
            at += json_string_length(text);
        }
        json_object_set_new(m, "content", json_stringn(joined, (size_t)(at - joined)));
        free(joined);
    }
    return 0;
}

/* The prompt of a chat request: messages through the template, tokenized. */
static int chat_prompt(server *sv, json_t *req, srv_request *r, bad_field *b) {
    json_t *msgs = json_object_get(req, "messages");
    if (!msgs) return bad(b, "messages", "'%s' is required%s", NULL);
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return bad(b, "messages", "'%s' must be a non-empty array of messages%s", NULL);
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
        if (!json_is_object(m) || !json_is_string(role))
            return bad(b, "messages", "each of '%s' must be an object with a string 'role'%s", NULL);
        if (content && !json_is_string(content) && !json_is_array(content) && !json_is_null(content))
            return bad(b, "messages", "a message's content in '%s' must be a string, an array of parts or null%s",
                       NULL);
    }
    if (flatten_parts(msgs, b)) return 1;
    eddy_chat_options opt = sv->chat;
    json_t *kw = field(req, "chat_template_kwargs");
    if (kw) {
        bool think;
        if (!json_is_object(kw)) return bad(b, "chat_template_kwargs", "'%s' must be an object%s", NULL);
        if (json_object_get(kw, "enable_thinking")) {
            if (get_bool(kw, "enable_thinking", &think, b)) return 1;
            opt.enable_thinking = think;
        }
    }
    char *mj = json_dumps(msgs, JSON_COMPACT);
    if (!mj) return bad(b, "messages", "out of memory reading '%s'%s", NULL);
    char *text = NULL;
    size_t len = 0;
    eddy_error err;
    eddy_status st = eddy_chat_format_json(sv->v, mj, &opt, &text, &len, &err);
    free(mj);
    if (st != EDDY_OK) return bad(b, "messages", "'%s' could not be formatted by the chat template: %s", err.msg);
    eddy_token *ids = NULL;
    int64_t n = 0;
    st = eddy_tokenize(sv->v, text, len, 0, &ids, &n, &err);
    eddy_buffer_free(text);
    if (st != EDDY_OK) return bad(b, "messages", "'%s': %s", err.msg);
    const eddy_token bos = eddy_vocab_bos(sv->v);
    const bool add_bos = sv->wants_bos && bos >= 0 && (n == 0 || ids[0] != bos);
    r->prompt = malloc((size_t)(n + 1) * sizeof *r->prompt);
    if (!r->prompt) {
        eddy_buffer_free(ids);
        return bad(b, "messages", "out of memory tokenizing '%s'%s", NULL);
    }
    if (add_bos) r->prompt[0] = bos;
    memcpy(r->prompt + add_bos, ids, (size_t)n * sizeof *ids);
    r->n_prompt = n + add_bos;
    eddy_buffer_free(ids);
    return 0;
}

/* The prompt of a completion request: a string, or an array of token ids (or of one
 * string). */
static int completion_prompt(server *sv, json_t *req, srv_request *r, bad_field *b) {
    json_t *p = json_object_get(req, "prompt");
    if (!p) return bad(b, "prompt", "'%s' is required%s", NULL);
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
    if (json_is_string(p)) {
        eddy_token *ids = NULL;
        int64_t n = 0;
        eddy_error err;
        if (eddy_tokenize(sv->v, json_string_value(p), json_string_length(p), EDDY_TOKENIZE_ADD_SPECIAL, &ids, &n,
                          &err) != EDDY_OK)
            return bad(b, "prompt", "'%s': %s", err.msg);
        r->prompt = malloc((size_t)(n ? n : 1) * sizeof *r->prompt);
        if (r->prompt) memcpy(r->prompt, ids, (size_t)n * sizeof *ids);
        eddy_buffer_free(ids);
        if (!r->prompt) return bad(b, "prompt", "out of memory tokenizing '%s'%s", NULL);
        r->n_prompt = n;
        return 0;
    }
    if (!json_is_array(p)) return bad(b, "prompt", "'%s' must be a string or an array of token ids%s", NULL);
    const size_t n = json_array_size(p);
    if (n > (size_t)sv->n_ctx) return bad(b, "prompt", "'%s' is longer than the context%s", NULL);
    r->prompt = malloc((n ? n : 1) * sizeof *r->prompt);
    if (!r->prompt) return bad(b, "prompt", "out of memory reading '%s'%s", NULL);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(p, i);
        if (!json_is_integer(t)) return bad(b, "prompt", "'%s' must be a string, or an array of token ids%s", NULL);
        const json_int_t id = json_integer_value(t);
        if (id < 0 || id >= sv->n_vocab) return bad(b, "prompt", "'%s' holds a token id outside the vocabulary%s", NULL);
        r->prompt[i] = (eddy_token)id;
    }
    r->n_prompt = (int64_t)n;
    return 0;
}

/* Every field of a chat or completion request into g (and g->r); 0, or 1 with *b set
 * (or with b->code "oom"). */
static int parse_gen(server *sv, json_t *req, gen *g, bad_field *b) {
    srv_request *r = g->r;
    if (!json_is_object(req)) return bad(b, "body", "the request %s must be a JSON object%s", NULL);
    json_t *model = field(req, "model");
    if (model && !json_is_string(model)) return bad(b, "model", "'%s' must be a string%s", NULL);
    long long n = 1;
    if (get_int(req, "n", 1, 1, &n, b)) return 1;
    if (get_bool(req, "stream", &g->stream, b)) return 1;
    if (get_bool(req, "ignore_eos", &r->ignore_eos, b)) return 1;
    json_t *so = field(req, "stream_options");
    if (so) {
        if (!json_is_object(so)) return bad(b, "stream_options", "'%s' must be an object%s", NULL);
        if (get_bool(so, "include_usage", &g->include_usage, b)) return 1;
    }
    /* sampling */
    r->sp = sv->sp;
    double d;
    long long v;
    if (get_number(req, "temperature", 0, 100, &d, b)) return 1;
    if (field(req, "temperature")) r->sp.temp = (float)d;
    if (get_number(req, "top_p", 0, 1, &d, b)) return 1;
    if (field(req, "top_p")) {
        if (d <= 0) return bad(b, "top_p", "'%s' must be greater than 0%s", NULL);
        r->sp.top_p = (float)d;
    }
    if (get_int(req, "top_k", 0, 1 << 30, &v, b)) return 1;
    if (field(req, "top_k")) r->sp.top_k = (int32_t)v;
    if (get_number(req, "min_p", 0, 1, &d, b)) return 1;
    if (field(req, "min_p")) r->sp.min_p = (float)d;
    if (get_number(req, "presence_penalty", -2, 2, &d, b)) return 1;
    if (field(req, "presence_penalty")) r->sp.presence_penalty = (float)d;
    if (get_number(req, "frequency_penalty", -2, 2, &d, b)) return 1;
    if (field(req, "frequency_penalty")) r->sp.frequency_penalty = (float)d;
    if (get_number(req, "repeat_penalty", 1e-3, 100, &d, b)) return 1;
    if (field(req, "repeat_penalty")) r->sp.repeat_penalty = (float)d;
    if (get_int(req, "repeat_last_n", 0, 1 << 20, &v, b)) return 1;
    if (field(req, "repeat_last_n")) r->sp.repeat_last_n = (int32_t)v;
    r->sp.seed = sv->seed_fixed ? sv->sp.seed : cli_random_seed();
    json_t *seed = field(req, "seed");
    if (seed) {
        if (!json_is_integer(seed)) return bad(b, "seed", "'%s' must be an integer%s", NULL);
        r->sp.seed = (uint64_t)json_integer_value(seed);
    }
    /* length */
    r->max_tokens = sv->n_predict;
    const char *len_name = field(req, "max_completion_tokens") ? "max_completion_tokens"
                           : field(req, "max_tokens")          ? "max_tokens"
                                                               : "n_predict";
    long long mt = -2;
    if (get_int(req, len_name, -1, (long long)1 << 40, &mt, b)) return 1;
    if (mt != -2) r->max_tokens = mt;
    /* stop strings */
    json_t *stop = field(req, "stop");
    if (stop) {
        if (json_is_string(stop)) {
            json_t *one = json_array();
            json_array_append(one, stop);
            stop = one;
        } else if (json_is_array(stop)) {
            json_incref(stop);
        } else {
            return bad(b, "stop", "'%s' must be a string or an array of strings%s", NULL);
        }
        size_t i;
        json_t *s;
        int rc = 0;
        if (json_array_size(stop) > SRV_MAX_STOPS) rc = bad(b, "stop", "'%s' holds more than 4 strings%s", NULL);
        json_array_foreach(stop, i, s) {
            if (rc) break;
            if (!json_is_string(s) || json_string_length(s) == 0) {
                rc = bad(b, "stop", "'%s' must hold non-empty strings%s", NULL);
                break;
            }
            r->stop[r->n_stop] = malloc(json_string_length(s) + 1);
            if (!r->stop[r->n_stop]) {
                rc = bad(b, "stop", "out of memory reading '%s'%s", NULL);
                break;
            }
            memcpy(r->stop[r->n_stop], json_string_value(s), json_string_length(s) + 1);
            r->stop_len[r->n_stop++] = json_string_length(s);
        }
        json_decref(stop);
        if (rc) return 1;
    }
    /* log-probabilities */
    json_t *lp = field(req, "logprobs");
    if (g->ep == EP_CHAT) {
        bool want = false;
        long long top = 0;
        if (get_bool(req, "logprobs", &want, b)) return 1;
        if (get_int(req, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &top, b)) return 1;
        if (field(req, "top_logprobs") && !want)
            return bad(b, "top_logprobs", "'%s' needs 'logprobs': true%s", NULL);
        r->n_logprobs = want ? (int)top : -1;
    } else if (lp) {
        long long k = 0;
        if (json_is_boolean(lp)) k = json_is_true(lp) ? 0 : -1;
        else if (get_int(req, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &k, b)) return 1;
        r->n_logprobs = (int)k;
    }
    /* a pinned conversation */
    json_t *sid = field(req, "session_id");
    if (sid) {
        if (!json_is_string(sid) || json_string_length(sid) == 0 || json_string_length(sid) > 256)
            return bad(b, "session_id", "'%s' must be a string of 1 to 256 bytes%s", NULL);
        if (!(r->session_id = strdup(json_string_value(sid)))) return bad(b, "session_id", "out of memory%s%s", NULL);
    }
    /* the prompt, last: the costly part */
    if ((g->ep == EP_CHAT ? chat_prompt : completion_prompt)(sv, req, r, b)) return 1;
    if (r->n_prompt == 0) return bad(b, g->ep == EP_CHAT ? "messages" : "prompt", "'%s' gives no tokens%s", NULL);
    if (r->n_prompt >= sv->n_ctx) {
        char what[96];
        snprintf(what, sizeof what, " (%lld tokens; the context holds %lld)", (long long)r->n_prompt,
                 (long long)sv->n_ctx);
        bad(b, g->ep == EP_CHAT ? "messages" : "prompt", "'%s' is too long for the context%s", what);
        b->code = "context_length_exceeded";
        return 1;
    }
    if (sv->timeout > 0) r->deadline = cli_now_s() + sv->timeout;
    return 0;
}

/* ==== Waiting for the scheduler ==== */

/* True when the peer has closed its end (or the socket failed). */
static bool client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    char byte;
    const ssize_t k = recv(ci->connect_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (k == 0) return true;
    return k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

static void cancel(gen *g) {
    pthread_mutex_lock(&g->r->mu);
    g->r->cancelled = true;
    pthread_mutex_unlock(&g->r->mu);
    srv_sched_wake(g->sv->sched);
}

/* Waits (r->mu held) until the request has news beyond text_sent / lp_sent or has
 * ended; false when the client went away meanwhile (the request is cancelled). */
static bool wait_news(gen *g, bool any_text) {
    srv_request *r = g->r;
    for (;;) {
        if (r->state != SRV_RUNNING) return true;
        if (any_text && (r->text_len > g->text_sent || r->n_lp > g->lp_sent)) return true;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += SRV_POLL_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) == ETIMEDOUT) {
            pthread_mutex_unlock(&r->mu);
            const bool gone = client_gone(g->c);
            if (gone) cancel(g);
            pthread_mutex_lock(&r->mu);
            if (gone) return false;
        }
    }
}

/* ==== Answers ==== */

static json_t *usage_json(const srv_request *r) {
    return json_pack("{s:I,s:I,s:I,s:{s:I}}", "prompt_tokens", (json_int_t)r->n_prompt, "completion_tokens",
                     (json_int_t)r->n_gen, "total_tokens", (json_int_t)(r->n_prompt + r->n_gen),
                     "prompt_tokens_details", "cached_tokens", (json_int_t)r->n_cached);
}

/* Log-probabilities of entries [from, to) as the endpoint writes them; text_off is
 * the offset of the first token's text (completions' text_offset). */
static json_t *logprobs_json(gen *g, int64_t from, int64_t to, size_t text_off) {
    const srv_request *r = g->r;
    server *sv = g->sv;
    if (g->ep == EP_CHAT) {
        json_t *content = json_array();
        for (int64_t i = from; i < to; i++) {
            const srv_logprob *e = &r->lp[i];
            json_t *top = json_array();
            for (int k = 0; k < e->n_top; k++)
                json_array_append_new(top, json_pack("{s:o,s:f,s:o}", "token", token_json(sv, e->top[k]), "logprob",
                                                     (double)e->top_logprob[k], "bytes", token_bytes(sv, e->top[k])));
            json_array_append_new(content, json_pack("{s:o,s:f,s:o,s:o}", "token", token_json(sv, e->token), "logprob",
                                                     (double)e->logprob, "bytes", token_bytes(sv, e->token),
                                                     "top_logprobs", top));
        }
        return json_pack("{s:o}", "content", content);
    }
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t off = text_off;
    for (int64_t i = from; i < to; i++) {
        const srv_logprob *e = &r->lp[i];
        size_t len = 0;
        eddy_vocab_token_text(sv->v, e->token, &len);
        json_array_append_new(tokens, token_json(sv, e->token));
        json_array_append_new(lps, json_real(e->logprob));
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += len;
        json_t *top = json_object();
        for (int k = 0; k < e->n_top; k++) {
            json_t *name = token_json(sv, e->top[k]);
            json_object_set_new(top, json_string_value(name), json_real(e->top_logprob[k]));
            json_decref(name);
        }
        json_array_append_new(tops, top);
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

/* The whole answer (r->mu held, the request ended). */
static json_t *final_json(gen *g) {
    const srv_request *r = g->r;
    json_t *lp = r->n_logprobs >= 0 ? logprobs_json(g, 0, r->n_lp, 0) : json_null();
    json_t *choice;
    if (g->ep == EP_CHAT)
        choice = json_pack("{s:i,s:{s:s,s:o},s:o,s:s}", "index", 0, "message", "role", "assistant", "content",
                           jstr(r->text ? r->text : "", r->text_len), "logprobs", lp, "finish_reason", r->finish);
    else
        choice = json_pack("{s:i,s:o,s:o,s:s}", "index", 0, "text", jstr(r->text ? r->text : "", r->text_len),
                           "logprobs", lp, "finish_reason", r->finish);
    return json_pack("{s:s,s:s,s:I,s:s,s:s,s:[o],s:o}", "id", g->id, "object",
                     g->ep == EP_CHAT ? "chat.completion" : "text_completion", "created", (json_int_t)g->created,
                     "model", g->sv->model_name, "system_fingerprint", "eddy-" EDDY_VERSION_STRING, "choices", choice,
                     "usage", usage_json(r));
}

/* One streamed chunk: delta text (may be NULL), logprobs (may be NULL), finish. */
static json_t *chunk_json(gen *g, json_t *text, json_t *lp, const char *finish, bool role) {
    json_t *choice;
    if (g->ep == EP_CHAT) {
        json_t *delta = json_object();
        if (role) json_object_set_new(delta, "role", json_string("assistant"));
        if (text) json_object_set_new(delta, "content", text);
        choice = json_pack("{s:i,s:o,s:o,s:o}", "index", 0, "delta", delta, "logprobs", lp ? lp : json_null(),
                           "finish_reason", finish ? json_string(finish) : json_null());
    } else {
        choice = json_pack("{s:i,s:o,s:o,s:o}", "index", 0, "text", text ? text : json_string(""), "logprobs",
                           lp ? lp : json_null(), "finish_reason", finish ? json_string(finish) : json_null());
    }
    return json_pack("{s:s,s:s,s:I,s:s,s:s,s:[o]}", "id", g->id, "object",
                     g->ep == EP_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                     (json_int_t)g->created, "model", g->sv->model_name, "system_fingerprint",
                     "eddy-" EDDY_VERSION_STRING, "choices", choice);
}

/* Appends "data: JSON\n\n" (j is consumed) or "data: [DONE]\n\n" (j NULL). */
static void sse(gen *g, json_t *j, bool done) {
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s && !done) return;
    const char *body = done ? "[DONE]" : s;
    const size_t n = strlen(body) + 8;
    if (g->pend_len + n > g->pend_cap) {
        size_t cap = g->pend_cap ? g->pend_cap : 1024;
        while (cap < g->pend_len + n) cap *= 2;
        char *p = realloc(g->pend, cap);
        if (!p) {
            free(s);
            return;
        }
        g->pend = p, g->pend_cap = cap;
    }
    g->pend_len += (size_t)snprintf(g->pend + g->pend_len, n + 1, "data: %s\n\n", body);
    free(s);
}

/* The next events of a stream into g->pend; false when the client went away. */
static bool next_events(gen *g) {
    srv_request *r = g->r;
    pthread_mutex_lock(&r->mu);
    if (!wait_news(g, true)) {
        pthread_mutex_unlock(&r->mu);
        return false;
    }
    if (g->ep == EP_CHAT && !g->role_sent) {
        sse(g, chunk_json(g, json_string(""), NULL, NULL, true), false);
        g->role_sent = true;
    }
    if (r->text_len > g->text_sent || r->n_lp > g->lp_sent) {
        json_t *text = jstr(r->text + g->text_sent, r->text_len - g->text_sent);
        json_t *lp = r->n_logprobs >= 0 && r->n_lp > g->lp_sent ? logprobs_json(g, g->lp_sent, r->n_lp, g->text_sent)
                                                                : NULL;
        g->text_sent = r->text_len, g->lp_sent = r->n_lp;
        sse(g, chunk_json(g, text, lp, NULL, false), false);
    }
    if (r->state == SRV_FINISHED) {
        sse(g, chunk_json(g, g->ep == EP_CHAT ? NULL : json_string(""), NULL, r->finish, false), false);
        if (g->include_usage) {
            json_t *u = json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", g->id, "object",
                                  g->ep == EP_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                                  (json_int_t)g->created, "model", g->sv->model_name, "choices", "usage",
                                  usage_json(r));
            sse(g, u, false);
        }
        sse(g, NULL, true);
        g->ended = true;
    } else if (r->state == SRV_FAILED) {
        sse(g, error_json((unsigned)r->status, r->error, NULL, NULL), false);
        sse(g, NULL, true);
        g->ended = true;
    }
    pthread_mutex_unlock(&r->mu);
    return true;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    gen *g = cls;
    while (g->pend_off == g->pend_len) {
        if (g->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        g->pend_off = g->pend_len = 0;
        if (!next_events(g)) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = g->pend_len - g->pend_off;
    if (n > max) n = max;
    memcpy(buf, g->pend + g->pend_off, n);
    g->pend_off += n;
    return (ssize_t)n;
}

static void gen_free(gen *g) {
    if (!g) return;
    if (g->r) {
        pthread_mutex_lock(&g->r->mu);
        const bool running = g->r->state == SRV_RUNNING;
        pthread_mutex_unlock(&g->r->mu);
        if (running) cancel(g); /* the connection closed before the end */
        srv_request_unref(g->r);
    }
    free(g->pend);
    free(g);
}

static void stream_free(void *cls) { gen_free(cls); }

static enum MHD_Result handle_gen(server *sv, struct MHD_Connection *c, endpoint ep, json_t *req) {
    gen *g = calloc(1, sizeof *g);
    if (!g || !(g->r = srv_request_new())) {
        free(g);
        return respond_error(sv, c, 500, "out of memory", NULL, NULL);
    }
    g->sv = sv, g->ep = ep, g->c = c;
    g->created = (int64_t)time(NULL);
    new_id(g->id, sizeof g->id, ep == EP_CHAT ? "chatcmpl-" : "cmpl-");
    bad_field b = {0};
    if (parse_gen(sv, req, g, &b)) {
        enum MHD_Result res = respond_error(sv, c, 400, b.msg, b.param, b.code);
        gen_free(g);
        return res;
    }
    const int status = srv_sched_submit(sv->sched, g->r);
    if (status) {
        char why[640];
        if (status == 429) snprintf(why, sizeof why, "too many requests are waiting; retry later");
        else if (!gpu_failed(sv, why, sizeof why)) snprintf(why, sizeof why, "the server is shutting down");
        enum MHD_Result res = respond_error(sv, c, (unsigned)status, why, NULL, NULL);
        gen_free(g);
        return res;
    }
    if (g->stream) {
        struct MHD_Response *res = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, g,
                                                                     stream_free);
        if (!res) {
            gen_free(g);
            return MHD_NO;
        }
        MHD_add_response_header(res, "Content-Type", "text/event-stream");
        MHD_add_response_header(res, "Cache-Control", "no-cache");
        MHD_add_response_header(res, "Access-Control-Allow-Origin", "*");
        enum MHD_Result r = MHD_queue_response(c, MHD_HTTP_OK, res);
        MHD_destroy_response(res);
        srv_metrics_http(sv->sched, 200);
        return r;
    }
    srv_request *r = g->r;
    pthread_mutex_lock(&r->mu);
    if (!wait_news(g, false)) {
        pthread_mutex_unlock(&r->mu);
        gen_free(g);
        return MHD_NO; /* nobody to answer */
    }
    enum MHD_Result res;
    if (r->state == SRV_FAILED) {
        char msg[sizeof r->error];
        memcpy(msg, r->error, sizeof msg);
        const int st = r->status;
        pthread_mutex_unlock(&r->mu);
        res = respond_error(sv, c, (unsigned)st, msg, NULL, NULL);
    } else {
        json_t *j = final_json(g);
        pthread_mutex_unlock(&r->mu);
        res = respond_json(sv, c, 200, j);
    }
    gen_free(g);
    return res;
}

/* ==== The other endpoints ==== */

static enum MHD_Result handle_tokenize(server *sv, struct MHD_Connection *c, json_t *req) {
    json_t *content = json_object_get(req, "content");
    bool add_special = false, with_pieces = false, parse_special = true;
    bad_field b = {0};
    if (!json_is_object(req)) return respond_error(sv, c, 400, "the request body must be a JSON object", NULL, NULL);
    if (!json_is_string(content)) return respond_error(sv, c, 400, "'content' must be a string", "content", NULL);
    if (get_bool(req, "add_special", &add_special, &b) || get_bool(req, "with_pieces", &with_pieces, &b) ||
        get_bool(req, "parse_special", &parse_special, &b))
        return respond_error(sv, c, 400, b.msg, b.param, NULL);
    eddy_token *ids = NULL;
    int64_t n = 0;
    eddy_error err;
    unsigned flags = (add_special ? EDDY_TOKENIZE_ADD_SPECIAL : 0) | (parse_special ? 0 : EDDY_TOKENIZE_NO_SPECIAL);
    if (eddy_tokenize(sv->v, json_string_value(content), json_string_length(content), flags, &ids, &n, &err) != EDDY_OK)
        return respond_error(sv, c, 400, err.msg, "content", NULL);
    json_t *a = json_array();
    for (int64_t i = 0; i < n; i++) {
        if (with_pieces)
            json_array_append_new(a, json_pack("{s:i,s:o}", "id", (int)ids[i], "piece", token_json(sv, ids[i])));
        else
            json_array_append_new(a, json_integer(ids[i]));
    }
    eddy_buffer_free(ids);
    return respond_json(sv, c, 200, json_pack("{s:o}", "tokens", a));
}

static enum MHD_Result handle_detokenize(server *sv, struct MHD_Connection *c, json_t *req) {
    json_t *tokens = json_object_get(req, "tokens");
    if (!json_is_object(req)) return respond_error(sv, c, 400, "the request body must be a JSON object", NULL, NULL);
    if (!json_is_array(tokens))
        return respond_error(sv, c, 400, "'tokens' must be an array of token ids", "tokens", NULL);
    const size_t n = json_array_size(tokens);
    eddy_token *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) return respond_error(sv, c, 500, "out of memory", NULL, NULL);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(tokens, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= sv->n_vocab) {
            free(ids);
            return respond_error(sv, c, 400, "'tokens' must hold token ids of the vocabulary", "tokens", NULL);
        }
        ids[i] = (eddy_token)json_integer_value(t);
    }
    char *text = NULL;
    size_t len = 0;
    eddy_error err;
    eddy_status st = eddy_detokenize(sv->v, ids, (int64_t)n, 0, &text, &len, &err);
    free(ids);
    if (st != EDDY_OK) return respond_error(sv, c, 400, err.msg, "tokens", NULL);
    json_t *j = json_pack("{s:o}", "content", jstr(text, len));
    eddy_buffer_free(text);
    return respond_json(sv, c, 200, j);
}

static enum MHD_Result handle_models(server *sv, struct MHD_Connection *c) {
    return respond_json(sv, c, 200,
                        json_pack("{s:s,s:[{s:s,s:s,s:I,s:s,s:{s:I,s:I}}]}", "object", "list", "data", "id",
                                  sv->model_name, "object", "model", "created", (json_int_t)sv->created, "owned_by",
                                  "eddy", "meta", "n_ctx", (json_int_t)sv->n_ctx, "n_vocab", (json_int_t)sv->n_vocab));
}

static enum MHD_Result handle_metrics(server *sv, struct MHD_Connection *c) {
    srv_metrics m;
    srv_metrics_get(sv->sched, &m);
    enum { CAP = 16384 }; /* the text below is about 4 KB */
    char *buf = malloc(CAP);
    if (!buf) return MHD_NO;
    size_t k = 0;
#define METRIC(name, type, help, fmt, value)                                                                      \
    do {                                                                                                          \
        k += (size_t)snprintf(buf + k, CAP - k,                                                                   \
                              "# HELP eddy_" name " " help "\n# TYPE eddy_" name " " type "\neddy_" name " " fmt "\n", \
                              value);                                                                             \
        if (k >= CAP) k = CAP - 1;                                                                                \
    } while (0)
    METRIC("http_requests_total", "counter", "HTTP requests answered.", "%lld", (long long)m.http_requests);
    METRIC("http_errors_total", "counter", "HTTP requests answered with a 4xx or 5xx status.", "%lld",
           (long long)m.http_errors);
    METRIC("requests_total", "counter", "Generation requests accepted.", "%lld", (long long)m.gen_requests);
    METRIC("requests_finished_total", "counter", "Generation requests that ran to their end.", "%lld",
           (long long)m.gen_finished);
    METRIC("requests_cancelled_total", "counter", "Generation requests whose client went away.", "%lld",
           (long long)m.gen_cancelled);
    METRIC("requests_rejected_total", "counter", "Generation requests refused with 429 (queue full).", "%lld",
           (long long)m.gen_rejected);
    METRIC("requests_queued", "gauge", "Generation requests waiting for a slot.", "%lld", (long long)m.queue);
    METRIC("slots_busy", "gauge", "Slots running a request.", "%lld", (long long)m.slots_busy);
    METRIC("slots_total", "gauge", "Slots (sequences decoded together, -np).", "%lld", (long long)m.slots_total);
    METRIC("prompt_tokens_total", "counter", "Prompt tokens of the requests started.", "%lld",
           (long long)m.prompt_tokens);
    METRIC("prompt_tokens_cached_total", "counter", "Prompt tokens restored from a held state, not evaluated.",
           "%lld", (long long)m.cached_tokens);
    METRIC("generated_tokens_total", "counter", "Tokens generated by finished requests.", "%lld",
           (long long)m.generated_tokens);
    METRIC("steps_total", "counter", "Forward steps.", "%lld", (long long)m.steps);
    METRIC("busy_seconds_total", "counter", "Seconds spent in forward steps.", "%.6f", m.busy_seconds);
    METRIC("generated_tokens_per_second", "gauge", "Generated tokens per second of steps with decoding.", "%.3f",
           m.decode_seconds > 0 ? (double)m.generated_tokens / m.decode_seconds : 0.0);
    METRIC("spec_verify_steps_total", "counter", "Speculative verify steps of finished requests.", "%lld",
           (long long)m.spec_steps);
    METRIC("spec_drafted_total", "counter", "Draft tokens checked.", "%lld", (long long)m.spec_drafted);
    METRIC("spec_accepted_total", "counter", "Draft tokens accepted.", "%lld", (long long)m.spec_accepted);
    METRIC("sessions_dropped_total", "counter", "Pinned sessions dropped to make room in the KV cache for a step.",
           "%lld", (long long)m.sessions_dropped);
    METRIC("cache_entries", "gauge", "States held by the prefix cache.", "%lld", (long long)m.cache.entries);
    METRIC("cache_lookups_total", "counter", "Prefix cache look-ups.", "%lld", (long long)m.cache.lookups);
    METRIC("cache_hits_total", "counter", "Prefix cache look-ups that restored a state.", "%lld",
           (long long)m.cache.hits);
    METRIC("cache_tokens_restored_total", "counter", "Positions the prefix cache's hits did not evaluate.", "%lld",
           (long long)m.cache.tokens_restored);
    METRIC("cache_bytes", "gauge", "Bytes charged to the prefix cache's states.", "%zu", m.cache.bytes);
    METRIC("cache_budget_bytes", "gauge", "The prefix cache's budget (--cache-ram).", "%zu", m.cache.budget);
#undef METRIC
    return respond(sv, c, 200, "text/plain; version=0.0.4", buf, k, NULL);
}

/* ==== Dispatch ==== */

static bool key_ok(server *sv, struct MHD_Connection *c) {
    if (!sv->api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7)) return false;
    h += 7;
    const size_t n = strlen(sv->api_key), m = strlen(h);
    unsigned char diff = n != m;
    for (size_t i = 0; i < m; i++) diff |= (unsigned char)(h[i] ^ sv->api_key[i % (n ? n : 1)]);
    return diff == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **state) {
    (void)version;
    server *sv = cls;
    conn *k = *state;
    if (!k) { /* the headers are in */
        if (!(k = calloc(1, sizeof *k))) return MHD_NO;
        *state = k;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(cl, &end, 10);
            if (errno || end == cl || n > SRV_MAX_BODY) {
                k->too_big = true;
                return respond_error(sv, c, 413, "the request body is too large (at most 8 MiB)", NULL, NULL);
            }
        }
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        if (!k->too_big && k->len + *upload_size > SRV_MAX_BODY) {
            k->too_big = true;
            free(k->body);
            k->body = NULL, k->len = k->cap = 0;
        }
        if (!k->too_big) {
            if (k->len + *upload_size + 1 > k->cap) {
                size_t cap = k->cap ? k->cap : 4096;
                while (cap < k->len + *upload_size + 1) cap *= 2;
                char *p = realloc(k->body, cap);
                if (!p) return MHD_NO;
                k->body = p, k->cap = cap;
            }
            memcpy(k->body + k->len, upload, *upload_size);
            k->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (k->too_big) return respond_error(sv, c, 413, "the request body is too large (at most 8 MiB)", NULL, NULL);

    const bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    if (!strcmp(method, "OPTIONS")) {
        struct MHD_Response *res = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        if (!res) return MHD_NO;
        MHD_add_response_header(res, "Access-Control-Allow-Origin", "*");
        MHD_add_response_header(res, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(res, "Access-Control-Allow-Headers", "Authorization, Content-Type");
        enum MHD_Result r = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, res);
        MHD_destroy_response(res);
        srv_metrics_http(sv->sched, 204);
        return r;
    }
    static const struct {
        const char *path;
        bool post;
    } routes[] = {
        {"/health", false},         {"/v1/health", false},    {"/v1/models", false},   {"/models", false},
        {"/metrics", false},        {"/v1/chat/completions", true}, {"/chat/completions", true},
        {"/v1/completions", true},  {"/completions", true},   {"/tokenize", true},     {"/detokenize", true},
    };
    int route = -1;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(url, routes[i].path)) route = (int)i;
    if (route < 0) return respond_error(sv, c, 404, "no such endpoint", NULL, "not_found");
    if (routes[route].post ? !post : !get) return respond_error(sv, c, 405, "method not allowed here", NULL, NULL);
    char why[640];
    if (route <= 1 && gpu_failed(sv, why, sizeof why)) /* a supervisor restarts it */
        return respond_error(sv, c, 503, why, NULL, "gpu_failed");
    if (route <= 1) return respond_json(sv, c, 200, json_pack("{s:s}", "status", "ok"));
    if (!key_ok(sv, c)) return respond_error(sv, c, 401, "a missing or wrong API key", NULL, "invalid_api_key");
    if (route <= 3) return handle_models(sv, c);
    if (route == 4) return handle_metrics(sv, c);

    json_error_t je;
    json_t *req = json_loadb(k->body ? k->body : "", k->len, JSON_REJECT_DUPLICATES, &je);
    if (!req) {
        char msg[320];
        snprintf(msg, sizeof msg, "the request body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
                 je.column);
        return respond_error(sv, c, 400, msg, NULL, NULL);
    }
    enum MHD_Result r;
    if (route <= 6) r = handle_gen(sv, c, EP_CHAT, req);
    else if (route <= 8) r = handle_gen(sv, c, EP_COMPLETION, req);
    else if (route == 9) r = handle_tokenize(sv, c, req);
    else r = handle_detokenize(sv, c, req);
    json_decref(req);
    return r;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode why) {
    (void)cls, (void)c, (void)why;
    conn *k = *state;
    if (k) free(k->body);
    free(k);
    *state = NULL;
}

/* ==== eddy serve ==== */

const char usage_serve[] =
    "eddy serve -m MODEL.gguf [--host 127.0.0.1] [--port 8080] [-np N] [-c N] [-t N] [--api-key KEY]\n"
    "           [--cache-ram MiB] [--timeout S] [--max-queue N] [--sessions N] [--alias NAME]\n"
    "           [--prefill-chunk N]\n"
    "           [the sampling, context, thread, device and template options of run: the requests'\n"
    "           defaults]\n"
    "        an OpenAI-compatible HTTP server (docs/server.md): POST /v1/chat/completions and\n"
    "        /v1/completions (streamed as server-sent events or not), GET /v1/models, /health,\n"
    "        /metrics (Prometheus), POST /tokenize and /detokenize. Up to N requests (-np,\n"
    "        default 4) are decoded together on one engine, new ones joining at each step; prompts\n"
    "        go in -b tokens per step (default 256), or --prefill-chunk N (default 32) while other\n"
    "        requests decode, bounding the gap between their tokens; the prefix cache (--cache-ram,\n"
    "        default 4096 MiB) lets a request that shares a conversation's start evaluate the rest.\n"
    "        --max-queue requests (default 64) may wait before 429; --timeout S ends a request\n"
    "        after S seconds (504); --api-key KEY wants \"Authorization: Bearer KEY\". SIGINT or\n"
    "        SIGTERM ends the running answers cleanly and stops. --spec-type ngram|mtp or -md FILE\n"
    "        (and the draft flags of run): drafts for every request, verified in one step\n";

int cmd_serve(int argc, char **argv) {
    gen_opts o;
    gen_opts_init(&o);
    const char *host = "127.0.0.1", *api_key = NULL, *alias = NULL;
    long long port = 8080, np = 4, max_queue = 64, sessions = 16, prefill_chunk = 32;
    double timeout = 0;
    for (int i = 1; i < argc; i++) {
        int r = gen_opts_parse(&o, argc, argv, &i);
        if (r > 0) return 1;
        if (r == 0) continue;
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--host")) {
            if (!val) return cli_error("%s needs an address", a);
            host = val;
        } else if (!strcmp(a, "--port")) {
            if (cli_parse_int(a, val, 0, 65535, &port)) return 1;
        } else if (!strcmp(a, "-np") || !strcmp(a, "--parallel")) {
            if (cli_parse_int(a, val, 1, 256, &np)) return 1;
        } else if (!strcmp(a, "--api-key")) {
            if (!val || !*val) return cli_error("%s needs a key", a);
            api_key = val;
        } else if (!strcmp(a, "--timeout") || !strcmp(a, "-to")) {
            if (cli_parse_float(a, val, 0, 1e7, &timeout)) return 1;
        } else if (!strcmp(a, "--max-queue")) {
            if (cli_parse_int(a, val, 1, 1 << 20, &max_queue)) return 1;
        } else if (!strcmp(a, "--prefill-chunk")) {
            if (cli_parse_int(a, val, 1, 1 << 20, &prefill_chunk)) return 1;
        } else if (!strcmp(a, "--sessions")) {
            if (cli_parse_int(a, val, 0, 4096, &sessions)) return 1;
        } else if (!strcmp(a, "--alias") || !strcmp(a, "-a")) {
            if (!val || !*val) return cli_error("%s needs a name", a);
            alias = val;
        } else {
            return cli_bad_arg("serve", a);
        }
        i++;
    }
    if (!o.model) return cli_error("serve: no model given (-m MODEL.gguf)");
    if (o.prompt || o.prompt_file || o.system || o.n_stop || o.chat)
        return cli_error("serve: prompts, --system and -r come with each request, not on the command line");
    if (o.ignore_eos) return cli_error("serve: --ignore-eos is an option of run and chat only");

    struct sockaddr_in addr4;
    struct sockaddr_in6 addr6;
    memset(&addr4, 0, sizeof addr4);
    memset(&addr6, 0, sizeof addr6);
    const struct sockaddr *addr;
    bool v6 = false;
    if (inet_pton(AF_INET, !strcmp(host, "localhost") ? "127.0.0.1" : host, &addr4.sin_addr) == 1) {
        addr4.sin_family = AF_INET;
        addr4.sin_port = htons((uint16_t)port);
        addr = (const struct sockaddr *)&addr4;
    } else if (inet_pton(AF_INET6, host, &addr6.sin6_addr) == 1) {
        addr6.sin6_family = AF_INET6;
        addr6.sin6_port = htons((uint16_t)port);
        addr = (const struct sockaddr *)&addr6;
        v6 = true;
    } else {
        return cli_error("--host: \"%s\" is not an IPv4 or IPv6 address", host);
    }

    /* SIGINT and SIGTERM are taken by sigwait below; every thread starts with them blocked */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    server sv = {0};
    gen_session g;
    o.n_snapshots = 0;
    /* the session's context (and a draft model's) checks the settings and is freed: on the
     * CPU, so that a GPU gets the weights once, from the scheduler's engine */
    gen_opts on_cpu = o;
    on_cpu.device = EDDY_DEVICE_CPU;
    if (gen_session_open(&on_cpu, &g)) return 1;
    eddy_ctx_free(g.c); /* its memory goes to the engine's sequences */
    g.c = NULL;
    sv.v = g.v;
    sv.api_key = api_key;
    sv.timeout = timeout;
    sv.sp = o.sp;
    sv.seed_fixed = !o.seed_random;
    sv.n_predict = o.n_predict;
    sv.chat = g.chat;
    sv.n_vocab = eddy_model_n_vocab(g.m);
    sv.created = (int64_t)time(NULL);
    const char *base = strrchr(o.model, '/');
    sv.model_name = alias ? alias : base ? base + 1 : o.model;
    eddy_token *probe = NULL;
    int64_t n_probe = 0;
    sv.wants_bos = eddy_tokenize(g.v, "", 0, EDDY_TOKENIZE_ADD_SPECIAL, &probe, &n_probe, NULL) == EDDY_OK &&
                   n_probe > 0 && probe[0] == eddy_vocab_bos(g.v);
    eddy_buffer_free(probe);

    const int64_t n_batch = o.n_batch > 0 ? o.n_batch : 256;
    srv_sched_params sp = {.m = g.m, .n_slots = (int)np, .n_ctx = o.n_ctx, .n_threads = (int)o.threads,
                           .n_batch = n_batch, .prefill_chunk = prefill_chunk < n_batch ? prefill_chunk : n_batch,
                           .type_k = o.type_k, .type_v = o.type_v, .device = o.device, .gpu_layers = o.gpu_layers,
                           .cache_bytes = (size_t)(o.cache_mib >= 0 ? o.cache_mib : 4096) << 20,
                           .cache_default = o.cache_mib < 0,
                           .max_queue = (int)max_queue, .max_sessions = (int)sessions,
                           .spec = o.spec.type != EDDY_SPEC_NONE ? &g.spec : NULL, .draft_model = g.dm};
    eddy_ctx_free(g.dc); /* the scheduler makes a draft engine of its own */
    g.dc = NULL, g.spec.draft = NULL;
    if (srv_sched_start(&sp, &sv.sched)) {
        srv_sched_free(sv.sched);
        gen_session_close(&g);
        return 1;
    }
    sv.n_ctx = srv_sched_n_ctx(sv.sched);

    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC;
    if (v6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, on_request, &sv, MHD_OPTION_SOCK_ADDR, addr, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SRV_IDLE_TIMEOUT, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)SRV_MAX_CONNECTIONS, MHD_OPTION_END);
    int rc = 0;
    if (!d) {
        rc = cli_error("serve: cannot listen on %s port %lld (%s)", host, port, strerror(errno));
    } else {
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        fprintf(stderr, "eddy serve: listening on http://%s%s%s:%u (model %s, %lld slots of %lld positions, on %s)\n",
                v6 ? "[" : "", host, v6 ? "]" : "", di ? (unsigned)di->port : (unsigned)port, sv.model_name, np,
                (long long)sv.n_ctx, srv_sched_device(sv.sched));
        int sig = 0;
        sigwait(&sigs, &sig);
        fprintf(stderr, "eddy serve: %s: finishing the running answers and stopping\n",
                sig == SIGINT ? "SIGINT" : "SIGTERM");
        const MHD_socket ls = MHD_quiesce_daemon(d); /* no new connections */
        if (ls != MHD_INVALID_SOCKET) close(ls);
    }
    srv_sched_stop(sv.sched); /* ends every request: their connections finish */
    if (d) MHD_stop_daemon(d);
    srv_sched_free(sv.sched);
    gen_session_close(&g);
    return rc;
}
