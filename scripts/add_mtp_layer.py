#!/usr/bin/env python3
"""Copies a Qwen3.5-shaped GGUF adding a multi-token-prediction layer, for timing only.

The benchmark models of scripts/gen_bench_models.py are converted without an MTP layer.
This writes a copy whose layer n_layer is one: the tensors of the main stack's last
attention layer again under the new index (the MTP layer of Qwen3.5 has the same
shapes), plus blk.N.nextn.eh_proj (random, 2*n_embd -> n_embd, in that layer's q type;
Q8_0 or F32 inputs only) and the enorm / hnorm / shared_head_norm vectors (ones), with
block_count + 1 and nextn_predict_layers = 1. The weights are random: the layer's
drafts are gibberish, but one step of it costs what a real one does
(`eddy bench -m OUT --verify 4` reports it).

Usage: python3 scripts/add_mtp_layer.py IN.gguf OUT.gguf   (needs llama.cpp's gguf-py, numpy;
LLAMA_CPP=/path/to/llama.cpp if gguf is not installed)
"""
import os
import sys

import numpy as np

try:
    import gguf
except ImportError:
    sys.path.insert(0, os.path.join(os.environ.get("LLAMA_CPP", ""), "gguf-py"))
    import gguf


def main():
    src, dst = sys.argv[1:3]
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    n_layer = r.fields[f"{arch}.block_count"].contents()
    E = r.fields[f"{arch}.embedding_length"].contents()
    rec = r.fields.get(f"{arch}.attention.recurrent_layers")
    flags = list(rec.contents()) if rec else [(i + 1) % 4 != 0 for i in range(n_layer)]
    last_attn = max(i for i in range(n_layer) if not flags[i])
    w = gguf.GGUFWriter(dst, arch)
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        val = f.contents()
        if f.name == f"{arch}.block_count":
            val = n_layer + 1
        elif f.name == f"{arch}.attention.recurrent_layers":
            val = flags + [False]
        sub = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(f.name, val, f.types[0], sub_type=sub)
    w.add_uint32(f"{arch}.nextn_predict_layers", 1)
    q_type = None
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
        prefix = f"blk.{last_attn}."
        if t.name.startswith(prefix):
            w.add_tensor(f"blk.{n_layer}." + t.name[len(prefix):], t.data, raw_dtype=t.tensor_type)
            if t.name.endswith("attn_q.weight"):
                q_type = t.tensor_type
    rng = np.random.default_rng(24)
    eh = (rng.standard_normal((E, 2 * E)) * 0.02).astype(np.float32)
    if q_type == gguf.GGMLQuantizationType.Q8_0:
        w.add_tensor(f"blk.{n_layer}.nextn.eh_proj.weight", gguf.quants.quantize(eh, q_type), raw_dtype=q_type)
    else:
        w.add_tensor(f"blk.{n_layer}.nextn.eh_proj.weight", eh)
    for name in ("enorm", "hnorm", "shared_head_norm"):
        w.add_tensor(f"blk.{n_layer}.nextn.{name}.weight", np.ones(E, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
