#!/usr/bin/env bash
# device_check.sh — the CUDA backend's check on a machine with an NVIDIA GPU, in one go:
# build (make CUDA=1), the CUDA kernel and model tests against the CPU references and
# transformers' logits, the CLI tests against the CPU (tests/cuda/cli.sh), then timings on
# a 4B-parameter-shaped Qwen3.5 Q4_K_M generated on the spot (scripts/gen_random_qwen35.py:
# numpy and the `gguf` package, no download).
#
#   scripts/device_check.sh [OUT_DIR]
#
# Logs go to OUT_DIR (default $OUT, else /tmp/eddy-device); the last lines printed are a
# summary. Needs nvcc, python3 with numpy, and gguf importable, or its wheel in .whl/ (on a
# machine with a network: python3 -m pip download --no-deps -d .whl gguf==0.17.1), and
# xxhash.h installed or in .deps/include (scripts/device_env.sh says how to get it there;
# scripts/device_carry.sh prepares both, and makes room for llama.cpp's binary in .peer/).
# Stages are bounded by timeouts so the whole check stays within about 10 minutes; the
# last, where Nsight Compute is installed, is scripts/device_profile.sh's per-kernel table.
set -u
cd "$(dirname "$0")/.."
. scripts/device_env.sh
: >"$SUMMARY"

note "== device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
note "== cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores"

# the model is generated while the build runs
device_model >"$OUT_DIR/gen.log" 2>&1 &
GEN=$!

device_toolchain
note "== C compiler: ${CC:-cc}, extra libraries: ${LDLIBS:-none}"
device_build "$OUT_DIR/build.log" build/cuda/eddy cuda-tests

timeout 300 build/cuda/eddy-cuda-tests >"$OUT_DIR/tests.log" 2>&1
rc=$?
grep -E '^FAIL|check failed|passed, ' "$OUT_DIR/tests.log" | head -40
note "== CUDA tests (rc $rc): $(tail -1 "$OUT_DIR/tests.log") at $(elapsed)"

timeout 120 tests/cuda/cli.sh build/cuda/eddy build/cuda/eddy >"$OUT_DIR/cli.log" 2>&1
grep -E '^FAIL' "$OUT_DIR/cli.log" | head -10
note "== CLI tests against the CPU: $(tail -1 "$OUT_DIR/cli.log") at $(elapsed)"

device_model_ready $GEN "$M4B" "$OUT_DIR/gen.log"

E=build/cuda/eddy
# the tensor cores' rate for the prefill's products (f16 in, f32 sums, as cuBLAS runs them here),
# measured now: an 8192^3 product through PyTorch, median of 20 after warm-up
timeout 60 python3 - >"$OUT_DIR/peak.log" 2>&1 <<'PY'
import torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
for _ in range(3): a @ b
ts = []
for _ in range(20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); a @ b; e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
ts.sort()
print("f16 tensor-core peak: %.0f TFLOP/s (8192^3, median of 20)" % (2 * 8192**3 / (ts[10] * 1e-3) / 1e12))
PY
note "$(tail -1 "$OUT_DIR/peak.log")"
# the timings, in order of importance, each bounded by what is left of DEADLINE seconds
bounded 240 $E bench -m "$M4B" --device cuda -p 2048 -n 128 -r 2 >"$OUT_DIR/bench.log" 2>&1
note "$(tail -12 "$OUT_DIR/bench.log")"
note "== single-sequence bench at $(elapsed)"
grep -q 'graphs are off' "$OUT_DIR/bench.log" && note "WARNING: $(grep -m1 'graphs are off' "$OUT_DIR/bench.log")"
# llama.cpp on the same file and GPU, where its CUDA build travelled in .peer/ (made on a
# machine with a network by scripts/build_peer_cuda.sh; carried, never committed; as is or
# as llama-bench.xz): with its defaults, and with flash attention and the prompt in one
# 2048-token micro-batch
PEER=.peer/llama-bench
if [ ! -x "$PEER" ] && [ -f .peer/llama-bench.xz ]; then
  PEER=/tmp/llama-bench
  xz -dc .peer/llama-bench.xz >"$PEER" 2>/dev/null ||
    python3 -c 'import lzma, sys; sys.stdout.buffer.write(lzma.open(".peer/llama-bench.xz").read())' >"$PEER"
  chmod +x "$PEER"
fi
if [ -x "$PEER" ]; then
  CUDA_LIB=$(dirname "$(dirname "$(command -v nvcc)")")/lib64
  for flags in "" "-fa 1 -ub 2048"; do
    # shellcheck disable=SC2086
    LD_LIBRARY_PATH="$CUDA_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      bounded 90 "$PEER" -m "$M4B" -ngl 99 -p 2048 -n 128 -r 2 $flags >"$OUT_DIR/peer.log" 2>&1
    note "llama.cpp (-ngl 99 ${flags:-with its defaults}): $(grep -E 'pp2048|tg128' "$OUT_DIR/peer.log" | tr -s ' ' |
      tr '\n' ' ')$(grep -q 'pp2048' "$OUT_DIR/peer.log" || tail -2 "$OUT_DIR/peer.log" | tr '\n' ' ')"
  done
else
  note "(no llama.cpp row: no .peer/llama-bench travelled; scripts/build_peer_cuda.sh makes it)"
fi
bounded 180 $E bench -m "$M4B" --device cuda --npl 1,8,32 -p 128 -n 32 -r 1 >"$OUT_DIR/batched.log" 2>&1
note "$(tail -8 "$OUT_DIR/batched.log")"
# what the state pool commits on the device for speculative decoding (17 verify row states)
# and chat's undo stack (snapshots in host memory): its info line
EDDY_LOG_LEVEL=info bounded 60 $E chat -m "$M4B" --device cuda --spec-type ngram -n 4 --chat-template chatml \
  </dev/null >"$OUT_DIR/pool.log" 2>&1
note "$(grep -m1 'state pool takes' "$OUT_DIR/pool.log")"
# each decode kernel alone and back to back at the model's shapes, against the copy bandwidth
bounded 120 build/cuda/eddy-cuda-bench 30 >"$OUT_DIR/kernel-bench.log" 2>&1
note "$(cat "$OUT_DIR/kernel-bench.log")"
# what decode gains from its fused kernels (the conv writing its windows, one kernel for a
# Gated DeltaNet layer's gate, scan and norm, the gate in the attention's fold), in the same run
EDDY_CUDA_FUSED=0 bounded 90 $E bench -m "$M4B" --device cuda -p 0 -n 128 -r 2 >"$OUT_DIR/bench-unfused.log" 2>&1
note "decode with the kernels the fused ones replace (EDDY_CUDA_FUSED=0): $(grep -E 'tg128|roofline' "$OUT_DIR/bench-unfused.log" | tr -s ' ' | tr '\n' ' ')"
# what the products' early start (programmatic dependent launch) and their four items in
# flight a lane gain in decode, in the same run
EDDY_CUDA_PDL=0 bounded 90 $E bench -m "$M4B" --device cuda -p 0 -n 128 -r 2 >"$OUT_DIR/bench-nopdl.log" 2>&1
note "decode, products launched plainly (EDDY_CUDA_PDL=0): $(grep -E 'tg128|roofline' "$OUT_DIR/bench-nopdl.log" | tr -s ' ' | tr '\n' ' ')"
EDDY_CUDA_GEMV_DEPTH=1 bounded 90 $E bench -m "$M4B" --device cuda -p 0 -n 128 -r 2 >"$OUT_DIR/bench-depth1.log" 2>&1
note "decode, products loading an item at a time (EDDY_CUDA_GEMV_DEPTH=1): $(grep -E 'tg128|roofline' "$OUT_DIR/bench-depth1.log" | tr -s ' ' | tr '\n' ' ')"
# where a step of 32 sequences' decode goes, by kind of work (event timings; graphs are off
# for such steps anyway): the batched target's breakdown, which Nsight Compute could not give
# in its minutes
EDDY_CUDA_PROFILE=1 bounded 90 $E bench -m "$M4B" --device cuda --npl 32 -p 1 -n 32 -r 1 >"$OUT_DIR/profile32.log" 2>&1
note "$(grep -A10 'CUDA profile' "$OUT_DIR/profile32.log" | head -11)"
# what 32 sequences' steps gain from the quantized tensor-core products (ck_mmq) against
# cuBLAS on f16 copies, in the same run
EDDY_CUDA_MMQ=0 bounded 120 $E bench -m "$M4B" --device cuda --npl 8,32 -p 128 -n 32 -r 1 >"$OUT_DIR/batched-nommq.log" 2>&1
note "batched decode through cuBLAS (EDDY_CUDA_MMQ=0): $(tail -4 "$OUT_DIR/batched-nommq.log" | tr -s ' ' | tr '\n' '|')"
EDDY_CUDA_GRAPHS=0 bounded 90 $E bench -m "$M4B" --device cuda --npl 32 -p 128 -n 32 -r 1 >"$OUT_DIR/batched-nographs.log" 2>&1
note "batched decode without graphs (EDDY_CUDA_GRAPHS=0): $(tail -1 "$OUT_DIR/batched-nographs.log" | tr -s ' ')"
# what the tensor cores' attention, the 2048-token steps, the chunked delta rule (its tiles
# on the tensor cores) and the integer products gain, in the same run
EDDY_CUDA_FLASH=0 bounded 120 $E bench -m "$M4B" --device cuda -p 2048 -n 0 -r 1 >"$OUT_DIR/bench-tiles.log" 2>&1
note "prefill, attention in FP32 tiles (EDDY_CUDA_FLASH=0): $(grep -E 'pp2048' "$OUT_DIR/bench-tiles.log" | tr -s ' ')"
bounded 120 $E bench -m "$M4B" --device cuda -p 2048 -n 0 -r 1 -b 512 >"$OUT_DIR/bench-b512.log" 2>&1
note "prefill in steps of 512 tokens (-b 512): $(grep -E 'pp2048' "$OUT_DIR/bench-b512.log" | tr -s ' ')"
EDDY_CUDA_CHUNKED=0 bounded 120 $E bench -m "$M4B" --device cuda -p 2048 -n 0 -r 1 >"$OUT_DIR/bench-rows.log" 2>&1
note "prefill with the scans row by row (EDDY_CUDA_CHUNKED=0): $(grep -E 'pp2048' "$OUT_DIR/bench-rows.log" | tr -s ' ')"
EDDY_CUDA_SCAN_MMA=0 bounded 120 $E bench -m "$M4B" --device cuda -p 2048 -n 0 -r 1 >"$OUT_DIR/bench-scan-fma.log" 2>&1
note "prefill, the delta rule's tiles on the CUDA cores (EDDY_CUDA_SCAN_MMA=0): $(grep -E 'pp2048' "$OUT_DIR/bench-scan-fma.log" | tr -s ' ')"
EDDY_CUDA_DP4A=0 bounded 120 $E bench -m "$M4B" --device cuda -p 0 -n 128 -r 2 >"$OUT_DIR/bench-float.log" 2>&1
note "decode with float products (EDDY_CUDA_DP4A=0): $(grep -E 'tg128|roofline' "$OUT_DIR/bench-float.log" | tr -s ' ' | tr '\n' ' ')"
# the host's share, after the speed targets' figures: sampling from each row's best 40 found
# on the GPU, a session's next turn, perplexity.
# 32 sequences sampled with eddy run's defaults: from each row's best 40 found on the GPU
# against whole rows of logits copied back and sampled on the host (the same tokens)
for how in top logits; do
  bounded 60 $E bench -m "$M4B" --device cuda --npl 32 -p 128 -n 32 -r 1 --sampling $how \
    >"$OUT_DIR/sampled-$how.log" 2>&1
  note "32 sequences sampled (--sampling $how): $(tail -1 "$OUT_DIR/sampled-$how.log" | tr -s ' ')"
done
# a speculative verify of 1 + 4 tokens against a plain step, each row's argmax found on the
# GPU (what greedy drafts walk now) against the rows of logits copied back
for how in argmax logits; do
  bounded 60 $E bench -m "$M4B" --device cuda --verify 4 -p 512 -n 16 -r 2 --sampling $how \
    >"$OUT_DIR/verify-$how.log" 2>&1
  note "verify of 5 tokens (--sampling $how): $(grep -E 'plain step|K = 4' "$OUT_DIR/verify-$how.log" | tr -s ' ' | tr '\n' ' ')"
done
# the next turn of a 4000-token conversation on the GPU: reprocessed, from a session file
# (written and read through host copies), and from the prefix cache
bounded 90 $E bench -m "$M4B" --device cuda --session-turn -p 4000 -n 32 -r 1 --dir "$OUT_DIR" \
  >"$OUT_DIR/session-turn.log" 2>&1
note "$(tail -6 "$OUT_DIR/session-turn.log")"
# the model split between the CPU and the GPU (-ngl 16: the last 16 of the 32 layers on the
# GPU, the 16 before on this machine's CPUs): decode and a 512-token prefill, against the
# whole model on the GPU above
bounded 90 $E bench -m "$M4B" -ngl 16 -p 512 -n 32 -r 1 >"$OUT_DIR/bench-split.log" 2>&1
note "split, the last 16 layers on the GPU (-ngl 16): $(grep -E 'device|pp512|tg32' "$OUT_DIR/bench-split.log" | \
tr -s ' ' | tr '\n' ' ')"
# perplexity on the GPU (chunks of 512, 2048 tokens a step, the log-probabilities computed
# there): its rate against the prefill's above, which it should approach
ppl_t0=$(date +%s.%N) # not t0: bounded and elapsed count from device_env.sh's
bounded 90 $E perplexity -m "$M4B" -f tests/data/models/tiny-hybrid-heldout.txt -c 512 --chunks 24 -ngl 99 \
  >"$OUT_DIR/perplexity.log" 2>&1
ppl_t1=$(date +%s.%N)
secs=$(awk "BEGIN {printf \"%.2f\", $ppl_t1 - $ppl_t0}")
note "perplexity on the GPU: $(grep -o 'eddy: [0-9]* tokens, [0-9]* chunks' "$OUT_DIR/perplexity.log"), \
$(grep -o 'Final estimate.*' "$OUT_DIR/perplexity.log") in $secs s (with the load)"
# each kernel's time in a decode step (Nsight Compute, where the machine has it)
if command -v ncu >/dev/null 2>&1 || ls /opt/nvidia/nsight-compute/*/ncu >/dev/null 2>&1; then
  EDDY_BIN=$E MODELS=$MODELS bounded 150 scripts/device_profile.sh "$OUT_DIR/ncu" >"$OUT_DIR/kernels.log" 2>&1
  note "$(grep -v '^== eddy' "$OUT_DIR/kernels.log" | head -40)"
  PP=2048 EDDY_BIN=$E MODELS=$MODELS bounded 120 scripts/device_profile.sh "$OUT_DIR/ncupp" >"$OUT_DIR/kernelspp.log" 2>&1
  note "$(grep -v '^== eddy' "$OUT_DIR/kernelspp.log" | head -24)"
  NPL=32 EDDY_BIN=$E MODELS=$MODELS bounded 120 scripts/device_profile.sh "$OUT_DIR/ncu32" >"$OUT_DIR/kernels32.log" 2>&1
  note "$(grep -v '^== eddy' "$OUT_DIR/kernels32.log" | head -24)"
fi
note "== done at $(elapsed)"
