/*
 * tests/unit/test_nn.c: lib/nn and lib/optim against what real PyTorch
 * wrote in tests/fixtures/nn (tests/fixtures/nn_optim.py, once with 1.13
 * and once with 2.x): module initialisation bit for bit, optimizer steps on
 * gradients set by hand bit for bit, learning-rate schedules to the bit,
 * clip_grad_norm_ and the losses within float32 rounding.
 * $TN_NN_FIXTURES names another folder (the live Bats test regenerates the
 * files there).
 */
#include "tn_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static json_t *nn_fixture(const char *name)
{
    const char *dir = getenv("TN_NN_FIXTURES");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.json",
             dir && *dir ? dir : TN_SRCDIR "/tests/fixtures/nn", name);
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j)
        fail_msg("cannot read fixture %s: %s", path, err.text);
    return j;
}

static double num(json_t *o, const char *key, double dflt)
{
    json_t *v = json_object_get(o, key);
    return v ? json_number_value(v) : dflt;
}

static bool flag(json_t *o, const char *key)
{
    return json_is_true(json_object_get(o, key));
}

/* ------------------------------------------------------------------ init */

static struct tn_module *build(const char *kind, json_t *a)
{
#define I(k) json_integer_value(json_array_get(a, k))
    if (!strcmp(kind, "linear"))
        return (struct tn_module *)tn_nn_linear_new(I(0), I(1), json_is_true(json_array_get(a, 2)),
                                                    NULL);
    if (!strcmp(kind, "conv2d"))
        return (struct tn_module *)tn_nn_conv2d_new(I(0), I(1), I(2), I(3), I(4), I(5), I(6),
                                                    json_is_true(json_array_get(a, 7)), NULL);
    if (!strcmp(kind, "embedding"))
        return (struct tn_module *)tn_nn_embedding_new(I(0), I(1), I(2), NULL);
    if (!strcmp(kind, "layer_norm")) {
        int64_t shape[TN_MAX_DIMS];
        int nd = tn_test_ints(json_array_get(a, 0), shape);
        return (struct tn_module *)tn_nn_layer_norm_new(
            shape, nd, json_number_value(json_array_get(a, 1)), json_is_true(json_array_get(a, 2)));
    }
    if (!strcmp(kind, "batch_norm2d"))
        return (struct tn_module *)tn_nn_batch_norm2d_new(
            I(0), json_number_value(json_array_get(a, 1)), json_number_value(json_array_get(a, 2)));
    if (!strcmp(kind, "mlp")) {
        struct tn_module *m[5] = {
            (struct tn_module *)tn_nn_linear_new(16, 32, true, NULL),
            tn_nn_activation_new(TN_NN_RELU),
            (struct tn_module *)tn_nn_linear_new(32, 32, true, NULL),
            tn_nn_activation_new(TN_NN_RELU),
            (struct tn_module *)tn_nn_linear_new(32, 10, true, NULL),
        };
        return tn_nn_sequential_new(m, 5);
    }
    if (!strcmp(kind, "max_pool2d"))
        return (struct tn_module *)tn_nn_max_pool2d_new(I(0), I(1), I(2));
    if (!strcmp(kind, "dropout"))
        return (struct tn_module *)tn_nn_dropout_new(json_number_value(json_array_get(a, 0)), NULL);
    static const char *const acts[] = {"relu", "gelu", "tanh", "sigmoid", "silu", "flatten"};
    for (int k = 0; k < 6; k++)
        if (!strcmp(kind, acts[k]))
            return tn_nn_activation_new((enum tn_nn_activation)k);
#undef I
    fail_msg("unknown module kind %s", kind);
    return NULL;
}

struct expect {
    json_t *names, *tensors;
    size_t i;
    int bad;
};

static int check_entry(const char *name, struct tn_tensor **slot, bool buffer, void *ctx)
{
    struct expect *e = ctx;
    const char *want = json_string_value(json_array_get(e->names, e->i));
    if (!want || strcmp(want, name) != 0) {
        print_message("# entry %zu is %s, PyTorch has %s\n", e->i, name, want ? want : "none");
        e->bad++;
    } else if (tn_test_compare(*slot, json_array_get(e->tensors, e->i), name, 0) != 0) {
        e->bad++;
    }
    e->i++;
    return 0;
}

static int run_init(json_t *c, bool torch1)
{
    tn_manual_seed((uint64_t)json_integer_value(json_object_get(c, "seed")));
    tn_generator_set_torch1(NULL, torch1);
    const char *kind = json_string_value(json_object_get(c, "kind"));
    struct tn_module *m = build(kind, json_object_get(c, "args"));
    if (!m) {
        print_message("# %s: %s\n", kind, tn_last_error());
        return 1;
    }
    struct expect e = {json_object_get(c, "names"), json_object_get(c, "tensors"), 0, 0};
    tn_module_visit(m, check_entry, &e);
    if (e.i != json_array_size(e.names)) {
        print_message("# %s: %zu entries, PyTorch has %zu\n", kind, e.i,
                      json_array_size(e.names));
        e.bad++;
    }
    tn_module_free(m);
    tn_generator_set_torch1(NULL, false);
    return e.bad;
}

/* ----------------------------------------------------------------- optim */

/* 0 when t is within `rtol` (relative, with a float32-sized absolute floor)
 * of the fixture tensor. */
static int close_to(const struct tn_tensor *t, json_t *want, double rtol, const char *what)
{
    struct tn_tensor *w = tn_test_tensor(want);
    struct tn_tensor *a = tn_to_dtype(t, TN_FLOAT64), *b = tn_to_dtype(w, TN_FLOAT64);
    struct tn_tensor *ac = tn_contiguous(a), *bc = tn_contiguous(b);
    int bad = tn_numel(ac) != tn_numel(bc);
    for (int64_t i = 0; !bad && i < tn_numel(ac); i++) {
        double x = ((double *)tn_data(ac))[i], y = ((double *)tn_data(bc))[i];
        double floor = t->dtype == TN_FLOAT64 ? 1e-300 : 1e-7;
        if (!(fabs(x - y) <= rtol * fabs(y) + floor) && !(isnan(x) && isnan(y))) {
            print_message("# %s: element %lld is %.9g, PyTorch %.9g\n", what, (long long)i, x, y);
            bad = 1;
        }
    }
    tn_release(w);
    tn_release(a);
    tn_release(b);
    tn_release(ac);
    tn_release(bc);
    return bad;
}


static struct tn_optim *make_optim(const char *kind, json_t *kw, struct tn_tensor **p, int n)
{
    if (!strcmp(kind, "sgd")) {
        struct tn_sgd_options o = tn_sgd_defaults();
        o.lr = num(kw, "lr", o.lr);
        o.momentum = num(kw, "momentum", 0);
        o.dampening = num(kw, "dampening", 0);
        o.weight_decay = num(kw, "weight_decay", 0);
        o.nesterov = flag(kw, "nesterov");
        o.maximize = flag(kw, "maximize");
        return tn_sgd_new(p, n, &o);
    }
    bool w = !strcmp(kind, "adamw");
    struct tn_adam_options o = w ? tn_adamw_defaults() : tn_adam_defaults();
    o.lr = num(kw, "lr", o.lr);
    json_t *betas = json_object_get(kw, "betas");
    if (betas) {
        o.beta1 = json_number_value(json_array_get(betas, 0));
        o.beta2 = json_number_value(json_array_get(betas, 1));
    }
    o.eps = num(kw, "eps", o.eps);
    o.weight_decay = num(kw, "weight_decay", o.weight_decay);
    o.amsgrad = flag(kw, "amsgrad");
    o.maximize = flag(kw, "maximize");
    return w ? tn_adamw_new(p, n, &o) : tn_adam_new(p, n, &o);
}

/* PyTorch 2.x wheels take sqrt from MKL's vector math, which is not
 * correctly rounded (a last-bit difference in about one element in six, in
 * Adam's denominator), so Adam and AdamW are held to 2.x within a few ulps
 * and to 1.13 (Debian's build, no MKL) bit for bit; SGD to both bit for
 * bit. */
static int same(const struct tn_tensor *t, json_t *want, bool exact, const char *what)
{
    if (exact)
        return tn_test_compare(t, want, what, 0);
    return close_to(t, want, t->dtype == TN_FLOAT32 ? 2e-6 : 1e-14, what);
}

static int run_optim(json_t *c, bool torch1)
{
    const char *kind = json_string_value(json_object_get(c, "kind"));
    json_t *init = json_object_get(c, "init");
    int n = (int)json_array_size(init), bad = 0;
    struct tn_tensor *p[8];
    for (int i = 0; i < n; i++) {
        p[i] = tn_test_tensor(json_array_get(init, (size_t)i));
        p[i]->requires_grad = true;
    }
    struct tn_optim *o = make_optim(kind, json_object_get(c, "kw"), p, n);
    bool exact = torch1 || !strcmp(kind, "sgd");
    assert_non_null(o);
    tn_optim_set_compat(o, torch1 ? TN_OPTIM_TORCH1 : TN_OPTIM_TORCH2);
    size_t si;
    json_t *step;
    char what[128];
    json_array_foreach(json_object_get(c, "steps"), si, step) {
        for (int i = 0; i < n; i++) {
            tn_release(p[i]->grad);
            p[i]->grad = tn_test_tensor(json_array_get(json_object_get(step, "grads"), (size_t)i));
        }
        assert_int_equal(tn_optim_step(o), 0);
        for (int i = 0; i < n && !bad; i++) {
            snprintf(what, sizeof what, "%s %s step %zu param %d", kind,
                     tn_dtype_name(p[i]->dtype), si + 1, i);
            bad += same(p[i], json_array_get(json_object_get(step, "params"), (size_t)i),
                        exact, what) != 0;
        }
    }
    static const char *const keys[] = {"momentum_buffer", "exp_avg", "exp_avg_sq",
                                       "max_exp_avg_sq"};
    for (int i = 0; i < n && !bad; i++) {
        json_t *st = json_array_get(json_object_get(c, "state"), (size_t)i);
        const struct tn_optim_param_state *s = tn_optim_state(o, i);
        struct tn_tensor *have[4] = {s->momentum_buffer, s->exp_avg, s->exp_avg_sq,
                                     s->max_exp_avg_sq};
        for (int k = 0; k < 4; k++) {
            json_t *want = json_object_get(st, keys[k]);
            snprintf(what, sizeof what, "%s state %d %s", kind, i, keys[k]);
            if (!want != !have[k]) {
                print_message("# %s: present here %d, in PyTorch %d\n", what, !!have[k], !!want);
                bad++;
            } else if (want && same(have[k], want, exact, what) != 0) {
                bad++;
            }
        }
        json_t *ws = json_object_get(st, "step");
        if (ws) {
            struct tn_tensor *t = tn_test_tensor(ws);
            double want = *(const float *)tn_data(t);
            tn_release(t);
            if (want != s->step) {
                print_message("# %s state %d step %g, PyTorch %g\n", kind, i, s->step, want);
                bad++;
            }
        }
    }
    tn_optim_zero_grad(o, true);
    for (int i = 0; i < n; i++) {
        assert_null(p[i]->grad);
        tn_release(p[i]);
    }
    tn_optim_free(o);
    return bad;
}

/* ------------------------------------------------- schedules, clip, loss */

static int run_sched(json_t *c, bool torch1)
{
    const char *kind = json_string_value(json_object_get(c, "kind"));
    json_t *kw = json_object_get(c, "kw");
    struct tn_tensor *p = tn_zeros(TN_SHAPE(1), TN_FLOAT32);
    struct tn_sgd_options so = tn_sgd_defaults();
    so.lr = num(c, "lr", 0.1);
    struct tn_optim *o = tn_sgd_new(&p, 1, &so);
    struct tn_lr_scheduler *s =
        !strcmp(kind, "step") ? tn_step_lr_new(o, (int64_t)num(kw, "step_size", 1),
                                               num(kw, "gamma", 0.1))
        : !strcmp(kind, "cosine") ? tn_cosine_lr_new(o, (int64_t)num(kw, "T_max", 1),
                                                     num(kw, "eta_min", 0))
                                  : tn_linear_lr_new(o, num(kw, "start_factor", 1.0 / 3),
                                                     num(kw, "end_factor", 1.0),
                                                     (int64_t)num(kw, "total_iters", 5));
    assert_non_null(s);
    int bad = 0;
    size_t i;
    json_t *lr;
    json_array_foreach(json_object_get(c, "lrs"), i, lr) {
        if (i > 0)
            tn_lr_step(s);
        if (tn_optim_get_lr(o) != json_number_value(lr) && !bad++)
            print_message("# %s: lr at epoch %zu is %.17g, PyTorch %.17g\n", kind, i,
                          tn_optim_get_lr(o), json_number_value(lr));
    }
    tn_lr_free(s);
    tn_optim_free(o);
    tn_release(p);
    return bad;
}

static int run_forward(json_t *c, bool torch1)
{
    tn_manual_seed((uint64_t)json_integer_value(json_object_get(c, "seed")));
    tn_generator_set_torch1(NULL, torch1);
    const char *kind = json_string_value(json_object_get(c, "kind"));
    struct tn_module *m = build(kind, json_object_get(c, "args"));
    assert_non_null(m);
    struct tn_tensor *x = tn_test_tensor(json_object_get(c, "input"));
    struct tn_tensor *y = tn_module_forward(m, x);
    int bad = 0;
    if (!y) {
        print_message("# %s forward: %s\n", kind, tn_last_error());
        bad = 1;
    } else {
        /* GELU's 1 + erf(x / sqrt 2) cancels for x < -2: lib/ops' gelu is
         * a few 1e-5 from PyTorch's there, so GELU gets a looser bound */
        double rtol = !strcmp(kind, "gelu") ? 1e-4 : 1e-5;
        /* Dropout: PyTorch's mask (bernoulli_ on the default generator) bit
         * for bit, and so its output */
        if (!strcmp(kind, "dropout"))
            bad = tn_test_compare(y, json_object_get(c, "out"), kind, false) != 0;
        else
            bad = close_to(y, json_object_get(c, "out"), rtol, kind);
    }
    json_t *bufs = json_object_get(c, "buffers");
    if (bufs) {
        struct tn_nn_batch_norm2d *b = (struct tn_nn_batch_norm2d *)m;
        bad += close_to(b->running_mean, json_array_get(bufs, 0), 1e-5, "running_mean");
        bad += close_to(b->running_var, json_array_get(bufs, 1), 1e-5, "running_var");
        bad += tn_test_compare(b->num_batches_tracked, json_array_get(bufs, 2),
                               "num_batches_tracked", 0) != 0;
    }
    tn_release(x);
    tn_release(y);
    tn_module_free(m);
    tn_generator_set_torch1(NULL, false);
    return bad;
}

static int run_clip(json_t *c, bool torch1)
{
    json_t *grads = json_object_get(c, "grads");
    struct tn_tensor *p[2];
    for (int i = 0; i < 2; i++) {
        struct tn_tensor *g = tn_test_tensor(json_array_get(grads, (size_t)i));
        p[i] = tn_zeros(g->sizes, g->ndim, TN_FLOAT32);
        p[i]->grad = g;
    }
    json_t *nt = json_object_get(c, "norm_type");
    double total = 0, norm_type = json_is_string(nt) ? INFINITY : json_number_value(nt);
    assert_int_equal(tn_clip_grad_norm_(p, 2, num(c, "max_norm", 1), norm_type, false, &total),
                     0);
    int bad = fabs(total - num(c, "total", 0)) > 1e-6 * num(c, "total", 0);
    if (bad)
        print_message("# clip: total norm %.9g, PyTorch %.9g\n", total, num(c, "total", 0));
    for (int i = 0; i < 2; i++) {
        bad += close_to(p[i]->grad, json_array_get(json_object_get(c, "clipped"), (size_t)i),
                        1e-6, "clipped grad");
        tn_release(p[i]);
    }
    return bad;
}

static int run_loss(json_t *c, bool torch1)
{
    const char *loss = json_string_value(json_object_get(c, "loss"));
    const char *red = json_string_value(json_object_get(c, "reduction"));
    enum tn_reduction r = !strcmp(red, "none") ? TN_REDUCTION_NONE
                          : !strcmp(red, "sum") ? TN_REDUCTION_SUM : TN_REDUCTION_MEAN;
    struct tn_tensor *x = tn_test_tensor(json_object_get(c, "input"));
    struct tn_tensor *t = tn_test_tensor(json_object_get(c, "target"));
    json_t *wj = json_object_get(c, "weight");
    struct tn_tensor *w = wj ? tn_test_tensor(wj) : NULL, *out;
    int64_t ignore = json_integer_value(json_object_get(c, "ignore_index"));
    if (!strcmp(loss, "cross_entropy"))
        out = tn_nn_cross_entropy(x, t, w, r, ignore);
    else if (!strcmp(loss, "nll"))
        out = tn_nn_nll_loss(x, t, w, r, ignore);
    else if (!strcmp(loss, "mse"))
        out = tn_nn_mse_loss(x, t, r);
    else if (!strcmp(loss, "bce"))
        out = tn_nn_bce(x, t, w, r);
    else
        out = tn_nn_bce_with_logits(x, t, r);
    char what[96];
    snprintf(what, sizeof what, "%s reduction=%s", loss, red);
    int bad = out ? close_to(out, json_object_get(c, "out"), 2e-6, what) : 1;
    if (!out)
        print_message("# %s: %s\n", what, tn_last_error());
    tn_release(out);
    tn_release(x);
    tn_release(t);
    tn_release(w);
    return bad;
}

/* ------------------------------------------------------------ state_dict */

static const char *fixture_dir(void)
{
    const char *dir = getenv("TN_NN_FIXTURES");
    return dir && *dir ? dir : TN_SRCDIR "/tests/fixtures/nn";
}

static int compare_states(struct tn_optim *o, json_t *states, bool exact, const char *what)
{
    static const char *const keys[] = {"momentum_buffer", "exp_avg", "exp_avg_sq",
                                       "max_exp_avg_sq"};
    int bad = 0;
    for (int i = 0; i < tn_optim_nparams(o); i++) {
        json_t *st = json_array_get(states, (size_t)i);
        const struct tn_optim_param_state *s = tn_optim_state(o, i);
        struct tn_tensor *have[4] = {s->momentum_buffer, s->exp_avg, s->exp_avg_sq,
                                     s->max_exp_avg_sq};
        for (int k = 0; k < 4; k++) {
            json_t *want = json_object_get(st, keys[k]);
            if (!want != !have[k] || (want && same(have[k], want, exact, keys[k]) != 0)) {
                print_message("# %s: state %d %s differs\n", what, i, keys[k]);
                bad++;
            }
        }
        json_t *ws = json_object_get(st, "step");
        if (ws) {
            struct tn_tensor *t = tn_test_tensor(ws);
            bad += *(const float *)tn_data(t) != s->step;
            tn_release(t);
        }
    }
    return bad;
}

/* Saves v to dir/name (TN_NN_OUT when set, for nn_state.bats to open in
 * PyTorch, else a temporary folder) and loads it back. */
static struct tn_value *save_load(const struct tn_value *v, const char *name)
{
    const char *dir = getenv("TN_NN_OUT");
    char tmpl[] = "/tmp/test_nn.XXXXXX", path[4096];
    bool tmp = !dir || !*dir;
    if (tmp)
        assert_non_null(dir = mkdtemp(tmpl));
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(tn_save(path, v, NULL), 0);
    struct tn_value *back = tn_load(path, NULL);
    if (!back)
        print_message("# %s: %s\n", path, tn_last_error());
    assert_non_null(back);
    if (tmp) {
        unlink(path);
        rmdir(dir);
    }
    return back;
}

static struct tn_module *small_mlp(void)
{
    struct tn_module *l[3] = {(struct tn_module *)tn_nn_linear_new(4, 3, true, NULL),
                              tn_nn_activation_new(TN_NN_RELU),
                              (struct tn_module *)tn_nn_linear_new(3, 2, true, NULL)};
    return tn_nn_sequential_new(l, 3);
}

static int run_state(json_t *c, bool torch1)
{
    const char *kind = json_string_value(json_object_get(c, "kind"));
    char path[4096], what[64];
    snprintf(what, sizeof what, "%s state_dict", kind);
    /* the model: torch's state_dict into a model built with another seed */
    snprintf(path, sizeof path, "%s/%s", fixture_dir(), json_string_value(json_object_get(c, "model")));
    struct tn_value *msd = tn_load(path, NULL);
    assert_non_null(msd);
    tn_manual_seed(99);
    struct tn_module *m = small_mlp();
    assert_int_equal(tn_module_load_state_dict(m, msd, true), 0);
    struct tn_tensor *p[4];
    assert_int_equal(tn_module_parameters(m, p, 4), 4);
    int bad = 0;
    for (int i = 0; i < 4; i++)
        bad += tn_test_compare(p[i], json_array_get(json_object_get(c, "params"), (size_t)i),
                               "loaded parameter", 0) != 0;
    /* the optimizer: built with defaults, its group and state from torch's file */
    snprintf(path, sizeof path, "%s/%s", fixture_dir(), json_string_value(json_object_get(c, "file")));
    struct tn_value *osd = tn_load(path, NULL);
    assert_non_null(osd);
    json_t *defaults = json_object();
    struct tn_optim *o = make_optim(kind, defaults, p, 4);
    if (tn_optim_load_state_dict(o, osd) != 0) {
        print_message("# %s: %s\n", path, tn_last_error());
        bad++;
    }
    json_t *kw = json_object_get(c, "kw");
    bad += tn_optim_get_lr(o) != num(kw, "lr", -1);
    const struct tn_adam_options *a = tn_optim_adam_options(o);
    if (a && json_object_get(kw, "betas"))
        bad += a->beta1 != json_number_value(json_array_get(json_object_get(kw, "betas"), 0));
    bad += compare_states(o, json_object_get(c, "state"), true, what);
    /* and back: our state_dicts through tn_save and tn_load give the same */
    char name[64];
    snprintf(name, sizeof name, "%s_state_%s.pt", kind, torch1 ? "torch1" : "torch2");
    struct tn_value *ours = tn_optim_state_dict(o);
    assert_non_null(ours);
    struct tn_value *back = save_load(ours, name);
    struct tn_optim *o2 = make_optim(kind, defaults, p, 4);
    json_decref(defaults);
    assert_int_equal(tn_optim_load_state_dict(o2, back), 0);
    bad += tn_optim_get_lr(o2) != tn_optim_get_lr(o);
    bad += compare_states(o2, json_object_get(c, "state"), true, what);
    struct tn_value *msd2 = tn_module_state_dict(m);
    snprintf(name, sizeof name, "model_%s_%s.pt", kind, torch1 ? "torch1" : "torch2");
    struct tn_value *mback = save_load(msd2, name);
    assert_int_equal(tn_module_load_state_dict(m, mback, true), 0);
    tn_value_release(msd);
    tn_value_release(osd);
    tn_value_release(ours);
    tn_value_release(back);
    tn_value_release(msd2);
    tn_value_release(mback);
    tn_optim_free(o);
    tn_optim_free(o2);
    tn_module_free(m);
    return bad;
}

/* Runs fn on every case under `key` in both fixture files. */
static void run_all(const char *key, int (*fn)(json_t *, bool))
{
    for (int v = 1; v <= 2; v++) {
        json_t *fx = nn_fixture(v == 1 ? "nn_torch1" : "nn_torch2");
        const char *ver = json_string_value(json_object_get(fx, "torch"));
        bool torch1 = ver && strncmp(ver, "1.", 2) == 0;
        size_t i;
        json_t *c;
        int n = 0, bad = 0;
        json_array_foreach(json_object_get(fx, key), i, c) {
            n++;
            bad += fn(c, torch1) != 0;
        }
        print_message("# %d %s cases from PyTorch %s, %d differ\n", n, key, ver, bad);
        assert_true(n > 0);
        assert_int_equal(bad, 0);
        json_decref(fx);
    }
}

static void test_init(void **state) { run_all("init", run_init); }
static void test_optim(void **state) { run_all("optim", run_optim); }
static void test_sched(void **state) { run_all("sched", run_sched); }
static void test_clip(void **state) { run_all("clip", run_clip); }
static void test_loss(void **state) { run_all("loss", run_loss); }
static void test_state(void **state) { run_all("state", run_state); }
static void test_forward(void **state) { run_all("forward", run_forward); }

static void test_load_errors(void **state)
{
    tn_manual_seed(0);
    struct tn_module *m = small_mlp();
    struct tn_value *sd = tn_module_state_dict(m);
    struct tn_value *k = tn_value_str("2.weight");
    struct tn_tensor *t = tn_zeros(TN_SHAPE(3, 3), TN_FLOAT32);
    assert_int_equal(tn_value_set(sd, k, tn_value_tensor(t)), 0);
    assert_int_not_equal(tn_module_load_state_dict(m, sd, true), 0);
    assert_string_equal(tn_last_error(),
                        "Error(s) in loading state_dict for Sequential: size mismatch for "
                        "2.weight: copying a param with shape torch.Size([3, 3]) from "
                        "checkpoint, the shape in current model is torch.Size([2, 3]).");
    struct tn_value *empty = tn_value_odict();
    assert_int_not_equal(tn_module_load_state_dict(m, empty, true), 0);
    assert_non_null(strstr(tn_last_error(), "Missing key(s) in state_dict: \"0.weight\", "
                                            "\"0.bias\", \"2.weight\", \"2.bias\""));
    assert_int_equal(tn_module_load_state_dict(m, empty, false), 0);
    tn_release(t);
    tn_value_release(sd);
    tn_value_release(empty);
    tn_module_free(m);
}

static void test_errors(void **state)
{
    struct tn_tensor *p = tn_zeros(TN_SHAPE(2), TN_FLOAT32);
    struct tn_sgd_options s = tn_sgd_defaults();
    s.lr = -1;
    assert_null(tn_sgd_new(&p, 1, &s));
    assert_string_equal(tn_last_error(), "Invalid learning rate: -1.0");
    s = tn_sgd_defaults();
    s.nesterov = true;
    assert_null(tn_sgd_new(&p, 1, &s));
    assert_string_equal(tn_last_error(), "Nesterov momentum requires a momentum and zero dampening");
    struct tn_adam_options a = tn_adam_defaults();
    a.eps = -1e-8;
    assert_null(tn_adam_new(&p, 1, &a));
    assert_string_equal(tn_last_error(), "Invalid epsilon value: -1e-08");
    a = tn_adam_defaults();
    a.beta2 = 1.0;
    assert_null(tn_adam_new(&p, 1, &a));
    assert_string_equal(tn_last_error(), "Invalid beta parameter at index 1: 1.0");
    assert_null(tn_linear_lr_new(NULL, 0, 1, 5));
    assert_string_equal(tn_last_error(), "Starting multiplicative factor expected to be greater "
                                         "than 0 and less or equal to 1.");
    tn_release(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init),  cmocka_unit_test(test_optim), cmocka_unit_test(test_sched),
        cmocka_unit_test(test_clip),  cmocka_unit_test(test_loss),  cmocka_unit_test(test_errors),
        cmocka_unit_test(test_state), cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_forward),
    };
    return TN_RUN_TESTS(tests);
}
