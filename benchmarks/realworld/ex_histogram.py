"""A histogram of uniform bins (Numba's public examples' problem), as a segmented sum.

Each lane is one value: it computes its bin and contributes 1 to it (``segments=``); the
project's Numba version is the serial loop of the example, and a parallel one with
per-thread histograms is what a Numba user writes for many cores.
"""
from __future__ import annotations

import numpy as np

from benchmarks.harness import Tolerance

NAME = "ex_histogram"
TITLE = "Histogram, 1000 uniform bins"
DOMAIN = "statistics"
SOURCE = (
    "The problem of numba/numba-examples examples/density_estimation/histogram (BSD-2-Clause): "
    "np.histogram(a, bins) with uniform bins, the last bin closed, a serial loop computing each "
    "value's bin. Here the Numba version keeps one histogram per chunk in a prange loop (what a "
    "Numba user writes for many cores). Written from that description, not copied."
)
SOURCE_SHORT = "numba/numba-examples density_estimation/histogram"
SIZES = {"full": 3_000_000, "quick": 300_000, "tiny": 64}
BINS = 1000
TOL = Tolerance()


def bin_of(x, lo, hi, bins):
    """(bin, 1): the value's bin, the last closed, as np.histogram counts it."""
    if x == hi:
        return bins - 1, 1
    return int(bins * (x - lo) / (hi - lo)), 1


lanes = (bin_of,)


def setup(n):
    a = np.random.default_rng(13).normal(0.0, 5.0, n)
    return a, float(a.min()), float(a.max()), BINS


def reference(a, lo, hi, bins):
    return np.histogram(a, bins, (lo, hi))[0].astype(np.int64)


def _prange(numba):
    @numba.njit(parallel=True)
    def hist(a, lo, hi, bins):
        chunks = 64
        per = np.zeros((chunks, bins), np.int64)
        step = -(-a.shape[0] // chunks)
        for c in numba.prange(chunks):
            for k in range(c * step, min((c + 1) * step, a.shape[0])):
                x = a[k]
                b = bins - 1 if x == hi else int(bins * (x - lo) / (hi - lo))
                per[c, b] += 1
        return per.sum(axis=0)

    return hist


project = hand_prange = _prange


def lanewise(lw):
    return lw.reduce(lw.vmap(bin_of, in_axes=(0, None, None, None)), "sum", segments=BINS)
