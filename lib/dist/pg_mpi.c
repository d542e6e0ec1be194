/*
 * lib/dist/pg_mpi.c: the `mpi` process group: collectives through Open MPI
 * for clusters that run MPI already (its shared-memory and InfiniBand
 * transports, mpirun's placement). libmpi.so.40 is loaded on first use, so
 * libtensor does not link MPI and a program that never asks for the backend
 * never pays for it; the handles (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM...) are
 * Open MPI's exported objects, found by name, because Open MPI's handles are
 * the addresses of those objects (MPICH's ABI differs and is not supported).
 *
 * Every collective is MPI's non-blocking form, polled until the group's
 * deadline, so a collective that some rank never joins fails like the tcp
 * backend's (tn__pg_fail: the ranks agree through the store on a verdict
 * naming the absent ranks) instead of hanging in MPI forever. Reductions
 * MPI lacks or defines differently (float16, bfloat16, NaN-propagating
 * float min/max) run the tcp backend's arithmetic as MPI user operations,
 * so both backends give the same bits.
 */
#include "dist/internal.h"

#include "config.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void *MPI_Comm, *MPI_Datatype, *MPI_Op, *MPI_Request, *MPI_Errhandler;
typedef void mpi_user_fn(void *in, void *inout, int *len, MPI_Datatype *dt);

#define MPI_IN_PLACE ((void *)1)
#define MPI_THREAD_SERIALIZED 2

enum { N_DT = TN_NUM_DTYPES };

static struct {
    int (*Initialized)(int *);
    int (*Finalized)(int *);
    int (*Init_thread)(int *, char ***, int, int *);
    int (*Finalize)(void);
    int (*Comm_dup)(MPI_Comm, MPI_Comm *);
    int (*Comm_free)(MPI_Comm *);
    int (*Comm_rank)(MPI_Comm, int *);
    int (*Comm_size)(MPI_Comm, int *);
    int (*Comm_set_errhandler)(MPI_Comm, MPI_Errhandler);
    int (*Error_string)(int, char *, int *);
    int (*Type_contiguous)(int, MPI_Datatype, MPI_Datatype *);
    int (*Type_commit)(MPI_Datatype *);
    int (*Op_create)(mpi_user_fn *, int, MPI_Op *);
    int (*Test)(MPI_Request *, int *, void *);
    int (*Iallreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *);
    int (*Ibcast)(void *, int, MPI_Datatype, int, MPI_Comm, MPI_Request *);
    int (*Iallgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm,
                      MPI_Request *);
    int (*Ireduce)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm,
                   MPI_Request *);
    int (*Igather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm,
                   MPI_Request *);
    int (*Iscatter)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm,
                    MPI_Request *);
    int (*Ireduce_scatter_block)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm,
                                 MPI_Request *);
    int (*Ialltoall)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm,
                     MPI_Request *);
    int (*Ibarrier)(MPI_Comm, MPI_Request *);
    int (*Isend)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
    int (*Irecv)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
    /* predefined handles: the addresses of Open MPI's objects */
    MPI_Comm world;
    MPI_Errhandler errors_return;
    MPI_Datatype byte, f32, f64, i8, u8, i16, i32, i64, cbool, c64;
    MPI_Op sum, prod, min, max, lor, land;
    /* ours: one contiguous type per dtype (elements of its size), and the
     * tcp backend's arithmetic as user operations */
    MPI_Datatype elem[N_DT];
    MPI_Op user[4]; /* sum, product, min, max */
} M;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static int load_status = TN_EDEVICE;
static char load_error[600];
static bool mpi_ready;        /* MPI initialised and our types made */
static atomic_bool any_broken; /* a request may hang: finalising could too */

/* pthread_once body: dlopens libmpi (TN_MPI_LIBRARY or libmpi.so.40) and
 * resolves the symbols into M; load_status and load_error say how it went. */
static void load(void)
{
    const char *env = getenv("TN_MPI_LIBRARY");
    const char *path = env && *env ? env : "libmpi.so.40";
#ifndef TN_HAVE_MPI
    if (!(env && *env)) {
        snprintf(load_error, sizeof load_error, "MPI support is not available: libtensor was "
                                                "built without MPI (configure found no Open MPI)");
        return;
    }
#endif
    /* global: Open MPI's own plugins resolve symbols of libmpi */
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        snprintf(load_error, sizeof load_error, "MPI support is not available: %s", dlerror());
        return;
    }
    struct {
        void **slot;
        const char *name;
    } syms[] = {
#define S(f) {(void **)&M.f, "MPI_" #f}
        S(Initialized), S(Finalized), S(Init_thread), S(Finalize), S(Comm_dup), S(Comm_free),
        S(Comm_rank), S(Comm_size), S(Comm_set_errhandler), S(Error_string), S(Type_contiguous),
        S(Type_commit), S(Op_create), S(Test), S(Iallreduce), S(Ibcast), S(Iallgather),
        S(Ireduce), S(Igather), S(Iscatter), S(Ireduce_scatter_block), S(Ialltoall), S(Ibarrier),
        S(Isend), S(Irecv),
#undef S
#define O(f, sym) {(void **)&M.f, sym}
        O(world, "ompi_mpi_comm_world"), O(errors_return, "ompi_mpi_errors_return"),
        O(byte, "ompi_mpi_byte"), O(f32, "ompi_mpi_float"), O(f64, "ompi_mpi_double"),
        O(i8, "ompi_mpi_int8_t"), O(u8, "ompi_mpi_uint8_t"), O(i16, "ompi_mpi_int16_t"),
        O(i32, "ompi_mpi_int32_t"), O(i64, "ompi_mpi_int64_t"), O(cbool, "ompi_mpi_c_bool"),
        O(c64, "ompi_mpi_c_float_complex"), O(sum, "ompi_mpi_op_sum"),
        O(prod, "ompi_mpi_op_prod"), O(min, "ompi_mpi_op_min"), O(max, "ompi_mpi_op_max"),
        O(lor, "ompi_mpi_op_lor"), O(land, "ompi_mpi_op_land"),
#undef O
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(h, syms[i].name);
        if (!*syms[i].slot) {
            snprintf(load_error, sizeof load_error,
                     "MPI support is not available: %s lacks %s (not Open MPI 4 or later?)", path,
                     syms[i].name);
            return;
        }
    }
    load_status = TN_OK;
}

/* TN_ERUNTIME naming the collective, its number, the rank and MPI's own
 * message for rc. */
static int mpi_error(struct tn_pg *pg, int rc, const char *fn)
{
    char s[512];
    int len = 0;
    if (M.Error_string(rc, s, &len) != 0)
        snprintf(s, sizeof s, "error %d", rc);
    return tn_set_error(TN_ERUNTIME, "%s #%llu on rank %d: %s failed: %s", tn__pg_op(pg),
                        (unsigned long long)tn__pg_seq(pg), tn_pg_rank(pg), fn, s);
}

/* ------------------------------------------------------------ user ops */

/* The index in M.elem of MPI datatype d, or -1. */
static int dtype_of(MPI_Datatype d)
{
    for (int i = 0; i < N_DT; i++)
        if (M.elem[i] == d)
            return i;
    return -1;
}

#define USER_OP(name, op)                                                                     \
    static void name(void *in, void *inout, int *len, MPI_Datatype *dt)                       \
    {                                                                                         \
        int d = dtype_of(*dt);                                                                \
        if (d >= 0)                                                                           \
            tn__pg_reduce_into(inout, in, *len, (enum tn_dtype)d, op);                        \
    }
USER_OP(user_sum, TN_REDUCE_SUM)
USER_OP(user_prod, TN_REDUCE_PRODUCT)
USER_OP(user_min, TN_REDUCE_MIN)
USER_OP(user_max, TN_REDUCE_MAX)

/* atexit: MPI_Finalize once, unless a group broke (finalizing would hang on
 * the lost peers). */
static void finalize_at_exit(void)
{
    int done = 1;
    if (!atomic_load(&any_broken) && M.Finalized(&done) == 0 && !done)
        M.Finalize();
}

/* Loads libmpi, initialises MPI unless the program did, and makes our
 * types and operations, once. */
static int mpi_start(void)
{
    pthread_once(&load_once, load);
    if (load_status != TN_OK)
        return tn_set_error(TN_EDEVICE, "%s", load_error);
    pthread_mutex_lock(&init_mu);
    int rc = 0, flag = 0;
    if (!mpi_ready) {
        if (M.Finalized(&flag) == 0 && flag) {
            rc = tn_set_error(TN_ERUNTIME, "mpi process group: MPI was finalized; it cannot "
                                           "start again in this process");
            goto out;
        }
        if (M.Initialized(&flag) != 0 || !flag) {
            /* Open MPI's non-blocking allreduce (libnbc) takes a binomial
             * tree for any in-place one and any under 4 ranks: one rank
             * receives, reduces and sends back the whole buffer (64 MiB
             * over 2 ranks in 2.5x Gloo's time, issue 27). The ring halves
             * what each rank moves and reduces; a setting of the user's
             * own (this variable, or --mca under mpirun) is kept. */
            setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
            int provided = 0;
            if (M.Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != 0) {
                rc = tn_set_error(TN_ERUNTIME, "mpi process group: MPI_Init_thread failed");
                goto out;
            }
            atexit(finalize_at_exit);
        }
        static const size_t sizes[N_DT] = {
#define X(E, n, T, ...) [TN_##E] = sizeof(T),
            TN_FOR_EACH_DTYPE(X)
#undef X
        };
        for (int i = 0; i < N_DT; i++)
            if (M.Type_contiguous((int)sizes[i], M.byte, &M.elem[i]) != 0 ||
                M.Type_commit(&M.elem[i]) != 0) {
                rc = tn_set_error(TN_ERUNTIME, "mpi process group: cannot make MPI types");
                goto out;
            }
        mpi_user_fn *fns[4] = {user_sum, user_prod, user_min, user_max};
        for (int i = 0; i < 4; i++)
            if (M.Op_create(fns[i], 1, &M.user[i]) != 0) {
                rc = tn_set_error(TN_ERUNTIME, "mpi process group: cannot make MPI operations");
                goto out;
            }
        mpi_ready = true;
    }
out:
    pthread_mutex_unlock(&init_mu);
    return rc;
}

/* The MPI type and operation for a reduction of dtype dt: MPI's own where
 * it computes what the tcp backend does, else ours. */
static void reduction(enum tn_dtype dt, enum tn_reduce_op op, MPI_Datatype *t, MPI_Op *o)
{
    int k = op == TN_REDUCE_PRODUCT ? 1 : op == TN_REDUCE_MIN ? 2 : op == TN_REDUCE_MAX ? 3 : 0;
    MPI_Op builtin[4] = {M.sum, M.prod, M.min, M.max};
    MPI_Datatype native = NULL;
    bool minmax_ok = true;
    switch (dt) {
    case TN_FLOAT32: native = M.f32; minmax_ok = false; break; /* MPI's min drops NaN */
    case TN_FLOAT64: native = M.f64; minmax_ok = false; break;
    case TN_INT64: native = M.i64; break;
    case TN_INT32: native = M.i32; break;
    case TN_INT16: native = M.i16; break;
    case TN_INT8: native = M.i8; break;
    case TN_UINT8: native = M.u8; break;
    case TN_COMPLEX64: native = M.c64; break;
    case TN_BOOL:
        *t = M.cbool;
        *o = (k == 0 || k == 3) ? M.lor : M.land;
        return;
    default: break;
    }
    if (native && (k < 2 || minmax_ok)) {
        *t = native;
        *o = builtin[k];
    } else {
        *t = M.elem[dt];
        *o = M.user[k];
    }
}

/* ------------------------------------------------------------ collectives */

struct mpi_pg {
    MPI_Comm comm;
};

/* The group's communicator (borrowed from its impl). */
static MPI_Comm comm_of(struct tn_pg *pg)
{
    return ((struct mpi_pg *)tn__pg_impl(pg))->comm;
}

/* Polls req until it completes or the group's deadline passes. MPI's
 * non-blocking collectives progress only inside MPI_Test, so it spins for
 * the first second (a large allreduce needs every call it can get), then
 * naps between polls so a hung collective does not burn a core. */
static int finish(struct tn_pg *pg, int rc, MPI_Request *req, const char *fn)
{
    if (rc != 0)
        return mpi_error(pg, rc, fn);
    int64_t start = tn__now_ms(), deadline = start + tn__pg_timeout(pg);
    for (unsigned long spins = 0;; spins++) {
        int done = 0;
        rc = M.Test(req, &done, NULL);
        if (rc != 0)
            return mpi_error(pg, rc, "MPI_Test");
        if (done)
            return 0;
        if (spins % 256)
            continue;
        int64_t now = tn__now_ms();
        if (now >= deadline) {
            tn_set_error(TN_ETIMEOUT, "%s #%llu on rank %d: the other ranks did not finish it "
                                      "within %lld ms",
                         tn__pg_op(pg), (unsigned long long)tn__pg_seq(pg), tn_pg_rank(pg),
                         (long long)tn__pg_timeout(pg));
            atomic_store(&any_broken, true);
            return tn__pg_fail(pg, TN_ETIMEOUT);
        }
        if (now - start < 1000)
            continue;
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

/* The element count of t as MPI's int into *n; TN_EINVAL when it does not
 * fit. */
static int count_of(struct tn_pg *pg, const struct tn_tensor *t, int *n)
{
    int64_t c = tn_numel(t);
    if (c > INT_MAX)
        return tn_set_error(TN_EINVAL, "%s: the mpi backend takes at most %d elements, not %lld",
                            tn__pg_op(pg), INT_MAX, (long long)c);
    *n = (int)c;
    return 0;
}

/* The mpi backend's entries (struct tn__pg_backend): arguments already
 * checked by pg.c; each starts the nonblocking MPI call and waits for it
 * with the group's deadline (finish); 0 or < 0 with the error set. */
static int mpi_allreduce(struct tn_pg *pg, struct tn_tensor *t, enum tn_reduce_op op)
{
    int n = 0;
    if (count_of(pg, t, &n) < 0)
        return tn_last_status();
    MPI_Datatype dt;
    MPI_Op o;
    reduction(t->dtype, op, &dt, &o);
    MPI_Request req;
    int rc = finish(pg, M.Iallreduce(MPI_IN_PLACE, tn_data(t), n, dt, o, comm_of(pg), &req),
                    &req, "MPI_Iallreduce");
    if (rc == 0 && op == TN_REDUCE_AVG)
        tn__pg_divide(tn_data(t), n, t->dtype, tn_pg_size(pg));
    return rc;
}

/* mpi reduce (see mpi_allreduce). */
static int mpi_reduce(struct tn_pg *pg, struct tn_tensor *t, enum tn_reduce_op op, int root)
{
    int n = 0;
    if (count_of(pg, t, &n) < 0)
        return tn_last_status();
    MPI_Datatype dt;
    MPI_Op o;
    reduction(t->dtype, op, &dt, &o);
    bool me = tn_pg_rank(pg) == root;
    MPI_Request req;
    int rc = finish(pg,
                    M.Ireduce(me ? MPI_IN_PLACE : tn_data(t), me ? tn_data(t) : NULL, n, dt, o,
                              root, comm_of(pg), &req),
                    &req, "MPI_Ireduce");
    if (rc == 0 && me && op == TN_REDUCE_AVG)
        tn__pg_divide(tn_data(t), n, t->dtype, tn_pg_size(pg));
    return rc;
}

/* mpi reduce_scatter (see mpi_allreduce). */
static int mpi_reduce_scatter(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in,
                              enum tn_reduce_op op)
{
    int n = 0;
    if (count_of(pg, in, &n) < 0 || count_of(pg, out, &n) < 0)
        return tn_last_status();
    MPI_Datatype dt;
    MPI_Op o;
    reduction(out->dtype, op, &dt, &o);
    MPI_Request req;
    int rc = finish(pg,
                    M.Ireduce_scatter_block(tn_data(in), tn_data(out), n, dt, o, comm_of(pg),
                                            &req),
                    &req, "MPI_Ireduce_scatter_block");
    if (rc == 0 && op == TN_REDUCE_AVG)
        tn__pg_divide(tn_data(out), n, out->dtype, tn_pg_size(pg));
    return rc;
}

/* mpi broadcast (see mpi_allreduce). */
static int mpi_broadcast(struct tn_pg *pg, struct tn_tensor *t, int root)
{
    int n = 0;
    if (count_of(pg, t, &n) < 0)
        return tn_last_status();
    MPI_Request req;
    return finish(pg, M.Ibcast(tn_data(t), n, M.elem[t->dtype], root, comm_of(pg), &req), &req,
                  "MPI_Ibcast");
}

/* mpi allgather (see mpi_allreduce). */
static int mpi_allgather(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in)
{
    int n = 0;
    if (count_of(pg, out, &n) < 0 || count_of(pg, in, &n) < 0)
        return tn_last_status();
    MPI_Datatype e = M.elem[in->dtype];
    MPI_Request req;
    return finish(pg, M.Iallgather(tn_data(in), n, e, tn_data(out), n, e, comm_of(pg), &req),
                  &req, "MPI_Iallgather");
}

/* mpi gather (see mpi_allreduce). */
static int mpi_gather(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in,
                      int root)
{
    int n = 0;
    if (count_of(pg, in, &n) < 0)
        return tn_last_status();
    MPI_Datatype e = M.elem[in->dtype];
    void *o = tn_pg_rank(pg) == root ? tn_data(out) : NULL;
    MPI_Request req;
    return finish(pg, M.Igather(tn_data(in), n, e, o, n, e, root, comm_of(pg), &req), &req,
                  "MPI_Igather");
}

/* mpi scatter (see mpi_allreduce). */
static int mpi_scatter(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in,
                       int root)
{
    int n = 0;
    if (count_of(pg, out, &n) < 0)
        return tn_last_status();
    MPI_Datatype e = M.elem[out->dtype];
    const void *i = tn_pg_rank(pg) == root ? tn_data(in) : NULL;
    MPI_Request req;
    return finish(pg, M.Iscatter(i, n, e, tn_data(out), n, e, root, comm_of(pg), &req), &req,
                  "MPI_Iscatter");
}

/* mpi all_to_all (see mpi_allreduce). */
static int mpi_all_to_all(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in)
{
    int n = 0;
    if (count_of(pg, in, &n) < 0)
        return tn_last_status();
    n /= tn_pg_size(pg);
    MPI_Datatype e = M.elem[in->dtype];
    MPI_Request req;
    return finish(pg, M.Ialltoall(tn_data(in), n, e, tn_data(out), n, e, comm_of(pg), &req),
                  &req, "MPI_Ialltoall");
}

/* mpi barrier (see mpi_allreduce). */
static int mpi_barrier(struct tn_pg *pg)
{
    MPI_Request req;
    return finish(pg, M.Ibarrier(comm_of(pg), &req), &req, "MPI_Ibarrier");
}

/* mpi send (see mpi_allreduce). */
static int mpi_send(struct tn_pg *pg, const struct tn_tensor *t, int dst)
{
    int n = 0;
    if (count_of(pg, t, &n) < 0)
        return tn_last_status();
    MPI_Request req;
    return finish(pg, M.Isend(tn_data(t), n, M.elem[t->dtype], dst, 0, comm_of(pg), &req), &req,
                  "MPI_Isend");
}

/* mpi recv (see mpi_allreduce). */
static int mpi_recv(struct tn_pg *pg, struct tn_tensor *t, int src)
{
    int n = 0;
    if (count_of(pg, t, &n) < 0)
        return tn_last_status();
    MPI_Request req;
    return finish(pg, M.Irecv(tn_data(t), n, M.elem[t->dtype], src, 0, comm_of(pg), &req), &req,
                  "MPI_Irecv");
}

/* tn__pg_backend.destroy: frees the communicator (not when broken: that
 * would wait for lost peers) and impl. */
static void mpi_destroy(void *impl, bool broken)
{
    struct mpi_pg *m = impl;
    if (!m)
        return;
    /* a broken group may have a request MPI still runs: leave its
     * communicator alone rather than hang freeing it */
    if (!broken)
        M.Comm_free(&m->comm);
    free(m);
}

static const struct tn__pg_backend mpi_backend = {
    .name = "mpi",
    .device = TN_DEVICE_CPU,
    .allreduce = mpi_allreduce,
    .broadcast = mpi_broadcast,
    .allgather = mpi_allgather,
    .barrier = mpi_barrier,
    .reduce = mpi_reduce,
    .gather = mpi_gather,
    .scatter = mpi_scatter,
    .reduce_scatter = mpi_reduce_scatter,
    .all_to_all = mpi_all_to_all,
    .send = mpi_send,
    .recv = mpi_recv,
    .destroy = mpi_destroy,
};

/* Contract in tensor/dist.h: loads libmpi on first use, initialises MPI
 * unless the program did, checks rank/world_size (when >= 0) against
 * MPI_COMM_WORLD's and duplicates it for this group; store (may be NULL) is
 * where ranks agree on a failure.  A new group; NULL with TN_EDEVICE
 * without Open MPI, TN_EINVAL on a rank or size mismatch. */
struct tn_pg *tn_pg_new_mpi(struct tn_store *store, int rank, int world_size, int64_t timeout_ms)
{
    if (mpi_start() < 0)
        return NULL;
    int r = -1, n = -1;
    M.Comm_rank(M.world, &r);
    M.Comm_size(M.world, &n);
    if ((rank >= 0 && rank != r) || (world_size >= 0 && world_size != n)) {
        tn_set_error(TN_EINVAL, "mpi process group: asked for rank %d of %d, but MPI says rank "
                                "%d of %d (start the processes with mpirun)",
                     rank, world_size, r, n);
        return NULL;
    }
    struct mpi_pg *m = calloc(1, sizeof *m);
    if (!m) {
        tn_set_error(TN_ENOMEM, "mpi process group: out of memory");
        return NULL;
    }
    if (M.Comm_dup(M.world, &m->comm) != 0) {
        free(m);
        tn_set_error(TN_ERUNTIME, "mpi process group: MPI_Comm_dup failed");
        return NULL;
    }
    /* errors come back as codes (and then as our errors), not an abort */
    M.Comm_set_errhandler(m->comm, M.errors_return);
    return tn__pg_new_backend(&mpi_backend, m, store, r, n, timeout_ms);
}
