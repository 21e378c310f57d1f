#!/usr/bin/env bash
# tests/cli/run.sh EDDY_BINARY — checks the eddy command's behaviour as a user sees
# it: output of `eddy inspect`, tensors written bit-exact, and one-line errors with
# exit status 1 (never a crash) for bad input. Prints "N passed, M failed".
set -u
EDDY=${1:?usage: run.sh EDDY_BINARY}
D=tests/data/gguf
T=tests/data/text
. "$(dirname "$0")/common.sh"

# expect_ok NAME PATTERN... -- ARGS: exit 0 and stdout contains every PATTERN (fixed strings)
expect_ok() {
  local name=$1; shift
  local pats=()
  while [ "$1" != "--" ]; do pats+=("$1"); shift; done
  shift
  local out rc
  out=$("$EDDY" "$@" 2>"$TMP/err"); rc=$?
  if [ $rc -ne 0 ]; then bad "$name: exit $rc: $(cat "$TMP/err")"; return; fi
  for p in "${pats[@]}"; do
    if ! grep -qF -- "$p" <<<"$out"; then bad "$name: output lacks: $p"; return; fi
  done
  ok
}

# ==== inspect: listing ====
expect_ok "inspect v3" "format:       GGUF v3" "architecture: llama" "name:         eddy sample" \
  "metadata: 18 keys" 'sample.str' '"quote \" backslash \\ newline \n tab \t done"' \
  "sample.u64" "18446744073709551615" "-9223372036854775808" "2.5e-300" "[[1, 2], [3]]" \
  '"tok15", ... (40 items)]' "arr[arr[i32]]" "tensors: 15" "blk.0.iq4_xs.weight" "IQ4_XS" "[256, 2]" \
  "totals: 15 tensors, 7680 parameters (7.68K), 7992 bytes" -- inspect $D/sample.gguf
expect_ok "inspect v2" "format:       GGUF v2" "tensors: 15" -- inspect $D/sample-v2.gguf
expect_ok "inspect --max-items" '["tok0", "tok1", ... (40 items)]' -- inspect $D/sample.gguf --max-items 2
expect_ok "inspect lists unsupported types" "IQ2_XXS" "(unsupported type)" \
  "note: 1 tensors have types eddy cannot read yet" -- inspect $D/unsupported.gguf
expect_ok "version" "eddy " "cpu features:" "kernels: " -- version
EDDY_FORCE_REF=1 expect_ok "version under EDDY_FORCE_REF" "cpu features: none" "kernels: ref" -- version
# EDDY_CPU_OFF turns features off as if the CPU lacked them; an unknown name is a warning
out=$(EDDY_CPU_OFF=avx512 "$EDDY" version 2>"$TMP/err")
if [ $? -ne 0 ] || grep -q 'avx512\|amx' <<<"$out" || [ -s "$TMP/err" ]; then bad "version under EDDY_CPU_OFF=avx512: $out $(cat "$TMP/err")"; else ok; fi
out=$(EDDY_CPU_OFF=amx,sse9 "$EDDY" version 2>"$TMP/err")
if [ $? -ne 0 ] || grep -q 'amx' <<<"$out" || ! grep -q 'EDDY_CPU_OFF=amx,sse9: only amx' "$TMP/err"; then
  bad "version under EDDY_CPU_OFF=amx,sse9: $out $(cat "$TMP/err")"; else ok; fi

# ==== inspect: tensors written as float32, bit-exact with gguf.quants ====
for exp in $D/expected/*.f32; do
  name=$(basename "$exp" .f32)
  if "$EDDY" inspect $D/sample.gguf --tensor "$name" --out "$TMP/t.f32" >/dev/null 2>"$TMP/err" &&
     cmp -s "$exp" "$TMP/t.f32"; then ok; else bad "tensor $name differs from gguf.quants: $(cat "$TMP/err")"; fi
done

# ==== logits ====
M=tests/data/models/llama-tiny-q8_0.gguf
expect_ok "logits" "3 512" -- logits -m $M --ids "1 2 3" --out "$TMP/l.f32" -t 2
if [ "$(stat -c %s "$TMP/l.f32" 2>/dev/null)" = $((3 * 512 * 4)) ]; then ok; else bad "logits file size"; fi
expect_err "logits id out of range" "token id 512 at index 1 is outside the vocabulary (0..511)" \
  logits -m $M --ids "1 512" --out "$TMP/l.f32"
expect_err "logits bad id" '"x7" is not a token id' logits -m $M --ids "1 x7" --out "$TMP/l.f32"
expect_err "logits no ids" "no token ids" logits -m $M --ids "  " --out "$TMP/l.f32"
expect_err "logits no out" "no output file" logits -m $M --ids "1"
expect_err "logits no model" "no model given" logits --ids "1" --out "$TMP/l.f32"
expect_err "logits ctx too small" "do not fit" logits -m $M --ids "1 2 3" -c 2 --out "$TMP/l.f32"
expect_err "logits not a model" "is missing" logits -m $D/sample.gguf --ids "1" --out "$TMP/l.f32"
# KV cache types: f16 is the default; f32 gives other (unrounded) logits
"$EDDY" logits -m $M --ids "1 2 3 4" --out "$TMP/k0.f32" >/dev/null 2>&1
"$EDDY" logits -m $M --ids "1 2 3 4" --out "$TMP/k16.f32" -ctk f16 --cache-type-v f16 >/dev/null 2>&1
"$EDDY" logits -m $M --ids "1 2 3 4" --out "$TMP/k32.f32" --cache-type-k f32 -ctv f32 >/dev/null 2>&1
if [ -s "$TMP/k0.f32" ] && cmp -s "$TMP/k0.f32" "$TMP/k16.f32" && [ -s "$TMP/k32.f32" ] &&
   ! cmp -s "$TMP/k0.f32" "$TMP/k32.f32"; then ok; else bad "logits -ctk/-ctv: f16 default, f32 differs"; fi
expect_err "logits bad cache type" '-ctk: unsupported cache type "q8_0" (f16 or f32)' \
  logits -m $M --ids "1" --out "$TMP/l.f32" -ctk q8_0
expect_err "logits cache type missing" "--cache-type-v needs a cache type" logits -m $M --ids "1" --out "$TMP/l.f32" --cache-type-v

# ==== run ====
R=tests/data/models/qwen35-tiny-q8_0.gguf
if "$EDDY" run -m $R -p "Hello there" -n 6 --seed 7 -t 1 >"$TMP/r1" 2>"$TMP/r1.err" &&
   "$EDDY" run -m $R -p "Hello there" -n 6 --seed 7 -t 1 >"$TMP/r2" 2>/dev/null && cmp -s "$TMP/r1" "$TMP/r2" &&
   grep -q "generated [0-9]* tokens" "$TMP/r1.err"; then ok; else bad "run with a seed is reproducible: $(cat "$TMP/r1.err")"; fi
if printf 'hello\nhow are you\n/reset\nagain\n' | "$EDDY" chat -m $R -n 4 --seed 3 -t 1 >"$TMP/c1" 2>"$TMP/c1.err" &&
   [ "$(wc -l <"$TMP/c1")" -eq 3 ]; then ok; else bad "chat over a pipe: $(cat "$TMP/c1.err")"; fi
if "$EDDY" run -m $R --chat --system "Be brief." -p "hi" -n 4 -t 1 >/dev/null 2>"$TMP/r3.err"; then ok;
else bad "run --chat: $(cat "$TMP/r3.err")"; fi
expect_err "run system without chat" "--system needs --chat" run -m $R -p "x" --system "y"
expect_err "chat no model" "no model given" chat
expect_err "chat bad template" "neither a built-in template" chat -m $R --chat-template "$TMP/none.jinja"
expect_err "run no prompt" "no prompt given" run -m $R
expect_err "run no model" "no model given" run -p "x"
expect_err "run bad temp" '--temp: "hot" is not a number' run -m $R -p "x" --temp hot
expect_err "run top-p range" "--top-p: 2 is out of range" run -m $R -p "x" --top-p 2
expect_err "run prompt too long" "the context holds 4" run -m $R -p "one two three four five six seven" -c 4
expect_err "run missing prompt file" "cannot read the prompt file" run -m $R -f "$TMP/none.txt"
expect_err "run unknown option" "unknown option '--bogus' for 'run'" run -m $R -p x --bogus
expect_err "run bad cache type" '-ctv: unsupported cache type "F32"' run -m $R -p x -ctv F32
expect_err "chat bad cache type" '--cache-type-k: unsupported cache type ""' chat -m $R --cache-type-k ""
if "$EDDY" run -m $R -p "Hello there" -n 3 -t 1 -ctk f32 -ctv f16 >/dev/null 2>"$TMP/r4.err"; then ok;
else bad "run -ctk f32 -ctv f16: $(cat "$TMP/r4.err")"; fi

# ==== run with speculative decoding: the same output, the counts on stderr ====
"$EDDY" run -m $R -p "one two one two one two one" -n 48 --temp 0 -t 1 >"$TMP/s0" 2>/dev/null
for spec in "--spec-type ngram" "--lookup-ngram 2 --draft-max 4 --draft-fixed" \
            "--spec-type ngram-simple --spec-ngram-simple-size-n 2 --spec-draft-n-max 5 --spec-draft-n-min 2" \
            "--spec-type draft -md tests/data/models/qwen3next-tiny-f32.gguf --draft-min 2 --draft-p-min 0" \
            "-md tests/data/models/qwen35-tiny-q4_k_m.gguf --draft-p-min 0"; do
  # shellcheck disable=SC2086
  if "$EDDY" run -m $R -p "one two one two one two one" -n 48 --temp 0 -t 1 $spec >"$TMP/s1" 2>"$TMP/s1.err" &&
     cmp -s "$TMP/s0" "$TMP/s1"; then ok; else bad "run $spec: output differs from plain run: $(cat "$TMP/s1.err")"; fi
done
if grep -q "speculative: [0-9]* verify steps, [0-9]* drafted, [0-9]* accepted" "$TMP/s1.err"; then ok;
else bad "run -md: no speculative counts on stderr: $(cat "$TMP/s1.err")"; fi
if printf 'one two one two\nagain one two\n' | "$EDDY" chat -m $R -n 8 --temp 0 -t 1 --spec-type ngram >"$TMP/sc" 2>"$TMP/sc.err" &&
   printf 'one two one two\nagain one two\n' | "$EDDY" chat -m $R -n 8 --temp 0 -t 1 >"$TMP/sc0" 2>/dev/null &&
   cmp -s "$TMP/sc" "$TMP/sc0"; then ok; else bad "chat --spec-type ngram differs from plain chat: $(cat "$TMP/sc.err")"; fi
MTP=tests/data/models/qwen35-mtp-tiny-q8_0.gguf
"$EDDY" run -m $MTP -p "one two one two one two one" -n 48 --temp 0 -t 1 >"$TMP/m0" 2>/dev/null
for spec in "--spec-type mtp --draft-p-min 0.001" "--spec-type draft-mtp --draft-max 2 --draft-fixed --draft-p-min 0.001"; do
  # shellcheck disable=SC2086
  if "$EDDY" run -m $MTP -p "one two one two one two one" -n 48 --temp 0 -t 1 $spec >"$TMP/m1" 2>"$TMP/m1.err" &&
     cmp -s "$TMP/m0" "$TMP/m1" && grep -q "speculative: [0-9]* verify steps, [1-9][0-9]* drafted" "$TMP/m1.err"; then ok
  else bad "run $spec: output differs from plain run, or no drafts: $(cat "$TMP/m1.err")"; fi
done
expect_ok "bench --verify, MTP rows" "verify, K = 2" "plain step, MTP layer on" "MTP draft (1 token)" -- \
  bench -m $MTP --verify 1,2 -p 8 -n 2 -r 1 -t 1
expect_ok "bench --verify --json" '"k": 1,' '"mtp_draft_ratio": ' -- bench -m $MTP --verify 1 -p 8 -n 2 -r 1 -t 1 --json
# the verify benchmark's steps give each row's argmax (default), best 40 or logits
for how in argmax top logits; do
  expect_ok "bench --verify --sampling $how" "\"k\": 2," "\"sampling\": \"$how\"" '"mtp_draft_ratio": ' -- \
    bench -m $MTP --verify 2 -p 8 -n 2 -r 1 -t 1 --json --sampling $how
done
expect_err "run spec mtp without the layer" "the model has no multi-token-prediction layer" run -m $R -p x --spec-type mtp
expect_err "run spec unknown" '--spec-type "fast": expected none, ngram, draft or mtp' run -m $R -p x --spec-type fast
expect_err "run spec draft without model" "--spec-type draft needs a draft model (-md FILE)" run -m $R -p x --spec-type draft
expect_err "run draft of another vocabulary" "the draft model's vocabulary has 512 tokens, the model's 1024" \
  run -m $R -p x -n 4 -md tests/data/models/llama-tiny-q8_0.gguf
expect_err "run draft model missing" "-md $TMP/none.gguf" run -m $R -p x -md "$TMP/none.gguf"
expect_err "run draft-max range" "--draft-max: 0 is out of range" run -m $R -p x --draft-max 0

# run -f reads every byte of the file, as tokenize --file does; a chat message refuses a NUL by offset
printf 'Hello\0 world, and what follows the NUL byte' >"$TMP/nul.txt"
n_tok=$("$EDDY" tokenize -m $R --file "$TMP/nul.txt" | wc -w)
if "$EDDY" run -m $R -f "$TMP/nul.txt" -n 1 -t 1 >/dev/null 2>"$TMP/nul.err" &&
   grep -q "prompt $n_tok tokens" "$TMP/nul.err"; then ok; else bad "run -f with a NUL byte: expected $n_tok prompt tokens: $(cat "$TMP/nul.err")"; fi
expect_err "run --chat -f with a NUL byte" "$TMP/nul.txt: byte 5 is a NUL byte" run -m $R --chat -f "$TMP/nul.txt"
expect_err "run -e makes a NUL in a chat" "the prompt: byte 1 is a NUL byte" run -m $R --chat -e -p 'a\x00b'
# -e: escapes as llama.cpp's; without it the backslashes are text
n_esc=$("$EDDY" tokenize -m $R "$(printf 'a\tb\nc"\\')" | wc -w)
if "$EDDY" run -m $R -e -p 'a\tb\nc\"\\' -n 1 -t 1 >/dev/null 2>"$TMP/e.err" && grep -q "prompt $n_esc tokens" "$TMP/e.err" &&
   "$EDDY" run -m $R -p 'a\tb\nc\"\\' -n 1 -t 1 >/dev/null 2>"$TMP/e2.err" && ! grep -q "prompt $n_esc tokens" "$TMP/e2.err"
then ok; else bad "run -e: $(cat "$TMP/e.err" "$TMP/e2.err")"; fi

# ==== standard output that cannot be written: exit 1, one error naming it ====
expect_stdout_full() {
  local name=$1; shift
  local rc
  "$EDDY" "$@" >/dev/full 2>"$TMP/err"; rc=$?
  if [ $rc -ne 1 ]; then bad "$name >/dev/full: exit status $rc (expected 1)"; return; fi
  if ! grep -q '^eddy: error: writing standard output: No space left on device$' "$TMP/err"; then
    bad "$name >/dev/full: $(cat "$TMP/err")"; return
  fi
  ok
}
if [ -w /dev/full ]; then
  expect_stdout_full "run" run -m $R -p "Hello" -n 8 -t 1
  expect_stdout_full "chat" chat -m $R -p "Hello" -n 8 -t 1 </dev/null
  expect_stdout_full "inspect" inspect $D/sample.gguf
  expect_stdout_full "tokenize" tokenize -m $T/qwen3.gguf "Hello world"
  expect_stdout_full "detokenize" detokenize -m $T/qwen3.gguf 9707
  expect_stdout_full "chat-format" chat-format -m $T/qwen3.gguf --user Hi
  expect_stdout_full "version" version
  expect_stdout_full "help" --help
  expect_stdout_full "run --help" run --help
  expect_stdout_full "logits" logits -m $M --ids "1 2" --out "$TMP/l.f32"
fi

# ==== chat: a model without a template fails at once ====
expect_err "chat without a template" "--chat-template" chat -m $M
if printf 'hi\n' | "$EDDY" chat -m $M -n 3 -t 1 --chat-template chatml >/dev/null 2>"$TMP/ct.err"; then ok
else bad "chat --chat-template chatml on a model without a template: $(cat "$TMP/ct.err")"; fi

# ==== seeds: random by default, printed at info level, repeatable ====
seed_of() { sed -n 's/.*sampling: seed \([0-9]*\) (random: --seed \1 repeats this run).*/\1/p' "$1"; }
EDDY_LOG_LEVEL=info "$EDDY" run -m $R -p "Hello there" -n 12 -t 1 --temp 1.5 >"$TMP/s1" 2>"$TMP/s1.err"
EDDY_LOG_LEVEL=info "$EDDY" run -m $R -p "Hello there" -n 12 -t 1 --temp 1.5 --seed -1 >"$TMP/s2" 2>"$TMP/s2.err"
s1=$(seed_of "$TMP/s1.err"); s2=$(seed_of "$TMP/s2.err")
if [ -n "$s1" ] && [ -n "$s2" ] && [ "$s1" != "$s2" ]; then ok; else bad "random seeds printed and different: [$s1] [$s2]: $(cat "$TMP/s1.err")"; fi
if [ -n "$s1" ] && "$EDDY" run -m $R -p "Hello there" -n 12 -t 1 --temp 1.5 --seed "$s1" >"$TMP/s3" 2>/dev/null &&
   cmp -s "$TMP/s1" "$TMP/s3"; then ok; else bad "--seed with the printed seed repeats the run"; fi
expect_err "seed below -1" "--seed: -2 is out of range" run -m $R -p x --seed -2

# ==== info level: what the run uses ====
EDDY_LOG_LEVEL=info "$EDDY" run -m $R -p "Hello" -n 2 -t 1 -c 256 -ctv f32 >/dev/null 2>"$TMP/info.err"
for p in 'model: tests/data/models/qwen35-tiny-q8_0.gguf: qwen35 ' ' layers, ' ' parameters ' 'file type Q8_0' \
  'weights ' 'mapped from the file' 'cpu: ' 'context: 256 positions, batch 256 tokens, 1 thread, KV cache f16 keys, f32 values' \
  'memory: sequence state ' 'recurrent state ' 'KV cache ' 'sampling: seed '; do
  if grep -qF -- "$p" "$TMP/info.err"; then ok; else bad "EDDY_LOG_LEVEL=info lacks: $p: $(cat "$TMP/info.err")"; fi
done
if EDDY_LOG_LEVEL=debug "$EDDY" run -m $R -p "Hello" -n 2 -t 1 2>&1 >/dev/null | grep -q "debug: prompt: [0-9]* tokens: "; then ok
else bad "EDDY_LOG_LEVEL=debug prints the prompt's ids"; fi
if "$EDDY" run -m $R -p "Hello" -n 2 -t 1 2>&1 >/dev/null | grep -q "info:"; then bad "info lines at the default level"; else ok; fi

# ==== --help for every command; the README's "Using eddy" block is eddy --help ====
for c in inspect run batch chat serve tokenize detokenize chat-format perplexity logits bench version help; do
  for h in --help -h; do
    out=$("$EDDY" $c $h 2>"$TMP/err"); rc=$?
    first=${out%%$'\n'*}
    if [ $rc -eq 0 ] && [ ! -s "$TMP/err" ] && { [ "$first" = "eddy $c" ] || [ "${first:0:$((6 + ${#c}))}" = "eddy $c " ]; }; then ok
    else bad "eddy $c $h: exit $rc, stdout [${out:0:60}], stderr $(cat "$TMP/err")"; fi
  done
done
expect_ok "eddy help run" "eddy run -m MODEL.gguf" "--ignore-eos" -- help run
if "$EDDY" run -m $R -p --help -n 1 -t 1 2>&1 >/dev/null | grep -q "prompt [0-9]* tokens"; then ok; else bad "run -p --help is a prompt"; fi
sed -n '/^## Using eddy/,/^## /p' README.md | sed -n '/^```$/,/^```$/p' | sed '1d;$d' >"$TMP/readme-usage"
"$EDDY" --help >"$TMP/help"
if [ -s "$TMP/help" ] && cmp -s "$TMP/readme-usage" "$TMP/help"; then ok
else bad "README's Using eddy block differs from eddy --help: $(diff "$TMP/readme-usage" "$TMP/help" | head -10)"; fi
for c in inspect run batch chat serve tokenize detokenize chat-format perplexity logits bench version help; do
  "$EDDY" $c --help >"$TMP/one"
  if grep -qxF -f "$TMP/one" "$TMP/help" && [ "$(grep -cxF -f "$TMP/one" "$TMP/help")" -eq "$(wc -l <"$TMP/one")" ]; then ok
  else bad "eddy $c --help is not part of eddy --help"; fi
done

# ==== llama.cpp's spellings ====
expect_err "unknown option with a llama.cpp hint" "unknown option '-ts' for 'run' (a llama.cpp option: eddy runs a model" \
  run -m $R -p x -ts 1,1
expect_err "-ngl without CUDA" "this eddy was built without CUDA: rebuild with \`make CUDA=1\`" run -m $R -p x -ngl 99
expect_err "--device cuda without CUDA" "built without CUDA" run -m $R -p x --device cuda
expect_err "--device unknown" '--device: unknown device "tpu" (cpu or cuda)' run -m $R -p x --device tpu
expect_err "bench --device without CUDA" "built without CUDA" bench -m $R -p 8 -n 0 -r 1 --device cuda
expect_err "unknown option for chat" "unknown option '--foo' for 'chat'" chat -m $R --foo
expect_err "unexpected argument" "unexpected argument 'hello' for 'run'" run -m $R hello
expect_err "-ctk q8_0 stays refused" '-ctk: unsupported cache type "q8_0"' run -m $R -p x -ctk q8_0
# the same run under llama.cpp's and eddy's spellings gives the same bytes
"$EDDY" run -m $R -p "Hello there" -n 6 --seed 7 -t 1 >"$TMP/ll1" 2>/dev/null
if "$EDDY" run --model $R --prompt "Hello there" --n-predict 6 -s 7 --threads 1 --ctx-size 4096 -b 64 -ub 32 \
     --jinja --no-mmap -no-cnv >"$TMP/ll2" 2>"$TMP/ll.err" && cmp -s "$TMP/ll1" "$TMP/ll2"; then ok
else bad "llama.cpp spellings: $(cat "$TMP/ll.err")"; fi
if EDDY_LOG_LEVEL=info "$EDDY" run -m $R -p "Hello" -n 2 -t 1 -b 64 -ub 16 --no-mmap 2>&1 >/dev/null |
   grep -q "batch 16 tokens.*" && EDDY_LOG_LEVEL=info "$EDDY" run -m $R -p "Hello" -n 2 -t 1 --no-mmap 2>&1 >/dev/null |
   grep -q "read into memory"; then ok; else bad "-ub sets the batch, --no-mmap reads the file"; fi
if EDDY_LOG_LEVEL=info "$EDDY" run -m $R -p "Hello" -n 2 -t 1 --mlock >/dev/null 2>"$TMP/ml.err" &&
   grep -qE "info: --mlock: .* of weights locked in memory|warn: --mlock: the system refused" "$TMP/ml.err"; then ok
else bad "--mlock locks or says why not: $(cat "$TMP/ml.err")"; fi
# --ignore-eos: the tiny Mamba-2 model's greedy reply ends at 64 tokens; ignoring the end it runs to -n
MB=tests/data/models/mamba2-tiny-q8_0.gguf
"$EDDY" run -m $MB -p "Hello" -n 200 --temp 0 -t 1 >/dev/null 2>"$TMP/eos1.err"
"$EDDY" run -m $MB -p "Hello" -n 200 --temp 0 -t 1 --ignore-eos >/dev/null 2>"$TMP/eos2.err"
if grep -q "generated 64 tokens" "$TMP/eos1.err" && grep -q "generated 200 tokens" "$TMP/eos2.err"; then ok
else bad "--ignore-eos: $(cat "$TMP/eos1.err" "$TMP/eos2.err")"; fi
# -r: the output stops where the text first appears
"$EDDY" run -m $R -p "Hello there" -n 40 --seed 11 -t 1 >"$TMP/r0" 2>/dev/null
full=$(cat "$TMP/r0"); stop=${full:9:3}; want="${full%%"$stop"*}$stop"
if [ ${#stop} -eq 3 ] && "$EDDY" run -m $R -p "Hello there" -n 40 --seed 11 -t 1 -r "$stop" >"$TMP/r1" 2>/dev/null &&
   [ "$(cat "$TMP/r1")" = "$want" ]; then ok; else bad "-r '$stop': got [$(cat "$TMP/r1")], expected [$want]"; fi
if "$EDDY" run -m $R -p "Hello there" -n 40 --seed 11 -t 1 --reverse-prompt "$stop" -r "never appears" >"$TMP/r2" 2>/dev/null &&
   cmp -s "$TMP/r1" "$TMP/r2"; then ok; else bad "--reverse-prompt with two texts"; fi
# -cnv: run becomes chat, -p its first message, -sys its system message
if printf 'and then?\n' | "$EDDY" run -m $R -cnv -sys "Be brief." -p "hi" -n 3 -t 1 --seed 2 >"$TMP/cnv" 2>"$TMP/cnv.err" &&
   printf 'hi\nand then?\n' | "$EDDY" chat -m $R --system "Be brief." -n 3 -t 1 --seed 2 >"$TMP/cnv2" 2>/dev/null &&
   cmp -s "$TMP/cnv" "$TMP/cnv2" && [ -s "$TMP/cnv" ]; then ok; else bad "run -cnv is chat: $(cat "$TMP/cnv.err")"; fi

# ==== chat: Ctrl-C stops a reply and keeps the conversation; at the prompt it quits ====
# SIGINT is what a terminal sends on Ctrl-C. The replies here are endless (--ignore-eos, a large
# context) until it comes; the debug lines say how many messages each turn formats.
# wait_for FILE PATTERN: up to 60 s until FILE holds PATTERN (grep -E)
wait_for() { local i; for i in $(seq 600); do grep -qaE -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
# wait_grow FILE N: up to 60 s until FILE holds more than N bytes
wait_grow() { local i; for i in $(seq 600); do [ "$(wc -c <"$1")" -gt "$2" ] && return 0; sleep 0.1; done; return 1; }
# wait_exit PID: its exit status; 124 after 60 s (it is killed then)
wait_exit() { local i; for i in $(seq 600); do kill -0 "$1" 2>/dev/null || { wait "$1"; return $?; }; sleep 0.1; done
  kill -KILL "$1"; wait "$1"; return 124; }
trap '' PIPE # a chat that ended early must fail a check here, not end the script
mkfifo "$TMP/in"
EDDY_LOG_LEVEL=debug "$EDDY" chat -m $R --ignore-eos -c 60000 -t 1 <"$TMP/in" >"$TMP/cc.out" 2>"$TMP/cc.err" &
pid=$!
exec 3>"$TMP/in"
echo "hello" >&3
if wait_for "$TMP/cc.err" "chat: 1 messages" && wait_grow "$TMP/cc.out" 0; then
  kill -INT $pid                      # stops the first reply, which stays in the conversation
  echo "and you?" >&3
  if wait_for "$TMP/cc.err" "chat: 3 messages"; then ok
  else bad "chat after Ctrl-C: the second turn lacks the first reply: $(grep chat: "$TMP/cc.err")"; fi
  n1=$(wc -c <"$TMP/cc.out")
  wait_grow "$TMP/cc.out" "$n1"
  kill -INT $pid                      # stops the second reply
  n2=$(wc -c <"$TMP/cc.out")
  exec 3>&-                           # then the end of input: a clean exit
  wait_exit $pid; rc=$?
  if [ $rc -eq 0 ] && [ "$n2" -gt "$n1" ]; then ok; else bad "chat after two Ctrl-C replies: exit $rc: $(grep -v debug "$TMP/cc.err")"; fi
else
  bad "chat did not start a reply: $(cat "$TMP/cc.err")"; exec 3>&-; kill $pid; wait $pid
fi
# two Ctrl-C during a reply quit as SIGINT does
mkfifo "$TMP/in3"
EDDY_LOG_LEVEL=debug "$EDDY" chat -m $R --ignore-eos -c 60000 -t 1 <"$TMP/in3" >"$TMP/c2.out" 2>"$TMP/c2.err" &
pid=$!
exec 3>"$TMP/in3"
echo "hello" >&3
wait_for "$TMP/c2.err" "chat: 1 messages" && wait_grow "$TMP/c2.out" 0
kill -INT $pid; sleep 0.2; kill -INT $pid   # apart: two pending SIGINTs would merge into one
wait_exit $pid; rc=$?
if [ $rc -eq 130 ]; then ok; else bad "two Ctrl-C in a chat reply: exit status $rc (expected 130, SIGINT)"; fi
exec 3>&-
# Ctrl-C during a long prefill (one token per step) stops it there; the next turn goes on from it
# (~14,000 tokens: seconds of prefill even on a fast machine, so the Ctrl-C lands inside it)
for i in $(seq 2500); do printf 'word%d ' $i; done >"$TMP/long.txt"
mkfifo "$TMP/in4"
EDDY_LOG_LEVEL=debug "$EDDY" chat -m $R -f "$TMP/long.txt" -n 2 -ub 1 -c 60000 -t 1 <"$TMP/in4" >/dev/null 2>"$TMP/c4.err" &
pid=$!
exec 3>"$TMP/in4"
wait_for "$TMP/c4.err" "chat: 1 messages"; sleep 0.1
kill -INT $pid
if wait_for "$TMP/c4.err" "chat: a reply of 0 tokens, stopped by Ctrl-C"; then
  echo "next" >&3
  if wait_for "$TMP/c4.err" "chat: 3 messages, [0-9]+ tokens; [1-9][0-9]* of them restored"; then ok
  else bad "chat after a stopped prefill: $(grep chat: "$TMP/c4.err")"; fi
else
  bad "Ctrl-C during a chat's prefill: $(grep -v info "$TMP/c4.err")"
fi
exec 3>&-
wait_exit $pid; rc=$?
if [ $rc -eq 0 ]; then ok; else bad "chat after a stopped prefill: exit status $rc"; fi

# Ctrl-C at the prompt quits as SIGINT does
mkfifo "$TMP/in2"
EDDY_LOG_LEVEL=debug "$EDDY" chat -m $R -n 4 -t 1 <"$TMP/in2" >"$TMP/cp.out" 2>"$TMP/cp.err" &
pid=$!
exec 3>"$TMP/in2"
echo "hello" >&3
wait_for "$TMP/cp.err" "chat: a reply of"
kill -INT $pid
wait_exit $pid; rc=$?
if [ $rc -eq 130 ]; then ok; else bad "Ctrl-C at the chat prompt: exit status $rc (expected 130, SIGINT): $(cat "$TMP/cp.err")"; fi
exec 3>&-

# ==== perplexity ====
L=tests/data/models/llama-tiny-q8_0.gguf
head -c 4000 tests/data/text/cases.txt >"$TMP/ppl.txt"
expect_ok "perplexity" "Final estimate: PPL = " "[2]" -- perplexity -m $L -f "$TMP/ppl.txt" -c 32 --chunks 3 -t 1
expect_err "perplexity short text" "needs at least" perplexity -m $L -f "$TMP/ppl.txt" -c 100000
expect_err "perplexity no file" "cannot read the text file" perplexity -m $L -f "$TMP/none.txt"
expect_err "perplexity bad cache type" '-ctk: unsupported cache type "bf16"' perplexity -m $L -f "$TMP/ppl.txt" -ctk bf16
expect_ok "perplexity f32 cache" "Final estimate: PPL = " -- perplexity -m $L -f "$TMP/ppl.txt" -c 32 --chunks 1 -t 1 -ctk f32 -ctv f32
# chunks evaluated together (-b: 3 chunks a step, the last step 2) give each chunk's figure
# and the whole one bit for bit
for b in 32 96; do
  "$EDDY" perplexity -m tests/data/models/qwen35-tiny-q8_0.gguf -f "$TMP/ppl.txt" -c 32 --chunks 5 -b $b -t 2 \
    >"$TMP/ppl-b$b" 2>"$TMP/ppl-b$b.err"
done
if grep -q "Final estimate" "$TMP/ppl-b32" && cmp -s "$TMP/ppl-b32" "$TMP/ppl-b96" && grep -q "3 chunks a step" "$TMP/ppl-b96.err"
then ok
else bad "perplexity -b 96 differs from -b 32: $(diff "$TMP/ppl-b32" "$TMP/ppl-b96" | head -4) $(tail -1 "$TMP/ppl-b96.err")"; fi
# the trained hybrid on held-out text: within 0.5% of transformers' perplexity on the same
# weights (tests/data/models/tiny-hybrid.ppl: perplexity, chunks, chunk size)
read want_ppl want_chunks ppl_ctx <tests/data/models/tiny-hybrid.ppl
"$EDDY" perplexity -m tests/data/models/tiny-hybrid-q8_0.gguf -f tests/data/models/tiny-hybrid-heldout.txt \
  -c "$ppl_ctx" -t 2 >"$TMP/tppl.out" 2>&1
got_ppl=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' "$TMP/tppl.out")
if grep -q "$want_chunks chunks of $ppl_ctx" "$TMP/tppl.out" &&
   awk -v g="$got_ppl" -v w="$want_ppl" 'BEGIN { exit !(g != "" && g / w < 1.005 && w / g < 1.005) }'; then ok
else bad "trained hybrid perplexity $got_ppl, transformers $want_ppl: $(tail -n 2 "$TMP/tppl.out")"; fi

# ==== bad input: one line, exit 1 ====
expect_err "no arguments" "no model file" inspect
expect_err "missing file" "$TMP/missing.gguf" inspect "$TMP/missing.gguf"
expect_err "directory" "is a directory" inspect "$TMP"
expect_err "big-endian" "big-endian GGUF not supported" inspect $D/sample-be.gguf
expect_err "unsupported type" "tensor blk.0.iq2.weight has type IQ2_XXS, which eddy does not support yet" \
  inspect $D/unsupported.gguf --tensor blk.0.iq2.weight --out "$TMP/x.f32"
expect_err "no such tensor" 'no tensor named "nope"' inspect $D/sample.gguf --tensor nope --out "$TMP/x.f32"
expect_err "tensor without out" "--tensor and --out go together" inspect $D/sample.gguf --tensor blk.0.f32.weight
expect_err "unwritable out" "cannot create file" inspect $D/sample.gguf --tensor blk.0.f32.weight --out /nonexistent/dir/x.f32
expect_err "unknown option" "unknown option '--bogus' for 'inspect'" inspect $D/sample.gguf --bogus
expect_err "bad max-items" '"abc" is not an integer' inspect $D/sample.gguf --max-items abc
expect_err "two files" "unexpected argument" inspect $D/sample.gguf $D/sample.gguf
expect_err "bench without target" "nothing to run" bench
expect_err "bench filter matches nothing" 'no kernel benchmark matches "zzz"' bench --kernels --filter zzz
expect_err "bench bad threads" "-t: 0 is out of range" bench --kernels -t 0

# ==== bench -m: one JSON line with the documented keys (timings only checked > 0) ====
B=tests/data/models/qwen35-tiny-q8_0.gguf
# json_num KEY: the number after "KEY": in $json
json_num() { sed -n "s/.*\"$1\": \([-+0-9.eE]*\).*/\1/p" <<<"$json"; }
# check_bench_json NAME ZERO_KEYS ARGS...: exit 0, stdout one JSON line whose keys hold numbers > 0,
# but those in ZERO_KEYS (space-separated, "-" for none: a skipped test's) hold 0
check_bench_json() {
  local name=$1 zero=$2; shift 2
  local rc k v
  json=$("$EDDY" "$@" 2>"$TMP/err"); rc=$?
  if [ $rc -ne 0 ]; then bad "$name: exit $rc: $(cat "$TMP/err")"; return; fi
  if [ "$(wc -l <<<"$json")" -ne 1 ] || [ "${json:0:10}" != '{"model": ' ] || [ "${json: -1}" != "}" ]; then
    bad "$name: not one JSON line: $json"; return
  fi
  if ! grep -qF '"model": "qwen35-tiny-q8_0.gguf", "threads": 1, "pp_tokens": ' <<<"$json"; then
    bad "$name: model or threads: $json"; return
  fi
  if command -v python3 >/dev/null && ! python3 -c 'import json, sys; json.loads(sys.argv[1])' "$json" 2>/dev/null; then
    bad "$name: python3 cannot parse: $json"; return
  fi
  for k in pp_tokens tg_tokens pp_tps tg_tps bytes_per_token read_bw_gbs roofline peak_rss_mib; do
    v=$(json_num $k)
    if [ -z "$v" ]; then bad "$name: no number for $k: $json"; return; fi
    if [[ " $zero " == *" $k "* ]]; then
      if ! awk -v v="$v" 'BEGIN { exit !(v == 0) }'; then bad "$name: $k = $v, expected 0"; return; fi
    elif ! awk -v v="$v" 'BEGIN { exit !(v > 0) }'; then bad "$name: $k = $v, expected > 0"; return; fi
  done
  ok
}
check_bench_json "bench -m --json" - bench -m $B -p 8 -n 4 -r 1 -t 1 --json
check_bench_json "bench -m -p 0 --json" "pp_tokens pp_tps" bench -m $B -p 0 -n 4 -r 2 -t 1 --json
expect_ok "bench -m table" "qwen35-tiny-q8_0.gguf" "| qwen35 " "pp8" "tg4" "read bandwidth" "bytes/token" \
  "recurrent state" "roofline" "peak RSS" -- bench -m $B -p 8 -n 4 -r 1 -t 1
expect_err "bench -m missing file" "$TMP/missing.gguf" bench -m "$TMP/missing.gguf" -p 8 -n 4
expect_err "bench -m not a model" "is missing" bench -m $D/sample.gguf -p 8 -n 4
expect_err "bench -m without file" "-m needs a model file" bench -m
expect_err "bench -p negative" "-p: -1 is out of range" bench -m $B -p -1
expect_err "bench -n not a number" '-n: "abc" is not an integer' bench -m $B -n abc
expect_err "bench -r 0" "-r: 0 is out of range" bench -m $B -r 0
expect_err "bench nothing to time" "-p and -n are both 0" bench -m $B -p 0 -n 0
expect_err "bench -m and --kernels" "separate benchmarks" bench -m $B --kernels
expect_err "bench --kernels with -p" "apply to model benchmarks" bench --kernels -p 8
expect_err "bench -m with --filter" "--filter applies to kernel benchmarks" bench -m $B --filter gdn
expect_err "bench -m unknown option" "unknown option '--bogus' for 'bench'" bench -m $B --bogus
expect_err "unknown command" 'unknown command "frobnicate"' frobnicate
head -c 1900 $D/sample.gguf >"$TMP/trunc.gguf"
expect_err "truncated header" "truncated" inspect "$TMP/trunc.gguf"
head -c 9000 $D/sample.gguf >"$TMP/trunc2.gguf"
expect_err "truncated data" "lies outside" inspect "$TMP/trunc2.gguf"
printf 'not a gguf file at all' >"$TMP/text.gguf"
expect_err "not gguf" "not a GGUF file" inspect "$TMP/text.gguf"
head -c 100 $D/sample.gguf >"$TMP/short.gguf"
expect_err "short file" "cannot fit in a 100-byte file" inspect "$TMP/short.gguf"
: >"$TMP/empty.gguf"
expect_err "empty file" "magic truncated" inspect "$TMP/empty.gguf"

# ==== tokenize / detokenize / chat-format (vocabularies in tests/data/text) ====
T=tests/data/text
# expect_out NAME EXPECTED ARGS...: exit 0 and stdout exactly EXPECTED (plus the final newline)
expect_out() {
  local name=$1 want=$2; shift 2
  local out rc
  out=$("$EDDY" "$@" 2>"$TMP/err"); rc=$?
  if [ $rc -ne 0 ]; then bad "$name: exit $rc: $(cat "$TMP/err")"; return; fi
  if [ "$out" != "$want" ]; then bad "$name: got [$out], expected [$want]"; return; fi
  ok
}
# ids from Hugging Face tokenizers (Qwen3) and sentencepiece (spm)
expect_out "tokenize qwen3" "9707 1879" tokenize -m $T/qwen3.gguf "Hello world"
expect_out "tokenize specials" "151644 872 198 6023 151645" tokenize -m $T/qwen3.gguf "$(printf '<|im_start|>user\nhi<|im_end|>')"
expect_out "tokenize --no-special" "27 91 318 4906 91 29 872" tokenize -m $T/qwen3.gguf --no-special "<|im_start|>user"
expect_out "tokenize unicode" "34 2577 963 220 108386 61804 235 145375" tokenize -m $T/qwen3.gguf "Café 你好 👍🏽"
printf 'line one\r\n  line two\tx 123\n' >"$TMP/in.txt"
expect_out "tokenize --file" "1056 825 319 220 1555 1378 10225 220 16 17 18 198" tokenize -m $T/qwen3.gguf --file "$TMP/in.txt"
expect_out "tokenize empty" "" tokenize -m $T/qwen3.gguf ""
expect_out "tokenize spm adds BOS" "1 412 391 398 3359 4038" tokenize -m $T/spm.gguf "Call me Ishmael."
expect_out "tokenize spm --no-bos" "412 391 398 3359 4038" tokenize -m $T/spm.gguf --no-bos "Call me Ishmael."
expect_out "detokenize" "Hello world" detokenize -m $T/qwen3.gguf 9707 1879
expect_out "detokenize quoted list" "Hello world" detokenize -m $T/qwen3.gguf "9707 1879"
expect_out "detokenize specials" "$(printf '<|im_start|>user\nhi<|im_end|>')" detokenize -m $T/qwen3.gguf 151644 872 198 6023 151645
expect_out "detokenize --skip-control" "$(printf 'user\nhi')" detokenize -m $T/qwen3.gguf --skip-control 151644 872 198 6023 151645
expect_out "detokenize spm" "Call me Ishmael." detokenize -m $T/spm.gguf --skip-control 1 412 391 398 3359 4038
ids=$("$EDDY" tokenize -m $T/qwen3.gguf --file "$TMP/in.txt")
"$EDDY" detokenize -m $T/qwen3.gguf $ids >"$TMP/back.txt" 2>"$TMP/err"
printf '\n' >>"$TMP/in.txt"
if cmp -s "$TMP/in.txt" "$TMP/back.txt"; then ok; else bad "tokenize/detokenize round trip differs"; fi
expect_out "chat-format qwen3" "$(printf '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n')" \
  chat-format -m $T/qwen3.gguf --system "Be brief." --user "Hi"
expect_out "chat-format --no-think" "$(printf '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n')" \
  chat-format -m $T/qwen3.gguf --user "Hi" --no-think
expect_out "chat-format smollm2" "$(printf '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n')" \
  chat-format -m $T/smollm2.gguf --user "Hi" --no-generation-prompt
printf '[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]' >"$TMP/msgs.json"
expect_out "chat-format --messages --chat-template chatml" "$(printf '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n')" \
  chat-format -m $T/spm.gguf --chat-template chatml --messages "$TMP/msgs.json" --no-generation-prompt
expect_out "chat-format --chat-template FILE" "$(printf '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>')" \
  chat-format -m $T/qwen3.gguf --chat-template $T/templates/llama3.1.jinja --user Hi --no-generation-prompt --vars '{"bos_token": "<|begin_of_text|>"}'

expect_err "tokenize without model" "no model given" tokenize "text"
expect_err "tokenize without text" "give the text or --file PATH" tokenize -m $T/qwen3.gguf
expect_err "tokenize text and file" "give the text or --file PATH" tokenize -m $T/qwen3.gguf --file "$TMP/in.txt" "text"
expect_err "tokenize missing file" "$TMP/nope.txt: cannot open file" tokenize -m $T/qwen3.gguf --file "$TMP/nope.txt"
expect_err "tokenize unknown option" "unknown option '--bogus' for 'tokenize'" tokenize -m $T/qwen3.gguf --bogus x
expect_err "tokenize no tokenizer" "this file has no tokenizer" tokenize -m $D/sample.gguf "x"
expect_err "tokenize missing model" "$TMP/missing.gguf" tokenize -m "$TMP/missing.gguf" "x"
expect_err "detokenize bad id" '"abc" is not a token id' detokenize -m $T/qwen3.gguf 1 abc
expect_err "detokenize id out of range" "token id 999999 (position 1) is outside the vocabulary" detokenize -m $T/qwen3.gguf 1 999999
expect_err "chat-format no template" "pass one with --chat-template" chat-format -m $T/spm.gguf --user Hi
printf '{%% include "other.jinja" %%}' >"$TMP/bad.jinja"
expect_err "chat-format unsupported template" "--chat-template" chat-format -m $T/qwen3.gguf --chat-template "$TMP/bad.jinja" --user Hi
expect_err "chat-format template refuses" "No user query found in messages" chat-format -m $T/qwen3.gguf --chat-template $T/templates/qwen3.5.jinja --system "only"
printf '[{"role": "user", "content": ' >"$TMP/broken.json"
expect_err "chat-format bad JSON" "messages: JSON" chat-format -m $T/qwen3.gguf --messages "$TMP/broken.json"

finish
