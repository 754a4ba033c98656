"""docs/lanes.md, row by row: every construct the page lists is run here.

The page's tables give each construct an id (`L01`, ...), a status on the
compiled CPU backend and the path it runs on.  This file parses those tables
and, for each row, runs the row's case (a lane defined below, at module level:
the SPMD transformation and some analyses read a lane's source) on the "cpu"
and "python" backends:

* "supported": the cpu result equals the python backend's (and an independent
  reference where one is given: NumPy, math, a closed form);
* "refused (`lw.X`)": the cpu backend raises ``lw.X``;
* "**differs**": in the default configuration, the two backends give what the
  row says each gives (a known discrepancy, kept visible until it is fixed);
* path "SPMD": ``lw.explain`` says "lane path: SPMD" under ``lw.config.spmd =
  True`` (and the cpu result is checked on that path); "SPMD (auto)": it says
  so under the default ``"auto"``, which takes the SPMD path only where
  ``True`` would; "scalar only": it says "lane path: scalar" even under
  ``spmd = True``.

Nearly all of the run time is Numba compiling one kernel per row (about a
second each; the arrays are tiny).

A row without a case, or a case without a row, fails
``test_every_row_has_a_case_and_every_case_a_row``.

PYTEST_DONT_REWRITE: pytest rewrites the ``assert`` statements of the modules
it rewrites into calls Numba cannot compile, and row L32's lane asserts.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import math
import random
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numba
import numpy as np
import pytest

import lanewise as lw
from corpus import fib, ping

DOC = Path(__file__).resolve().parents[1] / "docs" / "lanes.md"

X = np.linspace(-3.0, 3.0, 13)          # floats, with 0.0, +-1.0, +-2.5 among them
N = np.arange(10)                        # int64
B = np.array([False, True, True, False, True])
ROWS4 = np.arange(24.0).reshape(6, 4)    # six per-lane rows of four
SCALE = 3.0                              # a module global a lane reads (row L63)


# ============================================================================ lanes
# ---------------------------------------------------------------------------- numbers and operators


def int_ops(a, b):
    return a * b - a // 3 + a % 5 + (a << 2) - (b >> 1) + (a ^ b) + (a & b)


def float_ops(x):
    return x * x / 3.0 - x ** 2 + abs(x) - x // 0.7 + x % 0.5


def compare(x):
    return (0.0 < x <= 2.0 and not x == 1.0) or x < -2.5


def bool_sum(b):
    return b + b


def complex_ops(x):
    z = complex(x, 1.0)
    return z * z.conjugate() + z / (1 + 1j)


def narrow(v):
    return v * 100 + 1


def unsigned_with_signed(v):
    return v // np.int64(2)


def unsigned_with_literal(v):
    return v // 3 + v % 1000 * 6364136223846793005 + (3 - (v & 255))


def beyond_int64_compare(n, v):
    return v == n, n >= v, v < n


def int64_plus_wide(n):
    return n + 2**63


def complex_by_zero(z, w):
    return z / w, z / 0.0


def signed_zero_extremes(a, b):
    return np.maximum(a, b), np.minimum(a, b)


def complex_sign(z):
    return np.sign(z)


def spacing_of(x):
    return np.spacing(x)


def integer_dot(r):
    return np.dot(r, r)


def unsigned_with_unsigned(v):
    return v // np.uint64(2)


def f32_exact(x):
    return x * 2.0 + 1


def by_zero(x, n):
    return x / 0.0, n / 0, n // 0, n % 0


def conversions(x):
    return int(x) + float(round(x)) + min(x, 1.0) + max(x, -1.0, 0.5) + abs(-x) + float(x > 0.5) / 4.0


def int_power(n):
    return n ** 2 + 2 ** n


def f32_tenth(x):
    return x * 0.1


def narrow_row(r):
    return r[0] * 100


def math_domain(x):
    return math.sqrt(x)


def to_int(x):
    return int(x)


def big_int(n):
    return n + 2**70


def wide_shift(n):
    return n << 65


def negative_power(n):
    return n ** -1


def bool_invert(b):
    return ~b


def comparison_sum(a, b):
    return (a > 0) + (b > 0.5)


def narrow_unsigned_difference(r):
    return r[0] - r[1]


def explicit_float64(x):
    return np.float64(x) / 3


def narrow_made(v):
    return np.int16(v) + 1


def exp_of_bool(x):
    return np.exp(x > 0.5)


def exp_of_int16(v):
    return np.exp(np.int16(v))


def integer_fmod(r):
    return np.fmod(r[0], r[1])


def middle(r):
    return np.median(r)


def float_floor_division(r):
    return np.floor_divide(r[0], r[1]) + np.remainder(r[1], r[0]) + np.mod(r[0], 2.0)


FLOORED = np.array([[-3.5, np.inf], [np.inf, -3.5], [7.0, 2.0], [-3.5, -3.5]])


def rounding(r):
    return round(r[0]), np.round(r[0], 2), round(r[1], 2)


def integer_powers(r):
    return np.power(r[0], r[1]) + r[0] ** r[2]


def unsigned_sign(r):
    return np.sign(r[0]), np.reciprocal(r[1])


def floor_quotient(p, q):
    return p // q


def root_of_negative(x):
    y = float(x) - 10.0
    return y ** 0.5


def length_by_zero(r):
    return len(r) // 0


# ---------------------------------------------------------------------------- control flow


def branches(x):
    if x < -1.0:
        y = -x
    elif x < 1.0:
        y = x * x
    else:
        y = 2.0 * x
    return y


def ternary(x):
    return x if x > 0 else -2.0 * x


def for_range(n):
    s = 0
    for k in range(n):
        s += k * k
    return s


def for_enumerate(r):
    s = 0.0
    for i, v in enumerate(r):
        s += i * v
    return s


def halvings(x):
    n = 0
    while x > 1.0:
        x = x / 2.0
        n += 1
    return n


def break_continue(n):
    s = 0
    for k in range(100):
        if k % 3 == 0:
            continue
        if k > n:
            break
        s += k
    return s


def early_return(x):
    for k in range(50):
        if x * k > 10.0:
            return k
    return -1


def match_case(n):
    match n:
        case 0:
            return 10
        case 1:
            return 20
        case _:
            return 30


def walrus(x):
    if (y := x * 2.0) > 0.0:
        return y
    return -y


def asserting(x):
    assert x < 2.5, "too large"
    return x


def raising(x):
    if x > 2.5:
        raise ValueError(f"x={x} is too large")
    return x


def unbound_after_loop(x):  # row L120: no iteration for x < 1, then y is read
    for i in range(int(x)):
        y = x * i
    return y


def try_except(x):
    try:
        if x > 1.0:
            raise ValueError("large")
        y = x
    except Exception:  # noqa: BLE001 - the construct under test (row L34)
        y = -1.0
    return y


def except_class(x):
    try:
        if x > 1.0:
            raise ValueError("large")
        y = x
    except ValueError:
        y = -1.0
    return y


def except_as(x):
    try:
        y = 1.0 / x
    except Exception as e:  # noqa: BLE001, F841 - the construct under test (row L111)
        y = -1.0
    return y


def with_block(x):
    with contextlib.nullcontext():
        y = x + 1.0
    return y


def generator_expression(x):
    return sum(x * k for k in range(3))


def inner_function(x):
    def twice(t):
        return 2.0 * t

    shift = lambda t: t + x  # noqa: E731 - the construct under test
    return twice(x) + shift(1.0)


def printing(x):
    print("lane value", x)
    return x


# ---------------------------------------------------------------------------- results


class Pair(NamedTuple):
    lo: float
    hi: float


def tuple_result(x):
    return x, 2.0 * x


def namedtuple_result(x):
    return Pair(x - 1.0, x + 1.0)


def returns_none(x):
    return None


def none_on_some_paths(x):
    if x > 0:
        return x
    return None


def dict_result(x):
    return {"a": x, "b": 2.0 * x}


def filled_array(x):
    v = np.zeros(3)
    v[0] = x
    v[1] = 2.0 * x
    v[2] = 3.0 * x
    return v


def array_expression(r):
    return r * 2.0


def varying_shape(r, k):
    return r[:k] * 2.0


def generator_lane(x):
    yield x


# ---------------------------------------------------------------------------- per-lane arrays


def row_index(r, k):
    return r[k] - r[-1]


def row_length(r):
    return len(r) * r[0] + r.shape[0]


def row_slice(r):
    return r[1:3].sum()


def row_methods(r):
    return r.sum() + r.max() + np.mean(r)


def temporary_array(x):
    t = np.zeros(3)
    t[0] = x
    t[2] = 1.0
    return t.sum()


def table_lookup(k, table):
    return table[k] * 2.0


def view_2d(m):
    return m[0, 1] + m[1, 0]


def write_row(r):
    r[0] = -1.0
    return r[1]


def aliased_write(x):  # row L119: b is a second name for a
    a = np.zeros(3)
    b = a
    b[0] = x
    return a.sum() * x


def jacrev_of_aliased(x):
    return lw.jacrev(aliased_write)(x)


# ---------------------------------------------------------------------------- calls


def math_calls(x):
    return math.sin(x) + math.hypot(x, 2.0) + math.floor(x)


def numpy_scalar_calls(x):
    return np.sqrt(abs(x)) + np.arctan2(x, 2.0) + np.exp(-x)


def numpy_where(x):
    return np.where(x > 0.0, x, 0.0) * 2.0


def smoothstep(t):
    t = min(max(t, 0.0), 1.0)
    return t * t * (3.0 - 2.0 * t)


def uses_helper(x):
    return smoothstep(x / 4.0) - smoothstep(-x)


@numba.njit
def jit_helper(x):
    return x * 3.0 + 1.0


def uses_jit_helper(x):
    return jit_helper(x) - 1.0


def make_scaler(k):
    def scaled(x):
        return x * k

    return scaled


SCALED = make_scaler(2.5)


def uses_global(x):
    return x * SCALE


def builds_list(x):
    items = [x, 2.0 * x, 3.0 * x]
    items.append(4.0 * x)
    squares = [v * v for v in items]
    return squares[1] + len(items)


def builds_dict(x):
    d = {"a": x, "b": 2.0 * x}
    d["c"] = 3.0
    return d["a"] + d["b"] + d["c"]


def string_constant(x):
    s = "abc"
    return len(s) * x


def formats(x):
    return len(f"{x}")


def formats_str(x):
    return len(str(x))


def percent_format(x):
    return len("%.2f" % x)


def ragged_array(x):
    return np.array([[1.0, 2.0], [3.0]])[0, 0] * x


def python_random(x):
    return x + random.random()


def numpy_random(x):
    return x + np.random.normal()


# ---------------------------------------------------------------------------- lw.scan and lw.random


def pair_step(c, v):  # enough arithmetic per element for "auto" (docs/spmd.md)
    return (c[0] + v * v, 0.5 * c[1] + 2.0 * v), None


def scan_tuple(r):
    c, _ = lw.scan(pair_step, (0.0, 0.0), r)
    return c[0] + c[1]


class Acc(NamedTuple):
    total: float
    peak: float


def acc_step(c, v):
    return Acc(c.total + v, max(c.peak, v)), None


def scan_namedtuple(r):
    c, _ = lw.scan(acc_step, Acc(0.0, -1e300), r)
    return c.total * c.peak


def dict_step(c, v):
    return {"b": c["b"] + v, "a": c["a"] * 2.0}, c["a"]


def scan_dict(r):
    c, ys = lw.scan(dict_step, {"b": 0.0, "a": 1.0}, r)
    return c["a"] + c["b"] + ys.sum()


def scan_closure(r, alpha):
    def step(c, v):  # reads the lane's alpha: a closure over a lane value
        return alpha * v + (1.0 - alpha) * c, c
    c, ys = lw.scan(step, 0.0, r)
    return c + ys.sum()


def dict_xs_step(c, x):
    return c + x["u"] * x["v"], x["v"] - x["u"]


def scan_dict_xs(r):
    c, ys = lw.scan(dict_xs_step, 0.0, {"v": 2.0 * r, "u": r})
    return c + ys.sum()


_NO_SOURCE: dict = {}
exec(compile("def no_source(x):\n    return x * x + 1.0\n", "<no source>", "exec"), _NO_SOURCE)


no_source = _NO_SOURCE["no_source"]


def grad_of_sourceless(x):  # row L110: lw.grad of a lane whose text is nowhere
    return lw.grad(no_source)(x)


# row L117: 36 parameters (CPython calls a function of more than 30 with a *args tuple)
def wide_lane(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21,
              a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, a34, a35):
    return (1.0 * a0 + 2.0 * a1 + 3.0 * a2 + 4.0 * a3 + 5.0 * a4 + 6.0 * a5 + 7.0 * a6 + 8.0 * a7 + 9.0 * a8 +
            10.0 * a9 + 11.0 * a10 + 12.0 * a11 + 13.0 * a12 + 14.0 * a13 + 15.0 * a14 + 16.0 * a15 + 17.0 * a16 +
            18.0 * a17 + 19.0 * a18 + 20.0 * a19 + 21.0 * a20 + 22.0 * a21 + 23.0 * a22 + 24.0 * a23 + 25.0 * a24 +
            26.0 * a25 + 27.0 * a26 + 28.0 * a27 + 29.0 * a28 + 30.0 * a29 + 31.0 * a30 + 32.0 * a31 + 33.0 * a32 +
            34.0 * a33 + 35.0 * a34 + 36.0 * a35)


# row L118: 36 positional-only parameters
def wide_positional_only(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19,
                         a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31, a32, a33, a34, a35, /):
    return (1.0 * a0 + 2.0 * a1 + 3.0 * a2 + 4.0 * a3 + 5.0 * a4 + 6.0 * a5 + 7.0 * a6 + 8.0 * a7 + 9.0 * a8 +
            10.0 * a9 + 11.0 * a10 + 12.0 * a11 + 13.0 * a12 + 14.0 * a13 + 15.0 * a14 + 16.0 * a15 + 17.0 * a16 +
            18.0 * a17 + 19.0 * a18 + 20.0 * a19 + 21.0 * a20 + 22.0 * a21 + 23.0 * a22 + 24.0 * a23 + 25.0 * a24 +
            26.0 * a25 + 27.0 * a26 + 28.0 * a27 + 29.0 * a28 + 30.0 * a29 + 31.0 * a30 + 32.0 * a31 + 33.0 * a32 +
            34.0 * a33 + 35.0 * a34 + 36.0 * a35)


#: Their arguments (36 arrays) and value: a weighted sum, so that a swapped argument shows.
WIDE_ARGS = tuple(X + 0.01 * i for i in range(36))
WIDE_SUM = sum((i + 1.0) * a for i, a in enumerate(WIDE_ARGS))


def sum_step(c, v):
    return c + v, c * v


def scan_ys(r):
    c, ys = lw.scan(sum_step, 0.0, r)
    return ys.sum() + c


def scan_scalar(x):
    c, _ = lw.scan(sum_step, 0.0, x)
    return c


def draw(key, i):
    return lw.random.uniform(lw.random.fold_in(key, i))


# ---------------------------------------------------------------------------- arguments and lane forms


def dict_argument(p, x):
    return p["a"] * x + p["b"]


def writes_record(p, x):
    p["a"] = x
    return p["b"]


def tuple_argument(p):
    return p[0] * p[1]


def unmapped_scalar(x, s):
    return x * s


def apply_function(f, x):
    return f(x)


def shifted(a, x, scale=1.0):
    return (x - a) * scale


def star_args(*args):
    return args[0] * args[1]


def no_arguments():
    return 1.5


LAMBDA = lambda x: x * 2.0 + 1.0  # noqa: E731 - the construct under test (row L84)


# ============================================================================ cases


@dataclass
class Case:
    """One row's lane, arguments and expectations."""

    lane: Callable
    args: Any                       # a tuple, or a function making one (rows that write into arguments)
    want: Any = None                # an independent reference for the result (None: none given)
    vmap: dict = field(default_factory=dict)  # further lw.vmap keywords (in_axes, axis_size)
    raises: type | None = None      # a supported lane that raises: both backends raise this, alike
    cpu: Any = None                 # "differs" rows: what cpu gives (value, exception class or predicate)
    python: Any = None              # "differs" rows: what the python backend gives, likewise
    check: Callable | None = None   # further checks, called with (case, capfd)

    def arguments(self) -> tuple:
        return self.args() if callable(self.args) else self.args

    def mapped(self, backend: str):
        return lw.vmap(self.lane, backend=backend, **self.vmap)

    def run(self, backend: str):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # NumPy's and Numba's warnings are not what a row states
            return self.mapped(backend)(*self.arguments())


def wrapped(n: int) -> int:
    """A Python integer wrapped to int64, as NumPy's int64 arithmetic wraps."""
    return (n + 2**63) % 2**64 - 2**63


def ints(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def raising_lane_notes(case, capfd):
    """The exception carries a note naming the lane and its index."""
    with pytest.raises(case.raises) as info:
        case.run("cpu")
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert case.lane.__name__ in notes and "i0=" in notes, notes


def out_of_bounds(case, capfd):
    for backend in ("cpu", "python"):
        with pytest.raises(lw.LaneIndexError, match="index 4 is out of bounds"):
            lw.vmap(row_index, in_axes=(0, None), backend=backend)(ROWS4, 4)
        with pytest.raises(lw.LaneIndexError, match="index -5 is out of bounds"):
            lw.vmap(row_index, in_axes=(0, None), backend=backend)(ROWS4, -5)


def table_out_of_bounds(case, capfd):
    for backend in ("cpu", "python"):
        with pytest.raises(lw.LaneIndexError, match="index 3 is out of bounds for axis 0 with size 3"):
            lw.vmap(table_lookup, in_axes=(0, None), backend=backend)(N, np.array([1.0, 2.0, 3.0]))


def writes_through(case, capfd):
    for backend in ("cpu", "python"):
        rows = ROWS4.copy()
        lw.vmap(write_row, backend=backend)(rows)
        assert np.array_equal(rows[:, 0], np.full(6, -1.0)) and np.array_equal(rows[:, 1:], ROWS4[:, 1:])


def global_is_in_the_key(case, capfd):
    module = sys.modules[__name__]
    old = module.SCALE
    try:
        module.SCALE = 4.0  # rebinding the global, then a new vmap: a new kernel, not the old constant
        np.testing.assert_array_equal(lw.vmap(uses_global)(X), X * 4.0)
    finally:
        module.SCALE = old


def prints_values(case, capfd):
    capfd.readouterr()
    case.run("cpu")
    out = capfd.readouterr().out
    assert "lane value -3.0" in out and "lane value 3.0" in out, out


def str_is_refused_too(case, capfd):
    with pytest.raises(lw.LaneCompileError, match=r"formats a value as text \(str\(\)\)"):
        lw.vmap(formats_str)(X)


def numpy_ufunc_lane(case, capfd):
    got = lw.vmap(np.arctan2)(X, X[::-1].copy())
    assert_same(got, lw.vmap(np.arctan2, backend="python")(X, X[::-1].copy()))
    assert_same(got, np.arctan2(X, X[::-1]))


def python_refuses_too(case, capfd):
    """Argument errors: the python backend refuses alike (lw.AxisSpecError)."""
    with pytest.raises(lw.AxisSpecError, match="argument"):
        case.run("python")


def records_are_read_only(case, capfd):
    with pytest.raises(lw.LaneCompileError, match=r'p\["a"\] = x'):
        lw.vmap(writes_record)({"a": X.copy(), "b": X}, X)


def cpu_gives_an_int_without_error(result) -> bool:
    return np.asarray(result).dtype == np.int64


KEY = lw.random.key(7)
KEY_TUPLE = (KEY[0], KEY[1])
ORDERED = collections.OrderedDict([("a", X), ("b", X[::-1].copy())])
F32 = np.linspace(-2.0, 2.0, 9, dtype=np.float32)
TENTHS = np.full(4, 1.1, dtype=np.float32)
U64 = np.array([0, 1, 7, 2**63, 2**64 - 1], dtype=np.uint64)
I8 = np.arange(-128, 128, 8, dtype=np.int8)
NONFINITE = np.array([np.nan, np.inf, -np.inf, 1e20, 2.5])
POSITIVE = np.linspace(0.5, 40.0, 9)

with np.errstate(all="ignore"):
    BY_ZERO = (X[:10] / 0.0, np.where(N == 0, np.nan, np.inf), np.zeros(10, np.int64), np.zeros(10, np.int64))

CASES: dict[str, Case] = {
    # numbers and operators
    "L01": Case(int_ops, (N - 5, 3 * N[::-1]),
                want=(lambda a, b: a * b - a // 3 + a % 5 + (a << 2) - (b >> 1) + (a ^ b) + (a & b))(N - 5,
                                                                                                    3 * N[::-1])),
    "L02": Case(float_ops, (X,), want=X * X / 3.0 - X ** 2 + abs(X) - X // 0.7 + X % 0.5),
    "L03": Case(compare, (X,), want=((0.0 < X) & (X <= 2.0) & (X != 1.0)) | (X < -2.5)),
    "L04": Case(bool_sum, (B,), want=ints(B) * 2),
    "L05": Case(complex_ops, (X,), want=(X + 1j) * (X - 1j) + (X + 1j) / (1 + 1j)),
    "L06": Case(narrow, (I8,), want=ints(I8) * 100 + 1),
    "L07": Case(unsigned_with_signed, (U64,)),
    "L08": Case(unsigned_with_unsigned, (U64,), want=U64 // np.uint64(2)),
    "L09": Case(f32_exact, (F32,), want=F32 * np.float32(2.0) + np.float32(1.0)),
    "L10": Case(by_zero, (X[:10], N), want=BY_ZERO),
    "L11": Case(conversions, (X,), want=np.trunc(X) + np.round(X) + np.minimum(X, 1.0)
                + np.maximum(np.maximum(X, -1.0), 0.5) + abs(X) + (X > 0.5) / 4.0),
    "L12": Case(int_power, (N,), want=N ** 2 + 2 ** N),
    "L13": Case(f32_tenth, (TENTHS,), cpu=(TENTHS.astype(np.float64) * 0.1).astype(np.float32),
                python=TENTHS * np.float32(0.1)),
    "L14": Case(narrow_row, (np.full((3, 4), 100, np.int8),), cpu=ints([10000] * 3), python=ints([16] * 3)),
    "L15": Case(math_domain, (X,), cpu=np.sqrt(np.where(X < 0, np.nan, X)), python=ValueError),
    "L16": Case(to_int, (NONFINITE,), cpu=cpu_gives_an_int_without_error, python=ValueError),
    "L17": Case(big_int, (N,)),
    "L18": Case(wide_shift, (N,), cpu=cpu_gives_an_int_without_error, python=np.zeros(10, np.int64)),
    "L19": Case(negative_power, (N[1:],), cpu=ints([1] + [0] * 8), python=ValueError),
    "L20": Case(bool_invert, (B,)),
    "L99": Case(comparison_sum, (X, X)),
    "L21": Case(root_of_negative, (X,), cpu=np.full(13, np.nan), python=lw.LaneTypeError),
    "L22": Case(length_by_zero, (ROWS4,), cpu=np.zeros(6, np.int64), python=ZeroDivisionError),
    # control flow
    "L23": Case(branches, (X,), want=np.where(X < -1, -X, np.where(X < 1, X * X, 2 * X))),
    "L24": Case(ternary, (X,), want=np.where(X > 0, X, -2.0 * X)),
    "L25": Case(for_range, (N,), want=N * (N - 1) * (2 * N - 1) // 6),
    "L26": Case(for_enumerate, (ROWS4,), want=ROWS4 @ np.arange(4.0)),
    "L27": Case(halvings, (POSITIVE,), want=ints(np.ceil(np.log2(POSITIVE)).clip(0))),
    "L28": Case(break_continue, (N,), want=ints([sum(k for k in range(1, n + 1) if k % 3) for n in N])),
    "L29": Case(early_return, (X,), want=ints([next((k for k in range(50) if v * k > 10), -1) for v in X])),
    "L30": Case(match_case, (N[:4],), want=ints([10, 20, 30, 30])),
    "L31": Case(walrus, (X,)),
    "L32": Case(asserting, (X,), raises=AssertionError, check=raising_lane_notes),
    "L33": Case(raising, (X,), raises=ValueError, check=raising_lane_notes),
    "L120": Case(unbound_after_loop, (X,), raises=UnboundLocalError, check=raising_lane_notes),
    "L34": Case(try_except, (X,), want=np.where(X > 1.0, -1.0, X)),
    "L35": Case(except_class, (X,)),
    "L111": Case(except_as, (X,)),
    "L36": Case(with_block, (X,)),
    "L37": Case(generator_expression, (X,)),
    "L38": Case(inner_function, (X,), want=3.0 * X + 1.0),
    "L39": Case(printing, (X,), want=X, check=prints_values),
    # results
    "L40": Case(tuple_result, (X,), want=(X, 2.0 * X)),
    "L41": Case(namedtuple_result, (X,), want=Pair(X - 1.0, X + 1.0)),
    "L42": Case(returns_none, (X,)),
    "L43": Case(none_on_some_paths, (X,)),
    "L44": Case(dict_result, (X,)),
    "L45": Case(filled_array, (X,), want=X[:, None] * np.array([1.0, 2.0, 3.0])),
    "L46": Case(array_expression, (ROWS4,), want=ROWS4 * 2.0),
    "L47": Case(varying_shape, (ROWS4, ints([1, 2, 2, 2, 2, 2]))),
    "L48": Case(generator_lane, (X,)),
    # per-lane arrays
    "L49": Case(row_index, (ROWS4, 1), vmap=dict(in_axes=(0, None)), want=ROWS4[:, 1] - ROWS4[:, -1],
                check=out_of_bounds),
    "L50": Case(row_length, (ROWS4,), want=4 * ROWS4[:, 0] + 4),
    "L51": Case(row_slice, (ROWS4,), want=ROWS4[:, 1:3].sum(axis=1)),
    "L52": Case(row_methods, (ROWS4,), want=ROWS4.sum(axis=1) + ROWS4.max(axis=1) + ROWS4.mean(axis=1)),
    "L53": Case(temporary_array, (X,), want=X + 1.0),
    "L54": Case(table_lookup, (N % 3, np.array([1.0, 2.0, 3.0])), vmap=dict(in_axes=(0, None)),
                want=np.array([2.0, 4.0, 6.0])[N % 3], check=table_out_of_bounds),
    "L55": Case(view_2d, (np.arange(24.0).reshape(2, 3, 4),), want=np.array([5.0, 29.0])),
    "L56": Case(write_row, lambda: (ROWS4.copy(),), want=ROWS4[:, 1], check=writes_through),
    "L119": Case(jacrev_of_aliased, (X,)),
    # calls
    "L57": Case(math_calls, (X,), want=np.sin(X) + np.hypot(X, 2.0) + np.floor(X)),
    "L58": Case(numpy_scalar_calls, (X,), want=np.sqrt(abs(X)) + np.arctan2(X, 2.0) + np.exp(-X)),
    "L59": Case(numpy_where, (X,), want=np.where(X > 0.0, X, 0.0) * 2.0),
    "L60": Case(uses_helper, (X,), want=(lambda t, u: t * t * (3 - 2 * t) - u * u * (3 - 2 * u))(
        np.clip(X / 4.0, 0.0, 1.0), np.clip(-X, 0.0, 1.0))),
    "L61": Case(uses_jit_helper, (X,), want=X * 3.0),
    "L62": Case(SCALED, (X,), want=X * 2.5),
    "L63": Case(uses_global, (X,), want=X * 3.0, check=global_is_in_the_key),
    "L64": Case(fib, (N,), want=ints([0, 1, 1, 2, 3, 5, 8, 13, 21, 34])),
    "L65": Case(ping, (N,)),
    "L66": Case(builds_list, (X,), want=4.0 * X * X + 4),
    "L67": Case(builds_dict, (X,), want=3.0 * X + 3.0),
    "L68": Case(string_constant, (X,), want=3.0 * X),
    "L69": Case(formats, (X,), check=str_is_refused_too),
    "L112": Case(percent_format, (X,)),
    "L113": Case(ragged_array, (X,)),
    "L70": Case(python_random, (X,)),
    "L71": Case(numpy_random, (X,)),
    # lw.scan and lw.random
    "L72": Case(scan_tuple, (ROWS4,)),
    "L73": Case(scan_namedtuple, (ROWS4,), want=ROWS4.sum(axis=1) * ROWS4.max(axis=1)),
    "L74": Case(scan_dict, (ROWS4,)),
    "L110": Case(grad_of_sourceless, (X,), want=2.0 * X),
    "L117": Case(wide_lane, WIDE_ARGS, want=WIDE_SUM),
    "L118": Case(wide_positional_only, WIDE_ARGS, want=WIDE_SUM),
    "L108": Case(scan_closure, (ROWS4, np.linspace(0.1, 0.9, 6))),
    "L109": Case(scan_dict_xs, (ROWS4,), want=(ROWS4 * 2 * ROWS4).sum(axis=1) + ROWS4.sum(axis=1)),
    "L75": Case(scan_ys, (ROWS4,)),
    "L116": Case(scan_scalar, (X,)),
    "L76": Case(draw, (KEY_TUPLE, N), vmap=dict(in_axes=(None, 0)),
                want=np.array([lw.random.uniform(lw.random.fold_in(KEY, int(i))) for i in N])),
    # arguments and lane forms
    "L77": Case(dict_argument, ({"a": X, "b": 2.0 * X}, X), want=X * X + 2.0 * X, check=records_are_read_only),
    "L78": Case(dict_argument, (ORDERED, X), want=X * X + X[::-1]),
    "L79": Case(tuple_argument, ((X, 2.0 * X),), want=2.0 * X * X),
    "L80": Case(unmapped_scalar, (X, 3.5), vmap=dict(in_axes=(0, None)), want=X * 3.5),
    "L114": Case(unmapped_scalar, (X, 3.5), check=python_refuses_too),
    "L115": Case(tuple_argument, ([[1.0, 2.0], [3.0]],), check=python_refuses_too),
    "L81": Case(apply_function, (math.sin, X), vmap=dict(in_axes=(None, 0))),
    "L82": Case(functools.partial(shifted, 1.0, scale=2.0), (X,), want=(X - 1.0) * 2.0),
    "L83": Case(math.sin, (X,), want=np.sin(X), check=numpy_ufunc_lane),
    "L84": Case(LAMBDA, (X,), want=X * 2.0 + 1.0),
    "L85": Case(star_args, (X, X), want=X * X),
    "L87": Case(narrow_unsigned_difference, (np.array([[2, 5], [5, 2]], np.uint8),)),
    "L88": Case(floor_quotient, (np.array([-2**63, 7]), np.array([-1, -2])), cpu=ints([0, -4]),
                python=ints([-2**63, -4])),
    "L89": Case(explicit_float64, (F32,), want=F32.astype(np.float64) / 3),
    "L90": Case(narrow_made, (np.array([32767, 2]),), cpu=ints([32768, 3]), python=ints([-32768, 3])),
    "L91": Case(exp_of_bool, (X,)),
    "L92": Case(exp_of_int16, (np.array([3, 0]),), cpu=np.exp(np.array([3.0, 0.0])),
                python=np.array([np.exp(np.float32(3)), 1.0])),
    "L93": Case(unsigned_sign, (np.array([[200, 0], [0, 1], [7, 3], [255, 1]], np.uint8),),
                want=(np.array([1, 0, 1, 1], np.uint8), np.array([0, 1, 0, 1], np.uint8))),
    "L94": Case(integer_fmod, (np.array([[-7, 3], [7, -3], [-6, 3], [5, 0]]),), want=np.array([-1, 1, 0, 0])),
    "L95": Case(integer_powers, (np.array([[3, 39, 2], [3, 101, 100001], [7, 2, 3]]),),
                want=np.array([wrapped(3**39 + 9), wrapped(3**101 + 3**100001), 49 + 343])),
    "L96": Case(rounding, (np.array([[2**63 - 1, 123456789012345678], [125, -7]]),),
                want=(ints([2**63 - 1, 125]), ints([2**63 - 1, 125]), ints([123456789012345678, -7]))),
    "L97": Case(middle, (np.array([[5.0, 1.0, 2.0, np.nan], [1.0, 4.0, 2.0, 3.0]]),), want=np.array([np.nan, 2.5])),
    "L98": Case(float_floor_division, (FLOORED,), want=np.array([
        np.floor_divide(a, b) + np.remainder(b, a) + np.mod(a, 2.0) for a, b in FLOORED])),
    "L86": Case(no_arguments, (), vmap=dict(in_axes=(), axis_size=5), want=np.full(5, 1.5)),
    "L100": Case(unsigned_with_literal, (U64,), want=U64 // 3 + U64 % 1000 * 6364136223846793005 + (3 - (U64 & 255))),
    "L101": Case(beyond_int64_compare, (np.array([2**63 - 1, -1, 7, 2**60, 0]), U64),
                 want=(lambda n: (U64 == n, n >= U64, U64 < n))(np.array([2**63 - 1, -1, 7, 2**60, 0]))),
    "L102": Case(int64_plus_wide, (N,)),
    "L103": Case(complex_by_zero, (np.array([1 + 2j, 0j, -1 + 0j, 3 - 4j]), np.array([0j, 0j, 0j, -0j])),
                 want=(np.array([complex(np.inf, np.inf), complex(np.nan, np.nan), complex(-np.inf, np.nan),
                                 complex(np.inf, -np.inf)]),) * 2),
    "L104": Case(signed_zero_extremes, (np.array([-0.0, 0.0]), np.array([0.0, -0.0])),
                 cpu=lambda got: list(np.signbit(got[0])) == list(np.signbit(got[1])) == [True, False],
                 python=lambda got: all(np.array_equal(np.signbit(g), np.signbit(f(np.array([-0.0, 0.0]),
                                                                                     np.array([0.0, -0.0]))))
                                        for g, f in zip(got, (np.maximum, np.minimum), strict=True))),
    "L105": Case(complex_sign, (np.array([complex(1, np.inf), complex(np.inf, np.nan), complex(np.inf, np.inf),
                                          -2 + 0j]),),
                 want=np.array([1j, 1 + 0j, complex(np.nan, np.nan), -1 + 0j])),
    "L106": Case(spacing_of, (np.array([-0.0, 0.0, 1.0, -1.0]),), want=np.spacing(np.array([0.0, 0.0, 1.0, -1.0]))),
    "L107": Case(integer_dot, (np.array([[100, 100, 3], [127, 2, 1]], np.int8),), want=np.array([41, 6], np.int8)),
}


# ============================================================================ the page's tables


@dataclass(frozen=True)
class Row:
    construct: str
    status: str             # "supported", "refused" or "differs"
    error: str | None       # refused rows: the lanewise error class named
    path: str | None        # "spmd", "auto", "scalar", or None (refused rows)


ROW = re.compile(r"^\|\s*`(L\d+)`\s*\|(.*)\|\s*$")


def parse_rows(text: str) -> dict[str, Row]:
    rows: dict[str, Row] = {}
    for line in text.splitlines():
        m = ROW.match(line.strip())
        if m is None:
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", m.group(2))]
        assert len(cells) == 4, f"row {m.group(1)} has {len(cells) + 1} cells, not 5: {line}"
        construct, status_cell, path_cell, _note = cells
        assert m.group(1) not in rows, f"row id {m.group(1)} appears twice"
        status = status_cell.strip("*").split()[0].rstrip(":,")
        assert status in ("supported", "refused", "differs"), f"{m.group(1)}: unknown status {status_cell!r}"
        error = None
        if status == "refused":
            named = re.search(r"`lw\.(\w+)`", status_cell)
            assert named, f"{m.group(1)}: a refused row names its lanewise error class: {status_cell!r}"
            error = named.group(1)
            assert issubclass(getattr(lw, error), lw.LanewiseError), error
        if path_cell.startswith("SPMD (auto)"):
            path = "auto"
        elif path_cell.startswith("SPMD"):
            path = "spmd"
        elif path_cell.startswith("scalar only"):
            path = "scalar"
        else:
            assert path_cell == "—", f"{m.group(1)}: unknown path {path_cell!r}"
            path = None
        assert (path is None) == (status != "supported"), f"{m.group(1)}: supported rows, and only they, state a path"
        rows[m.group(1)] = Row(construct, status, error, path)
    return rows


ROWS = parse_rows(DOC.read_text())


# ============================================================================ checks


def assert_same(got, want):
    """Same structure (namedtuple classes too), dtypes, shapes and values (floats within a few ulp)."""
    if want is None:
        assert got is None
        return
    if isinstance(want, tuple):
        assert type(got) is type(want), (type(got), type(want))
        for g, w in zip(got, want, strict=True):
            assert_same(g, w)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if got.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def assert_gives(case: Case, backend: str, expected):
    """``expected``: an exception class, a predicate of the result, or the result."""
    if isinstance(expected, type) and issubclass(expected, BaseException):
        with pytest.raises(expected):
            case.run(backend)
        return
    got = case.run(backend)
    if callable(expected):
        assert expected(got), f"{backend} gave {got!r}"
    else:
        assert_same(got, expected)


def lane_path(case: Case) -> str:
    text = str(lw.explain(case.mapped("cpu"), *case.arguments()))
    return next(line for line in text.splitlines() if line.startswith("lane path:"))


def test_every_row_has_a_case_and_every_case_a_row():
    assert ROWS, f"no rows found in {DOC}"
    assert not set(ROWS) - set(CASES), f"rows of docs/lanes.md without a case here: {sorted(set(ROWS) - set(CASES))}"
    assert not set(CASES) - set(ROWS), f"cases without a row in docs/lanes.md: {sorted(set(CASES) - set(ROWS))}"


@pytest.mark.parametrize("row_id", sorted(set(ROWS) | set(CASES)))
def test_row(row_id, monkeypatch, capfd):
    assert row_id in ROWS and row_id in CASES, f"{row_id}: a row needs a case and a case needs a row"
    row, case = ROWS[row_id], CASES[row_id]
    if row.status == "refused":
        with pytest.raises(getattr(lw, row.error)):
            case.run("cpu")
    elif row.status == "differs":  # as users meet it: the default configuration
        assert_gives(case, "cpu", case.cpu)
        assert_gives(case, "python", case.python)
    else:
        # "SPMD (auto)" rows are checked under "auto", which takes the SPMD path only
        # where spmd = True would (it adds conditions: divergence, work per row read).
        monkeypatch.setattr(lw.config, "spmd", "auto" if row.path == "auto" else True)
        monkeypatch.setattr(lw.config, "spmd_width", 4)  # any width would do; a narrow one compiles faster
        path = lane_path(case)
        if row.path in ("spmd", "auto"):
            assert path.startswith("lane path: SPMD"), path
        else:
            assert path.startswith("lane path: scalar"), path
        if case.raises is not None:
            errors = []
            for backend in ("cpu", "python"):
                with pytest.raises(case.raises) as info:
                    case.run(backend)
                errors.append(str(info.value))
            # the python run's message, also on cpu (a read of an unbound local adds the user's file:line)
            assert errors[0] == errors[1] or (case.raises is UnboundLocalError and re.fullmatch(
                re.escape(errors[1]) + r" \(.*test_lanes_doc\.py:\d+\)", errors[0])), errors
        else:
            got, reference = case.run("cpu"), case.run("python")
            assert_same(got, reference)
            if case.want is not None:
                assert_same(reference, case.want)
    if case.check is not None:
        case.check(case, capfd)
