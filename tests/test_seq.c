/*
 * test_seq.c — the helpers of test_seq.h.
 */
#include "test.h"
#include "test_seq.h"

eddy_model *tseq_load(const char *file) {
    eddy_model *m = NULL;
    eddy_error err;
    CHECKF(eddy_model_load(test_data_path(file), &m, &err) == EDDY_OK, "%s: %s", file, err.msg);
    return m;
}

eddy_engine *tseq_engine(const eddy_model *m, eddy_engine_params p) {
    if (p.n_threads == 0) p.n_threads = 2;
    eddy_engine *e = NULL;
    eddy_error err;
    CHECKF(eddy_engine_new(m, &p, &e, &err) == EDDY_OK, "%s", err.msg);
    return e;
}

eddy_seq *tseq_new(eddy_engine *e) {
    eddy_seq *s = NULL;
    eddy_error err;
    CHECKF(eddy_seq_new(e, &s, &err) == EDDY_OK, "%s", err.msg);
    return s;
}

bool tseq_feed(eddy_seq *s, const int32_t *ids, int64_t n, float *out) {
    eddy_error err;
    return CHECKF(eddy_seq_eval(s, ids, n, out, out != NULL, &err) == EDDY_OK, "eval of %lld tokens: %s",
                  (long long)n, err.msg);
}

void tseq_rand_ids(test_rng *r, int32_t *ids, int64_t n, int64_t n_vocab) {
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)test_rng_below(r, (uint32_t)n_vocab);
}
