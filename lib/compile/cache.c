/*
 * compile/cache.c: the compile cache on disk: where it is, whether it is
 * ours, whether an entry is whole, and listing and clearing it.
 *
 * Layout: DIR/<first 2 hex of the key>/<key>.{c,so,json}. A library is
 * code this process will run, so nothing is loaded unless the folder and
 * the files are ours and nobody else can write them, and the manifest
 * (read as untrusted bytes) names the key and the library's exact size and
 * SHA-256. Temporaries of writers in progress or killed start with a dot.
 */
#include "compile/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tn_compile_cache_dir(const char *override, char *buf, size_t len)
{
    const char *env = getenv("TN_COMPILE_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (override && *override)
        n = snprintf(buf, len, "%s", override);
    else if (env && *env)
        n = snprintf(buf, len, "%s", env);
    else if (xdg && xdg[0] == '/') /* the XDG spec ignores a relative path */
        n = snprintf(buf, len, "%s/tensorkit", xdg);
    else if (home && *home)
        n = snprintf(buf, len, "%s/.cache/tensorkit", home);
    else
        return tn_set_error(TN_EINVAL, "no compile cache folder: set TN_COMPILE_CACHE (or HOME)");
    /* room for the entries' names below it */
    if (n < 0 || (size_t)n >= len || n > PATH_MAX - 160)
        return tn_set_error(TN_EINVAL, "the compile cache folder's name is too long");
    return 0;
}

int tn__path(char *out, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    if (r < 0 || (size_t)r >= n)
        return tn_set_error(TN_EINVAL, "%.60s...: path too long", out);
    return 0;
}

int tn__make_folders(const char *dir, mode_t mode)
{
    char p[PATH_MAX];
    if (tn__path(p, sizeof p, "%s", dir) < 0)
        return TN_EINVAL;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s)
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, mode) != 0 && errno != EEXIST)
            return tn_set_error(TN_EIO, "%s: cannot create the folder: %s", p, strerror(errno));
        *s = c;
        if (!c)
            return 0;
    }
}

int tn__cache_check_folder(const char *dir, bool write)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT && !write)
            return 1;
        return tn_set_error(TN_EIO, "%s: cache folder: %s", dir, strerror(errno));
    }
    const char *why = NULL;
    char buf[96];
    if (!S_ISDIR(st.st_mode)) {
        why = "not a folder";
    } else if (st.st_uid != geteuid()) {
        snprintf(buf, sizeof buf, "owned by uid %u, not by us (uid %u)", (unsigned)st.st_uid, (unsigned)geteuid());
        why = buf;
    } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(buf, sizeof buf, "writable by others (mode %04o)", (unsigned)(st.st_mode & 07777));
        why = buf;
    } else if (write && (!(st.st_mode & S_IWUSR) || access(dir, W_OK | X_OK) != 0)) {
        snprintf(buf, sizeof buf, "not writable by us (mode %04o)", (unsigned)(st.st_mode & 07777));
        why = buf;
    }
    if (why)
        return tn_set_error(TN_EIO, "%s: cache folder refused: %s", dir, why);
    return 0;
}

int tn__cache_open(const char *override, bool write, char *dir, size_t len)
{
    int rc = tn_compile_cache_dir(override, dir, len);
    if (rc < 0)
        return rc;
    if (write) {
        struct stat st;
        if (stat(dir, &st) != 0 && (rc = tn__make_folders(dir, 0700)) < 0)
            return rc;
    }
    return tn__cache_check_folder(dir, write);
}

/* ------------------------------------------------------- entry checks */

/* Opens path (no symlinks) and checks it is a regular file of ours that
 * nobody else can write; returns the descriptor, or -1 with why set. */
static int open_ours(const char *path, const char *what, struct stat *st, char *why, size_t wl)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT)
            snprintf(why, wl, "no %s", what);
        else
            snprintf(why, wl, "%s: %s", what, errno == ELOOP ? "a symlink" : strerror(errno));
        return -1;
    }
    const char *bad = NULL;
    if (fstat(fd, st) != 0)
        bad = "cannot stat";
    else if (!S_ISREG(st->st_mode))
        bad = "not a regular file";
    else if (st->st_uid != geteuid())
        bad = "not ours";
    else if (st->st_mode & (S_IWGRP | S_IWOTH))
        bad = "writable by others";
    if (bad) {
        snprintf(why, wl, "%s %s", what, bad);
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads all of fd (n bytes, as fstat said) into a new buffer, or NULL. */
static char *read_fd(int fd, size_t n)
{
    char *b = malloc(n + 1);
    size_t got = 0;
    while (b && got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            free(b);
            return NULL;
        }
        got += (size_t)r;
    }
    if (b)
        b[n] = '\0';
    return b;
}

/* The manifest's checks on the .so (so_fd, so) and .c sizes. */
static bool manifest_ok(const char *text, size_t n, const char *key, int so_fd, const struct stat *so,
                        const struct stat *c, char *why, size_t wl)
{
    json_error_t err;
    json_t *m = json_loadb(text, n, JSON_REJECT_DUPLICATES, &err);
    const char *bad = NULL;
    json_t *mkey = json_object_get(m, "key"), *fmt = json_object_get(m, "format"),
           *size = json_object_get(m, "so_size"), *sha = json_object_get(m, "so_sha256"),
           *csize = json_object_get(m, "c_size");
    char hex[65];
    int64_t got;
    if (!json_is_object(m))
        bad = "manifest is not a JSON object";
    else if (!json_is_integer(fmt) || json_integer_value(fmt) != TN__CACHE_FORMAT)
        bad = "manifest of another format";
    else if (!json_is_string(mkey) || strcmp(json_string_value(mkey), key))
        bad = "manifest of another key";
    else if (!json_is_integer(size) || !json_is_string(sha) || !json_is_integer(csize))
        bad = "manifest without sizes and hash";
    else if (json_integer_value(size) != (json_int_t)so->st_size)
        bad = "library's size differs from the manifest's";
    else if (json_integer_value(csize) != (json_int_t)c->st_size)
        bad = "source's size differs from the manifest's";
    else if (!tn__sha256_fd(so_fd, hex, &got) || got != so->st_size)
        bad = "library unreadable";
    else if (strcmp(hex, json_string_value(sha)))
        bad = "library's SHA-256 differs from the manifest's";
    if (bad)
        snprintf(why, wl, "%s", bad);
    json_decref(m);
    return !bad;
}

bool tn__cache_entry_ok(const char *sub, const char *key, char *why, size_t wl, struct stat *so_st)
{
    char path[PATH_MAX];
    struct stat mst, cst;
    int so = -1, mf = -1, c = -1;
    bool ok = false;
    tn__path(path, sizeof path, "%s/%s.so", sub, key);
    if ((so = open_ours(path, "library", so_st, why, wl)) < 0)
        goto out;
    tn__path(path, sizeof path, "%s/%s.json", sub, key);
    if ((mf = open_ours(path, "manifest", &mst, why, wl)) < 0)
        goto out;
    tn__path(path, sizeof path, "%s/%s.c", sub, key);
    if ((c = open_ours(path, "source", &cst, why, wl)) < 0)
        goto out;
    if (mst.st_size > TN__CACHE_MANIFEST_MAX) {
        snprintf(why, wl, "manifest larger than %d bytes", TN__CACHE_MANIFEST_MAX);
        goto out;
    }
    char *text = read_fd(mf, (size_t)mst.st_size);
    if (!text) {
        snprintf(why, wl, "manifest unreadable");
        goto out;
    }
    ok = manifest_ok(text, (size_t)mst.st_size, key, so, so_st, &cst, why, wl);
    free(text);
out:
    if (so >= 0)
        close(so);
    if (mf >= 0)
        close(mf);
    if (c >= 0)
        close(c);
    return ok;
}

/* ------------------------------------------------------- list and clear */

static bool is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* A file of an entry: <64 hex>.{c,so,json}; its key into key. */
static bool entry_file(const char *name, char key[65])
{
    const char *dot = strchr(name, '.');
    if (!dot || dot - name != 64 || !is_hex(name, 64) ||
        (strcmp(dot, ".c") && strcmp(dot, ".so") && strcmp(dot, ".json")))
        return false;
    memcpy(key, name, 64);
    key[64] = '\0';
    return true;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names in folder dir that keep(name) accepts, sorted; NULL-ended, a
 * new array of new strings (free_names), or NULL on out of memory. A
 * missing folder is empty. */
static char **sorted_names(const char *dir, bool (*keep)(const char *))
{
    size_t n = 0, cap = 16;
    char **v = malloc(cap * sizeof *v);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (v && d && (e = readdir(d)) != NULL) {
        if (!keep(e->d_name))
            continue;
        if (n + 1 == cap) {
            char **w = realloc(v, (cap *= 2) * sizeof *v);
            if (!w) {
                for (size_t i = 0; i < n; i++)
                    free(v[i]);
                free(v);
                v = NULL;
                break;
            }
            v = w;
        }
        if (!(v[n] = strdup(e->d_name)))
            break;
        n++;
    }
    if (d)
        closedir(d);
    if (!v)
        return NULL;
    v[n] = NULL;
    qsort(v, n, sizeof *v, cmp_str);
    return v;
}

static void free_names(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

static bool is_subfolder(const char *name) { return strlen(name) == 2 && is_hex(name, 2); }
static bool is_cleared(const char *name) { return is_subfolder(name) || !strcmp(name, "compilers"); }
static bool is_any(const char *name) { return strcmp(name, ".") && strcmp(name, ".."); }

/* Calls fn(sub, key, ctx) for each key under dir, in key order (a key's
 * files are neighbours among the sorted names); returns the count. */
typedef int (*entry_fn)(const char *sub, const char *key, void *ctx);

static int each_entry(const char *dir, entry_fn fn, void *ctx)
{
    char **subs = sorted_names(dir, is_subfolder);
    if (!subs)
        return tn_set_error(TN_ENOMEM, "%s: out of memory", dir);
    int count = 0, rc = 0;
    for (size_t s = 0; subs[s] && rc >= 0; s++) {
        char sub[PATH_MAX];
        tn__path(sub, sizeof sub, "%s/%s", dir, subs[s]);
        char **names = sorted_names(sub, is_any);
        if (!names) {
            rc = tn_set_error(TN_ENOMEM, "%s: out of memory", sub);
            break;
        }
        char last[65] = "", key[65];
        for (size_t i = 0; names[i] && rc >= 0; i++) {
            if (!entry_file(names[i], key) || !strcmp(key, last) || strncmp(key, subs[s], 2))
                continue;
            memcpy(last, key, sizeof key);
            if ((rc = fn(sub, key, ctx)) >= 0)
                count++;
        }
        free_names(names);
    }
    free_names(subs);
    return rc < 0 ? rc : count;
}

struct list_ctx {
    tn_compile_cache_fn fn;
    void *ctx;
};

static int list_one(const char *sub, const char *key, void *vctx)
{
    struct list_ctx *lc = vctx;
    struct tn_compile_cache_entry e = {0};
    memcpy(e.key, key, 65);
    struct stat st;
    e.valid = tn__cache_entry_ok(sub, key, e.why, sizeof e.why, &st);
    if (e.valid)
        e.why[0] = '\0';
    static const char *const ext[] = {"so", "c", "json"};
    for (int i = 0; i < 3; i++) {
        char path[PATH_MAX];
        tn__path(path, sizeof path, "%s/%s.%s", sub, key, ext[i]);
        if (lstat(path, &st) == 0) {
            e.bytes += st.st_size;
            if (i == 0)
                e.mtime = st.st_mtime;
        }
    }
    return lc->fn ? lc->fn(&e, lc->ctx) : 0;
}

int tn_compile_cache_list(const char *dir, tn_compile_cache_fn fn, void *ctx)
{
    char d[PATH_MAX];
    int rc = tn__cache_open(dir, false, d, sizeof d);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    struct list_ctx lc = {fn, ctx};
    return each_entry(d, list_one, &lc);
}

/* A compiler's memo (ccid.c): <64 hex>.txt. */
static bool memo_file(const char *name) { return strlen(name) == 68 && is_hex(name, 64) && !strcmp(name + 64, ".txt"); }

/* Removes what subfolder sub holds of ours: entries' files, compilers'
 * memos and temporaries (dot files); returns the number of keys, or an
 * error. */
static int clear_sub(const char *sub)
{
    char **names = sorted_names(sub, is_any);
    if (!names)
        return tn_set_error(TN_ENOMEM, "%s: out of memory", sub);
    int count = 0, rc = 0;
    char last[65] = "", key[65];
    for (size_t i = 0; names[i]; i++) {
        bool entry = entry_file(names[i], key);
        if (!entry && names[i][0] != '.' && !memo_file(names[i]))
            continue; /* not ours to remove */
        char path[PATH_MAX];
        tn__path(path, sizeof path, "%s/%s", sub, names[i]);
        if (unlink(path) != 0 && errno != ENOENT) {
            rc = tn_set_error(TN_EIO, "%s: cannot remove: %s", path, strerror(errno));
            break;
        }
        if (entry && strcmp(key, last)) {
            memcpy(last, key, sizeof key);
            count++;
        }
    }
    free_names(names);
    if (rc == 0)
        (void)rmdir(sub); /* only when nothing else is left there */
    return rc < 0 ? rc : count;
}

int tn_compile_cache_clear(const char *dir)
{
    char d[PATH_MAX];
    int rc = tn__cache_open(dir, false, d, sizeof d);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    if ((rc = tn__cache_check_folder(d, true)) < 0)
        return rc;
    char **subs = sorted_names(d, is_cleared);
    if (!subs)
        return tn_set_error(TN_ENOMEM, "%s: out of memory", d);
    int count = 0;
    for (size_t s = 0; subs[s]; s++) {
        char sub[PATH_MAX];
        tn__path(sub, sizeof sub, "%s/%s", d, subs[s]);
        if ((rc = clear_sub(sub)) < 0)
            break;
        count += rc;
    }
    free_names(subs);
    return rc < 0 ? rc : count;
}
