"""W7: per-node weighted gather over CSR neighbours with skewed degrees."""
import numpy as np

from .harness import Bar, Tolerance, jax_tool, lanewise_tool, numba_tool

ID = "W7"
TITLE = "CSR weighted gather, skewed degrees"
SIZES = {"full": 1_000_000, "quick": 100_000, "tiny": 256}
MEAN_DEGREE, SIGMA = 16.0, 1.5  # lognormal degrees: median ~5, max ~10^4 at 10^6 nodes
REF = "scipy-csr"
TOL = Tolerance(rtol=1e-9, atol=1e-12)
BAR = Bar(peer="fastest", factor=1.0, text="≤ 1.0× the fastest other tool")


def node(start, stop, indices, w, x):
    s = 0.0
    for k in range(start, stop):
        s += w[k] * x[indices[k]]
    return s


def setup(n, seed=7):
    rng = np.random.default_rng(seed)
    mu = np.log(MEAN_DEGREE + 0.5) - SIGMA**2 / 2  # +0.5: floor() below
    deg = np.floor(rng.lognormal(mu, SIGMA, n)).astype(np.int64)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg, out=indptr[1:])
    indices = rng.integers(0, n, size=indptr[-1], dtype=np.int64)
    return indptr, indices, rng.random(indptr[-1]), rng.random(n)


def describe(data):
    deg = np.diff(data[0])
    return f"{deg.size:.0e} nodes, {data[1].size:.2e} edges, max deg {deg.max()}"


def numpy_reduceat(data):
    indptr, indices, w, x = data
    out = np.zeros(indptr.size - 1)
    nonempty = indptr[1:] > indptr[:-1]  # reduceat mishandles empty segments
    out[nonempty] = np.add.reduceat(w * x[indices], indptr[:-1][nonempty])
    return out


def scipy_csr(data):
    import scipy.sparse as sp

    indptr, indices, w, x = data
    return sp.csr_array((w, indices, indptr), shape=(x.size, x.size)) @ x


def _numba(numba):
    @numba.njit(parallel=True)
    def gather(indptr, indices, w, x):
        out = np.empty(indptr.size - 1)
        for i in numba.prange(indptr.size - 1):
            s = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                s += w[k] * x[indices[k]]
            out[i] = s
        return out

    return gather


def _jax(jax):
    jnp = jax.numpy

    def gather(indptr, indices, w, x):
        n, e = indptr.shape[0] - 1, indices.shape[0]
        seg = jnp.repeat(jnp.arange(n), jnp.diff(indptr), total_repeat_length=e)
        return jax.ops.segment_sum(w * x[indices], seg, num_segments=n, indices_are_sorted=True)

    return gather


def _lanewise(lw):
    per_node = lw.vmap(node, in_axes=(0, 0, None, None, None))
    return lambda indptr, indices, w, x: per_node(indptr[:-1], indptr[1:], indices, w, x)


def tools():
    return {
        "scipy-csr": scipy_csr,
        "numpy-reduceat": numpy_reduceat,
        "jax-segment_sum": jax_tool(_jax),
        "numba-prange": numba_tool(_numba),
        "lanewise": lanewise_tool(_lanewise),
    }
