/*
 * lib/dist/dcp.c: tn_dcp_save, a distributed checkpoint written by every
 * rank of a process group at once, in PyTorch's DCP format: lib/io's
 * steps (io/dcp_write.c) run on each rank, and after each step the ranks
 * agree (an allreduce of "it worked") before the next, so a rank that
 * fails or dies stops the save on every rank and the previous checkpoint
 * stays whole; rank 0 writes .metadata last and renames the folder in.
 */
#include "dist/internal.h"
#include "io/internal.h"

#include <tensor/dcp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether every rank's step worked (MIN over the ranks of ok).  A failed
 * collective counts as a failure with its own message. */
static int agree(struct tn_pg *pg, int rc, const char *dir, const char *step)
{
    char mine[512];
    snprintf(mine, sizeof mine, "%s", rc ? tn_last_error() : "");
    struct tn_tensor *t = tn_full(TN_SHAPE(1), tn_int(rc ? 0 : 1), TN_INT32);
    if (!t)
        return tn_last_status();
    int c = tn_pg_allreduce(pg, t, TN_REDUCE_MIN);
    int ok = c == 0 && ((const int32_t *)tn_data(t))[0] == 1;
    tn_release(t);
    if (c != 0)
        return tn_set_error(TN_EIO, "%s: the ranks could not agree after %s: %s", dir, step,
                            tn_last_error());
    if (ok)
        return 0;
    if (rc)
        return tn_set_error((enum tn_status)rc, "%s", mine);
    return tn_set_error(TN_EIO, "%s: another rank failed while %s; nothing was saved", dir, step);
}

int tn_dcp_save(const char *dir, const struct tn_dcp_shard *shards, size_t n, struct tn_pg *pg)
{
    int rank = tn_pg_rank(pg), world = tn_pg_size(pg);
    char *tmp = tn__dcp_tmp_name(dir);
    int rc = tmp ? 0 : tn_last_status();
    bool began = false;
    if (!rc && rank == 0)
        began = (rc = tn__dcp_begin(dir, tmp)) == 0;
    rc = agree(pg, rc, dir, "making the temporary folder");
    if (!rc)
        rc = agree(pg, tn__dcp_write_shards(tmp, rank, world, shards, n), dir,
                   "writing the shards");
    if (!rc)
        rc = agree(pg, rank == 0 ? tn__dcp_finish(tmp, dir, world) : 0, dir,
                   "writing .metadata");
    if (rc && began) {
        /* every rank is past its writes (or gone): the partial folder goes */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tn_last_error());
        tn__dcp_discard(tmp);
        tn_set_error((enum tn_status)rc, "%s", msg);
    }
    free(tmp);
    return rc;
}
