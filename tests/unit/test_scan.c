/*
 * test_scan: the checkpoint auditor (lib/io/scan.c) over the adversarial
 * corpus tests/fixtures/scan/ (scan_corpus.py records every case's class,
 * severity, global and anomaly in manifest.json), the benign controls
 * (real PyTorch checkpoints of tests/fixtures/io, safetensors, npz, and a
 * 20,000-tensor checkpoint) that must come out with zero findings, every
 * limit (memo, marks, stack, declared lengths, depth, entries, expanded
 * size) giving a bounded and reported result, and the loader refusing what
 * the scanner flags.
 */
#include "tn_test.h"

#include "io/internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static char *path_of(const char *dir, const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/tests/fixtures/%s/%s", TN_SRCDIR, dir, name);
    return buf;
}

static int sev_of(const char *s)
{
    return !strcmp(s, "dangerous") ? TN_SCAN_DANGEROUS : !strcmp(s, "unknown") ? TN_SCAN_UNKNOWN
           : !strcmp(s, "suspicious") ? TN_SCAN_SUSPICIOUS : 0;
}

static int top_severity(const struct tn_scan_report *r)
{
    int top = 0;
    for (size_t i = 0; i < r->n; i++)
        if ((int)r->f[i].severity > top)
            top = (int)r->f[i].severity;
    return top;
}

static bool has_global(const struct tn_scan_report *r, const char *g, int sev)
{
    for (size_t i = 0; i < r->n; i++) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s.%s", r->f[i].module, r->f[i].name);
        if (!strcmp(buf, g) && (int)r->f[i].severity == sev)
            return true;
    }
    return false;
}

static bool has_reason(const struct tn_scan_report *r, const char *reason)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->f[i].reason, reason))
            return true;
    return false;
}

static void dump(const char *file, const struct tn_scan_report *r)
{
    print_message("# %s:%s%s\n", file, r->incomplete ? " incomplete: " : "",
                  r->error ? r->error : "");
    for (size_t i = 0; i < r->n; i++)
        print_message("#   %s@%llu %s %s.%s (%s) [%s]\n", r->f[i].entry,
                      (unsigned long long)r->f[i].offset, tn_scan_severity_name(r->f[i].severity),
                      r->f[i].module, r->f[i].name, tn_scan_use_name(r->f[i].use), r->f[i].reason);
}

/* Every corpus case: its strongest severity, its global, its anomaly. */
static void test_corpus(void **state)
{
    (void)state;
    json_error_t err;
    json_t *m = json_load_file(path_of("scan", "manifest.json"), 0, &err);
    assert_non_null(m);
    assert_true(json_array_size(m) >= 60);
    int bad = 0;
    size_t i;
    json_t *c;
    json_array_foreach(m, i, c) {
        const char *file = json_string_value(json_object_get(c, "file"));
        const char *sev = json_string_value(json_object_get(c, "severity"));
        const char *g = json_string_value(json_object_get(c, "global"));
        const char *reason = json_string_value(json_object_get(c, "reason"));
        struct tn_scan_report r = {0};
        assert_int_equal(tn_scan_file(path_of("scan", file), NULL, &r), 0);
        bool ok;
        if (!strcmp(sev, "incomplete"))
            ok = r.n == 0 && r.incomplete;
        else if (!strcmp(sev, "clean"))
            ok = r.n == 0 && !r.incomplete;
        else
            ok = top_severity(&r) == sev_of(sev) && (!g || has_global(&r, g, sev_of(sev))) &&
                 (!reason || has_reason(&r, reason));
        if (!ok) {
            print_message("# %s: expected %s %s %s\n", file, sev, g ? g : "-", reason ? reason : "-");
            dump(file, &r);
            bad++;
        }
        /* The loader refuses every raw pickle the scanner flags (a
         * loader reads the first of stacked pickles only). */
        size_t l = strlen(file);
        if (r.n && l > 4 && !strcmp(file + l - 4, ".pkl") && !has_reason(&r, "trailing-data")) {
            size_t len;
            unsigned char *b = tn_test_slurp(path_of("scan", file), &len);
            for (int a = 0; a < 2; a++) {
                struct tn_value *v = tn__pickle_load(b, len, file, (enum tn_ckpt_allowlist)a, NULL);
                if (v) {
                    print_message("# %s: the loader accepts what the scanner flags\n", file);
                    bad++;
                }
                tn_value_release(v);
            }
            free(b);
        }
        tn_scan_report_free(&r);
    }
    json_decref(m);
    assert_int_equal(bad, 0);
}

/* Real checkpoints and arrays: zero findings, complete. */
static void test_benign(void **state)
{
    (void)state;
    static const char *const files[] = {
        "dtypes_1.pt", "dtypes_2.pt", "many_1.pt", "many_2.pt", "module_1.pt", "module_2.pt",
        "nested_1.pt", "nested_2.pt", "noncontig_1.pt", "noncontig_2.pt", "optim_1.pt",
        "optim_2.pt", "param_1.pt", "param_2.pt", "views_1.pt", "views_2.pt", "deflated.pt",
        "tensors.npz", "tensors_deflated.npz", "tensors.safetensors", "tensors_fortran.npy",
    };
    int bad = 0;
    for (int pol = 0; pol < 2; pol++)
        for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
            /* PyTorch 2's files may use what only 2.x allows; 1.13's own
             * weights_only refuses its nested_1.pt and optim_1.pt (their
             * floats are BINFLOAT): tckpt_scan_policy.bats checks those
             * against 1.13 live */
            if (pol == 1 && (strstr(files[i], "_2.") || !strcmp(files[i], "nested_1.pt") ||
                             !strcmp(files[i], "optim_1.pt")))
                continue;
            struct tn_scan_options o = {.policy = (enum tn_ckpt_allowlist)pol};
            struct tn_scan_report r = {0};
            assert_int_equal(tn_scan_file(path_of("io", files[i]), &o, &r), 0);
            if (r.n || r.incomplete) {
                dump(files[i], &r);
                bad++;
            }
            tn_scan_report_free(&r);
        }
    assert_int_equal(bad, 0);
}

/* 20,000 tensors through tn_save (torch.save's layout): clean, quickly. */
static void test_many_tensors(void **state)
{
    (void)state;
    struct tn_value *d = tn_value_odict();
    for (int i = 0; i < 20000; i++) {
        char k[32];
        snprintf(k, sizeof k, "layer.%d.weight", i);
        int64_t shape[1] = {2};
        struct tn_tensor *t = tn_zeros(shape, 1, TN_FLOAT32);
        assert_non_null(t);
        assert_int_equal(tn_value_set(d, tn_value_str(k), tn_value_tensor(t)), 0);
        tn_release(t);
    }
    char path[] = "/tmp/test_scan_manyXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(tn_save(path, d, NULL), 0);
    tn_value_release(d);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    struct tn_scan_report r = {0};
    assert_int_equal(tn_scan_file(path, NULL, &r), 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    print_message("# 20,000 tensors scanned in %.3f s\n", s);
    if (r.n || r.incomplete)
        dump(path, &r);
    assert_int_equal(r.n, 0);
    assert_false(r.incomplete);
    tn_scan_report_free(&r);
    unlink(path);
}

static double scan_timed(const void *b, size_t len, const struct tn_scan_options *o,
                         struct tn_scan_report *r)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(tn_scan_memory(b, len, "limit", o, r), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

/* Each limit ends the scan within a bounded time, reported, never clean. */
static void expect_limit(const void *b, size_t len, const struct tn_scan_options *o,
                         const char *reason)
{
    struct tn_scan_report r = {0};
    double s = scan_timed(b, len, o, &r);
    if (!has_reason(&r, reason))
        dump(reason, &r);
    assert_true(has_reason(&r, reason));
    assert_true(r.n > 0);
    assert_true(s < 20.0);
    tn_scan_report_free(&r);
}

static void test_limits(void **state)
{
    (void)state;
    /* memo: more entries than the scanner keeps */
    size_t n = (1u << 20) + 8;
    unsigned char *b = malloc(n * 5 + 16), *p = b;
    *p++ = 0x80;
    *p++ = 4;
    *p++ = 'N';
    for (size_t i = 0; i < n; i++) {
        *p++ = 'r';
        uint32_t k = (uint32_t)i;
        memcpy(p, &k, 4); /* little-endian hosts */
        p += 4;
    }
    *p++ = '.';
    expect_limit(b, (size_t)(p - b), NULL, "memo-limit");
    free(b);
    /* marks nested past the limit */
    n = (1u << 20) + 8;
    b = malloc(n + 4);
    b[0] = 0x80;
    b[1] = 2;
    memset(b + 2, '(', n);
    b[n + 2] = '.';
    expect_limit(b, n + 3, NULL, "mark-limit");
    free(b);
    /* the stack */
    n = (1u << 20) + 8;
    b = malloc(n + 4);
    b[0] = 0x80;
    b[1] = 2;
    memset(b + 2, 'N', n);
    b[n + 2] = '.';
    expect_limit(b, n + 3, NULL, "stack-limit");
    free(b);
    /* declared lengths of 2^62 */
    static const unsigned char big[] = {0x80, 4, 0x8e, 0, 0, 0, 0, 0, 0, 0, 0x40, 'a', '.'};
    expect_limit(big, sizeof big, NULL, "truncated");
    static const unsigned char frame[] = {0x80, 4, 0x95, 0, 0, 0, 0, 0, 0, 0, 0x40, 'N', '.'};
    expect_limit(frame, sizeof frame, NULL, "frame-length");
    /* archive nesting, entries, expanded size */
    size_t len;
    unsigned char *z = tn_test_slurp(path_of("scan", "cov_nested_zip.zip"), &len);
    struct tn_scan_options o = {.max_depth = 1};
    expect_limit(z, len, &o, "depth-limit");
    o = (struct tn_scan_options){.max_entries = 1};
    free(z);
    z = tn_test_slurp(path_of("scan", "cov_torchscript.pt"), &len);
    expect_limit(z, len, &o, "entry-limit");
    o = (struct tn_scan_options){.max_expanded = 4};
    expect_limit(z, len, &o, "expanded-size-limit");
    free(z);
    z = tn_test_slurp(path_of("scan", "limit_depth.zip"), &len);
    expect_limit(z, len, NULL, "depth-limit");
    free(z);
}

/* A compressed stream (gzip, zlib) is inflated only up to the expanded-
 * size limit: a bomb stops there, reported and incomplete; under the limit
 * the payload inside is found. */
static void test_stream_bomb(void **state)
{
    (void)state;
    size_t n = 1u << 20;
    unsigned char *zeros = calloc(n, 1), *out = malloc(n);
    for (int wbits = 15; wbits <= 31; wbits += 16) { /* zlib, then gzip */
        z_stream z = {0};
        assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY), Z_OK);
        z.next_in = zeros;
        z.avail_in = (uInt)n;
        z.next_out = out;
        z.avail_out = (uInt)n;
        assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
        size_t len = n - z.avail_out;
        deflateEnd(&z);
        struct tn_scan_options o = {.max_expanded = 65536};
        expect_limit(out, len, &o, "expanded-size-limit");
        struct tn_scan_report r = {0};
        assert_int_equal(tn_scan_memory(out, len, "bomb", &o, &r), 0);
        assert_true(r.incomplete);
        tn_scan_report_free(&r);
    }
    /* a payload inside a zlib stream */
    static const unsigned char evil[] = "\x80\x02" "cposix\nsystem\nX\x02\x00\x00\x00" "id\x85R.";
    uLongf zl = (uLongf)n;
    assert_int_equal(compress(out, &zl, evil, sizeof evil - 1), Z_OK);
    struct tn_scan_report r = {0};
    assert_int_equal(tn_scan_memory(out, zl, "z", NULL, &r), 0);
    assert_true(has_global(&r, "posix.system", TN_SCAN_DANGEROUS));
    tn_scan_report_free(&r);
    free(zeros);
    free(out);
}

/* Inputs the fuzz target once crashed on (tests/fixtures/scan_fuzz): a zip
 * member flagged encrypted, stored, whose size is past its compressed size
 * near the end of the file (read past the buffer before).  They must scan
 * to a verdict; AddressSanitizer builds check the reads. */
static void test_fuzz_regressions(void **state)
{
    (void)state;
    size_t len;
    unsigned char *b = tn_test_slurp(path_of("scan_fuzz", "zip_encrypted_stored_sizes.zip"), &len);
    struct tn_scan_report r = {0};
    assert_int_equal(tn_scan_memory(b, len, "fuzz", NULL, &r), 0);
    assert_true(r.incomplete);
    assert_true(r.n > 0);
    tn_scan_report_free(&r);
    free(b);
}

/* Every global is reported once, however often and however far apart the
 * pickle names it: 300 distinct globals, then all of them again. */
static void test_dedup(void **state)
{
    (void)state;
    enum { NG = 300 };
    char *b = malloc(2 * NG * 32 + 8), *p = b;
    *p++ = (char)0x80;
    *p++ = 2;
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < NG; i++)
            p += sprintf(p, "cmylib%d\nf\n0", i); /* GLOBAL, POP */
    *p++ = 'N';
    *p++ = '.';
    struct tn_scan_report r = {0};
    assert_int_equal(tn_scan_memory(b, (size_t)(p - b), "dedup", NULL, &r), 0);
    assert_false(r.incomplete);
    assert_int_equal(r.n, NG);
    for (size_t i = 0; i < r.n; i++) {
        char want[32];
        snprintf(want, sizeof want, "mylib%zu", i);
        assert_string_equal(r.f[i].module, want);
        assert_int_equal(r.f[i].severity, TN_SCAN_UNKNOWN);
    }
    tn_scan_report_free(&r);
    free(b);
}

/* Memo indices: a sparse one (hashed) stays found after the dense ones
 * grow the directly indexed array over it. */
static void test_memo_sparse(void **state)
{
    (void)state;
    unsigned char *b = malloc(8 * 2100 + 32), *p = b;
    uint32_t k = 3000;
    *p++ = 0x80;
    *p++ = 2;
    *p++ = 'N';
    *p++ = 'r'; /* LONG_BINPUT 3000, before the array covers it */
    memcpy(p, &k, 4);
    p += 4;
    *p++ = '0';
    for (k = 0; k < 2100; k++) {
        *p++ = 'N';
        *p++ = 'r';
        memcpy(p, &k, 4);
        p += 4;
        *p++ = '0';
    }
    k = 3000;
    *p++ = 'j'; /* LONG_BINGET 3000 */
    memcpy(p, &k, 4);
    p += 4;
    *p++ = '.';
    struct tn_scan_report r = {0};
    assert_int_equal(tn_scan_memory(b, (size_t)(p - b), "memo", NULL, &r), 0);
    if (r.n)
        dump("memo", &r);
    assert_int_equal(r.n, 0);
    assert_false(r.incomplete);
    tn_scan_report_free(&r);
    free(b);
}

/* The policy, the Py2 names and --allow. */
static void test_policy(void **state)
{
    (void)state;
    struct tn_scan_options t2 = {0}, t1 = {.policy = TN_ALLOW_TORCH1};
    assert_int_equal(tn_scan_global_severity("collections", "OrderedDict", 2, &t2), 0);
    assert_int_equal(tn_scan_global_severity("torch._utils", "_rebuild_tensor_v2", 2, &t1), 0);
    assert_int_equal(tn_scan_global_severity("__builtin__", "set", 2, &t2), 0);
    assert_int_equal(tn_scan_global_severity("__builtin__", "set", 3, &t2), TN_SCAN_UNKNOWN);
    assert_int_equal(tn_scan_global_severity("__builtin__", "eval", 3, &t2), TN_SCAN_DANGEROUS);
    assert_int_equal(tn_scan_global_severity("__builtin__", "eval", 2, &t1), TN_SCAN_DANGEROUS);
    assert_int_equal(tn_scan_global_severity("builtins", "set", 2, &t1), TN_SCAN_UNKNOWN);
    assert_int_equal(tn_scan_global_severity("__builtin__", "eval", 2, &t2), TN_SCAN_DANGEROUS);
    assert_int_equal(tn_scan_global_severity("mylib", "Net", 2, &t2), TN_SCAN_UNKNOWN);
    /* the reviewed list (scan.c): code, files, the EXT table and getattr
     * chains are dangerous; list builders, partial and BytesIO unknown */
    static const struct {
        const char *mod, *name;
        int sev;
    } reviewed[] = {
        {"torch.jit._pickle", "build_intlist", TN_SCAN_UNKNOWN},
        {"torch.jit", "load", TN_SCAN_DANGEROUS},
        {"functools", "partial", TN_SCAN_UNKNOWN},
        {"io", "BytesIO", TN_SCAN_UNKNOWN},
        {"io", "open", TN_SCAN_DANGEROUS},
        {"_io", "FileIO", TN_SCAN_DANGEROUS},
        {"operator", "attrgetter", TN_SCAN_DANGEROUS},
        {"copyreg", "add_extension", TN_SCAN_DANGEROUS},
    };
    for (size_t i = 0; i < sizeof reviewed / sizeof reviewed[0]; i++)
        assert_int_equal(tn_scan_global_severity(reviewed[i].mod, reviewed[i].name, 2, &t2),
                         reviewed[i].sev);
    assert_false(tn_scan_allow_ok("os.system"));
    assert_false(tn_scan_allow_ok("posix.system"));
    assert_false(tn_scan_allow_ok("nt.system"));
    assert_false(tn_scan_allow_ok("sys.modules"));
    assert_false(tn_scan_allow_ok("subprocess.run"));
    assert_false(tn_scan_allow_ok("builtins.eval"));
    assert_false(tn_scan_allow_ok("builtins.exec"));
    assert_false(tn_scan_allow_ok("nodot"));
    assert_true(tn_scan_allow_ok("mylib.models.Net"));
    const char *allow[] = {"mylib.models.Net", "os.system"};
    struct tn_scan_options o = {.allow = allow, .nallow = 2};
    assert_int_equal(tn_scan_global_severity("mylib.models", "Net", 2, &o), 0);
    assert_int_equal(tn_scan_global_severity("os", "system", 2, &o), TN_SCAN_DANGEROUS);
    struct tn_scan_report r = {0};
    assert_int_equal(tn_scan_file(path_of("scan", "deny_mylib_models_Net.pkl"), &o, &r), 0);
    assert_int_equal(r.n, 0);
    assert_false(r.incomplete);
    tn_scan_report_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus),
        cmocka_unit_test(test_benign),
        cmocka_unit_test(test_many_tensors),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_stream_bomb),
        cmocka_unit_test(test_fuzz_regressions),
        cmocka_unit_test(test_dedup),
        cmocka_unit_test(test_memo_sparse),
        cmocka_unit_test(test_policy),
    };
    return TN_RUN_TESTS(tests);
}
