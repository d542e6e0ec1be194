#!/usr/bin/env python3
"""bench/ops/expfit.py: the coefficients of lib/ops/cpu/vmath.h's expf
polynomial, e^r ~ 1 + r + r^2 q(r) on |r| <= ln2/(2N) with q of degree DEG -
2 (arguments DEG N; default 3 8: tn__exp8, whose table of 2^(j/8) takes the
rest; 6 1 gave the polynomial on |r| <= ln2/2 it had before), fitted to
the relative error in the minimax sense (Lawson's iteratively reweighted least squares on Chebyshev points), rounded
to float32; prints them from q's constant term up, and the largest relative
error of the rounded polynomial (in double) and that in ulps at 1.0."""
import sys

import numpy as np

deg = int(sys.argv[1]) if len(sys.argv) > 1 else 3
tab = int(sys.argv[2]) if len(sys.argv) > 2 else 8
lim = np.log(2) / (2 * tab) * 1.0005  # n ln2 in float: r a little past ln2/2N
r = np.cos(np.linspace(0, np.pi, 4001)) * lim
f = np.exp(r)
a = np.stack([r ** (k + 2) for k in range(deg - 1)], 1) / f[:, None]
b = (f - 1 - r) / f
w = np.ones_like(r)
for _ in range(300):
    sw = np.sqrt(w)
    c = np.linalg.lstsq(a * sw[:, None], b * sw, rcond=None)[0]
    e = np.abs(a @ c - b)
    w = w * e / np.sum(w * e)
c32 = c.astype(np.float32)
p = 1 + r + r * r * sum(float(c32[k]) * r ** k for k in range(deg - 1))
err = np.max(np.abs(p - f) / f)
print(" ".join("%.10e" % x for x in c32))
print("max relative error %.3g (%.3f ulp at 1)" % (err, err / 2.0 ** -23))
