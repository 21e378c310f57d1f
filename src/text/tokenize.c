/*
 * tokenize.c — text to token ids: eddy_tokenize.
 *
 * Owns: the tokenization pipeline and both merge algorithms.
 *
 *   text ─► special tokens matched atomically (leftmost, longest first)
 *        ─► each fragment between them split into valid UTF-8 runs; every byte of
 *           an invalid sequence becomes its own byte token
 *        ─► each run: BPE files: NFC (when the tokenizer declares it), the
 *           pre-tokenizer (pretok.c), then byte-level BPE per piece, with a cache
 *           of pieces already seen in this call;
 *           SentencePiece files: spaces become U+2581 (one is put in front of the
 *           text), then score-ordered BPE over characters with byte fallback
 *
 * Byte-level BPE follows Hugging Face tokenizers: start from one token per byte,
 * repeatedly apply the merge of lowest rank, leftmost first. SentencePiece BPE
 * follows sentencepiece's bpe_model: start from one symbol per character,
 * repeatedly join the adjacent pair whose concatenation is a piece with the
 * highest score, leftmost first; symbols that are not pieces fall back to byte
 * tokens <0xNN> (or the unknown token).
 *
 * All state lives in a per-call context, so one vocabulary serves any number of
 * threads at once.
 */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "text/unicode.h"
#include "text/vocab.h"

/* ==== Growable arrays ==== */

static bool grow(void **p, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return true;
    int64_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    size_t bytes;
    if (!eddy_mul_size((size_t)c, elem, &bytes)) return false;
    void *q = eddy_realloc(*p, bytes);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

/* ==== Per-call context ==== */

typedef struct {           /* 16 bytes, so that the table stays in cache */
    uint32_t tag;          /* high half of the piece's hash, | 1; 0 marks an empty slot */
    uint32_t key_off;      /* into cache_keys */
    uint32_t ids_off;      /* into cache_ids */
    uint16_t key_len, n_ids;
} cache_entry;

typedef struct {
    int32_t id;
    int32_t prev, next; /* neighbour symbol indices, -1 at the ends */
    int32_t start, len; /* SPM: bytes of the symbol within the text */
} bpe_sym;

typedef struct {
    float score;        /* SPM: the joined piece's score (higher first); BPE: unused */
    uint32_t rank;      /* BPE: merge rank (lower first) */
    int32_t left, right; /* symbol indices */
    int32_t a, b;        /* BPE: the ids the pair had when queued; SPM: b is the joined length */
} bpe_pair;

typedef struct {
    const eddy_vocab *v;
    const uint8_t *classes; /* uni_flag_table() */
    unsigned flags;
    bool oom;

    int32_t *ids; /* output */
    int64_t n_ids, cap_ids;

    uint8_t *norm; /* NFC output */
    size_t norm_n, norm_cap;
    uni_cpbuf nfc_work;
    uint32_t *cps; /* pre-tokenizer scratch */
    int64_t cap_cps;
    uint8_t *cfl;
    int64_t cap_cfl;
    const uint8_t *piece_base; /* the text the pre-tokenizer's byte offsets refer to */

    bpe_sym *syms;
    int64_t cap_syms;
    bpe_pair *heap;
    int64_t n_heap, cap_heap;
    uint8_t *spm_text;
    int64_t cap_spm_text;

    cache_entry *cache; /* open addressing on the hash's low bits */
    int64_t cache_cap, cache_n;
    uint8_t *cache_keys;
    int64_t cache_keys_n, cache_keys_cap;
    int32_t *cache_ids;
    int64_t cache_ids_n, cache_ids_cap;
} tok_ctx;

static bool emit(tok_ctx *c, int32_t id) {
    if (!grow((void **)&c->ids, &c->cap_ids, c->n_ids + 1, sizeof *c->ids)) return c->oom = true, false;
    c->ids[c->n_ids++] = id;
    return true;
}

static void ctx_free(tok_ctx *c) {
    eddy_free(c->ids);
    eddy_free(c->norm);
    uni_cpbuf_free(&c->nfc_work);
    eddy_free(c->cps);
    eddy_free(c->cfl);
    eddy_free(c->syms);
    eddy_free(c->heap);
    eddy_free(c->spm_text);
    eddy_free(c->cache);
    eddy_free(c->cache_keys);
    eddy_free(c->cache_ids);
}

/* ==== Pair heap (shared by both algorithms) ==== */

/* BPE: lower rank first; SPM: higher score first; then the leftmost. */
static inline bool pair_before(const tok_ctx *c, const bpe_pair *x, const bpe_pair *y) {
    if (c->v->kind == VOCAB_BPE) {
        if (x->rank != y->rank) return x->rank < y->rank;
    } else {
        if (x->score != y->score) return x->score > y->score;
    }
    return x->left < y->left;
}

static bool heap_push(tok_ctx *c, bpe_pair p) {
    if (!grow((void **)&c->heap, &c->cap_heap, c->n_heap + 1, sizeof *c->heap)) return c->oom = true, false;
    int64_t i = c->n_heap++;
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!pair_before(c, &p, &c->heap[parent])) break;
        c->heap[i] = c->heap[parent];
        i = parent;
    }
    c->heap[i] = p;
    return true;
}

static bpe_pair heap_pop(tok_ctx *c) {
    bpe_pair top = c->heap[0];
    bpe_pair last = c->heap[--c->n_heap];
    int64_t i = 0, n = c->n_heap;
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, best = i;
        const bpe_pair *bp = &last;
        if (l < n && pair_before(c, &c->heap[l], bp)) best = l, bp = &c->heap[l];
        if (r < n && pair_before(c, &c->heap[r], bp)) best = r;
        if (best == i) break;
        c->heap[i] = c->heap[best];
        i = best;
    }
    if (n > 0) c->heap[i] = last;
    return top;
}

/* ==== Byte-level BPE ==== */

static bool bpe_queue(tok_ctx *c, int32_t left) {
    if (left < 0) return true;
    int32_t right = c->syms[left].next;
    if (right < 0) return true;
    const vocab_merge *m = vocab_find_merge(c->v, c->syms[left].id, c->syms[right].id);
    if (!m) return true;
    bpe_pair p = {0, m->rank, left, right, c->syms[left].id, c->syms[right].id};
    return heap_push(c, p);
}

/* Short words: the same merges found by a scan instead of a heap. rank[i] is the
 * rank of the pair that starts at symbol i (UINT32_MAX: none); the lowest rank
 * wins, the leftmost among equals, exactly as the heap orders them. */
#define SHORT_WORD 48

static uint32_t pair_rank(const eddy_vocab *v, const bpe_sym *syms, int32_t i, int32_t *result) {
    int32_t r = syms[i].next;
    if (r < 0) return UINT32_MAX;
    const vocab_merge *m = vocab_find_merge(v, syms[i].id, syms[r].id);
    if (!m) return UINT32_MAX;
    *result = m->result;
    return m->rank;
}

static void bpe_short(tok_ctx *c, int32_t ns) {
    uint32_t rank[SHORT_WORD];
    int32_t result[SHORT_WORD];
    bpe_sym *sy = c->syms;
    for (int32_t i = 0; i + 1 < ns; i++) vocab_prefetch_merge(c->v, sy[i].id, sy[i + 1].id);
    for (int32_t i = 0; i < ns; i++) rank[i] = pair_rank(c->v, sy, i, &result[i]);
    for (;;) {
        int32_t best = -1;
        uint32_t best_rank = UINT32_MAX;
        for (int32_t i = 0; i >= 0; i = sy[i].next)
            if (rank[i] < best_rank) best_rank = rank[i], best = i;
        if (best < 0) return;
        int32_t r = sy[best].next;
        sy[best].id = result[best];
        sy[best].next = sy[r].next;
        if (sy[r].next >= 0) sy[sy[r].next].prev = best;
        rank[best] = pair_rank(c->v, sy, best, &result[best]);
        if (sy[best].prev >= 0) rank[sy[best].prev] = pair_rank(c->v, sy, sy[best].prev, &result[sy[best].prev]);
    }
}

/* Merges the bytes w[0 .. n) and appends the resulting ids to the output. */
static bool bpe_word(tok_ctx *c, const uint8_t *w, int64_t n) {
    const eddy_vocab *v = c->v;
    if (v->ignore_merges) {
        int32_t id = vocab_find(v, w, (size_t)n);
        if (id >= 0) return emit(c, id);
    }
    if (n > INT32_MAX) return c->oom = true, false;
    if (!grow((void **)&c->syms, &c->cap_syms, n, sizeof *c->syms)) return c->oom = true, false;
    int32_t ns = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t id = v->byte_token[w[i]];
        if (id < 0) continue; /* a byte the vocabulary lacks: dropped, as the reference does */
        c->syms[ns] = (bpe_sym){id, ns - 1, ns + 1, 0, 0};
        ns++;
    }
    if (ns == 0) return true;
    c->syms[ns - 1].next = -1;
    if (ns <= SHORT_WORD) {
        bpe_short(c, ns);
        for (int32_t i = 0; i >= 0; i = c->syms[i].next)
            if (!emit(c, c->syms[i].id)) return false;
        return true;
    }
    c->n_heap = 0;
    for (int32_t i = 0; i + 1 < ns; i++)
        if (!bpe_queue(c, i)) return false;
    while (c->n_heap > 0) {
        bpe_pair p = heap_pop(c);
        bpe_sym *l = &c->syms[p.left];
        if (l->id != p.a || l->next != p.right) continue; /* stale */
        bpe_sym *r = &c->syms[p.right];
        if (r->id != p.b) continue;
        const vocab_merge *m = vocab_find_merge(v, p.a, p.b);
        l->id = m->result;
        l->next = r->next;
        if (r->next >= 0) c->syms[r->next].prev = p.left;
        r->id = -1;
        if (!bpe_queue(c, l->prev) || !bpe_queue(c, p.left)) return false;
    }
    for (int32_t i = 0; i >= 0; i = c->syms[i].next)
        if (!emit(c, c->syms[i].id)) return false;
    return true;
}

/* ==== Piece cache ==== */

#define CACHE_MAX_KEY 256 /* longer pieces are merged every time */

static bool cache_grow(tok_ctx *c) {
    int64_t cap = c->cache_cap ? c->cache_cap * 2 : 4096;
    cache_entry *t = eddy_calloc((size_t)cap, sizeof *t);
    if (!t) return false;
    for (int64_t i = 0; i < c->cache_cap; i++) {
        cache_entry *e = &c->cache[i];
        if (!e->tag) continue;
        uint64_t hash = text_hash(c->cache_keys + e->key_off, e->key_len);
        for (uint64_t h = hash & (uint64_t)(cap - 1);; h = (h + 1) & (uint64_t)(cap - 1))
            if (!t[h].tag) {
                t[h] = *e;
                break;
            }
    }
    eddy_free(c->cache);
    c->cache = t;
    c->cache_cap = cap;
    return true;
}

static bool bpe_piece(void *ctx, int64_t start, int64_t end) {
    tok_ctx *c = ctx;
    const uint8_t *w = c->piece_base + start;
    int64_t n = end - start;
    if (n > CACHE_MAX_KEY) return bpe_word(c, w, n);
    if (c->cache_keys_n + n >= UINT32_MAX || c->cache_ids_n + n >= UINT32_MAX) return bpe_word(c, w, n); /* full */
    if (c->cache_n * 2 >= c->cache_cap && !cache_grow(c)) return c->oom = true, false;
    uint64_t hash = text_hash(w, (size_t)n), mask = (uint64_t)c->cache_cap - 1;
    uint32_t tag = (uint32_t)(hash >> 32) | 1;
    uint64_t h = hash & mask;
    for (;; h = (h + 1) & mask) {
        cache_entry *e = &c->cache[h];
        if (!e->tag) break;
        if (e->tag == tag && e->key_len == n && memcmp(c->cache_keys + e->key_off, w, (size_t)n) == 0) {
            if (!grow((void **)&c->ids, &c->cap_ids, c->n_ids + e->n_ids, sizeof *c->ids))
                return c->oom = true, false;
            memcpy(c->ids + c->n_ids, c->cache_ids + e->ids_off, (size_t)e->n_ids * sizeof *c->ids);
            c->n_ids += e->n_ids;
            return true;
        }
    }
    int64_t first = c->n_ids;
    if (!bpe_word(c, w, n)) return false;
    int64_t k = c->n_ids - first;
    if (!grow((void **)&c->cache_keys, &c->cache_keys_cap, c->cache_keys_n + n, 1) ||
        !grow((void **)&c->cache_ids, &c->cache_ids_cap, c->cache_ids_n + k, sizeof *c->cache_ids))
        return c->oom = true, false;
    cache_entry *e = &c->cache[h];
    e->tag = tag;
    e->key_off = (uint32_t)c->cache_keys_n;
    e->key_len = (uint16_t)n;
    e->ids_off = (uint32_t)c->cache_ids_n;
    e->n_ids = (uint16_t)k; /* k <= n: every id covers at least one byte */
    memcpy(c->cache_keys + c->cache_keys_n, w, (size_t)n);
    c->cache_keys_n += n;
    memcpy(c->cache_ids + c->cache_ids_n, c->ids + first, (size_t)k * sizeof *c->ids);
    c->cache_ids_n += k;
    c->cache_n++;
    return true;
}

/* Long runs are handled in chunks of about this many bytes, cut where no piece of
 * any supported pre-tokenizer can cross (see safe_cut), so that the scratch arrays
 * stay small and in cache. */
#define CHUNK_BYTES 65536

/* The first position p in s[from .. n) with s[p-2] a printable non-space ASCII
 * character, s[p-1] == '\n' and s[p] an ASCII letter, or n. Every pre-tokenizer
 * ends a piece at such a '\n' (it is a whitespace run of one character followed
 * by a letter) and starts the next at the letter, whatever came before; and NFC
 * cannot combine across it. So the text can be split there and each part
 * tokenized alone. */
static int64_t safe_cut(const uint8_t *s, int64_t from, int64_t n) {
    for (int64_t p = from < 2 ? 2 : from; p < n; p++) {
        if (s[p - 1] != '\n') continue;
        uint8_t a = s[p], z = s[p - 2];
        if (((a | 0x20) >= 'a' && (a | 0x20) <= 'z') && z > 0x20 && z < 0x7F) return p;
    }
    return n;
}

static bool bpe_chunk(tok_ctx *c, const uint8_t *s, int64_t n) {
    if (c->v->nfc && !uni_is_nfc_quick(c->classes, s, (size_t)n)) {
        if (!uni_nfc(s, (size_t)n, &c->norm, &c->norm_n, &c->norm_cap, &c->nfc_work)) return c->oom = true, false;
        s = c->norm;
        n = (int64_t)c->norm_n;
    }
    if (!grow((void **)&c->cps, &c->cap_cps, n, sizeof *c->cps) ||
        !grow((void **)&c->cfl, &c->cap_cfl, n, sizeof *c->cfl))
        return c->oom = true, false;
    c->piece_base = s;
    return pretok_split(c->v->pre, c->classes, s, n, c->cps, c->cfl, bpe_piece, c);
}

static bool bpe_run(tok_ctx *c, const uint8_t *s, int64_t n) {
    int64_t a = 0;
    while (a < n) {
        int64_t b = n - a > 2 * CHUNK_BYTES ? safe_cut(s, a + CHUNK_BYTES, n) : n;
        if (!bpe_chunk(c, s + a, b - a)) return false;
        a = b;
    }
    return true;
}

/* ==== SentencePiece BPE ==== */

static bool spm_usable(const eddy_vocab *v, int32_t id) {
    return id >= 0 && (v->type[id] == TOKTYPE_NORMAL || v->type[id] == TOKTYPE_USER_DEFINED ||
                       v->type[id] == TOKTYPE_UNDEFINED);
}

static bool spm_queue(tok_ctx *c, int32_t left) {
    if (left < 0) return true;
    int32_t right = c->syms[left].next;
    if (right < 0) return true;
    const bpe_sym *l = &c->syms[left], *r = &c->syms[right];
    int32_t len = l->len + r->len;
    int32_t id = vocab_find(c->v, c->spm_text + l->start, (size_t)len);
    if (!spm_usable(c->v, id)) return true;
    bpe_pair p = {c->v->score ? c->v->score[id] : 0.0f, 0, left, right, 0, len};
    return heap_push(c, p);
}

static bool spm_emit_symbol(tok_ctx *c, const uint8_t *s, int32_t len) {
    const eddy_vocab *v = c->v;
    int32_t id = vocab_find(v, s, (size_t)len);
    if (spm_usable(v, id)) return emit(c, id);
    for (int32_t i = 0; i < len; i++) {
        int32_t b = v->byte_token[s[i]];
        if (b < 0) return v->unk >= 0 ? emit(c, v->unk) : true; /* no byte fallback */
    }
    for (int32_t i = 0; i < len; i++)
        if (!emit(c, v->byte_token[s[i]])) return false;
    return true;
}

static bool spm_run(tok_ctx *c, const uint8_t *s, int64_t n, bool text_start) {
    /* U+2581 for every space, and one in front of the text */
    int64_t spaces = 0;
    for (int64_t i = 0; i < n; i++) spaces += s[i] == ' ';
    bool prefix = text_start && c->v->add_space_prefix;
    int64_t m = n + 2 * spaces + (prefix ? 3 : 0);
    if (m > INT32_MAX) return c->oom = true, false;
    if (!grow((void **)&c->spm_text, &c->cap_spm_text, m, 1)) return c->oom = true, false;
    uint8_t *t = c->spm_text;
    int64_t k = 0;
    static const uint8_t marker[3] = {0xE2, 0x96, 0x81};
    if (prefix) memcpy(t, marker, 3), k = 3;
    for (int64_t i = 0; i < n; i++) {
        if (s[i] == ' ') memcpy(t + k, marker, 3), k += 3;
        else t[k++] = s[i];
    }
    /* one symbol per character */
    if (!grow((void **)&c->syms, &c->cap_syms, m, sizeof *c->syms)) return c->oom = true, false;
    int32_t ns = 0;
    for (int64_t i = 0; i < m;) {
        uint32_t cp;
        int len = t[i] < 0x80 ? 1 : utf8_decode(t + i, (size_t)(m - i), &cp);
        EDDY_ASSERT(len > 0);
        c->syms[ns] = (bpe_sym){0, ns - 1, ns + 1, (int32_t)i, len};
        ns++;
        i += len;
    }
    if (ns == 0) return true;
    c->syms[ns - 1].next = -1;
    c->n_heap = 0;
    for (int32_t i = 0; i + 1 < ns; i++)
        if (!spm_queue(c, i)) return false;
    while (c->n_heap > 0) {
        bpe_pair p = heap_pop(c);
        bpe_sym *l = &c->syms[p.left];
        if (l->len == 0 || l->next != p.right) continue; /* stale */
        bpe_sym *r = &c->syms[p.right];
        if (l->len + r->len != p.b) continue;
        l->len += r->len;
        l->next = r->next;
        if (r->next >= 0) c->syms[r->next].prev = p.left;
        r->len = 0;
        if (!spm_queue(c, l->prev) || !spm_queue(c, p.left)) return false;
    }
    for (int32_t i = 0; i >= 0; i = c->syms[i].next)
        if (!spm_emit_symbol(c, t + c->syms[i].start, c->syms[i].len)) return false;
    return true;
}

/* ==== Fragments: valid runs and invalid bytes ==== */

static bool do_run(tok_ctx *c, const uint8_t *s, int64_t n, bool text_start) {
    if (n == 0) return true;
    return c->v->kind == VOCAB_BPE ? bpe_run(c, s, n) : spm_run(c, s, n, text_start);
}

/* s[0 .. n) is the text between special tokens; text_start: it begins the input. */
static bool do_fragment(tok_ctx *c, const uint8_t *s, int64_t n, bool text_start) {
    int64_t run = 0, i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = utf8_decode(s + i, (size_t)(n - i), &cp);
        if (k > 0) {
            i += k;
            continue;
        }
        if (!do_run(c, s + run, i - run, text_start && run == 0)) return false;
        for (int j = 0; j < -k; j++) { /* every byte of the invalid sequence alone */
            int32_t id = c->v->byte_token[s[i + j]];
            if (id < 0 && c->v->kind == VOCAB_SPM) id = c->v->unk; /* BPE: dropped, like a byte BPE lacks */
            if (id >= 0 && !emit(c, id)) return false;
        }
        i += -k;
        run = i;
    }
    return do_run(c, s + run, n - run, text_start && run == 0);
}

/* ==== Entry ==== */

eddy_status eddy_tokenize(const eddy_vocab *v, const char *text, size_t len, unsigned flags,
                          eddy_token **out, int64_t *n_out, eddy_error *err) {
    if (!v || (!text && len) || !out || !n_out)
        return eddy_error_set(err, EDDY_ERR_ARG, "eddy_tokenize: NULL argument");
    *out = NULL;
    *n_out = 0;
    if (len > (size_t)INT64_MAX / 8)
        return eddy_error_set(err, EDDY_ERR_ARG, "eddy_tokenize: text of %zu bytes is too long", len);
    tok_ctx c;
    memset(&c, 0, sizeof c);
    c.v = v;
    c.flags = flags;
    c.classes = uni_flag_table();
    const uint8_t *s = (const uint8_t *)text;
    int64_t n = (int64_t)len;
    bool ok = true;
    bool add = (flags & EDDY_TOKENIZE_ADD_SPECIAL) != 0;
    if (add && v->add_bos && v->bos >= 0) ok = emit(&c, v->bos);

    bool no_special = (flags & EDDY_TOKENIZE_NO_SPECIAL) != 0;
    int64_t frag = 0, i = 0;
    while (ok && i < n) {
        if (v->special_byte >= 0) { /* all specials start with one byte (Qwen: '<') */
            const uint8_t *q = memchr(s + i, v->special_byte, (size_t)(n - i));
            if (!q) break;
            i = q - s;
        }
        int64_t lo = v->special_first[s[i]], hi = v->special_first[s[i] + 1];
        if (lo == hi) {
            i++;
            continue;
        }
        int32_t hit = -1, hit_len = 0;
        for (int64_t k = lo; k < hi; k++) {
            const vocab_special *sp = &v->specials[k];
            if (no_special && !sp->user) continue;
            if (sp->len <= n - i && memcmp(v->bytes + v->off[sp->id], s + i, (size_t)sp->len) == 0) {
                hit = sp->id, hit_len = sp->len;
                break; /* longest first */
            }
        }
        if (hit < 0) {
            i++;
            continue;
        }
        ok = do_fragment(&c, s + frag, i - frag, frag == 0) && emit(&c, hit);
        i += hit_len;
        frag = i;
    }
    if (ok) ok = do_fragment(&c, s + frag, n - frag, frag == 0);
    if (ok && add && v->add_eos && v->eos >= 0) ok = emit(&c, v->eos);
    if (!ok) {
        ctx_free(&c);
        return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory tokenizing %zu bytes", len);
    }
    *out = c.ids;
    *n_out = c.n_ids;
    c.ids = NULL;
    ctx_free(&c);
    return EDDY_OK;
}
