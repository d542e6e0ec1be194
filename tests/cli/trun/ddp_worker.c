/*
 * ddp_worker: data-parallel training through autograd for trun's tests.
 * A two-layer model (x W1 + b1, tanh, W2 + b2, mean squared error) in
 * float64; every rank computes the gradients of the whole batch in one
 * process (the reference), then the model's own gradients on its share of
 * the batch with tn_ddp (small buckets, so several allreduces start from
 * autograd's post-accumulate-grad hooks while backward runs) followed by
 * one tn_ddp_finish: they must equal the reference (and backward must
 * have marked every gradient ready itself). Two steps of SGD follow
 * on both, and the parameters must stay equal. Prints "rank R ddp ok".
 */
#include <tensor/tensor.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH = 12, IN = 4, HID = 6, OUT = 3, NPARAM = 4 };

static int fail(const char *what)
{
    fprintf(stderr, "ddp_worker: %s: %s\n", what, tn_last_error());
    return 1;
}

static struct tn_tensor *filled(int64_t rows, int64_t cols, int seed)
{
    struct tn_tensor *t = cols ? tn_empty(TN_SHAPE(rows, cols), TN_FLOAT64)
                               : tn_empty(TN_SHAPE(rows), TN_FLOAT64);
    double *d = tn_data(t);
    for (int64_t i = 0; i < tn_numel(t); i++)
        d[i] = sin((double)(i + 1) * 0.37 * seed) * 0.5;
    return t;
}

/* The mean squared error of the model on rows [lo, hi) of the batch. */
static struct tn_tensor *loss(struct tn_tensor *const *p, int lo, int hi)
{
    struct tn_tensor *x = filled(BATCH, IN, 11), *y = filled(BATCH, OUT, 13);
    struct tn_tensor *xs = tn_empty(TN_SHAPE(hi - lo, IN), TN_FLOAT64);
    struct tn_tensor *ys = tn_empty(TN_SHAPE(hi - lo, OUT), TN_FLOAT64);
    memcpy(tn_data(xs), (double *)tn_data(x) + lo * IN, tn_nbytes(xs));
    memcpy(tn_data(ys), (double *)tn_data(y) + lo * OUT, tn_nbytes(ys));
    struct tn_tensor *h1 = tn_mm(xs, p[0]), *h2 = tn_add(h1, p[1], tn_float(1));
    struct tn_tensor *h3 = tn_tanh(h2), *o1 = tn_mm(h3, p[2]), *o2 = tn_add(o1, p[3], tn_float(1));
    struct tn_tensor *d = tn_sub(o2, ys, tn_float(1)), *sq = tn_mul(d, d);
    struct tn_tensor *l = tn_mean(sq, TN_DTYPE_UNSET);
    struct tn_tensor *tmp[] = {x, y, xs, ys, h1, h2, h3, o1, o2, d, sq};
    for (size_t i = 0; i < sizeof tmp / sizeof tmp[0]; i++)
        tn_release(tmp[i]);
    return l;
}

static void make_params(struct tn_tensor **p)
{
    p[0] = filled(IN, HID, 3);
    p[1] = filled(HID, 0, 5);
    p[2] = filled(HID, OUT, 7);
    p[3] = filled(OUT, 0, 9);
    for (int i = 0; i < NPARAM; i++)
        tn_requires_grad_(p[i], true);
}

static void sgd(struct tn_tensor **p)
{
    for (int i = 0; i < NPARAM; i++) {
        double *w = tn_data(p[i]);
        const double *g = tn_data(p[i]->grad);
        for (int64_t k = 0; k < tn_numel(p[i]); k++)
            w[k] -= 0.1 * g[k];
        tn_release(p[i]->grad);
        p[i]->grad = NULL;
    }
}

int main(void)
{
    struct tn_dist_info info;
    if (tn_dist_init("env://", -1, -1, 60000, &info) < 0)
        return fail("tn_dist_init");
    struct tn_pg *pg = tn_pg_new_tcp(info.store, info.rank, info.world_size, NULL, 60000);
    if (!pg)
        return fail("tn_pg_new_tcp");
    int R = info.rank, W = info.world_size;
    if (BATCH % W)
        return fail("the batch does not split evenly");
    struct tn_tensor *ref[NPARAM], *p[NPARAM];
    make_params(ref);
    make_params(p);
    struct tn_ddp *ddp = tn_ddp_new(pg, p, NPARAM, 64);
    if (!ddp)
        return fail("tn_ddp_new");
    if (tn_ddp_num_buckets(ddp) < 3)
        return fail("expected several buckets");
    for (int step = 0; step < 2; step++) {
        struct tn_tensor *lr = loss(ref, 0, BATCH), *lp = loss(p, R * BATCH / W, (R + 1) * BATCH / W);
        if (!lr || !lp || tn_backward(&lr, 1, NULL, false, false) < 0 ||
            tn_backward(&lp, 1, NULL, false, false) < 0)
            return fail("backward");
        /* backward's hooks marked every gradient ready (and started the
         * buckets): marking one again is refused */
        for (int i = 0; i < NPARAM; i++)
            if (tn_ddp_grad_ready(ddp, (size_t)i) != TN_EINVAL) {
                fprintf(stderr, "ddp_worker: parameter %d was not marked ready by backward\n", i);
                return 1;
            }
        if (tn_ddp_finish(ddp) < 0)
            return fail("tn_ddp_finish");
        for (int i = 0; i < NPARAM; i++) {
            const double *a = tn_data(ref[i]->grad), *b = tn_data(p[i]->grad);
            for (int64_t k = 0; k < tn_numel(p[i]); k++)
                if (fabs(a[k] - b[k]) > 1e-12 * (1 + fabs(a[k]))) {
                    fprintf(stderr, "rank %d step %d: parameter %d [%lld]: %.17g != %.17g\n", R,
                            step, i, (long long)k, b[k], a[k]);
                    return 1;
                }
        }
        sgd(ref);
        sgd(p);
        tn_release(lr);
        tn_release(lp);
    }
    printf("rank %d ddp ok\n", R);
    tn_ddp_free(ddp);
    for (int i = 0; i < NPARAM; i++) {
        tn_release(ref[i]);
        tn_release(p[i]);
    }
    tn_pg_free(pg);
    tn_dist_finish(&info);
    return 0;
}
