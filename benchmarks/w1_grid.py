"""W1: cos(x²+y²)/(1+x²+y²) over linspace(-2, 2, n)², a nested map."""
import math

import numpy as np

from .harness import Bar, Tolerance, jax_tool, lanewise_tool, numba_tool

ID = "W1"
TITLE = "grid cos(x²+y²)/(1+x²+y²)"
SIZES = {"full": 6000, "quick": 1500, "tiny": 64}
SCALING = {"full": (1500, 3000, 6000), "quick": (500, 1000, 1500)}
REF = "numpy-broadcast"
TOL = Tolerance(rtol=1e-12, atol=1e-13)
BAR = Bar(peer="fastest", factor=0.5, mem_factor=1.1,
          text="≤ 0.5× the fastest other tool's time; peak ≤ 1.1× (output + interpreter baseline)")


def lane(x, y):
    r = x * x + y * y
    return math.cos(r) / (1 + r)


def setup(n):
    x = np.linspace(-2.0, 2.0, n)
    return x, x.copy()


def describe(data):
    return f"{data[0].size}×{data[1].size}"


def numpy_broadcast(data):
    x, y = data
    r = (x * x)[:, None] + (y * y)[None, :]
    return np.cos(r) / (1 + r)


def numpy_meshgrid(data):
    xx, yy = np.meshgrid(*data, indexing="ij")
    r = xx * xx + yy * yy
    return np.cos(r) / (1 + r)


def numexpr_(data):
    import numexpr as ne

    x, y = data
    return ne.evaluate("cos(x*x + y*y) / (1 + x*x + y*y)", local_dict={"x": x[:, None], "y": y[None, :]})


def _numba(numba):
    @numba.njit(parallel=True)
    def grid(x, y):
        out = np.empty((x.size, y.size))
        for i in numba.prange(x.size):
            for j in range(y.size):
                r = x[i] * x[i] + y[j] * y[j]
                out[i, j] = math.cos(r) / (1 + r)
        return out

    return grid


def _jax(jax):
    def f(x, y):
        r = x * x + y * y
        return jax.numpy.cos(r) / (1 + r)

    return jax.vmap(jax.vmap(f, in_axes=(None, 0)), in_axes=(0, None))


def _lanewise(lw):
    return lw.vmap(lw.vmap(lane, in_axes=(None, 0)), in_axes=(0, None))


def tools():
    return {
        "numpy-broadcast": numpy_broadcast,
        "numpy-meshgrid": numpy_meshgrid,
        "numexpr": numexpr_,
        "numba-prange": numba_tool(_numba),
        "jax-vmap": jax_tool(_jax),
        "lanewise": lanewise_tool(_lanewise),
    }
