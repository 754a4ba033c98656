"""The refusals, the unsupported-construct checks and may_raise as passes over the lane IR (issue 43).

lanewise.lane.unsupported (Python Numba cannot compile), lanewise.lane.refusals
(Python that compiles to a wrong result) and lanewise.lane.lanefn.may_raise (is
the lane inlined into the kernel?) read the lane IR.  Each lane here is
checked against what a reader of its source expects by hand: refused or not, at
which line (found in this file's text), naming which construct, quoted as
``ast.unparse`` writes it (the reference for the quoting is ``ast.unparse`` itself).
"""

from __future__ import annotations

import ast
import inspect
import textwrap

import numba
import numpy
import numpy as np
import pytest

import lanewise as lw

from lanewise.errors import LaneCompileError
from lanewise.lane import refusals, unsupported
from lanewise.lane.lanefn import may_raise
from lanewise.lane.ir.build import build
from lanewise.lane.ir.unparse import python_text

# ----------------------------------------------------------------------------- lanes


def handler_as(x):
    try:
        y = 1.0 / x
    except Exception as err:  # noqa: F841, BLE001
        y = 0.0
    return y


def handler_tuple(x):
    try:
        y = 1.0 / x
    except (ZeroDivisionError, OverflowError):
        y = 0.0
    return y


def handler_plain(x):
    try:
        y = 1.0 / x
    except Exception:  # noqa: BLE001
        y = 0.0
    return y


def percent_tuple(x, n):
    return len("%d of %d" % (x, n))


def percent_numbers(x, n):
    return (x % 2.0) + (n % 3)


def generator_in_numpy(r):
    return numpy.sum(v * v for v in r)


def generator_alone(r):
    g = (v * 2.0 for v in r)
    return g


def generator_in_a_with(r):
    with np.errstate(all="ignore"):
        t = max(v for v in r)
    return t


def list_comprehension(r):
    return sum([v * v for v in r])


def ragged_number(x):
    return np.asarray([[1.0, 2.0], 3.0])[0, 0] * x


def ragged_deep(x):
    return np.array([[[1.0], [2.0, 3.0]], [[4.0], [5.0, 6.0]]])[0, 0, 0] * x


def even_rows(x):
    return np.array([[1.0, 2.0], [3.0, 4.0]])[0, 0] * x


def f_string(x):
    return len(f"x={x}")


def format_method(x):
    return len("{}".format(x))


def formatted_raise(x):
    if x < 0.0:
        raise ValueError(f"x={x} is negative, {str(x)}")
    return x


def formatted_assert(x):
    assert x >= 0.0, f"x={x}"
    return x


def shallow_first(x, n):
    a = max(n, key=str(x))  # under a keyword: one level deeper in the source than the next line's
    b = str(x)
    return a, b


def _decorate(f):
    return f


@_decorate(f"{1.0}") if False else _decorate  # noqa: RUF034 - a formatted decorator runs once, in Python
def decorated(x):
    return x * 2.0


# ----------------------------------------------------------------------------- helpers


def _line(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    (k,) = [k for k, line in enumerate(lines) if text in line.split("  #")[0]]
    return first + k


def _refusal(check, fn) -> str | None:
    """The first line of the error ``check`` raises for ``fn``, or None."""
    try:
        check(fn, build(fn).entry)
    except LaneCompileError as err:
        return str(err).splitlines()[0]
    return None


def _expected(fn, text: str, what: str) -> str:
    return f"lane function {fn.__qualname__} ({__file__}:{_line(fn, text)}) {what}:"


# ----------------------------------------------------------------------------- unsupported constructs


@pytest.mark.parametrize("fn, text, what", [
    (handler_as, "except Exception as err", "binds the exception it catches to a name (except Exception as err)"),
    (handler_tuple, "except (ZeroDivisionError", "catches a named exception class "
                                                  "(except (ZeroDivisionError, OverflowError))"),
    (percent_tuple, "%d of %d", "formats a string with % ('%d of %d' % (x, n))"),
    (generator_in_numpy, "numpy.sum", "uses a generator expression (numpy.sum(... for ...))"),
    (generator_alone, "g = (v", "uses a generator expression ((v * 2.0 for v in r))"),
    (generator_in_a_with, "t = max(", "uses a generator expression (max(... for ...))"),
    (ragged_number, "np.asarray", "builds an array from a ragged list "
                                  "(a number beside rows of length 2: [[1.0, 2.0], 3.0])"),
    (ragged_deep, "np.array", "builds an array from a ragged list "
                              "(rows of lengths 1 and 2: [[[1.0], [2.0, 3.0]], [[4.0], [5.0, 6.0]]])"),
], ids=lambda v: v.__name__ if callable(v) else "")
def test_constructs_numba_cannot_compile_are_named_at_their_line(fn, text, what):
    assert _refusal(unsupported.check, fn) == _expected(fn, text, what)


@pytest.mark.parametrize("fn", [handler_plain, percent_numbers, list_comprehension, even_rows, decorated],
                         ids=lambda f: f.__name__)
def test_constructs_that_compile_are_not_refused(fn):
    assert _refusal(unsupported.check, fn) is None
    assert _refusal(refusals.check, fn) is None


# ----------------------------------------------------------------------------- wrong results


@pytest.mark.parametrize("fn, text, what", [
    (f_string, 'f"x={x}"', "formats a value as text (an f-string)"),
    (format_method, '"{}".format', "formats a value as text (str.format())"),
    (formatted_assert, "assert x", "formats a value as text (an f-string)"),  # only a raise message is re-run
    (shallow_first, "b = str(x)", "formats a value as text (str())"),  # the shallowest, as ast.walk found it
], ids=lambda v: v.__name__ if callable(v) else "")
def test_formatting_outside_a_raise_message_is_refused(fn, text, what):
    assert _refusal(refusals.check, fn) == _expected(fn, text, what)


def test_a_raise_message_may_format():
    assert _refusal(refusals.check, formatted_raise) is None


_SOURCELESS = textwrap.dedent("""
    def total(r):
        return sum(v for v in r)
    def text(x):
        return len(f"{x}")
""")


def test_a_lane_with_no_source_is_checked_by_its_bytecode():
    namespace: dict = {}
    exec(compile(_SOURCELESS, "<nowhere>", "exec"), namespace)  # noqa: S102
    assert build(namespace["total"]).entry.source == "bytecode"
    assert _refusal(unsupported.check, namespace["total"]) == \
        "lane function total (<nowhere>:3) uses a generator expression:"
    assert _refusal(refusals.check, namespace["text"]) == \
        "lane function text (<nowhere>:5) formats a value as text (an f-string):"


# ----------------------------------------------------------------------------- quoting


@pytest.mark.parametrize("text", [
    "'%d' % x", '"%.1f %s" % (x, n)', "x ** -y ** 2", "(a + b) * c - d / (e - f)", "-(x + 1)", "not (a and b)",
    "a < b <= c", "a if b else c", "(a if b else c) + 1", "f(x, *rest, k=1, **kw)", "row.sum(axis=0)",
    "x[i, 1:n:2]", "x[::2]", "[[1.0, 2.0], (3,), {4}]", "{'a': 1, **more}", "[v for v in r if v > 0]",
    "(v for v, w in zip(r, s))", "{k: v for k, v in d}", "lambda u: u + 1", "f'x={x!r:>{w}} ok'", "a.b.c(d)",
    "(x := 3) + x", "x @ y // z % w", "a | b & c ^ d << 2", "~x", "'%d' % -x",
    "a and (not b) or (b and (not a))", "not a and (not b) and c or d",
])
def test_an_expression_is_quoted_as_ast_unparse_writes_it(text):
    module = build(_function_of(text))
    assert python_text(module.entry.body[0].value) == ast.unparse(ast.parse(text, mode="eval"))


def _function_of(text: str):
    namespace: dict = {}
    source = f"def quoted(x, y, a, b, c, d, e, f, n, i, r, s, w, z, rest, kw, more, row):\n    return {text}\n"
    filename = f"<quoted {abs(hash(text))}>"
    import linecache

    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102
    return namespace["quoted"]


# ----------------------------------------------------------------------------- may raise


def raiser(x):
    if x < 0.0:
        raise ValueError("negative")
    return x


@numba.njit
def jitted(x):
    return x * 3.0


def calls_raiser(x):
    return raiser(x) + 1.0


def asserts(x):
    assert x > 0.0
    return x


def raises_in_a_with(x):
    with np.errstate(all="ignore"):
        if x < 0.0:
            raise ValueError("negative")
    return x


def shadows_raiser(x):
    raiser = 2.0  # noqa: F841 - the global of this name may raise: counted, as a reader of the name would
    return x


def math_only(x):
    return np.sqrt(x) + numpy.pi * abs(x)


def scans(xs):
    return lw.scan(lambda c, v: (c + v, c), 0.0, xs)


@pytest.mark.parametrize("fn, expected", [
    (raiser, True), (asserts, True), (calls_raiser, True), (raises_in_a_with, True), (shadows_raiser, True),
    (jitted, True),  # @numba.njit names numba's Python, which raises (as before: not inlined)
    (lambda x: jitted(x) - 1.0, True), (scans, True), (math_only, False), (lambda x: x * 2.0, False),
    (even_rows, True),  # np.array: a function of NumPy's C code (its errors are not known)
], ids=lambda v: getattr(v, "__name__", "") if callable(v) else "")
def test_may_raise(fn, expected):
    assert may_raise(fn) is expected


def test_a_function_with_no_source_may_raise():
    namespace: dict = {}
    exec(compile("def double(x):\n    return 2.0 * x\n", "<nowhere>", "exec"), namespace)  # noqa: S102
    assert may_raise(namespace["double"])
