"""Issue 42 (correctness round 3), compiled-lane integer, float and complex edges.

Each test is named after the issue's item and checks the compiled backend against
an independent reference (NumPy 2 on whole arrays, or Python's exact integers) and
against ``backend="python"``; integer items run on both lane paths (SPMD on and off).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lanewise as lw

BACKENDS = ["python", "cpu"]
U64 = np.array([2**64 - 1, 2**63, 2**63 - 1, 2**60 + 1, 2**53 + 1, 1000, 7, 0], np.uint64)
I64 = np.array([2**63 - 1, -2**63, -1, 0, 5, 2**60, 2**53 + 1, -7], np.int64)


@pytest.fixture(params=[True, False], ids=["spmd", "scalar"])
def spmd(request, monkeypatch):
    monkeypatch.setattr(lw.config, "spmd", request.param)
    monkeypatch.setattr(lw.config, "spmd_width", 4)  # any width would do; a narrow one compiles faster
    return request.param


def run(lane, backend, *args):
    return lw.vmap(lane, backend=backend)(*args)


def assert_bitwise(got, want):
    """Same dtype and bits, part by part for complex numbers (inf+nanj is not nan+nanj)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    parts = (lambda a: (a.real, a.imag)) if got.dtype.kind == "c" else (lambda a: (a,))
    for g, w in zip(parts(got), parts(want), strict=True):
        np.testing.assert_array_equal(g, w)
        assert (np.signbit(g) == np.signbit(w))[~np.isnan(w)].all(), (g, w)


# ----------------------------------------------------------------------------- int64 and literals >= 2**63


def wide_compares(n):
    return (n < 2**63, n <= 2**63, n > 2**63, n >= 2**63, n == 2**63, n != 2**63,
            2**63 > n, 18446744073709551615 == n, n < 2**64 - 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_int64_compared_with_a_literal_at_least_2_63_is_exact(backend, spmd):
    """``n < 2**63`` was False for ``n = 2**63 - 1`` (compared through float64)."""
    got = run(wide_compares, backend, I64)
    want = (I64 < 2**63, I64 <= 2**63, I64 > 2**63, I64 >= 2**63, I64 == 2**63, I64 != 2**63,
            2**63 > I64, I64 == 18446744073709551615, I64 < 2**64 - 1)  # NumPy 2 compares exactly
    for g, w in zip(got, want, strict=True):
        assert_bitwise(g, w)
    assert got[0].all() and not got[4].any()


def plus_wide(n):
    return n + 2**63


def minus_wide(n):
    return n - 9223372036854775808


def mask_wide(n):
    return n & 2**63


def floordiv_wide(n):
    return n // 2**63


@pytest.mark.parametrize("lane", [plus_wide, minus_wide, mask_wide, floordiv_wide], ids=lambda f: f.__name__)
def test_int64_arithmetic_with_a_literal_at_least_2_63_is_refused(lane, spmd):
    """``n + 2**63`` wrapped silently compiled; NumPy (and the python backend) raise OverflowError."""
    with pytest.raises(lw.LaneTypeError, match=r"test_round3_lanes\.py:\d+: .*constant >= 2\*\*63.*np\.uint64") as e:
        run(lane, "cpu", I64)
    assert type(e.value).__name__ == "UnsignedMixingError"
    with pytest.raises(OverflowError):
        np.int64(1) + 2**63  # the reference: NumPy 2 refuses the constant too
    with pytest.raises((OverflowError, lw.LaneTypeError)):
        run(lane, "python", I64)


# ----------------------------------------------------------------------------- uint64 >= 2**63 with literals


def mix(v):
    """Hashing and RNG-style arithmetic of uint64 values with Python int constants."""
    h = v * 6364136223846793005 + 1442695040888963407
    h ^= h >> 33
    q, r = divmod(h, 10)
    return h // 3, h % 1000, q, r, 3 - (h & 255), (h | 1) << 3, 7 << (h & 7), h > 2**63


def exact_mix(v: int):
    """:func:`mix` in Python's exact integers, wrapped to uint64: the independent reference."""
    wrap = 2**64
    h = (v * 6364136223846793005 + 1442695040888963407) % wrap
    h ^= h >> 33
    return (h // 3, h % 1000, h // 10, h % 10, (3 - (h & 255)) % wrap, ((h | 1) << 3) % wrap,
            (7 << (h & 7)) % wrap, h > 2**63)


@pytest.mark.parametrize("backend", BACKENDS)
def test_uint64_at_least_2_63_with_a_small_literal_computes(backend, spmd):
    """``v // 3``, ``v % 1000`` raised UnsignedMixingError; ``divmod(v, 10)`` gave floats
    and a wrong remainder compiled (2 for 2**64 - 1 % 7)."""
    got = run(mix, backend, U64)
    want = [np.array(col, dtype=bool if k == 7 else np.uint64)
            for k, col in enumerate(zip(*(exact_mix(int(v)) for v in U64), strict=True))]
    for g, w in zip(got, want, strict=True):
        assert_bitwise(g, w)


def remainder_by_seven(v):
    return divmod(v, 7)


@pytest.mark.parametrize("backend", BACKENDS)
def test_uint64_divmod_with_a_literal_is_exact(backend):
    q, r = run(remainder_by_seven, backend, U64)
    assert_bitwise(q, U64 // np.uint64(7))
    assert_bitwise(r, U64 % np.uint64(7))


def signed_value(v):
    return v // np.int64(3)


def negative_literal(v):
    return v + -1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lane", [signed_value, negative_literal], ids=lambda f: f.__name__)
def test_uint64_with_a_signed_value_or_negative_literal_stays_refused(backend, lane):
    """NumPy computes these in float64 or refuses them; compiled they would be int64.
    (The python backend's first lane raises NumPy's OverflowError for ``v + -1`` first.)"""
    refusal = lw.LaneTypeError if backend == "cpu" or lane is signed_value else (OverflowError, lw.LaneTypeError)
    with pytest.raises(refusal) as e:
        run(lane, backend, U64)
    if isinstance(e.value, lw.LaneTypeError):
        assert re.search(r"test_round3_lanes\.py:\d+: .*uint64 value is combined", str(e.value))


def against_signed(v, k):
    return v < k, v <= k, v == k, v != k, k > v, k >= v


@pytest.mark.parametrize("backend", BACKENDS)
def test_uint64_compared_with_int64_is_exact(backend, spmd):
    """Through float64, ``2**60 + 1 == 2**60`` was True and ``2**63 > 2**63 - 1`` False."""
    k = np.array([2**63 - 1, 2**63 - 1, -1, 2**60, 2**53, 7, -7, 0], np.int64)
    got = run(against_signed, backend, U64, k)
    want = (U64 < k, U64 <= k, U64 == k, U64 != k, k > U64, k >= U64)  # NumPy 2: exact
    for g, w in zip(got, want, strict=True):
        assert_bitwise(g, w)
    assert not got[2][3] and got[0][2] is np.False_


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32])
def test_narrow_unsigned_lanes_with_literals_match_the_reference(dtype, spmd):
    """Narrow elements arrive as int64 (docs/lanes.md L06): literals, also >= 2**63, compare exactly."""
    v = np.array([np.iinfo(dtype).max, 0, 7, 200], dtype)

    def lane(v):
        return v // 3, v % 1000, v - 300, v < 2**63, v == 2**64 - 1

    got, ref = run(lane, "cpu", v), run(lane, "python", v)
    for g, w in zip(got, ref, strict=True):
        assert_bitwise(g, w)
    assert_bitwise(got[2], v.astype(np.int64) - 300)


# ----------------------------------------------------------------------------- the float32 result's dtype


def scaled(a, k):
    return a * 3


def scaled_by(a, k):
    return a * k


def both(a, k):
    return a * 3, a * k, a * 3 if k > 1 else a


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_result_dtype_ignores_an_unused_int64_argument(backend):
    """``a * 3`` of a float32 was stored as float64 when another (unused) argument was int64."""
    a, k = np.linspace(-1, 1, 7, dtype=np.float32), np.arange(7)
    assert_bitwise(run(scaled, backend, a, k), a * 3)
    assert_bitwise(run(scaled_by, backend, a, k), a * k)  # used: NumPy's float64
    got = run(both, backend, a, k)
    assert [g.dtype for g in got] == [np.float32, np.float64, np.float32]
    assert_bitwise(got[2], np.where(k > 1, a * 3, a))


# ----------------------------------------------------------------------------- complex division by zero


def quotients(z, w, x):
    return z / w, z / 0.0, x / w, z / 0, 1 / w


def divided_in_place(z, w):
    z /= w
    return z


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("backend", BACKENDS)
def test_complex_division_by_zero_gives_numpy_values(backend, dtype):
    """``z / 0j`` raised ZeroDivisionError in compiled lanes; NumPy gives inf/nan parts."""
    z = np.array([1 + 2j, 0j, -1 + 0j, 1 + 0j, 3 - 4j, complex(np.inf, 1), complex(np.nan, 0), 2.5 - 1e300j])
    w = np.array([0j, 0j, 0j, 1j, -0j, 2 + 1j, 0j, 3e-300 + 7j])
    z, w = z.astype(dtype), w.astype(dtype)
    x = np.array([1.0, 0.0, -1.0, 2.0, -0.0, np.inf, np.nan, 1e-30], dtype(0).real.dtype)
    got = run(quotients, backend, z, w, x)
    with np.errstate(all="ignore"):
        want = (z / w, z / dtype(0.0), x / w, z / dtype(0), dtype(1) / w)
        for g, wv in zip(got, want, strict=True):
            assert_bitwise(g, wv)
        assert_bitwise(run(divided_in_place, backend, z.copy(), w), z / w)


def test_complex_division_matches_numpy_bits_for_ordinary_divisors():
    """NumPy's algorithm (multiplying by the reciprocal), not CPython's (dividing)."""
    rng = np.random.default_rng(42)
    z = rng.standard_normal(4000) + 1j * rng.standard_normal(4000)
    w = rng.standard_normal(4000) * 10.0 ** rng.integers(-5, 5, 4000) + 1j * rng.standard_normal(4000)
    assert_bitwise(run(lambda z, w: z / w, "cpu", z, w), z / w)


# ----------------------------------------------------------------------------- known edges: fixed or pinned


@pytest.mark.parametrize("vector_math", [True, False])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("backend", BACKENDS)
def test_sign_of_a_complex_with_an_infinite_part_is_numpy_2s(backend, dtype, vector_math, monkeypatch):
    """``np.sign(1+infj)`` was nan+nanj compiled; NumPy 2 gives 1j."""
    monkeypatch.setattr(lw.config, "vector_math", vector_math)
    parts = [0.0, -0.0, 1.0, -2.0, np.inf, -np.inf, np.nan, 1e308, 3e38, 5e-324]
    with np.errstate(all="ignore"):
        z = np.array([complex(a, b) for a in parts for b in parts]).astype(dtype)
        want = np.sign(z)
    got = run(lambda v: np.sign(v), backend, z)
    assert_bitwise(got, want)
    assert got[np.flatnonzero(z == complex(1, np.inf))[0]] == 1j


@pytest.mark.parametrize("vector_math", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("backend", BACKENDS)
def test_spacing_of_negative_zero_is_numpy_s(backend, dtype, vector_math, monkeypatch):
    """``np.spacing(-0.0)`` was the negative subnormal compiled; NumPy gives the positive one."""
    monkeypatch.setattr(lw.config, "vector_math", vector_math)
    x = np.array([-0.0, 0.0, 1.0, -1.0, 5e-324, -5e-324, 1e30, -1e-30, np.inf, np.nan], dtype)
    with np.errstate(all="ignore"):
        want = np.spacing(x)
    got = run(lambda v: np.spacing(v), backend, x)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype and not np.signbit(got[0])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint64])
@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_dot_of_two_rows_is_numpys(backend, dtype):
    """Numba's ``np.dot`` refused integers (a bare LaneCompileError); NumPy keeps the width, wrapping."""
    info = np.iinfo(dtype)
    rows = np.random.default_rng(3).integers(info.min, info.max, (6, 9), dtype=dtype, endpoint=True)
    got = run(lambda r, s: np.dot(r, s), backend, rows, rows[::-1])
    assert_bitwise(got, np.array([np.dot(r, s) for r, s in zip(rows, rows[::-1], strict=True)]))


def maximum_minimum(a, b):
    return np.maximum(a, b), np.minimum(a, b)


def test_maximum_minimum_of_signed_zeros_is_pinned():
    """Listed in docs/lanes.md (L104): which zero np.maximum(-0.0, 0.0) returns is not
    IEEE-specified and NumPy's depends on the machine's SIMD; cpu returns the first operand."""
    a, b = np.array([-0.0, 0.0, 1.0]), np.array([0.0, -0.0, np.nan])
    got_max, got_min = run(maximum_minimum, "cpu", a, b)
    assert list(np.signbit(got_max[:2])) == [True, False] and list(np.signbit(got_min[:2])) == [True, False]
    ref_max, ref_min = run(maximum_minimum, "python", a, b)  # NumPy's scalars, whatever this machine gives
    with np.errstate(all="ignore"):
        assert_bitwise(ref_max, np.array([np.maximum(x, y) for x, y in zip(a, b, strict=True)]))
        assert_bitwise(ref_min, np.array([np.minimum(x, y) for x, y in zip(a, b, strict=True)]))
    np.testing.assert_array_equal(got_max, ref_max)  # equal values; nan propagates on both


# ----------------------------------------------------------------------------- registration and CUDA


FRESH = textwrap.dedent("""
    import numpy as np, lanewise as lw
    power = lw.vmap(lambda a, b: a ** b)(np.array([3]), np.array([2**31]))
    quotient = lw.vmap(lambda z, w: z / w)(np.array([1 + 2j]), np.array([0j]))
    third = lw.vmap(lambda v: v // 3)(np.array([2**64 - 1], np.uint64))
    print(int(power[0]), complex(quotient[0]), int(third[0]))
""")


def test_operator_fixes_hold_in_a_fresh_process_whose_lanes_name_no_math(tmp_path):
    """lanemath registered the exact ``n ** k`` (and now complex division, uint64 literals)
    only when a lane named a math function: a fresh process's ``a ** b`` gave -2**63."""
    env = dict(os.environ, LANEWISE_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    power, quotient, third = proc.stdout.split()
    assert int(power) == int(np.int64(3) ** np.int64(2**31))
    assert quotient == "(inf+infj)"
    assert int(third) == (2**64 - 1) // 3


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", reason="PTX needs the real numba-cuda")
def test_cuda_lanes_compute_uint64_literals_unsigned_and_compare_exactly():
    """The CUDA kernel is typed by numba-cuda, the program on the CPU: both must read
    ``v // 3`` as uint64 and compare int64 with 2**63 without a float64 conversion."""
    pytest.importorskip("numba.cuda")
    from lanewise.backends import cuda as lw_cuda

    def ptx_of(lane, *args):
        kernels = lw_cuda.compile_kernels(lw.vmap(lane, backend="cuda"), *args, cc=(9, 0))
        return "\n".join(kernels.values())

    divided = ptx_of(lambda v: v // 3, np.ones(3, np.uint64))
    assert "mul.hi.u64" in divided and "mul.hi.s64" not in divided
    for lane, args in [(lambda n: n < 2**63, (np.ones(3, np.int64),)),
                       (lambda v, k: v == k, (np.ones(3, np.uint64), np.ones(3, np.int64)))]:
        assert not re.search(r"cvt\.rn\.f64\.[su]64", ptx_of(lane, *args))
    quotient = ptx_of(lambda z, w: z / w, np.ones(3, complex), np.ones(3, complex))
    assert "complex_div_impl" not in quotient  # CPython's, which signals ZeroDivisionError
