#!/usr/bin/env bash
# alternate.sh — compare eddy builds (or settings) on one model, run in turn so that the
# machine's drifts hit each alike; prints every run's figure, sorted, and the median.
#
# Usage: bench/alternate.sh ROUNDS MODEL [eddy bench args...] -- CONFIG...
#   CONFIG: a path to an eddy binary, or VAR=VALUE:BINARY to run it with one environment
#   setting (e.g. EDDY_CPU_OFF=avx512:build/eddy).
# The figure is decode t/s (tg) when the bench args generate tokens (-n > 0), else prefill.
# Example: bench/alternate.sh 5 qwen35-0.57b-Q4_K_M.gguf -p 0 -n 32 -r 2 -t 2 -- /tmp/old/eddy build/eddy
set -eu
[ $# -ge 4 ] || { sed -n '2,10p' "$0"; exit 2; }
rounds=$1 model=$2; shift 2
args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do args+=("$1"); shift; done
[ $# -gt 1 ] || { echo "alternate.sh: no configuration after --" >&2; exit 2; }
shift
declare -A runs
for _ in $(seq "$rounds"); do
  for c in "$@"; do
    envs=() bin=$c
    if [[ $c == *=*:* ]]; then envs=("${c%%:*}"); bin=${c#*:}; fi
    v=$(env "${envs[@]}" "$bin" bench -m "$model" "${args[@]}" --json | tail -1 |
        python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["tg_tps"] if j.get("tg_tps") else j["pp_tps"])')
    runs[$c]="${runs[$c]:-} $v"
  done
done
for c in "$@"; do
  sorted=$(tr ' ' '\n' <<<"${runs[$c]}" | grep . | sort -g)
  median=$(awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}' <<<"$sorted")
  echo "$c: $(tr '\n' ' ' <<<"$sorted") median $median"
done
