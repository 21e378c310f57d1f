/*
 * cmd_logits.c — `eddy logits`: float32 logits for every position of a list of ids.
 * (usage_logits below).
 *
 * The ids are fed as one prefill batch; FILE receives [n_ids][n_vocab] little-endian
 * float32 and stdout one line "n_ids n_vocab".
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char usage_logits[] =
    "eddy logits -m MODEL.gguf --ids \"ID ID ...\" --out FILE [-t THREADS] [-c CTX] [-ctk T] [-ctv T]\n"
    "            [--device cpu|cuda | -ngl N]\n"
    "        runs the ids as one prefill batch and writes float32 logits for every position,\n"
    "        [n_ids][n_vocab] little-endian; prints \"n_ids n_vocab\". -ctk, -ctv, --device,\n"
    "        -ngl: as for run\n";

/* Parses whitespace-separated integers into a malloc'd array. */
static int parse_ids(const char *s, int32_t **out, int64_t *n) {
    int64_t cap = 64, len = 0;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids) return cli_error("out of memory");
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == ',') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) {
            free(ids);
            return cli_error("--ids: \"%.*s\" is not a token id", (int)strcspn(p, " \t\n,"), p);
        }
        if (len == cap) {
            int32_t *bigger = realloc(ids, (size_t)(cap *= 2) * sizeof *ids);
            if (!bigger) {
                free(ids);
                return cli_error("out of memory");
            }
            ids = bigger;
        }
        ids[len++] = (int32_t)v;
        p = end;
    }
    if (len == 0) {
        free(ids);
        return cli_error("--ids: no token ids given");
    }
    *out = ids;
    *n = len;
    return 0;
}

int cmd_logits(int argc, char **argv) {
    const char *model_path = NULL, *ids_text = NULL, *out_path = NULL;
    long long threads = 0, n_ctx = 0;
    eddy_kv_type type_k = EDDY_KV_DEFAULT, type_v = EDDY_KV_DEFAULT;
    eddy_device device = EDDY_DEVICE_CPU;
    int gpu_layers = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        int kv = cli_parse_kv_flag(a, val, &type_k, &type_v);
        if (kv < 0) kv = cli_parse_device_flag(a, val, &device, &gpu_layers);
        if (kv > 0) return 1;
        if (kv == 0) {
            i++;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!val) return cli_error("%s needs a model file", a);
            model_path = argv[++i];
        } else if (!strcmp(a, "--ids")) {
            if (!val) return cli_error("--ids needs a list of token ids");
            ids_text = argv[++i];
        } else if (!strcmp(a, "--out") || !strcmp(a, "-o")) {
            if (!val) return cli_error("%s needs a file name", a);
            out_path = argv[++i];
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (cli_parse_int(a, val, 1, 1024, &threads)) return 1;
            i++;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            if (cli_parse_int(a, val, 1, 1 << 24, &n_ctx)) return 1;
            i++;
        } else {
            return cli_bad_arg("logits", a);
        }
    }
    if (!model_path) return cli_error("logits: no model given (-m MODEL.gguf)");
    if (!ids_text) return cli_error("logits: no token ids given (--ids \"ID ID ...\")");
    if (!out_path) return cli_error("logits: no output file given (--out FILE)");
    int32_t *ids = NULL;
    int64_t n = 0;
    if (parse_ids(ids_text, &ids, &n)) return 1;

    eddy_error err;
    eddy_model *m;
    if (eddy_model_load(model_path, &m, &err) != EDDY_OK) {
        free(ids);
        return cli_error("%s", err.msg);
    }
    cli_log_model(model_path, m);
    int64_t n_vocab = eddy_model_n_vocab(m);
    eddy_ctx_params p = {.n_ctx = n_ctx > 0 ? n_ctx : (n > 4096 ? n : 0), .n_threads = (int)threads, .n_batch = n,
                         .type_k = type_k, .type_v = type_v, .device = device, .gpu_layers = gpu_layers};
    eddy_ctx *c = NULL;
    float *logits = NULL;
    int rc = 0;
    eddy_status made = eddy_ctx_new(m, &p, &c, &err);
    if (made == EDDY_OK) cli_log_ctx(c, &p);
    if (made != EDDY_OK) {
        rc = cli_error("%s", err.msg);
    } else if (!(logits = malloc((size_t)(n * n_vocab) * sizeof(float)))) {
        rc = cli_error("cannot allocate logits for %lld tokens", (long long)n);
    } else if (eddy_ctx_eval(c, ids, n, logits, 1, &err) != EDDY_OK) {
        rc = cli_error("%s", err.msg);
    } else {
        FILE *f = fopen(out_path, "wb");
        if (!f) {
            rc = cli_error("%s: cannot create file", out_path);
        } else {
            size_t wrote = fwrite(logits, sizeof(float), (size_t)(n * n_vocab), f);
            if ((fclose(f) != 0) | (wrote != (size_t)(n * n_vocab))) rc = cli_error("%s: write failed", out_path);
            else printf("%lld %lld\n", (long long)n, (long long)n_vocab);
        }
    }
    free(logits);
    free(ids);
    eddy_ctx_free(c);
    eddy_model_free(m);
    return rc;
}
