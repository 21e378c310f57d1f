#!/usr/bin/env bash
# tests/lib/run.sh BUILD_DIR — checks libeddy as a user's program sees it:
#   - the only global symbols libeddy.so exports and libeddy.a defines are the
#     eddy_* functions declared in include/eddy.h (plus the linker's own markers);
#   - libeddy.so carries its SONAME;
#   - a program that uses POSIX sockets and defines functions named like eddy's
#     internals (tests/lib/with_sockets.c) links and runs with libeddy.a and
#     libeddy.so;
#   - `make install` (PREFIX, DESTDIR) installs a tree that `pkg-config --cflags
#     --libs eddy` compiles that program against.
# Run from the repository root (make test does). Prints "N passed, M failed".
set -u
B=${1:?usage: run.sh BUILD_DIR}
CC=${CC:-cc}
MODEL=tests/data/models/llama-tiny-f32.gguf
. "$(dirname "$0")/../cli/common.sh"

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

soname=$(readelf -d "$B/libeddy.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" = libeddy.so.0 ]; then ok; else bad "libeddy.so SONAME is '$soname', expected libeddy.so.0"; fi

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
if build_and_run "sockets + libeddy.so" LD_LIBRARY_PATH="$B" -- -Iinclude -L"$B" -leddy; then
  # the program records the SONAME, not the unversioned development link
  needed=$(readelf -d "$TMP/sockets_+_libeddy.so" | sed -n 's/.*(NEEDED).*\[\(libeddy[^]]*\)\]/\1/p')
  if [ "$needed" = libeddy.so.0 ]; then ok; else bad "program built with -leddy needs '$needed', expected libeddy.so.0"; fi
fi

# ==== make install ====

# into a prefix of its own, then compiled with pkg-config's flags only
P="$TMP/prefix"
if make --no-print-directory -s install BUILD="$B" PREFIX="$P" >"$TMP/err" 2>&1; then
  ok
  for f in bin/eddy include/eddy.h lib/libeddy.a lib/libeddy.so lib/libeddy.so.0 lib/pkgconfig/eddy.pc; do
    if [ -e "$P/$f" ]; then ok; else bad "make install PREFIX: $f not installed"; fi
  done
  if flags=$(PKG_CONFIG_PATH="$P/lib/pkgconfig" pkg-config --cflags --libs eddy 2>"$TMP/err"); then
    # shellcheck disable=SC2086 # the flags are words
    build_and_run "installed libeddy.so, pkg-config" LD_LIBRARY_PATH="$P/lib" -- $flags
    # the README's static form: the installed archive named through pkg-config's libdir
    libdir=$(PKG_CONFIG_PATH="$P/lib/pkgconfig" pkg-config --variable=libdir eddy)
    cflags=$(PKG_CONFIG_PATH="$P/lib/pkgconfig" pkg-config --cflags eddy)
    # shellcheck disable=SC2086
    build_and_run "installed libeddy.a, pkg-config" -- $cflags "$libdir/libeddy.a" -lm -pthread
  else
    bad "pkg-config --cflags --libs eddy: $(cat "$TMP/err")"
  fi
  if "$P/bin/eddy" version >/dev/null 2>"$TMP/err"; then ok; else bad "installed eddy version: $(cat "$TMP/err")"; fi
else
  bad "make install PREFIX=$P: $(tail -5 "$TMP/err")"
fi

# staged with DESTDIR: files under DESTDIR/PREFIX, eddy.pc naming PREFIX itself
S="$TMP/stage"
if make --no-print-directory -s install BUILD="$B" PREFIX=/opt/eddy DESTDIR="$S" >"$TMP/err" 2>&1; then
  if [ -e "$S/opt/eddy/lib/libeddy.so.0" ] && grep -qx 'prefix=/opt/eddy' "$S/opt/eddy/lib/pkgconfig/eddy.pc"; then
    ok
  else
    bad "make install DESTDIR: tree or eddy.pc wrong: $(find "$S" | head -20 | tr '\n' ' ')"
  fi
  # pkg-config's sysroot maps /opt/eddy to the staged copy
  if flags=$(PKG_CONFIG_SYSROOT_DIR="$S" PKG_CONFIG_PATH="$S/opt/eddy/lib/pkgconfig" \
      pkg-config --cflags --libs eddy 2>"$TMP/err"); then
    # shellcheck disable=SC2086
    build_and_run "staged, pkg-config" LD_LIBRARY_PATH="$S/opt/eddy/lib" -- $flags
  else
    bad "pkg-config (DESTDIR tree): $(cat "$TMP/err")"
  fi
else
  bad "make install DESTDIR=$S: $(tail -5 "$TMP/err")"
fi

finish
