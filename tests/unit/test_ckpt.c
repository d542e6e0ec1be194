/*
 * test_ckpt: torch checkpoints written by real PyTorch 1.13 and 2.x
 * (tests/fixtures/io_checkpoints.py) load with identical values, dtypes,
 * shapes, strides, sharing and nesting; re-saved in the same layout they
 * come out byte for byte as PyTorch wrote them (2.x: except the
 * informational .data/serialization_id).
 */
#include "tn_test.h"

#include "io/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

static const char *const cases[] = {"module", "dtypes", "views", "noncontig",
                                    "nested", "optim",  "param", "many"};

struct groups {
    struct tn_storage *s[64];
    int n;
};

/* Compares a loaded value with its fixture description; prints what
 * differs and returns the number of differences. */
static int cmp(const struct tn_value *v, json_t *j, const char *path, struct groups *g)
{
    const char *kind = "";
    json_t *x = NULL;
    json_object_foreach(j, kind, x) {
        if (!strcmp(kind, "attrs"))
            continue;
        break;
    }
    static const char *const want_kind[] = {
        [TN_VALUE_NONE] = "none", [TN_VALUE_BOOL] = "bool", [TN_VALUE_INT] = "int",
        [TN_VALUE_FLOAT] = "float", [TN_VALUE_STR] = "str", [TN_VALUE_TUPLE] = "tuple",
        [TN_VALUE_LIST] = "list", [TN_VALUE_DICT] = "dict", [TN_VALUE_ODICT] = "odict",
        [TN_VALUE_TENSOR] = "tensor"};
    if (v->kind > TN_VALUE_TENSOR || strcmp(want_kind[v->kind], kind)) {
        print_message("# %s: ours %s, PyTorch %s\n", path, tn_value_kind_name(v->kind), kind);
        return 1;
    }
    char sub[512];
    int bad = 0;
    switch (v->kind) {
    case TN_VALUE_NONE:
        return 0;
    case TN_VALUE_BOOL:
        return v->v.b != json_is_true(x) ? (print_message("# %s: bool\n", path), 1) : 0;
    case TN_VALUE_INT:
        if (v->v.i != json_integer_value(x)) {
            print_message("# %s: ours %lld, PyTorch %lld\n", path, (long long)v->v.i,
                          (long long)json_integer_value(x));
            return 1;
        }
        return 0;
    case TN_VALUE_FLOAT:
        if (v->v.f != strtod(json_string_value(x), NULL)) {
            print_message("# %s: ours %.17g, PyTorch %s\n", path, v->v.f, json_string_value(x));
            return 1;
        }
        return 0;
    case TN_VALUE_STR:
        if (strcmp(v->v.str.s, json_string_value(x))) {
            print_message("# %s: ours '%s', PyTorch '%s'\n", path, v->v.str.s, json_string_value(x));
            return 1;
        }
        return 0;
    case TN_VALUE_TUPLE:
    case TN_VALUE_LIST:
        if (v->v.seq.n != json_array_size(x)) {
            print_message("# %s: %zu items, PyTorch %zu\n", path, v->v.seq.n, json_array_size(x));
            return 1;
        }
        for (size_t i = 0; i < v->v.seq.n; i++) {
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            bad += cmp(v->v.seq.items[i], json_array_get(x, i), sub, g);
        }
        return bad;
    case TN_VALUE_DICT:
    case TN_VALUE_ODICT:
        if (v->v.dict.n != json_array_size(x)) {
            print_message("# %s: %zu items, PyTorch %zu\n", path, v->v.dict.n, json_array_size(x));
            return 1;
        }
        for (size_t i = 0; i < v->v.dict.n; i++) {
            json_t *kv = json_array_get(x, i);
            snprintf(sub, sizeof sub, "%s{key %zu}", path, i);
            bad += cmp(v->v.dict.keys[i], json_array_get(kv, 0), sub, g);
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            bad += cmp(v->v.dict.vals[i], json_array_get(kv, 1), sub, g);
        }
        if (v->kind == TN_VALUE_ODICT) {
            json_t *attrs = json_object_get(j, "attrs");
            if (json_is_null(attrs) != (v->v.dict.attrs == NULL)) {
                print_message("# %s: attributes differ\n", path);
                return bad + 1;
            }
            if (v->v.dict.attrs) {
                snprintf(sub, sizeof sub, "%s.__dict__", path);
                bad += cmp(v->v.dict.attrs, attrs, sub, g);
            }
        }
        return bad;
    case TN_VALUE_TENSOR: {
        struct tn_tensor *t = v->v.tensor;
        bad += tn_test_compare(t, x, path, 1) != 0;
        if (t->requires_grad != json_is_true(json_object_get(x, "requires_grad")) ||
            !!(t->flags & TN_TENSOR_PARAMETER) != json_is_true(json_object_get(x, "param"))) {
            print_message("# %s: requires_grad or Parameter differs\n", path);
            bad++;
        }
        int sg = (int)json_integer_value(json_object_get(x, "storage"));
        if (sg >= 64)
            return bad + 1;
        if (tn_numel(t) == 0 && t->storage->nbytes == 0)
            return bad;
        if (sg >= g->n) {
            for (int k = 0; k < g->n; k++)
                if (g->s[k] == t->storage) {
                    print_message("# %s: shares a storage PyTorch does not share\n", path);
                    bad++;
                }
            g->s[sg] = t->storage;
            g->n = sg + 1;
        } else if (g->s[sg] != t->storage) {
            print_message("# %s: does not share its storage as PyTorch does\n", path);
            bad++;
        }
        return bad;
    }
    default:
        return 1;
    }
}

static char *fixture_path(const char *name, const char *ext)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/tests/fixtures/io/%s%s", TN_SRCDIR, name, ext);
    return buf;
}

static int load_and_compare(const char *name, enum tn_ckpt_allowlist allow, bool no_mmap)
{
    char jn[64];
    snprintf(jn, sizeof jn, "../io/%s", name);
    json_t *fx = tn_test_fixture(jn);
    struct tn_load_options o = {.allowlist = allow, .no_mmap = no_mmap};
    struct tn_value *v = tn_load(fixture_path(name, ".pt"), &o);
    if (!v) {
        print_message("# %s: %s\n", name, tn_last_error());
        json_decref(fx);
        return 1;
    }
    struct groups g = {.n = 0};
    int bad = cmp(v, json_object_get(fx, "value"), name, &g);
    tn_value_release(v);
    json_decref(fx);
    return bad;
}

static void test_load_torch1(void **state)
{
    (void)state;
    int bad = 0;
    char name[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(name, sizeof name, "%s_1", cases[i]);
        bad += load_and_compare(name, TN_ALLOW_CURRENT, i % 2);
    }
    assert_int_equal(bad, 0);
}

static void test_load_torch2(void **state)
{
    (void)state;
    int bad = 0;
    char name[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(name, sizeof name, "%s_2", cases[i]);
        bad += load_and_compare(name, TN_ALLOW_CURRENT, i % 2);
    }
    assert_int_equal(bad, 0);
}

/* 1.13's allowlist has no BINFLOAT: the nested and optimizer fixtures hold
 * floats and are refused exactly as 1.13 refuses them. */
static void test_torch1_allowlist(void **state)
{
    (void)state;
    assert_int_equal(load_and_compare("module_1", TN_ALLOW_TORCH1, false), 0);
    struct tn_load_options o = {.allowlist = TN_ALLOW_TORCH1};
    struct tn_value *v = tn_load(fixture_path("optim_1", ".pt"), &o);
    assert_null(v);
    assert_non_null(strstr(tn_last_error(), "Unsupported operand 71"));
    assert_non_null(strstr(tn_last_error(), "optim_1/data.pkl"));
}

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* In PyTorch's file, puts our serialization id and its CRC (data
 * descriptor and central directory) where PyTorch's are. */
static void patch_serialization_id(unsigned char *theirs, size_t tlen, const unsigned char *ours,
                                   size_t olen, const char *name)
{
    struct tn_zip *zt = tn_zip_open_memory(theirs, tlen, "theirs");
    struct tn_zip *zo = tn_zip_open_memory(ours, olen, "ours");
    assert_non_null(zt);
    assert_non_null(zo);
    char rec[128];
    snprintf(rec, sizeof rec, "%s/.data/serialization_id", name);
    long it = tn_zip_find(zt, rec), io = tn_zip_find(zo, rec);
    assert_true(it >= 0 && io >= 0);
    const struct tn_zip_entry *et = tn_zip_entry_at(zt, (size_t)it);
    const struct tn_zip_entry *eo = tn_zip_entry_at(zo, (size_t)io);
    assert_int_equal(et->size, 40);
    assert_int_equal(et->data_offset, eo->data_offset);
    uint32_t crc_t = et->crc, crc_o = eo->crc;
    memcpy(theirs + et->data_offset, ours + eo->data_offset, 40);
    for (size_t p = 0; p + 4 <= tlen; p++)
        if (rd32(theirs + p) == crc_t) {
            for (int k = 0; k < 4; k++)
                theirs[p + k] = (unsigned char)(crc_o >> (8 * k));
        }
    tn_zip_close(zt);
    tn_zip_close(zo);
}

static int resave_identical(const char *name, enum tn_ckpt_layout layout)
{
    struct tn_value *v = tn_load(fixture_path(name, ".pt"), NULL);
    if (!v) {
        print_message("# %s: %s\n", name, tn_last_error());
        return 1;
    }
    char dir[] = "/tmp/test_ckpt.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char out[256];
    snprintf(out, sizeof out, "%s/%s.pt", dir, name);
    struct tn_save_options so = {.layout = layout};
    int rc = tn_save(out, v, &so);
    tn_value_release(v);
    if (rc < 0) {
        print_message("# %s: save: %s\n", name, tn_last_error());
        return 1;
    }
    size_t tl, ol;
    unsigned char *theirs = tn_test_slurp(fixture_path(name, ".pt"), &tl);
    unsigned char *ours = tn_test_slurp(out, &ol);
    unlink(out);
    rmdir(dir);
    int bad = 0;
    if (tl != ol) {
        print_message("# %s: ours %zu bytes, PyTorch %zu\n", name, ol, tl);
        bad = 1;
    } else {
        if (layout == TN_CKPT_TORCH2)
            patch_serialization_id(theirs, tl, ours, ol, name);
        for (size_t i = 0; i < tl; i++) {
            if (theirs[i] != ours[i]) {
                print_message("# %s: first difference at byte %zu (ours %02x, PyTorch %02x)\n",
                              name, i, ours[i], theirs[i]);
                bad = 1;
                break;
            }
        }
    }
    free(theirs);
    free(ours);
    return bad;
}

static void test_identical_torch1(void **state)
{
    (void)state;
    int bad = 0;
    char name[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(name, sizeof name, "%s_1", cases[i]);
        bad += resave_identical(name, TN_CKPT_TORCH1);
    }
    assert_int_equal(bad, 0);
}

static void test_identical_torch2(void **state)
{
    (void)state;
    int bad = 0;
    char name[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(name, sizeof name, "%s_2", cases[i]);
        bad += resave_identical(name, TN_CKPT_TORCH2);
    }
    assert_int_equal(bad, 0);
}

/* A value built in C with every feature: each dtype, views of one storage,
 * a non-contiguous and zero-size tensors, Parameters, nesting, _metadata.
 * Floats only when `floats` (1.13's weights_only has no BINFLOAT). */
static struct tn_value *build_value(bool floats)
{
    struct tn_value *root = tn_value_odict();
    struct tn_tensor *ar = tn_arange(tn_int(0), tn_int(12), tn_int(1), TN_FLOAT32);
    struct tn_tensor *base = tn_view(ar, TN_SHAPE(3, 4));
    struct tn_tensor *views[] = {base, tn_t(base), tn_select(base, 0, 1),
                                 tn_slice(base, 1, 1, 3, 1)};
    const char *vn[] = {"base", "t", "row", "cols"};
    for (int i = 0; i < 4; i++) {
        tn_value_set(root, tn_value_str(vn[i]), tn_value_tensor(views[i]));
        tn_release(views[i]);
    }
    tn_release(ar);
    struct tn_value *dts = tn_value_dict();
    for (int d = 0; d < TN_NUM_DTYPES; d++) {
        struct tn_tensor *t = d == TN_BOOL ? tn_ones(TN_SHAPE(3), TN_BOOL)
                              : tn_dtype_is_complex((enum tn_dtype)d)
                                  ? tn_full(TN_SHAPE(2), tn_complex(1.5, -2), (enum tn_dtype)d)
                                  : tn_arange(tn_int(-2), tn_int(3), tn_int(1), (enum tn_dtype)d);
        if (d == TN_UINT8) {
            tn_release(t);
            t = tn_arange(tn_int(250), tn_int(256), tn_int(1), TN_UINT8);
        }
        tn_value_set(dts, tn_value_str(tn_dtype_name((enum tn_dtype)d)), tn_value_tensor(t));
        tn_release(t);
    }
    tn_value_set(root, tn_value_str("dtypes"), dts);
    struct tn_tensor *r = tn_arange(tn_int(0), tn_int(10), tn_int(1), TN_FLOAT64);
    struct tn_tensor *step = tn_slice(r, 0, 1, TN_END, 3);
    tn_value_set(root, tn_value_str("step"), tn_value_tensor(step));
    tn_release(step);
    tn_release(r);
    struct tn_tensor *z = tn_zeros(TN_SHAPE(2, 0), TN_INT64);
    tn_value_set(root, tn_value_str("empty"), tn_value_tensor(z));
    tn_release(z);
    struct tn_tensor *sc = tn_scalar_tensor(tn_int(7), TN_INT64);
    tn_value_set(root, tn_value_str("scalar"), tn_value_tensor(sc));
    tn_release(sc);
    struct tn_tensor *p = tn_ones(TN_SHAPE(2, 2), TN_FLOAT32);
    p->flags |= TN_TENSOR_PARAMETER;
    p->requires_grad = true;
    tn_value_set(root, tn_value_str("param"), tn_value_tensor(p));
    tn_release(p);
    struct tn_tensor *fz = tn_ones(TN_SHAPE(3), TN_FLOAT16);
    fz->flags |= TN_TENSOR_PARAMETER;
    tn_value_set(root, tn_value_str("frozen"), tn_value_tensor(fz));
    tn_release(fz);
    struct tn_value *l = tn_value_list();
    tn_value_append(l, tn_value_int(1));
    tn_value_append(l, tn_value_int(-(1LL << 40)));
    tn_value_append(l, tn_value_str("x"));
    tn_value_append(l, tn_value_none());
    tn_value_append(l, tn_value_bool(true));
    struct tn_value *tu = tn_value_tuple();
    tn_value_append(tu, tn_value_int(1));
    tn_value_append(tu, tn_value_str("two"));
    if (floats)
        tn_value_append(tu, tn_value_float(1e-8));
    tn_value_append(l, tu);
    tn_value_set(root, tn_value_str("nested"), l);
    struct tn_value *md = tn_value_odict();
    struct tn_value *ver = tn_value_dict();
    tn_value_set(ver, tn_value_str("version"), tn_value_int(1));
    tn_value_set(md, tn_value_str(""), ver);
    root->v.dict.attrs = tn_value_dict();
    tn_value_set(root->v.dict.attrs, tn_value_str("_metadata"), md);
    return root;
}

static char *run_checker(const char *python, const char *file)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/fixtures/io_checkpoints.py' '%s' 2>&1", python,
             TN_SRCDIR, file);
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while ((k = fread(buf + n, 1, cap - 1 - n, p)) > 0)
        n += k;
    buf[n] = 0;
    if (pclose(p) != 0) {
        print_message("# %s failed: %.500s\n", python, buf);
        free(buf);
        return NULL;
    }
    return buf;
}

/* Python's zipfile on `file`: "None N M" when every CRC matches, N of the
 * M entries carrying a zip64 extra field (tag 1) in the central directory. */
static void check_zip64_fields(const char *python, const char *file)
{
    char cmd[4096], line[256] = "", want[64];
    snprintf(cmd, sizeof cmd,
             "'%s' -c 'import sys, zipfile\n"
             "z = zipfile.ZipFile(sys.argv[1]); i = z.infolist()\n"
             "print(z.testzip(), sum(x.extra[:2] == b\"\\x01\\x00\" for x in i), len(i))' '%s' 2>&1",
             python, file);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    if (!fgets(line, sizeof line, p))
        line[0] = 0;
    pclose(p);
    line[strcspn(line, "\n")] = 0;
    int n = 0, m = -1;
    if (sscanf(line, "None %d %d", &n, &m) != 2 || n != m || m < 8)
        print_message("# zipfile says: %s\n", line);
    snprintf(want, sizeof want, "None %d %d", m, m);
    assert_string_equal(line, want);
}

/* Python's zipfile on a real zip64 file: the big record's size, and zip64
 * extra fields on some entries (the big one and those after it). */
static void check_zip64_fields_some(const char *file)
{
    char cmd[8192], line[256] = "";
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import sys, zipfile\n"
             "z = zipfile.ZipFile(sys.argv[1]); i = z.infolist()\n"
             "print(z.getinfo(i[0].filename.split(\"/\")[0] + \"/data/0\").file_size,"
             " sum(x.extra[:2] == b\"\\x01\\x00\" for x in i) >= 2)' '%s' 2>&1", file);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    if (!fgets(line, sizeof line, p))
        line[0] = 0;
    pclose(p);
    line[strcspn(line, "\n")] = 0;
    assert_string_equal(line, "4294967360 True");
}

/* What tensorkit writes, torch.load(weights_only=True) loads with the
 * same content, in both layouts, in PyTorch 1.13 and 2.x.  With `zip64`,
 * every size and offset from 64 bytes on goes into zip64 fields (as from
 * 4 GiB on in real files), and Python's zipfile must find them. */
static void check_with(const char *python, bool floats, bool zip64)
{
    struct tn_value *v = build_value(floats);
    for (int layout = 0; layout < 2; layout++) {
        char dir[] = "/tmp/test_ckpt.XXXXXX";
        assert_non_null(mkdtemp(dir));
        char out[256];
        snprintf(out, sizeof out, "%s/ours.pt", dir);
        struct tn_save_options so = {.layout = (enum tn_ckpt_layout)layout};
        if (zip64)
            tn__zip64_threshold = 64;
        int rc = tn_save(out, v, &so);
        tn__zip64_threshold = 0xFFFFFFFFu;
        assert_int_equal(rc, 0);
        if (zip64) {
            check_zip64_fields(python, out);
            struct tn_value *back = tn_load(out, NULL); /* our reader too */
            if (!back)
                print_message("# %s\n", tn_last_error());
            assert_non_null(back);
            tn_value_release(back);
        }
        char *js = run_checker(python, out);
        unlink(out);
        rmdir(dir);
        assert_non_null(js);
        json_error_t err;
        json_t *j = json_loads(js, 0, &err);
        if (!j)
            print_message("# not JSON: %.300s\n", js);
        free(js);
        assert_non_null(j);
        struct groups g = {.n = 0};
        assert_int_equal(cmp(v, j, layout ? "ours(1.13 layout)" : "ours(2.x layout)", &g), 0);
        json_decref(j);
    }
    tn_value_release(v);
}

static void test_torch1_loads_ours(void **state)
{
    (void)state;
    if (system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
        TN_TEST_SKIP("Debian's PyTorch 1.13 is not installed");
    /* Not the zip64 variant: 1.13's miniz refuses it with "invalid header
     * or archive is corrupted" (2.x reads it) because, for an entry whose
     * size fits 32 bits, it adds the raw 32-bit header offset (0xFFFFFFFF
     * when the offset is in the zip64 field) to the size and compares that
     * with the file's length, which only a file over 4 GiB passes: 1.13
     * loads test_zip64_real's. */
    check_with("/usr/bin/python3", false, false);
}

/* The Python with PyTorch 2.x in py, or false. */
static bool torch2_python(char *py, size_t cap)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/tests/torch2-python'", TN_SRCDIR);
    FILE *p = popen(cmd, "r");
    py[0] = 0;
    bool ok = p && fgets(py, (int)cap, p);
    if (p && pclose(p) != 0)
        ok = false;
    py[strcspn(py, "\n")] = 0;
    return ok && py[0];
}

static void test_torch2_loads_ours(void **state)
{
    (void)state;
    char py[1024];
    if (!torch2_python(py, sizeof py))
        TN_TEST_SKIP("PyTorch 2.x is not installed (./bootstrap.sh --with-torch2)");
    check_with(py, true, false);
    check_with(py, true, true);
}

/* no_fsync changes when the bytes reach the disk, never which bytes. */
static void test_no_fsync_same_bytes(void **state)
{
    (void)state;
    struct tn_value *v = build_value(true);
    char dir[] = "/tmp/test_ckpt.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/a/m.pt", dir);
    snprintf(b, sizeof b, "%s/b/m.pt", dir);
    char sub[300];
    snprintf(sub, sizeof sub, "%s/a", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(sub, sizeof sub, "%s/b", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    struct tn_save_options fast = {.no_fsync = true};
    assert_int_equal(tn_save(a, v, NULL), 0);
    assert_int_equal(tn_save(b, v, &fast), 0);
    tn_value_release(v);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    int same = system(cmd);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(same, 0);
}

/* More than 65,535 entries need zip64's entry count (the classic end record
 * says 0xFFFF): 70,000 one-element tensors, each its own storage, load in
 * PyTorch 2.x (1.13 where 2.x is missing), in Python's zipfile and in ours,
 * and lie as in torch.save's file of the same content. */
/* A complex64 tensor and a float32 view of part of its storage: the view,
 * which PyTorch could not load as a second type of that storage, is saved
 * with a storage of its own holding just its bytes. */
static void test_shared_storage_two_dtypes(void **state)
{
    (void)state;
    struct tn_tensor *ar = tn_arange(tn_int(0), tn_int(8), tn_int(1), TN_FLOAT32);
    struct tn_tensor *pairs = tn_view(ar, TN_SHAPE(4, 2));
    struct tn_tensor *c = tn_view_as_complex(pairs);
    struct tn_tensor *row = tn_select(pairs, 0, 1);
    struct tn_value *d = tn_value_odict();
    tn_value_set(d, tn_value_str("c"), tn_value_tensor(c));
    tn_value_set(d, tn_value_str("row"), tn_value_tensor(row));
    tn_value_set(d, tn_value_str("again"), tn_value_tensor(row));
    char dir[] = "/tmp/test_ckpt.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char out[256];
    snprintf(out, sizeof out, "%s/two.pt", dir);
    assert_int_equal(tn_save(out, d, NULL), 0);
    struct tn_value *back = tn_load(out, NULL);
    assert_non_null(back);
    struct tn_tensor *bc = tn_value_get(back, "c")->v.tensor;
    struct tn_tensor *br = tn_value_get(back, "row")->v.tensor;
    assert_int_equal(bc->dtype, TN_COMPLEX64);
    assert_int_equal(br->dtype, TN_FLOAT32);
    assert_int_equal(br->storage->nbytes, 2 * sizeof(float));
    assert_true(br->storage != bc->storage);
    assert_true(((float *)tn_data(br))[0] == 2.0f && ((float *)tn_data(br))[1] == 3.0f);
    assert_true(((float *)tn_data(bc))[5] == 5.0f);
    tn_value_release(back);
    tn_value_release(d);
    tn_release(row);
    tn_release(c);
    tn_release(pairs);
    tn_release(ar);
    remove(out);
    rmdir(dir);
}

static void test_many_entries(void **state)
{
    (void)state;
    char py[1024];
    bool torch2 = torch2_python(py, sizeof py);
    if (!torch2) {
        if (system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
            TN_TEST_SKIP("neither PyTorch 2.x nor 1.13 is installed");
        snprintf(py, sizeof py, "/usr/bin/python3");
    }
    enum { N = 70000 };
    struct tn_value *d = tn_value_odict();
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d", i);
        struct tn_tensor *t = tn_full(TN_SHAPE(1), tn_int(i), TN_INT32);
        tn_value_set(d, tn_value_str(name), tn_value_tensor(t));
        tn_release(t);
    }
    char dir[] = "/tmp/test_ckpt.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char out[256], cmd[4096], line[256] = "";
    snprintf(out, sizeof out, "%s/many.pt", dir);
    assert_int_equal(tn_save(out, d, NULL), 0);
    tn_value_release(d);
    struct tn_value *back = tn_load(out, NULL);
    assert_non_null(back);
    assert_int_equal(back->v.dict.n, N);
    tn_value_release(back);
    snprintf(cmd, sizeof cmd,
             "'%s' -c 'import sys, zipfile, torch\n"
             "z = zipfile.ZipFile(sys.argv[1])\n"
             "d = torch.load(sys.argv[1], weights_only=True)\n"
             "print(len(z.infolist()) > 65535, z.testzip(), len(d), "
             "sum(int(v[0]) == int(k[1:]) and v.dtype == torch.int32 for k, v in d.items()), "
             "end=\"\")\n"
             "if sys.argv[2] == \"2\":\n"
             " import collections, os\n"
             " o = os.path.join(os.path.dirname(sys.argv[1]), \"t\", \"many.pt\")\n"
             " os.mkdir(os.path.dirname(o))\n"
             " torch.save(collections.OrderedDict((\"t%%d\" %% i, torch.full((1,), i, dtype=torch.int32)) for i in range(70000)), o)\n"
             " t = zipfile.ZipFile(o); a = open(o, \"rb\").read(); b = open(sys.argv[1], \"rb\").read()\n"
             " same = [(i.filename, i.header_offset) for i in t.infolist()] == [(i.filename, i.header_offset) for i in z.infolist()]\n"
             " same = same and all(t.read(n) == z.read(n) for n in t.namelist() if not n.endswith(\"serialization_id\"))\n"
             " print(\" same\" if same and a[-98:] == b[-98:] and len(a) == len(b) else \" differ\", end=\"\")\n"
             "print()' '%s' %d 2>&1",
             py, out, torch2 ? 2 : 1);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    if (!fgets(line, sizeof line, p))
        line[0] = 0;
    pclose(p);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    line[strcspn(line, "\n")] = 0;
    /* With 2.x, torch.save's own file of the same content has the same
     * members at the same offsets and the same end records (only
     * .data/serialization_id may differ). */
    assert_string_equal(line, torch2 ? "True None 70000 70000 same" : "True None 70000 70000");
}

/* A real zip64 checkpoint: a storage of 4 GiB + 64 bytes, so its size,
 * and the offsets of the records after it, pass 32 bits.  Written without
 * fsync (the bytes stay in the page cache), read back mapped, checked with
 * Python's zipfile, and loaded by PyTorch 2.x (mmap=True) and 1.13 where
 * installed: 1.13's miniz refuses the forced small zip64 files of
 * check_with only because it checks each entry's raw 32-bit offset (0xFFFFFFFF
 * when the offset is in the zip64 field) plus its size against the file's
 * length, which a real file over 4 GiB passes.  Skipped without 12 GiB
 * free in TMPDIR (or /tmp) or with TN_TEST_NO_BIG set. */
static void test_zip64_real(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    struct statvfs fs;
    if (getenv("TN_TEST_NO_BIG"))
        TN_TEST_SKIP("TN_TEST_NO_BIG is set");
    if (statvfs(tmp, &fs) != 0 || (double)fs.f_bavail * (double)fs.f_frsize < 12e9)
        TN_TEST_SKIP("less than 12 GiB free for a 4 GiB checkpoint");
    const int64_t n = ((int64_t)1 << 32) + 64;
    struct tn_tensor *big = tn_zeros(TN_SHAPE(n), TN_UINT8), *small = tn_ones(TN_SHAPE(3), TN_INT64);
    assert_non_null(big);
    unsigned char *d = tn_data(big);
    d[0] = 7;
    d[n - 1] = 9;
    struct tn_value *v = tn_value_dict();
    tn_value_set(v, tn_value_str("big"), tn_value_tensor(big));
    tn_value_set(v, tn_value_str("small"), tn_value_tensor(small));
    tn_release(big);
    tn_release(small);
    char dir[4096], out[4200];
    snprintf(dir, sizeof dir, "%s/test_ckpt_big.XXXXXX", tmp);
    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof out, "%s/big.pt", dir);
    struct tn_save_options so = {.no_fsync = true};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = tn_save(out, v, &so);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    print_message("# 4 GiB saved in %.1f s\n", (double)(t1.tv_sec - t0.tv_sec) +
                  1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    tn_value_release(v);
    if (rc)
        print_message("# %s\n", tn_last_error());
    assert_int_equal(rc, 0);
    struct tn_value *back = tn_load(out, NULL);
    assert_non_null(back);
    struct tn_tensor *b = tn_value_get(back, "big")->v.tensor;
    assert_int_equal(b->sizes[0], n);
    assert_int_equal(((unsigned char *)tn_data(b))[0], 7);
    assert_int_equal(((unsigned char *)tn_data(b))[n - 1], 9);
    assert_int_equal(((int64_t *)tn_data(tn_value_get(back, "small")->v.tensor))[2], 1);
    tn_value_release(back);
    check_zip64_fields_some(out);
    char py[1024], cmd[8192];
    const char *script = "import sys, torch\n"
                         "kw = {\"mmap\": True} if torch.__version__ >= \"2\" else {}\n"
                         "d = torch.load(sys.argv[1], weights_only=True, **kw)\n"
                         "b = d[\"big\"]\n"
                         "print(b.numel(), int(b[0]), int(b[-1]), d[\"small\"].tolist())\n";
    for (int v1 = 0; v1 < 2; v1++) {
        if (v1 ? system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0
               : !torch2_python(py, sizeof py)) {
            print_message("# PyTorch %s is not installed: not loaded there\n", v1 ? "1.13" : "2.x");
            continue;
        }
        snprintf(cmd, sizeof cmd, "'%s' -W ignore -c '%s' '%s' 2>&1", v1 ? "/usr/bin/python3" : py,
                 script, out);
        FILE *p = popen(cmd, "r");
        char line[512] = "";
        if (!p || !fgets(line, sizeof line, p))
            line[0] = 0;
        if (p)
            pclose(p);
        line[strcspn(line, "\n")] = 0;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        print_message("# loaded by PyTorch %s, %.1f s since the save\n", v1 ? "1.13" : "2.x",
                      (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
        assert_string_equal(line, "4294967360 7 9 [1, 1, 1]");
    }
    unlink(out);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_torch1),      cmocka_unit_test(test_load_torch2),
        cmocka_unit_test(test_torch1_allowlist), cmocka_unit_test(test_identical_torch1),
        cmocka_unit_test(test_identical_torch2), cmocka_unit_test(test_torch1_loads_ours),
        cmocka_unit_test(test_torch2_loads_ours), cmocka_unit_test(test_many_entries),
        cmocka_unit_test(test_shared_storage_two_dtypes),
        cmocka_unit_test(test_no_fsync_same_bytes), cmocka_unit_test(test_zip64_real),
    };
    return TN_RUN_TESTS(tests);
}
