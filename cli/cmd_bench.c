/*
 * cmd_bench.c — `eddy bench`: benchmarks.
 * (usage_bench below).
 *
 * A model benchmark (eddy_bench_model) prints a table like llama-bench's, then the
 * read bandwidth, bytes per decode token, roofline fraction and peak RSS; with
 * --json one line holding all of them. With --npl, the batched benchmark
 * (eddy_bench_batched) for each count of sequences: a table like llama-batched-bench's,
 * or one JSON line per count. The kinds take separate runs.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

const char usage_bench[] =
    "eddy bench -m MODEL.gguf [-p 512] [-n 128] [-d 0] [-t THREADS] [-r REPS] [-b BATCH] [--json]\n"
    "        prefill (ppP: P random tokens as one batch) and decode (tgN: N single-token steps)\n"
    "        speed as llama-bench measures them, each from an empty sequence, one warm-up then\n"
    "        REPS (default 5) timed runs: t/s median and mean ± sd; then this machine's read\n"
    "        bandwidth measured in the same run on the same threads, the bytes a decode step\n"
    "        reads, the roofline fraction (decode t/s x bytes/token / bandwidth) and the peak\n"
    "        RSS. -p 0 or -n 0 skips that test; --json prints one line. Threads default to the\n"
    "        CPUs eddy may use, as for run. -d N (--n-depth): each test starts from N random\n"
    "        tokens already in the sequence (prefilled once, restored from a snapshot), as\n"
    "        llama-bench -d. Definitions: bench/RESULTS.md, \"Model benchmarks\"\n"
    "eddy bench -m MODEL.gguf --npl 1,2,4,8,16 [-p 512] [-n 128] [-t THREADS] [-r REPS] [--json]\n"
    "          [--sampling argmax|top|logits]\n"
    "        many sequences at once, as llama.cpp's llama-batched-bench measures them: for each\n"
    "        count B, B random prompts of P tokens prefilled in one batch (S_PP), then N steps\n"
    "        each decoding one token of every sequence, fed its last argmax (S_TG; the ids come\n"
    "        from eddy_engine_decode_argmax, so on a GPU the logits stay there); aggregate and\n"
    "        per-sequence t/s, medians of REPS runs after a warm-up (docs/sequences.md).\n"
    "        --sampling top: each sequence's next token drawn by run's default sampler from\n"
    "        its row's best 40 logits (eddy_engine_decode_top); logits: the same draws from\n"
    "        whole rows of logits (what sampling costs a step both ways)\n"
    "eddy bench -m MODEL.gguf --session-turn [-p 4000] [-n 32] [--dir DIR] [-t THREADS] [-r REPS] [--json]\n"
    "        the next turn (N new tokens) of a P-token conversation three ways: reprocessing it\n"
    "        all, loading its session file from DIR cold (pages dropped from the page cache) and\n"
    "        restoring it from the prefix cache; with the disk's cold sequential read speed\n"
    "        measured in the same run (bench/RESULTS.md)\n"
    "eddy bench -m MODEL.gguf --verify 1,2,4,8 [-p 512] [-n 32] [-t THREADS] [-r REPS] [--json]\n"
    "          [--sampling argmax|top|logits]\n"
    "        what a speculative verify step of 1 + K tokens costs against a plain decode step,\n"
    "        on one sequence P positions deep: N steps of each per round, rounds alternating;\n"
    "        median seconds per step and of the ratio over REPS rounds (docs/speculative.md);\n"
    "        a model with an MTP layer adds its engine's plain step and one MTP draft. Each\n"
    "        step gives every row's argmax (default), best 40 (top) or logits, as the walk\n"
    "        of greedy, run's default or penalized sampling takes them\n"
    "        Each model benchmark takes --device cuda: the model on the GPU, the bandwidth then\n"
    "        the GPU memory's (a device-to-device copy) (docs/cuda.md); -ngl N: its last N\n"
    "        layers there, the others on the CPU; and -b N (or -ub N): tokens per forward step\n"
    "        (default 512, 2048 on a GPU)\n"
    "eddy bench --kernels [--json] [-t THREADS] [--filter NAME]\n"
    "        kernel benchmarks, each against this machine's read bandwidth or f32 FMA peak\n"
    "        measured in the same run (--json: one object per line); 2 threads by default\n";

/* ==== Output of a model benchmark ==== */

/* s as the inside of a JSON string: quotes, backslashes and control characters
 * escaped, bytes that are not UTF-8 replaced by U+FFFD. */
static void json_string(FILE *out, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool valid = len > 0;
        for (int i = 1; i < len && valid; i++) valid = (p[i] >> 6) == 2;
        if (!valid) {
            fputs("\\ufffd", out);
            p++;
        } else if (c == '"' || c == '\\') {
            fprintf(out, "\\%c", c);
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(out, "\\u%04x", c);
            p++;
        } else {
            fwrite(p, 1, (size_t)len, out);
            p += len;
        }
    }
}

/* bytes as B, kB, MB or GB (powers of 1000, like GB/s) */
static const char *fmt_bytes(char *buf, size_t n, double b) {
    if (b >= 1e9) snprintf(buf, n, "%.2f GB", b / 1e9);
    else if (b >= 1e6) snprintf(buf, n, "%.2f MB", b / 1e6);
    else if (b >= 1e3) snprintf(buf, n, "%.2f kB", b / 1e3);
    else snprintf(buf, n, "%.0f B", b);
    return buf;
}

static void print_json(const char *name, const char *arch, const eddy_bench_params *p, const eddy_bench_result *r) {
    printf("{\"model\": \"");
    json_string(stdout, name);
    printf("\", \"threads\": %d, \"pp_tokens\": %lld, \"tg_tokens\": %lld, \"n_depth\": %lld, \"pp_tps\": %.6g, "
           "\"tg_tps\": %.6g, "
           "\"bytes_per_token\": %.0f, \"read_bw_gbs\": %.6g, \"roofline\": %.6g, \"peak_rss_mib\": %.2f, "
           "\"pp_tps_mean\": %.6g, \"pp_tps_sd\": %.6g, \"tg_tps_mean\": %.6g, \"tg_tps_sd\": %.6g, \"reps\": %d, "
           "\"n_batch\": %lld, \"arch\": \"",
           r->n_threads, (long long)p->n_prompt, (long long)p->n_gen, (long long)p->n_depth, r->pp.median,
           r->tg.median, r->bytes_per_token,
           r->read_bw / 1e9, r->roofline, r->peak_rss / (1024.0 * 1024.0), r->pp.mean, r->pp.sd, r->tg.mean,
           r->tg.sd, p->n_reps, (long long)r->n_batch);
    json_string(stdout, arch);
    printf("\", \"weight_bytes\": %llu, \"state_bytes\": %llu, \"kv_bytes_per_pos\": %llu, \"device\": \"",
           (unsigned long long)r->bytes.weights, (unsigned long long)r->bytes.state,
           (unsigned long long)r->bytes.kv_per_pos);
    json_string(stdout, r->device);
    printf("\"}\n");
}

static void print_row(int w, const char *name, const char *arch, double size_mib, int threads, const char *test,
                      const eddy_bench_rate *rate) {
    char mean[64];
    snprintf(mean, sizeof mean, "%.2f ± %.2f", rate->mean, rate->sd);
    /* "±" is two bytes for one column: pad one more */
    printf("| %-*s | %-10s | %9.2f MiB | %7d | %8s | %12.2f | %21s |\n", w, name, arch, size_mib, threads, test,
           rate->median, mean);
}

static void print_table(const char *name, const char *arch, double size_mib, const eddy_bench_params *p,
                        const eddy_bench_result *r) {
    int w = (int)strlen(name) < 5 ? 5 : (int)strlen(name);
    char dash[512];
    int dw = w < (int)sizeof dash - 1 ? w : (int)sizeof dash - 1;
    memset(dash, '-', (size_t)dw);
    dash[dw] = '\0';
    printf("| %-*s | %-10s | %13s | %7s | %8s | %12s | %21s |\n", w, "model", "arch", "size", "threads", "test",
           "t/s (median)", "t/s (mean ± sd)");
    printf("| %s | ---------- | ------------: | ------: | -------: | -----------: | -------------------: |\n", dash);
    char test[48], at[24] = "";
    if (p->n_depth > 0) snprintf(at, sizeof at, " @ d%lld", (long long)p->n_depth); /* llama-bench's name */
    if (p->n_prompt > 0) {
        snprintf(test, sizeof test, "pp%lld%s", (long long)p->n_prompt, at);
        print_row(w, name, arch, size_mib, r->n_threads, test, &r->pp);
    }
    if (p->n_gen > 0) {
        snprintf(test, sizeof test, "tg%lld%s", (long long)p->n_gen, at);
        print_row(w, name, arch, size_mib, r->n_threads, test, &r->tg);
    }
    char b0[32], b1[32], b2[32], b3[32];
    printf("\n%d timed repetitions of each test after one warm-up, %lld tokens a forward step\n", p->n_reps,
           (long long)r->n_batch);
    if (strcmp(r->device, "cpu") != 0)
        printf("device           %s\nread bandwidth   %.2f GB/s (the GPU's: a 1 GiB device-to-device copy, read + "
               "written bytes)\n", r->device, r->read_bw / 1e9);
    else
        printf("read bandwidth   %.2f GB/s (measured after the tests, %d thread%s, 1 GiB buffer)\n", r->read_bw / 1e9,
               r->n_threads, r->n_threads == 1 ? "" : "s");
    printf("bytes/token      %s = weights %s + recurrent state %s + KV cache %s (%.1f positions on average)\n",
           fmt_bytes(b0, sizeof b0, r->bytes_per_token), fmt_bytes(b1, sizeof b1, (double)r->bytes.weights),
           fmt_bytes(b2, sizeof b2, (double)r->bytes.state),
           fmt_bytes(b3, sizeof b3, (double)r->bytes.kv_per_pos * r->kv_positions), r->kv_positions);
    if (p->n_gen > 0 && r->roofline == 0)
        printf("roofline         - (the model is split between the CPU and the GPU: their two memories bound it)\n");
    else if (p->n_gen > 0)
        printf("roofline         %.3f (tg %.2f t/s x %s / %.2f GB/s: %.1f%% of read bandwidth)\n", r->roofline,
               r->tg.median, b0, r->read_bw / 1e9, 100 * r->roofline);
    else
        printf("roofline         - (no decode test)\n");
    printf("peak RSS         %.1f MiB\n", r->peak_rss / (1024.0 * 1024.0));
}

/* ==== Model benchmark ==== */

/* The bytes of all the file's tensors (llama-bench's "size"). */
static double tensor_bytes(const eddy_gguf *f) {
    double sum = 0;
    for (int64_t i = 0; i < eddy_gguf_n_tensors(f); i++) {
        eddy_tensor_info t;
        eddy_gguf_tensor_info(f, i, &t);
        sum += (double)t.n_bytes;
    }
    return sum;
}

static int bench_model(const char *path, eddy_bench_params *p, int json) {
    eddy_error err;
    eddy_model *m;
    if (eddy_model_load(path, &m, &err) != EDDY_OK) return cli_error("%s", err.msg);
    cli_log_model(path, m);
    /* the vocabulary only keeps control tokens out of the random prompt: optional */
    p->vocab = eddy_model_vocab(m);
    eddy_bench_result r;
    int rc = 0;
    if (eddy_bench_model(m, p, &r, &err) != EDDY_OK) {
        rc = cli_error("%s", err.msg);
    } else {
        const char *slash = strrchr(path, '/');
        const char *name = slash ? slash + 1 : path;
        if (json) print_json(name, eddy_model_arch(m), p, &r);
        else
            print_table(name, eddy_model_arch(m), tensor_bytes(eddy_model_gguf(m)) / (1024.0 * 1024.0), p, &r);
    }
    eddy_model_free(m);
    return rc;
}

/* ==== Batched benchmark ==== */

/* flag's value "1,2,4": up to max counts in lo..hi; false after printing an error. */
static bool parse_list(const char *flag, const char *s, long long lo, long long hi, long long *out, int max, int *n) {
    *n = 0;
    if (!s) return cli_error("%s needs a list of counts, e.g. 1,2,4,8", flag), false;
    const char *p = s;
    while (*p) {
        char buf[32];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof buf || *n == max)
            return cli_error("%s: \"%s\" is not a list of at most %d counts", flag, s, max), false;
        memcpy(buf, p, len);
        buf[len] = '\0';
        if (cli_parse_int(flag, buf, lo, hi, &out[(*n)++])) return false;
        p += len + (p[len] == ',');
    }
    return *n > 0 || (cli_error("%s needs at least one count", flag), false);
}

/* --sampling's values, as the JSON names them, in the order of eddy_bench_params.sampling */
static const char *const sampling_names[] = {"argmax", "top", "logits"};

static int bench_batched(const char *path, eddy_bench_params *p, const long long *npl, int n_npl, int json) {
    eddy_error err;
    eddy_model *m;
    if (eddy_model_load(path, &m, &err) != EDDY_OK) return cli_error("%s", err.msg);
    eddy_vocab *v = NULL;
    if (eddy_vocab_load(eddy_model_gguf(m), &v, &err) != EDDY_OK) v = NULL;
    p->vocab = v;
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    int rc = 0;
    if (!json) {
        static const char *const picks[] = {"the argmax", "sampled from the best 40 logits",
                                            "sampled from whole rows of logits"};
        printf("%s (%s): %lld prompt + %lld generated tokens per sequence, each %s, median of %d runs after a "
               "warm-up\n\n", name, eddy_model_arch(m), (long long)p->n_prompt, (long long)p->n_gen,
               picks[p->sampling], p->n_reps);
        printf("|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s | S_TG/seq t/s |\n");
        printf("|------:|-------:|-----:|-------:|---------:|---------:|---------:|---------:|-------------:|\n");
    }
    for (int i = 0; i < n_npl && !rc; i++) {
        eddy_bench_batched_result r;
        if (eddy_bench_batched(m, p, npl[i], &r, &err) != EDDY_OK) {
            rc = cli_error("%s", err.msg);
            break;
        }
        if (json) {
            printf("{\"model\": \"");
            json_string(stdout, name);
            printf("\", \"arch\": \"");
            json_string(stdout, eddy_model_arch(m));
            printf("\", \"threads\": %d, \"n_seq\": %lld, \"pp_tokens\": %lld, \"tg_tokens\": %lld, "
                   "\"pp_seconds\": %.6g, \"pp_tps\": %.6g, \"tg_seconds\": %.6g, \"tg_tps\": %.6g, "
                   "\"tg_tps_per_seq\": %.6g, \"reps\": %d, \"sampling\": \"%s\"}\n",
                   r.n_threads, (long long)r.n_seq, (long long)p->n_prompt, (long long)p->n_gen, r.pp_seconds,
                   r.pp_tps, r.tg_seconds, r.tg_tps, r.tg_tps / (double)r.n_seq, p->n_reps,
                   sampling_names[p->sampling]);
        } else {
            printf("| %5lld | %6lld | %4lld | %6lld | %8.3f | %8.2f | %8.3f | %8.2f | %12.2f |\n",
                   (long long)p->n_prompt, (long long)p->n_gen, (long long)r.n_seq,
                   (long long)(r.n_seq * (p->n_prompt + p->n_gen)), r.pp_seconds, r.pp_tps, r.tg_seconds, r.tg_tps,
                   r.tg_tps / (double)r.n_seq);
        }
        fflush(stdout);
    }
    eddy_vocab_free(v);
    eddy_model_free(m);
    return rc;
}

/* ==== Verify benchmark ==== */

static int bench_verify(const char *path, eddy_bench_params *p, const long long *ks, int n_k, int json) {
    eddy_error err;
    eddy_model *m;
    if (eddy_model_load(path, &m, &err) != EDDY_OK) return cli_error("%s", err.msg);
    int64_t k[EDDY_BENCH_VERIFY_MAX];
    for (int i = 0; i < n_k; i++) k[i] = ks[i];
    eddy_bench_verify_result r;
    int rc = 0;
    if (eddy_bench_verify(m, p, k, n_k, &r, &err) != EDDY_OK) {
        rc = cli_error("%s", err.msg);
    } else if (json) {
        for (int i = 0; i < n_k; i++)
            printf("{\"arch\": \"%s\", \"threads\": %d, \"depth\": %lld, \"k\": %lld, \"plain_seconds\": %.6g, "
                   "\"verify_seconds\": %.6g, \"ratio\": %.6g, \"reps\": %d, \"sampling\": \"%s\"}\n",
                   eddy_model_arch(m), r.n_threads, (long long)r.depth, (long long)r.k[i], r.plain_seconds,
                   r.verify_seconds[i], r.ratio[i], p->n_reps, sampling_names[p->sampling]);
        if (r.mtp)
            printf("{\"arch\": \"%s\", \"threads\": %d, \"depth\": %lld, \"mtp_plain_ratio\": %.6g, "
                   "\"mtp_draft_ratio\": %.6g, \"reps\": %d}\n", eddy_model_arch(m), r.n_threads, (long long)r.depth,
                   r.mtp_plain_ratio, r.mtp_draft_ratio, p->n_reps);
    } else {
        static const char *const rows[] = {"argmax", "best 40", "logits"}; /* by --sampling */
        printf("verify steps against plain decode steps, %d threads, %lld positions deep, each row's %s, median of "
               "%d rounds:\n", r.n_threads, (long long)r.depth, rows[p->sampling], p->n_reps);
        printf("  plain step (1 token)        %8.2f ms\n", r.plain_seconds * 1e3);
        for (int i = 0; i < n_k; i++)
            printf("  verify, K = %-3lld (%3lld tokens) %8.2f ms   %5.2fx a plain step\n", (long long)r.k[i],
                   (long long)r.k[i] + 1, r.verify_seconds[i] * 1e3, r.ratio[i]);
        if (r.mtp) {
            printf("  plain step, MTP layer on    %8.2f ms   %5.2fx\n", r.plain_seconds * r.mtp_plain_ratio * 1e3,
                   r.mtp_plain_ratio);
            printf("  MTP draft (1 token)         %8.2f ms   %5.2fx\n", r.plain_seconds * r.mtp_draft_ratio * 1e3,
                   r.mtp_draft_ratio);
        }
    }
    eddy_model_free(m);
    return rc;
}

/* ==== Session benchmark ==== */

static int bench_session(const char *path, eddy_bench_params *p, const char *dir, int json) {
    eddy_error err;
    eddy_model *m;
    if (eddy_model_load(path, &m, &err) != EDDY_OK) return cli_error("%s", err.msg);
    eddy_bench_session_result r;
    int rc = 0;
    if (eddy_bench_session(m, p, dir, &r, &err) != EDDY_OK) {
        rc = cli_error("%s", err.msg);
    } else if (json) {
        printf("{\"n_prompt\": %lld, \"n_turn\": %lld, \"file_bytes\": %.0f, \"t_reprocess\": %.6g, "
               "\"t_load\": %.6g, \"t_file_turn\": %.6g, \"t_cache_turn\": %.6g, \"t_save\": %.6g, "
               "\"disk_read_gbs\": %.6g, \"load_read_gbs\": %.6g, \"device\": \"",
               (long long)r.n_prompt, (long long)r.n_turn, r.file_bytes, r.t_reprocess, r.t_load, r.t_file_turn,
               r.t_cache_turn, r.t_save, r.disk_read_bps / 1e9, r.file_bytes / r.t_load / 1e9);
        json_string(stdout, r.device);
        printf("\"}\n");
    } else {
        printf("next turn (%lld new tokens) of a %lld-token conversation on %s, best of %d after a warm-up:\n",
               (long long)r.n_turn, (long long)r.n_prompt, r.device, p->n_reps);
        printf("  reprocess everything        %8.3f s\n", r.t_reprocess);
        printf("  session file (cold) + turn  %8.3f s   %6.1fx faster (load %.3f s: %.1f MB at %.2f GB/s)\n",
               r.t_file_turn, r.t_reprocess / r.t_file_turn, r.t_load, r.file_bytes / 1e6,
               r.file_bytes / r.t_load / 1e9);
        printf("  prefix cache + turn         %8.3f s   %6.1fx faster\n", r.t_cache_turn, r.t_reprocess / r.t_cache_turn);
        printf("  disk sequential read (cold) %8.2f GB/s: the load reads at %.0f%% of it\n", r.disk_read_bps / 1e9,
               100.0 * r.file_bytes / r.t_load / r.disk_read_bps);
        printf("  session save (fsync)        %8.3f s\n", r.t_save);
    }
    eddy_model_free(m);
    return rc;
}

/* ==== Entry ==== */

int cmd_bench(int argc, char **argv) {
    int kernels = 0, json = 0, model_only = 0;
    long long threads = 0, n_prompt = 512, n_gen = 128, reps = 5, n_batch = 0, n_depth = 0;
    const char *filter = NULL, *model = NULL;
    long long npl[64];
    long long ks[EDDY_BENCH_VERIFY_MAX];
    int n_npl = 0, n_k = 0, session_turn = 0, prompt_given = 0, gen_given = 0, reps_given = 0, sampling = -1;
    const char *dir = NULL;
    eddy_device device = EDDY_DEVICE_CPU;
    int gpu_layers = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        const int dv = cli_parse_device_flag(a, val, &device, &gpu_layers);
        if (dv > 0) return 1;
        if (dv == 0) {
            i++, model_only = 1;
            continue;
        }
        if (!strcmp(a, "--kernels")) kernels = 1;
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (cli_parse_int(a, val, 1, 1024, &threads)) return 1;
            i++;
        } else if (!strcmp(a, "--filter")) {
            if (!val) return cli_error("--filter needs a benchmark name");
            filter = argv[++i];
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!val) return cli_error("%s needs a model file", a);
            model = argv[++i];
        } else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) {
            if (cli_parse_int(a, val, 0, 1 << 20, &n_prompt)) return 1;
            i++, model_only = 1, prompt_given = 1;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen")) {
            if (cli_parse_int(a, val, 0, 1 << 20, &n_gen)) return 1;
            i++, model_only = 1, gen_given = 1;
        } else if (!strcmp(a, "-d") || !strcmp(a, "--n-depth")) {
            if (cli_parse_int(a, val, 0, 1 << 20, &n_depth)) return 1;
            i++, model_only = 1;
        } else if (!strcmp(a, "--session-turn")) {
            session_turn = 1, model_only = 1;
        } else if (!strcmp(a, "--dir")) {
            if (!val) return cli_error("--dir needs a directory");
            dir = argv[++i];
        } else if (!strcmp(a, "--npl") || !strcmp(a, "-npl")) {
            if (!parse_list(a, val, 1, 4096, npl, 64, &n_npl)) return 1;
            i++, model_only = 1;
        } else if (!strcmp(a, "--sampling")) {
            if (!val) return cli_error("--sampling needs argmax, top or logits");
            for (int k = 0; k < (int)(sizeof sampling_names / sizeof *sampling_names) && sampling < 0; k++)
                if (!strcmp(val, sampling_names[k])) sampling = k;
            if (sampling < 0) return cli_error("--sampling: '%s' is none of argmax, top, logits", val);
            i++, model_only = 1;
        } else if (!strcmp(a, "--verify")) {
            if (!parse_list(a, val, 1, 64, ks, EDDY_BENCH_VERIFY_MAX, &n_k)) return 1;
            i++, model_only = 1;
        } else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size") || !strcmp(a, "-ub") ||
                   !strcmp(a, "--ubatch-size")) {
            if (cli_parse_int(a, val, 1, 1 << 20, &n_batch)) return 1;
            i++, model_only = 1;
        } else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) {
            if (cli_parse_int(a, val, 1, 1000, &reps)) return 1;
            i++, model_only = 1, reps_given = 1;
        } else {
            return cli_bad_arg("bench", a);
        }
    }
    if (kernels && model) return cli_error("bench: --kernels and -m are separate benchmarks: run one at a time");
    if (!kernels && !model) return cli_error("bench: nothing to run (use -m MODEL.gguf or --kernels)");
    if (kernels) {
        if (model_only)
            return cli_error("bench: -p, -n, -r, -b and --npl apply to model benchmarks (-m), not --kernels");
        eddy_error err;
        if (eddy_bench_kernels(filter, threads > 0 ? (int)threads : 2, json, &err) != EDDY_OK)
            return cli_error("%s", err.msg);
        return 0;
    }
    if (filter) return cli_error("bench: --filter applies to kernel benchmarks (--kernels), not -m");
    if (n_prompt == 0 && n_gen == 0) return cli_error("bench: nothing to run: -p and -n are both 0");
    eddy_bench_params p = {.n_prompt = n_prompt, .n_gen = n_gen, .n_threads = (int)threads, .n_reps = (int)reps,
                           .seed = 42, .device = device, .gpu_layers = gpu_layers, .n_batch = n_batch,
                           .n_depth = n_depth};
    if (n_depth && (session_turn || n_npl || n_k))
        return cli_error("bench: -d applies to the prefill and decode tests (-p, -n), not --session-turn, --npl "
                         "or --verify (whose -p is the depth)");
    if (session_turn && (n_npl || n_k)) return cli_error("bench: --session-turn, --npl and --verify are separate benchmarks");
    if (session_turn) {
        if (!prompt_given) p.n_prompt = 4000;
        if (!gen_given) p.n_gen = 32;
        if (!reps_given) p.n_reps = 3;
        return bench_session(model, &p, dir ? dir : ".", json);
    }
    if (dir) return cli_error("bench: --dir applies to --session-turn");
    if (sampling >= 0 && !n_npl && !n_k) return cli_error("bench: --sampling applies to --npl and --verify");
    if (sampling >= 0) p.sampling = sampling;
    if (n_k && n_npl) return cli_error("bench: --verify and --npl are separate benchmarks");
    if (n_k) {
        if (!gen_given) p.n_gen = 32;
        return bench_verify(model, &p, ks, n_k, json);
    }
    return n_npl ? bench_batched(model, &p, npl, n_npl, json) : bench_model(model, &p, json);
}
