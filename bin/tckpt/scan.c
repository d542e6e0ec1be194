/*
 * bin/tckpt/scan.c: `tckpt scan`, the checkpoint auditor: runs the
 * library's scanner (tn_scan_*) over files, folders (-r) or standard input,
 * in parallel with -j, and prints text, JSON or SARIF 2.1.0.  Exit status:
 * 0 every file clean, 1 any finding, 2 a file could not be read or fully
 * analysed and showed no finding (never clean when incomplete), or a usage
 * error.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <tensor/core.h>
#include <tensor/io.h>

int tckpt_scan_main(int argc, char **argv);

static const char scan_usage[] =
    "Usage: tckpt scan [OPTION]... FILE...|-\n"
    "Audit checkpoints and pickles without running them: every global outside\n"
    "torch.load(weights_only=True)'s allowlist is reported, with anomalies.\n"
    "\n"
    "  -r, --recursive          scan every file under folders\n"
    "      --json               print one JSON object\n"
    "      --sarif=FILE         also write SARIF 2.1.0 to FILE\n"
    "      --policy=P           torch2 (default) or torch1.13\n"
    "      --allow=MODULE.NAME  also allow this global (never os, posix, nt, sys,\n"
    "                           subprocess, builtins.eval/exec)\n"
    "      --allowlist=FILE     globals to allow, one MODULE.NAME a line\n"
    "  -j, --jobs=N             scan N files at a time (default 1)\n"
    "  -h, --help               print this help and exit\n"
    "\n"
    "Exit status: 0 all clean; 1 findings; 2 a file could not be read or\n"
    "fully analysed (and showed no finding), or a usage error.\n";

struct file {
    char *path;
    struct tn_scan_report r;
};

static struct {
    struct file *f;
    size_t n, cap;
    size_t next;
    pthread_mutex_t lock;
    struct tn_scan_options o;
    const char **allow;
    size_t nallow, capallow;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

_Noreturn static void scan_usage_error(const char *fmt, const char *arg)
{
    fputs("tckpt: scan: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\nTry 'tckpt scan --help' for more information.\n", stderr);
    exit(2);
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
    FILE *f = fopen(path, "r");
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
        if (d)
            closedir(d);
        add_file(dir); /* reported as unreadable */
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
        if (lstat(names[i], &st) == 0 && S_ISDIR(st.st_mode))
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
    if (!strcmp(f->path, "-")) {
        scan_stdin(f);
        return;
    }
    struct stat st;
    if (stat(f->path, &st) == 0 && S_ISDIR(st.st_mode)) {
        f->r.incomplete = true;
        size_t l = strlen(f->path) + 64;
        f->r.error = xrealloc(NULL, l);
        snprintf(f->r.error, l, "%s: is a folder (use -r)", f->path);
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
    return r->n ? "findings" : r->incomplete ? "incomplete" : "clean";
}

static void print_text(void)
{
    size_t sev[4] = {0}, clean = 0, bad = 0, inc = 0;
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
            printf("@%llu: %s", (unsigned long long)f->offset, tn_scan_severity_name(f->severity));
            if (*f->module || *f->name) {
                fputc(' ', stdout);
                tstr(stdout, f->module);
                fputc('.', stdout);
                tstr(stdout, f->name);
                printf(" (%s)", tn_scan_use_name(f->use));
            }
            printf(" [%s]\n", f->reason);
        }
        if (r->incomplete) {
            tstr(stdout, S.f[i].path);
            fputs(": incomplete: ", stdout);
            tstr(stdout, r->error ? r->error : "the scan could not finish");
            fputc('\n', stdout);
        }
        if (r->n)
            bad++;
        else if (r->incomplete)
            inc++;
        else
            clean++;
    }
    printf("scanned %zu file%s: %zu clean, %zu with findings (%zu dangerous, %zu unknown, "
           "%zu suspicious), %zu incomplete\n", S.n, S.n == 1 ? "" : "s", clean, bad,
           sev[TN_SCAN_DANGEROUS], sev[TN_SCAN_UNKNOWN], sev[TN_SCAN_SUSPICIOUS], inc);
}

static void print_json(void)
{
    size_t clean = 0, bad = 0, inc = 0;
    fputs("{\"files\":[", stdout);
    for (size_t i = 0; i < S.n; i++) {
        const struct tn_scan_report *r = &S.f[i].r;
        fputs(i ? ",{\"path\":" : "{\"path\":", stdout);
        jstr(stdout, S.f[i].path);
        fputs(",\"format\":", stdout);
        if (r->format)
            jstr(stdout, r->format);
        else
            fputs("null", stdout);
        printf(",\"status\":\"%s\",\"incomplete\":%s,\"error\":", status_of(r),
               r->incomplete ? "true" : "false");
        if (r->error)
            jstr(stdout, r->error);
        else
            fputs("null", stdout);
        fputs(",\"findings\":[", stdout);
        for (size_t k = 0; k < r->n; k++) {
            const struct tn_scan_finding *f = &r->f[k];
            fputs(k ? ",{\"entry\":" : "{\"entry\":", stdout);
            jstr(stdout, f->entry);
            printf(",\"offset\":%llu,\"module\":", (unsigned long long)f->offset);
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
            printf(",\"use\":\"%s\",\"severity\":\"%s\",\"reason\":\"%s\"}",
                   tn_scan_use_name(f->use), tn_scan_severity_name(f->severity), f->reason);
        }
        fputs("]}", stdout);
        if (r->n)
            bad++;
        else if (r->incomplete)
            inc++;
        else
            clean++;
    }
    printf("],\"summary\":{\"files\":%zu,\"clean\":%zu,\"findings\":%zu,\"incomplete\":%zu}}\n",
           S.n, clean, bad, inc);
}

static int write_sarif(const char *path)
{
    FILE *o = fopen(path, "w");
    if (!o) {
        fprintf(stderr, "tckpt: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(o, "{\"$schema\":\"https://json.schemastore.org/sarif-2.1.0.json\",\"version\":"
               "\"2.1.0\",\"runs\":[{\"tool\":{\"driver\":{\"name\":\"tckpt scan\","
               "\"version\":");
    jstr(o, tn_version());
    fputs(",\"informationUri\":\"https://github.com/tensorkit/tensorkit\"}},\"results\":[", o);
    bool first = true;
    for (size_t i = 0; i < S.n; i++) {
        const struct tn_scan_report *r = &S.f[i].r;
        for (size_t k = 0; k <= r->n; k++) {
            const struct tn_scan_finding *f = k < r->n ? &r->f[k] : NULL;
            if (!f && !r->incomplete)
                break;
            fputs(first ? "{" : ",{", o);
            first = false;
            fputs("\"ruleId\":", o);
            jstr(o, f ? f->reason : "scan-incomplete");
            fprintf(o, ",\"level\":\"%s\",\"message\":{\"text\":",
                    !f || f->severity != TN_SCAN_SUSPICIOUS ? "error" : "warning");
            char msg[1024];
            if (!f)
                snprintf(msg, sizeof msg, "incomplete: %s", r->error ? r->error : "?");
            else if (*f->module || *f->name)
                snprintf(msg, sizeof msg, "%s global %s.%s (%s) in %s", tn_scan_severity_name(f->severity),
                         f->module, f->name, tn_scan_use_name(f->use), *f->entry ? f->entry : "the file");
            else
                snprintf(msg, sizeof msg, "suspicious: %s in %s", f->reason,
                         *f->entry ? f->entry : "the file");
            jstr(o, msg);
            fputs("},\"locations\":[{\"physicalLocation\":{\"artifactLocation\":{\"uri\":", o);
            jstr(o, S.f[i].path);
            fputs("}", o);
            if (f)
                fprintf(o, ",\"region\":{\"byteOffset\":%llu}", (unsigned long long)f->offset);
            fputs("}}]", o);
            if (f) {
                fputs(",\"properties\":{\"entry\":", o);
                jstr(o, f->entry);
                fprintf(o, ",\"severity\":\"%s\"}", tn_scan_severity_name(f->severity));
            }
            fputs("}", o);
        }
    }
    fputs("]}]}\n", o);
    if (fclose(o) != 0) {
        fprintf(stderr, "tckpt: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

int tckpt_scan_main(int argc, char **argv)
{
    enum { O_JSON = 300, O_SARIF, O_POLICY, O_ALLOW, O_ALLOWLIST };
    static const struct option lo[] = {
        {"recursive", no_argument, NULL, 'r'}, {"json", no_argument, NULL, O_JSON},
        {"sarif", required_argument, NULL, O_SARIF}, {"policy", required_argument, NULL, O_POLICY},
        {"allow", required_argument, NULL, O_ALLOW},
        {"allowlist", required_argument, NULL, O_ALLOWLIST},
        {"jobs", required_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool rec = false, json = false;
    const char *sarif = NULL;
    long jobs = 1;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "rj:h", lo, NULL)) != -1) {
        switch (c) {
        case 'r': rec = true; break;
        case O_JSON: json = true; break;
        case O_SARIF: sarif = optarg; break;
        case O_POLICY:
            if (!strcmp(optarg, "torch2"))
                S.o.policy = TN_ALLOW_CURRENT;
            else if (!strcmp(optarg, "torch1.13") || !strcmp(optarg, "torch1"))
                S.o.policy = TN_ALLOW_TORCH1;
            else
                scan_usage_error("--policy: '%s' is not torch1.13 or torch2", optarg);
            break;
        case O_ALLOW: add_allow(optarg); break;
        case O_ALLOWLIST: read_allowlist(optarg); break;
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
    S.o.allow = S.allow;
    S.o.nallow = S.nallow;
    bool seen_cmd = false;
    for (int i = optind; i < argc; i++) {
        if (!seen_cmd && !strcmp(argv[i], "scan")) {
            seen_cmd = true;
            continue;
        }
        struct stat st;
        if (rec && strcmp(argv[i], "-") && stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
            walk(argv[i], 0);
        else
            add_file(argv[i]);
    }
    if (!S.n)
        scan_usage_error("%s", "no FILE given (use - for standard input)");
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
    else
        print_text();
    int rc = 0;
    bool any = false, inc = false;
    for (size_t i = 0; i < S.n; i++) {
        any |= S.f[i].r.n > 0;
        inc |= S.f[i].r.incomplete;
    }
    rc = any ? 1 : inc ? 2 : 0;
    if (sarif && write_sarif(sarif) < 0 && rc == 0)
        rc = 2;
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
