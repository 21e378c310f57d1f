#!/usr/bin/env python3
"""Trains eddy's tiny Gated DeltaNet hybrid on the public-domain corpus, converts it to GGUF
and writes the reference data the tests compare eddy against.

The model is Qwen3.5-shaped (transformers' own Qwen3_5ForCausalLM): 8 layers in Qwen3.5's
3:1 pattern (Gated DeltaNet, Gated DeltaNet, Gated DeltaNet, gated attention, twice),
hidden 256, MLP 768, Gated DeltaNet 4 key / 4 value heads of 64 with conv kernel 4,
attention 4 heads / 2 KV heads of 64 (partial rotary 16 dims), tied embeddings, and its
own byte-level BPE of 8192 tokens (the Qwen2 pre-tokenizer, one special token
<|endoftext|>, no chat template: a base model).

Recipe (every step seeded; same machine and thread count -> the same model):
  1. text: ../shared/data/corpus/*.txt; the last 5% of each file (cut at a line end)
     is held out for evaluation, the rest is training text;
  2. tokenizer: HF tokenizers' BPE trainer on the training text, 8192 tokens;
  3. training: AdamW (betas 0.9/0.95, weight decay 0.1 on matrices), peak learning
     rate 2e-3, 100 warm-up steps then cosine decay to 10%, gradient clipping 1.0,
     batches of 16 windows of 256 tokens drawn at random offsets of the token stream
     (documents joined by <|endoftext|>), --steps steps (default 800) in float32;
  4. rounding to Q8_0: every matrix llama-quantize turns into Q8_0 (all 2-D weights but
     the conv kernels) is rounded to the nearest Q8_0 values (blocks of 32 along the
     input dimension, scale amax/127 stored in f16), so the Q8_0 file holds exactly the
     weights transformers runs; the held-out perplexity is measured before and after;
  5. conversion: llama.cpp's convert_hf_to_gguf.py (F32 and F16), llama-quantize (Q8_0,
     Q4_K_M); the Q8_0 file is checked to hold the F32 file's values exactly;
  6. reference data (tests/data/models/): transformers' logits for fixed token ids, its
     greedy continuation of a prompt, and its perplexity on a held-out excerpt computed
     as `eddy perplexity` does (chunks of 256 tokens, the second half of each scored).

Outputs in --out (default models/tiny-hybrid, not tracked): hf/ (the transformers
checkpoint and tokenizer), train.log, heldout.txt, tiny-hybrid-{f32,f16,q8_0,q4_k_m}.gguf.
Into tests/data/models/: tiny-hybrid-q8_0.gguf, tiny-hybrid.logits.f32, tiny-hybrid.ids,
tiny-hybrid.greedy, tiny-hybrid.ppl, tiny-hybrid-heldout.txt, tiny-hybrid.README.md.

Usage:
  LLAMA_CPP=/path/to/llama.cpp LLAMA_BIN=/path/to/llama.cpp/build/bin \\
      python3 scripts/train_tiny_hybrid.py [--out DIR] [--steps N] [--threads N] [--probe]

--probe times a few training steps and exits. A finished stage is not redone: delete
--out (or the file of a stage) to start over. Needs torch, transformers (with Qwen3.5),
tokenizers, numpy and llama.cpp's gguf-py.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

sys.modules["fla"] = None  # transformers would use fla's GPU kernels when it is installed
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers as T  # noqa: E402

from gen_tiny_qwen import use_torch_reference_kernels  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CORPUS = os.path.join(REPO, "../shared/data/corpus")
QWEN3_TOKENIZER = os.path.join(REPO, "../shared/data/tokenizers/qwen3/tokenizer.json")
TESTDATA = os.path.join(REPO, "tests/data/models")
LLAMA_CPP = os.environ.get("LLAMA_CPP", "/work/peers/llama.cpp")
LLAMA_BIN = os.environ.get("LLAMA_BIN", "/work/peers/llama.cpp/build/bin")

VOCAB = 8192
EOT = "<|endoftext|>"
SEQ, BATCH = 256, 16
PEAK_LR, WARMUP, FINAL_LR_FRAC = 2e-3, 100, 0.1
SEED = 17
PPL_CTX = 256            # chunk size of the reference perplexity (as eddy perplexity -c 256)
HELDOUT_TEST_CHARS = 40000  # the excerpt committed for the tests (about 10k tokens)
PROMPT = "It was the best of times, it was the"


def log(out, msg):
    line = time.strftime("%H:%M:%S ") + msg
    print(line, flush=True)
    with open(os.path.join(out, "train.log"), "a") as f:
        f.write(line + "\n")


def split_corpus():
    """Per file: (training text, held-out text); the cut is the line end nearest 95%."""
    parts = []
    for name in sorted(os.listdir(CORPUS)):
        if not name.endswith(".txt"):
            continue
        with open(os.path.join(CORPUS, name), encoding="utf-8") as f:
            text = f.read()
        cut = text.rfind("\n", 0, int(len(text) * 0.95)) + 1
        parts.append((name, text[:cut], text[cut:]))
    return parts


def train_tokenizer(texts, hf_dir):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    with open(QWEN3_TOKENIZER, encoding="utf-8") as f:
        qwen = json.load(f)
    regex = qwen["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]  # the Qwen2 pre-tokenizer
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[EOT], min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    fast = T.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=EOT, eos_token=EOT, pad_token=EOT,
                                     unk_token=None, clean_up_tokenization_spaces=False)
    fast.save_pretrained(hf_dir)
    return fast


def config(eot_id):
    return T.Qwen3_5TextConfig(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=768, num_hidden_layers=8, full_attention_interval=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        linear_num_key_heads=4, linear_num_value_heads=4, linear_key_head_dim=64, linear_value_head_dim=64,
        linear_conv_kernel_dim=4, rms_norm_eps=1e-6, max_position_embeddings=4096, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": [3, 3, 2], "mrope_interleaved": True},
        bos_token_id=eot_id, eos_token_id=eot_id, pad_token_id=eot_id)


def lr_at(step, steps):
    if step < WARMUP:
        return PEAK_LR * (step + 1) / WARMUP
    t = (step - WARMUP) / max(1, steps - WARMUP)
    return PEAK_LR * (FINAL_LR_FRAC + (1 - FINAL_LR_FRAC) * 0.5 * (1 + math.cos(math.pi * t)))


def reference_ppl(model, ids, n_ctx=PPL_CTX, max_chunks=None):
    """Perplexity as `eddy perplexity -c n_ctx` computes it: chunk i is ids[i*n_ctx, (i+1)*n_ctx),
    evaluated from an empty state; positions n_ctx/2 .. n_ctx-2 each predict the next token."""
    n_chunk = len(ids) // n_ctx
    if max_chunks:
        n_chunk = min(n_chunk, max_chunks)
    nll, n = 0.0, 0
    first = n_ctx // 2
    with torch.no_grad():
        for c in range(n_chunk):
            chunk = torch.tensor([ids[c * n_ctx:(c + 1) * n_ctx]])
            logp = torch.log_softmax(model(chunk).logits[0].double(), dim=-1)
            tgt = chunk[0, first + 1:]
            nll -= logp[first:n_ctx - 1].gather(1, tgt[:, None]).sum().item()
            n += n_ctx - 1 - first
    return math.exp(nll / n)


def q8_0_round(w):
    """The nearest Q8_0 values of a [rows, cols] float32 matrix, as ggml's reference
    quantizer computes them: per block of 32 along a row, d = amax/127, q = round(x/d),
    value q * f16(d). Such values are a fixed point of that quantizer."""
    rows, cols = w.shape
    b = w.reshape(rows, cols // 32, 32)
    amax = b.abs().amax(dim=-1, keepdim=True)
    d = amax / 127
    inv = torch.where(d > 0, 1 / d, torch.zeros_like(d))
    x = b * inv
    q = torch.sign(x) * torch.floor(x.abs() + 0.5)  # roundf: halves away from zero
    return (q * d.half().float()).reshape(rows, cols)


def round_to_q8_0(model):
    """Rounds the matrices llama-quantize stores as Q8_0 (2-D weights other than the conv kernels)."""
    n = 0
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2 and p.shape[1] % 32 == 0 and "conv1d" not in name:
                p.copy_(q8_0_round(p.float()))
                n += p.numel()
    return n


def train(out, hf_dir, steps, threads, probe):
    torch.manual_seed(SEED)
    parts = split_corpus()
    tok = train_tokenizer([t for _, t, _ in parts], hf_dir)
    eot = tok.convert_tokens_to_ids(EOT)
    train_ids, held = [], []
    for name, tr, ho in parts:
        train_ids += tok(tr)["input_ids"] + [eot]
        held.append((name, ho))
    heldout = "".join(ho for _, ho in held)
    with open(os.path.join(out, "heldout.txt"), "w", encoding="utf-8") as f:
        f.write(heldout)
    heldout_ids = tok(heldout)["input_ids"]
    data = torch.tensor(train_ids, dtype=torch.long)
    log(out, f"tokenizer: {len(tok)} tokens; training text {sum(len(t) for _, t, _ in parts)} chars = "
        f"{len(train_ids)} tokens, held out {len(heldout)} chars = {len(heldout_ids)} tokens")

    model = T.Qwen3_5ForCausalLM(config(eot)).float()
    n_params = sum(p.numel() for p in model.parameters())
    log(out, f"model: {n_params / 1e6:.2f}M parameters; {steps} steps of {BATCH}x{SEQ} tokens "
        f"({steps * BATCH * SEQ / len(train_ids):.2f} epochs), {threads} threads")
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=PEAK_LR, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(SEED + 1)
    model.train()
    t0 = time.time()
    smooth = None
    for step in range(steps if not probe else 5):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps)
        starts = torch.randint(0, len(data) - SEQ, (BATCH,), generator=gen)
        x = torch.stack([data[s:s + SEQ] for s in starts.tolist()])
        loss = model(input_ids=x, labels=x).loss  # transformers shifts the labels itself
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        smooth = loss.item() if smooth is None else 0.98 * smooth + 0.02 * loss.item()
        if probe or step % 25 == 0 or step == steps - 1:
            el = time.time() - t0
            log(out, f"step {step}: loss {loss.item():.4f} (smoothed {smooth:.4f}), lr {lr_at(step, steps):.2e}, "
                f"{el:.0f} s, {el / (step + 1):.2f} s/step")
    if probe:
        return None
    model.eval()
    ppl = reference_ppl(model, heldout_ids)
    log(out, f"held-out perplexity (chunks of {PPL_CTX}, second half scored): {ppl:.4f} before Q8_0 rounding")
    n = round_to_q8_0(model)
    ppl_q = reference_ppl(model, heldout_ids)
    log(out, f"rounded {n / 1e6:.2f}M weights to Q8_0 values; held-out perplexity {ppl_q:.4f}")
    model.save_pretrained(hf_dir, safe_serialization=True)
    return model


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{' '.join(cmd[:3])} failed:\n" + r.stderr[-3000:])
    return r


def convert(out, hf_dir):
    """F32 and F16 with llama.cpp's converter, Q8_0 and Q4_K_M with llama-quantize.

    The converter names a BPE pre-tokenizer by hashing how a tokenizer splits a test
    string; a newly trained vocabulary has no known hash, so it is told the name of the
    pre-tokenizer this one uses (Qwen2's)."""
    shim = ("import runpy, sys; sys.path.insert(0, sys.argv[1]); sys.argv = sys.argv[1:]; "
            "sys.argv[0] = sys.argv[0] + '/convert_hf_to_gguf.py'; import conversion.base as b; "
            "b.TextModel.get_vocab_base_pre = lambda self, tok: 'qwen2'; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    paths = {}
    for t in ("f32", "f16"):
        paths[t] = os.path.join(out, f"tiny-hybrid-{t}.gguf")
        run([sys.executable, "-c", shim, LLAMA_CPP, hf_dir, "--outtype", t, "--outfile", paths[t], "--no-mtp"])
    for t in ("Q8_0", "Q4_K_M"):
        paths[t.lower()] = os.path.join(out, f"tiny-hybrid-{t.lower()}.gguf")
        run([os.path.join(LLAMA_BIN, "llama-quantize"), paths["f32"], paths[t.lower()], t, "2"])
    sys.path.insert(0, os.path.join(LLAMA_CPP, "gguf-py"))
    import gguf
    from gguf.quants import dequantize
    f32 = {t.name: np.array(t.data) for t in gguf.GGUFReader(paths["f32"]).tensors}
    worst, n_q8 = 0.0, 0
    for t in gguf.GGUFReader(paths["q8_0"]).tensors:
        if t.tensor_type == gguf.GGMLQuantizationType.Q8_0:
            v = dequantize(t.data, t.tensor_type).reshape(f32[t.name].shape)
            worst = max(worst, float(np.abs(v - f32[t.name]).max()))
            n_q8 += 1
        elif t.tensor_type == gguf.GGMLQuantizationType.F32:
            worst = max(worst, float(np.abs(np.array(t.data) - f32[t.name]).max()))
        else:
            sys.exit(f"{t.name}: type {t.tensor_type.name} in the Q8_0 file")
    if worst != 0.0:
        sys.exit(f"the Q8_0 file differs from the F32 file by up to {worst}")
    return paths, n_q8


def references(out, model, tok, paths, n_q8):
    os.makedirs(TESTDATA, exist_ok=True)
    shutil.copy(paths["q8_0"], os.path.join(TESTDATA, "tiny-hybrid-q8_0.gguf"))
    with open(os.path.join(out, "heldout.txt"), encoding="utf-8") as f:
        heldout = f.read()
    # the excerpt: the start of the held-out Moby-Dick (the first held-out file), cut at a line end
    excerpt = heldout[:heldout.rfind("\n", 0, HELDOUT_TEST_CHARS) + 1]
    with open(os.path.join(TESTDATA, "tiny-hybrid-heldout.txt"), "w", encoding="utf-8") as f:
        f.write(excerpt)
    ids = tok(excerpt)["input_ids"]
    ppl = reference_ppl(model, ids)
    with open(os.path.join(TESTDATA, "tiny-hybrid.ppl"), "w") as f:
        f.write(f"{ppl:.6f} {len(ids) // PPL_CTX} {PPL_CTX}\n")
    logit_ids = tok(excerpt[1000:3000])["input_ids"][:100]
    with open(os.path.join(TESTDATA, "tiny-hybrid.ids"), "w") as f:
        f.write(" ".join(map(str, logit_ids)) + "\n")
    with torch.no_grad():
        logits = model(torch.tensor([logit_ids])).logits[0].numpy().astype("<f4")
        logits.tofile(os.path.join(TESTDATA, "tiny-hybrid.logits.f32"))
        p = tok(PROMPT)["input_ids"]
        seq = list(p)
        for _ in range(48):
            seq.append(int(torch.argmax(model(torch.tensor([seq])).logits[0, -1])))
    with open(os.path.join(TESTDATA, "tiny-hybrid.greedy"), "w") as f:
        f.write(f"{len(p)}\n" + " ".join(map(str, p)) + "\n" + " ".join(map(str, seq[len(p):])) + "\n")
    log(out, f"references: {len(logit_ids)} ids of logits, greedy continuation of {PROMPT!r}: "
        f"{tok.decode(seq[len(p):])!r}; excerpt {len(excerpt)} chars = {len(ids)} tokens, perplexity {ppl:.4f}")
    from importlib.metadata import version
    with open(os.path.join(TESTDATA, "tiny-hybrid.README.md"), "w") as f:
        f.write("# tiny-hybrid: a trained Qwen3.5-shaped hybrid\n\n"
                "Made by `scripts/train_tiny_hybrid.py` (the recipe is in its docstring and in docs/models.md). "
                f"`tiny-hybrid-q8_0.gguf`: the trained model, {n_q8} matrices in Q8_0 holding exactly the weights "
                "transformers ran for the references. `tiny-hybrid.ids`: 100 token ids of held-out text; "
                "`tiny-hybrid.logits.f32`: transformers' float32 logits at each of them ([100][8192]); "
                "`tiny-hybrid.greedy`: the length of a prompt, its ids, then transformers' greedy 48-token continuation; "
                "`tiny-hybrid-heldout.txt`: the start of the held-out text; `tiny-hybrid.ppl`: transformers' "
                "perplexity on it, chunk count and chunk size, computed as `eddy perplexity -c 256` does.\n\n"
                f"torch {torch.__version__}, transformers {T.__version__}, tokenizers {version('tokenizers')}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "models/tiny-hybrid"))
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--probe", action="store_true", help="time 5 training steps and exit")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    use_torch_reference_kernels()
    os.makedirs(a.out, exist_ok=True)
    hf_dir = os.path.join(a.out, "hf")
    if a.probe or not os.path.exists(os.path.join(hf_dir, "model.safetensors")):
        os.makedirs(hf_dir, exist_ok=True)
        model = train(a.out, hf_dir, a.steps, a.threads, a.probe)
        if a.probe:
            return
    model = T.Qwen3_5ForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32).eval()
    tok = T.AutoTokenizer.from_pretrained(hf_dir)
    paths, n_q8 = convert(a.out, hf_dir)
    references(a.out, model, tok, paths, n_q8)
    shutil.copy(os.path.join(a.out, "train.log"), os.path.join(TESTDATA, "tiny-hybrid.train.log"))


if __name__ == "__main__":
    main()
