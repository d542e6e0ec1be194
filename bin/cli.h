/*
 * bin/cli.h: what every tool's command line needs and libtensor may not do
 * (a library function never prints or exits): compiled into each tool.
 */
#ifndef TN_BIN_CLI_H
#define TN_BIN_CLI_H

/* A usage error, as DESIGN.md's command-line conventions have it: prints
 * "WHO: <message>" (fmt as printf's) and the hint "Try 'HELP --help' for
 * more information." on stderr and exits 2.  WHO is the tool ("tckpt") or
 * the tool and its command ("tckpt: scan"), HELP the command line that
 * prints the help ("tckpt scan"). */
_Noreturn void cli_usage_error(const char *who, const char *help, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
