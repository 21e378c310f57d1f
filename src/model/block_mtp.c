/*
 * block_mtp.c — the multi-token-prediction (MTP) layer of Qwen3.5 / Qwen3-Next files
 * (model.h), in every forward step of an engine made with it, and its drafts.
 *
 * The layer reads, for the token x_q at position q, the main model's last hidden
 * state at q - 1 and predicts x_{q+2}:
 *   y_q = layer(eh_proj([enorm(embed(x_q)); hnorm(h_{q-1})]))     (gated attention + FFN)
 *   logits = mtp_head(head_norm(y_q))
 * Position 0 has no h_{-1} and no row: the layer's cache holds row q at index q - 1,
 * with the rotary embedding of position q - 1 (only differences of positions reach the
 * scores, so either numbering gives the same), the numbering of the reference
 * implementations. A sequence's state keeps h of its last position as this layer's
 * one-row "conv window", so snapshots, forks, sessions, the prefix cache and a
 * verify's accept carry it like any recurrent state.
 *
 * Drafts chain the layer on itself: the row after a draft d takes d and head_norm(y)
 * of the row before, at the next index. Their cache rows lie past the sequence's end
 * and the verify that checks the drafts writes the same indices again from the main
 * model's own h.
 */
#include <inttypes.h>
#include <string.h>

#include "cuda/cuda.h"
#include "model/engine.h"
#include "model/linear.h"
#include "ops/norm.h"
#include "ops/vec.h"

/* Row j of c->mtp_cat: [enorm(embed(token)); hnorm(h)]. */
static void mtp_input(engine *c, int64_t j, int32_t token, const float *h) {
    const model *m = c->m;
    const int64_t E = m->hp.n_embd;
    float *cat = c->mtp_cat + j * 2 * E;
    tensor_row_f32(&m->mtp_embd, token, cat);
    ops_rmsnorm(cat, cat, (const float *)m->mtp_enorm.data, E, m->hp.rms_eps);
    ops_rmsnorm(cat + E, h, (const float *)m->mtp_hnorm.data, E, m->hp.rms_eps);
}

/* The layer over the mtp_plan's rows of c->mtp_cat, its output in c->x. */
static void mtp_layer(engine *c, const step_plan *mp) {
    linear(c->pool, &c->m->mtp_eh_proj, c->mtp_cat, mp->n, c->x, c->act);
    forward_layer(c, c->m->mtp, c->mtp_il, mp);
}

void mtp_plan_rows(engine *c, const int32_t *tokens, const step_plan *plan) {
    step_plan *mp = &c->mtp_plan;
    mp->n = mp->n_runs = mp->n_ckpt = 0;
    /* every row but one at position 0, each run's first reading h from the state */
    for (int64_t r = 0; r < plan->n_runs; r++) {
        const step_run *run = &plan->runs[r];
        const int64_t skip = run->pos0 == 0 ? 1 : 0;
        if (run->n == skip) continue;
        step_run *mr = &mp->runs[mp->n_runs++];
        *mr = (step_run){run->seq, mp->n, run->n - skip, run->pos0 - 1 + skip, run->slot, NULL, 0, NULL, NULL};
        for (int64_t t = skip; t < run->n; t++) {
            const int64_t row = run->row0 + t;
            mp->pos[mp->n] = plan->pos[row] - 1;
            c->mtp_tok[mp->n] = tokens[row];
            c->mtp_src[mp->n++] = t == 0 ? (int32_t)(-run->slot - 1) : (int32_t)(row - 1);
        }
    }
}

int64_t mtp_state_rows(const step_plan *plan, int32_t *pairs) {
    int64_t n = 0;
    for (int64_t r = 0; r < plan->n_runs; r++) {
        const step_run *run = &plan->runs[r];
        if (run->snap) {
            for (int64_t t = 0; t < run->n; t++, n++)
                pairs[2 * n] = (int32_t)(run->row0 + t), pairs[2 * n + 1] = (int32_t)run->snap[t];
            continue;
        }
        pairs[2 * n] = (int32_t)(run->row0 + run->n - 1), pairs[2 * n + 1] = (int32_t)run->slot, n++;
        for (int64_t k = 0; k < run->n_ckpt; k++, n++) {
            pairs[2 * n] = (int32_t)(run->row0 + run->ckpt_pos[k] - 1 - run->pos0);
            pairs[2 * n + 1] = (int32_t)run->ckpt_slot[k];
        }
    }
    return n;
}

void block_mtp(engine *c, const int32_t *tokens, const step_plan *plan) {
    const int64_t E = c->m->hp.n_embd, il = c->mtp_il;
    state_pool *sp = c->sp;
    const step_plan *mp = &c->mtp_plan;
    mtp_plan_rows(c, tokens, plan);
    for (int64_t j = 0; j < mp->n; j++) { /* the inputs read the states before they change */
        const int32_t src = c->mtp_src[j];
        mtp_input(c, j, c->mtp_tok[j], src >= 0 ? c->h + src * E : state_conv(sp, il, -src - 1));
    }
    const int64_t n_w = mtp_state_rows(plan, c->mtp_writes);
    for (int64_t k = 0; k < n_w; k++)
        memcpy(state_conv(sp, il, c->mtp_writes[2 * k + 1]), c->h + c->mtp_writes[2 * k] * E,
               (size_t)E * sizeof(float));
    if (mp->n > 0) mtp_layer(c, mp);
}

/* Checks sequence s may draft after token t. */
static eddy_status check_draft(const engine *c, const eddy_seq *s, int32_t t, eddy_error *err) {
    const int64_t V = c->m->hp.n_vocab;
    if (s->n_pending)
        return eddy_error_set(err, EDDY_ERR_ARG, "the sequence has a verify of %" PRId64
                              " tokens awaiting eddy_seq_accept", s->n_pending);
    if (t < 0 || t >= V)
        return eddy_error_set(err, EDDY_ERR_ARG, "token id %" PRId32 " is outside the vocabulary (0..%" PRId64 ")", t,
                              V - 1);
    return EDDY_OK;
}

/* Drafts of up to MTP_DRAFT_ROWS sequences (and n_batch), one chain step at a time over
 * all that still draft: row j of a step is active sequence act[j], its h in c->h row j. */
static eddy_status draft_group(engine *c, eddy_seq *const *s, const int32_t *t, const int64_t *max, int64_t n,
                               const float *p_min, int32_t *const *out, int64_t *n_out, float *const *logits,
                               eddy_error *err) {
    const model *m = c->m;
    const int64_t E = m->hp.n_embd, V = m->hp.n_vocab;
    int64_t act[MTP_DRAFT_ROWS], lim[MTP_DRAFT_ROWS];
    int32_t tok[MTP_DRAFT_ROWS];
    int64_t na = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t n_pos = s[i]->st.n_pos;
        lim[i] = max[i] < c->n_ctx - n_pos ? max[i] : c->n_ctx - n_pos;
        if (n_pos == 0 || lim[i] <= 0) continue; /* no h before the first position */
        /* draft k's row goes to index n_pos - 1 + k */
        if (!seq_state_reserve_kv(c->sp, &s[i]->st, n_pos - 1, lim[i]))
            return eddy_error_set(err, EDDY_ERR_NOMEM, "the KV cache has no free block for sequence %" PRId64
                                  "'s drafts", s[i]->index);
        if (c->gpu) cuda_mtp_h_from_state(c, na, s[i]->st.slot);
        else memcpy(c->h + na * E, state_conv(c->sp, c->mtp_il, s[i]->st.slot), (size_t)E * sizeof(float));
        tok[na] = t[i], act[na++] = i;
    }
    step_plan *mp = &c->mtp_plan;
    if (c->gpu && na > 0) c->pending_seq = NULL; /* the drafts' logits take the GPU's buffer */
    /* on a GPU each row's argmax and its probability come back, unless a caller wants the rows */
    bool rows = !c->gpu;
    for (int64_t j = 0; j < na; j++) rows |= logits && logits[act[j]];
    int32_t best[MTP_DRAFT_ROWS];
    float best_p[MTP_DRAFT_ROWS];
    for (int64_t k = 0; na > 0; k++) {
        mp->n = mp->n_runs = na, mp->n_ckpt = 0;
        for (int64_t j = 0; j < na; j++) {
            eddy_seq *q = s[act[j]];
            const int64_t pos = q->st.n_pos - 1 + k;
            mp->runs[j] = (step_run){q, j, 1, pos, q->st.slot, NULL, 0, NULL, NULL};
            mp->pos[j] = pos;
            if (!c->gpu) mtp_input(c, j, tok[j], c->h + j * E);
        }
        if (c->gpu) {
            cuda_mtp_chain_step(c, mp, tok, rows ? NULL : best, best_p);
        } else {
            mtp_layer(c, mp);
            for (int64_t j = 0; j < na; j++) /* the next row's h */
                ops_rmsnorm(c->h + j * E, c->x + j * E, (const float *)m->mtp_head_norm.data, E, m->hp.rms_eps);
            linear(c->pool, &m->mtp_head, c->h, na, c->mtp_logits, c->act);
        }
        int64_t kept = 0;
        for (int64_t j = 0; j < na; j++) {
            const int64_t i = act[j];
            float p;
            int32_t d;
            if (rows) {
                float *row = c->mtp_logits + j * V;
                forward_scale_logits(&m->hp, row, 1);
                if (logits && logits[i]) memcpy(logits[i] + k * V, row, (size_t)V * sizeof(float));
                d = (int32_t)vec_argmax_softmax(row, V, &p);
            } else {
                d = best[j], p = best_p[j];
            }
            if (p < p_min[i]) continue; /* the layer is unsure: stop guessing */
            out[i][k] = d;
            n_out[i] = k + 1;
            if (k + 1 == lim[i]) continue;
            if (kept != j && c->gpu) cuda_mtp_h_move(c, kept, j);
            else if (kept != j) memmove(c->h + kept * E, c->h + j * E, (size_t)E * sizeof(float));
            tok[kept] = d, act[kept++] = i;
        }
        na = kept;
    }
    return EDDY_OK;
}

eddy_status engine_mtp_draft_many(engine *c, eddy_seq *const *s, const int32_t *t, const int64_t *max, int64_t n,
                                  const float *p_min, int32_t *const *out, int64_t *n_out, float *const *logits,
                                  eddy_error *err) {
    if (!c->mtp) return eddy_error_set(err, EDDY_ERR_ARG, "MTP drafts need an engine made with the MTP layer (mtp)");
    for (int64_t i = 0; i < n; i++) {
        n_out[i] = 0;
        if (s[i]->e != c) return eddy_error_set(err, EDDY_ERR_ARG, "MTP drafts: sequence %" PRId64
                                                " belongs to another engine", s[i]->index);
        for (int64_t j = 0; j < i; j++)
            if (s[j] == s[i])
                return eddy_error_set(err, EDDY_ERR_ARG, "MTP drafts: sequence %" PRId64 " is given twice",
                                      s[i]->index);
        eddy_status rc = check_draft(c, s[i], t[i], err);
        if (rc != EDDY_OK) return rc;
    }
    const int64_t rows = c->n_batch < MTP_DRAFT_ROWS ? c->n_batch : MTP_DRAFT_ROWS;
    for (int64_t g = 0; g < n; g += rows) {
        const int64_t ng = n - g < rows ? n - g : rows;
        eddy_status rc = draft_group(c, s + g, t + g, max + g, ng, p_min + g, out + g, n_out + g,
                                     logits ? logits + g : NULL, err);
        if (rc != EDDY_OK) return rc;
    }
    return EDDY_OK;
}

eddy_status engine_mtp_draft(engine *c, eddy_seq *s, int32_t t, int64_t max, float p_min, int32_t *out,
                             int64_t *n_out, float *logits, eddy_error *err) {
    return engine_mtp_draft_many(c, &s, &t, &max, 1, &p_min, &out, n_out, logits ? &logits : NULL, err);
}

eddy_status engine_seq_mtp_draft(eddy_seq *s, int32_t t, int64_t max, float p_min, int32_t *out, int64_t *n_out,
                                 float *logits, eddy_error *err) {
    engine *c = s->e;
    pthread_mutex_lock(&c->lock);
    eddy_status st = engine_mtp_draft(c, s, t, max, p_min, out, n_out, logits, err);
    pthread_mutex_unlock(&c->lock);
    return st;
}

eddy_status engine_seq_mtp_draft_many(eddy_seq *const *s, const int32_t *t, const int64_t *max, int64_t n,
                                      const float *p_min, int32_t *const *out, int64_t *n_out, eddy_error *err) {
    if (n <= 0) return EDDY_OK;
    engine *c = s[0]->e;
    pthread_mutex_lock(&c->lock);
    eddy_status st = engine_mtp_draft_many(c, s, t, max, n, p_min, out, n_out, NULL, err);
    pthread_mutex_unlock(&c->lock);
    return st;
}
