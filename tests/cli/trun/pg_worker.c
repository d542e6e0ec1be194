/*
 * pg_worker: a tensorkit worker for trun's tests: tn_dist_init("env://")
 * through trun's store, the tcp process group, an allreduce of every real
 * dtype, a large float32 average and a barrier. Prints "rank R of W ok"
 * and exits 0, or names what failed and exits 1.
 *
 * `pg_worker hang`: the last rank sleeps instead of joining an allreduce
 * that times out after a second; every other rank prints
 * "rank R: <the error>", waits until all of them printed (through the
 * store), and exits 1.
 */
#include <tensor/tensor.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fail(const char *what)
{
    fprintf(stderr, "pg_worker: %s: %s\n", what, tn_last_error());
    return 1;
}

static int hang(struct tn_dist_info *info, struct tn_pg *pg)
{
    int W = info->world_size;
    if (info->rank == W - 1) {
        sleep(60); /* trun stops this rank when another one fails */
        return 0;
    }
    struct tn_tensor *t = tn_zeros(TN_SHAPE(16), TN_FLOAT32);
    if (!t)
        return fail("making the input");
    if (tn_pg_allreduce(pg, t, TN_REDUCE_SUM) == 0) {
        fprintf(stderr, "pg_worker: rank %d: the allreduce did not fail\n", info->rank);
        return 2;
    }
    printf("rank %d: %s\n", info->rank, tn_last_error());
    fflush(stdout);
    int64_t done = 0;
    const char *all = "hang/all";
    if (tn_store_add(info->store, "hang/done", 1, &done) < 0 ||
        (done == W - 1 && tn_store_set(info->store, all, "1", 1) < 0) ||
        tn_store_wait(info->store, &all, 1, 30000) < 0)
        return fail("waiting for the others");
    return 1;
}

int main(int argc, char **argv)
{
    bool hanging = argc > 1 && !strcmp(argv[1], "hang");
    struct tn_dist_info info;
    if (tn_dist_init("env://", -1, -1, 60000, &info) < 0)
        return fail("tn_dist_init");
    /* tn_pg_new advertises the address this host reaches the store from,
     * so the workers of namespace hosts (trun_hosts.bats) reach each other */
    struct tn_pg *pg = tn_pg_new("tcp", info.store, info.rank, info.world_size,
                                 hanging ? 1000 : 60000);
    if (!pg)
        return fail("tn_pg_new");
    if (hanging)
        return hang(&info, pg);
    static const enum tn_dtype dts[] = {TN_FLOAT32, TN_FLOAT64, TN_FLOAT16, TN_BFLOAT16,
                                        TN_INT64,   TN_INT32,   TN_INT16,   TN_INT8,  TN_UINT8};
    int W = info.world_size;
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        /* rank + 1 everywhere; the sum is W(W+1)/2, converted by tn_copy_ */
        struct tn_tensor *f = tn_full(TN_SHAPE(1000), tn_float(info.rank + 1), TN_FLOAT64);
        struct tn_tensor *t = tn_empty(TN_SHAPE(1000), dts[d]);
        if (!f || !t || tn_copy_(t, f) < 0)
            return fail("making the input");
        if (tn_pg_allreduce(pg, t, TN_REDUCE_SUM) < 0)
            return fail("allreduce");
        struct tn_tensor *back = tn_empty(TN_SHAPE(1000), TN_FLOAT64);
        if (!back || tn_copy_(back, t) < 0)
            return fail("reading the result");
        const double *v = tn_data(back);
        for (int i = 0; i < 1000; i++)
            if (v[i] != W * (W + 1) / 2.0) {
                fprintf(stderr, "pg_worker: rank %d: %s allreduce gave %g at %d, not %g\n",
                        info.rank, tn_dtype_name(dts[d]), v[i], i, W * (W + 1) / 2.0);
                return 1;
            }
        tn_release(f);
        tn_release(t);
        tn_release(back);
    }
    {
        /* large enough for the ring through shared memory between the
         * worker processes (cross-memory attach), when the system allows */
        int64_t n = 300001;
        struct tn_tensor *t = tn_full(TN_SHAPE(n), tn_float(info.rank + 1), TN_FLOAT32);
        if (!t || tn_pg_allreduce(pg, t, TN_REDUCE_AVG) < 0)
            return fail("large allreduce");
        const float *v = tn_data(t);
        for (int64_t i = 0; i < n; i++)
            if (v[i] != (W + 1) / 2.0f) {
                fprintf(stderr, "pg_worker: rank %d: large allreduce gave %g at %lld, not %g\n",
                        info.rank, v[i], (long long)i, (W + 1) / 2.0);
                return 1;
            }
        tn_release(t);
    }
    if (tn_pg_barrier(pg) < 0)
        return fail("barrier");
    printf("rank %d of %d ok\n", info.rank, W);
    tn_pg_free(pg);
    tn_dist_finish(&info);
    return 0;
}
