/*
 * test_ssm_gated_norm.c — gated RMSNorm (ssm.h) in both forms: per value head,
 * norm before gate (Gated DeltaNet), and per group, gate before norm (Mamba-2).
 * Every ISA against the scalar _ref over odd head sizes and strided rows, in place
 * and out of place, and both forms against transformers' modules.
 *
 * Error bounds: normalized MSE 1e-12 against _ref (a sum of squares in another
 * order and the SIMD exp of SiLU, about 2 ulp; measured worst about 1e-14) and
 * 1e-12 against the golden outputs (torch float32).
 */
#include "ssm/ssm.h"
#include "test_ssm.h"

#define BOUND 1e-12

TEST(gated_norm_matches_ref) {
    static const struct {
        int64_t rows, heads, d;
    } shapes[] = {{1, 1, 1}, {3, 2, 7}, {5, 4, 32}, {2, 3, 100}, {7, 16, 128}, {1, 1, 256}, {4, 2, 17}, {16, 32, 128}};
    threadpool *pool = NULL;
    REQUIRE(pool_create(&pool, 3, NULL) == EDDY_OK);
    test_rng rng = test_rng_new();
    isa_level isas[ISA_COUNT];
    int n_isa = ssm_test_isas(isas);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int grouped = 0; grouped < 2; grouped++) {
            int64_t R = shapes[si].rows, H = shapes[si].heads, d = shapes[si].d, width = H * d;
            int64_t ys = width + 3, zs = width + 9, os = width + 1;
            uint64_t seed = test_rng_u64(&rng);
            test_rng r = {seed};
            float *y = ssm_test_alloc(R * ys), *z = ssm_test_alloc(R * zs), *w = ssm_test_alloc(width);
            float *ref = ssm_test_alloc(R * os), *got = ssm_test_alloc(R * os), *inplace = ssm_test_alloc(R * ys);
            REQUIRE(y && z && w && ref && got && inplace);
            ssm_test_normal(&r, y, R * ys, 2.0f);
            ssm_test_normal(&r, z, R * zs, 3.0f);
            for (int64_t i = 0; i < width; i++) w[i] = 1.0f + 0.3f * test_rng_normal(&r);
            if (grouped)
                gated_rmsnorm_group_ref(R, H, d, y, ys, z, zs, w, 1e-5f, ref, os);
            else
                gated_rmsnorm_ref(R, H, d, y, ys, z, zs, w, 1e-6f, ref, os);
            for (int ii = 0; ii < n_isa; ii++) {
                char what[128];
                snprintf(what, sizeof what, "%s %s rows=%lld heads=%lld d=%lld seed=%llu",
                         grouped ? "group" : "head", isa_name(isas[ii]), (long long)R, (long long)H, (long long)d,
                         (unsigned long long)seed);
                memcpy(inplace, y, (size_t)(R * ys) * sizeof(float));
                if (grouped) {
                    gated_rmsnorm_group_isa(isas[ii], pool, R, H, d, y, ys, z, zs, w, 1e-5f, got, os);
                    gated_rmsnorm_group_isa(isas[ii], pool, R, H, d, inplace, ys, z, zs, w, 1e-5f, inplace, ys);
                } else {
                    gated_rmsnorm_isa(isas[ii], pool, R, H, d, y, ys, z, zs, w, 1e-6f, got, os);
                    gated_rmsnorm_isa(isas[ii], pool, R, H, d, inplace, ys, z, zs, w, 1e-6f, inplace, ys);
                }
                CLOSE_ROWS(what, got, ref, R, width, os, BOUND);
                bool same = true;
                for (int64_t t = 0; t < R; t++) same &= !memcmp(inplace + t * ys, got + t * os, (size_t)width * 4);
                CHECKF(same, "%s: in place differs from out of place", what);
            }
            free(y), free(z), free(w), free(ref), free(got), free(inplace);
        }
    pool_destroy(pool);
}

TEST(gated_norm_golden_transformers) {
    ssm_golden gf;
    REQUIRE(ssm_golden_open(&gf, "ssm/gated_norm_hf.bin"));
    int64_t n;
    const float *meta = ssm_golden_get(&gf, "meta", &n);
    REQUIRE(meta && n == 5);
    int64_t R = (int64_t)meta[0], H = (int64_t)meta[1], d = (int64_t)meta[2], G = (int64_t)meta[3], gs = (int64_t)meta[4];
    const float *y = ssm_golden_get(&gf, "y", NULL), *z = ssm_golden_get(&gf, "z", NULL);
    const float *w = ssm_golden_get(&gf, "w", NULL), *out = ssm_golden_get(&gf, "out", NULL);
    const float *gy = ssm_golden_get(&gf, "gy", NULL), *gz = ssm_golden_get(&gf, "gz", NULL);
    const float *gw = ssm_golden_get(&gf, "gw", NULL), *gout = ssm_golden_get(&gf, "gout", NULL);
    REQUIRE(y && z && w && out && gy && gz && gw && gout);
    float *got = ssm_test_alloc(R * (H * d > G * gs ? H * d : G * gs));
    REQUIRE(got);
    gated_rmsnorm_ref(R, H, d, y, H * d, z, H * d, w, 1e-6f, got, H * d);
    CLOSE("per-head _ref vs Qwen3NextRMSNormGated", got, out, R * H * d, BOUND);
    gated_rmsnorm(NULL, R, H, d, y, H * d, z, H * d, w, 1e-6f, got, H * d);
    CLOSE("per-head vs Qwen3NextRMSNormGated", got, out, R * H * d, BOUND);
    gated_rmsnorm_group_ref(R, G, gs, gy, G * gs, gz, G * gs, gw, 1e-5f, got, G * gs);
    CLOSE("per-group _ref vs MambaRMSNormGated", got, gout, R * G * gs, BOUND);
    gated_rmsnorm_group(NULL, R, G, gs, gy, G * gs, gz, G * gs, gw, 1e-5f, got, G * gs);
    CLOSE("per-group vs MambaRMSNormGated", got, gout, R * G * gs, BOUND);
    free(got);
    ssm_golden_close(&gf);
}
