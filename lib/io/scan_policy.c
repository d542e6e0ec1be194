/*
 * io/scan_policy.c: the auditor's names: Python 2 name mapping as CPython's
 * find_class does it, the dangerous modules and globals, and the severity
 * of a global under a policy and the user's allowlist.
 */
#include "io/scan_internal.h"

#include <stdlib.h>
#include <string.h>

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

/* What is dangerous, with why: a module (and its submodules) or one
 * module.name (and what is under it).  One table, so every entry carries
 * its advisory or reason.  Reviewed:
 * - copyreg stays: add_extension rewrites what EXT opcodes load (no static
 *   model survives that), __newobj__ builds any class (_reconstructor is
 *   on --policy pickle's list: it builds what it is given, flagged itself);
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
 *   that open files (open, open_code, FileIO) are listed. */
static const struct {
    const char *path, *why;
} dangerous[] = {
    {"os", "processes and files"}, {"posix", "os under POSIX"}, {"nt", "os under Windows"},
    {"posixpath", "os.path, reached as os.path under POSIX"}, {"ntpath", "os.path, Windows"},
    {"subprocess", "runs commands"}, {"_posixsubprocess", "fork_exec"},
    {"sys", "interpreter state, exit, modules"}, {"runpy", "runs modules and files"},
    {"importlib", "import_module: a universal resolver"},
    {"pkgutil", "resolve_name: a universal resolver (GHSA-vvpj-8cmc-gx39)"},
    {"pydoc", "locate: a universal resolver"}, {"pickle", "loads: a nested pickle"},
    {"_pickle", "loads: a nested pickle"}, {"cPickle", "loads: a nested pickle"},
    {"pickletools", "reads and runs pickles"}, {"shelve", "opens pickle databases"},
    {"marshal", "loads code objects"}, {"dill", "loads code"}, {"joblib", "loads pickles"},
    {"cloudpickle", "loads code"}, {"shutil", "removes and copies files"},
    {"socket", "network"}, {"_socket", "network"}, {"socketserver", "network"},
    {"ssl", "network"}, {"select", "file descriptors"}, {"selectors", "file descriptors"},
    {"ctypes", "calls any C function"}, {"_ctypes", "calls any C function"},
    {"cffi", "calls any C function"}, {"code", "InteractiveInterpreter runs source"},
    {"codeop", "compiles source"}, {"pty", "spawn runs commands"}, {"tty", "terminal"},
    {"webbrowser", "opens URLs, runs browsers"}, {"asyncio", "create_subprocess_exec"},
    {"multiprocessing", "util.spawnv_passfds runs commands (modelscan #338)"},
    {"_multiprocessing", "processes"}, {"concurrent", "runs callables"},
    {"threading", "runs callables"}, {"_thread", "start_new_thread"}, {"signal", "handlers"},
    {"pdb", "runs source"}, {"bdb", "runs source"}, {"trace", "runs source"},
    {"timeit", "timeit runs source"}, {"cProfile", "run runs source"},
    {"profile", "run runs source"}, {"types", "FunctionType, CodeType: code from bytes"},
    {"inspect", "reaches frames and globals"}, {"platform", "runs commands"},
    {"sysconfig", "reads files"}, {"site", "runs .pth files"}, {"distutils", "spawn"},
    {"setuptools", "runs setup code"}, {"pip", "pip.main installs (CVE-2025-1716)"},
    {"ensurepip", "installs"}, {"venv", "runs commands"}, {"zipimport", "imports code"},
    {"http", "network"}, {"urllib", "network"}, {"urllib2", "network"}, {"httplib", "network"},
    {"requests", "network"}, {"aiohttp", "network"}, {"httpx", "network"},
    {"ftplib", "network"}, {"smtplib", "network"}, {"telnetlib", "network"},
    {"imaplib", "IMAP4_stream runs a command (GHSA-g38g-8gr9-h9xp)"}, {"poplib", "network"},
    {"nntplib", "network"}, {"xmlrpc", "network"}, {"email", "network"},
    {"tempfile", "files"}, {"_pyio", "open"}, {"pathlib", "files"}, {"fileinput", "files"},
    {"glob", "files"}, {"linecache", "reads files"}, {"tarfile", "writes files"},
    {"zipfile", "writes files"}, {"dbm", "files"}, {"sqlite3", "files"},
    {"uuid", "_get_command_stdout runs commands (GHSA-g38g-8gr9-h9xp)"},
    {"_osx_support", "_read_output runs commands (GHSA-g38g-8gr9-h9xp)"},
    {"_aix_support", "runs commands (GHSA-g38g-8gr9-h9xp)"},
    {"_pyrepl", "runs source (GHSA-g38g-8gr9-h9xp)"}, {"_interpreters", "runs source"},
    {"_xxsubinterpreters", "runs source"}, {"_posixshmem", "shared memory"},
    {"mmap", "memory maps"}, {"resource", "limits"}, {"gc", "reaches every object"},
    {"ast", "literal_eval and compile helpers"}, {"dis", "code objects"},
    {"compileall", "compiles files"}, {"py_compile", "compiles files"},
    {"tkinter", "Tcl eval"}, {"idlelib", "runs source"}, {"lib2to3", "refactors files"},
    {"logging", "config.listen runs code"}, {"antigravity", "opens a browser"},
    {"this", "imports print"}, {"__main__", "the loader's own globals"},
    {"copyreg", "add_extension rewrites EXT opcodes"}, {"copy_reg", "copyreg"},
    {"operator", "attrgetter/methodcaller: getattr chains"}, {"_operator", "operator"},
    {"doctest", "debug_script runs source under pdb"},
    {"test.support", "script_helper.assert_python_ok runs python"},
    {"mailcap", "findmatch builds shell commands"},
    {"fickling", "hook.remove_hook turns a scanner's load hook off"},
    {"torch.hub", "downloads and runs code"}, {"torch.jit", "compiles and runs code"},
    {"torch.package", "loads code"}, {"torch.serialization", "load: a nested unpickling"},
    {"torch.utils.cpp_extension", "compiles and loads C++"},
    {"torch.utils.collect_env", "run runs commands (modelscan #338)"},
    {"torch.utils.bottleneck", "__main__.run_cprofile and run_autograd_prof run source"},
    {"torch.utils.data.datapipes.utils.decoder.basichandlers", "unpickles its input"},
    {"torch.utils._config_module.ConfigModule.load_config", "unpickles its input"},
    {"torch.storage._load_from_bytes", "torch.load of its input"},
    {"torch.compile", "compiles and runs code"}, {"torch._inductor", "compiles code"},
    {"torch._dynamo", "compiles code"}, {"torch.distributed.rpc", "remote calls"},
    {"torch.fx", "generates and runs code"}, {"torch.ops", "any registered operator"},
    {"torch._ops", "any registered operator"}, {"torch.library", "registers operators"},
    {"torch.cuda.memory", "loads allocators"}, {"numpy.lib.npyio", "load with pickles"},
    {"numpy.load", "loads pickles"}, {"numpy.testing", "_private.utils.runstring runs source"},
    {"numpy.f2py", "compiles code"}, {"numpy.distutils", "compiles code"},
    {"pandas.io", "reads files and URLs"}, {"mlflow", "_run_entry_point runs commands"},
    {"keras", "Lambda layers run code"}, {"tensorflow", "file and process ops"},
    {"IPython", "runs source"}, {"jinja2", "templates run code"}, {"yaml", "unsafe load"},
    {"builtins.eval", "runs source"}, {"builtins.exec", "runs source"},
    {"builtins.compile", "compiles source"}, {"builtins.getattr", "getattr chains"},
    {"builtins.setattr", "monkey patches"}, {"builtins.delattr", "monkey patches"},
    {"builtins.__import__", "imports any module"}, {"builtins.open", "files"},
    {"builtins.breakpoint", "pdb"}, {"builtins.input", "reads the terminal"},
    {"builtins.globals", "the loader's globals"}, {"builtins.locals", "the loader's locals"},
    {"builtins.vars", "any namespace"}, {"builtins.help", "pydoc"}, {"builtins.exit", "exit"},
    {"builtins.quit", "exit"}, {"builtins.__loader__", "imports"},
    {"builtins.__spec__", "imports"}, {"builtins.__builtins__", "every builtin"},
    {"__builtin__.eval", "runs source"}, {"__builtin__.execfile", "runs a file"},
    {"__builtin__.file", "files"}, {"__builtin__.open", "files"},
    {"__builtin__.getattr", "getattr chains"}, {"__builtin__.__import__", "imports"},
    {"__builtin__.compile", "compiles source"}, {"torch.load", "a nested unpickling"},
    {"torch.save", "writes files"}, {"torch.from_file", "reads files"},
    {"numpy.save", "writes files"}, {"numpy.fromfile", "reads files"},
    {"numpy.loadtxt", "reads files"}, {"numpy.genfromtxt", "reads files"},
    {"numpy.memmap", "maps files"},
    {"numpy.core.multiarray._reconstruct.__globals__", "reaches numpy's globals"},
    {"pandas.read_csv", "reads files and URLs (modelscan #338)"},
    {"pandas.read_pickle", "unpickles a file"}, {"pandas.read_json", "reads files and URLs"},
    {"pandas.read_html", "reads URLs"}, {"codecs.open", "files"},
    {"collections.namedtuple", "builds classes from strings"}, {"io.open", "files"},
    {"io.open_code", "files"}, {"io.FileIO", "files"}, {"_io.open", "files"},
    {"_io.open_code", "files"}, {"_io.FileIO", "files"},
};

/* Under a dangerous module, but only building values (see above). */
static const char *const benign_under_dangerous[] = {"torch.jit._pickle"};

/* --policy pickle: globals whose unpickling builds a value and runs no code
 * given by the file (what they are called with is checked on its own).
 * torch.nn and torchvision modules restore their attributes in __setstate__;
 * functools.partial objects are built, never called, by unpickling. */
static const struct {
    const char *path;
    int kind; /* 0: this global; 1: classes (capitalised plain names) under it; 2: any plain name */
    const char *why;
} benign[] = {
    {"builtins.bytes", 0, "bytes under protocols 0-2"}, {"builtins.bytearray", 0, "value"},
    {"builtins.set", 0, "value"}, {"builtins.frozenset", 0, "value"},
    {"builtins.complex", 0, "value"}, {"builtins.slice", 0, "value"},
    {"builtins.range", 0, "value"}, {"builtins.int", 0, "value"},
    {"builtins.float", 0, "value"}, {"builtins.str", 0, "value"},
    {"builtins.bool", 0, "value"}, {"builtins.dict", 0, "value"},
    {"builtins.list", 0, "value"}, {"builtins.tuple", 0, "value"},
    {"builtins.object", 0, "base of protocol 0-1 instances"},
    {"_codecs.encode", 0, "bytes under protocols 0-2"},
    {"copyreg._reconstructor", 0, "protocol 0-1 instances of the class it is given"},
    {"collections.OrderedDict", 0, "value"}, {"collections.deque", 0, "value"},
    {"collections.Counter", 0, "value"}, {"collections.defaultdict", 0, "value"},
    {"decimal.Decimal", 0, "value"}, {"fractions.Fraction", 0, "value"},
    {"datetime.datetime", 0, "value"}, {"datetime.date", 0, "value"},
    {"datetime.time", 0, "value"}, {"datetime.timedelta", 0, "value"},
    {"datetime.timezone", 0, "value"},
    {"numpy.core.multiarray._reconstruct", 0, "an ndarray (objects in it are scanned)"},
    {"numpy._core.multiarray._reconstruct", 0, "an ndarray (objects in it are scanned)"},
    {"numpy.core.multiarray.scalar", 0, "a numpy scalar"},
    {"numpy._core.multiarray.scalar", 0, "a numpy scalar"}, {"numpy.ndarray", 0, "value"},
    {"numpy.dtype", 0, "value"},
    {"joblib.numpy_pickle.NumpyArrayWrapper", 0, "joblib reads the array after it"},
    {"torch._utils._rebuild_parameter", 0, "nn.Parameter"},
    {"torch._utils._rebuild_parameter_with_state", 0, "nn.Parameter"},
    {"torch.nn.parameter.Parameter", 0, "value"}, {"torch.nn.parameter.Buffer", 0, "value"},
    {"torch.device", 0, "value"}, {"functools.partial", 0, "built, not called"},
    {"torch.jit._pickle", 2, "TorchScript data pickles"},
    {"__torch__", 1, "TorchScript classes (their code/ is reported itself)"},
    {"torch.nn.modules", 1, "nn.Module classes"}, {"torchvision.models", 1, "model classes"},
    {"torchvision.ops", 1, "model layers"},
};

/* Name components that reach code or other modules in a dotted path. */
static const char *const dangerous_components[] = {
    "eval", "exec", "compile", "system", "popen", "spawn", "execv", "execve", "getattr",
    "setattr", "__import__", "open", "load", "loads", "import_module", "resolve_name", "locate",
    "run", "call", "check_output", "Popen",
};

/* Whether dotted path full is module m or inside it ("os" matches "os.path",
 * not "osx"). */
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
    for (size_t i = 0; i < sizeof dangerous / sizeof *dangerous; i++)
        if (starts_module(full, dangerous[i].path))
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
        for (size_t i = 0; i < sizeof dangerous / sizeof *dangerous; i++)
            if (!strchr(dangerous[i].path, '.') && strlen(dangerous[i].path) == l &&
                !memcmp(p, dangerous[i].path, l))
                return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

/* Is mod.name on --policy pickle's list? */
static bool benign_global(const char *full, const char *name)
{
    bool plain = !strchr(name, '.') && name[0] != '_';
    for (size_t i = 0; i < sizeof benign / sizeof *benign; i++) {
        if (!benign[i].kind ? !strcmp(full, benign[i].path)
                            : plain && starts_module(full, benign[i].path) &&
                                  (benign[i].kind == 2 || (name[0] >= 'A' && name[0] <= 'Z')))
            return true;
    }
    return false;
}

/* The global a protocol 0-2 pickle's Python 2 name stands for (CPython's
 * _compat_pickle mapping: __builtin__ -> builtins, ...); *omod and *oname
 * point into the arguments or static strings (borrowed). Protocol 3 and later
 * names are taken as they are. */
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

/* Whether an --allow entry may be allowed at all (tensor/io.h): a dotted
 * module.name outside the modules that run commands or code (os, sys,
 * subprocess, builtins.eval, ...), which no allowlist can let through. */
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
int tn__scan_classify(const char *mod, const char *name, const struct tn_scan_options *o)
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
    else if (o->policy == TN_ALLOW_PICKLE && benign_global(full, name))
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

/* The severity of global module.name in a pickle of protocol proto under
 * opts (NULL: the defaults; tensor/io.h), 0 when allowed: the mapped
 * Python 2 name's, and under the 1.13 policy (which does not map them) the
 * stronger of the raw and the mapped name's. */
int tn_scan_global_severity(const char *module, const char *name, int proto,
                            const struct tn_scan_options *opts)
{
    const struct tn_scan_options *o = opts ? opts : &default_opts;
    const char *m, *n;
    tn__scan_resolve(module, name, proto, &m, &n);
    int sev = tn__scan_classify(m, n, o);
    /* PyTorch 1.13's weights_only loader does not map Py2 names (2.x and
     * CPython do): under that policy the file's own name counts too. */
    if (o->policy == TN_ALLOW_TORCH1 && (m != module || n != name)) {
        int raw = tn__scan_classify(module, name, o);
        sev = raw > sev ? raw : sev;
    }
    return sev;
}

/* The lower-case name of a severity (a static string, the --json word). */
const char *tn_scan_severity_name(enum tn_scan_severity s)
{
    switch (s) {
    case TN_SCAN_DANGEROUS: return "dangerous";
    case TN_SCAN_UNKNOWN: return "unknown";
    case TN_SCAN_SUSPICIOUS: return "suspicious";
    }
    return "?";
}

/* The lower-case name of how a global was used (a static string, the --json
 * word). */
const char *tn_scan_use_name(enum tn_scan_use u)
{
    switch (u) {
    case TN_SCAN_CALLED: return "called";
    case TN_SCAN_BUILT: return "built";
    case TN_SCAN_IMPORTED: return "imported";
    default: return "none";
    }
}

/* Every reason code a finding can carry, in words (SARIF's rules). */
static const struct tn_scan_rule rules[] = {
    {"dangerous-global", "a global known to run code or touch files, processes or the network"},
    {"global-not-allowed", "a global outside torch.load(weights_only=True)'s allowlist"},
    {"global-nul", "a global whose module or name holds a NUL byte"},
    {"callable-unresolved", "a call of something that does not resolve to a constant global"},
    {"stack-global-unresolved", "STACK_GLOBAL of a module or name that is no constant string"},
    {"extension-code", "a global taken from copyreg's extension registry (EXT1, EXT2, EXT4)"},
    {"torchscript-code", "TorchScript code, compiled and run by torch.jit.load"},
    {"build-on-global", "BUILD on a global: sets attributes of a class or module"},
    {"expansion", "an expansion bomb: the value's walk (references through the memo and DUP "
                  "counted each time) is far longer than its bytes, or containers hold themselves"},
    {"stack-limit", "the pickle's stack grows past the scanner's limit"},
    {"stack-underflow", "an opcode pops more than the stack holds"},
    {"mark-missing", "an opcode needs a MARK that is not there"},
    {"mark-limit", "more nested MARKs than the scanner's limit"},
    {"globals-limit", "more globals than the scanner's limit"},
    {"memo-limit", "more memo entries than the scanner's limit"},
    {"memo-negative", "a memo index below zero"},
    {"memo-missing", "a GET of a memo entry never PUT"},
    {"memo-key-noncanonical", "a text GET or PUT key that CPython's int() reads but no pickler "
                              "writes (\"10\\r\", \" +10\", \"1_0\")"},
    {"protocol-unsupported", "a PROTO above 5"},
    {"proto-misplaced", "a PROTO that is not the first opcode"},
    {"frame-nested", "a FRAME inside a frame"},
    {"frame-length", "a FRAME longer than the bytes that follow"},
    {"frame-boundary", "an opcode crosses the end of its frame"},
    {"out-of-band-buffer", "NEXT_BUFFER or READONLY_BUFFER: data from outside the pickle"},
    {"opcode-unknown", "an opcode the scanner does not know"},
    {"opcode-invalid", "an opcode whose operand does not decode"},
    {"truncated", "the pickle ends before its STOP"},
    {"stop-stack", "STOP with more or less than one item on the stack, or a MARK left"},
    {"trailing-data", "bytes after the last pickle that no loader reads"},
    {"opcode-not-allowed", "--policy torch1.13: an opcode PyTorch 1.13's weights_only unpickler lacks"},
    {"newobj-not-allowed", "--policy torch1.13: NEWOBJ of anything but torch.nn.Parameter"},
    {"persid-not-allowed", "--policy torch1.13: a persistent id that is no tuple"},
    {"append-not-allowed", "--policy torch1.13: APPEND or APPENDS to anything but a list"},
    {"build-not-allowed", "--policy torch1.13: BUILD of a literal (1.13 builds tensors, "
                          "parameters and OrderedDicts only)"},
    {"zip-unreadable", "a zip archive whose directory cannot be read"},
    {"zip-unindexed-entry", "a zip member the central directory does not list"},
    {"zip-duplicate-name", "two zip members of the same name"},
    {"zip-name-mismatch", "a local header's name differs from the central directory's"},
    {"zip-header-mismatch", "a local header's method or flags differ from the central directory's"},
    {"zip-several-roots", "a torch zip with members under more than one top folder"},
    {"zip-member-unreadable", "a zip member that cannot be inflated"},
    {"zip-encrypted-flag", "a zip member flagged encrypted whose bytes are plain (CVE-2025-1945): "
                           "a reader that ignores the flag loads it"},
    {"zip-crc-mismatch", "a zip member whose CRC-32 is wrong"},
    {"zip-prefix", "a zip archive after bytes of something else"},
    {"tar-size", "a tar member that runs past the end of the archive"},
    {"legacy-tar-layout", "a pre-0.4 tar checkpoint member that does not follow torch's layout"},
    {"archive-unreadable", "a 7z archive whose directory cannot be read"},
    {"depth-limit", "archives nested deeper than the scanner's limit"},
    {"entry-limit", "more archive members than the scanner's limit"},
    {"expanded-size-limit", "archive members larger than the scanner's limit"},
    {"npy-header", "a .npy header the loader refuses (negative or overflowing shape, bad layout)"},
    {"npy-header-noncanonical", "a .npy header that is not the literal numpy writes (escapes, "
                                "double quotes, concatenation, duplicate keys): readers may "
                                "disagree on its dtype"},
    {"npy-object-array", "a .npy object array: a pickle loaded with allow_pickle=True"},
    {"safetensors-header", "a safetensors header the loader refuses (not JSON, fields missing)"},
    {"safetensors-header-length", "a safetensors header length past the end of the file"},
    {"safetensors-shape", "a safetensors shape with a negative size or an overflowing size"},
    {"safetensors-offsets", "safetensors data offsets outside the data, overlapping or with gaps"},
};

/* The scanner's rules table (static; *n gets its length): what `tckpt scan
 * --rules` lists. */
const struct tn_scan_rule *tn_scan_rules(size_t *n)
{
    *n = sizeof rules / sizeof *rules;
    return rules;
}
