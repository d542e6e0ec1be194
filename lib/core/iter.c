/*
 * core/iter.c: strided loops over several operands of one shape, the
 * building block of copies, fills and the elementwise kernels.
 */
#include "core/internal.h"

#include <string.h>

void tn__iter_init(struct tn_iter *it, int nops, const int64_t *sizes, int ndim, char *const *base,
                   const int64_t *const *strides, const size_t *elsize)
{
    TN_ASSERT(nops >= 1 && nops <= TN_ITER_MAX_OPS && ndim <= TN_MAX_DIMS);
    memset(it, 0, sizeof *it);
    it->nops = nops;
    it->numel = 1;
    for (int op = 0; op < nops; op++)
        it->base[op] = base[op];
    /* innermost first, size-1 dims dropped */
    int nd = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        it->numel *= sizes[d];
        if (sizes[d] == 1)
            continue;
        it->sizes[nd] = sizes[d];
        for (int op = 0; op < nops; op++)
            it->strides[op][nd] = strides[op][d] * (int64_t)elsize[op];
        nd++;
    }
    /* merge a dim into the one inside it when every operand steps over the
     * inner dim exactly once per step of the outer */
    int out = 0;
    for (int d = 1; d < nd; d++) {
        bool merge = true;
        for (int op = 0; op < nops && merge; op++)
            merge = it->strides[op][d] == it->strides[op][out] * it->sizes[out];
        if (merge) {
            it->sizes[out] *= it->sizes[d];
        } else {
            out++;
            it->sizes[out] = it->sizes[d];
            for (int op = 0; op < nops; op++)
                it->strides[op][out] = it->strides[op][d];
        }
    }
    it->ndim = nd ? out + 1 : 1;
    if (nd == 0) {
        it->sizes[0] = 1;
        for (int op = 0; op < nops; op++)
            it->strides[op][0] = 0;
    }
}

/* Runs fn over the linear element range [begin, end). */
static void tn_iter_range(const struct tn_iter *it, int64_t begin, int64_t end, tn_iter_fn fn,
                          void *ctx)
{
    int64_t idx[TN_MAX_DIMS];
    char *ptrs[TN_ITER_MAX_OPS];
    int64_t inner[TN_ITER_MAX_OPS];
    int64_t rem = begin;
    for (int op = 0; op < it->nops; op++) {
        ptrs[op] = it->base[op];
        inner[op] = it->strides[op][0];
    }
    for (int d = 0; d < it->ndim; d++) {
        idx[d] = rem % it->sizes[d];
        rem /= it->sizes[d];
        for (int op = 0; op < it->nops; op++)
            ptrs[op] += idx[d] * it->strides[op][d];
    }
    while (begin < end) {
        int64_t n = it->sizes[0] - idx[0];
        if (n > end - begin)
            n = end - begin;
        fn(ptrs, inner, n, ctx);
        begin += n;
        idx[0] += n;
        for (int op = 0; op < it->nops; op++)
            ptrs[op] += n * inner[op];
        for (int d = 0; d < it->ndim - 1 && idx[d] == it->sizes[d]; d++) {
            idx[d] = 0;
            idx[d + 1]++;
            for (int op = 0; op < it->nops; op++)
                ptrs[op] += it->strides[op][d + 1] - it->sizes[d] * it->strides[op][d];
        }
    }
}

struct tn_iter_job {
    const struct tn_iter *it;
    tn_iter_fn fn;
    void *ctx;
};

static void tn_iter_chunk(int64_t begin, int64_t end, void *arg)
{
    struct tn_iter_job *job = arg;
    tn_iter_range(job->it, begin, end, job->fn, job->ctx);
}

void tn__iter_run(const struct tn_iter *it, tn_iter_fn fn, void *ctx, int64_t grain)
{
    if (it->numel == 0)
        return;
    if (grain <= 0 || it->numel < grain) {
        tn_iter_range(it, 0, it->numel, fn, ctx);
        return;
    }
    struct tn_iter_job job = {it, fn, ctx};
    tn_parallel_for(it->numel, grain, tn_iter_chunk, &job);
}
