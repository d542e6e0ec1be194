/*
 * bin/tgen/autograd.c: compiles derivatives.yaml formulas into the
 * Autograd kernels and backward nodes of the ops.
 *
 * The formula language, kept small:
 *   expr    := term (('+' | '-') term)*
 *   term    := unary (('*' | '/') unary)*
 *   unary   := '-' unary | postfix
 *   postfix := primary ('.' name '(' args ')')*      x.f(a) is f(x, a)
 *   primary := number | 'string' | name | name '(' args ')' | '(' expr ')'
 * Names: grad, result, the op's arguments, true/false; `x.sizes()` of a
 * Tensor argument is its shape (saved instead of the tensor). An op
 * returning a tuple has its results as result0, result1, ... or by their
 * schema names, the gradient of result i as grads[i] (zeros where no path
 * reached it) and grad as that of its first differentiable result; a key
 * naming several inputs ("input, weight, bias") takes a call of an op
 * returning a tuple, one result per input, and may pass grad_input_mask
 * (which of those inputs need a gradient). A call
 * f(...) calls the C function tn_f: an op of the schema (whose parameter
 * types convert numbers and fill defaults), a lib/core function (t,
 * transpose, expand) or a helper of lib/autograd (_sum_backward, ...).
 * Arithmetic on tensors calls the ops (tn_mul, tn_add_scalar, ...); on
 * scalars it is done in C. Every value comes from public ops, so a
 * backward computed under create_graph records its own graph.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tgen.h"

/* lib/autograd's TN__AD_MAX_V: the most values a kind's apply unpacks */
#define TG_MAX_V 40

static int edge_of(const struct tg_func *fn, int i);

/* ------------------------------------------------------------------ AST */

enum ek { E_NUM, E_STR, E_ID, E_CALL, E_BIN, E_NEG };

struct expr {
    enum ek kind;
    char op;
    char text[96];          /* number, string, name */
    struct expr *kid[TG_MAX_ARGS];
    int nkid;
};

struct parser {
    const char *s;
    size_t i;
    const char *path;
    int line, col;
    bool failed;
};

static int p_error(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int p_error(struct parser *p, const char *fmt, ...)
{
    if (p->failed)
        return -1;
    p->failed = true;
    va_list ap;
    fprintf(stderr, "%s:%d:%d: ", p->path, p->line, p->col + (int)p->i);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return -1;
}

static struct expr *node(enum ek k)
{
    struct expr *e = calloc(1, sizeof *e);
    if (!e) {
        fputs("tgen: out of memory\n", stderr);
        exit(2);
    }
    e->kind = k;
    return e;
}

static void expr_free(struct expr *e)
{
    if (!e)
        return;
    for (int i = 0; i < e->nkid; i++)
        expr_free(e->kid[i]);
    free(e);
}

static void ws(struct parser *p)
{
    while (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n')
        p->i++;
}

static bool eat(struct parser *p, char c)
{
    ws(p);
    if (p->s[p->i] != c)
        return false;
    p->i++;
    return true;
}

static struct expr *parse_expr(struct parser *p, int depth);

static int parse_args(struct parser *p, struct expr *call, int depth)
{
    if (eat(p, ')'))
        return 0;
    do {
        if (call->nkid == TG_MAX_ARGS)
            return p_error(p, "too many arguments");
        struct expr *a = parse_expr(p, depth + 1);
        if (!a)
            return -1;
        call->kid[call->nkid++] = a;
    } while (eat(p, ','));
    return eat(p, ')') ? 0 : p_error(p, "expected ')' or ','");
}

static size_t name_len(const char *s)
{
    size_t n = 0;
    if (!(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return 0;
    while (isalnum((unsigned char)s[n]) || s[n] == '_')
        n++;
    return n;
}

static struct expr *parse_primary(struct parser *p, int depth)
{
    ws(p);
    const char *s = p->s + p->i;
    if (depth > 64) {
        p_error(p, "formula nested too deeply");
        return NULL;
    }
    if (isdigit((unsigned char)*s) || (*s == '.' && isdigit((unsigned char)s[1]))) {
        /* digits, a point, and an exponent with its sign (1e-12): the
         * exponent's '-' is part of the number, not a subtraction */
        size_t n = strspn(s, "0123456789.");
        if ((s[n] == 'e' || s[n] == 'E') &&
            (isdigit((unsigned char)s[n + 1]) ||
             ((s[n + 1] == '-' || s[n + 1] == '+') && isdigit((unsigned char)s[n + 2])))) {
            n += 1 + (s[n + 1] == '-' || s[n + 1] == '+');
            n += strspn(s + n, "0123456789");
        }
        if (n >= sizeof((struct expr *)0)->text) {
            p_error(p, "number too long");
            return NULL;
        }
        struct expr *e = node(E_NUM);
        memcpy(e->text, s, n);
        p->i += n;
        return e;
    }
    if (*s == '\'' || *s == '"') {
        const char *end = strchr(s + 1, *s);
        if (!end || (size_t)(end - s) >= sizeof((struct expr *)0)->text - 1) {
            p_error(p, "unterminated or long string");
            return NULL;
        }
        struct expr *e = node(E_STR);
        memcpy(e->text, s + 1, (size_t)(end - s - 1));
        p->i += (size_t)(end - s) + 1;
        return e;
    }
    if (*s == '(') {
        p->i++;
        struct expr *e = parse_expr(p, depth + 1);
        if (e && !eat(p, ')')) {
            p_error(p, "expected ')'");
            expr_free(e);
            return NULL;
        }
        return e;
    }
    size_t n = name_len(s);
    if (!n || n >= sizeof((struct expr *)0)->text) {
        p_error(p, "expected a name, a number or '('");
        return NULL;
    }
    struct expr *e = node(E_ID);
    memcpy(e->text, s, n);
    p->i += n;
    if (s[n] == '[') { /* grads[k] */
        size_t d = strspn(s + n + 1, "0123456789");
        if (!d || d > 2 || s[n + 1 + d] != ']' || n + d + 2 >= sizeof e->text) {
            p_error(p, "expected a number and ']' after '['");
            expr_free(e);
            return NULL;
        }
        memcpy(e->text + n, s + n, d + 2);
        p->i += d + 2;
        return e;
    }
    if (eat(p, '(')) {
        e->kind = E_CALL;
        if (parse_args(p, e, depth) < 0) {
            expr_free(e);
            return NULL;
        }
    }
    return e;
}

static struct expr *parse_postfix(struct parser *p, int depth)
{
    struct expr *e = parse_primary(p, depth);
    while (e && eat(p, '.')) {
        ws(p);
        size_t n = name_len(p->s + p->i);
        if (!n || n >= sizeof e->text) {
            p_error(p, "expected a method name after '.'");
            expr_free(e);
            return NULL;
        }
        struct expr *c = node(E_CALL);
        memcpy(c->text, p->s + p->i, n);
        p->i += n;
        c->kid[c->nkid++] = e;
        if (!eat(p, '(') || parse_args(p, c, depth) < 0) {
            p_error(p, "expected '(' after the method name");
            expr_free(c);
            return NULL;
        }
        e = c;
    }
    return e;
}

static struct expr *parse_unary(struct parser *p, int depth)
{
    if (eat(p, '-')) {
        struct expr *k = parse_unary(p, depth + 1);
        if (!k)
            return NULL;
        struct expr *e = node(E_NEG);
        e->kid[e->nkid++] = k;
        return e;
    }
    return parse_postfix(p, depth);
}

static struct expr *parse_binary(struct parser *p, int depth, bool additive)
{
    struct expr *l = additive ? parse_binary(p, depth, false) : parse_unary(p, depth);
    while (l) {
        ws(p);
        char c = p->s[p->i];
        if (additive ? (c != '+' && c != '-') : (c != '*' && c != '/'))
            break;
        p->i++;
        struct expr *r = additive ? parse_binary(p, depth, false) : parse_unary(p, depth);
        if (!r) {
            expr_free(l);
            return NULL;
        }
        struct expr *b = node(E_BIN);
        b->op = c;
        b->kid[0] = l;
        b->kid[1] = r;
        b->nkid = 2;
        l = b;
    }
    return l;
}

static struct expr *parse_expr(struct parser *p, int depth)
{
    if (depth > 64) {
        p_error(p, "formula nested too deeply");
        return NULL;
    }
    return parse_binary(p, depth, true);
}

/* ------------------------------------------------------------- emitting */

enum vk { V_TENSOR, V_SCALAR, V_NUM, V_RAW, V_INTLIST, V_STR, V_TENSORS, V_TUPLE };

struct val {
    enum vk kind;
    char text[512];
    int base, count;        /* V_TUPLE: t_[base .. base + count) */
};

/* What one formula's compilation gathers. */
struct ctx {
    const struct tg_schema *s;
    const struct tg_func *fn;
    struct parser *p;
    char steps[64][640];    /* "(t_[k] = call) != NULL" */
    int nsteps;
    int nt;                 /* t_ slots the steps fill */
    unsigned uses;          /* bit i: argument i */
    unsigned uses_sizes;    /* bit i: argument i's sizes */
    unsigned uses_res;      /* bit k: result k */
    const int *mask_edges;  /* the edges grad_input_mask stands for */
    int nmask;
};

static int arg_index(const struct tg_func *fn, const char *name)
{
    for (int i = 0; i < fn->nargs; i++)
        if (!strcmp(fn->args[i].name, name))
            return i;
    return -1;
}

static int step(struct ctx *c, struct val *out, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int step(struct ctx *c, struct val *out, const char *fmt, ...)
{
    if (c->nsteps == 64)
        return p_error(c->p, "formula too long");
    char call[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(call, sizeof call, fmt, ap);
    va_end(ap);
    snprintf(c->steps[c->nsteps], sizeof c->steps[0], "(t_[%d] = %s) != NULL", c->nt, call);
    out->kind = V_TENSOR;
    snprintf(out->text, sizeof out->text, "t_[%d]", c->nt);
    c->nsteps++;
    c->nt++;
    return 0;
}

/* A call of an op returning `count` tensors into fresh t_ slots. */
static int step_tuple(struct ctx *c, struct val *out, const char *cname, const char *list,
                      int count)
{
    if (c->nsteps == 64)
        return p_error(c->p, "formula too long");
    char *d = c->steps[c->nsteps];
    size_t len = sizeof c->steps[0];
    int at = snprintf(d, len, "%s(%s", cname, list);
    for (int k = 0; k < count && at > 0 && (size_t)at < len; k++)
        at += snprintf(d + at, len - (size_t)at, ", &t_[%d]", c->nt + k);
    if (at < 0 || (size_t)at + 8 >= len)
        return p_error(c->p, "formula too long");
    strcat(d, ") >= 0");
    out->kind = V_TUPLE;
    out->base = c->nt;
    out->count = count;
    snprintf(out->text, sizeof out->text, "(a tuple)");
    c->nsteps++;
    c->nt += count;
    return 0;
}

/* The index of the result named `n` (result, result<k>, or its schema
 * name), -1 when none. */
static int result_index(const struct tg_func *fn, const char *n)
{
    if (!strcmp(n, "result") && fn->nrets == 1)
        return 0;
    for (int k = 0; k < fn->nrets; k++) {
        char b[16];
        snprintf(b, sizeof b, "result%d", k);
        if (!strcmp(n, b) || (fn->rets[k].name && !strcmp(n, fn->rets[k].name)))
            return k;
    }
    return -1;
}

/* Sets out to a value of `kind` whose C text is printf-formatted; an error
 * when the text would not fit. */
static int setv(struct ctx *c, struct val *out, enum vk kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int setv(struct ctx *c, struct val *out, enum vk kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out->text, sizeof out->text, fmt, ap);
    va_end(ap);
    out->kind = kind;
    return n < 0 || (size_t)n >= sizeof out->text ? p_error(c->p, "formula too long") : 0;
}

/* A scalar value as a struct tn_scalar expression. */
static void as_scalar(const struct val *v, char *buf, size_t len)
{
    if (v->kind == V_NUM)
        snprintf(buf, len, strpbrk(v->text, ".eE") ? "tn_float(%s)" : "tn_int(%s)", v->text);
    else
        snprintf(buf, len, "%s", v->text);
}

/* A scalar value as a double expression. */
static void as_double(const struct val *v, char *buf, size_t len)
{
    if (v->kind == V_NUM)
        snprintf(buf, len, "((double)%s)", v->text);
    else
        snprintf(buf, len, "tn_scalar_to_double(%s)", v->text);
}

static bool is_scalarish(const struct val *v) { return v->kind == V_SCALAR || v->kind == V_NUM; }

static int emit(struct ctx *c, const struct expr *e, struct val *out);

static int emit_name(struct ctx *c, const struct expr *e, struct val *out)
{
    const char *n = e->text;
    if (!strcmp(n, "grad")) {
        out->kind = V_TENSOR;
        strcpy(out->text, "grad");
        return 0;
    }
    if (!strncmp(n, "grads[", 6)) {
        if (atoi(n + 6) >= c->fn->nrets)
            return p_error(c->p, "%s: %s has %d results", n, c->fn->name, c->fn->nrets);
        out->kind = V_TENSOR;
        snprintf(out->text, sizeof out->text, "%s", n);
        return 0;
    }
    if (!strcmp(n, "grad_input_mask")) {
        if (!c->nmask)
            return p_error(c->p, "grad_input_mask is for keys naming several inputs");
        int at = snprintf(out->text, sizeof out->text, "(const bool[]){");
        for (int k = 0; k < c->nmask; k++)
            at += snprintf(out->text + at, sizeof out->text - (size_t)at, "%stn__ad_edge(n0, %d)",
                           k ? ", " : "", c->mask_edges[k]);
        snprintf(out->text + at, sizeof out->text - (size_t)at, "}, %d", c->nmask);
        out->kind = V_RAW;
        return 0;
    }
    int r = arg_index(c->fn, n) < 0 ? result_index(c->fn, n) : -1;
    if (r >= 0) {
        c->uses_res |= 1u << r;
        out->kind = V_TENSOR;
        snprintf(out->text, sizeof out->text, "v_[%d]", edge_of(c->fn, c->fn->nargs) + r);
        return 0;
    }
    if (!strcmp(n, "None")) { /* an absent Tensor? argument (PyTorch's Tensor()) */
        out->kind = V_TENSOR;
        strcpy(out->text, "NULL");
        return 0;
    }
    if (!strcmp(n, "true") || !strcmp(n, "false")) {
        out->kind = V_RAW;
        strcpy(out->text, n);
        return 0;
    }
    int i = arg_index(c->fn, n);
    if (i < 0)
        return p_error(c->p, "'%s' is not grad, result or an argument of %s", n, c->fn->name);
    const struct tg_arg *a = &c->fn->args[i];
    c->uses |= 1u << i;
    switch (a->type) {
    case TG_TENSOR:
        out->kind = V_TENSOR;
        snprintf(out->text, sizeof out->text, "v_[%d]", edge_of(c->fn, i));
        break;
    case TG_SCALAR:
        out->kind = a->optional ? V_RAW : V_SCALAR;
        snprintf(out->text, sizeof out->text, a->optional ? "(n_->%s_has ? &n_->%s : NULL)"
                                                          : "n_->%s", n, n);
        break;
    case TG_INT_LIST:
        out->kind = V_INTLIST;
        snprintf(out->text, sizeof out->text, a->optional ? "n_->%s_has ? n_->%s : NULL, n_->%s_len"
                                                          : "n_->%s, n_->%s_len", n, n, n);
        break;
    case TG_INT: case TG_FLOAT: case TG_BOOL:
        out->kind = V_RAW;
        snprintf(out->text, sizeof out->text, a->optional ? "(n_->%s_has ? &n_->%s : NULL)"
                                                          : "n_->%s", n, n);
        break;
    case TG_STR: case TG_SCALAR_TYPE:
        out->kind = V_RAW;
        snprintf(out->text, sizeof out->text, "n_->%s", n);
        break;
    case TG_OPT_TENSOR_LIST: /* the index tensors of index/index_put, never differentiated */
        out->kind = V_TENSORS;
        snprintf(out->text, sizeof out->text, "(const struct tn_tensor *const *)v_%s, n_->%s_len",
                 n, n);
        break;
    default:
        return p_error(c->p, "'%s': %s arguments are not supported in formulas", n,
                       tg_type_name(a->type));
    }
    return 0;
}

static const char *default_c(const struct tg_arg *a, char *buf, size_t len)
{
    const char *d = a->def;
    if (!strcmp(d, "None")) {
        if (a->type == TG_SCALAR_TYPE)
            return "TN_DTYPE_UNSET";
        if (a->type == TG_INT_LIST)
            return "NULL, 0";
        return "NULL";
    }
    if (!strcmp(d, "True") || !strcmp(d, "False"))
        return !strcmp(d, "True") ? "true" : "false";
    if (a->type == TG_SCALAR) {
        snprintf(buf, len, strpbrk(d, ".eE") ? "tn_float(%s)" : "tn_int(%s)", d);
        return buf;
    }
    if (a->type == TG_STR) {
        snprintf(buf, len, "\"%.*s\"", (int)strlen(d) - 2, d + 1);
        return buf;
    }
    if (a->type == TG_INT_LIST && d[0] == '[') {
        if (!strcmp(d, "[]"))
            return "NULL, 0";
        snprintf(buf, len, "(const int64_t[])%s, 1", d);
        return buf;
    }
    return d;
}

static int emit_call(struct ctx *c, const struct expr *e, struct val *out)
{
    if (!strcmp(e->text, "sizes")) {
        const struct expr *x = e->kid[0];
        int i = x->kind == E_ID ? arg_index(c->fn, x->text) : -1;
        if (e->nkid != 1 || i < 0 || c->fn->args[i].type != TG_TENSOR)
            return p_error(c->p, "sizes() applies to a Tensor argument");
        /* the shape is saved, not the tensor */
        c->uses_sizes |= 1u << i;
        out->kind = V_INTLIST;
        snprintf(out->text, sizeof out->text, "n_->%s_sizes_, n_->%s_ndim_", x->text, x->text);
        return 0;
    }
    struct val args[TG_MAX_ARGS];
    for (int i = 0; i < e->nkid; i++)
        if (emit(c, e->kid[i], &args[i]) < 0)
            return -1;
    for (int i = 0; i < e->nkid; i++)
        if (args[i].kind == V_TUPLE)
            return p_error(c->p, "%s: a tuple cannot be an argument", e->text);
    if (!strcmp(e->text, "scalar_type")) {
        if (e->nkid != 1 || args[0].kind != V_TENSOR || !strcmp(args[0].text, "grad"))
            return p_error(c->p, "scalar_type() applies to result or a Tensor argument");
        return setv(c, out, V_RAW, "%s->dtype", args[0].text);
    }
    /* an op (ATen's _softmax is tn_underscore_softmax), else a helper of
     * lib/autograd (_scale is tn__scale) */
    char cname[192], uname[192];
    snprintf(cname, sizeof cname, "tn_%s", e->text);
    snprintf(uname, sizeof uname, "tn_underscore_%s", e->text + (e->text[0] == '_'));
    const struct tg_func *op = NULL;
    for (int i = 0; i < c->s->nfuncs; i++)
        if ((!strcmp(c->s->funcs[i].cname, cname) ||
             (e->text[0] == '_' && !strcmp(c->s->funcs[i].cname, uname))) &&
            !c->s->funcs[i].inplace && !c->s->funcs[i].is_out)
            op = &c->s->funcs[i];
    if (op)
        snprintf(cname, sizeof cname, "%s", op->cname);
    char list[600] = "", piece[520];
    size_t at = 0;
    if (op) {
        if (e->nkid > op->nargs)
            return p_error(c->p, "%s takes %d arguments, not %d", e->text, op->nargs, e->nkid);
        for (int i = 0; i < op->nargs; i++) {
            const struct tg_arg *a = &op->args[i];
            if (i >= e->nkid) {
                if (!a->def)
                    return p_error(c->p, "%s: argument '%s' has no default", e->text, a->name);
                char def[sizeof piece]; /* default_c may write its text here */
                snprintf(piece, sizeof piece, "%s", default_c(a, def, sizeof def));
            } else {
                const struct val *v = &args[i];
                bool ok = true;
                switch (a->type) {
                case TG_TENSOR: ok = v->kind == V_TENSOR; break;
                case TG_SCALAR: ok = a->optional ? v->kind == V_RAW : is_scalarish(v); break;
                case TG_INT_LIST: ok = v->kind == V_INTLIST; break;
                case TG_OPT_TENSOR_LIST: ok = v->kind == V_TENSORS; break;
                case TG_STR: ok = v->kind == V_STR || v->kind == V_RAW; break;
                default: ok = v->kind == V_RAW || v->kind == V_NUM; break;
                }
                if (!ok)
                    return p_error(c->p, "%s: argument '%s' (%s) gets a value of another type",
                                   e->text, a->name, tg_type_name(a->type));
                if (a->type == TG_SCALAR && !a->optional)
                    as_scalar(v, piece, sizeof piece);
                else if (v->kind == V_STR)
                    snprintf(piece, sizeof piece, "\"%s\"", v->text);
                else
                    snprintf(piece, sizeof piece, "%s", v->text);
            }
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", piece);
            if (at >= sizeof list)
                return p_error(c->p, "formula too long");
        }
    } else {
        for (int i = 0; i < e->nkid; i++) {
            const struct val *v = &args[i];
            if (v->kind == V_STR)
                snprintf(piece, sizeof piece, "\"%s\"", v->text);
            else
                snprintf(piece, sizeof piece, "%s", v->text);
            at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", piece);
            if (at >= sizeof list)
                return p_error(c->p, "formula too long");
        }
    }
    if (op && op->nrets > 1)
        return step_tuple(c, out, cname, list, op->nrets);
    return step(c, out, "%s(%s)", cname, list);
}

static int emit_bin(struct ctx *c, const struct expr *e, struct val *out)
{
    struct val a, b;
    if (emit(c, e->kid[0], &a) < 0 || emit(c, e->kid[1], &b) < 0)
        return -1;
    if (a.kind == V_TUPLE || b.kind == V_TUPLE)
        return p_error(c->p, "'%c' on a tuple", e->op);
    char sa[600], sb[600];
    char op = e->op;
    if (a.kind == V_TENSOR && b.kind == V_TENSOR) {
        switch (op) {
        case '+': return step(c, out, "tn_add(%s, %s, tn_int(1))", a.text, b.text);
        case '-': return step(c, out, "tn_sub(%s, %s, tn_int(1))", a.text, b.text);
        case '*': return step(c, out, "tn_mul(%s, %s)", a.text, b.text);
        default: return step(c, out, "tn_div(%s, %s)", a.text, b.text);
        }
    }
    if (a.kind == V_TENSOR && is_scalarish(&b)) {
        as_scalar(&b, sb, sizeof sb);
        switch (op) {
        case '+': return step(c, out, "tn_add_scalar(%s, %s, tn_int(1))", a.text, sb);
        case '-': return step(c, out, "tn_sub_scalar(%s, %s, tn_int(1))", a.text, sb);
        case '*': return step(c, out, "tn_mul_scalar(%s, %s)", a.text, sb);
        default: return step(c, out, "tn_div_scalar(%s, %s)", a.text, sb);
        }
    }
    if (is_scalarish(&a) && b.kind == V_TENSOR) {
        as_scalar(&a, sa, sizeof sa);
        struct val t;
        switch (op) {
        case '+': return step(c, out, "tn_add_scalar(%s, %s, tn_int(1))", b.text, sa);
        case '*': return step(c, out, "tn_mul_scalar(%s, %s)", b.text, sa);
        case '-':
            if (step(c, &t, "tn_neg(%s)", b.text) < 0)
                return -1;
            return step(c, out, "tn_add_scalar(%s, %s, tn_int(1))", t.text, sa);
        default:
            if (step(c, &t, "tn_reciprocal(%s)", b.text) < 0)
                return -1;
            return step(c, out, "tn_mul_scalar(%s, %s)", t.text, sa);
        }
    }
    if (is_scalarish(&a) && is_scalarish(&b)) {
        as_double(&a, sa, sizeof sa);
        as_double(&b, sb, sizeof sb);
        return setv(c, out, V_SCALAR, "tn_float(%s %c %s)", sa, op, sb);
    }
    return p_error(c->p, "'%c' needs tensors or scalars on both sides", op);
}

static int emit(struct ctx *c, const struct expr *e, struct val *out)
{
    switch (e->kind) {
    case E_NUM:
        out->kind = V_NUM;
        snprintf(out->text, sizeof out->text, "%s", e->text);
        return 0;
    case E_STR:
        out->kind = V_STR;
        snprintf(out->text, sizeof out->text, "%s", e->text);
        return 0;
    case E_ID:
        return emit_name(c, e, out);
    case E_CALL:
        return emit_call(c, e, out);
    case E_BIN:
        return emit_bin(c, e, out);
    case E_NEG: {
        struct val v;
        if (emit(c, e->kid[0], &v) < 0)
            return -1;
        if (v.kind == V_TENSOR)
            return step(c, out, "tn_neg(%s)", v.text);
        if (v.kind == V_NUM) {
            return setv(c, out, V_NUM, "(-%s)", v.text);
        }
        if (v.kind == V_SCALAR) {
            char d[600];
            as_double(&v, d, sizeof d);
            return setv(c, out, V_SCALAR, "tn_float(-%s)", d);
        }
        return p_error(c->p, "'-' needs a tensor or a scalar");
    }
    }
    return -1;
}

/* ------------------------------------------------------------ the kernel */

struct compiled {
    int edge[TG_MAX_RETS];  /* the Tensor arguments' edge indices */
    int nedge;
    struct val root;
    char (*steps)[640];
    int nsteps, nt;
    unsigned uses, uses_sizes, uses_res;
};

enum uses_kind { U_ARG, U_SIZES, U_RES };

/* The edge index of Tensor argument i (Tensor arguments in order). */
static int edge_of(const struct tg_func *fn, int i)
{
    int k = 0;
    for (int j = 0; j < i; j++)
        k += fn->args[j].type == TG_TENSOR;
    return k;
}

static int n_edges(const struct tg_func *fn) { return edge_of(fn, fn->nargs); }

/* "tn__ad_edge(&n_->node_, 0) || tn__ad_edge(&n_->node_, 2)" for the formulas
 * whose uses (uses_sizes, uses_res) have `bit`; every formula for bit 0. */
static void cond_of(FILE *f, const struct compiled *cf, int nf, unsigned bit,
                    enum uses_kind kind, const char *node)
{
    int k = 0;
    for (int i = 0; i < nf; i++) {
        unsigned u = kind == U_ARG ? cf[i].uses : kind == U_SIZES ? cf[i].uses_sizes
                                                                  : cf[i].uses_res;
        if (bit && !(u & bit))
            continue;
        for (int e = 0; e < cf[i].nedge; e++)
            fprintf(f, "%stn__ad_edge(%s, %d)", k++ ? " || " : "", node, cf[i].edge[e]);
    }
    if (!k)
        fputs("false", f);
}

/* The edges whose formulas read what `bit` names (cond_of's edges) as a
 * bit mask. */
static unsigned long edge_mask(const struct compiled *cf, int nf, unsigned bit,
                               enum uses_kind kind)
{
    unsigned long m = 0;
    for (int i = 0; i < nf; i++) {
        unsigned u = kind == U_ARG ? cf[i].uses : cf[i].uses_res;
        if (u & bit)
            for (int e = 0; e < cf[i].nedge; e++)
                m |= 1ul << cf[i].edge[e];
    }
    return m;
}

/* The node's saved tensors as a table (autograd/internal.h, struct
 * tn__ad_slot) that the kernel saves and apply unpacks through: the Tensor
 * arguments the formulas read, then the results; in a plain node (struct
 * tn__ad_saved_node) one after the other. Returns how many (none: no
 * table). */
static int write_slots(FILE *f, const struct tg_func *fn, const struct compiled *cf, int nf,
                       unsigned uses, unsigned uses_res, const char *id, bool plain)
{
    int n = 0;
    for (int i = 0; i < fn->nargs + fn->nrets; i++) {
        bool res = i >= fn->nargs;
        unsigned bit = 1u << (res ? i - fn->nargs : i);
        if ((!res && fn->args[i].type != TG_TENSOR) || !((res ? uses_res : uses) & bit))
            continue;
        if (!n++)
            fprintf(f, "static const struct tn__ad_slot slots_%s[] = {", id);
        if (plain) /* the generic node's n-1'th */
            fprintf(f, "{TN__AD_SAVED(%d), %d, 0x%lx}, ", n - 1,
                    res ? n_edges(fn) + i - fn->nargs : edge_of(fn, i),
                    edge_mask(cf, nf, bit, res ? U_RES : U_ARG));
        else if (res)
            fprintf(f, "{offsetof(struct node_%s, res%d_), %d, 0x%lx}, ", id, i - fn->nargs,
                    n_edges(fn) + i - fn->nargs, edge_mask(cf, nf, bit, U_RES));
        else
            fprintf(f, "{offsetof(struct node_%s, %s_), %d, 0x%lx}, ", id, fn->args[i].name,
                    edge_of(fn, i), edge_mask(cf, nf, bit, U_ARG));
    }
    if (n)
        fputs("{0, 0, 0}};\n\n", f);
    return n;
}

static void c_member(FILE *f, const struct tg_arg *a)
{
    const char *n = a->name;
    switch (a->type) {
    case TG_SCALAR: fprintf(f, "    struct tn_scalar %s;\n", n); break;
    case TG_INT: fprintf(f, "    int64_t %s;\n", n); break;
    case TG_FLOAT: fprintf(f, "    double %s;\n", n); break;
    case TG_BOOL: fprintf(f, "    bool %s;\n", n); break;
    case TG_STR: fprintf(f, "    char *%s;\n", n); break;
    case TG_SCALAR_TYPE: fprintf(f, "    enum tn_dtype %s;\n", n); break;
    case TG_INT_LIST: fprintf(f, "    int64_t %s[TN_MAX_DIMS];\n    int %s_len;\n", n, n); break;
    case TG_OPT_TENSOR_LIST: /* saved as tensors are (version checked) */
        fprintf(f, "    struct tn_saved %s_[TN_MAX_DIMS];\n    int %s_len;\n", n, n);
        break;
    default: break;
    }
    if (a->optional && a->type != TG_STR && a->type != TG_SCALAR_TYPE && a->type != TG_TENSOR)
        fprintf(f, "    bool %s_has;\n", n);
}

/* Copies argument a into the node (forward kernel). */
static void c_store(FILE *f, const struct tg_arg *a)
{
    const char *n = a->name;
    switch (a->type) {
    case TG_STR:
        fprintf(f, "    if (%s && !(n_->%s = strdup(%s))) {\n        rc_ = tn_set_error(TN_ENOMEM, "
                   "\"out of memory\");\n        goto out_;\n    }\n", n, n, n);
        return;
    case TG_INT_LIST:
        /* tn__ad_store_dims: the copy, or TN_EINVAL past TN_MAX_DIMS */
        if (a->optional)
            fprintf(f, "    n_->%s_has = %s != NULL;\n", n, n);
        fprintf(f, "    if ((rc_ = tn__ad_store_dims(n_->%s, &n_->%s_len, %s, %s_len, \"%s\")) < 0)\n"
                   "        goto out_;\n", n, n, n, n, n);
        return;
    case TG_OPT_TENSOR_LIST: /* each saved (None: nothing), the op has checked the length */
        fprintf(f, "    if (%s_len > TN_MAX_DIMS) {\n        rc_ = tn_set_error(TN_EINVAL, \"%s: more "
                   "than %%d tensors\", TN_MAX_DIMS);\n        goto out_;\n    }\n"
                   "    n_->%s_len = %s_len;\n    for (int k_ = 0; k_ < %s_len; k_++)\n"
                   "        if ((rc_ = tn__save(&n_->%s_[k_], %s[k_], false, 0)) < 0)\n"
                   "            goto out_;\n", n, n, n, n, n, n, n);
        return;
    default:
        if (a->optional && a->type != TG_SCALAR_TYPE) {
            fprintf(f, "    n_->%s_has = %s != NULL;\n    if (%s)\n        n_->%s = *%s;\n", n, n,
                    n, n, n);
            return;
        }
        fprintf(f, "    n_->%s = %s;\n", n, n);
    }
}

static void call_list(FILE *f, const struct tg_func *fn, int first)
{
    for (int i = first; i < fn->nargs; i++) {
        const struct tg_arg *a = &fn->args[i];
        fputs(", ", f);
        if (tg_is_list(a->type))
            fprintf(f, "%s, %s_len", a->name, a->name);
        else
            fputs(a->name, f);
    }
}

/* fn's Tensor arguments as an array: "{self, other}" ({NULL}: none). */
static void tensor_list(FILE *f, const struct tg_func *fn)
{
    fputc('{', f);
    int k = 0;
    for (int i = 0; i < fn->nargs; i++)
        if (fn->args[i].type == TG_TENSOR)
            fprintf(f, "%s%s", k++ ? ", " : "", fn->args[i].name);
    if (!k)
        fputs("NULL", f);
    fputc('}', f);
}

static void tensor_array(FILE *f, const struct tg_func *fn)
{
    fputs("    const struct tn_tensor *ins_[] = ", f);
    tensor_list(f, fn);
    fputs(";\n", f);
}

/* The same as a compound literal, "(const struct tn_tensor *const[]){self, other}". */
static void tensor_literal(FILE *f, const struct tg_func *fn)
{
    fputs("(const struct tn_tensor *const[])", f);
    tensor_list(f, fn);
}

/* Compiles formula i of d into cf (its steps into `steps`). */
static int compile_formula(const struct tg_schema *s, const struct tg_derivs *ds,
                           const struct tg_deriv *d, int i, struct compiled *cf,
                           char (*steps)[640])
{
    const struct tg_func *fn = d->fn;
    const struct tg_formula *fm = &d->f[i];
    struct parser p = {fm->expr, 0, ds->path, fm->line, fm->col, false};
    struct expr *e = parse_expr(&p, 0);
    ws(&p);
    if (e && p.s[p.i]) {
        p_error(&p, "unexpected '%c'", p.s[p.i]);
        expr_free(e);
        return -1;
    }
    if (!e)
        return -1;
    cf->nedge = fm->nin;
    for (int k = 0; k < fm->nin; k++)
        cf->edge[k] = edge_of(fn, fm->arg[k]);
    struct ctx c = {.s = s, .fn = fn, .p = &p, .mask_edges = cf->edge,
                    .nmask = fm->nin > 1 ? fm->nin : 0};
    int rc = emit(&c, e, &cf->root);
    expr_free(e);
    if (rc < 0)
        return -1;
    if (fm->nin == 1 && cf->root.kind != V_TENSOR)
        return p_error(&p, "the formula does not give a tensor");
    if (fm->nin > 1 && (cf->root.kind != V_TUPLE || cf->root.count != fm->nin))
        return p_error(&p, "a formula for %d inputs calls an op returning %d tensors",
                       fm->nin, fm->nin);
    memcpy(steps, c.steps, sizeof c.steps[0] * (size_t)c.nsteps);
    cf->steps = steps;
    cf->nsteps = c.nsteps;
    cf->nt = c.nt;
    cf->uses = c.uses;
    cf->uses_sizes = c.uses_sizes;
    cf->uses_res = c.uses_res;
    return 0;
}

/* The node's struct and its release_saved. */
/* Whether a node keeps more than saved tensors (a string, a Tensor?[]), so
 * that it needs a release function of its own. */
static bool own_release(const struct tg_func *fn, unsigned uses)
{
    for (int i = 0; i < fn->nargs; i++)
        if ((uses & (1u << i)) && (fn->args[i].type == TG_STR ||
                                   fn->args[i].type == TG_OPT_TENSOR_LIST))
            return true;
    return false;
}

static void write_node_struct(FILE *f, const struct tg_derivs *ds, const struct tg_deriv *d,
                              unsigned uses, unsigned uses_sizes, unsigned uses_res)
{
    const struct tg_func *fn = d->fn;
    const char *id = fn->ident;
    fprintf(f, "/* %s: %s:%d */\nstruct node_%s {\n    struct tn_node node_;\n", d->name, ds->path,
            d->line, id);
    for (int i = 0; i < fn->nargs; i++) {
        const struct tg_arg *a = &fn->args[i];
        if (a->type == TG_TENSOR && (uses & (1u << i)))
            fprintf(f, "    struct tn_saved %s_;\n", a->name);
        else if (a->type != TG_TENSOR && (uses & (1u << i)))
            c_member(f, a);
        if (uses_sizes & (1u << i))
            fprintf(f, "    int64_t %s_sizes_[TN_MAX_DIMS];\n    int %s_ndim_;\n", a->name,
                    a->name);
    }
    for (int k = 0; k < fn->nrets; k++)
        if (uses_res & (1u << k))
            fprintf(f, "    struct tn_saved res%d_;\n", k);
    fputs("};\n\n", f);

    /* saved tensors only: tn__release_saved_at walks the slot table */
    if (!own_release(fn, uses))
        return;
    fprintf(f, "static void release_%s(struct tn_node *n0)\n{\n    struct node_%s *n_ TN_UNUSED = "
               "(struct node_%s *)n0;\n", id, id, id);
    for (int i = 0; i < fn->nargs; i++) {
        const struct tg_arg *a = &fn->args[i];
        if (!(uses & (1u << i)))
            continue;
        if (a->type == TG_TENSOR)
            fprintf(f, "    tn__saved_release(&n_->%s_);\n", a->name);
        else if (a->type == TG_STR)
            fprintf(f, "    free(n_->%s);\n    n_->%s = NULL;\n", a->name, a->name);
        else if (a->type == TG_OPT_TENSOR_LIST)
            fprintf(f, "    for (int k_ = 0; k_ < n_->%s_len; k_++)\n"
                       "        tn__saved_release(&n_->%s_[k_]);\n", a->name, a->name);
    }
    for (int k = 0; k < fn->nrets; k++)
        if (uses_res & (1u << k))
            fprintf(f, "    tn__saved_release(&n_->res%d_);\n", k);
    fputs("}\n\n", f);
}

/* An Autograd kernel's return type, name and parameters, up to (not
 * including) the closing parenthesis: callers add out-pointers. */
static void kernel_head(FILE *f, const char *ret, const struct tg_func *fn)
{
    fprintf(f, "%s %s(tn_keyset ks", ret, fn->autograd);
    for (int i = 0; i < fn->nargs; i++) {
        fputs(", ", f);
        tg_c_param(f, &fn->args[i]);
    }
}

/* One formula's part of apply: out[edge] for each of its inputs. */
/* How a formula that failed leaves: to apply's done_ label, or, in a
 * kind's formulas function, returning its status. */
static const char *fail_exit = "goto done_;";

static void write_formula(FILE *f, const struct tg_formula *fm, const struct compiled *cf)
{
    /* the edges' test, "tn__ad_edge(n0, 0) || ..." (TG_MAX_RETS edges fit) */
    char test[256];
    int tl = 0;
    for (int e = 0; e < cf->nedge; e++)
        tl += snprintf(test + tl, sizeof test - (size_t)tl, "%stn__ad_edge(n0, %d)",
                       e ? " || " : "", cf->edge[e]);
    bool one = cf->nedge == 1;
    /* one call: tn__ad_put keeps its result, or gives the error; the
     * edge's test and the call are one condition */
    static const char pre[] = "(t_[0] = ", post[] = ") != NULL";
    size_t l0 = cf->nsteps ? strlen(cf->steps[0]) : 0;
    if (cf->nsteps == 1 && cf->nt == 1 && cf->root.kind != V_TUPLE &&
        !strcmp(cf->root.text, "t_[0]") && !strncmp(cf->steps[0], pre, sizeof pre - 1) &&
        l0 > sizeof pre + sizeof post && !strcmp(cf->steps[0] + l0 - (sizeof post - 1), post)) {
        fprintf(f, "    if (%s%s%s /* %s: %s */ && (rc_ = tn__ad_put(&out[%d], %.*s)) < 0)\n"
                   "        %s\n", one ? "" : "(", test, one ? "" : ")", fm->input, fm->expr,
                cf->edge[0],
                (int)(l0 - (sizeof pre - 1) - (sizeof post - 1)), cf->steps[0] + sizeof pre - 1,
                fail_exit);
        return;
    }
    if (cf->nsteps == 0) {
        fprintf(f, "    if (%s) /* %s: %s */\n        out[%d] = tn_retain((struct tn_tensor *)%s);\n",
                test, fm->input, fm->expr, cf->edge[0], cf->root.text);
        return;
    }
    fprintf(f, "    if (%s) { /* %s: %s */\n", test, fm->input, fm->expr);
    fprintf(f, "        struct tn_tensor *t_[%d] = {0};\n        bool ok_ = ", cf->nt);
    for (int k = 0; k < cf->nsteps; k++)
        fprintf(f, "%s%s", k ? "\n            && " : "", cf->steps[k]);
    fputs(";\n", f);
    int k;
    if (cf->root.kind != V_TUPLE && sscanf(cf->root.text, "t_[%d]", &k) == 1) {
        fprintf(f, "        if ((rc_ = tn__ad_take(&out[%d], t_, %d, %d, ok_)) < 0)\n"
                   "            %s\n    }\n", cf->edge[0], cf->nt, k, fail_exit);
        return;
    }
    fputs("        if (ok_) {\n", f);
    if (cf->root.kind == V_TUPLE)
        for (int e = 0; e < cf->nedge; e++)
            fprintf(f, "            out[%d] = t_[%d];\n            t_[%d] = NULL;\n", cf->edge[e],
                    cf->root.base + e, cf->root.base + e);
    else
        fprintf(f, "            out[%d] = %s;\n            %s = NULL;\n", cf->edge[0],
                cf->root.text, cf->root.text);
    fprintf(f, "        }\n        for (int i_ = 0; i_ < %d; i_++)\n"
               "            tn_release(t_[i_]);\n        if (!ok_) {\n"
               "            rc_ = tn_last_status();\n            %s\n        }\n    }\n",
            cf->nt, fail_exit);
}

/* The apply of a node whose op takes the index tensors of a Tensor?[]
 * argument (index, index_put): it unpacks them and its saved tensors,
 * runs the formulas and releases what it unpacked. */
static void write_apply(FILE *f, const struct tg_deriv *d, const struct compiled *cf,
                        unsigned uses, bool slots, int g0)
{
    const struct tg_func *fn = d->fn;
    const char *id = fn->ident;
    int nf = d->nf, ne = n_edges(fn), nr = fn->nrets;
    fprintf(f, "static int apply_%s(struct tn_node *n0, struct tn_tensor *const *grads, "
               "struct tn_tensor **out)\n{\n    struct node_%s *n_ TN_UNUSED = (struct node_%s *)n0;\n"
               "    const struct tn_tensor *grad TN_UNUSED = grads[%d];\n    int rc_ = 0;\n",
            id, id, id, g0);
    if (slots)
        fprintf(f, "    struct tn_tensor *v_[%d] = {NULL};\n", ne + nr);
    for (int i = 0; i < fn->nargs; i++)
        if (fn->args[i].type == TG_OPT_TENSOR_LIST && (uses & (1u << i))) {
            const char *nm = fn->args[i].name;
            fprintf(f, "    struct tn_tensor *v_%s[TN_MAX_DIMS] = {NULL};\n    if (", nm);
            cond_of(f, cf, nf, 1u << i, U_ARG, "n0");
            /* a None entry saved nothing; the others as a Tensor argument */
            fprintf(f, ")\n        for (int k_ = 0; k_ < n_->%s_len; k_++)\n"
                       "            if ((n0->released || n_->%s_[k_].t) &&\n"
                       "                !(v_%s[k_] = tn__unpack(&n_->%s_[k_], n0))) {\n"
                       "                rc_ = tn_last_status();\n                goto done_;\n"
                       "            }\n", nm, nm, nm, nm);
        }
    /* NULL from a saved tensor: freed by an earlier backward, or changed */
    if (slots)
        fprintf(f, "    if ((rc_ = tn__ad_unpack_all(n0, slots_%s, v_)) < 0)\n        goto done_;\n",
                id);
    for (int i = 0; i < nf; i++)
        write_formula(f, &d->f[i], &cf[i]);
    fputs("done_: __attribute__((unused));\n", f);
    if (slots)
        fprintf(f, "    tn__ad_release_all(v_, %d);\n", ne + nr);
    for (int i = 0; i < fn->nargs; i++)
        if (fn->args[i].type == TG_OPT_TENSOR_LIST && (uses & (1u << i)))
            fprintf(f, "    for (int k_ = 0; k_ < TN_MAX_DIMS; k_++)\n        tn_release(v_%s[k_]);\n",
                    fn->args[i].name);
    fputs("    return rc_;\n}\n\n", f);
}

/* The formulas functions written so far whose bodies read no node value,
 * by body: shared_fx returns the id of the first with `body` (kept), or
 * `id` after keeping body under it. Past FX_SEEN bodies, each its own. */
#define FX_SEEN 1024
static struct {
    char *body;
    const char *id;
} fx_seen[FX_SEEN];
static int n_fx_seen;

static const char *shared_fx(const char *body, const char *id)
{
    for (int i = 0; i < n_fx_seen; i++)
        if (!strcmp(fx_seen[i].body, body))
            return fx_seen[i].id;
    if (n_fx_seen < FX_SEEN && (fx_seen[n_fx_seen].body = strdup(body)))
        fx_seen[n_fx_seen++].id = id;
    return id;
}

static void shared_fx_free(void)
{
    while (n_fx_seen > 0)
        free(fx_seen[--n_fx_seen].body);
}

static int write_one(const struct tg_schema *s, const struct tg_derivs *ds,
                     const struct tg_deriv *d, FILE *f)
{
    const struct tg_func *fn = d->fn;
    const char *id = fn->ident;
    struct compiled cf[TG_MAX_ARGS];
    static char steps[TG_MAX_ARGS][64][640];
    int nf = d->nf;
    for (int i = 0; i < nf; i++)
        if (compile_formula(s, ds, d, i, &cf[i], steps[i]) < 0)
            return -1;
    unsigned uses = 0, uses_sizes = 0, uses_res = 0;
    for (int i = 0; i < nf; i++) {
        uses |= cf[i].uses;
        uses_sizes |= cf[i].uses_sizes;
        uses_res |= cf[i].uses_res;
    }
    int ne = n_edges(fn), nr = fn->nrets;
    bool multi = nr > 1;
    int g0 = 0; /* `grad`: the first differentiable result's */
    while (g0 < nr - 1 && !d->out_diff[g0])
        g0++;
    /* the formulas of a kind (tn__ad_apply_kind unpacks and releases), or,
     * for the index tensors of a Tensor?[] argument, an apply of its own */
    bool lists = ne + nr > TG_MAX_V;
    for (int i = 0; i < fn->nargs; i++)
        lists |= fn->args[i].type == TG_OPT_TENSOR_LIST && (uses & (1u << i));
    /* whether the node keeps values beside its saved tensors */
    bool fields = own_release(fn, uses) || uses_sizes;
    for (int i = 0; i < fn->nargs; i++)
        fields |= fn->args[i].type != TG_TENSOR && (uses & (1u << i));
    /* a node of one result that keeps saved tensors alone is lib/autograd's
     * struct tn__ad_saved_node, its slots at TN__AD_SAVED(i): no struct */
    bool plain = !multi && !fields && !lists;
    if (plain)
        fprintf(f, "/* %s: %s:%d */\n", d->name, ds->path, d->line);
    else
        write_node_struct(f, ds, d, uses, uses_sizes, uses_res);
    /* the saved tensors, which apply unpacks into v_[] (Tensor arguments by
     * their edge, then the results) */
    if (ne > 32) {
        fprintf(stderr, "tgen: %s: more than 32 Tensor arguments\n", fn->name);
        return -1;
    }
    int nslots = write_slots(f, fn, cf, nf, uses, uses_res, id, plain);
    bool slots = nslots > 0;
    if (!lists) {
        bool reads = false; /* whether the formulas read the node's values */
        for (int i = 0; i < nf; i++) {
            reads |= strstr(cf[i].root.text, "n_->") != NULL;
            for (int k = 0; k < cf[i].nsteps; k++)
                reads |= strstr(cf[i].steps[k], "n_->") != NULL;
        }
        /* the body first: a kind whose body (formulas and their comments)
         * is an earlier kind's, reading no value of its node, shares that
         * kind's function (frac, _to_copy, add.Scalar: "self: grad") */
        char *body = NULL;
        size_t blen = 0;
        FILE *b = open_memstream(&body, &blen);
        if (!b)
            return -1;
        if (reads)
            fprintf(b, "    struct node_%s *n_ = (struct node_%s *)n0;\n", id, id);
        fputs("    int rc_ = 0;\n", b);
        fail_exit = "return rc_;";
        for (int i = 0; i < nf; i++)
            write_formula(b, &d->f[i], &cf[i]);
        fail_exit = "goto done_;";
        fputs("    return rc_;\n", b);
        if (fclose(b) != 0 || !body)
            return -1;
        const char *fx = reads ? id : shared_fx(body, id);
        if (fx == id)
            fprintf(f, "static int fx_%s(struct tn_node *n0, const struct tn_tensor *grad, "
                       "struct tn_tensor *const *grads, struct tn_tensor *const *v_, "
                       "struct tn_tensor **out)\n{\n%s}\n\n", id, body);
        free(body);
        fprintf(f, "static const struct tn__ad_kind kind_%s = "
                   "{\"%s\", fx_%s, %s%s, %d, %d};\n\n", id, d->node, fx,
                slots ? "slots_" : "NULL", slots ? id : "", g0, ne + nr);
    }
    if (lists) /* apply, unpacking the index tensors too */
        write_apply(f, d, cf, uses, slots, g0);
    /* the functional kernel: results in r_[], each differentiable one
     * (output_differentiability, and floating or complex) taking the node */
    kernel_head(f, multi ? "int" : "struct tn_tensor *", fn);
    if (!multi && !fields) { /* a node of saved tensors alone: tn__ad_record1 */
        fprintf(f, ")\n{\n    tn_keyset prev_ = tn__ad_below_begin();\n"
                   "    struct tn_tensor *r_[1] = {%s(ks & ~TN_KEYSET(TN_KEY_AUTOGRAD)",
                fn->rdname);
        call_list(f, fn, 0);
        fputs(")};\n    return tn__ad_record1(tn__ad_below_done(prev_, r_[0]), "
              "(const struct tn_tensor *const[]){", f);
        for (int i = 0, k = 0; i < fn->nargs; i++)
            if (fn->args[i].type == TG_TENSOR)
                fprintf(f, "%s%s", k++ ? ", " : "", fn->args[i].name);
        if (!lists) {
            fprintf(f, "}, %d, r_, TN__AD_SAVED(%d), &kind_%s);\n}\n\n", ne, nslots, id);
            return 0;
        }
        fprintf(stderr, "tgen: %s: a node of saved tensors alone with Tensor?[] arguments\n",
                fn->name);
        return -1;
    }
    for (int k = 0; multi && k < nr; k++)
        fprintf(f, ", struct tn_tensor **o%d_", k);
    if (multi)
        fprintf(f, ")\n{\n    struct tn_tensor *r_[%d] = {0};\n    tn_keyset prev_ = "
                   "tn__ad_below_begin();\n    int rc_ = %s(ks & ~TN_KEYSET(TN_KEY_AUTOGRAD)",
                nr, fn->rdname);
    else
        fprintf(f, ")\n{\n    tn_keyset prev_ = tn__ad_below_begin();\n"
                   "    struct tn_tensor *r_[1] = {%s(ks & ~TN_KEYSET(TN_KEY_AUTOGRAD)",
                fn->rdname);
    call_list(f, fn, 0);
    for (int k = 0; multi && k < nr; k++)
        fprintf(f, ", &r_[%d]", k);
    /* tn__ad_below_done: 0, or the failed op's error; then below_end */
    fputs(multi ? ");\n    tn__ad_below_end(prev_);\n"
                : ")};\n    int rc_ = tn__ad_below_done(prev_, r_[0]);\n", f);
    tensor_array(f, fn);
    /* one result of a kind's node: tn__ad_record1_end saves and finishes */
    bool end1 = !multi && !lists;
    if (!end1) {
        fprintf(f, "    bool diff_[%d] = {", nr);
        for (int k = 0; k < nr; k++)
            fprintf(f, "%s%s", k ? ", " : "", multi ? "false" : "true");
        fputs("};\n", f);
    }
    for (int k = 0; multi && k < nr; k++)
        if (d->out_diff[k])
            fprintf(f, "    diff_[%d] = r_[%d] && float_like(r_[%d]);\n", k, k, k);
    /* tn__ad_node_begin: NULL where rc_ < 0, no input requires grad, or
     * (rc_ set) making the node failed */
    if (lists)
        fprintf(f, "    struct node_%s *n_ = tn__ad_node_begin(&rc_, ins_, %d, sizeof *n_, \"%s\", "
                   "apply_%s, ", id, ne, d->node, id);
    else
        fprintf(f, "    struct node_%s *n_ = tn__ad_kind_begin(&rc_, ins_, %d, sizeof *n_, &kind_%s, ",
                id, ne, id);
    if (!own_release(fn, uses))
        fprintf(f, slots ? "tn__release_saved_at, %d, slots_%s);\n"
                         : "tn__release_saved_at, %d, NULL);\n", nr, id);
    else
        fprintf(f, "release_%s, %d, NULL);\n", id, nr);
    /* a kernel of one result whose node keeps plain values alone (no
     * copy that can fail) stores them under one test, without a label */
    int nplain = 0;
    bool stores = end1 && !uses_sizes; /* whether none can fail */
    for (int i = 0; i < fn->nargs; i++) {
        const struct tg_arg *a = &fn->args[i];
        if (a->type == TG_TENSOR || !(uses & (1u << i)))
            continue;
        nplain++;
        stores &= a->type != TG_STR && a->type != TG_INT_LIST && a->type != TG_OPT_TENSOR_LIST &&
                 (!a->optional || a->type == TG_SCALAR_TYPE);
    }
    if (stores && nplain) {
        fputs(nplain > 1 ? "    if (n_) {\n" : "    if (n_)\n", f);
        for (int i = 0; i < fn->nargs; i++)
            if (fn->args[i].type != TG_TENSOR && (uses & (1u << i)))
                fprintf(f, "        n_->%s = %s;\n", fn->args[i].name, fn->args[i].name);
        fprintf(f, "%s    return tn__ad_record1_end(n_ ? &n_->node_ : NULL, rc_, ins_, %d, r_);\n}\n\n",
                nplain > 1 ? "    }\n" : "", ne);
        return 0;
    }
    fputs("    if (!n_)\n        goto out_;\n", f);
    for (int i = 0; i < fn->nargs; i++) {
        unsigned bit = 1u << i;
        const char *nm = fn->args[i].name;
        if (fn->args[i].type != TG_TENSOR && (uses & bit))
            c_store(f, &fn->args[i]);
        if (uses_sizes & bit) {
            fputs("    if (", f);
            cond_of(f, cf, nf, bit, U_SIZES, "&n_->node_");
            fprintf(f, ")\n        tn__ad_save_sizes(n_->%s_sizes_, &n_->%s_ndim_, %s);\n", nm,
                    nm, nm);
        }
    }
    /* a result without history is saved as it is (no cycle to break) */
    if (end1) {
        fprintf(f, "out_:\n    return tn__ad_record1_end(n_ ? &n_->node_ : NULL, rc_, ins_, %d, r_);\n}\n\n",
                ne);
        return 0;
    }
    if (slots)
        fprintf(f, "    if ((rc_ = tn__ad_save_all(&n_->node_, slots_%s, %d, ins_, r_, diff_)) < 0)\n"
                   "        goto out_;\n", id, ne);
    /* history for the differentiable results, or (rc_ < 0) none of them */
    fprintf(f, "out_:\n    %stn__ad_finish(n_ ? &n_->node_ : NULL, r_, diff_, %d, rc_)%s;\n",
            multi ? "if ((rc_ = " : "", nr, multi ? ") < 0)\n        return rc_" : "");
    for (int k = 0; multi && k < nr; k++)
        fprintf(f, "    *o%d_ = r_[%d];\n", k, k);
    fprintf(f, "    return %s;\n}\n\n", multi ? "0" : "r_[0]");
    return 0;
}

/* The in-place overloads PyTorch's derivatives.yaml lists apart from their
 * functional op, so that their nodes are named on (x.fill_(1).grad_fn is
 * FillBackward2, A.fill(x, 1)'s FillBackward0). */
static const char *inplace_node(const struct tg_func *ip)
{
    static const char *const names[][2] = {{"fill_.Scalar", "FillBackward2"},
                                           {"fill_.Tensor", "FillBackward3"}};
    char full[256];
    snprintf(full, sizeof full, "%s_.%s", ip->name, ip->overload);
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (!strcmp(names[k][0], full))
            return names[k][1];
    return NULL;
}

/* In-place overload: out of place on a clone, then copied back, self
 * taking the result's history (tn__ad_commit_inplace). */
static void write_inplace(const struct tg_func *ip, const struct tg_func *fn, FILE *f)
{
    fprintf(f, "/* %s */\n", ip->text);
    kernel_head(f, "int", ip);
    fputs(")\n{\n    tn_keyset prev_;\n    struct tn_tensor *c_;\n", f);
    /* no input requiring grad: the op below Autograd (tn__ad_below_rc ends
     * it), else on a clone of self whose result self takes */
    fputs("    if (tn__ad_below_unless_needed(", f);
    tensor_literal(f, ip);
    fprintf(f, ", %d, &prev_))\n"
               "        return tn__ad_below_rc(prev_, %s(ks & ~TN_KEYSET(TN_KEY_AUTOGRAD)",
            n_edges(ip), ip->rdname);
    call_list(f, ip, 0);
    fprintf(f, "));\n    return (c_ = tn__ad_inplace_clone(self)) ? "
               "tn__ad_inplace_end(self, c_, %s(c_", fn->cname);
    call_list(f, ip, 1);
    /* the node the op has just made for o_ alone takes the in-place name */
    if (inplace_node(ip))
        fprintf(f, "), \"%s\") : tn_last_status();\n}\n\n", inplace_node(ip));
    else
        fputs("), NULL) : tn_last_status();\n}\n\n", f);
}

/* The Autograd kernel of an op without a derivatives.yaml entry (see
 * mark_no_derivative): runs the op below Autograd and, when an input
 * requires grad, gives a floating or complex result a node whose backward
 * fails as PyTorch's does. In place: on a clone of self, whose history
 * self then takes (tn__ad_commit_inplace, views included). */
/* The same for an op returning a tuple: its floating results take the
 * node. */
static void write_no_derivative_tuple(const struct tg_func *fn, FILE *f)
{
    int nr = fn->nrets;
    kernel_head(f, "int", fn);
    for (int k = 0; k < nr; k++)
        fprintf(f, ", struct tn_tensor **o%d_", k);
    fprintf(f, ")\n{\n    struct tn_tensor *r_[%d] = {0};\n", nr);
    tensor_array(f, fn);
    fprintf(f, "    tn_keyset prev_ = tn__ad_below_begin();\n    int rc_ = %s(ks & "
               "~TN_KEYSET(TN_KEY_AUTOGRAD)", fn->rdname);
    call_list(f, fn, 0);
    for (int k = 0; k < nr; k++)
        fprintf(f, ", &r_[%d]", k);
    fprintf(f, ");\n    tn__ad_below_end(prev_);\n    if (rc_ < 0 || (rc_ = tn__ad_noderiv_tuple(r_, "
               "%d, ins_, %d, \"%s\", \"%s\")) < 0)\n        return rc_;\n", nr, n_edges(fn),
            fn->node, fn->name);
    for (int k = 0; k < nr; k++)
        fprintf(f, "    *o%d_ = r_[%d];\n", k, k);
    fputs("    return 0;\n}\n\n", f);
}

/* The node's backward is tn__ad_noderiv_*'s, which fails naming the op. */
static void write_no_derivative(const struct tg_func *fn, FILE *f)
{
    int ne = n_edges(fn);
    fprintf(f, "/* %s: no derivatives.yaml entry */\n", fn->text);
    if (fn->nrets > 1) {
        write_no_derivative_tuple(fn, f);
        return;
    }
    kernel_head(f, fn->inplace ? "int" : "struct tn_tensor *", fn);
    fputs(")\n{\n", f);
    if (!fn->inplace) {
        /* the call's state (need_ before the call, which runs below
         * Autograd; the result's node after), its inputs a compound literal
         * of the kernel's block */
        fputs("    struct tn__ad_noderiv_call c_ = tn__ad_noderiv_begin(", f);
        tensor_literal(f, fn);
        fprintf(f, ", %d, \"%s\", \"%s\");\n"
                   "    return tn__ad_noderiv_result(&c_, %s(ks & ~TN_KEYSET(TN_KEY_AUTOGRAD)",
                ne, fn->node, fn->name, fn->rdname);
        call_list(f, fn, 0);
        fputs("));\n}\n\n", f);
        return;
    }
    tensor_array(f, fn);
    fprintf(f, "    bool need_ = tn__ad_needed(ins_, %d);\n", ne);
    fprintf(f, "    if (!need_ || !float_like(self)) {\n        tn_keyset prev_ = "
               "tn__ad_below_begin();\n        return tn__ad_below_rc(prev_, %s(ks & "
               "~TN_KEYSET(TN_KEY_AUTOGRAD)", fn->rdname);
    call_list(f, fn, 0);
    fputs("));\n    }\n"
          "    if (tn__ad_check_inplace(self) < 0)\n        return tn_last_status();\n"
          "    tn_keyset prev_ = tn__ad_below_begin();\n"
          "    struct tn_tensor *c_ = tn_clone(self);\n"
          "    int rc_ = c_ ? ", f);
    fprintf(f, "%s(ks & ~TN_KEYSET(TN_KEY_AUTOGRAD), c_", fn->rdname);
    call_list(f, fn, 1);
    fprintf(f, ") : tn_last_status();\n    tn__ad_below_end(prev_);\n    if (rc_ < 0) {\n"
               "        tn_release(c_);\n        return rc_;\n    }\n"
               "    return tn__ad_noderiv_inplace(self, c_, ins_, %d, \"%s\", \"%s\");\n}\n\n",
            ne, fn->node, fn->name);
}

static int write_formula_table(const struct tg_schema *s, const struct tg_derivs *ds, FILE *f);

int tg_write_autograd(const struct tg_schema *s, const struct tg_derivs *ds, FILE *f,
                      const char *header, const char *private)
{
    const char *base = strrchr(ds->path, '/') ? strrchr(ds->path, '/') + 1 : ds->path;
    fprintf(f, "/* Generated by tgen from %s: do not edit. */\n", base);
    fputs("/* The Autograd kernels: each runs its op below the Autograd key and, when\n"
          " * grad mode is on and an input requires grad, records the node whose\n"
          " * apply computes the formulas of derivatives.yaml. */\n"
          "#include <stddef.h>\n#include <stdlib.h>\n#include <string.h>\n", f);
    if (private)
        fprintf(f, "#include \"%s\"\n", private);
    else
        fprintf(f, "#define TN_OPS_NATIVE\n#include <%s>\n", header);
    fputs("\n#include \"autograd/internal.h\"\n", f);
    if (private)
        fputs("#include \"autograd/formula_table.h\"\n", f);
    fputs("\n"
          "/* a node's pointer and grad, which some formulas do not read */\n"
          "#define TN_UNUSED __attribute__((unused))\n\n", f);
    fputs("static __attribute__((unused)) bool float_like(const struct tn_tensor *t)\n{\n"
          "    return tn_dtype_is_floating(t->dtype) || tn_dtype_is_complex(t->dtype);\n}\n\n", f);
    int rc = 0;
    for (int i = 0; i < ds->n && rc == 0; i++)
        rc = write_one(s, ds, &ds->d[i], f);
    shared_fx_free();
    if (rc < 0)
        return -1;
    for (int i = 0; i < s->nfuncs; i++)
        if (s->funcs[i].no_derivative)
            write_no_derivative(&s->funcs[i], f);
    for (int i = 0; i < s->nfuncs; i++) {
        const struct tg_func *ip = &s->funcs[i];
        if (!ip->inplace || !ip->autograd[0])
            continue;
        for (int k = 0; k < ds->n; k++) {
            const struct tg_func *fn = ds->d[k].fn;
            if (!strcmp(fn->name, ip->name) && !strcmp(fn->overload, ip->overload))
                write_inplace(ip, fn, f);
        }
    }
    /* the formula table, for libtensor's graph autograd (not a plugin's) */
    if (!private)
        return ferror(f) ? -1 : 0;
    return write_formula_table(s, ds, f);
}

/* ------------------------------------------------ the formulas as data */

/* The formulas of derivatives.yaml as a table for graph autograd
 * (lib/compile/joint.c, lib/autograd/formula_table.h): each formula's
 * parse tree in prefix order, one row per node and one formula a line, a
 * call naming the op it resolves to ("aten::mul.Tensor") or, when no op,
 * the helper or core function as written ("_gelu_bw", "t"). */
static int table_node(const struct tg_schema *s, const struct expr *e, FILE *f, int *row)
{
    static const char *const kinds[] = {"TN__DX_NUM", "TN__DX_STR", "TN__DX_ID",
                                        "TN__DX_CALL", "TN__DX_BIN", "TN__DX_NEG"};
    char text[256];
    snprintf(text, sizeof text, "%s", e->text);
    if (e->kind == E_CALL) {
        char cname[192], uname[192];
        snprintf(cname, sizeof cname, "tn_%s", e->text);
        snprintf(uname, sizeof uname, "tn_underscore_%s", e->text + (e->text[0] == '_'));
        for (int i = 0; i < s->nfuncs; i++) {
            const struct tg_func *op = &s->funcs[i];
            if ((!strcmp(op->cname, cname) || (e->text[0] == '_' && !strcmp(op->cname, uname))) &&
                !op->inplace && !op->is_out)
                snprintf(text, sizeof text, "%s::%s%s%s", op->ns, op->name,
                         op->overload[0] ? "." : "", op->overload);
        }
    }
    fprintf(f, " {%s, %d, '%c', \"%s\"},", kinds[e->kind], e->nkid,
            e->kind == E_BIN ? e->op : ' ', text);
    (*row)++;
    for (int i = 0; i < e->nkid; i++)
        if (table_node(s, e->kid[i], f, row) < 0)
            return -1;
    return 0;
}

static int table_formula(const struct tg_schema *s, const char *path, const struct tg_formula *fm,
                         FILE *f, int *row)
{
    struct parser p = {fm->expr, 0, path, fm->line, fm->col, false};
    struct expr *e = parse_expr(&p, 0);
    ws(&p);
    if (e && p.s[p.i])
        p_error(&p, "unexpected '%c'", p.s[p.i]);
    fprintf(f, "    /* %d */", *row); /* one formula a line */
    int rc = e && !p.failed ? table_node(s, e, f, row) : -1;
    fputc('\n', f);
    expr_free(e);
    return rc;
}

static int write_formula_table(const struct tg_schema *s, const struct tg_derivs *ds, FILE *f)
{
    int total = ds->n + ds->ndefs, row = 0, nf = 0;
    fputs("\n/* derivatives.yaml as data (autograd/formula_table.h) */\n"
          "const struct tn__dx tn__dx_rows[] = {\n", f);
    int *roots = calloc((size_t)(total * TG_MAX_ARGS) + 1, sizeof *roots);
    if (!roots)
        return -1;
    for (int i = 0; i < total; i++) {
        const struct tg_deriv *d = i < ds->n ? &ds->d[i] : &ds->defs[i - ds->n];
        for (int k = 0; k < d->nf; k++) {
            roots[nf++] = row;
            if (table_formula(s, ds->path, &d->f[k], f, &row) < 0) {
                free(roots);
                return -1;
            }
        }
    }
    fputs("};\n\nconst struct tn__dformula tn__dx_formulas[] = {\n", f);
    nf = 0;
    for (int i = 0; i < total; i++) {
        const struct tg_deriv *d = i < ds->n ? &ds->d[i] : &ds->defs[i - ds->n];
        fputs("   ", f); /* an entry's formulas a line */
        for (int k = 0; k < d->nf; k++, nf++)
            fprintf(f, " {\"%s\", %d},", d->f[k].input, roots[nf]);
        fputc('\n', f);
    }
    free(roots);
    fputs("};\n\nconst struct tn__dentry tn__dx_entries[] = {\n", f);
    nf = 0;
    for (int i = 0; i < total; i++) {
        const struct tg_deriv *d = i < ds->n ? &ds->d[i] : &ds->defs[i - ds->n];
        if (d->fn)
            fprintf(f, "    {\"%s::%s\", NULL, %d, %d},\n", d->fn->ns, d->name, nf, d->nf);
        else
            fprintf(f, "    {\"%s\", \"%s\", %d, %d},\n", d->name, d->params, nf, d->nf);
        nf += d->nf;
    }
    fprintf(f, "};\n\nconst int tn__dx_nentries = %d;\n", total);
    return ferror(f) ? -1 : 0;
}
