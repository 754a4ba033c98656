"""``@lw.fuse``: traced NumPy code against NumPy itself, and proof that it is fused.

* hypothesis builds random expression DAGs (ufuncs, operators, np.where/clip,
  casts, constants, broadcasting views, reductions) over random shapes and dtypes
  and compares the fused result with NumPy's, dtype included;
* structural tests: a chain of N operations is ONE generated lane and ONE loop
  nest, allocates only its output, and a reduction of a 20-op chain runs in
  memory independent of n;
* what cannot be fused is a reported materialisation boundary or a clear error.
"""

from __future__ import annotations

import math
import re
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lanewise as lw
from corpus import AllocationCounter, examples
from lanewise.fuse import FuseError

# ----------------------------------------------------------------------------- helpers


def assert_like_numpy(got, want, rtol=1e-10, scale=None):
    """Same structure, shape, dtype; values equal (ints, bools) or close (floats)."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert_like_numpy(g, w, rtol, scale)
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, (g.shape, w.shape)
    assert g.dtype == w.dtype, (g.dtype, w.dtype)
    if w.dtype.kind in "biu":
        np.testing.assert_array_equal(g, w)
        return
    finite = np.abs(w[np.isfinite(w)]) if w.size else np.zeros(0)
    atol = rtol * (scale if scale is not None else (finite.max() if finite.size else 1.0))
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


def tolerance(dtype) -> float:
    return 2e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-9


def grid(n=7, m=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, m)), rng.normal(size=m), rng.normal(size=n)


# ----------------------------------------------------------------------------- random DAGs

UNARY = {
    "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "exp_neg_abs": lambda a: np.exp(-np.abs(a)),
    "sqrt_abs": lambda a: np.sqrt(np.abs(a)), "neg": lambda a: -a, "abs": abs, "square": lambda a: a ** 2,
    "log1p_abs": lambda a: np.log1p(np.abs(a)), "arctan": np.arctan, "floor": np.floor,
    "float32": lambda a: a.astype(np.float32), "float64": lambda a: a.astype(np.float64),
    "int32": lambda a: np.clip(a, -50, 50).astype(np.int32), "bool_where": lambda a: np.where(a > 0.25, a, -a),
    "clip": lambda a: np.clip(a, -0.75, 0.5), "scale": lambda a: 2.5 * a - 1, "recip": lambda a: 1 / (1 + a * a),
    "flip": lambda a: a[::-1] if a.ndim else a, "T": lambda a: a.T,  # views of computed arrays
}
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (1.5 + b * b), "max": np.maximum, "min": np.minimum, "hypot": np.hypot,
    "where": lambda a, b: np.where(a < b, a, b), "gt_mul": lambda a, b: (a > b) * a,
    "and": lambda a, b: ((a > 0) & (b < 0.5)) | (a < -1), "arctan2": np.arctan2, "pow2": lambda a, b: a ** 2 + b,
}
REDUCE = ["sum", "mean", "min", "max", "prod", "any", "all", "argmin", "argmax"]


@st.composite
def dags(draw, n_inputs=(1, 3), n_steps=(1, 8), dtypes=("float64", "float32", "int32", "int64", "bool")):
    """A random program: inputs (shapes broadcastable to one domain), ops, an optional reduction."""
    rank = draw(st.integers(1, 3))
    domain = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    shapes = []
    for _ in range(draw(st.integers(*n_inputs))):
        drop = draw(st.integers(0, rank - 1))  # broadcasting drops leading axes ...
        shapes.append(tuple(n if draw(st.booleans()) else 1 for n in domain[drop:]))  # ... and sizes to 1
    inputs = [draw(st.sampled_from(dtypes)) for _ in shapes]
    steps = []
    for k in range(draw(st.integers(*n_steps))):
        pool = len(shapes) + k
        if draw(st.booleans()):
            steps.append(("u", draw(st.sampled_from(sorted(UNARY))), draw(st.integers(0, pool - 1)), None))
        else:
            b = draw(st.one_of(st.tuples(st.just("pool"), st.integers(0, pool - 1)),
                               st.tuples(st.just("const"), st.sampled_from([0.5, -2.0, 3]))))
            steps.append(("b", draw(st.sampled_from(sorted(BINARY))), draw(st.integers(0, pool - 1)), b))
    view = draw(st.sampled_from([None, "T", "slice", "newaxis"]))
    reduce = draw(st.one_of(st.none(), st.tuples(st.sampled_from(REDUCE), st.sampled_from([None, 0, -1]))))
    return shapes, inputs, steps, view, reduce


def program_of(steps, view, reduce):
    """The random program as a NumPy function (run on arrays by NumPy, on proxies by lw.fuse)."""
    def program(*arrays):
        pool = list(arrays)
        for kind, name, a, b in steps:
            if kind == "u":
                pool.append(UNARY[name](pool[a]))
            else:
                pool.append(BINARY[name](pool[a], pool[b[1]] if b[0] == "pool" else b[1]))
        out = pool[-1]
        if view == "T":
            out = out.T
        elif view == "slice":
            out = out[::-1, ...][:3]
        elif view == "newaxis":
            out = out[None, ..., None] * 1.5
        if reduce is not None:
            op, axis = reduce
            out = getattr(np, op)(out, axis=axis)
        return out
    return program


def make_inputs(shapes, dtypes, seed):
    rng = np.random.default_rng(seed)
    values = []
    for shape, dtype in zip(shapes, dtypes, strict=True):
        v = rng.normal(size=shape) * 2
        values.append(v > 0 if dtype == "bool" else v.astype(dtype) if dtype.startswith("float")
                      else np.round(v * 3).astype(dtype))
    return values


def run_case(case, seed, backend=None):
    shapes, dtypes, steps, view, reduce = case
    program = program_of(steps, view, reduce)
    inputs = make_inputs(shapes, dtypes, seed)
    with np.errstate(all="ignore"):
        try:
            want = program(*inputs)
        except (ValueError, TypeError, IndexError) as e:  # NumPy rejects it: so must lw.fuse
            with pytest.raises(type(e)):
                lw.fuse(program, backend=backend)(*inputs)
            return
    try:
        got = lw.fuse(program, backend=backend)(*inputs)
    except lw.LaneTypeError as e:  # np.sin(bool) is float16, which lanes do not compute in
        assert "float16" in str(e), e
        return
    kinds = {np.asarray(x).dtype for x in inputs}
    assert_like_numpy(got, want, tolerance(np.float32 if np.dtype("float32") in kinds else np.float64))


@settings(max_examples=examples(14))
@given(case=dags(), seed=st.integers(0, 2**16))
def test_random_dags_match_numpy(case, seed):
    run_case(case, seed)


@settings(max_examples=examples(10))
@given(case=dags(n_steps=(1, 5)), seed=st.integers(0, 2**16))
def test_random_dags_match_numpy_on_the_python_backend(case, seed):
    run_case(case, seed, backend="python")


@pytest.mark.parametrize("dtype", ["float64", "float32", "int8", "int32", "uint16", "bool"])
def test_dtypes_follow_numpy(dtype):
    """Result dtypes, weak Python scalars and integer wraparound exactly as NumPy 2."""
    rng = np.random.default_rng(3)
    a = (rng.normal(size=(4, 3)) * 40).astype(dtype) if dtype != "bool" else rng.random((4, 3)) > 0.5
    b = (rng.normal(size=3) * 40).astype(dtype) if dtype != "bool" else rng.random(3) > 0.5

    def f(a, b):
        flip = ~(a | b) if a.dtype.kind in "biu" else -a
        return a * b + a, a * 2, a + 1.5, a > b, np.maximum(a, b), a.astype(np.float64) / 3, flip, \
            np.where(a > b, a, 1)

    with np.errstate(all="ignore"):
        want = f(a, b)
    assert_like_numpy(lw.fuse(f)(a, b), want, tolerance(dtype))


# ----------------------------------------------------------------------------- reductions


@settings(max_examples=examples(12))
@given(op=st.sampled_from(REDUCE), axis=st.sampled_from([None, 0, 1, -1, (0, 2)]),
       keepdims=st.booleans(), dtype=st.sampled_from(["float64", "float32", "int16", "bool"]),
       seed=st.integers(0, 2**16))
def test_reductions_match_numpy(op, axis, keepdims, dtype, seed):
    if op.startswith("arg") and isinstance(axis, tuple):
        axis = 1
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(3, 4, 5))
    y = rng.normal(size=(4, 1))
    cast = (lambda v: v > 0) if dtype == "bool" else (lambda v: (v * 5).astype(dtype))
    x, y = cast(x), cast(y)

    def f(x, y):
        producer = x * y + x if dtype != "bool" else x & ~y
        return getattr(np, op)(producer, axis=axis, keepdims=keepdims)

    assert_like_numpy(lw.fuse(f)(x, y), f(x, y), tolerance(dtype))


def test_python_float_arguments_are_weak_scalars():
    f = lw.fuse(lambda a, s: (a * s, a + s * 1j))
    a = np.arange(4, dtype=np.float32)
    assert_like_numpy(f(a, 0.1), (a * 0.1, a + 0.1j), 1e-6)
    assert_like_numpy(f(a.astype(np.int8), 0.1), (a.astype(np.int8) * 0.1, a.astype(np.int8) + 0.1j))


def test_reduction_with_nans_and_ties_like_numpy():
    x = np.array([[1.0, np.nan, 3.0, 3.0], [2.0, 2.0, -1.0, -1.0]])

    def f(x):
        return x.min(axis=1), x.max(), np.argmax(x, axis=1), np.argmin(x[1]), (x * 0 + 1).sum(axis=0)

    assert_like_numpy(lw.fuse(f)(x), f(x))


def test_methods_and_dtype_argument():
    x, y, _ = grid()

    def f(x, y):
        z = x - y
        return z.sum(axis=0, dtype=np.float32), z.mean(1, keepdims=True), np.add.reduce(z, axis=1), \
            (z > 0).sum(axis=1), z.prod(axis=(0, 1))

    assert_like_numpy(lw.fuse(f)(x, y), f(x, y), 1e-5)


def test_reduction_feeding_elementwise_code_is_a_second_pass():
    x, _, _ = grid(50, 40)

    def standardise(x):
        centred = x - x.mean(axis=0)
        return centred / np.sqrt((centred ** 2).mean(axis=0))

    fused = lw.fuse(standardise)
    assert_like_numpy(fused(x), standardise(x))
    e = lw.explain(fused, x)
    assert len(e.passes) == 3 and not e.boundaries  # mean; mean of squares; the map


def test_several_outputs_over_one_domain_share_one_pass():
    x, y, _ = grid(30, 20)

    def f(x, y):
        r = x * y
        return np.sin(r), np.cos(r) + y, r > 0

    fused = lw.fuse(f)
    assert_like_numpy(fused(x, y), f(x, y))
    e = lw.explain(fused, x, y)
    assert len(e.passes) == 1 and e.source.count("prange(") == 1
    assert re.search(r"return \(t\d+, t\d+, t\d+\)", e.lanes[0])

    def sums(x, y):
        return (x * y).sum(axis=1), (x + y).sum(axis=1)

    fused = lw.fuse(sums)
    assert_like_numpy(fused(x, y), sums(x, y))
    assert len(lw.explain(fused, x, y).passes) == 1


# ----------------------------------------------------------------------------- broadcasting and views


def test_grid_broadcast_is_one_nest_like_the_lane_version():
    """W1 in NumPy style: the same nest as lw.vmap(lw.vmap(lane)), nothing broadcast in memory."""
    def wave(x, y):
        r = x[:, None] ** 2 + y[None, :] ** 2
        return np.cos(r) / (1 + r)

    def lane(x, y):
        r = x * x + y * y
        return math.cos(r) / (1 + r)

    x, y = np.linspace(-2, 2, 300), np.linspace(-1, 1, 200)
    fused = lw.fuse(wave)
    assert_like_numpy(fused(x, y), wave(x, y), 1e-13)
    nest = lw.vmap(lw.vmap(lane, in_axes=(None, 0)), in_axes=(0, None))
    np.testing.assert_allclose(fused(x, y), nest(x, y), rtol=1e-14)
    e = lw.explain(fused, x, y)
    assert len(e.passes) == 1 and e.source.count("prange(") == 1
    assert "mapped at level 0: axis 0" in e and "mapped at level 1: axis 0" in e
    assert "# a0 = x[:, None]" in e.lanes[0] and "# a1 = y[None, :]" in e.lanes[0]


def test_views_transposes_slices_and_reshapes():
    x, y, z = grid(6, 4)

    def f(x, y, z):
        a = (x * 2 + y).T[::-1, 1:3]                 # view of a computed array: pushed to the leaves
        b = np.expand_dims(z, 0)[..., ::2] - 1       # (1, 3)
        c = x.reshape(4, 6)[:, :3] + b               # a real reshape of an input (a view of it)
        d = np.squeeze((y[None, :, None] * 3), axis=(0, 2))
        return a * np.swapaxes(c, 0, 1)[1:5].T, d, np.moveaxis(x[..., None] + z[:, None, None], 0, -1)

    assert_like_numpy(lw.fuse(f)(x, y, z), f(x, y, z))


def test_reshape_of_a_computed_array_is_a_boundary():
    x, _, _ = grid(6, 4)
    f = lw.fuse(lambda x: (x + 1).reshape(4, 6) * 2)
    assert_like_numpy(f(x), (x + 1).reshape(4, 6) * 2)
    assert ["reshape of a computed array" in b for b in lw.explain(f, x).boundaries] == [True]


# ----------------------------------------------------------------------------- structure


def chain(n_ops: int):
    """A chain of ``n_ops`` elementwise operations on two inputs, NumPy style."""
    ops = [lambda a, x, y: a * x, lambda a, x, y: np.sin(a) + y, lambda a, x, y: a - 0.5 * x,
           lambda a, x, y: np.sqrt(a * a + 1.0), lambda a, x, y: np.where(a > y, a, y),
           lambda a, x, y: a / (1.0 + y * y), lambda a, x, y: np.exp(-a * a)]

    def f(x, y):
        a = x + y
        for k in range(n_ops - 1):
            a = ops[k % len(ops)](a, x, y)
        return a
    return f


@pytest.mark.parametrize("n_ops", [5, 20])
def test_chain_of_n_ops_is_one_loop_nest(n_ops):
    x, y = np.linspace(0, 1, 1000), np.linspace(1, 2, 1000)
    fused = lw.fuse(chain(n_ops))
    assert_like_numpy(fused(x, y), chain(n_ops)(x, y), 1e-12)
    e = lw.explain(fused, x, y)
    assert len(e.passes) == 1 and not e.boundaries
    assert e.source.count("prange(") == 1 and e.source.count("def kernel(") == 1
    lane = e.lanes[0]
    assert lane.count("def fused(") == 1
    assert len(re.findall(r"^    t\d+ = ", lane, flags=re.M)) >= n_ops  # every op is a line of the one lane


def test_chain_allocates_only_its_output(monkeypatch):
    x, y = np.linspace(0, 1, 200_000), np.linspace(1, 2, 200_000)
    fused = lw.fuse(chain(20))
    fused(x, y)  # trace and compile first
    counter = AllocationCounter(monkeypatch)
    out = fused(x, y)
    assert sum(a is out or np.shares_memory(a, out) for a in counter.arrays) == 1
    others = [a for a in counter.arrays if not np.shares_memory(a, out)]
    assert sum(a.nbytes for a in others) < 64 * 1024, [(a.shape, a.dtype) for a in others]


def peak_during(fn) -> int:
    fn()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    del result
    return peak


def test_peak_memory_is_the_output():
    x, y = np.linspace(-2, 2, 800), np.linspace(-1, 1, 700)
    wave = lw.fuse(lambda x, y: np.cos(x[:, None] ** 2 + y ** 2) / (1 + x[:, None] ** 2 + y ** 2))
    nbytes = 800 * 700 * 8
    peak = peak_during(lambda: wave(x, y))
    assert nbytes <= peak <= nbytes * 1.02 + 256 * 1024, (peak, nbytes)


def test_reduction_of_a_20_op_chain_runs_in_memory_independent_of_n():
    """The 'terabyte' pattern, scaled down: nothing grows with the number of elements."""
    fused = lw.fuse(lambda x, y: chain(20)(x, y).sum())
    peaks = []
    for n in (10**6, 10**7):
        x = np.broadcast_to(np.linspace(0, 1, 1000)[:, None], (1000, n // 1000))  # no n-sized input
        y = np.broadcast_to(np.linspace(1, 2, n // 1000)[None, :], (1000, n // 1000))
        peaks.append(peak_during(lambda: fused(x, y)))
        assert lw.explain(fused, x, y).source.count("prange(") == 1
    assert max(peaks) < 512 * 1024, peaks  # partials only (O(blocks)), never O(n)
    x, y = np.linspace(0, 1, 300)[:, None], np.linspace(1, 2, 200)[None, :]
    np.testing.assert_allclose(fused(x, y), chain(20)(x, y).sum(), rtol=1e-12)


def test_cached_per_input_signature():
    calls = []

    def f(x, scale):
        calls.append(1)
        return x * scale

    fused = lw.fuse(f)
    x = np.arange(5.0)
    fused(x, 2.0), fused(x + 1, 3.0), fused(x[::2], 4.0)  # floats are run-time values
    assert len(calls) == 2  # shape (5,) traced once, shape (3,) once
    np.testing.assert_array_equal(fused(x, 4.0), x * 4.0)
    fused(x, 4)  # ints are static: a new trace
    assert len(calls) == 3
    fused(x.astype(np.float32), 4)
    assert len(calls) == 4


def test_a_new_shape_traces_again_but_compiles_nothing():
    """Kernels depend on ranks and dtypes, not sizes: sizes come from the inputs."""
    from lanewise.backends import cpu

    fused = lw.fuse(lambda x, y: np.cos(x[:, None] * y) + 1)
    fused(np.ones(3), np.ones(4))
    typed = cpu.stats["typed"]
    for n, m in ((5, 2), (7, 9)):
        x, y = np.linspace(0, 1, n), np.linspace(1, 2, m)
        np.testing.assert_allclose(fused(x, y), np.cos(x[:, None] * y) + 1, rtol=1e-14)
    assert cpu.stats["typed"] == typed


def test_generated_lanes_are_deterministic_and_disk_cached():
    """Same code -> same lane text and fingerprint: a new process (here: a new
    lw.fuse object) finds the compiled kernel on disk instead of typing it again."""
    from lanewise.backends import cpu
    from lanewise.lane.fingerprint import fingerprint

    def f(x, y):
        return np.tanh(x * y) - 0.25 * y

    x = np.linspace(0, 1, 64)
    first, second = lw.explain(lw.fuse(f), x, x), lw.explain(lw.fuse(f), x, x)
    assert first.lanes == second.lanes
    p1, p2 = first.program.passes[0], second.program.passes[0]
    assert fingerprint(p1.lane.function()) == fingerprint(p2.lane.function()) is not None
    typed = cpu.stats["typed"]
    np.testing.assert_allclose(lw.fuse(f)(x, x), f(x, x), rtol=1e-14)
    assert cpu.stats["typed"] == typed


# ----------------------------------------------------------------------------- lanes inside fuse


def test_vmapped_lane_calls_are_fused():
    def shade(x, y):  # divergent per-lane code: a lane function
        if x > y:
            return x * y
        return y - x

    def pair(a):
        return a + 1.0, a * 2

    grid2 = lw.vmap(lw.vmap(shade, in_axes=(None, 0)), in_axes=(0, None))
    x, y = np.linspace(-1, 1, 40), np.linspace(-2, 2, 30)

    def f(x, y):
        p, q = lw.vmap(pair)(x)
        return np.sqrt(np.abs(grid2(x, y))) + p[:, None], q.sum()

    fused = lw.fuse(f)
    g = np.where(x[:, None] > y, x[:, None] * y, y - x[:, None])
    assert_like_numpy(fused(x, y), (np.sqrt(np.abs(g)) + (x + 1)[:, None], (x * 2).sum()))
    e = lw.explain(fused, x, y)
    assert len(e.passes) == 2 and "f0(" in e.lanes[0] + e.lanes[1] and "shade" in "".join(e.lanes)


def test_lane_receiving_arrays_is_a_clear_error():
    rows = lw.vmap(lambda r: r.sum())
    with pytest.raises(FuseError, match="lanes must receive scalars"):
        lw.fuse(lambda x: rows(x * 2))(np.ones((3, 4)))


# ----------------------------------------------------------------------------- boundaries, errors


def test_unfusable_operations_are_reported_boundaries():
    rng = np.random.default_rng(5)
    x, w = rng.normal(size=(20, 8)), rng.normal(size=(8, 3))

    def f(x, w):
        h = np.tanh(x * 2) @ w          # matmul: a boundary; tanh(x * 2) is one pass before it
        s = np.sort(h, axis=0)          # another
        return (s[[0, -1]] + 1).sum(axis=0), np.cumsum(x.sum(axis=1))

    fused = lw.fuse(f)
    assert_like_numpy(fused(x, w), f(x, w))
    e = lw.explain(fused, x, w)
    names = " ".join(e.boundaries)
    assert "np.matmul" in names and "np.sort" in names and "fancy indexing" in names and "np.cumsum" in names
    assert "test_fuse.py" in names  # with the user's line
    assert "materialisation boundary" in e


def test_data_dependent_shapes_retrace():
    fused = lw.fuse(lambda x: (x[x > 0] * 2).sum() + x[x > 0].size)
    a, b = np.array([1.0, -1.0, 2.0]), np.array([1.0, 3.0, 2.0])
    assert fused(a) == (a[a > 0] * 2).sum() + 2
    assert fused(b) == (b * 2).sum() + 3


@pytest.mark.parametrize("body, match", [
    (lambda x: x * 2 if x > 0 else x, r"bool\(\).*test_fuse.py:\d+"),
    (lambda x: float(x.sum()), r"float\(\)"),
    (lambda x: np.asarray(x) + 1, r"conversion of a traced array to a NumPy array"),
    (lambda x: np.add(x, 1, out=x), r"out="),
    (lambda x: np.sum(x, where=x > 0), r"where= in np.sum"),
    (lambda x: x.__setitem__(0, 1.0), r"cannot assign into a traced array"),
])
def test_untraceable_code_raises_a_clear_error(body, match):
    with pytest.raises(FuseError, match=match):
        lw.fuse(body)(np.arange(3.0))


def test_library_that_needs_concrete_arrays_names_itself():
    def library(a):  # stands for any code that calls np.asarray on its argument
        return np.asarray(a).mean()

    with pytest.raises(FuseError) as info:
        lw.fuse(lambda x: library(x * 2))(np.arange(3.0))
    assert "test_fuse.py" in str(info.value) and isinstance(info.value, lw.LanewiseError)


def test_numpy_errors_surface_as_numpy_raises_them():
    with pytest.raises(ValueError):  # shapes that do not broadcast
        lw.fuse(lambda a, b: a + b)(np.ones(3), np.ones(4))
    with pytest.raises(IndexError):
        lw.fuse(lambda a: a[5])(np.ones(3))
    with pytest.raises(np.exceptions.AxisError):
        lw.fuse(lambda a: a.sum(axis=2))(np.ones((3, 2)))
    with pytest.raises(lw.LaneTypeError, match="argument x"):
        lw.fuse(lambda x: x + 1)(np.ones(3, dtype=np.float16))


# ----------------------------------------------------------------------------- API details


def test_pytrees_scalars_constants_and_nesting():
    captured = np.linspace(0, 1, 4)

    @lw.fuse
    def inner(a):
        return a * captured

    @lw.fuse
    def f(p, k=2):
        a, b = p["a"], p["b"]
        return {"sum": inner(a + b) ** k, "zero": np.zeros_like(a), "s": np.float32(2) * a}

    p = {"a": np.arange(4.0), "b": np.ones(4)}
    want = {"sum": ((p["a"] + 1) * captured) ** 2, "zero": np.zeros(4), "s": np.float32(2) * p["a"]}
    got = f(p)
    assert set(got) == set(want)
    for key in want:
        assert_like_numpy(got[key], want[key])
    assert_like_numpy(f(p, k=3)["sum"], ((p["a"] + 1) * captured) ** 3)


def test_lists_zero_d_and_scalar_outputs():
    f = lw.fuse(lambda x, y: ((x * y).sum(), x.max() - y.min(), x[0] * 2))
    got = f([1.0, 2.0, 3.0], np.float64(2.0))
    assert_like_numpy(got, (np.float64(12.0), np.float64(1.0), np.float64(2.0)))


def test_python_backend_matches_cpu():
    x, y, _ = grid()

    def f(x, y):
        return np.where(x > y, np.exp(-x * x), np.cos(y)).mean(axis=0), (x * 100).astype(np.int8) + 100

    assert_like_numpy(lw.fuse(f, backend="python")(x, y), lw.fuse(f)(x, y))
    assert_like_numpy(lw.fuse(f, backend="python")(x, y), f(x, y))


def test_dask_arrays_stay_lazy():
    da = pytest.importorskip("dask.array")
    x, y, _ = grid(40, 30)
    f = lw.fuse(lambda x, y: (np.sin(x) * y[None, :], (x * y).sum(axis=0)))
    dx, dy = da.from_array(x, chunks=(20, 15)), da.from_array(y, chunks=15)
    a, b = f(dx, dy)
    assert isinstance(a, da.Array) and isinstance(b, da.Array)
    assert_like_numpy((a.compute(), b.compute()), (np.sin(x) * y, (x * y).sum(axis=0)))


def test_decorator_forms_and_errors():
    @lw.fuse(backend="python")
    def g(x):
        return x + 1

    np.testing.assert_array_equal(g(np.arange(3)), np.arange(3) + 1)
    with pytest.raises(lw.BackendError):
        lw.fuse(lambda x: x, backend="nope")
    with pytest.raises(TypeError):
        lw.fuse(3)
    assert "fuse(" in repr(g) and lw.fuse.FuseError is FuseError


CUDA_SCRIPT = """
import numpy as np, lanewise as lw
from numba import cuda
x, y = np.linspace(0, 1, 6), np.linspace(1, 2, 4)
f = lw.fuse(lambda x, y: (np.cos(x[:, None] * y) + 1, (x[:, None] * y).sum(axis=1)), backend="cuda")
a, b = f(x, y)
host = lambda v: v.copy_to_host() if hasattr(v, "copy_to_host") else np.asarray(v)
assert np.allclose(host(a), np.cos(x[:, None] * y) + 1) and np.allclose(host(b), (x[:, None] * y).sum(axis=1))
a, _ = lw.fuse(lambda x, y: (np.cos(x[:, None] * y) + 1, 0))(cuda.to_device(x), cuda.to_device(y))
assert np.allclose(host(a), np.cos(x[:, None] * y) + 1)
print("ok")
"""


def test_cuda_backend_on_the_simulator(tmp_path):
    """numba-cuda's simulator, in its own process (it must be chosen before numba.cuda is imported)."""
    import importlib.util
    import os
    import subprocess
    import sys

    if importlib.util.find_spec("numba.cuda") is None:
        pytest.skip("numba-cuda is not installed")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", LANEWISE_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", CUDA_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-3000:]
