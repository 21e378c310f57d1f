#!/usr/bin/env bash
# run-tests.sh BUILD_DIR — runs every test suite `make test` built and prints one
# closing line "N passed, M failed" summed over all of them:
#   1. unit tests (release build)
#   2. unit tests with EDDY_FORCE_REF=1 (scalar reference paths only)
#   3. unit tests under ASan + UBSan
#   3b. unit tests of the aarch64 build (NEON paths) under qemu-user
#   4. CLI tests against the release binary and the sanitizer binary
#   4a. server tests: eddy serve against the openai Python package (installed from PyPI
#       into build/venv-server), 32 concurrent streams, hostile requests; release and
#       sanitizer binaries
#   4b. library tests: exported symbols, a program with sockets linked against
#       libeddy.a and libeddy.so, make install + pkg-config
#   4c. the CUDA backend's tests on the CPU emulator (build/cuda-emu, made when nvcc is
#       there): every kernel against its CPU oracle, whole models against transformers
#       and the CPU engine, sequences, verify and rollback on the GPU path; then the kernel
#       tests with the threads in reverse and in random order (races); the eddy command and
#       eddy serve on an emulated GPU (snapshot states sharing few KV blocks), stopping at
#       any operation on the legacy stream
#   5. fuzz smoke: each fuzzer for FUZZ_SMOKE_SECONDS (default 20) from its seeds
set -u
B=${1:-build}
total_pass=0
total_fail=0

# Runs a command whose output ends with "N passed, M failed"; adds the counts.
# A suite that crashes or prints no summary counts as one failure.
suite() {
  local name=$1; shift
  echo "== $name"
  local log
  log=$(mktemp)
  "$@" 2>&1 | tee "$log" | grep -E '^(FAIL|eddy tests: seed|emu: )|passed, .* failed|ERROR|error:' | head -40
  local rc=${PIPESTATUS[0]}
  local line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
  if [ -n "$line" ]; then
    local p f
    p=$(echo "$line" | awk '{print $1}')
    f=$(echo "$line" | awk '{print $3}')
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
      echo "   $name exited with status $rc"; total_fail=$((total_fail + 1))
      tail -20 "$log"
    fi
  else
    echo "   $name produced no summary (exit status $rc)"; tail -30 "$log"
    total_fail=$((total_fail + 1))
  fi
  rm -f "$log"
}

suite "unit tests" "$B/eddy-tests"
suite "unit tests, reference kernels only" env EDDY_FORCE_REF=1 "$B/eddy-tests"
suite "unit tests, ASan+UBSan" env ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
  UBSAN_OPTIONS=print_stacktrace=1 "$B/asan/eddy-tests"
suite "unit tests, aarch64 build under qemu" env EDDY_TEST_EMULATED=1 qemu-aarch64 "$B/aarch64/eddy-tests"
suite "CLI tests" tests/cli/run.sh "$B/eddy"
suite "CLI tests, ASan+UBSan" env ASAN_OPTIONS=detect_leaks=1 tests/cli/run.sh "$B/asan/eddy"
suite "CLI batch tests" tests/cli/batch.sh "$B/eddy"
suite "CLI batch tests, ASan+UBSan" env ASAN_OPTIONS=detect_leaks=1 tests/cli/batch.sh "$B/asan/eddy"
suite "CLI session tests" tests/cli/session.sh "$B/eddy"
suite "CLI session tests, ASan+UBSan" env ASAN_OPTIONS=detect_leaks=1 tests/cli/session.sh "$B/asan/eddy"
suite "server tests" tests/server/run.sh "$B/eddy"
suite "server tests, ASan+UBSan" tests/server/run.sh "$B/asan/eddy"
suite "library tests" tests/lib/run.sh "$B"
if [ -x "$B/cuda-emu/eddy-cuda-tests" ]; then
  suite "CUDA backend tests, emulated on the CPU" "$B/cuda-emu/eddy-cuda-tests"
  # the kernel tests again with the threads of a block and the blocks of a launch taking
  # their turns in other orders: a kernel whose result depends on the order has a race
  suite "CUDA kernel tests, emulated, threads in reverse order" env EDDY_EMU_ORDER=reverse \
    "$B/cuda-emu/eddy-cuda-tests" test_cuda_kernels
  suite "CUDA kernel tests, emulated, threads in random order" env EDDY_EMU_ORDER=shuffle \
    "$B/cuda-emu/eddy-cuda-tests" test_cuda_kernels
  # the eddy command's GPU work all on its engines' own streams: the emulator stops at an
  # operation on the legacy stream
  suite "CUDA backend CLI tests, emulated on the CPU" env EDDY_EMU_LEGACY_STREAM=fail \
    tests/cuda/cli.sh "$B/eddy" "$B/cuda-emu/eddy"
  suite "server tests, emulated GPU (pinned sessions give way to running requests)" \
    env EDDY_EMU_LEGACY_STREAM=fail tests/server/run.sh "$B/cuda-emu/eddy" gpu
else
  echo "== CUDA backend tests: not built (no nvcc)"
fi

# Fuzz smoke: a clean exit after the time limit is a pass.
for fz in "$B"/fuzz/fuzz_*; do
  [ -x "$fz" ] || continue
  n=$(basename "$fz")
  echo "== fuzz smoke: $n (${FUZZ_SMOKE_SECONDS:-20}s)"
  corpus=$(mktemp -d)
  log=$(mktemp)
  if "$fz" -max_total_time="${FUZZ_SMOKE_SECONDS:-20}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      "$corpus" "tests/data/fuzz-seeds/$n" >"$log" 2>&1; then
    grep -E 'stat::number_of_executed_units|Done [0-9]+ runs' "$log" | sed 's/^/   /'
    total_pass=$((total_pass + 1))
  else
    echo "   $n found a failure:"; tail -40 "$log"
    total_fail=$((total_fail + 1))
  fi
  rm -rf "$corpus" "$log"
done

echo
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
