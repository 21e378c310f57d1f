#!/usr/bin/env bash
# tests/cli/session.sh EDDY_BINARY — `eddy run --session FILE` (--prompt-cache): a
# second run of the same prompt restores it and evaluates nothing, with the same
# output as a run without the file; a longer prompt evaluates only its new tokens;
# read-only sessions are not written; damaged or other-model files are refused with
# one line and left as they were. Prints "N passed, M failed".
set -u
EDDY=${1:?usage: session.sh EDDY_BINARY}
. "$(dirname "$0")/common.sh"

P="Once upon a time there was a cat"
for m in qwen35-tiny-f32 mamba2-tiny-f32 llama-tiny-f32 granitehybrid-tiny-f32; do
  M=tests/data/models/$m.gguf
  S="$TMP/$m.session"
  "$EDDY" run -m $M -p "$P" -n 8 --temp 0 -t 1 >"$TMP/plain" 2>/dev/null
  if "$EDDY" run -m $M -p "$P" -n 8 --temp 0 -t 1 --session "$S" >"$TMP/first" 2>"$TMP/err1" && [ -s "$S" ] &&
     grep -q ": 0 restored from" "$TMP/err1" && cmp -s "$TMP/plain" "$TMP/first"; then ok
  else bad "$m: first run with --session: $(cat "$TMP/err1")"; fi
  n=$(grep -o "prompt [0-9]* tokens:" "$TMP/err1" | grep -o "[0-9]*")
  if "$EDDY" run -m $M -p "$P" -n 8 --temp 0 -t 1 --prompt-cache "$S" >"$TMP/second" 2>"$TMP/err2" &&
     grep -q ": $n restored from .*, 0 evaluated" "$TMP/err2" && cmp -s "$TMP/plain" "$TMP/second"; then ok
  else bad "$m: the same prompt again restores it all, same output: $(cat "$TMP/err2") $(diff "$TMP/plain" "$TMP/second")"; fi
  cp "$S" "$TMP/before"
  if "$EDDY" run -m $M -p "$P and a dog" -n 4 --temp 0 -t 1 --session "$S" --session-ro >/dev/null 2>"$TMP/err3" &&
     grep -q ": $n restored from" "$TMP/err3" && ! grep -q ", 0 evaluated" "$TMP/err3" && cmp -s "$S" "$TMP/before"; then ok
  else bad "$m: a longer prompt evaluates only its new tokens; -ro writes nothing: $(cat "$TMP/err3")"; fi
  # --session-all keeps the generated text too: the next turn restores prompt + reply
  "$EDDY" run -m $M -p "$P" -n 4 --temp 0 -t 1 --session "$TMP/all.session" --session-all >"$TMP/reply" 2>/dev/null
  n_all=$(( n + 4 ))
  if "$EDDY" run -m $M -p "$P$(head -c -1 "$TMP/reply")" -n 2 --temp 0 -t 1 --session "$TMP/all.session" \
       --session-ro >/dev/null 2>"$TMP/err4" && grep -q "restored from" "$TMP/err4"; then ok
  else bad "$m: --session-all: $(cat "$TMP/err4")"; fi
  rm -f "$TMP/all.session"
done

M=tests/data/models/qwen35-tiny-f32.gguf
S="$TMP/qwen35-tiny-f32.session"
# a session of another model, or a damaged one, is refused and left as it was
cp "$S" "$TMP/keep"
expect_err "session of another model" "saved with another model" run -m tests/data/models/qwen3next-tiny-f32.gguf -p "$P" -n 2 --session "$S"
if cmp -s "$S" "$TMP/keep"; then ok; else bad "a refused session was overwritten"; fi
printf 'garbage' | dd of="$S" bs=1 seek=5000 conv=notrunc 2>/dev/null
cp "$S" "$TMP/keep"
expect_err "damaged session" "is damaged" run -m $M -p "$P" -n 2 --session "$S"
if cmp -s "$S" "$TMP/keep"; then ok; else bad "a damaged session was overwritten"; fi
head -c 300 "$TMP/keep" >"$S"
expect_err "truncated session" "truncated or extended" run -m $M -p "$P" -n 2 --session "$S"
expect_err "session flags without a session" "--session-ro and --session-all need --session FILE" run -m $M -p "$P" --session-ro
expect_err "session in a missing directory" "cannot create a temporary file beside it" run -m $M -p "$P" -n 1 --session "$TMP/no/such/dir/s"

# ==== eddy chat: /undo, /regen, /save, /load, --session ====
C="chat -m tests/data/models/mamba2-tiny-f32.gguf --chat-template chatml --temp 0 -n 8 -t 1"
# shellcheck disable=SC2086
printf 'hello there\nwhat now\n/undo\nwhat now\n/regen\n/save %s\n' "$TMP/chat.session" | "$EDDY" $C >"$TMP/c1" 2>"$TMP/ce"
if [ "$(wc -l <"$TMP/c1")" -eq 4 ] && [ "$(sed -n 2p "$TMP/c1")" = "$(sed -n 3p "$TMP/c1")" ] &&
   [ "$(sed -n 3p "$TMP/c1")" = "$(sed -n 4p "$TMP/c1")" ] && [ -s "$TMP/chat.session" ]; then ok
else bad "chat /undo and /regen give the reply again (greedy): $(cat "$TMP/c1" "$TMP/ce")"; fi
# shellcheck disable=SC2086
printf 'hello there\nwhat now\nand then\n' | "$EDDY" $C >"$TMP/c2" 2>/dev/null
# shellcheck disable=SC2086
if printf 'and then\n' | "$EDDY" $C --session "$TMP/chat.session" >"$TMP/c3" 2>"$TMP/ce" &&
   [ "$(tail -1 "$TMP/c2")" = "$(cat "$TMP/c3")" ]; then ok
else bad "chat --session resumes the conversation: $(cat "$TMP/c3" "$TMP/ce")"; fi
# shellcheck disable=SC2086
if printf '/load %s\nand then\n' "$TMP/chat.session" | "$EDDY" $C >"$TMP/c4" 2>"$TMP/ce" &&
   [ "$(cat "$TMP/c4")" = "$(cat "$TMP/c3")" ]; then ok
else bad "chat /load: $(cat "$TMP/c4" "$TMP/ce")"; fi
# shellcheck disable=SC2086
printf '/load %s\n' "$TMP/none" | "$EDDY" $C >/dev/null 2>"$TMP/ce"; rc=$?
if [ $rc -eq 1 ] && grep -q "cannot open the session" "$TMP/ce"; then ok; else bad "chat /load of a missing file: $rc $(cat "$TMP/ce")"; fi
# shellcheck disable=SC2086
printf '/undo\n' | "$EDDY" $C >/dev/null 2>"$TMP/ce"; rc=$?
if [ $rc -eq 1 ] && grep -q "no exchange to go back to" "$TMP/ce"; then ok; else bad "chat /undo with nothing: $rc $(cat "$TMP/ce")"; fi
# a session of eddy run holds no messages: refused, not half-loaded
# shellcheck disable=SC2086
printf 'x\n' | "$EDDY" $C --session "$TMP/mamba2-tiny-f32.session" >/dev/null 2>"$TMP/ce"; rc=$?
if [ $rc -eq 1 ] && grep -q "holds no chat messages" "$TMP/ce"; then ok; else bad "chat --session of a run session: $rc $(cat "$TMP/ce")"; fi

# ==== run --cache-dir: a prefix cache across runs ====
for m in qwen35-tiny-f32 mamba2-tiny-f32 llama-tiny-f32; do
  M=tests/data/models/$m.gguf
  A="The quick brown fox jumps over the lazy dog and runs far away."
  "$EDDY" run -m $M -p "$A And then it sleeps." -n 8 --temp 0 -t 1 >"$TMP/d0" 2>/dev/null
  n_a=$("$EDDY" tokenize -m $M "$A" | wc -w)
  if "$EDDY" run -m $M -p "$A" -n 4 --temp 0 -t 1 --cache-dir "$TMP/cd-$m" >/dev/null 2>"$TMP/de1" &&
     grep -q "0 restored from the prefix cache" "$TMP/de1" && ls "$TMP/cd-$m"/*.eddy >/dev/null 2>&1 &&
     "$EDDY" run -m $M -p "$A And then it sleeps." -n 8 --temp 0 -t 1 --cache-dir "$TMP/cd-$m" >"$TMP/d1" 2>"$TMP/de2" &&
     grep -q "$n_a restored from the prefix cache" "$TMP/de2" && cmp -s "$TMP/d0" "$TMP/d1"; then ok
  else bad "$m run --cache-dir: the second run restores the first prompt ($n_a tokens) and gives the same text: $(cat "$TMP/de1" "$TMP/de2")"; fi
done
expect_err "run --cache-dir without memory" "--cache-dir needs a memory budget too" \
  run -m tests/data/models/llama-tiny-f32.gguf -p x --cache-dir "$TMP/cdx" --cache-ram 0
touch "$TMP/not-a-dir"
expect_err "run --cache-dir on a file" "cannot read it" run -m tests/data/models/llama-tiny-f32.gguf -p x --cache-dir "$TMP/not-a-dir"

finish
