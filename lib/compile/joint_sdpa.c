/*
 * compile/joint_sdpa.c: scaled_dot_product_attention with dropout_p > 0 in
 * a graph that joint.c differentiates, rewritten first into the ops of
 * PyTorch's math path (lib/ops/attention_math.c does the same in eager
 * mode): float16/bfloat16 upcast by _to_copy; q and k^T each times
 * sqrt(scale); a bool or causal mask as masked_fill(-inf), a float one
 * added; _safe_softmax as softmax between masked_fills of the rows that see
 * no key; dropout(attn, p, train=True); matmul with v; GQA's key/value
 * heads repeated by unsqueeze, expand and reshape. The dropout node is then
 * differentiated as any other (joint.c's d_dropout: run as native_dropout,
 * its mask saved), so every step of a compiled training draws a new mask
 * from the default generator, PyTorch's for the same seed. Without dropout
 * sdpa stays one node (the blocked kernel, _tn_attention's derivative).
 */
#include "compile/internal.h"
#include "graph/internal.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

struct rw {
    json_t *nodes;   /* the new node list */
    const char *out; /* the sdpa node's output: names derive from it */
    int count;
    char name[256];
};

static json_t *tensor(const char *v)
{
    return json_pack("{s:{s:s}}", "as_tensor", "name", v);
}

static json_t *flt(double f)
{
    if (isinf(f))
        return json_pack("{s:s}", "as_float", f < 0 ? "-Infinity" : "Infinity");
    return json_pack("{s:f}", "as_float", f);
}

/* Appends node `target` (ops under torch.ops.aten, ".default" added when
 * no overload is given) with n NamedArguments (name, arg) pairs; its output
 * is `out` or a fresh name. Returns the output's name (owned by the node). */
static const char *node(struct rw *w, const char *out, const char *target, int n, ...)
{
    char t[128], nm[300];
    snprintf(t, sizeof t, "torch.ops.aten.%s%s", target, strchr(target, '.') ? "" : ".default");
    if (!out)
        snprintf(nm, sizeof nm, "%s_math_%d", w->out, w->count++);
    json_t *ins = json_array();
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        const char *an = va_arg(ap, const char *);
        json_t *a = va_arg(ap, json_t *);
        json_array_append_new(ins, json_pack("{s:s,s:o,s:i}", "name", an, "arg", a, "kind", 1));
    }
    va_end(ap);
    json_t *j = json_pack("{s:s,s:o,s:[{s:{s:s}}],s:{},s:s}", "target", t, "inputs", ins,
                          "outputs", "as_tensor", "name", out ? out : nm, "metadata", "name",
                          out ? out : nm);
    json_array_append_new(w->nodes, j);
    return json_string_value(json_object_get(j, "name"));
}

static const char *to(struct rw *w, const char *out, const char *x, enum tn_dtype dt)
{
    return node(w, out, "_to_copy", 2, "self", tensor(x), "dtype",
                json_pack("{s:i}", "as_scalar_type", tn_graph_scalar_type(dt)));
}

static const char *scaled(struct rw *w, const char *x, double f)
{
    return node(w, NULL, "mul.Tensor", 2, "self", tensor(x), "other", flt(f));
}

/* x [..., hk, S, D] with each head repeated hq / hk times: [..., hq, S, D] */
static const char *heads(struct rw *w, const char *x, const struct tn_graph_value *v, int64_t hq)
{
    int nd = v->ndim;
    json_t *ex = json_array(), *rs = json_array();
    for (int d = 0; d < nd; d++) {
        json_array_append_new(ex, json_integer(v->sizes[d]));
        if (d == nd - 3)
            json_array_append_new(ex, json_integer(hq / v->sizes[d]));
        json_array_append_new(rs, json_integer(d == nd - 3 ? hq : v->sizes[d]));
    }
    const char *u = node(w, NULL, "unsqueeze", 2, "self", tensor(x), "dim",
                         json_pack("{s:i}", "as_int", nd - 2));
    const char *e = node(w, NULL, "expand", 2, "self", tensor(u), "size",
                         json_pack("{s:o}", "as_ints", ex));
    return node(w, NULL, "reshape", 2, "self", tensor(e), "shape",
                json_pack("{s:o}", "as_ints", rs));
}

static const struct tn_graph_arg *arg(const struct tn_graph_node *n, const char *name)
{
    for (int i = 0; i < n->nin; i++)
        if (!strcmp(n->in[i].name, name))
            return &n->in[i].arg;
    return NULL;
}

static double num(const struct tn_graph_arg *a, double def)
{
    return !a ? def : a->kind == TN_GARG_FLOAT ? a->items[0].f
           : a->kind == TN_GARG_INT ? (double)a->items[0].i : def;
}

static bool flag(const struct tn_graph_arg *a)
{
    return a && (a->kind == TN_GARG_BOOL || a->kind == TN_GARG_INT) && a->items[0].i;
}

static int value(const struct tn_graph_node *n, const char *name)
{
    const struct tn_graph_arg *a = arg(n, name);
    return a && a->kind == TN_GARG_TENSOR ? a->items[0].value : -1;
}

/* The math path's nodes for sdpa node n of g (its output keeps its name). */
static int decompose(struct rw *w, const struct tn_graph *g, const struct tn_graph_node *n)
{
    int qi = value(n, "query"), ki = value(n, "key"), vi = value(n, "value");
    int mi = value(n, "attn_mask");
    if (qi < 0 || ki < 0 || vi < 0 || n->nout != 1 || n->outs[0] < 0)
        return tn_set_error(TN_EINVAL, "%s: node '%s': scaled_dot_product_attention without "
                            "query, key or value", g->label, n->name);
    const struct tn_graph_value *qv = &g->values[qi], *kv = &g->values[ki];
    w->out = g->values[n->outs[0]].name;
    w->count = 0;
    const struct tn_graph_arg *sa = arg(n, "scale");
    bool has_scale = sa && sa->kind != TN_GARG_NONE, causal = flag(arg(n, "is_causal"));
    double scale = num(sa, 0), p = num(arg(n, "dropout_p"), 0);
    double sf = sqrt(has_scale ? fabs(scale) : 1. / sqrt((double)qv->sizes[qv->ndim - 1]));
    enum tn_dtype dt = qv->dtype, ct = dt == TN_FLOAT64 ? TN_FLOAT64 : TN_FLOAT32;
    const char *q = qv->name, *k = kv->name, *v = g->values[vi].name;
    if (ct != dt) {
        q = to(w, NULL, q, ct);
        k = to(w, NULL, k, ct);
        v = to(w, NULL, v, ct);
    }
    int64_t hq = qv->ndim >= 3 ? qv->sizes[qv->ndim - 3] : 0;
    if (flag(arg(n, "enable_gqa")) && kv->ndim >= 3 && kv->sizes[kv->ndim - 3] != hq) {
        k = heads(w, k, kv, hq);
        v = heads(w, v, &g->values[vi], hq);
    }
    q = scaled(w, q, has_scale && scale < 0 ? 0.0 - sf : sf);
    const char *kt = node(w, NULL, "transpose.int", 3, "self", tensor(k), "dim0",
                          json_pack("{s:i}", "as_int", -2), "dim1",
                          json_pack("{s:i}", "as_int", -1));
    const char *s = node(w, NULL, "matmul", 2, "self", tensor(q), "other",
                         tensor(scaled(w, kt, sf)));
    const char *drop = NULL; /* bool: where the scores become -inf */
    if (causal) {
        const char *o = node(w, NULL, "ones_like", 1, "self", tensor(s));
        const char *t = node(w, NULL, "tril", 1, "self", tensor(o));
        drop = node(w, NULL, "eq.Scalar", 2, "self", tensor(t), "other", flt(0));
    } else if (mi >= 0 && g->values[mi].dtype == TN_BOOL) {
        drop = node(w, NULL, "logical_not", 1, "self", tensor(g->values[mi].name));
    } else if (mi >= 0) {
        s = node(w, NULL, "add.Tensor", 2, "self", tensor(s), "other",
                 tensor(g->values[mi].name));
    }
    if (drop)
        s = node(w, NULL, "masked_fill.Scalar", 3, "self", tensor(s), "mask", tensor(drop),
                 "value", flt(-INFINITY));
    const char *none = NULL; /* _safe_softmax's rows that see no key */
    if (mi >= 0) {
        const char *e = node(w, NULL, "eq.Scalar", 2, "self", tensor(s), "other",
                             flt(-INFINITY));
        none = node(w, NULL, "all.dim", 3, "self", tensor(e), "dim",
                    json_pack("{s:i}", "as_int", -1), "keepdim", json_pack("{s:b}", "as_bool", 1));
        s = node(w, NULL, "masked_fill.Scalar", 3, "self", tensor(s), "mask", tensor(none),
                 "value", flt(0));
    }
    const char *a = node(w, NULL, "softmax.int", 2, "self", tensor(s), "dim",
                         json_pack("{s:i}", "as_int", -1));
    if (none)
        a = node(w, NULL, "masked_fill.Scalar", 3, "self", tensor(a), "mask", tensor(none),
                 "value", flt(0));
    a = node(w, NULL, "dropout", 3, "input", tensor(a), "p", flt(p), "train",
             json_pack("{s:b}", "as_bool", 1));
    if (ct == dt) {
        node(w, w->out, "matmul", 2, "self", tensor(a), "other", tensor(v));
    } else {
        const char *o = node(w, NULL, "matmul", 2, "self", tensor(a), "other", tensor(v));
        to(w, w->out, o, dt);
    }
    return TN_OK;
}

static bool with_dropout(const struct tn_graph_node *n)
{
    return !strcmp(n->target, "torch.ops.aten.scaled_dot_product_attention.default") &&
           num(arg(n, "dropout_p"), 0) > 0;
}

int tn__joint_sdpa_dropout(const struct tn_graph *g, struct tn_graph **out)
{
    *out = NULL;
    int k = 0;
    while (k < g->nnodes && !with_dropout(&g->nodes[k]))
        k++;
    if (k == g->nnodes)
        return 0;
    char *text = tn_graph_to_json(g);
    json_t *root = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    json_t *graph = json_object_get(json_object_get(root, "graph_module"), "graph");
    json_t *old = json_object_get(graph, "nodes");
    struct rw w = {.nodes = json_array()};
    int rc = root && w.nodes && json_array_size(old) == (size_t)g->nnodes
                 ? TN_OK
                 : tn_set_error(TN_ENOMEM, "%s: out of memory", g->label);
    for (k = 0; rc == TN_OK && k < g->nnodes; k++) {
        if (with_dropout(&g->nodes[k])) {
            rc = decompose(&w, g, &g->nodes[k]);
            /* the output's meta comes from the new nodes */
            json_object_del(json_object_get(graph, "tensor_values"), w.out);
        } else {
            json_array_append(w.nodes, json_array_get(old, (size_t)k));
        }
    }
    char *t = NULL;
    if (rc == TN_OK) {
        json_object_set(graph, "nodes", w.nodes);
        t = json_dumps(root, JSON_COMPACT);
        rc = t ? TN_OK : tn_set_error(TN_ENOMEM, "%s: out of memory", g->label);
    }
    json_decref(w.nodes);
    json_decref(root);
    if (rc < 0)
        return rc;
    struct tn_graph *ng = tn_graph_parse(t, strlen(t), g->label, NULL);
    free(t);
    if (!ng)
        return tn_last_status();
    if ((rc = tn_graph_check(ng, NULL, NULL)) != 0) {
        tn_graph_free(ng);
        return rc < 0 ? rc : tn_set_error(TN_EINVAL, "%s: scaled_dot_product_attention's "
                                          "math path does not check", g->label);
    }
    *out = ng;
    return 1;
}
