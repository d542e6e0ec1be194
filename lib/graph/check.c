/*
 * graph/check.c: tn_graph_check: targets and arguments against the op
 * schemas, definitions before uses (and cycles), then shapes and dtypes
 * through the Meta kernels compared with tensor_values, twice for graphs
 * with symbolic sizes (at the hint and at another point of each range), so
 * that a size written as "s0" or "2*s0" is checked as an expression.
 */
#include "graph/internal.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct checker {
    struct tn_graph *g;
    tn_graph_problem_fn fn;
    void *ctx;
    int problems;
    /* the last few ops' .Scalar overloads (NULL: none) */
    struct { const struct tn_op *op, *scalar; } scalars[4];
    unsigned next_scalar;
};

static void problem(struct checker *c, const char *node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void problem(struct checker *c, const char *node, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->problems++;
    if (c->fn)
        c->fn(node, msg, c->ctx);
}

/* ------------------------------------------------- size expressions */

struct expr {
    const char *p;
    const struct tn_graph *g;
    const int64_t *vals;
    int err;
};

static int64_t e_sum(struct expr *e);

static void skip(struct expr *e)
{
    while (*e->p == ' ')
        e->p++;
}

/* sympy's srepr, which torch.export 2.x writes: Symbol('s0', positive=True,
 * integer=True), Integer(3), Add(a, b, ...), Mul(...), FloorDiv(a, b),
 * Mod(a, b), Max(...), Min(...). */
static int64_t e_call(struct expr *e, const char *f, size_t flen)
{
    int64_t acc = 0, x;
    int n = 0;
    e->p++; /* ( */
    if (flen == 6 && !strncmp(f, "Symbol", 6)) {
        skip(e);
        char q = *e->p;
        const char *s = ++e->p;
        while (*e->p && *e->p != q)
            e->p++;
        size_t len = (size_t)(e->p - s);
        if (!*e->p || (q != '\'' && q != '"'))
            e->err = 1;
        else
            e->p++;
        while (*e->p && *e->p != ')') /* positive=True, integer=True */
            e->p++;
        if (*e->p)
            e->p++;
        for (int i = 0; !e->err && i < e->g->nsymbols; i++)
            if (strlen(e->g->symbols[i].name) == len && !strncmp(e->g->symbols[i].name, s, len))
                return e->vals[i];
        e->err = 1;
        return 0;
    }
    for (;;) {
        x = e_sum(e);
        if (e->err)
            return 0;
        if (n == 0)
            acc = x;
        else if (flen == 3 && !strncmp(f, "Add", 3))
            e->err |= __builtin_add_overflow(acc, x, &acc);
        else if (flen == 3 && !strncmp(f, "Mul", 3))
            e->err |= __builtin_mul_overflow(acc, x, &acc);
        else if (flen == 8 && !strncmp(f, "FloorDiv", 8) && x)
            acc = acc / x - ((acc % x != 0) && ((acc < 0) != (x < 0)));
        else if (flen == 3 && !strncmp(f, "Mod", 3) && x)
            acc = ((acc % x) + x) % x;
        else if (flen == 3 && !strncmp(f, "Max", 3))
            acc = x > acc ? x : acc;
        else if (flen == 3 && !strncmp(f, "Min", 3))
            acc = x < acc ? x : acc;
        else if (!(flen == 7 && !strncmp(f, "Integer", 7)))
            e->err = 1;
        n++;
        skip(e);
        if (*e->p == ',') {
            e->p++;
            continue;
        }
        if (*e->p == ')') {
            e->p++;
            return acc;
        }
        e->err = 1;
        return 0;
    }
}

static int64_t e_atom(struct expr *e)
{
    skip(e);
    if (*e->p == '(') {
        e->p++;
        int64_t v = e_sum(e);
        skip(e);
        if (*e->p++ != ')')
            e->err = 1;
        return v;
    }
    if (*e->p == '-') {
        e->p++;
        return -e_atom(e);
    }
    if (isdigit((unsigned char)*e->p)) {
        int64_t v = 0;
        while (isdigit((unsigned char)*e->p)) {
            if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *e->p - '0', &v))
                e->err = 1;
            e->p++;
        }
        return v;
    }
    const char *s = e->p;
    while (isalnum((unsigned char)*e->p) || *e->p == '_')
        e->p++;
    size_t len = (size_t)(e->p - s);
    if (len && *e->p == '(')
        return e_call(e, s, len);
    for (int i = 0; len && i < e->g->nsymbols; i++)
        if (strlen(e->g->symbols[i].name) == len && !strncmp(e->g->symbols[i].name, s, len))
            return e->vals[i];
    e->err = 1;
    return 0;
}

static int64_t e_prod(struct expr *e)
{
    int64_t v = e_atom(e);
    for (;;) {
        skip(e);
        int64_t r;
        if (e->p[0] == '*') {
            e->p++;
            if (__builtin_mul_overflow(v, e_atom(e), &v))
                e->err = 1;
        } else if (e->p[0] == '/' && e->p[1] == '/') {
            e->p += 2;
            r = e_atom(e);
            if (r == 0)
                e->err = 1;
            else
                v = v / r - ((v % r != 0) && ((v < 0) != (r < 0))); /* floor division */
        } else if (e->p[0] == '%') {
            e->p++;
            r = e_atom(e);
            if (r == 0)
                e->err = 1;
            else
                v = ((v % r) + r) % r;
        } else {
            return v;
        }
    }
}

static int64_t e_sum(struct expr *e)
{
    int64_t v = e_prod(e);
    for (;;) {
        skip(e);
        if (*e->p == '+') {
            e->p++;
            if (__builtin_add_overflow(v, e_prod(e), &v))
                e->err = 1;
        } else if (*e->p == '-') {
            e->p++;
            if (__builtin_sub_overflow(v, e_prod(e), &v))
                e->err = 1;
        } else {
            return v;
        }
    }
}

int tn__graph_bare_symbol(const char *expr, char *buf, size_t len)
{
    const char *s = expr, *end;
    if (!strncmp(s, "Symbol(", 7)) { /* Symbol('s0', positive=True, ...) */
        char q = s[7];
        if (q != '\'' && q != '"')
            return -1;
        s += 8;
        if (!(end = strchr(s, q)))
            return -1;
    } else {
        for (end = s; isalnum((unsigned char)*end) || *end == '_'; end++)
            ;
        if (*end || end == s || isdigit((unsigned char)*s))
            return -1;
    }
    if (end == s || (size_t)(end - s) >= len)
        return -1;
    snprintf(buf, len, "%.*s", (int)(end - s), s);
    return 0;
}

int tn__graph_eval(const struct tn_graph *g, const char *expr, const int64_t *vals, int64_t *out)
{
    struct expr e = {expr, g, vals, 0};
    *out = e_sum(&e);
    skip(&e);
    return e.err || *e.p ? -1 : 0;
}

/* Adds a symbol for every size that is a bare name range_constraints
 * leaves out (a Graph without its ExportedProgram). */
static int add_free_symbols(struct tn_graph *g)
{
    for (int i = 0; i < g->nvalues; i++)
        for (int d = 0; d < g->values[i].ndim; d++) {
            char x[72];
            if (!g->values[i].exprs[d] ||
                tn__graph_bare_symbol(g->values[i].exprs[d], x, sizeof x) < 0)
                continue;
            bool known = false;
            for (int s = 0; s < g->nsymbols; s++)
                known |= !strcmp(g->symbols[s].name, x);
            if (known)
                continue;
            if (g->nsymbols >= 4096)
                return tn_set_error(TN_EFORMAT, "%s: more than 4096 symbols", g->label);
            void *p = realloc(g->symbols, (size_t)(g->nsymbols + 1) * sizeof *g->symbols);
            if (!p)
                return TN_ENOMEM;
            g->symbols = p;
            struct tn_graph_symbol *s = &g->symbols[g->nsymbols];
            if (!(s->name = strdup(x)))
                return TN_ENOMEM;
            s->min = 0;
            s->max = INT64_MAX;
            s->hint = g->values[i].sizes[d] > 0 ? g->values[i].sizes[d] : 0;
            g->nsymbols++;
        }
    return TN_OK;
}

/* ------------------------------------------------- targets, arguments */

/* Whether a graph argument of kind k fits the schema argument as. */
static bool fits(const struct tn_graph_arg *a, const struct tn_arg_schema *as)
{
    switch (a->kind) {
    case TN_GARG_NONE:
        return as->optional || (as->def && !strcmp(as->def, "None"));
    case TN_GARG_TENSOR: return as->tag == TN_IV_TENSOR;
    case TN_GARG_TENSORS: /* None entries only where the schema says Tensor?[] (index) */
        if (as->tag == TN_IV_OPTTENSORLIST)
            return true;
        for (int k = 0; k < a->n; k++)
            if (a->items[k].value < 0)
                return false;
        return as->tag == TN_IV_TENSORLIST;
    case TN_GARG_INT:
        return as->tag == TN_IV_INT || as->tag == TN_IV_SCALAR || as->tag == TN_IV_DOUBLE ||
               as->tag == TN_IV_INTLIST;
    case TN_GARG_FLOAT: return as->tag == TN_IV_DOUBLE || as->tag == TN_IV_SCALAR;
    case TN_GARG_BOOL: return as->tag == TN_IV_BOOL || as->tag == TN_IV_SCALAR;
    case TN_GARG_STRING: return as->tag == TN_IV_STR;
    case TN_GARG_DTYPE: return as->tag == TN_IV_DTYPE;
    case TN_GARG_INTS: return as->tag == TN_IV_INTLIST;
    case TN_GARG_FLOATS: return as->tag == TN_IV_DOUBLELIST;
    case TN_GARG_LAYOUT: return strstr(as->type, "Layout") != NULL;
    case TN_GARG_MEMORY_FORMAT: return strstr(as->type, "MemoryFormat") != NULL;
    case TN_GARG_DEVICE: return strstr(as->type, "Device") != NULL;
    default: return false; /* lists of bools: no boxed tag yet */
    }
}

static const char *kind_name(enum tn_garg_kind k)
{
    static const char *const names[] = {
        "None", "a tensor", "a list of tensors", "an int", "a list of ints", "a float",
        "a list of floats", "a bool", "a list of bools", "a string", "a dtype", "a device",
        "a layout", "a memory format"};
    return names[k];
}

/* mul.Tensor(x, 0.5): torch.export writes a Python number for a Tensor
 * argument, which PyTorch wraps in a tensor; the op's .Scalar overload
 * takes it as it is (.Scalar_mode for div.Tensor_mode, .Scalar for an op
 * with no overload name: floor_divide). Returns that overload, or op. */
static const struct tn_op *scalar_overload(struct checker *c, const struct tn_graph_node *n,
                                           const struct tn_op *op)
{
    bool number = false;
    for (int i = 0; i < n->nin; i++) {
        int k = tn_op_arg_index(op, n->in[i].name);
        enum tn_garg_kind kd = n->in[i].arg.kind;
        if (k > 0 && op->args[k].tag == TN_IV_TENSOR &&
            (kd == TN_GARG_INT || kd == TN_GARG_FLOAT || kd == TN_GARG_BOOL))
            number = true;
    }
    bool mode = !strcmp(op->overload, "Tensor_mode");
    if (!number || (strcmp(op->overload, "Tensor") && op->overload[0] && !mode))
        return op;
    for (int k = 0; k < 4; k++)
        if (c->scalars[k].op == op)
            return c->scalars[k].scalar ? c->scalars[k].scalar : op;
    char q[256];
    snprintf(q, sizeof q, "%s::%s.Scalar%s", op->ns, op->name, mode ? "_mode" : "");
    const struct tn_op *s = tn_op_find(q);
    tn_clear_error();
    c->scalars[c->next_scalar % 4].op = op;
    c->scalars[c->next_scalar++ % 4].scalar = s;
    return s ? s : op;
}

static void check_args(struct checker *c, struct tn_graph_node *n)
{
    const struct tn_op *op = n->op = scalar_overload(c, n, n->op);
    bool seen[256] = {false};
    for (int i = 0; i < n->nin; i++) {
        const struct tn_graph_input *in = &n->in[i];
        int k = tn_op_arg_index(op, in->name);
        if (k < 0) {
            problem(c, n->name, "%s has no argument named '%s'", op->qualname, in->name);
            continue;
        }
        if (k < 256 && seen[k])
            problem(c, n->name, "argument '%s' is given twice", in->name);
        if (k < 256)
            seen[k] = true;
        if (op->args[k].mutable_)
            problem(c, n->name, "%s mutates its argument '%s' (the graph must be functional)",
                    op->qualname, in->name);
        if (!fits(&in->arg, &op->args[k]))
            problem(c, n->name, "argument '%s' of %s must be %s, not %s", in->name, op->qualname,
                    op->args[k].type, kind_name(in->arg.kind));
    }
    for (int k = 0; k < op->nargs && k < 256; k++)
        if (!seen[k] && !op->args[k].optional && !op->args[k].def)
            problem(c, n->name, "%s needs argument '%s'", op->qualname, op->args[k].name);
    /* a Tensor[] result (split.Tensor: "-> Tensor(a)[]") fills any number */
    size_t sl = op->schema ? strlen(op->schema) : 0;
    bool list = sl > 2 && !strcmp(op->schema + sl - 2, "[]");
    if (n->nout > op->nrets && !list)
        problem(c, n->name, "%s returns %d value%s, the node names %d outputs", op->qualname,
                op->nrets, op->nrets == 1 ? "" : "s", n->nout);
}

/* ------------------------------------------------- uses and definitions */

/* Whether node `from` depends on node `to` through the values it reads;
 * an iterative search with `mark` (nnodes bytes) for visited nodes. */
static bool reaches(const struct tn_graph *g, int from, int to, unsigned char *mark, int *stack)
{
    int sp = 0;
    memset(mark, 0, (size_t)g->nnodes);
    stack[sp++] = from;
    mark[from] = 1;
    while (sp) {
        const struct tn_graph_node *n = &g->nodes[stack[--sp]];
        for (int i = 0; i < n->nin; i++)
            for (int k = 0; k < n->in[i].arg.n; k++) {
                int v = n->in[i].arg.items[k].value;
                int d = v >= 0 ? g->values[v].def : -1;
                if (d == to)
                    return true;
                if (d >= 0 && !mark[d]) {
                    mark[d] = 1;
                    stack[sp++] = d;
                }
            }
    }
    return false;
}

static void check_uses(struct checker *c, unsigned char *mark, int *stack)
{
    struct tn_graph *g = c->g;
    for (int ni = 0; ni < g->nnodes; ni++) {
        struct tn_graph_node *n = &g->nodes[ni];
        for (int i = 0; i < n->nin; i++)
            for (int k = 0; k < n->in[i].arg.n; k++) {
                int v = n->in[i].arg.items[k].value;
                if (v < 0)
                    continue;
                struct tn_graph_value *val = &g->values[v];
                val->last_use = ni;
                if (val->def == TN_GRAPH_UNDEFINED)
                    problem(c, n->name, "argument '%s' uses '%s', which no node defines",
                            n->in[i].name, val->name);
                else if (val->def == ni)
                    problem(c, n->name, "a cycle: the node reads its own output '%s'",
                            val->name);
                else if (val->def > ni && reaches(g, val->def, ni, mark, stack))
                    problem(c, n->name, "a cycle: it reads '%s' from node '%s', which depends "
                            "on this node", val->name, g->nodes[val->def].name);
                else if (val->def > ni)
                    problem(c, n->name, "argument '%s' uses '%s' before its definition "
                            "(node '%s' comes later)", n->in[i].name, val->name,
                            g->nodes[val->def].name);
            }
    }
    for (int i = 0; i < g->noutputs; i++) {
        struct tn_graph_value *v = &g->values[g->outputs[i].value];
        v->last_use = g->nnodes;
        if (v->def == TN_GRAPH_UNDEFINED)
            problem(c, "", "output '%s' is never defined", v->name);
    }
    for (int i = 0; i < g->ninputs; i++)
        if (!g->values[g->inputs[i].value].has_meta)
            problem(c, "", "input '%s' has no entry in tensor_values",
                    g->values[g->inputs[i].value].name);
}

/* ------------------------------------------------- the Meta pass */

static void describe_decl(const struct tn_graph_value *v, char *buf, size_t len)
{
    int k = snprintf(buf, len, "%s[", v->dtype >= 0 ? tn_dtype_name(v->dtype) : "?");
    for (int d = 0; d < v->ndim && k > 0 && (size_t)k < len; d++) {
        if (v->exprs[d])
            k += snprintf(buf + k, len - (size_t)k, d ? ", %s" : "%s", v->exprs[d]);
        else
            k += snprintf(buf + k, len - (size_t)k, d ? ", %" PRId64 : "%" PRId64, v->sizes[d]);
    }
    if (k > 0 && (size_t)k < len)
        snprintf(buf + k, len - (size_t)k, "]");
}

/* The declared sizes of v at the symbols' values; -1 when an expression
 * does not evaluate. */
static int declared_sizes(const struct tn_graph *g, const struct tn_graph_value *v,
                          const int64_t *vals, int64_t *sizes)
{
    for (int d = 0; d < v->ndim; d++) {
        sizes[d] = v->sizes[d];
        if (v->exprs[d] && tn__graph_eval(g, v->exprs[d], vals, &sizes[d]) < 0)
            return -1;
    }
    return 0;
}

/* Compares what node n computed for value vi with tensor_values. */
static void compare(struct checker *c, const struct tn_graph_node *n, int vi,
                    const struct tn_tensor *t, const int64_t *vals, bool first)
{
    struct tn_graph_value *v = &c->g->values[vi];
    int64_t want[TN_MAX_DIMS];
    char got[256], decl[512];
    if (!v->has_meta) {
        if (first) { /* fill in what tensor_values left out */
            v->dtype = t->dtype;
            v->ndim = t->ndim;
            memcpy(v->sizes, t->sizes, sizeof v->sizes);
        }
        return;
    }
    /* the descriptions only for a problem (formatting them for every
     * output showed in perf on large graphs) */
    if (declared_sizes(c->g, v, vals, want) < 0) {
        describe_decl(v, decl, sizeof decl);
        problem(c, n->name, "output '%s': a size expression we cannot evaluate in %s", v->name,
                decl);
        return;
    }
    bool same = v->dtype == t->dtype && v->ndim == t->ndim;
    for (int d = 0; same && d < v->ndim; d++)
        same = want[d] == t->sizes[d];
    if (!same) {
        tn__graph_describe(t, got, sizeof got);
        describe_decl(v, decl, sizeof decl);
        problem(c, n->name, "output '%s': %s computes %s, but tensor_values declares %s%s",
                v->name, n->op->qualname, got, decl, first ? "" : " (at a second size)");
    }
}

/* Whether output t of node n is one whose sizes torch.export decides
 * otherwise than the kernel, and are taken as declared: embedding_bag's
 * offset2bag, bag_size and max_indices, whose sizes PyTorch's meta
 * functions give by whether the weight requires grad (_embedding_bag or
 * _embedding_bag_forward_only), which a graph does not record (the
 * kernel's sizes follow the weight it is given), and by a fast path
 * that is not the CPU kernel's (bfloat16). Nothing but the shape check
 * reads them; the values' dtype and rank must still agree. */
static bool aux_by_export(const struct tn_graph_node *n, const struct tn_graph_value *v,
                          const struct tn_tensor *t)
{
    const char *q = n->op->qualname;
    if (strcmp(q, "aten::embedding_bag") && strcmp(q, "aten::embedding_bag.padding_idx") &&
        strcmp(q, "aten::_embedding_bag"))
        return false;
    return v->has_meta && v->dtype == t->dtype && v->ndim == t->ndim;
}

/* Symbol values for pass `second`: the hints, then one more (or less). */
static void assign(const struct tn_graph *g, bool second, int64_t *vals)
{
    for (int i = 0; i < g->nsymbols; i++) {
        const struct tn_graph_symbol *s = &g->symbols[i];
        int64_t x = s->hint >= s->min && s->hint <= s->max && s->hint > 0 ? s->hint
                    : s->min > 2 ? s->min : (s->max >= 2 ? 2 : s->max);
        if (second)
            x = x < s->max ? x + 1 : (x > s->min ? x - 1 : x);
        vals[i] = x;
    }
}

/* Meta tensors for n's outputs from tensor_values, for an op that has no
 * Meta kernel. Returns 0, or -1 when an output is not declared. */
static int declared_outputs(struct checker *c, const struct tn_graph_node *n,
                            struct tn__graph_slot *slots, const int64_t *vals)
{
    const struct tn_device meta = {TN_DEVICE_META, -1};
    for (int k = 0; k < n->nout; k++) {
        int vi = n->outs[k];
        if (vi < 0)
            continue;
        const struct tn_graph_value *v = &c->g->values[vi];
        int64_t sz[TN_MAX_DIMS];
        if (v->is_sym || !v->has_meta || declared_sizes(c->g, v, vals, sz) < 0)
            return -1;
        tn_release(slots[vi].t);
        if (!(slots[vi].t = tn_empty_on(sz, v->ndim, v->dtype, meta)))
            return -1;
    }
    tn_clear_error();
    return 0;
}

static int meta_pass(struct checker *c, bool second)
{
    struct tn_graph *g = c->g;
    struct tn__graph_slot *slots = calloc((size_t)g->nvalues + 1, sizeof *slots);
    int64_t *vals = calloc((size_t)g->nsymbols + 1, sizeof *vals);
    struct tn__graph_scratch s = {0};
    int rc = TN_OK;
    const struct tn_device meta = {TN_DEVICE_META, -1};
    if (!slots || !vals) {
        rc = tn_set_error(TN_ENOMEM, "%s: out of memory", g->label);
        goto out;
    }
    assign(g, second, vals);
    for (int i = 0; i < g->ninputs; i++) {
        struct tn_graph_value *v = &g->values[g->inputs[i].value];
        int64_t sz[TN_MAX_DIMS];
        if (declared_sizes(g, v, vals, sz) < 0) {
            problem(c, "", "input '%s': a size expression we cannot evaluate", v->name);
            goto out;
        }
        slots[g->inputs[i].value].t = tn_empty_on(sz, v->ndim, v->dtype, meta);
        if (!slots[g->inputs[i].value].t) {
            problem(c, "", "input '%s': %s", v->name, tn_last_error());
            goto out;
        }
    }
    tn_keyset old = tn_dispatch_set_excluded(tn_dispatch_excluded() | TN_KEYSET(TN_KEY_AUTOGRAD));
    tn__graph_meta_factories = tn__graph_meta_devices = true;
    for (int ni = 0; ni < g->nnodes; ni++) {
        const struct tn_graph_node *n = &g->nodes[ni];
        if (tn__graph_call(g, n, slots, &s) < 0) {
            /* an op without a Meta kernel: tensor_values stands for it */
            if (tn_last_status() == TN_EDEVICE && declared_outputs(c, n, slots, vals) == 0)
                continue;
            if (tn_last_status() == TN_ENOMEM) {
                rc = TN_ENOMEM;
                break;
            }
            /* the message names the graph and the node, as the problem does */
            const char *msg = tn_last_error();
            const char *p = strstr(msg, "': ");
            problem(c, n->name, "%s", p ? p + 3 : msg);
            break; /* later shapes would only repeat the error */
        }
        for (int k = 0; k < n->nout; k++) {
            int v = n->outs[k];
            if (v >= 0 && slots[v].t && k > 0 && aux_by_export(n, &g->values[v], slots[v].t))
                continue;
            if (v >= 0 && slots[v].t)
                compare(c, n, v, slots[v].t, vals, !second);
        }
    }
    tn__graph_meta_factories = tn__graph_meta_devices = false;
    tn_dispatch_set_excluded(old);
out:
    for (int i = 0; i < g->nvalues && slots; i++)
        tn_release(slots[i].t);
    free(slots);
    free(vals);
    free(s.ints);
    return rc;
}

int tn_graph_check(struct tn_graph *g, tn_graph_problem_fn fn, void *ctx)
{
    struct checker c = {g, fn, ctx, 0, {{0}}, 0};
    int rc = tn__graph_functionalize(g, fn, ctx);
    if (rc != 0) /* an error, or nodes it cannot rewrite */
        return rc;
    unsigned char *mark = malloc((size_t)g->nnodes + 1);
    int *stack = malloc(((size_t)g->nnodes + 1) * sizeof *stack);
    if (!mark || !stack) {
        free(mark);
        free(stack);
        return tn_set_error(TN_ENOMEM, "%s: out of memory", g->label);
    }
    /* the last few targets' ops: a graph repeats a handful of targets, and
     * each lookup formats and hashes a name (a tenth of a large graph's
     * check) */
    struct { const char *target; const struct tn_op *op; } seen[8] = {{0}};
    unsigned next = 0;
    for (int i = 0; i < g->nnodes; i++) {
        struct tn_graph_node *n = &g->nodes[i];
        n->op = NULL;
        for (int k = 0; k < 8 && seen[k].target && !n->op; k++)
            if (!strcmp(seen[k].target, n->target))
                n->op = seen[k].op;
        if (!n->op && (n->op = tn_graph_op(n->target))) {
            seen[next % 8].target = n->target;
            seen[next++ % 8].op = n->op;
        }
        if (!n->op) {
            problem(&c, n->name, "%s", tn_last_error());
            continue;
        }
        check_args(&c, n);
    }
    check_uses(&c, mark, stack);
    free(mark);
    free(stack);
    if ((rc = add_free_symbols(g)) < 0)
        return rc;
    if (c.problems)
        return c.problems;
    if ((rc = meta_pass(&c, false)) < 0)
        return rc;
    if (!c.problems && g->nsymbols && (rc = meta_pass(&c, true)) < 0)
        return rc;
    return c.problems;
}
