/*
 * lib/dist/pg_tcp.c: the built-in `tcp` process group: a full mesh of TCP
 * connections exchanged through the store (each rank listens, publishes
 * host:port, connects to lower ranks and accepts higher ones, as Gloo
 * does), and collectives over it: ring allreduce (reduce-scatter then
 * allgather), broadcast (binomial tree), allgather, reduce, gather, scatter,
 * reduce_scatter, all_to_all, barrier, send/recv. Every wait has a
 * deadline and its error names the operation, its sequence number and the
 * peer that did not answer.
 */
#include "dist/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

struct tn_pg {
    int rank, size;
    int *fds; /* fds[peer]; -1 for self */
    int64_t timeout_ms;
    uint64_t seq;
    const char *op; /* the running collective, for messages */
};

int tn_pg_rank(const struct tn_pg *pg)
{
    return pg->rank;
}

int tn_pg_size(const struct tn_pg *pg)
{
    return pg->size;
}

static int peer_error(struct tn_pg *pg, int peer, const char *what)
{
    return tn_set_error(errno == 0 || errno == EAGAIN ? TN_ETIMEOUT : TN_EIO,
                        "%s #%llu on rank %d: rank %d %s", pg->op,
                        (unsigned long long)pg->seq, pg->rank, peer, what);
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
            p[n++] = (struct pollfd){.fd = pg->fds[to], .events = POLLOUT};
        }
        if (rn) {
            ri = n;
            p[n++] = (struct pollfd){.fd = pg->fds[from], .events = POLLIN};
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
            ssize_t w = send(pg->fds[to], s, sn, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN && errno != EINTR)
                return peer_error(pg, to, "closed its connection");
            if (w > 0) {
                s += w;
                sn -= (size_t)w;
            }
        }
        if (ri >= 0 && (p[ri].revents & (POLLIN | POLLERR | POLLHUP))) {
            ssize_t g = recv(pg->fds[from], r, rn, MSG_DONTWAIT);
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

static int check_tensor(struct tn_pg *pg, const struct tn_tensor *t)
{
    if (!t)
        return tn_set_error(TN_EINVAL, "%s: the tensor is NULL", pg->op);
    if (t->device.type != TN_DEVICE_CPU)
        return tn_set_error(TN_EDEVICE, "%s: the tcp backend takes CPU tensors", pg->op);
    if (!tn_is_contiguous(t))
        return tn_set_error(TN_EINVAL, "%s: Tensors must be contiguous", pg->op);
    return 0;
}

/* ------------------------------------------------------------ reductions */

static void reduce_into(void *dst, const void *src, int64_t n, enum tn_dtype dt,
                        enum tn_reduce_op op)
{
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
    case TN_COMPLEX64: {
        tn_complex64 *d = dst;
        const tn_complex64 *s = src;
        for (int64_t i = 0; i < n; i++)
            d[i] = op == TN_REDUCE_PRODUCT ? d[i] * s[i] : d[i] + s[i];
        break;
    }
    default: TN_ASSERT(!"a dtype without a reduction");
    }
#undef LOOP
#undef NATIVE
#undef SIXTEEN
}

static void divide(void *buf, int64_t n, enum tn_dtype dt, int by)
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
    default: break;
    }
}

/* ------------------------------------------------------------ collectives */

int tn_pg_allreduce(struct tn_pg *pg, struct tn_tensor *t, enum tn_reduce_op op)
{
    pg->op = "allreduce";
    pg->seq++;
    if (check_tensor(pg, t) < 0)
        return tn_last_status();
    if (op == TN_REDUCE_AVG && !tn_dtype_is_floating(t->dtype) && t->dtype != TN_COMPLEX64)
        return tn_set_error(TN_EDTYPE, "allreduce: AVG needs a floating point tensor, not %s",
                            tn_dtype_name(t->dtype));
    if (t->dtype == TN_COMPLEX64 && (op == TN_REDUCE_MIN || op == TN_REDUCE_MAX))
        return tn_set_error(TN_EDTYPE, "allreduce: MIN and MAX are not defined for complex");
    int P = pg->size, r = pg->rank;
    int64_t n = tn_numel(t);
    size_t es = tn_dtype_size(t->dtype);
    char *buf = tn_data(t);
    if (P > 1 && n > 0) {
        /* chunk k covers [off[k], off[k+1]) elements */
        int64_t *off = malloc(sizeof *off * (size_t)(P + 1));
        int64_t maxc = (n + P - 1) / P;
        char *tmp = malloc((size_t)maxc * es + 1);
        if (!off || !tmp) {
            free(off);
            free(tmp);
            return tn_set_error(TN_ENOMEM, "allreduce: out of memory");
        }
        for (int k = 0; k <= P; k++)
            off[k] = (n * k) / P;
        int right = (r + 1) % P, left = (r - 1 + P) % P;
        int rc = 0;
        for (int s = 0; rc == 0 && s < P - 1; s++) {
            int sc = ((r - s) % P + P) % P, rcv = ((r - s - 1) % P + P) % P;
            rc = sendrecv(pg, right, buf + off[sc] * (int64_t)es, (size_t)(off[sc + 1] - off[sc]) * es,
                          left, tmp, (size_t)(off[rcv + 1] - off[rcv]) * es);
            if (rc == 0)
                reduce_into(buf + off[rcv] * (int64_t)es, tmp, off[rcv + 1] - off[rcv], t->dtype,
                            op);
        }
        for (int s = 0; rc == 0 && s < P - 1; s++) {
            int sc = ((r + 1 - s) % P + P) % P, rcv = ((r - s) % P + P) % P;
            rc = sendrecv(pg, right, buf + off[sc] * (int64_t)es, (size_t)(off[sc + 1] - off[sc]) * es,
                          left, buf + off[rcv] * (int64_t)es, (size_t)(off[rcv + 1] - off[rcv]) * es);
        }
        free(off);
        free(tmp);
        if (rc < 0)
            return rc;
    }
    if (op == TN_REDUCE_AVG)
        divide(buf, n, t->dtype, P);
    return 0;
}

int tn_pg_broadcast(struct tn_pg *pg, struct tn_tensor *t, int root)
{
    pg->op = "broadcast";
    pg->seq++;
    if (check_tensor(pg, t) < 0)
        return tn_last_status();
    if (root < 0 || root >= pg->size)
        return tn_set_error(TN_EINVAL, "broadcast: root %d is not a rank of a group of %d", root,
                            pg->size);
    /* a binomial tree rooted at `root` */
    int P = pg->size, vr = (pg->rank - root + P) % P;
    size_t nb = tn_nbytes(t);
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

int tn_pg_allgather(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in)
{
    pg->op = "allgather";
    pg->seq++;
    if (check_tensor(pg, in) < 0 || check_tensor(pg, out) < 0)
        return tn_last_status();
    size_t nb = tn_nbytes(in);
    if (out->dtype != in->dtype || tn_nbytes(out) != nb * (size_t)pg->size)
        return tn_set_error(TN_EINVAL,
                            "allgather: the output must hold world_size (%d) times the input's "
                            "elements of the same dtype",
                            pg->size);
    char *o = tn_data(out);
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

int tn_pg_barrier(struct tn_pg *pg)
{
    pg->op = "barrier";
    pg->seq++;
    /* dissemination: lg P rounds of one byte */
    int P = pg->size;
    for (int d = 1; d < P; d <<= 1) {
        char x = 1, y;
        int rc = sendrecv(pg, (pg->rank + d) % P, &x, 1, (pg->rank - d + P) % P, &y, 1);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int tn_pg_send(struct tn_pg *pg, const struct tn_tensor *t, int dst)
{
    pg->op = "send";
    pg->seq++;
    if (check_tensor(pg, t) < 0)
        return tn_last_status();
    if (dst < 0 || dst >= pg->size || dst == pg->rank)
        return tn_set_error(TN_EINVAL, "send: bad destination rank %d", dst);
    return sendrecv(pg, dst, tn_data(t), tn_nbytes(t), -1, NULL, 0);
}

int tn_pg_recv(struct tn_pg *pg, struct tn_tensor *t, int src)
{
    pg->op = "recv";
    pg->seq++;
    if (check_tensor(pg, t) < 0)
        return tn_last_status();
    if (src < 0 || src >= pg->size || src == pg->rank)
        return tn_set_error(TN_EINVAL, "recv: bad source rank %d", src);
    return sendrecv(pg, -1, NULL, 0, src, tn_data(t), tn_nbytes(t));
}

static bool same_kind(const struct tn_tensor *a, const struct tn_tensor *b, size_t times)
{
    return a->dtype == b->dtype && tn_nbytes(a) == tn_nbytes(b) * times;
}

int tn_pg_reduce(struct tn_pg *pg, struct tn_tensor *t, enum tn_reduce_op op, int root)
{
    pg->op = "reduce";
    pg->seq++;
    if (check_tensor(pg, t) < 0)
        return tn_last_status();
    if (root < 0 || root >= pg->size)
        return tn_set_error(TN_EINVAL, "reduce: root %d is not a rank of a group of %d", root,
                            pg->size);
    if (op == TN_REDUCE_AVG && !tn_dtype_is_floating(t->dtype) && t->dtype != TN_COMPLEX64)
        return tn_set_error(TN_EDTYPE, "reduce: AVG needs a floating point tensor, not %s",
                            tn_dtype_name(t->dtype));
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
            reduce_into(tn_data(t), tmp, tn_numel(t), t->dtype, op);
    }
    free(tmp);
    if (rc == 0 && op == TN_REDUCE_AVG)
        divide(tn_data(t), tn_numel(t), t->dtype, pg->size);
    return rc;
}

int tn_pg_gather(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in, int root)
{
    pg->op = "gather";
    pg->seq++;
    if (check_tensor(pg, in) < 0)
        return tn_last_status();
    if (root < 0 || root >= pg->size)
        return tn_set_error(TN_EINVAL, "gather: root %d is not a rank of a group of %d", root,
                            pg->size);
    size_t nb = tn_nbytes(in);
    if (pg->rank != root)
        return sendrecv(pg, root, tn_data(in), nb, -1, NULL, 0);
    if (check_tensor(pg, out) < 0)
        return tn_last_status();
    if (!same_kind(out, in, (size_t)pg->size))
        return tn_set_error(TN_EINVAL, "gather: the output must hold world_size (%d) inputs",
                            pg->size);
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

int tn_pg_scatter(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in, int root)
{
    pg->op = "scatter";
    pg->seq++;
    if (check_tensor(pg, out) < 0)
        return tn_last_status();
    if (root < 0 || root >= pg->size)
        return tn_set_error(TN_EINVAL, "scatter: root %d is not a rank of a group of %d", root,
                            pg->size);
    size_t nb = tn_nbytes(out);
    if (pg->rank != root)
        return sendrecv(pg, -1, NULL, 0, root, tn_data(out), nb);
    if (check_tensor(pg, in) < 0)
        return tn_last_status();
    if (!same_kind(in, out, (size_t)pg->size))
        return tn_set_error(TN_EINVAL, "scatter: the input must hold world_size (%d) outputs",
                            pg->size);
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

int tn_pg_reduce_scatter(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in,
                         enum tn_reduce_op op)
{
    if (check_tensor(pg, in) < 0 || check_tensor(pg, out) < 0)
        return tn_last_status();
    if (!same_kind(in, out, (size_t)pg->size))
        return tn_set_error(TN_EINVAL, "reduce_scatter: the input must hold world_size (%d) "
                                       "outputs of the same dtype", pg->size);
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

int tn_pg_all_to_all(struct tn_pg *pg, struct tn_tensor *out, const struct tn_tensor *in)
{
    pg->op = "all_to_all";
    pg->seq++;
    if (check_tensor(pg, in) < 0 || check_tensor(pg, out) < 0)
        return tn_last_status();
    if (!same_kind(in, out, 1) || tn_nbytes(in) % (size_t)pg->size)
        return tn_set_error(TN_EINVAL, "all_to_all: input and output must have the same size "
                                       "and dtype, divisible by world_size (%d)", pg->size);
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

/* ------------------------------------------------------------ the mesh */

void tn_pg_free(struct tn_pg *pg)
{
    if (!pg)
        return;
    for (int i = 0; i < pg->size; i++)
        if (pg->fds[i] >= 0)
            close(pg->fds[i]);
    free(pg->fds);
    free(pg);
}

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
    struct tn_pg *pg = calloc(1, sizeof *pg);
    if (!pg || !(pg->fds = malloc(sizeof *pg->fds * (size_t)world_size))) {
        free(pg);
        tn_set_error(TN_ENOMEM, "tcp process group: out of memory");
        return NULL;
    }
    for (int i = 0; i < world_size; i++)
        pg->fds[i] = -1;
    pg->rank = rank;
    pg->size = world_size;
    pg->timeout_ms = timeout_ms;
    pg->op = "init";
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
    snprintf(addr, sizeof addr, "%s %d", host, port);
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
        if (sscanf(v, "%299s %d", h, &p) != 2) {
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
        pg->fds[j] = fd;
    }
    for (int k = rank + 1; k < world_size; k++) {
        struct pollfd pf = {.fd = lfd, .events = POLLIN};
        int64_t left = deadline - tn__now_ms();
        int fd = -1;
        if (left > 0 && poll(&pf, 1, (int)(left > 60000 ? 60000 : left)) > 0)
            fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        uint32_t who = 0;
        if (fd < 0 || read_full(fd, &who, 4, deadline) < 0 || who <= (uint32_t)rank ||
            who >= (uint32_t)world_size || pg->fds[who] >= 0) {
            if (fd >= 0)
                close(fd);
            close(lfd);
            int missing = -1;
            for (int m = rank + 1; m < world_size && missing < 0; m++)
                if (pg->fds[m] < 0)
                    missing = m;
            tn_set_error(TN_ETIMEOUT, "tcp process group: rank %d never heard from rank %d",
                         rank, missing);
            goto fail;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pg->fds[who] = fd;
    }
    close(lfd);
    pg->op = "init";
    return pg;
fail:
    tn_pg_free(pg);
    return NULL;
}
