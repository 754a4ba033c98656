"""lw.scan against jax.lax.scan: top level, inside vmapped lanes, both backends."""

from collections import namedtuple

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lanewise as lw

Pair = namedtuple("Pair", "level trend")


def running(c, x):
    c = c + x
    return c, c * 2.0


def two_carries(c, x):
    a, b = c
    return (a + x, b * 0.5 + x), a - b


def pair_xs(c, xs):
    x0, x1 = xs
    return c + x0 * x1, (c, x0)


def decay(c, x):
    return c * 0.9 + x, None


def counter(c, _):
    return c + 1.0, c


def holt(p, x):  # namedtuple carry
    level = 0.5 * p.level + 0.5 * x
    return Pair(level, level - p.level), level


STEPS = {  # name: (step, init, make xs from a (n,) array)
    "running": (running, 0.0, lambda v: v),
    "two_carries": (two_carries, (0.0, 1.0), lambda v: v),
    "pair_xs": (pair_xs, 0.5, lambda v: (v, v[::-1].copy())),
    "decay": (decay, 0.0, lambda v: v),
    "holt": (holt, Pair(0.0, 0.0), lambda v: v),
}


def jax_scan(step, init, xs, reverse=False, length=None):
    return jax.lax.scan(step, init, xs, reverse=reverse, length=length)


def assert_close(got, want):
    g_leaves, g_tree = jax.tree_util.tree_flatten(got)
    w_leaves, w_tree = jax.tree_util.tree_flatten(want)
    assert len(g_leaves) == len(w_leaves), (got, want)
    for g, w in zip(g_leaves, w_leaves, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-12)


@settings(max_examples=12)
@given(name=st.sampled_from(sorted(STEPS)), n=st.integers(0, 9), reverse=st.booleans(),
       backend=st.sampled_from(["cpu", "python"]))
def test_top_level_matches_jax(name, n, reverse, backend, monkeypatch):
    step, init, make = STEPS[name]
    xs = make(np.linspace(-1.0, 2.0, n))
    monkeypatch.setattr(lw.config, "backend", backend)
    got = lw.scan(step, init, xs, reverse=reverse)
    want = jax_scan(step, init, xs, reverse=reverse)
    assert_close(got, want)


def test_length_without_xs():
    carry, ys = lw.scan(counter, 0.0, None, length=5)
    assert carry == 5.0
    np.testing.assert_array_equal(ys, [0, 1, 2, 3, 4])


@pytest.mark.parametrize("backend", ["cpu", "python"])
@pytest.mark.parametrize("reverse", [False, True])
def test_inside_vmapped_lanes_matches_jax(backend, reverse):
    series = np.random.default_rng(3).normal(size=(6, 11))

    def lane(p):
        return lw.scan(two_carries, (p[0], 1.0), p, reverse=reverse)

    def jlane(p):
        return jax.lax.scan(two_carries, (p[0], 1.0), p, reverse=reverse)

    got = lw.vmap(lane, backend=backend)(series)
    want = jax.vmap(jlane)(series)
    assert_close(got, want)


def test_scan_in_lane_is_one_kernel():
    def lane(p):
        carry, _ = lw.scan(decay, 0.0, p)
        return carry

    text = lw.explain(lw.vmap(lane), np.ones((4, 8)))
    assert text.source.count("prange(") == 1
    assert "lane(a0[i0])" in text.source


def test_nested_vmap_of_scan_over_columns():
    prices = np.random.default_rng(4).normal(size=(5, 7))  # time-major: scan down columns

    def lane(col, scale):
        return lw.scan(running, 0.0, col * scale)[0]

    got = lw.vmap(lw.vmap(lane, in_axes=(1, None)), in_axes=(None, 0))(prices, np.array([1.0, 2.0]))
    want = np.array([[prices[:, j].sum() * s for j in range(7)] for s in (1.0, 2.0)])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_carry_type_change_is_a_clear_error():
    def bad(c, x):
        return c + 0.5, x

    with pytest.raises(lw.LaneCompileError, match="carry of type float64, but init has type int64") as info:
        lw.scan(bad, 0, np.ones(3))
    assert "test_scan.py:" in str(info.value) and "lw_" not in str(info.value), "no generated file is named"
    with pytest.raises(lw.LaneTypeError, match="carry leaf 0"):
        with lw.lane.scanning.reference_mode():
            lw.scan(bad, 0, np.ones(3))


def welford_step(agg, x):
    n, mean, m2 = agg
    d = x - mean
    mean = mean + d / (n + 1)
    return (n + 1, mean, m2 + d * (x - mean)), None


def test_a_python_float_init_takes_the_float32_carry_as_in_jax():
    """The natural Welford init (0, 0.0, 0.0) over float32 rows: JAX casts the weak 0.0
    to the float32 carry; the python backend refused it ("carry leaf 1 changed from
    float64 (init) to float32") while cpu ran it."""
    rows = np.random.default_rng(0).normal(size=(3, 50)).astype(np.float32)

    def variance(row):
        n, _, m2 = lw.scan(welford_step, (0, 0.0, 0.0), row)[0]
        return m2 / (n - 1)

    def twin(row):
        n, _, m2 = jax.lax.scan(welford_step, (0, 0.0, 0.0), row)[0]
        return m2 / (n - 1)

    want = jax.vmap(twin)(rows)
    assert want.dtype == np.float32
    for backend in ("python", "cpu"):
        np.testing.assert_allclose(lw.vmap(variance, backend=backend)(rows), want, rtol=1e-5)
    def narrows(c, x):
        return np.float32(c + x), None

    with lw.lane.scanning.reference_mode():
        assert lw.scan(narrows, 0.0, rows[0])[0].dtype == np.float32
        with pytest.raises(lw.LaneTypeError, match="carry leaf 0"):  # a strong init still keeps its type
            lw.scan(narrows, np.float64(0.0), rows[0])


def test_xs_length_mismatch():
    with pytest.raises(lw.LanewiseError, match="leading sizes"):
        with lw.lane.scanning.reference_mode():
            lw.scan(pair_xs, 0.0, (np.ones(3), np.ones(4)))

    def lane(a, b):
        return lw.scan(pair_xs, 0.0, (a, b))[0]

    # Inside a lane too, the error names the sizes (issue 14, item 14): the failing lane's
    # exception comes from its Python run.
    with pytest.raises(lw.SizeMismatchError, match=r"leading sizes \[3, 4\]"):
        lw.vmap(lane, in_axes=(None, None), axis_size=2)(np.ones(3), np.ones(4))
