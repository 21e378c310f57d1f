#!/usr/bin/env python3
"""Prompt-lookup speculative decoding: eddy against plain decoding and against llama.cpp.

For each prompt file (raw text, given to both engines as it is; --chat renders it
first with the model's chat template through `eddy chat-format`, and the rendered text
is what both engines get), greedy decoding of N tokens four ways, round after round
(-R), so the machine's drifts hit all alike:

  eddy plain    build/eddy run -m MODEL -f PROMPT -n N --temp 0 -t T
  eddy ngram    the same with --spec-type ngram (and the EDDY_SPEC flags, if set)
  llama plain   $LLAMA_BIN/llama-completion -m MODEL -f PROMPT -n N --temp 0 -t T -no-cnv
  llama lookup  $LLAMA_BIN/llama-lookup -m MODEL -f PROMPT -n N --temp 0 -t T --spec-draft-n-max 8

Decode speed is what each prints for its generated tokens (eddy: "generated N tokens in
S s"; llama.cpp: the "decoded" line of llama-lookup, the eval line of llama-completion).
It checks that eddy's two outputs are identical, and prints per prompt the medians, each
engine's speed-up over its own plain decoding, eddy's ratio to llama.cpp, and the
acceptance (drafted, accepted, tokens per verify step).

Usage: [EDDY=binary] [LLAMA_BIN=dir] bench/compare_spec.py -m MODEL.gguf [--chat] [-n 256] [-t 2] [-R 3] PROMPT.txt...
Uses only the standard library. Prints the load average before and after. llama.cpp
runs with OMP_WAIT_POLICY=passive unless the environment sets it (its OpenMP threads
otherwise spin, which on a shared machine costs it most of its speed).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
EDDY = os.environ.get("EDDY") or os.path.join(HERE, "..", "build", "eddy")


def eddy(model, prompt, a, spec):
    cmd = [EDDY, "run", "-m", model, "-f", prompt, "-n", str(a.n), "--temp", "0", "-t", str(a.t), "--ignore-eos"]
    if spec:
        cmd += ["--spec-type", "ngram"] + os.environ.get("EDDY_SPEC", "").split()
    r = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"generated (\d+) tokens in ([\d.]+) s", r.stderr)
    if r.returncode or not m:
        return None
    out = {"tps": int(m.group(1)) / max(float(m.group(2)), 1e-9), "text": r.stdout}
    s = re.search(r"(\d+) verify steps, (\d+) drafted, (\d+) accepted", r.stderr)
    if s:
        out["steps"], out["drafted"], out["accepted"] = map(int, s.groups())
    return out


def llama(binary, model, prompt, a, extra):
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "passive")
    cmd = [binary, "-m", model, "-f", prompt, "-n", str(a.n), "--temp", "0", "-t", str(a.t), "--ignore-eos"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    text = r.stderr + r.stdout
    m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", text)
    if m:
        out = {"tps": int(m.group(1)) / max(float(m.group(2)), 1e-9)}
        d = re.search(r"n_drafted\s*=\s*(\d+)", text)
        c = re.search(r"n_accept\s*=\s*(\d+)", text)
        if d and c:
            out["drafted"], out["accepted"] = int(d.group(1)), int(c.group(1))
        return out
    m = re.search(r"eval time =\s*([\d.]+) ms /\s*(\d+) runs", text)
    if m:
        return {"tps": int(m.group(2)) / max(float(m.group(1)) / 1e3, 1e-9)}
    return None


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", required=True)
    ap.add_argument("--chat", action="store_true")
    ap.add_argument("-n", type=int, default=256)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-R", type=int, default=3)
    ap.add_argument("prompts", nargs="+")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    files = []
    for p in a.prompts:
        if a.chat:
            text = open(p, encoding="utf-8").read()
            r = subprocess.run([EDDY, "chat-format", "-m", a.m, "--user", text], capture_output=True, text=True)
            if r.returncode:
                sys.exit(r.stderr)
            q = os.path.join(tmp, os.path.basename(p))
            open(q, "w", encoding="utf-8").write(r.stdout)
            files.append((p, q))
        else:
            files.append((p, p))
    engines = [("eddy plain", lambda q: eddy(a.m, q, a, False)), ("eddy ngram", lambda q: eddy(a.m, q, a, True))]
    lb = os.environ.get("LLAMA_BIN")
    if lb:
        engines.append(("llama plain", lambda q: llama(os.path.join(lb, "llama-completion"), a.m, q, a,
                                                       ["-no-cnv"])))
        engines.append(("llama lookup", lambda q: llama(os.path.join(lb, "llama-lookup"), a.m, q, a,
                                                        ["--spec-draft-n-max", "8"])))
    print(f"load average before: {load()}", file=sys.stderr)
    res = {}
    for rnd in range(a.R):
        for p, q in files:
            for name, fn in engines:
                out = fn(q)
                res.setdefault((p, name), []).append(out)
                print(f"round {rnd + 1} {os.path.basename(p)} {name}: "
                      f"{out and {k: v for k, v in out.items() if k != 'text'}}", file=sys.stderr)
    print(f"load average after: {load()}", file=sys.stderr)
    print(f"| prompt | engine | decode t/s (median of {a.R}) | × its plain | drafted / accepted | tokens per verify |")
    print("|---|---|---|---|---|---|")
    for p, _ in files:
        med = {}
        for name, _ in engines:
            v = [o["tps"] for o in res[(p, name)] if o]
            med[name] = statistics.median(v) if v else None
        for name, _ in engines:
            runs = [o for o in res[(p, name)] if o]
            if not runs:
                print(f"| {os.path.basename(p)} | {name} | failed | | | |")
                continue
            plain = med["eddy plain" if name.startswith("eddy") else "llama plain"]
            x = f"{med[name] / plain:.2f}×" if plain and name.endswith(("ngram", "lookup")) else ""
            o = runs[-1]
            acc = f"{o['drafted']} / {o['accepted']}" if "drafted" in o else ""
            tpv = f"{(o['accepted'] + o['steps']) / o['steps']:.2f}" if o.get("steps") else ""
            print(f"| {os.path.basename(p)} | {name} | {med[name]:.1f} | {x} | {acc} | {tpv} |")
        same = [o for o in res[(p, "eddy plain")] + res[(p, "eddy ngram")] if o]
        if len({o["text"] for o in same}) > 1:
            print(f"WARNING: {p}: eddy's outputs with and without drafts differ", file=sys.stderr)


if __name__ == "__main__":
    main()
