/*
 * bin/tckpt/ls.c: tckpt ls (one row per tensor, with storages and offsets)
 * and tckpt verify (a full structural check), over one or more files.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include <tensor/dcp.h>

#include "tckpt.h"

/* ------------------------------------------------------------------ ls */

/* Appends the decimal digits of v at p; returns the end. */
static char *put_int(char *p, long long v)
{
    char tmp[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do
        tmp[n++] = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        *p++ = '-';
    while (n)
        *p++ = tmp[--n];
    return p;
}

/* s padded with spaces to `width`, left- or right-aligned (longer s whole). */
static char *put_padded(char *p, const char *s, size_t len, size_t width, bool right)
{
    size_t pad = len < width ? width - len : 0;
    if (right) {
        memset(p, ' ', pad);
        p += pad;
    }
    memcpy(p, s, len);
    p += len;
    if (!right) {
        memset(p, ' ', pad);
        p += pad;
    }
    return p;
}

/* One row of the text listing, formatted by hand: printf's "%-*s" takes
 * glibc's slow positional path, which was a third of the time `tckpt ls`
 * took over 20,000 tensors.  Same columns as the header's printf. */
static void ls_row(char *line, size_t w, size_t dw, const char *name, const struct tn_tensor *t,
                   size_t storage)
{
    char shape[TN_MAX_DIMS * 22 + 4], num[24], *q = shape, *p = line;
    *q++ = '[';
    for (int d = 0; d < t->ndim; d++) {
        if (d) {
            *q++ = ',';
            *q++ = ' ';
        }
        q = put_int(q, (long long)t->sizes[d]);
    }
    *q++ = ']';
    const char *dt = tn_dtype_name(t->dtype);
    p = put_padded(p, name, strlen(name), w, false);
    *p++ = ' ';
    *p++ = ' ';
    p = put_padded(p, dt, strlen(dt), dw, false);
    *p++ = ' ';
    p = put_padded(p, shape, (size_t)(q - shape), 18, false);
    *p++ = ' ';
    p = put_padded(p, num, (size_t)(put_int(num, (long long)tn_nbytes(t)) - num), 12, true);
    *p++ = ' ';
    p = put_padded(p, num, (size_t)(put_int(num, (long long)storage) - num), 7, true);
    *p++ = ' ';
    p = put_padded(p, num, (size_t)(put_int(num, (long long)t->offset) - num), 8, true);
    *p++ = '\n';
    fwrite(line, 1, (size_t)(p - line), stdout);
}

/* The input's value for a listing: a DCP folder's tensors from its
 * .metadata alone (tn_dcp_load_meta: sizes and dtypes, no tensor bytes
 * read), any other input loaded whole.  0, or -1 with an error. */
static int ls_load(struct input *in)
{
    struct tn_dcp *d = tn_io_file_dcp(in->f);
    if (!d)
        return input_load(in);
    in->v = tn_dcp_load_meta(d, false);
    return in->v ? 0 : -1;
}

/* Whether the last listing's tree may be left to the process's exit:
 * releasing a 10,000-key DCP tree node by node is a fifth of tckpt ls's
 * time, and exit returns its memory at once.  Sanitizer builds free it
 * (TN_SANITIZE), so that a leak there is still one. */
#if defined(TN_SANITIZE) || defined(__SANITIZE_ADDRESS__)
#define LS_LEAVE_LAST 0
#else
#define LS_LEAVE_LAST 1
#endif

/* One file's listing; 0, or 2 after a message when it cannot be read.
 * `last`: the process ends after it (its tree may be left to the exit). */
static int ls_one(const char *path, bool last)
{
    struct input in;
    if (input_open(&in, path) < 0 || ls_load(&in) < 0) {
        fprintf(stderr, "tckpt: %s\n", tn_last_error());
        input_free(&in);
        return 2;
    }
    const char *format = in.format;
    struct entries l = {0};
    collect_or_die(in.v, &l);
    /* Storages numbered in order of first use, as torch.save keys them. */
    size_t cap = 16;
    while (cap < 2 * l.n)
        cap *= 2;
    struct tn_storage **st = calloc(cap, sizeof *st); /* open addressing by pointer */
    size_t *stid = calloc(cap, sizeof *stid);
    size_t *sid = calloc(l.n + 1, sizeof *sid);
    if (!st || !stid || !sid) {
        fprintf(stderr, "tckpt: out of memory\n");
        exit(2);
    }
    size_t nst = 0;
    uint64_t total = 0, stored = 0;
    for (size_t i = 0; i < l.n; i++) {
        struct tn_storage *s = l.e[i].t->storage;
        size_t j = ((uintptr_t)s >> 4) * 0x9e3779b97f4a7c15ull & (cap - 1);
        while (st[j] && st[j] != s)
            j = (j + 1) & (cap - 1);
        if (!st[j]) {
            st[j] = s;
            stid[j] = nst++;
            stored += s->nbytes;
        }
        sid[i] = stid[j];
        total += tn_nbytes(l.e[i].t);
    }
    char shape[256];
    if (opt.json) {
        printf("{\"file\":");
        json_string_out(stdout, path);
        printf(",\"format\":\"%s\",\"tensors\":[", format);
        for (size_t i = 0; i < l.n; i++) {
            struct tn_tensor *t = l.e[i].t;
            printf("%s{\"name\":", i ? "," : "");
            json_string_out(stdout, l.e[i].name);
            printf(",\"dtype\":\"%s\",\"shape\":%s", tn_dtype_name(t->dtype),
                   tn_shape_format(t->sizes, t->ndim, shape, sizeof shape));
            printf(",\"stride\":%s,\"bytes\":%zu,\"storage\":%zu,\"offset\":%lld,"
                   "\"requires_grad\":%s,\"parameter\":%s}",
                   tn_shape_format(t->strides, t->ndim, shape, sizeof shape), tn_nbytes(t), sid[i],
                   (long long)t->offset, t->requires_grad ? "true" : "false",
                   t->flags & TN_TENSOR_PARAMETER ? "true" : "false");
        }
        printf("]");
        if (in.meta) {
            printf(",\"metadata\":");
            json_value_out(in.meta);
        }
        printf(",\"total_tensors\":%zu,\"total_bytes\":%llu,\"storages\":%zu,"
               "\"storage_bytes\":%llu}\n",
               l.n, (unsigned long long)total, nst, (unsigned long long)stored);
    } else {
        /* the dtype column widens only for the long float8 names */
        size_t w = 4, dw = 10;
        for (size_t i = 0; i < l.n; i++) {
            if (strlen(l.e[i].name) > w)
                w = strlen(l.e[i].name);
            if (strlen(tn_dtype_name(l.e[i].t->dtype)) > dw)
                dw = strlen(tn_dtype_name(l.e[i].t->dtype));
        }
        printf("%-*s  %-*s %-18s %12s %7s %8s\n", (int)w, "NAME", (int)dw, "DTYPE", "SHAPE",
               "BYTES", "STORAGE", "OFFSET");
        char *line = malloc(w + dw + TN_MAX_DIMS * 22 + 128);
        if (!line) {
            fprintf(stderr, "tckpt: out of memory\n");
            exit(2);
        }
        for (size_t i = 0; i < l.n; i++)
            ls_row(line, w, dw, l.e[i].name, l.e[i].t, sid[i]);
        free(line);
        char a[64], b[64];
        printf("%s, %llu bytes; %s, %llu bytes stored\n", plural(l.n, "tensor", a, sizeof a),
               (unsigned long long)total, plural(nst, "storage", b, sizeof b),
               (unsigned long long)stored);
    }
    free(st);
    free(stid);
    free(sid);
    entries_free(&l);
    if (last && LS_LEAVE_LAST)
        in.v = NULL; /* left to the exit */
    input_free(&in);
    return 0;
}

int cmd_ls(char **files, int n)
{
    int rc = 0;
    for (int i = 0; i < n; i++) {
        /* several files: a heading each, as ls(1) heads folders; JSON: one
         * object a line */
        if (n > 1 && !opt.json)
            printf("%s%s:\n", i ? "\n" : "", files[i]);
        int r = ls_one(files[i], i == n - 1);
        if (r > rc)
            rc = r;
    }
    return rc;
}


/* -------------------------------------------------------------- verify */

/* What torch.load ignores, verify reports: CRCs and duplicate names.
 * Returns the number of problems found (each printed). */
static int verify_zip(const char *path, struct tn_zip *z)
{
    int problems = 0;
    struct progress bar = {.what = "reading"};
    uint64_t done = 0;
    for (size_t i = 0; i < tn_zip_count(z); i++)
        bar.total += tn_zip_entry_at(z, i)->size;
    bar.on = progress_wanted(bar.total);
    for (size_t i = 0; i < tn_zip_count(z); i++) {
        const struct tn_zip_entry *e = tn_zip_entry_at(z, i);
        progress_draw(done += e->size, &bar);
        if (tn_zip_find(z, e->name) != (long)i) {
            printf("%s: %s: duplicate entry name\n", path, e->name);
            problems++;
        }
        void *d;
        size_t n;
        if (tn_zip_read(z, i, 0, &d, &n) < 0) {
            printf("%s\n", tn_last_error());
            problems++;
            continue;
        }
        uint32_t crc = tn_zip_crc32(0, d, n);
        free(d);
        if (e->crc != crc && e->crc != 0) {
            printf("%s: %s: CRC-32 is %08x but the entry records %08x\n", path, e->name, crc,
                   e->crc);
            problems++;
        }
    }
    progress_end(&bar);
    return problems;
}

/* 0 ok, 1 problems found (printed on stdout), 2 unreadable (stderr). */
static int verify_one(const char *path)
{
    char a[64];
    /* A writer killed mid-write leaves a temporary beside the file. */
    int stale = strcmp(path, "-") ? tn_out_clean(path) : 0;
    if (stale > 0)
        printf("%s: removed %s that an interrupted write left\n", path,
               plural((size_t)stale, "stale temporary file", a, sizeof a));
    struct input in;
    if (input_open(&in, path) < 0) {
        int io = tn_last_status() == TN_EIO;
        fprintf(io ? stderr : stdout, "%s%s\n", io ? "tckpt: " : "", tn_last_error());
        input_free(&in);
        return io ? 2 : 1;
    }
    int problems = 0;
    if (tn_io_file_zip(in.f))
        problems += verify_zip(path, tn_io_file_zip(in.f));
    for (size_t i = 0; i < tn_io_file_shards(in.f); i++) {
        /* every shard of an index, whole */
        struct tn_io_file *s = tn_io_file_open(tn_io_file_shard(in.f, i));
        if (s && tn_io_file_zip(s))
            problems += verify_zip(tn_io_file_shard(in.f, i), tn_io_file_zip(s));
        tn_io_file_close(s);
    }
    if (input_load(&in) < 0) {
        int io = tn_last_status() == TN_EIO;
        fprintf(io ? stderr : stdout, "%s%s\n", io ? "tckpt: " : "", tn_last_error());
        input_free(&in);
        return io ? 2 : 1;
    }
    struct entries l = {0};
    collect_or_die(in.v, &l);
    if (!problems)
        printf("%s: ok (%s, %s)\n", path, in.format, plural(l.n, "tensor", a, sizeof a));
    entries_free(&l);
    input_free(&in);
    return problems ? 1 : 0;
}

int cmd_verify(char **files, int n)
{
    int rc = 0;
    for (int i = 0; i < n; i++) {
        int r = verify_one(files[i]);
        if (r > rc)
            rc = r;
    }
    return rc;
}
