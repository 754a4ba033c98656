"""The public surface: types, promotion, MATH/NUMPY tables, rebinding, interpreter calls."""

from __future__ import annotations

import math
import types

import numba
import numpy as np
import pytest

from lanewise import lanemath
from lanewise.lanemath.accuracy import evaluate

BRIEF = ["exp", "log", "sin", "cos", "tan", "pow", "sqrt", "expm1", "log1p", "exp2", "log2",
         "log10", "cbrt", "hypot", "tanh", "sinh", "cosh", "atan", "atan2", "asin", "acos",
         "asinh", "acosh", "atanh", "erf", "erfc"]


def test_every_function_is_in_the_tables():
    for name in BRIEF:
        assert lanemath.MATH[name] is lanemath.FUNCTIONS[name]
    assert "sincos" in lanemath.FUNCTIONS
    for np_name, ours in [("cos", "cos"), ("arctan2", "atan2"), ("arcsinh", "asinh"),
                          ("power", "power"), ("exp2", "exp2"), ("hypot", "hypot")]:
        assert lanemath.NUMPY[np_name] is lanemath.FUNCTIONS[ours]
    assert set(lanemath.MATH) <= set(dir(math))
    assert set(lanemath.NUMPY) <= set(dir(np))


def test_rebind_globals_replaces_modules_and_imported_names():
    from math import cos as mcos

    g = lanemath.rebind_globals({"m": math, "n": np, "c": mcos, "a": np.arcsinh, "f": np.floor,
                                 "lst": [1]})
    assert g["m"] is lanemath.math and g["n"] is lanemath.numpy
    assert g["c"] is lanemath.cos and g["a"] is lanemath.asinh
    assert g["f"] is np.floor and g["lst"] == [1]


def test_shadow_modules_keep_everything_else():
    assert lanemath.math.pi == math.pi and lanemath.math.floor is math.floor
    assert lanemath.math.cos is lanemath.cos and lanemath.math.erf is lanemath.erf
    assert lanemath.numpy.zeros is np.zeros and lanemath.numpy.arctan2 is lanemath.atan2


@numba.njit(error_model="numpy")
def _typed(x32, x64, i, b):
    return (lanemath.cos(x32), lanemath.cos(x64), lanemath.cos(i), lanemath.exp(b),
            lanemath.pow(x32, x32), lanemath.pow(x32, x64), lanemath.pow(i, i),
            lanemath.power(i, i), lanemath.atan2(x32, x32), lanemath.sincos(x32))


def test_result_types():
    _typed(np.float32(0.5), 0.5, 3, True)
    ret = _typed.nopython_signatures[0].return_type
    f32, f64 = numba.float32, numba.float64
    assert list(ret.types[:9]) == [f32, f64, f64, f64, f32, f64, f64, numba.int64, f32]
    assert list(ret.types[9].types) == [f32, f32]


def test_values_of_promoted_calls():
    r = _typed(np.float32(0.5), 0.5, 3, True)
    assert r[0] == np.float32(np.cos(np.float64(np.float32(0.5))))
    assert r[2] == lanemath.cos(3.0) and r[3] == math.e
    assert r[6] == 27.0 and r[7] == 27 and isinstance(r[7], int)


def test_interpreter_calls_match_compiled_code():
    x = np.linspace(-30, 30, 101)
    assert all(lanemath.cos(float(v)) == c for v, c in zip(x, evaluate("cos", x)))
    assert isinstance(lanemath.cos(np.float32(1.0)), np.float32)
    assert lanemath.pow(2, 10) == 1024.0
    assert lanemath.atan2(np.float32(1.0), np.float32(1.0)) == np.float32(math.pi / 4)
    s, c = lanemath.sincos(0.5)
    assert (s, c) == (lanemath.sin(0.5), lanemath.cos(0.5))


def test_numpy_names_still_accept_arrays():
    @numba.njit
    def f(row):
        return lanemath.NUMPY["cos"](row) if False else lanemath.cos(row)

    row = np.linspace(0, 1, 7)
    np.testing.assert_array_equal(f(row), np.cos(row))


def test_rebinding_a_lane_to_lanemath():
    """What lanewise does: the lane's `math` global points at lanemath.math."""

    def lane(x):
        return math.exp(-x) * math.sin(3.0 * x)

    rebound = types.FunctionType(lane.__code__, lanemath.rebind_globals(lane.__globals__))

    @numba.njit(error_model="numpy")
    def run(x, out):
        for i in range(numba.uint64(x.shape[0])):
            out[i] = jl(x[i])

    jl = numba.njit(error_model="numpy")(rebound)
    x = np.linspace(-3, 3, 1001)
    out = np.empty_like(x)
    run(x, out)
    want = evaluate("exp", -x) * evaluate("sin", 3.0 * x)
    np.testing.assert_array_equal(out, want)
    assert "lanewise_lanemath_sin_slow_f64" in run.inspect_llvm(run.signatures[0])


def test_fastmath_callers_cannot_break_the_kernels():
    """The kernels carry fastmath=False: a fastmath=True caller gets the same bits."""

    @numba.njit(error_model="numpy", fastmath=True)
    def fast(x, out):
        for i in range(numba.uint64(x.shape[0])):
            out[i] = lanemath.exp(x[i])

    x = np.random.default_rng(0).uniform(-700, 700, 5000)
    out = np.empty_like(x)
    fast(x, out)
    np.testing.assert_array_equal(out, evaluate("exp", x))


def test_bad_argument_types_are_typing_errors():
    @numba.njit
    def f(s):
        return lanemath.cos(s)

    with pytest.raises(numba.core.errors.TypingError):
        f("a string")


_CONSTANTS = '''
def f(x):
    c = np.array([1.0, -2.0, 0.5])
    return c[0] + c[1] * x + c[2] * x * x
'''


@pytest.mark.parametrize("stand_in", ["numpy", "numpy_corrected"])
def test_stand_in_modules_keep_numbas_numpy_rewrites(stand_in):
    """A lane's ``np`` is a stand-in module; Numba's rewrites know NumPy calls by the
    module's name: ``np.array`` of constants must fill the array directly, not build
    a list first (numba-stats' ndtri ran 3x slower)."""
    from numba.core import ir

    module = getattr(lanemath, stand_in)
    assert module.__name__ == "numpy" and module.__lw_shadows__ == "numpy"
    namespace = {"np": module}
    exec(_CONSTANTS, namespace)
    f = numba.njit(error_model="numpy")(namespace["f"])
    assert f(2.0) == 1.0 - 4.0 + 2.0
    (cres,) = f.overloads.values()
    ops = [stmt.value.op for block in cres.type_annotation.blocks.values() for stmt in block.body
           if isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Expr)]
    assert "build_list" not in ops and ops.count("call") == 1, ops  # one call: np.empty
