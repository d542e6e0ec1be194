/*
 * bin/tcompile/main.c: tcompile's command line: check, show and run JSON
 * graphs (torch.export's serialized format, or a .pt2 archive) through
 * libtensor's graph module; compile them to C through lib/compile
 * (tensor/compile.h), and manage the compile cache (cache.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include <tensor/core.h>
#include <tensor/graph.h>
#include <tensor/io.h>

#include "aoti.h"
#include "tcompile.h"
#include "../cli.h"

static const char usage_text[] =
    "Usage: tcompile COMMAND [OPTION]... GRAPH\n"
    "  or:  tcompile check [--missing] [--json] GRAPH...\n"
    "  or:  tcompile run [OPTION]... --batch=FILE\n"
    "Check, show and run graphs exported from PyTorch: torch.export's JSON\n"
    "(ExportedProgram) or a .pt2 archive from torch.export.save; '-' reads\n"
    "standard input.\n"
    "check and run also take a package of AOTInductor (aoti_compile_and_package's\n"
    ".pt2): run runs it through libtensor-aoti, without libtorch.\n"
    "\n"
    "Commands:\n"
    "  check GRAPH...           validate: targets, arguments, definitions before\n"
    "                           uses, shapes and dtypes through the Meta kernels;\n"
    "                           one line per problem, naming the node (in-place\n"
    "                           ops are first rewritten to functional ones)\n"
    "  show GRAPH               one line per node with its shapes and dtypes\n"
    "  run GRAPH                compile it (or take it from the cache) and run it:\n"
    "                           --weights, --input, --output\n"
    "  build GRAPH -o LIB.so    a shared library of the compiled graph and its\n"
    "                           weights with a C API (NAME_create, NAME_run,\n"
    "                           NAME_destroy: man 3 tn_package); run LIB.so runs it\n"
    "  compile GRAPH            compile it into the cache without running (for the\n"
    "                           inputs given, else those tensor_values declares);\n"
    "                           with -o DIR also write kernel.c, kernel.so and\n"
    "                           manifest.json into DIR\n"
    "  grad GRAPH -o DIR        AOT autograd: write DIR/forward.json (the outputs,\n"
    "                           then the activations saved for the backward) and\n"
    "                           DIR/backward.json (GRADIENT_TO_PARAMETER outputs)\n"
    "  train GRAPH              train the model and loss of GRAPH from -w weights\n"
    "                           on --data with --optimizer: a JSON line per epoch\n"
    "  cache ls                 the compile cache's entries: key, bytes, time,\n"
    "                           valid or why not\n"
    "  cache stats              its folder, entries and bytes\n"
    "  cache clear              remove its entries\n"
    "\n"
    "Options:\n"
    "      --json               check: one JSON object; show: the graph as JSON;\n"
    "                           cache ls, cache stats: one JSON object\n"
    "      --missing            check: list the targets the graphs name that\n"
    "                           tensorkit lacks, with how many graphs need each and\n"
    "                           how many nodes use it, most needed first (exit 1\n"
    "                           when any)\n"
    "      --dot                show: a Graphviz digraph\n"
    "  -w, --weights=FILE       run, compile, build, train: parameters and buffers\n"
    "                           by name (torch checkpoint, safetensors or .npz); a\n"
    "                           .pt2 brings its own\n"
    "  -i, --input=NAME=FILE    run: a user input (.npy, or NAME from a .npz or\n"
    "                           checkpoint); FILE alone gives every input it holds\n"
    "  -o, --output=FILE        run: write the outputs (.npz, a torch checkpoint for\n"
    "                           .pt/.pth, .npy for one output; '-' is .npz on stdout);\n"
    "                           without it they are printed\n"
    "      --header=FILE        build: also write a C header declaring the API,\n"
    "                           the inputs and outputs in its comment\n"
    "      --name=NAME          build: the API's prefix (default model)\n"
    "      --weights-file       build: leave the weights out: NAME_create takes a\n"
    "                           weights file\n"
    "      --grads=FILE         run: with autograd, write d(loss)/d(parameter) for\n"
    "                           every parameter (the loss output, else the sum of\n"
    "                           every output), in --output's formats\n"
    "      --time               run: print the compile time and the time the run\n"
    "                           took to stderr\n"
    "      --batch=FILE         run: one run per line of FILE (GRAPH and options,\n"
    "                           tab-separated), each in a child process; prints\n"
    "                           LINE<TAB>exit N|signal N<TAB>first stderr line\n"
    "      --repeat=N           run: run N times (the time is the fastest)\n"
    "      --profile[=FORMAT]   run: time every node and every op kind (target),\n"
    "                           sorted, to stderr: a table when stderr is a\n"
    "                           terminal, else one JSON object; FORMAT table or\n"
    "                           json chooses\n"
    "      --interpret          run: run node by node in the interpreter, without\n"
    "                           compiling (for comparison)\n"
    "      --explain            run, compile: print the fused kernels, the nodes left\n"
    "                           to libtensor and why, and where the generated C is\n"
    "      --strict             run, compile: a graph that does not compile is an\n"
    "                           error (exit 2), not a warning and the interpreter\n"
    "      --recompile-limit=N  run: compile at most N input specialisations (8)\n"
    "      --cache-dir=DIR      run, compile, cache: the compile cache's folder\n"
    "                           (default $TN_COMPILE_CACHE, else\n"
    "                           $XDG_CACHE_HOME/tensorkit, else ~/.cache/tensorkit)\n"
    "      --data=FILE.npz      train: the examples, one array per user input of\n"
    "                           the graph (by name), rows first, held in memory\n"
    "                           (refused when larger than the memory available)\n"
    "      --eval=FILE.npz      train: after each epoch, eval_loss and eval_accuracy\n"
    "                           on these examples in eval mode\n"
    "      --optimizer=NAME     train: sgd, adam or adamw (PyTorch's defaults but\n"
    "                           for the options below)\n"
    "      --lr=LR              train: the learning rate\n"
    "      --batch-size=N       train: must be the batch the graph was exported for\n"
    "                           (the default); the last partial batch is dropped\n"
    "      --epochs=E           train: passes over the data\n"
    "      --steps=S            train: optimizer steps in all (instead of --epochs)\n"
    "      --seed=S             train: the shuffle's seed (0), as PyTorch's\n"
    "                           torch.Generator().manual_seed(S) with randperm,\n"
    "                           and dropout's: the default generator seeded as\n"
    "                           torch.manual_seed(S), every rank alike;\n"
    "                           run: seed the default generator first, as\n"
    "                           torch.manual_seed(S) (dropout, rand, ...)\n"
    "      --save=CKPT          train: write the weights, the optimizer state and\n"
    "                           the step to CKPT (atomically) at the end\n"
    "      --save-every=N       train: also every N steps\n"
    "      --resume=CKPT        train: continue from a checkpoint --save wrote\n"
    "      --eager              train: gradients from the eager engine (autograd\n"
    "                           through the interpreter, as run --grads) instead of\n"
    "                           the compiled forward and backward graphs\n"
    "      --log-loss           train: one loss a line per step, instead of the\n"
    "                           JSON line per epoch\n"
    "      --momentum=M         train, sgd: momentum (0)\n"
    "      --dampening=D        train, sgd: dampening of the momentum (0)\n"
    "      --nesterov           train, sgd: Nesterov momentum (needs --momentum\n"
    "                           and no dampening)\n"
    "      --betas=B1,B2        train, adam, adamw: the decay rates (0.9,0.999)\n"
    "      --eps=E              train, adam, adamw: added to the denominator (1e-8)\n"
    "      --weight-decay=WD    train: L2 penalty (sgd, adam: 0), decoupled decay\n"
    "                           (adamw: 0.01)\n"
    "  -h, --help               print this help and exit\n"
    "  -V, --version            print the version and exit\n"
    "\n"
    "Exit status: 0 success; 1 check found problems; 2 a usage error, an\n"
    "unreadable or invalid graph or input, or a failed run.\n"
    "See tcompile(1) and tensorkit-graph(5) for more.\n";

enum {
    OPT_JSON = 256, OPT_DOT, OPT_TIME, OPT_REPEAT, OPT_GRADS, OPT_INTERPRET, OPT_EAGER, OPT_EXPLAIN,
    OPT_STRICT, OPT_RECOMPILE_LIMIT, OPT_CACHE_DIR, OPT_MISSING, OPT_HEADER, OPT_NAME,
    OPT_WEIGHTS_FILE, OPT_DATA, OPT_EVAL, OPT_OPTIMIZER, OPT_LR, OPT_BATCH_SIZE, OPT_EPOCHS, OPT_STEPS,
    OPT_SEED, OPT_SAVE, OPT_SAVE_EVERY, OPT_RESUME, OPT_LOG_LOSS,
    OPT_PROFILE, OPT_MOMENTUM, OPT_DAMPENING, OPT_NESTEROV, OPT_BETAS, OPT_EPS, OPT_WEIGHT_DECAY,
    OPT_BATCH
};

static const struct option long_opts[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"dot", no_argument, NULL, OPT_DOT},
    {"missing", no_argument, NULL, OPT_MISSING},
    {"weights", required_argument, NULL, 'w'},
    {"input", required_argument, NULL, 'i'},
    {"output", required_argument, NULL, 'o'},
    {"time", no_argument, NULL, OPT_TIME},
    {"grads", required_argument, NULL, OPT_GRADS},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"interpret", no_argument, NULL, OPT_INTERPRET},
    {"eager", no_argument, NULL, OPT_EAGER},
    {"explain", no_argument, NULL, OPT_EXPLAIN},
    {"strict", no_argument, NULL, OPT_STRICT},
    {"recompile-limit", required_argument, NULL, OPT_RECOMPILE_LIMIT},
    {"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
    {"header", required_argument, NULL, OPT_HEADER},
    {"name", required_argument, NULL, OPT_NAME},
    {"weights-file", no_argument, NULL, OPT_WEIGHTS_FILE},
    {"data", required_argument, NULL, OPT_DATA},
    {"eval", required_argument, NULL, OPT_EVAL},
    {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
    {"lr", required_argument, NULL, OPT_LR},
    {"batch-size", required_argument, NULL, OPT_BATCH_SIZE},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"seed", required_argument, NULL, OPT_SEED},
    {"save", required_argument, NULL, OPT_SAVE},
    {"save-every", required_argument, NULL, OPT_SAVE_EVERY},
    {"resume", required_argument, NULL, OPT_RESUME},
    {"log-loss", no_argument, NULL, OPT_LOG_LOSS},
    {"momentum", required_argument, NULL, OPT_MOMENTUM},
    {"dampening", required_argument, NULL, OPT_DAMPENING},
    {"nesterov", no_argument, NULL, OPT_NESTEROV},
    {"betas", required_argument, NULL, OPT_BETAS},
    {"eps", required_argument, NULL, OPT_EPS},
    {"weight-decay", required_argument, NULL, OPT_WEIGHT_DECAY},
    {"profile", optional_argument, NULL, OPT_PROFILE},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

struct tc_opts tc = {.repeat = 1};

_Noreturn void tc_usage_error(const char *fmt, const char *arg)
{
    cli_usage_error("tcompile", "tcompile", fmt, arg);
}

int tc_fail(void)
{
    fprintf(stderr, "tcompile: %s\n", tn_last_error());
    return 2;
}

/* ------------------------------------------------------------ check */

static int cmd_check(const char *path)
{
    if (tc_aoti_is_package(path))
        return tc_aoti_check(path, tc.json);
    struct tn_graph *g = tn_graph_load(path, NULL, NULL);
    if (!g)
        return tc_fail();
    struct tc_problems p = {0};
    int rc = tn_graph_check(g, tc_problems_add_cb, &p);
    if (rc < 0) {
        tc_problems_free(&p);
        tn_graph_free(g);
        return tc_fail();
    }
    tc_problems_print(&p, g, tc.json);
    tc_problems_free(&p);
    tn_graph_free(g);
    if (tn_stdout_flush() < 0)
        return tc_fail();
    return rc ? 1 : 0;
}

/* An option given to a command it means nothing to is a usage error, not
 * silently ignored. */
static void check_options(const char *cmd)
{
    bool check = !strcmp(cmd, "check"), show = !strcmp(cmd, "show"), run = !strcmp(cmd, "run");
    bool comp = !strcmp(cmd, "compile"), cache = !strcmp(cmd, "cache");
    bool build = !strcmp(cmd, "build"), grad = !strcmp(cmd, "grad");
    bool train = !strcmp(cmd, "train");
    /* train: an option of another optimizer's constructor is refused, as
     * PyTorch's constructors refuse an unknown keyword */
    bool sgd = train && tc.optimizer && !strcmp(tc.optimizer, "sgd");
    bool adams = train && tc.optimizer &&
                 (!strcmp(tc.optimizer, "adam") || !strcmp(tc.optimizer, "adamw"));
    if (!check && !show && !run && !comp && !cache && !build && !grad && !train)
        tc_usage_error("unknown command '%s'", cmd);
    const struct {
        bool given, applies;
        const char *name;
    } o[] = {
        {tc.json, check || show || cache, "--json"},
        {tc.dot, show, "--dot"},
        {tc.missing, check, "--missing"},
        {tc.weights != NULL, run || comp || build || train, "--weights"},
        {tc.ninputs > 0, run || comp || build, "--input"},
        {tc.output != NULL, run || comp || build || grad, "--output"},
        {tc.grads != NULL, run, "--grads"},
        {tc.time, run || comp || build, "--time"},
        {tc.repeat > 1, run, "--repeat"},
        {tc.interpret, run, "--interpret"},
        {tc.eager, train, "--eager"},
        {tc.profile != TC_PROFILE_OFF, run, "--profile"},
        {tc.explain, run || comp || build, "--explain"},
        {tc.strict, run || comp, "--strict"},
        {tc.recompile_limit > 0, run, "--recompile-limit"},
        {tc.cache_dir != NULL, run || comp || cache || build || train, "--cache-dir"},
        {tc.header != NULL, build, "--header"},
        {tc.name != NULL, build, "--name"},
        {tc.weights_file, build, "--weights-file"},
        {tc.data != NULL, train, "--data"},
        {tc.eval != NULL, train, "--eval"},
        {tc.optimizer != NULL, train, "--optimizer"},
        {tc.lr > 0, train, "--lr"},
        {tc.batch_size > 0, train, "--batch-size"},
        {tc.epochs > 0, train, "--epochs"},
        {tc.steps > 0, train, "--steps"},
        {tc.given_seed, run || train, "--seed"},
        {tc.save != NULL, train, "--save"},
        {tc.save_every > 0, train, "--save-every"},
        {tc.resume != NULL, train, "--resume"},
        {tc.log_loss, train, "--log-loss"},
        {tc.given_momentum, train && !adams, "--momentum"},
        {tc.given_dampening, train && !adams, "--dampening"},
        {tc.nesterov, train && !adams, "--nesterov"},
        {tc.given_betas, train && !sgd, "--betas"},
        {tc.given_eps, train && !sgd, "--eps"},
        {tc.given_weight_decay, train, "--weight-decay"},
        {tc.batch != NULL, run, "--batch"},
    };
    for (size_t i = 0; i < sizeof o / sizeof o[0]; i++)
        if (o[i].given && !o[i].applies) {
            char msg[128];
            if (train) /* every other option applies to train */
                snprintf(msg, sizeof msg, "%s does not apply to --optimizer %s", o[i].name,
                         tc.optimizer);
            else
                snprintf(msg, sizeof msg, "%s does not apply to '%s'", o[i].name, cmd);
            tc_usage_error("%s", msg);
        }
    if (tc.interpret && (tc.strict || tc.explain))
        tc_usage_error("%s", "--interpret runs no compiler: --strict and --explain do not apply");
    if (tc.grads && tc.explain)
        tc_usage_error("%s", "--grads runs the interpreter: --explain does not apply");
    if (tc.profile && tc.grads)
        tc_usage_error("%s", "--profile times a forward run: --grads does not apply");
    if (tc.nesterov && (tc.momentum <= 0 || tc.dampening != 0))
        tc_usage_error("%s", "--nesterov: Nesterov momentum requires a --momentum above 0 and "
                             "zero --dampening");
    if (tc.json && tc.dot)
        tc_usage_error("%s", "show: --json and --dot are two formats; give one");
}

/* ------------------------------------------------------------ main */

/* A whole number from min up (train's counts), else a usage error. */
static long long count_arg(const char *opt, const char *arg, long long min)
{
    char *end, msg[160];
    long long n = strtoll(arg, &end, 10);
    if (*end || end == arg || n < min) {
        snprintf(msg, sizeof msg, "%s: '%s' is not a whole number from %lld up", opt, arg, min);
        tc_usage_error("%s", msg);
    }
    return n;
}

/* A finite number in [min, max) (max exclusive only when open_max), else a
 * usage error; what the number is for goes in the message. */
static double real_arg(const char *opt, const char *arg, double min, double max, bool open_max,
                       const char *what)
{
    char *end, msg[200];
    double x = strtod(arg, &end);
    if (*end || end == arg || !isfinite(x) || x < min || (open_max ? x >= max : x > max)) {
        snprintf(msg, sizeof msg, "%s: '%s' is not %s", opt, arg, what);
        tc_usage_error("%s", msg);
    }
    return x;
}

/* --betas=B1,B2: Adam's two decay rates, each in [0, 1). */
static void betas_arg(const char *arg)
{
    const char *comma = strchr(arg, ',');
    char first[64];
    if (!comma || (size_t)(comma - arg) >= sizeof first || strchr(comma + 1, ','))
        tc_usage_error("--betas: '%s' is not two numbers B1,B2", arg);
    memcpy(first, arg, (size_t)(comma - arg));
    first[comma - arg] = 0;
    tc.beta1 = real_arg("--betas", first, 0, 1, true, "a number from 0 up to (not with) 1");
    tc.beta2 = real_arg("--betas", comma + 1, 0, 1, true, "a number from 0 up to (not with) 1");
    tc.given_betas = true;
}

/* The options from optind on into tc (GNU getopt_long: the graphs are
 * left from optind on). */
static void parse_options(int argc, char **argv)
{
    int c;
    while ((c = getopt_long(argc, argv, "w:i:o:hV", long_opts, NULL)) != -1) {
        switch (c) {
        case OPT_BATCH: tc.batch = optarg; break;
        case OPT_JSON: tc.json = true; break;
        case OPT_DOT: tc.dot = true; break;
        case OPT_MISSING: tc.missing = true; break;
        case OPT_TIME: tc.time = true; break;
        case OPT_GRADS: tc.grads = optarg; break;
        case OPT_INTERPRET: tc.interpret = true; break;
        case OPT_EAGER: tc.eager = true; break;
        case OPT_EXPLAIN: tc.explain = true; break;
        case OPT_STRICT: tc.strict = true; break;
        case OPT_CACHE_DIR: tc.cache_dir = optarg; break;
        case OPT_HEADER: tc.header = optarg; break;
        case OPT_NAME: tc.name = optarg; break;
        case OPT_WEIGHTS_FILE: tc.weights_file = true; break;
        case OPT_DATA: tc.data = optarg; break;
        case OPT_EVAL: tc.eval = optarg; break;
        case OPT_OPTIMIZER: tc.optimizer = optarg; break;
        case OPT_SAVE: tc.save = optarg; break;
        case OPT_RESUME: tc.resume = optarg; break;
        case OPT_LOG_LOSS: tc.log_loss = true; break;
        case OPT_NESTEROV: tc.nesterov = true; break;
        case OPT_MOMENTUM:
            tc.momentum = real_arg("--momentum", optarg, 0, INFINITY, false,
                                   "a number from 0 up");
            tc.given_momentum = true;
            break;
        case OPT_DAMPENING:
            tc.dampening = real_arg("--dampening", optarg, -INFINITY, INFINITY, false,
                                    "a finite number");
            tc.given_dampening = true;
            break;
        case OPT_BETAS: betas_arg(optarg); break;
        case OPT_EPS:
            tc.eps = real_arg("--eps", optarg, 0, INFINITY, false, "a number from 0 up");
            tc.given_eps = true;
            break;
        case OPT_WEIGHT_DECAY:
            tc.weight_decay = real_arg("--weight-decay", optarg, 0, INFINITY, false,
                                       "a number from 0 up");
            tc.given_weight_decay = true;
            break;
        case OPT_PROFILE:
            if (!optarg)
                tc.profile = TC_PROFILE_AUTO;
            else if (!strcmp(optarg, "table"))
                tc.profile = TC_PROFILE_TABLE;
            else if (!strcmp(optarg, "json"))
                tc.profile = TC_PROFILE_JSON;
            else
                tc_usage_error("--profile: '%s' is not a format (table or json)", optarg);
            break;
        case OPT_LR: {
            char *end;
            tc.lr = strtod(optarg, &end);
            if (*end || !(tc.lr > 0) || !isfinite(tc.lr))
                tc_usage_error("--lr: '%s' is not a positive number", optarg);
            break;
        }
        case OPT_BATCH_SIZE: tc.batch_size = count_arg("--batch-size", optarg, 1); break;
        case OPT_EPOCHS: tc.epochs = count_arg("--epochs", optarg, 1); break;
        case OPT_STEPS: tc.steps = count_arg("--steps", optarg, 1); break;
        case OPT_SAVE_EVERY: tc.save_every = count_arg("--save-every", optarg, 1); break;
        case OPT_SEED:
            tc.seed = count_arg("--seed", optarg, 0);
            tc.given_seed = true;
            break;
        case OPT_RECOMPILE_LIMIT: {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*end || n < 1 || n > 1000)
                tc_usage_error("--recompile-limit: '%s' is not a count from 1 to 1000", optarg);
            tc.recompile_limit = (int)n;
            break;
        }
        case OPT_REPEAT: {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*end || n < 1 || n > 1000000)
                tc_usage_error("--repeat: '%s' is not a count from 1 to 1000000", optarg);
            tc.repeat = (int)n;
            break;
        }
        case 'w': tc.weights = optarg; break;
        case 'i':
            if (tc.ninputs == TC_MAX_INPUTS)
                tc_usage_error("%s", "too many --input options");
            tc.inputs[tc.ninputs++] = optarg;
            break;
        case 'o': tc.output = optarg; break;
        case 'h': fputs(usage_text, stdout); exit(0);
        case 'V': printf("tcompile (tensorkit) %s\n", tn_version()); exit(0);
        default: tc_usage_error("%s", "unknown option");
        }
    }
}

/* ------------------------------------------------------------ run --batch */

/* run --batch FILE: each line of FILE is one run's GRAPH and options,
 * separated by tabs (as on the command line after `tcompile run`, on top of
 * the options given with --batch). Each runs in a child of its own (fork,
 * no exec: libtensor is loaded and set up once), so a run that dies of a
 * signal ends only itself; what it would print goes nowhere (give it
 * --output), its first line of stderr comes back. One line per run on
 * stdout, as each ends: LINE<TAB>exit N or signal N<TAB>MESSAGE. */
static int batch_one(char *line, const struct tc_opts *base, char **msg)
{
    char *argv[2 * TC_MAX_INPUTS + 64];
    int argc = 0;
    argv[argc++] = "tcompile";
    for (char *f = strtok(line, "\t"); f; f = strtok(NULL, "\t")) {
        if (argc == (int)(sizeof argv / sizeof argv[0]) - 1) {
            *msg = strdup("too many arguments on the line");
            return -1;
        }
        argv[argc++] = f;
    }
    argv[argc] = NULL;
    int fd[2];
    if (pipe(fd) < 0) {
        *msg = strdup(strerror(errno));
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        *msg = strdup(strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(fd[1], 2);
        if (null >= 0)
            dup2(null, 1);
        close(fd[0]);
        close(fd[1]);
        tc = *base;
        tc.batch = NULL;
        optind = 0; /* GNU getopt: start again, from argv[1] */
        parse_options(argc, argv);
        check_options("run");
        if (optind != argc - 1)
            tc_usage_error("%s", "run: needs exactly one GRAPH");
        int rc = tc_run(argv[optind]);
        fflush(NULL);
        _exit(rc);
    }
    close(fd[1]);
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap + 1), chunk[4096];
    ssize_t k;
    while ((k = read(fd[0], chunk, sizeof chunk)) != 0) {
        if (k < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        size_t take = (size_t)k < cap - n ? (size_t)k : cap - n; /* the rest is read, not kept */
        if (buf)
            memcpy(buf + n, chunk, take);
        n += take;
    }
    close(fd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (buf) {
        buf[n] = 0;
        char *s = buf;
        while (*s == '\n' || *s == ' ' || *s == '\r')
            s++;
        s[strcspn(s, "\n\r")] = 0;
        for (char *t = s; *t; t++)
            if (*t == '\t')
                *t = ' ';
        *msg = strdup(s);
        free(buf);
    }
    return status;
}

static int tc_batch(const char *path)
{
    /* read whole before the first fork: a child's exit must not move a
     * shared file offset under a stream still being read */
    FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!f) {
        fprintf(stderr, "tcompile: --batch: %s: %s\n", path, strerror(errno));
        return 2;
    }
    char *text = NULL;
    size_t size = 0;
    FILE *mem = open_memstream(&text, &size);
    char chunk[65536];
    size_t k;
    while (mem && (k = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, k, mem);
    int err = ferror(f);
    if (f != stdin)
        fclose(f);
    if (!mem || fclose(mem) != 0 || err) {
        fprintf(stderr, "tcompile: --batch: %s: %s\n", path,
                err ? "read error" : "out of memory");
        free(text);
        return 2;
    }
    const struct tc_opts base = tc;
    long no = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        no++;
        line[strcspn(line, "\r")] = 0;
        if (!line[0])
            continue;
        char *msg = NULL;
        int status = batch_one(line, &base, &msg);
        if (status < 0)
            printf("%ld\terror\t%s\n", no, msg ? msg : "");
        else if (WIFSIGNALED(status))
            printf("%ld\tsignal %d\t%s\n", no, WTERMSIG(status), msg ? msg : "");
        else
            printf("%ld\texit %d\t%s\n", no, WEXITSTATUS(status), msg ? msg : "");
        free(msg);
        fflush(stdout);
    }
    free(text);
    return tn_stdout_flush() < 0 ? tc_fail() : 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (argc > 1 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))) {
        printf("tcompile (tensorkit) %s\n", tn_version());
        return 0;
    }
    if (argc < 2)
        tc_usage_error("%s", "missing command");
    const char *cmd = argv[1];
    optind = 2;
    parse_options(argc, argv);
    check_options(cmd);
    if (tc.batch) {
        if (optind != argc)
            tc_usage_error("%s", "--batch: the graphs are on FILE's lines; give no GRAPH");
        return tc_batch(tc.batch);
    }
    if (!strcmp(cmd, "check") && optind < argc) {
        if (tc.missing)
            return tc_missing(argv + optind, argc - optind);
        int worst = 0;
        for (int i = optind; i < argc; i++) {
            int rc = cmd_check(argv[i]);
            worst = rc > worst ? rc : worst;
        }
        return worst;
    }
    if (optind == argc && !strcmp(cmd, "check"))
        tc_usage_error("%s", "check: needs a GRAPH");
    if (optind != argc - 1)
        tc_usage_error(!strcmp(cmd, "cache") ? "%s: needs one of ls, stats or clear"
                                             : "%s: needs exactly one GRAPH",
                       cmd);
    const char *graph = argv[optind];
    if (!strcmp(cmd, "show"))
        return tc_show(graph);
    if (!strcmp(cmd, "run"))
        return tc_run(graph);
    if (!strcmp(cmd, "compile"))
        return tc_compile(graph);
    if (!strcmp(cmd, "build"))
        return tc_build(graph);
    if (!strcmp(cmd, "cache"))
        return tc_cache(graph);
    if (!strcmp(cmd, "grad"))
        return tc_grad(graph);
    if (!strcmp(cmd, "train"))
        return tc_train(graph);
    tc_usage_error("unknown command '%s'", cmd);
}
