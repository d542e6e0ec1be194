/*
 * io/optim_state.c: model and optimizer state_dicts as the value trees
 * torch.save writes and torch.load reads.  It lives in io because io sits
 * above nn and optim (DESIGN.md): nn and optim know nothing of values.
 *
 * The optimizer layout is PyTorch's optimizer.state_dict(): parameters are
 * numbered by their position in the group, the state of each is a dict of
 * tensors (the Adam step a float32 0-dim tensor), and the group carries
 * every hyperparameter under PyTorch's names, 2.x's set of keys (1.13's
 * with TN_OPTIM_TORCH1), so that either version's load_state_dict takes it.
 */
#include "io/internal.h"
#include <tensor/nn.h>
#include <tensor/optim.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* d[key] = val for a string key; consumes val.  0 or an error. */
static int set_str(struct tn_value *d, const char *key, struct tn_value *val)
{
    struct tn_value *k = tn_value_str(key);
    if (!k || !val) {
        tn_value_release(k);
        tn_value_release(val);
        return tn_set_error(TN_ENOMEM, "out of memory building a state_dict");
    }
    return tn_value_set(d, k, val);
}

/* ------------------------------------------------------------ modules */

static int add_entry(const char *name, struct tn_tensor **slot, bool buffer, void *ctx)
{
    struct tn_tensor *t = tn_detach(*slot);
    if (!t)
        return tn_last_status();
    t->flags &= ~(unsigned)TN_TENSOR_PARAMETER;
    struct tn_value *v = tn_value_tensor(t);
    tn_release(t);
    return set_str(ctx, name, v);
}

struct tn_value *tn_module_state_dict(struct tn_module *m)
{
    struct tn_value *d = tn_value_odict();
    if (!d) {
        tn_set_error(TN_ENOMEM, "out of memory building a state_dict");
        return NULL;
    }
    if (tn_module_visit(m, add_entry, d) != 0) {
        tn_value_release(d);
        return NULL;
    }
    return d;
}

/* Appends `"name", ` to a message buffer (bounded). */
static void name_list(char *buf, size_t cap, const char *name)
{
    size_t len = strlen(buf);
    if (len + 1 < cap)
        snprintf(buf + len, cap - len, "%s\"%s\"", len ? ", " : "", name);
}

static void shape_text(char *buf, size_t cap, const struct tn_tensor *t)
{
    size_t len = (size_t)snprintf(buf, cap, "torch.Size([");
    for (int i = 0; i < t->ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "",
                                (long long)t->sizes[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "])");
}

struct load_ctx {
    const struct tn_value *sd;
    bool *used;
    char missing[1024];
    char error[1024];
    int rc;
};

static int load_entry(const char *name, struct tn_tensor **slot, bool buffer, void *ctx)
{
    struct load_ctx *c = ctx;
    const struct tn_value *sd = c->sd;
    size_t i = 0;
    while (i < sd->v.dict.n && !(sd->v.dict.keys[i]->kind == TN_VALUE_STR &&
                                 strcmp(sd->v.dict.keys[i]->v.str.s, name) == 0))
        i++;
    if (i == sd->v.dict.n) {
        name_list(c->missing, sizeof c->missing, name);
        return 0;
    }
    c->used[i] = true;
    const struct tn_value *v = sd->v.dict.vals[i];
    if (v->kind != TN_VALUE_TENSOR) {
        snprintf(c->error, sizeof c->error, "%s is a %s, not a tensor", name,
                 tn_value_kind_name(v->kind));
        return c->rc = TN_EFORMAT;
    }
    struct tn_tensor *src = v->v.tensor, *dst = *slot;
    bool same = src->ndim == dst->ndim;
    for (int d = 0; same && d < dst->ndim; d++)
        same = src->sizes[d] == dst->sizes[d];
    if (!same) {
        char a[256], b[256];
        shape_text(a, sizeof a, src);
        shape_text(b, sizeof b, dst);
        snprintf(c->error, sizeof c->error, "size mismatch for %s: copying a param with shape "
                 "%s from checkpoint, the shape in current model is %s.", name, a, b);
        return c->rc = TN_ESHAPE;
    }
    /* a parameter is a leaf that requires grad: copy into its storage
     * directly, as PyTorch does under no_grad */
    bool rg = dst->requires_grad;
    dst->requires_grad = false;
    int rc = tn_copy_(dst, src);
    dst->requires_grad = rg;
    if (rc) {
        snprintf(c->error, sizeof c->error, "%s: %s", name, tn_last_error());
        return c->rc = rc;
    }
    return 0;
}

int tn_module_load_state_dict(struct tn_module *m, const struct tn_value *sd, bool strict)
{
    if (!sd || (sd->kind != TN_VALUE_DICT && sd->kind != TN_VALUE_ODICT))
        return tn_set_error(TN_EINVAL, "Expected state_dict to be dict-like, got %s.",
                            sd ? tn_value_kind_name(sd->kind) : "None");
    struct load_ctx c = {.sd = sd};
    if (!(c.used = calloc(sd->v.dict.n + 1, sizeof *c.used)))
        return tn_set_error(TN_ENOMEM, "out of memory loading a state_dict");
    tn_module_visit(m, load_entry, &c);
    char unexpected[1024] = "";
    for (size_t i = 0; i < sd->v.dict.n; i++)
        if (!c.used[i])
            name_list(unexpected, sizeof unexpected,
                      sd->v.dict.keys[i]->kind == TN_VALUE_STR ? sd->v.dict.keys[i]->v.str.s
                                                               : "?");
    free(c.used);
    if (c.rc)
        return tn_set_error(c.rc, "Error(s) in loading state_dict for %s: %s", m->type, c.error);
    if (strict && (c.missing[0] || unexpected[0]))
        return tn_set_error(TN_EINVAL, "Error(s) in loading state_dict for %s:%s%s%s%s%s",
                            m->type, c.missing[0] ? " Missing key(s) in state_dict: " : "",
                            c.missing, c.missing[0] ? ". " : "",
                            unexpected[0] ? " Unexpected key(s) in state_dict: " : "",
                            unexpected[0] ? unexpected : "");
    return 0;
}

/* --------------------------------------------------------- optimizers */

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
    bool torch1 = false;
    const struct tn_sgd_options *s = tn_optim_sgd_options(o);
    const struct tn_adam_options *a = tn_optim_adam_options(o);
    /* the compat setting is not public state; 2.x keys load in both */
    int rc = set_str(g, "lr", tn_value_float(tn_optim_get_lr(o)));
    if (s) {
        rc = rc ? rc : set_str(g, "momentum", number(s->momentum));
        rc = rc ? rc : set_str(g, "dampening", number(s->dampening));
        rc = rc ? rc : set_str(g, "weight_decay", number(s->weight_decay));
        rc = rc ? rc : set_str(g, "nesterov", tn_value_bool(s->nesterov));
        rc = rc ? rc : set_str(g, "maximize", tn_value_bool(s->maximize));
        rc = rc ? rc : set_str(g, "foreach", tn_value_none());
        rc = rc ? rc : set_str(g, "differentiable", tn_value_bool(false));
        rc = rc ? rc : set_str(g, "fused", tn_value_none());
    } else {
        struct tn_value *betas = tn_value_tuple();
        if (betas && (tn_value_append(betas, tn_value_float(a->beta1)) ||
                      tn_value_append(betas, tn_value_float(a->beta2)))) {
            tn_value_release(betas);
            betas = NULL;
        }
        rc = rc ? rc : set_str(g, "betas", betas);
        rc = rc ? rc : set_str(g, "eps", tn_value_float(a->eps));
        rc = rc ? rc : set_str(g, "weight_decay", number(a->weight_decay));
        rc = rc ? rc : set_str(g, "amsgrad", tn_value_bool(a->amsgrad));
        rc = rc ? rc : set_str(g, "maximize", tn_value_bool(a->maximize));
        rc = rc ? rc : set_str(g, "foreach", tn_value_none());
        rc = rc ? rc : set_str(g, "capturable", tn_value_bool(false));
        rc = rc ? rc : set_str(g, "differentiable", tn_value_bool(false));
        rc = rc ? rc : set_str(g, "fused", tn_value_none());
        rc = rc ? rc : set_str(g, "decoupled_weight_decay",
                               tn_value_bool(tn_optim_kind(o) == TN_OPTIM_ADAMW));
    }
    (void)torch1;
    struct tn_value *ids = rc ? NULL : tn_value_list();
    for (int i = 0; ids && i < tn_optim_nparams(o); i++)
        if (tn_value_append(ids, tn_value_int(i))) {
            tn_value_release(ids);
            ids = NULL;
        }
    rc = rc ? rc : set_str(g, "params", ids);
    if (rc) {
        tn_value_release(g);
        return NULL;
    }
    return g;
}

static int set_tensor(struct tn_value *d, const char *key, struct tn_tensor *t)
{
    return t ? set_str(d, key, tn_value_tensor(t)) : 0;
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
    rc = rc ? rc : set_str(sd, "state", tn_value_retain(state));
    rc = rc ? rc : set_str(sd, "param_groups", tn_value_retain(groups));
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
