/*
 * speculative.c — the generation loop with drafts, and the acceptance rule of
 * speculative sampling (spec.h, docs/speculative.md).
 *
 * A step: the token t just sampled (not yet fed) and up to K drafts d1..dK go through
 * one eddy_engine_verify, which gives the logits after each of t, d1, ..., dK and keeps
 * the state after each. The model then samples position by position exactly as plain
 * generation would — each from the logits after the tokens before it, the sampler
 * having seen them — and while what it samples is the next draft, that draft is
 * already fed and the walk goes on. The first token that differs (or the one after
 * the last draft) is the next step's t; eddy_seq_accept keeps the state after the
 * drafts that matched. Plain generation would have fed the same tokens and sampled
 * from the same logits (a verify's rows are the bits of feeding them one by one) with
 * the same random numbers, so the output is the same, token for token.
 *
 * With sampled drafts (a draft model at temperature > 0) a position does not sample
 * and compare: it keeps the draft with probability min(1, p/q) or draws from the
 * residual (spec_accept_sampled), which gives the model's distribution p exactly
 * (Leviathan et al. 2023, Chen et al. 2023) though not the same random stream.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/timer.h"
#include "gen/spec.h"
#include "model/engine.h"

/* ==== The acceptance rule ==== */

eddy_token spec_accept_sampled(sampler *s, const float *p, const float *q, eddy_token d, float *residual,
                               bool *kept) {
    const double r = sampler_uniform(s);
    /* keep d with probability min(1, p[d] / q[d]): r * q[d] < p[d] */
    if (r * (double)q[d] < (double)p[d]) {
        *kept = true;
        return d;
    }
    *kept = false;
    const int64_t n = sampler_n_vocab(s);
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        const float x = p[i] - q[i];
        residual[i] = x > 0 ? x : 0;
        total += residual[i];
    }
    residual[d] = 0; /* p[d] < q[d] here already; rounding must not bring it back */
    return total > 0 ? sampler_draw(s, residual) : sampler_draw(s, p);
}

/* ==== One sequence's speculative state ==== */

struct eddy_spec {
    eddy_seq *seq;
    sampler *s;
    const eddy_vocab *v; /* for the end-of-generation tokens: the model's */
    drafter *d;
    int64_t k_cap, n_vocab;
    eddy_token *tok;  /* (k_cap + 1) t, then the drafts of the pending step */
    int64_t n_draft;  /* drafts of the pending step; -1: no step pending */
    eddy_token *hist; /* (n_ctx + 1) scratch: the sequence's tokens and t */
    float *q;         /* (k_cap, n_vocab) the distributions sampled drafts came from */
    float *p;         /* (2, n_vocab) the model's distribution and the residual */
    double t_drafted; /* when the pending step's drafts were handed out */
    int64_t steps, drafted, accepted;
};

eddy_status spec_check_engine(const eddy_engine *e, eddy_error *err) {
    if (e->n_verify_max >= 2) return EDDY_OK;
    return eddy_error_set(err, EDDY_ERR_ARG, "speculative decoding needs verify states (a step of t and k drafts "
                          "takes k + 1): the engine has %lld (n_verify)", (long long)e->n_verify_max);
}

eddy_status eddy_spec_new(eddy_seq *s, eddy_sampler *smp, const eddy_spec_params *p, eddy_spec **out,
                          eddy_error *err) {
    if (!out) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_spec_new: NULL argument");
    *out = NULL;
    if (!s || !smp || !p) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_spec_new: NULL argument");
    eddy_engine *e = s->e;
    const eddy_model *m = eddy_engine_model(e);
    eddy_status rc = spec_check_engine(e, err);
    if (rc != EDDY_OK) return rc;
    if (sampler_n_vocab(smp) != eddy_model_n_vocab(m))
        return eddy_error_set(err, EDDY_ERR_ARG, "speculative decoding: the sampler is for %lld tokens, the model has %lld",
                              (long long)sampler_n_vocab(smp), (long long)eddy_model_n_vocab(m));
    eddy_spec *sp = eddy_calloc(1, sizeof *sp);
    if (!sp) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    rc = drafter_new(p, m, sampler_params(smp), s, &sp->d, err);
    if (rc != EDDY_OK) {
        eddy_free(sp);
        return rc;
    }
    sp->seq = s, sp->s = smp, sp->v = eddy_model_vocab(m), sp->n_draft = -1;
    sp->k_cap = drafter_max(sp->d), sp->n_vocab = eddy_model_n_vocab(m);
    const size_t V = (size_t)sp->n_vocab;
    sp->tok = eddy_malloc((size_t)(sp->k_cap + 1) * sizeof *sp->tok);
    sp->hist = eddy_malloc((size_t)(eddy_engine_n_ctx(e) + 1) * sizeof *sp->hist);
    if (drafter_sampled(sp->d)) {
        sp->q = eddy_malloc((size_t)sp->k_cap * V * sizeof *sp->q);
        sp->p = eddy_malloc(2 * V * sizeof *sp->p);
    }
    if (!sp->tok || !sp->hist || (drafter_sampled(sp->d) && (!sp->q || !sp->p))) {
        eddy_spec_free(sp);
        return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory for speculative decoding");
    }
    *out = sp;
    return EDDY_OK;
}

void eddy_spec_free(eddy_spec *sp) {
    if (!sp) return;
    drafter_free(sp->d);
    eddy_free(sp->tok), eddy_free(sp->hist), eddy_free(sp->q), eddy_free(sp->p);
    eddy_free(sp);
}

void eddy_spec_counts(const eddy_spec *sp, int64_t *steps, int64_t *drafted, int64_t *accepted) {
    if (steps) *steps = sp->steps;
    if (drafted) *drafted = sp->drafted;
    if (accepted) *accepted = sp->accepted;
}

/* The drafts worth asking sp's drafter for after t: no more than max, than the length
 * rule asks for, than fit the context behind t, and than the verify has states for (one
 * per token); 0 when that is fewer than the drafter's minimum. */
static int64_t draft_bound(eddy_spec *sp, int64_t max) {
    eddy_engine *e = sp->seq->e;
    const int64_t base = eddy_seq_n_pos(sp->seq);
    int64_t k_max = drafter_length(sp->d);
    if (k_max > max) k_max = max;
    if (k_max > eddy_engine_n_ctx(e) - base - 1) k_max = eddy_engine_n_ctx(e) - base - 1;
    const int64_t room = engine_verify_room(e) - 1;
    if (k_max > room) k_max = room;
    return k_max >= drafter_min(sp->d) ? k_max : 0;
}

/* The step after t is pending with the k drafts in sp->tok + 1, handed out in drafts. */
static void draft_done(eddy_spec *sp, eddy_token t, int64_t k, eddy_token *drafts, int64_t *n) {
    if (k < drafter_min(sp->d)) k = 0;
    sp->tok[0] = t;
    sp->n_draft = k;
    memcpy(drafts, sp->tok + 1, (size_t)k * sizeof *drafts);
    *n = k;
    sp->t_drafted = timer_s();
}

/* sp->hist: the sequence's tokens, then t; returns their count. */
static int64_t fill_hist(eddy_spec *sp, eddy_token t) {
    const int64_t base = eddy_seq_n_pos(sp->seq);
    memcpy(sp->hist, eddy_seq_tokens(sp->seq), (size_t)base * sizeof *sp->hist);
    sp->hist[base] = t;
    return base + 1;
}

eddy_status eddy_spec_draft(eddy_spec *sp, eddy_token t, int64_t max, eddy_token *drafts, int64_t *n,
                            eddy_error *err) {
    if (!sp || !drafts || !n) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_spec_draft: NULL argument");
    *n = 0;
    const int64_t k_max = draft_bound(sp, max);
    int64_t k = 0;
    if (k_max > 0) {
        eddy_status rc = drafter_propose(sp->d, sp->hist, fill_hist(sp, t), k_max, sp->tok + 1, sp->q, &k, err);
        if (rc != EDDY_OK) return rc;
    }
    draft_done(sp, t, k, drafts, n);
    return EDDY_OK;
}

/* Scratch of eddy_spec_draft_many: a group of drafters that draft together. */
typedef struct {
    int64_t *idx, *nh, *bound, *got;
    bool *taken;
    drafter **d;
    const eddy_token **hist;
    eddy_token **out;
    float **q;
} draft_group;

eddy_status eddy_spec_draft_many(eddy_spec *const *sp, int64_t n, const eddy_token *t, const int64_t *max,
                                 eddy_token *const *drafts, int64_t *n_drafts, eddy_error *err) {
    if (n <= 0) return EDDY_OK;
    if (!sp || !t || !max || !drafts || !n_drafts)
        return eddy_error_set(err, EDDY_ERR_ARG, "eddy_spec_draft_many: NULL argument");
    for (int64_t i = 0; i < n; i++)
        if (!sp[i] || !drafts[i]) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_spec_draft_many: NULL argument");
    const size_t z = (size_t)n;
    draft_group g = {eddy_malloc(z * sizeof *g.idx), eddy_malloc(z * sizeof *g.nh), eddy_malloc(z * sizeof *g.bound),
                     eddy_malloc(z * sizeof *g.got), eddy_calloc(z, sizeof *g.taken), eddy_malloc(z * sizeof *g.d),
                     eddy_malloc(z * sizeof *g.hist), eddy_malloc(z * sizeof *g.out), eddy_malloc(z * sizeof *g.q)};
    int64_t *k_max = eddy_malloc(z * sizeof *k_max);
    eddy_status rc = EDDY_OK;
    if (!g.idx || !g.nh || !g.bound || !g.got || !g.taken || !g.d || !g.hist || !g.out || !g.q || !k_max) {
        rc = eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory for drafts");
        goto done;
    }
    /* the length rule once per drafter (it counts the steps it is asked about) */
    for (int64_t i = 0; i < n; i++) {
        n_drafts[i] = 0, k_max[i] = draft_bound(sp[i], max[i]);
        if (k_max[i] == 0) draft_done(sp[i], t[i], 0, drafts[i], &n_drafts[i]), g.taken[i] = true;
    }
    /* groups of drafters that draft together (MTP drafters of one engine, draft models
     * of one draft engine); a drafter that shares nothing is a group of one */
    for (int64_t i = 0; i < n && rc == EDDY_OK; i++) {
        if (g.taken[i]) continue;
        int64_t m = 0;
        for (int64_t j = i; j < n; j++) {
            bool join = !g.taken[j];
            for (int64_t a = 0; join && a < m; a++) join = drafter_batches_with(g.d[a], sp[j]->d);
            if (!join) continue;
            g.taken[j] = true, g.idx[m] = j, g.d[m] = sp[j]->d, g.bound[m] = k_max[j];
            g.nh[m] = fill_hist(sp[j], t[j]), g.hist[m] = sp[j]->hist;
            g.out[m] = sp[j]->tok + 1, g.q[m] = sp[j]->q;
            m++;
        }
        if (m == 1) rc = drafter_propose(g.d[0], g.hist[0], g.nh[0], g.bound[0], g.out[0], g.q[0], &g.got[0], err);
        else rc = drafter_propose_many(g.d, m, g.hist, g.nh, g.bound, g.out, g.q, g.got, err);
        for (int64_t a = 0; rc == EDDY_OK && a < m; a++)
            draft_done(sp[g.idx[a]], t[g.idx[a]], g.got[a], drafts[g.idx[a]], &n_drafts[g.idx[a]]);
    }
done:
    eddy_free(g.idx), eddy_free(g.nh), eddy_free(g.bound), eddy_free(g.got), eddy_free(g.taken);
    eddy_free(g.d), eddy_free(g.hist), eddy_free(g.out), eddy_free(g.q), eddy_free(k_max);
    return rc;
}

/* ==== The walk ==== */

int32_t eddy_spec_top(const eddy_spec *sp) {
    return sp && !sp->q ? eddy_sampler_params_top(sampler_params(sp->s)) : 0;
}

/* How many of each row's best logits a walk needs with n_eog banned tokens (0: whole rows) */
static int32_t walk_top(const eddy_spec *sp, int64_t n_eog) {
    return eddy_spec_top(sp) ? eddy_sampler_params_top_banned(sampler_params(sp->s), n_eog) : 0;
}

/* The token position i of a walk samples: from its whole row, or from its digest (the
 * banned tokens removed) */
static eddy_token walk_sample(eddy_spec *sp, const spec_rows *r, int64_t i, const eddy_token *eog_mask,
                              int64_t n_eog) {
    if (!r->rows) {
        eddy_token ids[EDDY_TOP_MAX];
        float logits[EDDY_TOP_MAX];
        const int32_t n = r->counts[i] < r->k ? r->counts[i] : r->k;
        memcpy(ids, r->ids + i * r->k, (size_t)n * sizeof *ids);
        memcpy(logits, r->logits + i * r->k, (size_t)n * sizeof *logits);
        return sampler_sample_top(sp->s, ids, logits, eddy_top_remove(ids, logits, n, eog_mask, n_eog));
    }
    float *row = r->rows + i * sp->n_vocab;
    for (int64_t j = 0; j < n_eog; j++) row[eog_mask[j]] = -INFINITY;
    return sampler_sample(sp->s, row);
}

eddy_status spec_walk(eddy_spec *sp, const spec_rows *r, int64_t max_emit, const eddy_token *eog_mask, int64_t n_eog,
                      spec_emit_fn emit, void *user, spec_walk_end *end, eddy_error *err) {
    if (sp->n_draft < 0) return eddy_error_set(err, EDDY_ERR_ARG, "speculative decoding: no drafts await acceptance");
    const int32_t need = walk_top(sp, n_eog);
    if (!r->rows && (need == 0 || need > r->k))
        return eddy_error_set(err, EDDY_ERR_ARG, "speculative decoding: the walk needs %s",
                              need == 0 ? "whole rows of logits" : "more of each row's best logits");
    const int64_t k = sp->n_draft, V = sp->n_vocab;
    const double step_s = timer_s() - sp->t_drafted;
    const eddy_vocab *v = sp->v;
    sp->n_draft = -1;
    /* rows[i] follows t, d1..di, all fed */
    int64_t i = 0, emitted = 0;
    for (;; i++) {
        if (max_emit >= 0 && emitted >= max_emit) {
            *end = SPEC_WALK_LIMIT;
            break;
        }
        eddy_token y;
        bool kept = false;
        if (sp->q && i < k) { /* whole rows (eddy_spec_top is 0) */
            float *row = r->rows + i * V;
            for (int64_t j = 0; j < n_eog; j++) row[eog_mask[j]] = -INFINITY;
            sampler_probs(sp->s, row, sp->p);
            y = spec_accept_sampled(sp->s, sp->p, sp->q + i * V, sp->tok[i + 1], sp->p + V, &kept);
        } else {
            y = walk_sample(sp, r, i, eog_mask, n_eog);
            kept = i < k && y == sp->tok[i + 1];
        }
        if (v && eddy_vocab_is_eog(v, y)) {
            *end = SPEC_WALK_EOG;
            break;
        }
        sampler_accept(sp->s, y);
        emitted++;
        if (emit(user, y)) {
            *end = SPEC_WALK_STOPPED;
            break;
        }
        if (!kept) { /* y is the next step's t */
            *end = SPEC_WALK_NEXT;
            break;
        }
    }
    /* keep t and the i drafts that matched; the logits after them are rows[i] (t alone
     * in a plain evaluation is the sequence's already; after a digest the engine keeps
     * them where it can, engine_seq_keep_logits) */
    if (k == 0 && sp->seq->n_pending == 0) return EDDY_OK;
    eddy_status rc = eddy_seq_accept(sp->seq, i + 1, err);
    if (rc != EDDY_OK) return rc;
    if (r->rows) engine_seq_set_logits(sp->seq, r->rows + i * V);
    if (k > 0) sp->steps++, sp->drafted += k, sp->accepted += i;
    drafter_update(sp->d, k, i, step_s); /* a plain step's time too: the line's x = 1 */
    return EDDY_OK;
}

typedef struct {
    eddy_token *out;
    int64_t n;
} collect_out;

static int collect(void *user, eddy_token t) {
    collect_out *c = user;
    c->out[c->n++] = t;
    return 0;
}

/* eddy_spec_accept's walk from r, the tokens collected into out */
static eddy_status accept_collect(eddy_spec *sp, const spec_rows *r, int64_t max_emit, eddy_token *out,
                                  int64_t *n_out, eddy_spec_end *end, eddy_error *err) {
    collect_out c = {out, 0};
    spec_walk_end w = SPEC_WALK_NEXT;
    eddy_status rc = spec_walk(sp, r, max_emit, NULL, 0, collect, &c, &w, err);
    *n_out = c.n;
    *end = w == SPEC_WALK_EOG ? EDDY_SPEC_EOG : w == SPEC_WALK_LIMIT ? EDDY_SPEC_LIMIT : EDDY_SPEC_NEXT;
    return rc;
}

eddy_status eddy_spec_accept(eddy_spec *sp, float *rows, int64_t max_emit, eddy_token *out, int64_t *n_out,
                             eddy_spec_end *end, eddy_error *err) {
    if (!sp || !rows || !out || !n_out || !end) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_spec_accept: NULL argument");
    return accept_collect(sp, &(spec_rows){.rows = rows}, max_emit, out, n_out, end, err);
}

eddy_status eddy_spec_accept_top(eddy_spec *sp, int32_t k, const eddy_token *ids, const float *logits,
                                 const int32_t *counts, int64_t max_emit, eddy_token *out, int64_t *n_out,
                                 eddy_spec_end *end, eddy_error *err) {
    if (!sp || !ids || !logits || !counts || !out || !n_out || !end)
        return eddy_error_set(err, EDDY_ERR_ARG, "eddy_spec_accept_top: NULL argument");
    const spec_rows r = {.k = k, .ids = ids, .logits = logits, .counts = counts};
    return accept_collect(sp, &r, max_emit, out, n_out, end, err);
}

/* ==== The loop of eddy_generate_ex ==== */

typedef struct {
    const spec_loop *L;
    eddy_detok *dt;
    eddy_gen_stats *st;
    eddy_status rc;
    eddy_error *err;
    eddy_token last; /* the last token emitted */
} loop_emit;

/* A generated token: the caller gets its text; non-zero when the caller asks to stop. */
static int emit_text(void *user, eddy_token t) {
    loop_emit *le = user;
    le->st->n_generated++;
    le->last = t;
    const char *text;
    size_t len;
    le->rc = eddy_detok_push(le->dt, t, &text, &len, le->err);
    if (le->rc != EDDY_OK) return 1;
    if (le->L->cb && le->L->cb(le->L->user, t, text, len)) {
        le->st->stop = EDDY_STOP_CALLBACK;
        return 1;
    }
    return 0;
}

eddy_status spec_generate(const spec_loop *L, float *logits, eddy_detok *dt, eddy_gen_stats *st, eddy_error *err) {
    eddy_engine *e = eddy_ctx_engine(L->c);
    eddy_seq *seq = eddy_ctx_seq(L->c);
    const int64_t n_ctx = eddy_engine_n_ctx(e), V = sampler_n_vocab(L->s);
    eddy_spec *sp = NULL;
    eddy_status rc = eddy_spec_new(seq, L->s, L->spec, &sp, err);
    if (rc != EDDY_OK) return rc;
    sp->v = L->v;
    const int64_t k_cap = sp->k_cap;
    /* each step's rows as their best k logits when the walk needs no more (on a GPU a
     * few hundred bytes a row come back instead of the vocabulary's logits), else whole */
    const int32_t k_top = walk_top(sp, L->n_eog);
    float *rows = NULL, *top = NULL; /* (K + 1, n_vocab) or (K + 1, k_top) */
    eddy_token *ids = NULL;
    int32_t *counts = NULL;
    if (k_top) {
        ids = eddy_malloc((size_t)((k_cap + 1) * k_top) * sizeof *ids);
        top = eddy_malloc((size_t)((k_cap + 1) * k_top) * sizeof *top);
        counts = eddy_malloc((size_t)(k_cap + 1) * sizeof *counts);
    } else {
        rows = eddy_malloc((size_t)(k_cap + 1) * (size_t)V * sizeof *rows);
    }
    const spec_rows r = {rows, k_top, ids, top, counts};
    eddy_seq **owner = eddy_malloc((size_t)(k_cap + 1) * sizeof *owner);
    int8_t *want = eddy_malloc((size_t)(k_cap + 1));
    eddy_token *drafts = eddy_malloc((size_t)k_cap * sizeof *drafts);
    loop_emit le = {L, dt, st, EDDY_OK, err, -1};
    if ((k_top ? !ids || !top || !counts : !rows) || !owner || !want || !drafts) {
        rc = eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory for speculative decoding");
        goto done;
    }
    for (int64_t i = 0; i <= k_cap; i++) owner[i] = seq, want[i] = 1;

    /* the first token comes from the prompt's logits, as without drafts */
    if (L->n_predict >= 0 && st->n_generated >= L->n_predict) goto done;
    for (int64_t j = 0; j < L->n_eog; j++) logits[L->eog_mask[j]] = -INFINITY;
    eddy_token t = sampler_sample(L->s, logits);
    if (eddy_vocab_is_eog(L->v, t)) {
        st->stop = EDDY_STOP_EOG;
        goto done;
    }
    sampler_accept(L->s, t);
    if (emit_text(&le, t)) goto done;
    for (;;) {
        if (eddy_seq_n_pos(seq) >= n_ctx) { /* t cannot be fed */
            st->stop = EDDY_STOP_CONTEXT;
            break;
        }
        int64_t k;
        const int64_t left = L->n_predict >= 0 ? L->n_predict - st->n_generated : k_cap;
        if ((rc = eddy_spec_draft(sp, t, left, drafts, &k, err)) != EDDY_OK) break;
        if (k == 0 && k_top) {
            rc = eddy_engine_decode_top(e, &(eddy_batch){1, &t, owner, NULL}, k_top, ids, top, counts, NULL, err);
        } else if (k == 0) {
            rc = eddy_seq_eval(seq, &t, 1, rows, 0, err);
        } else {
            eddy_batch b = {k + 1, sp->tok, owner, want}; /* t, then the drafts */
            rc = k_top ? eddy_engine_verify_top(e, &b, k_top, ids, top, counts, NULL, err)
                       : eddy_engine_verify(e, &b, rows, err);
        }
        if (rc != EDDY_OK) {
            if (k > 0) sp->n_draft = -1;
            break;
        }
        spec_walk_end end;
        const int64_t max_emit = L->n_predict >= 0 ? L->n_predict - st->n_generated : -1;
        rc = spec_walk(sp, &r, max_emit, L->eog_mask, L->n_eog, emit_text, &le, &end, err);
        if (rc == EDDY_OK) rc = le.rc;
        if (rc != EDDY_OK || end != SPEC_WALK_NEXT) {
            if (end == SPEC_WALK_EOG) st->stop = EDDY_STOP_EOG;
            if (end == SPEC_WALK_LIMIT) st->stop = EDDY_STOP_LENGTH;
            break;
        }
        t = le.last;
    }
done:
    if (k_top) engine_seq_keep_logits(seq); /* the sequence ends with its logits, as without digests */
    if (sp) st->n_spec_steps = sp->steps, st->n_drafted = sp->drafted, st->n_accepted = sp->accepted;
    eddy_spec_free(sp);
    eddy_free(rows), eddy_free(ids), eddy_free(top), eddy_free(counts);
    eddy_free(owner), eddy_free(want), eddy_free(drafts);
    return rc == EDDY_OK ? le.rc : rc;
}
