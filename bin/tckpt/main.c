/*
 * bin/tckpt/main.c: tckpt's command line: ls, show, get, verify, convert
 * and diff over torch checkpoints, safetensors, .npz and .npy files, all
 * through libtensor's io module (the format is found from the content).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tensor/core.h>
#include <tensor/io.h>

static const char usage_text[] =
    "Usage: tckpt COMMAND [OPTION]... FILE...\n"
    "Inspect, extract, check, convert and compare checkpoints: PyTorch's zip\n"
    "format (.pt/.pth/.bin), safetensors, .npz and .npy, found from the content.\n"
    "Nothing in a file is ever run: checkpoints load as torch.load(weights_only=True).\n"
    "\n"
    "Commands:\n"
    "  ls FILE                  one row per tensor: name, dtype, shape, bytes,\n"
    "                           storage and offset; totals at the end\n"
    "  show FILE [KEY]          the nested structure as a tree, or one tensor as\n"
    "                           PyTorch prints it, with statistics\n"
    "  get FILE KEY -o OUT.npy  write one tensor as .npy ('-' for standard output)\n"
    "  verify FILE              full structural check; lists each problem\n"
    "  convert IN OUT           between torch zip, safetensors and npz\n"
    "  diff A B                 compare names, dtypes, shapes and values\n"
    "  scan [-r] FILE...|-      audit files for globals outside weights_only's\n"
    "                           allowlist and anomalies (see tckpt scan --help)\n"
    "\n"
    "Options:\n"
    "      --json               ls, diff: print one JSON object\n"
    "  -o, --output=FILE        get: where to write the tensor\n"
    "      --to=FORMAT          convert: torch, safetensors or npz (default: from\n"
    "                           OUT's extension)\n"
    "      --dtype=DTYPE        convert: cast floating tensors to bf16, f16, f32 or f64\n"
    "      --layout=LAYOUT      convert: torch2 (default) or torch1 (PyTorch 1.13's)\n"
    "      --torch1             load with PyTorch 1.13's weights_only allowlist\n"
    "      --atol=X             diff: absolute tolerance (default 0)\n"
    "      --rtol=X             diff: relative tolerance (default 0)\n"
    "  -h, --help               print this help and exit\n"
    "  -V, --version            print the version and exit\n"
    "\n"
    "Exit status: 0 success; 1 verify found problems or diff found differences;\n"
    "2 a usage error or an unreadable, corrupt or unsafe input.\n"
    "See tckpt(1) and tensorkit-checkpoint(5) for more.\n";

enum { OPT_JSON = 256, OPT_TO, OPT_DTYPE, OPT_LAYOUT, OPT_TORCH1, OPT_ATOL, OPT_RTOL };

static const struct option long_opts[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"output", required_argument, NULL, 'o'},
    {"to", required_argument, NULL, OPT_TO},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"layout", required_argument, NULL, OPT_LAYOUT},
    {"torch1", no_argument, NULL, OPT_TORCH1},
    {"atol", required_argument, NULL, OPT_ATOL},
    {"rtol", required_argument, NULL, OPT_RTOL},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static struct {
    bool json, torch1;
    const char *output, *to;
    enum tn_dtype dtype;
    enum tn_ckpt_layout layout;
    double atol, rtol;
} opt = {.dtype = TN_DTYPE_UNSET};

_Noreturn static void usage_error(const char *fmt, const char *arg)
{
    fputs("tckpt: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\nTry 'tckpt --help' for more information.\n", stderr);
    exit(2);
}

/* An input or output failure: the library's message names the file. */
_Noreturn static void die_input(void)
{
    fprintf(stderr, "tckpt: %s\n", tn_last_error());
    exit(2);
}

static double parse_double(const char *s, const char *what)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0))
        usage_error(what, s);
    return v;
}

/* ------------------------------------------------------------ loading */

/* Loads any supported file as a value; a bare .npy becomes {"<stem>": t}. */
static struct tn_value *load_any(const char *path, const char **format)
{
    const char *f = tn_io_detect(path);
    if (!f)
        return NULL;
    if (format)
        *format = f;
    if (!strcmp(f, "torch")) {
        struct tn_load_options o = {.allowlist = opt.torch1 ? TN_ALLOW_TORCH1 : TN_ALLOW_CURRENT};
        return tn_load(path, &o);
    }
    if (!strcmp(f, "safetensors"))
        return tn_st_load(path, NULL);
    if (!strcmp(f, "npz"))
        return tn_npz_load(path);
    if (!strcmp(f, "npy")) {
        struct tn_tensor *t = tn_npy_load(path);
        if (!t)
            return NULL;
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        size_t n = strlen(base);
        if (n > 4 && !strcmp(base + n - 4, ".npy"))
            n -= 4;
        struct tn_value *d = tn_value_odict();
        tn_value_set(d, tn_value_str_n(base, n), tn_value_tensor(t));
        tn_release(t);
        return d;
    }
    tn_set_error(TN_EFORMAT, "%s: a legacy (pre-1.6, non-zip) torch checkpoint: not supported; "
                 "re-save it with torch.save in PyTorch 1.6 or later", path);
    return NULL;
}

static struct tn_value *load_or_die(const char *path, const char **format)
{
    struct tn_value *v = load_any(path, format);
    if (!v)
        die_input();
    return v;
}

/* Every tensor with its path, in order. */
struct entry {
    char *name;
    struct tn_tensor *t;
};
struct entries {
    struct entry *e;
    size_t n, cap;
    size_t *sorted; /* indices by name, built by find() on first use */
};

static int collect(const char *path, struct tn_tensor *t, void *ctx)
{
    struct entries *l = ctx;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->e = realloc(l->e, l->cap * sizeof *l->e);
        if (!l->e) {
            tn_set_error(TN_ENOMEM, "out of memory");
            return -1;
        }
    }
    l->e[l->n].name = strdup(path);
    l->e[l->n].t = t;
    l->n++;
    return 0;
}

static void entries_free(struct entries *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->e[i].name);
    free(l->e);
    free(l->sorted);
}

static const struct entries *sort_base;
static int by_name(const void *a, const void *b)
{
    int c = strcmp(sort_base->e[*(const size_t *)a].name, sort_base->e[*(const size_t *)b].name);
    /* Equal names (a dict key "a.b" and a nested "a"/"b"): first one first. */
    return c ? c : (*(const size_t *)a > *(const size_t *)b) - (*(const size_t *)a < *(const size_t *)b);
}

/* The first tensor named `name`: binary search over a sorted index, so
 * diff stays fast with 20,000 tensors. */
static const struct entry *find(struct entries *l, const char *name)
{
    if (!l->sorted) {
        l->sorted = malloc((l->n + 1) * sizeof *l->sorted);
        if (!l->sorted) {
            fprintf(stderr, "tckpt: out of memory\n");
            exit(2);
        }
        for (size_t i = 0; i < l->n; i++)
            l->sorted[i] = i;
        sort_base = l;
        qsort(l->sorted, l->n, sizeof *l->sorted, by_name);
    }
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(l->e[l->sorted[mid]].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < l->n && !strcmp(l->e[l->sorted[lo]].name, name))
        return &l->e[l->sorted[lo]];
    return NULL;
}

static void json_string_out(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

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

static int cmd_ls(const char *path)
{
    const char *format;
    struct tn_value *v = load_or_die(path, &format);
    struct entries l = {0};
    if (tn_value_walk_tensors(v, collect, &l) < 0)
        die_input();
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
        printf("],\"total_tensors\":%zu,\"total_bytes\":%llu,\"storages\":%zu,"
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
        printf("%zu tensors, %llu bytes; %zu storages, %llu bytes stored\n", l.n,
               (unsigned long long)total, nst, (unsigned long long)stored);
    }
    free(st);
    free(stid);
    free(sid);
    entries_free(&l);
    tn_value_release(v);
    return 0;
}

/* ---------------------------------------------------------------- show */

static void print_key(const struct tn_value *k)
{
    switch (k->kind) {
    case TN_VALUE_STR: printf("'%s'", k->v.str.s); break;
    case TN_VALUE_INT: printf("%lld", (long long)k->v.i); break;
    default: printf("<%s>", tn_value_kind_name(k->kind)); break;
    }
}

static void print_tree(const struct tn_value *v, int depth)
{
    char shape[256];
    switch (v->kind) {
    case TN_VALUE_NONE: printf("None\n"); return;
    case TN_VALUE_BOOL: printf("%s\n", v->v.b ? "True" : "False"); return;
    case TN_VALUE_INT: printf("%lld\n", (long long)v->v.i); return;
    case TN_VALUE_FLOAT: {
        /* The shortest text that reads back the same double, like repr. */
        char buf[40];
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, v->v.f);
            if (strtod(buf, NULL) == v->v.f)
                break;
        }
        printf("%s%s\n", buf, strpbrk(buf, ".eEn") ? "" : ".0");
        return;
    }
    case TN_VALUE_STR: printf("'%s'\n", v->v.str.s); return;
    case TN_VALUE_TENSOR: {
        struct tn_tensor *t = v->v.tensor;
        printf("%s %s %s%s\n", t->flags & TN_TENSOR_PARAMETER ? "Parameter" : "Tensor",
               tn_dtype_name(t->dtype), tn_shape_format(t->sizes, t->ndim, shape, sizeof shape),
               t->requires_grad ? " requires_grad" : "");
        return;
    }
    case TN_VALUE_TUPLE:
    case TN_VALUE_LIST:
        printf("%s (%zu items)\n", tn_value_kind_name(v->kind), v->v.seq.n);
        for (size_t i = 0; i < v->v.seq.n; i++) {
            printf("%*s[%zu]: ", 2 * (depth + 1), "", i);
            print_tree(v->v.seq.items[i], depth + 1);
        }
        return;
    case TN_VALUE_DICT:
    case TN_VALUE_ODICT:
        printf("%s (%zu items)\n", tn_value_kind_name(v->kind), v->v.dict.n);
        for (size_t i = 0; i < v->v.dict.n; i++) {
            printf("%*s", 2 * (depth + 1), "");
            print_key(v->v.dict.keys[i]);
            printf(": ");
            print_tree(v->v.dict.vals[i], depth + 1);
        }
        if (v->v.dict.attrs)
            for (size_t i = 0; i < v->v.dict.attrs->v.dict.n; i++) {
                printf("%*s.", 2 * (depth + 1), "");
                print_key(v->v.dict.attrs->v.dict.keys[i]);
                printf(": ");
                print_tree(v->v.dict.attrs->v.dict.vals[i], depth + 1);
            }
        return;
    default:
        printf("<%s>\n", tn_value_kind_name(v->kind));
    }
}

static void print_stats(const struct tn_tensor *t)
{
    struct tn_tensor *c = tn_contiguous(t);
    if (!c)
        die_input();
    int64_t n = tn_numel(c), nan = 0, inf = 0, finite = 0;
    double mn = INFINITY, mx = -INFINITY, sum = 0, sq = 0;
    size_t es = tn_dtype_size(c->dtype);
    const char *p = tn_data(c);
    for (int64_t i = 0; i < n; i++) {
        double x = tn_scalar_to_double(tn_scalar_load(p + (size_t)i * es, c->dtype));
        if (isnan(x)) {
            nan++;
            continue;
        }
        if (isinf(x))
            inf++;
        if (x < mn)
            mn = x;
        if (x > mx)
            mx = x;
        if (isfinite(x)) {
            finite++;
            sum += x;
        }
    }
    double mean = finite ? sum / (double)finite : NAN;
    for (int64_t i = 0; i < n; i++) {
        double x = tn_scalar_to_double(tn_scalar_load(p + (size_t)i * es, c->dtype));
        if (isfinite(x))
            sq += (x - mean) * (x - mean);
    }
    double sd = finite > 1 ? sqrt(sq / (double)(finite - 1)) : NAN;
    printf("numel=%lld min=%.8g max=%.8g mean=%.8g std=%.8g nan=%lld inf=%lld\n", (long long)n,
           n - nan ? mn : NAN, n - nan ? mx : NAN, mean, sd, (long long)nan, (long long)inf);
    tn_release(c);
}

static int cmd_show(const char *path, const char *key)
{
    struct tn_value *v = load_or_die(path, NULL);
    if (!key) {
        print_tree(v, 0);
        tn_value_release(v);
        return 0;
    }
    struct entries l = {0};
    if (tn_value_walk_tensors(v, collect, &l) < 0)
        die_input();
    const struct entry *e = find(&l, key);
    if (!e) {
        fprintf(stderr, "tckpt: %s: no tensor named '%s'\n", path, key);
        exit(2);
    }
    if (tn_print(stdout, e->t) < 0)
        die_input();
    print_stats(e->t);
    entries_free(&l);
    tn_value_release(v);
    return 0;
}

/* ----------------------------------------------------------------- get */

static int cmd_get(const char *path, const char *key)
{
    if (!opt.output)
        usage_error("get: %s", "-o OUT.npy is required");
    struct tn_value *v = load_or_die(path, NULL);
    struct entries l = {0};
    if (tn_value_walk_tensors(v, collect, &l) < 0)
        die_input();
    const struct entry *e = find(&l, key);
    if (!e) {
        fprintf(stderr, "tckpt: %s: no tensor named '%s'\n", path, key);
        exit(2);
    }
    if (!strcmp(opt.output, "-")) {
        void *d;
        size_t n;
        if (tn_npy_encode(e->t, &d, &n) < 0)
            die_input();
        if (fwrite(d, 1, n, stdout) != n || fflush(stdout) != 0) {
            fprintf(stderr, "tckpt: standard output: %s\n", strerror(errno));
            exit(2);
        }
        free(d);
    } else if (tn_npy_save(opt.output, e->t) < 0) {
        die_input();
    }
    entries_free(&l);
    tn_value_release(v);
    return 0;
}

/* -------------------------------------------------------------- verify */

/* Progress bars (convert's writing and casting, verify's reading): on stderr, only when stderr is a terminal and
 * the output is large (TCKPT_PROGRESS_MIN bytes, default 64 MiB), per
 * DESIGN.md.  Plain text without colour, so NO_COLOR changes nothing;
 * redrawn at most ten times a second and cleared at the end. */
struct progress {
    const char *what;
    uint64_t total;
    double next;
    bool on, drawn;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void progress_draw(uint64_t done, void *ctx)
{
    struct progress *p = ctx;
    double t = now_s();
    if (!p->on || (t < p->next && done < p->total))
        return;
    p->next = t + 0.1;
    if (done > p->total)
        done = p->total;
    int pct = p->total ? (int)(done * 100 / p->total) : 100, fill = pct * 30 / 100;
    fprintf(stderr, "\rtckpt: %s [%.*s%*s] %3d%% %llu/%llu MiB", p->what, fill,
            "##############################", 30 - fill, "", pct,
            (unsigned long long)(done >> 20), (unsigned long long)(p->total >> 20));
    p->drawn = true;
}

static void progress_end(struct progress *p)
{
    if (p->drawn)
        fputs("\r\033[K", stderr); /* erase the bar's line */
    p->drawn = false;
}

static bool progress_wanted(uint64_t total)
{
    const char *env = getenv("TCKPT_PROGRESS_MIN");
    uint64_t min = env && *env ? strtoull(env, NULL, 10) : (uint64_t)64 << 20;
    return isatty(STDERR_FILENO) && total >= min;
}

static int cmd_verify(const char *path)
{
    int problems = 0;
    const char *f = tn_io_detect(path);
    if (!f) {
        if (tn_last_status() == TN_EIO)
            die_input();
        printf("%s\n", tn_last_error());
        return 1;
    }
    if (!strcmp(f, "torch") || !strcmp(f, "npz")) {
        struct tn_zip *z = tn_zip_open(path);
        if (!z) {
            printf("%s\n", tn_last_error());
            return 1;
        }
        /* What torch.load ignores, verify reports: CRCs and duplicate names. */
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
        tn_zip_close(z);
    }
    struct tn_value *v = load_any(path, NULL);
    if (!v) {
        printf("%s\n", tn_last_error());
        return 1;
    }
    struct entries l = {0};
    tn_value_walk_tensors(v, collect, &l);
    if (!problems)
        printf("%s: ok (%s, %zu tensors)\n", path, f, l.n);
    entries_free(&l);
    tn_value_release(v);
    return problems ? 1 : 0;
}

/* ------------------------------------------------------------- convert */

/* A copy of the value's structure with each floating tensor cast to
 * opt.dtype (tensors shared in the input stay shared in the output). */
struct castmap {
    struct tn_tensor **from, **to;
    size_t n, cap;
    struct progress *bar; /* "converting": bytes of the tensors read so far */
    uint64_t done;
};

static struct tn_tensor *cast_one(struct castmap *m, struct tn_tensor *t)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->from[i] == t)
            return tn_retain(m->to[i]);
    struct tn_tensor *r;
    if (tn_dtype_is_floating(t->dtype) && t->dtype != opt.dtype) {
        r = tn_to_dtype(t, opt.dtype);
        if (r) {
            r->requires_grad = t->requires_grad;
            r->flags = t->flags;
        }
    } else {
        r = tn_retain(t);
    }
    if (!r)
        die_input();
    if (m->bar)
        progress_draw(m->done += tn_nbytes(t), m->bar);
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->from = realloc(m->from, m->cap * sizeof *m->from);
        m->to = realloc(m->to, m->cap * sizeof *m->to);
    }
    m->from[m->n] = t;
    m->to[m->n++] = r;
    return tn_retain(r);
}

static struct tn_value *cast_tree(struct castmap *m, struct tn_value *v)
{
    struct tn_value *r = NULL;
    switch (v->kind) {
    case TN_VALUE_TENSOR: {
        struct tn_tensor *t = cast_one(m, v->v.tensor);
        r = tn_value_tensor(t);
        tn_release(t);
        return r;
    }
    case TN_VALUE_TUPLE:
    case TN_VALUE_LIST:
        r = v->kind == TN_VALUE_TUPLE ? tn_value_tuple() : tn_value_list();
        for (size_t i = 0; i < v->v.seq.n; i++)
            tn_value_append(r, cast_tree(m, v->v.seq.items[i]));
        return r;
    case TN_VALUE_DICT:
    case TN_VALUE_ODICT:
        r = v->kind == TN_VALUE_DICT ? tn_value_dict() : tn_value_odict();
        for (size_t i = 0; i < v->v.dict.n; i++)
            tn_value_set(r, tn_value_retain(v->v.dict.keys[i]), cast_tree(m, v->v.dict.vals[i]));
        if (v->v.dict.attrs)
            r->v.dict.attrs = tn_value_retain(v->v.dict.attrs);
        return r;
    default:
        return tn_value_retain(v);
    }
}

static const char *format_of_name(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (!dot)
        return NULL;
    if (!strcmp(dot, ".pt") || !strcmp(dot, ".pth") || !strcmp(dot, ".bin") || !strcmp(dot, ".ckpt"))
        return "torch";
    if (!strcmp(dot, ".safetensors"))
        return "safetensors";
    if (!strcmp(dot, ".npz"))
        return "npz";
    return NULL;
}

static size_t count_values(const struct tn_value *v)
{
    size_t n = 0;
    switch (v->kind) {
    case TN_VALUE_TENSOR:
        return 0;
    case TN_VALUE_TUPLE:
    case TN_VALUE_LIST:
        for (size_t i = 0; i < v->v.seq.n; i++)
            n += count_values(v->v.seq.items[i]);
        return n;
    case TN_VALUE_DICT:
    case TN_VALUE_ODICT:
        for (size_t i = 0; i < v->v.dict.n; i++)
            n += count_values(v->v.dict.vals[i]);
        return n;
    default:
        return 1;
    }
}


/* The bytes tn_save writes for v's tensors: each storage once. */
static int ptr_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return (x > y) - (x < y);
}

static uint64_t output_bytes(const struct entries *l, bool by_storage)
{
    uint64_t total = 0;
    if (!by_storage) {
        for (size_t i = 0; i < l->n; i++)
            total += tn_nbytes(l->e[i].t);
        return total;
    }
    struct tn_storage **s = malloc((l->n + 1) * sizeof *s);
    if (!s)
        return 0;
    for (size_t i = 0; i < l->n; i++)
        s[i] = l->e[i].t->storage;
    qsort(s, l->n, sizeof *s, ptr_cmp);
    for (size_t i = 0; i < l->n; i++)
        if (!i || s[i] != s[i - 1])
            total += s[i]->nbytes;
    free(s);
    return total;
}


static int cmd_convert(const char *in, const char *out)
{
    const char *to = opt.to ? opt.to : format_of_name(out);
    if (!to)
        usage_error("convert: cannot tell the format of '%s' from its name: use --to", out);
    if (strcmp(to, "torch") && strcmp(to, "safetensors") && strcmp(to, "npz"))
        usage_error("--to: '%s' is not torch, safetensors or npz", to);
    struct tn_value *v = load_or_die(in, NULL);
    if (opt.dtype != TN_DTYPE_UNSET) {
        struct progress cbar = {.what = "converting"};
        struct entries in_all = {0};
        if (tn_value_walk_tensors(v, collect, &in_all) < 0)
            die_input();
        cbar.total = output_bytes(&in_all, false);
        cbar.on = progress_wanted(cbar.total);
        entries_free(&in_all);
        struct castmap m = {.bar = &cbar};
        struct tn_value *c = cast_tree(&m, v);
        progress_end(&cbar);
        for (size_t i = 0; i < m.n; i++)
            tn_release(m.to[i]);
        free(m.from);
        free(m.to);
        tn_value_release(v);
        v = c;
    }
    int rc;
    struct progress bar = {.what = "writing"};
    {
        struct entries all = {0};
        if (tn_value_walk_tensors(v, collect, &all) < 0)
            die_input();
        bar.total = output_bytes(&all, !strcmp(to, "torch"));
        bar.on = progress_wanted(bar.total);
        entries_free(&all);
    }
    if (bar.on)
        tn_io_set_progress(progress_draw, &bar);
    if (!strcmp(to, "torch")) {
        struct tn_save_options so = {.layout = opt.layout};
        rc = tn_save(out, v, &so);
    } else {
        /* Flat name -> tensor: what these formats can hold. */
        struct entries l = {0};
        if (tn_value_walk_tensors(v, collect, &l) < 0)
            die_input();
        struct tn_value *flat = tn_value_odict();
        size_t shared = 0;
        for (size_t i = 0; i < l.n; i++) {
            for (size_t j = 0; j < i; j++)
                if (l.e[j].t->storage == l.e[i].t->storage) {
                    shared++;
                    break;
                }
            tn_value_set(flat, tn_value_str(l.e[i].name), tn_value_tensor(l.e[i].t));
        }
        size_t dropped = count_values(v);
        if (dropped)
            fprintf(stderr, "tckpt: note: %s holds only tensors: %zu other values dropped\n", to,
                    dropped);
        if (shared)
            fprintf(stderr, "tckpt: note: %s has no shared storage: %zu tensors that share "
                    "storage written as copies\n", to, shared);
        if (!strcmp(to, "safetensors")) {
            struct tn_value *meta = tn_value_dict();
            tn_value_set(meta, tn_value_str("format"), tn_value_str("pt"));
            rc = tn_st_save(out, flat, meta);
            tn_value_release(meta);
        } else {
            rc = tn_npz_save(out, flat);
        }
        tn_value_release(flat);
        entries_free(&l);
    }
    tn_io_set_progress(NULL, NULL);
    progress_end(&bar);
    if (rc < 0)
        die_input();
    tn_value_release(v);
    return 0;
}

/* ---------------------------------------------------------------- diff */

/* A number for JSON: null where JSON has none (inf, nan). */
static void json_number_out(double x)
{
    if (isfinite(x))
        printf("%.17g", x);
    else
        printf("null");
}

/* One finding of diff, printed as text or gathered as JSON. */
static bool diff_first = true;

static void diff_json_item(const char *kind, const char *name)
{
    printf("%s{\"kind\":\"%s\",\"name\":", diff_first ? "" : ",", kind);
    json_string_out(stdout, name);
    diff_first = false;
}

static int cmd_diff(const char *a, const char *b)
{
    struct tn_value *va = load_or_die(a, NULL), *vb = load_or_die(b, NULL);
    struct entries la = {0}, lb = {0};
    if (tn_value_walk_tensors(va, collect, &la) < 0 || tn_value_walk_tensors(vb, collect, &lb) < 0)
        die_input();
    int differ = 0;
    char s1[256], s2[256];
    if (opt.json) {
        printf("{\"a\":");
        json_string_out(stdout, a);
        printf(",\"b\":");
        json_string_out(stdout, b);
        printf(",\"differences\":[");
    }
    for (int side = 0; side < 2; side++) {
        struct entries *x = side ? &lb : &la, *y = side ? &la : &lb;
        for (size_t i = 0; i < x->n; i++) {
            if (find(y, x->e[i].name))
                continue;
            differ = 1;
            if (opt.json) {
                diff_json_item(side ? "only_in_b" : "only_in_a", x->e[i].name);
                printf("}");
            } else {
                printf("only in %s: %s\n", side ? b : a, x->e[i].name);
            }
        }
    }
    for (size_t i = 0; i < la.n; i++) {
        const struct entry *eb = find(&lb, la.e[i].name);
        if (!eb)
            continue;
        struct tn_tensor *x = la.e[i].t, *y = eb->t;
        if (x->dtype != y->dtype) {
            differ = 1;
            if (opt.json) {
                diff_json_item("dtype", la.e[i].name);
                printf(",\"a_dtype\":\"%s\",\"b_dtype\":\"%s\"}", tn_dtype_name(x->dtype),
                       tn_dtype_name(y->dtype));
            } else {
                printf("%s: dtype %s -> %s\n", la.e[i].name, tn_dtype_name(x->dtype),
                       tn_dtype_name(y->dtype));
            }
        }
        if (x->ndim != y->ndim || memcmp(x->sizes, y->sizes, sizeof(int64_t) * (size_t)x->ndim)) {
            differ = 1;
            tn_shape_format(x->sizes, x->ndim, s1, sizeof s1);
            tn_shape_format(y->sizes, y->ndim, s2, sizeof s2);
            if (opt.json) {
                diff_json_item("shape", la.e[i].name);
                printf(",\"a_shape\":%s,\"b_shape\":%s}", s1, s2);
            } else {
                printf("%s: shape %s -> %s\n", la.e[i].name, s1, s2);
            }
            continue;
        }
        struct tn_tensor *cx = tn_contiguous(x), *cy = tn_contiguous(y);
        if (!cx || !cy)
            die_input();
        int64_t n = tn_numel(cx);
        double maxabs = 0, maxrel = 0;
        int64_t bad = 0;
        for (int64_t k = 0; k < n; k++) {
            double p = tn_scalar_to_double(
                tn_scalar_load((char *)tn_data(cx) + (size_t)k * tn_dtype_size(cx->dtype), cx->dtype));
            double q = tn_scalar_to_double(
                tn_scalar_load((char *)tn_data(cy) + (size_t)k * tn_dtype_size(cy->dtype), cy->dtype));
            if (isnan(p) || isnan(q)) {
                if (isnan(p) != isnan(q))
                    bad++;
                continue;
            }
            if (p == q)
                continue;
            double d = fabs(p - q);
            if (d > maxabs || isnan(d))
                maxabs = d;
            double r = q != 0 ? d / fabs(q) : INFINITY;
            if (r > maxrel)
                maxrel = r;
            if (!(d <= opt.atol + opt.rtol * fabs(q)))
                bad++;
        }
        if (bad) {
            differ = 1;
            if (opt.json) {
                diff_json_item("values", la.e[i].name);
                printf(",\"mismatched\":%lld,\"numel\":%lld,\"max_abs\":", (long long)bad,
                       (long long)n);
                json_number_out(maxabs);
                printf(",\"max_rel\":");
                json_number_out(maxrel);
                printf("}");
            } else {
                printf("%s: %lld of %lld elements differ (max abs %.6g, max rel %.6g)\n",
                       la.e[i].name, (long long)bad, (long long)n, maxabs, maxrel);
            }
        }
        tn_release(cx);
        tn_release(cy);
    }
    if (opt.json)
        printf("],\"tensors_a\":%zu,\"tensors_b\":%zu,\"differ\":%s}\n", la.n, lb.n,
               differ ? "true" : "false");
    else if (!differ)
        printf("%s and %s: %zu tensors match\n", a, b, la.n);
    entries_free(&la);
    entries_free(&lb);
    tn_value_release(va);
    tn_value_release(vb);
    return differ;
}

/* ---------------------------------------------------------------- main */

int tckpt_scan_main(int argc, char **argv); /* scan.c */

int main(int argc, char **argv)
{
    int c;
    /* scan has options of its own: the first word that is no option names it. */
    for (int i = 1; i < argc; i++)
        if (argv[i][0] != '-' || !strcmp(argv[i], "-")) {
            if (!strcmp(argv[i], "scan"))
                return tckpt_scan_main(argc, argv);
            break;
        }
    /* GNU getopt permutes: options may come before or after the command. */
    while ((c = getopt_long(argc, argv, "o:hV", long_opts, NULL)) != -1) {
        switch (c) {
        case OPT_JSON: opt.json = true; break;
        case 'o': opt.output = optarg; break;
        case OPT_TO: opt.to = optarg; break;
        case OPT_DTYPE:
            opt.dtype = tn_dtype_from_name(optarg);
            if (opt.dtype != TN_BFLOAT16 && opt.dtype != TN_FLOAT16 && opt.dtype != TN_FLOAT32 &&
                opt.dtype != TN_FLOAT64)
                usage_error("--dtype: '%s' is not bf16, f16, f32 or f64", optarg);
            break;
        case OPT_LAYOUT:
            if (!strcmp(optarg, "torch1"))
                opt.layout = TN_CKPT_TORCH1;
            else if (!strcmp(optarg, "torch2"))
                opt.layout = TN_CKPT_TORCH2;
            else
                usage_error("--layout: '%s' is not torch1 or torch2", optarg);
            break;
        case OPT_TORCH1: opt.torch1 = true; break;
        case OPT_ATOL: opt.atol = parse_double(optarg, "--atol: '%s' is not a non-negative number"); break;
        case OPT_RTOL: opt.rtol = parse_double(optarg, "--rtol: '%s' is not a non-negative number"); break;
        case 'h': fputs(usage_text, stdout); return 0;
        case 'V': printf("tckpt (tensorkit) %s\n", tn_version()); return 0;
        default:
            fputs("Try 'tckpt --help' for more information.\n", stderr);
            return 2;
        }
    }
    if (optind >= argc)
        usage_error("%s", "missing command (ls, show, get, verify, convert or diff)");
    const char *cmd = argv[optind];
    char **args = argv + optind + 1;
    int nargs = argc - optind - 1;
    static const struct { const char *name; int min, max; } cmds[] = {
        {"ls", 1, 1}, {"show", 1, 2}, {"get", 2, 2}, {"verify", 1, 1}, {"convert", 2, 2},
        {"diff", 2, 2},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (strcmp(cmd, cmds[i].name))
            continue;
        if (nargs < cmds[i].min || nargs > cmds[i].max)
            usage_error("%s: wrong number of arguments", cmd);
        switch (i) {
        case 0: return cmd_ls(args[0]);
        case 1: return cmd_show(args[0], nargs > 1 ? args[1] : NULL);
        case 2: return cmd_get(args[0], args[1]);
        case 3: return cmd_verify(args[0]);
        case 4: return cmd_convert(args[0], args[1]);
        default: return cmd_diff(args[0], args[1]);
        }
    }
    usage_error("unknown command '%s'", cmd);
}
