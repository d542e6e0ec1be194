/*
 * core/error.c: the thread-local last error and the abort path for bugs.
 */
#include "core/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TN_ERROR_MAX 1024

/* The last error, per thread as errno is (DESIGN.md, Threads): a failure
 * in one thread never rewrites the message another is reading. */
static _Thread_local char tn_error_buf[TN_ERROR_MAX];
static _Thread_local enum tn_status tn_error_status;

const char *tn_last_error(void) { return tn_error_buf; }

int tn_last_status(void) { return tn_error_status; }

void tn_clear_error(void)
{
    tn_error_buf[0] = '\0';
    tn_error_status = TN_OK;
}

int tn_set_verror(enum tn_status status, const char *fmt, va_list ap)
{
    /* Format into a scratch buffer first: fmt's arguments may point into the
     * current message (as tn_error_prefix's do). */
    char tmp[TN_ERROR_MAX];
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    memcpy(tn_error_buf, tmp, sizeof tmp);
    tn_error_status = status;
    return status;
}

int tn_set_error(enum tn_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tn_set_verror(status, fmt, ap);
    va_end(ap);
    return status;
}

int tn_error_prefix(const char *fmt, ...)
{
    char prefix[TN_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    enum tn_status st = tn_error_status != TN_OK ? tn_error_status : TN_ERUNTIME;
    return tn_set_error(st, "%s: %s", prefix, tn_error_buf);
}

_Noreturn void tn_assert_fail(const char *expr, const char *file, int line, const char *func)
{
    fprintf(stderr, "libtensor: %s:%d: %s: internal error: assertion '%s' failed\n", file, line,
            func, expr);
    abort();
}

const char *tn_version(void) { return PACKAGE_VERSION; }
