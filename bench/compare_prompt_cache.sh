#!/usr/bin/env bash
# bench/compare_prompt_cache.sh MODEL TEXT [TOKENS] — the next run of a long prompt with a
# saved state, eddy against llama.cpp's llama-completion, on the same GGUF and 2 threads.
#
# From TEXT it cuts a prompt A of about TOKENS tokens (default 4000; words counted at 0.75
# per token). First each tool evaluates A once and keeps its state: eddy with
# `--prompt-cache FILE` (a session file) and `--cache-dir DIR` (its prefix cache on disk,
# with checkpoints every 512 tokens), llama.cpp with `--prompt-cache FILE`. Then two next runs,
# each generating 8 tokens, timed from the command's start to its end:
#   extend  A followed by a few new sentences (a conversation's next turn)
#   edit    A with one word changed about 100 words before its end (an edited or
#           regenerated turn: the saved state holds a prefix only up to the change)
# A recurrent state cannot be rolled back: where the saved state ends after the change, a
# tool must restore an earlier checkpoint or evaluate the whole prompt again. Prints one
# line per tool and case with the seconds and what the tool says it evaluated. LLAMA_BIN
# names llama.cpp's bin folder (default /work/peers/llama.cpp/build/bin).
set -eu
MODEL=${1:?usage: compare_prompt_cache.sh MODEL TEXT [TOKENS]}
TEXT=${2:?usage: compare_prompt_cache.sh MODEL TEXT [TOKENS]}
TOKENS=${3:-4000}
EDDY=${EDDY:-build/eddy}
LLAMA_BIN=${LLAMA_BIN:-/work/peers/llama.cpp/build/bin}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

words=$((TOKENS * 3 / 4))
tr -s ' \n\t' '   ' <"$TEXT" | cut -d' ' -f1-"$words" >"$T/a.txt"
{ cat "$T/a.txt"; printf ' And so the next day began, with the wind from the west and the sky clear.'; } >"$T/extend.txt"
# the edit: word (words - 100) replaced
tr ' ' '\n' <"$T/a.txt" | awk -v k=$((words - 100)) 'NR == k { $0 = "EDITED" } { printf "%s ", $0 }' >"$T/edit.txt"

secs() { # COMMAND... : wall seconds of the command; its stderr in $T/err
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>"$T/err" || { echo "failed: $*" >&2; tail -n 3 "$T/err" >&2; }
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}

echo "prompt: $(wc -w <"$T/a.txt") words of $TEXT; model $MODEL; 2 threads"
# eddy: a session file, and the prefix cache on disk
s=$(secs "$EDDY" run -m "$MODEL" -f "$T/a.txt" -n 1 -t 2 -c 8192 --temp 0 --prompt-cache "$T/eddy.session")
echo "eddy       first run (session file)  ${s}s"
s=$(secs "$EDDY" run -m "$MODEL" -f "$T/a.txt" -n 1 -t 2 -c 8192 --temp 0 --cache-dir "$T/eddy-cache")
echo "eddy       first run (cache dir)     ${s}s"
for case in extend edit; do
  s=$(secs env EDDY_LOG_LEVEL=info "$EDDY" run -m "$MODEL" -f "$T/$case.txt" -n 8 -t 2 -c 8192 --temp 0 \
      --prompt-cache "$T/eddy.session" --prompt-cache-ro)
  echo "eddy       $case --prompt-cache    ${s}s  $(grep -o 'prompt [0-9]* tokens[^;]*' "$T/err" | head -n 1)"
  s=$(secs env EDDY_LOG_LEVEL=info "$EDDY" run -m "$MODEL" -f "$T/$case.txt" -n 8 -t 2 -c 8192 --temp 0 \
      --cache-dir "$T/eddy-cache")
  echo "eddy       $case --cache-dir       ${s}s  $(grep -o 'prompt [0-9]* tokens[^;]*' "$T/err" | head -n 1)"
done
if [ -x "$LLAMA_BIN/llama-completion" ]; then
  L="$LLAMA_BIN/llama-completion -m $MODEL -t 2 -c 8192 --temp 0 -no-cnv --no-warmup"
  s=$(secs $L -f "$T/a.txt" -n 1 --prompt-cache "$T/llama.cache")
  echo "llama.cpp  first run                 ${s}s"
  for case in extend edit; do
    s=$(secs $L -f "$T/$case.txt" -n 8 --prompt-cache "$T/llama.cache" --prompt-cache-ro)
    echo "llama.cpp  $case --prompt-cache    ${s}s  $(grep -o 'matched [0-9]* tokens\|prompt eval time.*tokens' "$T/err" |
      tr '\n' ';' | sed 's/  */ /g')"
  done
fi
