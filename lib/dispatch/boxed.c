/*
 * dispatch/boxed.c: reading schema arguments off a boxed stack, with the
 * schema's defaults for absent ones (what the generated boxed wrappers of
 * every op call).
 */
#include <config.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <tensor/dispatch.h>

/* TN_EINVAL: op's argument i (of the caller's stack, untrusted) is not
 * `want`; names the op, the argument and its position. */
static int bad(const struct tn_op *op, int i, const char *want)
{
    return tn_set_error(TN_EINVAL, "%s: argument '%s' (position %d) must be %s", op->qualname,
                        op->args[i].name, i + 1, want);
}

/* The stack value of argument i, or NULL when absent (missing or NONE). */
static const struct tn_ivalue *get(const struct tn_ivalue *st, int n, int i)
{
    return i < n && st[i].tag != TN_IV_NONE ? &st[i] : NULL;
}

/* TN_EINVAL: op's required argument i is absent and has no default. */
static int missing(const struct tn_op *op, int i)
{
    return tn_set_error(TN_EINVAL, "%s: missing value for argument '%s'", op->qualname,
                        op->args[i].name);
}

/* Contract in tensor/dispatch.h: *out borrows the stack's tensor; NULL
 * for an absent optional one. */
int tn_ivalue_tensor(const struct tn_op *op, const struct tn_ivalue *st, int n, int i,
                     struct tn_tensor **out)
{
    const struct tn_ivalue *v = get(st, n, i);
    *out = NULL;
    if (!v)
        return op->args[i].optional ? TN_OK : missing(op, i);
    if (v->tag != TN_IV_TENSOR || !v->v.t)
        return bad(op, i, "Tensor");
    *out = v->v.t;
    return TN_OK;
}

/* Parses a default number: "1" int, "1.5"/"1e-5" float, True/False bool. */
static int parse_scalar(const char *d, struct tn_scalar *out)
{
    char *end;
    if (!strcmp(d, "True") || !strcmp(d, "False")) {
        *out = tn_bool(d[0] == 'T');
        return 0;
    }
    long long i = strtoll(d, &end, 10);
    if (!*end && end != d) {
        *out = tn_int(i);
        return 0;
    }
    double f = strtod(d, &end);
    if (!*end && end != d) {
        *out = tn_float(f);
        return 0;
    }
    return -1;
}

/* Contract in tensor/dispatch.h: a Scalar from a SCALAR, INT, DOUBLE or
 * BOOL value, or the schema's default number. */
int tn_ivalue_scalar(const struct tn_op *op, const struct tn_ivalue *st, int n, int i,
                     struct tn_scalar *out)
{
    const struct tn_ivalue *v = get(st, n, i);
    if (!v) {
        if (op->args[i].def && parse_scalar(op->args[i].def, out) == 0)
            return TN_OK;
        return missing(op, i);
    }
    switch (v->tag) {
    case TN_IV_SCALAR: *out = v->v.s; return TN_OK;
    case TN_IV_INT: *out = tn_int(v->v.i); return TN_OK;
    case TN_IV_DOUBLE: *out = tn_float(v->v.f); return TN_OK;
    case TN_IV_BOOL: *out = tn_bool(v->v.b); return TN_OK;
    default: return bad(op, i, "a number");
    }
}

/* Contract in tensor/dispatch.h: an INT, or an integral SCALAR, or the
 * schema's integer default. */
int tn_ivalue_int(const struct tn_op *op, const struct tn_ivalue *st, int n, int i, int64_t *out)
{
    const struct tn_ivalue *v = get(st, n, i);
    struct tn_scalar s;
    if (!v) {
        if (op->args[i].def && parse_scalar(op->args[i].def, &s) == 0 && s.kind == TN_SCALAR_INT) {
            *out = s.v.i;
            return TN_OK;
        }
        return missing(op, i);
    }
    if (v->tag == TN_IV_INT)
        *out = v->v.i;
    else if (v->tag == TN_IV_SCALAR && v->v.s.kind == TN_SCALAR_INT)
        *out = v->v.s.v.i;
    else
        return bad(op, i, "int");
    return TN_OK;
}

/* Contract in tensor/dispatch.h: a DOUBLE, INT or real SCALAR, or the
 * schema's default number. */
int tn_ivalue_double(const struct tn_op *op, const struct tn_ivalue *st, int n, int i, double *out)
{
    const struct tn_ivalue *v = get(st, n, i);
    struct tn_scalar s;
    if (!v) {
        if (op->args[i].def && parse_scalar(op->args[i].def, &s) == 0) {
            *out = tn_scalar_to_double(s);
            return TN_OK;
        }
        return missing(op, i);
    }
    if (v->tag == TN_IV_DOUBLE)
        *out = v->v.f;
    else if (v->tag == TN_IV_INT)
        *out = (double)v->v.i;
    else if (v->tag == TN_IV_SCALAR && v->v.s.kind != TN_SCALAR_COMPLEX)
        *out = tn_scalar_to_double(v->v.s);
    else
        return bad(op, i, "float");
    return TN_OK;
}

/* Contract in tensor/dispatch.h: a BOOL, or the schema's True/False. */
int tn_ivalue_bool(const struct tn_op *op, const struct tn_ivalue *st, int n, int i, bool *out)
{
    const struct tn_ivalue *v = get(st, n, i);
    if (!v) {
        const char *d = op->args[i].def;
        if (d && (!strcmp(d, "True") || !strcmp(d, "False"))) {
            *out = d[0] == 'T';
            return TN_OK;
        }
        return missing(op, i);
    }
    if (v->tag == TN_IV_BOOL)
        *out = v->v.b;
    else if (v->tag == TN_IV_SCALAR && v->v.s.kind == TN_SCALAR_BOOL)
        *out = v->v.s.v.b;
    else
        return bad(op, i, "bool");
    return TN_OK;
}

/* The unquoted text of a schema's str default ("'mean'" -> "mean"), kept for
 * the life of the process: one copy per distinct default, shared by every
 * call and thread, so two defaulted str arguments of one call, or of calls
 * nested in it, never share a buffer (a thread-local buffer here once gave
 * every defaulted str of a thread the last one read). NULL when out of
 * memory. */
static const char *str_default(const char *quoted, size_t len)
{
    static struct interned {
        struct interned *next;
        char s[];
    } *head;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    struct interned *e = head;
    while (e && !(strlen(e->s) == len - 2 && !memcmp(e->s, quoted + 1, len - 2)))
        e = e->next;
    if (!e && (e = malloc(sizeof *e + len - 1))) {
        memcpy(e->s, quoted + 1, len - 2); /* the schema quotes it */
        e->s[len - 2] = 0;
        e->next = head;
        head = e;
    }
    pthread_mutex_unlock(&lock);
    return e ? e->s : NULL;
}

/* Contract in tensor/dispatch.h: *out borrows the stack's string, or is
 * the default's interned copy (str_default), never a shared buffer. */
int tn_ivalue_str(const struct tn_op *op, const struct tn_ivalue *st, int n, int i, const char **out)
{
    const struct tn_ivalue *v = get(st, n, i);
    *out = NULL;
    if (!v) {
        const char *d = op->args[i].def;
        if (!d || !strcmp(d, "None"))
            return op->args[i].optional ? TN_OK : missing(op, i);
        size_t len = strlen(d);
        if (len < 2)
            return missing(op, i);
        if (!(*out = str_default(d, len)))
            return tn_set_error(TN_ENOMEM, "%s: out of memory for the default of '%s'",
                                op->qualname, op->args[i].name);
        return TN_OK;
    }
    if (v->tag != TN_IV_STR || !v->v.str)
        return bad(op, i, "str");
    *out = v->v.str;
    return TN_OK;
}

/* Contract in tensor/dispatch.h: a DTYPE value in range; TN_DTYPE_UNSET
 * for an absent optional one. */
int tn_ivalue_dtype(const struct tn_op *op, const struct tn_ivalue *st, int n, int i,
                    enum tn_dtype *out)
{
    const struct tn_ivalue *v = get(st, n, i);
    *out = TN_DTYPE_UNSET;
    if (!v)
        return op->args[i].optional ? TN_OK : missing(op, i);
    /* a storage-only dtype (float8, uint16..64) only where the
     * op converts to it (to, _to_copy: tn_copy_ converts between every
     * dtype); no kernel of another op computes on one */
    bool converts = !strcmp(op->name, "_to_copy") || !strcmp(op->name, "to");
    if (v->tag != TN_IV_DTYPE || v->v.dtype < 0 ||
        v->v.dtype >= (converts ? TN_NUM_ALL_DTYPES : TN_NUM_DTYPES))
        return bad(op, i, "torch.dtype");
    *out = v->v.dtype;
    return TN_OK;
}

/* Contract in tensor/dispatch.h: a Tensor?[]; data and len borrow the
 * stack. */
int tn_ivalue_opt_tensors(const struct tn_op *op, const struct tn_ivalue *st, int n, int i,
                          const struct tn_tensor *const **data, int *len)
{
    const struct tn_ivalue *v = get(st, n, i);
    *data = NULL;
    *len = 0;
    if (!v)
        return missing(op, i);
    bool opt = v->tag == TN_IV_OPTTENSORLIST;
    if ((!opt && v->tag != TN_IV_TENSORLIST) || v->v.tensors.n < 0 ||
        (v->v.tensors.n && !v->v.tensors.data))
        return bad(op, i, "a list of optional tensors");
    for (int k = 0; !opt && k < v->v.tensors.n; k++)
        if (!v->v.tensors.data[k])
            return bad(op, i, "a list of optional tensors (None in a Tensor[] value)");
    *data = (const struct tn_tensor *const *)v->v.tensors.data;
    *len = v->v.tensors.n;
    return TN_OK;
}

/* Contract in tensor/dispatch.h: an int[] (or one int) from the stack, or
 * the schema's default parsed into buf (TN_MAX_DIMS values at most). */
int tn_ivalue_ints(const struct tn_op *op, const struct tn_ivalue *st, int n, int i,
                   int64_t *buf, const int64_t **data, int *len)
{
    const struct tn_ivalue *v = get(st, n, i);
    *data = NULL;
    *len = 0;
    if (v) {
        if (v->tag == TN_IV_INT) {
            buf[0] = v->v.i;
            *data = buf;
            *len = 1;
            return TN_OK;
        }
        if (v->tag != TN_IV_INTLIST || v->v.ints.n < 0 || (v->v.ints.n && !v->v.ints.data))
            return bad(op, i, "tuple of ints");
        *data = v->v.ints.data;
        *len = v->v.ints.n;
        return TN_OK;
    }
    const char *d = op->args[i].def;
    if (!d || !strcmp(d, "None"))
        return op->args[i].optional ? TN_OK : missing(op, i);
    const char *p = d[0] == '[' ? d + 1 : d;
    int k = 0;
    while (*p && *p != ']') {
        char *end;
        long long x = strtoll(p, &end, 10);
        if (end == p || k == TN_MAX_DIMS)
            return missing(op, i);
        buf[k++] = x;
        p = end;
        while (*p == ',' || *p == ' ')
            p++;
    }
    *data = buf;
    *len = k;
    return TN_OK;
}

/* Contract in tensor/dispatch.h: a float[]; data and len borrow the
 * stack, NULL for None. */
int tn_ivalue_doubles(const struct tn_op *op, const struct tn_ivalue *st, int n, int i,
                      const double **data, int *len)
{
    const struct tn_ivalue *v = get(st, n, i);
    *data = NULL;
    *len = 0;
    if (!v)
        return op->args[i].optional ? TN_OK : missing(op, i);
    if (v->tag != TN_IV_DOUBLELIST || v->v.doubles.n < 0 || (v->v.doubles.n && !v->v.doubles.data))
        return bad(op, i, "tuple of floats");
    *data = v->v.doubles.data;
    *len = v->v.doubles.n;
    return TN_OK;
}

/* Contract in tensor/dispatch.h: a Device parsed from its text. */
int tn_ivalue_device(const struct tn_op *op, const struct tn_ivalue *st, int n, int i,
                     struct tn_device *out)
{
    const char *s;
    if (tn_ivalue_str(op, st, n, i, &s) < 0)
        return bad(op, i, "torch.device");
    if (!s)
        return missing(op, i);
    return tn_device_parse(s, out) < 0 ? bad(op, i, "torch.device") : TN_OK;
}

/* Contract in tensor/dispatch.h: releases each tensor, frees the array. */
void tn_release_list(struct tn_tensor **list, int n)
{
    for (int i = 0; list && i < n; i++)
        tn_release(list[i]);
    free(list);
}

/* Contract in tensor/dispatch.h: drops what a result value owns. */
void tn_ivalue_release(struct tn_ivalue *v)
{
    if (v->tag == TN_IV_TENSOR)
        tn_release(v->v.t);
    else if (v->tag == TN_IV_TENSORLIST)
        tn_release_list((struct tn_tensor **)v->v.tensors.data, v->v.tensors.n);
    *v = (struct tn_ivalue){.tag = TN_IV_NONE};
}

/* ------------------------------------------------ boxed trampolines */

/* An optional value: NULL for None, else read into buf. */
#define TN_UNBOX_OPT(getter, field)                                                \
    do {                                                                            \
        if (i < n && st[i].tag != TN_IV_NONE) {                                     \
            if (getter(op, st, n, i, &x->buf.field) < 0)                            \
                return tn_last_status();                                            \
            x->v.p = &x->buf.field;                                                 \
        }                                                                           \
    } while (0)

/* A number or a bool: a pointer to it when optional, else the value. */
#define TN_UNBOX_VALUE(getter, field)                                              \
    do {                                                                            \
        if (s->optional)                                                            \
            TN_UNBOX_OPT(getter, field);                                            \
        else                                                                        \
            rc = getter(op, st, n, i, &x->v.field);                                 \
    } while (0)

/* Contract in tensor/dispatch.h: each argument read by its schema tag;
 * the stack is the caller's (borrowed, untrusted in its tags). */
int tn_dispatch_unbox(const struct tn_op *op, const struct tn_ivalue *st, int n,
                      struct tn_dispatch_arg *a)
{
    for (int i = 0; i < op->nargs; i++) {
        const struct tn_arg_schema *s = &op->args[i];
        struct tn_dispatch_arg *x = &a[i];
        x->v.p = NULL;
        x->len = 0;
        int rc = TN_OK;
        switch (s->tag) {
        case TN_IV_TENSOR: {
            struct tn_tensor *t;
            rc = tn_ivalue_tensor(op, st, n, i, &t);
            x->v.p = t;
            break;
        }
        case TN_IV_TENSORLIST:
            if (i >= n || st[i].tag != TN_IV_TENSORLIST || st[i].v.tensors.n < 0)
                return tn_set_error(TN_EINVAL, "%s: argument '%s' (position %d) must be a list "
                                    "of tensors", op->qualname, s->name, i + 1);
            x->v.p = (void *)st[i].v.tensors.data;
            x->len = st[i].v.tensors.n;
            break;
        case TN_IV_OPTTENSORLIST: {
            const struct tn_tensor *const *d;
            rc = tn_ivalue_opt_tensors(op, st, n, i, &d, &x->len);
            x->v.p = (void *)d;
            break;
        }
        case TN_IV_DOUBLELIST: {
            const double *d;
            rc = tn_ivalue_doubles(op, st, n, i, &d, &x->len);
            x->v.p = (void *)d;
            break;
        }
        case TN_IV_INTLIST: {
            const int64_t *d;
            if (tn_ivalue_ints(op, st, n, i, x->buf.ints, &d, &x->len) < 0)
                return tn_last_status();
            x->v.p = (void *)d;
            if (strncmp(s->type, "bool", 4))
                break;
            /* bool[]: boxed as 0/1 ints */
            if (x->len > TN_MAX_DIMS)
                return tn_set_error(TN_EINVAL, "%s: too many bools for %s", op->qualname, s->name);
            bool b[TN_MAX_DIMS];
            for (int k = 0; k < x->len; k++)
                b[k] = d[k] != 0;
            memcpy(x->buf.bools, b, sizeof b);
            x->v.p = x->buf.bools;
            break;
        }
        case TN_IV_SCALAR:
            TN_UNBOX_VALUE(tn_ivalue_scalar, s);
            break;
        case TN_IV_INT: /* Layout? and MemoryFormat? too */
            TN_UNBOX_VALUE(tn_ivalue_int, i);
            break;
        case TN_IV_DOUBLE:
            TN_UNBOX_VALUE(tn_ivalue_double, d);
            break;
        case TN_IV_BOOL:
            TN_UNBOX_VALUE(tn_ivalue_bool, b);
            break;
        case TN_IV_STR:
            if (!strncmp(s->type, "Device", 6)) { /* a pointer, NULL for an absent optional one */
                if (s->optional) {
                    TN_UNBOX_OPT(tn_ivalue_device, dev);
                    break;
                }
                rc = tn_ivalue_device(op, st, n, i, &x->buf.dev);
                x->v.p = &x->buf.dev;
                break;
            }
            const char *str;
            rc = tn_ivalue_str(op, st, n, i, &str);
            x->v.p = (void *)str;
            break;
        case TN_IV_DTYPE:
            rc = tn_ivalue_dtype(op, st, n, i, &x->v.dt);
            break;
        default:
            return tn_set_error(TN_EINVAL, "%s: argument '%s' has no boxed form", op->qualname,
                                s->name);
        }
        if (rc < 0)
            return tn_last_status();
    }
    return TN_OK;
}

/* Contract in tensor/dispatch.h: results onto the stack, which takes their
 * references. */
int tn_dispatch_box(const struct tn_op *op, struct tn_ivalue *st, const struct tn_dispatch_arg *a,
                    int rc, struct tn_tensor **r, enum tn_box_form form)
{
    if (rc < 0)
        return rc;
    switch (form) {
    case TN_BOX_TENSOR:
        st[0] = (struct tn_ivalue){.tag = TN_IV_TENSOR, .v.t = r[0]};
        return 1;
    case TN_BOX_LIST: /* the result owns the array and its references */
        st[0] = (struct tn_ivalue){.tag = TN_IV_TENSORLIST, .v.tensors = {r, rc}};
        return 1;
    case TN_BOX_TUPLE:
        for (int i = 0; i < op->nrets; i++) /* an output not asked for is None */
            st[i] = (struct tn_ivalue){.tag = r[i] ? TN_IV_TENSOR : TN_IV_NONE, .v.t = r[i]};
        return op->nrets;
    case TN_BOX_STATUS:
        break;
    }
    /* in-place: self; out=: the arguments from the first mutable keyword-only one */
    int first = 0;
    if (!(op->nargs && op->args[0].mutable_ && !op->args[0].kwonly))
        while (first < op->nargs && !(op->args[first].mutable_ && op->args[first].kwonly))
            first++;
    for (int i = 0; i < op->nrets; i++) {
        int k = op->args[0].mutable_ && !op->args[0].kwonly ? 0 : first + i;
        st[i] = (struct tn_ivalue){.tag = TN_IV_TENSOR, .v.t = tn_retain(a[k].v.p)};
    }
    return op->nrets;
}

/* Contract in tensor/dispatch.h. */
int tn_dispatch_boxed(const struct tn_op *op, struct tn_ivalue *st, int n,
                      tn_dispatch_typed_call call, enum tn_box_form form)
{
    struct tn_dispatch_arg a[TN_DISPATCH_MAX_ARGS];
    if (op->nargs > TN_DISPATCH_MAX_ARGS || op->nrets > TN_DISPATCH_MAX_RETS)
        return tn_set_error(TN_EINVAL, "%s: more than %d arguments or %d results", op->qualname,
                            TN_DISPATCH_MAX_ARGS, TN_DISPATCH_MAX_RETS);
    if (tn_dispatch_unbox(op, st, n, a) < 0)
        return tn_last_status();
    struct tn_tensor *r[TN_DISPATCH_MAX_RETS] = {NULL}, **list = NULL;
    int rc = call(op, a, r, &list);
    return tn_dispatch_box(op, st, a, rc, form == TN_BOX_LIST ? list : r, form);
}
