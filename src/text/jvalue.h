/*
 * jvalue.h — the values chat templates compute with, the arena they live in, and
 * JSON in and out.
 *
 * Owns: a Python-like value (none, bool, int, float, string, list, dict, and the
 * template engine's own kinds), a bump arena that owns every value and node of one
 * render (freed at once), Python's str()/repr() of values, json.dumps as Hugging
 * Face's tojson filter calls it, and a strict JSON parser for messages and extra
 * variables. Does not own the template language (jinja_*.c).
 *
 * Lists and dicts are references (jv holds a pointer), as in Python: a namespace
 * changed through one name is changed for all. Dicts keep insertion order.
 */
#ifndef EDDY_TEXT_JVALUE_H
#define EDDY_TEXT_JVALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ==== Arena ==== */

typedef struct jarena jarena;

jarena *jarena_new(void);
void jarena_free(jarena *a);
/* Zeroed memory that lives until jarena_free; NULL when out of memory. */
void *jarena_alloc(jarena *a, size_t n);
char *jarena_strdup(jarena *a, const char *s, size_t n); /* NUL-terminated copy */
/* Lets the arena grow by at most `more` bytes from now on; beyond that
 * jarena_alloc returns NULL and jarena_over_limit says why. */
void jarena_set_limit(jarena *a, size_t more);
bool jarena_over_limit(const jarena *a);

/* ==== Values ==== */

typedef enum {
    JV_UNDEF,  /* a name or key that does not exist (Jinja's Undefined) */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,   /* also Python tuples */
    JV_DICT,
    JV_NS,     /* a namespace(): a dict whose members `set ns.x = ...` changes */
    JV_FUNC,   /* a macro, a global function, or a bound method */
} jv_type;

typedef struct jv_list jv_list;
typedef struct jv_dict jv_dict;
typedef struct jv_func jv_func;

typedef struct {
    jv_type t;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *s; /* not necessarily NUL-terminated */
            size_t n;
        } str;
        jv_list *list;
        jv_dict *dict; /* JV_DICT and JV_NS */
        jv_func *fn;
    };
} jv;

struct jv_list {
    jv *items;
    int64_t n, cap;
    bool tuple; /* printed as (a, b) */
};

struct jv_dict {
    jv *keys; /* strings (other keys are allowed but rare) */
    jv *vals;
    int64_t n, cap;
};

static inline jv jv_undef(void) { jv v = {JV_UNDEF, {0}}; return v; }
static inline jv jv_none(void) { jv v = {JV_NONE, {0}}; return v; }
static inline jv jv_bool(bool b) { jv v = {JV_BOOL, {.b = b}}; return v; }
static inline jv jv_int(int64_t i) { jv v = {JV_INT, {.i = i}}; return v; }
static inline jv jv_float(double f) { jv v = {JV_FLOAT, {.f = f}}; return v; }
static inline jv jv_strn(const char *s, size_t n) {
    jv v = {JV_STR, {.str = {s, n}}};
    return v;
}

jv jv_str_copy(jarena *a, const char *s, size_t n); /* JV_UNDEF when out of memory */
jv jv_list_new(jarena *a);
jv jv_dict_new(jarena *a);
bool jv_list_push(jarena *a, jv list, jv item);
bool jv_dict_set(jarena *a, jv dict, jv key, jv val); /* replaces an existing key */
/* The value under key, or JV_UNDEF. */
jv jv_dict_get(jv dict, const char *key, size_t n);
jv jv_dict_getv(jv dict, jv key);

bool jv_truthy(jv v);
bool jv_equal(jv a, jv b);

/* ==== Text ==== */

/* A growable output buffer (eddy_realloc). Sticky out-of-memory flag. */
typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
    size_t limit; /* 0: none; beyond it, further text sets over_limit */
    bool over_limit;
} jbuf;

void jbuf_add(jbuf *b, const char *s, size_t n);
void jbuf_addc(jbuf *b, char c);
void jbuf_free(jbuf *b);

/* Python's str(v) and repr(v). */
void jv_str_into(jbuf *b, jv v);
void jv_repr_into(jbuf *b, jv v);
/* Python's repr of a float (the shortest text that reads back the same). */
void jv_float_into(jbuf *b, double f);

/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) with indent < 0 for
 * None. item_sep/key_sep NULL: Python's defaults. Returns false for a value JSON
 * cannot hold (its name in *bad). */
bool jv_json_into(jbuf *b, jv v, bool ensure_ascii, int indent, const char *item_sep, const char *key_sep,
                  bool sort_keys, const char **bad);

/* Parses JSON text into values in a; false with a message (naming the byte
 * offset) in err_msg on bad input or out of memory. */
bool jv_json_parse(jarena *a, const char *s, size_t n, jv *out, char *err_msg, size_t err_size);

#endif
