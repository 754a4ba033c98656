"""Which sliding windows of a long series are constant (stumpy's ``_rolling_isconstant``).

One lane = one window of m = 100 points: its peak-to-peak range (np.ptp over the window), and
whether it is 0 (a NaN in the window makes it not constant). stumpy runs this before every
matrix profile, to treat flat subsequences (sensor dropouts, stale prices) apart.

The lane below is the natural NumPy-user form: one lane per row of
``sliding_window_view(a, w)``. That view is not C-contiguous (strides (8, 8)), so Numba types
each lane's row as an 'A'-layout array and ``np.ptp`` over it runs ~2.5x slower than over the
project's contiguous ``a[i : i + w]`` slice. The other natural form,
``lw.vmap(lambda a, i, w: np.ptp(a[i:i + w]) == 0, in_axes=(None, 0, None))(a, np.arange(l), w)``,
runs at the project's speed (measured 0.011 s vs 0.014 s single-threaded, n = 200,000).
"""
from __future__ import annotations

import numpy as np

from benchmarks.harness import Tolerance

NAME = "stat_rolling_isconstant"
TITLE = "rolling isconstant (window ptp)"
DOMAIN = "time series"
SOURCE = (
    "TDAmeritrade/stumpy, stumpy/core.py (_rolling_isconstant: njit(parallel=True, "
    "fastmath=config.STUMPY_FASTMATH_FLAGS = {'nsz', 'arcp', 'contract', 'afn', 'reassoc'}), prange over "
    "the windows of np.ptp(a[i : i + w]); rolling_isconstant wraps it in np.apply_along_axis), "
    "BSD-3-Clause, (c) TD Ameritrade. stumpy calls it from process_isconstant / preprocess_diagonal "
    "before stump, mass and motif search, to mark constant subsequences. Changes: cache off; the "
    "default-argument checks of rolling_isconstant are left out (a 1-D series, the default function)."
)
SOURCE_SHORT = "TDAmeritrade/stumpy stumpy/core.py"

WINDOW = 100
SIZES = {"full": 2_000_000, "quick": 200_000, "tiny": 400}
TOL = Tolerance()  # booleans: exact


# ------------------------------------------------------------------------------ data
def setup(n):
    """A price series on a 0.01 tick grid with flat stretches (stale quotes, some longer than
    the window) and a few missing points (NaN); window m = 100."""
    rng = np.random.default_rng(5)
    steps = rng.normal(0.0, 0.02, n)
    steps[rng.random(n) < 0.6] = 0.0  # most ticks do not move the price
    starts = rng.integers(0, n, max(1, n // 5000))
    for s in starts:  # stale stretches of 50 to 400 points
        steps[s:s + rng.integers(50, 400)] = 0.0
    price = np.round(100.0 + np.cumsum(steps), 2)
    price[rng.integers(0, n, max(1, n // 20000))] = np.nan
    return price, WINDOW


def reference(a, w):
    """NumPy over a sliding-window view: max - min per window is 0 (NaN compares False)."""
    windows = np.lib.stride_tricks.sliding_window_view(a, w)
    # as 0/1 integers: harness.compare checks integer results exactly (it cannot subtract booleans)
    return ((windows.max(axis=1) - windows.min(axis=1)) == 0).astype(np.int8)


# ------------------------------------------------------------------- the lane (user)
def isconstant(window):
    """One window: constant when its peak-to-peak range is 0."""
    return np.ptp(window) == 0


lanes = (isconstant,)


def lanewise(lw):
    mapped = lw.vmap(isconstant)

    def run(a, w):
        return mapped(np.lib.stride_tricks.sliding_window_view(a, w))

    return run


def hand_prange(numba):
    lane = numba.njit(isconstant)

    @numba.njit(parallel=True)
    def run(a, w):
        n = a.shape[0] - w + 1
        out = np.empty(n, dtype=np.bool_)
        for i in numba.prange(n):
            out[i] = lane(a[i:i + w])
        return out

    return run


# ------------------------------------------------------------- the project's version
def project(numba):
    from numba import njit, prange

    STUMPY_FASTMATH_FLAGS = {"nsz", "arcp", "contract", "afn", "reassoc"}

    @njit(parallel=True, fastmath=STUMPY_FASTMATH_FLAGS)
    def _rolling_isconstant(a, w):
        l = a.shape[0] - w + 1  # noqa: E741 - stumpy's name
        out = np.empty(l)
        for i in prange(l):
            out[i] = np.ptp(a[i : i + w])

        return out == 0

    def rolling_isconstant(a, w):
        isconstant_func = _rolling_isconstant
        axis = a.ndim - 1
        return np.apply_along_axis(lambda a_row, w: isconstant_func(a_row, w), axis=axis, arr=a, w=w)

    return rolling_isconstant
