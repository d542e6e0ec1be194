/*
 * lib/dist/pg_nccl.c: the `nccl` process group: collectives on CUDA tensors
 * through NCCL, loaded on first use like the CUDA backend (libnccl.so.2 and
 * the CUDA runtime by dlopen, with the few declarations it needs written
 * here), so libtensor builds and runs without either. Rank 0 makes the
 * ncclUniqueId and publishes it in the store, as ProcessGroupNCCL does.
 * Every collective is queued on the group's own stream (a blocking one, so
 * work on the default stream is ordered before it) and waited for with a
 * deadline: past it the communicator is aborted and the ranks agree on the
 * failure like the tcp backend's. Built only when configure found NCCL
 * (--with-cuda); $TN_NCCL_LIBRARY loads a copy anyway.
 */
#include "dist/internal.h"

#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

typedef void *nccl_comm, *cuda_stream;
typedef struct {
    char internal[128];
} nccl_id;
enum { NC_INT8 = 0, NC_UINT8 = 1, NC_INT32 = 2, NC_INT64 = 4, NC_F16 = 6, NC_F32 = 7,
       NC_F64 = 8, NC_BF16 = 9 };
enum { NC_SUM = 0, NC_PROD = 1, NC_MAX = 2, NC_MIN = 3, NC_AVG = 4 };
#define CUDA_NOT_READY 600

static struct {
    int (*GetDeviceCount)(int *);
    int (*SetDevice)(int);
    int (*StreamCreate)(cuda_stream *);
    int (*StreamDestroy)(cuda_stream);
    int (*StreamQuery)(cuda_stream);
    const char *(*GetErrorString)(int);
    int (*Malloc)(void **, size_t);
    int (*Free)(void *);
    int (*GetUniqueId)(nccl_id *);
    int (*CommInitRank)(nccl_comm *, int, nccl_id, int);
    int (*CommDestroy)(nccl_comm);
    int (*CommAbort)(nccl_comm);
    const char *(*NcclErrorString)(int);
    int (*AllReduce)(const void *, void *, size_t, int, int, nccl_comm, cuda_stream);
    int (*Broadcast)(const void *, void *, size_t, int, int, nccl_comm, cuda_stream);
    int (*Reduce)(const void *, void *, size_t, int, int, int, nccl_comm, cuda_stream);
    int (*AllGather)(const void *, void *, size_t, int, nccl_comm, cuda_stream);
    int (*ReduceScatter)(const void *, void *, size_t, int, int, nccl_comm, cuda_stream);
    int (*Send)(const void *, size_t, int, int, nccl_comm, cuda_stream);
    int (*Recv)(void *, size_t, int, int, nccl_comm, cuda_stream);
    int (*GroupStart)(void);
    int (*GroupEnd)(void);
} N;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_status = TN_EDEVICE;
static char load_error[600];

/* dlopen of the first of paths that loads (NULL entries skipped); NULL
 * with the first failure's dlerror() in why. */
static void *open_first(const char *const *paths, size_t n, char *why, size_t whylen)
{
    for (size_t i = 0; i < n; i++) {
        if (!paths[i])
            continue;
        void *h = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
        if (!why[0])
            snprintf(why, whylen, "%s", dlerror());
    }
    return NULL;
}

/* pthread_once body: dlopens NCCL and the CUDA runtime (TN_NCCL_LIBRARY
 * first) and resolves N; load_status and load_error say how it went. */
static void load(void)
{
    const char *env = getenv("TN_NCCL_LIBRARY");
    char why[400] = "";
#ifndef TN_HAVE_NCCL
    if (!(env && *env)) {
        snprintf(load_error, sizeof load_error,
                 "NCCL support is not available: libtensor was built without NCCL (configure "
                 "--with-cuda found no NCCL)");
        return;
    }
#endif
    const char *np[] = {env && *env ? env : NULL, "libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"};
    const char *cp[] = {"libcudart.so", "/usr/local/cuda/lib64/libcudart.so"};
    void *nh = open_first(np, 3, why, sizeof why);
    void *ch = nh ? open_first(cp, 2, why, sizeof why) : NULL;
    if (!nh || !ch) {
        snprintf(load_error, sizeof load_error, "NCCL support is not available: %s", why);
        return;
    }
    struct {
        void *h;
        void **slot;
        const char *name;
    } syms[] = {
#define C(f) {ch, (void **)&N.f, "cuda" #f}
#define S(f, n) {nh, (void **)&N.f, n}
        C(GetDeviceCount), C(SetDevice), C(StreamCreate), C(StreamDestroy), C(StreamQuery),
        C(GetErrorString), C(Malloc), C(Free), S(GetUniqueId, "ncclGetUniqueId"),
        S(CommInitRank, "ncclCommInitRank"), S(CommDestroy, "ncclCommDestroy"),
        S(CommAbort, "ncclCommAbort"), S(NcclErrorString, "ncclGetErrorString"),
        S(AllReduce, "ncclAllReduce"), S(Broadcast, "ncclBroadcast"), S(Reduce, "ncclReduce"),
        S(AllGather, "ncclAllGather"), S(ReduceScatter, "ncclReduceScatter"),
        S(Send, "ncclSend"), S(Recv, "ncclRecv"), S(GroupStart, "ncclGroupStart"),
        S(GroupEnd, "ncclGroupEnd"),
#undef C
#undef S
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].slot = dlsym(syms[i].h, syms[i].name))) {
            snprintf(load_error, sizeof load_error, "NCCL support is not available: no %s",
                     syms[i].name);
            return;
        }
    load_status = TN_OK;
}

struct nccl_pg {
    nccl_comm comm;
    cuda_stream stream;
    void *scratch; /* one byte of device memory, for barrier */
};

/* The group's NCCL state (borrowed). */
static struct nccl_pg *impl_of(struct tn_pg *pg)
{
    return tn__pg_impl(pg);
}

/* TN_ERUNTIME naming the collective, its number, the rank, the NCCL function
 * and NCCL's message for rc. */
static int nccl_error(struct tn_pg *pg, int rc, const char *fn)
{
    return tn_set_error(TN_ERUNTIME, "%s #%llu on rank %d: %s failed: %s", tn__pg_op(pg),
                        (unsigned long long)tn__pg_seq(pg), tn_pg_rank(pg), fn,
                        N.NcclErrorString(rc));
}

/* Waits for the group's stream with the group's deadline; past it aborts
 * the communicator (so the kernels stop) and fails on every rank. */
static int finish(struct tn_pg *pg, int rc, const char *fn)
{
    if (rc != 0)
        return nccl_error(pg, rc, fn);
    struct nccl_pg *g = impl_of(pg);
    int64_t deadline = tn__now_ms() + tn__pg_timeout(pg);
    for (unsigned long spins = 0;; spins++) {
        int q = N.StreamQuery(g->stream);
        if (q == 0)
            return 0;
        if (q != CUDA_NOT_READY)
            return tn_set_error(TN_ERUNTIME, "%s #%llu on rank %d: CUDA: %s", tn__pg_op(pg),
                                (unsigned long long)tn__pg_seq(pg), tn_pg_rank(pg),
                                N.GetErrorString(q));
        if (spins < 20000)
            continue;
        if (tn__now_ms() >= deadline) {
            N.CommAbort(g->comm);
            g->comm = NULL;
            tn_set_error(TN_ETIMEOUT, "%s #%llu on rank %d: the other ranks did not finish it "
                                      "within %lld ms",
                         tn__pg_op(pg), (unsigned long long)tn__pg_seq(pg), tn_pg_rank(pg),
                         (long long)tn__pg_timeout(pg));
            return tn__pg_fail(pg, TN_ETIMEOUT);
        }
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

/* NCCL's type for a reduction of dt (bool as uint8: max is "or", min
 * "and"), or -1. The element count scales for complex (two floats). */
static int nc_type(enum tn_dtype dt)
{
    switch (dt) {
    case TN_FLOAT32: return NC_F32;
    case TN_FLOAT64: return NC_F64;
    case TN_FLOAT16: return NC_F16;
    case TN_BFLOAT16: return NC_BF16;
    case TN_INT64: return NC_INT64;
    case TN_INT32: return NC_INT32;
    case TN_INT8: return NC_INT8;
    case TN_UINT8:
    case TN_BOOL: return NC_UINT8;
    case TN_COMPLEX64: return NC_F32;
    case TN_COMPLEX128: return NC_F64;
    default: return -1;
    }
}

/* NCCL's datatype and count for t (complex as pairs of floats) into *type
 * and *count, and NCCL's op for op; < 0 with the error set when NCCL lacks
 * either. */
static int nc_op(struct tn_pg *pg, const struct tn_tensor *t, enum tn_reduce_op op, int *type,
                 size_t *count)
{
    *type = nc_type(t->dtype);
    *count = (size_t)tn_numel(t) * (tn_dtype_is_complex(t->dtype) ? 2 : 1);
    if (*type < 0 || (tn_dtype_is_complex(t->dtype) && op != TN_REDUCE_SUM && op != TN_REDUCE_AVG))
        return tn_set_error(TN_EDTYPE, "%s: NCCL cannot reduce %s tensors with this op",
                            tn__pg_op(pg), tn_dtype_name(t->dtype));
    if (t->dtype == TN_BOOL)
        return op == TN_REDUCE_PRODUCT || op == TN_REDUCE_MIN ? NC_MIN : NC_MAX;
    static const int map[] = {[TN_REDUCE_SUM] = NC_SUM, [TN_REDUCE_AVG] = NC_AVG,
                              [TN_REDUCE_PRODUCT] = NC_PROD, [TN_REDUCE_MIN] = NC_MIN,
                              [TN_REDUCE_MAX] = NC_MAX};
    return map[op];
}

/* The nccl backend's entries (struct tn__pg_backend): arguments already
 * checked by pg.c (CUDA tensors); each enqueues on the group's stream and
 * waits for it with the group's deadline (finish); 0 or < 0 with the error
 * set. */
static int nccl_allreduce(struct tn_pg *pg, struct tn_tensor *t, enum tn_reduce_op op)
{
    int type;
    size_t n;
    int o = nc_op(pg, t, op, &type, &n);
    if (o < 0)
        return o;
    struct nccl_pg *g = impl_of(pg);
    return finish(pg, N.AllReduce(tn_data(t), tn_data(t), n, type, o, g->comm, g->stream),
                  "ncclAllReduce");
}

/* nccl reduce (see nccl_allreduce). */
static int nccl_reduce(struct tn_pg *pg, struct tn_tensor *t, enum tn_reduce_op op, int root)
{
    int type;
    size_t n;
    int o = nc_op(pg, t, op, &type, &n);
    if (o < 0)
        return o;
    struct nccl_pg *g = impl_of(pg);
    /* non-root ranks' tensors stay as they were: NCCL writes only root's */
    return finish(pg, N.Reduce(tn_data(t), tn_data(t), n, type, o, root, g->comm, g->stream),
                  "ncclReduce");
}

/* nccl reduce_scatter (see nccl_allreduce). */
static int nccl_reduce_scatter(struct tn_pg *pg, struct tn_tensor *out,
                               const struct tn_tensor *in, enum tn_reduce_op op)
{
    int type;
    size_t n;
    int o = nc_op(pg, out, op, &type, &n);
    if (o < 0)
        return o;
    struct nccl_pg *g = impl_of(pg);
    return finish(pg,
                  N.ReduceScatter(tn_data(in), tn_data(out), n, type, o, g->comm, g->stream),
                  "ncclReduceScatter");
}

/* nccl broadcast, as bytes (see nccl_allreduce). */
static int nccl_broadcast(struct tn_pg *pg, struct tn_tensor *t, int root)
{
    struct nccl_pg *g = impl_of(pg);
    return finish(pg,
                  N.Broadcast(tn_data(t), tn_data(t), tn_nbytes(t), NC_UINT8, root, g->comm,
                              g->stream),
                  "ncclBroadcast");
}

/* nccl allgather, as bytes (see nccl_allreduce). */
static int nccl_allgather(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in)
{
    struct nccl_pg *g = impl_of(pg);
    return finish(pg,
                  N.AllGather(tn_data(in), tn_data(out), tn_nbytes(in), NC_UINT8, g->comm,
                              g->stream),
                  "ncclAllGather");
}

/* The point-to-point pieces of gather, scatter and all_to_all as one NCCL
 * group: nb bytes at send + p * sstride go to each rank p in to (a bit
 * mask of ranks; NCCL allows this rank itself inside a group), and from
 * each rank p in from to recv + p * rstride. */
static int exchange(struct tn_pg *pg, const char *send, size_t sstride, const bool *to,
                    char *recv, size_t rstride, const bool *from, size_t nb)
{
    struct nccl_pg *g = impl_of(pg);
    int rc = N.GroupStart();
    for (int p = 0; rc == 0 && p < tn_pg_size(pg); p++) {
        if (to[p])
            rc = N.Send(send + (size_t)p * sstride, nb, NC_UINT8, p, g->comm, g->stream);
        if (rc == 0 && from[p])
            rc = N.Recv(recv + (size_t)p * rstride, nb, NC_UINT8, p, g->comm, g->stream);
    }
    int end = N.GroupEnd();
    return finish(pg, rc ? rc : end, "ncclSend/ncclRecv");
}

/* Runs exchange with masks: all ranks (every == true) or only `one`. */
static int exchange_masks(struct tn_pg *pg, const char *send, size_t sstride, int to_one,
                          char *recv, size_t rstride, int from_one, size_t nb)
{
    int P = tn_pg_size(pg);
    bool *m = calloc(2 * (size_t)P, 1);
    if (!m)
        return tn_set_error(TN_ENOMEM, "%s: out of memory", tn__pg_op(pg));
    for (int p = 0; p < P; p++) {
        m[p] = send && (to_one < 0 || p == to_one);
        m[P + p] = recv && (from_one < 0 || p == from_one);
    }
    int rc = exchange(pg, send, sstride, m, recv, rstride, m + P, nb);
    free(m);
    return rc;
}

/* nccl all_to_all: grouped sends and receives of each rank's block (see
 * nccl_allreduce). */
static int nccl_all_to_all(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in)
{
    size_t nb = tn_nbytes(in) / (size_t)tn_pg_size(pg);
    return exchange_masks(pg, tn_data(in), nb, -1, tn_data(out), nb, -1, nb);
}

/* nccl gather: every rank sends to root (see nccl_allreduce). */
static int nccl_gather(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in,
                       int root)
{
    size_t nb = tn_nbytes(in);
    bool me = tn_pg_rank(pg) == root;
    /* every rank sends its one block to root (stride 0) */
    return exchange_masks(pg, tn_data(in), 0, root, me ? tn_data(out) : NULL, nb, -1, nb);
}

/* nccl scatter: root sends to every rank (see nccl_allreduce). */
static int nccl_scatter(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in,
                        int root)
{
    size_t nb = tn_nbytes(out);
    bool me = tn_pg_rank(pg) == root;
    return exchange_masks(pg, me ? tn_data(in) : NULL, nb, -1, tn_data(out), 0, root, nb);
}

/* nccl send (see nccl_allreduce). */
static int nccl_send(struct tn_pg *pg, const struct tn_tensor *t, int dst)
{
    struct nccl_pg *g = impl_of(pg);
    return finish(pg, N.Send(tn_data(t), tn_nbytes(t), NC_UINT8, dst, g->comm, g->stream),
                  "ncclSend");
}

/* nccl recv (see nccl_allreduce). */
static int nccl_recv(struct tn_pg *pg, struct tn_tensor *t, int src)
{
    struct nccl_pg *g = impl_of(pg);
    return finish(pg, N.Recv(tn_data(t), tn_nbytes(t), NC_UINT8, src, g->comm, g->stream),
                  "ncclRecv");
}

/* An allreduce of one byte of device memory. */
static int nccl_barrier(struct tn_pg *pg)
{
    struct nccl_pg *g = impl_of(pg);
    return finish(pg, N.AllReduce(g->scratch, g->scratch, 1, NC_UINT8, NC_SUM, g->comm, g->stream),
                  "ncclAllReduce");
}

/* tn__pg_backend.destroy: aborts (when broken) or destroys the communicator,
 * frees the stream, scratch and impl. */
static void nccl_destroy(void *impl, bool broken)
{
    struct nccl_pg *g = impl;
    if (!g)
        return;
    if (g->comm)
        broken ? N.CommAbort(g->comm) : N.CommDestroy(g->comm);
    if (g->scratch)
        N.Free(g->scratch);
    if (g->stream)
        N.StreamDestroy(g->stream);
    free(g);
}

static const struct tn__pg_backend nccl_backend = {
    .name = "nccl",
    .device = TN_DEVICE_CUDA,
    .allreduce = nccl_allreduce,
    .broadcast = nccl_broadcast,
    .allgather = nccl_allgather,
    .barrier = nccl_barrier,
    .reduce = nccl_reduce,
    .gather = nccl_gather,
    .scatter = nccl_scatter,
    .reduce_scatter = nccl_reduce_scatter,
    .all_to_all = nccl_all_to_all,
    .send = nccl_send,
    .recv = nccl_recv,
    .destroy = nccl_destroy,
};

/* NULL with TN_EDEVICE: NCCL cannot run here, why and CUDA's message for
 * code. */
static struct tn_pg *unavailable(const char *why, int code)
{
    tn_set_error(TN_EDEVICE, "NCCL support is not available: %s (%s)", why,
                 N.GetErrorString(code));
    return NULL;
}

/* Contract in tensor/dist.h: loads NCCL and the CUDA runtime on first use,
 * picks device LOCAL_RANK (else rank modulo the count), passes rank 0's
 * ncclUniqueId through store under nccl_pg/id (its length checked), and
 * makes the communicator on a stream of the group's own.  A new group;
 * NULL with TN_EDEVICE without NCCL or a device, TN_EINVAL for a bad rank
 * or size, TN_EFORMAT for an id of the wrong length, TN_ERUNTIME naming the
 * NCCL call that failed. */
struct tn_pg *tn_pg_new_nccl(struct tn_store *store, int rank, int world_size, int64_t timeout_ms)
{
    pthread_once(&load_once, load);
    if (load_status != TN_OK) {
        tn_set_error(TN_EDEVICE, "%s", load_error);
        return NULL;
    }
    if (!store || world_size < 1 || rank < 0 || rank >= world_size) {
        tn_set_error(TN_EINVAL, "nccl process group: rank %d, world size %d", rank, world_size);
        return NULL;
    }
    int ndev = 0, rc = N.GetDeviceCount(&ndev);
    if (rc != 0 || ndev < 1)
        return unavailable("no CUDA device", rc);
    const char *lr = getenv("LOCAL_RANK");
    int dev = (lr && *lr ? atoi(lr) : rank) % ndev;
    if ((rc = N.SetDevice(dev)) != 0)
        return unavailable("cannot use the CUDA device", rc);
    nccl_id id;
    if (rank == 0) {
        if ((rc = N.GetUniqueId(&id)) != 0 ||
            tn_store_set(store, "nccl_pg/id", &id, sizeof id) < 0) {
            if (rc)
                tn_set_error(TN_ERUNTIME, "nccl process group: ncclGetUniqueId failed: %s",
                             N.NcclErrorString(rc));
            return NULL;
        }
    } else {
        void *v = NULL;
        size_t vl = 0;
        if (tn_store_get(store, "nccl_pg/id", &v, &vl) < 0)
            return NULL;
        if (vl != sizeof id) {
            free(v);
            tn_set_error(TN_EFORMAT, "nccl process group: the unique id in the store has %zu "
                                     "bytes, not %zu",
                         vl, sizeof id);
            return NULL;
        }
        memcpy(&id, v, sizeof id);
        free(v);
    }
    struct nccl_pg *g = calloc(1, sizeof *g);
    if (!g) {
        tn_set_error(TN_ENOMEM, "nccl process group: out of memory");
        return NULL;
    }
    if ((rc = N.StreamCreate(&g->stream)) != 0 || (rc = N.Malloc(&g->scratch, 1)) != 0) {
        nccl_destroy(g, false);
        return unavailable("cannot make a CUDA stream", rc);
    }
    if ((rc = N.CommInitRank(&g->comm, world_size, id, rank)) != 0) {
        g->comm = NULL;
        nccl_destroy(g, false);
        tn_set_error(TN_ERUNTIME, "nccl process group: ncclCommInitRank failed: %s",
                     N.NcclErrorString(rc));
        return NULL;
    }
    return tn__pg_new_backend(&nccl_backend, g, store, rank, world_size, timeout_ms);
}
