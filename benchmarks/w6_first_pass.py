"""W6: per row, the first index where the running sum passes the row's threshold."""
import numpy as np

from .harness import Bar, Tolerance, jax_tool, lanewise_tool, numba_tool

ID = "W6"
TITLE = "per-row first index running sum > threshold"
SIZES = {"full": 200_000, "quick": 20_000, "tiny": 64}
WIDTH = 256
REF = "numba-guvectorize"
TOL = Tolerance()  # indices must be identical
BAR = Bar(peer="numba-guvectorize", factor=1.0, text="≤ 1.0× Numba guvectorize")


def first_pass(row, thr):
    s = 0.0
    for k in range(row.shape[0]):
        s += row[k]
        if s > thr:
            return k
    return -1


def setup(n, seed=6):
    rng = np.random.default_rng(seed)
    # mean row sum is 128, so thresholds above it mostly never pass (-1)
    return rng.random((n, WIDTH)), rng.uniform(0.0, 160.0, n)


def describe(data):
    return "{}×{}".format(*data[0].shape)


def numpy_cumsum(data):
    rows, thr = data
    hit = np.cumsum(rows, axis=1) > thr[:, None]
    k = hit.argmax(axis=1)
    return np.where(hit[np.arange(k.size), k], k, -1)


def _numba(numba):
    @numba.guvectorize(["void(float64[:], float64, int64[:])"], "(n),()->()", target="parallel")
    def first(row, thr, out):
        out[0] = -1
        s = 0.0
        for k in range(row.shape[0]):
            s += row[k]
            if s > thr:
                out[0] = k
                break

    return first


def _jax(jax):
    jnp = jax.numpy

    def first(row, thr):
        hit = jnp.cumsum(row) > thr
        k = jnp.argmax(hit)
        return jnp.where(hit[k], k, -1)

    return jax.vmap(first)


def _lanewise(lw):
    return lw.vmap(first_pass)


def tools():
    return {
        "numpy-cumsum-argmax": numpy_cumsum,
        "jax-vmap": jax_tool(_jax),
        "numba-guvectorize": numba_tool(_numba),
        "lanewise": lanewise_tool(_lanewise),
    }
