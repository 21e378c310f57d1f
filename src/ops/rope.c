/*
 * rope.c — rotary embeddings (see rope.h for the two pairings).
 */
#include "rope.h"

#include <math.h>

#include "base/error.h"

void ops_rope_table(float *cs, int64_t pos, int64_t n_rot, float freq_base) {
    EDDY_ASSERT(n_rot % 2 == 0);
    for (int64_t i = 0; i < n_rot / 2; i++) {
        double inv_freq = pow((double)freq_base, -2.0 * (double)i / (double)n_rot);
        double angle = (double)pos * inv_freq;
        cs[2 * i] = (float)cos(angle);
        cs[2 * i + 1] = (float)sin(angle);
    }
}

void ops_rope_apply(float *x, int64_t n_heads, int64_t head_stride, int64_t n_rot, const float *cs,
                    rope_style style) {
    const int64_t half = n_rot / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        float *v = x + h * head_stride;
        for (int64_t i = 0; i < half; i++) {
            const float c = cs[2 * i], s = cs[2 * i + 1];
            float *a = style == ROPE_NEOX ? &v[i] : &v[2 * i];
            float *b = style == ROPE_NEOX ? &v[i + half] : &v[2 * i + 1];
            const float x0 = *a, x1 = *b;
            *a = x0 * c - x1 * s;
            *b = x0 * s + x1 * c;
        }
    }
}
