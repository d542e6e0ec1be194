/*
 * trun: the distributed launcher (torchrun's counterpart). It hosts the
 * TCPStore, starts N workers with torchrun's environment, prefixes their
 * output with the rank, and on a failure stops the group (SIGTERM, then
 * SIGKILL after a grace period), restarts it while restarts are left, or
 * prints the first failure and exits with that worker's status. With
 * --nnodes MIN:MAX, or --rdzv-backend c10d on several nodes, the nodes'
 * truns meet in a rendezvous over the store (see rendezvous()), which gives
 * their node ranks, and restart together.
 *
 * No worker outlives trun: each worker leads its own process group and has
 * PR_SET_PDEATHSIG; a small guardian process, which trun cannot take down
 * with it, SIGKILLs every worker's group as soon as trun's end of a pipe
 * closes, even when trun itself is SIGKILLed.
 */
#include "trun.h"

/* The store's log lines (out of descriptors, and back), on stderr. */
static void store_log(void *arg, const char *line)
{
    (void)arg;
    fprintf(stderr, "trun: %s\n", line);
}

/* Starts the store of a static job at --master-addr:--master-port (0: a
 * free port), on loopback only when the job is this one node and its
 * address is a loopback one (the default); NULL when it cannot (said why). */
static struct tn_store_server *host_store(void)
{
    bool loopback = opt.nnodes == 1 && (!strncmp(opt.master_addr, "127.", 4) ||
                                        !strcmp(opt.master_addr, "localhost"));
    struct tn_store_server_opts so = {
        .host = loopback ? opt.master_addr : NULL, .port = opt.master_port, .listen_fd = -1,
        .log = store_log};
    struct tn_store_server *srv = tn_store_server_start(&so);
    if (!srv)
        fprintf(stderr, "trun: cannot host the store: %s\n", tn_last_error());
    return srv;
}

/* Whether this many workers fit the process's limits: trun holds two pipes,
 * about two store connections (and with --log-dir two files) per worker. Raises the soft limit of open
 * files to the hard one when it must; -1 (said why) when they do not fit,
 * before any worker starts. */
static int check_limits(void)
{
    struct rlimit rl;
    rlim_t files = 16 + (rlim_t)opt.nproc * (opt.log_dir ? 6 : 4);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < files) {
        if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= files) {
            rl.rlim_cur = files;
            setrlimit(RLIMIT_NOFILE, &rl);
        }
        getrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < files) {
            fprintf(stderr, "trun: --nproc-per-node %d: %d worker%s need%s %llu open files; the "
                            "limit is %llu (ulimit -n)\n", opt.nproc, opt.nproc,
                    opt.nproc == 1 ? "" : "s", opt.nproc == 1 ? "s" : "",
                    (unsigned long long)files, (unsigned long long)rl.rlim_cur);
            return -1;
        }
    }
    if (getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (rlim_t)opt.nproc + 2) {
        fprintf(stderr, "trun: --nproc-per-node %d: more workers than the limit of %llu "
                        "processes (ulimit -u)\n", opt.nproc, (unsigned long long)rl.rlim_cur);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    if (check_limits() < 0 || (opt.log_dir && make_run_log_dir() < 0))
        return 2;
    gethostname(hostname, sizeof hostname);
    int world = opt.nnodes * opt.nproc;
    const char *token = getenv("TN_STORE_TOKEN");
    if (token && *token && !opt.no_python)
        fprintf(stderr, "trun: TN_STORE_TOKEN is set, but PyTorch's TCPStore clients cannot send "
                        "a token: the store will refuse PyTorch workers (they report \"did the "
                        "remote server shutdown or crash?\"); unset it for PyTorch workers\n");

    /* Signals arrive through a signalfd, so the loop handles them in order. */
    sigset_t set;
    sigemptyset(&set);
    int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaddset(&set, sigs[i]);
    sigprocmask(SIG_BLOCK, &set, NULL);
    sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    signal(SIGPIPE, SIG_IGN);

    /* before the store: a guardian that had not yet closed its copy of the
     * listening socket would keep the port from the next attempt's store */
    start_guardian();
    struct tn_store_server *srv = NULL, *wsrv = NULL; /* wsrv: the round's workers' store */
    if (opt.dynamic) {
        if (opt.master_port == 0)
            die_usage("%s", opt.elastic ? "--nnodes MIN:MAX needs the rendezvous port (--rdzv-endpoint HOST:PORT)"
                                        : "--rdzv-backend c10d needs the rendezvous port (--rdzv-endpoint HOST:PORT)");
        /* the trun that binds the endpoint on its own host hosts the store */
        bool local = endpoint_is_local(opt.master_addr);
        struct tn_store_server_opts so = {.port = opt.master_port, .listen_fd = -1, .log = store_log};
        srv = local ? tn_store_server_start(&so) : NULL;
        rdzv = tn_store_tcp_connect(opt.master_addr, opt.master_port,
                                    (int64_t)(opt.join_timeout * 1000));
        if (!rdzv) {
            fprintf(stderr, "trun: cannot reach the rendezvous store: %s\n", tn_last_error());
            tn_store_server_stop(srv);
            return 2;
        }
        torchrun_watch(srv != NULL);
        if (srv)
            rdzv_announce_host();
    } else if (opt.node_rank == 0) {
        if (!(srv = host_store()))
            return 2;
        opt.master_port = tn_store_server_port(srv);
    } else if (opt.master_port == 0) {
        die_usage("%s", "--master-port 0 needs --node-rank 0 (other nodes must know the port)");
    }
    setenv("MASTER_ADDR", opt.master_addr, 1);
    setenvf("MASTER_PORT", "%d", opt.master_port);

    workers = calloc((size_t)opt.nproc, sizeof *workers);
    int status = 0;
    bool ended = false; /* the job ran to its end here: success or out of restarts */
    bool quit = false;  /* a signal stopped this node in mid-round */
    opt.max_nodes = opt.nnodes;
    /* attempts number the rounds (TORCHELASTIC_RESTART_COUNT, the logs'
     * attempt_N); restarts count those a failure started */
    for (int attempt = 0, restarts = 0;; attempt++) {
        int sig;
        if (attempt > 0 && srv && !rdzv && opt.nnodes == 1) {
            /* a new store per attempt: PyTorch 2.x workers use the agent's
             * store without 1.13's /worker/attempt_K prefix, so attempt 0's
             * keys (gloo's addresses among them) would answer attempt 1 */
            tn_store_server_stop(srv);
            if (!(srv = host_store())) {
                status = 2;
                break;
            }
        }
        if (rdzv) {
            if (attempt > 0) { /* the round's nodes all left it or were lost */
                if (rdzv_settle() < 0) {
                    status = 1;
                    break;
                }
                rdzv_round++;
            }
            opt.nnodes = opt.max_nodes;
            if (rendezvous() < 0) {
                status = 1;
                break;
            }
            attempt = rdzv_round; /* a late node starts at a later round */
            world = opt.nnodes * opt.nproc;
            if (rdzv_workers_store(&wsrv, srv != NULL) < 0) {
                status = 1;
                break;
            }
        }
        int first = run_attempt(attempt, world, &sig);
        if (first == -6) { /* the store is gone: nothing to leave or wait for */
            status = 1;
            tn_store_release(rdzv);
            rdzv = NULL;
            break;
        }
        if (rdzv && sig) {
            rdzv_quit();
            quit = true;
        } else if (rdzv) {
            rdzv_leave(first == -1);
        }
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
        if (first == -5) {
            char names[1024];
            rdzv_lost_names(names, sizeof names);
            if (rdzv_settle() < 0) { /* fewer than MIN nodes left */
                status = 1;
                ended = true;
                break;
            }
            if (restarts < opt.max_restarts) {
                restarts++;
                fprintf(stderr, "trun: lost %s; restarting the group with the nodes left "
                                "(%d of %d)\n", names, restarts, opt.max_restarts);
                continue;
            }
            fprintf(stderr, "trun: lost %s; no restarts left, stopped this node's workers\n",
                    names);
            status = 1;
            ended = true;
            break;
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
        if (!quit) /* a node that quit counts as lost */
            tn_store_add(rdzv, ek, 1, &exited);
        for (int64_t until = now_ms() + (int64_t)(opt.join_timeout * 1000);
             srv && now_ms() < until;) {
            /* lost nodes never come to say so */
            if (tn_store_add(rdzv, ek, 0, &exited) < 0 || tn_store_add(rdzv, nk, 0, &nodes) < 0 ||
                exited + rdzv_lost_total() >= nodes)
                break;
            rdzv_reap_lost();
            struct timespec ts = {0, 50 * 1000000L};
            nanosleep(&ts, NULL);
        }
        tn_store_release(rdzv);
    }
    tn_store_server_stop(wsrv);
    tn_store_server_stop(srv);
    if (guard_fd >= 0)
        close(guard_fd);
    if (tn_stdout_flush() != TN_OK || stdout_errno) { /* console lines were lost */
        if (stdout_errno)
            fprintf(stderr, "trun: <stdout>: cannot write: %s\n", strerror(stdout_errno));
        else
            fprintf(stderr, "trun: %s\n", tn_last_error());
        if (status == 0)
            status = 2;
    }
    return status;
}

