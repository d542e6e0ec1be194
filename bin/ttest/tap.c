/*
 * bin/ttest/tap.c: a lenient reader of TAP 12, 13 and 14 as test processes
 * print it.
 *
 * It takes what the TAP 14 draft codifies: the version line, one plan at the
 * start or the end ("1..0 # reason" skips the whole file), test points with
 * optional ids, descriptions and SKIP/TODO directives (case-insensitive, "\#"
 * escapes a hash), YAML blocks, "Bail out!", and subtests indented by four
 * spaces whose outcome is the correlated point of the parent.  Anything else
 * is ordinary output and is ignored, as the spec asks of harnesses.
 * Protocol errors (points outside the plan, out of sequence, a second plan,
 * a point after a trailing plan, a count that differs from the plan) are
 * collected in `errors`; the runner fails the test for them.
 */
#include "ttest.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

void tt_tap_init(struct tt_tap *t)
{
    memset(t, 0, sizeof(*t));
    t->version = 12;
    t->plan = -1;
    t->next_id = 1;
}

void tt_tap_free(struct tt_tap *t)
{
    for (size_t i = 0; i < t->ncases; i++) {
        free(t->cases[i].name);
        free(t->cases[i].reason);
        free(t->cases[i].diag);
    }
    free(t->cases);
    free(t->plan_reason);
    free(t->bail);
    tt_buf_free(&t->errors);
    tt_buf_free(&t->partial);
    memset(t, 0, sizeof(*t));
}

static bool starts_ci(const char *s, const char *prefix)
{
    return strncasecmp(s, prefix, strlen(prefix)) == 0;
}

static char *trim_dup(const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    char *r = tt_xmalloc(n + 1);
    memcpy(r, s, n);
    r[n] = '\0';
    return r;
}

/* Removes TAP's escapes (\# and \\) from a description. */
static char *unescape(const char *s, size_t n)
{
    char *r = trim_dup(s, n), *w = r;
    for (const char *p = r; *p; p++) {
        if (*p == '\\' && (p[1] == '#' || p[1] == '\\'))
            p++;
        *w++ = *p;
    }
    *w = '\0';
    return r;
}

/* Attaches a diagnostic line to the last failing point, so reports can show
 * why it failed (Bats prints "# (in test file ...)" lines there). */
static void add_diag(struct tt_tap *t, const char *line)
{
    if (!t->ncases)
        return;
    struct tt_case *c = &t->cases[t->ncases - 1];
    if (c->result != TT_CASE_FAIL)
        return;
    size_t old = c->diag ? strlen(c->diag) : 0, n = strlen(line);
    if (old > 65536)
        return;
    c->diag = tt_xrealloc(c->diag, old + n + 2);
    memcpy(c->diag + old, line, n);
    c->diag[old + n] = '\n';
    c->diag[old + n + 1] = '\0';
}

static void point(struct tt_tap *t, const char *rest, bool ok)
{
    /* rest follows "ok" / "not ok": " 12 - description # SKIP reason" */
    const char *p = rest;
    while (*p == ' ' || *p == '\t')
        p++;
    long id = 0;
    if (isdigit((unsigned char)*p)) {
        char *end;
        id = strtol(p, &end, 10);
        p = end;
    }
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '-' && (p[1] == ' ' || p[1] == '\0' || p[1] == '\t'))
        p++;
    /* The directive starts at the first '#' that is not escaped. */
    const char *hash = NULL;
    for (const char *q = p; *q; q++) {
        if (*q == '\\' && q[1]) {
            q++;
            continue;
        }
        if (*q == '#') {
            hash = q;
            break;
        }
    }
    size_t desclen = hash ? (size_t)(hash - p) : strlen(p);

    if (t->plan_at_end)
        tt_buf_addf(&t->errors, "test point after the plan at the end\n");

    if (id == 0)
        id = t->next_id;
    else if (id != t->next_id)
        tt_buf_addf(&t->errors, "test %ld out of sequence (expected %ld)\n", id, t->next_id);
    t->next_id = id + 1;
    if (t->plan >= 0 && id > t->plan)
        tt_buf_addf(&t->errors, "test %ld is outside the plan 1..%ld\n", id, t->plan);

    if (t->ncases == t->capcases) {
        t->capcases = t->capcases ? 2 * t->capcases : 16;
        t->cases = tt_xrealloc(t->cases, t->capcases * sizeof(*t->cases));
    }
    struct tt_case *c = &t->cases[t->ncases++];
    memset(c, 0, sizeof(*c));
    c->id = id;
    c->name = unescape(p, desclen);
    if (!*c->name) {
        /* A bare "ok 3": reports (JUnit's testcase names, retries matched
         * by name) need a name, the same on every run. */
        free(c->name);
        c->name = tt_xasprintf("test %ld", id);
    }
    c->result = ok ? TT_CASE_PASS : TT_CASE_FAIL;
    if (hash) {
        const char *d = hash + 1;
        while (*d == ' ' || *d == '\t')
            d++;
        if (starts_ci(d, "skip")) {
            d += 4;
            while (isalpha((unsigned char)*d)) /* "skipped" counts too */
                d++;
            c->reason = trim_dup(d, strlen(d));
            if (ok)
                c->result = TT_CASE_SKIP;
        } else if (starts_ci(d, "todo")) {
            d += 4;
            c->reason = trim_dup(d, strlen(d));
            /* A failing TODO is not a failure; a passing one is a pass. */
            if (!ok)
                c->result = TT_CASE_TODO;
        }
    }
}

static bool parse_plan(struct tt_tap *t, const char *line)
{
    const char *p = line;
    if (p[0] != '1' || p[1] != '.' || p[2] != '.' || !isdigit((unsigned char)p[3]))
        return false;
    char *end;
    long n = strtol(p + 3, &end, 10);
    while (*end == ' ' || *end == '\t')
        end++;
    if (*end && *end != '#')
        return false;
    if (t->plan >= 0) {
        tt_buf_addf(&t->errors, "more than one plan\n");
        return true;
    }
    t->plan = n;
    if (*end == '#')
        t->plan_reason = trim_dup(end + 1, strlen(end + 1));
    if (t->ncases > 0)
        t->plan_at_end = true;
    return true;
}

void tt_tap_line(struct tt_tap *t, const char *line)
{
    if (t->bail)
        return; /* nothing after a bail out counts */
    if (t->in_yaml) {
        /* A YAML block ends at "  ..." (any indentation of the same kind). */
        const char *p = line;
        while (*p == ' ')
            p++;
        if (strcmp(p, "...") == 0)
            t->in_yaml = false;
        else
            add_diag(t, line);
        return;
    }
    if (line[0] == ' ') {
        /* A YAML block opens with "  ---" right after a test point; deeper
         * indentation is a subtest, whose parent point decides its result. */
        if (strncmp(line, "  ---", 5) == 0 && line[5 + strspn(line + 5, " ")] == '\0' && t->ncases)
            t->in_yaml = true;
        return;
    }
    if (strncmp(line, "ok", 2) == 0 && (line[2] == ' ' || line[2] == '\t' || line[2] == '\0')) {
        point(t, line + 2, true);
    } else if (strncmp(line, "not ok", 6) == 0 &&
               (line[6] == ' ' || line[6] == '\t' || line[6] == '\0')) {
        point(t, line + 6, false);
    } else if (strncmp(line, "Bail out!", 9) == 0) {
        t->bail = trim_dup(line + 9, strlen(line + 9));
    } else if (strncmp(line, "TAP version ", 12) == 0) {
        t->version = atoi(line + 12);
    } else if (line[0] == '#') {
        add_diag(t, line);
    } else {
        parse_plan(t, line); /* anything else is ordinary output */
    }
}

void tt_tap_feed(struct tt_tap *t, const char *data, size_t n)
{
    while (n) {
        const char *nl = memchr(data, '\n', n);
        size_t take = nl ? (size_t)(nl - data) : n;
        /* A line is kept up to 64 KiB: output without newlines must not
         * grow the reader's memory without bound. */
        size_t room = t->partial.len < 65536 ? 65536 - t->partial.len : 0;
        tt_buf_add(&t->partial, data, take < room ? take : room);
        if (!nl)
            return;
        size_t len = t->partial.len;
        if (len && t->partial.data[len - 1] == '\r')
            t->partial.data[--t->partial.len] = '\0';
        tt_tap_line(t, t->partial.data);
        t->partial.len = 0;
        t->partial.data[0] = '\0';
        data += take + 1;
        n -= take + 1;
    }
}

void tt_tap_finish(struct tt_tap *t)
{
    if (t->partial.len) {
        tt_tap_line(t, t->partial.data);
        t->partial.len = 0;
    }
    if (t->bail)
        return;
    if (t->plan >= 0 && (long)t->ncases != t->plan)
        tt_buf_addf(&t->errors, "planned %ld test%s but ran %zu\n", t->plan, t->plan == 1 ? "" : "s",
                    t->ncases);
    else if (t->plan < 0 && t->ncases > 0)
        tt_buf_addf(&t->errors, "no plan\n");
}
