/*
 * ops/cpu/kernel.h: what the elementwise kernel files (binary.c, unary.c,
 * reduce.c, softmax.c, linalg.c) share: the load/store conversions between
 * a storage type and its compute type, and the switches that make their
 * contiguous loops compile to packed vector code.
 *
 * gcc's -O2 vectorises only with its "very cheap" cost model, which never
 * vectorises a loop needing an alias check or a remainder loop: every
 * contiguous loop here stayed scalar (add of float32 was one addss an
 * element, issue 27). The pragma below turns the vectoriser on with its
 * normal cost model in the file that includes this header; TN_IVDEP tells
 * it that an output either is an input or does not overlap it (the
 * dispatcher refuses partial overlap), so no alias check is needed; and
 * TN_KERNEL_CLONES builds a loop for x86-64-v4 (AVX-512 F/BW/CD/DQ/VL,
 * with AVX2 and FMA), x86-64-v3 (AVX2, FMA) and plain x86-64, chosen once
 * at load time by the CPU's features (gcc's function multiversioning).
 * The list was "avx512f", "arch=haswell": the avx512f clone has no FMA for
 * 256-bit vectors (VEX FMA needs -mfma, EVEX on ymm AVX512VL), so the
 * 8-float kernels of nn_conv_dw.c multiplied and added apart on AVX-512
 * machines, and an "arch=" clone is chosen by the CPU's model
 * (__builtin_cpu_is), not its features: the Haswell loop ran only on
 * Haswells, every later AVX2 CPU without AVX-512 got plain x86-64.
 * Include it after the other headers.
 */
#ifndef TN_OPS_CPU_KERNEL_H
#define TN_OPS_CPU_KERNEL_H

#include <math.h>

#include "ops/internal.h"

/* A complex number of loop suffix c64 or c128 from its two parts. */
#define CPX_c64 tn__complex64
#define CPX_c128 tn__complex128

/* numpy's and c10's complex division (Smith's method), in the real type R:
 * binary.c's div and unary.c's reciprocal. By 0 it gives a / |0| and
 * b / |0| as parts, as PyTorch does: 1 / 0 is inf + nanj (CPX keeps them). */
#define TN_CDIV(NAME, R, FABS, CPX)                                                            \
    static inline R _Complex NAME(R _Complex x, R _Complex y)                                  \
    {                                                                                          \
        R a = __real__ x, b = __imag__ x, c = __real__ y, d = __imag__ y;                      \
        R ac = FABS(c), ad = FABS(d), re, im;                                                  \
        if (ac >= ad) {                                                                        \
            if (ac == 0 && ad == 0) {                                                          \
                re = a / ac;                                                                   \
                im = b / ad;                                                                   \
            } else {                                                                           \
                R rat = d / c, scl = (R)1 / (c + d * rat);                                     \
                re = (a + b * rat) * scl;                                                      \
                im = (b - a * rat) * scl;                                                      \
            }                                                                                  \
        } else {                                                                               \
            R rat = c / d, scl = (R)1 / (d + c * rat);                                         \
            re = (a * rat + b) * scl;                                                          \
            im = (b * rat - a) * scl;                                                          \
        }                                                                                      \
        return CPX(re, im);                                                                    \
    }
TN_CDIV(cdiv_c64, float, fabsf, CPX_c64)
TN_CDIV(cdiv_c128, double, fabs, CPX_c128)

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#define TN_IVDEP _Pragma("GCC ivdep")
#else
#define TN_IVDEP
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) &&    \
    !defined(__SANITIZE_ADDRESS__)
#define TN_KERNEL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TN_KERNEL_CLONES
#endif

/* storage <-> compute conversions: identity, float16, bfloat16 */
#define LD_ID(v) (v)
#define ST_ID(d, v) ((d) = (v))
#define LD_H(v) tn_half_to_float(v)
#define ST_H(d, v) ((d) = tn_half_from_float((float)(v)))
#define LD_BF(v) tn_bfloat16_to_float(v)
#define ST_BF(d, v) ((d) = tn_bfloat16_from_float((float)(v)))

#endif
