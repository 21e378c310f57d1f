/*
 * sampler.c — the sampling chain (see sampler.h) and the eddy_sampler_* API.
 *
 * Candidates are (id, logit) pairs in a buffer sized at creation; each step copies
 * the logits in, applies the penalties to the recent tokens only, then narrows the
 * candidate set. Sorting is a partial selection by logit for a small top-k, else a radix
 * sort (a whole 152k vocabulary in a few milliseconds, where qsort took tens). Without
 * penalties, greedy is one vectorized scan (vec_argmax) and a top-k of up to 64 one pass
 * over the logits (vec_top_k): no candidate list of the whole vocabulary. Such a chain
 * may also start from the top-k alone (sampler_sample_top: what eddy_engine_decode_top
 * gives, on a GPU found there).
 */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "ops/vec.h"

typedef struct {
    int32_t id;
    float logit;
} candidate;

/* The largest top-k taken by insertion (select_top's, vec_top_k's): each insertion moves
 * up to k candidates; beyond it a full sort is cheaper */
#define TOP_SCAN_MAX VEC_TOP_MAX
_Static_assert(EDDY_TOP_MAX == VEC_TOP_MAX, "the engine's top and the sampler's are one bound");

struct eddy_sampler {
    eddy_sampler_params p;
    int64_t n_vocab;
    candidate *cand;  /* (n_vocab) */
    candidate *spare; /* (n_vocab) the radix sort's other buffer */
    float *probs;     /* (n_vocab) */
    int32_t *history; /* ring of the last repeat_last_n tokens */
    int64_t hist_len, hist_pos;
    int32_t *counts;  /* (n_vocab) occurrences within the window, for the penalties */
    uint64_t rng;
    int32_t top_ids[TOP_SCAN_MAX]; /* the usual settings' top-k (vec_top_k) */
    float top_vals[TOP_SCAN_MAX];
};

/* ==== Random numbers (splitmix64) ==== */

static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double next_unit(uint64_t *s) { return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0); }

/* ==== Parameters ==== */

eddy_sampler_params eddy_sampler_default_params(void) {
    eddy_sampler_params p = {.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .repeat_penalty = 1.0f,
                             .repeat_last_n = 64, .presence_penalty = 0.0f, .frequency_penalty = 0.0f,
                             .seed = 0x5eed};
    return p;
}

eddy_status eddy_sampler_params_check(const eddy_sampler_params *p, eddy_error *err) {
    if (!(p->temp >= 0 && isfinite(p->temp)))
        return eddy_error_set(err, EDDY_ERR_ARG, "temperature %g must be finite and >= 0", p->temp);
    if (!(p->top_p > 0 && p->top_p <= 1))
        return eddy_error_set(err, EDDY_ERR_ARG, "top-p %g must be in (0, 1]", p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1))
        return eddy_error_set(err, EDDY_ERR_ARG, "min-p %g must be in [0, 1]", p->min_p);
    if (!(p->repeat_penalty > 0 && isfinite(p->repeat_penalty)))
        return eddy_error_set(err, EDDY_ERR_ARG, "repeat penalty %g must be finite and > 0", p->repeat_penalty);
    if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
        return eddy_error_set(err, EDDY_ERR_ARG, "presence and frequency penalties must be finite");
    if (p->repeat_last_n < 0 || p->repeat_last_n > (1 << 20))
        return eddy_error_set(err, EDDY_ERR_ARG, "repeat-last-n %d out of range 0..1048576", p->repeat_last_n);
    return EDDY_OK;
}

/* True when the penalties can change a logit (else the chain may skip them) */
static bool penalized(const eddy_sampler_params *p) {
    return p->repeat_penalty != 1.0f || p->presence_penalty != 0 || p->frequency_penalty != 0;
}

bool eddy_sampler_params_greedy(const eddy_sampler_params *p) { return p->temp <= 0 && !penalized(p); }

/* ==== Life cycle ==== */

eddy_status sampler_new(sampler **out, const eddy_sampler_params *p, int64_t n_vocab, eddy_error *err) {
    *out = NULL;
    eddy_status st = eddy_sampler_params_check(p, err);
    if (st != EDDY_OK) return st;
    if (n_vocab <= 0 || n_vocab > INT32_MAX) return eddy_error_set(err, EDDY_ERR_ARG, "vocabulary size %lld", (long long)n_vocab);
    sampler *s = eddy_calloc(1, sizeof *s);
    if (!s) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->cand = eddy_malloc((size_t)n_vocab * sizeof *s->cand);
    s->spare = eddy_malloc((size_t)n_vocab * sizeof *s->spare);
    s->probs = eddy_malloc((size_t)n_vocab * sizeof *s->probs);
    s->counts = eddy_calloc((size_t)n_vocab, sizeof *s->counts);
    s->history = eddy_malloc((size_t)(p->repeat_last_n ? p->repeat_last_n : 1) * sizeof *s->history);
    if (!s->cand || !s->spare || !s->probs || !s->counts || !s->history) {
        sampler_free(s);
        return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory for a sampler over %lld tokens", (long long)n_vocab);
    }
    sampler_reset(s);
    *out = s;
    return EDDY_OK;
}

void sampler_free(sampler *s) {
    if (!s) return;
    eddy_free(s->cand);
    eddy_free(s->spare);
    eddy_free(s->probs);
    eddy_free(s->counts);
    eddy_free(s->history);
    eddy_free(s);
}

void sampler_reset(sampler *s) {
    s->hist_len = s->hist_pos = 0;
    memset(s->counts, 0, (size_t)s->n_vocab * sizeof *s->counts);
    s->rng = s->p.seed;
}

int64_t sampler_n_vocab(const sampler *s) { return s->n_vocab; }
const eddy_sampler_params *sampler_params(const sampler *s) { return &s->p; }

void sampler_accept(sampler *s, int32_t token) {
    if (s->p.repeat_last_n == 0 || token < 0 || token >= s->n_vocab) return;
    if (s->hist_len == s->p.repeat_last_n) { /* the oldest token leaves the window */
        s->counts[s->history[s->hist_pos]]--;
    } else {
        s->hist_len++;
    }
    s->history[s->hist_pos] = token;
    s->counts[token]++;
    s->hist_pos = (s->hist_pos + 1) % s->p.repeat_last_n;
}

/* ==== State ==== */

size_t sampler_state_bytes(const sampler *s) { return 16 + 4 * (size_t)s->hist_len; }

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void sampler_state_write(const sampler *s, uint8_t *out) {
    put_u64(out, s->rng);
    put_u64(out + 8, (uint64_t)s->hist_len);
    /* oldest first: the ring starts at hist_pos once full, at 0 before */
    const int64_t start = s->hist_len == s->p.repeat_last_n ? s->hist_pos : 0;
    for (int64_t i = 0; i < s->hist_len; i++) {
        const uint32_t t = (uint32_t)s->history[(start + i) % (s->p.repeat_last_n > 0 ? s->p.repeat_last_n : 1)];
        for (int b = 0; b < 4; b++) out[16 + 4 * i + b] = (uint8_t)(t >> (8 * b));
    }
}

bool sampler_state_valid(const sampler *s, const uint8_t *in, size_t n) {
    if (n < 16) return false;
    const uint64_t count = get_u64(in + 8);
    if (count > (n - 16) / 4 || n != 16 + 4 * count) return false;
    for (uint64_t i = 0; i < count; i++) {
        const int32_t t = (int32_t)((uint32_t)in[16 + 4 * i] | (uint32_t)in[17 + 4 * i] << 8 |
                                    (uint32_t)in[18 + 4 * i] << 16 | (uint32_t)in[19 + 4 * i] << 24);
        if (t < 0 || t >= s->n_vocab) return false;
    }
    return true;
}

bool sampler_state_read(sampler *s, const uint8_t *in, size_t n) {
    if (!sampler_state_valid(s, in, n)) return false;
    const uint64_t count = get_u64(in + 8);
    sampler_reset(s);
    s->rng = get_u64(in);
    for (uint64_t i = 0; i < count; i++)
        sampler_accept(s, (int32_t)((uint32_t)in[16 + 4 * i] | (uint32_t)in[17 + 4 * i] << 8 |
                                    (uint32_t)in[18 + 4 * i] << 16 | (uint32_t)in[19 + 4 * i] << 24));
    return true;
}

/* ==== The chain ==== */

static int by_logit_desc(const void *a, const void *b) {
    float x = ((const candidate *)a)->logit, y = ((const candidate *)b)->logit;
    if (x != y) return x < y ? 1 : -1;
    return ((const candidate *)a)->id - ((const candidate *)b)->id; /* ties: lower id first, deterministic */
}

/* A key whose ascending order is by_logit_desc's order of logits (none NaN): the float's
 * bits made to sort as unsigned integers, then reversed; -0 and +0 alike. key_logit
 * inverts it (giving +0 for both zeros). */
static uint32_t desc_key(float f) {
    uint32_t u;
    if (f == 0.0f) f = 0.0f;
    memcpy(&u, &f, sizeof u);
    return u & 0x80000000u ? u : ~u & 0x7fffffffu;
}
static float key_logit(uint32_t k) {
    const uint32_t u = k & 0x80000000u ? k : ~k & 0x7fffffffu;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Sorts c[0, n) (in id order) as by_logit_desc does: a stable least-significant-digit
 * radix sort on desc_key, 8 bits a pass (the four histograms counted in one pass first;
 * a pass whose digit is the same for every candidate skipped), so equal logits keep their
 * id order. The keys stand in the logits' place meanwhile. spare: n candidates. */
typedef struct {
    int32_t id;
    uint32_t key;
} keyed;
static void radix_sort(candidate *c, int64_t n, candidate *spare) {
    _Static_assert(sizeof(keyed) == sizeof(candidate), "a key takes a logit's place");
    keyed *from = (keyed *)c, *to = (keyed *)spare;
    int64_t count[4][256] = {{0}};
    for (int64_t i = 0; i < n; i++) {
        const uint32_t k = desc_key(c[i].logit);
        from[i].key = k;
        for (int d = 0; d < 4; d++) count[d][k >> (8 * d) & 255]++;
    }
    for (int d = 0; d < 4; d++) {
        int64_t *cd = count[d];
        if (cd[from[0].key >> (8 * d) & 255] == n) continue;
        for (int64_t v = 0, at = 0; v < 256; v++) {
            const int64_t k = cd[v];
            cd[v] = at, at += k;
        }
        for (int64_t i = 0; i < n; i++) to[cd[from[i].key >> (8 * d) & 255]++] = from[i];
        keyed *t = from;
        from = to, to = t;
    }
    for (int64_t i = 0; i < n; i++) c[i] = (candidate){from[i].id, key_logit(from[i].key)};
}

/* Moves the k best candidates (by logit) to the front, sorted (c in id order). */
static void select_top(candidate *c, int64_t n, int64_t k, candidate *spare) {
    if (k > TOP_SCAN_MAX) {
        radix_sort(c, n, spare);
        return;
    }
    /* partial selection: keep a sorted prefix of k, insert better ones */
    qsort(c, (size_t)k, sizeof *c, by_logit_desc);
    for (int64_t i = k; i < n; i++) {
        if (by_logit_desc(&c[i], &c[k - 1]) >= 0) continue;
        candidate x = c[i];
        int64_t j = k - 1;
        while (j > 0 && by_logit_desc(&x, &c[j - 1]) < 0) c[j] = c[j - 1], j--;
        c[j] = x;
    }
}

/* probs[i] = softmax(c[i].logit / temp) over the first n candidates (sorted, best first). */
static void softmax_of(const candidate *c, float *probs, int64_t n, float temp) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += probs[i] = expf((c[i].logit - c[0].logit) / temp);
    for (int64_t i = 0; i < n; i++) probs[i] = (float)(probs[i] / sum);
}

/* The chain with nothing to choose from (every logit NaN or -inf): token 0 rather than
 * undefined behaviour */
static int64_t no_candidates(sampler *s) {
    s->cand[0] = (candidate){0, 0.0f};
    s->probs[0] = 1.0f;
    return 1;
}

/* The usual settings (temperature > 0, no penalties, a top-k of up to TOP_SCAN_MAX): the
 * chain's candidates are the top-k of the logits alone, so it may start from them */
static bool starts_at_top(const eddy_sampler_params *p) {
    return p->temp > 0 && !penalized(p) && p->top_k > 0 && p->top_k <= TOP_SCAN_MAX;
}

/* The chain after its top-k, on s->cand[0, keep) (best first): top-p, min-p and the
 * temperature. The candidates it keeps are s->cand[0, returned), best first, with their
 * probabilities in s->probs[0, returned). */
static int64_t narrow(sampler *s, int64_t keep) {
    const eddy_sampler_params *p = &s->p;
    if (keep == 0) return no_candidates(s);
    if (p->top_p < 1.0f || p->min_p > 0.0f) {
        softmax_of(s->cand, s->probs, keep, 1.0f);
        if (p->top_p < 1.0f) { /* smallest prefix whose mass reaches top_p */
            double cum = 0;
            for (int64_t i = 0; i < keep; i++) {
                cum += s->probs[i];
                if (cum >= p->top_p) {
                    keep = i + 1;
                    break;
                }
            }
        }
        if (p->min_p > 0.0f) { /* drop candidates below min_p times the best's probability */
            const float floor = p->min_p * s->probs[0];
            int64_t i = 1;
            while (i < keep && s->probs[i] >= floor) i++;
            keep = i;
        }
    }
    softmax_of(s->cand, s->probs, keep, p->temp);
    return keep;
}

/* The k best of candidates given as ids and logits (best first) into s->cand */
static int64_t take_top(sampler *s, const int32_t *ids, const float *logits, int64_t k) {
    for (int64_t i = 0; i < k; i++) s->cand[i] = (candidate){ids[i], logits[i]};
    return k;
}

/* Runs the chain on logits: the candidates it keeps are s->cand[0, keep), best first,
 * with their probabilities in s->probs[0, keep) (greedy: the argmax alone, 1). */
static int64_t chain(sampler *s, const float *logits) {
    const eddy_sampler_params *p = &s->p;
    if (starts_at_top(p)) { /* the top-k straight from the logits: no candidate list of the whole vocabulary */
        const int64_t k = vec_top_k(logits, s->n_vocab, p->top_k, s->top_ids, s->top_vals);
        return narrow(s, take_top(s, s->top_ids, s->top_vals, k));
    }
    int64_t n = 0;
    for (int64_t i = 0; i < s->n_vocab; i++) {
        float l = logits[i];
        if (isnan(l) || l == -INFINITY) continue; /* never sampled */
        if (s->counts[i]) {
            if (p->repeat_penalty != 1.0f) l = l > 0 ? l / p->repeat_penalty : l * p->repeat_penalty;
            l -= (float)s->counts[i] * p->frequency_penalty + p->presence_penalty;
        }
        s->cand[n].id = (int32_t)i;
        s->cand[n].logit = l;
        n++;
    }
    if (n == 0) return no_candidates(s);
    if (p->temp <= 0) { /* greedy */
        int64_t best = 0;
        for (int64_t i = 1; i < n; i++)
            if (s->cand[i].logit > s->cand[best].logit) best = i;
        s->cand[0] = s->cand[best];
        s->probs[0] = 1.0f;
        return 1;
    }
    int64_t keep = n;
    if (p->top_k > 0 && p->top_k < keep) keep = p->top_k;
    select_top(s->cand, n, keep, s->spare);
    return narrow(s, keep);
}

/* A token drawn from the chain's candidates s->cand[0, keep) and their probabilities:
 * one draw of the generator per token whenever the temperature is above 0 */
static int32_t draw_kept(sampler *s, int64_t keep) {
    if (s->p.temp <= 0 || keep == 1) {
        if (s->p.temp > 0) next_unit(&s->rng); /* one draw per sampled token, whatever the chain kept */
        return s->cand[0].id;
    }
    double r = next_unit(&s->rng), cum = 0;
    for (int64_t i = 0; i < keep; i++) {
        cum += s->probs[i];
        if (r < cum) return s->cand[i].id;
    }
    return s->cand[keep - 1].id; /* rounding left r above the total */
}

int32_t eddy_sampler_params_top(const eddy_sampler_params *p) {
    return eddy_sampler_params_greedy(p) ? 1 : starts_at_top(p) ? p->top_k : 0;
}

int32_t sampler_sample_top(sampler *s, const int32_t *ids, const float *logits, int32_t n) {
    const eddy_sampler_params *p = &s->p;
    if (eddy_sampler_params_greedy(p)) return n > 0 ? ids[0] : 0;
    int64_t k = n > 0 ? n : 0;
    if (k > s->n_vocab) k = s->n_vocab;
    if (p->top_k > 0 && p->top_k < k) k = p->top_k;
    return draw_kept(s, narrow(s, take_top(s, ids, logits, k)));
}

int32_t sampler_sample(sampler *s, const float *logits) {
    if (eddy_sampler_params_greedy(&s->p)) {
        /* greedy without penalties: chain's choice (the first largest logit, neither NaN nor
         * -inf; token 0 when there is none) by a vectorized scan instead of a candidate list
         * of the whole vocabulary, a large part of a token's time when the GPU makes it */
        return (int32_t)vec_greedy(logits, s->n_vocab);
    }
    return draw_kept(s, chain(s, logits));
}

void sampler_probs(sampler *s, const float *logits, float *probs) {
    const int64_t keep = chain(s, logits);
    memset(probs, 0, (size_t)s->n_vocab * sizeof *probs);
    for (int64_t i = 0; i < keep; i++) probs[s->cand[i].id] = s->probs[i];
}

double sampler_uniform(sampler *s) { return next_unit(&s->rng); }

int32_t sampler_draw(sampler *s, const float *probs) {
    double total = 0;
    int32_t last = -1;
    for (int64_t i = 0; i < s->n_vocab; i++)
        if (probs[i] > 0) total += probs[i], last = (int32_t)i;
    double r = next_unit(&s->rng) * total, cum = 0;
    if (last < 0) return 0;
    for (int64_t i = 0; i < s->n_vocab; i++) {
        if (probs[i] <= 0) continue;
        cum += probs[i];
        if (r < cum) return (int32_t)i;
    }
    return last; /* rounding left r above the total */
}

/* ==== Public API ==== */

eddy_status eddy_sampler_new(const eddy_sampler_params *p, int64_t n_vocab, eddy_sampler **out, eddy_error *err) {
    if (!p || !out) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_sampler_new: NULL argument");
    return sampler_new(out, p, n_vocab, err);
}
void eddy_sampler_free(eddy_sampler *s) { sampler_free(s); }
int32_t eddy_sampler_sample(eddy_sampler *s, const float *logits) { return sampler_sample(s, logits); }
int32_t eddy_top_remove(eddy_token *ids, float *logits, int32_t n, const eddy_token *banned, int64_t n_banned) {
    int32_t kept = 0;
    for (int32_t i = 0; i < n; i++) {
        bool ban = false;
        for (int64_t j = 0; j < n_banned && !ban; j++) ban = ids[i] == banned[j];
        if (!ban) ids[kept] = ids[i], logits[kept++] = logits[i];
    }
    return kept;
}

int32_t eddy_sampler_params_top_banned(const eddy_sampler_params *p, int64_t n_banned) {
    const int32_t k = eddy_sampler_params_top(p);
    return k > 0 && n_banned >= 0 && k + n_banned <= EDDY_TOP_MAX ? k + (int32_t)n_banned : 0;
}

int32_t eddy_sampler_sample_top(eddy_sampler *s, const eddy_token *ids, const float *logits, int32_t n) {
    return sampler_sample_top(s, ids, logits, n);
}
void eddy_sampler_accept(eddy_sampler *s, int32_t token) { sampler_accept(s, token); }
void eddy_sampler_reset(eddy_sampler *s) { sampler_reset(s); }
