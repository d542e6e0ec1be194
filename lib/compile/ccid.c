/*
 * compile/ccid.c: who compiles, for the cache key: the C compiler's
 * command, the path it resolves to and its `--version` text, and the CPU
 * that -march=native tunes for.
 *
 * Running `cc --version` costs milliseconds, so its text is kept per
 * process, and in the cache folder (DIR/compilers/<hash>.txt) under a
 * hash of the command and of the path, device, inode, size and times of
 * every word of it that is a program on PATH (a wrapper such as "ccache
 * gcc" names both): a compiler replaced or upgraded is a new file, and so
 * a new hash. A warm start then runs no process at all.
 */
#include "compile/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int tn__cc_split(const char *cmd, struct tn__cc_cmd *c)
{
    if (snprintf(c->buf, sizeof c->buf, "%s", cmd) >= (int)sizeof c->buf)
        return tn_set_error(TN_EINVAL, "CC: the command is too long");
    c->n = 0;
    char *save;
    for (char *s = strtok_r(c->buf, " \t", &save); s; s = strtok_r(NULL, " \t", &save)) {
        if (c->n == TN__CC_MAX_WORDS)
            return tn_set_error(TN_EINVAL, "CC: more than %d words", TN__CC_MAX_WORDS);
        c->words[c->n++] = s;
    }
    c->words[c->n] = NULL;
    if (!c->n)
        return tn_set_error(TN_EINVAL, "CC: an empty command");
    return 0;
}

/* name as the shell would find it on PATH, with links resolved, into
 * out; false when there is no such program. */
static bool resolve_program(const char *name, char *out)
{
    if (strchr(name, '/'))
        return realpath(name, out) != NULL && access(out, X_OK) == 0;
    const char *path = getenv("PATH");
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char cand[PATH_MAX];
        if (snprintf(cand, sizeof cand, "%.*s/%s", (int)n, n ? p : ".", name) < (int)sizeof cand &&
            access(cand, X_OK) == 0 && realpath(cand, out))
            return true;
        p += n + (end != NULL);
    }
    return false;
}

int tn__cc_error(const char *name, const char *what, int rc, int status, const char *out, double timeout)
{
    if (rc == TN_ETIMEOUT)
        return tn_set_error(TN_ETIMEOUT, "%s: timed out after %g s", name, timeout);
    if (rc < 0)
        return rc;
    /* the first line naming an error, else the first line */
    const char *line = NULL;
    for (const char *s = out; *s; s = strchr(s, '\n') ? strchr(s, '\n') + 1 : s + strlen(s)) {
        size_t n = strcspn(s, "\n");
        if (!line && n)
            line = s;
        const char *e = strstr(s, "error");
        if (e && (size_t)(e - s) < n) {
            line = s;
            break;
        }
    }
    if (line)
        return tn_set_error(TN_ERUNTIME, "%s%s failed: %.*s", name, what, (int)strcspn(line, "\n"), line);
    if (WIFSIGNALED(status))
        return tn_set_error(TN_ERUNTIME, "%s%s failed: killed by signal %d", name, what, WTERMSIG(status));
    return tn_set_error(TN_ERUNTIME, "%s%s failed with exit status %d", name, what, WEXITSTATUS(status));
}

/* ------------------------------------------------------ the CPU's identity */

static char cpu_model[256];
static char cpu_hash[65];

/* Reads the first processor's block of /proc/cpuinfo (x86: vendor, model
 * name and flags; Arm: implementer, architecture, variant, part and
 * Features); elsewhere the hash is of nothing and the flags'
 * -march=native is all the key says. Under lock. */
static void cpu_identity(void)
{
    if (cpu_hash[0])
        return;
    static const char *const keys[] = {"vendor_id", "model name", "flags", "CPU implementer",
                                       "CPU architecture", "CPU variant", "CPU part", "Features"};
    struct tn__sha256 s;
    tn__sha256_init(&s);
    FILE *f = fopen("/proc/cpuinfo", "re");
    char line[8192];
    while (f && fgets(line, sizeof line, f) && line[0] != '\n') {
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            size_t n = strlen(keys[k]);
            if (strncmp(line, keys[k], n) || (line[n] != ' ' && line[n] != '\t' && line[n] != ':'))
                continue;
            tn__sha256_update(&s, line, strlen(line));
            const char *v = strchr(line, ':');
            if (k == 1 && v)
                snprintf(cpu_model, sizeof cpu_model, "%.*s", (int)strcspn(v + 2, "\n"), v + 2);
        }
    }
    if (f)
        fclose(f);
    unsigned char d[32];
    tn__sha256_final(&s, d);
    tn__sha256_tohex(d, cpu_hash);
}

/* --------------------------------------------------- the compiler's */

static struct tn__cc_id *ids; /* under lock; never freed: identities live as long as the process */

/* The hash naming command c's memo: the command, and the file identity of
 * each of its words that is a program (the first is resolved into path).
 * False when the first word is no program. */
static bool fingerprint(const char *cmd, const struct tn__cc_cmd *c, char path[PATH_MAX], char hex[65])
{
    struct tn__sha256 s;
    unsigned char d[32];
    tn__sha256_init(&s);
    tn__sha256_update(&s, cmd, strlen(cmd) + 1);
    for (int i = 0; i < c->n; i++) {
        char p[PATH_MAX];
        struct stat st;
        if (c->words[i][0] == '-' || !resolve_program(c->words[i], p) || stat(p, &st) != 0) {
            if (i == 0)
                return false;
            continue;
        }
        if (i == 0)
            memcpy(path, p, PATH_MAX);
        char id[PATH_MAX + 160];
        int n = snprintf(id, sizeof id, "%s\n%ju %ju %jd %jd.%09ld %jd.%09ld\n", p, (uintmax_t)st.st_dev,
                         (uintmax_t)st.st_ino, (intmax_t)st.st_size, (intmax_t)st.st_mtim.tv_sec,
                         st.st_mtim.tv_nsec, (intmax_t)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
        tn__sha256_update(&s, id, (size_t)n);
    }
    tn__sha256_final(&s, d);
    tn__sha256_tohex(d, hex);
    return true;
}

/* The memo's text, when the file is ours, not writable by others, and
 * holds a NUL-free text of at most cap - 1 bytes; else NULL. */
static char *read_memo(const char *path, char *out, size_t cap)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    ssize_t n = -1;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        !(st.st_mode & (S_IWGRP | S_IWOTH)) && st.st_size > 0 && (size_t)st.st_size < cap)
        n = read(fd, out, (size_t)st.st_size);
    if (fd >= 0)
        close(fd);
    if (n <= 0 || n != st.st_size || memchr(out, '\0', (size_t)n))
        return NULL;
    out[n] = '\0';
    return out;
}

/* The `--version` text of c into out; 0 or an error. */
static int run_version(const struct tn__cc_cmd *c, double timeout, char *out)
{
    char *argv[TN__CC_MAX_WORDS + 2];
    memcpy(argv, c->words, (size_t)c->n * sizeof *argv);
    argv[c->n] = "--version";
    argv[c->n + 1] = NULL;
    int status = 0, rc = tn__spawn(argv, timeout, out, TN__CC_OUTPUT_MAX, &status);
    if (rc < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
        return tn__cc_error(c->words[0], " --version", rc, status, out, timeout);
    return 0;
}

/* The identity of command cmd (split in c), learnt on first use. */
static struct tn__cc_id *learn(const char *cmd, const struct tn__cc_cmd *c, double timeout, const char *dir)
{
    struct tn__cc_id *id = calloc(1, sizeof *id);
    char *out = malloc(TN__CC_OUTPUT_MAX), *cmdcopy = strdup(cmd);
    char hex[65], memo[PATH_MAX] = "";
    if (!id || !out || !cmdcopy) {
        tn_set_error(TN_ENOMEM, "out of memory");
        goto fail;
    }
    if (!fingerprint(cmd, c, id->path, hex)) {
        tn_set_error(TN_EIO, "%s: not found", c->words[0]);
        goto fail;
    }
    if (dir && tn__path(memo, sizeof memo, "%s/compilers/%s.txt", dir, hex) < 0)
        memo[0] = '\0';
    if (!memo[0] || !read_memo(memo, out, TN__CC_OUTPUT_MAX)) {
        if (run_version(c, timeout, out) < 0)
            goto fail;
        char sub[PATH_MAX];
        /* a memo that cannot be written is only a slower start next time */
        if (memo[0] && tn__path(sub, sizeof sub, "%s/compilers", dir) == 0 &&
            (mkdir(sub, 0700) == 0 || errno == EEXIST) && tn__cache_check_folder(sub, true) == 0)
            (void)tn__write_private(memo, out, strlen(out), 0600);
    }
    id->cmd = cmdcopy;
    id->version = out;
    id->cpu_model = cpu_model;
    id->cpu_hash = cpu_hash;
    return id;
fail:
    free(cmdcopy);
    free(out);
    free(id);
    return NULL;
}

const struct tn__cc_id *tn__cc_identity(const char *cmd, const struct tn__cc_cmd *c, double timeout,
                                        const char *dir)
{
    pthread_mutex_lock(&lock);
    struct tn__cc_id *id = ids;
    while (id && strcmp(id->cmd, cmd))
        id = id->next;
    if (!id && (id = learn(cmd, c, timeout, dir)) != NULL) {
        cpu_identity();
        id->next = ids;
        ids = id;
    }
    pthread_mutex_unlock(&lock);
    return id;
}
