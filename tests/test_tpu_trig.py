"""Bounded cos and sin on backend="tpu" (backends/tpu/trig.py).

Three things are checked against independent references: the bounded functions'
accuracy against float64 NumPy; the soundness of the interval guard (whenever it
says a grid step's trig arguments lie within GUARD, every argument computed from
points inside the given intervals does: hypothesis draws the intervals and the
points); and the kernels, in interpret mode: a grid step whose arguments allow it
gives exactly the bounded function's bits, one with a large argument exactly
``jnp.cos``'s, and every result matches ``backend="python"``.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

pytest.importorskip("jax")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import lanewise as lw  # noqa: E402
from lanewise.backends.tpu import trig  # noqa: E402

ON_CHIP = os.environ.get("LANEWISE_TPU_TESTS_ON_CHIP") == "1" and jax.default_backend() == "tpu"
#: ulps of float64 the bounded functions keep within |x| <= LIMIT (2.1 measured on the chip).
ULPS = 2.5


@pytest.fixture(autouse=True)
def interpret():
    with lw.config.overridden(tpu_interpret=not ON_CHIP, tpu_tile=(8, 128), tpu_block=(8, 128), tpu_unroll=1):
        yield


def ulps(got, exact):
    return np.abs(np.asarray(got, np.float64) - exact) / np.spacing(np.abs(exact).astype(np.float32))


@pytest.mark.parametrize("name", ["cos", "sin"])
def test_bounded_within_ulps_of_float64(name):
    rng = np.random.default_rng(1)
    x = np.concatenate([np.linspace(-trig.LIMIT, trig.LIMIT, 400_001, dtype=np.float32),
                        rng.uniform(-trig.LIMIT, trig.LIMIT, 400_000).astype(np.float32),
                        np.float32(math.pi / 4) * np.arange(-81, 82, dtype=np.float32)])  # octant edges
    got = jax.jit(getattr(trig, f"{name}_bounded"))(jnp.asarray(x))
    assert ulps(got, getattr(np, name)(x.astype(np.float64))).max() <= ULPS


def test_bounded_special_values():
    special = jnp.asarray([np.nan, np.inf, -np.inf, 0.0, -0.0], jnp.float32)
    c, s = np.asarray(trig.cos_bounded(special)), np.asarray(trig.sin_bounded(special))
    assert np.isnan(c[:3]).all() and np.isnan(s[:3]).all()
    assert (c[3:] == 1.0).all()
    assert list(np.signbit(s[3:])) == [False, True]  # sin(-0.0) is -0.0, as math.sin gives


# --- the guard: sound for every interval and point hypothesis draws --------------------------

def _w1(x, y):
    r = x * x + y * y
    return jnp.cos(r) / (1.0 + r)


def _mixed(x, y):
    return jnp.sin(jnp.where(x > y, jnp.sqrt(jnp.abs(x)) * 3.0, x - y)) + jnp.cos(x / (1.0 + y * y))


def _powers(x, y):
    return jnp.cos(x ** 3 - jnp.maximum(x, y) * 2.0) * jnp.sin(jnp.minimum(jnp.exp(y), 40.0))


def _divided(x, y):
    return jnp.cos(x / y)


def _wrapped(x, y):
    k = x.astype(jnp.int32) * 100_000  # wraps at 32 bits for |x| >= 21475
    return jnp.cos(jnp.minimum(k, 5).astype(jnp.float32))


CORPUS = {"w1": _w1, "mixed": _mixed, "powers": _powers, "divided": _divided, "wrapped": _wrapped}


def _arguments(fn, x, y):
    """The values the trig functions of ``fn`` receive at the points (x, y)."""
    taken = []
    real = (jnp.cos, jnp.sin)

    def spy(f):
        return lambda v: (taken.append(np.asarray(v)), f(v))[1]

    try:
        jnp.cos, jnp.sin = spy(real[0]), spy(real[1])
        fn(x, y)
    finally:
        jnp.cos, jnp.sin = real
    return taken


ends = st.floats(-3e4, 3e4, allow_nan=False, width=32)


@pytest.mark.parametrize("name", sorted(CORPUS))
@settings(max_examples=60, deadline=None)
@given(x=st.tuples(ends, ends), y=st.tuples(ends, ends), seed=st.integers(0, 2**32 - 1))
def test_guard_is_sound(name, x, y, seed):
    fn = CORPUS[name]
    (x0, x1), (y0, y1) = sorted(x), sorted(y)
    guard = trig.plan(jax.make_jaxpr(fn)(jnp.zeros(8, jnp.float32), jnp.zeros(8, jnp.float32)))
    assert guard is not None and guard.needed == ((0,) if name == "wrapped" else (0, 1))
    given = [(np.float32(x0), np.float32(x1)), (np.float32(y0), np.float32(y1))]
    if not bool(guard.ok([given[k] for k in guard.needed])):
        return
    rng = np.random.default_rng(seed)
    px = np.clip(np.concatenate([[x0, x1], x0 + (x1 - x0) * rng.random(254)]), x0, x1).astype(np.float32)
    py = np.clip(np.concatenate([[y1, y0], y0 + (y1 - y0) * rng.random(254)]), y0, y1).astype(np.float32)
    for values in _arguments(fn, jnp.asarray(px), jnp.asarray(py)):
        assert np.all(np.abs(values) <= trig.GUARD), (name, x, y)


def test_guard_follows_the_arithmetic():
    guard = trig.plan(jax.make_jaxpr(_w1)(jnp.zeros(8), jnp.zeros(8)))
    assert bool(guard.ok([(-3.0, 3.0), (-3.0, 3.0)]))        # x² + y² <= 18
    assert not bool(guard.ok([(-5.0, 1.0), (-5.0, 1.0)]))    # up to 50
    assert not bool(guard.ok([(np.nan, 1.0), (0.0, 1.0)]))   # a NaN in a block
    divided = trig.plan(jax.make_jaxpr(_divided)(jnp.zeros(8), jnp.zeros(8)))
    assert bool(divided.ok([(-1.0, 1.0), (0.5, 2.0)]))
    assert not bool(divided.ok([(-1.0, 1.0), (-0.5, 2.0)]))  # a divisor that may be 0
    wrapped = trig.plan(jax.make_jaxpr(_wrapped)(jnp.zeros(8), jnp.zeros(8)))
    assert bool(wrapped.ok([(0.0, 1.0)]))
    assert not bool(wrapped.ok([(0.0, 30_000.0)]))  # k may have wrapped: min(k, 5) is anything


def test_plan_declines_what_it_cannot_bound():
    zeros = (jnp.zeros(8), jnp.zeros(8))

    def looped(x, y):
        return jax.lax.fori_loop(0, 3, lambda i, v: jnp.cos(v), x)

    def powered(x, y):
        return jnp.cos(x ** y)  # pow: no rule

    assert trig.plan(jax.make_jaxpr(lambda x, y: jnp.exp(x) + y)(*zeros)) is None  # no trig
    assert trig.plan(jax.make_jaxpr(looped)(*zeros)) is None
    assert trig.plan(jax.make_jaxpr(powered)(*zeros)) is None
    assert trig.plan(jax.make_jaxpr(_w1)(*zeros), known=[True, False]) is None  # y's interval unknown
    assert trig.plan(jax.make_jaxpr(lambda x, y: jnp.cos(x) * y)(*zeros)).needed == (0,)


# --- the kernels -----------------------------------------------------------------------------

def lane(x, y):
    return math.cos(x * y) + math.sin(x - y)


def pair(backend):
    return lw.vmap(lw.vmap(lane, in_axes=(None, 0)), in_axes=(0, None), backend=backend)


def expected(x, y, cos, sin):
    a, b = jnp.asarray(x)[:, None], jnp.asarray(y)[None, :]
    return np.asarray(jax.jit(lambda a, b: cos(a * b) + sin(a - b))(a, b))


def test_bounded_steps_and_exact_steps():
    x = np.linspace(-2.0, 2.0, 24, dtype=np.float32)   # three grid steps of 8 rows
    y = np.linspace(-3.0, 3.0, 256, dtype=np.float32)  # two of 128 columns
    x[20] = 1000.0                                     # the last row step: large arguments
    got = np.asarray(pair("tpu")(x, y))
    bounded = expected(x, y, trig.cos_bounded, trig.sin_bounded)
    exact = expected(x, y, jnp.cos, jnp.sin)
    if not ON_CHIP:  # interpret mode computes the same jnp operations on the CPU: equal bits
        np.testing.assert_array_equal(got[:16], bounded[:16])
        np.testing.assert_array_equal(got[16:], exact[16:])
        assert not np.array_equal(bounded[:16], exact[:16])  # the two really differ
    reference = np.asarray(pair("python")(x.astype(np.float64), y.astype(np.float64)))
    moderate = np.abs(x) < 100  # float32's x * y near 3000 is off by 1e-4 already: no float64 reference there
    np.testing.assert_allclose(got[moderate], reference[moderate], rtol=0, atol=4e-6)


def test_reduce_and_scalar_arguments():
    def shifted(x, s):
        return math.cos(x + s)

    x = np.linspace(-5.0, 5.0, 3000, dtype=np.float32)
    for s in (np.float32(0.5), np.float32(2000.0)):
        total = lw.reduce(lw.vmap(shifted, in_axes=(0, None), backend="tpu"), "sum")(x, s)
        reference = np.cos(x.astype(np.float64) + np.float64(s)).sum()
        assert abs(float(total) - reference) <= 1e-5 * len(x)


def busy(x, y):
    """Every rule of the guard in a trig argument (on the chip: each compiles in the guard)."""
    a = math.sqrt(abs(x)) / (1.0 + y * y) + math.exp(min(x, 1.0)) - x ** 3 / 8.0 + max(x, y)
    b = (x if x > y else -y) * 0.5 + math.tanh(y) + float(int(x * 3.0))
    return math.cos(a) + math.sin(b)


def test_every_rule_compiles_in_the_guard_and_agrees():
    x = np.linspace(-2.0, 2.0, 24, dtype=np.float32)
    y = np.linspace(-1.5, 1.5, 256, dtype=np.float32)
    got = np.asarray(lw.vmap(lw.vmap(busy, in_axes=(None, 0)), in_axes=(0, None), backend="tpu")(x, y))
    reference = np.asarray(lw.vmap(lw.vmap(busy, in_axes=(None, 0)), in_axes=(0, None), backend="python")(
        x.astype(np.float64), y.astype(np.float64)))
    assert "cond" in lw.explain(lw.vmap(lw.vmap(busy, in_axes=(None, 0)), in_axes=(0, None), backend="tpu"), x, y)
    # int(x * 3.0) may truncate the other way where float32's x * 3.0 rounds across an integer
    close = np.isclose(got, reference, rtol=0, atol=2e-4 if ON_CHIP else 2e-6)  # the chip: its exp, tanh (docs/tpu.md)
    assert close.mean() > 0.99, np.abs(got - reference).max()


def test_kernel_shows_both_versions():
    x = np.linspace(-2.0, 2.0, 24, dtype=np.float32)
    text = lw.explain(pair("tpu"), x, x)
    assert text.count("cond[") >= 2 or text.count("cond") >= 2
    plain = lw.explain(lw.vmap(lambda v: v * 2.0 + 1.0, backend="tpu"), x)  # no trig: one kernel
    assert plain.count("cond") < text.count("cond")
