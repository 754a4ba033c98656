"""Integer semantics of lanes, one rule on every backend (issue 14, item 4).

The rule (README, docs/safety.md "Integers"): an integer element narrower than
64 bits reaches the lane as an int64, and lanes compute in 64 bits — int8
``-v`` at -128 is 128, never -128.  int64 arithmetic wraps at 2**63 as NumPy's
int64 does.  uint64 values stay uint64; an operation that would make Numba
reinterpret one as int64 (``v // k`` with ``k`` an int64) raises ``LaneTypeError``
instead of returning -1 for ``2**64 - 1``; with a non-negative constant (``v // 2``)
the result is NumPy's exact uint64 (tests/test_round3_lanes.py).

The reference is independent of lanewise and Numba: Python's exact integers,
wrapped to 64 bits.  Before the fix int8 ``-v``/``abs(v)`` gave -128 and
uint64 ``v // 2`` gave -1.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import lanewise as lw

SIGNED_SMALL = [np.int8, np.int16, np.int32]
UNSIGNED_SMALL = [np.uint8, np.uint16, np.uint32]
BACKENDS = ["python", "cpu", "dask"]


def wrap64(v: int) -> int:
    return (v + 2**63) % 2**64 - 2**63


def extremes(dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.array([info.min, info.min + 1, -1 if info.min else 0, 0, 1, info.max - 1, info.max], dtype)


def neg(v):
    return -v


def absolute(v):
    return abs(v)


def plus_one(v):
    return v + 1


def square(v):
    return v * v


def halve(v):
    return v // 2


def modulo(v):
    return v % 3


def shifted(v):
    return (v << 1) + (v >> 1)


def looped(v):  # divergent control flow: the SPMD path where it is chosen
    n = 0
    while n < (v & 3):
        n += 1
    return -v + n


REFERENCE = {neg: lambda v: -v, absolute: abs, plus_one: lambda v: v + 1, square: lambda v: v * v,
             halve: lambda v: v // 2, modulo: lambda v: v % 3, shifted: lambda v: (v << 1) + (v >> 1),
             looped: lambda v: -v + (v & 3)}


def run(fn, backend, *x):
    out = lw.vmap(fn, backend=backend)(*x)
    return np.asarray(out.compute() if hasattr(out, "compute") else out)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", SIGNED_SMALL + UNSIGNED_SMALL + [np.int64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("fn", list(REFERENCE), ids=lambda f: f.__name__)
def test_integers_compute_in_int64_and_never_wrap_below_it(backend, dtype, fn):
    x = extremes(dtype)
    got = run(fn, backend, x)
    want = [wrap64(REFERENCE[fn](int(v))) for v in x]
    assert got.dtype == np.int64
    assert got.tolist() == want


@pytest.mark.parametrize("spmd", [True, False])
@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64], ids=lambda d: np.dtype(d).name)
def test_the_spmd_path_computes_the_same(spmd, dtype, monkeypatch):
    monkeypatch.setattr(lw.config, "spmd", spmd)
    x = np.resize(extremes(dtype), 40)
    f = lw.vmap(looped)
    if spmd:
        assert "lane path: SPMD" in str(lw.explain(f, x))
    assert f(x).tolist() == [wrap64(-int(v) + (int(v) & 3)) for v in x]


U64 = np.array([0, 1, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1], np.uint64)


def u_square(v):
    return v * v


def u_neg(v):
    return -v


def u_halve(v):
    return v // np.uint64(2)


def u_plus(v):
    return v + np.uint64(1)


def u_float(v):
    return float(v) * 0.5


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, ref", [(u_square, lambda v: v * v), (u_neg, lambda v: -v),
                                     (u_halve, lambda v: v // 2), (u_plus, lambda v: v + 1)],
                         ids=lambda f: getattr(f, "__name__", ""))
def test_uint64_stays_unsigned(backend, fn, ref):
    got = run(fn, backend, U64)
    assert got.dtype == np.uint64
    assert got.tolist() == [ref(int(v)) % 2**64 for v in U64]


@pytest.mark.parametrize("backend", BACKENDS)
def test_uint64_to_float(backend):
    np.testing.assert_array_equal(run(u_float, backend, U64), U64.astype(np.float64) * 0.5)


def mixes_signed(v):
    return v // np.int64(2)  # a signed int64 value, not a literal: NumPy 2 computes it in float64


def mixes_signed_helper(v):
    return mixes_signed(v) + np.uint64(1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [mixes_signed, mixes_signed_helper], ids=lambda f: f.__name__)
def test_uint64_mixed_with_signed_is_refused_on_every_backend(backend, fn):
    with pytest.raises(lw.LaneTypeError, match=r"test_integers.py:\d+.*uint64 value is combined with a signed") as e:
        run(fn, backend, U64)
    assert "np.uint64(2)" in str(e.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_of_uint64_and_a_signed_int_is_refused_on_every_backend(backend):
    """``max(v, 1)`` of a uint64 went through float64 (2**53 + 1 came back as 2**53)."""
    with pytest.raises(lw.LaneTypeError, match=r"test_integers.py:\d+.*max\(\)/min\(\) of a uint64"):
        run(lambda v: max(v, 1), backend, U64)
    np.testing.assert_array_equal(run(lambda v: max(v, np.uint64(1)), backend, np.array([2**53 + 1, 0], np.uint64)),
                                  np.array([2**53 + 1, 1], np.uint64))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("narrow", [np.uint8, np.uint16, np.uint32])
def test_narrow_unsigned_subtraction_is_refused_on_every_backend(backend, narrow):
    """Compiled, ``np.uint8(2) - np.uint8(5)`` was 18446744073709551613 (uint64): neither
    NumPy's 253 nor Python's -3.  The fix the message gives computes the same everywhere."""
    def lane(v):
        return narrow(v) - narrow(5)

    with pytest.raises(lw.LaneTypeError, match=r"test_integers.py:\d+.*unsigned integers narrower than 64") as e:
        run(lane, backend, np.array([2, 7]))
    assert "np.int64(a) - np.int64(b)" in str(e.value)

    def fixed(v):
        return (np.int64(narrow(v)) - np.int64(narrow(5))) % 256

    np.testing.assert_array_equal(run(fixed, backend, np.array([2, 7])), [253, 2])
    wide = run(lambda v: narrow(v) + narrow(5), backend, np.array([2, 7]))  # other operations are unchanged
    np.testing.assert_array_equal(wide, [7, 12])


@pytest.mark.parametrize("backend", BACKENDS)
def test_adding_two_bools_is_refused_on_every_backend(backend):
    """``(a > 0) + (b > 0)`` was 2 compiled and 1 on the python backend (NumPy's bools add
    as a logical or), silently.  ``+=`` of a NumPy function's bool too; the fix counts the
    same everywhere, and Python's bools (a bool array's elements) still add as ints."""
    a, b = np.array([1.0, -1.0, 2.0]), np.array([1.0, 1.0, -3.0])

    def plus(x, y):
        return (x > 0) + (y > 0)

    def accumulate(x, y):
        c = x > 0
        c += np.isnan(y)
        return c

    for lane in (plus, accumulate):
        with pytest.raises(lw.LaneTypeError, match=r"test_integers.py:\d+.*two bools") as e:
            run(lane, backend, a, b)
        assert "int(a) + int(b)" in str(e.value)
    np.testing.assert_array_equal(run(lambda x, y: int(x > 0) + int(y > 0), backend, a, b), [2, 1, 1])
    np.testing.assert_array_equal(run(lambda x, y: (x > 0) + 1, backend, a, b), [2, 1, 2])  # bool + int: an int
    np.testing.assert_array_equal(run(lambda x, y: (x > 0) * (y > 0), backend, a, b), [1, 0, 0])
    np.testing.assert_array_equal(run(lambda p, q: p + q, backend, a > 0, b > 0), [2, 1, 1])


def test_unmapped_and_zero_d_integer_arguments():
    def lane(v, k):
        return -v * k

    x = extremes(np.int8)
    got = lw.vmap(lane, in_axes=(0, None))(x, np.array(2, np.int8))
    assert got.tolist() == [-2 * int(v) for v in x]


def exp_of_comparison(x):
    return np.exp(x > 3)


def arctan2_of_int8(x):
    return np.arctan2(np.int8(x), np.int8(2))


def sqrt_of_uint8_pixel(row):
    return np.sqrt(row[0])


def exp_of_bool_row(row):
    return np.exp(row > 3).sum()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, x", [
    (exp_of_comparison, np.arange(6.0)),
    (arctan2_of_int8, np.arange(6)),
    (sqrt_of_uint8_pixel, np.arange(12, dtype=np.uint8).reshape(6, 2)),
    (exp_of_bool_row, np.arange(12.0).reshape(3, 4)),
], ids=lambda v: getattr(v, "__name__", ""))
@pytest.mark.parametrize("vector_math", [True, False])
def test_float16_numpy_functions_are_refused_on_every_backend(backend, fn, x, vector_math):
    """NumPy computes ``np.exp(True)`` in float16 (2.719) and compiled code in float64
    (2.718281828): the python and cpu backends gave different numbers, silently.  With
    or without vector math (the lane's ``np`` is a stand-in module either way)."""
    with lw.config.overridden(vector_math=vector_math), pytest.raises(
            lw.LaneTypeError, match=r"test_integers.py:\d+.*bool or 8-bit integer.*float16") as e:
        run(fn, backend, x)
    assert "np.exp(float(b))" in str(e.value)


def exp_of_float_of_comparison(x):
    return np.exp(float(x > 3)) + math.exp(x > 3) + lw.lanemath.exp(x > 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_of_a_bool_in_a_numpy_function_computes_in_float64(backend):
    x = np.arange(6.0)
    np.testing.assert_allclose(run(exp_of_float_of_comparison, backend, x), 3 * np.exp((x > 3).astype(np.float64)),
                               rtol=1e-15)


def sign_and_reciprocal(r):
    return np.sign(r[0]), np.reciprocal(r[1]), np.sign(r)[2]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vector_math", [True, False])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_sign_and_reciprocal_of_unsigned_integers_are_numpys(backend, vector_math, dtype):
    """Numba's np.sign(np.uint8(200)) is 255 (a signed comparison, -1 wrapped) and its
    np.reciprocal(np.uint64(0)) is 2**64 - 1; NumPy gives 1 and 0."""
    top = np.iinfo(dtype).max
    rows = np.array([[top, 0, top // 2 + 1], [0, 1, 0], [7, 2, top]], dtype)
    with lw.config.overridden(vector_math=vector_math):
        out = lw.vmap(sign_and_reciprocal, backend=backend)(rows)
    got = [np.asarray(o.compute() if hasattr(o, "compute") else o) for o in out]
    want = [np.sign(rows[:, 0]), np.reciprocal(rows[:, 1]), np.sign(rows[:, 2])]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.tolist() == w.tolist(), (g, w)


def remainder_of_pair(r):
    return np.fmod(r[0], r[1]), np.fmod(r, r[1])[0]  # of two scalars, and of a row and a scalar


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vector_math", [True, False])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint64])
def test_fmod_of_integers_is_numpys(backend, vector_math, dtype):
    """Numba's np.fmod of signed integers was wrong for a negative operand: fmod(-7, 3)
    gave 0, fmod(7, -3) gave 7, fmod(-6, 3) gave 1 (NumPy: -1, 1, 0)."""
    info = np.iinfo(dtype)
    pairs = [(7, 3), (-7, 3), (7, -3), (-7, -3), (-6, 3), (0, 3), (5, 0), (info.min, -1), (info.min, 3), (-1, 2)]
    rows = np.array([p for p in pairs if info.min <= min(p) and max(p) <= info.max], dtype)
    with lw.config.overridden(vector_math=vector_math):
        out = lw.vmap(remainder_of_pair, backend=backend)(rows)
    with np.errstate(all="ignore"):
        want = np.fmod(rows[:, 0], rows[:, 1])
    for got in out:
        got = np.asarray(got.compute() if hasattr(got, "compute") else got)
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), (got, want)


def floored(r):
    """Of two scalars, of a row and a scalar, of a scalar and a row, and in a while loop
    (the SPMD path)."""
    n = 0
    while n < 2 and np.remainder(r[0], r[1]) == np.remainder(r[0], r[1]):
        n += 1
    return (np.floor_divide(r[0], r[1]), np.remainder(r[0], r[1]), np.mod(r, r[1])[0],
            np.floor_divide(r[0], r)[1], np.remainder(r[0], r[1]) * n)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vector_math", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_floor_division_and_remainder_of_floats_are_numpys(backend, vector_math, dtype):
    """Numba's np.floor_divide of floats was floor(a / b): -0.0 for (-3.5, inf) and -inf
    for (inf, -3.5) (NumPy: -1.0, nan); its np.remainder gave a zero remainder the
    dividend's sign ((-3.5, -3.5): 0.0, NumPy -0.0).  Bits compared, signs of zero too."""
    inf, nan = np.inf, np.nan
    pairs = [(-3.5, inf), (inf, -3.5), (-3.5, -3.5), (3.5, -3.5), (7.0, 2.0), (-7.0, 2.0), (7.0, -2.0), (1.0, 0.0),
             (-1.0, 0.0), (0.0, 0.0), (-0.0, 5.0), (0.0, -5.0), (nan, 1.0), (1.0, nan), (inf, inf), (1e-300, 1e300),
             (5.0, 0.1), (-0.5, 1e-30)]
    rows = np.array(pairs, dtype)
    with lw.config.overridden(vector_math=vector_math):
        out = lw.vmap(floored, backend=backend)(rows)
    with np.errstate(all="ignore"):
        q, m = np.floor_divide(rows[:, 0], rows[:, 1]), np.remainder(rows[:, 0], rows[:, 1])
        want = [q, m, m, np.floor_divide(rows[:, 0], rows[:, 1]), m * 2]
    for got, w in zip(out, want, strict=True):
        got = np.asarray(got.compute() if hasattr(got, "compute") else got)
        assert got.dtype == w.dtype and got.tobytes() == w.tobytes(), (got, w)


def powers(r, k):
    return np.power(r[0], r[1]), np.power(r, r[1])[0], r[0] ** k, pow(r[0], k)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vector_math", [True, False])
@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.int64, np.uint64])
def test_integer_powers_are_exact(backend, vector_math, dtype):
    """Numba's np.power of integers computed in floating point (np.power(3, 39) gave
    ...256 for ...267; narrow results were garbage), and its n ** k above an exponent
    of 65536 converted math.pow's float back (3 ** 2**31 gave -2**63), silently."""
    info = np.iinfo(dtype)
    pairs = [(3, 39), (7, 40), (3, 101), (2, 63), (5, 2), (0, 0), (1, 200), (-1, 7), (3, 100001), (-3, 65537),
             (9, 2**31 + 1), (-2, 7), (info.max, 3)]
    rows = np.array([p for p in pairs if info.min <= min(p) and max(p) <= info.max], dtype)
    wide = np.uint64 if info.min == 0 else np.int64  # (uint64 with a signed integer is refused: L07)
    k = rows[:, 1].astype(wide)  # a second, 64-bit exponent for the operator forms
    with lw.config.overridden(vector_math=vector_math):
        out = lw.vmap(powers, backend=backend)(rows, k)
    got = [np.asarray(o.compute() if hasattr(o, "compute") else o) for o in out]
    with np.errstate(all="ignore"):
        want = np.power(rows[:, 0], rows[:, 1])
        want_k = np.power(rows[:, 0].astype(wide), k)
    for g in got[:2]:
        assert g.dtype == want.dtype and g.tolist() == want.tolist(), (g, want)
    bits = 8 * np.dtype(dtype).itemsize  # the operator forms: compiled in 64 bits for a narrow type (L14)
    for g in got[2:]:
        assert [(int(a) - int(b)) % 2**bits for a, b in zip(g, want_k, strict=True)] == [0] * len(g), (g, want_k)


def float_signs(r):
    return np.sign(r[0]), np.sign(r)[1]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vector_math", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sign_of_negative_zero_is_numpys(backend, vector_math, dtype):
    """Numba's np.sign(-0.0) was -0.0 (NumPy: 0.0), a sign of zero that a later
    division or copysign turns into a different number."""
    rows = np.array([[-0.0, -0.0], [0.0, -2.5], [np.nan, np.inf], [-np.inf, np.nan]], dtype)
    with lw.config.overridden(vector_math=vector_math):
        out = lw.vmap(float_signs, backend=backend)(rows)
    for got, column in zip(out, (0, 1), strict=True):
        got = np.asarray(got.compute() if hasattr(got, "compute") else got)
        want = np.sign(rows[:, column])
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        assert np.signbit(got).tolist() == np.signbit(want).tolist(), (got, want)


def rounded(r):
    return round(r[0]), round(r[0], 2), round(r[0], -1), np.round(r[0], 2), np.round(r, -2)[0], np.around(r[0])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vector_math", [True, False])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint64, np.float32, np.float64])
def test_rounding_is_numpys(backend, vector_math, dtype):
    """Numba rounded integers through a float (round(2**63 - 1) gave -2**63,
    np.round(123456789012345678, 2) ...664, uint64 >= 2**63 came out negative) and
    floats by other algorithms than NumPy's (float32 in float64: np.round(-2.675f, 2)
    gave -2.67; round(2.675, 2) by Python's decimal rule: 2.67): lanes compute with
    NumPy scalars, whose round is NumPy's."""
    if np.dtype(dtype).kind == "f":
        values = [2.5, 3.5, -2.675, 2.675, 0.125, 1234.5678, -0.0, 1e15 + 0.5]
    else:
        info = np.iinfo(dtype)
        values = [125, 135, -125, -135, 15, 7, info.max, info.min, 123456789012345678 % (int(info.max) + 1)]
        values = [v for v in values if info.min <= v <= info.max]
    rows = np.array([[v, v] for v in values], dtype)
    if backend == "python" and dtype == np.uint64:
        pytest.skip("round() of a NumPy uint64 is a Python int, which the python backend types by value")
    with lw.config.overridden(vector_math=vector_math):
        out = lw.vmap(rounded, backend=backend)(rows)
    got = [np.asarray(o.compute() if hasattr(o, "compute") else o) for o in out]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = [[round(x), round(x, 2), round(x, -1), np.round(x, 2), np.round(x, -2), np.around(x)]
                for x in rows[:, 0]]
    for k, g in enumerate(got):
        w = [row[k] for row in want]
        assert g.tolist() == [type(g.tolist()[0])(v) for v in w], (k, g, w)
        assert np.signbit(g).tolist() == np.signbit(np.asarray(w, dtype=g.dtype)).tolist(), (k, g, w)


def rounding_loop(x, n):
    s = 0.0
    for k in range(n):  # a variable trip count: the SPMD path
        s += round(x * k, 2) + np.round(x, 1) + round(x)
    return s


def test_rounding_runs_on_the_spmd_path():
    x = np.linspace(-3.0, 3.0, 77)
    n = (np.arange(77) % 9).astype(np.int64)
    f = lw.vmap(rounding_loop)
    got = f(x, n)
    assert "SPMD on SIMD" in str(lw.explain(f, x, n))
    np.testing.assert_array_equal(got, lw.vmap(rounding_loop, backend="python")(x, n))


def medians(r):
    return np.median(r), np.median(r[1:])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vector_math", [True, False])
@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.uint64, np.float32, np.float64])
def test_median_is_numpys(backend, vector_math, dtype):
    """Numba's np.median ignored a NaN unless it sat where its selection looked
    ([5, 1, 2, nan] gave 3.5, NumPy nan) and averaged the middle integers in their
    own type, which overflowed ([2**62 + 1, 2**62 + 3] gave -4.6e18)."""
    rng = np.random.default_rng(7)
    if np.dtype(dtype).kind == "f":
        rows = rng.normal(size=(12, 6)).astype(dtype)
        for k, j in enumerate([0, 2, 3, 5, 1]):
            rows[k, j] = np.nan
        rows[6, 2], rows[7, 4] = np.inf, -np.inf
    else:
        info = np.iinfo(dtype)
        rows = rng.integers(info.min, info.max, size=(12, 6), dtype=dtype, endpoint=True)
        rows[0] = info.max
    with lw.config.overridden(vector_math=vector_math):
        out = lw.vmap(medians, backend=backend)(rows)
    got = [np.asarray(o.compute() if hasattr(o, "compute") else o) for o in out]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = [np.array([np.median(r) for r in rows]), np.array([np.median(r[1:]) for r in rows])]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w)
