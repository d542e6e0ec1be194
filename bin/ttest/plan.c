/*
 * bin/ttest/plan.c: the durations file and the plan built from it.
 *
 * The durations file holds one line per test, tab-separated: name, runs,
 * mean seconds, last result; lines starting with '#' are comments.  Every
 * run merges its results in (a running mean that weighs the last ten runs)
 * and rewrites the file through tn_out (a temporary file renamed over the
 * target, through a symlink; written directly when it is a device or "-"),
 * so a crash leaves the old file whole.
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

#include <tensor/core.h>

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

int tt_durations_update(struct tn_out *out, struct tt_durations *d, struct tt_test *tests, size_t n)
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

    FILE *f = tn_out_file(out);
    fprintf(f, "# ttest durations: name, runs, mean seconds, last result (tab-separated)\n");
    for (size_t i = 0; i < d->n; i++)
        fprintf(f, "%s\t%ld\t%.3f\t%s\n", d->rec[i].name, d->rec[i].runs, d->rec[i].mean,
                d->rec[i].last ? d->rec[i].last : "-");
    if (tn_out_commit(out, true) != TN_OK) {
        tt_warn("cannot write the durations: %s", tn_last_error());
        return -1;
    }
    return 0;
}

bool tt_durations_failed(const struct tt_durations *d, const char *name)
{
    const struct tt_record *r = find(d, name);
    return r && r->last && (!strcmp(r->last, "fail") || !strcmp(r->last, "timeout") || !strcmp(r->last, "error"));
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
        tests[i].failed_last = tt_durations_failed(d, tests[i].name);
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

/* splitmix64: small, and the same sequence on every machine for a seed. */
static unsigned long long next_random(unsigned long long *state)
{
    unsigned long long z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void tt_shuffle(struct tt_test *tests, size_t n, const struct tt_opts *o)
{
    unsigned long long state = o->seed;
    /* Fisher-Yates within each run of the same shard and kind (serial or
     * not), so shards stay what the plan made them. */
    for (size_t lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo + 1; hi < n && tests[hi].shard == tests[lo].shard && tests[hi].serial == tests[lo].serial; hi++)
            ;
        for (size_t i = hi - 1; i > lo; i--) {
            size_t j = lo + (size_t)(next_random(&state) % (unsigned long long)(i - lo + 1));
            struct tt_test tmp = tests[i];
            tests[i] = tests[j];
            tests[j] = tmp;
        }
    }
}
