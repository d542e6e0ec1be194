/*
 * bench/io/bench_dcp.c [MIB [DIR]]: tn_dcp_save and tn_dcp_load of a
 * sharded state dict of MIB MiB (default 1024): 16 float32 tensors of 4096
 * columns split by rows between 2 ranks (threads, tcp process group over a
 * HashStore), into DIR (default a folder under $TMPDIR), after a sync.  Prints
 * "save_s X" and "load_s Y" (rank 0's wall time, best of 2; the first
 * save makes the folder, the second replaces one: "save_replace_s" is the
 * second's alone), then for
 * tn_dcp_save_async "async_s" (until it returns: the staging copy) and
 * "async_total_s" (until the wait returns), and "floor_s": the same bytes
 * (each rank's tensors, back to back) written by the 2 ranks at once with
 * plain pwrite and one fdatasync each, no format and no CRC, into files
 * beside DIR: the least any durable save of them takes on this disk.  For
 * bench/io/dcp.sh, which sets them against PyTorch's dcp.save/dcp.load.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tensor/tensor.h>

#include "bench/bench.h"

#define NT 16
#define COLS 4096

static int64_t rows;
static const char *dir;
static double save_replace_s = 1e30, save_s = 1e30, load_s = 1e30, async_s = 1e30, async_total_s = 1e30,
              floor_s = 1e30;

struct rank {
    struct tn_store *store;
    int rank;
    int rc;
};

/* The disk's floor: this rank's tensors written to a file of its own with
 * pwrite (4 MiB at a time) and synced once.  0 or -1. */
static int raw_write(int rank, struct tn_dcp_shard *sh)
{
    char path[600];
    snprintf(path, sizeof path, "%s.raw%d", dir, rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    off_t at = 0;
    for (int i = 0; i < NT; i++) {
        const char *p = tn_data(sh[i].tensor);
        size_t n = tn_nbytes(sh[i].tensor);
        while (n) {
            ssize_t w = pwrite(fd, p, n > ((size_t)4 << 20) ? (size_t)4 << 20 : n, at);
            if (w <= 0) {
                close(fd);
                return -1;
            }
            p += w;
            n -= (size_t)w;
            at += w;
        }
    }
    int rc = fdatasync(fd);
    close(fd);
    return rc;
}

static void *rank_main(void *p)
{
    struct rank *a = p;
    struct tn_pg *pg = tn_pg_new_tcp(a->store, a->rank, 2, "127.0.0.1", 600000);
    if (!pg) {
        a->rc = -1;
        return NULL;
    }
    int64_t lo = rows * a->rank / 2, hi = rows * (a->rank + 1) / 2;
    struct tn_dcp_shard sh[NT];
    char names[NT][32];
    memset(sh, 0, sizeof sh);
    for (int i = 0; i < NT; i++) {
        snprintf(names[i], sizeof names[i], "model.layer%d.weight", i);
        sh[i].fqn = names[i];
        sh[i].tensor = tn_full(TN_SHAPE(hi - lo, COLS), tn_float(i + a->rank), TN_FLOAT32);
        sh[i].offsets[0] = lo;
        sh[i].global_sizes[0] = rows;
        sh[i].global_sizes[1] = COLS;
    }
    for (int rep = 0; rep < 2 && !a->rc; rep++) {
        /* each save starts with no dirty pages (as dcp.py does), so the
         * kernel's writeback of the last one is not counted against it */
        if (a->rank == 0)
            sync();
        tn_pg_barrier(pg);
        double t0 = tn_bench_now();
        a->rc = tn_dcp_save(dir, sh, NT, pg);
        tn_pg_barrier(pg);
        double t1 = tn_bench_now();
        if (!a->rc)
            a->rc = tn_dcp_load(dir, sh, NT);
        tn_pg_barrier(pg);
        double t2 = tn_bench_now();
        /* the asynchronous save: the time the caller is held (staging),
         * and until the checkpoint is whole */
        if (a->rank == 0)
            sync();
        tn_pg_barrier(pg);
        double t3 = tn_bench_now();
        struct tn_dcp_async *h = NULL;
        if (!a->rc)
            a->rc = tn_dcp_save_async(dir, sh, NT, pg, &h);
        double t4 = tn_bench_now();
        if (!a->rc)
            a->rc = tn_dcp_async_wait(h);
        double t5 = tn_bench_now();
        tn_pg_barrier(pg);
        /* the floor: the same bytes, raw (the old files go first, as the
         * saves' old folders go inside their time: here they are not
         * counted against the floor) */
        char raw[600];
        snprintf(raw, sizeof raw, "%s.raw%d", dir, a->rank);
        unlink(raw);
        if (a->rank == 0)
            sync();
        tn_pg_barrier(pg);
        double t6 = tn_bench_now();
        if (!a->rc && raw_write(a->rank, sh) != 0) {
            fprintf(stderr, "bench_dcp: %s: cannot write\n", raw);
            a->rc = 1; /* said; not tensorkit's error */
        }
        tn_pg_barrier(pg);
        double t7 = tn_bench_now();
        if (a->rank == 0) {
            if (t7 - t6 < floor_s)
                floor_s = t7 - t6;
            if (t1 - t0 < save_s)
                save_s = t1 - t0;
            if (rep > 0)
                save_replace_s = t1 - t0;
            if (t2 - t1 < load_s)
                load_s = t2 - t1;
            if (t4 - t3 < async_s)
                async_s = t4 - t3;
            if (t5 - t3 < async_total_s)
                async_total_s = t5 - t3;
        }
    }
    char raw[600];
    snprintf(raw, sizeof raw, "%s.raw%d", dir, a->rank);
    unlink(raw);
    if (a->rc && a->rc != 1)
        fprintf(stderr, "bench_dcp: rank %d: %s\n", a->rank, tn_last_error());
    for (int i = 0; i < NT; i++)
        tn_release(sh[i].tensor);
    tn_pg_free(pg);
    return NULL;
}

int main(int argc, char **argv)
{
    long mib = argc > 1 ? atol(argv[1]) : 1024;
    rows = (int64_t)mib * 1024 * 1024 / (NT * COLS * 4);
    char def[512];
    snprintf(def, sizeof def, "%s/tn-bench-dcp", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    dir = argc > 2 ? argv[2] : def;
    struct tn_store *store = tn_store_hash_new();
    pthread_t th[2];
    struct rank a[2] = {{store, 0, 0}, {store, 1, 0}};
    for (int r = 0; r < 2; r++)
        pthread_create(&th[r], NULL, rank_main, &a[r]);
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    tn_store_release(store);
    if (a[0].rc || a[1].rc)
        return 1;
    printf("save_s %.3f\nload_s %.3f\nasync_s %.3f\nasync_total_s %.3f\nfloor_s %.3f\n"
           "save_replace_s %.3f\n",
           save_s, load_s, async_s, async_total_s, floor_s, save_replace_s);
    return 0;
}
