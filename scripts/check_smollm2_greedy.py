#!/usr/bin/env python3
"""Greedy parity of eddy with llama.cpp on SmolLM2-135M-Instruct (or another GGUF).

For each prompt (plain text and chat-formatted) both engines generate N tokens
greedily on the same file with the same thread count:

  llama.cpp  llama-completion -m M -p PROMPT -n N --temp 0 -s 42 -t T -no-cnv
             --no-display-prompt  [-ctk/-ctv TYPE with --llama-kv same]
  eddy       eddy run -m M -p PROMPT -n N --temp 0 --seed 42 -t T -ctk TYPE -ctv TYPE

Chat prompts are formatted once by `eddy chat-format` (the file's template, which
both engines then read as text with special tokens matched). Neither tool prints
the ids it generated, so both continuations are tokenized by `eddy tokenize
--no-special` and compared id by id; identical text counts as a full match. For
each prompt the first divergence is reported (generated-token index, the two
next pieces). With --margins the logits at the divergence are taken from both
engines for the common prefix (eddy logits on prompt ids + common ids; llama-debug
--save-logits on the same text; llama-debug does not match special tokens in its
prompt, so for chat prompts its row is skipped when its ids differ) and their top
two candidates and gap are printed: a gap of a few hundredths is a near-tie that
rounding decides.

Both tools evaluate the margin prefix as one prefill batch, while the generation ran
token by token, so margins are indicative (same weights, same rounding of the cache,
other kernel paths).

Usage:
  scripts/check_smollm2_greedy.py [--model M] [--eddy build/eddy]
      [--llama-bin /root/peers/llama.cpp-build/bin] [-n 128] [-t 2]
      [--kv f16,f32] [--llama-kv default|same] [--margins]
Standard library only. Exit status 0 whatever the parity (it is a report).
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

PROMPTS = [
    ("plain", "The history of the city of Rome begins"),
    ("plain", "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my "
              "purse, and nothing particular to interest me on shore, I thought I would sail about a little and see "
              "the watery part of the world."),
    ("plain", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"),
    ("plain", "Mr. Speaker, Madam Vice President, our First Lady and Second Gentleman, members of Congress and the "
              "Cabinet, and my fellow Americans. Tonight"),
    ("chat", "Write a short story about a lighthouse keeper who finds a message in a bottle."),
    ("chat", "Explain how photosynthesis works, step by step, in detail."),
    ("chat", "Give me ten tips for learning a new language, with an explanation for each."),
]


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if r.returncode != 0:
        sys.exit("command failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stderr.decode(errors="replace")[-2000:]))
    return r.stdout


def tokenize(a, text, special):
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write(text.encode())
        path = f.name
    try:
        cmd = [a.eddy, "tokenize", "-m", a.model, "--file", path] + ([] if special else ["--no-special"])
        return [int(x) for x in run(cmd).split()]
    finally:
        os.unlink(path)


def detok(a, ids):
    if not ids:
        return ""
    out = run([a.eddy, "detokenize", "-m", a.model] + [str(i) for i in ids]).decode(errors="replace")
    return out[:-1] if out.endswith("\n") else out  # detokenize ends its output with a newline


def llama_generate(a, prompt, kv):
    cmd = [os.path.join(a.llama_bin, "llama-completion"), "-m", a.model, "-p", prompt, "-n", str(a.n), "--temp", "0",
           "-s", "42", "-t", str(a.threads), "-no-cnv", "--no-display-prompt", "-c", "4096", "--no-warmup"]
    if a.llama_kv == "same":
        cmd += ["-ctk", kv, "-ctv", kv]
    # OMP_WAIT_POLICY=passive: threads sleep instead of spinning between ops (only the
    # waiting changes, not the arithmetic); spinning OpenMP threads on a busy machine
    # can slow llama.cpp down a hundredfold
    out = run(cmd, env=dict(os.environ, OMP_WAIT_POLICY="passive")).decode(errors="replace")
    # stdout: the generated text, " [end of text]\n" when it produced an end-of-generation
    # token, then "\n\n" when the program ends
    if out.endswith("\n\n"):
        out = out[:-2]
    end = " [end of text]\n"
    stopped = out.endswith(end)
    return (out[: -len(end)] if stopped else out), stopped


def eddy_generate(a, prompt, kv):
    cmd = [a.eddy, "run", "-m", a.model, "-p", prompt, "-n", str(a.n), "--temp", "0", "--seed", "42",
           "-t", str(a.threads), "-ctk", kv, "-ctv", kv, "-c", "4096"]
    out = run(cmd).decode(errors="replace")
    return out[:-1] if out.endswith("\n") else out  # eddy run ends the stream with a newline


def top2(row):
    best = sorted(range(len(row)), key=lambda i: row[i], reverse=True)[:2]
    return [(i, row[i]) for i in best]


def eddy_margin(a, ids, kv):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "l.f32")
        run([a.eddy, "logits", "-m", a.model, "--ids", " ".join(map(str, ids)), "--out", out, "-t", str(a.threads),
             "-ctk", kv, "-ctv", kv])
        data = open(out, "rb").read()
    n_vocab = len(data) // 4 // len(ids)
    return top2(struct.unpack("<%df" % n_vocab, data[-4 * n_vocab:]))


def llama_margin(a, text, ids, kv):
    with tempfile.TemporaryDirectory() as d:
        cmd = [os.path.join(a.llama_bin, "llama-debug"), "-m", a.model, "-p", text, "--save-logits",
               "--logits-output-dir", d, "-t", str(a.threads), "-c", "4096"]
        if a.llama_kv == "same":
            cmd += ["-ctk", kv, "-ctv", kv]
        run(cmd, env=dict(os.environ, OMP_WAIT_POLICY="passive"))
        stem = "llamacpp-" + os.path.splitext(os.path.basename(a.model))[0]
        data = open(os.path.join(d, stem + ".bin"), "rb").read()
        prompt_info = open(os.path.join(d, stem + "-prompt.txt")).read()
    got = [int(x) for x in prompt_info.split("token ids:")[1].replace(",", " ").split()]
    if got != ids:
        return None
    return top2(struct.unpack("<%df" % (len(data) // 4), data))


def fmt_top2(a, t):
    if t is None:
        return "n/a (llama-debug tokenized the text differently)"
    (i0, v0), (i1, v1) = t
    return "%d %r %.4f | %d %r %.4f | gap %.4f" % (i0, detok(a, [i0]), v0, i1, detok(a, [i1]), v1, v0 - v1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="/root/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    p.add_argument("--eddy", default="build/eddy")
    p.add_argument("--llama-bin", default="/root/peers/llama.cpp-build/bin")
    p.add_argument("-n", type=int, default=128)
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("--kv", default="f16,f32", help="eddy cache types to try, comma-separated")
    p.add_argument("--llama-kv", choices=["default", "same"], default="default",
                   help="llama.cpp's cache: its default (f16) or the same type as eddy's")
    p.add_argument("--margins", action="store_true", help="top-2 logits of both engines at each divergence")
    a = p.parse_args()

    prompts = []
    for kind, text in PROMPTS:
        if kind == "chat":
            text = run([a.eddy, "chat-format", "-m", a.model, "--user", text]).decode()
        prompts.append((kind, text))

    llama_cache = {}
    for kv in a.kv.split(","):
        matched = 0
        print("== eddy KV cache %s, llama.cpp KV cache %s, %d tokens, %d threads" %
              (kv, kv if a.llama_kv == "same" else "f16 (default)", a.n, a.threads))
        for k, (kind, prompt) in enumerate(prompts):
            lkey = (k, kv if a.llama_kv == "same" else "default")
            if lkey not in llama_cache:
                llama_cache[lkey] = llama_generate(a, prompt, kv)
            ltext, lstop = llama_cache[lkey]
            etext = eddy_generate(a, prompt, kv)
            lids, eids = tokenize(a, ltext, False), tokenize(a, etext, False)
            if ltext == etext:
                matched += 1
                print("prompt %d (%s): match, %d tokens%s" % (k, kind, len(eids), " (both ended)" if lstop else ""))
                continue
            i = 0
            while i < min(len(lids), len(eids)) and lids[i] == eids[i]:
                i += 1
            nxt = lambda ids: repr(detok(a, ids[i:i + 1])) if i < len(ids) else "(end)"
            print("prompt %d (%s): diverges at generated token %d of %d/%d: llama.cpp %s, eddy %s" %
                  (k, kind, i, len(lids), len(eids), nxt(lids), nxt(eids)))
            if a.margins:
                pids = tokenize(a, prompt, True)
                common = eids[:i]
                print("    eddy      top-2: " + fmt_top2(a, eddy_margin(a, pids + common, kv)))
                print("    llama.cpp top-2: " + fmt_top2(a, llama_margin(a, prompt + detok(a, common), pids + common, kv)))
        print("%d of %d prompts match for %d tokens (eddy KV %s)\n" % (matched, len(prompts), a.n, kv))


if __name__ == "__main__":
    main()
