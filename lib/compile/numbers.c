/*
 * compile/numbers.c: the Python numbers a compiled program computes at run
 * time. A program's sizes are fixed when it is compiled (the Meta pass's
 * SymInts), but item() / _local_scalar_dense read a tensor's data: their
 * SymFloat, SymInt or SymBool, and every number computed from it
 * (_operator.*, torch.sym_*), differ from run to run. Those nodes stay
 * extern steps, run through the dispatcher in graph order, their numbers
 * kept in the run's value slots, and so does every tensor op taking one
 * (its value is read there, never baked into a kernel). The program's
 * buffers are planned at compile time: an op whose result's sizes follow
 * such a number (torch.export's unbacked u0 in its tensor_values) is
 * refused.
 */
#include "compile/internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>


bool tn__reads_tensor_data(const struct tn_graph_node *n)
{
    return !strcmp(n->op->qualname, "aten::item") ||
           !strcmp(n->op->qualname, "aten::_local_scalar_dense");
}

/* The run-time number node n reads (a value index), -1 when none. */
static int reads_runtime(const struct tn_graph_node *n, const bool *rt, const char **arg)
{
    for (int i = 0; i < n->nin; i++) {
        const struct tn_graph_arg *a = &n->in[i].arg;
        if (a->kind == TN_GARG_TENSOR || a->kind == TN_GARG_TENSORS)
            continue;
        for (int j = 0; j < a->n; j++)
            if (a->items[j].value >= 0 && rt[a->items[j].value]) {
                *arg = n->in[i].name;
                return a->items[j].value;
            }
    }
    return -1;
}

/* The SymFloat node n takes, -1 when none. */
static int takes_float(const struct tn_graph_node *n)
{
    for (int i = 0; i < n->nin; i++)
        if (n->in[i].arg.kind == TN_GARG_FLOAT && n->in[i].arg.items[0].value >= 0)
            return n->in[i].arg.items[0].value;
    return -1;
}

static bool has_tensor_out(const struct tn_graph *g, const struct tn_graph_node *n)
{
    for (int k = 0; k < n->nout; k++)
        if (n->outs[k] >= 0 && !g->values[n->outs[k]].is_sym)
            return true;
    return false;
}

/* Whether expr names an unbacked symbol: torch.export's u0, u1, ... (a
 * size read from data; the inputs' sizes are s0, s1, ...). */
static bool unbacked(const char *expr)
{
    for (const char *p = expr; *p; p++) {
        bool start = p == expr || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        if (!start || *p != 'u' || !isdigit((unsigned char)p[1]))
            continue;
        const char *q = p + 1;
        while (isdigit((unsigned char)*q))
            q++;
        if (!isalnum((unsigned char)*q) && *q != '_')
            return true;
    }
    return false;
}

/* A tensor output of n whose sizes may follow a number read at run time
 * (undeclared, or naming an unbacked symbol), -1 when none. */
static int data_sized(const struct tn_graph *g, const struct tn_graph_node *n)
{
    for (int k = 0; k < n->nout; k++) {
        const struct tn_graph_value *o = n->outs[k] >= 0 ? &g->values[n->outs[k]] : NULL;
        if (!o || o->is_sym)
            continue;
        if (!o->has_meta)
            return n->outs[k];
        for (int d = 0; d < o->ndim; d++)
            if (o->exprs[d] && unbacked(o->exprs[d]))
                return n->outs[k];
    }
    return -1;
}

int tn__runtime_numbers(const struct tn_graph *g, bool *rt)
{
    memset(rt, 0, (size_t)g->nvalues * sizeof *rt);
    for (int ni = 0; ni < g->nnodes; ni++) {
        const struct tn_graph_node *n = &g->nodes[ni];
        const char *arg = NULL;
        int v = reads_runtime(n, rt, &arg);
        if (!tn__reads_tensor_data(n) && v < 0)
            continue;
        int o = v >= 0 ? data_sized(g, n) : -1;
        if (o >= 0)
            return tn_set_error(TN_EINVAL, "%s: node '%s' (%s) takes '%s', a number read from "
                                "a tensor's values at run time, and its output '%s' has sizes "
                                "that follow it (not known when compiling)", g->label, n->name,
                                n->op->qualname, g->values[v].name, g->values[o].name);
        for (int k = 0; k < n->nout; k++)
            if (n->outs[k] >= 0 && g->values[n->outs[k]].is_sym)
                rt[n->outs[k]] = true;
    }
    return TN_OK;
}

const char *tn__runtime_reason(const struct tn_graph *g, const struct tn_graph_node *n,
                               const bool *rt, char *buf, size_t len)
{
    const char *arg = NULL;
    int v = reads_runtime(n, rt, &arg);
    if (tn__reads_tensor_data(n))
        snprintf(buf, len, "reads a tensor's values into a number at run time");
    else if (v >= 0)
        snprintf(buf, len, "takes '%s', a number computed at run time", g->values[v].name);
    else if ((v = takes_float(n)) >= 0) /* the run's slots hold it, not P->ints */
        snprintf(buf, len, "takes the SymFloat '%s'", g->values[v].name);
    else
        return NULL;
    return buf;
}

bool tn__runtime_only(const struct tn_graph *g, const struct tn_graph_node *n, const bool *rt)
{
    const char *arg;
    return tn__reads_tensor_data(n) || (reads_runtime(n, rt, &arg) >= 0 && !has_tensor_out(g, n));
}
