/*
 * bin/ttest/ttest.h: what the parts of ttest share: the test, one attempt's
 * result, the TAP parser's state, the options, and the small helpers.
 *
 * A "test" is the unit ttest schedules: a Bats file, an executable that
 * prints TAP, or a command from a manifest.  Its TAP stream gives the cases
 * it is made of; the closing counts are per case.
 */
#ifndef TTEST_H
#define TTEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

struct tn_out;

/* ----------------------------------------------------------------- helpers */

/* A growable byte buffer; `data` is always NUL-terminated. */
struct tt_buf {
    char *data;
    size_t len, cap;
};
void tt_buf_add(struct tt_buf *b, const char *s, size_t n);
void tt_buf_addf(struct tt_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tt_buf_free(struct tt_buf *b);

/* Allocation that cannot fail: ttest dies with a message when memory runs out. */
void *tt_xmalloc(size_t n);
void *tt_xrealloc(void *p, size_t n);
char *tt_xstrdup(const char *s);
char *tt_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "ttest: message" to stderr and exits with `status`. */
_Noreturn void tt_die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "ttest: message" to stderr. */
void tt_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Seconds on the monotonic clock. */
double tt_now(void);

/* Removes a folder tree; quiet about what is already gone. */
void tt_rmtree(const char *path);

/* ----------------------------------------------------------------- TAP */

enum tt_case_result { TT_CASE_PASS, TT_CASE_FAIL, TT_CASE_SKIP, TT_CASE_TODO };

struct tt_case {
    long id;
    char *name;      /* the description, unescaped ("" when none) */
    enum tt_case_result result;
    char *reason;    /* SKIP/TODO reason or NULL */
    char *diag;      /* comment and YAML lines after a failing point, or NULL */
};

/* The TAP reader's state for one test process: fed line by line. */
struct tt_tap {
    int version;           /* 12 when no version line */
    long plan;             /* -1 until a plan is read */
    char *plan_reason;     /* "1..0 # reason" */
    bool plan_at_end;      /* the plan followed test points */
    long next_id;          /* the id a point without one gets */
    struct tt_case *cases;
    size_t ncases, capcases;
    char *bail;            /* "Bail out!" reason, once bailed */
    struct tt_buf errors;  /* protocol errors, one per line */
    bool in_yaml;          /* inside a "  ---" ... "  ..." block */
    struct tt_buf partial; /* a line not yet ended by a newline */
};
void tt_tap_init(struct tt_tap *t);
/* Feeds bytes of the stream as they arrive; whole lines are parsed. */
void tt_tap_feed(struct tt_tap *t, const char *data, size_t n);
/* Parses a last unterminated line and checks the plan. */
void tt_tap_finish(struct tt_tap *t);
void tt_tap_free(struct tt_tap *t);
/* Parses one line (without its newline). Exposed for tests of odd output. */
void tt_tap_line(struct tt_tap *t, const char *line);

/* ----------------------------------------------------------------- tests */

enum tt_status {
    TT_PASS,    /* exit 0 and every case ok */
    TT_FAIL,    /* a case failed, bad exit, bad plan, signal, bail out */
    TT_SKIP,    /* exit 77 or "1..0" */
    TT_TIMEOUT, /* killed at its deadline */
    TT_ERROR,   /* could not be started */
    TT_FLAKY,   /* final status only: failed, then passed on a retry */
    TT_NOTRUN   /* final status only: never ran (-x stopped the run) */
};
const char *tt_status_name(enum tt_status s);

/* One run of a test process. */
struct tt_attempt {
    enum tt_status status;
    double seconds;
    int exit_code;   /* -1 when killed by a signal */
    int signal;      /* the signal that ended it, or 0 */
    char *message;   /* why it failed, one line, or NULL */
    struct tt_buf log; /* stdout and stderr as they arrived */
    struct tt_tap tap;
};

/* What a test is: how it is run and what its output means. */
enum tt_kind {
    TT_KIND_PROGRAM, /* an executable that prints TAP, or a manifest's command */
    TT_KIND_BATS,    /* a .bats file, run by Bats */
    TT_KIND_PYTEST   /* a test_*.py or *_test.py file, run by pytest */
};

struct tt_test {
    char *name;      /* the key in the durations file and in reports */
    enum tt_kind kind;
    char **argv;     /* NULL-terminated */
    char *cwd;       /* NULL: ttest's own */
    char **env;      /* "NAME=VALUE", NULL-terminated, or NULL */
    double timeout;  /* seconds; 0: the default */
    bool serial;
    char **labels;   /* NULL-terminated, or NULL */
    int repeat_index, repeat_total; /* run k of n (--repeat) */

    /* The plan. */
    double expected; /* seconds */
    bool known;      /* expected comes from the durations file */
    bool failed_last;
    int shard;       /* 1-based */

    /* The run. */
    struct tt_attempt *attempts;
    int nattempts;
    enum tt_status final;
};

/* ----------------------------------------------------------------- options */

struct tt_opts {
    int jobs;
    int shard, shards;         /* 1-based shard of shards */
    double timeout, grace;
    int retries, repeat;
    int maxfail;               /* start no test after this many failed; 0: no limit */
    bool failed_first, serial_first, last_failed, allow_no_tests, recurse;
    bool shuffle;
    unsigned long long seed;   /* of --shuffle */
    bool list, verbose, quiet, progress;
    char **filters, **excludes, **labels, **serial_globs, **strip;
    size_t nfilters, nexcludes, nlabels, nserial_globs, nstrip;
    const char *durations;
    const char *junit, *tap, *json; /* "-" is stdout */
    const char *bats, *python;
    const char *kexpr;         /* -k: over test names */
    const char *marks;         /* -m: passed to pytest */
    struct tn_out *junit_out, *durations_out; /* opened before the run */
};

/* ----------------------------------------------------------------- parts */

/* discover.c: appends the tests found under `path` (a Bats file, an
 * executable, a manifest .json, or a folder searched for these).  Returns 0,
 * or -1 after printing why. */
int tt_discover(const char *path, const struct tt_opts *o, struct tt_test **tests, size_t *n);

/* manifest.c: appends the tests a JSON manifest lists. Returns 0 or -1
 * after printing why. */
int tt_manifest_load(const char *path, struct tt_test **tests, size_t *n);

/* select.c: -k expressions (pytest's): words matched as case-insensitive
 * substrings of the name, with and, or, not and parentheses.  tt_kexpr_check
 * returns NULL or why EXPR is malformed (a static string). */
const char *tt_kexpr_check(const char *expr);
bool tt_kexpr_match(const char *expr, const char *name);

/* pytest.c: the command that runs a pytest file and prints its JUnit XML
 * back as TAP, one point per case; and the check, before the run, that the
 * programs the selected tests need (Bats, pytest) are there.  Returns 0, or
 * -1 after printing why. */
char **tt_pytest_argv(const char *path, const struct tt_opts *o);
int tt_runners_check(const struct tt_test *tests, size_t n, const struct tt_opts *o);

/* plan.c: durations file and the plan. */
struct tt_record {
    char *name;
    long runs;
    double mean;
    char *last; /* "pass", "fail", ... */
};
struct tt_durations {
    struct tt_record *rec;
    size_t n;
};
/* Reads FILE; a missing file is empty. Returns 0 or -1 after printing why. */
int tt_durations_read(const char *path, struct tt_durations *d);
/* Whether the record of `name` says it failed last time. */
bool tt_durations_failed(const struct tt_durations *d, const char *name);
/* Merges this run's results and writes them to `out` (tn_out_open'd before
 * the run) and commits it. Returns 0 or -1 after printing why. */
int tt_durations_update(struct tn_out *out, struct tt_durations *d, struct tt_test *tests, size_t n);
/* Sets expected/known/failed_last/shard for every test and sorts `tests` into
 * run order: the same inputs give the same plan on every machine. */
void tt_plan(struct tt_test *tests, size_t n, const struct tt_durations *d, const struct tt_opts *o);
/* --shuffle: the run order of each shard (serial tests still apart) in a
 * random order drawn from o->seed: the same seed gives the same order. */
void tt_shuffle(struct tt_test *tests, size_t n, const struct tt_opts *o);

/* run.c: runs the tests of this shard (tests[i].shard == o->shard) in a
 * pool; fills attempts and final. Returns the number of tests that could
 * not be started. */
struct tt_report;
int tt_run(struct tt_test **tests, size_t n, const struct tt_opts *o, struct tt_report *r);

/* report.c: outputs. */
struct tt_report *tt_report_open(const struct tt_opts *o, size_t total);
void tt_report_progress(struct tt_report *r, size_t done, size_t failed, double elapsed);
void tt_report_test(struct tt_report *r, const struct tt_test *t);
/* Writes the summary, JUnit, closing line. Returns the exit status. */
int tt_report_close(struct tt_report *r, struct tt_test **tests, size_t n, double elapsed, int nstart_errors);
/* Prints the plan. Returns 0, or 2 when stdout could not be written. */
int tt_list(struct tt_test *tests, size_t n, const struct tt_opts *o);
/* Whether an output path is standard output: "-", or a name of descriptor 1
 * (/dev/stdout, /dev/fd/1); the human report then goes to standard error. */
bool tt_names_stdout(const char *path);
/* "1 case", "2 cases": the noun with an s unless n is 1. */
const char *tt_s(long n);

/* Counts the cases of a test's final attempt. */
struct tt_counts {
    long passed, failed, skipped;
};
void tt_count_cases(const struct tt_test *t, struct tt_counts *c);

#endif
