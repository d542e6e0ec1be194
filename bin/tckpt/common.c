/*
 * bin/tckpt/common.c: what tckpt's subcommands share: errors, inputs,
 * the named list of tensors, JSON and Python-style text of values,
 * progress bars.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tckpt.h"
#include "../cli.h"

_Noreturn void usage_error(const char *fmt, const char *arg)
{
    cli_usage_error("tckpt", "tckpt", fmt, arg);
}

_Noreturn void die_input(void)
{
    fprintf(stderr, "tckpt: %s\n", tn_last_error());
    exit(2);
}

const char *plural(size_t n, const char *noun, char *buf, size_t cap)
{
    snprintf(buf, cap, "%zu %s%s", n, noun, n == 1 ? "" : "s");
    return buf;
}

/* ------------------------------------------------------------- inputs */

int input_open(struct input *in, const char *path)
{
    memset(in, 0, sizeof *in);
    in->path = path;
    in->f = tn_io_file_open(path);
    if (!in->f)
        return -1;
    in->format = tn_io_file_format(in->f);
    return 0;
}

int input_load(struct input *in)
{
    struct tn_load_options o = {.allowlist = opt.torch1 ? TN_ALLOW_TORCH1 : TN_ALLOW_CURRENT};
    in->v = tn_io_file_load(in->f, &o, &in->meta);
    return in->v ? 0 : -1;
}

void input_load_or_die(struct input *in, const char *path)
{
    if (input_open(in, path) < 0 || input_load(in) < 0)
        die_input();
}

void input_free(struct input *in)
{
    tn_value_release(in->v);
    tn_value_release(in->meta);
    tn_io_file_close(in->f);
    memset(in, 0, sizeof *in);
}

/* ------------------------------------------------------------ entries */

int collect(const char *path, struct tn_tensor *t, void *ctx)
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

void collect_or_die(const struct tn_value *v, struct entries *l)
{
    if (tn_value_walk_tensors(v, collect, l) < 0)
        die_input();
}

void entries_free(struct entries *l)
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
const struct entry *find(struct entries *l, const char *name)
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

void json_string_out(FILE *f, const char *s)
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


/* Progress bars (convert's writing and casting, verify's reading): on stderr, only when stderr is a terminal and
 * the output is large (TCKPT_PROGRESS_MIN bytes, default 64 MiB), per
 * DESIGN.md.  Plain text without colour, so NO_COLOR changes nothing;
 * redrawn at most ten times a second and cleared at the end. */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress_draw(uint64_t done, void *ctx)
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

void progress_end(struct progress *p)
{
    if (p->drawn)
        fputs("\r\033[K", stderr); /* erase the bar's line */
    p->drawn = false;
}

bool progress_wanted(uint64_t total)
{
    const char *env = getenv("TCKPT_PROGRESS_MIN");
    uint64_t min = env && *env ? strtoull(env, NULL, 10) : (uint64_t)64 << 20;
    return isatty(STDERR_FILENO) && total >= min;
}


/* ------------------------------------------------------ values as text */

/* A number for JSON: null where JSON has none (inf, nan). */
void json_number_out(double x)
{
    if (isfinite(x))
        printf("%.17g", x);
    else
        printf("null");
}

/* The shortest text that reads back the same double, as repr writes it. */
static const char *float_repr(double x, char *buf, size_t cap)
{
    if (isnan(x))
        return "nan";
    if (isinf(x))
        return x < 0 ? "-inf" : "inf";
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, x);
        if (strtod(tmp, NULL) == x)
            break;
    }
    snprintf(buf, cap, "%s%s", tmp, strpbrk(tmp, ".eEn") ? "" : ".0");
    return buf;
}

const char *value_repr(const struct tn_value *v, char *buf, size_t cap)
{
    char shape[256];
    switch (v->kind) {
    case TN_VALUE_NONE: return "None";
    case TN_VALUE_BOOL: return v->v.b ? "True" : "False";
    case TN_VALUE_INT: snprintf(buf, cap, "%lld", (long long)v->v.i); return buf;
    case TN_VALUE_FLOAT: return float_repr(v->v.f, buf, cap);
    case TN_VALUE_STR: snprintf(buf, cap, "'%s'", v->v.str.s); return buf;
    case TN_VALUE_OPAQUE: /* what tensorkit cannot rebuild, as Python shows it */
    case TN_VALUE_GLOBAL: /* "torch.float16", as Python prints a dtype */
        snprintf(buf, cap, "%s", v->v.str.s);
        return buf;
    case TN_VALUE_TENSOR: {
        const struct tn_tensor *t = v->v.tensor;
        snprintf(buf, cap, "%s %s %s%s", t->flags & TN_TENSOR_PARAMETER ? "Parameter" : "Tensor",
                 tn_dtype_name(t->dtype), tn_shape_format(t->sizes, t->ndim, shape, sizeof shape),
                 t->requires_grad ? " requires_grad" : "");
        return buf;
    }
    case TN_VALUE_TUPLE: return "()";
    case TN_VALUE_LIST: return "[]";
    case TN_VALUE_DICT: return "{}";
    case TN_VALUE_ODICT: return "OrderedDict()";
    default: snprintf(buf, cap, "<%s>", tn_value_kind_name(v->kind)); return buf;
    }
}

void json_value_out(const struct tn_value *v)
{
    char buf[512], shape[256];
    switch (v->kind) {
    case TN_VALUE_NONE: printf("null"); return;
    case TN_VALUE_BOOL: printf(v->v.b ? "true" : "false"); return;
    case TN_VALUE_INT: printf("%lld", (long long)v->v.i); return;
    case TN_VALUE_FLOAT: json_number_out(v->v.f); return;
    case TN_VALUE_STR: json_string_out(stdout, v->v.str.s); return;
    case TN_VALUE_TENSOR:
        printf("{\"tensor\":{\"dtype\":\"%s\",\"shape\":%s}}", tn_dtype_name(v->v.tensor->dtype),
               tn_shape_format(v->v.tensor->sizes, v->v.tensor->ndim, shape, sizeof shape));
        return;
    case TN_VALUE_TUPLE:
    case TN_VALUE_LIST:
        putchar('[');
        for (size_t i = 0; i < v->v.seq.n; i++) {
            if (i)
                putchar(',');
            json_value_out(v->v.seq.items[i]);
        }
        putchar(']');
        return;
    case TN_VALUE_DICT:
    case TN_VALUE_ODICT:
        putchar('{');
        for (size_t i = 0; i < v->v.dict.n; i++) {
            const struct tn_value *k = v->v.dict.keys[i];
            if (i)
                putchar(',');
            json_string_out(stdout, k->kind == TN_VALUE_STR ? k->v.str.s : value_repr(k, buf, sizeof buf));
            putchar(':');
            json_value_out(v->v.dict.vals[i]);
        }
        putchar('}');
        return;
    default: json_string_out(stdout, value_repr(v, buf, sizeof buf)); return;
    }
}
