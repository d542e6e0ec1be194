/*
 * lib/dist/ddp.c: the data-parallel helper (DistributedDataParallel's
 * reducer). Parameters are broadcast from rank 0 at creation, then put in
 * buckets of about 25 MiB in reverse order (the order backward produces
 * their gradients), one dtype per bucket. When every gradient of a bucket
 * is ready, the bucket is packed into one flat tensor and averaged across
 * ranks by an async allreduce, so communication overlaps whatever computes
 * the remaining gradients; buckets start strictly in bucket order so every
 * rank issues the same sequence of collectives. Finishing waits for every
 * bucket and copies the averages back into the gradients.
 *
 * Parameters that require grad get a post-accumulate-grad hook (autograd),
 * which marks each gradient ready the moment backward accumulated it, so
 * tn_backward itself starts the buckets' allreduces, last layers first, as
 * DistributedDataParallel's reducer does.
 */
#include "dist/internal.h"

#include <tensor/autograd.h>

#include <stdio.h>

#define DEFAULT_BUCKET (25u << 20)

struct bucket {
    enum tn_dtype dtype;
    size_t first, count; /* order[first .. first + count) */
    int64_t numel;
    size_t ready;
    struct tn_tensor *flat; /* while its allreduce runs */
    struct tn_work *work;
};

struct hook_ctx {
    struct tn_ddp *d;
    size_t i;
};

struct tn_ddp {
    struct tn_pg *pg;
    struct tn_tensor **params; /* references */
    size_t n;
    size_t *order;     /* parameter indices, bucket by bucket */
    size_t *bucket_of; /* parameter -> bucket */
    bool *is_ready;
    struct bucket *buckets;
    size_t nbuckets, next_launch;
    int64_t *hooks;  /* per parameter: its post-accumulate hook, or 0 */
    struct hook_ctx *hctx; /* per parameter: what its hook gets back */
    int hook_status; /* the first failure inside a hook, for finish */
    char hook_msg[512];
};

/* Waits for and frees any bucket still in flight, removes the grad hooks,
 * releases the parameters and frees d.  NULL: no-op. */
void tn_ddp_free(struct tn_ddp *d)
{
    if (!d)
        return;
    for (size_t b = 0; b < d->nbuckets; b++) {
        tn_work_free(d->buckets[b].work);
        tn_release(d->buckets[b].flat);
    }
    for (size_t i = 0; i < d->n; i++) {
        if (d->hooks && d->hooks[i] > 0)
            tn_remove_hook(d->hooks[i]);
        tn_release(d->params[i]);
    }
    free(d->hooks);
    free(d->hctx);
    free(d->params);
    free(d->order);
    free(d->bucket_of);
    free(d->is_ready);
    free(d->buckets);
    free(d);
}

/* The autograd hook: leaf's gradient is final for this backward. A
 * failure to start a bucket is kept for tn_ddp_finish rather than stopping
 * backward, so every rank still reaches the same collectives. */
static int grad_hook(struct tn_tensor *leaf, void *ctx)
{
    const struct hook_ctx *h = ctx;
    struct tn_ddp *d = h->d;
    (void)leaf;
    if (!d->is_ready[h->i]) {
        int rc = tn_ddp_grad_ready(d, h->i);
        if (rc < 0 && d->hook_status == 0) {
            d->hook_status = rc;
            snprintf(d->hook_msg, sizeof d->hook_msg, "%s", tn_last_error());
        }
    }
    return 0;
}

/* Contract in tensor/dist.h: retains params (contiguous floating CPU
 * tensors), broadcasts them from rank 0 (a collective on pg, borrowed for
 * d's life), puts them in buckets of bucket_bytes (0: 25 MiB) in reverse
 * order, one dtype each, and hooks each leaf's grad accumulation.  A new
 * reducer for tn_ddp_free; NULL with an error naming the parameter. */
struct tn_ddp *tn_ddp_new(struct tn_pg *pg, struct tn_tensor *const *params, size_t n,
                          size_t bucket_bytes)
{
    if (!pg || (!params && n)) {
        tn_set_error(TN_EINVAL, "ddp: the process group or the parameters are NULL");
        return NULL;
    }
    if (bucket_bytes == 0)
        bucket_bytes = DEFAULT_BUCKET;
    for (size_t i = 0; i < n; i++) {
        const struct tn_tensor *p = params[i];
        if (!p || p->device.type != TN_DEVICE_CPU || !tn_is_contiguous(p)) {
            tn_set_error(TN_EINVAL, "ddp: parameter %zu must be a contiguous CPU tensor", i);
            return NULL;
        }
        if (!tn_dtype_is_floating(p->dtype) && !tn_dtype_is_complex(p->dtype)) {
            tn_set_error(TN_EDTYPE, "ddp: parameter %zu is %s; gradients are averaged, so "
                                    "parameters must be floating point", i,
                         tn_dtype_name(p->dtype));
            return NULL;
        }
    }
    struct tn_ddp *d = calloc(1, sizeof *d);
    if (!d || !(d->params = calloc(n + 1, sizeof *d->params)) ||
        !(d->order = calloc(n + 1, sizeof *d->order)) ||
        !(d->bucket_of = calloc(n + 1, sizeof *d->bucket_of)) ||
        !(d->is_ready = calloc(n + 1, sizeof *d->is_ready)) ||
        !(d->buckets = calloc(n + 1, sizeof *d->buckets)) ||
        !(d->hooks = calloc(n + 1, sizeof *d->hooks)) ||
        !(d->hctx = calloc(n + 1, sizeof *d->hctx))) {
        tn_ddp_free(d);
        tn_set_error(TN_ENOMEM, "ddp: out of memory");
        return NULL;
    }
    d->pg = pg;
    for (size_t i = 0; i < n; i++) {
        d->params[i] = tn_retain(params[i]);
        d->n++;
    }
    /* every rank starts from rank 0's parameters */
    for (size_t i = 0; i < n; i++)
        if (tn_pg_broadcast(pg, d->params[i], 0) < 0) {
            tn_ddp_free(d);
            return NULL;
        }
    /* buckets in reverse order, a new one at a dtype change or when full */
    size_t bytes = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = n - 1 - k;
        const struct tn_tensor *p = d->params[i];
        struct bucket *cur = d->nbuckets ? &d->buckets[d->nbuckets - 1] : NULL;
        if (!cur || cur->dtype != p->dtype || bytes + tn_nbytes(p) > bucket_bytes) {
            cur = &d->buckets[d->nbuckets++];
            cur->dtype = p->dtype;
            cur->first = k;
            bytes = 0;
        }
        d->order[k] = i;
        d->bucket_of[i] = d->nbuckets - 1;
        cur->count++;
        cur->numel += tn_numel(p);
        bytes += tn_nbytes(p);
    }
    for (size_t i = 0; i < n; i++) {
        if (!d->params[i]->requires_grad)
            continue;
        d->hctx[i] = (struct hook_ctx){d, i};
        d->hooks[i] = tn_register_post_accumulate_grad_hook(d->params[i], grad_hook, &d->hctx[i]);
        if (d->hooks[i] < 0) {
            d->hooks[i] = 0;
            tn_ddp_free(d);
            return NULL;
        }
    }
    return d;
}

/* The number of buckets (0 for NULL). */
size_t tn_ddp_num_buckets(const struct tn_ddp *d)
{
    return d ? d->nbuckets : 0;
}

/* Packs bucket b's gradients (zeros for a missing one) and starts its
 * averaging allreduce. */
static int launch(struct tn_ddp *d, struct bucket *b)
{
    b->flat = tn_empty(TN_SHAPE(b->numel), b->dtype);
    if (!b->flat)
        return tn_last_status();
    char *o = tn_data(b->flat);
    for (size_t k = b->first; k < b->first + b->count; k++) {
        const struct tn_tensor *p = d->params[d->order[k]];
        size_t nb = tn_nbytes(p);
        if (p->grad)
            memcpy(o, tn_data(p->grad), nb);
        else
            memset(o, 0, nb);
        o += nb;
    }
    b->work = tn_pg_allreduce_async(d->pg, b->flat, TN_REDUCE_AVG);
    return b->work ? 0 : tn_last_status();
}

/* Contract in tensor/dist.h: parameter i's grad (contiguous CPU, its dtype
 * and size, or none: zeros) is final; every full bucket next in order is
 * packed and its averaging allreduce started.  0, or TN_EINDEX/TN_EINVAL
 * (twice in one iteration, a bad grad) or the collective's error. */
int tn_ddp_grad_ready(struct tn_ddp *d, size_t i)
{
    if (!d || i >= d->n)
        return tn_set_error(TN_EINDEX, "ddp: no parameter %zu", i);
    if (d->is_ready[i])
        return tn_set_error(TN_EINVAL, "ddp: parameter %zu's gradient was already marked ready "
                                       "in this iteration", i);
    const struct tn_tensor *p = d->params[i], *g = p->grad;
    if (g && (g->dtype != p->dtype || tn_numel(g) != tn_numel(p) || !tn_is_contiguous(g) ||
              g->device.type != TN_DEVICE_CPU))
        return tn_set_error(TN_EINVAL, "ddp: parameter %zu's gradient must be a contiguous CPU "
                                       "tensor of its dtype and size", i);
    d->is_ready[i] = true;
    d->buckets[d->bucket_of[i]].ready++;
    /* start full buckets, in bucket order only */
    while (d->next_launch < d->nbuckets) {
        struct bucket *b = &d->buckets[d->next_launch];
        if (b->ready < b->count)
            break;
        int rc = launch(d, b);
        if (rc < 0)
            return rc;
        d->next_launch++;
    }
    return 0;
}

/* Contract in tensor/dist.h: marks every grad not yet ready, waits for
 * each bucket and copies the average back into the grads (making a missing
 * grad), then resets for the next iteration.  0, or the first failure (one
 * a hook met during backward included). */
int tn_ddp_finish(struct tn_ddp *d)
{
    if (!d)
        return tn_set_error(TN_EINVAL, "ddp: NULL");
    int rc = d->hook_status;
    if (rc < 0)
        tn_set_error(rc, "%s", d->hook_msg);
    d->hook_status = 0;
    /* a gradient never marked ready counts as ready now (reverse order) */
    for (size_t k = 0; rc == 0 && k < d->n; k++)
        if (!d->is_ready[d->order[k]])
            rc = tn_ddp_grad_ready(d, d->order[k]);
    for (size_t bi = 0; bi < d->nbuckets; bi++) {
        struct bucket *b = &d->buckets[bi];
        if (b->work && rc == 0)
            rc = tn_work_wait(b->work, -1);
        tn_work_free(b->work);
        b->work = NULL;
        const char *o = b->flat ? tn_data(b->flat) : NULL;
        for (size_t k = b->first; o && rc == 0 && k < b->first + b->count; k++) {
            struct tn_tensor *p = d->params[d->order[k]];
            if (!p->grad) {
                p->grad = tn_empty(p->sizes, p->ndim, p->dtype);
                if (!p->grad) {
                    rc = tn_last_status();
                    break;
                }
            }
            memcpy(tn_data(p->grad), o, tn_nbytes(p));
            o += tn_nbytes(p);
        }
        tn_release(b->flat);
        b->flat = NULL;
        b->ready = 0;
    }
    memset(d->is_ready, 0, d->n * sizeof *d->is_ready);
    d->next_launch = 0;
    return rc;
}

/* The whole averaging after backward: tn_ddp_finish marks every grad. */
int tn_ddp_sync_grads(struct tn_ddp *d)
{
    return tn_ddp_finish(d);
}
