#!/usr/bin/env python3
"""Makes the random benchmark models used for CPU speed comparisons with llama.cpp.

The tiny test models in tests/data/models are too small to say anything about speed:
their matrices fit in cache and per-call overhead dominates. These models have the
shapes of small real ones, so prefill and decode are bound by the same matrix products
and memory traffic as real checkpoints. Their weights are random (seeded): they are for
timing only, their output is gibberish.

Outputs, in --out (default models/bench, which is not tracked by git):

  qwen35-0.57b-f32.gguf, qwen35-0.57b-Q8_0.gguf, qwen35-0.57b-Q4_K_M.gguf,
  qwen35-0.57b-F16.gguf, qwen35-0.57b-BF16.gguf
      A Qwen3.5-shaped dense hybrid (Qwen3_5ForCausalLM), about 0.57B parameters:
      24 layers, full attention every 4th layer (18 Gated DeltaNet + 6 gated attention),
      hidden 1024, MLP 3584, attention 8 heads / 2 KV heads of 256 (partial rotary 64
      dims, interleaved mrope sections 11/11/10), Gated DeltaNet 16 key / 16 value heads
      of 128, conv kernel 4, tied embeddings, vocabulary 65536.

  mamba2-0.2b-Q8_0.gguf
      A Mamba-2 model (Mamba2ForCausalLM), about 0.22B parameters: 24 layers, hidden
      1024, expand 2 (d_inner 2048 = 32 heads of 64), state 128, 1 group, conv 4 with
      bias, tied embeddings, the same 65536-token vocabulary.

Both use the real Qwen3 tokenizer (../shared/data/tokenizers/qwen3, 151k tokens) cut to
its first 65536 tokens: the transformers model is built with the full vocabulary so
llama.cpp's converter accepts the tokenizer, and the GGUF written by the converter is
then rewritten keeping the first 65536 rows of token_embd (and output) and of the
tokenizer arrays, with the merges among the kept tokens. Every other tensor is the
converter's output unchanged. The special tokens (ids >= 151643) are cut, so the models
have no end-of-text token and generation always runs to the requested length.

Steps per model: random init with transformers (float32, seeded) -> save_pretrained
(safetensors + tokenizer) -> convert_hf_to_gguf.py --outtype f32 -> vocabulary cut ->
llama-quantize. Existing outputs are kept unless --force is given. Peak memory is about
one float32 copy of the transformers model (2.6 GB for the qwen35 one, vocabulary
included); temporary files (a few GB) go in a folder inside --out.

Usage:
  LLAMA_CPP=/path/to/llama.cpp LLAMA_BIN=/path/to/llama.cpp/build/bin \\
      python3 scripts/gen_bench_models.py [--out DIR] [--models qwen35 mamba2] [--force]

LLAMA_CPP is a llama.cpp source tree (convert_hf_to_gguf.py, gguf-py); LLAMA_BIN holds
llama-quantize. Needs torch, transformers (with Qwen3.5) and llama.cpp's gguf-py (with numpy).
"""
import argparse
import gc
import os
import shutil
import subprocess
import sys
import tempfile

sys.modules["fla"] = None  # transformers would use fla's GPU kernels when it is installed
import torch  # noqa: E402
import transformers as T  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TOKENIZER = os.path.join(REPO, "../shared/data/tokenizers/qwen3")
LLAMA_CPP = os.environ.get("LLAMA_CPP", "/root/peers/llama_cpp_python-0.3.36/vendor/llama.cpp")
LLAMA_BIN = os.environ.get("LLAMA_BIN", "/root/peers/llama.cpp-build/bin")
sys.path.insert(0, os.path.join(LLAMA_CPP, "gguf-py"))
import gguf  # noqa: E402

VOCAB = 65536        # rows kept in the GGUF files
HF_VOCAB = 151936    # the Qwen3 tokenizer's size, padded as in the real checkpoints
QWEN_IDS = dict(bos_token_id=151643, eos_token_id=151645, pad_token_id=151643)


def qwen35_config():
    return T.Qwen3_5TextConfig(
        vocab_size=HF_VOCAB, hidden_size=1024, intermediate_size=3584, num_hidden_layers=24,
        full_attention_interval=4, num_attention_heads=8, num_key_value_heads=2, head_dim=256,
        linear_num_key_heads=16, linear_num_value_heads=16, linear_key_head_dim=128, linear_value_head_dim=128,
        linear_conv_kernel_dim=4, rms_norm_eps=1e-6, max_position_embeddings=32768, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": [11, 11, 10], "mrope_interleaved": True},
        **QWEN_IDS)


def mamba2_config():
    hidden, expand, head_dim = 1024, 2, 64
    return T.Mamba2Config(
        vocab_size=HF_VOCAB, hidden_size=hidden, expand=expand, head_dim=head_dim,
        num_heads=hidden * expand // head_dim, state_size=128, n_groups=1, num_hidden_layers=24, conv_kernel=4,
        layer_norm_epsilon=1e-5, tie_word_embeddings=True, use_bias=False, use_conv_bias=True, **QWEN_IDS)


# name -> (transformers class, config, size label, outputs as (file suffix, llama-quantize type))
MODELS = {
    "qwen35": (T.Qwen3_5ForCausalLM, qwen35_config, "0.57b", [("f32", None), ("Q8_0", "Q8_0"),
                                                              ("Q4_K_M", "Q4_K_M"), ("F16", "F16"),
                                                              ("BF16", "BF16")]),
    "mamba2": (T.Mamba2ForCausalLM, mamba2_config, "0.2b", [("Q8_0", "Q8_0")]),
}


def save_random_model(cls, cfg, hf_dir, seed):
    """Writes a seeded random float32 model and the Qwen3 tokenizer to hf_dir."""
    torch.manual_seed(seed)
    model = cls(cfg).to(torch.float32).eval()
    n = sum(p.numel() for p in model.parameters())
    model.save_pretrained(hf_dir, safe_serialization=True)
    del model
    gc.collect()
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOKENIZER, f), os.path.join(hf_dir, f))
        os.chmod(os.path.join(hf_dir, f), 0o644)
    return n


def convert(hf_dir, dst, extra_args):
    r = subprocess.run([sys.executable, os.path.join(LLAMA_CPP, "convert_hf_to_gguf.py"), hf_dir, "--outtype", "f32",
                        "--outfile", dst, *extra_args], capture_output=True, text=True)
    if r.returncode:
        sys.exit("convert_hf_to_gguf.py failed:\n" + r.stderr[-3000:])


def n_params(reader):
    return sum(int(t.n_elements) for t in reader.tensors)


def size_label(n):
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


def cut_vocab(src, dst, name):
    """Copies the GGUF src to dst keeping the first VOCAB vocabulary rows and tokens.

    Tensors are passed as views of the memory-mapped source, so nothing is copied into RAM.
    """
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    tokens = r.fields["tokenizer.ggml.tokens"].contents()[:VOCAB]
    kept = set(tokens)
    cut_rows = {"token_embd.weight", "output.weight"}
    params = sum(int(t.n_elements) * VOCAB // int(t.shape[-1]) if t.name in cut_rows else int(t.n_elements)
                 for t in r.tensors)
    w = gguf.GGUFWriter(dst, arch)
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        vtype = f.types[0]
        val = f.contents()
        if f.name == "tokenizer.ggml.tokens":
            val = tokens
        elif f.name == "tokenizer.ggml.token_type":
            val = val[:VOCAB]
        elif f.name == "tokenizer.ggml.merges":
            val = [m for m in val if all(p in kept for p in m.split(" ")) and m.replace(" ", "") in kept]
        elif f.name.endswith("_token_id") and val >= VOCAB:
            continue
        elif f.name == "general.name":
            val = name
        elif f.name == "general.size_label":
            val = size_label(params)
        elif f.name == f"{arch}.vocab_size":
            val = VOCAB
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(f.name, val, vtype, sub_type=sub)
    for t in r.tensors:
        data = t.data
        if t.name in cut_rows:
            data = data[:VOCAB]
        w.add_tensor(t.name, data, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize(src, dst, qtype):
    r = subprocess.run([os.path.join(LLAMA_BIN, "llama-quantize"), src, dst, qtype, "2"], capture_output=True,
                       text=True)
    if r.returncode:
        sys.exit(f"llama-quantize {qtype} failed:\n" + r.stderr[-3000:])


def make(name, out, force, seed):
    cls, config, label, outputs = MODELS[name]
    paths = {suffix: os.path.join(out, f"{name}-{label}-{suffix}.gguf") for suffix, _ in outputs}
    todo = [p for p in paths.values() if force or not os.path.exists(p)]
    if todo:
        with tempfile.TemporaryDirectory(dir=out, prefix=f".{name}-tmp-") as tmp:
            hf = os.path.join(tmp, "hf")
            os.makedirs(hf)
            print(f"{name}: building the random transformers model", flush=True)
            n = save_random_model(cls, config(), hf, seed)
            print(f"{name}: {n / 1e6:.1f}M parameters with the full vocabulary; converting", flush=True)
            full = os.path.join(tmp, "full.gguf")
            convert(hf, full, ["--no-mtp"] if name == "qwen35" else [])
            shutil.rmtree(hf)
            f32 = paths.get("f32", os.path.join(tmp, "f32.gguf"))
            cut_vocab(full, f32 + ".part", f"{name}-{label}-random")
            os.replace(f32 + ".part", f32)
            os.remove(full)
            for suffix, qtype in outputs:
                if qtype is not None and (force or not os.path.exists(paths[suffix])):
                    print(f"{name}: quantizing to {qtype}", flush=True)
                    quantize(f32, paths[suffix] + ".part", qtype)
                    os.replace(paths[suffix] + ".part", paths[suffix])
    for p in paths.values():
        size = os.path.getsize(p)
        print(f"{p}  {size / 2**20:8.1f} MiB  {n_params(gguf.GGUFReader(p)) / 1e6:.1f}M parameters")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "models/bench"), help="output folder (default models/bench)")
    ap.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS), help="which models to make")
    ap.add_argument("--force", action="store_true", help="remake outputs that already exist")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(2)
    for seed, name in enumerate(MODELS, start=57):
        if name in args.models:
            make(name, args.out, args.force, seed)


if __name__ == "__main__":
    main()
