/*
 * bin/tckpt/diff.c: tckpt diff: every value of two checkpoints compared
 * by key path (tensors by dtype, shape and elements within tolerances,
 * other values by Python's ==), or only the tensors (--only-tensors), or
 * a subtree against a bare state dict (--prefix).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tckpt.h"

/* One finding of diff, printed as text or gathered as JSON. */
static bool diff_first = true;

static void diff_json_item(const char *kind, const char *name)
{
    printf("%s{\"kind\":\"%s\",\"name\":", diff_first ? "" : ",", kind);
    json_string_out(stdout, name);
    diff_first = false;
}

/* A side's leaves by path: every value, or only tensors; under --prefix
 * only the paths that start with it (stripped), when any does. */
struct leaves {
    struct entries tensors; /* the tensors, for find() */
    char **name;
    const struct tn_value **v;
    size_t n, cap;
    size_t values; /* non-tensor leaves */
};

static int add_leaf(const char *path, const struct tn_value *v, void *ctx)
{
    struct leaves *l = ctx;
    if (opt.only_tensors && v->kind != TN_VALUE_TENSOR)
        return 0;
    if (opt.prefix) {
        size_t pl = strlen(opt.prefix);
        if (strncmp(path, opt.prefix, pl))
            return 0;
        path += pl;
    }
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->name = realloc(l->name, l->cap * sizeof *l->name);
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        if (!l->name || !l->v) {
            fprintf(stderr, "tckpt: out of memory\n");
            exit(2);
        }
    }
    l->name[l->n] = strdup(path);
    l->v[l->n++] = v;
    if (v->kind == TN_VALUE_TENSOR)
        return collect(path, v->v.tensor, &l->tensors);
    l->values++;
    return 0;
}

static int has_prefix(const char *path, const struct tn_value *v, void *ctx)
{
    (void)v;
    (void)ctx;
    return !strncmp(path, opt.prefix, strlen(opt.prefix));
}

static void leaves_of(const struct tn_value *root, struct leaves *l)
{
    const char *prefix = opt.prefix;
    /* a bare state dict is compared whole */
    if (prefix && tn_value_walk(root, has_prefix, NULL) <= 0)
        opt.prefix = NULL;
    if (tn_value_walk(root, add_leaf, l) < 0)
        die_input();
    opt.prefix = prefix;
}

static void leaves_free(struct leaves *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->name[i]);
    free(l->name);
    free(l->v);
    entries_free(&l->tensors);
}

/* The first leaf named `name` (through the tensors' sorted index for
 * tensors; a linear search for the few other values). */
static const struct tn_value *leaf(struct leaves *l, const char *name, bool *tensor)
{
    const struct entry *e = find(&l->tensors, name);
    *tensor = e != NULL;
    if (e)
        return NULL;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i]->kind != TN_VALUE_TENSOR && !strcmp(l->name[i], name))
            return l->v[i];
    return NULL;
}

static bool values_equal(const struct tn_value *x, const struct tn_value *y)
{
    if (x->kind == TN_VALUE_FLOAT && y->kind == TN_VALUE_FLOAT) {
        if (isnan(x->v.f) || isnan(y->v.f))
            return isnan(x->v.f) && isnan(y->v.f);
        if (isinf(x->v.f) || isinf(y->v.f))
            return x->v.f == y->v.f;
        return fabs(x->v.f - y->v.f) <= opt.atol + opt.rtol * fabs(y->v.f);
    }
    if (x->kind == TN_VALUE_GLOBAL || y->kind == TN_VALUE_GLOBAL || x->kind == TN_VALUE_OPAQUE ||
        y->kind == TN_VALUE_OPAQUE)
        return x->kind == y->kind && !strcmp(x->v.str.s, y->v.str.s);
    if (x->kind == TN_VALUE_TUPLE || x->kind == TN_VALUE_LIST || x->kind == TN_VALUE_DICT ||
        x->kind == TN_VALUE_ODICT || x->kind == TN_VALUE_STORAGE)
        return x->kind == y->kind; /* leaves: empty containers */
    return tn_value_key_equal(x, y);
}

/* A non-tensor value differs (or a tensor against a value). */
static void value_differs(const char *name, const struct tn_value *x, const struct tn_value *y)
{
    char a[512], b[512];
    if (opt.json) {
        diff_json_item("value", name);
        printf(",\"a\":");
        json_value_out(x);
        printf(",\"b\":");
        json_value_out(y);
        printf("}");
    } else {
        printf("%s: %s -> %s\n", name, value_repr(x, a, sizeof a), value_repr(y, b, sizeof b));
    }
}

/* Compares two tensors of the same name; 1 when they differ (printed). */
static int tensors_differ(const char *name, struct tn_tensor *x, struct tn_tensor *y)
{
    int differ = 0;
    char s1[256], s2[256];
    if (x->dtype != y->dtype) {
        differ = 1;
        if (opt.json) {
            diff_json_item("dtype", name);
            printf(",\"a_dtype\":\"%s\",\"b_dtype\":\"%s\"}", tn_dtype_name(x->dtype),
                   tn_dtype_name(y->dtype));
        } else {
            printf("%s: dtype %s -> %s\n", name, tn_dtype_name(x->dtype),
                   tn_dtype_name(y->dtype));
        }
    }
    if (x->ndim != y->ndim || memcmp(x->sizes, y->sizes, sizeof(int64_t) * (size_t)x->ndim)) {
        differ = 1;
        tn_shape_format(x->sizes, x->ndim, s1, sizeof s1);
        tn_shape_format(y->sizes, y->ndim, s2, sizeof s2);
        if (opt.json) {
            diff_json_item("shape", name);
            printf(",\"a_shape\":%s,\"b_shape\":%s}", s1, s2);
        } else {
            printf("%s: shape %s -> %s\n", name, s1, s2);
        }
        return differ;
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
        if (isinf(p) || isinf(q)) { /* an infinity only equals itself (allclose) */
            bad++;
            maxabs = maxrel = INFINITY;
            continue;
        }
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
            diff_json_item("values", name);
            printf(",\"mismatched\":%lld,\"numel\":%lld,\"max_abs\":", (long long)bad,
                   (long long)n);
            json_number_out(maxabs);
            printf(",\"max_rel\":");
            json_number_out(maxrel);
            printf("}");
        } else {
            printf("%s: %lld of %lld elements differ (max abs %.6g, max rel %.6g)\n",
                   name, (long long)bad, (long long)n, maxabs, maxrel);
        }
    }
    tn_release(cx);
    tn_release(cy);
    return differ;
}

int cmd_diff(const char *a, const char *b)
{
    struct input ia, ib;
    input_load_or_die(&ia, a);
    input_load_or_die(&ib, b);
    struct leaves la = {0}, lb = {0};
    leaves_of(ia.v, &la);
    leaves_of(ib.v, &lb);
    int differ = 0;
    if (opt.json) {
        printf("{\"a\":");
        json_string_out(stdout, a);
        printf(",\"b\":");
        json_string_out(stdout, b);
        printf(",\"differences\":[");
    }
    for (int side = 0; side < 2; side++) {
        struct leaves *x = side ? &lb : &la, *y = side ? &la : &lb;
        for (size_t i = 0; i < x->n; i++) {
            bool t;
            if (leaf(y, x->name[i], &t) || t)
                continue;
            differ = 1;
            if (opt.json) {
                diff_json_item(side ? "only_in_b" : "only_in_a", x->name[i]);
                printf("}");
            } else {
                printf("only in %s: %s\n", side ? b : a, x->name[i]);
            }
        }
    }
    for (size_t i = 0; i < la.n; i++) {
        bool tb;
        const struct tn_value *vb = leaf(&lb, la.name[i], &tb);
        const struct tn_value *va = la.v[i];
        if (!vb && !tb)
            continue;
        if (va->kind == TN_VALUE_TENSOR && tb) {
            differ |= tensors_differ(la.name[i], va->v.tensor, find(&lb.tensors, la.name[i])->t);
        } else if (va->kind == TN_VALUE_TENSOR || tb) {
            struct tn_value *other = tb ? tn_value_tensor(find(&lb.tensors, la.name[i])->t) : NULL;
            value_differs(la.name[i], va, tb ? other : vb);
            tn_value_release(other);
            differ = 1;
        } else if (!values_equal(va, vb)) {
            value_differs(la.name[i], va, vb);
            differ = 1;
        }
    }
    size_t na = la.tensors.n, nb = lb.tensors.n;
    if (opt.json) {
        printf("],\"tensors_a\":%zu,\"tensors_b\":%zu,\"values_a\":%zu,\"values_b\":%zu,"
               "\"differ\":%s}\n", na, nb, la.values, lb.values, differ ? "true" : "false");
    } else if (!differ) {
        char t[64], v[64];
        printf("%s and %s: %s match%s", a, b, plural(na, "tensor", t, sizeof t), na == 1 ? "es" : "");
        if (la.values)
            printf("; %s equal", plural(la.values, "other value", v, sizeof v));
        printf("\n");
    }
    leaves_free(&la);
    leaves_free(&lb);
    input_free(&ia);
    input_free(&ib);
    return differ;
}
