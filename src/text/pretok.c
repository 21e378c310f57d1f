/*
 * pretok.c — the pre-tokenizers: split text into the pieces BPE then works on.
 *
 * Owns: hand-written matchers equivalent to the split regexes of the supported
 * tokenizer families, as Hugging Face tokenizers runs them (Oniguruma: leftmost
 * alternative first, greedy quantifiers with backtracking). Each matcher takes the
 * position of the next character and returns where its piece ends; the
 * alternatives are tried in the regex's order. Character classes come from the
 * generated table (unicode_data.c), which was measured on the reference engine.
 * Does not own: normalization, special tokens, or BPE (tokenize.c).
 *
 * The regexes, as the reference tokenizers declare them:
 *   qwen2:  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
 *           | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   qwen35: the same with [\p{L}\p{M}]+ for the letter run and \p{M} excluded
 *           from the punctuation run
 *   llama3: the same as qwen2 with \p{N}{1,3}
 *   gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   smollm: every \p{N} character alone (the Digits pre-tokenizer), then gpt2
 */
#include <stdbool.h>

#include "base/error.h"
#include "text/unicode.h"
#include "text/vocab.h"

/* ==== One matcher call sees the whole text as code points with their classes ==== */

typedef struct {
    const uint32_t *cp; /* (n) code points */
    const uint8_t *fl;  /* (n) UCLASS_* flags */
    int64_t n;
} pt_text;

static inline bool is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }

/* The end of the maximal run of \s starting at i. */
static int64_t space_run(const pt_text *t, int64_t i) {
    while (i < t->n && (t->fl[i] & UCLASS_S)) i++;
    return i;
}

/* \s+(?!\S) then \s+, for a whitespace character at i: the whole run when it ends
 * the text or is a single character, else all of it but the last character. */
static int64_t match_spaces(const pt_text *t, int64_t i) {
    int64_t r = space_run(t, i);
    if (r == t->n || r - i == 1) return r;
    return r - 1;
}

/* Case-insensitive contraction after an apostrophe at i: 's 't 're 've 'm 'll 'd.
 * Oniguruma folds U+017F (long s) to s as well. Returns the end, or -1. */
static int64_t match_contraction(const pt_text *t, int64_t i, bool fold) {
    if (i + 1 >= t->n) return -1;
    uint32_t a = t->cp[i + 1];
    uint32_t b = i + 2 < t->n ? t->cp[i + 2] : 0;
    if (fold) {
        if (a == 0x17F) a = 's';
        if (a >= 'A' && a <= 'Z') a += 32;
        if (b >= 'A' && b <= 'Z') b += 32;
    }
    switch (a) {
    case 's': case 't': case 'm': case 'd': return i + 2;
    case 'r': case 'v': return b == 'e' ? i + 3 : -1;
    case 'l': return b == 'l' ? i + 3 : -1;
    default: return -1;
    }
}

/* ==== qwen2 / qwen35 / llama3 ==== */

static int64_t match_qwen(const pt_text *t, int64_t i, pre_kind kind) {
    const uint32_t letter = kind == PRE_QWEN35 ? (UCLASS_L | UCLASS_M) : UCLASS_L;
    const uint32_t word = UCLASS_L | UCLASS_N | (kind == PRE_QWEN35 ? UCLASS_M : 0);
    const int64_t n = t->n;
    uint32_t c = t->cp[i], f = t->fl[i];

    /* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
    if (c == '\'') {
        int64_t e = match_contraction(t, i, true);
        if (e > 0) return e;
    }
    /* [^\r\n\p{L}\p{N}]?\p{L}+  (qwen35: [\p{L}\p{M}]+) */
    {
        int64_t j = -1;
        if (!is_crlf(c) && !(f & (UCLASS_L | UCLASS_N)) && i + 1 < n && (t->fl[i + 1] & letter))
            j = i + 1;
        else if (f & letter)
            j = i;
        if (j >= 0) {
            while (j < n && (t->fl[j] & letter)) j++;
            return j;
        }
    }
    /* \p{N}  (llama3: \p{N}{1,3}) */
    if (f & UCLASS_N) {
        int64_t j = i + 1;
        if (kind == PRE_LLAMA3)
            while (j < n && j < i + 3 && (t->fl[j] & UCLASS_N)) j++;
        return j;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    {
        int64_t j = i;
        if (c == ' ' && i + 1 < n && !(t->fl[i + 1] & (UCLASS_S | word))) j = i + 1;
        if (!(t->fl[j] & (UCLASS_S | word))) {
            while (j < n && !(t->fl[j] & (UCLASS_S | word))) j++;
            while (j < n && is_crlf(t->cp[j])) j++;
            return j;
        }
    }
    /* \s*[\r\n]+ : up to and including the last \r or \n of the whitespace run */
    if (f & UCLASS_S) {
        int64_t r = space_run(t, i);
        for (int64_t k = r - 1; k >= i; k--)
            if (is_crlf(t->cp[k])) return k + 1;
        /* \s+(?!\S) | \s+ */
        return match_spaces(t, i);
    }
    return i + 1; /* unreachable: every character is a letter, digit, space or other */
}

/* ==== gpt2 ==== */

static int64_t match_gpt2(const pt_text *t, int64_t i) {
    const int64_t n = t->n;
    uint32_t c = t->cp[i];
    if (c == '\'') {
        int64_t e = match_contraction(t, i, false);
        if (e > 0) return e;
    }
    /*  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+ : one optional space, then a run of one class */
    int64_t j = i;
    if (c == ' ' && i + 1 < n && !(t->fl[i + 1] & UCLASS_S)) j = i + 1;
    uint32_t f = t->fl[j];
    if (!(f & UCLASS_S) || j > i) {
        if (f & UCLASS_L) {
            while (j < n && (t->fl[j] & UCLASS_L)) j++;
        } else if (f & UCLASS_N) {
            while (j < n && (t->fl[j] & UCLASS_N)) j++;
        } else {
            while (j < n && !(t->fl[j] & (UCLASS_S | UCLASS_L | UCLASS_N))) j++;
        }
        return j;
    }
    /* \s+(?!\S) | \s+ */
    return match_spaces(t, i);
}

/* ==== Driver ==== */

static inline int utf8_len_of(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

/* Splits cp[a .. b) with the kind's regex and emits each piece as bytes counted
 * from *bpos, which advances. Returns false when emit does. */
static bool split_range(pre_kind kind, const pt_text *all, int64_t a, int64_t b, int64_t *bpos,
                        pt_emit_fn emit, void *ctx) {
    pt_text t = {all->cp + a, all->fl + a, b - a};
    int64_t i = 0;
    while (i < t.n) {
        int64_t e = kind == PRE_GPT2 || kind == PRE_SMOLLM ? match_gpt2(&t, i) : match_qwen(&t, i, kind);
        EDDY_ASSERT(e > i && e <= t.n);
        int64_t start = *bpos;
        for (int64_t k = i; k < e; k++) *bpos += utf8_len_of(t.cp[k]);
        if (!emit(ctx, start, *bpos)) return false;
        i = e;
    }
    return true;
}

bool pretok_split(pre_kind kind, const uint8_t *class_table, const uint8_t *s, int64_t n,
                  uint32_t *cps, uint8_t *flags, pt_emit_fn emit, void *ctx) {
    int64_t m = 0;
    for (int64_t i = 0; i < n;) {
        uint32_t cp;
        int k = s[i] < 0x80 ? (cp = s[i], 1) : utf8_decode(s + i, (size_t)(n - i), &cp);
        EDDY_ASSERT(k > 0); /* the caller passes valid UTF-8 */
        cps[m] = cp;
        flags[m] = (uint8_t)uni_flags_in(class_table, cp);
        m++;
        i += k;
    }
    pt_text all = {cps, flags, m};
    int64_t bpos = 0;
    if (kind != PRE_SMOLLM) return split_range(kind, &all, 0, m, &bpos, emit, ctx);
    /* Digits(individual_digits): every numeric character is a piece of its own */
    int64_t a = 0;
    for (int64_t i = 0; i < m; i++) {
        if (!(flags[i] & UCLASS_D)) continue;
        if (!split_range(kind, &all, a, i, &bpos, emit, ctx) ||
            !split_range(kind, &all, i, i + 1, &bpos, emit, ctx))
            return false;
        a = i + 1;
    }
    return split_range(kind, &all, a, m, &bpos, emit, ctx);
}
