"""exp, exp2, expm1, log, log2, log10, log1p and pow for one float64.

All table-free (no gathers), every branch a select.

exp family
    ``x = k*ln2 + r`` with ``|r| <= ln2/2`` held as a double-double (Cody–Waite with
    fdlibm's 32-bit ``ln2_hi`` so ``k*ln2_hi`` is exact), then
    ``e**r - 1 = r + r**2/2 + r**3*Q(r)`` with the first two terms exact (FMA
    two-product) and ``Q`` a degree-9 minimax polynomial (relative error 2**-53, made by
    :mod:`._remez`).  The result ``2**k * (1 + p)`` is rounded once — also when it is
    subnormal (rounding at the subnormal grid by adding 1.0, as in ARM's
    optimized-routines).

log family
    ``x = 2**k * (1 + f)``, ``sqrt(2)/2 <= 1 + f < sqrt(2)``, ``s = f/(2 + f)``, and
    fdlibm's ``log(1+f) = f - hfsq + s*(hfsq + R(s*s))`` (Sun's Lg1..Lg7, remez error
    2**-58.45), with ``f*f/2`` exact and the final sums double-double, so log, log2,
    log10 and log1p round once from a value good to about 2**-57.

pow
    ``exp(y * log|x|)`` with a second log kernel good to about 2**-70 (``s`` as a
    double-double quotient and the atanh series ``2s + 2s**3/3 + 2s**5/5 + s**7*R``
    in double-double), the product ``y*log|x|`` exact, and the exp kernel on a
    double-double argument; the special cases of C99 F.9.4.4 are selects at the end.
"""

from __future__ import annotations

import numpy as np

from ._core import (HAS_FMA, dd_add, dd_mul, f2i, fabs, fast_two_sum, fma, i2f, int_to_float,
                    kernel, ldexp_k, mla, pow2i, round_to_int, trunc, two_prod, two_sum)

INV_LN2 = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01   # fdlibm ln2_hi: 32 significant bits
LN2_LO = 1.90821492927058770002e-10
LN2_LO2 = 1.161222722936253e-26       # ln2 - LN2_HI - LN2_LO
LN2 = 0.6931471805599453              # ln2 as a double-double
LN2_L = 2.3190468138462996e-17
INV_LN2_L = 2.0355273740931033e-17
INV_LN10 = 0.4342944819032518
INV_LN10_L = 1.098319650216765e-17

# (e**r - 1 - r - r*r/2) / r**3 on |r| <= ln2/2: degree-9 minimax, rel. error 2**-53
Q0 = 0.16666666666666669
Q1 = 0.04166666666666667
Q2 = 0.008333333333330065
Q3 = 0.001388888888888097
Q4 = 0.0001984126986304138
Q5 = 2.480158733387303e-05
Q6 = 2.7557268479076807e-06
Q7 = 2.755726440091153e-07
Q8 = 2.510037638748643e-08
Q9 = 2.0918107164299984e-09

# fdlibm Lg1..Lg7 (= Lp1..Lp7)
LG1 = 6.666666666666735130e-01
LG2 = 3.999999999940941908e-01
LG3 = 2.857142874366239149e-01
LG4 = 2.222219843214978396e-01
LG5 = 1.818357216161805012e-01
LG6 = 1.531383769920937332e-01
LG7 = 1.479819860511658591e-01

# (2*atanh(s) - 2s - 2s**3/3 - 2s**5/5) / s**7 as a polynomial in z = s*s,
# 0 <= z <= (3 - 2*sqrt(2))**2: degree-7 minimax, rel. error 2**-54
R0 = 0.2857142857142857
R1 = 0.22222222222222957
R2 = 0.18181818181296822
R3 = 0.15384615525726056
R4 = 0.13333314597721432
R5 = 0.11766053983068464
R6 = 0.10472804822563958
R7 = 0.10618016071059373
TWO_THIRDS = 0.6666666666666666
TWO_THIRDS_L = 3.700743415417188e-17
TWO_FIFTHS = 0.4
TWO_FIFTHS_L = -2.2204460492503132e-17

DBL_MIN = 2.2250738585072014e-308
TWO54 = 18014398509481984.0
SQRT_HALF_BITS = 0x3FE6A09E667F3BCD
_NAN = np.nan
_INF = np.inf


# ------------------------------------------------------------------------ exp kernels

@kernel
def expm1_core(rh, rl):
    """``e**(rh + rl) - 1`` as a double-double, for ``|rh| <= 0.35``."""
    q = mla(rh, mla(rh, mla(rh, mla(rh, mla(rh, mla(rh, mla(rh, mla(rh, mla(
        rh, Q9, Q8), Q7), Q6), Q5), Q4), Q3), Q2), Q1), Q0)
    q *= rh * rh * rh
    sh, sl = two_prod(rh, rh)
    a, ae = fast_two_sum(rh, 0.5 * sh)
    lo = ae + (0.5 * sl + rl + rh * rl + q)
    return fast_two_sum(a, lo)


@kernel
def reduce_ln2(xh, xl):
    """``(n, k, rh, rl)`` with ``xh + xl = n*ln2 + rh + rl``, ``|rh| <= ln2/2``; |xh| < 1100."""
    n, k = round_to_int(xh * INV_LN2)
    r = xh - n * LN2_HI                       # exact
    t, te = two_prod(n, LN2_LO)
    rh, rl = two_sum(r, -t)
    rl = rl - te - n * LN2_LO2 + xl
    rh, rl = fast_two_sum(rh, rl)
    return n, k, rh, rl


@kernel
def scale_result(k, yh, yl):
    """``2**k * (yh + yl)`` rounded once, for ``-1200 < k < 1030`` and ``yh`` positive,
    not far from 1 (any value with ``2**-100 < yh < 2``)."""
    y = yh + yl
    normal = ldexp_k(y, k)
    # subnormal results: round at the subnormal grid by adding 1.0 before scaling
    # (kept in [-100, 0]: garbage from the unused path must not be subnormal, which
    # would cost a microcode assist per vector)
    kk = k + 1022
    kk = -100 if kk < -100 else (100 if kk > 100 else kk)
    sc = pow2i(kk)
    vh = yh * sc
    vl = yl * sc
    hi = 1.0 + vh
    lo = (1.0 - hi) + vh + vl
    sub = ((hi + lo) - 1.0) * DBL_MIN
    return sub if normal < DBL_MIN else normal


@kernel
def exp_dd(xh, xl):
    """``e**(xh + xl)`` rounded once; overflow to inf and underflow to 0 as C99 says."""
    big = xh > 710.0
    small = xh < -746.0
    xh = 710.0 if big else xh
    xh = -746.0 if small else xh
    xl = 0.0 if (big or small) else xl
    n, k, rh, rl = reduce_ln2(xh, xl)
    ph, pl = expm1_core(rh, rl)
    s, se = fast_two_sum(1.0, ph)
    return scale_result(k, s, se + pl)


@kernel
def exp64(x):
    """exp(x): the double-double machinery of :func:`exp_dd` trimmed to what a plain
    double argument needs (about 45 instructions per vector)."""
    xc = 710.0 if x > 710.0 else x
    xc = -746.0 if xc < -746.0 else xc
    n, k = round_to_int(xc * INV_LN2)
    if HAS_FMA:
        rh = fma(-n, LN2, xc)             # exact: |r| < 0.35 is a multiple of 2**-54
        rl = -n * LN2_L                   # |rl| < 2.5e-14, not normalised against rh
    else:
        r = xc - n * LN2_HI               # exact
        t, te = two_prod(n, LN2_LO)
        rh, rl = two_sum(r, -t)
        rl = rl - te - n * LN2_LO2
    q = mla(rh, mla(rh, mla(rh, mla(rh, mla(rh, mla(rh, mla(rh, mla(rh, mla(
        rh, Q9, Q8), Q7), Q6), Q5), Q4), Q3), Q2), Q1), Q0)
    # e**(rh + rl) = (1 + rh + P) * (1 + rl), P = rh**2 * (1/2 + rh*Q)
    p = (rh * rh) * mla(rh, q, 0.5)
    s, e1 = fast_two_sum(1.0, rh)
    t = p + mla(rl, rh + p, rl + e1)
    return scale_result(k, s, t)


@kernel
def exp2_64(x):
    x = 1030.0 if x > 1030.0 else x
    x = -1080.0 if x < -1080.0 else x
    n, k = round_to_int(x)
    f = x - n                                 # exact, |f| <= 1/2
    rh, rl = two_prod(f, LN2)
    rl = mla(f, LN2_L, rl)
    ph, pl = expm1_core(rh, rl)
    s, se = fast_two_sum(1.0, ph)
    return scale_result(k, s, se + pl)


@kernel
def expm1_64(x):
    xc = 710.0 if x > 710.0 else x
    xc = -50.0 if xc < -50.0 else xc         # expm1(x) rounds to -1 below -38
    n, k, rh, rl = reduce_ln2(xc, 0.0)
    ph, pl = expm1_core(rh, rl)
    # 2**k * (1 + p) - 1 = (2**k - 1) + 2**k * p, all in double-double
    kc = 1000 if k > 1000 else k
    two = pow2i(kc)
    bh, bl = two_sum(two, -1.0)
    rh2, rl2 = dd_add(bh, bl, ph * two, pl * two)
    r = rh2 + rl2
    s, se = fast_two_sum(1.0, ph)
    big = scale_result(k, s, se + pl)
    r = big if k > 1000 else r
    return x if fabs(x) < 8.673617379884035e-19 else r   # |x| < 2**-60: keeps -0


# ------------------------------------------------------------------------ log kernels

@kernel
def _decompose(x):
    """``(k, m)`` with ``x = 2**k * m``, ``sqrt(1/2) <= m < sqrt(2)``, for finite ``x > 0``."""
    sub = x < DBL_MIN
    x = x * TWO54 if sub else x
    ix = f2i(x)
    k = (ix - SQRT_HALF_BITS) >> 52
    m = i2f(ix - (k << 52))
    k = k - 54 if sub else k
    return k, m


@kernel
def log_dd(x):
    """``log(x)`` as a double-double (relative error about 2**-57) for finite ``x > 0``."""
    k, m = _decompose(x)
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    R = z * mla(w, mla(w, mla(w, LG7, LG5), LG3), LG1) + w * mla(w, mla(w, LG6, LG4), LG2)
    hh, hl = two_prod(f, f)
    hh *= 0.5
    hl *= 0.5
    kf = int_to_float(k)
    a, ae = two_sum(kf * LN2_HI, f)
    b, be = two_sum(a, -hh)
    lo = ae + be - hl + s * (hh + R) + kf * LN2_LO
    return fast_two_sum(b, lo)


@kernel
def log_special(x, r):
    """C99 log special cases applied to a kernel result ``r``."""
    r = -_INF if x == 0.0 else r
    r = x if x == _INF else r
    r = _NAN if (x < 0.0 or x != x) else r
    return r


@kernel
def log64(x):
    h, l = log_dd(x)
    return log_special(x, h)


@kernel
def log2_64(x):
    h, l = log_dd(x)
    h, l = dd_mul(h, l, INV_LN2, INV_LN2_L)
    return log_special(x, h)


@kernel
def log10_64(x):
    h, l = log_dd(x)
    h, l = dd_mul(h, l, INV_LN10, INV_LN10_L)
    return log_special(x, h)


@kernel
def log1p_64(x):
    u, c = two_sum(1.0, x)
    h, l = log_dd(u)
    r = h + (l + c / u)
    r = log_special(u, r)
    r = -_INF if x == -1.0 else r
    r = _NAN if x < -1.0 else r
    return x if fabs(x) < 8.673617379884035e-19 else r   # keeps -0 and subnormals


# ----------------------------------------------------------------------------- pow

@kernel
def log_dd_accurate(x):
    """``log(x)`` as a double-double good to about 2**-70, for finite ``x > 0``."""
    k, m = _decompose(x)
    f = m - 1.0
    # s = f / (2 + f) as a double-double (one division)
    dh, dl = fast_two_sum(2.0, f)
    inv = 1.0 / dh
    sh = f * inv
    ph, pe = two_prod(sh, dh)
    sl = ((f - ph) - pe - sh * dl) * inv
    zh, zl = two_prod(sh, sh)
    zl = mla(2.0 * sh, sl, zl)
    s3h, s3l = dd_mul(sh, sl, zh, zl)
    # c = 2/3 + 2z/5 + z*z*R(z) as a double-double (z*z*R is 2**-11 of c)
    z = zh
    R = mla(z, mla(z, mla(z, mla(z, mla(z, mla(z, mla(z, R7, R6), R5), R4), R3), R2), R1), R0)
    th, tl = two_prod(TWO_FIFTHS, zh)
    tl += TWO_FIFTHS * zl + TWO_FIFTHS_L * zh
    ch, cl = fast_two_sum(TWO_THIRDS, th)
    cl += TWO_THIRDS_L + tl + z * z * R
    # log(m) = 2s + s**3 * c
    th, tl = dd_mul(s3h, s3l, ch, cl)
    h, l = dd_add(2.0 * sh, 2.0 * sl, th, tl)
    # + k*ln2
    kf = int_to_float(k)
    kh = kf * LN2_HI
    kl, kle = two_prod(kf, LN2_LO)
    kle += kf * LN2_LO2
    kh, kl = fast_two_sum(kh, kl)
    return dd_add(kh, kl + kle, h, l)


@kernel
def _pow_special(x, y, r):
    """C99 F.9.4.4 applied to ``r``, a kernel value of ``|x|**y`` for finite nonzero x."""
    ax = fabs(x)
    # |x| = 0 or inf: log is -inf/inf, so y*log|x| and exp give 0/inf
    lz = -_INF if ax == 0.0 else _INF
    e = y * lz
    r = (0.0 if e < 0.0 else _INF) if (ax == 0.0 or ax == _INF) else r
    # y = +-inf
    r = (0.0 if (ax < 1.0) == (y > 0.0) else _INF) if fabs(y) == _INF else r
    # sign and domain for x < 0 (and -0, -inf)
    y_int = trunc(y) == y
    hy = 0.5 * y
    y_odd = y_int and (trunc(hy) != hy) and fabs(y) < 9007199254740992.0
    r = -r if (f2i(x) < 0 and y_odd) else r
    r = _NAN if (x < 0.0 and x > -_INF and not y_int and fabs(y) < _INF) else r
    r = _NAN if (x != x or y != y) else r
    # pow(+-1, +-inf) = 1, pow(1, y) = 1, pow(x, +-0) = 1
    r = 1.0 if (ax == 1.0 and fabs(y) == _INF) else r
    r = 1.0 if (x == 1.0 or y == 0.0) else r
    return r


@kernel
def pow64(x, y):
    lh, ll = log_dd_accurate(fabs(x))
    zh, zl = two_prod(lh, y)
    zl = mla(ll, y, zl)
    zh, zl = fast_two_sum(zh, zl)
    return _pow_special(x, y, exp_dd(zh, zl))


@kernel
def pow32(x, y):
    """float32 pow: ``exp(y*log|x|)`` in plain float64 is good to 2**-45 here
    (|y*log|x|| < 110 for float32 results), far below float32's 2**-24."""
    xd = np.float64(x)
    yd = np.float64(y)
    lh, ll = log_dd(fabs(xd))
    r = exp64(yd * lh)
    return np.float32(_pow_special(xd, yd, r))
