#!/usr/bin/env bash
# tests/cli/batch.sh EDDY_BINARY — `eddy batch`: many prompts decoded together give,
# prompt by prompt, exactly what `eddy run` gives for that prompt alone (greedy and
# sampled with a seed), whatever -np; outputs in input order; a prompt that cannot
# run is reported while the others carry on; bad arguments are one-line errors.
# Prints "N passed, M failed".
set -u
EDDY=${1:?usage: batch.sh EDDY_BINARY}
. "$(dirname "$0")/common.sh"

printf 'Once upon a time\nThe cat sat on the\n\nIn the beginning\nhello world, this is a longer prompt than the others\nx\n' \
  >"$TMP/prompts.txt"

# The outputs `eddy run` gives for each non-empty line, in the block format of batch.
expected() { # MODEL ARGS...
  local model=$1; shift
  local i=0
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    i=$((i + 1))
    echo "=== $i ==="
    "$EDDY" run -m "$model" -p "$line" -t 1 "$@" 2>/dev/null || echo "(run failed)"
  done <"$TMP/prompts.txt"
}

# Small f32 models: their products never take the AMX bf16 path, whatever the batch.
for m in qwen35-tiny-f32 mamba2-tiny-f32 llama-tiny-f32 granitehybrid-tiny-f32; do
  M=tests/data/models/$m.gguf
  for mode in "--temp 0" "--seed 7"; do
    # shellcheck disable=SC2086
    expected "$M" -n 10 $mode >"$TMP/want"
    for np in 1 2 4; do
      # shellcheck disable=SC2086
      if "$EDDY" batch -m "$M" -f "$TMP/prompts.txt" -np $np -n 10 -t 2 $mode >"$TMP/got" 2>"$TMP/err" &&
         cmp -s "$TMP/want" "$TMP/got"; then ok
      else bad "$m batch -np $np $mode differs from run: $(diff "$TMP/want" "$TMP/got" | head -5) $(tail -2 "$TMP/err")"; fi
    done
  done
done

# With prompt lookup: the same outputs, longer generations and contexts that fill
# during a verify step, from each row's best logits and (a repeat penalty) whole rows;
# the counts on stderr.
for m in qwen35-tiny-f32 mamba2-tiny-f32 llama-tiny-f32; do
  M=tests/data/models/$m.gguf
  for mode in "--temp 0 -n 40" "--seed 3 -n 40" "--temp 0 -n 60 -c 48" "--seed 3 -n 40 --repeat-penalty 1.1"; do
    # shellcheck disable=SC2086
    expected "$M" $mode >"$TMP/want"
    for np in 1 3; do
      # shellcheck disable=SC2086
      if "$EDDY" batch -m "$M" -f "$TMP/prompts.txt" -np $np -t 2 $mode --spec-type ngram --draft-max 6 \
           >"$TMP/got" 2>"$TMP/err" && cmp -s "$TMP/want" "$TMP/got"; then ok
      else bad "$m batch -np $np $mode --spec-type ngram differs from run: $(diff "$TMP/want" "$TMP/got" | head -5) $(tail -2 "$TMP/err")"; fi
    done
  done
done
if grep -q "speculative: [0-9]* verify steps (per sequence), [0-9]* drafted" "$TMP/err"; then ok
else bad "batch --spec-type ngram: no counts on stderr: $(cat "$TMP/err")"; fi
# With a draft model: a draft sequence per running prompt
M=tests/data/models/qwen35-tiny-f32.gguf
expected "$M" --temp 0 -n 30 >"$TMP/want"
for np in 1 4; do
  if "$EDDY" batch -m "$M" -f "$TMP/prompts.txt" -np $np -t 2 --temp 0 -n 30 -md tests/data/models/qwen35-tiny-q4_k_m.gguf \
       --draft-p-min 0 >"$TMP/got" 2>"$TMP/err" && cmp -s "$TMP/want" "$TMP/got" &&
     grep -q "speculative: [1-9][0-9]* verify steps" "$TMP/err"; then ok
  else bad "batch -np $np -md differs from run: $(diff "$TMP/want" "$TMP/got" | head -5) $(tail -2 "$TMP/err")"; fi
done
# With the model's MTP layer: drafts for every running prompt from its own state
M=tests/data/models/qwen35-mtp-tiny-f32.gguf
for mode in "--temp 0 -n 40" "--seed 3 -n 40" "--temp 0 -n 60 -c 48"; do
  # shellcheck disable=SC2086
  expected "$M" $mode >"$TMP/want"
  for np in 1 3; do
    # shellcheck disable=SC2086
    if "$EDDY" batch -m "$M" -f "$TMP/prompts.txt" -np $np -t 2 $mode --spec-type mtp --draft-p-min 0.001 \
         >"$TMP/got" 2>"$TMP/err" && cmp -s "$TMP/want" "$TMP/got" &&
       grep -q "speculative: [1-9][0-9]* verify steps" "$TMP/err"; then ok
    else bad "batch -np $np $mode --spec-type mtp differs from run: $(diff "$TMP/want" "$TMP/got" | head -5) $(tail -2 "$TMP/err")"; fi
  done
done
M=tests/data/models/qwen35-tiny-f32.gguf
expect_err "batch with a draft model of another vocabulary" "the draft model's vocabulary has 512 tokens" \
  batch -m "$M" -f "$TMP/prompts.txt" -md tests/data/models/llama-tiny-q8_0.gguf

# Speeds per sequence and in aggregate on stderr; JSON lines in input order.
M=tests/data/models/qwen35-tiny-f32.gguf
if "$EDDY" batch -m $M -f "$TMP/prompts.txt" -n 4 --jsonl -t 1 >"$TMP/j" 2>"$TMP/err" &&
   [ "$(wc -l <"$TMP/j")" -eq 5 ] && head -1 "$TMP/j" | grep -q '^{"index":0,"prompt":"Once upon a time","text":' &&
   grep -q '"tokens_generated":4,"stop":"length"}' "$TMP/j" && grep -q '\[5\] prompt [0-9]* tokens, generated 4 tokens' "$TMP/err" &&
   grep -q "5 prompts, 5 at a time: .* generated t/s aggregate" "$TMP/err"; then ok
else bad "batch --jsonl and its statistics: $(head -3 "$TMP/j") $(cat "$TMP/err")"; fi

# A prompt longer than the context is reported; the others run.
if "$EDDY" batch -m $M -f "$TMP/prompts.txt" -n 2 -c 8 --jsonl -t 1 >"$TMP/j" 2>"$TMP/err" &&
   grep -q '"index":3,.*"stop":"prompt longer than the context (raise -c)"' "$TMP/j" &&
   grep -q '"index":4,.*"tokens_generated":2,"stop":"length"' "$TMP/j"; then ok
else bad "batch with a prompt longer than the context: $(cat "$TMP/j") $(cat "$TMP/err")"; fi

# --chat wraps each prompt in the template, as run --chat.
if "$EDDY" run -m $M --chat -p "hi there" -n 5 --temp 0 -t 1 >"$TMP/want1" 2>/dev/null &&
   printf 'hi there\n' >"$TMP/one.txt" && "$EDDY" batch -m $M --chat -f "$TMP/one.txt" -n 5 --temp 0 -t 1 >"$TMP/got1" 2>/dev/null &&
   [ "$(tail -n +2 "$TMP/got1")" = "$(cat "$TMP/want1")" ]; then ok
else bad "batch --chat differs from run --chat"; fi

expect_err "batch no file" "no prompt file given" batch -m $M
expect_err "batch no model" "no model given" batch -f "$TMP/prompts.txt"
expect_err "batch missing file" "cannot read the prompt file" batch -m $M -f "$TMP/none.txt"
printf '\n\n' >"$TMP/empty.txt"
expect_err "batch no prompts" "no prompts (one per line)" batch -m $M -f "$TMP/empty.txt"
expect_err "batch -np 0" "-np: 0 is out of range" batch -m $M -f "$TMP/prompts.txt" -np 0
expect_err "batch unknown option" "unknown option '--bogus' for 'batch'" batch -m $M -f "$TMP/prompts.txt" --bogus
expect_err "batch system without chat" "--system needs --chat" batch -m $M -f "$TMP/prompts.txt" --system x

# eddy bench --npl: one row per count of sequences; bad lists refused.
if "$EDDY" bench -m tests/data/models/qwen35-tiny-q8_0.gguf --npl 1,3 -p 8 -n 4 -r 1 -t 1 --json >"$TMP/b" 2>"$TMP/err" &&
   [ "$(wc -l <"$TMP/b")" -eq 2 ] && grep -q '"n_seq": 3, "pp_tokens": 8, "tg_tokens": 4' "$TMP/b"; then ok
else bad "bench --npl: $(cat "$TMP/b") $(cat "$TMP/err")"; fi
expect_err "bench --npl bad list" '--npl: "1,,2" is not a list' bench -m $M --npl 1,,2
expect_err "bench --npl zero" "--npl: 0 is out of range 1..4096" bench -m $M --npl 0
# --sampling: each step's tokens drawn by run's default sampler from the best 40 or from
# whole rows
for how in top logits; do
  if "$EDDY" bench -m tests/data/models/qwen35-tiny-q8_0.gguf --npl 2 -p 8 -n 4 -r 1 -t 1 --sampling $how --json \
       >"$TMP/b" 2>"$TMP/err" && grep -q "\"n_seq\": 2, .*\"sampling\": \"$how\"" "$TMP/b"; then ok
  else bad "bench --npl --sampling $how: $(cat "$TMP/b") $(cat "$TMP/err")"; fi
done
expect_err "bench --sampling without --npl" "--sampling applies to --npl and --verify" bench -m $M -p 8 --sampling top
expect_err "bench --sampling bad" "'best' is none of argmax, top, logits" bench -m $M --npl 1 --sampling best

# eddy bench -b: the tokens of a forward step, as the engine took them (the context caps them)
if "$EDDY" bench -m tests/data/models/qwen35-tiny-q8_0.gguf -p 40 -n 2 -r 1 -t 1 -b 16 --json >"$TMP/b" 2>"$TMP/err" &&
   grep -q '"n_batch": 16,' "$TMP/b" &&
   "$EDDY" bench -m tests/data/models/qwen35-tiny-q8_0.gguf -p 8 -n 2 -r 1 -t 1 >"$TMP/b" 2>"$TMP/err" &&
   grep -q 'after one warm-up, 10 tokens a forward step' "$TMP/b"; then ok
else bad "bench -b: $(cat "$TMP/b") $(cat "$TMP/err")"; fi
expect_err "bench -b 0" "-b: 0 is out of range" bench -m $M -b 0

# eddy bench -d: each test from a sequence already N deep (a hybrid: its recurrent state
# restored from the snapshot before each run), named as llama-bench names it
if "$EDDY" bench -m tests/data/models/qwen35-tiny-q8_0.gguf -p 8 -n 4 -d 300 -r 2 -t 1 >"$TMP/b" 2>"$TMP/err" &&
   grep -q '| pp8 @ d300 |' "$TMP/b" && grep -q '| tg4 @ d300 |' "$TMP/b" && grep -q '(302.5 positions on average)' "$TMP/b" &&
   "$EDDY" bench -m tests/data/models/qwen35-tiny-q8_0.gguf -p 0 -n 2 -d 40 -r 1 -t 1 --json >"$TMP/b" 2>"$TMP/err" &&
   grep -q '"n_depth": 40,' "$TMP/b"; then ok
else bad "bench -d: $(cat "$TMP/b") $(cat "$TMP/err")"; fi
expect_err "bench -d with --npl" "-d applies to the prefill and decode tests" bench -m $M -d 8 --npl 1

# eddy bench --session-turn: the three ways of the next turn and the disk's speed
if "$EDDY" bench -m tests/data/models/qwen35-tiny-f32.gguf --session-turn -p 300 -n 4 -r 1 -t 1 --dir "$TMP" --json \
     >"$TMP/st" 2>"$TMP/err" && grep -q '"n_prompt": 300, "n_turn": 4' "$TMP/st" && grep -q '"disk_read_gbs"' "$TMP/st" &&
   grep -q '"device": "cpu"' "$TMP/st" &&
   [ -z "$(ls "$TMP" | grep eddy-bench)" ]; then ok
else bad "bench --session-turn: $(cat "$TMP/st" "$TMP/err")"; fi
expect_err "bench --session-turn with --npl" "separate benchmarks" bench -m $M --session-turn --npl 1

finish
