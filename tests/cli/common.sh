# tests/cli/common.sh — sourced by the CLI and library test scripts: counters, a
# temporary directory, the one-line-error check (it needs EDDY set) and the closing
# "N passed, M failed" line.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

# expect_err NAME PATTERN ARGS...: exit 1, stderr one line "eddy: error: ...PATTERN..."
expect_err() {
  local name=$1 pat=$2; shift 2
  local rc
  "$EDDY" "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?
  if [ $rc -ne 1 ]; then bad "$name: exit status $rc (expected 1): $(head -5 "$TMP/err")"; return; fi
  if [ "$(wc -l <"$TMP/err")" -ne 1 ]; then bad "$name: stderr is not one line: $(cat "$TMP/err")"; return; fi
  if ! grep -q '^eddy: error: ' "$TMP/err"; then bad "$name: stderr lacks 'eddy: error:': $(cat "$TMP/err")"; return; fi
  if ! grep -qF -- "$pat" "$TMP/err"; then bad "$name: stderr lacks: $pat: $(cat "$TMP/err")"; return; fi
  ok
}

# The closing line every script prints, and its exit status.
finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
