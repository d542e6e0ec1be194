/* bin/trun/rendezvous.c: the dynamic rendezvous.
 *
 * With --nnodes MIN:MAX, or --rdzv-backend c10d and --nnodes N (N > 1: the
 * same with MIN = MAX = N, as torchrun's c10d backend), every trun of the job meets in the store at the
 * rendezvous endpoint (hosted by the trun that can bind it on this host),
 * round by round, under "rdzv/<run id>/<round>/": each adds itself to
 * "joined" (its arrival order is its node rank); the MIN-th to arrive
 * gives the others until the last-call timeout (or MAX nodes) and writes
 * the member count to "closed", which every node waits for (the join
 * timeout). A node whose worker fails writes "failed": every node stops
 * its workers and, with restarts left, all meet again in the next round,
 * whose number is the workers' TORCHELASTIC_RESTART_COUNT. A node that
 * comes after its round closed adds itself to the round's "waiting" and
 * waits for the next round; the running nodes see it and, while the round
 * has room, start the next round with it without using a restart. A trun
 * leaving at the job's end sets "done", which sends waiting nodes home. */
#include "trun.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>

struct tn_store *rdzv;

/* Whether two socket addresses name the same IPv4 or IPv6 host (ports aside). */
static bool same_host(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return false;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
    return false;
}

/* Whether the rendezvous endpoint's host is this host: a loopback address,
 * "localhost", this host's name, or a name or address that resolves to an
 * address of one of this host's interfaces (an endpoint given as an IP used
 * to be hosted by no node: only the name was compared). */
bool endpoint_is_local(const char *host)
{
    if (!strncmp(host, "127.", 4) || !strcmp(host, "localhost") || !strcmp(host, "::1") ||
        !strcmp(host, hostname))
        return true;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    struct ifaddrs *ifs = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return false;
    bool local = false;
    if (getifaddrs(&ifs) == 0)
        for (struct addrinfo *r = res; r && !local; r = r->ai_next)
            for (struct ifaddrs *i = ifs; i && !local; i = i->ifa_next)
                local = i->ifa_addr && same_host(r->ai_addr, i->ifa_addr);
    freeifaddrs(ifs);
    freeaddrinfo(res);
    return local;
}

/* The address this host uses to reach the rendezvous endpoint (a UDP
 * socket's route: connect() sends nothing), into buf; else this host's
 * name, which the other nodes may not resolve. */
static void route_addr(char *buf, size_t n)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM}, *res = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", opt.master_port);
    snprintf(buf, n, "%s", hostname);
    if (getaddrinfo(opt.master_addr, port, &hints, &res) != 0)
        return;
    int fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_storage a;
    socklen_t al = sizeof a;
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &al) == 0)
        getnameinfo((struct sockaddr *)&a, al, buf, (socklen_t)n, NULL, 0, NI_NUMERICHOST);
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
}

int rdzv_round;

static void rdzv_key(char *k, size_t n, const char *what)
{
    snprintf(k, n, "rdzv/%s/%d/%s", opt.run_id, rdzv_round, what);
}

static int rdzv_fail(const char *what)
{
    fprintf(stderr, "trun: rendezvous round %d: %s: %s\n", rdzv_round, what, tn_last_error());
    return -1;
}

/* The round never closed within the join timeout: says so with the nodes
 * that joined it (count and host names, from the round's "hosts") against
 * the minimum, so the user sees which nodes came and how many did not.
 * Returns -1. */
static int rdzv_join_timeout(const char *joined, const char *hosts)
{
    char why[512];
    snprintf(why, sizeof why, "%s", tn_last_error());
    tn_store_set_timeout(rdzv, 5000);
    int64_t count = 0;
    void *names = NULL;
    size_t nl = 0;
    if (tn_store_add(rdzv, joined, 0, &count) < 0 || tn_store_get(rdzv, hosts, &names, &nl) < 0) {
        fprintf(stderr, "trun: rendezvous round %d: waiting for the other nodes: %s\n",
                rdzv_round, why);
        return -1;
    }
    long long missing = count < opt.min_nodes ? (long long)(opt.min_nodes - count) : 0;
    fprintf(stderr,
            "trun: rendezvous round %d: waiting for the other nodes: %s; %lld of %s%d "
            "nodes joined (%.*s), %lld never came\n",
            rdzv_round, why, (long long)count, opt.elastic ? "at least " : "", opt.min_nodes,
            (int)nl, (char *)names, missing);
    free(names);
    return -1;
}

static bool rdzv_has(const char *k)
{
    const char *keys[1] = {k};
    return tn_store_check(rdzv, keys, 1) == 1;
}

/* A node that came after round rdzv_round closed (or filled up): it says
 * so in the round's "waiting", which the running nodes see (they stop
 * their workers and meet it in the next round while the round has fewer
 * than MAX nodes), then waits until a node of the running group starts the
 * next round, or the job ends. Returns 0 when the next round started, -1
 * (said why) when the job ended or the join timeout passed. */
static int rdzv_wait_next(void)
{
    char k[300], next[300], done[300];
    rdzv_key(k, sizeof k, "waiting");
    if (tn_store_add(rdzv, k, 1, NULL) < 0)
        return rdzv_fail("waiting for the next round");
    fprintf(stderr, "trun: rendezvous round %d is closed; waiting for the next round\n",
            rdzv_round);
    rdzv_round++;
    rdzv_key(next, sizeof next, "joined");
    snprintf(done, sizeof done, "rdzv/%s/done", opt.run_id);
    for (int64_t until = now_ms() + (int64_t)(opt.join_timeout * 1000);;) {
        if (rdzv_has(next))
            return 0;
        if (rdzv_has(done)) {
            fprintf(stderr, "trun: the job ended before this node could join it\n");
            return -1;
        }
        if (now_ms() >= until) {
            fprintf(stderr, "trun: rendezvous round %d: no round started within the join "
                            "timeout (%g s)\n", rdzv_round, opt.join_timeout);
            return -1;
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Joins round rdzv_round, or the next one when it came too late: sets
 * opt.node_rank and opt.nnodes, or -1. */
int rendezvous(void)
{
    static bool counted;
    if (!counted) {
        /* every trun that ever joined, for the host's last wait */
        char k[300];
        snprintf(k, sizeof k, "rdzv/%s/nodes", opt.run_id);
        if (tn_store_add(rdzv, k, 1, NULL) < 0)
            return rdzv_fail("join");
        counted = true;
        /* a node starting late begins at the job's latest round */
        for (;;) {
            rdzv_round++;
            rdzv_key(k, sizeof k, "joined");
            if (!rdzv_has(k)) {
                rdzv_round--;
                break;
            }
        }
    }
    for (;;) {
        char joined[300], closed[300];
        rdzv_key(joined, sizeof joined, "joined");
        rdzv_key(closed, sizeof closed, "closed");
        int64_t idx = 0;
        if (tn_store_add(rdzv, joined, 1, &idx) < 0)
            return rdzv_fail("join");
        idx--;
        char hosts[300], me[300];
        rdzv_key(hosts, sizeof hosts, "hosts");
        snprintf(me, sizeof me, "%s%s", idx ? ", " : "", hostname);
        if (idx < opt.max_nodes && tn_store_append(rdzv, hosts, me, strlen(me)) < 0)
            return rdzv_fail("join");
        if (idx >= opt.max_nodes) {
            if (rdzv_wait_next() < 0)
                return -1;
            continue;
        }
        if (idx + 1 == opt.min_nodes) {
            /* the last call: wait for more nodes, up to MAX */
            int64_t until = now_ms() + (int64_t)(opt.last_call * 1000), count = 0;
            for (;;) {
                if (tn_store_add(rdzv, joined, 0, &count) < 0)
                    return rdzv_fail("count");
                if (count >= opt.max_nodes || now_ms() >= until)
                    break;
                struct timespec ts = {0, 20 * 1000000L};
                nanosleep(&ts, NULL);
            }
            char v[32];
            snprintf(v, sizeof v, "%lld",
                     (long long)(count < opt.max_nodes ? count : opt.max_nodes));
            if (tn_store_set(rdzv, closed, v, strlen(v)) < 0)
                return rdzv_fail("close");
        }
        tn_store_set_timeout(rdzv, (int64_t)(opt.join_timeout * 1000));
        void *v = NULL;
        size_t vl = 0;
        if (tn_store_get(rdzv, closed, &v, &vl) < 0)
            return rdzv_join_timeout(joined, hosts);
        int n = atoi(v);
        free(v);
        if (idx >= n) {
            if (rdzv_wait_next() < 0)
                return -1;
            continue;
        }
        opt.node_rank = (int)idx;
        opt.nnodes = n;
        fprintf(stderr, "trun: rendezvous round %d: node %d of %d\n", rdzv_round,
                opt.node_rank, opt.nnodes);
        return 0;
    }
}

void rdzv_mark(const char *what)
{
    char k[300];
    rdzv_key(k, sizeof k, what);
    tn_store_add(rdzv, k, 1, NULL);
}

bool rdzv_failed(void)
{
    char k[300];
    rdzv_key(k, sizeof k, "failed");
    return rdzv_has(k);
}

/* Whether a node waits to join and the round has room for it: the group
 * then starts again with it, which is not a restart (torchrun's
 * num_nodes_waiting). */
bool rdzv_joining(void)
{
    char k[300];
    rdzv_key(k, sizeof k, "waiting");
    return opt.nnodes < opt.max_nodes && rdzv_has(k);
}

/* The workers' store of the round: PyTorch 2.x workers use the store at
 * MASTER_ADDR:MASTER_PORT with no per-attempt prefix (1.13 added
 * /worker/attempt_K), so every round gets a new one, as torchrun's
 * RendezvousStoreInfo.build gives: node 0 of the round hosts it on a free
 * port (on loopback when the endpoint is) and publishes "PORT ADDR" in the round's "store" (ADDR: the
 * rendezvous endpoint's when this trun hosts it or it is a loopback one,
 * else the address this host reaches the endpoint from);
 * every node reads it into MASTER_ADDR and MASTER_PORT. *own is the store
 * this trun hosted for the last round (stopped here: that round is over).
 * host: this trun hosts the rendezvous store. 0, or -1 (said why). */
int rdzv_workers_store(struct tn_store_server **own, bool host)
{
    char k[300];
    rdzv_key(k, sizeof k, "store");
    tn_store_server_stop(*own);
    *own = NULL;
    if (opt.node_rank == 0) {
        bool loopback = !strncmp(opt.master_addr, "127.", 4) ||
                        !strcmp(opt.master_addr, "localhost"); /* all nodes on this host */
        struct tn_store_server_opts so = {
            .host = loopback ? opt.master_addr : NULL, .port = 0, .listen_fd = -1};
        if (!(*own = tn_store_server_start(&so)))
            return rdzv_fail("hosting the workers' store");
        char v[300], me[256];
        if (host || loopback)
            snprintf(me, sizeof me, "%s", opt.master_addr);
        else
            route_addr(me, sizeof me);
        snprintf(v, sizeof v, "%d %s", tn_store_server_port(*own), me);
        if (tn_store_set(rdzv, k, v, strlen(v)) < 0)
            return rdzv_fail("publishing the workers' store");
    }
    void *v = NULL;
    size_t n = 0;
    if (tn_store_get(rdzv, k, &v, &n) < 0)
        return rdzv_fail("waiting for the workers' store");
    char addr[256];
    int port = 0;
    char *s = strndup(v, n);
    free(v);
    int ok = s && sscanf(s, "%d %255s", &port, addr) == 2;
    free(s);
    if (!ok) {
        fprintf(stderr, "trun: rendezvous round %d: bad workers' store address\n", rdzv_round);
        return -1;
    }
    setenv("MASTER_ADDR", addr, 1);
    setenvf("MASTER_PORT", "%d", port);
    return 0;
}
