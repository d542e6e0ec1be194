/*
 * bin/tckpt/scan.c: `tckpt scan`, the checkpoint auditor: runs the
 * library's scanner (tn_scan_*) over files, folders (-r) or standard input,
 * in parallel with -j, and prints text, JSON or SARIF 2.1.0.  Exit status:
 * 0 every file clean, 1 a finding at or above --fail-on, 2 a file could not
 * be read or fully analysed and showed no such finding (never clean when
 * incomplete; a file that is no model at all is 0 with --not-a-model=ok),
 * or a usage error.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tensor/core.h>
#include <tensor/io.h>
#include <tensor/dcp.h>

#include "../cli.h"

int tckpt_scan_main(int argc, char **argv);

static const char scan_usage[] =
    "Usage: tckpt scan [OPTION]... FILE...|-\n"
    "Audit checkpoints and pickles without running them: every global outside\n"
    "the policy's allowlist is reported, with anomalies, each finding graded\n"
    "dangerous, unknown or suspicious. A distributed checkpoint folder (with\n"
    ".metadata) is one input: its .metadata against the DCP metadata classes,\n"
    "and each of its items.\n"
    "\n"
    "  -r, --recursive          scan every file under folders (a folder without\n"
    "                           -r is an error)\n"
    "      --json               print one JSON object\n"
    "      --sarif=FILE         also write SARIF 2.1.0 to FILE (- for standard\n"
    "                           output, then instead of the report)\n"
    "      --policy=P           pickle (default: torch2's list plus globals whose\n"
    "                           unpickling runs no code), torch2 (exactly what\n"
    "                           torch.load(weights_only=True) takes) or torch1.13\n"
    "      --fail-on=S          the least severity that fails (exit 1): suspicious\n"
    "                           (default: any finding), unknown or dangerous\n"
    "      --not-a-model=A      a file that is no model (an image, text, an empty\n"
    "                           file, a password-protected zip): error (default,\n"
    "                           exit 2) or ok (exit 0)\n"
    "      --allow=MODULE.NAME  also allow this global (never os, posix, nt, sys,\n"
    "                           subprocess, builtins.eval/exec)\n"
    "      --allowlist=FILE     globals to allow, one MODULE.NAME a line\n"
    "  -j, --jobs=N             scan N files at a time (default 1)\n"
    "  -h, --help               print this help and exit\n"
    "\n"
    "Exit status: 0 all clean; 1 a finding at or above --fail-on; 2 a file\n"
    "could not be read or fully analysed (and showed no such finding), or a\n"
    "usage error.\n";

struct file {
    char *path;
    struct tn_scan_report r;
    bool done; /* reported before the scan (a folder that -r could not open) */
};

static struct {
    struct file *f;
    size_t n, cap;
    size_t next;
    pthread_mutex_t lock;
    struct tn_scan_options o;
    int fail_on;         /* the least severity that fails */
    bool not_model_ok;   /* --not-a-model=ok */
    const char **allow;
    size_t nallow, capallow;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

_Noreturn static void scan_usage_error(const char *fmt, const char *arg)
{
    cli_usage_error("tckpt: scan", "tckpt scan", fmt, arg);
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p) {
        fputs("tckpt: out of memory\n", stderr);
        exit(2);
    }
    return p;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d) {
        fputs("tckpt: out of memory\n", stderr);
        exit(2);
    }
    return d;
}

static void add_file(const char *path)
{
    if (S.n == S.cap) {
        S.cap = S.cap ? S.cap * 2 : 16;
        S.f = xrealloc(S.f, S.cap * sizeof *S.f);
    }
    memset(&S.f[S.n], 0, sizeof S.f[S.n]);
    S.f[S.n++].path = xstrdup(path);
}

static void add_allow(const char *g)
{
    if (!tn_scan_allow_ok(g))
        scan_usage_error("--allow: '%s' can never be allowed (or is not MODULE.NAME)", g);
    if (S.nallow == S.capallow) {
        S.capallow = S.capallow ? S.capallow * 2 : 8;
        S.allow = xrealloc(S.allow, S.capallow * sizeof *S.allow);
    }
    S.allow[S.nallow++] = xstrdup(g);
}

static void read_allowlist(const char *path)
{
    bool std = !strcmp(path, "-");
    FILE *f = std ? stdin : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "tckpt: %s: %s\n", path, strerror(errno));
        exit(2);
    }
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *s = line, *e;
        while (*s == ' ' || *s == '\t')
            s++;
        if ((e = strchr(s, '#')))
            *e = 0;
        e = s + strlen(s);
        while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
            *--e = 0;
        if (*s)
            add_allow(s);
    }
    if (!std)
        fclose(f);
}

/* Folders with -r: every regular file below, in name order; symbolic links
 * to folders are not followed (no loops). */
static int by_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void walk(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (!d || depth > 64) {
        const char *why = d ? "folders nested deeper than 64" : strerror(errno);
        if (d)
            closedir(d);
        add_file(dir); /* reported as unreadable */
        struct file *f = &S.f[S.n - 1];
        size_t l = strlen(dir) + strlen(why) + 32;
        f->r.error = xrealloc(NULL, l);
        snprintf(f->r.error, l, "%s: cannot open folder: %s", dir, why);
        f->r.incomplete = f->done = true;
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            names = xrealloc(names, cap * sizeof *names);
        }
        size_t l = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = xrealloc(NULL, l);
        snprintf(names[n], l, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_str);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (lstat(names[i], &st) == 0 && S_ISDIR(st.st_mode) && tn_dcp_is_dir(names[i]))
            add_file(names[i]); /* a distributed checkpoint is one input */
        else if (lstat(names[i], &st) == 0 && S_ISDIR(st.st_mode))
            walk(names[i], depth + 1);
        else if (lstat(names[i], &st) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) {
            if (!S_ISLNK(st.st_mode) || (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)))
                add_file(names[i]);
        }
        free(names[i]);
    }
    free(names);
}

static void scan_stdin(struct file *f)
{
    size_t len = 0, cap = 1 << 16;
    unsigned char *b = xrealloc(NULL, cap);
    size_t k;
    while ((k = fread(b + len, 1, cap - len, stdin)) > 0) {
        len += k;
        if (len == cap)
            b = xrealloc(b, cap *= 2);
    }
    if (ferror(stdin)) {
        f->r.incomplete = true;
        f->r.error = xstrdup("standard input: read error");
    } else if (tn_scan_memory(b, len, "-", &S.o, &f->r) < 0 && !f->r.error) {
        f->r.error = xstrdup(tn_last_error());
    }
    free(b);
}

static void scan_one(struct file *f)
{
    if (f->done)
        return;
    if (!strcmp(f->path, "-")) {
        scan_stdin(f);
        return;
    }
    struct stat st;
    if (stat(f->path, &st) == 0 && S_ISDIR(st.st_mode) && !tn_dcp_is_dir(f->path)) {
        f->r.incomplete = true;
        size_t l = strlen(f->path) + 64;
        f->r.error = xrealloc(NULL, l);
        snprintf(f->r.error, l, "%s: Is a directory (use -r to scan the files under it)", f->path);
        return;
    }
    if (tn_scan_file(f->path, &S.o, &f->r) < 0 && !f->r.error) {
        f->r.incomplete = true;
        f->r.error = xstrdup(tn_last_error());
    }
}

static void *worker(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&S.lock);
        size_t i = S.next++;
        pthread_mutex_unlock(&S.lock);
        if (i >= S.n)
            return NULL;
        scan_one(&S.f[i]);
    }
}

static void jstr(FILE *o, const char *s)
{
    fputc('"', o);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(o, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            fprintf(o, "\\u%04x", *p); /* bytes, not text: kept visible */
        else
            fputc(*p, o);
    }
    fputc('"', o);
}

/* Text: control bytes shown as \xNN so a file name cannot forge lines. */
static void tstr(FILE *o, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || *p == '\\')
            fprintf(o, "\\x%02x", *p);
        else
            fputc(*p, o);
}

static const char *status_of(const struct tn_scan_report *r)
{
    return r->n ? "findings" : r->not_model ? "not-a-model" : r->incomplete ? "incomplete"
                                                                            : "clean";
}

static void print_text(void)
{
    size_t sev[4] = {0}, clean = 0, bad = 0, inc = 0, notm = 0;
    for (size_t i = 0; i < S.n; i++) {
        const struct tn_scan_report *r = &S.f[i].r;
        for (size_t k = 0; k < r->n; k++) {
            const struct tn_scan_finding *f = &r->f[k];
            sev[f->severity]++;
            tstr(stdout, S.f[i].path);
            if (*f->entry) {
                fputs(": ", stdout);
                tstr(stdout, f->entry);
            }
            printf("%s%llu: %s", f->offset_in_parent ? " (header)@" : "@",
                   (unsigned long long)f->offset, tn_scan_severity_name(f->severity));
            if (*f->module || *f->name) {
                fputc(' ', stdout);
                tstr(stdout, f->module);
                fputc('.', stdout);
                tstr(stdout, f->name);
                printf(" (%s)", tn_scan_use_name(f->use));
            }
            printf(" [%s]", f->reason);
            if (f->detail) {
                fputs(": ", stdout);
                tstr(stdout, f->detail);
            }
            fputc('\n', stdout);
        }
        if (r->not_model && !r->n) {
            tstr(stdout, S.f[i].path);
            fputs(": not a model: ", stdout);
            tstr(stdout, r->format ? r->format : "?");
            fputc('\n', stdout);
        } else if (r->incomplete) {
            tstr(stdout, S.f[i].path);
            fputs(": incomplete: ", stdout);
            tstr(stdout, r->error ? r->error : "the scan could not finish");
            fputc('\n', stdout);
        }
        if (r->n)
            bad++;
        else if (r->not_model)
            notm++;
        else if (r->incomplete)
            inc++;
        else
            clean++;
    }
    printf("scanned %zu file%s: %zu clean, %zu with findings (%zu dangerous, %zu unknown, "
           "%zu suspicious), %zu incomplete", S.n, S.n == 1 ? "" : "s", clean, bad,
           sev[TN_SCAN_DANGEROUS], sev[TN_SCAN_UNKNOWN], sev[TN_SCAN_SUSPICIOUS], inc);
    if (notm)
        printf(", %zu not a model", notm);
    fputc('\n', stdout);
}

static void jstr_or_null(FILE *o, const char *s)
{
    if (s)
        jstr(o, s);
    else
        fputs("null", o);
}

static void print_json(void)
{
    size_t clean = 0, bad = 0, inc = 0, notm = 0;
    fputs("{\"files\":[", stdout);
    for (size_t i = 0; i < S.n; i++) {
        const struct tn_scan_report *r = &S.f[i].r;
        fputs(i ? ",{\"path\":" : "{\"path\":", stdout);
        jstr(stdout, S.f[i].path);
        fputs(",\"format\":", stdout);
        jstr_or_null(stdout, r->format);
        printf(",\"status\":\"%s\",\"incomplete\":%s,\"not_model\":%s,\"error\":",
               status_of(r), r->incomplete ? "true" : "false", r->not_model ? "true" : "false");
        jstr_or_null(stdout, r->error);
        fputs(",\"findings\":[", stdout);
        for (size_t k = 0; k < r->n; k++) {
            const struct tn_scan_finding *f = &r->f[k];
            fputs(k ? ",{\"entry\":" : "{\"entry\":", stdout);
            jstr(stdout, f->entry);
            printf(",\"offset\":%llu,\"offset_in_parent\":%s,\"module\":",
                   (unsigned long long)f->offset, f->offset_in_parent ? "true" : "false");
            jstr(stdout, f->module);
            fputs(",\"name\":", stdout);
            jstr(stdout, f->name);
            fputs(",\"global\":", stdout);
            if (*f->module || *f->name) {
                size_t l = strlen(f->module) + strlen(f->name) + 2;
                char *g = xrealloc(NULL, l);
                snprintf(g, l, "%s.%s", f->module, f->name);
                jstr(stdout, g);
                free(g);
            } else
                fputs("null", stdout);
            printf(",\"use\":\"%s\",\"severity\":\"%s\",\"reason\":\"%s\",\"detail\":",
                   tn_scan_use_name(f->use), tn_scan_severity_name(f->severity), f->reason);
            jstr_or_null(stdout, f->detail);
            fputc('}', stdout);
        }
        fputs("]}", stdout);
        if (r->n)
            bad++;
        else if (r->not_model)
            notm++;
        else if (r->incomplete)
            inc++;
        else
            clean++;
    }
    printf("],\"summary\":{\"files\":%zu,\"clean\":%zu,\"findings\":%zu,\"incomplete\":%zu,"
           "\"not_model\":%zu}}\n", S.n, clean, bad, inc, notm);
}

/* ----------------------------------------------------------------- SARIF */

/* A URI's path, percent-encoded (RFC 3986: unreserved characters and '/'
 * stay). */
static void uri_path(FILE *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '.' || ch == '_' || ch == '~' || ch == '/')
            fputc(ch, o);
        else
            fprintf(o, "%%%02X", ch);
    }
}

/* SARIF's artifacts: each file given, and each archive member a finding is
 * in, nested under its archive by parentIndex; a member's URI is its path
 * in its parent ("/archive/data.pkl"), and a region's byteOffset counts
 * in the artifact the location names. */
struct artifact {
    size_t file;      /* index in S.f */
    size_t entry_len; /* the prefix of the entry it is ("" for the file) */
    const char *entry;
    long parent;
};

static struct {
    struct artifact *a;
    size_t n, cap;
} A;

static long artifact_of(size_t file, const char *entry, size_t len)
{
    for (size_t i = A.n; i-- > 0;)
        if (A.a[i].file == file && A.a[i].entry_len == len && !memcmp(A.a[i].entry, entry, len))
            return (long)i;
    long parent = -1;
    if (len) {
        size_t p = len;
        while (p > 0 && entry[p - 1] != '!')
            p--;
        parent = artifact_of(file, entry, p ? p - 1 : 0);
    }
    if (A.n == A.cap) {
        A.cap = A.cap ? A.cap * 2 : 64;
        A.a = xrealloc(A.a, A.cap * sizeof *A.a);
    }
    A.a[A.n] = (struct artifact){file, len, entry, parent};
    return (long)A.n++;
}

/* The artifact a finding's offset counts in: its entry, or the archive
 * that holds it for a member's header. */
static long artifact_of_finding(size_t file, const struct tn_scan_finding *f)
{
    size_t len = strlen(f->entry);
    if (f->offset_in_parent) {
        while (len > 0 && f->entry[len - 1] != '!')
            len--;
        len = len ? len - 1 : 0;
    }
    return artifact_of(file, f->entry, len);
}

static void artifact_location(FILE *o, long i, bool with_index)
{
    const struct artifact *a = &A.a[i];
    const char *path = S.f[a->file].path;
    fputc('{', o);
    if (a->entry_len) {
        size_t p = a->entry_len;
        while (p > 0 && a->entry[p - 1] != '!')
            p--;
        fputs("\"uri\":\"/", o);
        uri_path(o, a->entry + p, a->entry_len - p);
        fputc('"', o);
    } else if (!strcmp(path, "-")) {
        fputs("\"description\":{\"text\":\"standard input\"}", o);
    } else if (path[0] == '/') {
        fputs("\"uri\":\"file://", o);
        uri_path(o, path, strlen(path));
        fputc('"', o);
    } else {
        fputs("\"uri\":\"", o);
        uri_path(o, path, strlen(path));
        fputs("\",\"uriBaseId\":\"CWD\"", o);
    }
    if (with_index)
        fprintf(o, ",\"index\":%ld", i);
    fputc('}', o);
}

static long rule_index(const char *id)
{
    size_t n;
    const struct tn_scan_rule *r = tn_scan_rules(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(r[i].id, id))
            return (long)i;
    return (long)n; /* scan-incomplete */
}

static void sarif_result(FILE *o, size_t file, const struct tn_scan_finding *f, bool *first)
{
    const struct tn_scan_report *r = &S.f[file].r;
    fputs(*first ? "{" : ",{", o);
    *first = false;
    const char *id = f ? f->reason : "scan-incomplete";
    fputs("\"ruleId\":", o);
    jstr(o, id);
    /* the level follows the severity (an incomplete scan is an error) */
    fprintf(o, ",\"ruleIndex\":%ld,\"level\":\"%s\",\"message\":{\"text\":", rule_index(id),
            !f || f->severity == TN_SCAN_DANGEROUS ? "error"
            : f->severity == TN_SCAN_SUSPICIOUS    ? "warning"
                                                   : "note");
    char msg[2048];
    if (!f)
        snprintf(msg, sizeof msg, "incomplete: %s", r->error ? r->error : "the scan could not finish");
    else if (*f->module || *f->name)
        snprintf(msg, sizeof msg, "%s global %s.%s (%s) in %s", tn_scan_severity_name(f->severity),
                 f->module, f->name, tn_scan_use_name(f->use), *f->entry ? f->entry : "the file");
    else
        snprintf(msg, sizeof msg, "suspicious: %s %s %s%s%s", f->reason,
                 f->offset_in_parent ? "in the header of" : "in", *f->entry ? f->entry : "the file",
                 f->detail ? ": " : "", f->detail ? f->detail : "");
    jstr(o, msg);
    fputs("},\"locations\":[{\"physicalLocation\":{\"artifactLocation\":", o);
    long a = f ? artifact_of_finding(file, f) : artifact_of(file, "", 0);
    artifact_location(o, a, true);
    if (f)
        fprintf(o, ",\"region\":{\"byteOffset\":%llu}", (unsigned long long)f->offset);
    fputs("}}]", o);
    if (f) {
        fputs(",\"properties\":{\"entry\":", o);
        jstr(o, f->entry);
        fprintf(o, ",\"severity\":\"%s\"}", tn_scan_severity_name(f->severity));
    }
    fputc('}', o);
}

static void write_sarif(FILE *o, int exit_code)
{
    fprintf(o, "{\"$schema\":\"https://json.schemastore.org/sarif-2.1.0.json\",\"version\":"
               "\"2.1.0\",\"runs\":[{\"tool\":{\"driver\":{\"name\":\"tckpt scan\","
               "\"version\":");
    jstr(o, tn_version());
    fputs(",\"informationUri\":\"https://github.com/tensorkit/tensorkit\",\"rules\":[", o);
    size_t nr;
    const struct tn_scan_rule *rules = tn_scan_rules(&nr);
    for (size_t i = 0; i <= nr; i++) {
        fputs(i ? ",{\"id\":" : "{\"id\":", o);
        jstr(o, i < nr ? rules[i].id : "scan-incomplete");
        fputs(",\"shortDescription\":{\"text\":", o);
        jstr(o, i < nr ? rules[i].description
                       : "a file that could not be read or fully analysed: never clean");
        fputs("}}", o);
    }
    fputs("]}},\"results\":[", o);
    bool first = true;
    A.n = 0;
    for (size_t i = 0; i < S.n; i++) {
        artifact_of(i, "", 0);
        const struct tn_scan_report *r = &S.f[i].r;
        for (size_t k = 0; k < r->n; k++)
            sarif_result(o, i, &r->f[k], &first);
        if (r->incomplete && !(r->not_model && S.not_model_ok))
            sarif_result(o, i, NULL, &first);
    }
    fputs("],\"artifacts\":[", o);
    for (size_t i = 0; i < A.n; i++) {
        fputs(i ? ",{\"location\":" : "{\"location\":", o);
        artifact_location(o, (long)i, false);
        if (A.a[i].parent >= 0)
            fprintf(o, ",\"parentIndex\":%ld", A.a[i].parent);
        else
            fputs(",\"roles\":[\"analysisTarget\"]", o);
        fputc('}', o);
    }
    fputs("]", o);
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd)) {
        fputs(",\"originalUriBaseIds\":{\"CWD\":{\"uri\":\"file://", o);
        uri_path(o, cwd, strlen(cwd));
        fputs(cwd[1] ? "/\"}}" : "\"}}", o);
    }
    fprintf(o, ",\"invocations\":[{\"executionSuccessful\":%s,\"exitCode\":%d}]}]}\n",
            exit_code == 2 ? "false" : "true", exit_code);
    free(A.a);
    A.a = NULL;
    A.cap = A.n = 0;
}

int tckpt_scan_main(int argc, char **argv)
{
    enum { O_JSON = 300, O_SARIF, O_POLICY, O_ALLOW, O_ALLOWLIST, O_FAIL_ON, O_NOT_MODEL };
    static const struct option lo[] = {
        {"recursive", no_argument, NULL, 'r'}, {"json", no_argument, NULL, O_JSON},
        {"sarif", required_argument, NULL, O_SARIF}, {"policy", required_argument, NULL, O_POLICY},
        {"allow", required_argument, NULL, O_ALLOW},
        {"allowlist", required_argument, NULL, O_ALLOWLIST},
        {"fail-on", required_argument, NULL, O_FAIL_ON},
        {"not-a-model", required_argument, NULL, O_NOT_MODEL},
        {"jobs", required_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool rec = false, json = false, policy_set = false, stdin_used = false;
    S.o.policy = TN_ALLOW_PICKLE;
    S.fail_on = TN_SCAN_SUSPICIOUS;
    const char *sarif = NULL;
    long jobs = 1;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "rj:h", lo, NULL)) != -1) {
        switch (c) {
        case 'r': rec = true; break;
        case O_JSON: json = true; break;
        case O_SARIF:
            if (sarif)
                scan_usage_error("--sarif: given twice ('%s' the second time)", optarg);
            sarif = optarg;
            break;
        case O_POLICY:
            if (policy_set)
                scan_usage_error("--policy: given twice ('%s' the second time)", optarg);
            policy_set = true;
            if (!strcmp(optarg, "torch2"))
                S.o.policy = TN_ALLOW_CURRENT;
            else if (!strcmp(optarg, "torch1.13") || !strcmp(optarg, "torch1"))
                S.o.policy = TN_ALLOW_TORCH1;
            else if (!strcmp(optarg, "pickle"))
                S.o.policy = TN_ALLOW_PICKLE;
            else
                scan_usage_error("--policy: '%s' is not pickle, torch2 or torch1.13", optarg);
            break;
        case O_FAIL_ON:
            if (!strcmp(optarg, "suspicious") || !strcmp(optarg, "any"))
                S.fail_on = TN_SCAN_SUSPICIOUS;
            else if (!strcmp(optarg, "unknown"))
                S.fail_on = TN_SCAN_UNKNOWN;
            else if (!strcmp(optarg, "dangerous"))
                S.fail_on = TN_SCAN_DANGEROUS;
            else
                scan_usage_error("--fail-on: '%s' is not suspicious, unknown or dangerous", optarg);
            break;
        case O_NOT_MODEL:
            if (strcmp(optarg, "ok") && strcmp(optarg, "error"))
                scan_usage_error("--not-a-model: '%s' is not ok or error", optarg);
            S.not_model_ok = !strcmp(optarg, "ok");
            break;
        case O_ALLOW: add_allow(optarg); break;
        case O_ALLOWLIST:
            if (!strcmp(optarg, "-"))
                stdin_used = true;
            read_allowlist(optarg);
            break;
        case 'j': {
            char *end;
            jobs = strtol(optarg, &end, 10);
            if (*end || jobs < 1 || jobs > 256)
                scan_usage_error("-j: '%s' is not a number from 1 to 256", optarg);
            break;
        }
        case 'h': fputs(scan_usage, stdout); return 0;
        default:
            fputs("Try 'tckpt scan --help' for more information.\n", stderr);
            return 2;
        }
    }
    bool sarif_stdout = sarif && !strcmp(sarif, "-");
    if (json && sarif_stdout)
        scan_usage_error("%s", "--json and --sarif - both write to standard output");
    S.o.allow = S.allow;
    S.o.nallow = S.nallow;
    bool seen_cmd = false;
    for (int i = optind; i < argc; i++) {
        if (!seen_cmd && !strcmp(argv[i], "scan")) {
            seen_cmd = true;
            continue;
        }
        struct stat st;
        if (!strcmp(argv[i], "-")) {
            if (stdin_used)
                scan_usage_error("%s", "standard input (-) given twice");
            stdin_used = true;
        }
        if (rec && strcmp(argv[i], "-") && stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode) &&
            !tn_dcp_is_dir(argv[i]))
            walk(argv[i], 0);
        else
            add_file(argv[i]);
    }
    if (!S.n && !rec)
        scan_usage_error("%s", "no FILE given (use - for standard input)");
    if (!S.n) { /* folders given to -r, and nothing in them */
        fputs("tckpt: scan: no file found under the folders given\n", stderr);
        return 2;
    }
    /* The SARIF file is opened first: an unwritable path is an error
     * before any scan. */
    struct tn_out *so = NULL;
    if (sarif && !(so = tn_out_open(sarif))) {
        fprintf(stderr, "tckpt: %s\n", tn_last_error());
        return 2;
    }
    if (jobs > (long)S.n)
        jobs = (long)S.n;
    pthread_t th[256];
    long started = 0;
    for (long i = 1; i < jobs; i++)
        if (pthread_create(&th[started], NULL, worker, NULL) == 0)
            started++;
    worker(NULL);
    for (long i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (json)
        print_json();
    else if (!sarif_stdout)
        print_text();
    int rc = 0;
    bool any = false, inc = false;
    for (size_t i = 0; i < S.n; i++) {
        const struct tn_scan_report *r = &S.f[i].r;
        for (size_t k = 0; k < r->n; k++)
            any |= (int)r->f[k].severity >= S.fail_on;
        inc |= r->incomplete && !(r->not_model && S.not_model_ok && !r->n);
    }
    rc = any ? 1 : inc ? 2 : 0;
    /* The report first, so that SARIF's exit code counts its failure. */
    if (!sarif_stdout && tn_stdout_flush() < 0) {
        fprintf(stderr, "tckpt: %s\n", tn_last_error());
        rc = 2;
    }
    if (so) {
        write_sarif(tn_out_file(so), rc);
        if (tn_out_commit(so, false) < 0) {
            fprintf(stderr, "tckpt: %s\n", tn_last_error());
            rc = 2;
        }
    }
    if (sarif_stdout && tn_stdout_flush() < 0) {
        fprintf(stderr, "tckpt: %s\n", tn_last_error());
        rc = 2;
    }
    for (size_t i = 0; i < S.n; i++) {
        tn_scan_report_free(&S.f[i].r);
        free(S.f[i].path);
    }
    free(S.f);
    for (size_t i = 0; i < S.nallow; i++)
        free((char *)S.allow[i]);
    free(S.allow);
    return rc;
}
