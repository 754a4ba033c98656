"""Pairwise Hellinger distances: UMAP's chunked parallel "special metric" matrix.

The lane is one pair (row x of X, row y of Y): a loop over the features accumulating
sqrt(x_i y_i) and the two L1 norms, then three branches (both rows empty, one empty, else).
"""
from __future__ import annotations

import numpy as np

from benchmarks.harness import Tolerance

NAME = "ml_umap_hellinger"
TITLE = "pairwise Hellinger distance matrix"
DOMAIN = "machine learning"
SOURCE = (
    "lmcinnes/umap, umap/distances.py (`hellinger`, `@numba.njit()`, and "
    "`chunked_parallel_special_metric`, `@numba.njit(parallel=True, nogil=True)`: 16x16 blocks "
    "of the matrix, row blocks in `prange`), BSD-3-Clause licence, Copyright (c) 2017 Leland "
    "McInnes. UMAP computes the full distance matrix with it for the 'special' metrics "
    "(hellinger, ll_dirichlet, ...) on non-negative float32 data (counts, histograms, topic "
    "mixtures). Changes: none; called as chunked_parallel_special_metric(X, Y) with its default "
    "metric=hellinger."
)
SOURCE_SHORT = "lmcinnes/umap umap/distances.py"

SIZES = {"full": 1500, "quick": 480, "tiny": 20}  # n rows in X and in Y (64 features)
N_FEATURES = 64
# The project stores float32 (rel. 6e-8); both compute sqrt(x*y) in float32 (float32 data) and
# sum it into a float64 accumulator started at 0.0. The reference sums in float64 throughout.
TOL = Tolerance(rtol=2e-6, atol=1e-7)


def setup(n):
    """Two sets of float32 word-frequency-like histograms (sparse Dirichlet rows), two empty rows."""
    rng = np.random.default_rng(5)
    x = rng.dirichlet(np.full(N_FEATURES, 0.3), size=n).astype(np.float32)
    y = rng.dirichlet(np.full(N_FEATURES, 0.3), size=n).astype(np.float32)
    x[rng.random(x.shape) < 0.3] = 0.0  # sparse counts
    y[rng.random(y.shape) < 0.3] = 0.0
    x[n // 3] = 0.0  # an empty document in each set: the branches
    y[n // 2] = 0.0
    return x, y


def reference(x, y):
    """Bhattacharyya coefficients as one float64 matrix product of square roots."""
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    bc = np.sqrt(x64) @ np.sqrt(y64).T
    nx, ny = x64.sum(axis=1)[:, None], y64.sum(axis=1)[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.sqrt(np.maximum(1.0 - bc / np.sqrt(nx * ny), 0.0))
    d = np.where((nx == 0) | (ny == 0), 1.0, d)
    return np.where((nx == 0) & (ny == 0), 0.0, d)


def project(numba):
    @numba.njit()
    def hellinger(x, y):
        result = 0.0
        l1_norm_x = 0.0
        l1_norm_y = 0.0

        for i in range(x.shape[0]):
            result += np.sqrt(x[i] * y[i])
            l1_norm_x += x[i]
            l1_norm_y += y[i]

        if l1_norm_x == 0 and l1_norm_y == 0:
            return 0.0
        elif l1_norm_x == 0 or l1_norm_y == 0:
            return 1.0
        else:
            return np.sqrt(1 - result / np.sqrt(l1_norm_x * l1_norm_y))

    # We can gain efficiency by chunking the matrix into blocks;
    # this keeps data vectors in cache better
    @numba.njit(parallel=True, nogil=True)
    def chunked_parallel_special_metric(X, Y=None, metric=hellinger, chunk_size=16):
        if Y is None:
            XX, symmetrical = X, True
            row_size = col_size = X.shape[0]
        else:
            XX, symmetrical = Y, False
            row_size, col_size = X.shape[0], Y.shape[0]

        result = np.zeros((row_size, col_size), dtype=np.float32)
        n_row_chunks = (row_size // chunk_size) + 1
        for chunk_idx in numba.prange(n_row_chunks):
            n = chunk_idx * chunk_size
            chunk_end_n = min(n + chunk_size, row_size)
            m_start = n if symmetrical else 0
            for m in range(m_start, col_size, chunk_size):
                chunk_end_m = min(m + chunk_size, col_size)
                for i in range(n, chunk_end_n):
                    for j in range(m, chunk_end_m):
                        result[i, j] = metric(X[i], XX[j])
        return result

    def run(x, y):
        return chunked_parallel_special_metric(x, y)

    return run


# ------------------------------------------------------------------ the lane
def hellinger(x, y):
    """Hellinger distance between two non-negative vectors (UMAP's metric, as written there)."""
    result = 0.0
    l1_norm_x = 0.0
    l1_norm_y = 0.0

    for i in range(x.shape[0]):
        result += np.sqrt(x[i] * y[i])
        l1_norm_x += x[i]
        l1_norm_y += y[i]

    if l1_norm_x == 0 and l1_norm_y == 0:
        return 0.0
    elif l1_norm_x == 0 or l1_norm_y == 0:
        return 1.0
    else:
        return np.sqrt(1 - result / np.sqrt(l1_norm_x * l1_norm_y))


lanes = (hellinger,)


def lanewise(lw):
    # d[i, j] = hellinger(x[i], y[j]): rows of y inside, rows of x outside
    return lw.vmap(lw.vmap(hellinger, in_axes=(None, 0)), in_axes=(0, None))


def hand_prange(numba):
    lane = numba.njit(hellinger)

    @numba.njit(parallel=True)
    def run(x, y):
        out = np.empty((x.shape[0], y.shape[0]))
        for i in numba.prange(x.shape[0]):
            for j in range(y.shape[0]):
                out[i, j] = lane(x[i], y[j])
        return out

    return run
