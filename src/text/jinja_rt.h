/*
 * jinja_rt.h — what the two halves of the template renderer share (private to
 * src/text): the rendering context, the arguments of a call, and the helpers of
 * jinja_eval.c that the built-in tests, filters and methods of jinja_builtins.c use.
 * Every helper returns false (or NULL) after it set the context's error.
 */
#ifndef EDDY_TEXT_JINJA_RT_H
#define EDDY_TEXT_JINJA_RT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "text/jinja.h"

typedef struct frame frame;
struct frame {
    frame *parent;
    jv vars; /* dict */
};

typedef enum { FN_MACRO, FN_GLOBAL, FN_CYCLE } fn_kind;

struct jv_func {
    fn_kind kind;
    const jnode *macro;
    const char *name;
    jv self; /* FN_CYCLE: the loop index (int) */
};

typedef struct {
    jarena *a;
    eddy_error *err;
    eddy_status st;
    jbuf *out;
    frame *root;
    int ctl;        /* 1: break, 2: continue pending */
    int depth;      /* macro calls in progress */
    int64_t budget; /* evaluation steps left */
} jctx;

#define MAX_CALL_DEPTH 64
#define MAX_STEPS 5000000
#define MAX_MEMORY ((size_t)256 << 20)
#define MAX_OUTPUT ((size_t)64 << 20)
#define MAX_RANGE 1000000

typedef struct {
    jv *pos;
    int64_t n_pos;
    const char **kw_names;
    jv *kw;
    int64_t n_kw;
} jargs;

/* ==== jinja_eval.c ==== */

/* Sets the context's error, "chat template line N: ...", once; returns false. */
bool jrt_fail(jctx *c, eddy_status code, int line, const char *fmt, ...) EDDY_PRINTF(4, 5);
/* The error of an allocation that failed or went over MAX_MEMORY; returns false. */
bool jrt_oom(jctx *c);
/* Python's name of v's type, for messages. */
const char *jrt_type_name(jv v);
bool jrt_mkstr(jctx *c, const char *s, size_t n, jv *out);
/* Python's str(v) as a string value. */
bool jrt_to_str(jctx *c, jv v, jv *out);
/* Characters (not bytes) in s[0..n). */
int64_t jrt_u8_len(const char *s, size_t n);
/* The code point at byte i, and its length in bytes (U+FFFD and 1 for a bad byte). */
uint32_t jrt_u8_at(const char *s, size_t n, size_t i, int *len);
/* The first nd[0..nn) in h[0..hn), or NULL. */
const char *jrt_find_bytes(const char *h, size_t hn, const char *nd, size_t nn);
/* The items a for loop (or a filter) sees: list items, dict keys, characters. */
bool jrt_iter_items(jctx *c, int line, jv v, jv_list **out);
bool jrt_length_of(jctx *c, int line, jv v, int64_t *n);
/* obj[key]: a dict's or namespace's key, a list's item or a string's character (an index
 * below 0 counts from the end); anything else, or out of range, gives Undefined */
bool jrt_get_item(jctx *c, int line, jv obj, jv key, jv *out);
/* obj[lo:hi:st] of a list or string, with Python's bounds */
bool jrt_slice_of(jctx *c, int line, jv obj, jv lo, jv hi, jv st, jv *out);
bool jrt_is_numv(jv v);
double jrt_numf(jv v);
/* floats give 0: callers use it only when neither operand is a float */
int64_t jrt_numi(jv v);
/* Python's `needle in hay` */
bool jrt_contains(jctx *c, int line, jv needle, jv hay, bool *res);
/* a comparison as Python makes it; op: '=' ==, '!' !=, 'i' in, 'n' not in, '<', '>',
 * 'l' <=, 'g' >= */
bool jrt_compare(jctx *c, int line, int op, jv a, jv b, jv *out);
/* Argument i by position, or by keyword name, or def. */
jv jrt_arg(const jargs *a, int64_t i, const char *name, jv def);

/* ==== jinja_builtins.c ==== */

/* `v is name(args)` */
bool jrt_run_test(jctx *c, int line, const char *name, jv v, const jargs *a, bool *res);
/* `v | name(args)` */
bool jrt_apply_filter(jctx *c, int line, const char *name, jv v, const jargs *a, jv *out);
/* `self.name(args)` of a string or dict */
bool jrt_call_method(jctx *c, int line, const char *name, jv self, const jargs *a, jv *out);

#endif
