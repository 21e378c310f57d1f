/*
 * spec.h — speculative decoding inside the generation loop (docs/speculative.md).
 *
 * Owns: the drafters (prompt lookup, a draft model, the model's MTP layer) and the draft length they are
 * asked for (draft.c); the verify loop and the acceptance rule (speculative.c).
 * Does not own: the verify itself (eddy_engine_verify / eddy_seq_accept, src/model)
 * or the sampling chain (sampler.c).
 */
#ifndef EDDY_GEN_SPEC_H
#define EDDY_GEN_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "eddy.h"
#include "gen/sampler.h"

/* ==== Drafters (draft.c) ==== */

typedef struct drafter drafter;

/* A drafter for generation on model m with its sampling parameters sp, for sequence
 * target. Checks p (a draft model's vocabulary against m's, token for token; MTP: the
 * target's engine runs the layer). */
eddy_status drafter_new(const eddy_spec_params *p, const eddy_model *m, const eddy_sampler_params *sp,
                        eddy_seq *target, drafter **out, eddy_error *err);
void drafter_free(drafter *d);

/* The draft counts, defaults applied: fewer than the minimum is a plain step. */
int64_t drafter_min(const drafter *d);
int64_t drafter_max(const drafter *d);

/* True when the drafts are drawn from a distribution q (a draft model at temperature
 * > 0) rather than chosen (prompt lookup; a draft model at temperature 0). */
bool drafter_sampled(const drafter *d);

/* Up to max drafts for what follows hist[0, n) (all the tokens of the sequence, its
 * last one about to be fed) into out, *n_out of them (0: none found); for a sampled
 * drafter q (max, n_vocab) gets the distribution each was drawn from. */
eddy_status drafter_propose(drafter *d, const eddy_token *hist, int64_t n, int64_t max, eddy_token *out, float *q,
                            int64_t *n_out, eddy_error *err);

/* True when a's and b's drafts for their sequences can be made together: drafters of
 * one type run by the same engine (the target's for MTP drafts, the draft engine for a
 * draft model; prompt lookup has nothing to share) whose drafting advances different
 * sequences (the targets for MTP, the draft sequences for a draft model). */
bool drafter_batches_with(const drafter *a, const drafter *b);

/* drafter_propose for n drafters (MTP or a draft model), each batching with every other:
 * hist[i][0, nh[i]), max[i], out[i], q[i] and n_out[i] as drafter_propose's for d[i].
 * Each gets the drafts it would get alone; every draft position is one forward step
 * for all of them (of the MTP layer, engine_mtp_draft_many; of the draft model, after
 * one batch that brings each draft sequence up to its history). */
eddy_status drafter_propose_many(drafter *const *d, int64_t n, const eddy_token *const *hist, const int64_t *nh,
                                 const int64_t *max, eddy_token *const *out, float *const *q, int64_t *n_out,
                                 eddy_error *err);

/* The number of drafts worth asking for in the next step: draft_max when fixed, else
 * the count (0: a plain step) with the most tokens per second expected from the
 * acceptance rate so far of drafts of that kind and the measured cost of a verify step
 * and of a draft (docs/speculative.md). Prompt lookup knows the kind (the n-gram length
 * matched) only once it looks: there this is a bound, and drafter_propose cuts.
 * After enough plain steps in a row for a kind, one step probes with draft_min drafts
 * (at least one): what a drafter guesses well can change within a generation. */
int64_t drafter_length(drafter *d);
/* What a step did: n_drafted drafts checked, n_accepted of them kept, the verify step
 * taking verify_s seconds. */
void drafter_update(drafter *d, int64_t n_drafted, int64_t n_accepted, double verify_s);

/* Prompt lookup: for g = ngram down to 1, the latest j with j + g < n and
 * hist[j, j + g) = hist[n - g, n); max tokens from hist[j + g] on go to out (past the
 * end of hist the continuation goes on through out itself, so a repeating tail drafts
 * its period). Returns how many: max, or 0 when no n-gram recurs; *found gets the
 * n-gram length matched (0: none). */
int64_t ngram_lookup(const eddy_token *hist, int64_t n, int ngram, int64_t max, eddy_token *out, int *found);

/* ==== The acceptance rule and the loop (speculative.c) ==== */

/* Speculative sampling at one position: d was drawn from q; p is the model's
 * distribution there. Keeps d with probability min(1, p[d] / q[d]) (*kept true), else
 * returns a token drawn from max(0, p - q) renormalized (never d). residual (n_vocab)
 * is scratch. Random numbers come from s. */
eddy_token spec_accept_sampled(sampler *s, const float *p, const float *q, eddy_token d, float *residual,
                               bool *kept);

/* What happens to each token a walk samples: seen by the sampler already; non-zero from
 * the callback stops the walk (the token stays unfed). */
typedef int (*spec_emit_fn)(void *user, eddy_token t);

/* How a walk ended. */
typedef enum {
    SPEC_WALK_NEXT = 0, /* the last sampled token is the next step's t */
    SPEC_WALK_EOG,      /* an end-of-generation token came (not emitted) */
    SPEC_WALK_LIMIT,    /* max_emit tokens were emitted, all fed */
    SPEC_WALK_STOPPED,  /* emit returned non-zero */
} spec_walk_end;

/* What a verify gave for t and the n drafts: rows (n + 1, n_vocab) of logits, or (rows
 * NULL) each row's k best (ids and logits (n + 1, k), counts (n + 1): eddy_engine_verify_top) */
typedef struct {
    float *rows;
    int32_t k;
    const eddy_token *ids;
    const float *logits;
    const int32_t *counts;
} spec_rows;

/* The walk after the forward step that fed t and the drafts of the last eddy_spec_draft,
 * from what it gave (r; in whole rows eog_mask's ids become -inf first, and a digest
 * takes no eog_mask and at least eddy_spec_top's k: EDDY_ERR_ARG otherwise). Samples
 * each position as plain generation would, emitting at most max_emit (< 0: no limit)
 * tokens, keeps the state after t and the drafts the model agreed with
 * (eddy_seq_accept) and gives the sequence the logits after them (from a digest: where
 * the engine kept them, engine_seq_keep_logits). */
eddy_status spec_walk(eddy_spec *sp, const spec_rows *r, int64_t max_emit, const eddy_token *eog_mask, int64_t n_eog,
                      spec_emit_fn emit, void *user, spec_walk_end *end, eddy_error *err);

/* EDDY_ERR_ARG, naming n_verify, when engine e has too few verify states for a step of t
 * and one draft (eddy_spec_new; eddy_generate_ex before the prompt). */
eddy_status spec_check_engine(const eddy_engine *e, eddy_error *err);

/* The generation loop with drafts: eddy_generate_ex's contract (the prompt already
 * fed: logits holds the row after it, the sampler has seen it), n_predict and the
 * end-of-generation masks as there. Fills the decode part of *st. */
typedef struct {
    eddy_ctx *c;
    const eddy_vocab *v;
    sampler *s;
    const eddy_spec_params *spec;
    int64_t n_predict;
    const eddy_token *eog_mask; /* (n_eog) logits made -inf before sampling */
    int64_t n_eog;
    eddy_token_callback cb;
    void *user;
} spec_loop;

eddy_status spec_generate(const spec_loop *L, float *logits, eddy_detok *dt, eddy_gen_stats *st, eddy_error *err);

#endif
