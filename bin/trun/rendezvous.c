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
 * leaving at the job's end sets "done", which sends waiting nodes home.
 * While workers run, the nodes send heartbeats through the store; a node
 * whose heartbeats stop is lost, and the nodes left meet in the next round
 * while MIN still holds (see the keep-alive below). */
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

static int expect; /* nodes the next round waits for at most, 0: unknown */
static void beat_start(void);
static int rdzv_exists(const char *k);

static void rdzv_key(char *k, size_t n, const char *what)
{
    snprintf(k, n, "rdzv/%s/%d/%s", opt.run_id, rdzv_round, what);
}

/* The round's key for node rank `node`: "rdzv/<id>/<round>/<what>/<node>". */
static void node_key(char *k, size_t n, const char *what, int node)
{
    char w[64];
    snprintf(w, sizeof w, "%s/%d", what, node);
    rdzv_key(k, n, w);
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
    tn_store_set_timeout(rdzv, (int64_t)(opt.join_timeout * 1000));
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
        char hk[300];
        node_key(hk, sizeof hk, "host", (int)idx);
        if (idx < opt.max_nodes && (tn_store_append(rdzv, hosts, me, strlen(me)) < 0 ||
                                    tn_store_set(rdzv, hk, hostname, strlen(hostname)) < 0))
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
                /* after a round lost or gained nodes: as soon as all came */
                if (count >= opt.max_nodes || now_ms() >= until || (expect && count >= expect))
                    break;
                struct timespec ts = {0, 20 * 1000000L};
                nanosleep(&ts, NULL);
            }
            char v[32];
            int64_t n = count < opt.max_nodes ? count : opt.max_nodes;
            snprintf(v, sizeof v, "%lld", (long long)n);
            /* every member's heartbeat count exists before any reads them */
            for (int64_t j = 0; j < n; j++) {
                char bk[300];
                node_key(bk, sizeof bk, "beat", (int)j);
                if (tn_store_add(rdzv, bk, 0, NULL) < 0)
                    return rdzv_fail("close");
            }
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
        expect = 0;
        beat_start();
        return 0;
    }
}

void rdzv_mark(const char *what)
{
    char k[300];
    rdzv_key(k, sizeof k, what);
    tn_store_add(rdzv, k, 1, NULL);
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
    /* beating while node 0 starts it: the others' clocks already run */
    for (int64_t until = now_ms() + (int64_t)(opt.join_timeout * 1000);
         rdzv_exists(k) == 0 && now_ms() < until;) {
        rdzv_beat();
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    tn_store_set_timeout(rdzv, (int64_t)(opt.join_timeout * 1000));
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

/* Keep-alive. While its workers run, every node of a round adds 1 to the
 * round's "beat/<node rank>" every keep_alive_interval and reads every
 * node's (one MULTI_GET); a node whose count has not moved for
 * keep_alive_interval x keep_alive_max_attempt (1 s x 3 by default, where
 * torchrun's agents take 5 s x 3 and only drop a dead node from the next
 * rendezvous) is lost: the first node to see it marks it in "lost/<rank>",
 * names it in "lostnames", counts it in the round's "nlost" and the job's
 * "lost", and sets the round's "failed", so every node stops its workers. A
 * node leaving its attempt adds BEAT_LEFT to its count (BEAT_FINISHED when
 * its workers all succeeded), so it is never taken for dead. The node that
 * hosts the store has no heartbeat: the store is gone when a store request
 * fails or goes unanswered for the same time, and each node stops. */
#define BEAT_LEFT (INT64_C(1) << 40)
#define BEAT_FINISHED (INT64_C(2) << 40)
/* a node that has not beaten since the round formed (it may still be on its
 * way out of the rendezvous on a loaded host) is lost after this long */
#define FIRST_BEAT_MS 30000

static int64_t *beat_seen, *beat_at; /* per node of the round: last count, when it moved */
static int nbeats;                   /* nodes of the round the arrays are for */
static int64_t beat_next;            /* when this node beats next */
static int settled;                  /* rdzv_settle's answer for this round, 0: not yet */
static char store_host[256];         /* the host name of the trun hosting the store */

static int64_t tolerance_ms(void)
{
    return (int64_t)(opt.keep_alive * opt.keep_alive_max * 1000);
}

/* The store's host (the trun that binds the endpoint) says who it is. */
void rdzv_announce_host(void)
{
    char k[300];
    snprintf(k, sizeof k, "rdzv/%s/store_host", opt.run_id);
    tn_store_set(rdzv, k, hostname, strlen(hostname));
}

/* Whether key k exists: 1, 0, or -1 when the store does not answer. */
static int rdzv_exists(const char *k)
{
    const char *keys[1] = {k};
    int rc = tn_store_check(rdzv, keys, 1);
    return rc < 0 ? -1 : rc == 1;
}

/* The value of key k as text into buf ("" when absent or on error). */
static void rdzv_text(const char *k, char *buf, size_t n)
{
    void *v = NULL;
    size_t vl = 0;
    buf[0] = 0;
    if (rdzv_exists(k) == 1 && tn_store_get(rdzv, k, &v, &vl) == 0)
        snprintf(buf, n, "%.*s", (int)vl, (char *)v);
    free(v);
}

/* The round's keep-alive starts: every node's count is taken to have just
 * moved. */
static void beat_start(void)
{
    free(beat_seen);
    free(beat_at);
    nbeats = opt.nnodes;
    beat_seen = calloc((size_t)nbeats, sizeof *beat_seen);
    beat_at = calloc((size_t)nbeats, sizeof *beat_at);
    int64_t now = now_ms();
    for (int j = 0; j < nbeats && beat_at; j++)
        beat_at[j] = now;
    settled = 0;
    beat_next = 0;
    rdzv_beat(); /* at once: the others' clocks start at their own rendezvous */
    if (!*store_host) {
        char k[300];
        snprintf(k, sizeof k, "rdzv/%s/store_host", opt.run_id);
        rdzv_text(k, store_host, sizeof store_host);
    }
}

/* The store's requests while the workers run (and the nodes leave the
 * round) wait no longer than a lost node's tolerance; the rendezvous's
 * own waits take the join timeout. */
static void short_timeout(void)
{
    tn_store_set_timeout(rdzv, tolerance_ms());
}

/* Says that the rendezvous store stopped answering; -1. */
static int store_lost(void)
{
    fprintf(stderr, "trun: lost the rendezvous store at %s:%d (hosted by %s): %s; stopping "
                    "this node's workers\n", opt.master_addr, opt.master_port,
            *store_host ? store_host : "its endpoint's host", tn_last_error());
    return -1;
}

/* Node j is lost (why: how we know): marked so once, by the first node
 * that sees it. 0, or -1 when the store does not answer. */
static int declare_lost(int j, const char *why)
{
    char k[300];
    int64_t first = 0, nth = 0;
    node_key(k, sizeof k, "lost", j);
    if (tn_store_add(rdzv, k, 1, &first) < 0)
        return -1;
    if (first != 1)
        return 0;
    char host[256], name[300];
    node_key(k, sizeof k, "host", j);
    rdzv_text(k, host, sizeof host);
    rdzv_key(k, sizeof k, "nlost");
    if (tn_store_add(rdzv, k, 1, &nth) < 0)
        return -1;
    snprintf(name, sizeof name, "%snode %d (%s) (%s)", nth > 1 ? ", " : "", j,
             *host ? host : "?", why);
    rdzv_key(k, sizeof k, "lostnames");
    if (tn_store_append(rdzv, k, name, strlen(name)) < 0)
        return -1;
    snprintf(k, sizeof k, "rdzv/%s/lost", opt.run_id);
    return tn_store_add(rdzv, k, 1, NULL) < 0 ? -1 : 0;
}

/* Reads every node's count: a count that moved is a live node; one that
 * has not moved for the tolerance is declared lost. *pending: the nodes
 * still in the attempt, *finished: those whose workers all succeeded,
 * *lost: those declared lost here. 0, or -1 when the store does not answer. */
static int beat_scan(int *pending, int *finished, int *lost)
{
    *pending = *finished = *lost = 0;
    if (!beat_seen || !beat_at)
        return 0;
    char(*names)[300] = calloc((size_t)nbeats, sizeof *names);
    const char **keys = calloc((size_t)nbeats, sizeof *keys);
    void **vals = calloc((size_t)nbeats, sizeof *vals);
    size_t *lens = calloc((size_t)nbeats, sizeof *lens);
    int rc = names && keys && vals && lens ? 0 : -1;
    for (int j = 0; j < nbeats && rc == 0; j++) {
        node_key(names[j], sizeof names[j], "beat", j);
        keys[j] = names[j];
    }
    if (rc == 0)
        rc = tn_store_multi_get(rdzv, keys, (size_t)nbeats, vals, lens);
    int64_t now = now_ms();
    for (int j = 0; j < nbeats && rc == 0; j++) {
        char num[32];
        snprintf(num, sizeof num, "%.*s", (int)(lens[j] < 31 ? lens[j] : 31), (char *)vals[j]);
        int64_t v = strtoll(num, NULL, 10);
        if (j == opt.node_rank || beat_at[j] < 0) /* beat_at -1: counted lost */
            continue;
        if (v >= BEAT_FINISHED) {
            (*finished)++;
        } else if (v >= BEAT_LEFT) {
            /* left for the next round */
        } else if (v != beat_seen[j]) {
            beat_seen[j] = v;
            beat_at[j] = now;
            (*pending)++;
        } else if (now - beat_at[j] > (v ? tolerance_ms() : FIRST_BEAT_MS)) {
            char why[64];
            snprintf(why, sizeof why, "no keep-alive for %g s", tolerance_ms() / 1000.0);
            if (declare_lost(j, why) < 0)
                rc = -1;
            beat_at[j] = -1;
            (*lost)++;
        } else {
            (*pending)++;
        }
    }
    for (int j = 0; vals && j < nbeats; j++)
        free(vals[j]);
    free(names);
    free(keys);
    free(vals);
    free(lens);
    return rc;
}

/* Adds 1 to this node's heartbeat count now; the store's answer. */
static int beat(void)
{
    char k[300];
    beat_next = now_ms() + (int64_t)(opt.keep_alive * 1000);
    node_key(k, sizeof k, "beat", opt.node_rank);
    return tn_store_add(rdzv, k, 1, NULL);
}

/* Beats when it is time, while the workers stop (after a failure, a signal,
 * or for a new round: the grace period can outlast the tolerance). */
void rdzv_beat(void)
{
    short_timeout();
    if (now_ms() >= beat_next)
        beat();
}

/* Watches the round while this node's workers run: 0 all is well, 1
 * another node's worker failed, 2 a node waits to join and the round has
 * room, 3 a node was lost, -1 the store is gone (said so). Beats every
 * keep_alive_interval. */
int rdzv_watch(void)
{
    char k[300];
    short_timeout();
    rdzv_key(k, sizeof k, "failed");
    int failed = rdzv_exists(k);
    if (failed < 0)
        return store_lost();
    if (failed) {
        int64_t nlost = 0;
        rdzv_key(k, sizeof k, "nlost");
        if (tn_store_add(rdzv, k, 0, &nlost) < 0)
            return store_lost();
        return nlost > 0 ? 3 : 1;
    }
    rdzv_key(k, sizeof k, "waiting");
    int waiting = opt.nnodes < opt.max_nodes ? rdzv_exists(k) : 0;
    if (waiting < 0)
        return store_lost();
    if (waiting)
        return 2;
    if (now_ms() < beat_next)
        return 0;
    int pending, finished, lost;
    if (beat() < 0 || beat_scan(&pending, &finished, &lost) < 0)
        return store_lost();
    if (!lost)
        return 0;
    rdzv_mark("failed");
    return 3;
}

/* This node leaves the round's attempt: its count says so (finished: its
 * workers all succeeded), so no node takes it for dead. */
void rdzv_leave(bool finished)
{
    char k[300];
    short_timeout();
    node_key(k, sizeof k, "beat", opt.node_rank);
    tn_store_add(rdzv, k, finished ? BEAT_FINISHED : BEAT_LEFT, NULL);
}

/* This node goes away in mid-round (a signal stopped trun): it declares
 * itself lost, so the others re-form without it at once rather than run on
 * short of a node (or wait out its heartbeat). */
void rdzv_quit(void)
{
    short_timeout();
    if (declare_lost(opt.node_rank, "stopped by a signal") == 0)
        rdzv_mark("failed");
    rdzv_leave(false); /* the others need not wait out its heartbeat */
}

/* Declares lost the nodes of the round whose heartbeats stopped, as the
 * store's host waits at the end of the job for the others (a node that
 * died while this one's workers failed was never declared). */
void rdzv_reap_lost(void)
{
    int pending, finished, lost;
    short_timeout();
    if (beat_scan(&pending, &finished, &lost) == 0 && lost) {
        char names[1024];
        rdzv_lost_names(names, sizeof names);
        fprintf(stderr, "trun: lost %s\n", names);
    }
}

/* The names of the nodes lost in this round ("node 2 (HOST), ..."). */
void rdzv_lost_names(char *buf, size_t n)
{
    char k[300];
    rdzv_key(k, sizeof k, "lostnames");
    rdzv_text(k, buf, n);
}

/* Nodes declared lost in the whole job, which the store's host does not
 * wait for at its end. */
int64_t rdzv_lost_total(void)
{
    char k[300];
    int64_t v = 0;
    snprintf(k, sizeof k, "rdzv/%s/lost", opt.run_id);
    tn_store_add(rdzv, k, 0, &v);
    return v;
}

/* Before the next round: waits until every other node of the round has
 * left its attempt or is lost (at most the tolerance after its last
 * heartbeat), then counts the nodes the next round can have: the round's
 * own, less the lost and the finished ones, plus those waiting to join.
 * Fewer than MIN: says which nodes were lost and returns -1, as the next
 * round could never form; else 0, and the next round closes as soon as
 * that many nodes joined it (not after the last call). Once a round: a
 * second call gives the first one's answer. */
int rdzv_settle(void)
{
    if (settled)
        return settled > 0 ? 0 : -1;
    settled = -1;
    short_timeout();
    int pending = 1, finished = 0, lost = 0;
    while (pending) {
        if (beat_scan(&pending, &finished, &lost) < 0)
            return store_lost();
        if (pending) {
            struct timespec ts = {0, 50 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    char k[300], names[1024];
    int64_t nlost = 0, waiting = 0;
    rdzv_key(k, sizeof k, "nlost");
    if (tn_store_add(rdzv, k, 0, &nlost) < 0)
        return store_lost();
    rdzv_key(k, sizeof k, "waiting");
    if (rdzv_exists(k) == 1 && tn_store_add(rdzv, k, 0, &waiting) < 0)
        return store_lost();
    int64_t remain = (int64_t)nbeats - nlost - finished + waiting;
    if (remain < opt.min_nodes) {
        rdzv_lost_names(names, sizeof names);
        fprintf(stderr, "trun: rendezvous round %d: lost %s; %lld node%s left, the job needs "
                        "at least %d: stopping\n", rdzv_round, *names ? names : "no node",
                (long long)remain, remain == 1 ? "" : "s", opt.min_nodes);
        return -1;
    }
    expect = remain < opt.max_nodes ? (int)remain : opt.max_nodes;
    settled = 1;
    return 0;
}
