/*
 * bin/tcompile/train.c: tcompile train GRAPH: training without Python. The
 * graph (model and loss, exported once with torch.export) goes through AOT
 * autograd (tn_compile_joint) into a forward and a backward graph, both
 * compiled; each step runs the forward on a batch of the --data .npz, the
 * backward on what it saved, and an optimizer of lib/optim on the
 * gradients. Batches are drawn as PyTorch's DataLoader(shuffle=True,
 * drop_last=True, generator=torch.Generator().manual_seed(SEED)) draws
 * them: one randperm of the rows per epoch. A checkpoint holds the
 * weights, the optimizer's state_dict (PyTorch's layout) and the step, so
 * --resume replays the shuffles and continues bit for bit.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tensor/core.h>
#include <tensor/ops.h>
#include <tensor/optim.h>

#include "tcompile.h"

struct trainer {
    struct tn_graph *g, *fg, *bg;
    struct tn_compiled *fc, *bc;
    struct tn_value *weights;    /* parameter/buffer name -> our own copy */
    struct tn_value *data;       /* the .npz */
    struct tn_tensor *params[TC_MAX_INPUTS];
    const char *pnames[TC_MAX_INPUTS];
    int np;
    const char *inames[TC_MAX_INPUTS]; /* the user inputs, by placeholder name */
    struct tn_tensor *cols[TC_MAX_INPUTS];
    int ni;
    int64_t rows, batch;
    struct tn_optim *opt;
    int64_t step;
    int loss_out;                /* the loss's index in g's (and fg's) outputs */
};

static int fail_at(const char *what, const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "tcompile: %s: ", what);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return 2;
}

/* A checked graph from JSON text. */
static struct tn_graph *parse_checked(const char *text, const char *label)
{
    struct tn_graph *g = tn_graph_parse(text, strlen(text), label, NULL);
    if (g && tn_graph_check(g, NULL, NULL) != 0) {
        tn_set_error(TN_EINVAL, "%s: does not check", label);
        tn_graph_free(g);
        return NULL;
    }
    return g;
}

/* The index of the loss in g's outputs: a LOSS_OUTPUT, else its only user
 * output when that is a scalar; -1 when none. */
static int find_loss(const struct tn_graph *g)
{
    int nuser = 0, scalar = 0, at = -1;
    for (int i = 0; i < g->noutputs; i++) {
        if (g->outputs[i].kind == TN_GOUT_LOSS_OUTPUT)
            return i;
        if (g->outputs[i].kind == TN_GOUT_USER_OUTPUT) {
            nuser++;
            at = i;
            scalar += g->outputs[i].value >= 0 && g->values[g->outputs[i].value].ndim == 0;
        }
    }
    return nuser == 1 && scalar == 1 ? at : -1;
}

static void describe(const struct tn_tensor *t, char *buf, size_t len)
{
    int k = snprintf(buf, len, "%s[", tn_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim && k < (int)len; d++)
        k += snprintf(buf + k, len - (size_t)k, d ? ", %lld" : "%lld", (long long)t->sizes[d]);
    if (k < (int)len)
        snprintf(buf + k, len - (size_t)k, "]");
}

/* The data's columns against the graph's user inputs: the same dtype and
 * trailing sizes, the same number of rows; the batch is the graph's. */
static int bind_data(struct trainer *t)
{
    const struct tn_graph *g = t->g;
    t->rows = -1;
    for (int i = 0; i < g->ninputs; i++) {
        if (g->inputs[i].kind != TN_GIN_USER_INPUT)
            continue;
        const struct tn_graph_value *v = &g->values[g->inputs[i].value];
        struct tn_value *c = tn_value_get(t->data, v->name);
        char want[160], have[160];
        if (!c || c->kind != TN_VALUE_TENSOR)
            return fail_at(tc.data, "holds no array '%s' for the graph's input of that name%s",
                           v->name, "");
        struct tn_tensor *x = c->v.tensor;
        struct tn_tensor meta = {.dtype = v->dtype, .ndim = v->ndim};
        memcpy(meta.sizes, v->sizes, sizeof v->sizes);
        describe(&meta, want, sizeof want);
        describe(x, have, sizeof have);
        bool fits = x->dtype == v->dtype && x->ndim == v->ndim && v->ndim >= 1;
        for (int d = 1; fits && d < v->ndim; d++)
            fits = x->sizes[d] == v->sizes[d];
        if (fits && t->rows >= 0 && x->sizes[0] != t->rows)
            fits = false;
        if (!fits) {
            char msg[400];
            snprintf(msg, sizeof msg, "'%s' is %s, but the graph takes %s (rows first, the "
                     "same number of rows in every array)", v->name, have, want);
            return fail_at(tc.data, "%s%s", msg, "");
        }
        t->rows = x->sizes[0];
        t->batch = v->sizes[0];
        t->inames[t->ni] = v->name;
        t->cols[t->ni++] = x;
    }
    if (t->ni == 0)
        return fail_at(t->g->label, "the graph takes no user input to feed the data to%s%s",
                       "", "");
    if (tc.batch_size && tc.batch_size != t->batch) {
        char msg[200];
        snprintf(msg, sizeof msg, "the graph was exported for batches of %lld, not %lld",
                 (long long)t->batch, (long long)tc.batch_size);
        return fail_at("--batch-size", "%s%s", msg, "");
    }
    if (t->rows < t->batch)
        return fail_at(tc.data, "holds fewer rows than one batch%s%s", "", "");
    return 0;
}

/* Our own copies of the weights (the optimizer updates them in place); with
 * ckpt, those of its "model" after checking they are this graph's. */
static int bind_weights(struct trainer *t, struct tn_value *init, const char *from)
{
    const struct tn_graph *g = t->g;
    t->weights = tn_value_dict();
    for (int i = 0; i < g->ninputs; i++) {
        const struct tn_graph_spec *s = &g->inputs[i];
        if (s->kind == TN_GIN_USER_INPUT || !s->target)
            continue;
        const struct tn_graph_value *v = &g->values[s->value];
        struct tn_value *w = tn_value_get(init, s->target);
        bool fits = w && w->kind == TN_VALUE_TENSOR && w->v.tensor->dtype == v->dtype &&
                    w->v.tensor->ndim == v->ndim;
        for (int d = 0; fits && d < v->ndim; d++)
            fits = w->v.tensor->sizes[d] == v->sizes[d];
        if (!fits)
            return fail_at(from, w ? "'%s' does not have the graph's dtype and shape%s"
                                   : "has no '%s': the weights (or checkpoint) of another "
                                     "model%s",
                           s->target, "");
        struct tn_tensor *c = tn_clone(w->v.tensor);
        if (!c || tn_value_set(t->weights, tn_value_str(s->target), tn_value_tensor(c)) < 0)
            return tc_fail();
        if (s->kind == TN_GIN_PARAMETER) {
            t->pnames[t->np] = s->target;
            t->params[t->np++] = c;
        }
        tn_release(c);
    }
    return 0;
}

static struct tn_optim *make_optim(struct trainer *t)
{
    struct tn_optim *o;
    if (!strcmp(tc.optimizer, "sgd")) {
        struct tn_sgd_options s = tn_sgd_defaults();
        s.lr = tc.lr;
        s.momentum = tc.momentum;
        s.dampening = tc.dampening;
        s.nesterov = tc.nesterov;
        s.weight_decay = tc.weight_decay;
        o = tn_sgd_new(t->params, t->np, &s);
    } else {
        bool w = !strcmp(tc.optimizer, "adamw");
        struct tn_adam_options a = w ? tn_adamw_defaults() : tn_adam_defaults();
        a.lr = tc.lr;
        if (tc.given_betas) {
            a.beta1 = tc.beta1;
            a.beta2 = tc.beta2;
        }
        if (tc.given_eps)
            a.eps = tc.eps;
        if (tc.given_weight_decay)
            a.weight_decay = tc.weight_decay;
        o = w ? tn_adamw_new(t->params, t->np, &a) : tn_adam_new(t->params, t->np, &a);
    }
    return o;
}

/* The buffers the forward mutated (batch norm's running statistics and
 * num_batches_tracked, BUFFER_MUTATION outputs) become the weights the
 * next step reads and the checkpoint saves, under their state_dict
 * names. */
static int carry_buffers(struct trainer *t, const struct tn_value *fo)
{
    for (int i = 0; i < t->fg->noutputs; i++) {
        const struct tn_graph_spec *s = &t->fg->outputs[i];
        if (s->kind != TN_GOUT_BUFFER_MUTATION || !s->target)
            continue;
        struct tn_value *v = tn_value_get(fo, t->fg->values[s->value].name);
        if (!v || v->kind != TN_VALUE_TENSOR)
            return tn_set_error(TN_EINVAL, "forward: no value for the buffer '%s'", s->target);
        if (tn_value_set(t->weights, tn_value_str(s->target), tn_value_retain(v)) < 0)
            return -1;
    }
    return 0;
}

/* One step on rows idx[0..batch): *loss receives the loss. */
static int step(struct trainer *t, const int64_t *idx, double *loss)
{
    int64_t n = t->batch;
    struct tn_tensor *it = tn_empty(&n, 1, TN_INT64);
    struct tn_value *in = tn_value_dict(), *fo = NULL, *go = NULL;
    int rc = it && in ? 0 : tn_set_error(TN_ENOMEM, "out of memory");
    if (rc == 0)
        memcpy(tn_data(it), idx, (size_t)n * sizeof *idx);
    for (int i = 0; rc == 0 && i < t->ni; i++) {
        struct tn_tensor *b = tn_index_select(t->cols[i], 0, it);
        rc = b ? tn_value_set(in, tn_value_str(t->inames[i]), tn_value_tensor(b)) : -1;
        tn_release(b);
    }
    if (rc == 0)
        rc = tn_compile_run(t->fc, t->weights, in, &fo);
    if (rc == 0) {
        struct tn_tensor *l = fo->v.dict.vals[t->loss_out]->v.tensor;
        *loss = l->dtype == TN_FLOAT64 ? *(const double *)tn_data(l) : *(const float *)tn_data(l);
        rc = carry_buffers(t, fo);
        for (size_t k = 0; rc == 0 && k < fo->v.dict.n; k++)
            rc = tn_value_set(in, tn_value_retain(fo->v.dict.keys[k]),
                              tn_value_retain(fo->v.dict.vals[k]));
    }
    if (rc == 0)
        rc = tn_compile_run(t->bc, t->weights, in, &go);
    for (int i = 0; rc == 0 && i < t->np; i++) {
        struct tn_value *gv = tn_value_get(go, t->pnames[i]);
        tn_release(t->params[i]->grad);
        t->params[i]->grad = gv ? tn_retain(gv->v.tensor) : NULL;
    }
    if (rc == 0)
        rc = tn_optim_step(t->opt);
    tn_release(it);
    tn_value_release(in);
    tn_value_release(fo);
    tn_value_release(go);
    return rc < 0 ? rc : 0;
}

/* {"model": weights, "optimizer": state_dict, "step": n}, atomically. */
static int save(struct trainer *t)
{
    struct tn_value *ck = tn_value_dict(), *sd = tn_optim_state_dict(t->opt);
    int rc = ck && sd ? 0 : -1;
    if (rc == 0)
        rc = tn_value_set(ck, tn_value_str("model"), tn_value_retain(t->weights));
    if (rc == 0)
        rc = tn_value_set(ck, tn_value_str("optimizer"), sd);
    else
        tn_value_release(sd);
    if (rc == 0)
        rc = tn_value_set(ck, tn_value_str("step"), tn_value_int(t->step));
    if (rc == 0)
        rc = tn_save(tc.save, ck, NULL);
    tn_value_release(ck);
    return rc;
}

static int setup(struct trainer *t, const char *path)
{
    char *fwd = NULL, *bwd = NULL;
    struct tn_value *init = NULL, *ckpt = NULL;
    int rc;
    if (!(t->g = tn_graph_load(path, NULL, &init)))
        return tc_fail();
    struct tc_problems p = {0};
    rc = tn_graph_check(t->g, tc_problems_add_cb, &p);
    if (rc > 0)
        tc_problems_print(&p, t->g, false);
    tc_problems_free(&p);
    if (rc != 0)
        return rc < 0 ? tc_fail() : 2;
    if ((t->loss_out = find_loss(t->g)) < 0)
        return fail_at(path, "no loss to train: the graph needs a loss output, or one scalar "
                             "output (export the model with its loss)%s%s",
                       "", "");
    if (tc.resume) {
        if (!(ckpt = tn_io_load_dict(tc.resume)))
            return tc_fail();
        struct tn_value *m = tn_value_get(ckpt, "model"), *st = tn_value_get(ckpt, "step");
        if (!m || m->kind != TN_VALUE_DICT || !tn_value_get(ckpt, "optimizer") || !st ||
            st->kind != TN_VALUE_INT)
            return fail_at(tc.resume, "not a checkpoint of tcompile train (model, optimizer "
                                      "and step)%s%s",
                           "", "");
        t->step = st->v.i;
        if ((rc = bind_weights(t, m, tc.resume)))
            return rc;
    } else {
        if (tc.weights) {
            tn_value_release(init);
            if (!(init = tn_io_load_dict(tc.weights)))
                return tc_fail();
        }
        if (!init)
            return fail_at(path, "needs its initial weights: -w FILE%s%s", "", "");
        if ((rc = bind_weights(t, init, tc.weights ? tc.weights : path)))
            return rc;
    }
    tn_value_release(init);
    if (!(t->data = tn_npz_load(tc.data)))
        return tc_fail();
    if ((rc = bind_data(t)))
        return rc;
    if (tn_compile_joint(t->g, &fwd, &bwd) < 0)
        return tc_fail();
    t->fg = parse_checked(fwd, "forward");
    t->bg = t->fg ? parse_checked(bwd, "backward") : NULL;
    free(fwd);
    free(bwd);
    if (!t->bg)
        return tc_fail();
    struct tn_compile_options o = tc_compile_options();
    if (!(t->fc = tn_compile_new(t->fg, &o)) || !(t->bc = tn_compile_new(t->bg, &o)) ||
        !(t->opt = make_optim(t)))
        return tc_fail();
    if (ckpt) {
        if (tn_optim_load_state_dict(t->opt, tn_value_get(ckpt, "optimizer")) < 0) {
            fprintf(stderr, "tcompile: %s: %s\n", tc.resume, tn_last_error());
            return 2;
        }
        tn_value_release(ckpt);
    }
    return 0;
}

static void teardown(struct trainer *t)
{
    tn_optim_free(t->opt);
    tn_compile_free(t->fc);
    tn_compile_free(t->bc);
    tn_graph_free(t->fg);
    tn_graph_free(t->bg);
    tn_graph_free(t->g);
    tn_value_release(t->weights);
    tn_value_release(t->data);
}

int tc_train(const char *path)
{
    if (!tc.data || !tc.optimizer || !(tc.lr > 0) || (!tc.epochs && !tc.steps))
        tc_usage_error("%s", "train: needs --data, --optimizer, --lr and --epochs or --steps");
    if (strcmp(tc.optimizer, "sgd") && strcmp(tc.optimizer, "adam") &&
        strcmp(tc.optimizer, "adamw"))
        tc_usage_error("--optimizer: '%s' is not sgd, adam or adamw", tc.optimizer);
    struct trainer t = {0};
    int rc = setup(&t, path);
    if (rc) {
        teardown(&t);
        return rc;
    }
    int64_t spe = t.rows / t.batch;
    int64_t total = tc.steps ? tc.steps : tc.epochs * spe;
    struct tn_generator *gen = tn_generator_new((uint64_t)tc.seed);
    bool tty = isatty(2) && !tc.log_loss;
    for (int64_t epoch = 0; rc == 0 && t.step < total; epoch++) {
        struct tn_tensor *perm = tn_randperm(t.rows, TN_INT64, gen);
        if (!perm) {
            rc = tc_fail();
            break;
        }
        if ((epoch + 1) * spe <= t.step) { /* done before --resume: replayed */
            tn_release(perm);
            continue;
        }
        const int64_t *order = tn_data(perm);
        double sum = 0, t0 = tc_now();
        int64_t nb = 0;
        for (int64_t b = t.step - epoch * spe; b < spe && t.step < total; b++) {
            double loss = 0;
            if (step(&t, order + b * t.batch, &loss) < 0) {
                rc = tc_fail();
                break;
            }
            t.step++;
            sum += loss;
            nb++;
            if (tc.log_loss)
                printf("%.9g\n", loss);
            if (tty)
                fprintf(stderr, "\repoch %lld step %lld/%lld loss %.4f", (long long)epoch + 1,
                        (long long)t.step, (long long)total, sum / (double)nb);
            if (tc.save && tc.save_every && t.step % tc.save_every == 0 && save(&t) < 0)
                rc = tc_fail();
            if (rc)
                break;
        }
        tn_release(perm);
        if (rc == 0 && nb && !tc.log_loss) {
            double dt = tc_now() - t0;
            if (tty)
                fputc('\n', stderr);
            printf("{\"epoch\": %lld, \"step\": %lld, \"loss\": %.9g, \"examples_per_s\": %.1f}\n",
                   (long long)epoch + 1, (long long)t.step, sum / (double)nb,
                   dt > 0 ? (double)(nb * t.batch) / dt : 0.0);
            fflush(stdout);
        }
    }
    if (rc == 0 && tc.save && save(&t) < 0)
        rc = tc_fail();
    tn_generator_free(gen);
    teardown(&t);
    return rc;
}
