/*
 * lib/dist/util.c: the byte map every store keeps its keys in, growable
 * buffers for the wire, the add arithmetic, clocks and timeout messages.
 */
#include "dist/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

/* FNV-1a: keys are short and the map only needs spread, not secrecy (a
 * hostile client can at worst make its own lookups slow). */
static uint64_t hash_bytes(const char *k, size_t kl)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < kl; i++)
        h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
    return h;
}

/* An empty map (no allocation until the first entry). */
void tn__map_init(struct tn__map *m)
{
    memset(m, 0, sizeof *m);
}

/* Frees an entry with its key, value and queued items (already unlinked). */
static void free_entry(struct tn__kv *e)
{
    struct tn__qitem *q = e->qhead;
    while (q) {
        struct tn__qitem *n = q->next;
        free(q);
        q = n;
    }
    free(e->key);
    free(e->val);
    free(e);
}

/* Frees every entry and the slots; the map is empty and reusable after. */
void tn__map_free(struct tn__map *m)
{
    for (size_t i = 0; i < m->nslots; i++) {
        struct tn__kv *e = m->slots[i];
        while (e) {
            struct tn__kv *n = e->next;
            free_entry(e);
            e = n;
        }
    }
    free(m->slots);
    memset(m, 0, sizeof *m);
}

/* The entry for k[0..kl) (any bytes: keys come off the wire), or NULL.
 * Borrowed from m; valid until the entry is unlinked. */
struct tn__kv *tn__map_find(const struct tn__map *m, const char *k, size_t kl)
{
    if (!m->nslots)
        return NULL;
    uint64_t h = hash_bytes(k, kl);
    for (struct tn__kv *e = m->slots[h & (m->nslots - 1)]; e; e = e->next)
        if (e->hash == h && e->klen == kl && memcmp(e->key, k, kl) == 0)
            return e;
    return NULL;
}

/* Doubles the slots (64 at first) and rehashes; 0 or TN_ENOMEM with the map
 * unchanged. */
static int grow(struct tn__map *m)
{
    size_t n = m->nslots ? m->nslots * 2 : 64;
    struct tn__kv **s = calloc(n, sizeof *s);
    if (!s)
        return TN_ENOMEM;
    for (size_t i = 0; i < m->nslots; i++) {
        struct tn__kv *e = m->slots[i];
        while (e) {
            struct tn__kv *nx = e->next;
            e->next = s[e->hash & (n - 1)];
            s[e->hash & (n - 1)] = e;
            e = nx;
        }
    }
    free(m->slots);
    m->slots = s;
    m->nslots = n;
    return 0;
}

/* The entry for k[0..kl), made (the key copied, no value, no queue) when
 * missing; owned by m.  NULL when out of memory (no error set: the server
 * thread reports it). */
struct tn__kv *tn__map_entry(struct tn__map *m, const char *k, size_t kl)
{
    struct tn__kv *e = tn__map_find(m, k, kl);
    if (e)
        return e;
    if (m->nentries + 1 > m->nslots && grow(m) < 0)
        return NULL;
    e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->key = malloc(kl ? kl : 1);
    if (!e->key) {
        free(e);
        return NULL;
    }
    memcpy(e->key, k, kl);
    e->klen = kl;
    e->hash = hash_bytes(k, kl);
    e->next = m->slots[e->hash & (m->nslots - 1)];
    m->slots[e->hash & (m->nslots - 1)] = e;
    m->nentries++;
    return e;
}

/* Replaces e's value with a copy of v[0..vl) (the old one freed; a first
 * value counts toward m->count).  0, or TN_ENOMEM with e unchanged. */
int tn__map_setval(struct tn__map *m, struct tn__kv *e, const void *v, size_t vl)
{
    char *c = malloc(vl ? vl : 1);
    if (!c)
        return TN_ENOMEM;
    if (vl)
        memcpy(c, v, vl);
    if (!e->val)
        m->count++;
    free(e->val);
    e->val = c;
    e->vlen = vl;
    return 0;
}

/* Removes e from its chain and frees it. */
static void unlink_entry(struct tn__map *m, struct tn__kv *e)
{
    struct tn__kv **p = &m->slots[e->hash & (m->nslots - 1)];
    while (*p != e)
        p = &(*p)->next;
    *p = e->next;
    m->nentries--;
    free_entry(e);
}

/* Drops e's value; e itself is freed (unusable after) unless it still has
 * a queue.  True when a value was there. */
bool tn__map_delval(struct tn__map *m, struct tn__kv *e)
{
    bool had = e->val != NULL;
    if (had) {
        free(e->val);
        e->val = NULL;
        e->vlen = 0;
        m->count--;
    }
    if (!e->qhead)
        unlink_entry(m, e);
    return had;
}

/* Sets keys[i] (NUL-terminated) to v[i][0..vl[i]) for every i, all or
 * nothing: every copy and entry is made before the first value changes, so
 * on TN_ENOMEM the map is as it was (entries made for it removed). A key
 * given twice ends with its last value. */
int tn__map_set_all(struct tn__map *m, const char *const *keys, size_t n, const void *const *v,
                    const size_t *vl)
{
    if (n == 0)
        return 0;
    char **copy = calloc(n, sizeof *copy);
    struct tn__kv **ent = calloc(n, sizeof *ent);
    bool *made = calloc(n, sizeof *made);
    size_t i = 0;
    int rc = copy && ent && made ? 0 : TN_ENOMEM;
    for (; rc == 0 && i < n; i++) {
        size_t kl = strlen(keys[i]);
        made[i] = !tn__map_find(m, keys[i], kl);
        copy[i] = malloc(vl[i] ? vl[i] : 1);
        ent[i] = copy[i] ? tn__map_entry(m, keys[i], kl) : NULL;
        if (!ent[i]) {
            made[i] = false;
            rc = TN_ENOMEM;
            break;
        }
        if (vl[i])
            memcpy(copy[i], v[i], vl[i]);
    }
    if (rc < 0) { /* undo: free the copies, drop the entries made here */
        for (size_t j = 0; copy && j <= i && j < n; j++) {
            free(copy[j]);
            if (made && ent && made[j])
                tn__map_delval(m, ent[j]);
        }
    } else {
        for (i = 0; i < n; i++) {
            if (!ent[i]->val)
                m->count++;
            free(ent[i]->val);
            ent[i]->val = copy[i];
            ent[i]->vlen = vl[i];
        }
    }
    free(copy);
    free(ent);
    free(made);
    return rc;
}

/* Queues a copy of vl bytes of v at e's tail; 0 or TN_ENOMEM. */
int tn__map_push(struct tn__map *m, struct tn__kv *e, const void *v, size_t vl)
{
    (void)m;
    struct tn__qitem *q = malloc(sizeof *q + (vl ? vl : 1));
    if (!q)
        return TN_ENOMEM;
    q->next = NULL;
    q->len = vl;
    if (vl)
        memcpy(q->data, v, vl);
    if (e->qtail)
        e->qtail->next = q;
    else
        e->qhead = q;
    e->qtail = q;
    e->qlen++;
    return 0;
}

/* e's oldest queued item, now the caller's to free; e is freed when it is
 * left with neither queue nor value.  NULL when the queue is empty. */
struct tn__qitem *tn__map_pop(struct tn__map *m, struct tn__kv *e)
{
    struct tn__qitem *q = e->qhead;
    if (!q)
        return NULL;
    e->qhead = q->next;
    if (!e->qhead)
        e->qtail = NULL;
    e->qlen--;
    if (!e->qhead && !e->val)
        unlink_entry(m, e);
    return q;
}

/* ADD's arithmetic for every store kind: the stored decimal text
 * old[0..oldlen) (untrusted; NULL: missing, 0) plus delta into *out, and
 * the text for the new value into buf (32 bytes) and *buflen.  0, or
 * TN_EINVAL naming key k for a value that is no int64 or an overflow. */
int tn__add_value(const char *k, size_t kl, const char *old, size_t oldlen, int64_t delta,
                  int64_t *out, char *buf, size_t *buflen)
{
    int64_t cur = 0;
    if (old) {
        char tmp[32];
        char *end;
        if (oldlen == 0 || oldlen >= sizeof tmp)
            goto bad;
        memcpy(tmp, old, oldlen);
        tmp[oldlen] = 0;
        errno = 0;
        long long v = strtoll(tmp, &end, 10);
        if (errno || *end)
            goto bad;
        cur = v;
    }
    if (__builtin_add_overflow(cur, delta, &cur))
        return tn_set_error(TN_EINVAL, "store add on key %.*s overflows int64", (int)kl, k);
    *out = cur;
    *buflen = (size_t)snprintf(buf, 32, "%" PRId64, cur);
    return 0;
bad:
    return tn_set_error(TN_EINVAL, "store add on key %.*s: the value is not an integer",
                        (int)kl, k);
}

/* Room for extra more bytes (the capacity doubles, from 256); 0, or
 * TN_ENOMEM with the buffer unchanged. */
int tn__db_reserve(struct tn__dbuf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra) {
        if (cap > SIZE_MAX / 2)
            return TN_ENOMEM;
        cap *= 2;
    }
    char *d = realloc(b->data, cap);
    if (!d)
        return TN_ENOMEM;
    b->data = d;
    b->cap = cap;
    return 0;
}

/* Appends n bytes of p; 0 or TN_ENOMEM. */
int tn__db_put(struct tn__dbuf *b, const void *p, size_t n)
{
    if (tn__db_reserve(b, n) < 0)
        return TN_ENOMEM;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

/* Appends one byte; 0 or TN_ENOMEM. */
int tn__db_u8(struct tn__dbuf *b, uint8_t v)
{
    return tn__db_put(b, &v, 1);
}

/* Appends v little-endian (the wire's order); 0 or TN_ENOMEM. */
int tn__db_u32(struct tn__dbuf *b, uint32_t v)
{
    unsigned char c[4];
    for (int i = 0; i < 4; i++)
        c[i] = (unsigned char)(v >> (8 * i));
    return tn__db_put(b, c, 4);
}

/* Appends v little-endian; 0 or TN_ENOMEM. */
int tn__db_u64(struct tn__dbuf *b, uint64_t v)
{
    unsigned char c[8];
    for (int i = 0; i < 8; i++)
        c[i] = (unsigned char)(v >> (8 * i));
    return tn__db_put(b, c, 8);
}

/* Appends the wire's string: u64 length n, then n bytes of p; 0 or
 * TN_ENOMEM. */
int tn__db_str(struct tn__dbuf *b, const void *p, size_t n)
{
    if (tn__db_u64(b, n) < 0)
        return TN_ENOMEM;
    return tn__db_put(b, p, n);
}

/* Drops the first n bytes of b (all when n >= len), moving the rest down. */
void tn__db_consume(struct tn__dbuf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

/* Frees the bytes; the buffer is empty and reusable after. */
void tn__db_free(struct tn__dbuf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* CLOCK_MONOTONIC in ms: deadlines, never wall time. */
int64_t tn__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sets TN_ETIMEOUT in PyTorch's words ("wait timeout after 1000ms, keys:
 * /a, /b"), each key after `prefix` (may be NULL), the list cut at 511
 * bytes; returns TN_ETIMEOUT. */
int tn__wait_timeout_error(int64_t ms, const char *const *keys, size_t n, const char *prefix)
{
    char list[512];
    size_t o = 0;
    list[0] = 0;
    for (size_t i = 0; i < n && o < sizeof list - 1; i++)
        o += (size_t)snprintf(list + o, sizeof list - o, "%s%s%s", i ? ", " : "",
                              prefix ? prefix : "", keys[i]);
    return tn_set_error(TN_ETIMEOUT, "wait timeout after %" PRId64 "ms, keys: %s", ms, list);
}
