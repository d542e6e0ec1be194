/*
 * graph/exec.c: one node through the boxed dispatcher, shared by the Meta
 * pass of tn_graph_check and the interpreter: the node's named arguments
 * become a stack in schema order, the results go to the node's outputs.
 */
#include "graph/internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tn__graph_describe(const struct tn_tensor *t, char *buf, size_t len)
{
    if (!t) {
        snprintf(buf, len, "None");
        return;
    }
    int k = snprintf(buf, len, "%s[", tn_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim && k > 0 && (size_t)k < len; d++)
        k += snprintf(buf + k, len - (size_t)k, d ? ", %" PRId64 : "%" PRId64, t->sizes[d]);
    if (k > 0 && (size_t)k < len)
        snprintf(buf + k, len - (size_t)k, "]");
}

/* Room for the int lists of one call, grown as needed. */
static int64_t *scratch_ints(struct tn__graph_scratch *s, size_t n)
{
    if (n > s->cap) {
        int64_t *p = realloc(s->ints, n * sizeof *p);
        if (!p)
            return NULL;
        s->ints = p;
        s->cap = n;
    }
    return s->ints;
}

/* The ivalue for one graph argument, for the schema argument `as`. */
static int to_ivalue(const struct tn_graph *g, const struct tn_graph_input *in,
                     const struct tn_arg_schema *as, const struct tn__graph_slot *slots,
                     int64_t **ints, struct tn_tensor ***tens, double **dbls,
                     struct tn_ivalue *iv)
{
    const struct tn_graph_arg *a = &in->arg;
    const struct tn_graph_item *it = a->items;
    memset(iv, 0, sizeof *iv);
    switch (a->kind) {
    case TN_GARG_NONE:
        iv->tag = TN_IV_NONE; /* checked: only optional arguments take these */
        return TN_OK;
    case TN_GARG_DEVICE: /* as text ("cuda:1"), where the schema boxes it so;
                          * "meta" in a Meta pass, where every value is Meta
                          * (to(device="cpu") of a Meta tensor would fail there
                          * and leave its result to the declared sizes,
                          * contiguous: issue 23's strides) */
        iv->tag = as->tag == TN_IV_STR ? TN_IV_STR : TN_IV_NONE;
        iv->v.str = tn__graph_meta_devices ? "meta" : a->s;
        return TN_OK;
    case TN_GARG_LAYOUT:
    case TN_GARG_MEMORY_FORMAT: {
        /* torch.export's enum values to PyTorch's c10 ones (what our ops
         * take): Layout Strided 7 -> 0; MemoryFormat Contiguous 1 -> 0,
         * Preserve 4 -> 1, ChannelsLast(3d) 2, 3 kept; Unknown 0 -> None,
         * as for an argument the schema boxes as None (clone's) */
        static const int64_t mf[] = {-1, 0, 2, 3, 1};
        int64_t x = it->i;
        if (a->kind == TN_GARG_LAYOUT)
            x = x == 7 ? 0 : x == 0 ? -1 : x;
        else
            x = x >= 0 && x <= 4 ? mf[x] : x;
        iv->tag = as->tag == TN_IV_INT && x >= 0 ? TN_IV_INT : TN_IV_NONE;
        iv->v.i = x;
        return TN_OK;
    }
    case TN_GARG_TENSOR:
        iv->tag = TN_IV_TENSOR;
        iv->v.t = slots[it->value].t;
        return iv->v.t ? TN_OK : tn_set_error(TN_ERUNTIME, "'%s' has no value",
                                              g->values[it->value].name);
    case TN_GARG_INT: {
        int64_t x = it->value >= 0 ? slots[it->value].i : it->i;
        if (as->tag == TN_IV_SCALAR) {
            iv->tag = TN_IV_SCALAR;
            iv->v.s = tn_int(x);
        } else if (as->tag == TN_IV_DOUBLE) {
            iv->tag = TN_IV_DOUBLE;
            iv->v.f = (double)x;
        } else if (as->tag == TN_IV_INTLIST) {
            iv->tag = TN_IV_INT; /* int[1] takes one int */
            iv->v.i = x;
        } else {
            iv->tag = TN_IV_INT;
            iv->v.i = x;
        }
        return TN_OK;
    }
    case TN_GARG_FLOAT: {
        double x = it->value >= 0 ? slots[it->value].f : it->f; /* a SymFloat's value */
        if (as->tag == TN_IV_SCALAR) {
            iv->tag = TN_IV_SCALAR;
            iv->v.s = tn_float(x);
        } else {
            iv->tag = TN_IV_DOUBLE;
            iv->v.f = x;
        }
        return TN_OK;
    }
    case TN_GARG_BOOL:
        if (as->tag == TN_IV_SCALAR) {
            iv->tag = TN_IV_SCALAR;
            iv->v.s = tn_bool(it->i != 0);
        } else {
            iv->tag = TN_IV_BOOL;
            iv->v.b = it->i != 0;
        }
        return TN_OK;
    case TN_GARG_STRING:
        iv->tag = TN_IV_STR;
        iv->v.str = a->s;
        return TN_OK;
    case TN_GARG_DTYPE:
        iv->tag = TN_IV_DTYPE;
        iv->v.dtype = (enum tn_dtype)it->i;
        return TN_OK;
    case TN_GARG_INTS:
        iv->tag = TN_IV_INTLIST;
        iv->v.ints.n = a->n;
        iv->v.ints.data = *ints;
        for (int k = 0; k < a->n; k++)
            (*ints)[k] = it[k].value >= 0 ? slots[it[k].value].i : it[k].i;
        *ints += a->n;
        return TN_OK;
    case TN_GARG_FLOATS: /* float[] (the scale_factors of upsample_*.vec) */
        iv->tag = TN_IV_DOUBLELIST;
        iv->v.doubles.n = a->n;
        iv->v.doubles.data = *dbls;
        for (int k = 0; k < a->n; k++)
            (*dbls)[k] = it[k].f;
        *dbls += a->n;
        return TN_OK;
    case TN_GARG_TENSORS: /* Tensor[] (checked to hold no None) or Tensor?[] */
        iv->tag = as->tag == TN_IV_OPTTENSORLIST ? TN_IV_OPTTENSORLIST : TN_IV_TENSORLIST;
        iv->v.tensors.n = a->n;
        iv->v.tensors.data = *tens;
        for (int k = 0; k < a->n; k++)
            if (it[k].value < 0)
                (*tens)[k] = NULL; /* None */
            else if (!((*tens)[k] = slots[it[k].value].t))
                return tn_set_error(TN_ERUNTIME, "'%s' has no value",
                                    g->values[it[k].value].name);
        *tens += a->n;
        return TN_OK;
    default:
        return tn_set_error(TN_EINVAL, "argument '%s': lists of this kind are not supported "
                            "by the boxed dispatcher yet", in->name);
    }
}

/* Appends " (self=float32[2, 3], other=...)" for the node's tensor args. */
static void describe_args(const struct tn_graph_node *n, const struct tn__graph_slot *slots,
                          char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n->nin && k + 48 < len; i++) {
        const struct tn_graph_arg *a = &n->in[i].arg;
        if (a->kind != TN_GARG_TENSOR && a->kind != TN_GARG_TENSORS)
            continue;
        bool list = a->kind == TN_GARG_TENSORS;
        k += (size_t)snprintf(buf + k, len - k, "%s%s=%s", k ? ", " : "", n->in[i].name,
                              list ? "[" : "");
        for (int j = 0; j < a->n && k + 48 < len; j++) {
            char d[160];
            int v = a->items[j].value;
            tn__graph_describe(v >= 0 ? slots[v].t : NULL, d, sizeof d);
            k += (size_t)snprintf(buf + k, len - k, "%s%s", j ? ", " : "", d);
        }
        if (list && k + 1 < len)
            k += (size_t)snprintf(buf + k, len - k, "]");
    }
}

int tn__graph_call(const struct tn_graph *g, const struct tn_graph_node *n,
                   struct tn__graph_slot *slots, struct tn__graph_scratch *s)
{
    const struct tn_op *op = n->op;
    int nst = op->nargs > op->nrets ? op->nargs : op->nrets;
    if (n->nout > nst)
        nst = n->nout;
    size_t nints = 0, ntens = 0, ndbls = 0;
    for (int i = 0; i < n->nin; i++) {
        if (n->in[i].arg.kind == TN_GARG_INTS)
            nints += (size_t)n->in[i].arg.n;
        else if (n->in[i].arg.kind == TN_GARG_TENSORS)
            ntens += (size_t)n->in[i].arg.n;
        else if (n->in[i].arg.kind == TN_GARG_FLOATS)
            ndbls += (size_t)n->in[i].arg.n;
    }
    /* the stack, then the items of its float lists and tensor lists, in one block */
    struct tn_ivalue *st = calloc(1, ((size_t)nst + 1) * sizeof *st + ndbls * sizeof(double) +
                                         ntens * sizeof(void *));
    double *dbls = st ? (double *)(st + nst + 1) : NULL;
    struct tn_tensor **tens = st ? (struct tn_tensor **)(dbls + ndbls) : NULL;
    int64_t *ints = scratch_ints(s, nints + 1);
    if (!st || !ints) {
        free(st);
        return tn_set_error(TN_ENOMEM, "%s: node '%s': out of memory", g->label, n->name);
    }
    int rc = TN_OK, nargs = 0;
    for (int i = 0; i < n->nin && rc == TN_OK; i++) {
        int k = tn_op_arg_index(op, n->in[i].name);
        TN_ASSERT(k >= 0); /* tn_graph_check saw to it */
        rc = to_ivalue(g, &n->in[i], &op->args[k], slots, &ints, &tens, &dbls, &st[k]);
        if (k + 1 > nargs)
            nargs = k + 1;
    }
    if (rc == TN_OK)
        rc = tn_op_call(op, st, nargs);
    if (rc < 0) {
        char args[1024];
        describe_args(n, slots, args, sizeof args);
        tn_error_prefix("%s: node '%s': %s(%s)", g->label, n->name, op->qualname, args);
        free(st);
        return rc;
    }
    if (rc == 1 && st[0].tag == TN_IV_TENSORLIST) { /* Tensor[]: a piece per output */
        int np = st[0].v.tensors.n;
        for (int k = 0; k < np && k < n->nout; k++)
            if (n->outs[k] >= 0) {
                tn_release(slots[n->outs[k]].t);
                slots[n->outs[k]].t = tn_retain(st[0].v.tensors.data[k]);
            }
        tn_ivalue_release(&st[0]);
        free(st);
        if (np != n->nout)
            return tn_set_error(TN_ERUNTIME, "%s: node '%s' (%s) returned %d tensors for %d "
                                "outputs", g->label, n->name, op->qualname, np, n->nout);
        return TN_OK;
    }
    for (int k = 0; k < rc; k++) {
        int v = k < n->nout ? n->outs[k] : -1;
        if (st[k].tag == TN_IV_TENSOR) {
            if (v >= 0) {
                tn_release(slots[v].t);
                slots[v].t = st[k].v.t;
            } else {
                tn_release(st[k].v.t);
            }
        } else if (v >= 0 && (st[k].tag == TN_IV_INT || st[k].tag == TN_IV_BOOL)) {
            slots[v].i = st[k].tag == TN_IV_INT ? st[k].v.i : st[k].v.b;
            slots[v].f = (double)slots[v].i;
            slots[v].set = true;
        } else if (v >= 0 && st[k].tag == TN_IV_DOUBLE) { /* a SymFloat */
            double f = st[k].v.f;
            slots[v].f = f;
            slots[v].i = isfinite(f) && fabs(f) < 9.2e18 ? (int64_t)f : 0;
            slots[v].set = true;
        }
    }
    free(st);
    if (rc < n->nout)
        for (int k = rc; k < n->nout; k++)
            if (n->outs[k] >= 0)
                return tn_set_error(TN_ERUNTIME, "%s: node '%s' (%s) returned %d values for %d "
                                    "outputs", g->label, n->name, op->qualname, rc, n->nout);
    return TN_OK;
}
