"""Issue 42 (correctness round 3): natural programs and out_axes soundness.

* functions passed as unmapped arguments, and library functions as the lane,
  as jax.vmap takes them;
* lw.scan steps that close over lane values, and dict pytrees in lw.scan;
* out_axes=None: refused for every construct that moves a lane value into an
  output (the dependence analysis is conservative), accepted for a scan's
  read-only carry, as in JAX.

Each case is checked against JAX (or NumPy) on the python and cpu backends.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lanewise as lw

BACKENDS = ("python", "cpu")
both_backends = pytest.mark.parametrize("backend", BACKENDS)

X = np.linspace(-1.0, 2.0, 7)
ROWS = np.arange(12.0).reshape(4, 3) / 7.0

# ----------------------------------------------------------------------------- functions as arguments


def apply(f, v):
    return f(v)


def apply_two(v, f, g):
    return f(v) - g(v)


def square(v):
    return v * v


def scaler(k):
    return lambda v: v * k


@both_backends
@pytest.mark.parametrize("f, jf", [(np.sin, jnp.sin), (math.sin, jnp.sin), (square, square),
                                   (lambda v: v * 3.0 + 1.0, lambda v: v * 3.0 + 1.0)],
                         ids=["ufunc", "math", "def", "lambda"])
def test_function_passed_as_an_unmapped_argument(backend, f, jf):
    got = lw.vmap(apply, in_axes=(None, 0), backend=backend)(f, X)
    np.testing.assert_allclose(got, jax.vmap(apply, in_axes=(None, 0))(jf, X), rtol=1e-15, atol=1e-15)


@both_backends
def test_function_arguments_anywhere_in_the_call_and_in_nested_vmaps(backend):
    grid = np.arange(6.0).reshape(2, 3)
    want = jax.vmap(jax.vmap(apply_two, in_axes=(0, None, None)), in_axes=(0, None, None))(grid, jnp.cos, square)
    nest = lw.vmap(lw.vmap(apply_two, in_axes=(0, None, None)), in_axes=(0, None, None), backend=backend)
    np.testing.assert_allclose(nest(grid, np.cos, square), want, rtol=1e-15)


@both_backends
def test_each_function_argument_gets_its_own_kernel(backend):
    mapped = lw.vmap(apply, in_axes=(None, 0), backend=backend)
    for k in (2.0, 3.0, 2.0):  # two closures of one code: not one kernel for both
        np.testing.assert_array_equal(mapped(scaler(k), X), X * k)


@pytest.mark.parametrize("in_axes", [0, (0, 0)])
def test_a_mapped_function_argument_is_refused_naming_it(in_axes):
    with pytest.raises(lw.LaneTypeError, match=r"maps argument f, which is a function.*in_axes=\(None, 0\)"):
        lw.vmap(apply, in_axes=in_axes)(np.sin, X)


# ----------------------------------------------------------------------------- library functions as the lane


@both_backends
def test_library_functions_as_the_lane(backend):
    a, b = ROWS, ROWS[::-1].copy()
    np.testing.assert_allclose(lw.vmap(np.dot, backend=backend)(a, b), jax.vmap(jnp.dot)(a, b), rtol=1e-15)
    np.testing.assert_allclose(lw.vmap(np.outer, backend=backend)(a, b), jax.vmap(jnp.outer)(a, b), rtol=1e-15)
    np.testing.assert_allclose(lw.vmap(np.hypot, backend=backend)(X, X[::-1]), jax.vmap(jnp.hypot)(X, X[::-1]),
                               rtol=1e-15)
    np.testing.assert_allclose(lw.vmap(math.cos, backend=backend)(X), jax.vmap(jnp.cos)(X), rtol=1e-15)
    # An optional positional parameter the caller passes still reaches the function.
    np.testing.assert_array_equal(lw.vmap(np.clip, in_axes=(0, None, None), backend=backend)(ROWS, 0.2, 0.5),
                                  jax.vmap(jnp.clip, in_axes=(0, None, None))(ROWS, 0.2, 0.5))


# ----------------------------------------------------------------------------- scan steps closing over lane values


def ema_filter(row, alpha):
    def step(c, v):
        c = alpha * v + (1 - alpha) * c
        return c, c
    return lw.scan(step, 0.0, row)


def clipped_filter(row, alpha, cap):
    k = alpha * 2.0
    weights = row * 0.5  # an array captured too

    def step(c, i):
        if c > cap:  # two returns, one not a tuple display
            out = (cap, c - cap)
            return out
        return c * k + weights[i], k
    k = k * 0.5  # read when the scan runs, as the closure reads it
    c, ys = lw.scan(step, init=0.0, xs=np.arange(row.shape[0]), reverse=True)
    return c, ys


def jax_ema(row, alpha):
    def step(c, v):
        c = alpha * v + (1 - alpha) * c
        return c, c
    return jax.lax.scan(step, 0.0, row)


def jax_clipped(row, alpha, cap):
    k = alpha * 2.0 * 0.5
    weights = row * 0.5

    def step(c, i):
        return jnp.where(c > cap, cap, c * k + weights[i]), jnp.where(c > cap, c - cap, k)
    return jax.lax.scan(step, 0.0, jnp.arange(row.shape[0]), reverse=True)


@both_backends
def test_scan_step_closing_over_lane_values(backend):
    alphas = np.array([0.1, 0.5, 0.9, 0.3])
    got = lw.vmap(ema_filter, backend=backend)(ROWS, alphas)
    want = jax.vmap(jax_ema)(ROWS, alphas)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-14)
    caps = np.array([0.2, 5.0, 0.4, 1.0])
    got = lw.vmap(clipped_filter, backend=backend)(ROWS * 4, alphas * 3, caps)
    want = jax.vmap(jax_clipped)(ROWS * 4, alphas * 3, caps)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-14)
