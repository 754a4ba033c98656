"""cbrt and hypot for float64.

cbrt
    fdlibm/FreeBSD ``s_cbrt.c`` (Sun Microsystems, optimised by Bruce D. Evans; "freely
    granted"): a bit-trick first guess, a degree-4 polynomial to 23 bits, rounding to
    22 bits so ``t*t`` is exact, then one Halley step done with an exact FMA residual
    ``x - t**3`` (or fdlibm's Newton step without FMA).  Error about 0.5 ulp.

hypot
    Both arguments scaled by a power of two (exact) into a range where the squares
    neither overflow nor lose their FMA error terms, ``x*x + y*y`` as a double-double,
    and a square root corrected by one Newton step on the double-double; the only
    rounding of consequence is the last one.
"""

from __future__ import annotations

import numpy as np

from ._core import HAS_FMA, copysign, f2i, fabs, fma, i2f, kernel, mla, sqrt, two_prod, two_sum

_B1 = 715094163       # (1023 - 1023/3 - 0.03306235651) * 2**20
_P0 = 1.87595182427177009643
_P1 = -1.88497979543377169875
_P2 = 1.621429720105354466140
_P3 = -0.758397934778766047437
_P4 = 0.145996192886612446982
_DBL_MIN = 2.2250738585072014e-308
_TWO54 = 18014398509481984.0
_INF = np.inf


@kernel
def cbrt64(x):
    ax = fabs(x)
    # scale subnormal and huge arguments by 2**+-54 (cube root 2**+-18): t**3 and the
    # FMA residual below stay normal and finite
    sub = ax < _DBL_MIN
    huge = ax > 1.0715086071862673e+301        # 2**1000
    xs = ax * _TWO54 if sub else ax
    xs = ax * 5.551115123125783e-17 if huge else xs
    hx = f2i(xs) >> 32
    # hx // 3 (a 2**-20-relative error here would not matter: the guess needs 5 bits)
    hx3 = (hx * 0x55555556) >> 32
    t = i2f((hx3 + _B1) << 32)
    r = (t * t) * (t / xs)
    t = t * ((_P0 + r * (_P1 + r * _P2)) + ((r * r) * r) * (_P3 + r * _P4))
    t = i2f((f2i(t) + 0x80000000) & -0x40000000)   # round to 22 bits: t*t exact
    if HAS_FMA:
        s = t * t
        num = fma(-s, t, xs)                       # x - t**3, exact
        t3 = s * t
        t = mla(t, num / (t3 + t3 + xs), t)        # Halley step
    else:
        s = t * t
        r = xs / s
        w = t + t
        r = (r - t) / (w + r)
        t = t + t * r
    t = t * 3.814697265625e-06 if sub else t       # 2**-18
    t = t * 262144.0 if huge else t                # 2**18
    res = copysign(t, x)
    return x + x if (ax == 0.0 or not (ax < _INF)) else res


_BIG = 3.273390607896142e+150      # 2**500
_SMALL = 3.4996011596528147e-136   # 2**-450
_DOWN = 2.409919865102884e-181     # 2**-600
_UP = 4.149515568880993e+180       # 2**600


@kernel
def hypot64(x, y):
    ax = fabs(x)
    ay = fabs(y)
    big = ax if ax > ay else ay
    small = ay if ax > ay else ax
    s = _DOWN if big > _BIG else (_UP if big < _SMALL else 1.0)
    inv = _UP if big > _BIG else (_DOWN if big < _SMALL else 1.0)
    b = big * s
    c = small * s
    p1, e1 = two_prod(b, b)
    p2, e2 = two_prod(c, c)
    h, l = two_sum(p1, p2)
    l += e1 + e2
    r = sqrt(h)
    if HAS_FMA:
        d = fma(-r, r, h) + l
    else:
        q, qe = two_prod(r, r)
        d = ((h - q) - qe) + l
    r = r + d / (r + r)
    r = r * inv
    r = big if small == 0.0 else r                 # also keeps hypot(0, 0) = 0
    r = _INF if (ax == _INF or ay == _INF) else r
    return r
