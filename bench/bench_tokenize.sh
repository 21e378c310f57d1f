#!/usr/bin/env bash
# bench/bench_tokenize.sh [RUNS] — tokenizing ../shared/data/corpus/moby-dick.txt with the
# Qwen3 vocabulary: eddy (the whole command, GGUF loading included), llama.cpp's
# llama-tokenize on the same GGUF, and Hugging Face tokenizers (one thread; in-process
# encode time, and load + encode). Prints the median wall time and the median CPU time
# (user + sys) of RUNS runs (default 11) for each, and the machine's load average.
#
#   LLAMA_TOKENIZE=/path/to/llama-tokenize PYTHON=/path/to/python bench/bench_tokenize.sh
set -u
cd "$(dirname "$0")/.."
RUNS=${1:-11}
TEXT=${TEXT:-../shared/data/corpus/moby-dick.txt}
GGUF=tests/data/text/qwen3.gguf
TOKJSON=${TOKJSON:-../shared/data/tokenizers/qwen3/tokenizer.json}
LLAMA_TOKENIZE=${LLAMA_TOKENIZE:-/root/peers/llama.cpp-build/bin/llama-tokenize}
PYTHON=${PYTHON:-/root/venv/bin/python}
[ -x build/eddy ] || make -s build/eddy

# median of the numbers on stdin
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# run NAME CMD...: RUNS timed runs; prints "NAME: wall W s, cpu C s"
run() {
  local name=$1; shift
  local walls cpus
  walls=$(mktemp); cpus=$(mktemp)
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -f "%e %U %S" -o "$TMP/t" "$@" >/dev/null 2>&1
    awk '{print $1}' "$TMP/t" >>"$walls"
    awk '{print $2 + $3}' "$TMP/t" >>"$cpus"
  done
  printf '%-28s wall %.3f s   cpu %.3f s   (median of %d)\n' "$name" "$(median <"$walls")" "$(median <"$cpus")" "$RUNS"
  rm -f "$walls" "$cpus"
}

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "text: $TEXT ($(wc -c <"$TEXT") bytes), $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
n_eddy=$(build/eddy tokenize -m $GGUF --file "$TEXT" | wc -w)
echo "eddy: $n_eddy tokens"
run "eddy tokenize" build/eddy tokenize -m $GGUF --file "$TEXT"
if [ -x "$LLAMA_TOKENIZE" ]; then
  export LD_LIBRARY_PATH=$(dirname "$LLAMA_TOKENIZE")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  run "llama-tokenize" "$LLAMA_TOKENIZE" -m $GGUF -f "$TEXT" --ids --log-disable
fi
if [ -x "$PYTHON" ]; then
  cat >"$TMP/hf.py" <<'PY'
import sys, time, os
from tokenizers import Tokenizer
t0 = time.perf_counter()
tok = Tokenizer.from_file(sys.argv[1])
text = open(sys.argv[2], encoding="utf-8").read()
t1 = time.perf_counter()
ids = tok.encode(text, add_special_tokens=False).ids
t2 = time.perf_counter()
print("%d %.3f %.3f" % (len(ids), t2 - t1, t2 - t0))
PY
  encs=$(mktemp); alls=$(mktemp)
  for _ in $(seq "$RUNS"); do
    RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false "$PYTHON" "$TMP/hf.py" "$TOKJSON" "$TEXT" >"$TMP/hf"
    awk '{print $2}' "$TMP/hf" >>"$encs"; awk '{print $3}' "$TMP/hf" >>"$alls"
  done
  printf '%-28s encode %.3f s   load + encode %.3f s   (%d tokens; median of %d)\n' "HF tokenizers (1 thread)" \
    "$(median <"$encs")" "$(median <"$alls")" "$(awk '{print $1}' "$TMP/hf")" "$RUNS"
  rm -f "$encs" "$alls"
fi
