"""Issue 42, round 3: ``@lw.fuse`` edges, each diff-tested against NumPy 2 (values AND dtypes)
on the ``python`` (the executable spec) and ``cpu`` backends.

* method reductions keep their keywords (``keepdims``, ``axis`` tuples, ``dtype=``;
  ``out=``, ``initial=``, ``where=`` refused naming the line);
* every reduction over every integer, float and bool width has NumPy 2's result dtype;
* ``np.clip`` with Python-int bounds beyond the dtype clips at the true values;
* comparisons with Python ints at and beyond each integer dtype's bounds compare the
  true values; arithmetic with such ints raises OverflowError, as NumPy 2 does (NEP 50);
* complex division by zero gives NumPy's IEEE results instead of raising.
"""

from __future__ import annotations

import operator
import warnings

import numpy as np
import pytest

import lanewise as lw
from lanewise.fuse import FuseError

BACKENDS = ["python", "cpu"]
INTS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
DTYPES = INTS + ["float32", "float64", "bool"]
REDUCTIONS = ["sum", "prod", "mean", "min", "max", "any", "all", "argmin", "argmax"]


def numpy_outcome(f, *args):
    """NumPy's result of ``f(*args)``, or the exception it raises (warnings silenced)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return f(*args)
        except (OverflowError, TypeError, ValueError) as e:
            return e


def assert_same(got, want, exact=True):
    """Same structure, scalar-ness, shape, dtype and values (bitwise for ints, bools and
    ``exact`` floats; NaNs equal)."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            try:
                assert_same(g, w, exact)
            except AssertionError as e:
                raise AssertionError(f"result {k}: {e}") from None
        return
    assert isinstance(got, np.ndarray) == isinstance(want, np.ndarray), (type(got), type(want))
    g, w = np.asarray(got), np.asarray(want)
    assert (g.shape, g.dtype) == (w.shape, w.dtype), (g.shape, g.dtype, w.shape, w.dtype)
    if exact or w.dtype.kind in "biu":
        np.testing.assert_array_equal(g, w, strict=True)
    else:
        np.testing.assert_allclose(g, w, rtol=2e-6 if w.dtype in (np.float32, np.complex64) else 1e-13)


def check_like_numpy(f, *args, backend, exact=True):
    """``lw.fuse(f)`` gives what NumPy gives, or raises the same exception type."""
    want = numpy_outcome(f, *args)
    if isinstance(want, Exception):
        with pytest.raises(type(want)):
            lw.fuse(f, backend=backend)(*args)
        return
    assert_same(lw.fuse(f, backend=backend)(*args), want, exact)


def sample(dtype, shape=(3, 4), seed=0):
    """Values over the dtype's whole range (its bounds included), distinct per row."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) > 0.5
    if dtype.kind == "f":
        return (rng.normal(size=shape) * 10).astype(dtype)
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    values.flat[:2] = info.min, info.max
    return values


# ----------------------------------------------------------------------------- keepdims of methods


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", REDUCTIONS)
def test_keepdims_dropped_by_method_reductions(op, backend):
    """``a - a.max(axis=1, keepdims=True)`` on a square matrix: a lost keepdims broadcast
    along the wrong axis without error (softmax, centring)."""
    x = np.random.default_rng(1).permutation(16).reshape(4, 4).astype(np.float64)
    check_like_numpy(lambda a: a - getattr(a, op)(axis=1, keepdims=True), x, backend=backend, exact=False)
    check_like_numpy(lambda a: a - getattr(np, op)(a, axis=1, keepdims=True), x, backend=backend, exact=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_method_reductions_take_numpys_positional_parameters(backend):
    x = np.random.default_rng(2).permutation(12).reshape(3, 4).astype(np.int16)

    def f(a):  # NumPy's order: min/max have no dtype, sum/prod/mean and the methods any/all do
        return (a.max(1, None, True), a.min(0, None, True), a.any(1, None, None, True), a.all(1, bool, None, True),
                np.any(a, 0, None, True), np.all(a, 1, None, True), a.any(dtype=bool),
                a.sum(1, np.int8, None, True), a.prod(0, np.float32, None, True), a.mean(1, np.float32),
                a.argmax(1, None, keepdims=True), np.argmin(a, 0, None, keepdims=True), np.max(a, 1, None, True))
    check_like_numpy(f, x, backend=backend, exact=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_method_reductions_take_axis_tuples_and_dtype(backend):
    x = sample("int16", (2, 3, 4), seed=3)

    def f(a):
        return (a.sum(axis=(0, 2)), a.max(axis=(2, 0), keepdims=True), a.min(axis=(-1,)),
                a.any(axis=(0, 1)), a.mean(axis=(0, 2), dtype=np.float32), a.prod(axis=(), dtype=np.int32),
                a.sum(dtype=np.uint8), a.all(axis=()), a.sum(where=True), np.sum(a, axis=(1, 2), keepdims=True))
    check_like_numpy(f, x, backend=backend, exact=False)


@pytest.mark.parametrize("body, match", [
    (lambda a: a.max(out=a), r"out= in x\.max\(\).*use the result.*test_round3_fuse\.py:\d+"),
    (lambda a: a.argmin(0, a), r"out= in x\.argmin\(\)"),
    (lambda a: np.sum(a, 0, None, a), r"out= in np\.sum"),
    (lambda a: a.sum(initial=1.0), r"initial= in x\.sum\(\).*x\.sum\(\) \+ v"),
    (lambda a: a.max(where=a > 0), r"where= in x\.max\(\).*np\.where\(mask"),
    (lambda a: np.cumsum(a, out=a), r"out= \(np\.cumsum at .*test_round3_fuse\.py:\d+\)"),
])
def test_reduction_keywords_lanewise_cannot_honour_are_refused(body, match):
    with pytest.raises(FuseError, match=match):
        lw.fuse(body)(np.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize("body", [
    lambda a: a.sum(0, None, None, False, 0, True, 5),  # one positional too many (NumPy: TypeError)
    lambda a: a.max(0, dtype=np.float32),  # max has no dtype
    lambda a: a.any(0, keepdims=True, initial=0),  # any has no initial
    lambda a: np.any(a, 0, bool),  # np.any has no dtype (the method has)
    lambda a: a.all(dtype=np.int8),  # no such loop
    lambda a: a.sum(0, axis=1),  # axis twice
    lambda a: a.argmax(axis=(0, 1)),  # one axis only
])
def test_reduction_signature_errors_are_numpys(body):
    x = np.arange(6.0).reshape(2, 3)
    with pytest.raises(TypeError):
        body(x)
    with pytest.raises(TypeError):
        lw.fuse(body)(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_methods_without_fused_form_run_at_a_boundary(backend):
    x = sample("float64", (3, 4), seed=4)
    check_like_numpy(lambda a: (a.cumsum(axis=1), a.cumprod(), a.std(axis=0), a.var(ddof=1)), x,
                     backend=backend, exact=False)


# ----------------------------------------------------------------------------- reduction dtypes


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", REDUCTIONS)
def test_reduction_dtypes_follow_numpy(op, dtype, backend):
    """min/max of int8 came back int64, sum/prod of uint8/uint32 int64 (NumPy: uint64)."""
    x = sample(dtype, seed=5)
    # blocked float sums round differently from NumPy's pairwise ones (a mean of ints sums floats)
    exact = op != "mean" and (op not in ("sum", "prod") or np.dtype(dtype).kind != "f")
    check_like_numpy(lambda a: (getattr(a, op)(), getattr(np, op)(a, axis=0), getattr(a, op)(axis=1, keepdims=True)),
                     x, backend=backend, exact=exact)


@pytest.mark.parametrize("backend", BACKENDS)
def test_overflowing_unsigned_prod_is_uint64(backend):
    """A uint32 prod overflowing 32 bits came back negative (int64); NumPy: uint64."""
    x = np.array([70000, 70000, 3], np.uint32)
    check_like_numpy(lambda a: (a.prod(), a.sum(), (a * np.uint32(1)).prod()), x, backend=backend)
    check_like_numpy(lambda a: (a.prod(), a.sum(), a.max()), np.full(40, 255, np.uint8), backend=backend)


# ----------------------------------------------------------------------------- np.clip


CLIP_CASES = [
    ("int8", -10, 300), ("uint8", 3, 256), ("uint8", -1, 4), ("int8", -300, 5), ("int8", None, 300),
    ("int8", -1000, None), ("int8", -2**70, 5), ("uint64", -1, 2**64), ("int64", -2**63 - 1, 2**63),
    ("uint16", 0, 65535), ("int32", -2**31, 2**31 - 1),
    # beyond the dtype on the side that matters: NumPy 2 raises OverflowError
    ("int8", 200, 300), ("int8", -300, -200), ("uint8", -5, -1), ("uint8", 300, 400), ("int8", 2**70, None),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype, lo, hi", CLIP_CASES)
def test_clip_with_python_int_bound_outside_dtype(dtype, lo, hi, backend):
    """``np.clip(int8_array, -10, 300)`` clipped at 44, ``np.clip(uint8_array, 3, 256)`` gave 0."""
    x = sample(dtype, (5,), seed=6)
    check_like_numpy(lambda a: np.clip(a, lo, hi), x, backend=backend)
    check_like_numpy(lambda a: a.clip(lo, hi), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_clip_bounds_of_other_types_keep_numpys_promotion(backend):
    u = sample("uint8", (5,), seed=7)
    check_like_numpy(lambda a: (np.clip(a, np.int64(-1), 300), np.clip(a, -0.5, 300), np.clip(a, min=-1, max=200),
                                np.clip(a, True, 256)), u, backend=backend)


# ----------------------------------------------------------------------------- comparisons


COMPARISONS = [operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne]


def bounds_constants(dtype):
    """Python ints at, just beyond and far beyond the dtype's bounds and int64's/uint64's."""
    info = np.iinfo(dtype)
    near = [info.min - 1, info.min, info.min + 1, -1, 0, 1, info.max - 1, info.max, info.max + 1]
    return sorted(set(near + [2**63 - 1, 2**63, 2**64 - 1, 2**64, -2**63, -2**63 - 1, 2**70, -2**70]))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INTS)
def test_comparisons_with_out_of_range_python_ints(dtype, backend):
    """``int8 < 300``, ``uint8 > -1``, ``uint64 < -1``, ``int64 < 2**63`` gave wrong booleans;
    NumPy 2 compares the true values: every operator, both operand orders."""
    x = sample(dtype, (6,), seed=8)
    constants = bounds_constants(dtype)

    def f(a):
        return tuple(op(a, c) for op in COMPARISONS for c in constants) + \
            tuple(op(c, a) for op in COMPARISONS for c in constants)
    check_like_numpy(f, x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_of_range_comparisons_feed_further_operations(backend):
    x = sample("int8", (5,), seed=9)
    check_like_numpy(lambda a: ((a < 300).sum(), (a < 300) & (a > 0), np.where(a != -129, a, 0),
                                (a > -1000).all(axis=0), (a == 300).astype(np.int8) + a), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["bool", "float32", "float64"])
def test_comparisons_of_bool_and_float_arrays_with_big_python_ints(dtype, backend):
    x = sample(dtype, (6,), seed=10)
    for c in (-1, 2, 300, 2**63, 2**64, 2**70, -2**70):
        for op in COMPARISONS:
            check_like_numpy(lambda a, op=op, c=c: (op(a, c), op(c, a)), x, backend=backend)


# ----------------------------------------------------------------------------- NEP 50 arithmetic


NEP50_CASES = [
    ("int8", lambda a: a + 300), ("int8", lambda a: a * -129), ("uint8", lambda a: a - (-1)),
    ("uint64", lambda a: a + -1), ("int64", lambda a: a + 2**63), ("uint64", lambda a: a + 2**64),
    ("int8", lambda a: np.maximum(a, 300)), ("int8", lambda a: np.minimum(a, -129)),
    ("uint8", lambda a: np.maximum(-1, a)),
    ("int8", lambda a: np.where(a > 0, a, 300)), ("uint8", lambda a: np.where(a > 0, -1, a)),  # NumPy wraps
    ("uint64", lambda a: a + 2**63), ("uint64", lambda a: np.maximum(a, 2**64 - 1)), ("int8", lambda a: a + 127),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype, f", NEP50_CASES)
def test_arithmetic_with_out_of_range_python_ints_follows_numpy(dtype, f, backend):
    check_like_numpy(f, sample(dtype, (5,), seed=11), backend=backend)


# ----------------------------------------------------------------------------- complex division


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
def test_complex_division_by_zero(dtype, backend):
    """``z / w`` with ``w == 0j``, ``z / 0.0``, ``x / w`` raised ZeroDivisionError; NumPy gives
    IEEE results (inf+nanj ...), bit for bit, and so must a fused lane."""
    z = np.array([1 + 1j, 0j, 1 + 0j, -1 + 0j, 1e30 + 1e30j, 3 - 4j, np.nan + 0j, np.inf + 1j], dtype)
    w = np.array([0j, 0j, 1j, 0j, 1e-30 + 0j, 1 + 2j, 0j, 0j], dtype)
    x = z.real.copy()

    def f(z, w, x):
        return z / w, z / 0.0, x / w, np.divide(z, w), np.true_divide(w, z), (z / w).real, 1 / w
    check_like_numpy(f, z, w, x, backend=backend)


# ----------------------------------------------------------------------------- many results


@pytest.mark.parametrize("backend", BACKENDS)
def test_many_results_over_one_shape(backend):
    """Found by the comparison tests: 28 or more results over one shape made a kernel of more
    than 30 arguments, which Numba refused on cpu ("Calling a closure with *args")."""
    x, y = np.linspace(-2, 2, 7), np.linspace(1, 3, 7)
    check_like_numpy(lambda a, b: tuple(a * float(k) + b for k in range(45)), x, y, backend=backend)
    check_like_numpy(lambda a, b: tuple((a + float(k) * b).sum() for k in range(45)), x, y, backend=backend,
                     exact=False)
