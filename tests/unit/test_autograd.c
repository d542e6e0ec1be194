/*
 * test_autograd: the gradient of every differentiable op against PyTorch's
 * on the same inputs (tests/fixtures/autograd/ops.json, written by
 * autograd_ops.py), and tn_gradcheck on each float64 case.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tn_test.h"

#define MAXA 12 /* (convolution has 9) */

struct call {
    const char *op;
    int nargs;
    int result; /* which result of an op returning several ("result", 0 by default) */
    json_t *args;
    struct tn_tensor *t[MAXA]; /* tensor arguments (NULL for others) */
    struct tn_tensor *list[MAXA][8]; /* a Tensor?[] argument ("tlist"), NULL for None */
    int64_t ints[MAXA][TN_MAX_DIMS];
};

/* Runs a view or copy of lib/core by its fixture name. */
static struct tn_tensor *core_call(const char *name, struct tn_tensor *a)
{
    if (!strcmp(name, "t"))
        return tn_t(a);
    if (!strcmp(name, "view"))
        return tn_view(a, TN_SHAPE(4, 3));
    if (!strcmp(name, "reshape_t")) {
        struct tn_tensor *t = tn_t(a), *r = tn_reshape(t, TN_SHAPE(12));
        tn_release(t);
        return r;
    }
    if (!strcmp(name, "transpose"))
        return tn_transpose(a, 0, 2);
    if (!strcmp(name, "expand"))
        return tn_expand(a, TN_SHAPE(2, 3, 4));
    if (!strcmp(name, "select"))
        return tn_select(a, 1, 2);
    if (!strcmp(name, "slice"))
        return tn_slice(a, 1, 1, 4, 2);
    if (!strcmp(name, "unsqueeze_squeeze")) {
        struct tn_tensor *u = tn_unsqueeze(a, 1), *r = tn_squeeze(u);
        tn_release(u);
        return r;
    }
    if (!strcmp(name, "clone"))
        return tn_clone(a);
    if (!strcmp(name, "diagonal"))
        return tn_diagonal(a, 0, 0, 1);
    if (!strcmp(name, "permute"))
        return tn_permute(a, (const int64_t[]){2, 0, 1}, 3);
    fail_msg("unknown core op %s", name);
    return NULL;
}

/* A Tensor[] result as autograd_ops.py records it: its pieces flattened
 * and concatenated into one tensor (whose backward reaches every piece).
 * Releases the list. */
static struct tn_tensor *cat_pieces(struct tn_ivalue *v)
{
    int n = v->v.tensors.n;
    struct tn_tensor *flat[16] = {NULL}, *r = NULL;
    assert_true(n <= 16);
    for (int i = 0; i < n; i++)
        assert_non_null(flat[i] = tn_reshape(v->v.tensors.data[i], TN_SHAPE(-1)));
    r = tn_cat((const struct tn_tensor *const *)flat, n, 0);
    for (int i = 0; i < n; i++)
        tn_release(flat[i]);
    tn_ivalue_release(v);
    return r;
}

/* Calls the case's op on c->t (boxed, by name). */
static struct tn_tensor *run_call(struct call *c)
{
    if (!strncmp(c->op, "core:", 5))
        return core_call(c->op + 5, c->t[0]);
    const struct tn_op *op = tn_op_find(c->op);
    assert_non_null(op);
    struct tn_ivalue st[MAXA + 4];
    memset(st, 0, sizeof st);
    for (int i = 0; i < c->nargs; i++) {
        json_t *a = json_array_get(c->args, (size_t)i), *v;
        if (c->t[i]) {
            st[i] = (struct tn_ivalue){.tag = TN_IV_TENSOR, .v.t = c->t[i]};
        } else if ((v = json_object_get(a, "s"))) {
            st[i] = (struct tn_ivalue){.tag = TN_IV_SCALAR, .v.s = tn_float(json_number_value(v))};
        } else if ((v = json_object_get(a, "i"))) {
            st[i] = (struct tn_ivalue){.tag = TN_IV_INT, .v.i = json_integer_value(v)};
        } else if ((v = json_object_get(a, "b"))) {
            st[i] = (struct tn_ivalue){.tag = TN_IV_BOOL, .v.b = json_is_true(v)};
        } else if ((v = json_object_get(a, "str"))) {
            st[i] = (struct tn_ivalue){.tag = TN_IV_STR, .v.str = json_string_value(v)};
        } else if ((v = json_object_get(a, "dtype"))) {
            st[i] = (struct tn_ivalue){.tag = TN_IV_DTYPE, .v.dtype = tn_test_dtype(json_string_value(v))};
        } else if ((v = json_object_get(a, "ints"))) {
            int n = tn_test_ints(v, c->ints[i]);
            st[i] = (struct tn_ivalue){.tag = TN_IV_INTLIST, .v.ints = {c->ints[i], n}};
        } else if ((v = json_object_get(a, "tlist"))) {
            st[i] = (struct tn_ivalue){.tag = TN_IV_OPTTENSORLIST,
                                       .v.tensors = {c->list[i], (int)json_array_size(v)}};
        } else {
            st[i] = (struct tn_ivalue){.tag = TN_IV_NONE};
        }
    }
    int n = tn_op_call(op, st, c->nargs);
    if (n < 0)
        return NULL;
    /* an op returning several tensors: the case's result (autograd_ops.py's
     * too), the first unless it says */
    assert_true(c->result < (n > 0 ? n : 1));
    for (int k = 0; k < n; k++)
        if (k != c->result)
            tn_release(st[k].v.t);
    if (st[c->result].tag == TN_IV_TENSORLIST)
        return cat_pieces(&st[c->result]);
    return st[c->result].v.t;
}

/* Elementwise closeness of t and the fixture tensor `exp`. */
static int close_to(const struct tn_tensor *t, json_t *exp, const char *what, double tol)
{
    struct tn_tensor *e = tn_test_tensor(exp);
    int rc = 0;
    if (t->ndim != e->ndim || memcmp(t->sizes, e->sizes, sizeof(int64_t) * (size_t)t->ndim)) {
        char a[128], b[128];
        print_message("# %s: shape %s, PyTorch's %s\n", what,
                      tn_shape_format(t->sizes, t->ndim, a, sizeof a),
                      tn_shape_format(e->sizes, e->ndim, b, sizeof b));
        tn_release(e);
        return -1;
    }
    if (t->dtype != e->dtype) {
        print_message("# %s: dtype %s, PyTorch's %s\n", what, tn_dtype_name(t->dtype),
                      tn_dtype_name(e->dtype));
        rc = -1;
    }
    struct tn_tensor *a = tn_to_dtype(t, TN_FLOAT64), *b = tn_to_dtype(e, TN_FLOAT64);
    struct tn_tensor *ac = tn_contiguous(a), *bc = tn_contiguous(b);
    const double *x = tn_data(ac), *y = tn_data(bc);
    for (int64_t k = 0; k < tn_numel(ac) && rc == 0; k++)
        if (!(fabs(x[k] - y[k]) <= tol * (1 + fabs(y[k])))) {
            print_message("# %s: element %lld is %.17g, PyTorch's %.17g\n", what, (long long)k,
                          x[k], y[k]);
            rc = -1;
        }
    tn_release(a);
    tn_release(b);
    tn_release(ac);
    tn_release(bc);
    tn_release(e);
    return rc;
}

static struct tn_tensor *gc_fn(struct tn_tensor *const *inputs, void *ctx)
{
    struct call *c = ctx;
    for (int i = 0; i < c->nargs; i++)
        if (c->t[i])
            c->t[i] = inputs[i];
    return run_call(c);
}

/* The case's op and arguments, its tensors made (requiring grad where the
 * fixture says). */
static void load_call(json_t *cs, struct call *c)
{
    c->op = json_string_value(json_object_get(cs, "op"));
    c->result = (int)json_integer_value(json_object_get(cs, "result"));
    c->args = json_object_get(cs, "args");
    c->nargs = (int)json_array_size(c->args);
    assert_true(c->nargs <= MAXA);
    for (int i = 0; i < c->nargs; i++) {
        json_t *a = json_array_get(c->args, (size_t)i);
        if (json_object_get(a, "t")) {
            c->t[i] = tn_test_tensor(json_object_get(a, "t"));
            if (json_is_true(json_object_get(a, "rg")))
                assert_int_equal(tn_requires_grad_(c->t[i], true), 0);
        }
        json_t *l = json_object_get(a, "tlist"), *e;
        size_t k;
        assert_true(json_array_size(l) <= 8);
        json_array_foreach(l, k, e) {
            if (!json_is_null(e))
                assert_non_null(c->list[i][k] = tn_test_tensor(e));
        }
    }
}

static void release_call(struct call *c)
{
    for (int i = 0; i < c->nargs; i++) {
        tn_release(c->t[i]);
        for (int k = 0; k < 8; k++)
            tn_release(c->list[i][k]);
    }
}

static int run_case(json_t *cs, int torch1)
{
    (void)torch1;
    struct call c = {0};
    load_call(cs, &c);
    bool f64 = c.t[0] && c.t[0]->dtype == TN_FLOAT64;
    double tol = f64 ? 1e-10 : 2e-5;
    char what[160];
    int rc = 0;
    struct tn_tensor *out = run_call(&c);
    if (!out) {
        print_message("# %s: %s\n", c.op, tn_last_error());
        rc = -1;
        goto done;
    }
    snprintf(what, sizeof what, "%s (%s) result", c.op, f64 ? "float64" : "float32");
    rc |= close_to(out, json_object_get(cs, "out"), what, tol);
    struct tn_tensor *g = tn_test_tensor(json_object_get(cs, "grad"));
    if (tn_backward(&out, 1, &g, false, false) < 0) {
        print_message("# %s: backward: %s\n", c.op, tn_last_error());
        rc = -1;
    }
    tn_release(g);
    tn_release(out);
    for (int i = 0; i < c.nargs && rc == 0; i++) {
        json_t *e = json_array_get(json_object_get(cs, "grads"), (size_t)i);
        if (!c.t[i] || !c.t[i]->requires_grad)
            continue;
        snprintf(what, sizeof what, "%s (%s) grad of argument %d", c.op,
                 f64 ? "float64" : "float32", i);
        if (json_is_null(e) || !e) {
            continue;
        } else if (!c.t[i]->grad) {
            print_message("# %s: no gradient\n", what);
            rc = -1;
        } else {
            rc |= close_to(c.t[i]->grad, e, what, tol);
        }
    }
    if (rc == 0 && json_is_true(json_object_get(cs, "gradcheck"))) {
        struct tn_tensor *ins[MAXA] = {0};
        memcpy(ins, c.t, sizeof ins);
        int r = tn_gradcheck(gc_fn, ins, c.nargs, &c, 1e-6, 1e-5, 1e-3);
        memcpy(c.t, ins, sizeof ins);
        if (r != 1) {
            print_message("# %s: gradcheck: %s\n", c.op, tn_last_error());
            rc = -1;
        }
    }
done:
    release_call(&c);
    return rc;
}

static void test_op_gradients(void **state)
{
    (void)state;
    tn_test_fixture_cases("../autograd/ops", "cases", "op gradients", run_case);
}

/* Where our result's grad_fn is not PyTorch's yet: ops whose decomposition
 * ends in another op than PyTorch's (or that PyTorch differentiates as a
 * whole), and the pieces of split & co., which the fixture concatenates
 * with torch.cat. The views and clone of lib/core ("core:") record
 * PyTorch's names. */
static const char *const other_decomposition[] = {
    "matmul", "logsumexp", "linalg_vector_norm", "lerp.Scalar", "lerp.Tensor", "addcmul",
    "addcdiv", "binary_cross_entropy_with_logits", "nll_loss_nd", "cross_entropy_loss",
    "split.Tensor", "split_with_sizes", "chunk", "unbind.int", "tensor_split.sections",
    "tensor_split.indices", "col2im", "_adaptive_avg_pool3d", NULL,
};

/* The grad_fn name of each case's result against PyTorch 2.x's
 * (names.json, autograd_ops.py --names: the same cases in the same order). */
static void test_grad_fn_names(void **state)
{
    (void)state;
    json_t *ops = tn_test_fixture("../autograd/ops"), *names = tn_test_fixture("../autograd/names");
    json_t *cases = json_object_get(ops, "cases"), *want = json_object_get(names, "cases");
    assert_int_equal(json_array_size(cases), json_array_size(want));
    int bad = 0, n = 0;
    for (size_t k = 0; k < json_array_size(cases); k++) {
        json_t *cs = json_array_get(cases, k), *w = json_array_get(want, k);
        const char *op = json_string_value(json_object_get(cs, "op"));
        assert_string_equal(op, json_string_value(json_object_get(w, "op")));
        bool skip = false;
        for (int i = 0; other_decomposition[i]; i++)
            skip |= !strcmp(other_decomposition[i], op);
        if (skip)
            continue;
        struct call c = {0};
        load_call(cs, &c);
        struct tn_tensor *out = run_call(&c);
        const char *ours = out ? tn_grad_fn_name(out) : "(failed)";
        const char *theirs = json_string_value(json_object_get(w, "grad_fn"));
        n++;
        if (!ours || strcmp(ours, theirs)) {
            print_message("# %s: grad_fn %s, PyTorch's %s\n", c.op, ours ? ours : "none", theirs);
            bad++;
        }
        tn_release(out);
        release_call(&c);
    }
    print_message("# %d grad_fn names from PyTorch %s, %d differ\n", n,
                  json_string_value(json_object_get(names, "torch")), bad);
    json_decref(ops);
    json_decref(names);
    assert_int_equal(bad, 0);
}

/* An op without a derivatives.yaml entry: its floating result takes a node
 * whose backward fails naming the op (PyTorch's words); an integer or bool
 * result takes none (argmax). scatter.value_reduce stands for them (digamma
 * did until it got its derivative; no in-place op with a floating result
 * lacks one now): PyTorch has no entry for it either, so the node is
 * NotImplemented and its words PyTorch's (test_autograd_engine checks them
 * against the fixture). */
static void test_no_derivative(void **state)
{
    (void)state;
    int64_t sz[] = {3};
    struct tn_tensor *x = tn_ones(sz, 1, TN_FLOAT32);
    struct tn_tensor *idx = tn_zeros(sz, 1, TN_INT64);
    assert_non_null(x);
    assert_non_null(idx);
    assert_int_equal(tn_requires_grad_(x, true), 0);
    struct tn_tensor *y = tn_scatter_value_reduce(x, 0, idx, tn_float(2.0), "multiply");
    assert_non_null(y);
    assert_string_equal(tn_grad_fn_name(y), "NotImplemented");
    assert_true(tn_backward(&y, 1, (struct tn_tensor *const[]){x}, false, false) < 0);
    assert_string_equal(tn_last_error(), "derivative for aten::scatter is not implemented");
    struct tn_tensor *i = tn_argmax(x, NULL, false);
    assert_non_null(i);
    assert_null(tn_grad_fn_name(i));
    tn_release(i);
    tn_release(y);
    tn_release(idx);
    tn_release(x);
    tn_clear_error();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_gradients),
        cmocka_unit_test(test_grad_fn_names),
        cmocka_unit_test(test_no_derivative),
    };
    return TN_RUN_TESTS(tests);
}
