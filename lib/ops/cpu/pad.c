/*
 * ops/cpu/pad.c: reflection_pad1d/2d/3d and replication_pad1d/2d/3d with
 * their backward ops. One geometry for every rank: each padded dim gets a
 * table of the input index each output index reads (PyTorch's index
 * formulas, negative pads cropping), and one loop over (planes, depth,
 * height, width) copies elements (every dtype but bool, by size) forward or
 * adds them back. The backward adds in output order as PyTorch's kernels do,
 * float16/bfloat16 rounded after every add as PyTorch's Half arithmetic is.
 * Checks and words are PyTorch 2.x's. The kernels serve the Meta key too
 * (shape only).
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/internal.h"

enum { PAD_REFLECT, PAD_REPLICATE };

/* What one call pads: nsp spatial dims (the last ones of self), their input
 * and output sizes (padded to 3 with 1s at the front), and the op's name. */
struct pad_geom {
    const char *name;
    int mode, nsp, ndim;
    int64_t planes;           /* elements of the leading (batch, channel) dims */
    int64_t isz[3], osz[3];   /* depth, height, width */
    int64_t pl[3], pr[3];     /* pads before/after, same order */
};

/* PyTorch's padding::check_valid_input, then the op's own checks. */
static int pad_geometry(const char *name, int mode, int nsp, const struct tn_tensor *self,
                        const int64_t *padding, int padding_len, struct pad_geom *g)
{
    char buf[512];
    memset(g, 0, sizeof *g);
    g->name = name;
    g->mode = mode;
    g->nsp = nsp;
    g->ndim = self->ndim;
    if (padding_len != 2 * nsp)
        return tn_set_error(TN_EINVAL, "padding size is expected to be %d, but got: %d", 2 * nsp,
                            padding_len);
    bool batch = self->ndim == nsp + 2, ok = self->ndim == nsp + 1 || batch;
    for (int d = batch ? 1 : 0; ok && d < self->ndim; d++)
        ok = self->sizes[d] != 0;
    if (!ok)
        return tn_set_error(TN_ESHAPE, "Expected %dD or %dD (batch mode) tensor with possibly 0 "
                            "batch size and other non-zero dimensions for input, but got: %s",
                            nsp + 1, nsp + 2,
                            tn_shape_format(self->sizes, self->ndim, buf, sizeof buf));
    int first = self->ndim - nsp; /* the first padded dim */
    g->planes = 1;
    for (int d = 0; d < first; d++)
        g->planes *= self->sizes[d];
    bool small = false;
    for (int k = 0; k < 3; k++) {
        int sd = k - (3 - nsp); /* which spatial dim (depth first), < 0: none */
        g->isz[k] = g->osz[k] = 1;
        if (sd < 0)
            continue;
        /* padding holds (left, right) of the last dim first */
        int pi = 2 * (nsp - 1 - sd);
        g->pl[k] = padding[pi];
        g->pr[k] = padding[pi + 1];
        g->isz[k] = self->sizes[first + sd];
        if (__builtin_add_overflow(g->isz[k], g->pl[k], &g->osz[k]) ||
            __builtin_add_overflow(g->osz[k], g->pr[k], &g->osz[k]))
            return tn_set_error(TN_EINVAL, "%s: padding (%lld, %lld) is out of range", name,
                                (long long)g->pl[k], (long long)g->pr[k]);
        small = small || g->osz[k] < 1;
    }
    /* the width first: Argument #4 is its pair, #6 the height's, #8 the depth's */
    for (int k = 2; mode == PAD_REFLECT && k >= 3 - nsp; k--)
        if (!(g->pl[k] < g->isz[k] && g->pr[k] < g->isz[k]))
            return tn_set_error(TN_EINVAL, "Argument #%d: Padding size should be less than the "
                                "corresponding input dimension, but got: padding (%lld, %lld) at "
                                "dimension %d of input %s", 4 + 2 * (2 - k),
                                (long long)g->pl[k], (long long)g->pr[k], self->ndim - 3 + k,
                                tn_shape_format(self->sizes, self->ndim, buf, sizeof buf));
    if (!small)
        return TN_OK;
    static const char *const axis[3] = {"D", "H", "W"};
    char out[160] = "", in[160] = "";
    size_t ol = 0, il = 0;
    for (int k = 3 - nsp; k < 3; k++) {
        ol += (size_t)snprintf(out + ol, sizeof out - ol, " %s: %lld", axis[k], (long long)g->osz[k]);
        il += (size_t)snprintf(in + il, sizeof in - il, "%s%s: %lld", k > 3 - nsp ? ", " : "",
                               axis[k], (long long)g->isz[k]);
    }
    if (nsp == 1)
        return tn_set_error(TN_ESHAPE, "input (%s) is too small. Calculated output%s", in, out);
    return tn_set_error(TN_ESHAPE, "Calculated output%s must be >= 1 in every dimension (input "
                        "%s)", out, in);
}

/* map[k][o]: the input element offset output index o of spatial dim k
 * reads (input contiguous). NULL with an error when out of memory. */
static int64_t *pad_maps(const struct pad_geom *g, int64_t *map[3])
{
    int64_t total = g->osz[0] + g->osz[1] + g->osz[2];
    int64_t *buf = malloc((size_t)total * sizeof *buf);
    if (!buf) {
        tn_set_error(TN_ENOMEM, "%s: out of memory", g->name);
        return NULL;
    }
    int64_t stride = 1, *p = buf;
    for (int k = 2; k >= 0; k--) {
        map[k] = p;
        int64_t n = g->isz[k], pl = g->pl[k];
        int64_t istart = pl < 0 ? -pl : 0, ostart = pl > 0 ? pl : 0;
        for (int64_t j = 0; j < g->osz[k]; j++) {
            int64_t i;
            if (j < pl)
                i = g->mode == PAD_REFLECT ? 2 * pl - j : pl;
            else if (j < n + pl)
                i = j;
            else
                i = g->mode == PAD_REFLECT ? 2 * (n + pl - 1) - j : n + pl - 1;
            i = i - ostart + istart;
            TN_ASSERT(i >= 0 && i < n); /* what pad_geometry let through */
            p[j] = i * stride;
        }
        p += g->osz[k];
        stride *= n;
    }
    return buf;
}

static struct tn_tensor *pad_forward(const struct tn_tensor *self, const int64_t *padding,
                                     int padding_len, const char *name, int mode, int nsp)
{
    struct pad_geom g;
    if (pad_geometry(name, mode, nsp, self, padding, padding_len, &g) < 0)
        return NULL;
    if (self->dtype == TN_BOOL) {
        tn_set_error(TN_EDTYPE, "\"%s\" not implemented for 'Bool'", name);
        return NULL;
    }
    int64_t sizes[TN_MAX_DIMS];
    memcpy(sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim);
    for (int k = 3 - nsp; k < 3; k++)
        sizes[self->ndim - 3 + k] = g.osz[k];
    struct tn_tensor *out = tn_empty_on(sizes, self->ndim, self->dtype, self->device);
    if (!out || self->device.type == TN_DEVICE_META || tn_numel(out) == 0)
        return out;
    struct tn_tensor *in = tn_contiguous(self);
    int64_t *map[3], *buf = in ? pad_maps(&g, map) : NULL;
    if (!buf) {
        tn_release(in);
        tn_release(out);
        return NULL;
    }
    size_t es = tn_dtype_info(self->dtype)->size;
    int64_t iplane = g.isz[0] * g.isz[1] * g.isz[2];
    const char *src = tn_data(in);
    char *dst = tn_data(out);
    for (int64_t p = 0; p < g.planes; p++) {
        const char *ip = src + (size_t)(p * iplane) * es;
        for (int64_t a = 0; a < g.osz[0]; a++)
            for (int64_t b = 0; b < g.osz[1]; b++) {
                const int64_t ab = map[0][a] + map[1][b];
                switch (es) { /* fixed sizes let the copy compile to a move */
                case 8:
                    for (int64_t c = 0; c < g.osz[2]; c++, dst += 8)
                        memcpy(dst, ip + (size_t)(ab + map[2][c]) * 8, 8);
                    break;
                case 4:
                    for (int64_t c = 0; c < g.osz[2]; c++, dst += 4)
                        memcpy(dst, ip + (size_t)(ab + map[2][c]) * 4, 4);
                    break;
                default:
                    for (int64_t c = 0; c < g.osz[2]; c++, dst += es)
                        memcpy(dst, ip + (size_t)(ab + map[2][c]) * es, es);
                }
            }
    }
    free(buf);
    tn_release(in);
    return out;
}

enum add_kind { ADD_F64, ADD_F32, ADD_C64, ADD_C128, ADD_F16 };

/* gi[where o was read from] += go[o] over every output element, in output
 * order; inlined per kind (a constant at each call) so the inner loop has
 * no branch. ADD_F16 rounds each sum to dt (float16 or bfloat16). */
static inline __attribute__((always_inline)) void
add_back(const struct pad_geom *g, int64_t *const map[3], void *gi, const void *go,
         enum add_kind kind, enum tn_dtype dt)
{
    int64_t iplane = g->isz[0] * g->isz[1] * g->isz[2], o = 0;
    for (int64_t p = 0; p < g->planes; p++)
        for (int64_t a = 0; a < g->osz[0]; a++)
            for (int64_t b = 0; b < g->osz[1]; b++) {
                const int64_t base = p * iplane + map[0][a] + map[1][b];
                for (int64_t c = 0; c < g->osz[2]; c++, o++) {
                    int64_t i = base + map[2][c];
                    if (kind == ADD_F64) {
                        ((double *)gi)[i] += ((const double *)go)[o];
                    } else if (kind == ADD_F32) {
                        ((float *)gi)[i] += ((const float *)go)[o];
                    } else if (kind == ADD_C64) {
                        ((float *)gi)[2 * i] += ((const float *)go)[2 * o];
                        ((float *)gi)[2 * i + 1] += ((const float *)go)[2 * o + 1];
                    } else if (kind == ADD_C128) {
                        ((double *)gi)[2 * i] += ((const double *)go)[2 * o];
                        ((double *)gi)[2 * i + 1] += ((const double *)go)[2 * o + 1];
                    } else {
                        float *d = (float *)gi + i;
                        *d = tn__round16(*d + ((const float *)go)[o], dt);
                    }
                }
            }
}

/* grad_input: each grad_output element added where the forward read it,
 * in float64 (float64 grads), complex64/128 as pairs of float32/64, or
 * float32 (the rest). */
static struct tn_tensor *pad_backward(const struct tn_tensor *grad_output,
                                      const struct tn_tensor *self, const int64_t *padding,
                                      int padding_len, const char *name, int mode, int nsp)
{
    struct pad_geom g;
    char bname[64];
    snprintf(bname, sizeof bname, "%s_backward", name);
    if (pad_geometry(name, mode, nsp, self, padding, padding_len, &g) < 0)
        return NULL;
    enum tn_dtype dt = self->dtype;
    if (!tn_dtype_is_floating(dt) && !tn_dtype_is_complex(dt)) {
        tn_set_error(TN_EDTYPE, "\"%s\" not implemented for '%s'", bname,
                     tn_dtype_info(dt)->c10_name);
        return NULL;
    }
    static const char *const axis[3] = {"depth", "height", "width"};
    for (int k = 2; k >= 3 - nsp; k--) {
        int d = self->ndim - 3 + k;
        int64_t got = d < grad_output->ndim ? grad_output->sizes[d] : -1;
        if (grad_output->ndim != self->ndim || got != g.osz[k]) {
            tn_set_error(TN_ESHAPE, "grad_output %s unexpected. Expected: %lld, Got: %lld",
                         axis[k], (long long)g.osz[k], (long long)got);
            return NULL;
        }
    }
    if (self->device.type == TN_DEVICE_META)
        return tn_empty_like(self, TN_DTYPE_UNSET);
    bool f64 = dt == TN_FLOAT64, r16 = dt == TN_FLOAT16 || dt == TN_BFLOAT16;
    enum tn_dtype ct = f64 || tn_dtype_is_complex(dt) ? dt : TN_FLOAT32;
    struct tn_tensor *go = tn_to_dtype(grad_output, ct), *goc = go ? tn_contiguous(go) : NULL;
    struct tn_tensor *gi = tn_zeros(self->sizes, self->ndim, ct);
    int64_t *map[3], *buf = goc && gi ? pad_maps(&g, map) : NULL;
    struct tn_tensor *r = NULL;
    if (!buf)
        goto done;
    if (f64)
        add_back(&g, map, tn_data(gi), tn_data(goc), ADD_F64, dt);
    else if (dt == TN_COMPLEX64)
        add_back(&g, map, tn_data(gi), tn_data(goc), ADD_C64, dt);
    else if (dt == TN_COMPLEX128)
        add_back(&g, map, tn_data(gi), tn_data(goc), ADD_C128, dt);
    else if (r16)
        add_back(&g, map, tn_data(gi), tn_data(goc), ADD_F16, dt);
    else
        add_back(&g, map, tn_data(gi), tn_data(goc), ADD_F32, dt);
    r = tn_to_dtype(gi, dt);
done:
    free(buf);
    tn_release(go);
    tn_release(goc);
    tn_release(gi);
    return r;
}

#define PAD_KERNELS(NAME, MODE, NSP)                                                            \
    struct tn_tensor *tn__cpu_##NAME(tn_keyset ks, const struct tn_tensor *self,                \
                                     const int64_t *padding, int padding_len)                   \
    {                                                                                           \
        return pad_forward(self, padding, padding_len, #NAME, MODE, NSP);                       \
    }                                                                                           \
    struct tn_tensor *tn__cpu_##NAME##_backward(tn_keyset ks,                                   \
                                                const struct tn_tensor *grad_output,            \
                                                const struct tn_tensor *self,                   \
                                                const int64_t *padding, int padding_len)        \
    {                                                                                           \
        return pad_backward(grad_output, self, padding, padding_len, #NAME, MODE, NSP);         \
    }

PAD_KERNELS(reflection_pad1d, PAD_REFLECT, 1)
PAD_KERNELS(reflection_pad2d, PAD_REFLECT, 2)
PAD_KERNELS(reflection_pad3d, PAD_REFLECT, 3)
PAD_KERNELS(replication_pad1d, PAD_REPLICATE, 1)
PAD_KERNELS(replication_pad2d, PAD_REPLICATE, 2)
PAD_KERNELS(replication_pad3d, PAD_REPLICATE, 3)
