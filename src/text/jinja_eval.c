/*
 * jinja_eval.c — rendering a parsed chat template.
 *
 * Owns: scopes (a frame per loop iteration and per macro call, as Jinja has them),
 * expression semantics (Python's: truthiness, `and`/`or` returning an operand,
 * int/float arithmetic, str and list operators, comparisons), Jinja's Undefined
 * (prints as nothing, is falsy and empty, but using it in arithmetic or asking it
 * for an attribute is an error), calls of macros and the built-in globals, and
 * statements. Does not own parsing (jinja_parse.c), values (jvalue.c), or the
 * built-in tests, filters and methods (jinja_builtins.c).
 *
 * Text is UTF-8; lengths, indexes and slices count characters as Python does.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "text/jinja.h"
#include "text/jinja_rt.h"
#include "text/unicode.h"

/* ==== Errors ==== */

EDDY_PRINTF(4, 5)
bool jrt_fail(jctx *c, eddy_status code, int line, const char *fmt, ...) {
    if (c->st != EDDY_OK) return false;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (code == EDDY_ERR_UNSUPPORTED)
        c->st = eddy_error_set(c->err, code, "chat template line %d: %s (eddy's template engine does not support it; "
                                             "pass another template with --chat-template)", line, msg);
    else
        c->st = eddy_error_set(c->err, code, "chat template line %d: %s", line, msg);
    return false;
}

bool jrt_oom(jctx *c) {
    if (c->st != EDDY_OK) return false;
    if (jarena_over_limit(c->a))
        c->st = eddy_error_set(c->err, EDDY_ERR_ARG, "the chat template needs more than %zu MiB to render", MAX_MEMORY >> 20);
    else
        c->st = eddy_error_set(c->err, EDDY_ERR_NOMEM, "out of memory rendering the chat template");
    return false;
}

const char *jrt_type_name(jv v) {
    switch (v.t) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_FUNC: return "function";
    }
    return "?";
}

static jv undef_named(const char *name) {
    jv v = jv_undef();
    v.str.s = name; /* kept for messages */
    return v;
}

static bool undefined_error(jctx *c, int line, jv v) {
    if (v.str.s) return jrt_fail(c, EDDY_ERR_ARG, line, "'%s' is undefined", v.str.s);
    return jrt_fail(c, EDDY_ERR_ARG, line, "a value used here is undefined");
}

bool jrt_mkstr(jctx *c, const char *s, size_t n, jv *out) {
    *out = jv_str_copy(c->a, s, n);
    return out->t == JV_STR || jrt_oom(c);
}

/* Python's str(v) as a string value. */
bool jrt_to_str(jctx *c, jv v, jv *out) {
    if (v.t == JV_STR) {
        *out = v;
        return true;
    }
    jbuf b = {0};
    jv_str_into(&b, v);
    bool ok = !b.oom && jrt_mkstr(c, b.p ? b.p : "", b.n, out);
    jbuf_free(&b);
    return ok || jrt_oom(c);
}

/* ==== Frames ==== */

static bool frame_set(jctx *c, frame *f, const char *name, jv v) {
    jv key = jv_strn(name, strlen(name));
    return jv_dict_set(c->a, f->vars, key, v) || jrt_oom(c);
}

static jv frame_get(const frame *f, const char *name, size_t n) {
    for (; f; f = f->parent) {
        jv v = jv_dict_get(f->vars, name, n);
        if (v.t != JV_UNDEF) return v;
    }
    return undef_named(name);
}

static frame *frame_new(jctx *c, frame *parent) {
    frame *f = jarena_alloc(c->a, sizeof *f);
    if (!f) return jrt_oom(c), NULL;
    f->parent = parent;
    f->vars = jv_dict_new(c->a);
    if (f->vars.t != JV_DICT) return jrt_oom(c), NULL;
    return f;
}

/* ==== UTF-8 strings as Python sees them ==== */

int64_t jrt_u8_len(const char *s, size_t n) {
    int64_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

/* Byte offsets of the characters: offs[0..nch] (offs[nch] == n). */
static int64_t *u8_offsets(jctx *c, const char *s, size_t n, int64_t *nch) {
    int64_t k = jrt_u8_len(s, n);
    int64_t *offs = jarena_alloc(c->a, (size_t)(k + 1) * sizeof *offs);
    if (!offs) return jrt_oom(c), NULL;
    int64_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) offs[j++] = (int64_t)i;
    offs[k] = (int64_t)n;
    *nch = k;
    return offs;
}

uint32_t jrt_u8_at(const char *s, size_t n, size_t i, int *len) {
    uint32_t cp;
    int k = utf8_decode((const uint8_t *)s + i, n - i, &cp);
    if (k <= 0) {
        *len = 1;
        return 0xFFFD;
    }
    *len = k;
    return cp;
}

const char *jrt_find_bytes(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0) return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && !memcmp(h + i, nd, nn)) return h + i;
    return NULL;
}

/* ==== Values: iteration, length, lookups ==== */

/* The items a for loop (or a filter) sees: list items, dict keys, characters. */
bool jrt_iter_items(jctx *c, int line, jv v, jv_list **out) {
    static jv_list empty;
    switch (v.t) {
    case JV_LIST: *out = v.list; return true;
    case JV_UNDEF: *out = &empty; return true;
    case JV_DICT: {
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return jrt_oom(c);
        for (int64_t i = 0; i < v.dict->n; i++)
            if (!jv_list_push(c->a, l, v.dict->keys[i])) return jrt_oom(c);
        *out = l.list;
        return true;
    }
    case JV_STR: {
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return jrt_oom(c);
        for (size_t i = 0; i < v.str.n;) {
            int k;
            jrt_u8_at(v.str.s, v.str.n, i, &k);
            if (!jv_list_push(c->a, l, jv_strn(v.str.s + i, (size_t)k))) return jrt_oom(c);
            i += (size_t)k;
        }
        *out = l.list;
        return true;
    }
    default: return jrt_fail(c, EDDY_ERR_ARG, line, "'%s' object is not iterable", jrt_type_name(v));
    }
}

bool jrt_length_of(jctx *c, int line, jv v, int64_t *n) {
    switch (v.t) {
    case JV_STR: *n = jrt_u8_len(v.str.s, v.str.n); return true;
    case JV_LIST: *n = v.list->n; return true;
    case JV_DICT: *n = v.dict->n; return true;
    case JV_UNDEF: *n = 0; return true;
    default: return jrt_fail(c, EDDY_ERR_ARG, line, "object of type '%s' has no len()", jrt_type_name(v));
    }
}

/* obj[key] with Python's indexing (negative indexes count from the end). */
bool jrt_get_item(jctx *c, int line, jv obj, jv key, jv *out) {
    *out = jv_undef();
    if (obj.t == JV_UNDEF) return undefined_error(c, line, obj);
    if (obj.t == JV_DICT || obj.t == JV_NS) {
        *out = jv_dict_getv(obj, key);
        return true;
    }
    if ((obj.t == JV_LIST || obj.t == JV_STR) && (key.t == JV_INT || key.t == JV_BOOL)) {
        int64_t i = key.t == JV_INT ? key.i : key.b;
        if (obj.t == JV_LIST) {
            if (i < 0) i += obj.list->n;
            if (i >= 0 && i < obj.list->n) *out = obj.list->items[i];
            return true;
        }
        int64_t nch;
        int64_t *offs = u8_offsets(c, obj.str.s, obj.str.n, &nch);
        if (!offs) return false;
        if (i < 0) i += nch;
        if (i >= 0 && i < nch) *out = jv_strn(obj.str.s + offs[i], (size_t)(offs[i + 1] - offs[i]));
        return true;
    }
    return true; /* anything else: undefined, as Jinja's getitem gives */
}

static const char *const dict_methods[] = {"items", "keys", "values", "get"};
static const char *const str_methods[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith",
                                          "upper", "lower", "title", "capitalize", "replace", "find", "rfind",
                                          "count", "join", "splitlines", "isdigit", "isalpha", "isspace", "isalnum",
                                          "isupper", "islower", "index", "format"};

static bool name_in(const char *name, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, list[i])) return true;
    return false;
}

/* obj.name: attributes first (methods of str and dict), then items. */
static bool get_attr(jctx *c, int line, jv obj, const char *name, jv *out) {
    *out = undef_named(name);
    if (obj.t == JV_UNDEF) return undefined_error(c, line, obj);
    if ((obj.t == JV_DICT && name_in(name, dict_methods, 4)) ||
        (obj.t == JV_STR && name_in(name, str_methods, sizeof str_methods / sizeof str_methods[0]))) {
        jv_func *fn = jarena_alloc(c->a, sizeof *fn);
        if (!fn) return jrt_oom(c);
        fn->kind = FN_GLOBAL; /* a bound method: name + self */
        fn->name = name;
        fn->self = obj;
        out->t = JV_FUNC;
        out->fn = fn;
        return true;
    }
    if (obj.t == JV_DICT || obj.t == JV_NS) {
        jv v = jv_dict_get(obj, name, strlen(name));
        if (v.t != JV_UNDEF) *out = v;
    }
    return true;
}

bool jrt_slice_of(jctx *c, int line, jv obj, jv lo, jv hi, jv st, jv *out) {
    int64_t n;
    int64_t *offs = NULL;
    if (obj.t == JV_LIST) n = obj.list->n;
    else if (obj.t == JV_STR) {
        if (!(offs = u8_offsets(c, obj.str.s, obj.str.n, &n))) return false;
    } else if (obj.t == JV_UNDEF) return undefined_error(c, line, obj);
    else return jrt_fail(c, EDDY_ERR_ARG, line, "'%s' object is not subscriptable", jrt_type_name(obj));
    for (int k = 0; k < 3; k++) {
        jv x = k == 0 ? lo : k == 1 ? hi : st;
        if (x.t != JV_INT && x.t != JV_NONE && x.t != JV_UNDEF)
            return jrt_fail(c, EDDY_ERR_ARG, line, "slice indices must be integers or None");
    }
    int64_t step = st.t == JV_INT ? st.i : 1;
    if (step == 0) return jrt_fail(c, EDDY_ERR_ARG, line, "slice step cannot be zero");
    int64_t a, b;
    if (step > 0) {
        a = lo.t == JV_INT ? lo.i : 0;
        b = hi.t == JV_INT ? hi.i : n;
        if (a < 0) a = a + n < 0 ? 0 : a + n;
        if (b < 0) b = b + n < 0 ? 0 : b + n;
        if (a > n) a = n;
        if (b > n) b = n;
    } else {
        a = lo.t == JV_INT ? lo.i : n - 1;
        b = hi.t == JV_INT ? hi.i : -1 - n; /* "before the start" */
        if (a < 0) a = a + n < 0 ? -1 : a + n;
        if (a >= n) a = n - 1;
        if (hi.t == JV_INT) {
            if (b < 0) b = b + n < 0 ? -1 : b + n;
            if (b >= n) b = n - 1;
        } else {
            b = -1;
        }
    }
    if (obj.t == JV_LIST) {
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return jrt_oom(c);
        for (int64_t i = a; step > 0 ? i < b : i > b; i += step)
            if (!jv_list_push(c->a, l, obj.list->items[i])) return jrt_oom(c);
        *out = l;
        return true;
    }
    jbuf sb = {0};
    for (int64_t i = a; step > 0 ? i < b : i > b; i += step)
        jbuf_add(&sb, obj.str.s + offs[i], (size_t)(offs[i + 1] - offs[i]));
    bool ok = !sb.oom && jrt_mkstr(c, sb.p ? sb.p : "", sb.n, out);
    jbuf_free(&sb);
    return ok || jrt_oom(c);
}

/* ==== Operators ==== */

bool jrt_is_numv(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
double jrt_numf(jv v) { return v.t == JV_FLOAT ? v.f : v.t == JV_INT ? (double)v.i : (double)v.b; }
/* floats give 0: callers use numi only when neither operand is a float */
int64_t jrt_numi(jv v) { return v.t == JV_INT ? v.i : v.t == JV_BOOL ? (int64_t)v.b : 0; }

static bool concat_str(jctx *c, jv a, jv b, jv *out) {
    char *p = jarena_alloc(c->a, a.str.n + b.str.n + 1);
    if (!p) return jrt_oom(c);
    if (a.str.n) memcpy(p, a.str.s, a.str.n);
    if (b.str.n) memcpy(p + a.str.n, b.str.s, b.str.n);
    *out = jv_strn(p, a.str.n + b.str.n);
    return true;
}

static bool binop(jctx *c, int line, int op, jv a, jv b, jv *out) {
    if (op == '~') {
        jv sa, sb;
        return jrt_to_str(c, a, &sa) && jrt_to_str(c, b, &sb) && concat_str(c, sa, sb, out);
    }
    if (a.t == JV_UNDEF) return undefined_error(c, line, a);
    if (b.t == JV_UNDEF) return undefined_error(c, line, b);
    if (op == '+' && a.t == JV_STR && b.t == JV_STR) return concat_str(c, a, b, out);
    if (op == '+' && a.t == JV_LIST && b.t == JV_LIST) {
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return jrt_oom(c);
        for (int64_t i = 0; i < a.list->n; i++)
            if (!jv_list_push(c->a, l, a.list->items[i])) return jrt_oom(c);
        for (int64_t i = 0; i < b.list->n; i++)
            if (!jv_list_push(c->a, l, b.list->items[i])) return jrt_oom(c);
        *out = l;
        return true;
    }
    if (op == '*' && ((a.t == JV_STR && b.t == JV_INT) || (a.t == JV_INT && b.t == JV_STR))) {
        jv s = a.t == JV_STR ? a : b;
        int64_t k = a.t == JV_INT ? a.i : b.i;
        if (k < 0) k = 0;
        if (s.str.n && (uint64_t)k > MAX_OUTPUT / s.str.n) return jrt_fail(c, EDDY_ERR_ARG, line, "string too long");
        char *p = jarena_alloc(c->a, s.str.n * (size_t)k + 1);
        if (!p) return jrt_oom(c);
        for (int64_t i = 0; i < k; i++) memcpy(p + (size_t)i * s.str.n, s.str.s, s.str.n);
        *out = jv_strn(p, s.str.n * (size_t)k);
        return true;
    }
    if (op == '%' && a.t == JV_STR) { /* printf-style formatting: %s %d %i %r %% */
        jv_list one = {&b, 1, 1, true}, *args = b.t == JV_LIST ? b.list : &one;
        jbuf r = {0};
        int64_t k = 0;
        for (size_t i = 0; i < a.str.n; i++) {
            char ch = a.str.s[i];
            if (ch != '%' || i + 1 >= a.str.n) {
                jbuf_addc(&r, ch);
                continue;
            }
            char f = a.str.s[++i];
            if (f == '%') {
                jbuf_addc(&r, '%');
                continue;
            }
            if ((f != 's' && f != 'd' && f != 'i' && f != 'r') || k >= args->n) {
                jbuf_free(&r);
                return jrt_fail(c, EDDY_ERR_UNSUPPORTED, line, "this %% format");
            }
            jv x = args->items[k++];
            if (f == 'r') jv_repr_into(&r, x);
            else if (f == 's') jv_str_into(&r, x);
            else if (jrt_is_numv(x)) jv_str_into(&r, jv_int(x.t == JV_FLOAT ? (int64_t)x.f : jrt_numi(x)));
            else {
                jbuf_free(&r);
                return jrt_fail(c, EDDY_ERR_ARG, line, "%%d format: a number is required");
            }
        }
        bool ok = !r.oom && jrt_mkstr(c, r.p ? r.p : "", r.n, out);
        jbuf_free(&r);
        return ok || jrt_oom(c);
    }
    if (!jrt_is_numv(a) || !jrt_is_numv(b))
        return jrt_fail(c, EDDY_ERR_ARG, line, "unsupported operand types for %c: '%s' and '%s'",
                        op == 'D' ? '/' : op == 'P' ? '*' : op, jrt_type_name(a), jrt_type_name(b));
    bool fl = a.t == JV_FLOAT || b.t == JV_FLOAT;
    int64_t x = jrt_numi(a), y = jrt_numi(b), r;
    switch (op) {
    case '+':
        if (!fl && !__builtin_add_overflow(x, y, &r)) return *out = jv_int(r), true;
        *out = jv_float(jrt_numf(a) + jrt_numf(b));
        return true;
    case '-':
        if (!fl && !__builtin_sub_overflow(x, y, &r)) return *out = jv_int(r), true;
        *out = jv_float(jrt_numf(a) - jrt_numf(b));
        return true;
    case '*':
        if (!fl && !__builtin_mul_overflow(x, y, &r)) return *out = jv_int(r), true;
        *out = jv_float(jrt_numf(a) * jrt_numf(b));
        return true;
    case '/':
        if (jrt_numf(b) == 0) return jrt_fail(c, EDDY_ERR_ARG, line, "division by zero");
        *out = jv_float(jrt_numf(a) / jrt_numf(b));
        return true;
    case 'D':
    case '%':
        if (jrt_numf(b) == 0) return jrt_fail(c, EDDY_ERR_ARG, line, "integer division or modulo by zero");
        if (!fl) {
            if (x == INT64_MIN && y == -1) return *out = jv_float(op == 'D' ? -(double)x : 0.0), true;
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) q--, m += y; /* floor, as Python */
            *out = jv_int(op == 'D' ? q : m);
        } else {
            double q = floor(jrt_numf(a) / jrt_numf(b));
            *out = jv_float(op == 'D' ? q : jrt_numf(a) - q * jrt_numf(b));
        }
        return true;
    case 'P':
        if (!fl && y >= 0) {
            int64_t acc = 1;
            bool over = false;
            for (int64_t i = 0; i < y && !over; i++) over = __builtin_mul_overflow(acc, x, &acc);
            if (!over) return *out = jv_int(acc), true;
        }
        *out = jv_float(pow(jrt_numf(a), jrt_numf(b)));
        return true;
    }
    return jrt_fail(c, EDDY_ERR_ARG, line, "bad operator");
}

static int cmp_str(jv a, jv b) {
    size_t n = a.str.n < b.str.n ? a.str.n : b.str.n;
    int r = n ? memcmp(a.str.s, b.str.s, n) : 0;
    return r ? r : (a.str.n > b.str.n) - (a.str.n < b.str.n);
}

bool jrt_contains(jctx *c, int line, jv needle, jv hay, bool *res) {
    *res = false;
    switch (hay.t) {
    case JV_STR:
        if (needle.t != JV_STR)
            return jrt_fail(c, EDDY_ERR_ARG, line, "'in <string>' requires string as left operand, not %s", jrt_type_name(needle));
        *res = jrt_find_bytes(hay.str.s, hay.str.n, needle.str.s, needle.str.n) != NULL;
        return true;
    case JV_LIST:
        for (int64_t i = 0; i < hay.list->n && !*res; i++) *res = jv_equal(needle, hay.list->items[i]);
        return true;
    case JV_DICT: case JV_NS: *res = jv_dict_getv(hay, needle).t != JV_UNDEF; return true;
    case JV_UNDEF: return true;
    default: return jrt_fail(c, EDDY_ERR_ARG, line, "argument of type '%s' is not iterable", jrt_type_name(hay));
    }
}

bool jrt_compare(jctx *c, int line, int op, jv a, jv b, jv *out) {
    bool r;
    switch (op) {
    case '=': r = jv_equal(a, b); break;
    case '!': r = !jv_equal(a, b); break;
    case 'i': if (!jrt_contains(c, line, a, b, &r)) return false; break;
    case 'n': if (!jrt_contains(c, line, a, b, &r)) return false; r = !r; break;
    default: {
        int s;
        if (jrt_is_numv(a) && jrt_is_numv(b)) {
            if (a.t != JV_FLOAT && b.t != JV_FLOAT) s = (jrt_numi(a) > jrt_numi(b)) - (jrt_numi(a) < jrt_numi(b));
            else s = (jrt_numf(a) > jrt_numf(b)) - (jrt_numf(a) < jrt_numf(b));
        } else if (a.t == JV_STR && b.t == JV_STR) {
            s = cmp_str(a, b);
        } else {
            if (a.t == JV_UNDEF) return undefined_error(c, line, a);
            if (b.t == JV_UNDEF) return undefined_error(c, line, b);
            return jrt_fail(c, EDDY_ERR_ARG, line, "'%s' not supported between '%s' and '%s'",
                            op == '<' ? "<" : op == '>' ? ">" : op == 'l' ? "<=" : ">=", jrt_type_name(a),
                            jrt_type_name(b));
        }
        r = op == '<' ? s < 0 : op == '>' ? s > 0 : op == 'l' ? s <= 0 : s >= 0;
    }
    }
    *out = jv_bool(r);
    return true;
}

/* ==== Calls: arguments ==== */


static bool eval(jctx *c, frame *f, const jnode *e, jv *out);

static bool eval_args(jctx *c, frame *f, const jnode *call, jargs *a) {
    memset(a, 0, sizeof *a);
    if (call->n_kids == 0) return true;
    a->pos = jarena_alloc(c->a, (size_t)call->n_kids * sizeof(jv));
    a->kw = jarena_alloc(c->a, (size_t)call->n_kids * sizeof(jv));
    a->kw_names = jarena_alloc(c->a, (size_t)call->n_kids * sizeof(char *));
    if (!a->pos || !a->kw || !a->kw_names) return jrt_oom(c);
    for (int64_t i = 0; i < call->n_kids; i++) {
        jv v;
        if (!eval(c, f, call->kids[i], &v)) return false;
        if (call->kw && call->kw[i]) {
            a->kw_names[a->n_kw] = call->kw[i];
            a->kw[a->n_kw++] = v;
        } else {
            a->pos[a->n_pos++] = v;
        }
    }
    return true;
}

/* Argument i by position, or by keyword name, or def. */
jv jrt_arg(const jargs *a, int64_t i, const char *name, jv def) {
    if (i >= 0 && i < a->n_pos) return a->pos[i];
    for (int64_t k = 0; name && k < a->n_kw; k++)
        if (!strcmp(a->kw_names[k], name)) return a->kw[k];
    return def;
}

/* ==== Calls ==== */

static bool exec_body(jctx *c, frame *f, jnode *const *body, int64_t n);

static bool call_macro(jctx *c, int line, const jnode *m, const jargs *a, jv *out) {
    if (c->depth >= MAX_CALL_DEPTH) return jrt_fail(c, EDDY_ERR_ARG, line, "macros nested too deeply");
    frame *f = frame_new(c, c->root);
    if (!f) return false;
    if (a->n_pos > m->n_kids) return jrt_fail(c, EDDY_ERR_ARG, line, "macro '%s' takes %lld arguments", m->s, (long long)m->n_kids);
    for (int64_t k = 0; k < a->n_kw; k++) {
        bool known = false;
        for (int64_t i = 0; i < m->n_kids; i++) known |= !strcmp(m->kids[i]->s, a->kw_names[k]);
        if (!known) return jrt_fail(c, EDDY_ERR_ARG, line, "macro '%s' has no parameter '%s'", m->s, a->kw_names[k]);
    }
    for (int64_t i = 0; i < m->n_kids; i++) {
        const jnode *p = m->kids[i];
        jv v = jrt_arg(a, i, p->s, jv_undef());
        if (v.t == JV_UNDEF && p->a && !eval(c, f, p->a, &v)) return false;
        if (v.t == JV_UNDEF) v = undef_named(p->s);
        if (!frame_set(c, f, p->s, v)) return false;
    }
    jbuf *saved = c->out, body = {0};
    body.limit = MAX_OUTPUT;
    c->out = &body;
    c->depth++;
    bool ok = exec_body(c, f, m->body, m->n_body);
    c->depth--;
    c->out = saved;
    if (ok && body.oom) ok = jrt_oom(c);
    if (ok && body.over_limit) ok = jrt_fail(c, EDDY_ERR_ARG, line, "the template's output is too large");
    if (ok) ok = jrt_mkstr(c, body.p ? body.p : "", body.n, out);
    jbuf_free(&body);
    return ok;
}

static bool call_global(jctx *c, int line, const char *name, const jargs *a, jv *out) {
    if (!strcmp(name, "raise_exception")) {
        jv msg;
        if (!jrt_to_str(c, jrt_arg(a, 0, NULL, jv_strn("", 0)), &msg)) return false;
        return jrt_fail(c, EDDY_ERR_ARG, line, "the template refused the input: %.*s", (int)(msg.str.n > 300 ? 300 : msg.str.n),
                        msg.str.s);
    }
    if (!strcmp(name, "range")) {
        int64_t v[3] = {0, 0, 1};
        if (a->n_pos < 1 || a->n_pos > 3) return jrt_fail(c, EDDY_ERR_ARG, line, "range takes 1 to 3 arguments");
        for (int64_t i = 0; i < a->n_pos; i++) {
            if (a->pos[i].t != JV_INT) return jrt_fail(c, EDDY_ERR_ARG, line, "range needs integers");
        }
        if (a->n_pos == 1) v[1] = a->pos[0].i;
        else v[0] = a->pos[0].i, v[1] = a->pos[1].i;
        if (a->n_pos == 3) v[2] = a->pos[2].i;
        if (v[2] == 0) return jrt_fail(c, EDDY_ERR_ARG, line, "range step cannot be zero");
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return jrt_oom(c);
        int64_t count = 0;
        for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2]) {
            if (++count > MAX_RANGE) return jrt_fail(c, EDDY_ERR_ARG, line, "range too large");
            if (!jv_list_push(c->a, l, jv_int(i))) return jrt_oom(c);
        }
        *out = l;
        return true;
    }
    if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
        jv d = jv_dict_new(c->a);
        if (d.t != JV_DICT) return jrt_oom(c);
        if (a->n_pos == 1 && a->pos[0].t == JV_DICT) {
            for (int64_t i = 0; i < a->pos[0].dict->n; i++)
                if (!jv_dict_set(c->a, d, a->pos[0].dict->keys[i], a->pos[0].dict->vals[i])) return jrt_oom(c);
        } else if (a->n_pos) {
            return jrt_fail(c, EDDY_ERR_UNSUPPORTED, line, "%s() with positional arguments", name);
        }
        for (int64_t k = 0; k < a->n_kw; k++) {
            jv key = jv_strn(a->kw_names[k], strlen(a->kw_names[k]));
            if (!jv_dict_set(c->a, d, key, a->kw[k])) return jrt_oom(c);
        }
        if (name[0] == 'n') d.t = JV_NS;
        *out = d;
        return true;
    }
    if (!strcmp(name, "strftime_now")) {
        jv fmt = jrt_arg(a, 0, NULL, jv_undef());
        if (fmt.t != JV_STR) return jrt_fail(c, EDDY_ERR_ARG, line, "strftime_now needs a format string");
        char f[128], res[256];
        size_t n = fmt.str.n < sizeof f - 1 ? fmt.str.n : sizeof f - 1;
        memcpy(f, fmt.str.s, n);
        f[n] = '\0';
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        size_t len = strftime(res, sizeof res, f, &tmv);
        return jrt_mkstr(c, res, len, out);
    }
    return jrt_fail(c, EDDY_ERR_UNSUPPORTED, line, "the function '%s'", name);
}

static bool call_value(jctx *c, int line, jv fn, const jargs *a, jv *out) {
    if (fn.t == JV_UNDEF) return undefined_error(c, line, fn);
    if (fn.t != JV_FUNC) return jrt_fail(c, EDDY_ERR_ARG, line, "'%s' object is not callable", jrt_type_name(fn));
    switch (fn.fn->kind) {
    case FN_MACRO: return call_macro(c, line, fn.fn->macro, a, out);
    case FN_CYCLE: {
        if (a->n_pos == 0) return jrt_fail(c, EDDY_ERR_ARG, line, "no items for cycling given");
        *out = a->pos[fn.fn->self.i % a->n_pos];
        return true;
    }
    case FN_GLOBAL:
        if (fn.fn->self.t != JV_UNDEF) return jrt_call_method(c, line, fn.fn->name, fn.fn->self, a, out);
        return call_global(c, line, fn.fn->name, a, out);
    }
    return false;
}

/* ==== Expressions ==== */

static bool eval(jctx *c, frame *f, const jnode *e, jv *out) {
    if (--c->budget < 0) return jrt_fail(c, EDDY_ERR_ARG, e->line, "the template takes too long to render");
    switch (e->kind) {
    case JN_LIT: *out = e->lit; return true;
    case JN_NAME: *out = frame_get(f, e->s, e->s_len); return true;
    case JN_LISTLIT: case JN_TUPLE: {
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return jrt_oom(c);
        l.list->tuple = e->kind == JN_TUPLE;
        for (int64_t i = 0; i < e->n_kids; i++) {
            jv v;
            if (!eval(c, f, e->kids[i], &v)) return false;
            if (!jv_list_push(c->a, l, v)) return jrt_oom(c);
        }
        *out = l;
        return true;
    }
    case JN_DICTLIT: {
        jv d = jv_dict_new(c->a);
        if (d.t != JV_DICT) return jrt_oom(c);
        for (int64_t i = 0; i + 1 < e->n_kids; i += 2) {
            jv k, v;
            if (!eval(c, f, e->kids[i], &k) || !eval(c, f, e->kids[i + 1], &v)) return false;
            if (!jv_dict_set(c->a, d, k, v)) return jrt_oom(c);
        }
        *out = d;
        return true;
    }
    case JN_ATTR: {
        jv obj;
        return eval(c, f, e->a, &obj) && get_attr(c, e->line, obj, e->s, out);
    }
    case JN_ITEM: {
        jv obj, key;
        if (!eval(c, f, e->a, &obj) || !eval(c, f, e->b, &key)) return false;
        if (!jrt_get_item(c, e->line, obj, key, out)) return false;
        if (out->t == JV_UNDEF && key.t == JV_STR && (obj.t == JV_DICT || obj.t == JV_STR)) {
            /* obj['name'] falls back to the attribute, as Jinja's getitem does */
            char *nm = jarena_strdup(c->a, key.str.s, key.str.n);
            if (!nm) return jrt_oom(c);
            return get_attr(c, e->line, obj, nm, out);
        }
        return true;
    }
    case JN_SLICE: {
        jv obj, parts[3];
        if (!eval(c, f, e->a, &obj)) return false;
        for (int k = 0; k < 3; k++) {
            parts[k] = jv_none();
            if (e->kids[k] && !eval(c, f, e->kids[k], &parts[k])) return false;
        }
        return jrt_slice_of(c, e->line, obj, parts[0], parts[1], parts[2], out);
    }
    case JN_CALL: {
        jv fn;
        jargs a;
        if (!eval(c, f, e->a, &fn) || !eval_args(c, f, e, &a)) return false;
        return call_value(c, e->line, fn, &a, out);
    }
    case JN_FILTER: {
        jv v;
        jargs a;
        if (!eval(c, f, e->a, &v) || !eval_args(c, f, e, &a)) return false;
        return jrt_apply_filter(c, e->line, e->s, v, &a, out);
    }
    case JN_TEST: {
        jv v;
        jargs a;
        bool r;
        if (!eval(c, f, e->a, &v) || !eval_args(c, f, e, &a) || !jrt_run_test(c, e->line, e->s, v, &a, &r))
            return false;
        *out = jv_bool(e->op ? !r : r);
        return true;
    }
    case JN_UNARY: {
        jv v;
        if (!eval(c, f, e->a, &v)) return false;
        if (e->op == '!') {
            *out = jv_bool(!jv_truthy(v));
            return true;
        }
        if (v.t == JV_UNDEF) return undefined_error(c, e->line, v);
        if (!jrt_is_numv(v)) return jrt_fail(c, EDDY_ERR_ARG, e->line, "bad operand type for unary %c: '%s'", e->op, jrt_type_name(v));
        if (e->op == '+') *out = v.t == JV_BOOL ? jv_int(v.b) : v;
        else *out = v.t == JV_FLOAT ? jv_float(-v.f) : jv_int(jrt_numi(v) == INT64_MIN ? INT64_MIN : -jrt_numi(v));
        return true;
    }
    case JN_BINARY: {
        jv a, b;
        return eval(c, f, e->a, &a) && eval(c, f, e->b, &b) && binop(c, e->line, e->op, a, b, out);
    }
    case JN_COMPARE: {
        jv a, b;
        return eval(c, f, e->a, &a) && eval(c, f, e->b, &b) && jrt_compare(c, e->line, e->op, a, b, out);
    }
    case JN_AND: case JN_OR: {
        jv a;
        if (!eval(c, f, e->a, &a)) return false;
        if (jv_truthy(a) == (e->kind == JN_OR)) {
            *out = a;
            return true;
        }
        return eval(c, f, e->b, out);
    }
    case JN_COND: {
        jv cond;
        if (!eval(c, f, e->a, &cond)) return false;
        if (jv_truthy(cond)) return eval(c, f, e->b, out);
        if (e->c) return eval(c, f, e->c, out);
        *out = jv_undef();
        return true;
    }
    default: return jrt_fail(c, EDDY_ERR_ARG, e->line, "a statement where an expression belongs");
    }
}

/* ==== Statements ==== */

static bool assign(jctx *c, frame *f, const jnode *target_holder, jv v) {
    if (target_holder->n_kids == 1) return frame_set(c, f, target_holder->kids[0]->s, v);
    if (v.t != JV_LIST || v.list->n != target_holder->n_kids)
        return jrt_fail(c, EDDY_ERR_ARG, target_holder->line, "cannot unpack into %lld names", (long long)target_holder->n_kids);
    for (int64_t i = 0; i < target_holder->n_kids; i++)
        if (!frame_set(c, f, target_holder->kids[i]->s, v.list->items[i])) return false;
    return true;
}

static bool exec_for(jctx *c, frame *f, const jnode *s) {
    jv it;
    jv_list *items;
    if (!eval(c, f, s->a, &it) || !jrt_iter_items(c, s->line, it, &items)) return false;
    /* the loop's "if" filters the items first (loop.length counts what is left) */
    jv_list *kept = items;
    if (s->b) {
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return jrt_oom(c);
        for (int64_t i = 0; i < items->n; i++) {
            frame *tf = frame_new(c, f);
            jv cond;
            if (!tf || !assign(c, tf, s, items->items[i]) || !eval(c, tf, s->b, &cond)) return false;
            if (jv_truthy(cond) && !jv_list_push(c->a, l, items->items[i])) return jrt_oom(c);
        }
        kept = l.list;
    }
    int64_t n = kept->n;
    for (int64_t i = 0; i < n; i++) {
        frame *lf = frame_new(c, f);
        if (!lf || !assign(c, lf, s, kept->items[i])) return false;
        jv loop = jv_dict_new(c->a);
        jv_func *cyc = jarena_alloc(c->a, sizeof *cyc);
        if (loop.t != JV_DICT || !cyc) return jrt_oom(c);
        cyc->kind = FN_CYCLE;
        cyc->self = jv_int(i);
        jv cycv = {JV_FUNC, {.fn = cyc}};
        struct {
            const char *k;
            jv v;
        } fields[] = {
            {"index", jv_int(i + 1)}, {"index0", jv_int(i)}, {"revindex", jv_int(n - i)}, {"revindex0", jv_int(n - i - 1)},
            {"first", jv_bool(i == 0)}, {"last", jv_bool(i == n - 1)}, {"length", jv_int(n)},
            {"previtem", i > 0 ? kept->items[i - 1] : undef_named("loop.previtem")},
            {"nextitem", i + 1 < n ? kept->items[i + 1] : undef_named("loop.nextitem")},
            {"depth", jv_int(1)}, {"depth0", jv_int(0)}, {"cycle", cycv},
        };
        for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++)
            if (!jv_dict_set(c->a, loop, jv_strn(fields[k].k, strlen(fields[k].k)), fields[k].v)) return jrt_oom(c);
        if (!frame_set(c, lf, "loop", loop) || !exec_body(c, lf, s->body, s->n_body)) return false;
        if (c->ctl == 1) {
            c->ctl = 0;
            break;
        }
        c->ctl = 0;
    }
    if (n == 0 && s->n_els) return exec_body(c, f, s->els, s->n_els);
    return true;
}

static bool exec_stmt(jctx *c, frame *f, const jnode *s) {
    if (--c->budget < 0) return jrt_fail(c, EDDY_ERR_ARG, s->line, "the template takes too long to render");
    switch (s->kind) {
    case JN_DATA: jbuf_add(c->out, s->s, s->s_len); return true;
    case JN_OUTPUT: {
        jv v;
        if (!eval(c, f, s->a, &v)) return false;
        jv_str_into(c->out, v);
        return true;
    }
    case JN_IF: {
        jv cond;
        if (!eval(c, f, s->a, &cond)) return false;
        return jv_truthy(cond) ? exec_body(c, f, s->body, s->n_body) : exec_body(c, f, s->els, s->n_els);
    }
    case JN_FOR: return exec_for(c, f, s);
    case JN_SET: {
        jv v;
        if (!eval(c, f, s->a, &v)) return false;
        if (!s->b) return assign(c, f, s, v);
        jv ns = frame_get(f, s->b->a->s, s->b->a->s_len);
        if (ns.t != JV_NS) return jrt_fail(c, EDDY_ERR_ARG, s->line, "cannot assign attribute on non-namespace object");
        return jv_dict_set(c->a, ns, jv_strn(s->b->s, s->b->s_len), v) || jrt_oom(c);
    }
    case JN_SETBLOCK: {
        jbuf *saved = c->out, body = {0};
        body.limit = MAX_OUTPUT;
        c->out = &body;
        bool ok = exec_body(c, f, s->body, s->n_body);
        c->out = saved;
        jv v;
        if (ok && body.oom) ok = jrt_oom(c);
        if (ok) ok = jrt_mkstr(c, body.p ? body.p : "", body.n, &v);
        jbuf_free(&body);
        for (const jnode *fl = s->a; ok && fl; fl = NULL) {
            /* a filter chain: innermost first */
            const jnode *chain[32];
            int nc = 0;
            for (const jnode *q = fl; q && nc < 32; q = q->a) chain[nc++] = q;
            for (int k = nc - 1; ok && k >= 0; k--) {
                jargs a;
                ok = eval_args(c, f, chain[k], &a) && jrt_apply_filter(c, s->line, chain[k]->s, v, &a, &v);
            }
        }
        return ok && frame_set(c, f, s->kids[0]->s, v);
    }
    case JN_MACRO: {
        jv_func *fn = jarena_alloc(c->a, sizeof *fn);
        if (!fn) return jrt_oom(c);
        fn->kind = FN_MACRO;
        fn->macro = s;
        fn->name = s->s;
        jv v = {JV_FUNC, {.fn = fn}};
        return frame_set(c, f, s->s, v);
    }
    case JN_BREAK: c->ctl = 1; return true;
    case JN_CONTINUE: c->ctl = 2; return true;
    case JN_BLOCK: return exec_body(c, f, s->body, s->n_body);
    default: return jrt_fail(c, EDDY_ERR_ARG, s->line, "an expression where a statement belongs");
    }
}

static bool exec_body(jctx *c, frame *f, jnode *const *body, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (!exec_stmt(c, f, body[i])) return false;
        if (c->ctl) return true; /* break / continue: unwind to the loop */
        if (c->out->oom) return jrt_oom(c);
        if (c->out->over_limit) return jrt_fail(c, EDDY_ERR_ARG, body[i]->line, "the template's output is too large");
    }
    return true;
}

/* ==== Entry ==== */

eddy_status jinja_render(jarena *a, const jtemplate *t, jv vars, jbuf *out, eddy_error *err) {
    jctx c;
    memset(&c, 0, sizeof c);
    c.a = a;
    c.err = err;
    c.out = out;
    c.budget = MAX_STEPS;
    out->limit = MAX_OUTPUT;
    jarena_set_limit(a, MAX_MEMORY);
    frame *globals = frame_new(&c, NULL);
    if (!globals) return c.st;
    static const char *const fns[] = {"raise_exception", "range", "namespace", "dict", "strftime_now"};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        jv_func *fn = jarena_alloc(a, sizeof *fn);
        if (!fn) return jrt_oom(&c), c.st;
        fn->kind = FN_GLOBAL;
        fn->name = fns[i];
        jv v = {JV_FUNC, {.fn = fn}};
        if (!frame_set(&c, globals, fns[i], v)) return c.st;
    }
    /* the caller's variables, then the template's own top level */
    frame *user = frame_new(&c, globals);
    if (!user) return c.st;
    if (vars.t == JV_DICT)
        for (int64_t i = 0; i < vars.dict->n; i++)
            if (vars.dict->keys[i].t == JV_STR && !jv_dict_set(a, user->vars, vars.dict->keys[i], vars.dict->vals[i]))
                return jrt_oom(&c), c.st;
    c.root = user;
    if (!exec_body(&c, user, t->body, t->n_body) && c.st == EDDY_OK) jrt_oom(&c);
    if (c.st == EDDY_OK && c.ctl) c.ctl = 0; /* a break outside a loop ends the template, as Jinja refuses it earlier */
    return c.st;
}
