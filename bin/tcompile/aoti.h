/*
 * bin/tcompile/aoti.h: tcompile run of PyTorch's AOTInductor packages
 * (aoti.c) and the ELF reading it needs (elf.c).
 */
#ifndef TCOMPILE_AOTI_H
#define TCOMPILE_AOTI_H

#include <stdbool.h>

/* A growable list of strings. */
struct tc_strs {
    char **v;
    int n, cap;
};
void tc_strs_free(struct tc_strs *s);
/* Appends a copy of str: 0 or TN_ENOMEM. */
int tc_strs_push(struct tc_strs *s, const char *str);

/* The DT_NEEDED libraries and the undefined (non-weak) dynamic symbols of
 * the shared library at path, appended to needed and undef. 0 or an
 * error (both lists freed). */
int tc_elf_needs(const char *path, struct tc_strs *needed, struct tc_strs *undef);

/* True when path is a regular file, a zip holding
 * data/aotinductor/<model>/<lib>.so: a package of
 * torch._inductor.aoti_compile_and_package (never reads a pipe). */
bool tc_aoti_is_package(const char *path);
/* tcompile run PACKAGE.pt2: 0, or 2 after printing why. */
int tc_aoti_run(const char *path);
/* tcompile check PACKAGE.pt2: what its model needs that tensorkit lacks,
 * one line each (or JSON), without running any of it: 0 nothing, 1 some,
 * 2 an error. */
int tc_aoti_check(const char *path, bool json);

#endif
