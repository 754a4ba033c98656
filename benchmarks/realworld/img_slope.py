"""Terrain slope in degrees: xarray-spatial's per-pixel 3x3 Horn stencil over an elevation raster.

The lane is one output pixel ``(y, x)``; it reads its 8 neighbours from the whole raster
(passed unmapped) and returns NaN on the one-pixel border, as the project does.
"""
from __future__ import annotations

import numpy as np

from benchmarks.harness import Tolerance

NAME = "img_slope"
TITLE = "terrain slope (3x3 Horn stencil)"
DOMAIN = "image processing / GIS"
SOURCE = (
    "makepath/xarray-spatial, xrspatial/slope.py (`_cpu`, decorated `@ngjit` = "
    "`numba.jit(nopython=True, nogil=True)` from xrspatial/utils.py), MIT licence, "
    "Copyright (c) makepath. The project's NumPy backend of `xrspatial.slope(agg)`: slope of a "
    "DEM in degrees from the Horn (ArcGIS) 3x3 finite differences, NaN on the border. Changes: "
    "none to the kernel; it is called directly with the raster and the cell sizes that "
    "`slope()` reads from the DataArray's coordinates (`get_dataarray_resolution`), without "
    "the xarray/dask/cupy dispatch."
)
SOURCE_SHORT = "makepath/xarray-spatial xrspatial/slope.py"

SIZES = {"full": 3000, "quick": 950, "tiny": 48}  # n x n raster
# The DEM is float32 (the project casts to float32 and so works on float32 data). Numba types
# `2 * f` (int literal x float32) as float64; lanewise keeps Python literals weak, so the lane
# sums the neighbours in float32 before dividing by the float64 cell size: up to ~1e-4 degrees
# apart on a 1000 m terrain. The project's own float32 output rounds at ~1e-6 relative.
TOL = Tolerance(rtol=1e-5, atol=5e-4)


def setup(n):
    """A float32 DEM (metres): a few random ridges and valleys plus rough noise, 30 m cells."""
    rng = np.random.default_rng(7)
    yy, xx = np.meshgrid(np.arange(n, dtype=np.float64), np.arange(n, dtype=np.float64), indexing="ij")
    dem = np.full((n, n), 1200.0)
    for _ in range(6):
        ky, kx = rng.uniform(-0.02, 0.02, size=2)
        dem += rng.uniform(20.0, 150.0) * np.sin(ky * yy + kx * xx + rng.uniform(0, 2 * np.pi))
    dem += rng.normal(0.0, 0.5, size=(n, n))
    dem = dem.astype(np.float32)
    return dem, np.arange(n), np.arange(n), 30.0, 30.0


def reference(data, ys, xs, cellsize_x, cellsize_y):
    """NumPy slices, float64 arithmetic on the float32 elevations."""
    z = data.astype(np.float64)
    out = np.full(z.shape, np.nan)
    a, b, c = z[2:, :-2], z[2:, 1:-1], z[2:, 2:]
    d, f = z[1:-1, :-2], z[1:-1, 2:]
    g, h, i = z[:-2, :-2], z[:-2, 1:-1], z[:-2, 2:]
    dz_dx = ((c + 2 * f + i) - (a + 2 * d + g)) / (8 * cellsize_x)
    dz_dy = ((g + 2 * h + i) - (a + 2 * b + c)) / (8 * cellsize_y)
    out[1:-1, 1:-1] = np.degrees(np.arctan(np.hypot(dz_dx, dz_dy)))
    return out


def project(numba):
    @numba.jit(nopython=True, nogil=True)  # xrspatial.utils.ngjit
    def _cpu(data, cellsize_x, cellsize_y):
        data = data.astype(np.float32)
        out = np.zeros_like(data, dtype=np.float32)
        out[:] = np.nan
        rows, cols = data.shape
        for y in range(1, rows - 1):
            for x in range(1, cols - 1):
                a = data[y + 1, x - 1]
                b = data[y + 1, x]
                c = data[y + 1, x + 1]
                d = data[y, x - 1]
                f = data[y, x + 1]
                g = data[y - 1, x - 1]
                h = data[y - 1, x]
                i = data[y - 1, x + 1]
                dz_dx = ((c + 2 * f + i) - (a + 2 * d + g)) / (8 * cellsize_x)
                dz_dy = ((g + 2 * h + i) - (a + 2 * b + c)) / (8 * cellsize_y)
                p = (dz_dx * dz_dx + dz_dy * dz_dy) ** .5
                out[y, x] = np.arctan(p) * 57.29578
        return out

    def run(data, ys, xs, cellsize_x, cellsize_y):
        return _cpu(data, cellsize_x, cellsize_y)

    return run


# ------------------------------------------------------------------ the lane
def slope_pixel(data, y, x, cellsize_x, cellsize_y):
    """Slope (degrees) at pixel (y, x) of the raster ``data``; NaN on the border."""
    rows, cols = data.shape
    if y == 0 or x == 0 or y == rows - 1 or x == cols - 1:
        return np.nan
    a = data[y + 1, x - 1]
    b = data[y + 1, x]
    c = data[y + 1, x + 1]
    d = data[y, x - 1]
    f = data[y, x + 1]
    g = data[y - 1, x - 1]
    h = data[y - 1, x]
    i = data[y - 1, x + 1]
    dz_dx = ((c + 2 * f + i) - (a + 2 * d + g)) / (8 * cellsize_x)
    dz_dy = ((g + 2 * h + i) - (a + 2 * b + c)) / (8 * cellsize_y)
    p = (dz_dx * dz_dx + dz_dy * dz_dy) ** .5
    return np.arctan(p) * 57.29578


lanes = (slope_pixel,)


def lanewise(lw):
    row = lw.vmap(slope_pixel, in_axes=(None, None, 0, None, None))  # x mapped
    return lw.vmap(row, in_axes=(None, 0, None, None, None))  # y mapped


def hand_prange(numba):
    lane = numba.njit(slope_pixel)

    @numba.njit(parallel=True)
    def run(data, ys, xs, cellsize_x, cellsize_y):
        out = np.empty((ys.shape[0], xs.shape[0]))
        for r in numba.prange(ys.shape[0]):
            for q in range(xs.shape[0]):
                out[r, q] = lane(data, ys[r], xs[q], cellsize_x, cellsize_y)
        return out

    return run
