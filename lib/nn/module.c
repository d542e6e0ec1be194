/*
 * nn/module.c: what every module shares: forward, train/eval, freeing,
 * walking the parameters and buffers in state_dict order, Sequential, and
 * the parameterless activations.
 */
#include "core/internal.h"
#include "nn/internal.h"
#include <tensor/ops.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tn_tensor *tn_module_forward(struct tn_module *m, const struct tn_tensor *x)
{
    if (!m || !x) {
        tn_set_error(TN_EINVAL, "module forward: NULL %s", m ? "input" : "module");
        return NULL;
    }
    return m->forward(m, x);
}

void tn_module_train(struct tn_module *m, bool mode)
{
    m->training = mode;
    for (int i = 0; i < m->nchildren; i++)
        tn_module_train(m->children[i], mode);
}

void tn_module_free(struct tn_module *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->nchildren; i++)
        tn_module_free(m->children[i]);
    free(m->children);
    for (int i = 0; i < m->nslots; i++)
        tn_release(*m->slots[i].tensor);
    if (m->destroy)
        m->destroy(m);
    free(m);
}

/* The walk of tn_module_visit with the name prefix so far. */
static int visit(struct tn_module *m, char *prefix, size_t plen, tn_module_visit_fn fn, void *ctx)
{
    char name[TN_NN_NAME_MAX];
    for (int i = 0; i < m->nslots; i++) {
        if (!*m->slots[i].tensor)
            continue;
        snprintf(name, sizeof name, "%.*s%s", (int)plen, prefix, m->slots[i].name);
        int rc = fn(name, m->slots[i].tensor, m->slots[i].buffer, ctx);
        if (rc)
            return rc;
    }
    for (int i = 0; i < m->nchildren; i++) {
        int n = snprintf(prefix + plen, TN_NN_NAME_MAX - plen, "%d.", i);
        TN_ASSERT(n > 0 && plen + (size_t)n < TN_NN_NAME_MAX);
        int rc = visit(m->children[i], prefix, plen + (size_t)n, fn, ctx);
        if (rc)
            return rc;
    }
    return 0;
}

int tn_module_visit(struct tn_module *m, tn_module_visit_fn fn, void *ctx)
{
    char prefix[TN_NN_NAME_MAX] = "";
    return visit(m, prefix, 0, fn, ctx);
}

struct collect {
    struct tn_tensor **out;
    int cap, n;
    int64_t numel;
};

static int collect_param(const char *name, struct tn_tensor **slot, bool buffer, void *ctx)
{
    struct collect *c = ctx;
    if (buffer)
        return 0;
    if (c->n < c->cap)
        c->out[c->n] = *slot;
    c->n++;
    c->numel += tn_numel(*slot);
    return 0;
}

int tn_module_parameters(struct tn_module *m, struct tn_tensor **out, int cap)
{
    struct collect c = {out, cap, 0, 0};
    tn_module_visit(m, collect_param, &c);
    return c.n;
}

int64_t tn_module_num_parameters(struct tn_module *m)
{
    struct collect c = {NULL, 0, 0, 0};
    tn_module_visit(m, collect_param, &c);
    return c.numel;
}

struct tn_module *tn__module_alloc(size_t size, const char *type,
                                   struct tn_tensor *(*forward)(struct tn_module *,
                                                                const struct tn_tensor *))
{
    struct tn_module *m = calloc(1, size);
    if (!m) {
        tn_set_error(TN_ENOMEM, "out of memory creating a %s module", type);
        return NULL;
    }
    m->type = type;
    m->training = true;
    m->forward = forward;
    return m;
}

void tn__module_slot(struct tn_module *m, const char *name, struct tn_tensor **slot, bool buffer)
{
    TN_ASSERT(m->nslots < TN_MODULE_MAX_SLOTS);
    m->slots[m->nslots++] = (struct tn_module_slot){name, slot, buffer};
}

/* ------------------------------------------------------------ Sequential */

static struct tn_tensor *sequential_forward(struct tn_module *m, const struct tn_tensor *x)
{
    struct tn_tensor *cur = tn_retain((struct tn_tensor *)x);
    for (int i = 0; i < m->nchildren && cur; i++) {
        struct tn_tensor *next = tn_module_forward(m->children[i], cur);
        tn_release(cur);
        cur = next;
    }
    return cur;
}

struct tn_module *tn_nn_sequential_new(struct tn_module *const *modules, int n)
{
    struct tn_module *m = tn__module_alloc(sizeof *m, "Sequential", sequential_forward);
    if (m && n > 0 && !(m->children = calloc((size_t)n, sizeof *m->children))) {
        free(m);
        m = NULL;
        tn_set_error(TN_ENOMEM, "out of memory creating a Sequential module");
    }
    for (int i = 0; i < n; i++) {
        if (m && !modules[i]) {
            tn_module_free(m);
            m = NULL;
            tn_set_error(TN_EINVAL, "Sequential: module %d is NULL", i);
        }
        if (m)
            m->children[m->nchildren++] = modules[i];
        else
            tn_module_free(modules[i]);
    }
    return m;
}

/* ----------------------------------------------------------- activations */

struct activation {
    struct tn_module base;
    enum tn_nn_activation kind;
};

static struct tn_tensor *activation_forward(struct tn_module *m, const struct tn_tensor *x)
{
    switch (((struct activation *)m)->kind) {
    case TN_NN_RELU: return tn_relu(x);
    case TN_NN_GELU: return tn_gelu(x, "none");
    case TN_NN_TANH: return tn_tanh(x);
    case TN_NN_SIGMOID: return tn_sigmoid(x);
    case TN_NN_SILU: return tn_silu(x);
    case TN_NN_FLATTEN: return tn_flatten(x, 1, -1);
    }
    TN_ASSERT(!"unknown activation");
    return NULL;
}

struct tn_module *tn_nn_activation_new(enum tn_nn_activation kind)
{
    static const char *const names[] = {"ReLU", "GELU", "Tanh", "Sigmoid", "SiLU", "Flatten"};
    if ((unsigned)kind >= sizeof names / sizeof *names) {
        tn_set_error(TN_EINVAL, "unknown activation %d", (int)kind);
        return NULL;
    }
    struct activation *a =
        (struct activation *)tn__module_alloc(sizeof *a, names[kind], activation_forward);
    if (a)
        a->kind = kind;
    return a ? &a->base : NULL;
}
