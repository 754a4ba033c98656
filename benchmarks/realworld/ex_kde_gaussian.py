"""Gaussian kernel density estimate with per-sample bandwidths (Numba's public examples' problem).

Each lane is one evaluation point; it loops over every sample (passed whole), so a few
thousand lanes each do thousands of ``exp``: few lanes, heavy ones.
"""
from __future__ import annotations

import math

import numpy as np

from benchmarks.harness import Tolerance

NAME = "ex_kde_gaussian"
TITLE = "Gaussian KDE, per-sample bandwidths"
DOMAIN = "statistics"
SOURCE = (
    "The problem of numba/numba-examples examples/density_estimation/kernel (BSD-2-Clause): a "
    "Gaussian KDE at evaluation points with one bandwidth per sample; the Numba version is a "
    "prange over evaluation points with an inner loop over samples. Written here from that "
    "description, not copied."
)
SOURCE_SHORT = "numba/numba-examples density_estimation/kernel"
SIZES = {"full": 10_000, "quick": 2_000, "tiny": 16}
TOL = Tolerance(rtol=1e-9, atol=1e-12)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def density(x, samples, bandwidths):
    s = 0.0
    for k in range(samples.shape[0]):
        u = (x - samples[k]) / bandwidths[k]
        s += math.exp(-0.5 * u * u) * INV_SQRT_2PI / bandwidths[k]
    return s / samples.shape[0]


lanes = (density,)


def setup(n):
    rng = np.random.default_rng(9)
    samples = rng.normal(0.0, 5.0, n)
    return rng.normal(0.0, 5.0, n), samples, np.full(n, 1.06 * n ** -0.2 * 5.0)


def reference(x, samples, bandwidths):
    out = np.empty(x.size)
    for s in range(0, x.size, 512):
        u = (x[s:s + 512, None] - samples) / bandwidths
        out[s:s + 512] = (np.exp(-0.5 * u * u) * INV_SQRT_2PI / bandwidths).sum(1) / samples.size
    return out


def _prange(numba):
    lane = numba.njit(density)

    @numba.njit(parallel=True)
    def kde(x, samples, bandwidths):
        out = np.empty_like(x)
        for i in numba.prange(x.shape[0]):
            out[i] = lane(x[i], samples, bandwidths)
        return out

    return kde


project = hand_prange = _prange


def lanewise(lw):
    return lw.vmap(density, in_axes=(0, None, None))
