/*
 * compile/codegen.c: the program's kernels as C. A kernel is one
 * function tn_kN(begin, end, ctx) over a range of its outer loop, the
 * signature of libtensor's tn_parallel_for, so the executor splits it over
 * the thread pool. Its loop space is collapsed where every access is
 * contiguous across two dimensions (a pointwise chain over contiguous
 * tensors is one loop), the inner loop carries `omp simd` (the file is
 * compiled with -fopenmp-simd: vector code, the same on every run), a
 * reduction accumulates one output element in a fixed order per element
 * (deterministic whatever the thread count).
 */
#include "compile/internal.h"
#include "compile/prelude.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void tn__put(struct tn__out *o, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(o->s ? o->s + o->len : NULL, o->s ? o->cap - o->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->oom = true;
            return;
        }
        if (o->s && o->len + (size_t)n < o->cap) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = (o->cap + (size_t)n + 1) * 2;
        char *p = realloc(o->s, cap);
        if (!p) {
            o->oom = true;
            return;
        }
        o->s = p;
        o->cap = cap;
    }
}

/* The C type a buffer of dt holds, and the type its values compute in. */
static const char *store_type(enum tn_dtype dt)
{
    switch (dt) {
    case TN_FLOAT32: return "float";
    case TN_FLOAT64: return "double";
    case TN_FLOAT16: return "tn_f16";
    case TN_BFLOAT16: return "uint16_t";
    case TN_INT64: return "int64_t";
    case TN_INT32: return "int32_t";
    case TN_INT16: return "int16_t";
    case TN_INT8: return "int8_t";
    case TN_UINT8: return "uint8_t";
    default: return "bool";
    }
}

static const char *calc_type(enum tn_dtype dt)
{
    return dt == TN_FLOAT16 || dt == TN_BFLOAT16 ? "float" : store_type(dt);
}

/* The loop space of a stage after collapsing: per dimension its size, and
 * per load its coefficients. */
struct space {
    int nd, nred;                 /* nred: the last ones reduced */
    int64_t sizes[TN_MAX_DIMS];
    int map[TN_MAX_DIMS];         /* old dim -> new dim, -1 dropped (size 1) */
    int64_t mulk[TN_MAX_DIMS];    /* old dim's index = new index / ... (collapsed: stride in new) */
};

/* The loads of expression x (each once) into list; returns the count. */
static int loads_of(const struct tn__cprog *P, int x, int *list, int n, int cap,
                    unsigned char *seen)
{
    if (x < 0 || seen[x])
        return n;
    seen[x] = 1;
    const struct tn__x *e = &P->xs[x];
    if (e->op == TN_X_LOAD) {
        if (n < cap)
            list[n++] = x;
        return n;
    }
    n = loads_of(P, e->a, list, n, cap, seen);
    n = loads_of(P, e->b, list, n, cap, seen);
    return loads_of(P, e->c, list, n, cap, seen);
}

static int64_t coef_of(const struct tn__x *e, int d)
{
    return d < e->nd ? e->coef[d] : 0;
}

static int first_kept(const int *keep, int nd)
{
    for (int d = 0; d < nd; d++)
        if (keep[d] >= 0)
            return d;
    return -1;
}

/* Collapses the stage's space: size-1 dimensions go; dimension d merges
 * into d+1 (same group: outer or reduced) when every load and the output
 * step over them as over one. new coefficient of a load for a merged run
 * = its coefficient for the run's last dimension. */
static void collapse(const struct tn__cprog *P, const struct tn__stage *s, const int *loads,
                     int nl, struct space *sp, int *keep)
{
    int nouter = s->nd - s->nred;
    /* keep[d]: d starts a new dimension (1) or merges into the one after (0) */
    for (int d = 0; d < s->nd; d++)
        keep[d] = s->sizes[d] != 1 ? 1 : -1; /* -1: dropped */
    /* the output's strides (contiguous over the outer dims; reductions
     * write one element per outer index) */
    int64_t ost[TN_MAX_DIMS];
    tn_contiguous_strides(s->sizes, nouter, ost);
    for (int d = 0; d < s->nd; d++) {
        if (keep[d] < 0)
            continue;
        int e = d + 1; /* the next kept dim in the same group */
        while (e < s->nd && keep[e] < 0)
            e++;
        if (e >= s->nd || (d < nouter) != (e < nouter))
            continue;
        /* a pointwise stage keeps its first dimension (a batch) out of its
         * inner loop: the code then does not depend on its size */
        if (s->nred == 0 && first_kept(keep, s->nd) == d)
            continue;
        bool ok = true;
        for (int i = 0; i < nl && ok; i++) {
            const struct tn__x *x = &P->xs[loads[i]];
            ok = coef_of(x, d) == coef_of(x, e) * s->sizes[e];
        }
        if (ok && d < nouter)
            ok = ost[d] == ost[e] * s->sizes[e];
        if (ok)
            keep[d] = 0;
    }
    /* new dims: runs ending at a kept (1) dim */
    sp->nd = 0;
    sp->nred = 0;
    int64_t run = 1;
    for (int d = 0; d < s->nd; d++) {
        if (keep[d] < 0) {
            sp->map[d] = -1;
            continue;
        }
        run *= s->sizes[d];
        sp->map[d] = sp->nd;
        if (keep[d] == 1) {
            sp->sizes[sp->nd++] = run;
            if (d >= nouter)
                sp->nred++;
            run = 1;
        }
    }
}

/* A load's coefficient for new dim j: that of the last old dim in j. */
static int64_t new_coef(const struct tn__x *x, const struct tn__stage *s, const struct space *sp,
                        int j)
{
    int64_t c = 0;
    for (int d = 0; d < s->nd; d++)
        if (sp->map[d] == j)
            c = coef_of(x, d); /* the run's last dim */
    return c;
}

static void literal(struct tn__out *o, enum tn_dtype dt, const struct tn__x *e)
{
    if (tn_dtype_is_floating(dt)) {
        const char *t = dt == TN_FLOAT64 ? "" : "f";
        if (isnan(e->k))
            tn__put(o, "(%s)NAN", calc_type(dt));
        else if (isinf(e->k))
            tn__put(o, "(%s)%sINFINITY", calc_type(dt), e->k < 0 ? "-" : "");
        else
            tn__put(o, "%a%s", dt == TN_FLOAT64 ? e->k : (double)(float)e->k, t);
    } else if (dt == TN_BOOL) {
        tn__put(o, "%d", e->ki != 0);
    } else {
        tn__put(o, "((%s)INT64_C(%" PRId64 "))", calc_type(dt), e->ki);
    }
}

/* libm's name for a float op in dt ("expf" / "exp") or ours */
static const char *fn(enum tn_dtype dt, const char *f32, const char *f64)
{
    return dt == TN_FLOAT64 ? f64 : f32;
}

/* Emits "const T tX = ...;" for x and what it needs, once each. idx is the
 * inner index expression per load ("a3 + r*4"). */
static void emit_x(struct tn__out *o, const struct tn__cprog *P, int x, unsigned char *done,
                   const char *const *addr)
{
    if (x < 0 || done[x])
        return;
    done[x] = 1;
    const struct tn__x *e = &P->xs[x];
    if (addr[x] && addr[x][0] == '=' && e->op != TN_X_LOAD) { /* kept by an earlier stage */
        tn__put(o, "            const %s t%d = %s;\n", calc_type((enum tn_dtype)e->dt), x,
                addr[x] + 1);
        return;
    }
    emit_x(o, P, e->a, done, addr);
    emit_x(o, P, e->b, done, addr);
    emit_x(o, P, e->c, done, addr);
    enum tn_dtype dt = (enum tn_dtype)e->dt;
    bool fl = tn_dtype_is_floating(dt);
    tn__put(o, "            const %s t%d = ", calc_type(dt), x);
    int a = e->a, b = e->b, c = e->c;
    switch (e->op) {
    case TN_X_LOAD:
        if (addr[x][0] == '=') /* a value the kernel keeps: a local, a row */
            tn__put(o, "%s", addr[x] + 1);
        else if (dt == TN_BFLOAT16)
            tn__put(o, "tn_bf2f(b%d[%s])", e->buf, addr[x]);
        else
            tn__put(o, "(%s)b%d[%s]", calc_type(dt), e->buf, addr[x]);
        break;
    case TN_X_CONST: literal(o, dt, e); break;
    case TN_X_CAST:
        if (dt == TN_BOOL)
            tn__put(o, "t%d != 0", a);
        else if (dt == TN_FLOAT16)
            tn__put(o, "(float)(tn_f16)t%d", a);
        else if (dt == TN_BFLOAT16)
            tn__put(o, "tn_bfr((float)t%d)", a);
        else
            tn__put(o, "(%s)t%d", calc_type(dt), a);
        break;
    case TN_X_NEG: tn__put(o, "-t%d", a); break;
    case TN_X_ABS:
        if (fl)
            tn__put(o, "%s(t%d)", fn(dt, "fabsf", "fabs"), a);
        else
            tn__put(o, "(t%1$d < 0 ? -t%1$d : t%1$d)", a);
        break;
    case TN_X_EXP: tn__put(o, "%s(t%d)", fn(dt, "tn_expf", "exp"), a); break;
    case TN_X_LOG: tn__put(o, "%s(t%d)", fn(dt, "logf", "log"), a); break;
    case TN_X_SQRT: tn__put(o, "%s(t%d)", fn(dt, "sqrtf", "sqrt"), a); break;
    case TN_X_RSQRT: tn__put(o, "1 / %s(t%d)", fn(dt, "sqrtf", "sqrt"), a); break;
    case TN_X_TANH: tn__put(o, "%s(t%d)", fn(dt, "tn_tanhf", "tanh"), a); break;
    case TN_X_SIGMOID: tn__put(o, "%s(t%d)", fn(dt, "tn_sigmoidf", "tn_sigmoid"), a); break;
    case TN_X_ERF: tn__put(o, "%s(t%d)", fn(dt, "tn_erff", "erf"), a); break;
    case TN_X_ERF1P: tn__put(o, "%s(t%d)", fn(dt, "tn_erf1pf", "tn_erf1p"), a); break;
    case TN_X_SIN: tn__put(o, "%s(t%d)", fn(dt, "sinf", "sin"), a); break;
    case TN_X_COS: tn__put(o, "%s(t%d)", fn(dt, "cosf", "cos"), a); break;
    case TN_X_LOG1P: tn__put(o, "%s(t%d)", fn(dt, "log1pf", "log1p"), a); break;
    case TN_X_EXPM1: tn__put(o, "%s(t%d)", fn(dt, "expm1f", "expm1"), a); break;
    case TN_X_RECIP: tn__put(o, "1 / t%d", a); break;
    case TN_X_FLOOR: tn__put(o, "%s(t%d)", fl ? fn(dt, "floorf", "floor") : "", a); break;
    case TN_X_CEIL: tn__put(o, "%s(t%d)", fl ? fn(dt, "ceilf", "ceil") : "", a); break;
    case TN_X_NOT: tn__put(o, "!t%d", a); break;
    case TN_X_ADD: tn__put(o, "t%d + t%d", a, b); break;
    case TN_X_SUB: tn__put(o, "t%d - t%d", a, b); break;
    case TN_X_ERF1PE: tn__put(o, "tn_erf1pef(t%d, t%d)", a, b); break;
    case TN_X_MUL: tn__put(o, "t%d * t%d", a, b); break;
    case TN_X_DIV: tn__put(o, "t%d / t%d", a, b); break;
    case TN_X_POW: tn__put(o, "%s(t%d, t%d)", fn(dt, "powf", "pow"), a, b); break;
    /* max and min propagate NaN, as PyTorch's do */
    case TN_X_MAX:
        tn__put(o, fl ? "(t%1$d > t%2$d || t%1$d != t%1$d) ? t%1$d : t%2$d" : "t%1$d > t%2$d ? t%1$d : t%2$d",
            a, b);
        break;
    case TN_X_MIN:
        tn__put(o, fl ? "(t%1$d < t%2$d || t%1$d != t%1$d) ? t%1$d : t%2$d" : "t%1$d < t%2$d ? t%1$d : t%2$d",
            a, b);
        break;
    case TN_X_EQ: tn__put(o, "t%d == t%d", a, b); break;
    case TN_X_NE: tn__put(o, "t%d != t%d", a, b); break;
    case TN_X_LT: tn__put(o, "t%d < t%d", a, b); break;
    case TN_X_LE: tn__put(o, "t%d <= t%d", a, b); break;
    case TN_X_GT: tn__put(o, "t%d > t%d", a, b); break;
    case TN_X_GE: tn__put(o, "t%d >= t%d", a, b); break;
    case TN_X_AND: tn__put(o, "t%d && t%d", a, b); break;
    case TN_X_OR: tn__put(o, "t%d || t%d", a, b); break;
    case TN_X_WHERE: tn__put(o, "t%d ? t%d : t%d", a, b, c); break;
    default: tn__put(o, "0 /* ? */"); break;
    }
    tn__put(o, ";\n");
}

/* The value v (of dt) converted for a store into a buffer of bt. */
static void store(struct tn__out *o, int buf, enum tn_dtype bt, const char *at, const char *v)
{
    if (bt == TN_BFLOAT16)
        tn__put(o, "b%d[%s] = tn_f2bf((float)%s);\n", buf, at, v);
    else if (bt == TN_BOOL)
        tn__put(o, "b%d[%s] = %s != 0;\n", buf, at, v);
    else
        tn__put(o, "b%d[%s] = (%s)%s;\n", buf, at, store_type(bt), v);
}

/* Load x, the same at every point of the inner loops (its address addr,
 * "aX", has no term of them), read once before them: "const T hX" at
 * the outer index, and the address becomes that value ("=hX"). Left in
 * the loop, such a load keeps GCC from if-converting a loop with a store
 * (tn_expf's selects stay branches): the loop ran one element at a time. */
static char *hoist_load(struct tn__out *o, const struct tn__cprog *P, int x, const char *addr)
{
    const struct tn__x *e = &P->xs[x];
    enum tn_dtype dt = (enum tn_dtype)e->dt;
    if (dt == TN_BFLOAT16)
        tn__put(o, "        const float h%d = tn_bf2f(b%d[%s]);\n", x, e->buf, addr);
    else
        tn__put(o, "        const %s h%d = (%s)b%d[%s];\n", calc_type(dt), x, calc_type(dt), e->buf, addr);
    char buf[32];
    snprintf(buf, sizeof buf, "=h%d", x);
    return strdup(buf);
}

/* Whether x varies along the row: it reads a load whose address (addr)
 * moves with the row, not one read before it ("=h") nor a local ("=v");
 * with idiv, also where it holds an integer division (kept in the loop:
 * taken out, it would run where the loop does not). memo: 0 not known, 1
 * no, 2 yes. */
static bool along_row(const struct tn__cprog *P, int x, const char *const *addr,
                      unsigned char *memo, bool idiv)
{
    if (x < 0)
        return false;
    if (!memo[x]) {
        const struct tn__x *e = &P->xs[x];
        bool r = e->op == TN_X_LOAD
                     ? addr[x] && !(addr[x][0] == '=' && (addr[x][1] == 'h' || addr[x][1] == 'v'))
                     : (idiv && e->op == TN_X_DIV && !tn_dtype_is_floating((enum tn_dtype)e->dt)) ||
                           along_row(P, e->a, addr, memo, idiv) ||
                           along_row(P, e->b, addr, memo, idiv) ||
                           along_row(P, e->c, addr, memo, idiv);
        memo[x] = r ? 2 : 1;
    }
    return memo[x] == 2;
}

/* Emits before the inner loop the values of x that are the same at every
 * point of it (a squeeze-excite gate's sigmoid, a batch norm's 1 /
 * sqrt(var + eps)): once per row instead of once per element. Left in
 * the loop, tn_sigmoidf of a hoisted load kept its selects as branches,
 * GCC did not vectorize, and efficientnet_b0's gate products ran one
 * element at a time (three times the interpreter's mul). */
static void hoist_invariants(struct tn__out *o, const struct tn__cprog *P, int x,
                             unsigned char *done, const char *const *addr, unsigned char *memo)
{
    if (x < 0 || done[x])
        return;
    const struct tn__x *e = &P->xs[x];
    if (!along_row(P, x, addr, memo, true)) {
        if (e->op != TN_X_LOAD && e->op != TN_X_CONST)
            emit_x(o, P, x, done, addr);
        return;
    }
    hoist_invariants(o, P, e->a, done, addr, memo);
    hoist_invariants(o, P, e->b, done, addr, memo);
    hoist_invariants(o, P, e->c, done, addr, memo);
}

/* Frees an emitter's scratch: the address strings and marks per
 * expression. */
static void free_scratch(const struct tn__cprog *P, char **addr, unsigned char *seen,
                         unsigned char *done)
{
    for (int i = 0; addr && i <= P->nx; i++)
        free(addr[i]);
    free(addr);
    free(seen);
    free(done);
}

#define BLOCK 4096
/* the longest row a kernel keeps a costly value of on the stack (64 KiB) */
#define KEPT_ROW 16384

/* One stage as the body of kernel k. Fills the step's outer count and
 * grain. */
static void emit_stage(struct tn__out *o, struct tn__cprog *P, int k, struct tn__step *st,
                       const struct tn__stage *s)
{
    int loads[512], keep[TN_MAX_DIMS];
    unsigned char *seen = calloc((size_t)P->nx + 1, 1), *done = calloc((size_t)P->nx + 1, 1);
    unsigned char *memo = calloc((size_t)P->nx + 1, 1);
    char **addr = calloc((size_t)P->nx + 1, sizeof *addr);
    if (!seen || !done || !addr || !memo) {
        o->oom = true;
        goto out;
    }
    int nl = loads_of(P, s->x, loads, 0, 512, seen);
    struct space sp;
    collapse(P, s, loads, nl, &sp, keep);
    int nouter = sp.nd - sp.nred;
    /* pointwise: the last dimension is the inner loop; blocked when the
     * outer loop alone is too short to share among threads */
    bool pw = s->red == TN_RED_NONE;
    int64_t inner = pw && sp.nd ? sp.sizes[sp.nd - 1] : 1, outer = 1, nblk = 1;
    int nod = pw ? (sp.nd ? sp.nd - 1 : 0) : nouter; /* outer dims */
    for (int j = 0; j < nod; j++)
        outer *= sp.sizes[j];
    if (pw && inner > 2 * BLOCK) /* rows long enough to share among threads */
        nblk = (inner + BLOCK - 1) / BLOCK;
    int64_t work = inner;
    for (int j = nouter; j < sp.nd; j++)
        work *= pw ? 1 : sp.sizes[j];
    st->nouter = outer * nblk;
    int64_t per = nblk > 1 ? BLOCK : work;
    st->grain = per >= 32768 ? 1 : 32768 / (per ? per : 1);

    tn__put(o, "\n/* %s: %s, %d loads */\n", st->label ? st->label : "",
        pw ? "pointwise" : s->red == TN_RED_SUM ? "sum" : s->red == TN_RED_MAX ? "max" : "min", nl);
    tn__put(o, "void tn_k%d(int64_t o_lo, int64_t o_hi, void *ctx)\n{\n", k);
    tn__put(o, "    char *const *B = (char *const *)ctx;\n");
    /* the buffers: the output, then each loaded one */
    tn__put(o, "    %s *restrict b%d = (%s *)(void *)B[%d];\n", store_type(P->bufs[s->buf].dt), s->buf,
        store_type(P->bufs[s->buf].dt), s->buf);
    for (int i = 0; i < nl; i++) {
        int b = P->xs[loads[i]].buf;
        bool dup = b == s->buf;
        for (int j = 0; j < i && !dup; j++)
            dup = P->xs[loads[j]].buf == b;
        if (!dup)
            tn__put(o, "    const %s *restrict b%d = (const %s *)(const void *)B[%d];\n",
                store_type(P->bufs[b].dt), b, store_type(P->bufs[b].dt), b);
    }
    tn__put(o, "    for (int64_t o = o_lo; o < o_hi; o++) {\n");
    tn__put(o, "        int64_t q = o;\n");
    if (nblk > 1) {
        tn__put(o, "        const int64_t blk = q %% %" PRId64 ";\n        q /= %" PRId64 ";\n", nblk,
            nblk);
    }
    for (int j = nod - 1; j >= 0; j--) {
        /* the outermost index is what is left: no size of it in the
         * code, so one kernel serves every batch size */
        if (j)
            tn__put(o, "        const int64_t i%d = q %% %" PRId64 ";\n", j, sp.sizes[j]);
        else
            tn__put(o, "        const int64_t i0 = q;\n");
        if (j)
            tn__put(o, "        q /= %" PRId64 ";\n", sp.sizes[j]);
    }
    /* each load's base at this outer index */
    for (int i = 0; i < nl; i++) {
        const struct tn__x *x = &P->xs[loads[i]];
        tn__put(o, "        const int64_t a%d = %" PRId64, loads[i], x->off);
        for (int j = 0; j < nod; j++) {
            int64_t c = new_coef(x, s, &sp, j);
            if (c)
                tn__put(o, " + i%d * %" PRId64, j, c);
        }
        tn__put(o, ";\n");
    }
    /* the output's base: row-major over the outer dims */
    tn__put(o, "        const int64_t ob = 0");
    {
        int64_t m = pw ? inner : 1;
        for (int j = nod - 1; j >= 0; j--) {
            tn__put(o, " + i%d * %" PRId64, j, m);
            m *= sp.sizes[j];
        }
    }
    tn__put(o, ";\n");
    char buf[96];
    if (pw) {
        if (nblk > 1)
            tn__put(o, "        const int64_t lo = blk * %d, hi = lo + %d < %" PRId64 " ? lo + %d : %" PRId64
                ";\n", BLOCK, BLOCK, inner, BLOCK, inner);
        else
            tn__put(o, "        const int64_t lo = 0, hi = %" PRId64 ";\n", inner);
        for (int i = 0; i < nl; i++) {
            const struct tn__x *x = &P->xs[loads[i]];
            int64_t c = sp.nd ? new_coef(x, s, &sp, sp.nd - 1) : 0;
            snprintf(buf, sizeof buf, c == 0 ? "a%d" : c == 1 ? "a%d + r" : "a%d + r * %" PRId64,
                     loads[i], c);
            addr[loads[i]] = c == 0 ? hoist_load(o, P, loads[i], buf) : strdup(buf);
        }
        hoist_invariants(o, P, s->x, done, (const char *const *)addr, memo);
        tn__put(o, "        #pragma omp simd\n");
        tn__put(o, "        for (int64_t r = lo; r < hi; r++) {\n");
        emit_x(o, P, s->x, done, (const char *const *)addr);
        snprintf(buf, sizeof buf, "t%d", s->x);
        tn__put(o, "            ");
        store(o, s->buf, P->bufs[s->buf].dt, "ob + r", buf);
        tn__put(o, "        }\n");
    }
    tn__put(o, "    }\n}\n");
out:
    free(memo);
    free_scratch(P, addr, seen, done);
}

/* The initial value of a reduction's accumulator. */
static const char *red_init(int red, enum tn_dtype acc)
{
    static const char *const mx[] = {[TN_INT64] = "INT64_MIN", [TN_INT32] = "INT32_MIN",
                                     [TN_INT16] = "INT16_MIN", [TN_INT8] = "INT8_MIN",
                                     [TN_UINT8] = "0", [TN_BOOL] = "0"};
    static const char *const mn[] = {[TN_INT64] = "INT64_MAX", [TN_INT32] = "INT32_MAX",
                                     [TN_INT16] = "INT16_MAX", [TN_INT8] = "INT8_MAX",
                                     [TN_UINT8] = "UINT8_MAX", [TN_BOOL] = "1"};
    if (red == TN_RED_SUM)
        return "0";
    if (tn_dtype_is_floating(acc))
        return red == TN_RED_MAX ? "-INFINITY" : "INFINITY";
    return red == TN_RED_MAX ? mx[acc] : mn[acc];
}

/* The producer stage (in the kernel) of buffer b, or -1. */
static int producer(const struct tn__cprog *P, const struct tn__step *st, int b)
{
    for (int i = st->stage0; i < st->stage0 + st->nstages; i++)
        if (P->stages[i].buf == b)
            return i;
    return -1;
}

/* A kernel's parallel loop over the outer dims of sp: the step's outer
 * count and grain. Returns the elements of a row (the reduced dims). */
static int64_t parallel_loop(struct tn__step *st, const struct space *sp, int nouter)
{
    int64_t outer = 1, row = 1;
    for (int j = 0; j < sp->nd; j++)
        *(j < nouter ? &outer : &row) *= sp->sizes[j];
    st->nouter = outer;
    int64_t work = row * st->nstages;
    st->grain = work >= 32768 ? 1 : 32768 / (work ? work : 1);
    return row;
}

/* Declares the buffers the kernel's loads read (once each; not those its
 * stages write). */
static void declare_reads(struct tn__out *o, const struct tn__cprog *P, const struct tn__step *st,
                          const int *loads, int nl)
{
    for (int i = 0; i < nl; i++) {
        int b = P->xs[loads[i]].buf;
        bool dup = producer(P, st, b) >= 0;
        for (int j = 0; j < i && !dup; j++)
            dup = P->xs[loads[j]].buf == b;
        if (!dup)
            tn__put(o, "    const %s *restrict b%d = (const %s *)(const void *)B[%d];\n",
                store_type(P->bufs[b].dt), b, store_type(P->bufs[b].dt), b);
    }
}

/* The indices i0.. i(nod - 1) of the outer dims from q. The outermost
 * index is what is left: no size of it in the code, so one kernel serves
 * every batch size. */
static void decode_outer(struct tn__out *o, const struct space *sp, int nod)
{
    for (int j = nod - 1; j >= 0; j--) {
        if (j)
            tn__put(o, "        const int64_t i%d = q %% %" PRId64 ";\n", j, sp->sizes[j]);
        else
            tn__put(o, "        const int64_t i0 = q;\n");
        if (j)
            tn__put(o, "        q /= %" PRId64 ";\n", sp->sizes[j]);
    }
}

/* Load x's base at the outer index (dims below nod), "const int64_t aX";
 * then its address within the row into buf: "aX" and a term per
 * reduced dim it steps through (after `inner`, "" or " + j"). */
static void load_addr(struct tn__out *o, const struct tn__cprog *P, int lx,
                      const struct tn__stage *shape, const struct space *sp, int nod,
                      const char *inner, char *buf, size_t cap)
{
    const struct tn__x *x = &P->xs[lx];
    tn__put(o, "        const int64_t a%d = %" PRId64, lx, x->off);
    for (int j = 0; j < nod; j++) {
        int64_t c = new_coef(x, shape, sp, j);
        if (c)
            tn__put(o, " + i%d * %" PRId64, j, c);
    }
    tn__put(o, ";\n");
    size_t len = (size_t)snprintf(buf, cap, "a%d%s", lx, inner);
    for (int j = sp->nd - sp->nred; j < sp->nd && len < cap; j++) {
        int64_t c = new_coef(x, shape, sp, j);
        if (c)
            len += (size_t)snprintf(buf + len, cap - len, c == 1 ? " + r%d" : " + r%d * %" PRId64, j, c);
    }
}

/* Marks the expressions of stage i's tree: first[x], the first stage that
 * computes x, and kept[x] for a costly one (an exp, a tanh, a division)
 * that a later stage computes again at the same point of the row. */
static void mark_stage(const struct tn__cprog *P, int x, int i, unsigned char *seen, int *first,
                       unsigned char *kept)
{
    if (x < 0 || seen[x])
        return;
    seen[x] = 1;
    const struct tn__x *e = &P->xs[x];
    bool costly = tn_dtype_is_floating((enum tn_dtype)e->dt) &&
                  ((e->op >= TN_X_EXP && e->op <= TN_X_EXPM1 && e->op != TN_X_RECIP) ||
                   e->op == TN_X_ERF1PE || e->op == TN_X_POW);
    if (first[x] < 0)
        first[x] = i;
    else if (first[x] < i && costly)
        kept[x] = 1;
    mark_stage(P, e->a, i, seen, first, kept);
    mark_stage(P, e->b, i, seen, first, kept);
    mark_stage(P, e->c, i, seen, first, kept);
}

/* The costly values a kernel's later stages compute again along the row
 * (a softmax's exp in its sum and in its normalisation): kept[x] set for
 * each, their count returned; -1 out of memory. */
static int kept_values(const struct tn__cprog *P, const struct tn__step *st,
                       const char *const *addr, unsigned char *kept)
{
    int *first = malloc(((size_t)P->nx + 1) * sizeof *first), n = 0;
    unsigned char *seen = malloc((size_t)P->nx + 1);
    if (!first || !seen) {
        free(first);
        free(seen);
        return -1;
    }
    for (int x = 0; x <= P->nx; x++)
        first[x] = -1;
    for (int i = st->stage0; i < st->stage0 + st->nstages; i++) {
        memset(seen, 0, (size_t)P->nx + 1);
        mark_stage(P, P->stages[i].x, i, seen, first, kept);
    }
    memset(seen, 0, (size_t)P->nx + 1);
    for (int x = 0; x <= P->nx; x++) {
        kept[x] = kept[x] && along_row(P, x, addr, seen, false);
        n += kept[x];
    }
    free(first);
    free(seen);
    return n;
}

#define FUSE_ROW 4096 /* the values of a row from which emit_group's sums share a loop */

/* Whether stage s of the kernel reads a buffer that one of its stages
 * [from, s) writes (seen: scratch of P->nx + 1). */
static bool reads_from(const struct tn__cprog *P, const struct tn__step *st, int s, int from,
                       unsigned char *seen)
{
    int loads[1024];
    memset(seen, 0, (size_t)P->nx + 1);
    int nl = loads_of(P, P->stages[s].x, loads, 0, 1024, seen);
    for (int i = 0; i < nl; i++) {
        int p = producer(P, st, P->xs[loads[i]].buf);
        if (p >= from && p < s)
            return true;
    }
    return nl >= 1024; /* (a list cut short: as if it did) */
}

/* A kernel of reductions and pointwise stages over one loop space: the
 * outer loop is shared, each stage runs its inner (row) loops in turn
 * (consecutive sums none of which reads another's result in one inner
 * loop, an accumulator each: each sum's terms in the same order, one
 * pass over the loads they share; batch norm's backward over the CNN's
 * 32x16x28x28 read its three inputs four times, tn_k14); a
 * reduction's result that only the kernel reads is a local, a pointwise
 * result that only the kernel reads is a row on the stack, and so is a
 * costly value that a later stage computes again (kept_values): the first
 * stage that computes it writes it, the later ones read it. */
static void emit_group(struct tn__out *o, struct tn__cprog *P, int k, struct tn__step *st)
{
    const struct tn__stage *s0 = &P->stages[st->stage0];
    int loads[1024], keep[TN_MAX_DIMS], nl = 0;
    unsigned char *seen = calloc((size_t)P->nx + 1, 1), *done = calloc((size_t)P->nx + 1, 1);
    unsigned char *kept = calloc((size_t)P->nx + 1, 1);
    char **addr = calloc((size_t)P->nx + 1, sizeof *addr);
    if (!seen || !done || !addr || !kept) {
        o->oom = true;
        goto out;
    }
    for (int i = st->stage0; i < st->stage0 + st->nstages; i++)
        nl = loads_of(P, P->stages[i].x, loads, nl, 1024, seen);
    /* the space: collapsed over the loads of every stage, with the
     * reduced (row) dims of its reductions */
    struct tn__stage shape = *s0;
    shape.nred = st->nstages > 1 ? st->nrow : s0->nred;
    struct space sp;
    collapse(P, &shape, loads, nl, &sp, keep);
    int nouter = sp.nd - sp.nred;
    int64_t row = parallel_loop(st, &sp, nouter);

    tn__put(o, "\n/* %s: %d stage%s, %d loads */\n", st->label ? st->label : "", st->nstages,
        st->nstages == 1 ? "" : "s", nl);
    tn__put(o, "void tn_k%d(int64_t o_lo, int64_t o_hi, void *ctx)\n{\n", k);
    tn__put(o, "    char *const *B = (char *const *)ctx;\n");
    /* the buffers the kernel writes, those it reads, and its rows */
    for (int i = st->stage0; i < st->stage0 + st->nstages; i++) {
        const struct tn__stage *s = &P->stages[i];
        const struct tn__buf *b = &P->bufs[s->buf];
        if (!b->private_)
            tn__put(o, "    %s *restrict b%d = (%s *)(void *)B[%d];\n", store_type(b->dt), s->buf,
                store_type(b->dt), s->buf);
        else if (s->red == TN_RED_NONE)
            tn__put(o, "    %s row%d[%" PRId64 "];\n", calc_type(b->dt), s->buf, row);
    }
    declare_reads(o, P, st, loads, nl);
    tn__put(o, "    for (int64_t o = o_lo; o < o_hi; o++) {\n        int64_t q = o;\n");
    decode_outer(o, &sp, nouter);
    char buf[160];
    for (int i = 0; i < nl; i++) {
        const struct tn__x *x = &P->xs[loads[i]];
        int p = producer(P, st, x->buf);
        if (p >= 0 && P->bufs[x->buf].private_) {
            /* a value of this kernel: its local, or its row at this index */
            snprintf(buf, sizeof buf, P->stages[p].red != TN_RED_NONE ? "=v%d" : "=row%d[rl]",
                     x->buf);
            addr[loads[i]] = strdup(buf);
            continue;
        }
        load_addr(o, P, loads[i], &shape, &sp, nouter, "", buf, sizeof buf);
        /* a buffer an earlier stage writes is read in its turn */
        bool moves = p >= 0;
        for (int j = nouter; j < sp.nd; j++)
            moves |= new_coef(x, &shape, &sp, j) != 0;
        addr[loads[i]] = moves ? strdup(buf) : hoist_load(o, P, loads[i], buf);
    }
    if (st->nstages > 1 && row <= KEPT_ROW && kept_values(P, st, (const char *const *)addr, kept) < 0) {
        o->oom = true;
        goto out;
    }
    for (int x = 0; x <= P->nx; x++)
        if (kept[x])
            tn__put(o, "        %s kept%d[%" PRId64 "];\n", calc_type((enum tn_dtype)P->xs[x].dt),
                x, row);
    for (int i = st->stage0, i2; i < st->stage0 + st->nstages; i = i2) {
        const struct tn__stage *s = &P->stages[i];
        const struct tn__buf *b = &P->bufs[s->buf];
        bool red = s->red != TN_RED_NONE, fl = tn_dtype_is_floating(s->acc);
        /* sums that follow it over the same rows, none reading another's
         * result, run in its loop: one pass over the loads they share.
         * Rows past L1 only (FUSE_ROW): shorter ones (a layer norm's 64)
         * are read from L1 either way and keep the loops they had */
        i2 = i + 1;
        while (s->red == TN_RED_SUM && row >= FUSE_ROW && i2 < st->stage0 + st->nstages &&
               P->stages[i2].red == TN_RED_SUM && !reads_from(P, st, i2, i, seen))
            i2++;
        char acc[16] = "acc";
        for (int g = i; g < i2; g++)
            if (P->bufs[P->stages[g].buf].private_ && red)
                tn__put(o, "        %s v%d;\n", calc_type(P->bufs[P->stages[g].buf].dt),
                    P->stages[g].buf);
        tn__put(o, "        {\n");
        for (int g = i; red && g < i2; g++) {
            if (i2 > i + 1)
                snprintf(acc, sizeof acc, "acc%d", g - i);
            tn__put(o, "        %s %s = %s;\n", calc_type(P->stages[g].acc), acc,
                red_init(s->red, P->stages[g].acc));
        }
        /* max and min: a NaN is noted apart (the result is NaN when
         * any element is), so the loop is a plain max, in vectors */
        if (red && s->red != TN_RED_SUM && fl)
            tn__put(o, "        int nan = 0;\n");
        for (int j = nouter; j < sp.nd; j++) {
            if (j == sp.nd - 1 && s->red == TN_RED_SUM) {
                tn__put(o, "        #pragma omp simd reduction(+:");
                for (int g = i; g < i2; g++) {
                    if (i2 > i + 1)
                        snprintf(acc, sizeof acc, "acc%d", g - i);
                    tn__put(o, "%s%s", g > i ? ", " : "", acc);
                }
                tn__put(o, ")\n");
            } else if (j == sp.nd - 1)
                tn__put(o, "        #pragma omp simd%s%s\n",
                    !red ? "" : s->red == TN_RED_MAX ? " reduction(max:acc)" : " reduction(min:acc)",
                    red && fl ? " reduction(|:nan)" : "");
            tn__put(o, "        for (int64_t r%d = 0; r%d < %" PRId64 "; r%d++) {\n", j, j,
                sp.sizes[j], j);
        }
        /* the row index: row-major over the row dims */
        tn__put(o, "            const int64_t rl = 0");
        int64_t m = 1;
        for (int j = sp.nd - 1; j >= nouter; j--) {
            tn__put(o, " + r%d * %" PRId64, j, m);
            m *= sp.sizes[j];
        }
        tn__put(o, ";\n            (void)rl;\n");
        memset(done, 0, (size_t)P->nx + 1);
        for (int g = i; g < i2; g++)
            emit_x(o, P, P->stages[g].x, done, (const char *const *)addr);
        for (int x = 0; x <= P->nx; x++) /* what this stage computes first */
            if (kept[x] && done[x] && !addr[x]) {
                tn__put(o, "            kept%d[rl] = t%d;\n", x, x);
                snprintf(buf, sizeof buf, "=kept%d[rl]", x);
                addr[x] = strdup(buf);
            }
        if (!red) {
            snprintf(buf, sizeof buf, "t%d", s->x);
            tn__put(o, "            ");
            if (b->private_)
                tn__put(o, "row%d[rl] = %s;\n", s->buf, buf);
            else {
                char at[64];
                snprintf(at, sizeof at, "o * %" PRId64 " + rl", row);
                store(o, s->buf, b->dt, at, buf);
            }
        } else if (s->red == TN_RED_SUM) {
            for (int g = i; g < i2; g++) {
                if (i2 > i + 1)
                    snprintf(acc, sizeof acc, "acc%d", g - i);
                tn__put(o, "            %s += t%d;\n", acc, P->stages[g].x);
            }
        } else if (fl) {
            tn__put(o, "            acc = t%1$d %2$s acc ? t%1$d : acc;\n            nan |= t%1$d != t%1$d;\n",
                s->x, s->red == TN_RED_MAX ? ">" : "<");
        } else {
            tn__put(o, "            acc = t%1$d %2$s acc ? t%1$d : acc;\n", s->x,
                s->red == TN_RED_MAX ? ">" : "<");
        }
        for (int j = nouter; j < sp.nd; j++)
            tn__put(o, "        }\n");
        if (red && s->red != TN_RED_SUM && fl)
            tn__put(o, "        acc = nan ? NAN : acc;\n");
        for (int g = i; red && g < i2; g++) {
            if (i2 > i + 1)
                snprintf(acc, sizeof acc, "acc%d", g - i);
            const struct tn__stage *sg = &P->stages[g];
            if (P->bufs[sg->buf].private_) {
                tn__put(o, "        v%d = %s;\n", sg->buf, acc);
            } else {
                tn__put(o, "        ");
                store(o, sg->buf, P->bufs[sg->buf].dt, "o", acc);
            }
        }
        tn__put(o, "        }\n");
    }
    tn__put(o, "    }\n}\n");
out:
    free(kept);
    free_scratch(P, addr, seen, done);
}

/* Sums over the rows of a matrix, per column (a bias's gradient, a layer
 * norm's weight and bias gradients): a kernel of sum stages whose
 * outputs' last dim steps by one through every load that moves with it
 * (by none through the others). The generic reduction walks each
 * output's column with a stride; this one keeps a strip of COLS outputs'
 * accumulators per stage and adds each row's strip to them in one vector
 * loop, every stage in the same pass over the rows. Each output still
 * sums its rows in order. Returns false, emitting nothing, when the
 * kernel is not that shape. */
#define COLS 64
static bool emit_colsum(struct tn__out *o, struct tn__cprog *P, int k, struct tn__step *st)
{
    int loads[512], keep[TN_MAX_DIMS], nl = 0, s1 = st->stage0 + st->nstages;
    const struct tn__stage *s0 = &P->stages[st->stage0];
    for (int i = st->stage0; i < s1; i++)
        if (P->stages[i].red != TN_RED_SUM || P->bufs[P->stages[i].buf].private_)
            return false;
    unsigned char *seen = calloc((size_t)P->nx + 1, 1), *done = calloc((size_t)P->nx + 1, 1);
    char **addr = calloc((size_t)P->nx + 1, sizeof *addr);
    bool ok = seen && done && addr, moves = false;
    for (int i = st->stage0; ok && i < s1; i++)
        nl = loads_of(P, P->stages[i].x, loads, nl, 512, seen);
    struct tn__stage shape = *s0;
    shape.nred = st->nstages > 1 ? st->nrow : s0->nred;
    struct space sp;
    if (ok)
        collapse(P, &shape, loads, nl, &sp, keep);
    int nouter = ok ? sp.nd - sp.nred : 0, c = nouter - 1;
    ok = ok && nouter >= 1 && sp.nred >= 1 && nl < 512;
    for (int i = 0; i < nl && ok; i++) {
        const struct tn__x *x = &P->xs[loads[i]];
        int64_t cc = new_coef(x, &shape, &sp, c);
        ok = (cc == 0 || cc == 1) && producer(P, st, x->buf) < 0;
        moves |= cc == 1;
    }
    if (!ok || !moves)
        goto out;
    parallel_loop(st, &sp, nouter);
    tn__put(o, "\n/* %s: %d sum%s per column, %d loads */\n", st->label ? st->label : "", st->nstages,
        st->nstages == 1 ? "" : "s", nl);
    tn__put(o, "void tn_k%d(int64_t o_lo, int64_t o_hi, void *ctx)\n{\n", k);
    tn__put(o, "    char *const *B = (char *const *)ctx;\n");
    for (int i = st->stage0; i < s1; i++) {
        int b = P->stages[i].buf;
        tn__put(o, "    %s *restrict b%d = (%s *)(void *)B[%d];\n", store_type(P->bufs[b].dt), b,
            store_type(P->bufs[b].dt), b);
    }
    declare_reads(o, P, st, loads, nl);
    /* a strip: from o0, up to COLS outputs, not past the last dim's end */
    tn__put(o, "    for (int64_t o0 = o_lo; o0 < o_hi;) {\n        int64_t q = o0;\n");
    decode_outer(o, &sp, nouter);
    tn__put(o, "        int64_t n = %" PRId64 " - i%d;\n", sp.sizes[c], c);
    tn__put(o, "        n = n < o_hi - o0 ? n : o_hi - o0;\n        n = n < %d ? n : %d;\n", COLS, COLS);
    for (int i = st->stage0; i < s1; i++)
        tn__put(o, "        %s acc%d[%d];\n        for (int64_t j = 0; j < n; j++)\n"
                   "            acc%d[j] = 0;\n", calc_type(P->stages[i].acc), i, COLS, i);
    char buf[160];
    for (int i = 0; i < nl; i++) {
        load_addr(o, P, loads[i], &shape, &sp, nouter,
                  new_coef(&P->xs[loads[i]], &shape, &sp, c) ? " + j" : "", buf, sizeof buf);
        addr[loads[i]] = strdup(buf);
        o->oom |= !addr[loads[i]];
    }
    for (int j = nouter; j < sp.nd; j++)
        tn__put(o, "        for (int64_t r%d = 0; r%d < %" PRId64 "; r%d++)\n", j, j, sp.sizes[j], j);
    tn__put(o, "        {\n        #pragma omp simd\n        for (int64_t j = 0; j < n; j++) {\n");
    for (int i = st->stage0; i < s1; i++) {
        emit_x(o, P, P->stages[i].x, done, (const char *const *)addr);
        tn__put(o, "            acc%d[j] += t%d;\n", i, P->stages[i].x);
    }
    tn__put(o, "        }\n        }\n        for (int64_t j = 0; j < n; j++) {\n");
    for (int i = st->stage0; i < s1; i++) {
        snprintf(buf, sizeof buf, "acc%d[j]", i);
        tn__put(o, "            ");
        store(o, P->stages[i].buf, P->bufs[P->stages[i].buf].dt, "o0 + j", buf);
    }
    tn__put(o, "        }\n        o0 += n;\n    }\n}\n");
out:
    free_scratch(P, addr, seen, done);
    return ok && moves;
}

char *tn__codegen(struct tn__cprog *P)
{
    struct tn__out o = {0};
    /* no label: the same graph read from another path shares the entry */
    tn__put(&o, "/* generated by tensorkit %s: do not edit */\n", tn_version());
    tn__put(&o, "%s", TN__PRELUDE);
    tn__put(&o, "int tn_kernel_abi = 1;\n");
    for (int i = 0; i < P->nsteps; i++)
        if (P->steps[i].kind != TN_STEP_KERNEL)
            continue;
        else if (P->steps[i].nstages == 1 && P->stages[P->steps[i].stage0].red == TN_RED_NONE)
            emit_stage(&o, P, i, &P->steps[i], &P->stages[P->steps[i].stage0]);
        else if (!emit_colsum(&o, P, i, &P->steps[i]))
            emit_group(&o, P, i, &P->steps[i]);
    if (o.oom) {
        free(o.s);
        tn_set_error(TN_ENOMEM, "out of memory");
        return NULL;
    }
    return o.s;
}
