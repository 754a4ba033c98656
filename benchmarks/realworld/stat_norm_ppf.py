"""Normal quantile function (inverse CDF) at many probabilities (numba-stats' ``norm.ppf``).

One lane = one probability: Cephes' ``ndtri`` rational approximations, one of three branches
(centre, tail, far tail) per point. Turns uniform draws into normal shocks (Monte Carlo, copulas,
quantile VaR).
"""
from __future__ import annotations

import numpy as np

from benchmarks.harness import Tolerance

NAME = "stat_norm_ppf"
TITLE = "normal quantile (ndtri)"
DOMAIN = "statistics"
SOURCE = (
    "HDembinski/numba-stats, src/numba_stats/norm.py (_ppf, _ppf1), src/numba_stats/special/_ndtri.py "
    "(ndtri, port of Cephes ndtri.c), src/numba_stats/special/_polevl.py (polevl), src/numba_stats/_util.py "
    "(_jit: nb.njit(explicit float32/float64 signatures, inline='always', error_model='numpy'); _wrap), "
    "MIT licence, (c) Hans Dembinski. numba-stats provides fast scipy.stats-like distributions for "
    "fitting (iminuit) and Monte Carlo; norm.ppf(p, loc, scale) runs _wrap(_ppf): flatten, then a "
    "_prange loop in a jitted function without parallel=True (so one thread). Changes: cache off."
)
SOURCE_SHORT = "HDembinski/numba-stats src/numba_stats/special/_ndtri.py"

SIZES = {"full": 1_000_000, "quick": 100_000, "tiny": 64}
TOL = Tolerance(rtol=1e-13, atol=1e-18)  # atol: scale * z + loc cancels near 0
LOC, SCALE = 0.0003, 0.012  # a daily return's distribution


# ------------------------------------------------------------------------------ data
def setup(n):
    """n probabilities: mostly uniform draws, 5% in each tail down to 1e-300 (every branch)."""
    rng = np.random.default_rng(3)
    p = rng.random(n)
    tail = rng.random(n)
    lo, hi = tail < 0.05, tail > 0.95
    p[lo] = 10.0 ** -rng.uniform(1.0, 300.0, lo.sum())
    p[hi] = 1.0 - 10.0 ** -rng.uniform(1.0, 15.0, hi.sum())
    return p, LOC, SCALE


def reference(p, loc, scale):
    from scipy.special import ndtri

    return scale * ndtri(p) + loc


# ------------------------------------------------------------------- the lane (user)
def polevl(x, coefs):
    len_coefs = len(coefs)
    ans = coefs[-1]
    try:
        for i in range(2, len_coefs + 1):
            ans = ans * x + coefs[-i]
    except Exception:  # noqa: BLE001 - numba-stats catches OverflowError this way
        pass
    return ans


def ndtri(y):
    """Inverse of Normal distribution function (numba-stats' port of Cephes)."""
    T = type(y)
    root_2_pi = np.sqrt(T(2 * np.pi))
    exp_neg2 = np.exp(T(-2))

    # approximation for 0 <= abs(y - 0.5) <= 3/8
    p0 = np.array([-1.23916583867381258016e0, 1.39312609387279679503e1, -5.66762857469070293439e1,
                   9.80010754185999661536e1, -5.99633501014107895267e1])
    q0 = np.array([-1.18331621121330003142e0, 1.59056225126211695515e1, -8.20372256168333339912e1,
                   2.00260212380060660359e2, -2.25462687854119370527e2, 8.63602421390890590575e1,
                   4.67627912898881538453e0, 1.95448858338141759834e0, 1.0])
    # Approximation for interval z = sqrt(-2 log y ) between 2 and 8
    p1 = np.array([-8.57456785154685413611e-4, -3.50424626827848203418e-2, -1.40256079171354495875e-1,
                   2.18663306850790267539e0, 1.46849561928858024014e1, 4.40805073893200834700e1,
                   5.71628192246421288162e1, 3.15251094599893866154e1, 4.05544892305962419923e0])
    q1 = np.array([-9.33259480895457427372e-4, -3.80806407691578277194e-2, -1.42182922854787788574e-1,
                   2.50464946208309415979e0, 1.50425385692907503408e1, 4.13172038254672030440e1,
                   4.53907635128879210584e1, 1.57799883256466749731e1, 1.0])
    # Approximation for interval z = sqrt(-2 log y ) between 8 and 64
    p2 = np.array([6.23974539184983293730e-9, 2.65806974686737550832e-6, 3.01581553508235416007e-4,
                   1.23716634817820021358e-2, 2.01485389549179081538e-1, 1.33303460815807542389e0,
                   3.93881025292474443415e0, 6.91522889068984211695e0, 3.23774891776946035970e0])
    q2 = np.array([6.79019408009981274425e-9, 2.89247864745380683936e-6, 3.28014464682127739104e-4,
                   1.34204006088543189037e-2, 2.16236993594496635890e-1, 1.37702099489081330271e0,
                   3.67983563856160859403e0, 6.02427039364742014255e0, 1.0])

    sign_flag = 1

    if y > (T(1) - exp_neg2):
        y = T(1) - y
        sign_flag = 0

    # Shortcut case where we don't need high precision
    if y > exp_neg2:
        y -= T(0.5)
        y2 = y**2
        x = y + y * (y2 * polevl(y2, p0) / polevl(y2, q0))
        x = x * root_2_pi
        return x

    x = np.sqrt(T(-2) * np.log(y))
    z = np.reciprocal(x)
    x0 = x - np.log(x) * z

    if x < T(8.0):  # y > exp(-32) = 1.2664165549e-14
        x1 = z * polevl(z, p1) / polevl(z, q1)
    else:
        x1 = z * polevl(z, p2) / polevl(z, q2)

    x = x0 - x1
    if sign_flag != 0:
        x = -x

    return x


def ppf(p, loc, scale):
    """One probability's quantile: numba-stats' _ppf body for one point."""
    return scale * ndtri(p) + loc


lanes = (ppf, ndtri, polevl)


def lanewise(lw):
    return lw.vmap(ppf, in_axes=(0, None, None))


def hand_prange(numba):
    pv = numba.njit(polevl)
    g = dict(ndtri.__globals__, polevl=pv)
    nd = numba.njit(type(ndtri)(ndtri.__code__, g))
    lane = numba.njit(type(ppf)(ppf.__code__, dict(ppf.__globals__, ndtri=nd)))

    @numba.njit(parallel=True)
    def run(p, loc, scale):
        out = np.empty(p.shape[0])
        for i in numba.prange(p.shape[0]):
            out[i] = lane(p[i], loc, scale)
        return out

    return run


# ------------------------------------------------------------- the project's version
def project(numba):
    nb = numba
    from numba import prange as _prange
    from numba.types import Array

    _Floats = (nb.float32, nb.float64)

    def _readonly_carray(T):
        return Array(T, 1, "A", readonly=True)

    def _jit(arg, cache=True):
        signatures = []
        for T in (nb.float32, nb.float64):
            if arg < 0:
                sig = T(*([T] * -arg))
            else:
                sig = T[:](_readonly_carray(T), *[T for _ in range(arg)])
            signatures.append(sig)
        return nb.njit(signatures, cache=cache, inline="always", error_model="numpy")

    def _wrap(fn):
        def outer(first, *rest):
            shape = np.shape(first)
            first = np.array(first).flatten()
            if first.dtype.kind != "f":
                first = first.astype(float)
            return fn(first, *rest).reshape(shape)

        return outer

    @nb.njit([T(T, _readonly_carray(T)) for T in _Floats], cache=False, inline="never", error_model="numpy")
    def polevl_nb(x, coefs):
        len_coefs = len(coefs)
        ans = coefs[-1]
        try:
            for i in _prange(2, len_coefs + 1):
                ans = ans * x + coefs[-i]
        except Exception:  # noqa: BLE001 - numba-stats catches OverflowError this way
            pass
        return ans

    polevl = polevl_nb

    @nb.njit([T(T) for T in _Floats], cache=False, inline="never", error_model="numpy")
    def ndtri_nb(y):
        T = type(y)
        root_2_pi = np.sqrt(T(2 * np.pi))
        exp_neg2 = np.exp(T(-2))
        p0 = np.array([-1.23916583867381258016e0, 1.39312609387279679503e1, -5.66762857469070293439e1,
                       9.80010754185999661536e1, -5.99633501014107895267e1])
        q0 = np.array([-1.18331621121330003142e0, 1.59056225126211695515e1, -8.20372256168333339912e1,
                       2.00260212380060660359e2, -2.25462687854119370527e2, 8.63602421390890590575e1,
                       4.67627912898881538453e0, 1.95448858338141759834e0, 1.0])
        p1 = np.array([-8.57456785154685413611e-4, -3.50424626827848203418e-2, -1.40256079171354495875e-1,
                       2.18663306850790267539e0, 1.46849561928858024014e1, 4.40805073893200834700e1,
                       5.71628192246421288162e1, 3.15251094599893866154e1, 4.05544892305962419923e0])
        q1 = np.array([-9.33259480895457427372e-4, -3.80806407691578277194e-2, -1.42182922854787788574e-1,
                       2.50464946208309415979e0, 1.50425385692907503408e1, 4.13172038254672030440e1,
                       4.53907635128879210584e1, 1.57799883256466749731e1, 1.0])
        p2 = np.array([6.23974539184983293730e-9, 2.65806974686737550832e-6, 3.01581553508235416007e-4,
                       1.23716634817820021358e-2, 2.01485389549179081538e-1, 1.33303460815807542389e0,
                       3.93881025292474443415e0, 6.91522889068984211695e0, 3.23774891776946035970e0])
        q2 = np.array([6.79019408009981274425e-9, 2.89247864745380683936e-6, 3.28014464682127739104e-4,
                       1.34204006088543189037e-2, 2.16236993594496635890e-1, 1.37702099489081330271e0,
                       3.67983563856160859403e0, 6.02427039364742014255e0, 1.0])

        sign_flag = 1

        if y > (T(1) - exp_neg2):
            y = T(1) - y
            sign_flag = 0

        if y > exp_neg2:
            y -= T(0.5)
            y2 = y**2
            x = y + y * (y2 * polevl(y2, p0) / polevl(y2, q0))
            x = x * root_2_pi
            return x

        x = np.sqrt(T(-2) * np.log(y))
        z = np.reciprocal(x)
        x0 = x - np.log(x) * z

        if x < T(8.0):
            x1 = z * polevl(z, p1) / polevl(z, q1)
        else:
            x1 = z * polevl(z, p2) / polevl(z, q2)

        x = x0 - x1
        if sign_flag != 0:
            x = -x

        return x

    _ndtri = ndtri_nb

    @_jit(-1, cache=False)
    def _ppf1(p):
        T = type(p)
        return T(_ndtri(p))

    @_jit(2, cache=False)
    def _ppf(p, loc, scale):
        r = np.empty_like(p)
        for i in _prange(len(r)):
            r[i] = scale * _ppf1(p[i]) + loc
        return r

    ppf = _wrap(_ppf)

    def run(p, loc, scale):
        return ppf(p, loc, scale)

    return run
