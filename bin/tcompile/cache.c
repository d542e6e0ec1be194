/*
 * bin/tcompile/cache.c: `tcompile cache ls|stats|clear`, the compile
 * cache on disk (tensor/compile.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <tensor/compile.h>
#include <tensor/core.h>

#include "tcompile.h"

struct tally {
    int valid, invalid;
    int64_t bytes;
    json_t *list; /* ls --json: the entries */
    bool print;   /* ls: a line per entry */
};

static int each(const struct tn_compile_cache_entry *e, void *ctx)
{
    struct tally *t = ctx;
    t->valid += e->valid;
    t->invalid += !e->valid;
    t->bytes += e->bytes;
    if (t->list) {
        json_t *o = json_pack("{s:s, s:I, s:I, s:b, s:s}", "key", e->key, "bytes", (json_int_t)e->bytes,
                              "mtime", (json_int_t)e->mtime, "valid", e->valid, "why", e->why);
        if (!o || json_array_append_new(t->list, o) != 0)
            return tn_set_error(TN_ENOMEM, "out of memory");
    } else if (t->print) {
        char when[32] = "-";
        time_t m = (time_t)e->mtime;
        struct tm tm;
        if (e->mtime && localtime_r(&m, &tm))
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
        printf("%s  %10" PRId64 "  %s  %s%s\n", e->key, e->bytes, when, e->valid ? "valid" : "invalid: ",
               e->why);
    }
    return 0;
}

/* Prints a JSON object and releases it. */
static int print_json(json_t *o)
{
    int rc = o && json_dumpf(o, stdout, JSON_INDENT(2)) == 0 ? 0 : -1;
    json_decref(o);
    if (rc < 0)
        return tn_set_error(TN_ENOMEM, "out of memory");
    putchar('\n');
    return 0;
}

int tc_cache(const char *action)
{
    bool ls = !strcmp(action, "ls"), stats = !strcmp(action, "stats"), clear = !strcmp(action, "clear");
    if (!ls && !stats && !clear)
        tc_usage_error("cache: unknown action '%s' (ls, stats or clear)", action);
    if (clear && tc.json)
        tc_usage_error("%s", "--json does not apply to 'cache clear'");
    char dir[4096];
    if (tn_compile_cache_dir(tc.cache_dir, dir, sizeof dir) < 0)
        return tc_fail();
    if (clear) {
        int n = tn_compile_cache_clear(dir);
        if (n < 0)
            return tc_fail();
        printf("removed %d entr%s from %s\n", n, n == 1 ? "y" : "ies", dir);
        return tn_stdout_flush() < 0 ? tc_fail() : 0;
    }
    struct tally t = {.print = ls};
    if (ls && tc.json && !(t.list = json_array()))
        return tn_set_error(TN_ENOMEM, "out of memory"), tc_fail();
    int n = tn_compile_cache_list(dir, each, &t);
    int rc = 0;
    if (n < 0)
        rc = -1;
    else if (t.list)
        rc = print_json(json_pack("{s:s, s:O}", "folder", dir, "entries", t.list));
    else if (stats && tc.json)
        rc = print_json(json_pack("{s:s, s:i, s:i, s:i, s:I}", "folder", dir, "entries", n, "valid", t.valid,
                                  "invalid", t.invalid, "bytes", (json_int_t)t.bytes));
    else if (stats)
        printf("folder: %s\nentries: %d (%d valid, %d invalid)\nbytes: %" PRId64 "\n", dir, n, t.valid,
               t.invalid, t.bytes);
    json_decref(t.list);
    if (rc < 0 || tn_stdout_flush() < 0)
        return tc_fail();
    return 0;
}
