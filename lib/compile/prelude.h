/*
 * compile/prelude.h: the start of every generated C file, as a string:
 * the conversions of the half types and branch-free float versions of
 * exp, tanh, erf, 1 + erf (GELU's, as erfc: no cancellation, one
 * branch; tn_erf1pef takes its exp(-x^2), which GELU's derivative
 * shares) and sigmoid that the C compiler vectorises (libm's are
 * calls, one element at a time). Accurate to a few units in the last
 * place: the compiled kernels that use them are held to PyTorch's
 * results within float32 tolerance (test_compile_decomp's op fixtures,
 * test_compile_random's graphs, the model tests).
 *
 * tn_expf: n = round(x log2 e), r = x - n ln2 (ln2 in two parts), e^r by
 * its Taylor polynomial of degree 7 on |r| <= ln2/2, times 2^n as two
 * halves 2^(n/2) 2^(n - n/2), so that x clamped to [-104, 104] (one
 * select) gives 0 and inf where e^x rounds to them and subnormals round
 * once (0.92 ulp at most over every 97th float, 1.18 before). The
 * reduction and the polynomial are FMAs where the target has fast ones
 * (FP_FAST_FMAF; in the ISO C mode the kernels are built in, GCC
 * contracts nothing itself): a compiled batch norm and SiLU of
 * efficientnet_b0's 96 x 112 x 112 went from 1.53 to 1.16 ms.
 */
#ifndef TN_COMPILE_PRELUDE_H
#define TN_COMPILE_PRELUDE_H

#define TN__PRELUDE                                                                           \
    "#include <math.h>\n"                                                                     \
    "#include <stdbool.h>\n"                                                                  \
    "#include <stdint.h>\n"                                                                   \
    "#include <string.h>\n"                                                                   \
    "typedef _Float16 tn_f16;\n"                                                              \
    "static inline float tn_bf2f(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f;\n"    \
    "    memcpy(&f, &u, 4); return f; }\n"                                                    \
    "static inline uint16_t tn_f2bf(float f) { uint32_t u; memcpy(&u, &f, 4);\n"              \
    "    if (f != f) return 0x7fc0;\n"                                                        \
    "    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }\n"                      \
    "static inline float tn_bfr(float f) { return tn_bf2f(tn_f2bf(f)); }\n"                   \
    "#ifdef FP_FAST_FMAF\n"                                                                   \
    "#define TN_FMA(a, b, c) fmaf(a, b, c)\n"                                                 \
    "#else\n"                                                                                 \
    "#define TN_FMA(a, b, c) ((a) * (b) + (c))\n"                                             \
    "#endif\n"                                                                                \
    "static inline float tn_expf(float x) {\n"                                                \
    "    float xc = fabsf(x) < 104.f ? x : copysignf(104.f, x);\n"                            \
    "    float n = TN_FMA(xc, 1.44269504088896341f, 12582912.f) - 12582912.f;\n"              \
    "    float r = TN_FMA(n, -0.693145751953125f, xc);\n"                                     \
    "    r = TN_FMA(n, -1.428606765330187e-06f, r);\n"                                        \
    "    float p = TN_FMA(r, TN_FMA(r, TN_FMA(r, TN_FMA(r, TN_FMA(r, TN_FMA(r, TN_FMA(r,\n"   \
    "        0.000198412698f, 0.00138888889f), 0.00833333333f), 0.0416666667f),\n"            \
    "        0.166666667f), 0.5f), 1.f), 1.f);\n"                                             \
    "    int32_t ni = (int32_t)n, h = ni >> 1;\n"                                             \
    "    int32_t e1 = (h + 127) << 23, e2 = (ni - h + 127) << 23; float s1, s2;\n"            \
    "    memcpy(&s1, &e1, 4); memcpy(&s2, &e2, 4);\n"                                         \
    "    return x != x ? x : p * s1 * s2; }\n"                                                \
    "static inline float tn_tanhf(float x) {\n"                                               \
    "    float a = fabsf(x), x2 = x * x;\n"                                                   \
    "    float s = x + x * x2 * (-0.333333333333f + x2 * (0.133333333333f + x2 *\n"           \
    "        (-0.0539682539683f + x2 * (0.0218694885362f + x2 * (-0.00886323552990f +\n"      \
    "        x2 * 0.00359212803657f)))));\n"                                                  \
    "    float e = tn_expf(2.f * (a < 20.f ? a : 20.f));\n"                                    \
    "    float b = 1.f - 2.f / (e + 1.f);\n"                                                  \
    "    b = x < 0.f ? -b : b;\n"                                                             \
    "    return a < 0.4f ? s : (x != x ? x : b); }\n"                                          \
    "static inline float tn_erff(float x) {\n"                                                \
    "    float a = fabsf(x), x2 = x * x;\n"                                                   \
    "    float s = x * (1.12837916709551f + x2 * (-0.376126389031838f + x2 *\n"               \
    "        (0.112837916709551f + x2 * (-0.0268661706451312f + x2 *\n"                       \
    "        (0.00522397762544218f + x2 * (-0.000854832702345085f + x2 *\n"                   \
    "        (0.000120553329817896f + x2 * (-0.0000149256239129896f + x2 *\n"                 \
    "        (1.64607679927577e-06f + x2 * (-1.63240347274893e-07f))))))))));\n"              \
    "    float t = 1.f / (1.f + 0.3275911f * a);\n"                                           \
    "    float q = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t *\n"        \
    "        (-1.453152027f + t * 1.061405429f))));\n"                                        \
    "    float b = 1.f - q * tn_expf(-x2);\n"                                                 \
    "    b = a > 4.f ? 1.f : b;\n"                                                            \
    "    b = x < 0.f ? -b : b;\n"                                                             \
    "    return a < 1.f ? s : (x != x ? x : b); }\n"                                          \
    "static inline float tn_erf1pef(float x, float e) {\n"                                  \
    "    float a = fabsf(x), t = 1.f / (1.f + 0.3275911f * a);\n"                             \
    "    float q = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t *\n"        \
    "        (-1.453152027f + t * 1.061405429f))));\n"                                        \
    "    float c = q * e;\n"                                                                  \
    "    return x < 0.f ? c : 2.f - c; }\n"                                                   \
    "static inline float tn_erf1pf(float x) { return tn_erf1pef(x, tn_expf(-x * x)); }\n"    \
    "static inline double tn_erf1p(double x) { return 1. + erf(x); }\n"                      \
    "static inline float tn_sigmoidf(float x) { return 1.f / (1.f + tn_expf(-x)); }\n"       \
    "static inline double tn_sigmoid(double x) { return 1. / (1. + exp(-x)); }\n"

#endif
