/*
 * bench_dist: lib/dist's figures with 2 ranks on this machine. The program
 * forks its ranks itself (a TCPStore server in the parent, one client per
 * rank), so it needs neither trun nor PyTorch:
 *
 *   bench_dist allreduce BYTES ITERS   microseconds per float32 allreduce
 *   bench_dist mpi BYTES ITERS         the same through the mpi process group,
 *                                      run as each rank under mpirun -np 2
 *   bench_dist store OPS               set, get, add operations per second
 *                                      (one client, sequential)
 *   bench_dist                         both, with the bus bandwidth of the
 *                                      64 MiB allreduce as a fraction of a
 *                                      memcpy of the same bytes timed in
 *                                      the same run
 *
 * The argument forms print bare numbers for the scripts in bench/dist, which time
 * PyTorch's Gloo and TCPStore the same way and print the ratios.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tensor/tensor.h>

#include "../bench.h"

#define RANKS 2

static int die(const char *what)
{
    fprintf(stderr, "bench_dist: %s: %s\n", what, tn_last_error());
    return 1;
}

/* Microseconds per float32 allreduce of `bytes` through pg (after a warm
 * up and a barrier), or -1 with the error set. */
static double time_allreduce(struct tn_pg *pg, size_t bytes, int iters)
{
    struct tn_tensor *t = tn_full(TN_SHAPE((int64_t)(bytes / 4)), tn_float(1.0), TN_FLOAT32);
    if (!t)
        return -1;
    double us = -1;
    for (int i = 0; i < iters / 10 + 1; i++)
        if (tn_pg_allreduce(pg, t, TN_REDUCE_SUM) < 0)
            goto out;
    if (tn_pg_barrier(pg) < 0)
        goto out;
    double t0 = tn_bench_now();
    for (int i = 0; i < iters; i++)
        if (tn_pg_allreduce(pg, t, TN_REDUCE_SUM) < 0)
            goto out;
    us = (tn_bench_now() - t0) / iters * 1e6;
out:
    tn_release(t);
    return us;
}

/* One rank of the allreduce benchmark; rank 0 writes the mean time per call
 * in microseconds to out. */
static int allreduce_rank(int rank, int port, size_t bytes, int iters, FILE *out)
{
    struct tn_store *st = tn_store_tcp_connect("127.0.0.1", port, 60000);
    if (!st)
        return die("connect");
    struct tn_pg *pg = tn_pg_new_tcp(st, rank, RANKS, "127.0.0.1", 60000);
    if (!pg)
        return die("process group");
    double us = time_allreduce(pg, bytes, iters);
    if (us < 0)
        return die("allreduce");
    if (rank == 0)
        fprintf(out, "%.3f\n", us);
    tn_pg_free(pg);
    tn_store_release(st);
    return 0;
}

/* set, get and add per second through one client of our server. */
static int store_ops(int port, int ops, double rate[3])
{
    struct tn_store *st = tn_store_tcp_connect("127.0.0.1", port, 60000);
    if (!st)
        return die("connect");
    char key[32];
    double t0 = tn_bench_now();
    for (int i = 0; i < ops; i++) {
        snprintf(key, sizeof key, "k%d", i % 1000);
        if (tn_store_set(st, key, "value", 5) < 0)
            return die("set");
    }
    rate[0] = ops / (tn_bench_now() - t0);
    t0 = tn_bench_now();
    for (int i = 0; i < ops; i++) {
        void *v;
        size_t vl;
        snprintf(key, sizeof key, "k%d", i % 1000);
        if (tn_store_get(st, key, &v, &vl) < 0)
            return die("get");
        free(v);
    }
    rate[1] = ops / (tn_bench_now() - t0);
    t0 = tn_bench_now();
    for (int i = 0; i < ops; i++)
        if (tn_store_add(st, "counter", 1, NULL) < 0)
            return die("add");
    rate[2] = ops / (tn_bench_now() - t0);
    tn_store_release(st);
    return 0;
}

/* A listening socket on 127.0.0.1 with a free port, made before fork so the
 * children know the port before the server thread exists. */
static int listen_free(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
        perror("bench_dist: listen");
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

/* Forks RANKS ranks running allreduce_rank; returns rank 0's microseconds
 * per call, or a negative number. */
static double allreduce(size_t bytes, int iters)
{
    int port, lfd = listen_free(&port);
    if (lfd < 0)
        return -1;
    int pfd[2];
    if (pipe(pfd) < 0)
        return -1;
    fflush(NULL);
    pid_t kids[RANKS];
    for (int r = 0; r < RANKS; r++) {
        kids[r] = fork();
        if (kids[r] == 0) {
            close(lfd);
            close(pfd[0]);
            FILE *out = fdopen(pfd[1], "w");
            int rc = allreduce_rank(r, port, bytes, iters, out);
            fclose(out);
            _exit(rc);
        }
    }
    close(pfd[1]);
    struct tn_store_server_opts o = {.listen_fd = lfd};
    struct tn_store_server *srv = tn_store_server_start(&o);
    double us = -1;
    FILE *in = fdopen(pfd[0], "r");
    if (!srv || !in || fscanf(in, "%lf", &us) != 1)
        us = -1;
    if (in)
        fclose(in);
    for (int r = 0; r < RANKS; r++) {
        int st;
        if (kids[r] > 0 && (waitpid(kids[r], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)))
            us = -1;
    }
    tn_store_server_stop(srv);
    return us;
}

/* One rank of the mpi benchmark under mpirun: rank 0 prints microseconds
 * per float32 allreduce. */
static int mpi_bench(size_t bytes, int iters)
{
    struct tn_pg *pg = tn_pg_new_mpi(NULL, -1, -1, 60000);
    if (!pg)
        return die("mpi process group");
    double us = time_allreduce(pg, bytes, iters);
    if (us < 0)
        return die("allreduce");
    if (tn_pg_rank(pg) == 0)
        printf("%.3f\n", us);
    tn_pg_free(pg);
    return 0;
}

static int store(int ops, double rate[3])
{
    struct tn_store_server_opts o = {.host = "127.0.0.1", .listen_fd = -1};
    struct tn_store_server *srv = tn_store_server_start(&o);
    if (!srv)
        return die("server");
    int rc = store_ops(tn_store_server_port(srv), ops, rate);
    tn_store_server_stop(srv);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "allreduce")) {
        double us = allreduce((size_t)atoll(argv[2]), atoi(argv[3]));
        if (us < 0)
            return 1;
        printf("%.3f\n", us);
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "mpi"))
        return mpi_bench((size_t)atoll(argv[2]), atoi(argv[3]));
    double rate[3];
    if (argc == 3 && !strcmp(argv[1], "store")) {
        if (store(atoi(argv[2]), rate))
            return 1;
        printf("%.0f %.0f %.0f\n", rate[0], rate[1], rate[2]);
        return 0;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: bench_dist [allreduce BYTES ITERS | store OPS]\n");
        return 2;
    }
    double small = allreduce(4096, (int)tn_bench_size(2000, 10));
    size_t big = (size_t)tn_bench_size((int64_t)64 << 20, 1 << 16);
    double large = allreduce(big, (int)tn_bench_size(10, 1));
    if (small < 0 || large < 0 || store((int)tn_bench_size(20000, 100), rate))
        return 1;
    /* memcpy of the same 64 MiB: what one core's memory bandwidth allows */
    char *a = malloc(big), *b = malloc(big);
    if (!a || !b)
        return 1;
    memset(a, 1, big);
    memset(b, 2, big);
    double mc;
    TN_BENCH_BEST(5, mc, memcpy(b, a, big));
    double busbw = (double)big / (large * 1e-6) * 2 * (RANKS - 1) / RANKS;
    printf("allreduce 4 KiB float32, 2 ranks: %.1f us per call\n", small);
    printf("allreduce 64 MiB float32, 2 ranks: %.2f ms, busbw %.2f GB/s = %.2fx memcpy's "
           "%.2f GB/s\n",
           large / 1e3, busbw / 1e9, busbw / ((double)big / mc), (double)big / mc / 1e9);
    printf("store ops/s, one client: set %.0f, get %.0f, add %.0f\n", rate[0], rate[1], rate[2]);
    free(a);
    free(b);
    return 0;
}
