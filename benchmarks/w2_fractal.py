"""W2: escape-time fractal, a per-lane loop with an early return (divergent lanes)."""
import numpy as np

from .harness import Bar, Tolerance, jax_tool, lanewise_tool, numba_tool

ID = "W2"
TITLE = "escape-time fractal, max_iter 500"
SIZES = {"full": 1500, "quick": 300, "tiny": 16}
MAX_ITER = 500
RE, IM = (-2.0, 0.6), (-1.3, 1.3)
REF = "numba-prange"
# Iteration counts are compared exactly and mismatches are reported; a few are
# tolerated because XLA on CPU contracts a*b+c into FMA (numba with
# fastmath={"contract"} reproduces JAX's counts exactly), which moves points on
# the set's boundary by one iteration.
TOL = Tolerance(max_mismatch_frac=1e-4)
BAR = Bar(peer="numba-prange", factor=1.0, stretch=0.4,
          text="≤ 1.0× Numba prange with the scalar path; ≤ 0.4× with SPMD-on-SIMD")


def escape(cr, ci):
    zr = zi = 0.0
    for n in range(MAX_ITER):
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        if zr * zr + zi * zi > 4.0:
            return n
    return MAX_ITER


def setup(n):
    return np.linspace(*RE, n), np.linspace(*IM, n)


def describe(data):
    return f"{data[0].size}×{data[1].size}"


def numpy_masked(data):
    """Iterate only the still-active points (compressed each step)."""
    cr, ci = (a.ravel() for a in np.meshgrid(*data, indexing="ij"))
    idx = np.arange(cr.size)
    out = np.full(cr.size, MAX_ITER, dtype=np.int64)
    zr, zi = np.zeros(cr.size), np.zeros(cr.size)
    for n in range(MAX_ITER):
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        esc = zr * zr + zi * zi > 4.0
        out[idx[esc]] = n
        keep = ~esc
        idx, zr, zi, cr, ci = idx[keep], zr[keep], zi[keep], cr[keep], ci[keep]
    return out.reshape(data[0].size, data[1].size)


def _numba(numba):
    @numba.njit(parallel=True)
    def fractal(cre, cim):
        out = np.empty((cre.size, cim.size), dtype=np.int64)
        for i in numba.prange(cre.size):
            for j in range(cim.size):
                cr, ci = cre[i], cim[j]
                zr = zi = 0.0
                k = MAX_ITER
                for n in range(MAX_ITER):
                    zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
                    if zr * zr + zi * zi > 4.0:
                        k = n
                        break
                out[i, j] = k
        return out

    return fractal


def _jax(jax):
    jnp, lax = jax.numpy, jax.lax

    def esc(cr, ci):
        def cond(s):
            return (s[0] < MAX_ITER) & (s[3] == MAX_ITER)

        def body(s):
            n, zr, zi, res = s
            zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
            return n + 1, zr, zi, jnp.where(zr * zr + zi * zi > 4.0, n, res)

        init = (jnp.int64(0), jnp.float64(0.0), jnp.float64(0.0), jnp.int64(MAX_ITER))
        return lax.while_loop(cond, body, init)[3]

    return jax.vmap(jax.vmap(esc, in_axes=(None, 0)), in_axes=(0, None))


def _lanewise(lw):
    return lw.vmap(lw.vmap(escape, in_axes=(None, 0)), in_axes=(0, None))


def tools():
    return {
        "numpy-masked": numpy_masked,
        "jax-vmap-while_loop": jax_tool(_jax),
        "numba-prange": numba_tool(_numba),
        "lanewise": lanewise_tool(_lanewise),
    }
