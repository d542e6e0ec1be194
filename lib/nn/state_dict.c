/*
 * nn/state_dict.c: a module's state_dict as the value tree torch.save
 * writes and torch.load reads, and load_state_dict from one.  nn builds on
 * core's value tree (tensor/value.h; io depends on core alone and nn never
 * on io, DESIGN.md), so a module's state_dict lives with the module.
 */
#include "core/internal.h"
#include <tensor/nn.h>
#include <tensor/value.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int add_entry(const char *name, struct tn_tensor **slot, bool buffer, void *ctx)
{
    struct tn_tensor *t = tn_detach(*slot);
    if (!t)
        return tn_last_status();
    t->flags &= ~(unsigned)TN_TENSOR_PARAMETER;
    struct tn_value *v = tn_value_tensor(t);
    tn_release(t);
    return tn__value_set_str(ctx, name, v);
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

