/*
 * io/scan.c: the checkpoint auditor behind `tckpt scan`.  Default deny: a
 * model of the pickle machine simulates the stack and memo for every opcode
 * of protocols 0-5 (through tn__pickle_decode, the decoder the loader walks
 * too), resolves every global as CPython's find_class would (Py2 names
 * mapped for protocol < 3, dotted qualnames), and flags every global outside
 * the weights_only allowlist; containers (torch zips, legacy files, stacked
 * pickles, npy/npz, tars, nested archives, safetensors) are found from the
 * content and walked with limits.  Nothing in the input is ever run.
 */
#include "io/internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STACK (1u << 20) /* 24 MiB of model values */
#define MAX_MARKS (1u << 20)
#define MAX_MEMO (1u << 20)
#define MAX_GLOBALS 65536u
#define MAX_FINDINGS 10000u

/* ------------------------------------------------------------ the names */

/* pickle's _compat_pickle.IMPORT_MAPPING (Python 2 module -> Python 3),
 * the entries a scanner must know. */
static const char *const import_mapping[][2] = {
    {"__builtin__", "builtins"}, {"copy_reg", "copyreg"}, {"Queue", "queue"},
    {"SocketServer", "socketserver"}, {"ConfigParser", "configparser"}, {"repr", "reprlib"},
    {"cPickle", "pickle"}, {"_elementtree", "xml.etree.ElementTree"}, {"cStringIO", "io"},
    {"StringIO", "io"}, {"UserDict", "collections"}, {"UserList", "collections"},
    {"UserString", "collections"}, {"whichdb", "dbm"}, {"anydbm", "dbm"}, {"dbhash", "dbm.bsd"},
    {"dumbdbm", "dbm.dumb"}, {"gdbm", "dbm.gnu"}, {"commands", "subprocess"},
    {"httplib", "http.client"}, {"urllib2", "urllib.request"}, {"urlparse", "urllib.parse"},
    {"BaseHTTPServer", "http.server"}, {"SimpleHTTPServer", "http.server"},
    {"CGIHTTPServer", "http.server"}, {"xmlrpclib", "xmlrpc.client"},
    {"SimpleXMLRPCServer", "xmlrpc.server"}, {"DocXMLRPCServer", "xmlrpc.server"},
    {"htmlentitydefs", "html.entities"}, {"HTMLParser", "html.parser"}, {"Cookie", "http.cookies"},
    {"cookielib", "http.cookiejar"}, {"thread", "_thread"}, {"dummy_thread", "_dummy_thread"},
    {"robotparser", "urllib.robotparser"}, {"exceptions", "builtins"}, {"Tkinter", "tkinter"},
    {"markupbase", "_markupbase"}, {"_winreg", "winreg"}, {"dbm", "dbm.ndbm"},
    {"future_builtins", "builtins"}, {"urllib", "urllib.parse"}, {"test.test_support", "test.support"},
};

/* _compat_pickle.NAME_MAPPING: (module, name) -> (module, name). */
static const char *const name_mapping[][4] = {
    {"__builtin__", "xrange", "builtins", "range"},
    {"__builtin__", "reduce", "functools", "reduce"},
    {"__builtin__", "intern", "sys", "intern"},
    {"__builtin__", "unichr", "builtins", "chr"},
    {"__builtin__", "unicode", "builtins", "str"},
    {"__builtin__", "long", "builtins", "int"},
    {"__builtin__", "basestring", "builtins", "str"},
    {"__builtin__", "raw_input", "builtins", "input"},
    {"__builtin__", "execfile", "builtins", "exec"},
    {"itertools", "izip", "builtins", "zip"},
    {"itertools", "imap", "builtins", "map"},
    {"itertools", "ifilter", "builtins", "filter"},
    {"itertools", "ifilterfalse", "itertools", "filterfalse"},
    {"itertools", "izip_longest", "itertools", "zip_longest"},
    {"UserDict", "IterableUserDict", "collections", "UserDict"},
    {"UserList", "UserList", "collections", "UserList"},
    {"UserString", "UserString", "collections", "UserString"},
    {"whichdb", "whichdb", "dbm", "whichdb"},
    {"_socket", "fromfd", "socket", "fromfd"},
    {"_multiprocessing", "Connection", "multiprocessing.connection", "Connection"},
    {"multiprocessing.process", "Process", "multiprocessing.context", "Process"},
    {"multiprocessing.forking", "Popen", "multiprocessing.popen_fork", "Popen"},
    {"urllib", "ContentTooShortError", "urllib.error", "ContentTooShortError"},
    {"urllib", "getproxies", "urllib.request", "getproxies"},
    {"urllib", "pathname2url", "urllib.request", "pathname2url"},
    {"urllib", "quote_plus", "urllib.parse", "quote_plus"},
    {"urllib", "quote", "urllib.parse", "quote"},
    {"urllib", "unquote_plus", "urllib.parse", "unquote_plus"},
    {"urllib", "unquote", "urllib.parse", "unquote"},
    {"urllib", "url2pathname", "urllib.request", "url2pathname"},
    {"urllib", "urlcleanup", "urllib.request", "urlcleanup"},
    {"urllib", "urlencode", "urllib.parse", "urlencode"},
    {"urllib", "urlopen", "urllib.request", "urlopen"},
    {"urllib", "urlretrieve", "urllib.request", "urlretrieve"},
    {"urllib2", "HTTPError", "urllib.error", "HTTPError"},
    {"urllib2", "URLError", "urllib.error", "URLError"},
};

/* Modules (and their submodules) that run code or touch files, processes
 * or the network: any global under them is dangerous.  Reviewed:
 * - copyreg stays: add_extension rewrites what EXT opcodes load (no static
 *   model survives that), _reconstructor and __newobj__ build any class;
 * - operator stays: attrgetter("__globals__") on any allowed function
 *   reaches builtins, and methodcaller/itemgetter call from there, a
 *   getattr chain with no other global;
 * - torch.jit stays (load, script and trace compile and run code) but
 *   torch.jit._pickle, whose build_intlist-style helpers fill every
 *   TorchScript debug pickle and only build lists, is merely unknown;
 * - functools is no longer dangerous: partial and reduce only call what
 *   they are given, which is flagged on its own, and partial objects fill
 *   ordinary whole-model pickles; its globals are unknown (still findings);
 * - io is no longer dangerous: BytesIO and StringIO are memory; the names
 *   that open files (open, open_code, FileIO) are in dangerous_globals. */
static const char *const dangerous_modules[] = {
    "os", "posix", "nt", "posixpath", "ntpath", "subprocess", "_posixsubprocess", "sys", "runpy",
    "importlib", "pkgutil", "pydoc", "pickle", "_pickle", "cPickle", "pickletools", "shelve",
    "marshal", "dill", "joblib", "cloudpickle", "shutil", "socket", "_socket", "socketserver",
    "ssl", "select", "selectors", "ctypes", "_ctypes", "cffi", "code", "codeop", "pty", "tty",
    "webbrowser", "asyncio", "multiprocessing", "_multiprocessing", "concurrent", "threading",
    "_thread", "signal", "pdb", "bdb", "trace", "timeit", "cProfile", "profile", "types",
    "inspect", "platform", "sysconfig", "site", "distutils", "setuptools", "pip", "ensurepip",
    "venv", "zipimport", "http", "urllib", "urllib2", "httplib", "requests", "aiohttp", "httpx",
    "ftplib", "smtplib", "telnetlib", "imaplib", "poplib", "nntplib", "xmlrpc", "email",
    "tempfile", "_pyio", "pathlib", "fileinput", "glob", "linecache", "tarfile", "zipfile",
    "dbm", "sqlite3", "uuid", "_osx_support", "_aix_support", "_pyrepl", "_interpreters",
    "_xxsubinterpreters", "_posixshmem", "mmap", "resource", "gc", "ast", "dis", "compileall",
    "py_compile", "tkinter", "idlelib", "lib2to3", "logging", "antigravity", "this", "__main__", "copyreg", "copy_reg", "operator", "_operator",
    "torch.hub", "torch.jit", "torch.package", "torch.serialization", "torch.utils.cpp_extension",
    "torch.utils.collect_env", "torch._inductor", "torch._dynamo", "torch.distributed.rpc",
    "torch.fx", "torch.ops", "torch._ops", "torch.library", "torch.cuda.memory",
    "numpy.lib.npyio", "numpy.load", "numpy.testing", "numpy.f2py", "numpy.distutils",
    "pandas.io", "mlflow", "keras", "tensorflow", "IPython", "jinja2", "yaml",
};

/* Single globals that are dangerous in modules that are otherwise benign. */
static const char *const dangerous_globals[] = {
    "builtins.eval", "builtins.exec", "builtins.compile", "builtins.getattr", "builtins.setattr",
    "builtins.delattr", "builtins.__import__", "builtins.open", "builtins.breakpoint",
    "builtins.input", "builtins.globals", "builtins.locals", "builtins.vars", "builtins.help",
    "builtins.exit", "builtins.quit", "builtins.__loader__", "builtins.__spec__",
    "builtins.__builtins__", "__builtin__.eval", "__builtin__.execfile", "__builtin__.file",
    "__builtin__.open", "__builtin__.getattr", "__builtin__.__import__", "__builtin__.compile",
    "torch.load", "torch.save", "torch.from_file", "numpy.load", "numpy.save", "numpy.fromfile",
    "numpy.loadtxt", "numpy.genfromtxt", "numpy.memmap", "numpy.core.multiarray._reconstruct.__globals__",
    "pandas.read_csv", "pandas.read_pickle", "pandas.read_json", "pandas.read_html",
    "codecs.open", "collections.namedtuple", "io.open", "io.open_code", "io.FileIO", "_io.open",
    "_io.open_code", "_io.FileIO",
};

/* Under a dangerous module, but only building values (see above). */
static const char *const benign_under_dangerous[] = {"torch.jit._pickle"};

/* Name components that reach code or other modules in a dotted path. */
static const char *const dangerous_components[] = {
    "eval", "exec", "compile", "system", "popen", "spawn", "execv", "execve", "getattr",
    "setattr", "__import__", "open", "load", "loads", "import_module", "resolve_name", "locate",
    "run", "call", "check_output", "Popen",
};

static bool starts_module(const char *full, const char *m)
{
    size_t l = strlen(m);
    return !strncmp(full, m, l) && (full[l] == 0 || full[l] == '.');
}

/* Is the dotted path `full` ("module.name.attr") dangerous? */
static bool dangerous_path(const char *full)
{
    for (size_t i = 0; i < sizeof benign_under_dangerous / sizeof *benign_under_dangerous; i++)
        if (starts_module(full, benign_under_dangerous[i]))
            return false;
    for (size_t i = 0; i < sizeof dangerous_modules / sizeof *dangerous_modules; i++)
        if (starts_module(full, dangerous_modules[i]))
            return true;
    for (size_t i = 0; i < sizeof dangerous_globals / sizeof *dangerous_globals; i++)
        if (starts_module(full, dangerous_globals[i]))
            return true;
    return false;
}

/* A dotted name reaching a dunder or another dangerous module/function. */
static bool dangerous_name(const char *name)
{
    if (!strchr(name, '.'))
        return false;
    const char *p = name;
    while (*p) {
        const char *e = strchr(p, '.');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l >= 4 && p[0] == '_' && p[1] == '_' && p[l - 1] == '_' && p[l - 2] == '_')
            return true;
        for (size_t i = 0; i < sizeof dangerous_components / sizeof *dangerous_components; i++)
            if (strlen(dangerous_components[i]) == l && !memcmp(p, dangerous_components[i], l))
                return true;
        for (size_t i = 0; i < sizeof dangerous_modules / sizeof *dangerous_modules; i++)
            if (strlen(dangerous_modules[i]) == l && !memcmp(p, dangerous_modules[i], l))
                return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

void tn__scan_resolve(const char *module, const char *name, int proto, const char **omod,
                      const char **oname)
{
    *omod = module;
    *oname = name;
    if (proto >= 3)
        return;
    for (size_t i = 0; i < sizeof name_mapping / sizeof *name_mapping; i++)
        if (!strcmp(module, name_mapping[i][0]) && !strcmp(name, name_mapping[i][1])) {
            *omod = name_mapping[i][2];
            *oname = name_mapping[i][3];
            return;
        }
    for (size_t i = 0; i < sizeof import_mapping / sizeof *import_mapping; i++)
        if (!strcmp(module, import_mapping[i][0])) {
            *omod = import_mapping[i][1];
            return;
        }
}

bool tn_scan_allow_ok(const char *full)
{
    static const char *const never[] = {"os", "posix", "nt", "sys", "subprocess",
                                        "builtins.eval", "builtins.exec", "__builtin__"};
    if (!full || !strchr(full, '.'))
        return false;
    for (size_t i = 0; i < sizeof never / sizeof *never; i++)
        if (starts_module(full, never[i]))
            return false;
    return true;
}

/* Severity of a resolved module.name (no Py2 mapping here). */
static int classify(const char *mod, const char *name, const struct tn_scan_options *o)
{
    if (!*mod || !*name)
        return TN_SCAN_UNKNOWN;
    size_t ml = strlen(mod), nl = strlen(name);
    char *full = malloc(ml + nl + 2);
    if (!full)
        return TN_SCAN_UNKNOWN;
    memcpy(full, mod, ml);
    full[ml] = '.';
    memcpy(full + ml + 1, name, nl + 1);
    int sev = 0;
    /* sys, os, posix and nt stay blocked even when allowlisted, as in torch. */
    bool blocked = starts_module(full, "sys") || starts_module(full, "os") ||
                   starts_module(full, "posix") || starts_module(full, "nt");
    if (blocked)
        sev = TN_SCAN_DANGEROUS;
    else if (tn__pickle_global_allowed(mod, name, o->policy))
        sev = 0;
    else {
        bool user = false;
        for (size_t i = 0; i < o->nallow && !user; i++)
            user = o->allow[i] && !strcmp(o->allow[i], full) && tn_scan_allow_ok(full);
        if (user)
            sev = 0;
        else if (dangerous_path(full) || dangerous_name(name))
            sev = TN_SCAN_DANGEROUS;
        else
            sev = TN_SCAN_UNKNOWN;
    }
    free(full);
    return sev;
}

static const struct tn_scan_options default_opts;

int tn_scan_global_severity(const char *module, const char *name, int proto,
                            const struct tn_scan_options *opts)
{
    const struct tn_scan_options *o = opts ? opts : &default_opts;
    const char *m, *n;
    tn__scan_resolve(module, name, proto, &m, &n);
    int sev = classify(m, n, o);
    /* PyTorch 1.13's weights_only loader does not map Py2 names (2.x and
     * CPython do): under that policy the file's own name counts too. */
    if (o->policy == TN_ALLOW_TORCH1 && (m != module || n != name)) {
        int raw = classify(module, name, o);
        sev = raw > sev ? raw : sev;
    }
    return sev;
}

const char *tn_scan_severity_name(enum tn_scan_severity s)
{
    switch (s) {
    case TN_SCAN_DANGEROUS: return "dangerous";
    case TN_SCAN_UNKNOWN: return "unknown";
    case TN_SCAN_SUSPICIOUS: return "suspicious";
    }
    return "?";
}

const char *tn_scan_use_name(enum tn_scan_use u)
{
    switch (u) {
    case TN_SCAN_CALLED: return "called";
    case TN_SCAN_BUILT: return "built";
    case TN_SCAN_IMPORTED: return "imported";
    default: return "none";
    }
}

/* ------------------------------------------------------------ the report */

struct ctx {
    const struct tn_scan_options *o;
    struct tn_scan_report *r;
    unsigned depth;
    size_t entries;
    uint64_t expanded;
    bool oom;
};

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static void add(struct ctx *c, const char *entry, uint64_t off, const char *mod, const char *name,
                enum tn_scan_use use, int sev, const char *reason)
{
    struct tn_scan_report *r = c->r;
    if (r->n >= MAX_FINDINGS) {
        r->incomplete = true;
        return;
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        struct tn_scan_finding *f = realloc(r->f, cap * sizeof *f);
        if (!f) {
            c->oom = true;
            r->incomplete = true;
            return;
        }
        r->f = f;
        r->cap = cap;
    }
    struct tn_scan_finding *f = &r->f[r->n];
    f->entry = dupn(entry, strlen(entry));
    f->module = dupn(mod, strlen(mod));
    f->name = dupn(name, strlen(name));
    if (!f->entry || !f->module || !f->name) {
        free(f->entry);
        free(f->module);
        free(f->name);
        c->oom = true;
        r->incomplete = true;
        return;
    }
    f->offset = off;
    f->use = use;
    f->severity = (enum tn_scan_severity)sev;
    f->reason = reason;
    r->n++;
}

static void anomaly(struct ctx *c, const char *entry, uint64_t off, const char *reason)
{
    add(c, entry, off, "", "", TN_SCAN_NONE, TN_SCAN_SUSPICIOUS, reason);
}

static void incomplete(struct ctx *c, const char *why)
{
    c->r->incomplete = true;
    if (!c->r->error)
        c->r->error = dupn(why, strlen(why));
}

void tn_scan_report_free(struct tn_scan_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        free(r->f[i].entry);
        free(r->f[i].module);
        free(r->f[i].name);
    }
    free(r->f);
    free(r->error);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------- pickle machine */

enum { V_OTHER, V_STR, V_BYTES, V_GLOBAL, V_RESULT };

struct sv {
    uint8_t k;
    uint32_t g; /* V_GLOBAL: index into the globals */
    const char *s;
    size_t n;
};

struct glob {
    char *mod, *name;
    uint64_t off;
    enum tn_scan_use use;
    int sev;
    const char *reason;
};

struct memo_slot {
    uint64_t key;
    bool used;
    struct sv v;
};

struct pm {
    struct ctx *c;
    const char *entry;
    struct sv *st;
    size_t n, cap;
    size_t *marks;
    size_t nmarks, capmarks;
    struct memo_slot *memo;
    size_t memocap, memon;
    /* Indices pickles number densely from 0 (every writer does) live in
     * this array, indexed directly: the hash above, scattered over MiBs,
     * was a quarter of scanning 20,000 tensors.  It grows only to cover an
     * index below twice the entries so far (plus 1024); others hash. */
    struct memo_slot *dense;
    size_t densecap;
    struct glob *g;
    size_t ng, capg;
    /* open-addressed index of g by (module, name): slot = index + 1, 0
     * empty; sized a power of two at least twice ng */
    uint32_t *gh;
    size_t ghcap;
    int proto;
    bool fatal;
    uint64_t start; /* offset of the pickle's first opcode */
    uint64_t frame_end; /* 0: not in a frame */
    uint32_t seen; /* anomaly reasons already reported (bit per reason) */
};

/* Reports an anomaly once per stream. */
static void pm_anomaly(struct pm *m, unsigned bit, uint64_t off, const char *reason)
{
    if (m->seen & (1u << bit))
        return;
    m->seen |= 1u << bit;
    anomaly(m->c, m->entry, off, reason);
}

static void push(struct pm *m, struct sv v, uint64_t off)
{
    if (m->n == m->cap) {
        if (m->cap >= MAX_STACK) {
            pm_anomaly(m, 0, off, "stack-limit");
            m->fatal = true;
            return;
        }
        size_t cap = m->cap ? m->cap * 2 : 64;
        struct sv *s = realloc(m->st, cap * sizeof *s);
        if (!s) {
            m->c->oom = true;
            m->fatal = true;
            return;
        }
        m->st = s;
        m->cap = cap;
    }
    m->st[m->n++] = v;
}

static size_t floor_of(const struct pm *m) { return m->nmarks ? m->marks[m->nmarks - 1] : 0; }

/* Pops one item; an underflow (where CPython stops with an error, after
 * whatever ran before) is reported and yields an unknown value. */
static struct sv pop(struct pm *m, uint64_t off)
{
    if (m->n > floor_of(m))
        return m->st[--m->n];
    pm_anomaly(m, 1, off, "stack-underflow");
    return (struct sv){V_OTHER, 0, NULL, 0};
}

static struct sv *top(struct pm *m, uint64_t off)
{
    if (m->n > floor_of(m))
        return &m->st[m->n - 1];
    pm_anomaly(m, 1, off, "stack-underflow");
    return NULL;
}

/* The items above the topmost mark: their index; the mark is popped. */
static size_t pop_mark(struct pm *m, uint64_t off)
{
    if (!m->nmarks) {
        pm_anomaly(m, 2, off, "mark-missing");
        return m->n;
    }
    return m->marks[--m->nmarks];
}

static size_t global_hash(const char *mod, const char *name)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a over "mod\0name" */
    for (const char *p = mod; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211u;
    h *= 1099511628211u;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211u;
    return (size_t)(h ^ h >> 32);
}

/* The slot of (mod, name) in m->gh: its entry, or the empty slot for it. */
static size_t global_slot(const struct pm *m, const char *mod, const char *name)
{
    size_t i = global_hash(mod, name) & (m->ghcap - 1);
    while (m->gh[i]) {
        const struct glob *g = &m->g[m->gh[i] - 1];
        if (!strcmp(g->mod, mod) && !strcmp(g->name, name))
            break;
        i = (i + 1) & (m->ghcap - 1);
    }
    return i;
}

/* Grows the index to hold one more global (rehashing every one). */
static bool global_index_grow(struct pm *m)
{
    if (m->ghcap >= 2 * (m->ng + 1))
        return true;
    size_t cap = m->ghcap ? m->ghcap * 2 : 64;
    uint32_t *gh = calloc(cap, sizeof *gh);
    if (!gh)
        return false;
    free(m->gh);
    m->gh = gh;
    m->ghcap = cap;
    for (size_t k = 0; k < m->ng; k++)
        m->gh[global_slot(m, m->g[k].mod, m->g[k].name)] = (uint32_t)k + 1;
    return true;
}

/* The global module.name (already resolved) as an index, created on first
 * sight with its verdict: a pickle naming a global a million times (or a
 * thousand globals in turn) holds one finding per global. */
static long global_index(struct pm *m, const char *mod, const char *name, uint64_t off, int sev,
                         const char *reason)
{
    if (m->ghcap) {
        size_t slot = global_slot(m, mod, name);
        if (m->gh[slot])
            return (long)m->gh[slot] - 1;
    }
    if (!global_index_grow(m)) {
        m->c->oom = true;
        m->fatal = true;
        return -1;
    }
    if (m->ng == m->capg) {
        if (m->capg >= MAX_GLOBALS) {
            pm_anomaly(m, 3, off, "globals-limit");
            m->fatal = true;
            return -1;
        }
        size_t cap = m->capg ? m->capg * 2 : 16;
        struct glob *g = realloc(m->g, cap * sizeof *g);
        if (!g) {
            m->c->oom = true;
            m->fatal = true;
            return -1;
        }
        m->g = g;
        m->capg = cap;
    }
    struct glob *g = &m->g[m->ng];
    g->mod = dupn(mod, strlen(mod));
    g->name = dupn(name, strlen(name));
    if (!g->mod || !g->name) {
        free(g->mod);
        free(g->name);
        m->c->oom = true;
        m->fatal = true;
        return -1;
    }
    g->off = off;
    g->use = TN_SCAN_IMPORTED;
    g->sev = sev;
    g->reason = reason;
    m->gh[global_slot(m, g->mod, g->name)] = (uint32_t)m->ng + 1;
    return (long)m->ng++;
}

static void push_global(struct pm *m, const char *mod, size_t ml, const char *name, size_t nl,
                        uint64_t off)
{
    char *a = dupn(mod, ml), *b = dupn(name, nl);
    if (!a || !b) {
        free(a);
        free(b);
        m->c->oom = true;
        m->fatal = true;
        return;
    }
    const char *rm, *rn;
    tn__scan_resolve(a, b, m->proto, &rm, &rn);
    int sev;
    const char *reason = NULL;
    if (memchr(mod, 0, ml) || memchr(name, 0, nl)) {
        sev = TN_SCAN_UNKNOWN; /* CPython refuses; a C scanner must not truncate it */
        reason = "global-nul";
    } else {
        sev = tn_scan_global_severity(a, b, m->proto, m->c->o);
        reason = sev == TN_SCAN_DANGEROUS ? "dangerous-global" : "global-not-allowed";
    }
    long i = global_index(m, rm, rn, off, sev, reason);
    free(a);
    free(b);
    if (i >= 0)
        push(m, (struct sv){V_GLOBAL, (uint32_t)i, NULL, 0}, off);
}

/* A callable (or class) was used: record how, or flag it as unresolved. */
static void use(struct pm *m, struct sv f, enum tn_scan_use u, uint64_t off)
{
    if (f.k == V_GLOBAL) {
        if (m->g[f.g].use < u)
            m->g[f.g].use = u;
        return;
    }
    long i = global_index(m, "?", "?", off, TN_SCAN_UNKNOWN, "callable-unresolved");
    if (i >= 0 && m->g[i].use < u)
        m->g[i].use = u;
}

/* The hash table's slot for key: its entry, or the empty slot for it. */
static struct memo_slot *memo_probe(struct memo_slot *t, size_t cap, uint64_t key)
{
    size_t h = (size_t)(key * 0x9e3779b97f4a7c15ull) & (cap - 1);
    while (t[h].used && t[h].key != key)
        h = (h + 1) & (cap - 1);
    return &t[h];
}

static struct memo_slot *memo_find(struct pm *m, uint64_t key, bool create, uint64_t off)
{
    if (key < m->densecap && m->dense[key].used)
        return &m->dense[key];
    if (m->memocap) { /* an index put before the array covered it */
        struct memo_slot *s = memo_probe(m->memo, m->memocap, key);
        if (s->used)
            return s;
    }
    if (!create)
        return NULL;
    if (m->memon >= MAX_MEMO) {
        pm_anomaly(m, 4, off, "memo-limit");
        m->fatal = true;
        return NULL;
    }
    if (key >= m->densecap && key < 2 * (uint64_t)m->memon + 1024) {
        size_t cap = m->densecap ? m->densecap * 2 : 1024;
        while (cap <= key)
            cap *= 2;
        struct memo_slot *d = realloc(m->dense, cap * sizeof *d);
        if (!d) {
            m->c->oom = true;
            m->fatal = true;
            return NULL;
        }
        memset(d + m->densecap, 0, (cap - m->densecap) * sizeof *d);
        m->dense = d;
        m->densecap = cap;
    }
    struct memo_slot *s;
    if (key < m->densecap) {
        s = &m->dense[key];
    } else {
        if ((m->memon + 1) * 2 > m->memocap) {
            size_t cap = m->memocap ? m->memocap * 2 : 64;
            while (cap < (m->memon + 1) * 2)
                cap *= 2;
            struct memo_slot *t = calloc(cap, sizeof *t);
            if (!t) {
                m->c->oom = true;
                m->fatal = true;
                return NULL;
            }
            for (size_t i = 0; i < m->memocap; i++)
                if (m->memo[i].used)
                    *memo_probe(t, cap, m->memo[i].key) = m->memo[i];
            free(m->memo);
            m->memo = t;
            m->memocap = cap;
        }
        s = memo_probe(m->memo, m->memocap, key);
    }
    s->used = true;
    s->key = key;
    m->memon++;
    return s;
}

static void memo_put(struct pm *m, int64_t idx, uint64_t off)
{
    struct sv *t = top(m, off);
    if (idx < 0) {
        pm_anomaly(m, 5, off, "memo-negative");
        return;
    }
    struct memo_slot *s = memo_find(m, (uint64_t)idx, true, off);
    if (s)
        s->v = t ? *t : (struct sv){V_OTHER, 0, NULL, 0};
}

static void memo_get(struct pm *m, int64_t idx, uint64_t off)
{
    struct memo_slot *s = idx >= 0 ? memo_find(m, (uint64_t)idx, false, off) : NULL;
    if (!s) {
        pm_anomaly(m, 6, off, "memo-missing");
        push(m, (struct sv){V_OTHER, 0, NULL, 0}, off);
        return;
    }
    push(m, s->v, off);
}

/* STRING/UNICODE text arguments: a constant when no escape is involved. */
static struct sv text_value(const char *s, size_t n, bool quoted)
{
    if (quoted) {
        if (n < 2 || (s[0] != '\'' && s[0] != '"') || s[n - 1] != s[0])
            return (struct sv){V_OTHER, 0, NULL, 0};
        s++;
        n -= 2;
    }
    if (memchr(s, '\\', n))
        return (struct sv){V_OTHER, 0, NULL, 0};
    return (struct sv){V_STR, 0, s, n};
}

static void step(struct pm *m, const struct tn_pickle_op *op)
{
    uint64_t off = op->pos;
    struct sv other = {V_OTHER, 0, NULL, 0};
    switch (op->code) {
    case TN_OP_PROTO:
        if (op->i > 5)
            pm_anomaly(m, 7, off, "protocol-unsupported");
        if (off != m->start)
            pm_anomaly(m, 8, off, "proto-misplaced");
        m->proto = (int)op->i;
        return;
    case TN_OP_FRAME:
        if (m->frame_end && off < m->frame_end)
            pm_anomaly(m, 9, off, "frame-nested");
        if (op->i < 0 || (uint64_t)op->i > UINT64_MAX / 2) {
            pm_anomaly(m, 10, off, "frame-length");
            m->frame_end = 0;
            return;
        }
        m->frame_end = off + 9 + (uint64_t)op->i;
        return;
    case TN_OP_STOP: return; /* handled by the caller */
    case TN_OP_MARK:
        if (m->nmarks == m->capmarks) {
            if (m->capmarks >= MAX_MARKS) {
                pm_anomaly(m, 11, off, "mark-limit");
                m->fatal = true;
                return;
            }
            size_t cap = m->capmarks ? m->capmarks * 2 : 16;
            size_t *p = realloc(m->marks, cap * sizeof *p);
            if (!p) {
                m->c->oom = true;
                m->fatal = true;
                return;
            }
            m->marks = p;
            m->capmarks = cap;
        }
        m->marks[m->nmarks++] = m->n;
        return;
    case TN_OP_POP:
        if (m->n > floor_of(m))
            m->n--;
        else if (m->nmarks)
            m->nmarks--; /* CPython's POP takes a bare mark */
        else
            pm_anomaly(m, 1, off, "stack-underflow");
        return;
    case TN_OP_POP_MARK:
        m->n = pop_mark(m, off);
        return;
    case TN_OP_DUP: {
        struct sv *t = top(m, off);
        push(m, t ? *t : other, off);
        return;
    }
    case TN_OP_STRING: push(m, text_value(op->s, op->slen, true), off); return;
    case TN_OP_UNICODE: push(m, text_value(op->s, op->slen, false), off); return;
    case TN_OP_BINSTRING: case TN_OP_SHORT_BINSTRING: case TN_OP_BINUNICODE:
    case TN_OP_SHORT_BINUNICODE: case TN_OP_BINUNICODE8:
        push(m, (struct sv){V_STR, 0, op->s, op->slen}, off);
        return;
    case TN_OP_BINBYTES: case TN_OP_SHORT_BINBYTES: case TN_OP_BINBYTES8:
        push(m, (struct sv){V_BYTES, 0, op->s, op->slen}, off);
        return;
    case TN_OP_INT: case TN_OP_BININT: case TN_OP_BININT1: case TN_OP_BININT2: case TN_OP_LONG:
    case TN_OP_LONG1: case TN_OP_LONG4: case TN_OP_FLOAT: case TN_OP_BINFLOAT: case TN_OP_NONE:
    case TN_OP_NEWTRUE: case TN_OP_NEWFALSE: case TN_OP_EMPTY_TUPLE: case TN_OP_EMPTY_LIST:
    case TN_OP_EMPTY_DICT: case TN_OP_EMPTY_SET: case TN_OP_BYTEARRAY8:
        push(m, other, off);
        return;
    case TN_OP_NEXT_BUFFER:
        pm_anomaly(m, 12, off, "out-of-band-buffer");
        push(m, other, off);
        return;
    case TN_OP_READONLY_BUFFER:
        top(m, off);
        return;
    case TN_OP_TUPLE: case TN_OP_LIST: case TN_OP_DICT: case TN_OP_FROZENSET:
        m->n = pop_mark(m, off);
        push(m, other, off);
        return;
    case TN_OP_TUPLE1: case TN_OP_TUPLE2: case TN_OP_TUPLE3:
        for (int k = op->code - TN_OP_TUPLE1 + 1; k > 0; k--)
            pop(m, off);
        push(m, other, off);
        return;
    case TN_OP_APPEND: pop(m, off); top(m, off); return;
    case TN_OP_SETITEM: pop(m, off); pop(m, off); top(m, off); return;
    case TN_OP_APPENDS: case TN_OP_SETITEMS: case TN_OP_ADDITEMS:
        m->n = pop_mark(m, off);
        top(m, off);
        return;
    case TN_OP_GLOBAL:
        push_global(m, op->s, op->slen, op->s2, op->s2len, off);
        if (!m->fatal)
            use(m, m->st[m->n - 1], TN_SCAN_IMPORTED, off);
        return;
    case TN_OP_STACK_GLOBAL: {
        struct sv name = pop(m, off), mod = pop(m, off);
        if (name.k == V_STR && mod.k == V_STR) {
            push_global(m, mod.s, mod.n, name.s, name.n, off);
            return;
        }
        long i = global_index(m, "?", "?", off, TN_SCAN_UNKNOWN, "stack-global-unresolved");
        if (i >= 0)
            push(m, (struct sv){V_GLOBAL, (uint32_t)i, NULL, 0}, off);
        return;
    }
    case TN_OP_INST: {
        m->n = pop_mark(m, off);
        push_global(m, op->s, op->slen, op->s2, op->s2len, off);
        if (m->fatal)
            return;
        struct sv f = pop(m, off);
        use(m, f, TN_SCAN_CALLED, off);
        push(m, (struct sv){V_RESULT, 0, NULL, 0}, off);
        return;
    }
    case TN_OP_OBJ: {
        size_t b = pop_mark(m, off);
        struct sv f = b < m->n ? m->st[b] : other;
        if (b >= m->n)
            pm_anomaly(m, 1, off, "stack-underflow");
        m->n = b;
        use(m, f, TN_SCAN_CALLED, off);
        push(m, (struct sv){V_RESULT, 0, NULL, 0}, off);
        return;
    }
    case TN_OP_NEWOBJ: case TN_OP_NEWOBJ_EX: {
        if (op->code == TN_OP_NEWOBJ_EX)
            pop(m, off);
        pop(m, off);
        struct sv f = pop(m, off);
        use(m, f, TN_SCAN_BUILT, off);
        push(m, (struct sv){V_RESULT, 0, NULL, 0}, off);
        return;
    }
    case TN_OP_REDUCE: {
        pop(m, off);
        struct sv f = pop(m, off);
        use(m, f, TN_SCAN_CALLED, off);
        push(m, (struct sv){V_RESULT, 0, NULL, 0}, off);
        return;
    }
    case TN_OP_BUILD: {
        pop(m, off);
        struct sv *t = top(m, off);
        if (t && t->k == V_GLOBAL) {
            /* setattr on a class or module object: a monkey patch */
            pm_anomaly(m, 13, off, "build-on-global");
            if (m->g[t->g].use < TN_SCAN_BUILT)
                m->g[t->g].use = TN_SCAN_BUILT;
        }
        return;
    }
    case TN_OP_EXT1: case TN_OP_EXT2: case TN_OP_EXT4: {
        char nm[40];
        snprintf(nm, sizeof nm, "extension %lld", (long long)op->i);
        long i = global_index(m, "copyreg", nm, off, TN_SCAN_UNKNOWN, "extension-code");
        if (i >= 0)
            push(m, (struct sv){V_GLOBAL, (uint32_t)i, NULL, 0}, off);
        return;
    }
    case TN_OP_PERSID:
        push(m, other, off);
        return;
    case TN_OP_BINPERSID:
        pop(m, off);
        push(m, other, off);
        return;
    case TN_OP_GET: case TN_OP_BINGET: case TN_OP_LONG_BINGET:
        if (op->code == TN_OP_GET && op->big)
            pm_anomaly(m, 6, off, "memo-missing");
        memo_get(m, op->i, off);
        return;
    case TN_OP_PUT: case TN_OP_BINPUT: case TN_OP_LONG_BINPUT:
        memo_put(m, op->big ? -1 : op->i, off);
        return;
    case TN_OP_MEMOIZE:
        memo_put(m, (int64_t)m->memon, off);
        return;
    default:
        pm_anomaly(m, 14, off, "opcode-unknown");
        return;
    }
}

/* Runs the model over one pickle starting at *pos; leaves *pos after its
 * STOP.  Returns 0 when a STOP was reached, -1 when the stream broke (the
 * anomaly is reported) or a limit stopped it. */
static int scan_one_pickle(struct ctx *c, const unsigned char *b, size_t len, size_t *pos,
                           const char *entry)
{
    struct pm m = {.c = c, .entry = entry, .start = *pos};
    int rc = -1;
    for (;;) {
        struct tn_pickle_op op;
        size_t p = *pos;
        if (m.frame_end && p == m.frame_end)
            m.frame_end = 0;
        if (tn__pickle_decode(b, len, pos, &op, entry) < 0) {
            const char *msg = tn_last_error();
            pm_anomaly(&m, 15, p, p >= len ? "truncated" : strstr(msg, "invalid") ?
                       "opcode-invalid" : "truncated");
            break;
        }
        if (m.frame_end && *pos > m.frame_end) {
            pm_anomaly(&m, 16, p, "frame-boundary");
            m.frame_end = 0;
        }
        if (op.code == TN_OP_FRAME && m.frame_end == 0 && op.i >= 0 && (uint64_t)op.i > len - *pos)
            pm_anomaly(&m, 10, p, "frame-length");
        if (op.code == TN_OP_STOP) {
            if (m.n != 1 || m.nmarks)
                pm_anomaly(&m, 17, p, "stop-stack");
            if (m.frame_end && *pos != m.frame_end)
                pm_anomaly(&m, 16, p, "frame-boundary");
            rc = 0;
            break;
        }
        step(&m, &op);
        if (m.fatal)
            break;
    }
    for (size_t i = 0; i < m.ng; i++) {
        if (m.g[i].sev)
            add(c, entry, m.g[i].off, m.g[i].mod, m.g[i].name, m.g[i].use, m.g[i].sev,
                m.g[i].reason);
        free(m.g[i].mod);
        free(m.g[i].name);
    }
    if (m.fatal)
        incomplete(c, "a pickle exceeded the scanner's limits");
    free(m.g);
    free(m.gh);
    free(m.st);
    free(m.marks);
    free(m.memo);
    free(m.dense);
    return rc;
}

/* Every pickle in b: stacked pickles are scanned in turn.  `expect`
 * pickles are normal (0: any number, reported as stacked after the first);
 * bytes after them that are no pickle are "trailing-bytes" unless
 * `tail_ok` (legacy storage data). */
static void scan_pickles(struct ctx *c, const unsigned char *b, size_t len, const char *entry,
                         int expect, bool tail_ok)
{
    size_t pos = 0;
    for (int k = 0; pos < len; k++) {
        if (expect && k >= expect && tail_ok)
            return;
        if (k > 0 && (!expect || k >= expect)) {
            /* Trailing bytes: a loader reading one pickle ignores them, a
             * scanner reading only one misses them.  Scan them. */
            size_t q = pos;
            while (q < len && (b[q] == 0 || b[q] == '\n'))
                q++;
            if (q == len)
                return;
            anomaly(c, entry, pos, "trailing-data");
        }
        if (scan_one_pickle(c, b, len, &pos, entry) < 0)
            return;
    }
}

/* ------------------------------------------------------------ containers */

static void scan_blob(struct ctx *c, const unsigned char *b, size_t len, const char *entry,
                      const char *name, bool top);

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), l = strlen(suf);
    return a >= l && !strcmp(s + a - l, suf);
}

static char *join_entry(const char *parent, const char *name)
{
    size_t a = strlen(parent), l = strlen(name);
    char *s = malloc(a + l + 2);
    if (!s)
        return NULL;
    if (a) {
        memcpy(s, parent, a);
        s[a++] = '!';
    }
    memcpy(s + a, name, l + 1);
    return s;
}

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static bool is_pickle_start(const unsigned char *b, size_t len)
{
    return len >= 2 && b[0] == 0x80 && b[1] <= 5;
}

/* Bytes that are no known format but a pickle: the opcodes decode up to a
 * STOP, or their decodable prefix imports or calls something.  Text and
 * tensor bytes fail within a few opcodes. */
static bool looks_like_pickle(const unsigned char *b, size_t len)
{
    size_t pos = 0, ops = 0;
    struct tn_pickle_op op;
    while (pos < len && tn__pickle_decode(b, len, &pos, &op, "sniff") == 0) {
        ops++;
        if (op.code == TN_OP_STOP)
            return ops >= 2;
        if (op.code == TN_OP_GLOBAL || op.code == TN_OP_INST || op.code == TN_OP_STACK_GLOBAL ||
            op.code == TN_OP_REDUCE)
            return true;
    }
    return false;
}

/* A member of an archive: nested archives and pickles are scanned. */
static void scan_member(struct ctx *c, const unsigned char *b, size_t len, const char *entry,
                        const char *name)
{
    if (++c->entries > (c->o->max_entries ? c->o->max_entries : 100000)) {
        if (c->entries == (c->o->max_entries ? c->o->max_entries : 100000) + 1)
            anomaly(c, entry, 0, "entry-limit");
        incomplete(c, "more archive members than the entry limit");
        return;
    }
    if (c->depth + 1 > (c->o->max_depth ? c->o->max_depth : 4)) {
        anomaly(c, entry, 0, "depth-limit");
        incomplete(c, "archives nested deeper than the depth limit");
        return;
    }
    c->depth++;
    scan_blob(c, b, len, entry, name, false);
    c->depth--;
}

static bool budget(struct ctx *c, uint64_t n)
{
    uint64_t lim = c->o->max_expanded ? c->o->max_expanded : (4ull << 30);
    if (n > lim - c->expanded || c->expanded > lim)
        return false;
    c->expanded += n;
    return true;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Local headers the central directory does not list, in the gaps between
 * the listed ones: a loader reading by local header would see them. */
static void scan_zip_gaps(struct ctx *c, const unsigned char *b, size_t len, struct tn_zip *z,
                          const char *entry)
{
    size_t n = tn_zip_count(z);
    uint64_t *iv = malloc((n + 1) * 2 * sizeof *iv);
    if (!iv) {
        c->oom = true;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const struct tn_zip_entry *e = tn_zip_entry_at(z, i);
        iv[2 * i] = e->header_offset;
        iv[2 * i + 1] = e->data_offset + e->csize;
    }
    qsort(iv, n, 2 * sizeof *iv, cmp_u64);
    /* The central directory's start bounds the last gap. */
    uint64_t cd = len;
    for (size_t p = len >= 22 ? len - 22 + 1 : 0; p-- > 0 && p + 65557 >= len;)
        if (rd32(b + p) == 0x06054b50) {
            cd = rd32(b + p + 16);
            break;
        }
    uint64_t at = 0;
    for (size_t i = 0; i <= n; i++) {
        uint64_t end = i < n ? iv[2 * i] : (cd < len ? cd : len);
        for (uint64_t p = at; p + 30 <= end && p + 30 <= len; p++) {
            if (rd32(b + p) != 0x04034b50)
                continue;
            size_t nl = rd16(b + p + 26), xl = rd16(b + p + 28);
            char nm[256] = "?";
            if (p + 30 + nl <= len) {
                size_t k = nl < 255 ? nl : 255;
                memcpy(nm, b + p + 30, k);
                nm[k] = 0;
                for (size_t q = 0; q < k; q++)
                    if (!nm[q])
                        nm[q] = '?';
            }
            char *sub = join_entry(entry, nm);
            if (!sub) {
                c->oom = true;
                break;
            }
            anomaly(c, sub, p, "zip-unindexed-entry");
            uint64_t cs = rd32(b + p + 18), data = p + 30 + nl + xl;
            if (rd16(b + p + 8) == 0 && data <= len && cs <= len - data)
                scan_member(c, b + data, (size_t)cs, sub, nm);
            free(sub);
            p = data > p ? data - 1 : p;
        }
        if (i < n && iv[2 * i + 1] > at)
            at = iv[2 * i + 1];
    }
    free(iv);
}

static void scan_zip(struct ctx *c, const unsigned char *b, size_t len, const char *entry)
{
    const char *label = *entry ? entry : "zip";
    struct tn_zip *z = tn_zip_open_memory(b, len, label);
    if (!z) {
        anomaly(c, entry, 0, "zip-unreadable");
        incomplete(c, tn_last_error());
        return;
    }
    size_t n = tn_zip_count(z);
    bool torch = false, script = false;
    const char *root = NULL;
    size_t rootlen = 0;
    for (size_t i = 0; i < n; i++) {
        const char *nm = tn_zip_entry_at(z, i)->name;
        if (ends_with(nm, "data.pkl"))
            torch = true;
        if (strstr(nm, "/code/") || ends_with(nm, "constants.pkl"))
            script = true;
    }
    if ((torch || script) && c->depth == 0)
        c->r->format = script ? "torchscript" : "torch";
    bool roots_reported = false, script_reported = false;
    for (size_t i = 0; i < n; i++) {
        const struct tn_zip_entry *e = tn_zip_entry_at(z, i);
        const char *nm = e->name;
        char *sub = join_entry(entry, nm);
        if (!sub) {
            c->oom = true;
            break;
        }
        if (tn_zip_find(z, nm) != (long)i)
            anomaly(c, sub, e->header_offset, "zip-duplicate-name");
        /* The local header must agree with the central directory. */
        const unsigned char *lh = b + e->header_offset;
        size_t lnl = rd16(lh + 26);
        if (lnl != strlen(nm) || e->header_offset + 30 + lnl > len ||
            memcmp(lh + 30, nm, lnl))
            anomaly(c, sub, e->header_offset, "zip-name-mismatch");
        else if (rd16(lh + 8) != e->method || ((rd16(lh + 6) ^ e->flags) & ~8u & 0xff))
            anomaly(c, sub, e->header_offset, "zip-header-mismatch");
        const char *slash = strchr(nm, '/');
        if (torch && slash) {
            if (!root) {
                root = nm;
                rootlen = (size_t)(slash - nm);
            } else if (!roots_reported &&
                       ((size_t)(slash - nm) != rootlen || memcmp(nm, root, rootlen))) {
                anomaly(c, sub, e->header_offset, "zip-several-roots");
                roots_reported = true;
            }
        }
        if (script && !script_reported && strstr(nm, "/code/") && !ends_with(nm, ".debug_pkl")) {
            add(c, sub, 0, "torch.jit", "TorchScript code", TN_SCAN_CALLED, TN_SCAN_UNKNOWN,
                "torchscript-code");
            script_reported = true;
        }
        /* Storage records are raw bytes torch never unpickles: not read,
         * so the time does not grow with the tensor data. */
        bool storage = torch && slash && !strncmp(slash + 1, "data/", 5) && !ends_with(nm, ".pkl");
        /* TorchScript's Python source (reported above) is compiled by
         * torch.jit.load, never unpickled: not read as a pickle */
        bool source = script && strstr(nm, "/code/") && ends_with(nm, ".py");
        if (!storage && !source && !ends_with(nm, "/")) {
            void *data = NULL;
            size_t dl = 0;
            if (!budget(c, e->size)) {
                anomaly(c, sub, e->header_offset, "expanded-size-limit");
                incomplete(c, "archive members larger than the expanded-size limit");
            } else if (tn_zip_read(z, i, 0, &data, &dl) < 0) {
                anomaly(c, sub, e->header_offset, "zip-member-unreadable");
            } else {
                if (tn_zip_crc32(0, data, dl) != e->crc)
                    anomaly(c, sub, e->header_offset, "zip-crc-mismatch");
                scan_member(c, data, dl, sub, nm);
                free(data);
            }
        }
        free(sub);
    }
    scan_zip_gaps(c, b, len, z, entry);
    tn_zip_close(z);
}

static uint64_t octal(const unsigned char *p, size_t n, bool *ok)
{
    uint64_t v = 0;
    size_t i = 0;
    *ok = true;
    if (p[0] & 0x80) { /* base-256 */
        *ok = false;
        return 0;
    }
    while (i < n && p[i] == ' ')
        i++;
    for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
        if (v >> 60) {
            *ok = false;
            return 0;
        }
        v = v * 8 + (uint64_t)(p[i] - '0');
    }
    return v;
}

/*
 * The tar checkpoints of PyTorch before 0.4 (torch.load still reads them):
 * members sys_info and pickle are pickles, but storages and tensors are
 * pickles with raw bytes between them, laid out as _legacy_load reads
 * them.  Walked in that layout, every pickle in them is scanned and the
 * bytes between are skipped, so a clean file is not "trailing-data".
 *   storages: pickle(n), n x (pickle((key, location, torch.XStorage)),
 *             int64 numel, numel x element size bytes), pickle(views)
 *   tensors:  pickle(n), n x (pickle((key, storage key, tensor type)),
 *             int32 ndim, 4 bytes, ndim int64 sizes, ndim int64 strides,
 *             int64 offset)
 */

/* Scans one pickle at *pos; *value gets its first integer operand (the
 * count pickles are a bare int), or -1. */
static int legacy_pickle(struct ctx *c, const unsigned char *b, size_t len, size_t *pos,
                         const char *entry, int64_t *value, size_t *esize)
{
    size_t start = *pos;
    if (scan_one_pickle(c, b, len, pos, entry) < 0)
        return -1;
    *value = -1;
    if (esize)
        *esize = 0;
    struct tn_pickle_op op;
    for (size_t q = start; q < *pos && tn__pickle_decode(b, *pos, &q, &op, entry) == 0;) {
        if (*value < 0 && (op.code == TN_OP_BININT || op.code == TN_OP_BININT1 ||
                           op.code == TN_OP_BININT2) && op.i >= 0)
            *value = op.i;
        if (esize && op.code == TN_OP_GLOBAL && op.slen == 5 && !memcmp(op.s, "torch", 5)) {
            enum tn_dtype dt = tn__storage_class_dtype(op.s2, op.s2len);
            if (dt != TN_DTYPE_UNSET)
                *esize = tn_dtype_size(dt);
        }
    }
    return 0;
}

/* A broken legacy layout: reported, and the scan of it is incomplete. */
static void legacy_broken(struct ctx *c, const char *entry, size_t off)
{
    anomaly(c, entry, off, "legacy-tar-layout");
    incomplete(c, "a pre-0.4 tar checkpoint member does not follow torch's layout");
}

static void scan_legacy_member(struct ctx *c, const unsigned char *b, size_t len,
                               const char *entry, bool storages)
{
    size_t pos = 0;
    int64_t n, dummy;
    if (legacy_pickle(c, b, len, &pos, entry, &n, NULL) < 0)
        return;
    if (n < 0 || (uint64_t)n > len) { /* every item takes at least a byte */
        legacy_broken(c, entry, 0);
        return;
    }
    for (int64_t k = 0; k < n; k++) {
        size_t at = pos, esize = 0;
        if (legacy_pickle(c, b, len, &pos, entry, &dummy, storages ? &esize : NULL) < 0)
            return;
        if (storages) {
            uint64_t numel = len - pos >= 8 ? rd64(b + pos) : 0;
            if (!esize || len - pos < 8 || numel > (len - pos - 8) / esize) {
                legacy_broken(c, entry, at);
                return;
            }
            pos += 8 + (size_t)numel * esize;
        } else {
            uint32_t nd = len - pos >= 4 ? rd32(b + pos) : UINT32_MAX;
            if (nd > 64 || len - pos < 16 + 16 * (size_t)nd) {
                legacy_broken(c, entry, at);
                return;
            }
            pos += 16 + 16 * (size_t)nd;
        }
    }
    if (storages && legacy_pickle(c, b, len, &pos, entry, &dummy, NULL) < 0)
        return;
    if (pos < len) { /* what follows is no part of the layout: scan it */
        anomaly(c, entry, pos, "trailing-data");
        scan_pickles(c, b + pos, len - pos, entry, 0, false);
    }
}

/* Does the tar hold pickle, storages and tensors (a pre-0.4 checkpoint)? */
static bool legacy_tar(const unsigned char *b, size_t len)
{
    int seen = 0;
    for (size_t p = 0; p + 512 <= len;) {
        bool ok;
        uint64_t sz = octal(b + p + 124, 12, &ok);
        if (!ok || sz > len - p - 512)
            break;
        const char *nm = (const char *)b + p;
        seen |= (!strncmp(nm, "pickle", 100)) | (!strncmp(nm, "storages", 100)) << 1 |
                (!strncmp(nm, "tensors", 100)) << 2;
        p += 512 + (size_t)((sz + 511) / 512 * 512);
    }
    return seen == 7;
}

static void scan_tar(struct ctx *c, const unsigned char *b, size_t len, const char *entry)
{
    size_t p = 0;
    bool legacy = legacy_tar(b, len);
    while (p + 512 <= len) {
        const unsigned char *h = b + p;
        bool zero = true;
        for (int i = 0; i < 512 && zero; i++)
            zero = !h[i];
        if (zero)
            return;
        bool ok;
        uint64_t sz = octal(h + 124, 12, &ok);
        char nm[101];
        memcpy(nm, h, 100);
        nm[100] = 0;
        char *sub = join_entry(entry, nm);
        if (!sub) {
            c->oom = true;
            return;
        }
        if (!ok || sz > len - p - 512) {
            anomaly(c, sub, p, "tar-size");
            incomplete(c, "a tar member runs past the end of the archive");
            free(sub);
            return;
        }
        bool regular = h[156] == '0' || h[156] == 0 || h[156] == '7';
        if (regular && legacy && (!strcmp(nm, "storages") || !strcmp(nm, "tensors")))
            scan_legacy_member(c, h + 512, (size_t)sz, sub, nm[0] == 's');
        else if (regular && budget(c, 0))
            scan_member(c, h + 512, (size_t)sz, sub, nm);
        free(sub);
        p += 512 + (size_t)((sz + 511) / 512 * 512);
        if (c->oom || c->r->n >= MAX_FINDINGS)
            return;
    }
}

static void scan_npy(struct ctx *c, const unsigned char *b, size_t len, const char *entry)
{
    if (len < 10) {
        anomaly(c, entry, 0, "npy-header");
        return;
    }
    size_t hl, at;
    if (b[6] == 1) {
        hl = rd16(b + 8);
        at = 10;
    } else {
        if (len < 12) {
            anomaly(c, entry, 0, "npy-header");
            return;
        }
        hl = rd32(b + 8);
        at = 12;
    }
    if (hl > len - at) {
        anomaly(c, entry, 0, "npy-header");
        return;
    }
    const char *h = (const char *)b + at;
    const char *d = NULL;
    for (size_t i = 0; i + 7 <= hl; i++)
        if (!memcmp(h + i, "'descr'", 7)) {
            d = h + i + 7;
            break;
        }
    if (!d) {
        anomaly(c, entry, 0, "npy-header");
        return;
    }
    while (d < h + hl && (*d == ':' || *d == ' '))
        d++;
    /* An object array is a pickle after the header (allow_pickle=True). */
    bool object = false;
    if (d < h + hl && *d == '\'') {
        const char *e = memchr(d + 1, '\'', (size_t)(h + hl - d - 1));
        object = e && memchr(d + 1, 'O', (size_t)(e - d - 1));
    } else {
        /* a structured dtype: any object field */
        for (size_t i = 0; i + 2 <= (size_t)(h + hl - d) && !object; i++)
            object = (d[i] == '|' || d[i] == '\'' || d[i] == '<' || d[i] == '>') && d[i + 1] == 'O';
    }
    if (object) {
        anomaly(c, entry, 0, "npy-object-array");
        scan_pickles(c, b + at + hl, len - at - hl, entry, 1, false);
    }
}

static void scan_safetensors(struct ctx *c, const unsigned char *b, size_t len, const char *entry)
{
    uint64_t hl = rd64(b);
    if (hl > len - 8) {
        anomaly(c, entry, 0, "safetensors-header-length");
        return;
    }
    json_error_t err;
    json_t *j = json_loadb((const char *)b + 8, (size_t)hl, JSON_REJECT_DUPLICATES, &err);
    if (!j || !json_is_object(j)) {
        anomaly(c, entry, 8, "safetensors-header");
        json_decref(j);
        return;
    }
    uint64_t data = len - 8 - hl;
    const char *k;
    json_t *v;
    json_object_foreach(j, k, v) {
        if (!strcmp(k, "__metadata__"))
            continue;
        json_t *o = json_object_get(v, "data_offsets");
        json_t *dt = json_object_get(v, "dtype");
        if (!json_is_string(dt) || !json_is_array(o) || json_array_size(o) != 2 ||
            !json_is_integer(json_array_get(o, 0)) || !json_is_integer(json_array_get(o, 1))) {
            anomaly(c, entry, 8, "safetensors-header");
            break;
        }
        json_int_t a = json_integer_value(json_array_get(o, 0));
        json_int_t e = json_integer_value(json_array_get(o, 1));
        if (a < 0 || e < a || (uint64_t)e > data) {
            anomaly(c, entry, 8, "safetensors-offsets");
            break;
        }
    }
    json_decref(j);
}

static bool is_zip(const unsigned char *b, size_t len)
{
    if (len >= 4 && rd32(b) == 0x04034b50)
        return true;
    if (len >= 4 && rd32(b) == 0x06054b50) /* an empty archive */
        return true;
    return false;
}

/* A zip whose end record exists but that starts with other bytes: where
 * its offsets start counting (Python's zipfile finds it the same way:
 * the central directory ends at the end record). */
static bool zip_shift(const unsigned char *b, size_t len, size_t *shift)
{
    if (len < 22)
        return false;
    for (size_t p = len - 22 + 1; p-- > 0 && p + 65557 >= len;)
        if (rd32(b + p) == 0x06054b50) {
            uint64_t cdsize = rd32(b + p + 12), cdoff = rd32(b + p + 16);
            if (!rd16(b + p + 10) || cdsize > p || cdoff > p - cdsize)
                return false;
            *shift = (size_t)(p - cdsize - cdoff);
            return *shift > 0 && *shift < len && rd32(b + *shift) == 0x04034b50;
        }
    return false;
}

static void scan_blob(struct ctx *c, const unsigned char *b, size_t len, const char *entry,
                      const char *name, bool top)
{
#define FMT(f) do { if (top) c->r->format = (f); } while (0)
    if (is_zip(b, len)) {
        FMT("zip");
        scan_zip(c, b, len, entry);
        return;
    }
    if (len >= 6 && !memcmp(b, "\x93NUMPY", 6)) {
        FMT("npy");
        scan_npy(c, b, len, entry);
        return;
    }
    if (len >= 262 && !memcmp(b + 257, "ustar", 5)) {
        FMT("tar");
        scan_tar(c, b, len, entry);
        return;
    }
    if (len >= 6 && !memcmp(b, "7z\xbc\xaf\x27\x1c", 6)) {
        FMT("7z");
        anomaly(c, entry, 0, "archive-unsupported");
        incomplete(c, "7z archives are not read");
        return;
    }
    if (len >= 2 && b[0] == 0x1f && b[1] == 0x8b) {
        FMT("gzip");
        anomaly(c, entry, 0, "archive-unsupported");
        incomplete(c, "gzip streams are not read");
        return;
    }
    if (len >= 3 && b[0] == 0x80 && b[1] == 2 && b[2] == 0x8a) {
        FMT("legacy");
        /* magic number, protocol, sys_info, the object, the storage keys;
         * raw storage data follows. */
        scan_pickles(c, b, len, entry, 5, true);
        return;
    }
    if (len >= 10 && b[8] == '{' && rd64(b) >= 2) {
        FMT("safetensors");
        scan_safetensors(c, b, len, entry);
        return;
    }
    bool named = name && (ends_with(name, ".pkl") || ends_with(name, ".pickle") ||
                          ends_with(name, "pickle") || ends_with(name, "sys_info"));
    if (is_pickle_start(b, len) || named || looks_like_pickle(b, len)) {
        FMT("pickle");
        scan_pickles(c, b, len, entry, 0, false);
        return;
    }
    size_t shift;
    if (zip_shift(b, len, &shift)) {
        FMT("zip");
        anomaly(c, entry, 0, "zip-prefix");
        scan_zip(c, b + shift, len - shift, entry);
        return;
    }
    if (top)
        incomplete(c, "not a checkpoint, pickle, archive, safetensors or .npy file");
#undef FMT
}

int tn_scan_memory(const void *data, size_t len, const char *label,
                   const struct tn_scan_options *opts, struct tn_scan_report *r)
{
    if (!r || (!data && len))
        return tn_set_error(TN_EINVAL, "tn_scan_memory: NULL argument");
    (void)label;
    struct ctx c = {.o = opts ? opts : &default_opts, .r = r};
    scan_blob(&c, data, len, "", NULL, true);
    if (c.oom) {
        incomplete(&c, "out of memory");
        return tn_set_error(TN_ENOMEM, "%s: out of memory while scanning", label ? label : "scan");
    }
    return 0;
}

int tn_scan_file(const char *path, const struct tn_scan_options *opts, struct tn_scan_report *r)
{
    if (!path || !r)
        return tn_set_error(TN_EINVAL, "tn_scan_file: NULL argument");
    struct tn_io_map *m = tn__io_map_open(path);
    if (!m) {
        r->incomplete = true;
        r->error = dupn(tn_last_error(), strlen(tn_last_error()));
        return 0;
    }
    int rc = tn_scan_memory(m->addr, m->len, path, opts, r);
    tn__io_map_release(m);
    return rc;
}
