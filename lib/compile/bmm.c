/*
 * compile/bmm.c: a compiled program's batched matrix products (matmul of
 * tensors of 3 or more dimensions, bmm): one product per matrix of the
 * batch, over libtensor's thread pool (OpenBLAS single-threaded inside
 * it): cblas_dgemm, or float32's tn__sgemm (ops/cpu/linalg.c: the AVX2
 * kernels where they take the product, the small one's scratch allocated
 * once per thread's range: attention's 32 x 16 matrices lost most of their
 * time to OpenBLAS's packing; else cblas_sgemm). The operands are views of
 * their buffers as the lowering left them: each matrix needs one of its
 * two dimensions contiguous (a permute or a transpose of the last two
 * dimensions becomes the gemm's transpose flag and leading dimension,
 * attention's q @ k^T and att @ v read the heads in place), and the batch
 * dimensions take any strides (0 where broadcast). One b for the whole
 * batch (a linear layer over [B, S, K]) makes the batch the rows of one
 * product, a few rows by a transposed weight going to
 * ops/cpu/sgemm_skinny.c's kernel, which splits over the pool itself (so
 * only a batch run outside the pool takes it, and there the small kernel
 * splits its panels too). The result is contiguous.
 */
#include "compile/internal.h"
#include "ops/internal.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include <tensor/ops.h>

bool tn__gemm_layout(const struct tn__view *w, bool *trans, int64_t *ld)
{
    int64_t r = w->sizes[w->nd - 2], c = w->sizes[w->nd - 1];
    int64_t sr = w->strides[w->nd - 2], sc = w->strides[w->nd - 1];
    if (sc == 1 || c == 1) { /* rows of c contiguous elements, ld apart */
        *trans = false;
        *ld = r == 1 ? (c > 1 ? c : 1) : sr;
        if (*ld >= (c > 1 ? c : 1))
            return true;
    }
    if (sr == 1 || r == 1) { /* columns contiguous: the transpose's rows */
        *trans = true;
        *ld = c == 1 ? (r > 1 ? r : 1) : sc;
        if (*ld >= (r > 1 ? r : 1))
            return true;
    }
    return false;
}

struct bmm {
    int nb;                               /* batch dimensions */
    int64_t sizes[TN_MAX_DIMS];           /* of the batch */
    int64_t sa[TN_MAX_DIMS], sb[TN_MAX_DIMS]; /* the operands' batch strides */
    int64_t m, n, k, lda, ldb;
    bool ta, tb;
    bool outer; /* run outside the pool: a kernel may use it */
    enum tn_dtype dt;
    const char *a, *b;                    /* first elements */
    char *c;
};

static void bmm_range(int64_t begin, int64_t end, void *ctx)
{
    const struct bmm *q = ctx;
    size_t es = tn_dtype_size(q->dt);
    /* b's panels for the small-product kernel: one allocation per range */
    size_t ps = q->dt == TN_FLOAT32 ? tn__sgemm_small_scratch(q->m, q->n, q->k) : 0;
    float *pk = ps ? aligned_alloc(32, ps) : NULL;
    for (int64_t i = begin; i < end; i++) {
        int64_t oa = 0, ob = 0, rest = i;
        for (int d = q->nb - 1; d >= 0; d--) {
            int64_t j = rest % q->sizes[d];
            rest /= q->sizes[d];
            oa += j * q->sa[d];
            ob += j * q->sb[d];
        }
        const char *a = q->a + (size_t)oa * es, *b = q->b + (size_t)ob * es;
        char *c = q->c + (size_t)(i * q->m * q->n) * es;
        if (q->dt == TN_FLOAT32) {
            tn__sgemm(q->m, q->n, q->k, (const float *)a, q->lda, q->ta, (const float *)b,
                      q->ldb, q->tb, (float *)c, q->n, false, pk, q->outer);
            continue;
        }
        enum CBLAS_TRANSPOSE ta = q->ta ? CblasTrans : CblasNoTrans;
        enum CBLAS_TRANSPOSE tb = q->tb ? CblasTrans : CblasNoTrans;
        cblas_dgemm(CblasRowMajor, ta, tb, (int)q->m, (int)q->n, (int)q->k, 1.0,
                    (const double *)a, (int)q->lda, (const double *)b, (int)q->ldb, 0.0,
                    (double *)c, (int)q->n);
    }
    free(pk);
}

/* Whether b is one matrix for the whole batch (a linear layer's weight
 * over [B, S, K] tokens: stride 0 or size 1 in every batch dimension) and
 * a's matrices follow one another as rows (lda apart across the batch):
 * then the batch is the rows of one product, and the weight is packed (or
 * read) once, not once a matrix. swin_t's windows, compiled, packed each
 * weight 4 to 16 times per layer and ran 0.99x PyTorch eager's time, slower
 * than the interpreter (0.79x), which folds the batch in tn_linear. */
static bool shared_b(const struct bmm *q)
{
    int64_t next = q->m * q->lda; /* the stride a batch dimension must have */
    for (int d = q->nb - 1; d >= 0; d--) {
        if (q->sizes[d] == 1)
            continue;
        if (q->sb[d] != 0 || q->sa[d] != next)
            return false;
        next *= q->sizes[d];
    }
    return true;
}

struct tn_tensor *tn__bmm_run(const struct tn__view *a, const char *pa, const struct tn__view *b,
                              const char *pb, enum tn_dtype dt)
{
    int nd = a->nd;
    struct bmm q = {.nb = nd - 2, .m = a->sizes[nd - 2], .k = a->sizes[nd - 1],
                    .n = b->sizes[nd - 1], .dt = dt};
    int64_t sz[TN_MAX_DIMS], nbatch = 1;
    for (int d = 0; d < q.nb; d++) {
        sz[d] = q.sizes[d] = a->sizes[d];
        q.sa[d] = a->strides[d];
        q.sb[d] = b->strides[d];
        nbatch *= q.sizes[d];
    }
    sz[nd - 2] = q.m;
    sz[nd - 1] = q.n;
    struct tn_tensor *r = tn_empty(sz, nd, dt);
    if (!r)
        return NULL;
    if (nbatch * q.m * q.n == 0)
        return r;
    if (q.k == 0) {
        memset(tn_data(r), 0, (size_t)tn_numel(r) * tn_dtype_size(dt));
        return r;
    }
    if (!tn__gemm_layout(a, &q.ta, &q.lda) || !tn__gemm_layout(b, &q.tb, &q.ldb) ||
        (dt != TN_FLOAT32 && dt != TN_FLOAT64) || q.m > INT32_MAX || q.n > INT32_MAX ||
        q.k > INT32_MAX || q.lda > INT32_MAX || q.ldb > INT32_MAX) {
        tn_release(r);
        tn_set_error(TN_EINVAL, "a batched product of operands it cannot read in place");
        return NULL;
    }
    size_t es = tn_dtype_size(dt);
    q.a = pa + (size_t)a->off * es;
    q.b = pb + (size_t)b->off * es;
    q.c = tn_data(r);
    if (!q.ta && nbatch * q.m <= INT32_MAX && shared_b(&q)) { /* the batch as rows of one product */
        q.m *= nbatch;
        nbatch = 1;
        q.nb = 0;
    }
    /* a chunk of the batch is worth a thread from about 64k multiply-adds;
     * a batch shorter than the threads leaves them to OpenBLAS */
    int64_t work = q.m * q.n * q.k, grain = work >= 65536 ? 1 : 65536 / work;
    q.outer = nbatch < tn_get_num_threads();
    if (q.outer)
        bmm_range(0, nbatch, &q);
    else
        tn__blas_parallel_for(nbatch, grain, bmm_range, &q);
    return r;
}

/* ------------------------------------------------------------ lowering */

/* The tensor a flattening view (view, _unsafe_view, reshape) made value v
 * of, when it had the same last two sizes and more batch dimensions
 * (matmul's decomposition: expand, view to [B*H, S, D], bmm): -1 when v
 * is no such view. */
static int unflattened(const struct tn__lctx *L, int v)
{
    static const char *const views[] = {"aten::view", "aten::_unsafe_view", "aten::reshape"};
    const struct tn_graph *g = L->g;
    for (int i = 0; i < g->nnodes; i++) {
        const struct tn_graph_node *n = &g->nodes[i];
        if (n->nout < 1 || n->outs[0] != v)
            continue;
        bool view = false;
        for (size_t k = 0; k < sizeof views / sizeof views[0]; k++)
            view |= !strcmp(n->op->qualname, views[k]);
        int u = view ? tn__arg_tensor(n, "self") : -1;
        if (u < 0 || L->v[u].x < 0 || !L->meta[u] || !L->meta[v])
            return -1;
        const struct tn_tensor *a = L->meta[u], *b = L->meta[v];
        bool same = a->ndim > b->ndim && b->ndim == 3 &&
                    a->sizes[a->ndim - 1] == b->sizes[2] && a->sizes[a->ndim - 2] == b->sizes[1];
        return same ? u : -1;
    }
    return -1;
}

static bool blas_dtype(const struct tn__lctx *L, int v, enum tn_dtype dt)
{
    return v >= 0 && L->meta[v] && L->meta[v]->dtype == dt &&
           (dt == TN_FLOAT32 || dt == TN_FLOAT64);
}

bool tn__bmm_reads_through(const struct tn__lctx *L, const struct tn_graph_node *n)
{
    int v = n->nout == 1 ? n->outs[0] : -1;
    if (v < 0 || L->uses[v] != 1 || unflattened(L, v) < 0)
        return false;
    for (const struct tn_graph_node *c = n + 1; c < L->g->nodes + L->g->nnodes; c++) {
        int a = tn__arg_tensor(c, "self"), b = tn__arg_tensor(c, "mat2");
        if (a != v && b != v)
            continue;
        enum tn_dtype dt = c->nout == 1 && c->outs[0] >= 0 && L->meta[c->outs[0]]
                               ? L->meta[c->outs[0]]->dtype : TN_NUM_DTYPES;
        return !strcmp(c->op->qualname, "aten::bmm") && blas_dtype(L, a, dt) &&
               blas_dtype(L, b, dt);
    }
    return false;
}

/* Operand vi as [batch..., rows, cols]: broadcast (matmul) or reshaped
 * (bmm) to the batch sizes nb of sz. */
static int operand(struct tn__lctx *L, int vi, int nb, const int64_t *sz, bool bcast,
                   struct tn__lv *out)
{
    int rc = tn__realize(L, vi, false);
    if (rc < 0)
        return rc;
    struct tn__lv v = L->v[vi];
    int64_t s[TN_MAX_DIMS];
    memcpy(s, sz, (size_t)nb * sizeof *s);
    s[nb] = v.sizes[v.nd - 2];
    s[nb + 1] = v.sizes[v.nd - 1];
    if (!bcast) {
        if ((rc = tn__reshape(L, &v, nb + 2, s)) < 0)
            return rc;
        *out = v;
        return TN_OK;
    }
    if ((out->x = tn__bcast_lv(L, &v, nb + 2, s)) < 0)
        return tn_set_error(TN_ENOMEM, "out of memory");
    out->nd = nb + 2;
    out->dt = v.dt;
    memcpy(out->sizes, s, sizeof s);
    return TN_OK;
}

/* matmul (bmm with bmm) of values av and bv, both of 2 or more dimensions
 * and of the output's floating dtype: one batched product step. */
static int batched(struct tn__lctx *L, const struct tn_graph_node *n, bool bmm)
{
    const struct tn_tensor *o = tn__out_meta(L, 0);
    int v[2] = {tn__arg_tensor(n, "self"), tn__arg_tensor(n, bmm ? "mat2" : "other")};
    /* (a view only this bmm reads through is left unlowered: x -1) */
    if (!o || v[0] < 0 || v[1] < 0 ||
        (L->v[v[0]].x < 0 && unflattened(L, v[0]) < 0) ||
        (L->v[v[1]].x < 0 && unflattened(L, v[1]) < 0)) {
        snprintf(L->why, sizeof L->why, "operands it does not take");
        return 1;
    }
    enum tn_dtype dt = o->dtype;
    if (!blas_dtype(L, v[0], dt) || !blas_dtype(L, v[1], dt) || L->meta[v[0]]->ndim < 2 ||
        L->meta[v[1]]->ndim < 2 || o->ndim < 3) {
        snprintf(L->why, sizeof L->why, "shapes or dtypes BLAS does not take");
        return 1;
    }
    /* the batch: the output's, or for bmm that of a flattened operand */
    int nb = o->ndim - 2, u[2] = {-1, -1};
    const int64_t *bs = o->sizes;
    for (int i = 0; bmm && i < 2; i++)
        if ((u[i] = unflattened(L, v[i])) >= 0 && bs == o->sizes) {
            nb = L->v[u[i]].nd - 2;
            bs = L->v[u[i]].sizes;
        }
    int64_t batch[TN_MAX_DIMS];
    memcpy(batch, bs, (size_t)nb * sizeof *batch);
    struct tn__lv a, b, r;
    int rc;
    if ((rc = operand(L, u[0] >= 0 ? u[0] : v[0], nb, batch, !bmm, &a)) < 0 ||
        (rc = operand(L, u[1] >= 0 ? u[1] : v[1], nb, batch, !bmm, &b)) < 0 ||
        (rc = tn__matmul(L, &a, &b, &r)) < 0 || (rc = tn__reshape(L, &r, o->ndim, o->sizes)) < 0)
        return rc;
    return tn__set_out(L, 0, r.x, dt);
}

int tn__lower_bmm(struct tn__lctx *L, const struct tn_graph_node *n)
{
    return batched(L, n, true);
}

int tn__lower_batched_matmul(struct tn__lctx *L, const struct tn_graph_node *n)
{
    return batched(L, n, false);
}
