/*
 * tests/unit/fixture_cases.h: reading the cases of core/factory.json (see
 * tests/fixtures/core_factory.py) for test_factory and test_copy: scalars,
 * dtypes, views over a fixture base, and the outcome check (PyTorch's
 * error text or success, with the "follow": "2.x" marker honoured).
 * Static functions only: each test program includes it once.
 */
#ifndef TN_FIXTURE_CASES_H
#define TN_FIXTURE_CASES_H

#include "tn_test.h"

#include <stdlib.h>
#include <string.h>

static inline enum tn_dtype tn_fx_dtype(json_t *v)
{
    return !v || json_is_null(v) ? TN_DTYPE_UNSET : tn_test_dtype(json_string_value(v));
}

/* {"bool": b} | {"int": i} | {"float": "hex"} | {"complex": ["hex", "hex"]} */
static inline struct tn_scalar tn_fx_scalar(json_t *v)
{
    json_t *x;
    if ((x = json_object_get(v, "bool"))) return tn_bool(json_is_true(x));
    if ((x = json_object_get(v, "int"))) return tn_int(json_integer_value(x));
    if ((x = json_object_get(v, "float"))) return tn_float(strtod(json_string_value(x), NULL));
    x = json_object_get(v, "complex");
    assert_non_null(x);
    return tn_complex(strtod(json_string_value(json_array_get(x, 0)), NULL),
                      strtod(json_string_value(json_array_get(x, 1)), NULL));
}

/* The view {"base": tensor | "dst", "shape", "stride", "offset"}: a new
 * base from the fixture (returned in *base) or `dst_base` for "dst". */
static inline struct tn_tensor *tn_fx_view(json_t *spec, struct tn_tensor *dst_base,
                                           struct tn_tensor **base)
{
    int64_t shape[TN_MAX_DIMS], stride[TN_MAX_DIMS];
    json_t *b = json_object_get(spec, "base");
    *base = json_is_string(b) ? tn_retain(dst_base) : tn_test_tensor(b);
    assert_non_null(*base);
    int nd = tn_test_ints(json_object_get(spec, "shape"), shape);
    tn_test_ints(json_object_get(spec, "stride"), stride);
    struct tn_tensor *v = tn_as_strided(*base, shape, nd, stride,
                                        json_integer_value(json_object_get(spec, "offset")));
    if (!v)
        fail_msg("cannot rebuild a fixture view: %s", tn_last_error());
    return v;
}

/* Under a 1.x fixture, a case marked "follow": "2.x" may differ (the
 * _torch2 fixture holds it to 2.x's behaviour). */
static inline bool tn_fx_lenient(json_t *c, bool torch1)
{
    json_t *f = json_object_get(c, "follow");
    return torch1 && f && !strcmp(json_string_value(f), "2.x");
}

/* Checks success or failure against the case: -1 when it disagrees, 0 when
 * it agrees and nothing is left to compare, 1 when both succeeded and the
 * caller compares the result. */
static inline int tn_fx_outcome(json_t *c, const struct tn_tensor *r, bool torch1)
{
    const char *name = json_string_value(json_object_get(c, "name"));
    const char *want = json_string_value(json_object_get(c, "error"));
    const char *type = json_string_value(json_object_get(c, "error_type"));
    bool lenient = tn_fx_lenient(c, torch1);
    const char *got = tn_last_error();
    int n = (int)strcspn(got, "\n");
    /* a case where tensorkit follows 2.x is checked by the 2.x fixture:
     * against 1.13 its values and words may differ */
    if (!want && r)
        return lenient ? 0 : 1;
    if (lenient)
        return 0;
    if (!want) {
        print_message("# %s: failed with \"%.*s\", PyTorch succeeds\n", name, n, got);
        return -1;
    }
    if (r) {
        print_message("# %s: succeeded, PyTorch fails with \"%s\"\n", name, want);
        return -1;
    }
    if ((int)strlen(want) != n || strncmp(got, want, (size_t)n)) {
        print_message("# %s: error \"%.*s\", PyTorch \"%s\"\n", name, n, got, want);
        return -1;
    }
    if (type && !strcmp(type, "IndexError") && tn_last_status() != TN_EINDEX) {
        print_message("# %s: PyTorch raises IndexError, our status is %d\n", name,
                      (int)tn_last_status());
        return -1;
    }
    return 0;
}

#endif
