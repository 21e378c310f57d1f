#!/usr/bin/env bash
# tests/lib/run.sh BUILD_DIR — checks libeddy as a user's program sees it:
#   - the only global symbols libeddy.so exports and libeddy.a defines are the
#     eddy_* functions declared in include/eddy.h (plus the linker's own markers);
#   - a program that uses POSIX sockets and defines functions named like eddy's
#     internals (tests/lib/with_sockets.c) links and runs with libeddy.a and
#     libeddy.so.
# Run from the repository root (make test does). Prints "N passed, M failed".
set -u
B=${1:?usage: run.sh BUILD_DIR}
CC=${CC:-cc}
MODEL=tests/data/models/llama-tiny-f32.gguf
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

# what the static linker and the dynamic linker add to every shared object
TOOLCHAIN='^(_init|_fini|_edata|_end|__bss_start)$'

# the public API: every function declared in include/eddy.h
grep -oE '\beddy_[a-z0-9_]+\(' include/eddy.h | tr -d '(' | sort -u >"$TMP/api"

# same_as_api NAME FILE: FILE (names, one a line) holds exactly the public API
same_as_api() {
  local name=$1 got=$2 extra missing
  sort -u "$got" -o "$got"
  extra=$(comm -13 "$TMP/api" "$got" | head -10 | tr '\n' ' ')
  missing=$(comm -23 "$TMP/api" "$got" | head -10 | tr '\n' ' ')
  if [ -n "$extra" ]; then bad "$name: exports names outside include/eddy.h: $extra"; return; fi
  if [ -n "$missing" ]; then bad "$name: does not export: $missing"; return; fi
  ok
}

# ==== Exported symbols ====

# the dynamic symbol table: what a program or another library can bind to
nm -D --defined-only "$B/libeddy.so" | awk 'NF >= 3 {print $3}' | grep -vE "$TOOLCHAIN" >"$TMP/so-syms"
same_as_api "libeddy.so symbols" "$TMP/so-syms"

# every defined global of the archive's members: what a static link can meet
nm -g --defined-only "$B/libeddy.a" | awk 'NF >= 3 {print $3}' >"$TMP/a-syms"
same_as_api "libeddy.a symbols" "$TMP/a-syms"

# ==== A program with sockets, linked both ways ====

# build_and_run NAME ENV... -- CC_ARGS: compiles with_sockets.c with CC_ARGS, runs it
# (with the environment assignments ENV) on the tiny model; expects "ok"
build_and_run() {
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local exe="$TMP/${name// /_}"
  if ! $CC -std=c11 -Wall -Wextra -Werror -o "$exe" tests/lib/with_sockets.c "$@" >"$TMP/err" 2>&1; then
    bad "$name: does not link: $(head -5 "$TMP/err")"; return 1
  fi
  local out
  out=$(env "${envs[@]}" "$exe" "$MODEL" "$TMP/sock" 2>&1)
  if [ "$(tail -1 <<<"$out")" != ok ]; then bad "$name: $(head -5 <<<"$out")"; return 1; fi
  ok
}

build_and_run "sockets + libeddy.a" -- -Iinclude "$B/libeddy.a" -lm -pthread
build_and_run "sockets + libeddy.so" LD_LIBRARY_PATH="$B" -- -Iinclude -L"$B" -leddy

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
