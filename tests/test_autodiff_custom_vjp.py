"""lw.custom_vjp against jax.custom_vjp: the user's (fwd, bwd) pair, not the body,
gives the derivative, in forward and reverse mode, on every backend."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lanewise as lw


@lw.custom_vjp
def norm(x, y):
    return math.sqrt(x * x + y * y)


def _norm_fwd(x, y):
    r = norm(x, y)
    return r, (x, y, r)


def _norm_bwd(res, g):
    x, y, r = res
    return (g * x / r if r > 0.0 else 0.0, g * y / r if r > 0.0 else 0.0)  # 0 at the kink, where JAX gives nan


norm.defvjp(_norm_fwd, _norm_bwd)


@jax.custom_vjp
def norm_jax(x, y):
    return jnp.sqrt(x * x + y * y)


def _norm_jax_fwd(x, y):
    r = norm_jax(x, y)
    return r, (x, y, r)


def _norm_jax_bwd(res, g):
    x, y, r = res
    safe = jnp.where(r > 0.0, r, 1.0)
    return jnp.where(r > 0.0, g * x / safe, 0.0), jnp.where(r > 0.0, g * y / safe, 0.0)


norm_jax.defvjp(_norm_jax_fwd, _norm_jax_bwd)


@lw.custom_vjp
def clipped(x):
    return math.tanh(x) * 2.0


# Not the body's derivative (but linear in g, as a VJP is: lanewise evaluates bwd at g = 1).
clipped.defvjp(lambda x: (clipped(x), x), lambda x, g: (g * min(max(x, -0.5), 0.5),))


@jax.custom_vjp
def clipped_jax(x):
    return jnp.tanh(x) * 2.0


clipped_jax.defvjp(lambda x: (clipped_jax(x), x), lambda x, g: (g * jnp.clip(x, -0.5, 0.5),))


def uses(x, y):
    """A lane calling both inside other arithmetic and a loop: the chain rule around the rules."""
    s = 0.0
    for k in range(3):
        s = s + norm(x * (k + 1.0), y) * clipped(x - y * k)
    return s


def uses_jax(x, y):
    s = 0.0
    for k in range(3):
        s = s + norm_jax(x * (k + 1.0), y) * clipped_jax(x - y * k)
    return s


X = np.array([0.0, -1.5, 0.3, 2.0, 0.0, 0.7])
Y = np.array([0.0, 0.4, -2.0, 1.0, 1.0, 0.0])


@pytest.mark.parametrize("backend", ["python", "cpu"])
@pytest.mark.parametrize("transform", [lw.grad, lw.jacrev, lw.jacfwd])
def test_rules_are_used_as_jax_uses_them(backend, transform):
    got = lw.vmap(transform(uses, argnums=(0, 1)), backend=backend)(X, Y)
    want = jax.vmap(jax.grad(uses_jax, argnums=(0, 1)))(X, Y)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_the_function_itself_and_at_its_kink(backend):
    assert lw.grad(norm, argnums=(0, 1))(0.0, 0.0) == (0.0, 0.0)  # bwd's value, not the body's nan
    assert lw.grad(norm, argnums=(0, 1))(3.0, 4.0) == (0.6, 0.8)
    np.testing.assert_array_equal(lw.vmap(norm, backend=backend)(X, Y), np.hypot(X, Y))  # the body, called
    out, vjp_fun = lw.vjp(norm, 3.0, 4.0)
    assert out == 5.0 and vjp_fun(2.0) == (1.2, 1.6)


@lw.custom_vjp
def power(x, n):
    return x ** n


power.defvjp(lambda x, n: (power(x, n), (x, n)), lambda res, g: (g * res[1] * res[0] ** (res[1] - 1), None))


@pytest.mark.parametrize("backend", ["python", "cpu"])
def test_an_integer_argument_gets_none(backend):
    x = np.array([0.5, 2.0, 3.0])
    got = lw.vmap(lw.grad(power), in_axes=(0, None), backend=backend)(x, 3)
    np.testing.assert_allclose(got, 3 * x ** 2, rtol=1e-15)


@lw.custom_vjp
def bad_arity(x, y):
    return x * y


bad_arity.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g * res[1],))  # one cotangent for two arguments


@lw.custom_vjp
def pair_out(x):
    return x, 2.0 * x


pair_out.defvjp(lambda x: ((x, 2.0 * x), None), lambda res, g: (g,))


@pytest.mark.parametrize("backend", ["python", "cpu"])
@pytest.mark.parametrize("fn, match", [(bad_arity, "must return a tuple of 2 cotangent"),
                                       (pair_out, "fwd rule of pair_out must return .out, residuals.")])
def test_a_malformed_rule_is_a_clear_error(backend, fn, match):
    with pytest.raises(lw.LanewiseError, match=match):
        lw.vmap(lw.jacfwd(fn, argnums=0), backend=backend)(np.ones(2), *([np.ones(2)] if fn is bad_arity else []))
