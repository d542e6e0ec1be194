/*
 * optim/sched.c: learning-rate schedules as torch.optim.lr_scheduler steps
 * them.  PyTorch computes each new lr from the group's current one (the
 * "chainable" form), not from a closed formula, so its values carry the
 * rounding of every earlier step; the same recursion here gives the same
 * doubles.
 */
#include "core/internal.h"
#include "optim/internal.h"
#include <tensor/ops.h>

#include <math.h>
#include <stdlib.h>

#define TN_PI 3.141592653589793 /* math.pi */

enum sched_kind { SCHED_STEP, SCHED_COSINE, SCHED_LINEAR };

struct tn_lr_scheduler {
    enum sched_kind kind;
    struct tn_optim *o; /* borrowed */
    double base_lr;     /* the group's initial_lr */
    int64_t last_epoch;
    double last_lr;
    int64_t step_size, t_max, total_iters;
    double gamma, eta_min, start_factor, end_factor;
};

/* Python's a % b for b > 0 (never negative). */
static int64_t py_mod(int64_t a, int64_t b)
{
    int64_t r = a % b;
    return r < 0 ? r + b : r;
}

/* get_lr() of the schedule at s->last_epoch from the group's lr. */
static double next_lr(const struct tn_lr_scheduler *s, double lr)
{
    int64_t e = s->last_epoch;
    switch (s->kind) {
    case SCHED_STEP:
        return (e == 0 || e % s->step_size != 0) ? lr : lr * s->gamma;
    case SCHED_COSINE: {
        double t = (double)s->t_max;
        if (e == 0)
            return lr;
        if (py_mod(e - 1 - s->t_max, 2 * s->t_max) == 0)
            return lr + (s->base_lr - s->eta_min) * (1 - cos(TN_PI / t)) / 2;
        return (1 + cos(TN_PI * (double)e / t)) / (1 + cos(TN_PI * (double)(e - 1) / t)) *
                   (lr - s->eta_min) +
               s->eta_min;
    }
    case SCHED_LINEAR:
        if (e == 0)
            return lr * s->start_factor;
        if (e > s->total_iters)
            return lr;
        return lr * (1.0 + (s->end_factor - s->start_factor) /
                               ((double)s->total_iters * s->start_factor +
                                (double)(e - 1) * (s->end_factor - s->start_factor)));
    }
    TN_ASSERT(!"unknown schedule");
    return lr;
}

void tn_lr_step(struct tn_lr_scheduler *s)
{
    s->last_epoch++;
    double lr = next_lr(s, tn_optim_get_lr(s->o));
    tn_optim_set_lr(s->o, lr);
    s->last_lr = lr;
}

static struct tn_lr_scheduler *sched_new(struct tn_optim *o, enum sched_kind kind)
{
    struct tn_lr_scheduler *s = calloc(1, sizeof *s);
    if (!s) {
        tn_set_error(TN_ENOMEM, "out of memory creating a learning-rate schedule");
        return NULL;
    }
    s->kind = kind;
    s->o = o;
    s->base_lr = tn_optim_get_lr(o);
    s->last_epoch = -1;
    return s;
}

struct tn_lr_scheduler *tn_step_lr_new(struct tn_optim *o, int64_t step_size, double gamma)
{
    if (step_size <= 0) {
        /* PyTorch raises ZeroDivisionError at the first step for 0 */
        tn_set_error(TN_EINVAL, "StepLR: step_size must be positive, got %lld",
                     (long long)step_size);
        return NULL;
    }
    struct tn_lr_scheduler *s = sched_new(o, SCHED_STEP);
    if (s) {
        s->step_size = step_size;
        s->gamma = gamma;
        tn_lr_step(s);
    }
    return s;
}

struct tn_lr_scheduler *tn_cosine_lr_new(struct tn_optim *o, int64_t t_max, double eta_min)
{
    if (t_max <= 0) {
        tn_set_error(TN_EINVAL, "CosineAnnealingLR: T_max must be positive, got %lld",
                     (long long)t_max);
        return NULL;
    }
    struct tn_lr_scheduler *s = sched_new(o, SCHED_COSINE);
    if (s) {
        s->t_max = t_max;
        s->eta_min = eta_min;
        tn_lr_step(s);
    }
    return s;
}

struct tn_lr_scheduler *tn_linear_lr_new(struct tn_optim *o, double start_factor,
                                         double end_factor, int64_t total_iters)
{
    if (start_factor > 1.0 || start_factor <= 0) {
        tn_set_error(TN_EINVAL, "Starting multiplicative factor expected to be greater than 0 "
                     "and less or equal to 1.");
        return NULL;
    }
    if (end_factor > 1.0 || end_factor < 0) {
        tn_set_error(TN_EINVAL, "Ending multiplicative factor expected to be between 0 and 1.");
        return NULL;
    }
    struct tn_lr_scheduler *s = sched_new(o, SCHED_LINEAR);
    if (s) {
        s->start_factor = start_factor;
        s->end_factor = end_factor;
        s->total_iters = total_iters;
        tn_lr_step(s);
    }
    return s;
}

double tn_lr_last(const struct tn_lr_scheduler *s) { return s->last_lr; }
int64_t tn_lr_last_epoch(const struct tn_lr_scheduler *s) { return s->last_epoch; }
void tn_lr_free(struct tn_lr_scheduler *s) { free(s); }

/* ------------------------------------------------------------- clipping */

/* The norm of one gradient, accumulated in double. */
static double grad_norm(const struct tn_tensor *g, double norm_type)
{
    struct tn_tensor *c = tn_contiguous(g);
    if (!c)
        return NAN;
    int64_t n = tn_numel(c);
    double acc = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = c->dtype == TN_FLOAT32 ? ((const float *)tn_data(c))[i]
                                          : ((const double *)tn_data(c))[i];
        if (isinf(norm_type))
            acc = fabs(x) > acc || isnan(x) ? fabs(x) : acc;
        else
            acc += x * x;
    }
    tn_release(c);
    return acc;
}

int tn_clip_grad_norm_(struct tn_tensor *const *params, int nparams, double max_norm,
                       double norm_type, bool error_if_nonfinite, double *total_norm)
{
    if (norm_type != 2 && !isinf(norm_type))
        return tn_set_error(TN_EINVAL, "clip_grad_norm_: norm_type must be 2 or inf");
    double total = 0;
    enum tn_dtype dt = TN_FLOAT32;
    for (int i = 0; i < nparams; i++) {
        const struct tn_tensor *g = params[i]->grad;
        if (!g)
            continue;
        if (g->dtype != TN_FLOAT32 && g->dtype != TN_FLOAT64)
            return tn_set_error(TN_EDTYPE, "clip_grad_norm_: %s gradients are not supported",
                                tn_dtype_name(g->dtype));
        dt = g->dtype;
        double a = grad_norm(g, norm_type);
        if (isinf(norm_type))
            total = a > total || isnan(a) ? a : total;
        else
            total += a;
    }
    if (!isinf(norm_type))
        total = sqrt(total);
    /* PyTorch holds the norm as a tensor of the gradients' dtype */
    if (dt == TN_FLOAT32)
        total = (float)total;
    if (total_norm)
        *total_norm = total;
    if (error_if_nonfinite && !isfinite(total)) {
        char b[40];
        return tn_set_error(TN_ERUNTIME, "The total norm of order %s for gradients from "
                            "`parameters` is non-finite, so it cannot be clipped. To disable "
                            "this error and scale the gradients by the non-finite norm anyway, "
                            "set `error_if_nonfinite=False`",
                            tn__py_float(norm_type, b, sizeof b));
    }
    double coef = dt == TN_FLOAT32 ? (double)(float)(max_norm / (double)(float)(total + 1e-6))
                                   : max_norm / (total + 1e-6);
    if (coef > 1.0)
        coef = 1.0;
    for (int i = 0; i < nparams; i++) {
        struct tn_tensor *g = params[i]->grad;
        if (!g)
            continue;
        struct tn_tensor *c = tn_scalar_tensor(tn_float(coef), g->dtype);
        int rc = c ? tn_mul_(g, c) : tn_last_status();
        tn_release(c);
        if (rc)
            return rc;
    }
    return 0;
}
