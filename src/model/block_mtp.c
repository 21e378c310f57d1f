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

void block_mtp(engine *c, const int32_t *tokens, const step_plan *plan) {
    const int64_t E = c->m->hp.n_embd, il = c->mtp_il;
    state_pool *sp = c->sp;
    step_plan *mp = &c->mtp_plan;
    mp->n = mp->n_runs = mp->n_ckpt = 0;
    /* the rows: every row but one at position 0, each run's first reading h from the state */
    for (int64_t r = 0; r < plan->n_runs; r++) {
        const step_run *run = &plan->runs[r];
        const int64_t skip = run->pos0 == 0 ? 1 : 0;
        if (run->n == skip) continue;
        step_run *mr = &mp->runs[mp->n_runs++];
        *mr = (step_run){run->seq, mp->n, run->n - skip, run->pos0 - 1 + skip, run->slot, NULL, 0, NULL, NULL};
        for (int64_t t = skip; t < run->n; t++) {
            const int64_t row = run->row0 + t;
            const float *h_prev = t == 0 ? state_conv(sp, il, run->slot) : c->h + (row - 1) * E;
            mp->pos[mp->n] = plan->pos[row] - 1;
            mtp_input(c, mp->n++, tokens[row], h_prev);
        }
    }
    /* the state: h of the last position (a verify: of each, in the rows' pending slots;
     * a prefix-cache checkpoint after position b: of b - 1) */
    for (int64_t r = 0; r < plan->n_runs; r++) {
        const step_run *run = &plan->runs[r];
        const size_t bytes = (size_t)E * sizeof(float);
        if (run->snap) {
            for (int64_t t = 0; t < run->n; t++)
                memcpy(state_conv(sp, il, run->snap[t]), c->h + (run->row0 + t) * E, bytes);
            continue;
        }
        memcpy(state_conv(sp, il, run->slot), c->h + (run->row0 + run->n - 1) * E, bytes);
        for (int64_t k = 0; k < run->n_ckpt; k++)
            memcpy(state_conv(sp, il, run->ckpt_slot[k]), c->h + (run->row0 + run->ckpt_pos[k] - 1 - run->pos0) * E,
                   bytes);
    }
    if (mp->n > 0) mtp_layer(c, mp);
}

eddy_status engine_mtp_draft(engine *c, eddy_seq *s, int32_t t, int64_t max, float p_min, int32_t *out,
                             int64_t *n_out, float *logits, eddy_error *err) {
    const model *m = c->m;
    const int64_t E = m->hp.n_embd, V = m->hp.n_vocab, n_pos = s->st.n_pos;
    *n_out = 0;
    if (!c->mtp) return eddy_error_set(err, EDDY_ERR_ARG, "MTP drafts need an engine made with the MTP layer (mtp)");
    if (s->n_pending)
        return eddy_error_set(err, EDDY_ERR_ARG, "the sequence has a verify of %" PRId64
                              " tokens awaiting eddy_seq_accept", s->n_pending);
    if (t < 0 || t >= V)
        return eddy_error_set(err, EDDY_ERR_ARG, "token id %" PRId32 " is outside the vocabulary (0..%" PRId64 ")", t,
                              V - 1);
    if (max > c->n_ctx - n_pos) max = c->n_ctx - n_pos;
    if (n_pos == 0 || max <= 0) return EDDY_OK; /* no h before the first position */
    /* draft j's row goes to index n_pos - 1 + j */
    if (!seq_state_reserve_kv(c->sp, &s->st, n_pos - 1, max))
        return eddy_error_set(err, EDDY_ERR_NOMEM, "the KV cache has no free block for sequence %" PRId64 "'s drafts",
                              s->index);
    step_plan *mp = &c->mtp_plan;
    float *h = c->h, *row = logits ? logits : c->mtp_logits;
    memcpy(h, state_conv(c->sp, c->mtp_il, s->st.slot), (size_t)E * sizeof(float));
    int64_t k = 0;
    for (int32_t token = t; k < max; k++) {
        mp->n = mp->n_runs = 1, mp->n_ckpt = 0;
        mp->runs[0] = (step_run){s, 0, 1, n_pos - 1 + k, s->st.slot, NULL, 0, NULL, NULL};
        mp->pos[0] = n_pos - 1 + k;
        mtp_input(c, 0, token, h);
        mtp_layer(c, mp);
        ops_rmsnorm(h, c->x, (const float *)m->mtp_head_norm.data, E, m->hp.rms_eps); /* the next row's h */
        linear(c->pool, &m->mtp_head, h, 1, row, c->act);
        if (m->hp.logit_scale != 1.0f)
            for (int64_t i = 0; i < V; i++) row[i] /= m->hp.logit_scale;
        float p;
        token = (int32_t)vec_argmax_softmax(row, V, &p);
        if (p < p_min) break; /* the layer is unsure: stop guessing */
        out[k] = token;
        if (logits) row += V;
    }
    *n_out = k;
    return EDDY_OK;
}

eddy_status engine_seq_mtp_draft(eddy_seq *s, int32_t t, int64_t max, float p_min, int32_t *out, int64_t *n_out,
                                 float *logits, eddy_error *err) {
    engine *c = s->e;
    pthread_mutex_lock(&c->lock);
    eddy_status st = engine_mtp_draft(c, s, t, max, p_min, out, n_out, logits, err);
    pthread_mutex_unlock(&c->lock);
    return st;
}
