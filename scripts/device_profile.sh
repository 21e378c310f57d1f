#!/usr/bin/env bash
# device_profile.sh — where a decode step's GPU time goes, kernel by kernel: Nsight Compute
# (ncu, its one timing metric, clocks left alone) over the decode steps of `eddy bench`
# on the 4B-shaped Q4_K_M of device_check.sh, CUDA graphs off so that each kernel is seen;
# then the sum per kernel and per step, against the step's time with graphs on.
#
#   scripts/device_profile.sh [OUT_DIR]        (NPL=32: the steps of 32 sequences instead;
#                                              PP=2048: prefills of 2048 tokens)
#
# Uses .prebuilt/eddy when it is there (make CUDA=1 SERVER=0 BUILD=build/dev90
# CUDA_ARCHS="-gencode arch=compute_90,code=sm_90" build/dev90/eddy, stripped), else builds.
set -u
cd "$(dirname "$0")/.."
. scripts/device_env.sh
device_model >"$OUT_DIR/gen.log" 2>&1
E=${EDDY_BIN:-.prebuilt/eddy}
if ! [ -x "$E" ] || ! "$E" --version >/dev/null 2>&1; then
  device_toolchain
  make -j"$(nproc)" CUDA=1 SERVER=0 CUDA_ARCHS="-gencode arch=compute_90,code=sm_90" build/cuda/eddy >"$OUT_DIR/build.log" 2>&1 || { tail -20 "$OUT_DIR/build.log"; exit 1; }
  E=build/cuda/eddy
fi
echo "== eddy: $E"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
# 4 warm-up decode steps and 4 timed ones; the kernels of the last 4 steps are kept. With
# NPL=B: B sequences (a prefill of 8 tokens each, then 4 decode steps, twice), all kernels kept.
# With PP=P: prefills of P tokens (a warm-up and a timed one), all kernels kept.
NPL=${NPL:-} PP=${PP:-}
if [ -n "$NPL" ]; then BENCH="--npl $NPL -p 8 -n 4 -r 1"
elif [ -n "$PP" ]; then BENCH="-p $PP -n 0 -r 1"
else BENCH="-p 0 -n 4 -r 1"; fi
EDDY_CUDA_GRAPHS=0 timeout 240 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
  "$E" bench -m "$M4B" --device cuda $BENCH >"$OUT_DIR/ncu.csv" 2>"$OUT_DIR/ncu.err"
echo "== ncu rc $?: $(wc -l <"$OUT_DIR/ncu.csv") lines"
tail -3 "$OUT_DIR/ncu.err"
python3 - "$OUT_DIR/ncu.csv" "$NPL" "$PP" <<'PY'
import csv, sys, re, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; rows = rows[1:]
ki, vi, gi, bi = hdr.index("Kernel Name"), hdr.index("Metric Value"), hdr.index("Grid Size"), hdr.index("Block Size")
ks = [(re.sub(r"\(.*", "", r[ki]).replace("(anonymous namespace)::", ""), r[gi], float(r[vi].replace(",", ""))) for r in rows]
if sys.argv[3]:
    steps = 2  # "per step" below: per prefill of PP tokens
    print("prefills of %s tokens: all kernels of the run, per prefill" % sys.argv[3])
elif sys.argv[2]:
    # B sequences: the whole run (2 x (prefill + 4 decode steps)), per decode step of the 8
    steps = 8
    print("B = %s: all kernels of the run, per decode step (prefill included)" % sys.argv[2])
else:
    # the last half: the timed decode steps (warm-up and timed runs launch the same kernels)
    ks = ks[len(ks) // 2:]
    steps = 4
tot = sum(t for _, _, t in ks)
print("kernels per step %d, GPU time per step %.1f us (sum of kernel durations)" % (len(ks) // steps, tot / steps / 1e3))
by = collections.defaultdict(lambda: [0, 0.0])
for k, g, t in ks: by[k][0] += 1; by[k][1] += t
for k, (n, t) in sorted(by.items(), key=lambda x: -x[1][1])[:22]:
    print("%-58s %5d/step %9.1f us/step %5.1f%%  %6.2f us each" % (k[:58], n // steps, t / steps / 1e3, 100 * t / tot, t / n / 1e3))
by = collections.defaultdict(lambda: [0, 0.0])
for k, g, t in ks:
    if "gemv" in k: by[(k, g)][0] += 1; by[(k, g)][1] += t
print("products by grid:")
for (k, g), (n, t) in sorted(by.items(), key=lambda x: -x[1][1])[:14]:
    print("  %-40s grid %-16s %4d/step %8.2f us each" % (k[:40], g, n // steps, t / n / 1e3))
PY
[ -n "$NPL$PP" ] && exit 0
# the same steps with graphs, for the launch overhead
"$E" bench -m "$M4B" --device cuda -p 0 -n 128 -r 2 2>&1 | grep -E "tg128|roofline"
EDDY_CUDA_GRAPHS=0 "$E" bench -m "$M4B" --device cuda -p 0 -n 128 -r 2 2>&1 | grep -E "tg128" | sed 's/^/graphs off: /'
