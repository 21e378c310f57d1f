/*
 * state.c — the state pool (recurrent slots, reference-counted KV blocks) and the
 * sequence states that hold them: allocation, copy, copy-on-write, release.
 */
#include "state.h"

#include <string.h>

#include "base/alloc.h"
#include "quant/fp16.h"


/* ==== The pool ==== */

/* rows * n * elem bytes, rounded up to a cache line; false on overflow. */
static bool region_bytes(int64_t rows, int64_t n, size_t elem, size_t *out) {
    size_t b;
    if (rows < 0 || n < 0 || !eddy_mul_size((size_t)rows, (size_t)n, &b) || !eddy_mul_size(b, elem, &b) ||
        b > SIZE_MAX - 63)
        return false;
    *out = (b + 63) & ~(size_t)63;
    return true;
}

/* Bytes of layer il's regions (rounded up each); false on overflow. The first
 * STATE_MEM_REGIONS are in the pool's memory, the others in pinned host memory. */
enum { R_CONV, R_REC, R_KEEP, R_K, R_V, R_CONV_HOST, R_REC_HOST, STATE_REGIONS };
#define STATE_MEM_REGIONS R_CONV_HOST
static bool layer_bytes(const state_layer_shape *sh, const state_pool_size *z, qtype tk, qtype tv,
                        size_t out[STATE_REGIONS]) {
    return region_bytes(z->n_slots + z->n_rows, sh->conv_floats, sizeof(float), &out[R_CONV]) &&
           region_bytes(z->n_slots, sh->rec_floats, sizeof(float), &out[R_REC]) &&
           region_bytes(z->n_rows, sh->keep_floats, sizeof(float), &out[R_KEEP]) &&
           region_bytes(z->n_blocks * STATE_KV_BLOCK, sh->kv_k, state_elem_bytes(tk), &out[R_K]) &&
           region_bytes(z->n_blocks * STATE_KV_BLOCK, sh->kv_v, state_elem_bytes(tv), &out[R_V]) &&
           region_bytes(z->n_host, sh->conv_floats, sizeof(float), &out[R_CONV_HOST]) &&
           region_bytes(z->n_host, sh->rec_floats, sizeof(float), &out[R_REC_HOST]);
}

/* The slab of region r of layer il (its address in the pool's arrays). */
static void **region_slab(state_pool *p, int r, int64_t il) {
    switch (r) {
    case R_CONV: return (void **)&p->conv[il];
    case R_REC: return (void **)&p->rec[il];
    case R_KEEP: return (void **)&p->keep[il];
    case R_K: return &p->k[il];
    case R_V: return &p->v[il];
    case R_CONV_HOST: return (void **)&p->conv_host[il];
    default: return (void **)&p->rec_host[il];
    }
}

/* ==== Host memory ==== */

static void *host_alloc(void *ctx, size_t bytes) {
    (void)ctx;
    return eddy_malloc_big(bytes);
}
static void *host_alloc_rec(void *ctx, size_t bytes) {
    (void)ctx;
    return eddy_malloc_small_pages(bytes);
}
static void host_free(void *ctx, void *p) {
    (void)ctx;
    eddy_free_aligned(p);
}
static void host_zero(void *ctx, void *p, size_t bytes) {
    (void)ctx;
    memset(p, 0, bytes);
}
static void host_copy(void *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    memcpy(dst, src, bytes);
}
static bool host_to_host(void *ctx, void *dst, const state_piece *src, int64_t n) {
    (void)ctx;
    for (int64_t i = 0; i < n; dst = (char *)dst + src[i].bytes, i++) memcpy(dst, src[i].at, src[i].bytes);
    return true;
}
static bool host_from_host(void *ctx, const state_piece *dst, int64_t n, const void *src) {
    (void)ctx;
    for (int64_t i = 0; i < n; src = (const char *)src + dst[i].bytes, i++) memcpy(dst[i].at, src, dst[i].bytes);
    return true;
}
/* host slots of the layers a split pool keeps in host memory: plain, zeroed */
static void *host_alloc_host(void *ctx, size_t bytes) {
    (void)ctx;
    void *p = eddy_malloc_aligned(bytes, 64);
    if (p) memset(p, 0, bytes);
    return p;
}

/* The recurrent slabs are read a state (hundreds of KiB) at a time and gain little from
 * huge pages, in which a row slot's first use would zero 2 MiB per layer for the few
 * KiB it writes (a 17-token verify of a 0.5B hybrid: 150 MB, 230 ms on a VM). KV blocks
 * and weights keep huge pages. */
const state_mem state_host_mem = {.alloc = host_alloc, .free = host_free, .zero = host_zero, .copy = host_copy,
                                  .to_host = host_to_host, .from_host = host_from_host, .host = true,
                                  .alloc_rec = host_alloc_rec, .alloc_host = host_alloc_host, .free_host = host_free};

void state_pool_free(state_pool *p) {
    if (!p) return;
    const bool arrays = p->conv && p->rec && p->keep && p->k && p->v && p->conv_host && p->rec_host;
    for (int64_t il = 0; arrays && il < p->n_layer; il++) {
        const state_mem *mem = state_layer_mem(p, il);
        for (int r = 0; r < STATE_REGIONS; r++) {
            void *slab = *region_slab(p, r, il);
            if (slab && r < STATE_MEM_REGIONS) mem->free(mem->ctx, slab);
            else if (slab) mem->free_host(mem->ctx, slab);
        }
    }
    eddy_free(p->conv);
    eddy_free(p->rec);
    eddy_free(p->keep);
    eddy_free(p->conv_host);
    eddy_free(p->rec_host);
    eddy_free(p->k);
    eddy_free(p->v);
    eddy_free(p->shape);
    eddy_free(p->slot_used);
    eddy_free(p->block_refs);
    eddy_free(p);
}

eddy_status state_pool_new(state_pool **out, const state_layer_shape *shapes, int64_t n_layer, int64_t n_slots,
                           int64_t n_blocks, qtype type_k, qtype type_v, eddy_error *err) {
    const state_pool_size size = {.n_slots = n_slots, .n_blocks = n_blocks};
    return state_pool_new_in(out, NULL, shapes, n_layer, &size, type_k, type_v, err);
}

eddy_status state_pool_new_in(state_pool **out, const state_mem *mem, const state_layer_shape *shapes, int64_t n_layer,
                              const state_pool_size *size, qtype type_k, qtype type_v, eddy_error *err) {
    *out = NULL;
    if (!mem) mem = &state_host_mem;
    state_pool_size z = *size;
    EDDY_ASSERT((type_k == QTYPE_F32 || type_k == QTYPE_F16) && (type_v == QTYPE_F32 || type_v == QTYPE_F16));
    EDDY_ASSERT(n_layer >= 0 && z.n_slots >= 1 && z.n_rows >= 0 && z.n_blocks >= 0 && z.n_blocks <= INT32_MAX);
    EDDY_ASSERT(z.n_host == 0 || (z.n_host > 0 && mem->alloc_host));
    EDDY_ASSERT(z.mem_from >= 0 && z.mem_from <= n_layer);
    bool any_kv = false;
    for (int64_t il = 0; il < n_layer; il++) any_kv |= shapes[il].kv_k > 0 || shapes[il].kv_v > 0;
    if (!any_kv) z.n_blocks = 0;
    size_t total[2] = {0, 0}; /* the pool's memory, pinned host memory (of mem's layers) */
    for (int64_t il = z.mem_from; il < n_layer; il++) {
        size_t b[STATE_REGIONS];
        bool fits = layer_bytes(&shapes[il], &z, type_k, type_v, b);
        for (int r = 0; fits && r < STATE_REGIONS; r++) {
            size_t *t = &total[r >= STATE_MEM_REGIONS];
            fits = *t <= SIZE_MAX - b[r];
            if (fits) *t += b[r];
        }
        if (!fits)
            return eddy_error_set(err, EDDY_ERR_NOMEM, "the state of %lld sequences is too large",
                                  (long long)z.n_slots);
    }
    state_pool *p = eddy_calloc(1, sizeof *p);
    if (!p) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    p->mem = mem;
    p->mem_from = z.mem_from;
    p->n_layer = n_layer;
    p->type_k = type_k, p->type_v = type_v;
    p->n_slots = p->n_slots_free = z.n_slots;
    p->n_rows = p->n_rows_free = z.n_rows;
    p->n_host = p->n_host_free = z.n_host;
    p->n_blocks = p->n_blocks_free = z.n_blocks;
    p->bytes = total[0], p->host_bytes = total[1];
    const size_t nl = (size_t)(n_layer > 0 ? n_layer : 1);
    p->shape = eddy_calloc(nl, sizeof *p->shape);
    p->conv = eddy_calloc(nl, sizeof *p->conv);
    p->rec = eddy_calloc(nl, sizeof *p->rec);
    p->keep = eddy_calloc(nl, sizeof *p->keep);
    p->conv_host = eddy_calloc(nl, sizeof *p->conv_host);
    p->rec_host = eddy_calloc(nl, sizeof *p->rec_host);
    p->k = eddy_calloc(nl, sizeof *p->k);
    p->v = eddy_calloc(nl, sizeof *p->v);
    p->slot_used = eddy_calloc((size_t)(z.n_slots + z.n_rows + z.n_host), 1);
    p->block_refs = eddy_calloc((size_t)(z.n_blocks > 0 ? z.n_blocks : 1), sizeof *p->block_refs);
    bool ok = p->shape && p->conv && p->rec && p->keep && p->conv_host && p->rec_host && p->k && p->v &&
              p->slot_used && p->block_refs;
    for (int64_t il = 0; ok && il < n_layer; il++) {
        p->shape[il] = shapes[il];
        size_t b[STATE_REGIONS];
        const state_mem *lm = state_layer_mem(p, il);
        ok = layer_bytes(&shapes[il], &z, type_k, type_v, b); /* mem's layers checked above */
        for (int r = 0; r < STATE_REGIONS && ok; r++) {
            void *(*alloc)(void *, size_t) = lm->alloc;
            if (r >= STATE_MEM_REGIONS) alloc = lm->alloc_host;
            else if (r <= R_KEEP && lm->alloc_rec) alloc = lm->alloc_rec;
            if (b[r]) ok = (*region_slab(p, r, il) = alloc(lm->ctx, b[r])) != NULL;
        }
    }
    if (!ok) {
        state_pool_free(p);
        return eddy_error_set(err, EDDY_ERR_NOMEM, "cannot allocate %.1f MiB of sequence state%s",
                              (double)total[0] / (1 << 20),
                              total[1] ? " (and its host slots' pinned memory)" : "");
    }
    *out = p;
    return EDDY_OK;
}

size_t state_slot_bytes(const state_pool *p) {
    size_t b = 0;
    for (int64_t il = 0; il < p->n_layer; il++)
        b += (size_t)(p->shape[il].conv_floats + p->shape[il].rec_floats) * sizeof(float);
    return b;
}

size_t state_row_bytes(const state_pool *p) {
    size_t b = 0;
    for (int64_t il = 0; il < p->n_layer; il++)
        b += (size_t)(p->shape[il].conv_floats + p->shape[il].keep_floats) * sizeof(float);
    return b;
}

size_t state_block_bytes(const state_pool *p) {
    size_t b = 0;
    for (int64_t il = 0; il < p->n_layer; il++)
        b += (size_t)STATE_KV_BLOCK *
             ((size_t)p->shape[il].kv_k * state_elem_bytes(p->type_k) + (size_t)p->shape[il].kv_v * state_elem_bytes(p->type_v));
    return b;
}

/* ==== Recurrent slots ==== */

/* The first free index of [first, first + n), marked used and counted off *n_free; -1
 * when all are used. */
static int64_t take_slot(state_pool *p, int64_t first, int64_t n, int64_t *n_free) {
    for (int64_t s = first; s < first + n; s++) {
        if (p->slot_used[s]) continue;
        p->slot_used[s] = 1;
        (*n_free)--;
        return s;
    }
    return -1;
}

int64_t state_slot_alloc(state_pool *p, bool zero) {
    const int64_t s = take_slot(p, 0, p->n_slots, &p->n_slots_free);
    for (int64_t il = 0; s >= 0 && zero && il < p->n_layer; il++) {
        if (p->conv[il]) state_mem_zero(p, il, state_conv(p, il, s), (size_t)p->shape[il].conv_floats * sizeof(float));
        if (p->rec[il]) state_mem_zero(p, il, state_rec(p, il, s), (size_t)p->shape[il].rec_floats * sizeof(float));
    }
    return s;
}

int64_t state_row_alloc(state_pool *p) { return take_slot(p, p->n_slots, p->n_rows, &p->n_rows_free); }

int64_t state_host_alloc(state_pool *p) { return take_slot(p, p->n_slots + p->n_rows, p->n_host, &p->n_host_free); }

void state_slot_free(state_pool *p, int64_t slot) {
    EDDY_ASSERT(slot >= 0 && slot < p->n_slots + p->n_rows + p->n_host && p->slot_used[slot]);
    p->slot_used[slot] = 0;
    if (slot < p->n_slots) p->n_slots_free++;
    else if (slot < p->n_slots + p->n_rows) p->n_rows_free++;
    else p->n_host_free++;
}

/* Where layer il's conv window (rec false) or recurrent matrices (rec true) of a
 * recurrent or host slot are, and (*host) whether in host memory. */
static float *slot_part(const state_pool *p, int64_t il, int64_t slot, bool rec, bool *host) {
    *host = state_slot_on_host(p, slot);
    if (!*host) return rec ? state_rec(p, il, slot) : state_conv(p, il, slot);
    const int64_t h = slot - p->n_slots - p->n_rows;
    return rec ? p->rec_host[il] + h * p->shape[il].rec_floats : p->conv_host[il] + h * p->shape[il].conv_floats;
}

void state_slot_copy_layer(state_pool *p, int64_t il, int64_t dst, int64_t src) {
    if (dst == src) return;
    for (int rec = 0; rec < 2; rec++) {
        const size_t bytes = (size_t)(rec ? p->shape[il].rec_floats : p->shape[il].conv_floats) * sizeof(float);
        if (!bytes) continue;
        bool dst_host, src_host;
        float *d = slot_part(p, il, dst, rec, &dst_host), *s = slot_part(p, il, src, rec, &src_host);
        /* (a copy that a failed device refuses: the next step says so) */
        if (dst_host && src_host) memcpy(d, s, bytes);
        else if (dst_host) (void)state_mem_to_host(p, il, d, &(state_piece){s, bytes}, 1);
        else if (src_host) (void)state_mem_from_host(p, il, &(state_piece){d, bytes}, 1, s);
        else state_mem_copy(p, il, d, s, bytes);
    }
}

void state_slot_copy(state_pool *p, int64_t dst, int64_t src) {
    for (int64_t il = 0; il < p->n_layer; il++) state_slot_copy_layer(p, il, dst, src);
}

/* ==== KV blocks ==== */

static int32_t block_alloc(state_pool *p) {
    for (int64_t b = 0; b < p->n_blocks; b++)
        if (p->block_refs[b] == 0) {
            p->block_refs[b] = 1;
            p->n_blocks_free--;
            return (int32_t)b;
        }
    return -1;
}

static void block_unref(state_pool *p, int32_t b) {
    EDDY_ASSERT(b >= 0 && b < p->n_blocks && p->block_refs[b] > 0);
    if (--p->block_refs[b] == 0) p->n_blocks_free++;
}

/* Rows [0, rows) of block src copied into block dst, in every attention layer (keys
 * in whole tiles when tiled). */
static void block_copy_rows(state_pool *p, int32_t dst, int32_t src, int64_t rows) {
    for (int64_t il = 0; il < p->n_layer; il++) {
        if (p->k[il]) {
            const size_t row = (size_t)p->shape[il].kv_k * state_elem_bytes(p->type_k);
            const int64_t krows =
                state_k_tiled(p, il) ? (rows + STATE_KV_TILE - 1) / STATE_KV_TILE * STATE_KV_TILE : rows;
            state_mem_copy(p, il, (char *)p->k[il] + (size_t)dst * STATE_KV_BLOCK * row,
                           (const char *)p->k[il] + (size_t)src * STATE_KV_BLOCK * row, (size_t)krows * row);
        }
        if (p->v[il]) {
            const size_t row = (size_t)p->shape[il].kv_v * state_elem_bytes(p->type_v);
            state_mem_copy(p, il, (char *)p->v[il] + (size_t)dst * STATE_KV_BLOCK * row,
                           (const char *)p->v[il] + (size_t)src * STATE_KV_BLOCK * row, (size_t)rows * row);
        }
    }
}

/* dst[i * stride] = src[i] in type t (f16: round to nearest, ties to even). */
static void store_row(void *dst, qtype t, const float *src, int64_t n, int64_t stride) {
    if (t == QTYPE_F16) {
        uint16_t *h = dst;
        for (int64_t i = 0; i < n; i++) h[i * stride] = f32_to_fp16(src[i]);
    } else if (stride == 1) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else {
        float *f = dst;
        for (int64_t i = 0; i < n; i++) f[i * stride] = src[i];
    }
}

/* One tile's n rows between the tile (kv_k, STATE_KV_TILE) and flat rows (n, kv_k), for
 * elements of type T: the tile's side goes in order. */
#define TILE_COPY(T)                                                                  \
    for (int64_t e = 0; e < kv_k; e++)                                                \
        for (int64_t jj = 0; jj < n; jj++) {                                          \
            T *te = (T *)tile + e * STATE_KV_TILE + jj, *fe = (T *)flat_t + jj * kv_k + e;    \
            if (to_block) *te = *fe;                                                  \
            else *fe = *te;                                                           \
        }

void state_tiled_keys_copy(const state_pool *p, int64_t il, void *block, void *flat, int64_t rows, bool to_block) {
    EDDY_ASSERT(state_k_tiled(p, il) && rows >= 0 && rows <= STATE_KV_BLOCK);
    const int64_t kv_k = p->shape[il].kv_k;
    const size_t el = state_elem_bytes(p->type_k), tile_bytes = (size_t)(STATE_KV_TILE * kv_k) * el;
    for (int64_t t0 = 0; t0 < rows; t0 += STATE_KV_TILE) {
        const int64_t n = rows - t0 < STATE_KV_TILE ? rows - t0 : STATE_KV_TILE;
        char *tile = (char *)block + (size_t)(t0 / STATE_KV_TILE) * tile_bytes;
        char *flat_t = (char *)flat + (size_t)(t0 * kv_k) * el;
        if (el == sizeof(uint16_t)) {
            TILE_COPY(uint16_t)
        } else {
            TILE_COPY(float)
        }
    }
}
#undef TILE_COPY

void state_store_kv(state_pool *p, int64_t il, int32_t block, int64_t row, const float *k, const float *v) {
    const state_layer_shape *sh = &p->shape[il];
    EDDY_ASSERT(p->k[il] && p->v[il] && block >= 0 && block < p->n_blocks && p->block_refs[block] == 1);
    EDDY_ASSERT(row >= 0 && row < STATE_KV_BLOCK);
    const int64_t rk = (int64_t)block * STATE_KV_BLOCK + row;
    const int64_t k0 = (int64_t)block * state_block_elems_k(p, il) + state_k_elem(p, il, row, 0);
    store_row((char *)p->k[il] + (size_t)k0 * state_elem_bytes(p->type_k), p->type_k, k, sh->kv_k,
              state_k_tiled(p, il) ? STATE_KV_TILE : 1);
    store_row((char *)p->v[il] + (size_t)(rk * sh->kv_v) * state_elem_bytes(p->type_v), p->type_v, v, sh->kv_v, 1);
}

/* ==== Sequence states ==== */

eddy_status seq_state_init(state_pool *p, seq_state *s, int64_t n_ctx, bool host, const char *what,
                           eddy_error *err) {
    memset(s, 0, sizeof *s);
    s->slot = -1;
    const int64_t nb = seq_state_n_blocks(n_ctx);
    s->blocks = eddy_malloc((size_t)(nb > 0 ? nb : 1) * sizeof *s->blocks);
    s->tokens = eddy_malloc((size_t)(n_ctx > 0 ? n_ctx : 1) * sizeof *s->tokens);
    if (!s->blocks || !s->tokens) {
        seq_state_release(p, s);
        return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    }
    s->slot = host ? state_host_alloc(p) : state_slot_alloc(p, true);
    if (s->slot < 0) {
        seq_state_release(p, s);
        return eddy_error_set(err, EDDY_ERR_NOMEM,
                              "no free state slot for a new %s: all %lld hold sequences, snapshots or "
                              "cached states (free one, or make the engine with more)",
                              what, (long long)(host ? p->n_host : p->n_slots));
    }
    s->n_ctx = n_ctx;
    for (int64_t i = 0; i < nb; i++) s->blocks[i] = -1;
    return EDDY_OK;
}

void seq_state_release(state_pool *p, seq_state *s) {
    if (s->blocks && s->tokens) seq_state_drop_kv(p, s, 0);
    if (s->slot >= 0) state_slot_free(p, s->slot);
    eddy_free(s->blocks);
    eddy_free(s->tokens);
    memset(s, 0, sizeof *s);
    s->slot = -1;
}

void seq_state_copy(state_pool *p, seq_state *dst, const seq_state *src) {
    if (dst == src) return;
    EDDY_ASSERT(dst->n_ctx == src->n_ctx);
    state_slot_copy(p, dst->slot, src->slot);
    const int64_t nb = seq_state_n_blocks(src->n_ctx);
    for (int64_t i = 0; i < nb; i++) /* take the new references before dropping the old */
        if (src->blocks[i] >= 0) p->block_refs[src->blocks[i]]++;
    for (int64_t i = 0; i < nb; i++)
        if (dst->blocks[i] >= 0) block_unref(p, dst->blocks[i]);
    memcpy(dst->blocks, src->blocks, (size_t)nb * sizeof *dst->blocks);
    memcpy(dst->tokens, src->tokens, (size_t)src->n_pos * sizeof *dst->tokens);
    dst->n_pos = src->n_pos;
}

void seq_state_clear(state_pool *p, seq_state *s) {
    seq_state_drop_kv(p, s, 0);
    for (int64_t il = 0; il < p->n_layer; il++)
        for (int rec = 0; rec < 2; rec++) {
            const size_t bytes = (size_t)(rec ? p->shape[il].rec_floats : p->shape[il].conv_floats) * sizeof(float);
            bool host;
            float *at = bytes ? slot_part(p, il, s->slot, rec, &host) : NULL;
            if (at && host) memset(at, 0, bytes);
            else if (at) state_mem_zero(p, il, at, bytes);
        }
}

void seq_state_drop_kv(state_pool *p, seq_state *s, int64_t n_pos) {
    EDDY_ASSERT(n_pos >= 0 && n_pos <= s->n_ctx);
    const int64_t nb = seq_state_n_blocks(s->n_ctx), keep = seq_state_n_blocks(n_pos);
    for (int64_t i = keep; i < nb; i++)
        if (s->blocks[i] >= 0) block_unref(p, s->blocks[i]), s->blocks[i] = -1;
    s->n_pos = n_pos;
}

bool seq_state_reserve_kv(state_pool *p, seq_state *s, int64_t pos0, int64_t n) {
    EDDY_ASSERT(pos0 >= 0 && n >= 0 && pos0 + n <= s->n_ctx);
    if (p->n_blocks == 0 || n == 0) return true;
    const int64_t b0 = pos0 / STATE_KV_BLOCK, b1 = (pos0 + n - 1) / STATE_KV_BLOCK;
    int64_t need = 0;
    for (int64_t i = b0; i <= b1; i++) need += s->blocks[i] < 0 || p->block_refs[s->blocks[i]] > 1;
    if (need > p->n_blocks_free) return false;
    for (int64_t i = b0; i <= b1; i++) {
        const int32_t old = s->blocks[i];
        if (old >= 0 && p->block_refs[old] == 1) continue;
        const int32_t b = block_alloc(p);
        EDDY_ASSERT(b >= 0);
        if (old >= 0) { /* shared: copy the rows held (or written before pos0), then let go of it */
            const int64_t rows = (pos0 > s->n_pos ? pos0 : s->n_pos) - i * STATE_KV_BLOCK;
            if (rows > 0) block_copy_rows(p, b, old, rows < STATE_KV_BLOCK ? rows : STATE_KV_BLOCK);
            block_unref(p, old);
        }
        s->blocks[i] = b;
    }
    return true;
}
