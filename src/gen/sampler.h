/*
 * sampler.h — choosing the next token from a row of logits.
 *
 * Owns: the sampling chain and its state (random generator, recent-token history).
 * The chain, in llama.cpp's order so the same settings behave alike:
 *   penalties (repetition over the last repeat_last_n tokens; presence and frequency)
 *   -> top-k -> top-p -> min-p -> temperature -> draw
 * temp <= 0 is greedy (argmax after penalties). Top-p and min-p see the
 * probabilities at temperature 1, as in llama.cpp.
 */
#ifndef EDDY_GEN_SAMPLER_H
#define EDDY_GEN_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eddy.h"

typedef struct eddy_sampler sampler;

/* n_vocab > 0; params are checked (eddy_sampler_params_check). */
eddy_status sampler_new(sampler **out, const eddy_sampler_params *p, int64_t n_vocab, eddy_error *err);
void sampler_free(sampler *s);

/* Picks a token from logits (n_vocab), which is left unchanged. */
int32_t sampler_sample(sampler *s, const float *logits);
/* The same from a row's best candidates alone (ids and logits, n of them, best first, as
 * vec_top_k and eddy_engine_decode_top give them): the same token and the same draws of
 * the generator as sampler_sample on the whole row when n is at least
 * eddy_sampler_params_top of the sampler's parameters (or the row has only n usable
 * logits); other settings see the candidates as the whole row, without penalties. */
int32_t sampler_sample_top(sampler *s, const int32_t *ids, const float *logits, int32_t n);
/* The chain's distribution for logits: probs (n_vocab) gets each token's probability
 * of being sampled from them now (zero outside the candidates the chain keeps; greedy:
 * 1 at the argmax). sampler_sample draws from the same distribution. */
void sampler_probs(sampler *s, const float *logits, float *probs);
/* A token drawn from probs (n_vocab non-negative weights, not all zero; normalized
 * here) with the sampler's generator. */
int32_t sampler_draw(sampler *s, const float *probs);
/* A number in [0, 1) from the sampler's generator. */
double sampler_uniform(sampler *s);
/* Records a token of the sequence (prompt or generated) for the penalties. */
void sampler_accept(sampler *s, int32_t token);
void sampler_reset(sampler *s); /* forgets the history; the generator restarts from the seed */
int64_t sampler_n_vocab(const sampler *s); /* the logits row length it was made for */
const eddy_sampler_params *sampler_params(const sampler *s);

/* The sampler's state as bytes, for session files: the generator (u64), the count of
 * tokens in the history (u64), then those tokens oldest first (int32 each), all
 * little-endian. sampler_state_read restores it (a shorter window keeps the newest
 * tokens); false, changing nothing, when the bytes are not such a state. */
size_t sampler_state_bytes(const sampler *s);
void sampler_state_write(const sampler *s, uint8_t *out);
bool sampler_state_read(sampler *s, const uint8_t *in, size_t n);
bool sampler_state_valid(const sampler *s, const uint8_t *in, size_t n);

#endif
