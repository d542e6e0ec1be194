/*
 * bin/trun/trun.h: what the parts of trun share: the options, the workers
 * and their output streams, and the helpers of each part.
 *
 *   options.c     the command line, PET_ variables and the schedulers' ones
 *   output.c      the workers' output: the console prefix, the logs, the summary
 *   workers.c     starting, watching and stopping one attempt's workers
 *   rendezvous.c  the dynamic rendezvous (--nnodes MIN:MAX, c10d)
 *   mixed.c       a torchrun node in a trun c10d job: refused on both sides
 *   main.c        the store and the attempts
 */
#ifndef TRUN_H
#define TRUN_H

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
#include <sys/resource.h>
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

struct trun_opts {
    int nproc, nnodes, node_rank;
    char master_addr[256];
    int master_port;
    char run_id[128];
    char role[64];
    int max_restarts;
    double monitor_interval;
    const char *log_dir;
    const char *run_log_dir; /* this run's DIR/ID_XXXXXXXX */
    int redirects, tee; /* bit 1: stdout, bit 2: stderr */
    const char *ranks_filter;
    bool module, no_python, no_prefix;
    double grace;
    char **argv;
    /* --nnodes MIN:MAX with MIN < MAX: membership by rendezvous */
    int min_nodes, max_nodes;
    bool elastic;
    bool c10d;    /* --rdzv-backend c10d */
    bool dynamic; /* node ranks from the rendezvous: elastic, or c10d with N > 1 nodes */
    double join_timeout, last_call; /* seconds (--rdzv-conf) */
    double keep_alive; /* seconds between a node's heartbeats (--rdzv-conf keep_alive_interval) */
    int keep_alive_max; /* heartbeats missed before a node is lost (keep_alive_max_attempt) */
};

extern struct trun_opts opt;
extern struct worker *workers;
extern int guard_fd;
extern int sfd;
extern char hostname[256];
extern struct tn_store *rdzv;
extern int rdzv_round;

/* options.c */
void usage(FILE *f);
_Noreturn void die_usage(const char *fmt, const char *arg);
int parse_count(const char *s, const char *what, int min);
void apply(int c, const char *arg);
void scheduler_defaults(void);
void env_defaults(void);
bool shown_on_console(int local_rank);
void parse_args(int argc, char **argv);

/* output.c */
extern int stdout_errno; /* the first failed write of a console line to stdout */
int mkdirs(char *path);
int make_run_log_dir(void);
bool pump(struct worker *w, struct stream *s);
void setup_stream(struct stream *s, int fd, int bit, FILE *console, int attempt, int local_rank,
                  const char *name);
void summary(int first, int attempt, int restarts);

/* workers.c */
void setenvf(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
pid_t start_worker(struct worker *w, int attempt, int world);
void start_guardian(void);
const char *signame(int sig);
int exit_code(int status);
bool failed(int status);
void reap(int *running);
void signal_all(int sig);
int64_t now_ms(void);
int run_attempt(int attempt, int world, int *sig);

/* rendezvous.c */
int rendezvous(void);
bool endpoint_is_local(const char *host);
void rdzv_mark(const char *what);
bool rdzv_joining(void);
int rdzv_workers_store(struct tn_store_server **own, bool host);
void rdzv_announce_host(void);
int rdzv_watch(void);
void rdzv_beat(void);
void rdzv_quit(void);
void rdzv_reap_lost(void);
void rdzv_leave(bool finished);
int rdzv_settle(void);
void rdzv_lost_names(char *buf, size_t n);
int64_t rdzv_lost_total(void);

/* mixed.c */
void torchrun_watch(bool host);

#endif
