/*
 * test_seq.c — the helpers of test_seq.h.
 */
#include "test.h"
#include "test_seq.h"

#include <stdlib.h>

#include "ops/vec.h"

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

void tseq_check_decode_argmax(const char *file, eddy_engine_params p) {
    enum { S = 3, STEPS = 3 };
    eddy_model *m = tseq_load(file);
    REQUIRE(m);
    const int64_t V = eddy_model_n_vocab(m);
    p.n_seq_max = S, p.n_ctx = 64;
    eddy_engine *e[2] = {tseq_engine(m, p), tseq_engine(m, p)};
    REQUIRE(e[0] && e[1]);
    eddy_seq *s[2][S];
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < S; j++) REQUIRE(s[k][j] = tseq_new(e[k]));
    test_rng r = test_rng_new();
    int32_t prompt[14], tok[S];
    tseq_rand_ids(&r, prompt, 14, V);
    eddy_seq *owner[2][14];
    int8_t want[14] = {0};
    for (int i = 0; i < 14; i++) /* sequence 0's rows 0..4, 1's 5..6, 2's 7..13 */
        for (int k = 0; k < 2; k++) owner[k][i] = s[k][i < 5 ? 0 : i < 7 ? 1 : 2];
    want[1] = want[4] = want[6] = want[9] = want[13] = 1;
    float *logits = malloc(sizeof *logits * (size_t)(5 * V));
    int32_t ids[5];
    eddy_error err;
    eddy_batch b0 = {14, prompt, owner[0], want}, b1 = {14, prompt, owner[1], want};
    REQUIRE(CHECKF(eddy_engine_decode(e[0], &b0, logits, &err) == EDDY_OK, "%s", err.msg));
    REQUIRE(CHECKF(eddy_engine_decode_argmax(e[1], &b1, ids, &err) == EDDY_OK, "%s", err.msg));
    for (int k = 0; k < 5; k++)
        CHECKF(ids[k] == vec_argmax_ref(logits + k * V, V), "%s: prefill row %d: %d, the logits' argmax %lld", file,
               k, ids[k], (long long)vec_argmax_ref(logits + k * V, V));
    for (int j = 0; j < S; j++) tok[j] = ids[j == 0 ? 1 : j == 1 ? 2 : 4]; /* each one's last row */
    for (int t = 0; t < STEPS; t++) {
        eddy_batch d0 = {S, tok, s[0], NULL}, d1 = {S, tok, s[1], NULL};
        REQUIRE(CHECKF(eddy_engine_decode(e[0], &d0, logits, &err) == EDDY_OK, "%s", err.msg));
        REQUIRE(CHECKF(eddy_engine_decode_argmax(e[1], &d1, tok, &err) == EDDY_OK, "%s", err.msg));
        for (int j = 0; j < S; j++)
            CHECKF(tok[j] == vec_argmax_ref(logits + j * V, V), "%s: step %d, sequence %d: %d, the logits' argmax %lld",
                   file, t, j, tok[j], (long long)vec_argmax_ref(logits + j * V, V));
    }
    for (int j = 0; j < S; j++) CHECK(eddy_seq_logits(s[1][j]) == NULL && eddy_seq_logits(s[0][j]) != NULL);
    CHECK_EQ(eddy_engine_decode_argmax(e[1], &b1, NULL, &err), EDDY_ERR_ARG);
    free(logits);
    for (int k = 0; k < 2; k++) {
        for (int j = 0; j < S; j++) eddy_seq_free(s[k][j]);
        eddy_engine_free(e[k]);
    }
    eddy_model_free(m);
}
