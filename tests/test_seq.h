/*
 * test_seq.h — helpers the engine, session and prefix-cache tests share: load a tiny
 * model, make an engine and a sequence, feed tokens; each records a test failure with
 * the library's message when it fails.
 */
#ifndef EDDY_TEST_SEQ_H
#define EDDY_TEST_SEQ_H

#include "eddy.h"

/* tests/data/<file>, or NULL (a failure recorded). */
eddy_model *tseq_load(const char *file);
/* An engine on 2 threads with p's fields (n_threads 0 there: 2), or NULL. */
eddy_engine *tseq_engine(const eddy_model *m, eddy_engine_params p);
eddy_seq *tseq_new(eddy_engine *e);
/* Feeds ids[0, n) as one evaluation; logits of every token into out (NULL: none). */
bool tseq_feed(eddy_seq *s, const int32_t *ids, int64_t n, float *out);
/* n random ids below n_vocab. */
void tseq_rand_ids(test_rng *r, int32_t *ids, int64_t n, int64_t n_vocab);
/* The same batch (a prompt of three sequences, rows wanted by flag) and decode steps on
 * three engines of model file: through eddy_engine_decode, eddy_engine_decode_argmax (its
 * ids written over the batch's tokens) and eddy_engine_decode_top (k 40, then 1, 7 and
 * EDDY_TOP_MAX): each id is the argmax of the first's logits and each top vec_top_k of
 * them, bit for bit, and the log-sum-exps (asked for in the prefill and the second step)
 * vec_logsumexp of them within lse_tol (0: bit for bit); the sequences of the other two
 * keep no logits; NULL outputs and k outside 1..EDDY_TOP_MAX are refused. */
void tseq_check_decode_top(const char *file, eddy_engine_params p, double lse_tol);
/* A prompt of two sequences (rows wanted by flag) and a decode step, through
 * eddy_engine_decode on one engine of model file and eddy_engine_decode_logprob on
 * another: each log-probability is vec_logprob of the first's logits for its target
 * (targets: the largest logit, the smallest, others) within tol (0: bit for bit); the
 * sequences keep no logits; a target outside the vocabulary is refused, changing nothing. */
void tseq_check_decode_logprob(const char *file, eddy_engine_params p, double tol);
/* eddy_generate_ex with run's default sampler (its steps give their best 40 only) on a
 * context of model file with params cp: its tokens are those the same sampler draws from
 * whole rows (eddy_ctx_eval on a second context) fed one at a time; afterwards the
 * sequence holds the last of those rows, bit for bit, and generating with no prompt goes
 * on from them. With ignore_eog the end-of-generation tokens are banned (the loop takes as
 * many more of the best and removes them; the rows fed one at a time get -inf there), and
 * some row's best 40 must have held one. */
void tseq_check_generate_from_the_best(const char *file, eddy_ctx_params cp, bool ignore_eog);
/* The same verifies on two engines of model file, through eddy_engine_verify and
 * eddy_engine_verify_top: a verify of two sequences (k 40, with log-sum-exps: vec_logsumexp
 * within lse_tol), then one of a sequence alone (k 5): each row's best k are vec_top_k of
 * the first's logits, bit for bit; after the
 * same eddy_seq_accept the sequences keep no logits, except that a verify of one
 * sequence leaves the kept row where it was made (engine_seq_keep_logits gives it, bit
 * for bit, and forgets it once another step runs); a decode step after gives the same
 * logits on both; NULL outputs and k outside 1..EDDY_TOP_MAX are refused. */
void tseq_check_verify_top(const char *file, eddy_engine_params p, double lse_tol);
/* A prompt of two sequences and a decode step on two engines of model file, through
 * eddy_engine_decode and engine_decode_best: each best token is vec_argmax_softmax's of
 * the first's logits and its probability that one's within tol relative (0: bit for
 * bit); the sequences keep no logits. */
void tseq_check_decode_best(const char *file, eddy_engine_params p, double tol);

#endif
