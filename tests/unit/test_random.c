/*
 * test_random: replays the calls that tests/fixtures/core_random.py made on
 * real PyTorch and compares every bit (fixtures core/random_torch2.json from
 * PyTorch 2.x, and core/random.json from 1.13 with the generator in its
 * 1.13 mode).
 */
#include "tn_test.h"

#include <string.h>

#define TN_DEFAULT_SEED 67280421310721ULL

/* The in-place calls' target tensor in the fixture's layout. */
static struct tn_tensor *tn_make(json_t *call)
{
    int64_t size[TN_MAX_DIMS];
    int nd = tn_test_ints(json_object_get(call, "size"), size);
    enum tn_dtype dt = tn_test_dtype(json_string_value(json_object_get(call, "dtype")));
    json_t *lj = json_object_get(call, "layout");
    const char *layout = lj ? json_string_value(lj) : "contiguous";
    if (!strcmp(layout, "t")) {
        struct tn_tensor *b = tn_empty(TN_SHAPE(size[1], size[0]), dt);
        struct tn_tensor *t = tn_t(b);
        tn_release(b);
        return t;
    }
    if (!strcmp(layout, "step")) {
        struct tn_tensor *b = tn_empty(TN_SHAPE(size[0], 2 * size[1]), dt);
        struct tn_tensor *t = tn_slice(b, 1, 0, TN_END, 2);
        tn_release(b);
        return t;
    }
    return tn_empty(size, nd, dt);
}

static double tn_num(json_t *call, const char *key)
{
    return json_number_value(json_object_get(call, key));
}

static int64_t tn_int_of(json_t *call, const char *key)
{
    return json_integer_value(json_object_get(call, key));
}

/* Runs one call; returns the result tensor (NULL for manual_seed). */
static struct tn_tensor *tn_run(json_t *call, struct tn_generator *g)
{
    const char *fn = json_string_value(json_object_get(call, "fn"));
    if (!strcmp(fn, "manual_seed")) {
        tn_manual_seed((uint64_t)tn_int_of(call, "seed"));
        return NULL;
    }
    if (!strcmp(fn, "randperm"))
        return tn_randperm(tn_int_of(call, "n"),
                           tn_test_dtype(json_string_value(json_object_get(call, "dtype"))), g);
    int64_t size[TN_MAX_DIMS];
    int nd = tn_test_ints(json_object_get(call, "size"), size);
    enum tn_dtype dt = tn_test_dtype(json_string_value(json_object_get(call, "dtype")));
    if (!strcmp(fn, "rand"))
        return tn_rand(size, nd, dt, g);
    if (!strcmp(fn, "randn"))
        return tn_randn(size, nd, dt, g);
    if (!strcmp(fn, "randint"))
        return tn_randint(tn_int_of(call, "low"), tn_int_of(call, "high"), size, nd, dt, g);
    struct tn_tensor *t = tn_make(call);
    assert_non_null(t);
    int rc = -1;
    if (!strcmp(fn, "uniform_"))
        rc = tn_uniform_(t, tn_num(call, "from"), tn_num(call, "to"), g);
    else if (!strcmp(fn, "normal_"))
        rc = tn_normal_(t, tn_num(call, "mean"), tn_num(call, "std"), g);
    else if (!strcmp(fn, "bernoulli_"))
        rc = tn_bernoulli_(t, tn_num(call, "p"), g);
    else if (!strcmp(fn, "random_"))
        rc = tn_random_(t, tn_int_of(call, "from"), tn_int_of(call, "to"), g);
    else
        fail_msg("unknown call %s", fn);
    if (rc != 0) {
        print_message("# %s: %s\n", fn, tn_last_error());
        tn_release(t);
        return NULL;
    }
    return t;
}

/* Replays the cases of fixture `name`: only the never-seeded one when
 * `unseeded`, all the others otherwise. Returns the number of mismatches. */
static int tn_replay(const char *name, bool unseeded, bool torch1)
{
    json_t *fx = tn_test_fixture(name);
    size_t i, j;
    json_t *cs, *call;
    int bad = 0;
    json_array_foreach(json_object_get(fx, "cases"), i, cs) {
        json_t *seed = json_object_get(cs, "seed");
        if (json_is_null(seed) != unseeded)
            continue;
        const char *cname = json_string_value(json_object_get(cs, "name"));
        struct tn_generator *g = NULL, *own = NULL;
        if (unseeded) {
            g = tn_default_generator();
        } else if (!strcmp(json_string_value(json_object_get(cs, "generator")), "new")) {
            g = own = tn_generator_new((uint64_t)json_integer_value(seed));
        } else {
            tn_manual_seed((uint64_t)json_integer_value(seed));
            g = tn_default_generator();
        }
        tn_generator_set_torch1(g, torch1);
        json_t *cpu = json_object_get(cs, "cpu");
        tn_generator_set_cpu(g, cpu && !strcmp(json_string_value(cpu), "default")
                                    ? TN_RNG_CPU_DEFAULT : TN_RNG_CPU_AVX2);
        json_array_foreach(json_object_get(cs, "calls"), j, call) {
            struct tn_tensor *t = tn_run(call, g);
            json_t *want = json_object_get(call, "expected");
            if (!want)
                continue;
            char what[256];
            snprintf(what, sizeof what, "%s: %s: call %zu (%s)", name, cname, j,
                     json_string_value(json_object_get(call, "fn")));
            if (!t) {
                print_message("# %s failed: %s\n", what, tn_last_error());
                bad++;
            } else if (tn_test_compare(t, want, what, 0) != 0) {
                bad++;
            }
            tn_release(t);
        }
        tn_generator_set_torch1(g, false);
        tn_generator_set_cpu(g, TN_RNG_CPU_AVX2);
        tn_generator_free(own);
    }
    json_decref(fx);
    return bad;
}

/* Must run first: the default generator before anything seeds it. */
static void test_never_seeded(void **state)
{
    (void)state;
    assert_true(tn_initial_seed() == TN_DEFAULT_SEED);
    assert_int_equal(tn_replay("random_torch2", true, false), 0);
}

static void test_torch2(void **state)
{
    (void)state;
    assert_int_equal(tn_replay("random_torch2", false, false), 0);
}

static void test_torch1(void **state)
{
    (void)state;
    tn_manual_seed(TN_DEFAULT_SEED);
    assert_int_equal(tn_replay("random", true, true), 0);
    assert_int_equal(tn_replay("random", false, true), 0);
}

static void test_seed_api(void **state)
{
    (void)state;
    tn_manual_seed(UINT64_C(1) << 40 | 7);
    assert_true(tn_initial_seed() == (UINT64_C(1) << 40 | 7));
    struct tn_generator *a = tn_generator_new(5), *b = tn_generator_new(6);
    tn_generator_seed(b, 5);
    struct tn_tensor *x = tn_randn(TN_SHAPE(40), TN_FLOAT32, a);
    struct tn_tensor *y = tn_randn(TN_SHAPE(40), TN_FLOAT32, b);
    assert_memory_equal(tn_data(x), tn_data(y), 160);
    tn_release(x);
    tn_release(y);
    tn_generator_free(a);
    tn_generator_free(b);
}

static void test_errors(void **state)
{
    (void)state;
    struct tn_tensor *t = tn_empty(TN_SHAPE(3), TN_FLOAT32);
    assert_int_equal(tn_uniform_(t, 1, 0, NULL), TN_EINVAL);
    assert_string_equal(tn_last_error(),
                        "uniform_ expects to return a [from, to) range, but found from=1 > to=0");
    assert_int_equal(tn_normal_(t, 0, -1, NULL), TN_EINVAL);
    assert_string_equal(tn_last_error(), "normal expects std >= 0.0, but found std -1");
    assert_int_equal(tn_bernoulli_(t, 1.5, NULL), TN_EINVAL);
    assert_string_equal(tn_last_error(), "bernoulli_ expects p to be in [0, 1], but got p=1.5");
    assert_int_equal(tn_random_(t, 5, 5, NULL), TN_EINVAL);
    assert_string_equal(tn_last_error(),
                        "random_ expects 'from' to be less than 'to', but got from=5 >= to=5");
    tn_release(t);
    t = tn_empty(TN_SHAPE(3), TN_INT8);
    assert_int_equal(tn_random_(t, 0, 300, NULL), TN_EINVAL);
    assert_string_equal(tn_last_error(), "to - 1 is out of bounds for signed char");
    assert_int_equal(tn_normal_(t, 0, 1, NULL), TN_EDTYPE);
    assert_string_equal(tn_last_error(), "\"normal_kernel_cpu\" not implemented for 'Char'");
    tn_release(t);
    t = tn_empty(TN_SHAPE(3), TN_FLOAT16);
    assert_int_equal(tn_bernoulli_(t, 0.5, NULL), 0);
    tn_generator_set_torch1(NULL, true);
    assert_int_equal(tn_bernoulli_(t, 0.5, NULL), TN_EDTYPE);
    assert_string_equal(tn_last_error(), "\"bernoulli_scalar_cpu_\" not implemented for 'Half'");
    tn_generator_set_torch1(NULL, false);
    tn_release(t);
    assert_null(tn_rand(TN_SHAPE(3), TN_INT64, NULL));
    assert_string_equal(tn_last_error(), "\"check_uniform_bounds\" not implemented for 'Long'");
    assert_null(tn_randperm(3000, TN_FLOAT16, NULL));
    assert_string_equal(tn_last_error(), "n cannot be greater than 2049 for Half type.");
    assert_null(tn_randperm(-1, TN_INT64, NULL));
    assert_string_equal(tn_last_error(), "Trying to create tensor with negative dimension -1: [-1]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_never_seeded),
        cmocka_unit_test(test_torch2),
        cmocka_unit_test(test_torch1),
        cmocka_unit_test(test_seed_api),
        cmocka_unit_test(test_errors),
    };
    return TN_RUN_TESTS(tests);
}
