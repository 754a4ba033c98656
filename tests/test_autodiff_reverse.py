"""Reverse mode (lw.jacrev, lw.vjp) against JAX (x64), mpmath and lanewise's forward mode."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lanewise as lw
from test_autodiff import CORPUS, IDS, POINTS, _mp_grad, early_return, escape_lane, jax_grad

jax.config.update("jax_enable_x64", True)


@pytest.mark.parametrize("lane,twin", CORPUS, ids=IDS)
def test_jacrev_matches_jax(lane, twin):
    for x, y in POINTS:
        got = lw.jacrev(lane, argnums=(0, 1))(x, y)
        want = jax_grad(twin, argnums=(0, 1))(x, y)
        np.testing.assert_allclose(got, [float(w) for w in want], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_vmapped_jacrev_matches_forward_mode(backend):
    x, y = np.linspace(0.2, 2.5, 40), np.linspace(-1.5, 1.5, 40)
    for lane, _ in CORPUS:
        got = lw.vmap(lw.jacrev(lane, argnums=(0, 1)), backend=backend)(x, y)
        want = lw.vmap(lw.grad(lane, argnums=(0, 1)), backend="python")(x, y)
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-11, atol=1e-11, err_msg=lane.__name__)


@pytest.mark.parametrize("point", [(-0.5, 0.3), (0.2, 0.55), (-1.2, 0.1)])
def test_reverse_through_divergent_loops_matches_mpmath(point):
    np.testing.assert_allclose(lw.jacrev(escape_lane, argnums=(0, 1))(*point), _mp_grad(escape_lane, *point),
                               rtol=1e-9, atol=1e-12)
    for x, y in [(0.5, 0.4), (-0.7, 1.1)]:
        np.testing.assert_allclose(lw.jacrev(early_return, argnums=(0, 1))(x, y), _mp_grad(early_return, x, y),
                                   rtol=1e-9)


def capped_energy(w, x):
    """A per-lane array, a loop that stops when a running sum passes a threshold."""
    s = 0.0
    for i in range(w.shape[0]):
        s += math.sin(w[i] * x) * w[i]
        if s > 3.0:
            break
    return s


def capped_energy_jax(w, x):
    def body(i, carry):
        s, done = carry
        s_next = jnp.where(done, s, s + jnp.sin(w[i] * x) * w[i])
        return s_next, done | (s_next > 3.0)

    return jax.lax.fori_loop(0, w.shape[0], body, (0.0, False))[0]


@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_gradient_with_respect_to_a_per_lane_array(backend):
    rng = np.random.default_rng(0)
    w, x = rng.normal(size=(64, 16)), np.linspace(0.1, 2.0, 64)
    got = lw.vmap(lw.jacrev(capped_energy, argnums=(0, 1)), backend=backend)(w, x)
    want = jax.vmap(jax.grad(capped_energy_jax, argnums=(0, 1)))(w, x)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-14)


def test_vjp_jacobian_structure_and_aux():
    def pair(x, y):
        return (x * y, (math.exp(x), y / x))

    out, pullback = lw.vjp(pair, 1.5, 2.0)
    want_out, want_pullback = jax.vjp(lambda x, y: (x * y, (jnp.exp(x), y / x)), 1.5, 2.0)
    ct = (1.0, (0.5, -2.0))
    np.testing.assert_allclose(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(want_out), rtol=1e-15)
    np.testing.assert_allclose(pullback(ct), [float(v) for v in want_pullback(ct)], rtol=1e-14)
    jac = lw.jacrev(pair, argnums=(0, 1))(1.5, 2.0)
    np.testing.assert_allclose(jax.tree_util.tree_leaves(jac), jax.tree_util.tree_leaves(
        jax.jacrev(lambda x, y: (x * y, (jnp.exp(x), y / x)), argnums=(0, 1))(1.5, 2.0)), rtol=1e-14)

    def with_aux(x):
        return x * x, ("aux", 3)[1]

    assert lw.jacrev(with_aux, has_aux=True)(3.0) == (6.0, 3)


@lw.custom_jvp
def _softplus(x):
    return math.log1p(math.exp(x))


@_softplus.defjvp
def _softplus_rule(primals, tangents):
    (x,), (t,) = primals, tangents
    return _softplus(x), t / (1.0 + math.exp(-x))  # linear in t, as JAX requires


def test_custom_jvp_and_helpers_in_reverse_mode():
    def lane(x, y):
        return _softplus(x * y) * y

    def lane_jax(x, y):
        return jax.nn.softplus(x * y) * y

    for x, y in POINTS:
        np.testing.assert_allclose(lw.jacrev(lane, argnums=(0, 1))(x, y),
                                   [float(v) for v in jax.grad(lane_jax, argnums=(0, 1))(x, y)], rtol=1e-13)


def _model(t, a, b):
    return a * math.exp(-b * t)


def test_jacrev_inside_a_compiled_lane():
    def lane(t, a):
        return lw.jacrev(_model, 2)(t, a, 0.5)

    t = np.linspace(0.0, 2.0, 9)
    np.testing.assert_allclose(lw.vmap(lane, in_axes=(0, None))(t, 2.0), -t * 2.0 * np.exp(-0.5 * t), rtol=1e-14)


def test_reverse_mode_errors_name_the_argument_and_the_line():
    def summed(w):
        return np.sum(w * w)

    with pytest.raises(lw.LaneCompileError, match="not supported in reverse mode") as info:
        lw.jacrev(summed)
    assert "test_autodiff_reverse.py:" in str(info.value)
    with pytest.raises(lw.LaneTypeError, match="argument n is int"):
        lw.jacrev(lambda x, n: x * n, argnums=1)(2.0, 3)
    with pytest.raises(lw.LaneTypeError, match="2-D array"):
        lw.jacrev(capped_energy)(np.ones((2, 2)), 1.0)
    with pytest.raises(lw.LanewiseError, match="argument w is a 2-D array"):
        lw.vmap(lw.jacrev(capped_energy), in_axes=(0, None))(np.ones((3, 2, 2)), 1.0)
