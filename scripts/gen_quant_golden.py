#!/usr/bin/env python3
"""gen_quant_golden.py — golden data for eddy's block formats (tests/test_quant.c).

Writes tests/data/quant/*.bin and tests/data/quant/README.md from the `gguf`
Python package's numpy reference (gguf.quants), so that eddy's C dequantizers and
its Q8_0 / F16 / BF16 quantizers can be checked bit for bit against an independent
implementation.

    python3 -m venv /root/venv-quant && /root/venv-quant/bin/pip install numpy gguf
    /root/venv-quant/bin/python scripts/gen_quant_golden.py [OUT_DIR]

Deterministic: one fixed seed; rerunning with the same gguf and numpy versions
gives the same bytes.

File format (all little-endian), one case per file:
    offset  0  char[4] magic "EDQG"
    offset  4  u32     version = 1
    offset  8  u32     kind: 0 = dequantize (input bytes -> expected float32)
                             1 = quantize   (input float32 -> expected bytes)
    offset 12  u32     ggml type id (as in GGUF)
    offset 16  u64     n_elements
    offset 24  u64     n_bytes (= n_elements / block_size * type_size)
    offset 32  u8      bytes[n_bytes]      (kind 0: the input; kind 1: the expected output)
    then       f32     values[n_elements]  (kind 0: the expected output; kind 1: the input)

Scales. Quantized blocks get random bytes everywhere, then their fp16 scale fields
(d, and m/dmin where the type has one) are set from a list of awkward values
(+-0, +-65504, the smallest and largest subnormals, the smallest normal, random
normals of every exponent, negative scales), and a few blocks get inf and NaN
scales on purpose. Those produce inf/NaN outputs (inf * 0 = NaN, for example):
the C test compares every output bit for bit except that any NaN matches any NaN
(numpy may quiet NaNs or pick their sign differently through SIMD paths).
"""
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

SEED = 20240611
MAGIC = b"EDQG"
VERSION = 1

# fp16 fields (byte offsets) per block type: the scale and, where present, the
# offset/min scale.
FP16_FIELDS = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],
    T.Q5_0: [0],
    T.Q5_1: [0, 2],
    T.Q8_0: [0],
    T.IQ4_NL: [0],
    T.Q2_K: [80, 82],
    T.Q3_K: [108],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
    T.IQ4_XS: [0],
}

# awkward finite fp16 scale bit patterns
SPECIAL_SCALES = [
    0x0000, 0x8000,  # +-0
    0x7BFF, 0xFBFF,  # +-65504
    0x0001, 0x8001,  # smallest subnormals
    0x03FF, 0x83FF,  # largest subnormals
    0x0400, 0x8400,  # smallest normals
    0x3C00, 0xBC00,  # +-1
    0x1400, 0x2E66,  # 2^-10, ~0.1
    0x7800, 0xF000,  # 32768, -8192
]
NONFINITE_SCALES = [0x7C00, 0xFC00, 0x7E00, 0x7C01]  # +inf, -inf, qNaN, sNaN


def random_finite_fp16(rng, n):
    """Random fp16 bit patterns with a uniform exponent (not inf/NaN)."""
    sign = rng.integers(0, 2, n, dtype=np.uint16) << 15
    exp = rng.integers(0, 31, n, dtype=np.uint16) << 10
    man = rng.integers(0, 1024, n, dtype=np.uint16)
    return sign | exp | man


def make_blocks(rng, qtype, n_blocks):
    """Random blocks of qtype with the scale fields chosen as described above."""
    _, type_size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
    raw[0, :] = 0x00  # all quant bits zero
    raw[1, :] = 0xFF  # all quant bits one
    fields = FP16_FIELDS[qtype]
    for b in range(n_blocks):
        for k, off in enumerate(fields):
            if b < 2:
                h = 0x3C00 if k == 0 else 0xB800  # d = 1, min = -0.5
            elif b - 2 < len(SPECIAL_SCALES):
                h = SPECIAL_SCALES[(b - 2 + 5 * k) % len(SPECIAL_SCALES)]
            elif (i := b - 2 - len(SPECIAL_SCALES)) < len(NONFINITE_SCALES) and k == i % len(fields):
                h = NONFINITE_SCALES[i]
            else:
                h = int(random_finite_fp16(rng, 1)[0])
            raw[b, off:off + 2] = np.frombuffer(struct.pack("<H", h), dtype=np.uint8)
    return raw


def write_case(path, kind, qtype, n_elements, raw_bytes, values):
    raw_bytes = np.ascontiguousarray(raw_bytes, dtype=np.uint8).reshape(-1)
    values = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
    assert values.size == n_elements
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    assert raw_bytes.size == n_elements // block_size * type_size
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<IIIQQ", VERSION, kind, int(qtype), n_elements, raw_bytes.size))
        f.write(raw_bytes.tobytes())
        f.write(values.astype("<f4").tobytes())


def dequant_case(out, rng, qtype, n_blocks):
    block_size, _ = GGML_QUANT_SIZES[qtype]
    raw = make_blocks(rng, qtype, n_blocks)
    with np.errstate(all="ignore"):  # inf/NaN scales are intended
        vals = gguf.quants.dequantize(raw.reshape(-1), qtype)
    write_case(os.path.join(out, f"{qtype.name}.bin"), 0, qtype, n_blocks * block_size, raw, vals)


def f32_from_bits(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def float_cases(out, rng):
    # F16: every one of the 65536 values, numpy's float16 -> float32 widening
    h = np.arange(65536, dtype=np.uint16)
    write_case(os.path.join(out, "F16.bin"), 0, T.F16, h.size, h.view(np.uint8),
               h.view(np.float16).astype(np.float32))

    # BF16: specials and random patterns, gguf's widening
    specials = [0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x3F80, 0x7F7F, 0xFF7F,
                0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFFF]
    b = np.concatenate([np.array(specials, dtype=np.uint16),
                        rng.integers(0, 65536, 4096 - len(specials), dtype=np.uint16)])
    write_case(os.path.join(out, "BF16.bin"), 0, T.BF16, b.size, b.view(np.uint8),
               gguf.quants.dequantize(b.view(np.uint8), T.BF16))

    # F32: a view; specials and random bit patterns (NaN payloads included)
    fs = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0x7F800000,
          0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x3F800000]
    x = np.concatenate([np.array(fs, dtype=np.uint32),
                        rng.integers(0, 2**32, 512 - len(fs), dtype=np.uint32)])
    write_case(os.path.join(out, "F32.bin"), 0, T.F32, x.size, x.view(np.uint8),
               gguf.quants.dequantize(x.view(np.uint8), T.F32))


def f16_quant_case(out, rng):
    """float32 -> fp16 with numpy's astype (round to nearest even)."""
    finite = np.arange(0, 0x7C00, dtype=np.uint32)
    pick = rng.choice(finite.size - 1, 2048, replace=False)
    lo = finite[pick].astype(np.uint16).view(np.float16).astype(np.float32)
    hi = (finite[pick] + 1).astype(np.uint16).view(np.float16).astype(np.float32)
    mid = (lo.astype(np.float64) + hi.astype(np.float64)) / 2  # exact in float32
    mid = mid.astype(np.float32)
    mbits = mid.view(np.uint32)
    vals = [mid, f32_from_bits(mbits + 1), f32_from_bits(mbits - 1)]  # ties, just above, below
    vals.append(f32_from_bits(rng.integers(0, 2**32, 1024, dtype=np.uint32)))  # anything
    vals.append(np.float32(2.0) ** rng.uniform(-30, 17, 1024).astype(np.float32)
                * rng.choice(np.array([-1, 1], dtype=np.float32), 1024))
    edge = [65504.0, 65519.0, 65519.996, 65520.0, 65536.0, 1e30, 2.0**-24, 2.0**-25,
            2.0**-25 * 1.0000001, 2.0**-26, 3 * 2.0**-25, 2.0**-14, 2.0**-14 - 2.0**-25,
            1e-45, 0.0, -0.0, float("inf"), float("-inf"), float("nan")]
    e = np.array(edge, dtype=np.float32)
    vals += [e, -e]
    x = np.concatenate(vals).astype(np.float32)
    with np.errstate(all="ignore"):
        h = x.astype(np.float16)
    write_case(os.path.join(out, "F16_quant.bin"), 1, T.F16, x.size, h.view(np.uint8), x)


def bf16_quant_case(out, rng):
    """float32 -> bf16 with gguf.quants.quantize (round to nearest even, NaN quieted)."""
    r = rng.integers(0, 2**32, 3072, dtype=np.uint32)
    ties = (rng.integers(0, 2**16, 512, dtype=np.uint32) << 16) | 0x8000
    near = np.concatenate([ties + 1, ties - 1])
    sp = np.array([0x7F7FFFFF, 0x7F7F8000, 0x7F7F7FFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,
                   0x7F800001, 0x7FC00000, 0xFFFFFFFF, 0x00000001, 0x00008000, 0x00018000,
                   0x80000000, 0x00000000], dtype=np.uint32)
    x = np.concatenate([r, ties, near, sp]).view(np.float32)
    h = gguf.quants.quantize(x, T.BF16)
    write_case(os.path.join(out, "BF16_quant.bin"), 1, T.BF16, x.size, h.view(np.uint8), x)


def q8_0_quant_case(out, rng):
    """Rows of floats -> Q8_0 with gguf.quants.quantize. Inputs are finite and every
    block's max |x| is 0 or >= 1e-30 (below ~1e-37 the reciprocal scale overflows and
    numpy's float->int8 cast of inf/NaN is platform-defined)."""
    blocks = []
    g = lambda s: (rng.standard_normal(32) * s).astype(np.float32)
    blocks.append(np.zeros(32, np.float32))
    blocks.append(np.array([-0.0] * 32, np.float32))
    one = np.zeros(32, np.float32)
    one[7] = -3.0
    blocks.append(one)
    # amax = 127 -> d = 1, id = 1: x * id = x, so .5 values test ties-away-from-zero
    t = np.arange(-16, 16, dtype=np.float32) + np.float32(0.5)
    t[0] = 127.0
    blocks.append(t)
    t = -t
    blocks.append(t)
    blocks.append(np.linspace(-1, 1, 32).astype(np.float32))
    blocks.append(g(1e-20))                  # d underflows to fp16 0, quants still set
    blocks.append(g(1e-30) + np.float32(1e-30))
    blocks.append(g(1e6))                    # d close to fp16 max
    blocks.append(g(1e10))                   # d overflows fp16 -> inf stored
    sub = np.full(32, 1e-40, np.float32)
    sub[3] = 1.0
    blocks.append(sub)                       # float32 subnormals next to a normal max
    blocks.append(np.float32(65504.0 * 127) * np.ones(32, np.float32))
    for s in [1e-3, 0.1, 1.0, 10.0, 300.0]:
        for _ in range(6):
            blocks.append(g(s))
    while len(blocks) < 64:
        blocks.append(rng.uniform(-5, 5, 32).astype(np.float32))
    x = np.concatenate(blocks).astype(np.float32)
    with np.errstate(all="ignore"):
        q = gguf.quants.quantize(x.reshape(1, -1), T.Q8_0)
    write_case(os.path.join(out, "Q8_0_quant.bin"), 1, T.Q8_0, x.size, q, x)


README = """# Golden data for the block formats

Made by `scripts/gen_quant_golden.py` (seed {seed}) with the `gguf` Python package
**{gguf_version}** and numpy {numpy_version}, Python {py}. Read by `tests/test_quant.c`.
Regenerate with:

    /root/venv-quant/bin/python scripts/gen_quant_golden.py

| file | kind | what |
|---|---|---|
{rows}

Format of each file (little-endian): `"EDQG"`, u32 version (1), u32 kind
(0 = dequantize: bytes in, float32 out; 1 = quantize: float32 in, bytes out), u32 GGML
type id, u64 n_elements, u64 n_bytes, then the bytes, then n_elements float32.

- Dequantize cases: random block bytes with the fp16 scale fields set to awkward
  values (+-0, +-65504, smallest/largest subnormals, smallest normal, negative and
  random scales of every exponent); a few blocks per type carry inf or NaN scales on
  purpose. Expected values come from `gguf.quants.dequantize`. The test compares bit
  patterns, except that any NaN matches any NaN.
- `F16.bin` holds all 65536 half values; `F16_quant.bin` is numpy's float32 -> float16
  (ties, values one ulp either side of ties, overflow and underflow edges, random bit
  patterns); `BF16_quant.bin` is `gguf.quants.quantize(x, BF16)`.
- `Q8_0_quant.bin` is `gguf.quants.quantize(x, Q8_0)` of finite rows whose block
  maxima are 0 or >= 1e-30 (see the script for why).
"""


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "tests", "data", "quant")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(SEED)
    rows = []
    for qtype in [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.IQ4_NL]:
        dequant_case(out, rng, qtype, 64)
        rows.append((f"{qtype.name}.bin", "dequantize", "64 blocks"))
    for qtype in [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_XS]:
        dequant_case(out, rng, qtype, 40)
        rows.append((f"{qtype.name}.bin", "dequantize", "40 super-blocks"))
    float_cases(out, rng)
    rows += [("F32.bin", "dequantize", "512 values: specials, random bit patterns"),
             ("F16.bin", "dequantize", "all 65536 fp16 values"),
             ("BF16.bin", "dequantize", "4096 values: specials, random bit patterns")]
    f16_quant_case(out, rng)
    bf16_quant_case(out, rng)
    q8_0_quant_case(out, rng)
    rows += [("F16_quant.bin", "quantize", "float32 -> fp16 (numpy astype)"),
             ("BF16_quant.bin", "quantize", "float32 -> bf16 (gguf)"),
             ("Q8_0_quant.bin", "quantize", "64 blocks of float32 rows -> Q8_0 (gguf)")]
    import platform
    from importlib.metadata import version
    table = "\n".join(f"| `{a}` | {b} | {c} |" for a, b, c in rows)
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(README.format(seed=SEED, gguf_version=version("gguf"), numpy_version=np.__version__,
                              py=platform.python_version(), rows=table))
    total = sum(os.path.getsize(os.path.join(out, r[0])) for r in rows)
    print(f"wrote {len(rows)} files, {total} bytes, to {out}")


if __name__ == "__main__":
    main()
