#!/usr/bin/env bash
# device_carry.sh — what travels to the lent GPU machine, and room there for llama.cpp.
# A call to that machine carries the working tree (tracked and untracked files, not the
# ignored ones) and the ignored paths it names (`carry`), 64 MiB in all. The tree is about
# 51 MiB, so .peer/llama-bench.xz (about 21 MiB: scripts/build_peer_cuda.sh) fits only
# when tests/data/text (13 MiB: the tokenizer and chat tests' data, which no device check
# reads) stays behind.
#
#   scripts/device_carry.sh size      # MiB of the tree and of .peer, .whl, .deps (the carry)
#   scripts/device_carry.sh prepare   # .whl (the gguf wheel) and .deps/include (xxhash.h),
#                                     # from PyPI and this machine's headers
#   scripts/device_carry.sh slim      # tests/data/text out of the working tree (it is
#                                     # committed; refused when it has changes)
#   scripts/device_carry.sh restore   # tests/data/text back (git checkout)
#
# Then: run(command="scripts/device_check.sh $OUT 2>&1 | tail -60", carry=[".peer", ".whl",
# ".deps"]), and restore.
set -eu
cd "$(dirname "$0")/.."
mib() { awk '{s += $1} END {printf "%.1f", s / 1048576}'; }
case "${1:-size}" in
size)
  echo "tree: $(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | mib) MiB tracked," \
    "$(git ls-files -z --others --exclude-standard | xargs -0 -r stat -c %s | mib) MiB untracked"
  for d in .peer .whl .deps; do
    [ -e "$d" ] && echo "$d: $(find "$d" -type f -print0 | xargs -0 -r stat -c %s | mib) MiB"
  done
  ;;
prepare)
  python3 -m pip download -q --no-deps -d .whl gguf==0.17.1
  mkdir -p .deps/include
  cp /usr/include/xxhash.h .deps/include/ 2>/dev/null ||
    { echo "device_carry.sh: no /usr/include/xxhash.h (apt-get install libxxhash-dev)" >&2; exit 1; }
  ;;
slim)
  if ! git diff --quiet -- tests/data/text || [ -n "$(git ls-files --others --exclude-standard tests/data/text)" ]; then
    echo "device_carry.sh: tests/data/text has changes; commit or keep them first" >&2
    exit 1
  fi
  rm -rf tests/data/text
  echo "tests/data/text left out; 'scripts/device_carry.sh restore' brings it back"
  ;;
restore) git checkout -- tests/data/text ;;
*) echo "usage: device_carry.sh size|prepare|slim|restore" >&2; exit 2 ;;
esac
