#!/usr/bin/env python3
"""Decode speed when the machine is shared: eddy's thread pool against a busy core.

A decode step splits every product over the threads and joins them; a pool whose
workers spin, or whose work is cut in one piece per thread, runs at the speed of its
slowest thread, so one core taken by another process can cost far more than that
core's share. This script measures decode (eddy bench -m MODEL -p 0 -n N) under four
conditions, each against the same binary unloaded:

  busy core   -t 2 while a busy loop (a spinning process) is pinned to the last CPU
  one CPU     the process confined to the first CPU (taskset), threads left to the default
  -t 64       many more threads than CPUs
  unloaded    -t 2, nothing else running

Each binary given (e.g. an older build and the current one: EDDY=path[,path...]) and,
when LLAMA_BIN is set, llama.cpp's llama-bench (the same -t and -n, -p 0) run every
condition in turn, round after round (-R), so the machine's drifts hit all alike. It
prints, per engine and condition, the median tokens/s over the rounds and its ratio to
the same engine unloaded. Needs `taskset` (util-linux) and at least 2 CPUs.

Usage: EDDY=build/eddy[,other/eddy] [LLAMA_BIN=dir] bench/shared_cpu.py MODEL.gguf [-n 64] [-r 3] [-R 3]
Uses only the standard library. Prints the load average before and after.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def cpus():
    return sorted(os.sched_getaffinity(0))


def busy_loop(cpu):
    """A process spinning on cpu until killed."""
    return subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", "while True: pass"])


def output(cmd, a):
    """The command's standard output, or None when it failed or ran past --timeout."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        return None
    return None if r.returncode else r.stdout


def run_eddy(binary, model, threads, a, prefix=()):
    cmd = list(prefix) + [binary, "bench", "-m", model, "-p", "0", "-n", str(a.n), "-r", str(a.r), "--json"]
    if threads:
        cmd += ["-t", str(threads)]
    out = output(cmd, a)
    return json.loads(out.strip().splitlines()[-1])["tg_tps"] if out else None


def run_llama(binary, model, threads, a, prefix=()):
    cmd = list(prefix) + [binary, "-m", model, "-p", "0", "-n", str(a.n), "-r", str(a.r), "-o", "json",
                          "-t", str(threads or len(cpus()))]
    out = output(cmd, a)
    if not out:
        return None
    rows = json.loads(out[out.find("["):])
    return next((j["avg_ts"] for j in rows if j.get("n_gen", 0) > 0), None)


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("-n", type=int, default=64, help="decode tokens per run")
    ap.add_argument("-r", type=int, default=3, help="repetitions inside each run")
    ap.add_argument("-R", type=int, default=3, help="rounds")
    ap.add_argument("--timeout", type=float, default=300, help="seconds a run may take (past it: failed)")
    a = ap.parse_args()
    c = cpus()
    if len(c) < 2:
        sys.exit("shared_cpu.py needs at least 2 CPUs")
    engines = []
    for b in os.environ.get("EDDY", os.path.join(HERE, "..", "build", "eddy")).split(","):
        engines.append((f"eddy {b}", lambda t, pre, b=b: run_eddy(b, a.model, t, a, pre)))
    if os.environ.get("LLAMA_BIN"):
        lb = os.path.join(os.environ["LLAMA_BIN"], "llama-bench")
        engines.append(("llama.cpp", lambda t, pre: run_llama(lb, a.model, t, a, pre)))
    conditions = [  # (name, threads, taskset prefix, busy cpu)
        ("unloaded", 2, (), None),
        ("busy core", 2, (), c[-1]),
        ("one CPU", 0, ("taskset", "-c", str(c[0])), None),
        ("-t 64", 64, (), None),
    ]
    print(f"load average before: {load()}", file=sys.stderr)
    res = {}
    for rnd in range(a.R):
        for cname, threads, prefix, busy in conditions:
            hog = busy_loop(busy) if busy is not None else None
            try:
                for ename, fn in engines:
                    v = fn(threads, prefix)
                    res.setdefault((ename, cname), []).append(v)
                    print(f"round {rnd + 1} {cname:9s} {ename}: {v}", file=sys.stderr)
            finally:
                if hog:
                    hog.kill()
                    hog.wait()
    print(f"load average after: {load()}", file=sys.stderr)
    print(f"| engine | " + " | ".join(f"{cn} t/s (× unloaded)" for cn, *_ in conditions) + " |")
    print("|---|" + "---|" * len(conditions))
    for ename, _ in engines:
        base = [v for v in res[(ename, "unloaded")] if v]
        b = statistics.median(base) if base else None
        cells = []
        for cname, *_ in conditions:
            v = [x for x in res[(ename, cname)] if x]
            if not v:
                cells.append("failed or timed out")
                continue
            m = statistics.median(v)
            cells.append(f"{m:.1f} ({m / b:.2f}×)" if b else f"{m:.1f}")
        print(f"| {ename} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
