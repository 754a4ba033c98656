"""atan, atan2, asin, acos for float64.

atan/atan2
    Reduce to ``t = a/b`` with ``0 <= a <= b`` (swapping for ``|y| > |x|``), and for
    ``t > tan(pi/8)`` use ``atan(t) = pi/4 + atan((a-b)/(a+b))``, so the polynomial
    ``u + u**3*A(u*u)`` (degree-11 minimax in ``u*u``, made by :mod:`._remez`) only
    sees ``|u| <= tan(pi/8)``.  The quotient is a double-double and the final
    ``C +- (pi/4 or 0) +- atan(u)`` (``C`` in {0, pi/2, pi}) is summed in
    double-double, so the result is rounded once.

asin/acos
    ``asin(t) = t + t**3*B(t*t)`` on ``[0, 1/2]`` (degree-12 minimax), and for
    ``|x| > 1/2`` the identity ``asin(x) = pi/2 - 2*asin(sqrt((1-x)/2))`` with the
    square root as a double-double; both paths share one polynomial evaluation.
"""

from __future__ import annotations

import numpy as np

from ._core import (HAS_FMA, copysign, dd_div, f2i, fabs, fast_two_sum, fma, kernel, mla,
                    sqrt, two_prod, two_sum)

_INF = np.inf
_NAN = np.nan
TAN_PI_8 = 0.41421356237309503
PIO4_H, PIO4_L = 0.7853981633974483, 3.061616997868383e-17
PIO2_H, PIO2_L = 1.5707963267948966, 6.123233995736766e-17
PI_H, PI_L = 3.141592653589793, 1.2246467991473532e-16

# (atan(u) - u) / u**3 in z = u*u, 0 <= z <= tan(pi/8)**2: degree-11 minimax
A0 = -0.3333333333333333
A1 = 0.19999999999999815
A2 = -0.14285714285662485
A3 = 0.1111111110539651
A4 = -0.09090908764717247
A5 = 0.07692296679554823
A6 = -0.06666430040884522
A7 = 0.05878985050600267
A8 = -0.0523084582909849
A9 = 0.04553291802721576
A10 = -0.034612205597267735
A11 = 0.016329848143845728

# (asin(t) - t) / t**3 in z = t*t, 0 <= z <= 1/4: degree-12 minimax
B0 = 0.16666666666666669
B1 = 0.0749999999999824
B2 = 0.044642857146724266
B3 = 0.03038194411088774
B4 = 0.02237217401181778
B5 = 0.017352368311655653
B6 = 0.013971565935096391
B7 = 0.011475818746037708
B8 = 0.010344128673062456
B9 = 0.005368186397278705
B10 = 0.017638206192492338
B11 = -0.01521407603769105
B12 = 0.02899964658680098


@kernel
def _atan_poly(z):
    z2 = z * z
    z4 = z2 * z2
    z8 = z4 * z4
    p0 = mla(z, A1, A0) + z2 * mla(z, A3, A2)
    p1 = mla(z, A5, A4) + z2 * mla(z, A7, A6)
    p2 = mla(z, A9, A8) + z2 * mla(z, A11, A10)
    return p0 + z4 * p1 + z8 * p2


@kernel
def atan_ratio(a, b):
    """``atan(a/b)`` as a double-double for finite ``0 <= a <= b``, ``b > 0``, with
    ``b`` between 2**-900 and 2**1020 (callers scale)."""
    big = a > TAN_PI_8 * b
    nh, nl = two_sum(a, -b)
    dh, dl = two_sum(a, b)
    nh = nh if big else a
    nl = nl if big else 0.0
    dh = dh if big else b
    dl = dl if big else 0.0
    uh, ul = dd_div(nh, nl, dh, dl)
    z = uh * uh
    t = uh * z * _atan_poly(z)
    lo = ul - ul * z + t
    base_h = PIO4_H if big else 0.0
    base_l = PIO4_L if big else 0.0
    h, e = two_sum(base_h, uh)
    return fast_two_sum(h, e + lo + base_l)


@kernel
def atan64(x):
    a = fabs(x)
    swap = a > 1.0
    num = 1.0 if swap else a
    den = a if swap else 1.0
    den = 1.0 if a == _INF else den       # atan(+-inf) = +-pi/2
    num = 0.0 if a == _INF else num
    th, tl = atan_ratio(num, den)
    h, e = two_sum(PIO2_H, -th)
    rs = h + (e + (PIO2_L - tl))
    r = rs if swap else th + tl
    r = copysign(r, x)
    return x if x != x else r


@kernel
def atan2_64(y, x):
    ax = fabs(x)
    ay = fabs(y)
    swap = ay > ax
    a = ax if swap else ay
    b = ay if swap else ax
    # infinities: both -> atan(1); one -> atan(0) (with the swap above)
    both_inf = a == _INF
    a = 1.0 if both_inf else (0.0 if b == _INF else a)
    b = 1.0 if (both_inf or b == _INF) else b
    b = 1.0 if b == 0.0 else b            # atan2(+-0, +-0): atan(0) then quadrant
    # keep a >= 2**-900 (or a/b negligible) and b <= 2**1020: the double-double quotient's
    # error terms then never underflow and a + b never overflows
    up = a < 1.4996968138956309e-271 and b < 2.5822498780869086e+120   # 2**-900, 2**400
    down = b > 1.1235582092889474e+307    # 2**1020
    s = 4.149515568880993e+180 if up else (0.0625 if down else 1.0)
    th, tl = atan_ratio(a * s, b * s)
    neg_x = f2i(x) < 0
    # theta = C + sgn * atan(a/b)
    ch = PIO2_H if swap else (PI_H if neg_x else 0.0)
    cl = PIO2_L if swap else (PI_L if neg_x else 0.0)
    flip = (swap and not neg_x) or ((not swap) and neg_x)
    th = -th if flip else th
    tl = -tl if flip else tl
    h, e = two_sum(ch, th)
    r = h + (e + (cl + tl))
    # |y/x| < 2**-30 with x > 0: atan2 = y/x correctly rounded (also when the quotient
    # is subnormal, where the double-double quotient's correction would underflow)
    tiny = ay < 9.313225746154785e-10 * ax and not neg_x
    r = ay / ax if tiny else r
    r = copysign(r, y)
    return _NAN if (x != x or y != y) else r


@kernel
def _asin_poly(z):
    z2 = z * z
    z4 = z2 * z2
    z8 = z4 * z4
    p0 = mla(z, B1, B0) + z2 * mla(z, B3, B2)
    p1 = mla(z, B5, B4) + z2 * mla(z, B7, B6)
    p2 = mla(z, B9, B8) + z2 * mla(z, B11, B10)
    return p0 + z4 * p1 + z8 * (p2 + z4 * B12)


@kernel
def _asin_core(x):
    """``(big, h, l)``: for ``|x| <= 1/2`` asin(|x|) = h + l; otherwise
    asin(sqrt((1-|x|)/2)) = h + l (both double-doubles)."""
    a = fabs(x)
    big = a > 0.5
    zb = (1.0 - a) * 0.5                   # exact for 1/2 <= a <= 1
    tb = sqrt(zb)
    if HAS_FMA:
        d = fma(-tb, tb, zb)
    else:
        p, pe = two_prod(tb, tb)
        d = (zb - p) - pe
    tlb = d / (tb + tb)
    tlb = tlb if tb > 0.0 else 0.0
    t = tb if big else a
    tl = tlb if big else 0.0
    z = zb if big else a * a
    p = t * z * _asin_poly(z)
    h, l = fast_two_sum(t, tl + p)
    return big, h, l


@kernel
def asin64(x):
    big, h, l = _asin_core(x)
    # pi/2 - 2*asin(sqrt((1-|x|)/2))
    bh, be = two_sum(PIO2_H, -2.0 * h)
    rb = bh + (be + (PIO2_L - 2.0 * l))
    r = rb if big else h + l
    r = copysign(r, x)
    return _NAN if not (fabs(x) <= 1.0) else r


@kernel
def acos64(x):
    big, h, l = _asin_core(x)
    # |x| <= 1/2: pi/2 - asin(x), asin(x) = +-(h + l)
    s2h = h if x >= 0.0 else -h
    s2l = l if x >= 0.0 else -l
    ah, ae = two_sum(PIO2_H, -s2h)
    r_small = ah + (ae + (PIO2_L - s2l))
    # x > 1/2: 2*asin(z); x < -1/2: pi - 2*asin(z), z = sqrt((1-|x|)/2)
    nh, ne = two_sum(PI_H, -2.0 * h)
    r_neg = nh + (ne + (PI_L - 2.0 * l))
    r_pos = 2.0 * h + 2.0 * l
    r = (r_neg if x < 0.0 else r_pos) if big else r_small
    return _NAN if not (fabs(x) <= 1.0) else r
