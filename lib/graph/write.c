/*
 * graph/write.c: struct tn_graph -> ExportedProgram JSON (the fields
 * torch.export writes for what we read; unions as one-key objects, enums
 * as numbers), written atomically.
 */
#include "graph/internal.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static json_t *one(const char *key, json_t *v)
{
    json_t *o = json_object();
    json_object_set_new(o, key, v);
    return o;
}

static json_t *tref(const struct tn_graph *g, int v)
{
    return one("name", json_string(g->values[v].name));
}

static json_t *sym_item(const struct tn_graph *g, const struct tn_graph_item *it)
{
    return it->value >= 0 ? one("as_name", json_string(g->values[it->value].name))
                          : one("as_int", json_integer(it->i));
}

/* f as torch.export writes it: a number, or "Infinity", "-Infinity", "NaN" */
static json_t *float_json(double f)
{
    if (isnan(f))
        return json_string("NaN");
    if (isinf(f))
        return json_string(f < 0 ? "-Infinity" : "Infinity");
    return json_real(f);
}

/* {"as_sym_int": {"as_name": v}}, or as_sym_float / as_sym_bool by its type */
static json_t *sym_ref(const struct tn_graph *g, int v)
{
    static const char *const arms[] = {"as_sym_int", "as_sym_float", "as_sym_bool"};
    return one(arms[g->values[v].sym_type], one("as_name", json_string(g->values[v].name)));
}

static json_t *arg_json(const struct tn_graph *g, const struct tn_graph_arg *a)
{
    json_t *l;
    bool sym = false, opt = false;
    switch (a->kind) {
    case TN_GARG_NONE: return one("as_none", json_true());
    case TN_GARG_TENSOR: return one("as_tensor", tref(g, a->items[0].value));
    case TN_GARG_INT: {
        int v = a->items[0].value;
        if (v >= 0)
            return sym_ref(g, v);
        if (a->sym_bool) /* as_sym_bool's constant */
            return one("as_sym_bool", one("as_bool", json_boolean(a->items[0].i)));
        return one("as_int", json_integer(a->items[0].i));
    }
    case TN_GARG_FLOAT:
        return a->items[0].value >= 0 ? sym_ref(g, a->items[0].value)
                                      : one("as_float", float_json(a->items[0].f));
    case TN_GARG_BOOL: return one("as_bool", json_boolean(a->items[0].i));
    case TN_GARG_STRING: return one("as_string", json_string(a->s));
    case TN_GARG_DTYPE:
        return one("as_scalar_type",
                   json_integer(tn_graph_scalar_type((enum tn_dtype)a->items[0].i)));
    case TN_GARG_LAYOUT: return one("as_layout", json_integer(a->items[0].i));
    case TN_GARG_MEMORY_FORMAT: return one("as_memory_format", json_integer(a->items[0].i));
    case TN_GARG_DEVICE: {
        json_t *d = json_object();
        const char *colon = strchr(a->s, ':');
        json_object_set_new(d, "type", colon ? json_stringn(a->s, (size_t)(colon - a->s))
                                             : json_string(a->s));
        json_object_set_new(d, "index", colon ? json_integer(atoi(colon + 1)) : json_null());
        return one("as_device", d);
    }
    default:
        break;
    }
    l = json_array();
    for (int i = 0; i < a->n; i++) {
        const struct tn_graph_item *it = &a->items[i];
        sym |= a->kind == TN_GARG_INTS && it->value >= 0;
        opt |= a->kind == TN_GARG_TENSORS && it->value < 0;
    }
    for (int i = 0; i < a->n; i++) {
        const struct tn_graph_item *it = &a->items[i];
        switch (a->kind) {
        case TN_GARG_TENSORS:
            json_array_append_new(l, !opt ? tref(g, it->value)
                                  : it->value < 0 ? one("as_none", json_true())
                                  : one("as_tensor", tref(g, it->value)));
            break;
        case TN_GARG_INTS:
            json_array_append_new(l, sym ? sym_item(g, it) : json_integer(it->i));
            break;
        case TN_GARG_FLOATS: json_array_append_new(l, float_json(it->f)); break;
        default: json_array_append_new(l, json_boolean(it->i)); break;
        }
    }
    const char *arm = a->kind == TN_GARG_TENSORS ? (opt ? "as_optional_tensors" : "as_tensors")
                      : a->kind == TN_GARG_INTS ? (sym ? "as_sym_ints" : "as_ints")
                      : a->kind == TN_GARG_FLOATS ? "as_floats" : "as_bools";
    return one(arm, l);
}

/* {"expr_str": ..., "hint": ...} of a size: a bare symbol in sympy's srepr,
 * as torch.export's serializer writes it (its shape environment makes an
 * input's size s0 positive and integer, a size read from data, u0,
 * integer), so its deserializer finds the same symbol; hint -1: null. */
static json_t *expr_json(const char *expr, int64_t hint)
{
    json_t *e = json_object();
    size_t n = strspn(expr, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
    if (!expr[n] && n > 1 && (expr[0] == 's' || expr[0] == 'u') && isdigit((unsigned char)expr[1])) {
        json_object_set_new(e, "expr_str",
                            json_pack("s++", "Symbol('", expr,
                                      expr[0] == 's' ? "', positive=True, integer=True)"
                                                     : "', integer=True)"));
    } else {
        json_object_set_new(e, "expr_str", json_string(expr));
    }
    json_object_set_new(e, "hint", hint >= 0 ? one("as_int", json_integer(hint)) : json_null());
    return e;
}

static json_t *size_json(const struct tn_graph_value *v, int d)
{
    if (!v->exprs[d])
        return one("as_int", json_integer(v->sizes[d]));
    return one("as_expr", expr_json(v->exprs[d], v->sizes[d]));
}

/* A sym_*_values entry as torch.export's serializer writes it: the one
 * read; for a sym_size.int made here (functionalisation), its tensor's
 * size expression; else a symbol of its own name (an unbacked value's). */
static json_t *sym_value(const struct tn_graph *g, const struct tn_graph_value *v)
{
    json_t *j = v->sym_json ? json_loads(v->sym_json, 0, NULL) : NULL;
    if (j)
        return j;
    const struct tn_graph_node *n = v->def >= 0 ? &g->nodes[v->def] : NULL;
    const struct tn_graph_arg *t = NULL, *d = NULL;
    for (int i = 0; n && !strcmp(n->target, "torch.ops.aten.sym_size.int") && i < n->nin; i++)
        if (!strcmp(n->in[i].name, "self"))
            t = &n->in[i].arg;
        else if (!strcmp(n->in[i].name, "dim"))
            d = &n->in[i].arg;
    if (t && d && t->kind == TN_GARG_TENSOR && d->kind == TN_GARG_INT && d->items[0].value < 0) {
        const struct tn_graph_value *tv = &g->values[t->items[0].value];
        int64_t k = d->items[0].i < 0 ? d->items[0].i + tv->ndim : d->items[0].i;
        if (k >= 0 && k < tv->ndim && tv->exprs[k])
            return one("as_expr", expr_json(tv->exprs[k], tv->sizes[k]));
    }
    return one("as_expr", expr_json(v->name, -1));
}

static json_t *meta_json(const struct tn_graph_value *v)
{
    json_t *m = json_object(), *sizes = json_array(), *strides = json_array();
    int64_t st[TN_MAX_DIMS];
    tn_contiguous_strides(v->sizes, v->ndim, st);
    for (int d = 0; d < v->ndim; d++) {
        json_array_append_new(sizes, size_json(v, d));
        json_array_append_new(strides, one("as_int", json_integer(st[d])));
    }
    json_object_set_new(m, "dtype", json_integer(tn_graph_scalar_type(v->dtype)));
    json_object_set_new(m, "sizes", sizes);
    json_object_set_new(m, "requires_grad", json_boolean(v->requires_grad));
    json_t *dev = json_object();
    json_object_set_new(dev, "type", json_string("cpu"));
    json_object_set_new(dev, "index", json_null());
    json_object_set_new(m, "device", dev);
    json_object_set_new(m, "strides", strides);
    json_object_set_new(m, "storage_offset", one("as_int", json_integer(0)));
    json_object_set_new(m, "layout", json_integer(7));
    return m;
}

static json_t *spec_json(const struct tn_graph *g, const struct tn_graph_spec *s, bool out)
{
    json_t *o = json_object();
    bool user = s->kind == 0;
    json_object_set_new(o, "arg", user ? one("as_tensor", tref(g, s->value)) : tref(g, s->value));
    const char *tk = (out ? tn__graph_out_targets : tn__graph_in_targets)[s->kind];
    if (tk && s->target)
        json_object_set_new(o, tk, json_string(s->target));
    if (!out && s->kind == TN_GIN_BUFFER)
        json_object_set_new(o, "persistent", json_boolean(s->persistent));
    return one((out ? tn__graph_out_arms : tn__graph_in_arms)[s->kind], o);
}

static json_t *graph_json(const struct tn_graph *g)
{
    json_t *graph = json_object(), *nodes = json_array(), *tv = json_object();
    json_t *ins = json_array(), *outs = json_array();
    json_t *syms[] = {json_object(), json_object(), json_object()}; /* int, float, bool */
    for (int i = 0; i < g->ninputs; i++)
        json_array_append_new(ins, one("as_tensor", tref(g, g->inputs[i].value)));
    for (int i = 0; i < g->noutputs; i++)
        json_array_append_new(outs, one("as_tensor", tref(g, g->outputs[i].value)));
    for (int i = 0; i < g->nnodes; i++) {
        const struct tn_graph_node *n = &g->nodes[i];
        json_t *node = json_object(), *in = json_array(), *out = json_array(), *md = json_object();
        json_object_set_new(node, "target", json_string(n->target));
        for (int k = 0; k < n->nin; k++) {
            json_t *a = json_object();
            json_object_set_new(a, "name", json_string(n->in[k].name));
            json_object_set_new(a, "arg", arg_json(g, &n->in[k].arg));
            json_object_set_new(a, "kind", json_integer(n->in[k].kind));
            json_array_append_new(in, a);
        }
        if (n->nout == 1) {
            int v = n->outs[0];
            json_array_append_new(out, v < 0 ? one("as_none", json_true())
                                  : g->values[v].is_sym ? sym_ref(g, v)
                                  : one("as_tensor", tref(g, v)));
        } else if (n->nout > 1) {
            json_t *l = json_array();
            for (int k = 0; k < n->nout; k++)
                json_array_append_new(l, n->outs[k] < 0 ? json_null() : tref(g, n->outs[k]));
            json_array_append_new(out, one("as_tensors", l));
        }
        for (int k = 0; k < n->nmeta; k++)
            json_object_set_new(md, n->meta[k].key, json_string(n->meta[k].val));
        json_object_set_new(node, "inputs", in);
        json_object_set_new(node, "outputs", out);
        json_object_set_new(node, "metadata", md);
        json_object_set_new(node, "name", json_string(n->name));
        json_array_append_new(nodes, node);
    }
    for (int i = 0; i < g->nvalues; i++) {
        const struct tn_graph_value *v = &g->values[i];
        if (v->is_sym)
            json_object_set_new(syms[v->sym_type], v->name, sym_value(g, v));
        else if (v->has_meta || v->dtype != TN_DTYPE_UNSET)
            json_object_set_new(tv, v->name, meta_json(v));
    }
    json_object_set_new(graph, "inputs", ins);
    json_object_set_new(graph, "outputs", outs);
    json_object_set_new(graph, "nodes", nodes);
    json_object_set_new(graph, "tensor_values", tv);
    json_object_set_new(graph, "sym_int_values", syms[TN_GSYM_INT]);
    json_object_set_new(graph, "sym_bool_values", syms[TN_GSYM_BOOL]);
    json_object_set_new(graph, "is_single_tensor_return", json_false());
    json_object_set_new(graph, "custom_obj_values", json_object());
    json_object_set_new(graph, "sym_float_values", syms[TN_GSYM_FLOAT]);
    return graph;
}

char *tn_graph_to_json(const struct tn_graph *g)
{
    json_t *root = json_object(), *gm = json_object(), *sig = json_object();
    json_t *is = json_array(), *os = json_array(), *rc = json_object(), *ver = json_object();
    json_object_set_new(gm, "graph", graph_json(g));
    for (int i = 0; i < g->ninputs; i++)
        json_array_append_new(is, spec_json(g, &g->inputs[i], false));
    for (int i = 0; i < g->noutputs; i++)
        json_array_append_new(os, spec_json(g, &g->outputs[i], true));
    json_object_set_new(sig, "input_specs", is);
    json_object_set_new(sig, "output_specs", os);
    json_object_set_new(gm, "signature", sig);
    json_object_set_new(gm, "module_call_graph", json_array());
    json_object_set_new(gm, "metadata", json_object());
    json_object_set_new(root, "graph_module", gm);
    json_object_set_new(root, "opset_version", one("aten", json_integer(10)));
    for (int i = 0; i < g->nsymbols; i++) {
        json_t *r = json_object();
        json_object_set_new(r, "min_val", json_integer(g->symbols[i].min));
        json_object_set_new(r, "max_val", g->symbols[i].max == INT64_MAX
                                              ? json_null() : json_integer(g->symbols[i].max));
        json_object_set_new(rc, g->symbols[i].name, r);
    }
    json_object_set_new(root, "range_constraints", rc);
    json_object_set_new(ver, "major", json_integer(g->schema_major ? g->schema_major : 8));
    json_object_set_new(ver, "minor", json_integer(g->schema_major ? g->schema_minor : 17));
    json_object_set_new(root, "schema_version", ver);
    json_object_set_new(root, "verifiers", json_array());
    json_object_set_new(root, "torch_version", json_string("tensorkit"));
    char *s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!s)
        tn_set_error(TN_ENOMEM, "%s: out of memory writing JSON", g->label);
    return s;
}

int tn_graph_write(const struct tn_graph *g, const char *path)
{
    char *s = tn_graph_to_json(g);
    if (!s)
        return TN_ENOMEM;
    size_t len = strlen(s);
    s[len] = '\n'; /* one line's end in place of the terminator */
    int rc = tn_write_file(path, s, len + 1, true);
    free(s);
    return rc;
}
