#!/usr/bin/env bash
# tests/server/run.sh EDDY_BINARY [PART...] — `eddy serve` against real clients: the
# official openai Python package (installed from PyPI into a virtualenv, build/venv-server
# unless EDDY_SERVER_VENV says otherwise, made here when missing), many concurrent
# streams, hostile requests and drafts (tests/server/test_server.py; PART: api, load, hostile,
# shutdown, spec; all by default). Prints "N passed, M failed". When the virtualenv or the
# package cannot be installed (no PyPI), that is a failure, never a skip.
set -u
EDDY=${1:?usage: run.sh EDDY_BINARY [PART...]}
shift
VENV=${EDDY_SERVER_VENV:-build/venv-server}
if ! "$VENV/bin/python" -c 'import openai' >/dev/null 2>&1; then
  if ! python3 -m venv "$VENV"; then
    echo "FAIL cannot make the virtualenv $VENV (python3-venv is needed)"; echo "0 passed, 1 failed"; exit 1
  fi
  if ! "$VENV/bin/pip" install -q openai; then
    echo "FAIL pip cannot install the openai package from PyPI into $VENV"; echo "0 passed, 1 failed"; exit 1
  fi
fi
exec "$VENV/bin/python" "$(dirname "$0")/test_server.py" "$EDDY" "$@"
