#!/usr/bin/env python3
"""Makes tiny Qwen3.5 models carrying a multi-token-prediction (MTP) layer, and the
reference outputs of that layer.

Qwen3.5 checkpoints hold one MTP layer under `mtp.*` that transformers does not load
(it ignores those weights), so the reference here is assembled from transformers' own
modules: the full-attention decoder layer of the same model class, its RMSNorm, and
a linear `fc`. For a row at MTP index i (i = 0 .. n-2), with h the main model's final
hidden state (after its output norm):
    x = fc([pre_fc_norm_embedding(embed(ids[i+1])); pre_fc_norm_hidden(h[i])])
    y = decoder_layer(x) at rotary position i, causal over the MTP rows
    mtp_logits[i] = lm_head(norm(y))      (predicts ids[i+2])
A chain of drafts goes on from the MTP's own normed output: the row after a draft d
takes (d, norm(y) of the row before). In the dense model (tied embeddings) fc leans
toward copying the token (2 I added to its embedding half), so that its drafts agree
with the random model's repetitions often enough for the speculative tests.

For qwen35 (dense, tied embeddings) and qwen35moe (MoE MTP layer, untied):
1. builds the tiny random model of scripts/gen_tiny_qwen.py (same seeds), adds random
   `mtp.*` weights to its safetensors and `mtp_num_hidden_layers: 1` to its config;
2. converts it with llama.cpp's convert_hf_to_gguf.py (F32, MTP kept: blk.4.nextn.*),
   vocabulary cut to the first 1024 rows as gen_tiny_qwen.py does, and quantizes it
   to Q8_0 with llama-quantize;
3. writes the references: the main model's logits on the first 40 ids of
   qwen-tiny.ids, the MTP logits of rows 0..38 (first 1024 columns), and a chain of
   3 greedy drafts after the first 20 ids with t = ids[20] (the draft ids and each
   draft row's logits).

Outputs in tests/data/models/: <arch>-mtp-tiny-f32.gguf, <arch>-mtp-tiny-q8_0.gguf,
<arch>-mtp-tiny.ref (f32 main[40][1024], f32 mtp[39][1024], i32 drafts[3],
f32 chain[3][1024]).

Usage: LLAMA_CPP=/path/to/llama.cpp LLAMA_BIN=/path/to/bin python3 scripts/gen_tiny_mtp.py
Needs torch, transformers, safetensors, gguf (llama.cpp's gguf-py), numpy.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_tiny_qwen as Q  # noqa: E402

N_MAIN = 40   # ids fed to the main model
PROMPT = 20   # the chain starts after this many ids
N_CHAIN = 3


def layer_classes(arch):
    if arch == "qwen35":
        from transformers.models.qwen3_5 import modeling_qwen3_5 as M
        return M.Qwen3_5DecoderLayer, M.Qwen3_5RMSNorm
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as M
    return M.Qwen3_5MoeDecoderLayer, M.Qwen3_5MoeRMSNorm


def make_mtp(arch, cfg, seed, tied):
    Layer, Norm = layer_classes(arch)
    E, eps = cfg.hidden_size, cfg.rms_norm_eps
    attn_idx = cfg.layer_types.index("full_attention")
    mtp = torch.nn.ModuleDict(dict(
        fc=torch.nn.Linear(2 * E, E, bias=False), pre_fc_norm_embedding=Norm(E, eps=eps),
        pre_fc_norm_hidden=Norm(E, eps=eps), norm=Norm(E, eps=eps),
        layers=torch.nn.ModuleList([Layer(cfg, attn_idx)])))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # modules built outside a model get no init of their own
        for _, p in mtp.named_parameters():
            if p.ndim == 1:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)
        if tied:  # lean the layer toward copying its token: with tied embeddings its drafts then
            # repeat what the model repeats, so the speculative tests see drafts accepted
            mtp["fc"].weight[:, :E] += 2.0 * torch.eye(E)
    return mtp.to(torch.float32).eval()


def add_mtp(hf, mtp):
    path = os.path.join(hf, "model.safetensors")
    sd = load_file(path)
    for k, v in mtp.state_dict().items():
        sd["mtp." + k] = v.contiguous()
    save_file(sd, path, metadata={"format": "pt"})
    cpath = os.path.join(hf, "config.json")
    with open(cpath) as f:
        cfg = json.load(f)
    cfg["mtp_num_hidden_layers"] = 1
    with open(cpath, "w") as f:
        json.dump(cfg, f, indent=2)


def mtp_rows(model, mtp, x_ids, h):
    """The MTP layer over rows (x_ids[i], h[i]) at rotary positions 0..n-1, causal;
    returns (normed output, logits[:, :KEEP])."""
    n = len(x_ids)
    emb = model.model.embed_tokens(torch.tensor([x_ids]))
    x = mtp["fc"](torch.cat([mtp["pre_fc_norm_embedding"](emb), mtp["pre_fc_norm_hidden"](h)], dim=-1))
    pos = torch.arange(n).view(1, 1, -1).expand(3, 1, -1)
    pe = model.model.rotary_emb(x, pos)
    mask = torch.full((n, n), float("-inf")).triu(1).view(1, 1, n, n)
    y = mtp["layers"][0](x, position_embeddings=pe, attention_mask=mask, position_ids=pos[0])
    if isinstance(y, tuple):
        y = y[0]
    hn = mtp["norm"](y)
    return hn, model.lm_head(hn)[0, :, :Q.KEEP]


def references(model, mtp, ids):
    with torch.no_grad():
        out = model.model(input_ids=torch.tensor([ids[:N_MAIN]]))
        h = out.last_hidden_state  # after the output norm
        main = model.lm_head(h)[0, :, :Q.KEEP]
        _, mtp_logits = mtp_rows(model, mtp, ids[1:N_MAIN], h[:, :N_MAIN - 1])
        # the chain: rows 0..PROMPT-1 are the prompt's (the last one, token ids[PROMPT]
        # with h[PROMPT-1], gives the first draft), then each draft with the MTP's
        # own output of the row before
        xs = list(ids[1:PROMPT + 1])
        hs = h[:, :PROMPT]
        drafts, chain = [], []
        for _ in range(N_CHAIN):
            hn, lg = mtp_rows(model, mtp, xs, hs)
            d = int(torch.argmax(lg[-1]))
            drafts.append(d)
            chain.append(lg[-1])
            xs.append(d)
            hs = torch.cat([hs, hn[:, -1:]], dim=1)
    return main, mtp_logits, drafts, torch.stack(chain)


def main():
    os.makedirs(Q.OUT, exist_ok=True)
    torch.set_num_threads(2)
    Q.use_torch_reference_kernels()
    for seed, arch in ((350, "qwen35"), (351, "qwen35moe")):
        with tempfile.TemporaryDirectory() as tmp:
            hf = os.path.join(tmp, "hf")
            os.makedirs(hf)
            model = Q.build(arch, hf, seed)
            mtp = make_mtp(arch, model.config, seed + 100, arch == "qwen35")
            add_mtp(hf, mtp)
            full = os.path.join(tmp, "full.gguf")
            f32 = os.path.join(Q.OUT, f"{arch}-mtp-tiny-f32.gguf")
            q8 = os.path.join(Q.OUT, f"{arch}-mtp-tiny-q8_0.gguf")
            subprocess.run([sys.executable, os.path.join(Q.LLAMA_CPP, "convert_hf_to_gguf.py"), hf, "--outtype",
                            "f32", "--outfile", full], check=True, capture_output=True)
            Q.shrink_vocab(full, f32)
            subprocess.run([os.path.join(Q.LLAMA_BIN, "llama-quantize"), f32, q8, "Q8_0"], check=True,
                           capture_output=True)
            main_l, mtp_l, drafts, chain = references(model, mtp, Q.IDS)
            with open(os.path.join(Q.OUT, f"{arch}-mtp-tiny.ref"), "wb") as f:
                f.write(main_l.numpy().astype("<f4").tobytes())
                f.write(mtp_l.numpy().astype("<f4").tobytes())
                f.write(np.array(drafts, dtype="<i4").tobytes())
                f.write(chain.numpy().astype("<f4").tobytes())
            print(arch, "drafts", drafts)


if __name__ == "__main__":
    main()
