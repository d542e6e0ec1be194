/*
 * dcp_worker: a rank of a distributed checkpoint save in a process of its
 * own, for tckpt_dcp_trun.bats (run under trun).
 *
 *   dcp_worker save STEP DIR   every rank saves its rows of "model.w"
 *                              (64 MiB in all), the replicated "model.b"
 *                              and the value "step" with tn_dcp_save, then
 *                              reads its columns back (resharded) and
 *                              prints "rank R of W saved step STEP ok".
 *   dcp_worker kill STEP DIR   the same, but rank 1 SIGKILLs itself while
 *                              its shard file is being written.
 *   dcp_worker check STEP DIR  (one process, no trun) reads DIR whole and
 *                              prints "DIR holds step STEP" when every
 *                              value is the one that step saved.
 * Exit 0, or 1 naming what failed.
 */
#include <tensor/tensor.h>

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ROWS 8192
#define COLS 2048

static int step;

static float expect(int64_t i, int64_t j) { return (float)(step * 65536 + (i * 31 + j) % 65521); }

static int fail(const char *what)
{
    fprintf(stderr, "dcp_worker: %s: %s\n", what, tn_last_error());
    return 1;
}

/* Whether t holds rows [r0, ...) and columns [c0, ...) of step's model.w. */
static bool holds(const struct tn_tensor *t, int64_t r0, int64_t c0)
{
    const float *f = tn_data(t);
    for (int64_t i = 0; i < t->sizes[0]; i++)
        for (int64_t j = 0; j < t->sizes[1]; j++)
            if (f[i * t->sizes[1] + j] != expect(r0 + i, c0 + j))
                return false;
    return true;
}

static int check(const char *dir)
{
    struct tn_dcp *d = tn_dcp_open(dir);
    if (!d)
        return fail("opening the checkpoint");
    const struct tn_dcp_item *w = tn_dcp_find(d, "model.w"), *s = tn_dcp_find(d, "step");
    if (!w || !s) {
        fprintf(stderr, "dcp_worker: %s lacks model.w or step\n", dir);
        return 1;
    }
    struct tn_value *wv = tn_dcp_get(d, (size_t)(w - tn_dcp_item_at(d, 0)));
    struct tn_value *sv = tn_dcp_get(d, (size_t)(s - tn_dcp_item_at(d, 0)));
    if (!wv || !sv)
        return fail("reading the checkpoint");
    bool ok = sv->kind == TN_VALUE_INT && sv->v.i == step && holds(wv->v.tensor, 0, 0);
    tn_value_release(wv);
    tn_value_release(sv);
    tn_dcp_close(d);
    if (!ok) {
        fprintf(stderr, "dcp_worker: %s does not hold step %d's values\n", dir, step);
        return 1;
    }
    printf("%s holds step %d\n", dir, step);
    return 0;
}

struct job {
    const char *dir;
    struct tn_dcp_shard *sh;
    struct tn_pg *pg;
    int rc;
    volatile int done;
};

static void *save_thread(void *p)
{
    struct job *j = p;
    j->rc = tn_dcp_save(j->dir, j->sh, 3, j->pg);
    j->done = 1;
    return NULL;
}

/* Whether this rank's shard file is being written: a temporary of
 * __<rank>_0.distcp with bytes in it, in DIR's temporary folder. */
static bool writing(const char *dir, int rank)
{
    char tmp[4096], prefix[64];
    const char *slash = strrchr(dir, '/');
    snprintf(tmp, sizeof tmp, "%.*s.%s.dcp-tmp", slash ? (int)(slash - dir + 1) : 0, dir,
             slash ? slash + 1 : dir);
    snprintf(prefix, sizeof prefix, ".__%d_0.distcp.tmp-", rank);
    DIR *d = opendir(tmp);
    if (!d)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        struct stat st;
        found = !strncmp(e->d_name, prefix, strlen(prefix)) &&
                fstatat(dirfd(d), e->d_name, &st, 0) == 0 && st.st_size > 0;
    }
    closedir(d);
    return found;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: dcp_worker save|kill|check STEP DIR\n");
        return 2;
    }
    step = atoi(argv[2]);
    const char *dir = argv[3];
    if (!strcmp(argv[1], "check"))
        return check(dir);
    bool kill_me = !strcmp(argv[1], "kill");
    tn_out_remove_on_signals(); /* as a program should: trun stops the others with SIGTERM */
    struct tn_dist_info info;
    if (tn_dist_init("env://", -1, -1, 60000, &info) < 0)
        return fail("tn_dist_init");
    struct tn_pg *pg = tn_pg_new_tcp(info.store, info.rank, info.world_size, "127.0.0.1", 60000);
    if (!pg)
        return fail("tn_pg_new_tcp");
    int R = info.rank, W = info.world_size;
    int64_t lo = ROWS * R / W, hi = ROWS * (R + 1) / W;
    struct tn_tensor *w = tn_empty(TN_SHAPE(hi - lo, COLS), TN_FLOAT32);
    struct tn_tensor *b = tn_full(TN_SHAPE(4), tn_float((float)step), TN_FLOAT32);
    struct tn_value *sv = tn_value_int(step);
    if (!w || !b || !sv)
        return fail("making the state");
    float *f = tn_data(w);
    for (int64_t i = lo; i < hi; i++)
        for (int64_t j = 0; j < COLS; j++)
            f[(i - lo) * COLS + j] = expect(i, j);
    struct tn_dcp_shard sh[3] = {{0}};
    sh[0].fqn = "model.w";
    sh[0].tensor = w;
    sh[0].offsets[0] = lo;
    sh[0].global_sizes[0] = ROWS;
    sh[0].global_sizes[1] = COLS;
    sh[1].fqn = "model.b";
    sh[1].tensor = b;
    sh[1].global_sizes[0] = 4;
    sh[2].fqn = "step";
    sh[2].value = sv;
    struct job j = {dir, sh, pg, 0, 0};
    if (kill_me && R == 1) {
        pthread_t th;
        pthread_create(&th, NULL, save_thread, &j);
        while (!j.done) {
            if (writing(dir, R))
                raise(SIGKILL); /* mid-write: no handler, no cleanup, as a crash */
            usleep(200);
        }
        fprintf(stderr, "dcp_worker: rank 1's save ended before it could be killed\n");
        return 3;
    }
    save_thread(&j);
    if (j.rc)
        return fail("tn_dcp_save");
    /* read back this rank's columns of every row: another sharding */
    int64_t c0 = COLS * R / W, c1 = COLS * (R + 1) / W;
    struct tn_dcp_shard back = {.fqn = "model.w"};
    back.tensor = tn_empty(TN_SHAPE(ROWS, c1 - c0), TN_FLOAT32);
    back.offsets[1] = c0;
    back.global_sizes[0] = ROWS;
    back.global_sizes[1] = COLS;
    if (!back.tensor || tn_dcp_load(dir, &back, 1) < 0)
        return fail("tn_dcp_load");
    if (!holds(back.tensor, 0, c0)) {
        fprintf(stderr, "dcp_worker: rank %d read back other values\n", R);
        return 1;
    }
    printf("rank %d of %d saved step %d ok\n", R, W, step);
    tn_release(back.tensor);
    tn_release(w);
    tn_release(b);
    tn_value_release(sv);
    tn_pg_free(pg);
    return 0;
}
