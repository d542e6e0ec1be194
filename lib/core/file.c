/*
 * core/file.c: output files as a command-line user expects them, shared by
 * the library's writers and every tool.
 *
 * A regular file (or a path with nothing there yet) is written to a hidden
 * temporary beside it, `.<name>.tmp-XXXXXX`, and renamed over it on commit,
 * so a crash leaves the old file whole.  A symlink is followed: its target
 * is what gets replaced, and the link stays a link.  A device, a pipe, a
 * socket, `-` and the descriptor names (/dev/stdout, /dev/fd/N,
 * /proc/self/fd/N) are written directly: replacing /dev/stdout with a
 * regular file is what a rename would do there.
 *
 * The writer holds an exclusive flock on its temporary until it is renamed
 * or removed.  A temporary left by a killed writer is therefore one nobody
 * holds a lock on; the next write to the same target (or tn_out_clean) finds
 * and removes those that are also older than a few seconds (a writer takes
 * its lock within microseconds of creating the file).
 *
 * This file needs only libc and core/error.c: tgen, which runs before
 * libtensor exists, compiles both in.
 */
#include <config.h>
#include <tensor/core.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"

#define TN_OUT_TMP_TAG ".tmp-"
#define TN_OUT_STALE_SECONDS 5
#define TN_OUT_MAX_LINKS 40

struct direct;

struct tn_out {
    FILE *f;
    char *path;   /* as the caller named it, for messages */
    char *target; /* the regular file a commit renames over */
    char *tmp;    /* the temporary, or NULL when written directly */
    bool is_stdout;
    struct direct *direct; /* tn__out_direct's writer, or NULL */
};

/* ------------------------------------------------ temporaries on signals */

/* The temporaries being written now, for the signal handler: plain
 * pointers it can read without locks (a slot is cleared before its string
 * is freed).  A writer that finds no free slot is simply not removed on a
 * signal; the next write or tckpt verify still finds its temporary. */
#define LIVE_SLOTS 64
static char *volatile live[LIVE_SLOTS];

static void live_add(char *tmp)
{
    for (int i = 0; i < LIVE_SLOTS; i++) {
        char *none = NULL;
        if (__atomic_compare_exchange_n(&live[i], &none, tmp, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
            return;
    }
}

static void live_remove(const char *tmp)
{
    for (int i = 0; tmp && i < LIVE_SLOTS; i++) {
        char *mine = (char *)tmp;
        if (__atomic_compare_exchange_n(&live[i], &mine, NULL, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
            return;
    }
}

/* Temporary folders (a DCP save's), removed with what they hold. */
#define LIVE_DIRS 8
static char *volatile live_dirs[LIVE_DIRS];

void tn__out_live_dir(const char *dir, bool add)
{
    for (int i = 0; i < LIVE_DIRS; i++) {
        if (add) {
            char *none = NULL, *copy = strdup(dir);
            if (!copy)
                return;
            if (__atomic_compare_exchange_n(&live_dirs[i], &none, copy, false, __ATOMIC_SEQ_CST,
                                            __ATOMIC_SEQ_CST))
                return;
            free(copy);
        } else {
            char *p = __atomic_load_n(&live_dirs[i], __ATOMIC_SEQ_CST);
            if (p && !strcmp(p, dir) &&
                __atomic_compare_exchange_n(&live_dirs[i], &p, NULL, false, __ATOMIC_SEQ_CST,
                                            __ATOMIC_SEQ_CST)) {
                free(p);
                return;
            }
        }
    }
}

/* rm -r of a flat folder with async-signal-safe calls only (getdents64,
 * not readdir). */
static void remove_dir_now(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[4096] __attribute__((aligned(8)));
    long n;
    bool removed = true;
    while (removed) { /* the entries move as they go: read again until none does */
        removed = false;
        lseek(fd, 0, SEEK_SET);
        while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
            for (long at = 0; at < n;) {
                unsigned short reclen;
                memcpy(&reclen, buf + at + 16, sizeof reclen);
                const char *name = buf + at + 19;
                if (strcmp(name, ".") && strcmp(name, "..") && unlinkat(fd, name, 0) == 0)
                    removed = true;
                at += reclen;
            }
        }
    }
    close(fd);
    rmdir(dir);
}

/* unlink is async-signal-safe; then the signal's default action, so the
 * process still dies of it (its parent sees the signal, a shell prints
 * nothing new). */
static void on_signal(int sig)
{
    int saved = errno;
    for (int i = 0; i < LIVE_SLOTS; i++) {
        char *p = __atomic_load_n(&live[i], __ATOMIC_SEQ_CST);
        if (p)
            unlink(p);
    }
    for (int i = 0; i < LIVE_DIRS; i++) {
        char *p = __atomic_load_n(&live_dirs[i], __ATOMIC_SEQ_CST);
        if (p)
            remove_dir_now(p);
    }
    signal(sig, SIG_DFL);
    raise(sig);
    errno = saved;
}

void tn_out_remove_on_signals(void)
{
    int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction old;
        /* an ignored signal (nohup's SIGHUP) or the program's own handler stays */
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
            (old.sa_flags & SA_SIGINFO))
            continue;
        struct sigaction sa = {0};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

/* ------------------------------------------------------- direct writes */

/* A durable write (tn__out_direct): the bytes go from a staging buffer to
 * the disk with O_DIRECT in large aligned blocks, so none of them sits in
 * the page cache as a dirty page that the final sync must wait for, and
 * the file is synced once at the end (fdatasync: its size with it).  Two
 * buffers: the caller fills one while a thread writes the other. */
#define DIRECT_ALIGN ((size_t)4096)
#define DIRECT_BUF ((size_t)8 << 20)

struct direct {
    int fd;
    unsigned char *buf[2];
    size_t len;      /* bytes in buf[cur] */
    int cur;
    uint64_t pos;    /* file offset of buf[cur] */
    int err;         /* first errno of a write */
    /* the writer thread: writes buf[job] of job_len bytes at job_pos */
    pthread_t th;
    bool th_up, busy, quit;
    int job;
    size_t job_len;
    uint64_t job_pos;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static int pwrite_all(int fd, const unsigned char *p, size_t n, uint64_t at)
{
    while (n) {
        ssize_t w = pwrite(fd, p, n, (off_t)at);
        if (w < 0 && errno == EINTR)
            continue;
        int fl;
        if (w < 0 && errno == EINVAL && (fl = fcntl(fd, F_GETFL)) >= 0 && (fl & O_DIRECT) &&
            fcntl(fd, F_SETFL, fl & ~O_DIRECT) == 0)
            continue; /* a device wanting larger blocks: the same bytes, buffered */
        if (w <= 0)
            return w < 0 ? errno : EIO;
        p += w;
        n -= (size_t)w;
        at += (uint64_t)w;
    }
    return 0;
}

static void *direct_thread(void *arg)
{
    struct direct *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->busy && !d->quit)
            pthread_cond_wait(&d->cv, &d->mu);
        if (!d->busy)
            break;
        pthread_mutex_unlock(&d->mu);
        int e = pwrite_all(d->fd, d->buf[d->job], d->job_len, d->job_pos);
        pthread_mutex_lock(&d->mu);
        if (e && !d->err)
            d->err = e;
        d->busy = false;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* Waits for the thread's write in flight; its errno or 0. */
static int direct_wait(struct direct *d)
{
    pthread_mutex_lock(&d->mu);
    while (d->busy)
        pthread_cond_wait(&d->cv, &d->mu);
    int e = d->err;
    pthread_mutex_unlock(&d->mu);
    return e;
}

/* Hands buf[cur] (len bytes, a multiple of the block size but maybe the
 * last) to the thread and switches to the other buffer. */
static int direct_flush(struct direct *d)
{
    int e = direct_wait(d);
    if (e)
        return e;
    if (!d->th_up) /* no thread: write it here */
        e = pwrite_all(d->fd, d->buf[d->cur], d->len, d->pos);
    else {
        pthread_mutex_lock(&d->mu);
        d->job = d->cur;
        d->job_len = d->len;
        d->job_pos = d->pos;
        d->busy = true;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        d->cur ^= 1;
    }
    d->pos += d->len;
    d->len = 0;
    return e;
}

static ssize_t direct_write(void *cookie, const char *p, size_t n)
{
    struct direct *d = cookie;
    size_t done = 0;
    while (done < n) {
        size_t k = DIRECT_BUF - d->len < n - done ? DIRECT_BUF - d->len : n - done;
        memcpy(d->buf[d->cur] + d->len, p + done, k);
        d->len += k;
        done += k;
        if (d->len == DIRECT_BUF) {
            int e = direct_flush(d);
            if (e) {
                errno = e;
                return -1;
            }
        }
    }
    return (ssize_t)n;
}

/* ftell only: where the next byte goes. */
static int direct_seek(void *cookie, off64_t *off, int whence)
{
    struct direct *d = cookie;
    if (whence != SEEK_CUR || *off != 0) {
        errno = ESPIPE;
        return -1;
    }
    *off = (off64_t)(d->pos + d->len);
    return 0;
}

static void direct_free(struct direct *d)
{
    if (d->th_up) {
        pthread_mutex_lock(&d->mu);
        d->quit = true;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->th, NULL);
    }
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d->buf[0]);
    free(d->buf[1]);
    free(d);
}

static int direct_close(void *cookie)
{
    struct direct *d = cookie;
    int r = close(d->fd);
    direct_free(d);
    return r;
}

/* The last partial block (padded with zeros, as O_DIRECT writes whole
 * blocks), the file cut to its real size, then the one sync.  0 or an
 * errno. */
static int direct_finish(struct direct *d, bool sync)
{
    uint64_t end = d->pos + d->len;
    size_t padded = (d->len + DIRECT_ALIGN - 1) / DIRECT_ALIGN * DIRECT_ALIGN;
    memset(d->buf[d->cur] + d->len, 0, padded - d->len);
    d->len = padded;
    int e = direct_flush(d);
    if (!e)
        e = direct_wait(d);
    if (!e && ftruncate(d->fd, (off_t)end) != 0)
        e = errno;
    if (!e && sync && fdatasync(d->fd) != 0)
        e = errno;
    return e;
}

int tn__out_direct(struct tn_out *o)
{
    if (!o->tmp || o->direct || ftell(o->f) != 0)
        return 0; /* not a file of ours, or already written to */
    int fd = fileno(o->f);
    int flags = fcntl(fd, F_GETFL);
    /* tmpfs and some others refuse O_DIRECT: they stay buffered */
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_DIRECT) != 0)
        return 0;
    struct direct *d = calloc(1, sizeof *d);
    int nfd = -1;
    if (!d || !(d->buf[0] = aligned_alloc(DIRECT_ALIGN, DIRECT_BUF)) ||
        !(d->buf[1] = aligned_alloc(DIRECT_ALIGN, DIRECT_BUF)) ||
        (nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
        if (d) {
            free(d->buf[0]);
            free(d->buf[1]);
        }
        free(d);
        (void)fcntl(fd, F_SETFL, flags);
        return 0;
    }
    d->fd = nfd;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    cookie_io_functions_t io = {.write = direct_write, .seek = direct_seek, .close = direct_close};
    FILE *f = fopencookie(d, "wb", io);
    if (!f) {
        close(nfd);
        direct_free(d);
        (void)fcntl(fd, F_SETFL, flags);
        return 0;
    }
    d->th_up = pthread_create(&d->th, NULL, direct_thread, d) == 0;
    setvbuf(f, NULL, _IONBF, 0); /* every fwrite straight into the staging buffer */
    fclose(o->f);                /* the duplicate keeps the flock */
    o->f = f;
    o->direct = d;
    return 1;
}

/* The descriptor that `path` names (/dev/stdout, /dev/stderr, /dev/fd/N,
 * /proc/self/fd/N), or -1: writing there means that open descriptor, at
 * its own offset (so `>>` still appends). */
static int named_descriptor(const char *path)
{
    if (!strcmp(path, "/dev/stdout"))
        return 1;
    if (!strcmp(path, "/dev/stderr"))
        return 2;
    const char *num = !strncmp(path, "/dev/fd/", 8)         ? path + 8
                      : !strncmp(path, "/proc/self/fd/", 14) ? path + 14
                                                             : NULL;
    if (!num || *num < '0' || *num > '9')
        return -1;
    char *end;
    long fd = strtol(num, &end, 10);
    return *end || fd > INT_MAX ? -1 : (int)fd;
}

/* The regular file that writing `path` means: `path` itself, or the end of
 * its chain of symlinks (which may not exist yet). A new string, or NULL
 * with errno set (ELOOP for a chain that does not end). */
static char *resolve_links(const char *path)
{
    char *cur = strdup(path);
    for (int i = 0; cur && i < TN_OUT_MAX_LINKS; i++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
            return cur;
        char link[PATH_MAX];
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0) {
            free(cur);
            return NULL;
        }
        link[n] = '\0';
        char *next;
        const char *slash = strrchr(cur, '/');
        if (link[0] == '/' || !slash) {
            next = strdup(link);
        } else {
            size_t dlen = (size_t)(slash - cur) + 1;
            next = malloc(dlen + (size_t)n + 1);
            if (next) {
                memcpy(next, cur, dlen);
                memcpy(next + dlen, link, (size_t)n + 1);
            }
        }
        free(cur);
        cur = next;
    }
    if (cur) {
        free(cur);
        errno = ELOOP;
    }
    return NULL;
}

/* The folder part of `target` ("." when none) and its last component. */
static void split_path(const char *target, char *dir, size_t dlen, const char **base)
{
    const char *slash = strrchr(target, '/');
    if (!slash) {
        snprintf(dir, dlen, ".");
        *base = target;
    } else if (slash == target) {
        snprintf(dir, dlen, "/");
        *base = slash + 1;
    } else {
        snprintf(dir, dlen, "%.*s", (int)(slash - target), target);
        *base = slash + 1;
    }
}

/* Removes the stale temporaries of `base` in folder `dir`; returns how
 * many. */
static int clean_beside(const char *dir, const char *base)
{
    size_t blen = strlen(base);
    DIR *d = opendir(dir);
    if (!d)
        return 0; /* no folder, no temporaries */
    int removed = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        size_t tag = sizeof TN_OUT_TMP_TAG - 1;
        if (n[0] != '.' || strncmp(n + 1, base, blen) || strncmp(n + 1 + blen, TN_OUT_TMP_TAG, tag) ||
            strlen(n + 1 + blen + tag) != 6)
            continue;
        int fd = openat(dirfd(d), n, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && now - st.st_mtime >= TN_OUT_STALE_SECONDS &&
            flock(fd, LOCK_EX | LOCK_NB) == 0 && unlinkat(dirfd(d), n, 0) == 0)
            removed++;
        close(fd);
    }
    closedir(d);
    return removed;
}

int tn_out_clean(const char *path)
{
    char *target = resolve_links(path);
    if (!target)
        return tn_set_error(TN_EIO, "%s: %s", path, strerror(errno));
    char dir[PATH_MAX];
    const char *base;
    split_path(target, dir, sizeof dir, &base);
    int removed = clean_beside(dir, base);
    free(target);
    return removed;
}

/* Opens `path` for writing as it is: a device, a pipe, a socket, or a
 * copy of the descriptor it names. */
static FILE *open_direct(const char *path)
{
    int named = named_descriptor(path);
    int fd = named >= 0 ? fcntl(named, F_DUPFD_CLOEXEC, 3) : open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "wb");
    if (!f)
        close(fd);
    return f;
}

static void out_free(struct tn_out *o)
{
    live_remove(o->tmp);
    free(o->tmp);
    free(o->target);
    free(o->path);
    free(o);
}

static struct tn_out *out_fail(struct tn_out *o, const char *what, int err)
{
    tn_set_error(TN_EIO, "%s: %s%s", o->path, what, strerror(err));
    tn_out_abort(o);
    return NULL;
}

struct tn_out *tn_out_open(const char *path)
{
    struct tn_out *o = calloc(1, sizeof *o);
    if (!o || !(o->path = strdup(path))) {
        free(o);
        tn_set_error(TN_ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    if (!strcmp(path, "-")) {
        o->f = stdout;
        o->is_stdout = true;
        return o;
    }
    struct stat st;
    bool exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode))
        return out_fail(o, "", EISDIR);
    if (named_descriptor(path) >= 0 || (exists && !S_ISREG(st.st_mode))) {
        if (!(o->f = open_direct(path)))
            return out_fail(o, "", errno);
        return o;
    }
    if (!(o->target = resolve_links(path)))
        return out_fail(o, "", errno);
    char dir[PATH_MAX];
    const char *base;
    split_path(o->target, dir, sizeof dir, &base);
    clean_beside(dir, base);
    size_t need = strlen(dir) + strlen(base) + sizeof TN_OUT_TMP_TAG + 10;
    if (!(o->tmp = malloc(need)))
        return out_fail(o, "", ENOMEM);
    snprintf(o->tmp, need, "%s/.%s%sXXXXXX", dir, base, TN_OUT_TMP_TAG);
    int fd = mkostemp(o->tmp, O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        free(o->tmp);
        o->tmp = NULL;
        return out_fail(o, "cannot create a file beside it: ", err);
    }
    (void)flock(fd, LOCK_EX);
    live_add(o->tmp);
    /* mkstemp makes 0600: a replaced file keeps its mode, a new one gets
     * what the umask leaves of 0666, as open(O_CREAT) would give it. */
    mode_t mode;
    if (exists) {
        mode = st.st_mode & 07777;
    } else {
        mode_t um = umask(0);
        umask(um);
        mode = 0666 & ~um;
    }
    if (fchmod(fd, mode) != 0 || !(o->f = fdopen(fd, "wb"))) {
        int err = errno;
        close(fd);
        return out_fail(o, "", err);
    }
    return o;
}

FILE *tn_out_file(const struct tn_out *o) { return o->f; }

const char *tn_out_name(const struct tn_out *o) { return o->is_stdout ? "<stdout>" : o->path; }

int tn_out_commit(struct tn_out *o, bool sync)
{
    int err = ferror(o->f) ? EIO : 0;
    if (fflush(o->f) != 0 && !err)
        err = errno;
    if (o->direct) {
        int e = direct_finish(o->direct, sync);
        if (!err)
            err = e;
        o->direct = NULL; /* fclose frees it */
    }
    /* fsync is for the durability of a file; on a pipe or terminal it fails
     * with EINVAL, which is no failure of the write. */
    else if (!err && sync && o->tmp && fsync(fileno(o->f)) != 0)
        err = errno;
    if (o->is_stdout) {
        if (!err && ferror(o->f))
            err = EIO;
        clearerr(o->f);
    } else if (fclose(o->f) != 0 && !err) {
        err = errno;
    }
    o->f = NULL;
    if (!err && o->tmp && rename(o->tmp, o->target) != 0)
        err = errno;
    if (!err && sync && o->tmp) {
        /* the rename itself lasts only once the folder is synced */
        char dir[PATH_MAX];
        const char *base;
        split_path(o->target, dir, sizeof dir, &base);
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
    }
    if (err) {
        const char *name = tn_out_name(o);
        tn_set_error(TN_EIO, "%s: cannot write: %s", name, strerror(err));
        if (o->tmp)
            unlink(o->tmp);
    }
    out_free(o);
    return err ? TN_EIO : TN_OK;
}

void tn_out_abort(struct tn_out *o)
{
    if (!o)
        return;
    if (o->is_stdout)
        fflush(o->f);
    else if (o->f)
        fclose(o->f);
    if (o->tmp)
        unlink(o->tmp);
    out_free(o);
}

int tn_write_file(const char *path, const void *data, size_t len, bool sync)
{
    struct tn_out *o = tn_out_open(path);
    if (!o)
        return tn_last_status();
    if (len && fwrite(data, 1, len, o->f) != len) {
        int err = errno;
        tn_out_abort(o);
        return tn_set_error(TN_EIO, "%s: cannot write: %s", path, strerror(err));
    }
    return tn_out_commit(o, sync);
}

int tn_stdout_flush(void)
{
    int err = 0;
    if (fflush(stdout) != 0)
        err = errno;
    else if (ferror(stdout))
        err = EIO;
    if (err)
        return tn_set_error(TN_EIO, "<stdout>: cannot write: %s", strerror(err));
    return TN_OK;
}
