/*
 * args.c — argument helpers: refusing an argument by name (with a hint where it is
 * a llama.cpp option eddy lacks), --help for every subcommand, llama.cpp's escape
 * sequences (-e), NUL bytes in chat texts, and random seeds.
 */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* ==== Arguments a subcommand does not take ==== */

/* llama.cpp options eddy has no equivalent of, and what to do instead. Options
 * whose meaning eddy has are accepted under llama.cpp's spelling instead (run's
 * help lists them). */
static const struct {
    const char *flags; /* space-separated spellings */
    const char *hint;
} llama_hints[] = {
    {"-sm --split-mode -ts --tensor-split -mg --main-gpu -dev",
     "eddy runs a model on the CPU, on one GPU (--device cuda) or split between the two (-ngl N)"},
    {"-fa --flash-attn", "eddy has one attention implementation, nothing to switch"},
    {"-tb --threads-batch -C --cpu-mask -Cr --cpu-range --cpu-strict --prio --poll --numa",
     "eddy takes only -t, for prefill and decode alike"},
    {"-i --interactive -if --interactive-first --in-prefix --in-suffix --in-prefix-bos",
     "eddy chat is the interactive mode; the chat template formats the turns"},
    {"--mirostat --mirostat-lr --mirostat-ent --typical --dry-multiplier --dry-base --dry-allowed-length "
     "--dry-penalty-last-n --dry-sequence-breaker --xtc-probability --xtc-threshold --top-nsigma --samplers "
     "--sampling-seq --dynatemp-range --dynatemp-exp -l --logit-bias --grammar --grammar-file -j --json-schema",
     "eddy samples with penalties, top-k, top-p, min-p and temperature only"},
    {"--lora --lora-scaled --control-vector --control-vector-scaled", "eddy loads no adapters"},
    {"-hf -hfr --hf-repo -hff --hf-file -mu --model-url", "eddy downloads nothing: give a GGUF file with -m"},
    {"-np --parallel -cb --cont-batching", "eddy run and chat run one sequence"},
    {"--rope-scaling --rope-scale --rope-freq-base --rope-freq-scale --yarn-orig-ctx --yarn-ext-factor "
     "--yarn-attn-factor --yarn-beta-slow --yarn-beta-fast",
     "eddy takes RoPE parameters from the model file"},
    {"-v --verbose --log-verbose -lv --verbosity --verbose-prompt", "set EDDY_LOG_LEVEL=info or debug"},
    {"--log-file --log-disable --log-colors --log-prefix --log-timestamps",
     "eddy logs to stderr; EDDY_LOG_LEVEL=error quiets it"},
    {"--keep --context-shift --no-context-shift", "a full context ends the generation; eddy does not shift it"},
    {"--prompt-cache --prompt-cache-all --prompt-cache-ro", "eddy has no prompt cache files yet"},
    {"-md --model-draft --draft --draft-max --draft-min --draft-p-min", "eddy has no speculative decoding yet"},
    {"--mmproj --image", "eddy runs text models only"},
    {"-ot --override-tensor --cpu-moe -cmoe --n-cpu-moe -ncmoe", "all weights stay in CPU memory"},
    {"-dt --defrag-thold -kvu --kv-unified --swa-full --no-kv-offload -nkvo", "eddy's KV cache has no such setting"},
    {"-co --color", "eddy prints plain text"},
    {"--no-warmup", "eddy runs no warm-up"},
};

/* The hint for a llama.cpp option eddy lacks, or NULL. */
static const char *llama_hint(const char *a) {
    size_t n = strlen(a);
    for (size_t i = 0; i < sizeof llama_hints / sizeof llama_hints[0]; i++) {
        for (const char *p = llama_hints[i].flags; (p = strstr(p, a)); p += n)
            if ((p == llama_hints[i].flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
                return llama_hints[i].hint;
    }
    return NULL;
}

int cli_bad_arg(const char *cmd, const char *a) {
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return cli_usage(cmd);
    if (a[0] != '-' || a[1] == '\0')
        return cli_error("unexpected argument '%s' for '%s' (eddy %s --help lists what it takes)", a, cmd, cmd);
    const char *hint = llama_hint(a);
    if (hint) return cli_error("unknown option '%s' for '%s' (a llama.cpp option: %s)", a, cmd, hint);
    return cli_error("unknown option '%s' for '%s' (eddy %s --help lists the options)", a, cmd, cmd);
}

/* ==== Texts ==== */

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

size_t cli_unescape(char *s, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '\\' || i + 1 == len) {
            s[o++] = s[i];
            continue;
        }
        char c = s[i + 1];
        int hi, lo;
        switch (c) {
        case 'n': s[o++] = '\n'; i++; break;
        case 'r': s[o++] = '\r'; i++; break;
        case 't': s[o++] = '\t'; i++; break;
        case '\'':
        case '"':
        case '\\': s[o++] = c; i++; break;
        case 'x':
            if (i + 3 < len && (hi = hex_digit(s[i + 2])) >= 0 && (lo = hex_digit(s[i + 3])) >= 0) {
                s[o++] = (char)(hi * 16 + lo);
                i += 3;
            } else {
                s[o++] = '\\';
            }
            break;
        default: s[o++] = '\\'; break; /* kept, and the next byte as it is */
        }
    }
    return o;
}

int cli_check_no_nul(const char *what, const char *s, size_t len) {
    const char *z = memchr(s, '\0', len);
    if (!z) return 0;
    return cli_error("%s: byte %zu is a NUL byte, which a chat message cannot hold (eddy run without --chat "
                     "takes any bytes)",
                     what, (size_t)(z - s));
}

/* ==== Seeds ==== */

uint64_t cli_random_seed(void) {
    uint32_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r) return r;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32;
    x ^= x >> 31, x *= 0x9e3779b97f4a7c15u, x ^= x >> 29; /* mixed, then kept to 32 bits as above */
    return (uint32_t)x;
}
