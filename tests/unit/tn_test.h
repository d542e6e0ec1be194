/*
 * tests/unit/tn_test.h: what the C unit tests share: cmocka with TAP
 * output, and the reading of fixtures that real PyTorch wrote (see
 * tests/fixtures/fixturelib.py for their format).
 */
#ifndef TN_TEST_H
#define TN_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>
#include <tensor/tensor.h>

/* Runs the group with TAP output (for Automake's TAP driver). */
#define TN_RUN_TESTS(tests) tn_test_run(#tests, tests, sizeof(tests) / sizeof((tests)[0]))
int tn_test_run(const char *name, const struct CMUnitTest *tests, size_t n);

/* Leaves a test that cannot run here (no PyTorch, no GPU), saying why in a
 * TAP comment. cmocka's own skip() prints "not ok N # SKIP", which TAP
 * harnesses (ttest, prove, Automake's driver) count as a failure. */
#define TN_TEST_SKIP(reason)                                                   \
    do {                                                                       \
        print_message("# skipped: %s\n", (reason));                            \
        return;                                                                \
    } while (0)

/* Loads fixture `name` (e.g. "dtype") from $TN_FIXTURES, else from the
 * source tree's tests/fixtures/core. Fails the test when absent. The caller
 * json_decref()s it. */
json_t *tn_test_fixture(const char *name);

/* Builds a contiguous tensor from a fixture tensor object (dtype, shape,
 * hex). The caller releases it. */
struct tn_tensor *tn_test_tensor(json_t *obj);

enum tn_dtype tn_test_dtype(const char *name);

/* Reads a JSON array of integers into out (at most TN_MAX_DIMS); returns n. */
int tn_test_ints(json_t *arr, int64_t *out);

/* Compares t with a fixture tensor: dtype, shape, values bit for bit, and,
 * when check_layout, strides and storage offset. Returns 0 when equal, else
 * prints what differs (prefixed by `what`) as a TAP comment and returns -1. */
int tn_test_compare(const struct tn_tensor *t, json_t *expected, const char *what,
                    int check_layout);

/* Runs run_case on every case in the array `key` of fixture `file`
 * (torch1 tells the case whether PyTorch 1.13 wrote the file), prints how
 * many differ, and fails unless more than 100 ran and none differed. */
typedef int (*tn_test_case_fn)(json_t *c, int torch1);
void tn_test_fixture_cases(const char *file, const char *key, const char *what,
                           tn_test_case_fn run_case);

/* The whole of file `path` in a malloc'd buffer (one spare byte at the
 * end); *len gets its size. Fails the test when it cannot be read. */
unsigned char *tn_test_slurp(const char *path, size_t *len);

/* The bytes of t in row-major order (bools as bytes), as hex; free() it. */
char *tn_test_hex(const struct tn_tensor *t);

#endif
