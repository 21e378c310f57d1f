#!/usr/bin/env python3
"""Writes a Qwen3.5-shaped GGUF (dense or MoE) with random quantized weights, for timing only.

The benchmark models of scripts/gen_bench_models.py go through transformers and
llama-quantize; this one needs only numpy and the `gguf` package, so it runs where
nothing can be installed or downloaded (the GPU machine of scripts/device_check.sh).
Its quantized blocks are random bytes with small finite fp16 scales: every weight is a
valid value of its format, the arithmetic per byte is a real file's, and the output is
gibberish. Its tokenizer is made up too (made_up_tokenizer): byte-level BPE with the 256
byte tokens, the merges of some letter pairs, filler tokens up to the vocabulary's size and
Qwen's chat tokens at its end, so that commands reading text (chat, perplexity) run on it;
benchmarks draw random token ids.

Shapes (--shape):
  4b     hidden 2560, 32 layers (full attention every 4th: 24 Gated DeltaNet + 8 gated
         attention), MLP 9216, attention 16 heads / 4 KV heads of 256 (rotary 64 dims),
         Gated DeltaNet 16 key heads / 32 value heads of 128, conv 4, vocabulary 151936,
         tied embeddings: about 3.9B parameters.
  0.57b  the shape of gen_bench_models.py's qwen35-0.57b (hidden 1024, 24 layers, MLP
         3584, 8 / 2 heads of 256, 16 / 16 GDN heads of 128, vocabulary 65536).
  35b-a3b  Qwen3.5-35B-A3B's layers (qwen35moe): hidden 2048, 40 layers (30 Gated DeltaNet,
         10 gated attention), 256 experts of 512 with 8 a token and a gated shared expert of
         512, attention 16 heads / 2 KV heads of 256, Gated DeltaNet 16 key heads / 32 value
         heads of 128, F32 routers, an untied output; the vocabulary is the 4b shape's.
         About 35B parameters, 3B of them read per token.
Types (--type): Q4_K_M (Q4_K, with Q6_K for the embeddings and for attn_v, ffn_down
(the experts' too) and the GDN qkv projection of every other layer, as llama-quantize
mixes them), Q8_0, F16.
--layers N keeps the first N layers (the same pattern of layer kinds): a smaller file
whose layers are the shape's, for timing a layer where the whole file would take too long
to write.

Usage: python3 scripts/gen_random_qwen35.py --shape 4b --type Q4_K_M --out FILE [--layers N] [--seed N]
"""
import argparse
import sys

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter

SHAPES = {
    "4b": dict(hidden=2560, layers=32, ff=9216, heads=16, kv=4, hd=256, rot=64, nk=16, nv=32, dk=128, dv=128,
               vocab=151936),
    "0.57b": dict(hidden=1024, layers=24, ff=3584, heads=8, kv=2, hd=256, rot=64, nk=16, nv=16, dk=128, dv=128,
                  vocab=65536),
    "35b-a3b": dict(hidden=2048, layers=40, heads=16, kv=2, hd=256, rot=64, nk=16, nv=32, dk=128, dv=128,
                    vocab=151936, experts=256, used=8, ff_exp=512, ff_shexp=512),
}

# block elements, block bytes, byte offsets of the fp16 scales in a block
BLOCKS = {Q.Q4_K: (256, 144, (0, 2)), Q.Q6_K: (256, 210, (208,)), Q.Q8_0: (32, 34, (0,))}


def quant_rows(rng, qtype, n_in, rows):
    """rows x n_in weights of qtype as raw bytes (rows, row_bytes)."""
    if qtype == Q.F16:
        return (rng.standard_normal((rows, n_in), dtype=np.float32) * 0.02).astype(np.float16)
    qk, size, offs = BLOCKS[qtype]
    nb = n_in // qk
    raw = rng.integers(0, 256, size=(rows * nb, size), dtype=np.uint8)
    for i, off in enumerate(offs):
        scale = rng.uniform(0.0005, 0.003, size=rows * nb).astype(np.float16)
        if i == 1:  # dmin
            scale = -scale
        raw[:, off:off + 2] = scale.view(np.uint8).reshape(-1, 2)
    return raw.reshape(rows, nb * size)


def byte_chars():
    """GPT-2's byte-level alphabet: the character that stands for each byte in a token"""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def made_up_tokenizer(w, vocab):
    """A byte-level BPE tokenizer of `vocab` tokens: the 256 bytes, the merges of letter pairs
    (and of a space before a letter), filler tokens, then <|endoftext|>, <|im_start|> and
    <|im_end|> as control tokens, the last three ids as in Qwen's files."""
    tokens = byte_chars()
    merges = []
    space = tokens[ord(" ")]
    for a in "etaoinshrdlu":
        for b in [space] + list("etaoinshrdlu"):
            left, right = (b, a) if b == space else (a, b)
            merges.append(left + " " + right)
            tokens.append(left + right)
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens += ["[filler %d]" % i for i in range(vocab - len(tokens) - len(special))]
    tokens += special
    types = [1] * (vocab - len(special)) + [3] * len(special)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(vocab - 1)
    w.add_pad_token_id(vocab - 3)
    w.add_add_bos_token(False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", choices=list(SHAPES), default="4b")
    ap.add_argument("--type", choices=["Q4_K_M", "Q8_0", "F16"], default="Q4_K_M")
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=0, help="keep the first N layers (0: all)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    s = dict(SHAPES[a.shape])
    if a.layers > 0:
        s["layers"] = min(a.layers, s["layers"])
    moe = "experts" in s
    arch = "qwen35moe" if moe else "qwen35"
    rng = np.random.default_rng(a.seed)
    base = {"Q4_K_M": Q.Q4_K, "Q8_0": Q.Q8_0, "F16": Q.F16}[a.type]
    high = {"Q4_K_M": Q.Q6_K, "Q8_0": Q.Q8_0, "F16": Q.F16}[a.type]

    E, L, H, KV, HD = s["hidden"], s["layers"], s["heads"], s["kv"], s["hd"]
    NK, NV, DK, DV = s["nk"], s["nv"], s["dk"], s["dv"]
    conv_dim = 2 * NK * DK + NV * DV
    w = GGUFWriter(a.out, arch)
    w.add_name(f"random-qwen35-{a.shape}")
    w.add_block_count(L)
    w.add_context_length(262144)
    w.add_embedding_length(E)
    if moe:
        w.add_expert_count(s["experts"])
        w.add_expert_used_count(s["used"])
        w.add_expert_feed_forward_length(s["ff_exp"])
        w.add_expert_shared_feed_forward_length(s["ff_shexp"])
    else:
        w.add_feed_forward_length(s["ff"])
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_rope_freq_base(10000000.0)
    w.add_rope_dimension_count(s["rot"])
    w.add_array(f"{arch}.rope.dimension_sections", [11, 11, 10, 0])
    w.add_layer_norm_rms_eps(1e-6)
    w.add_uint32(f"{arch}.ssm.conv_kernel", 4)
    w.add_uint32(f"{arch}.ssm.state_size", DK)
    w.add_uint32(f"{arch}.ssm.group_count", NK)
    w.add_uint32(f"{arch}.ssm.time_step_rank", NV)
    w.add_uint32(f"{arch}.ssm.inner_size", NV * DV)
    w.add_uint32(f"{arch}.full_attention_interval", 4)
    w.add_array(f"{arch}.attention.recurrent_layers", [(i + 1) % 4 != 0 for i in range(L)])
    made_up_tokenizer(w, s["vocab"])

    def f32(name, shape, scale=1.0, offset=0.0):
        w.add_tensor(name, (offset + scale * rng.standard_normal(shape)).astype(np.float32))

    def mat(name, n_in, rows, qtype):
        data = quant_rows(rng, qtype, n_in, rows)
        w.add_tensor(name, data, raw_dtype=qtype)

    def experts(name, n_in, rows, n_experts, qtype):  # GGUF shape [n_in, rows, n_experts]
        data = quant_rows(rng, qtype, n_in, rows * n_experts)
        w.add_tensor(name, data.reshape(n_experts, rows, -1), raw_dtype=qtype)

    mat("token_embd.weight", E, s["vocab"], high)
    if moe:
        mat("output.weight", E, s["vocab"], high)
    f32("output_norm.weight", (E,), 0.1, 1.0)
    for il in range(L):
        p = f"blk.{il}."
        odd = il % 2 == 1
        f32(p + "attn_norm.weight", (E,), 0.1, 1.0)
        f32(p + "post_attention_norm.weight", (E,), 0.1, 1.0)
        if (il + 1) % 4 != 0:  # Gated DeltaNet
            mat(p + "attn_qkv.weight", E, conv_dim, high if odd else base)
            mat(p + "attn_gate.weight", E, NV * DV, base)
            mat(p + "ssm_alpha.weight", E, NV, base)
            mat(p + "ssm_beta.weight", E, NV, base)
            f32(p + "ssm_conv1d.weight", (conv_dim, 4), 0.2)
            w.add_tensor(p + "ssm_a", (-np.exp(rng.uniform(-1, 1, NV))).astype(np.float32))
            f32(p + "ssm_dt.bias", (NV,), 0.5)
            f32(p + "ssm_norm.weight", (DV,), 0.1, 1.0)
            mat(p + "ssm_out.weight", NV * DV, E, base)
        else:  # gated attention
            mat(p + "attn_q.weight", E, 2 * H * HD, base)
            mat(p + "attn_k.weight", E, KV * HD, base)
            mat(p + "attn_v.weight", E, KV * HD, high)
            mat(p + "attn_output.weight", H * HD, E, base)
            f32(p + "attn_q_norm.weight", (HD,), 0.1, 1.0)
            f32(p + "attn_k_norm.weight", (HD,), 0.1, 1.0)
        if moe:
            X, F, S = s["experts"], s["ff_exp"], s["ff_shexp"]
            f32(p + "ffn_gate_inp.weight", (X, E), 0.02)
            experts(p + "ffn_gate_exps.weight", E, F, X, base)
            experts(p + "ffn_up_exps.weight", E, F, X, base)
            experts(p + "ffn_down_exps.weight", F, E, X, high if odd else base)
            f32(p + "ffn_gate_inp_shexp.weight", (E,), 0.02)
            mat(p + "ffn_gate_shexp.weight", E, S, base)
            mat(p + "ffn_up_shexp.weight", E, S, base)
            mat(p + "ffn_down_shexp.weight", S, E, high if odd else base)
        else:
            mat(p + "ffn_gate.weight", E, s["ff"], base)
            mat(p + "ffn_up.weight", E, s["ff"], base)
            mat(p + "ffn_down.weight", s["ff"], E, high if odd else base)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{a.out}: random {arch} {a.shape} ({L} layers) {a.type}", file=sys.stderr)


if __name__ == "__main__":
    main()
