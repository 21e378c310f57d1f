#!/usr/bin/env python3
"""Trains a multi-token-prediction (MTP) layer for the trained tiny hybrid, to measure
MTP drafts on a model whose predictions mean something.

tests/data/models/tiny-hybrid-q8_0.gguf (scripts/train_tiny_hybrid.py) holds exactly the
weights transformers ran, so this script rebuilds that Qwen3_5ForCausalLM from the GGUF
(undoing the converter's changes: norms stored with +1, ssm_a = -exp(A_log), the conv
kernel squeezed; the model has as many key as value heads, so no head reordering),
checks its logits against the committed transformers references, and then, with the
model frozen, trains one Qwen3.5 MTP layer as the checkpoints carry it:
    y_i = layer(fc([norm_e(embed(x_{i+1})); norm_h(h_i)]))  ->  lm_head(norm(y_i)) predicts x_{i+2}
(h: the model's last hidden state after its output norm; the layer is a full-attention
decoder layer of the model's class, started from the model's last attention layer). It
trains on the corpus's training part (the 95% of each file the model trained on), batches
of 8 x 256 tokens, AdamW, seeded; the layer's matrices are then rounded to Q8_0 values.

It reports the top-1 agreement of the layer with the model's own greedy token two ahead on
held-out text (what a draft's acceptance rests on), and writes OUT (default
models/tiny-hybrid-mtp-q8_0.gguf, not tracked): the tiny hybrid's GGUF with the layer
appended as blk.8 (nextn_predict_layers = 1), Q8_0 matrices, for `eddy run --spec-type mtp`.

Usage: LLAMA_CPP=/path/to/llama.cpp python3 scripts/train_tiny_mtp.py [--steps 300] [--out FILE]
Needs torch, transformers, numpy, llama.cpp's gguf-py, and build/eddy (its tokenizer).
"""
import argparse
import os
import subprocess
import sys
import time

sys.modules["fla"] = None
import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_tiny_hybrid as TH  # noqa: E402

sys.path.insert(0, os.path.join(TH.LLAMA_CPP, "gguf-py"))
import gguf  # noqa: E402
from transformers.models.qwen3_5 import modeling_qwen3_5 as M  # noqa: E402

SRC = os.path.join(TH.TESTDATA, "tiny-hybrid-q8_0.gguf")
EDDY = os.path.join(TH.REPO, "build/eddy")
N_LAYER, ATTN_LAYER = 8, 7
SEQ, BATCH, LR, SEED = 256, 8, 1e-3, 23


def tensors(path):
    r = gguf.GGUFReader(path)
    out = {}
    for t in r.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type)
        out[t.name] = torch.from_numpy(np.array(a, dtype=np.float32).reshape([int(x) for x in reversed(t.shape)]))
    return r, out


def rebuild(ts, eot_id):
    """The transformers model the GGUF was converted from."""
    model = TH.T.Qwen3_5ForCausalLM(TH.config(eot_id)).to(torch.float32).eval()
    sd = {"model.embed_tokens.weight": ts["token_embd.weight"], "model.norm.weight": ts["output_norm.weight"] - 1}
    for i in range(N_LAYER):
        b, p = f"blk.{i}.", f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = ts[b + "attn_norm.weight"] - 1
        sd[p + "post_attention_layernorm.weight"] = ts[b + "post_attention_norm.weight"] - 1
        for g, h in (("ffn_gate", "gate_proj"), ("ffn_up", "up_proj"), ("ffn_down", "down_proj")):
            sd[p + f"mlp.{h}.weight"] = ts[b + g + ".weight"]
        if i % 4 == 3:
            for g, h in (("attn_q", "q_proj"), ("attn_k", "k_proj"), ("attn_v", "v_proj"), ("attn_output", "o_proj")):
                sd[p + f"self_attn.{h}.weight"] = ts[b + g + ".weight"]
            sd[p + "self_attn.q_norm.weight"] = ts[b + "attn_q_norm.weight"] - 1
            sd[p + "self_attn.k_norm.weight"] = ts[b + "attn_k_norm.weight"] - 1
        else:
            la = p + "linear_attn."
            for g, h in (("attn_qkv", "in_proj_qkv"), ("attn_gate", "in_proj_z"), ("ssm_beta", "in_proj_b"),
                         ("ssm_alpha", "in_proj_a"), ("ssm_out", "out_proj")):
                sd[la + h + ".weight"] = ts[b + g + ".weight"]
            sd[la + "norm.weight"] = ts[b + "ssm_norm.weight"]
            sd[la + "A_log"] = torch.log(-ts[b + "ssm_a"])
            sd[la + "dt_bias"] = ts[b + "ssm_dt.bias"]
            sd[la + "conv1d.weight"] = ts[b + "ssm_conv1d.weight"].unsqueeze(1)
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected and all(k == "lm_head.weight" for k in missing), (missing, unexpected)
    return model


def check_rebuild(model):
    ids = [int(x) for x in open(os.path.join(TH.TESTDATA, "tiny-hybrid.ids")).read().split()]
    ref = np.fromfile(os.path.join(TH.TESTDATA, "tiny-hybrid.logits.f32"), dtype="<f4").reshape(len(ids), -1)
    with torch.no_grad():
        got = model(torch.tensor([ids])).logits[0].numpy()
    err = np.sqrt(((got - ref) ** 2).sum() / (ref ** 2).sum())
    print(f"rebuilt model against the committed transformers logits: relative RMS {err:.2e}", flush=True)
    assert err < 1e-5, err


def tokenize(text):
    with open("/tmp/mtp-train.txt", "w", encoding="utf-8") as f:
        f.write(text)
    out = subprocess.run([EDDY, "tokenize", "-m", SRC, "--file", "/tmp/mtp-train.txt", "--no-bos"], check=True,
                         capture_output=True, text=True).stdout
    return torch.tensor([int(x) for x in out.split()])


def make_mtp(model):
    cfg = model.config
    E = cfg.hidden_size
    mtp = torch.nn.ModuleDict(dict(
        fc=torch.nn.Linear(2 * E, E, bias=False), pre_fc_norm_embedding=M.Qwen3_5RMSNorm(E, eps=cfg.rms_norm_eps),
        pre_fc_norm_hidden=M.Qwen3_5RMSNorm(E, eps=cfg.rms_norm_eps), norm=M.Qwen3_5RMSNorm(E, eps=cfg.rms_norm_eps),
        layers=torch.nn.ModuleList([M.Qwen3_5DecoderLayer(cfg, ATTN_LAYER)])))
    with torch.no_grad():
        mtp["layers"][0].load_state_dict(model.model.layers[ATTN_LAYER].state_dict())
        mtp["fc"].weight.copy_(torch.cat([torch.eye(E), torch.eye(E)], dim=1) * 0.5)
        mtp["fc"].weight.add_(torch.randn(E, 2 * E, generator=torch.Generator().manual_seed(SEED)) * 0.01)
        for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden"):
            mtp[n].weight.zero_()
        mtp["norm"].weight.copy_(model.model.norm.weight)
    return mtp


def mtp_logits(model, mtp, ids):
    """Rows i = 0 .. n-3 of a batch (B, n): x_{i+1} with h_i, causal; logits predicting x_{i+2}."""
    B, n = ids.shape
    with torch.no_grad():
        h = model.model(input_ids=ids).last_hidden_state[:, :n - 2]
        emb = model.model.embed_tokens(ids[:, 1:n - 1])
    x = mtp["fc"](torch.cat([mtp["pre_fc_norm_embedding"](emb), mtp["pre_fc_norm_hidden"](h)], dim=-1))
    pos = torch.arange(n - 2).view(1, 1, -1).expand(3, B, -1)
    pe = model.model.rotary_emb(x, pos)
    mask = torch.full((n - 2, n - 2), float("-inf")).triu(1).view(1, 1, n - 2, n - 2)
    y = mtp["layers"][0](x, position_embeddings=pe, attention_mask=mask, position_ids=pos[0])
    y = y[0] if isinstance(y, tuple) else y
    return model.lm_head(mtp["norm"](y))


def agreement(model, mtp, ids):
    """Top-1 agreement of the layer's row i with the model's greedy token at i + 2 (its
    argmax after x_0..x_{i+1}), on held-out chunks of SEQ tokens."""
    hit = tot = 0
    with torch.no_grad():
        for c in range(min(len(ids) // SEQ, 24)):
            x = ids[c * SEQ:(c + 1) * SEQ][None]
            want = model(x).logits[0, 1:SEQ - 1].argmax(-1)
            got = mtp_logits(model, mtp, x)[0].argmax(-1)
            hit += (got == want).sum().item()
            tot += want.numel()
    return hit / tot


def write_gguf(r, mtp, out):
    E = 256
    w = gguf.GGUFWriter(out, "qwen35")
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        val = f.contents()
        if f.name == "qwen35.block_count":
            val = N_LAYER + 1
        elif f.name == "qwen35.attention.recurrent_layers":
            val = list(val) + [False]
        sub = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(f.name, val, f.types[0], sub_type=sub)
    w.add_uint32("qwen35.nextn_predict_layers", 1)
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    q8 = gguf.GGMLQuantizationType.Q8_0
    sd = {k: v.detach().float() for k, v in mtp.state_dict().items()}
    b = f"blk.{N_LAYER}."
    mats = {"nextn.eh_proj": "fc.weight", "attn_q": "layers.0.self_attn.q_proj.weight",
            "attn_k": "layers.0.self_attn.k_proj.weight", "attn_v": "layers.0.self_attn.v_proj.weight",
            "attn_output": "layers.0.self_attn.o_proj.weight", "ffn_gate": "layers.0.mlp.gate_proj.weight",
            "ffn_up": "layers.0.mlp.up_proj.weight", "ffn_down": "layers.0.mlp.down_proj.weight"}
    for g, h in mats.items():
        w.add_tensor(b + g + ".weight", gguf.quants.quantize(sd[h].numpy(), q8), raw_dtype=q8)
    norms = {"attn_norm": "layers.0.input_layernorm.weight", "post_attention_norm":
             "layers.0.post_attention_layernorm.weight", "attn_q_norm": "layers.0.self_attn.q_norm.weight",
             "attn_k_norm": "layers.0.self_attn.k_norm.weight", "nextn.enorm": "pre_fc_norm_embedding.weight",
             "nextn.hnorm": "pre_fc_norm_hidden.weight", "nextn.shared_head_norm": "norm.weight"}
    for g, h in norms.items():  # stored with the +1 of Qwen's zero-centred RMSNorm, as the converter does
        w.add_tensor(b + g + ".weight", (sd[h] + 1).numpy().astype(np.float32))
    assert sd["fc.weight"].shape == (E, 2 * E)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out", default=os.path.join(TH.REPO, "models/tiny-hybrid-mtp-q8_0.gguf"))
    a = ap.parse_args()
    torch.manual_seed(SEED)
    torch.set_num_threads(os.cpu_count())
    TH.use_torch_reference_kernels()
    r, ts = tensors(SRC)
    eot = int(r.fields["tokenizer.ggml.eos_token_id"].contents())
    model = rebuild(ts, eot)
    for p in model.parameters():
        p.requires_grad_(False)
    check_rebuild(model)
    parts = TH.split_corpus()
    train = tokenize("".join(t for _, t, _ in parts))
    held = tokenize("".join(h for _, _, h in parts))
    print(f"{len(train)} training tokens, {len(held)} held-out", flush=True)
    mtp = make_mtp(model)
    print(f"agreement before training: {agreement(model, mtp, held):.3f}", flush=True)
    opt = torch.optim.AdamW(mtp.parameters(), lr=LR, weight_decay=0.0)
    gen = torch.Generator().manual_seed(SEED + 1)
    t0 = time.time()
    for step in range(a.steps):
        for g in opt.param_groups:
            g["lr"] = LR * min(1.0, (step + 1) / 30) * (0.1 + 0.9 * (1 - step / a.steps))
        starts = torch.randint(0, len(train) - SEQ, (BATCH,), generator=gen)
        x = torch.stack([train[s:s + SEQ] for s in starts.tolist()])
        logits = mtp_logits(model, mtp, x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 2:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == a.steps - 1:
            print(f"step {step}: loss {loss.item():.4f}, {time.time() - t0:.0f} s", flush=True)
    with torch.no_grad():  # the matrices as Q8_0 will hold them
        for n, p in mtp.named_parameters():
            if p.ndim == 2:
                p.copy_(TH.q8_0_round(p))
    print(f"agreement after training (Q8_0 values): {agreement(model, mtp, held):.3f}", flush=True)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    write_gguf(r, mtp, a.out)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
