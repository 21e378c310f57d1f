#!/usr/bin/env python3
"""Makes the tiny Mamba-2 test model and its reference logits.

A random Mamba2ForCausalLM (float32, seeded; hidden 64, d_inner 128 as 8 heads of 16,
d_state 16, 2 groups, conv 4 with bias, 2 layers, tied embeddings) with the 512-piece
SentencePiece vocabulary of gen_tiny_llama.py, converted by llama.cpp's
convert_hf_to_gguf.py to F32 and quantized to Q8_0 by llama-quantize; transformers'
float32 logits for 100 fixed ids.

Outputs (tests/data/models/): mamba2-tiny-f32.gguf, mamba2-tiny-q8_0.gguf,
mamba2-tiny.ids, mamba2-tiny.logits.f32 ([100][512]), mamba2-tiny.README.md.

Usage: LLAMA_CPP=... LLAMA_BIN=... python3 scripts/gen_tiny_mamba2.py
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.modules["fla"] = None  # transformers would use fla's GPU kernels when it is installed
import numpy as np
import torch
import transformers as T

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_tiny_llama import LLAMA_BIN, LLAMA_CPP, OUT, train_vocab  # noqa: E402

IDS = [int(x) for x in np.random.default_rng(2).integers(3, 512, size=100)]


def main():
    torch.set_num_threads(2)
    cfg = T.Mamba2Config(vocab_size=512, hidden_size=64, expand=2, num_heads=8, head_dim=16, state_size=16,
                         n_groups=2, num_hidden_layers=2, conv_kernel=4, layer_norm_epsilon=1e-5,
                         tie_word_embeddings=True, chunk_size=16, use_bias=False, use_conv_bias=True,
                         bos_token_id=1, eos_token_id=2, pad_token_id=0)
    with tempfile.TemporaryDirectory() as tmp:
        vocab = train_vocab(tmp)
        hf = os.path.join(tmp, "hf")
        torch.manual_seed(22)
        model = T.Mamba2ForCausalLM(cfg).to(torch.float32).eval()
        g = torch.Generator().manual_seed(23)
        with torch.no_grad():
            for _, p in model.named_parameters():
                if p.ndim == 1:
                    p.add_(torch.randn(p.shape, generator=g) * 0.1)
        model.save_pretrained(hf, safe_serialization=True)
        tok = T.LlamaTokenizer(vocab_file=vocab, add_bos_token=True, add_eos_token=False, legacy=False)
        tok.save_pretrained(hf)
        shutil.copy(vocab, os.path.join(hf, "tokenizer.model"))  # the converter reads the SentencePiece model
        f32 = os.path.join(OUT, "mamba2-tiny-f32.gguf")
        q8 = os.path.join(OUT, "mamba2-tiny-q8_0.gguf")
        r = subprocess.run([sys.executable, os.path.join(LLAMA_CPP, "convert_hf_to_gguf.py"), hf, "--outtype", "f32",
                            "--outfile", f32], capture_output=True, text=True)
        if r.returncode:
            sys.exit("convert_hf_to_gguf.py failed:\n" + r.stderr[-3000:])
        subprocess.run([os.path.join(LLAMA_BIN, "llama-quantize"), f32, q8, "Q8_0"], check=True, capture_output=True)
        with torch.no_grad():
            logits = model(torch.tensor([IDS])).logits[0].numpy().astype("<f4")
        logits.tofile(os.path.join(OUT, "mamba2-tiny.logits.f32"))
    with open(os.path.join(OUT, "mamba2-tiny.ids"), "w") as f:
        f.write(" ".join(map(str, IDS)) + "\n")
    from importlib.metadata import version
    with open(os.path.join(OUT, "mamba2-tiny.README.md"), "w") as f:
        f.write("# mamba2-tiny\n\nMade by `scripts/gen_tiny_mamba2.py`: a random Mamba2ForCausalLM (hidden 64, "
                "d_inner 128 = 8 heads of 16, d_state 16, 2 groups, conv 4 with bias, 2 layers, tied embeddings, "
                "vocab 512) converted by llama.cpp's `convert_hf_to_gguf.py` (F32) and `llama-quantize` (Q8_0); "
                "`mamba2-tiny.logits.f32` holds transformers' float32 logits for `mamba2-tiny.ids` ([100][512]).\n\n"
                f"torch {torch.__version__}, transformers {T.__version__}, gguf {version('gguf')}\n")


if __name__ == "__main__":
    main()
