/*
 * compile/cc.c: generated C to a loaded library, through the system C
 * compiler and the on-disk cache (cache.c).
 *
 * The key is SHA-256 over everything that decides the library's bytes:
 * the cache format, tensorkit's version, the compiler (its command, the
 * path it resolves to and its `--version` text), the flags, the CPU they
 * tune for (-march=native) and the source (ccid.c finds the compiler's
 * and the CPU's identity).
 */
#include "compile/internal.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CC_FLAGS "-std=c11 -w -O3 -march=native -fPIC -shared -fopenmp-simd -fno-math-errno -fno-trapping-math -fwrapv"
/* after the source, so that a linker with --as-needed keeps it: the
 * library names libm itself rather than relying on the process's */
#define CC_LIBS "-lm"
#define CC_TIMEOUT_DEFAULT 300.0
#define CC_STALE_SECONDS 3600

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the loaded libraries */

/* ------------------------------------------------------------- the key */

static void hash_field(struct tn__sha256 *s, const char *name, const char *value, size_t n)
{
    char head[96];
    int h = snprintf(head, sizeof head, "%s %zu\n", name, n);
    tn__sha256_update(s, head, (size_t)h);
    tn__sha256_update(s, value, n);
    tn__sha256_update(s, "\n", 1);
}

static void make_key(const struct tn__cc_id *id, const char *src, size_t len, char key[65])
{
    struct tn__sha256 s;
    unsigned char d[32];
    char fmt[16];
    snprintf(fmt, sizeof fmt, "%d", TN__CACHE_FORMAT);
    tn__sha256_init(&s);
    hash_field(&s, "tensorkit-compile-cache", fmt, strlen(fmt));
    hash_field(&s, "tensorkit", tn_version(), strlen(tn_version()));
    hash_field(&s, "cc", id->cmd, strlen(id->cmd));
    hash_field(&s, "cc-path", id->path, strlen(id->path));
    hash_field(&s, "cc-version", id->version, strlen(id->version));
    hash_field(&s, "flags", CC_FLAGS " " CC_LIBS, strlen(CC_FLAGS " " CC_LIBS));
    hash_field(&s, "cpu", id->cpu_hash, 64);
    hash_field(&s, "source", src, len);
    tn__sha256_final(&s, d);
    tn__sha256_tohex(d, key);
}

/* ------------------------------------------------------------- loading */

/* The libraries this process loaded by their cache path, and the file
 * (device, inode) each was then: dlopen of a path already loaded returns
 * the loaded object, so after an entry is rebuilt the new file is loaded
 * under another name. Under lock. */
struct loaded {
    char *path;
    dev_t dev;
    ino_t ino;
    struct loaded *next;
};
static struct loaded *loaded;
static unsigned load_seq;

static void *load_so(const char *path, const struct stat *st, const char *sub, const char *key)
{
    struct loaded *l = loaded;
    while (l && strcmp(l->path, path))
        l = l->next;
    void *h;
    void *old = l && (l->dev != st->st_dev || l->ino != st->st_ino)
                    ? dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)
                    : NULL;
    if (old) {
        dlclose(old);
        char alias[PATH_MAX];
        tn__path(alias, sizeof alias, "%s/.%s.load-%ld-%u.so", sub, key, (long)getpid(), load_seq++);
        if (link(path, alias) != 0) {
            tn_set_error(TN_EIO, "%s: cannot link it to load it again: %s", path, strerror(errno));
            return NULL;
        }
        h = dlopen(alias, RTLD_NOW | RTLD_LOCAL);
        unlink(alias);
    } else {
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h && !l && (l = calloc(1, sizeof *l)) != NULL) {
            if ((l->path = strdup(path)) != NULL) {
                l->next = loaded;
                loaded = l;
            } else {
                free(l); /* unrecorded: a later rebuild may reload the old object */
                l = NULL;
            }
        }
        if (h && l) {
            l->dev = st->st_dev;
            l->ino = st->st_ino;
        }
    }
    if (!h)
        tn_set_error(TN_EIO, "%s: cannot load: %s", path, dlerror());
    return h;
}

/* ----------------------------------------------------------- compiling */

int tn__write_private(const char *path, const void *data, size_t len, mode_t mode)
{
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && unlink(path) != 0)
        return tn_set_error(TN_EIO, "%s: cannot replace: %s", path, strerror(errno));
    struct tn_out *o = tn_out_open(path);
    if (!o)
        return tn_last_status();
    FILE *f = tn_out_file(o);
    if (fchmod(fileno(f), mode) != 0 || (len && fwrite(data, 1, len, f) != len)) {
        int err = errno;
        tn_out_abort(o);
        return tn_set_error(TN_EIO, "%s: cannot write: %s", path, strerror(err));
    }
    return tn_out_commit(o, false);
}

/* Removes the temporaries that killed compiles left in sub long ago. */
static void clean_stale(const char *sub)
{
    DIR *d = opendir(sub);
    struct dirent *e;
    time_t now = time(NULL);
    while (d && (e = readdir(d)) != NULL) {
        struct stat st;
        if (e->d_name[0] == '.' && (strstr(e->d_name, ".tmp-") || strstr(e->d_name, ".load-")) &&
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && now - st.st_mtime > CC_STALE_SECONDS)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    if (d)
        closedir(d);
}

static char *manifest_text(const struct tn__cc_id *id, const char *key, int64_t so_size, const char *so_hex,
                           size_t c_size, double cc_s)
{
    const char *v = id->version;
    json_t *m = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s#, s:s, s:s, s:s, s:I, s:s, s:I, s:I, s:f}",
                          "format", TN__CACHE_FORMAT, "key", key, "tensorkit", tn_version(), "cc",
                          id->cmd, "cc_path", id->path, "cc_version", v, (int)strcspn(v, "\n"),
                          "flags", CC_FLAGS " " CC_LIBS, "cpu", id->cpu_model, "cpu_sha256", id->cpu_hash, "so_size",
                          (json_int_t)so_size, "so_sha256", so_hex, "c_size", (json_int_t)c_size,
                          "created", (json_int_t)time(NULL), "cc_seconds", cc_s);
    char *text = m ? json_dumps(m, JSON_INDENT(2)) : NULL;
    json_decref(m);
    return text;
}

/* SHA-256 and size of the file at path. */
static int hash_file(const char *path, char hex[65], int64_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    bool ok = fd >= 0 && tn__sha256_fd(fd, hex, size);
    int err = errno;
    if (fd >= 0)
        close(fd);
    return ok ? 0 : tn_set_error(TN_EIO, "%s: %s", path, strerror(err));
}

/* Compiles src into the entry: the source, the library through a
 * temporary renamed in, then the manifest, the last two under the
 * subfolder's lock so that readers see them agree. */
/* Runs the compiler c on src into the library out with CC_FLAGS, extra
 * after the source, then CC_LIBS. */
static int run_cc(const struct tn__cc_cmd *c, double timeout, const char *src, const char *out_path,
                  const char *const *extra, int nextra, double *secs)
{
    char *argv[TN__CC_MAX_WORDS + 32], flags[] = CC_FLAGS, libs[] = CC_LIBS, *save;
    int n = 0;
    if (nextra > 8)
        return tn_set_error(TN_EINVAL, "too many compiler arguments");
    for (int i = 0; i < c->n; i++)
        argv[n++] = c->words[i];
    for (char *f = strtok_r(flags, " ", &save); f; f = strtok_r(NULL, " ", &save))
        argv[n++] = f;
    argv[n++] = "-o";
    argv[n++] = (char *)out_path;
    argv[n++] = (char *)src;
    for (int i = 0; i < nextra; i++)
        argv[n++] = (char *)extra[i];
    argv[n++] = libs;
    argv[n] = NULL;
    char *out = malloc(TN__CC_OUTPUT_MAX);
    if (!out)
        return tn_set_error(TN_ENOMEM, "out of memory");
    double t0 = tn__cc_now();
    int status = 0;
    int rc = tn__spawn(argv, timeout, out, TN__CC_OUTPUT_MAX, &status);
    *secs = tn__cc_now() - t0;
    if (rc < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
        rc = tn__cc_error(c->words[0], "", rc, status, out, timeout);
    free(out);
    return rc;
}

static const char *cc_command(const struct tn_compile_options *opts)
{
    const char *env = getenv("CC");
    return opts && opts->cc ? opts->cc : env && *env ? env : "cc";
}

int tn__cc_build(const struct tn_compile_options *opts, const char *src_path, const char *out_path,
                 const char *const *extra, int nextra, double *secs)
{
    struct tn__cc_cmd c;
    int rc = tn__cc_split(cc_command(opts), &c);
    if (rc < 0)
        return rc;
    return run_cc(&c, opts && opts->cc_timeout > 0 ? opts->cc_timeout : CC_TIMEOUT_DEFAULT,
                  src_path, out_path, extra, nextra, secs);
}

static int compile_entry(const struct tn__cc_id *id, const struct tn__cc_cmd *c, const char *src, size_t len,
                         double timeout, int subfd, const char *sub, struct tn__cc_info *info)
{
    clean_stale(sub);
    int rc = tn__write_private(info->c_path, src, len, 0600);
    if (rc < 0)
        return rc;
    char tmp[PATH_MAX];
    tn__path(tmp, sizeof tmp, "%s/.%s.so.tmp-XXXXXX", sub, info->key);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return tn_set_error(TN_EIO, "%s: cannot create a temporary: %s", sub, strerror(errno));
    close(fd);
    rc = run_cc(c, timeout, info->c_path, tmp, NULL, 0, &info->cc_s);
    char hex[65];
    int64_t size = 0;
    if (rc == 0 && chmod(tmp, 0700) != 0) /* the linker's mode follows the umask */
        rc = tn_set_error(TN_EIO, "%s: %s", tmp, strerror(errno));
    if (rc == 0)
        rc = hash_file(tmp, hex, &size);
    if (rc < 0) {
        unlink(tmp);
        return rc;
    }
    char *m = manifest_text(id, info->key, size, hex, len, info->cc_s);
    char mpath[PATH_MAX];
    tn__path(mpath, sizeof mpath, "%s/%s.json", sub, info->key);
    flock(subfd, LOCK_EX);
    bool renamed = m && rename(tmp, info->so_path) == 0;
    if (!m)
        rc = tn_set_error(TN_ENOMEM, "out of memory");
    else if (!renamed)
        rc = tn_set_error(TN_EIO, "%s: cannot rename into place: %s", info->so_path, strerror(errno));
    else
        rc = tn__write_private(mpath, m, strlen(m), 0600);
    flock(subfd, LOCK_UN);
    free(m);
    if (!renamed)
        unlink(tmp);
    return rc;
}

static void *load_locked(const struct tn__cc_info *info, const struct stat *st, const char *sub)
{
    pthread_mutex_lock(&lock);
    void *h = load_so(info->so_path, st, sub, info->key);
    pthread_mutex_unlock(&lock);
    return h;
}

void *tn__cc_load(const char *src, size_t len, const struct tn_compile_options *opts,
                  struct tn__cc_info *info)
{
    const char *cmd = cc_command(opts);
    double timeout = opts && opts->cc_timeout > 0 ? opts->cc_timeout : CC_TIMEOUT_DEFAULT;
    memset(info, 0, sizeof *info);
    struct tn__cc_cmd c;
    char dir[PATH_MAX], sub[PATH_MAX];
    if (tn__cc_split(cmd, &c) < 0 || tn__cache_open(opts ? opts->cache_dir : NULL, true, dir, sizeof dir) < 0)
        return NULL;
    /* threads compile side by side as processes do: the lock is held
     * only while loading */
    const struct tn__cc_id *id = tn__cc_identity(cmd, &c, timeout, dir);
    if (!id)
        return NULL;
    make_key(id, src, len, info->key);
    tn__path(sub, sizeof sub, "%s/%.2s", dir, info->key);
    tn__path(info->c_path, sizeof info->c_path, "%s/%s.c", sub, info->key);
    tn__path(info->so_path, sizeof info->so_path, "%s/%s.so", sub, info->key);
    if (mkdir(sub, 0700) != 0 && errno != EEXIST) {
        tn_set_error(TN_EIO, "%s: cannot create the folder: %s", sub, strerror(errno));
        return NULL;
    }
    if (tn__cache_check_folder(sub, true) < 0)
        return NULL;
    int subfd = open(sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (subfd < 0) {
        tn_set_error(TN_EIO, "%s: %s", sub, strerror(errno));
        return NULL;
    }
    /* an entry is checked and loaded under the subfolder's shared lock,
     * so the library loaded is the one checked: writers rename a library
     * in and write its manifest under the exclusive lock */
    char why[80];
    struct stat st;
    void *h = NULL;
    flock(subfd, LOCK_SH);
    info->hit = tn__cache_entry_ok(sub, info->key, why, sizeof why, &st);
    if (info->hit)
        h = load_locked(info, &st, sub);
    flock(subfd, LOCK_UN);
    if (!info->hit && compile_entry(id, &c, src, len, timeout, subfd, sub, info) == 0) {
        flock(subfd, LOCK_SH);
        if (stat(info->so_path, &st) != 0)
            tn_set_error(TN_EIO, "%s: %s", info->so_path, strerror(errno));
        else
            h = load_locked(info, &st, sub);
        flock(subfd, LOCK_UN);
    }
    close(subfd);
    return h;
}

/* ------------------------------------------------------------- export */

static int copy_file(const char *from, const char *to, mode_t mode)
{
    int fd = open(from, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        return tn_set_error(TN_EIO, "%s: %s", from, strerror(err));
    }
    char *b = malloc((size_t)st.st_size + 1);
    ssize_t got = b ? read(fd, b, (size_t)st.st_size) : -1;
    int err = errno;
    close(fd);
    if (got != st.st_size) {
        free(b);
        return tn_set_error(TN_EIO, "%s: cannot read: %s", from, got < 0 ? strerror(err) : "short read");
    }
    struct tn_out *o = tn_out_open(to);
    int rc;
    if (!o) {
        rc = tn_last_status();
    } else if (fchmod(fileno(tn_out_file(o)), mode) != 0 ||
               fwrite(b, 1, (size_t)got, tn_out_file(o)) != (size_t)got) {
        err = errno;
        tn_out_abort(o);
        rc = tn_set_error(TN_EIO, "%s: cannot write: %s", to, strerror(err));
    } else {
        rc = tn_out_commit(o, false);
    }
    free(b);
    return rc;
}

int tn__cc_export(const struct tn__cc_info *info, const char *dir)
{
    int rc = tn__make_folders(dir, 0777);
    if (rc < 0)
        return rc;
    mode_t um = umask(0);
    umask(um);
    char json[4096], to[PATH_MAX];
    size_t n = strlen(info->so_path);
    tn__path(json, sizeof json, "%.*s.json", (int)(n > 3 ? n - 3 : 0), info->so_path);
    static const char *const names[] = {"kernel.c", "kernel.so", "manifest.json"};
    const char *from[] = {info->c_path, info->so_path, json};
    for (int i = 0; i < 3 && rc == 0; i++) {
        if ((rc = tn__path(to, sizeof to, "%s/%s", dir, names[i])) == 0)
            rc = copy_file(from[i], to, (i == 1 ? 0777 : 0666) & ~um);
    }
    return rc;
}
