"""lw.reduce of lanes that return arrays: each element reduced over the lanes, against
NumPy on the materialised values, the python backend and jax.vmap + jnp reductions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lanewise as lw

jax.config.update("jax_enable_x64", True)

OPS = ["sum", "prod", "mean", "min", "max", "argmin", "argmax", "any", "all"]


def gradient(x, y, w):  # a logistic-regression gradient term: an array per lane
    z = 0.0
    for j in range(x.shape[0]):
        z += x[j] * w[j]
    return (1.0 / (1.0 + np.exp(-z)) - y) * x


def jax_gradient(x, y, w):
    return (1.0 / (1.0 + jnp.exp(-(x @ w))) - y) * x


def data(seed, n=300, d=5):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.random(n), rng.normal(size=d)


@settings(max_examples=20, deadline=None)
@given(op=st.sampled_from(OPS), n=st.integers(1, 3000), seed=st.integers(0, 2**16))
def test_elementwise_over_lanes_like_numpy(op, n, seed):
    x, y, w = data(seed, n)
    mapped = lw.vmap(gradient, in_axes=(0, 0, None))
    got = lw.reduce(mapped, op)(x, y, w)
    want = getattr(np, op)(mapped(x, y, w), axis=0)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("op", ["sum", "min", "max", "prod"])
def test_matches_jax_vmap_then_reduce(op):
    x, y, w = data(1, 2000)
    got = lw.reduce(lw.vmap(gradient, in_axes=(0, 0, None)), op)(x, y, w)
    want = getattr(jnp, op)(jax.vmap(jax_gradient, in_axes=(0, 0, None))(x, y, w), axis=0)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-11)


@pytest.mark.parametrize("op", OPS)
def test_cpu_matches_the_python_reference(op):
    x, y, w = data(2, 500)
    cpu = lw.reduce(lw.vmap(gradient, in_axes=(0, 0, None)), op)(x, y, w)
    ref = lw.reduce(lw.vmap(gradient, in_axes=(0, 0, None), backend="python"), op)(x, y, w)
    np.testing.assert_allclose(cpu, ref, rtol=1e-12)


def outer(x, c):
    return np.outer(x, x) * c, c * 2.0  # a 2-D array and a scalar per lane


@pytest.mark.parametrize("op, axis", [("sum", None), ("max", 0), ("argmax", None), ("argmax", 1), ("mean", 1)])
def test_nested_levels_kept_axes_and_tuples(op, axis):
    rng = np.random.default_rng(3)
    x, c = rng.normal(size=(40, 3)), rng.normal(size=7)
    grid = lw.vmap(lw.vmap(outer, in_axes=(None, 0)), in_axes=(0, None))  # (40, 7, 3, 3), (40, 7)
    got = lw.reduce(grid, op, axis=axis)(x, c)
    full = grid(x, c)
    for g, f in zip(got, full, strict=True):
        want = getattr(np, op)(f, axis=(0, 1) if axis is None and op not in ("argmax",) else axis)
        if op == "argmax" and axis is None:  # flat index over both mapped axes, per element
            want = np.argmax(f.reshape((-1,) + f.shape[2:]), axis=0)
        np.testing.assert_allclose(g, want, rtol=1e-12)


def test_out_axes_places_the_lane_axis():
    x = np.random.default_rng(4).normal(size=(50, 6))
    mapped = lw.vmap(lambda r: r * 2.0, out_axes=1)  # (6, 50)
    np.testing.assert_allclose(lw.reduce(mapped, "sum")(x), (x * 2.0).sum(0), rtol=1e-12)


def test_monoid_is_applied_element_by_element():
    def larger_magnitude(a, b):
        return a if abs(a) >= abs(b) else b
    x = np.random.default_rng(5).normal(size=(400, 4))
    got = lw.reduce(lw.vmap(lambda r: r * 1.0), lw.Monoid(larger_magnitude, 0.0))(x)
    np.testing.assert_array_equal(got, x[np.argmax(np.abs(x), axis=0), np.arange(4)])


def test_bitwise_identical_for_any_thread_count():
    x, y, w = data(6, 200_000, 4)
    reduced = lw.reduce(lw.vmap(gradient, in_axes=(0, 0, None)), "sum")
    import numba
    results = []
    for threads in (1, numba.config.NUMBA_NUM_THREADS):
        numba.set_num_threads(threads)
        results.append(reduced(x, y, w))
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    assert results[0].tobytes() == results[1].tobytes()


def test_zero_lanes_give_the_identity_of_lane_shape():
    mapped = lw.vmap(lambda r: r * 1.0)
    for backend in ("cpu", "python"):
        got = lw.reduce(lw.vmap(lambda r: r * 1.0, backend=backend), "sum")(np.ones((0, 3)))
        np.testing.assert_array_equal(got, np.zeros(3))
    with pytest.raises(ValueError):
        lw.reduce(mapped, "max")(np.ones((0, 3)))


def ragged(x):
    if x[0] > 0.5:
        return x[:2] * 1.0
    return x * 1.0


@pytest.mark.parametrize("backend", ["cpu", "python"])
def test_a_lane_changing_its_array_shape_is_named(backend):
    x = np.full((20, 4), 0.1)
    x[7, 0] = 0.9
    with pytest.raises(lw.LaneTypeError, match="shape"):
        lw.reduce(lw.vmap(ragged, backend=backend), "sum")(x)


def test_a_raising_lane_is_named():
    def lane(r):
        if r[0] > 0.5:
            raise ValueError("too big")
        return r * 1.0
    x = np.zeros((100, 2))
    x[63, 0] = 1.0
    with pytest.raises(ValueError, match="too big") as info:
        lw.reduce(lw.vmap(lane), "sum")(x)
    assert any("i0=63" in note for note in info.value.__notes__)


def test_dask_refuses_with_the_way_out():
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.ones((40, 3)), chunks=(10, 3))
    with pytest.raises(lw.BackendError, match="backend='cpu'"):
        lw.reduce(lw.vmap(lambda r: r * 2.0, backend="dask"), "sum")(x)


# ----------------------------------------------------------------------------- segments (scatter)


def squared_into(segment, v):
    return segment, v * v


JAX_SEGMENT = {"sum": jax.ops.segment_sum, "max": jax.ops.segment_max, "min": jax.ops.segment_min,
               "prod": jax.ops.segment_prod}


@settings(max_examples=15, deadline=None)
@given(op=st.sampled_from(sorted(JAX_SEGMENT)), n=st.integers(0, 5000), count=st.integers(1, 300),
       seed=st.integers(0, 2**16))
def test_segments_match_jax_segment_ops(op, n, count, seed):
    rng = np.random.default_rng(seed)
    ids, v = rng.integers(0, count, size=n), rng.normal(size=n)
    got = lw.reduce(lw.vmap(squared_into), op, segments=count)(ids, v)
    want = np.asarray(JAX_SEGMENT[op](jnp.asarray(v * v), jnp.asarray(ids), count))
    assert got.shape == (count,)
    np.testing.assert_allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize("op", ["sum", "prod", "min", "max", "any", "all"])
def test_segments_cpu_matches_the_python_reference(op):
    rng = np.random.default_rng(7)
    ids, v = rng.integers(0, 50, size=3000), rng.normal(size=3000)
    cpu = lw.reduce(lw.vmap(squared_into), op, segments=50)(ids, v)
    ref = lw.reduce(lw.vmap(squared_into, backend="python"), op, segments=50)(ids, v)
    assert cpu.dtype == ref.dtype
    np.testing.assert_allclose(cpu, ref, rtol=1e-12)


def test_a_histogram_of_a_grid_equals_numpy_histogram():
    def bin_of(x, y):
        r = np.hypot(x, y)
        return min(int(r * 10), 29), 1
    x = np.linspace(-2, 2, 301)
    grid = lw.vmap(lw.vmap(bin_of, in_axes=(None, 0)), in_axes=(0, None))
    got = lw.reduce(grid, "sum", segments=30)(x, x)
    r = np.hypot(x[:, None], x[None, :])
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.bincount(np.minimum((r * 10).astype(int), 29).ravel(), minlength=30))


def test_array_values_and_a_monoid_per_segment():
    def both(segment, v):
        return segment, np.array([v, -v])
    rng = np.random.default_rng(8)
    ids, v = rng.integers(0, 20, size=2000), rng.normal(size=2000)
    got = lw.reduce(lw.vmap(both), "sum", segments=20)(ids, v)
    np.testing.assert_allclose(got[:, 0], np.bincount(ids, v, 20), rtol=1e-12)
    np.testing.assert_allclose(got[:, 1], -np.bincount(ids, v, 20), rtol=1e-12)

    def last(a, b):  # not commutative: order matters, and is the lanes' order
        return b
    picked = lw.reduce(lw.vmap(lambda g, v: (g, v)), lw.Monoid(last, np.nan), segments=20)(ids, v)
    want = np.full(20, np.nan)
    want[ids] = v  # NumPy assigns in order: the last lane of each segment wins
    np.testing.assert_array_equal(picked, want)


def test_segments_bitwise_identical_for_any_thread_count():
    import numba
    rng = np.random.default_rng(9)
    ids, v = rng.integers(0, 100, size=400_000), rng.normal(size=400_000)
    reduced = lw.reduce(lw.vmap(squared_into), "sum", segments=100)
    results = []
    for threads in (1, numba.config.NUMBA_NUM_THREADS):
        numba.set_num_threads(threads)
        results.append(reduced(ids, v))
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    assert results[0].tobytes() == results[1].tobytes()


@pytest.mark.parametrize("backend", ["cpu", "python"])
def test_a_segment_out_of_range_names_the_lane(backend):
    ids = np.arange(100) % 10
    ids[57] = 10
    with pytest.raises(lw.LaneIndexError, match=r"segment 10 is out of range .*i0=57.*squared_into"):
        lw.reduce(lw.vmap(squared_into, backend=backend), "sum", segments=10)(ids, np.ones(100))
    with pytest.raises(lw.LaneIndexError, match="segment -1"):
        lw.reduce(lw.vmap(squared_into, backend=backend), "sum", segments=10)(ids - 1, np.ones(100))


def test_empty_segments_hold_the_identity():
    got = lw.reduce(lw.vmap(squared_into), "max", segments=3)(np.array([1, 1]), np.array([2.0, 3.0]))
    np.testing.assert_array_equal(got, [-np.inf, 9.0, -np.inf])
    empty = lw.reduce(lw.vmap(squared_into), "sum", segments=3)(np.zeros(0, np.int64), np.zeros(0))
    np.testing.assert_array_equal(empty, np.zeros(3))


def test_bad_segment_requests_are_named():
    mapped = lw.vmap(squared_into)
    with pytest.raises(lw.LanewiseError, match="not 'mean'"):
        lw.reduce(mapped, "mean", segments=3)
    with pytest.raises(lw.LanewiseError, match="count of segments"):
        lw.reduce(mapped, "sum", segments=-1)
    with pytest.raises(lw.AxisSpecError):
        lw.reduce(mapped, "sum", axis=0, segments=3)
    with pytest.raises(lw.LaneTypeError, match=r"must return \(segment, value\)"):
        lw.reduce(lw.vmap(lambda v: v * 2.0), "sum", segments=3)(np.ones(4))
    with pytest.raises(lw.LaneTypeError, match=r"must return \(segment, value\)"):
        lw.reduce(lw.vmap(lambda v: (v, v)), "sum", segments=3)(np.ones(4))  # a float segment


def test_segments_on_dask_refuse_with_the_way_out():
    da = pytest.importorskip("dask.array")
    ids = da.from_array(np.arange(40) % 4, chunks=10)
    with pytest.raises(lw.BackendError, match="into segments"):
        lw.reduce(lw.vmap(squared_into, backend="dask"), "sum", segments=4)(ids, da.ones(40, chunks=10))
