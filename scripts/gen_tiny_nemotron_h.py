#!/usr/bin/env python3
"""Makes the tiny Nemotron-H test model and its reference logits.

A random NemotronHForCausalLM (float32, seeded; hidden 64; 6 layers in the pattern
"M*M-M*": Mamba-2 (8 heads of 16, d_state 16, 2 groups, conv 4 with bias), attention
(4 heads / 2 KV heads of 16, no rotary embedding), Mamba-2, squared-ReLU MLP (128),
Mamba-2, attention; untied output) with the real Qwen3 tokenizer from
../shared/data/tokenizers/qwen3, converted by llama.cpp's convert_hf_to_gguf.py to F32,
the vocabulary cut to its first 1024 rows (gen_tiny_qwen.shrink_vocab), quantized to
Q8_0 by llama-quantize; transformers' float32 logits (first 1024 columns) for 100
fixed ids, and llama.cpp's last-token logits on the Q8_0 file for a few prompts.

transformers 5.x writes every MoE default into config.json, and the converter takes
the mere presence of num_experts_per_tok for "nemotron_h_moe"; real dense Nemotron-H
configs lack those keys, so they are dropped from the saved config, and the converter
is made to read config.json as it is (its AutoConfig round trip would add them back).

Outputs (tests/data/models/): nemotron_h-tiny-f32.gguf, nemotron_h-tiny-q8_0.gguf,
nemotron_h-tiny.logits.f32 ([100][1024]), nemotron_h-tiny-q8_0.llamacpp (per prompt:
i32 n, i32 ids[n], f32 logits[1024]), nemotron_h-tiny.README.md; ids: qwen-tiny.ids.

Usage: LLAMA_CPP=... LLAMA_BIN=... python3 scripts/gen_tiny_nemotron_h.py
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
from gen_tiny_qwen import IDS, KEEP, LLAMA_BIN, LLAMA_CPP, OUT, QWEN_IDS, TOK, llamacpp_logits, shrink_vocab  # noqa

PATTERN = "M*M-M*"
KIND = {"M": "mamba", "*": "attention", "-": "mlp"}
MOE_KEYS = ("num_experts_per_tok", "n_routed_experts", "n_shared_experts", "moe_intermediate_size",
            "moe_shared_expert_intermediate_size", "moe_latent_size", "moe_shared_expert_overlap",
            "routed_scaling_factor", "n_group", "topk_group", "norm_topk_prob", "num_nextn_predict_layers",
            "mtp_layers_block_type", "output_router_logits")

# Runs the converter with its config loader reading config.json unchanged.
CONVERT = """
import runpy, sys
sys.path.insert(0, sys.argv[1])
import conversion.base as base
class RawConfigOnly:
    @staticmethod
    def from_pretrained(*a, **k):
        raise RuntimeError("read config.json as written")
base.AutoConfig = RawConfigOnly
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def build(hf):
    cfg = T.NemotronHConfig(
        vocab_size=151936, hidden_size=64, layers_block_type=[KIND[c] for c in PATTERN], num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=4096, intermediate_size=128,
        mlp_hidden_act="relu2", ssm_state_size=16, mamba_num_heads=8, mamba_head_dim=16, n_groups=2, conv_kernel=4,
        expand=2, chunk_size=16, use_mamba_kernels=False, tie_word_embeddings=False, layer_norm_epsilon=1e-5,
        **QWEN_IDS)
    torch.manual_seed(40)
    model = T.NemotronHForCausalLM(cfg).to(torch.float32).eval()
    g = torch.Generator().manual_seed(41)
    with torch.no_grad():  # move 1-D parameters off their init values so each one is exercised
        for _, p in model.named_parameters():
            if p.ndim == 1:
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
    model.save_pretrained(hf, safe_serialization=True)
    path = os.path.join(hf, "config.json")
    with open(path) as f:
        raw = json.load(f)
    for k in MOE_KEYS:
        raw.pop(k, None)
    raw["hybrid_override_pattern"] = PATTERN
    with open(path, "w") as f:
        json.dump(raw, f, indent=2)
    T.AutoTokenizer.from_pretrained(TOK).save_pretrained(hf)
    return model


def main():
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        model = build(hf)
        full = os.path.join(tmp, "full.gguf")
        r = subprocess.run([sys.executable, "-c", CONVERT, LLAMA_CPP, hf, "--outtype", "f32", "--outfile", full],
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit("convert_hf_to_gguf.py failed:\n" + r.stderr[-3000:])
        f32 = os.path.join(OUT, "nemotron_h-tiny-f32.gguf")
        q8 = os.path.join(OUT, "nemotron_h-tiny-q8_0.gguf")
        shrink_vocab(full, f32)
        subprocess.run([os.path.join(LLAMA_BIN, "llama-quantize"), f32, q8, "Q8_0"], check=True, capture_output=True)
        llamacpp_logits(q8, q8[:-5] + ".llamacpp")
        with torch.no_grad():
            logits = model(torch.tensor([IDS])).logits[0, :, :KEEP].numpy().astype("<f4")
        logits.tofile(os.path.join(OUT, "nemotron_h-tiny.logits.f32"))
    from importlib.metadata import version
    with open(os.path.join(OUT, "nemotron_h-tiny.README.md"), "w") as f:
        f.write("# nemotron_h-tiny\n\nMade by `scripts/gen_tiny_nemotron_h.py`: a random NemotronHForCausalLM (hidden "
                f"64, layers \"{PATTERN}\": Mamba-2 with 8 heads of 16, d_state 16, 2 groups, conv 4 with bias; "
                "attention with 4 heads / 2 KV heads of 16, no rotary embedding; a squared-ReLU MLP of 128; untied "
                "output) converted by llama.cpp's `convert_hf_to_gguf.py` (F32), vocabulary cut to the first 1024 "
                "rows, quantized to Q8_0 by `llama-quantize`. `nemotron_h-tiny.logits.f32` holds transformers' "
                "float32 logits (first 1024 columns) for the ids in `qwen-tiny.ids` ([100][1024]); "
                "`nemotron_h-tiny-q8_0.llamacpp` llama.cpp's (llama-debug) last-token logits for six prompts, as "
                "records of i32 n, i32 ids[n], f32 logits[1024].\n\n"
                f"torch {torch.__version__}, transformers {T.__version__}, gguf {version('gguf')}\n")


if __name__ == "__main__":
    main()
