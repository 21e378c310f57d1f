/*
 * rope.h — rotary position embeddings.
 *
 * Two pairings, as GGUF models use them:
 *   ROPE_NORM  rotates adjacent pairs (x[2i], x[2i+1])       — llama (the converter
 *              permutes q/k weights into this order)
 *   ROPE_NEOX  rotates halves (x[i], x[i + n_rot/2])           — qwen3next, qwen35 (whose
 *              multi-section rope reduces to this for text, where the temporal,
 *              height and width positions are all the token's position)
 * Pair i turns by angle pos * freq_base^(-2i / n_rot); only the first n_rot
 * dimensions of each head rotate (partial rotary), the rest pass through.
 */
#ifndef EDDY_OPS_ROPE_H
#define EDDY_OPS_ROPE_H

#include <stdint.h>

typedef enum { ROPE_NORM = 0, ROPE_NEOX = 1 } rope_style;

/* cos/sin table for one position: cs (n_rot/2, 2) as (cos, sin) pairs, computed in
 * double and rounded once. */
void ops_rope_table(float *cs, int64_t pos, int64_t n_rot, float freq_base);

/* Rotates x (n_heads, head_dim), heads `head_stride` floats apart, with a table from
 * ops_rope_table. n_rot is even and <= head_dim. */
void ops_rope_apply(float *x, int64_t n_heads, int64_t head_stride, int64_t n_rot, const float *cs,
                    rope_style style);

#endif
