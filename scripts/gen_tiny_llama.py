#!/usr/bin/env python3
"""Makes the tiny Llama test model and its reference logits.

1. Trains a 512-piece SentencePiece BPE vocabulary on moby-dick.txt (deterministic).
2. Builds a random LlamaForCausalLM (float32, seeded; hidden 64, 2 layers, 4 heads,
   2 KV heads, FFN 128, untied output) with Hugging Face transformers.
3. Converts it with llama.cpp's convert_hf_to_gguf.py to F32, and quantizes that to
   Q8_0 with llama-quantize.
4. Runs transformers on fixed token ids and writes the logits.

Outputs (tests/data/models/):
  llama-tiny-f32.gguf, llama-tiny-q8_0.gguf
  llama-tiny.ids            the token ids, one line
  llama-tiny.logits.f32     transformers' float32 logits [n_ids][n_vocab]
  llama-tiny-q8_0.logits.f32  transformers' logits with the Q8_0 file's dequantized weights
  llama-tiny.README.md      versions and settings

Usage: LLAMA_CPP=/path/to/llama.cpp LLAMA_BIN=/path/to/build/bin python3 scripts/gen_tiny_llama.py
Needs torch, transformers, sentencepiece, gguf, numpy.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers as T

OUT = "tests/data/models"
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../shared/data/corpus/moby-dick.txt")
LLAMA_CPP = os.environ.get("LLAMA_CPP", "/root/peers/llama_cpp_python-0.3.36/vendor/llama.cpp")
LLAMA_BIN = os.environ.get("LLAMA_BIN", "/root/peers/llama.cpp-build/bin")
IDS = [1, 7, 300, 45, 2, 511, 100, 12, 64, 399, 250, 3, 3, 3, 480, 17, 9, 128, 256, 33] * 6  # 120 ids


def train_vocab(d):
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(
        input=CORPUS, model_prefix=os.path.join(d, "tokenizer"), vocab_size=512, model_type="bpe",
        character_coverage=1.0, byte_fallback=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        num_threads=1, input_sentence_size=0, shuffle_input_sentence=False, split_digits=True,
        remove_extra_whitespaces=False, normalization_rule_name="identity")
    return os.path.join(d, "tokenizer.model")


def build_model(d, vocab):
    cfg = T.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-5,
                        max_position_embeddings=2048, tie_word_embeddings=False,
                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                        bos_token_id=1, eos_token_id=2)
    torch.manual_seed(20261130)
    model = T.LlamaForCausalLM(cfg).to(torch.float32).eval()
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():  # norms away from exactly 1 so their handling is tested
        for _, p in model.named_parameters():
            if p.ndim == 1:
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
    model.save_pretrained(d, safe_serialization=True)
    tok = T.LlamaTokenizer(vocab_file=vocab, add_bos_token=True, add_eos_token=False, legacy=False)
    tok.save_pretrained(d)
    shutil.copy(vocab, os.path.join(d, "tokenizer.model"))
    return model


def logits(model):
    with torch.no_grad():
        return model(torch.tensor([IDS])).logits[0].numpy().astype("<f4")


def unpermute(w, n_head):
    """Undo the converter's q/k row permutation (rotary pairs: halves -> adjacent)."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def load_dequantized(model, path):
    """Copies the GGUF file's dequantized weights into the transformers model."""
    import gguf
    from gguf.quants import dequantize
    r = gguf.GGUFReader(path)
    t = {x.name: dequantize(x.data, x.tensor_type).astype(np.float32) for x in r.tensors}
    sd = {"model.embed_tokens.weight": t["token_embd.weight"], "model.norm.weight": t["output_norm.weight"],
          "lm_head.weight": t["output.weight"]}
    for i in range(model.config.num_hidden_layers):
        p = f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = t[f"blk.{i}.attn_norm.weight"]
        sd[p + "post_attention_layernorm.weight"] = t[f"blk.{i}.ffn_norm.weight"]
        sd[p + "self_attn.q_proj.weight"] = unpermute(t[f"blk.{i}.attn_q.weight"], 4)
        sd[p + "self_attn.k_proj.weight"] = unpermute(t[f"blk.{i}.attn_k.weight"], 2)
        sd[p + "self_attn.v_proj.weight"] = t[f"blk.{i}.attn_v.weight"]
        sd[p + "self_attn.o_proj.weight"] = t[f"blk.{i}.attn_output.weight"]
        sd[p + "mlp.gate_proj.weight"] = t[f"blk.{i}.ffn_gate.weight"]
        sd[p + "mlp.up_proj.weight"] = t[f"blk.{i}.ffn_up.weight"]
        sd[p + "mlp.down_proj.weight"] = t[f"blk.{i}.ffn_down.weight"]
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in sd.items()})


def main():
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        os.makedirs(hf)
        model = build_model(hf, train_vocab(tmp))
        f32 = os.path.join(OUT, "llama-tiny-f32.gguf")
        q8 = os.path.join(OUT, "llama-tiny-q8_0.gguf")
        subprocess.run([sys.executable, os.path.join(LLAMA_CPP, "convert_hf_to_gguf.py"), hf, "--outtype", "f32",
                        "--outfile", f32], check=True, capture_output=True)
        subprocess.run([os.path.join(LLAMA_BIN, "llama-quantize"), f32, q8, "Q8_0"], check=True,
                       capture_output=True)
        with open(os.path.join(OUT, "llama-tiny.ids"), "w") as f:
            f.write(" ".join(map(str, IDS)) + "\n")
        logits(model).tofile(os.path.join(OUT, "llama-tiny.logits.f32"))
        load_dequantized(model, q8)
        logits(model).tofile(os.path.join(OUT, "llama-tiny-q8_0.logits.f32"))
    from importlib.metadata import version
    with open(os.path.join(OUT, "llama-tiny.README.md"), "w") as f:
        f.write("# llama-tiny\n\nMade by `scripts/gen_tiny_llama.py`: a random LlamaForCausalLM (hidden 64, 2 layers,\n"
                "4 heads, 2 KV heads, head_dim 16, FFN 128, vocab 512, untied) converted by llama.cpp's\n"
                "`convert_hf_to_gguf.py` (F32) and `llama-quantize` (Q8_0). The `.logits.f32` files are\n"
                "transformers' float32 logits for the ids in `llama-tiny.ids` ([120][512]); the Q8_0 ones use the\n"
                "Q8_0 file's dequantized weights.\n\n"
                f"torch {torch.__version__}, transformers {T.__version__}, gguf {version('gguf')}, "
                f"sentencepiece {version('sentencepiece')}\n")


if __name__ == "__main__":
    main()
