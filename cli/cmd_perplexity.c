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
    "eddy perplexity -m MODEL.gguf -f TEXT [-c CTX] [--chunks N] [-t THREADS] [-ctk T] [-ctv T]\n"
    "                [--device cpu|cuda | -ngl N]\n"
    "        perplexity of a text, chunked as llama.cpp's perplexity tool does (each chunk of CTX\n"
    "        tokens from an empty state, its second half scored), so the figures compare;\n"
    "        --device cuda (or -ngl N, N >= 1) runs the model on the GPU (a CUDA build)\n";

int cmd_perplexity(int argc, char **argv) {
    const char *model = NULL, *file = NULL;
    long long n_ctx = 512, chunks = -1, threads = 0;
    eddy_kv_type type_k = EDDY_KV_DEFAULT, type_v = EDDY_KV_DEFAULT;
    eddy_device device = EDDY_DEVICE_CPU;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int kv = cli_parse_kv_flag(a, val, &type_k, &type_v);
        if (kv < 0) kv = cli_parse_device_flag(a, val, &device);
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
    eddy_ctx *c = NULL;
    eddy_token *toks = NULL, *probe = NULL;
    int64_t n_toks = 0, n_probe = 0;
    float *logits = NULL;
    int rc = 0;
    eddy_ctx_params cp = {.n_ctx = n_ctx, .n_threads = (int)threads, .n_batch = n_ctx, .type_k = type_k,
                          .type_v = type_v, .device = device};
    if (eddy_model_load(model, &m, &err) != EDDY_OK) {
        rc = cli_error("%s", err.msg);
        goto done;
    }
    if (!(v = cli_model_vocab(m, model))) {
        rc = 1;
        goto done;
    }
    if (eddy_tokenize(v, text, len, EDDY_TOKENIZE_ADD_SPECIAL, &toks, &n_toks, &err) != EDDY_OK ||
        eddy_tokenize(v, "", 0, EDDY_TOKENIZE_ADD_SPECIAL, &probe, &n_probe, &err) != EDDY_OK ||
        eddy_ctx_new(m, &cp, &c, &err) != EDDY_OK) {
        rc = cli_error("%s", err.msg);
        goto done;
    }
    cli_log_model(model, m);
    cli_log_ctx(c, &cp);
    const int64_t n_vocab = eddy_model_n_vocab(m), first = n_ctx / 2;
    const bool add_bos = n_probe > 0 && probe[0] == eddy_vocab_bos(v);
    int64_t n_chunk = n_toks / n_ctx;
    if (n_chunk < 2 && n_toks < 2 * n_ctx) {
        rc = cli_error("perplexity: the text has %lld tokens; a context of %lld needs at least %lld", (long long)n_toks,
                       n_ctx, 2 * n_ctx);
        goto done;
    }
    if (chunks > 0 && chunks < n_chunk) n_chunk = chunks;
    logits = malloc((size_t)(n_ctx * n_vocab) * sizeof(float));
    if (!logits) {
        rc = cli_error("cannot allocate logits for a context of %lld", n_ctx);
        goto done;
    }
    fprintf(stderr, "eddy: %lld tokens, %lld chunks of %lld, scoring the second half of each\n", (long long)n_toks,
            (long long)n_chunk, n_ctx);
    double nll = 0, nll2 = 0;
    int64_t count = 0;
    for (int64_t ch = 0; ch < n_chunk; ch++) {
        eddy_token *chunk = toks + ch * n_ctx;
        eddy_token saved = chunk[0];
        if (add_bos) chunk[0] = eddy_vocab_bos(v);
        eddy_ctx_reset(c);
        eddy_status s = eddy_ctx_eval(c, chunk, n_ctx, logits, 1, &err);
        chunk[0] = saved;
        if (s != EDDY_OK) {
            rc = cli_error("%s", err.msg);
            goto done;
        }
        for (int64_t p = first; p < n_ctx - 1; p++) {
            const float *row = logits + p * n_vocab;
            float max = row[0];
            for (int64_t j = 1; j < n_vocab; j++)
                if (row[j] > max) max = row[j];
            double sum = 0;
            for (int64_t j = 0; j < n_vocab; j++) sum += exp((double)row[j] - max);
            double lp = (double)row[chunk[p + 1]] - max - log(sum);
            nll -= lp;
            nll2 += lp * lp;
            count++;
        }
        printf("[%lld]%.4f,", (long long)ch + 1, exp(nll / count));
        fflush(stdout);
    }
    double mean = nll / count, var = nll2 / count - mean * mean;
    double ppl = exp(mean), ppl_err = count > 1 && var > 0 ? ppl * sqrt(var / (count - 1)) : 0;
    printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, ppl_err);
done:
    free(logits);
    eddy_buffer_free(probe);
    eddy_buffer_free(toks);
    eddy_ctx_free(c);
    eddy_model_free(m);
    free(text);
    return rc;
}
