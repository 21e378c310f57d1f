/*
 * draft.c — the drafters of speculative decoding and the draft length they are asked
 * for (spec.h, docs/speculative.md).
 *
 * Prompt lookup finds the tokens that followed an earlier occurrence of the sequence's
 * last few tokens: free to compute, right whenever the output copies its input (a
 * rewrite, code edits, quotes). A draft model runs a smaller model of the same
 * vocabulary ahead of the target, one token at a time, in its own context: its
 * sequence follows the target's, and a snapshot taken before each round of drafts
 * puts it back where the target's accepted tokens continue, without replaying them.
 * The model's own multi-token-prediction layer (block_mtp.c) drafts from the target's
 * last hidden state, chained on its own output, at the cost of one layer per draft.
 *
 * The draft length: with a per-draft acceptance rate a, a step that checks K drafts
 * yields (1 - a^(K+1)) / (1 - a) tokens on average (the kept drafts and the model's
 * own next token), and costs T(K) = t0 + t1 * K + K * t_draft seconds: a verify step's
 * time grows with its tokens (their compute, and the recurrent layers' outputs per
 * position), measured as a line through the steps seen so far, and a draft model
 * spends t_draft per draft. The next K maximizes tokens per second.
 *
 * A kind of draft whose drafts stopped paying gets no new evidence, so the rule alone
 * would never draft it again, though what the drafter guesses well changes as the text
 * does (a model starts quoting its prompt). So after PROBE_FIRST plain steps in a row
 * chosen over drafts of a kind, one step drafts anyway (a probe of draft_min drafts,
 * at least one); a probe that finds nothing doubles the wait for the next (up to
 * PROBE_LAST steps, so probes cost at most a few percent of a verify's extra time),
 * one that is kept halves the weight of the old evidence and resets the wait.
 */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/timer.h"
#include "gen/spec.h"
#include "model/engine.h"
#include "ops/vec.h"

#define N_KINDS 9
#define PROBE_FIRST 16
#define PROBE_LAST 128

struct drafter {
    eddy_spec_params p;
    int64_t n_vocab;
    /* a draft model */
    eddy_engine *dengine;
    eddy_seq *dseq;      /* the context's, or one of its own in a shared draft engine */
    bool own_seq;
    eddy_snapshot *snap; /* the draft sequence before the last round of drafts */
    sampler *ds;         /* drafts drawn from q (the target samples: temperature > 0); NULL: argmax */
    float *dlogits;      /* (n_vocab) the logits after the draft sequence's last token (ds), */
    eddy_token best;     /* or their argmax and its probability (no ds) */
    float best_p;
    double draft_s;      /* seconds per draft token (running mean); 0: none measured yet */
    /* acceptance per kind of draft (prompt lookup: the n-gram length matched, up to
     * N_KINDS - 1; a draft model: 0), with older steps weighing less */
    double acc_kept[N_KINDS], acc_tried[N_KINDS];
    int kind; /* of the last drafts proposed */
    /* per kind: plain steps chosen in a row, and how many before the next probe */
    int64_t plain_run[N_KINDS], probe_after[N_KINDS];
    bool probing; /* the last drafts proposed were a probe */
    /* verify step time against its tokens: decayed sums for a least-squares line */
    double sw, sx, sy, sxx, sxy;
    double c_prior; /* cost of one more token in a step, as a fraction of a one-token step */
    int64_t rows_seen; /* the most tokens a verify step has had */
    eddy_seq *target; /* the sequence drafted for (its MTP layer drafts) */
};

static int64_t choose_length(drafter *d, int kind);

/* ==== Prompt lookup ==== */

int64_t ngram_lookup(const eddy_token *hist, int64_t n, int ngram, int64_t max, eddy_token *out, int *found) {
    *found = 0;
    for (int64_t g = ngram < n - 1 ? ngram : n - 1; g >= 1; g--) {
        const eddy_token *key = hist + n - g;
        for (int64_t j = n - g - 1; j >= 0; j--) { /* latest first; hist[j + g] exists */
            if (memcmp(hist + j, key, (size_t)g * sizeof *key) != 0) continue;
            /* the continuation, read from the history followed by the drafts so far: a
             * match just behind the end repeats its period */
            for (int64_t k = 0; k < max; k++) {
                const int64_t at = j + g + k;
                out[k] = at < n ? hist[at] : out[at - n];
            }
            *found = (int)g;
            return max;
        }
    }
    return 0;
}

/* ==== A draft model ==== */

/* The vocabularies are the same, token for token. */
static eddy_status check_vocab(const eddy_vocab *target, const eddy_vocab *draft, eddy_error *err) {
    const int64_t n = eddy_vocab_n_tokens(target);
    if (eddy_vocab_n_tokens(draft) != n)
        return eddy_error_set(err, EDDY_ERR_ARG, "the draft model's vocabulary has %lld tokens, the model's %lld",
                              (long long)eddy_vocab_n_tokens(draft), (long long)n);
    for (eddy_token t = 0; t < n; t++) {
        size_t la, lb;
        const char *a = eddy_vocab_token_text(target, t, &la), *b = eddy_vocab_token_text(draft, t, &lb);
        if (la != lb || (la && memcmp(a, b, la) != 0))
            return eddy_error_set(err, EDDY_ERR_ARG, "the draft model's vocabulary differs from the model's at token %d "
                                  "(\"%.*s\" there, \"%.*s\" here)", (int)t, (int)(lb < 40 ? lb : 40), b ? b : "",
                                  (int)(la < 40 ? la : 40), a ? a : "");
    }
    return EDDY_OK;
}

/* Drafts made together for n drafters in `seconds`: each draft's share joins each
 * drafter's running mean of seconds per draft. */
static void note_draft_time(drafter *const *d, int64_t n, const int64_t *n_out, double seconds) {
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) total += n_out[i];
    if (total == 0) return;
    const double per = seconds / (double)total;
    for (int64_t i = 0; i < n; i++)
        if (n_out[i] > 0) d[i]->draft_s = d[i]->draft_s > 0 ? 0.9 * d[i]->draft_s + 0.1 * per : per;
}

/* Rolls the draft sequence back to the longest prefix of hist[0, n) it holds, keeping
 * at least one token to feed (the last is fed again for its logits): from what it
 * holds, the snapshot, or (rarely: another conversation) a rollback. Returns where the
 * tokens to feed start. */
static eddy_status draft_rewind(drafter *d, const eddy_token *hist, int64_t n, int64_t *from, eddy_error *err) {
    const int64_t held = eddy_seq_n_pos(d->dseq);
    const eddy_token *tok = eddy_seq_tokens(d->dseq);
    int64_t same = 0;
    while (same < held && same < n && tok[same] == hist[same]) same++;
    if (same == n) same = n - 1;
    eddy_status rc = EDDY_OK;
    if (same < held) {
        const int64_t at = d->snap ? eddy_snapshot_n_pos(d->snap) : -1;
        if (at >= 0 && at <= same) rc = eddy_seq_restore(d->dseq, d->snap, err);
        else rc = eddy_seq_truncate(d->dseq, same, err);
    }
    *from = eddy_seq_n_pos(d->dseq);
    return rc;
}

/* Scratch of a round of draft-model drafts for n sequences: one batch of at most
 * n_tok tokens and the logits of one token per sequence. */
typedef struct {
    eddy_token *tok;
    eddy_seq **seq;
    int64_t *who; /* (n) the drafter of each batch row */
    float *rows;  /* (n, n_vocab); NULL when no drafter samples */
    eddy_token *best;
    float *best_p; /* (n) */
} draft_batch;

/* Feeds each drafter's tokens tok[i][0, len[i]) to its draft sequence, all in one
 * batch (in steps of the engine's n_batch), and puts the logits after each one's last
 * token in its dlogits, or, when no drafter of the batch samples its drafts, their
 * argmax and its probability in its best and best_p (on a GPU 12 bytes a row come back
 * instead of the logits); drafters with len[i] = 0 sit out. */
static eddy_status draft_feed(drafter *const *d, int64_t n, const eddy_token *const *tok, const int64_t *len,
                              draft_batch *b, eddy_error *err) {
    int64_t m = 0, rows = 0;
    for (int64_t i = 0; i < n; i++) {
        if (len[i] <= 0) continue;
        memcpy(b->tok + m, tok[i], (size_t)len[i] * sizeof *b->tok);
        for (int64_t j = 0; j < len[i]; j++) b->seq[m + j] = d[i]->dseq;
        m += len[i], b->who[rows++] = i;
    }
    if (m == 0) return EDDY_OK;
    const eddy_batch batch = {m, b->tok, b->seq, NULL}; /* logits: each sequence's last token */
    bool whole = false;
    for (int64_t r = 0; r < rows; r++) whole |= d[b->who[r]]->ds != NULL;
    if (!whole) {
        const eddy_status rc = engine_decode_best(d[0]->dengine, &batch, b->best, b->best_p, err);
        for (int64_t r = 0; rc == EDDY_OK && r < rows; r++) {
            drafter *dr = d[b->who[r]];
            dr->best = b->best[r], dr->best_p = b->best_p[r];
        }
        return rc;
    }
    const eddy_status rc = eddy_engine_decode(d[0]->dengine, &batch, b->rows, err);
    const int64_t V = d[0]->n_vocab;
    for (int64_t r = 0; rc == EDDY_OK && r < rows; r++)
        memcpy(d[b->who[r]]->dlogits, b->rows + r * V, (size_t)V * sizeof *b->rows);
    return rc;
}

/* The draft model's drafts for n drafters of one draft engine and distinct draft
 * sequences: each draft sequence catches up with its history hist[i][0, nh[i]) (the
 * tokens it lacks, all sequences in one batch), then every draft position is one
 * forward step of the draft model for all the sequences still drafting. Each gets the
 * drafts it would get alone (the engine's steps give a sequence the same logits
 * whatever else is in the batch). */
static eddy_status draft_model_propose_many(drafter *const *d, int64_t n, const eddy_token *const *hist,
                                            const int64_t *nh, const int64_t *max_in, eddy_token *const *out,
                                            float *const *q, int64_t *n_out, eddy_error *err) {
    const int64_t V = d[0]->n_vocab, n_ctx = eddy_engine_n_ctx(d[0]->dengine);
    int64_t n_tok = n;
    bool sampled = false; /* whole rows of logits only for drafters that sample (draft_feed) */
    for (int64_t i = 0; i < n; i++) n_tok += nh[i], sampled |= d[i]->ds != NULL;
    draft_batch b = {eddy_malloc((size_t)n_tok * sizeof *b.tok), eddy_malloc((size_t)n_tok * sizeof *b.seq),
                     eddy_malloc((size_t)n * sizeof *b.who),
                     sampled ? eddy_malloc((size_t)n * (size_t)V * sizeof *b.rows) : NULL,
                     eddy_malloc((size_t)n * sizeof *b.best), eddy_malloc((size_t)n * sizeof *b.best_p)};
    int64_t *max = eddy_malloc((size_t)n * sizeof *max), *len = eddy_malloc((size_t)n * sizeof *len);
    const eddy_token **feed = eddy_malloc((size_t)n * sizeof *feed);
    eddy_token *next = eddy_malloc((size_t)n * sizeof *next);
    eddy_status rc = EDDY_OK;
    if (!b.tok || !b.seq || !b.who || (sampled && !b.rows) || !b.best || !b.best_p || !max || !len || !feed || !next) {
        rc = eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory for drafts");
        goto done;
    }
    /* catch up: each sequence on its history, its logits after the last token */
    for (int64_t i = 0; i < n && rc == EDDY_OK; i++) {
        n_out[i] = 0, len[i] = 0;
        max[i] = max_in[i] < n_ctx - nh[i] ? max_in[i] : n_ctx - nh[i];
        if (max[i] <= 0 || nh[i] <= 0) {
            max[i] = 0;
            continue;
        }
        int64_t from;
        rc = draft_rewind(d[i], hist[i], nh[i], &from, err);
        feed[i] = hist[i] + from, len[i] = nh[i] - from;
    }
    if (rc == EDDY_OK) rc = draft_feed(d, n, feed, len, &b, err);
    /* the point the next round comes back to */
    for (int64_t i = 0; i < n && rc == EDDY_OK; i++) {
        if (max[i] == 0) continue;
        eddy_snapshot_free(d[i]->snap);
        d[i]->snap = NULL;
        rc = eddy_seq_snapshot(d[i]->dseq, &d[i]->snap, err);
    }
    const double t0 = timer_s();
    for (int64_t k = 0; rc == EDDY_OK; k++) {
        bool more = false;
        for (int64_t i = 0; i < n; i++) {
            len[i] = 0;
            if (k >= max[i] || n_out[i] < k) continue; /* done, or stopped earlier */
            eddy_token t;
            if (d[i]->ds) { /* q: the target's chain over the draft's logits */
                float *qk = q[i] + k * V;
                sampler_probs(d[i]->ds, d[i]->dlogits, qk);
                t = sampler_draw(d[i]->ds, qk);
            } else {
                t = d[i]->best;
                if (d[i]->best_p < d[i]->p.p_min) continue; /* the draft is unsure: stop guessing */
            }
            out[i][k] = t, n_out[i] = k + 1;
            if (k + 1 < max[i]) next[i] = t, feed[i] = &next[i], len[i] = 1, more = true;
        }
        if (!more) break;
        rc = draft_feed(d, n, feed, len, &b, err);
    }
    if (rc == EDDY_OK) note_draft_time(d, n, n_out, timer_s() - t0);
done:
    eddy_free(b.tok), eddy_free(b.seq), eddy_free(b.who), eddy_free(b.rows), eddy_free(b.best), eddy_free(b.best_p);
    eddy_free(max), eddy_free(len), eddy_free(feed), eddy_free(next);
    return rc;
}

/* ==== The model's MTP layer ==== */

/* MTP drafts for n drafters whose targets share an engine and are all distinct: the
 * targets hold hist[i][0, nh[i] - 1), hist[i][nh[i] - 1] being the token about to be
 * fed; their chains run together, one step of the layer per draft position for all
 * (engine_mtp_draft_many). */
static eddy_status mtp_propose_many(drafter *const *d, int64_t n, const eddy_token *const *hist, const int64_t *nh,
                                    const int64_t *max, eddy_token *const *out, int64_t *n_out, eddy_error *err) {
    eddy_seq **seqs = eddy_malloc((size_t)n * sizeof *seqs);
    float *p_min = eddy_malloc((size_t)n * sizeof *p_min);
    eddy_token *t = eddy_malloc((size_t)n * sizeof *t);
    eddy_status rc = EDDY_OK;
    if (!seqs || !p_min || !t) rc = eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory for MTP drafts");
    for (int64_t i = 0; rc == EDDY_OK && i < n; i++) {
        EDDY_ASSERT(nh[i] > 0 && eddy_seq_n_pos(d[i]->target) == nh[i] - 1);
        seqs[i] = d[i]->target, p_min[i] = d[i]->p.p_min, t[i] = hist[i][nh[i] - 1];
    }
    const double t0 = timer_s();
    if (rc == EDDY_OK) rc = engine_seq_mtp_draft_many(seqs, t, max, n, p_min, out, n_out, err);
    if (rc == EDDY_OK) note_draft_time(d, n, n_out, timer_s() - t0);
    eddy_free(seqs), eddy_free(p_min), eddy_free(t);
    return rc;
}

/* ==== Drafts of many sequences ==== */

/* The engine that runs a drafter's drafts for many sequences (NULL: nothing to share)
 * and the sequence that drafting advances. */
static const void *batch_key(const drafter *d) {
    return d->p.type == EDDY_SPEC_MTP ? (const void *)d->target->e
           : d->p.type == EDDY_SPEC_DRAFT ? (const void *)d->dengine
                                          : NULL;
}

static const eddy_seq *batch_seq(const drafter *d) { return d->p.type == EDDY_SPEC_MTP ? d->target : d->dseq; }

bool drafter_batches_with(const drafter *a, const drafter *b) {
    return a->p.type == b->p.type && batch_key(a) && batch_key(a) == batch_key(b) && batch_seq(a) != batch_seq(b);
}

eddy_status drafter_propose_many(drafter *const *d, int64_t n, const eddy_token *const *hist, const int64_t *nh,
                                 const int64_t *max, eddy_token *const *out, float *const *q, int64_t *n_out,
                                 eddy_error *err) {
    for (int64_t i = 0; i < n; i++) {
        EDDY_ASSERT(i == 0 || drafter_batches_with(d[0], d[i]));
        d[i]->kind = 0, n_out[i] = 0;
    }
    if (n <= 0) return EDDY_OK;
    if (d[0]->p.type == EDDY_SPEC_MTP) return mtp_propose_many(d, n, hist, nh, max, out, n_out, err);
    EDDY_ASSERT(d[0]->p.type == EDDY_SPEC_DRAFT);
    return draft_model_propose_many(d, n, hist, nh, max, out, q, n_out, err);
}

/* ==== Life cycle ==== */

eddy_status drafter_new(const eddy_spec_params *p, const eddy_model *tm, const eddy_sampler_params *sp,
                        eddy_seq *target, drafter **out, eddy_error *err) {
    *out = NULL;
    if (p->type != EDDY_SPEC_NGRAM && p->type != EDDY_SPEC_DRAFT && p->type != EDDY_SPEC_MTP)
        return eddy_error_set(err, EDDY_ERR_ARG, "speculative decoding: unknown drafter type %d", (int)p->type);
    if (p->draft_max < 0 || p->draft_max > 256 || p->draft_min < 0 || p->ngram < 0 || p->ngram > 64 ||
        !(p->p_min <= 1))
        return eddy_error_set(err, EDDY_ERR_ARG, "speculative decoding: draft-max %d (0..256), draft-min %d, "
                              "ngram %d (0..64) or p-min %g (at most 1) out of range", p->draft_max, p->draft_min,
                              p->ngram, (double)p->p_min);
    drafter *d = eddy_calloc(1, sizeof *d);
    if (!d) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    d->p = *p;
    d->target = target;
    /* the MTP layer was trained one token ahead: its chained guesses fade fast */
    if (!d->p.draft_max) d->p.draft_max = p->type == EDDY_SPEC_MTP ? 3 : 16;
    if (!d->p.draft_min) d->p.draft_min = 1;
    if (d->p.draft_min > d->p.draft_max) d->p.draft_min = d->p.draft_max;
    if (!d->p.ngram) d->p.ngram = 3;
    /* llama.cpp's defaults for MTP: no cut-off (the draft length rule still decides) */
    if (d->p.p_min == 0) d->p.p_min = p->type == EDDY_SPEC_MTP ? -1.0f : 0.75f;
    d->n_vocab = eddy_model_n_vocab(tm);
    /* a prior for the cost of one more token in a step until steps are measured: half
     * the recurrent state over the bytes a one-token step reads, and some compute (the
     * verify keeps inputs, not states, so the state term is a rough stand-in for the
     * recurrent layers' work per position) */
    eddy_decode_bytes b;
    eddy_model_decode_bytes(tm, &b);
    d->c_prior = 0.05 + (double)b.state / 2 / (double)(b.weights + b.state + 1);
    eddy_status rc = EDDY_OK;
    if (p->type == EDDY_SPEC_MTP && (!target || !target->e->mtp))
        rc = eddy_error_set(err, EDDY_ERR_ARG, "speculative decoding: MTP drafts need an engine made with the model's "
                            "multi-token-prediction layer (eddy_engine_params.mtp)%s",
                            eddy_model_has_mtp(tm) ? "" : ", and this model has none");
    if (p->type == EDDY_SPEC_DRAFT) {
        d->dengine = p->draft ? eddy_ctx_engine(p->draft) : p->draft_engine;
        const eddy_model *dm = d->dengine ? eddy_engine_model(d->dengine) : NULL;
        if (!dm) rc = eddy_error_set(err, EDDY_ERR_ARG, "speculative decoding: no draft model context or engine");
        else if (p->draft && p->draft_engine)
            rc = eddy_error_set(err, EDDY_ERR_ARG, "speculative decoding: give a draft context or a draft engine, not both");
        else if (!eddy_model_vocab(dm) || !eddy_model_vocab(tm))
            rc = eddy_error_set(err, EDDY_ERR_ARG, "speculative decoding: the model or the draft model has no vocabulary");
        else rc = check_vocab(eddy_model_vocab(tm), eddy_model_vocab(dm), err);
        if (rc == EDDY_OK && p->draft) d->dseq = eddy_ctx_seq(p->draft);
        else if (rc == EDDY_OK) rc = eddy_seq_new(d->dengine, &d->dseq, err), d->own_seq = rc == EDDY_OK;
        if (rc == EDDY_OK) {
            d->dlogits = eddy_malloc((size_t)d->n_vocab * sizeof *d->dlogits);
            if (!d->dlogits) rc = eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
        }
        if (rc == EDDY_OK && sp->temp > 0) {
            eddy_sampler_params dp = *sp; /* q: the same chain without the target's penalties */
            dp.repeat_penalty = 1.0f, dp.presence_penalty = dp.frequency_penalty = 0.0f;
            dp.seed = sp->seed ^ 0x9e3779b97f4a7c15ull;
            rc = sampler_new(&d->ds, &dp, d->n_vocab, err);
        }
    }
    if (rc != EDDY_OK) {
        drafter_free(d);
        return rc;
    }
    *out = d;
    return EDDY_OK;
}

void drafter_free(drafter *d) {
    if (!d) return;
    if (d->snap) { /* leave the draft sequence on a prefix of the generation's tokens: the
                    * next generation goes on from there without a replay */
        eddy_error err;
        eddy_seq_restore(d->dseq, d->snap, &err);
    }
    eddy_snapshot_free(d->snap);
    if (d->own_seq) eddy_seq_free(d->dseq);
    sampler_free(d->ds);
    eddy_free(d->dlogits);
    eddy_free(d);
}

bool drafter_sampled(const drafter *d) { return d->ds != NULL; }
int64_t drafter_min(const drafter *d) { return d->p.draft_min; }
int64_t drafter_max(const drafter *d) { return d->p.draft_max; }

eddy_status drafter_propose(drafter *d, const eddy_token *hist, int64_t n, int64_t max, eddy_token *out, float *q,
                            int64_t *n_out, eddy_error *err) {
    *n_out = 0;
    if (max <= 0 || n <= 0) return EDDY_OK;
    if (d->p.type == EDDY_SPEC_NGRAM) {
        int g;
        const int64_t k = ngram_lookup(hist, n, d->p.ngram, max, out, &g);
        /* as many as pay off for a match of that length */
        d->kind = g < N_KINDS ? g : N_KINDS - 1;
        const int64_t want = k > 0 ? choose_length(d, d->kind) : 0;
        *n_out = k < want ? k : want;
        return EDDY_OK;
    }
    return drafter_propose_many(&d, 1, &hist, &n, &max, &out, &q, n_out, err);
}

/* ==== Draft length ==== */

/* The step's time on the line t0 + t1 * x through the steps of x tokens seen. */
static void add_step_time(drafter *d, double x, double seconds) {
    d->sw = 0.95 * d->sw + 1, d->sx = 0.95 * d->sx + x, d->sy = 0.95 * d->sy + seconds;
    d->sxx = 0.95 * d->sxx + x * x, d->sxy = 0.95 * d->sxy + x * seconds;
}

void drafter_update(drafter *d, int64_t n_drafted, int64_t n_accepted, double verify_s) {
    if (n_drafted <= 0) {
        /* a plain step: its time only, and only once verify steps have been timed (the
         * line needs them; plain steps alone say nothing about a verify's cost) */
        if (d->sw > 0 && verify_s > 0) add_step_time(d, 1, verify_s);
        return;
    }
    if (d->probing) {
        int64_t *after = &d->probe_after[d->kind];
        if (n_accepted > 0) {
            d->acc_kept[d->kind] *= 0.5, d->acc_tried[d->kind] *= 0.5;
            *after = PROBE_FIRST;
        } else if (*after < PROBE_LAST) {
            *after *= 2;
        }
        d->probing = false;
    }
    /* draft i + 1 was tried only when draft i was kept */
    const double tried = (double)(n_accepted < n_drafted ? n_accepted + 1 : n_drafted);
    d->acc_kept[d->kind] = 0.9 * d->acc_kept[d->kind] + (double)n_accepted;
    d->acc_tried[d->kind] = 0.9 * d->acc_tried[d->kind] + tried;
    /* a step of more tokens than any before may have written state slots (and scratch)
     * no step had used, which the system faults in and zeroes on first touch (a
     * 17-token verify of a 0.5B hybrid took 280 ms so, against 50 ms warm, while the
     * slots were in huge pages): its time says nothing about the next steps', and on
     * the line it would keep the drafts short for many steps */
    if (n_drafted + 1 > d->rows_seen) {
        d->rows_seen = n_drafted + 1;
        return;
    }
    add_step_time(d, (double)(n_drafted + 1), verify_s);
}

/* The draft count with the most tokens per second for drafts of that kind: 0 (a plain
 * step) or one in [draft_min, draft_max]. */
static int64_t best_length(const drafter *d, int kind) {
    const int64_t lo = d->p.draft_min, hi = d->p.draft_max;
    if (d->p.fixed) return hi;
    const double a = (d->acc_kept[kind] + 1) / (d->acc_tried[kind] + 2); /* 1/2 before any evidence */
    /* a step of x tokens takes t0 + t1 * x: the measured line when the steps seen (plain
     * ones too) spread over more than one length, else the prior's slope through their
     * mean; before any step is timed, the prior's line in units of a plain step (a draft
     * model's seconds per draft, in other units, wait for it) */
    double t0 = 1 - d->c_prior, t1 = d->c_prior, draft_t = 0;
    if (d->sw > 0) {
        const double mx = d->sx / d->sw, my = d->sy / d->sw, var = d->sxx / d->sw - mx * mx;
        t1 = var > 0.05 ? (d->sxy / d->sw - mx * my) / var : 0;
        t0 = my - t1 * mx;
        if (!(var > 0.05) || t1 < 0 || t0 <= 0) {
            t0 = my / (1 + d->c_prior * (mx - 1));
            t1 = t0 * d->c_prior;
            t0 -= t1;
        }
        draft_t = d->draft_s;
    }
    int64_t best = 0;
    double best_rate = 1 / (t0 + t1); /* a plain step: one token */
    for (int64_t k = lo; k <= hi; k++) {
        const double tokens = a >= 0.999 ? (double)(k + 1) : (1 - pow(a, (double)(k + 1))) / (1 - a);
        const double rate = tokens / (t0 + t1 * (double)(k + 1) + draft_t * (double)k);
        if (rate > best_rate) best_rate = rate, best = k;
    }
    return best;
}

/* best_length, or a probe after enough plain steps in a row (top comment) */
static int64_t choose_length(drafter *d, int kind) {
    const int64_t k = best_length(d, kind);
    d->probing = false;
    if (k > 0) {
        d->plain_run[kind] = 0;
        return k;
    }
    if (d->probe_after[kind] == 0) d->probe_after[kind] = PROBE_FIRST;
    if (d->plain_run[kind]++ < d->probe_after[kind]) return 0;
    d->plain_run[kind] = 0;
    d->probing = true;
    return d->p.draft_min > 1 ? d->p.draft_min : 1;
}

int64_t drafter_length(drafter *d) {
    /* prompt lookup: the bound here, the length once the match is known (drafter_propose) */
    return d->p.type == EDDY_SPEC_NGRAM ? d->p.draft_max : choose_length(d, 0);
}
