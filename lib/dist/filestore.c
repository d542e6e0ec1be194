/*
 * lib/dist/filestore.c: PyTorch's FileStore: an append-only log on a shared
 * filesystem, the same bytes PyTorch writes (u32 length + key, u32 length +
 * value; user keys with a "/" prefix, a deletion as "-" + key with an empty
 * value, "refcount/" and "cleanup/" counters). Readers replay the log from
 * their last offset into a cache under flock; waits poll every 10 ms because
 * inotify does not work on NFS.
 */
#include "dist/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct file_store {
    struct tn_store base;
    pthread_mutex_t mu;
    char *path;
    int fd;
    off_t pos;
    struct tn__map cache;
    int num_workers;
};

#define FS(s) ((struct file_store *)(s))

/* TN_EIO naming the file, what failed and errno. */
static int fs_err(struct file_store *f, const char *what)
{
    return tn_set_error(TN_EIO, "FileStore %s: %s: %s", f->path, what, strerror(errno));
}

/* Replays the records appended since f->pos into the cache; the file lock
 * is held.  The log is untrusted (any process may write it): a key or value
 * length past TN_STORE_MAX_* or past the bytes read stops the replay there
 * (a record still being written, read again next time).  A key starting
 * with '-' deletes.  0, or TN_EIO/TN_ENOMEM naming the file. */
static int refresh(struct file_store *f)
{
    struct stat st;
    if (fstat(f->fd, &st) < 0)
        return fs_err(f, "stat");
    if (st.st_size <= f->pos)
        return 0;
    size_t n = (size_t)(st.st_size - f->pos);
    char *buf = malloc(n);
    if (!buf)
        return tn_set_error(TN_ENOMEM, "FileStore %s: out of memory", f->path);
    ssize_t r = pread(f->fd, buf, n, f->pos);
    if (r < 0) {
        free(buf);
        return fs_err(f, "read");
    }
    size_t p = 0, len = (size_t)r;
    int rc = 0;
    while (len - p >= 4) {
        uint32_t kl = tn__rd32((unsigned char *)buf + p);
        if (kl > TN_STORE_MAX_KEY + 2 || len - p - 4 < (size_t)kl + 4)
            break;
        const char *k = buf + p + 4;
        uint32_t vl = tn__rd32((unsigned char *)k + kl);
        if (vl > TN_STORE_MAX_VALUE || len - p - 8 - kl < vl)
            break;
        const char *v = k + kl + 4;
        if (kl > 0 && k[0] == '-') {
            struct tn__kv *e = tn__map_find(&f->cache, k + 1, kl - 1);
            if (e)
                tn__map_delval(&f->cache, e);
        } else {
            struct tn__kv *e = tn__map_entry(&f->cache, k, kl);
            if (!e || tn__map_setval(&f->cache, e, v, vl) < 0) {
                rc = tn_set_error(TN_ENOMEM, "FileStore %s: out of memory", f->path);
                break;
            }
        }
        p += 8 + kl + vl;
    }
    free(buf);
    f->pos += (off_t)p;
    return rc;
}

/* Appends b's bytes at the file's end in one write; the exclusive lock is
 * held, so no reader (PyTorch's included: they flock too) sees them before
 * they are all there. A short write (disk full, file size limit) is cut
 * off again, so the log never keeps a partial record that would swallow
 * the next ones. 0 or TN_EIO naming the file. */
static int append_bytes(struct file_store *f, const struct tn__dbuf *b)
{
    off_t end = lseek(f->fd, 0, SEEK_END);
    if (end < 0)
        return fs_err(f, "seek");
    size_t done = 0;
    while (done < b->len) {
        ssize_t w = pwrite(f->fd, b->data + done, b->len - done, end + (off_t)done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int rc = fs_err(f, "write");
            if (done > 0 && ftruncate(f->fd, end) < 0)
                rc = fs_err(f, "cutting off a partial write");
            return rc;
        }
        done += (size_t)w;
    }
    return 0;
}

/* Adds one record (u32 length + key, u32 length + value) to b; 0 or
 * TN_ENOMEM naming the file. */
static int put_record(struct file_store *f, struct tn__dbuf *b, const char *k, size_t kl,
                      const void *v, size_t vl)
{
    int rc = tn__db_u32(b, (uint32_t)kl) | tn__db_put(b, k, kl) | tn__db_u32(b, (uint32_t)vl) |
             tn__db_put(b, v, vl);
    return rc < 0 ? tn_set_error(TN_ENOMEM, "FileStore %s: out of memory", f->path) : 0;
}

/* Appends one record at the file's end; the exclusive lock is held; 0 or
 * an error. */
static int append_record(struct file_store *f, const char *k, size_t kl, const void *v,
                         size_t vl)
{
    struct tn__dbuf b = {0};
    int rc = put_record(f, &b, k, kl, v, vl);
    if (rc == 0)
        rc = append_bytes(f, &b);
    tn__db_free(&b);
    return rc;
}

/* Runs with the mutex and the file lock (exclusive or shared). */
static int lock(struct file_store *f, int how)
{
    pthread_mutex_lock(&f->mu);
    while (flock(f->fd, how) < 0) {
        if (errno != EINTR) {
            int rc = fs_err(f, "flock");
            pthread_mutex_unlock(&f->mu);
            return rc;
        }
    }
    return 0;
}

/* Releases lock()'s file lock and mutex. */
static void unlock(struct file_store *f)
{
    flock(f->fd, LOCK_UN);
    pthread_mutex_unlock(&f->mu);
}

/* "/" + key: the form PyTorch writes user keys in. */
static char *wkey(const char *k, size_t kl)
{
    char *w = malloc(kl + 2);
    if (!w) {
        tn_set_error(TN_ENOMEM, "FileStore: out of memory");
        return NULL;
    }
    w[0] = '/';
    memcpy(w + 1, k, kl);
    w[kl + 1] = 0;
    return w;
}

/* The add arithmetic on the wire key w (already '/'-prefixed) under the
 * exclusive lock; the new value into *out. */
static int raw_add(struct file_store *f, const char *w, size_t wl, int64_t d, int64_t *out)
{
    int rc = lock(f, LOCK_EX);
    if (rc < 0)
        return rc;
    rc = refresh(f);
    if (rc == 0) {
        struct tn__kv *e = tn__map_find(&f->cache, w, wl);
        char buf[32];
        size_t bl;
        rc = tn__add_value(w, wl, e ? e->val : NULL, e ? e->vlen : 0, d, out, buf, &bl);
        if (rc == 0)
            rc = append_record(f, w, wl, buf, bl);
        if (rc == 0)
            rc = refresh(f);
    }
    unlock(f);
    return rc;
}

/* tn__store_ops.set: appends a record; 0 or an error. */
static int fs_set(struct tn_store *s, const char *k, size_t kl, const void *v, size_t vl)
{
    struct file_store *f = FS(s);
    char *w = wkey(k, kl);
    if (!w)
        return TN_ENOMEM;
    int rc = lock(f, LOCK_EX);
    if (rc == 0) {
        rc = append_record(f, w, kl + 1, v, vl);
        unlock(f);
    }
    free(w);
    return rc;
}

/* tn__store_ops.multi_set: every record appended in one write under the
 * exclusive lock, so other readers see all the keys or none; a failed
 * write leaves the log as it was. 0 or an error. */
static int fs_multi_set(struct tn_store *s, const char *const *keys, size_t n,
                        const void *const *v, const size_t *vl)
{
    struct file_store *f = FS(s);
    struct tn__dbuf b = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        size_t kl = strlen(keys[i]);
        char *w = wkey(keys[i], kl);
        rc = w ? put_record(f, &b, w, kl + 1, v[i], vl[i]) : TN_ENOMEM;
        free(w);
    }
    if (rc == 0 && (rc = lock(f, LOCK_EX)) == 0) {
        rc = append_bytes(f, &b);
        unlock(f);
    }
    tn__db_free(&b);
    return rc;
}

/* Whether every key exists in the replayed cache (the lock is held). */
static bool cached(struct file_store *f, const char *const *keys, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t kl = strlen(keys[i]);
        char *w = wkey(keys[i], kl);
        bool ok = w && tn__kv_exists(tn__map_find(&f->cache, w, kl + 1));
        free(w);
        if (!ok)
            return false;
    }
    return true;
}

/* tn__store_ops.wait: replays the file every 10 ms until every key exists;
 * TN_ETIMEOUT after timeout_ms. */
static int fs_wait(struct tn_store *s, const char *const *keys, size_t n, int64_t timeout_ms)
{
    struct file_store *f = FS(s);
    int64_t deadline = tn__now_ms() + timeout_ms;
    for (;;) {
        int rc = lock(f, LOCK_SH);
        if (rc < 0)
            return rc;
        rc = refresh(f);
        bool ok = rc == 0 && cached(f, keys, n);
        unlock(f);
        if (rc < 0)
            return rc;
        if (ok)
            return 0;
        if (tn__now_ms() >= deadline)
            return tn__wait_timeout_error(timeout_ms, keys, n, "/");
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* tn__store_ops.check: 1 when every key exists after a replay, else 0. */
static int fs_check(struct tn_store *s, const char *const *keys, size_t n)
{
    struct file_store *f = FS(s);
    int rc = lock(f, LOCK_SH);
    if (rc < 0)
        return rc;
    rc = refresh(f);
    bool ok = rc == 0 && cached(f, keys, n);
    unlock(f);
    return rc < 0 ? rc : ok;
}

/* tn__store_ops.get: waits for k, then *v is a malloc'd copy the caller
 * frees. */
static int fs_get(struct tn_store *s, const char *k, size_t kl, void **v, size_t *vl)
{
    struct file_store *f = FS(s);
    const char *keys[1] = {k};
    int rc = fs_wait(s, keys, 1, tn_store_timeout(s));
    if (rc < 0)
        return rc;
    char *w = wkey(k, kl);
    if (!w)
        return TN_ENOMEM;
    pthread_mutex_lock(&f->mu);
    struct tn__kv *e = tn__map_find(&f->cache, w, kl + 1);
    *v = malloc(e->vlen + 1);
    if (*v) {
        memcpy(*v, e->val, e->vlen);
        ((char *)*v)[e->vlen] = 0;
        *vl = e->vlen;
    }
    pthread_mutex_unlock(&f->mu);
    free(w);
    return *v ? 0 : tn_set_error(TN_ENOMEM, "FileStore: out of memory");
}

/* tn__store_ops.add (see raw_add). */
static int fs_add(struct tn_store *s, const char *k, size_t kl, int64_t d, int64_t *out)
{
    char *w = wkey(k, kl);
    if (!w)
        return TN_ENOMEM;
    int rc = raw_add(FS(s), w, kl + 1, d, out);
    free(w);
    return rc;
}

/* tn__store_ops.compare_set under the exclusive lock; *v malloc'd, the
 * caller frees it. */
static int fs_compare_set(struct tn_store *s, const char *k, size_t kl, const void *ev,
                          size_t el, const void *dv, size_t dl, void **v, size_t *vl)
{
    struct file_store *f = FS(s);
    char *w = wkey(k, kl);
    if (!w)
        return TN_ENOMEM;
    int rc = lock(f, LOCK_EX);
    if (rc < 0) {
        free(w);
        return rc;
    }
    rc = refresh(f);
    const void *res = NULL;
    size_t rl = 0;
    char *old = NULL;
    if (rc == 0) {
        struct tn__kv *e = tn__map_find(&f->cache, w, kl + 1);
        bool swap = (!e || !e->val) ? el == 0 : (e->vlen == el && memcmp(e->val, ev, el) == 0);
        if (swap) {
            rc = append_record(f, w, kl + 1, dv, dl);
            res = dv;
            rl = dl;
        } else if (!e || !e->val) {
            res = ev;
            rl = el;
        } else {
            old = malloc(e->vlen + 1);
            if (old)
                memcpy(old, e->val, e->vlen);
            res = old;
            rl = e->vlen;
        }
    }
    if (rc == 0) {
        *v = malloc(rl + 1);
        if (*v) {
            memcpy(*v, res, rl);
            ((char *)*v)[rl] = 0;
            *vl = rl;
        } else {
            rc = tn_set_error(TN_ENOMEM, "FileStore: out of memory");
        }
    }
    free(old);
    unlock(f);
    free(w);
    return rc;
}

/* tn__store_ops.del: appends a deletion record; 1 when the key existed, else
 * 0. */
static int fs_del(struct tn_store *s, const char *k, size_t kl)
{
    struct file_store *f = FS(s);
    char *w = malloc(kl + 3);
    if (!w)
        return tn_set_error(TN_ENOMEM, "FileStore: out of memory");
    w[0] = '-';
    w[1] = '/';
    memcpy(w + 2, k, kl);
    int rc = lock(f, LOCK_EX);
    if (rc == 0) {
        rc = refresh(f);
        bool had = rc == 0 && tn__kv_exists(tn__map_find(&f->cache, w + 1, kl + 1));
        if (rc == 0)
            rc = append_record(f, w, kl + 2, "", 0);
        if (rc == 0)
            rc = refresh(f);
        if (rc == 0)
            rc = had;
        unlock(f);
    }
    free(w);
    return rc;
}

/* tn__store_ops.num_keys: keys holding a value after a replay. */
static int fs_num_keys(struct tn_store *s, int64_t *out)
{
    struct file_store *f = FS(s);
    int rc = lock(f, LOCK_SH);
    if (rc < 0)
        return rc;
    rc = refresh(f);
    *out = (int64_t)f->cache.count;
    unlock(f);
    return rc;
}

/* tn__store_ops.append: appends a record holding the old value and v. */
static int fs_append(struct tn_store *s, const char *k, size_t kl, const void *v, size_t vl)
{
    struct file_store *f = FS(s);
    char *w = wkey(k, kl);
    if (!w)
        return TN_ENOMEM;
    int rc = lock(f, LOCK_EX);
    if (rc == 0) {
        rc = refresh(f);
        struct tn__dbuf b = {0};
        struct tn__kv *e = tn__map_find(&f->cache, w, kl + 1);
        if (rc == 0 && e && e->val && tn__db_put(&b, e->val, e->vlen) < 0)
            rc = TN_ENOMEM;
        if (rc == 0 && tn__db_put(&b, v, vl) < 0)
            rc = TN_ENOMEM;
        if (rc == TN_ENOMEM)
            tn_set_error(rc, "FileStore: out of memory");
        if (rc == 0)
            rc = append_record(f, w, kl + 1, b.data, b.len);
        tn__db_free(&b);
        unlock(f);
    }
    free(w);
    return rc;
}

/* tn__store_ops.destroy: counts this client out ('cleanup/'), the last one
 * deletes the file; closes and frees. */
static void fs_destroy(struct tn_store *s)
{
    struct file_store *f = FS(s);
    int64_t n = 0;
    if (f->num_workers > 0 && raw_add(f, "cleanup/", 8, 1, &n) == 0 && n >= f->num_workers)
        unlink(f->path);
    close(f->fd);
    tn__map_free(&f->cache);
    pthread_mutex_destroy(&f->mu);
    free(f->path);
    free(f);
}

static const struct tn__store_ops file_ops = {
    .name = "FileStore",
    .set = fs_set,
    .get = fs_get,
    .add = fs_add,
    .compare_set = fs_compare_set,
    .wait = fs_wait,
    .check = fs_check,
    .del = fs_del,
    .num_keys = fs_num_keys,
    .append = fs_append,
    .multi_set = fs_multi_set,
    .destroy = fs_destroy,
};

/* Contract in tensor/dist.h: a FileStore over the append-only log at path,
 * shared with num_workers processes; the log is untrusted (another process,
 * or another program, writes it) and parsed with bounds.  A new reference;
 * NULL with an error naming path. */
struct tn_store *tn_store_file_new(const char *path, int num_workers)
{
    struct file_store *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path ? path : ""))) {
        free(f);
        tn_set_error(TN_ENOMEM, "FileStore: out of memory");
        return NULL;
    }
    f->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        fs_err(f, "open");
        free(f->path);
        free(f);
        return NULL;
    }
    tn__store_init(&f->base, &file_ops);
    pthread_mutex_init(&f->mu, NULL);
    tn__map_init(&f->cache);
    f->num_workers = num_workers;
    int64_t n;
    if (raw_add(f, "refcount/", 9, 1, &n) < 0) {
        f->num_workers = 0;
        fs_destroy(&f->base);
        return NULL;
    }
    return &f->base;
}
