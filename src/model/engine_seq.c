/*
 * engine_seq.c — sequences and snapshots: create, free, fork, clear, snapshot,
 * restore, truncate (roll back), and accepting part of a verify.
 *
 * A sequence and a snapshot are each a seq_state in the engine's state pool: a
 * recurrent slot of their own and references to KV blocks. Snapshot and fork copy
 * the slot and share the blocks; restore copies back. Rolling back drops KV rows
 * and, for recurrent layers, which cannot be trimmed, restores the latest snapshot
 * on the sequence's path and replays the tokens after it.
 */
#include <inttypes.h>
#include <string.h>

#include "base/alloc.h"
#include "cuda/cuda.h"
#include "model/engine.h"

/* ==== Sequences ==== */

/* A free index in table (n entries), or -1. */
static int64_t free_index(void **table, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!table[i]) return i;
    return -1;
}

static eddy_status seq_alloc(engine *c, eddy_seq **out, eddy_error *err) {
    *out = NULL;
    const int64_t idx = free_index((void **)c->seqs, c->n_seq_max);
    if (idx < 0)
        return eddy_error_set(err, EDDY_ERR_NOMEM, "all %" PRId64 " sequences of the engine are in use (raise -np)",
                              c->n_seq_max);
    eddy_seq *s = eddy_calloc(1, sizeof *s);
    if (!s) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    s->pending = eddy_malloc((size_t)c->n_batch * sizeof *s->pending);
    s->logits = eddy_malloc((size_t)c->m->hp.n_vocab * sizeof *s->logits);
    eddy_status st = s->pending && s->logits ? seq_state_init(c->sp, &s->st, c->n_ctx, false, "sequence", err)
                                             : eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    if (st != EDDY_OK) {
        eddy_free(s->logits);
        eddy_free(s->pending);
        eddy_free(s);
        return st;
    }
    s->e = c;
    s->index = idx;
    c->seqs[idx] = s;
    *out = s;
    return EDDY_OK;
}

eddy_status eddy_seq_new(eddy_engine *c, eddy_seq **out, eddy_error *err) {
    if (!c || !out) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_seq_new: NULL argument");
    pthread_mutex_lock(&c->lock);
    eddy_status s = seq_alloc(c, out, err);
    pthread_mutex_unlock(&c->lock);
    return s;
}

void engine_release_pending(engine *c, eddy_seq *s) {
    for (int64_t i = 0; i < s->n_pending; i++) state_slot_free(c->sp, s->pending[i]);
    s->n_pending = 0;
}

void eddy_seq_free(eddy_seq *s) {
    if (!s) return;
    engine *c = s->e;
    pthread_mutex_lock(&c->lock);
    engine_release_pending(c, s);
    seq_state_release(c->sp, &s->st);
    seq_logits_held(s, false);
    c->seqs[s->index] = NULL;
    eddy_free(s->pending);
    eddy_free(s->logits);
    eddy_free(s);
    pthread_mutex_unlock(&c->lock);
}

int64_t eddy_seq_n_pos(const eddy_seq *s) { return s->st.n_pos; }
const eddy_token *eddy_seq_tokens(const eddy_seq *s) { return s->st.tokens; }
const float *eddy_seq_logits(const eddy_seq *s) { return s->has_logits ? s->logits : NULL; }

eddy_status eddy_seq_fork(eddy_seq *src, eddy_seq **out, eddy_error *err) {
    if (!src || !out) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_seq_fork: NULL argument");
    engine *c = src->e;
    pthread_mutex_lock(&c->lock);
    eddy_status s = src->n_pending ? eddy_error_set(err, EDDY_ERR_ARG, "cannot fork a sequence whose verify of %"
                                                    PRId64 " tokens awaits eddy_seq_accept", src->n_pending)
                                   : seq_alloc(c, out, err);
    if (s == EDDY_OK) seq_state_copy(c->sp, &(*out)->st, &src->st); /* its logits: none yet */
    pthread_mutex_unlock(&c->lock);
    return s;
}

void eddy_seq_clear(eddy_seq *s) {
    engine *c = s->e;
    pthread_mutex_lock(&c->lock);
    engine_release_pending(c, s);
    seq_state_clear(c->sp, &s->st);
    seq_logits_held(s, false);
    pthread_mutex_unlock(&c->lock);
}

/* ==== Snapshots ==== */

eddy_status eddy_seq_snapshot(eddy_seq *s, eddy_snapshot **out, eddy_error *err) {
    if (!s || !out) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_seq_snapshot: NULL argument");
    engine *c = s->e;
    *out = NULL;
    pthread_mutex_lock(&c->lock);
    eddy_status st = EDDY_OK;
    const int64_t idx = free_index((void **)c->snaps, c->n_snap_max);
    eddy_snapshot *snap = NULL;
    if (s->n_pending)
        st = eddy_error_set(err, EDDY_ERR_ARG, "cannot snapshot a sequence whose verify of %" PRId64
                            " tokens awaits eddy_seq_accept", s->n_pending);
    else if (idx < 0)
        st = eddy_error_set(err, EDDY_ERR_NOMEM, "all %" PRId64 " snapshot states of the engine are in use",
                            c->n_snap_max);
    else if (!(snap = eddy_calloc(1, sizeof *snap)))
        st = eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    else
        st = seq_state_init(c->sp, &snap->st, c->n_ctx, c->host_snapshots, "snapshot", err);
    if (st == EDDY_OK) {
        seq_state_copy(c->sp, &snap->st, &s->st);
        snap->e = c;
        snap->index = idx;
        c->snaps[idx] = snap;
        *out = snap;
    } else {
        eddy_free(snap);
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

void eddy_snapshot_free(eddy_snapshot *snap) {
    if (!snap) return;
    engine *c = snap->e;
    pthread_mutex_lock(&c->lock);
    seq_state_release(c->sp, &snap->st);
    c->snaps[snap->index] = NULL;
    eddy_free(snap);
    pthread_mutex_unlock(&c->lock);
}

int64_t eddy_snapshot_n_pos(const eddy_snapshot *snap) { return snap->st.n_pos; }

eddy_status eddy_seq_restore(eddy_seq *s, const eddy_snapshot *snap, eddy_error *err) {
    if (!s || !snap) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_seq_restore: NULL argument");
    engine *c = s->e;
    if (snap->e != c) return eddy_error_set(err, EDDY_ERR_ARG, "the snapshot belongs to another engine");
    pthread_mutex_lock(&c->lock);
    engine_release_pending(c, s);
    seq_state_copy(c->sp, &s->st, &snap->st);
    seq_logits_held(s, false);
    pthread_mutex_unlock(&c->lock);
    return EDDY_OK;
}

/* ==== Rolling back ==== */

/* True when the model keeps recurrent state (which cannot be trimmed). */
static bool has_recurrent(const engine *c) {
    for (int64_t il = 0; il < c->sp->n_layer; il++)
        if (c->sp->shape[il].conv_floats || c->sp->shape[il].rec_floats) return true;
    return false;
}

/* The snapshot with the most positions, at most n_pos, whose tokens are the first
 * tokens of s: the latest state on s's path to n_pos. NULL: none. */
static const eddy_snapshot *latest_on_path(const engine *c, const eddy_seq *s, int64_t n_pos) {
    const eddy_snapshot *best = NULL;
    for (int64_t i = 0; i < c->n_snap_max; i++) {
        const eddy_snapshot *p = c->snaps[i];
        if (!p || p->st.n_pos > n_pos || (best && p->st.n_pos <= best->st.n_pos)) continue;
        if (!memcmp(p->st.tokens, s->st.tokens, (size_t)p->st.n_pos * sizeof *p->st.tokens)) best = p;
    }
    return best;
}

eddy_status engine_truncate(engine *c, eddy_seq *s, int64_t n_pos, eddy_error *err) {
    engine_release_pending(c, s);
    if (n_pos == s->st.n_pos) return EDDY_OK;
    seq_logits_held(s, false);
    if (!has_recurrent(c)) {
        seq_state_drop_kv(c->sp, &s->st, n_pos);
        return EDDY_OK;
    }
    /* the tokens to replay are the sequence's own: keep them while its state changes */
    int32_t *replay = eddy_malloc((size_t)(n_pos > 0 ? n_pos : 1) * sizeof *replay);
    if (!replay) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    memcpy(replay, s->st.tokens, (size_t)n_pos * sizeof *replay);
    const eddy_snapshot *from = latest_on_path(c, s, n_pos);
    if (from) seq_state_copy(c->sp, &s->st, &from->st);
    else seq_state_clear(c->sp, &s->st);
    const int64_t start = s->st.n_pos, n = n_pos - start;
    /* a replay is not the caller's evaluation: it runs whole, never cancelled halfway */
    int (*cb)(void *) = c->abort_cb;
    c->abort_cb = NULL;
    eddy_status st = n > 0 ? engine_run_seq(c, s, replay + start, n, NULL, false, err) : EDDY_OK;
    c->abort_cb = cb;
    eddy_free(replay);
    return st;
}

eddy_status eddy_seq_truncate(eddy_seq *s, int64_t n_pos, eddy_error *err) {
    if (!s) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_seq_truncate: NULL sequence");
    engine *c = s->e;
    pthread_mutex_lock(&c->lock);
    eddy_status st = n_pos < 0 || n_pos > s->st.n_pos
                         ? eddy_error_set(err, EDDY_ERR_ARG, "cannot roll back to position %" PRId64
                                          ": the sequence holds %" PRId64, n_pos, s->st.n_pos)
                         : engine_truncate(c, s, n_pos, err);
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ==== Accepting part of a verify ==== */

void engine_seq_set_logits(eddy_seq *s, const float *row) {
    engine *c = s->e;
    pthread_mutex_lock(&c->lock);
    memcpy(s->logits, row, (size_t)c->m->hp.n_vocab * sizeof *s->logits);
    seq_logits_held(s, true);
    pthread_mutex_unlock(&c->lock);
}

eddy_status eddy_seq_accept(eddy_seq *s, int64_t n_keep, eddy_error *err) {
    if (!s) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_seq_accept: NULL sequence");
    engine *c = s->e;
    pthread_mutex_lock(&c->lock);
    eddy_status st = EDDY_OK;
    if (n_keep < 0 || n_keep > s->n_pending) {
        st = eddy_error_set(err, EDDY_ERR_ARG, "cannot keep %" PRId64 " tokens: the sequence's verify holds %" PRId64,
                            n_keep, s->n_pending);
    } else if (n_keep == 0) {
        engine_release_pending(c, s);
    } else {
        /* the recurrent layers kept the inputs, not the states: they replay the kept rows
         * on the sequence's slot (attention layers hold the rows in the KV cache already) */
        for (int64_t il = 0; il < c->m->hp.n_layer; il++) {
            const model_layer *l = &c->m->layers[il];
            if (engine_layer_on_gpu(c, il) && (l->mixer == MIXER_GDN || l->mixer == MIXER_MAMBA2))
                cuda_accept(c, il, s, n_keep);
            else if (l->mixer == MIXER_GDN) block_gdn_accept(c, l, il, s, n_keep);
            else if (l->mixer == MIXER_MAMBA2) block_mamba2_accept(c, l, il, s, n_keep);
            else EDDY_ASSERT(c->sp->shape[il].conv_floats == 0);
        }
        if (c->mtp) /* the MTP layer's h: the last kept row's */
            state_mem_copy(c->sp, c->mtp_il, state_conv(c->sp, c->mtp_il, s->st.slot),
                           state_conv(c->sp, c->mtp_il, s->pending[n_keep - 1]), (size_t)c->m->hp.n_embd * sizeof(float));
        engine_release_pending(c, s);
        s->st.n_pos += n_keep;
    }
    if (st == EDDY_OK) {
        seq_state_drop_kv(c->sp, &s->st, s->st.n_pos); /* blocks only the rejected tokens used */
        const bool digest = c->pending_seq == s && c->pending_row < 0; /* engine_run's record */
        seq_logits_held(s, false);
        /* the logits after the kept tokens: the verify's row n_keep - 1, left where it was
         * made (engine_seq_keep_logits copies it) */
        if (digest && n_keep > 0) c->pending_seq = s, c->pending_row = n_keep - 1;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}
