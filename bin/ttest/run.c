/*
 * bin/ttest/run.c: the process pool.
 *
 * Each attempt of a test is one process in its own process group, with
 * stdin from /dev/null, stdout and stderr read through pipes (stdout is also
 * parsed as TAP), and its own temporary folder in TMPDIR and TEST_TMPDIR.
 * At its deadline the whole group gets SIGTERM, then SIGKILL after the grace
 * period; once the test's main process has exited, whatever it left behind
 * in its group is killed too, so no test outlives its slot.  Pipes are read
 * until both close or, if a process that left the group still holds them,
 * for two more seconds.
 *
 * One loop does everything: poll() on the pipes and on a self-pipe written
 * by the SIGCHLD handler, with a timeout set by the nearest deadline.
 * Tests marked serial run alone: nothing starts beside them.  A failed
 * attempt is retried at once (in a fresh process) up to --retries times
 * (none by default).  After --maxfail failed tests nothing more starts.
 */
#include "ttest.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tensor/core.h>

#define LOG_CAP (16u << 20)
#define DRAIN_SECONDS 2.0

struct slot {
    struct tt_test *t;
    struct tt_attempt *a;
    pid_t pid;
    int fd[2];          /* stdout, stderr; -1 once closed */
    double start, deadline, kill_at, drain_until;
    bool timed_out, reaped, killed;
    int wstatus;
    char *tmpdir;
    int worker;
    bool truncated;
};

static int sigpipe_fds[2] = {-1, -1};
static volatile sig_atomic_t interrupted;

static void on_chld(int sig)
{
    (void)sig;
    int e = errno;
    if (write(sigpipe_fds[1], "c", 1) < 0) {
        /* full pipe: a wake-up is already pending */
    }
    errno = e;
}

static void on_int(int sig)
{
    interrupted = sig;
    on_chld(sig);
}

const char *tt_status_name(enum tt_status s)
{
    static const char *names[] = {"pass", "fail", "skip", "timeout", "error", "flaky", "notrun"};
    return names[s];
}

static const char *signame(int sig)
{
    const char *n = sigabbrev_np(sig);
    static char buf[32];
    if (!n)
        return "an unknown signal";
    snprintf(buf, sizeof(buf), "SIG%s", n);
    return buf;
}

static void child(const struct slot *s, const struct tt_opts *o, int errfd, int out, int err)
{
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGCHLD, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    int null = open("/dev/null", O_RDONLY);
    if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
        goto fail;
    /* Descriptors ttest inherited (Bats's fd 3, a make jobserver) are not
     * the test's; only the exec-error pipe stays, closed by exec itself. */
    for (int fd = 3; fd < 1024; fd++)
        if (fd != errfd)
            close(fd);
    /* The shard variables describe ttest's own shard; a test that runs
     * ttest itself must not shard its inner run by them. */
    unsetenv("TEST_TOTAL_SHARDS");
    unsetenv("TEST_SHARD_INDEX");
    unsetenv("TEST_SHARD_STATUS_FILE");
    char num[64];
    snprintf(num, sizeof(num), "%d/%d", o->shard, o->shards);
    setenv("TTEST_SHARD", num, 1);
    snprintf(num, sizeof(num), "%d", s->worker);
    setenv("TTEST_WORKER", num, 1);
    snprintf(num, sizeof(num), "%d", s->t->nattempts);
    setenv("TTEST_ATTEMPT", num, 1);
    setenv("TMPDIR", s->tmpdir, 1);
    setenv("TEST_TMPDIR", s->tmpdir, 1);
    for (char **e = s->t->env; e && *e; e++)
        putenv(*e);
    if (s->t->cwd && chdir(s->t->cwd) < 0)
        goto fail;
    execvp(s->t->argv[0], s->t->argv);
fail:;
    int e = errno;
    if (write(errfd, &e, sizeof(e)) < 0) {
        /* nothing more to say */
    }
    _exit(127);
}

/* Starts an attempt. Returns false when the test could not be started
 * (the attempt then holds the reason). */
static bool start(struct slot *s, const struct tt_opts *o, const char *tmpbase)
{
    struct tt_test *t = s->t;
    t->attempts = tt_xrealloc(t->attempts, (size_t)(t->nattempts + 1) * sizeof(*t->attempts));
    s->a = &t->attempts[t->nattempts++];
    memset(s->a, 0, sizeof(*s->a));
    tt_tap_init(&s->a->tap);
    s->timed_out = s->reaped = s->killed = s->truncated = false;
    s->fd[0] = s->fd[1] = -1;
    s->pid = -1;

    s->tmpdir = tt_xasprintf("%s/ttest.XXXXXX", tmpbase);
    int out[2], err[2], ex[2];
    if (!mkdtemp(s->tmpdir)) {
        s->a->message = tt_xasprintf("cannot make a temporary folder in %s: %s", tmpbase, strerror(errno));
        free(s->tmpdir);
        s->tmpdir = NULL;
        return false;
    }
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(ex, O_CLOEXEC) < 0)
        tt_die(2, "cannot make a pipe: %m");
    s->start = tt_now();
    pid_t pid = fork();
    if (pid < 0)
        tt_die(2, "cannot fork: %m");
    if (pid == 0)
        child(s, o, ex[1], out[1], err[1]);
    setpgid(pid, pid); /* also here, so a kill of the group never misses */
    close(out[1]);
    close(err[1]);
    close(ex[1]);
    int e = 0;
    ssize_t r;
    while ((r = read(ex[0], &e, sizeof(e))) < 0 && errno == EINTR)
        ;
    close(ex[0]);
    s->pid = pid;
    s->fd[0] = out[0];
    s->fd[1] = err[0];
    double limit = t->timeout > 0 ? t->timeout : o->timeout;
    s->deadline = limit > 0 ? s->start + limit : 0;
    s->kill_at = 0;
    s->drain_until = 0;
    if (r == (ssize_t)sizeof(e)) {
        s->a->message = tt_xasprintf("cannot run %s: %s", t->argv[0], strerror(e));
        return false;
    }
    return true;
}

static void take(struct slot *s, int which)
{
    char buf[65536];
    ssize_t n = read(s->fd[which], buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        close(s->fd[which]);
        s->fd[which] = -1;
        return;
    }
    if (which == 0)
        tt_tap_feed(&s->a->tap, buf, (size_t)n);
    if (s->a->log.len + (size_t)n <= LOG_CAP) {
        tt_buf_add(&s->a->log, buf, (size_t)n);
    } else if (!s->truncated) {
        s->truncated = true;
        tt_buf_addf(&s->a->log, "\n[ttest: output cut at %u MiB]\n", LOG_CAP >> 20);
    }
}

/* Sets the attempt's status from how the process ended and what it printed. */
static void judge(struct slot *s)
{
    struct tt_attempt *a = s->a;
    struct tt_tap *tap = &a->tap;
    tt_tap_finish(tap);
    a->seconds = tt_now() - s->start;
    a->exit_code = WIFEXITED(s->wstatus) ? WEXITSTATUS(s->wstatus) : -1;
    a->signal = WIFSIGNALED(s->wstatus) ? WTERMSIG(s->wstatus) : 0;
    size_t nfail = 0;
    for (size_t i = 0; i < tap->ncases; i++)
        nfail += tap->cases[i].result == TT_CASE_FAIL;

    if (s->timed_out) {
        a->status = TT_TIMEOUT;
        double limit = s->t->timeout > 0 ? s->t->timeout : s->deadline - s->start;
        a->message = tt_xasprintf("timed out after %.1f s", limit);
    } else if (a->signal) {
        a->status = TT_FAIL;
        a->message = tt_xasprintf("killed by %s", signame(a->signal));
    } else if (tap->bail) {
        a->status = TT_FAIL;
        a->message = tt_xasprintf("bailed out%s%s", *tap->bail ? ": " : "", tap->bail);
    } else if (a->exit_code == 77 && nfail == 0) {
        a->status = TT_SKIP;
        a->message = tt_xstrdup("skipped (exit status 77)");
    } else if (tap->plan == 0 && tap->ncases == 0 && a->exit_code == 0) {
        a->status = TT_SKIP;
        a->message = tt_xasprintf("skipped%s%s", tap->plan_reason ? ": " : "",
                                  tap->plan_reason ? tap->plan_reason : "");
    } else if (nfail) {
        a->status = TT_FAIL;
        a->message = tt_xasprintf("%zu of %zu case%s failed", nfail, tap->ncases, tt_s((long)tap->ncases));
    } else if (tap->errors.len) {
        a->status = TT_FAIL;
        size_t n = strcspn(tap->errors.data, "\n");
        a->message = tt_xasprintf("bad TAP: %.*s", (int)n, tap->errors.data);
    } else if (a->exit_code != 0) {
        a->status = TT_FAIL;
        a->message = tt_xasprintf("exited with status %d%s", a->exit_code,
                                  a->exit_code == 99 ? " (hard error)" : "");
    } else {
        a->status = TT_PASS;
    }
}

static bool failed(enum tt_status s)
{
    return s == TT_FAIL || s == TT_TIMEOUT || s == TT_ERROR;
}

int tt_run(struct tt_test **queue, size_t n, const struct tt_opts *o, struct tt_report *r)
{
    if (pipe2(sigpipe_fds, O_CLOEXEC | O_NONBLOCK) < 0)
        tt_die(2, "cannot make a pipe: %m");
    struct sigaction sa = {0};
    sa.sa_handler = on_chld;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    sa.sa_handler = on_int;
    sa.sa_flags = 0;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Orphans of a test become ttest's children, so they are reaped here
     * rather than left as zombies for an init that may never reap them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);

    const char *tmpbase = getenv("TMPDIR");
    if (!tmpbase || !*tmpbase)
        tmpbase = "/tmp";

    int jobs = o->jobs > 0 ? o->jobs : 1;
    struct slot *slots = calloc((size_t)jobs, sizeof(*slots));
    struct tt_test **retry = tt_xmalloc((n + 1) * sizeof(*retry));
    size_t nretry = 0, next = 0, done = 0, nfailed = 0;
    int running = 0, start_errors = 0;
    bool serial_running = false, stop = false;
    double t0 = tt_now();
    struct pollfd *pfd = tt_xmalloc((size_t)(2 * jobs + 1) * sizeof(*pfd));
    struct slot **pslot = tt_xmalloc((size_t)(2 * jobs + 1) * sizeof(*pslot));
    int *pwhich = tt_xmalloc((size_t)(2 * jobs + 1) * sizeof(int));

    for (size_t i = 0; i < n; i++)
        queue[i]->final = TT_NOTRUN;

    for (;;) {
        /* Start what may start: retries first, then the queue in plan order. */
        while (!stop && !serial_running && running < jobs && (nretry || next < n)) {
            struct tt_test *t = nretry ? retry[0] : queue[next];
            if (t->serial && running > 0)
                break; /* a serial test waits for an empty machine */
            if (nretry)
                memmove(retry, retry + 1, --nretry * sizeof(*retry));
            else
                next++;
            int w = 0;
            while (slots[w].t)
                w++;
            struct slot *s = &slots[w];
            memset(s, 0, sizeof(*s));
            s->t = t;
            s->worker = w + 1;
            if (!start(s, o, tmpbase)) {
                /* It never ran: report it, and do not count it as a test result. */
                s->a->status = TT_ERROR;
                if (s->pid > 0) {
                    kill(-s->pid, SIGKILL);
                    waitpid(s->pid, NULL, 0);
                    close(s->fd[0]);
                    close(s->fd[1]);
                }
                if (s->tmpdir) {
                    tt_rmtree(s->tmpdir);
                    free(s->tmpdir);
                }
                t->final = TT_ERROR;
                start_errors++;
                done++;
                nfailed++;
                tt_report_test(r, t);
                s->t = NULL;
                if (o->maxfail && nfailed >= (size_t)o->maxfail)
                    stop = true;
                continue;
            }
            running++;
            if (t->serial)
                serial_running = true;
        }
        if (running == 0)
            break;

        /* Wait for output, a child, or the nearest deadline. */
        double now = tt_now(), wake = now + (o->progress ? 0.25 : 3600);
        int np = 0;
        pfd[np].fd = sigpipe_fds[0];
        pfd[np].events = POLLIN;
        pslot[np++] = NULL;
        for (int w = 0; w < jobs; w++) {
            struct slot *s = &slots[w];
            if (!s->t)
                continue;
            for (int k = 0; k < 2; k++)
                if (s->fd[k] >= 0) {
                    pfd[np].fd = s->fd[k];
                    pfd[np].events = POLLIN;
                    pwhich[np] = k;
                    pslot[np++] = s;
                }
            if (!s->reaped && s->deadline && !s->timed_out && s->deadline < wake)
                wake = s->deadline;
            if (!s->reaped && s->kill_at && !s->killed && s->kill_at < wake)
                wake = s->kill_at;
            if (s->reaped && s->drain_until < wake)
                wake = s->drain_until;
        }
        int ms = wake > now ? (int)((wake - now) * 1000) + 1 : 0;
        if (poll(pfd, (nfds_t)np, ms) < 0 && errno != EINTR)
            tt_die(2, "poll: %m");

        if (interrupted) {
            for (int w = 0; w < jobs; w++)
                if (slots[w].t && slots[w].pid > 0) {
                    kill(-slots[w].pid, SIGKILL);
                    if (!slots[w].reaped)
                        waitpid(slots[w].pid, NULL, 0);
                    tt_rmtree(slots[w].tmpdir);
                }
            if (o->junit_out)
                tn_out_abort(o->junit_out);
            if (o->durations_out)
                tn_out_abort(o->durations_out);
            tt_die(130, "interrupted by %s; the tests that were running were killed",
                   signame(interrupted));
        }
        char drain[64];
        while (read(sigpipe_fds[0], drain, sizeof(drain)) > 0)
            ;
        for (int i = 1; i < np; i++)
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
                take(pslot[i], pwhich[i]);

        now = tt_now();
        /* Reap everything: tests, and (as a subreaper) the orphans they left. */
        pid_t p;
        int ws;
        while ((p = waitpid(-1, &ws, WNOHANG)) > 0)
            for (int w = 0; w < jobs; w++)
                if (slots[w].t && !slots[w].reaped && slots[w].pid == p) {
                    slots[w].reaped = true;
                    slots[w].wstatus = ws;
                    /* Whatever it left in its group goes with it. */
                    kill(-p, SIGKILL);
                    slots[w].drain_until = now + DRAIN_SECONDS;
                }
        for (int w = 0; w < jobs; w++) {
            struct slot *s = &slots[w];
            if (!s->t)
                continue;
            if (!s->reaped) {
                if (s->deadline && !s->timed_out && now >= s->deadline) {
                    s->timed_out = true;
                    kill(-s->pid, SIGTERM);
                    s->kill_at = now + o->grace;
                } else if (s->timed_out && !s->killed && now >= s->kill_at) {
                    s->killed = true;
                    kill(-s->pid, SIGKILL);
                }
            }
            if (s->reaped && (s->fd[0] >= 0 || s->fd[1] >= 0) && now >= s->drain_until) {
                for (int k = 0; k < 2; k++)
                    if (s->fd[k] >= 0) {
                        close(s->fd[k]);
                        s->fd[k] = -1;
                    }
                tt_buf_addf(&s->a->log, "\n[ttest: a process that left the test's group still held its output]\n");
            }
            if (!s->reaped || s->fd[0] >= 0 || s->fd[1] >= 0)
                continue;

            /* The attempt is over. */
            struct tt_test *t = s->t;
            judge(s);
            tt_rmtree(s->tmpdir);
            free(s->tmpdir);
            s->t = NULL;
            running--;
            if (t->serial)
                serial_running = false;
            if (failed(s->a->status) && t->nattempts <= o->retries && !stop) {
                retry[nretry++] = t; /* again, alone in a fresh process */
                continue;
            }
            enum tt_status last = s->a->status;
            t->final = (t->nattempts > 1 && (last == TT_PASS || last == TT_SKIP)) ? TT_FLAKY : last;
            done++;
            if (failed(t->final)) {
                nfailed++;
                if (o->maxfail && nfailed >= (size_t)o->maxfail)
                    stop = true;
            }
            tt_report_test(r, t);
        }
        if (o->progress)
            tt_report_progress(r, done, nfailed, tt_now() - t0);
    }
    free(slots);
    free(retry);
    free(pfd);
    free(pslot);
    free(pwhich);
    return start_errors;
}
