/*
 * detok.c — token ids back to text: eddy_detokenize and the streaming decoder.
 *
 * Owns: what bytes each token produces, the SentencePiece leading-space rule, and
 * holding back incomplete UTF-8 characters while streaming. Does not own the
 * token bytes themselves (decoded once at load, vocab.c).
 *
 * Per token: byte-level BPE tokens produce their decoded bytes; SentencePiece
 * pieces produce their text with U+2581 turned back into a space, byte tokens
 * <0xNN> the byte NN; control tokens produce their text unless
 * EDDY_DETOK_SKIP_CONTROL. When a SentencePiece vocabulary puts a space marker in
 * front of the text, the first space of the output is dropped again (Hugging
 * Face's Strip decoder does the same).
 */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "text/unicode.h"
#include "text/vocab.h"

void eddy_buffer_free(void *p) { eddy_free(p); }

/* ==== Growable byte buffer ==== */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} bytebuf;

static bool bb_add(bytebuf *b, const void *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        uint8_t *q = eddy_realloc(b->p, cap);
        if (!q) return false;
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return true;
}

/* ==== One token's bytes ==== */

/* Appends token t's bytes to b. *at_start: no byte produced yet (updated). */
static bool token_bytes(const eddy_vocab *v, eddy_token t, unsigned flags, bool *at_start, bytebuf *b) {
    int type = v->type[t];
    int64_t len;
    const uint8_t *s = vocab_token_bytes(v, t, &len);
    if (type == TOKTYPE_CONTROL || type == TOKTYPE_UNKNOWN) {
        if (flags & EDDY_DETOK_SKIP_CONTROL) return true;
        if (len) *at_start = false;
        return bb_add(b, s, (size_t)len);
    }
    if (v->kind == VOCAB_BPE || type == TOKTYPE_USER_DEFINED) {
        if (len) *at_start = false;
        return bb_add(b, s, (size_t)len);
    }
    /* SentencePiece */
    if (type == TOKTYPE_BYTE) {
        for (int x = 0; x < 256; x++)
            if (v->byte_token[x] == t) {
                uint8_t one = (uint8_t)x;
                *at_start = false;
                return bb_add(b, &one, 1);
            }
        return bb_add(b, s, (size_t)len); /* a byte token with an unusual name: as written */
    }
    for (int64_t i = 0; i < len;) {
        if (i + 3 <= len && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) {
            bool drop = *at_start && v->add_space_prefix;
            *at_start = false;
            if (!drop && !bb_add(b, " ", 1)) return false;
            i += 3;
            continue;
        }
        int64_t j = i;
        while (j < len && !(j + 3 <= len && s[j] == 0xE2 && s[j + 1] == 0x96 && s[j + 2] == 0x81)) j++;
        *at_start = false;
        if (!bb_add(b, s + i, (size_t)(j - i))) return false;
        i = j;
    }
    return true;
}

/* ==== Whole sequences ==== */

eddy_status eddy_detokenize(const eddy_vocab *v, const eddy_token *ids, int64_t n, unsigned flags,
                            char **out, size_t *len, eddy_error *err) {
    if (!v || (!ids && n) || n < 0 || !out || !len)
        return eddy_error_set(err, EDDY_ERR_ARG, "eddy_detokenize: NULL argument");
    *out = NULL;
    *len = 0;
    bytebuf b = {0};
    bool at_start = true;
    if (!bb_add(&b, "", 0)) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory detokenizing");
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= v->n_tokens) {
            eddy_free(b.p);
            return eddy_error_set(err, EDDY_ERR_ARG, "token id %d (position %lld) is outside the vocabulary (%lld tokens)",
                                  (int)ids[i], (long long)i, (long long)v->n_tokens);
        }
        if (!token_bytes(v, ids[i], flags, &at_start, &b)) {
            eddy_free(b.p);
            return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory detokenizing %lld tokens", (long long)n);
        }
    }
    *out = (char *)b.p;
    *len = b.n;
    return EDDY_OK;
}

/* ==== Streaming ==== */

struct eddy_detok {
    const eddy_vocab *v;
    unsigned flags;
    bool at_start;
    uint8_t pending[4]; /* the start of a character not yet complete */
    int n_pending;
    bytebuf work;       /* pending + the new token's bytes */
    bytebuf out;        /* what the last call returned */
};

eddy_status eddy_detok_new(const eddy_vocab *v, unsigned flags, eddy_detok **out, eddy_error *err) {
    if (!v || !out) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_detok_new: NULL argument");
    eddy_detok *d = eddy_calloc(1, sizeof *d);
    if (!d) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory creating a detokenizer");
    d->v = v;
    d->flags = flags;
    d->at_start = true;
    *out = d;
    return EDDY_OK;
}

void eddy_detok_free(eddy_detok *d) {
    if (!d) return;
    eddy_free(d->work.p);
    eddy_free(d->out.p);
    eddy_free(d);
}

static const uint8_t replacement[3] = {0xEF, 0xBF, 0xBD}; /* U+FFFD */

eddy_status eddy_detok_push(eddy_detok *d, eddy_token t, const char **text, size_t *len, eddy_error *err) {
    static const char empty[1] = "";
    *text = empty;
    *len = 0;
    if (t < 0 || t >= d->v->n_tokens)
        return eddy_error_set(err, EDDY_ERR_ARG, "token id %d is outside the vocabulary (%lld tokens)", (int)t,
                              (long long)d->v->n_tokens);
    d->work.n = 0;
    d->out.n = 0;
    if (!bb_add(&d->work, d->pending, (size_t)d->n_pending) ||
        !token_bytes(d->v, t, d->flags, &d->at_start, &d->work) || !bb_add(&d->out, "", 0))
        return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory detokenizing");
    d->n_pending = 0;
    const uint8_t *s = d->work.p;
    size_t n = d->work.n, i = 0;
    while (i < n) {
        bool incomplete;
        size_t ok = utf8_valid_prefix(s + i, n - i, &incomplete);
        if (!bb_add(&d->out, s + i, ok)) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory detokenizing");
        i += ok;
        if (i == n) break;
        if (incomplete) { /* wait for the rest of this character */
            d->n_pending = (int)(n - i);
            memcpy(d->pending, s + i, n - i);
            break;
        }
        uint32_t cp;
        int k = utf8_decode(s + i, n - i, &cp);
        EDDY_ASSERT(k < 0);
        if (!bb_add(&d->out, replacement, 3)) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory detokenizing");
        i += (size_t)-k;
    }
    *text = (const char *)d->out.p;
    *len = d->out.n;
    return EDDY_OK;
}

void eddy_detok_flush(eddy_detok *d, const char **text, size_t *len) {
    static const char fffd[4] = "\xEF\xBF\xBD";
    *text = d->n_pending ? fffd : "";
    *len = d->n_pending ? 3 : 0;
    d->n_pending = 0;
    d->at_start = true;
}
