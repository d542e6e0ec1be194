/*
 * bin/cli.c: the tools' one usage-error helper (bin/cli.h).
 */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

_Noreturn void cli_usage_error(const char *who, const char *help, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", who);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help' for more information.\n", help);
    exit(2);
}
