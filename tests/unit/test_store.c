/*
 * test_store: the stores (hash, prefix, file, TCP server with our client),
 * the server against garbage, truncated and oversized requests, token
 * authentication, and tn_dist_init over tcp:// and file:// with two ranks
 * as threads.
 */
#include "tn_test.h"

/* Both private headers at once: the store's commands and the pickle
 * opcodes used to share the TN_OP_ prefix and could not. */
#include "dist/internal.h"
#include "io/internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <unistd.h>

static char *getstr(struct tn_store *s, const char *k)
{
    void *v = NULL;
    size_t n = 0;
    if (tn_store_get(s, k, &v, &n) < 0)
        return NULL;
    return v; /* NUL-terminated by every store */
}

/* Sets "later" to "x" after 100 ms through store p. */
static void *set_later(void *p)
{
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
    tn_store_set(p, "later", "x", 1);
    return NULL;
}

/* What every store kind must do the same way. */
static void common_ops(struct tn_store *s, bool queues)
{
    tn_store_set_timeout(s, 200);
    assert_int_equal(tn_store_set(s, "a", "1", 1), 0);
    char *v = getstr(s, "a");
    assert_non_null(v);
    assert_string_equal(v, "1");
    free(v);
    int64_t n;
    assert_int_equal(tn_store_add(s, "cnt", 5, &n), 0);
    assert_int_equal(n, 5);
    assert_int_equal(tn_store_add(s, "cnt", -2, &n), 0);
    assert_int_equal(n, 3);
    v = getstr(s, "cnt");
    assert_string_equal(v, "3");
    free(v);
    assert_int_equal(tn_store_add(s, "a", 1, &n), 0);
    assert_int_equal(n, 2);

    void *cs;
    size_t cl;
    assert_int_equal(tn_store_compare_set(s, "m", "x", 1, "y", 1, &cs, &cl), 0);
    assert_int_equal(cl, 1);
    assert_memory_equal(cs, "x", 1); /* missing + non-empty expected: expected */
    free(cs);
    assert_int_equal(tn_store_compare_set(s, "m", "", 0, "y", 1, &cs, &cl), 0);
    assert_memory_equal(cs, "y", 1);
    free(cs);
    assert_int_equal(tn_store_compare_set(s, "m", "y", 1, "z", 1, &cs, &cl), 0);
    assert_memory_equal(cs, "z", 1);
    free(cs);
    assert_int_equal(tn_store_compare_set(s, "m", "q", 1, "w", 1, &cs, &cl), 0);
    assert_memory_equal(cs, "z", 1);
    free(cs);

    const char *keys[2] = {"a", "nope"};
    assert_int_equal(tn_store_check(s, keys, 1), 1);
    assert_int_equal(tn_store_check(s, keys, 2), 0);
    assert_int_equal(tn_store_wait(s, keys, 1, 100), 0);
    assert_int_equal(tn_store_wait(s, keys, 2, 50), TN_ETIMEOUT);
    assert_non_null(strstr(tn_last_error(), "wait timeout after 50ms"));
    assert_non_null(strstr(tn_last_error(), "nope"));
    /* a get that times out names its key, and the store still works after */
    v = getstr(s, "missing_key");
    assert_null(v);
    assert_int_equal(tn_last_status(), TN_ETIMEOUT);
    assert_non_null(strstr(tn_last_error(), "missing_key"));

    assert_int_equal(tn_store_num_keys(s, &n), 0);
    int64_t before = n;
    assert_int_equal(tn_store_delete(s, "a"), 1);
    assert_int_equal(tn_store_delete(s, "a"), 0);
    assert_int_equal(tn_store_num_keys(s, &n), 0);
    assert_int_equal(n, before - 1);

    assert_int_equal(tn_store_append(s, "ap", "ab", 2), 0);
    assert_int_equal(tn_store_append(s, "ap", "cd", 2), 0);
    v = getstr(s, "ap");
    assert_string_equal(v, "abcd");
    free(v);

    const char *mk[3] = {"k1", "k2", "k3"};
    const void *mv[3] = {"v1", "", "v333"};
    size_t ml[3] = {2, 0, 4};
    assert_int_equal(tn_store_multi_set(s, mk, 3, mv, ml), 0);
    void *got[3];
    size_t gl[3];
    assert_int_equal(tn_store_multi_get(s, mk, 3, got, gl), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gl[i], ml[i]);
        assert_memory_equal(got[i], mv[i], ml[i]);
        free(got[i]);
    }
    if (queues) {
        assert_int_equal(tn_store_queue_push(s, "q", "one", 3), 0);
        assert_int_equal(tn_store_queue_push(s, "q", "two", 3), 0);
        assert_int_equal(tn_store_queue_len(s, "q", &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(tn_store_queue_pop(s, "q", true, &cs, &cl), 0);
        assert_memory_equal(cs, "one", 3);
        free(cs);
        assert_int_equal(tn_store_queue_pop(s, "q", false, &cs, &cl), 0);
        assert_memory_equal(cs, "two", 3);
        free(cs);
        assert_int_equal(tn_store_queue_pop(s, "q", false, &cs, &cl), TN_EINDEX);
        assert_int_equal(tn_store_queue_pop(s, "q", true, &cs, &cl), TN_ETIMEOUT);
        assert_int_equal(tn_store_queue_len(s, "q", &n), 0);
        assert_int_equal(n, 0);
    }
}

static void test_hash(void **state)
{
    (void)state;
    struct tn_store *s = tn_store_hash_new();
    assert_non_null(s);
    common_ops(s, true);
    tn_store_release(s);
}

static void test_prefix(void **state)
{
    (void)state;
    struct tn_store *h = tn_store_hash_new();
    struct tn_store *p = tn_store_prefix_new("pg", h);
    assert_non_null(p);
    common_ops(p, true);
    assert_int_equal(tn_store_set(p, "x", "7", 1), 0);
    char *v = getstr(h, "pg/x");
    assert_non_null(v);
    assert_string_equal(v, "7");
    free(v);
    tn_store_release(h); /* the prefix store keeps it alive */
    v = getstr(p, "x");
    assert_string_equal(v, "7");
    free(v);
    tn_store_release(p);
}

/* Creates the file named by the mkstemp template path (filled in). */
static void make_temp(char *path)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
}

static void test_file(void **state)
{
    (void)state;
    char path[] = "/tmp/tn_filestore_XXXXXX";
    make_temp(path);
    struct tn_store *a = tn_store_file_new(path, 2);
    if (!a)
        print_message("%s\n", tn_last_error());
    struct tn_store *b = tn_store_file_new(path, 2);
    assert_non_null(a);
    assert_non_null(b);
    common_ops(a, false);
    assert_int_equal(tn_store_set(a, "shared", "yes", 3), 0);
    char *v = getstr(b, "shared");
    assert_non_null(v);
    assert_string_equal(v, "yes");
    free(v);
    tn_store_release(a);
    assert_int_equal(access(path, F_OK), 0);
    tn_store_release(b); /* the last of 2 workers deletes the file */
    assert_int_equal(access(path, F_OK), -1);
}

/* FileStore multi_set is all or nothing: with the file size limit leaving
 * room for the first record but not the second, it fails and no key is
 * set, the log as it was (one set per key left "a" set; one write without
 * the cut left a's record and part of b's). Then it succeeds, seen by a
 * second store on the file. In a child, for the limit and SIGXFSZ. */
static int file_multi_set_child(const char *path)
{
    signal(SIGXFSZ, SIG_IGN);
    struct tn_store *s = tn_store_file_new(path, 0);
    if (!s || tn_store_set(s, "x", "1", 1) < 0)
        return 10;
    struct stat st;
    if (stat(path, &st) < 0)
        return 11;
    char big[100];
    memset(big, 'b', sizeof big);
    const char *keys[2] = {"a", "b"};
    const void *vals[2] = {"1", big};
    size_t lens[2] = {1, sizeof big};
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = (rlim_t)st.st_size + 20; /* a's record is 11 bytes */
    if (setrlimit(RLIMIT_FSIZE, &lim) < 0)
        return 12;
    int rc = tn_store_multi_set(s, keys, 2, vals, lens);
    setrlimit(RLIMIT_FSIZE, &old);
    if (rc != TN_EIO || !strstr(tn_last_error(), path))
        return 13;
    struct stat st2;
    if (stat(path, &st2) < 0 || st2.st_size != st.st_size)
        return 14;
    if (tn_store_check(s, keys, 1) != 0 || tn_store_check(s, keys + 1, 1) != 0)
        return 15;
    if (tn_store_multi_set(s, keys, 2, vals, lens) < 0)
        return 16;
    struct tn_store *t = tn_store_file_new(path, 0);
    if (!t || tn_store_check(t, keys, 2) != 1)
        return 17;
    tn_store_release(t);
    tn_store_release(s);
    return 0;
}

static void test_file_multi_set_atomic(void **state)
{
    (void)state;
    char path[] = "/tmp/tn_filestore_XXXXXX";
    make_temp(path);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(file_multi_set_child(path));
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    unlink(path);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* HashStore multi_set under one lock: a reader woken by a[i] always finds
 * b[i] too (one set per key let it in between). */
struct pair_reader {
    struct tn_store *s;
    int n, torn;
};

static void *read_pairs(void *arg)
{
    struct pair_reader *r = arg;
    for (int i = 0; i < r->n; i++) {
        char a[16], b[16];
        snprintf(a, sizeof a, "a%d", i);
        snprintf(b, sizeof b, "b%d", i);
        const char *ka[1] = {a}, *kb[1] = {b};
        if (tn_store_wait(r->s, ka, 1, 10000) < 0 || tn_store_check(r->s, kb, 1) != 1)
            r->torn++;
    }
    return NULL;
}

static void test_hash_multi_set_atomic(void **state)
{
    (void)state;
    struct tn_store *s = tn_store_hash_new();
    assert_non_null(s);
    struct pair_reader r = {.s = s, .n = 2000};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, read_pairs, &r), 0);
    for (int i = 0; i < r.n; i++) {
        char a[16], b[16];
        snprintf(a, sizeof a, "a%d", i);
        snprintf(b, sizeof b, "b%d", i);
        const char *keys[2] = {a, b};
        const void *vals[2] = {"1", "2"};
        size_t lens[2] = {1, 1};
        assert_int_equal(tn_store_multi_set(s, keys, 2, vals, lens), 0);
    }
    pthread_join(th, NULL);
    assert_int_equal(r.torn, 0);
    /* a key given twice ends with its last value */
    const char *dk[2] = {"d", "d"};
    const void *dv[2] = {"first", "last"};
    size_t dl[2] = {5, 4};
    assert_int_equal(tn_store_multi_set(s, dk, 2, dv, dl), 0);
    char *v = getstr(s, "d");
    assert_string_equal(v, "last");
    free(v);
    tn_store_release(s);
}

static struct tn_store_server *start(const char *token)
{
    struct tn_store_server_opts o = {.host = "127.0.0.1", .port = 0, .listen_fd = -1,
                                     .token = token};
    struct tn_store_server *srv = tn_store_server_start(&o);
    assert_non_null(srv);
    assert_true(tn_store_server_port(srv) > 0);
    return srv;
}

/* A listen_fd that is no listening TCP socket is refused with one line
 * naming it, and stays the caller's (open); a listening one is served on
 * its port. The unchecked getsockname gave a port from uninitialised
 * memory and a server on a descriptor that could never accept. */
static void test_listen_fd(void **state)
{
    (void)state;
    int fd = open("/dev/null", O_RDONLY);
    assert_true(fd >= 0);
    struct tn_store_server_opts o = {.listen_fd = fd};
    assert_null(tn_store_server_start(&o));
    assert_int_equal(tn_last_status(), TN_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "listen_fd %d: ", fd);
    assert_non_null(strstr(tn_last_error(), want));
    assert_true(fcntl(fd, F_GETFD) >= 0);
    close(fd);

    int us = socket(AF_UNIX, SOCK_STREAM, 0); /* a socket, not TCP */
    assert_true(us >= 0);
    o.listen_fd = us;
    assert_null(tn_store_server_start(&o));
    assert_non_null(strstr(tn_last_error(), "is not a TCP socket"));
    close(us);

    int ts = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(ts >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(ts, (struct sockaddr *)&a, sizeof a), 0);
    o.listen_fd = ts; /* bound, not listening */
    assert_null(tn_store_server_start(&o));
    assert_non_null(strstr(tn_last_error(), "is not listening"));
    assert_int_equal(listen(ts, 16), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(ts, (struct sockaddr *)&a, &al), 0);
    struct tn_store_server *srv = tn_store_server_start(&o);
    assert_non_null(srv);
    assert_int_equal(tn_store_server_port(srv), ntohs(a.sin_port));
    struct tn_store *c = tn_store_tcp_connect("127.0.0.1", ntohs(a.sin_port), 5000);
    assert_non_null(c);
    assert_int_equal(tn_store_set(c, "k", "v", 1), 0);
    char *v = getstr(c, "k");
    assert_string_equal(v, "v");
    free(v);
    tn_store_release(c);
    tn_store_server_stop(srv); /* closes ts, the server's now */
}

/* The lines a server's log gave (test_emfile), on the server's thread. */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_lines[1024];

static void log_line(void *arg, const char *line)
{
    (void)arg;
    pthread_mutex_lock(&log_mu);
    size_t n = strlen(log_lines);
    snprintf(log_lines + n, sizeof log_lines - n, "%s\n", line);
    pthread_mutex_unlock(&log_mu);
}

static char *logged(void)
{
    pthread_mutex_lock(&log_mu);
    char *s = strdup(log_lines);
    pthread_mutex_unlock(&log_mu);
    return s;
}

/* Out of descriptors (accept4 fails with EMFILE), the server sheds a pending
 * client through its spare descriptor: the client sees its connection
 * closed at once, where it used to stay in the backlog while the server's
 * loop spun on the listener; the server serves again once descriptors are
 * back. Its log says so once when the shortage starts and once when it
 * ends. */
static void test_emfile(void **state)
{
    (void)state;
    unsetenv("TN_STORE_TOKEN");
    struct tn_store_server_opts so = {.host = "127.0.0.1", .listen_fd = -1, .log = log_line};
    struct tn_store_server *srv = tn_store_server_start(&so);
    assert_non_null(srv);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)tn_store_server_port(srv))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(c >= 0);
    struct rlimit old, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    int next = dup(0);
    assert_true(next >= 0);
    close(next);
    low = old;
    low.rlim_cur = (rlim_t)next + 8;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    int fill[16], n = 0, fd;
    while (n < 16 && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
        fill[n++] = fd;
    assert_int_equal(errno, EMFILE);
    assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof a), 0); /* in the backlog */
    struct pollfd p = {.fd = c, .events = POLLIN};
    int ready = poll(&p, 1, 20000);
    char b;
    ssize_t got = ready == 1 ? recv(c, &b, 1, 0) : -2;
    for (int i = 0; i < n; i++)
        close(fill[i]);
    close(c);
    setrlimit(RLIMIT_NOFILE, &old);
    assert_int_equal(ready, 1);
    assert_true(got == 0 || (got == -1 && errno == ECONNRESET));
    struct tn_store *s = tn_store_tcp_connect("127.0.0.1", tn_store_server_port(srv), 5000);
    assert_non_null(s);
    assert_int_equal(tn_store_set(s, "k", "v", 1), 0);
    tn_store_release(s);
    tn_store_server_stop(srv);
    char *l = logged();
    char want[512];
    snprintf(want, sizeof want,
             "store: out of file descriptors (EMFILE: the process's limit, 0 clients, ulimit -n "
             "%llu): new clients are shed until some close\n"
             "store: accepting clients again (1 shed so far)\n",
             (unsigned long long)low.rlim_cur);
    assert_string_equal(l, want);
    free(l);
}

/* The tcp process group's advertised address (key tcp_pg/RANK, "HOST PORT
 * ..."), as rank 0 of a world of 1 writes it. */
static char *pg_advertised(struct tn_store *s)
{
    struct tn_pg *pg = tn_pg_new("tcp", s, 0, 1, 5000);
    if (!pg)
        return NULL;
    char *v = getstr(s, "tcp_pg/0");
    tn_pg_free(pg);
    return v;
}

/* The tcp process group advertises the address this host reaches the store
 * with (it advertised 127.0.0.1, which peers on other hosts cannot reach),
 * over TCP and over the server's unix socket alike; TN_PG_IFNAME takes an
 * interface's address, TN_PG_HOST an address as given. */
static void test_pg_host(void **state)
{
    (void)state;
    unsetenv("TN_STORE_TOKEN");
    unsetenv("TN_PG_HOST");
    unsetenv("TN_PG_IFNAME");
    char ip[64] = "";
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) == 0)
        for (struct ifaddrs *i = ifs; i && !*ip; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
                continue;
            if (!inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip, sizeof ip) ||
                !strncmp(ip, "127.", 4))
                *ip = 0;
        }
    freeifaddrs(ifs);
    if (!*ip)
        skip(); /* no non-loopback IPv4 address on this host */
    struct tn_store_server_opts o = {.host = NULL, .port = 0, .listen_fd = -1};
    struct tn_store_server *srv = tn_store_server_start(&o);
    assert_non_null(srv);
    char want[80];
    snprintf(want, sizeof want, "%s ", ip);
    for (int unix_ok = 0; unix_ok < 2; unix_ok++) {
        if (unix_ok)
            unsetenv("TN_STORE_NO_UNIX");
        else
            setenv("TN_STORE_NO_UNIX", "1", 1);
        struct tn_store *s = tn_store_tcp_connect(ip, tn_store_server_port(srv), 5000);
        assert_non_null(s);
        char *v = pg_advertised(s);
        assert_non_null(v);
        assert_memory_equal(v, want, strlen(want));
        free(v);
        setenv("TN_PG_IFNAME", "lo", 1);
        v = pg_advertised(s);
        assert_non_null(v);
        assert_memory_equal(v, "127.0.0.1 ", 10);
        free(v);
        setenv("TN_PG_IFNAME", "no-such-if0", 1);
        assert_null(tn_pg_new("tcp", s, 0, 1, 5000));
        assert_string_equal(tn_last_error(), "TN_PG_IFNAME: interface 'no-such-if0' has no IP address");
        unsetenv("TN_PG_IFNAME");
        setenv("TN_PG_HOST", "127.0.0.1", 1);
        v = pg_advertised(s);
        assert_non_null(v);
        assert_memory_equal(v, "127.0.0.1 ", 10);
        free(v);
        unsetenv("TN_PG_HOST");
        tn_store_release(s);
    }
    unsetenv("TN_STORE_NO_UNIX");
    tn_store_server_stop(srv);
}

static void test_tcp(void **state)
{
    (void)state;
    unsetenv("TN_STORE_TOKEN");
    struct tn_store_server *srv = start(NULL);
    struct tn_store *s = tn_store_tcp_connect("127.0.0.1", tn_store_server_port(srv), 5000);
    assert_non_null(s);
    common_ops(s, true);
    /* a second client sees the first one's keys; a get waits for a set */
    struct tn_store *t = tn_store_tcp_connect("127.0.0.1", tn_store_server_port(srv), 5000);
    assert_non_null(t);
    char *v = getstr(t, "ap");
    assert_string_equal(v, "abcd");
    free(v);
    /* the one-round-trip get (CHECK + GET, our server only) falls back to
     * waiting for a key that is not there yet, and returns an empty value */
    pthread_t th;
    pthread_create(&th, NULL, set_later, s);
    tn_store_set_timeout(t, 5000);
    v = getstr(t, "later");
    pthread_join(th, NULL);
    assert_non_null(v);
    assert_string_equal(v, "x");
    free(v);
    assert_int_equal(tn_store_set(s, "empty", "", 0), 0);
    v = getstr(t, "empty");
    assert_string_equal(v, "");
    free(v);
    tn_store_release(t);
    tn_store_release(s);
    tn_store_server_stop(srv);
}

bool tn__store_tcp_local(const struct tn_store *s); /* lib/dist/internal.h */

/* A client on the server's host moves to its unix socket (test_token: with
 * the token); TN_STORE_NO_UNIX=1 keeps it on TCP; both serve alike. */
static void test_tcp_unix(void **state)
{
    (void)state;
    unsetenv("TN_STORE_TOKEN");
    for (int off = 0; off < 2; off++) {
        if (off)
            setenv("TN_STORE_NO_UNIX", "1", 1);
        struct tn_store_server *srv = start(NULL);
        struct tn_store *s = tn_store_tcp_connect("127.0.0.1", tn_store_server_port(srv), 5000);
        assert_non_null(s);
        assert_int_equal(tn__store_tcp_local(s), !off);
        common_ops(s, true);
        tn_store_release(s);
        tn_store_server_stop(srv);
        unsetenv("TN_STORE_NO_UNIX");
    }
}

/* Sends bytes on a fresh connection and reports whether the server closed
 * it (reading EOF) within a second. */
static bool server_drops(int port, const void *bytes, size_t n)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t w = send(fd, bytes, n, MSG_NOSIGNAL);
    (void)w;
    char buf[64];
    ssize_t r;
    while ((r = recv(fd, buf, sizeof buf, 0)) > 0)
        ;
    close(fd);
    return r == 0;
}

/* A plain TCP connection to the server on loopback port. */
static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Sends a handshake and the start of a SET of an 8 MiB value with 3 MiB of it,
 * on a new connection; returns the socket. */
static int partial_set(int port)
{
    int fd = raw_connect(port);
    unsigned char head[] = {0x00, 0xCE, 0xF7, 0x85, 0x3C, 0x01, 1, 0, 0, 0, 0, 0, 0, 0, 'k',
                            0, 0, 0x80, 0, 0, 0, 0, 0}; /* key "k", value 8 MiB */
    size_t n = (size_t)3 << 20;
    char *body = calloc(1, n);
    assert_non_null(body);
    assert_int_equal(send(fd, head, sizeof head, MSG_NOSIGNAL), (ssize_t)sizeof head);
    for (size_t off = 0; off < n;) {
        ssize_t w = send(fd, body + off, n - off, MSG_NOSIGNAL);
        if (w <= 0)
            break; /* dropped while sending */
        off += (size_t)w;
    }
    free(body);
    return fd;
}

/* Whether the server closed fd (within 20 s). */
static bool closed_by_server(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char b;
    return poll(&p, 1, 20000) == 1 && recv(fd, &b, 1, 0) <= 0;
}

/* The input all connections hold is bounded (TN_STORE_MAX_BUFFERED, here
 * 4 MiB): of two clients holding 3 MiB of an unfinished SET each, the one
 * that passes the bound is dropped (both were held; which one passes first,
 * and whether the other is over 1 MiB at that moment too, depends on the
 * order the server reads them). The server goes on serving others. */
static void test_buffered_bound(void **state)
{
    (void)state;
    unsetenv("TN_STORE_TOKEN");
    setenv("TN_STORE_MAX_BUFFERED", "4194304", 1);
    struct tn_store_server *srv = start(NULL);
    unsetenv("TN_STORE_MAX_BUFFERED");
    int port = tn_store_server_port(srv);
    int a = partial_set(port);
    int b = partial_set(port);
    struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
    assert_true(poll(p, 2, 20000) >= 1);
    int dropped = (p[0].revents & (POLLIN | POLLHUP)) ? a : b;
    assert_true(closed_by_server(dropped));
    struct tn_store *s = tn_store_tcp_connect("127.0.0.1", port, 5000);
    assert_non_null(s);
    assert_int_equal(tn_store_set(s, "x", "y", 1), 0);
    tn_store_release(s);
    close(a);
    close(b);
    tn_store_server_stop(srv);
}

/* A client that sends part of a request and then nothing is dropped once
 * the sender timeout passes (TN_STORE_SENDER_TIMEOUT_MS, here 200 ms; it was
 * held for ever); a client that sent nothing, or a whole request, is not. */
static void test_slow_sender(void **state)
{
    (void)state;
    unsetenv("TN_STORE_TOKEN");
    setenv("TN_STORE_SENDER_TIMEOUT_MS", "200", 1);
    struct tn_store_server *srv = start(NULL);
    unsetenv("TN_STORE_SENDER_TIMEOUT_MS");
    int port = tn_store_server_port(srv);
    int fd = raw_connect(port);
    unsigned char head[] = {0x00, 0xCE, 0xF7, 0x85, 0x3C, 0x01, 1, 0}; /* a SET cut short */
    assert_int_equal(send(fd, head, sizeof head, MSG_NOSIGNAL), (ssize_t)sizeof head);
    assert_true(closed_by_server(fd));
    close(fd);
    /* an idle client (a whole request sent) keeps its connection */
    struct tn_store *s = tn_store_tcp_connect("127.0.0.1", port, 5000);
    assert_non_null(s);
    assert_int_equal(tn_store_set(s, "x", "y", 1), 0);
    usleep(600000);
    char *v = getstr(s, "x");
    assert_non_null(v);
    assert_string_equal(v, "y");
    free(v);
    tn_store_release(s);
    tn_store_server_stop(srv);
}

static void test_garbage(void **state)
{
    (void)state;
    unsetenv("TN_STORE_TOKEN");
    struct tn_store_server *srv = start(NULL);
    int port = tn_store_server_port(srv);
    /* a SET whose key claims 2^62 bytes, after a valid handshake */
    unsigned char huge[] = {0x00, 0xCE, 0xF7, 0x85, 0x3C, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x40};
    assert_true(server_drops(port, huge, sizeof huge));
    /* the same in the 1.x numbering */
    unsigned char huge1[] = {0x00, 0, 0, 0, 0, 0, 0, 0, 0x40};
    assert_true(server_drops(port, huge1, sizeof huge1));
    /* an HTTP probe, an unknown opcode, a wrong magic */
    const char *http = "GET / HTTP/1.0\r\n\r\n";
    assert_true(server_drops(port, http, strlen(http)));
    unsigned char unk[] = {0x00, 0xCE, 0xF7, 0x85, 0x3C, 0x63};
    assert_true(server_drops(port, unk, sizeof unk));
    unsigned char many[] = {0x00, 0xCE, 0xF7, 0x85, 0x3C, 0x06, 0xff, 0xff, 0xff, 0xff,
                            0xff, 0xff, 0xff, 0x7f};
    assert_true(server_drops(port, many, sizeof many));
    /* random bytes, many times */
    srand(7);
    for (int i = 0; i < 50; i++) {
        unsigned char rnd[64];
        for (size_t j = 0; j < sizeof rnd; j++)
            rnd[j] = (unsigned char)rand();
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
        ssize_t w = send(fd, rnd, (size_t)(1 + rand() % 64), MSG_NOSIGNAL);
        (void)w;
        close(fd); /* truncated requests: the server must forget them */
    }
    /* the server still serves */
    struct tn_store *s = tn_store_tcp_connect("127.0.0.1", port, 5000);
    assert_non_null(s);
    assert_int_equal(tn_store_set(s, "alive", "1", 1), 0);
    char *v = getstr(s, "alive");
    assert_string_equal(v, "1");
    free(v);
    tn_store_release(s);
    tn_store_server_stop(srv);
}

static void test_token(void **state)
{
    (void)state;
    struct tn_store_server *srv = start("s3cret");
    int port = tn_store_server_port(srv);
    unsetenv("TN_STORE_TOKEN");
    assert_null(tn_store_tcp_connect("127.0.0.1", port, 2000));
    assert_non_null(strstr(tn_last_error(), "handshake"));
    setenv("TN_STORE_TOKEN", "wrong", 1);
    assert_null(tn_store_tcp_connect("127.0.0.1", port, 2000));
    setenv("TN_STORE_TOKEN", "s3cret", 1);
    struct tn_store *s = tn_store_tcp_connect("127.0.0.1", port, 2000);
    assert_non_null(s);
    assert_true(tn__store_tcp_local(s)); /* the token asked on the unix socket too */
    assert_int_equal(tn_store_set(s, "k", "v", 1), 0);
    char *v = getstr(s, "k");
    assert_string_equal(v, "v");
    free(v);
    tn_store_release(s);
    unsetenv("TN_STORE_TOKEN");
    tn_store_server_stop(srv);
}

/* Many clients at once, each waiting on a key one last client sets. */
struct waiter_arg {
    int port;
    int ok;
};

static void *waiter(void *p)
{
    struct waiter_arg *a = p;
    struct tn_store *s = tn_store_tcp_connect("127.0.0.1", a->port, 10000);
    if (!s)
        return NULL;
    int64_t n;
    tn_store_add(s, "arrived", 1, &n);
    char *v = getstr(s, "go");
    a->ok = v && strcmp(v, "now") == 0;
    free(v);
    tn_store_release(s);
    return NULL;
}

static void test_many_clients(void **state)
{
    (void)state;
    unsetenv("TN_STORE_TOKEN");
    struct tn_store_server *srv = start(NULL);
    enum { N = 64 };
    pthread_t th[N];
    struct waiter_arg args[N];
    for (int i = 0; i < N; i++) {
        args[i] = (struct waiter_arg){tn_store_server_port(srv), 0};
        assert_int_equal(pthread_create(&th[i], NULL, waiter, &args[i]), 0);
    }
    struct tn_store *s = tn_store_tcp_connect("127.0.0.1", tn_store_server_port(srv), 5000);
    const char *k[1] = {"arrived"};
    assert_int_equal(tn_store_wait(s, k, 1, 10000), 0);
    for (int tries = 0; tries < 1000; tries++) {
        int64_t n;
        assert_int_equal(tn_store_add(s, "arrived", 0, &n), 0);
        if (n == N)
            break;
        usleep(10000);
    }
    assert_int_equal(tn_store_set(s, "go", "now", 3), 0);
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_true(args[i].ok);
    }
    tn_store_release(s);
    tn_store_server_stop(srv);
}

struct rank_arg {
    const char *url;
    int rank;
    int rc;
    char got[16];
};

static void *rank_main(void *p)
{
    struct rank_arg *a = p;
    struct tn_dist_info info;
    a->rc = tn_dist_init(a->url, a->rank, -1, 10000, &info);
    if (a->rc < 0)
        print_message("rank %d: %s\n", a->rank, tn_last_error());
    if (a->rc < 0)
        return NULL;
    char key[16];
    snprintf(key, sizeof key, "r%d", a->rank);
    tn_store_set(info.store, key, key, strlen(key));
    snprintf(key, sizeof key, "r%d", 1 - a->rank);
    char *v = getstr(info.store, key);
    if (v)
        snprintf(a->got, sizeof a->got, "%s", v);
    free(v);
    /* rank 0 hosts the store: it leaves last */
    const char *done[1] = {"done1"};
    if (a->rank == 1)
        tn_store_set(info.store, "done1", "", 0);
    else
        tn_store_wait(info.store, done, 1, 10000);
    tn_dist_finish(&info);
    return NULL;
}

static void two_ranks(const char *url)
{
    struct rank_arg a[2] = {{url, 0, -99, ""}, {url, 1, -99, ""}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, rank_main, &a[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(a[0].rc, 0);
    assert_int_equal(a[1].rc, 0);
    assert_string_equal(a[0].got, "r1");
    assert_string_equal(a[1].got, "r0");
}

static void test_dist_init(void **state)
{
    (void)state;
    unsetenv("TN_STORE_TOKEN");
    /* a free port: bind port 0, read it, close it */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t sl = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &sl);
    close(fd);
    char url[128];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d?world_size=2", ntohs(a.sin_port));
    two_ranks(url);

    char path[] = "/tmp/tn_distinit_XXXXXX";
    fd = mkstemp(path);
    close(fd);
    unlink(path);
    snprintf(url, sizeof url, "file://%s?world_size=2", path);
    two_ranks(url);
    assert_int_equal(access(path, F_OK), -1);

    /* env:// without the variables says which one is missing */
    unsetenv("MASTER_ADDR");
    struct tn_dist_info info;
    assert_int_equal(tn_dist_init("env://", 0, 1, 1000, &info), TN_EINVAL);
    assert_non_null(strstr(tn_last_error(), "MASTER_ADDR expected, but not set"));
    /* a lone rank that waits for a second one that never comes */
    snprintf(url, sizeof url, "file://%s?rank=0&world_size=2", path);
    assert_int_equal(tn_dist_init(url, -1, -1, 300, &info), TN_ETIMEOUT);
    assert_non_null(strstr(tn_last_error(), "1/2 clients joined"));
    unlink(path);
}

/* The command codes are PyTorch's TCPStore QueryType, in its order. */
static void test_command_codes(void **state)
{
    (void)state;
    assert_int_equal(TN_STORE_CMD_VALIDATE, 0);
    assert_int_equal(TN_STORE_CMD_SET, 1);
    assert_int_equal(TN_STORE_CMD_GET, 3);
    assert_int_equal(TN_STORE_CMD_WAIT, 6);
    assert_int_equal(TN_STORE_CMD_APPEND, 9);
    assert_int_equal(TN_STORE_CMD_PING, 13);
    assert_int_equal(TN_STORE_CMD_QUEUE_LEN, 16);
    assert_int_equal(TN_OP_STOP, '.'); /* and the pickle opcodes beside them */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_command_codes), cmocka_unit_test(test_hash),         cmocka_unit_test(test_prefix),
        cmocka_unit_test(test_file),         cmocka_unit_test(test_tcp),
        cmocka_unit_test(test_file_multi_set_atomic), cmocka_unit_test(test_hash_multi_set_atomic),
        cmocka_unit_test(test_listen_fd),
        cmocka_unit_test(test_tcp_unix),
        cmocka_unit_test(test_garbage),      cmocka_unit_test(test_token),
        cmocka_unit_test(test_many_clients), cmocka_unit_test(test_dist_init),
        cmocka_unit_test(test_emfile),       cmocka_unit_test(test_pg_host),
        cmocka_unit_test(test_buffered_bound), cmocka_unit_test(test_slow_sender),
    };
    return TN_RUN_TESTS(tests);
}
