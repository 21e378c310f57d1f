/*
 * serve.h — the pieces of `eddy serve` (an OpenAI-compatible HTTP server) and what
 * they share: a generation request as the HTTP side hands it to the scheduler and
 * reads its results back, the scheduler's interface, and the server's counters.
 *
 * Threads: libmicrohttpd runs one thread per connection (serve_http.c); each parses
 * and tokenizes its request, submits it to the scheduler and then waits on the
 * request's condition variable for text. One scheduler thread (serve_sched.c) owns
 * the engine and runs every admitted request in one batch per step. Nothing else
 * touches the engine.
 */
#ifndef EDDY_SERVE_H
#define EDDY_SERVE_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

#define SRV_MAX_STOPS 4
/* Our own invariants only (never input): a message with the place, then abort. */
#define SRV_ASSERT(x)                                                                          \
    do {                                                                                       \
        if (!(x)) {                                                                            \
            fprintf(stderr, "eddy: internal error at %s:%d: %s\n", __FILE__, __LINE__, #x); \
            abort();                                                                           \
        }                                                                                      \
    } while (0)
#define SRV_MAX_TOP_LOGPROBS 20

/* ==== A generation request ==== */

/* One generated token's log-probabilities (log-softmax of the model's logits). */
typedef struct {
    eddy_token token;
    float logprob;
    int n_top;
    eddy_token top[SRV_MAX_TOP_LOGPROBS];
    float top_logprob[SRV_MAX_TOP_LOGPROBS];
} srv_logprob;

typedef enum {
    SRV_RUNNING = 0,
    SRV_FINISHED,   /* finish says why: "stop" or "length" */
    SRV_FAILED,     /* error / status say what went wrong */
} srv_state;

typedef struct srv_request {
    /* ---- set by the handler before submitting; read-only afterwards ---- */
    eddy_token *prompt; /* (n_prompt) */
    int64_t n_prompt;
    int64_t max_tokens;  /* -1: until the context is full */
    eddy_sampler_params sp;
    char *stop[SRV_MAX_STOPS];
    size_t stop_len[SRV_MAX_STOPS];
    int n_stop;
    bool ignore_eos;     /* never sample an end-of-generation token (llama-server's ignore_eos) */
    int n_logprobs;      /* -1: none; else the top alternatives wanted per token (0..20) */
    char *session_id;    /* NULL: none */
    double deadline;     /* cli_now_s() time after which the request is abandoned (0: none) */

    /* ---- shared, under mu ---- */
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* signalled when text, logprobs or the state change */
    int refs;            /* the handler's and the scheduler's */
    bool cancelled;      /* the client went away (or the deadline passed): drop it */
    srv_state state;
    const char *finish;  /* "stop" / "length" once finished */
    int status;          /* an HTTP status for SRV_FAILED */
    char error[256];
    char *text;          /* the answer so far (final bytes only: held-back stop prefixes excluded) */
    size_t text_len, text_cap;
    srv_logprob *lp;     /* (n_lp) one per generated token, when n_logprobs >= 0 */
    int64_t n_lp, lp_cap;
    int64_t n_gen;       /* tokens generated (an end-of-generation token is not counted) */
    int64_t n_cached;    /* prompt tokens restored rather than evaluated */
    double t_submit, t_start, t_first, t_end;
} srv_request;

/* A new request with one reference (the caller's); NULL when memory runs out. */
srv_request *srv_request_new(void);
void srv_request_unref(srv_request *r);

/* ==== The scheduler ==== */

typedef struct srv_sched srv_sched;

typedef struct {
    const eddy_model *m;
    int n_slots;          /* sequences decoded together (-np) */
    int64_t n_ctx;        /* positions per sequence (0: the model's, at most 4096) */
    int n_threads;
    int64_t n_batch;      /* prefill tokens per step across requests (the bound on a step's length) */
    int64_t prefill_chunk; /* ... while some request is decoding (each waits on those steps) */
    eddy_kv_type type_k, type_v;
    eddy_device device;   /* where the engine runs (--device, -ngl) */
    int gpu_layers;       /* with device cuda: the last layers on the GPU (-ngl N; 0: all) */
    size_t cache_bytes;   /* the prefix cache's budget */
    bool cache_default;   /* cache_bytes is the default, not --cache-ram: on a GPU it shrinks to fit */
    int max_queue;        /* requests waiting for a slot before 429 */
    int max_sessions;     /* pinned conversations (session_id) */
    /* speculative decoding (NULL or EDDY_SPEC_NONE: none); a draft model's engine is made
     * here, one draft sequence per slot */
    const eddy_spec_params *spec;
    const eddy_model *draft_model;
} srv_sched_params;

/* Makes the engine and starts the scheduler thread; 1 after printing an error. */
int srv_sched_start(const srv_sched_params *p, srv_sched **out);
/* Finishes every running request as if it had stopped, fails the queued ones (503)
 * and joins the thread; later submissions get 503. */
void srv_sched_stop(srv_sched *s);
/* Frees the engine and the rest (after the last connection is gone). NULL: nothing. */
void srv_sched_free(srv_sched *s);
/* Positions per sequence. */
int64_t srv_sched_n_ctx(const srv_sched *s);
/* Where the engine runs: "cpu", or "cuda: " and the GPU's name. */
const char *srv_sched_device(const srv_sched *s);
/* Hands r to the scheduler (which takes its own reference): 0, or an HTTP status
 * (429: the queue is full; 503: shutting down). */
int srv_sched_submit(srv_sched *s, srv_request *r);
/* Whether a step on the GPU failed, which leaves the engine's states lost: every request
 * from then on gets 503, and /health too (msg: the failure). */
bool srv_sched_failed(srv_sched *s, char *msg, size_t cap);
/* Wakes the scheduler (a request was cancelled). */
void srv_sched_wake(srv_sched *s);

/* ==== Counters (GET /metrics) ==== */

typedef struct {
    int64_t http_requests, http_errors;  /* every request; those answered 4xx/5xx */
    int64_t gen_requests, gen_finished, gen_cancelled, gen_rejected;
    int64_t prompt_tokens, cached_tokens, generated_tokens;
    int64_t steps;
    double busy_seconds;                 /* time spent in forward steps */
    double prefill_seconds, decode_seconds;
    int64_t queue, slots_busy, slots_total;
    eddy_cache_stats cache;
    int64_t spec_steps, spec_drafted, spec_accepted; /* speculative decoding of finished requests */
    int64_t sessions_dropped; /* pinned sessions dropped to make room for a step */
} srv_metrics;

void srv_metrics_get(srv_sched *s, srv_metrics *out);
void srv_metrics_http(srv_sched *s, int status);

#endif
