/*
 * cmd_tokenize.c — `eddy tokenize`, `eddy detokenize` and `eddy chat-format`: the
 * model's tokenizer and chat template from the command line.
 * (usage_tokenize, usage_detokenize and usage_chat_format below).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char usage_tokenize[] =
    "eddy tokenize -m MODEL.gguf [--file PATH | TEXT] [--no-special] [--no-bos]\n"
    "        token ids, space-separated, one line. --file: all of the file's bytes (\"-\": standard\n"
    "        input); --no-special: control tokens written in the text are plain text; --no-bos:\n"
    "        no BOS even where the model adds one\n";
const char usage_detokenize[] =
    "eddy detokenize -m MODEL.gguf [--skip-control] ID...\n"
    "        the text of token ids (--skip-control: control tokens give none)\n";
const char usage_chat_format[] =
    "eddy chat-format -m MODEL.gguf [--system|--user|--assistant TEXT]... [--messages FILE.json]\n"
    "                 [--chat-template NAME|FILE] [--no-generation-prompt] [--think|--no-think]\n"
    "                 [--vars JSON]\n"
    "        the prompt the model's chat template makes (--vars: more template variables)\n";

/* ==== Shared ==== */

/* Reads a whole file (or stdin for "-"); NUL-terminates. NULL with a message printed. */
static char *read_all(const char *path, size_t *len) {
    char *buf = cli_read_file(path, len);
    if (!buf) {
        if (errno == ENOMEM || errno == EIO) cli_error("%s: cannot read file", path);
        else cli_error("%s: cannot open file (%s)", path, strerror(errno));
    }
    return buf;
}

/* Opens MODEL.gguf and loads its vocabulary. */
static int open_vocab(const char *path, eddy_gguf **f, eddy_vocab **v) {
    eddy_error err;
    if (eddy_gguf_open(path, f, &err) != EDDY_OK) return cli_error("%s", err.msg);
    if (eddy_vocab_load(*f, v, &err) != EDDY_OK) {
        eddy_gguf_close(*f);
        return cli_error("%s: %s", path, err.msg);
    }
    return 0;
}

/* ==== tokenize ==== */

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *text = NULL;
    unsigned flags = EDDY_TOKENIZE_ADD_SPECIAL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (++i >= argc) return cli_error("%s needs a model file", a);
            model = argv[i];
        } else if (!strcmp(a, "--file") || !strcmp(a, "-f")) {
            if (++i >= argc) return cli_error("%s needs a file name", a);
            file = argv[i];
        } else if (!strcmp(a, "--no-special")) {
            flags |= EDDY_TOKENIZE_NO_SPECIAL;
        } else if (!strcmp(a, "--no-bos")) {
            flags &= ~(unsigned)EDDY_TOKENIZE_ADD_SPECIAL;
        } else if (!strcmp(a, "--")) {
            if (i + 1 < argc) text = argv[++i];
            if (i + 1 < argc) return cli_error("tokenize: unexpected argument \"%s\" (quote the text)", argv[i + 1]);
        } else if (a[0] == '-' && a[1] != '\0') {
            return cli_bad_arg("tokenize", a);
        } else if (!text) {
            text = a;
        } else {
            return cli_error("tokenize: unexpected argument \"%s\" (quote the text)", a);
        }
    }
    if (!model) return cli_error("tokenize: no model given (usage: eddy tokenize -m MODEL.gguf TEXT)");
    if (!!file + !!text != 1) return cli_error("tokenize: give the text or --file PATH (one of them)");
    size_t len = 0;
    char *buf = NULL;
    if (file) {
        if (!(buf = read_all(file, &len))) return 1;
        text = buf;
    } else {
        len = strlen(text);
    }
    eddy_gguf *f;
    eddy_vocab *v;
    if (open_vocab(model, &f, &v)) {
        free(buf);
        return 1;
    }
    eddy_error err;
    eddy_token *ids;
    int64_t n;
    int rc = 0;
    if (eddy_tokenize(v, text, len, flags, &ids, &n, &err) != EDDY_OK) {
        rc = cli_error("%s", err.msg);
    } else {
        /* one line: format into a buffer, one write */
        size_t cap = (size_t)n * 12 + 2, k = 0;
        char *line = malloc(cap);
        if (!line) {
            rc = cli_error("out of memory");
        } else {
            for (int64_t i = 0; i < n; i++) { /* ids are non-negative; printf is slow at 10^5 ids */
                char digits[12];
                int nd = 0;
                uint32_t x = (uint32_t)ids[i];
                do digits[nd++] = (char)('0' + x % 10), x /= 10;
                while (x);
                if (i) line[k++] = ' ';
                while (nd) line[k++] = digits[--nd];
            }
            line[k++] = '\n';
            if (!cli_out(line, k)) rc = 1; /* main names the failed write */
            free(line);
        }
        eddy_buffer_free(ids);
    }
    eddy_vocab_free(v);
    eddy_gguf_close(f);
    free(buf);
    return rc;
}

/* ==== detokenize ==== */

/* Appends the ids in one argument ("12 34", "12,34" or "12") to *ids. */
static int parse_ids(const char *a, eddy_token **ids, int64_t *n, int64_t *cap) {
    const char *p = a;
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) return 0;
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX || (*end && *end != ' ' && *end != ','))
            return cli_error("detokenize: \"%s\" is not a token id", a);
        if (*n == *cap) {
            int64_t c = *cap ? *cap * 2 : 64;
            eddy_token *more = realloc(*ids, (size_t)c * sizeof **ids);
            if (!more) return cli_error("out of memory");
            *ids = more;
            *cap = c;
        }
        (*ids)[(*n)++] = (eddy_token)x;
        p = end;
    }
}

int cmd_detokenize(int argc, char **argv) {
    const char *model = NULL;
    unsigned flags = 0;
    eddy_token *ids = NULL;
    int64_t n = 0, cap = 0;
    int rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (++i >= argc) rc = cli_error("%s needs a model file", a);
            else model = argv[i];
        } else if (!strcmp(a, "--skip-control")) {
            flags |= EDDY_DETOK_SKIP_CONTROL;
        } else if (a[0] == '-' && a[1] != '\0') {
            rc = cli_bad_arg("detokenize", a);
            if (!rc) { /* --help: printed */
                free(ids);
                return 0;
            }
        } else {
            rc = parse_ids(a, &ids, &n, &cap);
        }
    }
    if (!rc && !model) rc = cli_error("detokenize: no model given (usage: eddy detokenize -m MODEL.gguf ID...)");
    eddy_gguf *f;
    eddy_vocab *v;
    if (!rc && !(rc = open_vocab(model, &f, &v))) {
        eddy_error err;
        char *text;
        size_t len;
        if (eddy_detokenize(v, ids, n, flags, &text, &len, &err) != EDDY_OK) {
            rc = cli_error("%s", err.msg);
        } else {
            if (!cli_out(text, len) || !cli_out("\n", 1)) rc = 1; /* main names the failed write */
            eddy_buffer_free(text);
        }
        eddy_vocab_free(v);
        eddy_gguf_close(f);
    }
    free(ids);
    return rc;
}

/* ==== chat-format ==== */

int cmd_chat_format(int argc, char **argv) {
    const char *model = NULL, *tmpl_arg = NULL, *messages_file = NULL, *vars = NULL;
    eddy_chat_options opt = {NULL, true, -1, NULL};
    eddy_chat_message *msgs = calloc((size_t)argc, sizeof *msgs);
    int64_t n = 0;
    int rc = 0;
    if (!msgs) return cli_error("out of memory");
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "--chat-template") || !strcmp(a, "--messages") ||
            !strcmp(a, "--vars") || !strcmp(a, "--system") || !strcmp(a, "--user") || !strcmp(a, "--assistant")) {
            if (++i >= argc) {
                rc = cli_error("%s needs a value", a);
                break;
            }
            if (a[1] == 'm' || !strcmp(a, "--model")) model = argv[i];
            else if (!strcmp(a, "--chat-template")) tmpl_arg = argv[i];
            else if (!strcmp(a, "--messages")) messages_file = argv[i];
            else if (!strcmp(a, "--vars")) vars = argv[i];
            else {
                msgs[n].role = a + 2;
                msgs[n].content = argv[i];
                n++;
            }
        } else if (!strcmp(a, "--no-generation-prompt")) {
            opt.add_generation_prompt = false;
        } else if (!strcmp(a, "--think") || !strcmp(a, "--no-think")) {
            opt.enable_thinking = a[2] == 't';
        } else {
            rc = cli_bad_arg("chat-format", a);
            if (!rc) { /* --help: printed */
                free(msgs);
                return 0;
            }
        }
    }
    if (!rc && !model) rc = cli_error("chat-format: no model given (usage: eddy chat-format -m MODEL.gguf --user TEXT)");
    if (!rc && messages_file && n) rc = cli_error("chat-format: give --messages FILE or --system/--user/--assistant, not both");
    char *tmpl_text = NULL, *json = NULL;
    size_t len;
    if (!rc && tmpl_arg) {
        if (eddy_chat_builtin(tmpl_arg)) opt.template_text = tmpl_arg;
        else if ((tmpl_text = read_all(tmpl_arg, &len))) opt.template_text = tmpl_text;
        else rc = 1;
    }
    if (!rc && messages_file && !(json = read_all(messages_file, &len))) rc = 1;
    opt.extra_json = vars;
    eddy_gguf *f;
    eddy_vocab *v;
    if (!rc && !(rc = open_vocab(model, &f, &v))) {
        eddy_error err;
        char *text;
        eddy_status st = json ? eddy_chat_format_json(v, json, &opt, &text, &len, &err)
                              : eddy_chat_format(v, msgs, n, &opt, &text, &len, &err);
        if (st != EDDY_OK) {
            rc = cli_error("%s", err.msg);
        } else {
            if (!cli_out(text, len)) rc = 1; /* main names the failed write */
            eddy_buffer_free(text);
        }
        eddy_vocab_free(v);
        eddy_gguf_close(f);
    }
    free(tmpl_text);
    free(json);
    free(msgs);
    return rc;
}
