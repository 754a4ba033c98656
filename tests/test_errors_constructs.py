"""Helpful errors for common constructs a lane or a call gets wrong (issue 45).

Each error names the construct, where it is (``file:line`` of the lane's line,
or the argument by name and position) and what to write instead; the python
backend, the spec, runs the lane constructs as the Python they are (docs/lanes.md)
and refuses the argument errors alike.  Lines are found in this file's text,
independently of lanewise; results are checked against plain Python.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

import lanewise as lw

X = np.linspace(-3.0, 3.0, 7)
ROWS = np.arange(12.0).reshape(3, 4) - 5.0
TEXT = Path(__file__).read_text().splitlines()


def where(source_line: str) -> str:
    """``file:line`` of the one line of this file that is ``source_line`` (stripped, a comment aside)."""
    found = [k + 1 for k, text in enumerate(TEXT) if text.split("  #")[0].strip() == source_line]
    assert len(found) == 1, (source_line, found)
    return f"{__file__}:{found[0]}"


# ---------------------------------------------------------------------------- lanes


def except_as(x):
    try:
        y = 1.0 / x
    except Exception as err:  # noqa: BLE001, F841 - the construct under test
        y = -1.0
    return y


def except_class_as(x):
    try:
        y = 1.0 / x
    except ZeroDivisionError as problem:  # noqa: F841 - the construct under test
        y = -1.0
    return y


def except_class(x):
    try:
        y = 1.0 / x
    except ZeroDivisionError:
        y = -1.0
    return y


def percent_format(x):
    text = "%.1f" % x
    return len(text)


def percent_in_raise(x):
    if x > 2.5:
        raise ValueError("x=%.1f is too large" % x)
    return x


def sum_of_generator(r):
    return sum(v * v for v in r)


def any_of_generator(r):
    return any(v > 1.0 for v in r)


def ragged_array(x):
    table = np.array([[1.0, 2.0], [3.0]])
    return table[0, 0] * x


def calls_a_helper(x):
    return helper_with_generator(x) + 1.0


def helper_with_generator(x):
    return sum(x * k for k in range(3))


def lookalikes(x):
    """What the checks must not refuse: numeric %, a bare except, a list comprehension,
    a ragged list (not an array), a %-free string."""
    try:
        y = x % 2.0
    except:  # noqa: E722 - a bare except compiles
        y = 0.0
    rows = [[1.0, 2.0], [x]]
    return y + sum([x * k for k in range(3)]) + rows[1][0] + len("a%b")


def two(x, s):
    return x * s


def pair_times(p, x):
    return p[0] * x + p[1]


def step(c, v):
    return c + v, c


def scans_a_scalar(x):
    c, _ = lw.scan(step, 0.0, x)
    return c


# ---------------------------------------------------------------------------- lane constructs

LANE_CASES = [  # lane, args, construct in the message, its line, the alternative, python-backend result
    (except_as, (X,), "(except Exception as err)", "except Exception as err:",
     "Drop `as err`", lambda: np.where(X == 0.0, np.inf, 1.0 / np.where(X == 0.0, 1.0, X))),
    (except_class_as, (X,), "(except ZeroDivisionError as problem)",
     "except ZeroDivisionError as problem:",
     "Drop `as problem` and catch `Exception`", None),
    (except_class, (X,), "catches a named exception class (except ZeroDivisionError)", "except ZeroDivisionError:",
     "write `except Exception:`", None),
    (percent_format, (X,), "formats a string with % ('%.1f' % x)", 'text = "%.1f" % x',
     "return the number from the lane and format it outside", lambda: np.array([len("%.1f" % v) for v in X])),
    (percent_in_raise, (X[:3],), "formats a string with % ('x=%.1f is too large' % x)",
     'raise ValueError("x=%.1f is too large" % x)', "a raise message may be an f-string", lambda: X[:3]),
    (sum_of_generator, (ROWS,), "uses a generator expression (sum(... for ...))", "return sum(v * v for v in r)",
     "write a `for` loop with an accumulator", lambda: np.array([sum(v * v for v in row) for row in ROWS])),
    (any_of_generator, (ROWS,), "uses a generator expression (any(... for ...))",
     "return any(v > 1.0 for v in r)", "for any/all: set a flag and `break`",
     lambda: np.array([any(v > 1.0 for v in row) for row in ROWS])),
    (ragged_array, (X,), "builds an array from a ragged list (rows of lengths 2 and 1: [[1.0, 2.0], [3.0]])",
     "table = np.array([[1.0, 2.0], [3.0]])", "pad the short rows to one length", None),
    (calls_a_helper, (X,), "helper_with_generator (", "return sum(x * k for k in range(3))",
     "write a `for` loop", lambda: 3.0 * X + 1.0),
]


@pytest.mark.parametrize("lane, args, construct, line, alternative, python", LANE_CASES,
                         ids=[case[0].__name__ for case in LANE_CASES])
def test_lane_construct_error_names_construct_line_and_alternative(lane, args, construct, line, alternative,
                                                                   python):
    with pytest.raises(lw.LaneCompileError) as info:
        lw.vmap(lane)(*args)
    message = str(info.value)
    assert construct in message, message
    assert where(line) in message, message
    assert line in message, message  # the source line itself
    assert alternative in message, message


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("lane, args, construct, line, alternative, python", LANE_CASES,
                         ids=[case[0].__name__ for case in LANE_CASES])
def test_python_backend_runs_the_lane_as_python(lane, args, construct, line, alternative, python):
    """The spec runs these constructs as Python does (docs/lanes.md): the same values as a plain loop,
    or the same exception (``except ZeroDivisionError`` never sees one: NumPy's 1.0 / 0.0 is inf)."""
    try:
        want = np.array([lane(*(a[k] for a in args)) for k in range(len(args[0]))])
    except ValueError as e:  # the ragged array: NumPy refuses it in Python too
        with pytest.raises(ValueError, match="inhomogeneous"):
            lw.vmap(lane, backend="python")(*args)
        assert "inhomogeneous" in str(e)
        return
    got = lw.vmap(lane, backend="python")(*args)
    np.testing.assert_array_equal(got, want)
    if python is not None:
        np.testing.assert_array_equal(got, python())


def test_lookalikes_compile_and_agree_with_python():
    got = lw.vmap(lookalikes)(X)
    want = np.array([v % 2.0 + 3.0 * v + v + 3 for v in X])
    np.testing.assert_allclose(got, want, rtol=1e-15)
    np.testing.assert_allclose(lw.vmap(lookalikes, backend="python")(X), want, rtol=1e-15)


def test_lane_without_source_text_is_checked_by_its_bytecode():
    namespace = {}
    exec(compile("def lane(x):\n    return sum(x * k for k in range(3))\n", "<generated>", "exec"), namespace)
    with pytest.raises(lw.LaneCompileError, match=r"(?s)\(<generated>:2\) uses a generator expression.*for` loop"):
        lw.vmap(namespace["lane"])(X)


def test_spmd_path_gives_the_same_error(monkeypatch):
    monkeypatch.setattr(lw.config, "spmd", True)
    with pytest.raises(lw.LaneCompileError, match="uses a generator expression") as info:
        lw.vmap(sum_of_generator)(ROWS)
    assert where("return sum(v * v for v in r)") in str(info.value)


# ---------------------------------------------------------------------------- scalars where in_axes=None was meant


@pytest.mark.parametrize("backend", ["cpu", "python"])
def test_mapped_scalar_names_argument_and_suggests_in_axes(backend):
    with pytest.raises(lw.AxisSpecError) as info:
        lw.vmap(two, backend=backend)(X, 3.0)
    message = str(info.value)
    for part in ("argument s", "positional argument 2 of 2", "a Python float (3.0)",
                 "write lw.vmap(two, in_axes=(0, None))"):
        assert part in message, message
    np.testing.assert_array_equal(lw.vmap(two, in_axes=(0, None), backend=backend)(X, 3.0), X * 3.0)


@pytest.mark.parametrize("scalar, kind", [(np.float32(0.5), "a NumPy float32 scalar (0.5)"),
                                          (np.array(2), "a 0-d int64 array (2)")])
def test_mapped_numpy_scalar_is_described(scalar, kind):
    with pytest.raises(lw.AxisSpecError, match=r"in_axes=\(0, None\)") as info:
        lw.vmap(two)(X, scalar)
    assert kind in str(info.value)


def test_suggestion_for_a_scalar_in_a_pytree_runs():
    args = ((X, 3.0), X)
    with pytest.raises(lw.AxisSpecError) as info:
        lw.vmap(pair_times)(*args)
    message = str(info.value)
    assert "argument p[1]" in message and "a leaf of positional argument 1 of 2" in message, message
    suggested = message.split("in_axes=")[-1].rstrip(")")
    assert suggested == "((0, None), 0"
    got = lw.vmap(pair_times, in_axes=((0, None), 0))(*args)
    np.testing.assert_array_equal(got, X * X + 3.0)


def test_keyword_scalar_suggests_partial():
    with pytest.raises(lw.AxisSpecError) as info:
        lw.vmap(two)(X, s=3.0)
    message = str(info.value)
    assert "keyword argument s" in message and "functools.partial(two, s=3.0)" in message, message
    np.testing.assert_array_equal(lw.vmap(functools.partial(two, s=3.0))(X), X * 3.0)


def test_only_scalars_says_nothing_is_mapped():
    with pytest.raises(lw.AxisSpecError, match="no argument has an axis to map: pass an array, or give axis_size="):
        lw.vmap(two)(2.0, 3.0)


def test_reduce_gives_the_same_hint():
    with pytest.raises(lw.AxisSpecError, match=r"write lw.vmap\(two, in_axes=\(0, None\)\)"):
        lw.reduce(lw.vmap(two), "sum")(X, 3.0)


def test_nested_vmap_suggests_for_its_level():
    inner = lw.vmap(two)  # in_axes 0 for s at the inner level, which sees a scalar
    with pytest.raises(lw.AxisSpecError, match=r"vmap level 1.*\n.*write lw.vmap\(two, in_axes=\(0, None\)\)"):
        lw.vmap(inner, in_axes=(0, None))(ROWS, 3.0)
    got = lw.vmap(lw.vmap(two, in_axes=(0, None)), in_axes=(0, None))(ROWS, 3.0)
    np.testing.assert_array_equal(got, ROWS * 3.0)


@pytest.mark.parametrize("backend", ["cpu", "python"])
def test_ragged_list_argument_says_rows_must_have_one_length(backend):
    with pytest.raises(lw.AxisSpecError) as info:
        lw.vmap(two, backend=backend)([[1.0, 2.0], [3.0]], 1.0)
    message = str(info.value)
    assert "positional argument 1 of 2, a ragged list (rows of lengths [2, 1])" in message, message
    assert "pad the rows to one length" in message, message


@pytest.mark.parametrize("backend", ["cpu", "python"])
def test_scan_over_a_scalar_suggests_a_closure(backend):
    with pytest.raises(lw.LanewiseError) as info:
        lw.vmap(scans_a_scalar, backend=backend)(X)
    message = str(info.value)
    assert "a leaf of xs is a" in message and "no leading axis to scan over" in message, message
    assert "let the step read it from its enclosing scope (a closure)" in message, message
    if backend == "cpu":  # a compile error: Numba's location, as a traceback line
        path, line = where("c, _ = lw.scan(step, 0.0, x)").rsplit(":", 1)
        assert f'File "{path}", line {line}' in message, message


def test_host_scan_over_a_scalar_names_it():
    with pytest.raises(lw.LanewiseError, match=r"a leaf of xs is a Python float \(2.0\).*no in_axes"):
        lw.scan(step, 0.0, (X, 2.0))
