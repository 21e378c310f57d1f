/*
 * ctx.c — contexts: the eddy_ctx functions of include/eddy.h. A context is an engine
 * (engine.c) holding one sequence, the simple interface for one stream of tokens.
 */
#include "base/alloc.h"
#include "model/engine.h"

struct eddy_ctx {
    eddy_engine *e;
    eddy_seq *s;
};

void eddy_ctx_free(eddy_ctx *c) {
    if (!c) return;
    eddy_engine_free(c->e); /* frees the sequence too */
    eddy_free(c);
}

eddy_status eddy_ctx_new(const eddy_model *m, const eddy_ctx_params *p, eddy_ctx **out, eddy_error *err) {
    if (!m || !out) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_ctx_new: NULL argument");
    *out = NULL;
    eddy_ctx_params d = {0};
    if (!p) p = &d;
    eddy_engine_params ep = {.n_ctx = p->n_ctx, .n_seq_max = 1, .n_threads = p->n_threads, .n_batch = p->n_batch,
                             .type_k = p->type_k, .type_v = p->type_v, .n_snapshots = p->n_snapshots,
                             .cache_bytes = p->cache_bytes,
                             .cache_dir = p->cache_dir, .cache_dir_bytes = p->cache_dir_bytes, .mtp = p->mtp,
                             .device = p->device, .gpu_layers = p->gpu_layers, .n_verify = p->n_verify,
                             .host_snapshots = p->host_snapshots, .cache_fit = p->cache_fit};
    eddy_ctx *c = eddy_calloc(1, sizeof *c);
    if (!c) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    eddy_status s = eddy_engine_new(m, &ep, &c->e, err);
    if (s == EDDY_OK) s = eddy_seq_new(c->e, &c->s, err);
    if (s != EDDY_OK) {
        eddy_ctx_free(c);
        return s;
    }
    *out = c;
    return EDDY_OK;
}

int64_t eddy_ctx_n_pos(const eddy_ctx *c) { return eddy_seq_n_pos(c->s); }
int64_t eddy_ctx_n_ctx(const eddy_ctx *c) { return eddy_engine_n_ctx(c->e); }
void eddy_ctx_reset(eddy_ctx *c) { eddy_seq_clear(c->s); }
eddy_engine *eddy_ctx_engine(eddy_ctx *c) { return c->e; }
eddy_seq *eddy_ctx_seq(eddy_ctx *c) { return c->s; }

eddy_status eddy_ctx_eval(eddy_ctx *c, const int32_t *tokens, int64_t n, float *logits, int all_logits,
                          eddy_error *err) {
    if (!c) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_ctx_eval: NULL argument");
    return eddy_seq_eval(c->s, tokens, n, logits, all_logits, err);
}
