"""lw.reduce against NumPy on the materialised values, and its determinism."""

import math

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lanewise as lw

OPS = ["sum", "prod", "mean", "min", "max", "argmin", "argmax", "any", "all"]


def wave(x, y):
    r = x * x + y * y
    return math.cos(r) / (1 + r)


def pick(x, y):  # returns x unchanged: NaNs and ties placed by the test survive
    return x + 0.0 * y


def on_one_thread(fn, *args):
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        return fn(*args)
    finally:
        numba.set_num_threads(before)


def grid_of(lane, **kw):
    return lw.vmap(lw.vmap(lane, in_axes=(None, 0)), in_axes=(0, None), **kw)


def expected(op, values, axis):
    return getattr(np, op)(values, axis=axis)


@settings(max_examples=25)
@given(op=st.sampled_from(OPS), axis=st.sampled_from([None, 0, 1, -1]),
       n=st.integers(1, 70), m=st.integers(1, 70), seed=st.integers(0, 2**16))
def test_matches_numpy_on_materialised(op, axis, n, m, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=n), rng.normal(size=m)
    grid = grid_of(wave)
    got = lw.reduce(grid, op, axis=axis)(x, y)
    want = expected(op, grid(x, y), axis)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)


@settings(max_examples=20)
@given(op=st.sampled_from(["min", "max", "argmin", "argmax", "sum"]),
       axis=st.sampled_from([None, 0, 1]), seed=st.integers(0, 2**16), nans=st.integers(0, 4))
def test_nan_and_ties_like_numpy(op, axis, seed, nans):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 3, size=40).astype(float)  # many ties
    x[rng.integers(0, 40, size=nans)] = np.nan
    y = np.zeros(7)
    grid = grid_of(pick)
    got = lw.reduce(grid, op, axis=axis)(x, y)
    want = expected(op, grid(x, y), axis)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype, op", [
    (d, op) for d in ["bool", "int8", "int32", "uint16", "float32", "complex128"]
    for op in ["sum", "prod", "mean", "any", "all", "max"]
    if not (d == "complex128" and op == "max")])  # lanes have no complex "<"
def test_dtypes_follow_numpy(dtype, op):
    """As NumPy reduces the lanes' values; narrow integers reach lanes as int64
    (docs/safety.md, "Integers"), so the lanes' values are int64 arrays."""
    x = (np.arange(1, 13) % 5).astype(dtype)
    mapped = lw.vmap(lambda v: v)
    got = lw.reduce(mapped, op)(x)
    lanes = x.astype(np.int64) if x.dtype.kind in "iu" and x.dtype.itemsize < 8 else x
    want = getattr(np, op)(lanes)
    assert np.asarray(got).dtype == np.asarray(want).dtype, (got, want)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_bitwise_identical_for_any_thread_count():
    x = np.linspace(-3, 3, 1500)
    total = lw.reduce(grid_of(wave), "sum")
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = total(x, x)
        numba.set_num_threads(before)
        many = total(x, x)
    finally:
        numba.set_num_threads(before)
    assert one.tobytes() == many.tobytes()


def test_more_accurate_than_a_running_sum():
    x = np.full(2_000_003, 0.1)
    got = lw.reduce(lw.vmap(lambda v: v), "sum")(x)
    naive = np.cumsum(x)[-1]  # a sequential running sum
    exact = math.fsum(x)
    assert abs(got - exact) < abs(naive - exact) / 100


@pytest.mark.parametrize("op, slots", [("sum", True), ("max", True), ("all", True), ("argmax", False)])
def test_built_in_ops_fold_vectorisable_tiles(op, slots):
    # Built-in ops evaluate lanes into a tile buffer (a store loop LLVM vectorises, or
    # the SPMD path); commutative ones fold it into interleaved slots, argmin/argmax in
    # lane order (first index on ties).  Values are checked against NumPy above.
    x = np.linspace(-1, 1, 3001)
    source = lw.explain(lw.reduce(grid_of(wave), op, axis=None), x, x).source
    assert "buf0[i1 - start] = r" in source
    assert ("a0_7 = " in source) == slots


@pytest.mark.parametrize("op", ["argmin", "argmax"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_tiled_argmin_argmax_match_numpy_across_tiles_ties_and_threads(op, axis):
    """argmin/argmax used to fold one lane at a time (2-3x slower than materialising the
    grid and calling np.argmin); now tiled: indices across tile and block edges, the first
    of tied values, NaN, and any thread count must still be NumPy's."""
    x = np.round(np.linspace(-2, 2, 613), 1)  # many exact ties
    y = np.round(np.linspace(-1, 1, 517), 1)
    y[300] = np.nan
    grid = grid_of(lambda a, b: a * a - b * b)
    want = getattr(np, op)(grid(x, y), axis=axis)
    reduced = lw.reduce(grid, op, axis=axis)
    np.testing.assert_array_equal(on_one_thread(reduced, x, y), want)
    np.testing.assert_array_equal(reduced(x, y), want)


def test_tiled_sum_keeps_thread_count_independence_across_tile_edges():
    # sizes that leave partial tiles and partial slot groups in every block
    x, y = np.linspace(-2, 2, 1237), np.linspace(-1, 1, 263)
    total = lw.reduce(grid_of(wave), "sum", axis=1)
    one = on_one_thread(total, x, y)
    assert one.tobytes() == total(x, y).tobytes()
    np.testing.assert_allclose(one, np.cos(x[:, None] ** 2 + y ** 2).__truediv__(1 + x[:, None] ** 2 + y ** 2)
                               .sum(axis=1), rtol=1e-12)


def test_multiple_outputs_reduce_independently():
    x = np.linspace(0, 1, 101)
    lo, hi = lw.reduce(lw.vmap(lambda v: (v * 2, -v)), "max")(x)
    assert lo == 2.0 and hi == 0.0


def test_monoid_matches_python_fold():
    def bigger_abs(a, b):
        return a if abs(a) >= abs(b) else b

    x = np.random.default_rng(5).normal(size=(30, 20))
    mapped = lw.vmap(lw.vmap(lambda v: v))
    got = lw.reduce(mapped, lw.Monoid(bigger_abs, 0.0), axis=1)(x)
    want = np.array([max(row, key=abs) for row in x])
    np.testing.assert_array_equal(got, want)
    ref = lw.reduce(lw.vmap(lw.vmap(lambda v: v), backend="python"),
                    lw.Monoid(bigger_abs, 0.0), axis=1)(x)
    np.testing.assert_array_equal(ref, want)


@pytest.mark.parametrize("op, want", [("sum", 0.0), ("prod", 1.0), ("any", False), ("all", True)])
def test_empty_reductions(op, want):
    assert lw.reduce(lw.vmap(lambda v: v), op)(np.zeros(0)) == want


@pytest.mark.parametrize("op", ["min", "argmax"])
def test_empty_reduction_without_identity_raises_like_numpy(op):
    """NumPy's ValueError, as a lanewise error (it was a bare builtins.ValueError)."""
    for backend in ("cpu", "python"):
        with pytest.raises(lw.EmptyReductionError, match=f"lw.reduce: {op} over zero lanes") as info:
            lw.reduce(lw.vmap(lambda v: v, backend=backend), op)(np.zeros(0))
        assert isinstance(info.value, ValueError)


def test_reduce_with_scan_in_lanes_is_one_pass():
    def step(c, x):
        return c + x, None

    def lane(row):
        return lw.scan(step, 0.0, row)[0]

    rows = np.random.default_rng(2).normal(size=(50, 9))
    got = lw.reduce(lw.vmap(lane), "sum")(rows)
    np.testing.assert_allclose(got, rows.sum(), rtol=1e-12)


def test_lane_exception_surfaces():
    def lane(v):
        if v > 3:
            raise ValueError("too big")
        return v

    with pytest.raises(ValueError, match="too big") as info:
        lw.reduce(lw.vmap(lane), "sum")(np.arange(10.0))
    assert any("i0=4" in note for note in info.value.__notes__)


def test_errors():
    with pytest.raises(TypeError, match="function returned by lw.vmap"):
        lw.reduce(lambda v: v, "sum")
    with pytest.raises(lw.LanewiseError, match="unknown reduction"):
        lw.reduce(lw.vmap(lambda v: v), "median")
    with pytest.raises(lw.AxisSpecError, match="out of range"):
        lw.reduce(lw.vmap(lambda v: v), "sum", axis=3)(np.ones(3))


@pytest.mark.parametrize("backend", ["cpu", "python"])
def test_a_monoid_accumulates_in_the_dtype_its_identity_and_combine_need(backend):
    """The accumulator took the lanes' dtype: over int lanes, a float identity or a
    combine returning a float was truncated to int on the cpu backend (2 and 7 for
    2.625 and 7.5), and a -inf identity raised a raw OverflowError."""
    x = np.array([1, 2, 4])
    ident = lw.vmap(lambda v: v, backend=backend)
    average = lw.Monoid(lambda a, b: (a + b) / 2, 0)
    shifted = lw.Monoid(lambda a, b: a + b, 0.5)
    got = lw.reduce(ident, average)(x)
    assert got.dtype == np.float64 and float(got) == 2.625, got  # ((0 + 1) / 2 + 2) / 2 ... in lane order
    np.testing.assert_array_equal(got, lw.reduce(lw.vmap(lambda v: v, backend="python"), average)(x))
    assert float(lw.reduce(ident, shifted)(x)) == 7.5
    biggest = lw.Monoid(lambda a, b: max(a, b), -math.inf)
    assert float(lw.reduce(ident, biggest)(np.zeros(0, np.int64))) == -math.inf
    assert float(lw.reduce(ident, biggest)(x)) == 4.0
    pair = lw.reduce(lw.vmap(lambda v: np.array([v, 2 * v]), backend=backend), average)(x)  # element by element
    assert pair.dtype == np.float64 and pair.tolist() == [2.625, 5.25], pair
