/*
 * lib/dist/store.c: the store interface (one vtable per kind), the
 * in-process HashStore and the PrefixStore.
 */
#include "dist/internal.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

/* Fills a new store's base: ops (static, not owned), one reference, the
 * default timeout. */
void tn__store_init(struct tn_store *s, const struct tn__store_ops *ops)
{
    s->ops = ops;
    atomic_init(&s->refs, 1);
    atomic_init(&s->timeout_ms, TN_STORE_DEFAULT_TIMEOUT_MS);
}

/* Takes one more reference to s (NULL: no-op); thread-safe. */
void tn_store_retain(struct tn_store *s)
{
    if (s)
        atomic_fetch_add(&s->refs, 1);
}

/* Drops one reference; the last destroys the store through its kind's
 * destroy (closing sockets, files).  NULL: no-op. */
void tn_store_release(struct tn_store *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1)
        s->ops->destroy(s);
}

/* The timeout of s's blocking operations from now on, in ms (< 0 is 0). */
void tn_store_set_timeout(struct tn_store *s, int64_t timeout_ms)
{
    atomic_store(&s->timeout_ms, timeout_ms < 0 ? 0 : timeout_ms);
}

/* The timeout of s's blocking operations, in ms. */
int64_t tn_store_timeout(const struct tn_store *s)
{
    return atomic_load(&((struct tn_store *)s)->timeout_ms);
}

/* TN_ERUNTIME naming the store kind that lacks what. */
static int unsupported(const struct tn_store *s, const char *what)
{
    return tn_set_error(TN_ERUNTIME, "%s is not implemented by %s", what, s->ops->name);
}

/* 0 when key (the caller's, trusted to be a C string) is non-NULL and within
 * TN_STORE_MAX_KEY, else TN_EINVAL with the error set. */
static int check_key(const char *key)
{
    if (!key)
        return tn_set_error(TN_EINVAL, "store: a key is NULL");
    if (strlen(key) > TN_STORE_MAX_KEY)
        return tn_set_error(TN_EINVAL, "store: a key of %zu bytes is longer than %u",
                            strlen(key), TN_STORE_MAX_KEY);
    return 0;
}

/* 0 when n is within TN_STORE_MAX_KEYS_PER_REQUEST and every key passes
 * check_key, else TN_EINVAL with the error set. */
static int check_keys(const char *const *keys, size_t n)
{
    if (n > TN_STORE_MAX_KEYS_PER_REQUEST)
        return tn_set_error(TN_EINVAL, "store: %zu keys in one request, more than %u", n,
                            TN_STORE_MAX_KEYS_PER_REQUEST);
    for (size_t i = 0; i < n; i++)
        if (check_key(keys[i]) < 0)
            return TN_EINVAL;
    return 0;
}

/* 0 when a value of len bytes is within TN_STORE_MAX_VALUE, else TN_EINVAL
 * with the error set. */
static int check_value(size_t len)
{
    if (len > TN_STORE_MAX_VALUE)
        return tn_set_error(TN_EINVAL, "store: a value of %zu bytes is larger than %u", len,
                            TN_STORE_MAX_VALUE);
    return 0;
}

/* The public store operations (contracts in tensor/dist.h) below each
 * check the caller's keys and value lengths against TN_STORE_MAX_* (so a
 * request cannot exceed what a server accepts), then call the kind's op;
 * an op the kind lacks is TN_ERUNTIME naming it.  Returned values are
 * malloc'd and the caller's.  0 (or a count) on success, else an error.
 *
 * SET: key's value replaced, its waiters woken. */
int tn_store_set(struct tn_store *s, const char *key, const void *val, size_t len)
{
    if (check_key(key) < 0 || check_value(len) < 0)
        return tn_last_status();
    return s->ops->set(s, key, strlen(key), val, len);
}

/* GET: waits for key up to the timeout; *val malloc'd, the caller's. */
int tn_store_get(struct tn_store *s, const char *key, void **val, size_t *len)
{
    if (check_key(key) < 0)
        return TN_EINVAL;
    return s->ops->get(s, key, strlen(key), val, len);
}

/* ADD: the decimal counter at key moved by delta; the new value to *out. */
int tn_store_add(struct tn_store *s, const char *key, int64_t delta, int64_t *out)
{
    int64_t tmp;
    if (check_key(key) < 0)
        return TN_EINVAL;
    return s->ops->add(s, key, strlen(key), delta, out ? out : &tmp);
}

/* COMPARE_SET: desired stored when key holds expected; *val (malloc'd)
 * is the value now stored. */
int tn_store_compare_set(struct tn_store *s, const char *key, const void *expected, size_t elen,
                         const void *desired, size_t dlen, void **val, size_t *len)
{
    if (check_key(key) < 0 || check_value(elen) < 0 || check_value(dlen) < 0)
        return tn_last_status();
    if (!s->ops->compare_set)
        return unsupported(s, "compare_set");
    return s->ops->compare_set(s, key, strlen(key), expected, elen, desired, dlen, val, len);
}

/* WAIT: until every key exists, or TN_ETIMEOUT (timeout_ms < 0: the
 * store's). */
int tn_store_wait(struct tn_store *s, const char *const *keys, size_t n, int64_t timeout_ms)
{
    if (check_keys(keys, n) < 0)
        return TN_EINVAL;
    if (timeout_ms < 0)
        timeout_ms = tn_store_timeout(s);
    return s->ops->wait(s, keys, n, timeout_ms);
}

/* CHECK: 1 when every key exists, 0 when one does not. */
int tn_store_check(struct tn_store *s, const char *const *keys, size_t n)
{
    if (check_keys(keys, n) < 0)
        return TN_EINVAL;
    return s->ops->check(s, keys, n);
}

/* DELETE_KEY: 1 when key existed, 0 when not. */
int tn_store_delete(struct tn_store *s, const char *key)
{
    if (check_key(key) < 0)
        return TN_EINVAL;
    if (!s->ops->del)
        return unsupported(s, "delete_key");
    return s->ops->del(s, key, strlen(key));
}

/* GETNUMKEYS: the key count into *out. */
int tn_store_num_keys(struct tn_store *s, int64_t *out)
{
    if (!s->ops->num_keys)
        return unsupported(s, "num_keys");
    return s->ops->num_keys(s, out);
}

/* APPEND: bytes added to key's value (created when missing). */
int tn_store_append(struct tn_store *s, const char *key, const void *val, size_t len)
{
    if (check_key(key) < 0 || check_value(len) < 0)
        return tn_last_status();
    if (!s->ops->append)
        return unsupported(s, "append");
    return s->ops->append(s, key, strlen(key), val, len);
}

/* MULTI_GET: every key's value (waiting), one request where the kind has
 * it, else one GET each; on failure none is returned (those got freed). */
int tn_store_multi_get(struct tn_store *s, const char *const *keys, size_t n, void **vals,
                       size_t *lens)
{
    if (check_keys(keys, n) < 0)
        return TN_EINVAL;
    if (s->ops->multi_get)
        return s->ops->multi_get(s, keys, n, vals, lens);
    for (size_t i = 0; i < n; i++) {
        int rc = s->ops->get(s, keys[i], strlen(keys[i]), &vals[i], &lens[i]);
        if (rc < 0) {
            while (i > 0)
                free(vals[--i]);
            return rc;
        }
    }
    return 0;
}

/* MULTI_SET: every key set at once, or none (each kind's multi_set is
 * atomic: a reader never sees some of the keys set without the others). */
int tn_store_multi_set(struct tn_store *s, const char *const *keys, size_t n,
                       const void *const *vals, const size_t *lens)
{
    if (check_keys(keys, n) < 0)
        return TN_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (check_value(lens[i]) < 0)
            return TN_EINVAL;
    if (!s->ops->multi_set)
        return unsupported(s, "multi_set");
    return s->ops->multi_set(s, keys, n, vals, lens);
}

/* QUEUE_PUSH: val appended to the queue named key. */
int tn_store_queue_push(struct tn_store *s, const char *key, const void *val, size_t len)
{
    if (check_key(key) < 0 || check_value(len) < 0)
        return tn_last_status();
    if (!s->ops->queue_push)
        return unsupported(s, "queue_push");
    return s->ops->queue_push(s, key, strlen(key), val, len);
}

/* QUEUE_POP: the oldest item (malloc'd), waiting when `block`; empty
 * without block is TN_EINDEX. */
int tn_store_queue_pop(struct tn_store *s, const char *key, bool block, void **val, size_t *len)
{
    if (check_key(key) < 0)
        return TN_EINVAL;
    if (!s->ops->queue_pop)
        return unsupported(s, "queue_pop");
    return s->ops->queue_pop(s, key, strlen(key), block, val, len);
}

/* QUEUE_LEN: the queue's item count into *out. */
int tn_store_queue_len(struct tn_store *s, const char *key, int64_t *out)
{
    if (check_key(key) < 0)
        return TN_EINVAL;
    if (!s->ops->queue_len)
        return unsupported(s, "queue_len");
    return s->ops->queue_len(s, key, strlen(key), out);
}

/* ------------------------------------------------------------ HashStore */

struct hash_store {
    struct tn_store base;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* broadcast on every change that can satisfy a wait */
    struct tn__map map;
};

#define HS(s) ((struct hash_store *)(s))

/* The absolute CLOCK_MONOTONIC time of deadline_ms (ms since that clock's
 * origin) for pthread_cond_timedwait. */
static void deadline_ts(struct timespec *ts, int64_t deadline_ms)
{
    /* The condvar uses CLOCK_MONOTONIC (set at creation). */
    ts->tv_sec = deadline_ms / 1000;
    ts->tv_nsec = (deadline_ms % 1000) * 1000000;
}

/* Whether every key exists (a value or a non-empty queue); h->mu is held. */
static bool all_exist(struct hash_store *h, const char *const *keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!tn__kv_exists(tn__map_find(&h->map, keys[i], strlen(keys[i]))))
            return false;
    return true;
}

/* Waits with h->mu held until every key exists; unlocks on failure too? No:
 * returns with the mutex still held either way. */
static int hs_wait_locked(struct hash_store *h, const char *const *keys, size_t n,
                          int64_t timeout_ms)
{
    int64_t deadline = tn__now_ms() + timeout_ms;
    while (!all_exist(h, keys, n)) {
        struct timespec ts;
        deadline_ts(&ts, deadline);
        if (pthread_cond_timedwait(&h->cv, &h->mu, &ts) == ETIMEDOUT && !all_exist(h, keys, n))
            return tn__wait_timeout_error(timeout_ms, keys, n, NULL);
    }
    return 0;
}

/* tn__store_ops.set for the HashStore: copies the value under the lock and
 * wakes every waiter; 0 or TN_ENOMEM. */
static int hs_set(struct tn_store *s, const char *k, size_t kl, const void *v, size_t vl)
{
    struct hash_store *h = HS(s);
    pthread_mutex_lock(&h->mu);
    struct tn__kv *e = tn__map_entry(&h->map, k, kl);
    int rc = e ? tn__map_setval(&h->map, e, v, vl) : TN_ENOMEM;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return rc < 0 ? tn_set_error(TN_ENOMEM, "HashStore: out of memory setting %s", k) : 0;
}

/* tn__store_ops.multi_set for the HashStore: every value set under one
 * hold of the lock, all or nothing (tn__map_set_all), waiters woken; 0 or
 * TN_ENOMEM with no key changed. */
static int hs_multi_set(struct tn_store *s, const char *const *keys, size_t n,
                        const void *const *v, const size_t *vl)
{
    struct hash_store *h = HS(s);
    pthread_mutex_lock(&h->mu);
    int rc = tn__map_set_all(&h->map, keys, n, v, vl);
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return rc < 0 ? tn_set_error(TN_ENOMEM, "HashStore: out of memory in multi_set of %zu keys", n)
                  : 0;
}

/* A malloc'd copy of n bytes of v plus a NUL (the caller frees it); NULL
 * when memory ran out. */
static void *dup_bytes(const void *v, size_t n)
{
    char *c = malloc(n + 1);
    if (c) {
        if (n)
            memcpy(c, v, n);
        c[n] = 0;
    }
    return c;
}

/* tn__store_ops.get: waits up to the store's timeout for k, then *v is a
 * malloc'd copy the caller frees (empty for a queue-only key). */
static int hs_get(struct tn_store *s, const char *k, size_t kl, void **v, size_t *vl)
{
    struct hash_store *h = HS(s);
    const char *keys[1] = {k};
    pthread_mutex_lock(&h->mu);
    int rc = hs_wait_locked(h, keys, 1, tn_store_timeout(s));
    if (rc == 0) {
        struct tn__kv *e = tn__map_find(&h->map, k, kl);
        if (!e->val) { /* only a queue of that name */
            *v = dup_bytes("", 0);
            *vl = 0;
        } else {
            *v = dup_bytes(e->val, e->vlen);
            *vl = e->vlen;
        }
        if (!*v)
            rc = tn_set_error(TN_ENOMEM, "HashStore: out of memory reading %s", k);
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

/* tn__store_ops.add: the decimal value plus d (missing: 0) into *out, stored
 * back, waiters woken. */
static int hs_add(struct tn_store *s, const char *k, size_t kl, int64_t d, int64_t *out)
{
    struct hash_store *h = HS(s);
    char buf[32];
    size_t bl;
    pthread_mutex_lock(&h->mu);
    struct tn__kv *e = tn__map_find(&h->map, k, kl);
    int rc = tn__add_value(k, kl, e ? e->val : NULL, e ? e->vlen : 0, d, out, buf, &bl);
    if (rc == 0) {
        e = tn__map_entry(&h->map, k, kl);
        rc = e ? tn__map_setval(&h->map, e, buf, bl) : TN_ENOMEM;
        if (rc < 0)
            rc = tn_set_error(TN_ENOMEM, "HashStore: out of memory adding to %s", k);
        pthread_cond_broadcast(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

/* tn__store_ops.compare_set with TCPStore's rules; *v is a malloc'd copy of
 * the value now stored (the caller frees it). */
static int hs_compare_set(struct tn_store *s, const char *k, size_t kl, const void *ev,
                          size_t el, const void *dv, size_t dl, void **v, size_t *vl)
{
    struct hash_store *h = HS(s);
    int rc = 0;
    pthread_mutex_lock(&h->mu);
    struct tn__kv *e = tn__map_find(&h->map, k, kl);
    const void *res;
    size_t rl;
    if (!e || !e->val) {
        if (el == 0) {
            e = tn__map_entry(&h->map, k, kl);
            if (!e || tn__map_setval(&h->map, e, dv, dl) < 0)
                rc = TN_ENOMEM;
            res = dv;
            rl = dl;
            pthread_cond_broadcast(&h->cv);
        } else {
            res = ev;
            rl = el;
        }
    } else if (e->vlen == el && memcmp(e->val, ev, el) == 0) {
        if (tn__map_setval(&h->map, e, dv, dl) < 0)
            rc = TN_ENOMEM;
        res = dv;
        rl = dl;
    } else {
        res = e->val;
        rl = e->vlen;
    }
    if (rc == 0) {
        *v = dup_bytes(res, rl);
        *vl = rl;
        if (!*v)
            rc = TN_ENOMEM;
    }
    pthread_mutex_unlock(&h->mu);
    return rc < 0 ? tn_set_error(TN_ENOMEM, "HashStore: out of memory in compare_set of %s", k)
                  : 0;
}

/* tn__store_ops.wait: 0 once every key exists, TN_ETIMEOUT after timeout_ms. */
static int hs_wait(struct tn_store *s, const char *const *keys, size_t n, int64_t timeout_ms)
{
    struct hash_store *h = HS(s);
    pthread_mutex_lock(&h->mu);
    int rc = hs_wait_locked(h, keys, n, timeout_ms);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

/* tn__store_ops.check: 1 when every key exists, else 0. */
static int hs_check(struct tn_store *s, const char *const *keys, size_t n)
{
    struct hash_store *h = HS(s);
    pthread_mutex_lock(&h->mu);
    bool ok = all_exist(h, keys, n);
    pthread_mutex_unlock(&h->mu);
    return ok;
}

/* tn__store_ops.del: 1 when k held a value (now dropped), else 0. */
static int hs_del(struct tn_store *s, const char *k, size_t kl)
{
    struct hash_store *h = HS(s);
    pthread_mutex_lock(&h->mu);
    struct tn__kv *e = tn__map_find(&h->map, k, kl);
    bool had = e && tn__map_delval(&h->map, e);
    pthread_mutex_unlock(&h->mu);
    return had;
}

/* tn__store_ops.num_keys: the number of keys holding a value into *out. */
static int hs_num_keys(struct tn_store *s, int64_t *out)
{
    struct hash_store *h = HS(s);
    pthread_mutex_lock(&h->mu);
    *out = (int64_t)h->map.count;
    pthread_mutex_unlock(&h->mu);
    return 0;
}

/* tn__store_ops.append: v appended to k's value (a missing key is set),
 * waiters woken; 0 or an error. */
static int hs_append(struct tn_store *s, const char *k, size_t kl, const void *v, size_t vl)
{
    struct hash_store *h = HS(s);
    int rc = 0;
    pthread_mutex_lock(&h->mu);
    struct tn__kv *e = tn__map_entry(&h->map, k, kl);
    if (!e) {
        rc = TN_ENOMEM;
    } else if (!e->val) {
        rc = tn__map_setval(&h->map, e, v, vl);
    } else if (e->vlen + vl > TN_STORE_MAX_VALUE) {
        rc = TN_EINVAL;
    } else {
        char *n = realloc(e->val, e->vlen + vl + 1);
        if (!n) {
            rc = TN_ENOMEM;
        } else {
            memcpy(n + e->vlen, v, vl);
            e->val = n;
            e->vlen += vl;
        }
    }
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    if (rc == TN_EINVAL)
        return tn_set_error(rc, "HashStore: append would make %s larger than %u bytes", k,
                            TN_STORE_MAX_VALUE);
    return rc < 0 ? tn_set_error(rc, "HashStore: out of memory appending to %s", k) : 0;
}

/* tn__store_ops.queue_push: a copy of v queued under k, waiters woken; 0 or
 * TN_ENOMEM. */
static int hs_queue_push(struct tn_store *s, const char *k, size_t kl, const void *v, size_t vl)
{
    struct hash_store *h = HS(s);
    pthread_mutex_lock(&h->mu);
    struct tn__kv *e = tn__map_entry(&h->map, k, kl);
    int rc = e ? tn__map_push(&h->map, e, v, vl) : TN_ENOMEM;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return rc < 0 ? tn_set_error(rc, "HashStore: out of memory pushing to %s", k) : 0;
}

/* tn__store_ops.queue_pop: the oldest item as a malloc'd *v the caller
 * frees; with block, waits up to the timeout for one. */
static int hs_queue_pop(struct tn_store *s, const char *k, size_t kl, bool block, void **v,
                        size_t *vl)
{
    struct hash_store *h = HS(s);
    int rc = 0;
    int64_t timeout = tn_store_timeout(s), deadline = tn__now_ms() + timeout;
    pthread_mutex_lock(&h->mu);
    struct tn__kv *e;
    while (!((e = tn__map_find(&h->map, k, kl)) && e->qlen > 0)) {
        if (!block) {
            rc = tn_set_error(TN_EINDEX, "queue_pop: the queue %s is empty", k);
            break;
        }
        struct timespec ts;
        deadline_ts(&ts, deadline);
        if (pthread_cond_timedwait(&h->cv, &h->mu, &ts) == ETIMEDOUT) {
            e = tn__map_find(&h->map, k, kl);
            if (!(e && e->qlen > 0)) {
                const char *keys[1] = {k};
                rc = tn__wait_timeout_error(timeout, keys, 1, NULL);
                break;
            }
        }
    }
    if (rc == 0) {
        struct tn__qitem *q = tn__map_pop(&h->map, e);
        *v = dup_bytes(q->data, q->len);
        *vl = q->len;
        free(q);
        if (!*v)
            rc = tn_set_error(TN_ENOMEM, "HashStore: out of memory popping %s", k);
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

/* tn__store_ops.queue_len: the length of k's queue (0 when none) into *out. */
static int hs_queue_len(struct tn_store *s, const char *k, size_t kl, int64_t *out)
{
    struct hash_store *h = HS(s);
    pthread_mutex_lock(&h->mu);
    struct tn__kv *e = tn__map_find(&h->map, k, kl);
    *out = e ? e->qlen : 0;
    pthread_mutex_unlock(&h->mu);
    return 0;
}

/* tn__store_ops.destroy: frees the map, the lock and the store (last
 * reference gone). */
static void hs_destroy(struct tn_store *s)
{
    struct hash_store *h = HS(s);
    tn__map_free(&h->map);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

static const struct tn__store_ops hash_ops = {
    .name = "HashStore",
    .set = hs_set,
    .get = hs_get,
    .add = hs_add,
    .compare_set = hs_compare_set,
    .wait = hs_wait,
    .check = hs_check,
    .del = hs_del,
    .num_keys = hs_num_keys,
    .append = hs_append,
    .multi_set = hs_multi_set,
    .queue_push = hs_queue_push,
    .queue_pop = hs_queue_pop,
    .queue_len = hs_queue_len,
    .destroy = hs_destroy,
};

/* Contract in tensor/dist.h: an empty in-process store (a mutex and a
 * condition variable over the map).  A new reference; NULL with TN_ENOMEM. */
struct tn_store *tn_store_hash_new(void)
{
    struct hash_store *h = calloc(1, sizeof *h);
    if (!h) {
        tn_set_error(TN_ENOMEM, "HashStore: out of memory");
        return NULL;
    }
    tn__store_init(&h->base, &hash_ops);
    pthread_mutex_init(&h->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cv, &ca);
    pthread_condattr_destroy(&ca);
    tn__map_init(&h->map);
    return &h->base;
}

/* ------------------------------------------------------------ PrefixStore */

struct prefix_store {
    struct tn_store base;
    struct tn_store *inner;
    char *prefix; /* with the trailing "/" */
    size_t plen;
};

#define PS(s) ((struct prefix_store *)(s))

/* prefix + key as a new NUL-terminated string, or NULL (ENOMEM set). */
static char *pkey(struct tn_store *s, const char *k, size_t kl)
{
    struct prefix_store *p = PS(s);
    char *r = malloc(p->plen + kl + 1);
    if (!r) {
        tn_set_error(TN_ENOMEM, "PrefixStore: out of memory");
        return NULL;
    }
    memcpy(r, p->prefix, p->plen);
    memcpy(r + p->plen, k, kl);
    r[p->plen + kl] = 0;
    return r;
}

/* A malloc'd array of n malloc'd prefixed copies of keys (free_keys); NULL
 * with the error set when memory ran out. */
static char **pkeys(struct tn_store *s, const char *const *keys, size_t n)
{
    char **r = calloc(n ? n : 1, sizeof *r);
    if (!r) {
        tn_set_error(TN_ENOMEM, "PrefixStore: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        r[i] = pkey(s, keys[i], strlen(keys[i]));
        if (!r[i]) {
            while (i > 0)
                free(r[--i]);
            free(r);
            return NULL;
        }
    }
    return r;
}

/* Frees pkeys' array and its n keys. */
static void free_keys(char **k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(k[i]);
    free(k);
}

/* The inner store sees this store's timeout for the duration of a call. */
#define INNER(s) (tn_store_set_timeout(PS(s)->inner, tn_store_timeout(s)), PS(s)->inner)

#define PREFIXED(call)                                                                        \
    char *pk = pkey(s, k, kl);                                                                \
    if (!pk)                                                                                  \
        return TN_ENOMEM;                                                                     \
    int rc = call;                                                                            \
    free(pk);                                                                                 \
    return rc

/* The PrefixStore's entries: each prefixes the key(s) and calls the inner
 * store with this store's timeout; results and ownership as the inner
 * store's. */
static int ps_set(struct tn_store *s, const char *k, size_t kl, const void *v, size_t vl)
{
    PREFIXED(tn_store_set(INNER(s), pk, v, vl));
}
/* PrefixStore get (see ps_set). */
static int ps_get(struct tn_store *s, const char *k, size_t kl, void **v, size_t *vl)
{
    PREFIXED(tn_store_get(INNER(s), pk, v, vl));
}
/* PrefixStore add (see ps_set). */
static int ps_add(struct tn_store *s, const char *k, size_t kl, int64_t d, int64_t *out)
{
    PREFIXED(tn_store_add(INNER(s), pk, d, out));
}
/* PrefixStore compare_set (see ps_set). */
static int ps_compare_set(struct tn_store *s, const char *k, size_t kl, const void *ev,
                          size_t el, const void *dv, size_t dl, void **v, size_t *vl)
{
    PREFIXED(tn_store_compare_set(INNER(s), pk, ev, el, dv, dl, v, vl));
}
/* PrefixStore del (see ps_set). */
static int ps_del(struct tn_store *s, const char *k, size_t kl)
{
    PREFIXED(tn_store_delete(INNER(s), pk));
}
/* PrefixStore append (see ps_set). */
static int ps_append(struct tn_store *s, const char *k, size_t kl, const void *v, size_t vl)
{
    PREFIXED(tn_store_append(INNER(s), pk, v, vl));
}
/* PrefixStore queue_push (see ps_set). */
static int ps_queue_push(struct tn_store *s, const char *k, size_t kl, const void *v, size_t vl)
{
    PREFIXED(tn_store_queue_push(INNER(s), pk, v, vl));
}
/* PrefixStore queue_pop (see ps_set). */
static int ps_queue_pop(struct tn_store *s, const char *k, size_t kl, bool block, void **v,
                        size_t *vl)
{
    PREFIXED(tn_store_queue_pop(INNER(s), pk, block, v, vl));
}
/* PrefixStore queue_len (see ps_set). */
static int ps_queue_len(struct tn_store *s, const char *k, size_t kl, int64_t *out)
{
    PREFIXED(tn_store_queue_len(INNER(s), pk, out));
}

#define PREFIXED_N(call)                                                                      \
    char **pk = pkeys(s, keys, n);                                                            \
    if (!pk)                                                                                  \
        return TN_ENOMEM;                                                                     \
    int rc = call;                                                                            \
    free_keys(pk, n);                                                                         \
    return rc

/* PrefixStore wait (see ps_set). */
static int ps_wait(struct tn_store *s, const char *const *keys, size_t n, int64_t timeout_ms)
{
    PREFIXED_N(tn_store_wait(PS(s)->inner, (const char *const *)pk, n, timeout_ms));
}
/* PrefixStore check (see ps_set). */
static int ps_check(struct tn_store *s, const char *const *keys, size_t n)
{
    PREFIXED_N(tn_store_check(PS(s)->inner, (const char *const *)pk, n));
}
/* PrefixStore multi_get (see ps_set). */
static int ps_multi_get(struct tn_store *s, const char *const *keys, size_t n, void **v,
                        size_t *vl)
{
    PREFIXED_N(tn_store_multi_get(INNER(s), (const char *const *)pk, n, v, vl));
}
/* PrefixStore multi_set (see ps_set). */
static int ps_multi_set(struct tn_store *s, const char *const *keys, size_t n,
                        const void *const *v, const size_t *vl)
{
    PREFIXED_N(tn_store_multi_set(INNER(s), (const char *const *)pk, n, v, vl));
}

/* PrefixStore num_keys: the inner store's count (every prefix's keys, as
 * PyTorch's). */
static int ps_num_keys(struct tn_store *s, int64_t *out)
{
    return tn_store_num_keys(PS(s)->inner, out);
}

/* tn__store_ops.destroy: drops the reference to the inner store, frees the
 * prefix and the store. */
static void ps_destroy(struct tn_store *s)
{
    tn_store_release(PS(s)->inner);
    free(PS(s)->prefix);
    free(s);
}

/* The inner store's address for its server. */
static int ps_local_addr(struct tn_store *s, char *buf, size_t n)
{
    return tn__store_local_addr(PS(s)->inner, buf, n);
}

/* Contract in internal.h: the address of this host that reaches s's server
 * (the kind's local_addr; a prefix store asks its inner one) into buf[n];
 * -1 when s is NULL or its kind has none. */
int tn__store_local_addr(struct tn_store *s, char *buf, size_t n)
{
    return s && s->ops->local_addr ? s->ops->local_addr(s, buf, n) : -1;
}

static const struct tn__store_ops prefix_ops = {
    .name = "PrefixStore",
    .set = ps_set,
    .get = ps_get,
    .add = ps_add,
    .compare_set = ps_compare_set,
    .wait = ps_wait,
    .check = ps_check,
    .del = ps_del,
    .num_keys = ps_num_keys,
    .append = ps_append,
    .multi_get = ps_multi_get,
    .multi_set = ps_multi_set,
    .queue_push = ps_queue_push,
    .queue_pop = ps_queue_pop,
    .queue_len = ps_queue_len,
    .local_addr = ps_local_addr,
    .destroy = ps_destroy,
};

/* Contract in tensor/dist.h: a store naming every key prefix + "/" + key
 * in base, holding a reference to base.  A new reference; NULL with
 * TN_EINVAL (NULL argument) or TN_ENOMEM. */
struct tn_store *tn_store_prefix_new(const char *prefix, struct tn_store *base)
{
    if (!prefix || !base) {
        tn_set_error(TN_EINVAL, "PrefixStore: the prefix and the store must not be NULL");
        return NULL;
    }
    struct prefix_store *p = calloc(1, sizeof *p);
    size_t pl = strlen(prefix);
    char *pre = malloc(pl + 2);
    if (!p || !pre) {
        free(p);
        free(pre);
        tn_set_error(TN_ENOMEM, "PrefixStore: out of memory");
        return NULL;
    }
    memcpy(pre, prefix, pl);
    pre[pl] = '/';
    pre[pl + 1] = 0;
    tn__store_init(&p->base, &prefix_ops);
    tn_store_set_timeout(&p->base, tn_store_timeout(base));
    p->prefix = pre;
    p->plen = pl + 1;
    p->inner = base;
    tn_store_retain(base);
    return &p->base;
}
