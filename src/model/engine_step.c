/*
 * engine_step.c — evaluating batches: the checks a batch must pass before anything
 * changes, its split into forward steps of at most n_batch rows, the plan of each
 * step (runs of one sequence's rows), and the bookkeeping after it (positions,
 * tokens, a verify's pending slots). Also the one-sequence entry eddy_seq_eval.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "cuda/cuda.h"
#include "model/engine.h"
#include "ops/vec.h"

/* ==== Checks ==== */

static bool seq_of_engine(const engine *c, const eddy_seq *s) {
    return s && s->e == c && s->index >= 0 && s->index < c->n_seq_max && c->seqs[s->index] == s;
}

/* Everything that could make the batch fail, before anything changes: ids, owners,
 * order, room in each sequence and, for a verify, in the pool. */
static eddy_status check_batch(engine *c, const eddy_token *tokens, eddy_seq *const *seqs, int64_t n, bool verify,
                               eddy_error *err) {
    const int64_t n_vocab = c->m->hp.n_vocab;
    if (n <= 0) return eddy_error_set(err, EDDY_ERR_ARG, "no tokens to evaluate");
    if (verify && n > c->n_batch)
        return eddy_error_set(err, EDDY_ERR_ARG, "a verify of %" PRId64 " tokens exceeds the batch of %" PRId64, n,
                              c->n_batch);
    const uint64_t stamp = ++c->stamp;
    int64_t run_start = 0;
    for (int64_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return eddy_error_set(err, EDDY_ERR_ARG, "token id %" PRId32 " at index %" PRId64
                                  " is outside the vocabulary (0..%" PRId64 ")", tokens[i], i, n_vocab - 1);
        eddy_seq *s = seqs[i];
        if (i > 0 && s == seqs[i - 1]) continue;
        if (!seq_of_engine(c, s))
            return eddy_error_set(err, EDDY_ERR_ARG, "token %" PRId64 " names no sequence of this engine", i);
        if (s->stamp == stamp)
            return eddy_error_set(err, EDDY_ERR_ARG, "the tokens of sequence %" PRId64 " are not together: it appears "
                                  "again at index %" PRId64, s->index, i);
        if (s->n_pending)
            return eddy_error_set(err, EDDY_ERR_ARG, "sequence %" PRId64 " has a verify of %" PRId64
                                  " tokens awaiting eddy_seq_accept", s->index, s->n_pending);
        s->stamp = stamp;
        run_start = i;
        int64_t len = 1;
        while (run_start + len < n && seqs[run_start + len] == s) len++;
        if (s->st.n_pos + len > c->n_ctx)
            return eddy_error_set(err, EDDY_ERR_ARG, "%" PRId64 " tokens do not fit in sequence %" PRId64
                                  ": it holds %" PRId64 " of %" PRId64 " positions", len, s->index, s->st.n_pos,
                                  c->n_ctx);
    }
    if (verify && n > c->sp->n_rows_free)
        return eddy_error_set(err, EDDY_ERR_NOMEM, "a verify of %" PRId64 " tokens needs as many free verify states; "
                              "%" PRId64 " of the engine's %" PRId64 " are free (n_verify)", n, c->sp->n_rows_free,
                              c->sp->n_rows);
    return EDDY_OK;
}

/* Reserves each sequence's KV blocks for its rows; on failure gives back what was
 * taken. */
static eddy_status reserve_blocks(engine *c, eddy_seq *const *seqs, int64_t n, eddy_error *err) {
    for (int64_t i = 0; i < n;) {
        int64_t len = 1;
        while (i + len < n && seqs[i + len] == seqs[i]) len++;
        seq_state *st = &seqs[i]->st;
        /* the MTP layer writes each row one index back (block_mtp.c) */
        const int64_t back = c->mtp && st->n_pos > 0 ? 1 : 0;
        if (!seq_state_reserve_kv(c->sp, st, st->n_pos - back, len + back)) {
            for (int64_t j = 0; j < i; j++) seq_state_drop_kv(c->sp, &seqs[j]->st, seqs[j]->st.n_pos);
            return eddy_error_set(err, EDDY_ERR_NOMEM, "the KV cache has no free block for sequence %" PRId64,
                                  seqs[i]->index);
        }
        i += len;
    }
    return EDDY_OK;
}

/* ==== Steps ==== */

/* Of a sequence's len rows from position pos, those a step with room rows left takes:
 * all when they fit, else up to the last multiple of c->piece that fits (0: none).
 * Cutting only there keeps a sequence's arithmetic independent of what else is in
 * its batches and of how its tokens came in calls (see engine.h, piece). */
static int64_t step_take(const engine *c, int64_t pos, int64_t len, int64_t room) {
    if (len <= room) return len;
    const int64_t cut = (pos + room) / c->piece * c->piece - pos;
    return cut > 0 ? cut : 0;
}

/* The end of the step that starts at row r0: as many rows as n_batch holds, a
 * sequence cut only where step_take allows. A verify is one step. */
static int64_t step_end(const engine *c, eddy_seq *const *seqs, int64_t r0, int64_t n, bool verify) {
    if (verify) return n;
    int64_t i = r0, room = c->n_batch;
    while (i < n && room > 0) {
        const eddy_seq *s = seqs[i];
        int64_t len = 1;
        while (i + len < n && seqs[i + len] == s) len++;
        /* the rows of s before i ran in earlier steps: s's position is its next row's */
        const int64_t take = step_take(c, s->st.n_pos, len, room);
        if (take == 0) break;
        i += take, room -= take;
        if (take < len) break;
    }
    EDDY_ASSERT(i > r0); /* a piece is at most n_batch rows: an empty step always takes one */
    return i;
}

int64_t step_decode_group(const step_plan *plan, int64_t i) {
    int64_t g = 0;
    while (i + g < plan->n_runs && plan->runs[i + g].n == 1 && !plan->runs[i + g].snap) {
        plan->slots[g] = plan->runs[i + g].slot;
        g++;
    }
    return g;
}

/* The plan of rows [r0, r1) of the batch: runs of one sequence's consecutive rows,
 * each from its sequence's position and slot. A verify's runs read their sequence's
 * slot and write the state after each row to its pending slots. */
static void plan_step(engine *c, const int32_t *tokens, eddy_seq *const *seqs, int64_t r0, int64_t r1, bool verify) {
    step_plan *p = &c->plan;
    p->n = r1 - r0;
    p->n_runs = 0;
    p->n_ckpt = 0;
    c->cache_step_start = c->cache_clock + 1;
    for (int64_t i = r0; i < r1;) {
        eddy_seq *s = seqs[i];
        int64_t len = 1;
        while (i + len < r1 && seqs[i + len] == s) len++;
        step_run *run = &p->runs[p->n_runs++];
        *run = (step_run){s, i - r0, len, s->st.n_pos, s->st.slot, verify ? s->pending : NULL, 0, NULL, NULL};
        for (int64_t t = 0; t < len; t++) p->pos[i - r0 + t] = run->pos0 + t;
        /* the run's tokens join the sequence's now (its position moves after the step):
         * the cache keys its checkpoints by them */
        memcpy(s->st.tokens + run->pos0, tokens + i, (size_t)len * sizeof *tokens);
        cache_plan_run(c, run);
        i += len;
    }
}

/* Room in c->digest_logits for the wanted rows of a step of the batch (a CPU step's logits
 * before their digest) */
static eddy_status digest_room(engine *c, eddy_seq *const *seqs, int64_t n, const int8_t *want, eddy_error *err) {
    int64_t rows = 0;
    for (int64_t i = 0; i < n; i++) rows += want ? want[i] != 0 : i == n - 1 || seqs[i + 1] != seqs[i];
    rows = rows < c->n_batch ? rows : c->n_batch;
    if (rows <= c->digest_rows) return EDDY_OK;
    float *buf = eddy_realloc(c->digest_logits, (size_t)(rows * c->m->hp.n_vocab) * sizeof *buf);
    if (!buf)
        return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory for the logits of %" PRId64 " rows", rows);
    c->digest_logits = buf, c->digest_rows = rows;
    return EDDY_OK;
}

step_digest step_digest_from(const step_digest *d, int64_t first) {
    step_digest r = *d;
    if (d->k == 0) {
        r.targets += first, r.logprobs += first;
        return r;
    }
    r.ids += first * d->k;
    if (d->logits) r.logits += first * d->k;
    if (d->counts) r.counts += first;
    if (d->p) r.p += first;
    if (d->lse) r.lse += first;
    return r;
}

/* Whether the logits of a step's n_out rows stay where it made them until the next
 * step: the CPU's digest_logits (all of them), a GPU's buffer (its last group of rows) */
static bool logits_resident(const engine *c, int64_t n_out) {
    return !c->gpu || n_out <= cuda_logit_rows(c);
}

/* The digest of rows [0, n_rows) of logits (n_vocab each) into d */
static void digest_of_rows(const float *logits, int64_t n_rows, int64_t n_vocab, const step_digest *d) {
    for (int64_t r = 0; r < n_rows; r++) {
        const float *x = logits + r * n_vocab;
        if (d->k == 0) {
            d->logprobs[r] = vec_logprob(x, n_vocab, d->targets[r]);
            continue;
        }
        int32_t *ids = d->ids + r * d->k;
        float one, *vals = d->logits ? d->logits + r * d->k : &one;
        int64_t got;
        if (d->p) { /* a draft model's best token and its probability */
            ids[0] = (int32_t)vec_argmax_softmax(x, n_vocab, &d->p[r]), vals[0] = x[ids[0]];
            got = 1;
        } else if (d->k == 1) { /* greedy's one vectorized scan */
            ids[0] = (int32_t)vec_greedy(x, n_vocab), vals[0] = x[ids[0]];
            got = !isnan(vals[0]) && vals[0] != -INFINITY;
        } else {
            got = vec_top_k(x, n_vocab, d->k, ids, vals);
            if (got == 0) ids[0] = 0;
        }
        if (d->counts) d->counts[r] = (int32_t)got;
        if (d->lse) d->lse[r] = vec_logsumexp(x, n_vocab);
    }
}

eddy_status engine_run(engine *c, const eddy_token *tokens, eddy_seq *const *seqs, int64_t n, const int8_t *want,
                       float *logits, const step_digest *dg, bool verify, eddy_error *err) {
    if (logits) dg = NULL;
    eddy_error own;
    if (!err) err = &own; /* a failed GPU step's message is kept */
    if (c->gpu_failed[0])
        return eddy_error_set(err, EDDY_ERR_IO, "an earlier step or copy on the GPU failed (%s): the engine's "
                              "states are lost; a new engine is needed", c->gpu_failed);
    eddy_status st = check_batch(c, tokens, seqs, n, verify, err);
    if (st == EDDY_OK && dg && !c->gpu) st = digest_room(c, seqs, n, want, err);
    if (st == EDDY_OK) st = reserve_blocks(c, seqs, n, err);
    if (st != EDDY_OK) return st;
    if (verify) /* every token gets a row slot (counted free above); one step holds the batch */
        for (int64_t i = 0; i < n; i++) {
            eddy_seq *s = seqs[i];
            s->pending[s->n_pending++] = state_row_alloc(c->sp);
        }
    const int64_t n_vocab = c->m->hp.n_vocab;
    int64_t done_out = 0;
    c->pending_seq = NULL; /* this step makes logits of its own */
    for (int64_t r0 = 0, r1; r0 < n; r0 = r1) {
        if (r0 > 0 && c->abort_cb && c->abort_cb(c->abort_user)) {
            for (int64_t i = r0; i < n; i++) /* blocks reserved for the rows not run */
                seq_state_drop_kv(c->sp, &seqs[i]->st, seqs[i]->st.n_pos);
            return eddy_error_set(err, EDDY_ERR_CANCELLED, "evaluation cancelled after %" PRId64 " of %" PRId64
                                  " tokens", r0, n);
        }
        r1 = step_end(c, seqs, r0, n, verify);
        step_plan *p = &c->plan;
        plan_step(c, tokens, seqs, r0, r1, verify);
        /* the rows whose logits are wanted: by flag, or each sequence's last token */
        int64_t n_out = 0;
        for (int64_t i = r0; i < r1; i++) {
            const bool last = i == n - 1 || seqs[i + 1] != seqs[i];
            if (want ? want[i] != 0 : last) p->out[n_out++] = i - r0;
        }
        float *step_logits = logits ? logits + done_out * n_vocab : NULL;
        const step_digest dg_at = dg ? step_digest_from(dg, done_out) : (step_digest){0};
        const int64_t n_made = logits || dg ? n_out : 0;
        if (c->gpu) {
            if (c->gpu_from > 0) forward_front(c, tokens + r0, p, c->gpu_from); /* the CPU's layers */
            st = cuda_forward(c, tokens + r0, p, step_logits, dg ? &dg_at : NULL, p->out, n_made, err);
            if (st != EDDY_OK) {
                snprintf(c->gpu_failed, sizeof c->gpu_failed, "%s", err->msg);
                for (int64_t i = r0; i < n; i++) seq_state_drop_kv(c->sp, &seqs[i]->st, seqs[i]->st.n_pos);
                return st;
            }
        } else {
            forward(c, tokens + r0, p, dg ? c->digest_logits : step_logits, p->out, n_made);
            if (dg) digest_of_rows(c->digest_logits, n_out, n_vocab, &dg_at);
        }
        done_out += n_out;
        /* each sequence keeps the logits of its last token when they were computed */
        int64_t o = 0;
        /* a digest verify of one sequence, every row wanted, in one step whose rows stay
         * where it made them: eddy_seq_accept(s, n_keep) leaves the logits after the kept
         * tokens in row n_keep - 1 there (pending_row -1 until then) */
        if (verify && dg && p->n_runs == 1 && r0 == 0 && r1 == n && n_out == n && logits_resident(c, n_out))
            c->pending_seq = p->runs[0].seq, c->pending_row = -1;
        for (int64_t k = 0; k < p->n_runs; k++) {
            step_run *run = &p->runs[k];
            seq_state *ss = &run->seq->st;
            if (verify) continue;
            ss->n_pos += run->n;
            cache_commit_run(c, run);
            const int64_t last = run->row0 + run->n - 1;
            while (o < n_out && p->out[o] < last) o++;
            seq_logits_held(run->seq, step_logits && o < n_out && p->out[o] == last);
            if (run->seq->has_logits)
                memcpy(run->seq->logits, step_logits + o * n_vocab, (size_t)n_vocab * sizeof *logits);
            /* a digest of one sequence's last row: its logits stay where the step made them
             * until engine_seq_keep_logits (or the next step, or an MTP draft on a GPU) */
            if (dg && n_out == 1 && p->out[0] == last) c->pending_seq = run->seq, c->pending_row = 0;
        }
    }
    return EDDY_OK;
}

void engine_seq_keep_logits(eddy_seq *s) {
    engine *c = s->e;
    pthread_mutex_lock(&c->lock);
    if (c->pending_seq == s && c->pending_row >= 0 && !s->has_logits) {
        const int64_t n_vocab = c->m->hp.n_vocab;
        if (c->gpu) cuda_logits_row(c, c->pending_row, s->logits);
        else memcpy(s->logits, c->digest_logits + c->pending_row * n_vocab, (size_t)n_vocab * sizeof *s->logits);
        s->has_logits = true;
    }
    c->pending_seq = NULL;
    pthread_mutex_unlock(&c->lock);
}

/* ==== One sequence ==== */

eddy_status engine_run_seq(engine *c, eddy_seq *s, const int32_t *tokens, int64_t n, float *logits, bool all,
                           eddy_error *err) {
    if (!seq_of_engine(c, s)) return eddy_error_set(err, EDDY_ERR_ARG, "the sequence belongs to no engine");
    if (n <= 0) return eddy_error_set(err, EDDY_ERR_ARG, "no tokens to evaluate");
    if (s->n_pending)
        return eddy_error_set(err, EDDY_ERR_ARG, "the sequence has a verify of %" PRId64
                              " tokens awaiting eddy_seq_accept", s->n_pending);
    /* everything checked before the first step, so a failure changes nothing */
    const int64_t n_vocab = c->m->hp.n_vocab;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return eddy_error_set(err, EDDY_ERR_ARG, "token id %" PRId32 " at index %" PRId64
                                  " is outside the vocabulary (0..%" PRId64 ")", tokens[i], i, n_vocab - 1);
    if (s->st.n_pos + n > c->n_ctx)
        return eddy_error_set(err, EDDY_ERR_ARG, "%" PRId64 " tokens do not fit: the sequence holds %" PRId64
                              " of %" PRId64 " positions", n, s->st.n_pos, c->n_ctx);
    for (int64_t i = 0; i < n && i < c->n_batch; i++) c->one_seq[i] = s; /* the rows a step of s can hold */
    for (int64_t done = 0, chunk; done < n; done += chunk) {
        if (done > 0 && c->abort_cb && c->abort_cb(c->abort_user))
            return eddy_error_set(err, EDDY_ERR_CANCELLED, "evaluation cancelled after %" PRId64 " of %" PRId64
                                  " tokens", done, n);
        chunk = step_take(c, s->st.n_pos, n - done, c->n_batch);
        const bool last = done + chunk == n;
        /* all logits: every chunk writes its rows; otherwise only the last chunk's last row */
        float *dst = logits && all ? logits + done * n_vocab : logits && last ? logits : NULL;
        eddy_status st =
            engine_run(c, tokens + done, c->one_seq, chunk, all ? c->all_rows : NULL, dst, NULL, false, err);
        if (st != EDDY_OK) return st;
    }
    return EDDY_OK;
}

eddy_status eddy_seq_eval(eddy_seq *s, const int32_t *tokens, int64_t n, float *logits, int all_logits,
                          eddy_error *err) {
    if (!s || (!tokens && n > 0)) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_seq_eval: NULL argument");
    engine *c = s->e;
    pthread_mutex_lock(&c->lock);
    eddy_status st = engine_run_seq(c, s, tokens, n, logits, all_logits != 0, err);
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ==== Public entries ==== */

static eddy_status decode_or_verify(eddy_engine *c, const eddy_batch *b, float *logits, const step_digest *dg,
                                    bool verify, const char *fn, eddy_error *err) {
    if (!c || !b || (b->n_tokens > 0 && (!b->tokens || !b->seq)))
        return eddy_error_set(err, EDDY_ERR_ARG, "%s: NULL argument", fn);
    pthread_mutex_lock(&c->lock);
    eddy_status s = engine_run(c, b->tokens, b->seq, b->n_tokens, b->logits, logits, dg, verify, err);
    pthread_mutex_unlock(&c->lock);
    return s;
}

eddy_status eddy_engine_decode(eddy_engine *c, const eddy_batch *b, float *logits, eddy_error *err) {
    return decode_or_verify(c, b, logits, NULL, false, "eddy_engine_decode", err);
}

eddy_status eddy_engine_decode_argmax(eddy_engine *c, const eddy_batch *b, eddy_token *ids, eddy_error *err) {
    if (!ids) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_engine_decode_argmax: NULL argument");
    const step_digest dg = {.k = 1, .ids = ids};
    return decode_or_verify(c, b, NULL, &dg, false, "eddy_engine_decode_argmax", err);
}

/* A step that gives each wanted row's k best logits (eddy_engine_decode_top, _verify_top) */
static eddy_status top_step(eddy_engine *c, const eddy_batch *b, int32_t k, eddy_token *ids, float *logits,
                            int32_t *counts, double *lse, bool verify, const char *fn, eddy_error *err) {
    if (!ids || !logits || !counts) return eddy_error_set(err, EDDY_ERR_ARG, "%s: NULL argument", fn);
    if (k < 1 || k > EDDY_TOP_MAX)
        return eddy_error_set(err, EDDY_ERR_ARG, "%s: k %" PRId32 " is outside 1..%d", fn, k, EDDY_TOP_MAX);
    const step_digest dg = {.k = k, .ids = ids, .logits = logits, .counts = counts, .lse = lse};
    return decode_or_verify(c, b, NULL, &dg, verify, fn, err);
}

eddy_status eddy_engine_decode_top(eddy_engine *c, const eddy_batch *b, int32_t k, eddy_token *ids, float *logits,
                                   int32_t *counts, double *lse, eddy_error *err) {
    return top_step(c, b, k, ids, logits, counts, lse, false, "eddy_engine_decode_top", err);
}

eddy_status engine_decode_best(engine *c, const eddy_batch *b, int32_t *ids, float *p, eddy_error *err) {
    const step_digest dg = {.k = 1, .ids = ids, .p = p};
    return decode_or_verify(c, b, NULL, &dg, false, "engine_decode_best", err);
}

eddy_status eddy_engine_decode_logprob(eddy_engine *c, const eddy_batch *b, const eddy_token *targets,
                                       double *logprobs, eddy_error *err) {
    if (!c || !b || !targets || !logprobs)
        return eddy_error_set(err, EDDY_ERR_ARG, "eddy_engine_decode_logprob: NULL argument");
    const int64_t n_vocab = c->m->hp.n_vocab;
    int64_t rows = 0;
    for (int64_t i = 0; i < b->n_tokens; i++) {
        const bool last = i == b->n_tokens - 1 || (b->seq && b->seq[i + 1] != b->seq[i]);
        const bool wanted = b->logits ? b->logits[i] != 0 : last;
        if (!wanted) continue;
        if (targets[rows] < 0 || targets[rows] >= n_vocab)
            return eddy_error_set(err, EDDY_ERR_ARG, "eddy_engine_decode_logprob: target %" PRId64 " is token id %"
                                  PRId32 ", outside the vocabulary (0..%" PRId64 ")", rows, targets[rows], n_vocab - 1);
        rows++;
    }
    const step_digest dg = {.targets = targets, .logprobs = logprobs};
    return decode_or_verify(c, b, NULL, &dg, false, "eddy_engine_decode_logprob", err);
}

int64_t engine_verify_room(engine *c) {
    pthread_mutex_lock(&c->lock);
    const int64_t room = c->sp->n_rows_free < c->n_batch ? c->sp->n_rows_free : c->n_batch;
    pthread_mutex_unlock(&c->lock);
    return room;
}

eddy_status eddy_engine_verify(eddy_engine *c, const eddy_batch *b, float *logits, eddy_error *err) {
    return decode_or_verify(c, b, logits, NULL, true, "eddy_engine_verify", err);
}

eddy_status eddy_engine_verify_top(eddy_engine *c, const eddy_batch *b, int32_t k, eddy_token *ids, float *logits,
                                   int32_t *counts, double *lse, eddy_error *err) {
    return top_step(c, b, k, ids, logits, counts, lse, true, "eddy_engine_verify_top", err);
}
