/*
 * serve_sched.c — the scheduler of `eddy serve`: one thread that owns the engine and
 * runs every admitted request together (continuous batching).
 *
 * Each step: waiting requests take free slots (the slot whose sequence shares the
 * longest prefix with the prompt first); each new one restores the deepest state of
 * its prompt the sequence, a pinned session or the prefix cache holds; then one
 * forward step carries one token of every decoding request and up to prefill_chunk
 * prompt tokens of the prefilling ones (n_batch when no request decodes; long prompts go
 * in over several steps, so the decoding streams wait at most one bounded step per
 * token); then every request with
 * logits samples its next token. Requests leave when they finish, are cancelled (the
 * client went away, the deadline passed) or fail. A sequence's tokens and logits do
 * not depend on what shares its steps (docs/sequences.md), so each answer is the one
 * the request would get alone.
 *
 * Not here: HTTP and JSON (serve_http.c).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

#define SAVE_AFTER 0.25 /* seconds idle before finished answers' states go to the prefix cache */

/* ==== Requests ==== */

srv_request *srv_request_new(void) {
    srv_request *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->refs = 1;
    r->max_tokens = -1;
    r->n_logprobs = -1;
    return r;
}

void srv_request_unref(srv_request *r) {
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    const int left = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (left) return;
    free(r->prompt);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->session_id);
    free(r->text);
    free(r->lp);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

/* ==== The scheduler's state ==== */

typedef struct {
    srv_request *r;      /* NULL: free */
    eddy_seq *seq;       /* kept between requests: its tokens may begin the next prompt */
    eddy_sampler *s;
    eddy_detok *d;
    int64_t n_fed;       /* prompt tokens the sequence holds */
    bool decoding;       /* the prompt is in; next is the token to feed */
    eddy_token next;
    char *out;           /* every byte generated so far, (out_len) */
    size_t out_len, out_cap;
    size_t published;    /* bytes of out handed to the request */
    size_t max_stop;     /* the request's longest stop string */
    eddy_spec *spec;     /* speculative decoding of the request (NULL: none) */
    int64_t row0;        /* its first row in a verify step's logits */
    int64_t draft_j;     /* its index in a step's eddy_spec_draft_many arguments */
    bool unsaved;        /* the sequence holds a finished answer's state the prefix cache lacks */
    int64_t answer_from; /* where that answer begins (its prompt's length) */
} slot;

typedef struct {
    char *id;
    eddy_snapshot *snap;
    eddy_token *tokens;  /* (n) what the snapshot holds */
    int64_t n;
    uint64_t used;       /* the step it was last made or restored: least recent goes first */
} pinned;

struct srv_sched {
    srv_sched_params p;
    eddy_engine *e;
    const eddy_vocab *v;
    int64_t n_ctx, n_vocab;
    pthread_t thread;
    bool started;

    pthread_mutex_t mu;  /* the queue, stopping, the counters */
    pthread_cond_t cv;   /* work arrived */
    srv_request **queue; /* (max_queue) a ring */
    int q_head, q_len;
    bool stopping;
    char failed[512];    /* a GPU step's failure ("" while none): no step runs after it */
    srv_metrics m;

    /* the scheduler thread's own */
    slot *slots;         /* (n_slots) */
    pinned *pins;        /* (max_sessions) */
    uint64_t tick;
    eddy_token *b_tok;   /* step buffers, (b_cap) */
    eddy_seq **b_seq;
    int8_t *b_want;
    int64_t b_cap;
    slot **b_rows;       /* (n_slots) the slot of each logits row */
    float *logits;       /* (n_slots (k_max + 1), n_vocab): a step's rows, a verify's */
    /* (n_slots (k_max + 1), EDDY_TOP_MAX) each row's best tokens and their logits, and how
     * many, when the engine gives only them (eddy_engine_decode_top, _verify_top) */
    eddy_token *b_ids;
    float *b_top;
    int32_t *b_counts;
    double *b_lse;       /* and their rows' log-sum-exps, when a request wants log-probabilities */
    eddy_token *eog;     /* (n_eog) the vocabulary's end-of-generation tokens */
    int64_t n_eog;
    /* speculative decoding: the settings, a draft engine (-md), drafts per slot and step */
    eddy_spec_params spec;
    bool spec_on;
    eddy_engine *draft;
    int64_t k_max;
    eddy_token *drafts;  /* (n_slots, k_max + 1) each slot's drafts, then its tokens */
    /* (n_slots) a step's drafts: eddy_spec_draft_many's arguments */
    eddy_spec **d_spec;
    eddy_token *d_t, **d_out;
    int64_t *d_max, *d_n;
};

/* ==== Publishing to the request ==== */

static bool grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    char *p = realloc(*buf, c);
    if (!p) return false;
    *buf = p, *cap = c;
    return true;
}

/* The request's text grows by out[published, upto). */
static void publish(slot *sl, size_t upto) {
    srv_request *r = sl->r;
    if (upto <= sl->published) return;
    pthread_mutex_lock(&r->mu);
    const size_t n = upto - sl->published;
    if (grow(&r->text, &r->text_cap, r->text_len + n + 1)) {
        memcpy(r->text + r->text_len, sl->out + sl->published, n);
        r->text_len += n;
        r->text[r->text_len] = '\0';
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    sl->published = upto;
}

static void pin_save(srv_sched *s, slot *sl);

/* Copies a finished answer's state from its slot into the prefix cache. That copy (the
 * whole recurrent state, into memory the cache may never have used) is put off until
 * another conversation takes the slot, or the server has been idle SAVE_AFTER seconds: a
 * conversation's next turn, which usually comes straight back to its slot, does not wait
 * for it. */
static void save_slot(slot *sl) {
    if (!sl->unsaved) return;
    sl->unsaved = false;
    eddy_error err;
    if (eddy_seq_cache_put(sl->seq, &err) != EDDY_OK) eddy_log(EDDY_LOG_WARN, "serve: %s", err.msg);
}

static int busy_slots(const srv_sched *s) {
    int k = 0;
    for (int i = 0; i < s->p.n_slots; i++) k += s->slots[i].r != NULL;
    return k;
}

/* Ends the slot's request: finished with a reason, or failed with a status. */
static void end_request(srv_sched *s, slot *sl, const char *finish, int status, const char *error) {
    srv_request *r = sl->r;
    pthread_mutex_lock(&r->mu);
    if (finish) {
        r->state = SRV_FINISHED;
        r->finish = finish;
    } else {
        r->state = SRV_FAILED;
        r->status = status;
        snprintf(r->error, sizeof r->error, "%s", error);
    }
    r->t_end = cli_now_s();
    pthread_cond_broadcast(&r->cv);
    const bool cancelled = r->cancelled;
    const int64_t n_gen = r->n_gen;
    const double t_gen = r->t_first > 0 ? r->t_end - r->t_first : 0;
    eddy_log(EDDY_LOG_INFO, "serve: request done (%s): prompt %lld tokens (%lld restored), waited %.3f s, "
             "first token after %.3f s, %lld tokens at %.1f t/s",
             cancelled ? "client gone" : finish ? finish : r->error, (long long)r->n_prompt, (long long)r->n_cached,
             r->t_start > 0 ? r->t_start - r->t_submit : 0, r->t_first > 0 ? r->t_first - r->t_submit : 0,
             (long long)n_gen, t_gen > 0 ? (double)(n_gen - 1) / t_gen : 0.0);
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_lock(&s->mu);
    if (cancelled) s->m.gen_cancelled++;
    else if (finish) s->m.gen_finished++;
    s->m.generated_tokens += n_gen;
    pthread_mutex_unlock(&s->mu);
    if (sl->spec) {
        int64_t steps, drafted, accepted;
        eddy_spec_counts(sl->spec, &steps, &drafted, &accepted);
        pthread_mutex_lock(&s->mu);
        s->m.spec_steps += steps, s->m.spec_drafted += drafted, s->m.spec_accepted += accepted;
        pthread_mutex_unlock(&s->mu);
        eddy_spec_free(sl->spec);
        sl->spec = NULL;
    }
    eddy_sampler_free(sl->s);
    eddy_detok_free(sl->d);
    sl->s = NULL, sl->d = NULL;
    if (finish) { /* keep the state for the conversation's next turn: in the slot, and
                   * in the prefix cache later (save_slot) */
        pin_save(s, sl);
        sl->unsaved = true;
        sl->answer_from = r->n_prompt;
    }
    srv_request_unref(r);
    sl->r = NULL;
    pthread_mutex_lock(&s->mu);
    s->m.slots_busy = busy_slots(s);
    pthread_mutex_unlock(&s->mu);
}

static void fail_unstarted(srv_request *r, int status, const char *msg) {
    pthread_mutex_lock(&r->mu);
    r->state = SRV_FAILED;
    r->status = status;
    snprintf(r->error, sizeof r->error, "%s", msg);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    srv_request_unref(r);
}

/* ==== Stop strings ==== */

/* Looks for the request's stop strings in out (only where one could end in the bytes
 * after `from`): the offset of the earliest match, or -1. *safe gets the bytes that
 * can be published: all but a tail that could still begin a stop string. */
static int64_t find_stop(const slot *sl, size_t from, size_t *safe) {
    const srv_request *r = sl->r;
    const size_t n = sl->out_len;
    *safe = n;
    if (!r->n_stop) return -1;
    int64_t best = -1;
    for (int i = 0; i < r->n_stop; i++) {
        const size_t k = r->stop_len[i];
        size_t at = from >= k ? from - k + 1 : 0;
        for (; at + k <= n; at++)
            if (!memcmp(sl->out + at, r->stop[i], k)) {
                if (best < 0 || (int64_t)at < best) best = (int64_t)at;
                break;
            }
    }
    if (best >= 0) return best;
    /* hold back the longest tail that is the start of a stop string */
    for (int i = 0; i < r->n_stop; i++) {
        const size_t k = r->stop_len[i];
        for (size_t m = k - 1 < n ? k - 1 : n; m > 0; m--)
            if (!memcmp(sl->out + n - m, r->stop[i], m)) {
                if (n - m < *safe) *safe = n - m;
                break;
            }
    }
    return -1;
}

/* Adds text to the slot's output; true when a stop string ended it. */
static bool add_text(slot *sl, const char *text, size_t len, bool *oom) {
    if (!len) return false;
    if (!grow(&sl->out, &sl->out_cap, sl->out_len + len + 1)) {
        *oom = true;
        return false;
    }
    const size_t from = sl->out_len;
    memcpy(sl->out + sl->out_len, text, len);
    sl->out_len += len;
    size_t safe;
    const int64_t at = find_stop(sl, from, &safe);
    if (at >= 0) {
        sl->out_len = (size_t)at;
        publish(sl, sl->out_len);
        return true;
    }
    publish(sl, safe);
    return false;
}

/* ==== Log-probabilities ==== */

/* Where a token's log-probabilities come from: its whole row of logits, or (row NULL) the
 * row's best n (ids and logits, best first, as eddy_engine_decode_top gives them: the
 * token among them) and the row's log-sum-exp */
typedef struct {
    const float *row;
    const eddy_token *ids;
    const float *logits;
    int32_t n;
    double lse;
} lp_source;

/* Token t's log-probability and the row's best k from a whole row */
static srv_logprob logprobs_of_row(const float *logits, int64_t nv, eddy_token t, int k) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < nv; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int64_t i = 0; i < nv; i++) sum += exp((double)logits[i] - mx);
    const float lse = mx + (float)log(sum);
    srv_logprob lp = {.token = t, .logprob = logits[t] - lse};
    /* the top k by insertion into a short sorted list */
    for (int64_t i = 0; i < nv && k > 0; i++) {
        const float x = logits[i];
        if (!(x == x)) continue;
        if (lp.n_top == k && x <= lp.top_logprob[k - 1]) continue;
        int j = lp.n_top < k ? lp.n_top++ : k - 1;
        while (j > 0 && lp.top_logprob[j - 1] < x) {
            lp.top[j] = lp.top[j - 1], lp.top_logprob[j] = lp.top_logprob[j - 1];
            j--;
        }
        lp.top[j] = (eddy_token)i, lp.top_logprob[j] = x;
    }
    for (int j = 0; j < lp.n_top; j++) lp.top_logprob[j] -= lse;
    return lp;
}

/* The same from the row's best logits (src->row NULL): they hold t and at least k more
 * (logprob_need), already in order */
static srv_logprob logprobs_of_top(const lp_source *src, eddy_token t, int k) {
    srv_logprob lp = {.token = t, .logprob = -INFINITY};
    for (int32_t j = 0; j < src->n; j++) {
        const float x = (float)(src->logits[j] - src->lse);
        if (src->ids[j] == t) lp.logprob = x;
        if (j < k) lp.top[j] = src->ids[j], lp.top_logprob[j] = x, lp.n_top = j + 1;
    }
    return lp;
}

static void record_logprobs(srv_sched *s, slot *sl, const lp_source *src, eddy_token t) {
    srv_request *r = sl->r;
    const srv_logprob lp =
        src->row ? logprobs_of_row(src->row, s->n_vocab, t, r->n_logprobs) : logprobs_of_top(src, t, r->n_logprobs);
    pthread_mutex_lock(&r->mu);
    if (r->n_lp == r->lp_cap) {
        int64_t cap = r->lp_cap ? 2 * r->lp_cap : 16;
        srv_logprob *p = realloc(r->lp, (size_t)cap * sizeof *p);
        if (p) r->lp = p, r->lp_cap = cap;
    }
    if (r->n_lp < r->lp_cap) r->lp[r->n_lp++] = lp;
    pthread_mutex_unlock(&r->mu);
}

/* ==== Pinned sessions ==== */

static pinned *pin_find(srv_sched *s, const char *id) {
    for (int i = 0; i < s->p.max_sessions; i++)
        if (s->pins[i].id && !strcmp(s->pins[i].id, id)) return &s->pins[i];
    return NULL;
}

static void pin_clear(pinned *p) {
    free(p->id);
    eddy_snapshot_free(p->snap);
    free(p->tokens);
    memset(p, 0, sizeof *p);
}

/* Keeps the slot's state under its request's session_id (replacing the session's
 * last state, or the least recently used session when all are taken). */
static void pin_save(srv_sched *s, slot *sl) {
    const char *id = sl->r->session_id;
    if (!id || s->p.max_sessions <= 0) return;
    pinned *p = pin_find(s, id);
    if (!p) {
        p = &s->pins[0];
        for (int i = 0; i < s->p.max_sessions; i++) {
            if (!s->pins[i].id) {
                p = &s->pins[i];
                break;
            }
            if (s->pins[i].used < p->used) p = &s->pins[i];
        }
    }
    pin_clear(p);
    const int64_t n = eddy_seq_n_pos(sl->seq);
    eddy_error err;
    p->id = strdup(id);
    p->tokens = malloc((size_t)(n ? n : 1) * sizeof *p->tokens);
    if (!p->id || !p->tokens || eddy_seq_snapshot(sl->seq, &p->snap, &err) != EDDY_OK) {
        pin_clear(p);
        return;
    }
    memcpy(p->tokens, eddy_seq_tokens(sl->seq), (size_t)n * sizeof *p->tokens);
    p->n = n;
    p->used = ++s->tick;
}

/* Drops the least recently used pinned session, to make room for a step the engine
 * refused for want of memory (EDDY_ERR_NOMEM, which it gives before it changes
 * anything): on a GPU the snapshot states share a bounded number of KV blocks
 * (docs/cuda.md), and a pinned session whose slot has moved on holds its conversation's
 * blocks alone, so running requests go before saved ones. false: the failure was
 * another, or no session is left to drop. */
static bool unpin_for_room(srv_sched *s, eddy_status st, const char *why) {
    if (st != EDDY_ERR_NOMEM) return false;
    pinned *p = NULL;
    for (int i = 0; i < s->p.max_sessions; i++)
        if (s->pins[i].id && (!p || s->pins[i].used < p->used)) p = &s->pins[i];
    if (!p) return false;
    eddy_log(EDDY_LOG_INFO, "serve: %s: dropped the pinned session \"%s\" to make room", why, p->id);
    pin_clear(p);
    pthread_mutex_lock(&s->mu);
    s->m.sessions_dropped++;
    pthread_mutex_unlock(&s->mu);
    return true;
}

/* Restores the request's pinned session into the slot's sequence when the session's
 * tokens begin the prompt and go deeper than what the sequence holds. */
static void pin_restore(srv_sched *s, slot *sl) {
    const srv_request *r = sl->r;
    if (!r->session_id) return;
    pinned *p = pin_find(s, r->session_id);
    if (!p || p->n >= r->n_prompt || memcmp(p->tokens, r->prompt, (size_t)p->n * sizeof *p->tokens)) return;
    const int64_t held = eddy_seq_n_pos(sl->seq);
    if (held >= p->n && !memcmp(eddy_seq_tokens(sl->seq), p->tokens, (size_t)p->n * sizeof *p->tokens)) return;
    eddy_error err;
    if (eddy_seq_restore(sl->seq, p->snap, &err) == EDDY_OK) p->used = ++s->tick;
}

/* ==== Admission ==== */

static int64_t common_prefix(const eddy_seq *seq, const eddy_token *t, int64_t n) {
    const int64_t held = eddy_seq_n_pos(seq);
    const eddy_token *h = eddy_seq_tokens(seq);
    int64_t k = 0;
    while (k < held && k < n && h[k] == t[k]) k++;
    return k;
}

/* Puts request r in a free slot; false when it failed to start (already answered). */
static bool admit(srv_sched *s, srv_request *r) {
    slot *sl = NULL;
    int64_t best = -1;
    for (int i = 0; i < s->p.n_slots; i++) {
        if (s->slots[i].r) continue;
        const int64_t k = common_prefix(s->slots[i].seq, r->prompt, r->n_prompt);
        if (k > best) best = k, sl = &s->slots[i];
    }
    SRV_ASSERT(sl);
    /* a prompt that holds all of the last request's prompt is its conversation going on
     * (the answer sent back may be tokenized otherwise than it was generated): the slot's
     * state is continued, or superseded; any other prompt replaces a state the cache
     * keeps first */
    if (best < sl->answer_from) save_slot(sl);
    sl->unsaved = false;
    eddy_error err;
    sl->r = r;
    sl->out_len = sl->published = 0;
    sl->decoding = false;
    sl->max_stop = 0;
    r->t_start = cli_now_s();
    if (eddy_sampler_new(&r->sp, s->n_vocab, &sl->s, &err) != EDDY_OK ||
        eddy_detok_new(s->v, EDDY_DETOK_SKIP_CONTROL, &sl->d, &err) != EDDY_OK) {
        end_request(s, sl, NULL, 500, err.msg);
        return false;
    }
    /* drafts need the end-of-generation tokens sampled as they are: not with ignore_eos */
    if (s->spec_on && !r->ignore_eos && eddy_spec_new(sl->seq, sl->s, &s->spec, &sl->spec, &err) != EDDY_OK) {
        end_request(s, sl, NULL, 500, err.msg);
        return false;
    }
    pin_restore(s, sl);
    int64_t held = 0;
    if (eddy_seq_restore_prefix(sl->seq, r->prompt, r->n_prompt, &held, &err) != EDDY_OK) {
        eddy_seq_clear(sl->seq);
        end_request(s, sl, NULL, 500, err.msg);
        return false;
    }
    sl->n_fed = held;
    /* the sampler sees the prompt, as eddy run's does */
    for (int64_t i = 0; i < r->n_prompt; i++) eddy_sampler_accept(sl->s, r->prompt[i]);
    pthread_mutex_lock(&r->mu);
    r->n_cached = held;
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_lock(&s->mu);
    s->m.slots_busy = busy_slots(s);
    s->m.prompt_tokens += r->n_prompt;
    s->m.cached_tokens += held;
    pthread_mutex_unlock(&s->mu);
    if (r->max_tokens == 0) {
        end_request(s, sl, "length", 0, NULL);
        return false;
    }
    return true;
}

/* ==== One step ==== */

static bool reserve(srv_sched *s, int64_t n) {
    if (n <= s->b_cap) return true;
    int64_t cap = s->b_cap ? s->b_cap : 256;
    while (cap < n) cap *= 2;
    eddy_token *t = realloc(s->b_tok, (size_t)cap * sizeof *t);
    if (t) s->b_tok = t;
    eddy_seq **q = realloc(s->b_seq, (size_t)cap * sizeof *q);
    if (q) s->b_seq = q;
    int8_t *w = realloc(s->b_want, (size_t)cap);
    if (w) s->b_want = w;
    if (!t || !q || !w) return false;
    s->b_cap = cap;
    return true;
}

/* The model produced an end-of-generation token: the answer is complete. */
static void end_at_eog(srv_sched *s, slot *sl) {
    const char *text;
    size_t len;
    bool oom = false;
    eddy_detok_flush(sl->d, &text, &len);
    if (!add_text(sl, text, len, &oom)) publish(sl, sl->out_len);
    end_request(s, sl, "stop", 0, NULL);
}

static void take_token(srv_sched *s, slot *sl, eddy_token t, const lp_source *src, int64_t fed);

static void next_token(srv_sched *s, slot *sl, eddy_token t, const lp_source *src);

/* Samples the slot's next token from its logits row and handles what it means. */
static void sample_next(srv_sched *s, slot *sl, float *row) {
    srv_request *r = sl->r;
    if (r->ignore_eos)
        for (int64_t i = 0; i < s->n_eog; i++) row[s->eog[i]] = -INFINITY;
    next_token(s, sl, eddy_sampler_sample(sl->s, row), &(lp_source){.row = row});
}

/* How many of a row's best logits request r needs when its sampler (or speculative walk)
 * needs `need` (0: the whole row): with log-probabilities, at least as many as it reports
 * (the sampled token is among the first `need`), and the whole row with ignore_eos (its
 * log-probabilities are of the row with those tokens at -inf, whose log-sum-exp the
 * engine does not give). */
static int32_t logprob_need(const srv_request *r, int32_t need) {
    if (r->n_logprobs < 0 || need == 0) return need;
    if (r->ignore_eos) return 0;
    return need > r->n_logprobs ? need : r->n_logprobs;
}

/* How many of the best logits the request's next token needs (eddy_engine_decode_top),
 * when they are all it needs (its sampler looks at no more, eddy_sampler_params_top, as
 * many more as there are banned end-of-generation tokens with ignore_eos, and as many as
 * its log-probabilities report); 0 when it needs the row. */
static int32_t top_needed(const srv_sched *s, const srv_request *r) {
    return logprob_need(r, eddy_sampler_params_top_banned(&r->sp, r->ignore_eos ? s->n_eog : 0));
}

/* The slot's next token from its row's n best logits (ids, logits; the end-of-generation
 * tokens removed first with ignore_eos) and the row's log-sum-exp (when the request wants
 * log-probabilities) */
static void sample_next_top(srv_sched *s, slot *sl, eddy_token *ids, float *logits, int32_t n, double lse) {
    if (sl->r->ignore_eos) n = eddy_top_remove(ids, logits, n, s->eog, s->n_eog);
    next_token(s, sl, eddy_sampler_sample_top(sl->s, ids, logits, n), &(lp_source){NULL, ids, logits, n, lse});
}

/* The slot's next token t, sampled from what src says, and what it means. */
static void next_token(srv_sched *s, slot *sl, eddy_token t, const lp_source *src) {
    srv_request *r = sl->r;
    if (!r->t_first) r->t_first = cli_now_s();
    if (eddy_vocab_is_eog(s->v, t)) {
        end_at_eog(s, sl);
        return;
    }
    eddy_sampler_accept(sl->s, t);
    take_token(s, sl, t, src, eddy_seq_n_pos(sl->seq));
}

/* Token t, sampled from what src says (the sequence holding fed positions, not t) and seen
 * by the sampler: its log-probabilities (when the request wants them), text and what it
 * means (a stop string, the length limit, a full context). */
static void take_token(srv_sched *s, slot *sl, eddy_token t, const lp_source *src, int64_t fed) {
    srv_request *r = sl->r;
    eddy_error err;
    if (r->n_logprobs >= 0) record_logprobs(s, sl, src, t);
    pthread_mutex_lock(&r->mu);
    r->n_gen++;
    const int64_t n_gen = r->n_gen;
    pthread_mutex_unlock(&r->mu);
    const char *text;
    size_t len;
    bool oom = false;
    if (eddy_detok_push(sl->d, t, &text, &len, &err) != EDDY_OK) {
        end_request(s, sl, NULL, 500, err.msg);
        return;
    }
    if (add_text(sl, text, len, &oom)) {
        end_request(s, sl, "stop", 0, NULL);
        return;
    }
    if (oom) {
        end_request(s, sl, NULL, 500, "out of memory");
        return;
    }
    const bool full = fed >= s->n_ctx;
    if ((r->max_tokens >= 0 && n_gen >= r->max_tokens) || full) {
        eddy_detok_flush(sl->d, &text, &len);
        if (!add_text(sl, text, len, &oom)) publish(sl, sl->out_len);
        end_request(s, sl, "length", 0, NULL);
        return;
    }
    sl->next = t;
    sl->decoding = true;
}

/* Ends requests whose client went away, whose deadline passed, or all on shutdown. */
static void drop_cancelled(srv_sched *s, bool stopping) {
    const double now = cli_now_s();
    for (int i = 0; i < s->p.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->r) continue;
        srv_request *r = sl->r;
        pthread_mutex_lock(&r->mu);
        const bool gone = r->cancelled;
        pthread_mutex_unlock(&r->mu);
        if (gone) {
            end_request(s, sl, "stop", 0, NULL);
        } else if (r->deadline > 0 && now > r->deadline) {
            end_request(s, sl, NULL, 504, "the request took longer than the server's --timeout");
        } else if (stopping) {
            publish(sl, sl->out_len);
            end_request(s, sl, "stop", 0, NULL);
        }
    }
}

/* A step or a draft the engine failed with EDDY_ERR_IO failed on the GPU, which may have
 * written part of the step's states and keeps most errors for every later call: the
 * server then answers 503 to what comes after (the engine refuses every later step too). */
static void note_gpu_failure(srv_sched *s, eddy_status st, const char *msg) {
    if (st != EDDY_ERR_IO) return;
    eddy_log(EDDY_LOG_ERROR, "serve: the engine's states are lost (%s): every request from now on gets 503, and "
             "/health too; restart eddy serve", msg);
    pthread_mutex_lock(&s->mu);
    if (!s->failed[0]) snprintf(s->failed, sizeof s->failed, "%s", msg);
    pthread_mutex_unlock(&s->mu);
}

/* Ends every running request with a 500 (the step could not run); -1. */
static int fail_all(srv_sched *s, eddy_status st, const char *msg) {
    eddy_log(EDDY_LOG_ERROR, "serve: a step failed: %s", msg);
    note_gpu_failure(s, st, msg);
    for (int i = 0; i < s->p.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->r) continue;
        eddy_seq_clear(sl->seq);
        end_request(s, sl, NULL, 500, msg);
    }
    return -1;
}

/* One verify step over the decoding slots (no prompt going in): each one's next token
 * and its drafts; then each keeps the drafts the model agrees with and one token of its
 * own (docs/speculative.md). A slot without drafts (ignore_eos) feeds its token alone. */
static int spec_step(srv_sched *s) {
    eddy_error err;
    /* every decoding slot's drafts in one call (MTP drafts of all slots run together);
     * should it fail, each slot drafts alone, and the ones that fail end */
    int64_t nd = 0;
    for (int i = 0; i < s->p.n_slots; i++) {
        slot *sl = &s->slots[i];
        sl->draft_j = -1;
        if (!sl->r || !sl->decoding || !sl->spec) continue;
        const srv_request *r = sl->r;
        const int64_t left = r->max_tokens >= 0 ? r->max_tokens - r->n_gen : s->k_max;
        s->d_spec[nd] = sl->spec, s->d_t[nd] = sl->next, s->d_max[nd] = left < s->k_max ? left : s->k_max;
        s->d_out[nd] = s->drafts + nd * (s->k_max + 1);
        sl->draft_j = nd++;
    }
    eddy_status st = EDDY_OK;
    while (nd > 0 && (st = eddy_spec_draft_many(s->d_spec, nd, s->d_t, s->d_max, s->d_out, s->d_n, &err)) != EDDY_OK &&
           unpin_for_room(s, st, err.msg)) {}
    if (st != EDDY_OK)
        for (int i = 0; i < s->p.n_slots; i++) {
            slot *sl = &s->slots[i];
            const int64_t j = sl->draft_j;
            if (j < 0) continue;
            while ((st = eddy_spec_draft(sl->spec, sl->next, s->d_max[j], s->d_out[j], &s->d_n[j], &err)) != EDDY_OK &&
                   unpin_for_room(s, st, err.msg)) {}
            if (st != EDDY_OK) note_gpu_failure(s, st, err.msg), end_request(s, sl, NULL, 500, err.msg);
        }
    int64_t n = 0;
    for (int i = 0; i < s->p.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->r || !sl->decoding) continue;
        const int64_t k = sl->draft_j >= 0 ? s->d_n[sl->draft_j] : 0;
        if (!reserve(s, n + k + 1)) return fail_all(s, EDDY_ERR_NOMEM, "out of memory");
        s->b_tok[n] = sl->next;
        if (k) memcpy(s->b_tok + n + 1, s->d_out[sl->draft_j], (size_t)k * sizeof *s->b_tok);
        for (int64_t j = 0; j <= k; j++) s->b_seq[n + j] = sl->seq, s->b_want[n + j] = 1;
        sl->row0 = n;
        n += k + 1;
    }
    if (n == 0) return 0;
    /* each row's best k alone when every slot's walk needs no more (as in step) */
    int32_t k_top = 1;
    bool lse = false;
    for (int i = 0; i < s->p.n_slots && k_top; i++) {
        const slot *sl = &s->slots[i];
        if (!sl->r || !sl->decoding) continue;
        const int32_t need = !sl->spec ? top_needed(s, sl->r) : logprob_need(sl->r, eddy_spec_top(sl->spec));
        if (need == 0) k_top = 0;
        else if (need > k_top) k_top = need;
        lse |= sl->r->n_logprobs >= 0;
    }
    if (k_top)
        eddy_log(EDDY_LOG_DEBUG, "serve: a verify step of %lld tokens, the best %d logits of each row%s",
                 (long long)n, (int)k_top, lse ? " and its log-sum-exp" : "");
    else
        eddy_log(EDDY_LOG_DEBUG, "serve: a verify step of %lld tokens, whole rows of logits", (long long)n);
    eddy_batch b = {n, s->b_tok, s->b_seq, s->b_want};
    const double t0 = cli_now_s();
    while ((st = k_top ? eddy_engine_verify_top(s->e, &b, k_top, s->b_ids, s->b_top, s->b_counts,
                                                lse ? s->b_lse : NULL, &err)
                       : eddy_engine_verify(s->e, &b, s->logits, &err)) != EDDY_OK &&
           unpin_for_room(s, st, err.msg)) {}
    const double dt = cli_now_s() - t0;
    pthread_mutex_lock(&s->mu);
    s->m.steps++;
    s->m.busy_seconds += dt;
    s->m.decode_seconds += dt;
    pthread_mutex_unlock(&s->mu);
    if (st != EDDY_OK) return fail_all(s, st, err.msg);
    for (int i = 0; i < s->p.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->r || !sl->decoding) continue;
        srv_request *r = sl->r;
        float *rows = k_top ? NULL : s->logits + sl->row0 * s->n_vocab;
        const int64_t kt = sl->row0 * k_top;
        if (!sl->spec) {
            if (eddy_seq_accept(sl->seq, 1, &err) != EDDY_OK) end_request(s, sl, NULL, 500, err.msg);
            else if (k_top)
                sample_next_top(s, sl, s->b_ids + kt, s->b_top + kt, s->b_counts[sl->row0], s->b_lse[sl->row0]);
            else sample_next(s, sl, rows);
            continue;
        }
        const int64_t base = eddy_seq_n_pos(sl->seq), max_emit = r->max_tokens >= 0 ? r->max_tokens - r->n_gen : -1;
        int64_t n_out = 0;
        eddy_spec_end end;
        if ((k_top ? eddy_spec_accept_top(sl->spec, k_top, s->b_ids + kt, s->b_top + kt, s->b_counts + sl->row0,
                                          max_emit, s->drafts, &n_out, &end, &err)
                   : eddy_spec_accept(sl->spec, rows, max_emit, s->drafts, &n_out, &end, &err)) != EDDY_OK) {
            end_request(s, sl, NULL, 500, err.msg);
            continue;
        }
        if (!r->t_first) r->t_first = cli_now_s();
        /* token j was sampled from row j (its logits, or its best k and log-sum-exp), the
         * sequence then holding base + j + 1 positions */
        for (int64_t j = 0; j < n_out && sl->r; j++) {
            const int64_t row = sl->row0 + j;
            const lp_source src = rows ? (lp_source){.row = rows + j * s->n_vocab}
                                       : (lp_source){NULL, s->b_ids + row * k_top, s->b_top + row * k_top,
                                                     s->b_counts[row], s->b_lse[row]};
            take_token(s, sl, s->drafts[j], &src, base + j + 1);
        }
        if (sl->r && end == EDDY_SPEC_EOG) end_at_eog(s, sl);
    }
    return 0;
}

/* One forward step over every slot with work; 0, or -1 when the step failed (its requests
 * are ended). */
static int step(srv_sched *s) {
    if (s->spec_on) { /* drafts when every running request is decoding */
        bool decoding = false, prefilling = false;
        for (int i = 0; i < s->p.n_slots; i++)
            if (s->slots[i].r) decoding |= s->slots[i].decoding, prefilling |= !s->slots[i].decoding;
        if (decoding && !prefilling) return spec_step(s);
    }
    int64_t n = 0, n_rows = 0;
    /* decoding slots first: one token each */
    for (int i = 0; i < s->p.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->r || !sl->decoding) continue;
        if (!reserve(s, n + 1)) return fail_all(s, EDDY_ERR_NOMEM, "out of memory");
        s->b_tok[n] = sl->next, s->b_seq[n] = sl->seq, s->b_want[n] = 1;
        s->b_rows[n_rows++] = sl;
        n++;
    }
    const int64_t n_decoding = n;
    const bool any_decoding = n > 0;
    /* then prompts, up to the budget: small while streams decode (each of them waits for
     * this step: the bound on the gap between two of its tokens), large when none does */
    int64_t budget = any_decoding ? s->p.prefill_chunk : s->p.n_batch;
    for (int i = 0; i < s->p.n_slots && budget > 0; i++) {
        slot *sl = &s->slots[i];
        if (!sl->r || sl->decoding) continue;
        const srv_request *r = sl->r;
        int64_t take = r->n_prompt - sl->n_fed;
        if (take > budget) take = budget;
        if (!reserve(s, n + take)) return fail_all(s, EDDY_ERR_NOMEM, "out of memory");
        memcpy(s->b_tok + n, r->prompt + sl->n_fed, (size_t)take * sizeof *s->b_tok);
        for (int64_t k = 0; k < take; k++) s->b_seq[n + k] = sl->seq, s->b_want[n + k] = 0;
        n += take;
        budget -= take;
        if (sl->n_fed + take == r->n_prompt) {
            s->b_want[n - 1] = 1;
            s->b_rows[n_rows++] = sl;
        }
        sl->n_fed += take; /* undone below when the step fails */
    }
    if (n == 0) return 0;
    /* when every row's request samples from its best k logits alone (greedy: 1), the engine
     * gives those alone (on a GPU, 8 k bytes a row come back instead of the vocabulary's
     * logits) */
    int32_t k_top = 1;
    bool lse = false;
    for (int64_t k = 0; k < n_rows && k_top; k++) {
        const int32_t need = top_needed(s, s->b_rows[k]->r);
        if (need == 0) k_top = 0;
        else if (need > k_top) k_top = need;
        lse |= s->b_rows[k]->r->n_logprobs >= 0;
    }
    if (k_top)
        eddy_log(EDDY_LOG_DEBUG,
                 "serve: a step of %lld decoding and %lld prompt tokens, the best %d logits of each row%s",
                 (long long)n_decoding, (long long)(n - n_decoding), (int)k_top, lse ? " and its log-sum-exp" : "");
    else
        eddy_log(EDDY_LOG_DEBUG, "serve: a step of %lld decoding and %lld prompt tokens, whole rows of logits",
                 (long long)n_decoding, (long long)(n - n_decoding));
    eddy_batch b = {n, s->b_tok, s->b_seq, s->b_want};
    eddy_error err;
    const double t0 = cli_now_s();
    eddy_status st;
    while ((st = k_top ? eddy_engine_decode_top(s->e, &b, k_top, s->b_ids, s->b_top, s->b_counts,
                                                lse ? s->b_lse : NULL, &err)
                       : eddy_engine_decode(s->e, &b, s->logits, &err)) != EDDY_OK &&
           unpin_for_room(s, st, err.msg)) {}
    const double dt = cli_now_s() - t0;
    pthread_mutex_lock(&s->mu);
    s->m.steps++;
    s->m.busy_seconds += dt;
    if (any_decoding) s->m.decode_seconds += dt;
    else s->m.prefill_seconds += dt;
    pthread_mutex_unlock(&s->mu);
    if (st != EDDY_OK) return fail_all(s, st, err.msg);
    for (int64_t k = 0; k < n_rows; k++) {
        slot *sl = s->b_rows[k];
        if (!sl->decoding) { /* the prompt is in: keep its state for requests that share it */
            if (eddy_seq_cache_put(sl->seq, &err) != EDDY_OK) eddy_log(EDDY_LOG_WARN, "serve: %s", err.msg);
        }
        const int64_t kt = k * k_top;
        if (k_top) sample_next_top(s, sl, s->b_ids + kt, s->b_top + kt, s->b_counts[k], s->b_lse[k]);
        else sample_next(s, sl, s->logits + k * s->n_vocab);
    }
    return 0;
}

/* ==== The thread ==== */

static bool any_unsaved(const srv_sched *s) {
    for (int i = 0; i < s->p.n_slots; i++)
        if (s->slots[i].unsaved) return true;
    return false;
}

static void *sched_main(void *arg) {
    srv_sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        int busy = busy_slots(s);
        while (!s->stopping && busy == 0 && s->q_len == 0) {
            if (!any_unsaved(s)) {
                pthread_cond_wait(&s->cv, &s->mu);
                continue;
            }
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += (long)(SAVE_AFTER * 1e9);
            until.tv_sec += until.tv_nsec / 1000000000L, until.tv_nsec %= 1000000000L;
            if (pthread_cond_timedwait(&s->cv, &s->mu, &until) == ETIMEDOUT && s->q_len == 0) {
                pthread_mutex_unlock(&s->mu); /* the slots are this thread's */
                for (int i = 0; i < s->p.n_slots; i++) save_slot(&s->slots[i]);
                eddy_cache_stats cs;
                eddy_engine_cache_stats(s->e, &cs);
                pthread_mutex_lock(&s->mu);
                s->m.cache = cs;
            }
        }
        const bool stopping = s->stopping;
        /* waiting requests take the free slots */
        srv_request *take[64];
        int n_take = 0;
        while (!stopping && s->q_len > 0 && busy + n_take < s->p.n_slots && n_take < 64) {
            take[n_take++] = s->queue[s->q_head];
            s->q_head = (s->q_head + 1) % s->p.max_queue;
            s->q_len--;
        }
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < n_take; i++) {
            srv_request *r = take[i];
            pthread_mutex_lock(&r->mu);
            const bool gone = r->cancelled;
            pthread_mutex_unlock(&r->mu);
            if (gone) {
                pthread_mutex_lock(&s->mu);
                s->m.gen_cancelled++;
                pthread_mutex_unlock(&s->mu);
                srv_request_unref(r);
                continue;
            }
            if (r->deadline > 0 && cli_now_s() > r->deadline) {
                fail_unstarted(r, 504, "the request waited longer than the server's --timeout");
                continue;
            }
            admit(s, r);
        }
        drop_cancelled(s, stopping);
        if (stopping) break;
        step(s);
        eddy_cache_stats cs;
        eddy_engine_cache_stats(s->e, &cs);
        pthread_mutex_lock(&s->mu);
        s->m.slots_busy = busy_slots(s);
        s->m.queue = s->q_len;
        s->m.cache = cs;
        pthread_mutex_unlock(&s->mu);
    }
    /* fail what still waits */
    pthread_mutex_lock(&s->mu);
    while (s->q_len > 0) {
        srv_request *r = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % s->p.max_queue;
        s->q_len--;
        fail_unstarted(r, 503, "the server is shutting down");
    }
    s->m.slots_busy = 0;
    s->m.queue = 0;
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ==== Interface ==== */

int srv_sched_start(const srv_sched_params *p, srv_sched **out) {
    srv_sched *s = calloc(1, sizeof *s);
    *out = s;
    if (!s) return cli_error("out of memory");
    s->p = *p;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    eddy_error err;
    /* drafts: a verify holds a state per token, each slot's next token and its drafts, in
     * one step of at most 512 rows */
    if (p->spec && p->spec->type != EDDY_SPEC_NONE) {
        s->spec = *p->spec;
        s->k_max = gen_draft_max(&s->spec);
        if (s->k_max > 512 / p->n_slots - 1) s->k_max = 512 / p->n_slots - 1;
        s->spec_on = s->k_max >= 1;
        if (!s->spec_on)
            eddy_log(EDDY_LOG_WARN, "serve: %d slots leave no room for drafts: no speculative decoding", p->n_slots);
    }
    const int spec_states = s->spec_on ? p->n_slots * (int)(s->k_max + 1) : 0;
    /* GPU memory is committed when the pool is made: where the default prefix cache does
     * not fit beside the model, a smaller one does (a budget given by --cache-ram stays) */
    eddy_engine_params ep = {.n_ctx = p->n_ctx, .n_seq_max = p->n_slots, .n_snapshots = p->max_sessions,
                             .n_verify = spec_states, .n_threads = p->n_threads, .type_k = p->type_k, .type_v = p->type_v,
                             .cache_bytes = p->cache_bytes, .mtp = s->spec_on && s->spec.type == EDDY_SPEC_MTP,
                             .device = p->device, .gpu_layers = p->gpu_layers, .cache_fit = p->cache_default,
                             .host_snapshots = true};
    if (eddy_engine_new(p->m, &ep, &s->e, &err) != EDDY_OK) return cli_error("%s", err.msg);
    cli_warn_cache_fit(s->e, p->cache_bytes, "serve: ", "the model and the slots");
    if (s->spec_on && s->spec.type == EDDY_SPEC_DRAFT) { /* a draft sequence and its snapshot per slot */
        eddy_engine_params dp = {.n_ctx = eddy_engine_n_ctx(s->e), .n_seq_max = p->n_slots,
                                 .n_snapshots = p->n_slots, .n_threads = p->n_threads, .device = p->device};
        if (!p->draft_model) return cli_error("--spec-type draft needs a draft model (-md FILE)");
        if (eddy_engine_new(p->draft_model, &dp, &s->draft, &err) != EDDY_OK) return cli_error("-md: %s", err.msg);
        s->spec.draft = NULL, s->spec.draft_engine = s->draft;
    }
    s->drafts = malloc((size_t)(p->n_slots * (s->k_max + 1)) * sizeof *s->drafts);
    s->d_spec = malloc((size_t)p->n_slots * sizeof *s->d_spec), s->d_t = malloc((size_t)p->n_slots * sizeof *s->d_t);
    s->d_out = malloc((size_t)p->n_slots * sizeof *s->d_out), s->d_max = malloc((size_t)p->n_slots * sizeof *s->d_max);
    s->d_n = malloc((size_t)p->n_slots * sizeof *s->d_n);
    s->v = eddy_model_vocab(p->m);
    s->n_ctx = eddy_engine_n_ctx(s->e);
    s->n_vocab = eddy_model_n_vocab(p->m);
    s->queue = calloc((size_t)p->max_queue, sizeof *s->queue);
    s->slots = calloc((size_t)p->n_slots, sizeof *s->slots);
    s->pins = calloc((size_t)(p->max_sessions > 0 ? p->max_sessions : 1), sizeof *s->pins);
    s->b_rows = calloc((size_t)p->n_slots, sizeof *s->b_rows);
    const int64_t rows = p->n_slots * (s->k_max + 1); /* of a step, or of a verify with drafts */
    s->b_ids = malloc((size_t)(rows * EDDY_TOP_MAX) * sizeof *s->b_ids);
    s->b_top = malloc((size_t)(rows * EDDY_TOP_MAX) * sizeof *s->b_top);
    s->b_counts = malloc((size_t)rows * sizeof *s->b_counts);
    s->b_lse = calloc((size_t)rows, sizeof *s->b_lse); /* read (unused) where not asked for */
    s->logits = malloc((size_t)(p->n_slots * (s->k_max + 1) * s->n_vocab) * sizeof *s->logits);
    if (!s->queue || !s->slots || !s->pins || !s->b_rows || !s->b_ids || !s->b_top || !s->b_counts || !s->b_lse ||
        !s->logits || !s->drafts || !s->d_spec || !s->d_t || !s->d_out || !s->d_max || !s->d_n) {
        return cli_error("out of memory");
    }
    for (int i = 0; i < p->n_slots; i++)
        if (eddy_seq_new(s->e, &s->slots[i].seq, &err) != EDDY_OK) {
            srv_sched_stop(s);
            return cli_error("%s", err.msg);
        }
    s->eog = malloc((size_t)s->n_vocab * sizeof *s->eog);
    if (!s->eog) return cli_error("out of memory");
    for (int64_t t = 0; t < s->n_vocab; t++)
        if (eddy_vocab_is_eog(s->v, (eddy_token)t)) s->eog[s->n_eog++] = (eddy_token)t;
    s->m.slots_total = p->n_slots;
    eddy_engine_cache_stats(s->e, &s->m.cache);
    if (pthread_create(&s->thread, NULL, sched_main, s) != 0) {
        return cli_error("cannot start the scheduler thread");
    }
    s->started = true;
    return 0;
}

void srv_sched_stop(srv_sched *s) {
    if (!s) return;
    if (s->started) {
        pthread_mutex_lock(&s->mu);
        s->stopping = true;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
        s->started = false;
    }
}

void srv_sched_free(srv_sched *s) {
    if (!s) return;
    srv_sched_stop(s);
    for (int i = 0; s->slots && i < s->p.n_slots; i++) {
        eddy_sampler_free(s->slots[i].s);
        eddy_detok_free(s->slots[i].d);
        free(s->slots[i].out);
    }
    for (int i = 0; s->pins && i < s->p.max_sessions; i++) pin_clear(&s->pins[i]);
    eddy_engine_free(s->e); /* with its sequences */
    eddy_engine_free(s->draft); /* after the slots' drafters gave back their draft sequences */
    free(s->drafts);
    free(s->d_spec), free(s->d_t), free(s->d_out), free(s->d_max), free(s->d_n);
    free(s->queue), free(s->slots), free(s->pins), free(s->b_rows), free(s->b_ids), free(s->b_top), free(s->b_counts);
    free(s->b_lse);
    free(s->logits);
    free(s->b_tok), free(s->b_seq), free(s->b_want), free(s->eog);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

int64_t srv_sched_n_ctx(const srv_sched *s) { return s->n_ctx; }
const char *srv_sched_device(const srv_sched *s) { return eddy_engine_device_name(s->e); }

int srv_sched_submit(srv_sched *s, srv_request *r) {
    pthread_mutex_lock(&s->mu);
    int status = 0;
    if (s->stopping || s->failed[0]) status = 503;
    else if (s->q_len >= s->p.max_queue) status = 429, s->m.gen_rejected++;
    if (!status) {
        pthread_mutex_lock(&r->mu);
        r->refs++;
        r->t_submit = cli_now_s();
        pthread_mutex_unlock(&r->mu);
        s->queue[(s->q_head + s->q_len) % s->p.max_queue] = r;
        s->q_len++;
        s->m.gen_requests++;
        s->m.queue = s->q_len;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return status;
}

bool srv_sched_failed(srv_sched *s, char *msg, size_t cap) {
    pthread_mutex_lock(&s->mu);
    const bool failed = s->failed[0] != '\0';
    if (failed && cap) snprintf(msg, cap, "%s", s->failed);
    pthread_mutex_unlock(&s->mu);
    return failed;
}

void srv_sched_wake(srv_sched *s) {
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void srv_metrics_get(srv_sched *s, srv_metrics *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->m;
    pthread_mutex_unlock(&s->mu);
}

void srv_metrics_http(srv_sched *s, int status) {
    pthread_mutex_lock(&s->mu);
    s->m.http_requests++;
    if (status >= 400) s->m.http_errors++;
    pthread_mutex_unlock(&s->mu);
}
