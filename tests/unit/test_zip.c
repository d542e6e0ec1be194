/*
 * test_zip: the zip reader on archives other writers make (Python's
 * zipfile: deflated, unaligned, another folder name), the writer's layout
 * (64-byte aligned data, CRCs, read back), and corrupt archives (every
 * truncation and many byte flips of a real checkpoint) failing cleanly.
 */
#include "tn_test.h"

#include "io/internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *fixture_path(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/tests/fixtures/io/%s", TN_SRCDIR, name);
    return buf;
}

struct list {
    char *items[64];
    int n;
};

static int collect(const char *path, struct tn_tensor *t, void *ctx)
{
    struct list *l = ctx;
    char *hex = tn_test_hex(t);
    size_t n = strlen(path) + strlen(hex) + 2;
    l->items[l->n] = malloc(n);
    snprintf(l->items[l->n++], n, "%s=%s", path, hex);
    free(hex);
    return 0;
}

/* PyTorch's own checkpoint rewritten by Python's zipfile (deflated, under
 * other/) loads with the same tensors, as it does in PyTorch. */
static void test_deflated(void **state)
{
    (void)state;
    json_t *fx = tn_test_fixture("../io/bad");
    assert_string_equal(json_string_value(json_object_get(json_object_get(fx, "deflated"), "torch2")),
                        "ok");
    json_decref(fx);
    struct tn_zip *z = tn_zip_open(fixture_path("deflated.pt"));
    assert_non_null(z);
    assert_int_equal(tn_zip_entry_at(z, 0)->method, 8);
    assert_null(tn_zip_data(z, 0));
    tn_zip_close(z);
    struct tn_value *a = tn_load(fixture_path("deflated.pt"), NULL);
    struct tn_value *b = tn_load(fixture_path("module_2.pt"), NULL);
    assert_non_null(a);
    assert_non_null(b);
    struct list la = {.n = 0}, lb = {.n = 0};
    tn_value_walk_tensors(a, collect, &la);
    tn_value_walk_tensors(b, collect, &lb);
    assert_int_equal(la.n, lb.n);
    assert_true(la.n > 0);
    for (int i = 0; i < la.n; i++) {
        assert_string_equal(la.items[i], lb.items[i]);
        free(la.items[i]);
        free(lb.items[i]);
    }
    tn_value_release(a);
    tn_value_release(b);
}

static void test_writer_layout(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_zip.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/x.zip", dir);
    struct tn_zip_writer *w = tn_zip_writer_open(path, 64);
    assert_non_null(w);
    static unsigned char big[10000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)(i * 7);
    size_t sizes[] = {0, 1, 63, 64, 10000};
    char name[32];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "x/member_%d", i);
        assert_int_equal(tn_zip_writer_add(w, name, big, sizes[i]), 0);
    }
    /* Nothing is at the target until finish renames the temporary file. */
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_equal(tn_zip_writer_finish(w), 0);
    struct tn_zip *z = tn_zip_open(path);
    assert_non_null(z);
    assert_int_equal(tn_zip_count(z), 5);
    for (int i = 0; i < 5; i++) {
        const struct tn_zip_entry *e = tn_zip_entry_at(z, (size_t)i);
        assert_int_equal(e->data_offset % 64, 0);
        assert_int_equal(e->size, sizes[i]);
        assert_int_equal(e->crc, tn__io_crc32(0, big, sizes[i]));
        assert_memory_equal(tn_zip_data(z, (size_t)i), big, sizes[i]);
    }
    tn_zip_close(z);
    unlink(path);
    rmdir(dir);
}

/* The CRC-32 (carry-less multiplication where the processor has it, zlib's
 * tables for the rest) equals the bitwise definition at every length 0..300
 * and every start 0..15 (the fast path's 64-byte blocks, 16-byte blocks
 * and tail), continued across pieces, and over 1 MiB. */
static uint32_t crc_bitwise(uint32_t crc, const unsigned char *p, size_t n)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1)));
    }
    return ~crc;
}

static void test_crc32(void **state)
{
    (void)state;
    size_t n = (size_t)1 << 20;
    unsigned char *b = malloc(n + 16);
    assert_non_null(b);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n + 16; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b[i] = (unsigned char)x;
    }
    for (size_t at = 0; at < 16; at++)
        for (size_t len = 0; len <= 300; len++)
            assert_int_equal(tn_zip_crc32(0, b + at, len), crc_bitwise(0, b + at, len));
    uint32_t whole = crc_bitwise(0, b + 3, n);
    assert_int_equal(tn_zip_crc32(0, b + 3, n), whole);
    uint32_t c = tn_zip_crc32(0, b + 3, 1000);
    c = tn_zip_crc32(c, b + 1003, 77);
    assert_int_equal(tn_zip_crc32(c, b + 1080, n - 1077), whole);
    assert_int_equal(tn_zip_crc32(0, "123456789", 9), 0xCBF43926u);
    free(b);
}

/* Every truncation and many single-byte changes of a real checkpoint load
 * or fail with a message, never crash (run under the sanitizers in CI). */
static void test_corrupt(void **state)
{
    (void)state;
    size_t len;
    unsigned char *orig = tn_test_slurp(fixture_path("module_2.pt"), &len);
    unsigned char *buf = malloc(len);
    int failures = 0;
    for (size_t cut = 0; cut < len; cut += 3) {
        memcpy(buf, orig, cut);
        struct tn_zip *z = tn_zip_open_memory(buf, cut, "cut");
        struct tn_value *v = z ? tn_ckpt_load_zip(z, NULL) : NULL;
        if (!v) {
            failures++;
            assert_true(strlen(tn_last_error()) > 0);
        }
        tn_value_release(v);
        tn_zip_close(z);
    }
    assert_true(failures > 0);
    uint64_t seed = 12345;
    for (int k = 0; k < 3000; k++) {
        memcpy(buf, orig, len);
        for (int j = 0; j < 3; j++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(seed >> 33) % len;
            buf[at] = (unsigned char)(seed >> 20);
        }
        struct tn_zip *z = tn_zip_open_memory(buf, len, "flip");
        struct tn_value *v = z ? tn_ckpt_load_zip(z, NULL) : NULL;
        tn_value_release(v);
        tn_zip_close(z);
    }
    free(buf);
    free(orig);
}

/* Every size and offset through zip64 extra fields and end records, as in
 * a checkpoint over 4 GiB; Python's zipfile read the same bytes. */
static void test_zip64(void **state)
{
    (void)state;
    json_t *fx = tn_test_fixture("../io/bad");
    json_t *want = json_object_get(fx, "zip64_small");
    struct tn_zip *z = tn_zip_open(fixture_path("zip64_small.zip"));
    if (!z)
        print_message("# %s\n", tn_last_error());
    assert_non_null(z);
    assert_int_equal(tn_zip_count(z), 1);
    const struct tn_zip_entry *e = tn_zip_entry_at(z, 0);
    assert_string_equal(e->name, json_string_value(json_object_get(want, "name")));
    const char *hex = json_string_value(json_object_get(want, "hex"));
    assert_int_equal(e->size, strlen(hex) / 2);
    const unsigned char *d = tn_zip_data(z, 0);
    char got[256] = "";
    for (size_t i = 0; i < e->size && i < 100; i++)
        snprintf(got + 2 * i, 3, "%02x", d[i]);
    assert_string_equal(got, hex);
    assert_int_equal(e->crc, tn_zip_crc32(0, d, e->size));
    tn_zip_close(z);
    json_decref(fx);
}

static void test_not_zip(void **state)
{
    (void)state;
    static const char junk[] = "hello, this is not a zip archive at all........";
    assert_null(tn_zip_open_memory(junk, sizeof junk, "junk.pt"));
    assert_string_equal(tn_last_error(), "junk.pt: not a zip archive (no end of central directory)");
    assert_null(tn_load("/nonexistent/file.pt", NULL));
    assert_string_equal(tn_last_error(), "/nonexistent/file.pt: No such file or directory");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deflated),
        cmocka_unit_test(test_writer_layout),
        cmocka_unit_test(test_crc32),
        cmocka_unit_test(test_corrupt),
        cmocka_unit_test(test_zip64),
        cmocka_unit_test(test_not_zip),
    };
    return TN_RUN_TESTS(tests);
}
