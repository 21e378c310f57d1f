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

#include <stdint.h>

#include "eddy.h"

typedef struct eddy_sampler sampler;

/* n_vocab > 0; params are checked (eddy_sampler_params_check). */
eddy_status sampler_new(sampler **out, const eddy_sampler_params *p, int64_t n_vocab, eddy_error *err);
void sampler_free(sampler *s);

/* Picks a token from logits (n_vocab), which is left unchanged. */
int32_t sampler_sample(sampler *s, const float *logits);
/* Records a token of the sequence (prompt or generated) for the penalties. */
void sampler_accept(sampler *s, int32_t token);
void sampler_reset(sampler *s); /* forgets the history; the generator restarts from the seed */
int64_t sampler_n_vocab(const sampler *s); /* the logits row length it was made for */

#endif
