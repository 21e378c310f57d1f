#!/usr/bin/env python3
"""Writes the small GGUF files the CLI tests and the fuzzer's seed corpus use.

Made with the `gguf` Python package (an independent writer), so eddy's reader is
checked against files it did not write itself:

  tests/data/gguf/sample.gguf           v3, metadata of every value type, one tensor of each
                                        type eddy reads (256 x 2 elements)
  tests/data/gguf/sample-v2.gguf        the same, version field 2 (v2 and v3 share the layout)
  tests/data/gguf/sample-be.gguf        big-endian (refused by eddy)
  tests/data/gguf/unsupported.gguf      one IQ2_XXS tensor (listed, refused on dequantize)
  tests/data/gguf/expected/NAME.f32     each sample tensor dequantized by gguf.quants
  tests/data/fuzz-seeds/fuzz_gguf/*     seeds for the GGUF fuzzer

Usage: python3 scripts/gen_gguf_samples.py   (needs numpy and gguf; run from the repo root)
"""
import os
import shutil

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

OUT = "tests/data/gguf"
SEEDS = "tests/data/fuzz-seeds/fuzz_gguf"
rng = np.random.default_rng(1234)

TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K",
         "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"]

# Byte offsets of the fp16 scale fields inside one block, for types gguf.quants cannot
# quantize: random bytes there could be inf/NaN, so they get sane random scales.
F16_SCALES = {"Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
              "IQ4_NL": [0], "IQ4_XS": [0]}


def tensor_bytes(tname, rows, cols):
    qt = T[tname]
    data = (rng.standard_normal((rows, cols)) * 0.5).astype(np.float32)
    try:
        return quantize(data, qt)
    except NotImplementedError:
        pass
    block, size = gguf.GGML_QUANT_SIZES[qt]
    raw = rng.integers(0, 256, size=(rows, cols // block, size), dtype=np.uint8)
    for off in F16_SCALES[tname]:
        scale = rng.uniform(0.001, 0.05, size=raw.shape[:2]).astype(np.float16)
        raw[:, :, off:off + 2] = scale.view(np.uint8).reshape(raw.shape[0], raw.shape[1], 2)
    return raw.reshape(rows, -1)


def add_metadata(w):
    w.add_name("eddy sample")
    w.add_uint8("sample.u8", 250)
    w.add_int8("sample.i8", -5)
    w.add_uint16("sample.u16", 65535)
    w.add_int16("sample.i16", -32768)
    w.add_uint32("sample.u32", 4294967295)
    w.add_int32("sample.i32", -7)
    w.add_uint64("sample.u64", 2**64 - 1)
    w.add_int64("sample.i64", -(2**63))
    w.add_float32("sample.f32", 0.1)
    w.add_float64("sample.f64", 2.5e-300)
    w.add_bool("sample.bool", True)
    w.add_string("sample.str", 'quote " backslash \\ newline \n tab \t done')
    w.add_array("sample.tokens", [f"tok{i}" for i in range(40)])
    w.add_array("sample.ints", [1, -2, 3])
    w.add_array("sample.nested", [[1, 2], [3]])
    w.add_context_length(4096)


def write(path, endian=gguf.GGUFEndian.LITTLE, tensors=None):
    w = gguf.GGUFWriter(path, "llama", endianess=endian)
    add_metadata(w)
    for name, tname, raw in tensors:
        w.add_tensor(name, raw, raw_dtype=T[tname])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    os.makedirs(f"{OUT}/expected", exist_ok=True)
    os.makedirs(SEEDS, exist_ok=True)
    tensors = []
    for tname in TYPES:
        raw = tensor_bytes(tname, 2, 256)
        name = f"blk.0.{tname.lower()}.weight"
        tensors.append((name, tname, raw))
        expect = dequantize(raw, T[tname]).astype("<f4")
        expect.tofile(f"{OUT}/expected/{name}.f32")
    write(f"{OUT}/sample.gguf", tensors=tensors)
    with open(f"{OUT}/sample.gguf", "rb") as f:
        data = bytearray(f.read())
    data[4:8] = (2).to_bytes(4, "little")
    with open(f"{OUT}/sample-v2.gguf", "wb") as f:
        f.write(data)
    be = [(n, t, r) for n, t, r in tensors if t == "F32"]
    write(f"{OUT}/sample-be.gguf", endian=gguf.GGUFEndian.BIG, tensors=be)
    iq2 = rng.integers(0, 256, size=(2, 66), dtype=np.uint8)
    write(f"{OUT}/unsupported.gguf", tensors=[("blk.0.iq2.weight", "IQ2_XXS", iq2)])
    # fuzz seeds: small files of each shape
    small = [(n, t, r) for n, t, r in tensors if t in ("F32", "Q8_0", "Q4_K")]
    write(f"{SEEDS}/small.gguf", tensors=small)
    write(f"{SEEDS}/header-only.gguf", tensors=[])
    shutil.copy(f"{OUT}/sample-v2.gguf", f"{SEEDS}/sample-v2.gguf")
    shutil.copy(f"{OUT}/unsupported.gguf", f"{SEEDS}/unsupported.gguf")
    from importlib.metadata import version
    print("written with gguf", version("gguf"))


if __name__ == "__main__":
    main()
