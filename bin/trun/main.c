/*
 * trun: the distributed launcher (torchrun's counterpart). It hosts the
 * TCPStore, starts N workers with torchrun's environment, prefixes their
 * output with the rank, and on a failure stops the group (SIGTERM, then
 * SIGKILL after a grace period), restarts it while restarts are left, or
 * prints the first failure and exits with that worker's status. With
 * --nnodes MIN:MAX the nodes' truns meet in an elastic rendezvous over the
 * store (see rendezvous()) and restart together.
 *
 * No worker outlives trun: each worker leads its own process group and has
 * PR_SET_PDEATHSIG; a small guardian process, which trun cannot take down
 * with it, SIGKILLs every worker's group as soon as trun's end of a pipe
 * closes, even when trun itself is SIGKILLed.
 */
#include <tensor/tensor.h>

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TAIL_LINES 10
#define LINE_MAX_BYTES 65536

struct stream {
    int fd;         /* read end, -1 at EOF */
    FILE *console;  /* stdout or stderr, NULL when filtered out */
    FILE *log;      /* per-rank log file or NULL */
    char buf[LINE_MAX_BYTES];
    size_t len;
};

struct worker {
    int local_rank, rank;
    pid_t pid;
    bool running;
    int status; /* wait status once exited */
    struct timespec ended;
    struct stream out, err;
    char *tail[TAIL_LINES]; /* last lines of output, for the summary */
    int ntail;
};

static struct {
    int nproc, nnodes, node_rank;
    char master_addr[256];
    int master_port;
    char run_id[128];
    char role[64];
    int max_restarts;
    double monitor_interval;
    const char *log_dir;
    int redirects, tee; /* bit 1: stdout, bit 2: stderr */
    const char *ranks_filter;
    bool run_path, module;
    double grace;
    char **argv;
    /* --nnodes MIN:MAX with MIN < MAX: membership by rendezvous */
    int min_nodes, max_nodes;
    bool elastic;
    double join_timeout, last_call; /* seconds (--rdzv-conf) */
} opt;

static struct worker *workers;
static int guard_fd = -1;
static char hostname[256];

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: trun [OPTIONS] PROGRAM [ARGS...]\n"
            "Start PROGRAM as N workers with torchrun's environment, host their store,\n"
            "prefix their output with the rank, and stop, restart or report them on failure.\n"
            "\n"
            "  --nproc-per-node N|auto|cpu  workers on this node (default 1; auto: CPUs)\n"
            "  --nnodes N|MIN:MAX        nodes in the job (default 1)\n"
            "  --node-rank R             this node's rank (default 0)\n"
            "  --master-addr HOST        the store's host (default 127.0.0.1)\n"
            "  --master-port PORT        the store's port (default 29500; 0: a free port)\n"
            "  --rdzv-endpoint HOST[:PORT]  the same as --master-addr/--master-port\n"
            "  --rdzv-id ID              the job id (TORCHELASTIC_RUN_ID)\n"
            "  --rdzv-backend NAME       static or c10d (both mean trun's store)\n"
            "  --rdzv-conf K=V,...       join_timeout, last_call_timeout (seconds) of\n"
            "                            elastic jobs (--nnodes MIN:MAX)\n"
            "  --standalone              one node, a free port, a random id\n"
            "  --max-restarts N          restarts of the worker group (default 0)\n"
            "  --monitor-interval SECS   how often to check the workers (default 0.1)\n"
            "  --log-dir DIR             per-rank logs under DIR/ID/attempt_K/LOCAL_RANK/\n"
            "  -r, --redirects 0|1|2|3   send stdout (1), stderr (2), both (3) to the logs only\n"
            "  -t, --tee 0|1|2|3         write stdout/stderr to the logs and the console\n"
            "  --local-ranks-filter LIST  show only these local ranks on the console\n"
            "  --role NAME               the workers' role (default \"default\")\n"
            "  --run-path                PROGRAM is a Python script: run it with python3\n"
            "  -m, --module              PROGRAM is a Python module: python3 -m PROGRAM\n"
            "  --no-python               run PROGRAM directly (the default)\n"
            "  --grace SECS              SIGTERM to SIGKILL delay when stopping (default 5)\n"
            "  -h, --help                print this help and exit\n"
            "  -V, --version             print the version and exit\n"
            "\n"
            "Options also come from PET_<OPTION> variables, as torchrun's do.\n");
}

static void die_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "trun: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'trun --help' for more information.\n");
    exit(2);
}

static int parse_count(const char *s, const char *what, int min)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < min || v > 1 << 20)
        die_usage(what, s);
    return (int)v;
}

static double parse_secs(const char *s, const char *what)
{
    char *end;
    double v = strtod(s, &end);
    if (*end || end == s || !(v >= 0) || v > 1e6)
        die_usage(what, s);
    return v;
}

static int parse_streams(const char *s, const char *what)
{
    if (strlen(s) != 1 || s[0] < '0' || s[0] > '3')
        die_usage(what, s);
    return s[0] - '0';
}

static void parse_nproc(const char *s)
{
    if (!strcmp(s, "auto") || !strcmp(s, "cpu")) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        opt.nproc = n > 0 ? (int)n : 1;
    } else {
        opt.nproc = parse_count(s, "--nproc-per-node: '%s' is not a count, auto or cpu", 1);
    }
}

static void parse_nnodes(const char *s)
{
    const char *colon = strchr(s, ':');
    if (!colon) {
        opt.nnodes = parse_count(s, "--nnodes: '%s' is not a count", 1);
        return;
    }
    char lo[32];
    size_t n = (size_t)(colon - s);
    if (n >= sizeof lo)
        die_usage("--nnodes: bad value '%s'", s);
    memcpy(lo, s, n);
    lo[n] = 0;
    int mn = parse_count(lo, "--nnodes: bad minimum in '%s'", 1);
    int mx = parse_count(colon + 1, "--nnodes: bad maximum in '%s'", 1);
    if (mn > mx)
        die_usage("--nnodes: MIN is above MAX in '%s'", s);
    opt.nnodes = mx;
    opt.min_nodes = mn;
    opt.elastic = mn != mx;
}

static void parse_endpoint(const char *s)
{
    const char *colon = strrchr(s, ':');
    if (s[0] == '[') { /* [::1]:port */
        const char *close = strchr(s, ']');
        if (!close)
            die_usage("--rdzv-endpoint: bad address '%s'", s);
        colon = close[1] == ':' ? close + 1 : NULL;
    }
    size_t n = colon ? (size_t)(colon - s) : strlen(s);
    if (n >= sizeof opt.master_addr || n == 0)
        die_usage("--rdzv-endpoint: bad address '%s'", s);
    memcpy(opt.master_addr, s, n);
    opt.master_addr[n] = 0;
    if (colon)
        opt.master_port = parse_count(colon + 1, "--rdzv-endpoint: bad port in '%s'", 0);
}

/* --rdzv-conf k=v,k=v: join_timeout and last_call_timeout (seconds);
 * torchrun's other keys are accepted and ignored. */
static void parse_rdzv_conf(const char *s)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq)
            die_usage("--rdzv-conf: '%s' is not KEY=VALUE", kv);
        *eq = 0;
        if (!strcmp(kv, "join_timeout"))
            opt.join_timeout = parse_secs(eq + 1, "--rdzv-conf: bad join_timeout '%s'");
        else if (!strcmp(kv, "last_call_timeout"))
            opt.last_call = parse_secs(eq + 1, "--rdzv-conf: bad last_call_timeout '%s'");
    }
}

enum {
    O_NPROC = 256, O_NNODES, O_NODE_RANK, O_MADDR, O_MPORT, O_ENDPOINT, O_RDZV_ID,
    O_RDZV_BACKEND, O_STANDALONE, O_RESTARTS, O_MONITOR, O_LOGDIR, O_FILTER, O_ROLE,
    O_RUNPATH, O_NOPY, O_GRACE, O_RDZV_CONF
};

static const struct option longopts[] = {
    {"nproc-per-node", required_argument, NULL, O_NPROC},
    {"nproc_per_node", required_argument, NULL, O_NPROC},
    {"nnodes", required_argument, NULL, O_NNODES},
    {"node-rank", required_argument, NULL, O_NODE_RANK},
    {"node_rank", required_argument, NULL, O_NODE_RANK},
    {"master-addr", required_argument, NULL, O_MADDR},
    {"master_addr", required_argument, NULL, O_MADDR},
    {"master-port", required_argument, NULL, O_MPORT},
    {"master_port", required_argument, NULL, O_MPORT},
    {"rdzv-endpoint", required_argument, NULL, O_ENDPOINT},
    {"rdzv_endpoint", required_argument, NULL, O_ENDPOINT},
    {"rdzv-id", required_argument, NULL, O_RDZV_ID},
    {"rdzv_id", required_argument, NULL, O_RDZV_ID},
    {"rdzv-backend", required_argument, NULL, O_RDZV_BACKEND},
    {"rdzv_backend", required_argument, NULL, O_RDZV_BACKEND},
    {"standalone", no_argument, NULL, O_STANDALONE},
    {"max-restarts", required_argument, NULL, O_RESTARTS},
    {"max_restarts", required_argument, NULL, O_RESTARTS},
    {"monitor-interval", required_argument, NULL, O_MONITOR},
    {"monitor_interval", required_argument, NULL, O_MONITOR},
    {"log-dir", required_argument, NULL, O_LOGDIR},
    {"log_dir", required_argument, NULL, O_LOGDIR},
    {"redirects", required_argument, NULL, 'r'},
    {"tee", required_argument, NULL, 't'},
    {"local-ranks-filter", required_argument, NULL, O_FILTER},
    {"local_ranks_filter", required_argument, NULL, O_FILTER},
    {"role", required_argument, NULL, O_ROLE},
    {"run-path", no_argument, NULL, O_RUNPATH},
    {"run_path", no_argument, NULL, O_RUNPATH},
    {"module", no_argument, NULL, 'm'},
    {"no-python", no_argument, NULL, O_NOPY},
    {"no_python", no_argument, NULL, O_NOPY},
    {"grace", required_argument, NULL, O_GRACE},
    {"rdzv-conf", required_argument, NULL, O_RDZV_CONF},
    {"rdzv_conf", required_argument, NULL, O_RDZV_CONF},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static void apply(int c, const char *arg)
{
    switch (c) {
    case O_NPROC: parse_nproc(arg); break;
    case O_NNODES: parse_nnodes(arg); break;
    case O_NODE_RANK: opt.node_rank = parse_count(arg, "--node-rank: '%s' is not a rank", 0); break;
    case O_MADDR:
        if (strlen(arg) >= sizeof opt.master_addr || !*arg)
            die_usage("--master-addr: bad address '%s'", arg);
        strcpy(opt.master_addr, arg);
        break;
    case O_MPORT:
        opt.master_port = parse_count(arg, "--master-port: '%s' is not a port", 0);
        if (opt.master_port > 65535)
            die_usage("--master-port: '%s' is not a port", arg);
        break;
    case O_ENDPOINT: parse_endpoint(arg); break;
    case O_RDZV_ID: snprintf(opt.run_id, sizeof opt.run_id, "%s", arg); break;
    case O_RDZV_BACKEND:
        if (strcmp(arg, "static") && strcmp(arg, "c10d"))
            die_usage("--rdzv-backend: '%s' is not supported (static, c10d)", arg);
        break;
    case O_STANDALONE:
        opt.nnodes = 1;
        opt.node_rank = 0;
        strcpy(opt.master_addr, "127.0.0.1");
        opt.master_port = 0;
        break;
    case O_RESTARTS: opt.max_restarts = parse_count(arg, "--max-restarts: '%s' is not a count", 0); break;
    case O_MONITOR: opt.monitor_interval = parse_secs(arg, "--monitor-interval: bad seconds '%s'"); break;
    case O_LOGDIR: opt.log_dir = arg; break;
    case 'r': opt.redirects = parse_streams(arg, "--redirects: '%s' is not 0, 1, 2 or 3"); break;
    case 't': opt.tee = parse_streams(arg, "--tee: '%s' is not 0, 1, 2 or 3"); break;
    case O_FILTER: opt.ranks_filter = arg; break;
    case O_ROLE: snprintf(opt.role, sizeof opt.role, "%s", arg); break;
    case O_RUNPATH: opt.run_path = true; break;
    case 'm': opt.module = true; break;
    case O_NOPY: break;
    case O_GRACE: opt.grace = parse_secs(arg, "--grace: bad seconds '%s'"); break;
    case O_RDZV_CONF: parse_rdzv_conf(arg); break;
    default: break;
    }
}

/* The first host of a Slurm hostlist: "gpu[01-04,10],cpu1" -> "gpu01". */
static void first_host(const char *list, char *out, size_t cap)
{
    size_t o = 0;
    const char *p = list;
    while (*p && *p != ',' && *p != '[' && o + 1 < cap)
        out[o++] = *p++;
    if (*p == '[')
        for (p++; *p && *p != '-' && *p != ',' && *p != ']' && o + 1 < cap; p++)
            out[o++] = *p;
    out[o] = 0;
}

/* Under Slurm's srun or Open MPI's mpirun (one trun per node), the node's
 * rank and the node count come from their variables, and under Slurm the
 * master is the step's first host; PET_ variables and options override. */
static void scheduler_defaults(void)
{
    const char *v;
    if ((v = getenv("SLURM_NODEID")) && *v) {
        const char *nn = getenv("SLURM_NNODES");
        if (nn && *nn)
            opt.nnodes = parse_count(nn, "SLURM_NNODES: '%s' is not a count", 1);
        opt.node_rank = parse_count(v, "SLURM_NODEID: '%s' is not a rank", 0);
        const char *list = getenv("SLURM_STEP_NODELIST");
        if (!list || !*list)
            list = getenv("SLURM_JOB_NODELIST");
        if (list && *list)
            first_host(list, opt.master_addr, sizeof opt.master_addr);
    } else if ((v = getenv("OMPI_COMM_WORLD_RANK")) && *v) {
        const char *n = getenv("OMPI_COMM_WORLD_SIZE");
        if (n && *n)
            opt.nnodes = parse_count(n, "OMPI_COMM_WORLD_SIZE: '%s' is not a count", 1);
        opt.node_rank = parse_count(v, "OMPI_COMM_WORLD_RANK: '%s' is not a rank", 0);
    }
}

/* torchrun reads every option from PET_<NAME> when it is not given. */
static void env_defaults(void)
{
    static const struct { const char *env; int code; } pet[] = {
        {"PET_NPROC_PER_NODE", O_NPROC}, {"PET_NNODES", O_NNODES},
        {"PET_NODE_RANK", O_NODE_RANK}, {"PET_MASTER_ADDR", O_MADDR},
        {"PET_MASTER_PORT", O_MPORT}, {"PET_RDZV_ENDPOINT", O_ENDPOINT},
        {"PET_RDZV_ID", O_RDZV_ID}, {"PET_MAX_RESTARTS", O_RESTARTS},
        {"PET_MONITOR_INTERVAL", O_MONITOR}, {"PET_LOG_DIR", O_LOGDIR},
        {"PET_REDIRECTS", 'r'}, {"PET_TEE", 't'}, {"PET_LOCAL_RANKS_FILTER", O_FILTER},
        {"PET_ROLE", O_ROLE},
    };
    for (size_t i = 0; i < sizeof pet / sizeof pet[0]; i++) {
        const char *v = getenv(pet[i].env);
        if (v && *v)
            apply(pet[i].code, v);
    }
    const char *s = getenv("PET_STANDALONE");
    if (s && !strcmp(s, "1"))
        apply(O_STANDALONE, NULL);
}

static bool shown_on_console(int local_rank)
{
    if (!opt.ranks_filter)
        return true;
    const char *p = opt.ranks_filter;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        if (v == local_rank)
            return true;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            break;
    }
    return false;
}

/* ------------------------------------------------------------ output */

static void remember(struct worker *w, const char *line, size_t n)
{
    if (w->ntail == TAIL_LINES) {
        free(w->tail[0]);
        memmove(w->tail, w->tail + 1, (TAIL_LINES - 1) * sizeof w->tail[0]);
        w->ntail--;
    }
    char *c = strndup(line, n > 400 ? 400 : n);
    if (c)
        w->tail[w->ntail++] = c;
}

static void emit(struct worker *w, struct stream *s, const char *line, size_t n)
{
    if (s->console) {
        fprintf(s->console, "[%d]:%.*s\n", w->rank, (int)n, line);
        fflush(s->console);
    }
    if (s->log) {
        fwrite(line, 1, n, s->log);
        fputc('\n', s->log);
        fflush(s->log);
    }
    remember(w, line, n);
}

/* Reads what is there; returns false at EOF. */
static bool pump(struct worker *w, struct stream *s)
{
    ssize_t r = read(s->fd, s->buf + s->len, sizeof s->buf - s->len);
    if (r < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (r <= 0) {
        if (s->len)
            emit(w, s, s->buf, s->len);
        s->len = 0;
        close(s->fd);
        s->fd = -1;
        return false;
    }
    s->len += (size_t)r;
    size_t start = 0;
    for (size_t i = 0; i < s->len; i++) {
        if (s->buf[i] == '\n') {
            emit(w, s, s->buf + start, i - start);
            start = i + 1;
        }
    }
    if (start == 0 && s->len == sizeof s->buf) { /* a line longer than the buffer */
        emit(w, s, s->buf, s->len);
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
    return true;
}

/* ------------------------------------------------------------ workers */

static void setenvf(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void setenvf(const char *name, const char *fmt, ...)
{
    char v[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    setenv(name, v, 1);
}

static int mkdirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p == '/') {
            *p = 0;
            if (mkdir(path, 0755) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    return mkdir(path, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static FILE *open_log(int attempt, int local_rank, const char *name)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/%s/attempt_%d/%d", opt.log_dir, opt.run_id, attempt, local_rank);
    if (mkdirs(dir) < 0) {
        fprintf(stderr, "trun: cannot create %s: %s\n", dir, strerror(errno));
        return NULL;
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "trun: cannot write %s: %s\n", path, strerror(errno));
    return f;
}

static void setup_stream(struct stream *s, int fd, int bit, FILE *console, int attempt,
                         int local_rank, const char *name)
{
    s->fd = fd;
    s->len = 0;
    bool to_log = opt.log_dir != NULL; /* files always; the console per -r/-t */
    s->log = to_log ? open_log(attempt, local_rank, name) : NULL;
    bool redirected = (opt.redirects & bit) && !(opt.tee & bit);
    s->console = redirected || !shown_on_console(local_rank) ? NULL : console;
}

static pid_t start_worker(struct worker *w, int attempt, int world)
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
            setenvf("TORCHELASTIC_ERROR_FILE", "%s/%s/attempt_%d/%d/error.json", opt.log_dir,
                    opt.run_id, attempt, w->local_rank);
        char **argv = opt.argv;
        int argc = 0;
        while (argv[argc])
            argc++;
        if (opt.run_path || opt.module) {
            char **a = calloc((size_t)argc + 3, sizeof *a);
            const char *py = getenv("PYTHON_EXEC");
            int k = 0;
            a[k++] = (char *)(py && *py ? py : "python3");
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
    if (guard_fd >= 0) {
        ssize_t r = write(guard_fd, &pid, sizeof pid);
        (void)r;
    }
    return pid;
}

/* The guardian: SIGKILLs every worker group trun told it about once trun's
 * end of the pipe closes, for whatever reason trun went away. */
static void start_guardian(void)
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
            groups[n++] = g;
        }
        for (size_t i = 0; i < n; i++)
            kill(-groups[i], SIGKILL);
        _exit(0);
    }
    close(p[0]);
    fcntl(p[1], F_SETFD, FD_CLOEXEC);
    guard_fd = p[1];
}

static const char *signame(int sig)
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

static int exit_code(int status)
{
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

static bool failed(int status)
{
    return WIFSIGNALED(status) || WEXITSTATUS(status) != 0;
}

static int sfd;

static void reap(int *running)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
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

static void signal_all(int sig)
{
    for (int i = 0; i < opt.nproc; i++)
        if (workers[i].running)
            kill(-workers[i].pid, sig);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------ elastic rendezvous
 *
 * With --nnodes MIN:MAX every trun of the job meets in the store at the
 * rendezvous endpoint (hosted by the trun that can bind it on this host),
 * round by round, under "rdzv/<run id>/<round>/": each adds itself to
 * "joined" (its arrival order is its node rank); the MIN-th to arrive
 * gives the others until the last-call timeout (or MAX nodes) and writes
 * the member count to "closed", which every node waits for (the join
 * timeout). A node whose worker fails writes "failed": every node stops
 * its workers and, with restarts left, all meet again in the next round,
 * whose number is the workers' TORCHELASTIC_RESTART_COUNT. A node that
 * comes after its round closed adds itself to the round's "waiting" and
 * waits for the next round; the running nodes see it and, while the round
 * has room, start the next round with it without using a restart. A trun
 * leaving at the job's end sets "done", which sends waiting nodes home. */

static struct tn_store *rdzv;
static int rdzv_round;

static void rdzv_key(char *k, size_t n, const char *what)
{
    snprintf(k, n, "rdzv/%s/%d/%s", opt.run_id, rdzv_round, what);
}

static int rdzv_fail(const char *what)
{
    fprintf(stderr, "trun: rendezvous round %d: %s: %s\n", rdzv_round, what, tn_last_error());
    return -1;
}

static bool rdzv_has(const char *k)
{
    const char *keys[1] = {k};
    return tn_store_check(rdzv, keys, 1) == 1;
}

/* A node that came after round rdzv_round closed (or filled up): it says
 * so in the round's "waiting", which the running nodes see (they stop
 * their workers and meet it in the next round while the round has fewer
 * than MAX nodes), then waits until a node of the running group starts the
 * next round, or the job ends. Returns 0 when the next round started, -1
 * (said why) when the job ended or the join timeout passed. */
static int rdzv_wait_next(void)
{
    char k[300], next[300], done[300];
    rdzv_key(k, sizeof k, "waiting");
    if (tn_store_add(rdzv, k, 1, NULL) < 0)
        return rdzv_fail("waiting for the next round");
    fprintf(stderr, "trun: rendezvous round %d is closed; waiting for the next round\n",
            rdzv_round);
    rdzv_round++;
    rdzv_key(next, sizeof next, "joined");
    snprintf(done, sizeof done, "rdzv/%s/done", opt.run_id);
    for (int64_t until = now_ms() + (int64_t)(opt.join_timeout * 1000);;) {
        if (rdzv_has(next))
            return 0;
        if (rdzv_has(done)) {
            fprintf(stderr, "trun: the job ended before this node could join it\n");
            return -1;
        }
        if (now_ms() >= until) {
            fprintf(stderr, "trun: rendezvous round %d: no round started within the join "
                            "timeout (%g s)\n", rdzv_round, opt.join_timeout);
            return -1;
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Joins round rdzv_round, or the next one when it came too late: sets
 * opt.node_rank and opt.nnodes, or -1. */
static int rendezvous(void)
{
    static bool counted;
    if (!counted) {
        /* every trun that ever joined, for the host's last wait */
        char k[300];
        snprintf(k, sizeof k, "rdzv/%s/nodes", opt.run_id);
        if (tn_store_add(rdzv, k, 1, NULL) < 0)
            return rdzv_fail("join");
        counted = true;
        /* a node starting late begins at the job's latest round */
        for (;;) {
            rdzv_round++;
            rdzv_key(k, sizeof k, "joined");
            if (!rdzv_has(k)) {
                rdzv_round--;
                break;
            }
        }
    }
    for (;;) {
        char joined[300], closed[300];
        rdzv_key(joined, sizeof joined, "joined");
        rdzv_key(closed, sizeof closed, "closed");
        int64_t idx = 0;
        if (tn_store_add(rdzv, joined, 1, &idx) < 0)
            return rdzv_fail("join");
        idx--;
        if (idx >= opt.max_nodes) {
            if (rdzv_wait_next() < 0)
                return -1;
            continue;
        }
        if (idx + 1 == opt.min_nodes) {
            /* the last call: wait for more nodes, up to MAX */
            int64_t until = now_ms() + (int64_t)(opt.last_call * 1000), count = 0;
            for (;;) {
                if (tn_store_add(rdzv, joined, 0, &count) < 0)
                    return rdzv_fail("count");
                if (count >= opt.max_nodes || now_ms() >= until)
                    break;
                struct timespec ts = {0, 20 * 1000000L};
                nanosleep(&ts, NULL);
            }
            char v[32];
            snprintf(v, sizeof v, "%lld",
                     (long long)(count < opt.max_nodes ? count : opt.max_nodes));
            if (tn_store_set(rdzv, closed, v, strlen(v)) < 0)
                return rdzv_fail("close");
        }
        tn_store_set_timeout(rdzv, (int64_t)(opt.join_timeout * 1000));
        void *v = NULL;
        size_t vl = 0;
        if (tn_store_get(rdzv, closed, &v, &vl) < 0)
            return rdzv_fail("waiting for the other nodes");
        int n = atoi(v);
        free(v);
        if (idx >= n) {
            if (rdzv_wait_next() < 0)
                return -1;
            continue;
        }
        opt.node_rank = (int)idx;
        opt.nnodes = n;
        fprintf(stderr, "trun: rendezvous round %d: node %d of %d\n", rdzv_round,
                opt.node_rank, opt.nnodes);
        return 0;
    }
}

static void rdzv_mark(const char *what)
{
    char k[300];
    rdzv_key(k, sizeof k, what);
    tn_store_add(rdzv, k, 1, NULL);
}

static bool rdzv_failed(void)
{
    char k[300];
    rdzv_key(k, sizeof k, "failed");
    return rdzv_has(k);
}

/* Whether a node waits to join and the round has room for it: the group
 * then starts again with it, which is not a restart (torchrun's
 * num_nodes_waiting). */
static bool rdzv_joining(void)
{
    char k[300];
    rdzv_key(k, sizeof k, "waiting");
    return opt.nnodes < opt.max_nodes && rdzv_has(k);
}

/* Runs one attempt. Returns the index of the first failed worker, -1 when
 * all succeeded, -3 when another node's worker failed and -4 when a node
 * waits to join (elastic); *sig is
 * set when a signal to trun ended the attempt. */
static int run_attempt(int attempt, int world, int *sig)
{
    bool remote = false, joining = false;
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
            } else if (rdzv && !remote && running > 0 &&
                       (rdzv_failed() || (joining = rdzv_joining()))) {
                remote = true;
                signal_all(SIGTERM);
                kill_at = now_ms() + (int64_t)(opt.grace * 1000);
            }
        }
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
    return first < 0 && remote ? (joining ? -4 : -3) : first;
}

/* attempt: the attempt's number in the logs' paths; restarts: those used */
static void summary(int first, int attempt, int restarts)
{
    struct worker *w = &workers[first];
    char when[64];
    struct tm tm;
    localtime_r(&w->ended.tv_sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    fprintf(stderr, "trun: %s failed (attempt %d of %d)\n", opt.argv[0], restarts + 1,
            opt.max_restarts + 1);
    fprintf(stderr, "Root Cause (first observed failure):\n");
    fprintf(stderr, "  time      : %s\n", when);
    fprintf(stderr, "  host      : %s\n", hostname);
    fprintf(stderr, "  rank      : %d (local_rank: %d)\n", w->rank, w->local_rank);
    fprintf(stderr, "  pid       : %d\n", (int)w->pid);
    if (WIFSIGNALED(w->status)) {
        int s = WTERMSIG(w->status);
        fprintf(stderr, "  exitcode  : -%d (%s%s)\n", s, signame(s),
                s == SIGKILL ? ": likely the OOM killer or an external kill" : "");
    } else {
        fprintf(stderr, "  exitcode  : %d\n", WEXITSTATUS(w->status));
    }
    if (opt.log_dir) {
        fprintf(stderr, "  logs      : %s/%s/attempt_%d/%d/\n", opt.log_dir, opt.run_id, attempt,
                w->local_rank);
        /* what PyTorch's @record wrote: {"message": {"message": ...,
         * "extraInfo": {"py_callstack": ...}}} */
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s/attempt_%d/%d/error.json", opt.log_dir, opt.run_id,
                 attempt, w->local_rank);
        json_t *j = json_load_file(path, 0, NULL);
        json_t *m = j ? json_object_get(json_object_get(j, "message"), "message") : NULL;
        if (json_is_string(m))
            fprintf(stderr, "  error     : %s\n", json_string_value(m));
        json_t *cs = j ? json_object_get(
                             json_object_get(json_object_get(j, "message"), "extraInfo"),
                             "py_callstack")
                       : NULL;
        if (json_is_string(cs))
            fprintf(stderr, "  traceback :\n%s\n", json_string_value(cs));
        json_decref(j);
    }
    if (w->ntail) {
        fprintf(stderr, "  last output lines:\n");
        for (int i = 0; i < w->ntail; i++)
            fprintf(stderr, "    %s\n", w->tail[i]);
    }
    int others = 0;
    for (int i = 0; i < opt.nproc; i++)
        if (i != first && failed(workers[i].status) &&
            !(WIFSIGNALED(workers[i].status) &&
              (WTERMSIG(workers[i].status) == SIGTERM || WTERMSIG(workers[i].status) == SIGKILL)))
            others++;
    if (others)
        fprintf(stderr, "  (%d other rank%s failed on their own)\n", others, others > 1 ? "s" : "");
}

int main(int argc, char **argv)
{
    opt.nproc = 1;
    opt.nnodes = 1;
    strcpy(opt.master_addr, "127.0.0.1");
    opt.master_port = 29500;
    strcpy(opt.run_id, "none");
    strcpy(opt.role, "default");
    opt.monitor_interval = 0.1;
    opt.grace = 5;
    opt.join_timeout = 600;
    opt.last_call = 30;
    scheduler_defaults();
    env_defaults();
    int c;
    /* "+": options end at the program, whose own options are its own */
    while ((c = getopt_long(argc, argv, "+r:t:mhV", longopts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c == 'V') {
            printf("trun (tensorkit) %s\n", tn_version());
            return 0;
        }
        if (c == '?')
            die_usage("%s", "unknown option or missing argument");
        apply(c, optarg);
    }
    if (optind >= argc)
        die_usage("%s", "no program to run");
    opt.argv = argv + optind;
    if (!opt.elastic && opt.node_rank >= opt.nnodes) {
        char m[64];
        snprintf(m, sizeof m, "%d", opt.node_rank);
        die_usage("--node-rank %s is not below --nnodes", m);
    }
    if (!strcmp(opt.run_id, "none") && opt.master_port == 0) {
        /* --standalone: a random id, as torchrun's uuid */
        snprintf(opt.run_id, sizeof opt.run_id, "%08lx", (unsigned long)(now_ms() ^ getpid()));
    }
    gethostname(hostname, sizeof hostname);
    int world = opt.nnodes * opt.nproc;

    /* Signals arrive through a signalfd, so the loop handles them in order. */
    sigset_t set;
    sigemptyset(&set);
    int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaddset(&set, sigs[i]);
    sigprocmask(SIG_BLOCK, &set, NULL);
    sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    signal(SIGPIPE, SIG_IGN);

    struct tn_store_server *srv = NULL;
    if (opt.elastic) {
        if (opt.master_port == 0)
            die_usage("%s", "--nnodes MIN:MAX needs the rendezvous port (--rdzv-endpoint HOST:PORT)");
        /* the trun that binds the endpoint on its own host hosts the store */
        bool local = !strncmp(opt.master_addr, "127.", 4) ||
                     !strcmp(opt.master_addr, "localhost") || !strcmp(opt.master_addr, hostname);
        struct tn_store_server_opts so = {.port = opt.master_port, .listen_fd = -1};
        srv = local ? tn_store_server_start(&so) : NULL;
        rdzv = tn_store_tcp_connect(opt.master_addr, opt.master_port,
                                    (int64_t)(opt.join_timeout * 1000));
        if (!rdzv) {
            fprintf(stderr, "trun: cannot reach the rendezvous store: %s\n", tn_last_error());
            tn_store_server_stop(srv);
            return 2;
        }
    } else if (opt.node_rank == 0) {
        struct tn_store_server_opts so = {.port = opt.master_port, .listen_fd = -1};
        srv = tn_store_server_start(&so);
        if (!srv) {
            fprintf(stderr, "trun: cannot host the store: %s\n", tn_last_error());
            return 2;
        }
        opt.master_port = tn_store_server_port(srv);
    } else if (opt.master_port == 0) {
        die_usage("%s", "--master-port 0 needs --node-rank 0 (other nodes must know the port)");
    }
    setenv("MASTER_ADDR", opt.master_addr, 1);
    setenvf("MASTER_PORT", "%d", opt.master_port);

    workers = calloc((size_t)opt.nproc, sizeof *workers);
    start_guardian();
    int status = 0;
    bool ended = false; /* the job ran to its end here: success or out of restarts */
    opt.max_nodes = opt.nnodes;
    /* attempts number the rounds (TORCHELASTIC_RESTART_COUNT, the logs'
     * attempt_N); restarts count those a failure started */
    for (int attempt = 0, restarts = 0;; attempt++) {
        int sig;
        if (rdzv) {
            if (attempt > 0)
                rdzv_round++;
            opt.nnodes = opt.max_nodes;
            if (rendezvous() < 0) {
                status = 1;
                break;
            }
            attempt = rdzv_round; /* a late node starts at a later round */
            world = opt.nnodes * opt.nproc;
        }
        int first = run_attempt(attempt, world, &sig);
        if (sig) {
            fprintf(stderr, "trun: received %s, stopped the workers\n", signame(sig));
            status = 128 + sig;
            break;
        }
        if (first == -2) {
            status = 2;
            break;
        }
        if (first == -4) {
            fprintf(stderr, "trun: a node waits to join; restarting the group with it "
                            "(a membership change, not a restart)\n");
            continue;
        }
        if (first == -3) {
            if (restarts < opt.max_restarts) {
                restarts++;
                fprintf(stderr, "trun: a worker on another node failed; restarting the group "
                                "(%d of %d)\n", restarts, opt.max_restarts);
                continue;
            }
            fprintf(stderr, "trun: a worker on another node failed; stopped this node's\n");
            status = 1;
            ended = true;
            break;
        }
        if (first < 0) {
            status = 0;
            ended = true;
            break;
        }
        if (restarts < opt.max_restarts) {
            struct worker *w = &workers[first];
            restarts++;
            fprintf(stderr, "trun: rank %d failed (%s %d); restarting the group (%d of %d)\n",
                    w->rank, WIFSIGNALED(w->status) ? "signal" : "exit code",
                    WIFSIGNALED(w->status) ? WTERMSIG(w->status) : WEXITSTATUS(w->status),
                    restarts, opt.max_restarts);
            continue;
        }
        summary(first, attempt, restarts);
        status = exit_code(workers[first].status);
        ended = true;
        break;
    }
    if (rdzv) {
        /* the host keeps the store up until every trun that joined is done
         * with it (the others may still be in a later round) */
        char ek[300], nk[300];
        snprintf(ek, sizeof ek, "rdzv/%s/exited", opt.run_id);
        snprintf(nk, sizeof nk, "rdzv/%s/nodes", opt.run_id);
        int64_t exited = 0, nodes = 0;
        if (ended) { /* no later round: a node waiting to join gives up */
            char dk[300];
            snprintf(dk, sizeof dk, "rdzv/%s/done", opt.run_id);
            tn_store_set(rdzv, dk, "1", 1);
        }
        tn_store_add(rdzv, ek, 1, &exited);
        for (int64_t until = now_ms() + (int64_t)(opt.join_timeout * 1000);
             srv && now_ms() < until;) {
            if (tn_store_add(rdzv, ek, 0, &exited) < 0 || tn_store_add(rdzv, nk, 0, &nodes) < 0 ||
                exited >= nodes)
                break;
            struct timespec ts = {0, 50 * 1000000L};
            nanosleep(&ts, NULL);
        }
        tn_store_release(rdzv);
    }
    tn_store_server_stop(srv);
    if (guard_fd >= 0)
        close(guard_fd);
    return status;
}
