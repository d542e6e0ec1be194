/*
 * compile/decomp.c: the decomposition table: each op the compiler lowers,
 * with the builder of its smaller parts: pointwise expressions, views
 * (index rewrites), reductions and matrix products. Composite ops
 * (layer_norm, softmax, gelu, silu, linear, addmm, batch_norm in eval,
 * dropout in eval, ...) decompose here, so their parts fuse with their
 * neighbours. tests/unit/test_compile_decomp.c checks each against the
 * op it replaces.
 */
#include "compile/internal.h"

#include <math.h>
#include <string.h>

#define OUT(k) tn__out_meta(L, k)
#define NOMEM() tn_set_error(TN_ENOMEM, "out of memory")

/* Leaves node n to the dispatcher with a reason. */
static int extern_because(struct tn__lctx *L, const char *why)
{
    snprintf(L->why, sizeof L->why, "%s", why);
    return 1;
}

/* ------------------------------------------------------------ pointwise */

/* The dtype an op computes in: its output's (float for half types). */
static enum tn_dtype out_compute(struct tn__lctx *L)
{
    return tn__compute_dtype(OUT(0)->dtype);
}

static int unary(struct tn__lctx *L, const struct tn_graph_node *n, int op)
{
    enum tn_dtype dt = out_compute(L);
    int a = tn__operand(L, n, "self", 0, dt);
    if (a < 0)
        return extern_because(L, "an argument it does not take");
    return tn__set_out(L, 0, tn__x_un(L->P, op, dt, a), dt);
}

#define UNARY(name, OP)                                                                   \
    static int lower_##name(struct tn__lctx *L, const struct tn_graph_node *n)            \
    {                                                                                     \
        return unary(L, n, OP);                                                           \
    }
UNARY(neg, TN_X_NEG)
UNARY(abs, TN_X_ABS)
UNARY(exp, TN_X_EXP)
UNARY(log, TN_X_LOG)
UNARY(sqrt, TN_X_SQRT)
UNARY(rsqrt, TN_X_RSQRT)
UNARY(tanh, TN_X_TANH)
UNARY(sigmoid, TN_X_SIGMOID)
UNARY(erf, TN_X_ERF)
UNARY(sin, TN_X_SIN)
UNARY(cos, TN_X_COS)
UNARY(log1p, TN_X_LOG1P)
UNARY(expm1, TN_X_EXPM1)
UNARY(reciprocal, TN_X_RECIP)
UNARY(floor, TN_X_FLOOR)
UNARY(ceil, TN_X_CEIL)

static int k_(struct tn__lctx *L, enum tn_dtype dt, double k)
{
    return tn__x_const(L->P, dt, k);
}

/* ------------------------------------------------------------ factories */

/* The constant factories (zeros, ones, full and their _like and new_
 * forms, fill): the value as a constant of the output's sizes (from the
 * Meta pass) and dtype, folded into the kernels that read it. The value
 * is the node's fill argument (a scalar, or fill.Tensor's 0-d tensor
 * broadcast), or 0 / 1 by name. */
static int lower_constant(struct tn__lctx *L, const struct tn_graph_node *n)
{
    enum tn_dtype dt = out_compute(L);
    const char *q = strstr(n->op->qualname, "::") + 2;
    int x;
    if (tn__arg(n, "fill_value"))
        x = tn__operand(L, n, "fill_value", 0, dt);
    else if (tn__arg(n, "value"))
        x = tn__operand(L, n, "value", 0, dt);
    else
        x = k_(L, dt, strstr(q, "ones") ? 1 : 0);
    if (x < 0)
        return extern_because(L, "a fill value it does not take");
    return tn__set_out(L, 0, x, dt);
}

static int lower_relu(struct tn__lctx *L, const struct tn_graph_node *n)
{
    enum tn_dtype dt = out_compute(L);
    if (dt == TN_BOOL)
        return extern_because(L, "bool");
    int a = tn__operand(L, n, "self", 0, dt);
    return tn__set_out(L, 0, tn__x_bin(L->P, TN_X_MAX, dt, a, k_(L, dt, 0)), dt);
}

/* gelu: x/2 (1 + erf(x/sqrt 2)), or with approximate='tanh' x/2 (1 +
 * tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
static int lower_gelu(struct tn__lctx *L, const struct tn_graph_node *n)
{
    enum tn_dtype dt = out_compute(L);
    const struct tn_graph_arg *ap = tn__arg(n, "approximate");
    bool tanh_ = ap && ap->s && !strcmp(ap->s, "tanh");
    if (ap && ap->s && !tanh_ && strcmp(ap->s, "none"))
        return extern_because(L, "an approximation it does not know");
    struct tn__cprog *P = L->P;
    int x = tn__operand(L, n, "self", 0, dt), inner;
    if (tanh_) {
        int x3 = tn__x_bin(P, TN_X_MUL, dt, tn__x_bin(P, TN_X_MUL, dt, x, x), x);
        inner = tn__x_un(P, TN_X_TANH, dt,
                         tn__x_bin(P, TN_X_MUL, dt, k_(L, dt, sqrt(2.0 / M_PI)),
                                   tn__x_bin(P, TN_X_ADD, dt, x,
                                             tn__x_bin(P, TN_X_MUL, dt, k_(L, dt, 0.044715), x3))));
        inner = tn__x_bin(P, TN_X_ADD, dt, k_(L, dt, 1), inner);
    } else { /* 1 + erf as erfc: one branch, no cancellation near 0 */
        inner = tn__x_erf1p(P, dt, tn__x_bin(P, TN_X_MUL, dt, x, k_(L, dt, M_SQRT1_2)));
    }
    int y = tn__x_bin(P, TN_X_MUL, dt, tn__x_bin(P, TN_X_MUL, dt, x, k_(L, dt, 0.5)), inner);
    return tn__set_out(L, 0, y, dt);
}

/* silu as PyTorch computes it, x / (1 + exp(-x)): one operation fewer
 * than x * sigmoid(x) (a multiply per element of efficientnet_b0's batch
 * norm + SiLU kernels) */
static int lower_silu(struct tn__lctx *L, const struct tn_graph_node *n)
{
    enum tn_dtype dt = out_compute(L);
    struct tn__cprog *P = L->P;
    int x = tn__operand(L, n, "self", 0, dt);
    int e = tn__x_un(P, TN_X_EXP, dt, tn__x_un(P, TN_X_NEG, dt, x));
    int y = tn__x_bin(P, TN_X_DIV, dt, x, tn__x_bin(P, TN_X_ADD, dt, k_(L, dt, 1), e));
    return tn__set_out(L, 0, y, dt);
}

/* clamp between two optional bounds (min then max, as PyTorch does) */
static int clamp_between(struct tn__lctx *L, int x, enum tn_dtype dt, const struct tn_graph_arg *lo,
                         const struct tn_graph_arg *hi)
{
    const struct tn_graph_arg *b[2] = {lo, hi};
    for (int i = 0; i < 2 && x >= 0; i++) {
        if (!b[i] || b[i]->kind == TN_GARG_NONE)
            continue;
        if (b[i]->kind != TN_GARG_FLOAT && b[i]->kind != TN_GARG_INT)
            return -2;
        double v = b[i]->kind == TN_GARG_FLOAT ? b[i]->items[0].f : (double)b[i]->items[0].i;
        x = tn__x_bin(L->P, i ? TN_X_MIN : TN_X_MAX, dt, x, k_(L, dt, v));
    }
    return x;
}

static int lower_clamp(struct tn__lctx *L, const struct tn_graph_node *n)
{
    enum tn_dtype dt = out_compute(L);
    int x = clamp_between(L, tn__operand(L, n, "self", 0, dt), dt, tn__arg(n, "min"),
                          tn__arg(n, "max"));
    return x == -2 ? extern_because(L, "tensor bounds") : tn__set_out(L, 0, x, dt);
}

static int lower_hardtanh(struct tn__lctx *L, const struct tn_graph_node *n)
{
    enum tn_dtype dt = out_compute(L);
    int x = tn__operand(L, n, "self", 0, dt);
    x = tn__x_bin(L->P, TN_X_MAX, dt, x, k_(L, dt, tn__arg_float(n, "min_val", -1)));
    x = tn__x_bin(L->P, TN_X_MIN, dt, x, k_(L, dt, tn__arg_float(n, "max_val", 1)));
    return tn__set_out(L, 0, x, dt);
}

static int lower_leaky_relu(struct tn__lctx *L, const struct tn_graph_node *n)
{
    enum tn_dtype dt = out_compute(L);
    struct tn__cprog *P = L->P;
    int x = tn__operand(L, n, "self", 0, dt);
    int pos = tn__x_bin(P, TN_X_GT, TN_BOOL, x, k_(L, dt, 0));
    int neg = tn__x_bin(P, TN_X_MUL, dt, x, k_(L, dt, tn__arg_float(n, "negative_slope", 0.01)));
    return tn__set_out(L, 0, tn__x_where(P, pos, x, neg), dt);
}

/* relu6(x + 3) / 6, times x for hardswish */
static int hard(struct tn__lctx *L, const struct tn_graph_node *n, bool swish)
{
    enum tn_dtype dt = out_compute(L);
    struct tn__cprog *P = L->P;
    int x = tn__operand(L, n, "self", 0, dt);
    int h = tn__x_bin(P, TN_X_ADD, dt, x, k_(L, dt, 3));
    h = tn__x_bin(P, TN_X_MIN, dt, tn__x_bin(P, TN_X_MAX, dt, h, k_(L, dt, 0)), k_(L, dt, 6));
    h = tn__x_bin(P, TN_X_DIV, dt, h, k_(L, dt, 6));
    return tn__set_out(L, 0, swish ? tn__x_bin(P, TN_X_MUL, dt, x, h) : h, dt);
}

static int lower_hardsigmoid(struct tn__lctx *L, const struct tn_graph_node *n)
{
    return hard(L, n, false);
}

static int lower_hardswish(struct tn__lctx *L, const struct tn_graph_node *n)
{
    return hard(L, n, true);
}

static int lower_pow_scalar(struct tn__lctx *L, const struct tn_graph_node *n)
{
    enum tn_dtype dt = out_compute(L);
    const struct tn_graph_arg *e = tn__arg(n, "exponent");
    if (!tn_dtype_is_floating(dt) || !e || (e->kind != TN_GARG_FLOAT && e->kind != TN_GARG_INT))
        return extern_because(L, "an integral power");
    double p = e->kind == TN_GARG_FLOAT ? e->items[0].f : (double)e->items[0].i;
    int x = tn__operand(L, n, "self", 0, dt), y;
    if (p == 2)
        y = tn__x_bin(L->P, TN_X_MUL, dt, x, x);
    else if (p == 1)
        y = x;
    else if (p == 0.5)
        y = tn__x_un(L->P, TN_X_SQRT, dt, x);
    else if (p == -1)
        y = tn__x_un(L->P, TN_X_RECIP, dt, x);
    else
        y = tn__x_bin(L->P, TN_X_POW, dt, x, k_(L, dt, p));
    return tn__set_out(L, 0, y, dt);
}

/* add, sub (with alpha), mul, div (true division), maximum, minimum, pow */
static int binary(struct tn__lctx *L, const struct tn_graph_node *n, int op)
{
    enum tn_dtype dt = out_compute(L);
    if (dt == TN_BOOL && op != TN_X_MUL && op != TN_X_ADD && op != TN_X_MAX && op != TN_X_MIN)
        return extern_because(L, "bool arithmetic");
    if (op == TN_X_POW && !tn_dtype_is_floating(dt))
        return extern_because(L, "an integral power");
    const struct tn_graph_arg *rm = tn__arg(n, "rounding_mode");
    if (rm && rm->kind == TN_GARG_STRING)
        return extern_because(L, "a rounding mode");
    int a = tn__operand(L, n, "self", 0, dt);
    int b = tn__operand(L, n, op == TN_X_POW ? "exponent" : "other", 0, dt);
    if (a < 0 || b < 0)
        return extern_because(L, "an argument it does not take");
    const struct tn_graph_arg *al = tn__arg(n, "alpha");
    if (al && al->kind != TN_GARG_NONE) {
        double alpha = tn__arg_float(n, "alpha", 1);
        if (dt == TN_BOOL && alpha != 1)
            return extern_because(L, "bool alpha");
        b = tn__x_bin(L->P, TN_X_MUL, dt, b, k_(L, dt, alpha));
    }
    if (dt == TN_BOOL) /* bool: add is or, mul is and */
        op = op == TN_X_ADD || op == TN_X_MAX ? TN_X_OR : TN_X_AND;
    return tn__set_out(L, 0, tn__x_bin(L->P, op, dt, a, b), dt);
}

#define BINARY(name, OP)                                                                  \
    static int lower_##name(struct tn__lctx *L, const struct tn_graph_node *n)            \
    {                                                                                     \
        return binary(L, n, OP);                                                          \
    }
BINARY(add, TN_X_ADD)
BINARY(sub, TN_X_SUB)
BINARY(mul, TN_X_MUL)
BINARY(div, TN_X_DIV)
BINARY(maximum, TN_X_MAX)
BINARY(minimum, TN_X_MIN)
BINARY(pow, TN_X_POW)

/* rsub(self, other, alpha) = other - alpha * self */
static int lower_rsub(struct tn__lctx *L, const struct tn_graph_node *n)
{
    enum tn_dtype dt = out_compute(L);
    if (dt == TN_BOOL)
        return extern_because(L, "bool arithmetic");
    int a = tn__operand(L, n, "self", 0, dt), b = tn__operand(L, n, "other", 0, dt);
    a = tn__x_bin(L->P, TN_X_MUL, dt, a, k_(L, dt, tn__arg_float(n, "alpha", 1)));
    return tn__set_out(L, 0, tn__x_bin(L->P, TN_X_SUB, dt, b, a), dt);
}

/* The dtype two operands compare in. */
static enum tn_dtype common(struct tn__lctx *L, const struct tn_graph_node *n)
{
    int a = tn__arg_tensor(n, "self"), b = tn__arg_tensor(n, "other");
    enum tn_dtype da = a >= 0 ? L->v[a].dt : TN_FLOAT64;
    if (b < 0) {
        const struct tn_graph_arg *o = tn__arg(n, "other");
        bool fl = o && o->kind == TN_GARG_FLOAT;
        return fl && !tn_dtype_is_floating(da) ? TN_FLOAT64
               : da == TN_BOOL && o && o->kind == TN_GARG_INT ? TN_INT64 : da;
    }
    return tn_promote_types(da, L->v[b].dt);
}

static int compare(struct tn__lctx *L, const struct tn_graph_node *n, int op)
{
    enum tn_dtype dt = tn__compute_dtype(common(L, n));
    int a = tn__operand(L, n, "self", 0, dt), b = tn__operand(L, n, "other", 0, dt);
    if (a < 0 || b < 0)
        return extern_because(L, "an argument it does not take");
    return tn__set_out(L, 0, tn__x_bin(L->P, op, TN_BOOL, a, b), TN_BOOL);
}

#define COMPARE(name, OP)                                                                 \
    static int lower_##name(struct tn__lctx *L, const struct tn_graph_node *n)            \
    {                                                                                     \
        return compare(L, n, OP);                                                         \
    }
COMPARE(eq, TN_X_EQ)
COMPARE(ne, TN_X_NE)
COMPARE(lt, TN_X_LT)
COMPARE(le, TN_X_LE)
COMPARE(gt, TN_X_GT)
COMPARE(ge, TN_X_GE)

static int lower_where(struct tn__lctx *L, const struct tn_graph_node *n)
{
    enum tn_dtype dt = out_compute(L);
    int c = tn__operand(L, n, "condition", 0, TN_BOOL);
    int a = tn__operand(L, n, "self", 0, dt), b = tn__operand(L, n, "other", 0, dt);
    if (c < 0 || a < 0 || b < 0)
        return extern_because(L, "an argument it does not take");
    return tn__set_out(L, 0, tn__x_where(L->P, c, a, b), dt);
}

/* A floating op's tensor arguments an and bn as operands (tn__operand) in
 * its compute dtype *dt: 0, or 1 (left to the dispatcher) when the op is
 * not floating or one is missing. */
static int float_operands(struct tn__lctx *L, const struct tn_graph_node *n, const char *an,
                          const char *bn, enum tn_dtype *dt, int *a, int *b)
{
    *dt = out_compute(L);
    if (!tn_dtype_is_floating(*dt))
        return extern_because(L, "a dtype it does not take");
    *a = tn__operand(L, n, an, 0, *dt);
    *b = tn__operand(L, n, bn, 0, *dt);
    return *a < 0 || *b < 0 ? extern_because(L, "an argument it does not take") : 0;
}

/* relu's backward: 0 where self <= threshold (compared in the compute
 * dtype, as the CPU kernel compares in the element type), else the
 * gradient; a NaN self keeps the gradient. Fused, it joins batch norm's
 * backward reductions instead of a pass of its own through libtensor. */
static int lower_threshold_backward(struct tn__lctx *L, const struct tn_graph_node *n)
{
    enum tn_dtype dt;
    int g, x;
    if (float_operands(L, n, "grad_output", "self", &dt, &g, &x))
        return 1;
    int c = tn__x_bin(L->P, TN_X_LE, TN_BOOL, x, k_(L, dt, tn__arg_float(n, "threshold", 0)));
    return tn__set_out(L, 0, tn__x_where(L->P, c, k_(L, dt, 0), g), dt);
}

static int lower_logical_not(struct tn__lctx *L, const struct tn_graph_node *n)
{
    int a = tn__operand(L, n, "self", 0, TN_BOOL);
    return tn__set_out(L, 0, tn__x_un(L->P, TN_X_NOT, TN_BOOL, a), TN_BOOL);
}

/* clone, contiguous, alias, detach, _to_copy and to on the CPU: the value
 * itself (converted); the outputs never alias the inputs (lower.c). */
static int lower_copy(struct tn__lctx *L, const struct tn_graph_node *n)
{
    const struct tn_graph_arg *dev = tn__arg(n, "device");
    if (dev && dev->kind == TN_GARG_DEVICE && dev->s && strncmp(dev->s, "cpu", 3))
        return extern_because(L, "another device");
    /* torch.export's ChannelsLast 2, ChannelsLast3d 3: strides the
     * kernel's dense result would not have (a later view depends on them) */
    const struct tn_graph_arg *mf = tn__arg(n, "memory_format");
    if (mf && mf->kind == TN_GARG_MEMORY_FORMAT && (mf->items[0].i == 2 || mf->items[0].i == 3))
        return extern_because(L, "a channels_last copy");
    enum tn_dtype dt = out_compute(L);
    int a = tn__operand(L, n, "self", 0, dt);
    if (a < 0)
        return extern_because(L, "an argument it does not take");
    return tn__set_out(L, 0, a, dt);
}

static int lower_dropout(struct tn__lctx *L, const struct tn_graph_node *n)
{
    if (tn__arg_int(L, n, "train", 1) && tn__arg_float(n, "p", 0.5) != 0)
        return extern_because(L, "dropout in training draws random numbers");
    return tn__set_out(L, 0, tn__operand(L, n, "input", 0, out_compute(L)), out_compute(L));
}

/* ---------------------------------------------------------------- views */

static int wrap(int64_t d, int nd)
{
    return (int)(d < 0 ? d + nd : d);
}

static int permute(struct tn__lctx *L, const struct tn_graph_node *n, const int64_t *perm, int nd)
{
    struct tn__vmap m = {.nold = nd};
    for (int j = 0; j < nd; j++) { /* new dim j is old dim perm[j] */
        int d = wrap(perm[j], nd);
        m.src[d] = j;
        m.mul[d] = 1;
    }
    return tn__set_view(L, 0, tn__arg_tensor(n, "self"), &m);
}

static int lower_permute(struct tn__lctx *L, const struct tn_graph_node *n)
{
    int64_t p[TN_MAX_DIMS];
    int nd = tn__arg_ints(L, n, "dims", p);
    return nd < 0 ? extern_because(L, "no dims") : permute(L, n, p, nd);
}

static int lower_transpose(struct tn__lctx *L, const struct tn_graph_node *n)
{
    int v = tn__arg_tensor(n, "self"), nd = L->v[v].nd;
    bool t = !strcmp(n->op->qualname, "aten::t");
    int64_t p[TN_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        p[d] = d;
    if (nd < 2)
        return permute(L, n, p, nd);
    int a = t ? 0 : wrap(tn__arg_int(L, n, "dim0", 0), nd);
    int b = t ? 1 : wrap(tn__arg_int(L, n, "dim1", 1), nd);
    p[a] = b;
    p[b] = a;
    return permute(L, n, p, nd);
}

/* Old dims kept in order, size-1 ones dropped where drop[d], new size-1
 * ones where the output has them: the map for unsqueeze and squeeze. */
static int regroup(struct tn__lctx *L, const struct tn_graph_node *n, const bool *drop)
{
    int v = tn__arg_tensor(n, "self");
    const struct tn_tensor *o = OUT(0);
    struct tn__vmap m = {.nold = L->v[v].nd};
    int j = 0;
    for (int d = 0; d < L->v[v].nd; d++) {
        if (drop[d]) {
            m.src[d] = -1;
            continue;
        }
        while (j < o->ndim && o->sizes[j] != L->v[v].sizes[d])
            j++; /* an inserted 1 */
        m.src[d] = j++;
        m.mul[d] = 1;
    }
    return tn__set_view(L, 0, v, &m);
}

static int lower_unsqueeze(struct tn__lctx *L, const struct tn_graph_node *n)
{
    int v = tn__arg_tensor(n, "self"), nd = L->v[v].nd;
    int at = wrap(tn__arg_int(L, n, "dim", 0), nd + 1);
    struct tn__vmap m = {.nold = nd};
    for (int d = 0; d < nd; d++) {
        m.src[d] = d < at ? d : d + 1;
        m.mul[d] = 1;
    }
    return tn__set_view(L, 0, v, &m);
}

static int lower_squeeze(struct tn__lctx *L, const struct tn_graph_node *n)
{
    int v = tn__arg_tensor(n, "self"), nd = L->v[v].nd;
    bool drop[TN_MAX_DIMS] = {false};
    int64_t dims[TN_MAX_DIMS];
    int k = tn__arg_ints(L, n, "dim", dims);
    if (k < 0)
        k = tn__arg_ints(L, n, "dims", dims);
    for (int d = 0; d < nd; d++)
        drop[d] = k < 0 && L->v[v].sizes[d] == 1;
    for (int i = 0; i < k; i++) {
        int d = wrap(dims[i], nd ? nd : 1);
        if (d < nd && L->v[v].sizes[d] == 1)
            drop[d] = true;
    }
    return regroup(L, n, drop);
}

static int lower_expand(struct tn__lctx *L, const struct tn_graph_node *n)
{
    int v = tn__arg_tensor(n, "self");
    const struct tn_tensor *o = OUT(0);
    int x = tn__bcast(L, v, o->ndim, o->sizes);
    return x < 0 ? extern_because(L, "sizes it cannot broadcast") : tn__set_out(L, 0, x, o->dtype);
}

/* view, reshape, flatten, unflatten: to the output's sizes */
static int lower_reshape(struct tn__lctx *L, const struct tn_graph_node *n)
{
    int v = tn__arg_tensor(n, "self");
    if (v < 0)
        v = tn__arg_tensor(n, "input");
    const struct tn_tensor *o = OUT(0);
    if (tn__bmm_reads_through(L, n))
        return TN_OK;
    struct tn__lv lv = L->v[v];
    int rc = tn__reshape(L, &lv, o->ndim, o->sizes);
    if (rc == TN_OK)
        L->v[n->outs[0]] = lv;
    return rc;
}

/* output k = dim d of value v from start with step (slice, select, split) */
static int slice_out(struct tn__lctx *L, int k, int v, int d, int64_t start, int64_t step,
                     bool select)
{
    const struct tn_tensor *o = OUT(k);
    if (!o)
        return TN_OK;
    struct tn__vmap m = {.nold = L->v[v].nd};
    for (int i = 0; i < L->v[v].nd; i++) {
        m.src[i] = i < d || !select ? i : i - 1;
        m.mul[i] = 1;
    }
    m.mul[d] = step;
    m.add[d] = start;
    if (select)
        m.src[d] = -1;
    return tn__set_view(L, k, v, &m);
}

static int64_t clampi(int64_t x, int64_t size)
{
    if (x < 0)
        x += size;
    return x < 0 ? 0 : x > size ? size : x;
}

static int lower_slice(struct tn__lctx *L, const struct tn_graph_node *n)
{
    int v = tn__arg_tensor(n, "self"), nd = L->v[v].nd;
    int d = wrap(tn__arg_int(L, n, "dim", 0), nd);
    int64_t size = L->v[v].sizes[d], step = tn__arg_int(L, n, "step", 1);
    const struct tn_graph_arg *s = tn__arg(n, "start");
    int64_t start = s && s->kind == TN_GARG_INT ? clampi(tn__arg_int(L, n, "start", 0), size) : 0;
    if (step < 1)
        return extern_because(L, "a step below 1");
    return slice_out(L, 0, v, d, start, step, false);
}

static int lower_narrow(struct tn__lctx *L, const struct tn_graph_node *n)
{
    int v = tn__arg_tensor(n, "self"), nd = L->v[v].nd;
    int d = wrap(tn__arg_int(L, n, "dim", 0), nd);
    int64_t start = tn__arg_int(L, n, "start", 0);
    return slice_out(L, 0, v, d, start < 0 ? start + L->v[v].sizes[d] : start, 1, false);
}

static int lower_select(struct tn__lctx *L, const struct tn_graph_node *n)
{
    int v = tn__arg_tensor(n, "self"), nd = L->v[v].nd;
    int d = wrap(tn__arg_int(L, n, "dim", 0), nd);
    int64_t i = tn__arg_int(L, n, "index", 0);
    return slice_out(L, 0, v, d, i < 0 ? i + L->v[v].sizes[d] : i, 1, true);
}

static int lower_split(struct tn__lctx *L, const struct tn_graph_node *n)
{
    int v = tn__arg_tensor(n, "self"), nd = L->v[v].nd;
    int d = wrap(tn__arg_int(L, n, "dim", 0), nd);
    int64_t start = 0;
    for (int k = 0; k < n->nout; k++) {
        const struct tn_tensor *o = OUT(k);
        int rc = slice_out(L, k, v, d, start, 1, false);
        if (rc < 0)
            return rc;
        if (o)
            start += o->sizes[d];
        else if (tn__arg(n, "split_size"))
            start += tn__arg_int(L, n, "split_size", 0);
        else
            return extern_because(L, "an unnamed piece of unknown size");
    }
    return TN_OK;
}

static int lower_unbind(struct tn__lctx *L, const struct tn_graph_node *n)
{
    int v = tn__arg_tensor(n, "self"), nd = L->v[v].nd;
    int d = wrap(tn__arg_int(L, n, "dim", 0), nd);
    for (int k = 0; k < n->nout; k++) {
        int rc = slice_out(L, k, v, d, k, 1, true);
        if (rc < 0)
            return rc;
    }
    return TN_OK;
}

/* ----------------------------------------------------------- reductions */

/* The dims mask of `dim` (all when absent, None or empty). */
static unsigned dims_mask(struct tn__lctx *L, const struct tn_graph_node *n, int nd)
{
    int64_t dims[TN_MAX_DIMS];
    int k = tn__arg_ints(L, n, "dim", dims);
    unsigned mask = 0;
    if (k <= 0)
        return nd ? (1u << nd) - 1 : 0;
    for (int i = 0; i < k; i++)
        mask |= 1u << wrap(dims[i], nd ? nd : 1);
    return nd ? mask : 0;
}

static enum tn_dtype acc_of(enum tn_dtype dt)
{
    if (tn_dtype_is_floating(dt))
        return dt == TN_FLOAT64 ? TN_FLOAT64 : TN_FLOAT32;
    return TN_INT64;
}

/* sum, mean, amax, amin of self over dim */
static int reduction(struct tn__lctx *L, const struct tn_graph_node *n, int red, bool mean)
{
    int v = tn__arg_tensor(n, "self");
    const struct tn_tensor *o = OUT(0);
    enum tn_dtype dt = o->dtype;
    if (dt == TN_BOOL)
        return extern_because(L, "a bool reduction");
    struct tn__lv in = L->v[v], r;
    enum tn_dtype acc = red == TN_RED_SUM ? acc_of(dt) : tn__compute_dtype(dt);
    if ((in.x = tn__x_cast(L->P, acc, in.x)) < 0)
        return NOMEM();
    unsigned mask = dims_mask(L, n, in.nd);
    int64_t count = 1;
    for (int d = 0; d < in.nd; d++)
        if (mask >> d & 1)
            count *= in.sizes[d];
    if (red != TN_RED_SUM && count == 0)
        return extern_because(L, "an empty max or min (an error)");
    bool keep = tn__arg_int(L, n, "keepdim", 0) != 0;
    int rc = tn__reduce(L, &in, mask, red, acc, keep, &r);
    if (rc < 0)
        return rc;
    int x = r.x;
    if (mean)
        x = tn__x_bin(L->P, TN_X_DIV, acc, x, k_(L, acc, (double)count));
    return tn__set_out(L, 0, x, acc);
}

static int lower_sum(struct tn__lctx *L, const struct tn_graph_node *n)
{
    return reduction(L, n, TN_RED_SUM, false);
}

static int lower_mean(struct tn__lctx *L, const struct tn_graph_node *n)
{
    if (!tn_dtype_is_floating(OUT(0)->dtype))
        return extern_because(L, "an integral mean");
    return reduction(L, n, TN_RED_SUM, true);
}

static int lower_amax(struct tn__lctx *L, const struct tn_graph_node *n)
{
    return reduction(L, n, TN_RED_MAX, false);
}

static int lower_amin(struct tn__lctx *L, const struct tn_graph_node *n)
{
    return reduction(L, n, TN_RED_MIN, false);
}

/* mean over the mask (keepdim) of an lv; into *mean (an lv of acc) */
static int mean_of(struct tn__lctx *L, const struct tn__lv *x, unsigned mask, enum tn_dtype acc,
                   struct tn__lv *mean)
{
    int64_t count = 1;
    for (int d = 0; d < x->nd; d++)
        if (mask >> d & 1)
            count *= x->sizes[d];
    int rc = tn__reduce(L, x, mask, TN_RED_SUM, acc, true, mean);
    if (rc == TN_OK)
        mean->x = tn__x_bin(L->P, TN_X_DIV, acc, mean->x, k_(L, acc, (double)(count ? count : 1)));
    return rc;
}

/* var and std with a correction: sum((x - mean)^2) / (N - correction) */
static int var_std(struct tn__lctx *L, const struct tn_graph_node *n, bool std)
{
    int v = tn__arg_tensor(n, "self");
    enum tn_dtype dt = OUT(0)->dtype;
    if (!tn_dtype_is_floating(dt))
        return extern_because(L, "an integral variance");
    enum tn_dtype acc = acc_of(dt);
    struct tn__lv x = L->v[v], mean, ss;
    x.x = tn__x_cast(L->P, acc, x.x);
    unsigned mask = dims_mask(L, n, x.nd);
    int64_t count = 1;
    for (int d = 0; d < x.nd; d++)
        if (mask >> d & 1)
            count *= x.sizes[d];
    double corr = tn__arg_float(n, "correction", 1);
    const struct tn_graph_arg *ub = tn__arg(n, "unbiased");
    if (ub && ub->kind == TN_GARG_BOOL)
        corr = ub->items[0].i ? 1 : 0;
    int rc = mean_of(L, &x, mask, acc, &mean);
    if (rc < 0)
        return rc;
    int m = tn__bcast_lv(L, &mean, x.nd, x.sizes);
    int c = tn__x_bin(L->P, TN_X_SUB, acc, x.x, m);
    struct tn__lv sq = x;
    sq.x = tn__x_bin(L->P, TN_X_MUL, acc, c, c);
    bool keep = tn__arg_int(L, n, "keepdim", 0) != 0;
    if ((rc = tn__reduce(L, &sq, mask, TN_RED_SUM, acc, keep, &ss)) < 0)
        return rc;
    double den = (double)count - corr;
    int y = tn__x_bin(L->P, TN_X_DIV, acc, ss.x, k_(L, acc, den > 0 ? den : 0));
    if (std)
        y = tn__x_un(L->P, TN_X_SQRT, acc, y);
    return tn__set_out(L, 0, y, acc);
}

static int lower_var(struct tn__lctx *L, const struct tn_graph_node *n)
{
    return var_std(L, n, false);
}

static int lower_std(struct tn__lctx *L, const struct tn_graph_node *n)
{
    return var_std(L, n, true);
}

/* softmax and log_softmax over dim: max, then exp-sum, then normalise */
static int softmax(struct tn__lctx *L, const struct tn_graph_node *n, bool log)
{
    int v = tn__arg_tensor(n, "self");
    enum tn_dtype dt = OUT(0)->dtype, acc = tn__compute_dtype(dt);
    if (!tn_dtype_is_floating(dt))
        return extern_because(L, "an integral softmax");
    struct tn__cprog *P = L->P;
    struct tn__lv x = L->v[v], mx, s;
    x.x = tn__x_cast(P, acc, x.x);
    int rc = tn__realize_costly(L, &x); /* read three times: computed once */
    if (rc < 0)
        return rc;
    int nd = x.nd ? x.nd : 1;
    unsigned mask = x.nd ? 1u << wrap(tn__arg_int(L, n, "dim", -1), nd) : 0;
    rc = tn__reduce(L, &x, mask, TN_RED_MAX, acc, true, &mx);
    if (rc < 0)
        return rc;
    int sh = tn__x_bin(P, TN_X_SUB, acc, x.x, tn__bcast_lv(L, &mx, x.nd, x.sizes));
    struct tn__lv e = x;
    e.x = tn__x_un(P, TN_X_EXP, acc, sh);
    if ((rc = tn__reduce(L, &e, mask, TN_RED_SUM, acc, true, &s)) < 0)
        return rc;
    int sb = tn__bcast_lv(L, &s, x.nd, x.sizes);
    int y = log ? tn__x_bin(P, TN_X_SUB, acc, sh, tn__x_un(P, TN_X_LOG, acc, sb))
                : tn__x_bin(P, TN_X_DIV, acc, e.x, sb);
    return tn__set_out(L, 0, y, acc);
}

static int lower_softmax(struct tn__lctx *L, const struct tn_graph_node *n)
{
    return softmax(L, n, false);
}

static int lower_log_softmax(struct tn__lctx *L, const struct tn_graph_node *n)
{
    return softmax(L, n, true);
}

/* layer_norm over the last dims of normalized_shape: (x - mean) *
 * rsqrt(var + eps) * weight + bias, in float for half types;
 * native_layer_norm also gives the mean and rstd (keepdim) */
static int lower_layer_norm(struct tn__lctx *L, const struct tn_graph_node *n)
{
    int v = tn__arg_tensor(n, "input");
    int64_t ns[TN_MAX_DIMS];
    int k = tn__arg_ints(L, n, "normalized_shape", ns);
    enum tn_dtype dt = OUT(0)->dtype, acc = tn__compute_dtype(dt);
    struct tn__cprog *P = L->P;
    struct tn__lv x = L->v[v], mean, var;
    if (k < 0 || k > x.nd || !tn_dtype_is_floating(dt))
        return extern_because(L, "a shape it does not take");
    x.x = tn__x_cast(P, acc, x.x);
    int rc = tn__realize_costly(L, &x); /* read three times: computed once */
    if (rc < 0)
        return rc;
    unsigned mask = 0;
    for (int d = x.nd - k; d < x.nd; d++)
        mask |= 1u << d;
    rc = mean_of(L, &x, mask, acc, &mean);
    if (rc < 0)
        return rc;
    struct tn__lv c = x, sq = x;
    c.x = tn__x_bin(P, TN_X_SUB, acc, x.x, tn__bcast_lv(L, &mean, x.nd, x.sizes));
    sq.x = tn__x_bin(P, TN_X_MUL, acc, c.x, c.x);
    if ((rc = mean_of(L, &sq, mask, acc, &var)) < 0)
        return rc;
    int rstd = tn__x_un(P, TN_X_RSQRT, acc,
                        tn__x_bin(P, TN_X_ADD, acc, var.x,
                                  k_(L, acc, tn__arg_float(n, "eps", 1e-5))));
    struct tn__lv rs = var;
    rs.x = rstd;
    int y = tn__x_bin(P, TN_X_MUL, acc, c.x, tn__bcast_lv(L, &rs, x.nd, x.sizes));
    int w = tn__arg_tensor(n, "weight"), b = tn__arg_tensor(n, "bias");
    if (w >= 0)
        y = tn__x_bin(P, TN_X_MUL, acc, y, tn__x_cast(P, acc, tn__bcast(L, w, x.nd, x.sizes)));
    if (b >= 0)
        y = tn__x_bin(P, TN_X_ADD, acc, y, tn__x_cast(P, acc, tn__bcast(L, b, x.nd, x.sizes)));
    if ((rc = tn__set_out(L, 0, y, acc)) < 0)
        return rc;
    /* native_layer_norm: mean and rstd, shaped as the meta says */
    if (n->nout > 1 && OUT(1) && (rc = tn__set_out(L, 1, mean.x, acc)) < 0)
        return rc;
    return n->nout > 2 && OUT(2) ? tn__set_out(L, 2, rstd, acc) : TN_OK;
}

/* native_layer_norm_backward over rows of the normalised dims (N values),
 * from the saved mean and rstd: xhat = (x - mean) rstd, g = grad weight,
 * grad_input = rstd (g - sum(g)/N - xhat sum(g xhat)/N), grad_weight and
 * grad_bias the sums of grad xhat and of grad over the other dims; the
 * formula of PyTorch's CPU kernel, its two row sums one pass and the
 * column sums a kernel each. */
static int lower_layer_norm_backward(struct tn__lctx *L, const struct tn_graph_node *n)
{
    int gv = tn__arg_tensor(n, "grad_out"), v = tn__arg_tensor(n, "input");
    int mv = tn__arg_tensor(n, "mean"), rv = tn__arg_tensor(n, "rstd");
    int w = tn__arg_tensor(n, "weight");
    int64_t ns[TN_MAX_DIMS];
    int k = tn__arg_ints(L, n, "normalized_shape", ns);
    struct tn__cprog *P = L->P;
    struct tn__lv x = L->v[v];
    enum tn_dtype dt = L->v[v].dt, acc = tn__compute_dtype(dt);
    if (gv < 0 || mv < 0 || rv < 0 || k < 0 || k > x.nd)
        return extern_because(L, "an argument it does not take");
    if (dt != TN_FLOAT32 && dt != TN_FLOAT64) /* PyTorch rounds between */
        return extern_because(L, "a dtype other than float32 and float64");
    unsigned rows = 0, cols = 0; /* the normalised dims; the others */
    int64_t count = 1;
    for (int d = 0; d < x.nd; d++)
        if (d >= x.nd - k) {
            rows |= 1u << d;
            count *= x.sizes[d];
        } else
            cols |= 1u << d;
    int grad = tn__x_cast(P, acc, tn__bcast(L, gv, x.nd, x.sizes));
    int rstd = tn__x_cast(P, acc, tn__bcast(L, rv, x.nd, x.sizes));
    int c = tn__x_bin(P, TN_X_SUB, acc, tn__x_cast(P, acc, x.x),
                      tn__x_cast(P, acc, tn__bcast(L, mv, x.nd, x.sizes)));
    struct tn__lv xhat = x, g = x, gx = x, s1, s2;
    xhat.dt = g.dt = gx.dt = acc;
    xhat.x = tn__x_bin(P, TN_X_MUL, acc, c, rstd);
    g.x = w < 0 ? grad
                : tn__x_bin(P, TN_X_MUL, acc, grad, tn__x_cast(P, acc, tn__bcast(L, w, x.nd, x.sizes)));
    gx.x = tn__x_bin(P, TN_X_MUL, acc, g.x, xhat.x);
    int rc;
    if ((rc = tn__reduce(L, &g, rows, TN_RED_SUM, acc, true, &s1)) < 0 ||
        (rc = tn__reduce(L, &gx, rows, TN_RED_SUM, acc, true, &s2)) < 0)
        return rc;
    int inv = k_(L, acc, 1.0 / (double)(count ? count : 1));
    int a = tn__x_bin(P, TN_X_MUL, acc, tn__bcast_lv(L, &s1, x.nd, x.sizes), inv);
    int b = tn__x_bin(P, TN_X_MUL, acc, tn__bcast_lv(L, &s2, x.nd, x.sizes), inv);
    int dx = tn__x_bin(P, TN_X_SUB, acc, tn__x_bin(P, TN_X_SUB, acc, g.x, a),
                       tn__x_bin(P, TN_X_MUL, acc, xhat.x, b));
    if ((rc = tn__set_out(L, 0, tn__x_bin(P, TN_X_MUL, acc, dx, rstd), acc)) < 0)
        return rc;
    /* grad_weight and grad_bias, where asked for */
    for (int o = 1; o <= 2; o++) {
        struct tn__lv e = x, sum;
        e.dt = acc;
        e.x = o == 1 ? tn__x_bin(P, TN_X_MUL, acc, grad, xhat.x) : grad;
        if (n->nout <= o || !OUT(o))
            continue;
        if ((rc = tn__reduce(L, &e, cols, TN_RED_SUM, acc, false, &sum)) < 0 ||
            (rc = tn__set_out(L, o, sum.x, acc)) < 0)
            return rc;
    }
    return TN_OK;
}

/* _softmax_backward_data: output (grad - sum(grad output, dim)), in
 * float for the half types; over the last dim their sum is rounded to
 * the dtype, as PyTorch's kernel for that dim keeps it (its kernel for
 * the other dims keeps it in float) */
static int lower_softmax_backward(struct tn__lctx *L, const struct tn_graph_node *n)
{
    enum tn_dtype dt;
    int g, y;
    if (float_operands(L, n, "grad_output", "output", &dt, &g, &y))
        return 1;
    const struct tn_tensor *o = OUT(0);
    struct tn__lv gy = {.x = tn__x_bin(L->P, TN_X_MUL, dt, g, y), .nd = o->ndim, .dt = dt}, s;
    memcpy(gy.sizes, o->sizes, sizeof gy.sizes);
    int nd = gy.nd ? gy.nd : 1;
    unsigned mask = gy.nd ? 1u << wrap(tn__arg_int(L, n, "dim", -1), nd) : 0;
    int rc = tn__reduce(L, &gy, mask, TN_RED_SUM, dt, true, &s);
    if (rc < 0)
        return rc;
    if (dt != o->dtype && mask >> (nd - 1) & 1) /* PyTorch's last-dim kernel rounds it */
        s.x = tn__x_cast(L->P, dt, tn__x_cast(L->P, o->dtype, s.x));
    int d = tn__x_bin(L->P, TN_X_SUB, dt, g, tn__bcast_lv(L, &s, gy.nd, gy.sizes));
    return tn__set_out(L, 0, tn__x_bin(L->P, TN_X_MUL, dt, y, d), dt);
}

/* batch_norm in training mode without running statistics (what
 * functionalisation leaves: the statistics' update is ops of its own):
 * the batch's mean and biased variance per channel (dim 1), summed in
 * float64 as PyTorch's CPU kernel accumulates (acc_type<float> is double),
 * then y = (x - mean) * rsqrt(var + eps) as in eval. Not the eager
 * kernel's order of operations bit for bit (torch.compile's is not
 * either): tcompile_train_grad.bats holds it to PyTorch's gradients. */
static int batch_stats(struct tn__lctx *L, const struct tn_graph_node *n, struct tn__lv *x,
                       enum tn_dtype acc, int *mean, int *var, struct tn__lv *m,
                       struct tn__lv *v)
{
    struct tn__cprog *P = L->P;
    int64_t count = 1;
    unsigned mask = 0;
    for (int d = 0; d < x->nd; d++)
        if (d != 1) {
            mask |= 1u << d;
            count *= x->sizes[d];
        }
    if (count <= 1) /* PyTorch's error ('Expected more than 1 value per channel') */
        return extern_because(L, "one value per channel");
    if (tn__arg_tensor(n, "running_mean") >= 0 || tn__arg_tensor(n, "running_var") >= 0)
        return extern_because(L, "batch norm in training mode updates its statistics");
    int rc = tn__realize_costly(L, x); /* read three times: computed once */
    struct tn__lv xd = *x;
    xd.x = tn__x_cast(P, TN_FLOAT64, x->x);
    if (rc < 0 || (rc = mean_of(L, &xd, mask, TN_FLOAT64, m)) < 0)
        return rc;
    struct tn__lv sq = xd;
    int c = tn__x_bin(P, TN_X_SUB, TN_FLOAT64, xd.x, tn__bcast_lv(L, m, xd.nd, xd.sizes));
    sq.x = tn__x_bin(P, TN_X_MUL, TN_FLOAT64, c, c);
    if ((rc = mean_of(L, &sq, mask, TN_FLOAT64, v)) < 0)
        return rc;
    *mean = tn__x_cast(P, acc, tn__bcast_lv(L, m, x->nd, x->sizes));
    *var = tn__x_cast(P, acc, tn__bcast_lv(L, v, x->nd, x->sizes));
    return TN_OK;
}

/* batch_norm: per channel (dim 1), with the running statistics (eval) or
 * the batch's (training, batch_stats); native_batch_norm in training also
 * gives them (save_mean, save_invstd: [C], what tcompile grad's forward
 * saves for the backward) */
static int lower_batch_norm(struct tn__lctx *L, const struct tn_graph_node *n)
{
    bool legit = strstr(n->op->qualname, "no_training") != NULL;
    bool training = !legit && tn__arg_int(L, n, "training", 1);
    bool native = !strcmp(n->op->qualname, "aten::native_batch_norm");
    for (int k = 1; k < n->nout; k++)
        if (n->outs[k] >= 0 && L->uses[n->outs[k]] && !(native && training))
            return extern_because(L, "its saved statistics are read");
    int v = tn__arg_tensor(n, "input");
    enum tn_dtype dt = OUT(0)->dtype, acc = tn__compute_dtype(dt);
    struct tn__cprog *P = L->P;
    struct tn__lv xl = L->v[v], *x = &xl;
    if (x->nd < 2 || !tn_dtype_is_floating(dt))
        return extern_because(L, "a shape it does not take");
    if (training && dt != TN_FLOAT32 && dt != TN_FLOAT64) /* (b52e24c's rounding) */
        return extern_because(L, "training statistics of a half type round as the kernel's");
    /* a [C] vector along dim 1 of the input's space */
    struct tn__vmap m = {.nold = 1, .src = {1}, .mul = {1}};
    int ch[4];
    const char *names[4] = {"running_mean", "running_var", "weight", "bias"};
    for (int i = training ? 2 : 0; i < 4; i++) {
        int t = tn__arg_tensor(n, names[i]);
        ch[i] = t < 0 ? -1 : tn__x_cast(P, acc, tn__x_remap(P, L->v[t].x, &m));
        if (i < 2 && ch[i] < 0)
            return extern_because(L, "no running statistics");
    }
    struct tn__lv sm, sv;
    int rc = training ? batch_stats(L, n, x, acc, &ch[0], &ch[1], &sm, &sv) : TN_OK;
    if (rc != TN_OK)
        return rc;
    double eps = tn__arg_float(n, "eps", 1e-5);
    if (!training) {
        /* as PyTorch's CPU kernel: alpha = weight / sqrt(var + eps), beta =
         * bias - mean alpha, per channel (computed before the row's loop),
         * then x alpha + beta: a multiply and an add an element, not four */
        int a = tn__x_un(P, TN_X_RSQRT, acc, tn__x_bin(P, TN_X_ADD, acc, ch[1], k_(L, acc, eps)));
        if (ch[2] >= 0)
            a = tn__x_bin(P, TN_X_MUL, acc, a, ch[2]);
        int b = tn__x_bin(P, TN_X_MUL, acc, ch[0], a);
        b = ch[3] >= 0 ? tn__x_bin(P, TN_X_SUB, acc, ch[3], b) : tn__x_un(P, TN_X_NEG, acc, b);
        int y = tn__x_bin(P, TN_X_MUL, acc, tn__x_cast(P, acc, x->x), a);
        return tn__set_out(L, 0, tn__x_bin(P, TN_X_ADD, acc, y, b), acc);
    }
    int y = tn__x_bin(P, TN_X_SUB, acc, tn__x_cast(P, acc, x->x), ch[0]);
    y = tn__x_bin(P, TN_X_MUL, acc, y,
                  tn__x_un(P, TN_X_RSQRT, acc,
                           tn__x_bin(P, TN_X_ADD, acc, ch[1], k_(L, acc, eps))));
    if (native && training && n->nout == 3) { /* save_mean, save_invstd: [C] */
        int64_t c = x->sizes[1];
        if ((rc = tn__reshape(L, &sm, 1, &c)) < 0 || (rc = tn__reshape(L, &sv, 1, &c)) < 0)
            return rc;
        if (OUT(1) && (rc = tn__set_out(L, 1, tn__x_cast(P, acc, sm.x), acc)) < 0)
            return rc;
        int is = tn__x_un(P, TN_X_RSQRT, acc,
                          tn__x_bin(P, TN_X_ADD, acc, tn__x_cast(P, acc, sv.x), k_(L, acc, eps)));
        if (OUT(2) && (rc = tn__set_out(L, 2, is, acc)) < 0)
            return rc;
    }
    if (ch[2] >= 0)
        y = tn__x_bin(P, TN_X_MUL, acc, y, ch[2]);
    if (ch[3] >= 0)
        y = tn__x_bin(P, TN_X_ADD, acc, y, ch[3]);
    return tn__set_out(L, 0, y, acc);
}

/* ------------------------------------------------------ matrix products */

/* x [..., K] @ w.T [K, N] as one [M, K] x [K, N] product, then the
 * epilogue: + bias (linear), beta * self + alpha * product (addmm) */
static int product(struct tn__lctx *L, int xv, int wv, bool transpose_w, int bias, double beta,
                   double alpha)
{
    const struct tn_tensor *o = OUT(0);
    enum tn_dtype dt = o->dtype;
    if (dt != TN_FLOAT32 && dt != TN_FLOAT64)
        return extern_because(L, "a dtype BLAS does not take");
    struct tn__lv a = L->v[xv], b = L->v[wv], r;
    if (b.nd != 2 || a.nd < 1 || a.dt != dt || b.dt != dt)
        return extern_because(L, "shapes or dtypes it does not take");
    int64_t K = a.sizes[a.nd - 1], M = a.nd ? tn_numel(o) / (o->sizes[o->ndim - 1] ? o->sizes[o->ndim - 1] : 1) : 1;
    int rc = tn__reshape(L, &a, 2, (int64_t[]){M, K});
    if (rc < 0)
        return rc;
    if (transpose_w) {
        struct tn__vmap m = {.nold = 2, .src = {1, 0}, .mul = {1, 1}};
        if ((rc = tn__lv_remap(L, &b, &m, 2, (int64_t[]){b.sizes[1], b.sizes[0]}, &b)) < 0)
            return rc;
    }
    if ((rc = tn__matmul(L, &a, &b, &r)) < 0)
        return rc;
    if ((rc = tn__reshape(L, &r, o->ndim, o->sizes)) < 0)
        return rc;
    int y = r.x;
    if (alpha != 1)
        y = tn__x_bin(L->P, TN_X_MUL, dt, y, k_(L, dt, alpha));
    if (bias >= 0 && beta != 0) {
        int bx = tn__bcast(L, bias, o->ndim, o->sizes);
        if (bx < 0)
            return extern_because(L, "a bias it cannot broadcast");
        if (beta != 1)
            bx = tn__x_bin(L->P, TN_X_MUL, dt, bx, k_(L, dt, beta));
        y = tn__x_bin(L->P, TN_X_ADD, dt, y, tn__x_cast(L->P, dt, bx));
    }
    return tn__set_out(L, 0, y, dt);
}

static int lower_linear(struct tn__lctx *L, const struct tn_graph_node *n)
{
    return product(L, tn__arg_tensor(n, "input"), tn__arg_tensor(n, "weight"), true,
                   tn__arg_tensor(n, "bias"), 1, 1);
}

static int lower_addmm(struct tn__lctx *L, const struct tn_graph_node *n)
{
    return product(L, tn__arg_tensor(n, "mat1"), tn__arg_tensor(n, "mat2"), false,
                   tn__arg_tensor(n, "self"), tn__arg_float(n, "beta", 1),
                   tn__arg_float(n, "alpha", 1));
}

static int lower_mm(struct tn__lctx *L, const struct tn_graph_node *n)
{
    return product(L, tn__arg_tensor(n, "self"), tn__arg_tensor(n, "mat2"), false, -1, 0, 1);
}

/* matmul: of matrices, or of a stack of them by one matrix (a linear
 * layer's), one product; of batches, bmm.c's batched one. */
static int lower_matmul(struct tn__lctx *L, const struct tn_graph_node *n)
{
    int a = tn__arg_tensor(n, "self"), b = tn__arg_tensor(n, "other");
    if (a < 0 || b < 0 || L->v[a].x < 0 || L->v[b].x < 0)
        return extern_because(L, "operands it does not take");
    if (L->v[a].nd >= 2 && L->v[b].nd == 2)
        return product(L, a, b, false, -1, 0, 1);
    return tn__lower_batched_matmul(L, n);
}

/* ---------------------------------------------------------------- table */

static const struct {
    const char *name;
    tn__lower_fn fn;
} table[] = {
    {"aten::_log_softmax", lower_log_softmax},
    {"aten::_native_batch_norm_legit_no_training", lower_batch_norm},
    {"aten::_softmax", lower_softmax},
    {"aten::_softmax_backward_data", lower_softmax_backward},
    {"aten::_to_copy", lower_copy},
    {"aten::_unsafe_view", lower_reshape},
    {"aten::abs", lower_abs},
    {"aten::add.Scalar", lower_add},
    {"aten::add.Tensor", lower_add},
    {"aten::addmm", lower_addmm},
    {"aten::alias", lower_copy},
    {"aten::amax", lower_amax},
    {"aten::amin", lower_amin},
    {"aten::batch_norm", lower_batch_norm},
    {"aten::bmm", tn__lower_bmm},
    {"aten::broadcast_to", lower_expand},
    {"aten::ceil", lower_ceil},
    {"aten::clamp", lower_clamp},
    {"aten::clone", lower_copy},
    {"aten::contiguous", lower_copy},
    {"aten::cos", lower_cos},
    {"aten::detach", lower_copy},
    {"aten::div.Scalar", lower_div},
    {"aten::div.Tensor", lower_div},
    {"aten::dropout", lower_dropout},
    {"aten::eq.Scalar", lower_eq},
    {"aten::eq.Tensor", lower_eq},
    {"aten::erf", lower_erf},
    {"aten::exp", lower_exp},
    {"aten::expand", lower_expand},
    {"aten::expm1", lower_expm1},
    {"aten::fill.Scalar", lower_constant},
    {"aten::fill.Tensor", lower_constant},
    {"aten::flatten.using_ints", lower_reshape},
    {"aten::floor", lower_floor},
    {"aten::full", lower_constant},
    {"aten::full_like", lower_constant},
    {"aten::ge.Scalar", lower_ge},
    {"aten::ge.Tensor", lower_ge},
    {"aten::gelu", lower_gelu},
    {"aten::gt.Scalar", lower_gt},
    {"aten::gt.Tensor", lower_gt},
    {"aten::hardsigmoid", lower_hardsigmoid},
    {"aten::hardswish", lower_hardswish},
    {"aten::hardtanh", lower_hardtanh},
    {"aten::layer_norm", lower_layer_norm},
    {"aten::le.Scalar", lower_le},
    {"aten::le.Tensor", lower_le},
    {"aten::leaky_relu", lower_leaky_relu},
    {"aten::lift_fresh_copy", lower_copy},
    {"aten::linear", lower_linear},
    {"aten::log", lower_log},
    {"aten::log1p", lower_log1p},
    {"aten::log_softmax.int", lower_log_softmax},
    {"aten::logical_not", lower_logical_not},
    {"aten::lt.Scalar", lower_lt},
    {"aten::lt.Tensor", lower_lt},
    {"aten::matmul", lower_matmul},
    {"aten::maximum", lower_maximum},
    {"aten::mean", lower_mean},
    {"aten::mean.dim", lower_mean},
    {"aten::minimum", lower_minimum},
    {"aten::mm", lower_mm},
    {"aten::mul.Scalar", lower_mul},
    {"aten::mul.Tensor", lower_mul},
    {"aten::narrow", lower_narrow},
    {"aten::native_batch_norm", lower_batch_norm},
    {"aten::native_layer_norm", lower_layer_norm},
    {"aten::native_layer_norm_backward", lower_layer_norm_backward},
    {"aten::ne.Scalar", lower_ne},
    {"aten::ne.Tensor", lower_ne},
    {"aten::neg", lower_neg},
    {"aten::new_full", lower_constant},
    {"aten::new_ones", lower_constant},
    {"aten::new_zeros", lower_constant},
    {"aten::ones", lower_constant},
    {"aten::ones_like", lower_constant},
    {"aten::permute", lower_permute},
    {"aten::pow.Tensor_Scalar", lower_pow_scalar},
    {"aten::pow.Tensor_Tensor", lower_pow},
    {"aten::reciprocal", lower_reciprocal},
    {"aten::relu", lower_relu},
    {"aten::reshape", lower_reshape},
    {"aten::rsqrt", lower_rsqrt},
    {"aten::rsub.Scalar", lower_rsub},
    {"aten::select.int", lower_select},
    {"aten::sigmoid", lower_sigmoid},
    {"aten::silu", lower_silu},
    {"aten::sin", lower_sin},
    {"aten::slice.Tensor", lower_slice},
    {"aten::softmax.int", lower_softmax},
    {"aten::split.Tensor", lower_split},
    {"aten::split_with_sizes", lower_split},
    {"aten::sqrt", lower_sqrt},
    {"aten::squeeze", lower_squeeze},
    {"aten::squeeze.dim", lower_squeeze},
    {"aten::squeeze.dims", lower_squeeze},
    {"aten::std.correction", lower_std},
    {"aten::sub.Scalar", lower_sub},
    {"aten::sub.Tensor", lower_sub},
    {"aten::sum", lower_sum},
    {"aten::sum.dim_IntList", lower_sum},
    {"aten::t", lower_transpose},
    {"aten::tanh", lower_tanh},
    {"aten::threshold_backward", lower_threshold_backward},
    {"aten::to.dtype", lower_copy},
    {"aten::transpose.int", lower_transpose},
    {"aten::unbind.int", lower_unbind},
    {"aten::unflatten.int", lower_reshape},
    {"aten::unsqueeze", lower_unsqueeze},
    {"aten::var.correction", lower_var},
    {"aten::view", lower_reshape},
    {"aten::where.self", lower_where},
    {"aten::zeros", lower_constant},
    {"aten::zeros_like", lower_constant},
};

tn__lower_fn tn__decomp_find(const char *qualname)
{
    size_t lo = 0, hi = sizeof table / sizeof table[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(table[mid].name, qualname);
        if (!c)
            return table[mid].fn;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int tn__decomp_count(void)
{
    return (int)(sizeof table / sizeof table[0]);
}

const char *tn__decomp_name(int i)
{
    return i >= 0 && i < tn__decomp_count() ? table[i].name : NULL;
}
