/*
 * Unit tests of gradients at the edges the OpInfo sweep found (issue 25):
 * linalg_vector_norm's for ord inf over NaNs and infinities (lib/ops/shape.c)
 * and cat's for empty inputs (lib/ops/cpu/shape.c), and which dtypes a
 * conversion or copy_ records a node for (lib/autograd/node.c), against
 * tests/fixtures/autograd/edges.json (real PyTorch; autograd_edges.py).
 */
#include <math.h>
#include <string.h>

#include "tn_test.h"

#include <tensor/autograd.h>

/* Runs check on every case of tests/fixtures/autograd/edges.json's list
 * `key` (autograd_edges.py); check says how many things differ. */
static void edge_cases(const char *key, int (*check)(json_t *c, const char *what))
{
    json_t *fx = tn_test_fixture("../autograd/edges");
    size_t i;
    json_t *c;
    int bad = 0;
    json_array_foreach(json_object_get(fx, key), i, c) {
        char what[64];
        snprintf(what, sizeof what, "%s case %zu", key, i);
        bad += check(c, what);
    }
    json_decref(fx);
    assert_int_equal(bad, 0);
}

/* The gradient of linalg_vector_norm with ord inf and -inf where the
 * input holds NaNs and infinities (norm_inf): a slice holding a NaN gives
 * 0 everywhere, an infinite extremum elsewhere its sgn / count. The
 * values compared, NaN equal to NaN, not the sign of a zero. */
static int norm_inf_case(json_t *c, const char *what)
{
    int bad = 0;
    struct tn_tensor *x = tn_test_tensor(json_object_get(c, "x"));
    struct tn_tensor *g = tn_test_tensor(json_object_get(c, "grad"));
    assert_int_equal(tn_requires_grad_(x, true), 0);
    json_t *jd = json_object_get(c, "dim");
    int64_t dim = json_is_array(jd) ? json_integer_value(json_array_get(jd, 0)) : 0;
    double ord = (double)json_integer_value(json_object_get(c, "ord")) * INFINITY;
    struct tn_tensor *y = tn_linalg_vector_norm(x, tn_float(ord), json_is_array(jd) ? &dim : NULL,
                                                json_is_array(jd) ? 1 : 0,
                                                json_is_true(json_object_get(c, "keepdim")),
                                                TN_DTYPE_UNSET);
    assert_non_null(y);
    assert_int_equal(tn_backward(&y, 1, &g, false, false), 0);
    bad += tn_test_compare(y, json_object_get(c, "out"), what, 0) != 0;
    struct tn_tensor *want = tn_test_tensor(json_object_get(c, "gx"));
    struct tn_tensor *w64 = tn_to_dtype(want, TN_FLOAT64), *g64 = tn_to_dtype(x->grad, TN_FLOAT64);
    const double *wd = tn_data(w64), *gd = tn_data(g64);
    for (int64_t j = 0; j < tn_numel(w64); j++)
        if (!(gd[j] == wd[j] || (isnan(gd[j]) && isnan(wd[j])))) {
            print_message("# %s: gradient element %lld is %g, PyTorch's %g\n", what, (long long)j,
                          gd[j], wd[j]);
            bad++;
        }
    tn_release(w64);
    tn_release(g64);
    tn_release(want);
    tn_release(y);
    tn_release(g);
    tn_release(x);
    return bad;
}

static void test_norm_inf_grad(void **state) { edge_cases("norm_inf", norm_inf_case); }

/* cat of empty tensors (cat_empty: the legacy 1-D empty one, one empty
 * along dim, only empty ones): every input gets its gradient, PyTorch's
 * empty one, the others theirs. */
static int cat_empty_case(json_t *c, const char *what)
{
    int bad = 0;
    json_t *jx = json_object_get(c, "xs");
    struct tn_tensor *xs[4] = {0};
    int n = (int)json_array_size(jx);
    assert_true(n <= 4);
    for (int j = 0; j < n; j++) {
        xs[j] = tn_test_tensor(json_array_get(jx, (size_t)j));
        assert_int_equal(tn_requires_grad_(xs[j], true), 0);
    }
    struct tn_tensor *g = tn_test_tensor(json_object_get(c, "grad"));
    struct tn_tensor *y = tn_cat((const struct tn_tensor *const *)xs, n,
                                 json_integer_value(json_object_get(c, "dim")));
    assert_non_null(y);
    bad += tn_test_compare(y, json_object_get(c, "out"), what, 0) != 0;
    if (tn_backward(&y, 1, &g, false, false) < 0) {
        print_message("# %s: backward: %s\n", what, tn_last_error());
        bad++;
    }
    for (int j = 0; j < n; j++) {
        if (!xs[j]->grad) {
            print_message("# %s: input %d got no gradient\n", what, j);
            bad++;
        } else {
            bad += tn_test_compare(xs[j]->grad, json_array_get(json_object_get(c, "gxs"), (size_t)j),
                                   what, 0) != 0;
        }
        tn_release(xs[j]);
    }
    tn_release(y);
    tn_release(g);
    return bad;
}

static void test_cat_empty_grad(void **state) { edge_cases("cat_empty", cat_empty_case); }

/* Whether t requires grad and its grad_fn's name match the fixture's
 * [requires_grad, name or null]. */
static int history_differs(const struct tn_tensor *t, json_t *want, const char *what)
{
    const char *name = json_string_value(json_array_get(want, 1));
    const char *got = tn_grad_fn_name(t);
    if (t->requires_grad == json_is_true(json_array_get(want, 0)) &&
        (name ? got && !strcmp(got, name) : !got))
        return 0;
    printf("# %s: requires_grad %d grad_fn %s, PyTorch's %s\n", what, t->requires_grad,
           got ? got : "none", name ? name : "none");
    return 1;
}

/* A float64 tensor that requires grad converted with tn_to_dtype, and
 * copied whole and into a slice of a tensor of that dtype (to_dtype): only
 * floating and complex results get a node (an integer or bool one used to
 * keep ToCopyBackward0, CopyBackwards or CopySlices and let gradients
 * flow through it). */
static int to_dtype_case(json_t *c, const char *what)
{
    json_t *jo = json_object_get(c, "out");
    enum tn_dtype dt = tn_test_dtype(json_string_value(json_object_get(jo, "dtype")));
    struct tn_tensor *x = tn_test_tensor(json_object_get(c, "x"));
    assert_int_equal(tn_requires_grad_(x, true), 0);
    struct tn_tensor *y = tn_to_dtype(x, dt);
    int64_t whole[2] = {2, 3}, big[2] = {3, 3};
    struct tn_tensor *d = tn_zeros(whole, 2, dt), *s = tn_zeros(big, 2, dt);
    assert_non_null(y);
    assert_non_null(d);
    assert_non_null(s);
    struct tn_tensor *v = tn_narrow(s, 0, 1, 2);
    assert_non_null(v);
    assert_int_equal(tn_copy_(d, x), 0);
    assert_int_equal(tn_copy_(v, x), 0);
    int bad = tn_test_compare(y, jo, what, 0) != 0;
    bad += history_differs(y, json_object_get(c, "to"), what);
    bad += history_differs(d, json_object_get(c, "copy"), what);
    bad += history_differs(s, json_object_get(c, "slice"), what);
    tn_release(v);
    tn_release(s);
    tn_release(d);
    tn_release(y);
    tn_release(x);
    return bad;
}

static void test_to_dtype_history(void **state) { edge_cases("to_dtype", to_dtype_case); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_norm_inf_grad),
        cmocka_unit_test(test_cat_empty_grad),
        cmocka_unit_test(test_to_dtype_history),
    };
    return TN_RUN_TESTS(tests);
}
