/*
 * bin/tcompile/train.c: tcompile train GRAPH: training without Python. The
 * graph (model and loss, exported once with torch.export) goes through AOT
 * autograd (tn_compile_joint) into a forward and a backward graph, both
 * compiled; each step runs the forward on a batch of the --data .npz, the
 * backward on what it saved, and an optimizer of lib/optim on the
 * gradients. Batches are drawn as PyTorch's DataLoader(shuffle=True,
 * drop_last=True, generator=torch.Generator().manual_seed(SEED)) draws
 * them: one randperm of the rows per epoch. Dropout draws its masks from
 * the default generator, which --seed S seeds as torch.manual_seed(S)
 * (the shuffle's generator is seeded with S too). A checkpoint holds the weights, the optimizer's
 * state_dict (PyTorch's layout), the step and the default generator's
 * state (rng_state: torch.get_rng_state()'s bytes), so --resume replays
 * the shuffles, restores the generator and continues bit for bit.
 * --eager takes each step's gradients from the eager engine instead
 * (tn_graph_grad: the graph run in the interpreter with autograd, the
 * formulas' C helpers), the same loop otherwise.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include <tensor/core.h>
#include <tensor/dist.h>
#include <tensor/io.h>
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
    /* --eval: the graph in eval mode, its data, the names of its loss and
     * of the loss's scores and targets (NULL: no accuracy) */
    struct tn_graph *eg;
    struct tn_compiled *ec;
    struct tn_value *edata;
    struct tn_tensor *ecols[TC_MAX_INPUTS];
    int64_t erows;
    char *eloss, *escores, *etarget;
    /* under trun (WORLD_SIZE above 1): data parallel */
    struct tn_dist_info dist;
    struct tn_pg *pg;
    struct tn_ddp *ddp;
    int rank, world;
};

static int fail_at(const char *what, const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "tcompile: %s: ", what);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return 2;
}

/* MemAvailable of /proc/meminfo in bytes; 0 when unknown. */
static uint64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kb * 1024;
}

/* tcompile train holds --data and --eval in memory: an archive whose
 * arrays (the members' uncompressed sizes) take more than the memory
 * available is refused by name before any is read, rather than failing
 * half way through or waking the OOM killer. 0, or 2 with the message. */
static int data_fits(const char *file)
{
    struct tn_zip *z = tn_zip_open(file);
    if (!z)
        return tc_fail();
    uint64_t need = 0, avail = mem_available();
    for (size_t i = 0; i < tn_zip_count(z); i++)
        need += tn_zip_entry_at(z, i)->size;
    tn_zip_close(z);
    if (!avail || need <= avail)
        return 0;
    char a[32], b[32];
    snprintf(a, sizeof a, "%llu", (unsigned long long)(need >> 20));
    snprintf(b, sizeof b, "%llu", (unsigned long long)(avail >> 20));
    return fail_at(file, "its arrays take %s MiB, more than the %s MiB of memory available "
                   "(tcompile train holds the data in memory)", a, b);
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

/* The columns of npz (the file `file`) against the graph's user inputs: the
 * same dtype and trailing sizes, the same number of rows (to *rows); the
 * batch is the graph's. */
static int bind_data(struct trainer *t, struct tn_value *npz, const char *file,
                     struct tn_tensor **cols, int64_t *rows)
{
    const struct tn_graph *g = t->g;
    *rows = -1;
    t->ni = 0;
    for (int i = 0; i < g->ninputs; i++) {
        if (g->inputs[i].kind != TN_GIN_USER_INPUT)
            continue;
        const struct tn_graph_value *v = &g->values[g->inputs[i].value];
        struct tn_value *c = tn_value_get(npz, v->name);
        char want[160], have[160];
        if (!c || c->kind != TN_VALUE_TENSOR)
            return fail_at(file, "holds no array '%s' for the graph's input of that name%s",
                           v->name, "");
        struct tn_tensor *x = c->v.tensor;
        struct tn_tensor meta = {.dtype = v->dtype, .ndim = v->ndim};
        memcpy(meta.sizes, v->sizes, sizeof v->sizes);
        describe(&meta, want, sizeof want);
        describe(x, have, sizeof have);
        bool fits = x->dtype == v->dtype && x->ndim == v->ndim && v->ndim >= 1;
        for (int d = 1; fits && d < v->ndim; d++)
            fits = x->sizes[d] == v->sizes[d];
        if (fits && *rows >= 0 && x->sizes[0] != *rows)
            fits = false;
        if (!fits) {
            char msg[400];
            snprintf(msg, sizeof msg, "'%s' is %s, but the graph takes %s (rows first, the "
                     "same number of rows in every array)", v->name, have, want);
            return fail_at(file, "%s%s", msg, "");
        }
        *rows = x->sizes[0];
        t->batch = v->sizes[0];
        t->inames[t->ni] = v->name;
        cols[t->ni++] = x;
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
    if (*rows < t->batch)
        return fail_at(file, "holds fewer rows than one batch%s%s", "", "");
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
static int carry_buffers(struct trainer *t, const struct tn_graph *fg, const struct tn_value *fo)
{
    for (int i = 0; i < fg->noutputs; i++) {
        const struct tn_graph_spec *s = &fg->outputs[i];
        if (s->kind != TN_GOUT_BUFFER_MUTATION || !s->target)
            continue;
        struct tn_value *v = tn_value_get(fo, fg->values[s->value].name);
        if (!v || v->kind != TN_VALUE_TENSOR)
            return tn_set_error(TN_EINVAL, "forward: no value for the buffer '%s'", s->target);
        if (tn_value_set(t->weights, tn_value_str(s->target), tn_value_retain(v)) < 0)
            return -1;
    }
    return 0;
}

/* The batch of rows idx[0..batch) of cols, by input name, into in. */
static int batch_of(struct trainer *t, struct tn_tensor **cols, const int64_t *idx,
                    struct tn_value *in)
{
    int64_t n = t->batch;
    struct tn_tensor *it = tn_empty(&n, 1, TN_INT64);
    int rc = it && in ? 0 : tn_set_error(TN_ENOMEM, "out of memory");
    if (rc == 0)
        memcpy(tn_data(it), idx, (size_t)n * sizeof *idx);
    for (int i = 0; rc == 0 && i < t->ni; i++) {
        struct tn_tensor *b = tn_index_select(cols[i], 0, it);
        rc = b ? tn_value_set(in, tn_value_str(t->inames[i]), tn_value_tensor(b)) : -1;
        tn_release(b);
    }
    tn_release(it);
    return rc;
}

static double scalar_of(const struct tn_tensor *l)
{
    return l->dtype == TN_FLOAT64 ? *(const double *)tn_data(l) : *(const float *)tn_data(l);
}

/* Under trun: rank 0's buffers (batch norm's running statistics) to every
 * rank, as PyTorch's DDP (broadcast_buffers=True) does before each
 * forward, so the ranks start each step from equal statistics. */
static int broadcast_buffers(struct trainer *t)
{
    for (int i = 0; i < t->g->ninputs; i++) {
        const struct tn_graph_spec *s = &t->g->inputs[i];
        if (s->kind != TN_GIN_BUFFER || !s->target)
            continue;
        struct tn_value *v = tn_value_get(t->weights, s->target);
        if (!v || v->kind != TN_VALUE_TENSOR)
            continue;
        struct tn_tensor *b = tn_contiguous(v->v.tensor);
        int rc = b ? tn_pg_broadcast(t->pg, b, 0) : -1;
        if (rc == 0 && b != v->v.tensor)
            rc = tn_value_set(t->weights, tn_value_str(s->target), tn_value_tensor(b));
        tn_release(b);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* One step on rows idx[0..batch): *loss receives the loss. */
static int step(struct trainer *t, const int64_t *idx, double *loss)
{
    struct tn_value *in = tn_value_dict(), *fo = NULL, *go = NULL;
    int rc = batch_of(t, t->cols, idx, in);
    if (rc == 0 && t->pg)
        rc = broadcast_buffers(t);
    if (rc == 0 && tc.eager) { /* the graph's own outputs, in its order */
        rc = tn_graph_grad(t->g, t->weights, in, &fo, &go);
        if (rc == 0) {
            *loss = scalar_of(fo->v.dict.vals[t->loss_out]->v.tensor);
            rc = carry_buffers(t, t->g, fo);
        }
    } else if (rc == 0)
        rc = tn_compile_run(t->fc, t->weights, in, &fo);
    if (rc == 0 && !tc.eager) {
        *loss = scalar_of(fo->v.dict.vals[t->loss_out]->v.tensor);
        rc = carry_buffers(t, t->fg, fo);
        for (size_t k = 0; rc == 0 && k < fo->v.dict.n; k++)
            rc = tn_value_set(in, tn_value_retain(fo->v.dict.keys[k]),
                              tn_value_retain(fo->v.dict.vals[k]));
    }
    if (rc == 0 && !tc.eager)
        rc = tn_compile_run(t->bc, t->weights, in, &go);
    for (int i = 0; rc == 0 && i < t->np; i++) {
        struct tn_value *gv = tn_value_get(go, t->pnames[i]);
        tn_release(t->params[i]->grad);
        t->params[i]->grad = gv ? tn_retain(gv->v.tensor) : NULL;
    }
    if (rc == 0 && t->ddp)
        rc = tn_ddp_sync_grads(t->ddp);
    if (rc == 0 && t->pg) { /* the loss of the whole batch: the ranks' mean */
        int64_t one = 1;
        struct tn_tensor *l = tn_empty(&one, 1, TN_FLOAT64);
        rc = l ? 0 : tn_set_error(TN_ENOMEM, "out of memory");
        if (rc == 0) {
            *(double *)tn_data(l) = *loss;
            rc = tn_pg_allreduce(t->pg, l, TN_REDUCE_SUM);
            *loss = *(double *)tn_data(l) / t->world;
        }
        tn_release(l);
    }
    if (rc == 0)
        rc = tn_optim_step(t->opt);
    tn_value_release(in);
    tn_value_release(fo);
    tn_value_release(go);
    return rc < 0 ? rc : 0;
}

/* {"model": weights, "optimizer": state_dict, "step": n, "rng_state":
 * the default generator's state}, atomically. */
static int save(struct trainer *t)
{
    struct tn_value *ck = tn_value_dict(), *sd = tn_optim_state_dict(t->opt);
    struct tn_tensor *rng = tn_generator_get_state(NULL);
    int rc = ck && sd && rng ? 0 : -1;
    if (rc == 0)
        rc = tn_value_set(ck, tn_value_str("rng_state"), tn_value_tensor(rng));
    tn_release(rng);
    if (rc == 0)
        rc = tn_value_set(ck, tn_value_str("model"), tn_value_retain(t->weights));
    if (rc == 0)
        rc = tn_value_set(ck, tn_value_str("optimizer"), sd);
    else
        tn_value_release(sd);
    if (rc == 0)
        rc = tn_value_set(ck, tn_value_str("step"), tn_value_int(t->step));
    if (rc == 0 && t->rank > 0) { /* TCOMPILE_SAVE_RANKS: CKPT.rankR */
        char path[4096];
        snprintf(path, sizeof path, "%s.rank%d", tc.save, t->rank);
        rc = tn_save(path, ck, NULL);
    } else if (rc == 0) {
        rc = tn_save(tc.save, ck, NULL);
    }
    tn_value_release(ck);
    return rc;
}

/* Sets every input of n named `arg` (batch_norm's training, dropout's
 * train) to false. */
static void set_false(json_t *n, const char *arg)
{
    size_t i;
    json_t *in;
    json_array_foreach(json_object_get(n, "inputs"), i, in) {
        const char *name = json_string_value(json_object_get(in, "name"));
        if (name && !strcmp(name, arg))
            json_object_set_new(in, "arg", json_pack("{s:b}", "as_bool", 0));
    }
}

/* The as_tensor name of n's input `arg`, or NULL. */
static const char *tensor_arg(json_t *n, const char *arg)
{
    size_t i;
    json_t *in;
    json_array_foreach(json_object_get(n, "inputs"), i, in) {
        const char *name = json_string_value(json_object_get(in, "name"));
        if (name && !strcmp(name, arg))
            return json_string_value(
                json_object_get(json_object_get(json_object_get(in, "arg"), "as_tensor"), "name"));
    }
    return NULL;
}

static bool makes(json_t *n, const char *value)
{
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(n, "outputs"), i, o) {
        const char *name =
            json_string_value(json_object_get(json_object_get(o, "as_tensor"), "name"));
        if (name && !strcmp(name, value))
            return true;
        size_t k;
        json_t *e;
        json_array_foreach(json_object_get(o, "as_tensors"), k, e) {
            name = json_string_value(json_object_get(e, "name"));
            if (name && !strcmp(name, value))
                return true;
        }
    }
    return false;
}

static void add_output(json_t *gm, const char *value)
{
    json_array_append_new(json_object_get(json_object_get(gm, "graph"), "outputs"),
                          json_pack("{s:{s:s}}", "as_tensor", "name", value));
    json_array_append_new(json_object_get(json_object_get(gm, "signature"), "output_specs"),
                          json_pack("{s:{s:{s:{s:s}}}}", "user_output", "arg", "as_tensor",
                                    "name", value));
}

/* --eval: the graph as loaded (text, before functionalisation) in eval
 * mode: batch_norm's training and dropout's train false (batch norm then
 * reads the running statistics, dropout is the identity). When the loss is
 * cross_entropy_loss or nll_loss, its scores and targets become outputs too,
 * for the accuracy (argmax of the scores over dim 1 against the targets). */
static int make_eval(struct trainer *t, const char *text, const char *path)
{
    json_error_t err;
    json_t *doc = json_loads(text, 0, &err), *gm = json_object_get(doc, "graph_module"), *n;
    if (!gm) {
        json_decref(doc);
        return fail_at(path, "--eval: cannot read the graph back: %s%s", err.text, "");
    }
    const char *loss = t->g->values[t->g->outputs[t->loss_out].value].name;
    size_t i;
    json_array_foreach(json_object_get(json_object_get(gm, "graph"), "nodes"), i, n) {
        const char *target = json_string_value(json_object_get(n, "target"));
        if (!target)
            continue;
        if (!strcmp(target, "torch.ops.aten.batch_norm.default"))
            set_false(n, "training");
        else if (strstr(target, "dropout"))
            set_false(n, "train");
        else if (strstr(target, "native_batch_norm") &&
                 !strstr(target, "_native_batch_norm_legit_no_training")) {
            char msg[300];
            snprintf(msg, sizeof msg, "--eval: batch norm in the core ATen form (%s) has no "
                     "eval mode here: export the training IR (torch.export without "
                     "run_decompositions)", target);
            json_decref(doc);
            return fail_at(path, "%s%s", msg, "");
        }
        if (makes(n, loss) && (strstr(target, ".cross_entropy_loss.") ||
                               strstr(target, ".nll_loss.") || strstr(target, ".nll_loss_forward.") ||
                               strstr(target, ".nll_loss2d."))) {
            const char *s = tensor_arg(n, "self"), *y = tensor_arg(n, "target");
            if (s && y) {
                t->escores = strdup(s);
                t->etarget = strdup(y);
            }
        }
    }
    t->eloss = strdup(loss);
    if (t->escores) {
        add_output(gm, t->escores);
        add_output(gm, t->etarget);
    }
    char *out = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    if (!out || !t->eloss)
        return tn_set_error(TN_ENOMEM, "out of memory"), tc_fail();
    t->eg = parse_checked(out, path);
    free(out);
    struct tn_compile_options o = tc_compile_options();
    if (!t->eg || !(t->ec = tn_compile_new(t->eg, &o)))
        return tc_fail();
    return 0;
}

/* The loss (the mean of the batches') and the accuracy (NAN when the loss
 * has no scores) of the weights on --eval's full batches, in order. */
static int evaluate(struct trainer *t, double *loss, double *acc)
{
    int64_t nb = t->erows / t->batch, right = 0, *idx = malloc((size_t)t->batch * sizeof *idx);
    int rc = idx ? 0 : tn_set_error(TN_ENOMEM, "out of memory");
    *loss = 0;
    for (int64_t b = 0; rc == 0 && b < nb; b++) {
        for (int64_t k = 0; k < t->batch; k++)
            idx[k] = b * t->batch + k;
        struct tn_value *in = tn_value_dict(), *fo = NULL;
        rc = batch_of(t, t->ecols, idx, in);
        if (rc == 0)
            rc = tn_compile_run(t->ec, t->weights, in, &fo);
        struct tn_value *l = rc == 0 ? tn_value_get(fo, t->eloss) : NULL;
        if (rc == 0 && !l)
            rc = tn_set_error(TN_EINVAL, "eval: no loss '%s'", t->eloss);
        if (rc == 0)
            *loss += scalar_of(l->v.tensor);
        if (rc == 0 && t->escores) {
            struct tn_value *sv = tn_value_get(fo, t->escores), *yv = tn_value_get(fo, t->etarget);
            int64_t dim = 1;
            struct tn_tensor *am = sv ? tn_argmax(sv->v.tensor, &dim, false) : NULL;
            struct tn_tensor *y = am && yv ? tn_to_dtype(yv->v.tensor, TN_INT64) : NULL;
            struct tn_tensor *yc = y ? tn_contiguous(y) : NULL, *ac = am ? tn_contiguous(am) : NULL;
            if (!yc || !ac || tn_numel(yc) != tn_numel(ac))
                rc = rc ? rc : tn_set_error(TN_EINVAL, "eval: scores and targets do not match");
            for (int64_t k = 0; rc == 0 && k < tn_numel(ac); k++)
                right += ((const int64_t *)tn_data(ac))[k] == ((const int64_t *)tn_data(yc))[k];
            tn_release(am);
            tn_release(y);
            tn_release(yc);
            tn_release(ac);
        }
        tn_value_release(in);
        tn_value_release(fo);
    }
    free(idx);
    *loss /= (double)nb;
    *acc = t->escores ? (double)right / (double)(nb * t->batch) : NAN;
    return rc < 0 ? rc : 0;
}

/* trun's (torchrun's) environment: WORLD_SIZE above 1 joins the others. */
static int join(struct trainer *t)
{
    const char *ws = getenv("WORLD_SIZE");
    t->world = 1;
    if (!ws || atoi(ws) <= 1)
        return 0;
    if (tn_dist_init("env://", -1, -1, 600000, &t->dist) < 0)
        return tc_fail();
    t->rank = t->dist.rank;
    t->world = t->dist.world_size;
    return 0;
}

static int setup(struct trainer *t, const char *path)
{
    char *fwd = NULL, *bwd = NULL;
    struct tn_value *init = NULL, *ckpt = NULL;
    int rc;
    if (!(t->g = tn_graph_load(path, NULL, &init)))
        return tc_fail();
    char *raw = tc.eval ? tn_graph_to_json(t->g) : NULL;
    if (tc.eval && !raw)
        return tc_fail();
    struct tc_problems p = {0};
    rc = tn_graph_check(t->g, tc_problems_add_cb, &p);
    if (rc > 0)
        tc_problems_print(&p, t->g, false);
    tc_problems_free(&p);
    if (rc != 0) {
        free(raw);
        return rc < 0 ? tc_fail() : 2;
    }
    if ((t->loss_out = find_loss(t->g)) < 0) {
        free(raw);
        return fail_at(path, "no loss to train: the graph needs a loss output, or one scalar "
                             "output (export the model with its loss)%s%s",
                       "", "");
    }
    if (raw) {
        rc = make_eval(t, raw, path);
        free(raw);
        if (rc)
            return rc;
    }
    /* --seed S seeds dropout's generator too, as a script calling
     * torch.manual_seed(S) does (every rank alike, so DDP ranks draw the
     * same masks, as PyTorch's do when seeded alike); a checkpoint's
     * rng_state, restored below, takes over on --resume. Without --seed
     * the generator keeps its initial seed, as a script that never seeds. */
    if (tc.given_seed)
        tn_manual_seed((uint64_t)tc.seed);
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
        /* the dropout masks' generator (a checkpoint without one: as
         * seeded above, --seed's or the initial seed) */
        struct tn_value *rs = tn_value_get(ckpt, "rng_state");
        if (rs && (rs->kind != TN_VALUE_TENSOR || tn_generator_set_state(NULL, rs->v.tensor) < 0))
            return fail_at(tc.resume, "rng_state: %s%s",
                           rs->kind == TN_VALUE_TENSOR ? tn_last_error() : "not a tensor", "");
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
    if ((rc = data_fits(tc.data)) || (tc.eval && (rc = data_fits(tc.eval))))
        return rc;
    if (!(t->data = tn_npz_load(tc.data)))
        return tc_fail();
    if ((rc = bind_data(t, t->data, tc.data, t->cols, &t->rows)))
        return rc;
    if (tc.eval) {
        if (!(t->edata = tn_npz_load(tc.eval)))
            return tc_fail();
        if ((rc = bind_data(t, t->edata, tc.eval, t->ecols, &t->erows)))
            return rc;
    }
    if (tn_compile_joint(t->g, &fwd, &bwd) < 0)
        return tc_fail();
    t->fg = parse_checked(fwd, "forward");
    t->bg = t->fg ? parse_checked(bwd, "backward") : NULL;
    free(fwd);
    free(bwd);
    if (!t->bg)
        return tc_fail();
    struct tn_compile_options o = tc_compile_options();
    if ((!tc.eager && (!(t->fc = tn_compile_new(t->fg, &o)) ||
                       !(t->bc = tn_compile_new(t->bg, &o)))) ||
        !(t->opt = make_optim(t)))
        return tc_fail();
    if (t->world > 1) {
        if (t->rows < t->batch * t->world) {
            char msg[200];
            snprintf(msg, sizeof msg, "holds fewer rows than one batch of %lld on each of %d "
                     "ranks", (long long)t->batch, t->world);
            return fail_at(tc.data, "%s%s", msg, "");
        }
        if (!(t->pg = tn_pg_new_tcp(t->dist.store, t->rank, t->world, NULL, 600000)) ||
            !(t->ddp = tn_ddp_new(t->pg, t->params, (size_t)t->np, 0)))
            return tc_fail();
    }
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
    tn_ddp_free(t->ddp);
    tn_pg_free(t->pg);
    if (t->world > 1)
        tn_dist_finish(&t->dist);
    tn_optim_free(t->opt);
    tn_compile_free(t->fc);
    tn_compile_free(t->bc);
    tn_graph_free(t->fg);
    tn_graph_free(t->bg);
    tn_graph_free(t->g);
    tn_compile_free(t->ec);
    tn_graph_free(t->eg);
    tn_value_release(t->edata);
    free(t->eloss);
    free(t->escores);
    free(t->etarget);
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
    int rc = join(&t);
    if (rc == 0)
        rc = setup(&t, path);
    if (rc) {
        teardown(&t);
        return rc;
    }
    /* each rank takes its shard of each batch of batch * world rows; rank
     * 0 prints and saves */
    int64_t spe = t.rows / (t.batch * t.world);
    bool lead = t.rank == 0;
    const char *sr = getenv("TCOMPILE_SAVE_RANKS");
    bool saves = lead || (sr && *sr && strcmp(sr, "0"));
    int64_t total = tc.steps ? tc.steps : tc.epochs * spe;
    struct tn_generator *gen = tn_generator_new((uint64_t)tc.seed);
    bool tty = lead && isatty(2) && !tc.log_loss;
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
            if (step(&t, order + (b * t.world + t.rank) * t.batch, &loss) < 0) {
                rc = tc_fail();
                break;
            }
            t.step++;
            sum += loss;
            nb++;
            if (tc.log_loss && lead)
                printf("%.9g\n", loss);
            if (tty)
                fprintf(stderr, "\repoch %lld step %lld/%lld loss %.4f", (long long)epoch + 1,
                        (long long)t.step, (long long)total, sum / (double)nb);
            if (saves && tc.save && tc.save_every && t.step % tc.save_every == 0 && save(&t) < 0)
                rc = tc_fail();
            if (rc)
                break;
        }
        tn_release(perm);
        if (rc == 0 && nb && !tc.log_loss && lead) {
            double dt = tc_now() - t0;
            if (tty)
                fputc('\n', stderr);
            printf("{\"epoch\": %lld, \"step\": %lld, \"loss\": %.9g, \"examples_per_s\": %.1f",
                   (long long)epoch + 1, (long long)t.step, sum / (double)nb,
                   dt > 0 ? (double)(nb * t.batch * t.world) / dt : 0.0);
            double el, ea;
            if (t.ec && evaluate(&t, &el, &ea) < 0) {
                rc = tc_fail();
                break;
            }
            if (t.ec && isnan(ea))
                printf(", \"eval_loss\": %.9g, \"eval_accuracy\": null", el);
            else if (t.ec)
                printf(", \"eval_loss\": %.9g, \"eval_accuracy\": %.9g", el, ea);
            printf("}\n");
            fflush(stdout);
        }
    }
    if (rc == 0 && saves && tc.save && save(&t) < 0)
        rc = tc_fail();
    tn_generator_free(gen);
    teardown(&t);
    return rc;
}
