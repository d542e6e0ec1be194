/*
 * lib/dist/internal.h: what lib/dist's files share: the store vtable, a byte
 * map, a growable buffer, the wire opcodes, clocks.
 */
#ifndef TN_DIST_INTERNAL_H
#define TN_DIST_INTERNAL_H

#include <tensor/dist.h>

#include "core/le.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* One vtable per store kind. A NULL entry means "not supported" except
 * multi_get, which falls back to one get per key. multi_set must be atomic
 * (every key set or none, and no reader sees some set without the others),
 * so it has no per-key fallback: a kind without it refuses multi_set. Keys arrive as
 * byte strings (k, klen); values returned are malloc'd. */
struct tn__store_ops {
    const char *name;
    int (*set)(struct tn_store *, const char *k, size_t kl, const void *v, size_t vl);
    int (*get)(struct tn_store *, const char *k, size_t kl, void **v, size_t *vl);
    int (*add)(struct tn_store *, const char *k, size_t kl, int64_t d, int64_t *out);
    int (*compare_set)(struct tn_store *, const char *k, size_t kl, const void *e, size_t el,
                       const void *d, size_t dl, void **v, size_t *vl);
    int (*wait)(struct tn_store *, const char *const *keys, size_t n, int64_t timeout_ms);
    int (*check)(struct tn_store *, const char *const *keys, size_t n);
    int (*del)(struct tn_store *, const char *k, size_t kl);
    int (*num_keys)(struct tn_store *, int64_t *out);
    int (*append)(struct tn_store *, const char *k, size_t kl, const void *v, size_t vl);
    int (*multi_get)(struct tn_store *, const char *const *keys, size_t n, void **v, size_t *vl);
    int (*multi_set)(struct tn_store *, const char *const *keys, size_t n,
                     const void *const *v, const size_t *vl);
    int (*queue_push)(struct tn_store *, const char *k, size_t kl, const void *v, size_t vl);
    int (*queue_pop)(struct tn_store *, const char *k, size_t kl, bool block, void **v,
                     size_t *vl);
    int (*queue_len)(struct tn_store *, const char *k, size_t kl, int64_t *out);
    /* This host's address as the store's server sees it (the local address of
     * the connection to it), numeric, into buf; -1 where the store has none
     * (NULL: in-process and file stores). */
    int (*local_addr)(struct tn_store *, char *buf, size_t n);
    void (*destroy)(struct tn_store *);
};

struct tn_store {
    const struct tn__store_ops *ops;
    atomic_int refs;
    _Atomic int64_t timeout_ms;
};

void tn__store_init(struct tn_store *s, const struct tn__store_ops *ops);
/* The address of this host that reaches the store's server (see local_addr),
 * into buf; -1 where the store has none. */
int tn__store_local_addr(struct tn_store *s, char *buf, size_t n);

/* ------------------------------------------------------------ byte map */

struct tn__qitem {
    struct tn__qitem *next;
    size_t len;
    char data[];
};

struct tn__kv {
    struct tn__kv *next;
    uint64_t hash;
    char *key;
    size_t klen;
    char *val; /* NULL only for a queue-only entry */
    size_t vlen;
    struct tn__qitem *qhead, *qtail;
    int64_t qlen;
};

struct tn__map {
    struct tn__kv **slots;
    size_t nslots, count; /* count: entries holding a value */
    size_t nentries;
};

void tn__map_init(struct tn__map *m);
void tn__map_free(struct tn__map *m);
/* The entry for key, or NULL. */
struct tn__kv *tn__map_find(const struct tn__map *m, const char *k, size_t kl);
/* The entry for key, made when missing; NULL on ENOMEM. */
struct tn__kv *tn__map_entry(struct tn__map *m, const char *k, size_t kl);
/* Replaces the value (copying); returns 0 or TN_ENOMEM. */
int tn__map_setval(struct tn__map *m, struct tn__kv *e, const void *v, size_t vl);
/* Sets every keys[i] to v[i] (vl[i] bytes), all or nothing: 0, or
 * TN_ENOMEM with the map unchanged. */
int tn__map_set_all(struct tn__map *m, const char *const *keys, size_t n, const void *const *v,
                    const size_t *vl);
/* Drops the value; frees the entry when it has no queue. Returns whether a
 * value existed. */
bool tn__map_delval(struct tn__map *m, struct tn__kv *e);
/* Whether the key "exists" for check/wait: a value or a non-empty queue. */
static inline bool tn__kv_exists(const struct tn__kv *e)
{
    return e && (e->val || e->qlen > 0);
}
int tn__map_push(struct tn__map *m, struct tn__kv *e, const void *v, size_t vl);
/* Pops the oldest item (caller frees it), NULL when empty. */
struct tn__qitem *tn__map_pop(struct tn__map *m, struct tn__kv *e);

/* The add arithmetic shared by every store: parses the stored decimal value
 * (missing: 0), adds, formats back. */
int tn__add_value(const char *k, size_t kl, const char *old, size_t oldlen, int64_t delta,
                  int64_t *out, char *buf, size_t *buflen);

/* ------------------------------------------------------------ buffers */

struct tn__dbuf {
    char *data;
    size_t len, cap;
};

int tn__db_reserve(struct tn__dbuf *b, size_t extra);
int tn__db_put(struct tn__dbuf *b, const void *p, size_t n);
int tn__db_u8(struct tn__dbuf *b, uint8_t v);
int tn__db_u32(struct tn__dbuf *b, uint32_t v);
int tn__db_u64(struct tn__dbuf *b, uint64_t v);
int tn__db_str(struct tn__dbuf *b, const void *p, size_t n); /* u64 length + bytes */
void tn__db_consume(struct tn__dbuf *b, size_t n);
void tn__db_free(struct tn__dbuf *b);

/* ------------------------------------------------------------ protocol */

enum tn__store_cmd {
    TN_STORE_CMD_VALIDATE = 0,
    TN_STORE_CMD_SET = 1,
    TN_STORE_CMD_COMPARE_SET = 2,
    TN_STORE_CMD_GET = 3,
    TN_STORE_CMD_ADD = 4,
    TN_STORE_CMD_CHECK = 5,
    TN_STORE_CMD_WAIT = 6,
    TN_STORE_CMD_GETNUMKEYS = 7,
    TN_STORE_CMD_DELETE_KEY = 8,
    TN_STORE_CMD_APPEND = 9,
    TN_STORE_CMD_MULTI_GET = 10,
    TN_STORE_CMD_MULTI_SET = 11,
    TN_STORE_CMD_CANCEL_WAIT = 12,
    TN_STORE_CMD_PING = 13,
    TN_STORE_CMD_QUEUE_PUSH = 14,
    TN_STORE_CMD_QUEUE_POP = 15,
    TN_STORE_CMD_QUEUE_LEN = 16,
    /* Ours, far from PyTorch's table so its future opcodes never collide:
     * u64 length + token; reply u8 1. */
    TN_STORE_CMD_AUTH = 0x7A
};

#define TN_STORE_MAGIC 0x3C85F7CEu

/* A key our server reports as present to CHECK (PyTorch's servers: absent),
 * so our client learns in its handshake, without a round trip of its own,
 * that it may pipeline CHECK and GET (one round trip per get instead of
 * WAIT's and GET's two). No user key starts with NUL. */
#define TN_STORE_PROBE_KEY "\0tensorkit-server"
#define TN_STORE_PROBE_KEYLEN (sizeof TN_STORE_PROBE_KEY - 1)
/* The key whose GET our server answers with the name of its abstract unix
 * socket (empty without one), for clients on its host. */
#define TN_STORE_UNIX_KEY "\0tensorkit-unix"
#define TN_STORE_UNIX_KEYLEN (sizeof TN_STORE_UNIX_KEY - 1)
/* Whether a TCPStore client moved to its server's unix socket (tests). */
bool tn__store_tcp_local(const struct tn_store *s);

/* ------------------------------------------------------------ misc */

/* Monotonic milliseconds. */
int64_t tn__now_ms(void);
/* Timeout message in PyTorch's words: "wait timeout after 1000ms, keys: /a, /b". */
int tn__wait_timeout_error(int64_t ms, const char *const *keys, size_t n, const char *prefix);

/* ------------------------------------------------------------ async work */

/* A process group's queue of async collectives (pg_async.c). */
struct tn__pgq;
/* The group's queue slot (pg.c); NULL until the first async call. */
struct tn__pgq **tn__pg_queue(struct tn_pg *pg);
/* Waits until the queued work finished; returns at once on the queue's own
 * thread or for a NULL queue. */
void tn__pgq_drain(struct tn__pgq *q);
/* Drains, stops the queue's thread and frees the queue. */
void tn__pgq_free(struct tn__pgq *q);

/* ------------------------------------------------------------ backends */

/* A process-group backend (pg_tcp.c, pg_mpi.c, pg_nccl.c). The public
 * tn_pg_* functions (pg.c) number the
 * collective, refuse it on a broken group, check the tensors and arguments,
 * then call these with pg's impl; a NULL entry is "not supported by the
 * backend". Each returns 0 or a negative status with the error set; one
 * that gave up waiting calls tn__pg_fail so every rank agrees. */
struct tn__pg_backend {
    const char *name;
    enum tn_device_type device; /* the tensors it takes */
    int (*allreduce)(struct tn_pg *, struct tn_tensor *, enum tn_reduce_op);
    int (*broadcast)(struct tn_pg *, struct tn_tensor *, int root);
    int (*allgather)(struct tn_pg *, struct tn_tensor *out, const struct tn_tensor *in);
    int (*barrier)(struct tn_pg *);
    int (*reduce)(struct tn_pg *, struct tn_tensor *, enum tn_reduce_op, int root);
    int (*gather)(struct tn_pg *, struct tn_tensor *out, const struct tn_tensor *in, int root);
    int (*scatter)(struct tn_pg *, struct tn_tensor *out, const struct tn_tensor *in, int root);
    int (*reduce_scatter)(struct tn_pg *, struct tn_tensor *out, const struct tn_tensor *in,
                          enum tn_reduce_op);
    int (*all_to_all)(struct tn_pg *, struct tn_tensor *out, const struct tn_tensor *in);
    int (*send)(struct tn_pg *, const struct tn_tensor *, int dst);
    int (*recv)(struct tn_pg *, struct tn_tensor *, int src);
    void (*destroy)(void *impl, bool broken);
    /* A collective failed (tn__pg_fail): make peers still in it see that at
     * once, as shutting the sockets does. NULL: nothing to do. */
    void (*abort)(struct tn_pg *);
    /* Whether reduce_scatter with this out runs as an allreduce of a copy
     * (pg.c) instead of the reduce_scatter entry. NULL: never. */
    bool (*rs_by_allreduce)(const struct tn_pg *, const struct tn_tensor *out);
};

/* A process group (pg.c); the backend's own state is impl. */
struct tn_pg {
    int rank, size;
    int64_t timeout_ms;
    uint64_t seq;
    const char *op;          /* the running collective, for messages */
    struct tn_store *store;  /* where ranks agree on a failure */
    char *verdict;           /* the agreed failure; the group is broken */
    int verdict_status;
    struct tn__pgq *queue; /* async work (pg_async.c), made on first use */
    const struct tn__pg_backend *be; /* never NULL */
    void *impl;                      /* the backend's state, owned (be->destroy) */
};

/* A tcp group on the address TN_PG_HOST, TN_PG_IFNAME or the store's
 * connection give (pg_tcp.c); NULL with the error set. */
struct tn_pg *tn__pg_new_tcp_env(struct tn_store *store, int rank, int world_size,
                                 int64_t timeout_ms);

/* A group run by backend be over impl (owned: destroyed with the group);
 * store (may be NULL; a reference is taken) is where ranks agree on a
 * failure. NULL with the error set. */
struct tn_pg *tn__pg_new_backend(const struct tn__pg_backend *be, void *impl,
                                 struct tn_store *store, int rank, int size, int64_t timeout_ms);
void *tn__pg_impl(const struct tn_pg *pg);
int64_t tn__pg_timeout(const struct tn_pg *pg);
/* The running collective's name and number, for messages. */
const char *tn__pg_op(const struct tn_pg *pg);
uint64_t tn__pg_seq(const struct tn_pg *pg);
/* The running collective failed on this rank with status and the error set:
 * agree with the other ranks through the store on one verdict naming the
 * ranks that never arrived (without a store, this rank's message), break
 * the group and return the verdict's status with its message. */
int tn__pg_fail(struct tn_pg *pg, int status);
/* dst[i] = dst[i] op src[i] for n elements, the tcp backend's arithmetic
 * (NaN propagates through min and max; bool sum/max are "or"). */
void tn__pg_reduce_into(void *dst, const void *src, int64_t n, enum tn_dtype dt,
                        enum tn_reduce_op op);
/* Whether a tcp group moves large buffers through shared memory (tests). */
bool tn__pg_uses_shm(const struct tn_pg *pg);
/* buf /= by elementwise (AVG's division; floating dtypes only). */
void tn__pg_divide(void *buf, int64_t n, enum tn_dtype dt, int by);
/* Every rank's 8-byte value in vals[rank] (a collective over the sockets). */
int tn__pg_share(struct tn_pg *pg, uint64_t mine, uint64_t *vals);
/* A tcp group's socket to peer and the peer's pid (0 without shared memory). */
int tn__pg_peer_fd(const struct tn_pg *pg, int peer);
int tn__pg_peer_pid(const struct tn_pg *pg, int peer);
/* The running collective failed waiting for peer (errno 0: it timed out):
 * the error naming it, agreed with the other ranks (tn__pg_fail). */
int tn__pg_peer_error(struct tn_pg *pg, int peer, const char *what);

/* A tcp group's shared segments for large allreduces on one host (pg_shm.c). */
struct tn__pgshm;
/* Allreduce (without AVG's division) through the segments, made at the
 * first call (*sp, a collective); 1 when they could not be made on every
 * rank (the caller takes another path, and so does every rank), else 0 or
 * < 0 with the group's failure agreed. */
int tn__pgshm_allreduce(struct tn_pg *pg, struct tn__pgshm **sp, char *buf, int64_t n,
                        enum tn_dtype dt, enum tn_reduce_op op);
void tn__pgshm_free(struct tn__pgshm *s);

#endif
