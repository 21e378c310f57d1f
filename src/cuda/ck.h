/*
 * ck.h — the CUDA kernels of eddy's GPU backend, as C functions that launch them.
 *
 * Owns: the kernels (ck_quant.cu, ck_ops.cu, ck_mixers.cu) and their contracts, each the
 * GPU twin of a CPU op whose scalar _ref stays the oracle (tests/cuda/ compares them).
 * Does not own: which kernels a forward step runs (cuda_engine.c), device memory
 * (callers pass device pointers), or streams beyond the one each call names.
 *
 * Every pointer below is device memory unless it says host. Every launcher queues its
 * kernels on `stream` (a cudaStream_t; NULL: the default stream) and returns at once;
 * errors surface through ck_check. Layouts are the CPU ops': rows contiguous, strides
 * in elements.
 */
#ifndef EDDY_CUDA_CK_H
#define EDDY_CUDA_CK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The first CUDA error since the last call (launch or asynchronous), as a message, or
 * NULL when there is none; `sync` waits for the device first. */
const char *ck_check(int sync);
/* The same after waiting for stream's work only (an engine's: never the whole device). */
const char *ck_check_stream(void *stream);

/* ==== Weights (ck_quant.cu) ====
 * W: n_out rows of n_in elements in GGUF type `type` (F32, F16, BF16, Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS), rows row_bytes apart, as in the file. */

/* True when the kernels read this type with rows of n_in elements. */
int ck_type_supported(uint32_t type, int64_t n_in);

/* The largest n_tok ck_gemv takes. */
#define CK_GEMV_MAX_TOK 8

/* y (n_tok, n_out) = x (n_tok, n_in) W^T, CK_GEMV_MAX_TOK rows of x per pass: one warp
 * per output row decodes 32-element units on the fly (decode, small batches). The block
 * formats but F16/BF16/F32 multiply 8-bit activations (x quantized per 32 elements into
 * scratch, ck_gemv_scratch_bytes) with integer dot products; with scratch NULL, or for
 * the float types, the weights are dequantized to f32 and multiply x as it is.
 * Returns 1 when scratch holds x's 8-bit form afterwards (the integer path, n_tok <=
 * CK_GEMV_MAX_TOK); x_ready says it holds it before (the same x's, left by the last
 * call): the quantization is then skipped. */
int ck_gemv(uint32_t type, const void *W, size_t row_bytes, int64_t n_in, int64_t n_out, const float *x, int64_t n_tok,
            float *y, void *scratch, int x_ready, void *stream);
size_t ck_gemv_scratch_bytes(int64_t n_in, int64_t n_tok);
/* Several products of one x: part k is y_k (n_tok, n_out_k) = x W_k^T, all W_k of one type
 * and n_in wide. With the integer path and n_tok <= CK_GEMV_MAX_TOK they run in one
 * launch (x quantized once): fewer launches, and small matrices fill the GPU together;
 * otherwise one ck_gemv after the other. Returns as ck_gemv. */
#define CK_GEMV_MAX_PARTS 4
typedef struct {
    const void *W;
    size_t row_bytes;
    int64_t n_out;
    float *y;
} ck_gemv_part;
int ck_gemv_parts(uint32_t type, const ck_gemv_part *parts, int n_parts, int64_t n_in, const float *x, int64_t n_tok,
                  void *scratch, int x_ready, void *stream);
/* The same in one launch for parts of two types, the first n_first of type_first and the
 * others of type_rest: Q6_K and Q4_K, either way round (a Q4_K_M file's projections of one
 * input, such as attention's q and k in Q4_K with v in Q6_K), on the integer path.
 * Returns -1 (nothing launched) for other types, more than CK_GEMV_MAX_TOK rows of x, no
 * scratch, or Q4_K rows not 16-byte aligned; else as ck_gemv_parts. */
int ck_gemv_parts_mixed(uint32_t type_first, int n_first, uint32_t type_rest, const ck_gemv_part *parts, int n_parts,
                        int64_t n_in, const float *x, int64_t n_tok, void *scratch, int x_ready, void *stream);
/* The products of a mixture of experts' slots with the routing left on the GPU: for each
 * slot s < n_slots (sel, device: its expert), y_k row s (rows of n_out_k) = x row
 * s / (n_slots / n_x) times expert sel[s]'s matrix of part k, which begins n_out_k rows of
 * row_bytes_k after the previous expert's at W_k (a GGUF tensor of experts); n_slots a
 * multiple of n_x, up to 65535. One launch on the integer path (x's n_x rows quantized into
 * scratch, ck_gemv_experts_scratch_bytes, unless x_ready: as ck_gemv's for n_x <=
 * CK_GEMV_MAX_TOK), else one a part in float. Returns as ck_gemv (-1: shapes refused). */
int ck_gemv_experts(uint32_t type, const ck_gemv_part *parts, int n_parts, int64_t n_in, const float *x, int64_t n_x,
                    const int32_t *sel, int64_t n_slots, void *scratch, int x_ready, void *stream);
size_t ck_gemv_experts_scratch_bytes(int64_t n_in, int64_t n_x);
/* How many of its items (32-element units; Q4_K's and Q6_K's pieces of a super-block) a
 * lane of the integer products loads before it multiplies the first: 4 (the default: four
 * times the bytes in flight a warp), or 1. Other values are ignored. Every depth gives the
 * same bits. Process-wide (EDDY_CUDA_GEMV_DEPTH sets it when a GPU engine is made);
 * returns the depth before the call. */
int ck_gemv_set_depth(int depth);
/* Lets every kernel start while the one before it still runs, the products loading their
 * first weights meanwhile (programmatic dependent launch, ck_device.h: GPUs of compute
 * capability 9.0 and later; on = 0, the default, launches plainly). Process-wide; returns
 * the setting before the call. */
int ck_set_pdl(int on);
/* True when ck_gemv takes the integer path for this type (given scratch). */
int ck_gemv_integer(uint32_t type);

/* The parts' products (as ck_gemv_parts) for more rows of x than ck_gemv takes, on the
 * tensor cores (ck_mmq.cu): the weights' 8-bit levels, decoded as they are read, times x
 * quantized per 32 elements as ck_gemv's integer path does it (into scratch,
 * ck_mmq_scratch_bytes), so the weights are read once for up to CK_MMQ_TOK rows of x
 * (more go in passes of that many). For the types ck_gemv_integer takes and n_in a
 * multiple of 32; returns 0 (nothing launched) otherwise. */
#define CK_MMQ_TOK 64
int ck_mmq_parts(uint32_t type, const ck_gemv_part *parts, int n_parts, int64_t n_in, const float *x, int64_t n_tok,
                 void *scratch, void *stream);
size_t ck_mmq_scratch_bytes(int64_t n_in, int64_t n_tok);

/* out (n_rows, n_in) f16 = W's rows [0, n_rows) dequantized. */
void ck_dequant_f16(uint32_t type, const void *W, size_t row_bytes, int64_t n_in, int64_t n_rows, uint16_t *out,
                    void *stream);

/* x[t] (n_in floats) = scale * row tokens[t] of W (host: no; tokens is device), t < n. */
void ck_embed(uint32_t type, const void *W, size_t row_bytes, int64_t n_in, const int32_t *tokens, int64_t n,
              float scale, float *x, void *stream);

/* out (n) f16 = x (n) f32, rounded to nearest even. */
void ck_f32_to_f16(const float *x, uint16_t *out, int64_t n, void *stream);

/* ==== Element-wise and row ops (ck_ops.cu) ==== */

/* y[r] = rmsnorm(x[r]) * w (w NULL: no weight), r < n_rows, rows of n. y may equal x. */
void ck_rmsnorm_rows(float *y, int64_t sy, const float *x, int64_t sx, const float *w, int64_t n, int64_t n_rows,
                     float eps, void *stream);
/* Rows out_rows[i] (device, i < n) of x, normed, into y (n, E). */
void ck_rmsnorm_gather(float *y, const float *x, const int32_t *rows, const float *w, int64_t E, int64_t n, float eps,
                       void *stream);
/* x += scale * y over n floats. */
void ck_add_scaled(float *x, const float *y, int64_t n, float scale, void *stream);
/* x (n_rows, n) += scale * add (add NULL: nothing added), then y (n_rows, n) = rmsnorm(x)
 * * w: a residual added and the next block's norm in one pass.
 * q8, here and in ck_swiglu and ck_gated_rmsnorm: NULL, or ck_gemv's scratch, in which the
 * kernel then also leaves its output's 8-bit form, as ck_gemv would make it (for rows of a
 * multiple of 32 elements, at most CK_GEMV_MAX_TOK rows): the next product of that output
 * passes x_ready. Returns 1 when it did. f16, in the same three: NULL, or room for the
 * output's f16 form (n_rows dense rows), rounded as ck_f32_to_f16 rounds: what the next
 * product through cuBLAS reads, so that it need not convert the output itself. */
int ck_add_rmsnorm(float *x, const float *add, float scale, float *y, const float *w, int64_t n, int64_t n_rows,
                   float eps, void *q8, uint16_t *f16, void *stream);
/* x *= scale over n floats. */
void ck_scale(float *x, int64_t n, float scale, void *stream);
/* Each row's k best elements (1 <= k <= CK_TOP_MAX) of x (rows of n < 2^31 floats) that
 * are neither NaN nor -inf, best first (of equal values the lower index first; -0 and +0
 * equal): row r's indices at ids + r k, values at vals + r k, how many at counts[r] (k,
 * or fewer where fewer are usable; the entries past it 0 and -inf). vec_top_k's choice,
 * and with k 1 the greedy sampler's (id 0 where no element is usable). */
#define CK_TOP_MAX 64
/* out[r] = the log-probability of token targets[r] under row r of x (rows of n floats):
 * x[t] - max - log(sum exp(x - max)), the exps summed in double; vec_logprob's, within the
 * rounding of another order of summation and of the GPU's expf. With targets NULL the
 * row's log-sum-exp, max + log(sum exp(x - max)): vec_logsumexp's, within the same. */
void ck_logprob_rows(const float *x, int64_t rows, int64_t n, const int32_t *targets, double *out, void *stream);
void ck_top_rows(const float *x, int64_t rows, int64_t n, int k, int32_t *ids, float *vals, int32_t *counts,
                 void *stream);
/* out (n_rows, n) = silu(gate) * up (out may alias either); q8, f16: as ck_add_rmsnorm's. */
int ck_swiglu(float *out, const float *gate, const float *up, int64_t n_rows, int64_t n, void *q8, uint16_t *f16,
              void *stream);
/* a = relu(a)^2 over n floats. */
void ck_relu2(float *a, int64_t n, void *stream);
/* x *= sigmoid(gate) over n floats. */
void ck_sigmoid_mul(float *x, const float *gate, int64_t n, void *stream);

/* The decay gate of ssm.h (ssm_gate_ref), rows of n_heads. */
void ck_ssm_gate(int64_t n_rows, int64_t n_heads, const float *alpha, int64_t alpha_stride, const float *b,
                 int64_t b_stride, int64_t group, int64_t group_stride, const float *a, const float *dt_bias, float *g,
                 float *beta, void *stream);

/* Per-head gated RMSNorm of ssm.h (gated_rmsnorm_ref). out may equal y. q8: as
 * ck_add_rmsnorm's (out's rows dense, d a multiple of 32); f16: as ck_add_rmsnorm's (rows
 * of n_heads d). */
int ck_gated_rmsnorm(int64_t n_rows, int64_t n_heads, int64_t d, const float *y, int64_t y_stride, const float *z,
                     int64_t z_stride, const float *w, float eps, float *out, int64_t out_stride, void *q8,
                     uint16_t *f16, void *stream);

/* Mixture of experts (block_ffn.c's arithmetic). slots: an expert's m token slots
 * (token t's j-th expert is slot t k + j). gather: dst row i = src row slots[i] / k;
 * scatter: y row slots[i] / k += w[slots[i]] * src row i; add_gated: y row t +=
 * sigmoid(gate[t]) * src row t (gate NULL: 1). Rows of E floats. */
void ck_gather_rows(float *dst, const float *src, const int32_t *slots, int64_t k, int64_t m, int64_t E, void *stream);
void ck_scatter_add(float *y, const float *src, const int32_t *slots, int64_t k, const float *w, int64_t m, int64_t E,
                    void *stream);
void ck_add_gated_rows(float *y, const float *src, const float *gate, int64_t n, int64_t E, void *stream);
/* The routing of n tokens on the GPU (moe_route's without the host): token t's k experts
 * of the largest of its X router logits (of equal ones the lower index first) into sel
 * (n, k), and their probabilities renormalized over the k, the softmax of their logits,
 * into w (n, k). Then ck_gemv_experts runs the chosen experts' products, and combine
 * makes y row t = sum over j < k of w[t k + j] out row t k + j (rows of E floats). */
void ck_moe_route(const float *logits, int64_t n, int64_t X, int64_t k, int32_t *sel, float *w, void *stream);
/* pos (device, or NULL: slot s is row s): the row of out that holds slot t k + j's output. */
void ck_moe_combine(float *y, const float *out, const float *w, const int32_t *pos, int64_t n, int64_t k, int64_t E,
                    void *stream);

/* A prefill's experts grouped on the GPU. ck_moe_group lays the S token slots (sel: each
 * one's expert, of X <= CK_MOE_GROUP_EXPERTS) out by expert: expert e's slots take rows
 * from a multiple of 8 on, in some order, of a layout of rows_max = ck_moe_rows(S, X) rows:
 * pos[s] is slot s's row, src[r] the slot whose row r is (-1: a padding row); and it cuts
 * each expert's rows into tiles of up to CK_MMQ_TOK (*n_tiles of them, at most
 * ck_moe_tiles(S, X)). ck_gather_slots fills the layout: dst row r (E floats) = x row
 * src[r] / k, zeros where src[r] < 0. ck_mmq_experts then multiplies each tile's rows of
 * x (rows_max rows in the layout, quantized into scratch, ck_mmq_experts_scratch_bytes)
 * by its expert's matrix of each part (as ck_gemv_experts' parts), into the same rows of
 * the parts' outputs, on the tensor cores as ck_mmq_parts; returns 0 (nothing launched)
 * for the types ck_gemv_integer refuses. */
#define CK_MOE_GROUP_EXPERTS 4096
typedef struct {
    int32_t expert, row, n;
} ck_moe_tile;
int64_t ck_moe_rows(int64_t S, int64_t X);
int64_t ck_moe_tiles(int64_t S, int64_t X);
void ck_moe_group(const int32_t *sel, int64_t S, int64_t X, int32_t *pos, int32_t *src, ck_moe_tile *tiles,
                  int32_t *n_tiles, void *stream);
void ck_gather_slots(float *dst, const float *x, const int32_t *src, int64_t k, int64_t rows, int64_t E,
                     void *stream);
int ck_mmq_experts(uint32_t type, const ck_gemv_part *parts, int n_parts, int64_t n_in, const float *x, int64_t rows,
                   const ck_moe_tile *tiles, const int32_t *n_tiles, int64_t tiles_max, void *scratch, void *stream);
size_t ck_mmq_experts_scratch_bytes(int64_t n_in, int64_t rows);

/* dst row i (E floats) = rows row src[i] when src[i] >= 0, else the first E floats of
 * slot -src[i] - 1 of slab (slots of slot_floats): the MTP layer's previous hidden state,
 * from the step or from a sequence's state. */
void ck_gather_h(float *dst, const float *rows, const float *slab, int64_t slot_floats, const int32_t *src, int64_t n,
                 int64_t E, void *stream);

/* ==== The mixers (ck_mixers.cu) ==== */

/* A step's rows and their sequences. A run is one sequence's consecutive rows. */
typedef struct {
    int32_t row0, n;  /* rows [row0, row0 + n) */
    int32_t slot_in;  /* recurrent slot the run starts from */
    int32_t slot_out; /* slot the state after its last row goes to; -1: none (a verify) */
    int32_t bt;       /* offset of its block table in the step's block list */
    /* prefix-cache checkpoints: pairs (t, slot) [ck, ck + n_ck) of the step's checkpoint
     * list, t ascending: the recurrent state after the run's row t is copied to slot */
    int32_t ck, n_ck;
} ck_run;

/* Rotary embedding (ops/rope.c, angles in double) of q (n, n_head, hd) and k (n, n_kv, hd)
 * at each row's position, then k and v rows into the KV cache: row r's position p goes to
 * block blocks[run.bt + p / 256], row p % 256 (the run of row r is row_run[r]).
 * kc/vc: the layer's slabs, keys in f16 when bit 0 of kv_f16 is set (else f32), values when
 * bit 1 is; n_kv hd / n_kv dv elements per row. hd at most 512.
 * pre (NULL: none) is what comes before the rotation, in the same pass: with qg, Qwen's
 * gated q projection qg (n, n_head, 2 hd: per head q, then its gate) is split into q and
 * gate (n, n_head, hd); with q_norm / k_norm (hd), each head of q / k is RMSNormed with that
 * weight (as ck_rmsnorm_rows). */
typedef struct {
    const int32_t *row_pos, *row_run, *blocks;
    const ck_run *runs;
} ck_step;
typedef struct {
    const float *qg;
    float *gate;
    const float *q_norm, *k_norm;
    float eps;
} ck_rope_pre;

void ck_rope_store(const ck_step *s, int64_t n, const ck_rope_pre *pre, float *q, float *k, const float *v,
                   int64_t n_head, int64_t n_kv, int64_t hd, int64_t dv, int64_t n_rot, float rope_base, int neox,
                   void *kc, void *vc, int kv_f16, void *stream);

/* Causal GQA attention (ops_attention_ref) for each row at its position over its
 * sequence's cached keys 0..pos: out (n, n_head, dv), q (n, n_head, hd); with a gate (n,
 * n_head, dv), out times sigmoid(gate) (ck_sigmoid_mul), else NULL. With n_split > 1
 * each (row, head) may split its keys in up to n_split (at most CK_ATT_SPLITS) even
 * ranges, each a block of its own, whose partial softmaxes part (n * n_head * n_split *
 * (dv + 2) floats) holds until a second kernel folds them: for decode over long contexts.
 * That one also leaves out's 8-bit form in q8 where it fits (as ck_add_rmsnorm); returns
 * whether it did. The heads that share a KV head go through ck_attention_grouped where it
 * takes the shape. */
#define CK_ATT_SPLITS 64
int ck_attention(const ck_step *s, int64_t n, const float *q, const float *gate, float *out, const void *kc,
                 const void *vc, int kv_f16, int64_t n_head, int64_t n_kv, int64_t hd, int64_t dv, float scale,
                 int n_split, float *part, void *q8, void *stream);
/* The same (ck_attn_group.cu) with the G = n_head / n_kv query heads that share a KV head
 * in one block, each key and value row read once for them: for an f16 cache (kv_f16 3),
 * hd == dv of 32, 64, 128 or 256 and G of 1, 2, 4 or 8; returns 0 (nothing launched) for
 * other shapes. n_split: the ranges of each row's keys; 1 writes out (times the gate's
 * sigmoid), more write part as ck_attention's, for its second kernel. */
int ck_attention_grouped(const ck_step *s, int64_t n, const float *q, const float *gate, float *out, const void *kc,
                         const void *vc, int kv_f16, int64_t n_head, int64_t n_kv, int64_t hd, int64_t dv, float scale,
                         int n_split, float *part, void *stream);
/* 0: ck_attention_grouped takes nothing, so ck_attention reads the keys a head at a time
 * (eddy-cuda-bench's comparison); 1 (the default): it takes what it can. */
void ck_attention_set_grouped(int on);
/* The same for a step whose rows are all one sequence's consecutive positions (a
 * prefill): FP32 tiles of 16 queries share each tile of keys and values. Returns 0
 * (nothing launched) for heads over 256 wide. */
int ck_attention_prefill(const ck_step *s, int64_t n, const float *q, float *out, const void *kc, const void *vc,
                         int kv_f16, int64_t n_head, int64_t n_kv, int64_t hd, int64_t dv, float scale, void *stream);
/* The same for every row of a step, on the tensor cores (ck_flash.cu): each run's rows in
 * tiles of consecutive queries, so one or several sequences' prefills at once (runs: the
 * host's copy of s->runs, n_runs of them). For an f16 cache (kv_f16 3), hd a multiple of
 * 16 up to 256, dv 16, 32, 64, 128 or 256, where the device lets a block have the shared
 * memory it needs (about 105 KiB at 256 by 256, 71 KiB in blocks of half the queries). Q
 * and the softmax weights go in as f16 pairs (high and low parts), so the sums keep f32's
 * precision. Returns 0 (nothing launched) where it cannot. */
int ck_attention_prefill_mma(const ck_step *s, const ck_run *runs, int64_t n_runs, const float *q, float *out,
                             const void *kc, const void *vc, int kv_f16, int64_t n_head, int64_t n_kv, int64_t hd,
                             int64_t dv, float scale, void *stream);

/* Causal conv1d + SiLU (ssm.h conv1d_scan_ref) of every row: inputs before a run's first
 * row come from its slot_in window in `state` (slots of (K-1, C) floats). x rows xs
 * apart, y rows ys apart; w (K, C) tap-major; bias (C) or NULL. Then the first l2_ch
 * channels of each y row are L2-normed per head of l2_dim (eps l2_eps). With window 1
 * the new windows are written too, as ck_conv_window would: only for a step whose runs
 * are all one row written back to its slot_out (a decode step: no other run may read that
 * slot, and no checkpoint the old window). */
void ck_conv1d(const ck_step *s, int64_t n, const float *x, int64_t xs, float *y, int64_t ys, const float *w,
               const float *bias, int64_t C, int K, float *state, int window, int64_t l2_ch, int64_t l2_dim,
               float l2_eps, void *stream);

/* The conv window after row item_end[i] of the run containing it (whose first row is
 * item_row0[i], whose old window is in slot item_src[i]) into slot item_dst[i], for
 * i < n_items; all items read before any writes when src == dst. */
void ck_conv_window(const int32_t *items, int64_t n_items, const float *x, int64_t xs, int64_t C, int K, float *state,
                    void *stream);
/* items: n_items groups of 4 int32 (end, row0, src, dst). */

/* The gated delta rule (gdn.h gdn_scan_ref) over each run's rows, from slot slot_in of
 * `state` ((n_v, d_k, d_v) per slot), the state after the last row written to slot_out
 * (-1: not written), and at the runs' checkpoints (ckpts) to theirs. qkv rows (the conv
 * output) hold q (n_k, d_k) | k (n_k, d_k) | v (n_v, d_v) at stride qkv_s; g, beta (rows, n_v); o (rows, n_v, d_v). head_map as gdn.h. */
void ck_gdn(const ck_run *runs, int64_t n_runs, const int32_t *ckpts, const float *qkv, int64_t qkv_s, const float *g,
            const float *beta, float *o, float *state, int64_t n_k, int64_t n_v, int64_t d_k, int64_t d_v, int head_map,
            float scale, void *stream);
/* The same for a prefill (ck_gdn_tiles.cu): each run's rows in tiles of CK_GDN_TILE, the
 * tiles' forward substitutions all at once, then each run's tiles in order as products
 * with the state; the same results within float rounding. n: the step's rows. work: room
 * for work_tiles tiles (CK_GDN_TILE_WORK floats a tile and value head), at least
 * ck_gdn_tiles_max(n, n_runs). tensor_cores: the products with the state, T and P as TF32
 * products in three parts (about f32's precision) where d_k is a multiple of 16; else, or
 * 0, on the CUDA cores. Returns 0 (nothing launched) where work is short, d_k is not a
 * multiple of 4, or a tile's shared memory is more than the device has. */
/* a step whose longest run has this many rows takes the scans in tiles or chunks; the rows
 * of a Mamba-2 chunk (ck_mamba2_chunked) */
#define CK_SCAN_CHUNK 16
#define CK_GDN_TILE 32
#define CK_GDN_TILE_WORK (2 * CK_GDN_TILE * CK_GDN_TILE + CK_GDN_TILE) /* T, P (tile x tile), G */
int64_t ck_gdn_tiles_max(int64_t n, int64_t n_runs);
int ck_gdn_chunked(const ck_run *runs, int64_t n_runs, int64_t n, const int32_t *ckpts, const float *qkv, int64_t qkv_s,
                   const float *g, const float *beta, float *o, float *state, int64_t n_k, int64_t n_v, int64_t d_k,
                   int64_t d_v, int head_map, float scale, float *work, int64_t work_tiles, int tensor_cores,
                   void *stream);

/* Where the decay gate's inputs are (ck_ssm_gate's arguments): for row r and value head h,
 * alpha[r alpha_stride + at] and b[r b_stride + at], at = h / group * group_stride +
 * h % group; a (the negated exp(A_log)) and dt_bias per head. */
typedef struct {
    const float *alpha;
    int64_t alpha_stride;
    const float *b;
    int64_t b_stride, group, group_stride;
    const float *a, *dt_bias;
} ck_gate_src;
/* A per-head gated RMSNorm's z (rows z_stride apart), weight (one head's width) and eps */
typedef struct {
    const float *z;
    int64_t z_stride;
    const float *w;
    float eps;
} ck_gated_norm;
/* A decode step of a Gated DeltaNet layer in one kernel, for a step whose runs are each
 * one row that updates its own slot (slot_out == slot_in or -1; no checkpoints): the decay
 * gate and beta (ck_ssm_gate), the delta rule (ck_gdn), then the per-head gated RMSNorm of
 * the outputs into o (n_runs, n_v d_v) (ck_gated_rmsnorm), with o's 8-bit form in q8
 * where it fits (as ck_gated_rmsnorm). Each block holds its part of a head's state in
 * registers. Returns -1 (nothing launched) for heads it does not take (d_v over 512, or
 * more than 64 state rows a thread), else whether q8 holds o's 8-bit form. */
int ck_gdn_step(const ck_run *runs, int64_t n_runs, const float *qkv, int64_t qkv_s, const ck_gate_src *gate,
                const ck_gated_norm *norm, float *o, void *q8, float *state, int64_t n_k, int64_t n_v, int64_t d_k,
                int64_t d_v, int head_map, float scale, void *stream);

/* A verify's rows kept for replay in its row slots. A row's kept floats are up to
 * CK_MAX_SEGMENTS segments of step buffers (width[k] floats at base[k] + row stride[k]),
 * one after another in the item's slot of `slab` (slots of slot_floats each: the pool's
 * keep slab, or its conv slab for the MTP layer's h). items: n_items pairs (row, slot).
 * gather 0: rows into their slots; gather 1: item i's slot back into row i of the
 * segments. */
#define CK_MAX_SEGMENTS 3
typedef struct {
    int n;
    float *base[CK_MAX_SEGMENTS];
    int64_t stride[CK_MAX_SEGMENTS], width[CK_MAX_SEGMENTS];
} ck_segments;
void ck_keep_rows(const int32_t *items, int64_t n_items, int gather, const ck_segments *seg, float *slab,
                  int64_t slot_floats, void *stream);

/* The Mamba-2 scan (mamba2.h mamba2_scan_ref) over each run's rows, from slot slot_in of
 * `state` ((H, N, P) per slot) to slot_out (-1: not written) and the checkpoints. xbc rows (the conv output,
 * stride xbc_s) hold x (H, P) | B (G, N) | C (G, N); dt_raw (rows, H) at stride dt_s;
 * y (rows, H, P). A, dt_bias (H); D (H) or NULL. No dt clamp (Mamba-2's default). */
void ck_mamba2(const ck_run *runs, int64_t n_runs, const int32_t *ckpts, const float *xbc, int64_t xbc_s,
               const float *dt_raw, int64_t dt_s, float *y, float *state, int64_t H, int64_t P, int64_t G, int64_t N,
               const float *A, const float *dt_bias, const float *D, void *stream);
/* The same in chunks (the SSD form), for prefill: tensor_cores, chunks of 32 rows whose
 * products go as TF32 products in three parts (about f32's precision) where N is a multiple
 * of 16 and the device has the shared memory; else, or 0, chunks of up to CK_SCAN_CHUNK
 * rows on the CUDA cores. 0: the shape's chunk does not fit in shared memory (nothing
 * launched). */
int ck_mamba2_chunked(const ck_run *runs, int64_t n_runs, const int32_t *ckpts, const float *xbc, int64_t xbc_s,
                      const float *dt_raw, int64_t dt_s, float *y, float *state, int64_t H, int64_t P, int64_t G,
                      int64_t N, const float *A, const float *dt_bias, const float *D, int tensor_cores, void *stream);

/* Per-group gated RMSNorm of ssm.h (gated_rmsnorm_group_ref): x = y silu(z), normed per
 * group, times w per channel. out may equal y. */
void ck_gated_rmsnorm_group(int64_t n_rows, int64_t n_groups, int64_t group_size, const float *y, int64_t y_stride,
                            const float *z, int64_t z_stride, const float *w, float eps, float *out, int64_t out_stride,
                            void *stream);

#ifdef __cplusplus
}
#endif

#endif
