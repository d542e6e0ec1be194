/*
 * bin/tcompile/elf.c: what a shared library asks of the dynamic linker,
 * read from its file without loading it: the libraries it needs
 * (DT_NEEDED) and the symbols it leaves undefined, so that tcompile can
 * name what a package lacks before running any of its code.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tensor/core.h>

#include "aoti.h"

static int bad(const char *path)
{
    return tn_set_error(TN_EFORMAT, "%s: not a 64-bit ELF shared library we can read", path);
}

int tc_strs_push(struct tc_strs *s, const char *str)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        char **v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v)
            return tn_set_error(TN_ENOMEM, "out of memory");
        s->v = v;
        s->cap = cap;
    }
    if (!(s->v[s->n] = strdup(str)))
        return tn_set_error(TN_ENOMEM, "out of memory");
    s->n++;
    return 0;
}

void tc_strs_free(struct tc_strs *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* The string at off in the string table section sh, or NULL out of range. */
static const char *str_at(const unsigned char *b, size_t len, const Elf64_Shdr *sh, uint64_t off)
{
    if (sh->sh_offset > len || sh->sh_size > len - sh->sh_offset || off >= sh->sh_size)
        return NULL;
    const char *s = (const char *)b + sh->sh_offset + off;
    return memchr(s, '\0', sh->sh_size - off) ? s : NULL;
}

static int scan(const unsigned char *b, size_t len, const char *path, struct tc_strs *needed,
                struct tc_strs *undef)
{
    if (len < sizeof(Elf64_Ehdr) || memcmp(b, ELFMAG, SELFMAG) || b[EI_CLASS] != ELFCLASS64)
        return bad(path);
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)b;
    if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > len ||
        (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > len - eh->e_shoff)
        return bad(path);
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(b + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        const Elf64_Shdr *s = &sh[i];
        if (s->sh_type != SHT_DYNSYM && s->sh_type != SHT_DYNAMIC)
            continue;
        if (s->sh_link >= eh->e_shnum || s->sh_offset > len || s->sh_size > len - s->sh_offset)
            return bad(path);
        const Elf64_Shdr *strs = &sh[s->sh_link];
        if (s->sh_type == SHT_DYNAMIC) {
            const Elf64_Dyn *d = (const Elf64_Dyn *)(b + s->sh_offset);
            for (size_t k = 0; k < s->sh_size / sizeof *d && d[k].d_tag != DT_NULL; k++) {
                if (d[k].d_tag != DT_NEEDED)
                    continue;
                const char *name = str_at(b, len, strs, d[k].d_un.d_val);
                if (!name)
                    return bad(path);
                if (tc_strs_push(needed, name) < 0)
                    return tn_last_status();
            }
            continue;
        }
        const Elf64_Sym *sym = (const Elf64_Sym *)(b + s->sh_offset);
        for (size_t k = 1; k < s->sh_size / sizeof *sym; k++) {
            if (sym[k].st_shndx != SHN_UNDEF || ELF64_ST_BIND(sym[k].st_info) == STB_WEAK)
                continue;
            const char *name = str_at(b, len, strs, sym[k].st_name);
            if (!name)
                return bad(path);
            if (*name && tc_strs_push(undef, name) < 0)
                return tn_last_status();
        }
    }
    return 0;
}

int tc_elf_needs(const char *path, struct tc_strs *needed, struct tc_strs *undef)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int rc = tn_set_error(TN_EIO, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    void *m = st.st_size > 0 ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)
                             : MAP_FAILED;
    close(fd);
    if (m == MAP_FAILED)
        return bad(path);
    int rc = scan(m, (size_t)st.st_size, path, needed, undef);
    munmap(m, (size_t)st.st_size);
    if (rc < 0) {
        tc_strs_free(needed);
        tc_strs_free(undef);
    }
    return rc;
}
