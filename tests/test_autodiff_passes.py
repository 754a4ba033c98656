"""Autodiff's analyses on the lane IR (issue 43) against the AST versions they replace.

Differential while both exist: which locals are active (autodiff/activity.py) and
which differentiated arguments are 1-D arrays (autodiff/arrays.py), on every lane
reachable here (tests/corpus.py, the real-world kernels and their helpers, the
autodiff suite's lanes), each argument differentiated alone and all together.
"""

from __future__ import annotations

import types

import pytest

from benchmarks.realworld import modules
from lanewise.autodiff import arrays
from lanewise.autodiff.activity import Activity, active_names, helper
from lanewise.lane.callables import as_lane_function
from lanewise.lane.ir import nodes as ir
from lanewise.lane.ir.build import build, function_of_tree
from lanewise.spmd.syntax import Unsupported, function_ast, resolve

from corpus import CORPUS
from test_autodiff import CORPUS as AUTODIFF_CORPUS


def _roots():
    yield from (e.lane for e in CORPUS)
    yield from (lane for m in modules() for lane in getattr(m, "lanes", ()))
    yield from (lane for lane, _ in AUTODIFF_CORPUS)


def _functions() -> list:
    """Every Python function reachable from the roots (helpers through the IR's calls), once."""
    seen, out, todo = set(), [], list(_roots())
    while todo:
        f = as_lane_function(todo.pop())
        f = getattr(f, "py_func", f)
        if not isinstance(f, types.FunctionType) or f.__code__ in seen:
            continue
        seen.add(f.__code__)
        out.append(f)
        for fun in build(f).functions():
            todo += [helper(ir.called(p)) for p in _prims(fun.body) if p.op.startswith("call:")]
    return out


def _prims(node):
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, (tuple, list)):
            todo.extend(n)
        elif hasattr(n, "__dataclass_fields__") and not isinstance(n, ir.Loc):
            if isinstance(n, ir.Prim):
                yield n
            todo.extend(getattr(n, f) for f in n.__dataclass_fields__ if f != "loc")


def _outcome(f, *args):
    try:
        return sorted(f(*args))
    except arrays.Mixed as e:
        return str(e)


FUNCTIONS = _functions()


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__qualname__)
def test_ir_passes_agree_with_the_ast_ones(fn):
    try:
        fdef = function_ast(fn)
    except Unsupported:
        pytest.skip("no source")
    function = function_of_tree(fn, fdef)
    params = [a.arg for a in fdef.args.args]
    for seeded in [[p] for p in params] + [params]:
        assert active_names(function, seeded) == Activity(fn, fdef, set(seeded)).run(), seeded
        assert _outcome(arrays.element_arrays_ir, function, seeded) == \
            _outcome(arrays.element_arrays, fdef, seeded, lambda node: resolve(fn, node)), seeded


def test_every_kind_of_lane_is_reached():
    assert len(FUNCTIONS) > 120
