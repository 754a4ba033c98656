"""W5: map-reduce — the sum of W1's f over an n×n grid, nothing materialised."""
import math

import numpy as np

from .harness import Bar, Skip, Tolerance, available_mb, jax_tool, lanewise_tool, numba_tool
from .w1_grid import lane

ID = "W5"
TITLE = "sum of cos(x²+y²)/(1+x²+y²) over the grid"
SIZES = {"full": 20_000, "quick": 2000, "tiny": 64}
MEMORY_SIZES = {"full": (5000, 20_000), "quick": (500, 2000)}  # peak RSS at each: flat in n?
CHUNK_ROWS = 256
REF = "numba-prange"
TOL = Tolerance(rtol=1e-9)  # the tools sum in different orders
BAR = Bar(peer="numba-prange", factor=1.0, stretch=0.5, mem_flat=1.05,
          text="≤ 1.0× Numba prange, ≤ 0.5× with vector math; peak memory independent of n")
NOTE = (f"W5: NumPy sums blocks of {CHUNK_ROWS} rows (each block materialised); JAX materialises "
        "the n² grid (8n² bytes; it runs only if that fits 2.5 times in available memory); Numba "
        "and lanewise keep nothing. The peak-RSS-vs-n table probes every n in a fresh process "
        "with an empty lanewise cache, so lanewise compiles in the probe as Numba does (the "
        "\"peak MB\" column shares the run's warm cache); lanewise's memory target asks the peak "
        "at the largest n to be within 5% of the peak at the smallest.")


def setup(n):
    x = np.linspace(-2.0, 2.0, n)
    return x, x.copy()


def describe(data):
    return f"{data[0].size}×{data[1].size} = {data[0].size * data[1].size:.1e} lanes"


def numpy_chunked(data):
    x, y = data
    y2 = y * y
    total = 0.0
    for i in range(0, x.size, CHUNK_ROWS):
        r = (x[i:i + CHUNK_ROWS] ** 2)[:, None] + y2[None, :]
        c = np.cos(r)
        r += 1.0
        c /= r
        total += c.sum()
    return np.asarray(total)


def _numba(numba):
    @numba.njit(parallel=True)
    def grid_sum(x, y):
        s = 0.0
        for i in numba.prange(x.size):
            for j in range(y.size):
                r = x[i] * x[i] + y[j] * y[j]
                s += math.cos(r) / (1 + r)
        return s

    return grid_sum


def _jax(jax):
    def f(x, y):
        r = x * x + y * y
        return jax.numpy.cos(r) / (1 + r)

    return lambda x, y: jax.vmap(jax.vmap(f, in_axes=(None, 0)), in_axes=(0, None))(x, y).sum()


def jax_vmap_sum(data):
    need = 8 * data[0].size * data[1].size / 2**20
    if 2.5 * need > available_mb():
        raise Skip(f"needs ~{need:.0f} MB for the grid; {available_mb():.0f} MB available")
    return _jax_tool(data)


_jax_tool = jax_tool(_jax)


def _lanewise(lw):
    return lw.reduce(lw.vmap(lw.vmap(lane, in_axes=(None, 0)), in_axes=(0, None)), "sum")


def tools():
    return {
        "numpy-chunked": numpy_chunked,
        "numba-prange": numba_tool(_numba),
        "jax-vmap-sum": jax_vmap_sum,
        "lanewise": lanewise_tool(_lanewise),
    }
