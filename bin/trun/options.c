/* bin/trun/options.c: trun's command line, and the defaults PET_ variables
 * and the schedulers (Slurm, Open MPI) give. */
#include "trun.h"
#include "../cli.h"

struct trun_opts opt;

void usage(FILE *f)
{
    fprintf(f,
            "Usage: trun [OPTIONS] SCRIPT.py [ARGS...]\n"
            "       trun [OPTIONS] -m MODULE [ARGS...]\n"
            "       trun [OPTIONS] --no-python PROGRAM [ARGS...]\n"
            "Start N workers of a Python script (as torchrun does; $PYTHON_EXEC or python3)\n"
            "or of any program, with torchrun's environment; host their store, prefix their\n"
            "output with the rank, and stop, restart or report them on failure.\n"
            "\n"
            "  --nproc-per-node N|gpu|cpu|auto  workers on this node (default 1; gpu: the\n"
            "                            GPUs, cpu: the CPUs, auto: the GPUs or else the CPUs)\n"
            "  --nnodes N|MIN:MAX        nodes in the job (default 1)\n"
            "  --node-rank R             this node's rank (default 0)\n"
            "  --master-addr HOST        the store's host (default 127.0.0.1)\n"
            "  --master-port PORT        the store's port (default: a free port on one node,\n"
            "                            29500 on several; 0: a free port)\n"
            "  --rdzv-endpoint HOST[:PORT]  the same as --master-addr/--master-port\n"
            "  --rdzv-id ID              the job id (TORCHELASTIC_RUN_ID)\n"
            "  --rdzv-backend NAME       static (node ranks given) or c10d (the nodes meet\n"
            "                            at the endpoint, which assigns their ranks)\n"
            "  --rdzv-conf K=V,...       join_timeout, last_call_timeout, keep_alive_interval\n"
            "                            (seconds), keep_alive_max_attempt of rendezvous\n"
            "                            jobs (--nnodes MIN:MAX, c10d)\n"
            "  --standalone              one node, a free port, a random id\n"
            "  --max-restarts N          restarts of the worker group (default 0)\n"
            "  --monitor-interval SECS   how often to check the workers (default 0.1)\n"
            "  --log-dir DIR             per-rank logs under a new DIR/ID_XXXXXXXX/ per run\n"
            "  -r, --redirects 0|1|2|3   send stdout (1), stderr (2), both (3) to the logs only\n"
            "  -t, --tee 0|1|2|3         write stdout/stderr to the logs and the console\n"
            "  --local-ranks-filter LIST  show only these local ranks on the console\n"
            "  --no-prefix               no \"[RANK]:\" before the workers' console lines\n"
            "  --role NAME               the workers' role (default \"default\")\n"
            "  --no-python               run PROGRAM itself, not with Python\n"
            "  -m, --module              run the Python module MODULE (python3 -m MODULE)\n"
            "  --run-path                accepted: SCRIPT runs with Python (the default)\n"
            "  --start-method M          accepted (spawn, fork, forkserver): trun execs its\n"
            "                            workers, so it means nothing here\n"
            "  --grace SECS              SIGTERM to SIGKILL delay when stopping (default 5)\n"
            "  -h, --help                print this help and exit\n"
            "  -V, --version             print the version and exit\n"
            "\n"
            "Options also come from PET_<OPTION> variables, as torchrun's do.\n");
}

_Noreturn void die_usage(const char *fmt, const char *arg)
{
    cli_usage_error("trun", "trun", fmt, arg);
}

int parse_count(const char *s, const char *what, int min)
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

/* The GPUs a CUDA program would see (torch.cuda.device_count() for
 * torchrun): NVIDIA's devices, no more than CUDA_VISIBLE_DEVICES lists (up
 * to its first entry that names none, as CUDA reads it). */
static int count_gpus(void)
{
    int n = 0;
    char path[64];
    for (int i = 0; i < 1024; i++) {
        snprintf(path, sizeof path, "/dev/nvidia%d", i);
        if (access(path, F_OK) < 0)
            break;
        n++;
    }
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (v) {
        int listed = 0;
        for (const char *p = v; *p;) {
            char *end;
            long d = strtol(p, &end, 10);
            bool uuid = !strncmp(p, "GPU-", 4) || !strncmp(p, "MIG-", 4);
            if (!uuid && (end == p || d < 0 || d >= n))
                break;
            listed++;
            p += strcspn(p, ",");
            if (*p == ',')
                p++;
        }
        if (listed < n)
            n = listed;
    }
    return n;
}

static void parse_nproc(const char *s)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1)
        cpus = 1;
    if (!strcmp(s, "cpu")) {
        opt.nproc = (int)cpus;
    } else if (!strcmp(s, "gpu") || !strcmp(s, "auto")) {
        int g = count_gpus();
        if (!g && !strcmp(s, "gpu"))
            die_usage("--nproc-per-node %s: no GPU found (/dev/nvidia0)", s);
        opt.nproc = g ? g : (int)cpus;
    } else {
        opt.nproc = parse_count(s, "--nproc-per-node: '%s' is not a count, gpu, cpu or auto", 1);
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

/* --rdzv-conf k=v,k=v: join_timeout, last_call_timeout and
 * keep_alive_interval (seconds), keep_alive_max_attempt (a count);
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
        else if (!strcmp(kv, "keep_alive_interval"))
            opt.keep_alive = parse_secs(eq + 1, "--rdzv-conf: bad keep_alive_interval '%s'");
        else if (!strcmp(kv, "keep_alive_max_attempt"))
            opt.keep_alive_max = parse_count(eq + 1, "--rdzv-conf: bad keep_alive_max_attempt '%s'", 1);
    }
}

enum {
    O_NPROC = 256, O_NNODES, O_NODE_RANK, O_MADDR, O_MPORT, O_ENDPOINT, O_RDZV_ID,
    O_RDZV_BACKEND, O_STANDALONE, O_RESTARTS, O_MONITOR, O_LOGDIR, O_FILTER, O_ROLE,
    O_RUNPATH, O_NOPY, O_GRACE, O_RDZV_CONF, O_START_METHOD, O_NO_PREFIX
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
    {"start-method", required_argument, NULL, O_START_METHOD},
    {"start_method", required_argument, NULL, O_START_METHOD},
    {"no-prefix", no_argument, NULL, O_NO_PREFIX},
    {"no_prefix", no_argument, NULL, O_NO_PREFIX},
    {"rdzv-conf", required_argument, NULL, O_RDZV_CONF},
    {"rdzv_conf", required_argument, NULL, O_RDZV_CONF},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* --master-addr, --rdzv-endpoint or --standalone (or their PET_ variables)
 * named the store's host: a scheduler's endpoint is not used */
static bool addr_given;
/* --node-rank or PET_NODE_RANK: no check of the scheduler's tasks a node */
static bool rank_given;

void apply(int c, const char *arg)
{
    if (c == O_MADDR || c == O_ENDPOINT || c == O_STANDALONE)
        addr_given = true;
    if (c == O_NODE_RANK || c == O_STANDALONE)
        rank_given = true;
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
        opt.c10d = !strcmp(arg, "c10d");
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
    case O_RUNPATH: opt.no_python = false; break;
    case 'm': opt.module = true; break;
    case O_NOPY: opt.no_python = true; break;
    case O_NO_PREFIX: opt.no_prefix = true; break;
    case O_START_METHOD:
        if (strcmp(arg, "spawn") && strcmp(arg, "fork") && strcmp(arg, "forkserver"))
            die_usage("--start-method: '%s' is not spawn, fork or forkserver", arg);
        break;
    case O_GRACE: opt.grace = parse_secs(arg, "--grace: bad seconds '%s'"); break;
    case O_RDZV_CONF: parse_rdzv_conf(arg); break;
    default: break;
    }
}

/* The first host of a Slurm hostlist, into out: "node[01-04,07],gpu5" ->
 * "node01", "rack[2-3]n[1-8]-ib" -> "rack2n1-ib" (each bracket gives the
 * start of its first range; commas inside brackets do not end the host).
 * false when the list names no host or it does not fit. */
static bool first_host(const char *list, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = list; *p && *p != ','; p++) {
        if (*p == '[') {
            const char *q = p + 1;
            size_t n = strspn(q, "0123456789");
            if (!n || !strchr(q, ']'))
                return false;
            if (o + n >= cap)
                return false;
            memcpy(out + o, q, n);
            o += n;
            p = strchr(q, ']');
            continue;
        }
        if (o + 1 >= cap)
            return false;
        out[o++] = *p;
    }
    out[o] = 0;
    return o > 0;
}

/* The launching host's address in Open MPI's OMPI_MCA_orte_hnp_uri
 * ("JOBID.0;tcp://10.0.0.1,10.1.0.1:PORT;tcp6://[::1]:PORT": the first
 * tcp:// address, else the first tcp6:// one), into out; false when none. */
static bool hnp_addr(const char *uri, char *out, size_t cap)
{
    const char *p = strstr(uri, "tcp://");
    size_t skip = 6;
    if (!p) {
        p = strstr(uri, "tcp6://[");
        skip = 8;
    }
    if (!p)
        return false;
    p += skip;
    size_t n = strcspn(p, skip == 6 ? ",:;" : "]");
    if (!n || n >= cap)
        return false;
    memcpy(out, p, n);
    out[n] = 0;
    return true;
}

/* Which scheduler gave the endpoint (for parse_args' checks), or NULL:
 * "Slurm's ..." or "Open MPI's ...". */
static const char *sched_endpoint;
/* Open MPI's job spans several nodes but named no endpoint (no hnp_uri). */
static bool ompi_no_endpoint;
/* more than one trun a node: why, refused unless --node-rank is given */
static char crowded[200];

/* The count in variable name (at least 1), or dflt when it is not set. */
static int env_count(const char *name, int dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char what[96];
    snprintf(what, sizeof what, "%s: '%%s' is not a count", name);
    return parse_count(v, what, 1);
}

/* Under Slurm's srun or Open MPI's mpirun (one trun per node), the node's
 * rank, the node count and the endpoint (node rank 0's host: Slurm's first
 * node of the step, Open MPI's launching host) come from their variables;
 * PET_ variables and options override (check_sched_endpoint then says
 * what does not fit). */
void scheduler_defaults(void)
{
    const char *v;
    if ((v = getenv("SLURM_NODEID")) && *v) {
        int nodes = env_count("SLURM_STEP_NUM_NODES", env_count("SLURM_NNODES", 1));
        int tasks = env_count("SLURM_STEP_NUM_TASKS", env_count("SLURM_NTASKS", nodes));
        if (tasks > nodes)
            snprintf(crowded, sizeof crowded,
                     "under Slurm, %d tasks on %d nodes: trun starts one node's workers, so run "
                     "one trun per node (srun --ntasks-per-node=1)", tasks, nodes);
        opt.nnodes = nodes;
        opt.node_rank = parse_count(v, "SLURM_NODEID: '%s' is not a rank", 0);
        static const char *lists[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                                      "SLURM_NODELIST"};
        for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
            const char *list = getenv(lists[i]);
            if (!list || !*list)
                continue;
            if (!first_host(list, opt.master_addr, sizeof opt.master_addr)) {
                char what[64];
                snprintf(what, sizeof what, "%s: '%%s' names no first host", lists[i]);
                die_usage(what, list);
            }
            sched_endpoint = "Slurm's first node";
            break;
        }
    } else if ((v = getenv("OMPI_COMM_WORLD_RANK")) && *v) {
        int local = env_count("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
        if (local > 1)
            snprintf(crowded, sizeof crowded,
                     "under Open MPI, %d truns run on this node (OMPI_COMM_WORLD_LOCAL_SIZE): "
                     "trun starts one node's workers, so run one per node (mpirun -npernode 1)",
                     local);
        opt.nnodes = env_count("OMPI_COMM_WORLD_SIZE", 1);
        opt.node_rank = parse_count(v, "OMPI_COMM_WORLD_RANK: '%s' is not a rank", 0);
        const char *uri = getenv("OMPI_MCA_orte_hnp_uri");
        if (uri && hnp_addr(uri, opt.master_addr, sizeof opt.master_addr))
            sched_endpoint = "Open MPI's launching host";
        else
            ompi_no_endpoint = true;
    }
}

/* More than one trun a node is refused (their workers would share local
 * ranks and GPUs) unless the node rank is given. A scheduler's endpoint is
 * node rank 0's host: with a static rendezvous,
 * node 0 hosts the store there, so a node 0 elsewhere (mpirun started away
 * from the first node) is refused at once, not after the other nodes' timeout;
 * an Open MPI job over several nodes with no launching host's address needs
 * --master-addr. */
static void check_sched_endpoint(void)
{
    if (crowded[0] && !rank_given)
        die_usage("%s", crowded);
    if (addr_given || opt.nnodes < 2)
        return;
    if (ompi_no_endpoint && !opt.dynamic)
        die_usage("%s", "under Open MPI with several nodes, give --master-addr (node rank 0's "
                        "host): OMPI_MCA_orte_hnp_uri names no launching host");
    if (!sched_endpoint || opt.dynamic || opt.node_rank != 0)
        return;
    /* Slurm names this node in SLURMD_NODENAME (its node names need not be
     * host names); Open MPI's endpoint is an address of an interface */
    const char *slurmd = getenv("SLURMD_NODENAME");
    char here[256] = "";
    bool ok;
    if (sched_endpoint[0] == 'S') {
        ok = !slurmd || !*slurmd || !strcmp(slurmd, opt.master_addr);
        snprintf(here, sizeof here, "%s", slurmd ? slurmd : "");
    } else {
        gethostname(hostname, sizeof hostname);
        ok = endpoint_is_local(opt.master_addr);
        snprintf(here, sizeof here, "%s", hostname);
    }
    if (!ok) {
        char m[640];
        snprintf(m, sizeof m, "%s is %s, but node rank 0 runs on %s", opt.master_addr,
                 sched_endpoint, here);
        die_usage("the endpoint %s: give --master-addr (node rank 0's host)", m);
    }
}

/* torchrun reads every option from PET_<NAME> when it is not given. */
void env_defaults(void)
{
    static const struct { const char *env; int code; } pet[] = {
        {"PET_NPROC_PER_NODE", O_NPROC}, {"PET_NNODES", O_NNODES},
        {"PET_NODE_RANK", O_NODE_RANK}, {"PET_MASTER_ADDR", O_MADDR},
        {"PET_MASTER_PORT", O_MPORT}, {"PET_RDZV_ENDPOINT", O_ENDPOINT},
        {"PET_RDZV_ID", O_RDZV_ID}, {"PET_RDZV_BACKEND", O_RDZV_BACKEND},
        {"PET_RDZV_CONF", O_RDZV_CONF}, {"PET_MAX_RESTARTS", O_RESTARTS},
        {"PET_MONITOR_INTERVAL", O_MONITOR}, {"PET_LOG_DIR", O_LOGDIR},
        {"PET_REDIRECTS", 'r'}, {"PET_TEE", 't'}, {"PET_LOCAL_RANKS_FILTER", O_FILTER},
        {"PET_ROLE", O_ROLE}, {"PET_START_METHOD", O_START_METHOD},
    };
    for (size_t i = 0; i < sizeof pet / sizeof pet[0]; i++) {
        const char *v = getenv(pet[i].env);
        if (v && *v)
            apply(pet[i].code, v);
    }
    /* torchrun's flags: PET_<FLAG>=1 */
    static const struct { const char *env; int code; } flags[] = {
        {"PET_STANDALONE", O_STANDALONE}, {"PET_NO_PYTHON", O_NOPY}, {"PET_MODULE", 'm'},
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        const char *s = getenv(flags[i].env);
        if (s && !strcmp(s, "1"))
            apply(flags[i].code, NULL);
    }
}

bool shown_on_console(int local_rank)
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


/* Exits 0 after --help or --version, or 2 when stdout took no write. */
static _Noreturn void exit_flushed(void)
{
    if (tn_stdout_flush() != TN_OK) {
        fprintf(stderr, "trun: %s\n", tn_last_error());
        exit(2);
    }
    exit(0);
}

/* Sets opt from the schedulers' variables, PET_ variables and the command
 * line; exits on --help, --version and usage errors. */
void parse_args(int argc, char **argv)
{
    opt.nproc = 1;
    opt.nnodes = 1;
    strcpy(opt.master_addr, "127.0.0.1");
    opt.master_port = -1; /* not given */
    strcpy(opt.run_id, "none");
    strcpy(opt.role, "default");
    opt.monitor_interval = 0.1;
    opt.grace = 5;
    opt.join_timeout = 600;
    opt.last_call = 30;
    opt.keep_alive = 1;
    opt.keep_alive_max = 3;
    scheduler_defaults();
    env_defaults();
    int c;
    /* "+": options end at the program, whose own options are its own */
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:r:t:mhV", longopts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            exit_flushed();
        }
        if (c == 'V') {
            printf("trun (tensorkit) %s\n", tn_version());
            exit_flushed();
        }
        if (c == '?' || c == ':') {
            /* getopt's own messages are off (opterr): one line, ours */
            char name[64];
            const char *a = argv[optind - 1];
            if (!strncmp(a, "--", 2))
                snprintf(name, sizeof name, "%.*s", (int)strcspn(a, "="), a);
            else
                snprintf(name, sizeof name, "-%c", optopt);
            die_usage(c == ':' ? "option '%s' needs a value" : "unknown option '%s'", name);
        }
        apply(c, optarg);
    }
    if (optind >= argc)
        die_usage("%s", "no program to run");
    opt.argv = argv + optind;
    if (opt.no_python && opt.module)
        die_usage("%s", "--no-python and --module do not go together");
    /* torchrun's c10d backend: the rendezvous gives the node ranks (of a
     * fixed N here: MIN = MAX), and --node-rank means nothing */
    opt.dynamic = opt.elastic || (opt.c10d && opt.nnodes > 1);
    if (opt.dynamic && !opt.elastic)
        opt.min_nodes = opt.nnodes;
    check_sched_endpoint();
    if (!opt.dynamic && opt.node_rank >= opt.nnodes) {
        char m[64];
        snprintf(m, sizeof m, "%d", opt.node_rank);
        die_usage("--node-rank %s is not below --nnodes", m);
    }
    if (opt.master_port < 0) /* torchrun 2.x: one node picks a free port; c10d's default 29400 */
        opt.master_port = !opt.dynamic ? (opt.nnodes == 1 ? 0 : 29500) : opt.c10d ? 29400 : 29500;
    if (!strcmp(opt.run_id, "none") && opt.master_port == 0) {
        /* --standalone: a random id, as torchrun's uuid */
        snprintf(opt.run_id, sizeof opt.run_id, "%08lx", (unsigned long)(now_ms() ^ getpid()));
    }
}
