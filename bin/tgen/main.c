/*
 * tgen: operator codegen. Reads a native_functions.yaml (PyTorch's schema
 * grammar) and writes the C declarations, the dispatcher registrations and
 * the argument checks; --list prints the ops a schema declares.
 */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tensor/core.h>

#include "tgen.h"

static void usage(FILE *f)
{
    fputs("Usage: tgen [OPTION]... FILE\n"
          "Generate C operator declarations and dispatcher registrations from an op\n"
          "schema YAML (PyTorch's native_functions.yaml grammar).\n\n"
          "  -l, --list            print the ops FILE declares and exit\n"
          "  -j, --json            with --list: one JSON object\n"
          "  -H, --header=PATH     write the public header to PATH\n"
          "  -c, --source=PATH     write the registrations and entry points to PATH\n"
          "  -i, --include=NAME    the name the source #includes the header by\n"
          "                        (default: tensor/ops.h, or the header's file name\n"
          "                        with --plugin)\n"
          "  -P, --private-header=PATH  write what is below the public API (redispatch\n"
          "                        entries, kernel prototypes, the op table) to PATH,\n"
          "                        leaving the public header only the entry points\n"
          "  -I, --private-include=NAME  the name the source and the Autograd kernels\n"
          "                        #include the private header by (default: its file\n"
          "                        name)\n"
          "  -p, --plugin          generate a plugin for tn_library_load()\n"
          "  -o, --output=PREFIX   with --plugin: write PREFIX.h and PREFIX.c\n"
          "  -d, --derivatives=FILE  the backward formulas (derivatives.yaml): the op\n"
          "                        table gets their Autograd kernels\n"
          "  -a, --autograd=PATH   with --derivatives: write the Autograd kernels to PATH\n"
          "  -R, --redispatch=OPS  write the entry below a key (tn__redispatch_*) only\n"
          "                        for the ops whose Autograd kernel calls it and for\n"
          "                        OPS (name.overload, comma-separated: those the\n"
          "                        hand-written kernels call); without it, every op\n"
          "                        has one\n"
          "  -h, --help            show this help and exit\n"
          "  -V, --version         show the version and exit\n\n"
          "FILE - reads standard input. Exit status: 0 success, 2 a usage error or a bad\n"
          "schema (reported as file:line:column: message).\n", f);
}

/* --redispatch=OPS: an entry below a key only for the ops whose Autograd
 * kernel (named by tg_load_derivatives) calls it and for each op of OPS
 * ("cat,sort.values_stable"). 0, or -1 after naming an op the schema lacks. */
static int only_redispatch(struct tg_schema *s, const char *ops)
{
    for (int i = 0; i < s->nfuncs; i++)
        s->funcs[i].no_redispatch = !s->funcs[i].autograd[0];
    for (const char *p = ops; *p;) {
        size_t n = strcspn(p, ",");
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), p);
        struct tg_func *f = (struct tg_func *)tg_find(s, name);
        if (!f) {
            fprintf(stderr, "tgen: --redispatch: %s: no such op in %s\n", name, s->path);
            return -1;
        }
        f->no_redispatch = false;
        p += n + (p[n] == ',');
    }
    return 0;
}

/* Whether the regular file at path holds exactly buf[0..len) (a pipe or a
 * device, /dev/stdout, is never read: it is written). */
static bool same_content(const char *path, const char *buf, size_t len)
{
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != len)
        return false;
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    bool same = true;
    char chunk[65536];
    size_t at = 0, n;
    while (same && (n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        same = at + n <= len && !memcmp(chunk, buf + at, n);
        at += n;
    }
    same &= !ferror(f) && at == len;
    fclose(f);
    return same;
}

/* Writes through tn_out: a file is replaced whole or not at all, so a failed
 * run never leaves a half-written file for make to trust. A file whose
 * content would not change is left alone (its time too), so that an edit
 * of derivatives.yaml rebuilds the Autograd kernels, not every user of
 * tensor/ops.h. */
static int write_out(const char *path, int (*fn)(FILE *, void *), void *ctx)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) {
        fprintf(stderr, "tgen: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = fn(m, ctx);
    if (fclose(m) != 0 || rc < 0) {
        free(buf);
        return -1;
    }
    if (strcmp(path, "-") && same_content(path, buf, len)) {
        free(buf);
        return 0;
    }
    struct tn_out *o = tn_out_open(path);
    if (!o) {
        fprintf(stderr, "tgen: %s\n", tn_last_error());
        free(buf);
        return -1;
    }
    fwrite(buf, 1, len, tn_out_file(o));
    free(buf);
    if (tn_out_commit(o, false) < 0) {
        fprintf(stderr, "tgen: %s\n", tn_last_error());
        return -1;
    }
    return 0;
}

struct job {
    const struct tg_schema *s;
    const char *guard, *include, *private; /* private: the private header's include name */
    bool plugin;
    const struct tg_derivs *derivs;
};

static int do_autograd(FILE *f, void *ctx)
{
    struct job *j = ctx;
    return tg_write_autograd(j->s, j->derivs, f, j->include, j->private);
}

static int do_header(FILE *f, void *ctx)
{
    struct job *j = ctx;
    return tg_write_header(j->s, f, j->guard, j->plugin, j->private != NULL);
}

static int do_source(FILE *f, void *ctx)
{
    struct job *j = ctx;
    return tg_write_source(j->s, f, j->include, j->private, j->plugin);
}

static int do_private(FILE *f, void *ctx)
{
    struct job *j = ctx;
    return tg_write_private(j->s, f, j->guard, j->include);
}

static char *guard_of(const char *path)
{
    const char *b = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char *g = malloc(strlen(b) + 16);
    if (!g)
        return NULL;
    strcpy(g, "TGEN_");
    char *p = g + 5;
    for (; *b; b++)
        *p++ = isalnum((unsigned char)*b) ? (char)toupper((unsigned char)*b) : '_';
    *p = 0;
    return g;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"list", no_argument, NULL, 'l'},      {"json", no_argument, NULL, 'j'},
        {"header", required_argument, NULL, 'H'}, {"source", required_argument, NULL, 'c'},
        {"include", required_argument, NULL, 'i'}, {"plugin", no_argument, NULL, 'p'},
        {"output", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'},
        {"derivatives", required_argument, NULL, 'd'}, {"autograd", required_argument, NULL, 'a'},
        {"private-header", required_argument, NULL, 'P'},
        {"private-include", required_argument, NULL, 'I'},
        {"redispatch", required_argument, NULL, 'R'},
        {"version", no_argument, NULL, 'V'},   {NULL, 0, NULL, 0}};
    bool list = false, json = false, plugin = false;
    const char *header = NULL, *source = NULL, *include = NULL, *output = NULL;
    const char *derivs = NULL, *autograd = NULL, *priv = NULL, *priv_inc = NULL;
    const char *redisp = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "ljH:c:i:po:d:a:P:I:R:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'l': list = true; break;
        case 'j': json = true; break;
        case 'H': header = optarg; break;
        case 'c': source = optarg; break;
        case 'i': include = optarg; break;
        case 'p': plugin = true; break;
        case 'o': output = optarg; break;
        case 'd': derivs = optarg; break;
        case 'a': autograd = optarg; break;
        case 'P': priv = optarg; break;
        case 'I': priv_inc = optarg; break;
        case 'R': redisp = optarg; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("tgen (tensorkit) %s\n", PACKAGE_VERSION); return 0;
        default:
            fputs("Try 'tgen --help' for more information.\n", stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "tgen: %s\nTry 'tgen --help' for more information.\n",
                optind >= argc ? "missing schema FILE" : "only one schema FILE is read");
        return 2;
    }
    if (json && !list) {
        fputs("tgen: --json goes with --list\nTry 'tgen --help' for more information.\n", stderr);
        return 2;
    }
    if (output && !plugin) {
        fputs("tgen: --output goes with --plugin\nTry 'tgen --help' for more information.\n",
              stderr);
        return 2;
    }
    if (!list && !header && !source && !output) {
        fputs("tgen: nothing to do: give --list, --header, --source or --plugin --output\n"
              "Try 'tgen --help' for more information.\n", stderr);
        return 2;
    }
    if (plugin && (priv || priv_inc)) {
        fputs("tgen: --private-header goes without --plugin (a plugin's header is its own)\n"
              "Try 'tgen --help' for more information.\n", stderr);
        return 2;
    }
    if (autograd && !derivs) {
        fputs("tgen: --autograd goes with --derivatives\nTry 'tgen --help' for more information.\n",
              stderr);
        return 2;
    }
    struct tg_schema s;
    if (tg_load(argv[optind], &s) < 0) {
        tg_free(&s);
        return 2;
    }
    /* before the writers: it names the Autograd kernels of the op table */
    struct tg_derivs ds = {0};
    if (derivs && tg_load_derivatives(derivs, &s, &ds) < 0) {
        tg_free_derivatives(&ds);
        tg_free(&s);
        return 2;
    }
    if (redisp && only_redispatch(&s, redisp) < 0) {
        tg_free_derivatives(&ds);
        tg_free(&s);
        return 2;
    }
    int rc = 0;
    char *hbuf = NULL, *cbuf = NULL, *ibuf = NULL, *guard = NULL;
    if (list)
        tg_write_list(&s, stdout, json);
    if (output) {
        size_t n = strlen(output) + 3;
        hbuf = malloc(n);
        cbuf = malloc(n);
        if (!hbuf || !cbuf)
            return 2;
        snprintf(hbuf, n, "%s.h", output);
        snprintf(cbuf, n, "%s.c", output);
        header = hbuf;
        source = cbuf;
    }
    if (!include) {
        if (plugin && header) {
            const char *b = strrchr(header, '/') ? strrchr(header, '/') + 1 : header;
            ibuf = strdup(b);
            include = ibuf;
        } else {
            include = "tensor/ops.h";
        }
    }
    if (priv && !priv_inc)
        priv_inc = strrchr(priv, '/') ? strrchr(priv, '/') + 1 : priv;
    guard = guard_of(header ? header : "ops.h");
    struct job j = {&s, guard, include, priv_inc, plugin, NULL};
    if ((header || source) && tg_check_generatable(&s) < 0)
        rc = 2;
    if (!rc && header && write_out(header, do_header, &j) < 0)
        rc = 2;
    if (!rc && source && write_out(source, do_source, &j) < 0)
        rc = 2;
    char *pguard = priv ? guard_of(priv) : NULL;
    j.guard = pguard;
    if (!rc && priv && (!pguard || write_out(priv, do_private, &j) < 0))
        rc = 2;
    free(pguard);
    j.derivs = &ds;
    if (!rc && autograd && write_out(autograd, do_autograd, &j) < 0)
        rc = 2;
    if (tn_stdout_flush() < 0) {
        fprintf(stderr, "tgen: %s\n", tn_last_error());
        rc = 2;
    }
    free(hbuf);
    free(cbuf);
    free(ibuf);
    free(guard);
    tg_free_derivatives(&ds);
    tg_free(&s);
    return rc;
}
