/*
 * ops/layout.c: the strides PyTorch's TensorIterator gives the result of an
 * elementwise op (TensorIteratorBase::compute_fast_setup_type,
 * compute_strides, reorder_dimensions and allocate_or_resize_outputs).
 *
 * Fast setup, where every input has the result's shape: all contiguous
 * gives a contiguous result, all channels_last (4-d) a channels_last one,
 * all non-overlapping and dense with one set of strides those strides.
 * Otherwise the dimensions are ordered by the inputs' strides, innermost
 * first: an insertion sort whose comparison asks each input in turn (the
 * first decides; a broadcast dimension, stride 0, leaves the question to
 * the next input; equal strides put the smaller size inner, else the next
 * input decides) and keeps the default (row-major) order where none
 * decides. The result is dense in that order.
 */
#include <config.h>

#include <string.h>

#include "ops/internal.h"

/* c10's compute_channels_last_contiguous_2d. */
static bool channels_last_contiguous(const struct tn_tensor *t)
{
    if (t->ndim != 4)
        return false;
    static const int order[4] = {1, 3, 2, 0};
    int64_t expected = 1;
    for (int k = 0; k < 4; k++) {
        int d = order[k];
        if (t->sizes[d] != 1) {
            if (t->strides[d] != expected)
                return false;
            expected *= t->sizes[d];
        }
    }
    return true;
}

int tn__iter_strides(const struct tn_tensor *const *in, int n, const int64_t *sizes, int ndim,
                     int64_t *strides)
{
    if (ndim <= 1)
        return 0;
    int live = 0;
    bool same = true;
    for (int i = 0; i < n; i++) {
        if (!in[i])
            continue;
        live++;
        same = same && in[i]->ndim == ndim &&
               memcmp(in[i]->sizes, sizes, sizeof(int64_t) * (size_t)ndim) == 0;
    }
    if (!live)
        return 0;
    if (same) { /* compute_fast_setup_type */
        bool contig = true, last = true, dense = true;
        for (int i = 0; i < n; i++) {
            if (!in[i])
                continue;
            contig = contig && tn_is_contiguous(in[i]);
            last = last && channels_last_contiguous(in[i]);
            dense = dense && tn_is_non_overlapping_and_dense(in[i]);
        }
        if (contig)
            return 0;
        if (last) {
            strides[1] = 1;
            strides[3] = sizes[1];
            strides[2] = strides[3] * sizes[3];
            strides[0] = strides[2] * sizes[2];
            return 1;
        }
        if (dense) {
            const struct tn_tensor *first = NULL;
            bool equal = true;
            for (int i = 0; i < n && equal; i++) {
                if (!in[i])
                    continue;
                if (!first)
                    first = in[i];
                else
                    equal = memcmp(first->strides, in[i]->strides,
                                   sizeof(int64_t) * (size_t)ndim) == 0;
            }
            if (equal) {
                memcpy(strides, first->strides, sizeof(int64_t) * (size_t)ndim);
                return 1;
            }
        }
    }
    /* compute_strides: each input's strides in the result's shape, 0 where
     * it broadcasts (a size-1 dimension of a larger result, or missing) */
    int64_t st[8][TN_MAX_DIMS];
    int m = 0;
    for (int i = 0; i < n && m < 8; i++) {
        const struct tn_tensor *t = in[i];
        if (!t)
            continue;
        int off = ndim - t->ndim;
        for (int d = 0; d < ndim; d++) {
            int s = d - off;
            st[m][d] = s < 0 || (t->sizes[s] == 1 && sizes[d] != 1) ? 0 : t->strides[s];
        }
        m++;
    }
    /* reorder_dimensions: perm[0] is the innermost dimension */
    int perm[TN_MAX_DIMS];
    for (int k = 0; k < ndim; k++)
        perm[k] = ndim - 1 - k;
    for (int i = 1; i < ndim; i++) {
        int d1 = i;
        for (int d0 = i - 1; d0 >= 0; d0--) {
            int a = perm[d0], b = perm[d1], cmp = 0;
            for (int k = 0; k < m && !cmp; k++) {
                int64_t s0 = st[k][a], s1 = st[k][b];
                if (s0 == 0 || s1 == 0)
                    continue;
                if (s0 != s1)
                    cmp = s0 < s1 ? -1 : 1;
                else if (sizes[a] > sizes[b])
                    cmp = 1;
            }
            if (cmp > 0) {
                perm[d0] = b;
                perm[d1] = a;
                d1 = d0;
            } else if (cmp < 0) {
                break;
            }
        }
    }
    bool inverted = true;
    for (int k = 0; k < ndim; k++)
        inverted = inverted && perm[k] == ndim - 1 - k;
    if (inverted)
        return 0;
    int64_t next = 1; /* compatible_stride, then invert_perm */
    for (int k = 0; k < ndim; k++) {
        strides[perm[k]] = next;
        next *= sizes[perm[k]];
    }
    return 1;
}

/* c10's is_channels_last_strides_2d_s4 / _3d_s5: strides that suggest
 * channels_last(_3d), the order {1, last..2, 0} from the fastest, with
 * c10's fallbacks to contiguous (a C stride of 0, a zero size, N111). */
bool tn__strides_like_channels_last(const struct tn_tensor *t, int nd)
{
    if (t->ndim != nd || t->strides[1] == 0)
        return false;
    int64_t min = 0;
    for (int k = 0; k < nd; k++) {
        int d = k == 0 ? 1 : k == nd - 1 ? 0 : nd - k;
        if (t->sizes[d] == 0 || t->strides[d] < min || (d == 0 && min == t->strides[1]))
            return false;
        min = t->strides[d] * (t->sizes[d] > 1 ? t->sizes[d] : 1);
    }
    return true;
}

int tn__channels_last_outs(int rc, bool cl, struct tn_tensor **r0, struct tn_tensor **r1,
                           struct tn_tensor **r2)
{
    struct tn_tensor **r[3] = {r0, r1, r2};
    bool bad = false;
    for (int i = 0; rc >= 0 && cl && i < 3; i++)
        if (r[i] && *r[i] && !(*r[i] = tn__channels_last_if(*r[i], true)))
            bad = true;
    if (!bad)
        return rc;
    rc = tn_last_status();
    for (int i = 0; i < 3; i++)
        if (r[i]) {
            tn_release(*r[i]);
            *r[i] = NULL;
        }
    return rc;
}

struct tn_tensor *tn__channels_last_if(struct tn_tensor *r, bool cl)
{
    if (!r || !cl || r->ndim != 4 || channels_last_contiguous(r))
        return r;
    int64_t st[4];
    st[1] = 1;
    st[3] = r->sizes[1];
    st[2] = st[3] * r->sizes[3];
    st[0] = st[2] * r->sizes[2];
    struct tn_tensor *o = tn_empty_strided(r->sizes, 4, st, r->dtype);
    if (o && tn_copy_(o, r) != TN_OK) {
        tn_release(o);
        o = NULL;
    }
    tn_release(r);
    return o;
}
