"""The cuda backend against the python reference, on numba-cuda's simulator.

Run: ``NUMBA_ENABLE_CUDASIM=1 python -m pytest -q tests/cuda`` (see conftest.py).
The simulator runs the generated kernels as Python (one thread per lane, real
blocks, shared memory, barriers and atomics), so these tests check everything
but the machine code: binding, index decomposition and output placement, the
error slot and lane replay, host/device transfers, the reduction trees.  The
machine code is checked by tests/test_cuda_ptx.py (PTX for sm_90).
Sizes are tiny: the simulator is slow.
"""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lanewise as lw
from corpus import BY_NAME, CORPUS, assert_trees_match, build, check_nest, ema_step, entry_nests, lane_values
from lanewise.backends import cuda as lw_cuda
from numba import cuda

assert lw_cuda.SIMULATOR, "tests/cuda must run with NUMBA_ENABLE_CUDASIM=1"

SCALAR = [e for e in CORPUS if all(r == 0 for r in e.out_ranks)]
ARRAY_OUT = [e for e in CORPUS if any(r for r in e.out_ranks)]


def canonical_args(entry, n, seed=0, row=3):
    rng = np.random.default_rng(seed)
    args = []
    for kind in entry.kinds:
        if kind == "k":
            args.append(5)
        else:
            args.append(lane_values(rng, (n, row) if kind == "r" else (n,), entry.dtypes[0], entry.domain))
    return args


def in_axes_of(entry):
    return tuple(None if k == "k" else 0 for k in entry.kinds)


def run(entry, args, backend, **kw):
    return lw.vmap(entry.lane, in_axes=in_axes_of(entry), backend=backend, **kw)(*args)


# ----------------------------------------------------------------------------- corpus


@pytest.mark.parametrize("entry", SCALAR, ids=lambda e: e.name)
def test_corpus_matches_python(entry):
    args = canonical_args(entry, 6)
    got = run(entry, args, "cuda")
    want = run(entry, args, "python")
    assert_trees_match(got, want, loose=False, what=f"{entry.name}: cuda vs python")


@pytest.mark.parametrize("entry", ARRAY_OUT, ids=lambda e: e.name)
def test_per_lane_array_outputs_are_refused(entry):
    with pytest.raises(lw.LaneTypeError, match="array per lane"):
        run(entry, canonical_args(entry, 3), "cuda")


def binned(x, k):
    v = np.zeros(4)  # built, filled, returned: rewritten to fill the output slice
    for j in range(k):
        v[j % 4] += x * j
    return v


def ragged(x):
    v = np.full(int(x), 1.5)  # a lane-dependent length
    return v


@pytest.mark.parametrize("out_axes", [0, 1, -1])
def test_per_lane_arrays_filled_in_place_match_python(out_axes):
    x = np.linspace(0, 1, 7)
    got = lw.vmap(binned, in_axes=(0, None), out_axes=out_axes, backend="cuda")(x, 6)
    want = lw.vmap(binned, in_axes=(0, None), out_axes=out_axes, backend="python")(x, 6)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    grid = lw.vmap(lw.vmap(binned, in_axes=(0, None)), in_axes=(0, None), backend="cuda")
    np.testing.assert_array_equal(grid(np.outer(x, x), 5), lw.vmap(lw.vmap(binned, in_axes=(0, None)),
                                  in_axes=(0, None), backend="python")(np.outer(x, x), 5))


def test_per_lane_array_of_changing_shape_is_a_lane_type_error():
    # The same error class and text as on the cpu and python backends (issue 13).
    with pytest.raises(lw.LaneTypeError, match=r"returned out of shape \(3,\), but lane 0 returned shape \(2,\)"):
        lw.vmap(ragged, backend="cuda")(np.array([2.0, 2.0, 3.0]))


@pytest.mark.parametrize("name", ["arith", "sincos", "rownorm", "helper", "logic"])
@settings(max_examples=3)
@given(data=st.data())
def test_random_nests_match_jax(name, data):
    """Random nests (depth <= 3, any in/out axes, keywords, strided views) vs jax.vmap."""
    entry = BY_NAME[name]
    nest = data.draw(entry_nests(entry, max_size=3))
    check_nest(entry.lane, entry.twin, nest, backends=("cuda",))


def wave(x, y):
    r = x * x + y * y
    return math.cos(r) / (1 + r), r > 1.0


@pytest.mark.parametrize("out_axes", [(0, 0), (1, 0), ((1, 0), 0), (-1, (0, -1))], ids=str)
def test_nested_grid_out_axes(out_axes):
    x, y = np.linspace(-1, 1, 4), np.linspace(-2, 2, 5)
    levels = [dict(in_axes=(0, None), out_axes=out_axes[0]), dict(in_axes=(None, 0), out_axes=out_axes[1])]
    got = build(lw.vmap, wave, levels, backend="cuda")(x, y)
    want = build(lw.vmap, wave, levels, backend="python")(x, y)
    assert_trees_match(got, want, loose=False)


def test_three_levels_fortran_and_strided_inputs():
    rng = np.random.default_rng(1)
    a = np.asfortranarray(rng.normal(size=(3, 4)))
    b = rng.normal(size=(10,))[::-2]
    f = lw.vmap(lw.vmap(lw.vmap(lambda u, v: u * v - 1.0, in_axes=(None, 0)), in_axes=(0, None)),
                in_axes=(0, None), backend="cuda")
    want = a[:, :, None] * b[None, None, :] - 1.0
    np.testing.assert_array_equal(f(a, b), want)


def test_unmapped_output():
    f = lw.vmap(lambda x, c: (x + c, c * 2.0), in_axes=(0, None), out_axes=(0, None), backend="cuda")
    got = f(np.arange(4.0), 1.5)
    assert got[1].shape == () and got[1] == 3.0
    np.testing.assert_array_equal(got[0], np.arange(4.0) + 1.5)


def test_zero_d_array_argument():
    f = lw.vmap(lambda x, c: x * c, in_axes=(0, None), backend="cuda")
    np.testing.assert_array_equal(f(np.arange(3.0), np.array(2.0)), np.arange(3.0) * 2)


Pt = collections.namedtuple("Pt", "a b")


def pytree_lane(p, d):
    return p.a * d["w"] + p.b


def test_pytree_arguments():
    p = Pt(np.arange(3.0), np.ones(3))
    got = lw.vmap(pytree_lane, in_axes=(0, None), backend="cuda")(p, {"w": 2.0})
    np.testing.assert_array_equal(got, np.arange(3.0) * 2 + 1)


@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0)])
def test_size_zero(shape):
    x = np.zeros(shape)
    f = lw.vmap(lambda v: v + 1.0, backend="cuda")
    if len(shape) == 2:
        f = lw.vmap(lw.vmap(lambda v: v + 1.0), backend="cuda")
    got = f(x)
    assert got.shape == shape and got.dtype == np.float64


# ----------------------------------------------------------------------------- device arrays


def test_device_inputs_select_cuda_and_stay_on_device():
    x, y = np.linspace(-1, 1, 4), np.linspace(-2, 2, 5)
    grid = lw.vmap(lw.vmap(wave, in_axes=(None, 0)), in_axes=(0, None))  # no backend given
    got = grid(cuda.to_device(x), cuda.to_device(y))
    assert all(lw_cuda.is_device_array(g) for g in got)
    want = grid(x, y)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.copy_to_host(), w)


def test_small_host_array_mixed_with_device_is_copied():
    x = cuda.to_device(np.arange(5.0))
    got = lw.vmap(lambda a, b: a * b)(x, np.full(5, 2.0))
    np.testing.assert_array_equal(got.copy_to_host(), np.arange(5.0) * 2)


def test_large_host_array_mixed_with_device_is_an_error():
    n = (1 << 20) // 8 + 1
    x = cuda.to_device(np.zeros(n))
    with pytest.raises(lw.BackendError, match=r"argument big .* bytes"):
        lw.vmap(lambda small, big: small + big)(x, big=np.zeros(n))


def test_out_host_and_device():
    x = np.arange(6.0)
    f = lw.vmap(lambda v: (v * 2, v > 2), backend="cuda")
    a, b = np.empty(6), np.empty(6, bool)
    got = f(x, out=(a, b))
    assert got[0] is a and got[1] is b
    np.testing.assert_array_equal(a, x * 2)
    np.testing.assert_array_equal(b, x > 2)
    da, db = cuda.device_array(6), cuda.device_array(6, np.bool_)
    f(x, out=(da, db))
    np.testing.assert_array_equal(da.copy_to_host(), x * 2)
    with pytest.raises(lw.OutputError, match="out\\[0\\]"):
        f(x, out=(np.empty(5), b))


# ----------------------------------------------------------------------------- errors


def raises_above(x, limit):
    if x > limit:
        raise ValueError("lane value above the limit")
    return x


def _check(v):
    if v < 0:
        raise ArithmeticError("negative")
    return v


def in_helper(x):
    return _check(x) * 2


def test_lane_exception_replayed_with_lane_index():
    grid = lw.vmap(lw.vmap(raises_above, in_axes=(0, None)), in_axes=(0, None), backend="cuda")
    x = np.zeros((3, 4))
    x[1, 2] = x[2, 3] = 5.0
    with pytest.raises(ValueError, match="above the limit") as info:
        grid(x, 1.0)
    assert any("i0=1, i1=2" in note for note in info.value.__notes__)


def maybe_unbound(x, n):
    for i in range(n):
        y = x * i
    return y


def test_a_read_of_an_unbound_local_fails_the_lane_and_is_replayed():
    x, n = np.array([1.0, 2.0, 3.0]), np.array([2, 0, 1])
    with pytest.raises(lw.LaneUnboundError, match=r"local variable 'y'") as info:
        lw.vmap(maybe_unbound, backend="cuda")(x, n)
    assert any("i0=1" in note for note in info.value.__notes__)
    np.testing.assert_allclose(lw.vmap(maybe_unbound, backend="cuda")(x, n + 1), [2.0, 0.0, 3.0])


def test_exception_in_helper():
    with pytest.raises(ArithmeticError, match="negative") as info:
        lw.vmap(in_helper, backend="cuda")(np.array([1.0, -1.0, 2.0]))
    assert any("i0=1" in note for note in info.value.__notes__)


def reads_at(row, k):
    return row[k]


def test_index_out_of_bounds_is_a_lane_index_error():
    """The simulator checks indices as NumPy does; the error is the one every backend raises."""
    x = np.arange(12.0).reshape(3, 4)
    with pytest.raises(lw.LaneIndexError, match=r"index 5 is out of bounds for axis 0 with size 4.*lane i0=0"):
        lw.vmap(reads_at, in_axes=(0, None), backend="cuda")(x, 5)
    np.testing.assert_array_equal(lw.vmap(reads_at, in_axes=(0, None), backend="cuda")(x, -1), x[:, -1])


def uses_a_dict(x):
    d = {}
    return x + len(d)


def test_lane_compile_error_names_file_and_line():
    with pytest.raises(lw.LaneCompileError, match=r"cuda backend") as info:
        lw.vmap(uses_a_dict, backend="cuda")(np.arange(3.0))
    assert "test_cuda_backend.py" in str(info.value) and "d = {}" in str(info.value)


def test_out_of_memory_message():
    class OOM(Exception):
        code = 2  # CUDA_ERROR_OUT_OF_MEMORY

    def fail():
        raise OOM("cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY")

    with pytest.raises(MemoryError, match=r"allocating 123456 bytes .* output out .* free"):
        lw_cuda.alloc(fail, 123456, "output out")


def test_no_device_message(monkeypatch):
    monkeypatch.setattr(lw_cuda.device, "SIMULATOR", False)
    monkeypatch.setattr(cuda, "is_available", lambda: False)
    with pytest.raises(lw.BackendError, match="needs an NVIDIA GPU"):
        lw_cuda.require_device()


# ----------------------------------------------------------------------------- scan in lanes

def backtest(prices):
    p0 = prices[0]
    final, _ = lw.scan(ema_step, (p0, p0, 0.0, 0.0, p0), prices)
    return final[3], final[2]


@pytest.mark.parametrize("in_axes", [0, 1], ids=["series-major", "time-major"])
def test_scan_in_lane(in_axes):
    rng = np.random.default_rng(3)
    prices = 100 * np.exp(np.cumsum(0.01 * rng.standard_normal((5, 40)), axis=1))
    if in_axes == 1:
        prices = np.ascontiguousarray(prices.T)
    got = lw.vmap(backtest, in_axes=in_axes, backend="cuda")(prices)
    want = lw.vmap(backtest, in_axes=in_axes, backend="python")(prices)
    assert_trees_match(got, want, loose=False)


# ----------------------------------------------------------------------------- reduce

OPS = ["sum", "prod", "mean", "min", "max", "argmin", "argmax", "any", "all"]


def grid_of(lane, **kw):
    return lw.vmap(lw.vmap(lane, in_axes=(None, 0)), in_axes=(0, None), **kw)


def cwave(x, y):
    return math.cos(x * y) * 3.0


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("op", OPS)
def test_reduce_matches_reference(op, axis):
    x, y = np.linspace(-1, 1, 5), np.linspace(-2, 2, 19)
    got = lw.reduce(grid_of(cwave, backend="cuda"), op, axis=axis)(x, y)
    want = lw.reduce(grid_of(cwave, backend="python"), op, axis=axis)(x, y)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-13)


def pick(x, y):
    return x + 0.0 * y


@pytest.mark.parametrize("op", ["min", "max", "argmin", "argmax"])
def test_reduce_nan_and_ties_like_numpy(op):
    x = np.array([2.0, 1.0, 0.0, 1.0, np.nan, 0.0, np.nan, 2.0, 0.0, 1.0, 2.0])
    y = np.zeros(3)
    got = lw.reduce(grid_of(pick, backend="cuda"), op, axis=0)(x, y)
    np.testing.assert_array_equal(got, getattr(np, op)(x[:, None] + 0 * y, axis=0))
    finite = np.where(np.isnan(x), 1.0, x)
    got = lw.reduce(grid_of(pick, backend="cuda"), op)(finite, y)
    assert got == getattr(np, op)(finite[:, None] + 0 * y)


def test_reduce_bitwise_reproducible_and_float32_accumulates_in_float64():
    rng = np.random.default_rng(0)
    x = rng.normal(size=37).astype(np.float32)
    y = rng.normal(size=23).astype(np.float32)
    r = lw.reduce(grid_of(lambda a, b: a * b + np.float32(0.1), backend="cuda"), "sum")
    first = r(x, y)
    assert first.dtype == np.float32
    for _ in range(2):
        assert r(x, y).tobytes() == first.tobytes()
    exact = np.sum(x.astype(np.float64)[:, None] * y + np.float32(0.1))
    assert abs(float(first) - exact) <= 1e-5 * max(1.0, abs(exact))


def bigger_abs(a, b):
    return a if abs(a) >= abs(b) else b


def test_reduce_monoid_and_tuple_outputs():
    x = np.linspace(-3, 2, 13)
    got = lw.reduce(lw.vmap(lambda v: (v, v * v), backend="cuda"), lw.Monoid(bigger_abs, 0.0))(x)
    assert got == (-3.0, 9.0)
    s = lw.reduce(lw.vmap(lambda v: (v, v > 0), backend="cuda"), "sum")(x)
    assert s[0] == pytest.approx(x.sum()) and s[1] == (x > 0).sum()


def test_reduce_empty_follows_numpy():
    r = lw.reduce(lw.vmap(lambda v: v * 2.0, backend="cuda"), "sum")
    assert r(np.zeros(0)) == 0.0
    with pytest.raises(ValueError):
        lw.reduce(lw.vmap(lambda v: v * 2.0, backend="cuda"), "max")(np.zeros(0))


def test_reduce_lane_exception_replayed():
    x = np.zeros((2, 6))
    x[1, 4] = 9.0
    r = lw.reduce(lw.vmap(lw.vmap(raises_above, in_axes=(0, None)), in_axes=(0, None), backend="cuda"), "sum")
    with pytest.raises(ValueError, match="above the limit") as info:
        r(x, 1.0)
    assert any("i0=1, i1=4" in note for note in info.value.__notes__)


def test_reduce_device_inputs():
    x, y = np.linspace(-1, 1, 5), np.linspace(-2, 2, 7)
    r = lw.reduce(grid_of(cwave), "sum", axis=1)
    got = r(cuda.to_device(x), cuda.to_device(y))
    assert lw_cuda.is_device_array(got)
    np.testing.assert_allclose(got.copy_to_host(), r(x, y), rtol=1e-13)
    total = lw.reduce(grid_of(cwave), "sum")(cuda.to_device(x), cuda.to_device(y))
    assert float(total) == pytest.approx(float(lw.reduce(grid_of(cwave), "sum")(x, y)), rel=1e-13)


# ----------------------------------------------------------------------------- lw.random


import lanewise.random as lwr  # noqa: E402


def random_walk(k, n):
    x = 0.0
    for t in range(n):
        x += lwr.uniform(lwr.fold_in(k, t)) - 0.5
    return x, lwr.bits(k)


def test_random_same_numbers_as_cpu():
    keys = lwr.split(lwr.key(7), 6)
    got = lw.vmap(random_walk, in_axes=(0, None), backend="cuda")(keys, 5)
    want = lw.vmap(random_walk, in_axes=(0, None), backend="cpu")(keys, 5)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.int64], ids=lambda d: np.dtype(d).name)
def test_integer_matrix_matches_python_ints(dtype):
    """The integer rule of tests/test_integers.py: narrow integers compute in int64."""
    from test_integers import REFERENCE, extremes, wrap64

    x = extremes(dtype)
    for fn, ref in REFERENCE.items():
        got = lw.vmap(fn, backend="cuda")(x)
        assert got.dtype == np.int64 and got.tolist() == [wrap64(ref(int(v))) for v in x], fn.__name__


def test_uint64_mixed_with_signed_is_refused():
    from test_integers import U64, mixes_signed

    with pytest.raises(lw.LaneTypeError, match="uint64 value is combined with a signed"):
        lw.vmap(mixes_signed, backend="cuda")(U64)


@pytest.mark.parametrize("name", ["wsum", "posonly", "posonly_tail", "two_results", "raises"])
def test_lanes_of_36_parameters(tmp_path, name):
    """Issue 42 on the simulator: calls past 30 arguments (tests/test_many_arguments.py)."""
    import many_lanes as ml

    fn, args = getattr(ml.load(tmp_path), name), ml.arguments(5)
    if name == "raises":
        with pytest.raises(ValueError, match="a0 above one half"):
            lw.vmap(fn, backend="cuda")(*args)
        return
    got, want = lw.vmap(fn, backend="cuda")(*args), ml.per_lane(fn, args)
    for g, w in zip(got if isinstance(want, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                    strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-13)
    if name == "wsum":
        total = lw.reduce(lw.vmap(fn, backend="cuda"), "sum")(*args)
        np.testing.assert_allclose(total, ml.weighted(args).sum(), rtol=1e-13)
