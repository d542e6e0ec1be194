/*
 * tests/unit/test_blas.c: OpenBLAS's threading (lib/ops/cpu/blas.c).  The
 * process has no thread but its own until a threaded BLAS call (OpenBLAS's
 * workers, started at load, are stopped by our constructor), the workers
 * come back for a product large enough to use them and it is right, and
 * tn__blas_parallel_for covers its range once per index.
 */
#include "tn_test.h"

#include "ops/internal.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

/* Threads of this process, from /proc/self/task (-1 where absent). */
static int threads(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Runs first: nothing has asked OpenBLAS for threads yet. */
static void test_no_workers_at_load(void **state)
{
    (void)state;
    if (threads() < 0)
        TN_TEST_SKIP("no /proc/self/task");
    assert_int_equal(threads(), 1);
}

/* The same product by OpenBLAS (threaded where the machine has cores)
 * and by a double loop. */
static void test_gemm_after_restart(void **state)
{
    (void)state;
    enum { N = 384 };
    int64_t sz[2] = {N, N};
    struct tn_tensor *a = tn_empty(sz, 2, TN_FLOAT32), *b = tn_empty(sz, 2, TN_FLOAT32);
    float *pa = tn_data(a), *pb = tn_data(b);
    for (int i = 0; i < N * N; i++) {
        pa[i] = (float)((i * 7) % 13) - 6.0f;
        pb[i] = (float)((i * 5) % 11) - 5.0f;
    }
    struct tn_tensor *c = tn_mm(a, b);
    assert_non_null(c);
    const float *pc = tn_data(c);
    for (int i = 0; i < N; i += 37)
        for (int j = 0; j < N; j += 29) {
            double s = 0;
            for (int k = 0; k < N; k++)
                s += (double)pa[i * N + k] * pb[k * N + j];
            assert_true(pc[i * N + j] == (float)s); /* small integers: exact */
        }
    print_message("# threads after a %dx%d sgemm: %d\n", N, N, threads());
    tn_release(a);
    tn_release(b);
    tn_release(c);
}

static void mark(int64_t begin, int64_t end, void *ctx)
{
    int *hits = ctx;
    for (int64_t i = begin; i < end; i++)
        __atomic_fetch_add(&hits[i], 1, __ATOMIC_RELAXED);
}

static void test_parallel_for(void **state)
{
    (void)state;
    enum { N = 10007 };
    int *hits = calloc(N, sizeof *hits);
    tn__blas_parallel_for(N, 64, mark, hits);
    for (int i = 0; i < N; i++)
        assert_int_equal(hits[i], 1);
    free(hits);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_workers_at_load),
        cmocka_unit_test(test_gemm_after_restart),
        cmocka_unit_test(test_parallel_for),
    };
    return TN_RUN_TESTS(tests);
}
