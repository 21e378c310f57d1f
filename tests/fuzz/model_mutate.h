/*
 * model_mutate.h — mutated copies of the tiny models, and the check every copy must
 * pass: shared by the model fuzzer (tests/fuzz/fuzz_model.c) and the unit tests
 * (tests/test_model_mutations.c). Header-only (static functions): each of the two
 * programs includes it once.
 *
 * Owns: the recipe format, the rebuilt GGUF file a recipe describes, and mm_check
 * (load + context + a 3-token forward + sampling + two generated tokens through the
 * public API). Does not own: what a correct refusal says (the loaders do).
 *
 * A recipe is bytes:
 *   byte 0            which base model (mm_bases[byte % MM_N_BASES])
 *   then groups of 4  [target][op][a][b]
 *     target < 0xF0:  entry target % (n_kv + n_tensors) of the base file: a metadata
 *                     key (file order), then the tensors (file order)
 *     target == 0xFF: the target is named: [0xFF][op][a][b][len][len bytes of name];
 *                     a name the file lacks adds that key (as an integer) for int ops
 *     op, a, b:       what to do, by the target's kind (mm_int_ops, mm_float_ops, ...);
 *                     op is taken modulo the kind's number of ops
 * A later group on the same target replaces an earlier one. Everything else of the
 * base file is copied as it is (the tensor data too), so a recipe of one byte is the
 * base model itself.
 *
 * The check (mm_check): the rebuilt file must either be refused with an error (one
 * line, non-empty, never EDDY_ERR_NOMEM: the tiny models need a few MiB, so running
 * out means eddy believed an absurd size) or load and run: eddy_ctx_new with the
 * default size (then freed) and with 16 positions, a 3-token eval with all logits, one more token, a sampler over n_vocab and eddy_generate of
 * two tokens with the model's vocabulary. The sanitizers and libFuzzer's memory limit
 * do the rest.
 */
#ifndef EDDY_TESTS_MODEL_MUTATE_H
#define EDDY_TESTS_MODEL_MUTATE_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "eddy.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/qtypes.h"

/* ==== Base models ==== */

#define MM_N_BASES 8
/* relative to tests/data; one of each architecture the loaders handle, quantized where
 * a quantized copy exists (smaller, and the quantized row code runs too) */
static const char *const mm_base_files[MM_N_BASES] = {
    "models/llama-tiny-q8_0.gguf",        "models/qwen35-tiny-q8_0.gguf",
    "models/qwen35moe-tiny-q4_k_m.gguf",  "models/qwen3next-tiny-q8_0.gguf",
    "models/mamba2-tiny-q8_0.gguf",       "models/nemotron_h-tiny-q8_0.gguf",
    "models/granitehybrid-tiny-q8_0.gguf", "models/granitehybrid-dense-tiny-f32.gguf",
};

typedef struct {
    uint8_t *bytes; /* the file, read once (gguf_open_memory parses it in place) */
    gguf_file *f;
    int64_t n_tokens; /* entries of tokenizer.ggml.tokens, 0 when absent */
} mm_base;

static mm_base mm_bases[MM_N_BASES];

/* Reads every base model from dir (tests/data); false (after printing why) when one
 * cannot be read. Idempotent. */
static bool mm_open_bases(const char *dir) {
    for (int i = 0; i < MM_N_BASES; i++) {
        if (mm_bases[i].f) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, mm_base_files[i]);
        FILE *fp = fopen(path, "rb");
        if (!fp) {
            fprintf(stderr, "model_mutate: cannot open %s\n", path);
            return false;
        }
        fseek(fp, 0, SEEK_END);
        long n = ftell(fp);
        fseek(fp, 0, SEEK_SET);
        uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
        bool ok = b && n > 0 && fread(b, 1, (size_t)n, fp) == (size_t)n;
        fclose(fp);
        eddy_error err;
        if (!ok || gguf_open_memory(&mm_bases[i].f, b, (uint64_t)n, mm_base_files[i], &err) != EDDY_OK) {
            fprintf(stderr, "model_mutate: cannot read %s\n", path);
            free(b);
            return false;
        }
        mm_bases[i].bytes = b;
        const gguf_value *t = gguf_get(mm_bases[i].f, "tokenizer.ggml.tokens");
        mm_bases[i].n_tokens = t && t->type == GGUF_TYPE_ARRAY ? (int64_t)t->arr.n : 0;
    }
    return true;
}

/* ==== Operations ==== */

/* On an integer value x (any integer type; a result that does not fit the type is
 * written as i64/u64). */
enum {
    MM_INT_ZERO,     /* 0 */
    MM_INT_ONE,      /* 1 */
    MM_INT_INC,      /* x + 1 */
    MM_INT_DEC,      /* x - 1 */
    MM_INT_X2,       /* 2x */
    MM_INT_I32MAX,   /* 2^31 - 1 */
    MM_INT_X2P31,    /* x * 2^31 */
    MM_INT_NEG1,     /* -1 (all ones in an unsigned type) */
    MM_INT_NTOK,     /* the base's token count - 1 + a % 3: special ids at and past the end */
    MM_INT_RAW,      /* a * 256 + b */
    MM_INT_RETYPE,   /* the same number as another type (a % 11: u8 i8 u16 i16 u32 i32 u64 i64 f32 bool str) */
    MM_INT_DROP,     /* the key removed */
    MM_INT_N_OPS
};
static const char *const mm_int_op_names[MM_INT_N_OPS] = {"zero", "one",  "inc", "dec",    "x2",    "i32max",
                                                          "x2p31", "neg1", "ntok", "raw", "retype", "drop"};

enum { MM_FLT_ZERO, MM_FLT_NEG, MM_FLT_NAN, MM_FLT_INF, MM_FLT_HUGE, MM_FLT_TINY, MM_FLT_X2, MM_FLT_AS_INT, MM_FLT_DROP, MM_FLT_N_OPS };
static const char *const mm_flt_op_names[MM_FLT_N_OPS] = {"zero", "neg", "nan", "inf", "huge", "tiny", "x2", "as-int", "drop"};

enum { MM_BOOL_FLIP, MM_BOOL_AS_INT, MM_BOOL_AS_STR, MM_BOOL_DROP, MM_BOOL_N_OPS };
static const char *const mm_bool_op_names[MM_BOOL_N_OPS] = {"flip", "as-int", "as-str", "drop"};

enum { MM_STR_EMPTY, MM_STR_HALF, MM_STR_TABLE, MM_STR_AS_INT, MM_STR_DROP, MM_STR_N_OPS };
static const char *const mm_str_op_names[MM_STR_N_OPS] = {"empty", "half", "table", "as-int", "drop"};
/* MM_STR_TABLE: names a loader switches on */
static const char *const mm_str_table[] = {"llama",  "qwen35", "qwen35moe", "qwen3next", "mamba2", "nemotron_h",
                                           "granitehybrid", "gpt2", "qwen2", "smollm", "llama-bpe", "default",
                                           "bert", "yarn", "none", "\xff\xfe"};

/* On an array of n elements. */
enum {
    MM_ARR_EMPTY,    /* no elements */
    MM_ARR_CUT1,     /* the last element removed */
    MM_ARR_CUT,      /* cut to (a * 256 + b) % n elements */
    MM_ARR_HALF,     /* cut to n / 2 */
    MM_ARR_ELEM,     /* element (a * 256 + b) % n: integer op (b % MM_INT_N_OPS, not retype/drop) or, for
                      * strings, the empty string; for floats NaN */
    MM_ARR_GROW,     /* one more element, a copy of the last */
    MM_ARR_RETYPE,   /* the numbers as another element type (a % 4: u8 i64 f32 bool) */
    MM_ARR_AS_INT,   /* replaced by the scalar u32 n */
    MM_ARR_DROP,     /* the key removed */
    MM_ARR_N_OPS
};
static const char *const mm_arr_op_names[MM_ARR_N_OPS] = {"empty", "cut1", "cut", "half", "elem", "grow",
                                                          "retype", "as-int", "drop"};

/* On a tensor. */
enum {
    MM_TEN_DROP,     /* removed */
    MM_TEN_NE0,      /* ne[0] + a % 3 - 1 (kept only when the type's blocks allow it) */
    MM_TEN_NE1,      /* ne[1] doubled (a % 2 == 0) or halved */
    MM_TEN_TYPE,     /* retyped (a % 4: F32 F16 Q8_0 Q4_K), data zeroed */
    MM_TEN_DIM,      /* one more dimension of 1 ([a, b] -> [a, b, 1]), or 2 (a % 2 == 1) */
    MM_TEN_N_OPS
};
static const char *const mm_ten_op_names[MM_TEN_N_OPS] = {"drop", "ne0", "ne1", "type", "dim"};

/* "drop" is the last op of every value kind, so this op number drops a key whatever
 * its kind: 179 = lcm(12, 9, 4, 5) - 1. */
#define MM_DROP 179
_Static_assert(MM_DROP % MM_INT_N_OPS == MM_INT_DROP && MM_DROP % MM_FLT_N_OPS == MM_FLT_DROP &&
                   MM_DROP % MM_BOOL_N_OPS == MM_BOOL_DROP && MM_DROP % MM_STR_N_OPS == MM_STR_DROP &&
                   MM_DROP % MM_ARR_N_OPS == MM_ARR_DROP,
               "MM_DROP drops every kind of value");

/* ==== Recipes ==== */

#define MM_MAX_GROUPS 16

typedef struct {
    int64_t target;   /* kv index, or n_kv + tensor index; -1: the named key below */
    char name[64];    /* target -1: the key to add or replace */
    uint8_t op, a, b;
} mm_edit;

typedef struct {
    int base;
    int n_edits;
    mm_edit edits[MM_MAX_GROUPS];
} mm_recipe;

/* Parses a recipe (never fails: every byte string is one). */
static mm_recipe mm_parse(const uint8_t *data, size_t size) {
    mm_recipe r = {0};
    if (size == 0) return r;
    r.base = data[0] % MM_N_BASES;
    const gguf_file *f = mm_bases[r.base].f;
    const int64_t n_targets = f->n_kv + f->n_tensors;
    size_t i = 1;
    while (i + 4 <= size && r.n_edits < MM_MAX_GROUPS) {
        mm_edit e = {.op = data[i + 1], .a = data[i + 2], .b = data[i + 3]};
        if (data[i] == 0xFF) {
            i += 4;
            if (i >= size) break;
            size_t len = data[i++];
            if (len > size - i) len = size - i;
            if (len >= sizeof e.name) len = sizeof e.name - 1;
            memcpy(e.name, data + i, len);
            e.name[len] = '\0';
            i += len;
            e.target = gguf_find_key(f, e.name); /* -1 when absent: added */
        } else {
            e.target = data[i] % n_targets;
            i += 4;
        }
        /* a later edit of the same target replaces the earlier one */
        int k = 0;
        while (k < r.n_edits && !(r.edits[k].target == e.target && (e.target >= 0 || !strcmp(r.edits[k].name, e.name)))) k++;
        r.edits[k] = e;
        if (k == r.n_edits) r.n_edits++;
    }
    return r;
}

/* ==== Rebuilding ==== */

/* Room to describe what a recipe did, for messages. */
typedef struct {
    char text[1024];
    size_t len;
} mm_desc;

static void mm_say(mm_desc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mm_say(mm_desc *d, const char *fmt, ...) {
    if (d->len >= sizeof d->text - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(d->text + d->len, sizeof d->text - d->len, fmt, ap);
    va_end(ap);
    if (n > 0) d->len += (size_t)n < sizeof d->text - d->len ? (size_t)n : sizeof d->text - d->len - 1;
}

/* The value of integer scalar v as int64 (u64 above INT64_MAX saturates). */
static int64_t mm_int_of(const gguf_value *v) {
    if (v->type == GGUF_TYPE_UINT8 || v->type == GGUF_TYPE_UINT16 || v->type == GGUF_TYPE_UINT32 ||
        v->type == GGUF_TYPE_UINT64)
        return v->u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v->u;
    return v->i;
}

static bool mm_type_unsigned(gguf_type t) {
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_UINT64;
}

/* Whether x fits integer type t. */
static bool mm_fits(gguf_type t, int64_t x) {
    switch (t) {
    case GGUF_TYPE_UINT8: return x >= 0 && x <= 0xFF;
    case GGUF_TYPE_INT8: return x >= -128 && x <= 127;
    case GGUF_TYPE_UINT16: return x >= 0 && x <= 0xFFFF;
    case GGUF_TYPE_INT16: return x >= -32768 && x <= 32767;
    case GGUF_TYPE_UINT32: return x >= 0 && x <= 0xFFFFFFFFll;
    case GGUF_TYPE_INT32: return x >= INT32_MIN && x <= INT32_MAX;
    case GGUF_TYPE_UINT64: return x >= 0;
    default: return true;
    }
}

/* Integer op on x; *all_ones set for NEG1 on an unsigned type (the bits, not -1). */
static int64_t mm_int_apply(int op, int64_t x, int a, int b, int64_t n_tokens) {
    switch (op) {
    case MM_INT_ZERO: return 0;
    case MM_INT_ONE: return 1;
    case MM_INT_INC: return x == INT64_MAX ? x : x + 1;
    case MM_INT_DEC: return x == INT64_MIN ? x : x - 1;
    case MM_INT_X2: return x > INT64_MAX / 2 ? INT64_MAX : x < INT64_MIN / 2 ? INT64_MIN : 2 * x;
    case MM_INT_I32MAX: return INT32_MAX;
    case MM_INT_X2P31: {
        const int64_t k = (int64_t)1 << 31;
        return x > INT64_MAX / k ? INT64_MAX : x < INT64_MIN / k ? INT64_MIN : x * k;
    }
    case MM_INT_NEG1: return -1;
    case MM_INT_NTOK: return n_tokens - 1 + a % 3;
    case MM_INT_RAW: return a * 256 + b;
    default: return x;
    }
}

/* Writes integer x under key as type t, widening to i64 when it does not fit (an
 * unsigned type's -1 is written as all ones instead). */
static void mm_write_int(gguf_writer *w, const char *key, gguf_type t, int64_t x) {
    if (x == -1 && mm_type_unsigned(t)) gguf_writer_add_uint(w, key, t, UINT64_MAX);
    else if (mm_fits(t, x)) gguf_writer_add_int(w, key, t, x);
    else gguf_writer_add_int(w, key, GGUF_TYPE_INT64, x);
}

static const gguf_type mm_retypes[11] = {GGUF_TYPE_UINT8, GGUF_TYPE_INT8,   GGUF_TYPE_UINT16, GGUF_TYPE_INT16,
                                         GGUF_TYPE_UINT32, GGUF_TYPE_INT32, GGUF_TYPE_UINT64, GGUF_TYPE_INT64,
                                         GGUF_TYPE_FLOAT32, GGUF_TYPE_BOOL, GGUF_TYPE_STRING};

/* Writes number x as type t: integers wrap to the type's width (as a careless writer
 * would), floats and bools convert, strings are the decimal text. */
static void mm_write_as(gguf_writer *w, const char *key, gguf_type t, int64_t x) {
    if (t == GGUF_TYPE_FLOAT32) gguf_writer_add_float(w, key, t, (double)x);
    else if (t == GGUF_TYPE_BOOL) gguf_writer_add_bool(w, key, x != 0);
    else if (t == GGUF_TYPE_STRING) {
        char s[32];
        snprintf(s, sizeof s, "%lld", (long long)x);
        gguf_writer_add_str(w, key, s);
    } else gguf_writer_add_uint(w, key, t, (uint64_t)x);
}

/* Writes kv (key key, value v; v NULL: absent, for a named key) mutated by e. */
static void mm_write_kv(gguf_writer *w, const char *key, const gguf_value *v, const mm_edit *e, int64_t n_tokens,
                        mm_desc *d) {
    gguf_type t = v ? v->type : GGUF_TYPE_INT32;
    if (!v || gguf_type_is_int(t)) {
        const int op = e->op % MM_INT_N_OPS;
        const int64_t x = v ? mm_int_of(v) : 0;
        mm_say(d, "%s %s", key, mm_int_op_names[op]);
        if (op == MM_INT_DROP) {
            mm_say(d, "; ");
            return;
        }
        if (op == MM_INT_RETYPE) {
            gguf_type to = mm_retypes[e->a % 11];
            mm_say(d, " %s; ", gguf_type_name(to));
            mm_write_as(w, key, to, x);
            return;
        }
        int64_t y = mm_int_apply(op, x, e->a, e->b, n_tokens);
        mm_say(d, " (%lld -> %lld); ", (long long)x, (long long)y);
        mm_write_int(w, key, t, y);
        return;
    }
    switch (t) {
    case GGUF_TYPE_FLOAT32:
    case GGUF_TYPE_FLOAT64: {
        const int op = e->op % MM_FLT_N_OPS;
        mm_say(d, "%s %s; ", key, mm_flt_op_names[op]);
        double y = v->f;
        switch (op) {
        case MM_FLT_ZERO: y = 0; break;
        case MM_FLT_NEG: y = -1; break;
        case MM_FLT_NAN: y = NAN; break;
        case MM_FLT_INF: y = e->a % 2 ? -INFINITY : INFINITY; break;
        case MM_FLT_HUGE: y = 1e30; break;
        case MM_FLT_TINY: y = 1e-30; break;
        case MM_FLT_X2: y = 2 * v->f; break;
        case MM_FLT_AS_INT: gguf_writer_add_int(w, key, GGUF_TYPE_INT32, (int64_t)(v->f > -1e9 && v->f < 1e9 ? v->f : 0)); return;
        case MM_FLT_DROP: return;
        }
        gguf_writer_add_float(w, key, t, y);
        return;
    }
    case GGUF_TYPE_BOOL: {
        const int op = e->op % MM_BOOL_N_OPS;
        mm_say(d, "%s %s; ", key, mm_bool_op_names[op]);
        if (op == MM_BOOL_FLIP) gguf_writer_add_bool(w, key, !v->b);
        else if (op == MM_BOOL_AS_INT) gguf_writer_add_int(w, key, GGUF_TYPE_INT32, v->b ? 2 : 0);
        else if (op == MM_BOOL_AS_STR) gguf_writer_add_str(w, key, v->b ? "true" : "false");
        return;
    }
    case GGUF_TYPE_STRING: {
        const int op = e->op % MM_STR_N_OPS;
        mm_say(d, "%s %s; ", key, mm_str_op_names[op]);
        gguf_value s = *v;
        if (op == MM_STR_EMPTY) s.s.len = 0;
        else if (op == MM_STR_HALF) s.s.len /= 2;
        else if (op == MM_STR_TABLE) {
            const char *x = mm_str_table[e->a % (sizeof mm_str_table / sizeof mm_str_table[0])];
            s.s.ptr = x, s.s.len = strlen(x);
        } else if (op == MM_STR_AS_INT) {
            gguf_writer_add_int(w, key, GGUF_TYPE_UINT32, (int64_t)v->s.len);
            return;
        } else return; /* drop */
        gguf_writer_add_value(w, key, &s);
        return;
    }
    case GGUF_TYPE_ARRAY: break;
    default: gguf_writer_add_value(w, key, v); return;
    }
    /* arrays */
    const int op = e->op % MM_ARR_N_OPS;
    const uint64_t n = v->arr.n, arg = (uint64_t)e->a * 256 + e->b;
    const gguf_type et = v->arr.elem_type;
    mm_say(d, "%s %s", key, mm_arr_op_names[op]);
    gguf_value c = *v;
    switch (op) {
    case MM_ARR_EMPTY: c.arr.n = 0; break;
    case MM_ARR_CUT1: c.arr.n = n ? n - 1 : 0; break;
    case MM_ARR_CUT: c.arr.n = n ? arg % n : 0; break;
    case MM_ARR_HALF: c.arr.n = n / 2; break;
    case MM_ARR_AS_INT: mm_say(d, "; "); gguf_writer_add_int(w, key, GGUF_TYPE_UINT32, (int64_t)n); return;
    case MM_ARR_DROP: mm_say(d, "; "); return;
    default: break;
    }
    if (op == MM_ARR_EMPTY || op == MM_ARR_CUT1 || op == MM_ARR_CUT || op == MM_ARR_HALF) {
        mm_say(d, " (%llu -> %llu); ", (unsigned long long)n, (unsigned long long)c.arr.n);
        gguf_writer_add_value(w, key, &c);
        return;
    }
    if (n == 0 || et == GGUF_TYPE_ARRAY) { /* nothing to change element-wise */
        mm_say(d, " (no-op); ");
        gguf_writer_add_value(w, key, v);
        return;
    }
    if (et == GGUF_TYPE_STRING) {
        gguf_str *strs = malloc((size_t)(n + 1) * sizeof *strs);
        if (!strs) return;
        memcpy(strs, v->arr.strs, (size_t)n * sizeof *strs);
        c.arr.strs = strs;
        if (op == MM_ARR_GROW) c.arr.n = n + 1, strs[n] = strs[n - 1];
        else if (op == MM_ARR_ELEM) strs[arg % n].len = 0;
        /* retype: strings stay strings */
        mm_say(d, " [%llu]; ", (unsigned long long)(arg % n));
        gguf_writer_add_value(w, key, &c);
        free(strs);
        return;
    }
    /* numeric or bool elements: work on int64 / double copies, then write back */
    const size_t es = gguf_scalar_size(et);
    gguf_type to = et;
    if (op == MM_ARR_RETYPE) {
        static const gguf_type arr_types[4] = {GGUF_TYPE_UINT8, GGUF_TYPE_INT64, GGUF_TYPE_FLOAT32, GGUF_TYPE_BOOL};
        to = arr_types[e->a % 4];
    }
    const uint64_t m = op == MM_ARR_GROW ? n + 1 : n;
    const size_t ts = gguf_scalar_size(to);
    uint8_t *raw = calloc((size_t)m, ts > es ? ts : es);
    if (!raw) return;
    const bool is_float = et == GGUF_TYPE_FLOAT32 || et == GGUF_TYPE_FLOAT64;
    for (uint64_t i = 0; i < m; i++) {
        uint64_t src = i < n ? i : n - 1;
        double fx = is_float ? gguf_arr_float(v, src) : 0;
        int64_t ix = is_float ? (int64_t)(fx > -1e15 && fx < 1e15 ? fx : 0) : gguf_arr_int(v, src);
        if (op == MM_ARR_ELEM && i == arg % n) {
            int iop = e->b % MM_INT_N_OPS;
            if (iop == MM_INT_RETYPE || iop == MM_INT_DROP) iop = MM_INT_X2P31;
            ix = mm_int_apply(iop, ix, e->a, e->b, n_tokens);
            fx = NAN;
            if (!mm_fits(et, ix) && !is_float && et != GGUF_TYPE_BOOL) ix = mm_type_unsigned(et) ? -1 : INT32_MAX;
        }
        uint8_t *p = raw + i * ts;
        if (to == GGUF_TYPE_FLOAT32) {
            float f = is_float ? (float)fx : (float)ix;
            memcpy(p, &f, 4);
        } else if (to == GGUF_TYPE_FLOAT64) {
            double g = is_float ? fx : (double)ix;
            memcpy(p, &g, 8);
        } else if (to == GGUF_TYPE_BOOL) {
            p[0] = ix != 0;
        } else {
            uint64_t u = (uint64_t)ix;
            for (size_t k = 0; k < ts; k++) p[k] = (uint8_t)(u >> (8 * k));
        }
    }
    mm_say(d, " (%s, %llu elements); ", gguf_type_name(to), (unsigned long long)m);
    gguf_writer_add_array(w, key, to, raw, m);
    free(raw);
}

/* Adds tensor t mutated by e (NULL: as it is). */
static void mm_write_tensor(gguf_writer *w, const gguf_tensor *t, const mm_edit *e, mm_desc *d) {
    int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
    int n_dims = t->n_dims;
    uint32_t type = t->type;
    if (!e) {
        gguf_writer_add_tensor(w, t->name, type, n_dims, ne, t->data);
        return;
    }
    const int op = e->op % MM_TEN_N_OPS;
    mm_say(d, "tensor %s %s; ", t->name, mm_ten_op_names[op]);
    if (op == MM_TEN_DROP) return;
    if (op == MM_TEN_NE0) ne[0] += e->a % 3 - 1;
    if (op == MM_TEN_NE1) {
        if (n_dims < 2) n_dims = 2;
        ne[1] = e->a % 2 ? (ne[1] > 1 ? ne[1] / 2 : 1) : ne[1] * 2;
    }
    if (op == MM_TEN_TYPE) {
        static const uint32_t types[4] = {QTYPE_F32, QTYPE_F16, QTYPE_Q8_0, QTYPE_Q4_K};
        type = types[e->a % 4];
    }
    if (op == MM_TEN_DIM && n_dims < 4) ne[n_dims++] = 1 + e->a % 2;
    size_t row;
    int64_t rows = ne[1] * ne[2] * ne[3];
    if (ne[0] < 1 || !qtype_row_bytes(type, ne[0], &row) || rows < 1 || row * (size_t)rows > ((size_t)64 << 20)) {
        mm_say(d, "(not representable: kept); ");
        gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
        return;
    }
    size_t bytes = row * (size_t)rows;
    uint8_t *data = calloc(bytes ? bytes : 1, 1);
    if (!data) return;
    if (type == t->type) memcpy(data, t->data, bytes < t->n_bytes ? bytes : (size_t)t->n_bytes);
    gguf_writer_add_tensor(w, t->name, type, n_dims, ne, data);
    free(data);
}

/* Builds the file recipe r describes; *out (free with eddy_free) holds *size bytes.
 * d (may be NULL) receives a description. */
static eddy_status mm_build(const mm_recipe *r, uint8_t **out, uint64_t *size, mm_desc *d) {
    mm_desc scratch;
    if (!d) d = &scratch;
    d->len = 0;
    d->text[0] = '\0';
    const mm_base *b = &mm_bases[r->base];
    const gguf_file *f = b->f;
    mm_say(d, "%s: ", mm_base_files[r->base]);
    gguf_writer *w = gguf_writer_new(f->version, f->alignment);
    if (!w) return EDDY_ERR_NOMEM;
    for (int k = 0; k < r->n_edits; k++) /* named keys the file lacks come first */
        if (r->edits[k].target < 0) mm_write_kv(w, r->edits[k].name, NULL, &r->edits[k], b->n_tokens, d);
    for (int64_t i = 0; i < f->n_kv; i++) {
        const mm_edit *e = NULL;
        for (int k = 0; k < r->n_edits; k++)
            if (r->edits[k].target == i) e = &r->edits[k];
        if (e) mm_write_kv(w, f->kv[i].key, &f->kv[i].val, e, b->n_tokens, d);
        else gguf_writer_add_value(w, f->kv[i].key, &f->kv[i].val);
    }
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const mm_edit *e = NULL;
        for (int k = 0; k < r->n_edits; k++)
            if (r->edits[k].target == f->n_kv + i) e = &r->edits[k];
        mm_write_tensor(w, &f->tensors[i], e, d);
    }
    eddy_status s = gguf_writer_finish(w, out, size, NULL);
    gguf_writer_free(w);
    return s;
}

/* ==== The check ==== */

/* Loads the file (from memory, as eddy_model_load would from disk) and runs it:
 * EDDY_OK when it ran, else the refusal's status with its message in err. */
static eddy_status mm_run(const uint8_t *bytes, uint64_t size, eddy_error *err) {
    gguf_file *f;
    eddy_status s = gguf_open_memory(&f, bytes, size, "mutated.gguf", err);
    if (s != EDDY_OK) return s;
    eddy_model *m;
    if ((s = model_load_gguf(&m, f, err)) != EDDY_OK) return s;
    eddy_ctx *c = NULL;
    eddy_sampler *smp = NULL;
    float *logits = NULL;
    eddy_token *ids = NULL;
    const int64_t n_vocab = eddy_model_n_vocab(m);
    const eddy_vocab *v = eddy_model_vocab(m);
    /* the default context first (the training context, at most 4096 positions: sized from
     * the file), then a small one to run in */
    eddy_ctx_params p = {.n_ctx = 0, .n_threads = 1};
    if ((s = eddy_ctx_new(m, &p, &c, err)) != EDDY_OK) goto done;
    eddy_ctx_free(c);
    c = NULL;
    p.n_ctx = 16;
    if ((s = eddy_ctx_new(m, &p, &c, err)) != EDDY_OK) goto done;
    /* three tokens: the tokenizer's for a short text when there is one, else 0, 1, n_vocab - 1 */
    eddy_token toks[3] = {0, (eddy_token)(1 % n_vocab), (eddy_token)(n_vocab - 1)};
    if (v) {
        int64_t n_ids = 0;
        static const char text[] = "Hi, world! <|im_end|> \xe4\xbd\xa0\xe5\xa5\xbd";
        if ((s = eddy_tokenize(v, text, sizeof text - 1, EDDY_TOKENIZE_ADD_SPECIAL, &ids, &n_ids, err)) != EDDY_OK) goto done;
        for (int64_t i = 0; i < n_ids && i < 3; i++) toks[i] = ids[i];
        char *text_out;
        size_t len;
        if ((s = eddy_detokenize(v, toks, 3, 0, &text_out, &len, err)) != EDDY_OK) goto done;
        eddy_buffer_free(text_out);
    }
    logits = malloc((size_t)(3 * n_vocab) * sizeof *logits);
    if (!logits) {
        s = eddy_error_set(err, EDDY_ERR_NOMEM, "harness: out of memory");
        goto done;
    }
    if ((s = eddy_ctx_eval(c, toks, 3, logits, 1, err)) != EDDY_OK) goto done;
    if ((s = eddy_ctx_eval(c, toks, 1, logits, 0, err)) != EDDY_OK) goto done;
    eddy_sampler_params sp = eddy_sampler_default_params();
    sp.repeat_penalty = 1.1f;
    if ((s = eddy_sampler_new(&sp, n_vocab, &smp, err)) != EDDY_OK) goto done;
    eddy_token t = eddy_sampler_sample(smp, logits);
    if (t < 0 || t >= n_vocab) {
        s = eddy_error_set(err, EDDY_ERR_ARG, "harness: the sampler returned %d of %lld", t, (long long)n_vocab);
        goto done;
    }
    eddy_sampler_accept(smp, t);
    if (v) {
        eddy_ctx_reset(c);
        eddy_gen_stats st;
        s = eddy_generate(c, NULL, smp, toks, 3, 2, NULL, NULL, &st, err);
    }
done:
    eddy_buffer_free(ids);
    free(logits);
    eddy_sampler_free(smp);
    eddy_ctx_free(c);
    eddy_model_free(m);
    return s;
}

/* Builds and runs recipe r. Returns NULL when all is well, else what broke the rules
 * (a static buffer): a refusal that is empty, more than one line, or out of memory.
 * *status receives the run's status; d (not NULL) what the recipe did. */
static const char *mm_check(const mm_recipe *r, eddy_status *status, mm_desc *d, eddy_error *err) {
    static char why[1600];
    uint8_t *file;
    uint64_t size;
    *status = EDDY_OK;
    if (mm_build(r, &file, &size, d) != EDDY_OK) return NULL; /* the harness's own memory */
    err->msg[0] = '\0';
    eddy_status s = mm_run(file, size, err);
    eddy_free(file);
    *status = s;
    if (s == EDDY_OK) return NULL;
    if (!err->msg[0] || strchr(err->msg, '\n')) {
        snprintf(why, sizeof why, "%s: the refusal is not one line: \"%s\"", d->text, err->msg);
        return why;
    }
    if (s == EDDY_ERR_NOMEM) {
        snprintf(why, sizeof why, "%s: out of memory (an absurd size was believed): %s", d->text, err->msg);
        return why;
    }
    return NULL;
}

#endif
