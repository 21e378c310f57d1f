#!/usr/bin/env python3
"""Checks `eddy inspect` against the `gguf` package's reader on real GGUF files.

For each file: the architecture, the metadata keys and every tensor's name, type,
shape, offset and size must agree with gguf.GGUFReader, and every tensor of a type
eddy reads, dequantized by `eddy inspect --tensor NAME --out FILE`, must equal
gguf.quants.dequantize bit for bit (NaN compared as NaN).

Usage: python3 scripts/check_gguf_files.py [--eddy build/eddy] FILE.gguf...
Needs numpy and gguf (not needed by the build or by make test).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import gguf
from gguf.quants import dequantize

SUPPORTED = {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K",
             "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"}


def check(eddy, path, tmp):
    problems = []
    r = gguf.GGUFReader(path)
    out = subprocess.run([eddy, "inspect", path, "--max-items", "0"], capture_output=True, text=True)
    if out.returncode != 0:
        return [f"eddy inspect failed: {out.stderr.strip()}"], 0
    text = out.stdout
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^  (\S+)\s+(\S+)\s+(\[[0-9, ]+\])\s+(\d+)\s+(\d+)", line)
        if m:
            rows[m.group(1)] = m.groups()[1:]
    keys = [f.name for f in r.fields.values() if not f.name.startswith("GGUF.")]
    for k in keys:
        if f"  {k} " not in text:
            problems.append(f"key {k} missing from eddy's listing")
    n_checked = 0
    for t in r.tensors:
        row = rows.get(t.name)
        shape = "[" + ", ".join(str(int(d)) for d in t.shape) + "]"
        want = (t.tensor_type.name, shape, str(t.data_offset), str(t.n_bytes))
        if row is None:
            problems.append(f"tensor {t.name} missing")
            continue
        if tuple(row) != want:
            problems.append(f"tensor {t.name}: eddy says {row}, gguf says {want}")
        if t.tensor_type.name not in SUPPORTED:
            continue
        dst = os.path.join(tmp, "t.f32")
        res = subprocess.run([eddy, "inspect", path, "--tensor", t.name, "--out", dst],
                             capture_output=True, text=True)
        if res.returncode != 0:
            problems.append(f"tensor {t.name}: {res.stderr.strip()}")
            continue
        got = np.fromfile(dst, dtype="<f4")
        ref = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
        same = (got.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(got) & np.isnan(ref))
        if got.shape != ref.shape or not same.all():
            bad = int((~same).sum()) if got.shape == ref.shape else -1
            problems.append(f"tensor {t.name} ({t.tensor_type.name}): {bad} values differ from gguf.quants")
        n_checked += 1
    return problems, n_checked


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eddy", default="build/eddy")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    total_bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in a.files:
            problems, n = check(a.eddy, path, tmp)
            arch = gguf.GGUFReader(path).fields.get("general.architecture")
            status = "ok" if not problems else f"{len(problems)} problems"
            print(f"{os.path.basename(path)}: {n} tensors bit-exact, {status}")
            for p in problems[:10]:
                print("   ", p)
            total_bad += len(problems)
    sys.exit(1 if total_bad else 0)


if __name__ == "__main__":
    main()
