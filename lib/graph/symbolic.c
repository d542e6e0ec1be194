/*
 * graph/symbolic.c: the numbers of a graph outside its tensors. A tensor's
 * value becomes a Python number at item() / _local_scalar_dense (a SymFloat
 * for floating dtypes, a SymInt for integers, a SymBool for bool), and
 * torch.export writes Python's arithmetic on such numbers as the targets of
 * torch/_export/serde/serialize.py's _SYM_OPS: _operator.add, ...,
 * torch.sym_float, torch.sym_int, torch.sym_ite, torch.sym_max, ...,
 * math.trunc. Each is a struct tn_op here, computed with Python's rules
 * (int op int stays an int, anything with a float is a float, floor
 * division and modulo round toward negative infinity).
 *
 * A SymBool travels as an int 0 or 1 (what _assert_scalar reads). The Meta
 * pass before a run has no tensor data: item() gives 1 there (1.0, true),
 * and nothing fails on the values it computes from them.
 */
#include "graph/internal.h"
#include "tensor/ops.h"

#include <math.h>
#include <string.h>

#define N(n) {n, "Scalar", TN_IV_SCALAR, false, false, false, NULL}

static int number(const struct tn_op *op, struct tn_ivalue *st, int n, int i,
                  struct tn_scalar *s)
{
    int rc = tn_ivalue_scalar(op, st, n, i, s);
    if (rc < 0)
        return rc;
    if (s->kind == TN_SCALAR_BOOL)
        *s = tn_int(s->v.b);
    if (s->kind == TN_SCALAR_COMPLEX)
        return tn_set_error(TN_EINVAL, "%s: a complex number (SymInt, SymFloat or SymBool "
                            "expected)", op->qualname);
    return TN_OK;
}

static int push_int(struct tn_ivalue *st, int64_t v)
{
    st[0].tag = TN_IV_INT;
    st[0].v.i = v;
    return 1;
}

static int push_float(struct tn_ivalue *st, double v)
{
    st[0].tag = TN_IV_DOUBLE;
    st[0].v.f = v;
    return 1;
}

static double dbl(struct tn_scalar s)
{
    return s.kind == TN_SCALAR_FLOAT ? s.v.f : (double)s.v.i;
}

static int zero_division(const struct tn_op *op)
{
    if (tn__graph_meta_devices)
        return 0; /* item()'s stand-in of the Meta pass: no error */
    return tn_set_error(TN_ERUNTIME, "%s: division by zero", op->qualname);
}

/* Python's float // and % (floatobject.c's float_divmod) */
static void float_divmod(double a, double b, double *q, double *m)
{
    double mod = fmod(a, b);
    double div = (a - mod) / b;
    if (mod) {
        if ((b < 0) != (mod < 0)) {
            mod += b;
            div -= 1.0;
        }
    } else {
        mod = copysign(0.0, b);
    }
    double fd;
    if (div) {
        fd = floor(div);
        if (div - fd > 0.5)
            fd += 1.0;
    } else {
        fd = copysign(0.0, a / b);
    }
    *q = fd;
    *m = mod;
}

/* int ** int for b >= 0, wrapping as int64 arithmetic does */
static int64_t int_pow(int64_t a, int64_t b)
{
    uint64_t r = 1, x = (uint64_t)a;
    for (; b > 0; b >>= 1) {
        if (b & 1)
            r *= x;
        x *= x;
    }
    return (int64_t)r;
}

static int cmp(const char *o, double a, double b, int64_t ia, int64_t ib, bool ints)
{
    int c = ints ? (ia > ib) - (ia < ib) : (a > b) - (a < b);
    if (!ints && (isnan(a) || isnan(b)))
        return !strcmp(o, "ne");
    if (!strcmp(o, "eq")) return c == 0;
    if (!strcmp(o, "ne")) return c != 0;
    if (!strcmp(o, "lt")) return c < 0;
    if (!strcmp(o, "le")) return c <= 0;
    if (!strcmp(o, "gt")) return c > 0;
    return c >= 0; /* ge */
}

/* _operator's binary operators and torch.sym_max / sym_min */
static int b_binary(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    struct tn_scalar x, y;
    int rc;
    if ((rc = number(op, st, n, 0, &x)) < 0 || (rc = number(op, st, n, 1, &y)) < 0)
        return rc;
    const char *o = op->name;
    bool ints = x.kind == TN_SCALAR_INT && y.kind == TN_SCALAR_INT;
    int64_t a = ints ? x.v.i : 0, b = ints ? y.v.i : 0;
    double fa = dbl(x), fb = dbl(y);
    static const char *const cmps[] = {"eq", "ne", "lt", "le", "gt", "ge"};
    for (size_t k = 0; k < sizeof cmps / sizeof *cmps; k++)
        if (!strcmp(o, cmps[k]))
            return push_int(st, cmp(o, fa, fb, a, b, ints));
    if (!strcmp(o, "sym_max") || !strcmp(o, "sym_min")) {
        bool hi = o[5] == 'a';
        if (ints)
            return push_int(st, (a > b) == hi ? a : b);
        return push_float(st, isnan(fa) || isnan(fb) ? NAN : (fa > fb) == hi ? fa : fb);
    }
    if (!strcmp(o, "truediv")) {
        if (fb == 0)
            return zero_division(op) < 0 ? TN_ERUNTIME : push_float(st, 0);
        return push_float(st, fa / fb);
    }
    if (!strcmp(o, "pow")) {
        if (ints && b >= 0)
            return push_int(st, int_pow(a, b));
        if (fa == 0 && fb < 0)
            return zero_division(op) < 0 ? TN_ERUNTIME : push_float(st, 0);
        return push_float(st, pow(fa, fb));
    }
    if (!strcmp(o, "floordiv") || !strcmp(o, "mod")) {
        if (ints ? b == 0 : fb == 0)
            return zero_division(op) < 0 ? TN_ERUNTIME : ints ? push_int(st, 0) : push_float(st, 0);
        if (ints) {
            if (b == -1) /* INT64_MIN // -1 wraps rather than trapping */
                return push_int(st, o[0] == 'f' ? (int64_t)(0 - (uint64_t)a) : 0);
            int64_t q = a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
            return push_int(st, o[0] == 'f' ? q : a - q * b);
        }
        double q, m;
        float_divmod(fa, fb, &q, &m);
        return push_float(st, o[0] == 'f' ? q : m);
    }
    if (!strcmp(o, "add") || !strcmp(o, "sub") || !strcmp(o, "mul")) {
        if (ints) {
            uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
            return push_int(st, (int64_t)(o[0] == 'a' ? ua + ub : o[0] == 's' ? ua - ub : ua * ub));
        }
        return push_float(st, o[0] == 'a' ? fa + fb : o[0] == 's' ? fa - fb : fa * fb);
    }
    /* and_, or_, lshift, rshift: ints only, as Python's */
    if (!ints)
        return tn_set_error(TN_EINVAL, "%s: unsupported operand types (float)", op->qualname);
    if (!strcmp(o, "and_"))
        return push_int(st, a & b);
    if (!strcmp(o, "or_"))
        return push_int(st, a | b);
    if (b < 0) {
        if (tn__graph_meta_devices)
            return push_int(st, 0);
        return tn_set_error(TN_EINVAL, "%s: negative shift count", op->qualname);
    }
    if (!strcmp(o, "lshift"))
        return push_int(st, b >= 64 ? 0 : (int64_t)((uint64_t)a << b));
    return push_int(st, b >= 64 ? (a < 0 ? -1 : 0) : a >> b); /* rshift: floor, as Python's */
}

/* neg, pos, sym_not, sym_float, sym_int, _sym_sqrt, math.trunc */
static int b_unary(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    struct tn_scalar x;
    int rc;
    if ((rc = number(op, st, n, 0, &x)) < 0)
        return rc;
    const char *o = op->name;
    bool isint = x.kind == TN_SCALAR_INT;
    if (!strcmp(o, "neg"))
        return isint ? push_int(st, (int64_t)(0 - (uint64_t)x.v.i)) : push_float(st, -x.v.f);
    if (!strcmp(o, "pos"))
        return isint ? push_int(st, x.v.i) : push_float(st, x.v.f);
    if (!strcmp(o, "sym_not"))
        return push_int(st, isint ? !x.v.i : !x.v.f);
    if (!strcmp(o, "sym_float"))
        return push_float(st, dbl(x));
    if (!strcmp(o, "_sym_sqrt"))
        return push_float(st, sqrt(dbl(x)));
    /* sym_int and math.trunc: toward zero */
    if (isint)
        return push_int(st, x.v.i);
    if (!isfinite(x.v.f) || fabs(x.v.f) >= 9.3e18) {
        if (tn__graph_meta_devices)
            return push_int(st, 0);
        return tn_set_error(TN_EINVAL, "%s: cannot convert %g to an int", op->qualname, x.v.f);
    }
    return push_int(st, (int64_t)x.v.f);
}

/* torch.sym_ite(b, t, f): t where b, else f, of the type they have */
static int b_ite(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    struct tn_scalar c, t, f;
    int rc;
    if ((rc = number(op, st, n, 0, &c)) < 0 || (rc = number(op, st, n, 1, &t)) < 0 ||
        (rc = number(op, st, n, 2, &f)) < 0)
        return rc;
    struct tn_scalar r = dbl(c) != 0 ? t : f;
    return r.kind == TN_SCALAR_INT ? push_int(st, r.v.i) : push_float(st, r.v.f);
}

/* item / _local_scalar_dense: the one element as a Python number */
static int b_item(const struct tn_op *op, struct tn_ivalue *st, int n)
{
    struct tn_tensor *self;
    int rc;
    if ((rc = tn_ivalue_tensor(op, st, n, 0, &self)) < 0)
        return rc;
    int64_t numel = tn_numel(self);
    if (numel != 1)
        return tn_set_error(TN_EINVAL, "%s: a Tensor with %lld elements cannot be converted "
                            "to Scalar", op->qualname, (long long)numel);
    char kind = tn_dtype_info(self->dtype)->kind;
    if (kind == 'c')
        return tn_set_error(TN_EINVAL, "%s: a complex value (%s) has no SymInt, SymFloat or "
                            "SymBool form", op->qualname, tn_dtype_name(self->dtype));
    if (tn__graph_meta_devices || self->device.type == TN_DEVICE_META) /* a stand-in */
        return kind == 'f' ? push_float(st, 1.0) : push_int(st, 1);
    struct tn_tensor *host = self;
    if (self->device.type != TN_DEVICE_CPU) {
        const struct tn_device cpu = {TN_DEVICE_CPU, -1};
        if (!(host = tn_to_device(self, &cpu, self->dtype, false, false, NULL)))
            return tn_error_prefix("%s", op->qualname);
    }
    struct tn_scalar s = tn_item(host);
    if (host != self)
        tn_release(host);
    if (s.kind == TN_SCALAR_FLOAT)
        return push_float(st, s.v.f);
    if (s.kind == TN_SCALAR_BOOL)
        return push_int(st, s.v.b);
    return push_int(st, s.v.i);
}

static const struct tn_arg_schema a_two[] = {N("a"), N("b")};
static const struct tn_arg_schema a_one[] = {N("a")};
static const struct tn_arg_schema a_x[] = {N("x")};
static const struct tn_arg_schema a_ite[] = {N("b"), N("t"), N("f")};
static const struct tn_arg_schema a_self[] = {{"self", "Tensor", TN_IV_TENSOR, false, false,
                                               false, NULL}};

#define SOP(ns, name, args, fn)                                                              \
    {ns, name, "", ns "::" name, NULL, args, sizeof args / sizeof *args, 1, NULL, 0, {0}, fn,  \
     NULL, NULL, NULL, 0}
#define BIN(name) SOP("_operator", name, a_two, b_binary)

static const struct tn_op sym_ops[] = {
    BIN("eq"), BIN("ne"), BIN("lt"), BIN("le"), BIN("gt"), BIN("ge"),
    BIN("add"), BIN("sub"), BIN("mul"), BIN("truediv"), BIN("floordiv"), BIN("mod"),
    BIN("pow"), BIN("and_"), BIN("or_"), BIN("lshift"), BIN("rshift"),
    SOP("_operator", "neg", a_one, b_unary), SOP("_operator", "pos", a_one, b_unary),
    SOP("torch", "sym_not", a_one, b_unary), SOP("torch", "sym_float", a_one, b_unary),
    SOP("torch", "sym_int", a_one, b_unary), SOP("torch", "_sym_sqrt", a_one, b_unary),
    SOP("torch", "sym_max", a_two, b_binary), SOP("torch", "sym_min", a_two, b_binary),
    SOP("torch", "sym_ite", a_ite, b_ite), SOP("math", "trunc", a_x, b_unary),
    SOP("aten", "item", a_self, b_item), SOP("aten", "_local_scalar_dense", a_self, b_item),
};

const struct tn_op *tn__graph_sym_op(const char *qualname)
{
    for (size_t i = 0; i < sizeof sym_ops / sizeof *sym_ops; i++)
        if (!strcmp(sym_ops[i].qualname, qualname))
            return &sym_ops[i];
    return NULL;
}
