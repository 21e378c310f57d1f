/*
 * model_info.c — what `EDDY_LOG_LEVEL=info` shows about a run: the model
 * (architecture, parameters, file type, weights), the CPU features, the context
 * (positions, batch, threads, KV cache types) and the memory of its state; and
 * --mlock, which locks the model file's mapped pages.
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "cli.h"

/* ==== The model ==== */

/* llama.cpp's names of general.file_type (enum llama_ftype), "MOSTLY_" left out. */
static const char *file_type_name(int64_t t) {
    static const char *const names[] = {
        [0] = "F32",      [1] = "F16",      [2] = "Q4_0",     [3] = "Q4_1",     [7] = "Q8_0",    [8] = "Q5_0",
        [9] = "Q5_1",     [10] = "Q2_K",    [11] = "Q3_K_S",  [12] = "Q3_K_M",  [13] = "Q3_K_L", [14] = "Q4_K_S",
        [15] = "Q4_K_M",  [16] = "Q5_K_S",  [17] = "Q5_K_M",  [18] = "Q6_K",    [19] = "IQ2_XXS", [20] = "IQ2_XS",
        [21] = "Q2_K_S",  [22] = "IQ3_XS",  [23] = "IQ3_XXS", [24] = "IQ1_S",   [25] = "IQ4_NL", [26] = "IQ3_S",
        [27] = "IQ3_M",   [28] = "IQ2_S",   [29] = "IQ2_M",   [30] = "IQ4_XS",  [31] = "IQ1_M",  [32] = "BF16",
        [36] = "TQ1_0",   [37] = "TQ2_0",
    };
    if (t >= 0 && t < (int64_t)(sizeof names / sizeof names[0]) && names[t]) return names[t];
    return NULL;
}

static const char *mib(char *buf, size_t n, double bytes) {
    if (bytes >= 1024.0 * 1024 * 1024) snprintf(buf, n, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
    else if (bytes >= 1024.0 * 1024) snprintf(buf, n, "%.2f MiB", bytes / (1024.0 * 1024));
    else snprintf(buf, n, "%.1f KiB", bytes / 1024.0);
    return buf;
}

static bool no_mmap(void) {
    const char *s = getenv("EDDY_NO_MMAP"); /* mapfile.c's rule */
    return s && *s && strcmp(s, "0") != 0;
}

void cli_log_model(const char *path, const eddy_model *m) {
    if (eddy_log_get_level() < EDDY_LOG_INFO) return;
    const eddy_gguf *f = eddy_model_gguf(m);
    double params = 0, bytes = 0;
    for (int64_t i = 0; i < eddy_gguf_n_tensors(f); i++) {
        eddy_tensor_info t;
        eddy_gguf_tensor_info(f, i, &t);
        params += (double)t.n_elements;
        bytes += (double)t.n_bytes;
    }
    const char *arch = eddy_model_arch(m);
    char key[128], ftype[48], b[32];
    snprintf(key, sizeof key, "%s.block_count", eddy_gguf_get_str(f, "general.architecture", arch));
    int64_t ft = eddy_gguf_get_int(f, "general.file_type", -1);
    const char *ftn = file_type_name(ft);
    if (ftn) snprintf(ftype, sizeof ftype, "%s", ftn);
    else if (ft >= 0) snprintf(ftype, sizeof ftype, "%" PRId64 " (general.file_type)", ft);
    else snprintf(ftype, sizeof ftype, "not stated");
    eddy_log(EDDY_LOG_INFO, "model: %s: %s \"%s\", %" PRId64 " layers, %.0f parameters (%.2fM), file type %s",
             path, arch, eddy_gguf_get_str(f, "general.name", "(no name)"), eddy_gguf_get_int(f, key, 0), params,
             params / 1e6, ftype);
    eddy_log(EDDY_LOG_INFO, "model: vocabulary %" PRId64 " tokens, trained context %" PRId64
             ", weights %s (%.2f bits per parameter), %s",
             eddy_model_n_vocab(m), eddy_model_n_ctx_train(m), mib(b, sizeof b, bytes),
             params > 0 ? bytes * 8 / params : 0.0,
             no_mmap() ? "read into memory (EDDY_NO_MMAP / --no-mmap)" : "mapped from the file");
    eddy_log(EDDY_LOG_INFO, "cpu: %s", eddy_cpu_features());
}

/* ==== The context ==== */

static const char *kv_name(eddy_kv_type t) { return t == EDDY_KV_F32 ? "f32" : "f16"; }

void cli_log_ctx(eddy_ctx *c, const eddy_ctx_params *p) {
    if (eddy_log_get_level() < EDDY_LOG_INFO) return;
    eddy_engine *e = eddy_ctx_engine(c);
    const int64_t n_ctx = eddy_ctx_n_ctx(c);
    const int64_t n_batch = eddy_engine_n_batch(e);
    const double state = (double)eddy_engine_state_bytes(e), kv = (double)eddy_engine_kv_bytes_per_pos(e) * n_ctx;
    char b0[32], b1[32], b2[32];
    eddy_log(EDDY_LOG_INFO, "context: %" PRId64 " positions, batch %" PRId64 " tokens, %d thread%s%s, KV cache %s keys, %s values",
             n_ctx, n_batch, eddy_engine_n_threads(e), eddy_engine_n_threads(e) == 1 ? "" : "s", p->n_threads > 0 ? "" : " (the default)",
             kv_name(p->type_k), kv_name(p->type_v));
    eddy_log(EDDY_LOG_INFO, "memory: sequence state %s = recurrent state %s + KV cache %s for %" PRId64 " positions",
             mib(b0, sizeof b0, state + kv), mib(b1, sizeof b1, state), mib(b2, sizeof b2, kv), n_ctx);
    if (p->n_verify > 0) /* speculative decoding: what a verify keeps of each token */
        eddy_log(EDDY_LOG_INFO, "memory: %d verify states of %s each", p->n_verify,
                 mib(b0, sizeof b0, (double)eddy_engine_row_bytes(e)));
}

void cli_warn_cache_fit(eddy_engine *e, size_t asked, const char *prefix, const char *beside) {
    eddy_cache_stats cs;
    eddy_engine_cache_stats(e, &cs);
    if (cs.budget < asked)
        eddy_log(EDDY_LOG_WARN, "%sthe GPU has no room for the prefix cache's default %zu MiB beside %s: %zu MiB "
                 "(--cache-ram sets it)", prefix, asked >> 20, beside, cs.budget >> 20);
}

/* ==== --mlock ==== */

void cli_lock_model(const char *path) {
    struct stat st;
    char *real = realpath(path, NULL);
    FILE *maps = stat(path, &st) == 0 ? fopen("/proc/self/maps", "r") : NULL;
    if (!maps) {
        eddy_log(EDDY_LOG_WARN, "--mlock: cannot find where %s is mapped (%s); the weights are not locked", path,
                 strerror(errno));
        free(real);
        return;
    }
    /* each line: "lo-hi perms offset major:minor inode path" */
    char *line = NULL;
    size_t cap = 0, locked = 0;
    int fail = 0;
    while (getline(&line, &cap, maps) > 0) {
        unsigned long lo, hi, off, ino;
        unsigned maj, min;
        char perms[8];
        int at = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &lo, &hi, perms, &off, &maj, &min, &ino, &at) != 7)
            continue;
        char *name = line + at;
        name[strcspn(name, "\n")] = '\0';
        bool same = (ino == (unsigned long)st.st_ino && makedev(maj, min) == st.st_dev) ||
                    (real && *name && !strcmp(name, real));
        if (!same || hi <= lo) continue;
        if (mlock((void *)lo, hi - lo) != 0) {
            fail = errno;
            break;
        }
        locked += hi - lo;
    }
    free(line);
    fclose(maps);
    free(real);
    char b[32];
    if (fail) {
        struct rlimit rl;
        char limit[64] = "unknown";
        if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
            if (rl.rlim_cur == RLIM_INFINITY) snprintf(limit, sizeof limit, "unlimited");
            else mib(limit, sizeof limit, (double)rl.rlim_cur);
        }
        eddy_log(EDDY_LOG_WARN, "--mlock: the system refused to lock the weights in memory (%s; the limit, ulimit -l, "
                 "is %s); they stay mapped and may be paged out", strerror(fail), limit);
    } else if (!locked) {
        eddy_log(EDDY_LOG_WARN, "--mlock: %s was read into memory, not mapped (--no-mmap, EDDY_NO_MMAP); eddy locks "
                 "only mapped weights, these are not locked", path);
    } else {
        eddy_log(EDDY_LOG_INFO, "--mlock: %s of weights locked in memory", mib(b, sizeof b, (double)locked));
    }
}
