/*
 * bench_model.c — `eddy bench -m`: a model's prefill and decode speed, measured as
 * llama-bench measures them, and decode against the machine's read bandwidth
 * measured in the same run.
 *
 * Owns: the two tests (pp: n_prompt random tokens in one evaluation from an empty
 * sequence, logits of the last token; tg: n_gen single-token evaluations from an
 * empty sequence, each feeding the previous step's argmax; with n_depth, from a
 * sequence holding that many random tokens instead), their warm-up and timed
 * repetitions, the statistics (median, mean, sample standard deviation of tokens/s),
 * the peak resident set, the bandwidth probe and the roofline fraction.
 * Does not own: the count of bytes per decode step (src/model/footprint.c) or the
 * output (cli/cmd_bench.c).
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "base/alloc.h"
#include "base/timer.h"
#include "bench.h"
#include "cuda/cuda.h"
#include "model/engine.h"
#include "ops/vec.h"

/* ==== Inputs ==== */

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

int32_t bench_random_token(uint64_t *s, int64_t n_vocab, const eddy_vocab *v) {
    int64_t n = n_vocab;
    if (v && eddy_vocab_n_tokens(v) > 0 && eddy_vocab_n_tokens(v) < n) n = eddy_vocab_n_tokens(v);
    int32_t t = 0;
    for (int tries = 0; tries < 64; tries++) {
        t = (int32_t)(rng_next(s) % (uint64_t)n);
        if (!v || !(eddy_vocab_is_control(v, t) || eddy_vocab_is_eog(v, t))) break;
    }
    return t;
}

int32_t bench_argmax(const float *x, int64_t n) { return (int32_t)vec_argmax(x, n); }

/* ==== The tests ==== */

/* Back to where each test starts: the snapshot at depth, or an empty sequence. */
static eddy_status rewind_to(eddy_ctx *c, const eddy_snapshot *depth, eddy_error *err) {
    if (depth) return eddy_seq_restore(eddy_ctx_seq(c), depth, err);
    eddy_ctx_reset(c);
    return EDDY_OK;
}

/* pp: the prompt as one evaluation from the start (rewind_to); *secs its time. */
static eddy_status run_pp(eddy_ctx *c, const eddy_snapshot *depth, const int32_t *prompt, int64_t n, float *logits,
                          double *secs, eddy_error *err) {
    eddy_status s = rewind_to(c, depth, err);
    if (s != EDDY_OK) return s;
    double t0 = timer_s();
    s = eddy_ctx_eval(c, prompt, n, logits, 0, err);
    *secs = timer_s() - t0;
    return s;
}

/* tg: n single-token steps from the start (rewind_to), each feeding the last argmax. */
static eddy_status run_tg(eddy_ctx *c, const eddy_snapshot *depth, int32_t first, int64_t n, float *logits,
                          double *secs, eddy_error *err) {
    const int64_t n_vocab = eddy_engine_model(eddy_ctx_engine(c))->hp.n_vocab;
    int32_t tok = first;
    eddy_status s = rewind_to(c, depth, err);
    double t0 = timer_s();
    for (int64_t i = 0; i < n && s == EDDY_OK; i++) {
        s = eddy_ctx_eval(c, &tok, 1, logits, 0, err);
        tok = bench_argmax(logits, n_vocab);
    }
    *secs = timer_s() - t0;
    return s;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

eddy_bench_rate bench_rate_stats(double *rates, int n) {
    eddy_bench_rate r = {0, 0, 0};
    if (n <= 0) return r;
    qsort(rates, (size_t)n, sizeof *rates, cmp_double);
    r.median = n % 2 ? rates[n / 2] : 0.5 * (rates[n / 2 - 1] + rates[n / 2]);
    for (int i = 0; i < n; i++) r.mean += rates[i];
    r.mean /= n;
    if (n > 1) {
        double ss = 0;
        for (int i = 0; i < n; i++) ss += (rates[i] - r.mean) * (rates[i] - r.mean);
        r.sd = sqrt(ss / (n - 1));
    }
    return r;
}

static double tokens_per_s(int64_t n, double secs) { return (double)n / (secs > 1e-9 ? secs : 1e-9); }

/* ==== Peak memory ==== */

/* The process's peak resident set in bytes (ru_maxrss: KiB on Linux, bytes on macOS). */
static double peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
#if defined(__APPLE__)
    return (double)ru.ru_maxrss;
#else
    return (double)ru.ru_maxrss * 1024.0;
#endif
}

/* ==== Entry ==== */

eddy_status eddy_bench_model(const eddy_model *m, const eddy_bench_params *p, eddy_bench_result *r,
                             eddy_error *err) {
    if (!m || !p || !r) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_bench_model: NULL argument");
    const int64_t max_tokens = (int64_t)1 << 20;
    if (p->n_prompt < 0 || p->n_gen < 0 || p->n_depth < 0 || p->n_prompt > max_tokens || p->n_gen > max_tokens ||
        p->n_depth > max_tokens)
        return eddy_error_set(err, EDDY_ERR_ARG, "bench: token counts %" PRId64 ", %" PRId64 " and depth %" PRId64
                              " must lie in 0..%" PRId64, p->n_prompt, p->n_gen, p->n_depth, max_tokens);
    if (p->n_prompt == 0 && p->n_gen == 0)
        return eddy_error_set(err, EDDY_ERR_ARG, "bench: nothing to run: the prefill and decode tests are both 0 tokens");
    if (p->n_reps < 0 || p->n_reps > 1000)
        return eddy_error_set(err, EDDY_ERR_ARG, "bench: %d repetitions out of range 1..1000", p->n_reps);
    const int reps = p->n_reps > 0 ? p->n_reps : 5;
    const int64_t n_vocab = m->hp.n_vocab;

    eddy_ctx_params cp = {.n_ctx = p->n_depth + p->n_prompt + p->n_gen,
                          .n_threads = p->n_threads, .n_batch = p->n_batch, .n_snapshots = p->n_depth > 0,
                          .device = p->device, .gpu_layers = p->gpu_layers};
    eddy_ctx *c = NULL;
    eddy_snapshot *depth = NULL;
    eddy_status s = eddy_ctx_new(m, &cp, &c, err);
    if (s != EDDY_OK) return s;
    /* the prompt's tokens, then the depth's */
    int32_t *prompt = eddy_malloc((size_t)(p->n_prompt + p->n_depth > 0 ? p->n_prompt + p->n_depth : 1) * sizeof *prompt);
    float *logits = eddy_malloc((size_t)n_vocab * sizeof *logits);
    double *rates = eddy_malloc((size_t)reps * sizeof *rates);
    if (!prompt || !logits || !rates) {
        s = eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
        goto done;
    }
    uint64_t rng = p->seed * 0x9e3779b97f4a7c15ull + 1;
    if (!rng) rng = 1; /* xorshift needs a non-zero state */
    for (int64_t i = 0; i < p->n_prompt; i++) prompt[i] = bench_random_token(&rng, n_vocab, p->vocab);
    const int32_t first = bench_random_token(&rng, n_vocab, p->vocab);
    if (p->n_depth > 0) {
        int32_t *deep = prompt + p->n_prompt;
        for (int64_t i = 0; i < p->n_depth; i++) deep[i] = bench_random_token(&rng, n_vocab, p->vocab);
        s = eddy_ctx_eval(c, deep, p->n_depth, NULL, 0, err);
        if (s == EDDY_OK) s = eddy_seq_snapshot(eddy_ctx_seq(c), &depth, err);
        if (s != EDDY_OK) goto done;
    }

    *r = (eddy_bench_result){.n_threads = eddy_engine_n_threads(eddy_ctx_engine(c)),
                             .n_batch = eddy_engine_n_batch(eddy_ctx_engine(c))};
    snprintf(r->device, sizeof r->device, "%s", eddy_engine_device_name(eddy_ctx_engine(c)));
    double secs;
    if (p->n_prompt > 0) {
        s = run_pp(c, depth, prompt, p->n_prompt, logits, &secs, err); /* warm-up */
        for (int i = 0; i < reps && s == EDDY_OK; i++) {
            s = run_pp(c, depth, prompt, p->n_prompt, logits, &secs, err);
            rates[i] = tokens_per_s(p->n_prompt, secs);
        }
        if (s != EDDY_OK) goto done;
        r->pp = bench_rate_stats(rates, reps);
    }
    if (p->n_gen > 0) {
        s = run_tg(c, depth, first, p->n_gen, logits, &secs, err); /* warm-up */
        for (int i = 0; i < reps && s == EDDY_OK; i++) {
            s = run_tg(c, depth, first, p->n_gen, logits, &secs, err);
            rates[i] = tokens_per_s(p->n_gen, secs);
        }
        if (s != EDDY_OK) goto done;
        r->tg = bench_rate_stats(rates, reps);
    }

    /* the peak resident set first: the bandwidth probe's buffer would dwarf it */
    r->peak_rss = peak_rss_bytes();
    r->read_bw = p->device == EDDY_DEVICE_CUDA ? cuda_copy_bandwidth()
                                               : bench_measure_read_bw(eddy_ctx_engine(c)->pool, r->n_threads);
    if (r->read_bw <= 0) {
        s = eddy_error_set(err, EDDY_ERR_NOMEM, "bench: cannot allocate the 1 GiB buffer of the bandwidth probe");
        goto done;
    }
    eddy_model_decode_bytes(m, &r->bytes);
    /* the benchmark's context keeps the default F16 cache: half the f32 rows' bytes */
    r->bytes.kv_per_pos /= 2;
    /* step i (0-based) of the tg test holds i + 1 positions, the one it adds included;
     * without a tg test, the first step's */
    r->kv_positions = (double)p->n_depth + (p->n_gen > 0 ? 0.5 * (double)(p->n_gen + 1) : 1.0);
    r->bytes_per_token = (double)r->bytes.weights + (double)r->bytes.state + (double)r->bytes.kv_per_pos * r->kv_positions;
    const bool split = eddy_ctx_engine(c)->gpu_from > 0; /* two memories: no one bandwidth bounds it */
    r->roofline = split ? 0 : r->tg.median * r->bytes_per_token / r->read_bw;
done:
    eddy_snapshot_free(depth);
    eddy_free(rates);
    eddy_free(logits);
    eddy_free(prompt);
    eddy_ctx_free(c);
    return s;
}
