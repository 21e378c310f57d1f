#!/usr/bin/env bash
# device_check_moe.sh — a mixture of experts on the GPU, timed: a second call after
# scripts/device_check.sh on the same machine (its build is reused), or a call of its own
# (it builds). It generates Qwen3.5-35B-A3B's shape as a Q4_K_M (scripts/gen_random_qwen35.py
# --shape 35b-a3b: 256 experts of 512 x 2048, 8 a token, and a shared expert, in each of 40
# layers; about 20 GB, MOE_LAYERS=N keeps N layers) and times, each against the other way
# in the same run:
#   - prefill of 2,048 tokens and decode of 128: a prefill's slots grouped by expert on the
#     GPU (experts_grouped) against routed on the host (EDDY_CUDA_MOE_GROUPED=0);
#   - 1, 8 and 32 sequences decoding: steps of up to 128 rows taking each slot's experts in
#     one launch (experts_on_gpu) against grouping them from 9 rows on (EDDY_CUDA_MOE_ROWS=8);
#   - where the time of a decode step, a 32-sequence step and a prefill goes (EDDY_CUDA_PROFILE=1).
#
#   scripts/device_check_moe.sh [OUT_DIR]
#
# Logs go to OUT_DIR (default $OUT, else /tmp/eddy-device), the summary to
# OUT_DIR/summary-moe.txt and its last lines. Needs what device_check.sh needs.
set -u
cd "$(dirname "$0")/.."
SUMMARY=${SUMMARY:-${1:-${OUT:-/tmp/eddy-device}}/summary-moe.txt}
. scripts/device_env.sh
: >"$SUMMARY"
note "== device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"

device_moe_model >"$OUT_DIR/gen-moe.log" 2>&1 &
GEN=$!
device_toolchain
device_build "$OUT_DIR/build-moe.log" build/cuda/eddy
device_model_ready $GEN "$MOE" "$OUT_DIR/gen-moe.log"

E=build/cuda/eddy
bounded 180 $E bench -m "$MOE" --device cuda -p 2048 -n 128 -r 2 >"$OUT_DIR/moe-bench.log" 2>&1
note "$(tail -12 "$OUT_DIR/moe-bench.log")"
grep -q 'graphs are off' "$OUT_DIR/moe-bench.log" && note "WARNING: $(grep -m1 'graphs are off' "$OUT_DIR/moe-bench.log")"
note "== single-sequence bench at $(elapsed)"
EDDY_CUDA_MOE_GROUPED=0 bounded 120 $E bench -m "$MOE" --device cuda -p 2048 -n 0 -r 1 \
  >"$OUT_DIR/moe-bench-host.log" 2>&1
note "prefill routed on the host (EDDY_CUDA_MOE_GROUPED=0): $(grep -E 'pp2048' "$OUT_DIR/moe-bench-host.log" | tr -s ' ')"
bounded 150 $E bench -m "$MOE" --device cuda --npl 1,8,32 -p 128 -n 32 -r 1 >"$OUT_DIR/moe-batched.log" 2>&1
note "$(tail -8 "$OUT_DIR/moe-batched.log")"
EDDY_CUDA_MOE_ROWS=8 bounded 90 $E bench -m "$MOE" --device cuda --npl 32 -p 128 -n 32 -r 1 \
  >"$OUT_DIR/moe-batched-grouped.log" 2>&1
note "32 sequences, their steps' slots grouped by expert (EDDY_CUDA_MOE_ROWS=8): $(tail -1 "$OUT_DIR/moe-batched-grouped.log" | tr -s ' ')"
EDDY_CUDA_PROFILE=1 bounded 90 $E bench -m "$MOE" --device cuda -p 512 -n 32 -r 1 >"$OUT_DIR/moe-profile.log" 2>&1
note "decode and a prefill of 512, by kind of work: $(grep -A10 'CUDA profile' "$OUT_DIR/moe-profile.log" | head -11)"
EDDY_CUDA_PROFILE=1 bounded 90 $E bench -m "$MOE" --device cuda --npl 32 -p 1 -n 32 -r 1 >"$OUT_DIR/moe-profile32.log" 2>&1
note "32 sequences, by kind of work: $(grep -A10 'CUDA profile' "$OUT_DIR/moe-profile32.log" | head -11)"
note "== done at $(elapsed)"
