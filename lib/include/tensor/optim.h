/*
 * tensor/optim.h: libtensor's optim module: SGD, Adam and AdamW with
 * PyTorch's single-tensor (foreach=False) update arithmetic, zero_grad,
 * gradient clipping by norm and the learning-rate schedules StepLR,
 * CosineAnnealingLR and LinearLR.
 *
 * An optimizer holds one parameter group: a list of leaf tensors (it takes a
 * reference to each) whose .grad the step reads.  A parameter without a
 * gradient is skipped, as PyTorch skips it.  Every float32 and float64 update
 * rounds where PyTorch's CPU kernels round (AVX2 build), so a step gives the
 * same bits as torch.optim on the same values.  Ownership and errors follow
 * tensor/core.h.
 */
#ifndef TENSOR_OPTIM_H
#define TENSOR_OPTIM_H

#include <tensor/core.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tn_optim_kind { TN_OPTIM_SGD = 0, TN_OPTIM_ADAM, TN_OPTIM_ADAMW };

/* Which PyTorch's arithmetic a step reproduces where 1.13 and 2.x differ:
 * 1.13's Adam and AdamW update exp_avg by mul_ then add_ (2.x: lerp_) and
 * take math.sqrt of the second bias correction (2.x: ** 0.5). */
enum tn_optim_compat { TN_OPTIM_TORCH2 = 0, TN_OPTIM_TORCH1 = 1 };

/* torch.optim.SGD's arguments.  tn_sgd_defaults() gives PyTorch's defaults
 * (lr 0.001 as 2.x's, everything else 0/false). */
struct tn_sgd_options {
    double lr, momentum, dampening, weight_decay;
    bool nesterov, maximize;
};

/* torch.optim.Adam's and AdamW's arguments.  tn_adam_defaults() gives
 * Adam's (lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0);
 * tn_adamw_defaults() AdamW's (weight_decay 1e-2). */
struct tn_adam_options {
    double lr, beta1, beta2, eps, weight_decay;
    bool amsgrad, maximize;
};

struct tn_sgd_options tn_sgd_defaults(void);
struct tn_adam_options tn_adam_defaults(void);
struct tn_adam_options tn_adamw_defaults(void);

struct tn_optim;

/* Constructors over `nparams` parameters.  They check the arguments as
 * PyTorch does, in its words ("Invalid learning rate: -1.0", "Nesterov
 * momentum requires a momentum and zero dampening").  NULL with an error. */
struct tn_optim *tn_sgd_new(struct tn_tensor *const *params, int nparams,
                            const struct tn_sgd_options *opts);
struct tn_optim *tn_adam_new(struct tn_tensor *const *params, int nparams,
                             const struct tn_adam_options *opts);
struct tn_optim *tn_adamw_new(struct tn_tensor *const *params, int nparams,
                              const struct tn_adam_options *opts);
void tn_optim_free(struct tn_optim *o); /* NULL is fine */

/* Selects 1.13's or 2.x's arithmetic (2.x by default). */
void tn_optim_set_compat(struct tn_optim *o, enum tn_optim_compat compat);

/* optimizer.step(): updates every parameter that has a .grad in place.
 * Returns 0 or an error (a gradient whose shape or dtype differs from its
 * parameter's, an unsupported dtype). */
int tn_optim_step(struct tn_optim *o);

/* optimizer.zero_grad(set_to_none): drops every .grad (set_to_none, 2.x's
 * default) or fills it with zeros. */
void tn_optim_zero_grad(struct tn_optim *o, bool set_to_none);

/* The parameter group's learning rate (what schedules change). */
double tn_optim_get_lr(const struct tn_optim *o);
void tn_optim_set_lr(struct tn_optim *o, double lr);

enum tn_optim_kind tn_optim_kind(const struct tn_optim *o);
int tn_optim_nparams(const struct tn_optim *o);
/* Parameter i (borrowed). */
struct tn_tensor *tn_optim_param(const struct tn_optim *o, int i);
const struct tn_sgd_options *tn_optim_sgd_options(const struct tn_optim *o);   /* NULL unless SGD */
const struct tn_adam_options *tn_optim_adam_options(const struct tn_optim *o); /* NULL for SGD */

/* Per-parameter state, as optimizer.state[p] holds it.  `step` counts the
 * steps taken (Adam/AdamW; PyTorch keeps it as a float32 tensor); each
 * tensor is borrowed and NULL until the first step that creates it
 * (momentum_buffer only with momentum, max_exp_avg_sq only with amsgrad). */
struct tn_optim_param_state {
    bool initialized;
    double step;
    struct tn_tensor *momentum_buffer; /* SGD */
    struct tn_tensor *exp_avg, *exp_avg_sq, *max_exp_avg_sq; /* Adam, AdamW */
};
/* The state of parameter i (a pointer into the optimizer: the tensors may
 * be replaced, never freed, by tn_optim_set_state). */
const struct tn_optim_param_state *tn_optim_state(const struct tn_optim *o, int i);
/* Replaces the state of parameter i (load_state_dict): the tensors are
 * copied into new ones of the parameter's dtype; shapes must match the
 * parameter's.  Any of them may be NULL.  Returns 0 or an error. */
int tn_optim_set_state(struct tn_optim *o, int i, const struct tn_optim_param_state *st);

/* torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=2): scales
 * every .grad by max_norm / (total_norm + 1e-6) when that is below 1 and
 * writes the total norm (of the gradients before clipping) to *total_norm
 * (may be NULL).  norm_type is 2 or INFINITY.  Returns 0 or an error
 * ("The total norm of order 2.0 for gradients from `parameters` is
 * non-finite, so it cannot be clipped." when error_if_nonfinite). */
int tn_clip_grad_norm_(struct tn_tensor *const *params, int nparams, double max_norm,
                       double norm_type, bool error_if_nonfinite, double *total_norm);

/* ------------------------------------------------------------ schedules */

/* A learning-rate schedule on an optimizer's group, as torch.optim.lr_scheduler
 * computes it (the recursive "chainable" form, so the lr values equal
 * PyTorch's to the bit).  Creating one takes its first step (last_epoch 0),
 * as PyTorch's constructor does; call tn_lr_step after each epoch or
 * optimizer step.  The schedule borrows the optimizer, which must outlive it. */
struct tn_lr_scheduler;

/* StepLR(step_size, gamma=0.1). */
struct tn_lr_scheduler *tn_step_lr_new(struct tn_optim *o, int64_t step_size, double gamma);
/* CosineAnnealingLR(T_max, eta_min=0). */
struct tn_lr_scheduler *tn_cosine_lr_new(struct tn_optim *o, int64_t t_max, double eta_min);
/* LinearLR(start_factor=1/3, end_factor=1.0, total_iters=5): linear warmup. */
struct tn_lr_scheduler *tn_linear_lr_new(struct tn_optim *o, double start_factor,
                                         double end_factor, int64_t total_iters);
void tn_lr_step(struct tn_lr_scheduler *s);
/* scheduler.get_last_lr()[0] and scheduler.last_epoch. */
double tn_lr_last(const struct tn_lr_scheduler *s);
int64_t tn_lr_last_epoch(const struct tn_lr_scheduler *s);
void tn_lr_free(struct tn_lr_scheduler *s); /* NULL is fine */

/* ------------------------------- state_dict (lib/optim/state_dict.c) */

struct tn_value;

/* optimizer.state_dict() as PyTorch lays it out: {"state": {0: {"step":
 * tensor(n.), "exp_avg": ..., "exp_avg_sq": ...}, ...}, "param_groups":
 * [{"lr": ..., "betas": (b1, b2), ..., "params": [0, 1, ...]}]}, for
 * tn_save; torch.optim.Adam(...).load_state_dict accepts it in 1.13 and
 * 2.x.  NULL with an error. */
struct tn_value *tn_optim_state_dict(const struct tn_optim *o);
/* optimizer.load_state_dict(sd): takes lr and the other hyperparameters of
 * the one group and every parameter's state from a value in that layout
 * (what torch.save(opt.state_dict()) wrote, loaded with tn_load).
 * Returns 0 or an error in PyTorch's words ("loaded state dict contains a
 * parameter group that doesn't match the size of optimizer's group"). */
int tn_optim_load_state_dict(struct tn_optim *o, const struct tn_value *sd);

#ifdef __cplusplus
}
#endif
#endif
