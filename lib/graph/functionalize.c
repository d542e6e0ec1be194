/*
 * graph/functionalize.c: the training IR that torch.export writes by
 * default holds in-place ops (relu_, add_.Tensor, fill_.Scalar, ...) and
 * out= overloads; tn__graph_functionalize rewrites such a graph to its
 * functional form, as ExportedProgram.run_decompositions does:
 *
 * - `y = relu_(x)` becomes `y = relu(x)` (copy_(x, src): _to_copy of src
 *   to x's dtype, expanded to its sizes), and every later read of x (or of
 *   y) reads y: each alias root (a value no view op made) has a current
 *   value, replaced at each mutation;
 * - views (view, slice, select, permute, ...) are tracked as aliases of
 *   their base: a view read after its base changed is made again from the
 *   base's current value, and a mutation through a view writes the new
 *   view back into its base (cat around a slice or select, the inverse
 *   permutation, a reshape to the base's sizes, the cat of the pieces of a
 *   split, chunk or unbind, view_as_complex for view_as_real and back, a
 *   select_scatter into the pairs for real and imag);
 * - a mutated graph input (buffer, user input, parameter) becomes an
 *   output named INPUT_mutated, with a BUFFER_MUTATION,
 *   USER_INPUT_MUTATION or PARAMETER_MUTATION spec, before the user
 *   outputs (as run_decompositions orders them), so a caller can write it
 *   back;
 * - batch_norm in training mode with running statistics (which PyTorch
 *   updates in place although its schema does not say so) gets the updated
 *   statistics as values of the graph: mean and unbiased variance over the
 *   batch, blended by the momentum.
 *
 * A graph without any of these is left as it is.
 */
#include "graph/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX "torch.ops."

struct fz {
    struct tn_graph *g;
    tn_graph_problem_fn fn;
    void *ctx;
    int problems;
    /* per value (cap long) */
    int cap;
    int *canon;      /* the value it is the same tensor as (an in-place op's result), or itself */
    int *root;       /* its alias root; -1 for a SymInt */
    int *parent;     /* the value it is a view of; -1 for a root */
    int *vnode;      /* the node (of the new list) that made it from parent */
    int *vout;       /* its position among that node's outputs */
    int *cur;        /* the value standing for it now */
    int *cver;       /* the root's version cur was made at (views) */
    int *ver;        /* mutations of it (roots) */
    /* the nodes being written */
    struct tn_graph_node *old;
    int nold;
    struct tn_graph_node *nodes;
    int nnodes, ncap;
};

static void problem(struct fz *z, const char *node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void problem(struct fz *z, const char *node, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    z->problems++;
    if (z->fn)
        z->fn(node, msg, z->ctx);
}

/* ------------------------------------------------- names of targets */

struct target {
    char ns[64], name[128], overload[64];
};

static int split_target(const char *t, struct target *s)
{
    if (strncmp(t, PREFIX, sizeof PREFIX - 1))
        return -1;
    t += sizeof PREFIX - 1;
    const char *dot = strchr(t, '.'), *last = strrchr(t, '.');
    if (!dot || dot == last || dot == t || (size_t)(dot - t) >= sizeof s->ns ||
        (size_t)(last - dot - 1) >= sizeof s->name || strlen(last + 1) >= sizeof s->overload)
        return -1;
    snprintf(s->ns, sizeof s->ns, "%.*s", (int)(dot - t), t);
    snprintf(s->name, sizeof s->name, "%.*s", (int)(last - dot - 1), dot + 1);
    snprintf(s->overload, sizeof s->overload, "%s", last + 1);
    return 0;
}

enum mkind { FUNCTIONAL, INPLACE, OUTVAR };

/* Whether target is an in-place op (name_, __iname__) or an out= overload;
 * for an in-place op, func receives the functional target (the name
 * without its underscore, the same overload). */
static enum mkind classify(const char *target, char *func, size_t len)
{
    struct target s;
    if (split_target(target, &s) < 0)
        return FUNCTIONAL;
    size_t n = strlen(s.name);
    if (!strcmp(s.overload, "out") || (strlen(s.overload) > 4 &&
                                        !strcmp(s.overload + strlen(s.overload) - 4, "_out")))
        return OUTVAR;
    if (n > 5 && !strncmp(s.name, "__i", 3) && !strcmp(s.name + n - 2, "__")) {
        snprintf(func, len, PREFIX "%s.__%s.%s", s.ns, s.name + 3, s.overload);
        return INPLACE;
    }
    if (n > 1 && s.name[n - 1] == '_' && s.name[n - 2] != '_' && s.name[0] != '_') {
        /* normal_'s functional form is normal_functional (normal is the
         * overloads that take mean and std as tensors) */
        bool fn = !strcmp(s.name, "normal_") && !strcmp(s.overload, "default");
        snprintf(func, len, PREFIX "%s.%.*s%s.%s", s.ns, (int)n - 1, s.name,
                 fn ? "_functional" : "", s.overload);
        return INPLACE;
    }
    if (n > 2 && s.name[n - 1] == '_' && s.name[n - 2] != '_' && s.name[0] == '_' &&
        s.name[1] != '_') { /* _foo_: in-place too */
        snprintf(func, len, PREFIX "%s.%.*s.%s", s.ns, (int)n - 1, s.name, s.overload);
        return INPLACE;
    }
    return FUNCTIONAL;
}

/* The functional overload of an out= op: "add.out" -> add.Tensor (the
 * overload whose arguments are the out= op's less its mutable ones),
 * "add.Scalar_out" -> add.Scalar. NULL when there is none. */
static const struct tn_op *out_functional(const char *target, const struct tn_op *outop,
                                          char *func, size_t len)
{
    static const char *const tries[] = {"default", "Tensor", "Scalar", "self", "dim",
                                        "int", "dim_IntList", "input", "correction"};
    struct target s;
    if (split_target(target, &s) < 0)
        return NULL;
    size_t ol = strlen(s.overload);
    if (ol > 4 && strcmp(s.overload, "out")) {
        snprintf(func, len, PREFIX "%s.%s.%.*s", s.ns, s.name, (int)ol - 4, s.overload);
        const struct tn_op *op = tn_graph_op(func);
        tn_clear_error();
        return op;
    }
    for (size_t t = 0; t < sizeof tries / sizeof *tries; t++) {
        snprintf(func, len, PREFIX "%s.%s.%s", s.ns, s.name, tries[t]);
        const struct tn_op *op = tn_graph_op(func);
        tn_clear_error();
        if (!op)
            continue;
        if (!outop)
            return op;
        /* its arguments are the out= op's immutable ones */
        int want = 0;
        bool same = true;
        for (int k = 0; k < outop->nargs; k++)
            if (!outop->args[k].mutable_) {
                want++;
                same &= tn_op_arg_index(op, outop->args[k].name) >= 0;
            }
        if (same && want == op->nargs)
            return op;
    }
    return NULL;
}

const struct tn_op *tn_graph_functional_op(const char *target)
{
    char func[512];
    const struct tn_op *op = NULL;
    switch (classify(target, func, sizeof func)) {
    case FUNCTIONAL:
        return tn_graph_op(target);
    case INPLACE:
        if (!strcmp(target, PREFIX "aten.detach_.default"))
            return tn_graph_op(PREFIX "aten.alias.default");
        if (!strcmp(target, PREFIX "aten.copy_.default") && !tn_graph_op(func)) {
            tn_clear_error(); /* copy_rewrite: _to_copy and expand */
            return tn_graph_op(PREFIX "aten._to_copy.default");
        }
        if ((op = tn_graph_op(func)))
            return op;
        tn_set_error(TN_EINVAL, "unknown target '%s' (an in-place op, and tensorkit has no "
                     "functional %s)", target, func);
        return NULL;
    case OUTVAR: {
        const struct tn_op *outop = tn_graph_op(target);
        tn_clear_error();
        if ((op = out_functional(target, outop, func, sizeof func)))
            return op;
        tn_set_error(TN_EINVAL, "unknown target '%s' (an out= overload, and tensorkit has no "
                     "functional form of it)", target);
        return NULL;
    }
    }
    return NULL;
}

/* ------------------------------------------------- values and nodes */

static int grow_values(struct fz *z)
{
    if (z->g->nvalues < z->cap)
        return TN_OK;
    int cap = z->cap * 2 + 16;
    if (cap <= z->g->nvalues)
        cap = z->g->nvalues * 2 + 16;
    int **arrs[] = {&z->canon, &z->root, &z->parent, &z->vnode, &z->vout, &z->cur, &z->cver,
                    &z->ver};
    for (size_t i = 0; i < sizeof arrs / sizeof *arrs; i++) {
        int *p = realloc(*arrs[i], (size_t)cap * sizeof **arrs[i]);
        if (!p)
            return tn_set_error(TN_ENOMEM, "%s: out of memory", z->g->label);
        *arrs[i] = p;
    }
    z->cap = cap;
    return TN_OK;
}

/* Sets up value v (an original value, or a new one) as its own root. */
static void init_value(struct fz *z, int v)
{
    z->canon[v] = v;
    z->root[v] = z->g->values[v].is_sym ? -1 : v;
    z->parent[v] = -1;
    z->vnode[v] = -1;
    z->vout[v] = 0;
    z->cur[v] = v;
    z->cver[v] = 0;
    z->ver[v] = 0;
}

/* Value `to` (new) is declared as value `from` is (tensor_values): for
 * ops without a Meta kernel (cat), which tn_graph_check takes on trust. */
static int copy_meta(struct fz *z, int to, int from)
{
    struct tn_graph_value *t = &z->g->values[to];
    const struct tn_graph_value *f = &z->g->values[from];
    if (!f->has_meta || t->has_meta)
        return TN_OK;
    t->has_meta = true;
    t->dtype = f->dtype;
    t->ndim = f->ndim;
    memcpy(t->sizes, f->sizes, sizeof t->sizes);
    for (int d = 0; d < f->ndim; d++)
        if (f->exprs[d] && !(t->exprs[d] = strdup(f->exprs[d])))
            return TN_ENOMEM;
    return TN_OK;
}

/* A new value named BASE_N (the first N free). Returns its index. */
static int new_value(struct fz *z, const char *base, bool sym)
{
    char name[300];
    for (int k = 1;; k++) {
        snprintf(name, sizeof name, "%.200s_%d", base, k);
        if (tn_graph_find_value(z->g, name) < 0)
            break;
    }
    int v = tn__graph_intern(z->g, name);
    if (v < 0 || grow_values(z) < 0)
        return v < 0 ? v : TN_ENOMEM;
    z->g->values[v].is_sym = sym;
    init_value(z, v);
    return v;
}

static struct tn_graph_node *push_node(struct fz *z)
{
    if (z->nnodes == z->ncap) {
        int cap = z->ncap * 2 + 16;
        void *p = realloc(z->nodes, ((size_t)cap + 1) * sizeof *z->nodes);
        if (!p)
            return NULL;
        z->nodes = p;
        z->ncap = cap;
    }
    struct tn_graph_node *n = &z->nodes[z->nnodes++];
    memset(n, 0, sizeof *n);
    return n;
}

static int copy_arg(struct tn_graph_arg *to, const struct tn_graph_arg *from)
{
    *to = *from;
    to->items = malloc((size_t)(from->n ? from->n : 1) * sizeof *to->items);
    to->s = from->s ? strdup(from->s) : NULL;
    if (!to->items || (from->s && !to->s))
        return TN_ENOMEM;
    memcpy(to->items, from->items, (size_t)(from->n ? from->n : 1) * sizeof *to->items);
    return TN_OK;
}

/* A new node: target, nin inputs to fill, one output value `out`. */
static struct tn_graph_node *make_node(struct fz *z, const char *target, int nin, int out)
{
    struct tn_graph_node *n = push_node(z);
    if (!n)
        return NULL;
    n->target = strdup(target);
    n->name = strdup(z->g->values[out].name);
    n->in = calloc((size_t)nin + 1, sizeof *n->in);
    n->outs = malloc(sizeof *n->outs);
    if (!n->target || !n->name || !n->in || !n->outs)
        return NULL;
    n->nout = 1;
    n->outs[0] = out;
    return n;
}

/* Adds input `name` to n: a tensor (value >= 0), an int, or a list of
 * tensors / ints (vals, count). */
static int add_in(struct tn_graph_node *n, const char *name, enum tn_garg_kind kind,
                  const int64_t *ints, const int *values, int count)
{
    struct tn_graph_input *in = &n->in[n->nin++];
    in->kind = 1;
    in->arg.kind = kind;
    in->arg.n = count;
    in->name = strdup(name);
    in->arg.items = calloc((size_t)(count ? count : 1), sizeof *in->arg.items);
    if (!in->name || !in->arg.items)
        return TN_ENOMEM;
    for (int k = 0; k < count; k++) {
        in->arg.items[k].i = ints ? ints[k] : 0;
        in->arg.items[k].value = values ? values[k] : -1;
    }
    return TN_OK;
}

static int add_tensor(struct tn_graph_node *n, const char *name, int v)
{
    return add_in(n, name, TN_GARG_TENSOR, NULL, &v, 1);
}

static int add_int(struct tn_graph_node *n, const char *name, int64_t i)
{
    return add_in(n, name, TN_GARG_INT, &i, NULL, 1);
}

static int add_float(struct tn_graph_node *n, const char *name, double f)
{
    int rc = add_in(n, name, TN_GARG_FLOAT, NULL, NULL, 1);
    n->in[n->nin - 1].arg.items[0].f = f;
    return rc;
}

/* ------------------------------------------------- reading values */

static const struct tn_graph_input *find_in(const struct tn_graph_node *n, const char *name,
                                            int pos)
{
    for (int i = 0; i < n->nin; i++)
        if (!strcmp(n->in[i].name, name))
            return &n->in[i];
    return pos >= 0 && pos < n->nin ? &n->in[pos] : NULL;
}

/* A view whose base is now a value of the rewrite: that value may have
 * other strides than the tensor PyTorch viewed (a base written back
 * through a transpose is permuted), so view becomes reshape, the same
 * values in a functional graph. */
static int view_to_reshape(struct tn_graph_node *n)
{
    if (strcmp(n->target, PREFIX "aten.view.default") &&
        strcmp(n->target, PREFIX "aten._unsafe_view.default"))
        return TN_OK;
    char *t = strdup(PREFIX "aten.reshape.default");
    if (!t)
        return TN_ENOMEM;
    free(n->target);
    n->target = t;
    n->op = NULL;
    for (int i = 0; i < n->nin; i++)
        if (!strcmp(n->in[i].name, "size")) {
            char *nm = strdup("shape");
            if (!nm)
                return TN_ENOMEM;
            free(n->in[i].name);
            n->in[i].name = nm;
        }
    return TN_OK;
}

static int read_value(struct fz *z, int v);

/* Makes view value v again from its parent's current value: a copy of the
 * view node with new outputs. Returns the new value. */
/* A copy of view node `ni` (of the new list) over base p, with new
 * outputs (into all when not NULL). Returns its output k. */
static int remake(struct fz *z, int ni, int p, int k_want, int *all)
{
    struct tn_graph_node *n = push_node(z);
    if (!n)
        return TN_ENOMEM;
    const struct tn_graph_node *o = &z->nodes[ni]; /* after the push moved them */
    n->target = strdup(o->target);
    n->in = calloc((size_t)o->nin + 1, sizeof *n->in);
    n->outs = calloc((size_t)o->nout + 1, sizeof *n->outs);
    if (!n->target || !n->in || !n->outs)
        return TN_ENOMEM;
    for (int i = 0; i < o->nin; i++) {
        n->in[i].kind = o->in[i].kind;
        if (!(n->in[i].name = strdup(o->in[i].name)) || copy_arg(&n->in[i].arg, &o->in[i].arg))
            return TN_ENOMEM;
        n->nin++;
        if (i == 0) /* the view's base: `self` (`input` for some) */
            n->in[i].arg.items[0].value = p;
    }
    int result = -1;
    for (int k = 0; k < o->nout; k++) {
        int w = -1;
        if (o->outs[k] >= 0 && (w = new_value(z, z->g->values[o->outs[k]].name, false)) < 0)
            return w;
        n->outs[n->nout++] = w;
        if (all)
            all[k] = w;
        if (k == k_want)
            result = w;
    }
    n->name = strdup(result >= 0 ? z->g->values[result].name : o->name);
    if (!n->name || view_to_reshape(n) < 0)
        return TN_ENOMEM;
    return k_want >= 0 ? result : TN_OK;
}

static int remake_view(struct fz *z, int v)
{
    int p = read_value(z, z->parent[v]);
    return p < 0 ? p : remake(z, z->vnode[v], p, z->vout[v], NULL);
}

/* The value standing for v now: its root's current value, or its view
 * made again where the root changed since. */
static int read_value(struct fz *z, int v)
{
    if (v < 0)
        return v;
    v = z->canon[v];
    int r = z->root[v];
    if (r < 0)
        return v;
    if (r == v)
        return z->cur[r];
    if (z->cver[v] == z->ver[r])
        return z->cur[v];
    int w = remake_view(z, v);
    if (w < 0)
        return w;
    z->cur[v] = w;
    z->cver[v] = z->ver[r];
    return w;
}

/* ------------------------------------------------- views */

static const char *const view_ops[] = {
    "view", "_unsafe_view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze",
    "permute", "transpose", "t", "alias", "detach", "select", "slice", "expand", "broadcast_to",
    "split",
    "split_with_sizes", "chunk", "unbind", "narrow", "diagonal", "linalg_diagonal", "as_strided", "unfold",
    "view_as", "reshape_as", "expand_as", "movedim", "swapaxes", "swapdims", "view_as_real", "view_as_complex",
    "real", "imag", "tensor_split", "hsplit", "vsplit", "_reshape_alias", "lift_fresh",
    "mT", "mH", "adjoint", "matrix_H", "numpy_T"};

static bool is_view(const char *target)
{
    struct target s;
    if (split_target(target, &s) < 0 || strcmp(s.ns, "aten"))
        return false;
    for (size_t i = 0; i < sizeof view_ops / sizeof *view_ops; i++)
        if (!strcmp(s.name, view_ops[i]))
            return true;
    return false;
}

static const char *op_name(const char *target, char *buf, size_t len)
{
    struct target s;
    if (split_target(target, &s) < 0)
        snprintf(buf, len, "%s", target);
    else
        snprintf(buf, len, "%s", s.name);
    return buf;
}

static int64_t int_in(const struct tn_graph_node *n, const char *name, int pos, int64_t def,
                      bool *sym)
{
    const struct tn_graph_input *in = find_in(n, name, pos);
    if (!in || in->arg.kind == TN_GARG_NONE)
        return def;
    if (in->arg.kind != TN_GARG_INT || in->arg.items[0].value >= 0) {
        if (sym)
            *sym = true;
        return def;
    }
    return in->arg.items[0].i;
}

/* A value holding base's sizes (of original value `orig`, read through
 * `cur`): ints for sizes, a sym_size node for each symbolic one. */
static int sizes_of(struct fz *z, int orig, int cur, int64_t *ints, int *vals)
{
    int nd = z->g->values[orig].ndim;
    for (int d = 0; d < nd; d++) {
        /* g->values moves as values are added: no pointer into it here */
        ints[d] = z->g->values[orig].sizes[d];
        vals[d] = -1;
        if (!z->g->values[orig].exprs[d])
            continue;
        int s = new_value(z, "sym_size", true);
        struct tn_graph_node *n = s < 0 ? NULL : make_node(z, PREFIX "aten.sym_size.int", 2, s);
        if (!n || add_tensor(n, "self", cur) < 0 || add_int(n, "dim", d) < 0)
            return TN_ENOMEM;
        vals[d] = s;
    }
    return TN_OK;
}

/* A slice(base, dim, ...) piece for cat_around: [0, bound) when `upto`,
 * else [bound, end); bound is the view's own argument when given (an int
 * or a SymInt), else the int b. */
static int piece(struct fz *z, const char *name, int base, int64_t dim, bool upto,
                 const struct tn_graph_input *bound, int64_t b)
{
    int u = new_value(z, name, false);
    if (u < 0)
        return u;
    struct tn_graph_node *n = make_node(z, PREFIX "aten.slice.Tensor", 4, u);
    if (!n || add_tensor(n, "self", base) < 0 || add_int(n, "dim", dim) < 0 ||
        (upto && add_int(n, "start", 0) < 0))
        return TN_ENOMEM;
    const char *key = upto ? "end" : "start";
    if (!bound)
        return add_int(n, key, b) < 0 ? TN_ENOMEM : u;
    struct tn_graph_input *in = &n->in[n->nin];
    in->kind = 1;
    if (!(in->name = strdup(key)) || copy_arg(&in->arg, &bound->arg) < 0)
        return TN_ENOMEM;
    n->nin++;
    return u;
}

/* base with the view y written back, for a view made by slice (step 1) or
 * select (sel) of the original value base_orig: the cat of the pieces
 * around it. Returns the new base value, or 1 when not supported. */
static int cat_around(struct fz *z, const struct tn_graph_node *vn, int base, int base_orig,
                      int y, bool sel)
{
    bool sym = false;
    const struct tn_graph_value bvc = z->g->values[base_orig], *bv = &bvc;
    int64_t dim = int_in(vn, "dim", 1, 0, &sym);
    if (dim < 0)
        dim += bv->ndim;
    if (sym || dim < 0 || dim >= bv->ndim || !bv->has_meta)
        return 1;
    bool known = !bv->exprs[dim];   /* the size of dim is a number */
    int64_t size = bv->sizes[dim];
    const struct tn_graph_input *sa = NULL, *ea = NULL;
    int64_t start, end;
    bool before, after;
    if (sel) {
        start = int_in(vn, "index", 2, 0, &sym);
        if (sym)
            return 1;
        if (start < 0 && known)
            start += size;
        end = start + 1;
        before = start != 0;
        after = start != -1 && !(known && end >= size);
    } else {
        sa = find_in(vn, "start", 2);
        ea = find_in(vn, "end", 3);
        if (sa && sa->arg.kind == TN_GARG_NONE)
            sa = NULL;
        if (ea && ea->arg.kind == TN_GARG_NONE)
            ea = NULL;
        if (int_in(vn, "step", 4, 1, &sym) != 1 || sym)
            return 1;
        start = int_in(vn, "start", 2, 0, NULL);
        end = int_in(vn, "end", 3, INT64_MAX, NULL);
        bool ssym = sa && sa->arg.items[0].value >= 0, esym = ea && ea->arg.items[0].value >= 0;
        before = sa && (ssym || start != 0);
        after = ea && (esym || (end != INT64_MAX && !(known && end >= size)));
    }
    char name[300];
    snprintf(name, sizeof name, "%s", bv->name);
    int pieces[3], np = 0, u;
    if (before) {
        if ((u = piece(z, name, base, dim, true, sa, start)) < 0)
            return u;
        pieces[np++] = u;
    }
    if (sel) { /* y lost the dimension */
        if ((u = new_value(z, name, false)) < 0)
            return u;
        struct tn_graph_node *n = make_node(z, PREFIX "aten.unsqueeze.default", 2, u);
        if (!n || add_tensor(n, "self", y) < 0 || add_int(n, "dim", dim) < 0)
            return TN_ENOMEM;
        y = u;
    }
    pieces[np++] = y;
    if (after) {
        if ((u = piece(z, name, base, dim, false, ea, end)) < 0)
            return u;
        pieces[np++] = u;
    }
    if (np == 1)
        return y;
    if ((u = new_value(z, name, false)) < 0)
        return u;
    struct tn_graph_node *n = make_node(z, PREFIX "aten.cat.default", 2, u);
    if (!n || copy_meta(z, u, base_orig) < 0 || add_in(n, "tensors", TN_GARG_TENSORS, NULL, pieces, np) < 0 ||
        add_int(n, "dim", dim) < 0)
        return TN_ENOMEM;
    return u;
}

/* base with piece k of a split, chunk or unbind (node ni) replaced by y:
 * the pieces taken again from base, y in place of piece k, concatenated
 * along the node's dim (unbind's pieces unsqueezed first). Returns the
 * new base, or 1 when not supported. */
static int cat_pieces(struct fz *z, int ni, int base, int base_orig, int k, int y, int ndim,
                      bool unbind)
{
    const struct tn_graph_node vn = z->nodes[ni];
    bool sym = false;
    int64_t dim = int_in(&vn, "dim", unbind ? 1 : 2, 0, &sym);
    if (dim < 0)
        dim += ndim;
    if (sym || dim < 0 || dim >= ndim || vn.nout < 1 || vn.nout > z->g->limits.max_args)
        return 1;
    int *pieces = calloc((size_t)vn.nout + 1, sizeof *pieces);
    if (!pieces)
        return TN_ENOMEM;
    int rc = remake(z, ni, base, -1, pieces), u = TN_OK;
    char name[300];
    snprintf(name, sizeof name, "%s", z->g->values[base_orig].name);
    for (int i = 0; i < vn.nout && rc >= 0; i++) {
        if (i == k)
            pieces[i] = y;
        if (pieces[i] < 0) {
            rc = 1; /* an output left unnamed */
            break;
        }
        if (!unbind)
            continue;
        struct tn_graph_node *n;
        if ((u = new_value(z, name, false)) < 0 ||
            !(n = make_node(z, PREFIX "aten.unsqueeze.default", 2, u)) ||
            add_tensor(n, "self", pieces[i]) < 0 || add_int(n, "dim", dim) < 0)
            rc = u < 0 ? u : TN_ENOMEM;
        else
            pieces[i] = u;
    }
    if (rc >= 0 && rc != 1) {
        struct tn_graph_node *n;
        if ((u = new_value(z, name, false)) < 0 ||
            !(n = make_node(z, PREFIX "aten.cat.default", 2, u)) || copy_meta(z, u, base_orig) < 0 ||
            add_in(n, "tensors", TN_GARG_TENSORS, NULL, pieces, vn.nout) < 0 ||
            add_int(n, "dim", dim) < 0)
            rc = u < 0 ? u : TN_ENOMEM;
        else
            rc = u;
    }
    free(pieces);
    return rc;
}

/* base (value p before the mutation) with its complex view y, made by
 * view_as_real, view_as_complex, real or imag (nm), written back, as
 * PyTorch's functionalization does: view_as_complex(y) for view_as_real,
 * view_as_real(y) for view_as_complex, and for real (imag) the pairs of
 * view_as_real(base) with y scattered into part 0 (1), made complex. */
static int complex_back(struct fz *z, int p, int base, int y, const char *nm)
{
    char pname[256];
    snprintf(pname, sizeof pname, "%s", z->g->values[p].name);
    bool part = !strcmp(nm, "real") || !strcmp(nm, "imag");
    int u, r = -1, s = y;
    struct tn_graph_node *n;
    if (part) { /* pairs of base, y scattered into its part */
        if ((r = new_value(z, pname, false)) < 0)
            return r;
        if (!(n = make_node(z, PREFIX "aten.view_as_real.default", 1, r)) ||
            add_tensor(n, "self", base) < 0)
            return TN_ENOMEM;
        if ((s = new_value(z, pname, false)) < 0)
            return s;
        if (!(n = make_node(z, PREFIX "aten.select_scatter.default", 4, s)) ||
            add_tensor(n, "self", r) < 0 || add_tensor(n, "src", y) < 0 ||
            add_int(n, "dim", -1) < 0 || add_int(n, "index", !strcmp(nm, "imag")) < 0)
            return TN_ENOMEM;
    }
    if ((u = new_value(z, pname, false)) < 0)
        return u;
    bool to_real = !strcmp(nm, "view_as_complex");
    if (!(n = make_node(z, to_real ? PREFIX "aten.view_as_real.default"
                                   : PREFIX "aten.view_as_complex.default", 1, u)) ||
        add_tensor(n, "self", s) < 0 || copy_meta(z, u, p) < 0)
        return TN_ENOMEM;
    return u;
}

/* The new value of v's parent when view v (made by node vn) now holds y.
 * Returns it, 1 where the view cannot be written back, or an error. */
static int write_back(struct fz *z, int v, int y)
{
    /* a copy: z->nodes moves as nodes are added */
    const struct tn_graph_node vnc = z->nodes[z->vnode[v]], *vn = &vnc;
    int p = z->parent[v];
    int base = read_value(z, p);
    if (base < 0)
        return base;
    char nm[128];
    op_name(vn->target, nm, sizeof nm);
    /* a copy: g->values moves as values are added */
    const struct tn_graph_value pvc = z->g->values[p], *pv = &pvc;
    char pname[256];
    snprintf(pname, sizeof pname, "%s", pv->name);
    int u;
    if (!strcmp(nm, "alias") || !strcmp(nm, "detach") || !strcmp(nm, "lift_fresh"))
        return y;
    if (!strcmp(nm, "split") || !strcmp(nm, "split_with_sizes") || !strcmp(nm, "chunk") ||
        !strcmp(nm, "unbind"))
        return cat_pieces(z, z->vnode[v], base, p, z->vout[v], y, pv->ndim, nm[0] == 'u');
    if (vn->nout != 1)
        return 1;
    if (!strcmp(nm, "slice") || !strcmp(nm, "select"))
        return cat_around(z, vn, base, p, y, nm[1] == 'e');
    if (!strcmp(nm, "permute") || !strcmp(nm, "transpose") || !strcmp(nm, "t") ||
        !strcmp(nm, "swapaxes") || !strcmp(nm, "swapdims")) {
        int64_t perm[TN_MAX_DIMS], inv[TN_MAX_DIMS];
        int nd = pv->ndim;
        for (int d = 0; d < nd; d++)
            perm[d] = d;
        if (nm[0] == 'p') {
            const struct tn_graph_input *in = find_in(vn, "dims", 1);
            if (!in || in->arg.kind != TN_GARG_INTS || in->arg.n != nd)
                return 1;
            for (int d = 0; d < nd; d++)
                perm[d] = (in->arg.items[d].i % nd + nd) % nd;
        } else if (nd >= 2) {
            bool t = !strcmp(nm, "t");
            int64_t a = t ? 0 : int_in(vn, "dim0", 1, 0, NULL);
            int64_t b = t ? 1 : int_in(vn, "dim1", 2, 1, NULL);
            a = (a % nd + nd) % nd, b = (b % nd + nd) % nd;
            perm[a] = b;
            perm[b] = a;
        } else {
            return y;
        }
        for (int d = 0; d < nd; d++)
            inv[perm[d]] = d;
        if ((u = new_value(z, pname, false)) < 0)
            return u;
        struct tn_graph_node *n = make_node(z, PREFIX "aten.permute.default", 2, u);
        if (!n || add_tensor(n, "self", y) < 0 ||
            add_in(n, "dims", TN_GARG_INTS, inv, NULL, nd) < 0)
            return TN_ENOMEM;
        return u;
    }
    if (!strcmp(nm, "view_as_real") || !strcmp(nm, "view_as_complex") ||
        !strcmp(nm, "real") || !strcmp(nm, "imag"))
        return complex_back(z, p, base, y, nm);
    static const char *const reshapes[] = {"view", "_unsafe_view", "reshape", "flatten",
                                           "unflatten", "squeeze", "unsqueeze", "view_as",
                                           "reshape_as", "_reshape_alias"};
    for (size_t i = 0; i < sizeof reshapes / sizeof *reshapes; i++) {
        if (strcmp(nm, reshapes[i]))
            continue;
        if (!pv->has_meta)
            return 1;
        int64_t ints[TN_MAX_DIMS];
        int vals[TN_MAX_DIMS];
        if (sizes_of(z, p, base, ints, vals) < 0 || (u = new_value(z, pname, false)) < 0)
            return TN_ENOMEM;
        struct tn_graph_node *n = make_node(z, PREFIX "aten.reshape.default", 2, u);
        if (!n || add_tensor(n, "self", y) < 0 ||
            add_in(n, "shape", TN_GARG_INTS, ints, vals, pv->ndim) < 0)
            return TN_ENOMEM;
        return u;
    }
    return 1;
}

/* ------------------------------------------------- mutations */

/* Value v (through its views up to the root) now holds y. */
static int assign(struct fz *z, const char *at, int v, int y)
{
    v = z->canon[v];
    int r = z->root[v];
    if (r < 0) {
        problem(z, at, "writes in place into '%s', which is not a tensor",
                z->g->values[v].name);
        return TN_OK;
    }
    int ver = z->ver[r] + 1, u = v, uy = y;
    z->cur[v] = y;
    z->cver[v] = ver;
    while (u != r) {
        int w = write_back(z, u, uy);
        if (w < 0)
            return w;
        if (w == 1) {
            char nm[128];
            problem(z, at, "writes in place through '%s', a view made by %s, which "
                    "cannot be written back to its base '%s' (not supported)",
                    z->g->values[u].name, op_name(z->nodes[z->vnode[u]].target, nm, sizeof nm),
                    z->g->values[z->parent[u]].name);
            return TN_OK;
        }
        u = z->parent[u];
        uy = w;
        z->cur[u] = w; /* the views on the way hold their new values */
        z->cver[u] = ver;
    }
    z->ver[r] = ver;
    return TN_OK;
}

/* Moves node o into the new list, its tensor arguments read through the
 * mutations so far (items of value >= 0 that are tensors). */
static struct tn_graph_node *take_node(struct fz *z, struct tn_graph_node *o)
{
    for (int i = 0; i < o->nin; i++)
        for (int k = 0; k < o->in[i].arg.n; k++) {
            int v = o->in[i].arg.items[k].value;
            if (v >= 0 && !z->g->values[v].is_sym) {
                int w = read_value(z, v);
                if (w < 0 || (i == 0 && w != v && view_to_reshape(o) < 0))
                    return NULL;
                o->in[i].arg.items[k].value = w;
            }
        }
    struct tn_graph_node *n = push_node(z);
    if (!n)
        return NULL;
    *n = *o;
    memset(o, 0, sizeof *o);
    return n;
}

/* The inputs of node n that it writes (into which, 8 at most; returns how
 * many): by the op's schema, else `self` (or the first) for an in-place
 * op, `out` for an out= one. */
static int mutated_args(const struct tn_graph_node *n, const struct tn_op *op, enum mkind kind,
                        int *which)
{
    int count = 0;
    for (int i = 0; i < n->nin; i++) {
        int k = op ? tn_op_arg_index(op, n->in[i].name) : -1;
        bool m = k >= 0 ? op->args[k].mutable_
                        : kind == OUTVAR ? !strcmp(n->in[i].name, "out")
                        : kind == INPLACE && (!strcmp(n->in[i].name, "self") ||
                                              (i == 0 && !find_in(n, "self", -1)));
        if (m && n->in[i].arg.kind == TN_GARG_TENSOR && count++ < 8)
            which[count - 1] = i; /* more than 8: counted, refused by the caller */
    }
    return count;
}

static void free_input(struct tn_graph_input *in)
{
    free(in->name);
    free(in->arg.items);
    free(in->arg.s);
}

/* bool < integers < floating < complex */
static int category(enum tn_dtype d)
{
    return tn_dtype_is_complex(d) ? 3 : tn_dtype_is_floating(d) ? 2
                                      : tn_dtype_is_integral(d, false) ? 1 : 0;
}

/* Whether the functional form of in-place node o, which writes `self`,
 * may compute another dtype than self's: a tensor argument of another
 * dtype of self's category or a higher one (PyTorch's in-place op casts
 * its result back to self's; a bool mask or int64 indices do not count). */
static bool promotes(const struct fz *z, const struct tn_graph_node *o, int self)
{
    const struct tn_graph_value *sv = &z->g->values[self];
    if (!sv->has_meta)
        return false;
    for (int i = 0; i < o->nin; i++)
        for (int k = 0; k < o->in[i].arg.n; k++) {
            int v = o->in[i].arg.items[k].value;
            const struct tn_graph_value *a = v >= 0 ? &z->g->values[v] : NULL;
            if ((o->in[i].arg.kind == TN_GARG_TENSOR || o->in[i].arg.kind == TN_GARG_TENSORS) &&
                a && a->has_meta && !a->is_sym && a->dtype != sv->dtype &&
                category(a->dtype) >= category(sv->dtype))
                return true;
        }
    return false;
}

/* Rewrites node o (an in-place or out= op) as the functional op `fop`
 * (target ftarget) and records what it wrote. */
static int rewrite(struct fz *z, struct tn_graph_node *o, const struct tn_op *fop,
                   const char *ftarget, enum mkind kind, const int *which, int nwhich)
{
    int targets[8];
    for (int k = 0; k < nwhich && k < 8; k++)
        targets[k] = o->in[which[k]].arg.items[0].value;
    if (kind == OUTVAR) { /* the out= arguments are not the functional op's */
        int j = 0;
        for (int i = 0; i < o->nin; i++) {
            bool drop = false;
            for (int k = 0; k < nwhich; k++)
                drop |= which[k] == i;
            if (drop)
                free_input(&o->in[i]);
            else
                o->in[j++] = o->in[i];
        }
        o->nin = j;
    }
    /* names the functional schema spells otherwise (dropout_'s self is
     * dropout's input): by position */
    for (int i = 0; i < o->nin && i < fop->nargs; i++)
        if (tn_op_arg_index(fop, o->in[i].name) < 0) {
            char *nm = strdup(fop->args[i].name);
            if (!nm)
                return TN_ENOMEM;
            free(o->in[i].name);
            o->in[i].name = nm;
        }
    char *t = strdup(ftarget);
    if (!t)
        return TN_ENOMEM;
    free(o->target);
    o->target = t;
    o->op = NULL;
    bool cast = kind == INPLACE && promotes(z, o, targets[0]);
    struct tn_graph_node *n = take_node(z, o);
    if (!n)
        return TN_ENOMEM;
    /* n moves as nodes are added: its index */
    int ni = (int)(n - z->nodes);
    const char *where = n->name;
    if (cast && n->nout == 1 && n->outs[0] >= 0) {
        /* x.add_(y) keeps x's dtype where add(x, y) promotes: the result
         * goes through _to_copy to it */
        int out = n->outs[0], f = new_value(z, z->g->values[out].name, false);
        int64_t dt = z->g->values[targets[0]].dtype;
        if (f < 0)
            return f;
        z->nodes[ni].outs[0] = f;
        struct tn_graph_node *c = make_node(z, PREFIX "aten._to_copy.default", 2, out);
        if (!c || add_tensor(c, "self", f) < 0 ||
            add_in(c, "dtype", TN_GARG_DTYPE, &dt, NULL, 1) < 0)
            return TN_ENOMEM;
    }
    /* result k is the new value of the k-th written argument; the node's
     * outputs stay the same tensors as those arguments */
    for (int k = 0; k < nwhich && k < 8; k++) {
        n = &z->nodes[ni];
        int out = k < n->nout ? n->outs[k] : -1;
        if (out < 0) {
            if (k < n->nout)
                continue;
            if ((out = new_value(z, z->g->values[targets[k]].name, false)) < 0)
                return out;
            int *p = realloc(n->outs, (size_t)(n->nout + 1) * sizeof *n->outs);
            if (!p)
                return TN_ENOMEM;
            n->outs = p;
            n->outs[n->nout++] = out;
        }
        int rc = assign(z, where, targets[k], out);
        if (rc < 0)
            return rc;
        /* later reads of out are reads of the argument it aliases */
        z->canon[out] = z->canon[targets[k]];
    }
    return TN_OK;
}

/* batch_norm(x, w, b, running_mean, running_var, training=True, momentum,
 * eps, cudnn): PyTorch updates the running statistics in place. They
 * become values: mean and unbiased variance of x over all but dim 1,
 * blended by momentum; batch_norm itself gets None for them. */
static bool bn_training(const struct tn_graph_node *o)
{
    if (strcmp(o->target, PREFIX "aten.batch_norm.default"))
        return false;
    const struct tn_graph_input *t = find_in(o, "training", 5);
    const struct tn_graph_input *rm = find_in(o, "running_mean", 3);
    return t && t->arg.kind == TN_GARG_BOOL && t->arg.items[0].i && rm &&
           rm->arg.kind == TN_GARG_TENSOR;
}

static int bn_stat(struct fz *z, const struct tn_graph_node *o, int x, int ndim, int stat,
                   double momentum, bool var)
{
    char name[300];
    int64_t dims[TN_MAX_DIMS];
    int nd = 0, u, w;
    for (int d = 0; d < ndim; d++)
        if (d != 1)
            dims[nd++] = d;
    snprintf(name, sizeof name, "%s_%s", o->name, var ? "var" : "mean");
    if ((u = new_value(z, name, false)) < 0)
        return u;
    struct tn_graph_node *n = make_node(z, var ? PREFIX "aten.var.correction"
                                               : PREFIX "aten.mean.dim", 3, u);
    if (!n || add_tensor(n, "self", x) < 0 ||
        add_in(n, "dim", TN_GARG_INTS, dims, NULL, nd) < 0 ||
        (var && add_int(n, "correction", 1) < 0))
        return TN_ENOMEM;
    /* (1 - momentum) * stat + momentum * batch statistic */
    int cur = read_value(z, stat);
    if (cur < 0 || (w = new_value(z, name, false)) < 0)
        return cur < 0 ? cur : w;
    if (!(n = make_node(z, PREFIX "aten.mul.Tensor", 2, w)) || add_tensor(n, "self", cur) < 0 ||
        add_float(n, "other", 1.0 - momentum) < 0)
        return TN_ENOMEM;
    int s = new_value(z, name, false);
    if (s < 0)
        return s;
    if (!(n = make_node(z, PREFIX "aten.add.Tensor", 3, s)) || add_tensor(n, "self", w) < 0 ||
        add_tensor(n, "other", u) < 0 || add_float(n, "alpha", momentum) < 0)
        return TN_ENOMEM;
    return assign(z, o->name, stat, s);
}

static int bn_rewrite(struct fz *z, struct tn_graph_node *o)
{
    struct tn_graph_input *x = (struct tn_graph_input *)find_in(o, "input", 0);
    struct tn_graph_input *rm = (struct tn_graph_input *)find_in(o, "running_mean", 3);
    struct tn_graph_input *rv = (struct tn_graph_input *)find_in(o, "running_var", 4);
    const struct tn_graph_input *mo = find_in(o, "momentum", 6);
    if (!x || x->arg.kind != TN_GARG_TENSOR || !rv || rv->arg.kind != TN_GARG_TENSOR || !mo ||
        (mo->arg.kind != TN_GARG_FLOAT && mo->arg.kind != TN_GARG_INT)) {
        problem(z, o->name, "batch_norm in training mode with running statistics: arguments "
                "we do not read");
        return TN_OK;
    }
    int xv = x->arg.items[0].value;
    if (!z->g->values[xv].has_meta) {
        problem(z, o->name, "batch_norm in training mode: '%s' has no tensor_values entry",
                z->g->values[xv].name);
        return TN_OK;
    }
    int ndim = z->g->values[xv].ndim;
    double m = mo->arg.kind == TN_GARG_FLOAT ? mo->arg.items[0].f : (double)mo->arg.items[0].i;
    int stats[2] = {rm->arg.items[0].value, rv->arg.items[0].value};
    int xin = read_value(z, xv), rc;
    if (xin < 0)
        return xin;
    /* the statistics come first: batch_norm reads x as it is now */
    for (int k = 0; k < 2; k++)
        if ((rc = bn_stat(z, o, xin, ndim, stats[k], m, k == 1)) < 0)
            return rc;
    for (int k = 0; k < 2; k++) {
        struct tn_graph_input *in = k ? rv : rm;
        in->arg.kind = TN_GARG_NONE;
        in->arg.items[0].value = -1;
    }
    return take_node(z, o) ? TN_OK : TN_ENOMEM;
}

/* ------------------------------------------------- the outputs */

/* Renames value v to NAME_mutated (the first free), so a mutation output
 * has a name the caller can know; a graph input or a value renamed already
 * gets a copy of that name instead. Returns the value. */
static int mutation_value(struct fz *z, int v, const char *input, bool *renamed)
{
    char name[300];
    snprintf(name, sizeof name, "%.200s_mutated", input);
    for (int k = 2; tn_graph_find_value(z->g, name) >= 0; k++)
        snprintf(name, sizeof name, "%.200s_mutated%d", input, k);
    if (z->g->values[v].def != TN_GRAPH_INPUT && !renamed[v]) {
        char *nm = strdup(name);
        if (!nm)
            return TN_ENOMEM;
        free(z->g->values[v].name);
        z->g->values[v].name = nm;
        renamed[v] = true;
        return tn__graph_reindex(z->g) < 0 ? TN_ENOMEM : v;
    }
    int u = tn__graph_intern(z->g, name);
    if (u < 0 || grow_values(z) < 0)
        return u < 0 ? u : TN_ENOMEM;
    init_value(z, u);
    struct tn_graph_node *n = make_node(z, PREFIX "aten.clone.default", 1, u);
    if (!n || add_tensor(n, "self", v) < 0)
        return TN_ENOMEM;
    return u;
}

/* A user output that named value orig now reads v (orig was written after
 * it was made): v takes orig's name, which callers key the output by, and
 * orig a new one; not where either is a graph input or v was named
 * already. */
static int keep_output_name(struct fz *z, int orig, int v, bool *renamed)
{
    struct tn_graph_value *vals = z->g->values;
    if (v == orig || renamed[v] || vals[v].def == TN_GRAPH_INPUT ||
        vals[orig].def == TN_GRAPH_INPUT)
        return TN_OK;
    char fresh[300];
    for (int k = 1;; k++) {
        snprintf(fresh, sizeof fresh, "%.200s_%d", vals[orig].name, k);
        if (tn_graph_find_value(z->g, fresh) < 0)
            break;
    }
    char *nm = strdup(fresh);
    if (!nm)
        return TN_ENOMEM;
    free(vals[v].name);
    vals[v].name = vals[orig].name;
    vals[orig].name = nm;
    renamed[v] = renamed[orig] = true;
    return tn__graph_reindex(z->g);
}

static int finish_outputs(struct fz *z)
{
    struct tn_graph *g = z->g;
    int nmut = 0;
    for (int i = 0; i < g->ninputs; i++)
        nmut += z->ver[g->inputs[i].value] > 0;
    struct tn_graph_spec *outs = calloc((size_t)(g->noutputs + nmut) + 1, sizeof *outs);
    int *reads = calloc((size_t)g->noutputs + 1, sizeof *reads);
    int no = 0, rc = outs && reads ? TN_OK : TN_ENOMEM;
    /* the user outputs' values now (views taken again add values) */
    for (int i = 0; i < g->noutputs && rc == TN_OK; i++)
        rc = (reads[i] = read_value(z, g->outputs[i].value)) < 0 ? reads[i] : TN_OK;
    /* the values made below (clones for mutation outputs) are never looked up */
    bool *renamed = calloc((size_t)g->nvalues + 1, sizeof *renamed);
    if (rc < 0 || !renamed) {
        free(outs);
        free(reads);
        free(renamed);
        return rc < 0 ? rc : TN_ENOMEM;
    }
    for (int i = 0; i < g->ninputs && rc == TN_OK; i++) {
        const struct tn_graph_spec *in = &g->inputs[i];
        if (!z->ver[in->value])
            continue;
        static const int kinds[4] = {TN_GOUT_USER_INPUT_MUTATION, TN_GOUT_PARAMETER_MUTATION,
                                     TN_GOUT_BUFFER_MUTATION, -1};
        if (kinds[in->kind] < 0) {
            problem(z, "", "the graph writes in place into the tensor constant '%s'",
                    g->values[in->value].name);
            continue;
        }
        const char *vname = g->values[in->value].name;
        int v = mutation_value(z, z->cur[in->value], vname, renamed);
        if (v < 0) {
            rc = v;
            break;
        }
        outs[no].kind = kinds[in->kind];
        outs[no].value = v;
        if (!(outs[no].target = strdup(in->target ? in->target : vname)))
            rc = TN_ENOMEM;
        no++;
    }
    for (int i = 0; i < g->noutputs && rc == TN_OK; i++) {
        int orig = g->outputs[i].value, v = reads[i];
        outs[no] = g->outputs[i];
        outs[no++].value = v;
        g->outputs[i].target = NULL;
        rc = keep_output_name(z, orig, v, renamed);
    }
    free(renamed);
    free(reads);
    if (rc < 0) {
        for (int i = 0; i < no; i++)
            if (i < nmut)
                free(outs[i].target);
        free(outs);
        return rc;
    }
    free(g->outputs);
    g->outputs = outs;
    g->noutputs = no;
    return TN_OK;
}

/* ------------------------------------------------- the pass */

static bool needs_pass(const struct tn_graph *g)
{
    char func[512];
    for (int i = 0; i < g->nnodes; i++)
        if (classify(g->nodes[i].target, func, sizeof func) != FUNCTIONAL ||
            bn_training(&g->nodes[i]))
            return true;
    return false;
}

/* copy_(self, src): self's new value is src in self's dtype, broadcast to
 * its sizes (_to_copy, then expand when the sizes differ), the node's own
 * output that value. For a registry without aten::copy. */
static int copy_rewrite(struct fz *z, struct tn_graph_node *o)
{
    const struct tn_graph_input *si = find_in(o, "self", 0), *ri = find_in(o, "src", 1);
    int out = o->nout == 1 ? o->outs[0] : -1;
    if (!si || !ri || si->arg.kind != TN_GARG_TENSOR || ri->arg.kind != TN_GARG_TENSOR ||
        out < 0) {
        problem(z, o->name, "copy_: arguments we do not read");
        return TN_OK;
    }
    int self = si->arg.items[0].value, src = ri->arg.items[0].value;
    const struct tn_graph_value a = z->g->values[self], b = z->g->values[src];
    if (!a.has_meta || !b.has_meta) {
        problem(z, o->name, "copy_: '%s' or '%s' has no tensor_values entry", a.name, b.name);
        return TN_OK;
    }
    bool same = a.ndim == b.ndim;
    for (int d = 0; same && d < a.ndim; d++)
        same = a.sizes[d] == b.sizes[d] && !a.exprs[d] == !b.exprs[d] &&
               (!a.exprs[d] || !strcmp(a.exprs[d], b.exprs[d]));
    int from = read_value(z, src), cur = read_value(z, self);
    int y = same ? out : new_value(z, a.name, false);
    if (from < 0 || cur < 0 || y < 0)
        return from < 0 ? from : cur < 0 ? cur : y;
    int64_t dt = a.dtype;
    struct tn_graph_node *n = make_node(z, PREFIX "aten._to_copy.default", 2, y);
    if (!n || add_tensor(n, "self", from) < 0 ||
        add_in(n, "dtype", TN_GARG_DTYPE, &dt, NULL, 1) < 0)
        return TN_ENOMEM;
    if (!same) {
        int64_t ints[TN_MAX_DIMS];
        int vals[TN_MAX_DIMS];
        if (sizes_of(z, self, cur, ints, vals) < 0 ||
            !(n = make_node(z, PREFIX "aten.expand.default", 2, out)) ||
            add_tensor(n, "self", y) < 0 ||
            add_in(n, "size", TN_GARG_INTS, ints, vals, a.ndim) < 0)
            return TN_ENOMEM;
    }
    int rc = assign(z, o->name, self, out);
    z->canon[out] = z->canon[self];
    tn__graph_free_node(o);
    return rc;
}

/* resize_ (resize_as_) becomes resize (resize_as: a new tensor of the new
 * shape holding the old elements in order) like any in-place op; that is
 * only the same when no view shares the tensor's elements: it is not a
 * view, and no value is a view of it. */
static bool resize_aliased(const struct fz *z, const struct tn_graph_node *o)
{
    int v = o->nin ? o->in[0].arg.items[0].value : -1;
    if (v < 0)
        return false;
    v = z->canon[v];
    if (z->parent[v] >= 0)
        return true;
    for (int w = 0; w < z->g->nvalues; w++)
        if (w != v && z->parent[w] >= 0 && z->root[w] == z->root[v])
            return true;
    return false;
}

static int one_node(struct fz *z, int i)
{
    struct tn_graph_node *o = &z->old[i];
    char func[512], nm[128];
    enum mkind kind = classify(o->target, func, sizeof func);
    if (bn_training(o))
        return bn_rewrite(z, o);
    if (kind == FUNCTIONAL) {
        bool view = is_view(o->target);
        int base = view && o->nin > 0 && o->in[0].arg.kind == TN_GARG_TENSOR
                       ? o->in[0].arg.items[0].value : -1;
        int bcanon = base >= 0 ? z->canon[base] : -1;
        struct tn_graph_node *n = take_node(z, o);
        if (!n)
            return TN_ENOMEM;
        if (bcanon >= 0 && z->root[bcanon] >= 0)
            for (int k = 0; k < n->nout; k++) {
                int v = n->outs[k];
                if (v < 0 || z->g->values[v].is_sym)
                    continue;
                z->root[v] = z->root[bcanon];
                z->parent[v] = bcanon;
                z->vnode[v] = (int)(n - z->nodes);
                z->vout[v] = k;
                z->cur[v] = v;
                z->cver[v] = z->ver[z->root[bcanon]];
            }
        return TN_OK;
    }
    if (!strcmp(o->target, PREFIX "aten.detach_.default")) { /* no change of values */
        int v = o->nin ? o->in[0].arg.items[0].value : -1;
        for (int k = 0; v >= 0 && k < o->nout; k++)
            if (o->outs[k] >= 0)
                z->canon[o->outs[k]] = z->canon[v];
        return TN_OK;
    }
    static const char *const meta_ops[] = {"squeeze_", "unsqueeze_", "t_", "transpose_",
                                           "as_strided_", "set_",
                                           "swapaxes_", "swapdims_"};
    op_name(o->target, nm, sizeof nm);
    if ((!strcmp(nm, "resize_") || !strcmp(nm, "resize_as_")) && resize_aliased(z, o)) {
        problem(z, o->name, "%s of a view, or of a tensor a view was taken of, changes "
                "what the views see (not supported)", nm);
        return TN_OK;
    }
    for (size_t k = 0; k < sizeof meta_ops / sizeof *meta_ops; k++)
        if (!strcmp(nm, meta_ops[k])) {
            problem(z, o->name, "%s changes its argument's shape in place (not supported)", nm);
            return TN_OK;
        }
    const struct tn_op *op = tn_graph_op(o->target);
    tn_clear_error();
    if (!strcmp(o->target, PREFIX "aten.copy_.default") && !tn_graph_op(PREFIX "aten.copy.default")) {
        tn_clear_error();
        return copy_rewrite(z, o);
    }
    const struct tn_op *fop = tn_graph_functional_op(o->target);
    if (!fop) {
        problem(z, o->name, "%s", tn_last_error());
        return TN_OK;
    }
    if (kind == OUTVAR)
        out_functional(o->target, op, func, sizeof func);
    int which[8];
    int nwhich = mutated_args(o, op, kind, which);
    if (nwhich == 0 || nwhich > 8) {
        problem(z, o->name, "%s: cannot tell which argument it writes", o->target);
        return TN_OK;
    }
    if (kind == INPLACE && nwhich != 1) {
        problem(z, o->name, "%s writes %d arguments in place (not supported)", o->target,
                nwhich);
        return TN_OK;
    }
    return rewrite(z, o, fop, func, kind, which, nwhich);
}

int tn__graph_functionalize(struct tn_graph *g, tn_graph_problem_fn fn, void *ctx)
{
    if (!needs_pass(g))
        return 0;
    struct fz z = {.g = g, .fn = fn, .ctx = ctx, .old = g->nodes, .nold = g->nnodes};
    int rc = grow_values(&z);
    for (int v = 0; v < g->nvalues && rc == TN_OK; v++)
        init_value(&z, v);
    for (int i = 0; i < z.nold && rc == TN_OK; i++)
        rc = one_node(&z, i);
    if (rc == TN_OK)
        rc = finish_outputs(&z);
    /* what is left in old (detach_ nodes, or all after an error) */
    for (int i = 0; i < z.nold; i++)
        tn__graph_free_node(&z.old[i]);
    if (rc < 0 && tn_last_status() != TN_ENOMEM)
        tn_set_error(TN_ENOMEM, "%s: out of memory", g->label);
    free(z.old);
    g->nodes = z.nodes;
    g->nnodes = z.nnodes;
    for (int v = 0; v < g->nvalues; v++)
        if (g->values[v].def >= 0)
            g->values[v].def = TN_GRAPH_UNDEFINED;
    for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].nout; k++)
            if (g->nodes[i].outs[k] >= 0)
                g->values[g->nodes[i].outs[k]].def = i;
    free(z.canon);
    free(z.root);
    free(z.parent);
    free(z.vnode);
    free(z.vout);
    free(z.cur);
    free(z.cver);
    free(z.ver);
    return rc < 0 ? rc : z.problems;
}
