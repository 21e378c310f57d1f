#!/usr/bin/env python3
"""Makes the tiny Granite 4 hybrid test models and their reference logits.

Two random GraniteMoeHybridForCausalLM (float32, seeded; hidden 64; layers
mamba, attention, mamba, attention; Mamba-2 with 8 heads of 16, d_state 16, 2 groups;
attention with 4 heads / 2 KV heads of 16 and no position encoding, as the released
hybrids; Granite's multipliers set away from 1: embedding 12, residual 0.22,
attention 1/128, logits 1/6; tied embeddings) with the Qwen3 tokenizer:
  granitehybrid: a mixture of 4 experts of 32 (top 2) plus a shared expert of 48;
  granitehybrid-dense: no experts, one SwiGLU MLP of 48 (the shared MLP).
Each is converted by llama.cpp's convert_hf_to_gguf.py to F32, the vocabulary cut to
its first 1024 rows (gen_tiny_qwen.shrink_vocab); the MoE one is also quantized to
Q8_0, with llama.cpp's last-token logits for six prompts.

transformers 5.x renames layer_types to linear_attention/full_attention, which the
converter does not know; config.json is written back with the names released models
use (mamba/attention) and the converter reads it unchanged (see gen_tiny_nemotron_h).

Outputs (tests/data/models/): granitehybrid-tiny-{f32,q8_0}.gguf,
granitehybrid-dense-tiny-f32.gguf, granitehybrid-tiny.logits.f32,
granitehybrid-dense-tiny.logits.f32 ([100][1024] for qwen-tiny.ids),
granitehybrid-tiny-q8_0.llamacpp, granitehybrid-tiny.README.md.

Usage: LLAMA_CPP=... LLAMA_BIN=... python3 scripts/gen_tiny_granite.py
"""
import json
import os
import subprocess
import sys
import tempfile

sys.modules["fla"] = None  # transformers would use fla's GPU kernels when it is installed
import torch
import transformers as T

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_tiny_nemotron_h import CONVERT  # noqa: E402
from gen_tiny_qwen import IDS, KEEP, LLAMA_BIN, LLAMA_CPP, OUT, QWEN_IDS, TOK, llamacpp_logits, shrink_vocab  # noqa

LAYERS = ["mamba", "attention", "mamba", "attention"]


def build(hf, experts, ff, seed):
    cfg = T.GraniteMoeHybridConfig(
        vocab_size=151936, hidden_size=64, intermediate_size=ff, num_hidden_layers=len(LAYERS), layer_types=LAYERS,
        num_attention_heads=4, num_key_value_heads=2, mamba_n_heads=8, mamba_d_head=16, mamba_d_state=16,
        mamba_n_groups=2, mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=16, num_local_experts=experts,
        num_experts_per_tok=2, shared_intermediate_size=48, position_embedding_type="nope", embedding_multiplier=12.0,
        residual_multiplier=0.22, attention_multiplier=1 / 128, logits_scaling=6.0, rms_norm_eps=1e-5,
        tie_word_embeddings=True, **QWEN_IDS)
    torch.manual_seed(seed)
    model = T.GraniteMoeHybridForCausalLM(cfg).to(torch.float32).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():  # move 1-D parameters off their init values so each one is exercised
        for _, p in model.named_parameters():
            if p.ndim == 1:
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
    model.save_pretrained(hf, safe_serialization=True)
    path = os.path.join(hf, "config.json")
    with open(path) as f:
        raw = json.load(f)
    raw["layer_types"] = LAYERS
    with open(path, "w") as f:
        json.dump(raw, f, indent=2)
    T.AutoTokenizer.from_pretrained(TOK).save_pretrained(hf)
    return model


def make(name, experts, ff, seed, quantize):
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        model = build(hf, experts, ff, seed)
        full = os.path.join(tmp, "full.gguf")
        r = subprocess.run([sys.executable, "-c", CONVERT, LLAMA_CPP, hf, "--outtype", "f32", "--outfile", full],
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit("convert_hf_to_gguf.py failed:\n" + r.stderr[-3000:])
        f32 = os.path.join(OUT, f"{name}-tiny-f32.gguf")
        shrink_vocab(full, f32)
        if quantize:
            q8 = os.path.join(OUT, f"{name}-tiny-q8_0.gguf")
            subprocess.run([os.path.join(LLAMA_BIN, "llama-quantize"), f32, q8, "Q8_0"], check=True,
                           capture_output=True)
            llamacpp_logits(q8, q8[:-5] + ".llamacpp")
        with torch.no_grad():
            logits = model(torch.tensor([IDS])).logits[0, :, :KEEP].numpy().astype("<f4")
        logits.tofile(os.path.join(OUT, f"{name}-tiny.logits.f32"))


def main():
    torch.set_num_threads(2)
    make("granitehybrid", 4, 32, 50, True)
    make("granitehybrid-dense", 0, 48, 52, False)
    from importlib.metadata import version
    with open(os.path.join(OUT, "granitehybrid-tiny.README.md"), "w") as f:
        f.write("# granitehybrid-tiny, granitehybrid-dense-tiny\n\nMade by `scripts/gen_tiny_granite.py`: random "
                "GraniteMoeHybridForCausalLM models (hidden 64; layers mamba, attention, mamba, attention; Mamba-2 with "
                "8 heads of 16, d_state 16, 2 groups; attention with 4 heads / 2 KV heads of 16, no position encoding; "
                "multipliers embedding 12, residual 0.22, attention 1/128, logits 1/6; tied embeddings). "
                "`granitehybrid`: 4 experts of 32, top 2, shared expert of 48; `granitehybrid-dense`: one SwiGLU MLP "
                "of 48. Converted by llama.cpp's `convert_hf_to_gguf.py` (F32), vocabulary cut to the first 1024 "
                "rows; the MoE one quantized to Q8_0 by `llama-quantize`. `<name>-tiny.logits.f32`: transformers' "
                "float32 logits (first 1024 columns) for `qwen-tiny.ids` ([100][1024]); "
                "`granitehybrid-tiny-q8_0.llamacpp`: llama.cpp's (llama-debug) last-token logits for six prompts "
                "(records of i32 n, i32 ids[n], f32 logits[1024]).\n\n"
                f"torch {torch.__version__}, transformers {T.__version__}, gguf {version('gguf')}\n")


if __name__ == "__main__":
    main()
