/*
 * state.h — the state pool: the memory of everything an engine's sequences carry
 * from one call to the next, and the sequence states that index it.
 *
 * Owns: four kinds of storage, all sized once when the engine is made.
 *   recurrent slots  per layer with a recurrent mixer, two slabs indexed by slot:
 *                    conv (n_slots + n_rows, conv_floats) — the conv window — and
 *                    rec (n_slots, rec_floats) — the delta-rule / SSM matrices;
 *                    their layouts belong to the layer's kernels (src/ssm). A slot
 *                    index means the same slot in every layer.
 *   row slots        what a verify keeps of one token until it is accepted: the
 *                    conv window after it (in the conv slab, after the recurrent
 *                    slots) and the inputs the layer replays it from, keep
 *                    (n_rows, keep_floats) — a few KiB a layer where a recurrent
 *                    slot holds MiBs. Their indices follow the recurrent slots':
 *                    row slot r is index n_slots + r.
 *   host slots       recurrent slots in host memory for states no kernel reads (a
 *                    GPU engine's snapshots): conv_host (n_host, conv_floats) and
 *                    rec_host (n_host, rec_floats), pinned (mem->alloc_host), taken
 *                    and given back by copies across the bus. Host slot h is index
 *                    n_slots + n_rows + h.
 *   KV blocks        per attention layer, key rows (n_blocks, STATE_KV_BLOCK, kv_k)
 *                    in type_k and value rows (n_blocks, STATE_KV_BLOCK, kv_v) in
 *                    type_v (f32, or f16 rounded to nearest even as llama.cpp stores
 *                    its F16 cache). In host memory (state_k_tiled) each STATE_KV_TILE rows
 *                    of keys are stored transposed, (kv_k, STATE_KV_TILE): the
 *                    attention kernels read a tile's keys dimension by dimension, as
 *                    vectors of STATE_KV_TILE positions, without transposing them at
 *                    every step. A block holds STATE_KV_BLOCK consecutive
 *                    positions of one sequence in every attention layer; blocks are
 *                    reference-counted, so a fork or a snapshot shares its prefix's
 *                    blocks and a write to a shared block copies it first.
 * A seq_state is one sequence's view: its slot, its block table, its position and
 * the tokens it holds. Snapshots are seq_states too, frozen. Copying a seq_state
 * copies the recurrent slot (a few MiB at most) and shares the KV blocks.
 *
 * Does not own: what the model computes (src/model), locking (the engine's).
 */
#ifndef EDDY_STATE_H
#define EDDY_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "quant/qtypes.h"

/* Positions per KV block: one chunk of the attention kernels (ATTN_CHUNK), so a
 * chunk's keys never straddle two blocks. */
#define STATE_KV_BLOCK 256
/* Key rows per transposed tile in host pools (ATTN_KB: one block of the attention
 * kernels). */
#define STATE_KV_TILE 16

/* Bytes of one KV cache element of type t (QTYPE_F16 or QTYPE_F32). */
static inline size_t state_elem_bytes(qtype t) { return t == QTYPE_F16 ? sizeof(uint16_t) : sizeof(float); }

typedef struct {
    int64_t kv_k, kv_v;    /* elements per key / value row; 0 for a layer without attention */
    int64_t conv_floats;   /* conv window floats; 0 for a layer without recurrence */
    int64_t rec_floats;    /* recurrent matrix floats; 0 for a layer without recurrence */
    int64_t keep_floats;   /* a verified row's kept inputs (row slots); 0 for a layer without recurrence */
} state_layer_shape;

/* A piece of pool memory that a copy to or from the host takes or fills: a KV block's
 * rows, a slot's conv window or recurrent matrices. */
typedef struct {
    void *at;
    size_t bytes;
} state_piece;

/* Where a pool's slabs live: host memory (the default) or a device's (the CUDA
 * backend). Everything the pool itself does to slab contents goes through these, each
 * given ctx (the backend's: the GPU's copies run on its engine's stream). */
typedef struct {
    void *ctx;
    void *(*alloc)(void *ctx, size_t bytes); /* NULL when it cannot */
    void (*free)(void *ctx, void *p);
    void (*zero)(void *ctx, void *p, size_t bytes);
    void (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
    /* n pieces of pool memory into one run of host memory, back to back, and out of one
     * (session files, host slots): a backend whose copies each cost a round trip batches
     * them. False when the device failed (the copy's bytes are then not to be trusted). */
    bool (*to_host)(void *ctx, void *host_dst, const state_piece *src, int64_t n);
    bool (*from_host)(void *ctx, const state_piece *dst, int64_t n, const void *host_src);
    bool host;                    /* the slabs are host memory: the CPU may read them */
    void *(*alloc_rec)(void *ctx, size_t bytes); /* the recurrent slabs' (NULL: alloc's) */
    void *(*alloc_host)(void *ctx, size_t bytes); /* the host slots' slabs, zeroed (NULL: the pool has none) */
    void (*free_host)(void *ctx, void *p);
} state_mem;

/* The slots and blocks of a pool, and which of its layers are in its memory. */
typedef struct {
    int64_t n_slots;  /* recurrent slots, >= 1 */
    int64_t n_rows;   /* row slots */
    int64_t n_host;   /* host slots (0 unless mem->alloc_host) */
    int64_t n_blocks; /* KV blocks */
    int64_t mem_from; /* layers [mem_from, n_layer) in mem, the ones before in host memory (a
                       * model split between the CPU and a GPU); 0: all */
} state_pool_size;

typedef struct {
    const state_mem *mem;     /* of layers [mem_from, n_layer); host memory before them */
    int64_t mem_from;
    int64_t n_layer;
    state_layer_shape *shape; /* (n_layer) */
    qtype type_k, type_v;     /* QTYPE_F32 or QTYPE_F16 */
    int64_t n_slots, n_rows, n_host, n_blocks;
    float **conv;             /* (n_layer) each (n_slots + n_rows, conv_floats), or NULL */
    float **rec;              /* (n_layer) each (n_slots, rec_floats), or NULL */
    float **keep;             /* (n_layer) each (n_rows, keep_floats), or NULL */
    float **conv_host, **rec_host; /* (n_layer) each (n_host, conv_floats / rec_floats), or NULL */
    void **k, **v;            /* (n_layer) each (n_blocks, STATE_KV_BLOCK, kv_k / kv_v), or NULL */
    uint8_t *slot_used;       /* (n_slots + n_rows + n_host) */
    int32_t *block_refs;      /* (n_blocks) holders of each block; 0: free */
    int64_t n_slots_free, n_rows_free, n_host_free, n_blocks_free;
    size_t bytes;             /* of every slab and block in mem's memory together */
    size_t host_bytes;        /* of the host slots' slabs in mem's layers */
} state_pool;

/* Host memory's operations (the default pool memory). */
extern const state_mem state_host_mem;

/* shapes: (n_layer). The memory is reserved, not touched: pages a sequence never
 * reaches cost address space only. Fails with NOMEM naming the bytes. */
eddy_status state_pool_new(state_pool **out, const state_layer_shape *shapes, int64_t n_layer, int64_t n_slots,
                           int64_t n_blocks, qtype type_k, qtype type_v, eddy_error *err);
/* The same with row and host slots, the slabs from mem (NULL: host memory). */
eddy_status state_pool_new_in(state_pool **out, const state_mem *mem, const state_layer_shape *shapes, int64_t n_layer,
                              const state_pool_size *size, qtype type_k, qtype type_v, eddy_error *err);
void state_pool_free(state_pool *p);

/* Bytes of one recurrent slot, one row slot and one KV block (all layers each). */
size_t state_slot_bytes(const state_pool *p);
size_t state_row_bytes(const state_pool *p);
size_t state_block_bytes(const state_pool *p);

/* ==== Recurrent slots ==== */

/* A free slot, zeroed when asked (a slot about to be overwritten need not be); -1
 * when none is free. */
int64_t state_slot_alloc(state_pool *p, bool zero);
/* A free row slot's index (n_slots + r; its contents as the last holder left them); -1
 * when none is free. */
int64_t state_row_alloc(state_pool *p);
/* A free host slot's index (n_slots + n_rows + h; contents as left); -1 when none is. */
int64_t state_host_alloc(state_pool *p);
/* Gives back a recurrent, row or host slot. */
void state_slot_free(state_pool *p, int64_t slot);
/* Whether slot is a host slot: state_conv and state_rec do not address it, copies do. */
static inline bool state_slot_on_host(const state_pool *p, int64_t slot) { return slot >= p->n_slots + p->n_rows; }
/* Copies a recurrent or host slot's state to another (across the bus where one is a host
 * slot of a device pool). */
void state_slot_copy(state_pool *p, int64_t dst, int64_t src);
/* The same for layer il only (its conv window and recurrent matrices). */
void state_slot_copy_layer(state_pool *p, int64_t il, int64_t dst, int64_t src);

static inline float *state_conv(const state_pool *p, int64_t il, int64_t slot) {
    return p->conv[il] + slot * p->shape[il].conv_floats;
}
static inline float *state_rec(const state_pool *p, int64_t il, int64_t slot) {
    return p->rec[il] + slot * p->shape[il].rec_floats;
}
/* Row slot `slot`'s (n_slots + r) kept inputs in layer il. */
static inline float *state_keep(const state_pool *p, int64_t il, int64_t slot) {
    return p->keep[il] + (slot - p->n_slots) * p->shape[il].keep_floats;
}

/* The memory of layer il's slabs: the pool's, or host memory for a layer before mem_from. */
static inline const state_mem *state_layer_mem(const state_pool *p, int64_t il) {
    return il >= p->mem_from ? p->mem : &state_host_mem;
}
/* Whether layer il's keys are stored in transposed tiles (STATE_KV_TILE rows): in host memory. */
static inline bool state_k_tiled(const state_pool *p, int64_t il) { return state_layer_mem(p, il)->host; }

/* The memory operations of layer il's slabs (its memory's, given its ctx). */
static inline void state_mem_zero(const state_pool *p, int64_t il, void *at, size_t bytes) {
    const state_mem *m = state_layer_mem(p, il);
    m->zero(m->ctx, at, bytes);
}
static inline void state_mem_copy(const state_pool *p, int64_t il, void *dst, const void *src, size_t bytes) {
    const state_mem *m = state_layer_mem(p, il);
    m->copy(m->ctx, dst, src, bytes);
}
/* n pieces of layer il's memory into host_dst, back to back, and out of host_src; false
 * when the device failed. */
static inline bool state_mem_to_host(const state_pool *p, int64_t il, void *host_dst, const state_piece *src,
                                     int64_t n) {
    const state_mem *m = state_layer_mem(p, il);
    return m->to_host(m->ctx, host_dst, src, n);
}
static inline bool state_mem_from_host(const state_pool *p, int64_t il, const state_piece *dst, int64_t n,
                                       const void *host_src) {
    const state_mem *m = state_layer_mem(p, il);
    return m->from_host(m->ctx, dst, n, host_src);
}

/* ==== KV blocks ==== */

/* Elements from one block to the next in layer il's key / value slab. */
static inline int64_t state_block_elems_k(const state_pool *p, int64_t il) {
    return STATE_KV_BLOCK * p->shape[il].kv_k;
}
static inline int64_t state_block_elems_v(const state_pool *p, int64_t il) {
    return STATE_KV_BLOCK * p->shape[il].kv_v;
}

/* Element offset of element e of key row `row` in a block of layer il's key slab. */
static inline int64_t state_k_elem(const state_pool *p, int64_t il, int64_t row, int64_t e) {
    const int64_t kv_k = p->shape[il].kv_k;
    if (!state_k_tiled(p, il)) return row * kv_k + e;
    return (row - row % STATE_KV_TILE) * kv_k + e * STATE_KV_TILE + row % STATE_KV_TILE;
}

/* Key rows [0, rows) of a block of layer il's tiled key slab (state_k_tiled; host memory)
 * between that block and flat rows (rows, kv_k) in type_k: into the block when
 * to_block, else out of it. */
void state_tiled_keys_copy(const state_pool *p, int64_t il, void *block, void *flat, int64_t rows, bool to_block);

/* Stores the key and value rows (kv_k, kv_v floats) of layer il at row `row` of
 * block `block`, converted to the cache's types. */
void state_store_kv(state_pool *p, int64_t il, int32_t block, int64_t row, const float *k, const float *v);

/* ==== Sequence states ==== */

typedef struct {
    int64_t slot;     /* recurrent slot */
    int64_t n_pos;    /* positions held */
    int64_t n_ctx;    /* positions it may hold */
    int32_t *blocks;  /* (ceil(n_ctx / STATE_KV_BLOCK)) block of positions [i*B, (i+1)*B), -1: none */
    int32_t *tokens;  /* (n_ctx) the token at each position held */
} seq_state;

static inline int64_t seq_state_n_blocks(int64_t n_ctx) { return (n_ctx + STATE_KV_BLOCK - 1) / STATE_KV_BLOCK; }

/* An empty state on a fresh (zeroed) recurrent slot, or (host) on a host slot as its
 * last holder left it, for a state copied into at once. Fails with EDDY_ERR_NOMEM when
 * the pool has no such slot free or memory runs out; `what` names the holder in the
 * message. */
eddy_status seq_state_init(state_pool *p, seq_state *s, int64_t n_ctx, bool host, const char *what,
                           eddy_error *err);
/* Gives back the slot and the block references. */
void seq_state_release(state_pool *p, seq_state *s);

/* dst (initialized) becomes a copy of src: recurrent slot copied, KV blocks shared,
 * tokens and position copied. */
void seq_state_copy(state_pool *p, seq_state *dst, const seq_state *src);

/* Back to an empty sequence on the same slot (zeroed), all blocks released. */
void seq_state_clear(state_pool *p, seq_state *s);

/* Drops the KV positions from n_pos on (blocks past it released) and sets n_pos.
 * The recurrent slot is left as it is: the caller restores it. */
void seq_state_drop_kv(state_pool *p, seq_state *s, int64_t n_pos);

/* Makes positions [pos0, pos0 + n) writable: each block they touch allocated, or
 * copied when shared (with the rows the state holds: pos0 may lie before n_pos, as
 * for the MTP layer, which writes one position back). All or nothing: false
 * (nothing changed) when the pool lacks the free blocks. */
bool seq_state_reserve_kv(state_pool *p, seq_state *s, int64_t pos0, int64_t n);

#endif
