#!/usr/bin/env bash
# ensure-deps.sh [test|demo] — make sure the Debian packages eddy's build and tests need
# are installed. As root it installs what is missing with apt-get; otherwise it
# prints the exact apt-get line to run and fails.
set -eu

# what building needs (libxxhash-dev: the xxHash header of the session files' checksums;
# libmicrohttpd-dev and libjansson-dev: HTTP and JSON of `eddy serve`); `test` adds the
# sanitizer/fuzzer runtime, the aarch64 cross compiler and qemu (make test runs the NEON
# build's tests under emulation), pkg-config (the library tests compile against an
# installed copy with it) and python3-venv (the server tests install the openai package
# from PyPI into a virtualenv); `demo` adds pip, which fetches the demo model's wheel
need=(make gcc libxxhash-dev libmicrohttpd-dev libjansson-dev)
case "${1:-test}" in
  test) need+=(clang libclang-rt-14-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user pkg-config python3-venv) ;;
  demo) need+=(python3 python3-pip) ;;
esac

# Which of them are missing? Prefer dpkg; without it (not Debian), check commands.
missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for p in "${need[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
      *"install ok installed"*) ;;
      *)
        # A tool may be present without the Debian package (e.g. pip from another Python).
        case "$p" in
          python3-pip) command -v pip3 >/dev/null 2>&1 || command -v pip >/dev/null 2>&1 || missing+=("$p") ;;
          python3|make|gcc|clang|pkg-config) command -v "$p" >/dev/null 2>&1 || missing+=("$p") ;;
          *) missing+=("$p") ;;
        esac ;;
    esac
  done
else
  for c in make cc clang; do command -v "$c" >/dev/null 2>&1 || missing+=("$c"); done
fi

[ ${#missing[@]} -eq 0 ] && exit 0

line="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "eddy: installing missing packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "eddy: missing packages: ${missing[*]}" >&2
  echo "eddy: run as root:  $line" >&2
  exit 1
fi
