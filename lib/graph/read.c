/*
 * graph/read.c: JSON text -> struct tn_graph, with jansson. Checks the
 * structure only (objects where objects belong, the union arms we
 * implement, limits); the ops and shapes are tn_graph_check's.
 */
#include "graph/internal.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A float of the graph: a JSON number, or the strings "Infinity",
 * "-Infinity" and "NaN" that torch.export's serializer writes for the
 * values JSON cannot hold. false for anything else. */
static bool json_float(const json_t *v, double *out)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return true;
    }
    const char *s = json_string_value(v);
    if (!s)
        return false;
    if (!strcmp(s, "Infinity") || !strcmp(s, "-Infinity")) {
        *out = s[0] == '-' ? -INFINITY : INFINITY;
        return true;
    }
    if (!strcmp(s, "NaN")) {
        *out = NAN;
        return true;
    }
    return false;
}

#define MAX_NAME 1024

/* torch.export's ScalarType numbers (torch/_export/serde/schema.py). */
static const struct { int st; enum tn_dtype dt; } scalar_types[] = {
    {1, TN_UINT8}, {2, TN_INT8}, {3, TN_INT16}, {4, TN_INT32}, {5, TN_INT64},
    {6, TN_FLOAT16}, {7, TN_FLOAT32}, {8, TN_FLOAT64}, {10, TN_COMPLEX64}, {11, TN_COMPLEX128},
    {12, TN_BOOL}, {13, TN_BFLOAT16},
};
/* Older writers used the enum's names. */
static const char *const scalar_type_names[] = {
    [1] = "BYTE", [2] = "CHAR", [3] = "SHORT", [4] = "INT", [5] = "LONG", [6] = "HALF",
    [7] = "FLOAT", [8] = "DOUBLE", [10] = "COMPLEXFLOAT", [11] = "COMPLEXDOUBLE", [12] = "BOOL",
    [13] = "BFLOAT16",
};

enum tn_dtype tn_graph_dtype(int st)
{
    for (size_t i = 0; i < sizeof scalar_types / sizeof *scalar_types; i++)
        if (scalar_types[i].st == st)
            return scalar_types[i].dt;
    return TN_DTYPE_UNSET;
}

int tn_graph_scalar_type(enum tn_dtype dt)
{
    for (size_t i = 0; i < sizeof scalar_types / sizeof *scalar_types; i++)
        if (scalar_types[i].dt == dt)
            return scalar_types[i].st;
    return 0;
}

/* An enum field: an integer, or the enum member's name. */
static int enum_number(json_t *j, const char *const *names, int nnames)
{
    if (json_is_integer(j))
        return json_integer_value(j) < 0 || json_integer_value(j) > 1000
                   ? -1 : (int)json_integer_value(j);
    if (json_is_string(j))
        for (int i = 0; i < nnames; i++)
            if (names[i] && !strcmp(names[i], json_string_value(j)))
                return i;
    return -1;
}

/* ------------------------------------------------------------ the index */

static unsigned long hash_name(const char *s)
{
    unsigned long h = 1469598103934665603ul;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ul;
    return h;
}

static int index_grow(struct tn_graph *g)
{
    struct tn_graph_index *ix = g->priv;
    size_t cap = ix->cap ? ix->cap * 2 : 256;
    int *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return tn_set_error(TN_ENOMEM, "%s: out of memory indexing names", g->label);
    for (size_t i = 0; i < ix->cap; i++) {
        if (!ix->slots[i])
            continue;
        size_t h = hash_name(g->values[ix->slots[i] - 1].name) & (cap - 1);
        while (slots[h])
            h = (h + 1) & (cap - 1);
        slots[h] = ix->slots[i];
    }
    free(ix->slots);
    ix->slots = slots;
    ix->cap = cap;
    return TN_OK;
}

int tn_graph_find_value(const struct tn_graph *g, const char *name)
{
    const struct tn_graph_index *ix = g->priv;
    if (!ix || !ix->cap)
        return -1;
    for (size_t h = hash_name(name) & (ix->cap - 1); ix->slots[h]; h = (h + 1) & (ix->cap - 1))
        if (!strcmp(g->values[ix->slots[h] - 1].name, name))
            return ix->slots[h] - 1;
    return -1;
}

int tn__graph_reindex(struct tn_graph *g)
{
    struct tn_graph_index *ix = g->priv;
    memset(ix->slots, 0, ix->cap * sizeof *ix->slots);
    for (int v = 0; v < g->nvalues; v++) {
        size_t h = hash_name(g->values[v].name) & (ix->cap - 1);
        while (ix->slots[h])
            h = (h + 1) & (ix->cap - 1);
        ix->slots[h] = v + 1;
    }
    return TN_OK;
}

int tn__graph_intern(struct tn_graph *g, const char *name)
{
    int v = tn_graph_find_value(g, name);
    if (v >= 0)
        return v;
    struct tn_graph_index *ix = g->priv;
    if (g->nvalues >= g->limits.max_values)
        return tn_set_error(TN_ENOMEM, "%s: more than %d values", g->label, g->limits.max_values);
    if ((size_t)(g->nvalues + 1) * 2 > ix->cap && index_grow(g) < 0)
        return TN_ENOMEM;
    int n = g->nvalues;
    if (n == ix->vcap) {
        int cap = n ? 2 * n : 16;
        void *p = realloc(g->values, (size_t)cap * sizeof *g->values);
        if (!p)
            return tn_set_error(TN_ENOMEM, "%s: out of memory", g->label);
        g->values = p;
        ix->vcap = cap;
    }
    struct tn_graph_value *val = &g->values[n];
    memset(val, 0, sizeof *val);
    val->name = strdup(name);
    if (!val->name)
        return tn_set_error(TN_ENOMEM, "%s: out of memory", g->label);
    val->def = TN_GRAPH_UNDEFINED;
    val->last_use = -1;
    val->dtype = TN_DTYPE_UNSET;
    g->nvalues++;
    size_t h = hash_name(name) & (ix->cap - 1);
    while (ix->slots[h])
        h = (h + 1) & (ix->cap - 1);
    ix->slots[h] = n + 1;
    return n;
}

/* ------------------------------------------------------------ parsing */

struct reader {
    struct tn_graph *g;
    /* what is being read, for messages: a section ("signature"), or with
     * item or idx >= 0 one of its items ("node 'mul'", "node 3") */
    const char *where;
    const char *item;
    int idx;
};

/* Where r is, without formatting it for every node of a large graph. */
static void at(struct reader *r, const char *where, const char *item, int idx)
{
    r->where = where;
    r->item = item;
    r->idx = idx;
}

static int fail(struct reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct reader *r, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (r->item)
        return tn_set_error(TN_EFORMAT, "%s: %s '%s': %s", r->g->label, r->where, r->item, msg);
    if (r->idx >= 0)
        return tn_set_error(TN_EFORMAT, "%s: %s %d: %s", r->g->label, r->where, r->idx, msg);
    return tn_set_error(TN_EFORMAT, "%s: %s: %s", r->g->label, r->where, msg);
}

static const char *name_of(struct reader *r, json_t *j, const char *what)
{
    const char *s = json_string_value(j);
    if (!s || !*s || strlen(s) > MAX_NAME) {
        fail(r, "%s must be a name (a string of 1 to %d bytes)", what, MAX_NAME);
        return NULL;
    }
    return s;
}

/* The only key of a one-key union object; NULL after an error. */
static const char *union_arm(struct reader *r, json_t *j, const char *what, json_t **val)
{
    if (!json_is_object(j) || json_object_size(j) != 1) {
        fail(r, "%s must be an object with exactly one key (a union)", what);
        return NULL;
    }
    const char *k;
    json_t *v;
    json_object_foreach(j, k, v) {
        *val = v;
        return k;
    }
    return NULL;
}

/* {"name": "x"} -> the value's index. */
static int tensor_ref(struct reader *r, json_t *j, const char *what)
{
    const char *n = name_of(r, json_object_get(j, "name"), what);
    return n ? tn__graph_intern(r->g, n) : TN_EFORMAT;
}

/* A SymInt argument: {"as_name": "sym"} or {"as_int": 3}; a SymFloat's
 * {"as_name"} or {"as_float": 0.5}; a SymBool's {"as_name"} or {"as_bool"}. */
static int sym_item(struct reader *r, json_t *j, struct tn_graph_item *it,
                    enum tn_graph_sym_type type)
{
    static const char *const what[] = {"a SymInt", "a SymFloat", "a SymBool"};
    static const char *const constant[] = {"as_int", "as_float", "as_bool"};
    json_t *v;
    const char *arm = union_arm(r, j, what[type], &v);
    if (!arm)
        return TN_EFORMAT;
    it->value = -1;
    if (!strcmp(arm, constant[type])) {
        if (type == TN_GSYM_INT && json_is_integer(v))
            it->i = json_integer_value(v);
        else if (type == TN_GSYM_BOOL && json_is_boolean(v))
            it->i = json_is_true(v);
        else if (type != TN_GSYM_FLOAT || !json_float(v, &it->f))
            return fail(r, "%s: %s holds no such value", what[type], arm);
        return TN_OK;
    }
    if (!strcmp(arm, "as_name")) {
        const char *n = name_of(r, v, "as_name");
        if (!n)
            return TN_EFORMAT;
        int k = tn__graph_intern(r->g, n);
        if (k < 0)
            return k;
        r->g->values[k].is_sym = true;
        r->g->values[k].sym_type = type;
        it->value = k;
        return TN_OK;
    }
    return fail(r, "%s must be {\"%s\": x} or {\"as_name\": s}, not '%s'", what[type],
                constant[type], arm);
}

static int alloc_items(struct reader *r, struct tn_graph_arg *a, size_t n)
{
    if (n > (size_t)r->g->limits.max_args)
        return fail(r, "a list of %zu items (the limit is %d)", n, r->g->limits.max_args);
    a->n = (int)n;
    a->items = calloc(n ? n : 1, sizeof *a->items);
    if (!a->items)
        return tn_set_error(TN_ENOMEM, "%s: out of memory", r->g->label);
    for (size_t i = 0; i < (n ? n : 1); i++)
        a->items[i].value = -1;
    return TN_OK;
}

static int parse_list(struct reader *r, json_t *v, struct tn_graph_arg *a, const char *arm)
{
    if (!json_is_array(v))
        return fail(r, "%s must be a list", arm);
    int rc = alloc_items(r, a, json_array_size(v));
    if (rc < 0)
        return rc;
    for (int i = 0; i < a->n; i++) {
        json_t *e = json_array_get(v, (size_t)i);
        struct tn_graph_item *it = &a->items[i];
        switch (a->kind) {
        case TN_GARG_TENSORS:
            if (!strcmp(arm, "as_optional_tensors")) {
                json_t *ev;
                const char *ea = union_arm(r, e, "an optional tensor", &ev);
                if (!ea)
                    return TN_EFORMAT;
                if (!strcmp(ea, "as_none"))
                    continue;
                if (strcmp(ea, "as_tensor"))
                    return fail(r, "an optional tensor must be as_tensor or as_none, not %s", ea);
                e = ev;
            }
            if ((it->value = tensor_ref(r, e, "a tensor")) < 0)
                return it->value;
            break;
        case TN_GARG_INTS:
            if (!strcmp(arm, "as_sym_ints")) {
                if ((rc = sym_item(r, e, it, TN_GSYM_INT)) < 0)
                    return rc;
            } else if (json_is_integer(e)) {
                it->i = json_integer_value(e);
            } else {
                return fail(r, "as_ints must hold integers");
            }
            break;
        case TN_GARG_FLOATS:
            if (!json_float(e, &it->f))
                return fail(r, "as_floats must hold numbers");
            break;
        case TN_GARG_BOOLS:
            if (!json_is_boolean(e))
                return fail(r, "as_bools must hold booleans");
            it->i = json_is_true(e);
            break;
        default:
            TN_ASSERT(0);
        }
    }
    return TN_OK;
}

/* One Argument union into a; see parse_arg. */
static int parse_arg_inner(struct reader *r, json_t *j, struct tn_graph_arg *a)
{
    json_t *v;
    int rc;
    memset(a, 0, sizeof *a); /* before anything can fail: parse_arg frees what a holds */
    const char *arm = union_arm(r, j, "an argument", &v);
    if (!arm)
        return TN_EFORMAT;
    if (!strcmp(arm, "as_none")) {
        a->kind = TN_GARG_NONE;
        return TN_OK;
    }
    if (!strcmp(arm, "as_tensor")) {
        a->kind = TN_GARG_TENSOR;
        if ((rc = alloc_items(r, a, 1)) < 0)
            return rc;
        a->items[0].value = tensor_ref(r, v, "as_tensor");
        return a->items[0].value < 0 ? a->items[0].value : TN_OK;
    }
    if (!strcmp(arm, "as_optional_tensor")) {
        json_t *ov;
        const char *oa = union_arm(r, v, "as_optional_tensor", &ov);
        if (!oa)
            return TN_EFORMAT;
        if (!strcmp(oa, "as_none"))
            return TN_OK;
        a->kind = TN_GARG_TENSOR;
        if ((rc = alloc_items(r, a, 1)) < 0)
            return rc;
        a->items[0].value = tensor_ref(r, ov, "as_optional_tensor");
        return a->items[0].value < 0 ? a->items[0].value : TN_OK;
    }
    static const struct { const char *arm; enum tn_garg_kind kind; } lists[] = {
        {"as_tensors", TN_GARG_TENSORS}, {"as_optional_tensors", TN_GARG_TENSORS},
        {"as_ints", TN_GARG_INTS}, {"as_sym_ints", TN_GARG_INTS},
        {"as_floats", TN_GARG_FLOATS}, {"as_bools", TN_GARG_BOOLS},
    };
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
        if (!strcmp(arm, lists[i].arm)) {
            a->kind = lists[i].kind;
            return parse_list(r, v, a, arm);
        }
    if ((rc = alloc_items(r, a, 1)) < 0)
        return rc;
    struct tn_graph_item *it = &a->items[0];
    if (!strcmp(arm, "as_int") && json_is_integer(v)) {
        a->kind = TN_GARG_INT;
        it->i = json_integer_value(v);
    } else if (!strcmp(arm, "as_sym_int")) {
        a->kind = TN_GARG_INT;
        return sym_item(r, v, it, TN_GSYM_INT);
    } else if (!strcmp(arm, "as_sym_bool")) {
        /* a SymBool (the size checks export writes for data-dependent
         * sizes: u0 >= 0 into _assert_scalar; item() of a bool tensor):
         * an int of 0 or 1, written back as as_sym_bool */
        a->kind = TN_GARG_INT;
        a->sym_bool = true;
        return sym_item(r, v, it, TN_GSYM_BOOL);
    } else if (!strcmp(arm, "as_sym_float")) {
        a->kind = TN_GARG_FLOAT; /* item() of a floating tensor, and what follows */
        return sym_item(r, v, it, TN_GSYM_FLOAT);
    } else if (!strcmp(arm, "as_float") && json_float(v, &it->f)) {
        a->kind = TN_GARG_FLOAT;
    } else if (!strcmp(arm, "as_bool") && json_is_boolean(v)) {
        a->kind = TN_GARG_BOOL;
        it->i = json_is_true(v);
    } else if (!strcmp(arm, "as_string") && json_is_string(v)) {
        a->kind = TN_GARG_STRING;
        if (!(a->s = strdup(json_string_value(v))))
            return tn_set_error(TN_ENOMEM, "%s: out of memory", r->g->label);
    } else if (!strcmp(arm, "as_scalar_type")) {
        int st = enum_number(v, scalar_type_names, 14);
        a->kind = TN_GARG_DTYPE;
        it->i = tn_graph_dtype(st);
        if (it->i == TN_DTYPE_UNSET)
            return fail(r, "unsupported scalar type %s", json_is_string(v) ? json_string_value(v)
                                                                            : "(a number)");
    } else if (!strcmp(arm, "as_device")) {
        const char *t = json_string_value(json_object_get(v, "type"));
        json_t *ix = json_object_get(v, "index");
        char buf[64];
        if (!t || strlen(t) > 16)
            return fail(r, "as_device needs a type");
        if (json_is_integer(ix))
            snprintf(buf, sizeof buf, "%s:%lld", t, (long long)json_integer_value(ix));
        else
            snprintf(buf, sizeof buf, "%s", t);
        a->kind = TN_GARG_DEVICE;
        if (!(a->s = strdup(buf)))
            return tn_set_error(TN_ENOMEM, "%s: out of memory", r->g->label);
    } else if (!strcmp(arm, "as_layout") || !strcmp(arm, "as_memory_format")) {
        a->kind = arm[3] == 'l' ? TN_GARG_LAYOUT : TN_GARG_MEMORY_FORMAT;
        it->i = json_is_integer(v) ? json_integer_value(v) : 0;
    } else {
        return fail(r, "the argument kind '%s' is not supported%s", arm,
                    !strcmp(arm, "as_graph") ? " (control flow: run it eagerly in PyTorch)" : "");
    }
    return TN_OK;
}

/* One Argument union into a; on failure a holds nothing to free. */
static int parse_arg(struct reader *r, json_t *j, struct tn_graph_arg *a)
{
    int rc = parse_arg_inner(r, j, a);
    if (rc < 0) {
        free(a->items);
        free(a->s);
        memset(a, 0, sizeof *a);
    }
    return rc;
}

static int parse_node(struct reader *r, json_t *j, struct tn_graph_node *n, int idx)
{
    json_t *name = json_object_get(j, "name");
    json_t *outs = json_object_get(j, "outputs");
    json_t *ins = json_object_get(j, "inputs");
    json_t *target = json_object_get(j, "target");
    json_t *meta = json_object_get(j, "metadata");
    int rc;
    if (!json_is_object(j))
        return fail(r, "node %d must be an object", idx);
    at(r, "node", NULL, idx);
    if (json_is_string(name) && json_string_length(name) <= MAX_NAME) {
        n->name = strdup(json_string_value(name));
        r->item = n->name;
    }
    if (!json_is_string(target) || json_string_length(target) > MAX_NAME)
        return fail(r, "target must be a string");
    if (!(n->target = strdup(json_string_value(target))))
        return TN_ENOMEM;
    if (!json_is_array(ins) || !json_is_array(outs))
        return fail(r, "inputs and outputs must be lists");
    if (json_array_size(ins) > (size_t)r->g->limits.max_args ||
        json_array_size(outs) > (size_t)r->g->limits.max_args)
        return fail(r, "more than %d inputs or outputs", r->g->limits.max_args);
    n->in = calloc(json_array_size(ins) + 1, sizeof *n->in);
    n->outs = calloc(json_array_size(outs) + 1, sizeof *n->outs);
    if (!n->in || !n->outs)
        return tn_set_error(TN_ENOMEM, "%s: out of memory", r->g->label);
    for (size_t i = 0; i < json_array_size(ins); i++) {
        json_t *e = json_array_get(ins, i);
        const char *an = name_of(r, json_object_get(e, "name"), "an input's name");
        if (!an)
            return TN_EFORMAT;
        struct tn_graph_input *in = &n->in[n->nin++];
        if (!(in->name = strdup(an)))
            return TN_ENOMEM;
        json_t *kind = json_object_get(e, "kind");
        in->kind = json_is_integer(kind) ? (int)json_integer_value(kind) : 1;
        if ((rc = parse_arg(r, json_object_get(e, "arg"), &in->arg)) < 0)
            return rc;
    }
    for (size_t i = 0; i < json_array_size(outs); i++) {
        struct tn_graph_arg a;
        json_t *e = json_array_get(outs, i);
        if ((rc = parse_arg(r, e, &a)) < 0)
            return rc;
        /* as_tensors (a tuple result): one output per item */
        int nitems = a.kind == TN_GARG_NONE ? 1 : a.n;
        if (a.kind != TN_GARG_NONE && a.kind != TN_GARG_TENSOR && a.kind != TN_GARG_TENSORS &&
            !((a.kind == TN_GARG_INT || a.kind == TN_GARG_FLOAT) && a.items[0].value >= 0)) {
            free(a.items);
            free(a.s);
            return fail(r, "an output must be a tensor, a list of tensors, a SymInt, a "
                        "SymFloat, a SymBool or None");
        }
        int *grown = realloc(n->outs, (size_t)(n->nout + nitems + 1) * sizeof *n->outs);
        if (!grown) {
            free(a.items);
            return TN_ENOMEM;
        }
        n->outs = grown;
        for (int k = 0; k < nitems; k++)
            n->outs[n->nout++] = a.kind == TN_GARG_NONE ? -1 : a.items[k].value;
        free(a.items);
        free(a.s);
    }
    if (!n->name && n->nout > 0 && n->outs[0] >= 0)
        n->name = strdup(r->g->values[n->outs[0]].name);
    if (!n->name) {
        if (!(n->name = malloc(32)))
            return TN_ENOMEM;
        snprintf(n->name, 32, "node%d", idx);
    }
    if (json_is_object(meta)) {
        const char *k;
        json_t *v;
        n->meta = calloc(json_object_size(meta) + 1, sizeof *n->meta);
        if (!n->meta)
            return TN_ENOMEM;
        json_object_foreach(meta, k, v) {
            if (!json_is_string(v))
                continue;
            n->meta[n->nmeta].key = strdup(k);
            n->meta[n->nmeta].val = strdup(json_string_value(v));
            if (!n->meta[n->nmeta].key || !n->meta[n->nmeta].val)
                return TN_ENOMEM;
            n->nmeta++;
        }
    }
    return TN_OK;
}

static int parse_sym(struct reader *r, json_t *j, struct tn_graph_value *v, int d)
{
    json_t *x;
    const char *arm = union_arm(r, j, "a size", &x);
    if (!arm)
        return TN_EFORMAT;
    if (!strcmp(arm, "as_int") && json_is_integer(x)) {
        v->sizes[d] = json_integer_value(x);
        if (v->sizes[d] < 0)
            return fail(r, "size %d is negative (%lld)", d, (long long)v->sizes[d]);
        return TN_OK;
    }
    if (!strcmp(arm, "as_expr")) {
        /* {"expr_str": "s0", "hint": {"as_int": 4}} (hint may be absent) */
        json_t *e = json_object_get(x, "expr_str");
        json_t *hint = json_object_get(x, "hint");
        if (!json_is_string(e) || json_string_length(e) > 256)
            return fail(r, "as_expr needs expr_str (at most 256 bytes)");
        /* one symbol, as sympy's srepr "Symbol('s0', positive=True, ...)"
         * (2.x) or "s0": kept as its name */
        char name[72];
        const char *text = json_string_value(e);
        if (tn__graph_bare_symbol(text, name, sizeof name) == 0)
            text = name;
        if (!(v->exprs[d] = strdup(text)))
            return TN_ENOMEM;
        if (json_is_object(hint))
            hint = json_object_get(hint, "as_int");
        v->sizes[d] = json_is_integer(hint) ? json_integer_value(hint) : -1;
        return TN_OK;
    }
    return fail(r, "a size must be as_int or as_expr, not %s", arm);
}

static int parse_tensor_meta(struct reader *r, const char *name, json_t *j)
{
    at(r, "tensor_values", name, -1);
    int k = tn__graph_intern(r->g, name);
    if (k < 0)
        return k;
    struct tn_graph_value *v = &r->g->values[k];
    json_t *sizes = json_object_get(j, "sizes");
    if (!json_is_object(j) || !json_is_array(sizes))
        return fail(r, "a tensor's meta needs sizes");
    if (json_array_size(sizes) > TN_MAX_DIMS)
        return fail(r, "%zu dimensions (at most %d)", json_array_size(sizes), TN_MAX_DIMS);
    v->dtype = tn_graph_dtype(enum_number(json_object_get(j, "dtype"), scalar_type_names, 14));
    if (v->dtype == TN_DTYPE_UNSET)
        return fail(r, "unsupported or missing dtype");
    v->ndim = (int)json_array_size(sizes);
    int64_t numel = 1;
    for (int d = 0; d < v->ndim; d++) {
        int rc = parse_sym(r, json_array_get(sizes, (size_t)d), v, d);
        if (rc < 0)
            return rc;
        int64_t s = v->sizes[d] > 0 ? v->sizes[d] : 1;
        if (numel > r->g->limits.max_numel / s)
            return fail(r, "declares more than %lld elements",
                        (long long)r->g->limits.max_numel);
        numel *= s;
    }
    v->requires_grad = json_is_true(json_object_get(j, "requires_grad"));
    v->has_meta = true;
    return TN_OK;
}

const char *const tn__graph_in_arms[4] = {"user_input", "parameter", "buffer",
                                          "tensor_constant"};
const char *const tn__graph_out_arms[7] = {"user_output", "loss_output", "buffer_mutation",
                                           "gradient_to_parameter", "gradient_to_user_input",
                                           "user_input_mutation", "parameter_mutation"};
const char *const tn__graph_in_targets[4] = {NULL, "parameter_name", "buffer_name",
                                             "tensor_constant_name"};
const char *const tn__graph_out_targets[7] = {NULL, NULL, "buffer_name", "parameter_name",
                                              "user_input_name", "user_input_name",
                                              "parameter_name"};

/* One InputSpec or OutputSpec: {"parameter": {"arg": {"name": "p"},
 * "parameter_name": "l1.weight"}}; user ones hold an Argument. */
static int parse_spec(struct reader *r, json_t *j, bool output, struct tn_graph_spec *s)
{
    json_t *v;
    const char *arm = union_arm(r, j, output ? "an output spec" : "an input spec", &v);
    if (!arm)
        return TN_EFORMAT;
    const char *const *arms = output ? tn__graph_out_arms : tn__graph_in_arms;
    int narms = output ? 7 : 4;
    s->kind = -1;
    for (int i = 0; i < narms; i++)
        if (!strcmp(arm, arms[i]))
            s->kind = i;
    if (s->kind < 0)
        return fail(r, "the %s spec '%s' is not supported", output ? "output" : "input", arm);
    json_t *a = json_object_get(v, "arg");
    json_t *t;
    if (json_is_object(a) && (t = json_object_get(a, "as_tensor")))
        a = t; /* an Argument (user ones) rather than a TensorArgument */
    if (json_is_object(a) && json_object_get(a, "as_none")) {
        s->value = -1;
    } else if ((s->value = tensor_ref(r, a, "a spec's arg")) < 0) {
        return s->value;
    }
    const char *tk = (output ? tn__graph_out_targets : tn__graph_in_targets)[s->kind];
    if (tk) {
        const char *tn = name_of(r, json_object_get(v, tk), tk);
        if (!tn || !(s->target = strdup(tn)))
            return tn ? TN_ENOMEM : TN_EFORMAT;
    }
    s->persistent = !json_is_false(json_object_get(v, "persistent"));
    return TN_OK;
}

static int parse_specs(struct reader *r, json_t *sig)
{
    struct tn_graph *g = r->g;
    json_t *ins = json_object_get(sig, "input_specs");
    json_t *outs = json_object_get(sig, "output_specs");
    at(r, "signature", NULL, -1);
    if (!json_is_array(ins) || !json_is_array(outs))
        return fail(r, "input_specs and output_specs must be lists");
    if (json_array_size(ins) != (size_t)g->ninputs || json_array_size(outs) != (size_t)g->noutputs)
        return fail(r, "%zu input specs and %zu output specs for %d inputs and %d outputs",
                    json_array_size(ins), json_array_size(outs), g->ninputs, g->noutputs);
    for (int i = 0; i < g->ninputs; i++) {
        struct tn_graph_spec s = {0};
        int rc = parse_spec(r, json_array_get(ins, (size_t)i), false, &s);
        if (rc < 0)
            return rc;
        if (s.value != g->inputs[i].value) {
            free(s.target);
            return fail(r, "input spec %d names '%s', but input %d is '%s'", i,
                        s.value >= 0 ? g->values[s.value].name : "None", i,
                        g->values[g->inputs[i].value].name);
        }
        g->inputs[i] = s;
    }
    for (int i = 0; i < g->noutputs; i++) {
        struct tn_graph_spec s = {0};
        int rc = parse_spec(r, json_array_get(outs, (size_t)i), true, &s);
        if (rc < 0)
            return rc;
        s.value = g->outputs[i].value;
        g->outputs[i] = s;
    }
    g->has_signature = true;
    return TN_OK;
}

/* graph.inputs or graph.outputs into specs (user ones until the signature
 * says otherwise). */
static int parse_io(struct reader *r, json_t *list, struct tn_graph_spec **specs, int *n)
{
    if (!json_is_array(list))
        return fail(r, "inputs and outputs must be lists");
    if (json_array_size(list) > (size_t)r->g->limits.max_nodes)
        return fail(r, "too many inputs or outputs");
    *specs = calloc(json_array_size(list) + 1, sizeof **specs);
    if (!*specs)
        return TN_ENOMEM;
    for (size_t i = 0; i < json_array_size(list); i++) {
        struct tn_graph_arg a;
        int rc = parse_arg(r, json_array_get(list, i), &a);
        if (rc < 0)
            return rc;
        int v = a.kind == TN_GARG_TENSOR ? a.items[0].value : -1;
        free(a.items);
        free(a.s);
        if (v < 0)
            return fail(r, "graph inputs and outputs must be tensors");
        (*specs)[(*n)++].value = v;
    }
    return TN_OK;
}

static int parse_ranges(struct reader *r, json_t *rc_obj)
{
    struct tn_graph *g = r->g;
    const char *k;
    json_t *v;
    at(r, "range_constraints", NULL, -1);
    if (!json_is_object(rc_obj))
        return TN_OK;
    if (json_object_size(rc_obj) > 4096)
        return fail(r, "more than 4096 symbols");
    g->symbols = calloc(json_object_size(rc_obj) + 1, sizeof *g->symbols);
    if (!g->symbols)
        return TN_ENOMEM;
    json_object_foreach(rc_obj, k, v) {
        struct tn_graph_symbol *s = &g->symbols[g->nsymbols];
        json_t *lo = json_object_get(v, "min_val"), *hi = json_object_get(v, "max_val");
        if (strlen(k) > 64)
            return fail(r, "a symbol name longer than 64 bytes");
        if (!(s->name = strdup(k)))
            return TN_ENOMEM;
        g->nsymbols++;
        s->min = json_is_integer(lo) ? json_integer_value(lo) : 0;
        /* an unbounded max is null, or a huge number */
        s->max = json_is_integer(hi) ? json_integer_value(hi) : INT64_MAX;
        if (s->min < 0)
            s->min = 0;
        if (s->max < s->min)
            return fail(r, "symbol %s: min_val %lld above max_val %lld", k,
                        (long long)s->min, (long long)s->max);
    }
    return TN_OK;
}

/* Marks a symbol's hint from a size that is only that symbol. */
static void take_hints(struct tn_graph *g)
{
    for (int i = 0; i < g->nvalues; i++)
        for (int d = 0; d < g->values[i].ndim; d++) {
            char e[72];
            if (!g->values[i].exprs[d] || g->values[i].sizes[d] < 0 ||
                tn__graph_bare_symbol(g->values[i].exprs[d], e, sizeof e) < 0)
                continue;
            for (int s = 0; s < g->nsymbols; s++)
                if (!strcmp(g->symbols[s].name, e) && !g->symbols[s].hint)
                    g->symbols[s].hint = g->values[i].sizes[d];
        }
}

static void set_limits(struct tn_graph_limits *l, const struct tn_graph_limits *in)
{
    static const struct tn_graph_limits def = {256u << 20, 1000000, 4000000, 4096, 64,
                                               (int64_t)1 << 40};
    *l = def;
    if (!in)
        return;
    if (in->max_bytes) l->max_bytes = in->max_bytes;
    if (in->max_nodes) l->max_nodes = in->max_nodes;
    if (in->max_values) l->max_values = in->max_values;
    if (in->max_args) l->max_args = in->max_args;
    if (in->max_depth) l->max_depth = in->max_depth;
    if (in->max_numel) l->max_numel = in->max_numel;
}

static int parse_graph(struct reader *r, json_t *root)
{
    struct tn_graph *g = r->g;
    json_t *gm = json_object_get(root, "graph_module");
    json_t *graph = gm ? json_object_get(gm, "graph") : root;
    json_t *nodes = json_object_get(graph, "nodes");
    json_t *tv = json_object_get(graph, "tensor_values");
    json_t *sv = json_object_get(graph, "sym_int_values");
    json_t *ver = json_object_get(root, "schema_version");
    int rc;
    at(r, "graph", NULL, -1);
    if (!json_is_object(graph) || !json_is_array(nodes))
        return fail(r, "not a graph (no graph_module.graph.nodes)");
    if (json_array_size(nodes) > (size_t)g->limits.max_nodes)
        return fail(r, "%zu nodes (the limit is %d)", json_array_size(nodes), g->limits.max_nodes);
    if (json_is_object(ver)) {
        g->schema_major = (int)json_integer_value(json_object_get(ver, "major"));
        g->schema_minor = (int)json_integer_value(json_object_get(ver, "minor"));
    }
    if (json_is_object(tv)) {
        const char *k;
        json_t *v;
        json_object_foreach(tv, k, v) {
            if (strlen(k) > MAX_NAME || (rc = parse_tensor_meta(r, k, v)) < 0)
                return strlen(k) > MAX_NAME ? fail(r, "a name longer than %d", MAX_NAME) : rc;
        }
    }
    static const char *const sections[] = {"sym_int_values", "sym_float_values",
                                           "sym_bool_values"};
    for (int t = TN_GSYM_INT; t <= TN_GSYM_BOOL; t++) {
        const char *k;
        json_t *v;
        sv = json_object_get(graph, sections[t]);
        if (!json_is_object(sv))
            continue;
        json_object_foreach(sv, k, v) {
            if (strlen(k) > MAX_NAME)
                return fail(r, "a name longer than %d", MAX_NAME);
            if ((rc = tn__graph_intern(g, k)) < 0)
                return rc;
            g->values[rc].is_sym = true;
            g->values[rc].sym_type = (enum tn_graph_sym_type)t;
            free(g->values[rc].sym_json); /* a name twice: the last entry */
            if (!(g->values[rc].sym_json = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER)))
                return TN_ENOMEM;
        }
    }
    at(r, "graph inputs", NULL, -1);
    if ((rc = parse_io(r, json_object_get(graph, "inputs"), &g->inputs, &g->ninputs)) < 0)
        return rc;
    for (int i = 0; i < g->ninputs; i++) {
        struct tn_graph_value *v = &g->values[g->inputs[i].value];
        if (v->def != TN_GRAPH_UNDEFINED)
            return fail(r, "input '%s' appears twice", v->name);
        v->def = TN_GRAPH_INPUT;
    }
    g->nodes = calloc(json_array_size(nodes) + 1, sizeof *g->nodes);
    if (!g->nodes)
        return TN_ENOMEM;
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        struct tn_graph_node *n = &g->nodes[g->nnodes++];
        if ((rc = parse_node(r, json_array_get(nodes, i), n, (int)i)) < 0)
            return rc;
        for (int k = 0; k < n->nout; k++) {
            if (n->outs[k] < 0)
                continue;
            struct tn_graph_value *v = &g->values[n->outs[k]];
            if (v->def != TN_GRAPH_UNDEFINED)
                return fail(r, "'%s' is defined twice (the graph must be SSA)", v->name);
            v->def = (int)i;
        }
    }
    at(r, "graph outputs", NULL, -1);
    if ((rc = parse_io(r, json_object_get(graph, "outputs"), &g->outputs, &g->noutputs)) < 0)
        return rc;
    json_t *sig = gm ? json_object_get(gm, "signature") : json_object_get(root, "signature");
    if (json_is_object(sig) && (rc = parse_specs(r, sig)) < 0)
        return rc;
    if ((rc = parse_ranges(r, json_object_get(root, "range_constraints"))) < 0)
        return rc;
    take_hints(g);
    return TN_OK;
}

struct tn_graph *tn_graph_parse(const char *text, size_t len, const char *label,
                                const struct tn_graph_limits *lim)
{
    struct tn_graph *g = calloc(1, sizeof *g);
    struct tn_graph_index *ix = calloc(1, sizeof *ix);
    if (!g || !ix || !(g->label = strdup(label ? label : "graph"))) {
        free(g);
        free(ix);
        tn_set_error(TN_ENOMEM, "out of memory reading a graph");
        return NULL;
    }
    g->priv = ix;
    set_limits(&g->limits, lim);
    struct reader r = {.g = g, .where = "graph", .idx = -1};
    if (len > g->limits.max_bytes) {
        fail(&r, "%zu bytes of JSON (the limit is %zu)", len, g->limits.max_bytes);
        goto bad;
    }
    json_t *root;
    struct tn__json_arena *arena;
    if (tn__graph_json_load(text, len, g->label, g->limits.max_depth, JSON_REJECT_DUPLICATES,
                            &root, &arena) < 0)
        goto bad;
    int rc = json_is_object(root) ? parse_graph(&r, root)
                                  : fail(&r, "the JSON text is not an object");
    tn__graph_json_drop(root, arena);
    if (rc < 0) {
        if (rc == TN_ENOMEM && tn_last_status() != TN_ENOMEM)
            tn_set_error(TN_ENOMEM, "%s: out of memory", g->label);
        goto bad;
    }
    return g;
bad:
    tn_graph_free(g);
    return NULL;
}

static void free_arg(struct tn_graph_arg *a)
{
    free(a->items);
    free(a->s);
}

void tn__graph_free_node(struct tn_graph_node *n)
{
    for (int k = 0; k < n->nin; k++) {
        free(n->in[k].name);
        free_arg(&n->in[k].arg);
    }
    for (int k = 0; k < n->nmeta; k++) {
        free(n->meta[k].key);
        free(n->meta[k].val);
    }
    free(n->name);
    free(n->target);
    free(n->in);
    free(n->outs);
    free(n->meta);
    memset(n, 0, sizeof *n);
}

void tn_graph_free(struct tn_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->nvalues; i++) {
        free(g->values[i].name);
        free(g->values[i].sym_json);
        for (int d = 0; d < TN_MAX_DIMS; d++)
            free(g->values[i].exprs[d]);
    }
    for (int i = 0; i < g->nnodes; i++)
        tn__graph_free_node(&g->nodes[i]);
    for (int i = 0; i < g->ninputs; i++)
        free(g->inputs[i].target);
    for (int i = 0; i < g->noutputs; i++)
        free(g->outputs[i].target);
    for (int i = 0; i < g->nsymbols; i++)
        free(g->symbols[i].name);
    struct tn_graph_index *ix = g->priv;
    if (ix)
        free(ix->slots);
    free(ix);
    free(g->values);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->symbols);
    free(g->label);
    free(g);
}
