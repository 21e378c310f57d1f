/*
 * block_ffn.c — the feed-forward parts: SwiGLU, the squared-ReLU MLP, and the mixture of experts
 * (softmax router, top-k, weights renormalized to sum to 1, SwiGLU experts, plus a
 * shared expert scaled by sigmoid of its own scalar gate).
 */
#include <string.h>

#include "model/engine.h"
#include "model/linear.h"
#include "ops/norm.h"

void block_ffn_relu2(engine *c, const model_layer *l, int64_t n) {
    const int64_t F = c->m->hp.n_ff;
    linear(c->pool, &l->ffn_up, c->xn, n, c->ff_a, c->act);
    for (int64_t i = 0; i < n * F; i++) {
        const float r = c->ff_a[i] > 0.0f ? c->ff_a[i] : 0.0f;
        c->ff_a[i] = r * r;
    }
    linear(c->pool, &l->ffn_down, c->ff_a, n, c->mix, c->act);
}

/* out (m, n_embd) = down(silu(gate x) * up(x)) for m token rows x (m, n_embd), with the given matrices. */
static void swiglu_expert(engine *c, const tensor *gate, const tensor *up, const tensor *down, const float *x, int64_t m,
                          float *out) {
    const int64_t F = gate->ne[1];
    linear_many(c->pool, (const tensor *[]){gate, up}, 2, x, m, (float *[]){c->ff_a, c->ff_b}, c->act);
    ops_swiglu(c->ff_a, c->ff_a, c->ff_b, m * F);
    linear(c->pool, down, c->ff_a, m, out, c->act);
}

void block_ffn_dense(engine *c, const model_layer *l, int64_t n) {
    swiglu_expert(c, &l->ffn_gate, &l->ffn_up, &l->ffn_down, c->xn, n, c->mix);
}

void moe_route_token(float *p, int64_t X, int64_t k, int32_t *sel, float *w) {
    ops_softmax(p, X);
    float wsum = 0;
    for (int64_t j = 0; j < k; j++) {
        int64_t best = -1;
        for (int64_t e = 0; e < X; e++) {
            bool taken = false;
            for (int64_t i = 0; i < j; i++) taken |= sel[i] == e;
            if (!taken && (best < 0 || p[e] > p[best])) best = e;
        }
        sel[j] = (int32_t)best;
        w[j] = p[best];
        wsum += w[j];
    }
    for (int64_t j = 0; j < k; j++) w[j] /= wsum;
}

void moe_route(engine *c, int64_t n) {
    const model_hparams *hp = &c->m->hp;
    const int64_t X = hp->n_expert, k = hp->n_expert_used;
    for (int64_t t = 0; t < n; t++) moe_route_token(c->router + t * X, X, k, c->moe_sel + t * k, c->moe_w + t * k);
    moe_sort_slots(c, n);
}

void moe_sort_slots(engine *c, int64_t n) {
    const model_hparams *hp = &c->m->hp;
    const int64_t X = hp->n_expert, k = hp->n_expert_used;
    /* slots (t * k + j) sorted by expert: those of expert e are moe_order[start[e] .. start[e + 1]) */
    int32_t *start = c->moe_start;
    memset(start, 0, (size_t)(X + 1) * sizeof *start);
    for (int64_t s = 0; s < n * k; s++) start[c->moe_sel[s] + 1]++;
    for (int64_t e = 0; e < X; e++) start[e + 1] += start[e];
    for (int64_t s = 0; s < n * k; s++) c->moe_order[start[c->moe_sel[s]]++] = (int32_t)s;
    for (int64_t e = X; e > 0; e--) start[e] = start[e - 1]; /* the fill moved each start to the next one's */
    start[0] = 0;
}

/* Prefill runs each expert once over all the tokens routed to it (gathered into
 * moe_x), so its weights are read once per step and the product can use the
 * many-token kernels; decode is the same with one token. */
void block_ffn_moe(engine *c, const model_layer *l, int64_t n) {
    const model_hparams *hp = &c->m->hp;
    const int64_t E = hp->n_embd, X = hp->n_expert, k = hp->n_expert_used;
    linear(c->pool, &l->moe_router, c->xn, n, c->router, c->act);
    moe_route(c, n);
    const int32_t *start = c->moe_start;

    memset(c->mix, 0, (size_t)(n * E) * sizeof(float));
    for (int64_t e = 0; e < X; e++) {
        const int64_t m = start[e + 1] - start[e];
        if (m == 0) continue;
        const int32_t *slots = c->moe_order + start[e];
        for (int64_t i = 0; i < m; i++) memcpy(c->moe_x + i * E, c->xn + slots[i] / k * E, (size_t)E * sizeof(float));
        tensor g = tensor_expert(&l->moe_gate, e), u = tensor_expert(&l->moe_up, e), d = tensor_expert(&l->moe_down, e);
        swiglu_expert(c, &g, &u, &d, c->moe_x, m, c->ff_out);
        for (int64_t i = 0; i < m; i++) {
            float *y = c->mix + slots[i] / k * E;
            const float *o = c->ff_out + i * E, scale = c->moe_w[slots[i]];
            for (int64_t q = 0; q < E; q++) y[q] += scale * o[q];
        }
    }
    if (l->shexp_gate.name) {
        swiglu_expert(c, &l->shexp_gate, &l->shexp_up, &l->shexp_down, c->xn, n, c->ff_out);
        float *gate = c->moe_w; /* (n) scalar gates; the routing weights are used up */
        if (l->shexp_router.name) linear(c->pool, &l->shexp_router, c->xn, n, gate, c->act);
        for (int64_t t = 0; t < n; t++) {
            const float g = l->shexp_router.name ? ops_sigmoid(gate[t]) : 1.0f;
            float *y = c->mix + t * E;
            const float *o = c->ff_out + t * E;
            for (int64_t q = 0; q < E; q++) y[q] += g * o[q];
        }
    }
}
