#!/usr/bin/env python3
"""Golden data for the recurrent-family kernels (src/ssm/), from independent references.

Writes tests/data/ssm/*.bin (read by tests/test_ssm_*.c) and tests/data/ssm/README.md.

References (float32, CPU):
  - fla (flash-linear-attention): naive_recurrent_gated_delta_rule, naive_chunk_gated_delta_rule
  - transformers, Qwen3-Next: torch_chunk_gated_delta_rule, torch_recurrent_gated_delta_rule,
    causal_conv1d_update, causal_conv1d_fn, l2norm, Qwen3NextRMSNormGated; the decay gate as
    written in Qwen3NextGatedDeltaNet.forward
  - transformers, Mamba-2: MambaRMSNormGated (the per-group gated norm)

File format (little-endian): "EDSG", u32 version 1, u32 count; then per array: char name[32]
(NUL-padded), u32 ndim, u32 dims[4], float32 data. The layouts are eddy's (see src/ssm/ssm.h and
gdn.h): GDN state (n_v_heads, d_k, d_v); conv state (K-1, conv_dim); conv weight as GGUF stores
it, (conv_dim, K).

Run with a Python that has torch, transformers and fla-core, e.g.
    /root/venv/bin/python scripts/gen_ssm_golden.py
"""
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

SEED = 20250311
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "ssm")


def write(name, arrays):
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        f.write(b"EDSG")
        f.write(struct.pack("<II", 1, len(arrays)))
        for key, a in arrays.items():
            a = np.ascontiguousarray(np.asarray(a, dtype=np.float32))
            dims = list(a.shape) if a.ndim else [1]
            assert len(dims) <= 4 and len(key) < 32
            f.write(key.encode().ljust(32, b"\0"))
            f.write(struct.pack("<I4I", len(dims), *(dims + [1] * (4 - len(dims)))))
            f.write(a.tobytes())
    return path, os.path.getsize(path)


def torch_only(fn):
    """transformers wraps these functions so that an installed fla / causal-conv1d package replaces
    them; the pure-torch function is the one underneath (functools.wraps keeps it as __wrapped__)."""
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn


def t2n(x):
    return x.detach().to(torch.float32).cpu().numpy()


def gdn_inputs(g, T, nk, nv, dk, dv):
    """q, k L2-normalized per head (transformers' l2norm); g from the model's gate formula."""
    from transformers.models.qwen3_next.modeling_qwen3_next import l2norm

    q = l2norm(torch.randn(1, T, nk, dk, generator=g), dim=-1, eps=1e-6)
    k = l2norm(torch.randn(1, T, nk, dk, generator=g), dim=-1, eps=1e-6)
    v = torch.randn(1, T, nv, dv, generator=g)
    A_log = torch.log(torch.empty(nv).uniform_(0.01, 16, generator=g))
    dt_bias = torch.randn(nv, generator=g)
    a = torch.randn(1, T, nv, generator=g)
    gate = -A_log.exp() * F.softplus(a + dt_bias)
    beta = torch.randn(1, T, nv, generator=g).sigmoid()
    s0 = 0.3 * torch.randn(1, nv, dk, dv, generator=g)
    return q, k, v, gate, beta, s0


def gdn_arrays(q, k, v, gate, beta, s0, o, s1, nk, nv, dk, dv, T, head_map):
    return {
        "meta": np.array([nk, nv, dk, dv, T, head_map], dtype=np.float32),
        "q": t2n(q[0]), "k": t2n(k[0]), "v": t2n(v[0]), "g": t2n(gate[0]), "beta": t2n(beta[0]),
        "s0": t2n(s0[0]), "o": t2n(o[0]), "s1": t2n(s1[0]),
    }


def main():
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    g = torch.Generator().manual_seed(SEED)
    os.makedirs(OUT, exist_ok=True)
    from fla.ops.gated_delta_rule.naive import naive_chunk_gated_delta_rule, naive_recurrent_gated_delta_rule
    from transformers.models.mamba2.modeling_mamba2 import MambaRMSNormGated
    from transformers.models.qwen3_next.modeling_qwen3_next import (
        Qwen3NextRMSNormGated, causal_conv1d_fn, causal_conv1d_update, l2norm, torch_chunk_gated_delta_rule)
    torch_chunk_gated_delta_rule = torch_only(torch_chunk_gated_delta_rule)
    causal_conv1d_fn = torch_only(causal_conv1d_fn)
    causal_conv1d_update = torch_only(causal_conv1d_update)

    made = []

    # ---- gated delta rule ----
    # fla's recurrent reference needs equal head counts: tiling q/k over the value heads
    # (torch .repeat) gives value head h key head h % nk, llama.cpp's qwen35 layout.
    nk, nv, dk, dv, T = 2, 4, 32, 32, 70
    q, k, v, gate, beta, s0 = gdn_inputs(g, T, nk, nv, dk, dv)
    o, s1 = naive_recurrent_gated_delta_rule(q.repeat(1, 1, nv // nk, 1), k.repeat(1, 1, nv // nk, 1), v, beta, gate,
                                             scale=dk ** -0.5, initial_state=s0, output_final_state=True)
    made.append(write("gdn_fla_recurrent_mod.bin", gdn_arrays(q, k, v, gate, beta, s0, o, s1, nk, nv, dk, dv, T, 0)))

    # fla's chunked reference (chunk 64), equal head counts, d_k != d_v, a partial last chunk
    nk, nv, dk, dv, T = 2, 2, 32, 48, 100
    q, k, v, gate, beta, s0 = gdn_inputs(g, T, nk, nv, dk, dv)
    o, s1 = naive_chunk_gated_delta_rule(q, k, v, gate, beta, chunk_size=64, scale=dk ** -0.5, initial_state=s0,
                                         output_final_state=True)
    made.append(write("gdn_fla_chunk.bin", gdn_arrays(q, k, v, gate, beta, s0, o, s1, nk, nv, dk, dv, T, 0)))

    # transformers' chunked form with grouped value heads (repeat_interleave: h / (nv / nk))
    nk, nv, dk, dv, T = 2, 4, 32, 32, 90
    q, k, v, gate, beta, s0 = gdn_inputs(g, T, nk, nv, dk, dv)
    o, s1 = torch_chunk_gated_delta_rule(q, k, v, g=gate, beta=beta, chunk_size=64, initial_state=s0,
                                         output_final_state=True, use_qk_l2norm_in_kernel=False)
    made.append(write("gdn_hf_chunk_div.bin", gdn_arrays(q, k, v, gate, beta, s0, o, s1, nk, nv, dk, dv, T, 1)))

    # ---- decay gate: the formula of Qwen3NextGatedDeltaNet.forward ----
    rows, nh = 9, 8
    A_log = torch.log(torch.empty(nh).uniform_(0.01, 16, generator=g))
    dt_bias = torch.randn(nh, generator=g)
    alpha = 4 * torch.randn(rows, nh, generator=g)
    alpha[0, :4] = torch.tensor([25.0, -25.0, 19.5, 20.5])  # both sides of the softplus guard
    b = 3 * torch.randn(rows, nh, generator=g)
    gate = -A_log.float().exp() * F.softplus(alpha.float() + dt_bias)
    made.append(write("gate_hf.bin", {"meta": np.array([rows, nh], dtype=np.float32), "a": t2n(-A_log.exp()),
                                      "dt_bias": t2n(dt_bias), "alpha": t2n(alpha), "b": t2n(b), "g": t2n(gate),
                                      "beta": t2n(b.sigmoid())}))

    # ---- causal conv1d + SiLU (+ L2 norm of the q and k heads) ----
    nk_, dk_, nv_, dv_, K, T = 2, 16, 4, 16, 4, 11
    C = 2 * nk_ * dk_ + nv_ * dv_
    x = torch.randn(1, C, T, generator=g)
    w = 0.5 * torch.randn(C, K, generator=g)
    bias = 0.2 * torch.randn(C, generator=g)
    st0 = torch.randn(1, C, K - 1, generator=g)
    st = st0.clone()
    y = causal_conv1d_update(x, st, w, None, "silu")  # prefill through the cached path: the state rolls
    y_fresh = causal_conv1d_fn(x, w, bias, activation="silu")  # zero initial state, with bias
    yq, yk, yv = torch.split(y[0].transpose(0, 1), [nk_ * dk_, nk_ * dk_, nv_ * dv_], dim=-1)
    y_l2 = torch.cat([l2norm(yq.reshape(T, nk_, dk_), dim=-1, eps=1e-6).reshape(T, -1),
                      l2norm(yk.reshape(T, nk_, dk_), dim=-1, eps=1e-6).reshape(T, -1), yv], dim=-1)
    made.append(write("conv1d_hf.bin", {
        "meta": np.array([C, K, T, 2 * nk_ * dk_, dk_], dtype=np.float32),
        "x": t2n(x[0].transpose(0, 1)), "w": t2n(w), "bias": t2n(bias), "state0": t2n(st0[0].transpose(0, 1)),
        "y": t2n(y[0].transpose(0, 1)), "y_l2": t2n(y_l2), "state1": t2n(st[0].transpose(0, 1)),
        "y_bias_zero_state": t2n(y_fresh[0].transpose(0, 1))}))

    # ---- gated RMSNorm: per value head (Qwen3-Next) and per group (Mamba-2) ----
    rows, nh, d = 5, 3, 32
    norm = Qwen3NextRMSNormGated(d, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(1 + 0.3 * torch.randn(d, generator=g))
    y = torch.randn(rows, nh, d, generator=g)
    z = 2 * torch.randn(rows, nh, d, generator=g)
    out = norm(y.reshape(-1, d), z.reshape(-1, d)).reshape(rows, nh, d)
    ng, gs = 4, 24
    gnorm = MambaRMSNormGated(ng * gs, group_size=gs, eps=1e-5)
    with torch.no_grad():
        gnorm.weight.copy_(1 + 0.3 * torch.randn(ng * gs, generator=g))
    gy = torch.randn(rows, ng * gs, generator=g)
    gz = 2 * torch.randn(rows, ng * gs, generator=g)
    gout = gnorm(gy, gz)
    made.append(write("gated_norm_hf.bin", {
        "meta": np.array([rows, nh, d, ng, gs], dtype=np.float32),
        "y": t2n(y), "z": t2n(z), "w": t2n(norm.weight), "out": t2n(out),
        "gy": t2n(gy), "gz": t2n(gz), "gw": t2n(gnorm.weight), "gout": t2n(gout)}))

    import fla
    import transformers
    lines = [
        "# Golden data for the recurrent-family kernels",
        "",
        "Made by `scripts/gen_ssm_golden.py` (seed %d) with torch %s (CPU, float32), transformers %s," % (
            SEED, torch.__version__, transformers.__version__),
        "fla (flash-linear-attention / fla-core) %s, numpy %s, Python %s. Read by `tests/test_ssm_*.c`." % (
            getattr(fla, "__version__", "?"), np.__version__, sys.version.split()[0]),
        "Regenerate with:",
        "",
        "    /root/venv/bin/python scripts/gen_ssm_golden.py",
        "",
        "| file | bytes | reference |",
        "|---|---|---|",
    ]
    what = {
        "gdn_fla_recurrent_mod.bin": "fla `naive_recurrent_gated_delta_rule`, q/k tiled over value heads (h % n_k)",
        "gdn_fla_chunk.bin": "fla `naive_chunk_gated_delta_rule`, chunk 64, d_k 32 / d_v 48, T 100",
        "gdn_hf_chunk_div.bin": "transformers `torch_chunk_gated_delta_rule`, grouped heads (h / (n_v/n_k))",
        "gate_hf.bin": "Qwen3-Next gate: `-A_log.exp() * softplus(a + dt_bias)`, `b.sigmoid()`",
        "conv1d_hf.bin": "transformers `causal_conv1d_update` (state rolls), `causal_conv1d_fn` (bias), `l2norm`",
        "gated_norm_hf.bin": "`Qwen3NextRMSNormGated` (per head), Mamba-2 `MambaRMSNormGated` (per group)",
    }
    for path, size in made:
        lines.append("| `%s` | %d | %s |" % (os.path.basename(path), size, what[os.path.basename(path)]))
    lines += ["", "Format: see the docstring of the script and `tests/test_ssm.h`.", ""]
    with open(os.path.join(OUT, "README.md"), "w") as f:
        f.write("\n".join(lines))
    for path, size in made:
        print("%s %d bytes" % (os.path.relpath(path), size))


if __name__ == "__main__":
    main()
