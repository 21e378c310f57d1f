/*
 * engine_cache.c — the prefix cache: states of sequences kept after the sequences
 * moved on or went away, found again by their tokens, so a prompt that begins with
 * tokens the engine has seen evaluates only the rest.
 *
 * Owns: the cache entries (each a frozen seq_state: a recurrent slot of its own and
 * shared KV blocks, like a snapshot), their keys (XXH3-64 of the tokens), the budget
 * and least-recently-used eviction, the checkpoints planned into a step (at every
 * multiple of cache_every inside a run, filled by the recurrent blocks as they go,
 * see step_ckpt_slot) and those taken after it (a run ending on such a multiple,
 * eddy_seq_cache_put), and eddy_seq_restore_prefix.
 * Does not own: the pool's memory (src/state) or the lock (taken by the public
 * functions here and in engine_step.c, which calls the plan and commit hooks).
 *
 * A checkpoint inside a run needs the recurrent state at that position, which only
 * exists if the recurrent layers stop there: they always evaluate a prefill in pieces
 * ending at the multiples of cache_every (block_gdn.c, block_mamba2.c), cache or not,
 * so restoring a checkpoint and evaluating the rest gives the same bits as
 * evaluating everything.
 */
#include <inttypes.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/alloc.h"
#include "model/engine.h"

/* ==== Entries ==== */


static uint64_t tokens_hash(const int32_t *tokens, int64_t n) {
    return XXH3_64bits(tokens, (size_t)n * sizeof *tokens);
}

/* The KV blocks the cache would newly hold for an entry of positions [0, n_pos) whose
 * blocks are blocks (NULL or -1: not written yet): each one no entry holds yet. The
 * entries of one conversation share their blocks (a checkpoint every 512 positions and
 * the end of each turn hold the same first blocks), so each block counts once, or a
 * 4,000-token hybrid conversation would count eight times its KV cache. What the entry
 * costs is its recurrent slot and these blocks. */
static int64_t entry_new_blocks(const engine *c, const int32_t *blocks, int64_t n_pos) {
    int64_t n = 0;
    const int64_t nb = seq_state_n_blocks(n_pos);
    for (int64_t i = 0; i < nb; i++)
        if (!blocks || blocks[i] < 0 || c->cache_block_refs[blocks[i]] == 0) n++;
    return n;
}

/* Counts (dir +1) or uncounts (-1) the blocks of e in cache_used. */
static void entry_count_blocks(engine *c, const cache_entry *e, int dir) {
    const int64_t nb = seq_state_n_blocks(e->st.n_pos);
    for (int64_t i = 0; i < nb; i++) {
        const int32_t b = e->st.blocks[i];
        if (b < 0) continue;
        if (dir > 0 && c->cache_block_refs[b]++ == 0) c->cache_used += state_block_bytes(c->sp), c->cache_blocks_held++;
        if (dir < 0 && --c->cache_block_refs[b] == 0) c->cache_used -= state_block_bytes(c->sp), c->cache_blocks_held--;
    }
}

/* Gives back an entry's slot and blocks; its arrays stay for the next use. */
static void entry_drop(engine *c, cache_entry *e) {
    if (e->st.slot < 0) return;
    entry_count_blocks(c, e, -1);
    seq_state_drop_kv(c->sp, &e->st, 0);
    state_slot_free(c->sp, e->st.slot);
    e->st.slot = -1;
    c->cache_used -= e->cost;
    e->cost = 0;
}

/* The entry holding exactly tokens[0, n), or NULL. */
static cache_entry *find(engine *c, const int32_t *tokens, int64_t n, uint64_t hash) {
    for (int64_t i = 0; i < c->n_cache_max; i++) {
        cache_entry *e = &c->cache[i];
        if (e->st.slot >= 0 && e->st.n_pos == n && e->hash == hash &&
            !memcmp(e->st.tokens, tokens, (size_t)n * sizeof *tokens))
            return e;
    }
    return NULL;
}

/* A free entry with a free slot, within the budget and the pool's blocks for an entry of
 * positions [0, n_pos) with the KV blocks blocks (entry_new_blocks), evicting the least
 * recently used entries (never those with last_use >= keep_from) as needed; NULL when
 * that is not possible. The slot is taken. */
static cache_entry *make_room(engine *c, const int32_t *blocks, int64_t n_pos, uint64_t keep_from) {
    for (;;) {
        const int64_t new_blocks = entry_new_blocks(c, blocks, n_pos); /* an eviction may uncount shared ones */
        const size_t cost = state_slot_bytes(c->sp) + (size_t)new_blocks * state_block_bytes(c->sp);
        if (cost > c->cache_budget || new_blocks > c->cache_blocks_max) return NULL;
        cache_entry *free_e = NULL, *oldest = NULL;
        for (int64_t i = 0; i < c->n_cache_max; i++) {
            cache_entry *e = &c->cache[i];
            if (e->st.slot < 0) free_e = free_e ? free_e : e;
            else if (e->last_use < keep_from && (!oldest || e->last_use < oldest->last_use)) oldest = e;
        }
        if (free_e && c->cache_used + cost <= c->cache_budget &&
            c->cache_blocks_held + new_blocks <= c->cache_blocks_max && c->sp->n_slots_free > 0) {
            free_e->st.slot = state_slot_alloc(c->sp, false);
            return free_e;
        }
        if (!oldest) return NULL;
        if (!oldest->on_disk) oldest->on_disk = cache_disk_spill(c, &oldest->st, oldest->hash);
        entry_drop(c, oldest);
    }
}

/* Fills entry e with tokens[0, n) (the slot already holds or will hold the state). */
static void entry_set(engine *c, cache_entry *e, const int32_t *tokens, int64_t n, uint64_t hash) {
    memcpy(e->st.tokens, tokens, (size_t)n * sizeof *tokens);
    e->st.n_pos = n;
    e->hash = hash;
    e->last_use = ++c->cache_clock;
    e->on_disk = false;
    e->cost = state_slot_bytes(c->sp); /* its blocks count when it shares them */
    c->cache_used += e->cost;
}

/* e shares the blocks of positions [0, e->st.n_pos) of s. */
static void entry_share_blocks(engine *c, cache_entry *e, const seq_state *s) {
    const int64_t nb = seq_state_n_blocks(e->st.n_pos);
    for (int64_t i = 0; i < nb; i++) {
        e->st.blocks[i] = s->blocks[i];
        if (s->blocks[i] >= 0) c->sp->block_refs[s->blocks[i]]++;
    }
    entry_count_blocks(c, e, +1);
}

/* ==== Engine life ==== */

eddy_status cache_init(engine *c, size_t budget, int64_t every, size_t slot_bytes, size_t block_bytes,
                       bool committed, eddy_error *err) {
    c->cache_every = every > 0 ? every : 512;
    c->piece = c->cache_every <= c->n_batch ? c->cache_every : c->n_batch;
    c->cache_budget = budget;
    if (budget == 0) return EDDY_OK;
    /* In host memory a pool's pages cost nothing until they are touched, so the entries
     * get as many slots as the budget holds at the smallest cost (one slot, one block)
     * and as many blocks as it holds alone: whatever mix of the two the entries come to,
     * the budget binds first. On a GPU that would commit up to twice the budget (for a
     * hybrid of the 4B shape, 7.4 GiB of device memory for a 4 GiB budget), so the
     * budget is split as a conversation's entries split it, each a slot and the
     * cache_every positions of blocks it adds to the checkpoint before it. 1..1024
     * entries. */
    const size_t per_entry = committed ? slot_bytes + (size_t)(c->cache_every / STATE_KV_BLOCK) * block_bytes
                                       : slot_bytes + block_bytes;
    const size_t n = budget / (per_entry > 0 ? per_entry : 1);
    c->n_cache_max = n < 1 ? 1 : n > 1024 ? 1024 : (int64_t)n;
    const size_t slots = committed ? (size_t)c->n_cache_max * slot_bytes : 0;
    const uint64_t blocks = (budget > slots ? budget - slots : 0) / (block_bytes > 0 ? block_bytes : 1) + 1;
    if (blocks > INT32_MAX)
        return eddy_error_set(err, EDDY_ERR_ARG, "a prefix cache of %zu bytes is too large", budget);
    c->cache_blocks_max = (int64_t)blocks;
    c->cache = eddy_calloc((size_t)c->n_cache_max, sizeof *c->cache);
    if (!c->cache) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    const int64_t nb = seq_state_n_blocks(c->n_ctx);
    for (int64_t i = 0; i < c->n_cache_max; i++) {
        cache_entry *e = &c->cache[i];
        e->st.slot = -1;
        e->st.n_ctx = c->n_ctx;
        e->st.tokens = eddy_malloc((size_t)c->n_ctx * sizeof *e->st.tokens);
        e->st.blocks = eddy_malloc((size_t)(nb > 0 ? nb : 1) * sizeof *e->st.blocks);
        if (!e->st.tokens || !e->st.blocks) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
        for (int64_t b = 0; b < nb; b++) e->st.blocks[b] = -1;
    }
    return EDDY_OK;
}

void cache_free(engine *c) {
    /* what the disk tier lacks goes there first, oldest first */
    for (bool more = c->cache_dir && c->sp; more;) {
        cache_entry *oldest = NULL;
        for (int64_t i = 0; i < c->n_cache_max; i++) {
            cache_entry *e = &c->cache[i];
            if (e->st.slot >= 0 && !e->on_disk && (!oldest || e->last_use < oldest->last_use)) oldest = e;
        }
        if ((more = oldest != NULL)) {
            cache_disk_spill(c, &oldest->st, oldest->hash);
            oldest->on_disk = true;
        }
    }
    cache_disk_free(c);
    cache_entries_free(c);
}

void cache_entries_free(engine *c) {
    for (int64_t i = 0; c->cache && i < c->n_cache_max; i++) {
        if (c->sp) entry_drop(c, &c->cache[i]);
        eddy_free(c->cache[i].st.tokens);
        eddy_free(c->cache[i].st.blocks);
    }
    eddy_free(c->cache);
    eddy_free(c->cache_block_refs);
    c->cache = NULL;
    c->cache_block_refs = NULL;
    c->n_cache_max = c->cache_blocks_max = 0;
}

/* ==== Checkpoints of a step ==== */

void cache_plan_run(engine *c, step_run *run) {
    step_plan *p = &c->plan;
    run->n_ckpt = 0;
    run->ckpt_pos = p->ckpt_pos + p->n_ckpt;
    run->ckpt_slot = p->ckpt_slot + p->n_ckpt;
    /* inside a run only where a piece ends: every multiple of cache_every when piece is it */
    if (!c->n_cache_max || run->snap || c->piece != c->cache_every) return;
    const int32_t *tokens = run->seq->st.tokens;
    for (int64_t b = (run->pos0 / c->cache_every + 1) * c->cache_every; b < run->pos0 + run->n; b += c->cache_every) {
        const uint64_t h = tokens_hash(tokens, b);
        cache_entry *e = find(c, tokens, b, h);
        if (e) {
            e->last_use = ++c->cache_clock;
            continue;
        }
        if (!(e = make_room(c, run->seq->st.blocks, b, c->cache_step_start))) break; /* this step's entries stay */
        entry_set(c, e, tokens, b, h); /* its blocks: after the step, once written */
        p->ckpt_pos[p->n_ckpt] = b;
        p->ckpt_slot[p->n_ckpt] = e->st.slot;
        p->n_ckpt++;
        run->n_ckpt++;
    }
}

void cache_commit_run(engine *c, const step_run *run) {
    if (!c->n_cache_max || run->snap) return;
    const seq_state *s = &run->seq->st;
    for (int64_t k = 0; k < run->n_ckpt; k++)
        for (int64_t i = 0; i < c->n_cache_max; i++)
            if (c->cache[i].st.slot == run->ckpt_slot[k]) entry_share_blocks(c, &c->cache[i], s);
    const int64_t end = run->pos0 + run->n;
    if (end % c->cache_every != 0) return;
    const uint64_t h = tokens_hash(s->tokens, end);
    cache_entry *e = find(c, s->tokens, end, h);
    if (e) {
        e->last_use = ++c->cache_clock;
        return;
    }
    if (!(e = make_room(c, s->blocks, end, c->cache_step_start))) return;
    state_slot_copy(c->sp, e->st.slot, s->slot);
    entry_set(c, e, s->tokens, end, h);
    entry_share_blocks(c, e, s);
}

/* ==== Public functions ==== */

eddy_status eddy_seq_cache_put(eddy_seq *s, eddy_error *err) {
    if (!s) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_seq_cache_put: NULL sequence");
    engine *c = s->e;
    pthread_mutex_lock(&c->lock);
    eddy_status st = EDDY_OK;
    const seq_state *q = &s->st;
    if (s->n_pending) {
        st = eddy_error_set(err, EDDY_ERR_ARG, "cannot cache a sequence whose verify awaits eddy_seq_accept");
    } else if (c->n_cache_max && q->n_pos > 0) {
        const uint64_t h = tokens_hash(q->tokens, q->n_pos);
        cache_entry *e = find(c, q->tokens, q->n_pos, h);
        if (e) {
            e->last_use = ++c->cache_clock;
        } else if ((e = make_room(c, q->blocks, q->n_pos, c->cache_clock + 1))) {
            state_slot_copy(c->sp, e->st.slot, q->slot);
            entry_set(c, e, q->tokens, q->n_pos, h);
            entry_share_blocks(c, e, q); /* the last block too: the sequence copies it before writing */
        }
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

eddy_status eddy_seq_restore_prefix(eddy_seq *s, const eddy_token *tokens, int64_t n, int64_t *n_restored,
                                    eddy_error *err) {
    if (!s || (!tokens && n > 0) || n < 0)
        return eddy_error_set(err, EDDY_ERR_ARG, "eddy_seq_restore_prefix: bad argument");
    engine *c = s->e;
    pthread_mutex_lock(&c->lock);
    engine_release_pending(c, s);
    c->cache_lookups++;
    seq_state *q = &s->st;
    /* at most n - 1 positions: the last token is evaluated, for its logits */
    const int64_t limit = n - 1;
    const int64_t own = q->n_pos <= limit && !memcmp(q->tokens, tokens, (size_t)q->n_pos * sizeof *tokens) ? q->n_pos : -1;
    cache_entry *best = NULL;
    for (int64_t i = 0; i < c->n_cache_max; i++) {
        cache_entry *e = &c->cache[i];
        const int64_t m = e->st.n_pos;
        if (e->st.slot < 0 || m > limit || m <= own || (best && m <= best->st.n_pos)) continue;
        if (e->hash == tokens_hash(tokens, m) && !memcmp(e->st.tokens, tokens, (size_t)m * sizeof *tokens)) best = e;
    }
    int64_t held;
    /* a deeper state on disk */
    const int64_t from_disk = c->cache_dir ? cache_disk_restore(c, s, tokens, limit, best ? best->st.n_pos : own) : -1;
    if (from_disk >= 0) {
        c->cache_hits++;
        c->cache_tokens += from_disk;
        held = from_disk;
    } else if (best) {
        seq_state_copy(c->sp, q, &best->st);
        seq_logits_held(s, false);
        best->last_use = ++c->cache_clock;
        c->cache_hits++;
        c->cache_tokens += best->st.n_pos;
        held = best->st.n_pos;
    } else if (own >= 0) {
        held = own;
    } else {
        seq_state_clear(c->sp, q);
        seq_logits_held(s, false);
        held = 0;
    }
    pthread_mutex_unlock(&c->lock);
    if (n_restored) *n_restored = held;
    return EDDY_OK;
}

void eddy_engine_cache_stats(eddy_engine *c, eddy_cache_stats *out) {
    pthread_mutex_lock(&c->lock);
    int64_t n = 0;
    for (int64_t i = 0; i < c->n_cache_max; i++) n += c->cache[i].st.slot >= 0;
    *out = (eddy_cache_stats){n, c->cache_lookups, c->cache_hits, c->cache_tokens, c->cache_used, c->cache_budget,
                              c->n_disk, c->disk_hits, c->disk_used};
    pthread_mutex_unlock(&c->lock);
}

void cache_sizes(const model *m, int64_t n_layers, qtype tk, qtype tv, size_t *slot_bytes, size_t *row_bytes,
                 size_t *block_bytes) {
    *slot_bytes = *row_bytes = *block_bytes = 0;
    for (int64_t il = 0; il < n_layers; il++) {
        const state_layer_shape sh = model_state_shape(m, il);
        *slot_bytes += (size_t)(sh.conv_floats + sh.rec_floats) * sizeof(float);
        *row_bytes += (size_t)(sh.conv_floats + sh.keep_floats) * sizeof(float);
        *block_bytes += (size_t)STATE_KV_BLOCK * ((size_t)sh.kv_k * state_elem_bytes(tk) + (size_t)sh.kv_v * state_elem_bytes(tv));
    }
}
