/*
 * lib/dist/pg_async.c: async work handles. A process group gets one queue
 * thread on its first async call; async collectives run there one after
 * another, in call order, and a synchronous collective first waits until
 * the queue is empty, so every rank still issues one sequence of
 * collectives. A tn_work carries the collective's status and message back
 * to the thread that waits on it (errors are thread-local).
 */
#include "dist/internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

enum work_kind {
    W_ALLREDUCE, W_BROADCAST, W_ALLGATHER, W_BARRIER, W_REDUCE, W_GATHER, W_SCATTER,
    W_REDUCE_SCATTER, W_ALL_TO_ALL, W_SEND, W_RECV
};

static const char *const kind_names[] = {"allreduce", "broadcast",      "allgather", "barrier",
                                         "reduce",    "gather",         "scatter",
                                         "reduce_scatter", "all_to_all", "send", "recv"};

struct tn_work {
    struct tn_work *next;
    struct tn__pgq *q;
    struct tn_pg *pg;
    enum work_kind kind;
    struct tn_tensor *a, *b; /* references held until the work finished */
    int arg;                 /* root, peer or reduce op */
    int arg2;                /* reduce's root */
    bool done;
    int status;
    char msg[1024];
};

struct tn__pgq {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled when work arrives, finishes, or on stop */
    struct tn_work *head, *tail;
    int pending; /* queued or running */
    bool stop;
    pthread_t th;
};

/* The queue's thread: runs the queued work in order, each through the
 * blocking collective, until tn__pgq_free stops it. */
static void *queue_main(void *p)
{
    struct tn__pgq *q = p;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->head && !q->stop)
            pthread_cond_wait(&q->cv, &q->mu);
        if (!q->head)
            break;
        struct tn_work *w = q->head;
        q->head = w->next;
        if (!q->head)
            q->tail = NULL;
        pthread_mutex_unlock(&q->mu);
        int rc = 0;
        switch (w->kind) {
        case W_ALLREDUCE: rc = tn_pg_allreduce(w->pg, w->a, (enum tn_reduce_op)w->arg); break;
        case W_BROADCAST: rc = tn_pg_broadcast(w->pg, w->a, w->arg); break;
        case W_ALLGATHER: rc = tn_pg_allgather(w->pg, w->a, w->b); break;
        case W_BARRIER: rc = tn_pg_barrier(w->pg); break;
        case W_REDUCE: rc = tn_pg_reduce(w->pg, w->a, (enum tn_reduce_op)w->arg, w->arg2); break;
        case W_GATHER: rc = tn_pg_gather(w->pg, w->a, w->b, w->arg); break;
        case W_SCATTER: rc = tn_pg_scatter(w->pg, w->a, w->b, w->arg); break;
        case W_REDUCE_SCATTER:
            rc = tn_pg_reduce_scatter(w->pg, w->a, w->b, (enum tn_reduce_op)w->arg);
            break;
        case W_ALL_TO_ALL: rc = tn_pg_all_to_all(w->pg, w->a, w->b); break;
        case W_SEND: rc = tn_pg_send(w->pg, w->a, w->arg); break;
        case W_RECV: rc = tn_pg_recv(w->pg, w->a, w->arg); break;
        }
        pthread_mutex_lock(&q->mu);
        w->status = rc;
        if (rc < 0)
            snprintf(w->msg, sizeof w->msg, "%s", tn_last_error());
        w->done = true;
        q->pending--;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* Contract in internal.h: blocks until every queued collective finished
 * (a no-op for NULL or on the queue's own thread, which would deadlock).
 * q->th is set before any work is queued, and queuing takes q->mu. */
void tn__pgq_drain(struct tn__pgq *q)
{
    if (!q || pthread_equal(pthread_self(), q->th))
        return;
    pthread_mutex_lock(&q->mu);
    while (q->pending > 0)
        pthread_cond_wait(&q->cv, &q->mu);
    pthread_mutex_unlock(&q->mu);
}

/* Contract in internal.h: drains q, stops and joins its thread, frees it.
 * Works still held by the caller must not be used after.  NULL: no-op. */
void tn__pgq_free(struct tn__pgq *q)
{
    if (!q)
        return;
    tn__pgq_drain(q);
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->th, NULL);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* Queues a collective; NULL with the error set when it cannot. */
static struct tn_work *submit(struct tn_pg *pg, enum work_kind kind, struct tn_tensor *a,
                              const struct tn_tensor *b, int arg, int arg2)
{
    if (!pg) {
        tn_set_error(TN_EINVAL, "%s: the process group is NULL", kind_names[kind]);
        return NULL;
    }
    struct tn__pgq **slot = tn__pg_queue(pg);
    if (!*slot) {
        struct tn__pgq *q = calloc(1, sizeof *q);
        if (!q) {
            tn_set_error(TN_ENOMEM, "%s: out of memory", kind_names[kind]);
            return NULL;
        }
        pthread_mutex_init(&q->mu, NULL);
        /* tn_work_wait's deadlines are on CLOCK_MONOTONIC: a step of the
         * wall clock neither ends a wait early nor stretches it */
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&q->cv, &ca);
        pthread_condattr_destroy(&ca);
        if (pthread_create(&q->th, NULL, queue_main, q) != 0) {
            pthread_cond_destroy(&q->cv);
            pthread_mutex_destroy(&q->mu);
            free(q);
            tn_set_error(TN_ENOMEM, "%s: cannot start the process group's thread",
                         kind_names[kind]);
            return NULL;
        }
        *slot = q;
    }
    struct tn_work *w = calloc(1, sizeof *w);
    if (!w) {
        tn_set_error(TN_ENOMEM, "%s: out of memory", kind_names[kind]);
        return NULL;
    }
    w->q = *slot;
    w->pg = pg;
    w->kind = kind;
    w->arg = arg;
    w->arg2 = arg2;
    if (a)
        w->a = tn_retain(a);
    if (b)
        w->b = tn_retain((struct tn_tensor *)b);
    struct tn__pgq *q = w->q;
    pthread_mutex_lock(&q->mu);
    if (q->tail)
        q->tail->next = w;
    else
        q->head = w;
    q->tail = w;
    q->pending++;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return w;
}

/* The async collectives (contracts in tensor/dist.h): each queues the
 * synchronous tn_pg_* of the same name on pg's thread (started on first
 * use), in call order, retaining its tensors until it finished; arguments
 * are checked when it runs and a failure shows at tn_work_wait.  A new
 * work for tn_work_free; NULL with TN_EINVAL (NULL pg) or TN_ENOMEM. */
struct tn_work *tn_pg_allreduce_async(struct tn_pg *pg, struct tn_tensor *t, enum tn_reduce_op op)
{
    return submit(pg, W_ALLREDUCE, t, NULL, (int)op, 0);
}

/* tn_pg_broadcast queued. */
struct tn_work *tn_pg_broadcast_async(struct tn_pg *pg, struct tn_tensor *t, int root)
{
    return submit(pg, W_BROADCAST, t, NULL, root, 0);
}

/* tn_pg_allgather queued. */
struct tn_work *tn_pg_allgather_async(struct tn_pg *pg, struct tn_tensor *out,
                                      const struct tn_tensor *in)
{
    return submit(pg, W_ALLGATHER, out, in, 0, 0);
}

/* tn_pg_barrier queued. */
struct tn_work *tn_pg_barrier_async(struct tn_pg *pg)
{
    return submit(pg, W_BARRIER, NULL, NULL, 0, 0);
}

/* tn_pg_reduce queued. */
struct tn_work *tn_pg_reduce_async(struct tn_pg *pg, struct tn_tensor *t, enum tn_reduce_op op,
                                   int root)
{
    return submit(pg, W_REDUCE, t, NULL, (int)op, root);
}

/* tn_pg_gather queued. */
struct tn_work *tn_pg_gather_async(struct tn_pg *pg, struct tn_tensor *out,
                                   const struct tn_tensor *in, int root)
{
    return submit(pg, W_GATHER, out, in, root, 0);
}

/* tn_pg_scatter queued. */
struct tn_work *tn_pg_scatter_async(struct tn_pg *pg, struct tn_tensor *out,
                                    const struct tn_tensor *in, int root)
{
    return submit(pg, W_SCATTER, out, in, root, 0);
}

/* tn_pg_reduce_scatter queued. */
struct tn_work *tn_pg_reduce_scatter_async(struct tn_pg *pg, struct tn_tensor *out,
                                           const struct tn_tensor *in, enum tn_reduce_op op)
{
    return submit(pg, W_REDUCE_SCATTER, out, in, (int)op, 0);
}

/* tn_pg_all_to_all queued. */
struct tn_work *tn_pg_all_to_all_async(struct tn_pg *pg, struct tn_tensor *out,
                                       const struct tn_tensor *in)
{
    return submit(pg, W_ALL_TO_ALL, out, in, 0, 0);
}

/* tn_pg_send queued. */
struct tn_work *tn_pg_send_async(struct tn_pg *pg, struct tn_tensor *t, int dst)
{
    return submit(pg, W_SEND, t, NULL, dst, 0);
}

/* tn_pg_recv queued. */
struct tn_work *tn_pg_recv_async(struct tn_pg *pg, struct tn_tensor *t, int src)
{
    return submit(pg, W_RECV, t, NULL, src, 0);
}

/* True once w's collective finished, successfully or not (NULL: true). */
bool tn_work_is_completed(struct tn_work *w)
{
    if (!w)
        return true;
    pthread_mutex_lock(&w->q->mu);
    bool d = w->done;
    pthread_mutex_unlock(&w->q->mu);
    return d;
}

/* Contract in tensor/dist.h: the collective's status with its message as
 * this thread's error; TN_ETIMEOUT when timeout_ms (>= 0) passed first
 * (the collective goes on), TN_EINVAL for NULL. */
int tn_work_wait(struct tn_work *w, int64_t timeout_ms)
{
    if (!w)
        return tn_set_error(TN_EINVAL, "wait: the work is NULL");
    struct tn__pgq *q = w->q;
    struct timespec until;
    if (timeout_ms >= 0) {
        clock_gettime(CLOCK_MONOTONIC, &until); /* the condvar's clock */
        until.tv_sec += (time_t)(timeout_ms / 1000);
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&q->mu);
    while (!w->done) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&q->cv, &q->mu);
        } else if (pthread_cond_timedwait(&q->cv, &q->mu, &until) == ETIMEDOUT && !w->done) {
            pthread_mutex_unlock(&q->mu);
            return tn_set_error(TN_ETIMEOUT, "wait: the %s is still running after %lld ms",
                                kind_names[w->kind], (long long)timeout_ms);
        }
    }
    int rc = w->status;
    pthread_mutex_unlock(&q->mu);
    if (rc < 0)
        return tn_set_error(rc, "%s", w->msg);
    return 0;
}

/* Waits for the collective, releases its tensors and frees w.  NULL: no-op. */
void tn_work_free(struct tn_work *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->q->mu);
    while (!w->done)
        pthread_cond_wait(&w->q->cv, &w->q->mu);
    pthread_mutex_unlock(&w->q->mu);
    if (w->a)
        tn_release(w->a);
    if (w->b)
        tn_release(w->b);
    free(w);
}
