/*
 * test_ddp: the data-parallel helper with 2 and 3 ranks as threads.
 * A linear model y = x.w + b (w float32[5], b float64[1], so buckets split
 * by dtype; a bucket cap of 8 bytes splits w from b even without that)
 * trained by gradient descent on mean squared error: each rank computes
 * the gradient of its shard of the batch, the helper averages it, and after
 * a few steps every rank's parameters equal single-process training on the
 * full batch. Rank 0's initial parameters win the broadcast.
 */
#include "tn_test.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 12
#define FEAT 5
#define STEPS 4
#define LR 0.05

static double xval(int i, int j)
{
    return ((i * 7 + j * 3) % 11) / 5.0 - 1.0;
}

static double yval(int i)
{
    return (i % 4) - 1.5;
}

/* Gradient of mean((x.w + b - y)^2) over rows [lo, hi). */
static void grad(const double *w, double b, int lo, int hi, double *gw, double *gb)
{
    memset(gw, 0, FEAT * sizeof *gw);
    *gb = 0;
    for (int i = lo; i < hi; i++) {
        double e = b - yval(i);
        for (int j = 0; j < FEAT; j++)
            e += xval(i, j) * w[j];
        for (int j = 0; j < FEAT; j++)
            gw[j] += 2 * e * xval(i, j) / (hi - lo);
        *gb += 2 * e / (hi - lo);
    }
}

struct rank {
    struct tn_store *store;
    int rank, size;
    int failures;
    size_t buckets;
    double w[FEAT], b;
};

static void *rank_main(void *p)
{
    struct rank *a = p;
    struct tn_pg *pg = tn_pg_new_tcp(a->store, a->rank, a->size, "127.0.0.1", 20000);
    if (!pg) {
        a->failures = 1000;
        return NULL;
    }
    /* different starting points; rank 0's must win */
    struct tn_tensor *w = tn_full(TN_SHAPE(FEAT), tn_float(a->rank == 0 ? 0.25 : 9), TN_FLOAT32);
    struct tn_tensor *b = tn_full(TN_SHAPE(1), tn_float(a->rank == 0 ? -0.5 : 7), TN_FLOAT64);
    struct tn_tensor *params[2] = {w, b};
    struct tn_ddp *d = tn_ddp_new(pg, params, 2, 8);
    if (!d) {
        print_message("ddp: %s\n", tn_last_error());
        a->failures = 1000;
        return NULL;
    }
    a->buckets = tn_ddp_num_buckets(d);
    int shard = BATCH / a->size;
    for (int s = 0; s < STEPS; s++) {
        double wd[FEAT], gw[FEAT], gb;
        float *wf = tn_data(w);
        double *bd = tn_data(b);
        for (int j = 0; j < FEAT; j++)
            wd[j] = wf[j];
        grad(wd, *bd, a->rank * shard, (a->rank + 1) * shard, gw, &gb);
        /* the last step through sync_grads, the others marking b's grad
         * ready first (as backward would produce it), then w's, then
         * finish */
        if (!b->grad)
            b->grad = tn_empty(TN_SHAPE(1), TN_FLOAT64);
        if (!w->grad)
            w->grad = tn_empty(TN_SHAPE(FEAT), TN_FLOAT32);
        *(double *)tn_data(b->grad) = gb;
        for (int j = 0; j < FEAT; j++)
            ((float *)tn_data(w->grad))[j] = (float)gw[j];
        int rc;
        if (s == STEPS - 1) {
            rc = tn_ddp_sync_grads(d);
        } else {
            rc = tn_ddp_grad_ready(d, 1);
            rc = rc < 0 ? rc : tn_ddp_grad_ready(d, 0);
            rc = rc < 0 ? rc : tn_ddp_finish(d);
        }
        if (rc < 0) {
            print_message("rank %d step %d: %s\n", a->rank, s, tn_last_error());
            a->failures++;
            break;
        }
        for (int j = 0; j < FEAT; j++)
            wf[j] -= (float)(LR * ((float *)tn_data(w->grad))[j]);
        *bd -= LR * *(double *)tn_data(b->grad);
    }
    for (int j = 0; j < FEAT; j++)
        a->w[j] = ((float *)tn_data(w))[j];
    a->b = *(double *)tn_data(b);
    tn_ddp_free(d);
    tn_release(w);
    tn_release(b);
    tn_pg_free(pg);
    return NULL;
}

static void run(int P)
{
    /* single process, full batch, w rounded to float32 like the tensor (the
     * ranks also round the gradient of w to float32, hence the tolerances) */
    double w[FEAT], b = -0.5, gw[FEAT], gb;
    for (int j = 0; j < FEAT; j++)
        w[j] = 0.25;
    for (int s = 0; s < STEPS; s++) {
        grad(w, b, 0, BATCH, gw, &gb);
        for (int j = 0; j < FEAT; j++)
            w[j] = (float)(w[j] - LR * gw[j]);
        b -= LR * gb;
    }
    struct tn_store *store = tn_store_hash_new();
    pthread_t th[3];
    struct rank a[3];
    for (int r = 0; r < P; r++) {
        a[r] = (struct rank){.store = store, .rank = r, .size = P};
        pthread_create(&th[r], NULL, rank_main, &a[r]);
    }
    for (int r = 0; r < P; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < P; r++) {
        assert_int_equal(a[r].failures, 0);
        assert_int_equal(a[r].buckets, 2);
        for (int j = 0; j < FEAT; j++)
            assert_true(fabs(a[r].w[j] - w[j]) < 1e-5);
        if (!(fabs(a[r].b - b) < 1e-6))
            print_message("rank %d: b %.17g, want %.17g\n", r, a[r].b, b);
        assert_true(fabs(a[r].b - b) < 1e-6);
    }
    tn_store_release(store);
}

static void test_two_ranks(void **state)
{
    (void)state;
    run(2);
}

static void test_three_ranks(void **state)
{
    (void)state;
    run(3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_ranks),
        cmocka_unit_test(test_three_ranks),
    };
    return TN_RUN_TESTS(tests);
}
