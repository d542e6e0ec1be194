/*
 * lib/dist/tcpclient.c: a TCPStore client speaking PyTorch's current
 * protocol (VALIDATE, PING, WAIT + GET, CANCEL_WAIT after a timeout), so it
 * talks to PyTorch 2.x's server and to ours. One blocking socket, one
 * request at a time under a mutex; every read has a deadline.
 */
#include "dist/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct tcp_store {
    struct tn_store base;
    pthread_mutex_t mu;
    int fd;
    char *host;
    int port;
    /* replies read ahead: one recv usually brings a whole reply (a get's
     * length and value, a wait's byte), so one syscall instead of two */
    size_t rpos, rlen;
    char rbuf[4096];
    bool ours; /* the server is tensorkit's: CHECK + GET may be pipelined */
};

#define TS(s) ((struct tcp_store *)(s))

/* TN_EIO naming the server and what failed (err: an errno, 0 when the server
 * closed the connection). */
static int io_error(struct tcp_store *t, const char *what, int err)
{
    return tn_set_error(TN_EIO, "TCPStore client %s:%d: %s: %s", t->host, t->port, what,
                        err ? strerror(err) : "the server closed the connection");
}

/* Sends n bytes on t's socket (t->mu held), retrying short sends; 0 or
 * TN_EIO with the error set. */
static int send_all(struct tcp_store *t, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(t->fd, c, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return io_error(t, "send", errno);
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The socket's SO_RCVTIMEO: a blocking recv wakes at least this often to
 * look at its deadline, so a reply costs one recv and no poll; a deadline
 * nearer than this is met with poll. */
#define RECV_SLICE_MS 200

/* A reply to a small request comes within microseconds, sooner than a
 * sleeping thread wakes: look for it without sleeping for up to
 * RECV_SPIN_NS, then block. */
#define RECV_SPIN_NS 20000

/* recv(2) of up to n bytes that spins RECV_SPIN_NS before it blocks; recv's
 * result and errno. */
static ssize_t recv_soon(int fd, void *p, size_t n)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            return r;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if ((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) > RECV_SPIN_NS)
            return recv(fd, p, n, 0);
    }
}

/* Reads n bytes before deadline (ms, monotonic). TN_ETIMEOUT without a
 * message when it passes: the caller knows the keys. */
static int recv_all(struct tcp_store *t, void *p, size_t n, int64_t deadline)
{
    char *c = p;
    while (n) {
        if (t->rpos < t->rlen) {
            size_t k = t->rlen - t->rpos < n ? t->rlen - t->rpos : n;
            memcpy(c, t->rbuf + t->rpos, k);
            t->rpos += k;
            c += k;
            n -= k;
            continue;
        }
        int64_t left = deadline - tn__now_ms();
        if (left <= 0)
            return TN_ETIMEOUT;
        if (left < RECV_SLICE_MS) {
            struct pollfd pfd = {.fd = t->fd, .events = POLLIN};
            int pr = poll(&pfd, 1, (int)left);
            if (pr < 0 && errno != EINTR)
                return io_error(t, "poll", errno);
            if (pr <= 0)
                continue;
        }
        /* small reads go through the read-ahead buffer, large ones straight
         * to their destination */
        bool direct = n >= sizeof t->rbuf;
        ssize_t r = recv_soon(t->fd, direct ? c : t->rbuf, direct ? n : sizeof t->rbuf);
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue; /* EAGAIN: the slice passed */
            return io_error(t, "recv", errno);
        }
        if (r == 0)
            return io_error(t, "recv", 0);
        if (direct) {
            c += r;
            n -= (size_t)r;
        } else {
            t->rpos = 0;
            t->rlen = (size_t)r;
        }
    }
    return 0;
}

/* Reads a little-endian i64 reply before deadline; 0, TN_ETIMEOUT or TN_EIO. */
static int recv_i64(struct tcp_store *t, int64_t *v, int64_t deadline)
{
    unsigned char b[8];
    int rc = recv_all(t, b, 8, deadline);
    if (rc == 0)
        *v = (int64_t)tn__rd64(b);
    return rc;
}

/* Reads a str reply (u64 length, bytes) into a malloc'd *v (NUL-terminated;
 * the caller frees it); the length the server sent is checked against
 * TN_STORE_MAX_VALUE before allocating. */
static int recv_bytes(struct tcp_store *t, void **v, size_t *vl, int64_t deadline)
{
    int64_t n = 0;
    int rc = recv_i64(t, &n, deadline);
    if (rc < 0)
        return rc;
    if (n < 0 || (uint64_t)n > TN_STORE_MAX_VALUE)
        return tn_set_error(TN_EFORMAT, "TCPStore client %s:%d: the server sent a value of %lld bytes",
                            t->host, t->port, (long long)n);
    char *b = malloc((size_t)n + 1);
    if (!b)
        return tn_set_error(TN_ENOMEM, "TCPStore client: out of memory");
    rc = recv_all(t, b, (size_t)n, deadline);
    if (rc < 0) {
        free(b);
        return rc;
    }
    b[n] = 0;
    *v = b;
    *vl = (size_t)n;
    return 0;
}

/* The wire form of a user key: "/" + key. */
static int put_key(struct tn__dbuf *b, const char *k, size_t kl)
{
    if (tn__db_u64(b, kl + 1) < 0 || tn__db_put(b, "/", 1) < 0)
        return TN_ENOMEM;
    return tn__db_put(b, k, kl);
}

/* Sends b (rc < 0: building it ran out of memory) and frees it; 0 or an
 * error. */
static int send_buf(struct tcp_store *t, struct tn__dbuf *b, int rc)
{
    if (rc < 0) {
        tn__db_free(b);
        return tn_set_error(TN_ENOMEM, "TCPStore client: out of memory");
    }
    rc = send_all(t, b->data, b->len);
    tn__db_free(b);
    return rc;
}

/* A deadline for replies that come at once (not waits). */
static int64_t reply_deadline(struct tn_store *s)
{
    return tn__now_ms() + tn_store_timeout(s);
}

/* rc, with TN_ETIMEOUT turned into PyTorch's 'wait timeout' message naming
 * k. */
static int timeout_error(struct tn_store *s, int rc, const char *k)
{
    if (rc == TN_ETIMEOUT) {
        const char *keys[1] = {k};
        return tn__wait_timeout_error(tn_store_timeout(s), keys, 1, "/");
    }
    return rc;
}

/* Sends WAIT for the keys and reads STOP_WAITING; on timeout cancels the wait
 * and drains the replies so the connection stays usable. Mutex held. */
static int do_wait(struct tcp_store *t, const char *const *keys, size_t n, int64_t timeout_ms)
{
    struct tn__dbuf b = {0};
    int rc = tn__db_u8(&b, TN_STORE_CMD_WAIT) | tn__db_u64(&b, n);
    for (size_t i = 0; i < n; i++)
        rc |= put_key(&b, keys[i], strlen(keys[i]));
    if ((rc = send_buf(t, &b, rc)) < 0)
        return rc;
    unsigned char r;
    rc = recv_all(t, &r, 1, tn__now_ms() + timeout_ms);
    if (rc == 0)
        return r == 0 ? 0
                      : tn_set_error(TN_EFORMAT, "TCPStore client %s:%d: unexpected reply %d to wait",
                                     t->host, t->port, r);
    if (rc != TN_ETIMEOUT)
        return rc;
    unsigned char cancel = TN_STORE_CMD_CANCEL_WAIT;
    if (send_all(t, &cancel, 1) == 0) {
        int64_t dl = tn__now_ms() + 5000;
        /* A late STOP_WAITING (0) may come before WAIT_CANCELED (1). */
        while (recv_all(t, &r, 1, dl) == 0 && r != 1)
            ;
    }
    return tn__wait_timeout_error(timeout_ms, keys, n, "/");
}

/* tn__store_ops.set: SET, no reply awaited; 0 or TN_EIO. */
static int ts_set(struct tn_store *s, const char *k, size_t kl, const void *v, size_t vl)
{
    struct tcp_store *t = TS(s);
    struct tn__dbuf b = {0};
    int rc = tn__db_u8(&b, TN_STORE_CMD_SET) | put_key(&b, k, kl) | tn__db_str(&b, v, vl);
    pthread_mutex_lock(&t->mu);
    rc = send_buf(t, &b, rc);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* tn__store_ops.get: WAIT then GET (pipelined with CHECK against our
 * server); *v malloc'd, the caller frees it. */
static int ts_get(struct tn_store *s, const char *k, size_t kl, void **v, size_t *vl)
{
    struct tcp_store *t = TS(s);
    const char *keys[1] = {k};
    (void)kl;
    pthread_mutex_lock(&t->mu);
    int rc = 0;
    if (t->ours) {
        /* CHECK and GET in one round trip; the value counts when the key
         * was there (our server answers a missing key's GET with nothing) */
        struct tn__dbuf b = {0};
        rc = tn__db_u8(&b, TN_STORE_CMD_CHECK) | tn__db_u64(&b, 1) | put_key(&b, k, kl) |
             tn__db_u8(&b, TN_STORE_CMD_GET) | put_key(&b, k, kl);
        rc = send_buf(t, &b, rc);
        unsigned char ready = 1;
        int64_t dl = reply_deadline(s);
        if (rc == 0)
            rc = recv_all(t, &ready, 1, dl);
        if (rc == 0)
            rc = recv_bytes(t, v, vl, dl);
        if (rc == 0 && ready == 0) {
            pthread_mutex_unlock(&t->mu);
            return 0;
        }
        if (rc == 0)
            free(*v);
        rc = timeout_error(s, rc, k);
    }
    if (rc == 0)
        rc = do_wait(t, keys, 1, tn_store_timeout(s));
    if (rc == 0) {
        struct tn__dbuf b = {0};
        rc = tn__db_u8(&b, TN_STORE_CMD_GET) | put_key(&b, k, kl);
        rc = send_buf(t, &b, rc);
        if (rc == 0)
            rc = timeout_error(s, recv_bytes(t, v, vl, reply_deadline(s)), k);
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* tn__store_ops.add: ADD, the new value into *out. */
static int ts_add(struct tn_store *s, const char *k, size_t kl, int64_t d, int64_t *out)
{
    struct tcp_store *t = TS(s);
    struct tn__dbuf b = {0};
    int rc = tn__db_u8(&b, TN_STORE_CMD_ADD) | put_key(&b, k, kl) | tn__db_u64(&b, (uint64_t)d);
    pthread_mutex_lock(&t->mu);
    rc = send_buf(t, &b, rc);
    if (rc == 0)
        rc = timeout_error(s, recv_i64(t, out, reply_deadline(s)), k);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* tn__store_ops.compare_set: COMPARE_SET; *v the value now stored, malloc'd,
 * the caller frees it. */
static int ts_compare_set(struct tn_store *s, const char *k, size_t kl, const void *ev,
                          size_t el, const void *dv, size_t dl, void **v, size_t *vl)
{
    struct tcp_store *t = TS(s);
    struct tn__dbuf b = {0};
    int rc = tn__db_u8(&b, TN_STORE_CMD_COMPARE_SET) | put_key(&b, k, kl) | tn__db_str(&b, ev, el) |
             tn__db_str(&b, dv, dl);
    pthread_mutex_lock(&t->mu);
    rc = send_buf(t, &b, rc);
    if (rc == 0)
        rc = timeout_error(s, recv_bytes(t, v, vl, reply_deadline(s)), k);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* tn__store_ops.wait: WAIT for every key within timeout_ms (CANCEL_WAIT on
 * timeout, the socket stays usable). */
static int ts_wait(struct tn_store *s, const char *const *keys, size_t n, int64_t timeout_ms)
{
    struct tcp_store *t = TS(s);
    pthread_mutex_lock(&t->mu);
    int rc = do_wait(t, keys, n, timeout_ms);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* tn__store_ops.check: CHECK; 1 when every key exists, 0 when not, < 0 on
 * error. */
static int ts_check(struct tn_store *s, const char *const *keys, size_t n)
{
    struct tcp_store *t = TS(s);
    struct tn__dbuf b = {0};
    int rc = tn__db_u8(&b, TN_STORE_CMD_CHECK) | tn__db_u64(&b, n);
    for (size_t i = 0; i < n; i++)
        rc |= put_key(&b, keys[i], strlen(keys[i]));
    pthread_mutex_lock(&t->mu);
    rc = send_buf(t, &b, rc);
    unsigned char r = 1;
    if (rc == 0)
        rc = recv_all(t, &r, 1, reply_deadline(s));
    pthread_mutex_unlock(&t->mu);
    if (rc == TN_ETIMEOUT)
        return tn__wait_timeout_error(tn_store_timeout(s), keys, n, "/");
    return rc < 0 ? rc : r == 0;
}

/* tn__store_ops.del: DELETE_KEY; 1 when the key existed, else 0. */
static int ts_del(struct tn_store *s, const char *k, size_t kl)
{
    struct tcp_store *t = TS(s);
    struct tn__dbuf b = {0};
    int rc = tn__db_u8(&b, TN_STORE_CMD_DELETE_KEY) | put_key(&b, k, kl);
    int64_t r = 0;
    pthread_mutex_lock(&t->mu);
    rc = send_buf(t, &b, rc);
    if (rc == 0)
        rc = timeout_error(s, recv_i64(t, &r, reply_deadline(s)), k);
    pthread_mutex_unlock(&t->mu);
    return rc < 0 ? rc : r != 0;
}

/* tn__store_ops.num_keys: GETNUMKEYS into *out. */
static int ts_num_keys(struct tn_store *s, int64_t *out)
{
    struct tcp_store *t = TS(s);
    unsigned char op = TN_STORE_CMD_GETNUMKEYS;
    pthread_mutex_lock(&t->mu);
    int rc = send_all(t, &op, 1);
    if (rc == 0)
        rc = recv_i64(t, out, reply_deadline(s));
    pthread_mutex_unlock(&t->mu);
    if (rc == TN_ETIMEOUT)
        rc = tn_set_error(rc, "TCPStore client %s:%d: num_keys timed out", t->host, t->port);
    return rc;
}

/* Sends op (APPEND or QUEUE_PUSH) with key and value, no reply awaited; 0 or
 * an error. */
static int push_like(struct tn_store *s, int op, const char *k, size_t kl, const void *v,
                     size_t vl)
{
    struct tcp_store *t = TS(s);
    struct tn__dbuf b = {0};
    int rc = tn__db_u8(&b, (uint8_t)op) | put_key(&b, k, kl) | tn__db_str(&b, v, vl);
    pthread_mutex_lock(&t->mu);
    rc = send_buf(t, &b, rc);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* tn__store_ops.append: APPEND. */
static int ts_append(struct tn_store *s, const char *k, size_t kl, const void *v, size_t vl)
{
    return push_like(s, TN_STORE_CMD_APPEND, k, kl, v, vl);
}

/* tn__store_ops.queue_push: QUEUE_PUSH. */
static int ts_queue_push(struct tn_store *s, const char *k, size_t kl, const void *v, size_t vl)
{
    return push_like(s, TN_STORE_CMD_QUEUE_PUSH, k, kl, v, vl);
}

/* tn__store_ops.multi_get: WAIT for every key, then MULTI_GET; v[i]
 * malloc'd, the caller frees each. */
static int ts_multi_get(struct tn_store *s, const char *const *keys, size_t n, void **v,
                        size_t *vl)
{
    struct tcp_store *t = TS(s);
    pthread_mutex_lock(&t->mu);
    int rc = do_wait(t, keys, n, tn_store_timeout(s));
    if (rc == 0) {
        struct tn__dbuf b = {0};
        rc = tn__db_u8(&b, TN_STORE_CMD_MULTI_GET) | tn__db_u64(&b, n);
        for (size_t i = 0; i < n; i++)
            rc |= put_key(&b, keys[i], strlen(keys[i]));
        rc = send_buf(t, &b, rc);
        size_t i = 0;
        for (; rc == 0 && i < n; i++)
            rc = recv_bytes(t, &v[i], &vl[i], reply_deadline(s));
        if (rc < 0) {
            if (rc == TN_ETIMEOUT)
                rc = tn__wait_timeout_error(tn_store_timeout(s), keys, n, "/");
            for (size_t j = 0; j + 1 < i; j++)
                free(v[j]);
        }
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* tn__store_ops.multi_set: MULTI_SET, no reply awaited. */
static int ts_multi_set(struct tn_store *s, const char *const *keys, size_t n,
                        const void *const *v, const size_t *vl)
{
    struct tcp_store *t = TS(s);
    struct tn__dbuf b = {0};
    int rc = tn__db_u8(&b, TN_STORE_CMD_MULTI_SET) | tn__db_u64(&b, n);
    for (size_t i = 0; i < n; i++)
        rc |= put_key(&b, keys[i], strlen(keys[i])) | tn__db_str(&b, v[i], vl[i]);
    pthread_mutex_lock(&t->mu);
    rc = send_buf(t, &b, rc);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* tn__store_ops.queue_pop: QUEUE_POP (with block, WAIT for the key first);
 * *v malloc'd, the caller frees it. */
static int ts_queue_pop(struct tn_store *s, const char *k, size_t kl, bool block, void **v,
                        size_t *vl)
{
    struct tcp_store *t = TS(s);
    const char *keys[1] = {k};
    int64_t deadline = tn__now_ms() + tn_store_timeout(s);
    pthread_mutex_lock(&t->mu);
    int rc;
    for (;;) {
        if (block) {
            int64_t left = deadline - tn__now_ms();
            rc = do_wait(t, keys, 1, left > 0 ? left : 0);
            if (rc < 0)
                break;
        }
        struct tn__dbuf b = {0};
        rc = tn__db_u8(&b, TN_STORE_CMD_QUEUE_POP) | put_key(&b, k, kl);
        rc = send_buf(t, &b, rc);
        int64_t len = 0;
        if (rc == 0)
            rc = timeout_error(s, recv_i64(t, &len, reply_deadline(s)), k);
        if (rc < 0)
            break;
        if (len > 0) {
            rc = timeout_error(s, recv_bytes(t, v, vl, reply_deadline(s)), k);
            break;
        }
        if (!block) {
            rc = tn_set_error(TN_EINDEX, "queue_pop: the queue %s is empty", k);
            break;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* tn__store_ops.queue_len: QUEUE_LEN into *out. */
static int ts_queue_len(struct tn_store *s, const char *k, size_t kl, int64_t *out)
{
    struct tcp_store *t = TS(s);
    struct tn__dbuf b = {0};
    int rc = tn__db_u8(&b, TN_STORE_CMD_QUEUE_LEN) | put_key(&b, k, kl);
    pthread_mutex_lock(&t->mu);
    rc = send_buf(t, &b, rc);
    if (rc == 0)
        rc = timeout_error(s, recv_i64(t, out, reply_deadline(s)), k);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* tn__store_ops.destroy: closes the socket, frees the store. */
static void ts_destroy(struct tn_store *s)
{
    struct tcp_store *t = TS(s);
    if (t->fd >= 0)
        close(t->fd);
    pthread_mutex_destroy(&t->mu);
    free(t->host);
    free(t);
}

/* The local address of the connection to the server; on the server's
 * abstract unix socket (the server is on this host) the address this client
 * was given for it, which is then one of this host's. */
static int ts_local_addr(struct tn_store *s, char *buf, size_t n)
{
    struct tcp_store *t = TS(s);
    struct sockaddr_storage a;
    socklen_t al = sizeof a;
    pthread_mutex_lock(&t->mu);
    int rc = getsockname(t->fd, (struct sockaddr *)&a, &al);
    pthread_mutex_unlock(&t->mu);
    if (rc == 0 && (a.ss_family == AF_INET || a.ss_family == AF_INET6))
        return getnameinfo((struct sockaddr *)&a, al, buf, (socklen_t)n, NULL, 0,
                           NI_NUMERICHOST) == 0
                   ? 0
                   : -1;
    if (snprintf(buf, n, "%s", t->host) >= (int)n)
        return -1;
    return 0;
}

static const struct tn__store_ops tcp_ops = {
    .name = "TCPStore",
    .set = ts_set,
    .get = ts_get,
    .add = ts_add,
    .compare_set = ts_compare_set,
    .wait = ts_wait,
    .check = ts_check,
    .del = ts_del,
    .num_keys = ts_num_keys,
    .append = ts_append,
    .multi_get = ts_multi_get,
    .multi_set = ts_multi_set,
    .queue_push = ts_queue_push,
    .queue_pop = ts_queue_pop,
    .queue_len = ts_queue_len,
    .local_addr = ts_local_addr,
    .destroy = ts_destroy,
};

/* connect() that gives up at deadline (ms; the kernel's own limit for an
 * address that never answers is about 2 minutes, far past a join timeout);
 * 0, or -1 with errno set (ETIMEDOUT at the deadline). fd stays blocking. */
static int connect_by(int fd, const struct sockaddr *a, socklen_t al, int64_t deadline)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -1;
    int rc = connect(fd, a, al);
    if (rc < 0 && errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int64_t left = deadline - tn__now_ms();
        if (left < 100) /* a last attempt still gets a round trip's chance */
            left = 100;
        int n = poll(&p, 1, left < INT32_MAX ? (int)left : INT32_MAX);
        int e = 0;
        socklen_t el = sizeof e;
        if (n == 0)
            e = ETIMEDOUT;
        else if (n < 0)
            e = errno;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
            e = errno;
        rc = e ? -1 : 0;
        errno = e;
    }
    int e = errno;
    if (rc == 0 && fcntl(fd, F_SETFL, fl) < 0)
        return -1;
    errno = e;
    return rc;
}

/* One connect attempt to any address of host:port, given up at deadline. */
static int try_connect(const char *host, int port, int64_t deadline, int *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host, ps, &hints, &ai);
    if (rc) {
        *err = -rc;
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        if (connect_by(fd, a->ai_addr, a->ai_addrlen, deadline) == 0)
            break;
        *err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

/* Makes fd's blocking receives return every RECV_SLICE_MS, so a deadline is
 * looked at. */
static void set_slice(int fd)
{
    struct timeval tv = {0, RECV_SLICE_MS * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

/* VALIDATE, AUTH when there is a token, PING, and with probe the CHECK of
 * the key only our server reports present (t->ours), all in one send;
 * 0 or < 0. */
static int handshake(struct tcp_store *t, const char *tok, bool probe, int64_t dl)
{
    struct tn__dbuf b = {0};
    int rc = tn__db_u8(&b, TN_STORE_CMD_VALIDATE) | tn__db_u32(&b, TN_STORE_MAGIC);
    if (tok)
        rc |= tn__db_u8(&b, TN_STORE_CMD_AUTH) | tn__db_str(&b, tok, strlen(tok));
    uint32_t nonce = (uint32_t)getpid();
    rc |= tn__db_u8(&b, TN_STORE_CMD_PING) | tn__db_u32(&b, nonce);
    if (probe)
        rc |= tn__db_u8(&b, TN_STORE_CMD_CHECK) | tn__db_u64(&b, 1) |
              tn__db_str(&b, TN_STORE_PROBE_KEY, TN_STORE_PROBE_KEYLEN);
    rc = send_buf(t, &b, rc);
    unsigned char r[4];
    if (rc == 0 && tok) {
        rc = recv_all(t, r, 1, dl);
        if (rc == 0 && r[0] != 1)
            rc = TN_EFORMAT;
    }
    if (rc == 0)
        rc = recv_all(t, r, 4, dl);
    if (rc == 0 && tn__rd32(r) != nonce)
        rc = TN_EFORMAT;
    if (rc == 0 && probe) {
        rc = recv_all(t, r, 1, dl); /* the probe: 0 (present) from our server only */
        if (rc == 0)
            t->ours = r[0] == 0;
    }
    return rc;
}

/* Whether the connection's two ends have one address: the server is on
 * this host. */
static bool same_host(int fd)
{
    struct sockaddr_storage a, b;
    socklen_t al = sizeof a, bl = sizeof b;
    if (getsockname(fd, (struct sockaddr *)&a, &al) < 0 ||
        getpeername(fd, (struct sockaddr *)&b, &bl) < 0 || a.ss_family != b.ss_family)
        return false;
    if (a.ss_family == AF_INET)
        return ((struct sockaddr_in *)&a)->sin_addr.s_addr ==
               ((struct sockaddr_in *)&b)->sin_addr.s_addr;
    if (a.ss_family == AF_INET6)
        return !memcmp(&((struct sockaddr_in6 *)&a)->sin6_addr,
                       &((struct sockaddr_in6 *)&b)->sin6_addr, 16);
    return false;
}

/* Our server also listens on an abstract unix socket and names it to the
 * GET of TN_STORE_UNIX_KEY. A client on the server's host moves there
 * (the handshake again, token included): a round trip through it costs the
 * kernel about a third less than one through loopback TCP. When anything
 * in that fails the client stays on TCP; < 0 only when TCP itself failed.
 * TN_STORE_NO_UNIX=1 keeps every client on TCP. */
static int try_unix(struct tcp_store *t, const char *tok, int64_t dl)
{
    const char *off = getenv("TN_STORE_NO_UNIX");
    if ((off && *off && strcmp(off, "0")) || !same_host(t->fd))
        return 0;
    struct tn__dbuf b = {0};
    int rc = tn__db_u8(&b, TN_STORE_CMD_GET) | tn__db_str(&b, TN_STORE_UNIX_KEY, TN_STORE_UNIX_KEYLEN);
    void *name = NULL;
    size_t nl = 0;
    if ((rc = send_buf(t, &b, rc)) < 0 || (rc = recv_bytes(t, &name, &nl, dl)) < 0)
        return rc;
    struct sockaddr_un ua = {.sun_family = AF_UNIX};
    int fd = -1;
    if (nl > 1 && nl <= sizeof ua.sun_path) {
        memcpy(ua.sun_path, name, nl);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    }
    free(name);
    if (fd < 0)
        return 0;
    int tcp = t->fd;
    t->fd = fd;
    set_slice(fd);
    if (connect(fd, (struct sockaddr *)&ua, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + nl)) < 0 ||
        handshake(t, tok, false, dl) < 0) {
        close(fd);
        t->fd = tcp;
        t->rpos = t->rlen = 0;
        return 0;
    }
    close(tcp);
    return 0;
}

/* Contract in tensor/dist.h: connects with backoff (10 ms doubling to 1 s)
 * until timeout_ms (< 0: the default), handshakes (TN_STORE_TOKEN when
 * set), and moves to our server's unix socket on the same host.  Replies
 * from the server are untrusted and length-checked.  A new store the
 * caller releases (tn_store_release); NULL with TN_EINVAL, TN_ETIMEOUT or
 * TN_EIO naming host:port. */
struct tn_store *tn_store_tcp_connect(const char *host, int port, int64_t timeout_ms)
{
    if (!host || port <= 0 || port > 65535) {
        tn_set_error(TN_EINVAL, "TCPStore client: bad address %s:%d", host ? host : "(null)",
                     port);
        return NULL;
    }
    struct tcp_store *t = calloc(1, sizeof *t);
    if (!t || !(t->host = strdup(host))) {
        free(t);
        tn_set_error(TN_ENOMEM, "TCPStore client: out of memory");
        return NULL;
    }
    tn__store_init(&t->base, &tcp_ops);
    pthread_mutex_init(&t->mu, NULL);
    t->port = port;
    t->fd = -1;
    if (timeout_ms < 0)
        timeout_ms = TN_STORE_DEFAULT_TIMEOUT_MS;
    tn_store_set_timeout(&t->base, timeout_ms);
    int64_t deadline = tn__now_ms() + timeout_ms;
    int err = 0, backoff = 10;
    for (;;) {
        t->fd = try_connect(host, port, deadline, &err);
        if (t->fd >= 0 || tn__now_ms() >= deadline)
            break;
        struct timespec ts = {0, (long)backoff * 1000000L};
        nanosleep(&ts, NULL);
        backoff = backoff * 2 > 1000 ? 1000 : backoff * 2;
    }
    if (t->fd < 0) {
        tn_set_error(TN_ETIMEOUT, "TCPStore client: cannot connect to %s:%d within %lld ms: %s",
                     host, port, (long long)timeout_ms,
                     err < 0 ? gai_strerror(-err) : strerror(err));
        ts_destroy(&t->base);
        return NULL;
    }
    int one = 1;
    setsockopt(t->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    set_slice(t->fd);
    const char *tok = getenv("TN_STORE_TOKEN");
    if (tok && !*tok)
        tok = NULL;
    int64_t dl = tn__now_ms() + (timeout_ms < 10000 ? 10000 : timeout_ms);
    int rc = handshake(t, tok, true, dl);
    if (rc == 0 && t->ours)
        rc = try_unix(t, tok, dl);
    if (rc < 0) {
        tn_set_error(TN_EIO,
                     "TCPStore client: %s:%d refused the handshake%s (not a TCPStore, an older "
                     "PyTorch, or a wrong TN_STORE_TOKEN)",
                     host, port, tok ? " with TN_STORE_TOKEN" : "");
        ts_destroy(&t->base);
        return NULL;
    }
    return &t->base;
}

/* True when s is a TCPStore client now on its server's unix socket (tests). */
bool tn__store_tcp_local(const struct tn_store *s)
{
    if (!s || s->ops != &tcp_ops)
        return false;
    struct sockaddr_storage a;
    socklen_t al = sizeof a;
    return getsockname(((const struct tcp_store *)s)->fd, (struct sockaddr *)&a, &al) == 0 &&
           a.ss_family == AF_UNIX;
}
