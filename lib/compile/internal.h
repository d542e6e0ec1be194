/*
 * compile/internal.h: what lib/compile's files share.
 *
 * The pipeline: lower.c turns a checked graph, specialised on its inputs'
 * metadata, into loop-level IR (struct tn__cprog: buffers, kernels whose
 * stages evaluate expression trees over affine loads, and extern steps run
 * through the dispatcher); codegen.c writes the kernels as C; cc.c
 * compiles and caches them; exec.c runs a program.
 */
#ifndef TN_COMPILE_INTERNAL_H
#define TN_COMPILE_INTERNAL_H

#include <config.h>

#include <stdint.h>
#include <stdio.h>

#include <tensor/compile.h>

/* ---------------------------------------------------------------- hashing */

struct tn__sha256 {
    uint32_t h[8];
    uint64_t len;
    unsigned char buf[64];
    size_t nbuf;
};
void tn__sha256_init(struct tn__sha256 *s);
void tn__sha256_update(struct tn__sha256 *s, const void *p, size_t n);
void tn__sha256_final(struct tn__sha256 *s, unsigned char out[32]);
/* hex of SHA-256(p, n) into hex (65 bytes with the NUL) */
void tn__sha256_hex(const void *p, size_t n, char hex[65]);

/* ------------------------------------------------ compiling and the cache */

struct tn__cc_info {
    bool hit;              /* found in the cache, nothing compiled */
    double cc_s;           /* seconds the C compiler ran (0 on a hit) */
    char key[65];          /* the entry's key */
    char c_path[4096];     /* the generated C in the cache */
    char so_path[4096];    /* the library in the cache */
};

/* A dlopen handle (RTLD_NOW | RTLD_LOCAL) for the library built from the
 * C source src (len bytes). The key is SHA-256 over the source, the
 * compiler's identity (its path and `--version` text), the flags (which
 * name the CPU through -march=native: the CPU's model and feature flags go
 * in too), tensorkit's version and the cache format's version. An entry
 * is looked up in the cache (opts->cache_dir, tn_compile_cache_dir) and
 * loaded when it is whole and ours; otherwise src is compiled by the C
 * compiler in a child process (killed past opts->cc_timeout) into a
 * temporary and renamed in, with the source and a manifest beside it.
 * Returns NULL with an error in words: no compiler ("cc: not found"), its
 * first error line, a timeout, a cache folder refused and why. */
void *tn__cc_load(const char *src, size_t len, const struct tn_compile_options *opts,
                  struct tn__cc_info *info);

/* Copies the entry's kernel.c, kernel.so and manifest.json into dir
 * (created when missing). */
int tn__cc_export(const struct tn__cc_info *info, const char *dir);

#endif
