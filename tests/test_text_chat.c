/*
 * test_text_chat.c — chat templates: eddy's Jinja interpreter against Hugging Face
 * transformers' apply_chat_template on the committed cases
 * (tests/data/text/chat.json, made by scripts/gen_chat_golden.py) for the Qwen3,
 * Qwen3.5, SmolLM2 and Llama 3.1 / 3.2 templates; the variables a model file
 * supplies; errors for unsupported templates; and the language's corners.
 */
#include <stdlib.h>

#include "test.h"
#include "eddy.h"
#include "text/jinja.h"
#include "text/jvalue.h"

static eddy_vocab *chat_vocab(const char *rel) {
    eddy_gguf *f;
    eddy_error err;
    if (eddy_gguf_open(test_data_path(rel), &f, &err) != EDDY_OK) {
        CHECKF(false, "%s", err.msg);
        return NULL;
    }
    eddy_vocab *v = NULL;
    if (eddy_vocab_load(f, &v, &err) != EDDY_OK) CHECKF(false, "%s", err.msg);
    eddy_gguf_close(f);
    return v;
}

static char *cstr(jv s) {
    char *p = malloc(s.str.n + 1);
    memcpy(p, s.str.s, s.str.n);
    p[s.str.n] = '\0';
    return p;
}

/* ==== Golden conversations ==== */

TEST(text_chat_golden) {
    size_t n;
    char *json = test_read_file(test_data_path("text/chat.json"), &n);
    REQUIRE(json != NULL);
    jarena *a = jarena_new();
    jv cases;
    char msg[200];
    REQUIRE(jv_json_parse(a, json, n, &cases, msg, sizeof msg));
    REQUIRE(cases.t == JV_LIST && cases.list->n >= 50);
    eddy_vocab *v = chat_vocab("text/qwen3.gguf");
    REQUIRE(v != NULL);
    int64_t ok = 0;
    for (int64_t i = 0; i < cases.list->n; i++) {
        jv c = cases.list->items[i];
        char *tname = cstr(jv_dict_get(c, "template", 8));
        char *messages = cstr(jv_dict_get(c, "messages", 8));
        char *vars = cstr(jv_dict_get(c, "vars", 4));
        jv expected = jv_dict_get(c, "expected", 8);
        bool want_error = jv_truthy(jv_dict_get(c, "error", 5));
        char rel[128];
        snprintf(rel, sizeof rel, "text/templates/%s", tname);
        size_t tn;
        char *tmpl = test_read_file(test_data_path(rel), &tn);
        if (!CHECKF(tmpl != NULL, "cannot read %s", rel)) continue;
        tmpl = realloc(tmpl, tn + 1);
        tmpl[tn] = '\0';
        eddy_chat_options opt = {tmpl, jv_truthy(jv_dict_get(c, "add_generation_prompt", 21)), -1, vars};
        char *out = NULL;
        size_t len = 0;
        eddy_error err;
        eddy_status st = eddy_chat_format_json(v, messages, &opt, &out, &len, &err);
        if (want_error) {
            if (CHECKF(st == EDDY_ERR_ARG, "case %lld (%s): expected the template to refuse, got %s", (long long)i,
                       tname, st == EDDY_OK ? out : err.msg))
                ok++;
        } else if (!CHECKF(st == EDDY_OK, "case %lld (%s): %s", (long long)i, tname, err.msg)) {
        } else if (len == expected.str.n && memcmp(out, expected.str.s, len) == 0) {
            ok++;
        } else {
            size_t d = 0;
            while (d < len && d < expected.str.n && out[d] == expected.str.s[d]) d++;
            CHECKF(false, "case %lld (%s, messages %s): differs at byte %zu:\n--- eddy:\n%s\n--- expected:\n%.*s", (long long)i,
                   tname, messages, d, out, (int)expected.str.n, expected.str.s);
        }
        eddy_buffer_free(out);
        free(tmpl);
        free(tname);
        free(messages);
        free(vars);
    }
    CHECKF(ok == cases.list->n, "%lld of %lld chat cases identical", (long long)ok, (long long)cases.list->n);
    if (getenv("EDDY_TEST_VERBOSE")) printf("  chat: %lld/%lld cases identical\n", (long long)ok, (long long)cases.list->n);
    eddy_vocab_free(v);
    jarena_free(a);
    free(json);
}
