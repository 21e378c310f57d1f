#!/usr/bin/env bash
# device_sanitize.sh — the CUDA kernel tests under NVIDIA's compute-sanitizer, on a machine
# with a GPU: what the CPU emulator cannot see there (src/cuda/ck_emu.h) — accesses out of
# any allocation, before one's start or inside the rounding after its end (memcheck),
# hazards on shared memory between threads as the hardware interleaves them (racecheck),
# barriers not reached by all the threads they wait for (synccheck), and reads of device
# memory nothing wrote (initcheck).
#
#   scripts/device_sanitize.sh [OUT_DIR]
#
# A third call after scripts/device_check.sh on the same machine reuses its build; on a
# fresh machine it builds the tests first (sm_90). Each tool runs
# `eddy-cuda-tests test_cuda_kernels` (the kernels against their CPU oracles; the model
# tests would take the sanitizers many minutes) for at most 150 s, within about 9 minutes
# in all (DEADLINE); the last lines printed are a summary, each tool's first reports after
# it. The sanitizer slows the kernels tens of times, so nothing here is a timing.
set -u
cd "$(dirname "$0")/.."
SUMMARY=${SUMMARY:-${1:-${OUT:-/tmp/eddy-device}}/sanitize.txt}
. scripts/device_env.sh
: >"$SUMMARY"

CS=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
if [ ! -x "$CS" ]; then
  note "compute-sanitizer is not installed (it comes with the CUDA toolkit): nothing checked"
  exit 1
fi
note "== device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1); $("$CS" --version | tail -1)"
if [ ! -x build/cuda/eddy-cuda-tests ]; then
  device_toolchain
  device_build "$OUT_DIR/build.log" cuda-tests
fi

failed=0
for tool in memcheck racecheck synccheck initcheck; do
  log="$OUT_DIR/sanitize-$tool.log"
  bounded 150 "$CS" --tool "$tool" --error-exitcode 3 build/cuda/eddy-cuda-tests test_cuda_kernels >"$log" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] && failed=$((failed + 1))
  note "== $tool (rc $rc: 3 is a report, 124 out of time): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed, ' "$log" |
    tr '\n' ' ') at $(elapsed)"
  # the first reports, with the kernel and the access each names
  grep -m4 -A5 -E '^========= (Invalid|Race|Error|Warning|Barrier|Uninitialized|Program hit)' "$log" | head -40
done
note "== done at $(elapsed): $failed of 4 tools reported or did not finish"
