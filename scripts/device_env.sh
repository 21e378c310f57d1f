# device_env.sh — what scripts/device_check.sh, device_check_moe.sh and device_profile.sh
# share, sourced from the repository's root with the output folder as $1: OUT_DIR, MODELS
# and the models' paths M4B and MOE; the checks' summary (note, elapsed, bounded), their
# build (device_build) and models (device_model, device_moe_model, device_model_ready:
# numpy and `gguf`, its wheel taken from .whl/ when it is not installed); device_toolchain,
# which makes a CUDA build work on a machine without Debian packages.
OUT_DIR=${1:-${OUT:-/tmp/eddy-device}}
mkdir -p "$OUT_DIR"
MODELS=${MODELS:-/tmp/eddy-models}
mkdir -p "$MODELS"
M4B="$MODELS/qwen35-4b-Q4_K_M.gguf"
MOE_LAYERS=${MOE_LAYERS:-40}
MOE="$MODELS/qwen35moe-35b-a3b-${MOE_LAYERS}l-Q4_K_M.gguf"

# For the checks: note LINE prints LINE and adds it to SUMMARY; elapsed is the time since
# this file was sourced (t0); bounded SECONDS CMD... runs CMD for at most SECONDS, fewer
# when DEADLINE seconds from t0 (560 unless set) are nearer, and skips it under 20.
SUMMARY=${SUMMARY:-$OUT_DIR/summary.txt}
t0=$(date +%s)
note() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(($(date +%s) - t0))s; }
bounded() {
  local s=$1 l=$((${DEADLINE:-560} - $(date +%s) + t0))
  shift
  if [ "$l" -lt 20 ]; then note "(skipped for time: $*)"; return 1; fi
  [ "$l" -lt "$s" ] && s=$l
  timeout "$s" "$@"
}

# device_build LOG TARGETS...: make CUDA=1 TARGETS for sm_90 (the CI build compiles sm_80 and
# sm_90), at most 400 s; a failed build ends the check with LOG's end and a note.
device_build() {
  local log=$1
  shift
  if ! timeout 400 make -j"$(nproc)" CUDA=1 SERVER=0 WERROR=1 CUDA_ARCHS="-gencode arch=compute_90,code=sm_90" "$@" \
      >"$log" 2>&1; then
    tail -30 "$log"
    note "BUILD FAILED after $(elapsed) ($(basename "$log"))"
    exit 1
  fi
  note "== built in $(elapsed)"
}

# device_model_ready PID FILE LOG: waits for the generation PID of FILE; without FILE, ends
# the check with LOG's end and a note.
device_model_ready() {
  wait "$1"
  if [ ! -s "$2" ]; then
    tail -5 "$3"
    note "MODEL GENERATION FAILED ($(basename "$3"))"
    exit 1
  fi
  note "== model: $(basename "$2") $(du -h "$2" | cut -f1) at $(elapsed)"
}

device_toolchain() {
  # xxhash.h (header-only here) may travel in .deps/include (apt-get download
  # libxxhash-dev; dpkg -x it; copy usr/include/xxh*.h)
  if ! echo '#include <xxhash.h>' | ${CC:-gcc} -E -x c - >/dev/null 2>&1 && [ -f .deps/include/xxhash.h ]; then
    export CFLAGS="${CFLAGS:-} -isystem $PWD/.deps/include"
  fi
  # libstdc++ as a shared library: a toolchain with only a static, non-PIC libstdc++.a
  # cannot link it into eddy's position-independent executable, so name the system's
  # libstdc++.so.6 first
  if [ "$(${CC:-cc} -print-file-name=libstdc++.so)" = libstdc++.so ]; then
    local so
    so=$(ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}')
    [ -n "$so" ] && export LDLIBS="${LDLIBS:-} $so"
  fi
}

device_gguf() {
  if ! python3 -c 'import gguf' 2>/dev/null && ls .whl/gguf-*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/gguf-*.whl >/dev/null 2>&1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
}

# generate FILE ARGS...: scripts/gen_random_qwen35.py ARGS into FILE, unless it is there (a
# generation cut short leaves no FILE)
generate() {
  local f=$1
  shift
  [ -s "$f" ] && return 0
  device_gguf
  timeout 300 python3 scripts/gen_random_qwen35.py "$@" --out "$f.part" && mv "$f.part" "$f"
}

device_model() { generate "$M4B" --shape 4b --type Q4_K_M; }

# Qwen3.5-35B-A3B's shape, MOE_LAYERS of its 40 layers (about 0.5 GB a layer)
device_moe_model() { generate "$MOE" --shape 35b-a3b --layers "$MOE_LAYERS" --type Q4_K_M; }
