/*
 * graph/builtin.c: the ops an exported graph names that lib/core
 * implements as plain functions outside the dispatcher (views, clone,
 * sym_size). Each gets a struct tn_op with PyTorch's schema arguments and a
 * boxed entry, so tn_graph_check and the interpreter treat them like the
 * registry's ops. They work on any device's tensors, Meta included.
 * An op that native_functions.yaml declares later takes precedence.
 */
#include "graph/internal.h"
#include "tensor/ops.h"

#include <string.h>

#define T(n) {n, "Tensor", TN_IV_TENSOR, false, false, false, NULL}
#define I(n, d) {n, "int", TN_IV_INT, false, false, false, d}
#define IL(n, d) {n, "SymInt[]", TN_IV_INTLIST, false, false, false, d}
#define OI(n) {n, "SymInt?", TN_IV_INT, true, false, false, "None"}
#define B(n, d) {n, "bool", TN_IV_BOOL, false, false, true, d}
#define F(n) {n, "float", TN_IV_DOUBLE, false, false, false, NULL}
/* MemoryFormat has no boxed tag: a graph may name it, we ignore it */
#define MF(n) {n, "MemoryFormat?", TN_IV_INT, true, false, true, "None"}

/* Pushes the view `t` as the one result. */
int tn__graph_result(const struct tn_op *op, struct tn_ivalue *st, struct tn_tensor *t)
{
    if (!t)
        return tn_error_prefix("%s", op->qualname);
    st[0].tag = TN_IV_TENSOR;
    st[0].v.t = t;
    return 1;
}

#define ARG_T(i, x)                                                             \
    struct tn_tensor *x;                                                        \
    if ((rc = tn_ivalue_tensor(op, st, n, i, &x)) < 0)                          \
        return rc
#define ARG_I(i, x)                                                             \
    int64_t x;                                                                  \
    if ((rc = tn_ivalue_int(op, st, n, i, &x)) < 0)                             \
        return rc
#define ARG_L(i, x, len)                                                        \
    int64_t x##_buf[TN_MAX_DIMS];                                               \
    const int64_t *x;                                                           \
    int len;                                                                    \
    if ((rc = tn_ivalue_ints(op, st, n, i, x##_buf, &x, &len)) < 0)             \
        return rc

static int b_view(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    ARG_L(1, size, len);
    bool reshape = !strcmp(op->name, "reshape") || !strcmp(op->name, "_unsafe_view");
    return tn__graph_result(op, st, reshape ? tn_reshape(self, size, len) : tn_view(self, size, len));
}

static int b_permute(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    ARG_L(1, dims, len);
    return tn__graph_result(op, st, tn_permute(self, dims, len));
}

static int b_transpose(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    ARG_I(1, d0);
    ARG_I(2, d1);
    return tn__graph_result(op, st, tn_transpose(self, d0, d1));
}

/* The `_as` ops and swapaxes/swapdims that export keeps as written (they are
 * CompositeImplicitAutograd in PyTorch, yet the training IR names them):
 * reshape_as and view_as take other's sizes, type_as its dtype (self
 * itself when the dtypes agree, as .to does); expand_as is factory.c's. */
static int b_as(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    ARG_T(1, other);
    if (!strcmp(op->name, "type_as"))
        return tn__graph_result(op, st, tn_to_dtype(self, other->dtype));
    if (!strcmp(op->name, "view_as"))
        return tn__graph_result(op, st, tn_view(self, other->sizes, other->ndim));
    return tn__graph_result(op, st, tn_reshape(self, other->sizes, other->ndim));
}

static int b_t(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    return tn__graph_result(op, st, tn_t(self));
}

/* mT, mH, adjoint, matrix_H: the last two dimensions swapped (the
 * conjugate too for mH, adjoint and matrix_H: the same for real dtypes);
 * numpy_T (.T): every dimension reversed. */
static int b_matrix_t(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    if (!strcmp(op->name, "numpy_T")) {
        int64_t dims[TN_MAX_DIMS];
        for (int i = 0; i < self->ndim; i++)
            dims[i] = self->ndim - 1 - i;
        return tn__graph_result(op, st, tn_permute(self, dims, self->ndim));
    }
    bool conj = strcmp(op->name, "mT") != 0;
    if (self->ndim < 2)
        return tn_set_error(TN_ESHAPE, "%s: tensor.%s is only supported on matrices or batches "
                            "of matrices. Got %d-D tensor.", op->qualname,
                            conj ? "mH" : "mT", self->ndim);
    if (conj && tn_dtype_is_complex(self->dtype))
        return tn_set_error(TN_EDTYPE, "%s: the conjugate view of a complex tensor is not "
                            "supported", op->qualname);
    return tn__graph_result(op, st, tn_transpose(self, -2, -1));
}

static int b_unsqueeze(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    ARG_I(1, dim);
    return tn__graph_result(op, st, tn_unsqueeze(self, dim));
}

static int b_squeeze(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    if (op->nargs == 1)
        return tn__graph_result(op, st, tn_squeeze(self));
    ARG_L(1, dims, len);
    return tn__graph_result(op, st, tn_squeeze_dims(self, dims, len));
}

static int b_expand(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    ARG_L(1, size, len);
    return tn__graph_result(op, st, tn_expand(self, size, len));
}

static int b_flatten(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    ARG_I(1, start);
    ARG_I(2, end);
    return tn__graph_result(op, st, tn_flatten(self, start, end));
}

static int b_select(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    ARG_I(1, dim);
    ARG_I(2, index);
    return tn__graph_result(op, st, tn_select(self, dim, index));
}

static int b_slice(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    ARG_I(1, dim);
    int64_t start = 0, end = TN_END, step;
    if (n > 2 && st[2].tag != TN_IV_NONE && (rc = tn_ivalue_int(op, st, n, 2, &start)) < 0)
        return rc;
    if (n > 3 && st[3].tag != TN_IV_NONE && (rc = tn_ivalue_int(op, st, n, 3, &end)) < 0)
        return rc;
    if ((rc = tn_ivalue_int(op, st, n, 4, &step)) < 0)
        return rc;
    return tn__graph_result(op, st, tn_slice(self, dim, start, end, step));
}

/* as_strided(self, size, stride, storage_offset=None): None keeps self's
 * offset, as PyTorch's. */
static int b_as_strided(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    ARG_L(1, size, len);
    ARG_L(2, stride, slen);
    int64_t off = self->offset;
    if (n > 3 && st[3].tag != TN_IV_NONE && (rc = tn_ivalue_int(op, st, n, 3, &off)) < 0)
        return rc;
    if (slen != len)
        return tn_set_error(TN_ESHAPE, "%s: mismatch in length of strides and shape",
                            op->qualname);
    return tn__graph_result(op, st, tn_as_strided(self, size, len, stride, off));
}

/* diagonal(self, offset=0, dim1=0, dim2=1): a view (core's tn_diagonal,
 * DiagonalBackward0 under autograd), in the core ATen set. */
static int b_diagonal(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    ARG_I(1, offset);
    ARG_I(2, d1);
    ARG_I(3, d2);
    return tn__graph_result(op, st, tn_diagonal(self, offset, d1, d2));
}

/* unfold(self, dimension, size, step): a view of the windows (core's
 * tn_unfold, UnfoldBackward0 under autograd: overlapping windows' gradients
 * summed where they share an element, as unfold_backward sums them). */
static int b_unfold(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    ARG_I(1, dim);
    ARG_I(2, size);
    ARG_I(3, step);
    return tn__graph_result(op, st, tn_unfold(self, dim, size, step));
}

static int b_clone(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    /* clone(memory_format=contiguous/channels_last(_3d)): a copy in that
     * format (_to_copy's); None or preserve: self's strides kept */
    if (!strcmp(op->name, "clone") && n > 1 && st[1].tag == TN_IV_INT && st[1].v.i != 1)
        return tn__graph_result(op, st, tn_underscore_to_copy(self, TN_DTYPE_UNSET, NULL, NULL, NULL,
                                                    false, &st[1].v.i));
    if (!strcmp(op->name, "clone"))
        return tn__graph_result(op, st, tn_clone(self));
    if (!strcmp(op->name, "contiguous"))
        return tn__graph_result(op, st, tn_contiguous(self));
    if (!strcmp(op->name, "detach"))
        return tn__graph_result(op, st, tn_detach(self));
    return tn__graph_result(op, st, tn_retain(self)); /* alias */
}

/* dropout(input, p, train): an exported eval graph holds train=False */
static int b_dropout(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    bool train;
    ARG_T(0, self);
    if ((rc = tn_ivalue_bool(op, st, n, 2, &train)) < 0)
        return rc;
    if (train)
        return tn_set_error(TN_EINVAL, "%s: dropout in training mode is not supported "
                            "(export the model in eval mode)", op->qualname);
    return tn__graph_result(op, st, tn_retain(self));
}

static int b_unflatten(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    ARG_I(1, dim);
    ARG_L(2, sizes, len);
    return tn__graph_result(op, st, tn_unflatten(self, dim, sizes, len));
}

/* What torch.export (2.x) puts after a .to(dtype): the tensor's sizes and
 * dtype as traced (strides are not compared: ours may differ). No result. */
static int b_assert_metadata(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, a);
    ARG_L(1, size, len);
    enum tn_dtype dt;
    if ((rc = tn_ivalue_dtype(op, st, n, 3, &dt)) < 0)
        return rc;
    char x[128], y[128];
    if (size && (len != a->ndim || memcmp(size, a->sizes, sizeof *size * (size_t)len)))
        return tn_set_error(TN_ESHAPE, "%s: the tensor's sizes are %s, the graph says %s",
                            op->qualname, tn_shape_format(a->sizes, a->ndim, x, sizeof x),
                            tn_shape_format(size, len, y, sizeof y));
    if (dt != TN_DTYPE_UNSET && dt != a->dtype)
        return tn_set_error(TN_EDTYPE, "%s: the tensor's dtype is %s, the graph says %s",
                            op->qualname, tn_dtype_name(a->dtype), tn_dtype_name(dt));
    return 0;
}

/* sym_size.int, sym_stride.int (a dim's size or stride), sym_numel and
 * sym_storage_offset: the int, on Meta too */
static int b_sym_size(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_T(0, self);
    int64_t v;
    if (!strcmp(op->name, "sym_numel")) {
        v = tn_numel(self);
    } else if (!strcmp(op->name, "sym_storage_offset")) {
        v = self->offset;
    } else {
        ARG_I(1, dim);
        int d = tn_wrap_dim(dim, self->ndim);
        if (d < 0)
            return tn_error_prefix("%s", op->qualname);
        v = !strcmp(op->name, "sym_stride") ? self->strides[d] : self->sizes[d];
    }
    st[0].tag = TN_IV_INT;
    st[0].v.i = v;
    return 1;
}

/* _assert_scalar: export's runtime check of a SymBool (u0 >= 0 after
 * nonzero): its message when false. The Meta pass before a run knows no
 * data-dependent size, so it checks nothing there. */
static int b_assert_scalar(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_I(0, self);
    if (!self && !tn__graph_meta_devices)
        return tn_set_error(TN_ERUNTIME, "%s",
                            n > 1 && st[1].tag == TN_IV_STR ? st[1].v.str : "assertion failed");
    return 0;
}

/* sym_constrain_range_for_size(size, min, max): export's range of a
 * data-dependent size, checked as _assert_scalar checks */
static int b_constrain(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    ARG_I(0, size);
    bool lo = n > 1 && st[1].tag == TN_IV_INT, hi = n > 2 && st[2].tag == TN_IV_INT;
    if (!tn__graph_meta_devices && ((lo && size < st[1].v.i) || (hi && size > st[2].v.i)))
        return tn_set_error(TN_ERUNTIME, "%s: %lld is out of the range [%lld, %lld]",
                            op->qualname, (long long)size, lo ? (long long)st[1].v.i : 0LL,
                            hi ? (long long)st[2].v.i : (long long)INT64_MAX);
    return 0;
}

static const struct tn_arg_schema a_view[] = {T("self"), IL("size", NULL)};
static const struct tn_arg_schema a_reshape[] = {T("self"), IL("shape", NULL)};
static const struct tn_arg_schema a_permute[] = {T("self"), IL("dims", NULL)};
static const struct tn_arg_schema a_transpose[] = {T("self"), I("dim0", NULL), I("dim1", NULL)};
static const struct tn_arg_schema a_self[] = {T("self")};
static const struct tn_arg_schema a_as[] = {T("self"), T("other")};
static const struct tn_arg_schema a_swapaxes[] = {T("self"), I("axis0", NULL), I("axis1", NULL)};
static const struct tn_arg_schema a_unsqueeze[] = {T("self"), I("dim", NULL)};
static const struct tn_arg_schema a_squeeze_dims[] = {T("self"), IL("dim", NULL)};
static const struct tn_arg_schema a_expand[] = {T("self"), IL("size", NULL),
                                                B("implicit", "False")};
/* broadcast_to is expand without `implicit` (what torch.masked's ops export) */
static const struct tn_arg_schema a_broadcast_to[] = {T("self"), IL("size", NULL)};
static const struct tn_arg_schema a_flatten[] = {T("self"), I("start_dim", "0"),
                                                 I("end_dim", "-1")};
static const struct tn_arg_schema a_select[] = {T("self"), I("dim", NULL), I("index", NULL)};
static const struct tn_arg_schema a_slice[] = {T("self"), I("dim", "0"), OI("start"), OI("end"),
                                               I("step", "1")};
static const struct tn_arg_schema a_as_strided[] = {T("self"), IL("size", NULL),
                                                    IL("stride", NULL), OI("storage_offset")};
static const struct tn_arg_schema a_diagonal[] = {T("self"), I("offset", "0"), I("dim1", "0"),
                                                  I("dim2", "1")};
/* linalg_diagonal(A, *, offset=0, dim1=-2, dim2=-1): diagonal's view with
 * the last two dims as the default */
static const struct tn_arg_schema a_linalg_diagonal[] = {T("A"), I("offset", "0"),
                                                         I("dim1", "-2"), I("dim2", "-1")};
static const struct tn_arg_schema a_unfold[] = {T("self"), I("dimension", NULL),
                                                I("size", NULL), I("step", NULL)};
static const struct tn_arg_schema a_clone[] = {T("self"), MF("memory_format")};
static const struct tn_arg_schema a_dropout[] = {T("input"), F("p"),
                                                 {"train", "bool", TN_IV_BOOL, false, false,
                                                  false, NULL}};
static const struct tn_arg_schema a_unflatten[] = {T("self"), I("dim", NULL),
                                                   IL("sizes", NULL)};
static const struct tn_arg_schema a_sym_size[] = {T("self"), I("dim", NULL)};
static const struct tn_arg_schema a_assert_scalar[] = {
    I("self", NULL), {"assert_msg", "str", TN_IV_STR, false, false, false, NULL}};
static const struct tn_arg_schema a_constrain[] = {I("size", NULL), OI("min"), OI("max")};
static const struct tn_arg_schema a_assert_metadata[] = {
    T("a"), {"size", "SymInt[]?", TN_IV_INTLIST, true, false, false, "None"},
    {"stride", "SymInt[]?", TN_IV_INTLIST, true, false, false, "None"},
    {"dtype", "ScalarType?", TN_IV_DTYPE, true, false, false, "None"},
    {"device", "Device?", TN_IV_STR, true, false, true, "None"},
    {"layout", "Layout?", TN_IV_INT, true, false, true, "None"}};

#define OP TN__GRAPH_OP

static const struct tn_op builtins[] = {
    OP("view", "", a_view, b_view, 1),
    OP("_unsafe_view", "", a_view, b_view, 1),
    OP("reshape", "", a_reshape, b_view, 1),
    OP("permute", "", a_permute, b_permute, 1),
    OP("transpose", ".int", a_transpose, b_transpose, 1),
    OP("swapaxes", "", a_swapaxes, b_transpose, 1),
    OP("swapdims", "", a_transpose, b_transpose, 1),
    OP("reshape_as", "", a_as, b_as, 1),
    OP("view_as", "", a_as, b_as, 1),
    OP("type_as", "", a_as, b_as, 1),
    OP("t", "", a_self, b_t, 1),
    OP("mT", "", a_self, b_matrix_t, 1),
    OP("mH", "", a_self, b_matrix_t, 1),
    OP("adjoint", "", a_self, b_matrix_t, 1),
    OP("matrix_H", "", a_self, b_matrix_t, 1),
    OP("numpy_T", "", a_self, b_matrix_t, 1),
    OP("unsqueeze", "", a_unsqueeze, b_unsqueeze, 1),
    OP("squeeze", "", a_self, b_squeeze, 1),
    OP("squeeze", ".dim", a_unsqueeze, b_squeeze, 1),
    OP("squeeze", ".dims", a_squeeze_dims, b_squeeze, 1),
    OP("expand", "", a_expand, b_expand, 1),
    OP("broadcast_to", "", a_broadcast_to, b_expand, 1),
    OP("flatten", ".using_ints", a_flatten, b_flatten, 1),
    OP("select", ".int", a_select, b_select, 1),
    OP("slice", ".Tensor", a_slice, b_slice, 1),
    OP("as_strided", "", a_as_strided, b_as_strided, 1),
    OP("diagonal", "", a_diagonal, b_diagonal, 1),
    OP("linalg_diagonal", "", a_linalg_diagonal, b_diagonal, 1),
    OP("unfold", "", a_unfold, b_unfold, 1),
    OP("clone", "", a_clone, b_clone, 1),
    OP("contiguous", "", a_clone, b_clone, 1),
    OP("detach", "", a_self, b_clone, 1),
    OP("alias", "", a_self, b_clone, 1),
    /* torch.tensor([...]) in a forward: a constant lifted, then copied */
    OP("lift_fresh_copy", "", a_self, b_clone, 1),
    OP("dropout", "", a_dropout, b_dropout, 1),
    OP("sym_size", ".int", a_sym_size, b_sym_size, 1),
    OP("_assert_scalar", "", a_assert_scalar, b_assert_scalar, 0),
    OP("sym_constrain_range_for_size", "", a_constrain, b_constrain, 0),
    OP("sym_constrain_range", "", a_constrain, b_constrain, 0),
    OP("sym_stride", ".int", a_sym_size, b_sym_size, 1),
    OP("sym_numel", "", a_self, b_sym_size, 1),
    OP("sym_storage_offset", "", a_self, b_sym_size, 1),
    OP("unflatten", ".int", a_unflatten, b_unflatten, 1),
    OP("_assert_tensor_metadata", "", a_assert_metadata, b_assert_metadata, 0),
};

const struct tn_op *tn__graph_find(const struct tn_op *ops, size_t n, const char *qualname)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(ops[i].qualname, qualname))
            return &ops[i];
    return NULL;
}

const struct tn_op *tn__graph_builtin(const char *qualname)
{
    const struct tn_op *sym = tn__graph_sym_op(qualname);
    if (sym)
        return sym;
    const struct tn_op *b = tn__graph_find(builtins, sizeof builtins / sizeof *builtins, qualname);
    if (b)
        return b;
    const struct tn_op *f = tn__graph_factory(qualname);
    return f ? f : tn__graph_find(tn__graph_randoms, tn__graph_nrandoms, qualname);
}

/* "torch.ops.aten.addmm.default" -> "aten::addmm", ".int" kept. */
const struct tn_op *tn_graph_op(const char *target)
{
    static const char prefix[] = "torch.ops.";
    static const char *const pyops[] = {"_operator.", "torch.", "math."};
    char q[256];
    for (size_t i = 0; i < sizeof pyops / sizeof *pyops; i++) {
        size_t k = strlen(pyops[i]);
        if (strncmp(target, pyops[i], k) || !strncmp(target, prefix, sizeof prefix - 1) ||
            strlen(target) >= 64)
            continue;
        /* Python's operators on SymInts, SymFloats and SymBools:
         * _operator.ge -> _operator::ge, torch.sym_float -> torch::sym_float */
        snprintf(q, sizeof q, "%.*s::%s", (int)k - 1, target, target + k);
        const struct tn_op *op = tn__graph_sym_op(q);
        if (op)
            return op;
        tn_set_error(TN_EINVAL, "unsupported target '%s' (an operation on SymInts or SymFloats "
                     "tensorkit does not know)", target);
        return NULL;
    }
    if (strncmp(target, prefix, sizeof prefix - 1) || strlen(target) >= sizeof q) {
        tn_set_error(TN_EINVAL, "unsupported target '%s' (not torch.ops.<namespace>.<op>."
                     "<overload>)", target);
        return NULL;
    }
    const char *ns = target + sizeof prefix - 1;
    const char *dot = strchr(ns, '.');
    const char *last = strrchr(ns, '.');
    if (!dot || dot == last || dot == ns) {
        tn_set_error(TN_EINVAL, "unsupported target '%s' (no overload)", target);
        return NULL;
    }
    int nslen = (int)(dot - ns);
    int namelen = (int)(last - dot - 1);
    if (!strcmp(last + 1, "default"))
        snprintf(q, sizeof q, "%.*s::%.*s", nslen, ns, namelen, dot + 1);
    else
        snprintf(q, sizeof q, "%.*s::%.*s.%s", nslen, ns, namelen, dot + 1, last + 1);
    const struct tn_op *op = tn_op_find(q);
    if (op)
        return op;
    if ((op = tn__graph_builtin(q))) {
        tn_clear_error();
        return op;
    }
    tn_set_error(TN_EINVAL, "unknown target '%s' (no operator %s)", target, q);
    return NULL;
}
