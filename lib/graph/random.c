/*
 * graph/random.c: the random ops an exported graph names (rand, randn,
 * randint and .low, randperm, normal.float_float; rand_like, randn_like,
 * randint_like and .low_dtype; bernoulli and .p; normal.Tensor_float,
 * .float_Tensor and .Tensor_Tensor; the functional forms of uniform_ and
 * normal_), over lib/core/random.c's draws, each composed as PyTorch's
 * CPU implementation composes it (ATen/native/Distributions.cpp and
 * DistributionTemplates.h), so that a run after tn_manual_seed(S)
 * (tcompile run --seed=S) gives what torch.manual_seed(S) gives.
 *
 * They draw from the default generator: a graph holds no Generator (the
 * schemas' generator argument is None there). Like the factories, they
 * stay outside the dispatcher: their results never require grad (PyTorch
 * gives bernoulli's and normal's inputs a zero gradient, derivatives.yaml);
 * a Meta pass (tn_graph_check's, the compiler's) makes Meta tensors and
 * draws nothing, so it does not move the stream. The compiler runs them
 * as extern steps, each once per run and in graph order (never merged,
 * never computed at compile time: lib/compile/decomp.c).
 */
#include "graph/internal.h"

#include <string.h>

#include <tensor/ops.h>

#define T(n) {n, "Tensor", TN_IV_TENSOR, false, false, false, NULL}
#define IL(n) {n, "SymInt[]", TN_IV_INTLIST, false, false, false, NULL}
#define SI(n) {n, "SymInt", TN_IV_INT, false, false, false, NULL}
#define FL(n, d) {n, "float", TN_IV_DOUBLE, false, false, false, d}
#define GEN {"generator", "Generator?", TN_IV_NONE, true, false, true, "None"}
/* the keyword arguments every factory takes: dtype read, the rest ignored */
#define OPTS_D(d)                                                              \
    {"dtype", "ScalarType?", TN_IV_DTYPE, true, false, true, d},               \
    {"layout", "Layout?", TN_IV_NONE, true, false, true, "None"},              \
    {"device", "Device?", TN_IV_NONE, true, false, true, "None"},              \
    {"pin_memory", "bool?", TN_IV_BOOL, true, false, true, "None"}
#define OPTS OPTS_D("None")
#define MF {"memory_format", "MemoryFormat?", TN_IV_INT, true, false, true, "None"}

static const struct tn_arg_schema a_sized[] = {IL("size"), OPTS};
static const struct tn_arg_schema a_randperm[] = {SI("n"), OPTS_D("long")};
static const struct tn_arg_schema a_randint[] = {SI("high"), IL("size"), OPTS_D("long")};
static const struct tn_arg_schema a_randint_low[] = {SI("low"), SI("high"), IL("size"),
                                                     OPTS_D("long")};
static const struct tn_arg_schema a_normal_ff[] = {FL("mean", NULL), FL("std", NULL),
                                                   IL("size"), GEN, OPTS};
static const struct tn_arg_schema a_like[] = {T("self"), OPTS, MF};
static const struct tn_arg_schema a_randint_like[] = {T("self"), SI("high"), OPTS, MF};
static const struct tn_arg_schema a_randint_like_low[] = {T("self"), SI("low"), SI("high"),
                                                          OPTS, MF};
static const struct tn_arg_schema a_bernoulli[] = {T("self"), GEN};
static const struct tn_arg_schema a_bernoulli_p[] = {T("self"), FL("p", NULL), GEN};
static const struct tn_arg_schema a_normal_tf[] = {T("mean"), FL("std", "1."), GEN};
static const struct tn_arg_schema a_normal_ft[] = {FL("mean", NULL), T("std"), GEN};
static const struct tn_arg_schema a_normal_tt[] = {T("mean"), T("std"), GEN};
static const struct tn_arg_schema a_uniform[] = {T("self"), FL("from", "0."), FL("to", "1."),
                                                 GEN};
static const struct tn_arg_schema a_normal_fn[] = {T("self"), FL("mean", "0."), FL("std", "1."),
                                                   GEN};

static bool on_meta(const struct tn_tensor *t)
{
    return t->device.type == TN_DEVICE_META;
}

/* Whether this call must make Meta tensors and draw nothing. */
static bool meta_run(const struct tn_tensor *t)
{
    return tn__graph_meta_factories || tn__graph_meta_devices || (t && on_meta(t));
}

/* t with `rc` the status of the draw that filled it: t, or NULL. */
static struct tn_tensor *drawn(struct tn_tensor *t, int rc)
{
    if (t && rc < 0) {
        tn_release(t);
        return NULL;
    }
    return t;
}

/* rand, randn, randperm, randint, randint.low, normal.float_float: no
 * tensor argument; at::empty(size).uniform_/normal_/random_ (randperm:
 * PyTorch's shuffle). rand and randn default to float32 (the default
 * dtype), randint and randperm to int64. */
static int f_sized(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    const char *ovl = op->overload;
    bool perm = !strcmp(op->name, "randperm"), randint = !strcmp(op->name, "randint");
    bool normal = !strcmp(op->name, "normal");
    int lead = randint ? (!strcmp(ovl, ".low") ? 2 : 1) : normal ? 2 : 0;
    int64_t buf[TN_MAX_DIMS], count = 0, ints[2] = {0, 0};
    double fl[2] = {0, 0};
    const int64_t *size = &count;
    int len = 1;
    enum tn_dtype dt;
    for (int i = 0; i < lead; i++)
        if ((rc = normal ? tn_ivalue_double(op, st, n, i, &fl[i])
                         : tn_ivalue_int(op, st, n, i, &ints[i])) < 0)
            return rc;
    if ((rc = perm ? tn_ivalue_int(op, st, n, 0, &count)
                   : tn_ivalue_ints(op, st, n, lead, buf, &size, &len)) < 0 ||
        (rc = tn_ivalue_dtype(op, st, n, lead + 1 + normal, &dt)) < 0)
        return rc;
    if (dt == TN_DTYPE_UNSET)
        dt = perm || randint ? TN_INT64 : tn_get_default_dtype();
    if (perm && count < 0)
        return tn_set_error(TN_EINVAL, "%s: n must be non-negative, got %lld", op->qualname,
                            (long long)count);
    if (meta_run(NULL)) {
        const struct tn_device m = {TN_DEVICE_META, -1};
        return tn__graph_result(op, st, tn_empty_on(size, len, dt, m));
    }
    struct tn_tensor *t;
    if (perm)
        t = tn_randperm(count, dt, NULL);
    else if (randint)
        t = lead == 1 ? tn_randint(0, ints[0], size, len, dt, NULL)
                      : tn_randint(ints[0], ints[1], size, len, dt, NULL);
    else if (normal)
        t = (t = tn_empty(size, len, dt)) ? drawn(t, tn_normal_(t, fl[0], fl[1], NULL)) : NULL;
    else if (!strcmp(op->name, "rand"))
        t = tn_rand(size, len, dt, NULL);
    else
        t = tn_randn(size, len, dt, NULL);
    return tn__graph_result(op, st, t);
}

/* rand_like, randn_like, randint_like and .low_dtype: at::empty_like(self,
 * dtype, memory_format) (preserve_format by default: self's strides where
 * dense) drawn into in memory order; the functional uniform and
 * normal_functional likewise (at::clone(self) drawn into). */
static int f_like(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    struct tn_tensor *self;
    if ((rc = tn_ivalue_tensor(op, st, n, 0, &self)) < 0)
        return rc;
    bool randint = !strcmp(op->name, "randint_like");
    bool functional = !strcmp(op->name, "uniform") || !strcmp(op->name, "normal_functional");
    int lead = randint ? (!strcmp(op->overload, ".low_dtype") ? 2 : 1) : 0;
    int64_t ints[2] = {0, 0};
    double fl[2] = {0, 1};
    enum tn_dtype dt = TN_DTYPE_UNSET;
    int64_t mf = 1;
    for (int i = 0; i < lead; i++)
        if ((rc = tn_ivalue_int(op, st, n, 1 + i, &ints[i])) < 0)
            return rc;
    for (int i = 0; functional && i < 2; i++)
        if ((rc = tn_ivalue_double(op, st, n, 1 + i, &fl[i])) < 0)
            return rc;
    if (!functional) {
        if ((rc = tn_ivalue_dtype(op, st, n, 1 + lead, &dt)) < 0)
            return rc;
        if (n == op->nargs && st[n - 1].tag == TN_IV_INT)
            mf = st[n - 1].v.i;
    }
    if (dt == TN_DTYPE_UNSET)
        dt = self->dtype;
    struct tn_tensor *t;
    if (mf == 2 || mf == 3) /* channels_last(_3d), as _to_copy lays it out */
        t = tn_underscore_to_copy(self, dt, NULL, NULL, NULL, false, &mf);
    else if (mf == 0)
        t = tn_empty_on(self->sizes, self->ndim, dt, self->device);
    else
        t = tn_empty_like(self, dt);
    if (!t || meta_run(self))
        return tn__graph_result(op, st, t);
    if (randint)
        rc = lead == 1 ? tn_random_(t, 0, ints[0], NULL) : tn_random_(t, ints[0], ints[1], NULL);
    else if (!strcmp(op->name, "uniform") || !strcmp(op->name, "rand_like"))
        rc = tn_uniform_(t, fl[0], fl[1], NULL);
    else
        rc = tn_normal_(t, fl[0], fl[1], NULL);
    return tn__graph_result(op, st, drawn(t, rc));
}

/* bernoulli (self the probabilities) and bernoulli.p: a contiguous tensor
 * of self's shape and dtype, bernoulli_(self) or bernoulli_(p). */
static int f_bernoulli(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    struct tn_tensor *self;
    double p = 0;
    bool scalar = !strcmp(op->overload, ".p");
    if ((rc = tn_ivalue_tensor(op, st, n, 0, &self)) < 0 ||
        (scalar && (rc = tn_ivalue_double(op, st, n, 1, &p)) < 0))
        return rc;
    struct tn_tensor *t = tn_empty_on(self->sizes, self->ndim, self->dtype, self->device);
    if (!t || meta_run(self))
        return tn__graph_result(op, st, t);
    return tn__graph_result(op, st, drawn(t, scalar ? tn_bernoulli_(t, p, NULL)
                                         : tn_bernoulli_tensor_(t, self, NULL)));
}

/* CHECK_NORMAL_TENSOR_STD: a real std whose elements are all >= 0. */
static int check_std(const struct tn_tensor *std)
{
    if (tn_dtype_is_complex(std->dtype))
        return tn_set_error(TN_EDTYPE, "normal expects standard deviation to be non-complex");
    if (on_meta(std) || tn_numel(std) == 0)
        return TN_OK;
    struct tn_tensor *m = tn_min(std);
    bool ok = m && tn_scalar_to_double(tn_item(m)) >= 0;
    tn_release(m);
    if (!m)
        return tn_last_status();
    return ok ? TN_OK : tn_set_error(TN_EINVAL, "normal expects all elements of std >= 0.0");
}

/* normal.Tensor_float: empty_like(mean, contiguous).normal_(0, std)
 * .add_(mean); .float_Tensor: empty_like(std, contiguous).normal_(0, 1)
 * .mul_(std).add_(full({}, mean)); .Tensor_Tensor: empty(broadcast shape,
 * mean's dtype).normal_(0, 1).mul_(std).add_(mean). Each step rounds to
 * the output's dtype, as PyTorch's in-place steps do. */
static int f_normal(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    int rc;
    struct tn_tensor *mean = NULL, *std = NULL;
    double fmean = 0, fstd = 1;
    bool tf = !strcmp(op->overload, ".Tensor_float"), ft = !strcmp(op->overload, ".float_Tensor");
    if ((rc = ft ? tn_ivalue_double(op, st, n, 0, &fmean)
                 : tn_ivalue_tensor(op, st, n, 0, &mean)) < 0 ||
        (rc = tf ? tn_ivalue_double(op, st, n, 1, &fstd)
                 : tn_ivalue_tensor(op, st, n, 1, &std)) < 0)
        return rc;
    if (tf && !(fstd >= 0))
        return tn_set_error(TN_EINVAL, "normal expects std >= 0.0, but found std %g", fstd);
    if (std && (rc = check_std(std)) < 0)
        return rc;
    const struct tn_tensor *like = mean ? mean : std;
    int64_t sizes[TN_MAX_DIMS];
    int nd = like->ndim;
    memcpy(sizes, like->sizes, sizeof sizes);
    if (mean && std && (nd = tn_broadcast_shapes(mean->sizes, mean->ndim, std->sizes, std->ndim,
                                                 sizes)) < 0)
        return nd;
    struct tn_tensor *t = tn_empty_on(sizes, nd, like->dtype, like->device);
    if (!t || meta_run(like))
        return tn__graph_result(op, st, t);
    /* .float_Tensor's mean: full({}, mean) in the output's dtype */
    struct tn_tensor *m = mean ? NULL : tn_full(NULL, 0, tn_float(fmean), t->dtype);
    rc = mean || m ? tn_normal_(t, 0, tf ? fstd : 1, NULL) : tn_last_status();
    /* no gradient reaches mean or std through the sample (no node recorded) */
    tn_keyset old = tn_dispatch_set_excluded(tn_dispatch_excluded() | TN_KEYSET(TN_KEY_AUTOGRAD));
    if (rc == 0 && std)
        rc = tn_mul_(t, std);
    if (rc == 0)
        rc = tn_add_(t, mean ? mean : m, tn_int(1));
    tn_dispatch_set_excluded(old);
    tn_release(m);
    return tn__graph_result(op, st, drawn(t, rc));
}

#define OP(name, ovl, args, fn) TN__GRAPH_OP(name, ovl, args, fn, 1)

const struct tn_op tn__graph_randoms[] = {
    OP("rand", "", a_sized, f_sized),
    OP("randn", "", a_sized, f_sized),
    OP("randperm", "", a_randperm, f_sized),
    OP("randint", "", a_randint, f_sized),
    OP("randint", ".low", a_randint_low, f_sized),
    OP("normal", ".float_float", a_normal_ff, f_sized),
    OP("rand_like", "", a_like, f_like),
    OP("randn_like", "", a_like, f_like),
    OP("randint_like", "", a_randint_like, f_like),
    OP("randint_like", ".low_dtype", a_randint_like_low, f_like),
    OP("uniform", "", a_uniform, f_like),
    OP("normal_functional", "", a_normal_fn, f_like),
    OP("bernoulli", "", a_bernoulli, f_bernoulli),
    OP("bernoulli", ".p", a_bernoulli_p, f_bernoulli),
    OP("normal", ".Tensor_float", a_normal_tf, f_normal),
    OP("normal", ".float_Tensor", a_normal_ft, f_normal),
    OP("normal", ".Tensor_Tensor", a_normal_tt, f_normal),
};

const size_t tn__graph_nrandoms = sizeof tn__graph_randoms / sizeof *tn__graph_randoms;

bool tn__graph_is_random(const struct tn_op *op)
{
    return op >= tn__graph_randoms && op < tn__graph_randoms + tn__graph_nrandoms;
}
