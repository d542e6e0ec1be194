/* bin/trun/workers.c: one attempt's workers: started with torchrun's
 * environment, watched (output, exits, signals) and stopped; the guardian
 * that kills them when trun is gone. */
#include "trun.h"

struct worker *workers;
int guard_fd = -1;
int sfd;
char hostname[256];

void setenvf(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void setenvf(const char *name, const char *fmt, ...)
{
    char v[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    setenv(name, v, 1);
}


static void tell_guardian(pid_t g);

pid_t start_worker(struct worker *w, int attempt, int world)
{
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
        fprintf(stderr, "trun: pipe: %s\n", strerror(errno));
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "trun: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(137); /* trun died before the line above */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        setenvf("RANK", "%d", w->rank);
        setenvf("LOCAL_RANK", "%d", w->local_rank);
        setenvf("GROUP_RANK", "%d", opt.node_rank);
        setenvf("ROLE_RANK", "%d", w->rank);
        setenvf("ROLE_NAME", "%s", opt.role);
        setenvf("LOCAL_WORLD_SIZE", "%d", opt.nproc);
        setenvf("WORLD_SIZE", "%d", world);
        setenvf("GROUP_WORLD_SIZE", "%d", opt.nnodes);
        setenvf("ROLE_WORLD_SIZE", "%d", world);
        setenvf("TORCHELASTIC_RESTART_COUNT", "%d", attempt);
        setenvf("TORCHELASTIC_MAX_RESTARTS", "%d", opt.max_restarts);
        setenvf("TORCHELASTIC_RUN_ID", "%s", opt.run_id);
        setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
        setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", 0);
        if (opt.nproc > 1)
            setenv("OMP_NUM_THREADS", "1", 0);
        if (opt.log_dir)
            setenvf("TORCHELASTIC_ERROR_FILE", "%s/attempt_%d/%d/error.json", opt.run_log_dir,
                    attempt, w->local_rank);
        char **argv = opt.argv;
        int argc = 0;
        while (argv[argc])
            argc++;
        if (!opt.no_python) { /* torchrun's: $PYTHON_EXEC -u [-m] SCRIPT ARGS */
            char **a = calloc((size_t)argc + 4, sizeof *a);
            const char *py = getenv("PYTHON_EXEC");
            int k = 0;
            a[k++] = (char *)(py && *py ? py : "python3");
            a[k++] = "-u";
            if (opt.module)
                a[k++] = "-m";
            for (int i = 0; i < argc; i++)
                a[k++] = argv[i];
            argv = a;
        }
        execvp(argv[0], argv);
        fprintf(stderr, "trun: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* both sides, so it holds before either runs on */
    close(po[1]);
    close(pe[1]);
    setup_stream(&w->out, po[0], 1, stdout, attempt, w->local_rank, "stdout.log");
    setup_stream(&w->err, pe[0], 2, stderr, attempt, w->local_rank, "stderr.log");
    w->pid = pid;
    w->running = true;
    w->status = 0;
    for (int i = 0; i < w->ntail; i++)
        free(w->tail[i]);
    w->ntail = 0;
    tell_guardian(pid);
    return pid;
}

/* Tells the guardian about a worker group: g > 0 a new one to kill when trun
 * goes away, -g one that ended and must be forgotten (its id may be reused). */
static void tell_guardian(pid_t g)
{
    if (guard_fd >= 0) {
        ssize_t r = write(guard_fd, &g, sizeof g);
        (void)r;
    }
}

/* The guardian: SIGKILLs every worker group trun told it about, and has not
 * been told to forget since, once trun's end of the pipe closes, for whatever
 * reason trun went away. It never signals an id that is no longer ours: a
 * group is forgotten as soon as trun reaps its leader and kills the rest. */
void start_guardian(void)
{
    int p[2];
    if (pipe(p) < 0)
        return;
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return;
    }
    if (pid == 0) {
        close(p[1]);
        setsid(); /* signals to trun's group do not end the guardian first */
        for (int fd = 3; fd < 1024; fd++)
            if (fd != p[0])
                close(fd);
        pid_t *groups = NULL;
        size_t n = 0, cap = 0;
        pid_t g;
        while (read(p[0], &g, sizeof g) == (ssize_t)sizeof g) {
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                pid_t *ng = realloc(groups, cap * sizeof *ng);
                if (!ng)
                    break;
                groups = ng;
            }
            if (g > 0) {
                groups[n++] = g;
                continue;
            }
            for (size_t i = 0; i < n; i++) /* forget -g */
                if (groups[i] == -g) {
                    groups[i] = groups[--n];
                    break;
                }
        }
        for (size_t i = 0; i < n; i++)
            kill(-groups[i], SIGKILL);
        _exit(0);
    }
    close(p[0]);
    fcntl(p[1], F_SETFD, FD_CLOEXEC);
    guard_fd = p[1];
}

const char *signame(int sig)
{
    static char buf[32];
    const char *d = sigabbrev_np(sig);
    if (d) {
        snprintf(buf, sizeof buf, "SIG%s", d);
        return buf;
    }
    snprintf(buf, sizeof buf, "signal %d", sig);
    return buf;
}

int exit_code(int status)
{
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

bool failed(int status)
{
    return WIFSIGNALED(status) || WEXITSTATUS(status) != 0;
}


/* Reaps every ended child without waiting. A reaped worker's whole process
 * group is SIGKILLed at once (children it left, a SIGKILLed worker's most of
 * all, never run on into the next attempt), then the guardian forgets the
 * group. Updates the worker's status and end time and *running. */
void reap(int *running)
{
    int st;
    siginfo_t si;
    /* WNOWAIT first: the unreaped leader holds its id, so the group signalled
     * and forgotten is still ours */
    for (;;) {
        si.si_pid = 0;
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid <= 0)
            break;
        pid_t pid = si.si_pid;
        bool ours = false;
        for (int i = 0; i < opt.nproc; i++)
            ours |= workers[i].pid == pid && workers[i].running;
        if (ours) {
            kill(-pid, SIGKILL);
            tell_guardian(-pid);
        }
        if (waitpid(pid, &st, 0) != pid)
            break;
        for (int i = 0; i < opt.nproc; i++) {
            if (workers[i].pid == pid && workers[i].running) {
                workers[i].running = false;
                workers[i].status = st;
                clock_gettime(CLOCK_REALTIME, &workers[i].ended);
                (*running)--;
            }
        }
    }
}

void signal_all(int sig)
{
    for (int i = 0; i < opt.nproc; i++)
        if (workers[i].running)
            kill(-workers[i].pid, sig);
}

int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs one attempt. Returns the index of the first failed worker, -1 when
 * all succeeded, -3 when another node's worker failed, -4 when a node
 * waits to join (elastic), -5 when a node was lost (no heartbeat) and -6
 * when the rendezvous store is gone; *sig is set when a signal to trun
 * ended the attempt. */
int run_attempt(int attempt, int world, int *sig)
{
    bool remote = false, joining = false, lost = false, gone = false;
    int watch = 0;
    int running = 0;
    *sig = 0;
    for (int i = 0; i < opt.nproc; i++) {
        workers[i].local_rank = i;
        workers[i].rank = opt.node_rank * opt.nproc + i;
        if (start_worker(&workers[i], attempt, world) < 0) {
            signal_all(SIGKILL);
            return -2;
        }
        running++;
    }
    int first = -1;
    int64_t kill_at = -1;
    struct pollfd *pfd = calloc((size_t)opt.nproc * 2 + 1, sizeof *pfd);
    int interval = (int)(opt.monitor_interval * 1000);
    if (interval < 10)
        interval = 10;
    for (;;) {
        int open_streams = 0;
        int n = 0;
        pfd[n++] = (struct pollfd){.fd = sfd, .events = POLLIN};
        for (int i = 0; i < opt.nproc; i++) {
            struct stream *ss[2] = {&workers[i].out, &workers[i].err};
            for (int k = 0; k < 2; k++)
                if (ss[k]->fd >= 0) {
                    pfd[n++] = (struct pollfd){.fd = ss[k]->fd, .events = POLLIN};
                    open_streams++;
                }
        }
        if (running == 0 && open_streams == 0)
            break;
        /* Output held open by a grandchild must not keep trun waiting. */
        if (running == 0 && kill_at < 0)
            kill_at = now_ms() + (int64_t)(opt.grace * 1000);
        if (running == 0 && now_ms() >= kill_at) {
            for (int i = 0; i < opt.nproc; i++) {
                struct stream *ss[2] = {&workers[i].out, &workers[i].err};
                for (int k = 0; k < 2; k++)
                    if (ss[k]->fd >= 0) {
                        close(ss[k]->fd);
                        ss[k]->fd = -1;
                    }
            }
            break;
        }
        poll(pfd, (nfds_t)n, interval);
        if (pfd[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                int s = (int)si.ssi_signo;
                if (s == SIGCHLD)
                    continue;
                signal_all(s);
                if (s == SIGUSR1 || s == SIGUSR2)
                    continue;
                if (!*sig) {
                    *sig = s;
                    kill_at = now_ms() + (int64_t)(opt.grace * 1000);
                }
            }
        }
        for (int j = 1; j < n; j++) {
            if (!(pfd[j].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            for (int i = 0; i < opt.nproc; i++) {
                if (workers[i].out.fd == pfd[j].fd)
                    pump(&workers[i], &workers[i].out);
                else if (workers[i].err.fd == pfd[j].fd)
                    pump(&workers[i], &workers[i].err);
            }
        }
        reap(&running);
        /* workers stopped for another node's failure did not fail themselves */
        if (first < 0 && !*sig && !remote) {
            for (int i = 0; i < opt.nproc; i++) {
                if (!workers[i].running && failed(workers[i].status)) {
                    if (first < 0 || workers[i].ended.tv_sec < workers[first].ended.tv_sec ||
                        (workers[i].ended.tv_sec == workers[first].ended.tv_sec &&
                         workers[i].ended.tv_nsec < workers[first].ended.tv_nsec))
                        first = i;
                }
            }
            /* a worker that failed while a node waits to join most likely
             * lost a peer the join stopped: the new round is no restart */
            if (first >= 0 && rdzv && rdzv_joining()) {
                first = -1;
                joining = remote = true;
                signal_all(SIGTERM);
                kill_at = now_ms() + (int64_t)(opt.grace * 1000);
            } else if (first >= 0) {
                signal_all(SIGTERM);
                kill_at = now_ms() + (int64_t)(opt.grace * 1000);
                if (rdzv)
                    rdzv_mark("failed");
            } else if (rdzv && !remote && running > 0 && (watch = rdzv_watch()) != 0) {
                remote = true;
                joining = watch == 2;
                lost = watch == 3;
                gone = watch < 0;
                signal_all(SIGTERM);
                kill_at = now_ms() + (int64_t)(opt.grace * 1000);
            }
        }
        if (rdzv && (remote || first >= 0 || *sig))
            rdzv_beat();
        if (kill_at >= 0 && running > 0 && now_ms() >= kill_at)
            signal_all(SIGKILL);
    }
    free(pfd);
    for (int i = 0; i < opt.nproc; i++) {
        if (workers[i].out.log)
            fclose(workers[i].out.log);
        if (workers[i].err.log)
            fclose(workers[i].err.log);
        workers[i].out.log = workers[i].err.log = NULL;
    }
    if (first >= 0 || !remote)
        return first;
    return gone ? -6 : lost ? -5 : joining ? -4 : -3;
}
