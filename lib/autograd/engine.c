/*
 * autograd/engine.c: runs a graph backward. From the roots it finds every
 * node it reaches and counts, per node, the edges that lead into it; a node
 * whose count reaches zero has all its gradients (summed where paths join)
 * and goes on the ready queue. AccumulateGrad nodes add into the leaves'
 * .grad; tn_grad() captures the gradients of its inputs instead and runs
 * only the nodes that lead to them.
 */
#include <stdlib.h>
#include <string.h>

#include "autograd/internal.h"

static uint64_t engine_epoch;

struct vec {
    struct tn_node **v;
    size_t n, cap;
};

static int vec_push(struct vec *a, struct tn_node *n)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        struct tn_node **nv = realloc(a->v, cap * sizeof *nv);
        if (!nv)
            return tn_set_error(TN_ENOMEM, "out of memory running backward");
        a->v = nv;
        a->cap = cap;
    }
    a->v[a->n++] = n;
    return TN_OK;
}

/* A capture of tn_grad: the gradient arriving at input `nr` of `fn`. */
struct capture {
    struct tn_node *fn;
    uint32_t nr;
    struct tn_tensor *grad;
};

struct task {
    uint64_t epoch;
    bool keep_graph, create_graph, accumulate;
    struct capture *caps;
    int ncaps;
    struct vec nodes; /* every node reached, in post-order (inputs first) */
};

static char *size_text(const int64_t *s, int n, char *buf, size_t len)
{
    char tmp[240];
    snprintf(buf, len, "torch.Size(%s)", tn_shape_format(s, n, tmp, sizeof tmp));
    return buf;
}

static bool same_sizes(const int64_t *a, int na, const int64_t *b, int nb)
{
    return na == nb && !memcmp(a, b, sizeof(int64_t) * (size_t)na);
}

/* True when sizes (a) broadcast to (b). */
static bool expandable(const int64_t *a, int na, const int64_t *b, int nb)
{
    if (na > nb)
        return false;
    for (int i = 0; i < na; i++) {
        int64_t x = a[na - 1 - i], y = b[nb - 1 - i];
        if (x != y && x != 1)
            return false;
    }
    return true;
}

/* PyTorch's validate_outputs: a gradient takes the shape (summing
 * broadcast dims) and dtype of what it is the gradient of. Consumes g. */
static struct tn_tensor *conform(struct tn_tensor *g, const struct tn_input_meta *m,
                                 const char *node, int index)
{
    if (!same_sizes(g->sizes, g->ndim, m->sizes, m->ndim)) {
        if (!expandable(m->sizes, m->ndim, g->sizes, g->ndim)) {
            char a[256], b[256];
            tn_set_error(TN_ESHAPE, "Function %s returned an invalid gradient at index %d - got "
                         "%s but expected shape compatible with %s", node, index,
                         tn_shape_format(g->sizes, g->ndim, a, sizeof a),
                         tn_shape_format(m->sizes, m->ndim, b, sizeof b));
            tn_release(g);
            return NULL;
        }
        struct tn_tensor *s = tn__sum_to(g, m->sizes, m->ndim);
        tn_release(g);
        if (!(g = s))
            return NULL;
    }
    if (g->dtype != m->dtype) {
        struct tn_tensor *c = tn_to_dtype(g, m->dtype);
        tn_release(g);
        g = c;
    }
    return g;
}

/* Adds g (consumed) into input nr of n's buffer. */
static int buffer_add(struct tn_node *n, uint32_t nr, struct tn_tensor *g)
{
    struct tn_tensor **slot = &n->buf[nr];
    if (!*slot) {
        *slot = g;
        return TN_OK;
    }
    struct tn_tensor *sum = tn_add(*slot, g, tn_int(1));
    tn_release(g);
    if (!sum)
        return tn_last_status();
    tn_release(*slot);
    *slot = sum;
    return TN_OK;
}

/* Finds every node from the roots (depth first, without recursion), counts
 * dependencies and allocates the input buffers. */
static int discover(struct task *tk, struct tn_node *const *roots, int nroots)
{
    struct vec stack = {0};
    int rc = TN_OK;
    for (int r = 0; r < nroots && rc == TN_OK; r++) {
        struct tn_node *root = roots[r];
        if (!root || root->epoch == tk->epoch)
            continue;
        root->epoch = tk->epoch;
        root->deps = 0;
        root->needed = false;
        root->buf = NULL;
        rc = vec_push(&stack, root);
        /* the top node goes to the list once it has no unvisited child */
        while (rc == TN_OK && stack.n) {
            struct tn_node *n = stack.v[stack.n - 1];
            bool pushed = false;
            for (int i = 0; i < n->nnext; i++) {
                struct tn_node *c = n->next[i].fn;
                if (c && c->epoch != tk->epoch) {
                    c->epoch = tk->epoch;
                    c->deps = 0;
                    c->needed = false;
                    c->buf = NULL;
                    if ((rc = vec_push(&stack, c)) < 0)
                        break;
                    pushed = true;
                    break;
                }
            }
            if (!pushed && rc == TN_OK) {
                stack.n--;
                rc = vec_push(&tk->nodes, n);
            }
        }
    }
    free(stack.v);
    if (rc < 0)
        return rc;
    for (size_t k = 0; k < tk->nodes.n; k++) {
        struct tn_node *n = tk->nodes.v[k];
        for (int i = 0; i < n->nnext; i++)
            if (n->next[i].fn)
                n->next[i].fn->deps++;
        n->buf = calloc((size_t)n->nout, sizeof *n->buf);
        if (!n->buf)
            return tn_set_error(TN_ENOMEM, "out of memory running backward");
    }
    /* what runs: everything for backward; for grad, what leads to a capture
     * (post-order: a node's inputs are decided before it) */
    for (size_t k = 0; k < tk->nodes.n; k++) {
        struct tn_node *n = tk->nodes.v[k];
        n->needed = tk->accumulate;
        for (int c = 0; c < tk->ncaps && !n->needed; c++)
            n->needed = tk->caps[c].fn == n;
        for (int i = 0; i < n->nnext && !n->needed; i++)
            n->needed = n->next[i].fn && n->next[i].fn->needed;
    }
    return TN_OK;
}

/* Runs node n with its buffered gradients. */
static int run_node(struct task *tk, struct tn_node *n, struct vec *ready)
{
    int rc = TN_OK;
    struct tn_tensor **out = NULL;
    for (int i = 0; i < n->nout && rc == TN_OK; i++) {
        if (!n->buf[i]) {
            const struct tn_input_meta *m = &n->meta[i];
            n->buf[i] = tn_zeros(m->sizes, m->ndim, m->dtype);
            if (!n->buf[i])
                rc = tn_last_status();
        }
        if (rc == TN_OK)
            rc = tn__ad_run_pre_hooks(n, i, &n->buf[i]);
    }
    for (int c = 0; c < tk->ncaps && rc == TN_OK; c++)
        if (tk->caps[c].fn == n && !tk->caps[c].grad)
            tk->caps[c].grad = tn_retain(n->buf[tk->caps[c].nr]);
    bool is_acc = tn__ad_is_accumulate(n);
    if (rc == TN_OK && is_acc && tk->accumulate)
        rc = tn__ad_accumulate(n, n->buf[0], tk->create_graph);
    if (rc == TN_OK && !is_acc && n->nnext) {
        out = calloc((size_t)n->nnext, sizeof *out);
        if (!out)
            rc = tn_set_error(TN_ENOMEM, "out of memory running backward");
        if (rc == TN_OK)
            rc = n->apply(n, n->buf, out);
    }
    if (rc == TN_OK && !tk->keep_graph && n->release_saved && !n->released) {
        n->release_saved(n);
        n->released = true;
    }
    for (int i = 0; i < n->nout; i++) {
        tn_release(n->buf[i]);
        n->buf[i] = NULL;
    }
    for (int j = 0; j < n->nnext; j++) {
        struct tn_node *c = n->next[j].fn;
        struct tn_tensor *g = out ? out[j] : NULL;
        if (!c) {
            tn_release(g);
            continue;
        }
        if (g && rc == TN_OK && c->needed) {
            g = conform(g, &c->meta[n->next[j].input_nr], n->h.name, j);
            rc = g ? buffer_add(c, n->next[j].input_nr, g) : tn_last_status();
        } else {
            tn_release(g);
        }
        if (--c->deps == 0 && rc == TN_OK && c->needed)
            rc = vec_push(ready, c) < 0 ? tn_last_status() : rc;
    }
    free(out);
    return rc;
}

static void task_end(struct task *tk)
{
    for (size_t k = 0; k < tk->nodes.n; k++) {
        struct tn_node *n = tk->nodes.v[k];
        if (n->buf)
            for (int i = 0; i < n->nout; i++)
                tn_release(n->buf[i]);
        free(n->buf);
        n->buf = NULL;
        n->epoch = 0;
    }
    free(tk->nodes.v);
}

/* The engine proper: roots[i] receives grads[i] (both borrowed). */
static int execute(struct task *tk, struct tn_edge *roots, struct tn_tensor **grads, int nroots)
{
    tk->epoch = __atomic_add_fetch(&engine_epoch, 1, __ATOMIC_RELAXED);
    struct tn_node **rn = malloc(sizeof *rn * (size_t)(nroots ? nroots : 1));
    if (!rn)
        return tn_set_error(TN_ENOMEM, "out of memory running backward");
    for (int i = 0; i < nroots; i++)
        rn[i] = roots[i].fn;
    int rc = discover(tk, rn, nroots);
    free(rn);
    struct vec ready = {0};
    bool prev = tn_set_grad_enabled(tk->create_graph);
    for (int i = 0; i < nroots && rc == TN_OK; i++) {
        struct tn_node *n = roots[i].fn;
        struct tn_tensor *g = tn_retain(grads[i]);
        g = conform(g, &n->meta[roots[i].input_nr], "backward", i);
        rc = g ? buffer_add(n, roots[i].input_nr, g) : tn_last_status();
    }
    for (int i = 0; i < nroots && rc == TN_OK; i++) {
        struct tn_node *n = roots[i].fn;
        bool queued = false;
        for (size_t k = 0; k < ready.n; k++)
            queued |= ready.v[k] == n;
        if (n->deps == 0 && n->needed && !queued)
            rc = vec_push(&ready, n);
    }
    while (rc == TN_OK && ready.n) {
        /* the newest node first, as PyTorch's queue orders by sequence */
        size_t best = 0;
        for (size_t k = 1; k < ready.n; k++)
            if (ready.v[k]->seq > ready.v[best]->seq)
                best = k;
        struct tn_node *n = ready.v[best];
        ready.v[best] = ready.v[--ready.n];
        rc = run_node(tk, n, &ready);
    }
    tn_set_grad_enabled(prev);
    free(ready.v);
    task_end(tk);
    return rc;
}

/* The root edge of tensor t, and its gradient (given or ones). */
static int root_of(struct tn_tensor *t, struct tn_tensor *given, int i, struct tn_edge *edge,
                   struct tn_tensor **grad)
{
    if (!t->requires_grad)
        return tn_set_error(TN_ERUNTIME, "element %d of tensors does not require grad and does "
                            "not have a grad_fn", i);
    if (given) {
        if (!same_sizes(given->sizes, given->ndim, t->sizes, t->ndim)) {
            char a[280], b[280];
            return tn_set_error(TN_ESHAPE, "Mismatch in shape: grad_output[%d] has a shape of %s "
                                "and output[%d] has a shape of %s.", i,
                                size_text(given->sizes, given->ndim, a, sizeof a), i,
                                size_text(t->sizes, t->ndim, b, sizeof b));
        }
        *grad = tn_retain(given);
    } else {
        if (tn_numel(t) != 1)
            return tn_set_error(TN_ERUNTIME, "grad can be implicitly created only for scalar "
                                "outputs");
        *grad = tn_ones_like(t, TN_DTYPE_UNSET);
        if (!*grad)
            return tn_last_status();
    }
    if (t->grad_fn) {
        edge->fn = tn__node_retain(t->grad_fn);
        edge->input_nr = t->output_nr;
    } else {
        edge->fn = tn__ad_grad_accumulator(t);
        edge->input_nr = 0;
        if (!edge->fn) {
            tn_release(*grad);
            return tn_last_status();
        }
    }
    return TN_OK;
}

static int run(struct tn_tensor *const *tensors, int n, struct tn_tensor *const *grads,
               struct task *tk)
{
    struct tn_edge *roots = calloc((size_t)(n ? n : 1), sizeof *roots);
    struct tn_tensor **rg = calloc((size_t)(n ? n : 1), sizeof *rg);
    int rc = roots && rg ? TN_OK : tn_set_error(TN_ENOMEM, "out of memory running backward");
    for (int i = 0; i < n && rc == TN_OK; i++)
        rc = root_of(tensors[i], grads ? grads[i] : NULL, i, &roots[i], &rg[i]);
    if (rc == TN_OK)
        rc = execute(tk, roots, rg, n);
    for (int i = 0; roots && rg && i < n; i++) {
        tn__node_release(roots[i].fn);
        tn_release(rg[i]);
    }
    free(roots);
    free(rg);
    return rc;
}

int tn_backward(struct tn_tensor *const *tensors, int n, struct tn_tensor *const *grads,
                bool retain_graph, bool create_graph)
{
    struct task tk = {0};
    tk.keep_graph = retain_graph || create_graph;
    tk.create_graph = create_graph;
    tk.accumulate = true;
    return run(tensors, n, grads, &tk);
}

int tn_grad(struct tn_tensor *const *outputs, int noutputs, struct tn_tensor *const *grad_outputs,
            struct tn_tensor *const *inputs, int ninputs, bool retain_graph, bool create_graph,
            bool allow_unused, struct tn_tensor **result)
{
    struct task tk = {0};
    tk.keep_graph = retain_graph || create_graph;
    tk.create_graph = create_graph;
    tk.caps = calloc((size_t)(ninputs ? ninputs : 1), sizeof *tk.caps);
    if (!tk.caps)
        return tn_set_error(TN_ENOMEM, "out of memory running backward");
    tk.ncaps = ninputs;
    int rc = TN_OK;
    for (int i = 0; i < ninputs && rc == TN_OK; i++) {
        const struct tn_tensor *t = inputs[i];
        result[i] = NULL;
        if (!t->requires_grad) {
            rc = tn_set_error(TN_ERUNTIME, "One of the differentiated Tensors does not require "
                              "grad");
        } else if (t->grad_fn) {
            tk.caps[i].fn = tn__node_retain(t->grad_fn);
            tk.caps[i].nr = t->output_nr;
        } else {
            tk.caps[i].fn = tn__ad_grad_accumulator(t);
            rc = tk.caps[i].fn ? TN_OK : tn_last_status();
        }
    }
    if (rc == TN_OK)
        rc = run(outputs, noutputs, grad_outputs, &tk);
    for (int i = 0; i < ninputs; i++) {
        if (rc == TN_OK && !tk.caps[i].grad && !allow_unused)
            rc = tn_set_error(TN_ERUNTIME, "One of the differentiated Tensors appears to not have "
                              "been used in the graph. Set allow_unused=True if this is the "
                              "desired behavior.");
        result[i] = tk.caps[i].grad;
    }
    for (int i = 0; i < ninputs; i++) {
        if (rc < 0) {
            tn_release(result[i]);
            result[i] = NULL;
        }
        tn__node_release(tk.caps[i].fn);
    }
    free(tk.caps);
    return rc;
}
