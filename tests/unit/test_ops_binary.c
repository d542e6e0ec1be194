/*
 * Unit tests of the elementwise binary ops through the dispatcher: every
 * case of tests/fixtures/ops/binary.json (written by real PyTorch) is called
 * boxed by its op name; a few typed calls check the in-place and out=
 * variants, the Meta key and the key sets.
 */
#include <math.h>
#include <string.h>
#include "ops_cases.h"
#include "ops/internal.h"

static void test_fixture_cases(void **state)
{
    run_op_cases("../ops/binary", false, false);
}

/* mul and div of float16/bfloat16 by one number, whose reference is 2.x
 * alone (ops_binary_v2.py): the number read in float32, the result rounded
 * once, compared exactly */
static void test_scalar16_cases(void **state)
{
    values_exact = true;
    run_op_cases("../ops/binary_v2", false, false);
    values_exact = false;
}

/* in-place and out= variants, checked against the functional result */
static void test_inplace_and_out(void **state)
{
    struct tn_tensor *a = tn_arange(tn_int(0), tn_int(6), tn_int(1), TN_FLOAT32);
    struct tn_tensor *a2 = tn_view(a, TN_SHAPE(2, 3));
    struct tn_tensor *b = tn_full(TN_SHAPE(3), tn_float(0.5), TN_FLOAT32);
    struct tn_tensor *want = tn_add(a2, b, tn_int(2));
    assert_non_null(want);
    assert_int_equal(tn_add_(a2, b, tn_int(2)), 0);
    for (int i = 0; i < 6; i++)
        assert_true(((float *)tn_data(a2))[i] == ((float *)tn_data(want))[i]);
    /* the in-place result must keep self's shape and dtype */
    struct tn_tensor *row = tn_full(TN_SHAPE(3), tn_int(1), TN_INT64);
    assert_true(tn_add_(row, a2, tn_int(1)) < 0);
    assert_string_equal(tn_last_error(), "result type Float can't be cast to the desired output type Long");
    struct tn_tensor *f3 = tn_zeros(TN_SHAPE(3), TN_FLOAT32);
    assert_true(tn_add_(f3, a2, tn_int(1)) < 0);
    assert_string_equal(tn_last_error(), "output with shape [3] doesn't match the broadcast shape [2, 3]");
    /* out= of another dtype and shape: resized, computed in float32, converted */
    struct tn_tensor *out = tn_empty(TN_SHAPE(0), TN_FLOAT64);
    assert_int_equal(tn_mul_out(a2, b, out), 0);
    assert_int_equal(out->ndim, 2);
    assert_int_equal(out->sizes[1], 3);
    struct tn_tensor *m = tn_mul(a2, b);
    struct tn_tensor *m64 = tn_to_dtype(m, TN_FLOAT64);
    assert_memory_equal(tn_data(out), tn_data(m64), 6 * sizeof(double));
    tn_release(m64);
    tn_release(m);
    tn_release(out);
    tn_release(f3);
    tn_release(row);
    tn_release(want);
    tn_release(b);
    tn_release(a2);
    tn_release(a);
}

/* Meta tensors get shapes and dtypes without data; missing kernels are
 * reported; a NULL tensor is refused. */
static void test_meta_and_keys(void **state)
{
    struct tn_device meta = {TN_DEVICE_META, -1};
    struct tn_tensor *a = tn_empty_on(TN_SHAPE(4, 1), TN_INT32, meta);
    struct tn_tensor *b = tn_empty_on(TN_SHAPE(5), TN_FLOAT16, meta);
    assert_non_null(a);
    assert_int_equal(tn_tensor_keyset(a), TN_KEYSET(TN_KEY_META));
    struct tn_tensor *r = tn_div(a, b);
    assert_non_null(r);
    assert_int_equal(r->device.type, TN_DEVICE_META);
    assert_int_equal(r->dtype, TN_FLOAT16);
    assert_int_equal(r->ndim, 2);
    assert_int_equal(r->sizes[0], 4);
    assert_int_equal(r->sizes[1], 5);
    struct tn_tensor *c = tn_empty_on(TN_SHAPE(3, 1), TN_INT32, meta);
    assert_null(tn_add(a, c, tn_int(1)));
    assert_string_equal(tn_last_error(), "The size of tensor a (4) must match the size of tensor b (3) at non-singleton dimension 0");
    /* excluding the Meta key leaves nothing that can run them */
    tn_keyset old = tn_dispatch_set_excluded(TN_KEYSET(TN_KEY_META));
    assert_null(tn_add(a, b, tn_int(1)));
    tn_dispatch_set_excluded(old);
    assert_string_equal(tn_last_error(), "Could not run 'aten::add.Tensor': every dispatch key of its arguments is excluded");
    assert_null(tn_add(NULL, b, tn_int(1)));
    assert_string_equal(tn_last_error(), "add(): argument 'self' (position 1) must be Tensor, not None");
    assert_null(tn_op_find("aten::nonesuch.Tensor"));
    /* A name that does not fit the lookup buffer is refused, not truncated
     * (a truncated name could match a registered prefix). */
    char longname[400];
    memset(longname, 'x', sizeof longname - 1);
    memcpy(longname, "add", 3);
    longname[sizeof longname - 1] = '\0';
    assert_null(tn_op_find(longname));
    assert_non_null(strstr(tn_last_error(), "name too long"));
    /* A loadable library that is no tgen plugin: TN_EFORMAT, as documented. */
    assert_int_equal(tn_library_load("libc.so.6"), TN_EFORMAT);
    assert_non_null(strstr(tn_last_error(), "no tn_plugin_init"));
    const struct tn_op *op = tn_op_find("add.out");
    assert_non_null(op);
    assert_string_equal(op->qualname, "aten::add.out");
    assert_int_equal(tn_op_arg_index(op, "alpha"), 2);
    assert_int_equal(tn_op_register((struct tn_op *)op), TN_EINVAL);
    tn_release(c);
    tn_release(r);
    tn_release(b);
    tn_release(a);
}

/* add with 1,000,000 elements runs on the thread pool and still agrees */
static void test_parallel(void **state)
{
    struct tn_tensor *a = tn_arange(tn_int(0), tn_int(1000000), tn_int(1), TN_FLOAT32);
    struct tn_tensor *r = tn_add_scalar(a, tn_float(0.5), tn_int(2));
    assert_non_null(r);
    const float *d = tn_data(r);
    for (int64_t i = 0; i < 1000000; i += 9973)
        assert_true(d[i] == (float)i + 1.0f);
    tn_release(r);
    tn_release(a);
}

/* --- the dense run and the strided iterator agree ------------------------
 * Small operands that are contiguous, of the output's element count and
 * already in the compute dtype run in one inner loop; others go through
 * the strided iterator, or a conversion first. */

typedef struct tn_tensor *(*binary_fn)(const struct tn_tensor *, const struct tn_tensor *);
static struct tn_tensor *add_1(const struct tn_tensor *a, const struct tn_tensor *b) { return tn_add(a, b, tn_int(1)); }
static struct tn_tensor *add_2(const struct tn_tensor *a, const struct tn_tensor *b) { return tn_add(a, b, tn_int(2)); }
static struct tn_tensor *add_f(const struct tn_tensor *a, const struct tn_tensor *b) { return tn_add(a, b, tn_float(2.5)); }
static struct tn_tensor *add_b(const struct tn_tensor *a, const struct tn_tensor *b) { return tn_add(a, b, tn_bool(true)); }
static struct tn_tensor *sub_3(const struct tn_tensor *a, const struct tn_tensor *b) { return tn_sub(a, b, tn_int(3)); }
static struct tn_tensor *div_floor(const struct tn_tensor *a, const struct tn_tensor *b) { return tn_div_mode(a, b, "floor"); }

/* The values of t laid out transposed: not contiguous. */
static struct tn_tensor *strided(const struct tn_tensor *t)
{
    struct tn_tensor *tt = tn_transpose(t, 0, 1), *c = tn_contiguous(tt);
    struct tn_tensor *r = tn_transpose(c, 0, 1);
    tn_release(tt);
    tn_release(c);
    return r;
}

/* got and want both failed with one message, or hold the same bytes in
 * want's dtype (got with `ndim` dims: a broadcast may add dims of size 1). */
static void assert_agree(struct tn_tensor *got, char *want_error, struct tn_tensor *want, int ndim)
{
    if (!want) {
        assert_null(got);
        assert_string_equal(tn_last_error(), want_error);
        return;
    }
    assert_non_null(got);
    assert_int_equal(got->dtype, want->dtype);
    assert_int_equal(got->ndim, ndim);
    struct tn_tensor *g = tn_contiguous(got), *w = tn_contiguous(want);
    assert_int_equal(tn_numel(g), tn_numel(w));
    assert_memory_equal(tn_data(g), tn_data(w), tn_nbytes(w));
    tn_release(g);
    tn_release(w);
    tn_release(got);
}

static struct tn_tensor *values(const double *v, enum tn_dtype dt)
{
    struct tn_tensor *d = tn_from_data(v, TN_SHAPE(2, 3), TN_FLOAT64);
    struct tn_tensor *r = tn_to_dtype(d, dt);
    tn_release(d);
    return r;
}

static void test_dense_and_strided_agree(void **state)
{
    static const double av[6] = {1, -2, 3, 4, 5, -6}, bv[6] = {2, 3, -1, 7, -4, 2};
    static const binary_fn fns[] = {add_1, add_2, add_f, add_b, sub_3, tn_mul, tn_div, div_floor,
                                    tn_eq, tn_lt, tn_maximum, tn_remainder, tn_pow,
                                    tn_logical_xor, tn_bitwise_and};
    static const enum tn_dtype dts[] = {TN_FLOAT32, TN_FLOAT64, TN_FLOAT16, TN_INT64, TN_INT32,
                                        TN_UINT8, TN_BOOL, TN_COMPLEX64};
    struct tn_tensor *bf = values(bv, TN_FLOAT32), *sbf = strided(bf);
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        struct tn_tensor *a = values(av, dts[d]), *b = values(bv, dts[d]);
        struct tn_tensor *sa = strided(a), *sb = strided(b), *b3 = tn_view(b, TN_SHAPE(1, 2, 3));
        for (size_t f = 0; f < sizeof fns / sizeof *fns; f++) {
            char err[256] = "";
            struct tn_tensor *want = fns[f](sa, sb);
            if (!want)
                snprintf(err, sizeof err, "%s", tn_last_error());
            assert_agree(fns[f](a, b), err, want, 2);
            /* a broadcast that only adds a leading dim of size 1 */
            assert_agree(fns[f](a, b3), err, want, 3);
            tn_release(want);
            /* a conversion first (the dtype with float32) */
            err[0] = '\0';
            want = fns[f](sa, sbf);
            if (!want)
                snprintf(err, sizeof err, "%s", tn_last_error());
            assert_agree(fns[f](a, bf), err, want, 2);
            tn_release(want);
        }
        /* in place, self the dense output */
        struct tn_tensor *want = tn_add(sa, sb, tn_int(2)), *x = tn_clone(a);
        if (want) {
            assert_int_equal(tn_add_(x, b, tn_int(2)), 0);
            assert_agree(tn_retain(x), NULL, want, 2);
        }
        tn_release(x);
        tn_release(want);
        tn_release(b3);
        tn_release(sb);
        tn_release(sa);
        tn_release(b);
        tn_release(a);
    }
    tn_release(sbf);
    tn_release(bf);
    /* an integer division by zero in the dense run is still an error */
    struct tn_tensor *i = tn_full(TN_SHAPE(3), tn_int(7), TN_INT64), *z = tn_zeros(TN_SHAPE(3), TN_INT64);
    assert_null(tn_div_mode(i, z, "floor"));
    assert_string_equal(tn_last_error(), "ZeroDivisionError");
    tn_release(z);
    tn_release(i);
}

/* The 32-byte vector runs of add, sub (alpha 1), mul and div of float32 and
 * float64, contiguous and against a broadcast scalar (-0.0 among them, whose
 * sign mul and div keep), at every length 0-70 and a few longer: the same
 * bits as the operation done element by element in C, and nothing written
 * past the output. */
static void vector_runs(void)
{
    static const int64_t lens[] = {129, 1000, 1031};
    for (int dt = 0; dt < 2; dt++) {
        enum tn_dtype dtype = dt ? TN_FLOAT64 : TN_FLOAT32;
        size_t es = dt ? 8 : 4;
        for (int li = 0; li < 71 + 3; li++) {
            int64_t n = li < 71 ? li : lens[li - 71];
            struct tn_tensor *a = tn_empty(TN_SHAPE(n), dtype), *b = tn_empty(TN_SHAPE(n), dtype);
            /* the output one element into its buffer: not 32-byte aligned */
            struct tn_tensor *buf = tn_empty(TN_SHAPE(n + 9), dtype);
            struct tn_tensor *o = tn_slice(buf, 0, 1, n + 1, 1);
            for (int64_t i = 0; i < n; i++) {
                double x = (double)((i * 37) % 23) - 11.25, y = (double)((i * 11) % 7) - 3;
                if (i % 13 == 5)
                    x = NAN;
                if (i % 17 == 3)
                    y = -0.0;
                if (i % 19 == 7)
                    x = -INFINITY;
                if (dt) {
                    ((double *)tn_data(a))[i] = x;
                    ((double *)tn_data(b))[i] = y;
                } else {
                    ((float *)tn_data(a))[i] = (float)x;
                    ((float *)tn_data(b))[i] = (float)y;
                }
            }
            for (int sc = 0; sc < 3; sc++) { /* b contiguous, -0.0 broadcast, 3 broadcast */
                struct tn_tensor *bb = sc == 0 ? tn_retain(b)
                                               : tn_full(TN_SHAPE(1), tn_float(sc == 1 ? -0.0 : 3), dtype);
                for (int op = 0; op < 4; op++) {
                    memset(tn_data(buf), 0x5a, (size_t)(n + 9) * es);
                    int rc = op == 0 ? tn_add_out(a, bb, tn_int(1), o)
                             : op == 1 ? tn_sub_out(a, bb, tn_int(1), o)
                             : op == 2 ? tn_mul_out(a, bb, o) : tn_div_out(a, bb, o);
                    assert_int_equal(rc, 0);
                    for (int64_t i = 0; i < n; i++) {
                        int64_t j = sc ? 0 : i;
                        if (dt) {
                            double x = ((double *)tn_data(a))[i], y = ((double *)tn_data(bb))[j];
                            double w = op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : x / y;
                            double g = ((double *)tn_data(o))[i];
                            assert_memory_equal(&g, &w, 8);
                        } else {
                            float x = ((float *)tn_data(a))[i], y = ((float *)tn_data(bb))[j];
                            float w = op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : x / y;
                            float g = ((float *)tn_data(o))[i];
                            assert_memory_equal(&g, &w, 4);
                        }
                    }
                    for (size_t k = 0; k < (size_t)(n + 9) * es; k += k + 1 == es ? (size_t)n * es + 1 : 1)
                        assert_int_equal(((unsigned char *)tn_data(buf))[k], 0x5a);
                }
                tn_release(bb);
            }
            tn_release(o);
            tn_release(buf);
            tn_release(b);
            tn_release(a);
        }
    }
}

static void test_vector_runs(void **state)
{
    vector_runs();
}

/* The same runs written with non-temporal stores (TN_STREAM_BYTES=64
 * streams every output from 64 bytes; the default starts at 3/8 of the
 * L3, megabytes): an unaligned start, the aligned body, the tail. */
static void test_vector_runs_streamed(void **state)
{
    run_streamed(vector_runs);
}

/* A row added to (and multiplied into) every row of a matrix, streamed:
 * the rows run as tasks of the pool with one store fence each
 * (stream_rows); every element is the float32 sum or product of its
 * operands, rows of 1031 (a tail) and 130 floats, more rows than one task
 * takes. */
static void broadcast_rows(void)
{
    static const int64_t shapes[2][2] = {{37, 1031}, {600, 130}};
    for (int si = 0; si < 2; si++) {
        int64_t R = shapes[si][0], C = shapes[si][1];
        struct tn_tensor *a = tn_randn(TN_SHAPE(R, C), TN_FLOAT32, NULL);
        struct tn_tensor *b = tn_randn(TN_SHAPE(C), TN_FLOAT32, NULL);
        struct tn_tensor *s = tn_add(a, b, tn_int(1)), *m = tn_mul(a, b);
        const float *av = tn_data(a), *bv = tn_data(b), *sv = tn_data(s), *mv = tn_data(m);
        for (int64_t i = 0; i < R * C; i++) {
            float x = av[i], y = bv[i % C], sum = x + y, prod = x * y;
            assert_memory_equal(&sv[i], &sum, 4);
            assert_memory_equal(&mv[i], &prod, 4);
        }
        tn_release(m);
        tn_release(s);
        tn_release(b);
        tn_release(a);
    }
}

static void test_broadcast_rows_streamed(void **state)
{
    run_streamed(broadcast_rows);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases),
        cmocka_unit_test(test_scalar16_cases),
        cmocka_unit_test(test_inplace_and_out),
        cmocka_unit_test(test_meta_and_keys),
        cmocka_unit_test(test_parallel),
        cmocka_unit_test(test_dense_and_strided_agree),
        cmocka_unit_test(test_vector_runs),
        cmocka_unit_test(test_vector_runs_streamed),
        cmocka_unit_test(test_broadcast_rows_streamed),
    };
    return TN_RUN_TESTS(tests);
}
