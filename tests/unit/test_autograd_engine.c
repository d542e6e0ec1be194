/*
 * test_autograd_engine: the engine's semantics against what PyTorch 1.13
 * did in tests/fixtures/autograd/engine.json (autograd_engine.py): error
 * messages word for word, joined paths, accumulation, retain_graph,
 * in-place ops and the version counter, views, hooks, no_grad, second
 * derivatives, and an MLP step.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tn_test.h"

static json_t *fx;

static int setup(void **state)
{
    (void)state;
    fx = tn_test_fixture("../autograd/engine");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    json_decref(fx);
    return 0;
}

static struct tn_tensor *get(const char *key)
{
    json_t *o = json_object_get(fx, key);
    if (!o)
        fail_msg("fixture has no %s", key);
    return tn_test_tensor(o);
}

static struct tn_tensor *leaf(const char *key)
{
    struct tn_tensor *t = get(key);
    assert_int_equal(tn_requires_grad_(t, true), 0);
    return t;
}

static const char *msg(const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "msg_%s", name);
    return json_string_value(json_object_get(fx, key));
}

/* t close to fixture tensor `key` (float64 sums in another order) */
static void expect_close(const struct tn_tensor *t, const char *key, double tol)
{
    assert_non_null(t);
    struct tn_tensor *e = get(key);
    assert_int_equal(t->ndim, e->ndim);
    assert_memory_equal(t->sizes, e->sizes, sizeof(int64_t) * (size_t)t->ndim);
    struct tn_tensor *a = tn_to_dtype(t, TN_FLOAT64), *b = tn_to_dtype(e, TN_FLOAT64);
    struct tn_tensor *ac = tn_contiguous(a), *bc = tn_contiguous(b);
    const double *x = tn_data(ac), *y = tn_data(bc);
    for (int64_t k = 0; k < tn_numel(ac); k++)
        if (!(fabs(x[k] - y[k]) <= tol * (1 + fabs(y[k]))))
            fail_msg("%s: element %lld is %.17g, PyTorch's %.17g", key, (long long)k, x[k], y[k]);
    tn_release(a);
    tn_release(b);
    tn_release(ac);
    tn_release(bc);
    tn_release(e);
}

static struct tn_tensor *sum(const struct tn_tensor *t)
{
    struct tn_tensor *s = tn_sum(t, TN_DTYPE_UNSET);
    assert_non_null(s);
    return s;
}

static void expect_error(int rc, const char *name)
{
    assert_true(rc < 0);
    assert_string_equal(tn_last_error(), msg(name));
}

static void test_second_backward(void **state)
{
    (void)state;
    struct tn_tensor *x = leaf("x"), *y = tn_mul(x, x), *s = sum(y);
    assert_int_equal(tn_backward(&s, 1, NULL, false, false), 0);
    expect_error(tn_backward(&s, 1, NULL, false, false), "second_backward");
    tn_release(s);
    tn_release(y);
    tn_release(x);
}

static void test_retain_graph(void **state)
{
    (void)state;
    struct tn_tensor *x = leaf("x"), *two = tn_mul_scalar(x, tn_int(2)), *xx = tn_mul(x, x);
    struct tn_tensor *y = tn_add(two, xx, tn_int(1)), *s = sum(y);
    assert_int_equal(tn_backward(&s, 1, NULL, true, false), 0);
    expect_close(x->grad, "join_grad", 1e-12);
    assert_int_equal(tn_backward(&s, 1, NULL, false, false), 0);
    expect_close(x->grad, "join_grad_twice", 1e-12);
    tn_release(s);
    tn_release(y);
    tn_release(two);
    tn_release(xx);
    tn_release(x);
}

static void test_version_counter(void **state)
{
    (void)state;
    /* a saved output changed in place */
    struct tn_tensor *x = leaf("x"), *y = tn_exp(x);
    assert_int_equal(tn_add_scalar_(y, tn_int(1), tn_int(1)), 0);
    struct tn_tensor *s = sum(y);
    expect_error(tn_backward(&s, 1, NULL, false, false), "version_output");
    tn_release(s);
    tn_release(y);
    /* a saved input changed in place through a detached alias */
    y = tn_mul(x, x);
    struct tn_tensor *d = tn_detach(x);
    assert_int_equal(tn_add_scalar_(d, tn_int(1), tn_int(1)), 0);
    s = sum(y);
    expect_error(tn_backward(&s, 1, NULL, false, false), "version_input");
    tn_release(s);
    tn_release(d);
    tn_release(y);
    tn_release(x);
}

static void test_leaf_rules(void **state)
{
    (void)state;
    struct tn_tensor *x = leaf("x");
    expect_error(tn_add_scalar_(x, tn_int(1), tn_int(1)), "leaf_inplace");
    struct tn_tensor *v = tn_view(x, TN_SHAPE(3));
    expect_error(tn_mul_(v, x), "view_leaf_inplace");
    /* under no_grad the optimizer's update is allowed, and records nothing */
    bool prev = tn_set_grad_enabled(false);
    assert_true(prev);
    assert_int_equal(tn_add_scalar_(x, tn_int(1), tn_int(1)), 0);
    struct tn_tensor *y = tn_mul(x, x);
    assert_false(y->requires_grad);
    assert_null(y->grad_fn);
    assert_false(tn_set_grad_enabled(prev));
    tn_release(y);
    tn_release(v);
    tn_release(x);
}

static void test_root_errors(void **state)
{
    (void)state;
    struct tn_tensor *plain = get("x"), *s = sum(plain);
    expect_error(tn_backward(&s, 1, NULL, false, false), "no_grad_fn");
    tn_release(s);
    struct tn_tensor *x = leaf("x"), *y = tn_mul_scalar(x, tn_int(2));
    expect_error(tn_backward(&y, 1, NULL, false, false), "not_scalar");
    s = sum(y);
    struct tn_tensor *g = tn_ones(TN_SHAPE(2), TN_FLOAT64);
    expect_error(tn_backward(&s, 1, &g, false, false), "shape");
    struct tn_tensor *other = leaf("x"), *r = NULL;
    expect_error(tn_grad(&s, 1, NULL, &other, 1, false, false, false, &r), "unused");
    assert_null(r);
    assert_int_equal(tn_grad(&s, 1, NULL, &other, 1, false, false, true, &r), 0);
    assert_null(r);
    tn_release(other);
    tn_release(g);
    tn_release(s);
    tn_release(y);
    tn_release(x);
    tn_release(plain);
}

/* PyTorch's message for backward through an op without a derivative, for
 * op `op`: the fixture's (from nextafter, whose derivative 1.13 declares
 * not_implemented(); 2.x has one) with the op's name swapped, the only
 * part that varies. */
static void expect_not_implemented(int rc, const char *op)
{
    const char *m = msg("not_implemented"), *name = json_string_value(json_object_get(fx,
                                                                "not_implemented_op"));
    const char *at = strstr(m, name);
    assert_non_null(at);
    char want[256];
    snprintf(want, sizeof want, "%.*s%s%s", (int)(at - m), m, op, at + strlen(name));
    assert_true(rc < 0);
    assert_string_equal(tn_last_error(), want);
}

/* An op with a kernel and no derivatives.yaml entry records a node that
 * fails in backward instead of a result that silently does not require
 * grad; integer results (argmax) get no node. One PyTorch differentiates
 * (native_dropout_backward) keeps its node name and fails in the words of
 * PyTorch's not_implemented() formulas (nextafter's); one PyTorch has no
 * entry for either (scatter.value_reduce) is PyTorch's NotImplemented node,
 * failing in its words. */
static void test_not_implemented(void **state)
{
    (void)state;
    struct tn_tensor *x = leaf("x"), *t = tn_ones(TN_SHAPE(3), TN_BOOL);
    struct tn_tensor *y = tn_native_dropout_backward(x, t, 2.0);
    assert_non_null(y);
    assert_true(y->requires_grad);
    const char *node = json_string_value(json_object_get(fx, "not_implemented_node"));
    assert_string_equal(node, "NextafterBackward0"); /* PyTorch's naming, as ours */
    assert_string_equal(tn_grad_fn_name(y), "NativeDropoutBackwardBackward0");
    struct tn_tensor *s = sum(y);
    expect_not_implemented(tn_backward(&s, 1, NULL, false, false), "native_dropout_backward");
    assert_null(x->grad);
    tn_release(s);
    tn_release(t);
    struct tn_tensor *idx = tn_zeros(TN_SHAPE(3), TN_INT64);
    struct tn_tensor *z = tn_scatter_value_reduce(x, 0, idx, tn_float(2.0), "multiply");
    assert_non_null(z);
    assert_string_equal(tn_grad_fn_name(z),
                        json_string_value(json_object_get(fx, "no_derivative_node")));
    assert_string_equal(json_string_value(json_object_get(fx, "no_derivative_op")), "scatter");
    s = sum(z);
    assert_true(tn_backward(&s, 1, NULL, false, false) < 0);
    assert_string_equal(tn_last_error(), msg("no_derivative"));
    assert_null(x->grad);
    tn_release(s);
    tn_release(z);
    tn_release(idx);
    struct tn_tensor *i = tn_argmax(x, NULL, false);
    assert_non_null(i);
    assert_false(i->requires_grad);
    assert_null(i->grad_fn);
    tn_release(i);
    /* comparisons have no Autograd kernel: their bool results, as PyTorch's,
     * neither require grad nor carry a node */
    struct tn_tensor *(*const cmp[])(const struct tn_tensor *, const struct tn_tensor *) = {
        tn_eq, tn_ne, tn_lt, tn_le, tn_gt, tn_ge};
    for (size_t k = 0; k < sizeof cmp / sizeof *cmp; k++) {
        struct tn_tensor *c = cmp[k](x, x);
        assert_non_null(c);
        assert_int_equal(c->dtype, TN_BOOL);
        assert_false(c->requires_grad);
        assert_null(c->grad_fn);
        tn_release(c);
    }
    tn_release(y);
    tn_release(x);
}

/* An out= op refuses arguments that require grad (grad mode on), in
 * PyTorch's words; without grad mode, or without such arguments, it runs. */
static void test_out_requires_grad(void **state)
{
    (void)state;
    struct tn_tensor *x = leaf("x"), *out = tn_zeros(TN_SHAPE(3), TN_FLOAT64);
    assert_true(tn_add_out(x, x, tn_int(1), out) < 0);
    assert_string_equal(tn_last_error(), msg("out_requires_grad"));
    assert_int_equal(tn_mul_out(x, x, out), TN_ERUNTIME);
    assert_non_null(strstr(tn_last_error(), "mul(): functions with out=..."));
    bool prev = tn_set_grad_enabled(false);
    assert_int_equal(tn_add_out(x, x, tn_int(1), out), 0);
    tn_set_grad_enabled(prev);
    struct tn_tensor *d = tn_detach(x);
    assert_int_equal(tn_add_out(d, d, tn_int(1), out), 0);
    assert_false(out->requires_grad);
    tn_release(d);
    tn_release(out);
    tn_release(x);
}

/* batch_norm run twice in training before one backward: each run updates
 * the running statistics in place, and the first graph (which saved them)
 * stays valid, as in PyTorch, whose kernel writes them without counting a
 * version. The gradient of sum(y * w) through both runs is twice one's.
 * float32: the kernel computes in float64 and copies the statistics back. */
static void test_batch_norm_twice(void **state)
{
    (void)state;
    struct tn_tensor *x = tn_zeros(TN_SHAPE(4, 3), TN_FLOAT32);
    struct tn_tensor *w = tn_zeros(TN_SHAPE(4, 3), TN_FLOAT32);
    float *xp = tn_data(x), *wp = tn_data(w);
    for (int k = 0; k < 12; k++) {
        xp[k] = (float)sin(k + 1.0);
        wp[k] = (float)cos(3.0 * k);
    }
    assert_int_equal(tn_requires_grad_(x, true), 0);
    struct tn_tensor *rm = tn_zeros(TN_SHAPE(3), TN_FLOAT32), *rv = tn_ones(TN_SHAPE(3), TN_FLOAT32);
    struct tn_tensor *g1 = NULL, *s[2];
    for (int run = 0; run < 2; run++) {
        struct tn_tensor *y = tn_batch_norm(x, NULL, NULL, rm, rv, true, 0.1, 1e-5, false);
        assert_non_null(y);
        assert_string_equal(tn_grad_fn_name(y), "NativeBatchNormBackward0");
        struct tn_tensor *yw = tn_mul(y, w);
        s[run] = sum(yw);
        tn_release(yw);
        tn_release(y);
        if (run == 0) {
            assert_int_equal(tn_backward(&s[0], 1, NULL, true, false), 0);
            g1 = tn_clone(x->grad);
            tn_zero_grad(x);
        }
    }
    assert_int_equal(tn_backward(s, 2, NULL, false, false), 0);
    const float *g = tn_data(x->grad), *e = tn_data(g1);
    for (int k = 0; k < 12; k++)
        assert_true(fabsf(g[k] - 2 * e[k]) <= 1e-6f * (1 + fabsf(e[k])));
    tn_release(s[0]);
    tn_release(s[1]);
    tn_release(g1);
    tn_release(rm);
    tn_release(rv);
    tn_release(w);
    tn_release(x);
}

static void test_inplace_nonleaf(void **state)
{
    (void)state;
    struct tn_tensor *x = leaf("x"), *y = tn_mul_scalar(x, tn_int(2));
    assert_int_equal(tn_mul_(y, x), 0);
    assert_int_equal(tn_relu_(y), 0);
    assert_string_equal(tn_grad_fn_name(y), "ReluBackward0");
    struct tn_tensor *z = tn_zeros(TN_SHAPE(3), TN_FLOAT64);
    assert_int_equal(tn_copy_(z, y), 0);
    assert_true(z->requires_grad);
    struct tn_tensor *w = tn_arange(tn_int(0), tn_int(3), tn_int(1), TN_FLOAT64);
    struct tn_tensor *p = tn_mul(z, w), *s = sum(p);
    assert_int_equal(tn_backward(&s, 1, NULL, false, false), 0);
    expect_close(x->grad, "inplace_grad", 1e-12);
    tn_release(s);
    tn_release(p);
    tn_release(w);
    tn_release(z);
    tn_release(y);
    tn_release(x);
}

/* logical_not_ on a float tensor records no node in PyTorch: the values
 * change and the version moves, but a non-leaf keeps its node (x * x's
 * MulBackward0) and passes its gradient on. */
static void test_untracked_inplace(void **state)
{
    (void)state;
    struct tn_tensor *x = leaf("x"), *y = tn_mul(x, x);
    uint64_t v = y->storage->version;
    assert_int_equal(tn_logical_not_(y), 0);
    assert_true(y->storage->version > v);
    assert_true(y->requires_grad);
    const char *node = json_string_value(json_object_get(fx, "untracked_node"));
    assert_non_null(node);
    assert_string_equal(tn_grad_fn_name(y), node);
    expect_close(y, "untracked_values", 0);
    struct tn_tensor *s = sum(y);
    assert_int_equal(tn_backward(&s, 1, NULL, false, false), 0);
    expect_close(x->grad, "untracked_grad", 0);
    tn_release(s);
    tn_release(y);
    tn_release(x);
}

static void test_views(void **state)
{
    (void)state;
    struct tn_tensor *w = leaf("w");
    /* w.t()[1:3] * 3 + w[:, 0].expand(2, 3) + w[:2].t().reshape(2, 4)[:, :3] */
    struct tn_tensor *t = tn_t(w), *a = tn_slice(t, 0, 1, 3, 1), *a3 = tn_mul_scalar(a, tn_int(3));
    struct tn_tensor *c0 = tn_select(w, 1, 0), *b = tn_expand(c0, TN_SHAPE(2, 3));
    struct tn_tensor *w2 = tn_slice(w, 0, 0, 2, 1), *w2t = tn_t(w2);
    struct tn_tensor *r = tn_reshape(w2t, TN_SHAPE(2, 4)), *c = tn_slice(r, 1, 0, 3, 1);
    struct tn_tensor *ab = tn_add(a3, b, tn_int(1)), *v = tn_add(ab, c, tn_int(1));
    struct tn_tensor *v2 = tn_mul(v, v), *s = sum(v2);
    assert_int_equal(tn_backward(&s, 1, NULL, false, false), 0);
    expect_close(w->grad, "view_grad", 1e-12);
    struct tn_tensor *all[] = {t, a, a3, c0, b, w2, w2t, r, c, ab, v, v2, s, w};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tn_release(all[i]);
}

static int double_hook(struct tn_tensor **grad, void *ctx)
{
    (void)ctx;
    struct tn_tensor *g = tn_mul_scalar(*grad, tn_int(2));
    if (!g)
        return tn_last_status();
    tn_release(*grad);
    *grad = g;
    return 0;
}

static int plus_one_hook(struct tn_tensor **grad, void *ctx)
{
    (*(int *)ctx)++;
    struct tn_tensor *g = tn_add_scalar(*grad, tn_int(1), tn_int(1));
    if (!g)
        return tn_last_status();
    tn_release(*grad);
    *grad = g;
    return 0;
}

/* retain_grad: y = 3x (a non-leaf) keeps the gradient reaching it, after
 * its hooks (double_hook, registered after retain_grad, runs first as in
 * PyTorch), summed over two backward runs; a leaf's retain_grad changes
 * nothing; one that does not require grad is refused in PyTorch's words;
 * an in-place op moves it to y's new grad_fn; freeing y before backward is
 * safe. */
static void test_retain_grad(void **state)
{
    (void)state;
    struct tn_tensor *x = tn_ones(TN_SHAPE(3), TN_FLOAT64);
    assert_int_equal(tn_requires_grad_(x, true), 0);
    assert_int_equal(tn_retain_grad(x), 0);
    assert_false(tn_retains_grad(x));
    struct tn_tensor *plain = tn_ones(TN_SHAPE(3), TN_FLOAT64);
    assert_true(tn_retain_grad(plain) < 0);
    assert_string_equal(tn_last_error(),
                        "can't retain_grad on Tensor that has requires_grad=False");
    struct tn_tensor *y = tn_mul_scalar(x, tn_int(3));
    assert_int_equal(tn_retain_grad(y), 0);
    assert_int_equal(tn_retain_grad(y), 0); /* twice is once */
    assert_true(tn_retains_grad(y));
    assert_true(tn_register_hook(y, double_hook, NULL) > 0);
    for (int run = 1; run <= 2; run++) {
        struct tn_tensor *yy = tn_mul(y, y), *s = sum(yy);
        assert_int_equal(tn_backward(&s, 1, NULL, false, false), 0);
        /* d sum(y^2)/dy = 2y = 6, doubled by the hook: 12 per run */
        const double *g = tn_data(y->grad);
        for (int k = 0; k < 3; k++)
            assert_true(g[k] == 12.0 * run);
        tn_release(s);
        tn_release(yy);
    }
    assert_true(((const double *)tn_data(x->grad))[0] == 72.0);
    /* in place: the gradient retained is that of the new y */
    struct tn_tensor *z = tn_mul_scalar(x, tn_int(2));
    assert_int_equal(tn_retain_grad(z), 0);
    assert_int_equal(tn_mul_(z, x), 0); /* z = 2x * x */
    struct tn_tensor *zz = tn_mul_scalar(z, tn_int(5)), *s = sum(zz);
    assert_int_equal(tn_backward(&s, 1, NULL, false, false), 0);
    assert_non_null(z->grad);
    assert_true(((const double *)tn_data(z->grad))[0] == 5.0);
    tn_release(s);
    tn_release(zz);
    /* the graph outlives y: its retain_grad hook finds y gone */
    struct tn_tensor *w = tn_mul_scalar(x, tn_int(4));
    assert_int_equal(tn_retain_grad(w), 0);
    struct tn_tensor *ww = tn_mul_scalar(w, tn_int(1));
    tn_release(w);
    s = sum(ww);
    assert_int_equal(tn_backward(&s, 1, NULL, false, false), 0);
    tn_release(s);
    tn_release(ww);
    tn_release(z);
    tn_release(y);
    tn_release(plain);
    tn_release(x);
}

static int post_hook(struct tn_tensor *leaf_, void *ctx)
{
    /* the grad is final when this runs */
    struct tn_tensor *s = tn_sum(leaf_->grad, TN_DTYPE_UNSET);
    if (!s)
        return tn_last_status();
    *(double *)ctx = tn_item_double(s);
    tn_release(s);
    return 0;
}

static void test_hooks(void **state)
{
    (void)state;
    struct tn_tensor *x = leaf("x"), *y = tn_mul_scalar(x, tn_int(3));
    int calls = 0;
    double seen = NAN;
    assert_true(tn_register_hook(y, double_hook, NULL) > 0);
    assert_true(tn_register_hook(x, plus_one_hook, &calls) > 0);
    int64_t h = tn_register_post_accumulate_grad_hook(x, post_hook, &seen);
    assert_true(h > 0);
    assert_true(tn_register_post_accumulate_grad_hook(y, post_hook, &seen) < 0);
    struct tn_tensor *yy = tn_mul(y, y), *s = sum(yy);
    assert_int_equal(tn_backward(&s, 1, NULL, false, false), 0);
    expect_close(x->grad, "hook_grad", 1e-12);
    assert_int_equal(calls, 1);
    struct tn_tensor *gs = tn_sum(x->grad, TN_DTYPE_UNSET);
    assert_true(fabs(seen - tn_item_double(gs)) < 1e-12);
    assert_true(tn_remove_hook(h));
    assert_false(tn_remove_hook(h));
    tn_release(gs);
    tn_release(s);
    tn_release(yy);
    tn_release(y);
    tn_release(x);
}

static void test_double_backward(void **state)
{
    (void)state;
    struct tn_tensor *x = leaf("x"), *x2 = tn_mul(x, x), *x3 = tn_mul(x2, x), *sx = tn_sin(x);
    struct tn_tensor *p = tn_mul(x3, sx), *y = sum(p), *g = NULL, *g2 = NULL;
    assert_int_equal(tn_grad(&y, 1, NULL, &x, 1, false, true, false, &g), 0);
    expect_close(g, "d1", 1e-12);
    assert_true(g->requires_grad);
    struct tn_tensor *gs = sum(g);
    assert_int_equal(tn_grad(&gs, 1, NULL, &x, 1, false, false, false, &g2), 0);
    expect_close(g2, "d2", 1e-12);
    assert_null(x->grad); /* grad() accumulates nothing */
    struct tn_tensor *all[] = {x, x2, x3, sx, p, y, g, g2, gs};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tn_release(all[i]);
}

/* g = d/dx y (grad_outputs go, or ones) with create_graph, then d/dwrt
 * sum(w g) against the fixture's `key`; 1 (with a message) where a grad
 * fails. */
static int check_second(struct tn_tensor *y, struct tn_tensor *go, struct tn_tensor *x,
                        const struct tn_tensor *w, struct tn_tensor *wrt, const char *key)
{
    struct tn_tensor *g = NULL, *gw = NULL, *s = NULL, *d = NULL;
    int rc = tn_grad(&y, 1, go ? &go : NULL, &x, 1, false, true, false, &g);
    if (rc == 0) {
        gw = tn_mul(g, w);
        s = sum(gw);
        rc = tn_grad(&s, 1, NULL, &wrt, 1, false, false, false, &d);
    }
    if (rc < 0)
        print_message("# %s: %s\n", key, tn_last_error());
    else
        expect_close(d, key, 1e-12);
    struct tn_tensor *all[] = {g, gw, s, d};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++)
        tn_release(all[k]);
    return rc < 0;
}

/* f of autograd_engine.py's DD table (t: the loss target) */
static struct tn_tensor *dd_f(const char *name, const struct tn_tensor *x, const struct tn_tensor *t)
{
    if (!strcmp(name, "mse_loss"))
        return tn_mse_loss(x, t, TN_REDUCTION_MEAN);
    if (!strcmp(name, "mse_loss_sum"))
        return tn_mse_loss(x, t, TN_REDUCTION_SUM);
    if (!strcmp(name, "smooth_l1_loss"))
        return tn_smooth_l1_loss(x, t, TN_REDUCTION_MEAN, 1.5);
    if (!strcmp(name, "relu"))
        return tn_relu(x);
    if (!strcmp(name, "gelu"))
        return tn_gelu(x, "none");
    if (!strcmp(name, "gelu_tanh"))
        return tn_gelu(x, "tanh");
    if (!strcmp(name, "silu"))
        return tn_silu(x);
    if (!strcmp(name, "mish"))
        return tn_mish(x);
    if (!strcmp(name, "elu"))
        return tn_elu(x, tn_float(1.5), tn_int(1), tn_int(1));
    if (!strcmp(name, "softplus"))
        return tn_softplus(x, tn_float(2.0), tn_float(1.0));
    if (!strcmp(name, "leaky_relu"))
        return tn_leaky_relu(x, tn_float(0.1));
    if (!strcmp(name, "hardtanh"))
        return tn_hardtanh(x, tn_float(-0.5), tn_float(1.0));
    if (!strcmp(name, "sigmoid"))
        return tn_sigmoid(x);
    if (!strcmp(name, "tanh"))
        return tn_tanh(x);
    if (!strcmp(name, "softmax"))
        return tn_softmax_int(x, 1, TN_DTYPE_UNSET);
    if (!strcmp(name, "log_softmax"))
        return tn_log_softmax_int(x, 1, TN_DTYPE_UNSET);
    if (!strcmp(name, "cross_entropy")) {
        struct tn_tensor *target = tn_from_data((const int64_t[]){1, 0, 3},
                                                TN_SHAPE(3), TN_INT64);
        struct tn_tensor *r = tn_cross_entropy_loss(x, target, NULL, 1, -100, 0.0);
        tn_release(target);
        return r;
    }
    fail_msg("unknown dd case %s", name);
    return NULL;
}

/* Second derivatives through the losses and activations (their backward
 * ops' own formulas): d/dx sum(v d/dx sum(w f(x))) against PyTorch's
 * (zeros for the piecewise linear ones, which must not fail). */
static void test_nn_double_backward(void **state)
{
    (void)state;
    static const char *const names[] = {
        "mse_loss", "mse_loss_sum", "smooth_l1_loss", "relu", "gelu", "gelu_tanh",
        "silu", "mish", "elu", "softplus", "leaky_relu", "hardtanh", "sigmoid", "tanh",
        "softmax", "log_softmax", "cross_entropy",
    };
    struct tn_tensor *t = get("dd_t"), *w = get("dd_w"), *v = get("dd_v");
    int bad = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        struct tn_tensor *x = leaf("dd_x"), *f = dd_f(names[i], x, t), *y = NULL;
        assert_non_null(f);
        if (f->ndim) {
            struct tn_tensor *fw = tn_mul(f, w);
            y = sum(fw);
            tn_release(fw);
        } else {
            y = tn_retain(f);
        }
        char key[32];
        snprintf(key, sizeof key, "dd_%s", names[i]);
        bad += check_second(y, NULL, x, v, x, key);
        struct tn_tensor *all[] = {x, f, y};
        for (size_t k = 0; k < sizeof all / sizeof *all; k++)
            tn_release(all[k]);
    }
    tn_release(t);
    tn_release(w);
    tn_release(v);
    assert_int_equal(bad, 0);
}

/* The derivative of a first gradient for its grad_outputs (v), through
 * the backward ops whose only differentiable input is the gradient
 * (embedding's, constant_pad_nd's): d/dv sum(u d/dx sum(v f(x))). */
static void test_grad_outputs_double_backward(void **state)
{
    (void)state;
    static const char *const names[] = {"embedding", "embedding_nopad", "constant_pad_nd"};
    struct tn_tensor *idx = tn_from_data((const int64_t[]){0, 5, 2, 2, 2, 1}, TN_SHAPE(2, 3),
                                         TN_INT64);
    int bad = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char key[64];
        snprintf(key, sizeof key, "dgo_%s_x", names[i]);
        struct tn_tensor *x = leaf(key), *y;
        snprintf(key, sizeof key, "dgo_%s_v", names[i]);
        struct tn_tensor *v = leaf(key);
        snprintf(key, sizeof key, "dgo_%s_u", names[i]);
        struct tn_tensor *u = get(key);
        if (i < 2)
            y = tn_embedding(x, idx, i == 0 ? 2 : -1, false, false);
        else
            y = tn_constant_pad_nd(x, (const int64_t[]){1, 2, -1, 1}, 4, tn_float(0.5));
        assert_non_null(y);
        snprintf(key, sizeof key, "dgo_%s", names[i]);
        bad += check_second(y, v, x, u, v, key);
        struct tn_tensor *all[] = {x, v, u, y};
        for (size_t k = 0; k < sizeof all / sizeof *all; k++)
            tn_release(all[k]);
    }
    tn_release(idx);
    assert_int_equal(bad, 0);
}

static void test_mlp_step(void **state)
{
    (void)state;
    struct tn_tensor *xb = get("mlp_xb"), *oh = get("mlp_onehot");
    struct tn_tensor *w1 = leaf("mlp_w1"), *b1 = leaf("mlp_b1"), *w2 = leaf("mlp_w2"),
                     *b2 = leaf("mlp_b2");
    struct tn_tensor *w1t = tn_t(w1), *a = tn_addmm(b1, xb, w1t, tn_int(1), tn_int(1));
    struct tn_tensor *h = tn_relu(a), *logits = tn_linear(h, w2, b2);
    struct tn_tensor *lp = tn_log_softmax_int(logits, 1, TN_DTYPE_UNSET), *m = tn_mul(lp, oh);
    struct tn_tensor *rs = tn_sum_dim_intlist(m, (const int64_t[]){1}, 1, false, TN_DTYPE_UNSET);
    struct tn_tensor *mean = tn_mean(rs, TN_DTYPE_UNSET), *loss = tn_neg(mean);
    assert_non_null(loss);
    assert_int_equal(tn_backward(&loss, 1, NULL, false, false), 0);
    expect_close(loss, "mlp_loss", 1e-5);
    expect_close(w1->grad, "mlp_grad_w1", 1e-5);
    expect_close(b1->grad, "mlp_grad_b1", 1e-5);
    expect_close(w2->grad, "mlp_grad_w2", 1e-5);
    expect_close(b2->grad, "mlp_grad_b2", 1e-5);
    struct tn_tensor *all[] = {xb, oh, w1, b1, w2, b2, w1t, a, h, logits, lp, m, rs, mean, loss};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tn_release(all[i]);
}

/* conv2d + ReLU + max_pool2d twice, linear, cross entropy: every
 * parameter's gradient is PyTorch's (the conv layers' ones exist only
 * through convolution's derivative; the Autograd key falls through for an
 * op without one, and the conv net then trained with frozen conv layers). */
static struct tn_tensor *conv_block(const struct tn_tensor *x, const struct tn_tensor *w,
                                   const struct tn_tensor *b)
{
    const int64_t one[] = {1}, two[] = {2};
    struct tn_tensor *c = tn_conv2d(x, w, b, one, 1, one, 1, one, 1, 1), *r = tn_relu(c);
    struct tn_tensor *p = tn_max_pool2d(r, two, 1, NULL, 0, (const int64_t[]){0}, 1, one, 1, false);
    tn_release(c);
    tn_release(r);
    return p;
}

static void test_convnet_step(void **state)
{
    (void)state;
    static const char *names[6] = {"w1", "b1", "w2", "b2", "w3", "b3"};
    struct tn_tensor *p[6], *x = get("conv_x"), *target = get("conv_target");
    char key[32];
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "conv_%s", names[i]);
        p[i] = leaf(key);
    }
    struct tn_tensor *h1 = conv_block(x, p[0], p[1]), *h2 = conv_block(h1, p[2], p[3]);
    struct tn_tensor *f = tn_flatten(h2, 1, -1), *logits = tn_linear(f, p[4], p[5]);
    struct tn_tensor *loss = tn_cross_entropy_loss(logits, target, NULL, 1, -100, 0.0);
    assert_non_null(loss);
    assert_int_equal(tn_backward(&loss, 1, NULL, false, false), 0);
    expect_close(loss, "conv_loss", 1e-5);
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "conv_grad_%s", names[i]);
        expect_close(p[i]->grad, key, 1e-5);
    }
    struct tn_tensor *all[] = {x, target, h1, h2, f, logits, loss};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tn_release(all[i]);
    for (int i = 0; i < 6; i++)
        tn_release(p[i]);
}

static void test_copy_slices(void **state)
{
    (void)state;
    struct tn_tensor *x = leaf("x"), *y = tn_mul_scalar(x, tn_int(2));
    struct tn_tensor *row = tn_slice(y, 0, 1, 2, 1), *x0 = tn_slice(x, 0, 0, 1, 1);
    assert_int_equal(tn_mul_(row, x0), 0);
    assert_string_equal(tn_grad_fn_name(y), "CopySlices");
    struct tn_tensor *z = tn_zeros(TN_SHAPE(5), TN_FLOAT64), *part = tn_slice(z, 0, 1, 4, 1);
    struct tn_tensor *yy = tn_mul(y, y);
    assert_int_equal(tn_copy_(part, yy), 0);
    assert_true(z->requires_grad);
    struct tn_tensor *r = tn_arange(tn_int(0), tn_int(5), tn_int(1), TN_FLOAT64);
    struct tn_tensor *p = tn_mul(z, r), *s = sum(p);
    assert_int_equal(tn_backward(&s, 1, NULL, false, false), 0);
    expect_close(x->grad, "slices_grad", 1e-12);
    struct tn_tensor *all[] = {x, y, row, x0, z, part, yy, r, p, s};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tn_release(all[i]);
}

/* .grad never aliases another tensor's memory: sum's gradient is an
 * expanded view, and a view's gradient can be a view of a shared one */
static void test_grad_owns_memory(void **state)
{
    (void)state;
    struct tn_tensor *x = leaf("x"), *w = leaf("x"), *v = tn_view(x, TN_SHAPE(3));
    struct tn_tensor *y = tn_add(v, w, tn_int(1)), *s = sum(y);
    assert_int_equal(tn_backward(&s, 1, NULL, true, false), 0);
    assert_true(x->grad->storage != w->grad->storage);
    assert_true(tn_is_contiguous(x->grad));
    assert_int_equal(tn_backward(&s, 1, NULL, false, false), 0); /* adds in place */
    struct tn_tensor *gx = sum(x->grad), *gw = sum(w->grad);
    assert_true(tn_item_double(gx) == 6.0 && tn_item_double(gw) == 6.0);
    tn_release(gx);
    tn_release(gw);
    tn_release(s);
    tn_release(y);
    tn_release(v);
    tn_release(w);
    tn_release(x);
}

static void test_detach_and_modes(void **state)
{
    (void)state;
    struct tn_tensor *x = leaf("x"), *y = tn_mul(x, x), *d = tn_detach(y);
    assert_true(y->requires_grad);
    assert_false(d->requires_grad);
    assert_true(tn_is_leaf(d));
    assert_false(tn_is_leaf(y));
    assert_string_equal(tn_grad_fn_name(y), "MulBackward0");
    struct tn_tensor *i = tn_arange(tn_int(0), tn_int(3), tn_int(1), TN_DTYPE_UNSET);
    assert_true(tn_requires_grad_(i, true) < 0);
    assert_string_equal(tn_last_error(),
                        "only Tensors of floating point and complex dtype can require gradients");
    tn_release(i);
    tn_release(d);
    tn_release(y);
    tn_release(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_backward), cmocka_unit_test(test_retain_graph),
        cmocka_unit_test(test_version_counter), cmocka_unit_test(test_leaf_rules),
        cmocka_unit_test(test_root_errors),     cmocka_unit_test(test_inplace_nonleaf),
        cmocka_unit_test(test_views),           cmocka_unit_test(test_hooks),
        cmocka_unit_test(test_double_backward), cmocka_unit_test(test_mlp_step),
        cmocka_unit_test(test_convnet_step),
        cmocka_unit_test(test_detach_and_modes), cmocka_unit_test(test_grad_owns_memory),
        cmocka_unit_test(test_copy_slices),     cmocka_unit_test(test_not_implemented),
        cmocka_unit_test(test_batch_norm_twice), cmocka_unit_test(test_untracked_inplace),
        cmocka_unit_test(test_retain_grad),
        cmocka_unit_test(test_out_requires_grad),
        cmocka_unit_test(test_nn_double_backward),
        cmocka_unit_test(test_grad_outputs_double_backward),
    };
    setup(NULL);
    int rc = TN_RUN_TESTS(tests);
    teardown(NULL);
    return rc;
}
