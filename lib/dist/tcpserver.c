/*
 * lib/dist/tcpserver.c: the TCPStore server: one thread, one epoll loop,
 * non-blocking sockets, every request parsed only once it is complete and
 * every length checked against a limit before anything is allocated for it,
 * so a port scanner's probe or a length of 2^62 only costs the sender its
 * connection.
 *
 * Clients speak PyTorch's current protocol (their first message is VALIDATE:
 * 00 CE F7 85 3C) or PyTorch 1.x's numbering (anything else), recognised once
 * per connection from its first bytes.
 */
#include "dist/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* A request larger than this is refused whatever its parts say. */
#define MAX_REQUEST ((size_t)TN_STORE_MAX_VALUE + 2 * TN_STORE_MAX_KEY + 64)
/* Stop reading from a client that does not read its replies. */
#define MAX_PENDING_OUT ((size_t)64 << 20)
#define TOKEN_MAX 4096
/* Input all connections together may hold (TN_STORE_MAX_BUFFERED overrides):
 * past it, a connection that holds more than BIG_INPUT of an unfinished
 * request is dropped (4 partial 256 MiB SETs took a server to 852 MiB). */
#define MAX_BUFFERED ((size_t)512 << 20)
#define BIG_INPUT ((size_t)1 << 20)
/* A client that sent part of a request and nothing more for this long is
 * dropped (TN_STORE_SENDER_TIMEOUT_MS overrides); looked for at least once a
 * second. */
#define SENDER_TIMEOUT_NS ((int64_t)60 * 1000000000)

enum mode { MODE_UNKNOWN, MODE_V2, MODE_V1 };

struct conn {
    int fd;
    enum mode mode;
    bool authed;
    bool dead;
    struct tn__dbuf in, out;
    size_t need; /* do not parse again before in.len reaches this */
    int64_t last_rx; /* ns: when bytes last came */
    /* A pending WAIT: the keys still missing, and the next waiter. */
    char **wkeys;
    size_t *wklens;
    size_t nwkeys;
    bool waiting;
    bool want_out; /* epoll watches for EPOLLOUT too */
    struct conn *wprev, *wnext;
    struct conn *prev, *next; /* all connections */
};

struct tn_store_server {
    int lfd, efd, stopfd;
    int ufd; /* the abstract unix socket for clients on this host, or -1 */
    char uname[64];
    size_t unamelen;
    int port;
    pthread_t thread;
    struct tn__map map;
    struct conn *conns, *waiters;
    int nconns, max_clients;
    char *token;
    size_t toklen;
    size_t held, max_held; /* bytes of input buffers, all connections; their bound */
    int64_t sender_timeout; /* ns: see SENDER_TIMEOUT_NS */
    int spare; /* a descriptor held back, closed to accept and shed a client at EMFILE */
    int64_t listen_off_until; /* ns: listeners disarmed until then (0: armed) */
    unsigned long shed; /* clients accepted only to be closed for want of descriptors */
    bool starved;       /* out of descriptors since the last client accepted (logged) */
    void (*log)(void *arg, const char *line);
    void *log_arg;
    bool kicked; /* a finished wait may have left requests to run */
    bool replied; /* this turn of the loop sent something */
};

static int64_t now_ns(void);

/* ------------------------------------------------------------ reading */

struct rd {
    const unsigned char *p;
    size_t len, pos;
    size_t need; /* bytes the request needs at least, once known */
    int err;     /* 1: need more, -1: refuse */
};

/* Whether n more bytes are in the request; if not, r->err = 1 and r->need
 * says how many it needs. */
static bool rd_have(struct rd *r, size_t n)
{
    if (r->err)
        return false;
    if (r->len - r->pos < n) {
        r->err = 1;
        r->need = r->pos + n;
        return false;
    }
    return true;
}

/* The next little-endian u64 (0 with r->err set when incomplete). */
static uint64_t rd_u64(struct rd *r)
{
    if (!rd_have(r, 8))
        return 0;
    uint64_t v = tn__rd64(r->p + r->pos);
    r->pos += 8;
    return v;
}

/* The next little-endian u32 (0 with r->err set when incomplete). */
static uint32_t rd_u32(struct rd *r)
{
    if (!rd_have(r, 4))
        return 0;
    uint32_t v = tn__rd32(r->p + r->pos);
    r->pos += 4;
    return v;
}

/* The next str of the untrusted request (u64 length + bytes), borrowed
 * from the read buffer, with its length in *len.  NULL with r->err 1 when
 * incomplete, -1 (the client is dropped) when the length passes `limit`
 * or the request would pass MAX_REQUEST. */
static const char *rd_str(struct rd *r, size_t limit, size_t *len)
{
    uint64_t n = rd_u64(r);
    *len = 0;
    if (r->err)
        return NULL;
    if (n > limit || r->pos + n > MAX_REQUEST) {
        r->err = -1;
        return NULL;
    }
    if (!rd_have(r, (size_t)n))
        return NULL;
    const char *s = (const char *)r->p + r->pos;
    r->pos += (size_t)n;
    *len = (size_t)n;
    return s;
}

/* ------------------------------------------------------------ replies */

/* Queues a u8 reply on c->out (out of memory: the client is dropped). */
static void reply_u8(struct conn *c, uint8_t v)
{
    if (tn__db_u8(&c->out, v) < 0)
        c->dead = true;
}

/* Queues an i64 reply (little-endian). */
static void reply_i64(struct conn *c, int64_t v)
{
    if (tn__db_u64(&c->out, (uint64_t)v) < 0)
        c->dead = true;
}

/* Queues a str reply (u64 length + bytes). */
static void reply_str(struct conn *c, const void *p, size_t n)
{
    if (tn__db_str(&c->out, p, n) < 0)
        c->dead = true;
}

/* ------------------------------------------------------------ waiters */

/* Forgets c's pending WAIT (its copied keys freed) and unlinks it from
 * s->waiters; nothing when it has none. */
static void waiter_clear(struct tn_store_server *s, struct conn *c)
{
    if (!c->waiting)
        return;
    for (size_t i = 0; i < c->nwkeys; i++)
        free(c->wkeys[i]);
    free(c->wkeys);
    free(c->wklens);
    c->wkeys = NULL;
    c->wklens = NULL;
    c->nwkeys = 0;
    c->waiting = false;
    if (c->wprev)
        c->wprev->wnext = c->wnext;
    else
        s->waiters = c->wnext;
    if (c->wnext)
        c->wnext->wprev = c->wprev;
    c->wprev = c->wnext = NULL;
}

static void flush_conn(struct tn_store_server *s, struct conn *c);

/* A key came into existence: every waiter that waited for it (and for
 * nothing else) gets its STOP_WAITING. */
static void notify(struct tn_store_server *s, const char *k, size_t kl)
{
    struct conn *c = s->waiters;
    while (c) {
        struct conn *n = c->wnext;
        for (size_t i = 0; i < c->nwkeys; i++) {
            if (c->wklens[i] == kl && memcmp(c->wkeys[i], k, kl) == 0) {
                free(c->wkeys[i]);
                c->wkeys[i] = c->wkeys[c->nwkeys - 1];
                c->wklens[i] = c->wklens[c->nwkeys - 1];
                c->nwkeys--;
                break;
            }
        }
        if (c->nwkeys == 0) {
            waiter_clear(s, c);
            reply_u8(c, 0);
            flush_conn(s, c);
            s->kicked = true;
        }
        c = n;
    }
}

/* ------------------------------------------------------------ requests */

/* Whether k exists for CHECK and WAIT: a value or a non-empty queue. */
static bool exists(struct tn_store_server *s, const char *k, size_t kl)
{
    return tn__kv_exists(tn__map_find(&s->map, k, kl));
}

/* Stores a copy of v under k and wakes its waiters; false when memory ran
 * out. */
static bool set_value(struct tn_store_server *s, const char *k, size_t kl, const void *v,
                      size_t vl)
{
    struct tn__kv *e = tn__map_entry(&s->map, k, kl);
    if (!e || tn__map_setval(&s->map, e, v, vl) < 0)
        return false;
    notify(s, k, kl);
    return true;
}

/* Parses n keys; they stay in the input buffer. Returns false when the
 * request is incomplete or refused (r->err says which). */
static bool rd_keys(struct rd *r, uint64_t n, const char **ks, size_t *kls)
{
    for (uint64_t i = 0; i < n; i++) {
        size_t l;
        const char *k = rd_str(r, TN_STORE_MAX_KEY, &l);
        if (r->err)
            return false;
        if (ks) {
            ks[i] = k;
            kls[i] = l;
        }
    }
    return true;
}

/* The keys of a CHECK, WAIT or MULTI_GET: k[i] (l[i] bytes) point into the
 * input buffer; the arrays are malloc'd (keys_free). */
struct keys {
    uint64_t n;
    const char **k;
    size_t *l;
};

/* Reads the request's "u64 n, n x key" into ks. Returns 1 with the keys, 0
 * when the request is incomplete or refused (r->err says which; nothing
 * allocated), -1 when n is over the limit or memory ran out. Trusts nothing
 * of the bytes: every length is checked by rd_str. */
static int rd_key_list(struct rd *r, struct keys *ks)
{
    ks->n = rd_u64(r);
    if (r->err)
        return 0;
    if (ks->n > TN_STORE_MAX_KEYS_PER_REQUEST)
        return -1;
    size_t start = r->pos;
    if (!rd_keys(r, ks->n, NULL, NULL))
        return 0;
    r->pos = start;
    ks->k = malloc((ks->n ? ks->n : 1) * sizeof *ks->k);
    ks->l = malloc((ks->n ? ks->n : 1) * sizeof *ks->l);
    if (!ks->k || !ks->l) {
        free(ks->k);
        free(ks->l);
        return -1;
    }
    rd_keys(r, ks->n, ks->k, ks->l);
    return 1;
}

/* Frees rd_key_list's arrays (not the keys: they are the input's). */
static void keys_free(struct keys *ks)
{
    free(ks->k);
    free(ks->l);
}

/* How many of ks do not exist; with probe, TN_STORE_PROBE_KEY exists. */
static size_t keys_missing(struct tn_store_server *s, const struct keys *ks, bool probe)
{
    size_t missing = 0;
    for (uint64_t i = 0; i < ks->n; i++)
        if (!exists(s, ks->k[i], ks->l[i]) &&
            !(probe && ks->l[i] == TN_STORE_PROBE_KEYLEN &&
              memcmp(ks->k[i], TN_STORE_PROBE_KEY, ks->l[i]) == 0))
            missing++;
    return missing;
}

/* Reads "str key, str value" (k and v point into the input buffer). False
 * when the request is incomplete or refused (r->err says which). */
static bool rd_key_value(struct rd *r, const char **k, size_t *kl, const char **v, size_t *vl)
{
    *k = rd_str(r, TN_STORE_MAX_KEY, kl);
    *v = rd_str(r, TN_STORE_MAX_VALUE, vl);
    return !r->err;
}

/* Reads "str key" and finds its entry (*ent NULL when it has none). False
 * when the request is incomplete or refused (r->err says which). */
static bool rd_entry(struct tn_store_server *s, struct rd *r, struct tn__kv **ent)
{
    size_t kl;
    const char *k = rd_str(r, TN_STORE_MAX_KEY, &kl);
    *ent = r->err ? NULL : tn__map_find(&s->map, k, kl);
    return !r->err;
}

/*
 * One handler per command, indexed by the command byte (handlers[] below).
 * Each reads its request from r (positioned after the command byte) and
 * queues its reply on c->out. Returns -1 to drop the client (a refused
 * request, or out of memory), else 0: the request was served, or it is
 * incomplete or malformed, which r->err says (handle() looks at it after).
 * The line above each handler is the request it serves and its reply, as
 * PyTorch's TCPStore protocol has them (str: u64 length + bytes).
 */
typedef int cmd_fn(struct tn_store_server *s, struct conn *c, struct rd *r);

/* VALIDATE: u32 magic 0x3C85F7CE -> no reply (another magic: dropped). */
static int cmd_validate(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    (void)s;
    (void)c;
    if (rd_u32(r) != TN_STORE_MAGIC)
        return r->err == 1 ? 0 : -1;
    return 0;
}

/* AUTH (ours): str token -> u8 1 (a wrong token: dropped). */
static int cmd_auth(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    size_t vl;
    const char *v = rd_str(r, TOKEN_MAX, &vl);
    if (r->err)
        return 0;
    if (s->token) {
        /* constant time in the token's length */
        unsigned diff = (unsigned)(vl ^ s->toklen);
        for (size_t i = 0; i < s->toklen; i++)
            diff |= (unsigned)(s->token[i] ^ (i < vl ? v[i] : 0));
        if (diff)
            return -1;
    }
    c->authed = true;
    reply_u8(c, 1);
    return 0;
}

/* SET: str key, str value -> no reply; wakes the key's waiters. */
static int cmd_set(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    (void)c;
    const char *k, *v;
    size_t kl, vl;
    if (!rd_key_value(r, &k, &kl, &v, &vl))
        return 0;
    return set_value(s, k, kl, v, vl) ? 0 : -1;
}

/* APPEND: str key, str bytes -> no reply; a missing key is set. */
static int cmd_append(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    (void)c;
    const char *k, *v;
    size_t kl, vl;
    if (!rd_key_value(r, &k, &kl, &v, &vl))
        return 0;
    struct tn__kv *ent = tn__map_entry(&s->map, k, kl);
    if (!ent)
        return -1;
    if (!ent->val) {
        if (tn__map_setval(&s->map, ent, v, vl) < 0)
            return -1;
    } else {
        if (ent->vlen + vl > TN_STORE_MAX_VALUE)
            return -1;
        char *nv = realloc(ent->val, ent->vlen + vl + 1);
        if (!nv)
            return -1;
        memcpy(nv + ent->vlen, v, vl);
        ent->val = nv;
        ent->vlen += vl;
    }
    notify(s, k, kl);
    return 0;
}

/* QUEUE_PUSH: str key, str bytes -> no reply; wakes the key's waiters. */
static int cmd_queue_push(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    (void)c;
    const char *k, *v;
    size_t kl, vl;
    if (!rd_key_value(r, &k, &kl, &v, &vl))
        return 0;
    struct tn__kv *ent = tn__map_entry(&s->map, k, kl);
    if (!ent || tn__map_push(&s->map, ent, v, vl) < 0)
        return -1;
    notify(s, k, kl);
    return 0;
}

/* COMPARE_SET: str key, str expected, str desired -> str the value now
 * stored (missing key and non-empty expected: expected, nothing set). */
static int cmd_compare_set(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    size_t kl, vl, el;
    const char *k = rd_str(r, TN_STORE_MAX_KEY, &kl);
    const char *e = rd_str(r, TN_STORE_MAX_VALUE, &el);
    const char *v = rd_str(r, TN_STORE_MAX_VALUE, &vl);
    if (r->err)
        return 0;
    struct tn__kv *ent = tn__map_find(&s->map, k, kl);
    if (!ent || !ent->val) {
        if (el == 0) {
            if (!set_value(s, k, kl, v, vl))
                return -1;
            reply_str(c, v, vl);
        } else {
            reply_str(c, e, el);
        }
    } else if (ent->vlen == el && memcmp(ent->val, e, el) == 0) {
        if (tn__map_setval(&s->map, ent, v, vl) < 0)
            return -1;
        reply_str(c, v, vl);
    } else {
        reply_str(c, ent->val, ent->vlen);
    }
    return 0;
}

/* GET: str key -> str value (empty when missing; TN_STORE_UNIX_KEY: the
 * name of our unix socket). */
static int cmd_get(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    size_t kl;
    const char *k = rd_str(r, TN_STORE_MAX_KEY, &kl);
    if (r->err)
        return 0;
    if (kl == TN_STORE_UNIX_KEYLEN && k[0] == 0 && memcmp(k, TN_STORE_UNIX_KEY, kl) == 0) {
        reply_str(c, s->uname, s->unamelen);
        return 0;
    }
    struct tn__kv *ent = tn__map_find(&s->map, k, kl);
    if (ent && ent->val)
        reply_str(c, ent->val, ent->vlen);
    else
        reply_str(c, "", 0);
    return 0;
}

/* ADD: str key, i64 delta -> i64 the new value (stored as decimal text). */
static int cmd_add(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    size_t kl;
    const char *k = rd_str(r, TN_STORE_MAX_KEY, &kl);
    int64_t d = (int64_t)rd_u64(r);
    if (r->err)
        return 0;
    struct tn__kv *ent = tn__map_find(&s->map, k, kl);
    char buf[32];
    size_t bl;
    int64_t out;
    if (tn__add_value(k, kl, ent ? ent->val : NULL, ent ? ent->vlen : 0, d, &out, buf, &bl) < 0)
        return -1;
    if (!set_value(s, k, kl, buf, bl))
        return -1;
    reply_i64(c, out);
    return 0;
}

/* CHECK: u64 n, n x str key -> u8 0 when every key exists, else 1
 * (TN_STORE_PROBE_KEY counts as existing). */
static int cmd_check(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    struct keys ks;
    int got = rd_key_list(r, &ks);
    if (got <= 0)
        return got;
    reply_u8(c, keys_missing(s, &ks, true) ? 1 : 0);
    keys_free(&ks);
    return 0;
}

/* WAIT: u64 n, n x str key -> u8 0 STOP_WAITING once every key exists (at
 * once, or from notify() when the last one comes). */
static int cmd_wait(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    struct keys ks;
    int got = rd_key_list(r, &ks);
    if (got <= 0)
        return got;
    size_t missing = keys_missing(s, &ks, false);
    if (missing == 0) {
        reply_u8(c, 0);
    } else {
        c->wkeys = calloc(missing, sizeof *c->wkeys);
        c->wklens = calloc(missing, sizeof *c->wklens);
        bool ok = c->wkeys && c->wklens;
        for (uint64_t i = 0; ok && i < ks.n; i++) {
            if (exists(s, ks.k[i], ks.l[i]))
                continue;
            char *kc = malloc(ks.l[i] ? ks.l[i] : 1);
            if (!kc) {
                ok = false;
                break;
            }
            memcpy(kc, ks.k[i], ks.l[i]);
            c->wkeys[c->nwkeys] = kc;
            c->wklens[c->nwkeys++] = ks.l[i];
        }
        c->waiting = true;
        c->wnext = s->waiters;
        if (s->waiters)
            s->waiters->wprev = c;
        s->waiters = c;
        if (!ok) {
            keys_free(&ks);
            return -1;
        }
    }
    keys_free(&ks);
    return 0;
}

/* MULTI_GET: u64 n, n x str key -> n x str value (empty when missing). */
static int cmd_multi_get(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    struct keys ks;
    int got = rd_key_list(r, &ks);
    if (got <= 0)
        return got;
    for (uint64_t i = 0; i < ks.n; i++) {
        struct tn__kv *ent = tn__map_find(&s->map, ks.k[i], ks.l[i]);
        if (ent && ent->val)
            reply_str(c, ent->val, ent->vlen);
        else
            reply_str(c, "", 0);
    }
    keys_free(&ks);
    return 0;
}

/* MULTI_SET: u64 n, n x (str key, str value) -> no reply; all or nothing
 * parsed before the first is set. */
static int cmd_multi_set(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    (void)c;
    size_t kl, vl;
    uint64_t n = rd_u64(r);
    if (r->err)
        return 0;
    if (n > TN_STORE_MAX_KEYS_PER_REQUEST)
        return -1;
    size_t start = r->pos;
    for (uint64_t i = 0; i < n && !r->err; i++) {
        rd_str(r, TN_STORE_MAX_KEY, &kl);
        rd_str(r, TN_STORE_MAX_VALUE, &vl);
    }
    if (r->err)
        return 0;
    r->pos = start;
    for (uint64_t i = 0; i < n; i++) {
        const char *k = rd_str(r, TN_STORE_MAX_KEY, &kl);
        const char *v = rd_str(r, TN_STORE_MAX_VALUE, &vl);
        if (!set_value(s, k, kl, v, vl))
            return -1;
    }
    return 0;
}

/* GETNUMKEYS: nothing -> i64 the number of keys holding a value. */
static int cmd_getnumkeys(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    (void)r;
    reply_i64(c, (int64_t)s->map.count);
    return 0;
}

/* DELETE_KEY: str key -> i64 1 when it held a value, else 0. */
static int cmd_delete_key(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    struct tn__kv *ent;
    if (!rd_entry(s, r, &ent))
        return 0;
    reply_i64(c, ent && tn__map_delval(&s->map, ent) ? 1 : 0);
    return 0;
}

/* CANCEL_WAIT: nothing -> u8 1 WAIT_CANCELED; the pending WAIT is dropped. */
static int cmd_cancel_wait(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    (void)r;
    waiter_clear(s, c);
    reply_u8(c, 1);
    return 0;
}

/* PING: u32 nonce -> u32 the same nonce. */
static int cmd_ping(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    (void)s;
    uint32_t nonce = rd_u32(r);
    if (r->err)
        return 0;
    return tn__db_u32(&c->out, nonce) < 0 ? -1 : 0;
}

/* QUEUE_POP: str key -> i64 the queue's length before, then str the oldest
 * item when it was not empty (never blocks: the client waits first). */
static int cmd_queue_pop(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    struct tn__kv *ent;
    if (!rd_entry(s, r, &ent))
        return 0;
    int64_t len = ent ? ent->qlen : 0;
    reply_i64(c, len);
    if (len > 0) {
        struct tn__qitem *q = tn__map_pop(&s->map, ent);
        reply_str(c, q->data, q->len);
        free(q);
    }
    return 0;
}

/* QUEUE_LEN: str key -> i64 the queue's length. */
static int cmd_queue_len(struct tn_store_server *s, struct conn *c, struct rd *r)
{
    struct tn__kv *ent;
    if (!rd_entry(s, r, &ent))
        return 0;
    reply_i64(c, ent ? ent->qlen : 0);
    return 0;
}

/* The command byte's handler; NULL (and past the end): an unknown command,
 * whose client is dropped. */
static cmd_fn *const handlers[TN_STORE_CMD_AUTH + 1] = {
    [TN_STORE_CMD_VALIDATE] = cmd_validate,
    [TN_STORE_CMD_SET] = cmd_set,
    [TN_STORE_CMD_COMPARE_SET] = cmd_compare_set,
    [TN_STORE_CMD_GET] = cmd_get,
    [TN_STORE_CMD_ADD] = cmd_add,
    [TN_STORE_CMD_CHECK] = cmd_check,
    [TN_STORE_CMD_WAIT] = cmd_wait,
    [TN_STORE_CMD_GETNUMKEYS] = cmd_getnumkeys,
    [TN_STORE_CMD_DELETE_KEY] = cmd_delete_key,
    [TN_STORE_CMD_APPEND] = cmd_append,
    [TN_STORE_CMD_MULTI_GET] = cmd_multi_get,
    [TN_STORE_CMD_MULTI_SET] = cmd_multi_set,
    [TN_STORE_CMD_CANCEL_WAIT] = cmd_cancel_wait,
    [TN_STORE_CMD_PING] = cmd_ping,
    [TN_STORE_CMD_QUEUE_PUSH] = cmd_queue_push,
    [TN_STORE_CMD_QUEUE_POP] = cmd_queue_pop,
    [TN_STORE_CMD_QUEUE_LEN] = cmd_queue_len,
    [TN_STORE_CMD_AUTH] = cmd_auth,
};

/* Handles one request at offset at of c->in. Returns the bytes it took, 0
 * when the request is not complete yet (c->need counts from at), -1 to drop
 * the client. */
static long handle(struct tn_store_server *s, struct conn *c, size_t at)
{
    struct rd r = {(const unsigned char *)c->in.data + at, c->in.len - at, 0, 0, 0};
    if (!rd_have(&r, 1))
        return 0;
    int op = r.p[0];
    r.pos = 1;

    if (c->mode == MODE_UNKNOWN) {
        if (op == 0) {
            if (!rd_have(&r, 4)) {
                c->need = 5;
                return 0;
            }
            c->mode = tn__rd32(r.p + 1) == TN_STORE_MAGIC ? MODE_V2 : MODE_V1;
        } else {
            c->mode = MODE_V1;
        }
        if (c->mode == MODE_V1 && s->token)
            return -1; /* a 1.x client cannot authenticate */
    }
    if (c->mode == MODE_V1) {
        /* 1.x: SET=0 ... GETNUMKEYS=6, WATCH_KEY=7 (unsupported), DELETE_KEY=8 */
        if (op <= 6)
            op += 1;
        else if (op != 8)
            return -1;
    }
    if (s->token && !c->authed && op != TN_STORE_CMD_VALIDATE && op != TN_STORE_CMD_AUTH)
        return -1;
    /* A connection has one pending WAIT at a time; a second one queues
     * behind it. Other requests are served meanwhile, as PyTorch's servers
     * do (a 1.x client whose wait timed out goes on using its socket). */
    if (c->waiting && op == TN_STORE_CMD_WAIT)
        return 0;

    if (op >= (int)(sizeof handlers / sizeof *handlers) || !handlers[op])
        return -1;
    if (handlers[op](s, c, &r) < 0)
        return -1;
    if (r.err == -1 || c->dead)
        return -1;
    if (r.err == 1) {
        c->need = r.need;
        return 0;
    }
    return (long)r.pos;
}

/* ------------------------------------------------------------ the loop */

/* Drops c: its wait, its epoll registration, its socket and buffers; c is
 * freed. */
static void close_conn(struct tn_store_server *s, struct conn *c)
{
    waiter_clear(s, c);
    epoll_ctl(s->efd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->held -= c->in.cap;
    tn__db_free(&c->in);
    tn__db_free(&c->out);
    free(c);
    s->nconns--;
}

/* Sends what c->out holds without blocking (what remains waits for
 * EPOLLOUT); a send error marks c dead. */
static void flush_conn(struct tn_store_server *s, struct conn *c)
{
    while (c->out.len) {
        ssize_t w = send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                c->dead = true;
            break;
        }
        tn__db_consume(&c->out, (size_t)w);
        s->replied = true;
    }
    /* only when the interest changes: a syscall saved per request */
    bool want = c->out.len != 0;
    if (want != c->want_out) {
        struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0u), .data.ptr = c};
        epoll_ctl(s->efd, EPOLL_CTL_MOD, c->fd, &ev);
        c->want_out = want;
    }
}

/* Runs the complete requests in c->in, then drops their bytes at once (a
 * burst of sets, which have no reply, arrives as one read of hundreds of
 * requests: moving the rest down after each one made a read's cost grow
 * with the square of its size). */
static void process(struct tn_store_server *s, struct conn *c)
{
    size_t at = 0;
    while (!c->dead && at < c->in.len && c->in.len - at >= c->need &&
           c->out.len < MAX_PENDING_OUT) {
        long used = handle(s, c, at);
        if (used < 0) {
            c->dead = true;
            break;
        }
        if (used == 0)
            break;
        c->need = 0;
        at += (size_t)used;
    }
    tn__db_consume(&c->in, at);
    if (c->in.len == 0 && c->in.cap > BIG_INPUT) { /* a big request done: give it back */
        s->held -= c->in.cap;
        tn__db_free(&c->in);
    }
    if (!c->dead)
        flush_conn(s, c);
}

/* Reads what c's socket holds within the input bounds and runs the
 * complete requests; EOF, an error or a bound passed marks c dead (the loop
 * closes it). */
static void on_readable(struct tn_store_server *s, struct conn *c)
{
    for (;;) {
        size_t had = c->in.cap;
        if (tn__db_reserve(&c->in, 65536) < 0) {
            c->dead = true;
            return;
        }
        s->held += c->in.cap - had;
        if (s->held > s->max_held && c->in.cap > BIG_INPUT) {
            c->dead = true; /* the bound of all input: drop the big one growing */
            return;
        }
        ssize_t n = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                c->dead = true;
            break;
        }
        if (n == 0) {
            c->dead = true;
            break;
        }
        size_t asked = c->in.cap - (c->in.len);
        c->in.len += (size_t)n;
        c->last_rx = now_ns();
        if (c->in.len > MAX_REQUEST + 65536 && c->in.len >= c->need) {
            /* more unparsed bytes than any request may hold */
            process(s, c);
            if (c->in.len > MAX_REQUEST + 65536)
                c->dead = true;
            if (c->dead)
                return;
        }
        if ((size_t)n < asked)
            break; /* drained: epoll (level-triggered) reports what comes next */
    }
    process(s, c);
}

/* How long the listeners stay disarmed when not even the spare descriptor
 * frees one (ENFILE, or the spare could not be opened again). */
#define LISTEN_BACKOFF_NS 100000000

/* Arms (events EPOLLIN) or disarms (none) both listeners. */
static void arm_listeners(struct tn_store_server *s, bool on)
{
    int fds[2] = {s->lfd, s->ufd};
    void *ptrs[2] = {&s->lfd, &s->ufd};
    for (int i = 0; i < 2; i++) {
        if (fds[i] < 0)
            continue;
        struct epoll_event ev = {.events = on ? EPOLLIN : 0u, .data.ptr = ptrs[i]};
        epoll_ctl(s->efd, EPOLL_CTL_MOD, fds[i], &ev);
    }
}

/* Out of descriptors (accept4 failed with EMFILE or ENFILE): the pending
 * client would stay in the backlog, the level-triggered listener would wake
 * the loop for it forever (a spin that locked every new client out). Closes
 * the spare descriptor, accepts the client and closes it (it sees its
 * connection end and may retry), and takes the spare back. Returns false
 * when that freed nothing: the caller disarms the listeners for a while. */
static bool shed_one(struct tn_store_server *s, int lfd)
{
    if (s->spare < 0)
        s->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (s->spare < 0)
        return false;
    close(s->spare);
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        s->shed++;
    }
    s->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return fd >= 0;
}

/* Says through the server's log (once per shortage) that it ran out of
 * descriptors (err: EMFILE or ENFILE), or that it accepts clients again. */
static void log_starved(struct tn_store_server *s, bool starved, int err)
{
    if (s->starved == starved)
        return;
    s->starved = starved;
    if (!s->log)
        return;
    char line[256];
    if (starved) {
        struct rlimit rl = {0};
        getrlimit(RLIMIT_NOFILE, &rl);
        snprintf(line, sizeof line,
                 "store: out of file descriptors (%s, %d clients, ulimit -n %llu): new clients "
                 "are shed until some close", err == EMFILE ? "EMFILE: the process's limit"
                                                            : "ENFILE: the system's limit",
                 s->nconns, (unsigned long long)rl.rlim_cur);
    } else {
        snprintf(line, sizeof line, "store: accepting clients again (%lu shed so far)", s->shed);
    }
    s->log(s->log_arg, line);
}

/* Accepts every pending client of listener lfd into a new connection, up
 * to max_clients (those past it are closed); out of descriptors, sheds them
 * (shed_one) or disarms the listeners for LISTEN_BACKOFF_NS, and says so
 * once in the log. */
static void accept_all(struct tn_store_server *s, int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
            log_starved(s, true, errno);
            if (shed_one(s, lfd))
                continue;
            arm_listeners(s, false);
            s->listen_off_until = now_ns() + LISTEN_BACKOFF_NS;
            return;
        }
        if (fd < 0)
            return; /* EAGAIN, or another error: the client retries */
        log_starved(s, false, 0);
        if (s->nconns >= s->max_clients) {
            close(fd);
            continue;
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        int one = 1;
        if (lfd == s->lfd)
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd = fd;
        c->last_rx = now_ns();
        c->authed = s->token == NULL;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(s->efd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            free(c);
            continue;
        }
        c->next = s->conns;
        if (s->conns)
            s->conns->prev = c;
        s->conns = c;
        s->nconns++;
    }
}

/* A client that got its reply usually sends its next request within a few
 * microseconds, before this thread would be awake again: after a turn that
 * replied, the loop looks for it without sleeping for this long. */
#define REPLY_SPIN_NS 20000

/* Monotonic nanoseconds. */
static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The server thread: epoll over the listeners, the clients and stopfd until
 * tn_store_server_stop; owns every connection. */
static void *loop(void *arg)
{
    struct tn_store_server *s = arg;
    struct epoll_event evs[128];
    /* After a turn that only took requests without replies (a burst of
     * sets), yield and look again without sleeping: the client keeps
     * sending while this thread is runnable, so its sends wake nothing and
     * this thread does not preempt it on its CPU at every send (a wakeup
     * per few sets, a context switch each: set's CPU per call 2.1 -> 1.7 us
     * in the client). A turn that replied sleeps at once, as before. */
    int timeout = -1;
    int64_t spin_until = 0; /* ns: after a reply, look again until then */
    for (;;) {
        if (timeout == 0 && !spin_until)
            sched_yield();
        if (s->listen_off_until && now_ns() >= s->listen_off_until) {
            s->listen_off_until = 0;
            arm_listeners(s, true);
        }
        int wait_ms = timeout;
        if (s->listen_off_until && wait_ms < 0)
            wait_ms = LISTEN_BACKOFF_NS / 1000000;
        int sweep_ms = (int)(s->sender_timeout / 4000000) + 1;
        if (sweep_ms > 1000)
            sweep_ms = 1000;
        if (wait_ms < 0 || wait_ms > sweep_ms)
            wait_ms = sweep_ms;
        int n = epoll_wait(s->efd, evs, 128, wait_ms);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (n == 0 && spin_until && now_ns() < spin_until)
            continue;
        spin_until = 0;
        timeout = n ? 0 : -1;
        s->replied = false;
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &s->lfd || p == &s->ufd) {
                accept_all(s, *(int *)p);
                continue;
            }
            if (p == &s->stopfd)
                return NULL;
            struct conn *c = p;
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                on_readable(s, c);
            if (!c->dead && (evs[i].events & EPOLLOUT)) {
                flush_conn(s, c);
                process(s, c); /* input held back while output was full */
            }
        }
        /* Close the dead after the batch: a later event may still point at
         * one, so they are reaped here, outside the event array. */
        while (s->kicked) {
            s->kicked = false;
            for (struct conn *k = s->conns; k; k = k->next)
                if (!k->dead && !k->waiting && k->in.len)
                    process(s, k);
        }
        int64_t now = now_ns();
        struct conn *c = s->conns;
        while (c) {
            struct conn *nx = c->next;
            /* a slow sender: part of a request, then nothing for too long */
            if (c->in.len && !c->waiting && c->out.len < MAX_PENDING_OUT &&
                now - c->last_rx > s->sender_timeout)
                c->dead = true;
            if (c->dead)
                close_conn(s, c);
            c = nx;
        }
        if (s->replied) /* the client's next request follows soon */
            spin_until = now_ns() + REPLY_SPIN_NS, timeout = 0;
    }
    return NULL;
}

/* The port fd, a listening TCP socket (IPv4 or IPv6), is bound to, into
 * *port; TN_EINVAL naming fd when it is no socket (getsockname fails), not
 * a TCP one, or not listening. The fd is the caller's (trusted to be open,
 * not its kind). */
static int bound_port(int fd, int *port)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        return tn_set_error(TN_EINVAL, "TCPStore server: listen_fd %d: %s", fd, strerror(errno));
    if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)
        return tn_set_error(TN_EINVAL, "TCPStore server: listen_fd %d is not a TCP socket", fd);
    int listening = 0;
    socklen_t ll = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ll) < 0 || !listening)
        return tn_set_error(TN_EINVAL, "TCPStore server: listen_fd %d is not listening", fd);
    *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                           : ((struct sockaddr_in *)&ss)->sin_port);
    return 0;
}

/* A non-blocking listening socket on host:port (port 0: any; *outport the
 * one bound), or < 0 with the error set. */
static int listen_on(const char *host, int port, int *outport)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host ? host : "0.0.0.0", ps, &hints, &ai);
    if (rc)
        return tn_set_error(TN_EINVAL, "TCPStore server: cannot resolve %s: %s",
                            host ? host : "0.0.0.0", gai_strerror(rc));
    int fd = -1, err = 0;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0)
            break;
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return tn_set_error(TN_EIO, "TCPStore server: failed to bind to %s:%d: %s",
                            host ? host : "0.0.0.0", port, strerror(err));
    if (bound_port(fd, outport) < 0) {
        close(fd);
        return tn_last_status();
    }
    return fd;
}

/* The abstract unix socket that clients on this host move to (see
 * tcpclient.c's try_unix): a name no one can guess from the port alone,
 * NUL first (Linux's abstract namespace: no file, gone with the socket).
 * Without one (TN_STORE_NO_UNIX=1, or an error) every client stays on TCP. */
static void listen_unix(struct tn_store_server *s)
{
    const char *off = getenv("TN_STORE_NO_UNIX");
    if (off && *off && strcmp(off, "0"))
        return;
    uint64_t nonce = 0;
    if (getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != (ssize_t)sizeof nonce)
        nonce = (uint64_t)tn__now_ms() * 2654435761u ^ (uint64_t)getpid();
    struct sockaddr_un ua = {.sun_family = AF_UNIX};
    int n = snprintf(ua.sun_path + 1, sizeof ua.sun_path - 1, "tensorkit-store-%d-%016llx",
                     s->port, (unsigned long long)nonce);
    size_t len = 1 + (size_t)n;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return;
    if (len > sizeof s->uname ||
        bind(fd, (struct sockaddr *)&ua, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) < 0 ||
        listen(fd, SOMAXCONN) < 0) {
        close(fd);
        return;
    }
    memcpy(s->uname, ua.sun_path, len);
    s->unamelen = len;
    s->ufd = fd;
}

/* Contract in tensor/dist.h: binds (or takes opts->listen_fd, then ours),
 * reads TN_STORE_TOKEN, TN_STORE_MAX_BUFFERED and
 * TN_STORE_SENDER_TIMEOUT_MS, and starts the epoll loop's thread; every
 * byte a client sends is untrusted and bounded there (rd_*).  A new server
 * for tn_store_server_stop; NULL with an error (bind, token too long, a
 * listen_fd that is no listening TCP socket). */
struct tn_store_server *tn_store_server_start(const struct tn_store_server_opts *opts)
{
    struct tn_store_server_opts o = {0};
    o.listen_fd = -1;
    if (opts)
        o = *opts;
    struct tn_store_server *s = calloc(1, sizeof *s);
    if (!s) {
        tn_set_error(TN_ENOMEM, "TCPStore server: out of memory");
        return NULL;
    }
    s->lfd = s->efd = s->stopfd = s->ufd = -1;
    s->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
    s->log = o.log;
    s->log_arg = o.log_arg;
    const char *mb = getenv("TN_STORE_MAX_BUFFERED");
    char *end = NULL;
    unsigned long long mbv = mb && *mb ? strtoull(mb, &end, 10) : 0;
    s->max_held = mbv && end && !*end ? (size_t)mbv : MAX_BUFFERED;
    const char *st = getenv("TN_STORE_SENDER_TIMEOUT_MS");
    long long stv = st && *st ? strtoll(st, &end, 10) : 0;
    s->sender_timeout = stv > 0 && !*end ? (int64_t)stv * 1000000 : SENDER_TIMEOUT_NS;
    tn__map_init(&s->map);
    s->max_clients = o.max_clients > 0 ? o.max_clients : 65536;
    const char *tok = o.token ? o.token : getenv("TN_STORE_TOKEN");
    if (tok && *tok) {
        s->toklen = strlen(tok);
        if (s->toklen > TOKEN_MAX) {
            tn_set_error(TN_EINVAL, "TN_STORE_TOKEN is longer than %d bytes", TOKEN_MAX);
            goto fail;
        }
        s->token = strdup(tok);
        if (!s->token)
            goto oom;
    }
    if (o.listen_fd >= 0) {
        /* checked before it is taken over: a refused fd stays the caller's */
        if (bound_port(o.listen_fd, &s->port) < 0)
            goto fail;
        s->lfd = o.listen_fd;
        fcntl(s->lfd, F_SETFL, fcntl(s->lfd, F_GETFL) | O_NONBLOCK);
    } else {
        s->lfd = listen_on(o.host, o.port, &s->port);
        if (s->lfd < 0)
            goto fail;
    }
    s->efd = epoll_create1(EPOLL_CLOEXEC);
    s->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->efd < 0 || s->stopfd < 0) {
        tn_set_error(TN_EIO, "TCPStore server: epoll: %s", strerror(errno));
        goto fail;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->lfd};
    epoll_ctl(s->efd, EPOLL_CTL_ADD, s->lfd, &ev);
    listen_unix(s);
    if (s->ufd >= 0) {
        ev.data.ptr = &s->ufd;
        epoll_ctl(s->efd, EPOLL_CTL_ADD, s->ufd, &ev);
    }
    ev.data.ptr = &s->stopfd;
    epoll_ctl(s->efd, EPOLL_CTL_ADD, s->stopfd, &ev);
    if (pthread_create(&s->thread, NULL, loop, s) != 0) {
        tn_set_error(TN_ERUNTIME, "TCPStore server: cannot start its thread");
        goto fail;
    }
    return s;
oom:
    tn_set_error(TN_ENOMEM, "TCPStore server: out of memory");
fail:
    if (s->lfd >= 0)
        close(s->lfd);
    if (s->ufd >= 0)
        close(s->ufd);
    if (s->efd >= 0)
        close(s->efd);
    if (s->stopfd >= 0)
        close(s->stopfd);
    if (s->spare >= 0)
        close(s->spare);
    free(s->token);
    free(s);
    return NULL;
}

/* The TCP port bound (the kernel's pick when 0 was asked for). */
int tn_store_server_port(const struct tn_store_server *srv)
{
    return srv->port;
}

/* Wakes the loop through stopfd, joins it, closes every connection and
 * socket and frees the map and the server.  NULL is a no-op. */
void tn_store_server_stop(struct tn_store_server *s)
{
    if (!s)
        return;
    uint64_t one = 1;
    ssize_t w = write(s->stopfd, &one, sizeof one);
    (void)w;
    pthread_join(s->thread, NULL);
    while (s->conns)
        close_conn(s, s->conns);
    close(s->lfd);
    if (s->ufd >= 0)
        close(s->ufd);
    close(s->efd);
    close(s->stopfd);
    if (s->spare >= 0)
        close(s->spare);
    tn__map_free(&s->map);
    free(s->token);
    free(s);
}
