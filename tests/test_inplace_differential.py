"""Differential (issue 43, while both exist): the in-place rewrite on the lane IR decides
every reachable lane as the AST one did, and the rewritten lanes compute the same."""

import types

import numpy as np
import pytest

from benchmarks.realworld import modules
from lanewise.lane import inplace, inplace_ast
from lanewise.lane.ir.build import build_with_functions

import test_inplace
from corpus import CORPUS


def _functions():
    found, seen = [], set()
    roots = [e.lane for e in CORPUS] + [f for m in modules() for f in vars(m).values()] \
        + list(vars(test_inplace).values())
    for f in roots:
        f = getattr(f, "py_func", f)
        if isinstance(f, types.FunctionType) and f.__code__ not in seen:
            seen.add(f.__code__)
            found.append(f)
    for f in list(found):
        for g in build_with_functions(f)[1].values():
            if g is not None and g.__code__ not in seen:
                seen.add(g.__code__)
                found.append(g)
    return found


#: NumPy references (not lanes) whose ``with np.errstate`` the IR does not model: the
#: renderer cannot print it, so the IR rewrite keeps them on the ordinary path.
_WITH = {"fin_ewm_std.reference", "fin_garch.reference"}


@pytest.mark.parametrize("returns_array", [True, False])
def test_same_decisions_on_every_reachable_function(returns_array):
    differ = []
    for f in _functions():
        old, new = inplace_ast.rewrite(f, returns_array), inplace.rewrite(f, returns_array)
        if (old is None) != (new is None):
            differ.append(f"{f.__module__.rsplit('.', 1)[-1]}.{f.__qualname__}")
    assert sorted(differ) == sorted(_WITH)


def kw_full(x, n):
    v = np.full(n, fill_value=x)
    v[0] = -1.0
    return v


def ones_like(row):
    out = np.ones_like(row)
    for i in range(1, row.shape[0]):
        out[i] = out[i - 1] * row[i]
    return out


def shaped(x, n):
    v = np.empty((n, 2))
    v[:, 0] = x
    v[:, 1] = -x
    return v


@pytest.mark.parametrize("lane, args, out", [
    (test_inplace.filled, (2.0,), np.full(5, 9.0)),
    (test_inplace.full_like_lane, (np.arange(4.0), 3.0), np.zeros(4)),
    (kw_full, (1.5, 3), np.zeros(3)),
    (ones_like, (np.arange(1.0, 5.0),), np.zeros(4)),
    (shaped, (0.5, 3), np.zeros((3, 2))),
    (shaped, (0.5, 3), np.zeros((2, 2))),  # the shape check's error
    (test_inplace.filled, (2.0,), np.zeros(4)),
])
@pytest.mark.parametrize("returns_array", [True, False])
def test_rewritten_lanes_compute_the_same(lane, args, out, returns_array):
    results = []
    for module in (inplace_ast, inplace):
        buffer = out.copy()
        try:
            got = module.rewrite(lane, returns_array)(*args, __lw_out=buffer)
        except ValueError as err:
            results.append(("raises", str(err)))
        else:
            results.append((got is buffer if returns_array else got, buffer.tolist()))
    assert results[0] == results[1]
