/*
 * bin/ttest/plan.c: the durations file and the plan built from it.
 *
 * The durations file holds one line per test, tab-separated: name, runs,
 * mean seconds, last result; lines starting with '#' are comments.  Every
 * run merges its results in (a running mean that weighs the last ten runs)
 * and rewrites the file through a temporary file and a rename, so a crash
 * leaves the old file whole.
 *
 * Sharding is greedy longest-processing-time first: tests sorted by expected
 * time (longest first, ties by name), each given to the shard whose expected
 * total is smallest (ties to the lower index).  It reads nothing but the
 * test list and the durations file, so every shard computes the same plan.
 * A test with no record is expected to take the mean of those with one.
 */
#include "ttest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rec_cmp(const void *a, const void *b)
{
    return strcmp(((const struct tt_record *)a)->name, ((const struct tt_record *)b)->name);
}

static struct tt_record *find(const struct tt_durations *d, const char *name)
{
    struct tt_record key = {.name = (char *)name};
    return d->n ? bsearch(&key, d->rec, d->n, sizeof(key), rec_cmp) : NULL;
}

int tt_durations_read(const char *path, struct tt_durations *d)
{
    memset(d, 0, sizeof(*d));
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return 0;
        tt_warn("%s: %m", path);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    int rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (!len || line[0] == '#')
            continue;
        /* name may hold anything but a tab; the three fields after it not. */
        char *t3 = strrchr(line, '\t');
        char *t2 = NULL, *t1 = NULL;
        if (t3) {
            *t3 = '\0';
            t2 = strrchr(line, '\t');
        }
        if (t2) {
            *t2 = '\0';
            t1 = strrchr(line, '\t');
        }
        char *e1, *e2;
        long runs = t1 ? strtol(t1 + 1, &e1, 10) : 0;
        double mean = t2 ? strtod(t2 + 1, &e2) : 0;
        if (!t1 || t1 == line || *e1 || *e2 || runs < 0 || !(mean >= 0) || mean > 1e9) {
            tt_warn("%s:%ld: expected NAME<tab>RUNS<tab>SECONDS<tab>RESULT", path, lineno);
            rc = -1;
            break;
        }
        *t1 = '\0';
        d->rec = tt_xrealloc(d->rec, (d->n + 1) * sizeof(*d->rec));
        d->rec[d->n++] = (struct tt_record){tt_xstrdup(line), runs, mean, tt_xstrdup(t3 + 1)};
    }
    free(line);
    fclose(f);
    qsort(d->rec, d->n, sizeof(*d->rec), rec_cmp);
    return rc;
}

int tt_durations_update(const char *path, struct tt_durations *d, struct tt_test *tests, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct tt_test *t = &tests[i];
        if (t->final == TT_NOTRUN || t->nattempts == 0 || t->final == TT_ERROR)
            continue;
        double secs = t->attempts[t->nattempts - 1].seconds;
        struct tt_record *r = find(d, t->name);
        if (!r) {
            d->rec = tt_xrealloc(d->rec, (d->n + 1) * sizeof(*d->rec));
            d->rec[d->n++] = (struct tt_record){tt_xstrdup(t->name), 0, 0, NULL};
            qsort(d->rec, d->n, sizeof(*d->rec), rec_cmp);
            r = find(d, t->name);
        }
        r->runs++;
        r->mean += (secs - r->mean) / (double)(r->runs < 10 ? r->runs : 10);
        free(r->last);
        r->last = tt_xstrdup(tt_status_name(t->final));
    }

    char *tmp = tt_xasprintf("%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        tt_warn("%s: cannot write the durations: %m", path);
        free(tmp);
        return -1;
    }
    FILE *f = fdopen(fd, "w");
    fprintf(f, "# ttest durations: name, runs, mean seconds, last result (tab-separated)\n");
    for (size_t i = 0; i < d->n; i++)
        fprintf(f, "%s\t%ld\t%.3f\t%s\n", d->rec[i].name, d->rec[i].runs, d->rec[i].mean,
                d->rec[i].last ? d->rec[i].last : "-");
    int bad = fflush(f) != 0 || fsync(fd) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        tt_warn("%s: cannot write the durations: %m", path);
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}

static int by_length(const void *a, const void *b)
{
    const struct tt_test *x = a, *y = b;
    if (x->expected != y->expected)
        return x->expected > y->expected ? -1 : 1;
    int c = strcmp(x->name, y->name);
    return c ? c : x->repeat_index - y->repeat_index;
}

static const struct tt_opts *sort_opts;

static int by_run_order(const void *a, const void *b)
{
    const struct tt_test *x = a, *y = b;
    if (x->shard != y->shard)
        return x->shard - y->shard;
    if (x->serial != y->serial)
        return (x->serial ? 1 : -1) * (sort_opts->serial_first ? -1 : 1);
    if (sort_opts->failed_first && x->failed_last != y->failed_last)
        return x->failed_last ? -1 : 1;
    return by_length(a, b);
}

void tt_plan(struct tt_test *tests, size_t n, const struct tt_durations *d, const struct tt_opts *o)
{
    double known_sum = 0;
    size_t known_n = 0;
    for (size_t i = 0; i < n; i++) {
        const struct tt_record *r = find(d, tests[i].name);
        tests[i].known = r && r->runs > 0;
        tests[i].expected = tests[i].known ? r->mean : 0;
        tests[i].failed_last = r && r->last &&
                               (!strcmp(r->last, "fail") || !strcmp(r->last, "timeout") || !strcmp(r->last, "error"));
        if (tests[i].known) {
            known_sum += r->mean;
            known_n++;
        }
    }
    double unknown = known_n ? known_sum / (double)known_n : 1.0;
    for (size_t i = 0; i < n; i++)
        if (!tests[i].known)
            tests[i].expected = unknown;

    qsort(tests, n, sizeof(*tests), by_length);
    double *load = calloc((size_t)o->shards, sizeof(double));
    if (!load)
        tt_die(2, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int best = 0;
        for (int s = 1; s < o->shards; s++)
            if (load[s] < load[best])
                best = s;
        load[best] += tests[i].expected;
        tests[i].shard = best + 1;
    }
    free(load);
    sort_opts = o;
    qsort(tests, n, sizeof(*tests), by_run_order);
}
