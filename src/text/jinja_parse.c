/*
 * jinja_parse.c — template text to syntax tree.
 *
 * Owns: the lexer (text, {{ }}, {% %}, {# #}, and the whitespace rules: "-"
 * markers, trim_blocks, lstrip_blocks, newline normalization, the dropped final
 * newline) and the recursive-descent parser with Jinja's operator precedence:
 *
 *   cond (x if c else y) < or < and < not < compare (== != < > <= >= in, not in)
 *   < + - < ~ < * / // % < ** < unary - + < primary with .attr [item] (call)
 *   | filter and "is" test
 *
 * Does not own evaluation (jinja_eval.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "text/jinja.h"
#include "text/unicode.h"

/* ==== Tokens ==== */

typedef enum {
    TK_DATA,
    TK_VAR_BEGIN,
    TK_VAR_END,
    TK_BLOCK_BEGIN,
    TK_BLOCK_END,
    TK_NAME,
    TK_STRING,
    TK_INT,
    TK_FLOAT,
    TK_OP,
    TK_EOF,
} tk_kind;

typedef struct {
    tk_kind kind;
    int line;
    const char *s; /* TK_DATA, TK_NAME, TK_OP: the text; TK_STRING: the decoded text */
    size_t n;
    jv val;        /* TK_INT, TK_FLOAT */
} token;

typedef struct {
    jarena *a;
    eddy_error *err;
    eddy_status st;
    token *tk;
    int64_t n_tk, cap_tk, pos;
    int depth;
} jp;

#define MAX_DEPTH 200

static bool fail(jp *p, int line, const char *fmt, const char *arg) {
    if (p->st == EDDY_OK) {
        char what[300];
        snprintf(what, sizeof what, fmt, arg);
        p->st = eddy_error_set(p->err, EDDY_ERR_UNSUPPORTED, "chat template line %d: %s", line, what);
    }
    return false;
}

static bool nomem(jp *p) {
    if (p->st == EDDY_OK) p->st = eddy_error_set(p->err, EDDY_ERR_NOMEM, "out of memory parsing the chat template");
    return false;
}

static bool push_tok(jp *p, token t) {
    if (p->n_tk == p->cap_tk) {
        int64_t cap = p->cap_tk ? p->cap_tk * 2 : 256;
        token *n = jarena_alloc(p->a, (size_t)cap * sizeof *n);
        if (!n) return nomem(p);
        if (p->n_tk) memcpy(n, p->tk, (size_t)p->n_tk * sizeof *n);
        p->tk = n;
        p->cap_tk = cap;
    }
    p->tk[p->n_tk++] = t;
    return true;
}

/* ==== Lexer ==== */

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static bool is_name0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Decodes a string literal's body as Python's unicode-escape does. */
static bool decode_string(jp *p, const char *s, size_t n, int line, token *t) {
    char *out = jarena_alloc(p->a, n + 1);
    if (!out) return nomem(p);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            out[k++] = s[i];
            continue;
        }
        char e = s[++i];
        uint32_t cp = 0;
        int hexlen = 0;
        switch (e) {
        case 'n': out[k++] = '\n'; continue;
        case 't': out[k++] = '\t'; continue;
        case 'r': out[k++] = '\r'; continue;
        case '\\': out[k++] = '\\'; continue;
        case '\'': out[k++] = '\''; continue;
        case '"': out[k++] = '"'; continue;
        case 'a': out[k++] = '\a'; continue;
        case 'b': out[k++] = '\b'; continue;
        case 'f': out[k++] = '\f'; continue;
        case 'v': out[k++] = '\v'; continue;
        case '\n': continue; /* line continuation */
        case 'x': hexlen = 2; break;
        case 'u': hexlen = 4; break;
        case 'U': hexlen = 8; break;
        default:
            if (e >= '0' && e <= '7') {
                int d = 0;
                while (d < 3 && i < n && s[i] >= '0' && s[i] <= '7') cp = cp * 8 + (uint32_t)(s[i++] - '0'), d++;
                i--;
                break;
            }
            out[k++] = '\\'; /* unknown escapes stay as written */
            out[k++] = e;
            continue;
        }
        if (hexlen) {
            if (i + (size_t)hexlen >= n) return fail(p, line, "bad escape in a string%s", "");
            for (int d = 0; d < hexlen; d++) {
                char c = s[i + 1 + (size_t)d];
                int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
                if (v < 0) return fail(p, line, "bad escape in a string%s", "");
                cp = cp * 16 + (uint32_t)v;
            }
            i += (size_t)hexlen;
        }
        if (cp > UNI_MAX_CP || (cp >= 0xD800 && cp < 0xE000)) return fail(p, line, "bad escape in a string%s", "");
        k += (size_t)utf8_encode(cp, (uint8_t *)out + k); /* an escape is never shorter than its UTF-8 */
    }
    out[k] = '\0';
    t->s = out;
    t->n = k;
    return true;
}

static const char *const ops2[] = {"//", "**", "==", "!=", ">=", "<="};
static const char ops1[] = "+-/*%~[](){}><=.:|,;";

/* Tokenizes the inside of a tag from *i up to its end marker (var: "}}",
 * block: "%}"), which must appear outside brackets. Returns the end's sign:
 * '-' (strip following whitespace), '+' or 0. */
static bool lex_tag(jp *p, const char *src, size_t n, size_t *i, int *line, bool var, char *end_sign) {
    int bal = 0;
    char close = var ? '}' : '%';
    while (*i < n) {
        char c = src[*i];
        if (c == '\n') (*line)++;
        if (is_ws(c)) {
            (*i)++;
            continue;
        }
        /* the end marker, with an optional sign */
        if (bal == 0) {
            size_t j = *i;
            char sign = 0;
            if ((c == '-' || c == '+') && j + 2 < n && src[j + 1] == close && src[j + 2] == '}') sign = c, j++;
            if (j + 1 < n && src[j] == close && src[j + 1] == '}') {
                *end_sign = sign;
                *i = j + 2;
                token t = {var ? TK_VAR_END : TK_BLOCK_END, *line, NULL, 0, {0}};
                return push_tok(p, t);
            }
        }
        token t = {TK_OP, *line, src + *i, 1, {0}};
        if (is_name0(c)) {
            size_t j = *i;
            while (j < n && (is_name0(src[j]) || is_digit(src[j]))) j++;
            t.kind = TK_NAME;
            t.n = j - *i;
            *i = j;
        } else if (is_digit(c)) {
            size_t j = *i;
            bool is_float = false;
            while (j < n && (is_digit(src[j]) || src[j] == '_')) j++;
            if (j + 1 < n && src[j] == '.' && is_digit(src[j + 1])) {
                is_float = true;
                j++;
                while (j < n && (is_digit(src[j]) || src[j] == '_')) j++;
            }
            if (j < n && (src[j] == 'e' || src[j] == 'E') &&
                ((j + 1 < n && is_digit(src[j + 1])) || (j + 2 < n && (src[j + 1] == '-' || src[j + 1] == '+') && is_digit(src[j + 2])))) {
                is_float = true;
                j += 2;
                while (j < n && is_digit(src[j])) j++;
            }
            char num[64];
            size_t k = 0;
            for (size_t q = *i; q < j && k + 1 < sizeof num; q++)
                if (src[q] != '_') num[k++] = src[q];
            num[k] = '\0';
            t.kind = is_float ? TK_FLOAT : TK_INT;
            t.val = is_float ? jv_float(strtod(num, NULL)) : jv_int(strtoll(num, NULL, 10));
            *i = j;
        } else if (c == '\'' || c == '"') {
            size_t j = *i + 1;
            while (j < n && src[j] != c) {
                if (src[j] == '\\') j++;
                if (j < n && src[j] == '\n') (*line)++;
                j++;
            }
            if (j >= n) return fail(p, *line, "unterminated string%s", "");
            t.kind = TK_STRING;
            if (!decode_string(p, src + *i + 1, j - *i - 1, *line, &t)) return false;
            *i = j + 1;
        } else {
            bool two = false;
            for (size_t k = 0; k < sizeof ops2 / sizeof ops2[0]; k++)
                if (*i + 1 < n && src[*i] == ops2[k][0] && src[*i + 1] == ops2[k][1]) two = true;
            if (two) t.n = 2;
            else if (!strchr(ops1, c)) {
                char bad[8];
                snprintf(bad, sizeof bad, "%c", c);
                return fail(p, *line, "unexpected character '%s'", bad);
            }
            if (c == '(' || c == '[' || c == '{') bal++;
            if ((c == ')' || c == ']' || c == '}') && bal > 0) bal--;
            *i += t.n;
        }
        if (!push_tok(p, t)) return false;
    }
    return fail(p, *line, "a tag is not closed%s", "");
}

static bool push_data(jp *p, const char *s, size_t n, int line) {
    if (n == 0) return true;
    token t = {TK_DATA, line, s, n, {0}};
    return push_tok(p, t);
}

static int count_lines(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

/* The whole template: data, and tags lexed by lex_tag. */
static bool lex(jp *p, const char *src, size_t n) {
    size_t i = 0;
    int line = 1;
    bool strip_next = false;   /* the previous tag ended with "-" */
    bool line_starting = true; /* the previous tag's match ended with a newline */
    while (i <= n) {
        /* the next tag */
        size_t k = i;
        char kind = 0;
        while (k + 1 < n) {
            if (src[k] == '{' && (src[k + 1] == '{' || src[k + 1] == '%' || src[k + 1] == '#')) {
                kind = src[k + 1];
                break;
            }
            k++;
        }
        if (!kind) k = n;
        const char *d = src + i;
        size_t dn = k - i;
        if (strip_next)
            while (dn && is_ws(*d)) d++, dn--;
        char sign = kind && k + 2 < n ? src[k + 2] : 0;
        if (sign != '-' && sign != '+') sign = 0;
        if (kind && sign == '-') {
            while (dn && is_ws(d[dn - 1])) dn--;
        } else if (kind && sign != '+' && kind != '{') {
            /* lstrip_blocks: spaces and tabs between a line's start and a block tag go */
            size_t l = dn;
            while (l > 0 && d[l - 1] != '\n') l--;
            bool only_ws = l < dn;
            for (size_t q = l; q < dn; q++) only_ws &= d[q] == ' ' || d[q] == '\t' || d[q] == '\f' || d[q] == '\v' || d[q] == '\r';
            if ((l > 0 || line_starting) && only_ws) dn = l;
        }
        if (!push_data(p, d, dn, line)) return false;
        line += count_lines(src + i, k - i);
        if (!kind) break;
        i = k + 2 + (sign ? 1 : 0);
        char end_sign = 0;
        if (kind == '#') {
            size_t e = i;
            while (e + 1 < n && !(src[e] == '#' && src[e + 1] == '}')) e++;
            if (e + 1 >= n) return fail(p, line, "a comment is not closed%s", "");
            end_sign = e > i && (src[e - 1] == '-' || src[e - 1] == '+') ? src[e - 1] : 0;
            line += count_lines(src + i, e - i);
            i = e + 2;
        } else {
            token t = {kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, line, NULL, 0, {0}};
            if (!push_tok(p, t) || !lex_tag(p, src, n, &i, &line, kind == '{', &end_sign)) return false;
            /* {% raw %} ... {% endraw %}: the text between is data */
            if (kind == '%' && p->n_tk >= 3 && p->tk[p->n_tk - 2].kind == TK_NAME && p->tk[p->n_tk - 3].kind == TK_BLOCK_BEGIN &&
                p->tk[p->n_tk - 2].n == 3 && !memcmp(p->tk[p->n_tk - 2].s, "raw", 3)) {
                p->n_tk -= 3;
                const char *e = NULL;
                for (size_t q = i; q + 1 < n && !e; q++) {
                    if (src[q] != '{' || src[q + 1] != '%') continue;
                    size_t r = q + 2;
                    if (r < n && (src[r] == '-' || src[r] == '+')) r++;
                    while (r < n && is_ws(src[r])) r++;
                    if (r + 6 <= n && !memcmp(src + r, "endraw", 6)) e = src + q;
                }
                if (!e) return fail(p, line, "{%% raw %%} without {%% endraw %%}%s", "");
                const char *body = src + i;
                size_t bn = (size_t)(e - body);
                if (end_sign == '-')
                    while (bn && is_ws(*body)) body++, bn--;
                if (e + 2 < src + n && e[2] == '-')
                    while (bn && is_ws(body[bn - 1])) bn--;
                if (!push_data(p, body, bn, line)) return false;
                line += count_lines(src + i, (size_t)(e - (src + i)));
                i = (size_t)(e - src) + 2;
                while (i + 1 < n && !(src[i] == '%' && src[i + 1] == '}')) i++;
                if (i + 1 >= n) return fail(p, line, "{%% endraw %%} is not closed%s", "");
                end_sign = src[i - 1] == '-' || src[i - 1] == '+' ? src[i - 1] : 0;
                i += 2;
            }
        }
        strip_next = end_sign == '-';
        line_starting = false;
        if (strip_next) {
            /* the stripped whitespace is part of the tag's match: does it end a line? */
            size_t q = i;
            while (q < n && is_ws(src[q])) q++;
            line_starting = q > i && src[q - 1] == '\n';
            line += count_lines(src + i, q - i);
            i = q;
            strip_next = false;
        } else if (end_sign != '+' && kind != '{' && i < n && src[i] == '\n') {
            i++; /* trim_blocks */
            line++;
            line_starting = true;
        }
    }
    token t = {TK_EOF, line, NULL, 0, {0}};
    return push_tok(p, t);
}

/* ==== Parser helpers ==== */

static token *cur(jp *p) { return &p->tk[p->pos]; }

static bool is_op(const token *t, const char *op) {
    return t->kind == TK_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n);
}
static bool is_name(const token *t, const char *name) {
    return t->kind == TK_NAME && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}

static bool expect_op(jp *p, const char *op) {
    if (!is_op(cur(p), op)) return fail(p, cur(p)->line, "expected '%s'", op);
    p->pos++;
    return true;
}

static jnode *node(jp *p, jnode_kind k, int line) {
    jnode *nd = jarena_alloc(p->a, sizeof *nd);
    if (!nd) {
        nomem(p);
        return NULL;
    }
    nd->kind = k;
    nd->line = line;
    return nd;
}

static const char *tok_str(jp *p, const token *t) { return jarena_strdup(p->a, t->s, t->n); }

/* A growable list of nodes (arena). */
typedef struct {
    jnode **v;
    const char **kw;
    int64_t n, cap;
} nlist;

static bool nl_push(jp *p, nlist *l, jnode *nd, const char *kw) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? l->cap * 2 : 8;
        jnode **v = jarena_alloc(p->a, (size_t)cap * sizeof *v);
        const char **k = jarena_alloc(p->a, (size_t)cap * sizeof *k);
        if (!v || !k) return nomem(p);
        if (l->n) {
            memcpy(v, l->v, (size_t)l->n * sizeof *v);
            memcpy(k, l->kw, (size_t)l->n * sizeof *k);
        }
        l->v = v, l->kw = k, l->cap = cap;
    }
    l->v[l->n] = nd;
    l->kw[l->n] = kw;
    l->n++;
    return true;
}

/* ==== Expressions ==== */

static jnode *parse_expr(jp *p);
static jnode *parse_or(jp *p);
static jnode *parse_unary(jp *p, bool with_filter);

/* (args, name=value, ...) after the opening parenthesis has been seen. */
static bool parse_call_args(jp *p, jnode *call) {
    if (!expect_op(p, "(")) return false;
    nlist l = {0};
    while (!is_op(cur(p), ")")) {
        if (l.n && !expect_op(p, ",")) return false;
        if (is_op(cur(p), ")")) break;
        const char *kw = NULL;
        if (cur(p)->kind == TK_NAME && is_op(&p->tk[p->pos + 1], "=")) {
            kw = tok_str(p, cur(p));
            p->pos += 2;
        } else if (is_op(cur(p), "*") || is_op(cur(p), "**")) {
            return fail(p, cur(p)->line, "*args and **kwargs are not supported%s", "");
        }
        jnode *arg = parse_expr(p);
        if (!arg || !nl_push(p, &l, arg, kw)) return false;
    }
    p->pos++;
    call->kids = l.v, call->kw = l.kw, call->n_kids = l.n;
    return true;
}

static jnode *parse_primary(jp *p) {
    token *t = cur(p);
    jnode *nd;
    if (t->kind == TK_NAME) {
        p->pos++;
        if (is_name(t, "true") || is_name(t, "True") || is_name(t, "false") || is_name(t, "False")) {
            if (!(nd = node(p, JN_LIT, t->line))) return NULL;
            nd->lit = jv_bool(t->s[0] == 't' || t->s[0] == 'T');
            return nd;
        }
        if (is_name(t, "none") || is_name(t, "None")) {
            if (!(nd = node(p, JN_LIT, t->line))) return NULL;
            nd->lit = jv_none();
            return nd;
        }
        if (!(nd = node(p, JN_NAME, t->line))) return NULL;
        nd->s = tok_str(p, t);
        nd->s_len = t->n;
        return nd->s ? nd : (nomem(p), NULL);
    }
    if (t->kind == TK_STRING) {
        /* adjacent literals concatenate */
        jbuf b = {0};
        while (cur(p)->kind == TK_STRING) {
            jbuf_add(&b, cur(p)->s, cur(p)->n);
            p->pos++;
        }
        if (!(nd = node(p, JN_LIT, t->line))) {
            jbuf_free(&b);
            return NULL;
        }
        nd->lit = jv_str_copy(p->a, b.p ? b.p : "", b.n);
        bool oom = b.oom || nd->lit.t != JV_STR;
        jbuf_free(&b);
        return oom ? (nomem(p), NULL) : nd;
    }
    if (t->kind == TK_INT || t->kind == TK_FLOAT) {
        p->pos++;
        if (!(nd = node(p, JN_LIT, t->line))) return NULL;
        nd->lit = t->val;
        return nd;
    }
    if (is_op(t, "(")) { /* parenthesized expression or tuple */
        p->pos++;
        if (is_op(cur(p), ")")) {
            p->pos++;
            return node(p, JN_TUPLE, t->line);
        }
        jnode *first = parse_expr(p);
        if (!first) return NULL;
        if (is_op(cur(p), ")")) {
            p->pos++;
            return first;
        }
        nlist l = {0};
        if (!nl_push(p, &l, first, NULL)) return NULL;
        while (is_op(cur(p), ",")) {
            p->pos++;
            if (is_op(cur(p), ")")) break;
            jnode *e = parse_expr(p);
            if (!e || !nl_push(p, &l, e, NULL)) return NULL;
        }
        if (!expect_op(p, ")") || !(nd = node(p, JN_TUPLE, t->line))) return NULL;
        nd->kids = l.v, nd->n_kids = l.n;
        return nd;
    }
    if (is_op(t, "[") || is_op(t, "{")) {
        bool dict = is_op(t, "{");
        p->pos++;
        nlist l = {0};
        const char *close = dict ? "}" : "]";
        while (!is_op(cur(p), close)) {
            if (l.n && !expect_op(p, ",")) return NULL;
            if (is_op(cur(p), close)) break;
            jnode *e = parse_expr(p);
            if (!e || !nl_push(p, &l, e, NULL)) return NULL;
            if (dict) {
                if (!expect_op(p, ":")) return NULL;
                jnode *v = parse_expr(p);
                if (!v || !nl_push(p, &l, v, NULL)) return NULL;
            }
        }
        p->pos++;
        if (!(nd = node(p, dict ? JN_DICTLIT : JN_LISTLIT, t->line))) return NULL;
        nd->kids = l.v, nd->n_kids = l.n;
        return nd;
    }
    if (t->kind == TK_EOF || t->kind == TK_VAR_END || t->kind == TK_BLOCK_END)
        fail(p, t->line, "unexpected end of an expression%s", "");
    else
        fail(p, t->line, "unexpected '%s'", t->kind == TK_OP ? tok_str(p, t) : "token");
    return NULL;
}

/* .name, [index], [a:b:c], (call) */
static jnode *parse_postfix(jp *p, jnode *nd) {
    for (;;) {
        token *t = cur(p);
        if (is_op(t, ".")) {
            p->pos++;
            token *name = cur(p);
            jnode *at = node(p, JN_ATTR, t->line);
            if (!at) return NULL;
            if (name->kind == TK_NAME) {
                at->s = tok_str(p, name);
                at->s_len = name->n;
            } else if (name->kind == TK_INT) { /* x.0 is x[0] */
                at->kind = JN_ITEM;
                if (!(at->b = node(p, JN_LIT, t->line))) return NULL;
                at->b->lit = name->val;
            } else {
                fail(p, t->line, "expected a name after '.'%s", "");
                return NULL;
            }
            p->pos++;
            at->a = nd;
            nd = at;
        } else if (is_op(t, "[")) {
            p->pos++;
            jnode *parts[3] = {NULL, NULL, NULL};
            int k = 0;
            bool slice = false;
            while (!is_op(cur(p), "]")) {
                if (is_op(cur(p), ":")) {
                    slice = true;
                    if (++k > 2) {
                        fail(p, t->line, "bad slice%s", "");
                        return NULL;
                    }
                    p->pos++;
                    continue;
                }
                if (parts[k]) {
                    fail(p, t->line, "expected ']'%s", "");
                    return NULL;
                }
                if (!(parts[k] = parse_expr(p))) return NULL;
            }
            p->pos++;
            jnode *it = node(p, slice ? JN_SLICE : JN_ITEM, t->line);
            if (!it) return NULL;
            it->a = nd;
            if (slice) {
                it->kids = jarena_alloc(p->a, 3 * sizeof(jnode *));
                if (!it->kids) return (nomem(p), NULL);
                memcpy(it->kids, parts, sizeof parts);
                it->n_kids = 3;
            } else {
                if (!parts[0]) {
                    fail(p, t->line, "empty subscript%s", "");
                    return NULL;
                }
                it->b = parts[0];
            }
            nd = it;
        } else if (is_op(t, "(")) {
            jnode *call = node(p, JN_CALL, t->line);
            if (!call || !parse_call_args(p, call)) return NULL;
            call->a = nd;
            nd = call;
        } else {
            return nd;
        }
    }
}

/* | filter(args), is [not] test [arg | (args)] */
static jnode *parse_filters(jp *p, jnode *nd) {
    for (;;) {
        token *t = cur(p);
        if (is_op(t, "|")) {
            p->pos++;
            if (cur(p)->kind != TK_NAME) {
                fail(p, t->line, "expected a filter name after '|'%s", "");
                return NULL;
            }
            jnode *f = node(p, JN_FILTER, t->line);
            if (!f) return NULL;
            /* dotted filter names do not exist in chat templates; plain names only */
            f->s = tok_str(p, cur(p));
            f->s_len = cur(p)->n;
            p->pos++;
            if (is_op(cur(p), "(") && !parse_call_args(p, f)) return NULL;
            f->a = nd;
            nd = f;
        } else if (is_name(t, "is")) {
            p->pos++;
            jnode *te = node(p, JN_TEST, t->line);
            if (!te) return NULL;
            if (is_name(cur(p), "not")) {
                te->op = 1;
                p->pos++;
            }
            if (cur(p)->kind != TK_NAME && !(cur(p)->kind == TK_OP && (is_op(cur(p), "==") || is_op(cur(p), "!=") ||
                                                                        is_op(cur(p), "<") || is_op(cur(p), ">") ||
                                                                        is_op(cur(p), "<=") || is_op(cur(p), ">=")))) {
                fail(p, t->line, "expected a test name after 'is'%s", "");
                return NULL;
            }
            te->s = tok_str(p, cur(p));
            te->s_len = cur(p)->n;
            p->pos++;
            token *n2 = cur(p);
            if (is_op(n2, "(")) {
                if (!parse_call_args(p, te)) return NULL;
            } else if ((n2->kind == TK_NAME || n2->kind == TK_STRING || n2->kind == TK_INT || n2->kind == TK_FLOAT ||
                        is_op(n2, "[") || is_op(n2, "{")) &&
                       !is_name(n2, "else") && !is_name(n2, "or") && !is_name(n2, "and")) {
                jnode *arg = parse_primary(p);
                if (!arg || !(arg = parse_postfix(p, arg))) return NULL;
                te->kids = jarena_alloc(p->a, sizeof(jnode *));
                te->kw = jarena_alloc(p->a, sizeof(char *));
                if (!te->kids || !te->kw) return (nomem(p), NULL);
                te->kids[0] = arg;
                te->n_kids = 1;
            }
            te->a = nd;
            nd = te;
        } else if (is_op(t, "(")) {
            jnode *call = node(p, JN_CALL, t->line);
            if (!call || !parse_call_args(p, call)) return NULL;
            call->a = nd;
            nd = call;
        } else {
            return nd;
        }
    }
}

static jnode *parse_unary(jp *p, bool with_filter) {
    token *t = cur(p);
    if (++p->depth > MAX_DEPTH) {
        fail(p, t->line, "expression nested too deeply%s", "");
        return NULL;
    }
    jnode *nd;
    if (is_op(t, "-") || is_op(t, "+")) {
        p->pos++;
        jnode *operand = parse_unary(p, false);
        if (!operand || !(nd = node(p, JN_UNARY, t->line))) return NULL;
        nd->op = t->s[0];
        nd->a = operand;
    } else {
        nd = parse_primary(p);
    }
    if (nd) nd = parse_postfix(p, nd);
    if (nd && with_filter) nd = parse_filters(p, nd);
    p->depth--;
    return nd;
}

static jnode *binary(jp *p, jnode_kind k, int op, jnode *a, jnode *b, int line) {
    if (!a || !b) return NULL;
    jnode *nd = node(p, k, line);
    if (!nd) return NULL;
    nd->op = op;
    nd->a = a;
    nd->b = b;
    return nd;
}

static jnode *parse_pow(jp *p) {
    jnode *a = parse_unary(p, true);
    while (a && is_op(cur(p), "**")) {
        int line = cur(p)->line;
        p->pos++;
        a = binary(p, JN_BINARY, 'P', a, parse_unary(p, true), line);
    }
    return a;
}

static jnode *parse_mul(jp *p) {
    jnode *a = parse_pow(p);
    for (;;) {
        token *t = cur(p);
        int op = is_op(t, "*") ? '*' : is_op(t, "/") ? '/' : is_op(t, "//") ? 'D' : is_op(t, "%") ? '%' : 0;
        if (!a || !op) return a;
        p->pos++;
        a = binary(p, JN_BINARY, op, a, parse_pow(p), t->line);
    }
}

static jnode *parse_concat(jp *p) {
    jnode *a = parse_mul(p);
    while (a && is_op(cur(p), "~")) {
        int line = cur(p)->line;
        p->pos++;
        a = binary(p, JN_BINARY, '~', a, parse_mul(p), line);
    }
    return a;
}

static jnode *parse_add(jp *p) {
    jnode *a = parse_concat(p);
    for (;;) {
        token *t = cur(p);
        int op = is_op(t, "+") ? '+' : is_op(t, "-") ? '-' : 0;
        if (!a || !op) return a;
        p->pos++;
        a = binary(p, JN_BINARY, op, a, parse_concat(p), t->line);
    }
}

static jnode *parse_compare(jp *p) {
    jnode *a = parse_add(p);
    for (;;) {
        token *t = cur(p);
        int op = is_op(t, "==") ? '=' : is_op(t, "!=") ? '!' : is_op(t, "<") ? '<' : is_op(t, ">") ? '>' :
                 is_op(t, "<=") ? 'l' : is_op(t, ">=") ? 'g' : is_name(t, "in") ? 'i' : 0;
        if (!op && is_name(t, "not") && is_name(&p->tk[p->pos + 1], "in")) {
            op = 'n';
            p->pos++;
        }
        if (!a || !op) return a;
        p->pos++;
        /* chained comparisons (a < b < c) are evaluated pairwise: see jinja_eval.c */
        a = binary(p, JN_COMPARE, op, a, parse_add(p), t->line);
    }
}

static jnode *parse_not(jp *p) {
    token *t = cur(p);
    if (is_name(t, "not")) {
        p->pos++;
        if (++p->depth > MAX_DEPTH) {
            fail(p, t->line, "expression nested too deeply%s", "");
            return NULL;
        }
        jnode *operand = parse_not(p);
        p->depth--;
        jnode *nd = operand ? node(p, JN_UNARY, t->line) : NULL;
        if (!nd) return NULL;
        nd->op = '!';
        nd->a = operand;
        return nd;
    }
    return parse_compare(p);
}

static jnode *parse_and(jp *p) {
    jnode *a = parse_not(p);
    while (a && is_name(cur(p), "and")) {
        int line = cur(p)->line;
        p->pos++;
        a = binary(p, JN_AND, 0, a, parse_not(p), line);
    }
    return a;
}

static jnode *parse_or(jp *p) {
    jnode *a = parse_and(p);
    while (a && is_name(cur(p), "or")) {
        int line = cur(p)->line;
        p->pos++;
        a = binary(p, JN_OR, 0, a, parse_and(p), line);
    }
    return a;
}

static jnode *parse_expr(jp *p) {
    if (++p->depth > MAX_DEPTH) {
        fail(p, cur(p)->line, "expression nested too deeply%s", "");
        return NULL;
    }
    jnode *a = parse_or(p);
    while (a && is_name(cur(p), "if")) {
        int line = cur(p)->line;
        p->pos++;
        jnode *c = parse_or(p);
        if (!c) return NULL;
        jnode *e = NULL;
        if (is_name(cur(p), "else")) {
            p->pos++;
            if (!(e = parse_expr(p))) return NULL;
        }
        jnode *nd = node(p, JN_COND, line);
        if (!nd) return NULL;
        nd->a = c, nd->b = a, nd->c = e;
        a = nd;
    }
    p->depth--;
    return a;
}

/* An expression, or a tuple without parentheses (for x in a, b / set x = a, b). */
static jnode *parse_tuple_expr(jp *p) {
    jnode *first = parse_expr(p);
    if (!first || !is_op(cur(p), ",")) return first;
    nlist l = {0};
    if (!nl_push(p, &l, first, NULL)) return NULL;
    while (is_op(cur(p), ",")) {
        p->pos++;
        jnode *e = parse_expr(p);
        if (!e || !nl_push(p, &l, e, NULL)) return NULL;
    }
    jnode *nd = node(p, JN_TUPLE, first->line);
    if (!nd) return NULL;
    nd->kids = l.v, nd->n_kids = l.n;
    return nd;
}

/* ==== Statements ==== */

static bool parse_body(jp *p, nlist *out, const char *const *ends, int n_ends, int *which);

static bool expect_block_end(jp *p) {
    if (cur(p)->kind != TK_BLOCK_END) return fail(p, cur(p)->line, "expected the end of the tag ('%%}')%s", "");
    p->pos++;
    return true;
}

/* Target names of for / set: name or name, name, ... */
static bool parse_targets(jp *p, jnode *nd) {
    nlist l = {0};
    for (;;) {
        if (cur(p)->kind != TK_NAME) return fail(p, cur(p)->line, "expected a variable name%s", "");
        jnode *nm = node(p, JN_NAME, cur(p)->line);
        if (!nm) return false;
        nm->s = tok_str(p, cur(p));
        nm->s_len = cur(p)->n;
        p->pos++;
        if (!nl_push(p, &l, nm, NULL)) return false;
        if (!is_op(cur(p), ",")) break;
        p->pos++;
    }
    nd->kids = l.v, nd->n_kids = l.n;
    return true;
}

static jnode *parse_if(jp *p, int line) {
    jnode *nd = node(p, JN_IF, line);
    if (!nd || !(nd->a = parse_tuple_expr(p)) || !expect_block_end(p)) return NULL;
    static const char *const ends[] = {"elif", "else", "endif"};
    nlist body = {0};
    int which;
    if (!parse_body(p, &body, ends, 3, &which)) return NULL;
    nd->body = body.v, nd->n_body = body.n;
    if (which == 0) { /* elif: an if in the else branch */
        jnode *inner = parse_if(p, cur(p)->line);
        if (!inner) return NULL;
        nd->els = jarena_alloc(p->a, sizeof(jnode *));
        if (!nd->els) return (nomem(p), NULL);
        nd->els[0] = inner;
        nd->n_els = 1;
        return nd;
    }
    if (which == 1) {
        if (!expect_block_end(p)) return NULL;
        static const char *const ends2[] = {"endif"};
        nlist els = {0};
        if (!parse_body(p, &els, ends2, 1, &which)) return NULL;
        nd->els = els.v, nd->n_els = els.n;
    }
    return expect_block_end(p) ? nd : NULL;
}

static jnode *parse_for(jp *p, int line) {
    jnode *nd = node(p, JN_FOR, line);
    if (!nd || !parse_targets(p, nd)) return NULL;
    if (!is_name(cur(p), "in")) return fail(p, cur(p)->line, "expected 'in'%s", ""), NULL;
    p->pos++;
    /* the iterable: no conditional expression here, "if" filters the loop */
    if (!(nd->a = parse_or(p))) return NULL;
    if (is_op(cur(p), ",")) return fail(p, cur(p)->line, "a tuple after 'in' is not supported%s", ""), NULL;
    if (is_name(cur(p), "if")) {
        p->pos++;
        if (!(nd->b = parse_expr(p))) return NULL;
    }
    if (is_name(cur(p), "recursive")) return fail(p, cur(p)->line, "recursive loops are not supported%s", ""), NULL;
    if (!expect_block_end(p)) return NULL;
    static const char *const ends[] = {"else", "endfor"};
    nlist body = {0};
    int which;
    if (!parse_body(p, &body, ends, 2, &which)) return NULL;
    nd->body = body.v, nd->n_body = body.n;
    if (which == 0) {
        if (!expect_block_end(p)) return NULL;
        static const char *const ends2[] = {"endfor"};
        nlist els = {0};
        if (!parse_body(p, &els, ends2, 1, &which)) return NULL;
        nd->els = els.v, nd->n_els = els.n;
    }
    return expect_block_end(p) ? nd : NULL;
}

static jnode *parse_set(jp *p, int line) {
    jnode *nd = node(p, JN_SET, line);
    if (!nd) return NULL;
    if (cur(p)->kind == TK_NAME && is_op(&p->tk[p->pos + 1], ".")) { /* set ns.attr = value */
        jnode *target = node(p, JN_ATTR, line);
        jnode *obj = node(p, JN_NAME, line);
        if (!target || !obj) return NULL;
        obj->s = tok_str(p, cur(p));
        obj->s_len = cur(p)->n;
        p->pos += 2;
        if (cur(p)->kind != TK_NAME) return fail(p, line, "expected an attribute name%s", ""), NULL;
        target->s = tok_str(p, cur(p));
        target->s_len = cur(p)->n;
        target->a = obj;
        p->pos++;
        nd->b = target;
    } else if (!parse_targets(p, nd)) {
        return NULL;
    }
    if (is_op(cur(p), "=")) {
        p->pos++;
        if (!(nd->a = parse_tuple_expr(p)) || !expect_block_end(p)) return NULL;
        return nd;
    }
    /* {% set name %} ... {% endset %}, optionally | filters */
    if (nd->b || nd->n_kids != 1) return fail(p, line, "a block set takes one name%s", ""), NULL;
    nd->kind = JN_SETBLOCK;
    if (is_op(cur(p), "|")) {
        jnode *chain = parse_filters(p, NULL);
        if (!chain) return NULL;
        nd->a = chain;
    }
    if (!expect_block_end(p)) return NULL;
    static const char *const ends[] = {"endset"};
    nlist body = {0};
    int which;
    if (!parse_body(p, &body, ends, 1, &which)) return NULL;
    nd->body = body.v, nd->n_body = body.n;
    return expect_block_end(p) ? nd : NULL;
}

static jnode *parse_macro(jp *p, int line) {
    jnode *nd = node(p, JN_MACRO, line);
    if (!nd) return NULL;
    if (cur(p)->kind != TK_NAME) return fail(p, line, "expected a macro name%s", ""), NULL;
    nd->s = tok_str(p, cur(p));
    nd->s_len = cur(p)->n;
    p->pos++;
    if (!expect_op(p, "(")) return NULL;
    nlist params = {0};
    while (!is_op(cur(p), ")")) {
        if (params.n && !expect_op(p, ",")) return NULL;
        if (cur(p)->kind != TK_NAME) return fail(p, cur(p)->line, "expected a parameter name%s", ""), NULL;
        jnode *pn = node(p, JN_NAME, cur(p)->line);
        if (!pn) return NULL;
        pn->s = tok_str(p, cur(p));
        pn->s_len = cur(p)->n;
        p->pos++;
        if (is_op(cur(p), "=")) {
            p->pos++;
            if (!(pn->a = parse_expr(p))) return NULL;
        }
        if (!nl_push(p, &params, pn, NULL)) return NULL;
    }
    p->pos++;
    nd->kids = params.v, nd->n_kids = params.n;
    if (!expect_block_end(p)) return NULL;
    static const char *const ends[] = {"endmacro"};
    nlist body = {0};
    int which;
    if (!parse_body(p, &body, ends, 1, &which)) return NULL;
    nd->body = body.v, nd->n_body = body.n;
    if (cur(p)->kind == TK_NAME) p->pos++; /* {% endmacro name %} */
    return expect_block_end(p) ? nd : NULL;
}

static jnode *parse_statement(jp *p) {
    token *t = cur(p);
    int line = t->line;
    if (t->kind != TK_NAME) return fail(p, line, "expected a statement name%s", ""), NULL;
    p->pos++;
    if (is_name(t, "if")) return parse_if(p, line);
    if (is_name(t, "for")) return parse_for(p, line);
    if (is_name(t, "set")) return parse_set(p, line);
    if (is_name(t, "macro")) return parse_macro(p, line);
    if (is_name(t, "break") || is_name(t, "continue")) {
        jnode *nd = node(p, is_name(t, "break") ? JN_BREAK : JN_CONTINUE, line);
        return nd && expect_block_end(p) ? nd : NULL;
    }
    if (is_name(t, "generation")) {
        jnode *nd = node(p, JN_BLOCK, line);
        if (!nd || !expect_block_end(p)) return NULL;
        static const char *const ends[] = {"endgeneration"};
        nlist body = {0};
        int which;
        if (!parse_body(p, &body, ends, 1, &which)) return NULL;
        nd->body = body.v, nd->n_body = body.n;
        return expect_block_end(p) ? nd : NULL;
    }
    fail(p, line, "the '%s' statement is not supported", tok_str(p, t));
    return NULL;
}

/* Statements until a block tag named one of ends (left after its name; *which
 * says which), or the end of the template when n_ends == 0. */
static bool parse_body(jp *p, nlist *out, const char *const *ends, int n_ends, int *which) {
    int start_line = cur(p)->line;
    for (;;) {
        token *t = cur(p);
        if (t->kind == TK_EOF) {
            if (n_ends == 0) return true;
            return fail(p, start_line, "a block is not closed (expected {%% %s %%})", ends[n_ends - 1]);
        }
        jnode *nd = NULL;
        if (t->kind == TK_DATA) {
            if (!(nd = node(p, JN_DATA, t->line))) return false;
            nd->s = t->s;
            nd->s_len = t->n;
            p->pos++;
        } else if (t->kind == TK_VAR_BEGIN) {
            p->pos++;
            if (!(nd = node(p, JN_OUTPUT, t->line)) || !(nd->a = parse_tuple_expr(p))) return false;
            if (cur(p)->kind != TK_VAR_END) return fail(p, cur(p)->line, "expected '}}'%s", "");
            p->pos++;
        } else if (t->kind == TK_BLOCK_BEGIN) {
            token *name = &p->tk[p->pos + 1];
            for (int k = 0; k < n_ends; k++)
                if (is_name(name, ends[k])) {
                    p->pos += 2;
                    *which = k;
                    return true;
                }
            static const char *const closers[] = {"endif", "endfor", "else", "elif", "endset", "endmacro", "endgeneration", "endraw"};
            for (size_t k = 0; k < sizeof closers / sizeof closers[0]; k++)
                if (is_name(name, closers[k])) return fail(p, name->line, "unexpected {%% %s %%}", closers[k]);
            p->pos++;
            if (!(nd = parse_statement(p))) return false;
        } else {
            return fail(p, t->line, "unexpected token%s", "");
        }
        if (!nl_push(p, out, nd, NULL)) return false;
    }
}

/* ==== Entry ==== */

eddy_status jinja_parse(jarena *a, const char *src, size_t n, jtemplate *out, eddy_error *err) {
    jp p;
    memset(&p, 0, sizeof p);
    p.a = a;
    p.err = err;
    /* newlines: \r\n and \r become \n; one final newline is dropped */
    char *s = jarena_alloc(a, n + 1);
    if (!s) return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory parsing the chat template");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else {
            s[k++] = src[i];
        }
    }
    if (k && s[k - 1] == '\n') k--;
    s[k] = '\0';
    if (!lex(&p, s, k)) return p.st;
    nlist body = {0};
    int which;
    if (!parse_body(&p, &body, NULL, 0, &which)) return p.st;
    out->body = body.v;
    out->n_body = body.n;
    return EDDY_OK;
}
