/*
 * autograd/internal.h: the node, the saved tensors, and what the generated
 * Autograd kernels (tgen from schemas/derivatives.yaml) call. Never
 * installed.
 */
#ifndef TN_AUTOGRAD_INTERNAL_H
#define TN_AUTOGRAD_INTERNAL_H

#include <tensor/autograd.h>
#include <tensor/dispatch.h>
#include <tensor/ops.h>

#include "core/internal.h"

/* Where a gradient goes: input `input_nr` of node `fn` (NULL: nowhere, the
 * forward input did not require grad). */
struct tn_edge {
    struct tn_node *fn;
    uint32_t input_nr;
};

/* What a gradient flowing into a node must look like: the forward output's
 * dtype and shape (PyTorch's InputMetadata). */
struct tn_input_meta {
    enum tn_dtype dtype;
    struct tn_device device;
    int ndim;
    int64_t sizes[TN_MAX_DIMS];
};

struct tn_hook; /* a registered tensor hook (node.c) */

/*
 * apply: grads[i] is the gradient of forward output i (never NULL: the
 * engine makes zeros for outputs no path reached), borrowed; out[j]
 * receives a new reference for next edge j, or stays NULL. Returns 0 or a
 * negative tn_status.
 */
typedef int (*tn_node_apply_fn)(struct tn_node *n, struct tn_tensor *const *grads,
                                struct tn_tensor **out);

struct tn__ad_slot;

struct tn_node {
    struct tn_node_header h;
    tn_node_apply_fn apply;
    void (*release_saved)(struct tn_node *n); /* drops saved values; NULL when none */
    /* for release_saved == tn__release_saved_at: the node's struct tn_saved
     * members, as tgen's slot table lists them (NULL: none) */
    const struct tn__ad_slot *saved;
    /* for apply == tn__ad_apply_kind: the node's kind (NULL otherwise) */
    const struct tn__ad_kind *kind;
    int nnext;
    struct tn_edge *next;                     /* nnext edges (inputs of the forward op) */
    int nout;
    struct tn_input_meta *meta;               /* nout forward outputs */
    struct tn_hook *pre_hooks;                /* tensor hooks of the outputs */
    struct tn_tensor *leaf;                   /* AccumulateGrad: the leaf (owned) */
    bool released;                            /* saved values freed by backward */
    uint64_t seq;                             /* creation order */
    /* engine scratch, valid while one backward runs */
    uint64_t epoch;
    int deps;
    bool needed;
    struct tn_tensor **buf;
};

/* A tensor saved for backward with the version of its storage then. */
struct tn_saved {
    struct tn_tensor *t;  /* owned; for an output, a detached alias */
    uint64_t version;
    bool is_output;
    uint32_t output_nr;
};

/* A new node of `size` bytes (at least sizeof(struct tn_node)) with nnext
 * edges and nout outputs, refcount 1, zeroed past the header. NULL with
 * TN_ENOMEM. */
struct tn_node *tn__node_new(size_t size, const char *name, tn_node_apply_fn apply,
                             void (*release_saved)(struct tn_node *), int nnext, int nout);
struct tn_node *tn__node_retain(struct tn_node *n);
void tn__node_release(struct tn_node *n);

/* True when grad mode is on, autograd is not excluded in this thread, and
 * one of the tensors (NULL entries skipped) requires grad. */
bool tn__ad_needed(const struct tn_tensor *const *ts, int n);
/* Points edge i of n at where t's gradient goes (its grad_fn, or its
 * AccumulateGrad for a leaf that requires grad; nowhere otherwise). 0 or
 * TN_ENOMEM. */
int tn__ad_set_edge(struct tn_node *n, int i, const struct tn_tensor *t);
/* tn__node_new with edges 0..nnext-1 from ins[0..nnext) (a generated
 * kernel's tensor inputs in schema order; NULL ones lead nowhere): the node,
 * or NULL with the error (the partial node released). */
struct tn_node *tn__ad_node_new(size_t size, const char *name, tn_node_apply_fn apply,
                                void (*release_saved)(struct tn_node *),
                                const struct tn_tensor *const *ins, int nnext, int nout);
/* The node of a functional kernel whose op ran (rc): NULL where rc < 0 or
 * no input requires grad (rc kept), or where making it failed (*rc the
 * error); else tn__ad_node_new's node, its saved slots set where saved
 * is not NULL (release_saved tn__release_saved_at). */
void *tn__ad_node_begin(int *rc, const struct tn_tensor *const *ins, int nnext, size_t size,
                        const char *name, tn_node_apply_fn apply,
                        void (*release_saved)(struct tn_node *), int nout,
                        const struct tn__ad_slot *saved);
/* A kind of node of tgen's, one per derivatives.yaml entry: its grad_fn
 * name, its formulas, its saved tensors' slots (NULL: none), the result
 * whose gradient the formulas call grad (g0), and how many values its
 * saved tensors unpack into (nv: the Tensor arguments, then the results).
 * Its nodes' apply is tn__ad_apply_kind, which unpacks the saved tensors
 * into v[0..nv) (tn__ad_unpack_all; the formulas do not run when that
 * fails), runs the formulas (0 or the first failure's status; each wanted
 * edge's gradient left in out[]) with grads[g0] as grad, releases v and
 * returns the status. */
#define TN__AD_MAX_V 40
struct tn__ad_kind {
    const char *name;
    int (*formulas)(struct tn_node *n, const struct tn_tensor *grad,
                    struct tn_tensor *const *grads, struct tn_tensor *const *v,
                    struct tn_tensor **out);
    const struct tn__ad_slot *slots;
    int g0, nv;
};
int tn__ad_apply_kind(struct tn_node *n, struct tn_tensor *const *grads, struct tn_tensor **out);
/* tn__ad_node_begin(rc, ins, nnext, size, k->name, tn__ad_apply_kind,
 * release_saved, nout, saved), the node's kind set to k. */
void *tn__ad_kind_begin(int *rc, const struct tn_tensor *const *ins, int nnext, size_t size,
                        const struct tn__ad_kind *k, void (*release_saved)(struct tn_node *),
                        int nout, const struct tn__ad_slot *saved);
/* The rest of a functional kernel of one result whose node keeps no value
 * but its saved tensors (tgen's kernels of that kind end with it): the op
 * ran (rc, result r[0]); tn__ad_kind_begin(&rc, ins, nnext, size, k,
 * tn__release_saved_at, 1, k->slots), with a node and slots
 * tn__ad_save_all(node, k->slots, nnext, ins, r, {true}), then
 * tn__ad_finish(node, r, {true}, 1, rc). Returns r[0]: the result, or NULL
 * with the error (the result released). */
struct tn_tensor *tn__ad_record1(int rc, const struct tn_tensor *const *ins, int nnext,
                                 struct tn_tensor **r, size_t size, const struct tn__ad_kind *k);
/* The end of a kernel of one result whose node n (NULL when none: no
 * input needed grad, or rc < 0) is of a kind: with n and rc >= 0 (the
 * op ran and the kernel kept its arguments in n), tn__ad_save_all(n,
 * kind's slots, nnext, ins, r, {true}) when the kind has slots; then
 * tn__ad_finish(n, r, {true}, 1, rc). Returns r[0], or NULL with the
 * error (the result released). tn__ad_record1 ends with it. */
struct tn_tensor *tn__ad_record1_end(struct tn_node *n, int rc, const struct tn_tensor *const *ins,
                                     int nnext, struct tn_tensor **r);
/* Copies an int list argument (len entries of src, NULL when len is 0)
 * into a node: 0, or TN_EINVAL naming `what` past TN_MAX_DIMS. */
int tn__ad_store_dims(int64_t *dst, int *dst_len, const int64_t *src, int len, const char *what);
/* Keeps t's sizes (a formula's self.sizes()) in a node. */
void tn__ad_save_sizes(int64_t *sizes, int *ndim, const struct tn_tensor *t);
/* Autograd kernels of ops without a derivatives.yaml entry: a result that
 * is floating or complex and has no history yet takes a node of nnext
 * edges whose backward fails as PyTorch's does (NotImplemented,
 * "derivative for aten::op is not implemented"; for an op PyTorch
 * differentiates, node.c's noderiv_pytorch_has, named `node` and "the
 * derivative for 'op' is not implemented."), where `need` (tn__ad_needed).
 * A functional kernel begins with tn__ad_noderiv_begin, which returns the
 * call's state (its inputs and names as given, need, then
 * tn__ad_below_begin's prev), runs its op below Autograd, and ends with
 * tn__ad_noderiv_result, which ends the call below (tn__ad_below_end(prev)),
 * takes r and returns it, or NULL with the error (r released); the inputs
 * must live until then (the kernel's own array). tn__ad_noderiv_tuple does the same for the
 * nr results r[] (all released on failure) and returns 0 or the error;
 * tn__ad_noderiv_inplace gives the node to c (self's clone, which ran the
 * op) and ends as tn__ad_commit_inplace(self, c). */
struct tn__ad_noderiv_call {
    const struct tn_tensor *const *ins;
    int nnext;
    const char *node, *op;
    bool need;
    tn_keyset prev;
};
struct tn__ad_noderiv_call tn__ad_noderiv_begin(const struct tn_tensor *const *ins, int nnext,
                                                const char *node, const char *op);
struct tn_tensor *tn__ad_noderiv_result(const struct tn__ad_noderiv_call *c, struct tn_tensor *r);
int tn__ad_noderiv_tuple(struct tn_tensor **r, int nr, const struct tn_tensor *const *ins,
                         int nnext, const char *node, const char *op);
int tn__ad_noderiv_inplace(struct tn_tensor *self, struct tn_tensor *c,
                           const struct tn_tensor *const *ins, int nnext, const char *node,
                           const char *op);
/* The end of a kernel's call below Autograd (tn__ad_below_end(prev)) that
 * returned r: 0, or the op's error where r is NULL. */
int tn__ad_below_done(tn_keyset prev, const struct tn_tensor *r);
/* tn__ad_below_end(prev), then rc: a kernel's `return
 * tn__ad_below_rc(prev_, redispatch(...))` ends its call below Autograd. */
void tn__ad_below_end(tn_keyset prev_excluded);
static inline int tn__ad_below_rc(tn_keyset prev, int rc)
{
    tn__ad_below_end(prev);
    return rc;
}
/* Keeps t, a formula's one call's result, in *out: 0, or the call's error
 * where t is NULL. */
static inline int tn__ad_put(struct tn_tensor **out, struct tn_tensor *t)
{
    if (!t)
        return tn_last_status();
    *out = t;
    return TN_OK;
}
/* True when edge i leads somewhere (its gradient is wanted). */
static inline bool tn__ad_edge(const struct tn_node *n, int i)
{
    return n->next[i].fn != NULL;
}
/* True when t's dtype can carry a gradient (floating or complex). */
static inline bool tn__ad_differentiable(const struct tn_tensor *t)
{
    return tn_dtype_is_floating(t->dtype) || tn_dtype_is_complex(t->dtype);
}
/* Makes t output `nr` of n: grad_fn, output_nr, requires_grad, and n's
 * metadata for that output; an integer or bool t is left as it is. */
void tn__ad_set_history(struct tn_tensor *t, struct tn_node *n, uint32_t nr);

/* Saves t (NULL is fine) in s; an output of `n` is kept as a detached alias
 * so that the node and its output do not own each other. */
int tn__save(struct tn_saved *s, const struct tn_tensor *t, bool is_output, uint32_t output_nr);
/* The saved tensor (new reference), with its grad_fn restored for an
 * output. NULL with PyTorch's error after backward freed it or after an
 * in-place op changed it. */
struct tn_tensor *tn__unpack(const struct tn_saved *s, struct tn_node *n);

/* What every generated Autograd kernel and apply function shares
 * (tgen's autograd_gen.c):
 * - tn__ad_unpack_into: *v = tn__unpack(s, n); 0, or the status when
 *   something was saved and cannot be unpacked (freed, or changed).
 * - tn__ad_take: the end of one formula of an apply. When ok, *out takes
 *   t[k], the formula's value; the other temporaries t[0..nt) are released.
 *   0, or the status of the failed step.
 * - tn__ad_finish: the end of a functional kernel that ran its op (rc) and
 *   may have built node n (NULL when none was needed). With rc >= 0, each
 *   result r[k] with diff[k] takes n as its history; the kernel's reference
 *   to n is dropped; with rc < 0 the results r[0..nr) are released and set
 *   NULL. Returns rc. */
int tn__ad_unpack_into(struct tn_tensor **v, const struct tn_saved *s, struct tn_node *n);
/* A node's saved tensors as tgen lists them (one row each, ended by at 0):
 * the struct tn_saved at byte offset `at` of the node holds Tensor argument
 * `v` (its index among the Tensor arguments, the kernel's ins_[v]) or, for
 * v >= the op's number of Tensor arguments nt, result v - nt; it is saved
 * and unpacked only when one of the edges in the bit mask `edges` leads
 * somewhere (the formulas reading it are wanted).
 * - tn__ad_save_all: the kernel's saves, in row order: an argument as
 *   tn__save(.., ins[v], false, 0), result k as tn__save(.., r[k], diff[k],
 *   k). 0, or the first failure's status.
 * - tn__ad_unpack_all: apply's unpacks into v[row's v], in row order, as
 *   tn__ad_unpack_into; 0 or the first failure's status (the tensors
 *   unpacked so far stay in v, for tn__ad_release_all).
 * - tn__ad_release_all: releases v[0..n). */
struct tn__ad_slot {
    uint16_t at;
    uint8_t v;
    uint32_t edges;
};
/* The node of a kind that keeps nothing but saved tensors (mul, exp, ...:
 * tgen writes no struct for it): its slot i is saved[i], at offset
 * TN__AD_SAVED(i), and TN__AD_SAVED(n) is the size of a node of n. */
struct tn__ad_saved_node {
    struct tn_node node_;
    struct tn_saved saved[];
};
#define TN__AD_SAVED(i) \
    (offsetof(struct tn__ad_saved_node, saved) + (size_t)(i) * sizeof(struct tn_saved))
int tn__ad_save_all(struct tn_node *n, const struct tn__ad_slot *sl, int nt,
                    const struct tn_tensor *const *ins, struct tn_tensor *const *r,
                    const bool *diff);
int tn__ad_unpack_all(struct tn_node *n, const struct tn__ad_slot *sl, struct tn_tensor **v);
void tn__ad_release_all(struct tn_tensor **v, int n);
/* An in-place Autograd kernel runs its op out of place on a clone of self:
 * tn__ad_inplace_clone checks that self may be changed in place
 * (tn__ad_check_inplace) and clones it (NULL with the error);
 * tn__ad_inplace_end releases the clone c, and with the op's result o (NULL
 * when it failed: its status is returned) names o's node `node` when
 * given, and commits o into self (tn__ad_commit_inplace). */
struct tn_tensor *tn__ad_inplace_clone(struct tn_tensor *self);
/* An in-place kernel's first step: true, with *prev from tn__ad_below_begin,
 * when no input of ins[0..n) needs grad (tn__ad_needed), so the op runs below
 * Autograd; false, *prev untouched, when the node is needed. */
bool tn__ad_below_unless_needed(const struct tn_tensor *const *ins, int n, tn_keyset *prev);
int tn__ad_inplace_end(struct tn_tensor *self, struct tn_tensor *c, struct tn_tensor *o,
                       const char *node);
/* A release_saved for a node whose saved values are the struct tn_saved
 * members n->saved lists. */
void tn__release_saved_at(struct tn_node *n);
int tn__ad_take(struct tn_tensor **out, struct tn_tensor **t, int nt, int k, bool ok);
int tn__ad_finish(struct tn_node *n, struct tn_tensor **r, const bool *diff, int nr, int rc);
void tn__saved_release(struct tn_saved *s);

/* Runs fn's forward call below the Autograd key: excludes Autograd in this
 * thread until tn__ad_below_end (nested calls of kernels do not record). */
tn_keyset tn__ad_below_begin(void);
void tn__ad_below_end(tn_keyset prev_excluded);

/* The generic in-place path: `out` (a new tensor computed by the
 * functional op from a clone of self) is copied into self, and self takes
 * out's history. Checks the leaf rules first via tn__ad_check_inplace.
 * Releases out. 0 or an error. */
int tn__ad_check_inplace(const struct tn_tensor *self);
int tn__ad_commit_inplace(struct tn_tensor *self, struct tn_tensor *out);

/* The core's hooks (views.c, node.c). */
int tn__ad_on_view(const struct tn_tensor *in, struct tn_tensor *view, const char *grad_fn);
int tn__ad_after_inplace(struct tn_tensor *dst, const struct tn_tensor *src);
/* view (of a base) was written in place with `value` (NULL for fill_):
 * the base takes a CopySlices node, the view a view of it. */
int tn__ad_copy_slices(struct tn_tensor *view, const struct tn_tensor *value);
void tn__ad_free_meta(struct tn_tensor *t);

/* Hooks the engine runs (node.c). */
int tn__ad_run_pre_hooks(struct tn_node *n, int i, struct tn_tensor **grad);
int tn__ad_accumulate(struct tn_node *acc, struct tn_tensor *grad, bool create_graph);
bool tn__ad_is_accumulate(const struct tn_node *n);
/* The AccumulateGrad node of a leaf (new reference; made on first use). */
struct tn_node *tn__ad_grad_accumulator(const struct tn_tensor *leaf);

/* grad summed down to (sizes, ndim), as at::sum_to (new reference). */
struct tn_tensor *tn__sum_to(const struct tn_tensor *grad, const int64_t *sizes, int ndim);

/* `var = expr` steps of the helpers below: each releases var's old value
 * and jumps to `fail` on NULL */
#define STEP(var, expr)                                                        \
    do {                                                                       \
        struct tn_tensor *step_ = (expr);                                      \
        tn_release(var);                                                       \
        (var) = step_;                                                         \
        if (!(var))                                                            \
            goto fail;                                                         \
    } while (0)

/* ----- backward helpers the formulas call (lib/autograd/formulas.c) */
struct tn_tensor *tn__sum_backward(const struct tn_tensor *grad, const int64_t *sizes, int ndim,
                                   const int64_t *dim, int dim_len, bool keepdim);
struct tn_tensor *tn__mean_backward(const struct tn_tensor *grad, const int64_t *sizes, int ndim,
                                    const int64_t *dim, int dim_len, bool keepdim);
struct tn_tensor *tn__mean_all_bw(const struct tn_tensor *grad, const int64_t *sizes, int ndim);
struct tn_tensor *tn__amax_backward(const struct tn_tensor *grad, const struct tn_tensor *self,
                                    const struct tn_tensor *result, const int64_t *dim,
                                    int dim_len, bool keepdim);
/* aminmax: _amax_backward of the min's gradient plus that of the max's,
 * over dim (NULL: every dim) */
struct tn_tensor *tn__aminmax_bw(const struct tn_tensor *grad_min, const struct tn_tensor *grad_max,
                                 const struct tn_tensor *self, const struct tn_tensor *min,
                                 const struct tn_tensor *max, const int64_t *dim, bool keepdim);
struct tn_tensor *tn__evenly_distribute_bw(const struct tn_tensor *grad,
                                           const struct tn_tensor *self,
                                           const struct tn_tensor *result);
struct tn_tensor *tn__var_backward(const struct tn_tensor *grad, const struct tn_tensor *self,
                                   const int64_t *dim, int dim_len,
                                   const struct tn_scalar *correction, bool keepdim);
struct tn_tensor *tn__std_backward(const struct tn_tensor *result, const struct tn_tensor *grad,
                                   const struct tn_tensor *self, const int64_t *dim,
                                   int dim_len, const struct tn_scalar *correction, bool keepdim);
struct tn_tensor *tn__zeros(const struct tn_tensor *like);
struct tn_tensor *tn__softmax_double_bw(const struct tn_tensor *grad,
                                        const struct tn_tensor *grad_output,
                                        const struct tn_tensor *output, int64_t dim);
struct tn_tensor *tn__log_softmax_grad_output_bw(const struct tn_tensor *grad,
                                                 const struct tn_tensor *output, int64_t dim);
struct tn_tensor *tn__log_softmax_double_bw(const struct tn_tensor *grad,
                                            const struct tn_tensor *grad_output,
                                            const struct tn_tensor *output, int64_t dim);
struct tn_tensor *tn__scale(const struct tn_tensor *t, struct tn_scalar s);
struct tn_tensor *tn__gelu_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                              const char *approximate);
struct tn_tensor *tn__silu_bw(const struct tn_tensor *grad, const struct tn_tensor *self);
struct tn_tensor *tn__angle_bw(const struct tn_tensor *grad, const struct tn_tensor *self);
struct tn_tensor *tn__mish_bw(const struct tn_tensor *grad, const struct tn_tensor *self);
struct tn_tensor *tn__leaky_relu_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                    struct tn_scalar slope);
struct tn_tensor *tn__hardtanh_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                  struct tn_scalar lo, struct tn_scalar hi);
struct tn_tensor *tn__elu_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                             struct tn_scalar alpha, struct tn_scalar scale,
                             struct tn_scalar input_scale);
struct tn_tensor *tn__softplus_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                  struct tn_scalar beta, struct tn_scalar threshold);
struct tn_tensor *tn__minmax_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                const struct tn_tensor *other, int which, int sign);
struct tn_tensor *tn__logit_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                               const double *eps);
struct tn_tensor *tn__clamp_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                               const struct tn_scalar *min, const struct tn_scalar *max);
struct tn_tensor *tn__div_mode_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                  const struct tn_tensor *other, const char *mode, int which);
struct tn_tensor *tn__cumsum_bw(const struct tn_tensor *grad, int64_t dim);
struct tn_tensor *tn__logcumsumexp_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                      const struct tn_tensor *result, int64_t dim);
/* the FFTs' backward helpers (_fft_r2c_bw, ...) live with them */
#include "ops/fft_internal.h"
/* and _linalg_svd's with the SVD ops */
#include "ops/svd_internal.h"
/* and the triangular solves' and the LU family's with them */
#include "ops/lu_internal.h"
/* and the Cholesky family's */
#include "ops/cholesky_internal.h"
struct tn_tensor *tn__polygamma_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                  int64_t n);
struct tn_tensor *tn__pow_self_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                  const struct tn_tensor *exponent);
struct tn_tensor *tn__pow_scalar_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                    struct tn_scalar exponent);
struct tn_tensor *tn__pow_exp_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                 const struct tn_tensor *exponent,
                                 const struct tn_tensor *result);

/* ----- the selecting, moving and multiplying ops (formulas_select.c) */
struct tn_tensor *tn__value_selecting_bw(const struct tn_tensor *grad, int64_t dim,
                                         const struct tn_tensor *indices, const int64_t *sizes,
                                         int ndim, bool keepdim);
struct tn_tensor *tn__index_select_bw(const struct tn_tensor *grad, const int64_t *sizes,
                                      int ndim, int64_t dim, const struct tn_tensor *index);
struct tn_tensor *tn__masked_select_bw(const struct tn_tensor *grad, const int64_t *sizes,
                                       int ndim, const struct tn_tensor *mask);
struct tn_tensor *tn__roll_bw(const struct tn_tensor *grad, const int64_t *shifts, int nshifts,
                              const int64_t *dims, int ndims);
struct tn_tensor *tn__repeat_bw(const struct tn_tensor *grad, const int64_t *repeats, int nrep,
                                const int64_t *sizes, int ndim);
struct tn_tensor *tn__prod_bw(const struct tn_tensor *grad, const struct tn_tensor *input,
                              const struct tn_tensor *result);
struct tn_tensor *tn__scatter_reduce_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                        int64_t dim, const struct tn_tensor *index,
                                        const struct tn_tensor *src, const char *reduce,
                                        bool include_self, const struct tn_tensor *result,
                                        int which);
struct tn_tensor *tn__prod_dim_bw(const struct tn_tensor *grad, const struct tn_tensor *input,
                                  const struct tn_tensor *result, int64_t dim, bool keepdim);
struct tn_tensor *tn__cumprod_bw(const struct tn_tensor *grad, const struct tn_tensor *input,
                                 int64_t dim, const struct tn_tensor *result);
struct tn_tensor *tn__native_dropout_bw(const struct tn_tensor *grad, const struct tn_tensor *mask,
                                        double p, const bool *train);

/* ----- the nn backward ops' own gradients (formulas_nn.c) */
struct tn_tensor *tn__group_norm_bw(const struct tn_tensor *g0, const struct tn_tensor *g1,
                                    const struct tn_tensor *g2, const struct tn_tensor *input,
                                    const struct tn_tensor *mean, const struct tn_tensor *rstd,
                                    const struct tn_tensor *weight, int64_t N, int64_t C,
                                    int64_t HxW, int64_t group, int which);
struct tn_tensor *tn__mse_loss_double_bw(const struct tn_tensor *grad, const int64_t *sizes,
                                         int ndim, int64_t reduction);
struct tn_tensor *tn__smooth_l1_double_bw(const struct tn_tensor *grad,
                                          const struct tn_tensor *self,
                                          const struct tn_tensor *target, int64_t reduction,
                                          double beta);
struct tn_tensor *tn__adaptive_avg_pool2d_double_bw(const struct tn_tensor *grad,
                                                    const int64_t *sizes, int ndim);
struct tn_tensor *tn__max_pool_double_bw(const struct tn_tensor *grad,
                                         const struct tn_tensor *indices);
struct tn_tensor *tn__max_pool_double_bw3(const struct tn_tensor *grad,
                                          const struct tn_tensor *indices);
struct tn_tensor *tn__embedding_double_bw(const struct tn_tensor *grad,
                                          const struct tn_tensor *indices, int64_t padding_idx);
struct tn_tensor *tn__bce_target_bw(const struct tn_tensor *grad, const struct tn_tensor *self,
                                    const struct tn_tensor *target,
                                    const struct tn_tensor *weight, int64_t reduction);
struct tn_tensor *tn__bce_double_bw(const struct tn_tensor *g, const struct tn_tensor *self,
                                    const struct tn_tensor *target,
                                    const struct tn_tensor *weight, int64_t reduction);
struct tn_tensor *tn__bce_double_bw_grad_output(const struct tn_tensor *grad,
                                                const struct tn_tensor *self,
                                                const struct tn_tensor *target,
                                                const struct tn_tensor *weight,
                                                int64_t reduction);
struct tn_tensor *tn__bce_double_bw_target(const struct tn_tensor *g,
                                           const struct tn_tensor *self,
                                           const struct tn_tensor *target,
                                           const struct tn_tensor *weight, int64_t reduction);

#endif
