/*
 * jinja_builtins.c — the built-in tests (`is defined`, `is string`, ...), filters
 * (`|tojson`, `|join`, `|map`, ...) and str / dict methods (`.strip()`, `.split()`,
 * `.items()`, ...) that chat templates use, with Python's and Jinja's semantics.
 * Does not own expressions, calls or statements (jinja_eval.c), whose helpers it
 * uses through jinja_rt.h.
 *
 * Text is UTF-8; lengths, indexes and slices count characters as Python does.
 * Case mapping (upper, lower, title, capitalize) covers ASCII only.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "text/jinja.h"
#include "text/jinja_rt.h"
#include "text/unicode.h"

/* ==== Strings as Python sees them ==== */

/* Python's str.isspace() for one character. */
static bool py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static bool in_set(uint32_t cp, jv chars) {
    if (chars.t != JV_STR) return py_space(cp);
    for (size_t i = 0; i < chars.str.n;) {
        int k;
        if (jrt_u8_at(chars.str.s, chars.str.n, i, &k) == cp) return true;
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
            uint32_t cp = jrt_u8_at(p, b, a, &k);
            if (!in_set(cp, chars)) break;
            a += (size_t)k;
        }
    if (right)
        while (b > a) {
            size_t st = b - 1;
            while (st > a && ((unsigned char)p[st] & 0xC0) == 0x80) st--;
            int k;
            uint32_t cp = jrt_u8_at(p, b, st, &k);
            if (!in_set(cp, chars)) break;
            b = st;
        }
    return jv_strn(p + a, b - a);
}

static bool has_prefix(jv s, jv pre) { return pre.str.n <= s.str.n && !memcmp(s.str.s, pre.str.s, pre.str.n); }
static bool has_suffix(jv s, jv suf) {
    return suf.str.n <= s.str.n && !memcmp(s.str.s + s.str.n - suf.str.n, suf.str.s, suf.str.n);
}

static bool ascii_case(jctx *c, jv s, int mode, jv *out) { /* 0 lower, 1 upper, 2 title, 3 capitalize */
    char *p = jarena_alloc(c->a, s.str.n + 1);
    if (!p) return jrt_oom(c);
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

/* ==== Tests ==== */

bool jrt_run_test(jctx *c, int line, const char *name, jv v, const jargs *a, bool *res) {
    jv x = jrt_arg(a, 0, NULL, jv_undef());
    if (!strcmp(name, "defined")) *res = v.t != JV_UNDEF;
    else if (!strcmp(name, "undefined")) *res = v.t == JV_UNDEF;
    else if (!strcmp(name, "none")) *res = v.t == JV_NONE;
    else if (!strcmp(name, "string")) *res = v.t == JV_STR;
    else if (!strcmp(name, "mapping")) *res = v.t == JV_DICT;
    else if (!strcmp(name, "iterable")) *res = v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT || v.t == JV_UNDEF;
    else if (!strcmp(name, "sequence")) *res = v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT;
    else if (!strcmp(name, "number")) *res = jrt_is_numv(v);
    else if (!strcmp(name, "integer")) *res = v.t == JV_INT;
    else if (!strcmp(name, "float")) *res = v.t == JV_FLOAT;
    else if (!strcmp(name, "boolean")) *res = v.t == JV_BOOL;
    else if (!strcmp(name, "true")) *res = v.t == JV_BOOL && v.b;
    else if (!strcmp(name, "false")) *res = v.t == JV_BOOL && !v.b;
    else if (!strcmp(name, "callable")) *res = v.t == JV_FUNC;
    else if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        if (v.t != JV_INT) return jrt_fail(c, EDDY_ERR_ARG, line, "'%s' test needs an integer", name);
        *res = (v.i % 2 != 0) == (name[0] == 'o');
    } else if (!strcmp(name, "divisibleby")) {
        if (v.t != JV_INT || x.t != JV_INT || x.i == 0) return jrt_fail(c, EDDY_ERR_ARG, line, "bad divisibleby");
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
        return jrt_contains(c, line, v, x, res);
    } else if (!strcmp(name, "sameas")) {
        *res = v.t == x.t && (v.t == JV_NONE || v.t == JV_UNDEF || (v.t == JV_BOOL && v.b == x.b) || jv_equal(v, x));
    } else {
        int op = !strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==") ? '=' :
                 !strcmp(name, "ne") || !strcmp(name, "!=") ? '!' :
                 !strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<") ? '<' :
                 !strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">") ? '>' :
                 !strcmp(name, "le") || !strcmp(name, "<=") ? 'l' : !strcmp(name, "ge") || !strcmp(name, ">=") ? 'g' : 0;
        if (!op) return jrt_fail(c, EDDY_ERR_UNSUPPORTED, line, "the test '%s'", name);
        jv r;
        if (!jrt_compare(c, line, op, v, x, &r)) return false;
        *res = r.b;
    }
    return true;
}

/* ==== Filters ==== */

static bool json_filter(jctx *c, int line, jv v, const jargs *a, jv *out) {
    jv ea = jrt_arg(a, 0, "ensure_ascii", jv_bool(false));
    jv indent = jrt_arg(a, 1, "indent", jv_none());
    jv seps = jrt_arg(a, 2, "separators", jv_none());
    jv sort = jrt_arg(a, 3, "sort_keys", jv_bool(false));
    const char *isep = NULL, *ksep = NULL;
    if (seps.t == JV_LIST && seps.list->n == 2 && seps.list->items[0].t == JV_STR && seps.list->items[1].t == JV_STR) {
        isep = jarena_strdup(c->a, seps.list->items[0].str.s, seps.list->items[0].str.n);
        ksep = jarena_strdup(c->a, seps.list->items[1].str.s, seps.list->items[1].str.n);
        if (!isep || !ksep) return jrt_oom(c);
    }
    int ind = indent.t == JV_INT ? (int)(indent.i < 0 ? 0 : indent.i > 64 ? 64 : indent.i) : -1;
    jbuf b = {0};
    const char *bad = NULL;
    if (!jv_json_into(&b, v, jv_truthy(ea), ind, isep, ksep, jv_truthy(sort), &bad)) {
        jbuf_free(&b);
        return jrt_fail(c, EDDY_ERR_ARG, line, "Object of type %s is not JSON serializable", bad);
    }
    bool ok = !b.oom && jrt_mkstr(c, b.p ? b.p : "", b.n, out);
    jbuf_free(&b);
    return ok || jrt_oom(c);
}

/* map / select / reject / selectattr / rejectattr over a list. */
static bool seq_filter(jctx *c, int line, const char *name, jv v, const jargs *a, jv *out) {
    jv l = jv_list_new(c->a);
    if (l.t != JV_LIST) return jrt_oom(c);
    *out = l;
    if (!jv_truthy(v)) return true; /* Jinja: "if value: for item in value" */
    jv_list *items;
    if (!jrt_iter_items(c, line, v, &items)) return false;
    bool attr = !strcmp(name, "selectattr") || !strcmp(name, "rejectattr");
    bool reject = name[0] == 'r';
    for (int64_t i = 0; i < items->n; i++) {
        jv it = items->items[i];
        if (!strcmp(name, "map")) {
            jv at = jrt_arg(a, -1, "attribute", jv_undef());
            if (at.t == JV_STR) {
                jv r;
                if (!jrt_get_item(c, line, it, at, &r)) return false;
                if (r.t == JV_UNDEF) r = jrt_arg(a, -1, "default", r);
                if (!jv_list_push(c->a, l, r)) return jrt_oom(c);
                continue;
            }
            return jrt_fail(c, EDDY_ERR_UNSUPPORTED, line, "map with a filter name");
        }
        jv subject = it;
        int64_t first = 0;
        if (attr) {
            jv at = jrt_arg(a, 0, NULL, jv_undef());
            if (at.t != JV_STR) return jrt_fail(c, EDDY_ERR_ARG, line, "%s needs an attribute name", name);
            if (!jrt_get_item(c, line, it, at, &subject)) return false;
            first = 1;
        }
        jv tname = jrt_arg(a, first, NULL, jv_undef());
        bool keep;
        if (tname.t == JV_UNDEF) {
            keep = jv_truthy(subject);
        } else {
            if (tname.t != JV_STR) return jrt_fail(c, EDDY_ERR_ARG, line, "%s needs a test name", name);
            jargs ta = {a->pos + first + 1, a->n_pos > first + 1 ? a->n_pos - first - 1 : 0, NULL, NULL, 0};
            char *tn = jarena_strdup(c->a, tname.str.s, tname.str.n);
            if (!tn) return jrt_oom(c);
            if (!jrt_run_test(c, line, tn, subject, &ta, &keep)) return false;
        }
        if (keep != reject && !jv_list_push(c->a, l, it)) return jrt_oom(c);
    }
    *out = l;
    return true;
}

bool jrt_apply_filter(jctx *c, int line, const char *name, jv v, const jargs *a, jv *out) {
    if (!strcmp(name, "safe") || (!strcmp(name, "list") && v.t == JV_LIST)) { /* lists are never changed */
        *out = v;
        return true;
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) {
        int64_t n = 0;
        if (!jrt_length_of(c, line, v, &n)) return false;
        *out = jv_int(n);
        return true;
    }
    if (!strcmp(name, "string")) return jrt_to_str(c, v, out);
    if (!strcmp(name, "tojson")) return json_filter(c, line, v, a, out);
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        jv def = jrt_arg(a, 0, "default_value", jv_strn("", 0));
        bool boolean = jv_truthy(jrt_arg(a, 1, "boolean", jv_bool(false)));
        *out = v.t == JV_UNDEF || (boolean && !jv_truthy(v)) ? def : v;
        return true;
    }
    if (!strcmp(name, "trim")) {
        jv s;
        if (!jrt_to_str(c, v, &s)) return false;
        *out = py_strip(s, jrt_arg(a, 0, "chars", jv_none()), true, true);
        return true;
    }
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") || !strcmp(name, "capitalize")) {
        jv s;
        if (!jrt_to_str(c, v, &s)) return false;
        return ascii_case(c, s, name[0] == 'l' ? 0 : name[0] == 'u' ? 1 : name[0] == 't' ? 2 : 3, out);
    }
    if (!strcmp(name, "items")) {
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return jrt_oom(c);
        if (v.t == JV_DICT)
            for (int64_t i = 0; i < v.dict->n; i++) {
                jv pair = jv_list_new(c->a);
                if (pair.t == JV_LIST) pair.list->tuple = true;
                if (pair.t != JV_LIST || !jv_list_push(c->a, pair, v.dict->keys[i]) ||
                    !jv_list_push(c->a, pair, v.dict->vals[i]) || !jv_list_push(c->a, l, pair))
                    return jrt_oom(c);
            }
        else if (v.t != JV_UNDEF)
            return jrt_fail(c, EDDY_ERR_ARG, line, "items: a mapping is required, not %s", jrt_type_name(v));
        *out = l;
        return true;
    }
    if (!strcmp(name, "list")) {
        jv_list *items;
        if (!jrt_iter_items(c, line, v, &items)) return false;
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return jrt_oom(c);
        for (int64_t i = 0; i < items->n; i++)
            if (!jv_list_push(c->a, l, items->items[i])) return jrt_oom(c);
        *out = l;
        return true;
    }
    if (!strcmp(name, "join")) {
        jv_list *items;
        if (!jrt_iter_items(c, line, v, &items)) return false;
        jv sep = jrt_arg(a, 0, "d", jv_strn("", 0)), at = jrt_arg(a, 1, "attribute", jv_undef());
        jbuf b = {0};
        for (int64_t i = 0; i < items->n; i++) {
            jv it = items->items[i];
            if (at.t != JV_UNDEF && !jrt_get_item(c, line, it, at, &it)) {
                jbuf_free(&b);
                return false;
            }
            if (i) jv_str_into(&b, sep);
            jv_str_into(&b, it);
        }
        bool ok = !b.oom && jrt_mkstr(c, b.p ? b.p : "", b.n, out);
        jbuf_free(&b);
        return ok || jrt_oom(c);
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        jv_list *items;
        if (!jrt_iter_items(c, line, v, &items)) return false;
        *out = items->n ? items->items[name[0] == 'f' ? 0 : items->n - 1] : jv_undef();
        return true;
    }
    if (!strcmp(name, "reverse")) {
        if (v.t == JV_STR) return jrt_slice_of(c, line, v, jv_none(), jv_none(), jv_int(-1), out);
        jv_list *items;
        if (!jrt_iter_items(c, line, v, &items)) return false;
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return jrt_oom(c);
        for (int64_t i = items->n - 1; i >= 0; i--)
            if (!jv_list_push(c->a, l, items->items[i])) return jrt_oom(c);
        *out = l;
        return true;
    }
    if (!strcmp(name, "replace")) {
        jv s, old = jrt_arg(a, 0, "old", jv_undef()), new_ = jrt_arg(a, 1, "new", jv_undef());
        jv cnt = jrt_arg(a, 2, "count", jv_none());
        if (!jrt_to_str(c, v, &s)) return false;
        if (old.t != JV_STR || new_.t != JV_STR) return jrt_fail(c, EDDY_ERR_ARG, line, "replace needs two strings");
        if (old.str.n == 0) return jrt_fail(c, EDDY_ERR_UNSUPPORTED, line, "replace of an empty string");
        int64_t left = cnt.t == JV_INT && cnt.i >= 0 ? cnt.i : INT64_MAX;
        jbuf b = {0};
        size_t i = 0;
        const char *hit;
        while (left > 0 && (hit = jrt_find_bytes(s.str.s + i, s.str.n - i, old.str.s, old.str.n))) {
            jbuf_add(&b, s.str.s + i, (size_t)(hit - (s.str.s + i)));
            jbuf_add(&b, new_.str.s, new_.str.n);
            i = (size_t)(hit - s.str.s) + old.str.n;
            left--;
        }
        jbuf_add(&b, s.str.s + i, s.str.n - i);
        bool ok = !b.oom && jrt_mkstr(c, b.p ? b.p : "", b.n, out);
        jbuf_free(&b);
        return ok || jrt_oom(c);
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
            *out = end != tmp ? jv_int(x) : jrt_arg(a, 0, "default", jv_int(0));
        } else *out = jrt_arg(a, 0, "default", jv_int(0));
        return true;
    }
    if (!strcmp(name, "float")) {
        if (jrt_is_numv(v)) *out = jv_float(jrt_numf(v));
        else *out = jrt_arg(a, 0, "default", jv_float(0.0));
        return true;
    }
    if (!strcmp(name, "abs")) {
        if (!jrt_is_numv(v))
            return jrt_fail(c, EDDY_ERR_ARG, line, "bad operand type for abs(): '%s'", jrt_type_name(v));
        *out = v.t == JV_FLOAT ? jv_float(fabs(v.f)) : jv_int(jrt_numi(v) < 0 ? -jrt_numi(v) : jrt_numi(v));
        return true;
    }
    if (!strcmp(name, "escape") || !strcmp(name, "e")) {
        jv s;
        if (!jrt_to_str(c, v, &s)) return false;
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
        bool ok = !b.oom && jrt_mkstr(c, b.p ? b.p : "", b.n, out);
        jbuf_free(&b);
        return ok || jrt_oom(c);
    }
    if (!strcmp(name, "map") || !strcmp(name, "select") || !strcmp(name, "reject") || !strcmp(name, "selectattr") ||
        !strcmp(name, "rejectattr"))
        return seq_filter(c, line, name, v, a, out);
    if (!strcmp(name, "dictsort")) {
        if (v.t != JV_DICT) return jrt_fail(c, EDDY_ERR_ARG, line, "dictsort: a mapping is required, not %s", jrt_type_name(v));
        bool cs = jv_truthy(jrt_arg(a, 0, "case_sensitive", jv_bool(false)));
        jv by = jrt_arg(a, 1, "by", jv_strn("key", 3));
        bool rev = jv_truthy(jrt_arg(a, 2, "reverse", jv_bool(false)));
        bool by_value = by.t == JV_STR && by.str.n == 5 && !memcmp(by.str.s, "value", 5);
        jv pairs;
        if (!jrt_apply_filter(c, line, "items", v, a, &pairs)) return false;
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
                if (!jrt_compare(c, line, rev ? '<' : '>', la, lb, &gt)) return false;
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
        if (!jrt_iter_items(c, line, v, &items)) return false;
        *out = jv_undef();
        for (int64_t i = 0; i < items->n; i++) {
            jv better;
            if (i && !jrt_compare(c, line, name[1] == 'i' ? '<' : '>', items->items[i], *out, &better)) return false;
            if (i == 0 || better.b) *out = items->items[i];
        }
        return true;
    }
    if (!strcmp(name, "unique")) {
        jv_list *items;
        if (!jrt_iter_items(c, line, v, &items)) return false;
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return jrt_oom(c);
        for (int64_t i = 0; i < items->n; i++) {
            bool seen;
            if (!jrt_contains(c, line, items->items[i], l, &seen)) return false;
            if (!seen && !jv_list_push(c->a, l, items->items[i])) return jrt_oom(c);
        }
        *out = l;
        return true;
    }
    return jrt_fail(c, EDDY_ERR_UNSUPPORTED, line, "the filter '%s'", name);
}

/* ==== Methods (str and dict) ==== */

static bool split_str(jctx *c, jv s, jv sep, int64_t maxsplit, jv *out) {
    jv l = jv_list_new(c->a);
    if (l.t != JV_LIST) return jrt_oom(c);
    const char *p = s.str.s;
    size_t n = s.str.n, i = 0;
    if (sep.t != JV_STR) { /* runs of whitespace, no empty pieces */
        for (;;) {
            while (i < n) {
                int k;
                if (!py_space(jrt_u8_at(p, n, i, &k))) break;
                i += (size_t)k;
            }
            if (i >= n) break;
            size_t st = i;
            if (maxsplit == 0) {
                /* the rest, without trailing whitespace */
                jv rest = py_strip(jv_strn(p + st, n - st), jv_none(), false, true);
                if (!jv_list_push(c->a, l, rest)) return jrt_oom(c);
                break;
            }
            while (i < n) {
                int k;
                if (py_space(jrt_u8_at(p, n, i, &k))) break;
                i += (size_t)k;
            }
            if (!jv_list_push(c->a, l, jv_strn(p + st, i - st))) return jrt_oom(c);
            if (maxsplit > 0) maxsplit--;
        }
        *out = l;
        return true;
    }
    if (sep.str.n == 0) return false;
    for (;;) {
        const char *hit = maxsplit != 0 ? jrt_find_bytes(p + i, n - i, sep.str.s, sep.str.n) : NULL;
        if (!hit) {
            if (!jv_list_push(c->a, l, jv_strn(p + i, n - i))) return jrt_oom(c);
            break;
        }
        if (!jv_list_push(c->a, l, jv_strn(p + i, (size_t)(hit - (p + i))))) return jrt_oom(c);
        i = (size_t)(hit - p) + sep.str.n;
        if (maxsplit > 0) maxsplit--;
    }
    *out = l;
    return true;
}

bool jrt_call_method(jctx *c, int line, const char *name, jv self, const jargs *a, jv *out) {
    if (self.t == JV_DICT) {
        if (!strcmp(name, "get")) {
            jv r = jv_dict_getv(self, jrt_arg(a, 0, NULL, jv_undef()));
            *out = r.t == JV_UNDEF ? jrt_arg(a, 1, NULL, jv_none()) : r;
            return true;
        }
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return jrt_oom(c);
        for (int64_t i = 0; i < self.dict->n; i++) {
            jv item = name[0] == 'k' ? self.dict->keys[i] : self.dict->vals[i];
            if (name[0] == 'i') {
                item = jv_list_new(c->a);
                if (item.t == JV_LIST) item.list->tuple = true;
                if (item.t != JV_LIST || !jv_list_push(c->a, item, self.dict->keys[i]) ||
                    !jv_list_push(c->a, item, self.dict->vals[i]))
                    return jrt_oom(c);
            }
            if (!jv_list_push(c->a, l, item)) return jrt_oom(c);
        }
        *out = l;
        return true;
    }
    /* str */
    jv s = self, x = jrt_arg(a, 0, NULL, jv_none());
    if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
        if (x.t != JV_NONE && x.t != JV_STR) return jrt_fail(c, EDDY_ERR_ARG, line, "%s arg must be None or str", name);
        *out = py_strip(s, x, name[0] != 'r', name[0] != 'l');
        return true;
    }
    if (!strcmp(name, "split")) {
        jv ms = jrt_arg(a, 1, "maxsplit", jv_int(-1));
        jv sep = jrt_arg(a, 0, "sep", jv_none());
        if (sep.t == JV_STR && sep.str.n == 0) return jrt_fail(c, EDDY_ERR_ARG, line, "empty separator");
        if (sep.t != JV_STR && sep.t != JV_NONE) return jrt_fail(c, EDDY_ERR_ARG, line, "must be str or None");
        return split_str(c, s, sep, ms.t == JV_INT ? ms.i : -1, out);
    }
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
        bool r = false;
        jv_list one = {&x, 1, 1, true}, *opts = x.t == JV_LIST ? x.list : &one;
        for (int64_t i = 0; i < opts->n; i++) {
            if (opts->items[i].t != JV_STR) return jrt_fail(c, EDDY_ERR_ARG, line, "%s arg must be str or a tuple of str", name);
            r |= name[0] == 's' ? has_prefix(s, opts->items[i]) : has_suffix(s, opts->items[i]);
        }
        *out = jv_bool(r);
        return true;
    }
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") || !strcmp(name, "capitalize"))
        return ascii_case(c, s, name[0] == 'l' ? 0 : name[0] == 'u' ? 1 : name[0] == 't' ? 2 : 3, out);
    if (!strcmp(name, "replace")) {
        jargs ra = *a;
        return jrt_apply_filter(c, line, "replace", s, &ra, out);
    }
    if (!strcmp(name, "find") || !strcmp(name, "rfind") || !strcmp(name, "index") || !strcmp(name, "count")) {
        if (x.t != JV_STR) return jrt_fail(c, EDDY_ERR_ARG, line, "%s needs a string", name);
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
        if (found < 0 && name[0] == 'i') return jrt_fail(c, EDDY_ERR_ARG, line, "substring not found");
        *out = jv_int(found < 0 ? -1 : jrt_u8_len(s.str.s, (size_t)found));
        return true;
    }
    if (!strcmp(name, "join")) {
        jargs ja = {&s, 1, NULL, NULL, 0};
        return jrt_apply_filter(c, line, "join", x, &ja, out);
    }
    if (!strcmp(name, "splitlines")) {
        jv l = jv_list_new(c->a);
        if (l.t != JV_LIST) return jrt_oom(c);
        size_t st = 0;
        for (size_t i = 0; i < s.str.n; i++) {
            if (s.str.s[i] != '\n' && s.str.s[i] != '\r') continue;
            if (!jv_list_push(c->a, l, jv_strn(s.str.s + st, i - st))) return jrt_oom(c);
            if (s.str.s[i] == '\r' && i + 1 < s.str.n && s.str.s[i + 1] == '\n') i++;
            st = i + 1;
        }
        if (st < s.str.n && !jv_list_push(c->a, l, jv_strn(s.str.s + st, s.str.n - st))) return jrt_oom(c);
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
                ok = jrt_fail(c, EDDY_ERR_ARG, line, "single '{' encountered in format string");
                break;
            }
            const char *field = s.str.s + i + 1;
            size_t fl = e - i - 1;
            jv val = jv_undef();
            if (memchr(field, ':', fl) || memchr(field, '!', fl) || memchr(field, '.', fl) || memchr(field, '[', fl)) {
                ok = jrt_fail(c, EDDY_ERR_UNSUPPORTED, line, "format specifications in str.format");
                break;
            }
            if (fl == 0) val = jrt_arg(a, next++, NULL, jv_undef());
            else if (field[0] >= '0' && field[0] <= '9') val = jrt_arg(a, atoi(field), NULL, jv_undef());
            else {
                char key[64];
                snprintf(key, sizeof key, "%.*s", (int)(fl < 63 ? fl : 63), field);
                val = jrt_arg(a, -1, key, jv_undef());
            }
            if (val.t == JV_UNDEF) {
                ok = jrt_fail(c, EDDY_ERR_ARG, line, "str.format: missing argument for {%.*s}", (int)(fl > 40 ? 40 : fl), field);
                break;
            }
            jv_str_into(&b, val);
            i = e;
        }
        ok = ok && !b.oom && jrt_mkstr(c, b.p ? b.p : "", b.n, out);
        jbuf_free(&b);
        return ok;
    }
    return jrt_fail(c, EDDY_ERR_UNSUPPORTED, line, "the string method '%s'", name);
}
