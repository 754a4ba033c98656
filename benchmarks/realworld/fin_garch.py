"""GARCH(1,1) conditional-variance recursion over many return series (arch's ``garch_recursion``).

One lane = one return series: the lane runs arch's sequential variance recursion over the
series' 2,500 daily observations (ten years), with arch's variance bounds at every step.
"""
from __future__ import annotations

import math

import numpy as np

from benchmarks.harness import Tolerance

NAME = "fin_garch"
TITLE = "GARCH(1,1) variance recursion"
DOMAIN = "finance"
SOURCE = (
    "bashtage/arch, arch/univariate/recursions_python.py (garch_recursion_python, jitted as "
    "garch_recursion = jit(..., nopython=True); bounds_check_python jitted with inline='always'), "
    "University of Illinois/NCSA open source licence (BSD-like), (c) Kevin Sheppard. arch uses it in "
    "GARCH.compute_variance on every likelihood evaluation while fitting a GARCH/GJR/TARCH model to "
    "one series; fresids = |resid|**power and sresids = sign(resid) are computed by NumPy before the "
    "call, and var_bounds / backcast come from arch's variance_bounds / backcast (reproduced in setup). "
    "arch fits one series at a time, so the project's version here is its jitted function called once "
    "per series from Python (how a user of arch runs it over a panel), each into its own sigma2 row; "
    "the recursion is unchanged (p=1, o=0, q=1)."
)
SOURCE_SHORT = "bashtage/arch arch/univariate/recursions_python.py"

NOBS = 2500  # ten years of daily returns per series
SIZES = {"full": 4000, "quick": 400, "tiny": 8}
TOL = Tolerance(rtol=1e-12, atol=0.0)


# ------------------------------------------------------------------------------ data
def setup(n):
    """n simulated GARCH(1,1) return series with Student-t shocks, and per-series parameter
    vectors near the true ones (as an optimiser evaluates them), arch's backcast and bounds."""
    rng = np.random.default_rng(20240611)
    omega = rng.uniform(0.01, 0.1, n)
    alpha = rng.uniform(0.03, 0.15, n)
    beta = rng.uniform(0.75, 0.95, n) * (1.0 - alpha)  # alpha + beta < 1
    nu = 6.0
    shocks = rng.standard_t(nu, (n, NOBS)) * math.sqrt((nu - 2.0) / nu)
    resids = np.empty((n, NOBS))
    s2 = omega / (1.0 - alpha - beta)
    for t in range(NOBS):
        resids[:, t] = np.sqrt(s2) * shocks[:, t]
        s2 = omega + alpha * resids[:, t] ** 2 + beta * s2
    parameters = np.stack([omega, alpha, beta], axis=1) * rng.uniform(0.9, 1.1, (n, 3))
    # arch's GARCH.compute_variance inputs (power = 2.0)
    fresids = np.abs(resids) ** 2.0
    sresids = np.sign(resids)
    # arch's GARCH.backcast: EWMA (lambda 0.94) of the first 75 squared residuals
    tau = min(75, NOBS)
    w = 0.94 ** np.arange(tau)
    w = w / w.sum()
    backcast = (resids[:, :tau] ** 2.0) @ w
    # arch's VolatilityProcess.variance_bounds: EWMA variance / 1e6 and * 1e6, clipped
    var_bound = np.empty((n, NOBS))
    var_bound[:, 0] = backcast
    for t in range(1, NOBS):
        var_bound[:, t] = 0.94 * var_bound[:, t - 1] + 0.06 * resids[:, t - 1] ** 2
    var_bounds = np.stack([var_bound / 1e6, var_bound * 1e6], axis=2)
    lower = resids.var(axis=1) / 1e8
    min_upper = 1.0 + (resids**2.0).max(axis=1)
    upper = 1e7 * (1.0 + (resids**2.0).max(axis=1))
    var_bounds[..., 0] = np.maximum(var_bounds[..., 0], lower[:, None])
    var_bounds[..., 1] = np.minimum(np.maximum(var_bounds[..., 1], min_upper[:, None]), upper[:, None])
    return (parameters, fresids, sresids, backcast, np.ascontiguousarray(var_bounds), 1, 0, 1)


def reference(parameters, fresids, sresids, backcast, var_bounds, p, o, q):
    """GARCH(1,1) stepped in time, vectorised across the series (NumPy)."""
    omega, alpha, beta = parameters[:, 0], parameters[:, 1], parameters[:, 2]
    sigma2 = np.empty_like(fresids)
    prev_f, prev_s2 = backcast, backcast
    for t in range(fresids.shape[1]):
        s2 = omega + alpha * prev_f + beta * prev_s2
        lo, hi = var_bounds[:, t, 0], var_bounds[:, t, 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            over = np.where(np.isinf(s2), hi + 1000.0, hi + np.log(s2 / hi))
        s2 = np.where(s2 < lo, lo, np.where(s2 > hi, over, s2))
        sigma2[:, t] = s2
        prev_f, prev_s2 = fresids[:, t], s2
    return sigma2


# ------------------------------------------------------------------- the lane (user)
def bounds_check(sigma2, var_bounds):
    if sigma2 < var_bounds[0]:
        sigma2 = var_bounds[0]
    elif sigma2 > var_bounds[1]:
        if not np.isinf(sigma2):
            sigma2 = var_bounds[1] + np.log(sigma2 / var_bounds[1])
        else:
            sigma2 = var_bounds[1] + 1000
    return sigma2


def garch_recursion(parameters, fresids, sresids, backcast, var_bounds, p, o, q):
    """arch's garch_recursion for one series, returning its conditional variances."""
    nobs = fresids.shape[0]
    sigma2 = np.empty(nobs)
    for t in range(nobs):
        loc = 0
        sigma2[t] = parameters[loc]
        loc += 1
        for j in range(p):
            if (t - 1 - j) < 0:
                sigma2[t] += parameters[loc] * backcast
            else:
                sigma2[t] += parameters[loc] * fresids[t - 1 - j]
            loc += 1
        for j in range(o):
            if (t - 1 - j) < 0:
                sigma2[t] += parameters[loc] * 0.5 * backcast
            else:
                sigma2[t] += parameters[loc] * fresids[t - 1 - j] * (sresids[t - 1 - j] < 0)
            loc += 1
        for j in range(q):
            if (t - 1 - j) < 0:
                sigma2[t] += parameters[loc] * backcast
            else:
                sigma2[t] += parameters[loc] * sigma2[t - 1 - j]
            loc += 1
        sigma2[t] = bounds_check(sigma2[t], var_bounds[t])
    return sigma2


lanes = (garch_recursion, bounds_check)


def lanewise(lw):
    return lw.vmap(garch_recursion, in_axes=(0, 0, 0, 0, 0, None, None, None))


def hand_prange(numba):
    bc = numba.njit(bounds_check)
    g = garch_recursion.__globals__.copy()
    g["bounds_check"] = bc
    lane = numba.njit(type(garch_recursion)(garch_recursion.__code__, g))

    @numba.njit(parallel=True)
    def run(parameters, fresids, sresids, backcast, var_bounds, p, o, q):
        n, nobs = fresids.shape
        out = np.empty((n, nobs))
        for i in numba.prange(n):
            out[i] = lane(parameters[i], fresids[i], sresids[i], backcast[i], var_bounds[i], p, o, q)
        return out

    return run


# ------------------------------------------------------------- the project's version
def project(numba):
    jit = numba.jit

    def bounds_check_python(sigma2, var_bounds):
        if sigma2 < var_bounds[0]:
            sigma2 = var_bounds[0]
        elif sigma2 > var_bounds[1]:
            if not np.isinf(sigma2):
                sigma2 = var_bounds[1] + np.log(sigma2 / var_bounds[1])
            else:
                sigma2 = var_bounds[1] + 1000
        return sigma2

    bounds_check = jit(bounds_check_python, nopython=True, inline="always")

    def garch_recursion_python(parameters, fresids, sresids, sigma2, p, o, q, nobs, backcast, var_bounds):
        for t in range(nobs):
            loc = 0
            sigma2[t] = parameters[loc]
            loc += 1
            for j in range(p):
                if (t - 1 - j) < 0:
                    sigma2[t] += parameters[loc] * backcast
                else:
                    sigma2[t] += parameters[loc] * fresids[t - 1 - j]
                loc += 1
            for j in range(o):
                if (t - 1 - j) < 0:
                    sigma2[t] += parameters[loc] * 0.5 * backcast
                else:
                    sigma2[t] += parameters[loc] * fresids[t - 1 - j] * (sresids[t - 1 - j] < 0)
                loc += 1
            for j in range(q):
                if (t - 1 - j) < 0:
                    sigma2[t] += parameters[loc] * backcast
                else:
                    sigma2[t] += parameters[loc] * sigma2[t - 1 - j]
                loc += 1
            sigma2[t] = bounds_check(sigma2[t], var_bounds[t])

        return sigma2

    garch_recursion_nb = jit(garch_recursion_python, nopython=True)

    def run(parameters, fresids, sresids, backcast, var_bounds, p, o, q):
        n, nobs = fresids.shape
        sigma2 = np.zeros((n, nobs))
        for i in range(n):  # arch: one series per call (GARCH.compute_variance)
            garch_recursion_nb(parameters[i], fresids[i], sresids[i], sigma2[i], p, o, q, nobs,
                               float(backcast[i]), var_bounds[i])
        return sigma2

    return run
