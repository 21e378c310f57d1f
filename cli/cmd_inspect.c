/*
 * cmd_inspect.c — `eddy inspect`: a GGUF file's metadata and tensor table, or one
 * tensor dequantized to float32.
 * (usage_inspect below).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char usage_inspect[] =
    "eddy inspect MODEL.gguf [--max-items N]\n"
    "        metadata (arrays shortened to N items, default 16) and the tensor table:\n"
    "        name, type, shape, byte offset, size; totals (parameters, bytes, bits per parameter)\n"
    "eddy inspect MODEL.gguf --tensor NAME --out FILE\n"
    "        writes one tensor, dequantized, as little-endian float32\n";

/* ==== Listing ==== */

static void print_shape(char *buf, size_t n, const eddy_tensor_info *t) {
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->n_dims && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, "%s%" PRId64, d ? ", " : "", t->ne[d]);
    if (len < n) snprintf(buf + len, n - len, "]");
}

static void human_bytes(char *buf, size_t n, double bytes) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) bytes /= 1024, u++;
    snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", bytes, unit[u]);
}

static void human_count(char *buf, size_t n, double count) {
    if (count >= 1e9) snprintf(buf, n, "%.2fB", count / 1e9);
    else if (count >= 1e6) snprintf(buf, n, "%.2fM", count / 1e6);
    else if (count >= 1e3) snprintf(buf, n, "%.2fK", count / 1e3);
    else snprintf(buf, n, "%.0f", count);
}

static int list_file(const char *path, eddy_gguf *f, long long max_items) {
    printf("file:         %s\n", path);
    printf("format:       GGUF v%u, %" PRIu64 " bytes, alignment %u, data at byte %" PRIu64 "\n",
           eddy_gguf_version(f), eddy_gguf_file_size(f), eddy_gguf_alignment(f), eddy_gguf_data_offset(f));
    printf("architecture: %s\n", eddy_gguf_get_str(f, "general.architecture", "(not set)"));
    printf("name:         %s\n", eddy_gguf_get_str(f, "general.name", "(not set)"));

    int64_t n_kv = eddy_gguf_n_kv(f);
    size_t key_w = 10, type_w = 4;
    for (int64_t i = 0; i < n_kv; i++) {
        size_t l = strlen(eddy_gguf_kv_key(f, i)), tl = strlen(eddy_gguf_kv_type_name(f, i));
        if (l > key_w) key_w = l;
        if (tl > type_w) type_w = tl;
    }
    printf("\nmetadata: %" PRId64 " keys\n", n_kv);
    size_t cap = 4096;
    char *val = malloc(cap);
    if (!val) return cli_error("out of memory");
    for (int64_t i = 0; i < n_kv; i++) {
        size_t need = eddy_gguf_kv_format(f, i, val, cap, max_items);
        if (need >= cap) {
            char *bigger = realloc(val, need + 1);
            if (!bigger) {
                free(val);
                return cli_error("out of memory");
            }
            val = bigger;
            cap = need + 1;
            eddy_gguf_kv_format(f, i, val, cap, max_items);
        }
        printf("  %-*s  %-*s  %s\n", (int)key_w, eddy_gguf_kv_key(f, i), (int)type_w,
               eddy_gguf_kv_type_name(f, i), val);
    }
    free(val);

    int64_t n_t = eddy_gguf_n_tensors(f);
    size_t name_w = 4;
    for (int64_t i = 0; i < n_t; i++) {
        eddy_tensor_info t;
        eddy_gguf_tensor_info(f, i, &t);
        if (strlen(t.name) > name_w) name_w = strlen(t.name);
    }
    printf("\ntensors: %" PRId64 "\n", n_t);
    printf("  %-*s  %-8s %-26s %14s %14s\n", (int)name_w, "name", "type", "shape", "offset", "bytes");
    double params = 0, bytes = 0;
    int n_unsupported = 0;
    for (int64_t i = 0; i < n_t; i++) {
        eddy_tensor_info t;
        eddy_gguf_tensor_info(f, i, &t);
        char shape[96];
        print_shape(shape, sizeof shape, &t);
        printf("  %-*s  %-8s %-26s %14" PRIu64 " %14" PRIu64 "%s\n", (int)name_w, t.name, t.type_name,
               shape, t.offset, t.n_bytes, t.supported ? "" : "  (unsupported type)");
        params += (double)t.n_elements;
        bytes += (double)t.n_bytes;
        n_unsupported += !t.supported;
    }
    char hp[32], hb[32];
    human_count(hp, sizeof hp, params);
    human_bytes(hb, sizeof hb, bytes);
    printf("\ntotals: %" PRId64 " tensors, %.0f parameters (%s), %.0f bytes (%s)", n_t, params, hp, bytes, hb);
    if (params > 0) printf(", %.2f bits per parameter", bytes * 8 / params);
    printf("\n");
    if (n_unsupported) printf("note: %d tensors have types eddy cannot read yet\n", n_unsupported);
    return 0;
}

/* ==== One tensor to float32 ==== */

static int dump_tensor(eddy_gguf *f, const char *name, const char *out_path) {
    int64_t i = eddy_gguf_find_tensor(f, name);
    if (i < 0) return cli_error("no tensor named \"%s\" in this file", name);
    eddy_tensor_info t;
    eddy_gguf_tensor_info(f, i, &t);
    if (!t.supported)
        return cli_error("tensor %s has type %s, which eddy does not support yet", t.name, t.type_name);
    if ((uint64_t)t.n_elements > SIZE_MAX / sizeof(float))
        return cli_error("tensor %s is too large to dequantize in memory", t.name);
    float *buf = malloc((size_t)t.n_elements * sizeof(float));
    if (!buf)
        return cli_error("cannot allocate %" PRId64 " floats for tensor %s", t.n_elements, t.name);
    eddy_error err;
    if (eddy_gguf_tensor_to_f32(f, i, buf, &err) != EDDY_OK) {
        free(buf);
        return cli_error("%s", err.msg);
    }
    FILE *out = fopen(out_path, "wb");
    if (!out) {
        free(buf);
        return cli_error("%s: cannot create file", out_path);
    }
    /* eddy runs on little-endian hosts only, so floats go out as they are */
    size_t written = fwrite(buf, sizeof(float), (size_t)t.n_elements, out);
    int closed = fclose(out);
    free(buf);
    if (written != (size_t)t.n_elements || closed != 0)
        return cli_error("%s: write failed", out_path);
    char shape[96];
    print_shape(shape, sizeof shape, &t);
    printf("%s %s %s -> %s (%" PRId64 " float32)\n", t.name, t.type_name, shape, out_path, t.n_elements);
    return 0;
}

/* ==== Entry ==== */

int cmd_inspect(int argc, char **argv) {
    const char *path = NULL, *tensor = NULL, *out = NULL;
    long long max_items = 16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--tensor")) {
            if (++i >= argc) return cli_error("--tensor needs a tensor name");
            tensor = argv[i];
        } else if (!strcmp(a, "--out") || !strcmp(a, "-o")) {
            if (++i >= argc) return cli_error("%s needs a file name", a);
            out = argv[i];
        } else if (!strcmp(a, "--max-items")) {
            if (cli_parse_int(a, i + 1 < argc ? argv[++i] : NULL, 0, 1000000000, &max_items)) return 1;
        } else if (a[0] == '-' && a[1] != '\0') {
            return cli_bad_arg("inspect", a);
        } else if (!path) {
            path = a;
        } else {
            return cli_error("inspect: unexpected argument \"%s\" (one model file at a time)", a);
        }
    }
    if (!path) return cli_error("inspect: no model file given (usage: eddy inspect MODEL.gguf)");
    if ((tensor != NULL) != (out != NULL))
        return cli_error("inspect: --tensor and --out go together");
    eddy_gguf *f;
    eddy_error err;
    if (eddy_gguf_open(path, &f, &err) != EDDY_OK) return cli_error("%s", err.msg);
    int rc = tensor ? dump_tensor(f, tensor, out) : list_file(path, f, max_items);
    eddy_gguf_close(f);
    return rc;
}
