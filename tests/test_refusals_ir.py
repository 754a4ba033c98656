"""The refusals and unsupported-construct checks on the lane IR agree with the ``ast`` ones (issue 43).

A differential check, kept while both versions exist: every function reachable
here (the corpus lanes, the real-world kernels and their helpers, the lanes and
tests of the files that exercise the checks, and the functions nested in them)
is checked by both, and the errors must be identical (message, file:line, the
quoted line, the hint).  Known difference: a lane's own decorators are not
looked at by the IR version (they run once, in Python, when the lane is
defined, not in the lane); the ``ast`` one is given them blanked.
"""

from __future__ import annotations

import ast
import types

import pytest

import corpus
import test_errors_constructs
import test_hardening
import test_lanes_doc
from benchmarks.realworld import modules
from lanewise.errors import LaneCompileError
from lanewise.lane import refusals, unsupported
from lanewise.lane.ir.build import build
from lanewise.lane.source import definition


def _nested(code):
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name not in ("<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>"):
                yield const
            yield from _nested(const)


def _functions(module) -> list:
    """The module's functions and the functions nested in them (closures with empty cells)."""
    out = []
    for value in list(vars(module).values()):
        value = getattr(value, "py_func", value)
        if isinstance(value, types.FunctionType) and value.__code__.co_filename == module.__file__:
            out.append(value)
            out += [types.FunctionType(c, value.__globals__, c.co_name, None,
                                       tuple(types.CellType() for _ in c.co_freevars) or None)
                    for c in _nested(value.__code__)]
    return out


def _error(check, fn, arg):
    try:
        check(fn, arg)
    except LaneCompileError as err:
        return str(err)
    return None


FUNCTIONS = [f for m in (corpus, test_errors_constructs, test_hardening, test_lanes_doc, *modules())
             for f in _functions(m)]


@pytest.mark.parametrize("pair", [(unsupported.check, unsupported.check_ir), (refusals.check, refusals.check_ir)],
                         ids=["unsupported", "refusals"])
def test_the_ir_checks_name_what_the_ast_checks_named(pair):
    assert len(FUNCTIONS) > 500
    old, new = pair
    refused = 0
    for fn in FUNCTIONS:
        tree = definition(fn)
        if tree is not None and getattr(tree, "decorator_list", None):  # they do not run in the lane
            tree.decorator_list = [ast.Name("_", ast.Load(), lineno=d.lineno, col_offset=0)
                                   for d in tree.decorator_list]
        expected = _error(old, fn, tree)
        assert _error(new, fn, build(fn).entry) == expected, fn
        refused += expected is not None
    assert refused >= 5  # the checks were exercised
