/*
 * test_dtype: the dtype table, promotion and conversions against PyTorch
 * (fixture core/dtype.json written by tests/fixtures/core_dtype.py).
 */
#include "tn_test.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static void test_table(void **state)
{
    (void)state;
    assert_int_equal(tn_dtype_size(TN_BFLOAT16), 2);
    assert_string_equal(tn_dtype_info(TN_INT64)->storage_class, "LongStorage");
    assert_string_equal(tn_dtype_info(TN_BFLOAT16)->safetensors, "BF16");
    assert_null(tn_dtype_info(TN_BFLOAT16)->numpy);
    assert_int_equal(tn_dtype_from_name("torch.half"), TN_FLOAT16);
    assert_int_equal(tn_dtype_from_name("long"), TN_INT64);
    assert_int_equal(tn_dtype_from_name("float128"), TN_DTYPE_UNSET);
    assert_string_equal(tn_last_error(), "unknown dtype 'float128'");
}

static void test_promote(void **state)
{
    (void)state;
    json_t *fx = tn_test_fixture("dtype");
    size_t i;
    json_t *row;
    int bad = 0;
    json_array_foreach(json_object_get(fx, "promote"), i, row) {
        enum tn_dtype a = tn_test_dtype(json_string_value(json_array_get(row, 0)));
        enum tn_dtype b = tn_test_dtype(json_string_value(json_array_get(row, 1)));
        json_t *r = json_array_get(row, 2);
        enum tn_dtype want = json_is_null(r) ? TN_DTYPE_UNSET : tn_test_dtype(json_string_value(r));
        enum tn_dtype got = tn_promote_types(a, b);
        if (got != want) {
            print_message("# promote_types(%s, %s): ours %s, PyTorch %s\n", tn_dtype_name(a),
                          tn_dtype_name(b), got < 0 ? "error" : tn_dtype_name(got),
                          want < 0 ? "(not a tensorkit dtype)" : tn_dtype_name(want));
            bad++;
        }
    }
    json_decref(fx);
    assert_int_equal(bad, 0);
}

/* Builds one result_type operand from its fixture spelling. */
static int tn_operand(const char *spec, struct tn_tensor **t, struct tn_scalar *s)
{
    *t = NULL;
    if (!strcmp(spec, "int")) *s = tn_int(3);
    else if (!strcmp(spec, "float")) *s = tn_float(2.5);
    else if (!strcmp(spec, "bool")) *s = tn_bool(true);
    else if (!strcmp(spec, "complex")) *s = tn_complex(1, 2);
    else {
        enum tn_dtype d = tn_test_dtype(spec + 2);
        *t = spec[0] == 't' ? tn_ones(TN_SHAPE(2), d) : tn_ones(NULL, 0, d);
        return 1;
    }
    return 0;
}

/* 1.13 promoted bfloat16 with a complex operand to complex64; 2.x, which
 * tensorkit follows, has no such result. */
static bool tn_torch1_only(const char *a, const char *b)
{
    bool bf = strstr(a, "bfloat16") || strstr(b, "bfloat16");
    bool cx = strstr(a, "complex") || strstr(b, "complex");
    return bf && cx;
}

static void test_result_type(void **state)
{
    (void)state;
    json_t *fx = tn_test_fixture("dtype");
    bool torch1 = json_string_value(json_object_get(fx, "torch"))[0] == '1';
    size_t i;
    json_t *row;
    int bad = 0;
    json_array_foreach(json_object_get(fx, "result_type"), i, row) {
        const char *sa = json_string_value(json_array_get(row, 0));
        const char *sb = json_string_value(json_array_get(row, 1));
        json_t *r = json_array_get(row, 2);
        enum tn_dtype want = json_is_null(r) ? TN_DTYPE_UNSET : tn_test_dtype(json_string_value(r));
        if (torch1 && tn_torch1_only(sa, sb))
            continue;
        struct tn_tensor *ts[2];
        struct tn_scalar ss[2];
        int nt = 0, ns = 0;
        struct tn_tensor *t;
        struct tn_scalar s;
        if (tn_operand(sa, &t, &s)) ts[nt++] = t; else ss[ns++] = s;
        if (tn_operand(sb, &t, &s)) ts[nt++] = t; else ss[ns++] = s;
        enum tn_dtype got = tn_result_type((const struct tn_tensor *const *)ts, nt, ss, ns);
        if (got != want) {
            print_message("# result_type(%s, %s): ours %s, PyTorch %s\n", sa, sb,
                          got < 0 ? "error" : tn_dtype_name(got),
                          want < 0 ? "(not a tensorkit dtype)" : tn_dtype_name(want));
            bad++;
        }
        for (int k = 0; k < nt; k++)
            tn_release(ts[k]);
    }
    json_decref(fx);
    assert_int_equal(bad, 0);
}

static void test_convert(void **state)
{
    (void)state;
    json_t *fx = tn_test_fixture("dtype");
    size_t i;
    json_t *c;
    int bad = 0;
    /* PyTorch 1.13 turned complex into bool by the real part alone; 2.x,
     * which tensorkit follows, by both parts. */
    bool torch1 = json_string_value(json_object_get(fx, "torch"))[0] == '1';
    json_array_foreach(json_object_get(fx, "convert"), i, c) {
        struct tn_tensor *src = tn_test_tensor(json_object_get(c, "src"));
        enum tn_dtype to = tn_test_dtype(json_string_value(json_object_get(c, "to")));
        if (torch1 && tn_dtype_is_complex(src->dtype) && to == TN_BOOL) {
            tn_release(src);
            continue;
        }
        struct tn_tensor *r = tn_to_dtype(src, to);
        char what[64];
        snprintf(what, sizeof what, "%s -> %s", tn_dtype_name(src->dtype), tn_dtype_name(to));
        if (tn_test_compare(r, json_object_get(c, "result"), what, 0) != 0)
            bad++;
        tn_release(r);
        tn_release(src);
    }
    json_decref(fx);
    assert_int_equal(bad, 0);
}

static void test_half_roundtrip(void **state)
{
    (void)state;
    /* every half bit pattern survives float and back (NaNs stay NaN) */
    for (uint32_t b = 0; b < 0x10000u; b++) {
        tn_half h = {(uint16_t)b};
        float f = tn_half_to_float(h);
        tn_half back = tn_half_from_float(f);
        if (f != f)
            assert_true((back.bits & 0x7C00u) == 0x7C00u && (back.bits & 0x3FFu));
        else
            assert_int_equal(back.bits, b);
    }
}

/* The array conversions (eight at a time with F16C where the CPU has it)
 * give bit for bit the scalar functions' halves and floats: every half
 * pattern to float and back, and floats around each rounding boundary
 * (ties, the overflow edge, subnormals), each block also holding a NaN. */
static void test_half_arrays(void **state)
{
    (void)state;
    enum { N = 0x10000 };
    uint16_t *h = malloc(N * sizeof *h), *h2 = malloc(4 * N * sizeof *h2);
    float *f = malloc(4 * N * sizeof *f);
    assert_non_null(h && h2 && f);
    for (uint32_t b = 0; b < N; b++)
        h[b] = (uint16_t)b;
    tn_convert(f, TN_FLOAT32, h, TN_FLOAT16, N);
    int bad = 0;
    for (uint32_t b = 0; b < N; b++) {
        float want = tn_half_to_float((tn_half){h[b]});
        bad += memcmp(&f[b], &want, 4) != 0;
    }
    /* floats: each half, a quarter and a half step above it, and just
     * below the next (ties to even, the 65520 overflow edge, subnormals) */
    for (uint32_t b = 0; b < N; b++) {
        float x = tn_half_to_float((tn_half){(uint16_t)b}), y;
        uint32_t u;
        memcpy(&u, &x, 4);
        u += 1u << 11, memcpy(&y, &u, 4), f[4 * b] = x, f[4 * b + 1] = y;
        u += 1u << 11, memcpy(&y, &u, 4), f[4 * b + 2] = y;
        u += (1u << 12) - 1, memcpy(&y, &u, 4), f[4 * b + 3] = y;
    }
    tn_convert(h2, TN_FLOAT16, f, TN_FLOAT32, 4 * N);
    for (uint32_t i = 0; i < 4 * N; i++)
        bad += h2[i] != tn_half_from_float(f[i]).bits;
    free(h);
    free(h2);
    free(f);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_promote),
        cmocka_unit_test(test_result_type),
        cmocka_unit_test(test_convert),
        cmocka_unit_test(test_half_roundtrip),
        cmocka_unit_test(test_half_arrays),
    };
    return TN_RUN_TESTS(tests);
}
