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

#include <pthread.h>
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

/* Contract in tensor/dcp.h: every rank of pg runs begin (rank 0), its
 * shards, then .metadata and the rename (rank 0), agreeing after each step
 * so that one rank's failure fails all and leaves the old checkpoint whole.
 * Shards are borrowed.  0 or an error (the failing rank keeps its own). */
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
        rc = agree(pg, rank == 0 ? tn__dcp_finish(tmp, dir, world, true) : 0, dir,
                   "writing .metadata");
    if (!rc && rank == 0) {
        /* the checkpoint it replaced, now at tmp, is renamed aside and
         * unlinked in the background (0.15 s a 512 MiB file here, which
         * the save no longer waits for); a failure there is none of the
         * save's (the next save's first step removes what is left) */
        tn__dcp_remove_later(tmp);
    }
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

/* ------------------------------------------------------ asynchronous */

struct tn_dcp_async {
    pthread_t th;
    char *dir;
    struct tn_dcp_shard *shards; /* staged: own tensors, strdup'd keys */
    size_t n;
    struct tn_pg *pg;
    int rc;
    char err[1024];
    int done; /* set by the thread when the save has ended */
};

/* Frees an async save's handle with its staged copies (fqns, tensors,
 * retained values) and dir. */
static void staged_free(struct tn_dcp_async *h)
{
    for (size_t i = 0; h->shards && i < h->n; i++) {
        free((char *)h->shards[i].fqn);
        tn_release(h->shards[i].tensor);
        tn_value_release((struct tn_value *)h->shards[i].value);
    }
    free(h->shards);
    free(h->dir);
    free(h);
}

/* The writing thread: tn_dcp_save over the staged shards, its message kept
 * in h->err; releases the staged tensors at once, then marks h done. */
static void *async_main(void *arg)
{
    struct tn_dcp_async *h = arg;
    h->rc = tn_dcp_save(h->dir, h->shards, h->n, h->pg);
    if (h->rc)
        snprintf(h->err, sizeof h->err, "%s", tn_last_error());
    /* the staged copies go as soon as they are written, not at the wait */
    for (size_t i = 0; i < h->n; i++) {
        tn_release(h->shards[i].tensor);
        h->shards[i].tensor = NULL;
    }
    __atomic_store_n(&h->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Contract in tensor/dcp.h: stages a copy of every tensor (values are
 * retained), then saves on a thread of its own that uses pg until the
 * wait.  0 with *out for tn_dcp_async_wait; else an error with *out NULL
 * and nothing started (TN_EINVAL for a shard without a key). */
int tn_dcp_save_async(const char *dir, const struct tn_dcp_shard *shards, size_t n,
                      struct tn_pg *pg, struct tn_dcp_async **out)
{
    *out = NULL;
    struct tn_dcp_async *h = calloc(1, sizeof *h);
    if (!h || !(h->dir = strdup(dir)) || !(h->shards = calloc(n ? n : 1, sizeof *h->shards))) {
        if (h)
            free(h->dir);
        free(h);
        return tn_set_error(TN_ENOMEM, "%s: out of memory", dir);
    }
    h->n = n;
    h->pg = pg;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        struct tn_dcp_shard *s = &h->shards[i];
        *s = shards[i];
        s->tensor = NULL;
        s->value = NULL;
        if (!shards[i].fqn || !(s->fqn = strdup(shards[i].fqn))) {
            s->fqn = NULL;
            rc = shards[i].fqn ? tn_set_error(TN_ENOMEM, "%s: out of memory", dir)
                               : tn_set_error(TN_EINVAL, "tn_dcp_save_async: shard %zu has no "
                                              "key", i);
            break;
        }
        if (shards[i].tensor) {
            /* staged: a copy of its own, so the caller may change or free
             * the tensor as soon as this returns */
            s->tensor = tn_clone(shards[i].tensor);
            if (!s->tensor)
                rc = tn_last_status();
            else
                s->tensor->requires_grad = false;
        } else if (shards[i].value) {
            s->value = tn_value_retain((struct tn_value *)shards[i].value);
        }
    }
    if (!rc && pthread_create(&h->th, NULL, async_main, h) != 0)
        rc = tn_set_error(TN_EIO, "%s: cannot start the writing thread", dir);
    if (rc) {
        staged_free(h);
        return rc;
    }
    *out = h;
    return 0;
}

/* True once the save ended (tn_dcp_async_wait then does not block). */
bool tn_dcp_async_done(const struct tn_dcp_async *h)
{
    if (!h) /* as tn_dcp_async_wait(NULL): nothing to wait for */
        return true;
    return __atomic_load_n(&h->done, __ATOMIC_ACQUIRE) != 0;
}

/* Joins the save's thread and frees h; 0 or the save's error with its
 * message.  NULL: 0. */
int tn_dcp_async_wait(struct tn_dcp_async *h)
{
    if (!h)
        return 0;
    pthread_join(h->th, NULL);
    int rc = h->rc;
    if (rc)
        tn_set_error((enum tn_status)rc, "%s", h->err);
    staged_free(h);
    return rc;
}
