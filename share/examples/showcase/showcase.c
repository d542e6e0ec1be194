/*
 * showcase: a short tour of libtensor's tensor core, written against the
 * public API only: constructors, views that share storage, copies with
 * broadcasting and dtype conversion, PyTorch-identical random numbers and
 * printing, and PyTorch's error messages.
 */
#include <stdio.h>
#include <stdlib.h>

#include <tensor/tensor.h>

static void show(const char *title, struct tn_tensor *t)
{
    if (!t) {
        printf("%s: error: %s\n\n", title, tn_last_error());
        return;
    }
    char shape[128], stride[128];
    printf("%s  (shape %s, strides %s, offset %lld, %s)\n", title,
           tn_shape_format(t->sizes, t->ndim, shape, sizeof shape),
           tn_shape_format(t->strides, t->ndim, stride, sizeof stride), (long long)t->offset,
           tn_is_contiguous(t) ? "contiguous" : "not contiguous");
    tn_print(stdout, t);
    printf("\n");
}

int main(void)
{
    printf("libtensor %s: the tensor core\n\n", tn_version());

    struct tn_tensor *a = tn_arange(tn_int(0), tn_int(12), tn_int(1), TN_FLOAT32);
    show("a = torch.arange(12.)", a);

    struct tn_tensor *m = tn_view(a, TN_SHAPE(3, 4));
    show("m = a.view(3, 4)", m);

    struct tn_tensor *mt = tn_t(m);
    show("m.t()  (a view: no data moved)", mt);

    struct tn_tensor *col = tn_select(m, 1, 2);
    show("m[:, 2]", col);

    struct tn_tensor *sl = tn_slice(m, 1, 0, TN_END, 2);
    show("m[:, ::2]", sl);

    struct tn_tensor *diag = tn_diagonal(m, 0, 0, 1);
    show("m.diagonal()", diag);

    struct tn_tensor *win = tn_unfold(a, 0, 4, 3);
    show("a.unfold(0, 4, 3)", win);

    struct tn_tensor *bad = tn_view(mt, TN_SHAPE(12));
    show("m.t().view(12)", bad);
    struct tn_tensor *flat = tn_reshape(mt, TN_SHAPE(12));
    show("m.t().reshape(12)  (copies)", flat);

    struct tn_tensor *bad2 = tn_view(a, TN_SHAPE(5, -1));
    show("a.view(5, -1)", bad2);

    struct tn_tensor *row = tn_linspace(tn_float(0), tn_float(1), 4, TN_FLOAT64);
    struct tn_tensor *grid = tn_zeros(TN_SHAPE(3, 4), TN_BFLOAT16);
    tn_copy_(grid, row);
    show("torch.zeros(3, 4, dtype=torch.bfloat16).copy_(torch.linspace(0, 1, 4, dtype=torch.float64))",
         grid);

    tn_manual_seed(0);
    struct tn_tensor *r = tn_randn(TN_SHAPE(2, 3), TN_FLOAT32, NULL);
    show("torch.manual_seed(0); torch.randn(2, 3)", r);
    struct tn_tensor *p = tn_randperm(8, TN_INT64, NULL);
    show("torch.randperm(8)", p);

    struct tn_tensor *e = tn_eye(3, -1, TN_INT64);
    show("torch.eye(3, dtype=torch.int64)", e);

    struct tn_tensor *big = tn_arange(tn_int(0), tn_int(2000), tn_int(1), TN_FLOAT32);
    struct tn_tensor *big2 = tn_view(big, TN_SHAPE(40, 50));
    show("torch.arange(2000.).view(40, 50)  (summarised)", big2);

    struct tn_tensor *all[] = {a, m, mt, col, sl, diag, win, bad, flat, bad2, row, grid, r, p, e, big, big2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tn_release(all[i]);
    return 0;
}
