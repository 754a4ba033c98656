"""erf and erfc for float64.

* ``|x| < 3/4``: ``erf(x) = x*(c0 + z*E(z))``, ``z = x*x``, ``E`` a degree-10 minimax
  polynomial (:mod:`._remez`), ``x*c0`` exact (two-product with ``c0 = 2/sqrt(pi)`` as a
  double-double); ``erfc = 1 - erf`` in double-double.
* ``|x| >= 3/4``: ``erfc(|x|) = exp(-x*x) * erfcx(|x|)`` with ``x*x`` exact, the exp
  kernel of :mod:`.explog` left unrounded, and ``erfcx`` from piecewise degree-10
  polynomials on 16 parts of each binade (:mod:`._erfc_table`; the part is a bit field
  of ``x`` and the coefficients are gathered — the one table lookup in lanemath);
  ``erf = 1 - erfc``, ``erfc(-|x|) = 2 - erfc(|x|)``.  The product is a double-double
  rounded once, also when it is subnormal.
"""

from __future__ import annotations

import numpy as np

from ._core import copysign, dd_mul, f2i, fabs, fast_two_sum, i2f, kernel, mla, two_prod, two_sum
from ._erfc_table import ERFCX
from .explog import expm1_core, reduce_ln2, scale_result

_NAN = np.nan
C0H = 1.1283791670955126
C0L = 1.533545961316588e-17
# (erf(x)/x - c0) / x**2 in z = x*x on [0, 9/16]: degree-10 minimax, rel. error 2**-54.6
E0 = -0.37612638903183754
E1 = 0.11283791670955123
E2 = -0.026866170645129306
E3 = 0.005223977625388011
E4 = -0.0008548327015710233
E5 = 0.00012055332336093546
E6 = -1.4925616734874982e-05
E7 = 1.6460987351295314e-06
E8 = -1.6341476970371605e-07
E9 = 1.4477268542737167e-08
E10 = -9.712573055859602e-10

_SMALL = 0.75
_LIMIT = 27.9       # erfc(x) < 2**-1075 beyond: rounds to 0
_FIRST_ROW = 1022 << 4   # bits >> 48 of 0.5
_LAST_ROW = ERFCX.shape[0] - 1


@kernel
def _erf_small(x):
    """erf(x) as a double-double for |x| < 3/4: ``x*(c0 + E0*z) + x*z*z*E'(z)`` with
    the first product in double-double (it is up to a fifth of the result)."""
    zh, zl = two_prod(x, x)
    z = zh
    z2 = z * z
    z4 = z2 * z2
    e1 = (mla(z, E2, E1) + z2 * mla(z, E4, E3)) + z4 * (
        mla(z, E6, E5) + z2 * mla(z, E8, E7) + z4 * mla(z, E10, E9))
    # c0 + E0*z as a double-double
    ph, pe = two_prod(E0, zh)
    pe = mla(E0, zl, pe)
    sh, se = fast_two_sum(C0H, ph)
    sl = se + pe + C0L + z2 * e1
    # times x
    h, l = two_prod(x, sh)
    l = mla(x, sl, l)
    return fast_two_sum(h, l)


@kernel
def _erfc_large(a):
    """``(k, h, l)`` with erfc(a) = 2**k * (h + l), for 3/4 <= a <= 27.9."""
    bits = f2i(a) >> 48
    # Every lane evaluates this (the caller selects), NaN/inf/small ones too:
    # clamp the row so their gathers stay inside the table.
    row = min(max(bits - _FIRST_ROW, 0), _LAST_ROW)
    c = i2f((bits << 48) | 0x800000000000)   # midpoint of a's interval
    t = a - c                                # exact
    C = ERFCX
    q = mla(t, C[row, 11], C[row, 10])
    q = mla(t, q, C[row, 9])
    q = mla(t, q, C[row, 8])
    q = mla(t, q, C[row, 7])
    q = mla(t, q, C[row, 6])
    q = mla(t, q, C[row, 5])
    q = mla(t, q, C[row, 4])
    q = mla(t, q, C[row, 3])
    q = mla(t, q, C[row, 2])
    fh, fl = fast_two_sum(C[row, 0], C[row, 1] + t * q)
    # exp(-a*a), a*a exact
    p, pe = two_prod(a, a)
    n, k, rh, rl = reduce_ln2(-p, -pe)
    ph, pl = expm1_core(rh, rl)
    s, se = fast_two_sum(1.0, ph)
    h, l = dd_mul(s, se + pl, fh, fl)
    return k, h, l


@kernel
def _parts(x):
    """(small, erf_small dd, k, erfc_large dd) for any x (unused path kept finite)."""
    a = fabs(x)
    small = a < _SMALL
    xs = x if small else 0.5
    sh, sl = _erf_small(xs)
    al = _LIMIT if a > _LIMIT else a
    al = 1.0 if small else al                # also maps NaN to a finite value
    k, h, l = _erfc_large(al)
    return small, sh, sl, k, h, l


@kernel
def erf64(x):
    small, sh, sl, k, h, l = _parts(x)
    r_small = sh + sl
    # tiny and subnormal x (keeps -0; the double-double products would underflow)
    r_small = mla(x, C0H, x * C0L) if fabs(x) < 1.0441052251004036e-289 else r_small   # 2**-960
    # 1 - erfc(|x|); erfc(|x|) <= 0.29 here, scaled exactly (normal range)
    sc = i2f((k + 1023) << 52) if k > -1022 else 0.0
    bh, be = two_sum(1.0, -h * sc)
    r_big = copysign(bh + (be - l * sc), x)
    r = r_small if small else r_big
    return x if x != x else r


@kernel
def erfc64(x):
    small, sh, sl, k, h, l = _parts(x)
    # 1 - erf(x) for |x| < 3/4
    ah, ae = two_sum(1.0, -sh)
    r_small = ah + (ae - sl)
    # x >= 3/4: erfc(x) rounded once; x <= -3/4: 2 - erfc(|x|)
    r_pos = scale_result(k, h, l)
    sc = i2f((k + 1023) << 52) if k > -1022 else 0.0
    bh, be = two_sum(2.0, -h * sc)
    r_neg = bh + (be - l * sc)
    r = r_small if small else (r_neg if x < 0.0 else r_pos)
    r = 0.0 if x > _LIMIT else r
    return x if x != x else r
