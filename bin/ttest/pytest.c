/*
 * bin/ttest/pytest.c: pytest files, and the programs tests need.
 *
 * A pytest file runs as one test, the way PyTorch's run_test.py runs one
 * pytest per file: `PYTHON -m pytest --junitxml=XML FILE [-m MARKS]`, with
 * pytest's own output sent to standard error (so nothing it prints can pass
 * for TAP), then its JUnit XML is read back and printed as TAP, one point
 * per case named as pytest names it below the file ("TestClass::test_x[1]").
 * Failures and errors are failing points with pytest's message as their
 * diagnostics, skips are SKIP, expected failures are TODO.  "No tests
 * collected" (pytest's status 5, e.g. when -m deselects them all) skips the
 * file.  Without an XML file (pytest could not start) the test fails with
 * pytest's exit status.
 */
#include "ttest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char pytest_to_tap[] =
    "import os, subprocess, sys\n"
    "import xml.etree.ElementTree as ET\n"
    "path, args = sys.argv[1], sys.argv[2:]\n"
    "xml = os.path.join(os.environ.get('TMPDIR') or '/tmp', 'ttest-pytest.xml')\n"
    "rc = subprocess.call([sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider',\n"
    "                      '--junitxml=' + xml, path] + args, stdout=sys.stderr)\n"
    "if rc == 5:\n"
    "    print('1..0 # SKIP pytest collected no tests')\n"
    "    sys.exit(0)\n"
    "try:\n"
    "    cases = list(ET.parse(xml).getroot().iter('testcase'))\n"
    "except (OSError, ET.ParseError):\n"
    "    sys.exit(rc or 3)\n"
    "def esc(s):\n"
    "    return ' '.join((s or '').replace('\\\\', '\\\\\\\\').replace('#', '\\\\#').split('\\n'))\n"
    "mod = os.path.splitext(os.path.basename(path))[0]\n"
    "print('TAP version 13')\n"
    "print('1..%d' % len(cases))\n"
    "for i, c in enumerate(cases, 1):\n"
    "    parts = (c.get('classname') or '').split('.')\n"
    "    parts = parts[len(parts) - parts[::-1].index(mod):] if mod in parts else []\n"
    "    name = esc('::'.join(parts + [c.get('name') or '']))\n"
    "    bad = c.find('failure')\n"
    "    if bad is None:\n"
    "        bad = c.find('error')\n"
    "    skip = c.find('skipped')\n"
    "    if bad is not None:\n"
    "        print('not ok %d - %s' % (i, name))\n"
    "        text = (bad.get('message') or bad.tag).splitlines() + (bad.text or '').splitlines()\n"
    "        for line in text:\n"
    "            print('# ' + line)\n"
    "    elif skip is not None and skip.get('type') == 'pytest.xfail':\n"
    "        print('not ok %d - %s # TODO %s' % (i, name, esc(skip.get('message'))))\n"
    "    elif skip is not None:\n"
    "        print('ok %d - %s # SKIP %s' % (i, name, esc(skip.get('message'))))\n"
    "    else:\n"
    "        print('ok %d - %s' % (i, name))\n"
    "sys.exit(rc)\n";

char **tt_pytest_argv(const char *path, const struct tt_opts *o)
{
    char **argv = tt_xmalloc(7 * sizeof(char *));
    int k = 0;
    argv[k++] = tt_xstrdup(o->python);
    argv[k++] = tt_xstrdup("-c");
    argv[k++] = tt_xstrdup(pytest_to_tap);
    argv[k++] = tt_xstrdup(path);
    if (o->marks) {
        argv[k++] = tt_xstrdup("-m");
        argv[k++] = tt_xstrdup(o->marks);
    }
    argv[k] = NULL;
    return argv;
}

/* Whether execvp would find `prog`. */
static bool on_path(const char *prog)
{
    if (strchr(prog, '/'))
        return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        char *p = n ? tt_xasprintf("%.*s/%s", (int)n, path, prog) : tt_xasprintf("./%s", prog);
        bool ok = access(p, X_OK) == 0;
        free(p);
        if (ok)
            return true;
        path += n + (path[n] == ':');
    }
    return false;
}

/* Whether `python -c 'import pytest'` succeeds. */
static bool has_pytest(const char *python)
{
    pid_t pid = fork();
    if (pid < 0)
        tt_die(2, "cannot fork: %m");
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        execlp(python, python, "-c", "import pytest", (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return false;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int tt_runners_check(const struct tt_test *tests, size_t n, const struct tt_opts *o)
{
    const struct tt_test *bats = NULL, *py = NULL;
    for (size_t i = 0; i < n; i++) {
        if (tests[i].kind == TT_KIND_BATS && !bats)
            bats = &tests[i];
        if (tests[i].kind == TT_KIND_PYTEST && !py)
            py = &tests[i];
    }
    if (bats && !on_path(o->bats)) {
        tt_warn("%s: cannot run Bats files: '%s' is not found (install bats, or name it with --bats or $BATS)",
                bats->name, o->bats);
        return -1;
    }
    if (py && !has_pytest(o->python)) {
        tt_warn("%s: cannot run pytest files: '%s' cannot import pytest (install it, or name a Python that "
                "has it with --python)", py->name, o->python);
        return -1;
    }
    return 0;
}
