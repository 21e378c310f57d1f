#!/usr/bin/env bash
# tests/cuda/cli.sh CPU_EDDY GPU_EDDY — the eddy command with --device cuda / -ngl against
# the CPU: greedy text from F32 tiny models is the CPU's (the logits agree within 1e-4,
# far inside the gaps between the top tokens here), for run (the whole model on the GPU, or
# split: -ngl 1), batch (greedy and sampled), chat's /undo and a session file made on one
# device and resumed on the other; bench runs on the device. GPU_EDDY is a
# `make CUDA=1` binary on a GPU machine, or the `make CUDA_EMU=1` one on the CPU emulator.
# Prints "N passed, M failed".
set -u
CPU=${1:?usage: cli.sh CPU_EDDY GPU_EDDY}
GPU=${2:?usage: cli.sh CPU_EDDY GPU_EDDY}
EDDY=$GPU
. "$(dirname "$0")/../cli/common.sh"

for m in qwen35-tiny-f32 llama-tiny-f32 nemotron_h-tiny-f32 qwen35moe-tiny-f32; do
  M=tests/data/models/$m.gguf
  "$CPU" run -m "$M" -p "Once upon a time" -n 16 --temp 0 -t 2 >"$TMP/cpu" 2>/dev/null
  for dev in "--device cuda" "-ngl 99" "-ngl 1"; do
    # shellcheck disable=SC2086
    if "$GPU" run -m "$M" -p "Once upon a time" -n 16 --temp 0 $dev >"$TMP/gpu" 2>"$TMP/err" &&
       [ -s "$TMP/cpu" ] && cmp -s "$TMP/cpu" "$TMP/gpu"; then ok
    else bad "$m run $dev differs from the CPU: [$(head -c 80 "$TMP/cpu")] [$(head -c 80 "$TMP/gpu")] $(tail -1 "$TMP/err")"; fi
  done
done

# batch: each prompt's text is the CPU's run of it alone
printf 'Once upon a time\nThe cat sat on the\nIn the beginning\n' >"$TMP/prompts.txt"
M=tests/data/models/qwen35-tiny-f32.gguf
"$CPU" batch -m "$M" -f "$TMP/prompts.txt" -n 8 --temp 0 -t 2 >"$TMP/cpu" 2>/dev/null
if "$GPU" batch -m "$M" -f "$TMP/prompts.txt" -n 8 --temp 0 --device cuda >"$TMP/gpu" 2>"$TMP/err" &&
   [ -s "$TMP/cpu" ] && cmp -s "$TMP/cpu" "$TMP/gpu"; then ok
else bad "batch --device cuda differs from the CPU: $(diff "$TMP/cpu" "$TMP/gpu" | head -4) $(tail -1 "$TMP/err")"; fi

# sampled with run's defaults (top-k 40): the GPU gives each row's best 40 (ck_top_rows) and
# the samplers draw from them the tokens the CPU's run draws from whole rows
"$CPU" batch -m "$M" -f "$TMP/prompts.txt" -n 12 --seed 7 -t 2 >"$TMP/cpu" 2>/dev/null
if "$GPU" batch -m "$M" -f "$TMP/prompts.txt" -n 12 --seed 7 -np 3 --device cuda >"$TMP/gpu" 2>"$TMP/err" &&
   [ -s "$TMP/cpu" ] && cmp -s "$TMP/cpu" "$TMP/gpu"; then ok
else bad "batch --seed 7 --device cuda differs: $(diff "$TMP/cpu" "$TMP/gpu" | head -4) $(tail -1 "$TMP/err")"; fi

# a session saved on the GPU resumes on the CPU, and one saved on the CPU on the GPU: the
# continuation is the one a single run gives
"$CPU" run -m "$M" -p "Once upon a time there" -n 12 --temp 0 -t 2 >"$TMP/whole" 2>/dev/null
"$GPU" run -m "$M" -p "Once upon a time there" -n 0 --temp 0 --device cuda --session "$TMP/g.eddy" >/dev/null 2>&1
"$CPU" run -m "$M" -p "Once upon a time there" -n 12 --temp 0 -t 2 --session "$TMP/g.eddy" --session-ro \
  >"$TMP/resumed" 2>/dev/null
if [ -s "$TMP/g.eddy" ] && [ -s "$TMP/whole" ] && cmp -s "$TMP/whole" "$TMP/resumed"; then ok
else bad "a GPU session resumed on the CPU: [$(head -c 80 "$TMP/whole")] [$(head -c 80 "$TMP/resumed")]"; fi
"$CPU" run -m "$M" -p "Once upon a time there" -n 0 --temp 0 -t 2 --session "$TMP/c.eddy" >/dev/null 2>&1
"$GPU" run -m "$M" -p "Once upon a time there" -n 12 --temp 0 --device cuda --session "$TMP/c.eddy" --session-ro \
  >"$TMP/resumed" 2>/dev/null
if [ -s "$TMP/c.eddy" ] && cmp -s "$TMP/whole" "$TMP/resumed"; then ok
else bad "a CPU session resumed on the GPU: [$(head -c 80 "$TMP/whole")] [$(head -c 80 "$TMP/resumed")]"; fi

# a session saved by a model split between the CPU and the GPU (-ngl 2 of 4 layers)
# resumes on the CPU: the continuation of a single run
"$GPU" run -m "$M" -p "Once upon a time there" -n 0 --temp 0 -ngl 2 --session "$TMP/s.eddy" >/dev/null 2>&1
"$CPU" run -m "$M" -p "Once upon a time there" -n 12 --temp 0 -t 2 --session "$TMP/s.eddy" --session-ro \
  >"$TMP/resumed" 2>/dev/null
if [ -s "$TMP/s.eddy" ] && cmp -s "$TMP/whole" "$TMP/resumed"; then ok
else bad "a split model's session resumed on the CPU: [$(head -c 80 "$TMP/whole")] [$(head -c 80 "$TMP/resumed")]"; fi

# chat's /undo and /regen restore snapshots kept in host memory on the GPU: the CPU's replies
# (the whole model on the GPU, and its second layer only: -ngl 1)
C="chat -m tests/data/models/mamba2-tiny-f32.gguf --chat-template chatml --temp 0 -n 8"
# shellcheck disable=SC2086
printf 'hello there\nwhat now\n/undo\nwhat now\n/regen\nand then\n' | "$CPU" $C -t 2 >"$TMP/cpu" 2>/dev/null
for dev in "--device cuda" "-ngl 1"; do
  # shellcheck disable=SC2086
  if printf 'hello there\nwhat now\n/undo\nwhat now\n/regen\nand then\n' | "$GPU" $C $dev >"$TMP/gpu" 2>"$TMP/err" &&
     [ "$(wc -l <"$TMP/cpu")" -eq 5 ] && cmp -s "$TMP/cpu" "$TMP/gpu"; then ok
  else bad "chat /undo /regen with $dev differs from the CPU: $(diff "$TMP/cpu" "$TMP/gpu" | head -4) $(tail -1 "$TMP/err")"; fi
done

# chat's default prefix cache (256 MiB) on a GPU of 200 MiB: halved to fit, with a warning; the same
# budget given with --cache-ram stops it with the error naming the option. Only the emulator's GPU
# takes its size from EDDY_EMU_GPU_MIB: the pool's line says which this is.
M=tests/data/models/qwen35-tiny-f32.gguf
printf 'hello there\n' | EDDY_LOG_LEVEL=info EDDY_EMU_GPU_MIB=200 "$GPU" chat -m "$M" --device cuda \
  --chat-template chatml -n 4 >/dev/null 2>"$TMP/err"; rc=$?
free=$(sed -n 's/.* \([0-9]*\) bytes were free before it.*/\1/p' "$TMP/err" | head -1)
if [ -n "$free" ] && [ "$free" -lt $((200 << 20)) ]; then
  if [ $rc -eq 0 ] && grep -q "no room for the prefix cache's default 256 MiB beside the model: 128 MiB" "$TMP/err"
  then ok; else bad "chat's default cache on a small GPU: $(tail -1 "$TMP/err")"; fi
  if ! printf 'hello there\n' | EDDY_EMU_GPU_MIB=200 "$GPU" chat -m "$M" --device cuda --chat-template chatml -n 4 \
       --cache-ram 256 >/dev/null 2>"$TMP/err" && grep -q "a smaller prefix cache (cache_bytes, --cache-ram)" "$TMP/err"
  then ok; else bad "chat --cache-ram 256 on a small GPU: $(tail -1 "$TMP/err")"; fi
fi

# a model whose weights do not fit the GPU (the emulator's, of 0.8 MiB; only there): the error says
# how many of its last layers would (-ngl N, N below its 4 layers)
if "$GPU" bench -m "$M" --device cuda -p 1 -n 0 -r 1 --json 2>/dev/null | grep -q '"device": "cuda: emulated'; then
  if ! EDDY_EMU_GPU_MIB=0.8 "$GPU" run -m "$M" -p hi -n 1 -ngl 99 >/dev/null 2>"$TMP/err" &&
     grep -q "cannot upload the weights to the GPU: they take .* MiB were free; with gpu_layers [123] (-ngl) the weights" "$TMP/err"
  then ok; else bad "weights too large for the GPU: $(tail -1 "$TMP/err")"; fi
fi

# bench on the device: a prefill and a decode rate, and the GPU's bandwidth
if "$GPU" bench -m "$M" --device cuda -p 16 -n 4 -r 1 --json >"$TMP/bench" 2>"$TMP/err" &&
   grep -q '"pp_tps"\|"pp"' "$TMP/bench"; then ok
else bad "bench --device cuda: $(head -c 200 "$TMP/bench") $(tail -1 "$TMP/err")"; fi
# split (-ngl 1): the device names the GPU's layers; no roofline (two memories bound it)
if "$GPU" bench -m "$M" -ngl 1 -p 16 -n 4 -r 1 --json >"$TMP/bench" 2>"$TMP/err" &&
   grep -q '"device": "cuda.*(layers 3..3; the CPU runs 0..2)"' "$TMP/bench" && grep -q '"roofline": 0,' "$TMP/bench"
then ok
else bad "bench -ngl 1: $(head -c 300 "$TMP/bench") $(tail -1 "$TMP/err")"; fi
# the next turn of a conversation on the device: reprocessed, through a session file and
# through the prefix cache, each timed
if "$GPU" bench -m "$M" --device cuda --session-turn -p 40 -n 4 -r 1 --dir "$TMP" --json >"$TMP/bench" 2>"$TMP/err" &&
   grep -q '"t_load"' "$TMP/bench" && grep -q '"device": "cuda' "$TMP/bench"; then ok
else bad "bench --session-turn --device cuda: $(head -c 200 "$TMP/bench") $(tail -1 "$TMP/err")"; fi

# speculative decoding with the MTP layer on the GPU: the greedy text of plain decoding
M=tests/data/models/qwen35-mtp-tiny-f32.gguf
"$CPU" run -m "$M" -p "Once upon a time" -n 24 --temp 0 -t 2 >"$TMP/plain" 2>/dev/null
for dev in "--device cuda" "-ngl 2"; do
  # shellcheck disable=SC2086
  if "$GPU" run -m "$M" -p "Once upon a time" -n 24 --temp 0 --spec-type mtp $dev >"$TMP/spec" 2>"$TMP/err" &&
     [ -s "$TMP/plain" ] && cmp -s "$TMP/plain" "$TMP/spec"; then ok
  else bad "--spec-type mtp with $dev differs: [$(head -c 80 "$TMP/plain")] [$(head -c 80 "$TMP/spec")] $(tail -1 "$TMP/err")"; fi
done
# a draft model on the GPU too (-md with --device cuda): the greedy text of plain decoding
M=tests/data/models/qwen35-tiny-f32.gguf
"$CPU" run -m "$M" -p "Once upon a time" -n 20 --temp 0 -t 2 >"$TMP/plain" 2>/dev/null
if "$GPU" run -m "$M" -p "Once upon a time" -n 20 --temp 0 -md tests/data/models/qwen35-tiny-q8_0.gguf \
     --draft-p-min 0 --device cuda >"$TMP/spec" 2>"$TMP/err" && [ -s "$TMP/plain" ] && cmp -s "$TMP/plain" "$TMP/spec"
then ok
else bad "-md on the GPU differs: [$(head -c 80 "$TMP/plain")] [$(head -c 80 "$TMP/spec")] $(tail -1 "$TMP/err")"; fi

# perplexity and logits on the device: the CPU's figures (F32: logits within 1e-4; the
# perplexity within 1e-3 of itself)
M=tests/data/models/qwen35-tiny-f32.gguf
head -c 4000 tests/data/models/tiny-hybrid-heldout.txt >"$TMP/ppl.txt"
ppl() {
  "$1" perplexity -m "$M" -f "$TMP/ppl.txt" -c 128 "${@:2}" 2>/dev/null |
    sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p'
}
a=$(ppl "$CPU" -t 2) b=$(ppl "$GPU" -ngl 99)
if [ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(d * d < 1e-6 * a * a) }'; then ok
else bad "perplexity -ngl 99: [$b] against the CPU's [$a]"; fi
ids="1 17 300 42 9 250 77 5 1000 3 64 128 7 19 400 2"
"$CPU" logits -m "$M" --ids "$ids" --out "$TMP/cpu.f32" -t 2 >/dev/null 2>&1
if "$GPU" logits -m "$M" --ids "$ids" --out "$TMP/gpu.f32" --device cuda >/dev/null 2>"$TMP/err" &&
   [ -s "$TMP/cpu.f32" ] && [ "$(wc -c <"$TMP/cpu.f32")" = "$(wc -c <"$TMP/gpu.f32")" ] &&
   paste <(od -An -v -w4 -f "$TMP/cpu.f32") <(od -An -v -w4 -f "$TMP/gpu.f32") |
   awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4) bad++ } END { exit bad > 0 }'; then ok
else bad "logits --device cuda differ from the CPU's by more than 1e-4: $(tail -1 "$TMP/err")"; fi

# EDDY_CUDA_PROFILE=1: the same text, and a table of where the GPU's time went (the
# prompt's products in ck_mmq, decode in ck_gemv, the delta rule's scan)
M=tests/data/models/qwen35-tiny-q8_0.gguf
"$GPU" run -m "$M" -p "Once upon a time there was a cat who" -n 8 --temp 0 --device cuda >"$TMP/plain" 2>/dev/null
if EDDY_CUDA_PROFILE=1 "$GPU" run -m "$M" -p "Once upon a time there was a cat who" -n 8 --temp 0 --device cuda \
     >"$TMP/prof" 2>"$TMP/err" && cmp -s "$TMP/plain" "$TMP/prof" && grep -q "CUDA profile on .*: 9 steps" "$TMP/err" &&
   grep -q "products of up to 8 rows" "$TMP/err" && grep -q "products of 9+ rows, quantized" "$TMP/err" &&
   grep -q "gated delta rule scan" "$TMP/err"; then ok
else bad "EDDY_CUDA_PROFILE=1: $(grep -A8 'CUDA profile' "$TMP/err" | tr '\n' '|')"; fi
finish
