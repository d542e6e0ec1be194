/*
 * tests/unit/test_aoti.c: libtensor-aoti (lib/aoti), PyTorch's AOTInductor
 * C shim over libtensor, called as a package's generated code calls it:
 * c10's numbering, the getters, empty_strided, from_blob with a storage
 * offset, _reinterpret_tensor's offset increment, pool allocations,
 * clone_preserve_strides of an expanded tensor, a channels-last
 * convolution's layout, SLEEF's vector functions and grad mode.  Packages
 * made by PyTorch run in tests/cli/tcompile_aoti.bats, where PyTorch 2.x
 * made them.
 */
#include "tn_test.h"

#include "aoti/internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include <tensor/autograd.h>
#include <tensor/ops.h>

/* The shim's functions this test calls, as c/shim.h declares them. */
int32_t aoti_torch_dtype_float32(void);
int32_t aoti_torch_dtype_bfloat16(void);
int32_t aoti_torch_dtype_uint8(void);
int32_t aoti_torch_dtype_int64(void);
int32_t aoti_torch_device_type_cpu(void);
int32_t aoti_torch_device_type_cuda(void);
size_t aoti_torch_dtype_element_size(int32_t dtype);
AOTITorchError aoti_torch_empty_strided(int64_t ndim, const int64_t *sizes,
                                        const int64_t *strides, int32_t dtype,
                                        int32_t device_type, int32_t device_index,
                                        AtenTensorHandle *ret);
AOTITorchError aoti_torch_create_tensor_from_blob(void *data, int64_t ndim,
                                                  const int64_t *sizes, const int64_t *strides,
                                                  int64_t storage_offset, int32_t dtype,
                                                  int32_t device_type, int32_t device_index,
                                                  AtenTensorHandle *ret);
AOTITorchError aoti_torch__reinterpret_tensor(AtenTensorHandle self, int64_t ndim,
                                              const int64_t *sizes, const int64_t *strides,
                                              int64_t offset_increment, AtenTensorHandle *ret);
AOTITorchError aoti_torch__alloc_from_pool(AtenTensorHandle self, int64_t offset_bytes,
                                           int32_t dtype, int64_t ndim, const int64_t *sizes,
                                           const int64_t *strides, AtenTensorHandle *ret);
AOTITorchError aoti_torch_clone_preserve_strides(AtenTensorHandle self, AtenTensorHandle *ret);
AOTITorchError aoti_torch_delete_tensor_object(AtenTensorHandle t);
AOTITorchError aoti_torch_get_data_ptr(AtenTensorHandle t, void **ret);
AOTITorchError aoti_torch_get_sizes(AtenTensorHandle t, int64_t **ret);
AOTITorchError aoti_torch_get_strides(AtenTensorHandle t, int64_t **ret);
AOTITorchError aoti_torch_get_size(AtenTensorHandle t, int64_t d, int64_t *ret);
AOTITorchError aoti_torch_get_stride(AtenTensorHandle t, int64_t d, int64_t *ret);
AOTITorchError aoti_torch_get_dim(AtenTensorHandle t, int64_t *ret);
AOTITorchError aoti_torch_get_numel(AtenTensorHandle t, int64_t *ret);
AOTITorchError aoti_torch_get_storage_size(AtenTensorHandle t, int64_t *ret);
AOTITorchError aoti_torch_get_storage_offset(AtenTensorHandle t, int64_t *ret);
AOTITorchError aoti_torch_get_dtype(AtenTensorHandle t, int32_t *ret);
AOTITorchError aoti_torch_get_device_type(AtenTensorHandle t, int32_t *ret);
AOTITorchError aoti_torch_is_contiguous(AtenTensorHandle t, bool *ret);
AOTITorchError aoti_torch_cpu_addmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                        AtenTensorHandle mat1, AtenTensorHandle mat2,
                                        double beta, double alpha);
AOTITorchError aoti_torch_cpu_convolution(
    AtenTensorHandle input, AtenTensorHandle weight, AtenTensorHandle *bias,
    const int64_t *stride, int64_t stride_len, const int64_t *padding, int64_t padding_len,
    const int64_t *dilation, int64_t dilation_len, int32_t transposed,
    const int64_t *output_padding, int64_t output_padding_len, int64_t groups,
    AtenTensorHandle *ret0);
AOTITorchError aoti_torch_cpu_max_pool2d_with_indices(
    AtenTensorHandle self, const int64_t *kernel_size, int64_t kernel_size_len,
    const int64_t *stride, int64_t stride_len, const int64_t *padding, int64_t padding_len,
    const int64_t *dilation, int64_t dilation_len, int32_t ceil_mode, AtenTensorHandle *ret0,
    AtenTensorHandle *ret1);
bool aoti_torch_grad_mode_is_enabled(void);
void aoti_torch_grad_mode_set_enabled(bool enabled);

static void numbering_is_c10s(void **state)
{
    (void)state;
    assert_int_equal(aoti_torch_dtype_float32(), 6);
    assert_int_equal(aoti_torch_dtype_bfloat16(), 15);
    assert_int_equal(aoti_torch_dtype_int64(), 4);
    assert_int_equal(aoti_torch_device_type_cpu(), 0);
    assert_int_equal(aoti_torch_device_type_cuda(), 1);
    assert_int_equal(aoti_torch_dtype_element_size(15), 2);
    assert_int_equal(aoti_torch_dtype_element_size(4), 8);
    AtenTensorHandle t = NULL;
    int64_t n = 2, one = 1;
    assert_int_equal(aoti_torch_empty_strided(1, &n, &one, 99, 0, -1, &t), AOTI_TORCH_FAILURE);
    assert_non_null(strstr(tn_last_error(), "dtype 99"));
    assert_int_equal(aoti_torch_empty_strided(1, &n, &one, 6, 1, 0, &t), AOTI_TORCH_FAILURE);
    assert_non_null(strstr(tn_last_error(), "device type 1"));
    assert_null(t);
}

static void empty_strided_and_getters(void **state)
{
    (void)state;
    const int64_t sizes[] = {2, 3, 4}, strides[] = {1, 2, 6}; /* column-major */
    AtenTensorHandle t;
    assert_int_equal(aoti_torch_empty_strided(3, sizes, strides, 6, 0, -1, &t), 0);
    int64_t *sz, *st, v;
    int32_t i;
    bool c;
    assert_int_equal(aoti_torch_get_sizes(t, &sz), 0);
    assert_int_equal(aoti_torch_get_strides(t, &st), 0);
    assert_memory_equal(sz, sizes, sizeof sizes);
    assert_memory_equal(st, strides, sizeof strides);
    assert_int_equal(aoti_torch_get_dim(t, &v), 0);
    assert_int_equal(v, 3);
    assert_int_equal(aoti_torch_get_numel(t, &v), 0);
    assert_int_equal(v, 24);
    assert_int_equal(aoti_torch_get_storage_size(t, &v), 0);
    assert_int_equal(v, 96); /* bytes */
    assert_int_equal(aoti_torch_get_size(t, -1, &v), 0);
    assert_int_equal(v, 4);
    assert_int_equal(aoti_torch_get_stride(t, 1, &v), 0);
    assert_int_equal(v, 2);
    assert_int_equal(aoti_torch_get_stride(t, 3, &v), AOTI_TORCH_FAILURE);
    assert_int_equal(aoti_torch_get_dtype(t, &i), 0);
    assert_int_equal(i, 6);
    assert_int_equal(aoti_torch_get_device_type(t, &i), 0);
    assert_int_equal(i, 0);
    assert_int_equal(aoti_torch_is_contiguous(t, &c), 0);
    assert_false(c);
    aoti_torch_delete_tensor_object(t);
}

/* from_blob's data is element 0 of the storage and the offset lies inside
 * it; _reinterpret_tensor adds its offset to the tensor's own. */
static void blob_offsets_and_reinterpret(void **state)
{
    (void)state;
    float buf[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    const int64_t four = 4, two = 2, sz[] = {2, 2}, st[] = {1, 2};
    AtenTensorHandle t, r;
    assert_int_equal(aoti_torch_create_tensor_from_blob(buf, 1, &four, &two, 1, 6, 0, -1, &t), 0);
    void *p;
    int64_t off;
    assert_int_equal(aoti_torch_get_data_ptr(t, &p), 0);
    assert_ptr_equal(p, buf + 1);
    assert_int_equal(aoti_torch_get_storage_offset(t, &off), 0);
    assert_int_equal(off, 1);
    assert_int_equal(aoti_torch__reinterpret_tensor(t, 2, sz, st, 2, &r), 0);
    assert_int_equal(aoti_torch_get_data_ptr(r, &p), 0);
    assert_ptr_equal(p, buf + 3);
    assert_int_equal(aoti_torch_get_storage_offset(r, &off), 0);
    assert_int_equal(off, 3);
    /* [[3, 5], [4, 6]] */
    struct tn_tensor *c = tn_contiguous(r);
    const float *v = c->storage->data;
    assert_true(v[0] == 3 && v[1] == 5 && v[2] == 4 && v[3] == 6);
    tn_release(c);
    aoti_torch_delete_tensor_object(r);
    aoti_torch_delete_tensor_object(t);
    assert_true(buf[9] == 9); /* borrowed: never freed nor written */
}

static void pool_allocations(void **state)
{
    (void)state;
    const int64_t n = 64, one = 1, four = 4;
    AtenTensorHandle pool, f, bad = NULL;
    assert_int_equal(aoti_torch_empty_strided(1, &n, &one, aoti_torch_dtype_uint8(), 0, -1, &pool),
                     0);
    assert_int_equal(aoti_torch__alloc_from_pool(pool, 16, 6, 1, &four, &one, &f), 0);
    void *a, *b;
    aoti_torch_get_data_ptr(pool, &a);
    aoti_torch_get_data_ptr(f, &b);
    assert_ptr_equal(b, (char *)a + 16);
    assert_int_equal(aoti_torch__alloc_from_pool(pool, 4, 4, 1, &four, &one, &bad),
                     AOTI_TORCH_FAILURE);
    assert_null(bad);
    aoti_torch_delete_tensor_object(f);
    aoti_torch_delete_tensor_object(pool);
}

/* An expanded tensor (stride 0) keeps stride 0 and a storage of 2. */
static void clone_preserve_strides_of_an_expand(void **state)
{
    (void)state;
    float buf[2] = {1, 2};
    const int64_t sz[] = {3, 2}, st[] = {0, 1};
    AtenTensorHandle t, c;
    assert_int_equal(aoti_torch_create_tensor_from_blob(buf, 2, sz, st, 0, 6, 0, -1, &t), 0);
    assert_int_equal(aoti_torch_clone_preserve_strides(t, &c), 0);
    int64_t *cs, bytes;
    aoti_torch_get_strides(c, &cs);
    assert_memory_equal(cs, st, sizeof st);
    aoti_torch_get_storage_size(c, &bytes);
    assert_int_equal(bytes, 8);
    void *p;
    aoti_torch_get_data_ptr(c, &p);
    assert_ptr_not_equal(p, buf);
    assert_memory_equal(p, buf, sizeof buf);
    aoti_torch_delete_tensor_object(c);
    aoti_torch_delete_tensor_object(t);
}

/* PyTorch's CPU convolution of a channels-last input is channels last,
 * and AOTInductor's code reads it so; the values are the convolution's. */
static void channels_last_convolution(void **state)
{
    (void)state;
    struct tn_tensor *x = tn_arange(tn_int(0), tn_int(18), tn_int(1), TN_FLOAT32);
    struct tn_tensor *x4 = tn_view(x, TN_SHAPE(1, 2, 3, 3));
    struct tn_tensor *w = tn_arange(tn_int(1), tn_int(9), tn_int(1), TN_FLOAT32);
    struct tn_tensor *w4 = tn_view(w, TN_SHAPE(4, 2, 1, 1));
    const int64_t cl[] = {18, 1, 6, 2};
    AtenTensorHandle xl, y;
    assert_int_equal(aoti_torch_empty_strided(4, x4->sizes, cl, 6, 0, -1, &xl), 0);
    assert_int_equal(tn_copy_(xl, x4), 0);
    const int64_t one[] = {1, 1}, zero[] = {0, 0};
    assert_int_equal(aoti_torch_cpu_convolution(xl, w4, NULL, one, 2, zero, 2, one, 2, 0, zero, 2,
                                                1, &y),
                     0);
    const int64_t want[] = {36, 1, 12, 4};
    assert_memory_equal(y->strides, want, sizeof want);
    struct tn_tensor *ref = tn_convolution(x4, w4, NULL, one, 2, zero, 2, one, 2, false, zero, 2, 1);
    assert_non_null(ref);
    struct tn_tensor *yc = tn_contiguous(y);
    assert_memory_equal(yc->storage->data, ref->storage->data, 36 * sizeof(float));
    tn_release(yc);
    /* and addmm_out into a given buffer */
    struct tn_tensor *m = tn_view(x, TN_SHAPE(3, 6)), *b = tn_zeros(TN_SHAPE(2), TN_FLOAT32);
    struct tn_tensor *s = tn_slice(x, 0, 0, 12, 1), *k = tn_view(s, TN_SHAPE(6, 2));
    AtenTensorHandle out = tn_empty(TN_SHAPE(3, 2), TN_FLOAT32);
    assert_int_equal(aoti_torch_cpu_addmm_out(out, b, m, k, 1.0, 2.0), 0);
    struct tn_tensor *mm = tn_mm(m, k);
    assert_true(((float *)out->storage->data)[5] == 2 * ((float *)mm->storage->data)[5]);
    tn_release(mm);
    tn_release(out);
    tn_release(k);
    tn_release(s);
    tn_release(b);
    tn_release(m);
    tn_release(ref);
    aoti_torch_delete_tensor_object(y);
    aoti_torch_delete_tensor_object(xl);
    tn_release(w4);
    tn_release(w);
    tn_release(x4);
    tn_release(x);
}

/* The same for max pooling, values and indices. */
static void channels_last_max_pool(void **state)
{
    (void)state;
    struct tn_tensor *x = tn_randn(TN_SHAPE(1, 3, 4, 4), TN_FLOAT32, NULL);
    const int64_t cl[] = {48, 1, 12, 3}, k[] = {2, 2}, zero[] = {0, 0}, one[] = {1, 1};
    AtenTensorHandle xl, v, i;
    assert_int_equal(aoti_torch_empty_strided(4, x->sizes, cl, 6, 0, -1, &xl), 0);
    assert_int_equal(tn_copy_(xl, x), 0);
    assert_int_equal(aoti_torch_cpu_max_pool2d_with_indices(xl, k, 2, k, 2, zero, 2, one, 2, 0,
                                                             &v, &i),
                     0);
    const int64_t want[] = {12, 1, 6, 3};
    assert_memory_equal(v->strides, want, sizeof want);
    assert_memory_equal(i->strides, want, sizeof want);
    struct tn_tensor *rv = NULL, *ri = NULL;
    assert_int_equal(tn_max_pool2d_with_indices(x, k, 2, k, 2, zero, 2, one, 2, false, &rv, &ri),
                     0);
    struct tn_tensor *vc = tn_contiguous(v), *ic = tn_contiguous(i);
    assert_memory_equal(vc->storage->data, rv->storage->data, 12 * sizeof(float));
    assert_memory_equal(ic->storage->data, ri->storage->data, 12 * sizeof(int64_t));
    tn_release(vc);
    tn_release(ic);
    tn_release(rv);
    tn_release(ri);
    aoti_torch_delete_tensor_object(v);
    aoti_torch_delete_tensor_object(i);
    aoti_torch_delete_tensor_object(xl);
    tn_release(x);
}

#if defined(__x86_64__)
#include <immintrin.h>
__m128 Sleef_expf4_u10(__m128 x);
__m128d Sleef_powd2_u10(__m128d x, __m128d y);
#endif

static void sleef_functions(void **state)
{
    (void)state;
#if defined(__x86_64__)
    float in[4] = {0.0f, 1.0f, -2.5f, 10.0f}, out[4];
    _mm_storeu_ps(out, Sleef_expf4_u10(_mm_loadu_ps(in)));
    for (int i = 0; i < 4; i++) /* libmvec: within 4 ULP */
        assert_true(fabsf(out[i] - expf(in[i])) <= 4 * FLT_EPSILON * expf(in[i]));
    double a[2] = {2, 9}, b[2] = {10, 0.5}, r[2];
    _mm_storeu_pd(r, Sleef_powd2_u10(_mm_loadu_pd(a), _mm_loadu_pd(b)));
    assert_true(fabs(r[0] - 1024) <= 1e-12 && fabs(r[1] - 3) <= 1e-15);
#else
    TN_TEST_SKIP("SLEEF's x86 names only");
#endif
}

static void grad_mode(void **state)
{
    (void)state;
    bool prev = aoti_torch_grad_mode_is_enabled();
    aoti_torch_grad_mode_set_enabled(false);
    assert_false(tn_is_grad_enabled());
    assert_false(aoti_torch_grad_mode_is_enabled());
    aoti_torch_grad_mode_set_enabled(true);
    assert_true(tn_is_grad_enabled());
    aoti_torch_grad_mode_set_enabled(prev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(numbering_is_c10s),
        cmocka_unit_test(empty_strided_and_getters),
        cmocka_unit_test(blob_offsets_and_reinterpret),
        cmocka_unit_test(pool_allocations),
        cmocka_unit_test(clone_preserve_strides_of_an_expand),
        cmocka_unit_test(channels_last_convolution),
        cmocka_unit_test(channels_last_max_pool),
        cmocka_unit_test(sleef_functions),
        cmocka_unit_test(grad_mode),
    };
    return TN_RUN_TESTS(tests);
}
