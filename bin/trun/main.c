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
#include "trun.h"

int main(int argc, char **argv)
{
    parse_args(argc, argv);
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

