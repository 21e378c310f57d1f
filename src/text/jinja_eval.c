/*
 * jinja_eval.c — rendering a parsed chat template.
 *
 * Owns: scopes (a frame per loop iteration and per macro call, as Jinja has them),
 * expression semantics (Python's: truthiness, `and`/`or` returning an operand,
 * int/float arithmetic, str and list operators, comparisons), Jinja's Undefined
 * (prints as nothing, is falsy and empty, but using it in arithmetic or asking it
 * for an attribute is an error), and the built-in globals, filters, tests and
 * string / dict methods that chat templates use. Does not own parsing
 * (jinja_parse.c) or values (jvalue.c).
 *
 * Text is UTF-8; lengths, indexes and slices count characters as Python does.
 * Case mapping (upper, lower, title, capitalize) covers ASCII only.
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
#include "text/unicode.h"

/* ==== Context ==== */

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

EDDY_PRINTF(4, 5)
static bool rt_fail(jctx *c, eddy_status code, int line, const char *fmt, ...) {
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

static bool oom(jctx *c) {
    if (c->st != EDDY_OK) return false;
    if (jarena_over_limit(c->a))
        c->st = eddy_error_set(c->err, EDDY_ERR_ARG, "the chat template needs more than %zu MiB to render", MAX_MEMORY >> 20);
    else
        c->st = eddy_error_set(c->err, EDDY_ERR_NOMEM, "out of memory rendering the chat template");
    return false;
}

static const char *type_name(jv v) {
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
    if (v.str.s) return rt_fail(c, EDDY_ERR_ARG, line, "'%s' is undefined", v.str.s);
    return rt_fail(c, EDDY_ERR_ARG, line, "a value used here is undefined");
}

static bool mkstr(jctx *c, const char *s, size_t n, jv *out) {
    *out = jv_str_copy(c->a, s, n);
    return out->t == JV_STR || oom(c);
}

/* Python's str(v) as a string value. */
static bool to_str(jctx *c, jv v, jv *out) {
    if (v.t == JV_STR) {
        *out = v;
        return true;
    }
    jbuf b = {0};
    jv_str_into(&b, v);
    bool ok = !b.oom && mkstr(c, b.p ? b.p : "", b.n, out);
    jbuf_free(&b);
    return ok || oom(c);
}

/* ==== Frames ==== */

static bool frame_set(jctx *c, frame *f, const char *name, jv v) {
    jv key = jv_strn(name, strlen(name));
    return jv_dict_set(c->a, f->vars, key, v) || oom(c);
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
    if (!f) return oom(c), NULL;
    f->parent = parent;
    f->vars = jv_dict_new(c->a);
    if (f->vars.t != JV_DICT) return oom(c), NULL;
    return f;
}

/* ==== UTF-8 strings as Python sees them ==== */

static int64_t u8_len(const char *s, size_t n) {
    int64_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

/* Byte offsets of the characters: offs[0..nch] (offs[nch] == n). */
static int64_t *u8_offsets(jctx *c, const char *s, size_t n, int64_t *nch) {
    int64_t k = u8_len(s, n);
    int64_t *offs = jarena_alloc(c->a, (size_t)(k + 1) * sizeof *offs);
    if (!offs) return oom(c), NULL;
    int64_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) offs[j++] = (int64_t)i;
    offs[k] = (int64_t)n;
    *nch = k;
    return offs;
}

static uint32_t u8_at(const char *s, size_t n, size_t i, int *len) {
    uint32_t cp;
    int k = utf8_decode((const uint8_t *)s + i, n - i, &cp);
    if (k <= 0) {
        *len = 1;
        return 0xFFFD;
    }
    *len = k;
    return cp;
}

/* Python's str.isspace() for one character. */
static bool py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static bool in_set(uint32_t cp, jv chars) {
    if (chars.t != JV_STR) return py_space(cp);
    for (size_t i = 0; i < chars.str.n;) {
        int k;
        if (u8_at(chars.str.s, chars.str.n, i, &k) == cp) return true;
        i += (size_t)k;
    }
    return false;
}

/* strip / lstrip / rstrip with Python's semantics (chars: JV_STR, or whitespace). */
static jv py_strip(jv s, jv chars, bool left, bool right) {
    const char *p = s.str.s;
    size_t a = 0, b = s.str.n;
    if (left)
        while (a < b) {
            int k;
            uint32_t cp = u8_at(p, b, a, &k);
            if (!in_set(cp, chars)) break;
            a += (size_t)k;
        }
    if (right)
        while (b > a) {
            size_t st = b - 1;
            while (st > a && ((unsigned char)p[st] & 0xC0) == 0x80) st--;
            int k;
            uint32_t cp = u8_at(p, b, st, &k);
            if (!in_set(cp, chars)) break;
            b = st;
        }
    return jv_strn(p + a, b - a);
}

static bool has_prefix(jv s, jv pre) { return pre.str.n <= s.str.n && !memcmp(s.str.s, pre.str.s, pre.str.n); }
static bool has_suffix(jv s, jv suf) {
    return suf.str.n <= s.str.n && !memcmp(s.str.s + s.str.n - suf.str.n, suf.str.s, suf.str.n);
}

static const char *find_bytes(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0) return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == nd[0] && !memcmp(h + i, nd, nn)) return h + i;
    return NULL;
}

static bool ascii_case(jctx *c, jv s, int mode, jv *out) { /* 0 lower, 1 upper, 2 title, 3 capitalize */
    char *p = jarena_alloc(c->a, s.str.n + 1);
    if (!p) return oom(c);
    bool word_start = true;
    for (size_t i = 0; i < s.str.n; i++) {
        char ch = s.str.s[i];
        bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
        bool up = mode == 1 || ((mode == 2) && word_start) || (mode == 3 && i == 0);
        if (alpha) ch = up ? (char)(ch >= 'a' && ch <= 'z' ? ch - 32 : ch) : (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
        p[i] = ch;
        word_start = !alpha && !((unsigned char)ch & 0x80);
    }
    *out = jv_strn(p, s.str.n);
    return true;
}

/* ==== Values: iteration, length, lookups ==== */

/* The items a for loop (or a filter) sees: list items, dict keys, characters. */
static bool iter_items(jctx *c, int line, jv v, jv_list **out) {
    static jv_list empty;
    switch (v.t) {
    case JV_LIST: *out = v.list; return true;
    case JV_UNDEF: *out = &empty; return true;
    case JV_DICT: {
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return oom(c);
        for (int64_t i = 0; i < v.dict->n; i++)
            if (!jv_list_push(c->a, l, v.dict->keys[i])) return oom(c);
        *out = l.list;
        return true;
    }
    case JV_STR: {
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return oom(c);
        for (size_t i = 0; i < v.str.n;) {
            int k;
            u8_at(v.str.s, v.str.n, i, &k);
            if (!jv_list_push(c->a, l, jv_strn(v.str.s + i, (size_t)k))) return oom(c);
            i += (size_t)k;
        }
        *out = l.list;
        return true;
    }
    default: return rt_fail(c, EDDY_ERR_ARG, line, "'%s' object is not iterable", type_name(v));
    }
}

static bool length_of(jctx *c, int line, jv v, int64_t *n) {
    switch (v.t) {
    case JV_STR: *n = u8_len(v.str.s, v.str.n); return true;
    case JV_LIST: *n = v.list->n; return true;
    case JV_DICT: *n = v.dict->n; return true;
    case JV_UNDEF: *n = 0; return true;
    default: return rt_fail(c, EDDY_ERR_ARG, line, "object of type '%s' has no len()", type_name(v));
    }
}

/* obj[key] with Python's indexing (negative indexes count from the end). */
static bool get_item(jctx *c, int line, jv obj, jv key, jv *out) {
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
        if (!fn) return oom(c);
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

static bool slice_of(jctx *c, int line, jv obj, jv lo, jv hi, jv st, jv *out) {
    int64_t n;
    int64_t *offs = NULL;
    if (obj.t == JV_LIST) n = obj.list->n;
    else if (obj.t == JV_STR) {
        if (!(offs = u8_offsets(c, obj.str.s, obj.str.n, &n))) return false;
    } else if (obj.t == JV_UNDEF) return undefined_error(c, line, obj);
    else return rt_fail(c, EDDY_ERR_ARG, line, "'%s' object is not subscriptable", type_name(obj));
    for (int k = 0; k < 3; k++) {
        jv x = k == 0 ? lo : k == 1 ? hi : st;
        if (x.t != JV_INT && x.t != JV_NONE && x.t != JV_UNDEF)
            return rt_fail(c, EDDY_ERR_ARG, line, "slice indices must be integers or None");
    }
    int64_t step = st.t == JV_INT ? st.i : 1;
    if (step == 0) return rt_fail(c, EDDY_ERR_ARG, line, "slice step cannot be zero");
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
        if (l.t != JV_LIST) return oom(c);
        for (int64_t i = a; step > 0 ? i < b : i > b; i += step)
            if (!jv_list_push(c->a, l, obj.list->items[i])) return oom(c);
        *out = l;
        return true;
    }
    jbuf sb = {0};
    for (int64_t i = a; step > 0 ? i < b : i > b; i += step)
        jbuf_add(&sb, obj.str.s + offs[i], (size_t)(offs[i + 1] - offs[i]));
    bool ok = !sb.oom && mkstr(c, sb.p ? sb.p : "", sb.n, out);
    jbuf_free(&sb);
    return ok || oom(c);
}

/* ==== Operators ==== */

static bool is_numv(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static double numf(jv v) { return v.t == JV_FLOAT ? v.f : v.t == JV_INT ? (double)v.i : (double)v.b; }
static int64_t numi(jv v) { return v.t == JV_INT ? v.i : v.t == JV_BOOL ? (int64_t)v.b : 0; }

static bool concat_str(jctx *c, jv a, jv b, jv *out) {
    char *p = jarena_alloc(c->a, a.str.n + b.str.n + 1);
    if (!p) return oom(c);
    if (a.str.n) memcpy(p, a.str.s, a.str.n);
    if (b.str.n) memcpy(p + a.str.n, b.str.s, b.str.n);
    *out = jv_strn(p, a.str.n + b.str.n);
    return true;
}

static bool binop(jctx *c, int line, int op, jv a, jv b, jv *out) {
    if (op == '~') {
        jv sa, sb;
        return to_str(c, a, &sa) && to_str(c, b, &sb) && concat_str(c, sa, sb, out);
    }
    if (a.t == JV_UNDEF) return undefined_error(c, line, a);
    if (b.t == JV_UNDEF) return undefined_error(c, line, b);
    if (op == '+' && a.t == JV_STR && b.t == JV_STR) return concat_str(c, a, b, out);
    if (op == '+' && a.t == JV_LIST && b.t == JV_LIST) {
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return oom(c);
        for (int64_t i = 0; i < a.list->n; i++)
            if (!jv_list_push(c->a, l, a.list->items[i])) return oom(c);
        for (int64_t i = 0; i < b.list->n; i++)
            if (!jv_list_push(c->a, l, b.list->items[i])) return oom(c);
        *out = l;
        return true;
    }
    if (op == '*' && ((a.t == JV_STR && b.t == JV_INT) || (a.t == JV_INT && b.t == JV_STR))) {
        jv s = a.t == JV_STR ? a : b;
        int64_t k = a.t == JV_INT ? a.i : b.i;
        if (k < 0) k = 0;
        if (s.str.n && (uint64_t)k > MAX_OUTPUT / s.str.n) return rt_fail(c, EDDY_ERR_ARG, line, "string too long");
        char *p = jarena_alloc(c->a, s.str.n * (size_t)k + 1);
        if (!p) return oom(c);
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
                return rt_fail(c, EDDY_ERR_UNSUPPORTED, line, "this %% format");
            }
            jv x = args->items[k++];
            if (f == 'r') jv_repr_into(&r, x);
            else if (f == 's') jv_str_into(&r, x);
            else if (is_numv(x)) jv_str_into(&r, jv_int(x.t == JV_FLOAT ? (int64_t)x.f : numi(x)));
            else {
                jbuf_free(&r);
                return rt_fail(c, EDDY_ERR_ARG, line, "%%d format: a number is required");
            }
        }
        bool ok = !r.oom && mkstr(c, r.p ? r.p : "", r.n, out);
        jbuf_free(&r);
        return ok || oom(c);
    }
    if (!is_numv(a) || !is_numv(b))
        return rt_fail(c, EDDY_ERR_ARG, line, "unsupported operand types for %c: '%s' and '%s'",
                       op == 'D' ? '/' : op == 'P' ? '*' : op, type_name(a), type_name(b));
    bool fl = a.t == JV_FLOAT || b.t == JV_FLOAT;
    int64_t x = numi(a), y = numi(b), r;
    switch (op) {
    case '+':
        if (!fl && !__builtin_add_overflow(x, y, &r)) return *out = jv_int(r), true;
        *out = jv_float(numf(a) + numf(b));
        return true;
    case '-':
        if (!fl && !__builtin_sub_overflow(x, y, &r)) return *out = jv_int(r), true;
        *out = jv_float(numf(a) - numf(b));
        return true;
    case '*':
        if (!fl && !__builtin_mul_overflow(x, y, &r)) return *out = jv_int(r), true;
        *out = jv_float(numf(a) * numf(b));
        return true;
    case '/':
        if (numf(b) == 0) return rt_fail(c, EDDY_ERR_ARG, line, "division by zero");
        *out = jv_float(numf(a) / numf(b));
        return true;
    case 'D':
    case '%':
        if (numf(b) == 0) return rt_fail(c, EDDY_ERR_ARG, line, "integer division or modulo by zero");
        if (!fl) {
            if (x == INT64_MIN && y == -1) return *out = jv_float(op == 'D' ? -(double)x : 0.0), true;
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) q--, m += y; /* floor, as Python */
            *out = jv_int(op == 'D' ? q : m);
        } else {
            double q = floor(numf(a) / numf(b));
            *out = jv_float(op == 'D' ? q : numf(a) - q * numf(b));
        }
        return true;
    case 'P':
        if (!fl && y >= 0) {
            int64_t acc = 1;
            bool over = false;
            for (int64_t i = 0; i < y && !over; i++) over = __builtin_mul_overflow(acc, x, &acc);
            if (!over) return *out = jv_int(acc), true;
        }
        *out = jv_float(pow(numf(a), numf(b)));
        return true;
    }
    return rt_fail(c, EDDY_ERR_ARG, line, "bad operator");
}

static int cmp_str(jv a, jv b) {
    size_t n = a.str.n < b.str.n ? a.str.n : b.str.n;
    int r = n ? memcmp(a.str.s, b.str.s, n) : 0;
    return r ? r : (a.str.n > b.str.n) - (a.str.n < b.str.n);
}

static bool contains(jctx *c, int line, jv needle, jv hay, bool *res) {
    *res = false;
    switch (hay.t) {
    case JV_STR:
        if (needle.t != JV_STR)
            return rt_fail(c, EDDY_ERR_ARG, line, "'in <string>' requires string as left operand, not %s", type_name(needle));
        *res = find_bytes(hay.str.s, hay.str.n, needle.str.s, needle.str.n) != NULL;
        return true;
    case JV_LIST:
        for (int64_t i = 0; i < hay.list->n && !*res; i++) *res = jv_equal(needle, hay.list->items[i]);
        return true;
    case JV_DICT: case JV_NS: *res = jv_dict_getv(hay, needle).t != JV_UNDEF; return true;
    case JV_UNDEF: return true;
    default: return rt_fail(c, EDDY_ERR_ARG, line, "argument of type '%s' is not iterable", type_name(hay));
    }
}

static bool compare(jctx *c, int line, int op, jv a, jv b, jv *out) {
    bool r;
    switch (op) {
    case '=': r = jv_equal(a, b); break;
    case '!': r = !jv_equal(a, b); break;
    case 'i': if (!contains(c, line, a, b, &r)) return false; break;
    case 'n': if (!contains(c, line, a, b, &r)) return false; r = !r; break;
    default: {
        int s;
        if (is_numv(a) && is_numv(b)) {
            if (a.t != JV_FLOAT && b.t != JV_FLOAT) s = (numi(a) > numi(b)) - (numi(a) < numi(b));
            else s = (numf(a) > numf(b)) - (numf(a) < numf(b));
        } else if (a.t == JV_STR && b.t == JV_STR) {
            s = cmp_str(a, b);
        } else {
            if (a.t == JV_UNDEF) return undefined_error(c, line, a);
            if (b.t == JV_UNDEF) return undefined_error(c, line, b);
            return rt_fail(c, EDDY_ERR_ARG, line, "'%s' not supported between '%s' and '%s'",
                           op == '<' ? "<" : op == '>' ? ">" : op == 'l' ? "<=" : ">=", type_name(a), type_name(b));
        }
        r = op == '<' ? s < 0 : op == '>' ? s > 0 : op == 'l' ? s <= 0 : s >= 0;
    }
    }
    *out = jv_bool(r);
    return true;
}

/* ==== Calls: arguments ==== */

typedef struct {
    jv *pos;
    int64_t n_pos;
    const char **kw_names;
    jv *kw;
    int64_t n_kw;
} jargs;

static bool eval(jctx *c, frame *f, const jnode *e, jv *out);

static bool eval_args(jctx *c, frame *f, const jnode *call, jargs *a) {
    memset(a, 0, sizeof *a);
    if (call->n_kids == 0) return true;
    a->pos = jarena_alloc(c->a, (size_t)call->n_kids * sizeof(jv));
    a->kw = jarena_alloc(c->a, (size_t)call->n_kids * sizeof(jv));
    a->kw_names = jarena_alloc(c->a, (size_t)call->n_kids * sizeof(char *));
    if (!a->pos || !a->kw || !a->kw_names) return oom(c);
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
static jv arg(const jargs *a, int64_t i, const char *name, jv def) {
    if (i >= 0 && i < a->n_pos) return a->pos[i];
    for (int64_t k = 0; name && k < a->n_kw; k++)
        if (!strcmp(a->kw_names[k], name)) return a->kw[k];
    return def;
}

/* ==== Tests ==== */

static bool run_test(jctx *c, int line, const char *name, jv v, const jargs *a, bool *res) {
    jv x = arg(a, 0, NULL, jv_undef());
    if (!strcmp(name, "defined")) *res = v.t != JV_UNDEF;
    else if (!strcmp(name, "undefined")) *res = v.t == JV_UNDEF;
    else if (!strcmp(name, "none")) *res = v.t == JV_NONE;
    else if (!strcmp(name, "string")) *res = v.t == JV_STR;
    else if (!strcmp(name, "mapping")) *res = v.t == JV_DICT;
    else if (!strcmp(name, "iterable")) *res = v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT || v.t == JV_UNDEF;
    else if (!strcmp(name, "sequence")) *res = v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT;
    else if (!strcmp(name, "number")) *res = is_numv(v);
    else if (!strcmp(name, "integer")) *res = v.t == JV_INT;
    else if (!strcmp(name, "float")) *res = v.t == JV_FLOAT;
    else if (!strcmp(name, "boolean")) *res = v.t == JV_BOOL;
    else if (!strcmp(name, "true")) *res = v.t == JV_BOOL && v.b;
    else if (!strcmp(name, "false")) *res = v.t == JV_BOOL && !v.b;
    else if (!strcmp(name, "callable")) *res = v.t == JV_FUNC;
    else if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        if (v.t != JV_INT) return rt_fail(c, EDDY_ERR_ARG, line, "'%s' test needs an integer", name);
        *res = (v.i % 2 != 0) == (name[0] == 'o');
    } else if (!strcmp(name, "divisibleby")) {
        if (v.t != JV_INT || x.t != JV_INT || x.i == 0) return rt_fail(c, EDDY_ERR_ARG, line, "bad divisibleby");
        *res = v.i % x.i == 0;
    } else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        bool lower = name[0] == 'l';
        *res = v.t == JV_STR;
        bool cased = false;
        for (size_t i = 0; *res && v.t == JV_STR && i < v.str.n; i++) {
            char ch = v.str.s[i];
            if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) cased = true;
            if (lower ? (ch >= 'A' && ch <= 'Z') : (ch >= 'a' && ch <= 'z')) *res = false;
        }
        *res = *res && cased;
    } else if (!strcmp(name, "in")) {
        return contains(c, line, v, x, res);
    } else if (!strcmp(name, "sameas")) {
        *res = v.t == x.t && (v.t == JV_NONE || v.t == JV_UNDEF || (v.t == JV_BOOL && v.b == x.b) || jv_equal(v, x));
    } else {
        int op = !strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==") ? '=' :
                 !strcmp(name, "ne") || !strcmp(name, "!=") ? '!' :
                 !strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<") ? '<' :
                 !strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">") ? '>' :
                 !strcmp(name, "le") || !strcmp(name, "<=") ? 'l' : !strcmp(name, "ge") || !strcmp(name, ">=") ? 'g' : 0;
        if (!op) return rt_fail(c, EDDY_ERR_UNSUPPORTED, line, "the test '%s'", name);
        jv r;
        if (!compare(c, line, op, v, x, &r)) return false;
        *res = r.b;
    }
    return true;
}

/* ==== Filters ==== */

static bool json_filter(jctx *c, int line, jv v, const jargs *a, jv *out) {
    jv ea = arg(a, 0, "ensure_ascii", jv_bool(false));
    jv indent = arg(a, 1, "indent", jv_none());
    jv seps = arg(a, 2, "separators", jv_none());
    jv sort = arg(a, 3, "sort_keys", jv_bool(false));
    const char *isep = NULL, *ksep = NULL;
    if (seps.t == JV_LIST && seps.list->n == 2 && seps.list->items[0].t == JV_STR && seps.list->items[1].t == JV_STR) {
        isep = jarena_strdup(c->a, seps.list->items[0].str.s, seps.list->items[0].str.n);
        ksep = jarena_strdup(c->a, seps.list->items[1].str.s, seps.list->items[1].str.n);
        if (!isep || !ksep) return oom(c);
    }
    int ind = indent.t == JV_INT ? (int)(indent.i < 0 ? 0 : indent.i > 64 ? 64 : indent.i) : -1;
    jbuf b = {0};
    const char *bad = NULL;
    if (!jv_json_into(&b, v, jv_truthy(ea), ind, isep, ksep, jv_truthy(sort), &bad)) {
        jbuf_free(&b);
        return rt_fail(c, EDDY_ERR_ARG, line, "Object of type %s is not JSON serializable", bad);
    }
    bool ok = !b.oom && mkstr(c, b.p ? b.p : "", b.n, out);
    jbuf_free(&b);
    return ok || oom(c);
}

/* map / select / reject / selectattr / rejectattr over a list. */
static bool seq_filter(jctx *c, int line, const char *name, jv v, const jargs *a, jv *out) {
    jv l = jv_list_new(c->a);
    if (l.t != JV_LIST) return oom(c);
    *out = l;
    if (!jv_truthy(v)) return true; /* Jinja: "if value: for item in value" */
    jv_list *items;
    if (!iter_items(c, line, v, &items)) return false;
    bool attr = !strcmp(name, "selectattr") || !strcmp(name, "rejectattr");
    bool reject = name[0] == 'r';
    for (int64_t i = 0; i < items->n; i++) {
        jv it = items->items[i];
        if (!strcmp(name, "map")) {
            jv at = arg(a, -1, "attribute", jv_undef());
            if (at.t == JV_STR) {
                jv r;
                if (!get_item(c, line, it, at, &r)) return false;
                if (r.t == JV_UNDEF) r = arg(a, -1, "default", r);
                if (!jv_list_push(c->a, l, r)) return oom(c);
                continue;
            }
            return rt_fail(c, EDDY_ERR_UNSUPPORTED, line, "map with a filter name");
        }
        jv subject = it;
        int64_t first = 0;
        if (attr) {
            jv at = arg(a, 0, NULL, jv_undef());
            if (at.t != JV_STR) return rt_fail(c, EDDY_ERR_ARG, line, "%s needs an attribute name", name);
            if (!get_item(c, line, it, at, &subject)) return false;
            first = 1;
        }
        jv tname = arg(a, first, NULL, jv_undef());
        bool keep;
        if (tname.t == JV_UNDEF) {
            keep = jv_truthy(subject);
        } else {
            if (tname.t != JV_STR) return rt_fail(c, EDDY_ERR_ARG, line, "%s needs a test name", name);
            jargs ta = {a->pos + first + 1, a->n_pos > first + 1 ? a->n_pos - first - 1 : 0, NULL, NULL, 0};
            char *tn = jarena_strdup(c->a, tname.str.s, tname.str.n);
            if (!tn) return oom(c);
            if (!run_test(c, line, tn, subject, &ta, &keep)) return false;
        }
        if (keep != reject && !jv_list_push(c->a, l, it)) return oom(c);
    }
    *out = l;
    return true;
}

static bool apply_filter(jctx *c, int line, const char *name, jv v, const jargs *a, jv *out) {
    if (!strcmp(name, "safe") || (!strcmp(name, "list") && v.t == JV_LIST)) { /* lists are never changed */
        *out = v;
        return true;
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) {
        int64_t n = 0;
        if (!length_of(c, line, v, &n)) return false;
        *out = jv_int(n);
        return true;
    }
    if (!strcmp(name, "string")) return to_str(c, v, out);
    if (!strcmp(name, "tojson")) return json_filter(c, line, v, a, out);
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        jv def = arg(a, 0, "default_value", jv_strn("", 0));
        bool boolean = jv_truthy(arg(a, 1, "boolean", jv_bool(false)));
        *out = v.t == JV_UNDEF || (boolean && !jv_truthy(v)) ? def : v;
        return true;
    }
    if (!strcmp(name, "trim")) {
        jv s;
        if (!to_str(c, v, &s)) return false;
        *out = py_strip(s, arg(a, 0, "chars", jv_none()), true, true);
        return true;
    }
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") || !strcmp(name, "capitalize")) {
        jv s;
        if (!to_str(c, v, &s)) return false;
        return ascii_case(c, s, name[0] == 'l' ? 0 : name[0] == 'u' ? 1 : name[0] == 't' ? 2 : 3, out);
    }
    if (!strcmp(name, "items")) {
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return oom(c);
        if (v.t == JV_DICT)
            for (int64_t i = 0; i < v.dict->n; i++) {
                jv pair = jv_list_new(c->a);
                if (pair.t == JV_LIST) pair.list->tuple = true;
                if (pair.t != JV_LIST || !jv_list_push(c->a, pair, v.dict->keys[i]) ||
                    !jv_list_push(c->a, pair, v.dict->vals[i]) || !jv_list_push(c->a, l, pair))
                    return oom(c);
            }
        else if (v.t != JV_UNDEF)
            return rt_fail(c, EDDY_ERR_ARG, line, "items: a mapping is required, not %s", type_name(v));
        *out = l;
        return true;
    }
    if (!strcmp(name, "list")) {
        jv_list *items;
        if (!iter_items(c, line, v, &items)) return false;
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return oom(c);
        for (int64_t i = 0; i < items->n; i++)
            if (!jv_list_push(c->a, l, items->items[i])) return oom(c);
        *out = l;
        return true;
    }
    if (!strcmp(name, "join")) {
        jv_list *items;
        if (!iter_items(c, line, v, &items)) return false;
        jv sep = arg(a, 0, "d", jv_strn("", 0)), at = arg(a, 1, "attribute", jv_undef());
        jbuf b = {0};
        for (int64_t i = 0; i < items->n; i++) {
            jv it = items->items[i];
            if (at.t != JV_UNDEF && !get_item(c, line, it, at, &it)) {
                jbuf_free(&b);
                return false;
            }
            if (i) jv_str_into(&b, sep);
            jv_str_into(&b, it);
        }
        bool ok = !b.oom && mkstr(c, b.p ? b.p : "", b.n, out);
        jbuf_free(&b);
        return ok || oom(c);
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        jv_list *items;
        if (!iter_items(c, line, v, &items)) return false;
        *out = items->n ? items->items[name[0] == 'f' ? 0 : items->n - 1] : jv_undef();
        return true;
    }
    if (!strcmp(name, "reverse")) {
        if (v.t == JV_STR) return slice_of(c, line, v, jv_none(), jv_none(), jv_int(-1), out);
        jv_list *items;
        if (!iter_items(c, line, v, &items)) return false;
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return oom(c);
        for (int64_t i = items->n - 1; i >= 0; i--)
            if (!jv_list_push(c->a, l, items->items[i])) return oom(c);
        *out = l;
        return true;
    }
    if (!strcmp(name, "replace")) {
        jv s, old = arg(a, 0, "old", jv_undef()), new_ = arg(a, 1, "new", jv_undef());
        jv cnt = arg(a, 2, "count", jv_none());
        if (!to_str(c, v, &s)) return false;
        if (old.t != JV_STR || new_.t != JV_STR) return rt_fail(c, EDDY_ERR_ARG, line, "replace needs two strings");
        if (old.str.n == 0) return rt_fail(c, EDDY_ERR_UNSUPPORTED, line, "replace of an empty string");
        int64_t left = cnt.t == JV_INT && cnt.i >= 0 ? cnt.i : INT64_MAX;
        jbuf b = {0};
        size_t i = 0;
        const char *hit;
        while (left > 0 && (hit = find_bytes(s.str.s + i, s.str.n - i, old.str.s, old.str.n))) {
            jbuf_add(&b, s.str.s + i, (size_t)(hit - (s.str.s + i)));
            jbuf_add(&b, new_.str.s, new_.str.n);
            i = (size_t)(hit - s.str.s) + old.str.n;
            left--;
        }
        jbuf_add(&b, s.str.s + i, s.str.n - i);
        bool ok = !b.oom && mkstr(c, b.p ? b.p : "", b.n, out);
        jbuf_free(&b);
        return ok || oom(c);
    }
    if (!strcmp(name, "int")) {
        if (v.t == JV_INT) *out = v;
        else if (v.t == JV_FLOAT && isfinite(v.f) && fabs(v.f) < 9.2e18) *out = jv_int((int64_t)v.f);
        else if (v.t == JV_BOOL) *out = jv_int(v.b);
        else if (v.t == JV_STR) {
            char tmp[64];
            size_t n = v.str.n < 63 ? v.str.n : 63;
            memcpy(tmp, v.str.s, n);
            tmp[n] = '\0';
            char *end;
            long long x = strtoll(tmp, &end, 10);
            *out = end != tmp ? jv_int(x) : arg(a, 0, "default", jv_int(0));
        } else *out = arg(a, 0, "default", jv_int(0));
        return true;
    }
    if (!strcmp(name, "float")) {
        if (is_numv(v)) *out = jv_float(numf(v));
        else *out = arg(a, 0, "default", jv_float(0.0));
        return true;
    }
    if (!strcmp(name, "abs")) {
        if (!is_numv(v)) return rt_fail(c, EDDY_ERR_ARG, line, "bad operand type for abs(): '%s'", type_name(v));
        *out = v.t == JV_FLOAT ? jv_float(fabs(v.f)) : jv_int(numi(v) < 0 ? -numi(v) : numi(v));
        return true;
    }
    if (!strcmp(name, "escape") || !strcmp(name, "e")) {
        jv s;
        if (!to_str(c, v, &s)) return false;
        jbuf b = {0};
        for (size_t i = 0; i < s.str.n; i++) {
            char ch = s.str.s[i];
            if (ch == '&') jbuf_add(&b, "&amp;", 5);
            else if (ch == '<') jbuf_add(&b, "&lt;", 4);
            else if (ch == '>') jbuf_add(&b, "&gt;", 4);
            else if (ch == '"') jbuf_add(&b, "&#34;", 5);
            else if (ch == '\'') jbuf_add(&b, "&#39;", 5);
            else jbuf_addc(&b, ch);
        }
        bool ok = !b.oom && mkstr(c, b.p ? b.p : "", b.n, out);
        jbuf_free(&b);
        return ok || oom(c);
    }
    if (!strcmp(name, "map") || !strcmp(name, "select") || !strcmp(name, "reject") || !strcmp(name, "selectattr") ||
        !strcmp(name, "rejectattr"))
        return seq_filter(c, line, name, v, a, out);
    if (!strcmp(name, "dictsort")) {
        if (v.t != JV_DICT) return rt_fail(c, EDDY_ERR_ARG, line, "dictsort: a mapping is required, not %s", type_name(v));
        bool cs = jv_truthy(arg(a, 0, "case_sensitive", jv_bool(false)));
        jv by = arg(a, 1, "by", jv_strn("key", 3));
        bool rev = jv_truthy(arg(a, 2, "reverse", jv_bool(false)));
        bool by_value = by.t == JV_STR && by.str.n == 5 && !memcmp(by.str.s, "value", 5);
        jv pairs;
        if (!apply_filter(c, line, "items", v, a, &pairs)) return false;
        /* insertion sort (stable), comparing keys or values as Python does */
        jv_list *l = pairs.list;
        for (int64_t i = 1; i < l->n; i++) {
            jv x = l->items[i];
            int64_t j = i;
            while (j > 0) {
                jv ka = l->items[j - 1].list->items[by_value], kb = x.list->items[by_value];
                jv la, lb;
                if (!cs && ka.t == JV_STR && kb.t == JV_STR) {
                    if (!ascii_case(c, ka, 0, &la) || !ascii_case(c, kb, 0, &lb)) return false;
                } else {
                    la = ka, lb = kb;
                }
                jv gt;
                if (!compare(c, line, rev ? '<' : '>', la, lb, &gt)) return false;
                if (!gt.b) break;
                l->items[j] = l->items[j - 1];
                j--;
            }
            l->items[j] = x;
        }
        *out = pairs;
        return true;
    }
    if (!strcmp(name, "min") || !strcmp(name, "max")) {
        jv_list *items;
        if (!iter_items(c, line, v, &items)) return false;
        *out = jv_undef();
        for (int64_t i = 0; i < items->n; i++) {
            jv better;
            if (i && !compare(c, line, name[1] == 'i' ? '<' : '>', items->items[i], *out, &better)) return false;
            if (i == 0 || better.b) *out = items->items[i];
        }
        return true;
    }
    if (!strcmp(name, "unique")) {
        jv_list *items;
        if (!iter_items(c, line, v, &items)) return false;
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return oom(c);
        for (int64_t i = 0; i < items->n; i++) {
            bool seen;
            if (!contains(c, line, items->items[i], l, &seen)) return false;
            if (!seen && !jv_list_push(c->a, l, items->items[i])) return oom(c);
        }
        *out = l;
        return true;
    }
    return rt_fail(c, EDDY_ERR_UNSUPPORTED, line, "the filter '%s'", name);
}

/* ==== Methods (str and dict) ==== */

static bool split_str(jctx *c, jv s, jv sep, int64_t maxsplit, jv *out) {
    jv l = jv_list_new(c->a);
    if (l.t != JV_LIST) return oom(c);
    const char *p = s.str.s;
    size_t n = s.str.n, i = 0;
    if (sep.t != JV_STR) { /* runs of whitespace, no empty pieces */
        for (;;) {
            while (i < n) {
                int k;
                if (!py_space(u8_at(p, n, i, &k))) break;
                i += (size_t)k;
            }
            if (i >= n) break;
            size_t st = i;
            if (maxsplit == 0) {
                /* the rest, without trailing whitespace */
                jv rest = py_strip(jv_strn(p + st, n - st), jv_none(), false, true);
                if (!jv_list_push(c->a, l, rest)) return oom(c);
                break;
            }
            while (i < n) {
                int k;
                if (py_space(u8_at(p, n, i, &k))) break;
                i += (size_t)k;
            }
            if (!jv_list_push(c->a, l, jv_strn(p + st, i - st))) return oom(c);
            if (maxsplit > 0) maxsplit--;
        }
        *out = l;
        return true;
    }
    if (sep.str.n == 0) return false;
    for (;;) {
        const char *hit = maxsplit != 0 ? find_bytes(p + i, n - i, sep.str.s, sep.str.n) : NULL;
        if (!hit) {
            if (!jv_list_push(c->a, l, jv_strn(p + i, n - i))) return oom(c);
            break;
        }
        if (!jv_list_push(c->a, l, jv_strn(p + i, (size_t)(hit - (p + i))))) return oom(c);
        i = (size_t)(hit - p) + sep.str.n;
        if (maxsplit > 0) maxsplit--;
    }
    *out = l;
    return true;
}

static bool call_method(jctx *c, int line, const char *name, jv self, const jargs *a, jv *out) {
    if (self.t == JV_DICT) {
        if (!strcmp(name, "get")) {
            jv r = jv_dict_getv(self, arg(a, 0, NULL, jv_undef()));
            *out = r.t == JV_UNDEF ? arg(a, 1, NULL, jv_none()) : r;
            return true;
        }
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return oom(c);
        for (int64_t i = 0; i < self.dict->n; i++) {
            jv item = name[0] == 'k' ? self.dict->keys[i] : self.dict->vals[i];
            if (name[0] == 'i') {
                item = jv_list_new(c->a);
                if (item.t == JV_LIST) item.list->tuple = true;
                if (item.t != JV_LIST || !jv_list_push(c->a, item, self.dict->keys[i]) ||
                    !jv_list_push(c->a, item, self.dict->vals[i]))
                    return oom(c);
            }
            if (!jv_list_push(c->a, l, item)) return oom(c);
        }
        *out = l;
        return true;
    }
    /* str */
    jv s = self, x = arg(a, 0, NULL, jv_none());
    if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
        if (x.t != JV_NONE && x.t != JV_STR) return rt_fail(c, EDDY_ERR_ARG, line, "%s arg must be None or str", name);
        *out = py_strip(s, x, name[0] != 'r', name[0] != 'l');
        return true;
    }
    if (!strcmp(name, "split")) {
        jv ms = arg(a, 1, "maxsplit", jv_int(-1));
        jv sep = arg(a, 0, "sep", jv_none());
        if (sep.t == JV_STR && sep.str.n == 0) return rt_fail(c, EDDY_ERR_ARG, line, "empty separator");
        if (sep.t != JV_STR && sep.t != JV_NONE) return rt_fail(c, EDDY_ERR_ARG, line, "must be str or None");
        return split_str(c, s, sep, ms.t == JV_INT ? ms.i : -1, out);
    }
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
        bool r = false;
        jv_list one = {&x, 1, 1, true}, *opts = x.t == JV_LIST ? x.list : &one;
        for (int64_t i = 0; i < opts->n; i++) {
            if (opts->items[i].t != JV_STR) return rt_fail(c, EDDY_ERR_ARG, line, "%s arg must be str or a tuple of str", name);
            r |= name[0] == 's' ? has_prefix(s, opts->items[i]) : has_suffix(s, opts->items[i]);
        }
        *out = jv_bool(r);
        return true;
    }
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") || !strcmp(name, "capitalize"))
        return ascii_case(c, s, name[0] == 'l' ? 0 : name[0] == 'u' ? 1 : name[0] == 't' ? 2 : 3, out);
    if (!strcmp(name, "replace")) {
        jargs ra = *a;
        return apply_filter(c, line, "replace", s, &ra, out);
    }
    if (!strcmp(name, "find") || !strcmp(name, "rfind") || !strcmp(name, "index") || !strcmp(name, "count")) {
        if (x.t != JV_STR) return rt_fail(c, EDDY_ERR_ARG, line, "%s needs a string", name);
        int64_t found = -1, count = 0;
        for (size_t i = 0; i + x.str.n <= s.str.n;) {
            if (!memcmp(s.str.s + i, x.str.s, x.str.n)) {
                if (found < 0 || name[0] == 'r') found = (int64_t)i;
                count++;
                i += x.str.n ? x.str.n : 1;
                if (name[0] == 'f' || name[0] == 'i') break;
            } else {
                i++;
            }
        }
        if (name[0] == 'c') {
            *out = jv_int(count);
            return true;
        }
        if (found < 0 && name[0] == 'i') return rt_fail(c, EDDY_ERR_ARG, line, "substring not found");
        *out = jv_int(found < 0 ? -1 : u8_len(s.str.s, (size_t)found));
        return true;
    }
    if (!strcmp(name, "join")) {
        jargs ja = {&s, 1, NULL, NULL, 0};
        return apply_filter(c, line, "join", x, &ja, out);
    }
    if (!strcmp(name, "splitlines")) {
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return oom(c);
        size_t st = 0;
        for (size_t i = 0; i < s.str.n; i++) {
            if (s.str.s[i] != '\n' && s.str.s[i] != '\r') continue;
            if (!jv_list_push(c->a, l, jv_strn(s.str.s + st, i - st))) return oom(c);
            if (s.str.s[i] == '\r' && i + 1 < s.str.n && s.str.s[i + 1] == '\n') i++;
            st = i + 1;
        }
        if (st < s.str.n && !jv_list_push(c->a, l, jv_strn(s.str.s + st, s.str.n - st))) return oom(c);
        *out = l;
        return true;
    }
    if (!strncmp(name, "is", 2)) {
        bool r = s.str.n > 0, cased = false;
        for (size_t i = 0; i < s.str.n; i++) {
            char ch = s.str.s[i];
            bool dg = ch >= '0' && ch <= '9', lo = ch >= 'a' && ch <= 'z', up = ch >= 'A' && ch <= 'Z';
            cased |= lo || up;
            if (!strcmp(name, "isdigit")) r &= dg;
            else if (!strcmp(name, "isalpha")) r &= lo || up;
            else if (!strcmp(name, "isalnum")) r &= lo || up || dg;
            else if (!strcmp(name, "isspace")) r &= py_space((unsigned char)ch);
            else if (!strcmp(name, "isupper")) r &= !lo;
            else if (!strcmp(name, "islower")) r &= !up;
        }
        if (!strcmp(name, "isupper") || !strcmp(name, "islower")) r = r && cased;
        *out = jv_bool(r);
        return true;
    }
    if (!strcmp(name, "format")) { /* "{}", "{0}" and "{name}" fields, no format specs */
        jbuf b = {0};
        int64_t next = 0;
        bool ok = true;
        for (size_t i = 0; i < s.str.n && ok; i++) {
            char ch = s.str.s[i];
            if ((ch == '{' || ch == '}') && i + 1 < s.str.n && s.str.s[i + 1] == ch) {
                jbuf_addc(&b, ch);
                i++;
                continue;
            }
            if (ch != '{') {
                jbuf_addc(&b, ch);
                continue;
            }
            size_t e = i + 1;
            while (e < s.str.n && s.str.s[e] != '}') e++;
            if (e >= s.str.n) {
                ok = rt_fail(c, EDDY_ERR_ARG, line, "single '{' encountered in format string");
                break;
            }
            const char *field = s.str.s + i + 1;
            size_t fl = e - i - 1;
            jv val = jv_undef();
            if (memchr(field, ':', fl) || memchr(field, '!', fl) || memchr(field, '.', fl) || memchr(field, '[', fl)) {
                ok = rt_fail(c, EDDY_ERR_UNSUPPORTED, line, "format specifications in str.format");
                break;
            }
            if (fl == 0) val = arg(a, next++, NULL, jv_undef());
            else if (field[0] >= '0' && field[0] <= '9') val = arg(a, atoi(field), NULL, jv_undef());
            else {
                char key[64];
                snprintf(key, sizeof key, "%.*s", (int)(fl < 63 ? fl : 63), field);
                val = arg(a, -1, key, jv_undef());
            }
            if (val.t == JV_UNDEF) {
                ok = rt_fail(c, EDDY_ERR_ARG, line, "str.format: missing argument for {%.*s}", (int)(fl > 40 ? 40 : fl), field);
                break;
            }
            jv_str_into(&b, val);
            i = e;
        }
        ok = ok && !b.oom && mkstr(c, b.p ? b.p : "", b.n, out);
        jbuf_free(&b);
        return ok;
    }
    return rt_fail(c, EDDY_ERR_UNSUPPORTED, line, "the string method '%s'", name);
}

/* ==== Calls ==== */

static bool exec_body(jctx *c, frame *f, jnode *const *body, int64_t n);

static bool call_macro(jctx *c, int line, const jnode *m, const jargs *a, jv *out) {
    if (c->depth >= MAX_CALL_DEPTH) return rt_fail(c, EDDY_ERR_ARG, line, "macros nested too deeply");
    frame *f = frame_new(c, c->root);
    if (!f) return false;
    if (a->n_pos > m->n_kids) return rt_fail(c, EDDY_ERR_ARG, line, "macro '%s' takes %lld arguments", m->s, (long long)m->n_kids);
    for (int64_t k = 0; k < a->n_kw; k++) {
        bool known = false;
        for (int64_t i = 0; i < m->n_kids; i++) known |= !strcmp(m->kids[i]->s, a->kw_names[k]);
        if (!known) return rt_fail(c, EDDY_ERR_ARG, line, "macro '%s' has no parameter '%s'", m->s, a->kw_names[k]);
    }
    for (int64_t i = 0; i < m->n_kids; i++) {
        const jnode *p = m->kids[i];
        jv v = arg(a, i, p->s, jv_undef());
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
    if (ok && body.oom) ok = oom(c);
    if (ok && body.over_limit) ok = rt_fail(c, EDDY_ERR_ARG, line, "the template's output is too large");
    if (ok) ok = mkstr(c, body.p ? body.p : "", body.n, out);
    jbuf_free(&body);
    return ok;
}

static bool call_global(jctx *c, int line, const char *name, const jargs *a, jv *out) {
    if (!strcmp(name, "raise_exception")) {
        jv msg;
        if (!to_str(c, arg(a, 0, NULL, jv_strn("", 0)), &msg)) return false;
        return rt_fail(c, EDDY_ERR_ARG, line, "the template refused the input: %.*s", (int)(msg.str.n > 300 ? 300 : msg.str.n),
                       msg.str.s);
    }
    if (!strcmp(name, "range")) {
        int64_t v[3] = {0, 0, 1};
        if (a->n_pos < 1 || a->n_pos > 3) return rt_fail(c, EDDY_ERR_ARG, line, "range takes 1 to 3 arguments");
        for (int64_t i = 0; i < a->n_pos; i++) {
            if (a->pos[i].t != JV_INT) return rt_fail(c, EDDY_ERR_ARG, line, "range needs integers");
        }
        if (a->n_pos == 1) v[1] = a->pos[0].i;
        else v[0] = a->pos[0].i, v[1] = a->pos[1].i;
        if (a->n_pos == 3) v[2] = a->pos[2].i;
        if (v[2] == 0) return rt_fail(c, EDDY_ERR_ARG, line, "range step cannot be zero");
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return oom(c);
        int64_t count = 0;
        for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2]) {
            if (++count > MAX_RANGE) return rt_fail(c, EDDY_ERR_ARG, line, "range too large");
            if (!jv_list_push(c->a, l, jv_int(i))) return oom(c);
        }
        *out = l;
        return true;
    }
    if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
        jv d = jv_dict_new(c->a);
        if (d.t != JV_DICT) return oom(c);
        if (a->n_pos == 1 && a->pos[0].t == JV_DICT) {
            for (int64_t i = 0; i < a->pos[0].dict->n; i++)
                if (!jv_dict_set(c->a, d, a->pos[0].dict->keys[i], a->pos[0].dict->vals[i])) return oom(c);
        } else if (a->n_pos) {
            return rt_fail(c, EDDY_ERR_UNSUPPORTED, line, "%s() with positional arguments", name);
        }
        for (int64_t k = 0; k < a->n_kw; k++) {
            jv key = jv_strn(a->kw_names[k], strlen(a->kw_names[k]));
            if (!jv_dict_set(c->a, d, key, a->kw[k])) return oom(c);
        }
        if (name[0] == 'n') d.t = JV_NS;
        *out = d;
        return true;
    }
    if (!strcmp(name, "strftime_now")) {
        jv fmt = arg(a, 0, NULL, jv_undef());
        if (fmt.t != JV_STR) return rt_fail(c, EDDY_ERR_ARG, line, "strftime_now needs a format string");
        char f[128], res[256];
        size_t n = fmt.str.n < sizeof f - 1 ? fmt.str.n : sizeof f - 1;
        memcpy(f, fmt.str.s, n);
        f[n] = '\0';
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        size_t len = strftime(res, sizeof res, f, &tmv);
        return mkstr(c, res, len, out);
    }
    return rt_fail(c, EDDY_ERR_UNSUPPORTED, line, "the function '%s'", name);
}

static bool call_value(jctx *c, int line, jv fn, const jargs *a, jv *out) {
    if (fn.t == JV_UNDEF) return undefined_error(c, line, fn);
    if (fn.t != JV_FUNC) return rt_fail(c, EDDY_ERR_ARG, line, "'%s' object is not callable", type_name(fn));
    switch (fn.fn->kind) {
    case FN_MACRO: return call_macro(c, line, fn.fn->macro, a, out);
    case FN_CYCLE: {
        if (a->n_pos == 0) return rt_fail(c, EDDY_ERR_ARG, line, "no items for cycling given");
        *out = a->pos[fn.fn->self.i % a->n_pos];
        return true;
    }
    case FN_GLOBAL:
        if (fn.fn->self.t != JV_UNDEF) return call_method(c, line, fn.fn->name, fn.fn->self, a, out);
        return call_global(c, line, fn.fn->name, a, out);
    }
    return false;
}

/* ==== Expressions ==== */

static bool eval(jctx *c, frame *f, const jnode *e, jv *out) {
    if (--c->budget < 0) return rt_fail(c, EDDY_ERR_ARG, e->line, "the template takes too long to render");
    switch (e->kind) {
    case JN_LIT: *out = e->lit; return true;
    case JN_NAME: *out = frame_get(f, e->s, e->s_len); return true;
    case JN_LISTLIT: case JN_TUPLE: {
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return oom(c);
        l.list->tuple = e->kind == JN_TUPLE;
        for (int64_t i = 0; i < e->n_kids; i++) {
            jv v;
            if (!eval(c, f, e->kids[i], &v)) return false;
            if (!jv_list_push(c->a, l, v)) return oom(c);
        }
        *out = l;
        return true;
    }
    case JN_DICTLIT: {
        jv d = jv_dict_new(c->a);
        if (d.t != JV_DICT) return oom(c);
        for (int64_t i = 0; i + 1 < e->n_kids; i += 2) {
            jv k, v;
            if (!eval(c, f, e->kids[i], &k) || !eval(c, f, e->kids[i + 1], &v)) return false;
            if (!jv_dict_set(c->a, d, k, v)) return oom(c);
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
        if (!get_item(c, e->line, obj, key, out)) return false;
        if (out->t == JV_UNDEF && key.t == JV_STR && (obj.t == JV_DICT || obj.t == JV_STR)) {
            /* obj['name'] falls back to the attribute, as Jinja's getitem does */
            char *nm = jarena_strdup(c->a, key.str.s, key.str.n);
            if (!nm) return oom(c);
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
        return slice_of(c, e->line, obj, parts[0], parts[1], parts[2], out);
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
        return apply_filter(c, e->line, e->s, v, &a, out);
    }
    case JN_TEST: {
        jv v;
        jargs a;
        bool r;
        if (!eval(c, f, e->a, &v) || !eval_args(c, f, e, &a) || !run_test(c, e->line, e->s, v, &a, &r)) return false;
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
        if (!is_numv(v)) return rt_fail(c, EDDY_ERR_ARG, e->line, "bad operand type for unary %c: '%s'", e->op, type_name(v));
        if (e->op == '+') *out = v.t == JV_BOOL ? jv_int(v.b) : v;
        else *out = v.t == JV_FLOAT ? jv_float(-v.f) : jv_int(numi(v) == INT64_MIN ? INT64_MIN : -numi(v));
        return true;
    }
    case JN_BINARY: {
        jv a, b;
        return eval(c, f, e->a, &a) && eval(c, f, e->b, &b) && binop(c, e->line, e->op, a, b, out);
    }
    case JN_COMPARE: {
        jv a, b;
        return eval(c, f, e->a, &a) && eval(c, f, e->b, &b) && compare(c, e->line, e->op, a, b, out);
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
    default: return rt_fail(c, EDDY_ERR_ARG, e->line, "a statement where an expression belongs");
    }
}

/* ==== Statements ==== */

static bool assign(jctx *c, frame *f, const jnode *target_holder, jv v) {
    if (target_holder->n_kids == 1) return frame_set(c, f, target_holder->kids[0]->s, v);
    if (v.t != JV_LIST || v.list->n != target_holder->n_kids)
        return rt_fail(c, EDDY_ERR_ARG, target_holder->line, "cannot unpack into %lld names", (long long)target_holder->n_kids);
    for (int64_t i = 0; i < target_holder->n_kids; i++)
        if (!frame_set(c, f, target_holder->kids[i]->s, v.list->items[i])) return false;
    return true;
}

static bool exec_for(jctx *c, frame *f, const jnode *s) {
    jv it;
    jv_list *items;
    if (!eval(c, f, s->a, &it) || !iter_items(c, s->line, it, &items)) return false;
    /* the loop's "if" filters the items first (loop.length counts what is left) */
    jv_list *kept = items;
    if (s->b) {
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return oom(c);
        for (int64_t i = 0; i < items->n; i++) {
            frame *tf = frame_new(c, f);
            jv cond;
            if (!tf || !assign(c, tf, s, items->items[i]) || !eval(c, tf, s->b, &cond)) return false;
            if (jv_truthy(cond) && !jv_list_push(c->a, l, items->items[i])) return oom(c);
        }
        kept = l.list;
    }
    int64_t n = kept->n;
    for (int64_t i = 0; i < n; i++) {
        frame *lf = frame_new(c, f);
        if (!lf || !assign(c, lf, s, kept->items[i])) return false;
        jv loop = jv_dict_new(c->a);
        jv_func *cyc = jarena_alloc(c->a, sizeof *cyc);
        if (loop.t != JV_DICT || !cyc) return oom(c);
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
            if (!jv_dict_set(c->a, loop, jv_strn(fields[k].k, strlen(fields[k].k)), fields[k].v)) return oom(c);
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
    if (--c->budget < 0) return rt_fail(c, EDDY_ERR_ARG, s->line, "the template takes too long to render");
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
        if (ns.t != JV_NS) return rt_fail(c, EDDY_ERR_ARG, s->line, "cannot assign attribute on non-namespace object");
        return jv_dict_set(c->a, ns, jv_strn(s->b->s, s->b->s_len), v) || oom(c);
    }
    case JN_SETBLOCK: {
        jbuf *saved = c->out, body = {0};
        body.limit = MAX_OUTPUT;
        c->out = &body;
        bool ok = exec_body(c, f, s->body, s->n_body);
        c->out = saved;
        jv v;
        if (ok && body.oom) ok = oom(c);
        if (ok) ok = mkstr(c, body.p ? body.p : "", body.n, &v);
        jbuf_free(&body);
        for (const jnode *fl = s->a; ok && fl; fl = NULL) {
            /* a filter chain: innermost first */
            const jnode *chain[32];
            int nc = 0;
            for (const jnode *q = fl; q && nc < 32; q = q->a) chain[nc++] = q;
            for (int k = nc - 1; ok && k >= 0; k--) {
                jargs a;
                ok = eval_args(c, f, chain[k], &a) && apply_filter(c, s->line, chain[k]->s, v, &a, &v);
            }
        }
        return ok && frame_set(c, f, s->kids[0]->s, v);
    }
    case JN_MACRO: {
        jv_func *fn = jarena_alloc(c->a, sizeof *fn);
        if (!fn) return oom(c);
        fn->kind = FN_MACRO;
        fn->macro = s;
        fn->name = s->s;
        jv v = {JV_FUNC, {.fn = fn}};
        return frame_set(c, f, s->s, v);
    }
    case JN_BREAK: c->ctl = 1; return true;
    case JN_CONTINUE: c->ctl = 2; return true;
    case JN_BLOCK: return exec_body(c, f, s->body, s->n_body);
    default: return rt_fail(c, EDDY_ERR_ARG, s->line, "an expression where a statement belongs");
    }
}

static bool exec_body(jctx *c, frame *f, jnode *const *body, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (!exec_stmt(c, f, body[i])) return false;
        if (c->ctl) return true; /* break / continue: unwind to the loop */
        if (c->out->oom) return oom(c);
        if (c->out->over_limit) return rt_fail(c, EDDY_ERR_ARG, body[i]->line, "the template's output is too large");
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
        if (!fn) return oom(&c), c.st;
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
                return oom(&c), c.st;
    c.root = user;
    if (!exec_body(&c, user, t->body, t->n_body) && c.st == EDDY_OK) oom(&c);
    if (c.st == EDDY_OK && c.ctl) c.ctl = 0; /* a break outside a loop ends the template, as Jinja refuses it earlier */
    return c.st;
}
