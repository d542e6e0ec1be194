/*
 * bin/ttest/util.c: buffers, allocation that dies on failure, messages,
 * the clock and removing a test's temporary folder.
 */
#include "ttest.h"

#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void *tt_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        tt_die(2, "out of memory");
    return p;
}

void *tt_xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        tt_die(2, "out of memory");
    return p;
}

char *tt_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(tt_xmalloc(n), s, n);
}

char *tt_xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *s;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        tt_die(2, "out of memory");
    va_end(ap);
    return s;
}

/* Appends n bytes; keeps the buffer NUL-terminated so it reads as a string. */
void tt_buf_add(struct tt_buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->data = tt_xrealloc(b->data, cap);
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void tt_buf_addf(struct tt_buf *b, const char *fmt, ...)
{
    va_list ap;
    char *s;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        tt_die(2, "out of memory");
    tt_buf_add(b, s, (size_t)n);
    free(s);
}

void tt_buf_free(struct tt_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void tt_warn(const char *fmt, ...)
{
    va_list ap;
    fputs("ttest: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

_Noreturn void tt_die(int status, const char *fmt, ...)
{
    va_list ap;
    fputs("ttest: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(status);
}

double tt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int open_up(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)ftw;
    if (flag == FTW_D && (st->st_mode & 0700) != 0700)
        chmod(path, st->st_mode | 0700);
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

/* Depth first and without following links, so a test's symlink out of its
 * folder never makes ttest delete anything outside it. */
void tt_rmtree(const char *path)
{
    /* A test may leave folders it made read-only; open them up first. */
    nftw(path, open_up, 16, FTW_PHYS);
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
