/*
 * jinja.h — eddy's interpreter of the Jinja subset that chat templates use.
 *
 * Owns: the syntax tree shared by the parser (jinja_parse.c) and the evaluator
 * (jinja_eval.c), and jinja_render. The language is Jinja 2/3 as Hugging Face
 * transformers configures it for apply_chat_template: trim_blocks and
 * lstrip_blocks on, the loop-controls extension ({% break %}, {% continue %}),
 * the {% generation %} block, and its globals (raise_exception, strftime_now,
 * namespace, dict) and tojson filter. docs/tokenizer.md lists what is supported;
 * anything else fails with EDDY_ERR_UNSUPPORTED naming the construct and line.
 */
#ifndef EDDY_TEXT_JINJA_H
#define EDDY_TEXT_JINJA_H

#include "eddy.h"
#include "text/jvalue.h"

/* ==== Syntax tree ==== */

typedef enum {
    /* statements */
    JN_DATA,     /* literal text: s */
    JN_OUTPUT,   /* {{ a }} */
    JN_IF,       /* if a: body, else: els (an elif is an if inside els) */
    JN_FOR,      /* for names in a [if b]: body, else: els */
    JN_SET,      /* set target = a; target: names (kids) or ns attribute (b = JN_ATTR) */
    JN_SETBLOCK, /* set name: body rendered to text (then optional filter chain in a) */
    JN_MACRO,    /* macro s(params) body; params: kids (JN_NAME, default in .a) */
    JN_BREAK,
    JN_CONTINUE,
    JN_BLOCK,    /* a body rendered as is ({% generation %}) */
    /* expressions */
    JN_LIT,      /* lit */
    JN_NAME,     /* s */
    JN_LISTLIT,  /* kids */
    JN_TUPLE,    /* kids */
    JN_DICTLIT,  /* kids: key, value, key, value, ... */
    JN_ATTR,     /* a.s */
    JN_ITEM,     /* a[b] */
    JN_SLICE,    /* a[kids[0]:kids[1]:kids[2]] (NULL for absent parts) */
    JN_CALL,     /* a(kids; kw names in kw) */
    JN_FILTER,   /* a | s(kids; kw) ; a == NULL inside a set block's filter chain */
    JN_TEST,     /* a is [not] s(kids) ; op = 1 for "is not" */
    JN_UNARY,    /* op a: '-', '+', '!' (not) */
    JN_BINARY,   /* a op b: + - * / D(//) % P(**) ~ */
    JN_COMPARE,  /* a op b: = (==) ! (!=) < > l (<=) g (>=) i (in) n (not in) */
    JN_AND,
    JN_OR,
    JN_COND,     /* b if a else c */
} jnode_kind;

typedef struct jnode jnode;
struct jnode {
    jnode_kind kind;
    int line;
    int op;
    const char *s; /* a name or text, NUL-terminated */
    size_t s_len;
    jv lit;
    jnode *a, *b, *c;
    jnode **kids; /* arguments, items, parameters, or target names */
    const char **kw; /* (n_kids) keyword-argument names, NULL for positional ones */
    int64_t n_kids;
    jnode **body, **els;
    int64_t n_body, n_els;
};

typedef struct {
    jnode **body;
    int64_t n_body;
} jtemplate;

/* Parses src[0 .. n) into a tree in a. Errors: EDDY_ERR_UNSUPPORTED (a construct
 * eddy does not implement, or malformed text), EDDY_ERR_NOMEM. */
eddy_status jinja_parse(jarena *a, const char *src, size_t n, jtemplate *out, eddy_error *err);

/* Renders the template with the variables of the dict vars into out.
 * Errors: EDDY_ERR_UNSUPPORTED (an unknown filter, test, function or method),
 * EDDY_ERR_ARG (the template raised an exception, or a Python-level error such as
 * a type mismatch or an undefined value used), EDDY_ERR_NOMEM. */
eddy_status jinja_render(jarena *a, const jtemplate *t, jv vars, jbuf *out, eddy_error *err);

#endif
