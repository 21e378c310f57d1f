#!/usr/bin/env python3
"""gen_chat_golden.py — expected chat-template outputs for tests/test_text_chat.c.

Renders conversations with Hugging Face transformers' own chat-template code
(transformers.utils.chat_template_utils.render_jinja_template, what
apply_chat_template calls) and writes tests/data/text/chat.json:

    [{"template": FILE, "messages": JSON text, "add_generation_prompt": bool,
      "vars": JSON text of further variables, "expected": the rendered text}, ...]

The templates are copied to tests/data/text/templates/:
    qwen3.jinja      Qwen3's tokenizer_config.json (../shared/data/tokenizers/qwen3)
    qwen3.5.jinja    Qwen3.5-4B's template, as llama.cpp keeps it (models/templates)
    smollm2.jinja    tokenizer.chat_template of SmolLM2-135M-Instruct's GGUF
    llama3.1.jinja, llama3.2.jinja   Meta's Llama 3.1 / 3.2 templates (llama.cpp copies)

Special-token texts (bos_token, eos_token) and date_string are passed explicitly in
"vars" so that both sides see the same values, whatever vocabulary the C test uses.

    PYTHON scripts/gen_chat_golden.py [--llama-cpp DIR] [--smollm2 GGUF] [OUT_DIR]

PYTHON needs transformers (and jinja2) and llama.cpp's gguf-py.
"""
import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SHARED = os.path.join(os.path.dirname(REPO), "shared", "data")

ap = argparse.ArgumentParser()
ap.add_argument("--llama-cpp", default="/root/peers/llama_cpp_python-0.3.36/vendor/llama.cpp")
ap.add_argument("--smollm2", default="/root/models-text/SmolLM2-135M-Instruct.Q4_1.gguf")
ap.add_argument("--qwen3", default=os.path.join(SHARED, "tokenizers", "qwen3"))
ap.add_argument("out", nargs="?", default=os.path.join(REPO, "tests", "data", "text"))
args = ap.parse_args()

sys.path.insert(0, os.path.join(args.llama_cpp, "gguf-py"))
import gguf  # noqa: E402
import jinja2  # noqa: E402
import transformers  # noqa: E402
from transformers.utils.chat_template_utils import render_jinja_template  # noqa: E402

tdir = os.path.join(args.out, "templates")
os.makedirs(tdir, exist_ok=True)
templates = {}
templates["qwen3.jinja"] = json.load(open(os.path.join(args.qwen3, "tokenizer_config.json")))["chat_template"]
templates["qwen3.5.jinja"] = open(os.path.join(args.llama_cpp, "models/templates/Qwen3.5-4B.jinja")).read()
templates["llama3.1.jinja"] = open(os.path.join(args.llama_cpp, "models/templates/meta-llama-Llama-3.1-8B-Instruct.jinja")).read()
templates["llama3.2.jinja"] = open(os.path.join(args.llama_cpp, "models/templates/meta-llama-Llama-3.2-3B-Instruct.jinja")).read()
templates["smollm2.jinja"] = gguf.GGUFReader(args.smollm2).fields["tokenizer.chat_template"].contents()
for name, text in templates.items():
    with open(os.path.join(tdir, name), "w", encoding="utf-8", newline="") as f:
        f.write(text)

QWEN_VARS = {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"}
SMOL_VARS = {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}
LLAMA_VARS = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "date_string": "26 Jul 2024"}

SYS = {"role": "system", "content": "You are a helpful assistant."}
U1 = {"role": "user", "content": "Hello! What is 2+2?"}
A1 = {"role": "assistant", "content": "2+2 is 4."}
U2 = {"role": "user", "content": "And in French?"}
A_THINK = {"role": "assistant", "content": "<think>\nThe user asks 2+2.\n</think>\n\nIt is 4."}
A_REASON = {"role": "assistant", "content": "It is 4.", "reasoning_content": "Simple arithmetic."}
U_UNI = {"role": "user", "content": "  Ünïcödé 你好 👍🏽\ttabs\nand \"quotes\" 'single' \\ backslash  "}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                            "parameters": {"type": "object", "properties": {
                                                "city": {"type": "string", "description": "City name"},
                                                "days": {"type": "integer"}}, "required": ["city"]}}}]
A_CALL = {"role": "assistant", "content": "",
          "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                           "arguments": {"city": "Paris", "days": 2}}}]}
TOOL_RESP = {"role": "tool", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}"}
U_TOOL = {"role": "user", "content": "Weather in Paris for 2 days?"}

CONVS = [
    ("single user", [U1]),
    ("system + user", [SYS, U1]),
    ("multi-turn", [SYS, U1, A1, U2]),
    ("ends with assistant", [U1, A1]),
    ("thinking in content", [U1, A_THINK, U2]),
    ("thinking, last turn", [U1, A_THINK]),
    ("reasoning_content", [SYS, U1, A_REASON, U2]),
    ("unicode and whitespace", [SYS, U_UNI]),
    ("empty content", [{"role": "user", "content": ""}]),
]
TOOL_CONVS = [
    ("tool call", [U_TOOL, A_CALL, TOOL_RESP]),
    ("tool call, system", [SYS, U_TOOL, A_CALL, TOOL_RESP, {"role": "assistant", "content": "Sunny, 21.5 C."}]),
]

cases = []


def add(template, messages, gen, extra, tools=None):
    kwargs = dict(extra)
    if tools is not None:
        kwargs["tools"] = tools
    try:
        rendered, _ = render_jinja_template(conversations=[messages], chat_template=templates[template],
                                            add_generation_prompt=gen, **kwargs)
        expected = rendered[0]
    except (jinja2.exceptions.TemplateError, TypeError, ValueError) as e:
        expected = None
        print("%s: %s: %s" % (template, type(e).__name__, e), file=sys.stderr)
    cases.append({"template": template, "messages": json.dumps(messages, ensure_ascii=False),
                  "add_generation_prompt": gen, "vars": json.dumps(kwargs, ensure_ascii=False),
                  "error": expected is None, "expected": expected or ""})


for tname, base in (("qwen3.jinja", QWEN_VARS), ("qwen3.5.jinja", QWEN_VARS), ("smollm2.jinja", SMOL_VARS),
                    ("llama3.1.jinja", LLAMA_VARS), ("llama3.2.jinja", LLAMA_VARS)):
    for _, conv in CONVS:
        for gen in (True, False):
            add(tname, conv, gen, base)
    if tname.startswith("qwen"):
        for think in (False, True):
            add(tname, [SYS, U1], True, dict(base, enable_thinking=think))
            add(tname, [U1, A_THINK, U2], True, dict(base, enable_thinking=think))
    if tname != "smollm2.jinja":
        for _, conv in TOOL_CONVS:
            add(tname, conv, True, base, tools=TOOLS)
    if tname == "qwen3.5.jinja":  # the template refuses a conversation without a user turn
        add(tname, [SYS], True, base)

with open(os.path.join(args.out, "chat.json"), "w", encoding="utf-8") as f:
    json.dump(cases, f, ensure_ascii=False, indent=1)
    f.write("\n")
print("%d cases (%d expected errors); transformers %s, jinja2 %s" % (
    len(cases), sum(c["error"] for c in cases), transformers.__version__, jinja2.__version__), file=sys.stderr)
