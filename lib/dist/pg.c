/*
 * lib/dist/pg.c: the process group every backend shares: the public
 * collectives (numbering each, refusing it on a broken group, checking its
 * tensors and arguments) handed to the group's backend through its table
 * (struct tn__pg_backend: pg_tcp.c, pg_mpi.c, pg_nccl.c), the agreement of
 * all ranks on one failure through the store, and tn_pg_new's backend names.
 */
#include "dist/internal.h"

#include <stdio.h>
#include <time.h>

/* Contract in internal.h: the slot holding pg's async queue (NULL until the
 * first async call), borrowed; pg_async.c fills and frees it. */
struct tn__pgq **tn__pg_queue(struct tn_pg *pg)
{
    return &pg->queue;
}

/* This process's rank in pg, 0..size-1. */
int tn_pg_rank(const struct tn_pg *pg)
{
    return pg->rank;
}

/* The number of ranks in pg. */
int tn_pg_size(const struct tn_pg *pg)
{
    return pg->size;
}

/* Starts collective `op`: the next sequence number, or the agreed failure
 * again once the group is broken. */
static int begin(struct tn_pg *pg, const char *op)
{
    tn__pgq_drain(pg->queue); /* async work issued before runs first */
    pg->op = op;
    pg->seq++;
    if (pg->verdict)
        return tn_set_error(pg->verdict_status, "%s #%llu: the process group is broken: %s", op,
                            (unsigned long long)pg->seq, pg->verdict);
    return 0;
}

/* Sleeps ms milliseconds. */
static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A collective failed on this rank (a peer timed out or closed). So that
 * every rank fails the same way: let the backend shut its connections
 * (peers still waiting in the collective see it at once), mark this rank as arrived at it in the
 * store, give the others up to a second to do the same, then the first
 * rank to write the verdict names the ranks that never arrived, and every
 * rank returns that verdict. The group is broken afterwards. */
static int agree_failure(struct tn_pg *pg, int status)
{
    char first[400];
    snprintf(first, sizeof first, "%s", tn_last_error());
    if (pg->be->abort)
        pg->be->abort(pg);
    if (!pg->store) { /* nobody to agree with: this rank's view is the verdict */
        free(pg->verdict);
        pg->verdict = strdup(first);
        pg->verdict_status = status;
        return tn_set_error(status, "%s", first);
    }
    unsigned long long seq = (unsigned long long)pg->seq;
    char key[96], vkey[96];
    snprintf(vkey, sizeof vkey, "tcp_pg/failed/%llu/verdict", seq);
    snprintf(key, sizeof key, "tcp_pg/failed/%llu/arrived/%d", seq, pg->rank);
    const char *vk = vkey;
    if (tn_store_set(pg->store, key, "1", 1) < 0)
        return tn_set_error(status, "%s (and the store failed too)", first);
    /* a rank that only saw a peer close waits longer, so the verdict is
     * normally written by a rank that saw the cause */
    int64_t grace = pg->timeout_ms < 1000 ? pg->timeout_ms : 1000;
    if (status != TN_ETIMEOUT)
        grace *= 2;
    int64_t deadline = tn__now_ms() + grace;
    size_t cap = (size_t)pg->size * 12 + 64, len = 0;
    char *missing = malloc(cap);
    if (!missing)
        return tn_set_error(TN_ENOMEM, "%s (out of memory agreeing on it)", first);
    for (;;) {
        if (tn_store_check(pg->store, &vk, 1) == 1)
            break; /* another rank decided */
        len = 0;
        missing[0] = 0;
        for (int r = 0; r < pg->size; r++) {
            snprintf(key, sizeof key, "tcp_pg/failed/%llu/arrived/%d", seq, r);
            const char *k = key;
            if (tn_store_check(pg->store, &k, 1) != 1)
                len += (size_t)snprintf(missing + len, cap - len, "%s%d", len ? ", " : "", r);
        }
        if (len == 0 || tn__now_ms() >= deadline)
            break;
        nap_ms(10);
    }
    char msg[1024];
    if (len) {
        status = TN_ETIMEOUT; /* whatever this rank saw, the cause is a wait */
        snprintf(msg, sizeof msg, "%d %s #%llu failed: rank%s %s never arrived (rank %d saw: %s)",
                 (int)status, pg->op, seq, strchr(missing, ',') ? "s" : "", missing, pg->rank,
                 first);
    } else {
        snprintf(msg, sizeof msg, "%d %s #%llu failed on every rank (rank %d saw: %s)",
                 (int)status, pg->op, seq, pg->rank, first);
    }
    free(missing);
    void *v = NULL;
    size_t vl = 0;
    if (tn_store_compare_set(pg->store, vkey, "", 0, msg, strlen(msg), &v, &vl) < 0)
        return tn_set_error(status, "%s (and the store failed too)", first);
    char *text = strchr(v, ' ');
    int agreed = atoi(v);
    free(pg->verdict);
    pg->verdict = strdup(text ? text + 1 : (char *)v);
    pg->verdict_status = agreed < 0 ? agreed : status;
    free(v);
    if (!pg->verdict)
        return tn_set_error(TN_ENOMEM, "%s", first);
    return tn_set_error(pg->verdict_status, "%s", pg->verdict);
}

/* 0 when t is non-NULL, on the backend's device and contiguous, else
 * TN_EINVAL or TN_EDEVICE naming the collective. */
static int check_tensor(struct tn_pg *pg, const struct tn_tensor *t)
{
    if (!t)
        return tn_set_error(TN_EINVAL, "%s: the tensor is NULL", pg->op);
    enum tn_device_type want = pg->be->device;
    if (t->device.type != want)
        return tn_set_error(TN_EDEVICE, "%s: the %s backend takes %s tensors", pg->op,
                            pg->be->name, want == TN_DEVICE_CPU ? "CPU" : "CUDA");
    if (!tn_is_contiguous(t))
        return tn_set_error(TN_EINVAL, "%s: Tensors must be contiguous", pg->op);
    return 0;
}

/* Whether op reduces dt (AVG needs floating point; complex has no order). */
static int check_op(struct tn_pg *pg, enum tn_dtype dt, enum tn_reduce_op op)
{
    if (op == TN_REDUCE_AVG && !tn_dtype_is_floating(dt) && !tn_dtype_is_complex(dt))
        return tn_set_error(TN_EDTYPE, "%s: AVG needs a floating point tensor, not %s", pg->op,
                            tn_dtype_name(dt));
    if (tn_dtype_is_complex(dt) && (op == TN_REDUCE_MIN || op == TN_REDUCE_MAX))
        return tn_set_error(TN_EDTYPE, "%s: MIN and MAX are not defined for complex", pg->op);
    return 0;
}

/* TN_ERUNTIME: the group's backend has no entry for the running collective. */
static int unsupported(struct tn_pg *pg)
{
    return tn_set_error(TN_ERUNTIME, "%s: the %s backend does not support it", pg->op,
                        pg->be->name);
}

/* Hands a checked collective to the group's backend. */
#define DISPATCH(fn, ...) return pg->be->fn ? pg->be->fn(pg, __VA_ARGS__) : unsupported(pg)

/* Whether a and b have one dtype and a holds times b's bytes. */
static bool same_kind(const struct tn_tensor *a, const struct tn_tensor *b, size_t times)
{
    return a->dtype == b->dtype && tn_nbytes(a) == tn_nbytes(b) * times;
}

/* The public collectives (contracts in tensor/dist.h) below share one
 * shape: begin numbers the call (the group's agreed failure again once it
 * is broken), the tensors (borrowed, updated in place) are checked to be
 * contiguous on the backend's device with the sizes and dtypes the call
 * needs, roots and peers to be ranks, then the backend's entry runs; a
 * collective the backend lacks is TN_ERUNTIME.  0, or a negative status
 * with an error naming the collective.
 *
 * ALLREDUCE: t becomes op over every rank's t. */
int tn_pg_allreduce(struct tn_pg *pg, struct tn_tensor *t, enum tn_reduce_op op)
{
    if (begin(pg, "allreduce") < 0)
        return tn_last_status();
    if (check_tensor(pg, t) < 0)
        return tn_last_status();
    if (check_op(pg, t->dtype, op) < 0)
        return tn_last_status();
    DISPATCH(allreduce, t, op);
}

/* BROADCAST: every rank's t becomes root's. */
int tn_pg_broadcast(struct tn_pg *pg, struct tn_tensor *t, int root)
{
    if (begin(pg, "broadcast") < 0)
        return tn_last_status();
    if (check_tensor(pg, t) < 0)
        return tn_last_status();
    if (root < 0 || root >= pg->size)
        return tn_set_error(TN_EINVAL, "broadcast: root %d is not a rank of a group of %d", root,
                            pg->size);
    DISPATCH(broadcast, t, root);
}

/* ALLGATHER: out (world_size times in, same dtype) gets every rank's in,
 * rank-major. */
int tn_pg_allgather(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in)
{
    if (begin(pg, "allgather") < 0)
        return tn_last_status();
    if (check_tensor(pg, in) < 0 || check_tensor(pg, out) < 0)
        return tn_last_status();
    size_t nb = tn_nbytes(in);
    if (out->dtype != in->dtype || tn_nbytes(out) != nb * (size_t)pg->size)
        return tn_set_error(TN_EINVAL,
                            "allgather: the output must hold world_size (%d) times the input's "
                            "elements of the same dtype",
                            pg->size);
    DISPATCH(allgather, out, in);
}

/* BARRIER: returns once every rank has called it. */
int tn_pg_barrier(struct tn_pg *pg)
{
    if (begin(pg, "barrier") < 0)
        return tn_last_status();
    return pg->be->barrier ? pg->be->barrier(pg) : unsupported(pg);
}

/* SEND: t to rank dst (not this rank); the matching recv takes it. */
int tn_pg_send(struct tn_pg *pg, const struct tn_tensor *t, int dst)
{
    if (begin(pg, "send") < 0)
        return tn_last_status();
    if (check_tensor(pg, t) < 0)
        return tn_last_status();
    if (dst < 0 || dst >= pg->size || dst == pg->rank)
        return tn_set_error(TN_EINVAL, "send: bad destination rank %d", dst);
    DISPATCH(send, t, dst);
}

/* RECV: t filled from rank src's matching send (src not this rank). */
int tn_pg_recv(struct tn_pg *pg, struct tn_tensor *t, int src)
{
    if (begin(pg, "recv") < 0)
        return tn_last_status();
    if (check_tensor(pg, t) < 0)
        return tn_last_status();
    if (src < 0 || src >= pg->size || src == pg->rank)
        return tn_set_error(TN_EINVAL, "recv: bad source rank %d", src);
    DISPATCH(recv, t, src);
}

/* REDUCE: root's t becomes op over every rank's t; others' t unchanged. */
int tn_pg_reduce(struct tn_pg *pg, struct tn_tensor *t, enum tn_reduce_op op, int root)
{
    if (begin(pg, "reduce") < 0)
        return tn_last_status();
    if (check_tensor(pg, t) < 0)
        return tn_last_status();
    if (root < 0 || root >= pg->size)
        return tn_set_error(TN_EINVAL, "reduce: root %d is not a rank of a group of %d", root,
                            pg->size);
    if (check_op(pg, t->dtype, op) < 0)
        return tn_last_status();
    DISPATCH(reduce, t, op, root);
}

/* GATHER: root's out (world_size inputs; unchecked and may be NULL on
 * other ranks) gets every rank's in, rank-major. */
int tn_pg_gather(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in, int root)
{
    if (begin(pg, "gather") < 0)
        return tn_last_status();
    if (check_tensor(pg, in) < 0)
        return tn_last_status();
    if (root < 0 || root >= pg->size)
        return tn_set_error(TN_EINVAL, "gather: root %d is not a rank of a group of %d", root,
                            pg->size);
    if (pg->rank == root && check_tensor(pg, out) < 0)
        return tn_last_status();
    if (pg->rank == root && !same_kind(out, in, (size_t)pg->size))
        return tn_set_error(TN_EINVAL, "gather: the output must hold world_size (%d) inputs",
                            pg->size);
    DISPATCH(gather, out, in, root);
}

/* SCATTER: each rank's out gets its block of root's in (world_size
 * outputs; unchecked and may be NULL on other ranks). */
int tn_pg_scatter(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in, int root)
{
    if (begin(pg, "scatter") < 0)
        return tn_last_status();
    if (check_tensor(pg, out) < 0)
        return tn_last_status();
    if (root < 0 || root >= pg->size)
        return tn_set_error(TN_EINVAL, "scatter: root %d is not a rank of a group of %d", root,
                            pg->size);
    if (pg->rank == root && check_tensor(pg, in) < 0)
        return tn_last_status();
    if (pg->rank == root && !same_kind(in, out, (size_t)pg->size))
        return tn_set_error(TN_EINVAL, "scatter: the input must hold world_size (%d) outputs",
                            pg->size);
    DISPATCH(scatter, out, in, root);
}

/* ALL_TO_ALL: in's block j goes to rank j; out's block j comes from rank j
 * (equal sizes, divisible by world_size). */
int tn_pg_all_to_all(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in)
{
    if (begin(pg, "all_to_all") < 0)
        return tn_last_status();
    if (check_tensor(pg, in) < 0 || check_tensor(pg, out) < 0)
        return tn_last_status();
    if (!same_kind(in, out, 1) || tn_nbytes(in) % (size_t)pg->size)
        return tn_set_error(TN_EINVAL, "all_to_all: input and output must have the same size "
                                       "and dtype, divisible by world_size (%d)", pg->size);
    DISPATCH(all_to_all, out, in);
}

/* REDUCE_SCATTER: out gets block `rank` of op over every rank's in (in
 * holds world_size outs).  A backend that asks for it (rs_by_allreduce)
 * gets an allreduce of a copy instead, named reduce_scatter in errors. */
int tn_pg_reduce_scatter(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in,
                         enum tn_reduce_op op)
{
    if (check_tensor(pg, in) < 0 || check_tensor(pg, out) < 0)
        return tn_last_status();
    if (!same_kind(in, out, (size_t)pg->size))
        return tn_set_error(TN_EINVAL, "reduce_scatter: the input must hold world_size (%d) "
                                       "outputs of the same dtype", pg->size);
    if (!pg->be->rs_by_allreduce || !pg->be->rs_by_allreduce(pg, out)) {
        if (begin(pg, "reduce_scatter") < 0 || check_op(pg, out->dtype, op) < 0)
            return tn_last_status();
        DISPATCH(reduce_scatter, out, in, op);
    }
    /* an allreduce of a copy: twice the traffic of a bare reduce-scatter,
     * but one well-tested path */
    struct tn_tensor *tmp = tn_empty(in->sizes, in->ndim, in->dtype);
    if (!tmp)
        return tn_last_status();
    memcpy(tn_data(tmp), tn_data(in), tn_nbytes(in));
    int rc = tn_pg_allreduce(pg, tmp, op);
    pg->op = "reduce_scatter";
    if (rc == 0)
        memcpy(tn_data(out), (char *)tn_data(tmp) + (size_t)pg->rank * tn_nbytes(out),
               tn_nbytes(out));
    tn_release(tmp);
    return rc;
}

/* Drains and frees the async queue, destroys the backend (telling it
 * whether the group broke, so it does not wait on peers), drops the store
 * reference and frees pg.  Every tn_work must be freed first.  NULL: no-op. */
void tn_pg_free(struct tn_pg *pg)
{
    if (!pg)
        return;
    tn__pgq_free(pg->queue);
    if (pg->be)
        pg->be->destroy(pg->impl, pg->verdict != NULL);
    free(pg->verdict);
    if (pg->store)
        tn_store_release(pg->store);
    free(pg);
}

/* Contract in internal.h: takes over impl (destroyed here when the group
 * cannot be made), retains store; timeout_ms < 0 is 30 minutes.  A new
 * group for tn_pg_free; NULL with TN_ENOMEM. */
struct tn_pg *tn__pg_new_backend(const struct tn__pg_backend *be, void *impl,
                                 struct tn_store *store, int rank, int size, int64_t timeout_ms)
{
    struct tn_pg *pg = calloc(1, sizeof *pg);
    if (!pg) {
        be->destroy(impl, false);
        tn_set_error(TN_ENOMEM, "%s process group: out of memory", be->name);
        return NULL;
    }
    pg->rank = rank;
    pg->size = size;
    pg->timeout_ms = timeout_ms < 0 ? 30 * 60 * 1000 : timeout_ms;
    pg->op = "init";
    pg->be = be;
    pg->impl = impl;
    if (store) {
        pg->store = store;
        tn_store_retain(store);
    }
    return pg;
}

/* The backend's state (borrowed; the group owns it). */
void *tn__pg_impl(const struct tn_pg *pg)
{
    return pg->impl;
}

/* The group's timeout in ms. */
int64_t tn__pg_timeout(const struct tn_pg *pg)
{
    return pg->timeout_ms;
}

/* The running collective's name ("init" before the first), for messages. */
const char *tn__pg_op(const struct tn_pg *pg)
{
    return pg->op;
}

/* The running collective's number. */
uint64_t tn__pg_seq(const struct tn_pg *pg)
{
    return pg->seq;
}

/* Contract in internal.h: the failure agreed by every rank through the
 * store (agree_failure); the group is broken after.  Returns its status. */
int tn__pg_fail(struct tn_pg *pg, int status)
{
    return agree_failure(pg, status);
}

/* The backends tn_pg_new knows by name (NULL: the first). */
static const struct {
    const char *name;
    struct tn_pg *(*make)(struct tn_store *, int rank, int world_size, int64_t timeout_ms);
} backends[] = {
    {"tcp", tn__pg_new_tcp_env},
    {"gloo", tn__pg_new_tcp_env},
    {"mpi", tn_pg_new_mpi},
    {"nccl", tn_pg_new_nccl},
};

/* Contract in tensor/dist.h: the named backend's constructor (NULL: tcp);
 * store is borrowed (each backend takes its own reference).  A new group;
 * NULL with TN_EINVAL for an unknown name or the backend's error. */
struct tn_pg *tn_pg_new(const char *backend, struct tn_store *store, int rank, int world_size,
                        int64_t timeout_ms)
{
    for (size_t i = 0; i < sizeof backends / sizeof *backends; i++)
        if (!backend || !strcmp(backend, backends[i].name))
            return backends[i].make(store, rank, world_size, timeout_ms);
    tn_set_error(TN_EINVAL, "Invalid backend: '%s' (tcp, gloo, mpi or nccl)", backend);
    return NULL;
}
