/*
 * fuzz_chat_template.c — libFuzzer target for the chat-template interpreter.
 *
 * Chat templates come from model files, so they are untrusted input: any bytes
 * given as a template (with a fixed conversation and variables) must render or
 * fail with an error — never crash, hang or exhaust memory. The seeds are real
 * templates (tests/data/fuzz-seeds/fuzz_chat_template).
 */
#include <stdlib.h>
#include <string.h>

#include "eddy.h"
#include "text/jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char messages[] =
    "[{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi <think>\\n\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>\\nx\\n</think>\\n\\nHello\", \"reasoning_content\": \"r\","
    "  \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": [true, null, 2.5]}}}]},"
    " {\"role\": \"tool\", \"content\": \"{\\\"ok\\\": 1}\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"look\"}, {\"type\": \"image\"}]}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    jarena *a = jarena_new();
    if (!a) return 0;
    jv vars;
    char msg[200];
    const char extra[] = "{\"messages\": 0, \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}],"
                         " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"enable_thinking\": false}";
    jv list;
    if (!jv_json_parse(a, extra, sizeof extra - 1, &vars, msg, sizeof msg) ||
        !jv_json_parse(a, messages, sizeof messages - 1, &list, msg, sizeof msg))
        abort();
    jv_dict_set(a, vars, jv_strn("messages", 8), list);
    jtemplate t;
    eddy_error err;
    if (jinja_parse(a, (const char *)data, size, &t, &err) == EDDY_OK) {
        jbuf out = {0};
        (void)jinja_render(a, &t, vars, &out, &err);
        jbuf_free(&out);
    }
    jarena_free(a);
    return 0;
}
