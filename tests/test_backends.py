"""The compiled ``cpu`` backend against the ``python`` reference, on the shared corpus.

Covers what the JAX comparison cannot: size-0 mapped axes, ``out=``, per-lane
array outputs, exceptions raised inside lanes, thread counts, and the host-side
fast path taken by repeated calls.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jax
import lanewise as lw
from corpus import (BY_NAME, CORPUS, array_view, assert_trees_match, build, escape, examples,
                    lane_values, rownorm, sincos)

BACKENDS = ("cpu", "python")


def canonical_args(entry, n, seed=0, row=3):
    """Depth-1 arguments of ``n`` lanes in the entry's first dtype, C-contiguous."""
    rng = np.random.default_rng(seed)
    dtype = entry.dtypes[0]
    args = []
    for kind in entry.kinds:
        if kind == "k":
            args.append(5)
        else:
            args.append(lane_values(rng, (n, row) if kind == "r" else (n,), dtype, entry.domain))
    return args


def in_axes_of(entry):
    return tuple(None if k == "k" else 0 for k in entry.kinds)


def run(entry, args, backend, **kw):
    return lw.vmap(entry.lane, in_axes=in_axes_of(entry), backend=backend, **kw)(*args)


# ----------------------------------------------------------------------------- corpus


@pytest.mark.parametrize("entry", CORPUS, ids=lambda e: e.name)
def test_cpu_matches_python(entry):
    args = canonical_args(entry, 37)
    cpu = run(entry, args, "cpu")
    py = run(entry, args, "python")
    assert_trees_match(cpu, py, loose=False, what=f"{entry.name}: cpu vs python")


@pytest.mark.parametrize("entry", CORPUS, ids=lambda e: e.name)
def test_size_zero_mapped_axis(entry):
    """A size-0 mapped axis gives correctly shaped (and typed) empty results."""
    args = canonical_args(entry, 0)
    want = jax.vmap(entry.twin, in_axes=in_axes_of(entry))(*args)
    for backend in BACKENDS:
        got = run(entry, args, backend)
        assert_trees_match(got, want, ints="values", what=f"{entry.name} on {backend}")


@pytest.mark.parametrize("shape, levels", [
    ((0, 3), [dict(in_axes=0, out_axes=0), dict(in_axes=0, out_axes=0)]),
    ((3, 0), [dict(in_axes=0, out_axes=1), dict(in_axes=0, out_axes=0)]),
    ((0, 0), [dict(in_axes=0, out_axes=0), dict(in_axes=0, out_axes=0)]),
    ((2, 0, 0), [dict(in_axes=2, out_axes=0), dict(in_axes=1, out_axes=0), dict(in_axes=0, out_axes=0)]),
    ((0, 2, 0), [dict(in_axes=1, out_axes=1), dict(in_axes=1, out_axes=1), dict(in_axes=0, out_axes=0)]),
])
def test_size_zero_nested(shape, levels):
    """Any level may have size 0, including several (shapes as jax.vmap gives them)."""
    x = np.zeros(shape)
    lane = BY_NAME["arith"].lane
    want = build(jax.vmap, lane, levels)(x, x)
    for backend in BACKENDS:
        got = build(lw.vmap, lane, levels, backend=backend)(x, x)
        assert_trees_match(got, want, ints="values", what=f"{shape} on {backend}")


def test_size_zero_per_lane_array_output():
    rows = np.zeros((0, 4))
    for backend in BACKENDS:
        out = lw.vmap(BY_NAME["scale_row"].lane, in_axes=(0, None), out_axes=1, backend=backend)(rows, 2.0)
        assert out.shape == (4, 0) and out.dtype == np.float64


# ----------------------------------------------------------------------------- out=


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_single_output(backend):
    entry = BY_NAME["arith"]
    args = canonical_args(entry, 9)
    want = run(entry, args, "python")
    out = np.full(9, np.nan)
    got = lw.vmap(entry.lane, backend=backend)(*args, out=out)
    assert got is out
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_tuple_outputs(backend):
    x = np.linspace(-1, 1, 6)
    a, b = np.empty(6), np.empty(6)
    got = lw.vmap(sincos, backend=backend)(x, out=(a, b))
    assert got[0] is a and got[1] is b
    np.testing.assert_allclose(a, np.sin(x), rtol=1e-14)
    np.testing.assert_allclose(b, np.cos(x), rtol=1e-14)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", ["strided", "fortran", "negative"])
def test_out_non_contiguous(backend, layout):
    x, y = np.arange(3.0), np.arange(4.0)
    grid = lw.vmap(lw.vmap(BY_NAME["arith"].lane, in_axes=(None, 0)), in_axes=(0, None), backend=backend)
    want = x[:, None] ** 2 + 3 * y[None, :] - 1
    base = np.full((6, 8), np.nan)
    out = {"strided": base[::2, ::2], "fortran": np.asfortranarray(base[:3, :4]),
           "negative": base[::-2, ::-2]}[layout]
    assert grid(x, y, out=out) is out
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_aliasing_an_input(backend):
    """``f(x, out=x)`` sees the inputs as they were (NumPy's rule)."""

    def shift(row, i):
        return row[(i + 1) % row.shape[0]]

    x = np.arange(5.0)
    mapped = lw.vmap(lambda xs, i: shift(xs, i), in_axes=(None, 0), backend=backend)
    got = mapped(x, np.arange(5), out=x)
    assert got is x
    np.testing.assert_array_equal(x, [1.0, 2.0, 3.0, 4.0, 0.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_per_lane_arrays(backend):
    rows = np.arange(12.0).reshape(3, 4)
    out = np.empty((4, 3))
    got = lw.vmap(BY_NAME["scale_row"].lane, in_axes=(0, None), out_axes=1, backend=backend)(rows, 2.0, out=out)
    assert got is out
    np.testing.assert_array_equal(out, rows.T * 2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad, pattern", [
    (lambda: np.empty(5), r"out.*float64\[6\].*float64\[5\]"),
    (lambda: np.empty(6, np.float32), r"out.*float64\[6\].*float32\[6\]"),
    (lambda: np.empty((6, 1)), r"out.*float64\[6\].*float64\[6, 1\]"),
    (lambda: [0.0] * 6, r"out"),
])
def test_out_wrong_shape_or_dtype(backend, bad, pattern):
    with pytest.raises(lw.OutputError, match=pattern):
        lw.vmap(BY_NAME["arith"].lane, backend=backend)(np.ones(6), np.ones(6), out=bad())


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_read_only(backend):
    out = np.empty(6)
    out.flags.writeable = False
    with pytest.raises(lw.OutputError, match=r"out.*read-only"):
        lw.vmap(BY_NAME["arith"].lane, backend=backend)(np.ones(6), np.ones(6), out=out)


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_names_the_bad_leaf(backend):
    x = np.linspace(0, 1, 4)
    with pytest.raises(lw.OutputError, match=r"out\[1\]"):
        lw.vmap(sincos, backend=backend)(x, out=(np.empty(4), np.empty(3)))
    with pytest.raises(lw.OutputError, match="structure"):
        lw.vmap(sincos, backend=backend)(x, out=np.empty(4))


# ----------------------------------------------------------------------------- per-lane arrays


def filled(x):
    v = np.zeros(4)
    for i in range(4):
        v[i] = x * i
    return v


def like_row(row, c):
    v = np.empty_like(row)
    for i in range(row.shape[0]):
        v[i] = row[i] * c + i
    return v


def matrix_lane(x):
    m = np.zeros((2, 3))
    m[0, 1] = x
    m[1, 2] = -x
    return m


def varying(n):
    return np.zeros(n)


def varying_filled(n):
    v = np.zeros(int(n))
    v[0] = 1.0
    return v


@pytest.mark.parametrize("lane, args, in_axes, out_axes", [
    (filled, (np.linspace(-1, 1, 5),), 0, 0),
    (filled, (np.linspace(-1, 1, 5),), 0, 1),
    (like_row, (np.arange(12.0).reshape(3, 4)[:, ::-1], 0.5), (0, None), 0),
    (like_row, (np.asfortranarray(np.arange(12.0).reshape(3, 4)), 2.0), (1, None), -1),
    (matrix_lane, (np.arange(3.0),), 0, 1),
])
def test_per_lane_array_outputs(lane, args, in_axes, out_axes):
    got = {b: lw.vmap(lane, in_axes=in_axes, out_axes=out_axes, backend=b)(*args) for b in BACKENDS}
    axis = in_axes[0] if isinstance(in_axes, tuple) else in_axes  # first argument mapped, rest not
    lanes = [lane(np.take(args[0], i, axis=axis), *args[1:]) for i in range(args[0].shape[axis])]
    want = np.moveaxis(np.stack(lanes), 0, out_axes)  # vmap's definition, by hand
    for b in BACKENDS:
        assert_trees_match(got[b], want, loose=False, what=b)


@pytest.mark.parametrize("lane", [varying, varying_filled], ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sizes", [[1, 1, 2], [3, 1, 1]])
def test_per_lane_array_shape_must_not_vary(lane, backend, sizes):
    with pytest.raises(lw.LaneTypeError, match="shape"):
        lw.vmap(lane, backend=backend)(np.array(sizes))


# ----------------------------------------------------------------------------- lane exceptions


class LaneProblem(Exception):
    pass


def raises_above(x, limit):
    if x > limit:
        raise ValueError("value above limit")
    return x * 2


def raises_custom(x):
    if x == 3:
        raise LaneProblem("three is not allowed")
    return x


def _check(v):
    if v < 0:
        raise ValueError("negative")
    return v


def raises_in_helper(x):
    return _check(x) + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_lane_exception_surfaces_with_lane_index(backend):
    x = np.arange(10.0)
    with pytest.raises(ValueError, match="value above limit") as info:
        lw.vmap(raises_above, in_axes=(0, None), backend=backend)(x, 6.5)
    assert not isinstance(info.value, lw.LanewiseError)
    assert any("i0=7" in note for note in info.value.__notes__)


@pytest.mark.parametrize("backend", BACKENDS)
def test_custom_exception_in_nest(backend):
    x = np.arange(12).reshape(3, 4)  # only x[0, 3] == 3
    with pytest.raises(LaneProblem, match="three") as info:
        lw.vmap(lw.vmap(raises_custom), backend=backend)(x)
    assert any("i0=0, i1=3" in note for note in info.value.__notes__)
    x = np.arange(12).reshape(3, 4).T.copy()  # x[3, 0] == 3; out_axes=1 swaps the loop order
    with pytest.raises(LaneProblem) as info:
        lw.vmap(lw.vmap(raises_custom), out_axes=1, backend=backend)(x)
    assert any("i0=3, i1=0" in note for note in info.value.__notes__)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_in_helper(backend):
    with pytest.raises(ValueError, match="negative") as info:
        lw.vmap(raises_in_helper, backend=backend)(np.array([1.0, 2.0, -1.0]))
    assert any("i0=2" in note for note in info.value.__notes__)


def test_exception_in_parallel_kernel():
    """Enough lanes for the parallel kernel: the error still names one failing lane."""
    n = 2 * lw.config.serial_below + 123
    x = np.zeros(n)
    bad = [5, n // 2, n - 1]
    x[bad] = 10.0
    with pytest.raises(ValueError, match="value above limit") as info:
        lw.vmap(raises_above, in_axes=(0, None))(x, 1.0)
    notes = " ".join(info.value.__notes__)
    assert any(f"i0={i})" in notes for i in bad), notes
    # and the kernel is still usable afterwards
    y = np.arange(n, dtype=float) / n
    np.testing.assert_array_equal(lw.vmap(raises_above, in_axes=(0, None))(y, 1.0), 2 * y)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_on_a_warm_call(backend):
    """The fast path of a repeated call must not swallow a lane's exception."""
    mapped = lw.vmap(raises_above, in_axes=(0, None), backend=backend)
    np.testing.assert_array_equal(mapped(np.arange(4.0), 10.0), 2 * np.arange(4.0))
    with pytest.raises(ValueError) as info:
        mapped(np.array([0.0, 20.0, 1.0, 1.0]), 10.0)
    assert any("i0=1" in note for note in info.value.__notes__)


# ----------------------------------------------------------------------------- IEEE arithmetic


@pytest.mark.parametrize("denominator", [np.array(0.0), 0.0], ids=["0-d array", "python float"])
def test_float_division_by_zero_is_ieee(denominator):
    x = np.array([1.0, -1.0, 0.0])
    got = {b: lw.vmap(lambda a, d: a / d, in_axes=(0, None), backend=b)(x, denominator) for b in BACKENDS}
    for b in BACKENDS:
        np.testing.assert_array_equal(got[b], [np.inf, -np.inf, np.nan], err_msg=b)


# ----------------------------------------------------------------------------- threads


@pytest.fixture
def thread_counts():
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs Numba with at least 2 threads")
    before = numba.get_num_threads()
    yield (1, 2)
    numba.set_num_threads(before)


def test_results_identical_for_any_thread_count(thread_counts, restore_config):
    cr = np.linspace(-2, 0.6, 260)
    ci = np.linspace(-1.2, 1.2, 140)
    grid = lw.vmap(lw.vmap(escape, in_axes=(0, None)), in_axes=(None, 0))
    rows = np.random.default_rng(3).normal(size=(40_000, 5)).astype(np.float32)
    norms = lw.vmap(rownorm)
    assert cr.size * ci.size >= lw.config.serial_below and rows.shape[0] >= lw.config.serial_below
    results = []
    for n in thread_counts:
        numba.set_num_threads(n)
        results.append((grid(cr, ci), norms(rows)))
    lw.config.serial_below = 10**9  # the same sizes on the serial kernel
    results.append((grid(cr, ci), norms(rows)))
    for a, b in results[1:]:
        np.testing.assert_array_equal(a, results[0][0])
        np.testing.assert_array_equal(b, results[0][1])
    # and they are right: spot-check against the reference on a sub-grid
    ref = lw.vmap(lw.vmap(escape, in_axes=(0, None)), in_axes=(None, 0), backend="python")(cr[::13], ci[::7])
    np.testing.assert_array_equal(results[0][0][::7, ::13], ref)


# ----------------------------------------------------------------------------- repeated calls


_REPEATED = lw.vmap(BY_NAME["arith"].lane, in_axes=(0, None))


@settings(max_examples=examples(6))
@given(data=st.data())
def test_repeated_calls_with_varying_arguments(data):
    """One mapped function called again and again (the host fast path) stays correct
    as sizes, strides, read-only flags and scalar types change between calls."""
    dtype = data.draw(st.sampled_from(["float64", "float32"]))
    n = data.draw(st.integers(0, 9))
    values = lane_values(np.random.default_rng(n), (n,), dtype)
    x, _ = data.draw(array_view(values))
    y = data.draw(st.sampled_from([2, 2.5, np.float32(1.5), np.array(0.5, dtype)]))
    want = lw.vmap(BY_NAME["arith"].lane, in_axes=(0, None), backend="python")(x, y)
    assert_trees_match(_REPEATED(x, y), want, what="first call")
    assert_trees_match(_REPEATED(x, y), want, what="repeated call")


# ----------------------------------------------------------------------------- helpers by attribute

import corpus as corpus_module  # noqa: E402


def attribute_helpers(x, y):
    """Plain helpers reached as ``module.function`` (compiled like helpers called by name)."""
    return corpus_module._clip(corpus_module._sq(x) - y, -2.0, 2.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_helpers_called_by_module_attribute(backend):
    x, y = np.linspace(-2.0, 2.0, 9), np.linspace(0.5, 1.5, 9)
    got = lw.vmap(attribute_helpers, backend=backend)(x, y)
    np.testing.assert_array_equal(got, np.clip(x * x - y, -2.0, 2.0))
    np.testing.assert_array_equal(got, lw.vmap(BY_NAME["helper"].lane, backend=backend)(x, y))
