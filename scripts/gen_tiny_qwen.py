#!/usr/bin/env python3
"""Makes the tiny Gated DeltaNet hybrid test models and their reference logits.

For each of qwen35 (Qwen3.5 dense), qwen35moe (Qwen3.5 MoE) and qwen3next (Qwen3-Next):
1. builds a random float32 model with transformers (hidden 64, 4 layers: 3 Gated
   DeltaNet + 1 gated attention, 2 key heads / 4 value heads so the head mapping
   matters, MoE with 8 experts, top-2, and a shared expert), with the real Qwen3
   tokenizer from ../shared/data/tokenizers/qwen3;
2. converts it with llama.cpp's convert_hf_to_gguf.py to F32;
3. keeps only the first 1024 rows of the vocabulary (token_embd, output, the tokenizer
   arrays, merges among the kept tokens), so the files stay small — every other
   tensor is the converter's output unchanged;
4. quantizes that to Q8_0 and Q4_K_M with llama-quantize (rows of 64 are too short for
   K-quants, so llama-quantize picks its fallback types for some tensors);
5. runs transformers on fixed ids (< 1024) and stores logits[:, :1024], and a greedy
   64-token continuation of the first 20 ids (restricted to the kept vocabulary);
6. runs llama.cpp (llama-debug) on the quantized files for a few prompts and stores the
   token ids and llama.cpp's last-token logits.

Outputs in tests/data/models/: <arch>-tiny-{f32,q8_0,q4_k_m}.gguf,
<arch>-tiny.logits.f32 ([n_ids][1024]), <arch>-tiny.greedy (64 ids),
<arch>-tiny-{q8_0,q4_k_m}.llamacpp (per prompt: i32 n, i32 ids[n], f32 logits[1024]);
qwen-tiny.ids; qwen-tiny.README.md.

Usage: LLAMA_CPP=/path/to/llama.cpp LLAMA_BIN=/path/to/bin python3 scripts/gen_tiny_qwen.py
Needs torch, transformers, gguf (llama.cpp's gguf-py), numpy.
"""
import importlib
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers as T

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "../tests/data/models")
TOK = os.path.join(HERE, "../../shared/data/tokenizers/qwen3")
LLAMA_CPP = os.environ.get("LLAMA_CPP", "/root/peers/llama_cpp_python-0.3.36/vendor/llama.cpp")
LLAMA_BIN = os.environ.get("LLAMA_BIN", "/root/peers/llama.cpp-build/bin")
KEEP = 1024
IDS = [int(x) for x in np.random.default_rng(35).integers(0, KEEP, size=100)]
QWEN_IDS = dict(bos_token_id=151643, eos_token_id=151645, pad_token_id=151643)
LINEAR = dict(linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
              linear_num_key_heads=2, linear_num_value_heads=4)
COMMON = dict(vocab_size=151936, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6, max_position_embeddings=4096,
              **LINEAR, **QWEN_IDS)
MOE = dict(moe_intermediate_size=32, shared_expert_intermediate_size=64, num_experts=8, num_experts_per_tok=2)
MROPE = {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
         "mrope_section": [2, 1, 1], "mrope_interleaved": True}


def configs():
    return {
        "qwen35": (T.Qwen3_5ForCausalLM, T.Qwen3_5TextConfig(
            intermediate_size=128, tie_word_embeddings=True, rope_parameters=MROPE, **COMMON)),
        "qwen35moe": (T.Qwen3_5MoeForCausalLM, T.Qwen3_5MoeTextConfig(
            tie_word_embeddings=False, rope_parameters=MROPE, **MOE, **COMMON)),
        "qwen3next": (T.Qwen3NextForCausalLM, T.Qwen3NextConfig(
            intermediate_size=128, tie_word_embeddings=False, decoder_sparse_step=1, norm_topk_prob=True,
            rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25},
            **MOE, **COMMON)),
    }


def use_torch_reference_kernels():
    """transformers swaps in fla's Triton kernels when fla is installed; use its torch ones."""
    for name in ["qwen3_5.modeling_qwen3_5", "qwen3_5_moe.modeling_qwen3_5_moe", "qwen3_next.modeling_qwen3_next"]:
        mod = importlib.import_module("transformers.models." + name)
        for fn in ["torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule"]:
            f = getattr(mod, fn, None)
            while f is not None and hasattr(f, "__wrapped__"):
                f = f.__wrapped__
            if f is not None:
                setattr(mod, fn, f)


def build(arch, d, seed):
    cls, cfg = configs()[arch]
    torch.manual_seed(seed)
    model = cls(cfg).to(torch.float32).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():  # move 1-D parameters off their init values so each one is exercised
        for _, p in model.named_parameters():
            if p.ndim == 1:
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
    model.save_pretrained(d, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOK, f), os.path.join(d, f))
        os.chmod(os.path.join(d, f), 0o644)
    return model


def shrink_vocab(src, dst):
    """Copies src to dst keeping the first KEEP vocabulary rows and tokens."""
    sys.path.insert(0, os.path.join(LLAMA_CPP, "gguf-py"))
    import gguf
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    tokens = r.fields["tokenizer.ggml.tokens"].contents()[:KEEP]
    kept = set(tokens)
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        vtype = f.types[0]
        val = f.contents()
        if f.name == "tokenizer.ggml.tokens":
            val = tokens
        elif f.name == "tokenizer.ggml.token_type":
            val = val[:KEEP]
        elif f.name == "tokenizer.ggml.merges":
            val = [m for m in val if all(p in kept for p in m.split(" ")) and m.replace(" ", "") in kept]
        elif f.name.endswith("_token_id") and val >= KEEP:
            continue
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(f.name, val, vtype, sub_type=sub)
    for t in r.tensors:
        data = np.array(t.data)
        if t.name in ("token_embd.weight", "output.weight"):
            data = data[:KEEP]
        w.add_tensor(t.name, data, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


PROMPTS = ["Hello world, this is a test", "The quick brown fox jumps over the lazy dog. " * 3,
           "1 2 3 4 5 6 7 8 9 10", "def f(x):\n    return x * x\n", "a", "Once upon a time, in a land far away"]


def greedy(model, prompt, n):
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids])).logits[0, -1, :KEEP]
            ids.append(int(torch.argmax(logits)))
    return ids[len(prompt):]


def llamacpp_logits(path, out):
    """Runs llama-debug on each prompt; writes (n, ids, last-token logits) records."""
    with open(out, "wb") as f, tempfile.TemporaryDirectory() as d:
        for prompt in PROMPTS:
            subprocess.run([os.path.join(LLAMA_BIN, "llama-debug"), "-m", path, "-p", prompt, "--save-logits",
                            "--logits-output-dir", d, "-t", "1", "-c", "256"], check=True, capture_output=True)
            base = os.path.join(d, "llamacpp-" + os.path.basename(path)[:-5])
            ids = np.fromfile(base + "-tokens.bin", dtype="<i4")
            logits = np.fromfile(base + ".bin", dtype="<f4")
            assert logits.size == KEEP, logits.size
            f.write(np.int32(ids.size).tobytes() + ids.tobytes() + logits.tobytes())


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(2)
    use_torch_reference_kernels()
    with open(os.path.join(OUT, "qwen-tiny.ids"), "w") as f:
        f.write(" ".join(map(str, IDS)) + "\n")
    for seed, arch in enumerate(["qwen35", "qwen35moe", "qwen3next"], start=350):
        with tempfile.TemporaryDirectory() as tmp:
            hf = os.path.join(tmp, "hf")
            os.makedirs(hf)
            model = build(arch, hf, seed)
            full = os.path.join(tmp, "full.gguf")
            f32 = os.path.join(OUT, f"{arch}-tiny-f32.gguf")
            q8 = os.path.join(OUT, f"{arch}-tiny-q8_0.gguf")
            subprocess.run([sys.executable, os.path.join(LLAMA_CPP, "convert_hf_to_gguf.py"), hf, "--outtype",
                            "f32", "--outfile", full, "--no-mtp"], check=True, capture_output=True)
            shrink_vocab(full, f32)
            q4 = os.path.join(OUT, f"{arch}-tiny-q4_k_m.gguf")
            for dst, qtype in ((q8, "Q8_0"), (q4, "Q4_K_M")):
                subprocess.run([os.path.join(LLAMA_BIN, "llama-quantize"), f32, dst, qtype], check=True,
                               capture_output=True)
                llamacpp_logits(dst, dst[:-5] + ".llamacpp")
            with torch.no_grad():
                logits = model(torch.tensor([IDS])).logits[0, :, :KEEP].numpy().astype("<f4")
            logits.tofile(os.path.join(OUT, f"{arch}-tiny.logits.f32"))
            with open(os.path.join(OUT, f"{arch}-tiny.greedy"), "w") as f:
                f.write(" ".join(map(str, greedy(model, IDS[:20], 64))) + "\n")
            print(arch, "done")
    from importlib.metadata import version
    with open(os.path.join(OUT, "qwen-tiny.README.md"), "w") as f:
        f.write("# qwen35 / qwen35moe / qwen3next tiny models\n\nMade by `scripts/gen_tiny_qwen.py`: random "
                "transformers models (hidden 64; 3 Gated DeltaNet layers with 2 key / 4 value heads of 16, then 1 "
                "gated attention layer with 4 heads / 2 KV heads of 32, partial rotary 8 dims; MoE: 8 experts, "
                "top-2, shared expert), converted by llama.cpp's `convert_hf_to_gguf.py` (F32), vocabulary cut to "
                "the first 1024 rows, quantized to Q8_0 and Q4_K_M by `llama-quantize`. `<arch>-tiny.logits.f32` holds "
                "transformers' float32 logits (first 1024 columns) for the ids in `qwen-tiny.ids` ([100][1024]); "
                "`<arch>-tiny.greedy` transformers' greedy 64-token continuation of the first 20 of those ids; "
                "`<arch>-tiny-<type>.llamacpp` llama.cpp's (llama-debug) last-token logits for six prompts, as "
                "records of i32 n, i32 ids[n], f32 logits[1024].\n\n"
                f"torch {torch.__version__}, transformers {T.__version__}, gguf {version('gguf')}\n")


if __name__ == "__main__":
    main()
