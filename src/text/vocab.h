/*
 * vocab.h — the in-memory vocabulary of a model (`struct eddy_vocab`) and the
 * internal interfaces of src/text.
 *
 * Owns: the layout of a loaded vocabulary (token bytes, types, scores, the
 * text -> id and pair -> merge hash tables, the tokens matched atomically in
 * input text), the pre-tokenizer kinds, and the helpers the tokenizer, the
 * detokenizer and the chat formatter share. Loading lives in vocab.c, the
 * pre-tokenizers in pretok.c, tokenization in tokenize.c, decoding in detok.c.
 *
 * Token text. Every token has its *bytes*: what the token stands for in the
 * text. For byte-level BPE files (`gpt2`) the GGUF strings are GPT-2's byte-to-
 * character encoding ("Ġthe") and are decoded back to bytes (" the") at load;
 * control and user-defined tokens are literal. For SentencePiece files (`llama`)
 * the bytes are the piece as stored, with U+2581 standing for a space; byte
 * tokens "<0xNN>" stand for the byte NN.
 */
#ifndef EDDY_TEXT_VOCAB_H
#define EDDY_TEXT_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eddy.h"

/* GGUF tokenizer.ggml.token_type values */
enum {
    TOKTYPE_UNDEFINED = 0,
    TOKTYPE_NORMAL = 1,
    TOKTYPE_UNKNOWN = 2,
    TOKTYPE_CONTROL = 3,
    TOKTYPE_USER_DEFINED = 4,
    TOKTYPE_UNUSED = 5,
    TOKTYPE_BYTE = 6,
};

typedef enum {
    VOCAB_BPE, /* tokenizer.ggml.model = gpt2: byte-level BPE with a pre-tokenizer */
    VOCAB_SPM, /* tokenizer.ggml.model = llama: SentencePiece BPE over scores */
} vocab_kind;

typedef enum {
    PRE_GPT2,   /* 's|'t|... | ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    PRE_SMOLLM, /* every \p{N} character alone, then PRE_GPT2 */
    PRE_QWEN2,  /* (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|... */
    PRE_QWEN35, /* PRE_QWEN2 with \p{M} joining letter runs */
    PRE_LLAMA3, /* PRE_QWEN2 with \p{N}{1,3} */
} pre_kind;

typedef struct {
    int32_t id;
    int32_t len;    /* bytes */
    bool user;      /* USER_DEFINED: matched even with EDDY_TOKENIZE_NO_SPECIAL */
    uint8_t first;  /* its first byte */
} vocab_special;

typedef struct {
    uint64_t key;    /* ((left << 32) | right) + 1; 0 marks an empty slot */
    uint32_t rank;   /* position in tokenizer.ggml.merges: lower merges first */
    int32_t result;  /* the merged token */
} vocab_merge;

typedef struct {
    int32_t id;   /* -1: empty */
    uint32_t tag; /* the high half of the text's hash */
} vocab_slot;

struct eddy_vocab {
    vocab_kind kind;
    pre_kind pre;
    char pre_name[64];
    bool nfc;            /* normalize input text to NFC (Qwen's tokenizers declare it) */
    bool ignore_merges;  /* a pre-token that is a whole token is not merged (Llama 3) */
    bool add_space_prefix; /* SPM: a U+2581 before the text */
    bool add_bos, add_eos;

    int64_t n_tokens;
    uint8_t *bytes;      /* (total) the bytes of every token, back to back */
    int64_t *off;        /* (n_tokens + 1): token i is bytes[off[i] .. off[i+1]) */
    uint8_t *type;       /* (n_tokens) TOKTYPE_* */
    float *score;        /* (n_tokens) SPM scores; NULL for BPE */

    /* bytes -> id, open addressing; cap is a power of two */
    vocab_slot *map;
    uint64_t map_cap;
    bool map_tags_unique; /* no two tokens share a probe chain and a tag (see vocab.c) */

    /* BPE: (left, right) -> (rank, result), open addressing; cap a power of two */
    vocab_merge *merges;
    uint64_t merges_cap;
    int64_t n_merges;

    int32_t byte_token[256]; /* the token of one byte (BPE: its base token, SPM: <0xNN>); -1 none */

    /* tokens matched atomically in input text, longest first within each first byte */
    vocab_special *specials;
    int64_t n_specials;
    int64_t special_first[257]; /* specials starting with byte b: [first[b], first[b+1]) */
    int special_byte;           /* the one first byte all specials share, or -1 */

    int32_t bos, eos, unk, pad, eot; /* -1 when absent */
    char *chat_template;             /* NULL when the file has none */
    char *bos_text, *eos_text;       /* their texts ("" when absent), for templates */
};

/* ==== Shared helpers (vocab.c) ==== */

static inline const uint8_t *vocab_token_bytes(const eddy_vocab *v, int32_t id, int64_t *len) {
    *len = v->off[id + 1] - v->off[id];
    return v->bytes + v->off[id];
}

/* The token whose bytes are exactly s[0 .. n), or -1. */
int32_t vocab_find(const eddy_vocab *v, const uint8_t *s, size_t n);
/* The merge of (left, right), or NULL. */
const vocab_merge *vocab_find_merge(const eddy_vocab *v, int32_t left, int32_t right);
/* Starts loading the table slot vocab_find_merge(v, left, right) will read first. */
void vocab_prefetch_merge(const eddy_vocab *v, int32_t left, int32_t right);

uint64_t text_hash(const uint8_t *s, size_t n);

/* ==== Pre-tokenizers (pretok.c) ==== */

/* Receives one piece: bytes [start, end) of the text; returns false to stop. */
typedef bool (*pt_emit_fn)(void *ctx, int64_t start, int64_t end);

/* Splits the valid UTF-8 text s[0 .. n) into pieces, in order, calling emit for
 * each. cps/flags are scratch of at least n entries each. Returns false when emit
 * did. */
bool pretok_split(pre_kind kind, const uint8_t *class_table, const uint8_t *s, int64_t n,
                  uint32_t *cps, uint8_t *flags, pt_emit_fn emit, void *ctx);

#endif
