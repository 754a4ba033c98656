"""sin, cos, sincos and tan for one float64.

Argument reduction ``x = n*pi/2 + r`` (``|r| <= pi/4``, ``r`` kept as a double-double):

* ``|x| < 2**30`` — Cody–Waite with a three-double split of pi/2 and exact products
  (FMA or Dekker), good to about 2**-120 absolute, far below the 2**-62 closest
  approach of a double to a multiple of pi/2;
* otherwise (and for inf/NaN) — Payne–Hanek: the exact product of the 53-bit
  significand with a 240-bit window of 2/pi in 24-bit integer limbs.  This is an
  out-of-line scalar function reached through :mod:`._slowpath`, so loops over
  ordinary arguments still vectorise.

Kernels on ``[-pi/4, pi/4]`` are fdlibm's (Sun Microsystems, "Permission to use, copy,
modify, and distribute this software is freely granted"): degree-13/14 minimax
polynomials with remez error below 2**-58 and the tail ``r_lo`` folded in to first
order.  ``tan`` divides double-double sine and cosine kernels (fdlibm's tan kernel
needs two branches).
"""

from __future__ import annotations

import numpy as np

from ._core import (fabs, fast_two_sum, f2i, kernel, mla, round_to_int, two_prod,
                    two_sum, dd_div)
from ._slowpath import vector_callable

TWO_OVER_PI = 0.6366197723675814
PIO2_1 = 1.5707963267948966
PIO2_2 = 6.123233995736766e-17
PIO2_3 = -1.4973849048591698e-33
#: Beyond this, Cody–Waite loses accuracy and the Payne–Hanek slow path takes over.
CW_LIMIT = 1073741824.0  # 2**30

# fdlibm k_sin.c / k_cos.c coefficients
S1 = -1.66666666666666324348e-01
S2 = 8.33333333332248946124e-03
S3 = -1.98412698298579493134e-04
S4 = 2.75573137070700676789e-06
S5 = -2.50507602534068634195e-08
S6 = 1.58969099521155010221e-10
C1 = 4.16666666666666019037e-02
C2 = -1.38888888888741095749e-03
C3 = 2.48015872894767294178e-05
C4 = -2.75573143513906633035e-07
C5 = 2.08757232129817482790e-09
C6 = -1.13596475577881948265e-11

#: 2/pi in 24-bit chunks (the first 64 of fdlibm's ``ipio2`` table).
_TWO_OVER_PI_24 = np.array([
    0xA2F983, 0x6E4E44, 0x1529FC, 0x2757D1, 0xF534DD, 0xC0DB62, 0x95993C, 0x439041,
    0xFE5163, 0xABDEBB, 0xC561B7, 0x246E3A, 0x424DD2, 0xE00649, 0x2EEA09, 0xD1921C,
    0xFE1DEB, 0x1CB129, 0xA73EE8, 0x8235F5, 0x2EBB44, 0x84E99C, 0x7026B4, 0x5F7E41,
    0x3991D6, 0x398353, 0x39F49C, 0x845F8B, 0xBDF928, 0x3B1FF8, 0x97FFDE, 0x05980F,
    0xEF2F11, 0x8B5A0A, 0x6D1F6D, 0x367ECF, 0x27CB09, 0xB74F46, 0x3F669E, 0x5FEA2D,
    0x7527BA, 0xC7EBE5, 0xF17B3D, 0x0739F7, 0x8A5292, 0xEA6BFB, 0x5FB11F, 0x8D5D08,
    0x560330, 0x46FC7B, 0x6BABF0, 0xCFBC20, 0x9AF436, 0x1DA9E3, 0x91615E, 0xE61B08,
    0x659985, 0x5F14A0, 0x68408D, 0xFFD880, 0x4D7327, 0x310606, 0x1556CA, 0x73A8C9,
], dtype=np.int64)


# ------------------------------------------------------------------- argument reduction

@kernel
def reduce_cw(x):
    """Cody–Waite: ``(q, rh, rl)`` with ``x = q*pi/2 + rh + rl`` for ``|x| < CW_LIMIT``."""
    n, q = round_to_int(x * TWO_OVER_PI)
    p1, e1 = two_prod(n, PIO2_1)
    r = x - p1  # exact (Sterbenz) for n != 0
    rh, rl = two_sum(r, -e1)
    p2, e2 = two_prod(n, PIO2_2)
    rh, t = two_sum(rh, -p2)
    rl = rl + t - e2 - n * PIO2_3
    rh, rl = fast_two_sum(rh, rl)
    return q, rh, rl


_M24 = 0xFFFFFF


@kernel
def _bits(d, pos, count):
    """Bits ``[pos, pos + count)`` (count <= 48) of the base-2**24 number ``d``."""
    i = pos // 24
    s = pos - 24 * i
    v = d[i] >> s
    v |= d[i + 1] << (24 - s)
    v |= d[i + 2] << (48 - s)
    return v & ((1 << count) - 1)


@kernel
def reduce_ph(x):
    """Payne–Hanek: ``(q, rh, rl)`` with ``x = q*pi/2 + rh + rl`` for finite ``|x| >= 2**28``.

    Scalar integer code; relative error of ``r`` below 2**-100 for every double.
    """
    ax = fabs(x)
    ix = f2i(ax)
    e2 = (ix >> 52) - 1075                      # ax = m * 2**e2
    m = (ix & 0xFFFFFFFFFFFFF) | 0x10000000000000
    j0 = (e2 - 2) // 24
    if j0 < 0:
        j0 = 0
    ml = (m & _M24, (m >> 24) & _M24, m >> 48)
    # digits of m * W, W = 2/pi chunks j0 .. j0+9 (most significant first)
    d = np.zeros(16, dtype=np.int64)
    for a in range(3):
        for b in range(10):
            d[a + b] += ml[a] * _TWO_OVER_PI_24[j0 + 9 - b]
    for i in range(15):
        d[i + 1] += d[i] >> 24
        d[i] &= _M24
    sh = 24 * (j0 + 10) - e2                    # fractional bits of m * W
    q = _bits(d, sh, 2)
    f1 = _bits(d, sh - 48, 48)
    f2 = _bits(d, sh - 96, 48)
    f3 = _bits(d, sh - 144, 48)
    fh = float(f1) * 3.552713678800501e-15      # 2**-48
    if f1 >= 0x800000000000:
        fh -= 1.0
        q += 1
    fh, fl = two_sum(fh, float(f2) * 1.2621774483536189e-29)      # 2**-96
    fl += float(f3) * 4.484155085839415e-44                       # 2**-144
    fh, fl = fast_two_sum(fh, fl)
    # r = f * pi/2
    rh, rl = two_prod(fh, PIO2_1)
    rl += fh * PIO2_2 + fl * PIO2_1
    rh, rl = fast_two_sum(rh, rl)
    if x < 0.0:
        q = -q
        rh = -rh
        rl = -rl
    return q & 3, rh, rl


# ------------------------------------------------------------------------------ kernels

@kernel
def sin_kernel(x, y):
    """fdlibm ``__sin(x, y, 1)``: sin(x + y) for ``|x| <= pi/4``."""
    z = x * x
    w = z * z
    r = mla(z, mla(z, S4, S3), S2) + z * w * mla(z, S6, S5)
    v = z * x
    return x - ((z * (0.5 * y - v * r) - y) - v * S1)


@kernel
def cos_kernel(x, y):
    """fdlibm ``__cos(x, y)``: cos(x + y) for ``|x| <= pi/4``."""
    z = x * x
    w = z * z
    r = z * mla(z, mla(z, C3, C2), C1) + w * w * mla(z, mla(z, C6, C5), C4)
    hz = 0.5 * z
    w = 1.0 - hz
    return w + (((1.0 - w) - hz) + (z * r - x * y))


@kernel
def sin_kernel_dd(x, y):
    """sin(x + y) as a double-double (relative error about 2**-60), ``|x| <= pi/4``."""
    zh, zl = two_prod(x, x)
    z = zh
    w = z * z
    r = mla(z, mla(z, S4, S3), S2) + z * w * mla(z, S6, S5)
    # x**3 as a double-double, times S1 exactly-ish
    vh, vl = two_prod(zh, x)
    vl = mla(zl, x, vl)
    ph, pl = two_prod(vh, S1)
    pl = mla(vl, S1, pl)
    small = pl + vh * z * r + y * (1.0 - 0.5 * z)
    h, l = fast_two_sum(x, ph)
    return fast_two_sum(h, l + small)


@kernel
def cos_kernel_dd(x, y):
    """cos(x + y) as a double-double (relative error about 2**-60), ``|x| <= pi/4``."""
    zh, zl = two_prod(x, x)
    z = zh
    w = z * z
    r = z * mla(z, mla(z, C3, C2), C1) + w * w * mla(z, mla(z, C6, C5), C4)
    h, l = fast_two_sum(1.0, -0.5 * zh)
    l += -0.5 * zl + z * r - x * y
    return fast_two_sum(h, l)


# --------------------------------------------------------------------- full functions

@kernel
def _sin_reduced(q, rh, rl):
    s = sin_kernel(rh, rl)
    c = cos_kernel(rh, rl)
    v = c if (q & 1) else s
    return -v if (q & 2) else v


@kernel
def _cos_reduced(q, rh, rl):
    s = sin_kernel(rh, rl)
    c = cos_kernel(rh, rl)
    v = s if (q & 1) else c
    return -v if ((q + 1) & 2) else v


@kernel
def _tan_reduced(q, rh, rl):
    sh, sl = sin_kernel_dd(rh, rl)
    ch, cl = cos_kernel_dd(rh, rl)
    odd = (q & 1) != 0
    nh = -ch if odd else sh
    nl = -cl if odd else sl
    dh = sh if odd else ch
    dl = sl if odd else cl
    th, tl = dd_div(nh, nl, dh, dl)
    return th


def _sin_slow_impl(x):
    if not (fabs(x) < np.inf):
        return x - x  # NaN for inf and NaN
    if fabs(x) < CW_LIMIT:
        q, rh, rl = reduce_cw(x)
    else:
        q, rh, rl = reduce_ph(x)
    return _sin_reduced(q, rh, rl)


def _cos_slow_impl(x):
    if not (fabs(x) < np.inf):
        return x - x
    if fabs(x) < CW_LIMIT:
        q, rh, rl = reduce_cw(x)
    else:
        q, rh, rl = reduce_ph(x)
    return _cos_reduced(q, rh, rl)


def _tan_slow_impl(x):
    if not (fabs(x) < np.inf):
        return x - x
    if fabs(x) < CW_LIMIT:
        q, rh, rl = reduce_cw(x)
    else:
        q, rh, rl = reduce_ph(x)
    return _tan_reduced(q, rh, rl)


_sin_slow = vector_callable("sin_slow_f64")
_cos_slow = vector_callable("cos_slow_f64")
_tan_slow = vector_callable("tan_slow_f64")

#: Below this, sin(x) = tan(x) = x and cos(x) = 1 after rounding.
_TINY = 7.450580596923828e-09  # 2**-27


@kernel
def sin64(x):
    q, rh, rl = reduce_cw(x)
    r = _sin_reduced(q, rh, rl)
    r = x if fabs(x) < _TINY else r
    if not (fabs(x) < CW_LIMIT):
        r = _sin_slow(x)
    return r


@kernel
def cos64(x):
    q, rh, rl = reduce_cw(x)
    r = _cos_reduced(q, rh, rl)
    if not (fabs(x) < CW_LIMIT):
        r = _cos_slow(x)
    return r


@kernel
def sincos64(x):
    q, rh, rl = reduce_cw(x)
    s = sin_kernel(rh, rl)
    c = cos_kernel(rh, rl)
    sv = c if (q & 1) else s
    sv = -sv if (q & 2) else sv
    cv = s if (q & 1) else c
    cv = -cv if ((q + 1) & 2) else cv
    sv = x if fabs(x) < _TINY else sv
    if not (fabs(x) < CW_LIMIT):
        sv = _sin_slow(x)
        cv = _cos_slow(x)
    return sv, cv


@kernel
def tan64(x):
    q, rh, rl = reduce_cw(x)
    r = _tan_reduced(q, rh, rl)
    r = x if fabs(x) < _TINY else r
    if not (fabs(x) < CW_LIMIT):
        r = _tan_slow(x)
    return r
