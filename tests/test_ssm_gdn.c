/*
 * test_ssm_gdn.c — the gated delta rule (ssm/gdn.h): every variant and ISA against
 * the sequential scalar oracle gdn_scan_ref over a table of shapes (head dims
 * 32..256, T from 1 to 4096, 1..8 sequences, strided rows, n_v_heads > n_k_heads in
 * both head mappings), a long run with extreme gates, and golden outputs of fla's
 * and transformers' reference implementations.
 *
 * Error bounds (normalized MSE against gdn_scan_ref, float32 throughout):
 *   step, scan, verify:  1e-11 — the same recurrence, sums in another order
 *                        (measured worst 2e-13). A decode step's outputs are
 *                        normalized by at least 1e-2 rms: one head's output can
 *                        cancel to ~1e-4 (q nearly orthogonal to k under a strong
 *                        decay), which made 1 seed in 200 fail on rounding alone.
 *   chunked:             1e-10 — the UT-transform algebra reorders every sum and
 *                        solves a triangular system per chunk (measured worst
 *                        2e-13, extreme gates included).
 *   golden files:        1e-10 — an independent float32 reference (torch; measured
 *                        worst 2e-13).
 */
#include "base/alloc.h"
#include "ssm/gdn.h"
#include "test_ssm.h"

#define BOUND_RECURRENT 1e-11
#define OUTPUT_FLOOR 1e-2
#define BOUND_CHUNKED 1e-10
/* Extreme gates can decay the whole state to ~1e-36 over a long sequence. Products
 * of such values with decays down to e^-30 fall into the subnormal range, where a
 * float keeps fewer than 24 bits, and the reference and a kernel that orders its
 * decays differently then disagree in relative terms while agreeing to ~1e-37
 * absolute. Errors in those cases are measured against at least this rms, far below
 * the 1e-6..1e4 values a wrong kernel would get wrong. */
#define EXTREME_FLOOR 1e-24
#define BOUND_GOLDEN 1e-10

/* ==== A case: R rows of strided inputs ==== */

typedef enum { GATES_NORMAL, GATES_EXTREME } gate_kind;

typedef struct {
    gdn_params p;
    int64_t R;
    float *qkv; /* (R, row): q at 0, k at qk_off, v at v_off, with gaps */
    float *gb;  /* (R, nv + 5): g at 0, beta at nv + 2 */
    float *o_ref, *o_got;
    int64_t row, k_off, v_off, gb_stride, o_stride;
    uint64_t seed;
} gcase;

static void l2norm_rows(float *x, int64_t n_heads, int64_t d) {
    for (int64_t h = 0; h < n_heads; h++) {
        double ss = 0;
        for (int64_t i = 0; i < d; i++) ss += (double)x[h * d + i] * x[h * d + i];
        float s = (float)(1.0 / sqrt(ss + 1e-6));
        for (int64_t i = 0; i < d; i++) x[h * d + i] *= s;
    }
}

static void fill_gates(test_rng *rng, gcase *c, gate_kind kind) {
    const int64_t nv = c->p.n_v_heads;
    for (int64_t r = 0; r < c->R; r++) {
        float *g = c->gb + r * c->gb_stride, *beta = g + nv + 2;
        for (int64_t h = 0; h < nv; h++) {
            if (kind == GATES_NORMAL) {
                /* g = -A softplus(x) with A in (0.01, 16): mostly mild decays, some strong */
                float A = expf(test_rng_uniform(rng, -4.6f, 2.77f)), x = test_rng_normal(rng);
                g[h] = -A * (x > 20 ? x : log1pf(expf(x)));
                beta[h] = 1.0f / (1.0f + expf(-test_rng_normal(rng)));
            } else {
                static const float gs[] = {-30.0f, 0.0f, -1e-4f, -5.0f};
                static const float bs[] = {0.0f, 1.0f, 0.5f, 1.0f};
                g[h] = gs[test_rng_below(rng, 4)];
                beta[h] = bs[test_rng_below(rng, 4)];
            }
        }
    }
}

static bool make_case(test_rng *rng, gcase *c, gdn_params p, int64_t R, gate_kind kind) {
    memset(c, 0, sizeof *c);
    c->p = p;
    c->R = R;
    c->seed = test_rng_u64(rng);
    test_rng r = {c->seed};
    int64_t qn = p.n_k_heads * p.d_k, vn = p.n_v_heads * p.d_v;
    c->k_off = qn + 3;
    c->v_off = c->k_off + qn + 5;
    c->row = c->v_off + vn + 1;
    c->gb_stride = p.n_v_heads + 5 + p.n_v_heads;
    c->o_stride = vn + 7;
    c->qkv = ssm_test_alloc(R * c->row);
    c->gb = ssm_test_alloc(R * c->gb_stride);
    c->o_ref = ssm_test_alloc(R * c->o_stride);
    c->o_got = ssm_test_alloc(R * c->o_stride);
    if (!c->qkv || !c->gb || !c->o_ref || !c->o_got) return false;
    float vscale = 1.0f;
    for (int64_t t = 0; t < R; t++) {
        float *row = c->qkv + t * c->row;
        ssm_test_normal(&r, row, qn, 1.0f);
        ssm_test_normal(&r, row + c->k_off, qn, 1.0f);
        l2norm_rows(row, p.n_k_heads, p.d_k);
        l2norm_rows(row + c->k_off, p.n_k_heads, p.d_k);
        if (kind == GATES_EXTREME) { /* huge and tiny values, per token */
            static const float mags[] = {1e-6f, 1.0f, 1e4f, 1e-3f};
            vscale = mags[test_rng_below(&r, 4)];
        }
        ssm_test_normal(&r, row + c->v_off, vn, vscale);
    }
    fill_gates(&r, c, kind);
    return true;
}

static void free_case(gcase *c) {
    free(c->qkv), free(c->gb), free(c->o_ref), free(c->o_got);
}

static gdn_rows rows_of(const gcase *c, float *o) {
    gdn_rows r = {
        .q = c->qkv, .k = c->qkv + c->k_off, .v = c->qkv + c->v_off,
        .g = c->gb, .beta = c->gb + c->p.n_v_heads + 2,
        .q_stride = c->row, .k_stride = c->row, .v_stride = c->row,
        .g_stride = c->gb_stride, .beta_stride = c->gb_stride,
        .o = o, .o_stride = c->o_stride,
    };
    return r;
}

static void random_state(test_rng *rng, float *s, int64_t n) { ssm_test_normal(rng, s, n, 0.3f); }

static gdn_params params(int64_t nk, int64_t nv, int64_t dk, int64_t dv, gdn_head_map map) {
    gdn_params p = {nk, nv, dk, dv, map, 1.0f / sqrtf((float)dk)};
    return p;
}

static const char *map_name(gdn_head_map m) { return m == GDN_KHEAD_MOD ? "mod" : "div"; }

/* ==== Decode step ==== */

TEST(gdn_step_matches_ref) {
    static const struct {
        int64_t nk, nv, dk, dv, n_seq;
    } shapes[] = {
        {1, 1, 32, 32, 1},  {2, 4, 64, 64, 3},   {1, 2, 128, 128, 2}, {1, 1, 256, 256, 1},
        {2, 6, 32, 64, 8},  {1, 1, 128, 32, 5},  {4, 8, 32, 32, 4},   {1, 3, 17, 40, 2},
        {2, 4, 128, 128, 6},
    };
    threadpool *pool = NULL;
    REQUIRE(pool_create(&pool, 3, NULL) == EDDY_OK);
    test_rng rng = test_rng_new();
    isa_level isas[ISA_COUNT];
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int map = 0; map < 2; map++) {
            gdn_params p = params(shapes[si].nk, shapes[si].nv, shapes[si].dk, shapes[si].dv, (gdn_head_map)map);
            int64_t n_seq = shapes[si].n_seq, n_slots = 2 * n_seq + 1, ns = gdn_state_floats(&p);
            if (p.n_k_heads == p.n_v_heads && map == 1) continue; /* the mapping cannot matter */
            int n_isa = ssm_test_isas_for(isas, n_seq * ns <= 65536);
            gcase c;
            REQUIRE(make_case(&rng, &c, p, n_seq, GATES_NORMAL));
            int64_t slot[8];
            for (int64_t s = 0; s < n_seq; s++) slot[s] = n_slots - 1 - 2 * s; /* scattered, reversed */
            float *s0 = ssm_test_alloc(n_slots * ns), *sr = ssm_test_alloc(n_slots * ns), *sg = ssm_test_alloc(n_slots * ns);
            REQUIRE(s0 && sr && sg);
            random_state(&rng, s0, n_slots * ns);
            memcpy(sr, s0, (size_t)(n_slots * ns) * sizeof(float));
            gdn_rows rr = rows_of(&c, c.o_ref);
            gdn_step_ref(&p, n_seq, &rr, sr, slot);
            for (int ii = 0; ii < n_isa; ii++) {
                memcpy(sg, s0, (size_t)(n_slots * ns) * sizeof(float));
                gdn_rows rg = rows_of(&c, c.o_got);
                gdn_step_isa(isas[ii], pool, &p, n_seq, &rg, sg, slot);
                char what[160];
                snprintf(what, sizeof what, "step %s nk=%lld nv=%lld dk=%lld dv=%lld n_seq=%lld map=%s seed=%llu",
                         isa_name(isas[ii]), (long long)p.n_k_heads, (long long)p.n_v_heads, (long long)p.d_k,
                         (long long)p.d_v, (long long)n_seq, map_name(p.head_map), (unsigned long long)c.seed);
                /* One token's output per head is o = scale S'ᵀq, about 0.3·scale·|q| = 0.02–0.05
                 * an element here; with a strong decay it is (q·k)βv, which cancels when q ⟂ k.
                 * Errors are measured against at least OUTPUT_FLOOR rms: the bound then allows
                 * 3e-8 rms, some 1e5 times below what a wrong kernel gives. */
                CLOSE_ROWS_FLOOR(what, c.o_got, c.o_ref, n_seq, p.n_v_heads * p.d_v, c.o_stride, BOUND_RECURRENT,
                                 OUTPUT_FLOOR);
                CLOSE(what, sg, sr, n_slots * ns, BOUND_RECURRENT); /* includes the untouched slots */
            }
            free(s0), free(sr), free(sg);
            free_case(&c);
        }
    pool_destroy(pool);
}

/* ==== Scan and chunked prefill against the oracle ==== */

typedef struct {
    int64_t nk, nv, dk, dv, T;
    int maps; /* 2: both head mappings; 1: the one matching the shape's index parity */
} seq_shape;

static const seq_shape seq_shapes[] = {
    /* every T of the table at head dim 32, two value heads per key head */
    {1, 2, 32, 32, 1, 2}, {1, 2, 32, 32, 2, 2}, {1, 2, 32, 32, 7, 2}, {1, 2, 32, 32, 63, 2}, {1, 2, 32, 32, 64, 2},
    {1, 2, 32, 32, 65, 2}, {1, 2, 32, 32, 257, 2}, {1, 2, 32, 32, 1000, 1}, {1, 1, 32, 32, 4096, 1},
    /* head dim 64 and 128 over the chunk edges */
    {2, 4, 64, 64, 1, 2}, {2, 4, 64, 64, 7, 2}, {2, 4, 64, 64, 63, 1}, {2, 4, 64, 64, 65, 1}, {1, 2, 64, 64, 257, 1},
    {1, 2, 128, 128, 2, 2}, {1, 2, 128, 128, 64, 1}, {1, 1, 128, 128, 130, 1},
    /* head dim 256, unequal d_k / d_v, odd d_k */
    {1, 1, 256, 256, 65, 1}, {1, 1, 64, 128, 100, 1}, {1, 2, 128, 32, 70, 1}, {1, 1, 24, 48, 66, 1},
};

static void run_sequence_case(threadpool *pool, test_rng *rng, const seq_shape *sh, gdn_head_map map, gate_kind kind,
                              bool with_scan, double chunk_bound) {
    gdn_params p = params(sh->nk, sh->nv, sh->dk, sh->dv, map);
    int64_t ns = gdn_state_floats(&p), T = sh->T;
    gcase c;
    if (!CHECK(make_case(rng, &c, p, T, kind))) return;
    float *s0 = ssm_test_alloc(ns), *sr = ssm_test_alloc(ns), *sg = ssm_test_alloc(ns);
    if (!CHECK(s0 && sr && sg)) return;
    random_state(rng, s0, ns);
    memcpy(sr, s0, (size_t)ns * sizeof(float));
    gdn_rows rr = rows_of(&c, c.o_ref);
    gdn_scan_ref(&p, T, &rr, sr);
    isa_level isas[ISA_COUNT];
    int n_isa = ssm_test_isas_for(isas, T * ns <= 1 << 18);
    REQUIRE(pool_reserve_scratch(pool, gdn_chunked_scratch_size(&p), NULL) == EDDY_OK);
    for (int ii = 0; ii < n_isa; ii++)
        for (int variant = with_scan ? 0 : 1; variant < 2; variant++) {
            memcpy(sg, s0, (size_t)ns * sizeof(float));
            for (int64_t i = 0; i < T * c.o_stride; i++) c.o_got[i] = NAN;
            gdn_rows rg = rows_of(&c, c.o_got);
            if (variant == 0)
                gdn_scan_isa(isas[ii], pool, &p, T, &rg, sg);
            else
                gdn_chunked_isa(isas[ii], pool, &p, T, &rg, sg, NULL);
            char what[192];
            snprintf(what, sizeof what, "%s %s nk=%lld nv=%lld dk=%lld dv=%lld T=%lld map=%s gates=%s seed=%llu",
                     variant ? "chunked" : "scan", isa_name(isas[ii]), (long long)p.n_k_heads,
                     (long long)p.n_v_heads, (long long)p.d_k, (long long)p.d_v, (long long)T, map_name(map),
                     kind == GATES_NORMAL ? "normal" : "extreme", (unsigned long long)c.seed);
            double bound = variant ? chunk_bound : BOUND_RECURRENT;
            const double rms_floor = kind == GATES_EXTREME ? EXTREME_FLOOR : 0.0;
            CLOSE_ROWS_FLOOR(what, c.o_got, c.o_ref, T, p.n_v_heads * p.d_v, c.o_stride, bound, rms_floor);
            CLOSE_ROWS_FLOOR(what, sg, sr, 1, ns, ns, bound, rms_floor);
        }
    free(s0), free(sr), free(sg);
    free_case(&c);
}

TEST(gdn_scan_and_chunked_match_ref) {
    threadpool *pool = NULL;
    REQUIRE(pool_create(&pool, 2, NULL) == EDDY_OK);
    test_rng rng = test_rng_new();
    for (size_t i = 0; i < sizeof seq_shapes / sizeof seq_shapes[0]; i++)
        for (int map = 0; map < 2; map++) {
            if (seq_shapes[i].maps == 1 && (size_t)map != i % 2) continue;
            if (seq_shapes[i].nk == seq_shapes[i].nv && map == 1) continue; /* the mapping cannot matter */
            run_sequence_case(pool, &rng, &seq_shapes[i], (gdn_head_map)map, GATES_NORMAL, true, BOUND_CHUNKED);
        }
    pool_destroy(pool);
}

/* The chunked form with no pool and caller scratch, and gdn_prefill's choice. */
TEST(gdn_chunked_without_pool_and_prefill_dispatch) {
    test_rng rng = test_rng_new();
    gdn_params p = params(1, 2, 64, 64, GDN_KHEAD_DIV);
    int64_t T = 150, ns = gdn_state_floats(&p);
    gcase c;
    REQUIRE(make_case(&rng, &c, p, T, GATES_NORMAL));
    float *s0 = ssm_test_alloc(ns), *sr = ssm_test_alloc(ns), *sg = ssm_test_alloc(ns);
    void *scratch = eddy_malloc_aligned(gdn_chunked_scratch_size(&p), 64);
    REQUIRE(s0 && sr && sg && scratch);
    random_state(&rng, s0, ns);
    memcpy(sr, s0, (size_t)ns * sizeof(float));
    gdn_rows rr = rows_of(&c, c.o_ref), rg = rows_of(&c, c.o_got);
    gdn_scan_ref(&p, T, &rr, sr);
    memcpy(sg, s0, (size_t)ns * sizeof(float));
    gdn_chunked(NULL, &p, T, &rg, sg, scratch);
    CLOSE_ROWS("chunked, no pool", c.o_got, c.o_ref, T, p.n_v_heads * p.d_v, c.o_stride, BOUND_CHUNKED);
    CLOSE("chunked state, no pool", sg, sr, ns, BOUND_CHUNKED);
    for (int64_t t = 1; t <= T; t += 13) { /* scan only, chunked only, chunked + scan tail */
        memcpy(sr, s0, (size_t)ns * sizeof(float));
        memcpy(sg, s0, (size_t)ns * sizeof(float));
        gdn_scan_ref(&p, t, &rr, sr);
        gdn_prefill(NULL, &p, t, &rg, sg, scratch);
        CLOSE_ROWS("prefill", c.o_got, c.o_ref, t, p.n_v_heads * p.d_v, c.o_stride, BOUND_CHUNKED);
        CLOSE("prefill state", sg, sr, ns, BOUND_CHUNKED);
    }
    CHECK(!gdn_prefill_uses_chunked(&p, 1));
    CHECK(gdn_prefill_uses_chunked(&p, 4096));
    eddy_free_aligned(scratch);
    free(s0), free(sr), free(sg);
    free_case(&c);
}

/* ==== Stability: a long sequence with extreme gates and magnitudes ==== */

TEST(gdn_stability_extreme_gates) {
    threadpool *pool = NULL;
    REQUIRE(pool_create(&pool, 2, NULL) == EDDY_OK);
    test_rng rng = test_rng_new();
    static const seq_shape shapes[] = {{1, 1, 16, 32, 16384, 1}, {1, 2, 64, 64, 300, 1}};
    for (size_t i = 0; i < 2; i++) run_sequence_case(pool, &rng, &shapes[i], GDN_KHEAD_MOD, GATES_EXTREME, i > 0, BOUND_CHUNKED);
    /* every gate at one extreme for the whole sequence */
    static const float g_all[] = {-30.0f, 0.0f}, b_all[] = {0.0f, 1.0f};
    gdn_params p = params(1, 1, 16, 16, GDN_KHEAD_MOD);
    int64_t T = 16384, ns = gdn_state_floats(&p);
    gcase c;
    REQUIRE(make_case(&rng, &c, p, T, GATES_NORMAL));
    float *s0 = ssm_test_alloc(ns), *sr = ssm_test_alloc(ns), *sg = ssm_test_alloc(ns);
    REQUIRE(s0 && sr && sg);
    REQUIRE(pool_reserve_scratch(pool, gdn_chunked_scratch_size(&p), NULL) == EDDY_OK);
    for (int gi = 0; gi < 2; gi++)
        for (int bi = 0; bi < 2; bi++) {
            for (int64_t t = 0; t < T; t++) c.gb[t * c.gb_stride] = g_all[gi], c.gb[t * c.gb_stride + 3] = b_all[bi];
            random_state(&rng, s0, ns);
            memcpy(sr, s0, (size_t)ns * sizeof(float));
            memcpy(sg, s0, (size_t)ns * sizeof(float));
            gdn_rows rr = rows_of(&c, c.o_ref), rg = rows_of(&c, c.o_got);
            gdn_scan_ref(&p, T, &rr, sr);
            gdn_chunked(pool, &p, T, &rg, sg, NULL);
            char what[96];
            snprintf(what, sizeof what, "chunked, g=%g beta=%g for all %lld tokens", g_all[gi], b_all[bi], (long long)T);
            CHECKF(ssm_test_finite(sr, ns) && ssm_test_finite(sg, ns), "%s: non-finite state", what);
            CLOSE_ROWS_FLOOR(what, c.o_got, c.o_ref, T, p.d_v, c.o_stride, BOUND_CHUNKED, EXTREME_FLOOR);
            CLOSE_ROWS_FLOOR(what, sg, sr, 1, ns, ns, BOUND_CHUNKED, EXTREME_FLOOR);
        }
    free(s0), free(sr), free(sg);
    free_case(&c);
    pool_destroy(pool);
}

/* ==== Verify: snapshots after every position ==== */

TEST(gdn_verify_matches_ref) {
    threadpool *pool = NULL;
    REQUIRE(pool_create(&pool, 3, NULL) == EDDY_OK);
    test_rng rng = test_rng_new();
    static const struct {
        int64_t nk, nv, dk, dv, n_seq, T;
    } shapes[] = {{1, 2, 32, 32, 1, 1}, {2, 4, 64, 64, 3, 4}, {1, 2, 128, 128, 2, 8}, {1, 1, 32, 64, 1, 5}};
    isa_level isas[ISA_COUNT];
    int n_isa = ssm_test_isas(isas);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int map = 0; map < 2; map++) {
            gdn_params p = params(shapes[si].nk, shapes[si].nv, shapes[si].dk, shapes[si].dv, (gdn_head_map)map);
            int64_t n_seq = shapes[si].n_seq, T = shapes[si].T, ns = gdn_state_floats(&p), n_snap = n_seq * T;
            gcase c;
            REQUIRE(make_case(&rng, &c, p, n_seq * T, GATES_NORMAL));
            int64_t slot[4];
            for (int64_t s = 0; s < n_seq; s++) slot[s] = (s + 1) % n_seq;
            float *s0 = ssm_test_alloc(n_seq * ns), *sr = ssm_test_alloc(n_seq * ns), *sg = ssm_test_alloc(n_seq * ns);
            float *snr = ssm_test_alloc(n_snap * ns), *sng = ssm_test_alloc(n_snap * ns);
            float *pr[32], *pg[32];
            REQUIRE(s0 && sr && sg && snr && sng && n_snap <= 32);
            for (int64_t i = 0; i < n_snap; i++) pr[i] = snr + (n_snap - 1 - i) * ns, pg[i] = sng + (n_snap - 1 - i) * ns;
            random_state(&rng, s0, n_seq * ns);
            memcpy(sr, s0, (size_t)(n_seq * ns) * sizeof(float));
            gdn_rows rr = rows_of(&c, c.o_ref);
            gdn_verify_ref(&p, n_seq, T, &rr, sr, slot, pr);
            CHECKF(!memcmp(sr, s0, (size_t)(n_seq * ns) * sizeof(float)), "verify_ref changed its input state");
            for (int ii = 0; ii < n_isa; ii++) {
                memcpy(sg, s0, (size_t)(n_seq * ns) * sizeof(float));
                gdn_rows rg = rows_of(&c, c.o_got);
                gdn_verify_isa(isas[ii], pool, &p, n_seq, T, &rg, sg, slot, pg);
                char what[160];
                snprintf(what, sizeof what, "verify %s nv=%lld dk=%lld n_seq=%lld T=%lld map=%s seed=%llu",
                         isa_name(isas[ii]), (long long)p.n_v_heads, (long long)p.d_k, (long long)n_seq,
                         (long long)T, map_name(p.head_map), (unsigned long long)c.seed);
                CLOSE_ROWS(what, c.o_got, c.o_ref, n_seq * T, p.n_v_heads * p.d_v, c.o_stride, BOUND_RECURRENT);
                CHECKF(!memcmp(sg, s0, (size_t)(n_seq * ns) * sizeof(float)), "%s: the input state changed", what);
                CLOSE(what, sng, snr, n_snap * ns, BOUND_RECURRENT);
            }
            free(s0), free(sr), free(sg), free(snr), free(sng);
            free_case(&c);
        }
    pool_destroy(pool);
}

/* Rows of n floats, `stride` apart, equal bit for bit. */
static bool same_outputs(const float *a, const float *b, int64_t rows, int64_t n, int64_t stride) {
    for (int64_t r = 0; r < rows; r++)
        if (memcmp(a + r * stride, b + r * stride, (size_t)n * sizeof(float))) return false;
    return true;
}

/* The verify without snapshots gives the snapshot verify's outputs bit for bit and
 * leaves the slots as they were; replaying the first k rows of a sequence on its slot
 * then gives the k-th snapshot bit for bit (and the same outputs): every ISA, 3
 * threads and none (with the caller's scratch), sequences in swapped slots. */
TEST(gdn_verify_outputs_and_replay_match_the_snapshots) {
    threadpool *pool = NULL;
    REQUIRE(pool_create(&pool, 3, NULL) == EDDY_OK);
    const gdn_params p0 = params(2, 4, 64, 64, GDN_KHEAD_MOD);
    REQUIRE(pool_reserve_scratch(pool, gdn_verify_scratch_size(&p0), NULL) == EDDY_OK);
    test_rng rng = test_rng_new();
    isa_level isas[ISA_COUNT];
    const int n_isa = ssm_test_isas(isas);
    const int64_t n_seq = 2, T = 5, ns = gdn_state_floats(&p0), slot[2] = {1, 0}, vn = p0.n_v_heads * p0.d_v;
    gcase c;
    REQUIRE(make_case(&rng, &c, p0, n_seq * T, GATES_NORMAL));
    float *s0 = ssm_test_alloc(n_seq * ns), *sv = ssm_test_alloc(n_seq * ns), *snaps = ssm_test_alloc(n_seq * T * ns);
    float *o_snap = ssm_test_alloc(n_seq * T * c.o_stride), *st = ssm_test_alloc(ns);
    void *scratch = ssm_test_alloc((int64_t)gdn_verify_scratch_size(&p0) / 4);
    REQUIRE(s0 && sv && snaps && o_snap && st && scratch);
    float *ptr[10];
    for (int64_t i = 0; i < n_seq * T; i++) ptr[i] = snaps + i * ns;
    random_state(&rng, s0, n_seq * ns);
    for (int ii = 0; ii < n_isa; ii++)
        for (int threaded = 0; threaded < 2; threaded++) {
            threadpool *tp = threaded ? pool : NULL;
            char what[96];
            snprintf(what, sizeof what, "%s, %s", isa_name(isas[ii]), threaded ? "3 threads" : "no pool");
            gdn_rows r = rows_of(&c, o_snap);
            gdn_verify_isa(isas[ii], tp, &p0, n_seq, T, &r, s0, slot, ptr);
            memcpy(sv, s0, (size_t)(n_seq * ns) * sizeof(float));
            r = rows_of(&c, c.o_got);
            gdn_verify_outputs_isa(isas[ii], tp, &p0, n_seq, T, &r, sv, slot, threaded ? NULL : scratch);
            CHECKF(!memcmp(sv, s0, (size_t)(n_seq * ns) * sizeof(float)), "%s: the verify changed a slot", what);
            CHECKF(same_outputs(c.o_got, o_snap, n_seq * T, vn, c.o_stride), "%s: outputs differ from the snapshot verify's",
                   what);
            for (int64_t s = 0; s < n_seq; s++)
                for (int64_t k = 1; k <= T; k++) {
                    memcpy(st, s0 + slot[s] * ns, (size_t)ns * sizeof(float));
                    gdn_rows rs = rows_of(&c, c.o_ref);
                    rs.q += s * T * c.row, rs.k += s * T * c.row, rs.v += s * T * c.row;
                    rs.g += s * T * c.gb_stride, rs.beta += s * T * c.gb_stride, rs.o += s * T * c.o_stride;
                    gdn_replay_isa(isas[ii], tp, &p0, k, &rs, st);
                    CHECKF(!memcmp(st, ptr[s * T + k - 1], (size_t)ns * sizeof(float)),
                           "%s: sequence %lld, replay of %lld rows is not the snapshot", what, (long long)s,
                           (long long)k);
                    CHECKF(same_outputs(rs.o, o_snap + s * T * c.o_stride, k, vn, c.o_stride),
                           "%s: sequence %lld, replay of %lld rows: other outputs", what, (long long)s, (long long)k);
                }
        }
    free(s0), free(sv), free(snaps), free(o_snap), free(st), free(scratch);
    free_case(&c);
    pool_destroy(pool);
}

/* The verify snapshots are the states a plain scan passes through. */
TEST(gdn_verify_snapshots_are_scan_states) {
    test_rng rng = test_rng_new();
    gdn_params p = params(2, 4, 32, 32, GDN_KHEAD_MOD);
    int64_t T = 6, ns = gdn_state_floats(&p);
    gcase c;
    REQUIRE(make_case(&rng, &c, p, T, GATES_NORMAL));
    float *s0 = ssm_test_alloc(ns), *s1 = ssm_test_alloc(ns), *snaps = ssm_test_alloc(T * ns), *ptr[6];
    REQUIRE(s0 && s1 && snaps);
    random_state(&rng, s0, ns);
    memcpy(s1, s0, (size_t)ns * sizeof(float));
    for (int64_t t = 0; t < T; t++) ptr[t] = snaps + t * ns;
    gdn_rows r = rows_of(&c, c.o_got);
    gdn_verify(NULL, &p, 1, T, &r, s0, NULL, ptr);
    for (int64_t t = 0; t < T; t++) {
        gdn_rows rt = rows_of(&c, c.o_ref);
        rt.q += t * c.row, rt.k += t * c.row, rt.v += t * c.row, rt.g += t * c.gb_stride, rt.beta += t * c.gb_stride;
        rt.o += t * c.o_stride;
        gdn_scan_ref(&p, 1, &rt, s1);
        CLOSE("snapshot", ptr[t], s1, ns, BOUND_RECURRENT);
    }
    CLOSE("last snapshot", ptr[T - 1], s1, ns, BOUND_RECURRENT);
    free(s0), free(s1), free(snaps);
    free_case(&c);
}

/* ==== Golden outputs of independent references ==== */

/* tests/data/ssm/gdn_<name>.bin: q, k (T, nk, dk) L2-normed; v (T, nv, dv); g, beta
 * (T, nv); s0 (nv, dk, dv); o (T, nv, dv); s1 (nv, dk, dv); meta = {nk, nv, dk, dv, T, map}. */
static void check_golden(const char *file) {
    ssm_golden gf;
    if (!CHECKF(ssm_golden_open(&gf, file), "cannot read %s", file)) return;
    int64_t n;
    const float *meta = ssm_golden_get(&gf, "meta", &n);
    if (!CHECKF(meta && n == 6, "%s: no meta", file)) {
        ssm_golden_close(&gf);
        return;
    }
    gdn_params p = params((int64_t)meta[0], (int64_t)meta[1], (int64_t)meta[2], (int64_t)meta[3],
                          meta[5] == 0 ? GDN_KHEAD_MOD : GDN_KHEAD_DIV);
    int64_t T = (int64_t)meta[4], ns = gdn_state_floats(&p);
    const float *q = ssm_golden_get(&gf, "q", NULL), *k = ssm_golden_get(&gf, "k", NULL);
    const float *v = ssm_golden_get(&gf, "v", NULL), *g = ssm_golden_get(&gf, "g", NULL);
    const float *beta = ssm_golden_get(&gf, "beta", NULL), *s0 = ssm_golden_get(&gf, "s0", NULL);
    const float *o = ssm_golden_get(&gf, "o", NULL), *s1 = ssm_golden_get(&gf, "s1", NULL);
    if (!CHECKF(q && k && v && g && beta && s0 && o && s1, "%s: missing arrays", file)) {
        ssm_golden_close(&gf);
        return;
    }
    float *out = ssm_test_alloc(T * p.n_v_heads * p.d_v), *st = ssm_test_alloc(ns);
    void *scratch = eddy_malloc_aligned(gdn_chunked_scratch_size(&p), 64);
    gdn_rows r = {q, k, v, g, beta, p.n_k_heads * p.d_k, p.n_k_heads * p.d_k, p.n_v_heads * p.d_v,
                  p.n_v_heads, p.n_v_heads, out, p.n_v_heads * p.d_v};
    for (int variant = 0; variant < 3; variant++) {
        memcpy(st, s0, (size_t)ns * sizeof(float));
        if (variant == 0) gdn_scan_ref(&p, T, &r, st);
        if (variant == 1) gdn_scan(NULL, &p, T, &r, st);
        if (variant == 2) gdn_chunked(NULL, &p, T, &r, st, scratch);
        char what[128];
        snprintf(what, sizeof what, "%s: %s", file, variant == 0 ? "scan_ref" : variant == 1 ? "scan" : "chunked");
        CLOSE(what, out, o, T * p.n_v_heads * p.d_v, BOUND_GOLDEN);
        CLOSE(what, st, s1, ns, BOUND_GOLDEN);
    }
    eddy_free_aligned(scratch);
    free(out), free(st);
    ssm_golden_close(&gf);
}

TEST(gdn_golden_fla_recurrent_mod_heads) { check_golden("ssm/gdn_fla_recurrent_mod.bin"); }
TEST(gdn_golden_fla_chunk) { check_golden("ssm/gdn_fla_chunk.bin"); }
TEST(gdn_golden_transformers_chunk_div_heads) { check_golden("ssm/gdn_hf_chunk_div.bin"); }
