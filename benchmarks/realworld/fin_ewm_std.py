"""Exponentially weighted moving standard deviation of daily returns (numbagg's ``move_exp_nanstd``).

One lane = one return series: its own sequential pass over time, skipping missing days (NaN),
the way numbagg's gufunc runs one core-dimension slice. The EWM volatility of a panel of assets.
"""
from __future__ import annotations

import math

import numpy as np

from benchmarks.harness import Tolerance

NAME = "fin_ewm_std"
TITLE = "EWM volatility (NaN-aware)"
DOMAIN = "finance"
SOURCE = (
    "numbagg/numbagg, numbagg/moving_exp.py (move_exp_nanstd) and numbagg/decorators.py (ndmoveexp: "
    "numba.guvectorize(signatures, '(a),(a),()->(a)', nopython=True, target='parallel', fastmath=False "
    "by default)), BSD-3-Clause, (c) Stephan Hoyer and numbagg contributors. numbagg provides xarray's "
    "rolling_exp().std() and pandas-like ewm for NaN-containing arrays. Copied: the kernel body verbatim "
    "(alpha is an array along the core axis, as numbagg broadcasts a scalar alpha), the gufunc built as "
    "ndmoveexp builds it (float64 signature only, cache off), and ndmoveexp.__call__'s broadcast of "
    "alpha and axes= argument for axis=-1."
)
SOURCE_SHORT = "numbagg/numbagg numbagg/moving_exp.py"

NOBS = 2500  # ten years of daily returns
SIZES = {"full": 8000, "quick": 800, "tiny": 8}
TOL = Tolerance(rtol=1e-10, atol=0.0)
HALFLIFE = 20.0


# ------------------------------------------------------------------------------ data
def setup(n):
    """n daily return series (fat-tailed, volatility clustering), ~2% missing days as NaN,
    alpha for a 20-day half-life broadcast along time (as numbagg does), min_weight 0.5."""
    rng = np.random.default_rng(7)
    vol = 0.01 * np.exp(np.cumsum(rng.normal(0.0, 0.05, (n, NOBS)), axis=1) * 0.2)
    returns = vol * rng.standard_t(5.0, (n, NOBS)) * math.sqrt(3.0 / 5.0)
    returns[rng.random((n, NOBS)) < 0.02] = np.nan
    alpha = np.full(NOBS, 1.0 - math.exp(math.log(0.5) / HALFLIFE))
    return returns, alpha, 0.5


def reference(a, alpha, min_weight):
    """The same weighted sums stepped in time, vectorised across the series (NumPy)."""
    n, nobs = a.shape
    out = np.empty((n, nobs))
    sx2 = np.zeros(n)
    sx = np.zeros(n)
    sw = np.zeros(n)
    sw2 = np.zeros(n)
    w = np.zeros(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(nobs):
            d = 1.0 - alpha[i]
            x = a[:, i]
            ok = ~np.isnan(x)
            sx2 = sx2 * d + np.where(ok, x * x, 0.0)
            sx = sx * d + np.where(ok, x, 0.0)
            sw = sw * d + ok
            sw2 = sw2 * (d * d) + ok
            w = w * d + np.where(ok, alpha[i], 0.0)
            mean = sx / sw
            var_biased = sx2 / sw - mean * mean
            bias = 1.0 - sw2 / (sw * sw)
            good = (w >= min_weight) & (bias > 0)
            out[:, i] = np.where(good, np.sqrt(np.where(good, var_biased / bias, 1.0)), np.nan)
    return out


# ------------------------------------------------------------------- the lane (user)
def move_exp_nanstd(a, alpha, min_weight):
    """numbagg's move_exp_nanstd for one series, returning the series of estimates."""
    N = len(a)
    out = np.empty(N)

    sum_x_2 = sum_x = sum_weight = sum_weight_2 = weight = 0.0

    for i in range(N):
        a_i = a[i]
        alpha_i = alpha[i]
        decay = 1.0 - alpha_i

        sum_x_2 *= decay
        sum_x *= decay
        sum_weight *= decay
        sum_weight_2 *= decay**2
        weight *= decay

        if not np.isnan(a_i):
            sum_x_2 += a_i**2
            sum_x += a_i
            sum_weight += 1.0
            sum_weight_2 += 1.0
            weight += alpha_i

        var_biased = (sum_x_2 / sum_weight) - ((sum_x / sum_weight) ** 2)
        bias = 1 - sum_weight_2 / (sum_weight**2)

        if weight >= min_weight and bias > 0:
            out[i] = np.sqrt(var_biased / bias)
        else:
            out[i] = np.nan
    return out


lanes = (move_exp_nanstd,)


def lanewise(lw):
    return lw.vmap(move_exp_nanstd, in_axes=(0, None, None))


def hand_prange(numba):
    lane = numba.njit(error_model="numpy")(move_exp_nanstd)  # 0/0 on the first days: NaN, not an exception

    @numba.njit(parallel=True)
    def run(a, alpha, min_weight):
        n, nobs = a.shape
        out = np.empty((n, nobs))
        for i in numba.prange(n):
            out[i] = lane(a[i], alpha, min_weight)
        return out

    return run


# ------------------------------------------------------------- the project's version
def project(numba):
    from numba import float64

    def move_exp_nanstd_nb(a, alpha, min_weight, out):
        N = len(a)

        sum_x_2 = sum_x = sum_weight = sum_weight_2 = weight = 0.0

        for i in range(N):
            a_i = a[i]
            alpha_i = alpha[i]
            decay = 1.0 - alpha_i

            # decay the values
            sum_x_2 *= decay
            sum_x *= decay
            sum_weight *= decay
            # We decay this twice because we want the weight^2, so need to decay again
            sum_weight_2 *= decay**2
            weight *= decay

            if not np.isnan(a_i):
                sum_x_2 += a_i**2
                sum_x += a_i
                sum_weight += 1.0
                sum_weight_2 += 1.0
                weight += alpha_i

            var_biased = (sum_x_2 / sum_weight) - ((sum_x / sum_weight) ** 2)
            bias = 1 - sum_weight_2 / (sum_weight**2)

            if weight >= min_weight and bias > 0:
                out[i] = np.sqrt(var_biased / bias)
            else:
                out[i] = np.nan

    signature = [(float64[:], float64[:], float64, float64[:])]
    gufunc = numba.guvectorize(signature, "(a),(a),()->(a)", nopython=True, target="parallel",
                               cache=False, fastmath=False)(move_exp_nanstd_nb)

    def run(a, alpha, min_weight):
        axis = -1
        if not isinstance(alpha, np.ndarray):
            alpha = np.broadcast_to(alpha, a.shape[axis])
        axes = [axis, -1, (), axis]
        with np.errstate(invalid="ignore", divide="ignore"):
            return gufunc(a, alpha, min_weight, axes=axes)

    return run
