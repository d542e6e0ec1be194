/*
 * bin/tckpt/main.c: tckpt's command line: ls, show, get, verify, convert
 * and diff over torch checkpoints, safetensors, .npz and .npy files, all
 * through libtensor's io module (the format is found from the content);
 * each subcommand lives in its own file, scan in scan.c.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "tckpt.h"

static const char usage_text[] =
    "Usage: tckpt COMMAND [OPTION]... FILE...\n"
    "Inspect, extract, check, convert and compare checkpoints: PyTorch's zip\n"
    "format (.pt/.pth/.bin, also pre-1.6 files), safetensors, .npz and .npy, found\n"
    "from the content, and Hugging Face sharded checkpoints (*.index.json).  '-'\n"
    "is standard input or output.\n"
    "Nothing in a file is ever run: checkpoints load as torch.load(weights_only=True).\n"
    "\n"
    "Commands:\n"
    "  ls FILE...               one row per tensor: name, dtype, shape, bytes,\n"
    "                           storage and offset; totals at the end\n"
    "  show FILE [KEY]          the nested structure as a tree, or one value (a\n"
    "                           tensor as PyTorch prints it, with statistics)\n"
    "  get FILE KEY [-o OUT]    write one tensor as .npy, or one value as text, to\n"
    "                           OUT or standard output\n"
    "  verify FILE...           full structural check; lists each problem\n"
    "  convert IN OUT           between torch zip, safetensors, npz and DCP folders\n"
    "  diff A B                 compare every value: names, dtypes, shapes, elements\n"
    "  scan [-r] FILE...|-      audit files for globals outside weights_only's\n"
    "                           allowlist and anomalies (see tckpt scan --help)\n"
    "\n"
    "Options:\n"
    "      --json               ls, show, diff: print JSON (ls: one object a file)\n"
    "  -o, --output=FILE        get: where to write (default: standard output)\n"
    "      --to=FORMAT          convert: torch, safetensors, npz or dcp (default:\n"
    "                           from OUT's extension; dcp for a DCP folder or a\n"
    "                           name ending in /)\n"
    "      --shards=N           convert: write a DCP folder as N ranks would\n"
    "                           (tensors split by rows; default 1)\n"
    "      --dtype=DTYPE        convert: cast the model's floating tensors to bf16,\n"
    "                           f16, f32 or f64 (not an optimizer's state)\n"
    "      --keys=PATTERN       convert: only the keys matching the glob PATTERN\n"
    "      --layout=LAYOUT      convert: torch2 (default) or torch1 (PyTorch 1.13's)\n"
    "      --torch1             load with PyTorch 1.13's weights_only allowlist\n"
    "      --atol=X             diff: absolute tolerance (default 0)\n"
    "      --rtol=X             diff: relative tolerance (default 0)\n"
    "      --only-tensors       diff: compare the tensors only\n"
    "      --prefix=PREFIX      diff: compare the keys under PREFIX (stripped) of a\n"
    "                           file that has them with the other's keys\n"
    "  -h, --help               print this help and exit\n"
    "  -V, --version            print the version and exit\n"
    "\n"
    "Exit status: 0 success; 1 verify found problems or diff found differences;\n"
    "2 a usage error or an unreadable, corrupt or unsafe input.\n"
    "See tckpt(1) and tensorkit-checkpoint(5) for more.\n";

/* The option's bit in tckpt.h's enum is its getopt code. */
static const struct option long_opts[] = {
    {"json", no_argument, NULL, O_JSON},
    {"output", required_argument, NULL, O_OUTPUT},
    {"to", required_argument, NULL, O_TO},
    {"dtype", required_argument, NULL, O_DTYPE},
    {"layout", required_argument, NULL, O_LAYOUT},
    {"torch1", no_argument, NULL, O_TORCH1},
    {"atol", required_argument, NULL, O_ATOL},
    {"rtol", required_argument, NULL, O_RTOL},
    {"only-tensors", no_argument, NULL, O_ONLY_TENSORS},
    {"prefix", required_argument, NULL, O_PREFIX},
    {"keys", required_argument, NULL, O_KEYS},
    {"shards", required_argument, NULL, O_SHARDS},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

struct tckpt_opts opt = {.dtype = TN_DTYPE_UNSET};

static bool is_option_bit(int c) { return c > 0 && c <= O_KEYS && !(c & (c - 1)); }

/* An option given to a subcommand it does not apply to is a usage error,
 * never silently ignored. */
static void refuse_options(const char *cmd, unsigned bad)
{
    for (const struct option *o = long_opts; bad && o->name; o++)
        if (is_option_bit(o->val) && (bad & (unsigned)o->val)) {
            char what[96];
            snprintf(what, sizeof what, "%s: --%s does not apply to %s", cmd, o->name, cmd);
            usage_error("%s", what);
        }
}

static double parse_double(const char *s, const char *what)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0))
        usage_error(what, s);
    return v;
}


/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    int c;
    tn_out_remove_on_signals(); /* Ctrl-C leaves no temporary behind */
    /* scan has options of its own: the first word that is no option names it. */
    for (int i = 1; i < argc; i++)
        if (argv[i][0] != '-' || !strcmp(argv[i], "-")) {
            if (!strcmp(argv[i], "scan"))
                return tckpt_scan_main(argc, argv);
            break;
        }
    /* GNU getopt permutes: options may come before or after the command. */
    while ((c = getopt_long(argc, argv, "o:hV", long_opts, NULL)) != -1) {
        if (c == 'o')
            c = O_OUTPUT;
        switch (c) {
        case O_JSON: opt.json = true; break;
        case O_OUTPUT: opt.output = optarg; break;
        case O_TO: opt.to = optarg; break;
        case O_DTYPE:
            opt.dtype = tn_dtype_from_name(optarg);
            if (opt.dtype != TN_BFLOAT16 && opt.dtype != TN_FLOAT16 && opt.dtype != TN_FLOAT32 &&
                opt.dtype != TN_FLOAT64)
                usage_error("--dtype: '%s' is not bf16, f16, f32 or f64", optarg);
            break;
        case O_LAYOUT:
            if (!strcmp(optarg, "torch1"))
                opt.layout = TN_CKPT_TORCH1;
            else if (!strcmp(optarg, "torch2"))
                opt.layout = TN_CKPT_TORCH2;
            else
                usage_error("--layout: '%s' is not torch1 or torch2", optarg);
            break;
        case O_TORCH1: opt.torch1 = true; break;
        case O_SHARDS: {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (end == optarg || *end || n < 1 || n > 4096)
                usage_error("--shards: '%s' is not a number of ranks from 1 to 4096", optarg);
            opt.shards = (int)n;
            break;
        }
        case O_ATOL: opt.atol = parse_double(optarg, "--atol: '%s' is not a non-negative number"); break;
        case O_RTOL: opt.rtol = parse_double(optarg, "--rtol: '%s' is not a non-negative number"); break;
        case O_ONLY_TENSORS: opt.only_tensors = true; break;
        case O_PREFIX: opt.prefix = optarg; break;
        case O_KEYS: opt.keys = optarg; break;
        case 'h':
            fputs(usage_text, stdout);
            if (tn_stdout_flush() < 0)
                die_input();
            return 0;
        case 'V':
            printf("tckpt (tensorkit) %s\n", tn_version());
            if (tn_stdout_flush() < 0)
                die_input();
            return 0;
        default:
            fputs("Try 'tckpt --help' for more information.\n", stderr);
            return 2;
        }
        if (is_option_bit(c))
            opt.given |= (unsigned)c;
    }
    if (optind >= argc)
        usage_error("%s", "missing command (ls, show, get, verify, convert, diff or scan)");
    const char *cmd = argv[optind];
    char **args = argv + optind + 1;
    int nargs = argc - optind - 1;
    static const struct { const char *name; int min, max; unsigned opts; } cmds[] = {
        {"ls", 1, INT_MAX, O_JSON | O_TORCH1},
        {"show", 1, 2, O_JSON | O_TORCH1},
        {"get", 2, 2, O_OUTPUT | O_TORCH1},
        {"verify", 1, INT_MAX, O_TORCH1},
        {"convert", 2, 2, O_TO | O_DTYPE | O_LAYOUT | O_TORCH1 | O_KEYS | O_SHARDS},
        {"diff", 2, 2, O_JSON | O_TORCH1 | O_ATOL | O_RTOL | O_ONLY_TENSORS | O_PREFIX},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (strcmp(cmd, cmds[i].name))
            continue;
        if (nargs < cmds[i].min || nargs > cmds[i].max)
            usage_error("%s: wrong number of arguments", cmd);
        refuse_options(cmd, opt.given & ~cmds[i].opts);
        int rc;
        switch (i) {
        case 0: rc = cmd_ls(args, nargs); break;
        case 1: rc = cmd_show(args[0], nargs > 1 ? args[1] : NULL); break;
        case 2: rc = cmd_get(args[0], args[1]); break;
        case 3: rc = cmd_verify(args, nargs); break;
        case 4: rc = cmd_convert(args[0], args[1]); break;
        default: rc = cmd_diff(args[0], args[1]); break;
        }
        /* a listing that could not be written is no result (> /dev/full) */
        if (tn_stdout_flush() < 0)
            die_input();
        return rc;
    }
    usage_error("unknown command '%s'", cmd);
}
