"""Differential check (while both exist): loop versioning and prefetching on the lane IR
decide exactly what the AST passes decide, for every lane reachable."""

from __future__ import annotations

import ast
import inspect
import re
import types

import pytest
from corpus import CORPUS

import test_bounds
import test_integers
import test_prefetch
import test_structure
import test_versioning
from benchmarks.realworld import modules
from lanewise.lane import prefetch, versioning
from lanewise.lane.ir import render
from lanewise.lane.ir.build import build_with_functions, function_ir

_CALL = re.compile(r"(_lw_(?:within|prefetch)\([^()]*(?:\([^()]*\))?[^()]*\)|_lw_get\(|_lw_(?:start|stop)\d+ =)")


def _functions():
    found = {}
    for fn in [e.lane for e in CORPUS] + [lane for m in modules() for lane in getattr(m, "lanes", ())]:
        try:
            _, functions = build_with_functions(fn)
        except Exception:  # noqa: BLE001 - a lane the IR cannot take is not compared
            continue
        found.update({id(f): f for f in functions.values() if isinstance(f, types.FunctionType)})
    for m in (test_versioning, test_prefetch, test_bounds, test_integers, test_structure):
        found.update({id(f): f for f in vars(m).values() if isinstance(f, types.FunctionType)
                      and f.__module__ == m.__name__ and "for " in _text(f)})
    return list(found.values())


def _text(fn) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


def _decisions(text: str | None) -> list:
    return None if text is None else _CALL.findall(re.sub(r"\((-\d+)\)", r"\1", text))  # (-1): -1


def _new(fn, pass_):
    lane = function_ir(fn)
    if lane.source != "source" or fn.__name__ == "<lambda>":
        return None
    made, count = pass_(lane)
    return render.render(made) if count else None


@pytest.mark.parametrize("fn", _functions(), ids=lambda f: f.__qualname__)
def test_same_loops_versioned_and_prefetched(fn):
    old = prefetch.prefetched(fn)
    assert _decisions(None if old is None else ast.unparse(old)) == _decisions(_new(fn, prefetch.prefetch_loops))
    old = versioning.versioned(fn)
    assert _decisions(None if old is None else ast.unparse(old)) == _decisions(_new(fn, versioning.version_loops))
