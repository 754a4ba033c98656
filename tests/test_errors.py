"""Error messages: which exception, and that it names the user's argument, size and file:line.

Most of these are raised before anything compiles, so they are cheap; the
LaneCompileError tests compile (and fail) one lane each.
"""

from __future__ import annotations

import inspect
from fractions import Fraction

import numpy as np
import pytest

import lanewise as lw

BACKENDS = ("cpu", "python")
both_backends = pytest.mark.parametrize("backend", BACKENDS)


def add(a, b):
    return a + b


def line_of(fn, text: str) -> int:
    """Line number (in this file) of the first source line of ``fn`` containing ``text``."""
    lines, start = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if text in line:
            return start + k
    raise AssertionError(f"{text!r} not in {fn.__name__}")


# ----------------------------------------------------------------------------- sizes


@both_backends
def test_inconsistent_sizes_name_arguments_and_sizes(backend):
    with pytest.raises(lw.SizeMismatchError) as info:
        lw.vmap(add, backend=backend)(np.ones(3), np.ones(4))
    msg = str(info.value)
    assert "argument a" in msg and "argument b" in msg
    assert "size 3" in msg and "size 4" in msg
    assert isinstance(info.value, ValueError) and isinstance(info.value, lw.LanewiseError)


@both_backends
def test_inconsistent_sizes_of_pytree_leaves_and_kwargs(backend):
    def lane(t, *, k=None):
        return t[0] + t[1]

    def lane2(t, k):
        return t[0] + t[1] + k

    with pytest.raises(lw.SizeMismatchError) as info:
        lw.vmap(lane2, in_axes=((0, 1), None), backend=backend)((np.ones(5), np.ones((2, 6))), 1.0)
    msg = str(info.value)
    assert "t[0]" in msg and "size 5" in msg and "t[1]" in msg and "size 6" in msg
    with pytest.raises(lw.SizeMismatchError, match=r"(?s)a.*size 3.*b.*size 2"):
        lw.vmap(add, in_axes=(0,), backend=backend)(np.ones(3), b=np.ones(2))


@both_backends
def test_inconsistent_sizes_in_a_nest_name_the_level(backend):
    nest = lw.vmap(lw.vmap(add, in_axes=(0, 0)), in_axes=(0, None), backend=backend)
    with pytest.raises(lw.SizeMismatchError) as info:
        nest(np.ones((2, 3)), np.ones(4))
    msg = str(info.value)
    assert "level 1" in msg and "size 3" in msg and "size 4" in msg


@both_backends
def test_axis_size_conflicting_with_mapped_size(backend):
    with pytest.raises(lw.SizeMismatchError, match=r"(?s)size 3.*axis_size=4"):
        lw.vmap(add, in_axes=(0, None), axis_size=4, backend=backend)(np.ones(3), 1.0)


@both_backends
def test_errors_on_a_warm_call(backend):
    """After a successful call (fast path warm), bad arguments still raise the right error."""
    mapped = lw.vmap(add, backend=backend)
    mapped(np.ones(3), np.ones(3))
    with pytest.raises(lw.SizeMismatchError, match="size 4"):
        mapped(np.ones(3), np.ones(4))
    with pytest.raises(lw.AxisSpecError):
        mapped(np.ones(3), 2.0)


# ----------------------------------------------------------------------------- axes


@both_backends
def test_in_axes_out_of_range(backend):
    with pytest.raises(lw.AxisSpecError) as info:
        lw.vmap(add, in_axes=(1, 0), backend=backend)(np.ones(3), np.ones(3))
    msg = str(info.value)
    assert "argument a" in msg and "axis 1" in msg and "(3,)" in msg
    with pytest.raises(lw.AxisSpecError, match=r"axis -3"):
        lw.vmap(add, in_axes=(-3, 0), backend=backend)(np.ones((3, 2)), np.ones(3))


@both_backends
def test_in_axes_out_of_range_in_a_nest(backend):
    nest = lw.vmap(lw.vmap(add, in_axes=(1, None)), in_axes=(0, None), backend=backend)
    with pytest.raises(lw.AxisSpecError) as info:
        nest(np.ones((3, 2)), 1.0)  # level 0 takes axis 0; level 1 finds a rank-1 remainder
    msg = str(info.value)
    assert "argument a" in msg and "level 1" in msg
    # the shape it reports is the one the inner level sees: axes of enclosing vmaps removed
    assert "(2,)" in msg and "(3, 2)" not in msg, msg


@both_backends
def test_mapping_a_scalar(backend):
    with pytest.raises(lw.AxisSpecError, match="argument b"):
        lw.vmap(add, backend=backend)(np.ones(3), 2.0)


@both_backends
@pytest.mark.parametrize("in_axes, pattern", [
    ((0, 0, 0), r"3 entries.*2 positional"),
    ((0,), r"1 entries.*2 positional"),
    (((0, 0), 0), r"prefix"),
    (({"x": 0}, 0), r"prefix"),
    ((0.5, 0), r"ints or None"),
    (("0", 0), r"ints or None"),
])
def test_in_axes_wrong_structure(backend, in_axes, pattern):
    with pytest.raises(lw.AxisSpecError, match=pattern):
        lw.vmap(add, in_axes=in_axes, backend=backend)(np.ones(3), np.ones(3))


@both_backends
def test_out_axes_wrong_structure_or_range(backend):
    def pair(a, b):
        return a + b, a * b

    x = np.ones(3)
    with pytest.raises(lw.AxisSpecError, match="out_axes"):
        lw.vmap(pair, out_axes=(0, 0, 0), backend=backend)(x, x)
    with pytest.raises(lw.AxisSpecError, match=r"out_axes=1 .*out\[0\]"):
        lw.vmap(pair, out_axes=(1, 0), backend=backend)(x, x)
    with pytest.raises(lw.AxisSpecError, match="out_axes"):
        lw.vmap(add, out_axes=-2, backend=backend)(x, x)


@both_backends
def test_nothing_mapped_needs_axis_size(backend):
    with pytest.raises(lw.AxisSpecError, match="axis_size"):
        lw.vmap(add, in_axes=None, backend=backend)(1.0, 2.0)
    with pytest.raises(lw.AxisSpecError, match="axis_size"):
        lw.vmap(lw.vmap(add, in_axes=(None, None)), backend=backend)(np.ones(2), np.ones(2))


@pytest.mark.parametrize("bad", [-1, 2.0, "3"])
def test_bad_axis_size(bad):
    with pytest.raises(lw.AxisSpecError, match="axis_size"):
        lw.vmap(add, in_axes=None, axis_size=bad)


# ----------------------------------------------------------------------------- out_axes=None


def depends_via_branch(x, c):
    y = c
    if x > 0:
        y = c + 1
    return y


def depends_via_loop(x, c):
    acc = c
    for i in range(3):
        if x > i:
            break
        acc += 1
    return acc


@both_backends
@pytest.mark.parametrize("lane, out_axes", [
    (add, None),
    (lambda x, c: (x + c, c * 2), (None, 0)),
    (lambda x, c: (x * 2, c * x), (0, None)),
    (depends_via_branch, None),
    (depends_via_loop, None),
], ids=["direct", "first-of-tuple", "second-of-tuple", "branch", "loop-break"])
def test_unmapped_output_that_depends_on_the_mapped_axis(backend, lane, out_axes):
    with pytest.raises(lw.UnmappedOutputError) as info:
        lw.vmap(lane, in_axes=(0, None), out_axes=out_axes, backend=backend)(np.arange(3.0), 1.0)
    assert "out_axes=None" in str(info.value)
    assert isinstance(info.value, lw.AxisSpecError)


@both_backends
def test_unmapped_output_that_is_independent(backend):
    def lane(x, c):
        k = c * 2
        return x + k, k

    a, k = lw.vmap(lane, in_axes=(0, None), out_axes=(0, None), backend=backend)(np.arange(3.0), 1.5)
    np.testing.assert_array_equal(a, [3.0, 4.0, 5.0])
    assert k.shape == () and k == 3.0


@both_backends
def test_unmapped_output_in_a_nest(backend):
    """Unmapped at the inner level only: independent of the inner mapped argument."""

    def lane(x, y):
        return x * y, x + 1

    nest = lw.vmap(lw.vmap(lane, in_axes=(None, 0), out_axes=(0, None)), in_axes=(0, None), backend=backend)
    a, b = nest(np.arange(3.0), np.arange(4.0))
    assert a.shape == (3, 4) and b.shape == (3,)
    np.testing.assert_array_equal(b, np.arange(3.0) + 1)
    bad = lw.vmap(lw.vmap(lane, in_axes=(None, 0), out_axes=(None, 0)), in_axes=(0, None), backend=backend)
    with pytest.raises(lw.UnmappedOutputError, match=r"out\[0\]"):
        bad(np.arange(3.0), np.arange(4.0))


# ----------------------------------------------------------------------------- unsupported Python


class Opaque:
    pass


def uses_fraction(x):
    y = x + 1
    return Fraction(y)  # not supported in a compiled lane


def uses_string(x):
    s = "value: " + x  # str + float
    return s


def uses_object(x):
    o = Opaque()  # noqa: F841 - the lane must create the object to be refused
    return x


def _bad_helper(v):
    return v.no_such_attribute


def calls_bad_helper(x):
    return _bad_helper(x) + 1


@pytest.mark.parametrize("lane, offending, where", [
    (uses_fraction, "return Fraction(y)", uses_fraction),
    (uses_string, 's = "value: " + x', uses_string),
    (uses_object, "o = Opaque()", uses_object),
    (calls_bad_helper, "return v.no_such_attribute", _bad_helper),
], ids=lambda v: v.__name__ if callable(v) else None)
def test_unsupported_python_names_file_line_and_source(lane, offending, where):
    with pytest.raises(lw.LaneCompileError) as info:
        lw.vmap(lane)(np.arange(3.0))
    msg = str(info.value)
    line = line_of(where, offending)
    assert f'File "{__file__}", line {line}' in msg, msg
    assert offending in msg
    assert lane.__name__ in msg
    assert info.value.__cause__ is not None  # Numba's own error, for experts
    assert "numba" in type(info.value.__cause__).__module__
    assert len(msg.splitlines()) <= 15, "not a raw Numba traceback"
    assert isinstance(info.value, TypeError)


def test_unsupported_python_in_a_lambda():
    with pytest.raises(lw.LaneCompileError) as info:
        lw.vmap(lambda x: x.no_such_attribute)(np.arange(3.0))  # the offending lambda
    msg = str(info.value)
    assert f"{__file__}" in msg and "the offending lambda" in msg


# ----------------------------------------------------------------------------- lane result types


def none_on_some_paths(x):
    if x > 0:
        return x


def returns_string(x):
    return "a"


def tuple_or_scalar(x):
    if x > 1:
        return x, x
    return x


@both_backends
@pytest.mark.parametrize("data", [[1.0, 2.0, -1.0], [-1.0, 2.0]], ids=["lane0-returns", "lane0-none"])
def test_none_on_some_paths_is_a_lane_type_error(backend, data):
    with pytest.raises(lw.LaneTypeError):
        lw.vmap(none_on_some_paths, backend=backend)(np.array(data))


def test_none_on_some_paths_message():
    with pytest.raises(lw.LaneTypeError, match=r"none_on_some_paths.*None"):
        lw.vmap(none_on_some_paths)(np.array([1.0, -1.0]))


@both_backends
def test_string_result_is_a_lane_type_error(backend):
    with pytest.raises(lw.LaneTypeError):
        lw.vmap(returns_string, backend=backend)(np.arange(3.0))


@both_backends
def test_inconsistent_return_types_are_a_lane_type_error(backend):
    """errors.LaneTypeError: "The lane's results have a type lanewise cannot store (or that varies)"."""
    with pytest.raises(lw.LaneTypeError):
        lw.vmap(tuple_or_scalar, backend=backend)(np.arange(3.0))


# ----------------------------------------------------------------------------- dtypes


@both_backends
@pytest.mark.parametrize("value, dtype", [
    (np.array(["a", "b"]), "<U1"),
    (np.array([1, "b"], dtype=object), "object"),
    (np.array([b"x", b"y"]), "S1"),
    (np.ones(2, np.float16), "float16"),
    (np.array(["2020-01-01", "2021-01-01"], dtype="datetime64[D]"), "datetime64"),
])
def test_unsupported_dtypes_name_the_argument(backend, value, dtype):
    with pytest.raises(lw.LaneTypeError) as info:
        lw.vmap(add, backend=backend)(np.ones(2), value)
    assert "argument b" in str(info.value) and dtype in str(info.value)


@both_backends
def test_unsupported_values_in_pytrees_name_the_leaf(backend):
    def lane(p):
        return p["w"]

    with pytest.raises(lw.LaneTypeError, match=r"p\['name'\]"):
        lw.vmap(lane, backend=backend)({"w": np.ones(2), "name": np.array(["a", "b"])})
    with pytest.raises(lw.LaneTypeError, match=r"argument b .*str"):
        lw.vmap(add, in_axes=(0, None), backend=backend)(np.ones(2), "text")


# ----------------------------------------------------------------------------- misc


def test_unknown_backend():
    with pytest.raises(lw.BackendError, match=r"'gpu'.*'cpu'.*'python'"):
        lw.vmap(add, backend="gpu")
    assert issubclass(lw.BackendError, ValueError)


def test_unknown_backend_from_config(restore_config):
    restore_config.backend = "tpu"
    with pytest.raises(lw.BackendError, match="'tpu'"):
        lw.vmap(add)(np.ones(2), np.ones(2))


def test_not_callable_and_explain_of_plain_function():
    with pytest.raises(TypeError):
        lw.vmap(42)
    with pytest.raises(TypeError, match="explain"):
        lw.explain(add, np.ones(2), np.ones(2))


def test_hierarchy():
    for cls in (lw.AxisSpecError, lw.SizeMismatchError, lw.UnmappedOutputError, lw.LaneCompileError,
                lw.LaneTypeError, lw.OutputError, lw.BackendError):
        assert issubclass(cls, lw.LanewiseError)
    assert issubclass(lw.UnmappedOutputError, lw.AxisSpecError)


def numbers_from_one(row):
    s = 0.0
    for k, v in enumerate(row, start=1):  # Numba's typing asserts on the keyword
        s += k * v
    return s


def test_a_failure_inside_numbas_compiler_names_the_lane():
    """A bare AssertionError from Numba's typing escaped on every backend, naming
    nothing; the python backend now runs the Python, the cpu backend says which lane."""
    rows = np.ones((4, 3))
    np.testing.assert_array_equal(lw.vmap(numbers_from_one, backend="python")(rows), np.full(4, 6.0))
    with pytest.raises(lw.LaneCompileError, match=r"numbers_from_one \(.*test_errors.py:\d+\).*AssertionError"):
        lw.vmap(numbers_from_one)(rows)
