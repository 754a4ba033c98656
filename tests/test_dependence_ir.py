"""The dependence pass over the lane IR (issue 43) gives the AST analysis's answers.

Differential, while both exist: on every lane reachable (the corpus, the
real-world kernels, the lanes of the out_axes=None and dtype tests) and every
Python helper they call, both analyses must agree exactly: the outputs' dependences
(with and without control dependence) and the summaries of what a call may change.
The one difference by design: a construct the IR does not model (``with``,
``global``, ``yield``... an :class:`~lanewise.lane.ir.nodes.Unsupported` node) makes
the IR pass say "every output depends" (None), where the AST one looked inside.
"""

from __future__ import annotations

import importlib
import types

import pytest

from benchmarks.realworld import modules
from lanewise.lane import dependence as by_ast
from lanewise.lane.ir import nodes as ir
from lanewise.lane.ir.build import build
from lanewise.lane.ir.passes import dependence as by_ir
from lanewise.lane.ir.passes.walk import walk

from corpus import CORPUS

#: Test modules whose lanes use out_axes=None or the dtype of unused parameters.
LANE_MODULES = ("test_round3_programs", "test_hardening", "test_errors", "test_vmap_jax", "test_inplace")


def _reachable(lane) -> list:
    """The lane and the Python functions it names (globals and closure cells), transitively."""
    found, todo = {}, [lane]
    while todo:
        fn = todo.pop(0)
        fn = getattr(fn, "py_func", fn)
        if not isinstance(fn, types.FunctionType) or fn.__code__ in found:
            continue
        found[fn.__code__] = fn
        cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True))
        for name in fn.__code__.co_names + fn.__code__.co_freevars:
            try:
                obj = cells[name].cell_contents if name in cells else fn.__globals__.get(name)
            except ValueError:  # an empty cell
                continue
            obj = getattr(obj, "py_func", obj)
            if isinstance(obj, types.FunctionType) and not (obj.__module__ or "").startswith("lanewise"):
                todo.append(obj)
    return list(found.values())


def _functions() -> list:
    lanes = [e.lane for e in CORPUS] + [lane for m in modules() for lane in getattr(m, "lanes", ())]
    for name in LANE_MODULES:
        m = importlib.import_module(name)
        lanes += [v for k, v in vars(m).items() if isinstance(v, types.FunctionType) and v.__module__ == name
                  and not k.startswith(("test_", "jax_"))]
    found: dict = {}
    for lane in lanes:
        for fn in _reachable(lane):
            found.setdefault(fn.__code__, fn)
    return [pytest.param(fn, id=f"{fn.__module__}.{fn.__qualname__}") for fn in found.values()]


def _unmodelled(fn) -> bool:
    """Whether ``fn``'s IR (or a helper's) holds a construct the IR does not model."""
    module = build(fn)
    return any(isinstance(n, ir.Unsupported) for n in walk(tuple(f.body for f in module.functions())))


@pytest.mark.parametrize("fn", _functions())
def test_ir_dependences_agree_with_the_ast_analysis(fn):
    for values_only in (False, True):
        want = by_ast.output_dependencies(fn, values_only)
        got = by_ir.output_dependencies(fn, values_only)
        if got != want:
            assert got is None and _unmodelled(fn), (values_only, want, got)
    want, got = by_ast._summary(fn), by_ir._summary(fn)
    if got != want:
        assert got == by_ir._UNKNOWN and _unmodelled(fn), (want, got)

