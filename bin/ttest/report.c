/*
 * bin/ttest/report.c: what ttest says: the live progress line (terminals
 * only), failures in full as they happen, the summary and the closing line
 * `N passed, N failed[, N skipped][, N flaky]`, and the machine formats:
 * TAP 14 with one subtest per test (--tap), one JSON object per test and
 * line (--json), and JUnit XML with retries recorded Surefire's way
 * (--junit).
 *
 * Counting is per case: the cases of a test's final attempt, plus one
 * synthetic case for a failure no case accounts for (a timeout, a signal,
 * a bail out, bad TAP, a bad exit status), or for a test that printed no
 * TAP at all.
 */
#include "ttest.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <tensor/core.h>

struct tt_report {
    const struct tt_opts *o;
    FILE *human, *tap, *json;
    size_t total;
    long tap_n;
    bool line_shown; /* a progress line is on the terminal */
    char stamp[32];
};

static bool failed(enum tt_status s)
{
    return s == TT_FAIL || s == TT_TIMEOUT || s == TT_ERROR;
}

static const struct tt_attempt *last_attempt(const struct tt_test *t)
{
    return t->nattempts ? &t->attempts[t->nattempts - 1] : NULL;
}

static size_t failing_cases(const struct tt_attempt *a)
{
    size_t n = 0;
    for (size_t i = 0; i < a->tap.ncases; i++)
        n += a->tap.cases[i].result == TT_CASE_FAIL;
    return n;
}

/* Whether an attempt's failure needs a case of its own in the counts. */
static bool synthetic_failure(const struct tt_attempt *a)
{
    if (!failed(a->status))
        return false;
    return failing_cases(a) == 0 || a->status == TT_TIMEOUT || a->signal || a->tap.bail ||
           a->tap.errors.len;
}

void tt_count_cases(const struct tt_test *t, struct tt_counts *c)
{
    const struct tt_attempt *a = last_attempt(t);
    if (t->final == TT_NOTRUN || !a) {
        c->skipped++;
        return;
    }
    if (t->final == TT_ERROR) {
        c->failed++;
        return;
    }
    if (a->status == TT_SKIP && failing_cases(a) == 0 && a->tap.ncases == 0) {
        c->skipped++;
        return;
    }
    for (size_t i = 0; i < a->tap.ncases; i++) {
        switch (a->tap.cases[i].result) {
        case TT_CASE_PASS: c->passed++; break;
        case TT_CASE_FAIL: c->failed++; break;
        default: c->skipped++; break;
        }
    }
    if (synthetic_failure(a))
        c->failed++;
    else if (a->tap.ncases == 0 && !failed(a->status))
        c->passed++;
}

/* Why a test never ran: only --maxfail (and -x, its 1) stops a run. */
static const char *notrun_reason(const struct tt_opts *o)
{
    static char buf[96];
    if (o->maxfail <= 1)
        return "not run: the run stopped at the first failure";
    snprintf(buf, sizeof(buf), "not run: the run stopped after %d failed tests (--maxfail)", o->maxfail);
    return buf;
}

static char *display_name(const struct tt_test *t)
{
    if (t->repeat_total > 1)
        return tt_xasprintf("%s (run %d of %d)", t->name, t->repeat_index, t->repeat_total);
    return tt_xstrdup(t->name);
}

/* -------------------------------------------------------------- human */

static void clear_line(struct tt_report *r)
{
    if (r->line_shown) {
        fputs("\r\033[K", stderr);
        r->line_shown = false;
    }
}

void tt_report_progress(struct tt_report *r, size_t done, size_t nfailed, double elapsed)
{
    fprintf(stderr, "\r\033[K[%zu/%zu] %zu failed, %.1f s", done, r->total, nfailed, elapsed);
    fflush(stderr);
    r->line_shown = true;
}

static void print_log(FILE *f, const char *name, const struct tt_attempt *a)
{
    fprintf(f, "--- output of %s ---\n", name);
    fputs(a->log.data ? a->log.data : "", f);
    if (a->log.len && a->log.data[a->log.len - 1] != '\n')
        fputc('\n', f);
    fprintf(f, "--- end of %s ---\n", name);
}

static void human_test(struct tt_report *r, const struct tt_test *t, const char *name)
{
    FILE *f = r->human;
    const struct tt_attempt *a = last_attempt(t);
    if (failed(t->final)) {
        fprintf(f, "FAIL %s: %s (%.2f s", name, a->message ? a->message : "failed", a->seconds);
        if (t->nattempts > 1)
            fprintf(f, ", attempt %d of %d", t->nattempts, t->nattempts);
        fputs(")\n", f);
        if (t->final != TT_ERROR)
            print_log(f, name, a);
    } else if (t->final == TT_FLAKY) {
        const struct tt_attempt *first = &t->attempts[0];
        fprintf(f, "FLAKY %s: %s, then passed on attempt %d (%.2f s)\n", name,
                first->message ? first->message : "failed", t->nattempts, a->seconds);
        if (r->o->verbose)
            print_log(f, name, first);
    } else if (r->o->verbose) {
        fprintf(f, "%s %s%s%s (%.2f s)\n", t->final == TT_SKIP ? "SKIP" : "PASS", name,
                a->message ? ": " : "", a->message ? a->message : "", a->seconds);
        print_log(f, name, a);
    }
    fflush(f);
}

/* -------------------------------------------------------------- TAP out */

static void tap_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '#' || *s == '\\')
            fputc('\\', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
}

static void tap_test(struct tt_report *r, const struct tt_test *t, const char *name)
{
    FILE *f = r->tap;
    const struct tt_attempt *a = last_attempt(t);
    long id = ++r->tap_n;
    fprintf(f, "# Subtest: ");
    tap_escape(f, name);
    fputc('\n', f);
    size_t k = 0;
    if (a) {
        for (size_t i = 0; i < a->tap.ncases; i++) {
            const struct tt_case *c = &a->tap.cases[i];
            fprintf(f, "    %s %zu - ", c->result == TT_CASE_FAIL || c->result == TT_CASE_TODO ? "not ok" : "ok",
                    ++k);
            tap_escape(f, c->name);
            if (c->result == TT_CASE_SKIP || c->result == TT_CASE_TODO)
                fprintf(f, " # %s %s", c->result == TT_CASE_SKIP ? "SKIP" : "TODO", c->reason ? c->reason : "");
            fputc('\n', f);
        }
        if (synthetic_failure(a)) {
            fprintf(f, "    not ok %zu - ", ++k);
            tap_escape(f, a->message ? a->message : "failed");
            fputc('\n', f);
        } else if (a->tap.ncases == 0 && !failed(a->status) && a->status != TT_SKIP) {
            fprintf(f, "    ok %zu - ", ++k); /* a program that printed no TAP */
            tap_escape(f, name);
            fputc('\n', f);
        }
    }
    fprintf(f, "    1..%zu\n", k);
    bool ok = !failed(t->final);
    fprintf(f, "%s %ld - ", ok ? "ok" : "not ok", id);
    tap_escape(f, name);
    if (t->final == TT_SKIP || t->final == TT_NOTRUN) {
        fprintf(f, " # SKIP ");
        tap_escape(f, t->final == TT_NOTRUN ? notrun_reason(r->o) : (a && a->message ? a->message : "skipped"));
    }
    fputc('\n', f);
    if (!ok || t->final == TT_FLAKY) {
        fprintf(f, "  ---\n  result: %s\n  attempts: %d\n", tt_status_name(t->final), t->nattempts);
        const struct tt_attempt *why = t->final == TT_FLAKY ? &t->attempts[0] : a;
        if (why && why->message) {
            json_t *s = json_string(why->message); /* a quoted YAML scalar */
            char *q = json_dumps(s, JSON_ENCODE_ANY);
            fprintf(f, "  message: %s\n", q);
            free(q);
            json_decref(s);
        }
        if (a)
            fprintf(f, "  duration_ms: %.0f\n", a->seconds * 1000);
        fprintf(f, "  ...\n");
    }
    fflush(f);
}

/* -------------------------------------------------------------- JSON out */

static const char *case_result(enum tt_case_result c)
{
    static const char *names[] = {"pass", "fail", "skip", "todo"};
    return names[c];
}

static void json_test(struct tt_report *r, const struct tt_test *t)
{
    const struct tt_attempt *a = last_attempt(t);
    struct tt_counts c = {0};
    tt_count_cases(t, &c);
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(t->name));
    json_object_set_new(o, "result", json_string(tt_status_name(t->final)));
    json_object_set_new(o, "shard", json_integer(t->shard));
    json_object_set_new(o, "shards", json_integer(r->o->shards));
    json_object_set_new(o, "run", json_integer(t->repeat_index));
    json_object_set_new(o, "runs", json_integer(t->repeat_total));
    json_object_set_new(o, "attempts", json_integer(t->nattempts));
    json_object_set_new(o, "seconds", json_real(a ? a->seconds : 0));
    json_object_set_new(o, "expected", json_real(t->expected));
    json_object_set_new(o, "exit", a && a->exit_code >= 0 && t->final != TT_ERROR ? json_integer(a->exit_code)
                                                                                  : json_null());
    json_object_set_new(o, "signal", a && a->signal ? json_string(sigabbrev_np(a->signal)) : json_null());
    const struct tt_attempt *why = t->final == TT_FLAKY ? &t->attempts[0] : a;
    json_object_set_new(o, "message", why && why->message ? json_string(why->message) : json_null());
    json_object_set_new(o, "passed", json_integer(c.passed));
    json_object_set_new(o, "failed", json_integer(c.failed));
    json_object_set_new(o, "skipped", json_integer(c.skipped));
    json_t *cases = json_array();
    for (size_t i = 0; a && i < a->tap.ncases; i++) {
        const struct tt_case *k = &a->tap.cases[i];
        json_t *co = json_object();
        json_object_set_new(co, "id", json_integer(k->id));
        json_object_set_new(co, "name", json_string(k->name));
        json_object_set_new(co, "result", json_string(case_result(k->result)));
        json_object_set_new(co, "reason", k->reason ? json_string(k->reason) : json_null());
        json_array_append_new(cases, co);
    }
    json_object_set_new(o, "cases", cases);
    /* Invalid UTF-8 in a name would make jansson refuse the string; the
     * object then goes out with null in its place, never not at all. */
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    if (s) {
        fprintf(r->json, "%s\n", s);
        free(s);
    }
    json_decref(o);
    fflush(r->json);
}

/* -------------------------------------------------------------- JUnit */

/* XML 1.0 text: the five escapes, and C0 controls (which XML forbids even
 * as references) written as U+FFFD. */
static void xml(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
                fputs("\xEF\xBF\xBD", f);
            else
                fputc(c, f);
        }
    }
}

static void xmls(FILE *f, const char *s)
{
    xml(f, s ? s : "", (size_t)-1);
}

/* The last 64 KiB of a log: enough to see why, small enough for CI limits. */
static void log_tail(FILE *f, const struct tt_attempt *a)
{
    size_t keep = 65536, off = a->log.len > keep ? a->log.len - keep : 0;
    if (a->log.data)
        xml(f, a->log.data + off, a->log.len - off);
}

static const char *failure_type(const struct tt_attempt *a)
{
    if (a->status == TT_TIMEOUT)
        return "timeout";
    if (a->signal) {
        static char buf[32];
        snprintf(buf, sizeof(buf), "SIG%s", sigabbrev_np(a->signal) ? sigabbrev_np(a->signal) : "?");
        return buf;
    }
    return a->status == TT_ERROR ? "error" : "failure";
}

/* Earlier failed attempts, inside the case they belong to (Surefire:
 * flakyFailure when the test finally passed, rerunFailure when it never did). */
static void junit_reruns(FILE *f, const struct tt_test *t, const char *case_name, bool first_case)
{
    for (int i = 0; i + 1 < t->nattempts; i++) {
        const struct tt_attempt *a = &t->attempts[i];
        bool here = false;
        for (size_t k = 0; k < a->tap.ncases; k++)
            if (a->tap.cases[k].result == TT_CASE_FAIL && !strcmp(a->tap.cases[k].name, case_name))
                here = true;
        if (!here && !(first_case && (failing_cases(a) == 0 || synthetic_failure(a))))
            continue;
        bool error = a->status != TT_FAIL || a->signal;
        const char *el = t->final == TT_FLAKY ? (error ? "flakyError" : "flakyFailure")
                                              : (error ? "rerunError" : "rerunFailure");
        fprintf(f, "      <%s message=\"", el);
        xmls(f, a->message);
        fprintf(f, "\" type=\"%s\">\n        <system-out>", failure_type(a));
        log_tail(f, a);
        fprintf(f, "</system-out>\n      </%s>\n", el);
    }
}

static void junit_case(FILE *f, const struct tt_test *t, const char *name, const char *case_name, double secs,
                       const char *kind, const char *type, const char *message, const char *body, bool first)
{
    fprintf(f, "    <testcase name=\"");
    xmls(f, case_name);
    fprintf(f, "\" classname=\"");
    xmls(f, name);
    fprintf(f, "\" file=\"");
    xmls(f, t->name);
    fprintf(f, "\" time=\"%.3f\">\n", secs);
    if (kind) {
        fprintf(f, "      <%s message=\"", kind);
        xmls(f, message);
        fputc('"', f);
        if (type)
            fprintf(f, " type=\"%s\"", type);
        if (body) {
            fputc('>', f);
            xmls(f, body);
            fprintf(f, "</%s>\n", kind);
        } else {
            fprintf(f, "/>\n");
        }
    }
    junit_reruns(f, t, case_name, first);
    fprintf(f, "    </testcase>\n");
}

static void junit_suite(FILE *f, const struct tt_test *t, const struct tt_opts *o, const char *stamp)
{
    char *name = display_name(t);
    const struct tt_attempt *a = last_attempt(t);
    struct tt_counts c = {0};
    tt_count_cases(t, &c);
    long errors = a && synthetic_failure(a) && (a->status != TT_FAIL || a->signal) ? 1 : 0;
    if (t->final == TT_ERROR)
        errors = 1;
    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    fprintf(f, "  <testsuite name=\"");
    xmls(f, name);
    fprintf(f, "\" tests=\"%ld\" failures=\"%ld\" errors=\"%ld\" skipped=\"%ld\" time=\"%.3f\" timestamp=\"%s\" hostname=\"",
            c.passed + c.failed + c.skipped, c.failed - errors, errors, c.skipped, a ? a->seconds : 0.0, stamp);
    xmls(f, host);
    fprintf(f, "\" file=\"");
    xmls(f, t->name);
    fprintf(f, "\">\n    <properties>\n");
    fprintf(f, "      <property name=\"shard\" value=\"%d/%d\"/>\n", t->shard, o->shards);
    fprintf(f, "      <property name=\"result\" value=\"%s\"/>\n", tt_status_name(t->final));
    fprintf(f, "      <property name=\"attempts\" value=\"%d\"/>\n", t->nattempts);
    fprintf(f, "    </properties>\n");

    bool first = true;
    if (t->final == TT_NOTRUN || !a) {
        junit_case(f, t, name, name, 0, "skipped", NULL, notrun_reason(o), NULL, true);
    } else if (t->final == TT_ERROR) {
        junit_case(f, t, name, name, 0, "error", "error", a->message, NULL, true);
    } else if (a->status == TT_SKIP && a->tap.ncases == 0) {
        junit_case(f, t, name, name, a->seconds, "skipped", NULL, a->message, NULL, true);
    } else {
        for (size_t i = 0; i < a->tap.ncases; i++) {
            const struct tt_case *k = &a->tap.cases[i];
            if (k->result == TT_CASE_FAIL) {
                /* The message is the first diagnostic line; the body all of them. */
                const char *d = k->diag ? k->diag + strspn(k->diag, "# \t") : "";
                char *m = *d ? tt_xasprintf("%.*s", (int)strcspn(d, "\n"), d) : tt_xstrdup("not ok");
                junit_case(f, t, name, k->name, 0, "failure", "failure", m, k->diag, first);
                free(m);
            }
            else if (k->result == TT_CASE_SKIP)
                junit_case(f, t, name, k->name, 0, "skipped", NULL, k->reason, NULL, first);
            else if (k->result == TT_CASE_TODO) {
                char *m = tt_xasprintf("TODO %s", k->reason ? k->reason : "");
                junit_case(f, t, name, k->name, 0, "skipped", NULL, m, NULL, first);
                free(m);
            } else
                junit_case(f, t, name, k->name, 0, NULL, NULL, NULL, NULL, first);
            first = false;
        }
        if (synthetic_failure(a)) {
            bool err = a->status != TT_FAIL || a->signal;
            junit_case(f, t, name, name, a->seconds, err ? "error" : "failure", failure_type(a), a->message, NULL,
                       first);
        } else if (a->tap.ncases == 0) {
            junit_case(f, t, name, name, a->seconds, NULL, NULL, NULL, NULL, true);
        }
    }
    if (a) {
        fprintf(f, "    <system-out>");
        log_tail(f, a);
        fprintf(f, "</system-out>\n");
    }
    fprintf(f, "  </testsuite>\n");
    free(name);
}

static int write_junit(struct tn_out *out, struct tt_test **tests, size_t n, const struct tt_opts *o,
                       const char *stamp, double elapsed)
{
    struct tt_counts all = {0};
    long errors = 0;
    for (size_t i = 0; i < n; i++) {
        tt_count_cases(tests[i], &all);
        const struct tt_attempt *a = last_attempt(tests[i]);
        if (tests[i]->final == TT_ERROR || (a && synthetic_failure(a) && (a->status != TT_FAIL || a->signal)))
            errors++;
    }
    FILE *f = tn_out_file(out);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<testsuites name=\"ttest\" tests=\"%ld\" failures=\"%ld\" errors=\"%ld\" skipped=\"%ld\" "
               "time=\"%.3f\" timestamp=\"%s\">\n",
            all.passed + all.failed + all.skipped, all.failed - errors, errors, all.skipped, elapsed, stamp);
    for (size_t i = 0; i < n; i++)
        junit_suite(f, tests[i], o, stamp);
    fprintf(f, "</testsuites>\n");
    if (tn_out_commit(out, false) != TN_OK) {
        tt_warn("cannot write the JUnit XML: %s", tn_last_error());
        return -1;
    }
    return 0;
}

/* -------------------------------------------------------------- the run */

/* --tap and --json files are written as the run goes, so not through
 * tn_out's temporary: fopen writes through a symlink, to a device or pipe
 * directly, and makes a new file with the umask's mode. */
static FILE *open_out(const char *opt, const char *path)
{
    if (!path)
        return NULL;
    if (strcmp(path, "-") == 0)
        return stdout;
    FILE *f = fopen(path, "w");
    if (!f)
        tt_die(2, "%s: %s: %m", opt, path);
    return f;
}

struct tt_report *tt_report_open(const struct tt_opts *o, size_t total)
{
    struct tt_report *r = tt_xmalloc(sizeof(*r));
    memset(r, 0, sizeof(*r));
    r->o = o;
    r->total = total;
    r->tap = open_out("--tap", o->tap);
    r->json = open_out("--json", o->json);
    /* stdout belongs to a machine format when one goes there. */
    r->human = tt_names_stdout(o->tap) || tt_names_stdout(o->json) || tt_names_stdout(o->junit) ? stderr : stdout;
    time_t now = time(NULL);
    strftime(r->stamp, sizeof(r->stamp), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    if (r->tap)
        fprintf(r->tap, "TAP version 14\n1..%zu\n", total);
    /* Always, -q too: a failure in a random order is reproduced by its seed. */
    if (o->shuffle) {
        fprintf(r->human, "Random order: --shuffle=%llu\n", o->seed);
        fflush(r->human);
    }
    return r;
}

void tt_report_test(struct tt_report *r, const struct tt_test *t)
{
    char *name = display_name(t);
    clear_line(r);
    if (!r->o->quiet || failed(t->final))
        human_test(r, t, name);
    if (r->tap)
        tap_test(r, t, name);
    if (r->json)
        json_test(r, t);
    free(name);
}

int tt_report_close(struct tt_report *r, struct tt_test **tests, size_t n, double elapsed, int nstart_errors)
{
    clear_line(r);
    for (size_t i = 0; i < n; i++)
        if (tests[i]->final == TT_NOTRUN)
            tt_report_test(r, tests[i]);
    struct tt_counts c = {0};
    size_t nfailed = 0, nflaky = 0;
    for (size_t i = 0; i < n; i++) {
        tt_count_cases(tests[i], &c);
        nfailed += failed(tests[i]->final);
        nflaky += tests[i]->final == TT_FLAKY;
    }
    FILE *f = r->human;
    if (nfailed) {
        fprintf(f, "\nFailed:\n");
        for (size_t i = 0; i < n; i++)
            if (failed(tests[i]->final)) {
                char *name = display_name(tests[i]);
                const struct tt_attempt *a = last_attempt(tests[i]);
                fprintf(f, "  %s: %s\n", name, a && a->message ? a->message : "failed");
                free(name);
            }
    }
    if (nflaky) {
        fprintf(f, "\nFlaky (failed, then passed on a retry):\n");
        for (size_t i = 0; i < n; i++)
            if (tests[i]->final == TT_FLAKY) {
                char *name = display_name(tests[i]);
                fprintf(f, "  %s: %s\n", name, tests[i]->attempts[0].message ? tests[i]->attempts[0].message : "failed");
                free(name);
            }
    }
    if (n == 0)
        tt_warn("no tests selected%s", r->o->shards > 1 ? " in this shard" : "");
    if (!r->o->quiet) {
        fprintf(f, "\nRan %zu test%s", n, tt_s((long)n));
        if (r->o->shards > 1)
            fprintf(f, " (shard %d/%d)", r->o->shard, r->o->shards);
        fprintf(f, " in %.1f s\n", elapsed);
    }
    fprintf(f, "%ld passed, %ld failed", c.passed, c.failed);
    if (c.skipped)
        fprintf(f, ", %ld skipped", c.skipped);
    if (nflaky)
        fprintf(f, ", %zu flaky", nflaky);
    fputc('\n', f);
    /* Its errno names the failure (ENOSPC); a later flush would say EIO. */
    int human_errno = fflush(f) != 0 ? errno : 0;

    int status = nstart_errors ? 2 : (nfailed || c.failed) ? 1 : 0;
    if (r->o->junit_out && write_junit(r->o->junit_out, tests, n, r->o, r->stamp, elapsed) < 0)
        status = 2;
    if (r->tap && r->tap != stdout && fclose(r->tap) != 0) {
        tt_warn("%s: cannot write: %m", r->o->tap);
        status = 2;
    }
    if (r->json && r->json != stdout && fclose(r->json) != 0) {
        tt_warn("%s: cannot write: %m", r->o->json);
        status = 2;
    }
    if (tn_stdout_flush() != TN_OK) {
        if (f == stdout && human_errno)
            tt_warn("<stdout>: cannot write: %s", strerror(human_errno));
        else
            tt_warn("%s", tn_last_error());
        status = 2;
    }
    free(r);
    return status;
}

/* -------------------------------------------------------------- --list */

bool tt_names_stdout(const char *path)
{
    return path && (!strcmp(path, "-") || !strcmp(path, "/dev/stdout") || !strcmp(path, "/dev/fd/1") ||
                    !strcmp(path, "/proc/self/fd/1"));
}

const char *tt_s(long n)
{
    return n == 1 ? "" : "s";
}

int tt_list(struct tt_test *tests, size_t n, const struct tt_opts *o)
{
    double *load = calloc((size_t)o->shards, sizeof(double));
    size_t *count = calloc((size_t)o->shards, sizeof(size_t));
    for (size_t i = 0; i < n; i++) {
        load[tests[i].shard - 1] += tests[i].expected;
        count[tests[i].shard - 1]++;
    }
    if (!o->json)
        for (int s = 0; s < o->shards; s++)
            printf("# shard %d/%d: %zu test%s, %.1f s expected\n", s + 1, o->shards, count[s],
                   tt_s((long)count[s]), load[s]);
    if (!o->json && o->shuffle)
        printf("# in random order: --shuffle=%llu\n", o->seed);
    for (size_t i = 0; i < n; i++) {
        const struct tt_test *t = &tests[i];
        if (o->json) {
            json_t *j = json_object();
            json_object_set_new(j, "name", json_string(t->name));
            json_object_set_new(j, "shard", json_integer(t->shard));
            json_object_set_new(j, "shards", json_integer(o->shards));
            json_object_set_new(j, "expected", json_real(t->expected));
            json_object_set_new(j, "known", json_boolean(t->known));
            json_object_set_new(j, "serial", json_boolean(t->serial));
            json_object_set_new(j, "run", json_integer(t->repeat_index));
            json_object_set_new(j, "runs", json_integer(t->repeat_total));
            char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
            if (s)
                printf("%s\n", s);
            free(s);
            json_decref(j);
        } else {
            printf("%d/%d\t%.3f\t%s\t%s\n", t->shard, o->shards, t->expected, t->serial ? "serial" : "parallel",
                   t->name);
        }
    }
    free(load);
    free(count);
    if (tn_stdout_flush() != TN_OK) {
        tt_warn("%s", tn_last_error());
        return 2;
    }
    return 0;
}
