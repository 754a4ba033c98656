"""Bilateral filter: xarray-spatial's edge-preserving smoothing of a raster with NaN holes.

The lane is one output pixel ``(y, x)``: a Gaussian-weighted mean of its (2r+1)^2 window,
weighted by distance and by value difference, skipping NaN neighbours (``continue``) and
returning NaN at once (``continue`` in the project's loop) for a NaN centre.
"""
from __future__ import annotations

from math import exp, isnan

import numpy as np

from benchmarks.harness import Tolerance

NAME = "img_bilateral"
TITLE = "bilateral filter (NaN-aware window)"
DOMAIN = "image processing / GIS"
SOURCE = (
    "makepath/xarray-spatial, xrspatial/bilateral.py (`_bilateral_numpy`, decorated `@ngjit` = "
    "`numba.jit(nopython=True, nogil=True)` from xrspatial/utils.py), MIT licence, Copyright (c) "
    "makepath. The NumPy backend of `xrspatial.bilateral(agg, sigma_spatial, sigma_range)` with "
    "the default boundary='nan' (Tomasi & Manduchi 1998): each pixel becomes the mean of its "
    "window weighted by exp(-dist^2/2ss^2 - diff^2/2sr^2), NaN neighbours skipped. Changes: "
    "none to the kernel; called directly on the float64 array with radius = ceil(2 sigma_spatial) "
    "as `bilateral()` computes it, without the xarray/dask/cupy dispatch."
)
SOURCE_SHORT = "makepath/xarray-spatial xrspatial/bilateral.py"

SIZES = {"full": 700, "quick": 220, "tiny": 20}  # n x n raster
# Same formula and summation order as the project; lanewise's exp is within 1 ulp of libm.
TOL = Tolerance(rtol=1e-12, atol=1e-12)

SIGMA_SPATIAL = 1.5  # radius = ceil(2 * 1.5) = 3: a 7x7 window
SIGMA_RANGE = 10.0


def setup(n):
    """A float64 elevation-like raster (metres) with a cliff, noise and ~2% NaN (nodata) pixels."""
    rng = np.random.default_rng(11)
    yy, xx = np.meshgrid(np.arange(n, dtype=np.float64), np.arange(n, dtype=np.float64), indexing="ij")
    z = 500.0 + 40.0 * np.sin(yy / 37.0) * np.cos(xx / 53.0) + 60.0 * (xx > 0.6 * n)
    z += rng.normal(0.0, 6.0, size=(n, n))
    z[rng.random((n, n)) < 0.02] = np.nan
    radius = int(np.ceil(2.0 * SIGMA_SPATIAL))
    return z, np.arange(n), np.arange(n), radius, SIGMA_SPATIAL, SIGMA_RANGE


def reference(data, ys, xs, radius, sigma_spatial, sigma_range):
    """NumPy over the window offsets (same order as the loops), on a NaN-padded copy."""
    rows, cols = data.shape
    inv_2_ss = 1.0 / (2.0 * sigma_spatial * sigma_spatial)
    inv_2_sr = 1.0 / (2.0 * sigma_range * sigma_range)
    pad = np.pad(data, radius, constant_values=np.nan)
    w_sum = np.zeros_like(data)
    v_sum = np.zeros_like(data)
    for dy in range(-radius, radius + 1):
        for dx in range(-radius, radius + 1):
            val = pad[radius + dy:radius + dy + rows, radius + dx:radius + dx + cols]
            ok = ~np.isnan(val)
            diff = val - data
            w = np.exp(-(dy * dy + dx * dx) * inv_2_ss - diff * diff * inv_2_sr)
            w_sum += np.where(ok, w, 0.0)
            v_sum += np.where(ok, w * val, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(w_sum > 0.0, v_sum / w_sum, np.nan)
    out[np.isnan(data)] = np.nan
    return out


def project(numba):
    @numba.jit(nopython=True, nogil=True)  # xrspatial.utils.ngjit
    def _bilateral_numpy(data, radius, sigma_spatial, sigma_range):
        rows, cols = data.shape
        out = np.empty_like(data)
        inv_2_ss = 1.0 / (2.0 * sigma_spatial * sigma_spatial)
        inv_2_sr = 1.0 / (2.0 * sigma_range * sigma_range)

        for y in range(rows):
            for x in range(cols):
                center = data[y, x]
                if isnan(center):
                    out[y, x] = np.nan
                    continue

                w_sum = 0.0
                v_sum = 0.0

                y0 = max(y - radius, 0)
                y1 = min(y + radius + 1, rows)
                x0 = max(x - radius, 0)
                x1 = min(x + radius + 1, cols)

                for ny in range(y0, y1):
                    for nx in range(x0, x1):
                        val = data[ny, nx]
                        if isnan(val):
                            continue
                        dy = ny - y
                        dx = nx - x
                        dist2 = dy * dy + dx * dx
                        diff = val - center
                        range2 = diff * diff

                        w = exp(-dist2 * inv_2_ss - range2 * inv_2_sr)
                        w_sum += w
                        v_sum += w * val

                if w_sum > 0.0:
                    out[y, x] = v_sum / w_sum
                else:
                    out[y, x] = np.nan

        return out

    def run(data, ys, xs, radius, sigma_spatial, sigma_range):
        return _bilateral_numpy(data, radius, sigma_spatial, sigma_range)

    return run


# ------------------------------------------------------------------ the lane
def bilateral_pixel(data, y, x, radius, sigma_spatial, sigma_range):
    """Bilateral-filtered value of pixel (y, x) of ``data``."""
    rows, cols = data.shape
    inv_2_ss = 1.0 / (2.0 * sigma_spatial * sigma_spatial)
    inv_2_sr = 1.0 / (2.0 * sigma_range * sigma_range)
    center = data[y, x]
    if isnan(center):
        return np.nan

    w_sum = 0.0
    v_sum = 0.0
    y0 = max(y - radius, 0)
    y1 = min(y + radius + 1, rows)
    x0 = max(x - radius, 0)
    x1 = min(x + radius + 1, cols)
    for ny in range(y0, y1):
        for nx in range(x0, x1):
            val = data[ny, nx]
            if isnan(val):
                continue
            dy = ny - y
            dx = nx - x
            dist2 = dy * dy + dx * dx
            diff = val - center
            range2 = diff * diff
            w = exp(-dist2 * inv_2_ss - range2 * inv_2_sr)
            w_sum += w
            v_sum += w * val

    if w_sum > 0.0:
        return v_sum / w_sum
    return np.nan


lanes = (bilateral_pixel,)


def lanewise(lw):
    row = lw.vmap(bilateral_pixel, in_axes=(None, None, 0, None, None, None))  # x mapped
    return lw.vmap(row, in_axes=(None, 0, None, None, None, None))  # y mapped


def hand_prange(numba):
    lane = numba.njit(bilateral_pixel)

    @numba.njit(parallel=True)
    def run(data, ys, xs, radius, sigma_spatial, sigma_range):
        out = np.empty((ys.shape[0], xs.shape[0]))
        for r in numba.prange(ys.shape[0]):
            for q in range(xs.shape[0]):
                out[r, q] = lane(data, ys[r], xs[q], radius, sigma_spatial, sigma_range)
        return out

    return run
