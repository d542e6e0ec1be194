/*
 * compile/joint.c: AOT autograd of a graph. From a checked forward graph
 * with a loss (the signature's loss output, else the sum of every user
 * output's elements), builds the backward as graph nodes: each node's
 * derivative emitted as ops over graph values, in reverse order, the
 * gradients of a value summed where paths join and summed back to an
 * input's shape where broadcasting widened it, as the eager engine does.
 * The derivatives are derivatives.yaml's formulas, the ones eager autograd
 * compiles, read from the table tgen writes beside the Autograd kernels
 * (autograd/formula_table.h) and evaluated here into graph nodes; helpers
 * the eager engine runs as C come through their `define:` entries. Views
 * and the composite ops that derivatives.yaml has no entry for (linear,
 * matmul, conv2d, batch_norm, cross_entropy_loss, split, cat, ...) have
 * theirs below, as PyTorch differentiates them through their parts.
 * Then partitions: the forward graph returns, after its own outputs, the
 * activations the backward reads (saved), and the backward takes them as
 * inputs and returns GRADIENT_TO_PARAMETER outputs.
 *
 * Partition rule (tcompile(1) GRAD): a value the backward reads that a
 * unary pointwise node computed from a value the backward reads anyway (or
 * from a graph input) is recomputed in the backward rather than saved: one
 * pass over memory instead of one activation kept alive between the passes.
 * Not gelu: its erf costs more than the pass, and the forward writes its
 * output anyway for the linear that usually follows.
 *
 * Both graphs are built as ExportedProgram JSON and checked by reading them
 * back (tn_graph_parse, tn_graph_check), so what tcompile grad writes is
 * what tcompile show, check and run read.
 */
#include "compile/internal.h"
#include "autograd/formula_table.h"
#include "graph/internal.h"

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
    json_t *drops;       /* nodes the forward runs as an op returning what
                            the backward reads too (dropout as
                            native_dropout, its mask; max_pool2d as
                            max_pool2d_with_indices, its indices): [node
                            name, its output, the second result, the op] */
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
/* The outputs of a node of the backward computing target over ins
 * already (one evaluation of a subexpression that formulas repeat, gelu's
 * tanh). Ops that draw random numbers are never the same. */
static bool emitted(struct jb *b, const char *target, json_t *ins, int nout, const char **out)
{
    if (strstr(target, "rand") || strstr(target, "dropout") || strstr(target, "bernoulli") ||
        strstr(target, "normal") || strstr(target, "uniform"))
        return false;
    size_t i;
    json_t *n;
    json_array_foreach(b->nodes, i, n) {
        if (strcmp(json_string_value(json_object_get(n, "target")), target) ||
            !json_equal(json_object_get(n, "inputs"), ins))
            continue;
        json_t *o = json_array_get(json_object_get(n, "outputs"), 0);
        json_t *t = json_object_get(o, "as_tensor"), *ts = json_object_get(o, "as_tensors");
        if (nout == 1 && t) {
            out[0] = json_string_value(json_object_get(t, "name"));
            return true;
        }
        if (ts && json_array_size(ts) == (size_t)nout) {
            for (int k = 0; k < nout; k++)
                out[k] = json_string_value(json_object_get(json_array_get(ts, (size_t)k), "name"));
            return true;
        }
    }
    return false;
}

static void emit(struct jb *b, const char *target, json_t *ins, int nout, const char **out)
{
    if (emitted(b, target, ins, nout, out)) {
        json_decref(ins);
        return;
    }
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
static const char *sum_back(struct jb *b, const char *g, int out, int in);

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
static const char *sum_sizes(struct jb *b, const char *g, const int64_t *osizes, int ondim,
                             int in);

static const char *sum_to(struct jb *b, const char *g, int out, int in)
{
    return sum_sizes(b, g, b->g->values[out].sizes, b->g->values[out].ndim, in);
}

/* g, of sizes osizes, summed to forward value in's shape (which
 * broadcasts to osizes). */
static const char *sum_sizes(struct jb *b, const char *g, const int64_t *osizes, int ondim,
                             int in)
{
    const struct tn_graph_value *i = &b->g->values[in];
    int64_t dims[TN_MAX_DIMS];
    int nd = 0, lead = ondim - i->ndim;
    for (int d = 0; d < ondim; d++)
        if (d < lead || (i->sizes[d - lead] == 1 && osizes[d] != 1))
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

/* A matmul operand's gradient g (the output's batch sizes, the
 * operand's matrix sizes) summed back to operand `in`'s shape over the
 * batch dimensions broadcasting widened ([2, 1, S, D] @ [H, D, E]). */
static const char *matmul_sum_back(struct jb *b, const char *g, int out, int in)
{
    const struct tn_graph_value *o = &b->g->values[out], *i = &b->g->values[in];
    int64_t s[TN_MAX_DIMS];
    memcpy(s, o->sizes, (size_t)o->ndim * sizeof *s);
    s[o->ndim - 2] = i->sizes[i->ndim - 2];
    s[o->ndim - 1] = i->sizes[i->ndim - 1];
    return sum_sizes(b, g, s, o->ndim, in);
}

/* matmul of two tensors of at least 2 dimensions: ga = g @ b^T,
 * gb = a^T @ g (^T the last two dimensions swapped), summed back over
 * batch dimensions that broadcasting widened. */
static int d_matmul(struct jb *b, const struct tn_graph_node *n, const char *gy)
{
    int x = tensor_of(n, "self"), y = tensor_of(n, "other");
    if (x < 0 || y < 0 || b->g->values[x].ndim < 2 || b->g->values[y].ndim < 2)
        return tn_set_error(TN_EINVAL, "%s: node '%s': the graph derivative of matmul takes "
                                       "two tensors of 2 or more dimensions",
                            b->g->label, n->name);
    const char *mt[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        int v = i ? x : y;
        if (!wants(b, i ? y : x))
            continue;
        mt[i] = emit1(b, "torch.ops.aten.transpose.int",
                      args(3, named("self", tensor_arg(fv(b, v)), 1),
                           named("dim0", one("as_int", json_integer(-2)), 1),
                           named("dim1", one("as_int", json_integer(-1)), 1)));
    }
    if (mt[0]) {
        const char *g = emit1(b, "torch.ops.aten.matmul.default",
                              args(2, named("self", tensor_arg(gy), 1),
                                   named("other", tensor_arg(mt[0]), 1)));
        accumulate(b, x, matmul_sum_back(b, g, n->outs[0], x));
    }
    if (mt[1]) {
        const char *g = emit1(b, "torch.ops.aten.matmul.default",
                              args(2, named("self", tensor_arg(mt[1]), 1),
                                   named("other", tensor_arg(gy), 1)));
        accumulate(b, y, matmul_sum_back(b, g, n->outs[0], y));
    }
    return 0;
}

/* conv2d through tensorkit's convolution_backward_input and _weight (what
 * derivatives.yaml's convolution entry calls, so the compiled gradients are
 * the eager engine's bit for bit: convolution_backward's bool[3] mask has
 * no boxed form yet), gbias = sum(gy) over all but dimension 1. The weight
 * gradient was conv2d(x^T, gy^T) with stride and dilation swapped: a
 * convolution whose kernel is the output's whole plane, which the im2col
 * path ran 7x slower than convolution_backward's gemm over the patches. */
static json_t *conv_bw_args(struct jb *b, const char *gy, int x, int w, const int64_t *s,
                            const int64_t *p, const int64_t *d, int64_t groups)
{
    int64_t zero[2] = {0, 0};
    return args(9, named("grad_output", tensor_arg(gy), 1), named("input", tensor_arg(fv(b, x)), 1),
                named("weight", tensor_arg(fv(b, w)), 1), named("stride", ints_arg(s, 2), 1),
                named("padding", ints_arg(p, 2), 1), named("dilation", ints_arg(d, 2), 1),
                named("transposed", one("as_bool", json_false()), 1),
                named("output_padding", ints_arg(zero, 2), 1),
                named("groups", one("as_int", json_integer(groups)), 1));
}

static int d_conv(struct jb *b, const struct tn_graph_node *n, const char *gy)
{
    int x = tensor_of(n, "input"), w = tensor_of(n, "weight"), bias = tensor_of(n, "bias");
    const struct tn_graph_arg *st = arg_of(n, "stride"), *pad = arg_of(n, "padding"),
                              *dil = arg_of(n, "dilation");
    const struct tn_graph_value *xv = &b->g->values[x];
    int64_t s[2], p[2], d[2], groups = int_of(n, "groups", 1);
    if (xv->ndim != 4)
        return tn_set_error(TN_EINVAL, "%s: node '%s': the graph derivative of conv2d takes "
                                       "a batched (4-D) input",
                            b->g->label, n->name);
    for (int i = 0; i < 2; i++) {
        s[i] = st && st->n ? st->items[st->n == 1 ? 0 : i].i : 1;
        p[i] = pad && pad->n ? pad->items[pad->n == 1 ? 0 : i].i : 0;
        d[i] = dil && dil->n ? dil->items[dil->n == 1 ? 0 : i].i : 1;
    }
    if (wants(b, x))
        accumulate(b, x, emit_like(b, "torch.ops.tn.convolution_backward_input.default",
                               conv_bw_args(b, gy, x, w, s, p, d, groups), x, TN_DTYPE_UNSET));
    if (wants(b, w))
        accumulate(b, w, emit_like(b, "torch.ops.tn.convolution_backward_weight.default",
                               conv_bw_args(b, gy, x, w, s, p, d, groups), w, TN_DTYPE_UNSET));
    if (wants(b, bias)) {
        int64_t dims[3] = {0, 2, 3};
        accumulate(b, bias, emit1(b, "torch.ops.aten.sum.dim_IntList",
                                  args(2, named("self", tensor_arg(gy), 1),
                                       named("dim", ints_arg(dims, 3), 1))));
    }
    return 0;
}

static const char *bin(struct jb *b, const char *op, const char *x, const char *y)
{
    char target[64];
    snprintf(target, sizeof target, "torch.ops.aten.%s.Tensor", op);
    return emit1(b, target, args(2, named("self", tensor_arg(x), 1),
                                 named("other", tensor_arg(y), 1)));
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

static void run_as_bn(struct jb *b, const struct tn_graph_node *n, char *mean, char *invstd,
                      size_t len);

/* batch_norm in training mode (the batch's statistics, biased variance),
 * saved by the forward (run_as_bn) or recomputed from x: xh = (x - mean) * s with s = rsqrt(var + eps), then
 * gx = s * (g - mean(g) - xh * mean(g * xh)) with g = gy * weight,
 * gweight = sum(gy * xh), gbias = sum(gy), over every dimension but 1. */
static int d_batch_norm_train(struct jb *b, const struct tn_graph_node *n, const char *gy,
                              const int64_t *dims, int nd, double eps)
{
    int x = tensor_of(n, "input"), w = tensor_of(n, "weight"), bias = tensor_of(n, "bias");
    const struct tn_graph_value *xv = &b->g->values[x];
    const char *xs = fv(b, x), *c, *s;
    if (n->op && !strcmp(n->op->qualname, "aten::batch_norm") && tensor_of(n, "running_mean") < 0 &&
        tensor_of(n, "running_var") < 0 && arg_of(n, "cudnn_enabled") &&
        (xv->dtype == TN_FLOAT32 || xv->dtype == TN_FLOAT64)) {
        /* the forward's own statistics, saved (run_as_bn) */
        char mean[256], invstd[256];
        int64_t shape[TN_MAX_DIMS];
        for (int d = 0; d < xv->ndim; d++)
            shape[d] = d == 1 ? xv->sizes[1] : 1;
        run_as_bn(b, n, mean, invstd, sizeof mean);
        c = bin(b, "sub", xs, reshape(b, mean, shape, xv->ndim));
        s = reshape(b, invstd, shape, xv->ndim);
    } else {
        c = bin(b, "sub", xs, mean_keep(b, xs, dims, nd));
        s = rsqrt_eps(b, mean_keep(b, bin(b, "mul", c, c), dims, nd), eps);
    }
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

/* ------------------------------------- derivatives.yaml, emitted as ops */

/* A value a formula computes: a tensor of the backward (its name), a
 * number, a string, a list, or a tuple of tensors. */
enum jk { J_NONE, J_TENSOR, J_INT, J_FLOAT, J_BOOL, J_STR, J_INTS, J_BOOLS, J_DTYPE, J_TUPLE,
          J_TENSORS };

#define J_MAX_TUPLE 4

struct jv {
    enum jk k;
    const char *t;                 /* J_TENSOR; J_STR */
    int64_t i;                     /* J_INT, J_BOOL, J_DTYPE */
    double f;                      /* J_FLOAT */
    int64_t ints[TN_MAX_DIMS];     /* J_INTS, J_BOOLS */
    int n;
    const char *tup[J_MAX_TUPLE];  /* J_TUPLE (NULL: not computed) */
    const char *ts[TN_MAX_DIMS];   /* J_TENSORS: n names, NULL for None (index's) */
};

#define J_MAX_PARAMS 16

/* Where a formula's names come from: the forward node (its arguments, the
 * yaml op's defaults, its results and their gradients), or a define's
 * bound parameters. */
struct env {
    const struct tn_graph_node *n;
    const struct tn_op *op;         /* the op of the derivatives.yaml entry */
    const char *res[J_MAX_TUPLE];   /* its results' names (NULL: not in the graph yet) */
    const char *grads[J_MAX_TUPLE]; /* their gradients (NULL: none reached them) */
    int nres, g0;
    const bool *mask;               /* grad_input_mask */
    int nmask;
    const char *pname[J_MAX_PARAMS];
    struct jv pval[J_MAX_PARAMS];
    int np, depth;
    char pbuf[512];
};

static int ev(struct jb *b, struct env *e, int *row, struct jv *out);
static int forward_value(struct jb *b, const char *t);

/* The first row after the subtree at row r. */
static int skip_rows(int r)
{
    int kids = tn__dx_rows[r].nkid;
    r++;
    while (kids--)
        r = skip_rows(r);
    return r;
}

static json_t *jv_arg(const struct jv *v, const struct tn_arg_schema *as)
{
    switch (v->k) {
    case J_TENSOR: return tensor_arg(v->t);
    case J_INT:
        if (as->tag == TN_IV_INTLIST) /* int[1] dim given one int */
            return ints_arg(&v->i, 1);
        return as->tag == TN_IV_DOUBLE ? one("as_float", json_real((double)v->i))
                                       : one("as_int", json_integer(v->i));
    case J_FLOAT: return one("as_float", json_real(v->f));
    case J_BOOL: return one("as_bool", json_boolean(v->i));
    case J_STR: return one("as_string", json_string(v->t));
    case J_INTS:
    case J_BOOLS: return ints_arg(v->ints, v->n); /* bool[] is boxed as 0/1 ints */
    case J_DTYPE: return one("as_scalar_type", json_integer(tn_graph_scalar_type((enum tn_dtype)v->i)));
    case J_TENSORS: {
        json_t *l = json_array();
        bool opt = false;
        for (int i = 0; i < v->n; i++)
            opt |= !v->ts[i];
        for (int i = 0; i < v->n; i++)
            json_array_append_new(l, !opt      ? one("name", json_string(v->ts[i]))
                                     : v->ts[i] ? tensor_arg(v->ts[i])
                                                : one("as_none", json_true()));
        return one(opt ? "as_optional_tensors" : "as_tensors", l);
    }
    default: return one("as_none", json_true());
    }
}

/* The graph target of op ("torch.ops.aten.add.Tensor"). */
static void target_of(const struct tn_op *op, char *buf, size_t len)
{
    snprintf(buf, len, "torch.ops.%s.%s.%s", op->ns, op->name,
             op->overload[0] ? op->overload : "default");
}

/* The meta (tensor_values entry) of tensor t, NULL when not known here:
 * a forward value's, or one declare_outputs gave. */
static json_t *meta_of(struct jb *b, const char *t)
{
    json_t *m = json_object_get(b->tv, t);
    return m ? m : json_object_get(b->ftv, t);
}

/* A meta like m with sizes s[0..nd) (contiguous). */
static json_t *meta_sized(json_t *m, const int64_t *s, int nd)
{
    json_t *c = json_deep_copy(m), *sz = json_array(), *st = json_array();
    int64_t stride[TN_MAX_DIMS], acc = 1;
    for (int d = nd - 1; d >= 0; d--) {
        stride[d] = acc;
        acc *= s[d] > 1 ? s[d] : 1;
    }
    for (int d = 0; d < nd; d++) {
        json_array_append_new(sz, one("as_int", json_integer(s[d])));
        json_array_append_new(st, one("as_int", json_integer(stride[d])));
    }
    json_object_set_new(c, "sizes", sz);
    json_object_set_new(c, "strides", st);
    return c;
}

/* Declares the outputs of a call of op, which has no Meta kernel for the
 * graph check to find their shapes by: each output like the tensor
 * argument it stands for. The gradient ops (threshold_backward,
 * avg_pool2d_backward, ...) give a tensor like their `self`, `input` or
 * `output` (one the backward computed is left to declare_like);
 * convolution_backward_weight the weight's; a call returning
 * one tensor per input (native_layer_norm_backward) one like each input
 * in turn; native_layer_norm its input's and, for mean and rstd, the
 * input's with the normalized dimensions 1. */
static void declare_outputs(struct jb *b, const struct tn_op *op, const struct jv *a, int na,
                            const struct jv *out)
{
    int nt = out->k == J_TUPLE ? out->n : 1;
    const char *like[J_MAX_TUPLE] = {NULL};
    if (nt > 1 && strstr(op->name, "_backward")) {
        for (int i = 0, k = 0; i < na && k < nt; i++)
            if (op->args[i].tag == TN_IV_TENSOR && strcmp(op->args[i].name, "grad_out") &&
                strncmp(op->args[i].name, "grad", 4) && strcmp(op->args[i].name, "mean") &&
                strcmp(op->args[i].name, "rstd") && strncmp(op->args[i].name, "save_", 5) &&
                strncmp(op->args[i].name, "running_", 8))
                like[k++] = a[i].k == J_TENSOR ? a[i].t : NULL;
        /* batch norm's takes no bias: its gradient is shaped as the weight's */
        for (int k = 2; k < nt; k++)
            if (!like[k])
                like[k] = like[k - 1];
        /* group norm's without a weight: those of weight and bias are (C) */
        if (!strcmp(op->name, "native_group_norm_backward") && na > 6 && like[0] &&
            !like[1] && a[6].k == J_INT && meta_of(b, like[0])) {
            for (int k = 1; k < 3; k++)
                json_object_set_new(b->tv, out->tup[k], meta_sized(meta_of(b, like[0]),
                                                                   &a[6].i, 1));
            nt = 1;
        }
    } else if (nt == 1) {
        const char *want = strstr(op->name, "_weight") ? "weight"
                           : strstr(op->name, "_bias") ? "bias" : NULL;
        static const char *const pref[] = {"self", "input", "output"};
        for (int p = -1; p < 3 && !like[0]; p++)
            for (int i = 0; i < na; i++)
                if (a[i].k == J_TENSOR && !strcmp(op->args[i].name, p < 0 ? (want ? want : "")
                                                                        : pref[p]) &&
                    meta_of(b, a[i].t))
                    like[0] = a[i].t;
    }
    if (!strcmp(op->name, "native_layer_norm") && na > 1 && a[0].k == J_TENSOR &&
        meta_of(b, a[0].t)) {
        like[0] = a[0].t;
        int x = forward_value(b, like[0]);
        if (x >= 0 && a[1].k == J_INTS) {
            const struct tn_graph_value *v = &b->g->values[x];
            int64_t s[TN_MAX_DIMS];
            for (int d = 0; d < v->ndim; d++)
                s[d] = d >= v->ndim - a[1].n ? 1 : v->sizes[d];
            for (int k = 1; k < 3; k++)
                json_object_set_new(b->tv, out->tup[k], meta_sized(meta_of(b, like[0]), s,
                                                                   v->ndim));
        }
        nt = 1;
    }
    if (!strcmp(op->name, "native_group_norm") && na > 6 && a[0].k == J_TENSOR &&
        a[3].k == J_INT && a[6].k == J_INT && meta_of(b, a[0].t)) {
        /* its input's, and mean and rstd (N, group) */
        like[0] = a[0].t;
        int64_t s[2] = {a[3].i, a[6].i};
        for (int k = 1; k < 3; k++)
            json_object_set_new(b->tv, out->tup[k], meta_sized(meta_of(b, like[0]), s, 2));
        nt = 1;
    }
    for (int k = 0; k < nt; k++) {
        json_t *m = like[k] ? meta_of(b, like[k]) : NULL;
        if (m)
            json_object_set_new(b->tv, nt > 1 || out->k == J_TUPLE ? out->tup[k] : out->t,
                                json_deep_copy(m));
    }
}

/* Emits a call of op with the positional values a[0..na). */
static int call_op(struct jb *b, const struct tn_op *op, const struct jv *a, int na,
                   struct jv *out)
{
    if (na > op->nargs)
        return tn_set_error(TN_EINVAL, "%s takes %d arguments, a formula gives %d", op->qualname,
                            op->nargs, na);
    json_t *ins = json_array();
    for (int i = 0; i < na; i++) {
        if (a[i].k == J_TUPLE) {
            json_decref(ins);
            return tn_set_error(TN_EINVAL, "%s: a tuple cannot be an argument", op->qualname);
        }
        json_array_append_new(ins, named(op->args[i].name, jv_arg(&a[i], &op->args[i]),
                                         op->args[i].kwonly ? 2 : 1));
    }
    char target[256];
    target_of(op, target, sizeof target);
    memset(out, 0, sizeof *out);
    if (op->nrets > 1) {
        if (op->nrets > J_MAX_TUPLE) {
            json_decref(ins);
            return tn_set_error(TN_EINVAL, "%s returns too many tensors", op->qualname);
        }
        emit(b, target, ins, op->nrets, out->tup);
        out->k = J_TUPLE;
        out->n = op->nrets;
    } else {
        out->k = J_TENSOR;
        out->t = emit1(b, target, ins);
    }
    if (!op->kernels[TN_KEY_META])
        declare_outputs(b, op, a, na, out);
    return 0;
}

static int call_named(struct jb *b, const char *name, const struct jv *a, int na, struct jv *out)
{
    const struct tn_op *op = tn_op_find(name);
    return op ? call_op(b, op, a, na, out) : tn_last_status();
}

/* A default's text as a value: None, True/False, numbers, 'strings',
 * [lists] and the reduction names. */
static struct jv parse_default(const char *d)
{
    struct jv v = {.k = J_NONE};
    if (!d || !strcmp(d, "None"))
        return v;
    if (!strcmp(d, "True") || !strcmp(d, "False")) {
        v.k = J_BOOL;
        v.i = d[0] == 'T';
    } else if (d[0] == '\'' || d[0] == '"') {
        v.k = J_STR;
        v.t = d; /* unquoted by the caller */
    } else if (d[0] == '[') {
        v.k = J_INTS;
        for (const char *p = d + 1; *p && *p != ']' && v.n < TN_MAX_DIMS;) {
            char *end;
            v.ints[v.n++] = strtoll(p, &end, 10);
            p = end + strspn(end, ", ");
            if (end == p && *p != ']')
                break;
        }
    } else if (!strcmp(d, "Mean") || !strcmp(d, "Sum") || !strcmp(d, "None_")) {
        v.k = J_INT;
        v.i = d[0] == 'M' ? 1 : 2;
    } else if (strpbrk(d, ".eE")) {
        v.k = J_FLOAT;
        v.f = strtod(d, NULL);
    } else {
        v.k = J_INT;
        v.i = strtoll(d, NULL, 10);
    }
    return v;
}

/* The value of the node's argument `name` (the yaml op's default when the
 * node leaves it out). 1 when found, 0 when no such argument. */
static int node_arg(struct jb *b, struct env *e, const char *name, struct jv *out)
{
    memset(out, 0, sizeof *out);
    const struct tn_graph_arg *a = e->n ? arg_of(e->n, name) : NULL;
    if (!a && e->n && e->n->op && !strcmp(name, "correction") &&
        tn_op_arg_index(e->n->op, "unbiased") >= 0) {
        /* var.dim, std.dim: unbiased (default true) is correction 1, else 0 */
        const struct tn_graph_arg *u = arg_of(e->n, "unbiased");
        out->k = J_INT;
        out->i = !u || u->kind != TN_GARG_BOOL || u->items[0].i;
        return 1;
    }
    if (!a && e->n && e->n->op && !strcmp(e->n->op->qualname, "aten::group_norm") &&
        (!strcmp(name, "N") || !strcmp(name, "C") || !strcmp(name, "HxW") ||
         !strcmp(name, "group"))) {
        /* group_norm as native_group_norm: N, C and HxW of the input's shape
         * (HxW the product of the dims after C), group its num_groups */
        int x = tensor_of(e->n, "input");
        const struct tn_graph_arg *g = arg_of(e->n, "num_groups");
        if (x < 0 || b->g->values[x].ndim < 2 || !g || g->kind != TN_GARG_INT)
            return tn_set_error(TN_EINVAL, "group_norm: no input of 2 or more dims or no "
                                           "num_groups");
        const struct tn_graph_value *v = &b->g->values[x];
        out->k = J_INT;
        out->i = name[0] == 'N' ? v->sizes[0] : name[0] == 'C' ? v->sizes[1] : g->items[0].i;
        if (name[0] == 'H') {
            out->i = 1;
            for (int d = 2; d < v->ndim; d++)
                out->i *= v->sizes[d];
        }
        return 1;
    }
    if (!a) {
        /* the default of the node's op (layer_norm's eps), else the yaml op's */
        const struct tn_op *op = e->n ? e->n->op : NULL;
        int k = op ? tn_op_arg_index(op, name) : -1;
        if (k < 0 || !op->args[k].def) {
            op = e->op;
            k = op ? tn_op_arg_index(op, name) : -1;
        }
        if (k < 0)
            return 0;
        const char *d = op->args[k].def;
        *out = parse_default(d);
        if (out->k == J_STR) { /* 'none' -> none, kept in the env's buffer */
            snprintf(e->pbuf, sizeof e->pbuf, "%.*s", (int)strlen(d) - 2, d + 1);
            out->t = e->pbuf;
        }
        if (out->k == J_INTS && out->n == 1 && strstr(op->args[k].type, "[2]"))
            out->ints[out->n++] = out->ints[0]; /* int[2] padding=0 */
        return 1;
    }
    switch (a->kind) {
    case TN_GARG_NONE: out->k = J_NONE; break;
    case TN_GARG_TENSOR: out->k = J_TENSOR; out->t = fv(b, a->items[0].value); break;
    case TN_GARG_INT: out->k = J_INT; out->i = a->items[0].i; break;
    case TN_GARG_FLOAT: out->k = J_FLOAT; out->f = a->items[0].f; break;
    case TN_GARG_BOOL: out->k = J_BOOL; out->i = a->items[0].i; break;
    case TN_GARG_STRING: out->k = J_STR; out->t = a->s; break;
    case TN_GARG_DTYPE: out->k = J_DTYPE; out->i = a->items[0].i; break;
    case TN_GARG_INTS:
    case TN_GARG_BOOLS:
        if (a->n > TN_MAX_DIMS)
            return tn_set_error(TN_EINVAL, "argument '%s': too long a list", name);
        out->k = a->kind == TN_GARG_INTS ? J_INTS : J_BOOLS;
        out->n = a->n;
        for (int i = 0; i < a->n; i++) {
            if (a->items[i].value >= 0)
                return tn_set_error(TN_EINVAL, "argument '%s': symbolic sizes", name);
            out->ints[i] = a->items[i].i;
        }
        break;
    case TN_GARG_TENSORS:
        if (a->n > TN_MAX_DIMS)
            return tn_set_error(TN_EINVAL, "argument '%s': too long a list", name);
        out->k = J_TENSORS;
        out->n = a->n;
        for (int i = 0; i < a->n; i++)
            out->ts[i] = a->items[i].value >= 0 ? fv(b, a->items[i].value) : NULL;
        break;
    default:
        return tn_set_error(TN_EINVAL, "argument '%s': device, layout or float-list arguments "
                                       "are not taken by graph formulas yet", name);
    }
    return 1;
}

/* The index of result name n of op (result, result<k>, or the schema's
 * name of the result: "-> (Tensor values, Tensor indices)"), -1 when none. */
static int result_of(const struct env *e, const char *n)
{
    if (!strcmp(n, "result"))
        return 0;
    if (!strncmp(n, "result", 6) && n[6] >= '0' && n[6] <= '9')
        return atoi(n + 6);
    const char *r = e->op && e->op->schema ? strstr(e->op->schema, "->") : NULL;
    for (int k = 0; r && *r && k < e->nres; k++) {
        r += strspn(r, "->( ,");
        size_t len = strcspn(r, ",)");
        const char *sp = memchr(r, ' ', len); /* "Tensor values": the name after the type */
        if (sp && (size_t)(r + len - sp - 1) == strlen(n) && !strncmp(sp + 1, n, strlen(n)))
            return k;
        r += len;
    }
    return -1;
}

/* Result k of the node's op, recomputed in the backward (the yaml op
 * called with the node's arguments) when the graph's node does not give
 * it: layer_norm's mean and rstd are native_layer_norm's. */
static int result_value(struct jb *b, struct env *e, int k, struct jv *out)
{
    if (k >= e->nres)
        return tn_set_error(TN_EINVAL, "%s has no result %d", e->op->qualname, k);
    if (!e->res[k]) {
        struct jv a[TN_MAX_DIMS * 2];
        int na = 0;
        for (; na < e->op->nargs && na < (int)(sizeof a / sizeof *a); na++) {
            int rc = node_arg(b, e, e->op->args[na].name, &a[na]);
            if (rc < 0)
                return rc;
            if (!rc)
                return tn_set_error(TN_EINVAL, "recomputing %s: no argument '%s'",
                                    e->op->qualname, e->op->args[na].name);
        }
        struct jv t;
        int rc = call_op(b, e->op, a, na, &t);
        if (rc < 0)
            return rc;
        int v0 = e->n->nout > 0 ? e->n->outs[0] : -1;
        for (int i = 0; i < e->nres; i++) {
            const char *r = t.k == J_TUPLE ? t.tup[i] : t.t;
            if (!e->res[i])
                e->res[i] = r;
            /* without a Meta kernel: like the node's result (max_pool2d's
             * indices: of its shape, int64) */
            if (!json_object_get(b->tv, r) && v0 >= 0 && !e->op->kernels[TN_KEY_META]) {
                json_t *m = json_deep_copy(json_object_get(b->ftv, b->g->values[v0].name));
                if (m && strstr(e->op->name, "with_indices") && i == 1)
                    json_object_set_new(m, "dtype",
                                        json_integer(tn_graph_scalar_type(TN_INT64)));
                if (m)
                    json_object_set_new(b->tv, r, m);
            }
        }
    }
    memset(out, 0, sizeof *out);
    out->k = J_TENSOR;
    out->t = e->res[k];
    int v = forward_value(b, out->t);
    if (v >= 0)
        b->read[v] = true; /* a result the forward gives: saved */
    return 0;
}

static int ev_name(struct jb *b, struct env *e, const char *n, struct jv *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < e->np; i++)
        if (!strcmp(e->pname[i], n)) {
            *out = e->pval[i];
            return 0;
        }
    if (!strcmp(n, "None")) /* an absent Tensor? argument */
        return 0;               /* (memset: J_NONE) */
    if (!strcmp(n, "true") || !strcmp(n, "false")) {
        out->k = J_BOOL;
        out->i = n[0] == 't';
        return 0;
    }
    if (!strcmp(n, "grad") || !strncmp(n, "grads[", 6)) {
        int k = n[4] ? atoi(n + 6) : e->g0;
        if (k < 0 || k >= e->nres)
            return tn_set_error(TN_EINVAL, "%s: no result %d", n, k);
        if (!e->grads[k]) { /* zeros where no path reached the result */
            struct jv r;
            int rc = result_value(b, e, k, &r);
            if (rc < 0)
                return rc;
            e->grads[k] = emit1(b, "torch.ops.aten.fill.Scalar",
                                args(2, named("self", tensor_arg(r.t), 1),
                                     named("value", one("as_int", json_integer(0)), 1)));
        }
        out->k = J_TENSOR;
        out->t = e->grads[k];
        return 0;
    }
    if (!strcmp(n, "grad_input_mask")) {
        out->k = J_BOOLS;
        out->n = e->nmask;
        for (int i = 0; i < e->nmask; i++)
            out->ints[i] = e->mask[i];
        return 0;
    }
    int rc = e->op && tn_op_arg_index(e->op, n) < 0 ? result_of(e, n) : -1;
    if (rc >= 0)
        return result_value(b, e, rc, out);
    rc = node_arg(b, e, n, out);
    if (rc < 0)
        return rc;
    if (!rc)
        return tn_set_error(TN_EINVAL, "'%s' is not grad, a result or an argument", n);
    return 0;
}

/* The graph value a formula's tensor names (a forward value), -1 when
 * it is one the backward computed. */
static int forward_value(struct jb *b, const char *t)
{
    return t ? tn_graph_find_value(b->g, t) : -1;
}

static int num_op(char op, const struct jv *x, const struct jv *y, struct jv *out)
{
    memset(out, 0, sizeof *out);
    bool fl = x->k == J_FLOAT || y->k == J_FLOAT || op == '/';
    double a = x->k == J_FLOAT ? x->f : (double)x->i, c = y->k == J_FLOAT ? y->f : (double)y->i;
    if (fl) {
        out->k = J_FLOAT;
        out->f = op == '+' ? a + c : op == '-' ? a - c : op == '*' ? a * c : a / c;
    } else {
        out->k = J_INT;
        out->i = op == '+' ? x->i + y->i : op == '-' ? x->i - y->i : x->i * y->i;
    }
    return 0;
}

static bool is_num(const struct jv *v) { return v->k == J_INT || v->k == J_FLOAT || v->k == J_BOOL; }

static json_t *num_arg(const struct jv *v)
{
    return v->k == J_FLOAT ? one("as_float", json_real(v->f)) : one("as_int", json_integer(v->i));
}

/* x op y over tensors and numbers, as ops (add.Tensor, mul.Scalar, ...). */
static int bin_op(struct jb *b, char op, const struct jv *x, const struct jv *y, struct jv *out)
{
    static const char *const names[] = {"add", "sub", "mul", "div"};
    const char *nm = names[op == '+' ? 0 : op == '-' ? 1 : op == '*' ? 2 : 3];
    char target[64];
    if (is_num(x) && is_num(y))
        return num_op(op, x, y, out);
    memset(out, 0, sizeof *out);
    out->k = J_TENSOR;
    if (x->k == J_TENSOR && y->k == J_TENSOR) {
        out->t = bin(b, nm, x->t, y->t);
        return 0;
    }
    if (x->k == J_TENSOR && is_num(y)) {
        double c = y->k == J_FLOAT ? y->f : (double)y->i;
        if ((c == 1 && (op == '*' || op == '/')) || (c == 0 && (op == '+' || op == '-'))) {
            out->t = x->t; /* grad * 1: add.Tensor's alpha */
            return 0;
        }
        snprintf(target, sizeof target, "torch.ops.aten.%s.Scalar", nm);
        out->t = emit1(b, target, args(2, named("self", tensor_arg(x->t), 1),
                                       named("other", num_arg(y), 1)));
        return 0;
    }
    if (is_num(x) && y->k == J_TENSOR) {
        if (op == '+' || op == '*')
            return bin_op(b, op, y, x, out);
        if (op == '-') { /* x - y as -y + x */
            struct jv ny = {.k = J_TENSOR};
            ny.t = emit1(b, "torch.ops.aten.neg.default", args(1, named("self", tensor_arg(y->t), 1)));
            return bin_op(b, '+', &ny, x, out);
        }
        const char *r = emit1(b, "torch.ops.aten.reciprocal.default",
                              args(1, named("self", tensor_arg(y->t), 1)));
        struct jv rv = {.k = J_TENSOR, .t = r};
        return bin_op(b, '*', &rv, x, out);
    }
    return tn_set_error(TN_EINVAL, "'%c' of values that are not tensors or numbers", op);
}

/* A define of derivatives.yaml for `name` whose string parameters match
 * the call's arguments; binds its parameters into d. NULL when none. */
static const struct tn__dentry *find_define(const char *name, const struct jv *a, int na,
                                            struct env *d)
{
    for (int i = 0; i < tn__dx_nentries; i++) {
        const struct tn__dentry *de = &tn__dx_entries[i];
        if (!de->params || strcmp(de->name, name))
            continue;
        d->np = 0;
        const char *p = de->params;
        bool ok = true;
        while (ok && *p && d->np < J_MAX_PARAMS) {
            p += strspn(p, ", ");
            size_t len = strcspn(p, ",=");
            char *nm = &d->pbuf[p - de->params];
            if ((size_t)(p - de->params) + len >= sizeof d->pbuf)
                return NULL;
            memcpy(nm, p, len);
            nm[len] = 0;
            p += len;
            int k = d->np;
            if (*p == '=' && p[1] == '\'') { /* name='text': only that string */
                const char *v = p + 2, *end = strchr(v, '\'');
                ok = k < na && a[k].k == J_STR && end && strlen(a[k].t) == (size_t)(end - v) &&
                     !strncmp(a[k].t, v, (size_t)(end - v));
                if (k < na && a[k].k == J_NONE && end && !strncmp(v, "none", 4))
                    ok = true; /* None: the default */
                p = end ? end + 1 : p + strlen(p);
            } else if (!strncmp(p, "=true", 5) || !strncmp(p, "=false", 6)) {
                ok = k < na && a[k].k == J_BOOL && a[k].i == (p[1] == 't');
                p += p[1] == 't' ? 5 : 6;
            } else if (!strncmp(p, "=None", 5)) { /* name=None: only an absent value */
                ok = k < na && a[k].k == J_NONE;
                p += 5;
            } else if (*p == '=') { /* name=number: only that integer (or float) */
                char *end;
                double want = strtod(p + 1, &end);
                ok = k < na && ((a[k].k == J_INT && (double)a[k].i == want) ||
                                (a[k].k == J_FLOAT && a[k].f == want));
                p = end;
            }
            d->pname[k] = nm;
            d->pval[k] = k < na ? a[k] : (struct jv){.k = J_NONE};
            d->np++;
        }
        if (ok && d->np == na)
            return de;
    }
    return NULL;
}

/* The lib/core functions formulas call (views), as graph ops. 1 when
 * name is none of them. */
static int core_fn(struct jb *b, const char *name, const struct jv *a, int na, struct jv *out)
{
    static const struct { const char *name, *target, *args[3]; } fns[] = {
        {"t", "torch.ops.aten.t.default", {"self"}},
        {"transpose", "torch.ops.aten.transpose.int", {"self", "dim0", "dim1"}},
        {"expand", "torch.ops.aten.expand.default", {"self", "size"}},
        {"reshape", "torch.ops.aten.reshape.default", {"self", "shape"}},
        {"view", "torch.ops.aten.view.default", {"self", "size"}},
        {"permute", "torch.ops.aten.permute.default", {"self", "dims"}},
        {"flatten", "torch.ops.aten.flatten.using_ints", {"self", "start_dim", "end_dim"}},
        {"unsqueeze", "torch.ops.aten.unsqueeze.default", {"self", "dim"}},
    };
    for (size_t i = 0; i < sizeof fns / sizeof *fns; i++) {
        if (strcmp(name, fns[i].name))
            continue;
        int want = 0;
        while (want < 3 && fns[i].args[want])
            want++;
        if (na != want || a[0].k != J_TENSOR)
            return tn_set_error(TN_EINVAL, "%s takes %d arguments, the first a tensor", name, want);
        json_t *ins = json_array();
        static const struct tn_arg_schema as = {.tag = TN_IV_INT};
        for (int k = 0; k < na; k++)
            json_array_append_new(ins, named(fns[i].args[k], jv_arg(&a[k], &as), 1));
        memset(out, 0, sizeof *out);
        out->k = J_TENSOR;
        out->t = emit1(b, fns[i].target, ins);
        return 0;
    }
    return 1;
}

/* The shape functions defines use, evaluated while the graph is built:
 * _kept_sizes(sizes, dim) is sizes with the dimensions dim (all when None
 * or absent) made 1, the shape of a reduction with keepdim;
 * _reduced_count(sizes, dim) the number of elements each result of that
 * reduction summed. */
static int shape_fn(const char *name, const struct jv *a, int na, struct jv *out)
{
    if (na < 1 || a[0].k != J_INTS ||
        (na > 1 && a[1].k != J_INTS && a[1].k != J_INT && a[1].k != J_NONE))
        return tn_set_error(TN_EINVAL, "%s takes sizes and optional dims", name);
    struct jv two[2];
    if (na > 1 && a[1].k == J_INT) { /* one dimension */
        two[0] = a[0];
        memset(&two[1], 0, sizeof two[1]);
        two[1].k = J_INTS;
        two[1].n = 1;
        two[1].ints[0] = a[1].i;
        a = two;
    }
    bool red[TN_MAX_DIMS] = {false};
    int nd = a[0].n;
    bool all = na < 2 || a[1].k == J_NONE || a[1].n == 0;
    for (int i = 0; !all && i < a[1].n; i++) {
        int64_t d = a[1].ints[i] < 0 ? a[1].ints[i] + nd : a[1].ints[i];
        if (d < 0 || d >= nd)
            return tn_set_error(TN_EINVAL, "%s: dimension %lld out of range", name,
                                (long long)a[1].ints[i]);
        red[d] = true;
    }
    memset(out, 0, sizeof *out);
    int64_t count = 1;
    for (int d = 0; d < nd; d++) {
        bool r = all || red[d];
        count *= r ? a[0].ints[d] : 1;
        out->ints[d] = r ? 1 : a[0].ints[d];
    }
    if (name[1] == 'k') {
        out->k = J_INTS;
        out->n = nd;
    } else {
        out->k = J_INT;
        out->i = count;
    }
    return 0;
}

/* More shape functions: _dim_sized(sizes, dim, k) is sizes with dimension
 * dim made k; _repeat_split(repeats, sizes) the shape that sees repeat's
 * result as (r, s) per repeated dimension (r alone per dimension repeat
 * added in front) and _repeat_summed(repeats, sizes) the positions of its
 * r's, which repeat's backward sums. */
static int shape_fn2(const char *name, const struct jv *a, int na, struct jv *out)
{
    memset(out, 0, sizeof *out);
    out->k = J_INTS;
    if (!strcmp(name, "_dim_sized")) {
        if (na != 3 || a[0].k != J_INTS || a[1].k != J_INT || a[2].k != J_INT)
            return tn_set_error(TN_EINVAL, "%s takes sizes, a dim and a size", name);
        int nd = a[0].n;
        int64_t d = a[1].i < 0 ? a[1].i + nd : a[1].i;
        if (d < 0 || d >= nd)
            return tn_set_error(TN_EINVAL, "%s: dimension %lld out of range", name,
                                (long long)a[1].i);
        *out = a[0];
        out->ints[d] = a[2].i;
        return 0;
    }
    if (!strcmp(name, "_flat_sizes")) { /* _flat_sizes(sizes): [their product] */
        if (na != 1 || a[0].k != J_INTS)
            return tn_set_error(TN_EINVAL, "%s takes sizes", name);
        out->n = 1;
        out->ints[0] = 1;
        for (int d = 0; d < a[0].n; d++)
            out->ints[0] *= a[0].ints[d];
        return 0;
    }
    if (!strcmp(name, "_group_sizes")) { /* _group_sizes(sizes, N, group): [N, group, rest] */
        if (na != 3 || a[0].k != J_INTS || a[1].k != J_INT || a[2].k != J_INT || a[1].i <= 0 ||
            a[2].i <= 0)
            return tn_set_error(TN_EINVAL, "%s takes sizes, N and a group count", name);
        int64_t n = 1;
        for (int d = 0; d < a[0].n; d++)
            n *= a[0].ints[d];
        out->n = 3;
        out->ints[0] = a[1].i;
        out->ints[1] = a[2].i;
        out->ints[2] = n / (a[1].i * a[2].i);
        return 0;
    }
    if (!strcmp(name, "_last_sizes")) { /* _last_sizes(sizes, n): the last n */
        if (na != 2 || a[0].k != J_INTS || a[1].k != J_INT || a[1].i < 0 || a[1].i > a[0].n)
            return tn_set_error(TN_EINVAL, "%s takes sizes and a count no larger", name);
        out->n = (int)a[1].i;
        memcpy(out->ints, a[0].ints + a[0].n - out->n, sizeof *out->ints * (size_t)out->n);
        return 0;
    }
    if (na != 2 || a[0].k != J_INTS || a[1].k != J_INTS || a[0].n < a[1].n)
        return tn_set_error(TN_EINVAL, "%s takes repeats and sizes, no more sizes than repeats",
                            name);
    int lead = a[0].n - a[1].n, n = 0, m = 0;
    int64_t split[2 * TN_MAX_DIMS], summed[TN_MAX_DIMS];
    for (int d = 0; d < a[0].n; d++) {
        if (d < lead || a[0].ints[d] != 1) {
            summed[m++] = n;
            split[n++] = a[0].ints[d];
        }
        if (d >= lead)
            split[n++] = a[1].ints[d - lead];
    }
    if (n > TN_MAX_DIMS)
        return tn_set_error(TN_EINVAL, "%s: more than %d dimensions", name, TN_MAX_DIMS);
    bool sum = name[9] == 'u'; /* _repeat_summed */
    out->n = sum ? m : n;
    memcpy(out->ints, sum ? summed : split, sizeof *out->ints * (size_t)out->n);
    return 0;
}

static int ev_call(struct jb *b, struct env *e, const struct tn__dx *x, int *row, struct jv *out)
{
    struct jv a[TN_MAX_DIMS * 2];
    int na = x->nkid;
    if (na > (int)(sizeof a / sizeof *a))
        return tn_set_error(TN_EINVAL, "%s: too many arguments", x->text);
    if (!strcmp(x->text, "sizes")) { /* x.sizes(): a forward value's shape */
        /* the shape is a constant: the tensor itself is not read */
        const struct tn__dx *k = &tn__dx_rows[*row];
        *row = skip_rows(*row);
        int v = -1;
        for (int i = 0; k->kind == TN__DX_ID && i < e->np; i++)
            if (!strcmp(e->pname[i], k->text) && e->pval[i].k == J_TENSOR)
                v = forward_value(b, e->pval[i].t);
        if (v < 0 && k->kind == TN__DX_ID && e->n)
            v = tensor_of(e->n, k->text);
        if (v < 0)
            return tn_set_error(TN_EINVAL, "sizes() of what is not a forward value");
        memset(out, 0, sizeof *out);
        out->k = J_INTS;
        out->n = b->g->values[v].ndim;
        memcpy(out->ints, b->g->values[v].sizes, sizeof out->ints[0] * (size_t)out->n);
        return 0;
    }
    for (int i = 0; i < na; i++) {
        int rc = ev(b, e, row, &a[i]);
        if (rc < 0)
            return rc;
    }
    if (!strcmp(x->text, "scalar_type")) {
        int v = forward_value(b, a[0].t);
        if (v < 0)
            return tn_set_error(TN_EINVAL, "scalar_type() of what is not a forward value");
        memset(out, 0, sizeof *out);
        out->k = J_DTYPE;
        out->i = b->g->values[v].dtype;
        return 0;
    }
    if (!strcmp(x->text, "_result")) { /* _result(tuple op's call, k): its result k */
        if (na != 2 || a[0].k != J_TUPLE || a[1].k != J_INT || a[1].i < 0 || a[1].i >= a[0].n)
            return tn_set_error(TN_EINVAL, "_result takes a call returning several tensors "
                                           "and the index of one");
        const char *t = a[0].tup[a[1].i];
        memset(out, 0, sizeof *out);
        out->k = J_TENSOR;
        out->t = t;
        return 0;
    }
    if (!strcmp(x->text, "_bools")) { /* _bools(true, false, ...): a bool[] */
        memset(out, 0, sizeof *out);
        out->k = J_BOOLS;
        for (int i = 0; i < na; i++) {
            if (a[i].k != J_BOOL)
                return tn_set_error(TN_EINVAL, "_bools takes true and false only");
            out->ints[out->n++] = a[i].i;
        }
        return 0;
    }
    if (strstr(x->text, "::"))
        return call_named(b, x->text, a, na, out);
    if (!strcmp(x->text, "_kept_sizes") || !strcmp(x->text, "_reduced_count"))
        return shape_fn(x->text, a, na, out);
    if (!strcmp(x->text, "_dim_sized") || !strcmp(x->text, "_repeat_split") ||
        !strcmp(x->text, "_repeat_summed") || !strcmp(x->text, "_last_sizes") ||
        !strcmp(x->text, "_flat_sizes") || !strcmp(x->text, "_group_sizes"))
        return shape_fn2(x->text, a, na, out);
    struct env *d = calloc(1, sizeof *d);
    if (!d)
        return tn_set_error(TN_ENOMEM, "out of memory");
    const struct tn__dentry *de = find_define(x->text, a, na, d);
    int rc;
    if (de) {
        d->depth = e->depth + 1;
        int r = tn__dx_formulas[de->formula].root;
        rc = d->depth > 16 ? tn_set_error(TN_EINVAL, "%s: defines nested too deeply", x->text)
                           : ev(b, d, &r, out);
    } else if ((rc = core_fn(b, x->text, a, na, out)) != 1) {
        /* done: a lib/core function */
    } else {
        const struct tn_op *op = tn_op_find(x->text);
        tn_clear_error();
        rc = op ? call_op(b, op, a, na, out)
                : tn_set_error(TN_EINVAL, "the helper %s has no op-level definition "
                                          "(a define: entry of derivatives.yaml) yet", x->text);
    }
    free(d);
    return rc;
}

/* Evaluates the subtree at *row into out, emitting its ops. */
static int ev(struct jb *b, struct env *e, int *row, struct jv *out)
{
    const struct tn__dx *x = &tn__dx_rows[(*row)++];
    memset(out, 0, sizeof *out);
    switch (x->kind) {
    case TN__DX_NUM:
        if (strpbrk(x->text, ".eE")) {
            out->k = J_FLOAT;
            out->f = strtod(x->text, NULL);
        } else {
            out->k = J_INT;
            out->i = strtoll(x->text, NULL, 10);
        }
        return 0;
    case TN__DX_STR:
        out->k = J_STR;
        out->t = x->text;
        return 0;
    case TN__DX_ID: return ev_name(b, e, x->text, out);
    case TN__DX_CALL: return ev_call(b, e, x, row, out);
    case TN__DX_NEG: {
        struct jv k;
        int rc = ev(b, e, row, &k);
        if (rc < 0)
            return rc;
        if (is_num(&k)) {
            struct jv z = {.k = J_INT};
            return num_op('-', &z, &k, out);
        }
        if (k.k == J_INTS) { /* roll's shifts negated */
            *out = k;
            for (int i = 0; i < k.n; i++)
                out->ints[i] = -k.ints[i];
            return 0;
        }
        if (k.k != J_TENSOR)
            return tn_set_error(TN_EINVAL, "'-' of what is not a tensor or a number");
        out->k = J_TENSOR;
        out->t = emit1(b, "torch.ops.aten.neg.default", args(1, named("self", tensor_arg(k.t), 1)));
        return 0;
    }
    default: {
        struct jv l, r;
        int rc = ev(b, e, row, &l);
        if (rc >= 0)
            rc = ev(b, e, row, &r);
        return rc < 0 ? rc : bin_op(b, x->op, &l, &r, out);
    }
    }
}

/* g (of the shape of value out) summed back to value in's shape where
 * broadcasting widened it: only when in's shape broadcasts to out's and
 * holds fewer elements (a gradient of another shape, mm's, is left). */
static const char *sum_back(struct jb *b, const char *g, int out, int in)
{
    const struct tn_graph_value *o = &b->g->values[out], *i = &b->g->values[in];
    int lead = o->ndim - i->ndim;
    int64_t no = 1, ni = 1;
    if (lead < 0)
        return g;
    for (int d = 0; d < o->ndim; d++) {
        no *= o->sizes[d];
        if (d >= lead) {
            ni *= i->sizes[d - lead];
            if (i->sizes[d - lead] != 1 && i->sizes[d - lead] != o->sizes[d])
                return g;
        }
    }
    return ni < no ? sum_to(b, g, out, in) : g;
}

/* A formula's result t for input v, computed by an op whose Meta kernel
 * is missing or is a composite that cannot run on meta tensors (a
 * gradient op, index_backward): declared like v, the shape a gradient
 * has. */
static void declare_like(struct jb *b, const char *t, int v)
{
    if (json_object_get(b->tv, t) || forward_value(b, t) >= 0)
        return;
    json_t *n = json_array_get(b->nodes, json_array_size(b->nodes) - 1);
    const char *target = json_string_value(json_object_get(n, "target"));
    if (!target || strcmp(json_string_value(json_object_get(n, "name")), t) ||
        strncmp(target, "torch.ops.", 10))
        return;
    char q[256];
    snprintf(q, sizeof q, "%s", target + 10);
    char *dot = strchr(q, '.');
    if (!dot)
        return;
    *dot = 0;
    char *ov = strchr(dot + 1, '.');
    if (!ov)
        return;
    *ov = 0;
    char name[300];
    snprintf(name, sizeof name, "%s::%s%s%s", q, dot + 1, strcmp(ov + 1, "default") ? "." : "",
             strcmp(ov + 1, "default") ? ov + 1 : "");
    const struct tn_op *op = tn_op_find(name);
    tn_clear_error();
    if (op && (!op->kernels[TN_KEY_META] || strstr(op->name, "_backward")))
        json_object_set_new(b->tv, t, json_deep_copy(json_object_get(b->ftv, b->g->values[v].name)));
}

/* A formula's result g for input in, when its declared shape is larger
 * than in's and in's broadcasts to it (mse_loss_backward's for a 0-d
 * grad_output: the engine sums such a gradient down, as PyTorch's
 * validate_outputs): summed to in's shape. Else g. */
static const char *sum_declared(struct jb *b, const char *g, int in)
{
    json_t *m = meta_of(b, g), *sz = m ? json_object_get(m, "sizes") : NULL;
    const struct tn_graph_value *i = &b->g->values[in];
    int n = (int)json_array_size(sz), lead = n - i->ndim;
    if (!json_is_array(sz) || n > TN_MAX_DIMS || lead < 0)
        return g;
    int64_t os[TN_MAX_DIMS], no = 1, ni = 1;
    for (int d = 0; d < n; d++) {
        json_t *v = json_object_get(json_array_get(sz, (size_t)d), "as_int");
        if (!json_is_integer(v))
            return g; /* symbolic */
        os[d] = json_integer_value(v);
        no *= os[d];
        if (d >= lead) {
            ni *= i->sizes[d - lead];
            if (i->sizes[d - lead] != 1 && i->sizes[d - lead] != os[d])
                return g;
        }
    }
    return ni < no ? sum_sizes(b, g, os, n, in) : g;
}

static bool pointwise(const struct tn_op *op)
{
    for (int i = 0; i < op->ntags; i++)
        if (!strcmp(op->tags[i], "pointwise"))
            return true;
    return false;
}

/* The derivatives.yaml entry of op qualname, NULL when none. */
static const struct tn__dentry *entry_of(const char *qualname)
{
    for (int i = 0; i < tn__dx_nentries; i++)
        if (!tn__dx_entries[i].params && !strcmp(tn__dx_entries[i].name, qualname))
            return &tn__dx_entries[i];
    return NULL;
}

/* Composite ops of graphs that stand for an op of derivatives.yaml, whose
 * results the node gives the first of (the others recomputed). */
static const struct { const char *graph, *yaml; } stands_for[] = {
    {"aten::softmax.int", "aten::_softmax"},
    {"aten::log_softmax.int", "aten::_log_softmax"},
    {"aten::layer_norm", "aten::native_layer_norm"},
    /* N, C, HxW and group read from the input's shape and num_groups (node_arg) */
    {"aten::group_norm", "aten::native_group_norm"},
    {"aten::max_pool2d", "aten::max_pool2d_with_indices"},
    {"aten::scaled_dot_product_attention", "aten::_tn_attention"},
    /* their `unbiased` read as correction 1 or 0 (node_arg) */
    {"aten::var.dim", "aten::var.correction"},
    {"aten::std.dim", "aten::std.correction"},
    {"aten::var", "aten::var.correction"},
    {"aten::std", "aten::std.correction"},
};

/* Node n's derivative from the formulas of derivatives.yaml. 1 when the
 * op has none, 0 done, < 0 an error. */
static int derive_yaml(struct jb *b, const struct tn_graph_node *n)
{
    const struct tn_op *op = n->op;
    if (!op)
        return 1;
    const char *q = op->qualname;
    for (size_t i = 0; i < sizeof stands_for / sizeof *stands_for; i++)
        if (!strcmp(q, stands_for[i].graph))
            q = stands_for[i].yaml;
    const struct tn__dentry *de = entry_of(q);
    if (!de)
        return 1;
    struct env *e = calloc(1, sizeof *e);
    if (!e)
        return tn_set_error(TN_ENOMEM, "out of memory");
    e->n = n;
    e->op = q == op->qualname ? op : tn_op_find(q);
    int rc = e->op ? 0 : tn_last_status();
    e->nres = e->op ? e->op->nrets : 0;
    if (e->nres > J_MAX_TUPLE)
        rc = tn_set_error(TN_EINVAL, "%s returns too many tensors", q);
    for (int k = 0; rc >= 0 && k < e->nres && k < n->nout; k++)
        if (n->outs[k] >= 0) {
            e->grads[k] = b->grad[n->outs[k]];
            /* the results the node gives, read from the forward on use */
            e->res[k] = b->g->values[n->outs[k]].name;
        }
    for (int f = 0; rc >= 0 && f < de->nf; f++) {
        const struct tn__dformula *fm = &tn__dx_formulas[de->formula + f];
        int vals[J_MAX_TUPLE], nin = 0;
        bool mask[J_MAX_TUPLE], any = false;
        for (const char *p = fm->inputs; *p && nin < J_MAX_TUPLE;) {
            p += strspn(p, ", ");
            size_t len = strcspn(p, ", ");
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)len, p);
            p += len;
            vals[nin] = tensor_of(n, name);
            mask[nin] = wants(b, vals[nin]);
            any |= mask[nin++];
        }
        if (!any)
            continue;
        /* grad_input_mask: every input that is a tensor, for a graph value
         * cannot be an undefined tensor (what a false entry gives) */
        bool given[J_MAX_TUPLE];
        for (int k = 0; k < nin; k++)
            given[k] = vals[k] >= 0 && tn_dtype_is_floating(b->g->values[vals[k]].dtype);
        e->mask = given;
        e->nmask = nin;
        int row = fm->root;
        struct jv g;
        rc = ev(b, e, &row, &g);
        if (rc < 0)
            break;
        for (int k = 0; k < nin; k++) {
            const char *t = g.k == J_TUPLE && k < g.n ? g.tup[k] : g.k == J_TENSOR ? g.t : NULL;
            if (!mask[k])
                continue;
            if (!t) {
                rc = tn_set_error(TN_EINVAL, "the formula of %s for '%s' gives no tensor", q,
                                  fm->inputs);
                break;
            }
            declare_like(b, t, vals[k]);
            /* a pointwise op's inputs broadcast to its result; so does
             * a formula giving the output's gradient back (addmm's self:
             * _scale(grad, 1), whose shape is not declared yet) */
            bool like_out = pointwise(e->op) || (e->grads[0] && !strcmp(t, e->grads[0]));
            accumulate(b, vals[k], like_out ? sum_back(b, t, n->outs[0], vals[k])
                                            : sum_declared(b, t, vals[k]));
        }
    }
    free(e);
    if (rc < 0)
        return tn_set_error(tn_last_status(), "%s: node '%s': the derivative of %s: %s",
                            b->g->label, n->name, q, tn_last_error());
    return 0;
}

/* zeros of forward value v's shape and dtype */
static const char *zeros_of(struct jb *b, int v)
{
    const struct tn_graph_value *x = &b->g->values[v];
    return emit1(b, "torch.ops.aten.zeros.default",
                 args(2, named("size", ints_arg(x->sizes, x->ndim), 1),
                      named("dtype", one("as_scalar_type",
                                         json_integer(tn_graph_scalar_type(x->dtype))), 2)));
}

/* select.int and slice.Tensor (views PyTorch differentiates with
 * select_backward and slice_backward): g put back into zeros of x's shape
 * by slice_scatter, at the index (g unsqueezed there) or over the slice,
 * its bounds made what PyTorch makes them (negative from the end, clamped
 * to the size). */
static int d_select_slice(struct jb *b, const struct tn_graph_node *n, const char *gy, bool sel)
{
    int x = tensor_of(n, "self");
    if (!wants(b, x))
        return 0;
    const struct tn_graph_value *v = &b->g->values[x];
    int64_t dim = int_of(n, "dim", 0), start, end, step = 1;
    if (dim < 0)
        dim += v->ndim;
    if (dim < 0 || dim >= v->ndim)
        return tn_set_error(TN_EINVAL, "%s: node '%s': dimension out of range", b->g->label,
                            n->name);
    int64_t size = v->sizes[dim];
    if (sel) {
        start = int_of(n, "index", 0);
        start += start < 0 ? size : 0;
        if (start < 0 || start >= size)
            return tn_set_error(TN_EINVAL, "%s: node '%s': index out of range", b->g->label,
                                n->name);
        end = start + 1;
        gy = emit1(b, "torch.ops.aten.unsqueeze.default",
                   args(2, named("self", tensor_arg(gy), 1),
                        named("dim", one("as_int", json_integer(dim)), 1)));
    } else {
        start = int_of(n, "start", 0);
        end = int_of(n, "end", INT64_MAX);
        step = int_of(n, "step", 1);
        start += start < 0 ? size : 0;
        end += end < 0 ? size : 0;
        start = start < 0 ? 0 : start > size ? size : start;
        end = end < start ? start : end > size ? size : end;
    }
    const char *z = zeros_of(b, x);
    accumulate(b, x, emit_like(b, "torch.ops.aten.slice_scatter.default",
                               args(6, named("self", tensor_arg(z), 1),
                                    named("src", tensor_arg(gy), 1),
                                    named("dim", one("as_int", json_integer(dim)), 1),
                                    named("start", one("as_int", json_integer(start)), 1),
                                    named("end", one("as_int", json_integer(end)), 1),
                                    named("step", one("as_int", json_integer(step)), 1)),
                               x, TN_DTYPE_UNSET));
    return 0;
}

/* The derivatives of views and of composite ops that derivatives.yaml
 * has no entry for (PyTorch's neither: they are CompositeImplicitAutograd,
 * differentiated through what they decompose to). 1 when n is none. */
static int derive_structural(struct jb *b, const struct tn_graph_node *n, const char *gy)
{
    static const char *const reshapes[] = {
        "view.default", "reshape.default", "_unsafe_view.default", "flatten.using_ints",
        "unflatten.int", "unsqueeze.default", "squeeze.dim", "squeeze.dims", "squeeze.default",
        "clone.default", "contiguous.default", "alias.default", "detach.default"};
    const char *t = n->target;
    if (strncmp(t, "torch.ops.aten.", 15))
        return 1;
    t += 15;
    int x = tensor_of(n, "self");
    for (size_t i = 0; i < sizeof reshapes / sizeof *reshapes; i++)
        if (!strcmp(t, reshapes[i])) {
            if (wants(b, x))
                accumulate(b, x, reshape(b, gy, b->g->values[x].sizes, b->g->values[x].ndim));
            return 0;
        }
    if (!strcmp(t, "linear.default")) {
        d_linear(b, n, gy);
        return 0;
    }
    if (!strcmp(t, "conv2d.default"))
        return d_conv(b, n, gy);
    if (!strcmp(t, "batch_norm.default"))
        return d_batch_norm_eval(b, n, gy);
    if (!strcmp(t, "cross_entropy_loss.default"))
        return d_cross_entropy(b, n, gy);
    if (!strcmp(t, "t.default")) {
        if (wants(b, x))
            accumulate(b, x, tr(b, gy));
        return 0;
    }
    if (!strcmp(t, "transpose.int")) {
        if (wants(b, x))
            accumulate(b, x, emit1(b, "torch.ops.aten.transpose.int",
                                   args(3, named("self", tensor_arg(gy), 1),
                                        named("dim0", one("as_int", json_integer(int_of(n, "dim0", 0))), 1),
                                        named("dim1", one("as_int", json_integer(int_of(n, "dim1", 1))), 1))));
        return 0;
    }
    if (!strcmp(t, "permute.default")) {
        const struct tn_graph_arg *d = arg_of(n, "dims");
        int nd = x >= 0 ? b->g->values[x].ndim : 0;
        int64_t inv[TN_MAX_DIMS];
        if (!d || d->n != nd)
            return tn_set_error(TN_EINVAL, "%s: node '%s': permute without its dims",
                                b->g->label, n->name);
        for (int i = 0; i < nd; i++)
            inv[(d->items[i].i + nd) % nd] = i;
        if (wants(b, x))
            accumulate(b, x, emit1(b, "torch.ops.aten.permute.default",
                                   args(2, named("self", tensor_arg(gy), 1),
                                        named("dims", ints_arg(inv, nd), 1))));
        return 0;
    }
    if (!strcmp(t, "expand.default")) {
        if (wants(b, x))
            accumulate(b, x, sum_to(b, gy, n->outs[0], x));
        return 0;
    }
    if (!strcmp(t, "matmul.default"))
        return d_matmul(b, n, gy);
    if (!strcmp(t, "select.int") || !strcmp(t, "slice.Tensor"))
        return d_select_slice(b, n, gy, !strcmp(t, "select.int"));
    return 1;
}

/* The gradients of n's outputs as an as_tensors list, zeros for an
 * output no path reached; NULL with an error. */
static json_t *piece_grads(struct jb *b, const struct tn_graph_node *n)
{
    json_t *l = json_array();
    for (int k = 0; k < n->nout; k++) {
        int o = n->outs[k];
        const char *g = o >= 0 ? b->grad[o] : NULL;
        if (!g) {
            if (o < 0) {
                json_decref(l);
                tn_set_error(TN_EINVAL, "%s: node '%s': a piece without a name", b->g->label,
                             n->name);
                return NULL;
            }
            g = zeros_of(b, o);
        }
        json_array_append_new(l, one("name", json_string(g)));
    }
    return one("as_tensors", l);
}

/* split: the pieces' gradients concatenated back; unbind: stacked back. */
static int derive_pieces(struct jb *b, const struct tn_graph_node *n, bool stack)
{
    int x = tensor_of(n, "self");
    if (!wants(b, x))
        return 0;
    json_t *l = piece_grads(b, n);
    if (!l)
        return tn_last_status();
    accumulate(b, x, emit_like(b, stack ? "torch.ops.aten.stack.default"
                                        : "torch.ops.aten.cat.default",
                               args(2, named("tensors", l, 1),
                                    named("dim", one("as_int", json_integer(int_of(n, "dim", 0))),
                                          1)),
                               x, TN_DTYPE_UNSET));
    return 0;
}

/* cat: each input's gradient the slice of g it filled; stack: the
 * select of g at its index. */
static int derive_cat_stack(struct jb *b, const struct tn_graph_node *n, bool stack)
{
    const struct tn_graph_arg *l = arg_of(n, "tensors");
    const char *gy = b->grad[n->outs[0]];
    int64_t dim = int_of(n, "dim", 0), at = 0;
    int nd = b->g->values[n->outs[0]].ndim;
    if (dim < 0)
        dim += nd;
    for (int i = 0; l && i < l->n; i++) {
        int x = l->items[i].value;
        int64_t size = x >= 0 && !stack ? b->g->values[x].sizes[dim] : 1;
        if (wants(b, x)) {
            json_t *ins = args(3, named("self", tensor_arg(gy), 1),
                               named("dim", one("as_int", json_integer(dim)), 1),
                               named(stack ? "index" : "start", one("as_int", json_integer(at)), 1));
            if (!stack)
                json_array_append_new(ins, named("end", one("as_int", json_integer(at + size)), 1));
            accumulate(b, x, emit1(b, stack ? "torch.ops.aten.select.int" : "torch.ops.aten.slice.Tensor",
                                   ins));
        }
        at += size;
    }
    return 0;
}

/* broadcast_tensors: each result's gradient summed back to its input's
 * shape (what PyTorch's expand backward does: sum_to_size); a result no
 * path reached gives its input nothing. */
static int derive_broadcast(struct jb *b, const struct tn_graph_node *n)
{
    const struct tn_graph_arg *l = arg_of(n, "tensors");
    for (int i = 0; l && i < l->n && i < n->nout; i++) {
        int x = l->items[i].value, o = n->outs[i];
        if (x >= 0 && o >= 0 && b->grad[o] && wants(b, x))
            accumulate(b, x, sum_to(b, b->grad[o], o, x));
    }
    return 0;
}

/* Has the forward run node n as `target`, whose second result (OUTPUT_what,
 * of n's output's shape and dtype dt, written into name) the forward saves
 * and the backward reads. */
static void run_as(struct jb *b, const struct tn_graph_node *n, const char *target,
                   const char *what, enum tn_dtype dt, char *name, size_t len)
{
    const char *out = b->g->values[n->outs[0]].name;
    snprintf(name, len, "%s_%s", out, what);
    json_array_append_new(b->drops, json_pack("[sss[s]n]", n->name, out, target, name));
    json_t *m = json_deep_copy(json_object_get(b->ftv, out));
    json_object_set_new(m, "dtype", json_integer(tn_graph_scalar_type(dt)));
    json_object_set_new(m, "requires_grad", json_false());
    json_object_set_new(b->tv, name, m);
}

/* batch_norm in training mode without running statistics run by the
 * forward as native_batch_norm (the same arguments but cudnn_enabled),
 * whose save_mean and save_invstd ([C], written into mean and invstd) the
 * forward saves for the backward, which then does not compute the
 * batch's statistics a second time. */
static void run_as_bn(struct jb *b, const struct tn_graph_node *n, char *mean, char *invstd,
                      size_t len)
{
    const char *out = b->g->values[n->outs[0]].name;
    const struct tn_graph_value *xv = &b->g->values[tensor_of(n, "input")];
    snprintf(mean, len, "%s_save_mean", out);
    snprintf(invstd, len, "%s_save_invstd", out);
    json_array_append_new(b->drops, json_pack("[sss[ss]s]", n->name, out,
                                              "torch.ops.aten.native_batch_norm.default", mean,
                                              invstd, "cudnn_enabled"));
    const char *names[2] = {mean, invstd};
    for (int i = 0; i < 2; i++) {
        json_t *m = json_deep_copy(json_object_get(b->ftv, out));
        json_object_set_new(m, "sizes", json_pack("[{sI}]", "as_int", (json_int_t)xv->sizes[1]));
        json_object_set_new(m, "strides", json_pack("[{si}]", "as_int", 1));
        json_object_set_new(m, "requires_grad", json_false());
        json_object_set_new(b->tv, names[i], m);
    }
}

/* An int[] argument of n as an as_ints argument, def (n_def items) when
 * n has none. */
static json_t *ints_of(const struct tn_graph_node *n, const char *name, const int64_t *def,
                       int n_def)
{
    const struct tn_graph_arg *a = arg_of(n, name);
    int64_t v[TN_MAX_DIMS];
    if (!a || (a->kind != TN_GARG_INTS && a->kind != TN_GARG_INT) || a->n > TN_MAX_DIMS)
        return ints_arg(def, n_def);
    for (int i = 0; i < a->n; i++)
        v[i] = a->items[i].i;
    return ints_arg(v, a->n);
}

/* max_pool2d: the forward runs it as max_pool2d_with_indices (the kernel
 * its values come from anyway) and saves the indices, so the backward's
 * max_pool2d_with_indices_backward (derivatives.yaml's formula, the same
 * call) reads them instead of pooling the input again: 0.4 ms of
 * bench/compile/train.sh's CNN step. */
static int d_max_pool(struct jb *b, const struct tn_graph_node *n, const char *gy)
{
    int x = tensor_of(n, "self");
    if (!wants(b, x))
        return 0;
    char idx[256];
    run_as(b, n, "torch.ops.aten.max_pool2d_with_indices.default", "indices", TN_INT64, idx,
           sizeof idx);
    static const int64_t zero[1] = {0}, one1[1] = {1};
    const struct tn_graph_arg *cm = arg_of(n, "ceil_mode");
    accumulate(b, x, emit_like(b, "torch.ops.aten.max_pool2d_with_indices_backward.default",
                               args(8, named("grad_output", tensor_arg(gy), 1),
                                    named("self", tensor_arg(fv(b, x)), 1),
                                    named("kernel_size", ints_of(n, "kernel_size", NULL, 0), 1),
                                    named("stride", ints_of(n, "stride", NULL, 0), 1),
                                    named("padding", ints_of(n, "padding", zero, 1), 1),
                                    named("dilation", ints_of(n, "dilation", one1, 1), 1),
                                    named("ceil_mode", one("as_bool", json_boolean(
                                                           cm && cm->kind == TN_GARG_BOOL &&
                                                           cm->items[0].i)), 1),
                                    named("indices", tensor_arg(idx), 1)),
                               x, TN_DTYPE_UNSET));
    return 0;
}

/* dropout in training: the forward runs it as native_dropout, which also
 * returns its mask (the same draws: PyTorch's CPU dropout is
 * native_dropout's), saved for the backward, whose gradient is
 * native_dropout_backward(grad, mask, 1 / (1 - p)) (0 for p = 1); not
 * training, grad itself. */
static int d_dropout(struct jb *b, const struct tn_graph_node *n, const char *gy)
{
    int x = tensor_of(n, "input");
    const struct tn_graph_arg *pa = arg_of(n, "p");
    double p = pa && pa->kind == TN_GARG_FLOAT ? pa->items[0].f
               : pa && pa->kind == TN_GARG_INT ? (double)pa->items[0].i : 0.5;
    if (!wants(b, x))
        return 0;
    if (!int_of(n, "train", 1)) {
        accumulate(b, x, gy);
        return 0;
    }
    char mask[256];
    run_as(b, n, "torch.ops.aten.native_dropout.default", "mask", TN_BOOL, mask, sizeof mask);
    const char *gx = emit1(b, "torch.ops.aten.native_dropout_backward.default",
                           args(3, named("grad_output", tensor_arg(gy), 1),
                                named("mask", tensor_arg(mask), 1),
                                named("scale", one("as_float",
                                                   json_real(p == 1 ? 0.0 : 1.0 / (1.0 - p))),
                                      1)));
    /* no Meta kernel: declared like the input, whose shape it has */
    json_object_set_new(b->tv, gx, json_deep_copy(json_object_get(b->ftv, b->g->values[x].name)));
    accumulate(b, x, gx);
    return 0;
}

/* _to_copy: derivatives.yaml's `self: grad`, which the eager engine casts
 * to the input's dtype (as PyTorch's validate_outputs does): cast here, so
 * that a float32 computation between two casts (sdpa's math path on
 * bfloat16, joint_sdpa.c) hands its input a gradient of its dtype. */
static int d_to_copy(struct jb *b, const struct tn_graph_node *n, const char *gy)
{
    int x = tensor_of(n, "self");
    if (!wants(b, x))
        return 0;
    enum tn_dtype dt = b->g->values[x].dtype;
    accumulate(b, x, dt == b->g->values[n->outs[0]].dtype ? gy : to_dtype(b, gy, dt));
    return 0;
}

/* Emits node n's derivative: a view's or a composite's (above), else the
 * formulas of derivatives.yaml. Returns 0, or TN_EINVAL naming it. */
static int derive(struct jb *b, const struct tn_graph_node *n)
{
    const char *t = n->target;
    bool any = false;
    for (int k = 0; k < n->nout; k++)
        any |= n->outs[k] >= 0 && b->grad[n->outs[k]];
    if (!any)
        return 0; /* the loss does not depend on it */
    if (!strcmp(t, "torch.ops.aten.split.Tensor") ||
        !strcmp(t, "torch.ops.aten.split_with_sizes.default"))
        return derive_pieces(b, n, false);
    if (!strcmp(t, "torch.ops.aten.unbind.int"))
        return derive_pieces(b, n, true);
    if (!strcmp(t, "torch.ops.aten.broadcast_tensors.default"))
        return derive_broadcast(b, n);
    const char *gy = n->nout > 0 && n->outs[0] >= 0 ? b->grad[n->outs[0]] : NULL;
    if (gy && (!strcmp(t, "torch.ops.aten.cat.default") ||
               !strcmp(t, "torch.ops.aten.stack.default")))
        return derive_cat_stack(b, n, !strcmp(t, "torch.ops.aten.stack.default"));
    if (gy && !strcmp(t, "torch.ops.aten.dropout.default"))
        return d_dropout(b, n, gy);
    if (gy && !strcmp(t, "torch.ops.aten.max_pool2d.default") && n->nout == 1)
        return d_max_pool(b, n, gy);
    if (gy && !strcmp(t, "torch.ops.aten._to_copy.default"))
        return d_to_copy(b, n, gy);
    int rc = gy ? derive_structural(b, n, gy) : 1;
    if (rc == 1)
        rc = derive_yaml(b, n);
    if (rc == 1)
        return tn_set_error(TN_EINVAL, "%s: node '%s': no graph derivative for %s yet",
                            b->g->label, n->name, t);
    return rc;
}

/* Which values a parameter reaches (the ones that get gradients). */
static void mark_needs_grad(struct jb *b)
{
    const struct tn_graph *g = b->g;
    for (int i = 0; i < g->ninputs; i++)
        if (g->inputs[i].kind == TN_GIN_PARAMETER && g->inputs[i].value >= 0 &&
            !tn__graph_param_frozen(g, i))
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
    static const char *const ops[] = {"relu", "tanh", "sigmoid", "silu", "neg", "exp"};
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
        json_t *m = json_object_get(b->tv, b->grad[v]); /* a declared meta follows */
        if (m) {
            json_object_set(b->tv, t, m);
            json_object_del(b->tv, b->grad[v]);
        }
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
    struct tn_graph *math;
    int mrc = tn__joint_sdpa_dropout(g, &math);
    if (mrc != 0) {
        if (mrc > 0)
            mrc = tn_compile_joint(math, fwd, bwd);
        tn_graph_free(math);
        return mrc;
    }
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
    if (g->nsymbols > 0) {
        rc = tn_set_error(TN_EINVAL, "%s: symbolic sizes (%s): the joint graph takes a graph "
                                     "exported with static shapes",
                          g->label, g->symbols[0].name);
        goto out;
    }
    b.ftv = json_object_get(json_object_get(json_object_get(froot, "graph_module"), "graph"),
                            "tensor_values");
    b.tv = json_object();
    b.drops = json_array();
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
    /* dropout nodes run as native_dropout, their masks saved; max_pool2d
     * as max_pool2d_with_indices, its indices saved */
    for (size_t i = 0; i < json_array_size(b.drops); i++) {
        /* [node, its output, the op it runs as, [its other results], an
         * argument that op does not take or null] */
        json_t *d = json_array_get(b.drops, i), *more = json_array_get(d, 3);
        const char *node = json_string_value(json_array_get(d, 0)),
                   *o = json_string_value(json_array_get(d, 1)),
                   *drop = json_string_value(json_array_get(d, 4));
        for (size_t k = 0; k < json_array_size(fnodes); k++) {
            json_t *j = json_array_get(fnodes, k), *jo = json_array(),
                   *jin = json_object_get(j, "inputs");
            if (strcmp(json_string_value(json_object_get(j, "name")), node)) {
                json_decref(jo);
                continue;
            }
            json_object_set(j, "target", json_array_get(d, 2));
            json_array_append_new(jo, json_pack("{s:{s:s}}", "as_tensor", "name", o));
            for (size_t r = 0; r < json_array_size(more); r++)
                json_array_append_new(jo, json_pack("{s:{s:O}}", "as_tensor", "name",
                                                    json_array_get(more, r)));
            json_object_set_new(j, "outputs", jo);
            for (size_t a = 0; drop && a < json_array_size(jin); a++)
                if (!strcmp(json_string_value(json_object_get(json_array_get(jin, a), "name")),
                            drop))
                    json_array_remove(jin, a--);
        }
        for (size_t r = 0; r < json_array_size(more); r++) {
            const char *mask = json_string_value(json_array_get(more, r));
            json_object_set(ftv, mask, json_object_get(tv, mask));
            json_array_append_new(fouts, tensor_arg(mask));
            json_array_append_new(fospecs, spec("user_output", mask, NULL, NULL));
            json_array_append_new(ins, tensor_arg(mask));
            json_array_append_new(inspecs, spec("user_input", mask, NULL, NULL));
        }
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
    json_decref(b.drops);
    return rc;
}

/* Whether a call of a formula resolves to ops here: an op, a lib/core
 * function, a shape function, or a define: entry whose own calls resolve
 * (depth bounds a define that calls itself). Sets *helper to the first
 * call that does not. */
static bool call_expressible(const char *name, int depth, const char **helper);

static bool rows_expressible(int r, int depth, const char **helper)
{
    for (int end = skip_rows(r); r < end; r++)
        if (tn__dx_rows[r].kind == TN__DX_CALL &&
            !call_expressible(tn__dx_rows[r].text, depth, helper))
            return false;
    return true;
}

static bool call_expressible(const char *name, int depth, const char **helper)
{
    static const char *const known[] = {"sizes", "scalar_type", "_kept_sizes", "_reduced_count",
                                        "_dim_sized", "_repeat_split", "_repeat_summed",
                                        "_last_sizes", "_flat_sizes", "_group_sizes", "_result",
                                        "_bools", "t", "transpose", "expand", "reshape", "view",
                                        "permute", "flatten", "unsqueeze"};
    if (strstr(name, "::"))
        return true;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(name, known[i]))
            return true;
    bool found = false;
    for (int i = 0; depth < 16 && i < tn__dx_nentries; i++) {
        const struct tn__dentry *de = &tn__dx_entries[i];
        if (!de->params || strcmp(de->name, name))
            continue;
        found = true;
        for (int f = 0; f < de->nf; f++)
            if (!rows_expressible(tn__dx_formulas[de->formula + f].root, depth + 1, helper))
                return false;
    }
    if (!found && tn_op_find(name)) {
        found = true;
    }
    tn_clear_error();
    if (!found)
        *helper = name;
    return found;
}

int tn__joint_unexpressed(void (*fn)(const char *op, const char *inputs, const char *helper,
                                     void *ctx),
                          void *ctx)
{
    int count = 0;
    for (int i = 0; i < tn__dx_nentries; i++) {
        const struct tn__dentry *de = &tn__dx_entries[i];
        if (de->params)
            continue;
        for (int f = 0; f < de->nf; f++) {
            const char *helper = NULL;
            if (rows_expressible(tn__dx_formulas[de->formula + f].root, 0, &helper))
                continue;
            count++;
            if (fn)
                fn(de->name, tn__dx_formulas[de->formula + f].inputs, helper, ctx);
        }
    }
    return count;
}
