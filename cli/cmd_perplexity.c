/*
 * cmd_perplexity.c — `eddy perplexity`: a model's perplexity on a text file,
 * chunked as llama.cpp's perplexity tool does so the figures compare:
 *
 *   the text is tokenized whole (BOS as the file asks); chunk i is tokens
 *   [i*c, (i+1)*c), evaluated from an empty state with its first token replaced by
 *   BOS when the vocabulary adds one; the second half of each chunk is scored, each
 *   position predicting the next token: c/2 - 1 tokens per chunk.
 *
 * Prints the running estimate per chunk, then "Final estimate: PPL = X +/- E".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char usage_perplexity[] =
    "eddy perplexity -m MODEL.gguf -f TEXT [-c CTX] [--chunks N] [-b N] [-t THREADS] [-ctk T] [-ctv T]\n"
    "                [--device cpu|cuda | -ngl N]\n"
    "        perplexity of a text, chunked as llama.cpp's perplexity tool does (each chunk of CTX\n"
    "        tokens from an empty state, its second half scored), so the figures compare;\n"
    "        --device cuda runs the model on the GPU (a CUDA build; -ngl N: its last N layers); -b N\n"
    "        evaluates N / CTX chunks together in a step, as sequences of one batch (default:\n"
    "        2048 tokens on a GPU, one chunk on the CPU); the figures are the same either way\n";

/* The negative log-likelihood of each scored token of a chunk: lp holds the
 * log-probabilities of its positions [first, n_ctx - 1) for the token after each. */
static void score_chunk(const double *lp, int64_t first, int64_t n_ctx, double *nll, double *nll2, int64_t *count) {
    for (int64_t p = first; p < n_ctx - 1; p++) {
        const double l = lp[p - first];
        *nll -= l;
        *nll2 += l * l;
        (*count)++;
    }
}

int cmd_perplexity(int argc, char **argv) {
    const char *model = NULL, *file = NULL;
    long long n_ctx = 512, chunks = -1, threads = 0, batch = 0;
    eddy_kv_type type_k = EDDY_KV_DEFAULT, type_v = EDDY_KV_DEFAULT;
    eddy_device device = EDDY_DEVICE_CPU;
    int gpu_layers = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int kv = cli_parse_kv_flag(a, val, &type_k, &type_v);
        if (kv < 0) kv = cli_parse_device_flag(a, val, &device, &gpu_layers);
        if (kv > 0) return 1;
        if (kv == 0) {
            i++;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!val) return cli_error("%s needs a model file", a);
            model = argv[++i];
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!val) return cli_error("%s needs a text file", a);
            file = argv[++i];
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            if (cli_parse_int(a, val, 4, 1 << 20, &n_ctx)) return 1;
            i++;
        } else if (!strcmp(a, "--chunks")) {
            if (cli_parse_int(a, val, 1, 1 << 30, &chunks)) return 1;
            i++;
        } else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) {
            if (cli_parse_int(a, val, 1, 1 << 24, &batch)) return 1;
            i++;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (cli_parse_int(a, val, 1, 1024, &threads)) return 1;
            i++;
        } else {
            return cli_bad_arg("perplexity", a);
        }
    }
    if (!model) return cli_error("perplexity: no model given (-m MODEL.gguf)");
    if (!file) return cli_error("perplexity: no text given (-f FILE)");
    size_t len;
    char *text = cli_read_file(file, &len);
    if (!text) return cli_error("%s: cannot read the text file", file);

    eddy_error err;
    eddy_model *m = NULL;
    const eddy_vocab *v = NULL;
    eddy_engine *e = NULL;
    eddy_seq **seqs = NULL, **row_seq = NULL;
    eddy_token *toks = NULL, *probe = NULL, *tokens = NULL;
    int8_t *want = NULL;
    int64_t n_toks = 0, n_probe = 0, per_step = 1;
    eddy_token *targets = NULL;
    double *logprobs = NULL;
    int rc = 0;
    if (eddy_model_load(model, &m, &err) != EDDY_OK) {
        rc = cli_error("%s", err.msg);
        goto done;
    }
    if (!(v = cli_model_vocab(m, model))) {
        rc = 1;
        goto done;
    }
    if (eddy_tokenize(v, text, len, EDDY_TOKENIZE_ADD_SPECIAL, &toks, &n_toks, &err) != EDDY_OK ||
        eddy_tokenize(v, "", 0, EDDY_TOKENIZE_ADD_SPECIAL, &probe, &n_probe, &err) != EDDY_OK) {
        rc = cli_error("%s", err.msg);
        goto done;
    }
    cli_log_model(model, m);
    const int64_t first = n_ctx / 2, scored = n_ctx - 1 - first;
    const bool add_bos = n_probe > 0 && probe[0] == eddy_vocab_bos(v);
    int64_t n_chunk = n_toks / n_ctx;
    if (n_chunk < 2 && n_toks < 2 * n_ctx) {
        rc = cli_error("perplexity: the text has %lld tokens; a context of %lld needs at least %lld", (long long)n_toks,
                       n_ctx, 2 * n_ctx);
        goto done;
    }
    if (chunks > 0 && chunks < n_chunk) n_chunk = chunks;
    /* chunks a step: sequences of one batch, each from an empty state */
    if (batch <= 0) batch = device == EDDY_DEVICE_CUDA ? 2048 : n_ctx;
    per_step = batch / n_ctx < 1 ? 1 : batch / n_ctx < n_chunk ? batch / n_ctx : n_chunk;
    const eddy_engine_params ep = {.n_ctx = n_ctx, .n_seq_max = (int)per_step, .n_threads = (int)threads,
                                   .n_batch = per_step * n_ctx, .type_k = type_k, .type_v = type_v,
                                   .device = device, .gpu_layers = gpu_layers};
    if (eddy_engine_new(m, &ep, &e, &err) != EDDY_OK) {
        rc = cli_error("%s", err.msg);
        goto done;
    }
    seqs = calloc((size_t)per_step, sizeof *seqs);
    row_seq = malloc((size_t)(per_step * n_ctx) * sizeof *row_seq);
    tokens = malloc((size_t)(per_step * n_ctx) * sizeof *tokens);
    want = malloc((size_t)(per_step * n_ctx));
    targets = malloc((size_t)(per_step * scored) * sizeof *targets);
    logprobs = malloc((size_t)(per_step * scored) * sizeof *logprobs);
    if (!seqs || !row_seq || !tokens || !want || !targets || !logprobs) {
        rc = cli_error("out of memory for %lld chunks of %lld", (long long)per_step, n_ctx);
        goto done;
    }
    for (int64_t k = 0; k < per_step; k++) { /* chunk k of a step: rows [k n_ctx, (k + 1) n_ctx), sequence k */
        if (eddy_seq_new(e, &seqs[k], &err) != EDDY_OK) {
            rc = cli_error("%s", err.msg);
            goto done;
        }
        for (int64_t p = 0; p < n_ctx; p++) {
            row_seq[k * n_ctx + p] = seqs[k];
            want[k * n_ctx + p] = p >= first && p < n_ctx - 1;
        }
    }
    fprintf(stderr, "eddy: %lld tokens, %lld chunks of %lld, scoring the second half of each; %lld chunk%s a step "
            "on %s\n", (long long)n_toks, (long long)n_chunk, n_ctx, (long long)per_step, per_step == 1 ? "" : "s",
            eddy_engine_device_name(e));
    double nll = 0, nll2 = 0;
    int64_t count = 0;
    for (int64_t ch0 = 0; ch0 < n_chunk; ch0 += per_step) {
        const int64_t k_n = n_chunk - ch0 < per_step ? n_chunk - ch0 : per_step;
        for (int64_t k = 0; k < k_n; k++) {
            eddy_token *t = tokens + k * n_ctx;
            memcpy(t, toks + (ch0 + k) * n_ctx, (size_t)n_ctx * sizeof *t);
            if (add_bos) t[0] = eddy_vocab_bos(v);
            eddy_seq_clear(seqs[k]);
            /* each scored position predicts the next token of the chunk as the text has it */
            memcpy(targets + k * scored, toks + (ch0 + k) * n_ctx + first + 1, (size_t)scored * sizeof *targets);
        }
        /* on a GPU the log-probabilities are computed there: 8 bytes a row come back */
        const eddy_batch b = {k_n * n_ctx, tokens, row_seq, want};
        if (eddy_engine_decode_logprob(e, &b, targets, logprobs, &err) != EDDY_OK) {
            rc = cli_error("%s", err.msg);
            goto done;
        }
        for (int64_t k = 0; k < k_n; k++) {
            score_chunk(logprobs + k * scored, first, n_ctx, &nll, &nll2, &count);
            printf("[%lld]%.4f,", (long long)(ch0 + k + 1), exp(nll / count));
        }
        fflush(stdout);
    }
    double mean = nll / count, var = nll2 / count - mean * mean;
    double ppl = exp(mean), ppl_err = count > 1 && var > 0 ? ppl * sqrt(var / (count - 1)) : 0;
    printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, ppl_err);
done:
    for (int64_t k = 0; seqs && k < per_step; k++) eddy_seq_free(seqs[k]);
    free(seqs);
    free(row_seq);
    free(tokens);
    free(want);
    free(targets);
    free(logprobs);
    eddy_buffer_free(probe);
    eddy_buffer_free(toks);
    eddy_engine_free(e);
    eddy_model_free(m);
    free(text);
    return rc;
}
