/*
 * test_dcp_save: tn_dcp_save with 2 and 3 ranks (threads over a HashStore
 * and the tcp process group): a row-sharded, a column-sharded and a
 * replicated tensor and a value, read back whole (tn_dcp_get) and
 * resharded to 1, 2 and 3 readers (tn_dcp_load); the replicated tensor
 * written once; a rank whose write fails, or that leaves without saving
 * (as a killed one), stops the save on every rank and the previous
 * checkpoint stays; and, with PyTorch 2.x, dcp_to_torch_save
 * of our folder gives our tensors.  tn_dcp_save_async saves what the
 * tensors held at the call, though the caller overwrites and releases them
 * before waiting, and reports a failed rank at the wait.
 */
#include "tn_test.h"

#include "io/internal.h"

#include <tensor/dcp.h>

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROWS 7
#define COLS 5

static bool use_async; /* the ranks save with tn_dcp_save_async */

/* The global tensors: w[i][j] = 10 i + j, c likewise + 1000, b = 0..3. */
static struct tn_tensor *global(const char *name)
{
    int64_t sz[2] = {ROWS, COLS};
    struct tn_tensor *t = tn_empty(!strcmp(name, "b") ? (int64_t[]){4} : sz,
                                   !strcmp(name, "b") ? 1 : 2, TN_FLOAT32);
    float *f = tn_data(t);
    for (int64_t i = 0; i < tn_numel(t); i++)
        f[i] = !strcmp(name, "b") ? (float)i
               : (float)(10 * (i / COLS) + i % COLS + (!strcmp(name, "c") ? 1000 : 0));
    return t;
}

struct rank {
    struct tn_store *store;
    int rank, world;
    const char *dir;
    bool fail;   /* this rank's shard reaches past the global size */
    bool vanish; /* this rank leaves without saving (as a killed one) */
    int rc;
    char err[512];
};

static void *rank_main(void *p)
{
    struct rank *a = p;
    struct tn_pg *pg = tn_pg_new_tcp(a->store, a->rank, a->world, "127.0.0.1", 20000);
    if (!pg) {
        a->rc = -1;
        return NULL;
    }
    if (a->vanish) {
        tn_pg_free(pg);
        return NULL;
    }
    struct tn_tensor *w = global("w"), *c = global("c"), *b = global("b");
    int64_t r0 = ROWS * a->rank / a->world, r1 = ROWS * (a->rank + 1) / a->world;
    int64_t c0 = COLS * a->rank / a->world, c1 = COLS * (a->rank + 1) / a->world;
    struct tn_dcp_shard sh[4] = {{0}};
    sh[0].fqn = "model.w";
    sh[0].tensor = tn_narrow(w, 0, r0, r1 - r0);
    sh[0].offsets[0] = a->fail ? ROWS : r0;
    sh[1].fqn = "model.c";
    sh[1].tensor = tn_narrow(c, 1, c0, c1 - c0);
    sh[1].offsets[1] = c0;
    for (int i = 0; i < 2; i++) {
        sh[i].global_sizes[0] = ROWS;
        sh[i].global_sizes[1] = COLS;
    }
    sh[2].fqn = "model.b";
    sh[2].tensor = tn_retain(b);
    sh[2].global_sizes[0] = 4;
    struct tn_value *step = tn_value_int(42);
    sh[3].fqn = "step";
    sh[3].value = step;
    if (use_async) {
        struct tn_dcp_async *h = NULL;
        a->rc = tn_dcp_save_async(a->dir, sh, 4, pg, &h);
        /* the caller goes on: its tensors change and go before the wait */
        struct tn_tensor *ts[3] = {w, c, b};
        for (int i = 0; i < 3; i++)
            memset(tn_data(ts[i]), 0xff, tn_nbytes(ts[i]));
        for (int i = 0; i < 3; i++) {
            tn_release(sh[i].tensor);
            sh[i].tensor = NULL;
        }
        if (!a->rc)
            a->rc = tn_dcp_async_wait(h);
    } else {
        a->rc = tn_dcp_save(a->dir, sh, 4, pg);
    }
    snprintf(a->err, sizeof a->err, "%s", a->rc ? tn_last_error() : "");
    for (int i = 0; i < 3; i++)
        tn_release(sh[i].tensor);
    tn_value_release(step);
    tn_release(w);
    tn_release(c);
    tn_release(b);
    tn_pg_free(pg);
    return NULL;
}

/* Runs `world` ranks saving into dir; rank `failing` (or -1) fails its
 * write, rank `gone` (or -1) leaves without saving. */
static void save(const char *dir, int world, int failing, int gone, struct rank *a)
{
    struct tn_store *store = tn_store_hash_new();
    pthread_t th[4];
    for (int r = 0; r < world; r++) {
        a[r] = (struct rank){store, r, world, dir, r == failing, r == gone, 0, ""};
        pthread_create(&th[r], NULL, rank_main, &a[r]);
    }
    for (int r = 0; r < world; r++)
        pthread_join(th[r], NULL);
    tn_store_release(store);
}

static void check_folder(const char *dir, int world)
{
    struct tn_dcp *d = tn_dcp_open(dir);
    if (!d)
        print_message("# %s\n", tn_last_error());
    assert_non_null(d);
    assert_int_equal(tn_dcp_files(d), world);
    assert_int_equal(tn_dcp_find(d, "model.w")->nchunks, world);
    assert_int_equal(tn_dcp_find(d, "model.b")->nchunks, 1); /* replicated: written once */
    static const char *const names[] = {"w", "c", "b"};
    for (int k = 0; k < 3; k++) {
        char fqn[16];
        snprintf(fqn, sizeof fqn, "model.%s", names[k]);
        const struct tn_dcp_item *it = tn_dcp_find(d, fqn);
        struct tn_value *v = tn_dcp_get(d, (size_t)(it - tn_dcp_item_at(d, 0)));
        struct tn_tensor *want = global(names[k]);
        char *x = tn_test_hex(v->v.tensor), *y = tn_test_hex(want);
        assert_string_equal(x, y);
        free(x);
        free(y);
        /* resharded to 1, 2 and 3 readers along rows */
        for (int readers = 1; readers <= 3; readers++) {
            for (int r = 0; r < readers; r++) {
                int64_t n = want->sizes[0], lo = n * r / readers, hi = n * (r + 1) / readers;
                struct tn_dcp_shard s = {.fqn = fqn};
                int64_t sz[2] = {hi - lo, want->ndim > 1 ? want->sizes[1] : 0};
                s.tensor = tn_empty(sz, want->ndim, TN_FLOAT32);
                s.offsets[0] = lo;
                memcpy(s.global_sizes, want->sizes, sizeof(int64_t) * want->ndim);
                assert_int_equal(tn_dcp_load(dir, &s, 1), 0);
                struct tn_tensor *part = tn_narrow(want, 0, lo, hi - lo);
                x = tn_test_hex(s.tensor);
                y = tn_test_hex(part);
                assert_string_equal(x, y);
                free(x);
                free(y);
                tn_release(part);
                tn_release(s.tensor);
            }
        }
        tn_release(want);
        tn_value_release(v);
    }
    struct tn_value *step = tn_dcp_get(d, (size_t)(tn_dcp_find(d, "step") - tn_dcp_item_at(d, 0)));
    assert_int_equal(step->v.i, 42);
    tn_value_release(step);
    tn_dcp_close(d);
}

/* A new folder `dir` (a mkdtemp template) and the checkpoint path in it. */
static void fresh(char *dir, char *ck, size_t cap)
{
    assert_non_null(mkdtemp(dir));
    snprintf(ck, cap, "%s/ck", dir);
}

/* Entries of folder d but . and .. */
static int entries(const char *d)
{
    DIR *dd = opendir(d);
    assert_non_null(dd);
    int n = 0;
    for (struct dirent *e; (e = readdir(dd));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(dd);
    return n;
}

static void test_save_and_fail(void **state)
{
    (void)state;
    char dir[] = "/tmp/tn-dcpsave-XXXXXX", ck[64];
    fresh(dir, ck, sizeof ck);
    struct rank a[4];
    char tmpd[96];
    snprintf(tmpd, sizeof tmpd, "%s/.ck.dcp-tmp", dir);
    for (int world = 2; world <= 3; world++) {
        save(ck, world, -1, -1, a);
        for (int r = 0; r < world; r++) {
            if (a[r].rc)
                print_message("# rank %d: %s\n", r, a[r].err);
            assert_int_equal(a[r].rc, 0);
        }
        check_folder(ck, world);
        /* the 2-rank checkpoint the 3 ranks replaced is renamed aside at
         * once, and gone, every file, once the background removal ends */
        assert_int_not_equal(access(tmpd, F_OK), 0);
        tn__dcp_remove_wait();
        assert_int_equal(entries(dir), 1); /* ck alone */
    }
    /* an old folder whose process was killed before its removal ended
     * (a PID that is gone) goes with the next save's first step */
    pid_t gone = fork();
    if (gone == 0)
        _exit(0);
    assert_true(gone > 0);
    waitpid(gone, NULL, 0);
    char stale[160], f0[200];
    snprintf(stale, sizeof stale, "%s-old-%ld-1", tmpd, (long)gone);
    assert_int_equal(mkdir(stale, 0777), 0);
    snprintf(f0, sizeof f0, "%s/__0_0.distcp", stale);
    FILE *sf = fopen(f0, "w");
    assert_non_null(sf);
    fclose(sf);
    save(ck, 3, -1, -1, a);
    for (int r = 0; r < 3; r++)
        assert_int_equal(a[r].rc, 0);
    tn__dcp_remove_wait();
    assert_int_equal(entries(dir), 1);
    /* the blocks each rank reserved for its file beyond what it wrote
     * (its tensors' bytes and 8 KiB each) are freed at the end */
    for (int r = 0; r < 3; r++) {
        char f[128];
        struct stat st;
        snprintf(f, sizeof f, "%s/__%d_0.distcp", ck, r);
        assert_int_equal(stat(f, &st), 0);
        assert_true((int64_t)st.st_blocks * 512 <= (st.st_size + 4095) / 4096 * 4096 + 4096);
    }
    /* rank 1 of 3 fails its write: every rank fails, the 3-rank folder stays */
    save(ck, 3, 1, -1, a);
    for (int r = 0; r < 3; r++) {
        print_message("# rank %d: %s\n", r, a[r].err);
        assert_int_not_equal(a[r].rc, 0);
    }
    assert_non_null(strstr(a[1].err, "model.w"));
    assert_non_null(strstr(a[0].err, "another rank failed while writing the shards"));
    check_folder(ck, 3);
    assert_int_not_equal(access(tmpd, F_OK), 0); /* the partial folder is gone */
    /* rank 2 of 3 dies before saving: ranks 0 and 1 fail, the folder stays */
    save(ck, 3, -1, 2, a);
    for (int r = 0; r < 2; r++) {
        print_message("# rank %d: %s\n", r, a[r].err);
        assert_int_not_equal(a[r].rc, 0);
        assert_non_null(strstr(a[r].err, "could not agree"));
    }
    check_folder(ck, 3);
    assert_int_not_equal(access(tmpd, F_OK), 0);
    /* PyTorch's own reader of our 3-rank folder */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s/tests/torch2-python >/dev/null 2>&1", TN_SRCDIR);
    if (system(cmd) == 0) {
        snprintf(cmd, sizeof cmd,
                 "$(%s/tests/torch2-python) -c \"import sys, warnings, torch; "
                 "warnings.simplefilter('ignore'); "
                 "from torch.distributed.checkpoint.format_utils import dcp_to_torch_save as f; "
                 "f('%s', '%s/o.pt'); d = torch.load('%s/o.pt'); "
                 "w = torch.arange(35.).reshape(7, 5); w = (w // 5) * 10 + w %% 5; "
                 "sys.exit(0 if torch.equal(d['model.w'], w) and torch.equal(d['model.c'], w + 1000) "
                 "and d['step'] == 42 else 1)\"",
                 TN_SRCDIR, ck, dir, dir);
        assert_int_equal(system(cmd), 0);
    } else {
        print_message("# PyTorch 2.x is not installed: dcp_to_torch_save not tried\n");
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_async(void **state)
{
    (void)state;
    char dir[] = "/tmp/tn-dcpasync-XXXXXX", ck[64];
    fresh(dir, ck, sizeof ck);
    struct rank a[3];
    use_async = true;
    save(ck, 3, -1, -1, a);
    for (int r = 0; r < 3; r++) {
        if (a[r].rc)
            print_message("# rank %d: %s\n", r, a[r].err);
        assert_int_equal(a[r].rc, 0);
    }
    check_folder(ck, 3); /* the values at the call, not the 0xff written after */
    save(ck, 2, 1, -1, a); /* rank 1 fails: the wait says so on both */
    for (int r = 0; r < 2; r++)
        assert_int_not_equal(a[r].rc, 0);
    assert_non_null(strstr(a[1].err, "model.w"));
    check_folder(ck, 3);
    use_async = false;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_save_and_fail),
        cmocka_unit_test(test_async),
    };
    return TN_RUN_TESTS(tests);
}
