/*
 * test_dcp: distributed checkpoints written by PyTorch 2.x
 * (tests/fixtures/io_dcp.py: one process, and 2 gloo ranks under
 * torch.distributed.run) read as dcp_to_torch_save reads them, region by
 * region whatever the layout asked for (resharding to 1, 2 and 3 ranks),
 * and hostile or broken folders refused with the key named.
 */
#include "tn_test.h"

#include <tensor/dcp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIX TN_SRCDIR "/tests/fixtures/dcp"

/* Python's == over loaded values, tensors by dtype, shape and bytes. */
static bool same(const struct tn_value *a, const struct tn_value *b, const char *path)
{
    if (a->kind != b->kind) {
        print_message("# %s: %s vs %s\n", path, tn_value_kind_name(a->kind),
                      tn_value_kind_name(b->kind));
        return false;
    }
    char sub[512];
    switch (a->kind) {
    case TN_VALUE_NONE: return true;
    case TN_VALUE_BOOL: return a->v.b == b->v.b;
    case TN_VALUE_INT: return a->v.i == b->v.i;
    case TN_VALUE_FLOAT: return a->v.f == b->v.f;
    case TN_VALUE_STR: return !strcmp(a->v.str.s, b->v.str.s);
    case TN_VALUE_TUPLE:
    case TN_VALUE_LIST:
        if (a->v.seq.n != b->v.seq.n)
            return false;
        for (size_t i = 0; i < a->v.seq.n; i++) {
            snprintf(sub, sizeof sub, "%s.%zu", path, i);
            if (!same(a->v.seq.items[i], b->v.seq.items[i], sub))
                return false;
        }
        return true;
    case TN_VALUE_DICT:
    case TN_VALUE_ODICT:
        if (a->v.dict.n != b->v.dict.n) {
            print_message("# %s: %zu keys vs %zu\n", path, a->v.dict.n, b->v.dict.n);
            return false;
        }
        for (size_t i = 0; i < a->v.dict.n; i++) {
            /* in the same order, as dcp_to_torch_save builds them */
            if (!tn_value_key_equal(a->v.dict.keys[i], b->v.dict.keys[i])) {
                print_message("# %s: key %zu differs\n", path, i);
                return false;
            }
            snprintf(sub, sizeof sub, "%s.%zu", path, i);
            if (!same(a->v.dict.vals[i], b->v.dict.vals[i], sub))
                return false;
        }
        return true;
    case TN_VALUE_TENSOR: {
        char *x = tn_test_hex(a->v.tensor), *y = tn_test_hex(b->v.tensor);
        bool ok = a->v.tensor->dtype == b->v.tensor->dtype && a->v.tensor->ndim == b->v.tensor->ndim &&
                  !memcmp(a->v.tensor->sizes, b->v.tensor->sizes, sizeof(int64_t) * a->v.tensor->ndim) &&
                  !strcmp(x, y);
        if (!ok)
            print_message("# %s: tensors differ\n", path);
        free(x);
        free(y);
        return ok;
    }
    default:
        return false;
    }
}

/* Tensors of a tree in walk order, with their paths. */
struct seen {
    char *path[64];
    const struct tn_tensor *t[64];
    size_t n;
};
static int see(const char *path, struct tn_tensor *t, void *ctx)
{
    struct seen *s = ctx;
    assert_true(s->n < 64);
    s->path[s->n] = strdup(path);
    s->t[s->n++] = t;
    return 0;
}

/* tn_dcp_load_meta's tree lists the tensors of `whole` (tn_dcp_load_all's),
 * same paths, sizes and dtypes, on the meta device, each its own storage. */
static void check_meta(struct tn_dcp *d, const struct tn_value *whole)
{
    struct tn_value *meta = tn_dcp_load_meta(d, false);
    if (!meta)
        print_message("# %s\n", tn_last_error());
    assert_non_null(meta);
    struct seen a = {0}, b = {0};
    assert_int_equal(tn_value_walk_tensors(whole, see, &a), 0);
    assert_int_equal(tn_value_walk_tensors(meta, see, &b), 0);
    assert_int_equal(a.n, b.n);
    for (size_t i = 0; i < a.n; i++) {
        assert_string_equal(a.path[i], b.path[i]);
        assert_int_equal(b.t[i]->device.type, TN_DEVICE_META);
        assert_int_equal(a.t[i]->dtype, b.t[i]->dtype);
        assert_int_equal(a.t[i]->ndim, b.t[i]->ndim);
        assert_memory_equal(a.t[i]->sizes, b.t[i]->sizes, sizeof(int64_t) * a.t[i]->ndim);
        assert_int_equal(tn_nbytes(a.t[i]), tn_nbytes(b.t[i]));
        for (size_t j = 0; j < i; j++)
            assert_ptr_not_equal(b.t[i]->storage, b.t[j]->storage);
        free(a.path[i]);
        free(b.path[i]);
    }
    tn_value_release(meta);
}

/* Folder `name` read whole equals what dcp_to_torch_save wrote of it. */
static void check_whole(const char *name)
{
    char dir[512], pt[512];
    snprintf(dir, sizeof dir, FIX "/%s", name);
    snprintf(pt, sizeof pt, FIX "/%s.pt", name);
    assert_true(tn_dcp_is_dir(dir));
    struct tn_dcp *d = tn_dcp_open(dir);
    if (!d)
        print_message("# %s\n", tn_last_error());
    assert_non_null(d);
    struct tn_value *ours = tn_dcp_load_all(d, false);
    struct tn_value *theirs = tn_load(pt, NULL);
    assert_non_null(ours);
    assert_non_null(theirs);
    assert_true(same(ours, theirs, name));
    check_meta(d, ours);
    struct tn_value *flat = tn_dcp_load_all(d, true);
    assert_non_null(flat);
    assert_int_equal(flat->v.dict.n, tn_dcp_count(d));
    assert_string_equal(tn_dcp_version(d), "1.0.0");
    tn_value_release(flat);
    tn_value_release(ours);
    tn_value_release(theirs);
    tn_dcp_close(d);
}

static void test_one_process(void **state)
{
    (void)state;
    check_whole("one");
}

static void test_two_ranks(void **state)
{
    (void)state;
    check_whole("two");
    struct tn_dcp *d = tn_dcp_open(FIX "/two");
    assert_non_null(d);
    assert_int_equal(tn_dcp_files(d), 2);
    const struct tn_dcp_item *w = tn_dcp_find(d, "model.w");
    assert_non_null(w);
    assert_int_equal(w->nchunks, 2); /* rows 0-2 on rank 0, 3-4 on rank 1 */
    assert_int_equal(w->chunks[1].offsets[0], 3);
    assert_true(tn_dcp_find(d, "tag") && !tn_dcp_find(d, "tag")->tensor);
    tn_dcp_close(d);
}

/* Every key of folder `name` (two/, four/) read as `world` ranks would
 * hold it, split along `dim`, glued back and compared with
 * dcp_to_torch_save's tensor (name.pt). */
static void reshard(const char *name, int world, int dim)
{
    char dir[512], pt[520];
    snprintf(dir, sizeof dir, FIX "/%s", name);
    snprintf(pt, sizeof pt, "%s.pt", dir);
    struct tn_value *ref = tn_load(pt, NULL);
    assert_non_null(ref);
    static const char *const keys[][3] = {{"model.w", "model", "w"}, {"model.c", "model", "c"},
                                          {"model.b", "model", "b"}};
    for (size_t k = 0; k < 3; k++) {
        struct tn_tensor *full =
            tn_value_get(tn_value_get(ref, keys[k][1]), keys[k][2])->v.tensor;
        int dd = dim < full->ndim ? dim : 0;
        struct tn_tensor *out = tn_zeros(full->sizes, full->ndim, full->dtype);
        struct tn_dcp_shard sh[3];
        int64_t n = full->sizes[dd], at = 0;
        for (int r = 0; r < world; r++) {
            int64_t len = n / world + (r < n % world);
            memset(&sh[r], 0, sizeof sh[r]);
            sh[r].fqn = keys[k][0];
            int64_t sz[TN_MAX_DIMS];
            memcpy(sz, full->sizes, sizeof sz);
            sz[dd] = len;
            sh[r].tensor = tn_empty(sz, full->ndim, full->dtype);
            sh[r].offsets[dd] = at;
            memcpy(sh[r].global_sizes, full->sizes, sizeof(int64_t) * full->ndim);
            at += len;
        }
        if (tn_dcp_load(dir, sh, (size_t)world) < 0)
            print_message("# %s\n", tn_last_error());
        for (int r = 0; r < world; r++) {
            struct tn_tensor *v = tn_narrow(out, dd, sh[r].offsets[dd], sh[r].tensor->sizes[dd]);
            assert_int_equal(tn_copy_(v, sh[r].tensor), 0);
            tn_release(v);
            tn_release(sh[r].tensor);
        }
        char *x = tn_test_hex(out), *y = tn_test_hex(full);
        if (strcmp(x, y))
            print_message("# %s of %s at %d ranks along %d differs\n", keys[k][0], name, world,
                          dim);
        assert_string_equal(x, y);
        free(x);
        free(y);
        tn_release(out);
    }
    tn_value_release(ref);
}

static void test_reshard(void **state)
{
    (void)state;
    for (int world = 1; world <= 3; world++)
        for (int dim = 0; dim < 2; dim++)
            reshard("two", world, dim);
    /* a region across both saved chunks, offset in both dimensions */
    struct tn_dcp *d = tn_dcp_open(FIX "/two");
    struct tn_tensor *t = tn_empty(TN_SHAPE(2, 2), TN_FLOAT32);
    assert_int_equal(tn_dcp_read(d, "model.c", (int64_t[]){1, 2}, t), 0);
    const float *f = t->storage->data;
    assert_true(f[0] == 8 && f[1] == 9 && f[2] == 14 && f[3] == 15);
    /* outside the tensor, wrong dtype: errors naming the key */
    assert_true(tn_dcp_read(d, "model.c", (int64_t[]){3, 0}, t) < 0);
    assert_non_null(strstr(tn_last_error(), "model.c"));
    tn_release(t);
    t = tn_empty(TN_SHAPE(2, 2), TN_FLOAT64);
    assert_true(tn_dcp_read(d, "model.c", (int64_t[]){0, 0}, t) < 0);
    tn_release(t);
    tn_dcp_close(d);
}

/* four/: saved by 4 gloo ranks (rows 2+2+2+1, columns 3+3+3+1), read
 * whole and by 1, 2 and 3 ranks along either dimension. */
static void test_four_ranks(void **state)
{
    (void)state;
    check_whole("four");
    struct tn_dcp *d = tn_dcp_open(FIX "/four");
    assert_non_null(d);
    assert_int_equal(tn_dcp_files(d), 4);
    const struct tn_dcp_item *w = tn_dcp_find(d, "model.w"), *c = tn_dcp_find(d, "model.c");
    assert_true(w && c);
    assert_int_equal(w->nchunks, 4);
    assert_int_equal(w->chunks[3].offsets[0], 6);
    assert_int_equal(c->nchunks, 4);
    assert_int_equal(c->chunks[3].offsets[1], 9);
    tn_dcp_close(d);
    for (int world = 1; world <= 3; world++)
        for (int dim = 0; dim < 2; dim++)
            reshard("four", world, dim);
}

/* A folder of two/'s .distcp files and bad/<name>.metadata; the caller
 * removes it with rm_dir. */
static char *bad_dir(const char *name)
{
    char *dir = strdup("/tmp/tn-dcp-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp " FIX "/two/*.distcp %s/ && cp " FIX "/bad/%s.metadata "
             "%s/.metadata", dir, name, dir);
    assert_int_equal(system(cmd), 0);
    return dir;
}

static void rm_dir(char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    free(dir);
}

static void expect_bad(const char *name, const char *want1, const char *want2)
{
    char *dir = bad_dir(name);
    struct tn_dcp *d = tn_dcp_open(dir);
    if (d)
        print_message("# bad/%s opened\n", name);
    assert_null(d);
    print_message("# %s: %s\n", name, tn_last_error());
    assert_non_null(strstr(tn_last_error(), want1));
    if (want2)
        assert_non_null(strstr(tn_last_error(), want2));
    rm_dir(dir);
}

static void test_refused(void **state)
{
    (void)state;
    unlink("/tmp/tensorkit-dcp-pwned");
    expect_bad("global", "GLOBAL posix.system", NULL);
    assert_int_equal(access("/tmp/tensorkit-dcp-pwned", F_OK), -1);
    expect_bad("overlap", "model.w", "overlap");
    expect_bad("missing", "model.w", "missing");
    expect_bad("past_end", "model.c", "past the end");
    expect_bad("path", "tag", "relative_path");
    /* a shard cut short: the items past the cut lie past its end */
    char *dir = bad_dir("overlap");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cp " FIX "/two/.metadata %s/ && truncate -s 8000 %s/__1_0.distcp",
             dir, dir);
    assert_int_equal(system(cmd), 0);
    assert_null(tn_dcp_open(dir));
    assert_non_null(strstr(tn_last_error(), "past the end of __1_0.distcp"));
    /* bytes inside the file but not the tensor promised: named at read */
    snprintf(cmd, sizeof cmd, "cp " FIX "/two/__1_0.distcp %s/ && "
             "dd if=/dev/zero of=%s/__1_0.distcp bs=1 seek=6400 count=64 conv=notrunc 2>/dev/null",
             dir, dir);
    assert_int_equal(system(cmd), 0);
    struct tn_dcp *d = tn_dcp_open(dir);
    assert_non_null(d);
    struct tn_tensor *t = tn_empty(TN_SHAPE(5, 3), TN_FLOAT32);
    assert_true(tn_dcp_read(d, "model.w", (int64_t[]){0, 0}, t) < 0);
    print_message("# corrupt: %s\n", tn_last_error());
    assert_non_null(strstr(tn_last_error(), "model.w"));
    tn_release(t);
    tn_dcp_close(d);
    rm_dir(dir);
    /* not a folder, no .metadata */
    assert_null(tn_dcp_open(FIX "/two.pt"));
    assert_false(tn_dcp_is_dir(FIX "/bad"));
}

/* The NULL a failed tn_dcp_open gives goes through every accessor: empty
 * answers, or TN_EINVAL from those that read (each dereferenced it). */
static void test_null_checkpoint(void **state)
{
    (void)state;
    struct tn_dcp *d = tn_dcp_open(FIX "/no-such-folder");
    assert_null(d);
    assert_int_equal(tn_dcp_count(d), 0);
    assert_null(tn_dcp_item_at(d, 0));
    assert_null(tn_dcp_find(d, "model.w"));
    assert_int_equal(tn_dcp_files(d), 0);
    assert_null(tn_dcp_file_name(d, 0));
    assert_int_equal(tn_dcp_file_size(d, 0), 0);
    assert_string_equal(tn_dcp_version(d), "");
    struct tn_tensor *t = tn_empty(TN_SHAPE(5, 3), TN_FLOAT32);
    assert_int_equal(tn_dcp_read(d, "model.w", (int64_t[]){0, 0}, t), TN_EINVAL);
    assert_non_null(strstr(tn_last_error(), "checkpoint is NULL"));
    tn_release(t);
    assert_null(tn_dcp_get(d, 0));
    assert_int_equal(tn_last_status(), TN_EINVAL);
    assert_null(tn_dcp_load_all(d, true));
    assert_null(tn_dcp_load_meta(d, false));
    assert_non_null(strstr(tn_last_error(), "tn_dcp_load_meta"));
    assert_true(tn_dcp_async_done(NULL));
    tn_dcp_close(d);
    /* and a NULL key on an open one */
    d = tn_dcp_open(FIX "/two");
    assert_non_null(d);
    assert_null(tn_dcp_find(d, NULL));
    tn_dcp_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_process),
        cmocka_unit_test(test_two_ranks),
        cmocka_unit_test(test_reshard),
        cmocka_unit_test(test_four_ranks),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_null_checkpoint),
    };
    return TN_RUN_TESTS(tests);
}
