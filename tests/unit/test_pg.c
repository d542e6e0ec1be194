/*
 * test_pg: the tcp process group with 2, 3 and 4 ranks as threads over a
 * shared HashStore: allreduce with every op over every real dtype (values
 * small integers, so every dtype holds the exact result, which the test
 * computes from the same inputs), broadcast, allgather, reduce, gather,
 * scatter, reduce_scatter, all_to_all, barrier, send/recv (small buffers
 * through recursive doubling, large ones through the shared-memory ring and
 * the socket ring),
 * async work handles, and a collective that rank 2 of 3 never joins: ranks 0 and 1 fail with the
 * same message naming the operation, its number and the missing rank.
 */
#include "tn_test.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The wall clock as libtensor sees it, set back by this many seconds
 * (test_wait_clock_step): this definition takes the place of libc's for
 * the library too, as a stepped wall clock would. Other clocks pass. */
static _Atomic long long wall_clock_back_s;

int clock_gettime(clockid_t id, struct timespec *ts)
{
    int rc = (int)syscall(SYS_clock_gettime, id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        ts->tv_sec -= (time_t)wall_clock_back_s;
    return rc;
}

static const enum tn_dtype dtypes[] = {TN_FLOAT32, TN_FLOAT64, TN_FLOAT16, TN_BFLOAT16, TN_INT64,
                                       TN_INT32,   TN_INT16,   TN_INT8,    TN_UINT8,    TN_BOOL};
static const enum tn_reduce_op ops[] = {TN_REDUCE_SUM, TN_REDUCE_AVG, TN_REDUCE_PRODUCT,
                                        TN_REDUCE_MIN, TN_REDUCE_MAX};

static double get(const struct tn_tensor *t, int64_t i)
{
    const void *d = tn_data(t);
    switch (t->dtype) {
    case TN_FLOAT32: return ((const float *)d)[i];
    case TN_FLOAT64: return ((const double *)d)[i];
    case TN_FLOAT16: return tn_half_to_float(((const tn_half *)d)[i]);
    case TN_BFLOAT16: return tn_bfloat16_to_float(((const tn_bfloat16 *)d)[i]);
    case TN_INT64: return (double)((const int64_t *)d)[i];
    case TN_INT32: return ((const int32_t *)d)[i];
    case TN_INT16: return ((const int16_t *)d)[i];
    case TN_INT8: return ((const int8_t *)d)[i];
    case TN_UINT8: return ((const uint8_t *)d)[i];
    case TN_BOOL: return ((const bool *)d)[i];
    default: return NAN;
    }
}

static void put(struct tn_tensor *t, int64_t i, double v)
{
    void *d = tn_data(t);
    switch (t->dtype) {
    case TN_FLOAT32: ((float *)d)[i] = (float)v; break;
    case TN_FLOAT64: ((double *)d)[i] = v; break;
    case TN_FLOAT16: ((tn_half *)d)[i] = tn_half_from_float((float)v); break;
    case TN_BFLOAT16: ((tn_bfloat16 *)d)[i] = tn_bfloat16_from_float((float)v); break;
    case TN_INT64: ((int64_t *)d)[i] = (int64_t)v; break;
    case TN_INT32: ((int32_t *)d)[i] = (int32_t)v; break;
    case TN_INT16: ((int16_t *)d)[i] = (int16_t)v; break;
    case TN_INT8: ((int8_t *)d)[i] = (int8_t)v; break;
    case TN_UINT8: ((uint8_t *)d)[i] = (uint8_t)v; break;
    case TN_BOOL: ((bool *)d)[i] = v != 0; break;
    default: break;
    }
}

/* Rank r's i-th input: small, so sums and products of up to 4 ranks fit
 * even int8 and bfloat16 exactly. */
static double input(enum tn_dtype dt, int r, int64_t i)
{
    if (dt == TN_BOOL)
        return ((i + r) % 3) == 0;
    return (double)((i * 7 + r * 5) % 3 + 1);
}

static double expected(enum tn_dtype dt, enum tn_reduce_op op, int P, int64_t i)
{
    double acc = input(dt, 0, i);
    for (int r = 1; r < P; r++) {
        double v = input(dt, r, i);
        if (dt == TN_BOOL) {
            bool any = op == TN_REDUCE_SUM || op == TN_REDUCE_MAX;
            acc = any ? (acc || v) : (acc && v);
            continue;
        }
        switch (op) {
        case TN_REDUCE_SUM:
        case TN_REDUCE_AVG: acc += v; break;
        case TN_REDUCE_PRODUCT: acc *= v; break;
        case TN_REDUCE_MIN: acc = fmin(acc, v); break;
        case TN_REDUCE_MAX: acc = fmax(acc, v); break;
        }
    }
    return op == TN_REDUCE_AVG ? acc / P : acc;
}

struct rank {
    struct tn_store *store;
    int rank, size;
    int failures;
    int64_t n;
};

static void *rank_main(void *p)
{
    struct rank *a = p;
    struct tn_pg *pg = tn_pg_new_tcp(a->store, a->rank, a->size, "127.0.0.1", 20000);
    if (!pg) {
        a->failures = 1000;
        return NULL;
    }
    int64_t n = a->n;
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            enum tn_dtype dt = dtypes[d];
            bool floating = tn_dtype_is_floating(dt);
            if (ops[o] == TN_REDUCE_AVG && !floating)
                continue;
            struct tn_tensor *t = tn_empty(TN_SHAPE(n), dt);
            for (int64_t i = 0; i < n; i++)
                put(t, i, input(dt, a->rank, i));
            if (tn_pg_allreduce(pg, t, ops[o]) < 0) {
                a->failures++;
            } else {
                for (int64_t i = 0; i < n; i++) {
                    double want = expected(dt, ops[o], a->size, i), got = get(t, i);
                    double tol = dt == TN_FLOAT16 || dt == TN_BFLOAT16 ? fabs(want) / 64 : 1e-6;
                    if (!(fabs(got - want) <= tol)) {
                        print_message("rank %d %s op %zu [%lld]: %g != %g\n", a->rank,
                                      tn_dtype_name(dt), o, (long long)i, got, want);
                        a->failures++;
                        break;
                    }
                }
            }
            tn_release(t);
        }
    }
    /* broadcast from the last rank */
    struct tn_tensor *b = tn_empty(TN_SHAPE(n), TN_INT32);
    for (int64_t i = 0; i < n; i++)
        put(b, i, a->rank == a->size - 1 ? (double)i : -1);
    if (tn_pg_broadcast(pg, b, a->size - 1) < 0)
        a->failures++;
    for (int64_t i = 0; i < n; i++)
        if (get(b, i) != (double)i) {
            a->failures++;
            break;
        }
    tn_release(b);
    /* allgather */
    struct tn_tensor *in = tn_empty(TN_SHAPE(3), TN_FLOAT64);
    struct tn_tensor *out = tn_empty(TN_SHAPE(a->size, 3), TN_FLOAT64);
    for (int i = 0; i < 3; i++)
        put(in, i, a->rank * 10 + i);
    if (tn_pg_allgather(pg, out, in) < 0)
        a->failures++;
    for (int r = 0; r < a->size; r++)
        for (int i = 0; i < 3; i++)
            if (get(out, r * 3 + i) != r * 10 + i)
                a->failures++;
    tn_release(in);
    tn_release(out);
    if (tn_pg_barrier(pg) < 0)
        a->failures++;
    int P = a->size, me = a->rank, root = P / 2;
    /* reduce (sum to root) */
    struct tn_tensor *x = tn_empty(TN_SHAPE(5), TN_FLOAT32);
    for (int i = 0; i < 5; i++)
        put(x, i, input(TN_FLOAT32, me, i));
    a->failures += tn_pg_reduce(pg, x, TN_REDUCE_SUM, root) < 0;
    for (int i = 0; i < 5; i++) {
        double want = me == root ? expected(TN_FLOAT32, TN_REDUCE_SUM, P, i)
                                 : input(TN_FLOAT32, me, i);
        if (get(x, i) != want)
            a->failures++;
    }
    tn_release(x);
    /* gather to root, then scatter it back from root */
    struct tn_tensor *g_in = tn_empty(TN_SHAPE(2), TN_INT16);
    struct tn_tensor *g_out = tn_zeros(TN_SHAPE(P, 2), TN_INT16);
    put(g_in, 0, me);
    put(g_in, 1, 100 + me);
    a->failures += tn_pg_gather(pg, me == root ? g_out : NULL, g_in, root) < 0;
    if (me == root)
        for (int r = 0; r < P; r++)
            if (get(g_out, r * 2) != r || get(g_out, r * 2 + 1) != 100 + r)
                a->failures++;
    struct tn_tensor *sc = tn_zeros(TN_SHAPE(2), TN_INT16);
    a->failures += tn_pg_scatter(pg, sc, me == root ? g_out : NULL, root) < 0;
    if (get(sc, 0) != me || get(sc, 1) != 100 + me)
        a->failures++;
    tn_release(g_in);
    tn_release(g_out);
    tn_release(sc);
    /* reduce_scatter: block r of the sum */
    struct tn_tensor *rs_in = tn_empty(TN_SHAPE(P * 3), TN_INT64);
    struct tn_tensor *rs_out = tn_empty(TN_SHAPE(3), TN_INT64);
    for (int i = 0; i < P * 3; i++)
        put(rs_in, i, input(TN_INT64, me, i));
    a->failures += tn_pg_reduce_scatter(pg, rs_out, rs_in, TN_REDUCE_MAX) < 0;
    for (int i = 0; i < 3; i++)
        if (get(rs_out, i) != expected(TN_INT64, TN_REDUCE_MAX, P, me * 3 + i))
            a->failures++;
    tn_release(rs_in);
    tn_release(rs_out);
    /* all_to_all: out block j = rank j's block me */
    struct tn_tensor *in2 = tn_empty(TN_SHAPE(P * 2), TN_FLOAT64);
    struct tn_tensor *out2 = tn_empty(TN_SHAPE(P * 2), TN_FLOAT64);
    for (int j = 0; j < P; j++)
        for (int k = 0; k < 2; k++)
            put(in2, j * 2 + k, me * 1000 + j * 10 + k);
    a->failures += tn_pg_all_to_all(pg, out2, in2) < 0;
    for (int j = 0; j < P; j++)
        for (int k = 0; k < 2; k++)
            if (get(out2, j * 2 + k) != j * 1000 + me * 10 + k)
                a->failures++;
    tn_release(in2);
    tn_release(out2);
    /* send/recv around a ring */
    struct tn_tensor *s = tn_empty(TN_SHAPE(4), TN_INT64);
    struct tn_tensor *r = tn_empty(TN_SHAPE(4), TN_INT64);
    for (int i = 0; i < 4; i++)
        put(s, i, a->rank + i);
    int right = (a->rank + 1) % a->size, left = (a->rank + a->size - 1) % a->size;
    if (a->rank % 2 == 0) {
        a->failures += tn_pg_send(pg, s, right) < 0;
        a->failures += tn_pg_recv(pg, r, left) < 0;
    } else {
        a->failures += tn_pg_recv(pg, r, left) < 0;
        a->failures += tn_pg_send(pg, s, right) < 0;
    }
    for (int i = 0; i < 4; i++)
        if (get(r, i) != left + i)
            a->failures++;
    tn_release(s);
    tn_release(r);
    tn_pg_free(pg);
    return NULL;
}

static void run_ranks(int P, int64_t n)
{
    struct tn_store *store = tn_store_hash_new();
    pthread_t th[8];
    struct rank a[8];
    for (int r = 0; r < P; r++) {
        a[r] = (struct rank){store, r, P, 0, n};
        pthread_create(&th[r], NULL, rank_main, &a[r]);
    }
    for (int r = 0; r < P; r++) {
        pthread_join(th[r], NULL);
        assert_int_equal(a[r].failures, 0);
    }
    tn_store_release(store);
}

static void test_two_ranks(void **state)
{
    (void)state;
    run_ranks(2, 1000);
}

static void test_three_ranks(void **state)
{
    (void)state;
    run_ranks(3, 7); /* chunks of unequal size, some empty with n < P */
    run_ranks(3, 2);
}

static void test_four_ranks(void **state)
{
    (void)state;
    run_ranks(4, 100003);
}

/* Buffers large enough for the shared-memory ring (cross-memory attach
 * works between threads of one process too), then the same through the
 * sockets' segmented ring with TN_PG_NO_SHM=1. */
static void test_large(void **state)
{
    (void)state;
    run_ranks(2, 300001);
    run_ranks(3, 200003);
    setenv("TN_PG_NO_SHM", "1", 1);
    run_ranks(2, 300001);
    run_ranks(3, 200003);
    unsetenv("TN_PG_NO_SHM");
}

/* Async work: three allreduces, a broadcast and a barrier queued, then a
 * synchronous allreduce that must run after them; every result checked. */
static void *async_main(void *p)
{
    struct rank *a = p;
    struct tn_pg *pg = tn_pg_new_tcp(a->store, a->rank, a->size, "127.0.0.1", 20000);
    if (!pg) {
        a->failures = 1000;
        return NULL;
    }
    int P = a->size;
    int64_t sizes[3] = {5, 40000, 300001}; /* doubling, socket or shm ring, shm ring */
    struct tn_tensor *t[3];
    struct tn_work *w[5];
    for (int k = 0; k < 3; k++) {
        t[k] = tn_full(TN_SHAPE(sizes[k]), tn_float(a->rank + 1 + k), TN_FLOAT32);
        w[k] = tn_pg_allreduce_async(pg, t[k], TN_REDUCE_SUM);
        tn_release(t[k]); /* the work holds a reference */
    }
    struct tn_tensor *b = tn_full(TN_SHAPE(7), tn_float(a->rank), TN_INT64);
    w[3] = tn_pg_broadcast_async(pg, b, 1);
    w[4] = tn_pg_barrier_async(pg);
    struct tn_tensor *s = tn_full(TN_SHAPE(3), tn_float(1), TN_FLOAT64);
    a->failures += tn_pg_allreduce(pg, s, TN_REDUCE_SUM) < 0;
    for (int k = 0; k < 5; k++) {
        a->failures += !w[k];
        /* the synchronous allreduce waited for all of them */
        a->failures += w[k] && !tn_work_is_completed(w[k]);
        a->failures += w[k] && tn_work_wait(w[k], 10000) < 0;
    }
    for (int k = 0; k < 3; k++) {
        double want = 0;
        for (int r = 0; r < P; r++)
            want += r + 1 + k;
        for (int64_t i = 0; i < sizes[k]; i += 997)
            if (get(t[k], i) != want) {
                print_message("async allreduce %d [%lld]: %g != %g\n", k, (long long)i,
                              get(t[k], i), want);
                a->failures++;
                break;
            }
    }
    for (int i = 0; i < 7; i++)
        a->failures += get(b, i) != 1;
    for (int i = 0; i < 3; i++)
        a->failures += get(s, i) != P;
    for (int k = 0; k < 5; k++)
        tn_work_free(w[k]);
    tn_release(b);
    tn_release(s);
    tn_pg_free(pg);
    return NULL;
}

static void test_async(void **state)
{
    (void)state;
    for (int P = 2; P <= 3; P++) {
        struct tn_store *store = tn_store_hash_new();
        pthread_t th[3];
        struct rank a[3];
        for (int r = 0; r < P; r++) {
            a[r] = (struct rank){store, r, P, 0, 0};
            pthread_create(&th[r], NULL, async_main, &a[r]);
        }
        for (int r = 0; r < P; r++) {
            pthread_join(th[r], NULL);
            assert_int_equal(a[r].failures, 0);
        }
        tn_store_release(store);
    }
}

/* tn_work_wait's timeout runs on the monotonic clock: with the wall clock
 * an hour behind, waiting 300 ms for a barrier rank 1 has not joined still
 * waits the 300 ms (it ended at once when the deadline was wall-clock
 * time, already an hour past), then the barrier completes once rank 1
 * joins. */
static atomic_int clock_step_waited; /* rank 0's timed wait is over */

struct clock_step {
    struct rank r;
    int rc;
    int64_t waited_ms;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *clock_step_main(void *p)
{
    struct clock_step *c = p;
    struct tn_pg *pg = tn_pg_new_tcp(c->r.store, c->r.rank, c->r.size, "127.0.0.1", 20000);
    if (!pg) {
        c->r.failures = 1000;
        clock_step_waited = 1;
        return NULL;
    }
    if (c->r.rank == 0) {
        struct tn_work *w = tn_pg_barrier_async(pg);
        c->r.failures += !w;
        wall_clock_back_s = 3600;
        int64_t t0 = mono_ms();
        c->rc = tn_work_wait(w, 300);
        c->waited_ms = mono_ms() - t0;
        wall_clock_back_s = 0;
        clock_step_waited = 1;
        c->r.failures += tn_work_wait(w, 20000) < 0;
        tn_work_free(w);
    } else {
        while (!clock_step_waited) {
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
        c->r.failures += tn_pg_barrier(pg) < 0;
    }
    tn_pg_free(pg);
    return NULL;
}

static void test_wait_clock_step(void **state)
{
    (void)state;
    struct tn_store *store = tn_store_hash_new();
    struct clock_step c[2];
    pthread_t th[2];
    clock_step_waited = 0;
    for (int r = 0; r < 2; r++) {
        c[r] = (struct clock_step){.r = {store, r, 2, 0, 0}};
        pthread_create(&th[r], NULL, clock_step_main, &c[r]);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    assert_int_equal(c[0].r.failures, 0);
    assert_int_equal(c[1].r.failures, 0);
    assert_int_equal(c[0].rc, TN_ETIMEOUT);
    assert_true(c[0].waited_ms >= 250);
    tn_store_release(store);
}

struct lonely {
    struct tn_store *store;
    int rank;
    int rc, rc2;
    char msg[512];
    int64_t n; /* elements; a large n first runs one allreduce all join */
};

/* Ranks 0 and 1 of 3 start an allreduce that rank 2 never joins. */
static void *lonely_main(void *p)
{
    struct lonely *l = p;
    struct tn_pg *pg = tn_pg_new_tcp(l->store, l->rank, 3, "127.0.0.1", 300);
    if (!pg)
        return NULL;
    struct tn_tensor *t = tn_zeros(TN_SHAPE(l->n), TN_FLOAT32);
    if (l->n > 4 && tn_pg_allreduce(pg, t, TN_REDUCE_SUM) < 0)
        l->rc = 1000;
    else if (l->rank < 2) {
        l->rc = tn_pg_allreduce(pg, t, TN_REDUCE_SUM);
        snprintf(l->msg, sizeof l->msg, "%s", tn_last_error());
        l->rc2 = tn_pg_barrier(pg); /* the group is broken now */
    } else {
        struct timespec ts = {1, 500 * 1000000L};
        nanosleep(&ts, NULL);
    }
    tn_release(t);
    tn_pg_free(pg);
    return NULL;
}

static void lonely_run(int64_t n, const char *want)
{
    struct tn_store *store = tn_store_hash_new();
    struct lonely l[3] = {{store, 0, 0, 0, "", n}, {store, 1, 0, 0, "", n}, {store, 2, 0, 0, "", n}};
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, lonely_main, &l[i]);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    print_message("rank 0: %s\nrank 1: %s\n", l[0].msg, l[1].msg);
    /* both ranks fail the same way, naming the operation, its number and
     * the rank that never arrived */
    assert_int_equal(l[0].rc, TN_ETIMEOUT);
    assert_int_equal(l[1].rc, TN_ETIMEOUT);
    assert_string_equal(l[0].msg, l[1].msg);
    assert_non_null(strstr(l[0].msg, want));
    assert_int_equal(l[0].rc2, TN_ETIMEOUT);
    assert_int_equal(l[1].rc2, TN_ETIMEOUT);
    assert_int_equal(l[2].rc, 0);
    tn_store_release(store);
}

static void test_timeout(void **state)
{
    (void)state;
    lonely_run(4, "allreduce #1 failed: rank 2 never arrived");
}

/* The same on the shared-memory allreduce, after one call all ranks joined
 * (which made the segments): ranks 0 and 1 wait on rank 2's counters until
 * their deadline, then agree as over the sockets. */
static void test_timeout_shm(void **state)
{
    (void)state;
    lonely_run(100000, "allreduce #2 failed: rank 2 never arrived");
}

/* ------------------------------------------------ shared-memory collectives */

bool tn__pg_uses_shm(const struct tn_pg *pg); /* lib/dist/internal.h */

/* Each rank's results of the large collectives, kept to compare the
 * shared-memory run with the socket run bit for bit. */
enum { SHM_N = 70001, SHM_RESULTS = 8 };

struct shm_rank {
    struct tn_store *store;
    int rank, size;
    bool want_shm;
    int failures;
    struct tn_tensor *res[SHM_RESULTS];
};

static void *shm_main(void *p)
{
    struct shm_rank *a = p;
    struct tn_pg *pg = tn_pg_new_tcp(a->store, a->rank, a->size, "127.0.0.1", 20000);
    if (!pg || tn__pg_uses_shm(pg) != a->want_shm) {
        a->failures = 1000;
        tn_pg_free(pg);
        return NULL;
    }
    int P = a->size, me = a->rank, n = SHM_N;
    /* broadcast 280 KiB of float32 from rank 1 */
    struct tn_tensor *b = tn_empty(TN_SHAPE(n), TN_FLOAT32);
    for (int i = 0; i < n; i++)
        put(b, i, me == 1 ? i % 1000 : -1);
    a->failures += tn_pg_broadcast(pg, b, 1) < 0;
    for (int i = 0; i < n; i++)
        if (get(b, i) != i % 1000) {
            a->failures++;
            break;
        }
    a->res[0] = b;
    /* allgather 560 KiB of float64 per rank */
    struct tn_tensor *in = tn_empty(TN_SHAPE(n), TN_FLOAT64);
    struct tn_tensor *out = tn_empty(TN_SHAPE(P, n), TN_FLOAT64);
    for (int i = 0; i < n; i++)
        put(in, i, me * 100000 + i);
    a->failures += tn_pg_allgather(pg, out, in) < 0;
    for (int r = 0; r < P; r++)
        for (int i = 0; i < n; i += 97)
            if (get(out, (int64_t)r * n + i) != r * 100000 + i) {
                a->failures++;
                r = P;
                break;
            }
    tn_release(in);
    a->res[1] = out;
    /* reduce_scatter of float32 blocks of 280 KiB: sum, max, avg, and an
     * async one of int32 with product */
    enum tn_reduce_op rops[3] = {TN_REDUCE_SUM, TN_REDUCE_MAX, TN_REDUCE_AVG};
    struct tn_tensor *rin = tn_empty(TN_SHAPE(P * n), TN_FLOAT32);
    for (int i = 0; i < P * n; i++)
        put(rin, i, input(TN_FLOAT32, me, i));
    for (int k = 0; k < 3; k++) {
        struct tn_tensor *ro = tn_empty(TN_SHAPE(n), TN_FLOAT32);
        a->failures += tn_pg_reduce_scatter(pg, ro, rin, rops[k]) < 0;
        for (int i = 0; i < n; i++)
            if (fabs(get(ro, i) - expected(TN_FLOAT32, rops[k], P, (int64_t)me * n + i)) > 1e-6) {
                print_message("reduce_scatter op %d [%d]: %g\n", k, i, get(ro, i));
                a->failures++;
                break;
            }
        a->res[2 + k] = ro;
    }
    tn_release(rin);
    struct tn_tensor *iin = tn_empty(TN_SHAPE(P * n), TN_INT32);
    struct tn_tensor *iout = tn_empty(TN_SHAPE(n), TN_INT32);
    for (int i = 0; i < P * n; i++)
        put(iin, i, input(TN_INT32, me, i));
    struct tn_work *w = tn_pg_reduce_scatter_async(pg, iout, iin, TN_REDUCE_PRODUCT);
    /* the other collectives' async forms, queued behind it */
    struct tn_tensor *x = tn_full(TN_SHAPE(6), tn_float(me + 1), TN_FLOAT64);
    struct tn_tensor *g = tn_zeros(TN_SHAPE(P, 6), TN_FLOAT64);
    struct tn_tensor *sc = tn_zeros(TN_SHAPE(6), TN_FLOAT64);
    struct tn_tensor *t_in = tn_empty(TN_SHAPE(P * 2), TN_INT64);
    struct tn_tensor *t_out = tn_zeros(TN_SHAPE(P * 2), TN_INT64);
    for (int i = 0; i < P * 2; i++)
        put(t_in, i, me * 100 + i);
    struct tn_tensor *msg = tn_full(TN_SHAPE(3), tn_float(me == 0 ? 42 : 0), TN_INT16);
    struct tn_work *ws[7] = {
        tn_pg_reduce_async(pg, x, TN_REDUCE_SUM, 0),
        tn_pg_gather_async(pg, me == 0 ? g : NULL, x, 0),
        tn_pg_scatter_async(pg, sc, me == 0 ? g : NULL, 0),
        tn_pg_all_to_all_async(pg, t_out, t_in),
        me == 0 ? tn_pg_send_async(pg, msg, 1) : me == 1 ? tn_pg_recv_async(pg, msg, 0) : NULL,
        tn_pg_barrier_async(pg),
        NULL,
    };
    a->failures += tn_work_wait(w, 20000) < 0;
    for (int k = 0; k < 6; k++)
        a->failures += (ws[k] || (k == 4 && me > 1)) ? ws[k] && tn_work_wait(ws[k], 20000) < 0 : 1;
    for (int i = 0; i < n; i++)
        if (get(iout, i) != expected(TN_INT32, TN_REDUCE_PRODUCT, P, (int64_t)me * n + i)) {
            a->failures++;
            break;
        }
    /* reduce: root 0 holds the sum of 1..P; the gather saw it (queued after) */
    double sum = P * (P + 1) / 2.0;
    for (int i = 0; i < 6; i++) {
        a->failures += get(x, i) != (me == 0 ? sum : me + 1);
        a->failures += me == 0 && get(g, i) != sum;
        for (int r = 1; me == 0 && r < P; r++)
            a->failures += get(g, r * 6 + i) != r + 1;
        a->failures += get(sc, i) != (me == 0 ? sum : me + 1);
    }
    for (int j = 0; j < P; j++)
        for (int k = 0; k < 2; k++)
            a->failures += get(t_out, j * 2 + k) != j * 100 + me * 2 + k;
    if (me == 1)
        a->failures += get(msg, 2) != 42;
    tn_work_free(w);
    for (int k = 0; k < 6; k++)
        tn_work_free(ws[k]);
    struct tn_tensor *done[] = {iin, x, g, sc, t_in, t_out, msg};
    for (size_t k = 0; k < sizeof done / sizeof done[0]; k++)
        tn_release(done[k]);
    a->res[5] = iout;
    /* allreduce of 280 KiB of float32: min over +0 and -0 (the sign of the
     * result depends on the operands' order) and a sum of fractions (its
     * bits on the order of the additions), so the shared segments must
     * reduce in the socket ring's order */
    for (int k = 0; k < 2; k++) {
        struct tn_tensor *ar = tn_empty(TN_SHAPE(n), TN_FLOAT32);
        float *v = tn_data(ar);
        for (int i = 0; i < n; i++)
            v[i] = k == 0 ? (i % 5 == 0 ? ((i + me) % 2 ? 0.0f : -0.0f) : (float)((i * 7 + me * 3) % 11) - 5)
                          : (float)(i % 1000) * 0.013f + (float)me * 0.37f + 1e-3f * (float)(i % 7);
        a->failures += tn_pg_allreduce(pg, ar, k == 0 ? TN_REDUCE_MIN : TN_REDUCE_SUM) < 0;
        for (int i = 0; i < n; i++) {
            double want = k == 0 ? 99 : 0;
            for (int r = 0; r < P; r++) {
                double xr = k == 0 ? (i % 5 == 0 ? 0 : (double)((i * 7 + r * 3) % 11) - 5)
                                  : (i % 1000) * 0.013 + r * 0.37 + 1e-3 * (i % 7);
                want = k == 0 ? fmin(want, xr) : want + xr;
            }
            if (fabs(v[i] - want) > 1e-4 * (1 + fabs(want))) {
                print_message("allreduce %d [%d]: %g != %g\n", k, i, v[i], want);
                a->failures++;
                break;
            }
        }
        a->res[6 + k] = ar;
    }
    tn_pg_free(pg);
    return NULL;
}

static void shm_run(int P, bool shm, struct shm_rank *a)
{
    if (!shm)
        setenv("TN_PG_NO_SHM", "1", 1);
    struct tn_store *store = tn_store_hash_new();
    pthread_t th[4];
    for (int r = 0; r < P; r++) {
        a[r] = (struct shm_rank){store, r, P, shm, 0, {NULL}};
        pthread_create(&th[r], NULL, shm_main, &a[r]);
    }
    for (int r = 0; r < P; r++) {
        pthread_join(th[r], NULL);
        assert_int_equal(a[r].failures, 0);
    }
    tn_store_release(store);
    unsetenv("TN_PG_NO_SHM");
}

/* Broadcast, allgather, reduce_scatter and allreduce large enough for the
 * shared-memory paths, then the same through the sockets (TN_PG_NO_SHM=1):
 * both right, and the same bits; and the async forms of reduce, gather, scatter,
 * reduce_scatter, all_to_all, send and recv, queued in order. */
static void test_shm_collectives(void **state)
{
    (void)state;
    for (int P = 2; P <= 3; P++) {
        struct shm_rank on[4], off[4];
        shm_run(P, true, on);
        shm_run(P, false, off);
        for (int r = 0; r < P; r++)
            for (int k = 0; k < SHM_RESULTS; k++) {
                if (!on[r].res[k])
                    continue;
                assert_int_equal(tn_nbytes(on[r].res[k]), tn_nbytes(off[r].res[k]));
                assert_memory_equal(tn_data(on[r].res[k]), tn_data(off[r].res[k]),
                                    tn_nbytes(on[r].res[k]));
                tn_release(on[r].res[k]);
                tn_release(off[r].res[k]);
            }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_ranks),
        cmocka_unit_test(test_three_ranks),
        cmocka_unit_test(test_four_ranks),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_async),
        cmocka_unit_test(test_wait_clock_step),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_timeout_shm),
        cmocka_unit_test(test_shm_collectives),
    };
    return TN_RUN_TESTS(tests);
}
