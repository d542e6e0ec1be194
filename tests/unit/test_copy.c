/*
 * test_copy: copy_, clone, contiguous and to(dtype) against PyTorch (the
 * "copy" cases of fixture core/factory.json, written by
 * tests/fixtures/core_factory.py): broadcasting, dtype conversion, views of
 * one storage overlapping, preserve_format strides, and PyTorch's errors;
 * and copy_ of transposed views through the tiled transpose (lib/core/
 * copy.c) at its edge sizes.
 */
#include "tn_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture_cases.h"

static int tn_run_copy(json_t *c, bool torch1)
{
    const char *name = json_string_value(json_object_get(c, "name"));
    struct tn_tensor *dbase, *sbase;
    struct tn_tensor *dst = tn_fx_view(json_object_get(c, "dst"), NULL, &dbase);
    struct tn_tensor *src = tn_fx_view(json_object_get(c, "src"), dbase, &sbase);
    tn_clear_error();
    int rc = tn_copy_(dst, src);
    rc = tn_fx_outcome(c, rc == TN_OK ? dst : NULL, torch1);
    if (rc > 0) {
        rc = tn_test_compare(dst, json_object_get(c, "dst_after"), name, 1);
        if (rc == 0) {
            char what[300];
            snprintf(what, sizeof what, "%s (whole destination storage)", name);
            rc = tn_test_compare(dbase, json_object_get(c, "base_after"), what, 1);
        }
        if (rc && tn_fx_lenient(c, torch1))
            rc = 0;
    }
    tn_release(src);
    tn_release(sbase);
    tn_release(dst);
    tn_release(dbase);
    return rc;
}

static int tn_run_case(json_t *c, int torch1)
{
    const char *name = json_string_value(json_object_get(c, "name"));
    const char *fn = json_string_value(json_object_get(c, "fn"));
    if (!strcmp(fn, "copy_"))
        return tn_run_copy(c, torch1);
    struct tn_tensor *base, *in = tn_fx_view(json_object_get(c, "input"), NULL, &base);
    struct tn_tensor *r = NULL;
    tn_clear_error();
    if (!strcmp(fn, "clone")) r = tn_clone(in);
    else if (!strcmp(fn, "contiguous")) r = tn_contiguous(in);
    else if (!strcmp(fn, "to")) r = tn_to_dtype(in, tn_fx_dtype(json_object_get(c, "dtype")));
    else fail_msg("unknown copy function %s in fixture", fn);
    int rc = tn_fx_outcome(c, r, torch1);
    if (rc > 0) {
        rc = tn_test_compare(r, json_object_get(c, "result"), name, 1);
        json_t *same = json_object_get(c, "same");
        if (rc == 0 && same && json_is_true(same) != (r == in)) {
            print_message("# %s: contiguous() %s its input, PyTorch's %s\n", name,
                          r == in ? "returns" : "does not return",
                          json_is_true(same) ? "does" : "does not");
            rc = -1;
        }
        if (rc == 0 && r != in && r->storage == in->storage) {
            print_message("# %s: the copy shares its input's storage\n", name);
            rc = -1;
        }
    }
    tn_release(r);
    tn_release(in);
    tn_release(base);
    return rc;
}

/* Runs the cases of one fixture file. */
static void tn_run_fixture(const char *file)
{
    tn_test_fixture_cases(file, "copy", "copy", tn_run_case);
}

/* factory.json comes from PyTorch 1.13, factory_torch2.json from 2.x. */
static void test_copy_fixture(void **state)
{
    (void)state;
    tn_run_fixture("factory");
}

static void test_copy_fixture_torch2(void **state)
{
    (void)state;
    tn_run_fixture("factory_torch2");
}

/* copy_ of x.transpose(1, 2), x (b, r, c) holding its own flat index (mod
 * 1024 for float16), into dst[:, :, off : off + r] of a (b, c, r + pad)
 * tensor of dtype ddt: every value lands at its transposed place. */
static void check_transposed(enum tn_dtype sdt, enum tn_dtype ddt, int64_t b, int64_t r,
                             int64_t c, int64_t off, int64_t pad)
{
    int64_t n = b * r * c;
    struct tn_tensor *f = tn_empty(TN_SHAPE(n), TN_FLOAT64);
    assert_non_null(f);
    for (int64_t k = 0; k < n; k++)
        ((double *)tn_data(f))[k] = (double)(sdt == TN_FLOAT16 ? k % 1024 : k % (1 << 20));
    struct tn_tensor *fx = tn_to_dtype(f, sdt);
    struct tn_tensor *x = fx ? tn_reshape(fx, TN_SHAPE(b, r, c)) : NULL;
    struct tn_tensor *xt = x ? tn_transpose(x, 1, 2) : NULL;
    struct tn_tensor *big = tn_zeros(TN_SHAPE(b, c, r + pad), ddt);
    struct tn_tensor *dst = big ? tn_slice(big, 2, off, off + r, 1) : NULL;
    assert_non_null(xt);
    assert_non_null(dst);
    int rc = tn_copy_(dst, xt);
    if (rc != TN_OK)
        print_message("# %lldx%lldx%lld: %s\n", (long long)b, (long long)r, (long long)c,
                      tn_last_error());
    assert_int_equal(rc, TN_OK);
    struct tn_tensor *d64 = tn_to_dtype(dst, TN_FLOAT64), *dc = d64 ? tn_contiguous(d64) : NULL;
    assert_non_null(dc);
    const double *e = tn_data(f), *g = tn_data(dc);
    int64_t bad = 0;
    for (int64_t bi = 0; bi < b; bi++)
        for (int64_t j = 0; j < c; j++)
            for (int64_t i = 0; i < r; i++)
                if (g[(bi * c + j) * r + i] != e[(bi * r + i) * c + j] && bad++ < 3)
                    print_message("# %lldx%lldx%lld: dst[%lld][%lld][%lld] is %g, not %g\n",
                                  (long long)b, (long long)r, (long long)c, (long long)bi,
                                  (long long)j, (long long)i, g[(bi * c + j) * r + i],
                                  e[(bi * r + i) * c + j]);
    assert_int_equal(bad, 0);
    struct tn_tensor *all[] = {f, fx, x, xt, big, dst, d64, dc};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        tn_release(all[k]);
}

/* The tiles are 16 x 128 values (a partial one at each edge), 4x4 (2x2 for
 * 8-byte values) blocks transposed in registers with the rest one value at
 * a time, other sizes and conversions through the generic tile loop, and
 * destinations of 8 MiB or more stored past the caches when their rows are
 * 16-byte aligned. */
/* The AVX-512 path's whole 16 x 16 blocks (tiles of 16 rows whose width is
 * a multiple of 16, beside tiles that fall back): a narrow last tile of 48
 * columns, rows past the last 16, a padded and an offset destination, int32
 * through the same path as float32. */
static void test_transposed_blocks16(void **state)
{
    (void)state;
    check_transposed(TN_FLOAT32, TN_FLOAT32, 2, 83, 176, 0, 0);
    check_transposed(TN_INT32, TN_INT32, 1, 96, 304, 3, 13);
    check_transposed(TN_FLOAT32, TN_FLOAT32, 1, 16, 16 * 129, 0, 16);
}

static void test_transposed_tiles(void **state)
{
    (void)state;
    check_transposed(TN_FLOAT32, TN_FLOAT32, 1, 32, 32, 0, 0);
    check_transposed(TN_FLOAT32, TN_FLOAT32, 1, 33, 131, 0, 0);   /* edges of both dims */
    check_transposed(TN_FLOAT32, TN_FLOAT32, 2, 129, 47, 1, 2);   /* misaligned rows */
    check_transposed(TN_INT32, TN_INT32, 3, 50, 64, 0, 0);
    check_transposed(TN_FLOAT64, TN_FLOAT64, 2, 35, 130, 0, 0);
    check_transposed(TN_INT64, TN_INT64, 1, 64, 33, 1, 3);
    check_transposed(TN_FLOAT16, TN_FLOAT16, 1, 40, 70, 0, 0);    /* 2-byte: generic loop */
    check_transposed(TN_FLOAT32, TN_FLOAT64, 1, 45, 66, 0, 0);    /* conversion */
    check_transposed(TN_FLOAT32, TN_FLOAT32, 1, 2048, 1100, 0, 0); /* 8.6 MiB: streamed */
    check_transposed(TN_FLOAT32, TN_FLOAT32, 1, 2050, 1030, 1, 1); /* 8 MiB, rows unaligned */
    check_transposed(TN_FLOAT64, TN_FLOAT64, 1, 1030, 1030, 0, 2); /* 8 MiB of float64 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_fixture),
        cmocka_unit_test(test_copy_fixture_torch2),
        cmocka_unit_test(test_transposed_tiles),
        cmocka_unit_test(test_transposed_blocks16),
    };
    return TN_RUN_TESTS(tests);
}
