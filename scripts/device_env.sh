# device_env.sh — what scripts/device_check.sh and scripts/device_profile.sh share, sourced
# from the repository's root with the output folder as $1: OUT_DIR, MODELS and the model's
# path M4B; device_toolchain, which makes a CUDA build work on a machine without Debian
# packages; device_model, which generates the model (numpy and `gguf`, its wheel taken from
# .whl/ when it is not installed).
OUT_DIR=${1:-${OUT:-/tmp/eddy-device}}
mkdir -p "$OUT_DIR"
MODELS=${MODELS:-/tmp/eddy-models}
mkdir -p "$MODELS"
M4B="$MODELS/qwen35-4b-Q4_K_M.gguf"

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

device_model() {
  if ! python3 -c 'import gguf' 2>/dev/null && ls .whl/gguf-*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/gguf-*.whl >/dev/null 2>&1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  [ -s "$M4B" ] || timeout 300 python3 scripts/gen_random_qwen35.py --shape 4b --type Q4_K_M --out "$M4B"
}
