/*
 * graph/run.c: the interpreter: binds the signature's inputs (weights by
 * their parameter, buffer and constant names, user inputs by placeholder
 * name), checks them against tensor_values (binding symbolic sizes and
 * checking their ranges), runs the nodes in order through the boxed
 * dispatcher and releases each value after its last use.
 */
#include "graph/internal.h"

#include <tensor/autograd.h>
#include <tensor/ops.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Checks t against v's declaration, binding the symbols of bare-name
 * sizes in vals (bound marks which are set). */
static int check_input(const struct tn_graph *g, const struct tn_graph_value *v,
                       const struct tn_tensor *t, int64_t *vals, bool *bound)
{
    char got[256];
    tn__graph_describe(t, got, sizeof got);
    if (t->dtype != v->dtype || t->ndim != v->ndim)
        return tn_set_error(TN_ESHAPE, "%s: input '%s' is %s, but the graph declares %s "
                            "with %d dimensions", g->label, v->name, got,
                            tn_dtype_name(v->dtype), v->ndim);
    for (int d = 0; d < v->ndim; d++) {
        if (!v->exprs[d]) {
            if (t->sizes[d] != v->sizes[d])
                return tn_set_error(TN_ESHAPE, "%s: input '%s' is %s, but the graph declares "
                                    "size %" PRId64 " for dimension %d", g->label, v->name, got,
                                    v->sizes[d], d);
            continue;
        }
        char name[72];
        if (tn__graph_bare_symbol(v->exprs[d], name, sizeof name) < 0)
            return tn_set_error(TN_ESHAPE, "%s: input '%s': size %d is '%s', not one symbol "
                                "(not supported for inputs)", g->label, v->name, d, v->exprs[d]);
        for (int s = 0; s < g->nsymbols; s++) {
            const struct tn_graph_symbol *sym = &g->symbols[s];
            if (strcmp(sym->name, name))
                continue;
            if (t->sizes[d] < sym->min || t->sizes[d] > sym->max)
                return tn_set_error(TN_ESHAPE, "%s: input '%s' is %s: size %" PRId64 " of "
                                    "dimension %d (%s) is outside [%" PRId64 ", %" PRId64 "]",
                                    g->label, v->name, got, t->sizes[d], d, sym->name,
                                    sym->min, sym->max);
            if (bound[s] && vals[s] != t->sizes[d])
                return tn_set_error(TN_ESHAPE, "%s: input '%s' is %s: dimension %d (%s) "
                                    "must be %" PRId64 " as in the inputs before it",
                                    g->label, v->name, got, d, sym->name, vals[s]);
            vals[s] = t->sizes[d];
            bound[s] = true;
        }
    }
    return TN_OK;
}

/* The tensor for graph input i, from weights or inputs; borrowed. */
static struct tn_tensor *input_tensor(const struct tn_graph *g, int i,
                                      const struct tn_value *weights,
                                      const struct tn_value *inputs)
{
    const struct tn_graph_spec *s = &g->inputs[i];
    const char *vname = g->values[s->value].name;
    const struct tn_value *from = s->kind == TN_GIN_USER_INPUT ? inputs : weights;
    const char *key = s->target ? s->target : vname;
    struct tn_value *x = from ? tn_value_get(from, key) : NULL;
    if (!x && from && s->target)
        x = tn_value_get(from, vname); /* a checkpoint keyed by placeholder names */
    if (!x) {
        static const char *const what[] = {"user input", "parameter", "buffer",
                                           "tensor constant"};
        tn_set_error(TN_EINVAL, "%s: no value for the %s '%s'%s", g->label, what[s->kind], key,
                     s->kind == TN_GIN_USER_INPUT ? " (give it with --input NAME=FILE)"
                                                  : " (not in the weights)");
        return NULL;
    }
    if (x->kind != TN_VALUE_TENSOR) {
        tn_set_error(TN_EINVAL, "%s: '%s' is a %s, not a tensor", g->label, key,
                     tn_value_kind_name(x->kind));
        return NULL;
    }
    return x->v.tensor;
}

int tn__graph_bind(const struct tn_graph *g, const struct tn_value *weights,
                   const struct tn_value *inputs, struct tn_tensor **out)
{
    int64_t *vals = calloc((size_t)g->nsymbols + 1, sizeof *vals);
    bool *bound = calloc((size_t)g->nsymbols + 1, sizeof *bound);
    int rc = vals && bound ? TN_OK : tn_set_error(TN_ENOMEM, "%s: out of memory", g->label);
    for (int i = 0; i < g->ninputs && rc == TN_OK; i++) {
        struct tn_tensor *t = input_tensor(g, i, weights, inputs);
        rc = t ? check_input(g, &g->values[g->inputs[i].value], t, vals, bound)
               : tn_last_status();
        out[i] = t;
    }
    free(vals);
    free(bound);
    return rc;
}

bool tn__graph_param_frozen(const struct tn_graph *g, int i)
{
    if (g->inputs[i].kind != TN_GIN_PARAMETER || g->inputs[i].value < 0 ||
        g->values[g->inputs[i].value].requires_grad)
        return false;
    for (int k = 0; k < g->ninputs; k++)
        if (g->inputs[k].kind == TN_GIN_PARAMETER && g->inputs[k].value >= 0 &&
            g->values[g->inputs[k].value].requires_grad)
            return true;
    return false;
}

/* With autograd: an op without a derivative lets its outputs drop out of
 * the graph, and the parameters before it would silently get no gradient;
 * that is an error naming the node. An op with a derivative records at
 * least one floating output; the others may be ones its derivative leaves
 * out (output_differentiability: batch norm's saved mean and invstd, the
 * functional form's updated running statistics). */
static int check_recorded(const struct tn_graph *g, const struct tn_graph_node *n,
                          const struct tn__graph_slot *slots)
{
    bool in_grad = false;
    if (tn__graph_is_factory(n->op))
        return TN_OK;
    /* detach leaves the graph by design (PyTorch's output_differentiability
     * [False]): a torch.no_grad() block in the model, such as
     * F.embedding_bag's max_norm renorm of the weight, exports as one */
    if (!strcmp(n->op->name, "detach") || !strcmp(n->op->name, "detach_"))
        return TN_OK;
    /* reshape_as, view_as, expand_as, type_as: `other` gives only sizes or
     * a dtype, and no gradient flows to it */
    size_t len = strlen(n->op->name);
    int nin = len > 3 && !strcmp(n->op->name + len - 3, "_as") ? 1 : n->nin;
    for (int i = 0; i < nin; i++)
        for (int k = 0; k < n->in[i].arg.n; k++) {
            int v = n->in[i].arg.items[k].value;
            in_grad |= v >= 0 && slots[v].t && slots[v].t->requires_grad;
        }
    int first = -1;
    for (int k = 0; in_grad && k < n->nout; k++) {
        const struct tn_tensor *t = n->outs[k] >= 0 ? slots[n->outs[k]].t : NULL;
        if (t && tn_dtype_is_floating(t->dtype)) {
            if (t->requires_grad)
                return TN_OK;
            if (first < 0)
                first = n->outs[k];
        }
    }
    if (first >= 0)
        return tn_set_error(TN_ERUNTIME, "%s: node '%s': %s has no derivative yet (its "
                            "output '%s' would leave the autograd graph)", g->label, n->name,
                            n->op->qualname, g->values[first].name);
    return TN_OK;
}

double tn__graph_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* tn_graph_run, and with leaves (ninputs long) the parameters' leaf
 * tensors (new references, NULL for the other inputs). */
static int run(const struct tn_graph *g, const struct tn_value *weights,
               const struct tn_value *inputs, struct tn_value **outputs,
               const struct tn_graph_run_options *opts, struct tn_tensor **leaves)
{
    struct tn_graph_run_options o = {0};
    if (opts)
        o = *opts;
    *outputs = NULL;
    struct tn__graph_slot *slots = calloc((size_t)g->nvalues + 1, sizeof *slots);
    int64_t *vals = calloc((size_t)g->nsymbols + 1, sizeof *vals);
    bool *bound = calloc((size_t)g->nsymbols + 1, sizeof *bound);
    struct tn__graph_scratch s = {0};
    struct tn_value *out = NULL;
    int rc = TN_OK;
    if (!slots || !vals || !bound) {
        rc = tn_set_error(TN_ENOMEM, "%s: out of memory", g->label);
        goto done;
    }
    for (int i = 0; i < g->ninputs; i++) {
        int vi = g->inputs[i].value;
        struct tn_tensor *t = input_tensor(g, i, weights, inputs);
        if (!t || (rc = check_input(g, &g->values[vi], t, vals, bound)) < 0) {
            rc = t ? rc : tn_last_status();
            goto done;
        }
        if (o.requires_grad && g->inputs[i].kind == TN_GIN_PARAMETER &&
            !tn__graph_param_frozen(g, i)) {
            /* a leaf of our own over the same storage, so the caller's
             * tensor keeps its flags */
            if (!(slots[vi].t = tn_detach(t)) ||
                (rc = tn_requires_grad_(slots[vi].t, true)) < 0) {
                rc = rc < 0 ? tn_error_prefix("%s: parameter '%s'", g->label,
                                              g->inputs[i].target) : tn_last_status();
                goto done;
            }
            if (leaves)
                leaves[i] = tn_retain(slots[vi].t);
        } else {
            slots[vi].t = tn_retain(t);
        }
    }
    bool grad_mode = tn_set_grad_enabled(o.requires_grad);
    for (int ni = 0; ni < g->nnodes && rc == TN_OK; ni++) {
        const struct tn_graph_node *n = &g->nodes[ni];
        double t0 = o.node_done ? tn__graph_now() : 0;
        rc = tn__graph_call(g, n, slots, &s);
        if (rc == TN_OK && o.node_done)
            o.node_done(o.node_ctx, ni, tn__graph_now() - t0);
        if (rc == TN_OK && o.requires_grad)
            rc = check_recorded(g, n, slots);
        if (rc < 0 || o.keep_all)
            continue;
        /* release what no later node reads: this node's arguments at their
         * last use, and outputs nobody reads at all */
        for (int i = 0; i < n->nin; i++)
            for (int k = 0; k < n->in[i].arg.n; k++) {
                int v = n->in[i].arg.items[k].value;
                if (v >= 0 && g->values[v].last_use == ni) {
                    tn_release(slots[v].t);
                    slots[v].t = NULL;
                }
            }
        for (int k = 0; k < n->nout; k++) {
            int v = n->outs[k];
            if (v >= 0 && g->values[v].last_use < ni) {
                tn_release(slots[v].t);
                slots[v].t = NULL;
            }
        }
    }
    tn_set_grad_enabled(grad_mode);
    if (rc < 0)
        goto done;
    if (!(out = tn_value_dict())) {
        rc = tn_last_status();
        goto done;
    }
    for (int i = 0; i < g->noutputs; i++) {
        int v = g->outputs[i].value;
        if (!slots[v].t) {
            rc = tn_set_error(TN_ERUNTIME, "%s: output '%s' has no value", g->label,
                              g->values[v].name);
            goto done;
        }
        struct tn_value *k = tn_value_str(g->values[v].name);
        struct tn_value *t = tn_value_tensor(slots[v].t);
        if (!k || !t) {
            tn_value_release(k);
            tn_value_release(t);
            rc = tn_set_error(TN_ENOMEM, "%s: out of memory", g->label);
            goto done;
        }
        if ((rc = tn_value_set(out, k, t)) < 0)
            goto done;
    }
    *outputs = out;
    out = NULL;
done:
    for (int i = 0; slots && i < g->nvalues; i++)
        tn_release(slots[i].t);
    tn_value_release(out);
    free(slots);
    free(vals);
    free(bound);
    free(s.ints);
    return rc;
}

int tn_graph_run(const struct tn_graph *g, const struct tn_value *weights,
                 const struct tn_value *inputs, struct tn_value **outputs,
                 const struct tn_graph_run_options *opts)
{
    return run(g, weights, inputs, outputs, opts, NULL);
}

/* The loss: the loss output when the signature names one, else the sum of
 * the sums of every user output. A new reference, or NULL. */
static struct tn_tensor *loss_of(const struct tn_graph *g, const struct tn_value *out)
{
    struct tn_tensor *loss = NULL;
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].kind == TN_GOUT_LOSS_OUTPUT)
            return tn_retain(tn_value_get(out, g->values[g->outputs[i].value].name)->v.tensor);
    for (int i = 0; i < g->noutputs; i++) {
        /* the user outputs: not the new values of mutated buffers and inputs */
        if (g->outputs[i].kind != TN_GOUT_USER_OUTPUT)
            continue;
        struct tn_tensor *s = tn_sum(tn_value_get(out, g->values[g->outputs[i].value].name)
                                         ->v.tensor, TN_DTYPE_UNSET);
        struct tn_tensor *sum = s && loss ? tn_add(loss, s, tn_int(1)) : tn_retain(s);
        tn_release(s);
        tn_release(loss);
        if (!(loss = sum))
            return NULL;
    }
    if (!loss)
        tn_set_error(TN_EINVAL, "%s: no output to take a loss from", g->label);
    return loss;
}

int tn_graph_grad(const struct tn_graph *g, const struct tn_value *weights,
                  const struct tn_value *inputs, struct tn_value **outputs,
                  struct tn_value **grads)
{
    struct tn_graph_run_options o = {.requires_grad = true};
    struct tn_tensor **leaves = calloc((size_t)g->ninputs + 1, sizeof *leaves);
    struct tn_tensor **res = calloc((size_t)g->ninputs + 1, sizeof *res);
    struct tn_tensor **params = calloc((size_t)g->ninputs + 1, sizeof *params);
    struct tn_tensor *loss = NULL;
    struct tn_value *d = NULL;
    int rc;
    *outputs = *grads = NULL;
    if (!leaves || !res || !params) {
        rc = tn_set_error(TN_ENOMEM, "%s: out of memory", g->label);
        goto done;
    }
    if ((rc = run(g, weights, inputs, outputs, &o, leaves)) < 0)
        goto done;
    bool prev = tn_set_grad_enabled(true);
    loss = loss_of(g, *outputs);
    tn_set_grad_enabled(prev);
    if (!loss) {
        rc = tn_last_status();
        goto done;
    }
    /* tn_grad over the parameters only */
    int n = 0;
    for (int i = 0; i < g->ninputs; i++)
        if (leaves[i])
            params[n++] = leaves[i];
    if ((rc = tn_grad(&loss, 1, NULL, params, n, false, false, true, res)) < 0) {
        tn_error_prefix("%s: backward", g->label);
        goto done;
    }
    if (!(d = tn_value_dict())) {
        rc = tn_last_status();
        goto done;
    }
    for (int i = 0, k = 0; i < g->ninputs; i++) {
        if (!leaves[i])
            continue; /* not a parameter, or a frozen one */
        struct tn_tensor *gr = res[k++];
        if (!gr)
            continue; /* unused: PyTorch leaves its .grad None */
        struct tn_value *key = tn_value_str(g->inputs[i].target);
        struct tn_value *val = tn_value_tensor(gr);
        if (!key || !val) {
            tn_value_release(key);
            tn_value_release(val);
            rc = tn_set_error(TN_ENOMEM, "%s: out of memory", g->label);
            goto done;
        }
        if ((rc = tn_value_set(d, key, val)) < 0)
            goto done;
    }
    *grads = d;
    d = NULL;
done:
    for (int i = 0; leaves && res && i < g->ninputs; i++) {
        tn_release(leaves[i]);
        tn_release(res[i]);
    }
    if (rc < 0) {
        tn_value_release(*outputs);
        *outputs = NULL;
    }
    tn_value_release(d);
    tn_release(loss);
    free(leaves);
    free(res);
    free(params);
    return rc;
}
