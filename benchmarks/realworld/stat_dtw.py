"""Dynamic time warping distances between two collections of series (aeon's DTW, Sakoe-Chiba band).

One lane = one pair (query series, reference series): a dynamic programme over the two series
with two cost rows allocated per lane, restricted to a 10% Sakoe-Chiba band.
"""
from __future__ import annotations

import math

import numpy as np

from benchmarks.harness import Tolerance

NAME = "stat_dtw"
TITLE = "DTW distance matrix (Sakoe-Chiba band)"
DOMAIN = "time series"
SOURCE = (
    "aeon-toolkit/aeon, aeon/distances/elastic/_dtw.py (_dtw_distance, njit(fastmath=True); "
    "_dtw_from_multiple_to_multiple_distance, njit(fastmath=True, parallel=True) with prange over the "
    "first collection), aeon/distances/pointwise/_squared.py (_univariate_squared_distance, "
    "njit(fastmath=True, inline='always')), aeon/distances/elastic/_bounding_matrix.py "
    "(_sakoe_chiba_bounding), BSD-3-Clause, (c) the scikit-time / aeon developers. aeon uses it in "
    "dtw_pairwise_distance(X, y, window=...) for 1-NN DTW classification, clustering and DTW barycentres. "
    "Changes: cache=True dropped; the band mask (create_bounding_matrix(..., window=0.1), equal lengths) "
    "is built once in setup and passed in instead of being built at the top of the parallel function; "
    "the collections are converted to NumbaList as dtw_pairwise_distance does on every call; all cores "
    "(n_jobs=-1)."
)
SOURCE_SHORT = "aeon-toolkit/aeon aeon/distances/elastic/_dtw.py"

LENGTH = 128  # time points per series
WINDOW = 0.1
SIZES = {"full": 100, "quick": 32, "tiny": 3}
TOL = Tolerance(rtol=1e-12, atol=0.0)


# ------------------------------------------------------------------------------ data
def sakoe_chiba_bounding(x_size, y_size, radius_percent):
    """aeon's _sakoe_chiba_bounding, as plain Python (the band mask, True inside)."""
    if x_size > y_size:
        return sakoe_chiba_bounding(y_size, x_size, radius_percent).T
    matrix = np.full((x_size, y_size), False)
    max_size = max(x_size, y_size) + 1
    shortest_dimension = min(x_size, y_size)
    thickness = int(radius_percent * shortest_dimension)
    for step in range(max_size):
        x_index = math.floor((step / max_size) * x_size)
        y_index = math.floor((step / max_size) * y_size)
        upper = max(0, (x_index - thickness))
        lower = min(x_size, (x_index + thickness + 1))
        matrix[upper:lower, y_index] = True
    return matrix


def setup(n):
    """Two collections of n z-normalised series (smoothed random walks with a warped bump, like
    UCR-style shape data), and the 10% Sakoe-Chiba band mask."""
    rng = np.random.default_rng(11)

    def collection(m):
        t = np.linspace(0.0, 1.0, LENGTH)
        walk = np.cumsum(rng.normal(size=(m, LENGTH)), axis=1)
        kernel = np.ones(5) / 5.0
        walk = np.array([np.convolve(w, kernel, mode="same") for w in walk])
        centre = rng.uniform(0.3, 0.7, (m, 1))
        bump = 4.0 * np.exp(-((t[None, :] - centre) / 0.05) ** 2)
        s = walk + bump
        return (s - s.mean(axis=1, keepdims=True)) / s.std(axis=1, keepdims=True)

    return collection(n), collection(n), np.ascontiguousarray(sakoe_chiba_bounding(LENGTH, LENGTH, WINDOW))


def reference(X, Y, bounding_matrix):
    """The DTW cost recursion over the band |i - j| <= int(0.1 * length), row by row, vectorised
    across all pairs at once (NumPy); cells outside the band are infinite."""
    n, lx = X.shape
    m, ly = Y.shape
    band = int(WINDOW * min(lx, ly))
    prev = np.full((ly + 1, n, m), np.inf)
    prev[0] = 0.0
    for i in range(lx):
        curr = np.full((ly + 1, n, m), np.inf)
        for j in range(max(0, i - band), min(ly, i + band + 1)):
            d = (X[:, i][:, None] - Y[:, j][None, :]) ** 2
            curr[j + 1] = d + np.minimum(np.minimum(prev[j], prev[j + 1]), curr[j])
        prev = curr
    return prev[ly]


# ------------------------------------------------------------------- the lane (user)
def dtw_distance(x, y, bounding_matrix):
    """aeon's _dtw_distance for one pair of univariate series (two cost rows)."""
    if x.shape[0] < y.shape[0]:
        x, y = y, x
        bounding_matrix = bounding_matrix.T

    x_size = x.shape[0]
    y_size = y.shape[0]

    prev = np.full(y_size + 1, np.inf)
    curr = np.full(y_size + 1, np.inf)
    prev[0] = 0.0

    for i in range(x_size):
        curr[0] = np.inf
        for j in range(y_size):
            if bounding_matrix[i, j]:
                diff = x[i] - y[j]
                cost = diff * diff
                min_cost = min(prev[j], prev[j + 1], curr[j])
                curr[j + 1] = cost + min_cost
            else:
                curr[j + 1] = np.inf
        prev[:] = curr[:]

    return prev[y_size]


lanes = (dtw_distance,)


def lanewise(lw):
    return lw.vmap(lw.vmap(dtw_distance, in_axes=(None, 0, None)), in_axes=(0, None, None))


def hand_prange(numba):
    lane = numba.njit(dtw_distance)

    @numba.njit(parallel=True)
    def run(X, Y, bounding_matrix):
        n, m = X.shape[0], Y.shape[0]
        out = np.empty((n, m))
        for i in numba.prange(n):
            for j in range(m):
                out[i, j] = lane(X[i], Y[j], bounding_matrix)
        return out

    return run


# ------------------------------------------------------------- the project's version
def project(numba):
    from numba import njit, prange
    from numba.typed import List as NumbaList

    @njit(fastmath=True, inline="always")
    def _univariate_squared_distance(x, y):
        distance = 0.0
        min_length = min(x.shape[0], y.shape[0])
        for i in range(min_length):
            diff = x[i] - y[i]
            distance += diff * diff
        return distance

    @njit(fastmath=True)
    def _dtw_distance(x, y, bounding_matrix):
        if x.shape[1] < y.shape[1]:
            x, y = y, x
            bounding_matrix = bounding_matrix.T

        x_size = x.shape[1]
        y_size = y.shape[1]

        prev = np.full(y_size + 1, np.inf)
        curr = np.full(y_size + 1, np.inf)
        prev[0] = 0.0

        for i in range(x_size):
            curr[0] = np.inf
            for j in range(y_size):
                if bounding_matrix[i, j]:
                    cost = _univariate_squared_distance(x[:, i], y[:, j])
                    min_cost = min(
                        prev[j],  # Diagonal
                        prev[j + 1],  # Top
                        curr[j],  # Left
                    )
                    curr[j + 1] = cost + min_cost
                else:
                    curr[j + 1] = np.inf
            prev[:] = curr[:]

        return prev[y_size]

    @njit(fastmath=True, parallel=True)
    def _dtw_from_multiple_to_multiple_distance(x, y, bounding_matrix):
        n_cases = len(x)
        m_cases = len(y)
        distances = np.zeros((n_cases, m_cases))
        for i in prange(n_cases):
            for j in range(m_cases):
                x1, y1 = x[i], y[j]
                distances[i, j] = _dtw_distance(x1, y1, bounding_matrix)
        return distances

    def run(X, Y, bounding_matrix):
        # dtw_pairwise_distance: 2-D (n_cases, n_timepoints) collections become NumbaLists of
        # (1, n_timepoints) arrays (_convert_collection_to_numba_list)
        _X = NumbaList(X.reshape(X.shape[0], 1, X.shape[1]))
        _y = NumbaList(Y.reshape(Y.shape[0], 1, Y.shape[1]))
        return _dtw_from_multiple_to_multiple_distance(_X, _y, bounding_matrix)

    return run
