/*
 * bin/ttest/main.c: ttest's command line: options, selection, then the
 * plan, the run and the reports (each in its own file).
 */
#include "ttest.h"
#include "../cli.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <limits.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tensor/core.h>

static const char usage_text[] =
    "Usage: ttest [OPTION]... PATH...\n"
    "Run tests (Bats files, pytest files, executables that print TAP, commands\n"
    "listed in JSON manifests, or folders holding these) in a pool of processes,\n"
    "each test in its own process group with a timeout, and report per case.\n"
    "\n"
    "Scheduling:\n"
    "  -j, --jobs=N            run N tests at once (default: the number of cores)\n"
    "      --shard=I/N         run only shard I of N (1-based); default from\n"
    "                          TEST_SHARD_INDEX (0-based) and TEST_TOTAL_SHARDS\n"
    "      --durations=FILE    read expected times from FILE and update it\n"
    "      --serial=GLOB       run tests whose name matches GLOB alone\n"
    "      --serial-first      run the serial tests before the pool, not after\n"
    "      --failed-first      start the tests that failed last time first\n"
    "      --shuffle[=SEED]    run in a random order, from a printed seed\n"
    "      --timeout=SECONDS   time limit per test (default 900; 0: none)\n"
    "      --grace=SECONDS     wait after SIGTERM before SIGKILL (default 5)\n"
    "      --retries=N         run a failed test again up to N times (default 0)\n"
    "      --repeat=N          run every test N times\n"
    "  -x, --exitfirst         start no more tests after the first failure\n"
    "      --maxfail=N         start no more tests after N failed tests\n"
    "\n"
    "Selection:\n"
    "  -f, --filter=GLOB       run only tests whose name matches GLOB\n"
    "  -e, --exclude=GLOB      leave out tests whose name matches GLOB\n"
    "  -k EXPR                 run only tests whose name matches EXPR: words\n"
    "                          (substrings, case ignored), and, or, not, ( )\n"
    "  -l, --label=LABEL       run only tests with LABEL (from a manifest)\n"
    "      --lf, --last-failed  run only the tests that failed last time\n"
    "  -r, --recursive         search folders' subfolders too\n"
    "      --allow-no-tests    exit 0 when no test is selected (default: exit 5)\n"
    "      --strip-prefix=DIR  name tests by their path without DIR/\n"
    "      --bats=PROGRAM      run Bats files with PROGRAM (default: $BATS or bats)\n"
    "      --python=PROGRAM    run pytest files with PROGRAM -m pytest\n"
    "                          (default: python3)\n"
    "  -m MARKEXPR             pass -m MARKEXPR to pytest (select cases by marker)\n"
    "      --list              print the plan (shard, expected seconds, name); run nothing\n"
    "\n"
    "Output:\n"
    "  -v, --verbose           print every test's output, not only failures'\n"
    "  -q, --quiet             print only failures and the closing line\n"
    "      --progress          show the live progress line even when not on a terminal\n"
    "      --no-progress       never show the live progress line\n"
    "      --junit=FILE        write JUnit XML to FILE\n"
    "      --tap[=FILE]        write TAP 14 to FILE (default: stdout)\n"
    "      --json[=FILE]       write one JSON object per test and line (default: stdout)\n"
    "  -h, --help              print this help and exit\n"
    "  -V, --version           print the version and exit\n"
    "\n"
    "Exit status: 0 all passed (flaky tests count as passed), 1 a test failed or\n"
    "timed out, 2 a usage error or a test that could not be started, 5 no tests\n"
    "selected.\n"
    "See ttest(1) for more.\n";

enum {
    OPT_SHARD = 256,
    OPT_DURATIONS,
    OPT_SERIAL,
    OPT_SERIAL_FIRST,
    OPT_FAILED_FIRST,
    OPT_TIMEOUT,
    OPT_GRACE,
    OPT_RETRIES,
    OPT_REPEAT,
    OPT_STRIP,
    OPT_BATS,
    OPT_LIST,
    OPT_PROGRESS,
    OPT_NO_PROGRESS,
    OPT_JUNIT,
    OPT_TAP,
    OPT_JSON,
    OPT_MAXFAIL,
    OPT_LAST_FAILED,
    OPT_SHUFFLE,
    OPT_ALLOW_NO_TESTS,
    OPT_PYTHON,
};

static const struct option longopts[] = {
    {"jobs", required_argument, NULL, 'j'},
    {"shard", required_argument, NULL, OPT_SHARD},
    {"durations", required_argument, NULL, OPT_DURATIONS},
    {"serial", required_argument, NULL, OPT_SERIAL},
    {"serial-first", no_argument, NULL, OPT_SERIAL_FIRST},
    {"failed-first", no_argument, NULL, OPT_FAILED_FIRST},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"grace", required_argument, NULL, OPT_GRACE},
    {"retries", required_argument, NULL, OPT_RETRIES},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"exitfirst", no_argument, NULL, 'x'},
    {"maxfail", required_argument, NULL, OPT_MAXFAIL},
    {"last-failed", no_argument, NULL, OPT_LAST_FAILED},
    {"lf", no_argument, NULL, OPT_LAST_FAILED},
    {"shuffle", optional_argument, NULL, OPT_SHUFFLE},
    {"recursive", no_argument, NULL, 'r'},
    {"allow-no-tests", no_argument, NULL, OPT_ALLOW_NO_TESTS},
    {"python", required_argument, NULL, OPT_PYTHON},
    {"filter", required_argument, NULL, 'f'},
    {"exclude", required_argument, NULL, 'e'},
    {"label", required_argument, NULL, 'l'},
    {"strip-prefix", required_argument, NULL, OPT_STRIP},
    {"bats", required_argument, NULL, OPT_BATS},
    {"list", no_argument, NULL, OPT_LIST},
    {"verbose", no_argument, NULL, 'v'},
    {"quiet", no_argument, NULL, 'q'},
    {"progress", no_argument, NULL, OPT_PROGRESS},
    {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
    {"junit", required_argument, NULL, OPT_JUNIT},
    {"tap", optional_argument, NULL, OPT_TAP},
    {"json", optional_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

_Noreturn static void usage_error(const char *fmt, const char *arg)
{
    cli_usage_error("ttest", "ttest", fmt, arg);
}

static long parse_long(const char *opt, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        char *m = tt_xasprintf("%s: '%%s' is not a whole number from %ld to %ld", opt, min, max);
        usage_error(m, s);
    }
    return v;
}

static double parse_seconds(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0) || v > 1e7) {
        char *m = tt_xasprintf("%s: '%%s' is not a number of seconds", opt);
        usage_error(m, s);
    }
    return v;
}

/* "I/N", 1-based. */
static void parse_shard(const char *s, struct tt_opts *o)
{
    char *end;
    long i = strtol(s, &end, 10), n = 0;
    if (end != s && *end == '/') {
        const char *p = end + 1;
        n = strtol(p, &end, 10);
        if (end == p)
            n = 0;
    }
    if (*end || n < 1 || n > 100000 || i < 1 || i > n)
        usage_error("--shard: '%s' is not I/N with 1 <= I <= N", s);
    o->shard = (int)i;
    o->shards = (int)n;
}

static void push(char ***v, size_t *n, const char *s)
{
    *v = tt_xrealloc(*v, (*n + 1) * sizeof(**v));
    (*v)[(*n)++] = (char *)s;
}

static bool any_match(char **globs, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (fnmatch(globs[i], name, 0) == 0)
            return true;
    return false;
}

static unsigned long long parse_seed(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-')
        usage_error("--shuffle: '%s' is not a whole number (a seed)", s);
    return v;
}

/* A seed short enough to type back. */
static unsigned long long random_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long z = (unsigned long long)ts.tv_nsec ^ ((unsigned long long)ts.tv_sec << 20) ^
                           ((unsigned long long)getpid() << 40);
    z = (z ^ (z >> 31)) * 0x94D049BB133111EBull;
    return (z ^ (z >> 29)) % 1000000000ull;
}

/* Opens an output named on the command line before anything runs, so an
 * unwritable path is refused up front rather than after a long run. */
static struct tn_out *open_output(const char *opt, const char *path)
{
    struct tn_out *out = tn_out_open(path);
    if (!out) {
        fprintf(stderr, "ttest: %s: %s\n", opt, tn_last_error());
        exit(2);
    }
    return out;
}

static bool has_label(const struct tt_test *t, char **labels, size_t n)
{
    for (char **l = t->labels; l && *l; l++)
        for (size_t i = 0; i < n; i++)
            if (strcmp(*l, labels[i]) == 0)
                return true;
    return false;
}

/* Bazel's sharding protocol: the shard comes from the environment, 0-based,
 * and touching TEST_SHARD_STATUS_FILE says the runner understood it. */
static void shard_from_env(struct tt_opts *o)
{
    const char *total = getenv("TEST_TOTAL_SHARDS"), *index = getenv("TEST_SHARD_INDEX");
    if (!total || !*total)
        return;
    long n = parse_long("TEST_TOTAL_SHARDS", total, 1, 100000);
    long i = parse_long("TEST_SHARD_INDEX", index ? index : "", 0, n - 1);
    o->shards = (int)n;
    o->shard = (int)i + 1;
    const char *status = getenv("TEST_SHARD_STATUS_FILE");
    if (status && *status) {
        int fd = open(status, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0)
            close(fd);
    }
}

/* What main builds lives until exit; kept here so leak checkers (ttest runs
 * under ASan in CI) see it as reachable rather than leaked. */
static struct tt_opts o;
static struct tt_test *found, *tests;
static struct tt_test **mine;
static struct tt_durations d;

int main(int argc, char **argv)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    o.jobs = cores > 0 ? (int)cores : 1;
    o.shard = o.shards = 1;
    o.timeout = 900;
    o.grace = 5;
    o.retries = 0;
    o.repeat = 1;
    const char *env_bats = getenv("BATS");
    o.bats = env_bats && *env_bats ? env_bats : "bats";
    o.python = "python3";
    int progress = -1;
    bool shard_given = false;

    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "j:xf:e:k:l:m:rvqhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'j': o.jobs = (int)parse_long("--jobs", optarg, 1, 4096); break;
        case OPT_SHARD: parse_shard(optarg, &o); shard_given = true; break;
        case OPT_DURATIONS: o.durations = optarg; break;
        case OPT_SERIAL: push(&o.serial_globs, &o.nserial_globs, optarg); break;
        case OPT_SERIAL_FIRST: o.serial_first = true; break;
        case OPT_FAILED_FIRST: o.failed_first = true; break;
        case OPT_TIMEOUT: o.timeout = parse_seconds("--timeout", optarg); break;
        case OPT_GRACE: o.grace = parse_seconds("--grace", optarg); break;
        case OPT_RETRIES: o.retries = (int)parse_long("--retries", optarg, 0, 100); break;
        case OPT_REPEAT: o.repeat = (int)parse_long("--repeat", optarg, 1, 100000); break;
        case 'x': o.maxfail = 1; break;
        case OPT_MAXFAIL: o.maxfail = (int)parse_long("--maxfail", optarg, 1, INT_MAX); break;
        case OPT_LAST_FAILED: o.last_failed = true; break;
        case OPT_SHUFFLE:
            o.shuffle = true;
            o.seed = optarg ? parse_seed(optarg) : random_seed();
            break;
        case 'r': o.recurse = true; break;
        case OPT_ALLOW_NO_TESTS: o.allow_no_tests = true; break;
        case OPT_PYTHON: o.python = optarg; break;
        case 'k':
            if (tt_kexpr_check(optarg))
                usage_error(tt_xasprintf("-k: '%%s': %s", tt_kexpr_check(optarg)), optarg);
            o.kexpr = optarg;
            break;
        case 'm': o.marks = optarg; break;
        case 'f': push(&o.filters, &o.nfilters, optarg); break;
        case 'e': push(&o.excludes, &o.nexcludes, optarg); break;
        case 'l': push(&o.labels, &o.nlabels, optarg); break;
        case OPT_STRIP: push(&o.strip, &o.nstrip, optarg); break;
        case OPT_BATS: o.bats = optarg; break;
        case OPT_LIST: o.list = true; break;
        case 'v': o.verbose = true; break;
        case 'q': o.quiet = true; break;
        case OPT_PROGRESS: progress = 1; break;
        case OPT_NO_PROGRESS: progress = 0; break;
        case OPT_JUNIT: o.junit = optarg; break;
        case OPT_TAP: o.tap = optarg ? optarg : "-"; break;
        case OPT_JSON: o.json = optarg ? optarg : "-"; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case 'V':
            printf("ttest (tensorkit) %s\n", tn_version());
            return 0;
        default:
            /* getopt's own message would name libtool's wrapper in the build tree. */
            if (optopt && optopt < 256)
                fprintf(stderr, "ttest: option '-%c' is unknown or lacks its argument\n", optopt);
            else
                fprintf(stderr, "ttest: option '%s' is unknown or lacks its argument\n", argv[optind - 1]);
            fputs("Try 'ttest --help' for more information.\n", stderr);
            return 2;
        }
    }
    if (optind >= argc)
        usage_error("%s", "no tests given: name Bats files, test programs, manifests or folders");
    if (!shard_given)
        shard_from_env(&o);
    if (o.verbose && o.quiet)
        usage_error("%s", "--verbose and --quiet exclude each other");
    int outs_on_stdout = tt_names_stdout(o.tap) + tt_names_stdout(o.json) + tt_names_stdout(o.junit);
    if (outs_on_stdout > 1)
        usage_error("%s", "only one of --tap, --json and --junit can write to standard output");
    /* --list runs nothing: a report of a run would be silently not written. */
    if (o.list && (o.junit || o.tap))
        usage_error("%s", o.junit ? "--list runs nothing: --junit has nothing to write"
                                  : "--list runs nothing: --tap has nothing to write (--json lists the plan)");
    const char *ci = getenv("CI");
    o.progress = progress >= 0 ? progress : (isatty(2) && !o.quiet && !o.list && !(ci && *ci));

    if (o.last_failed && !o.durations)
        usage_error("%s", "--last-failed needs --durations FILE (where the last results are)");
    if (o.durations && tt_durations_read(o.durations, &d) < 0)
        return 2;

    /* Discover and select. */
    size_t nfound = 0;
    for (int i = optind; i < argc; i++)
        if (tt_discover(argv[i], &o, &found, &nfound) < 0)
            return 2;
    size_t n = 0, nfailed_last = 0;
    for (size_t i = 0; i < nfound; i++) {
        struct tt_test *t = &found[i];
        if (o.nfilters && !any_match(o.filters, o.nfilters, t->name))
            continue;
        if (any_match(o.excludes, o.nexcludes, t->name))
            continue;
        if (o.nlabels && !has_label(t, o.labels, o.nlabels))
            continue;
        if (o.kexpr && !tt_kexpr_match(o.kexpr, t->name))
            continue;
        if (any_match(o.serial_globs, o.nserial_globs, t->name))
            t->serial = true;
        nfailed_last += tt_durations_failed(&d, t->name);
        found[n++] = *t;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t k = i + 1; k < n; k++)
            if (strcmp(found[i].name, found[k].name) == 0)
                usage_error("two tests are named '%s': each name must be unique", found[i].name);
    /* pytest's --lf: only last time's failures; all when none failed. */
    if (o.last_failed && nfailed_last) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (tt_durations_failed(&d, found[i].name))
                found[k++] = found[i];
        n = k;
    } else if (o.last_failed && n) {
        tt_warn("--last-failed: no test failed last time (%s); running all %zu selected", o.durations, n);
    }
    if (n == 0 && !o.allow_no_tests) {
        tt_warn("no tests selected (of %zu found); --allow-no-tests makes that a success", nfound);
        return 5;
    }
    if (!o.list && tt_runners_check(found, n, &o) < 0)
        return 2;
    if (o.marks) {
        size_t k = 0;
        while (k < n && found[k].kind != TT_KIND_PYTEST)
            k++;
        if (k == n && n)
            usage_error("-m '%s': no pytest file is selected (-m selects the cases of pytest files)", o.marks);
    }

    /* --repeat: every run is a test of its own in the plan. */
    tests = tt_xmalloc((n * (size_t)o.repeat + 1) * sizeof(*tests));
    size_t ntests = 0;
    for (size_t i = 0; i < n; i++)
        for (int k = 1; k <= o.repeat; k++) {
            tests[ntests] = found[i];
            tests[ntests].repeat_index = k;
            tests[ntests].repeat_total = o.repeat;
            tests[ntests].final = TT_NOTRUN;
            ntests++;
        }

    tt_plan(tests, ntests, &d, &o);
    if (o.shuffle)
        tt_shuffle(tests, ntests, &o);
    if (o.list)
        return tt_list(tests, ntests, &o);

    mine = tt_xmalloc((ntests + 1) * sizeof(*mine));
    size_t nmine = 0;
    for (size_t i = 0; i < ntests; i++)
        if (tests[i].shard == o.shard)
            mine[nmine++] = &tests[i];
    double t0 = tt_now();
    /* --tap and --json files first: an unwritable one ends ttest there. */
    struct tt_report *r = tt_report_open(&o, nmine);
    if (o.junit)
        o.junit_out = open_output("--junit", o.junit);
    if (o.durations && nmine)
        o.durations_out = open_output("--durations", o.durations);
    int start_errors = tt_run(mine, nmine, &o, r);
    int status = 0;
    if (o.durations_out && tt_durations_update(o.durations_out, &d, tests, ntests) < 0)
        status = 2;
    int rstatus = tt_report_close(r, mine, nmine, tt_now() - t0, start_errors);
    return rstatus > status ? rstatus : status;
}
