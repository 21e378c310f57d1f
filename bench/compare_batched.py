#!/usr/bin/env python3
"""Many sequences at once: eddy against llama.cpp's llama-batched-bench, interleaved.

For each round (-R), for each count of sequences B in --npl, each engine runs once, in
turn, so that the machine's slow drifts hit both alike:
  eddy:       build/eddy bench -m MODEL --npl B -p P -n N -t T -r 1 --json
  llama.cpp:  $LLAMA_BIN/llama-batched-bench -m MODEL -c B*(P+N) -b 2048 -ub 512 -npp P -ntg N
              -npl B -t T --output-format jsonl
Both measure the same thing: B prompts of P tokens prefilled together (S_PP), then N
steps each decoding one token of every sequence (S_TG, aggregate tokens/s). The script
prints, per B, the median over the rounds of each engine's S_PP and S_TG and eddy's
ratio to llama.cpp (median over median), and eddy's S_TG at B against its own at 1,
as a Markdown table. Prints the load average before and after.

Usage: LLAMA_BIN=DIR bench/compare_batched.py [-t 2] [-p 128] [-n 32] [-R 3] [--npl 1,2,4,8,16] MODEL.gguf
Uses only the standard library.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EDDY = os.path.join(HERE, "..", "build", "eddy")


def run_eddy(model, b, a):
    r = subprocess.run([EDDY, "bench", "-m", model, "--npl", str(b), "-p", str(a.p), "-n", str(a.n), "-t", str(a.t),
                        "-r", "1", "--json"], capture_output=True, text=True)
    if r.returncode:
        sys.exit("eddy: " + r.stderr.strip())
    j = json.loads(r.stdout.strip().splitlines()[-1])
    return j["pp_tps"], j["tg_tps"]


def run_llama(model, b, a):
    binary = os.path.join(os.environ["LLAMA_BIN"], "llama-batched-bench")
    r = subprocess.run([binary, "-m", model, "-c", str(b * (a.p + a.n) + 64), "-b", "2048", "-ub", "512",
                        "-npp", str(a.p), "-ntg", str(a.n), "-npl", str(b), "-t", str(a.t),
                        "--output-format", "jsonl"], capture_output=True, text=True)
    if r.returncode:
        sys.exit("llama-batched-bench: " + r.stderr.strip()[-400:])
    for line in (r.stdout + "\n" + r.stderr).splitlines():  # its results go where its log goes
        if "speed_tg" in line:
            j = json.loads(line[line.find("{"):])
            return j["speed_pp"], j["speed_tg"]
    sys.exit("llama-batched-bench printed no result:\n" + r.stdout[-400:])


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("-R", type=int, default=3)
    ap.add_argument("--npl", default="1,2,4,8,16")
    ap.add_argument("model")
    a = ap.parse_args()
    counts = [int(x) for x in a.npl.split(",")]
    print(f"load average before: {load()}", file=sys.stderr)
    res = {b: {"eddy": [], "llama": []} for b in counts}
    for rnd in range(a.R):
        for b in counts:
            res[b]["eddy"].append(run_eddy(a.model, b, a))
            res[b]["llama"].append(run_llama(a.model, b, a))
            print(f"round {rnd + 1} B={b}: eddy {res[b]['eddy'][-1]}, llama.cpp {res[b]['llama'][-1]}", file=sys.stderr)
    print(f"load average after: {load()}", file=sys.stderr)
    med = lambda xs, k: statistics.median(x[k] for x in xs)
    tg1 = med(res[counts[0]]["eddy"], 1)
    print(f"| B | eddy S_PP | llama.cpp S_PP | eddy / llama.cpp | eddy S_TG | llama.cpp S_TG | eddy / llama.cpp "
          f"| eddy S_TG vs B={counts[0]} |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for b in counts:
        ep, lp = med(res[b]["eddy"], 0), med(res[b]["llama"], 0)
        et, lt = med(res[b]["eddy"], 1), med(res[b]["llama"], 1)
        print(f"| {b} | {ep:.1f} | {lp:.1f} | {ep / lp:.2f}x | {et:.1f} | {lt:.1f} | {et / lt:.2f}x | {et / tg1:.2f}x |")


if __name__ == "__main__":
    main()
