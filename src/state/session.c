/*
 * session.c — session files: a sequence's whole state (tokens, last logits, the
 * recurrent slot, KV rows [0, n_pos)) and a sampler's state, saved and loaded
 * (eddy_seq_save / eddy_seq_load and their _buffer forms; the format is in
 * docs/session-format.md).
 *
 * Owns: the format (header, section table, sections aligned for direct reads, one
 * XXH3-64 checksum per section and for the header and table), the model fingerprint
 * (XXH3-128 of the GGUF header region — metadata with hyperparameters and vocabulary,
 * tensor table — and of the first 4 KiB of every tensor's data), the checks a file
 * must pass before anything changes, and atomic writes (temporary file, fsync,
 * rename, fsync of the directory).
 * Does not own: the state's memory (state.c) or the engine's lock and sequences
 * (src/model/engine*.c), which it uses through engine.h.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/alloc.h"
#include "base/mapfile.h"
#include "base/threadpool.h"
#include "gen/sampler.h"
#include "gguf/gguf.h"
#include "model/engine.h"

#define SESSION_MAGIC "EDDYSESS"
#define SESSION_VERSION 1u
#define HEADER_BYTES 128
#define ENTRY_BYTES 32
#define SECTION_ALIGN 4096
#define FINGERPRINT_SAMPLE 4096

enum { SEC_TOKENS = 1, SEC_LOGITS, SEC_SAMPLER, SEC_CONV, SEC_REC, SEC_KEYS, SEC_VALUES, SEC_APP, SEC_KIND_END };

static const char *const section_names[] = {"", "tokens", "logits", "sampler", "conv", "rec", "keys", "values", "app"};

/* The caller's bytes saved beside the state (eddy_seq_save_app). */
typedef struct {
    const void *data;
    size_t len;
} app_bytes;

/* ==== Little-endian fields ==== */

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

/* ==== The model fingerprint ==== */

static XXH128_hash_t fingerprint(const model *m) {
    const gguf_file *f = m->file;
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_128bits_reset(&st);
    XXH3_128bits_update(&st, f->bytes, (size_t)f->data_offset); /* metadata and tensor table */
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        XXH3_128bits_update(&st, t->data, (size_t)(t->n_bytes < FINGERPRINT_SAMPLE ? t->n_bytes : FINGERPRINT_SAMPLE));
    }
    return XXH3_128bits_digest(&st);
}

/* ==== Layout ==== */

typedef struct {
    uint32_t kind, layer;
    uint64_t offset, bytes;
    const void *src; /* saving: where the bytes come from (NULL: written by a callback) */
} section;


/* The bytes a section of this kind and layer holds for n_pos positions; 0 for a kind
 * the layer does not have. */
static uint64_t section_bytes(const engine *c, uint32_t kind, uint32_t layer, int64_t n_pos, size_t var_bytes) {
    const state_pool *sp = c->sp;
    const state_layer_shape *sh = layer < (uint32_t)sp->n_layer ? &sp->shape[layer] : NULL;
    switch (kind) {
    case SEC_TOKENS: return (uint64_t)n_pos * 4;
    case SEC_LOGITS: return (uint64_t)c->m->hp.n_vocab * 4;
    case SEC_SAMPLER:
    case SEC_APP: return var_bytes; /* their own length */
    case SEC_CONV: return sh ? (uint64_t)sh->conv_floats * 4 : 0;
    case SEC_REC: return sh ? (uint64_t)sh->rec_floats * 4 : 0;
    case SEC_KEYS: return sh ? (uint64_t)n_pos * (uint64_t)sh->kv_k * state_elem_bytes(sp->type_k) : 0;
    case SEC_VALUES: return sh ? (uint64_t)n_pos * (uint64_t)sh->kv_v * state_elem_bytes(sp->type_v) : 0;
    }
    return 0;
}

static uint64_t align_up(uint64_t x) { return (x + SECTION_ALIGN - 1) / SECTION_ALIGN * SECTION_ALIGN; }

/* ==== Saving ==== */

/* Key (or value) rows [0, n_pos) of layer il between a flat array (n_pos rows, position
 * order) and the blocks of st: into the blocks when to_pool, else out of them. The
 * blocks go to the pool's memory operations up to 64 at a time (on a GPU: one batch of
 * copies through pinned memory). False when the device failed. */
static bool copy_kv(const engine *c, const seq_state *st, int64_t n_pos, int64_t il, bool keys, uint8_t *flat,
                    bool to_pool) {
    const state_pool *sp = c->sp;
    const size_t row = (size_t)(keys ? sp->shape[il].kv_k : sp->shape[il].kv_v) * state_elem_bytes(keys ? sp->type_k : sp->type_v);
    uint8_t *slab = keys ? sp->k[il] : sp->v[il];
    state_piece pieces[64];
    int64_t n = 0;
    uint8_t *batch = flat; /* where the pieces' rows begin in flat */
    bool ok = true;
    for (int64_t b = 0; b * STATE_KV_BLOCK < n_pos; b++) {
        const int64_t rows = n_pos - b * STATE_KV_BLOCK < STATE_KV_BLOCK ? n_pos - b * STATE_KV_BLOCK : STATE_KV_BLOCK;
        uint8_t *in_pool = slab + (size_t)st->blocks[b] * STATE_KV_BLOCK * row, *in_flat = flat + (size_t)(b * STATE_KV_BLOCK) * row;
        if (keys && state_k_tiled(sp, il)) { /* host memory; the file holds rows */
            state_tiled_keys_copy(sp, il, in_pool, in_flat, rows, to_pool);
            continue;
        }
        if (n == 0) batch = in_flat;
        pieces[n++] = (state_piece){in_pool, (size_t)rows * row};
        if (n < 64 && (b + 1) * STATE_KV_BLOCK < n_pos) continue;
        ok &= to_pool ? state_mem_from_host(sp, il, pieces, n, batch)
                      : state_mem_to_host(sp, il, batch, pieces, n);
        n = 0;
    }
    return ok;
}

/* A GPU that failed: the engine's states are lost (the next step refuses too). */
static eddy_status device_lost(engine *c, const char *what, eddy_error *err) {
    if (!c->gpu_failed[0]) snprintf(c->gpu_failed, sizeof c->gpu_failed, "a copy %s the GPU failed", what);
    return eddy_error_set(err, EDDY_ERR_IO, "the GPU failed (%s): the engine's states are lost; a new engine is "
                          "needed", c->gpu_failed);
}

/* The whole file of state st in memory, with the logits after its last token (NULL:
 * none), a sampler's state and the caller's bytes when given (the lock held). */
static eddy_status serialize_state(engine *c, const seq_state *st, const float *logits, const sampler *smp,
                                   app_bytes app, uint8_t **out, size_t *len, eddy_error *err) {
    const state_pool *sp = c->sp;
    const size_t smp_bytes = smp ? sampler_state_bytes(smp) : 0;
    if (c->gpu_failed[0]) return device_lost(c, "from", err);
    section secs[4 + 4 * 1024];
    int64_t n = 0;
    if (sp->n_layer > 1024) return eddy_error_set(err, EDDY_ERR_UNSUPPORTED, "session: more than 1024 layers");
    secs[n++] = (section){SEC_TOKENS, 0, 0, 0, st->tokens};
    if (logits) secs[n++] = (section){SEC_LOGITS, 0, 0, 0, logits};
    if (smp) secs[n++] = (section){SEC_SAMPLER, 0, 0, 0, NULL};
    if (app.data) secs[n++] = (section){SEC_APP, 0, 0, 0, app.data};
    for (int64_t il = 0; il < sp->n_layer; il++) {
        if (sp->conv[il]) secs[n++] = (section){SEC_CONV, (uint32_t)il, 0, 0, state_conv(sp, il, st->slot)};
        if (sp->rec[il]) secs[n++] = (section){SEC_REC, (uint32_t)il, 0, 0, state_rec(sp, il, st->slot)};
        if (sp->k[il]) secs[n++] = (section){SEC_KEYS, (uint32_t)il, 0, 0, NULL};
        if (sp->v[il]) secs[n++] = (section){SEC_VALUES, (uint32_t)il, 0, 0, NULL};
    }
    uint64_t at = align_up(HEADER_BYTES + (uint64_t)n * ENTRY_BYTES);
    for (int64_t i = 0; i < n; i++) {
        secs[i].bytes = section_bytes(c, secs[i].kind, secs[i].layer, st->n_pos,
                                      secs[i].kind == SEC_APP ? app.len : smp_bytes);
        secs[i].offset = at;
        at = align_up(at + secs[i].bytes);
    }
    uint8_t *buf = eddy_calloc(1, (size_t)at);
    if (!buf) return eddy_error_set(err, EDDY_ERR_NOMEM, "cannot allocate %.1f MiB for the session", (double)at / (1 << 20));
    bool copied = true;
    for (int64_t i = 0; i < n; i++) {
        uint8_t *dst = buf + secs[i].offset;
        if (secs[i].kind == SEC_SAMPLER) sampler_state_write(smp, dst);
        else if (secs[i].kind == SEC_KEYS || secs[i].kind == SEC_VALUES)
            copied &= copy_kv(c, st, st->n_pos, secs[i].layer, secs[i].kind == SEC_KEYS, dst, false);
        else if (secs[i].kind == SEC_CONV || secs[i].kind == SEC_REC) /* pool memory: host or device */
            copied &= state_mem_to_host(sp, secs[i].layer, dst,
                                        &(state_piece){(void *)secs[i].src, (size_t)secs[i].bytes}, 1);
        else if (secs[i].bytes)
            memcpy(dst, secs[i].src, (size_t)secs[i].bytes);
        uint8_t *e = buf + HEADER_BYTES + i * ENTRY_BYTES;
        put32(e, secs[i].kind);
        put32(e + 4, secs[i].layer);
        put64(e + 8, secs[i].offset);
        put64(e + 16, secs[i].bytes);
        put64(e + 24, XXH3_64bits(dst, (size_t)secs[i].bytes));
    }
    if (!copied) { /* nothing of it is written anywhere */
        eddy_free(buf);
        return device_lost(c, "from", err);
    }
    const XXH128_hash_t fp = fingerprint(c->m);
    memcpy(buf, SESSION_MAGIC, 8);
    put32(buf + 8, SESSION_VERSION);
    put32(buf + 12, 0); /* flags */
    put64(buf + 16, fp.low64);
    put64(buf + 24, fp.high64);
    put64(buf + 32, (uint64_t)st->n_pos);
    put64(buf + 40, (uint64_t)c->n_ctx);
    put32(buf + 48, (uint32_t)sp->type_k);
    put32(buf + 52, (uint32_t)sp->type_v);
    put32(buf + 56, (uint32_t)sp->n_layer);
    put32(buf + 60, (uint32_t)n);
    put64(buf + 64, at);
    put64(buf + 72, XXH3_64bits(buf + HEADER_BYTES, (size_t)n * ENTRY_BYTES));
    put64(buf + 120, XXH3_64bits(buf, 120));
    *out = buf;
    *len = (size_t)at;
    return EDDY_OK;
}

static eddy_status serialize(engine *c, eddy_seq *s, const sampler *smp, app_bytes app, uint8_t **out,
                             size_t *len, eddy_error *err) {
    if (s->n_pending)
        return eddy_error_set(err, EDDY_ERR_ARG, "cannot save a sequence whose verify of %" PRId64
                              " tokens awaits eddy_seq_accept", s->n_pending);
    return serialize_state(c, &s->st, s->has_logits ? s->logits : NULL, smp, app, out, len, err);
}

static eddy_status save_buffer(eddy_seq *s, const sampler *smp, app_bytes app, void **out, size_t *len,
                               eddy_error *err) {
    engine *c = s->e;
    pthread_mutex_lock(&c->lock);
    eddy_status st = serialize(c, s, smp, app, (uint8_t **)out, len, err);
    pthread_mutex_unlock(&c->lock);
    return st;
}

eddy_status eddy_seq_save_buffer(eddy_seq *s, const eddy_sampler *smp, void **out, size_t *len, eddy_error *err) {
    if (!s || !out || !len) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_seq_save_buffer: NULL argument");
    return save_buffer(s, smp, (app_bytes){NULL, 0}, out, len, err);
}

/* Writes all of buf to fd; false with errno set. */
static bool write_all(int fd, const uint8_t *buf, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        buf += w, n -= (size_t)w;
    }
    return true;
}

/* path's directory ("." for a bare name) into dir (size n). */
static void dir_of(const char *path, char *dir, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, n, ".");
    else if (slash == path) snprintf(dir, n, "/");
    else snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

/* buf to a temporary file beside path, flushed to disk, renamed over path, and the
 * directory flushed: at any moment path holds the old file or the new one. */
eddy_status session_write_atomic(const char *path, const uint8_t *buf, size_t len, eddy_error *err) {
    const size_t plen = strlen(path);
    if (plen == 0 || plen > 4000) return eddy_error_set(err, EDDY_ERR_ARG, "session: bad file name");
    char tmp[4096 + 64], dir[4096];
    /* a fresh name beside path, created with the mode a new file gets (umask applies) */
    static _Atomic unsigned counter;
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), counter++);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) return eddy_error_set(err, EDDY_ERR_IO, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
    bool ok = write_all(fd, buf, len) && fsync(fd) == 0;
    const int saved = errno;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        const int e = ok ? errno : saved;
        unlink(tmp);
        return eddy_error_set(err, EDDY_ERR_IO, "%s: cannot write the session: %s", path, strerror(e));
    }
    dir_of(path, dir, sizeof dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) { /* the rename itself survives a crash once the directory is on disk */
        fsync(dfd);
        close(dfd);
    }
    return EDDY_OK;
}

eddy_status eddy_seq_save_app(eddy_seq *s, const eddy_sampler *smp, const void *app, size_t app_len,
                              const char *path, eddy_error *err) {
    if (!s || !path || (!app && app_len)) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_seq_save: NULL argument");
    void *buf;
    size_t len;
    eddy_status st = save_buffer(s, smp, (app_bytes){app ? app : "", app_len}, &buf, &len, err);
    if (st != EDDY_OK) return st;
    st = session_write_atomic(path, buf, len, err);
    eddy_free(buf);
    return st;
}

eddy_status eddy_seq_save(eddy_seq *s, const eddy_sampler *smp, const char *path, eddy_error *err) {
    if (!s || !path) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_seq_save: NULL argument");
    void *buf;
    size_t len;
    eddy_status st = save_buffer(s, smp, (app_bytes){NULL, 0}, &buf, &len, err);
    if (st != EDDY_OK) return st;
    st = session_write_atomic(path, buf, len, err);
    eddy_free(buf);
    return st;
}

/* ==== Loading ==== */

/* What a file holds, once checked. */
typedef struct {
    int64_t n_pos;
    const uint8_t *sec[SEC_KIND_END]; /* the one-per-file sections, or NULL */
    uint64_t sampler_bytes, app_bytes;
    const uint8_t **conv, **rec, **keys, **values; /* (n_layer) */
} parsed;

#define BAD(...) eddy_error_set(err, EDDY_ERR_FORMAT, __VA_ARGS__)

/* True when the n bytes at p are all zero (the padding between sections). */
static bool zeros(const uint8_t *p, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

/* Checks everything in buf against the engine and fills p; nothing is changed. */
static eddy_status check_file(const engine *c, const char *what, const uint8_t *buf, size_t len, parsed *p,
                              eddy_error *err) {
    const state_pool *sp = c->sp;
    if (len < HEADER_BYTES) return BAD("%s: not a session file: %zu bytes, the header alone is %d", what, len, HEADER_BYTES);
    if (memcmp(buf, SESSION_MAGIC, 8) != 0) return BAD("%s: not an eddy session file (bad magic)", what);
    const uint32_t version = get32(buf + 8);
    if (version != SESSION_VERSION)
        return BAD("%s: session format version %" PRIu32 ", this eddy reads version %u", what, version, SESSION_VERSION);
    if (get64(buf + 120) != XXH3_64bits(buf, 120)) return BAD("%s: the header is damaged (checksum mismatch)", what);
    const XXH128_hash_t fp = fingerprint(c->m);
    if (get64(buf + 16) != fp.low64 || get64(buf + 24) != fp.high64)
        return BAD("%s: the session was saved with another model (fingerprint mismatch)", what);
    const uint64_t n_pos = get64(buf + 32), file_bytes = get64(buf + 64);
    const uint32_t tk = get32(buf + 48), tv = get32(buf + 52), n_layer = get32(buf + 56), n_sec = get32(buf + 60);
    if (file_bytes != len)
        return BAD("%s: the file is %zu bytes, its header says %" PRIu64 " (truncated or extended)", what, len, file_bytes);
    if (n_layer != (uint32_t)sp->n_layer && c->m->mtp && n_layer == (uint32_t)sp->n_layer + (c->mtp ? -1 : 1))
        return BAD("%s: the session was saved %s the multi-token-prediction layer (--spec-type mtp), this engine "
                   "runs %s it", what, c->mtp ? "without" : "with", c->mtp ? "with" : "without");
    if (n_layer != (uint32_t)sp->n_layer)
        return BAD("%s: %" PRIu32 " layers in the session, the model has %" PRId64, what, n_layer, sp->n_layer);
    if (tk != (uint32_t)sp->type_k || tv != (uint32_t)sp->type_v)
        return BAD("%s: the session's KV cache is %s/%s, this engine's %s/%s (use the same -ctk/-ctv)", what,
                   tk == QTYPE_F16 ? "f16" : "f32", tv == QTYPE_F16 ? "f16" : "f32",
                   sp->type_k == QTYPE_F16 ? "f16" : "f32", sp->type_v == QTYPE_F16 ? "f16" : "f32");
    if (n_pos > (uint64_t)c->n_ctx)
        return BAD("%s: the session holds %" PRIu64 " positions, the context %" PRId64 " (raise -c)", what, n_pos, c->n_ctx);
    if (n_sec > 4 + 4 * n_layer || HEADER_BYTES + (uint64_t)n_sec * ENTRY_BYTES > len)
        return BAD("%s: %" PRIu32 " sections cannot be right", what, n_sec);
    if (get64(buf + 72) != XXH3_64bits(buf + HEADER_BYTES, (size_t)n_sec * ENTRY_BYTES))
        return BAD("%s: the section table is damaged (checksum mismatch)", what);
    p->n_pos = (int64_t)n_pos;
    uint64_t end = HEADER_BYTES + (uint64_t)n_sec * ENTRY_BYTES; /* sections in order, none overlapping */
    for (uint32_t i = 0; i < n_sec; i++) {
        const uint8_t *e = buf + HEADER_BYTES + (size_t)i * ENTRY_BYTES;
        const uint32_t kind = get32(e), layer = get32(e + 4);
        const uint64_t off = get64(e + 8), bytes = get64(e + 16), sum = get64(e + 24);
        if (kind == 0 || kind >= SEC_KIND_END) return BAD("%s: section %" PRIu32 " has unknown kind %" PRIu32, what, i, kind);
        const char *name = section_names[kind];
        const bool per_layer = kind >= SEC_CONV && kind <= SEC_VALUES;
        if ((per_layer && layer >= n_layer) || (!per_layer && layer != 0))
            return BAD("%s: section %" PRIu32 " (%s) names layer %" PRIu32, what, i, name, layer);
        if (off % SECTION_ALIGN || off < end || off > len || bytes > len - off)
            return BAD("%s: section %" PRIu32 " (%s, layer %" PRIu32 ") at offset %" PRIu64 ", %" PRIu64
                       " bytes, lies outside the file or overlaps another", what, i, name, layer, off, bytes);
        const bool own_length = kind == SEC_SAMPLER || kind == SEC_APP;
        const uint64_t want = own_length ? bytes : section_bytes(c, kind, layer, (int64_t)n_pos, 0);
        if (bytes != want || (want == 0 && kind != SEC_TOKENS && kind != SEC_APP))
            return BAD("%s: section %" PRIu32 " (%s, layer %" PRIu32 ") has %" PRIu64 " bytes, the model needs %" PRIu64,
                       what, i, name, layer, bytes, want);
        if (!zeros(buf + end, off - end))
            return BAD("%s: the padding before section %s of layer %" PRIu32 " is damaged (not zero)", what, name, layer);
        if (XXH3_64bits(buf + off, (size_t)bytes) != sum)
            return BAD("%s: section %s of layer %" PRIu32 " is damaged (checksum mismatch)", what, name, layer);
        end = off + bytes;
        const uint8_t **slot = kind == SEC_CONV ? &p->conv[layer] : kind == SEC_REC ? &p->rec[layer]
                             : kind == SEC_KEYS ? &p->keys[layer] : kind == SEC_VALUES ? &p->values[layer] : &p->sec[kind];
        if (*slot) return BAD("%s: section %s of layer %" PRIu32 " appears twice", what, name, layer);
        *slot = buf + off;
        if (kind == SEC_SAMPLER) p->sampler_bytes = bytes;
        if (kind == SEC_APP) p->app_bytes = bytes;
    }
    if (!zeros(buf + end, len - end)) return BAD("%s: the padding at the end is damaged (not zero)", what);
    if (!p->sec[SEC_TOKENS]) return BAD("%s: the session has no tokens section", what);
    for (int64_t i = 0; i < (int64_t)n_pos; i++) {
        const int32_t t = (int32_t)get32(p->sec[SEC_TOKENS] + 4 * i);
        if (t < 0 || t >= c->m->hp.n_vocab)
            return BAD("%s: token %" PRId32 " at position %" PRId64 " is outside the vocabulary", what, t, i);
    }
    for (int64_t il = 0; il < sp->n_layer; il++) {
        const char *missing = sp->conv[il] && !p->conv[il] ? "conv" : sp->rec[il] && !p->rec[il] ? "rec"
                            : sp->k[il] && !p->keys[il] ? "keys" : sp->v[il] && !p->values[il] ? "values" : NULL;
        if (missing) return BAD("%s: the session has no %s section for layer %" PRId64, what, missing, il);
    }
    return EDDY_OK;
}

/* Puts the checked state into s (the lock held). stage (or NULL): blocks reserved for
 * the session's n_pos positions before the checks (staged_check), which s takes over. */
static eddy_status apply(engine *c, eddy_seq *s, sampler *smp, const parsed *p, seq_state *stage, eddy_error *err) {
    state_pool *sp = c->sp;
    seq_state *st = &s->st;
    engine_release_pending(c, s);
    if (stage) { /* every recurrent section is present, so the slot needs no zeroing */
        seq_state_drop_kv(sp, st, 0);
        for (int64_t i = 0; i < seq_state_n_blocks(st->n_ctx); i++) st->blocks[i] = stage->blocks[i], stage->blocks[i] = -1;
    } else {
        seq_state_clear(sp, st);
        if (!seq_state_reserve_kv(sp, st, 0, p->n_pos))
            return eddy_error_set(err, EDDY_ERR_NOMEM, "the KV cache has no free block for the session's %" PRId64
                                  " positions", p->n_pos);
    }
    bool copied = true;
    for (int64_t il = 0; il < sp->n_layer; il++) {
        if (p->conv[il]) {
            const state_piece conv = {state_conv(sp, il, st->slot), (size_t)sp->shape[il].conv_floats * 4};
            copied &= state_mem_from_host(sp, il, &conv, 1, p->conv[il]);
        }
        if (p->rec[il]) {
            const state_piece rec = {state_rec(sp, il, st->slot), (size_t)sp->shape[il].rec_floats * 4};
            copied &= state_mem_from_host(sp, il, &rec, 1, p->rec[il]);
        }
        if (p->keys[il]) copied &= copy_kv(c, st, p->n_pos, il, true, (uint8_t *)p->keys[il], true);
        if (p->values[il]) copied &= copy_kv(c, st, p->n_pos, il, false, (uint8_t *)p->values[il], true);
    }
    if (!copied) { /* the sequence holds no half-loaded state */
        seq_state_clear(sp, st);
        seq_logits_held(s, false);
        return device_lost(c, "to", err);
    }
    for (int64_t i = 0; i < p->n_pos; i++) st->tokens[i] = (int32_t)get32(p->sec[SEC_TOKENS] + 4 * i);
    st->n_pos = p->n_pos;
    seq_logits_held(s, p->sec[SEC_LOGITS] != NULL);
    if (s->has_logits) memcpy(s->logits, p->sec[SEC_LOGITS], (size_t)c->m->hp.n_vocab * 4);
    if (smp && p->sec[SEC_SAMPLER]) sampler_state_read(smp, p->sec[SEC_SAMPLER], (size_t)p->sampler_bytes);
    return EDDY_OK;
}

/* ==== Checking while the destination is made ready ==== */

/* A cold load is two waits of about the same length: reading the file from the disk
 * (the checks read it through the mapping) and the kernel giving the pool's never
 * touched pages to the copy, one fault per 4 KiB. staged_check overlaps them: KV
 * blocks for the session's positions are reserved into a staging state (not the
 * sequence, which nothing may change before the checks pass), and a second thread
 * populates them, and the sequence's recurrent slot, while the first checks. */
typedef struct {
    engine *c;
    const eddy_seq *s;
    const char *what;
    const uint8_t *buf;
    size_t len;
    parsed *p;
    const seq_state *stage;
    int64_t n_pos;
    eddy_status st;
    eddy_error *err;
} check_job;

static void populate_dest(const check_job *j) {
    const state_pool *sp = j->c->sp;
    for (int64_t il = 0; il < sp->n_layer; il++) {
        if (!state_layer_mem(sp, il)->host) continue; /* device memory: nothing to fault in */
        if (sp->conv[il]) mem_populate_write(state_conv(sp, il, j->s->st.slot), (size_t)sp->shape[il].conv_floats * 4);
        if (sp->rec[il]) mem_populate_write(state_rec(sp, il, j->s->st.slot), (size_t)sp->shape[il].rec_floats * 4);
        for (int kv = 0; kv < 2 && j->stage->blocks; kv++) {
            uint8_t *slab = kv ? sp->v[il] : sp->k[il];
            if (!slab) continue;
            const size_t block = (size_t)(kv ? state_block_elems_v(sp, il) : state_block_elems_k(sp, il)) *
                                 state_elem_bytes(kv ? sp->type_v : sp->type_k);
            for (int64_t b = 0; b < seq_state_n_blocks(j->n_pos); b++)
                if (j->stage->blocks[b] >= 0) mem_populate_write(slab + (size_t)j->stage->blocks[b] * block, block);
        }
    }
}

static void check_task(void *ctx, int ith, int nth) {
    check_job *j = ctx;
    if (ith == 0) j->st = check_file(j->c, j->what, j->buf, j->len, j->p, j->err);
    if (ith == nth - 1 && (nth > 1 || j->st == EDDY_OK)) populate_dest(j);
}

/* check_file, with stage's blocks reserved for the positions the header names (when the
 * pool has them free: else stage->blocks stays NULL) and populated alongside. */
static eddy_status staged_check(engine *c, const eddy_seq *s, const char *what, const uint8_t *buf, size_t len,
                                parsed *p, seq_state *stage, eddy_error *err) {
    const int64_t n_pos = len >= HEADER_BYTES && get64(buf + 32) <= (uint64_t)c->n_ctx ? (int64_t)get64(buf + 32) : 0;
    if (n_pos > 0 && c->sp->n_blocks > 0) {
        const int64_t nb = seq_state_n_blocks(c->n_ctx);
        stage->blocks = eddy_malloc((size_t)nb * sizeof *stage->blocks);
        for (int64_t i = 0; stage->blocks && i < nb; i++) stage->blocks[i] = -1;
        if (stage->blocks && !seq_state_reserve_kv(c->sp, stage, 0, n_pos)) eddy_free(stage->blocks), stage->blocks = NULL;
    }
    check_job j = {c, s, what, buf, len, p, stage, n_pos, EDDY_OK, err};
    pool_run(c->pool, check_task, &j, pool_size(c->pool) > 1 ? 2 : 1);
    return j.st;
}

static eddy_status load_bytes(eddy_seq *s, sampler *smp, const char *what, const uint8_t *buf, size_t len,
                              void **app, size_t *app_len, eddy_error *err) {
    engine *c = s->e;
    const size_t nl = (size_t)(c->sp->n_layer > 0 ? c->sp->n_layer : 1);
    parsed p = {0};
    p.conv = eddy_calloc(4 * nl, sizeof *p.conv);
    if (!p.conv) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    p.rec = p.conv + nl, p.keys = p.conv + 2 * nl, p.values = p.conv + 3 * nl;
    pthread_mutex_lock(&c->lock);
    seq_state stage = {.slot = -1, .n_ctx = c->n_ctx};
    eddy_status st = s->n_pending ? eddy_error_set(err, EDDY_ERR_ARG, "cannot load into a sequence whose verify awaits "
                                                   "eddy_seq_accept")
                     : c->gpu_failed[0] ? device_lost(c, "to", err)
                                        : staged_check(c, s, what, buf, len, &p, &stage, err);
    /* the sampler's bytes are checked against it before anything changes */
    if (st == EDDY_OK && smp && p.sec[SEC_SAMPLER] && !sampler_state_valid(smp, p.sec[SEC_SAMPLER], (size_t)p.sampler_bytes))
        st = BAD("%s: the sampler section is not a sampler state of this vocabulary", what);
    if (st == EDDY_OK && app) { /* the caller's bytes, copied out before anything changes */
        *app = NULL, *app_len = 0;
        if (p.sec[SEC_APP]) {
            *app = eddy_malloc(p.app_bytes ? (size_t)p.app_bytes : 1);
            if (!*app) st = eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
            else memcpy(*app, p.sec[SEC_APP], (size_t)p.app_bytes), *app_len = (size_t)p.app_bytes;
        }
    }
    if (st == EDDY_OK) st = apply(c, s, smp, &p, stage.blocks ? &stage : NULL, err);
    if (stage.blocks) seq_state_drop_kv(c->sp, &stage, 0); /* what apply did not take */
    pthread_mutex_unlock(&c->lock);
    eddy_free(stage.blocks);
    eddy_free(p.conv);
    return st;
}

eddy_status eddy_seq_load_buffer(eddy_seq *s, eddy_sampler *smp, const void *buf, size_t len, eddy_error *err) {
    if (!s || (!buf && len)) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_seq_load_buffer: NULL argument");
    return load_bytes(s, smp, "session buffer", buf, len, NULL, NULL, err);
}

eddy_status eddy_seq_load(eddy_seq *s, eddy_sampler *smp, const char *path, eddy_error *err) {
    return eddy_seq_load_app(s, smp, path, NULL, NULL, err);
}

/* The whole file at path in f (mapfile_close it). Mapped, not read into a buffer: no
 * second copy of a file of tens of megabytes in memory while it is copied into the
 * pool, and the kernel is asked to read the whole file ahead while the checks run.
 * Session files are replaced by rename (session_write_atomic), never rewritten in
 * place, so the mapped bytes do not change under the loader. */
static eddy_status read_file(const char *path, mapfile *f, eddy_error *err) {
    eddy_error e;
    eddy_status st = mapfile_open(f, path, true, &e);
    if (st != EDDY_OK) return eddy_error_set(err, st, "cannot open the session %s", e.msg);
    if (f->mapped) posix_madvise((void *)f->data, (size_t)f->size, POSIX_MADV_WILLNEED);
    return EDDY_OK;
}

eddy_status eddy_seq_load_app(eddy_seq *s, eddy_sampler *smp, const char *path, void **app, size_t *app_len,
                              eddy_error *err) {
    if (!s || !path || (app && !app_len)) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_seq_load: NULL argument");
    mapfile f;
    eddy_status st = read_file(path, &f, err);
    if (st != EDDY_OK) return st;
    st = load_bytes(s, smp, path, f.data, (size_t)f.size, app, app_len, err);
    mapfile_close(&f);
    return st;
}

/* ==== The prefix cache's files ==== */

eddy_status session_serialize_entry(engine *c, const seq_state *st, uint8_t **out, size_t *len, eddy_error *err) {
    return serialize_state(c, st, NULL, NULL, (app_bytes){NULL, 0}, out, len, err);
}

eddy_status session_load_prefix(engine *c, eddy_seq *s, const char *path, const int32_t *tokens, int64_t n,
                                eddy_error *err) {
    mapfile f;
    eddy_status st = read_file(path, &f, err);
    if (st != EDDY_OK) return st;
    const uint8_t *buf = f.data;
    const size_t len = (size_t)f.size;
    const size_t nl = (size_t)(c->sp->n_layer > 0 ? c->sp->n_layer : 1);
    parsed p = {0};
    p.conv = eddy_calloc(4 * nl, sizeof *p.conv);
    if (!p.conv) st = eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    else p.rec = p.conv + nl, p.keys = p.conv + 2 * nl, p.values = p.conv + 3 * nl;
    seq_state stage = {.slot = -1, .n_ctx = c->n_ctx};
    if (st == EDDY_OK) st = staged_check(c, s, path, buf, len, &p, &stage, err);
    if (st == EDDY_OK && p.n_pos != n) st = BAD("%s: holds %" PRId64 " positions, its name says %" PRId64, path, p.n_pos, n);
    for (int64_t i = 0; st == EDDY_OK && i < n; i++)
        if ((int32_t)get32(p.sec[SEC_TOKENS] + 4 * i) != tokens[i]) st = BAD("%s: holds other tokens", path);
    if (st == EDDY_OK) st = apply(c, s, NULL, &p, stage.blocks ? &stage : NULL, err);
    if (stage.blocks) seq_state_drop_kv(c->sp, &stage, 0); /* what apply did not take */
    eddy_free(stage.blocks);
    eddy_free(p.conv);
    mapfile_close(&f);
    return st;
}

void session_fingerprint_hex(const model *m, bool mtp, char out[33]) {
    XXH128_hash_t fp = fingerprint(m);
    if (mtp) fp.low64 ^= 0x6d7470ull; /* its states hold one more layer: files of their own */
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)fp.high64, (unsigned long long)fp.low64);
}
