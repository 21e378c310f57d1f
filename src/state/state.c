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

/* Bytes of layer il's five regions (conv, rec, keep, k, v); false on overflow. */
#define STATE_REGIONS 5
static bool layer_bytes(const state_layer_shape *sh, int64_t n_slots, int64_t n_rows, int64_t n_blocks, qtype tk,
                        qtype tv, size_t out[STATE_REGIONS]) {
    return region_bytes(n_slots + n_rows, sh->conv_floats, sizeof(float), &out[0]) &&
           region_bytes(n_slots, sh->rec_floats, sizeof(float), &out[1]) &&
           region_bytes(n_rows, sh->keep_floats, sizeof(float), &out[2]) &&
           region_bytes(n_blocks * STATE_KV_BLOCK, sh->kv_k, state_elem_bytes(tk), &out[3]) &&
           region_bytes(n_blocks * STATE_KV_BLOCK, sh->kv_v, state_elem_bytes(tv), &out[4]);
}

/* ==== Host memory ==== */

static void *host_alloc(size_t bytes) { return eddy_malloc_big(bytes); }
static void host_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
static void host_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

/* The recurrent slabs are read a state (hundreds of KiB) at a time and gain little from
 * huge pages, in which a row slot's first use would zero 2 MiB per layer for the few
 * KiB it writes (a 17-token verify of a 0.5B hybrid: 150 MB, 230 ms on a VM). KV blocks
 * and weights keep huge pages. */
static const state_mem host_mem = {host_alloc, eddy_free_aligned, host_zero, host_copy, host_copy, host_copy, true,
                                   eddy_malloc_small_pages};

void state_pool_free(state_pool *p) {
    if (!p) return;
    for (int64_t il = 0; il < p->n_layer; il++) {
        void *slabs[STATE_REGIONS] = {p->conv ? p->conv[il] : NULL, p->rec ? p->rec[il] : NULL,
                                      p->keep ? p->keep[il] : NULL, p->k ? p->k[il] : NULL, p->v ? p->v[il] : NULL};
        for (int i = 0; i < STATE_REGIONS; i++)
            if (slabs[i]) p->mem->free(slabs[i]);
    }
    eddy_free(p->conv);
    eddy_free(p->rec);
    eddy_free(p->keep);
    eddy_free(p->k);
    eddy_free(p->v);
    eddy_free(p->shape);
    eddy_free(p->slot_used);
    eddy_free(p->block_refs);
    eddy_free(p);
}

eddy_status state_pool_new(state_pool **out, const state_layer_shape *shapes, int64_t n_layer, int64_t n_slots,
                           int64_t n_blocks, qtype type_k, qtype type_v, eddy_error *err) {
    return state_pool_new_in(out, NULL, shapes, n_layer, n_slots, 0, n_blocks, type_k, type_v, err);
}

eddy_status state_pool_new_in(state_pool **out, const state_mem *mem, const state_layer_shape *shapes, int64_t n_layer,
                              int64_t n_slots, int64_t n_rows, int64_t n_blocks, qtype type_k, qtype type_v,
                              eddy_error *err) {
    *out = NULL;
    EDDY_ASSERT((type_k == QTYPE_F32 || type_k == QTYPE_F16) && (type_v == QTYPE_F32 || type_v == QTYPE_F16));
    EDDY_ASSERT(n_layer >= 0 && n_slots >= 1 && n_rows >= 0 && n_blocks >= 0 && n_blocks <= INT32_MAX);
    bool any_kv = false;
    for (int64_t il = 0; il < n_layer; il++) any_kv |= shapes[il].kv_k > 0 || shapes[il].kv_v > 0;
    if (!any_kv) n_blocks = 0;
    size_t total = 0;
    for (int64_t il = 0; il < n_layer; il++) {
        size_t b[STATE_REGIONS];
        if (!layer_bytes(&shapes[il], n_slots, n_rows, n_blocks, type_k, type_v, b))
            return eddy_error_set(err, EDDY_ERR_NOMEM, "the state of %lld sequences is too large", (long long)n_slots);
        for (int i = 0; i < STATE_REGIONS; i++) {
            if (total > SIZE_MAX - b[i])
                return eddy_error_set(err, EDDY_ERR_NOMEM, "the state of %lld sequences is too large",
                                      (long long)n_slots);
            total += b[i];
        }
    }
    state_pool *p = eddy_calloc(1, sizeof *p);
    if (!p) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    p->mem = mem ? mem : &host_mem;
    p->n_layer = n_layer;
    p->type_k = type_k, p->type_v = type_v;
    p->n_slots = p->n_slots_free = n_slots;
    p->n_rows = p->n_rows_free = n_rows;
    p->n_blocks = p->n_blocks_free = n_blocks;
    p->bytes = total;
    p->k_tiled = p->mem->host;
    const size_t nl = (size_t)(n_layer > 0 ? n_layer : 1);
    p->shape = eddy_calloc(nl, sizeof *p->shape);
    p->conv = eddy_calloc(nl, sizeof *p->conv);
    p->rec = eddy_calloc(nl, sizeof *p->rec);
    p->keep = eddy_calloc(nl, sizeof *p->keep);
    p->k = eddy_calloc(nl, sizeof *p->k);
    p->v = eddy_calloc(nl, sizeof *p->v);
    p->slot_used = eddy_calloc((size_t)(n_slots + n_rows), 1);
    p->block_refs = eddy_calloc((size_t)(n_blocks > 0 ? n_blocks : 1), sizeof *p->block_refs);
    bool ok = p->shape && p->conv && p->rec && p->keep && p->k && p->v && p->slot_used && p->block_refs;
    for (int64_t il = 0; ok && il < n_layer; il++) {
        p->shape[il] = shapes[il];
        size_t b[STATE_REGIONS];
        layer_bytes(&shapes[il], n_slots, n_rows, n_blocks, type_k, type_v, b); /* checked above */
        void **dst[STATE_REGIONS] = {(void **)&p->conv[il], (void **)&p->rec[il], (void **)&p->keep[il], &p->k[il],
                                     &p->v[il]};
        for (int i = 0; i < STATE_REGIONS && ok; i++) {
            void *(*alloc)(size_t) = i < 3 && p->mem->alloc_rec ? p->mem->alloc_rec : p->mem->alloc;
            if (b[i]) ok = (*dst[i] = alloc(b[i])) != NULL;
        }
    }
    if (!ok) {
        state_pool_free(p);
        return eddy_error_set(err, EDDY_ERR_NOMEM, "cannot allocate %.1f MiB of sequence state",
                              (double)total / (1 << 20));
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

int64_t state_slot_alloc(state_pool *p, bool zero) {
    for (int64_t s = 0; s < p->n_slots; s++) {
        if (p->slot_used[s]) continue;
        p->slot_used[s] = 1;
        p->n_slots_free--;
        for (int64_t il = 0; zero && il < p->n_layer; il++) {
            if (p->conv[il]) p->mem->zero(state_conv(p, il, s), (size_t)p->shape[il].conv_floats * sizeof(float));
            if (p->rec[il]) p->mem->zero(state_rec(p, il, s), (size_t)p->shape[il].rec_floats * sizeof(float));
        }
        return s;
    }
    return -1;
}

int64_t state_row_alloc(state_pool *p) {
    for (int64_t s = p->n_slots; s < p->n_slots + p->n_rows; s++) {
        if (p->slot_used[s]) continue;
        p->slot_used[s] = 1;
        p->n_rows_free--;
        return s;
    }
    return -1;
}

void state_slot_free(state_pool *p, int64_t slot) {
    EDDY_ASSERT(slot >= 0 && slot < p->n_slots + p->n_rows && p->slot_used[slot]);
    p->slot_used[slot] = 0;
    if (slot < p->n_slots) p->n_slots_free++;
    else p->n_rows_free++;
}

void state_slot_copy_layer(state_pool *p, int64_t il, int64_t dst, int64_t src) {
    if (dst == src) return;
    if (p->conv[il])
        p->mem->copy(state_conv(p, il, dst), state_conv(p, il, src), (size_t)p->shape[il].conv_floats * sizeof(float));
    if (p->rec[il])
        p->mem->copy(state_rec(p, il, dst), state_rec(p, il, src), (size_t)p->shape[il].rec_floats * sizeof(float));
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
            const int64_t krows = p->k_tiled ? (rows + STATE_KV_TILE - 1) / STATE_KV_TILE * STATE_KV_TILE : rows;
            p->mem->copy((char *)p->k[il] + (size_t)dst * STATE_KV_BLOCK * row,
                   (const char *)p->k[il] + (size_t)src * STATE_KV_BLOCK * row, (size_t)krows * row);
        }
        if (p->v[il]) {
            const size_t row = (size_t)p->shape[il].kv_v * state_elem_bytes(p->type_v);
            p->mem->copy((char *)p->v[il] + (size_t)dst * STATE_KV_BLOCK * row,
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
    EDDY_ASSERT(p->k_tiled && rows >= 0 && rows <= STATE_KV_BLOCK);
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
              p->k_tiled ? STATE_KV_TILE : 1);
    store_row((char *)p->v[il] + (size_t)(rk * sh->kv_v) * state_elem_bytes(p->type_v), p->type_v, v, sh->kv_v, 1);
}

/* ==== Sequence states ==== */

eddy_status seq_state_init(state_pool *p, seq_state *s, int64_t n_ctx, const char *what, eddy_error *err) {
    memset(s, 0, sizeof *s);
    s->slot = -1;
    const int64_t nb = seq_state_n_blocks(n_ctx);
    s->blocks = eddy_malloc((size_t)(nb > 0 ? nb : 1) * sizeof *s->blocks);
    s->tokens = eddy_malloc((size_t)(n_ctx > 0 ? n_ctx : 1) * sizeof *s->tokens);
    if (!s->blocks || !s->tokens) {
        seq_state_release(p, s);
        return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    }
    s->slot = state_slot_alloc(p, true);
    if (s->slot < 0) {
        seq_state_release(p, s);
        return eddy_error_set(err, EDDY_ERR_NOMEM,
                              "no free state slot for a new %s: all %lld hold sequences, snapshots or "
                              "verified positions (free one, or make the engine with more)",
                              what, (long long)p->n_slots);
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
    for (int64_t il = 0; il < p->n_layer; il++) {
        if (p->conv[il]) p->mem->zero(state_conv(p, il, s->slot), (size_t)p->shape[il].conv_floats * sizeof(float));
        if (p->rec[il]) p->mem->zero(state_rec(p, il, s->slot), (size_t)p->shape[il].rec_floats * sizeof(float));
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
