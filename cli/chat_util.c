/*
 * chat_util.c — what `eddy run --chat` and `eddy chat` share: turning a conversation
 * into prompt tokens with the model's chat template, and the --chat-template flag.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_chat_tokens(const eddy_vocab *v, const eddy_chat_message *msgs, int64_t n, const eddy_chat_options *opt,
                    eddy_token **out, int64_t *n_out) {
    eddy_error err;
    char *text;
    size_t len;
    if (eddy_chat_format(v, msgs, n, opt, &text, &len, &err) != EDDY_OK) return cli_error("%s", err.msg);
    eddy_token *ids = NULL;
    int64_t n_ids = 0;
    eddy_status s = eddy_tokenize(v, text, len, 0, &ids, &n_ids, &err);
    eddy_buffer_free(text);
    if (s != EDDY_OK) return cli_error("%s", err.msg);
    /* BOS when the vocabulary adds one to prompts and the template did not write it */
    eddy_token bos = eddy_vocab_bos(v), *probe = NULL;
    int64_t n_probe = 0;
    bool wants_bos = eddy_tokenize(v, "", 0, EDDY_TOKENIZE_ADD_SPECIAL, &probe, &n_probe, NULL) == EDDY_OK &&
                     n_probe > 0 && probe[0] == bos;
    eddy_buffer_free(probe);
    if (wants_bos && bos >= 0 && (n_ids == 0 || ids[0] != bos)) {
        eddy_token *with = malloc((size_t)(n_ids + 1) * sizeof *with);
        if (!with) {
            eddy_buffer_free(ids);
            return cli_error("out of memory");
        }
        with[0] = bos;
        memcpy(with + 1, ids, (size_t)n_ids * sizeof *ids);
        eddy_buffer_free(ids);
        *out = with;
        *n_out = n_ids + 1;
        return 0;
    }
    /* hand back memory the caller frees with free() either way */
    eddy_token *copy = malloc((size_t)(n_ids ? n_ids : 1) * sizeof *copy);
    if (!copy) {
        eddy_buffer_free(ids);
        return cli_error("out of memory");
    }
    memcpy(copy, ids, (size_t)n_ids * sizeof *ids);
    eddy_buffer_free(ids);
    *out = copy;
    *n_out = n_ids;
    return 0;
}

int cli_chat_template(const char *arg, const char **tmpl, char **owned) {
    *owned = NULL;
    *tmpl = NULL;
    if (!arg) return 0;
    if (eddy_chat_builtin(arg)) {
        *tmpl = arg;
        return 0;
    }
    char *buf = cli_read_file(arg, NULL);
    if (!buf && errno == ENOMEM) return cli_error("out of memory");
    if (!buf)
        return cli_error("--chat-template: \"%s\" is neither a built-in template (chatml, llama3) nor a readable file",
                         arg);
    *tmpl = *owned = buf;
    return 0;
}
