"""UMAP's per-node kernel bandwidths on the k-nearest-neighbour graph (``smooth_knn_dist``).

For every node of the kNN graph: rho = distance to the first non-zero neighbour, then a
binary search (at most 64 halvings, leaving early once sum_j exp(-(d_j - rho)/sigma) is
within 1e-5 of log2(k)) for sigma. The lane is one node (its row of kNN distances); each
lane leaves its search after its own number of steps.
"""
from __future__ import annotations

import numpy as np

from benchmarks.harness import Tolerance

NAME = "ml_umap_smooth_knn"
TITLE = "UMAP kNN-graph bandwidths (binary search, early exit)"
DOMAIN = "machine learning / graphs"
SOURCE = (
    "lmcinnes/umap, umap/umap_.py (`smooth_knn_dist`, `@numba.njit(locals={psum, lo, mid, hi: "
    "float32})`, serial: its comment says parallel=True decreased performance), BSD-3-Clause "
    "licence, Copyright (c) 2017 Leland McInnes. `fuzzy_simplicial_set` calls it on the kNN "
    "distances to weight the graph's edges. Changes: the released decorator also has "
    "fastmath=True, whose no-infinities flag breaks its `hi == NPY_INFINITY` test on Numba >= 0.62: "
    "sigma = inf (umap issue #1216; measured here: 111 of 100k rows). We use the fix (UMAP PR "
    "#1217, scanpy's patch): the same njit without fastmath. Called as UMAP calls it, "
    "smooth_knn_dist(knn_dists, float(n_neighbors), local_connectivity=1.0); the lanewise and "
    "prange versions get np.mean(knn_dists), which the kernel computes first, as an argument."
)
SOURCE_SHORT = "lmcinnes/umap umap/umap_.py"

SMOOTH_K_TOLERANCE = 1e-5
MIN_K_DIST_SCALE = 1e-3
NPY_INFINITY = np.inf

SIZES = {"full": 100_000, "quick": 10_000, "tiny": 64}  # nodes, 15 neighbours each
N_NEIGHBORS = 15
# The search stops within 1e-5 of its target; the project does it in float32 (its locals),
# the lane in float64 (the reference too): where one stops a halving before the other,
# sigma differs at the 1e-5 level.
TOL = Tolerance(rtol=2e-4, atol=1e-6)


def setup(n):
    """float32 kNN distances (n, 15), each row sorted, self-distance 0 first; a few rows with
    duplicate points (zero distances) and a few isolated (all zero) rows for the branches."""
    rng = np.random.default_rng(17)
    scale = rng.lognormal(0.0, 0.6, size=(n, 1))
    dim = rng.uniform(2.0, 12.0, size=(n, 1))  # local intrinsic dimension
    d = scale * rng.uniform(0.05, 1.0, size=(n, N_NEIGHBORS)) ** (1.0 / dim)
    d[:, 0] = 0.0
    d = np.sort(d, axis=1)
    dup = rng.random(n) < 0.02
    d[dup, 1:3] = 0.0
    d[rng.random(n) < 0.002] = 0.0
    d = np.sort(d, axis=1).astype(np.float32)
    return d, float(N_NEIGHBORS), np.mean(d)


def reference(distances, k, mean_distances):
    """All rows at once in float64 NumPy: the same bisection, each row frozen when it stops."""
    d = distances.astype(np.float64)
    n = d.shape[0]
    target = np.log2(k)
    pos = d > 0.0
    first = np.argmax(pos, axis=1)
    rho = np.where(pos.any(axis=1), d[np.arange(n), first], 0.0)  # local_connectivity = 1
    lo, hi, mid = np.zeros(n), np.full(n, np.inf), np.ones(n)
    active = np.ones(n, dtype=bool)
    dd = d[:, 1:] - rho[:, None]
    for _ in range(64):
        with np.errstate(over="ignore"):
            psum = np.where(dd > 0, np.exp(-(dd / mid[:, None])), 1.0).sum(axis=1)
        active &= ~(np.abs(psum - target) < SMOOTH_K_TOLERANCE)
        down = active & (psum > target)
        up = active & ~(psum > target)
        hi = np.where(down, mid, hi)
        lo = np.where(up, mid, lo)
        mid = np.where(down | (up & np.isfinite(hi)), (lo + hi) / 2.0, np.where(up, mid * 2, mid))
    floor = np.where(rho > 0.0, MIN_K_DIST_SCALE * d.mean(axis=1), MIN_K_DIST_SCALE * float(mean_distances))
    return np.maximum(mid, floor), rho


def project(numba):
    @numba.njit(
        locals={
            "psum": numba.types.float32,
            "lo": numba.types.float32,
            "mid": numba.types.float32,
            "hi": numba.types.float32,
        },
    )  # benchmarking `parallel=True` shows it to *decrease* performance
    def smooth_knn_dist(distances, k, n_iter=64, local_connectivity=1.0, bandwidth=1.0):
        target = np.log2(k) * bandwidth
        rho = np.zeros(distances.shape[0], dtype=np.float32)
        result = np.zeros(distances.shape[0], dtype=np.float32)

        mean_distances = np.mean(distances)

        for i in range(distances.shape[0]):
            lo = 0.0
            hi = NPY_INFINITY
            mid = 1.0

            # TODO: This is very inefficient, but will do for now. FIXME
            ith_distances = distances[i]
            non_zero_dists = ith_distances[ith_distances > 0.0]
            if non_zero_dists.shape[0] >= local_connectivity:
                index = int(np.floor(local_connectivity))
                interpolation = local_connectivity - index
                if index > 0:
                    rho[i] = non_zero_dists[index - 1]
                    if interpolation > SMOOTH_K_TOLERANCE:
                        rho[i] += interpolation * (
                            non_zero_dists[index] - non_zero_dists[index - 1]
                        )
                else:
                    rho[i] = interpolation * non_zero_dists[0]
            elif non_zero_dists.shape[0] > 0:
                rho[i] = np.max(non_zero_dists)

            for n in range(n_iter):

                psum = 0.0
                for j in range(1, distances.shape[1]):
                    d = distances[i, j] - rho[i]
                    if d > 0:
                        psum += np.exp(-(d / mid))
                    else:
                        psum += 1.0

                if np.fabs(psum - target) < SMOOTH_K_TOLERANCE:
                    break

                if psum > target:
                    hi = mid
                    mid = (lo + hi) / 2.0
                else:
                    lo = mid
                    if hi == NPY_INFINITY:
                        mid *= 2
                    else:
                        mid = (lo + hi) / 2.0

            result[i] = mid

            # TODO: This is very inefficient, but will do for now. FIXME
            if rho[i] > 0.0:
                mean_ith_distances = np.mean(ith_distances)
                if result[i] < MIN_K_DIST_SCALE * mean_ith_distances:
                    result[i] = MIN_K_DIST_SCALE * mean_ith_distances
            else:
                if result[i] < MIN_K_DIST_SCALE * mean_distances:
                    result[i] = MIN_K_DIST_SCALE * mean_distances

        return result, rho

    def run(distances, k, mean_distances):
        return smooth_knn_dist(distances, k, local_connectivity=1.0)

    return run


# ------------------------------------------------------------------ the lane
def smooth_knn_node(ith_distances, k, mean_distances, n_iter=64, local_connectivity=1.0, bandwidth=1.0):
    """(sigma, rho) of one node from its sorted kNN distances (UMAP's loop body)."""
    target = np.log2(k) * bandwidth
    lo = 0.0
    hi = NPY_INFINITY
    mid = 1.0
    rho = 0.0

    non_zero_dists = ith_distances[ith_distances > 0.0]
    if non_zero_dists.shape[0] >= local_connectivity:
        index = int(np.floor(local_connectivity))
        interpolation = local_connectivity - index
        if index > 0:
            rho = non_zero_dists[index - 1]
            if interpolation > SMOOTH_K_TOLERANCE:
                rho += interpolation * (non_zero_dists[index] - non_zero_dists[index - 1])
        else:
            rho = interpolation * non_zero_dists[0]
    elif non_zero_dists.shape[0] > 0:
        rho = np.max(non_zero_dists)

    for n in range(n_iter):
        psum = 0.0
        for j in range(1, ith_distances.shape[0]):
            d = ith_distances[j] - rho
            if d > 0:
                psum += np.exp(-(d / mid))
            else:
                psum += 1.0

        if np.fabs(psum - target) < SMOOTH_K_TOLERANCE:
            break

        if psum > target:
            hi = mid
            mid = (lo + hi) / 2.0
        else:
            lo = mid
            if hi == NPY_INFINITY:
                mid *= 2
            else:
                mid = (lo + hi) / 2.0

    result = mid
    if rho > 0.0:
        mean_ith_distances = np.mean(ith_distances)
        if result < MIN_K_DIST_SCALE * mean_ith_distances:
            result = MIN_K_DIST_SCALE * mean_ith_distances
    else:
        if result < MIN_K_DIST_SCALE * mean_distances:
            result = MIN_K_DIST_SCALE * mean_distances
    return result, rho


lanes = (smooth_knn_node,)


def lanewise(lw):
    return lw.vmap(smooth_knn_node, in_axes=(0, None, None))


def hand_prange(numba):
    lane = numba.njit(smooth_knn_node)

    @numba.njit(parallel=True)
    def run(distances, k, mean_distances):
        n = distances.shape[0]
        sigma = np.empty(n)
        rho = np.empty(n)
        for i in numba.prange(n):
            sigma[i], rho[i] = lane(distances[i], k, mean_distances)
        return sigma, rho

    return run
