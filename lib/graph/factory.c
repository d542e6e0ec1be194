/*
 * graph/factory.c: the factory ops an exported graph names (arange, zeros,
 * ones, full, scalar_tensor, their _like and new_ forms, linspace and
 * logspace in their four overloads each, tril_indices and triu_indices;
 * the random ones are random.c's)
 * and two aliases
 * (__and__.Tensor, expand_as) and pow.Scalar, over lib/core's constructors, which stay
 * plain functions outside the dispatcher as the views do (builtin.c).
 * Layout and pin_memory are taken and ignored (strided, CPU); the _like
 * forms' memory_format is PyTorch's (preserve by default); the device is
 * the CPU, or self's for the _like and new_ forms, except while
 * tn_graph_check's Meta pass runs, when the graphs's own factories make Meta
 * tensors like every other value there.
 */
#include "graph/internal.h"

#include <string.h>

#include <tensor/ops.h>

/* Per thread: tn_graph_check sets it around its Meta pass, and a graph that
 * another thread runs meanwhile must keep making real tensors. */
_Thread_local bool tn__graph_meta_factories;
_Thread_local bool tn__graph_meta_devices;

#define T(n) {n, "Tensor", TN_IV_TENSOR, false, false, false, NULL}
#define S(n) {n, "Scalar", TN_IV_SCALAR, false, false, false, NULL}
#define SD(n, d) {n, "Scalar", TN_IV_SCALAR, false, false, false, d}
#define IL(n) {n, "SymInt[]", TN_IV_INTLIST, false, false, false, NULL}
/* the keyword arguments every factory takes: dtype read, the rest ignored */
#define OPTS                                                                   \
    {"dtype", "ScalarType?", TN_IV_DTYPE, true, false, true, "None"},          \
    {"layout", "Layout?", TN_IV_NONE, true, false, true, "None"},              \
    {"device", "Device?", TN_IV_NONE, true, false, true, "None"},              \
    {"pin_memory", "bool?", TN_IV_BOOL, true, false, true, "None"}
#define MF {"memory_format", "MemoryFormat?", TN_IV_INT, true, false, true, "None"}

static const struct tn_arg_schema a_arange[] = {S("end"), OPTS};
static const struct tn_arg_schema a_arange_start[] = {S("start"), S("end"), OPTS};
static const struct tn_arg_schema a_arange_step[] = {S("start"), S("end"), SD("step", "1"),
                                                     OPTS};
static const struct tn_arg_schema a_sized[] = {IL("size"), OPTS};
static const struct tn_arg_schema a_full[] = {IL("size"), S("fill_value"), OPTS};
static const struct tn_arg_schema a_scalar_tensor[] = {S("s"), OPTS};
static const struct tn_arg_schema a_like[] = {T("self"), OPTS, MF};
static const struct tn_arg_schema a_full_like[] = {T("self"), S("fill_value"), OPTS, MF};
static const struct tn_arg_schema a_new[] = {T("self"), IL("size"), OPTS};
static const struct tn_arg_schema a_new_full[] = {T("self"), IL("size"), S("fill_value"), OPTS};
static const struct tn_arg_schema a_empty[] = {IL("size"), OPTS, MF};
static const struct tn_arg_schema a_empty_strided[] = {IL("size"), IL("stride"), OPTS};
static const struct tn_arg_schema a_two[] = {T("self"), T("other")};
static const struct tn_arg_schema a_pow_scalar[] = {S("self"), T("exponent")};

#define INT(n, d) {n, "int", TN_IV_INT, false, false, false, d}
static const struct tn_arg_schema a_tri[] = {INT("row", NULL), INT("col", NULL), INT("offset", "0"),
                                             OPTS};
#define STEPS {"steps", "int", TN_IV_INT, false, false, false, NULL}
#define BASE {"base", "float", TN_IV_DOUBLE, false, false, false, "10.0"}
static const struct tn_arg_schema a_lin_ss[] = {S("start"), S("end"), STEPS, OPTS};
static const struct tn_arg_schema a_lin_tt[] = {T("start"), T("end"), STEPS, OPTS};
static const struct tn_arg_schema a_lin_ts[] = {T("start"), S("end"), STEPS, OPTS};
static const struct tn_arg_schema a_lin_st[] = {S("start"), T("end"), STEPS, OPTS};
static const struct tn_arg_schema a_log_ss[] = {S("start"), S("end"), STEPS, BASE, OPTS};
static const struct tn_arg_schema a_log_tt[] = {T("start"), T("end"), STEPS, BASE, OPTS};
static const struct tn_arg_schema a_log_ts[] = {T("start"), S("end"), STEPS, BASE, OPTS};
static const struct tn_arg_schema a_log_st[] = {S("start"), T("end"), STEPS, BASE, OPTS};

/* The tensor t, or a Meta tensor of its sizes and dtype when `meta`. */
static int place(const struct tn_op *op, struct tn_ivalue *st, struct tn_tensor *t, bool meta)
{
    if (t && meta) {
        const struct tn_device m = {TN_DEVICE_META, -1};
        struct tn_tensor *r = tn_empty_on(t->sizes, t->ndim, t->dtype, m);
        tn_release(t);
        t = r;
    }
    if (!t)
        return tn_error_prefix("%s", op->qualname);
    st[0].tag = TN_IV_TENSOR;
    st[0].v.t = t;
    return 1;
}

static bool on_meta(const struct tn_tensor *t)
{
    return t->device.type == TN_DEVICE_META;
}

/* arange, zeros, ones, full, scalar_tensor: no tensor argument; the
 * schema's dtype is the argument after the leading ones. */
static int f_plain(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc, lead = op->nargs - 4;
    enum tn_dtype dt;
    if ((rc = tn_ivalue_dtype(op, st, n, lead, &dt)) < 0)
        return rc;
    struct tn_scalar s[3];
    int64_t buf[TN_MAX_DIMS];
    const int64_t *size = NULL;
    int len = 0;
    for (int i = 0; i < lead; i++) {
        if (op->args[i].tag == TN_IV_INTLIST)
            rc = tn_ivalue_ints(op, st, n, i, buf, &size, &len);
        else
            rc = tn_ivalue_scalar(op, st, n, i, &s[i]);
        if (rc < 0)
            return rc;
    }
    struct tn_tensor *t;
    if (!strcmp(op->name, "arange"))
        t = lead == 1 ? tn_arange(tn_int(0), s[0], tn_int(1), dt)
                      : tn_arange(s[0], s[1], lead == 3 ? s[2] : tn_int(1), dt);
    else if (!strcmp(op->name, "scalar_tensor"))
        t = tn_scalar_tensor(s[0], dt == TN_DTYPE_UNSET ? TN_FLOAT32 : dt);
    else if (!strcmp(op->name, "full"))
        t = tn_full(size, len, s[1], dt);
    else if (!strcmp(op->name, "ones"))
        t = tn_ones(size, len, dt);
    else
        t = tn_zeros(size, len, dt);
    return place(op, st, t, tn__graph_meta_factories);
}

/* zeros_like, ones_like, full_like: self's shape, dtype unless given, and
 * device; new_zeros, new_ones, new_full: the size given, self's dtype
 * unless given, self's device. */
static int f_self(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    struct tn_tensor *self;
    if ((rc = tn_ivalue_tensor(op, st, n, 0, &self)) < 0)
        return rc;
    bool is_new = !strncmp(op->name, "new_", 4);
    bool full = strstr(op->name, "full") != NULL;
    int64_t buf[TN_MAX_DIMS];
    const int64_t *size = self->sizes;
    int len = self->ndim;
    if (is_new && (rc = tn_ivalue_ints(op, st, n, 1, buf, &size, &len)) < 0)
        return rc;
    struct tn_scalar v = tn_int(strstr(op->name, "ones") ? 1 : 0);
    if (full && (rc = tn_ivalue_scalar(op, st, n, is_new ? 2 : 1, &v)) < 0)
        return rc;
    enum tn_dtype dt;
    if ((rc = tn_ivalue_dtype(op, st, n, (is_new ? 2 : 1) + full, &dt)) < 0)
        return rc;
    if (dt == TN_DTYPE_UNSET)
        dt = self->dtype;
    /* the _like forms' memory_format (c10's values; None: preserve):
     * contiguous, or channels_last(_3d) as _to_copy lays them out */
    int64_t mf = 1;
    if (!is_new && n == op->nargs && st[n - 1].tag == TN_IV_INT)
        mf = st[n - 1].v.i;
    struct tn_tensor *t;
    if (mf == 2 || mf == 3) {
        t = tn_underscore_to_copy(self, dt, NULL, NULL, NULL, false, &mf);
        if (t && !on_meta(t) && tn_fill_(t, v) < 0) {
            tn_release(t);
            t = NULL;
        }
        return place(op, st, t, false);
    }
    if (is_new || mf == 0)
        t = tn_full(size, len, v, dt);
    else if (on_meta(self)) /* no values; preserve_format's strides as below */
        return place(op, st, tn_empty_like(self, dt), false);
    else /* PyTorch's preserve_format: self's strides where dense */
        t = tn_full_like(self, v, dt);
    return place(op, st, t, on_meta(self));
}

/* __and__.Tensor is bitwise_and; expand_as is expand to other's sizes. */
/* empty.memory_format and empty_strided (core ATen): zeros (any values
 * will do, as for empty_like), laid out as asked: contiguous, channels_last
 * (_3d) as _to_copy lays them out, or the given strides; on Meta too (a
 * storage as long as the strides reach, viewed with them). */
static int f_empty(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    bool strided = !strcmp(op->name, "empty_strided");
    int64_t buf[TN_MAX_DIMS], sbuf[TN_MAX_DIMS];
    const int64_t *size = NULL, *stride = NULL;
    int len = 0, slen = 0;
    enum tn_dtype dt;
    if ((rc = tn_ivalue_ints(op, st, n, 0, buf, &size, &len)) < 0 ||
        (strided && (rc = tn_ivalue_ints(op, st, n, 1, sbuf, &stride, &slen)) < 0) ||
        (rc = tn_ivalue_dtype(op, st, n, strided ? 2 : 1, &dt)) < 0)
        return rc;
    if (strided && slen != len)
        return tn_set_error(TN_ESHAPE, "%s: mismatch in length of strides and shape",
                            op->qualname);
    int64_t mf = 1;
    if (!strided && n == op->nargs && st[n - 1].tag == TN_IV_INT)
        mf = st[n - 1].v.i;
    struct tn_tensor *t = NULL;
    if (tn__graph_meta_factories) {
        const struct tn_device m = {TN_DEVICE_META, -1};
        if (!strided)
            t = tn_empty_on(size, len, dt, m);
    } else if (!strided) {
        t = tn_zeros(size, len, dt);
    }
    if (!strided) {
        if (t && (mf == 2 || mf == 3)) {
            struct tn_tensor *c =
                tn_underscore_to_copy(t, t->dtype, NULL, NULL, NULL, false, &mf);
            tn_release(t);
            t = c;
        }
        return place(op, st, t, false);
    }
    if (tn__graph_meta_factories) {
        const struct tn_device m = {TN_DEVICE_META, -1};
        int64_t extent = 1;
        for (int i = 0; i < len; i++)
            extent = size[i] == 0 ? 0 : extent + (extent ? (size[i] - 1) * stride[i] : 0);
        struct tn_tensor *base = tn_empty_on(&extent, 1, dt, m);
        t = base ? tn_as_strided(base, size, len, stride, 0) : NULL;
        tn_release(base);
        return place(op, st, t, false);
    }
    t = tn_empty_strided(size, len, stride, dt);
    if (t && tn_fill_(t, tn_int(0)) < 0) {
        tn_release(t);
        t = NULL;
    }
    return place(op, st, t, false);
}

static int f_alias(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    struct tn_tensor *self, *other;
    if ((rc = tn_ivalue_tensor(op, st, n, 0, &self)) < 0 ||
        (rc = tn_ivalue_tensor(op, st, n, 1, &other)) < 0)
        return rc;
    struct tn_tensor *t = !strcmp(op->name, "expand_as")
                              ? tn_expand(self, other->sizes, other->ndim)
                              : tn_bitwise_and(self, other);
    return place(op, st, t, false);
}

/* pow.Scalar (a number to a tensor's powers, as 10000 ** arange in the
 * sinusoidal position encodings of timm's XCiT and EdgeNeXt): the number as
 * a 0-dim tensor of its kind's default dtype, which promotes as PyTorch's
 * wrapped number does; the exponent's gradient through pow. (Not declared
 * in native_functions.yaml: its C name would take pow.Tensor_Scalar's.) */
static int f_pow_scalar(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    struct tn_scalar v;
    struct tn_tensor *e;
    if ((rc = tn_ivalue_scalar(op, st, n, 0, &v)) < 0 ||
        (rc = tn_ivalue_tensor(op, st, n, 1, &e)) < 0)
        return rc;
    enum tn_dtype dt = v.kind == TN_SCALAR_FLOAT ? TN_FLOAT32
                     : v.kind == TN_SCALAR_INT ? TN_INT64
                     : v.kind == TN_SCALAR_BOOL ? TN_BOOL : TN_COMPLEX64;
    struct tn_tensor *b = on_meta(e) ? tn_empty_on(NULL, 0, dt, e->device) : tn_scalar_tensor(v, dt);
    struct tn_tensor *t = b ? tn_pow(b, e) : NULL;
    tn_release(b);
    return place(op, st, t, false);
}

/* linspace and logspace (.default, .Tensor_Tensor, .Tensor_Scalar,
 * .Scalar_Tensor, as torch.export writes them): a tensor start or end must
 * be 0-dim (PyTorch's words) and gives its item, as PyTorch's overloads
 * do; the dtype defaults to the default dtype. */
static int f_space(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    bool lg = op->name[1] == 'o';
    int rc, nt = 0, dims[2] = {0, 0};
    struct tn_scalar s[2];
    int64_t steps;
    double base = 10;
    enum tn_dtype dt;
    bool meta = tn__graph_meta_factories;
    for (int i = 0; i < 2; i++) {
        if (op->args[i].tag != TN_IV_TENSOR) {
            if ((rc = tn_ivalue_scalar(op, st, n, i, &s[i])) < 0)
                return rc;
            continue;
        }
        struct tn_tensor *t;
        if ((rc = tn_ivalue_tensor(op, st, n, i, &t)) < 0)
            return rc;
        nt += t->ndim != 0;
        dims[i] = t->ndim;
        meta = meta || on_meta(t);
        if (t->ndim == 0 && !on_meta(t))
            s[i] = tn_item(t);
    }
    if (nt) {
        bool both = op->args[0].tag == TN_IV_TENSOR && op->args[1].tag == TN_IV_TENSOR;
        const char *sp = lg ? "logspace" : "linspace";
        if (both)
            return tn_set_error(TN_ESHAPE, "%s only supports 0-dimensional start and end "
                                "tensors, but got start with %d dimension(s) and end with %d "
                                "dimension(s).", sp, dims[0], dims[1]);
        bool start = op->args[0].tag == TN_IV_TENSOR;
        return tn_set_error(TN_ESHAPE, "%s only supports 0-dimensional start and end tensors, "
                            "but got %s with %d dimension(s).", sp, start ? "start" : "end",
                            dims[start ? 0 : 1]);
    }
    if ((rc = tn_ivalue_int(op, st, n, 2, &steps)) < 0 ||
        (lg && (rc = tn_ivalue_double(op, st, n, 3, &base)) < 0) ||
        (rc = tn_ivalue_dtype(op, st, n, lg ? 4 : 3, &dt)) < 0)
        return rc;
    if (meta) {
        if (steps < 0)
            return tn_set_error(TN_EINVAL, "number of steps must be non-negative");
        const struct tn_device m = {TN_DEVICE_META, -1};
        return place(op, st, tn_empty_on(&steps, 1, dt == TN_DTYPE_UNSET ? tn_get_default_dtype() : dt, m), false);
    }
    return place(op, st, lg ? tn_logspace(s[0], s[1], steps, base, dt)
                            : tn_linspace(s[0], s[1], steps, dt), false);
}

/* tril_indices, triu_indices: a triangle's coordinates (lib/core/triangle.c) */
static int f_tri(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int64_t v[3];
    enum tn_dtype dt;
    int rc;
    for (int i = 0; i < 3; i++)
        if ((rc = tn_ivalue_int(op, st, n, i, &v[i])) < 0)
            return rc;
    if ((rc = tn_ivalue_dtype(op, st, n, 3, &dt)) < 0)
        return rc;
    struct tn_tensor *t = !strcmp(op->name, "tril_indices") ? tn_tril_indices(v[0], v[1], v[2], dt)
                                                            : tn_triu_indices(v[0], v[1], v[2], dt);
    return place(op, st, t, tn__graph_meta_factories);
}

#define OP(name, ovl, args, fn) TN__GRAPH_OP(name, ovl, args, fn, 1)

static const struct tn_op factories[] = {
    OP("arange", "", a_arange, f_plain),
    OP("arange", ".start", a_arange_start, f_plain),
    OP("arange", ".start_step", a_arange_step, f_plain),
    OP("zeros", "", a_sized, f_plain),
    OP("ones", "", a_sized, f_plain),
    OP("full", "", a_full, f_plain),
    OP("scalar_tensor", "", a_scalar_tensor, f_plain),
    OP("zeros_like", "", a_like, f_self),
    OP("empty_like", "", a_like, f_self), /* (zeros: any values will do) */
    OP("ones_like", "", a_like, f_self),
    OP("full_like", "", a_full_like, f_self),
    OP("new_zeros", "", a_new, f_self),
    OP("new_ones", "", a_new, f_self),
    OP("new_full", "", a_new_full, f_self),
    OP("empty", ".memory_format", a_empty, f_empty),
    OP("empty_strided", "", a_empty_strided, f_empty),
    OP("__and__", ".Tensor", a_two, f_alias),
    OP("expand_as", "", a_two, f_alias),
    OP("pow", ".Scalar", a_pow_scalar, f_pow_scalar),
    OP("linspace", "", a_lin_ss, f_space),
    OP("linspace", ".Tensor_Tensor", a_lin_tt, f_space),
    OP("linspace", ".Tensor_Scalar", a_lin_ts, f_space),
    OP("linspace", ".Scalar_Tensor", a_lin_st, f_space),
    OP("logspace", "", a_log_ss, f_space),
    OP("logspace", ".Tensor_Tensor", a_log_tt, f_space),
    OP("logspace", ".Tensor_Scalar", a_log_ts, f_space),
    OP("logspace", ".Scalar_Tensor", a_log_st, f_space),
    OP("tril_indices", "", a_tri, f_tri),
    OP("triu_indices", "", a_tri, f_tri),
};

const struct tn_op *tn__graph_factory(const char *qualname)
{
    return tn__graph_find(factories, sizeof factories / sizeof *factories, qualname);
}

/* Whether op is one of the factories: their results never require grad
 * (new_zeros of a tensor that does is a constant, as in PyTorch). */
bool tn__graph_is_factory(const struct tn_op *op)
{
    return op->boxed == f_plain || op->boxed == f_self || op->boxed == f_space ||
           op->boxed == f_tri || tn__graph_is_random(op);
}
