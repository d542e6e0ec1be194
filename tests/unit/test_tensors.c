/*
 * test_tensors: safetensors, .npy and .npz written by the safetensors
 * package and numpy (tests/fixtures/io_tensors.py) read bit for bit; what
 * tensorkit writes reads back bit for bit here and in those libraries;
 * safetensors headers that break the format's rules are refused.
 */
#include "tn_test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *fixture_path(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/tests/fixtures/io/%s", TN_SRCDIR, name);
    return buf;
}

/* Compares a flat dict of tensors with {"name": fixture tensor}. */
static int compare_dict(const struct tn_value *d, json_t *want, const char *what)
{
    int bad = 0;
    const char *k;
    json_t *x;
    size_t n = 0;
    json_object_foreach(want, k, x) {
        if (!strcmp(k, "__metadata__"))
            continue;
        n++;
        struct tn_value *v = tn_value_get(d, k);
        if (!v || v->kind != TN_VALUE_TENSOR) {
            print_message("# %s: %s missing\n", what, k);
            bad++;
            continue;
        }
        char w[256];
        snprintf(w, sizeof w, "%s: %s", what, k);
        bad += tn_test_compare(v->v.tensor, x, w, 0) != 0;
    }
    if (n != d->v.dict.n) {
        print_message("# %s: %zu tensors, expected %zu\n", what, d->v.dict.n, n);
        bad++;
    }
    return bad;
}

static void test_read_safetensors(void **state)
{
    (void)state;
    json_t *fx = tn_test_fixture("../io/tensors");
    struct tn_value *meta;
    struct tn_value *d = tn_st_load(fixture_path("tensors.safetensors"), &meta);
    assert_non_null(d);
    assert_int_equal(compare_dict(d, json_object_get(fx, "safetensors"), "safetensors"), 0);
    assert_non_null(meta);
    assert_string_equal(tn_value_get(meta, "format")->v.str.s, "pt");
    tn_value_release(meta);
    tn_value_release(d);
    json_decref(fx);
}

static void test_read_npz(void **state)
{
    (void)state;
    json_t *fx = tn_test_fixture("../io/tensors");
    const char *files[] = {"tensors.npz", "tensors_deflated.npz"};
    for (int i = 0; i < 2; i++) {
        struct tn_value *d = tn_npz_load(fixture_path(files[i]));
        if (!d)
            print_message("# %s\n", tn_last_error());
        assert_non_null(d);
        assert_int_equal(compare_dict(d, json_object_get(fx, "npz"), files[i]), 0);
        tn_value_release(d);
    }
    struct tn_tensor *f = tn_npy_load(fixture_path("tensors_fortran.npy"));
    assert_non_null(f);
    assert_int_equal(tn_test_compare(f, json_object_get(json_object_get(fx, "npz"), "fortran"),
                                     "fortran", 0), 0);
    assert_int_equal(f->strides[0], 1); /* read in place, Fortran strides */
    assert_int_equal(f->strides[1], 2);
    tn_release(f);
    assert_string_equal(tn_io_detect(fixture_path("tensors.npz")), "npz");
    assert_string_equal(tn_io_detect(fixture_path("tensors.safetensors")), "safetensors");
    assert_string_equal(tn_io_detect(fixture_path("tensors_fortran.npy")), "npy");
    assert_string_equal(tn_io_detect(fixture_path("module_2.pt")), "torch");
    /* a .npy's one tensor is named after the file's stem, the key tckpt
     * lists and tcompile's -i binds (both read through tn_io_file_open) */
    struct tn_value *d = tn_io_load_dict(fixture_path("tensors_fortran.npy"));
    assert_non_null(d);
    assert_int_equal(d->v.dict.n, 1);
    assert_non_null(tn_value_get(d, "tensors_fortran"));
    tn_value_release(d);
    json_decref(fx);
}

static char *run(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = 1 << 20, n = 0, k;
    char *buf = malloc(cap);
    while ((k = fread(buf + n, 1, cap - 1 - n, p)) > 0)
        n += k;
    buf[n] = 0;
    if (pclose(p) != 0) {
        print_message("# %s: %.400s\n", cmd, buf);
        free(buf);
        return NULL;
    }
    return buf;
}

/* Writes the fixture tensors with tensorkit (a non-contiguous one too),
 * reads them back, and (when available) has the real libraries read them. */
static void test_write_roundtrip(void **state)
{
    (void)state;
    json_t *fx = tn_test_fixture("../io/tensors");
    struct tn_value *src = tn_st_load(fixture_path("tensors.safetensors"), NULL);
    assert_non_null(src);
    struct tn_tensor *a = tn_arange(tn_int(0), tn_int(6), tn_int(1), TN_INT32);
    struct tn_tensor *v = tn_view(a, TN_SHAPE(2, 3));
    struct tn_tensor *t = tn_t(v);
    tn_value_set(src, tn_value_str("transposed"), tn_value_tensor(t));
    char dir[] = "/tmp/test_tensors.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char st[256], npz[256], cmd[4096];
    snprintf(st, sizeof st, "%s/out.safetensors", dir);
    snprintf(npz, sizeof npz, "%s/out.npz", dir);
    struct tn_value *meta = tn_value_dict();
    tn_value_set(meta, tn_value_str("format"), tn_value_str("pt"));
    assert_int_equal(tn_st_save(st, src, meta), 0);
    struct tn_value *back = tn_st_load(st, NULL);
    assert_non_null(back);
    struct tn_value *np = tn_value_dict();
    for (size_t i = 0; i < src->v.dict.n; i++) {
        struct tn_tensor *x = src->v.dict.vals[i]->v.tensor;
        struct tn_tensor *y = tn_value_get(back, src->v.dict.keys[i]->v.str.s)->v.tensor;
        char *hx = tn_test_hex(x), *hy = tn_test_hex(y);
        assert_string_equal(hx, hy);
        free(hx);
        free(hy);
        if (x->dtype != TN_BFLOAT16)
            tn_value_set(np, tn_value_retain(src->v.dict.keys[i]), tn_value_tensor(x));
    }
    assert_int_equal(tn_npz_save(npz, np), 0);
    struct tn_value *npback = tn_npz_load(npz);
    assert_non_null(npback);
    assert_int_equal(npback->v.dict.n, np->v.dict.n);
    if (system("python3 -c 'import safetensors, numpy, torch' >/dev/null 2>&1") == 0) {
        snprintf(cmd, sizeof cmd, "python3 '%s/tests/fixtures/io_tensors.py' safetensors '%s'",
                 TN_SRCDIR, st);
        char *js = run(cmd);
        assert_non_null(js);
        json_t *j = json_loads(js, 0, NULL);
        free(js);
        assert_non_null(j);
        assert_int_equal(compare_dict(src, j, "safetensors package"), 0);
        assert_string_equal(json_string_value(json_object_get(json_object_get(j, "__metadata__"),
                                                              "format")), "pt");
        json_decref(j);
        snprintf(cmd, sizeof cmd, "python3 '%s/tests/fixtures/io_tensors.py' npz '%s'", TN_SRCDIR,
                 npz);
        js = run(cmd);
        assert_non_null(js);
        j = json_loads(js, 0, NULL);
        free(js);
        assert_non_null(j);
        assert_int_equal(compare_dict(np, j, "numpy"), 0);
        json_decref(j);
    } else {
        print_message("# safetensors/numpy/torch not importable by python3: library check skipped\n");
    }
    unlink(st);
    unlink(npz);
    rmdir(dir);
    tn_value_release(npback);
    tn_value_release(np);
    tn_value_release(back);
    tn_value_release(meta);
    tn_value_release(src);
    tn_release(t);
    tn_release(v);
    tn_release(a);
    json_decref(fx);
}

static int write_st(const char *path, const char *header, size_t data)
{
    FILE *f = fopen(path, "wb");
    uint64_t n = strlen(header);
    for (int i = 0; i < 8; i++)
        fputc((int)(n >> (8 * i)) & 0xff, f);
    fputs(header, f);
    for (size_t i = 0; i < data; i++)
        fputc(0, f);
    return fclose(f);
}

static void test_safetensors_rules(void **state)
{
    (void)state;
    char path[] = "/tmp/test_tensors_rules.XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    static const struct {
        const char *header;
        size_t data;
        const char *why;
    } bad[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 9, "data bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "contiguous"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "shape needs"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "duplicate"},
        {"{\"a\":{\"dtype\":\"F99\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "F99"},
        {"[1]", 0, "start with"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_st(path, bad[i].header, bad[i].data);
        struct tn_value *v = tn_st_load(path, NULL);
        if (v || !strstr(tn_last_error(), bad[i].why))
            print_message("# case %zu: %s\n", i, v ? "loaded" : tn_last_error());
        assert_null(v);
        assert_non_null(strstr(tn_last_error(), bad[i].why));
    }
    write_st(path, "{\"a\":{\"dtype\":\"I16\",\"shape\":[2,2],\"data_offsets\":[0,8]}}    ", 8);
    struct tn_value *v = tn_st_load(path, NULL);
    assert_non_null(v);
    tn_value_release(v);
    unlink(path);
}

/* tn_npy_load reads an aligned .npy in place: the tensor's storage is the
 * file's private mapping (external memory, not the allocator's; issue 27:
 * no 32 MiB copy), and writing to it changes neither the file nor a second
 * load. */
static void test_npy_load_in_place(void **state)
{
    char path[] = "/tmp/test_tensors_npy.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct tn_tensor *a = tn_arange(tn_int(0), tn_int(1000), tn_int(1), TN_FLOAT32);
    assert_int_equal(tn_npy_save(path, a), 0);
    struct tn_tensor *x = tn_npy_load(path), *y;
    assert_non_null(x);
    assert_non_null(x->storage->free_fn); /* the mapping's, not a fresh block's */
    ((float *)tn_data(x))[7] = -1;
    assert_non_null(y = tn_npy_load(path));
    assert_true(((float *)tn_data(y))[7] == 7.0f);
    assert_true(((float *)tn_data(y))[999] == 999.0f);
    tn_release(a);
    tn_release(x);
    tn_release(y);
    unlink(path);
}

/* tn_npy_write writes the header and the tensor's own bytes (no encoded
 * copy, issue 27): the file holds exactly tn_npy_encode's bytes, for a
 * transposed view (made contiguous) and for an empty tensor too. */
static void test_npy_write_matches_encode(void **state)
{
    char path[] = "/tmp/test_tensors_npyw.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct tn_tensor *a = tn_arange(tn_int(0), tn_int(12), tn_int(1), TN_FLOAT32);
    struct tn_tensor *b = tn_view(a, (int64_t[]){3, 4}, 2);
    struct tn_tensor *cases[] = {a, tn_transpose(b, 0, 1),
                                 tn_empty((int64_t[]){0, 5}, 2, TN_INT64)};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tn_npy_write(path, cases[i], i == 0), 0);
        void *want, *got;
        size_t wn, gn;
        assert_int_equal(tn_npy_encode(cases[i], &want, &wn), 0);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        got = malloc(wn + 1);
        gn = fread(got, 1, wn + 1, f);
        fclose(f);
        assert_int_equal(gn, wn);
        assert_memory_equal(got, want, wn);
        free(want);
        free(got);
    }
    struct tn_tensor *x = tn_npy_load(path);
    assert_non_null(x);
    assert_int_equal(x->ndim, 2);
    assert_int_equal(x->sizes[1], 5);
    tn_release(x);
    assert_int_equal(tn_npy_write(path, cases[1], false), 0);
    assert_non_null(x = tn_npy_load(path));
    assert_true(((float *)tn_data(x))[1] == 4.0f); /* row 0 of the transpose: 0 4 8 */
    tn_release(x);
    tn_release(b);
    for (int i = 0; i < 3; i++)
        tn_release(cases[i]);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_safetensors),
        cmocka_unit_test(test_read_npz),
        cmocka_unit_test(test_write_roundtrip),
        cmocka_unit_test(test_npy_load_in_place),
        cmocka_unit_test(test_npy_write_matches_encode),
        cmocka_unit_test(test_safetensors_rules),
    };
    return TN_RUN_TESTS(tests);
}
