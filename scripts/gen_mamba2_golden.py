#!/usr/bin/env python3
"""gen_mamba2_golden.py — golden data for eddy's Mamba-2 kernels (tests/test_ssm_mamba2.c).

Runs the torch Mamba-2 reference of Hugging Face transformers (the module-level
`mamba2_chunk_scan` and `mamba2_selective_state_update` of
transformers.models.mamba2.modeling_mamba2: the code Mamba2Mixer.torch_forward calls
when mamba_ssm is absent) on random inputs, and writes inputs and outputs to
tests/data/mamba2/*.bin, with the versions used in tests/data/mamba2/README.md.

    /root/venv/bin/python scripts/gen_mamba2_golden.py [OUT_DIR]

Deterministic: fixed seeds, numpy draws the inputs, torch runs on one CPU thread.

Each case: a prefill of T tokens from a given initial state through the chunked
(SSD) scan, then K decode steps through the selective state update.

File format (little-endian), one case per file:
    char[4] "EDM2", u32 version = 1
    i64     T, n_heads, d_head, n_groups, d_state, K, chunk_size
    f32     dt_min, dt_max                     (the time_step_limit)
    f32     A (H), dt_bias (H), D (H)
    f32     state0 (H, P, N)                   initial state, torch layout (head, d_head, d_state)
    f32     x (T, H, P), B (T, G, N), C (T, G, N), dt (T, H)      raw dt
    f32     y (T, H, P), state (H, P, N)       after the prefill
    f32     xs (K, H, P), Bs (K, G, N), Cs (K, G, N), dts (K, H)  the decode steps
    f32     ys (K, H, P), state (H, P, N)      after the K steps
The decode path of transformers applies no dt clamp, so cases with a limit have K = 0.
"""
import os
import struct
import sys

import numpy as np
import torch
import transformers
from transformers.models.mamba2 import modeling_mamba2 as m2

MAGIC = b"EDM2"
VERSION = 1

# name, T, heads, d_head, groups, d_state, K, chunk, dt_limit, seed
CASES = [
    ("basic", 100, 8, 16, 2, 16, 3, 32, (0.0, float("inf")), 1),
    ("limit", 50, 4, 32, 1, 32, 0, 16, (0.05, 0.8), 2),
]


def f32(a):
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


def make_case(name, T, H, P, G, N, K, chunk, limit, seed):
    rng = np.random.default_rng(seed)
    A = f32(-np.exp(rng.uniform(-1.0, 2.0, H)))
    dt_bias = f32(rng.uniform(-1.0, 0.5, H))
    D = f32(rng.normal(size=H))
    state0 = f32(0.5 * rng.normal(size=(H, P, N)))
    x = f32(rng.normal(size=(T, H, P)))
    B = f32(rng.normal(size=(T, G, N)))
    C = f32(rng.normal(size=(T, G, N)))
    dt = f32(rng.uniform(-3.0, 1.5, size=(T, H)))
    xs = f32(rng.normal(size=(K, H, P)))
    Bs = f32(rng.normal(size=(K, G, N)))
    Cs = f32(rng.normal(size=(K, G, N)))
    dts = f32(rng.uniform(-3.0, 1.5, size=(K, H)))

    t = torch.from_numpy
    with torch.no_grad():
        y, state = m2.mamba2_chunk_scan(
            t(x)[None], t(dt)[None], t(A), t(B)[None], t(C)[None], chunk_size=chunk, D=t(D),
            dt_bias=t(dt_bias), initial_states=t(state0)[None], dt_softplus=True, dt_limit=limit,
            return_final_states=True)
        y, state = y[0].numpy().copy(), state.clone().contiguous()
        state_prefill = f32(state.numpy()[0].copy())
        ys = []
        for k in range(K):
            yk = m2.mamba2_selective_state_update(
                state, t(xs[k])[None],
                t(dts[k])[None, :, None].expand(1, H, P),
                t(A)[:, None, None].expand(H, P, N),
                t(Bs[k])[None], t(Cs[k])[None],
                D=t(D)[:, None].expand(H, P),
                dt_bias=t(dt_bias)[:, None].expand(H, P),
                dt_softplus=True)
            ys.append(yk[0].numpy().copy())
        ys = f32(np.stack(ys)) if K else np.zeros((0, H, P), np.float32)
    return dict(A=A, dt_bias=dt_bias, D=D, state0=state0, x=x, B=B, C=C, dt=dt, y=f32(y),
                state_prefill=state_prefill, xs=xs, Bs=Bs, Cs=Cs, dts=dts, ys=ys, state=f32(state.numpy()[0]))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "data", "mamba2")
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    for name, T, H, P, G, N, K, chunk, limit, seed in CASES:
        c = make_case(name, T, H, P, G, N, K, chunk, limit, seed)
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(MAGIC + struct.pack("<I", VERSION))
            f.write(struct.pack("<7q", T, H, P, G, N, K, chunk))
            f.write(struct.pack("<2f", limit[0], limit[1]))
            for key in ("A", "dt_bias", "D", "state0", "x", "B", "C", "dt", "y", "state_prefill",
                        "xs", "Bs", "Cs", "dts", "ys", "state"):
                f.write(c[key].tobytes())
        print("wrote", name, os.path.getsize(os.path.join(out, name + ".bin")), "bytes")
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("# Mamba-2 golden data\n\n"
                "Written by `scripts/gen_mamba2_golden.py` (format in its docstring) from the torch\n"
                "Mamba-2 reference in Hugging Face transformers (`mamba2_chunk_scan`,\n"
                "`mamba2_selective_state_update` in `transformers.models.mamba2.modeling_mamba2`),\n"
                "float32 on one CPU thread. Read by `tests/test_ssm_mamba2.c` (test `mamba2_golden`).\n\n"
                f"- python {sys.version.split()[0]}\n- torch {torch.__version__}\n"
                f"- transformers {transformers.__version__}\n- numpy {np.__version__}\n\n"
                "Cases (T, heads, d_head, groups, d_state, decode steps K, chunk size, dt limit):\n\n")
        for name, T, H, P, G, N, K, chunk, limit, seed in CASES:
            f.write(f"- `{name}.bin`: T={T} H={H} P={P} G={G} N={N} K={K} chunk={chunk} dt_limit={limit}\n")


if __name__ == "__main__":
    main()
