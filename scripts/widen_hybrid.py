#!/usr/bin/env python3
"""Embeds the trained tiny hybrid in a 0.57B-shaped Qwen3.5 model that computes the same function.

Why: prompt lookup's gain depends on two things, how often the model copies (a property
of a trained model) and what a verify step costs against a plain one (a property of the
model's size: a large model is memory-bound, a 9M one is not). No trained hybrid large
enough to be memory-bound can be had offline, so this builds one whose predictions are
exactly the trained tiny hybrid's and whose every step reads and computes what a
0.57B-parameter hybrid's does.

How (all in the GGUF, Q8_0 kept as Q8_0):
  * the residual stream widens from 256 to --hidden dimensions; the new dimensions stay
    zero (every tensor that writes the residual has zero rows there) and the old ones are
    multiplied by k = sqrt(hidden / 256): the token embeddings and the output projections
    of attention, DeltaNet and FFN are scaled by k, the RMSNorms' weights divided by it.
    The mean square over the wider vector is then the old one, so every norm gives the
    old values with the same epsilon (scaling the epsilon instead would change the
    per-head norms, where it is not small). hidden is 4^n times 256 (4 by default: k = 2),
    so k is a power of two and every scaling is exact. The output matrix becomes its own
    tensor (output.weight: the old tied embeddings, unscaled); tensors that read a normed
    vector get random columns for the new dimensions (they multiply zeros);
  * DeltaNet layers get more key / value heads, attention layers more query and KV heads
    (same head size, same grouping of query heads onto KV heads), the FFN a wider
    intermediate; the new heads and units have random weights and zero columns in the
    output projections, so they run (a real recurrent state, real KV) and add nothing;
  * layers are appended up to --layers, in the same 3:1 pattern, with random weights and
    zero output projections: each adds exactly zero to the residual.
  Random weights have the standard deviation of the tensor they extend, so activations
  stay in range. The token vocabulary (8,192) is the tiny model's.

With --eddy, `eddy logits` runs both files on 48 random tokens and the largest difference is
printed: 0 (bit for bit) with the defaults. 29% of the weights are zeros; a step still
reads them (decode runs no faster per byte than on the randomly filled 0.57B benchmark
file, bench/RESULTS.md).

Usage: python3 scripts/widen_hybrid.py tests/data/models/tiny-hybrid-q8_0.gguf OUT.gguf
           [--hidden 1024] [--layers 24] [--ff 3584] [--gdn-heads 32] [--heads 16]
           [--kv-heads 8] [--eddy build/eddy]
(needs numpy and llama.cpp's gguf-py; LLAMA_CPP=/path/to/llama.cpp if gguf is not installed)
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import gguf
except ImportError:
    sys.path.insert(0, os.path.join(os.environ.get("LLAMA_CPP", ""), "gguf-py"))
    import gguf

Q8_0 = gguf.GGMLQuantizationType.Q8_0
F32 = gguf.GGMLQuantizationType.F32


def load(reader):
    """name -> (float32 array [rows][n_in] as numpy sees GGUF data, type)"""
    out = {}
    for t in reader.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        out[t.name] = (a.reshape([int(d) for d in reversed(t.shape)]), t.tensor_type)
    return out


class Rand:
    """seeded random weights with the standard deviation of the tensor they extend"""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def rand(self, shape, like):
        std = float(np.std(like)) or 0.02
        return (self.rng.standard_normal(shape) * std).astype(np.float32)


def heads_rows(a, n_old, n_new, per, w, keep):
    """rows grouped as n heads of `per` rows: the old heads first (when kept), new heads random"""
    out = w.rand((n_new * per,) + a.shape[1:], a)
    if keep:
        out[: n_old * per] = a
    return out


def widen_cols(a, E_new, w, zero):
    """columns = residual dimensions: old columns kept, new ones random (they read zeros)"""
    out = np.zeros((a.shape[0], E_new), np.float32) if zero else w.rand((a.shape[0], E_new), a)
    out[:, : a.shape[1]] = a
    return out


def out_proj(a, E_new, cols_new, scale, keep):
    """an output projection [E_new][cols_new]: the old one times scale in the corner (when
    kept), zeros elsewhere: new dimensions get nothing, new heads or units give nothing"""
    out = np.zeros((E_new, cols_new), np.float32)
    if keep:
        out[: a.shape[0], : a.shape[1]] = a * scale
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--ff", type=int, default=3584)
    p.add_argument("--gdn-heads", type=int, default=32)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--seed", type=int, default=57)
    p.add_argument("--eddy", help="an eddy binary: compare the two models' logits")
    args = p.parse_args()

    r = gguf.GGUFReader(args.src)
    arch = r.fields["general.architecture"].contents()
    assert arch == "qwen35", "a qwen35 model is expected"
    f = lambda k: r.fields[f"{arch}.{k}"].contents()  # noqa: E731
    L, E, FF = f("block_count"), f("embedding_length"), f("feed_forward_length")
    H, KV, hd = f("attention.head_count"), f("attention.head_count_kv"), f("attention.key_length")
    nk, nv, dk = f("ssm.group_count"), f("ssm.time_step_rank"), f("ssm.state_size")
    dv = f("ssm.inner_size") // nv
    flags = list(f("attention.recurrent_layers"))
    E2, L2, FF2, G2, H2, KV2 = args.hidden, args.layers, args.ff, args.gdn_heads, args.heads, args.kv_heads
    assert E2 >= E and L2 >= L and FF2 >= FF and G2 >= max(nk, nv) and nk == nv
    assert H2 >= H and KV2 >= KV and H2 // KV2 == H // KV, "keep the query heads per KV head"
    assert E2 % E == 0 and (E2 // E) in (1, 4, 16, 64), "hidden: 1, 4, 16 or 64 times the model's (exact scaling)"
    assert FF2 % 32 == 0
    interval = f("full_attention_interval")
    flags2 = flags + [(i + 1) % interval != 0 for i in range(L, L2)]
    kr = np.float32(np.sqrt(E2 / E))  # the residual stream's scale

    src = load(r)
    w = Rand(args.seed)
    out = {}

    def put(name, a, qtype):
        out[name] = (a.astype(np.float32), qtype)

    emb, emb_t = src["token_embd.weight"]
    put("token_embd.weight", widen_cols(emb * kr, E2, w, zero=True), emb_t)
    assert "output.weight" not in src, "a model with tied embeddings is expected"
    put("output.weight", widen_cols(emb, E2, w, zero=True), emb_t)
    on = src["output_norm.weight"][0]
    put("output_norm.weight", np.concatenate([on / kr, np.ones(E2 - E, np.float32)]), F32)

    for il in range(L2):
        keep = il < L
        base = il if keep else next(j for j in range(L) if flags[j] == flags2[il])  # a layer of the same kind
        s = lambda k: src[f"blk.{base}.{k}"]  # noqa: E731
        d = lambda k, a, t: put(f"blk.{il}.{k}", a, t)  # noqa: E731
        for k in ("attn_norm.weight", "post_attention_norm.weight"):
            d(k, np.concatenate([s(k)[0] / kr, np.ones(E2 - E, np.float32)]), F32)
        # FFN: wider intermediate; down has zero columns for new units, zero rows for new dims
        for k in ("ffn_gate.weight", "ffn_up.weight"):
            a, t = s(k)
            d(k, widen_cols(heads_rows(a, FF, FF2, 1, w, keep), E2, w, zero=False), t)
        a, t = s("ffn_down.weight")
        d("ffn_down.weight", out_proj(a, E2, FF2, kr, keep), t)
        if flags2[il]:
            def qkv_rows(a):  # q, k (nk heads of dk) and v (nv heads of dv), each grown to G2 heads
                q, k_, v = a[: nk * dk], a[nk * dk: 2 * nk * dk], a[2 * nk * dk:]
                return np.concatenate([heads_rows(q, nk, G2, dk, w, keep), heads_rows(k_, nk, G2, dk, w, keep),
                                       heads_rows(v, nv, G2, dv, w, keep)])
            a, t = s("attn_qkv.weight")
            d("attn_qkv.weight", widen_cols(qkv_rows(a), E2, w, zero=False), t)
            conv, ct = s("ssm_conv1d.weight")  # [channels][kernel], channels as attn_qkv's rows
            d("ssm_conv1d.weight", qkv_rows(conv), ct)
            a, t = s("attn_gate.weight")
            d("attn_gate.weight", widen_cols(heads_rows(a, nv, G2, dv, w, keep), E2, w, zero=False), t)
            for k in ("ssm_alpha.weight", "ssm_beta.weight"):
                a, t = s(k)
                d(k, widen_cols(heads_rows(a, nv, G2, 1, w, keep), E2, w, zero=False), t)
            for k in ("ssm_a", "ssm_dt.bias"):  # per value head: new heads repeat the old ones' values
                d(k, np.resize(s(k)[0], G2), F32)
            d("ssm_norm.weight", s("ssm_norm.weight")[0], F32)
            a, t = s("ssm_out.weight")
            d("ssm_out.weight", out_proj(a, E2, G2 * dv, kr, keep), t)
        else:
            a, t = s("attn_q.weight")  # per head: q (hd) then gate (hd)
            d("attn_q.weight", widen_cols(heads_rows(a, H, H2, 2 * hd, w, keep), E2, w, zero=False), t)
            for k in ("attn_k.weight", "attn_v.weight"):
                a, t = s(k)
                d(k, widen_cols(heads_rows(a, KV, KV2, hd, w, keep), E2, w, zero=False), t)
            for k in ("attn_q_norm.weight", "attn_k_norm.weight"):
                d(k, s(k)[0], F32)
            a, t = s("attn_output.weight")
            d("attn_output.weight", out_proj(a, E2, H2 * hd, kr, keep), t)

    changed = {
        "block_count": L2, "embedding_length": E2, "feed_forward_length": FF2, "attention.head_count": H2,
        "attention.head_count_kv": KV2, "ssm.group_count": G2, "ssm.time_step_rank": G2, "ssm.inner_size": G2 * dv,
        "attention.recurrent_layers": flags2,
    }
    wr = gguf.GGUFWriter(args.dst, arch)
    for fl in r.fields.values():
        if fl.name.startswith("GGUF.") or fl.name == "general.architecture":
            continue
        val = fl.contents()
        key = fl.name[len(arch) + 1:] if fl.name.startswith(arch + ".") else None
        if key in changed:
            val = changed[key]
        elif fl.name == "general.size_label":
            val = "widened"
        sub = fl.types[-1] if fl.types[0] == gguf.GGUFValueType.ARRAY else None
        wr.add_key_value(fl.name, val, fl.types[0], sub_type=sub)
    n_params = 0
    for name, (a, t) in out.items():
        n_params += a.size
        if t == Q8_0:
            wr.add_tensor(name, gguf.quants.quantize(a, Q8_0), raw_dtype=Q8_0)
        else:
            assert t in (F32, Q8_0), f"{name}: type {t.name} is not handled"
            wr.add_tensor(name, a)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    print(f"{args.dst}: {n_params / 1e6:.0f}M parameters, {L2} layers, hidden {E2}")

    if args.eddy:
        ids = " ".join(str(i) for i in np.random.default_rng(1).integers(10, 8000, 48))
        with tempfile.TemporaryDirectory() as tmp:
            got = []
            for m in (args.src, args.dst):
                path = os.path.join(tmp, "l.f32")
                subprocess.run([args.eddy, "logits", "-m", m, "--ids", ids, "--out", path, "-ctk", "f32",
                                "-ctv", "f32"], check=True, stdout=subprocess.DEVNULL)
                got.append(np.fromfile(path, np.float32).reshape(48, -1))
        diff = np.abs(got[0] - got[1]).max()
        same = (got[0].argmax(1) == got[1].argmax(1)).mean()
        print(f"logits: largest difference {diff:.2e} (logits up to {np.abs(got[0]).max():.1f}); "
              f"same top token at {same * 100:.0f}% of positions")
        if diff > 1e-2:
            sys.exit("the widened model does not compute the original's function")


if __name__ == "__main__":
    main()
