/*
 * ops/movement.c: meta functions of the data-movement ops whose CPU
 * kernels live in ops/cpu/movement.c: tril and triu (structured: the
 * result has self's shape and dtype), with PyTorch's checks and words.
 */
#include <config.h>

#include "ops/internal.h"

/* tril/triu: a matrix or a batch of them, any dtype. */
static int triangle_meta(const char *op, const struct tn_tensor *self, struct tn_meta *m)
{
    if (self->ndim < 2)
        return tn_set_error(TN_EINVAL, "%s: input tensor must have at least 2 dimensions", op);
    m->ndim = self->ndim;
    for (int i = 0; i < self->ndim; i++)
        m->sizes[i] = self->sizes[i];
    m->dtype = self->dtype;
    return TN_OK;
}

int tn__meta_tril_out(const struct tn_tensor *self, int64_t diagonal, struct tn_meta *m)
{
    (void)diagonal;
    return triangle_meta("tril", self, m);
}

int tn__meta_triu_out(const struct tn_tensor *self, int64_t diagonal, struct tn_meta *m)
{
    (void)diagonal;
    return triangle_meta("triu", self, m);
}
