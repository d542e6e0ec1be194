/*
 * share/examples/digits/train.c: trains an MLP (64-128-128-10, ReLU) on the
 * UCI handwritten digits with cross entropy and Adam, through libtensor's
 * public API only, and saves the trained state_dict as a PyTorch
 * checkpoint (torch.load(path, weights_only=True) opens it, and
 * model.load_state_dict takes it).
 *
 * Everything random comes from the seed, the way train_torch.py beside it
 * draws it in PyTorch: the model is built right after tn_manual_seed(seed)
 * (so its initial weights are PyTorch's for that seed), and one generator
 * seeded with the seed draws the 80/20 split (randperm) and then each
 * epoch's shuffle.  So both programs see the same batches in the same order.
 *
 * Usage: train [--data FILE] [--seed N] [--epochs N] [--lr X] [--output FILE]
 *        (train --help lists the rest).
 */
#include <tensor/tensor.h>
#include <tensor/autograd.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define NFEAT 64
#define NCLASS 10

struct options {
    const char *data, *output, *optimizer;
    uint64_t seed;
    int epochs, batch, max_steps;
    double lr, momentum;
    bool log_loss, torch1, quiet;
};

/* The data set: n rows of 64 features (pixel / 16) and a label each. */
struct digits {
    int n;
    float *x;
    int64_t *y;
};

static int fail(const char *what)
{
    fprintf(stderr, "train: %s: %s\n", what, tn_last_error());
    return 2;
}

/* Reads the gzipped CSV (64 integers 0..16 and a label 0..9 a line). */
static int load_digits(const char *path, struct digits *d)
{
    gzFile f = gzopen(path, "rb");
    if (!f) {
        fprintf(stderr, "train: %s: %s\n", path, strerror(errno ? errno : ENOENT));
        return 2;
    }
    char line[1024];
    int cap = 0, lineno = 0;
    d->n = 0;
    d->x = NULL;
    d->y = NULL;
    while (gzgets(f, line, sizeof line)) {
        lineno++;
        if (line[strspn(line, " \r\n")] == '\0')
            continue;
        if (d->n == cap) {
            cap = cap ? 2 * cap : 2048;
            float *nx = realloc(d->x, (size_t)cap * NFEAT * sizeof *nx);
            int64_t *ny = nx ? realloc(d->y, (size_t)cap * sizeof *ny) : NULL;
            if (nx)
                d->x = nx;
            if (!ny) {
                fprintf(stderr, "train: out of memory reading %s\n", path);
                gzclose(f);
                return 2;
            }
            d->y = ny;
        }
        char *p = line, *end;
        for (int j = 0; j <= NFEAT; j++) {
            long v = strtol(p, &end, 10);
            bool ok = end != p && (j == NFEAT ? v >= 0 && v < NCLASS : v >= 0 && v <= 16) &&
                      (*end == (j == NFEAT ? *end : ',')) &&
                      (j < NFEAT || *end == '\0' || *end == '\n' || *end == '\r');
            if (!ok) {
                fprintf(stderr, "train: %s:%d: field %d is not %s\n", path, lineno, j + 1,
                        j == NFEAT ? "a label 0..9" : "a pixel value 0..16");
                gzclose(f);
                return 2;
            }
            if (j < NFEAT)
                d->x[(size_t)d->n * NFEAT + j] = (float)v / 16.0f;
            else
                d->y[d->n] = v;
            p = end + 1;
        }
        d->n++;
    }
    int err;
    const char *msg = gzerror(f, &err);
    if (err != Z_OK && err != Z_STREAM_END) {
        fprintf(stderr, "train: %s: %s\n", path, msg);
        gzclose(f);
        return 2;
    }
    gzclose(f);
    if (d->n < 10) {
        fprintf(stderr, "train: %s: only %d samples\n", path, d->n);
        return 2;
    }
    return 0;
}

/* The rows idx[0..n) of the data set as a [n, 64] float tensor and a [n]
 * label tensor. */
static int gather(const struct digits *d, const int64_t *idx, int64_t n, struct tn_tensor **x,
                  struct tn_tensor **y)
{
    *x = tn_empty(TN_SHAPE(n, NFEAT), TN_FLOAT32);
    *y = tn_empty(TN_SHAPE(n), TN_INT64);
    if (!*x || !*y)
        return -1;
    float *xp = tn_data(*x);
    int64_t *yp = tn_data(*y);
    for (int64_t i = 0; i < n; i++) {
        memcpy(xp + i * NFEAT, d->x + idx[i] * NFEAT, NFEAT * sizeof *xp);
        yp[i] = d->y[idx[i]];
    }
    return 0;
}

static struct tn_module *make_model(void)
{
    struct tn_module *layers[5] = {
        (struct tn_module *)tn_nn_linear_new(NFEAT, 128, true, NULL),
        tn_nn_activation_new(TN_NN_RELU),
        (struct tn_module *)tn_nn_linear_new(128, 128, true, NULL),
        tn_nn_activation_new(TN_NN_RELU),
        (struct tn_module *)tn_nn_linear_new(128, NCLASS, true, NULL),
    };
    return tn_nn_sequential_new(layers, 5);
}

/* The fraction of rows idx[0..n) the model classifies right (no grad). */
static double accuracy(struct tn_module *m, const struct digits *d, const int64_t *idx, int64_t n)
{
    struct tn_tensor *x, *y;
    if (gather(d, idx, n, &x, &y) != 0)
        return -1;
    bool prev = tn_set_grad_enabled(false);
    struct tn_tensor *logits = tn_module_forward(m, x);
    struct tn_tensor *pred = logits ? tn_argmax(logits, (const int64_t[]){1}, false) : NULL;
    tn_set_grad_enabled(prev);
    double acc = -1;
    if (pred) {
        int64_t right = 0;
        for (int64_t i = 0; i < n; i++)
            right += ((const int64_t *)tn_data(pred))[i] == ((const int64_t *)tn_data(y))[i];
        acc = (double)right / (double)n;
    }
    tn_release(x);
    tn_release(y);
    tn_release(logits);
    tn_release(pred);
    return acc;
}

/* The peak resident memory of the process so far, in KiB. */
static long peak_rss_kib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0;
}

/* One line per epoch; on a terminal, a bar redrawn in place as it goes. */
static void progress(bool tty, int epoch, int epochs, int64_t done, int64_t total, double loss,
                     bool end)
{
    if (tty) {
        int w = 30, fill = (int)(w * done / (total ? total : 1));
        fprintf(stderr, "\repoch %*d/%d [%.*s%*s] %3d%% loss %.4f", epochs >= 10 ? 2 : 1,
                epoch, epochs, fill, "##############################", w - fill, "",
                (int)(100 * done / (total ? total : 1)), loss);
        if (end)
            fputc('\n', stderr);
    } else if (end) {
        fprintf(stderr, "epoch %d/%d loss %.4f\n", epoch, epochs, loss);
    }
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: train [OPTION]...\n"
            "Train an MLP (64-128-128-10) on the handwritten digits and save it as a\n"
            "PyTorch checkpoint.\n\n"
            "  -d, --data FILE        the digits CSV (gzip) (default share/datasets/digits.csv.gz)\n"
            "  -s, --seed N           seed of the weights, the split and the shuffles (0)\n"
            "  -e, --epochs N         passes over the training split (10)\n"
            "  -l, --lr X             learning rate (0.003; 0.05 for sgd)\n"
            "  -b, --batch-size N     samples per step (64)\n"
            "  -o, --output FILE      where the state_dict goes (digits_mlp.pt); '' for nowhere\n"
            "      --optimizer NAME   adam (default), adamw or sgd (momentum 0.9)\n"
            "      --max-steps N      stop after N steps\n"
            "      --log-loss         print every step's loss on stdout\n"
            "      --torch1           reproduce PyTorch 1.13's random numbers and optimizer\n"
            "                         arithmetic (2.x's by default)\n"
            "  -q, --quiet            no progress lines\n"
            "  -h, --help             this help\n"
            "      --version          the version\n");
}

static int parse(int argc, char **argv, struct options *o)
{
    enum { OPT_OPTIM = 256, OPT_MAX, OPT_LOG, OPT_T1, OPT_VERSION };
    static const struct option longs[] = {
        {"data", required_argument, NULL, 'd'},   {"seed", required_argument, NULL, 's'},
        {"epochs", required_argument, NULL, 'e'}, {"lr", required_argument, NULL, 'l'},
        {"batch-size", required_argument, NULL, 'b'},
        {"output", required_argument, NULL, 'o'},
        {"optimizer", required_argument, NULL, OPT_OPTIM},
        {"max-steps", required_argument, NULL, OPT_MAX},
        {"log-loss", no_argument, NULL, OPT_LOG}, {"torch1", no_argument, NULL, OPT_T1},
        {"quiet", no_argument, NULL, 'q'},        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION}, {NULL, 0, NULL, 0}};
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, "d:s:e:l:b:o:qh", longs, NULL)) != -1) {
        errno = 0;
        switch (c) {
        case 'd': o->data = optarg; break;
        case 'o': o->output = optarg; break;
        case 's': o->seed = strtoull(optarg, &end, 10); break;
        case 'e': o->epochs = (int)strtol(optarg, &end, 10); break;
        case 'b': o->batch = (int)strtol(optarg, &end, 10); break;
        case OPT_MAX: o->max_steps = (int)strtol(optarg, &end, 10); break;
        case 'l': o->lr = strtod(optarg, &end); break;
        case OPT_OPTIM: o->optimizer = optarg; break;
        case OPT_LOG: o->log_loss = true; break;
        case OPT_T1: o->torch1 = true; break;
        case 'q': o->quiet = true; break;
        case 'h': usage(stdout); exit(0);
        case OPT_VERSION: printf("train (tensorkit) %s\n", tn_version()); exit(0);
        default:
            fprintf(stderr, "Try 'train --help' for more information.\n");
            return 2;
        }
        if (c == 's' || c == 'e' || c == 'b' || c == 'l' || c == OPT_MAX) {
            if (errno || *end || end == optarg) {
                fprintf(stderr, "train: invalid number '%s'\n"
                                "Try 'train --help' for more information.\n", optarg);
                return 2;
            }
        }
    }
    if (optind < argc) {
        fprintf(stderr, "train: unexpected argument '%s'\n"
                        "Try 'train --help' for more information.\n", argv[optind]);
        return 2;
    }
    bool sgd = !strcmp(o->optimizer, "sgd");
    if (!sgd && strcmp(o->optimizer, "adam") && strcmp(o->optimizer, "adamw")) {
        fprintf(stderr, "train: --optimizer must be adam, adamw or sgd\n"
                        "Try 'train --help' for more information.\n");
        return 2;
    }
    if (isnan(o->lr))
        o->lr = sgd ? 0.05 : 0.003;
    if (o->epochs < 1 || o->batch < 1 || o->max_steps < 0 || !(o->lr > 0)) {
        fprintf(stderr, "train: --epochs, --batch-size and --lr must be positive\n"
                        "Try 'train --help' for more information.\n");
        return 2;
    }
    if (isnan(o->momentum))
        o->momentum = 0.9;
    return 0;
}

static struct tn_optim *make_optim(const struct options *o, struct tn_tensor **p, int n)
{
    struct tn_optim *opt;
    if (!strcmp(o->optimizer, "sgd")) {
        struct tn_sgd_options s = tn_sgd_defaults();
        s.lr = o->lr;
        s.momentum = o->momentum;
        opt = tn_sgd_new(p, n, &s);
    } else {
        bool w = !strcmp(o->optimizer, "adamw");
        struct tn_adam_options a = w ? tn_adamw_defaults() : tn_adam_defaults();
        a.lr = o->lr;
        opt = w ? tn_adamw_new(p, n, &a) : tn_adam_new(p, n, &a);
    }
    if (opt)
        tn_optim_set_compat(opt, o->torch1 ? TN_OPTIM_TORCH1 : TN_OPTIM_TORCH2);
    return opt;
}

/* One optimizer step on rows idx[0..n): the loss through *loss. */
static int train_step(struct tn_module *m, struct tn_optim *opt, const struct digits *d,
                      const int64_t *idx, int64_t n, double *loss)
{
    struct tn_tensor *x, *y, *logits = NULL, *l = NULL;
    int rc = gather(d, idx, n, &x, &y);
    tn_optim_zero_grad(opt, true);
    if (rc == 0 && (logits = tn_module_forward(m, x)) &&
        (l = tn_nn_cross_entropy(logits, y, NULL, TN_REDUCTION_MEAN, -100)) &&
        (rc = tn_backward(&l, 1, NULL, false, false)) == 0)
        rc = tn_optim_step(opt);
    else if (rc == 0)
        rc = -1;
    if (l)
        *loss = *(const float *)tn_data(l);
    tn_release(x);
    tn_release(y);
    tn_release(logits);
    tn_release(l);
    return rc;
}

int main(int argc, char **argv)
{
    struct options o = {.data = "share/datasets/digits.csv.gz", .output = "digits_mlp.pt",
                        .optimizer = "adam", .epochs = 10, .batch = 64, .lr = NAN,
                        .momentum = NAN};
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc;
    struct digits d;
    if ((rc = load_digits(o.data, &d)))
        return rc;

    /* the model first, right after the seed, as torch.manual_seed then nn */
    tn_manual_seed(o.seed);
    tn_generator_set_torch1(NULL, o.torch1);
    struct tn_module *model = make_model();
    struct tn_generator *g = tn_generator_new(o.seed);
    if (!model || !g)
        return fail("building the model");
    tn_generator_set_torch1(g, o.torch1);
    struct tn_tensor *perm = tn_randperm(d.n, TN_INT64, g);
    if (!perm)
        return fail("randperm");
    int64_t ntrain = (int64_t)d.n * 4 / 5, ntest = d.n - ntrain;
    const int64_t *split = tn_data(perm);
    struct tn_tensor *params[16];
    int np = tn_module_parameters(model, params, 16);
    struct tn_optim *opt = make_optim(&o, params, np);
    if (!opt)
        return fail("optimizer");
    int64_t *order = malloc((size_t)ntrain * sizeof *order);
    if (!order)
        return fail("out of memory");

    bool tty = !o.quiet && isatty(2);
    int64_t step = 0;
    struct timespec t0, t1;
    long rss0 = peak_rss_kib();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int epoch = 1; epoch <= o.epochs && !(o.max_steps && step >= o.max_steps); epoch++) {
        struct tn_tensor *shuffle = tn_randperm(ntrain, TN_INT64, g);
        if (!shuffle)
            return fail("randperm");
        for (int64_t i = 0; i < ntrain; i++)
            order[i] = split[((const int64_t *)tn_data(shuffle))[i]];
        tn_release(shuffle);
        double sum = 0, loss = 0;
        int64_t nb = 0;
        for (int64_t b = 0; b < ntrain; b += o.batch) {
            int64_t n = ntrain - b < o.batch ? ntrain - b : o.batch;
            if (train_step(model, opt, &d, order + b, n, &loss) != 0)
                return fail("training step");
            sum += loss;
            nb++;
            step++;
            if (o.log_loss)
                printf("%.9g\n", loss);
            if (tty)
                progress(true, epoch, o.epochs, b + n, ntrain, sum / (double)nb, false);
            if (o.max_steps && step >= o.max_steps)
                break;
        }
        if (!o.quiet)
            progress(tty, epoch, o.epochs, ntrain, ntrain, sum / (double)nb, true);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);

    double acc = accuracy(model, &d, split + ntrain, ntest);
    if (acc < 0)
        return fail("evaluation");
    if (!o.log_loss)
        printf("test accuracy %.4f (%lld of %lld samples held out)\n", acc,
               (long long)llround(acc * (double)ntest), (long long)ntest);
    if (!o.quiet)
        fprintf(stderr, "steps %lld seconds %.4f peak RSS growth %ld KiB steps/s %.1f\n",
                (long long)step, secs, peak_rss_kib() - rss0,
                secs > 0 ? (double)step / secs : 0.0);
    if (o.output && *o.output) {
        struct tn_value *sd = tn_module_state_dict(model);
        if (!sd || tn_save(o.output, sd, NULL) != 0)
            return fail(o.output);
        tn_value_release(sd);
        if (!o.log_loss)
            printf("saved the state_dict to %s\n", o.output);
    }
    free(order);
    free(d.x);
    free(d.y);
    tn_release(perm);
    tn_optim_free(opt);
    tn_module_free(model);
    tn_generator_free(g);
    return 0;
}
