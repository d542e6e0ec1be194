/*
 * tests/fuzz/fuzz_dcp.c: libFuzzer target for a distributed checkpoint's
 * .metadata: the input goes through the restricted machine's DCP mode and
 * every check of tn_dcp_open (chunks, storage entries), with the files it
 * names looked up in the committed two-rank fixture folder (so offsets and
 * lengths meet real files), and each item that opens is read.
 * Build and run: FUZZ_TARGET=dcp tests/fuzz/run.sh [SECONDS].
 */
#include <tensor/tensor.h>
#include <tensor/dcp.h>

#include "io/internal.h"

#ifndef FUZZ_DCP_DIR
#define FUZZ_DCP_DIR "tests/fixtures/dcp/two"
#endif

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    struct tn_dcp *d = tn__dcp_open_memory(data, size, FUZZ_DCP_DIR);
    if (d) {
        tn_value_release(tn_dcp_load_all(d, false));
        tn_dcp_close(d);
    }
    return 0;
}
