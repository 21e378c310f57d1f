/*
 * jvalue.c — the arena, values, Python's str()/repr(), and JSON in and out.
 */
#include "text/jvalue.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "text/unicode.h"

/* ==== Arena ==== */

typedef struct jchunk jchunk;
struct jchunk {
    jchunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

struct jarena {
    jchunk *head;
    size_t total, limit;
    bool over;
};

void jarena_set_limit(jarena *a, size_t more) { a->limit = a->total + more; }
bool jarena_over_limit(const jarena *a) { return a->over; }

jarena *jarena_new(void) { return eddy_calloc(1, sizeof(jarena)); }

void jarena_free(jarena *a) {
    if (!a) return;
    for (jchunk *c = a->head, *next; c; c = next) {
        next = c->next;
        eddy_free(c);
    }
    eddy_free(a);
}

void *jarena_alloc(jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    jchunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 32768 ? n : 32768;
        if (a->limit && a->total + cap > a->limit) {
            a->over = true;
            return NULL;
        }
        c = eddy_malloc(sizeof(jchunk) + cap);
        if (!c) return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
        a->total += cap;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *jarena_strdup(jarena *a, const char *s, size_t n) {
    char *p = jarena_alloc(a, n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* ==== Values ==== */

jv jv_str_copy(jarena *a, const char *s, size_t n) {
    char *p = jarena_strdup(a, s, n);
    return p ? jv_strn(p, n) : jv_undef();
}

jv jv_list_new(jarena *a) {
    jv v = {JV_LIST, {.list = jarena_alloc(a, sizeof(jv_list))}};
    return v.list ? v : jv_undef();
}

jv jv_dict_new(jarena *a) {
    jv v = {JV_DICT, {.dict = jarena_alloc(a, sizeof(jv_dict))}};
    return v.dict ? v : jv_undef();
}

bool jv_list_push(jarena *a, jv list, jv item) {
    jv_list *l = list.list;
    if (l->n == l->cap) {
        int64_t cap = l->cap ? l->cap * 2 : 8;
        jv *items = jarena_alloc(a, (size_t)cap * sizeof(jv));
        if (!items) return false;
        if (l->n) memcpy(items, l->items, (size_t)l->n * sizeof(jv));
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = item;
    return true;
}

jv jv_dict_getv(jv dict, jv key) {
    jv_dict *d = dict.dict;
    for (int64_t i = 0; i < d->n; i++)
        if (jv_equal(d->keys[i], key)) return d->vals[i];
    return jv_undef();
}

jv jv_dict_get(jv dict, const char *key, size_t n) { return jv_dict_getv(dict, jv_strn(key, n)); }

bool jv_dict_set(jarena *a, jv dict, jv key, jv val) {
    jv_dict *d = dict.dict;
    for (int64_t i = 0; i < d->n; i++)
        if (jv_equal(d->keys[i], key)) {
            d->vals[i] = val;
            return true;
        }
    if (d->n == d->cap) {
        int64_t cap = d->cap ? d->cap * 2 : 8;
        jv *keys = jarena_alloc(a, (size_t)cap * sizeof(jv)), *vals = jarena_alloc(a, (size_t)cap * sizeof(jv));
        if (!keys || !vals) return false;
        if (d->n) {
            memcpy(keys, d->keys, (size_t)d->n * sizeof(jv));
            memcpy(vals, d->vals, (size_t)d->n * sizeof(jv));
        }
        d->keys = keys, d->vals = vals, d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n] = val;
    d->n++;
    return true;
}

bool jv_truthy(jv v) {
    switch (v.t) {
    case JV_UNDEF: case JV_NONE: return false;
    case JV_BOOL: return v.b;
    case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0;
    case JV_STR: return v.str.n != 0;
    case JV_LIST: return v.list->n != 0;
    case JV_DICT: return v.dict->n != 0;
    case JV_NS: case JV_FUNC: return true;
    }
    return false;
}

static bool is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static double num_of(jv v) { return v.t == JV_FLOAT ? v.f : v.t == JV_INT ? (double)v.i : v.b; }

bool jv_equal(jv a, jv b) {
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT)
            return (a.t == JV_INT ? a.i : a.b) == (b.t == JV_INT ? b.i : b.b);
        return num_of(a) == num_of(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case JV_UNDEF: case JV_NONE: return true;
    case JV_STR: return a.str.n == b.str.n && (a.str.n == 0 || memcmp(a.str.s, b.str.s, a.str.n) == 0);
    case JV_LIST:
        if (a.list->n != b.list->n) return false;
        for (int64_t i = 0; i < a.list->n; i++)
            if (!jv_equal(a.list->items[i], b.list->items[i])) return false;
        return true;
    case JV_DICT:
        if (a.dict->n != b.dict->n) return false;
        for (int64_t i = 0; i < a.dict->n; i++) {
            jv o = jv_dict_getv(b, a.dict->keys[i]);
            if (o.t == JV_UNDEF || !jv_equal(a.dict->vals[i], o)) return false;
        }
        return true;
    default: return a.dict == b.dict; /* namespaces and functions: identity */
    }
}

/* ==== Text ==== */

void jbuf_add(jbuf *b, const char *s, size_t n) {
    if (b->oom || n == 0) return;
    if (b->limit && b->n + n > b->limit) {
        b->over_limit = true;
        return;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = eddy_realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void jbuf_addc(jbuf *b, char c) { jbuf_add(b, &c, 1); }

void jbuf_free(jbuf *b) {
    eddy_free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

void jv_float_into(jbuf *b, double f) {
    if (isnan(f)) {
        jbuf_add(b, "nan", 3);
        return;
    }
    if (isinf(f)) {
        jbuf_add(b, f < 0 ? "-inf" : "inf", f < 0 ? 4 : 3);
        return;
    }
    /* Python's repr: the shortest digits that read back exactly, written plainly
     * for exponents -4 .. 15 (with ".0" when integral), else as d.ddde+XX */
    char tmp[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    char digits[24];
    int nd = 0, exp10 = 0;
    const char *q = tmp;
    if (*q == '-') {
        jbuf_addc(b, '-');
        q++;
    }
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9') digits[nd++] = *q;
    if (*q == 'e') exp10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 >= 0) {
            for (int i = 0; i <= exp10; i++) jbuf_addc(b, i < nd ? digits[i] : '0');
            jbuf_addc(b, '.');
            if (nd > exp10 + 1) jbuf_add(b, digits + exp10 + 1, (size_t)(nd - exp10 - 1));
            else jbuf_addc(b, '0');
        } else {
            jbuf_add(b, "0.", 2);
            for (int i = 0; i < -exp10 - 1; i++) jbuf_addc(b, '0');
            jbuf_add(b, digits, (size_t)nd);
        }
        return;
    }
    jbuf_addc(b, digits[0]);
    if (nd > 1) {
        jbuf_addc(b, '.');
        jbuf_add(b, digits + 1, (size_t)(nd - 1));
    }
    int len = snprintf(tmp, sizeof tmp, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    jbuf_add(b, tmp, (size_t)len);
}

static void repr_str(jbuf *b, const char *s, size_t n) {
    /* Python picks single quotes unless the text has ' and no " */
    bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    jbuf_addc(b, q);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        char tmp[12];
        if (c == (unsigned char)q || c == '\\') {
            jbuf_addc(b, '\\');
            jbuf_addc(b, (char)c);
        } else if (c == '\n') jbuf_add(b, "\\n", 2);
        else if (c == '\r') jbuf_add(b, "\\r", 2);
        else if (c == '\t') jbuf_add(b, "\\t", 2);
        else if (c < 0x20 || c == 0x7F) {
            snprintf(tmp, sizeof tmp, "\\x%02x", c);
            jbuf_add(b, tmp, 4);
        } else if (c < 0x80) jbuf_addc(b, (char)c);
        else {
            uint32_t cp;
            int k = utf8_decode((const uint8_t *)s + i, n - i, &cp);
            if (k < 0) k = -k; /* not reachable for text from templates and JSON */
            if (k > 0 && (cp < 0xA0 || cp == 0xAD)) {
                snprintf(tmp, sizeof tmp, "\\x%02x", cp);
                jbuf_add(b, tmp, 4);
            } else {
                jbuf_add(b, s + i, (size_t)k);
            }
            i += (size_t)k;
            continue;
        }
        i++;
    }
    jbuf_addc(b, q);
}

void jv_repr_into(jbuf *b, jv v) {
    switch (v.t) {
    case JV_STR: repr_str(b, v.str.s, v.str.n); return;
    case JV_LIST:
        jbuf_addc(b, v.list->tuple ? '(' : '[');
        for (int64_t i = 0; i < v.list->n; i++) {
            if (i) jbuf_add(b, ", ", 2);
            jv_repr_into(b, v.list->items[i]);
        }
        if (v.list->tuple && v.list->n == 1) jbuf_addc(b, ',');
        jbuf_addc(b, v.list->tuple ? ')' : ']');
        return;
    case JV_DICT:
        jbuf_addc(b, '{');
        for (int64_t i = 0; i < v.dict->n; i++) {
            if (i) jbuf_add(b, ", ", 2);
            jv_repr_into(b, v.dict->keys[i]);
            jbuf_add(b, ": ", 2);
            jv_repr_into(b, v.dict->vals[i]);
        }
        jbuf_addc(b, '}');
        return;
    default: jv_str_into(b, v); return;
    }
}

void jv_str_into(jbuf *b, jv v) {
    char tmp[32];
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_NONE: jbuf_add(b, "None", 4); return;
    case JV_BOOL: jbuf_add(b, v.b ? "True" : "False", v.b ? 4 : 5); return;
    case JV_INT: jbuf_add(b, tmp, (size_t)snprintf(tmp, sizeof tmp, "%lld", (long long)v.i)); return;
    case JV_FLOAT: jv_float_into(b, v.f); return;
    case JV_STR: jbuf_add(b, v.str.s, v.str.n); return;
    case JV_LIST: case JV_DICT: jv_repr_into(b, v); return;
    case JV_NS: jbuf_add(b, "<Namespace>", 11); return;
    case JV_FUNC: jbuf_add(b, "<function>", 10); return;
    }
}

/* ==== JSON out (Python's json.dumps) ==== */

static void json_str(jbuf *b, const char *s, size_t n, bool ensure_ascii) {
    static const char hex[] = "0123456789abcdef";
    jbuf_addc(b, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        char tmp[16];
        switch (c) {
        case '"': jbuf_add(b, "\\\"", 2); i++; continue;
        case '\\': jbuf_add(b, "\\\\", 2); i++; continue;
        case '\n': jbuf_add(b, "\\n", 2); i++; continue;
        case '\r': jbuf_add(b, "\\r", 2); i++; continue;
        case '\t': jbuf_add(b, "\\t", 2); i++; continue;
        case '\b': jbuf_add(b, "\\b", 2); i++; continue;
        case '\f': jbuf_add(b, "\\f", 2); i++; continue;
        default: break;
        }
        if (c < 0x20 || (ensure_ascii && c == 0x7F)) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            jbuf_add(b, tmp, 6);
            i++;
        } else if (c < 0x80 || !ensure_ascii) {
            jbuf_addc(b, (char)c);
            i++;
        } else {
            uint32_t cp;
            int k = utf8_decode((const uint8_t *)s + i, n - i, &cp);
            if (k <= 0) {
                cp = 0xFFFD;
                k = k < 0 ? -k : 1;
            }
            uint32_t units[2] = {cp, 0};
            int nu = 1;
            if (cp >= 0x10000) {
                units[0] = 0xD800 + ((cp - 0x10000) >> 10);
                units[1] = 0xDC00 + ((cp - 0x10000) & 0x3FF);
                nu = 2;
            }
            for (int u = 0; u < nu; u++) {
                tmp[0] = '\\', tmp[1] = 'u';
                for (int d = 0; d < 4; d++) tmp[2 + d] = hex[(units[u] >> (12 - 4 * d)) & 15];
                jbuf_add(b, tmp, 6);
            }
            i += (size_t)k;
        }
    }
    jbuf_addc(b, '"');
}

static void json_indent(jbuf *b, int indent, int level) {
    jbuf_addc(b, '\n');
    for (int i = 0; i < indent * level; i++) jbuf_addc(b, ' ');
}

static int cmp_keys(const void *x, const void *y) {
    const jv *a = *(const jv *const *)x, *c = *(const jv *const *)y;
    size_t n = a->str.n < c->str.n ? a->str.n : c->str.n;
    int r = n ? memcmp(a->str.s, c->str.s, n) : 0;
    return r ? r : (a->str.n > c->str.n) - (a->str.n < c->str.n);
}

static bool json_val(jbuf *b, jv v, bool ea, int indent, const char *isep, const char *ksep, bool sort, int level,
                     const char **bad) {
    if (level > 200) {
        *bad = "a value nested too deeply";
        return false;
    }
    char tmp[32];
    switch (v.t) {
    case JV_NONE: jbuf_add(b, "null", 4); return true;
    case JV_BOOL: jbuf_add(b, v.b ? "true" : "false", v.b ? 4 : 5); return true;
    case JV_INT: jbuf_add(b, tmp, (size_t)snprintf(tmp, sizeof tmp, "%lld", (long long)v.i)); return true;
    case JV_FLOAT:
        if (isnan(v.f)) jbuf_add(b, "NaN", 3);
        else if (isinf(v.f)) jbuf_add(b, v.f < 0 ? "-Infinity" : "Infinity", v.f < 0 ? 9 : 8);
        else jv_float_into(b, v.f);
        return true;
    case JV_STR: json_str(b, v.str.s, v.str.n, ea); return true;
    case JV_LIST:
        if (v.list->n == 0) {
            jbuf_add(b, "[]", 2);
            return true;
        }
        jbuf_addc(b, '[');
        for (int64_t i = 0; i < v.list->n; i++) {
            if (i) jbuf_add(b, isep, strlen(isep));
            if (indent >= 0) json_indent(b, indent, level + 1);
            if (!json_val(b, v.list->items[i], ea, indent, isep, ksep, sort, level + 1, bad)) return false;
        }
        if (indent >= 0) json_indent(b, indent, level);
        jbuf_addc(b, ']');
        return true;
    case JV_DICT: case JV_NS: {
        jv_dict *d = v.dict;
        if (d->n == 0) {
            jbuf_add(b, "{}", 2);
            return true;
        }
        /* key order: insertion, or sorted (string keys) */
        const jv *order_stack[64];
        const jv **order = d->n <= 64 ? order_stack : malloc((size_t)d->n * sizeof *order);
        if (!order) {
            b->oom = true;
            return true;
        }
        for (int64_t i = 0; i < d->n; i++) order[i] = &d->keys[i];
        bool all_str = true;
        for (int64_t i = 0; i < d->n; i++) all_str &= d->keys[i].t == JV_STR;
        if (sort && all_str) qsort(order, (size_t)d->n, sizeof *order, cmp_keys);
        jbuf_addc(b, '{');
        bool ok = true;
        for (int64_t k = 0; k < d->n && ok; k++) {
            int64_t i = order[k] - d->keys;
            if (k) jbuf_add(b, isep, strlen(isep));
            if (indent >= 0) json_indent(b, indent, level + 1);
            jv key = d->keys[i];
            if (key.t == JV_STR) json_str(b, key.str.s, key.str.n, ea);
            else { /* Python converts int/float/bool/None keys to strings */
                jbuf kb = {0};
                if (key.t == JV_NONE) jbuf_add(&kb, "null", 4);
                else if (key.t == JV_BOOL) jbuf_add(&kb, key.b ? "true" : "false", key.b ? 4 : 5);
                else jv_str_into(&kb, key);
                json_str(b, kb.p ? kb.p : "", kb.n, ea);
                jbuf_free(&kb);
            }
            jbuf_add(b, ksep, strlen(ksep));
            ok = json_val(b, d->vals[i], ea, indent, isep, ksep, sort, level + 1, bad);
        }
        if (order != order_stack) free(order);
        if (!ok) return false;
        if (indent >= 0) json_indent(b, indent, level);
        jbuf_addc(b, '}');
        return true;
    }
    case JV_UNDEF: *bad = "Undefined"; return false;
    case JV_FUNC: *bad = "a function"; return false;
    }
    return false;
}

bool jv_json_into(jbuf *b, jv v, bool ensure_ascii, int indent, const char *item_sep, const char *key_sep,
                  bool sort_keys, const char **bad) {
    if (!item_sep) item_sep = indent >= 0 ? "," : ", ";
    if (!key_sep) key_sep = ": ";
    return json_val(b, v, ensure_ascii, indent, item_sep, key_sep, sort_keys, 0, bad);
}

/* ==== JSON in ==== */

typedef struct {
    jarena *a;
    const char *s;
    size_t n, i;
    char *err;
    size_t err_size;
    int depth;
} jparser;

static bool jp_fail(jparser *p, const char *what) {
    snprintf(p->err, p->err_size, "JSON: %s at byte %zu", what, p->i);
    return false;
}

static void jp_ws(jparser *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

static int hex4(const char *s) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static bool jp_string(jparser *p, jv *out) {
    p->i++; /* the opening quote */
    jbuf b = {0};
    while (p->i < p->n && p->s[p->i] != '"') {
        unsigned char c = (unsigned char)p->s[p->i];
        if (c < 0x20) {
            jbuf_free(&b);
            return jp_fail(p, "control character in a string");
        }
        if (c != '\\') {
            size_t j = p->i;
            while (j < p->n && p->s[j] != '"' && p->s[j] != '\\' && (unsigned char)p->s[j] >= 0x20) j++;
            jbuf_add(&b, p->s + p->i, j - p->i);
            p->i = j;
            continue;
        }
        if (p->i + 1 >= p->n) break;
        char e = p->s[p->i + 1];
        p->i += 2;
        switch (e) {
        case '"': jbuf_addc(&b, '"'); break;
        case '\\': jbuf_addc(&b, '\\'); break;
        case '/': jbuf_addc(&b, '/'); break;
        case 'b': jbuf_addc(&b, '\b'); break;
        case 'f': jbuf_addc(&b, '\f'); break;
        case 'n': jbuf_addc(&b, '\n'); break;
        case 'r': jbuf_addc(&b, '\r'); break;
        case 't': jbuf_addc(&b, '\t'); break;
        case 'u': {
            int u = p->i + 4 <= p->n ? hex4(p->s + p->i) : -1;
            if (u < 0) {
                jbuf_free(&b);
                return jp_fail(p, "bad \\u escape");
            }
            p->i += 4;
            uint32_t cp = (uint32_t)u;
            if (cp >= 0xD800 && cp < 0xDC00 && p->i + 6 <= p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
                int lo = hex4(p->s + p->i + 2);
                if (lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                    p->i += 6;
                }
            }
            if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD; /* a lone surrogate */
            uint8_t enc[4];
            jbuf_add(&b, (const char *)enc, (size_t)utf8_encode(cp, enc));
            break;
        }
        default: jbuf_free(&b); return jp_fail(p, "bad escape");
        }
    }
    if (p->i >= p->n) {
        jbuf_free(&b);
        return jp_fail(p, "unterminated string");
    }
    p->i++;
    if (b.oom) {
        jbuf_free(&b);
        return jp_fail(p, "out of memory");
    }
    *out = jv_str_copy(p->a, b.p ? b.p : "", b.n);
    jbuf_free(&b);
    return out->t == JV_STR || jp_fail(p, "out of memory");
}

static bool jp_value(jparser *p, jv *out);

static bool jp_number(jparser *p, jv *out) {
    size_t st = p->i;
    bool is_float = false;
    if (p->s[p->i] == '-') p->i++;
    if (p->i >= p->n || !(p->s[p->i] >= '0' && p->s[p->i] <= '9')) return jp_fail(p, "bad number");
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    if (p->i < p->n && p->s[p->i] == '.') {
        is_float = true;
        p->i++;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        is_float = true;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    char tmp[64];
    size_t len = p->i - st;
    if (len >= sizeof tmp) is_float = true, len = sizeof tmp - 1;
    memcpy(tmp, p->s + st, len);
    tmp[len] = '\0';
    if (!is_float) {
        char *end;
        long long v = strtoll(tmp, &end, 10);
        if (*end == '\0' && !(v == LLONG_MAX || v == LLONG_MIN)) {
            *out = jv_int(v);
            return true;
        }
    }
    *out = jv_float(strtod(tmp, NULL));
    return true;
}

static bool jp_value(jparser *p, jv *out) {
    jp_ws(p);
    if (p->i >= p->n) return jp_fail(p, "unexpected end");
    if (++p->depth > 200) return jp_fail(p, "nested too deeply");
    char c = p->s[p->i];
    bool ok = true;
    if (c == '"') {
        ok = jp_string(p, out);
    } else if (c == '[') {
        p->i++;
        *out = jv_list_new(p->a);
        if (out->t != JV_LIST) return jp_fail(p, "out of memory");
        jp_ws(p);
        if (p->i < p->n && p->s[p->i] == ']') p->i++;
        else
            for (;;) {
                jv item;
                if (!jp_value(p, &item)) return false;
                if (!jv_list_push(p->a, *out, item)) return jp_fail(p, "out of memory");
                jp_ws(p);
                if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
                if (p->i < p->n && p->s[p->i] == ']') { p->i++; break; }
                return jp_fail(p, "expected , or ]");
            }
    } else if (c == '{') {
        p->i++;
        *out = jv_dict_new(p->a);
        if (out->t != JV_DICT) return jp_fail(p, "out of memory");
        jp_ws(p);
        if (p->i < p->n && p->s[p->i] == '}') p->i++;
        else
            for (;;) {
                jv key, val;
                jp_ws(p);
                if (p->i >= p->n || p->s[p->i] != '"') return jp_fail(p, "expected a string key");
                if (!jp_string(p, &key)) return false;
                jp_ws(p);
                if (p->i >= p->n || p->s[p->i] != ':') return jp_fail(p, "expected :");
                p->i++;
                if (!jp_value(p, &val)) return false;
                if (!jv_dict_set(p->a, *out, key, val)) return jp_fail(p, "out of memory");
                jp_ws(p);
                if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
                if (p->i < p->n && p->s[p->i] == '}') { p->i++; break; }
                return jp_fail(p, "expected , or }");
            }
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        ok = jp_number(p, out);
    } else if (p->n - p->i >= 4 && !memcmp(p->s + p->i, "true", 4)) {
        *out = jv_bool(true), p->i += 4;
    } else if (p->n - p->i >= 5 && !memcmp(p->s + p->i, "false", 5)) {
        *out = jv_bool(false), p->i += 5;
    } else if (p->n - p->i >= 4 && !memcmp(p->s + p->i, "null", 4)) {
        *out = jv_none(), p->i += 4;
    } else {
        return jp_fail(p, "unexpected character");
    }
    p->depth--;
    return ok;
}

bool jv_json_parse(jarena *a, const char *s, size_t n, jv *out, char *err_msg, size_t err_size) {
    jparser p = {a, s, n, 0, err_msg, err_size, 0};
    if (!jp_value(&p, out)) return false;
    jp_ws(&p);
    if (p.i != n) return jp_fail(&p, "trailing characters");
    bool inc;
    if (utf8_valid_prefix((const uint8_t *)s, n, &inc) != n) {
        p.i = utf8_valid_prefix((const uint8_t *)s, n, &inc);
        return jp_fail(&p, "invalid UTF-8");
    }
    return true;
}
