"""C99 Annex F special values, overflow/underflow thresholds and huge trig arguments.

Every case runs through the same compiled (vectorised) loop the accuracy tests use,
for float64 and float32; expected values are exact (signed zeros and NaN included).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from lanewise.lanemath.accuracy import evaluate, ulp_errors32, ulp_errors64

mp = pytest.importorskip("mpmath")

INF, NAN = math.inf, math.nan
PI, PIO2, PIO4 = math.pi, math.pi / 2, math.pi / 4
SUB = 5e-324
MAX = 1.7976931348623157e308

# (function, args, expected) — C99 F.9 (and F.9.4.4 for pow), plus exact cases.
UNARY = {
    "sin": [(0.0, 0.0), (-0.0, -0.0), (INF, NAN), (-INF, NAN), (NAN, NAN), (SUB, SUB), (-SUB, -SUB)],
    "cos": [(0.0, 1.0), (-0.0, 1.0), (INF, NAN), (-INF, NAN), (NAN, NAN), (SUB, 1.0)],
    "tan": [(0.0, 0.0), (-0.0, -0.0), (INF, NAN), (-INF, NAN), (NAN, NAN), (-SUB, -SUB)],
    "exp": [(0.0, 1.0), (-0.0, 1.0), (-INF, 0.0), (INF, INF), (NAN, NAN), (710.0, INF),
            (-746.0, 0.0), (1e300, INF), (-1e300, 0.0), (SUB, 1.0)],
    "exp2": [(0.0, 1.0), (-0.0, 1.0), (-INF, 0.0), (INF, INF), (NAN, NAN), (1024.0, INF),
             (1023.0, 2.0 ** 1023), (-1022.0, 2.0 ** -1022), (-1074.0, SUB), (-1075.0, 0.0),
             (10.0, 1024.0), (-3.0, 0.125)],
    "expm1": [(0.0, 0.0), (-0.0, -0.0), (-INF, -1.0), (INF, INF), (NAN, NAN), (SUB, SUB),
              (-SUB, -SUB), (-50.0, -1.0), (710.0, INF)],
    "log": [(1.0, 0.0), (0.0, -INF), (-0.0, -INF), (-1.0, NAN), (-INF, NAN), (INF, INF),
            (NAN, NAN), (-SUB, NAN)],
    "log2": [(1.0, 0.0), (0.0, -INF), (-0.0, -INF), (-1.0, NAN), (INF, INF), (NAN, NAN),
             (SUB, -1074.0), (2.0 ** -1022, -1022.0), (2.0 ** 1023, 1023.0), (8.0, 3.0)],
    "log10": [(1.0, 0.0), (0.0, -INF), (-0.0, -INF), (-1.0, NAN), (INF, INF), (NAN, NAN)]
             + [(10.0 ** k, float(k)) for k in range(1, 23)],
    "log1p": [(0.0, 0.0), (-0.0, -0.0), (-1.0, -INF), (-2.0, NAN), (-INF, NAN), (INF, INF),
              (NAN, NAN), (SUB, SUB), (-SUB, -SUB)],
    "sqrt": [(0.0, 0.0), (-0.0, -0.0), (INF, INF), (-1.0, NAN), (NAN, NAN), (4.0, 2.0)],
    "cbrt": [(0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -INF), (NAN, NAN), (-27.0, -3.0),
             (8.0, 2.0), (2.0 ** -1074, 2.0 ** -358)],
    "sinh": [(0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -INF), (NAN, NAN), (711.0, INF),
             (-711.0, -INF), (SUB, SUB)],
    "cosh": [(0.0, 1.0), (-0.0, 1.0), (INF, INF), (-INF, INF), (NAN, NAN), (711.0, INF)],
    "tanh": [(0.0, 0.0), (-0.0, -0.0), (INF, 1.0), (-INF, -1.0), (NAN, NAN), (40.0, 1.0),
             (-SUB, -SUB)],
    "asinh": [(0.0, 0.0), (-0.0, -0.0), (INF, INF), (-INF, -INF), (NAN, NAN), (SUB, SUB)],
    "acosh": [(1.0, 0.0), (INF, INF), (0.5, NAN), (-1.0, NAN), (-INF, NAN), (NAN, NAN)],
    "atanh": [(0.0, 0.0), (-0.0, -0.0), (1.0, INF), (-1.0, -INF), (1.5, NAN), (-INF, NAN),
              (NAN, NAN), (SUB, SUB)],
    "atan": [(0.0, 0.0), (-0.0, -0.0), (INF, PIO2), (-INF, -PIO2), (NAN, NAN), (1.0, PIO4),
             (-SUB, -SUB)],
    "asin": [(0.0, 0.0), (-0.0, -0.0), (1.0, PIO2), (-1.0, -PIO2), (1.5, NAN), (-INF, NAN),
             (NAN, NAN)],
    "acos": [(1.0, 0.0), (-1.0, PI), (0.0, PIO2), (1.5, NAN), (INF, NAN), (NAN, NAN)],
    "erf": [(0.0, 0.0), (-0.0, -0.0), (INF, 1.0), (-INF, -1.0), (NAN, NAN), (6.0, 1.0),
            (-30.0, -1.0)],
    "erfc": [(0.0, 1.0), (-0.0, 1.0), (INF, 0.0), (-INF, 2.0), (NAN, NAN), (28.0, 0.0),
             (-30.0, 2.0)],
}

_odd_ints = [-3.0, -1.0, 1.0, 3.0]
_pow_cases = []
for y in _odd_ints:                                    # pow(+-0, odd int)
    _pow_cases += [((0.0, y), INF if y < 0 else 0.0), ((-0.0, y), -INF if y < 0 else -0.0)]
for y in (-2.0, -0.5, -INF):                           # pow(+-0, y<0 not odd)
    _pow_cases += [((0.0, y), INF), ((-0.0, y), INF)]
for y in (2.0, 0.5, INF):                              # pow(+-0, y>0 not odd)
    _pow_cases += [((0.0, y), 0.0), ((-0.0, y), 0.0)]
_pow_cases += [
    ((-1.0, INF), 1.0), ((-1.0, -INF), 1.0),
    ((1.0, NAN), 1.0), ((1.0, INF), 1.0), ((1.0, -3.5), 1.0),
    ((NAN, 0.0), 1.0), ((NAN, -0.0), 1.0), ((INF, 0.0), 1.0), ((-2.5, -0.0), 1.0),
    ((-2.0, 0.5), NAN), ((-8.0, 1.0 / 3.0), NAN),
    ((0.5, -INF), INF), ((-0.5, -INF), INF), ((2.0, -INF), 0.0), ((-2.0, -INF), 0.0),
    ((0.5, INF), 0.0), ((-0.5, INF), 0.0), ((2.0, INF), INF), ((-2.0, INF), INF),
    ((-INF, -3.0), -0.0), ((-INF, -2.0), 0.0), ((-INF, -0.5), 0.0),
    ((-INF, 3.0), -INF), ((-INF, 2.0), INF), ((-INF, 0.5), INF),
    ((INF, -1.0), 0.0), ((INF, 0.5), INF),
    ((NAN, 1.0), NAN), ((2.0, NAN), NAN),
    ((-2.0, 3.0), -8.0), ((-2.0, 2.0), 4.0), ((2.0, 10.0), 1024.0), ((2.0, -1074.0), SUB),
    ((2.0, 1024.0), INF), ((10.0, 309.0), INF), ((10.0, -400.0), 0.0), ((-10.0, 309.0), -INF),
    ((9.0, 0.5), 3.0), ((-2.0, 2.0 ** 60), INF),
]
_atan2_cases = [
    ((0.0, -0.0), PI), ((-0.0, -0.0), -PI), ((0.0, 0.0), 0.0), ((-0.0, 0.0), -0.0),
    ((0.0, -1.0), PI), ((-0.0, -1.0), -PI), ((0.0, 1.0), 0.0), ((-0.0, 1.0), -0.0),
    ((1.0, 0.0), PIO2), ((1.0, -0.0), PIO2), ((-1.0, 0.0), -PIO2), ((-1.0, -0.0), -PIO2),
    ((1.0, -INF), PI), ((-1.0, -INF), -PI), ((1.0, INF), 0.0), ((-1.0, INF), -0.0),
    ((INF, 1.0), PIO2), ((-INF, 1.0), -PIO2),
    ((INF, -INF), 3 * PIO4), ((-INF, -INF), -3 * PIO4), ((INF, INF), PIO4), ((-INF, INF), -PIO4),
    ((NAN, 1.0), NAN), ((1.0, NAN), NAN), ((1.0, 1.0), PIO4), ((MAX, MAX), PIO4),
    ((SUB, SUB), PIO4), ((-SUB, -SUB), -3 * PIO4),
]
_hypot_cases = [
    ((INF, NAN), INF), ((NAN, -INF), INF), ((NAN, 1.0), NAN), ((3.0, 4.0), 5.0),
    ((-0.0, 0.0), 0.0), ((-5.0, 0.0), 5.0), ((MAX, MAX), INF), ((SUB, 0.0), SUB),
    ((3e-320, 4e-320), 5e-320),
]
BINARY = {"pow": _pow_cases, "atan2": _atan2_cases, "hypot": _hypot_cases}


def _same(a, b):
    """Bitwise-equal floats up to NaN payload (and the sign of zero counts)."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _check(name, dtype, args, expected):
    arrays = [np.array(a, dtype=dtype) for a in zip(*args)]
    got = evaluate(name, *arrays)
    assert got.dtype == dtype
    exp = np.array(expected, dtype=np.float64).astype(dtype)
    bad = [(tuple(float(a[i]) for a in arrays), float(got[i]), float(exp[i]))
           for i in range(len(got)) if not _same(float(got[i]), float(exp[i]))]
    assert not bad, f"{name}[{np.dtype(dtype).name}] (args, got, expected): {bad}"


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_values(name, dtype):
    cases = UNARY[name]
    if dtype == np.float32:
        # keep the cases whose expected value is unchanged by rounding to float32
        # (exact values, signed zeros, inf, nan) and whose argument is a float32
        cases = [(a, e) for a, e in cases
                 if (math.isnan(a) or float(np.float32(a)) == a) and
                 (math.isnan(e) or math.isinf(e) or e in (0.0, 1.0, -1.0, 2.0) or
                  float(np.float32(e)) == e) and abs(e) not in (PI, PIO2, PIO4)]
    _check(name, dtype, [(a,) for a, _ in cases], [e for _, e in cases])


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_special_values(name):
    cases = BINARY[name]
    _check(name, np.float64, [a for a, _ in cases], [e for _, e in cases])


def test_float32_thresholds():
    f = np.float32
    _check("exp", np.float32, [(f(88.72283),), (f(88.7229),), (f(-103.97),), (f(-104.0),)],
           [float(np.exp(np.float64(f(88.72283))).astype(np.float32)), INF,
            float(np.float32(np.exp(np.float64(f(-103.97))))), 0.0])
    _check("pow", np.float32, [(f(-0.0), f(-3.0)), (f(-2.0), f(3.0)), (f(2.0), f(128.0))],
           [-INF, -8.0, INF])
    _check("atan2", np.float32, [(f(-0.0), f(-0.0)), (f(0.0), f(1.0))],
           [float(np.float32(-PI)), 0.0])


def _ulp64(name, *args):
    args = tuple(np.asarray(a, dtype=np.float64) for a in args)
    return ulp_errors64(name, args, evaluate(name, *args), workers=1)


# exp/expm1/exp2/sinh/cosh/pow around overflow and underflow: the exact value decides.
THRESHOLDS = {
    "exp": [709.782712893384, 709.7827128933841, -708.3964185322641, -708.3964185322642,
            -745.1332191019411, -745.1332191019412, -744.4400719213812],
    "exp2": [1023.9999999999999, -1022.0000000000001, -1074.0, -1074.5, -1074.9999999999998],
    "expm1": [709.782712893384, 709.7827128933841, -37.42994775023705, -38.0],
    "sinh": [710.4758600739439, 710.475860073944, -710.4758600739439],
    "cosh": [710.4758600739439, 710.475860073944],
    "erfc": [26.5, 26.55, 27.2, 27.226, 27.25],
}


@pytest.mark.parametrize("name", sorted(THRESHOLDS))
def test_overflow_underflow_boundaries(name):
    errs = _ulp64(name, THRESHOLDS[name])
    assert errs.max() <= 1.0, dict(zip(THRESHOLDS[name], errs))


HUGE_TRIG = [2.0 ** 30 - 1, 2.0 ** 30, 2.0 ** 30 + 2.0, 1e10, 1e15, 1e22, 2.0 ** 60, 1e100, 1e200,
             1e300, MAX, 6381956970095103.0 * 2.0 ** 797, 5.0e-300, 1.5707963267948966,
             3.141592653589793, 7.0 * 2.0 ** 70, 2.0 ** 1023]


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_huge_arguments(name):
    xs = HUGE_TRIG + [-x for x in HUGE_TRIG]
    errs = _ulp64(name, xs)
    assert errs.max() < 1.0, dict(zip(xs, errs))
    # float32 arguments up to 3.4e38 (through the float64 slow path)
    x32 = np.array([3.4e38, 1e30, 1.7e38, 123456789.0, 2.0 ** 100, 16777217.0], np.float32)
    got = evaluate(name, x32)
    assert ulp_errors32(name, (x32,), got).max() <= 0.5 + 1e-6


def test_sincos_matches_sin_and_cos():
    x = np.concatenate([np.linspace(-20, 20, 501), np.array(HUGE_TRIG), [0.0, -0.0, INF, NAN]])
    s, c = _sincos(x)
    assert all(_same(a, b) for a, b in zip(s, evaluate("sin", x)))
    assert all(_same(a, b) for a, b in zip(c, evaluate("cos", x)))


def _sincos(x):
    import numba

    from lanewise import lanemath

    @numba.njit(error_model="numpy")
    def loop(x, s, c):
        for i in range(numba.uint64(x.shape[0])):
            s[i], c[i] = lanemath.sincos(x[i])

    s = np.empty_like(x)
    c = np.empty_like(x)
    loop(x, s, c)
    return s, c
