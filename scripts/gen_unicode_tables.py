#!/usr/bin/env python3
"""gen_unicode_tables.py — writes src/text/unicode_data.c, the character tables of
eddy's tokenizers.

The tables must agree with the reference tokenizers, not with some Unicode version
chosen here, so every class is *measured* on Hugging Face `tokenizers` itself:

  - \\p{L}, \\p{N}, \\p{M}, \\s: the classes of the Oniguruma regex engine that
    `tokenizers` compiles pre-tokenizer patterns with, probed over every code point.
  - D: what the `Digits` pre-tokenizer isolates (Rust's char::is_numeric).
  - NFC: canonical combining classes, decompositions and compositions as the
    `NFC` normalizer of `tokenizers` applies them (its Unicode data is older than
    Python's: characters it does not know keep class 0 and do not decompose).
    Python's unicodedata supplies the candidates; tokenizers decides which apply.

    PYTHON scripts/gen_unicode_tables.py [OUT.c]    (PYTHON: one with `tokenizers`)

Takes about ten seconds. The output is deterministic for a given `tokenizers` version
(recorded in the file).
"""
import sys
import unicodedata

import tokenizers
from tokenizers import Regex, normalizers, pre_tokenizers

OUT = sys.argv[1] if len(sys.argv) > 1 else "src/text/unicode_data.c"
ALL = [c for c in range(0x110000) if not (0xD800 <= c <= 0xDFFF)]
ALL_STR = "".join(chr(c) for c in ALL)

F_L, F_N, F_M, F_S, F_D, F_NFC_SAFE = 1, 2, 4, 8, 16, 32


def regex_class(pat):
    """Code points matched by the one-character pattern `pat` in tokenizers' engine."""
    pt = pre_tokenizers.Split(Regex(pat), behavior="removed")
    left = set()
    for piece, _ in pt.pre_tokenize_str(ALL_STR):
        left.update(ord(ch) for ch in piece)
    return set(ALL) - left


def digits_class():
    """Code points the Digits(individual_digits=True) pre-tokenizer isolates."""
    pt = pre_tokenizers.Digits(individual_digits=True)
    s = "x" + "x".join(chr(c) for c in ALL) + "x"
    out = set()
    for piece, _ in pt.pre_tokenize_str(s):
        if piece and "x" not in piece:
            out.update(ord(ch) for ch in piece)
    return out


nfc = normalizers.NFC()
nfd = normalizers.NFD()


def hf_ccc(c):
    """The canonical combining class tokenizers' normalizer uses for c (0 or Python's)."""
    k = unicodedata.combining(chr(c))
    if k == 0:
        return 0
    # A mark with a higher class placed before c moves after it iff tokenizers knows c's class.
    if k < 230:
        t = "a" + "\u0301" + chr(c)  # U+0301 has class 230
        return k if nfd.normalize_str(t) == "a" + unicodedata.normalize("NFD", chr(c)) + "\u0301" else 0
    t = "a" + chr(c) + "\u0334"  # U+0334 has class 1
    return k if nfd.normalize_str(t).endswith(chr(c)) else 0


def main():
    print("probing regex classes ...", file=sys.stderr)
    L, N, M, S = (regex_class(p) for p in (r"\p{L}", r"\p{N}", r"\p{M}", r"\s"))
    D = digits_class()

    print("probing normalization data ...", file=sys.stderr)
    ccc = {}
    for c in ALL:
        k = hf_ccc(c)
        if k:
            ccc[c] = k
    decomp = {}
    for c in ALL:
        if 0xAC00 <= c <= 0xD7A3:
            continue  # Hangul syllables: algorithmic
        d = unicodedata.normalize("NFD", chr(c))
        if d != chr(c) and nfd.normalize_str(chr(c)) == d:
            decomp[c] = [ord(x) for x in d]
    # Primary composites: two-character canonical decompositions (unicodedata's own
    # field, not the full one) that NFC recomposes.
    comp = {}
    for c in ALL:
        if c not in decomp or 0xAC00 <= c <= 0xD7A3:
            continue
        raw = unicodedata.decomposition(chr(c))
        if not raw or raw.startswith("<"):
            continue
        parts = [int(x, 16) for x in raw.split()]
        if len(parts) == 2 and nfc.normalize_str(chr(parts[0]) + chr(parts[1])) == chr(c):
            comp[(parts[0], parts[1])] = c
    second = {b for (_, b) in comp} | set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    # Quick check: a character is "safe" when a string of safe characters is already
    # NFC: class 0, NFC maps it to itself, and it never combines with what precedes.
    safe = set()
    for c in ALL:
        if c in ccc or c in second:
            continue
        if nfc.normalize_str(chr(c)) != chr(c):
            continue
        safe.add(c)

    flags = [0] * 0x110000
    for c in L: flags[c] |= F_L
    for c in N: flags[c] |= F_N
    for c in M: flags[c] |= F_M
    for c in S: flags[c] |= F_S
    for c in D: flags[c] |= F_D
    for c in safe: flags[c] |= F_NFC_SAFE
    ranges = []
    start = 0
    for c in range(1, 0x110001):
        if c == 0x110000 or flags[c] != flags[start]:
            if flags[start]:
                ranges.append((start, c - 1, flags[start]))
            start = c

    pool = []
    dec_rows = []
    for c in sorted(decomp):
        dec_rows.append((c, len(pool), len(decomp[c])))
        pool.extend(decomp[c])
    comp_rows = sorted((a, b, c) for (a, b), c in comp.items())

    with open(OUT, "w") as f:
        w = f.write
        w("/*\n * unicode_data.c — character tables of eddy's tokenizers. GENERATED by\n")
        w(" * scripts/gen_unicode_tables.py from Hugging Face tokenizers %s (its regex\n" % tokenizers.__version__)
        w(" * classes and its NFC normalizer, probed over every code point) and Python %s's\n" % sys.version.split()[0])
        w(" * unicodedata %s for the candidate decompositions. Do not edit by hand.\n */\n" % unicodedata.unidata_version)
        w('#include "text/unicode.h"\n\n')
        w("/* ==== Class ranges: (first, last, UCLASS_* flags), sorted, disjoint ==== */\n\n")
        w("const uni_range uni_ranges[] = {\n")
        for a, b, fl in ranges:
            w("    {0x%05X, 0x%05X, 0x%02X},\n" % (a, b, fl))
        w("};\nconst int64_t uni_n_ranges = %d;\n\n" % len(ranges))
        w("/* ==== Canonical combining classes (non-zero only), sorted by code point ==== */\n\n")
        w("const uni_ccc uni_ccc_table[] = {\n")
        items = sorted(ccc.items())
        for i in range(0, len(items), 6):
            w("    " + " ".join("{0x%05X, %d}," % kv for kv in items[i:i + 6]) + "\n")
        w("};\nconst int64_t uni_n_ccc = %d;\n\n" % len(items))
        w("/* ==== Full canonical decompositions: code point -> pool[off .. off+len) ==== */\n\n")
        w("const uint32_t uni_decomp_pool[] = {\n")
        for i in range(0, len(pool), 8):
            w("    " + " ".join("0x%05X," % x for x in pool[i:i + 8]) + "\n")
        w("};\n\nconst uni_decomp uni_decomp_table[] = {\n")
        for i in range(0, len(dec_rows), 4):
            w("    " + " ".join("{0x%05X, %d, %d}," % r for r in dec_rows[i:i + 4]) + "\n")
        w("};\nconst int64_t uni_n_decomp = %d;\n\n" % len(dec_rows))
        w("/* ==== Canonical compositions (first, second) -> composite, sorted by pair ==== */\n\n")
        w("const uni_comp uni_comp_table[] = {\n")
        for i in range(0, len(comp_rows), 4):
            w("    " + " ".join("{0x%05X, 0x%05X, 0x%05X}," % r for r in comp_rows[i:i + 4]) + "\n")
        w("};\nconst int64_t uni_n_comp = %d;\n" % len(comp_rows))
    print("%s: %d ranges, %d ccc, %d decompositions (%d pool), %d compositions"
          % (OUT, len(ranges), len(items), len(dec_rows), len(pool), len(comp_rows)), file=sys.stderr)


main()
