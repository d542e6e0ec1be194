/*
 * bin/ttest/discover.c: turning the paths on the command line into tests.
 *
 * A path names a Bats file (*.bats, run as `bats --tap FILE`), a pytest
 * file (test_*.py or *_test.py, pytest's own default names), a JSON manifest
 * (*.json), an executable that prints TAP, or a folder.  A folder is
 * searched in name order for *.bats files, pytest files, manifests named
 * *.ttest.json and executable files; its subfolders only with -r, as prove
 * does (recursing by default, as pytest does, would take every program of
 * a build tree for a test).  Hidden entries and libtool's and Automake's
 * folders (.libs, .deps) are left out.
 */
#include "ttest.h"

#include <dirent.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The name reports and the durations file use: the path without "./" and
 * without the first --strip prefix it starts with, so an out-of-tree build
 * names its tests as the source tree does. */
static char *test_name(const char *path, const struct tt_opts *o)
{
    for (size_t i = 0; i < o->nstrip; i++) {
        size_t n = strlen(o->strip[i]);
        /* A whole leading folder only: "../.." strips "../../x", not "../..x". */
        bool whole = n && (o->strip[i][n - 1] == '/' || path[n] == '/');
        if (whole && strncmp(path, o->strip[i], n) == 0 && path[n]) {
            path += n;
            while (*path == '/')
                path++;
            break;
        }
    }
    while (path[0] == '.' && path[1] == '/') {
        path += 2;
        while (*path == '/')
            path++;
    }
    return tt_xstrdup(path);
}

static void add(struct tt_test **tests, size_t *n, char *name, char **argv, enum tt_kind kind)
{
    *tests = tt_xrealloc(*tests, (*n + 1) * sizeof(**tests));
    struct tt_test *t = &(*tests)[(*n)++];
    memset(t, 0, sizeof(*t));
    t->name = name;
    t->argv = argv;
    t->kind = kind;
}

static bool is_pytest_file(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return ends_with(base, ".py") && (strncmp(base, "test_", 5) == 0 || ends_with(base, "_test.py"));
}

static int add_file(const char *path, const struct tt_opts *o, struct tt_test **tests, size_t *n,
                    bool explicit)
{
    if (ends_with(path, ".bats")) {
        char **argv = tt_xmalloc(4 * sizeof(char *));
        argv[0] = tt_xstrdup(o->bats);
        argv[1] = tt_xstrdup("--tap");
        argv[2] = tt_xstrdup(path);
        argv[3] = NULL;
        add(tests, n, test_name(path, o), argv, TT_KIND_BATS);
        return 0;
    }
    if (is_pytest_file(path)) {
        add(tests, n, test_name(path, o), tt_pytest_argv(path, o), TT_KIND_PYTEST);
        return 0;
    }
    if (explicit ? ends_with(path, ".json") : ends_with(path, ".ttest.json"))
        return tt_manifest_load(path, tests, n);
    if (access(path, X_OK) == 0) {
        char **argv = tt_xmalloc(2 * sizeof(char *));
        /* A bare name would be searched for on PATH by execvp. */
        argv[0] = strchr(path, '/') ? tt_xstrdup(path) : tt_xasprintf("./%s", path);
        argv[1] = NULL;
        add(tests, n, test_name(path, o), argv, TT_KIND_PROGRAM);
        return 0;
    }
    if (explicit) {
        tt_warn("%s: not a Bats file, a pytest file, a manifest or an executable", path);
        return -1;
    }
    return 0;
}

static int walk(const char *dir, const struct tt_opts *o, struct tt_test **tests, size_t *n)
{
    struct dirent **ents;
    int m = scandir(dir, &ents, NULL, alphasort);
    if (m < 0) {
        tt_warn("%s: cannot read the folder: %m", dir);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < m; i++) {
        const char *e = ents[i]->d_name;
        if (rc == 0 && e[0] != '.') {
            char *p = ends_with(dir, "/") ? tt_xasprintf("%s%s", dir, e) : tt_xasprintf("%s/%s", dir, e);
            struct stat st;
            if (stat(p, &st) == 0) {
                if (S_ISDIR(st.st_mode)) {
                    if (o->recurse)
                        rc = walk(p, o, tests, n);
                } else if (S_ISREG(st.st_mode) && ends_with(e, ".py") && !is_pytest_file(e)) {
                    /* conftest.py, helpers: pytest's, not tests */
                } else if (S_ISREG(st.st_mode) && fnmatch("*.[oa]", e, 0) != 0 && !ends_with(e, ".la") &&
                           !ends_with(e, ".lo") && !ends_with(e, ".so") && !ends_with(e, ".log") &&
                           !ends_with(e, ".trs")) {
                    rc = add_file(p, o, tests, n, false);
                }
            }
            free(p);
        }
        free(ents[i]);
    }
    free(ents);
    return rc;
}

int tt_discover(const char *path, const struct tt_opts *o, struct tt_test **tests, size_t *n)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        tt_warn("%s: %m", path);
        return -1;
    }
    if (S_ISDIR(st.st_mode))
        return walk(path, o, tests, n);
    return add_file(path, o, tests, n, true);
}
