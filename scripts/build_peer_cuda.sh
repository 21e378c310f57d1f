#!/usr/bin/env bash
# build_peer_cuda.sh — llama.cpp's llama-bench with its CUDA backend, for the side-by-side
# row of scripts/device_check.sh: built here (nvcc and a network, no GPU needed) from the
# llama.cpp tree the llama-cpp-python sdist carries, for one GPU architecture (sm_90: H100,
# H200), its ggml and llama libraries linked in.
#
#   scripts/build_peer_cuda.sh [OUT_DIR]     # default .peer (ignored by git)
#
# Environment: LCP_VERSION (default: the newest on PyPI), CUDA_ARCH (default
# 90-real), JOBS (default 2), SMOKE_MODEL (a GGUF to run once on the CPU afterwards).
# Writes OUT_DIR/llama-bench (stripped), OUT_DIR/llama-bench.xz and OUT_DIR/build-info.txt
# (versions, flags, size, the libraries it needs: libcudart, libcublas and libcublasLt of
# CUDA 13, the driver's libcuda, libgomp). About 45 minutes on 2 cores. Nothing of llama.cpp
# is kept in this repository: the sdist is downloaded into OUT_DIR.
#
# With llama-cpp-python 0.3.36 (llama.cpp 0c1e57098) the binary is 47.5 MiB, 21.6 MB as xz:
# more than the 64 MiB a device call carries leaves beside this repository's 51 MiB, so
# device_check.sh finds it only where it can travel (or is built on the GPU machine).
set -euo pipefail
OUT=${1:-.peer}
CUDA_ARCH=${CUDA_ARCH:-90-real}
JOBS=${JOBS:-2}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
command -v nvcc >/dev/null || { echo "build_peer_cuda: nvcc is not on PATH" >&2; exit 1; }
command -v cmake >/dev/null || { echo "build_peer_cuda: cmake is needed (apt-get install cmake)" >&2; exit 1; }

# the sdist, unpacked: its vendor/llama.cpp is the tree
rm -rf "$OUT/sdist" "$OUT/src"
mkdir -p "$OUT/sdist" "$OUT/src"
# (PyPI's JSON index names the sdist; `pip download` would first build the sdist's build
# dependencies, cmake among them, from source)
python3 - "$OUT/sdist" "${LCP_VERSION:-}" <<'PY'
import json, os, sys, urllib.parse, urllib.request
out, version = sys.argv[1], sys.argv[2]
url = "https://pypi.org/pypi/llama-cpp-python/%sjson" % (version + "/" if version else "")
files = json.load(urllib.request.urlopen(url))["urls"]
sdist = next(f for f in files if f["packagetype"] == "sdist")
# (a mirror may give the file's address relative to the index's)
urllib.request.urlretrieve(urllib.parse.urljoin(url, sdist["url"]), os.path.join(out, sdist["filename"]))
print("build_peer_cuda: %s" % sdist["filename"], file=sys.stderr)
PY
tar -xzf "$(ls "$OUT"/sdist/llama_cpp_python-*.tar.gz | sort -V | tail -1)" -C "$OUT/src"
ROOT=$(ls -d "$OUT"/src/llama_cpp_python-* | head -1)
TREE=$ROOT/vendor/llama.cpp
[ -f "$TREE/CMakeLists.txt" ] || { echo "build_peer_cuda: no llama.cpp tree in $ROOT" >&2; exit 1; }
# the vendored tree is a shallow checkout: its commit, else the changelog's
COMMIT=$(git -C "$TREE" rev-parse --short=9 HEAD 2>/dev/null ||
  grep -m1 -o 'ggml-org/llama.cpp@[0-9a-f]*' "$ROOT/CHANGELOG.md" | cut -d@ -f2 || echo unknown)
grep -q '"qwen35"' "$TREE/src/llama-arch.cpp" || echo "build_peer_cuda: WARNING: this llama.cpp reads no qwen35 file" >&2

# only llama-bench; portable AVX2 host code (not tuned to this machine); no NCCL or TLS
# libraries to need on the GPU machine; cuBLAS stays a shared library (no static one ships)
FLAGS=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH"
  -DGGML_CUDA_NCCL=OFF -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON
  -DGGML_F16C=ON -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_COMMIT="$COMMIT")
t0=$(date +%s)
rm -rf "$OUT/build"
nice -n 19 cmake -S "$TREE" -B "$OUT/build" "${FLAGS[@]}" >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
nice -n 19 cmake --build "$OUT/build" --target llama-bench -j"$JOBS" >>"$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; exit 1; }
strip -o "$OUT/llama-bench" "$OUT/build/bin/llama-bench"
nice -n 19 xz -9 -k -f "$OUT/llama-bench"
{
  echo "llama-cpp-python $(basename "$ROOT" | sed 's/^llama_cpp_python-//'), llama.cpp $COMMIT, $CUDA_ARCH"
  echo "built in $(($(date +%s) - t0)) s with $(nvcc --version | tail -1)"
  echo "cmake ${FLAGS[*]}"
  ls -l "$OUT/llama-bench" "$OUT/llama-bench.xz"
  ldd "$OUT/llama-bench" || true
} | tee "$OUT/build-info.txt"

# a machine without the NVIDIA driver cannot load the binary (libcuda.so.1): the toolkit's
# stub lets it start, fail CUDA's initialization and run on the CPU
if [ -n "${SMOKE_MODEL:-}" ]; then
  stub=$(find "$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")" -path '*stubs/libcuda.so' | head -1)
  mkdir -p "$OUT/stubs" && ln -sf "$stub" "$OUT/stubs/libcuda.so.1"
  LD_LIBRARY_PATH="$OUT/stubs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$OUT/llama-bench" -m "$SMOKE_MODEL" -p 16 -n 4 -r 1 -ngl 0 -t 2
fi
