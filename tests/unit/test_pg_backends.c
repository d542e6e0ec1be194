/*
 * test_pg_backends: the mpi process group against the tcp one, and the
 * nccl one's refusal without a GPU.
 *
 * The mpi test runs this program again as 2 ranks under Open MPI's mpirun
 * (skipped without it or when libtensor was built without MPI). Each rank
 * makes a tcp group and an mpi group (sharing a FileStore) and runs every
 * collective with the same inputs through both: allreduce with every op
 * over every dtype (NaN among the float inputs, so min and max must
 * propagate it the same way), broadcast, allgather, reduce, gather,
 * scatter, reduce_scatter, all_to_all, barrier, send/recv; the results must
 * be the same bytes. A second run has rank 1 skip an allreduce: rank 0 must
 * fail with the tcp backend's verdict naming rank 1.
 */
#include "tn_test.h"

#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const enum tn_dtype dtypes[] = {TN_FLOAT32, TN_FLOAT64, TN_FLOAT16, TN_BFLOAT16,
                                       TN_INT64,   TN_INT32,   TN_INT16,   TN_INT8,
                                       TN_UINT8,   TN_BOOL,    TN_COMPLEX64};
static const enum tn_reduce_op ops[] = {TN_REDUCE_SUM, TN_REDUCE_AVG, TN_REDUCE_PRODUCT,
                                        TN_REDUCE_MIN, TN_REDUCE_MAX};

/* Rank r's input: small values (exact in every dtype), a NaN in floats. */
static struct tn_tensor *input(enum tn_dtype dt, int r, int64_t n)
{
    struct tn_tensor *f = tn_empty(TN_SHAPE(n), TN_FLOAT64);
    double *d = tn_data(f);
    for (int64_t i = 0; i < n; i++)
        d[i] = (double)((i * 7 + r * 5) % 3 + 1) * (i % 2 ? 1 : -1) * (dt == TN_UINT8 || dt == TN_BOOL ? -1 : 1);
    if (n > 3 && r == 1)
        d[3] = NAN;
    if (!tn_dtype_is_floating(dt) && dt != TN_COMPLEX64)
        for (int64_t i = 0; i < n; i++)
            d[i] = isnan(d[i]) ? 0 : fabs(d[i]) * (dt == TN_BOOL ? (i + r) % 2 : 1);
    struct tn_tensor *t = tn_to_dtype(f, dt);
    tn_release(f);
    return t;
}

static struct tn_tensor *copy(const struct tn_tensor *t)
{
    struct tn_tensor *c = tn_empty(t->sizes, t->ndim, t->dtype);
    memcpy(tn_data(c), tn_data(t), tn_nbytes(t));
    return c;
}

static int failures;

static void same(const char *what, int a, int b, const struct tn_tensor *x,
                 const struct tn_tensor *y)
{
    if (a != 0 || b != 0) {
        fprintf(stderr, "%s: tcp %d, mpi %d: %s\n", what, a, b, tn_last_error());
        failures++;
    } else if (x && memcmp(tn_data(x), tn_data(y), tn_nbytes(x)) != 0) {
        fprintf(stderr, "%s: the results differ\n", what);
        failures++;
    }
}

/* One rank under mpirun; returns the exit status. */
static int mpi_rank(void)
{
    struct tn_store *fs = tn_store_file_new(getenv("TN_TEST_STORE"), 2);
    if (!fs)
        return 90;
    struct tn_store *s1 = tn_store_prefix_new("tcp", fs), *s2 = tn_store_prefix_new("mpi", fs);
    bool lonely = getenv("TN_TEST_LONELY") != NULL;
    struct tn_pg *mpi = tn_pg_new("mpi", s2, -1, -1, lonely ? 300 : 30000);
    if (!mpi) {
        fprintf(stderr, "mpi: %s\n", tn_last_error());
        return 91;
    }
    int me = tn_pg_rank(mpi), P = tn_pg_size(mpi);
    if (lonely) {
        struct tn_tensor *t = tn_zeros(TN_SHAPE(4), TN_FLOAT32);
        if (me == 0) {
            int rc = tn_pg_allreduce(mpi, t, TN_REDUCE_SUM);
            printf("rank 0: %d %s\n", rc, tn_last_error());
            rc = tn_pg_barrier(mpi);
            printf("rank 0 then: %d %s\n", rc, tn_last_error());
        } else {
            struct timespec ts = {1, 500 * 1000000L};
            nanosleep(&ts, NULL);
        }
        fflush(stdout);
        _exit(0); /* rank 0's allreduce is still posted: MPI cannot finish cleanly */
    }
    struct tn_pg *tcp = tn_pg_new_tcp(s1, me, P, NULL, 30000);
    if (!tcp || P != 2)
        return 92;
    /* a rank that MPI does not agree with is refused */
    if (tn_pg_new_mpi(NULL, me + 5, P, 1000) || tn_last_status() != TN_EINVAL)
        failures++;
    char what[128];
    int64_t sizes[2] = {5, 70001};
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
            for (int k = 0; k < 2; k++) {
                enum tn_dtype dt = dtypes[d];
                enum tn_reduce_op op = ops[o];
                if ((op == TN_REDUCE_AVG && !tn_dtype_is_floating(dt) && dt != TN_COMPLEX64) ||
                    (dt == TN_COMPLEX64 && (op == TN_REDUCE_MIN || op == TN_REDUCE_MAX)))
                    continue;
                struct tn_tensor *a = input(dt, me, sizes[k]), *b = copy(a);
                snprintf(what, sizeof what, "allreduce %s op %zu n %lld", tn_dtype_name(dt), o,
                         (long long)sizes[k]);
                same(what, tn_pg_allreduce(tcp, a, op), tn_pg_allreduce(mpi, b, op), a, b);
                tn_release(a);
                tn_release(b);
                a = input(dt, me, sizes[k]);
                b = copy(a);
                snprintf(what, sizeof what, "reduce %s op %zu", tn_dtype_name(dt), o);
                same(what, tn_pg_reduce(tcp, a, op, 1), tn_pg_reduce(mpi, b, op, 1), a, b);
                tn_release(a);
                tn_release(b);
            }
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        enum tn_dtype dt = dtypes[d];
        struct tn_tensor *a = input(dt, me, 9), *b = copy(a);
        same("broadcast", tn_pg_broadcast(tcp, a, 1), tn_pg_broadcast(mpi, b, 1), a, b);
        struct tn_tensor *ga = tn_zeros(TN_SHAPE(2, 9), dt), *gb = tn_zeros(TN_SHAPE(2, 9), dt);
        same("allgather", tn_pg_allgather(tcp, ga, a), tn_pg_allgather(mpi, gb, b), ga, gb);
        struct tn_tensor *xa = input(dt, me + 2, 9), *xb = copy(xa);
        same("gather", tn_pg_gather(tcp, ga, xa, 0), tn_pg_gather(mpi, gb, xb, 0), ga, gb);
        same("scatter", tn_pg_scatter(tcp, xa, ga, 0), tn_pg_scatter(mpi, xb, gb, 0), xa, xb);
        struct tn_tensor *ia = input(dt, me, 18), *oa = tn_zeros(TN_SHAPE(18), dt);
        struct tn_tensor *ob = tn_zeros(TN_SHAPE(18), dt);
        same("all_to_all", tn_pg_all_to_all(tcp, oa, ia), tn_pg_all_to_all(mpi, ob, ia), oa, ob);
        struct tn_tensor *ra = tn_zeros(TN_SHAPE(9), dt), *rb = tn_zeros(TN_SHAPE(9), dt);
        if (dt != TN_COMPLEX64)
            same("reduce_scatter", tn_pg_reduce_scatter(tcp, ra, ia, TN_REDUCE_MAX),
                 tn_pg_reduce_scatter(mpi, rb, ia, TN_REDUCE_MAX), ra, rb);
        same("barrier", tn_pg_barrier(tcp), tn_pg_barrier(mpi), NULL, NULL);
        /* send/recv: rank 0 sends its a, rank 1 receives into its own */
        int s1rc = me == 0 ? tn_pg_send(tcp, a, 1) : tn_pg_recv(tcp, a, 0);
        int s2rc = me == 0 ? tn_pg_send(mpi, b, 1) : tn_pg_recv(mpi, b, 0);
        same("send/recv", s1rc, s2rc, a, b);
        struct tn_tensor *all[] = {a, b, ga, gb, xa, xb, ia, oa, ob, ra, rb};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            tn_release(all[i]);
    }
    /* a broken argument fails the same way on both */
    struct tn_tensor *t = tn_zeros(TN_SHAPE(3), TN_FLOAT32);
    if (tn_pg_broadcast(mpi, t, 7) != TN_EINVAL)
        failures++;
    tn_release(t);
    tn_pg_free(tcp);
    tn_pg_free(mpi);
    tn_store_release(s1);
    tn_store_release(s2);
    tn_store_release(fs);
    if (failures)
        fprintf(stderr, "rank %d: %d failures\n", me, failures);
    return failures ? 1 : 0;
}

/* Runs this program as 2 ranks under mpirun; its output goes to out. */
static int run_mpirun(const char *self, const char *store, bool lonely, char *out, size_t outlen)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TN_TEST_MPI_RANK=1 "
             "ASAN_OPTIONS=detect_leaks=0 " /* Open MPI keeps what it allocates */
             "TN_TEST_STORE=%s %s timeout 120 mpirun --oversubscribe -np 2 --mca btl self,vader "
             "%s 2>&1",
             store, lonely ? "TN_TEST_LONELY=1" : "", self);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = 0;
    return pclose(p);
}

static void test_mpi_against_tcp(void **state)
{
    (void)state;
#ifndef TN_HAVE_MPI
    TN_TEST_SKIP("libtensor was built without MPI");
#endif
    if (system("command -v mpirun >/dev/null 2>&1") != 0)
        TN_TEST_SKIP("no mpirun");
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = 0;
    char dir[] = "/tmp/tn_pg_mpi.XXXXXX", store[64], out[16384];
    assert_non_null(mkdtemp(dir));
    snprintf(store, sizeof store, "%s/store", dir);
    int rc = run_mpirun(self, store, false, out, sizeof out);
    print_message("%s", out);
    assert_int_equal(rc, 0);
    unlink(store);
    /* rank 1 never joins rank 0's allreduce */
    rc = run_mpirun(self, store, true, out, sizeof out);
    print_message("%s", out);
    assert_non_null(strstr(out, "rank 0: -10 allreduce #1 failed: rank 1 never arrived"));
    assert_non_null(strstr(out, "rank 0 then: -10 barrier #2: the process group is broken: "
                                "allreduce #1 failed: rank 1 never arrived"));
    unlink(store);
    rmdir(dir);
}

/* Without a GPU (or without NCCL) the nccl backend says why. */
static void test_nccl_unavailable(void **state)
{
    (void)state;
    struct tn_store *s = tn_store_hash_new();
    /* with the library named, the reason is the missing device; in a child,
     * as the first attempt decides for the whole process */
    if (access("/usr/local/cuda/lib64/libnccl.so.2", R_OK) == 0 &&
        system("nvidia-smi -L >/dev/null 2>&1") != 0) {
        pid_t c = fork();
        if (c == 0) {
            setenv("TN_NCCL_LIBRARY", "/usr/local/cuda/lib64/libnccl.so.2", 1);
            struct tn_pg *g = tn_pg_new_nccl(s, 0, 1, 1000);
            fprintf(stderr, "with TN_NCCL_LIBRARY: %s\n", tn_last_error());
            _exit(!g && tn_last_status() == TN_EDEVICE &&
                          strstr(tn_last_error(), "NCCL support is not available: no CUDA device")
                      ? 0
                      : 1);
        }
        int st = 0;
        waitpid(c, &st, 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    struct tn_pg *pg = tn_pg_new("nccl", s, 0, 1, 1000);
    if (pg) {
        tn_pg_free(pg);
        tn_store_release(s);
        TN_TEST_SKIP("a CUDA device and NCCL are here");
    }
    print_message("%s\n", tn_last_error());
    assert_int_equal(tn_last_status(), TN_EDEVICE);
    assert_non_null(strstr(tn_last_error(), "NCCL support is not available: "));
    assert_null(tn_pg_new("smoke-signals", s, 0, 1, 1000));
    assert_string_equal(tn_last_error(),
                        "Invalid backend: 'smoke-signals' (tcp, gloo, mpi or nccl)");
    tn_store_release(s);
}

int main(void)
{
    if (getenv("TN_TEST_MPI_RANK"))
        return mpi_rank();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mpi_against_tcp),
        cmocka_unit_test(test_nccl_unavailable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
