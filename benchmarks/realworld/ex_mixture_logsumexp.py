"""Log-density of a 3-component Gaussian mixture per point, by logsumexp.

Each lane builds a 3-element array of the components' log terms from small arrays passed
whole, then ``np.max``, ``np.exp(d - m)``, ``np.sum``: per-lane small-array work, as a
kernel density or mixture model written with NumPy calls inside the lane.
"""
from __future__ import annotations

import math

import numpy as np

from benchmarks.harness import Tolerance

NAME = "ex_mixture_logsumexp"
TITLE = "Gaussian mixture log-density (logsumexp)"
DOMAIN = "statistics / machine learning"
SOURCE = (
    "The logsumexp-of-small-arrays pattern of kernel density and mixture log-likelihoods in "
    "public Numba code (the issue's 'KDE with logsumexp'); the Numba version is the same lane "
    "body in a prange loop. Written here, not copied."
)
SOURCE_SHORT = "mixture log-density (logsumexp pattern)"
SIZES = {"full": 1_000_000, "quick": 100_000, "tiny": 16}
TOL = Tolerance(rtol=1e-12, atol=1e-12)
HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def log_density(x, mu, sigma, log_w):
    d = log_w - 0.5 * ((x - mu) / sigma) ** 2 - np.log(sigma) - HALF_LOG_2PI
    m = np.max(d)
    return m + np.log(np.sum(np.exp(d - m)))


lanes = (log_density,)


def setup(n):
    x = np.random.default_rng(17).normal(0.0, 3.0, n)
    return x, np.array([-2.0, 0.0, 3.0]), np.array([1.0, 0.5, 2.0]), np.log(np.array([0.2, 0.5, 0.3]))


def reference(x, mu, sigma, log_w):
    d = log_w - 0.5 * ((x[:, None] - mu) / sigma) ** 2 - np.log(sigma) - HALF_LOG_2PI
    m = d.max(1)
    return m + np.log(np.exp(d - m[:, None]).sum(1))


def _prange(numba):
    lane = numba.njit(log_density)

    @numba.njit(parallel=True)
    def run(x, mu, sigma, log_w):
        out = np.empty_like(x)
        for i in numba.prange(x.shape[0]):
            out[i] = lane(x[i], mu, sigma, log_w)
        return out

    return run


project = hand_prange = _prange


def lanewise(lw):
    return lw.vmap(log_density, in_axes=(0, None, None, None))
