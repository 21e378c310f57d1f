/*
 * vocab.c — loading a model's vocabulary from GGUF metadata.
 *
 * Owns: reading and checking the tokenizer.* keys, decoding byte-level token
 * strings to bytes, the text -> id and merge hash tables, the list of tokens
 * matched atomically in input text, and the eddy_vocab_* accessors. Does not
 * own: tokenizing (tokenize.c), decoding (detok.c), chat templates (chat.c).
 *
 * Keys read (as llama.cpp's converter writes them):
 *   tokenizer.ggml.model          "gpt2" (byte-level BPE) or "llama" (SentencePiece)
 *   tokenizer.ggml.pre            pre-tokenizer name (gpt2 files only)
 *   tokenizer.ggml.tokens         arr[str], one per token id
 *   tokenizer.ggml.token_type     arr[int] (optional; NORMAL when absent)
 *   tokenizer.ggml.scores         arr[f32] (SentencePiece)
 *   tokenizer.ggml.merges         arr[str] "left right", in priority order (BPE)
 *   tokenizer.ggml.{bos,eos,unknown,padding,eot}_token_id, add_bos_token,
 *   add_eos_token, add_space_prefix, tokenizer.chat_template
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/log.h"
#include "gguf/gguf.h"
#include "text/unicode.h"
#include "text/vocab.h"

/* ==== Hashing ==== */

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t text_hash(const uint8_t *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull * (n + 1);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
        h = (h << 27) | (h >> 37);
        s += 8, n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)s[i] << (8 * i);
    return mix64(h ^ w);
}

static uint64_t pow2_at_least(uint64_t n) {
    uint64_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

int32_t vocab_find(const eddy_vocab *v, const uint8_t *s, size_t n) {
    uint64_t mask = v->map_cap - 1, hash = text_hash(s, n);
    uint32_t tag = (uint32_t)(hash >> 32);
    for (uint64_t h = hash & mask;; h = (h + 1) & mask) {
        vocab_slot sl = v->map[h];
        if (sl.id < 0) return -1;
        if (sl.tag == tag && (size_t)(v->off[sl.id + 1] - v->off[sl.id]) == n &&
            memcmp(v->bytes + v->off[sl.id], s, n) == 0)
            return sl.id;
    }
}

/* Inserts id under its bytes; a later token with the same bytes replaces an earlier
 * one (as the reference tokenizers' vocabulary maps do). hash: text_hash of its
 * bytes. Returns the replaced id or -1. */
#define MAP_BATCH 32

static int32_t map_insert(eddy_vocab *v, int32_t id, uint64_t hash) {
    int64_t n;
    const uint8_t *s = vocab_token_bytes(v, id, &n);
    uint64_t mask = v->map_cap - 1;
    uint32_t tag = (uint32_t)(hash >> 32);
    for (uint64_t h = hash & mask;; h = (h + 1) & mask) {
        vocab_slot *sl = &v->map[h];
        if (sl->id < 0) {
            sl->id = id, sl->tag = tag;
            return -1;
        }
        if (sl->tag != tag) continue;
        int32_t old = sl->id;
        if (v->off[old + 1] - v->off[old] == n && memcmp(v->bytes + v->off[old], s, (size_t)n) == 0) {
            sl->id = id;
            return old;
        }
        v->map_tags_unique = false; /* two different texts, one tag, one chain */
    }
}

static inline uint64_t merge_key(int32_t l, int32_t r) { return (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1; }
static inline uint64_t merge_slot(uint64_t key) { return mix64(key); }

const vocab_merge *vocab_find_merge(const eddy_vocab *v, int32_t left, int32_t right) {
    uint64_t key = merge_key(left, right), mask = v->merges_cap - 1;
    for (uint64_t h = merge_slot(key) & mask;; h = (h + 1) & mask) {
        const vocab_merge *m = &v->merges[h];
        if (m->key == key) return m;
        if (m->key == 0) return NULL;
    }
}

void vocab_prefetch_merge(const eddy_vocab *v, int32_t left, int32_t right) {
    __builtin_prefetch(&v->merges[merge_slot(merge_key(left, right)) & (v->merges_cap - 1)]);
}

static void merge_insert(eddy_vocab *v, int32_t left, int32_t right, uint32_t rank, int32_t result) {
    uint64_t key = merge_key(left, right), mask = v->merges_cap - 1;
    for (uint64_t h = merge_slot(key) & mask;; h = (h + 1) & mask) {
        vocab_merge *m = &v->merges[h];
        if (m->key == 0) v->n_merges++;
        if (m->key == 0 || m->key == key) { /* a repeated pair: the later line wins */
            m->key = key;
            m->rank = rank;
            m->result = result;
            return;
        }
    }
}

/* ==== GPT-2 byte-level encoding ==== */

/* GPT-2 maps every byte to a printable character: the printable Latin-1 bytes
 * (! .. ~, ¡ .. ¬, ® .. ÿ) to themselves and the other 68 to U+0100.. in order.
 * byte_of[c] inverts it for c < 0x144 (-1: not a byte-level character). */
static void byte_level_tables(int16_t byte_of[0x144], uint32_t char_of[256]) {
    for (int c = 0; c < 0x144; c++) byte_of[c] = -1;
    int next = 0x100;
    for (int b = 0; b < 256; b++) {
        bool self = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        uint32_t c = self ? (uint32_t)b : (uint32_t)next++;
        char_of[b] = c;
        byte_of[c] = (int16_t)b;
    }
}

/* Decodes a byte-level string into out (room for n bytes); returns the length, or
 * -1 when a character is not part of the encoding. */
static int64_t byte_level_decode(const int16_t byte_of[0x144], const uint8_t *s, size_t n, uint8_t *out) {
    int64_t len = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        if (c >= 0x21 && c <= 0x7E) { /* printable ASCII stands for itself */
            out[len++] = c;
            i++;
            continue;
        }
        /* every other character of the encoding is U+00A1 .. U+0143: two bytes, C2..C5 */
        if (c < 0xC2 || c > 0xC5 || i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return -1;
        uint32_t cp = ((uint32_t)(c & 0x1F) << 6) | (s[i + 1] & 0x3F);
        if (cp >= 0x144 || byte_of[cp] < 0) return -1;
        out[len++] = (uint8_t)byte_of[cp];
        i += 2;
    }
    return len;
}

/* ==== Loading ==== */

typedef struct {
    const char *name;
    pre_kind kind;
    bool nfc, ignore_merges;
} pre_info;

/* The pre-tokenizer names eddy knows. "default" is what llama.cpp's converter
 * writes for an unrecognised BPE tokenizer; llama.cpp then uses the GPT-2 regex. */
static const pre_info pre_table[] = {
    {"qwen2", PRE_QWEN2, true, false},
    {"qwen35", PRE_QWEN35, true, false},
    {"llama-bpe", PRE_LLAMA3, false, true},
    {"llama3", PRE_LLAMA3, false, true},
    {"llama-v3", PRE_LLAMA3, false, true},
    {"smollm", PRE_SMOLLM, false, false},
    {"gpt-2", PRE_GPT2, false, false},
    {"default", PRE_GPT2, false, false},
};

static const char *pre_names(void) {
    return "qwen2, qwen35, llama-bpe, llama3, llama-v3, smollm, gpt-2, default";
}

/* Specials by first byte, then longest first, then id. */
static int cmp_special(const void *pa, const void *pb) {
    const vocab_special *a = pa, *b = pb;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static eddy_status read_id(const gguf_file *f, const char *key, int64_t n_tokens, int32_t *out,
                           eddy_error *err) {
    *out = -1;
    const gguf_value *val = gguf_get(f, key);
    if (!val) return EDDY_OK;
    if (!gguf_type_is_int(val->type))
        return eddy_error_set(err, EDDY_ERR_FORMAT, "%s: expected an integer, file has %s", key,
                              gguf_type_name(val->type));
    int64_t id = gguf_get_int(f, key, -1);
    /* llama.cpp writes -1 (or 0xFFFFFFFF as u32) for "none" */
    if (id == -1 || id == 0xFFFFFFFFll) return EDDY_OK;
    if (id < 0 || id >= n_tokens)
        return eddy_error_set(err, EDDY_ERR_FORMAT, "%s: token id %lld is outside the vocabulary (%lld tokens)",
                              key, (long long)id, (long long)n_tokens);
    *out = (int32_t)id;
    return EDDY_OK;
}

static char *dup_token_text(const eddy_vocab *v, int32_t id) {
    int64_t n = 0;
    const uint8_t *s = id >= 0 ? vocab_token_bytes(v, id, &n) : (const uint8_t *)"";
    char *t = eddy_malloc((size_t)n + 1);
    if (!t) return NULL;
    memcpy(t, s, (size_t)n);
    t[n] = '\0';
    return t;
}

/* shadowed[i]: a later token has the same bytes, so text never maps to token i. */
/* Merge rules are resolved in batches: first every rule of the batch is decoded and
 * the hash-table slots it will touch are prefetched, then the rules are resolved
 * and inserted. The tables are far larger than the caches, so this overlaps the
 * misses that otherwise dominate loading. */
#define MERGE_BATCH 32

typedef struct {
    int64_t na, nb;  /* decoded lengths (-1: not byte-level) */
    size_t off;      /* into the batch buffer */
    uint64_t ha, hb; /* text hashes of the two halves */
    int32_t a, b, r; /* the halves' tokens and the result (-1: none) */
} merge_rule;

static inline int32_t find_hashed(const eddy_vocab *v, const uint8_t *s, size_t n, uint64_t hash, bool trusted) {
    uint64_t mask = v->map_cap - 1;
    uint32_t tag = (uint32_t)(hash >> 32);
    for (uint64_t h = hash & mask;; h = (h + 1) & mask) {
        vocab_slot sl = v->map[h];
        if (sl.id < 0) return -1;
        if (sl.tag != tag) continue;
        if (trusted || ((size_t)(v->off[sl.id + 1] - v->off[sl.id]) == n && memcmp(v->bytes + v->off[sl.id], s, n) == 0))
            return sl.id;
    }
}

/* shadowed[i]: a later token has the same bytes, so text never maps to token i. */
static eddy_status load_merges(eddy_vocab *v, const gguf_value *merges, const int16_t byte_of[0x144],
                               const uint8_t *shadowed, eddy_error *err) {
    uint64_t n = merges->arr.n;
    v->merges_cap = pow2_at_least(n + n / 2 + 1);
    v->merges = eddy_calloc(v->merges_cap, sizeof *v->merges);
    size_t cap = 4096;
    uint8_t *buf = eddy_malloc(cap);
    if (!v->merges || !buf) {
        eddy_free(buf);
        return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory loading %llu merges", (unsigned long long)n);
    }
    int64_t skipped = 0;
    int32_t prev = -1;
    bool trusted = v->map_tags_unique;
    merge_rule rules[MERGE_BATCH];
    for (uint64_t i0 = 0; i0 < n; i0 += MERGE_BATCH) {
        uint64_t nr = n - i0 < MERGE_BATCH ? n - i0 : MERGE_BATCH;
        /* 1: decode, hash, prefetch */
        size_t used = 0;
        for (uint64_t k = 0; k < nr; k++) {
            gguf_str m = gguf_arr_str(merges, i0 + k);
            const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
            if (!sp) {
                eddy_free(buf);
                return eddy_error_set(err, EDDY_ERR_FORMAT, "tokenizer.ggml.merges[%llu]: \"%.*s\" is not \"left right\"",
                                      (unsigned long long)(i0 + k), (int)(m.len > 40 ? 40 : m.len), m.ptr);
            }
            size_t la = (size_t)(sp - m.ptr), lb = m.len - la - 1;
            if (used + la + lb > cap) {
                while (used + la + lb > cap) cap *= 2;
                uint8_t *p = eddy_realloc(buf, cap);
                if (!p) {
                    eddy_free(buf);
                    return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory loading merges");
                }
                buf = p;
            }
            merge_rule *r = &rules[k];
            r->off = used;
            r->na = byte_level_decode(byte_of, (const uint8_t *)m.ptr, la, buf + used);
            r->nb = r->na < 0 ? -1 : byte_level_decode(byte_of, (const uint8_t *)sp + 1, lb, buf + used + r->na);
            if (r->nb < 0) {
                r->a = r->b = r->r = -1;
                continue;
            }
            used += (size_t)(r->na + r->nb);
            r->ha = text_hash(buf + r->off, (size_t)r->na);
            r->hb = text_hash(buf + r->off + r->na, (size_t)r->nb);
            __builtin_prefetch(&v->map[r->ha & (v->map_cap - 1)]);
            __builtin_prefetch(&v->map[r->hb & (v->map_cap - 1)]);
        }
        /* 2: resolve and insert */
        for (uint64_t k = 0; k < nr; k++) {
            merge_rule *ru = &rules[k];
            int32_t a = -1, b = -1, r = -1;
            if (ru->nb >= 0) {
                const uint8_t *t = buf + ru->off;
                size_t nab = (size_t)(ru->na + ru->nb);
                a = find_hashed(v, t, (size_t)ru->na, ru->ha, trusted);
                b = find_hashed(v, t + ru->na, (size_t)ru->nb, ru->hb, trusted);
                /* Vocabularies trained by BPE list merge results in merge order: try the
                 * token after the previous result before hashing. */
                int32_t g = prev + 1;
                if (g > 0 && g < v->n_tokens && (size_t)(v->off[g + 1] - v->off[g]) == nab &&
                    memcmp(v->bytes + v->off[g], t, nab) == 0 &&
                    (v->type[g] == TOKTYPE_NORMAL || v->type[g] == TOKTYPE_UNDEFINED) && !shadowed[g])
                    r = g;
                else
                    r = vocab_find(v, t, nab);
            }
            ru->a = a, ru->b = b, ru->r = r;
            if (a < 0 || b < 0 || r < 0) continue;
            __builtin_prefetch(&v->merges[merge_slot(merge_key(a, b)) & (v->merges_cap - 1)], 1);
            prev = r;
        }
        /* 3: insert */
        for (uint64_t k = 0; k < nr; k++) {
            merge_rule *ru = &rules[k];
            if (ru->a < 0 || ru->b < 0 || ru->r < 0) { /* the reference would refuse the file; skip the line */
                skipped++;
                continue;
            }
            merge_insert(v, ru->a, ru->b, (uint32_t)(i0 + k), ru->r);
        }
    }
    eddy_free(buf);
    if (skipped) LOG_WARN("vocabulary: %lld merges name tokens that do not exist; ignored", (long long)skipped);
    return EDDY_OK;
}

eddy_status eddy_vocab_load(const eddy_gguf *f, eddy_vocab **out, eddy_error *err) {
    if (!f || !out) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_vocab_load: NULL argument");
    *out = NULL;
    const char *model = gguf_get_str(f, "tokenizer.ggml.model", NULL);
    if (!model) return eddy_error_set(err, EDDY_ERR_NOT_FOUND, "this file has no tokenizer (tokenizer.ggml.model is missing)");
    vocab_kind kind;
    if (!strcmp(model, "gpt2")) kind = VOCAB_BPE;
    else if (!strcmp(model, "llama")) kind = VOCAB_SPM;
    else
        return eddy_error_set(err, EDDY_ERR_UNSUPPORTED,
                              "tokenizer.ggml.model \"%s\" is not supported (supported: gpt2, llama)", model);

    const gguf_value *tokens = gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING);
    if (!tokens) return eddy_error_set(err, EDDY_ERR_FORMAT, "tokenizer.ggml.tokens is missing or not an array of strings");
    int64_t n = (int64_t)tokens->arr.n;
    if (n < 1 || n > INT32_MAX - 1)
        return eddy_error_set(err, EDDY_ERR_FORMAT, "tokenizer.ggml.tokens: %lld tokens is out of range", (long long)n);
    const gguf_value *types = gguf_get(f, "tokenizer.ggml.token_type");
    if (types && (types->type != GGUF_TYPE_ARRAY || !gguf_type_is_int(types->arr.elem_type) || (int64_t)types->arr.n != n))
        return eddy_error_set(err, EDDY_ERR_FORMAT, "tokenizer.ggml.token_type: expected %lld integers", (long long)n);
    const gguf_value *scores = gguf_get(f, "tokenizer.ggml.scores");
    if (scores && (scores->type != GGUF_TYPE_ARRAY || (scores->arr.elem_type != GGUF_TYPE_FLOAT32 &&
                                                        scores->arr.elem_type != GGUF_TYPE_FLOAT64) ||
                   (int64_t)scores->arr.n != n))
        return eddy_error_set(err, EDDY_ERR_FORMAT, "tokenizer.ggml.scores: expected %lld floats", (long long)n);
    const gguf_value *merges = NULL;
    if (kind == VOCAB_BPE) {
        merges = gguf_get(f, "tokenizer.ggml.merges");
        if (!merges || merges->type != GGUF_TYPE_ARRAY || merges->arr.elem_type != GGUF_TYPE_STRING)
            return eddy_error_set(err, EDDY_ERR_FORMAT, "tokenizer.ggml.merges is missing or not an array of strings");
    }

    eddy_vocab *v = eddy_calloc(1, sizeof *v);
    if (!v) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory loading the vocabulary");
    eddy_status st = EDDY_OK;
    uint8_t *shadowed = NULL; /* (n) during loading, see load_merges */
    v->kind = kind;
    v->n_tokens = n;
    v->bos = v->eos = v->unk = v->pad = v->eot = -1;

    /* pre-tokenizer */
    if (kind == VOCAB_BPE) {
        const char *pre = gguf_get_str(f, "tokenizer.ggml.pre", "default");
        const pre_info *pi = NULL;
        for (size_t i = 0; i < sizeof pre_table / sizeof pre_table[0]; i++)
            if (!strcmp(pre, pre_table[i].name)) pi = &pre_table[i];
        if (!pi) {
            st = eddy_error_set(err, EDDY_ERR_UNSUPPORTED, "tokenizer.ggml.pre \"%s\" is not supported (supported: %s)",
                                pre, pre_names());
            goto fail;
        }
        v->pre = pi->kind;
        v->nfc = pi->nfc;
        v->ignore_merges = pi->ignore_merges;
        snprintf(v->pre_name, sizeof v->pre_name, "%s", pi->name);
    } else {
        snprintf(v->pre_name, sizeof v->pre_name, "%s", "spm");
    }

    /* token types and bytes */
    int16_t byte_of[0x144];
    uint32_t char_of[256];
    byte_level_tables(byte_of, char_of);
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) total += gguf_arr_str(tokens, (uint64_t)i).len;
    v->bytes = eddy_malloc(total ? total : 1);
    v->off = eddy_malloc((size_t)(n + 1) * sizeof *v->off);
    v->type = eddy_malloc((size_t)n);
    if (scores) v->score = eddy_malloc((size_t)n * sizeof *v->score);
    if (!v->bytes || !v->off || !v->type || (scores && !v->score)) goto nomem;
    int64_t pos = 0;
    bool types_i32 = types && types->arr.elem_type == GGUF_TYPE_INT32;
    for (int64_t i = 0; i < n; i++) {
        gguf_str s = gguf_arr_str(tokens, (uint64_t)i);
        int64_t t = TOKTYPE_NORMAL;
        if (types_i32) {
            int32_t x;
            memcpy(&x, types->arr.raw + 4 * i, 4); /* little-endian host, as everywhere in eddy */
            t = x;
        } else if (types) {
            t = gguf_arr_int(types, (uint64_t)i);
        }
        if (t < 0 || t > TOKTYPE_BYTE) t = TOKTYPE_NORMAL;
        v->type[i] = (uint8_t)t;
        if (v->score) v->score[i] = (float)gguf_arr_float(scores, (uint64_t)i);
        v->off[i] = pos;
        int64_t len = -1;
        bool byte_level = kind == VOCAB_BPE && t != TOKTYPE_CONTROL && t != TOKTYPE_USER_DEFINED &&
                          t != TOKTYPE_UNKNOWN;
        if (byte_level) len = byte_level_decode(byte_of, (const uint8_t *)s.ptr, s.len, v->bytes + pos);
        if (len < 0) { /* literal text (or not byte-level after all: keep it as it is) */
            memcpy(v->bytes + pos, s.ptr, s.len);
            len = (int64_t)s.len;
        }
        pos += len;
    }
    v->off[n] = pos;

    /* text -> id: the tokens text can turn into (not control/unknown/byte ones) */
    v->map_cap = pow2_at_least((uint64_t)n + (uint64_t)n / 2);
    v->map = eddy_malloc(v->map_cap * sizeof *v->map);
    if (!v->map) goto nomem;
    for (uint64_t i = 0; i < v->map_cap; i++) v->map[i].id = -1;
    v->map_tags_unique = true;
    shadowed = eddy_calloc((size_t)n, 1);
    if (!shadowed) goto nomem;
    for (int64_t i0 = 0; i0 < n; i0 += MAP_BATCH) { /* hash and prefetch a batch, then insert it */
        int64_t i1 = n - i0 < MAP_BATCH ? n : i0 + MAP_BATCH;
        uint64_t hashes[MAP_BATCH];
        for (int64_t i = i0; i < i1; i++) {
            hashes[i - i0] = text_hash(v->bytes + v->off[i], (size_t)(v->off[i + 1] - v->off[i]));
            __builtin_prefetch(&v->map[hashes[i - i0] & (v->map_cap - 1)], 1);
        }
        for (int64_t i = i0; i < i1; i++) {
            int t = v->type[i];
            if (v->off[i + 1] == v->off[i]) continue;
            if (t == TOKTYPE_NORMAL || t == TOKTYPE_UNDEFINED || (kind == VOCAB_SPM && t == TOKTYPE_USER_DEFINED)) {
                int32_t old = map_insert(v, (int32_t)i, hashes[i - i0]);
                if (old >= 0) shadowed[old] = 1;
            }
        }
    }

    /* single bytes */
    for (int b = 0; b < 256; b++) {
        v->byte_token[b] = -1;
        if (kind == VOCAB_BPE) {
            uint8_t one = (uint8_t)b;
            v->byte_token[b] = vocab_find(v, &one, 1);
        }
    }
    if (kind == VOCAB_SPM) {
        for (int64_t i = 0; i < n; i++) {
            int64_t len;
            const uint8_t *s = vocab_token_bytes(v, (int32_t)i, &len);
            unsigned hb;
            char tail;
            if (v->type[i] == TOKTYPE_BYTE && len == 6 && sscanf((const char *)s, "<0x%2X%c", &hb, &tail) == 2 &&
                tail == '>' && hb < 256 && v->byte_token[hb] < 0)
                v->byte_token[hb] = (int32_t)i;
        }
    }

    /* merges */
    if (kind == VOCAB_BPE && (st = load_merges(v, merges, byte_of, shadowed, err)) != EDDY_OK) goto fail;
    eddy_free(shadowed);
    shadowed = NULL;

    /* tokens matched atomically in input text */
    int64_t ns = 0;
    for (int64_t i = 0; i < n; i++) {
        int t = v->type[i];
        if ((t == TOKTYPE_CONTROL || t == TOKTYPE_USER_DEFINED || t == TOKTYPE_UNKNOWN) && v->off[i + 1] > v->off[i]) ns++;
    }
    if (ns) {
        v->specials = eddy_malloc((size_t)ns * sizeof *v->specials);
        if (!v->specials) goto nomem;
        for (int64_t i = 0; i < n; i++) {
            int t = v->type[i];
            int64_t len = v->off[i + 1] - v->off[i];
            if ((t == TOKTYPE_CONTROL || t == TOKTYPE_USER_DEFINED || t == TOKTYPE_UNKNOWN) && len > 0) {
                vocab_special *sp = &v->specials[v->n_specials++];
                sp->id = (int32_t)i;
                sp->len = len > INT32_MAX ? INT32_MAX : (int32_t)len;
                sp->user = t == TOKTYPE_USER_DEFINED;
                sp->first = v->bytes[v->off[i]];
            }
        }
        qsort(v->specials, (size_t)v->n_specials, sizeof *v->specials, cmp_special);
    }
    {
        int64_t k = 0;
        for (int b = 0; b <= 256; b++) {
            while (b < 256 && k < v->n_specials && v->specials[k].first < b) k++;
            v->special_first[b] = k;
        }
        v->special_first[256] = v->n_specials;
        v->special_byte = -1;
        if (v->n_specials && v->specials[0].first == v->specials[v->n_specials - 1].first)
            v->special_byte = v->specials[0].first;
    }

    /* special ids and flags */
    if ((st = read_id(f, "tokenizer.ggml.bos_token_id", n, &v->bos, err)) ||
        (st = read_id(f, "tokenizer.ggml.eos_token_id", n, &v->eos, err)) ||
        (st = read_id(f, "tokenizer.ggml.unknown_token_id", n, &v->unk, err)) ||
        (st = read_id(f, "tokenizer.ggml.padding_token_id", n, &v->pad, err)) ||
        (st = read_id(f, "tokenizer.ggml.eot_token_id", n, &v->eot, err)))
        goto fail;
    v->add_bos = gguf_get_bool(f, "tokenizer.ggml.add_bos_token", kind == VOCAB_SPM || v->pre == PRE_LLAMA3);
    v->add_eos = gguf_get_bool(f, "tokenizer.ggml.add_eos_token", false);
    v->add_space_prefix = kind == VOCAB_SPM && gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", true);
    if (kind == VOCAB_SPM && v->unk < 0) {
        for (int64_t i = 0; i < n && v->unk < 0; i++)
            if (v->type[i] == TOKTYPE_UNKNOWN) v->unk = (int32_t)i;
    }

    const char *tmpl = gguf_get_str(f, "tokenizer.chat_template", NULL);
    if (tmpl) {
        size_t tl = strlen(tmpl);
        v->chat_template = eddy_malloc(tl + 1);
        if (!v->chat_template) goto nomem;
        memcpy(v->chat_template, tmpl, tl + 1);
    }
    v->bos_text = dup_token_text(v, v->bos);
    v->eos_text = dup_token_text(v, v->eos);
    if (!v->bos_text || !v->eos_text) goto nomem;
    *out = v;
    return EDDY_OK;

nomem:
    st = eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory loading a vocabulary of %lld tokens", (long long)n);
fail:
    eddy_free(shadowed);
    eddy_vocab_free(v);
    return st;
}

void eddy_vocab_free(eddy_vocab *v) {
    if (!v) return;
    eddy_free(v->bytes);
    eddy_free(v->off);
    eddy_free(v->type);
    eddy_free(v->score);
    eddy_free(v->map);
    eddy_free(v->merges);
    eddy_free(v->specials);
    eddy_free(v->chat_template);
    eddy_free(v->bos_text);
    eddy_free(v->eos_text);
    eddy_free(v);
}

/* ==== Accessors ==== */

int64_t eddy_vocab_n_tokens(const eddy_vocab *v) { return v->n_tokens; }
eddy_token eddy_vocab_bos(const eddy_vocab *v) { return v->bos; }
eddy_token eddy_vocab_eos(const eddy_vocab *v) { return v->eos; }
eddy_token eddy_vocab_eot(const eddy_vocab *v) { return v->eot; }
const char *eddy_vocab_chat_template(const eddy_vocab *v) { return v->chat_template; }

const char *eddy_vocab_describe(const eddy_vocab *v) {
    return v->kind == VOCAB_SPM ? "llama (SentencePiece BPE)" : v->pre_name;
}

bool eddy_vocab_is_control(const eddy_vocab *v, eddy_token t) {
    return t >= 0 && t < v->n_tokens && (v->type[t] == TOKTYPE_CONTROL || v->type[t] == TOKTYPE_UNKNOWN);
}

const char *eddy_vocab_token_text(const eddy_vocab *v, eddy_token t, size_t *len) {
    if (t < 0 || t >= v->n_tokens) {
        *len = 0;
        return NULL;
    }
    int64_t n;
    const uint8_t *s = vocab_token_bytes(v, t, &n);
    *len = (size_t)n;
    return (const char *)s;
}
