#!/usr/bin/env bash
# bench/compare_serve.sh MODEL [ROUNDS] — eddy serve against llama-server under the same
# load (bench/serve_load.py: 1, 4 and 16 streaming clients, 4 requests each, 64 tokens
# per answer with ignore_eos, temperature 0), each server started with 2 threads and 16
# slots on 127.0.0.1, the two alternating for ROUNDS rounds (default 2). LLAMA_SERVER
# names llama-server (default /work/peers/llama.cpp/build/bin/llama-server); without it
# only eddy runs. CLIENTS=1,4,16 picks the client counts, EDDY_ARGS adds options to eddy serve
# (e.g. "--prefill-chunk 16"). Prints serve_load.py's JSON lines, each tagged with the server.
set -eu
MODEL=${1:?usage: compare_serve.sh MODEL [ROUNDS]}
ROUNDS=${2:-2}
EDDY=${EDDY:-build/eddy}
LLAMA_SERVER=${LLAMA_SERVER:-/work/peers/llama.cpp/build/bin/llama-server}
CLIENTS=${CLIENTS:-1,4,16}
PORT=${PORT:-18471}
LOAD="python3 $(dirname "$0")/serve_load.py --url http://127.0.0.1:$PORT --clients $CLIENTS --requests 4 --max-tokens 64 --ignore-eos --json"

wait_up() {
  for _ in $(seq 1 1200); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "server did not come up" >&2
  return 1
}

run_one() { # NAME COMMAND...
  local name=$1; shift
  "$@" >/dev/null 2>&1 &
  local pid=$!
  wait_up
  $LOAD | sed "s/^{/{\"server\": \"$name\", \"load\": \"$(cut -d' ' -f1 /proc/loadavg)\", /"
  kill -TERM "$pid"
  wait "$pid" || true
}

for r in $(seq 1 "$ROUNDS"); do
  run_one eddy "$EDDY" serve -m "$MODEL" -t 2 -np 16 -c 2048 --port "$PORT" ${EDDY_ARGS:-}
  if [ -x "$LLAMA_SERVER" ]; then
    run_one llama-server "$LLAMA_SERVER" -m "$MODEL" -t 2 -np 16 -c 32768 --port "$PORT" --host 127.0.0.1
  fi
done
