/*
 * chat.c — formatting a conversation with a model's chat template:
 * eddy_chat_format, eddy_chat_format_json, eddy_chat_builtin.
 *
 * Owns: the variables a template sees, set up as Hugging Face transformers'
 * apply_chat_template sets them (messages, tools = none, documents = none,
 * add_generation_prompt, the special-token texts, enable_thinking when given,
 * caller extras last), including its aliasing of reasoning fields
 * ("reasoning_content", "thinking", "reasoning"); and the built-in templates for
 * --chat-template. The language itself is jinja_*.c.
 */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "text/jinja.h"
#include "text/vocab.h"

/* ==== Built-in templates ==== */

static const struct {
    const char *name, *text;
} builtins[] = {
    {"chatml",
     "{%- for message in messages %}"
     "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
     "{%- endfor %}"
     "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"},
    {"llama3",
     "{{- bos_token }}"
     "{%- for message in messages %}"
     "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
     "{%- endfor %}"
     "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"},
};

const char *eddy_chat_builtin(const char *name) {
    for (size_t i = 0; name && i < sizeof builtins / sizeof builtins[0]; i++)
        if (!strcmp(name, builtins[i].name)) return builtins[i].text;
    return NULL;
}

/* ==== Variables ==== */

static const char *const reasoning_keys[] = {"reasoning_content", "thinking", "reasoning"};

/* {"thinking": r, **message, "reasoning_content": r} when the message carries
 * reasoning under any of its names, as transformers does before rendering. */
static bool alias_reasoning(jarena *a, jv *msg) {
    if (msg->t != JV_DICT) return true;
    jv r = jv_undef();
    for (int k = 0; k < 3 && r.t == JV_UNDEF; k++) {
        jv x = jv_dict_get(*msg, reasoning_keys[k], strlen(reasoning_keys[k]));
        if (x.t != JV_UNDEF && x.t != JV_NONE) r = x;
    }
    if (r.t == JV_UNDEF) return true;
    jv d = jv_dict_new(a);
    if (d.t != JV_DICT || !jv_dict_set(a, d, jv_strn("thinking", 8), r)) return false;
    for (int64_t i = 0; i < msg->dict->n; i++)
        if (!jv_dict_set(a, d, msg->dict->keys[i], msg->dict->vals[i])) return false;
    if (!jv_dict_set(a, d, jv_strn("reasoning_content", 17), r)) return false;
    *msg = d;
    return true;
}

static eddy_status render(const eddy_vocab *v, jarena *a, jv messages, const eddy_chat_options *opt, char **out,
                          size_t *len, eddy_error *err) {
    const char *tmpl = opt && opt->template_text ? opt->template_text : v->chat_template;
    if (!tmpl)
        return eddy_error_set(err, EDDY_ERR_NOT_FOUND,
                              "this model file has no chat template (tokenizer.chat_template); pass one with "
                              "--chat-template (a file, or one of: chatml, llama3)");
    const char *builtin = eddy_chat_builtin(tmpl);
    if (builtin) tmpl = builtin;

    for (int64_t i = 0; i < messages.list->n; i++)
        if (!alias_reasoning(a, &messages.list->items[i]))
            return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory formatting the chat");
    jv vars = jv_dict_new(a);
    if (vars.t != JV_DICT) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory formatting the chat");
    bool ok = jv_dict_set(a, vars, jv_strn("messages", 8), messages) &&
              jv_dict_set(a, vars, jv_strn("tools", 5), jv_none()) &&
              jv_dict_set(a, vars, jv_strn("documents", 9), jv_none()) &&
              jv_dict_set(a, vars, jv_strn("add_generation_prompt", 21), jv_bool(opt && opt->add_generation_prompt));
    if (ok && v->bos >= 0) ok = jv_dict_set(a, vars, jv_strn("bos_token", 9), jv_strn(v->bos_text, strlen(v->bos_text)));
    if (ok && v->eos >= 0) ok = jv_dict_set(a, vars, jv_strn("eos_token", 9), jv_strn(v->eos_text, strlen(v->eos_text)));
    if (ok && opt && opt->enable_thinking >= 0)
        ok = jv_dict_set(a, vars, jv_strn("enable_thinking", 15), jv_bool(opt->enable_thinking != 0));
    if (!ok) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory formatting the chat");
    if (opt && opt->extra_json) {
        jv extra;
        char msg[200];
        if (!jv_json_parse(a, opt->extra_json, strlen(opt->extra_json), &extra, msg, sizeof msg))
            return eddy_error_set(err, EDDY_ERR_ARG, "chat template variables: %s", msg);
        if (extra.t != JV_DICT) return eddy_error_set(err, EDDY_ERR_ARG, "chat template variables: expected a JSON object");
        for (int64_t i = 0; i < extra.dict->n; i++)
            if (!jv_dict_set(a, vars, extra.dict->keys[i], extra.dict->vals[i]))
                return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory formatting the chat");
    }

    jtemplate t;
    eddy_status st = jinja_parse(a, tmpl, strlen(tmpl), &t, err);
    if (st != EDDY_OK) {
        if (st == EDDY_ERR_UNSUPPORTED && err) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            eddy_error_set(err, st, "%s (eddy's template engine cannot run this template; pass another with --chat-template)",
                           msg);
        }
        return st;
    }
    jbuf b = {0};
    st = jinja_render(a, &t, vars, &b, err);
    if (st != EDDY_OK) {
        jbuf_free(&b);
        return st;
    }
    if (b.oom) {
        jbuf_free(&b);
        return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory formatting the chat");
    }
    if (!b.p) { /* an empty result */
        b.p = eddy_malloc(1);
        if (!b.p) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory formatting the chat");
        b.p[0] = '\0';
    }
    *out = b.p;
    *len = b.n;
    return EDDY_OK;
}

/* ==== Entry ==== */

eddy_status eddy_chat_format(const eddy_vocab *v, const eddy_chat_message *msgs, int64_t n_msgs,
                             const eddy_chat_options *opt, char **out, size_t *len, eddy_error *err) {
    if (!v || (!msgs && n_msgs) || n_msgs < 0 || !out || !len)
        return eddy_error_set(err, EDDY_ERR_ARG, "eddy_chat_format: NULL argument");
    *out = NULL;
    *len = 0;
    jarena *a = jarena_new();
    if (!a) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory formatting the chat");
    jv list = jv_list_new(a);
    bool ok = list.t == JV_LIST;
    for (int64_t i = 0; ok && i < n_msgs; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            jarena_free(a);
            return eddy_error_set(err, EDDY_ERR_ARG, "message %lld has no role or content", (long long)i);
        }
        jv m = jv_dict_new(a);
        ok = m.t == JV_DICT &&
             jv_dict_set(a, m, jv_strn("role", 4), jv_str_copy(a, msgs[i].role, strlen(msgs[i].role))) &&
             jv_dict_set(a, m, jv_strn("content", 7), jv_str_copy(a, msgs[i].content, strlen(msgs[i].content))) &&
             jv_list_push(a, list, m);
    }
    eddy_status st = ok ? render(v, a, list, opt, out, len, err)
                        : eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory formatting the chat");
    jarena_free(a);
    return st;
}

eddy_status eddy_chat_format_json(const eddy_vocab *v, const char *messages_json, const eddy_chat_options *opt,
                                  char **out, size_t *len, eddy_error *err) {
    if (!v || !messages_json || !out || !len) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_chat_format_json: NULL argument");
    *out = NULL;
    *len = 0;
    jarena *a = jarena_new();
    if (!a) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory formatting the chat");
    jv list;
    char msg[200];
    eddy_status st;
    if (!jv_json_parse(a, messages_json, strlen(messages_json), &list, msg, sizeof msg))
        st = eddy_error_set(err, EDDY_ERR_ARG, "messages: %s", msg);
    else if (list.t != JV_LIST)
        st = eddy_error_set(err, EDDY_ERR_ARG, "messages: expected a JSON array of message objects");
    else
        st = render(v, a, list, opt, out, len, err);
    jarena_free(a);
    return st;
}
