#!/usr/bin/env python3
"""Side-by-side prefill and decode speed: eddy against llama.cpp and ik_llama.cpp.

For each round (-R), for each model, each engine runs once, in turn, so that the
machine's slow drifts hit every engine alike:
  eddy:        build/eddy bench -m MODEL -p P -n N -t T -r REPS --json
  llama.cpp:   $LLAMA_BIN/llama-bench -m MODEL -p P -n N -t T -r REPS -o json
  ik_llama.cpp $IK_BIN/llama-bench (same flags)
Every engine reports the mean tokens/s over its REPS repetitions; this script keeps
each round's figure and prints, per model and engine, the median over the rounds and
the range, then eddy's ratio to each peer (median over median), as a Markdown table.
An engine that cannot run a model (ik_llama.cpp has no Mamba-2) shows "—".

Usage: bench/compare_peers.py [-t 2] [-p 512] [-n 128] [-r 2] [-R 3] MODEL.gguf...
Environment: LLAMA_BIN, IK_BIN (directories holding llama-bench); either may be unset.
Uses only the standard library. Prints the load average before and after.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EDDY = os.path.join(HERE, "..", "build", "eddy")


def run_eddy(model, a):
    r = subprocess.run([EDDY, "bench", "-m", model, "-p", str(a.p), "-n", str(a.n), "-t", str(a.t), "-r", str(a.r),
                        "--json"], capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip().splitlines()[-1:]
    j = json.loads(r.stdout.strip().splitlines()[-1])
    return {"pp": j["pp_tps"], "tg": j["tg_tps"], "roofline": j.get("roofline")}, None


def run_llama_bench(binary, model, a):
    r = subprocess.run([binary, "-m", model, "-p", str(a.p), "-n", str(a.n), "-t", str(a.t), "-r", str(a.r),
                        "-o", "json"], capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip().splitlines()[-1:]
    out = {}
    text = r.stdout[r.stdout.find("["):]  # the JSON array (ik_llama.cpp has no jsonl)
    for j in json.loads(text):
        if j.get("n_prompt", 0) > 0 and j.get("n_gen", 0) == 0:
            out["pp"] = j["avg_ts"]
        elif j.get("n_gen", 0) > 0 and j.get("n_prompt", 0) == 0:
            out["tg"] = j["avg_ts"]
    return out, None


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", type=int, default=2, help="repetitions inside each engine's run")
    ap.add_argument("-R", type=int, default=3, help="interleaved rounds")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    engines = [("eddy", lambda m: run_eddy(m, a))]
    for name, env in (("ik_llama.cpp", "IK_BIN"), ("llama.cpp", "LLAMA_BIN")):
        if os.environ.get(env):
            b = os.path.join(os.environ[env], "llama-bench")
            engines.append((name, lambda m, b=b: run_llama_bench(b, m, a)))
    print(f"load average before: {load()}", file=sys.stderr)
    results = {}  # (model, engine) -> {"pp": [...], "tg": [...]}
    for rnd in range(a.R):
        for m in a.models:
            for name, fn in engines:
                res, err = fn(m)
                slot = results.setdefault((m, name), {"pp": [], "tg": [], "err": None})
                if res is None:
                    slot["err"] = err
                    continue
                for k in ("pp", "tg"):
                    if k in res:
                        slot[k].append(res[k])
                print(f"round {rnd + 1} {os.path.basename(m)} {name}: {res}", file=sys.stderr)
    print(f"load average after: {load()}", file=sys.stderr)

    def med(v):
        return statistics.median(v) if v else None

    print(f"| model | engine | pp{a.p} t/s (median, range) | tg{a.n} t/s (median, range) | eddy / engine pp | "
          f"eddy / engine tg |")
    print("|---|---|---|---|---|---|")
    for m in a.models:
        e = results.get((m, "eddy"), {})
        for name, _ in engines:
            s = results[(m, name)]
            cells = []
            for k in ("pp", "tg"):
                v = s[k]
                cells.append(f"{med(v):.1f} ({min(v):.1f}–{max(v):.1f})" if v else "—")
            ratios = []
            for k in ("pp", "tg"):
                if name == "eddy" or not s[k] or not e.get(k):
                    ratios.append("")
                else:
                    ratios.append(f"{med(e[k]) / med(s[k]):.2f}×")
            print(f"| {os.path.basename(m)} | {name} | {cells[0]} | {cells[1]} | {ratios[0]} | {ratios[1]} |")


if __name__ == "__main__":
    main()
