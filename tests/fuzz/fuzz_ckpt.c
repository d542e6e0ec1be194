/*
 * tests/fuzz/fuzz_ckpt.c: libFuzzer target for lib/io's untrusted-input
 * readers: the input is tried as a zip checkpoint (zip reader, records,
 * restricted unpickler, storage checks), as a bare data.pkl stream, as
 * a .npy file, and through the scanner (tn_scan_memory, all three policies,
 * small limits so nesting is exercised).
 * Build and run: tests/fuzz/run.sh [SECONDS].
 */
#include <stdlib.h>
#include <string.h>

#include <tensor/tensor.h>

#include "io/internal.h"

static struct tn_storage *fake_storage(const char *key, enum tn_dtype dtype, int64_t numel,
                                       void *ctx)
{
    (void)key;
    (void)ctx;
    if (numel < 0 || numel > 4096)
        return tn_set_error(TN_EFORMAT, "too big"), NULL;
    return tn_storage_new((size_t)numel * tn_dtype_size(dtype), TN_CPU);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    struct tn_zip *z = tn_zip_open_memory(data, size, "fuzz.pt");
    if (z) {
        struct tn_value *v = tn_ckpt_load_zip(z, NULL);
        tn_value_release(v);
        tn_zip_close(z);
    }
    struct tn_pickle_reader_hooks h = {fake_storage, NULL, false, false};
    for (int a = 0; a < 2; a++) {
        struct tn_value *v = tn__pickle_load(data, size, "fuzz.pkl", (enum tn_ckpt_allowlist)a, &h);
        if (v) {
            /* What loads must save. */
            struct tn__bytes out = {0};
            struct tn_pickle_storages st = {0};
            tn__pickle_dump(v, &out, &st);
            free(out.data);
            free(st.s);
            free(st.dtype);
            free(st.off);
            free(st.len);
        }
        tn_value_release(v);
    }
    tn_release(tn_npy_parse(data, size, "fuzz.npy"));
    for (int a = 0; a < 3; a++) { /* torch2, torch1.13, pickle */
        struct tn_scan_options so = {.policy = (enum tn_ckpt_allowlist)a, .max_depth = 3,
                                     .max_entries = 64, .max_expanded = 1 << 20};
        struct tn_scan_report r = {0};
        tn_scan_memory(data, size, "fuzz", &so, &r);
        tn_scan_report_free(&r);
    }
    size_t pos = 0;
    struct tn_pickle_op op;
    while (pos < size && tn__pickle_decode(data, size, &pos, &op, "fuzz") == 0)
        ;
    return 0;
}
