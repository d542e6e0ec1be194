/*
 * bin/ttest/manifest.c: tests listed in a JSON manifest.
 *
 * The manifest is an array of test objects, or an object whose "tests" is
 * that array.  A test object has "name" and "command" (a string run by
 * /bin/sh -c, or an array of strings run as is), and may have "timeout"
 * (seconds), "serial" (bool), "labels" (array of strings), "cwd" (a folder,
 * relative to the manifest's own folder, which is also the default) and
 * "env" (an object of strings).  Unknown fields are errors, so a misspelt
 * "serail" never silently runs a test in the pool.
 */
#include "ttest.h"

#include <jansson.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>

static char **string_array(json_t *a, const char *path, size_t idx, const char *field)
{
    size_t n = json_array_size(a);
    char **v = tt_xmalloc((n + 1) * sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(a, i);
        if (!json_is_string(s)) {
            tt_warn("%s: tests[%zu].%s[%zu] is not a string", path, idx, field, i);
            for (size_t j = 0; j < i; j++)
                free(v[j]);
            free(v);
            return NULL;
        }
        v[i] = tt_xstrdup(json_string_value(s));
    }
    v[n] = NULL;
    return v;
}

static int load_one(json_t *o, const char *path, const char *dir, size_t idx, struct tt_test *t)
{
    memset(t, 0, sizeof(*t));
    if (!json_is_object(o)) {
        tt_warn("%s: tests[%zu] is not an object", path, idx);
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        if (strcmp(key, "name") == 0) {
            if (!json_is_string(v) || !*json_string_value(v)) {
                tt_warn("%s: tests[%zu].name must be a non-empty string", path, idx);
                return -1;
            }
            t->name = tt_xstrdup(json_string_value(v));
        } else if (strcmp(key, "command") == 0) {
            if (json_is_string(v)) {
                t->argv = tt_xmalloc(4 * sizeof(char *));
                t->argv[0] = tt_xstrdup("/bin/sh");
                t->argv[1] = tt_xstrdup("-c");
                t->argv[2] = tt_xstrdup(json_string_value(v));
                t->argv[3] = NULL;
            } else if (json_is_array(v) && json_array_size(v) > 0) {
                if (!(t->argv = string_array(v, path, idx, "command")))
                    return -1;
            } else {
                tt_warn("%s: tests[%zu].command must be a string or a non-empty array of strings", path,
                        idx);
                return -1;
            }
        } else if (strcmp(key, "timeout") == 0) {
            if (!json_is_number(v) || json_number_value(v) <= 0) {
                tt_warn("%s: tests[%zu].timeout must be a positive number of seconds", path, idx);
                return -1;
            }
            t->timeout = json_number_value(v);
        } else if (strcmp(key, "serial") == 0) {
            if (!json_is_boolean(v)) {
                tt_warn("%s: tests[%zu].serial must be true or false", path, idx);
                return -1;
            }
            t->serial = json_is_true(v);
        } else if (strcmp(key, "labels") == 0) {
            if (!json_is_array(v)) {
                tt_warn("%s: tests[%zu].labels must be an array of strings", path, idx);
                return -1;
            }
            if (!(t->labels = string_array(v, path, idx, "labels")))
                return -1;
        } else if (strcmp(key, "cwd") == 0) {
            if (!json_is_string(v)) {
                tt_warn("%s: tests[%zu].cwd must be a string", path, idx);
                return -1;
            }
            const char *c = json_string_value(v);
            t->cwd = c[0] == '/' ? tt_xstrdup(c) : tt_xasprintf("%s/%s", dir, c);
        } else if (strcmp(key, "env") == 0) {
            if (!json_is_object(v)) {
                tt_warn("%s: tests[%zu].env must be an object of strings", path, idx);
                return -1;
            }
            size_t n = json_object_size(v), i = 0;
            t->env = tt_xmalloc((n + 1) * sizeof(char *));
            const char *k;
            json_t *s;
            json_object_foreach(v, k, s) {
                if (!json_is_string(s) || !*k || strchr(k, '=')) {
                    tt_warn("%s: tests[%zu].env.%s must be a string with a name without '='", path, idx, k);
                    t->env[i] = NULL;
                    return -1;
                }
                t->env[i++] = tt_xasprintf("%s=%s", k, json_string_value(s));
            }
            t->env[i] = NULL;
        } else {
            tt_warn("%s: tests[%zu]: unknown field \"%s\"", path, idx, key);
            return -1;
        }
    }
    if (!t->name || !t->argv) {
        tt_warn("%s: tests[%zu] needs a \"name\" and a \"command\"", path, idx);
        return -1;
    }
    if (!t->cwd)
        t->cwd = tt_xstrdup(dir);
    return 0;
}

int tt_manifest_load(const char *path, struct tt_test **tests, size_t *n)
{
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        tt_warn("%s:%d: %s", path, err.line, err.text);
        return -1;
    }
    json_t *list = json_is_object(root) ? json_object_get(root, "tests") : root;
    if (!json_is_array(list)) {
        tt_warn("%s: expected an array of tests, or an object with \"tests\"", path);
        json_decref(root);
        return -1;
    }
    char *copy = tt_xstrdup(path);
    char *dir = tt_xstrdup(dirname(copy));
    free(copy);
    int rc = 0;
    size_t count = json_array_size(list);
    *tests = tt_xrealloc(*tests, (*n + count) * sizeof(**tests));
    for (size_t i = 0; i < count; i++) {
        if (load_one(json_array_get(list, i), path, dir, i, &(*tests)[*n]) < 0) {
            rc = -1;
            break;
        }
        (*n)++;
    }
    free(dir);
    json_decref(root);
    return rc;
}
