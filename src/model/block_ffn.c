/*
 * block_ffn.c — the feed-forward parts: SwiGLU, the squared-ReLU MLP, and the mixture of experts
 * (softmax router, top-k, weights renormalized to sum to 1, SwiGLU experts, plus a
 * shared expert scaled by sigmoid of its own scalar gate).
 */
#include <string.h>

#include "model/ctx.h"
#include "model/linear.h"
#include "ops/norm.h"

void block_ffn_dense(ctx *c, const model_layer *l, int64_t n) {
    const int64_t F = c->m->hp.n_ff;
    linear(c->pool, &l->ffn_gate, c->xn, n, c->ff_a, c->act);
    linear(c->pool, &l->ffn_up, c->xn, n, c->ff_b, c->act);
    ops_swiglu(c->ff_a, c->ff_a, c->ff_b, n * F);
    linear(c->pool, &l->ffn_down, c->ff_a, n, c->mix, c->act);
}

void block_ffn_relu2(ctx *c, const model_layer *l, int64_t n) {
    const int64_t F = c->m->hp.n_ff;
    linear(c->pool, &l->ffn_up, c->xn, n, c->ff_a, c->act);
    for (int64_t i = 0; i < n * F; i++) {
        const float r = c->ff_a[i] > 0.0f ? c->ff_a[i] : 0.0f;
        c->ff_a[i] = r * r;
    }
    linear(c->pool, &l->ffn_down, c->ff_a, n, c->mix, c->act);
}

/* out (n_embd) = down(silu(gate x) * up(x)) for one token x, with the given matrices. */
static void swiglu_expert(ctx *c, const tensor *gate, const tensor *up, const tensor *down, const float *x,
                          float *out) {
    const int64_t F = gate->ne[1];
    linear(c->pool, gate, x, 1, c->ff_a, c->act);
    linear(c->pool, up, x, 1, c->ff_b, c->act);
    ops_swiglu(c->ff_a, c->ff_a, c->ff_b, F);
    linear(c->pool, down, c->ff_a, 1, out, c->act);
}

void block_ffn_moe(ctx *c, const model_layer *l, int64_t n) {
    const model_hparams *hp = &c->m->hp;
    const int64_t E = hp->n_embd, X = hp->n_expert, k = hp->n_expert_used;
    linear(c->pool, &l->moe_router, c->xn, n, c->router, c->act);
    for (int64_t t = 0; t < n; t++) {
        const float *x = c->xn + t * E;
        float *y = c->mix + t * E, *p = c->router + t * X;
        memset(y, 0, (size_t)E * sizeof(float));
        ops_softmax(p, X);
        /* top-k by probability (ties: lower index), then renormalize */
        int64_t chosen[64];
        float w[64], wsum = 0;
        EDDY_ASSERT(k <= 64);
        for (int64_t j = 0; j < k; j++) {
            int64_t best = -1;
            for (int64_t e = 0; e < X; e++) {
                bool taken = false;
                for (int64_t i = 0; i < j; i++) taken |= chosen[i] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            chosen[j] = best;
            w[j] = p[best];
            wsum += w[j];
        }
        for (int64_t j = 0; j < k; j++) {
            tensor g = tensor_expert(&l->moe_gate, chosen[j]), u = tensor_expert(&l->moe_up, chosen[j]);
            tensor d = tensor_expert(&l->moe_down, chosen[j]);
            swiglu_expert(c, &g, &u, &d, x, c->ff_out);
            const float scale = w[j] / wsum;
            for (int64_t i = 0; i < E; i++) y[i] += scale * c->ff_out[i];
        }
        if (l->shexp_gate.name) {
            swiglu_expert(c, &l->shexp_gate, &l->shexp_up, &l->shexp_down, x, c->ff_out);
            float gate = 1.0f;
            if (l->shexp_router.name) {
                linear(c->pool, &l->shexp_router, x, 1, &gate, c->act);
                gate = ops_sigmoid(gate);
            }
            for (int64_t i = 0; i < E; i++) y[i] += gate * c->ff_out[i];
        }
    }
}
