/*
 * compile/joint.c: AOT autograd of a graph. From a checked forward graph
 * with a loss (the signature's loss output, else the sum of every user
 * output's elements), builds the backward as graph nodes: each node's
 * derivative emitted as ops over graph values, in reverse order, the
 * gradients of a value summed where paths join and summed back to an
 * input's shape where broadcasting widened it, as the eager engine does.
 * Then partitions: the forward graph returns, after its own outputs, the
 * activations the backward reads (saved), and the backward takes them as
 * inputs and returns GRADIENT_TO_PARAMETER outputs.
 *
 * Partition rule (tcompile(1) GRAD): a value the backward reads that a
 * unary pointwise node computed from a value the backward reads anyway (or
 * from a graph input) is recomputed in the backward rather than saved: one
 * pass over memory instead of one activation kept alive between the passes.
 *
 * Both graphs are built as ExportedProgram JSON and checked by reading them
 * back (tn_graph_parse, tn_graph_check), so what tcompile grad writes is
 * what tcompile show, check and run read.
 */
#include "compile/internal.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jb {
    const struct tn_graph *g;
    json_t *nodes;       /* the backward's nodes */
    char **grad;         /* per forward value: its gradient's name, or NULL */
    bool *needs_grad;    /* per forward value: a parameter reaches it */
    bool *read;          /* per forward value: the backward reads it */
    int counter;
    int rc;
    json_t *ftv, *tv;    /* the forward's tensor_values; the backward's */
};

static json_t *one(const char *key, json_t *v)
{
    json_t *o = json_object();
    json_object_set_new(o, key, v);
    return o;
}

/* A NamedArgument. */
static json_t *named(const char *name, json_t *arg, int kind)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(name));
    json_object_set_new(o, "arg", arg);
    json_object_set_new(o, "kind", json_integer(kind));
    return o;
}

static json_t *tensor_arg(const char *v)
{
    return one("as_tensor", one("name", json_string(v)));
}

static json_t *ints_arg(const int64_t *x, int n)
{
    json_t *l = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(l, json_integer(x[i]));
    return one("as_ints", l);
}

/* The forward value v, read by the backward. */
static const char *fv(struct jb *b, int v)
{
    b->read[v] = true;
    return b->g->values[v].name;
}

/* Emits `target` with the arguments in `ins` (a list of NamedArguments,
 * taken), giving nout outputs; their new names go to out[] (strings owned
 * by the node's JSON, alive as long as b->nodes). */
static void emit(struct jb *b, const char *target, json_t *ins, int nout, const char **out)
{
    json_t *n = json_object(), *names = json_array(), *outs = json_array();
    char name[64];
    for (int i = 0; i < nout; i++) {
        snprintf(name, sizeof name, "bw_%d", b->counter++);
        json_array_append_new(names, one("name", json_string(name)));
        out[i] = json_string_value(json_object_get(json_array_get(names, (size_t)i), "name"));
    }
    if (nout == 1)
        json_array_append_new(outs, one("as_tensor", json_incref(json_array_get(names, 0))));
    else
        json_array_append_new(outs, one("as_tensors", json_incref(names)));
    json_decref(names); /* the outputs hold the names (and so out[]) */
    json_object_set_new(n, "target", json_string(target));
    json_object_set_new(n, "inputs", ins);
    json_object_set_new(n, "outputs", outs);
    json_object_set_new(n, "metadata", json_object());
    json_object_set_new(n, "name", json_string(out[0]));
    json_array_append_new(b->nodes, n);
}

static const char *emit1(struct jb *b, const char *target, json_t *ins)
{
    const char *o;
    emit(b, target, ins, 1, &o);
    return o;
}

static json_t *args(int n, ...);

/* emit1 of an op without a Meta kernel: its output declared in
 * tensor_values like forward value v (of dtype dt, or v's when UNSET). */
static const char *emit_like(struct jb *b, const char *target, json_t *ins, int v,
                             enum tn_dtype dt)
{
    const char *o = emit1(b, target, ins);
    json_t *m = json_deep_copy(json_object_get(b->ftv, b->g->values[v].name));
    if (m && dt != TN_DTYPE_UNSET)
        json_object_set_new(m, "dtype", json_integer(tn_graph_scalar_type(dt)));
    if (m)
        json_object_set_new(b->tv, o, m);
    return o;
}

/* Adds g to value v's gradient. */
static void accumulate(struct jb *b, int v, const char *g)
{
    if (!b->grad[v]) {
        b->grad[v] = strdup(g);
        return;
    }
    const char *s = emit1(b, "torch.ops.aten.add.Tensor",
                          args(2, named("self", tensor_arg(b->grad[v]), 1),
                               named("other", tensor_arg(g), 1)));
    free(b->grad[v]);
    b->grad[v] = strdup(s);
}

static json_t *args(int n, ...)
{
    va_list ap;
    json_t *l = json_array();
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        json_array_append_new(l, va_arg(ap, json_t *));
    va_end(ap);
    return l;
}

/* g (of the shape of value `out`) summed back to the shape of value `in`,
 * where broadcasting widened it. */
static const char *sum_to(struct jb *b, const char *g, int out, int in)
{
    const struct tn_graph_value *o = &b->g->values[out], *i = &b->g->values[in];
    int64_t dims[TN_MAX_DIMS];
    int nd = 0, lead = o->ndim - i->ndim;
    for (int d = 0; d < o->ndim; d++)
        if (d < lead || (i->sizes[d - lead] == 1 && o->sizes[d] != 1))
            dims[nd++] = d;
    if (!nd)
        return g;
    const char *s = emit1(b, "torch.ops.aten.sum.dim_IntList",
                          args(3, named("self", tensor_arg(g), 1),
                               named("dim", ints_arg(dims, nd), 1),
                               named("keepdim", one("as_bool", json_true()), 1)));
    return emit1(b, "torch.ops.aten.view.default",
                 args(2, named("self", tensor_arg(s), 1),
                      named("size", ints_arg(i->sizes, i->ndim), 1)));
}

static const struct tn_graph_arg *arg_of(const struct tn_graph_node *n, const char *name)
{
    for (int i = 0; i < n->nin; i++)
        if (!strcmp(n->in[i].name, name))
            return &n->in[i].arg;
    return NULL;
}

/* The tensor value of argument `name`, -1 when absent or None. */
static int tensor_of(const struct tn_graph_node *n, const char *name)
{
    const struct tn_graph_arg *a = arg_of(n, name);
    return a && a->kind == TN_GARG_TENSOR ? a->items[0].value : -1;
}

static int64_t int_of(const struct tn_graph_node *n, const char *name, int64_t def)
{
    const struct tn_graph_arg *a = arg_of(n, name);
    return a && (a->kind == TN_GARG_INT || a->kind == TN_GARG_BOOL) ? a->items[0].i : def;
}

static const char *mm(struct jb *b, const char *x, const char *y)
{
    return emit1(b, "torch.ops.aten.mm.default",
                 args(2, named("self", tensor_arg(x), 1), named("mat2", tensor_arg(y), 1)));
}

static const char *tr(struct jb *b, const char *x)
{
    return emit1(b, "torch.ops.aten.t.default", args(1, named("self", tensor_arg(x), 1)));
}

static const char *reshape(struct jb *b, const char *x, const int64_t *sizes, int n)
{
    return emit1(b, "torch.ops.aten.reshape.default",
                 args(2, named("self", tensor_arg(x), 1), named("shape", ints_arg(sizes, n), 1)));
}

static bool wants(struct jb *b, int v)
{
    return v >= 0 && b->needs_grad[v];
}

/* linear(input, weight, bias): y = input @ weight.T + bias over the last
 * dimension, leading dimensions flattened for the matrix products. */
static void d_linear(struct jb *b, const struct tn_graph_node *n, const char *gy)
{
    const struct tn_graph *g = b->g;
    int x = tensor_of(n, "input"), w = tensor_of(n, "weight"), bias = tensor_of(n, "bias");
    const struct tn_graph_value *xv = &g->values[x], *yv = &g->values[n->outs[0]];
    const char *g2 = gy;
    if (yv->ndim != 2) {
        int64_t s[2] = {-1, yv->sizes[yv->ndim - 1]};
        g2 = reshape(b, gy, s, 2);
    }
    if (wants(b, x)) {
        const char *dx = mm(b, g2, fv(b, w));
        if (xv->ndim != 2)
            dx = reshape(b, dx, xv->sizes, xv->ndim);
        accumulate(b, x, dx);
    }
    if (wants(b, w)) {
        const char *x2 = fv(b, x);
        if (xv->ndim != 2) {
            int64_t s[2] = {-1, xv->sizes[xv->ndim - 1]};
            x2 = reshape(b, x2, s, 2);
        }
        accumulate(b, w, mm(b, tr(b, g2), x2));
    }
    if (wants(b, bias)) {
        int64_t d0 = 0;
        accumulate(b, bias, emit1(b, "torch.ops.aten.sum.dim_IntList",
                                  args(2, named("self", tensor_arg(g2), 1),
                                       named("dim", ints_arg(&d0, 1), 1))));
    }
}

static const char *transpose01(struct jb *b, const char *x)
{
    return emit1(b, "torch.ops.aten.transpose.int",
                 args(3, named("self", tensor_arg(x), 1),
                      named("dim0", one("as_int", json_integer(0)), 1),
                      named("dim1", one("as_int", json_integer(1)), 1)));
}

/* conv2d (groups 1) as ops, for convolution_backward's bool[3] mask has no
 * boxed form yet: gx = conv_transpose2d(gy, weight) with the output
 * padding that gives x's size back, gweight = conv2d(x^T, gy^T) with
 * stride and dilation swapped, transposed back (^T: dimensions 0 and 1
 * swapped), gbias = sum(gy) over all but dimension 1. */
static int d_conv(struct jb *b, const struct tn_graph_node *n, const char *gy)
{
    int x = tensor_of(n, "input"), w = tensor_of(n, "weight"), bias = tensor_of(n, "bias");
    const struct tn_graph_arg *st = arg_of(n, "stride"), *pad = arg_of(n, "padding"),
                              *dil = arg_of(n, "dilation");
    const struct tn_graph_value *xv = &b->g->values[x], *wv = &b->g->values[w],
                                *yv = &b->g->values[n->outs[0]];
    int64_t s[2], p[2], d[2], op[2];
    bool exact = xv->ndim == 4 && int_of(n, "groups", 1) == 1;
    for (int i = 0; exact && i < 2; i++) {
        s[i] = st && st->n ? st->items[st->n == 1 ? 0 : i].i : 1;
        p[i] = pad && pad->n ? pad->items[pad->n == 1 ? 0 : i].i : 0;
        d[i] = dil && dil->n ? dil->items[dil->n == 1 ? 0 : i].i : 1;
        int64_t k = wv->sizes[2 + i], in = xv->sizes[2 + i], out = yv->sizes[2 + i];
        op[i] = in - ((out - 1) * s[i] - 2 * p[i] + d[i] * (k - 1) + 1);
        exact = (in + 2 * p[i] - s[i] * (out - 1) - 1) / d[i] + 1 == k &&
                (in + 2 * p[i] - s[i] * (out - 1) - 1) % d[i] == 0;
    }
    if (!exact)
        return tn_set_error(TN_EINVAL, "%s: node '%s': the graph derivative of conv2d takes "
                                       "groups 1 and strides that cover the input exactly",
                            b->g->label, n->name);
    if (wants(b, x))
        accumulate(b, x, emit_like(b, "torch.ops.aten.conv_transpose2d.input",
                               args(7, named("input", tensor_arg(gy), 1),
                                    named("weight", tensor_arg(fv(b, w)), 1),
                                    named("bias", one("as_none", json_true()), 1),
                                    named("stride", ints_arg(s, 2), 1),
                                    named("padding", ints_arg(p, 2), 1),
                                    named("output_padding", ints_arg(op, 2), 1),
                                    named("dilation", ints_arg(d, 2), 1)),
                               x, TN_DTYPE_UNSET));
    if (wants(b, w)) {
        const char *gw = emit1(b, "torch.ops.aten.conv2d.default",
                               args(6, named("input", tensor_arg(transpose01(b, fv(b, x))), 1),
                                    named("weight", tensor_arg(transpose01(b, gy)), 1),
                                    named("bias", one("as_none", json_true()), 1),
                                    named("stride", ints_arg(d, 2), 1),
                                    named("padding", ints_arg(p, 2), 1),
                                    named("dilation", ints_arg(s, 2), 1)));
        /* declared as the weight's meta with dimensions 0 and 1 swapped */
        json_t *m = json_deep_copy(json_object_get(b->ftv, wv->name));
        json_t *sz = json_object_get(m, "sizes"), *strides = json_array();
        json_t *s0 = json_incref(json_array_get(sz, 0));
        json_array_set(sz, 0, json_array_get(sz, 1));
        json_array_set_new(sz, 1, s0);
        int64_t c[4] = {wv->sizes[0] * wv->sizes[2] * wv->sizes[3], wv->sizes[2] * wv->sizes[3],
                        wv->sizes[3], 1};
        for (int i = 0; i < 4; i++)
            json_array_append_new(strides, one("as_int", json_integer(c[i])));
        json_object_set_new(m, "strides", strides);
        json_object_set_new(b->tv, gw, m);
        accumulate(b, w, transpose01(b, gw));
    }
    if (wants(b, bias)) {
        int64_t dims[3] = {0, 2, 3};
        accumulate(b, bias, emit1(b, "torch.ops.aten.sum.dim_IntList",
                                  args(2, named("self", tensor_arg(gy), 1),
                                       named("dim", ints_arg(dims, 3), 1))));
    }
    return 0;
}

static const char *bin(struct jb *b, const char *op, const char *x, const char *y);

/* tanh: gx = gy - gy*y*y; sigmoid: gx = gy*y - gy*y*y (tanh_backward and
 * sigmoid_backward as ops, over the result y). */
static void d_tanh_sigmoid(struct jb *b, const struct tn_graph_node *n, const char *gy,
                           bool tanh)
{
    int x = tensor_of(n, "self");
    if (!wants(b, x))
        return;
    const char *y = fv(b, n->outs[0]);
    const char *gyy = bin(b, "mul", gy, y);
    accumulate(b, x, bin(b, "sub", tanh ? gy : gyy, bin(b, "mul", gyy, y)));
}

/* relu: threshold_backward(gy, y, 0) as ops: gy * (y > 0). */
static void d_relu(struct jb *b, const struct tn_graph_node *n, const char *gy)
{
    int x = tensor_of(n, "self");
    if (!wants(b, x))
        return;
    const char *pos = emit1(b, "torch.ops.aten.gt.Scalar",
                            args(2, named("self", tensor_arg(fv(b, n->outs[0])), 1),
                                 named("other", one("as_int", json_integer(0)), 1)));
    accumulate(b, x, bin(b, "mul", gy, pos));
}

static const char *bin(struct jb *b, const char *op, const char *x, const char *y)
{
    char target[64];
    snprintf(target, sizeof target, "torch.ops.aten.%s.Tensor", op);
    return emit1(b, target, args(2, named("self", tensor_arg(x), 1),
                                 named("other", tensor_arg(y), 1)));
}

/* log_softmax: gx = gy - exp(y) * sum(gy, dim); softmax: gx = y * (gy -
 * sum(gy * y, dim)), sums keeping dim (the formulas of
 * _log_softmax_backward_data and _softmax_backward_data, as ops). */
static void d_softmax(struct jb *b, const struct tn_graph_node *n, const char *gy, bool log)
{
    int x = tensor_of(n, "self");
    if (!wants(b, x))
        return;
    int64_t dim = int_of(n, "dim", -1);
    const char *y = fv(b, n->outs[0]);
    const char *s = emit1(b, "torch.ops.aten.sum.dim_IntList",
                          args(3, named("self", tensor_arg(log ? gy : bin(b, "mul", gy, y)), 1),
                               named("dim", ints_arg(&dim, 1), 1),
                               named("keepdim", one("as_bool", json_true()), 1)));
    const char *gx;
    if (log) {
        const char *e = emit1(b, "torch.ops.aten.exp.default",
                              args(1, named("self", tensor_arg(y), 1)));
        gx = bin(b, "sub", gy, bin(b, "mul", e, s));
    } else {
        gx = bin(b, "mul", y, bin(b, "sub", gy, s));
    }
    accumulate(b, x, gx);
}

static void d_binary(struct jb *b, const struct tn_graph_node *n, const char *gy, bool mul)
{
    int x = tensor_of(n, "self"), y = tensor_of(n, "other"), out = n->outs[0];
    const struct tn_graph_arg *alpha = arg_of(n, "alpha");
    if (wants(b, x)) {
        const char *d = mul ? emit1(b, "torch.ops.aten.mul.Tensor",
                                    args(2, named("self", tensor_arg(gy), 1),
                                         named("other", tensor_arg(fv(b, y)), 1)))
                            : gy;
        accumulate(b, x, sum_to(b, d, out, x));
    }
    if (wants(b, y)) {
        const char *d = gy;
        if (mul)
            d = emit1(b, "torch.ops.aten.mul.Tensor",
                      args(2, named("self", tensor_arg(gy), 1),
                           named("other", tensor_arg(fv(b, x)), 1)));
        else if (alpha && (alpha->kind == TN_GARG_FLOAT ? alpha->items[0].f != 1
                                                        : alpha->items[0].i != 1))
            d = emit1(b, "torch.ops.aten.mul.Scalar",
                      args(2, named("self", tensor_arg(gy), 1),
                           named("other", alpha->kind == TN_GARG_FLOAT
                                              ? one("as_float", json_real(alpha->items[0].f))
                                              : one("as_int", json_integer(alpha->items[0].i)),
                                 1)));
        accumulate(b, y, sum_to(b, d, out, y));
    }
}

static const char *to_dtype(struct jb *b, const char *x, enum tn_dtype dt)
{
    return emit1(b, "torch.ops.aten._to_copy.default",
                 args(2, named("self", tensor_arg(x), 1),
                      named("dtype", one("as_scalar_type", json_integer(tn_graph_scalar_type(dt))),
                            2)));
}

/* cross_entropy_loss(x[N, C], target[N]) without class weights or label
 * smoothing: gx = (softmax(x, 1) - one_hot(target)) * valid * gy / count
 * (one_hot as target == arange(C)), valid the rows whose target is not
 * ignore_index (those take class 0 and are zeroed), count their number for the mean, 1 for sum. */
static int d_cross_entropy(struct jb *b, const struct tn_graph_node *n, const char *gy)
{
    int x = tensor_of(n, "self"), tg = tensor_of(n, "target");
    const struct tn_graph_value *xv = &b->g->values[x];
    int64_t red = int_of(n, "reduction", 1), ign = int_of(n, "ignore_index", -100);
    const struct tn_graph_arg *ls = arg_of(n, "label_smoothing");
    if (tensor_of(n, "weight") >= 0 || (ls && ls->kind == TN_GARG_FLOAT && ls->items[0].f != 0) ||
        xv->ndim != 2 || red == 0)
        return tn_set_error(TN_EINVAL,
                            "%s: node '%s': the graph derivative of cross_entropy_loss takes "
                            "logits [N, C] with a mean or sum, no class weights, no label "
                            "smoothing",
                            b->g->label, n->name);
    if (!wants(b, x))
        return 0;
    const char *t = fv(b, tg);
    const char *valid = emit1(b, "torch.ops.aten.ne.Scalar",
                              args(2, named("self", tensor_arg(t), 1),
                                   named("other", one("as_int", json_integer(ign)), 1)));
    const char *tc = bin(b, "mul", t, valid);
    int64_t col[2] = {xv->sizes[0], 1};
    const char *classes = emit1(b, "torch.ops.aten.arange.default",
                                args(1, named("end", one("as_int", json_integer(xv->sizes[1])), 1)));
    const char *oh = bin(b, "eq", emit1(b, "torch.ops.aten.view.default",
                                        args(2, named("self", tensor_arg(tc), 1),
                                             named("size", ints_arg(col, 2), 1))),
                         classes);
    const char *p = emit1(b, "torch.ops.aten.softmax.int",
                          args(2, named("self", tensor_arg(fv(b, x)), 1),
                               named("dim", one("as_int", json_integer(1)), 1)));
    const char *vf = to_dtype(b, valid, xv->dtype);
    const char *d = bin(b, "mul", bin(b, "sub", p, to_dtype(b, oh, xv->dtype)),
                        emit1(b, "torch.ops.aten.view.default",
                              args(2, named("self", tensor_arg(vf), 1),
                                   named("size", ints_arg(col, 2), 1))));
    const char *scale = gy;
    if (red == 1)
        scale = bin(b, "div", gy, emit1(b, "torch.ops.aten.sum.default",
                                        args(1, named("self", tensor_arg(vf), 1))));
    accumulate(b, x, bin(b, "mul", d, scale));
    return 0;
}

/* A pooling node's int[2] argument `name` (def when absent or empty). */
static json_t *pool_ints(const struct tn_graph_node *n, const char *name, const char *or_name,
                         int64_t def)
{
    const struct tn_graph_arg *a = arg_of(n, name);
    if ((!a || a->n == 0) && or_name)
        a = arg_of(n, or_name);
    int64_t v[2] = {def, def};
    for (int i = 0; a && a->n > 0 && i < 2; i++)
        v[i] = a->items[a->n == 1 ? 0 : i].i;
    return ints_arg(v, 2);
}

/* max_pool2d: the indices recomputed (max_pool2d_with_indices), then
 * max_pool2d_with_indices_backward; avg_pool2d: avg_pool2d_backward. */
static void d_pool(struct jb *b, const struct tn_graph_node *n, const char *gy, bool max)
{
    int x = tensor_of(n, "self");
    if (!wants(b, x))
        return;
    const char *xs = fv(b, x);
    json_t *common = args(4, named("kernel_size", pool_ints(n, "kernel_size", NULL, 1), 1),
                          named("stride", pool_ints(n, "stride", "kernel_size", 1), 1),
                          named("padding", pool_ints(n, "padding", NULL, 0), 1),
                          named("ceil_mode", one("as_bool", json_boolean(int_of(n, "ceil_mode", 0))),
                                1));
    json_t *ins = args(2, named(max ? "grad_output" : "grad_output", tensor_arg(gy), 1),
                       named("self", tensor_arg(xs), 1));
    if (max) {
        json_t *dil = named("dilation", pool_ints(n, "dilation", NULL, 1), 1);
        json_t *fin = args(1, named("self", tensor_arg(xs), 1));
        for (int i = 0; i < 3; i++)
            json_array_append(fin, json_array_get(common, (size_t)i));
        json_array_append(fin, dil);
        json_array_append(fin, json_array_get(common, 3));
        const char *o[2];
        emit(b, "torch.ops.aten.max_pool2d_with_indices.default", fin, 2, o);
        char idx[64];
        snprintf(idx, sizeof idx, "%s", o[1]);
        json_t *m = json_deep_copy(json_object_get(b->ftv, b->g->values[n->outs[0]].name));
        json_t *mi = json_deep_copy(m);
        json_object_set_new(mi, "dtype", json_integer(tn_graph_scalar_type(TN_INT64)));
        json_object_set_new(b->tv, o[0], m);
        json_object_set_new(b->tv, idx, mi);
        for (int i = 0; i < 3; i++)
            json_array_append(ins, json_array_get(common, (size_t)i));
        json_array_append_new(ins, dil);
        json_array_append(ins, json_array_get(common, 3));
        json_array_append_new(ins, named("indices", tensor_arg(idx), 1));
        accumulate(b, x, emit_like(b, "torch.ops.aten.max_pool2d_with_indices_backward.default",
                                   ins, x, TN_DTYPE_UNSET));
    } else {
        json_array_extend(ins, common);
        json_array_append_new(ins, named("count_include_pad",
                                         one("as_bool",
                                             json_boolean(int_of(n, "count_include_pad", 1))),
                                         1));
        json_array_append_new(ins, named("divisor_override", one("as_none", json_true()), 1));
        accumulate(b, x, emit_like(b, "torch.ops.aten.avg_pool2d_backward.default", ins, x,
                                   TN_DTYPE_UNSET));
    }
    json_decref(common);
}

/* rsqrt(v + eps) */
static const char *rsqrt_eps(struct jb *b, const char *v, double eps)
{
    const char *a = emit1(b, "torch.ops.aten.add.Scalar",
                          args(2, named("self", tensor_arg(v), 1),
                               named("other", one("as_float", json_real(eps)), 1)));
    return emit1(b, "torch.ops.aten.rsqrt.default", args(1, named("self", tensor_arg(a), 1)));
}

/* batch norm's gweight = sum(gy * xh), gbias = sum(gy) over dims. */
static void bn_affine_grads(struct jb *b, int w, int bias, const char *gy, const char *xh,
                            const int64_t *dims, int nd)
{
    if (wants(b, w))
        accumulate(b, w, emit1(b, "torch.ops.aten.sum.dim_IntList",
                               args(2, named("self", tensor_arg(bin(b, "mul", gy, xh)), 1),
                                    named("dim", ints_arg(dims, nd), 1))));
    if (wants(b, bias))
        accumulate(b, bias, emit1(b, "torch.ops.aten.sum.dim_IntList",
                                  args(2, named("self", tensor_arg(gy), 1),
                                       named("dim", ints_arg(dims, nd), 1))));
}

static const char *mean_keep(struct jb *b, const char *x, const int64_t *dims, int nd)
{
    return emit1(b, "torch.ops.aten.mean.dim",
                 args(3, named("self", tensor_arg(x), 1), named("dim", ints_arg(dims, nd), 1),
                      named("keepdim", one("as_bool", json_true()), 1)));
}

/* batch_norm in training mode (the batch's statistics, biased variance),
 * recomputed from x: xh = (x - mean) * s with s = rsqrt(var + eps), then
 * gx = s * (g - mean(g) - xh * mean(g * xh)) with g = gy * weight,
 * gweight = sum(gy * xh), gbias = sum(gy), over every dimension but 1. */
static int d_batch_norm_train(struct jb *b, const struct tn_graph_node *n, const char *gy,
                              const int64_t *dims, int nd, double eps)
{
    int x = tensor_of(n, "input"), w = tensor_of(n, "weight"), bias = tensor_of(n, "bias");
    const struct tn_graph_value *xv = &b->g->values[x];
    const char *xs = fv(b, x);
    const char *c = bin(b, "sub", xs, mean_keep(b, xs, dims, nd));
    const char *var = mean_keep(b, bin(b, "mul", c, c), dims, nd);
    const char *s = rsqrt_eps(b, var, eps);
    const char *xh = bin(b, "mul", c, s);
    if (wants(b, x)) {
        int64_t shape[TN_MAX_DIMS];
        for (int d = 0; d < xv->ndim; d++)
            shape[d] = d == 1 ? xv->sizes[1] : 1;
        const char *g = w >= 0 ? bin(b, "mul", gy, reshape(b, fv(b, w), shape, xv->ndim)) : gy;
        const char *t = bin(b, "sub", bin(b, "sub", g, mean_keep(b, g, dims, nd)),
                            bin(b, "mul", xh, mean_keep(b, bin(b, "mul", g, xh), dims, nd)));
        accumulate(b, x, bin(b, "mul", s, t));
    }
    bn_affine_grads(b, w, bias, gy, xh, dims, nd);
    return 0;
}

/* batch_norm in eval mode (training=False): with s = rsqrt(running_var +
 * eps) over the channels (dimension 1), gx = gy * weight * s,
 * gweight = sum(gy * (x - running_mean) * s), gbias = sum(gy), the sums
 * over every dimension but 1. */
static int d_batch_norm_eval(struct jb *b, const struct tn_graph_node *n, const char *gy)
{
    int x = tensor_of(n, "input"), w = tensor_of(n, "weight"), bias = tensor_of(n, "bias"),
        rm = tensor_of(n, "running_mean"), rv = tensor_of(n, "running_var");
    const struct tn_graph_arg *eps = arg_of(n, "eps");
    const struct tn_graph_value *xv = &b->g->values[x];
    if (!eps || xv->ndim < 2)
        return tn_set_error(TN_EINVAL, "%s: node '%s': batch_norm without eps", b->g->label,
                            n->name);
    int64_t shape[TN_MAX_DIMS], dims[TN_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < xv->ndim; d++) {
        shape[d] = d == 1 ? xv->sizes[1] : 1;
        if (d != 1)
            dims[nd++] = d;
    }
    if (int_of(n, "training", 1) || rm < 0 || rv < 0)
        return d_batch_norm_train(b, n, gy, dims, nd, eps->items[0].f);
    const char *s = reshape(b, rsqrt_eps(b, fv(b, rv), eps->items[0].f), shape, xv->ndim);
    if (wants(b, x)) {
        const char *k = w >= 0 ? bin(b, "mul", s, reshape(b, fv(b, w), shape, xv->ndim)) : s;
        accumulate(b, x, bin(b, "mul", gy, k));
    }
    const char *xh = wants(b, w) ? bin(b, "mul", bin(b, "sub", fv(b, x),
                                                     reshape(b, fv(b, rm), shape, xv->ndim)), s)
                                 : NULL;
    bn_affine_grads(b, w, bias, gy, xh, dims, nd);
    return 0;
}

/* Emits node n's derivative. Returns 0, or TN_EINVAL naming it. */
static int derive(struct jb *b, const struct tn_graph_node *n)
{
    const char *t = n->target;
    const char *gy = n->nout > 0 && n->outs[0] >= 0 ? b->grad[n->outs[0]] : NULL;
    if (!gy)
        return 0; /* the loss does not depend on it */
    if (!strcmp(t, "torch.ops.aten.linear.default"))
        d_linear(b, n, gy);
    else if (!strcmp(t, "torch.ops.aten.conv2d.default"))
        return d_conv(b, n, gy);
    else if (!strcmp(t, "torch.ops.aten.relu.default"))
        d_relu(b, n, gy);
    else if (!strcmp(t, "torch.ops.aten.tanh.default") ||
             !strcmp(t, "torch.ops.aten.sigmoid.default"))
        d_tanh_sigmoid(b, n, gy, !strcmp(t, "torch.ops.aten.tanh.default"));
    else if (!strcmp(t, "torch.ops.aten.log_softmax.int") ||
             !strcmp(t, "torch.ops.aten._log_softmax.default"))
        d_softmax(b, n, gy, true);
    else if (!strcmp(t, "torch.ops.aten.softmax.int") ||
             !strcmp(t, "torch.ops.aten._softmax.default"))
        d_softmax(b, n, gy, false);
    else if (!strcmp(t, "torch.ops.aten.max_pool2d.default") ||
             !strcmp(t, "torch.ops.aten.avg_pool2d.default"))
        d_pool(b, n, gy, !strcmp(t, "torch.ops.aten.max_pool2d.default"));
    else if (!strcmp(t, "torch.ops.aten.batch_norm.default"))
        return d_batch_norm_eval(b, n, gy);
    else if (!strcmp(t, "torch.ops.aten.cross_entropy_loss.default"))
        return d_cross_entropy(b, n, gy);
    else if (!strcmp(t, "torch.ops.aten.add.Tensor"))
        d_binary(b, n, gy, false);
    else if (!strcmp(t, "torch.ops.aten.mul.Tensor"))
        d_binary(b, n, gy, true);
    else if (!strcmp(t, "torch.ops.aten.view.default") ||
             !strcmp(t, "torch.ops.aten.reshape.default") ||
             !strcmp(t, "torch.ops.aten._unsafe_view.default") ||
             !strcmp(t, "torch.ops.aten.flatten.using_ints")) {
        int x = tensor_of(n, "self");
        if (wants(b, x))
            accumulate(b, x, reshape(b, gy, b->g->values[x].sizes, b->g->values[x].ndim));
    } else if (!strcmp(t, "torch.ops.aten.t.default")) {
        int x = tensor_of(n, "self");
        if (wants(b, x))
            accumulate(b, x, tr(b, gy));
    } else {
        return tn_set_error(TN_EINVAL, "%s: node '%s': no graph derivative for %s yet",
                            b->g->label, n->name, t);
    }
    return 0;
}

/* Which values a parameter reaches (the ones that get gradients). */
static void mark_needs_grad(struct jb *b)
{
    const struct tn_graph *g = b->g;
    for (int i = 0; i < g->ninputs; i++)
        if (g->inputs[i].kind == TN_GIN_PARAMETER && g->inputs[i].value >= 0)
            b->needs_grad[g->inputs[i].value] = true;
    for (int k = 0; k < g->nnodes; k++) {
        const struct tn_graph_node *n = &g->nodes[k];
        bool any = false;
        for (int i = 0; i < n->nin; i++)
            if (n->in[i].arg.kind == TN_GARG_TENSOR || n->in[i].arg.kind == TN_GARG_TENSORS)
                for (int j = 0; j < n->in[i].arg.n; j++)
                    any |= n->in[i].arg.items[j].value >= 0 &&
                           b->needs_grad[n->in[i].arg.items[j].value];
        for (int j = 0; j < n->nout; j++)
            if (n->outs[j] >= 0 && any && tn_dtype_is_floating(g->values[n->outs[j]].dtype))
                b->needs_grad[n->outs[j]] = true;
    }
}

/* The loss's seed gradients: ones for the loss output, else for each user
 * output (the sum of their elements). */
static int seed(struct jb *b)
{
    const struct tn_graph *g = b->g;
    int nloss = 0, nuser = 0;
    for (int i = 0; i < g->noutputs; i++) {
        nloss += g->outputs[i].kind == TN_GOUT_LOSS_OUTPUT;
        nuser += g->outputs[i].kind == TN_GOUT_USER_OUTPUT;
    }
    int want = nloss ? TN_GOUT_LOSS_OUTPUT : TN_GOUT_USER_OUTPUT;
    int seeded = 0;
    for (int i = 0; i < g->noutputs; i++) {
        int v = g->outputs[i].value;
        if (g->outputs[i].kind != want || v < 0 || !b->needs_grad[v])
            continue;
        accumulate(b, v, emit1(b, "torch.ops.aten.ones_like.default",
                               args(1, named("self", tensor_arg(fv(b, v)), 1))));
        seeded++;
    }
    if (!seeded)
        return tn_set_error(TN_EINVAL,
                            "%s: no loss to differentiate: %s",
                            g->label,
                            nloss + nuser ? "no parameter reaches the loss or the outputs"
                                          : "the graph has no loss output and no user output");
    return 0;
}

static bool unary_pointwise(const char *t)
{
    static const char *const ops[] = {"relu", "tanh", "sigmoid", "gelu", "silu", "neg", "exp"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        char full[64];
        snprintf(full, sizeof full, "torch.ops.aten.%s.default", ops[i]);
        if (!strcmp(t, full))
            return true;
    }
    return false;
}

/* The partition rule: saved[v] true for the forward values the forward
 * returns to the backward, recompute[k] for the forward nodes copied into
 * the backward (their output recomputed there). */
static void partition(struct jb *b, bool *saved, bool *recompute)
{
    const struct tn_graph *g = b->g;
    for (int k = g->nnodes - 1; k >= 0; k--) {
        const struct tn_graph_node *n = &g->nodes[k];
        if (n->nout != 1 || n->outs[0] < 0 || !b->read[n->outs[0]] || !unary_pointwise(n->target))
            continue;
        int x = tensor_of(n, "self");
        if (x >= 0 && (b->read[x] || g->values[x].def == TN_GRAPH_INPUT)) {
            recompute[k] = true;
            b->read[n->outs[0]] = false;
            b->read[x] = true;
        }
    }
    for (int v = 0; v < g->nvalues; v++)
        saved[v] = b->read[v] && g->values[v].def != TN_GRAPH_INPUT;
}

/* A node of the forward copied into the backward's JSON. */
static json_t *node_json(json_t *fwd_nodes, const struct tn_graph_node *n)
{
    for (size_t i = 0; i < json_array_size(fwd_nodes); i++) {
        json_t *j = json_array_get(fwd_nodes, i);
        if (!strcmp(json_string_value(json_object_get(j, "name")), n->name))
            return json_deep_copy(j);
    }
    return NULL;
}

static json_t *spec(const char *arm, const char *v, const char *tkey, const char *target)
{
    json_t *o = json_object();
    bool user = !strcmp(arm, "user_input") || !strcmp(arm, "user_output");
    json_object_set_new(o, "arg", user ? tensor_arg(v) : one("name", json_string(v)));
    if (tkey)
        json_object_set_new(o, tkey, json_string(target));
    return one(arm, o);
}

/* Renames value `from` to `to` wherever j names it. */
static void rename_value(json_t *j, const char *from, const char *to)
{
    const char *k;
    json_t *v;
    size_t i;
    if (json_is_array(j)) {
        json_array_foreach(j, i, v)
            rename_value(v, from, to);
    } else if (json_is_object(j)) {
        json_object_foreach(j, k, v) {
            if (!strcmp(k, "name") && json_is_string(v) && !strcmp(json_string_value(v), from))
                json_string_set(v, to);
            else
                rename_value(v, from, to);
        }
    }
}

/* Names each parameter's gradient after the parameter ("fc1.weight"), so
 * that what tcompile run writes of the backward is keyed as PyTorch's
 * state_dict: a gradient two parameters share is cloned first. A name the
 * forward uses already keeps the generated one. */
static void name_grads(struct jb *b)
{
    const struct tn_graph *g = b->g;
    for (int i = 0; i < g->ninputs; i++) {
        int v = g->inputs[i].value;
        const char *t = g->inputs[i].target;
        if (g->inputs[i].kind != TN_GIN_PARAMETER || v < 0 || !b->grad[v] || !t ||
            tn_graph_find_value(g, t) >= 0)
            continue;
        for (int j = 0; j < i; j++) {
            int u = g->inputs[j].value;
            if (u >= 0 && u != v && b->grad[u] && !strcmp(b->grad[u], b->grad[v])) {
                const char *c = emit1(b, "torch.ops.aten.clone.default",
                                      args(1, named("self", tensor_arg(b->grad[v]), 1)));
                free(b->grad[v]);
                b->grad[v] = strdup(c);
                break;
            }
        }
        if (!b->grad[v])
            continue;
        rename_value(b->nodes, b->grad[v], t);
        free(b->grad[v]);
        b->grad[v] = strdup(t);
    }
}

/* Keeps the first problem tn_graph_check reports. */
static void first_problem(const char *node, const char *msg, void *ctx)
{
    char *buf = ctx;
    if (!buf[0])
        snprintf(buf, 512, "node '%s': %s", node, msg);
}

/* Reads text back as a graph and checks it, then writes it out again with
 * every value's meta. Returns the new text, or NULL with an error. */
static char *finish(const char *text, const char *label)
{
    struct tn_graph *g = tn_graph_parse(text, strlen(text), label, NULL);
    if (!g)
        return NULL;
    char first[512] = "";
    int rc = tn_graph_check(g, first_problem, first);
    char *out = NULL;
    if (rc > 0)
        tn_set_error(TN_EINVAL, "%s: the built graph does not check: %s", label, first);
    else if (rc == 0)
        out = tn_graph_to_json(g);
    tn_graph_free(g);
    return out;
}

int tn_compile_joint(const struct tn_graph *g, char **fwd, char **bwd)
{
    *fwd = *bwd = NULL;
    struct jb b = {.g = g, .nodes = json_array()};
    b.grad = calloc((size_t)g->nvalues, sizeof *b.grad);
    b.needs_grad = calloc((size_t)g->nvalues, sizeof *b.needs_grad);
    b.read = calloc((size_t)g->nvalues, sizeof *b.read);
    bool *saved = calloc((size_t)g->nvalues, sizeof *saved);
    bool *recompute = calloc((size_t)g->nnodes + 1, sizeof *recompute);
    char *ftext = tn_graph_to_json(g);
    json_t *froot = ftext ? json_loads(ftext, 0, NULL) : NULL;
    json_t *broot = NULL;
    int rc = TN_ENOMEM;
    if (!b.grad || !b.needs_grad || !b.read || !saved || !recompute || !froot || !b.nodes)
        goto out;
    b.ftv = json_object_get(json_object_get(json_object_get(froot, "graph_module"), "graph"),
                            "tensor_values");
    b.tv = json_object();
    mark_needs_grad(&b);
    if ((rc = seed(&b)) < 0)
        goto out;
    for (int k = g->nnodes - 1; k >= 0; k--)
        if ((rc = derive(&b, &g->nodes[k])) < 0)
            goto out;
    name_grads(&b);
    partition(&b, saved, recompute);

    json_t *fgm = json_object_get(froot, "graph_module");
    json_t *fgraph = json_object_get(fgm, "graph");
    json_t *fsig = json_object_get(fgm, "signature");
    json_t *ftv = json_object_get(fgraph, "tensor_values");
    json_t *fnodes = json_object_get(fgraph, "nodes");

    /* The backward: its inputs are what it reads of the forward. */
    json_t *ins = json_array(), *inspecs = json_array(), *outs = json_array(),
           *outspecs = json_array(), *tv = b.tv, *nodes = json_array();
    b.tv = NULL; /* the backward's graph holds it from here */
    for (int i = 0; i < g->ninputs; i++) {
        int v = g->inputs[i].value;
        if (v < 0 || !b.read[v])
            continue;
        json_array_append_new(ins, tensor_arg(g->values[v].name));
        json_array_append_new(inspecs, g->inputs[i].kind == TN_GIN_PARAMETER
                                           ? spec("parameter", g->values[v].name,
                                                  "parameter_name", g->inputs[i].target)
                                       : g->inputs[i].kind == TN_GIN_BUFFER
                                           ? spec("buffer", g->values[v].name, "buffer_name",
                                                  g->inputs[i].target)
                                           : spec("user_input", g->values[v].name, NULL, NULL));
        json_object_set(tv, g->values[v].name, json_object_get(ftv, g->values[v].name));
    }
    json_t *fouts = json_object_get(fgraph, "outputs"),
           *fospecs = json_object_get(fsig, "output_specs");
    for (int v = 0; v < g->nvalues; v++) {
        if (!saved[v])
            continue;
        json_array_append_new(ins, tensor_arg(g->values[v].name));
        json_array_append_new(inspecs, spec("user_input", g->values[v].name, NULL, NULL));
        json_object_set(tv, g->values[v].name, json_object_get(ftv, g->values[v].name));
        bool out = false; /* an output already is not returned twice */
        for (int i = 0; i < g->noutputs; i++)
            out |= g->outputs[i].value == v;
        if (out)
            continue;
        json_array_append_new(fouts, tensor_arg(g->values[v].name));
        json_array_append_new(fospecs, spec("user_output", g->values[v].name, NULL, NULL));
    }
    json_object_set_new(fgraph, "is_single_tensor_return", json_false());
    for (int k = 0; k < g->nnodes; k++) {
        if (!recompute[k])
            continue;
        json_array_append_new(nodes, node_json(fnodes, &g->nodes[k]));
        /* declared, for the ops without a Meta kernel (relu's) */
        const char *o = g->values[g->nodes[k].outs[0]].name;
        json_object_set(tv, o, json_object_get(ftv, o));
    }
    json_array_extend(nodes, b.nodes);
    for (int i = 0; i < g->ninputs; i++) {
        int v = g->inputs[i].value;
        if (g->inputs[i].kind != TN_GIN_PARAMETER || v < 0 || !b.grad[v])
            continue;
        json_array_append_new(outs, tensor_arg(b.grad[v]));
        json_array_append_new(outspecs, spec("gradient_to_parameter", b.grad[v],
                                             "parameter_name", g->inputs[i].target));
    }
    json_t *graph = json_object();
    json_object_set_new(graph, "inputs", ins);
    json_object_set_new(graph, "outputs", outs);
    json_object_set_new(graph, "nodes", nodes);
    json_object_set_new(graph, "tensor_values", tv);
    json_object_set_new(graph, "sym_int_values", json_object());
    json_t *sig = json_object();
    json_object_set_new(sig, "input_specs", inspecs);
    json_object_set_new(sig, "output_specs", outspecs);
    json_t *gm = json_object();
    json_object_set_new(gm, "graph", graph);
    json_object_set_new(gm, "signature", sig);
    broot = json_object();
    json_object_set_new(broot, "graph_module", gm);
    json_object_set(broot, "range_constraints", json_object_get(froot, "range_constraints"));
    json_object_set(broot, "schema_version", json_object_get(froot, "schema_version"));

    char *ft = json_dumps(froot, JSON_COMPACT), *bt = json_dumps(broot, JSON_COMPACT);
    char label[512];
    rc = TN_ENOMEM;
    if (ft && bt) {
        snprintf(label, sizeof label, "%s (forward)", g->label);
        *fwd = finish(ft, label);
        snprintf(label, sizeof label, "%s (backward)", g->label);
        *bwd = *fwd ? finish(bt, label) : NULL;
        rc = *fwd && *bwd ? 0 : tn_last_status();
    }
    free(ft);
    free(bt);
    if (rc < 0) {
        free(*fwd);
        free(*bwd);
        *fwd = *bwd = NULL;
    }
out:
    if (rc == TN_ENOMEM && !*fwd)
        tn_set_error(TN_ENOMEM, "%s: out of memory building the joint graph", g->label);
    for (int v = 0; b.grad && v < g->nvalues; v++)
        free(b.grad[v]);
    free(b.grad);
    free(b.needs_grad);
    free(b.read);
    free(saved);
    free(recompute);
    free(ftext);
    json_decref(froot);
    json_decref(broot);
    json_decref(b.nodes);
    json_decref(b.tv);
    return rc;
}
