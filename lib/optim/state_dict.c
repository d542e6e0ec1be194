/*
 * optim/state_dict.c: an optimizer's state_dict as the value tree
 * torch.save writes and torch.load reads, and load_state_dict from one.
 * optim builds on core's value tree (tensor/value.h; io depends on core
 * alone and optim never on io, DESIGN.md).
 *
 * The layout is PyTorch's optimizer.state_dict(): parameters are numbered
 * by their position in the group, the state of each is a dict of tensors
 * (the Adam step a float32 0-dim tensor), and the group carries every
 * hyperparameter under PyTorch's names, 2.x's set of keys, so that either
 * version's load_state_dict takes it.
 */
#include "core/internal.h"
#include <tensor/optim.h>
#include <tensor/value.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A hyperparameter PyTorch keeps as an int when given its integer default. */
static struct tn_value *number(double x)
{
    return x == 0 ? tn_value_int(0) : tn_value_float(x);
}

static struct tn_value *param_group(const struct tn_optim *o)
{
    struct tn_value *g = tn_value_dict();
    if (!g)
        return NULL;
    const struct tn_sgd_options *s = tn_optim_sgd_options(o);
    const struct tn_adam_options *a = tn_optim_adam_options(o);
    /* the compat setting is not public state; 2.x keys load in both */
    int rc = tn__value_set_str(g, "lr", tn_value_float(tn_optim_get_lr(o)));
    if (s) {
        rc = rc ? rc : tn__value_set_str(g, "momentum", number(s->momentum));
        rc = rc ? rc : tn__value_set_str(g, "dampening", number(s->dampening));
        rc = rc ? rc : tn__value_set_str(g, "weight_decay", number(s->weight_decay));
        rc = rc ? rc : tn__value_set_str(g, "nesterov", tn_value_bool(s->nesterov));
        rc = rc ? rc : tn__value_set_str(g, "maximize", tn_value_bool(s->maximize));
        rc = rc ? rc : tn__value_set_str(g, "foreach", tn_value_none());
        rc = rc ? rc : tn__value_set_str(g, "differentiable", tn_value_bool(false));
        rc = rc ? rc : tn__value_set_str(g, "fused", tn_value_none());
    } else {
        struct tn_value *betas = tn_value_tuple();
        if (betas && (tn_value_append(betas, tn_value_float(a->beta1)) ||
                      tn_value_append(betas, tn_value_float(a->beta2)))) {
            tn_value_release(betas);
            betas = NULL;
        }
        rc = rc ? rc : tn__value_set_str(g, "betas", betas);
        rc = rc ? rc : tn__value_set_str(g, "eps", tn_value_float(a->eps));
        rc = rc ? rc : tn__value_set_str(g, "weight_decay", number(a->weight_decay));
        rc = rc ? rc : tn__value_set_str(g, "amsgrad", tn_value_bool(a->amsgrad));
        rc = rc ? rc : tn__value_set_str(g, "maximize", tn_value_bool(a->maximize));
        rc = rc ? rc : tn__value_set_str(g, "foreach", tn_value_none());
        rc = rc ? rc : tn__value_set_str(g, "capturable", tn_value_bool(false));
        rc = rc ? rc : tn__value_set_str(g, "differentiable", tn_value_bool(false));
        rc = rc ? rc : tn__value_set_str(g, "fused", tn_value_none());
        rc = rc ? rc : tn__value_set_str(g, "decoupled_weight_decay",
                               tn_value_bool(tn_optim_kind(o) == TN_OPTIM_ADAMW));
    }
    struct tn_value *ids = rc ? NULL : tn_value_list();
    for (int i = 0; ids && i < tn_optim_nparams(o); i++)
        if (tn_value_append(ids, tn_value_int(i))) {
            tn_value_release(ids);
            ids = NULL;
        }
    rc = rc ? rc : tn__value_set_str(g, "params", ids);
    if (rc) {
        tn_value_release(g);
        return NULL;
    }
    return g;
}

static int set_tensor(struct tn_value *d, const char *key, struct tn_tensor *t)
{
    return t ? tn__value_set_str(d, key, tn_value_tensor(t)) : 0;
}

static struct tn_value *param_state(const struct tn_optim *o, int i)
{
    const struct tn_optim_param_state *st = tn_optim_state(o, i);
    struct tn_value *d = tn_value_dict();
    if (!d)
        return NULL;
    int rc = 0;
    if (tn_optim_kind(o) == TN_OPTIM_SGD) {
        rc = set_tensor(d, "momentum_buffer", st->momentum_buffer);
    } else {
        struct tn_tensor *step = tn_scalar_tensor(tn_float(st->step), TN_FLOAT32);
        rc = step ? set_tensor(d, "step", step) : tn_last_status();
        tn_release(step);
        rc = rc ? rc : set_tensor(d, "exp_avg", st->exp_avg);
        rc = rc ? rc : set_tensor(d, "exp_avg_sq", st->exp_avg_sq);
        rc = rc ? rc : set_tensor(d, "max_exp_avg_sq", st->max_exp_avg_sq);
    }
    if (rc) {
        tn_value_release(d);
        return NULL;
    }
    return d;
}

struct tn_value *tn_optim_state_dict(const struct tn_optim *o)
{
    struct tn_value *sd = tn_value_dict(), *state = tn_value_dict(), *groups = tn_value_list();
    int rc = sd && state && groups ? 0 : tn_set_error(TN_ENOMEM, "out of memory");
    for (int i = 0; !rc && i < tn_optim_nparams(o); i++) {
        const struct tn_optim_param_state *st = tn_optim_state(o, i);
        if (!st->initialized || (tn_optim_kind(o) == TN_OPTIM_SGD && !st->momentum_buffer))
            continue;
        struct tn_value *ps = param_state(o, i);
        struct tn_value *k = tn_value_int(i);
        rc = ps && k ? tn_value_set(state, k, ps) : tn_set_error(TN_ENOMEM, "out of memory");
        if (!ps || !k) {
            tn_value_release(ps);
            tn_value_release(k);
        }
    }
    struct tn_value *g = rc ? NULL : param_group(o);
    rc = rc ? rc : g ? tn_value_append(groups, g) : tn_last_status();
    rc = rc ? rc : tn__value_set_str(sd, "state", tn_value_retain(state));
    rc = rc ? rc : tn__value_set_str(sd, "param_groups", tn_value_retain(groups));
    tn_value_release(state);
    tn_value_release(groups);
    if (rc) {
        tn_value_release(sd);
        return NULL;
    }
    return sd;
}

/* A number of the group (int, float or bool), or `dflt` when absent. */
static int get_number(const struct tn_value *g, const char *key, double *out)
{
    const struct tn_value *v = tn_value_get(g, key);
    if (!v)
        return 0;
    switch (v->kind) {
    case TN_VALUE_INT: *out = (double)v->v.i; return 0;
    case TN_VALUE_FLOAT: *out = v->v.f; return 0;
    case TN_VALUE_BOOL: *out = v->v.b; return 0;
    default:
        return tn_set_error(TN_EFORMAT, "optimizer state_dict: param_groups[0][\"%s\"] is a %s, "
                            "not a number", key, tn_value_kind_name(v->kind));
    }
}

static int get_flag(const struct tn_value *g, const char *key, bool *out)
{
    double d = *out;
    int rc = get_number(g, key, &d);
    *out = d != 0;
    return rc;
}

/* The state entry `key` of a parameter's dict (a tensor or None), borrowed. */
static struct tn_tensor *state_tensor(const struct tn_value *ps, const char *key)
{
    const struct tn_value *v = tn_value_get(ps, key);
    return v && v->kind == TN_VALUE_TENSOR ? v->v.tensor : NULL;
}

static int load_param_state(struct tn_optim *o, const struct tn_value *state, int i)
{
    const struct tn_value *ps = NULL;
    for (size_t k = 0; k < state->v.dict.n; k++)
        if (state->v.dict.keys[k]->kind == TN_VALUE_INT && state->v.dict.keys[k]->v.i == i)
            ps = state->v.dict.vals[k];
    struct tn_optim_param_state st = {0};
    if (ps && ps->kind != TN_VALUE_DICT)
        return tn_set_error(TN_EFORMAT, "optimizer state_dict: state[%d] is a %s, not a dict",
                            i, tn_value_kind_name(ps->kind));
    if (ps) {
        st.initialized = true;
        st.momentum_buffer = state_tensor(ps, "momentum_buffer");
        st.exp_avg = state_tensor(ps, "exp_avg");
        st.exp_avg_sq = state_tensor(ps, "exp_avg_sq");
        st.max_exp_avg_sq = state_tensor(ps, "max_exp_avg_sq");
        const struct tn_value *step = tn_value_get(ps, "step");
        if (step && step->kind == TN_VALUE_TENSOR && tn_numel(step->v.tensor) == 1) {
            struct tn_tensor *s = tn_to_dtype(step->v.tensor, TN_FLOAT64);
            if (!s)
                return tn_last_status();
            st.step = *(const double *)tn_data(s);
            tn_release(s);
        } else if (step && (step->kind == TN_VALUE_INT || step->kind == TN_VALUE_FLOAT)) {
            st.step = step->kind == TN_VALUE_INT ? (double)step->v.i : step->v.f;
        }
        if (tn_optim_kind(o) != TN_OPTIM_SGD && (!st.exp_avg || !st.exp_avg_sq))
            return tn_set_error(TN_EFORMAT, "optimizer state_dict: state[%d] lacks exp_avg or "
                                "exp_avg_sq", i);
    }
    return tn_optim_set_state(o, i, &st);
}

int tn_optim_load_state_dict(struct tn_optim *o, const struct tn_value *sd)
{
    const struct tn_value *state = sd && sd->kind == TN_VALUE_DICT ? tn_value_get(sd, "state")
                                                                   : NULL;
    const struct tn_value *groups = sd && sd->kind == TN_VALUE_DICT
                                        ? tn_value_get(sd, "param_groups") : NULL;
    if (!state || state->kind != TN_VALUE_DICT || !groups || groups->kind != TN_VALUE_LIST)
        return tn_set_error(TN_EFORMAT, "optimizer state_dict: expected a dict with \"state\" "
                            "(dict) and \"param_groups\" (list)");
    if (groups->v.seq.n != 1)
        return tn_set_error(TN_EINVAL, "loaded state dict has a different number of parameter "
                            "groups");
    const struct tn_value *g = groups->v.seq.items[0];
    const struct tn_value *ids = g->kind == TN_VALUE_DICT ? tn_value_get(g, "params") : NULL;
    if (!ids || ids->kind != TN_VALUE_LIST)
        return tn_set_error(TN_EFORMAT, "optimizer state_dict: param_groups[0] has no "
                            "\"params\" list");
    if ((int64_t)ids->v.seq.n != tn_optim_nparams(o))
        return tn_set_error(TN_EINVAL, "loaded state dict contains a parameter group that "
                            "doesn't match the size of optimizer's group");
    double lr = tn_optim_get_lr(o);
    int rc = get_number(g, "lr", &lr);
    struct tn_sgd_options *s = (struct tn_sgd_options *)tn_optim_sgd_options(o);
    struct tn_adam_options *a = (struct tn_adam_options *)tn_optim_adam_options(o);
    if (!rc && s) {
        rc = get_number(g, "momentum", &s->momentum);
        rc = rc ? rc : get_number(g, "dampening", &s->dampening);
        rc = rc ? rc : get_number(g, "weight_decay", &s->weight_decay);
        rc = rc ? rc : get_flag(g, "nesterov", &s->nesterov);
        rc = rc ? rc : get_flag(g, "maximize", &s->maximize);
    } else if (!rc) {
        const struct tn_value *b = tn_value_get(g, "betas");
        if (b && (b->kind == TN_VALUE_TUPLE || b->kind == TN_VALUE_LIST) && b->v.seq.n == 2) {
            for (int k = 0; k < 2; k++) {
                const struct tn_value *x = b->v.seq.items[k];
                double *dst = k ? &a->beta2 : &a->beta1;
                if (x->kind == TN_VALUE_FLOAT)
                    *dst = x->v.f;
                else if (x->kind == TN_VALUE_INT)
                    *dst = (double)x->v.i;
            }
        }
        rc = get_number(g, "eps", &a->eps);
        rc = rc ? rc : get_number(g, "weight_decay", &a->weight_decay);
        rc = rc ? rc : get_flag(g, "amsgrad", &a->amsgrad);
        rc = rc ? rc : get_flag(g, "maximize", &a->maximize);
    }
    for (int i = 0; !rc && i < tn_optim_nparams(o); i++) {
        const struct tn_value *id = ids->v.seq.items[i];
        if (id->kind != TN_VALUE_INT)
            return tn_set_error(TN_EFORMAT, "optimizer state_dict: params[%d] is not an int", i);
        rc = load_param_state(o, state, (int)id->v.i);
    }
    if (!rc)
        tn_optim_set_lr(o, lr);
    return rc;
}
