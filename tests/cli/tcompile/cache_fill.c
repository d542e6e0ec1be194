/*
 * tests/cli/tcompile/cache_fill.c: fills a compile cache for the tests of
 * `tcompile cache` (tests/cli/tcompile_cache.bats): cache_fill DIR N
 * compiles N small sources ("int fK(void) { return K; }") into the
 * cache DIR through tn__cc_load and prints each entry's library path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>

#include "compile/internal.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fputs("usage: cache_fill DIR N\n", stderr);
        return 2;
    }
    struct tn_compile_options o = {.cache_dir = argv[1]};
    for (int k = 0, n = atoi(argv[2]); k < n; k++) {
        char src[64];
        snprintf(src, sizeof src, "int f%d(void) { return %d; }\n", k, k);
        struct tn__cc_info info;
        void *h = tn__cc_load(src, strlen(src), &o, &info);
        if (!h) {
            fprintf(stderr, "cache_fill: %s\n", tn_last_error());
            return 2;
        }
        printf("%s\n", info.so_path);
        dlclose(h);
    }
    return 0;
}
