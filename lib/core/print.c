/*
 * core/print.c: repr(tensor) as PyTorch 2.x prints it (torch/_tensor_str.py),
 * and torch.set_printoptions.
 *
 * The rules, restated:
 * - One formatter per tensor (two for complex: the real parts and the
 *   imaginary parts each get their own).  It looks only at the elements that
 *   will be printed (the edge items when the tensor is summarised).
 * - A floating formatter looks at the finite, non-zero values.  When every
 *   one is an integer it is in "int mode" ("1.", "2."); it picks scientific
 *   notation when max/min > 1000, max > 1e8 or min < 1e-4 (by absolute
 *   value), unless sci_mode forces it either way; every element is padded to
 *   the widest such value.  With no finite non-zero value it stays in int
 *   mode, fixed notation, width 1, whatever sci_mode says.
 * - Integers print as decimal, bools as True/False, padded to the widest.
 * - A row wraps after floor((linewidth - indent) / (width + 2)) elements; a
 *   summarised dimension shows edgeitems at each end around "...".
 * - Suffixes (device, size, dtype, grad_fn or requires_grad) follow the
 *   contents after ", ", or on a new line when they would pass linewidth.
 *
 * Where PyTorch 1.13 differs, this follows 2.x:
 * - sci_mode set by the user: 1.13 sizes the columns as the automatic mode
 *   would have and then formats in the forced mode, so columns misalign; 2.x
 *   sizes them for the mode it prints in.
 * - edgeitems 0: 2.x prints "[...]" for a summarised tensor and adds
 *   "size=(...)" to every non-empty tensor; 1.13 prints a stray " ..." and
 *   then every element of a vector, and fails on 2-D and larger tensors.
 */
#include "core/internal.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ print options */

/* PyTorch's defaults (set_printoptions(profile="default")). */
#define TN_PRINT_DEFAULTS                                                                       \
    {.precision = 4, .threshold = 1000, .edgeitems = 3, .linewidth = 80, .sci_mode = -1}
static const struct tn_printoptions tn_print_defaults = TN_PRINT_DEFAULTS;

static pthread_mutex_t tn_print_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tn_printoptions tn_print_opts = TN_PRINT_DEFAULTS;

/* Like torch.set_printoptions, sci_mode is always set: leaving it out (-1)
 * means automatic, as Python's sci_mode=None does.  NULL restores the
 * defaults. */
void tn_set_printoptions(const struct tn_printoptions *opts)
{
    if (!opts)
        opts = &tn_print_defaults;
    pthread_mutex_lock(&tn_print_lock);
    if (opts->precision >= 0)
        tn_print_opts.precision = opts->precision;
    if (opts->threshold >= 0)
        tn_print_opts.threshold = opts->threshold;
    if (opts->edgeitems >= 0)
        tn_print_opts.edgeitems = opts->edgeitems;
    if (opts->linewidth >= 0)
        tn_print_opts.linewidth = opts->linewidth;
    tn_print_opts.sci_mode = opts->sci_mode < 0 ? -1 : opts->sci_mode > 0;
    pthread_mutex_unlock(&tn_print_lock);
}

struct tn_printoptions tn_get_printoptions(void)
{
    pthread_mutex_lock(&tn_print_lock);
    struct tn_printoptions o = tn_print_opts;
    pthread_mutex_unlock(&tn_print_lock);
    return o;
}

/* ------------------------------------------------------------ string builder */

/* A growing string; `failed` latches the first allocation failure so the
 * writers need not check each append. */
struct tn_sb {
    char *p;
    size_t len, cap;
    bool failed;
};

static bool tn_sb_reserve(struct tn_sb *sb, size_t extra)
{
    if (sb->failed)
        return false;
    if (sb->len + extra + 1 <= sb->cap)
        return true;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            sb->failed = true;
            return false;
        }
        cap *= 2;
    }
    char *p = realloc(sb->p, cap);
    if (!p) {
        sb->failed = true;
        return false;
    }
    sb->p = p;
    sb->cap = cap;
    return true;
}

static void tn_sb_putn(struct tn_sb *sb, const char *s, size_t n)
{
    if (!tn_sb_reserve(sb, n))
        return;
    memcpy(sb->p + sb->len, s, n);
    sb->len += n;
    sb->p[sb->len] = '\0';
}

static void tn_sb_puts(struct tn_sb *sb, const char *s) { tn_sb_putn(sb, s, strlen(s)); }

static void tn_sb_repeat(struct tn_sb *sb, char c, int64_t n)
{
    if (n <= 0 || !tn_sb_reserve(sb, (size_t)n))
        return;
    memset(sb->p + sb->len, c, (size_t)n);
    sb->len += (size_t)n;
    sb->p[sb->len] = '\0';
}

static void tn_sb_printf(struct tn_sb *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void tn_sb_printf(struct tn_sb *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        sb->failed = true;
        return;
    }
    if (!tn_sb_reserve(sb, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(sb->p + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

/* Right-aligns what was written since `start` in a field of `width`. */
static void tn_sb_pad_from(struct tn_sb *sb, size_t start, int64_t width)
{
    size_t n = sb->len - start;
    if (sb->failed || (int64_t)n >= width)
        return;
    size_t pad = (size_t)width - n;
    if (!tn_sb_reserve(sb, pad))
        return;
    memmove(sb->p + start + pad, sb->p + start, n + 1);
    memset(sb->p + start, ' ', pad);
    sb->len += pad;
}

/* ---------------------------------------------------------------- elements */

/* What the printer walks: a CPU tensor's geometry and first element. */
struct tn_walk {
    const char *data; /* the first element */
    size_t esize;
    enum tn_dtype dtype;
    int ndim;
    const int64_t *sizes, *strides;
    bool summarize;
    struct tn_printoptions opts;
};

/* Which number of an element a formatter sees: the value itself, or the
 * real or imaginary part of a complex one. */
enum tn_part { TN_PART_VALUE, TN_PART_REAL, TN_PART_IMAG };

static double tn_part_double(struct tn_scalar s, enum tn_part part)
{
    if (s.kind == TN_SCALAR_COMPLEX)
        return part == TN_PART_IMAG ? s.v.c.im : s.v.c.re;
    return tn_scalar_to_double(s);
}

/* Calls fn for every element that will be printed: all of them, or the
 * first and last edgeitems of each dimension when summarising (the
 * elements torch's get_summarized_data keeps).  Summarising with edgeitems
 * 0 visits nothing: only "..." is printed then, so no width matters. */
typedef void (*tn_elem_fn)(struct tn_scalar s, void *ctx);

static void tn_visit(const struct tn_walk *w, const char *p, int dim, tn_elem_fn fn, void *ctx)
{
    if (dim == w->ndim) {
        fn(tn_scalar_load(p, w->dtype), ctx);
        return;
    }
    int64_t n = w->sizes[dim], e = w->opts.edgeitems;
    int64_t step = w->strides[dim] * (int64_t)w->esize;
    bool cut = w->summarize && n > 2 * e;
    for (int64_t i = 0; i < n; i++) {
        if (cut && i == e)
            i = n - e;
        if (i < n)
            tn_visit(w, p + i * step, dim + 1, fn, ctx);
    }
}

/* -------------------------------------------------------------- formatter */

struct tn_fmt {
    bool floating;      /* formats floating values (else integers or bools) */
    bool int_mode;      /* every finite non-zero value is an integer */
    bool sci_mode;
    bool any;           /* saw a finite non-zero value */
    double min, max;    /* their smallest and largest absolute values */
    int64_t width;      /* the widest formatted element */
    enum tn_part part;
    const struct tn_printoptions *opts;
};

/* Python's float formatting prints every NaN as "nan", sign or not. */
static double tn_unsign_nan(double v) { return isnan(v) ? NAN : v; }

/* Appends one value as the formatter prints it, without padding. */
static void tn_fmt_raw(struct tn_sb *sb, const struct tn_fmt *f, struct tn_scalar s)
{
    if (!f->floating) {
        if (s.kind == TN_SCALAR_BOOL)
            tn_sb_puts(sb, s.v.b ? "True" : "False");
        else
            tn_sb_printf(sb, "%lld", (long long)s.v.i);
        return;
    }
    double v = tn_unsign_nan(tn_part_double(s, f->part));
    if (f->sci_mode)
        tn_sb_printf(sb, "%.*e", f->opts->precision, v);
    else if (f->int_mode)
        tn_sb_printf(sb, "%.0f%s", v, isfinite(v) ? "." : "");
    else
        tn_sb_printf(sb, "%.*f", f->opts->precision, v);
}

/* The length of a value's text, for the column width. */
static int64_t tn_fmt_len(const struct tn_fmt *f, struct tn_scalar s)
{
    struct tn_sb sb = {0};
    tn_fmt_raw(&sb, f, s);
    int64_t n = sb.failed ? 0 : (int64_t)sb.len;
    free(sb.p);
    return n;
}

static void tn_fmt_scan(struct tn_scalar s, void *ctx)
{
    struct tn_fmt *f = ctx;
    if (!f->floating) {
        int64_t n = tn_fmt_len(f, s);
        if (n > f->width)
            f->width = n;
        return;
    }
    double v = tn_part_double(s, f->part);
    if (!isfinite(v) || v == 0)
        return;
    double a = fabs(v);
    if (!f->any || a < f->min)
        f->min = a;
    if (!f->any || a > f->max)
        f->max = a;
    f->any = true;
    if (v != ceil(v))
        f->int_mode = false;
}

static void tn_fmt_measure(struct tn_scalar s, void *ctx)
{
    struct tn_fmt *f = ctx;
    double v = tn_part_double(s, f->part);
    if (!isfinite(v) || v == 0)
        return;
    int64_t n = tn_fmt_len(f, s);
    if (n > f->width)
        f->width = n;
}

/* Sets up the formatter for the printed elements of w (torch's _Formatter). */
static void tn_fmt_init(struct tn_fmt *f, const struct tn_walk *w, enum tn_part part)
{
    *f = (struct tn_fmt){.floating = part != TN_PART_VALUE || tn_dtype_is_floating(w->dtype),
                         .int_mode = true,
                         .width = 1,
                         .part = part,
                         .opts = &w->opts};
    tn_visit(w, w->data, 0, tn_fmt_scan, f);
    if (!f->floating || !f->any)
        return;
    if (w->opts.sci_mode >= 0)
        f->sci_mode = w->opts.sci_mode > 0;
    else
        f->sci_mode = f->max / f->min > 1000.0 || f->max > 1.0e8 || f->min < 1.0e-4;
    tn_visit(w, w->data, 0, tn_fmt_measure, f);
}

/* One element, padded to the column (complex: "re+imj", the imaginary part
 * unpadded and signed). */
static void tn_put_elem(struct tn_sb *sb, const struct tn_fmt *f1, const struct tn_fmt *f2,
                        struct tn_scalar s)
{
    size_t start = sb->len;
    tn_fmt_raw(sb, f1, s);
    tn_sb_pad_from(sb, start, f1->width);
    if (!f2)
        return;
    start = sb->len;
    tn_fmt_raw(sb, f2, s);
    if (!sb->failed && sb->p[start] != '-' && sb->p[start] != '+') {
        tn_sb_putn(sb, "+", 1);
        if (!sb->failed) { /* move the sign before the number */
            memmove(sb->p + start + 1, sb->p + start, sb->len - start - 1);
            sb->p[start] = '+';
        }
    }
    tn_sb_putn(sb, "j", 1);
}

/* ------------------------------------------------------------------ layout */

struct tn_layout {
    struct tn_sb *sb;
    const struct tn_walk *w;
    const struct tn_fmt *f1, *f2;
};

static void tn_put_vector(const struct tn_layout *L, const char *p, int64_t indent)
{
    const struct tn_walk *w = L->w;
    int dim = w->ndim - 1;
    int64_t n = w->sizes[dim], e = w->opts.edgeitems;
    int64_t step = w->strides[dim] * (int64_t)w->esize;
    int64_t elem_len = L->f1->width + 2 + (L->f2 ? L->f2->width + 1 : 0);
    int64_t room = (int64_t)w->opts.linewidth - indent;
    int64_t per_line = room > 0 ? room / elem_len : 0;
    if (per_line < 1)
        per_line = 1;

    tn_sb_putn(L->sb, "[", 1);
    if (w->summarize && e == 0) {
        tn_sb_puts(L->sb, "...]");
        return;
    }
    bool cut = w->summarize && n > 2 * e;
    int64_t item = 0; /* position in the printed list, "..." included */
    for (int64_t i = 0; i < n; i++, item++) {
        if (item > 0) {
            if (item % per_line == 0) {
                tn_sb_putn(L->sb, ",\n", 2);
                tn_sb_repeat(L->sb, ' ', indent + 1);
            } else {
                tn_sb_putn(L->sb, ", ", 2);
            }
        }
        if (cut && i == e) {
            tn_sb_puts(L->sb, " ...");
            i = n - e - 1;
            continue;
        }
        tn_put_elem(L->sb, L->f1, L->f2, tn_scalar_load(p + i * step, w->dtype));
    }
    tn_sb_putn(L->sb, "]", 1);
}

static void tn_put_tensor(const struct tn_layout *L, const char *p, int dim, int64_t indent)
{
    const struct tn_walk *w = L->w;
    int rem = w->ndim - dim;
    if (rem == 0) {
        tn_put_elem(L->sb, L->f1, L->f2, tn_scalar_load(p, w->dtype));
        return;
    }
    if (rem == 1) {
        tn_put_vector(L, p, indent);
        return;
    }
    int64_t n = w->sizes[dim], e = w->opts.edgeitems;
    int64_t step = w->strides[dim] * (int64_t)w->esize;
    bool cut = w->summarize && n > 2 * e;
    tn_sb_putn(L->sb, "[", 1);
    int64_t item = 0;
    for (int64_t i = 0; i < n; i++, item++) {
        if (item > 0) {
            tn_sb_putn(L->sb, ",", 1);
            tn_sb_repeat(L->sb, '\n', rem - 1);
            tn_sb_repeat(L->sb, ' ', indent + 1);
        }
        if (cut && i == e) {
            tn_sb_puts(L->sb, "...");
            i = n - e - 1;
            continue;
        }
        tn_put_tensor(L, p + i * step, dim + 1, indent + 1);
    }
    tn_sb_putn(L->sb, "]", 1);
}

/* The contents of a non-empty CPU tensor (torch's _tensor_str). */
static void tn_put_contents(struct tn_sb *sb, const struct tn_tensor *t,
                            const struct tn_printoptions *opts, int64_t indent)
{
    struct tn_walk w = {
        .data = (const char *)t->storage->data + t->offset * (int64_t)tn_dtype_size(t->dtype),
        .esize = tn_dtype_size(t->dtype),
        .dtype = t->dtype,
        .ndim = t->ndim,
        .sizes = t->sizes,
        .strides = t->strides,
        .summarize = tn_numel(t) > opts->threshold,
        .opts = *opts,
    };
    struct tn_fmt f1, f2;
    bool complex = tn_dtype_is_complex(t->dtype);
    tn_fmt_init(&f1, &w, complex ? TN_PART_REAL : TN_PART_VALUE);
    if (complex)
        tn_fmt_init(&f2, &w, TN_PART_IMAG);
    struct tn_layout L = {sb, &w, &f1, complex ? &f2 : NULL};
    tn_put_tensor(&L, w.data, 0, indent);
}

/* ---------------------------------------------------------------- suffixes */

#define TN_MAX_SUFFIXES 6
#define TN_SUFFIX_LEN (TN_MAX_DIMS * 24 + 64)

/* "size=(2, 3)", with Python's tuple spelling: "(5,)" and "()". */
static void tn_size_suffix(char *buf, const struct tn_tensor *t)
{
    size_t n = (size_t)snprintf(buf, TN_SUFFIX_LEN, "size=(");
    for (int i = 0; i < t->ndim; i++)
        n += (size_t)snprintf(buf + n, TN_SUFFIX_LEN - n, "%s%lld", i ? ", " : "",
                              (long long)t->sizes[i]);
    snprintf(buf + n, TN_SUFFIX_LEN - n, "%s)", t->ndim == 1 ? "," : "");
}

/* Appends the suffixes after the contents: each after ", " on the same line
 * while the line stays within linewidth, else on a new line at `indent`.
 * `body` is where "tensor(" starts in sb. */
static void tn_put_suffixes(struct tn_sb *sb, size_t body, char (*suffixes)[TN_SUFFIX_LEN], int n,
                            int64_t indent, int linewidth)
{
    if (sb->failed)
        return;
    /* torch counts the last line's length plus 2 (its rfind arithmetic). */
    const char *nl = NULL;
    for (size_t i = sb->len; i > body; i--)
        if (sb->p[i - 1] == '\n') {
            nl = sb->p + i - 1;
            break;
        }
    int64_t last = nl ? (int64_t)(sb->p + sb->len - nl) + 1 : (int64_t)(sb->len - body) + 2;
    for (int i = 0; i < n; i++) {
        int64_t len = (int64_t)strlen(suffixes[i]);
        if (last + len + 2 > linewidth) {
            tn_sb_putn(sb, ",\n", 2);
            tn_sb_repeat(sb, ' ', indent);
            last = indent + len;
        } else {
            tn_sb_putn(sb, ", ", 2);
            last += len + 2;
        }
        tn_sb_puts(sb, suffixes[i]);
    }
    tn_sb_putn(sb, ")", 1);
}

static bool tn_has_default_dtype(enum tn_dtype dt)
{
    enum tn_dtype def = tn_get_default_dtype();
    /* the default complex dtype: complex64 with float32, complex128 with
     * float64 (complex32 with float16, which tensorkit lacks) */
    bool cdef = (def == TN_FLOAT32 || def == TN_FLOAT64) && dt == tn__dtype_complex(def);
    return dt == def || cdef || dt == TN_INT64 || dt == TN_BOOL;
}

/* A CPU tensor with t's values and geometry, for a non-empty tensor on
 * another device.  Copies between devices move contiguous blocks only, so
 * the block of storage t spans comes over whole and t's strides are laid
 * over the copy. */
static struct tn_tensor *tn_host_copy(const struct tn_tensor *t)
{
    int64_t extent = 1;
    for (int d = 0; d < t->ndim; d++)
        extent += (t->sizes[d] - 1) * t->strides[d];
    struct tn_tensor *flat = tn_tensor_from_storage(t->storage, t->offset, &extent, 1, NULL,
                                                    t->dtype);
    struct tn_tensor *host = flat ? tn_empty(&extent, 1, t->dtype) : NULL;
    struct tn_tensor *out = NULL;
    if (host && tn_copy_(host, flat) == TN_OK)
        out = tn_tensor_from_storage(host->storage, 0, t->sizes, t->ndim, t->strides, t->dtype);
    tn_release(flat);
    tn_release(host);
    return out;
}

/* ------------------------------------------------------------------ public */

char *tn_format(const struct tn_tensor *t)
{
    struct tn_printoptions opts = tn_get_printoptions();
    struct tn_sb sb = {0};
    char suffixes[TN_MAX_SUFFIXES][TN_SUFFIX_LEN];
    int ns = 0;
    const int64_t indent = 7; /* strlen("tensor(") */
    struct tn_tensor *cpu = NULL;

    if (t->flags & TN_TENSOR_PARAMETER)
        tn_sb_puts(&sb, "Parameter containing:\n");
    size_t body = sb.len;
    tn_sb_puts(&sb, "tensor(");

    if (t->device.type != TN_DEVICE_CPU) {
        char dev[32];
        snprintf(suffixes[ns++], TN_SUFFIX_LEN, "device='%s'",
                 tn_device_format(t->device, dev, sizeof dev));
    }
    int64_t numel = tn_numel(t);
    if (t->device.type == TN_DEVICE_META) {
        /* A meta tensor has no values to show. */
        tn_size_suffix(suffixes[ns++], t);
        if (t->dtype != tn_get_default_dtype())
            snprintf(suffixes[ns++], TN_SUFFIX_LEN, "dtype=torch.%s", tn_dtype_name(t->dtype));
        tn_sb_puts(&sb, "...");
    } else if (numel == 0) {
        /* With no elements nothing shows the dtype, so any but the default
         * is named (int64 and bool included). */
        if (t->ndim != 1)
            tn_size_suffix(suffixes[ns++], t);
        if (t->dtype != tn_get_default_dtype())
            snprintf(suffixes[ns++], TN_SUFFIX_LEN, "dtype=torch.%s", tn_dtype_name(t->dtype));
        tn_sb_puts(&sb, "[]");
    } else {
        if (opts.edgeitems == 0)
            tn_size_suffix(suffixes[ns++], t);
        if (!tn_has_default_dtype(t->dtype))
            snprintf(suffixes[ns++], TN_SUFFIX_LEN, "dtype=torch.%s", tn_dtype_name(t->dtype));
        if (t->device.type != TN_DEVICE_CPU && !(cpu = tn_host_copy(t))) {
            free(sb.p);
            return NULL;
        }
        tn_put_contents(&sb, cpu ? cpu : t, &opts, indent);
    }

    if (t->grad_fn) {
        const struct tn_node_header *h = (const struct tn_node_header *)t->grad_fn;
        snprintf(suffixes[ns++], TN_SUFFIX_LEN, "grad_fn=<%s>", h->name ? h->name : "");
    } else if (t->requires_grad) {
        snprintf(suffixes[ns++], TN_SUFFIX_LEN, "requires_grad=True");
    }
    tn_put_suffixes(&sb, body, suffixes, ns, indent, opts.linewidth);
    tn_release(cpu);

    if (sb.failed) {
        free(sb.p);
        tn_set_error(TN_ENOMEM, "out of memory formatting a tensor of %lld elements",
                     (long long)numel);
        return NULL;
    }
    return sb.p;
}

int tn_print(FILE *f, const struct tn_tensor *t)
{
    char *s = tn_format(t);
    if (!s)
        return tn_last_status() ? tn_last_status() : TN_ENOMEM;
    int rc = fputs(s, f) < 0 || fputc('\n', f) == EOF ? -1 : 0;
    free(s);
    if (rc)
        return tn_set_error(TN_EIO, "cannot print a tensor: %s", strerror(errno));
    return 0;
}
