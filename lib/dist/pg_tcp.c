/*
 * lib/dist/pg_tcp.c: the built-in `tcp` process-group backend (its table,
 * tcp_backend, plugs into pg.c as pg_mpi.c's and pg_nccl.c's do): a full mesh of TCP
 * connections exchanged through the store (each rank listens, publishes
 * host:port, connects to lower ranks and accepts higher ones, as Gloo
 * does), and collectives over it: ring allreduce (reduce-scatter then
 * allgather), broadcast (binomial tree), allgather, reduce, gather, scatter,
 * reduce_scatter, all_to_all, barrier, send/recv. Every wait has a
 * deadline and its error names the operation, its sequence number and the
 * peer that did not answer.
 *
 * Allreduce picks its algorithm by size: recursive doubling (lg P exchanges
 * of the whole buffer) for small buffers when P is a power of two; for large
 * ones, when every rank can read its peers' memory (Linux's cross-memory
 * attach, process_vm_readv, checked at creation with a nonce each rank
 * publishes), a pipelined reduce-scatter + allgather through a shared
 * segment per rank (pg_shm.c), else a ring through the sockets in segments
 * of 1 MiB. Broadcast, allgather and reduce_scatter read the peers' buffers
 * with process_vm_readv (one copy instead of TCP's two, and no socket
 * buffers). TN_PG_NO_SHM=1 turns both shared-memory paths off.
 */
#include "dist/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Buffers up to this size take recursive doubling (power-of-two groups). */
#define SMALL_BYTES (64u * 1024u)
/* Buffers from this size take the shared-memory ring when it is on. */
#define SHM_BYTES (256u * 1024u)
/* The socket ring's and the shared-memory ring's reduction segment. */
#define SEGMENT (1u << 20)

/* The tcp backend's state, a group's impl. */
struct tcp_mesh {
    int size;
    int *fds; /* fds[peer]; -1 for self */
    /* cross-memory attach: on when every rank read every peer's nonce */
    bool shm;
    pid_t *pids;             /* pids[peer] */
    volatile uint64_t nonce; /* read by the peers at creation */
    struct tn__pgshm *seg;   /* allreduce's shared segments (pg_shm.c), made on first use */
};

#define TCP(pg) ((struct tcp_mesh *)(pg)->impl)

/* The running collective failed waiting for peer (errno 0 or EAGAIN: it
 * timed out): the error naming the op, its number and the peer, agreed with
 * the other ranks (tn__pg_fail) once a collective is running. */
static int peer_error(struct tn_pg *pg, int peer, const char *what)
{
    int st = tn_set_error(errno == 0 || errno == EAGAIN ? TN_ETIMEOUT : TN_EIO,
                          "%s #%llu on rank %d: rank %d %s", pg->op,
                          (unsigned long long)pg->seq, pg->rank, peer, what);
    return pg->seq > 0 ? tn__pg_fail(pg, st) : st;
}

/* Sends sn bytes to peer `to` while receiving rn bytes from `from` (either
 * may be -1), so a ring never deadlocks on full socket buffers. */
static int sendrecv(struct tn_pg *pg, int to, const void *sbuf, size_t sn, int from, void *rbuf,
                    size_t rn)
{
    const char *s = sbuf;
    char *r = rbuf;
    int64_t deadline = tn__now_ms() + pg->timeout_ms;
    if (to < 0)
        sn = 0;
    if (from < 0)
        rn = 0;
    while (sn || rn) {
        struct pollfd p[2];
        int n = 0, si = -1, ri = -1;
        if (sn) {
            si = n;
            p[n++] = (struct pollfd){.fd = TCP(pg)->fds[to], .events = POLLOUT};
        }
        if (rn) {
            ri = n;
            p[n++] = (struct pollfd){.fd = TCP(pg)->fds[from], .events = POLLIN};
        }
        int64_t left = deadline - tn__now_ms();
        if (left <= 0) {
            errno = 0;
            return peer_error(pg, rn ? from : to,
                              rn ? "did not send its data in time" : "did not take data in time");
        }
        int pr = poll(p, (nfds_t)n, left > 60000 ? 60000 : (int)left);
        if (pr < 0 && errno != EINTR)
            return peer_error(pg, from, "poll failed");
        if (pr <= 0)
            continue;
        if (si >= 0 && (p[si].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = send(TCP(pg)->fds[to], s, sn, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN && errno != EINTR)
                return peer_error(pg, to, "closed its connection");
            if (w > 0) {
                s += w;
                sn -= (size_t)w;
            }
        }
        if (ri >= 0 && (p[ri].revents & (POLLIN | POLLERR | POLLHUP))) {
            ssize_t g = recv(TCP(pg)->fds[from], r, rn, MSG_DONTWAIT);
            if (g == 0 || (g < 0 && errno != EAGAIN && errno != EINTR)) {
                if (g == 0)
                    errno = ECONNRESET;
                return peer_error(pg, from, "closed its connection");
            }
            if (g > 0) {
                r += g;
                rn -= (size_t)g;
            }
        }
    }
    return 0;
}

/* ------------------------------------------------------------ reductions */

/* d[i] += s[i] in 16-byte vectors (GCC's and Clang's vector extensions:
 * -O2's cost model leaves the plain loop scalar), four at a time: the same
 * additions, so the same bits, about 4x faster on data in cache. */
#define VECTOR_SUM(NAME, T)                                                                   \
    static void NAME(T *d, const T *s, int64_t n)                                             \
    {                                                                                         \
        typedef T vec __attribute__((vector_size(16)));                                       \
        const int64_t w = 4 * (int64_t)(sizeof(vec) / sizeof(T));                             \
        int64_t i = 0;                                                                        \
        for (; i + w <= n; i += w) {                                                          \
            vec a[4], b[4];                                                                   \
            memcpy(a, d + i, sizeof a);                                                       \
            memcpy(b, s + i, sizeof b);                                                       \
            for (int k = 0; k < 4; k++)                                                       \
                a[k] += b[k];                                                                 \
            memcpy(d + i, a, sizeof a);                                                       \
        }                                                                                     \
        for (; i < n; i++)                                                                    \
            d[i] += s[i];                                                                     \
    }
VECTOR_SUM(sum_f32, float)
VECTOR_SUM(sum_f64, double)
#undef VECTOR_SUM

/* Contract in internal.h: dst[i] = dst[i] op src[i] for n elements of dt
 * (both buffers the caller's, n trusted; src may be bytes a peer sent,
 * any values: NaN propagates through min and max).  AVG sums here; the
 * caller divides once (tn__pg_divide).  Cannot fail. */
void tn__pg_reduce_into(void *dst, const void *src, int64_t n, enum tn_dtype dt,
                        enum tn_reduce_op op)
{
    if (op == TN_REDUCE_SUM || op == TN_REDUCE_AVG) {
        if (dt == TN_FLOAT32) {
            sum_f32(dst, src, n);
            return;
        }
        if (dt == TN_FLOAT64) {
            sum_f64(dst, src, n);
            return;
        }
    }
#define LOOP(T, EXPR)                                                                         \
    do {                                                                                      \
        T *d = dst;                                                                           \
        const T *s = src;                                                                     \
        for (int64_t i = 0; i < n; i++) {                                                     \
            T a = d[i], b = s[i];                                                             \
            d[i] = (EXPR);                                                                    \
        }                                                                                     \
    } while (0)
#define NATIVE(T)                                                                             \
    switch (op) {                                                                             \
    case TN_REDUCE_SUM:                                                                       \
    case TN_REDUCE_AVG: LOOP(T, (T)(a + b)); break;                                           \
    case TN_REDUCE_PRODUCT: LOOP(T, (T)(a * b)); break;                                       \
    case TN_REDUCE_MIN: LOOP(T, (b < a || b != b) ? b : a); break;                            \
    case TN_REDUCE_MAX: LOOP(T, (b > a || b != b) ? b : a); break;                            \
    }
#define SIXTEEN(T, TO, FROM)                                                                  \
    do {                                                                                      \
        T *d = dst;                                                                           \
        const T *s = src;                                                                     \
        for (int64_t i = 0; i < n; i++) {                                                     \
            float a = TO(d[i]), b = TO(s[i]), r;                                              \
            switch (op) {                                                                     \
            case TN_REDUCE_PRODUCT: r = a * b; break;                                         \
            case TN_REDUCE_MIN: r = (b < a || b != b) ? b : a; break;                         \
            case TN_REDUCE_MAX: r = (b > a || b != b) ? b : a; break;                         \
            default: r = a + b; break;                                                        \
            }                                                                                 \
            d[i] = FROM(r);                                                                   \
        }                                                                                     \
    } while (0)
    switch (dt) {
    case TN_FLOAT32: NATIVE(float); break;
    case TN_FLOAT64: NATIVE(double); break;
    case TN_INT64: NATIVE(int64_t); break;
    case TN_INT32: NATIVE(int32_t); break;
    case TN_INT16: NATIVE(int16_t); break;
    case TN_INT8: NATIVE(int8_t); break;
    case TN_UINT8: NATIVE(uint8_t); break;
    case TN_FLOAT16: SIXTEEN(tn_half, tn_half_to_float, tn_half_from_float); break;
    case TN_BFLOAT16: SIXTEEN(tn_bfloat16, tn_bfloat16_to_float, tn_bfloat16_from_float); break;
    case TN_BOOL: {
        /* PyTorch's Gloo: sum and max are "or", product and min are "and" */
        bool *d = dst;
        const bool *s = src;
        bool any = op == TN_REDUCE_SUM || op == TN_REDUCE_MAX || op == TN_REDUCE_AVG;
        for (int64_t i = 0; i < n; i++)
            d[i] = any ? (d[i] || s[i]) : (d[i] && s[i]);
        break;
    }
    case TN_COMPLEX64: LOOP(tn_complex64, op == TN_REDUCE_PRODUCT ? a * b : a + b); break;
    case TN_COMPLEX128: LOOP(tn_complex128, op == TN_REDUCE_PRODUCT ? a * b : a + b); break;
    default: TN_ASSERT(!"a dtype without a reduction");
    }
#undef LOOP
#undef NATIVE
#undef SIXTEEN
}

/* Contract in internal.h: buf[0..n) /= by, AVG's last step (floating
 * dtypes; the collective checked the dtype before). */
void tn__pg_divide(void *buf, int64_t n, enum tn_dtype dt, int by)
{
    switch (dt) {
    case TN_FLOAT32: for (int64_t i = 0; i < n; i++) ((float *)buf)[i] /= (float)by; break;
    case TN_FLOAT64: for (int64_t i = 0; i < n; i++) ((double *)buf)[i] /= by; break;
    case TN_FLOAT16:
        for (int64_t i = 0; i < n; i++)
            ((tn_half *)buf)[i] = tn_half_from_float(tn_half_to_float(((tn_half *)buf)[i]) / (float)by);
        break;
    case TN_BFLOAT16:
        for (int64_t i = 0; i < n; i++)
            ((tn_bfloat16 *)buf)[i] =
                tn_bfloat16_from_float(tn_bfloat16_to_float(((tn_bfloat16 *)buf)[i]) / (float)by);
        break;
    case TN_COMPLEX64: for (int64_t i = 0; i < n; i++) ((tn_complex64 *)buf)[i] /= (float)by; break;
    case TN_COMPLEX128: for (int64_t i = 0; i < n; i++) ((tn_complex128 *)buf)[i] /= by; break;
    default: break;
    }
}

/* ------------------------------------------------------------ collectives */

static int shm_read(struct tn_pg *pg, int peer, void *dst, uint64_t raddr, size_t n);

/* Every rank's 8-byte value (a buffer's address) in vals[rank]. */
int tn__pg_share(struct tn_pg *pg, uint64_t mine, uint64_t *vals)
{
    int P = pg->size, r = pg->rank;
    vals[r] = mine;
    for (int s = 1; s < P; s++) {
        int from = (r - s + P) % P;
        int rc = sendrecv(pg, (r + s) % P, &mine, 8, from, &vals[from], 8);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Dissemination barrier: lg P rounds of one byte. Inside a shared-memory
 * collective it keeps every rank's buffer in place until all peers read it. */
static int dissemination(struct tn_pg *pg)
{
    int P = pg->size;
    for (int d = 1; d < P; d <<= 1) {
        char x = 1, y;
        int rc = sendrecv(pg, (pg->rank + d) % P, &x, 1, (pg->rank - d + P) % P, &y, 1);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Broadcast through shared memory: root tells every rank where its buffer
 * is, they read it at once (one copy, no socket buffers) and say when they
 * are done, so root returns only after every read. */
static int broadcast_shm(struct tn_pg *pg, char *buf, size_t nb, int root)
{
    uint64_t addr = (uintptr_t)buf;
    char ack = 1;
    if (pg->rank != root) {
        int rc = sendrecv(pg, -1, NULL, 0, root, &addr, 8);
        if (rc == 0)
            rc = shm_read(pg, root, buf, addr, nb);
        return rc < 0 ? rc : sendrecv(pg, root, &ack, 1, -1, NULL, 0);
    }
    for (int p = 0; p < pg->size; p++) {
        int rc = p == root ? 0 : sendrecv(pg, p, &addr, 8, -1, NULL, 0);
        if (rc < 0)
            return rc;
    }
    for (int p = 0; p < pg->size; p++) {
        int rc = p == root ? 0 : sendrecv(pg, -1, NULL, 0, p, &ack, 1);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Allgather through shared memory: every rank reads each peer's input
 * straight into its block of out. */
static int allgather_shm(struct tn_pg *pg, char *out, const char *in, size_t nb)
{
    uint64_t *addrs = malloc(sizeof *addrs * (size_t)pg->size);
    if (!addrs)
        return tn_set_error(TN_ENOMEM, "allgather: out of memory");
    int rc = tn__pg_share(pg, (uintptr_t)in, addrs);
    memmove(out + (size_t)pg->rank * nb, in, nb);
    for (int p = 0; rc == 0 && p < pg->size; p++)
        if (p != pg->rank)
            rc = shm_read(pg, p, out + (size_t)p * nb, addrs[p], nb);
    free(addrs);
    return rc < 0 ? rc : dissemination(pg);
}

/* Reduce-scatter through shared memory: rank r reduces block r of every
 * rank's input, reading the peers' blocks segment by segment (its own
 * first, so an out that is in's block r works). */
static int reduce_scatter_shm(struct tn_pg *pg, struct tn_tensor *out,
                              const struct tn_tensor *in, enum tn_reduce_op op)
{
    int P = pg->size, r = pg->rank;
    size_t nb = tn_nbytes(out), es = tn_dtype_size(out->dtype), seg = SEGMENT / es * es;
    uint64_t *addrs = malloc(sizeof *addrs * (size_t)P);
    char *tmp = malloc(SEGMENT);
    if (!addrs || !tmp) {
        free(addrs);
        free(tmp);
        return tn_set_error(TN_ENOMEM, "reduce_scatter: out of memory");
    }
    char *o = tn_data(out);
    int rc = tn__pg_share(pg, (uintptr_t)tn_data(in), addrs);
    memmove(o, (const char *)tn_data(in) + (size_t)r * nb, nb);
    for (int s = 1; rc == 0 && s < P; s++) {
        int p = (r + s) % P;
        for (size_t i = 0; rc == 0 && i < nb; i += seg) {
            size_t m = nb - i < seg ? nb - i : seg;
            rc = shm_read(pg, p, tmp, addrs[p] + (uint64_t)((size_t)r * nb + i), m);
            if (rc == 0)
                tn__pg_reduce_into(o + i, tmp, (int64_t)(m / es), out->dtype, op);
        }
    }
    free(addrs);
    free(tmp);
    if (rc == 0 && op == TN_REDUCE_AVG)
        tn__pg_divide(o, tn_numel(out), out->dtype, P);
    return rc < 0 ? rc : dissemination(pg);
}

/* Copies n bytes at raddr in peer's memory to dst (cross-memory attach). */
static int shm_read(struct tn_pg *pg, int peer, void *dst, uint64_t raddr, size_t n)
{
    char *d = dst;
    while (n) {
        struct iovec l = {d, n}, rm = {(void *)(uintptr_t)raddr, n};
        ssize_t g = process_vm_readv(TCP(pg)->pids[peer], &l, 1, &rm, 1, 0);
        if (g < 0 && errno == EINTR)
            continue;
        if (g <= 0)
            return peer_error(pg, peer, "cannot be read through shared memory (it exited?)");
        d += g;
        raddr += (uint64_t)g;
        n -= (size_t)g;
    }
    return 0;
}

/* A step barrier with both ring neighbours, so neither is a step ahead of
 * this rank while it reads their buffer (or they read its). */
static int ring_sync(struct tn_pg *pg, int left, int right)
{
    char x = 1, y, z;
    int rc = sendrecv(pg, right, &x, 1, left, &y, 1);
    if (rc == 0 && left != right)
        rc = sendrecv(pg, left, &x, 1, right, &z, 1);
    return rc;
}

/* Recursive doubling: in round k, exchange the whole buffer with rank
 * r ^ 2^k and reduce. Each pair reduces the same two operands, so every
 * rank ends with the same bits. P is a power of two. */
static int allreduce_doubling(struct tn_pg *pg, char *buf, int64_t n, enum tn_dtype dt,
                              enum tn_reduce_op op, char *tmp)
{
    size_t nb = (size_t)n * tn_dtype_size(dt);
    for (int d = 1; d < pg->size; d <<= 1) {
        int peer = pg->rank ^ d;
        int rc = sendrecv(pg, peer, buf, nb, peer, tmp, nb);
        if (rc < 0)
            return rc;
        /* the lower rank's operand first, so both sides compute the same */
        if (pg->rank < peer) {
            tn__pg_reduce_into(buf, tmp, n, dt, op);
        } else {
            tn__pg_reduce_into(tmp, buf, n, dt, op);
            memcpy(buf, tmp, nb);
        }
    }
    return 0;
}

/* Ring allreduce (reduce-scatter, then allgather); chunk k covers elements
 * [off[k], off[k+1]) (off has P + 1 entries). Through the sockets, or
 * reading the left neighbour's buffer directly when shm. tmp holds SEGMENT
 * bytes. */
static int allreduce_ring(struct tn_pg *pg, char *buf, int64_t n, enum tn_dtype dt,
                          enum tn_reduce_op op, char *tmp, int64_t *off, bool shm)
{
    int P = pg->size, r = pg->rank;
    int64_t es = (int64_t)tn_dtype_size(dt), seg = SEGMENT / es;
    for (int k = 0; k <= P; k++)
        off[k] = (n * k) / P;
    int right = (r + 1) % P, left = (r - 1 + P) % P;
    uint64_t mine = (uintptr_t)buf, theirs = 0;
    int rc = 0;
    if (shm) /* also says "my buffer holds my input" */
        rc = sendrecv(pg, right, &mine, 8, left, &theirs, 8);
    for (int s = 0; rc == 0 && s < P - 1; s++) {
        int sc = ((r - s) % P + P) % P, rcv = ((r - s - 1) % P + P) % P;
        if (shm) {
            for (int64_t i = off[rcv]; rc == 0 && i < off[rcv + 1]; i += seg) {
                int64_t m = off[rcv + 1] - i < seg ? off[rcv + 1] - i : seg;
                rc = shm_read(pg, left, tmp, theirs + (uint64_t)(i * es), (size_t)(m * es));
                if (rc == 0)
                    tn__pg_reduce_into(buf + i * es, tmp, m, dt, op);
            }
            if (rc == 0)
                rc = ring_sync(pg, left, right);
            continue;
        }
        /* segment by segment, so tmp stays small and in cache */
        int64_t sn = off[sc + 1] - off[sc], rn = off[rcv + 1] - off[rcv];
        for (int64_t i = 0; rc == 0 && (i < sn || i < rn); i += seg) {
            int64_t a = sn - i < seg ? (sn > i ? sn - i : 0) : seg;
            int64_t b = rn - i < seg ? (rn > i ? rn - i : 0) : seg;
            rc = sendrecv(pg, right, buf + (off[sc] + i) * es, (size_t)(a * es), left, tmp,
                          (size_t)(b * es));
            if (rc == 0)
                tn__pg_reduce_into(buf + (off[rcv] + i) * es, tmp, b, dt, op);
        }
    }
    for (int s = 0; rc == 0 && s < P - 1; s++) {
        int sc = ((r + 1 - s) % P + P) % P, rcv = ((r - s) % P + P) % P;
        if (shm) {
            rc = shm_read(pg, left, buf + off[rcv] * es, theirs + (uint64_t)(off[rcv] * es),
                          (size_t)((off[rcv + 1] - off[rcv]) * es));
            if (rc == 0)
                rc = ring_sync(pg, left, right);
            continue;
        }
        rc = sendrecv(pg, right, buf + off[sc] * es, (size_t)((off[sc + 1] - off[sc]) * es),
                      left, buf + off[rcv] * es, (size_t)((off[rcv + 1] - off[rcv]) * es));
    }
    return rc;
}

/* The tcp backend's entries (struct tn__pg_backend), over the mesh and, for
 * large buffers on one host, shared memory; arguments already checked by
 * pg.c; 0 or < 0 with the failure agreed (peer_error). Allreduce: doubling
 * for small buffers, else pg_shm.c's segments or the ring; AVG divides at
 * the end. */
static int tcp_allreduce(struct tn_pg *pg, struct tn_tensor *t, enum tn_reduce_op op)
{
    int P = pg->size;
    int64_t n = tn_numel(t);
    size_t nb = tn_nbytes(t);
    char *buf = tn_data(t);
    bool small = nb <= SMALL_BYTES && (P & (P - 1)) == 0;
    int rc = 1; /* 1: not done yet */
    if (P == 1 || n == 0)
        rc = 0;
    else if (TCP(pg)->shm && nb >= SHM_BYTES)
        rc = tn__pgshm_allreduce(pg, &TCP(pg)->seg, buf, n, t->dtype, op);
    if (rc > 0) {
        char *tmp = malloc(small ? nb : SEGMENT);
        int64_t *off = malloc(sizeof *off * (size_t)(P + 1));
        if (!tmp || !off) {
            free(tmp);
            free(off);
            return tn_set_error(TN_ENOMEM, "allreduce: out of memory");
        }
        rc = small ? allreduce_doubling(pg, buf, n, t->dtype, op, tmp)
                   : allreduce_ring(pg, buf, n, t->dtype, op, tmp, off,
                                    TCP(pg)->shm && nb >= SHM_BYTES);
        free(tmp);
        free(off);
    }
    if (rc < 0)
        return rc;
    if (op == TN_REDUCE_AVG)
        tn__pg_divide(buf, n, t->dtype, P);
    return 0;
}

/* tcp broadcast: a binomial tree from root, or peers reading root's buffer
 * (broadcast_shm). */
static int tcp_broadcast(struct tn_pg *pg, struct tn_tensor *t, int root)
{
    int P = pg->size, vr = (pg->rank - root + P) % P;
    size_t nb = tn_nbytes(t);
    if (TCP(pg)->shm && P > 1 && nb >= SHM_BYTES)
        return broadcast_shm(pg, tn_data(t), nb, root);
    /* a binomial tree rooted at `root` */
    int mask = 1;
    while (mask < P) {
        if (vr & mask) {
            int src = (vr - mask + root) % P;
            int rc = sendrecv(pg, -1, NULL, 0, src, tn_data(t), nb);
            if (rc < 0)
                return rc;
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while (mask > 0) {
        if (vr + mask < P) {
            int dst = (vr + mask + root) % P;
            int rc = sendrecv(pg, dst, tn_data(t), nb, -1, NULL, 0);
            if (rc < 0)
                return rc;
        }
        mask >>= 1;
    }
    return 0;
}

/* tcp allgather: a ring of the blocks, or reading each peer's input
 * (allgather_shm). */
static int tcp_allgather(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in)
{
    size_t nb = tn_nbytes(in);
    char *o = tn_data(out);
    if (TCP(pg)->shm && pg->size > 1 && nb >= SHM_BYTES)
        return allgather_shm(pg, o, tn_data(in), nb);
    int P = pg->size, r = pg->rank;
    memmove(o + (size_t)r * nb, tn_data(in), nb);
    int right = (r + 1) % P, left = (r - 1 + P) % P;
    for (int s = 0; s < P - 1; s++) {
        int sc = ((r - s) % P + P) % P, rcv = ((r - s - 1) % P + P) % P;
        int rc = sendrecv(pg, right, o + (size_t)sc * nb, nb, left, o + (size_t)rcv * nb, nb);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* tcp send: the tensor's bytes to dst, nothing else on the wire. */
static int tcp_send(struct tn_pg *pg, const struct tn_tensor *t, int dst)
{
    return sendrecv(pg, dst, tn_data(t), tn_nbytes(t), -1, NULL, 0);
}

/* tcp recv: the tensor's bytes from src. */
static int tcp_recv(struct tn_pg *pg, struct tn_tensor *t, int src)
{
    return sendrecv(pg, -1, NULL, 0, src, tn_data(t), tn_nbytes(t));
}

/* tcp reduce: every rank sends to root, which reduces in rank order. */
static int tcp_reduce(struct tn_pg *pg, struct tn_tensor *t, enum tn_reduce_op op, int root)
{
    size_t nb = tn_nbytes(t);
    if (pg->rank != root)
        return sendrecv(pg, root, tn_data(t), nb, -1, NULL, 0);
    char *tmp = malloc(nb + 1);
    if (!tmp)
        return tn_set_error(TN_ENOMEM, "reduce: out of memory");
    int rc = 0;
    for (int p = 0; rc == 0 && p < pg->size; p++) {
        if (p == root)
            continue;
        rc = sendrecv(pg, -1, NULL, 0, p, tmp, nb);
        if (rc == 0)
            tn__pg_reduce_into(tn_data(t), tmp, tn_numel(t), t->dtype, op);
    }
    free(tmp);
    if (rc == 0 && op == TN_REDUCE_AVG)
        tn__pg_divide(tn_data(t), tn_numel(t), t->dtype, pg->size);
    return rc;
}

/* tcp gather: every rank sends its input to root's block of out. */
static int tcp_gather(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in,
                      int root)
{
    size_t nb = tn_nbytes(in);
    if (pg->rank != root)
        return sendrecv(pg, root, tn_data(in), nb, -1, NULL, 0);
    char *o = tn_data(out);
    memmove(o + (size_t)root * nb, tn_data(in), nb);
    for (int p = 0; p < pg->size; p++) {
        if (p == root)
            continue;
        int rc = sendrecv(pg, -1, NULL, 0, p, o + (size_t)p * nb, nb);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* tcp scatter: root sends block p of in to rank p. */
static int tcp_scatter(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in,
                       int root)
{
    size_t nb = tn_nbytes(out);
    if (pg->rank != root)
        return sendrecv(pg, -1, NULL, 0, root, tn_data(out), nb);
    const char *i = tn_data(in);
    for (int p = 0; p < pg->size; p++) {
        if (p == root)
            continue;
        int rc = sendrecv(pg, p, i + (size_t)p * nb, nb, -1, NULL, 0);
        if (rc < 0)
            return rc;
    }
    memmove(tn_data(out), i + (size_t)root * nb, nb);
    return 0;
}

/* tcp all_to_all: block to of in goes to rank to, in P - 1 pairwise steps. */
static int tcp_all_to_all(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in)
{
    int P = pg->size, r = pg->rank;
    size_t cb = tn_nbytes(in) / (size_t)P;
    const char *i = tn_data(in);
    char *o = tn_data(out);
    memmove(o + (size_t)r * cb, i + (size_t)r * cb, cb);
    for (int s = 1; s < P; s++) {
        int to = (r + s) % P, from = (r - s + P) % P;
        int rc = sendrecv(pg, to, i + (size_t)to * cb, cb, from, o + (size_t)from * cb, cb);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Whether reduce_scatter runs as an allreduce of a copy (pg.c) rather than
 * through tcp_reduce_scatter: everywhere but the shared-memory path. */
static bool tcp_rs_by_allreduce(const struct tn_pg *pg, const struct tn_tensor *out)
{
    return !(TCP(pg)->shm && pg->size > 1 && tn_nbytes(out) >= SHM_BYTES);
}

/* The collective failed: shut the sockets, so peers still waiting in it see
 * that at once (tn__pg_fail). */
static void tcp_abort(struct tn_pg *pg)
{
    for (int i = 0; TCP(pg)->fds && i < pg->size; i++)
        if (TCP(pg)->fds[i] >= 0)
            shutdown(TCP(pg)->fds[i], SHUT_RDWR);
}

/* Frees the mesh (the group's impl): the shared segments, the sockets. */
static void tcp_destroy(void *impl, bool broken)
{
    struct tcp_mesh *m = impl;
    (void)broken;
    tn__pgshm_free(m->seg);
    for (int i = 0; m->fds && i < m->size; i++)
        if (m->fds[i] >= 0)
            close(m->fds[i]);
    free(m->fds);
    free(m->pids);
    free(m);
}

static const struct tn__pg_backend tcp_backend = {
    .name = "tcp",
    .device = TN_DEVICE_CPU,
    .allreduce = tcp_allreduce,
    .broadcast = tcp_broadcast,
    .allgather = tcp_allgather,
    .barrier = dissemination,
    .reduce = tcp_reduce,
    .gather = tcp_gather,
    .scatter = tcp_scatter,
    .reduce_scatter = reduce_scatter_shm,
    .all_to_all = tcp_all_to_all,
    .send = tcp_send,
    .recv = tcp_recv,
    .destroy = tcp_destroy,
    .abort = tcp_abort,
    .rs_by_allreduce = tcp_rs_by_allreduce,
};

/* ------------------------------------------------------------ the mesh */

/* Reads n bytes from fd before deadline (ms, monotonic); 0, or -1 on
 * timeout, error or EOF. */
static int read_full(int fd, void *p, size_t n, int64_t deadline)
{
    char *c = p;
    while (n) {
        int64_t left = deadline - tn__now_ms();
        if (left <= 0)
            return -1;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, (int)(left > 60000 ? 60000 : left)) <= 0)
            continue;
        ssize_t r = recv(fd, c, n, 0);
        if (r <= 0)
            return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Reads peer's published "host port pid nonce-address nonce"; records the
 * pid and clears the mesh's shm unless this process can read the nonce there.
 * Returns false only for a malformed value. */
static bool shm_probe(struct tn_pg *pg, int peer, const char *published)
{
    char h[300];
    int p = 0, pid = 0;
    unsigned long long where = 0, nonce = 0;
    int got = sscanf(published, "%299s %d %d %llx %llx", h, &p, &pid, &where, &nonce);
    if (got < 2)
        return false;
    uint64_t seen = 0;
    struct iovec l = {&seen, 8}, rm = {(void *)(uintptr_t)where, 8};
    if (got != 5 || pid <= 0 || process_vm_readv(pid, &l, 1, &rm, 1, 0) != 8 || seen != nonce) {
        TCP(pg)->shm = false;
        return true;
    }
    TCP(pg)->pids[peer] = pid;
    return true;
}

/* Probes the higher ranks (the lower ones were probed while connecting),
 * then every rank tells every other whether it could read all its peers:
 * the shared-memory path is on only where all ranks said yes. */
static int shm_agree(struct tn_pg *pg, struct tn_store *store)
{
    const char *off = getenv("TN_PG_NO_SHM");
    if (off && *off && strcmp(off, "0") != 0)
        TCP(pg)->shm = false;
    for (int j = pg->rank + 1; TCP(pg)->shm && j < pg->size; j++) {
        char key[64];
        snprintf(key, sizeof key, "tcp_pg/%d", j);
        void *v;
        size_t vl;
        if (tn_store_get(store, key, &v, &vl) < 0)
            return tn_last_status();
        bool ok = shm_probe(pg, j, v);
        free(v);
        if (!ok)
            return tn_set_error(TN_EFORMAT, "tcp process group: rank %d published a bad address",
                                j);
    }
    int P = pg->size;
    for (int s = 1; s < P; s++) {
        char mine = TCP(pg)->shm, theirs = 0;
        int rc = sendrecv(pg, (pg->rank + s) % P, &mine, 1, (pg->rank - s + P) % P, &theirs, 1);
        if (rc < 0)
            return rc;
        if (!theirs)
            TCP(pg)->shm = false;
    }
    return 0;
}

/* Contract in tensor/dist.h: listens on host (port 0), publishes the address
 * under tcp_pg/<rank> in store (borrowed; the group keeps a reference),
 * connects to every peer (a published address and a peer's rank bytes are
 * untrusted and checked), and maps shared memory for same-host peers unless
 * TN_PG_NO_SHM.  A new group for tn_pg_free; NULL with TN_EINVAL for a bad
 * rank or size, TN_EFORMAT for a bad address, TN_EIO or TN_ETIMEOUT naming
 * the rank that could not be reached. */
struct tn_pg *tn_pg_new_tcp(struct tn_store *store, int rank, int world_size, const char *host,
                            int64_t timeout_ms)
{
    if (!store || world_size < 1 || rank < 0 || rank >= world_size) {
        tn_set_error(TN_EINVAL, "tcp process group: rank %d, world size %d", rank, world_size);
        return NULL;
    }
    if (!host)
        host = "127.0.0.1";
    if (timeout_ms < 0)
        timeout_ms = 30 * 60 * 1000;
    struct tcp_mesh *mesh = calloc(1, sizeof *mesh);
    if (!mesh || !(mesh->fds = malloc(sizeof *mesh->fds * (size_t)world_size)) ||
        !(mesh->pids = calloc((size_t)world_size, sizeof *mesh->pids))) {
        if (mesh)
            free(mesh->fds);
        free(mesh);
        tn_set_error(TN_ENOMEM, "tcp process group: out of memory");
        return NULL;
    }
    for (int i = 0; i < world_size; i++)
        mesh->fds[i] = -1;
    mesh->size = world_size;
    mesh->shm = true;
    struct tn_pg *pg = tn__pg_new_backend(&tcp_backend, mesh, store, rank, world_size, timeout_ms);
    if (!pg)
        return NULL;
    int64_t deadline = tn__now_ms() + timeout_ms;

    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    if (getaddrinfo(host, "0", &hints, &ai) != 0 || !ai) {
        tn_set_error(TN_EINVAL, "tcp process group: cannot resolve %s", host);
        goto fail;
    }
    int lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(lfd, SOMAXCONN) < 0) {
        tn_set_error(TN_EIO, "tcp process group: cannot listen on %s: %s", host, strerror(errno));
        if (lfd >= 0)
            close(lfd);
        freeaddrinfo(ai);
        goto fail;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(lfd, (struct sockaddr *)&ss, &sl);
    int port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                              : ((struct sockaddr_in *)&ss)->sin_port);
    char key[64], addr[320];
    snprintf(key, sizeof key, "tcp_pg/%d", rank);
    /* "host port pid nonce-address nonce": the last three let same-host
     * peers prove they can read this process's memory */
    mesh->nonce = ((uint64_t)getpid() << 32) ^ (uint64_t)tn__now_ms() ^ (uintptr_t)mesh ^
                0x9e3779b97f4a7c15ull;
    snprintf(addr, sizeof addr, "%s %d %d %llx %llx", host, port, (int)getpid(),
             (unsigned long long)(uintptr_t)&mesh->nonce, (unsigned long long)mesh->nonce);
    tn_store_set_timeout(store, timeout_ms);
    if (tn_store_set(store, key, addr, strlen(addr)) < 0) {
        close(lfd);
        goto fail;
    }
    int one = 1;
    for (int j = 0; j < rank; j++) {
        snprintf(key, sizeof key, "tcp_pg/%d", j);
        void *v;
        size_t vl;
        if (tn_store_get(store, key, &v, &vl) < 0) {
            close(lfd);
            goto fail;
        }
        char h[300];
        int p = 0;
        if (sscanf(v, "%299s %d", h, &p) != 2 || !shm_probe(pg, j, v)) {
            free(v);
            close(lfd);
            tn_set_error(TN_EFORMAT, "tcp process group: rank %d published a bad address", j);
            goto fail;
        }
        free(v);
        char ps[16];
        snprintf(ps, sizeof ps, "%d", p);
        struct addrinfo h2 = {.ai_socktype = SOCK_STREAM}, *a2 = NULL;
        int fd = -1;
        if (getaddrinfo(h, ps, &h2, &a2) == 0 && a2) {
            fd = socket(a2->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd >= 0 && connect(fd, a2->ai_addr, a2->ai_addrlen) < 0) {
                close(fd);
                fd = -1;
            }
            freeaddrinfo(a2);
        }
        uint32_t me = (uint32_t)rank;
        if (fd < 0 || send(fd, &me, 4, MSG_NOSIGNAL) != 4) {
            if (fd >= 0)
                close(fd);
            close(lfd);
            tn_set_error(TN_EIO, "tcp process group: rank %d cannot connect to rank %d at %s:%d",
                         rank, j, h, p);
            goto fail;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        mesh->fds[j] = fd;
    }
    for (int k = rank + 1; k < world_size; k++) {
        struct pollfd pf = {.fd = lfd, .events = POLLIN};
        int64_t left = deadline - tn__now_ms();
        int fd = -1;
        if (left > 0 && poll(&pf, 1, (int)(left > 60000 ? 60000 : left)) > 0)
            fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        uint32_t who = 0;
        if (fd < 0 || read_full(fd, &who, 4, deadline) < 0 || who <= (uint32_t)rank ||
            who >= (uint32_t)world_size || mesh->fds[who] >= 0) {
            if (fd >= 0)
                close(fd);
            close(lfd);
            int missing = -1;
            for (int m = rank + 1; m < world_size && missing < 0; m++)
                if (mesh->fds[m] < 0)
                    missing = m;
            tn_set_error(TN_ETIMEOUT, "tcp process group: rank %d never heard from rank %d",
                         rank, missing);
            goto fail;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        mesh->fds[who] = fd;
    }
    close(lfd);
    if (shm_agree(pg, store) < 0)
        goto fail;
    pg->op = "init";
    return pg;
fail:
    tn_pg_free(pg);
    return NULL;
}

/* ------------------------------------------------------------ for pg_shm.c, tests, tn_pg_new */

/* The socket to peer (borrowed; the group closes it), or -1 for a group of
 * another backend. */
int tn__pg_peer_fd(const struct tn_pg *pg, int peer)
{
    return pg->be == &tcp_backend ? TCP(pg)->fds[peer] : -1;
}

/* The peer's pid, or 0 where the group has no shared memory. */
int tn__pg_peer_pid(const struct tn_pg *pg, int peer)
{
    return pg->be == &tcp_backend ? (int)TCP(pg)->pids[peer] : 0;
}

/* Contract in internal.h: the running collective's failure waiting for
 * peer (errno 0: a timeout), agreed with every rank.  Returns its status. */
int tn__pg_peer_error(struct tn_pg *pg, int peer, const char *what)
{
    return peer_error(pg, peer, what);
}

/* True when pg is a tcp group moving large buffers through shared memory. */
bool tn__pg_uses_shm(const struct tn_pg *pg)
{
    return pg->be == &tcp_backend && TCP(pg)->shm;
}

/* The address the tcp process group listens on and advertises to its peers:
 * TN_PG_HOST; else the first IPv4 (else IPv6) address of interface
 * TN_PG_IFNAME; else the address this host uses to reach the store's server
 * (so peers on other hosts can reach it: 127.0.0.1 used to be advertised);
 * else 127.0.0.1. buf holds what is found. NULL (error set) when
 * TN_PG_IFNAME names no interface with an address. */
static const char *pg_host(struct tn_store *store, char *buf, size_t n)
{
    const char *host = getenv("TN_PG_HOST");
    if (host && *host)
        return host;
    const char *ifname = getenv("TN_PG_IFNAME");
    if (ifname && *ifname) {
        struct ifaddrs *ifs = NULL, *found = NULL;
        if (getifaddrs(&ifs) == 0)
            for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
                if (i->ifa_addr && !strcmp(i->ifa_name, ifname) &&
                    (i->ifa_addr->sa_family == AF_INET ||
                     (i->ifa_addr->sa_family == AF_INET6 && !found)))
                    if (!found || found->ifa_addr->sa_family != AF_INET)
                        found = i;
        int rc = found ? getnameinfo(found->ifa_addr,
                                     found->ifa_addr->sa_family == AF_INET
                                         ? sizeof(struct sockaddr_in)
                                         : sizeof(struct sockaddr_in6),
                                     buf, (socklen_t)n, NULL, 0, NI_NUMERICHOST)
                       : -1;
        freeifaddrs(ifs);
        if (rc != 0) {
            tn_set_error(TN_EINVAL, "TN_PG_IFNAME: interface '%s' has no IP address", ifname);
            return NULL;
        }
        return buf;
    }
    if (tn__store_local_addr(store, buf, n) == 0)
        return buf;
    return "127.0.0.1";
}

/* Contract in internal.h: tn_pg_new_tcp on the address TN_PG_HOST or
 * TN_PG_IFNAME names, else the local address of the store's connection,
 * else 127.0.0.1.  NULL with the error set. */
struct tn_pg *tn__pg_new_tcp_env(struct tn_store *store, int rank, int world_size,
                                 int64_t timeout_ms)
{
    char addr[INET6_ADDRSTRLEN + 8];
    const char *host = pg_host(store, addr, sizeof addr);
    if (!host)
        return NULL;
    return tn_pg_new_tcp(store, rank, world_size, host, timeout_ms);
}
