/*
 * engine.h — an engine (one model, a thread pool, the work buffers of a forward
 * step, the state pool) and the sequences, snapshots and forward steps it runs.
 *
 * Owns: the internal forms of eddy_engine, eddy_seq and eddy_snapshot
 * (include/eddy.h); the plan of a forward step (which rows belong to which
 * sequence, at which positions, from which recurrent slot); the forward pass
 * (forward.c) and its blocks (block_*.c), which read their buffers from here (a
 * buffer an architecture does not use is NULL).
 * Does not own: the state's memory (src/state), the weights (model.h).
 *
 * Every public engine, sequence and snapshot function takes the engine's lock, so
 * one thread may drive the engine while others tokenize or read results.
 */
#ifndef EDDY_MODEL_ENGINE_H
#define EDDY_MODEL_ENGINE_H

#include <pthread.h>

#include "base/threadpool.h"
#include "model/model.h"
#include "state/state.h"

/* A sequence: its state in the pool, and the slots of a verify awaiting accept. */
struct eddy_seq {
    struct eddy_engine *e;
    int64_t index;        /* in e->seqs */
    seq_state st;
    int64_t n_pending;    /* positions of a verify awaiting eddy_seq_accept; 0: none */
    int64_t *pending;     /* (n_batch) row slot holding what each pending position keeps */
    uint64_t stamp;       /* the engine's batch stamp when last seen in a batch being checked */
    float *logits;        /* (n_vocab) after the last token, when has_logits */
    bool has_logits;
};

struct eddy_snapshot {
    struct eddy_engine *e;
    int64_t index;        /* in e->snaps */
    seq_state st;
};

/* One sequence's tokens in a forward step: rows [row0, row0 + n) at positions
 * pos0 .. pos0 + n - 1, starting from recurrent slot `slot`. With `snap` (a verify),
 * the slot is only read and what row row0 + t keeps goes to row slot snap[t]. */
typedef struct {
    eddy_seq *seq;
    int64_t row0, n, pos0;
    int64_t slot;
    const int64_t *snap;
    /* prefix-cache checkpoints inside the run: after position ckpt_pos[k] (ascending,
     * each a multiple of cache_every, < pos0 + n) the recurrent blocks copy their
     * state into slot ckpt_slot[k] */
    int64_t n_ckpt;
    const int64_t *ckpt_pos, *ckpt_slot;
} step_run;

/* One cached state: frozen like a snapshot, found by its tokens. */
typedef struct {
    seq_state st;      /* slot -1: the entry is free */
    uint64_t hash;     /* XXH3-64 of tokens [0, st.n_pos) */
    uint64_t last_use; /* the cache's clock when last made or restored */
    size_t cost;       /* bytes charged: the slot and the KV blocks it holds */
    bool on_disk;      /* a file of the disk tier holds it too */
} cache_entry;

/* One file of the prefix cache's disk tier: DIR/<model fingerprint>-<hash>-<n_pos>.eddy,
 * a session file of the state after tokens [0, n_pos). */
typedef struct {
    uint64_t hash;     /* XXH3-64 of the tokens */
    int64_t n_pos;
    size_t bytes;
    uint64_t last_use; /* the cache's clock when written or read */
} disk_entry;

typedef struct {
    int64_t n;         /* rows */
    int64_t n_runs;
    step_run *runs;    /* (n_batch) in row order */
    int64_t *pos;      /* (n_batch) the position of each row */
    int64_t *slots;    /* (n_batch) scratch: the slots of a group of decode rows */
    int64_t *out;      /* (n_batch) the rows whose logits are wanted, ascending */
    int64_t *ckpt_pos, *ckpt_slot; /* (n_batch) the runs' checkpoints, run after run */
    int64_t n_ckpt;
    float **ptrs;      /* (2 * n_batch) scratch: state pointers handed to the kernels */
} step_plan;

struct eddy_engine {
    const model *m;
    threadpool *pool;
    struct cuda_backend *gpu; /* NULL: the CPU runs the steps (src/cuda/cuda.h) */
    int64_t gpu_from;         /* with gpu: the first layer it runs; the CPU runs the ones before
                               * (from the embeddings on), the GPU the rest, the output layer and
                               * the MTP layer (0: the whole model on the GPU) */
    state_pool *sp;
    pthread_mutex_t lock;
    int64_t n_ctx;        /* positions a sequence may hold */
    int64_t n_batch;      /* rows per forward step; longer batches are split */
    int64_t n_seq_max;    /* sequences at once */
    int64_t n_snap_max;   /* snapshots at once */
    int64_t n_verify_max; /* verified tokens awaiting accept at once: the pool's row slots */
    bool host_snapshots;  /* the snapshots' recurrent slots are host slots (a GPU engine) */
    eddy_seq **seqs;      /* (n_seq_max) NULL: free */
    eddy_snapshot **snaps; /* (n_snap_max) NULL: free */
    step_plan plan;
    eddy_seq **one_seq;   /* (n_batch) scratch: one sequence's rows as a batch */
    int8_t *all_rows;     /* (n_batch) all 1: every row's logits wanted */
    float *digest_logits; /* (digest_rows, n_vocab) scratch: a CPU step's logits before their digest */
    int64_t digest_rows;
    /* The sequence whose logits after its last token are row pending_row of the last
     * step's, left where that step made them (digest_logits; on a GPU the backend's
     * buffer) when its caller took only their digest; engine_seq_keep_logits gives them to
     * it. NULL: none (any later step, or any change to that sequence, forgets it).
     * pending_row -1: the step was a verify of that sequence alone, whose eddy_seq_accept
     * chooses the row. */
    eddy_seq *pending_seq;
    int64_t pending_row;
    uint64_t stamp;       /* counts the batches checked */
    /* the prefix cache (engine_cache.c) */
    int64_t cache_every;  /* checkpoints at its multiples */
    /* A sequence's tokens go through the recurrent layers in pieces that end at the
     * multiples of piece (cache_every, or n_batch when smaller), and a step never cuts
     * a piece: a sequence gets the same bits whatever its batches and calls were,
     * and a checkpoint at a multiple of cache_every exists whenever piece is it. */
    int64_t piece;
    size_t cache_budget;  /* 0: no cache */
    size_t cache_used;    /* the entries' slots, and each KV block they hold counted once */
    int32_t *cache_block_refs; /* (sp->n_blocks) entries holding each block */
    int64_t cache_blocks_max;  /* KV blocks the entries may hold together: the pool's share */
    int64_t cache_blocks_held; /* blocks with cache_block_refs > 0 */
    int64_t n_cache_max;
    cache_entry *cache;   /* (n_cache_max) */
    uint64_t cache_clock;
    uint64_t cache_step_start; /* the clock when the step being run was planned */
    int64_t cache_lookups, cache_hits, cache_tokens;
    /* its disk tier (engine_cache_disk.c): entries leaving memory, and those still in
     * memory when the engine is freed, go to files in cache_dir; NULL: none */
    char *cache_dir;
    char cache_fp[33];    /* the model's fingerprint, hex: the files' name prefix */
    size_t disk_budget, disk_used;
    disk_entry *disk;     /* (n_disk) */
    int64_t n_disk, disk_cap;
    int64_t disk_hits;
    int (*abort_cb)(void *user);
    void *abort_user;
    /* a GPU step failed (its error; "" while none has): kernels may have written part of
     * the step's states, and a GPU keeps most errors (an illegal address) for every later
     * call, so the engine runs no step after it (engine_run) */
    char gpu_failed[sizeof(((eddy_error *)0)->msg)];
    /* the multi-token-prediction layer (block_mtp.c): run in every step when mtp; its
     * state is the pool's layer mtp_il (= n_layer) */
    bool mtp;
    int64_t mtp_il;
    step_plan mtp_plan;  /* the rows it runs: runs and pos (n_batch) of its own */

    /* work buffers, rows of n_batch tokens */
    float *x;    /* (n_batch, n_embd) residual stream */
    float *xn;   /* (n_batch, n_embd) normalized input of a block */
    float *mix;  /* (n_batch, n_embd) output of a block, added to x */
    /* attention */
    float *qg;   /* (n_batch, n_head * head_dim_k * (gated ? 2 : 1)) q projection */
    float *q;    /* (n_batch, n_head * head_dim_k) */
    float *k;    /* (n_batch, n_head_kv * head_dim_k) */
    float *v;    /* (n_batch, n_head_kv * head_dim_v) */
    float *attn; /* (n_batch, n_head * head_dim_v) */
    float *rope; /* (n_rot) cos/sin table of one position */
    /* Gated DeltaNet */
    float *gdn_qkv; /* (n_batch, conv_dim) projection, then conv output */
    float *gdn_z;   /* (n_batch, n_v * d_v) output gate */
    float *gdn_b;   /* (n_batch, n_v) beta logits (or interleaved b|a, 2 n_v, for qwen3next) */
    float *gdn_a;   /* (n_batch, n_v) decay logits */
    float *gdn_o;   /* (n_batch, n_v * d_v) mixer output before out projection */
    float *gdn_g;   /* (n_batch, n_v) log decay per value head */
    float *gdn_beta; /* (n_batch, n_v) */
    float *conv_in; /* (n_batch, conv_dim) the projection the conv reads */
    /* Mamba-2 (the conv output reuses gdn_qkv, the scan output gdn_o) */
    float *mb_in;   /* (n_batch, in_dim) z | xBC | dt */
    /* feed-forward */
    float *ff_a, *ff_b; /* (n_batch, max(n_ff, n_ff_exp, n_ff_shexp)) */
    float *router;      /* (n_batch, n_expert) */
    float *ff_out;      /* (n_batch, n_embd) one expert's outputs for the tokens routed to it */
    float *moe_x;       /* (n_batch, n_embd) the inputs of the tokens routed to one expert */
    int32_t *moe_sel;   /* (n_batch, n_expert_used) each token's experts */
    float *moe_w;       /* (n_batch, n_expert_used) their weights */
    int32_t *moe_order; /* (n_batch * n_expert_used) token slots sorted by expert */
    int32_t *moe_start; /* (n_expert + 1) where each expert's slots begin in moe_order */
    void *act;          /* activations converted for linear(): the largest need */
    /* the MTP layer's (when mtp) */
    float *h;           /* (n_batch, n_embd) the main model's last hidden state, after output_norm */
    float *mtp_cat;     /* (n_batch, 2 n_embd) its input rows [enorm(embed(x_q)); hnorm(h_{q-1})] */
    float *mtp_logits;  /* (MTP_DRAFT_ROWS, n_vocab) drafts' */
    int32_t *mtp_tok, *mtp_src; /* (n_batch) its rows' tokens and where each one's h comes from (mtp_plan_rows) */
    int32_t *mtp_writes;        /* (n_batch, 2) the h rows the state keeps (mtp_state_rows) */
};

typedef struct eddy_engine engine;

/* Whether layer il (the MTP layer's il: n_layer) runs on the GPU; its state is then in GPU memory. */
static inline bool engine_layer_on_gpu(const engine *c, int64_t il) { return c->gpu && il >= c->gpu_from; }

/* Sets whether s holds the logits after its last token (s->logits); either way a digest
 * step's logits left behind for it (pending_seq) are no longer its. */
static inline void seq_logits_held(eddy_seq *s, bool held) {
    s->has_logits = held;
    if (s->e->pending_seq == s) s->e->pending_seq = NULL;
}

/* Runs the plan's rows (tokens (plan->n), each sequence's rows consecutive) through
 * the model: KV rows written to the runs' blocks (reserved beforehand), recurrent
 * slots advanced (or, for a verify run, its snapshot slots written). Writes logits
 * for the rows listed in out_rows (n_out of them, ascending) into logits
 * (n_out, n_vocab); n_out 0 skips the output layer. Positions and tokens of the
 * sequences are the caller's to update. */
void forward(engine *c, const int32_t *tokens, const step_plan *plan, float *logits, const int64_t *out_rows,
             int64_t n_out);

/* The embeddings of the plan's tokens and layers [0, il_end) over them, into c->x: the
 * CPU's part of a step of a model split between the CPU and a GPU. */
void forward_front(engine *c, const int32_t *tokens, const step_plan *plan, int64_t il_end);

/* n_rows rows of logits times 1 / logit_scale (where the file has a scale), as the output
 * layer's and the MTP head's logits (the GPU's too) are scaled */
void forward_scale_logits(const model_hparams *hp, float *logits, int64_t n_rows);

/* One layer over the plan's rows of c->x: x += mixer(norm(x)), x += ffn(norm(x)). */
void forward_layer(engine *c, const model_layer *l, int64_t il, const step_plan *plan);

/* The MTP layer after the main ones (the lock held; c->h holds the plan's rows): each
 * row at position q >= 1 goes in with its token and h of position q - 1 (the row before,
 * or the state's for a run's first row) and leaves its key and value at index q - 1 of
 * the layer's cache; the state keeps h of each run's last row (a verify: of each row, in
 * its pending slot; a checkpoint: of its position). */
void block_mtp(engine *c, const int32_t *tokens, const step_plan *plan);
/* The MTP layer's rows of a step (every backend's): c->mtp_plan, with row j's token in
 * c->mtp_tok[j] and its h_{q-1} in c->mtp_src[j]: row src of the step's h when >= 0,
 * else the layer's state in slot -src - 1. */
void mtp_plan_rows(engine *c, const int32_t *tokens, const step_plan *plan);
/* The h the layer's state keeps after the step, as (row of the step, slot) pairs (at most
 * plan->n): each run's last row (a verify: every row, into its pending slot; a prefix-cache
 * checkpoint after position b: the row of b - 1). Returns their count. */
int64_t mtp_state_rows(const step_plan *plan, int32_t *pairs);

/* Up to max greedy drafts after token t for sequence s (the lock held; s holds
 * n_pos >= 1 positions and no pending verify): the MTP layer at position n_pos on t
 * and h of position n_pos - 1, then on each draft and the layer's own output, until a
 * draft's probability falls below p_min. logits (max, n_vocab) gets each draft's
 * row when not NULL. Writes the layer's cache at indices n_pos - 1 on (a verify writes
 * them again); the sequence is otherwise unchanged. */
eddy_status engine_mtp_draft(engine *c, eddy_seq *s, int32_t t, int64_t max, float p_min, int32_t *out,
                             int64_t *n_out, float *logits, eddy_error *err);

/* The same, taking the engine's lock. */
eddy_status engine_seq_mtp_draft(eddy_seq *s, int32_t t, int64_t max, float p_min, int32_t *out, int64_t *n_out,
                                 float *logits, eddy_error *err);

/* Sequences drafted together in one chain step (rows of c->mtp_logits). */
#define MTP_DRAFT_ROWS 8

/* engine_mtp_draft for n distinct sequences of engine c, each with its own t, max,
 * p_min, out (room for max) and logits (NULL, or logits[i] NULL: not wanted): each
 * chain step runs the layer and its head over one row per sequence still drafting, so
 * their weights are read once for all; every sequence's drafts and logits are the bits
 * it gets alone. */
eddy_status engine_mtp_draft_many(engine *c, eddy_seq *const *s, const int32_t *t, const int64_t *max, int64_t n,
                                  const float *p_min, int32_t *const *out, int64_t *n_out, float *const *logits,
                                  eddy_error *err);

/* The same without logits, taking the lock of the sequences' engine. */
eddy_status engine_seq_mtp_draft_many(eddy_seq *const *s, const int32_t *t, const int64_t *max, int64_t n,
                                      const float *p_min, int32_t *const *out, int64_t *n_out, eddy_error *err);

/* The blocks: each reads c->xn (plan->n rows of n_embd) and writes c->mix. */
void block_attention(engine *c, const model_layer *l, int64_t il, const step_plan *plan);
void block_gdn(engine *c, const model_layer *l, int64_t il, const step_plan *plan);
void block_mamba2(engine *c, const model_layer *l, int64_t il, const step_plan *plan);
/* Accepting n_keep (>= 1) of sequence s's pending verify rows in GDN layer il (the
 * lock held): the delta rule replayed over them on the sequence's slot from the inputs
 * the verify kept, and the conv window of the last one copied to it. */
void block_gdn_accept(engine *c, const model_layer *l, int64_t il, eddy_seq *s, int64_t n_keep);
/* The same for a Mamba-2 layer: the scan replayed over the kept rows. */
void block_mamba2_accept(engine *c, const model_layer *l, int64_t il, eddy_seq *s, int64_t n_keep);
void block_ffn_dense(engine *c, const model_layer *l, int64_t n);
void block_ffn_moe(engine *c, const model_layer *l, int64_t n);
void block_ffn_relu2(engine *c, const model_layer *l, int64_t n);
/* A token's top k experts by router probability (ties: the lower index) into sel (k),
 * their probabilities renormalized to sum to 1 into w (k). p: (X) logits, turned into
 * probabilities in place. The oracle of the GPU's routing (ck_moe_route). */
void moe_route_token(float *p, int64_t X, int64_t k, int32_t *sel, float *w);
/* The routing of n tokens from their router logits in c->router (n, n_expert), turned
 * into probabilities: each token's experts and weights (moe_sel, moe_w) and the token
 * slots sorted by expert (moe_order, moe_start). */
void moe_route(engine *c, int64_t n);
/* The token slots of n tokens sorted by expert from their experts in c->moe_sel (n, k)
 * (moe_route's second half, for a routing made elsewhere): moe_order, moe_start. */
void moe_sort_slots(engine *c, int64_t n);

/* Of the runs from index i on: how many consecutive single-row runs without
 * snapshots (a group the decode-step kernels take in one call, their slots in
 * plan->slots), or 0 when run i is a prefill or verify run. */
int64_t step_decode_group(const step_plan *plan, int64_t i);

/* ==== Engine internals (engine.c, engine_step.c) ==== */

/* What a step gives for each wanted row in place of its logits (row r of the wanted rows,
 * found on the GPU where the step runs there, so that only this comes back):
 *   k >= 1 (eddy_engine_decode_top, _argmax): its k best tokens, best first at ids + r k
 *     and logits + r k (vec_top_k's order and rule), how many in counts[r]; logits and
 *     counts may be NULL (argmax: k 1, ids alone; a row with no usable logit has id 0 first);
 *     with k 1, p (engine_decode_best) receives the best token's probability in p[r]
 *     (vec_argmax_softmax's token and probability; 0 for a row with no usable logit on a GPU);
 *     lse, where not NULL, the row's log-sum-exp in lse[r] (vec_logsumexp);
 *   k 0 (eddy_engine_decode_logprob): the log-probability of token targets[r] under it
 *     (vec_logprob) in logprobs[r]. */
typedef struct {
    int32_t k;
    int32_t *ids;
    float *logits;
    int32_t *counts;
    float *p;
    double *lse;
    const int32_t *targets;
    double *logprobs;
} step_digest;

/* d's rows from row `first` on */
step_digest step_digest_from(const step_digest *d, int64_t first);

/* Evaluates a validated batch (the lock held): rows in order, split into steps of
 * n_batch rows; with verify, every sequence of the batch keeps per-position states.
 * The wanted rows' logits go to logits, or (logits NULL) their digest (best tokens or a
 * token's log-probability) to dg; both NULL: nothing. */
eddy_status engine_run(engine *c, const int32_t *tokens, eddy_seq *const *seqs, int64_t n, const int8_t *want,
                       float *logits, const step_digest *dg, bool verify, eddy_error *err);

/* n tokens of sequence s (the lock held), checked whole first, run in steps of
 * n_batch; logits of every token (all) or of the last. */
eddy_status engine_run_seq(engine *c, eddy_seq *s, const int32_t *tokens, int64_t n, float *logits, bool all,
                           eddy_error *err);

/* Gives sequence s the logits after its last token where its last step, a digest step
 * of s alone, left them (pending_seq) and no other step ran since: one row copied, where
 * that step copied only the digest (takes the lock; nothing when s holds logits or they
 * are gone). eddy_generate_ex's steps sample from a digest and keep the last logits so. */
void engine_seq_keep_logits(eddy_seq *s);

/* eddy_engine_decode giving each wanted row its best token and that token's probability
 * (what a draft model's greedy drafts need; on a GPU 12 bytes a row come back) */
eddy_status engine_decode_best(engine *c, const eddy_batch *b, int32_t *ids, float *p, eddy_error *err);

/* The most tokens a verify could take now (takes the lock): the batch's rows, and the
 * free states (one per token). */
int64_t engine_verify_room(engine *c);

/* Gives sequence s the logits after its last token (n_vocab floats; takes the lock):
 * the row a verify computed for the last draft eddy_seq_accept kept, so that
 * eddy_seq_logits is as after feeding the kept tokens. */
void engine_seq_set_logits(eddy_seq *s, const float *row);

/* Puts sequence s back to position n_pos (<= its n_pos; the lock held): KV rows
 * dropped, the recurrent state restored from the latest snapshot on its path and
 * the rest replayed. */
eddy_status engine_truncate(engine *c, eddy_seq *s, int64_t n_pos, eddy_error *err);

/* The end of the next piece of a recurrent prefill from position pos: the next
 * multiple of piece, or end. */
static inline int64_t step_piece_end(const engine *c, int64_t pos, int64_t end) {
    const int64_t next = (pos / c->piece + 1) * c->piece;
    return next < end ? next : end;
}

/* A verify run's row slots in layer il as pointers: conv windows in plan->ptrs[0, n),
 * kept inputs in plan->ptrs[n, 2n). */
static inline void step_snap_ptrs(const engine *c, const step_run *run, int64_t il, float ***conv, float ***keep) {
    *conv = c->plan.ptrs, *keep = c->plan.ptrs + run->n;
    for (int64_t t = 0; t < run->n; t++) {
        (*conv)[t] = state_conv(c->sp, il, run->snap[t]);
        (*keep)[t] = state_keep(c->sp, il, run->snap[t]);
    }
}

/* The checkpoint slot a run wants filled after position pos, or -1. */
static inline int64_t step_ckpt_slot(const step_run *run, int64_t pos) {
    for (int64_t k = 0; k < run->n_ckpt; k++)
        if (run->ckpt_pos[k] == pos) return run->ckpt_slot[k];
    return -1;
}

/* ==== Prefix cache (engine_cache.c) ==== */

/* Bytes of one recurrent slot, one row slot and one KV block of a model's first n_layers
 * state layers (n_layer, or n_layer + 1 with the MTP layer), from their shapes (before
 * the pool exists). */
void cache_sizes(const model *m, int64_t n_layers, qtype tk, qtype tv, size_t *slot_bytes, size_t *row_bytes,
                 size_t *block_bytes);

/* The prefix cache's files (session.c): an entry's state as a session file (no logits or
 * sampler; the lock held), loading one into s when it holds exactly tokens[0, n) of this
 * model (the lock held; nothing changes otherwise), atomic writes, the fingerprint. */
eddy_status session_serialize_entry(engine *c, const seq_state *st, uint8_t **out, size_t *len, eddy_error *err);
eddy_status session_load_prefix(engine *c, eddy_seq *s, const char *path, const int32_t *tokens, int64_t n,
                                eddy_error *err);
eddy_status session_write_atomic(const char *path, const uint8_t *buf, size_t len, eddy_error *err);
/* The model's fingerprint in hex, another for an engine with the MTP layer (mtp). */
void session_fingerprint_hex(const model *m, bool mtp, char out[33]);

/* The disk tier (engine_cache_disk.c): dir is made if missing and its files of this model
 * indexed; budget 0: no limit. */
eddy_status cache_disk_init(engine *c, const char *dir, size_t budget, eddy_error *err);
/* Writes the state st (tokens hashing to hash) to its file unless one holds it already;
 * the oldest files go when the budget needs room. False when it could not be written. */
bool cache_disk_spill(engine *c, const seq_state *st, uint64_t hash);
/* Loads into s the deepest file whose tokens begin tokens and hold more than deeper_than
 * and at most limit of them; returns how many it holds, or -1 (nothing changed). Files
 * that fail to load are forgotten (and removed when damaged). */
int64_t cache_disk_restore(engine *c, eddy_seq *s, const int32_t *tokens, int64_t limit, int64_t deeper_than);
void cache_disk_free(engine *c);
/* Sizes and allocates the cache's entries (at engine creation, c->n_ctx set): the pool
 * gets a slot for each and cache_blocks_max KV blocks for them all. committed: the
 * pool's memory is committed when it is made (a GPU), so the budget is split between
 * slots and blocks, not given to each whole (engine_cache.c). */
eddy_status cache_init(engine *c, size_t budget, int64_t every, size_t slot_bytes, size_t block_bytes,
                       bool committed, eddy_error *err);
void cache_free(engine *c);
/* The entries alone (cache_free's last part; the disk tier stays): before the pool is
 * made, for cache_init to size them again. */
void cache_entries_free(engine *c);
/* Plans the checkpoints of run (its tokens already in its sequence): a slot for each
 * multiple of cache_every inside it that is not cached yet. */
void cache_plan_run(engine *c, step_run *run);
/* After the step: the planned checkpoints and, when the run ends on a multiple of
 * cache_every, the state at its end become cache entries. */
void cache_commit_run(engine *c, const step_run *run);

/* Gives back the row slots of a pending verify. */
void engine_release_pending(engine *c, eddy_seq *s);

#endif
