/*
 * tests/unit/ops_cases.h: runs the op fixtures that tests/fixtures/ops_*.py
 * wrote with real PyTorch (see ops_binary.py for the case format): each
 * case is called boxed by its op name and compared within the dtype's
 * tolerance. Included by the ops unit tests.
 */
#ifndef TN_OPS_CASES_H
#define TN_OPS_CASES_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tn_test.h"

#include <tensor/autograd.h>

#include "ops/internal.h"

/* Tolerances, once for every op test: |got - want| <= atol + rtol * |want|.
 * Integer and bool results must match exactly. Floats differ from PyTorch
 * only where it fuses a multiply-add differently (alpha != 1) or its
 * complex division vectorises differently. */
/* Set (test_ops_grid16, test_ops_binary): floats compare exactly too, for kernels that
 * round every step as PyTorch's do. */
static bool values_exact;

static void tolerance(enum tn_dtype dt, bool sums, double *rtol, double *atol)
{
    if (values_exact) {
        *rtol = *atol = 0;
        return;
    }
    if (sums) {
        /* ops that add up products (mm, reductions): summation order
         * differs from PyTorch's, so allow for rounding of the terms */
        switch (dt) {
        case TN_FLOAT64: case TN_COMPLEX128: *rtol = 1e-10; *atol = 1e-10; return;
        case TN_FLOAT32: *rtol = 1e-5; *atol = 1e-4; return;
        case TN_COMPLEX64: *rtol = 1e-5; *atol = 1e-4; return;
        case TN_FLOAT16: *rtol = 1e-2; *atol = 2e-2; return;
        case TN_BFLOAT16: *rtol = 2e-2; *atol = 1e-1; return;
        default: *rtol = 0; *atol = 0; return;
        }
    }
    switch (dt) {
    case TN_FLOAT64: case TN_COMPLEX128: *rtol = 1e-12; *atol = 1e-12; break;
    case TN_FLOAT32: *rtol = 1e-6; *atol = 1e-6; break;
    case TN_COMPLEX64: *rtol = 1e-5; *atol = 1e-5; break;
    case TN_FLOAT16: *rtol = 1e-3; *atol = 1e-3; break;
    case TN_BFLOAT16: *rtol = 8e-3; *atol = 8e-3; break;
    default: *rtol = 0; *atol = 0; break;
    }
}

static bool close_to(double got, double want, double rtol, double atol)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return got == want;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* 0 when t matches the fixture tensor within the dtype's tolerance. */
static int compare(const struct tn_tensor *t, json_t *want, const char *what, bool sums)
{
    struct tn_tensor *w = tn_test_tensor(want);
    assert_non_null(w);
    int rc = 0;
    double rtol, atol;
    tolerance(w->dtype, sums, &rtol, &atol);
    if (t->dtype != w->dtype || t->ndim != w->ndim ||
        memcmp(t->sizes, w->sizes, sizeof(int64_t) * (size_t)t->ndim) != 0) {
        char a[128], b[128];
        print_message("# %s: got %s %s, want %s %s\n", what, tn_dtype_name(t->dtype),
                      tn_shape_format(t->sizes, t->ndim, a, sizeof a), tn_dtype_name(w->dtype),
                      tn_shape_format(w->sizes, w->ndim, b, sizeof b));
        rc = -1;
    } else if (rtol == 0) {
        rc = tn_test_compare(t, want, what, 0);
    } else {
        /* complex64 (complex128) compares as pairs of floats (doubles) */
        bool cplx = tn_dtype_is_complex(w->dtype);
        enum tn_dtype part = w->dtype == TN_COMPLEX64    ? TN_FLOAT32
                             : w->dtype == TN_COMPLEX128 ? TN_FLOAT64
                                                         : w->dtype;
        struct tn_tensor *gc = tn_contiguous(t);
        int64_t n = tn_numel(w) * (cplx ? 2 : 1);
        struct tn_tensor *gv = tn_from_blob(tn_data(gc), TN_SHAPE(n), NULL, part, NULL, NULL);
        struct tn_tensor *wv = tn_from_blob(tn_data(w), TN_SHAPE(n), NULL, part, NULL, NULL);
        struct tn_tensor *g64 = tn_to_dtype(gv, TN_FLOAT64), *w64 = tn_to_dtype(wv, TN_FLOAT64);
        const double *gd = tn_data(g64), *wd = tn_data(w64);
        for (int64_t i = 0; i < n && rc == 0; i++)
            if (!close_to(gd[i], wd[i], rtol, atol)) {
                print_message("# %s: element %lld is %.17g, PyTorch has %.17g\n", what,
                              (long long)i, gd[i], wd[i]);
                rc = -1;
            }
        tn_release(g64);
        tn_release(w64);
        tn_release(gv);
        tn_release(wv);
        tn_release(gc);
    }
    tn_release(w);
    return rc;
}

/* 0 when a Tensor[] result (one TN_IV_TENSORLIST on the stack, rc 1)
 * matches the fixture's "list" tensor by tensor; releases the result. */
static int compare_list(int rc, struct tn_ivalue *st, json_t *want, const char *what, bool sums)
{
    int bad = 0;
    if (rc != 1 || st[0].tag != TN_IV_TENSORLIST) {
        print_message("# %s: failed (%d results, want one Tensor[]): %s\n", what, rc,
                      rc < 0 ? tn_last_error() : "");
        bad = 1;
    } else if ((size_t)st[0].v.tensors.n != json_array_size(want)) {
        print_message("# %s: %d tensors, PyTorch gives %zu\n", what, st[0].v.tensors.n,
                      json_array_size(want));
        bad = 1;
    }
    for (int i = 0; !bad && i < st[0].v.tensors.n; i++)
        bad = compare(st[0].v.tensors.data[i], json_array_get(want, (size_t)i), what, sums) != 0;
    for (int i = 0; i < rc; i++)
        tn_ivalue_release(&st[i]);
    return bad;
}

/* Runs every case of fixture `name`; `sums` picks the tolerance table.
 * With `follow2`, where the fixture came from PyTorch 1.x and we follow
 * 2.x (an op 1.13 lacks, reworded errors), a differing error is noted, not
 * failed; values are always checked. */
/* Set (test_ops_strides): strides compare as PyTorch's
 * check_significant_strides does, dimensions of size 1 (and every dimension
 * of an empty result) ignored; else exactly. */
static bool layout_significant;

static bool strides_differ(const struct tn_tensor *t, const int64_t *sd, int nd)
{
    if (nd != t->ndim)
        return true;
    if (!layout_significant)
        return memcmp(sd, t->strides, sizeof sd[0] * (size_t)nd) != 0;
    if (tn_numel(t) == 0)
        return false;
    for (int i = 0; i < nd; i++)
        if (t->sizes[i] != 1 && t->strides[i] != sd[i])
            return true;
    return false;
}

/* For a case with "layout": whether result t's strides or its being the
 * first argument self differ from PyTorch's (printed). */
static bool layout_differs(const struct tn_tensor *t, json_t *want, const struct tn_tensor *self,
                           bool is_self, const char *what)
{
    int64_t sd[TN_MAX_DIMS];
    char a[128], b[128];
    int nd = tn_test_ints(json_object_get(want, "stride"), sd);
    if (strides_differ(t, sd, nd)) {
        print_message("# %s: strides %s, PyTorch's %s\n", what,
                      tn_shape_format(t->strides, t->ndim, a, sizeof a),
                      tn_shape_format(sd, nd, b, sizeof b));
        return true;
    }
    if ((t == self) != is_self) {
        print_message("# %s: the result is %s, PyTorch's %s\n", what,
                      t == self ? "self" : "a copy", is_self ? "self" : "a copy");
        return true;
    }
    return false;
}

static void run_op_cases(const char *name_, bool sums, bool follow2)
{
    json_t *fx = tn_test_fixture(name_);
    bool torch1 = follow2 &&
                  strncmp(json_string_value(json_object_get(fx, "torch")), "1.", 2) == 0;
    json_t *cases = json_object_get(fx, "cases");
    assert_true(json_array_size(cases) > 0); /* none: a broken fixture (dropout has 5) */
    int failed = 0;
    size_t ci;
    json_t *c;
    json_array_foreach(cases, ci, c) {
        const char *name = json_string_value(json_object_get(c, "op"));
        const struct tn_op *op = tn_op_find(name);
        assert_non_null(op);
        struct tn_ivalue st[16];
        struct tn_tensor *owned[16] = {0}, *lists[16][8] = {{0}};
        int64_t ints[16][TN_MAX_DIMS];
        double dbls[16][TN_MAX_DIMS];
        json_t *args = json_object_get(c, "args");
        int n = (int)json_array_size(args);
        assert_true(n <= 16);
        for (int i = 0; i < n; i++) {
            json_t *a = json_array_get(args, (size_t)i), *v;
            if ((v = json_object_get(a, "tensor"))) {
                struct tn_tensor *t = tn_test_tensor(v);
                assert_non_null(t);
                if (json_is_true(json_object_get(a, "transpose"))) {
                    struct tn_tensor *tt = tn_transpose(t, 0, 1);
                    tn_release(t);
                    t = tt;
                } else if (json_is_true(json_object_get(a, "layout"))) {
                    /* laid out with PyTorch's strides (a sliced one: a storage with gaps) */
                    int64_t sd[TN_MAX_DIMS];
                    tn_test_ints(json_object_get(v, "stride"), sd);
                    struct tn_tensor *tt = tn_empty_strided(t->sizes, t->ndim, sd, t->dtype);
                    assert_non_null(tt);
                    assert_int_equal(tn_copy_(tt, t), TN_OK);
                    tn_release(t);
                    t = tt;
                }
                owned[i] = t;
                st[i] = (struct tn_ivalue){.tag = TN_IV_TENSOR, .v.t = t};
            } else if ((v = json_object_get(a, "tensors"))) {
                int k = (int)json_array_size(v);
                bool none = false; /* a Tensor?[] with None (null) entries */
                assert_true(k <= 8);
                for (int j = 0; j < k; j++) {
                    json_t *e = json_array_get(v, (size_t)j);
                    if (json_is_null(e))
                        none = true;
                    else
                        assert_non_null(lists[i][j] = tn_test_tensor(e));
                    if (lists[i][j] && json_is_true(json_object_get(a, "layout"))) {
                        /* laid out with PyTorch's strides, as a "layout" tensor */
                        int64_t sd[TN_MAX_DIMS];
                        struct tn_tensor *t = lists[i][j];
                        tn_test_ints(json_object_get(e, "stride"), sd);
                        struct tn_tensor *tt = tn_empty_strided(t->sizes, t->ndim, sd, t->dtype);
                        assert_non_null(tt);
                        assert_int_equal(tn_copy_(tt, t), TN_OK);
                        tn_release(t);
                        lists[i][j] = tt;
                    }
                }
                st[i] = (struct tn_ivalue){.tag = none ? TN_IV_OPTTENSORLIST : TN_IV_TENSORLIST,
                                           .v.tensors = {lists[i], k}};
            } else if ((v = json_object_get(a, "int"))) {
                st[i] = (struct tn_ivalue){.tag = TN_IV_INT, .v.i = json_integer_value(v)};
            } else if ((v = json_object_get(a, "float"))) {
                st[i] = (struct tn_ivalue){.tag = TN_IV_DOUBLE, .v.f = json_real_value(v)};
            } else if ((v = json_object_get(a, "float_text"))) {
                st[i] = (struct tn_ivalue){.tag = TN_IV_DOUBLE,
                                           .v.f = strtod(json_string_value(v), NULL)};
            } else if ((v = json_object_get(a, "bool"))) {
                st[i] = (struct tn_ivalue){.tag = TN_IV_BOOL, .v.b = json_is_true(v)};
            } else if ((v = json_object_get(a, "ints"))) {
                int k = tn_test_ints(v, ints[i]);
                st[i] = (struct tn_ivalue){.tag = TN_IV_INTLIST, .v.ints = {ints[i], k}};
            } else if ((v = json_object_get(a, "floats"))) {
                int k = (int)json_array_size(v);
                assert_true(k <= TN_MAX_DIMS);
                for (int j = 0; j < k; j++)
                    dbls[i][j] = json_number_value(json_array_get(v, (size_t)j));
                st[i] = (struct tn_ivalue){.tag = TN_IV_DOUBLELIST, .v.doubles = {dbls[i], k}};
            } else if ((v = json_object_get(a, "dtype"))) {
                st[i] = (struct tn_ivalue){.tag = TN_IV_DTYPE,
                                           .v.dtype = tn_test_dtype(json_string_value(v))};
            } else if ((v = json_object_get(a, "str"))) {
                st[i] = (struct tn_ivalue){.tag = TN_IV_STR, .v.str = json_string_value(v)};
            } else {
                st[i] = (struct tn_ivalue){.tag = TN_IV_NONE};
            }
        }
        char what[64];
        snprintf(what, sizeof what, "case %zu (%s)", ci, name);
        int rc = tn_op_call(op, st, n);
        json_t *err = json_object_get(c, "error");
        if (err) {
            if (rc >= 0) {
                print_message("# %s: succeeded, PyTorch %s raised: %s\n", what,
                              torch1 ? "1.x (2.x does not)" : "", json_string_value(err));
                failed += !torch1;
                for (int i = 0; i < rc; i++)
                    tn_ivalue_release(&st[i]);
            } else if (strcmp(tn_last_error(), json_string_value(err)) != 0) {
                print_message("# %s: error '%s', PyTorch says '%s'\n", what, tn_last_error(),
                              json_string_value(err));
                failed += !torch1;
            }
        } else if (json_object_get(c, "list")) {
            failed += compare_list(rc, st, json_object_get(c, "list"), what, sums);
        } else {
            /* a tuple return ("outs") is compared result by result */
            json_t *outs = json_object_get(c, "outs");
            int want = outs ? (int)json_array_size(outs) : 1;
            if (rc != want) {
                print_message("# %s: failed (%d results, want %d): %s\n", what, rc, want,
                              rc < 0 ? tn_last_error() : "");
                failed++;
            }
            for (int i = 0; i < rc; i++) {
                json_t *w = outs ? json_array_get(outs, (size_t)i) : json_object_get(c, "out");
                if (rc == want && json_is_null(w) != (st[i].tag == TN_IV_NONE)) {
                    print_message("# %s: result %d is %s, PyTorch's %s\n", what, i,
                                  st[i].tag == TN_IV_NONE ? "None" : "a tensor",
                                  json_is_null(w) ? "None" : "a tensor");
                    failed++;
                } else if (rc == want && !json_is_null(w) && compare(st[i].v.t, w, what, sums) != 0) {
                    failed++;
                } else if (rc == want && !json_is_null(w) &&
                           json_is_true(json_object_get(c, "layout")) &&
                           layout_differs(st[i].v.t, w, owned[0],
                                          json_is_true(json_object_get(c, "self")), what)) {
                    failed++;
                }
                if (st[i].tag == TN_IV_TENSOR)
                    tn_release(st[i].v.t);
            }
        }
        for (int i = 0; i < n; i++) {
            tn_release(owned[i]);
            for (int j = 0; j < 8; j++)
                tn_release(lists[i][j]);
        }
    }
    json_decref(fx);
    assert_int_equal(failed, 0);
}

/* tn_gradcheck of fn over two float64 inputs made to require grad, which
 * it releases; fails the test with the library's message. */
static inline void gradcheck2(tn_gradcheck_fn fn, struct tn_tensor *a, struct tn_tensor *b,
                              void *ctx)
{
    struct tn_tensor *in[2] = {a, b};
    for (int i = 0; i < 2; i++)
        assert_int_equal(tn_requires_grad_(in[i], true), 0);
    int r = tn_gradcheck(fn, in, 2, ctx, 1e-6, 1e-8, 1e-6);
    if (r != 1)
        print_message("# %s\n", tn_last_error());
    assert_int_equal(r, 1);
    tn_release(a);
    tn_release(b);
}

/* fn with every output from 64 bytes on written with non-temporal stores
 * (TN_STREAM_BYTES=64; the default starts at 3/8 of the L3, megabytes), then
 * the default again */
static inline void run_streamed(void (*fn)(void))
{
    setenv("TN_STREAM_BYTES", "64", 1);
    tn__stream_configure();
    fn();
    unsetenv("TN_STREAM_BYTES");
    tn__stream_configure();
}

#endif
