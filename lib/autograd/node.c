/*
 * autograd/node.c: nodes, edges, grad mode, saved tensors with their
 * version checks, leaves and their AccumulateGrad nodes, tensor hooks, and
 * the in-place rules.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/internal.h"

/* --------------------------------------------------------------- grad mode */

/* Grad mode is the Autograd key's absence from this thread's excluded set:
 * with it off, the dispatcher never reaches an Autograd kernel (DESIGN.md:
 * no-grad mode excludes Autograd). */
bool tn_is_grad_enabled(void)
{
    return !(tn_dispatch_excluded() & TN_KEYSET(TN_KEY_AUTOGRAD));
}

bool tn_set_grad_enabled(bool enabled)
{
    tn_keyset ex = tn_dispatch_excluded();
    bool prev = !(ex & TN_KEYSET(TN_KEY_AUTOGRAD));
    if (enabled)
        ex &= ~TN_KEYSET(TN_KEY_AUTOGRAD);
    else
        ex |= TN_KEYSET(TN_KEY_AUTOGRAD);
    tn_dispatch_set_excluded(ex);
    return prev;
}

tn_keyset tn__ad_below_begin(void)
{
    tn_keyset prev = tn_dispatch_excluded();
    tn_dispatch_set_excluded(prev | TN_KEYSET(TN_KEY_AUTOGRAD));
    return prev;
}

void tn__ad_below_end(tn_keyset prev_excluded) { tn_dispatch_set_excluded(prev_excluded); }

bool tn__ad_needed(const struct tn_tensor *const *ts, int n)
{
    if (!tn_is_grad_enabled())
        return false;
    for (int i = 0; i < n; i++)
        if (ts[i] && ts[i]->requires_grad)
            return true;
    return false;
}

/* ------------------------------------------------------------------- hooks */

enum hook_kind { HOOK_TENSOR, HOOK_POST_ACCUMULATE, HOOK_RETAIN };

struct tn_hook {
    int64_t id;
    enum hook_kind kind;
    int output_nr;  /* which output of the node (tensor hooks on non-leaves) */
    tn_grad_hook_fn fn;
    tn_post_accumulate_hook_fn post;
    void *ctx;
    void (*ctx_free)(void *ctx);     /* run when the hook goes; NULL when none */
    struct tn_hook *next;            /* the owner's list */
    struct tn_hook *all_prev, *all_next; /* every live hook, for tn_remove_hook */
};

static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tn_hook *all_hooks;
static int64_t next_hook_id = 1;

static struct tn_hook *hook_new(enum hook_kind kind, struct tn_hook **list)
{
    struct tn_hook *h = calloc(1, sizeof *h);
    if (!h) {
        tn_set_error(TN_ENOMEM, "out of memory registering a hook");
        return NULL;
    }
    h->kind = kind;
    pthread_mutex_lock(&hooks_lock);
    h->id = next_hook_id++;
    h->all_next = all_hooks;
    if (all_hooks)
        all_hooks->all_prev = h;
    all_hooks = h;
    pthread_mutex_unlock(&hooks_lock);
    /* appended: hooks run in registration order */
    while (*list)
        list = &(*list)->next;
    *list = h;
    return h;
}

static void hooks_free(struct tn_hook *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&hooks_lock);
    for (struct tn_hook *p = h; p; p = p->next) {
        if (p->all_prev)
            p->all_prev->all_next = p->all_next;
        else
            all_hooks = p->all_next;
        if (p->all_next)
            p->all_next->all_prev = p->all_prev;
    }
    pthread_mutex_unlock(&hooks_lock);
    while (h) {
        struct tn_hook *n = h->next;
        if (h->ctx_free)
            h->ctx_free(h->ctx);
        free(h);
        h = n;
    }
}

bool tn_remove_hook(int64_t handle)
{
    bool found = false;
    pthread_mutex_lock(&hooks_lock);
    for (struct tn_hook *p = all_hooks; p; p = p->all_next)
        if (p->id == handle && (p->fn || p->post)) {
            /* left in its owner's list, inert, until the owner goes */
            p->fn = NULL;
            p->post = NULL;
            found = true;
        }
    pthread_mutex_unlock(&hooks_lock);
    return found;
}

/* --------------------------------------------------------- autograd meta */

/* A non-leaf's retain_grad: the tensor as its grad_fn's hook sees it,
 * NULL once the tensor is gone (the node may outlive it). Owned by the
 * tensor's meta and the hook. */
struct retain_cell {
    struct tn_tensor *t;
    int refs;
    struct tn_hook *hook;          /* the live hook, on t's current grad_fn */
};

/* What a tensor keeps between graphs. */
struct tn_autograd_meta {
    struct tn_node *grad_acc;      /* its AccumulateGrad node, not owned */
    struct tn_hook *hooks;         /* tensor hooks */
    struct tn_hook *post_hooks;    /* post-accumulate-grad hooks */
    struct retain_cell *retain;    /* retain_grad() of a non-leaf */
};

static void cell_release(void *p)
{
    struct retain_cell *c = p;
    if (c && --c->refs == 0)
        free(c);
}

static struct tn_autograd_meta *meta_of(const struct tn_tensor *t)
{
    struct tn_tensor *m = (struct tn_tensor *)t;
    if (!m->autograd_meta) {
        m->autograd_meta = calloc(1, sizeof(struct tn_autograd_meta));
        if (!m->autograd_meta)
            tn_set_error(TN_ENOMEM, "out of memory");
    }
    return m->autograd_meta;
}

void tn__ad_free_meta(struct tn_tensor *t)
{
    struct tn_autograd_meta *m = t->autograd_meta;
    t->autograd_meta = NULL;
    /* grad_acc cannot be alive here: it owns a reference to t */
    if (m->retain) {
        m->retain->t = NULL;
        cell_release(m->retain);
    }
    hooks_free(m->hooks);
    hooks_free(m->post_hooks);
    free(m);
}

/* ------------------------------------------------------------------- nodes */

static uint64_t node_seq;

static void node_destroy(struct tn_node *n)
{
    if (n->release_saved && !n->released)
        n->release_saved(n);
    for (int i = 0; i < n->nnext; i++)
        tn__node_release(n->next[i].fn);
    hooks_free(n->pre_hooks);
    if (n->leaf) {
        struct tn_autograd_meta *m = n->leaf->autograd_meta;
        if (m && m->grad_acc == n)
            m->grad_acc = NULL;
        tn_release(n->leaf);
    }
    free(n);
}

struct tn_node *tn__node_new(size_t size, const char *name, tn_node_apply_fn apply,
                             void (*release_saved)(struct tn_node *), int nnext, int nout)
{
    /* one block: the node, its edges, its output metadata */
    size_t esz = sizeof(struct tn_edge) * (size_t)nnext;
    size_t msz = sizeof(struct tn_input_meta) * (size_t)nout;
    size = (size + 15) & ~(size_t)15;
    char *p = calloc(1, size + esz + msz);
    if (!p) {
        tn_set_error(TN_ENOMEM, "out of memory recording %s", name);
        return NULL;
    }
    struct tn_node *n = (struct tn_node *)p;
    n->h.refcount = 1;
    n->h.destroy = node_destroy;
    n->h.name = name;
    n->apply = apply;
    n->release_saved = release_saved;
    n->nnext = nnext;
    n->next = (struct tn_edge *)(p + size);
    n->nout = nout;
    n->meta = (struct tn_input_meta *)(p + size + esz);
    n->seq = __atomic_add_fetch(&node_seq, 1, __ATOMIC_RELAXED);
    return n;
}

struct tn_node *tn__node_retain(struct tn_node *n)
{
    if (n)
        TN_ATOMIC_INC(&n->h.refcount);
    return n;
}

void tn__node_release(struct tn_node *n)
{
    if (n && TN_ATOMIC_DEC(&n->h.refcount) == 0)
        n->h.destroy(n);
}

static int accumulate_apply(struct tn_node *n, struct tn_tensor *const *grads,
                            struct tn_tensor **out)
{
    (void)n, (void)grads, (void)out;
    return TN_OK; /* the engine accumulates (tn__ad_accumulate) */
}

bool tn__ad_is_accumulate(const struct tn_node *n) { return n->apply == accumulate_apply; }

static void meta_fill(struct tn_input_meta *m, const struct tn_tensor *t)
{
    m->dtype = t->dtype;
    m->device = t->device;
    m->ndim = t->ndim;
    memcpy(m->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
}

struct tn_node *tn__ad_grad_accumulator(const struct tn_tensor *leaf)
{
    struct tn_autograd_meta *m = meta_of(leaf);
    if (!m)
        return NULL;
    if (m->grad_acc)
        return tn__node_retain(m->grad_acc);
    struct tn_node *n = tn__node_new(sizeof *n, "AccumulateGrad", accumulate_apply, NULL, 0, 1);
    if (!n)
        return NULL;
    n->leaf = tn_retain((struct tn_tensor *)leaf);
    meta_fill(&n->meta[0], leaf);
    m->grad_acc = n;
    return n;
}

int tn__ad_set_edge(struct tn_node *n, int i, const struct tn_tensor *t)
{
    n->next[i].fn = NULL;
    n->next[i].input_nr = 0;
    if (!t || !t->requires_grad)
        return TN_OK;
    if (t->grad_fn) {
        n->next[i].fn = tn__node_retain(t->grad_fn);
        n->next[i].input_nr = t->output_nr;
        return TN_OK;
    }
    n->next[i].fn = tn__ad_grad_accumulator(t);
    return n->next[i].fn ? TN_OK : tn_last_status();
}

struct tn_node *tn__ad_node_new(size_t size, const char *name, tn_node_apply_fn apply,
                                void (*release_saved)(struct tn_node *),
                                const struct tn_tensor *const *ins, int nnext, int nout)
{
    struct tn_node *n = tn__node_new(size, name, apply, release_saved, nnext, nout);
    for (int i = 0; n && i < nnext; i++)
        if (tn__ad_set_edge(n, i, ins[i]) < 0) {
            tn__node_release(n);
            return NULL;
        }
    return n;
}

void *tn__ad_node_begin(int *rc, const struct tn_tensor *const *ins, int nnext, size_t size,
                        const char *name, tn_node_apply_fn apply,
                        void (*release_saved)(struct tn_node *), int nout,
                        const struct tn__ad_slot *saved)
{
    if (*rc < 0 || !tn__ad_needed(ins, nnext))
        return NULL;
    struct tn_node *n = tn__ad_node_new(size, name, apply, release_saved, ins, nnext, nout);
    if (!n) {
        *rc = tn_last_status();
        return NULL;
    }
    if (saved)
        n->saved = saved;
    return n;
}

/* Contract in autograd/internal.h. */
void *tn__ad_kind_begin(int *rc, const struct tn_tensor *const *ins, int nnext, size_t size,
                        const struct tn__ad_kind *k, void (*release_saved)(struct tn_node *),
                        int nout, const struct tn__ad_slot *saved)
{
    struct tn_node *n = tn__ad_node_begin(rc, ins, nnext, size, k->name, tn__ad_apply_kind,
                                          release_saved, nout, saved);
    if (n)
        n->kind = k;
    return n;
}

/* Contract in autograd/internal.h. */
int tn__ad_apply_kind(struct tn_node *n, struct tn_tensor *const *grads, struct tn_tensor **out)
{
    const struct tn__ad_kind *k = n->kind;
    struct tn_tensor *v[TN__AD_MAX_V];
    int rc = 0;
    if (k->slots) {
        for (int i = 0; i < k->nv; i++)
            v[i] = NULL;
        rc = tn__ad_unpack_all(n, k->slots, v);
    }
    if (rc >= 0)
        rc = k->formulas(n, grads[k->g0], grads, k->slots ? v : NULL, out);
    if (k->slots)
        tn__ad_release_all(v, k->nv);
    return rc;
}

/* Contract in autograd/internal.h. */
struct tn_tensor *tn__ad_record1_end(struct tn_node *n, int rc, const struct tn_tensor *const *ins,
                                     int nnext, struct tn_tensor **r)
{
    static const bool diff[1] = {true};
    if (n && rc >= 0 && n->kind->slots)
        rc = tn__ad_save_all(n, n->kind->slots, nnext, ins, r, diff);
    tn__ad_finish(n, r, diff, 1, rc);
    return r[0];
}

/* Contract in autograd/internal.h. */
struct tn_tensor *tn__ad_record1(int rc, const struct tn_tensor *const *ins, int nnext,
                                 struct tn_tensor **r, size_t size, const struct tn__ad_kind *k)
{
    struct tn_node *n = tn__ad_kind_begin(&rc, ins, nnext, size, k, tn__release_saved_at, 1,
                                          k->slots);
    return tn__ad_record1_end(n, rc, ins, nnext, r);
}

int tn__ad_below_done(tn_keyset prev, const struct tn_tensor *r)
{
    int rc = r ? TN_OK : tn_last_status();
    tn__ad_below_end(prev);
    return rc;
}

int tn__ad_store_dims(int64_t *dst, int *dst_len, const int64_t *src, int len, const char *what)
{
    if (len > TN_MAX_DIMS)
        return tn_set_error(TN_EINVAL, "%s: more than %d dims", what, TN_MAX_DIMS);
    if (src && len)
        memcpy(dst, src, sizeof(int64_t) * (size_t)len);
    *dst_len = len;
    return TN_OK;
}

void tn__ad_save_sizes(int64_t *sizes, int *ndim, const struct tn_tensor *t)
{
    *ndim = t->ndim;
    memcpy(sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
}

/* ---------------------------------------- ops without a derivative */

/* The ops without a derivatives.yaml entry here whose PyTorch counterpart
 * has one: their node keeps the op's name, as PyTorch's does, and fails as
 * a derivatives.yaml not_implemented() entry does ("the derivative for
 * 'op' is not implemented."). The last four are ours, in the place of
 * backward ops PyTorch differentiates. Every other op has none in PyTorch
 * either (scatter.reduce, native_group_norm_backward): its node is
 * NotImplemented and fails naming aten::op, as PyTorch's does. */
static const char *const noderiv_pytorch_has[] = {
    "convolution_backward", "native_batch_norm_backward", "native_dropout_backward",
    "native_layer_norm_backward", "convolution_backward_input", "convolution_backward_weight",
    "convolution_backward_bias", "_tn_attention_backward"};

struct noderiv_node {
    struct tn_node n;
    const char *op; /* static: the schema's name */
    bool named;     /* in noderiv_pytorch_has */
};

static int noderiv_apply(struct tn_node *n, struct tn_tensor *const *grads, struct tn_tensor **out)
{
    (void)grads;
    (void)out;
    const struct noderiv_node *d = (const struct noderiv_node *)n;
    if (d->named)
        return tn_set_error(TN_ERUNTIME, "the derivative for '%s' is not implemented.", d->op);
    return tn_set_error(TN_ERUNTIME, "derivative for aten::%s is not implemented", d->op);
}

static struct tn_node *noderiv_node(const struct tn_tensor *const *ins, int nnext, int nout,
                                    const char *node, const char *op)
{
    bool named = false;
    for (size_t i = 0; i < sizeof noderiv_pytorch_has / sizeof *noderiv_pytorch_has; i++)
        named |= !strcmp(op, noderiv_pytorch_has[i]);
    struct noderiv_node *n = (struct noderiv_node *)tn__ad_node_new(
        sizeof *n, named ? node : "NotImplemented", noderiv_apply, NULL, ins, nnext, nout);
    if (n) {
        n->op = op;
        n->named = named;
    }
    return n ? &n->n : NULL;
}

struct tn__ad_noderiv_call tn__ad_noderiv_begin(const struct tn_tensor *const *ins, int nnext,
                                                const char *node, const char *op)
{
    struct tn__ad_noderiv_call c = {ins, nnext, node, op, tn__ad_needed(ins, nnext), 0};
    c.prev = tn__ad_below_begin(); /* after need: grad mode as the caller has it */
    return c;
}

struct tn_tensor *tn__ad_noderiv_result(const struct tn__ad_noderiv_call *c, struct tn_tensor *r)
{
    tn__ad_below_end(c->prev);
    /* integer and bool results are never differentiable; a result that
     * requires grad already is an input handed back */
    if (!r || !c->need || !tn__ad_differentiable(r) || r->requires_grad)
        return r;
    struct tn_node *n = noderiv_node(c->ins, c->nnext, 1, c->node, c->op);
    if (!n) {
        tn_release(r);
        return NULL;
    }
    tn__ad_set_history(r, n, 0);
    tn__node_release(n);
    return r;
}

int tn__ad_noderiv_tuple(struct tn_tensor **r, int nr, const struct tn_tensor *const *ins,
                         int nnext, const char *node, const char *op)
{
    if (!tn__ad_needed(ins, nnext))
        return TN_OK;
    struct tn_node *n = noderiv_node(ins, nnext, nr, node, op);
    if (!n) {
        for (int k = 0; k < nr; k++)
            tn_release(r[k]);
        return tn_last_status();
    }
    for (int k = 0; k < nr; k++)
        if (tn__ad_differentiable(r[k]) && !r[k]->requires_grad)
            tn__ad_set_history(r[k], n, (uint32_t)k);
    tn__node_release(n);
    return TN_OK;
}

/* The ops without a derivative whose in-place form PyTorch records no
 * node for (its autograd lets logical_not_ through to logical_not.out,
 * which gen_variable_type.py's DONT_REQUIRE_DERIVATIVE leaves
 * untracked): the values change and the version moves, but self keeps its
 * history (a non-leaf's MulBackward0 stays, and its gradient flows through
 * as before). Checked under 1.13 and 2.15. The other in-place ops of that
 * list (logical_and_, logical_or_, logical_xor_) are not ops here; the
 * comparisons in place (eq_, lt_...) have a derivatives.yaml entry. */
static const char *const noderiv_untracked[] = {"logical_not"};

int tn__ad_noderiv_inplace(struct tn_tensor *self, struct tn_tensor *c,
                           const struct tn_tensor *const *ins, int nnext, const char *node,
                           const char *op)
{
    for (size_t i = 0; i < sizeof noderiv_untracked / sizeof *noderiv_untracked; i++)
        if (!strcmp(op, noderiv_untracked[i])) {
            bool prev = tn_set_grad_enabled(false);
            int rc = tn_copy_(self, c);
            tn_set_grad_enabled(prev);
            tn_release(c);
            return rc;
        }
    struct tn_node *n = noderiv_node(ins, nnext, 1, node, op);
    if (!n) {
        tn_release(c);
        return tn_last_status();
    }
    tn__ad_set_history(c, n, 0);
    tn__node_release(n);
    return tn__ad_commit_inplace(self, c);
}

static int retain_hook_add(struct tn_tensor *t, struct retain_cell *c);

void tn__ad_set_history(struct tn_tensor *t, struct tn_node *n, uint32_t nr)
{
    /* only floating and complex tensors are differentiable: an integer or
     * bool result gets no grad_fn and does not require grad (PyTorch's
     * isDifferentiableType), whichever op made it (a conversion, copy_) */
    if (!tn__ad_differentiable(t))
        return;
    struct tn_node *old = t->grad_fn;
    t->grad_fn = tn__node_retain(n);
    t->output_nr = nr;
    t->requires_grad = true;
    meta_fill(&n->meta[nr], t);
    /* retain_grad follows the tensor to its new grad_fn, as PyTorch's */
    struct tn_autograd_meta *m = t->autograd_meta;
    if (m && m->retain && old != n) {
        m->retain->hook->fn = NULL;
        if (retain_hook_add(t, m->retain) < 0)
            tn_clear_error();
    }
    tn__node_release(old);
}

/* ----------------------------------------------------------- saved values */

int tn__save(struct tn_saved *s, const struct tn_tensor *t, bool is_output, uint32_t output_nr)
{
    s->t = NULL;
    s->is_output = is_output;
    s->output_nr = output_nr;
    if (!t)
        return TN_OK;
    s->version = t->storage->version;
    /* an output is kept without its grad_fn (which is the saving node) */
    s->t = is_output ? tn_detach(t) : tn_retain((struct tn_tensor *)t);
    return s->t ? TN_OK : tn_last_status();
}

void tn__saved_release(struct tn_saved *s)
{
    tn_release(s->t);
    s->t = NULL;
}

static const char freed_msg[] =
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you "
    "call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors after calling "
    "backward.";

struct tn_tensor *tn__unpack(const struct tn_saved *s, struct tn_node *n)
{
    if (n->released) {
        tn_set_error(TN_ERUNTIME, "%s", freed_msg);
        return NULL;
    }
    struct tn_tensor *t = s->t;
    if (!t)
        return NULL;
    uint64_t now = t->storage->version;
    if (now != s->version) {
        char shape[256], which[160] = "";
        tn_shape_format(t->sizes, t->ndim, shape, sizeof shape);
        if (s->is_output)
            snprintf(which, sizeof which, ", which is output %u of %s,", s->output_nr, n->h.name);
        else if (t->grad_fn)
            snprintf(which, sizeof which, ", which is output %u of %s,", t->output_nr,
                     ((struct tn_node_header *)t->grad_fn)->name);
        tn_set_error(TN_ERUNTIME,
                     "one of the variables needed for gradient computation has been modified by "
                     "an inplace operation: [torch.%sTensor %s]%s is at version %llu; expected "
                     "version %llu instead. Hint: enable anomaly detection to find the operation "
                     "that failed to compute its gradient, with "
                     "torch.autograd.set_detect_anomaly(True).",
                     tn_dtype_info(t->dtype)->c10_name, shape, which, (unsigned long long)now,
                     (unsigned long long)s->version);
        return NULL;
    }
    if (!s->is_output)
        return tn_retain(t);
    /* the output again, with the saving node as its grad_fn */
    struct tn_tensor *r =
        tn__tensor_make(t->storage, t->offset, t->sizes, t->strides, t->ndim, t->dtype);
    if (!r)
        return NULL;
    r->grad_fn = tn__node_retain(n);
    r->output_nr = s->output_nr;
    r->requires_grad = true;
    return r;
}

/* ------------------------------------------------------------------ leaves */

int tn_requires_grad_(struct tn_tensor *t, bool requires_grad)
{
    if (t->grad_fn && !requires_grad)
        return tn_set_error(TN_EINVAL, "you can only change requires_grad flags of leaf "
                            "variables. If you want to use a computed variable in a subgraph "
                            "that doesn't require differentiation use var_no_grad = var.detach().");
    if (requires_grad && !tn_dtype_is_floating(t->dtype) && !tn_dtype_is_complex(t->dtype))
        return tn_set_error(TN_EDTYPE, "only Tensors of floating point and complex dtype can "
                            "require gradients");
    t->requires_grad = requires_grad;
    return TN_OK;
}

bool tn_is_leaf(const struct tn_tensor *t) { return t->grad_fn == NULL; }

const char *tn_grad_fn_name(const struct tn_tensor *t)
{
    return t->grad_fn ? ((const struct tn_node_header *)t->grad_fn)->name : NULL;
}

void tn_zero_grad(struct tn_tensor *t)
{
    tn_release(t->grad);
    t->grad = NULL;
}

int64_t tn_register_hook(struct tn_tensor *t, tn_grad_hook_fn fn, void *ctx)
{
    if (!t->requires_grad)
        return tn_set_error(TN_ERUNTIME, "cannot register a hook on a tensor that doesn't "
                            "require gradient");
    struct tn_hook **list;
    if (t->grad_fn) {
        list = &t->grad_fn->pre_hooks;
    } else {
        struct tn_autograd_meta *m = meta_of(t);
        if (!m)
            return TN_ENOMEM;
        list = &m->hooks;
    }
    struct tn_hook *h = hook_new(HOOK_TENSOR, list);
    if (!h)
        return TN_ENOMEM;
    h->fn = fn;
    h->ctx = ctx;
    h->output_nr = (int)t->output_nr;
    return h->id;
}

int64_t tn_register_post_accumulate_grad_hook(struct tn_tensor *leaf,
                                              tn_post_accumulate_hook_fn fn, void *ctx)
{
    if (!leaf->requires_grad)
        return tn_set_error(TN_ERUNTIME, "cannot register a hook on a tensor that doesn't "
                            "require gradient");
    if (leaf->grad_fn)
        return tn_set_error(TN_ERUNTIME, "post accumulate grad hooks cannot be registered on "
                            "non-leaf tensors");
    struct tn_autograd_meta *m = meta_of(leaf);
    if (!m)
        return TN_ENOMEM;
    struct tn_hook *h = hook_new(HOOK_POST_ACCUMULATE, &m->post_hooks);
    if (!h)
        return TN_ENOMEM;
    h->post = fn;
    h->ctx = ctx;
    return h->id;
}

/* The tensor hooks of output output_nr, then its retain_grad (which sees
 * what the hooks made of the gradient, as PyTorch's). */
static int run_hooks(struct tn_hook *h, int output_nr, struct tn_tensor **grad)
{
    for (int pass = 0; pass < 2; pass++)
        for (struct tn_hook *p = h; p; p = p->next)
            if (p->fn && p->output_nr == output_nr && (p->kind == HOOK_RETAIN) == (pass == 1)) {
                int rc = p->fn(grad, p->ctx);
                if (rc < 0)
                    return rc;
            }
    return TN_OK;
}

/* .grad of a non-leaf that retains it: a copy of the first gradient, the
 * sum after that. */
static int retain_hook(struct tn_tensor **grad, void *ctx)
{
    struct retain_cell *c = ctx;
    struct tn_tensor *t = c->t;
    if (!t || !*grad)
        return TN_OK;
    struct tn_tensor *g = t->grad ? tn_add(t->grad, *grad, tn_int(1)) : tn_clone(*grad);
    if (!g)
        return tn_last_status();
    tn_release(t->grad);
    t->grad = g;
    return TN_OK;
}

static int retain_hook_add(struct tn_tensor *t, struct retain_cell *c)
{
    struct tn_hook *h = hook_new(HOOK_RETAIN, &t->grad_fn->pre_hooks);
    if (!h)
        return TN_ENOMEM;
    h->fn = retain_hook;
    h->ctx = c;
    h->ctx_free = cell_release;
    h->output_nr = (int)t->output_nr;
    c->refs++;
    c->hook = h;
    return TN_OK;
}

int tn_retain_grad(struct tn_tensor *t)
{
    if (!t->requires_grad)
        return tn_set_error(TN_ERUNTIME, "can't retain_grad on Tensor that has "
                            "requires_grad=False");
    if (!t->grad_fn)
        return TN_OK; /* a leaf keeps its .grad anyway */
    struct tn_autograd_meta *m = meta_of(t);
    if (!m)
        return TN_ENOMEM;
    if (m->retain)
        return TN_OK;
    struct retain_cell *c = calloc(1, sizeof *c);
    if (!c)
        return tn_set_error(TN_ENOMEM, "out of memory");
    c->t = t;
    c->refs = 1;
    int rc = retain_hook_add(t, c);
    if (rc < 0) {
        free(c);
        return rc;
    }
    m->retain = c;
    return TN_OK;
}

bool tn_retains_grad(const struct tn_tensor *t)
{
    const struct tn_autograd_meta *m = t->autograd_meta;
    return t->grad_fn && m && m->retain;
}

int tn__ad_run_pre_hooks(struct tn_node *n, int i, struct tn_tensor **grad)
{
    if (n->leaf) {
        struct tn_autograd_meta *m = n->leaf->autograd_meta;
        return m ? run_hooks(m->hooks, 0, grad) : TN_OK;
    }
    return run_hooks(n->pre_hooks, i, grad);
}

int tn__ad_accumulate(struct tn_node *acc, struct tn_tensor *grad, bool create_graph)
{
    struct tn_tensor *leaf = acc->leaf;
    int rc = TN_OK;
    if (!leaf->grad) {
        /* take the buffer when nothing else holds it or its memory (a view of
         * another gradient, an expanded one), else a dense copy of our own */
        if (create_graph || (grad->refcount == 1 && grad->storage->refcount == 1 &&
                             tn_is_non_overlapping_and_dense(grad))) {
            leaf->grad = tn_retain(grad);
        } else {
            bool prev = tn_set_grad_enabled(false);
            leaf->grad = tn_clone(grad);
            tn_set_grad_enabled(prev);
            if (!leaf->grad)
                return tn_last_status();
        }
    } else if (create_graph) {
        struct tn_tensor *sum = tn_add(leaf->grad, grad, tn_int(1));
        if (!sum)
            return tn_last_status();
        tn_release(leaf->grad);
        leaf->grad = sum;
    } else {
        bool prev = tn_set_grad_enabled(false);
        rc = tn_add_(leaf->grad, grad, tn_int(1));
        tn_set_grad_enabled(prev);
        if (rc < 0)
            return rc;
    }
    struct tn_autograd_meta *m = leaf->autograd_meta;
    for (struct tn_hook *h = m ? m->post_hooks : NULL; h; h = h->next)
        if (h->post && (rc = h->post(leaf, h->ctx)) < 0)
            return rc;
    return TN_OK;
}

/* --------------------------------------------------------------- in place */

int tn__ad_check_inplace(const struct tn_tensor *self)
{
    if (!tn_is_grad_enabled() || !self->requires_grad)
        return TN_OK;
    const struct tn_tensor *b = self->base;
    if (b && b->requires_grad && !b->grad_fn)
        return tn_set_error(TN_ERUNTIME, "a view of a leaf Variable that requires grad is being "
                            "used in an in-place operation.");
    if (!self->grad_fn)
        return tn_set_error(TN_ERUNTIME, "a leaf Variable that requires grad is being used in "
                            "an in-place operation.");
    return TN_OK;
}

int tn__ad_commit_inplace(struct tn_tensor *self, struct tn_tensor *out)
{
    bool prev = tn_set_grad_enabled(false);
    int rc = tn_copy_(self, out);
    tn_set_grad_enabled(prev);
    if (rc == TN_OK && self->base && (self->base->requires_grad || out->requires_grad))
        rc = tn__ad_copy_slices(self, out);
    else if (rc == TN_OK && out->grad_fn)
        tn__ad_set_history(self, out->grad_fn, out->output_nr);
    tn_release(out);
    return rc;
}

/* ---------------------------------------------------------- core hooks */

static int check_inplace_hook(const struct tn_tensor *dst) { return tn__ad_check_inplace(dst); }

static const struct tn_autograd_hooks hooks = {tn__ad_on_view, check_inplace_hook,
                                               tn__ad_after_inplace, tn__ad_free_meta};

/* Here rather than in views.c: every program that records a node links
 * this file, static links included. */
__attribute__((constructor)) static void install_hooks(void) { tn__autograd_hooks = &hooks; }

/* ------------------------------------- what generated kernels share */

int tn__ad_unpack_into(struct tn_tensor **v, const struct tn_saved *s, struct tn_node *n)
{
    *v = tn__unpack(s, n);
    return !*v && (n->released || s->t) ? tn_last_status() : TN_OK;
}

struct tn_tensor *tn__ad_inplace_clone(struct tn_tensor *self)
{
    return tn__ad_check_inplace(self) < 0 ? NULL : tn_clone(self);
}

/* Whether an edge of mask leads somewhere (tn__ad_edge for each bit). */
static bool slot_wanted(const struct tn_node *n, uint32_t mask)
{
    for (int e = 0; mask; e++, mask >>= 1)
        if ((mask & 1) && tn__ad_edge(n, e))
            return true;
    return false;
}

/* Contract in autograd/internal.h. */
int tn__ad_save_all(struct tn_node *n, const struct tn__ad_slot *sl, int nt,
                    const struct tn_tensor *const *ins, struct tn_tensor *const *r,
                    const bool *diff)
{
    for (; sl->at; sl++) {
        if (!slot_wanted(n, sl->edges))
            continue;
        struct tn_saved *s = (struct tn_saved *)((char *)n + sl->at);
        int k = sl->v - nt;
        int rc = k < 0 ? tn__save(s, ins[sl->v], false, 0) : tn__save(s, r[k], diff[k], (uint32_t)k);
        if (rc < 0)
            return rc;
    }
    return TN_OK;
}

/* Contract in autograd/internal.h. */
int tn__ad_unpack_all(struct tn_node *n, const struct tn__ad_slot *sl, struct tn_tensor **v)
{
    for (; sl->at; sl++) {
        int rc;
        if (slot_wanted(n, sl->edges) &&
            (rc = tn__ad_unpack_into(&v[sl->v], (const struct tn_saved *)((char *)n + sl->at), n)) < 0)
            return rc;
    }
    return TN_OK;
}

/* Contract in autograd/internal.h. */
void tn__ad_release_all(struct tn_tensor **v, int n)
{
    for (int k = 0; k < n; k++)
        tn_release(v[k]);
}

bool tn__ad_below_unless_needed(const struct tn_tensor *const *ins, int n, tn_keyset *prev)
{
    if (tn__ad_needed(ins, n))
        return false;
    *prev = tn__ad_below_begin();
    return true;
}

int tn__ad_inplace_end(struct tn_tensor *self, struct tn_tensor *c, struct tn_tensor *o,
                       const char *node)
{
    tn_release(c);
    if (!o)
        return tn_last_status();
    if (node && o->grad_fn)
        o->grad_fn->h.name = node;
    return tn__ad_commit_inplace(self, o);
}

void tn__release_saved_at(struct tn_node *n)
{
    for (const struct tn__ad_slot *sl = n->saved; sl && sl->at; sl++)
        tn__saved_release((struct tn_saved *)((char *)n + sl->at));
}

int tn__ad_take(struct tn_tensor **out, struct tn_tensor **t, int nt, int k, bool ok)
{
    if (ok) {
        *out = t[k];
        t[k] = NULL;
    }
    for (int i = 0; i < nt; i++)
        tn_release(t[i]);
    return ok ? TN_OK : tn_last_status();
}

int tn__ad_finish(struct tn_node *n, struct tn_tensor **r, const bool *diff, int nr, int rc)
{
    for (int k = 0; n && rc >= 0 && k < nr; k++)
        if (diff[k])
            tn__ad_set_history(r[k], n, (uint32_t)k);
    if (n)
        tn__node_release(n);
    for (int k = 0; rc < 0 && k < nr; k++) {
        tn_release(r[k]);
        r[k] = NULL;
    }
    return rc;
}
