/*
 * compile/explain.c: a program in words, for tcompile --explain (as
 * TORCH_LOGS=output_code shows Inductor's): each kernel with the graph
 * nodes fused into it and its loop space, each step left to libtensor and
 * why, and where the generated C and the library are.
 */
#include "compile/internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *tn__explain(const struct tn__cprog *P, const struct tn__cc_info *info)
{
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    if (!f) {
        tn_set_error(TN_ENOMEM, "out of memory");
        return NULL;
    }
    int nk = 0, ne = 0;
    for (int i = 0; i < P->nsteps; i++)
        P->steps[i].kind == TN_STEP_KERNEL ? nk++ : ne++;
    fprintf(f, "%s: %d node%s: %d fused into %d kernel%s, %d step%s through libtensor\n",
            P->g->label, P->g->nnodes, P->g->nnodes == 1 ? "" : "s", P->nfused, nk,
            nk == 1 ? "" : "s", ne, ne == 1 ? "" : "s");
    for (int i = 0; i < P->nsteps; i++) {
        const struct tn__step *st = &P->steps[i];
        if (st->kind == TN_STEP_KERNEL) {
            const struct tn__stage *sg = &P->stages[st->stage0];
            static const char *const what[] = {"sum", "max", "min"};
            fprintf(f, "  kernel tn_k%d: ", i);
            for (int k = st->stage0; k < st->stage0 + st->nstages; k++) {
                const struct tn__stage *x = &P->stages[k];
                fprintf(f, "%s%s%s", k > st->stage0 ? ", " : "",
                        x->red < 0 ? "pointwise" : what[x->red],
                        P->bufs[x->buf].private_ ? " (kept in the kernel)" : "");
            }
            fprintf(f, " over [");
            for (int d = 0; d < sg->nd; d++)
                fprintf(f, "%s%" PRId64 "%s", d ? ", " : "", sg->sizes[d],
                        d >= sg->nd - sg->nred ? "r" : "");
            fprintf(f, "] %s: %s\n", tn_dtype_name(P->bufs[sg->buf].dt), st->label);
        } else if (st->kind == TN_STEP_MATMUL) {
            fprintf(f, "  extern %s ", st->args[0].nd > 2 ? "bmm" : "mm");
            for (int k = 0; k < 2; k++)
                for (int d = 0; d < st->args[k].nd; d++)
                    fprintf(f, "%s%" PRId64 "%s", d ? ", " : k ? " x [" : "[",
                            st->args[k].sizes[d], d == st->args[k].nd - 1 ? "]" : "");
            fprintf(f, ": %s (epilogue fused into the next kernel)\n", st->label);
        } else {
            fprintf(f, "  extern %s: %s: %s\n", P->g->nodes[st->node].op->qualname, st->label,
                    st->why);
        }
    }
    if (P->temp_bytes)
        fprintf(f, "  memory: %lld bytes of temporaries in an arena of %lld (reused by "
                "liveness)\n", (long long)P->temp_bytes, (long long)P->arena_bytes);
    if (info && info->c_path[0])
        fprintf(f, "  generated C: %s\n  library: %s%s\n", info->c_path, info->so_path,
                info->hit ? " (from the cache)" : "");
    if (fclose(f) != 0 || !s) {
        free(s);
        tn_set_error(TN_ENOMEM, "out of memory");
        return NULL;
    }
    return s;
}
