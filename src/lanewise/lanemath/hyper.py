"""sinh, cosh, tanh, asinh, acosh, atanh for float64.

sinh/cosh use the exp kernels of :mod:`.explog`: ``E = e**|x| = 2**k (1 + p)``
as a double-double, ``1/E`` as a double-double quotient, and the sums
``(E -+ 1/E)/2`` in double-double, so the cancellation of ``sinh`` near 0 costs
nothing and each result is rounded once; tanh is ``1 - 2/(e**2|x| + 1)`` the same way.  ``2**(k-1)`` scales
the sum so ``cosh`` and ``sinh`` overflow exactly where their values do.

asinh/acosh/atanh compute the argument of the logarithm as a double-double
(``|x| + sqrt(x*x + 1)``, ``x + sqrt((x-1)(x+1))``, ``(1+x)/(1-x)``) and take
``log(hi) + lo/hi`` with the double-double log kernel.
"""

from __future__ import annotations

import numpy as np

from ._core import (copysign, dd_add, dd_div, dd_mul, fabs, fast_two_sum, fma, kernel,
                    ldexp_k, pow2i, sqrt, two_prod, two_sum, HAS_FMA)
from .explog import LN2, LN2_L, expm1_core, log_dd, reduce_ln2

_INF = np.inf
_NAN = np.nan
_TINY = 3.725290298461914e-09    # 2**-28: below, sinh/tanh/asinh/atanh(x) round to x
_HUGE = 268435456.0              # 2**28: above, asinh/acosh(x) = log(2|x|)


@kernel
def _exp_parts(a):
    """For ``0 <= a <= 711``: ``(k, eh, el, ih, il)`` with ``e**a = 2**k (eh + el)`` and
    ``e**-a = 2**-k (ih + il)``, both double-doubles."""
    n, k, rh, rl = reduce_ln2(a, 0.0)
    ph, pl = expm1_core(rh, rl)
    eh, el = fast_two_sum(1.0, ph)
    el += pl
    ih = 1.0 / eh
    if HAS_FMA:
        r = fma(-eh, ih, 1.0)
    else:
        q, qe = two_prod(eh, ih)
        r = (1.0 - q) - qe
    il = ih * (r - el * ih)
    return k, eh, el, ih, il


@kernel
def _clamp(a, hi):
    return hi if a > hi else a


@kernel
def cosh64(x):
    a = _clamp(fabs(x), 711.0)
    k, eh, el, ih, il = _exp_parts(a)
    # cosh = 2**(k-1) * (E' + 2**-2k * I'),  E' = eh + el, I' = ih + il
    kk = -2 * k
    kk = -1000 if kk < -1000 else kk   # negligible anyway; never subnormal (slow)
    sc = pow2i(kk)
    h, l = dd_add(eh, el, ih * sc, il * sc)
    return ldexp_k(h + l, k - 1)


@kernel
def sinh64(x):
    a = _clamp(fabs(x), 711.0)
    k, eh, el, ih, il = _exp_parts(a)
    kk = -2 * k
    kk = -1000 if kk < -1000 else kk   # negligible anyway; never subnormal (slow)
    sc = pow2i(kk)
    h, l = dd_add(eh, el, -ih * sc, -il * sc)
    r = copysign(ldexp_k(h + l, k - 1), x)
    return x if fabs(x) < _TINY else r


@kernel
def tanh64(x):
    """tanh|x| = 1 - 2/(e**2|x| + 1): one double-double quotient; the cancellation in
    ``1 - q`` for small |x| is exact in double-double (q is good to 2**-100)."""
    a = _clamp(fabs(x), 40.0)
    n, k, rh, rl = reduce_ln2(a + a, 0.0)
    ph, pl = expm1_core(rh, rl)
    sc = pow2i(k)
    eh, el = fast_two_sum(sc, ph * sc)           # e**2a = 2**k (1 + p), exact scaling
    el += pl * sc
    dh, dl = two_sum(eh, 1.0)
    dl += el
    qh, ql = dd_div(2.0, 0.0, dh, dl)
    h, l = two_sum(1.0, -qh)
    r = copysign(h + (l - ql), x)
    return x if fabs(x) < _TINY else r


@kernel
def _log_of_dd(h, l):
    """log(h + l) as a double-double, for ``h > 0`` finite and ``|l| <= ulp(h)``."""
    a, b = log_dd(h)
    return fast_two_sum(a, b + l / h)


@kernel
def _sqrt_dd(h, l):
    """sqrt(h + l) as a double-double."""
    r = sqrt(h)
    if HAS_FMA:
        d = fma(-r, r, h) + l
    else:
        p, pe = two_prod(r, r)
        d = ((h - p) - pe) + l
    c = d / (r + r)
    return fast_two_sum(r, c if r > 0.0 else 0.0)


@kernel
def asinh64(x):
    a = fabs(x)
    huge = a > _HUGE
    a2 = 1.0 if huge else a           # keep the unused path finite
    p, pe = two_prod(a2, a2)
    u, ue = two_sum(1.0, p)
    sh, sl = _sqrt_dd(u, ue + pe)
    wh, wl = two_sum(a2, sh)
    wl += sl
    wh, wl = fast_two_sum(wh, wl)
    h, l = _log_of_dd(wh, wl)
    # |x| > 2**28: log(2|x|) = log|x| + ln2
    bh, bl = log_dd(a if huge else 1.0)
    bh, bl = dd_add(bh, bl, LN2, LN2_L)
    r = bh + bl if huge else h + l
    r = copysign(r, x)
    r = x if (a < _TINY or not (a < _INF)) else r
    return r


@kernel
def acosh64(x):
    huge = x > _HUGE
    x2 = 1.0 if (huge or not (x >= 1.0)) else x
    mh, ml = two_sum(x2, -1.0)
    ph, pl = two_sum(x2, 1.0)
    qh, ql = dd_mul(mh, ml, ph, pl)
    sh, sl = _sqrt_dd(qh, ql)
    wh, wl = two_sum(x2, sh)
    wl += sl
    wh, wl = fast_two_sum(wh, wl)
    h, l = _log_of_dd(wh, wl)
    bh, bl = log_dd(x if huge else 1.0)
    bh, bl = dd_add(bh, bl, LN2, LN2_L)
    r = bh + bl if huge else h + l
    r = x if x == _INF else r
    r = _NAN if not (x >= 1.0) else r
    return r


@kernel
def atanh64(x):
    a = fabs(x)
    a2 = 0.5 if not (a < 1.0) else a
    nh, nl = two_sum(1.0, a2)
    dh, dl = two_sum(1.0, -a2)
    qh, ql = dd_div(nh, nl, dh, dl)
    h, l = _log_of_dd(qh, ql)
    r = copysign(0.5 * (h + l), x)
    r = x if a < _TINY else r
    r = copysign(_INF, x) if a == 1.0 else r
    r = _NAN if not (a <= 1.0) else r
    return r
