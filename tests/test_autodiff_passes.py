"""Autodiff's analyses on the lane IR (issue 43): which locals carry derivatives
(autodiff/activity.py), which differentiated arguments reverse mode takes as 1-D
arrays (autodiff/arrays.py) and which loops it can checkpoint, holding what
(autodiff/checkpoint.py), against hand-written expectations.

Until they moved, each was checked against the AST version it replaces on every
corpus, real-world and autodiff-suite lane and helper (identical results, and
byte-identical generated derivative source); these are the rules they agreed on.
"""

from __future__ import annotations

import ast
import math
import types
from math import sqrt as root
from dataclasses import dataclass

import numpy
import numpy as np
import pytest

import lanewise as lw
from benchmarks.realworld import modules
from lanewise.autodiff.activity import active_names, helper
from lanewise.autodiff.arrays import Mixed, element_arrays
from lanewise.autodiff.checkpoint import scalar_names, state
from lanewise.autodiff.forward import Plan, transform
from lanewise.autodiff.source import first_line, grouped
from lanewise.lane.callables import as_lane_function
from lanewise.lane.ir import nodes as ir
from lanewise.lane.ir.build import build, function_ir, function_of_tree
from lanewise.lane.source import definition
from lanewise.spmd.syntax import function_ast

from corpus import CORPUS


def _active(fn, *seeded, resolve=ir.called):
    return sorted(active_names(build(fn).entry, set(seeded), resolve))


# ----------------------------------------------------------------------------- activity


def chain(x, n):
    k = n + 1
    y = x * k
    return y > 0, y


def integers(x, a):
    f = math.floor(x)
    i = int(x)
    n = len(a)
    r = round(x)
    k = np.sign(x)
    st = lw.stop_gradient(x)
    m = a.shape[0]
    q = x // 2.0
    b = x > 1.0 and a[0] > 0
    s = f"{x}"
    mx = max(x, 1.0)
    p = pow(x, 2)
    t = np.sum(a)
    u = a.sum()
    return f, i, n, r, k, st, m, q, b, s, mx, p, t, u


def in_place(x, n):
    y = 1.0
    y //= x  # the in-place operator's operand decides, as for y = ... x
    z = 0.0
    z += x
    k = n
    k *= 2
    return y, z, k


def writes(x, a, b):
    a[0] = x
    b[0][1] = 1.0
    b[1] += x
    c, d = x, 1.0
    return a, b, c, d


def closures(x, a):
    g = lambda t: t * x  # noqa: E731 -- closes over x: active
    h = lambda x: x + 1.0  # noqa: E731 -- its own x
    u = g(2.0)
    return g, h, u


def loops(x, n):
    acc = 0.0
    i = 0
    while i < n:
        acc = acc + x if i % 2 else acc
        i += 1
    for v in (x, 2.0):
        acc += v
    for j in range(n):
        acc = acc * 2.0
    return acc


def nested(x):
    def step(c, y):
        r = c * y
        return r, r
    out = step(x, 2.0)
    return out


def comprehensions(x, xs):
    a = [t * 2 for t in xs]
    b = [x for _ in range(3)]
    c = [1.0 for i in range(3) if i < x]
    return a, b, c


def attributes(x, a):
    t = a.T
    r = x.real
    size = a.size
    o = a.reshape(3).mean()
    return t, r, size, o


@pytest.mark.parametrize("fn,seeded,expected", [
    (chain, ["x"], ["x", "y"]),
    (chain, ["n"], ["k", "n", "y"]),
    (integers, ["x"], ["mx", "p", "x"]),
    (integers, ["a"], ["a", "t", "u"]),
    (in_place, ["x"], ["x", "y", "z"]),
    (in_place, ["n"], ["k", "n"]),
    (writes, ["x"], ["a", "b", "c", "d", "x"]),  # an active tuple activates every name it is unpacked into
    (writes, ["a"], ["a"]),
    (closures, ["x"], ["g", "x"]),
    (closures, ["a"], ["a"]),
    (loops, ["x"], ["acc", "v", "x"]),
    (loops, ["n"], ["n"]),
    (nested, ["x"], ["out", "x"]),
    (comprehensions, ["x"], ["b", "x"]),
    (comprehensions, ["xs"], ["a", "xs"]),
    (attributes, ["x"], ["r", "x"]),
    (attributes, ["a"], ["a", "o", "t"]),
], ids=lambda v: v.__name__ if callable(v) else None)
def test_active_names(fn, seeded, expected):
    assert _active(fn, *seeded) == expected


def test_a_nested_functions_assignments_share_the_lanes_names():
    def lane(x, c):
        def step(c, y):
            c = c * y  # the lane's c, flow-insensitively
            return c
        return step(x, 2.0)
    assert _active(lane, "x") == ["x"]
    assert _active(lane, "x", "y") == ["c", "x", "y"]


def test_names_the_transformation_binds_resolve_through_its_hook():
    # forward mode writes a custom_jvp function as "return _lw_custom(x)" with _lw_custom its own name
    tree = ast.parse("def lane(x):\n    y = _lw_custom(x)\n    return y").body[0]
    function = function_of_tree(chain, tree)
    assert sorted(active_names(function, {"x"})) == ["x", "y"]
    floor = lambda call: math.floor if call.op == "_lw_custom" else ir.called(call)  # noqa: E731
    assert sorted(active_names(function, {"x"}, floor)) == ["x"]


# ----------------------------------------------------------------------------- 1-D arrays


def _reads(v, k):
    return v[k]


def _number(v):
    return v * 2.0


def _loops(v):
    s = 0.0
    for t in v:
        s += t
    return s


def _passes(v):
    return _reads(v, 0)


def _shape(v):
    return v.shape[0]


_cell: dict = {}
exec("def _no_source(v):\n    return v * 2.0\n", _cell)


def element(w, x):
    return w[0] * x + np.sum(w)


def linear(w, v):
    return w @ v + w.mean() + np.dot(w, v) + len(w) + w.size


def sliced(w):
    return w[1:].sum() + w[1, 2]


def both(w):
    return w[0] + w


def stored(w, x):
    w = x
    x += 1.0
    return w + x


def passed_number(x):
    return _number(x)


def passed_indexed(x, y):
    return _reads(y, x)


def passed_deep(x):
    return _passes(x)


def passed_loop(x):
    return _loops(x)


def passed_shape(x):
    return _shape(x)


def passed_no_source(x):
    return _cell["_no_source"](x) + _no_source(x)


_no_source = _cell["_no_source"]


@pytest.mark.parametrize("fn,differentiated,expected", [
    (element, ["w", "x"], ["w"]),
    (linear, ["w", "v"], ["v", "w"]),
    (sliced, ["w"], []),
    (both, ["w"], "w is used both element by element and whole"),
    (stored, ["w", "x"], []),
    (passed_number, ["x"], []),
    (passed_indexed, ["x"], "x is passed to a helper that reads it as an array"),
    (passed_indexed, ["y"], "y is passed to a helper that reads it as an array"),
    (passed_deep, ["x"], "x is passed to a helper that reads it as an array"),
    (passed_loop, ["x"], "x is passed to a helper that reads it as an array"),
    (passed_shape, ["x"], "x is passed to a helper that reads it as an array"),
    (passed_no_source, ["x"], "x is passed to a helper that reads it as an array"),
], ids=lambda v: v.__name__ if callable(v) else None)
def test_element_arrays(fn, differentiated, expected):
    try:
        got = sorted(element_arrays(build(fn).entry, differentiated))
    except Mixed as e:
        got = str(e)
    assert got == expected


def test_an_in_place_write_of_an_argument_is_a_store_not_a_use():
    def lane(w, x):
        w += x
        w @= x
        return _number(w)
    assert element_arrays(build(lane).entry, ["w"]) == set()


# ----------------------------------------------------------------------------- checkpoints


def counted(x, n):
    s = 0.0
    k = 0
    while k < n:
        t = s * x
        s = t + 1.0
        k += 1
    return s


def ranged(x, n):
    s, t = x, 0.0
    for i in range(n):
        t = s  # t is written before it is read: not state
        s = t * x + float(i)
    return s


def over_values(x, w):
    s = 0.0
    for v in w:
        s = s + v * x
    return s


def writes_an_element(x, w):
    s = x
    for i in range(3):
        w[i] = s
        s = s * x
    return s


def maybe_assigned(x, n):
    if n > 1:
        s = x
    for i in range(n):
        s = s * x
    return s


def holds_an_array(x, n):
    a = np.zeros(3)
    for i in range(n):
        a = a * x
    return a[0]


def _checkpoint(fn, scalars):
    function = build(fn).entry
    names = scalar_names(function, set(scalars), set())
    return [state(function, loop, names) for loop in function.body if isinstance(loop, ir.Loop)]


@pytest.mark.parametrize("fn,expected", [
    (counted, [["k", "s"]]),
    (ranged, [["s"]]),
    (over_values, [None]),  # a for loop over anything but range(...)
    (writes_an_element, [None]),  # recomputing it would see its own later writes
    (maybe_assigned, [None]),  # s is not assigned on every path to the loop
    (holds_an_array, [None]),  # a is not a number
], ids=lambda v: v.__name__ if callable(v) else None)
def test_checkpointed_state(fn, expected):
    assert _checkpoint(fn, ["x"]) == expected


def test_scalar_names_follow_numbers_through_assignments_and_ruled_calls():
    def lane(x, w, n):
        a = x * 2.0 + math.sin(x)
        b = w[0] + a
        c = np.zeros(3)
        d = c[0]  # c is not a differentiated array: unknown
        e, f = a, b
        g = [a]
        h = lw.stop_gradient(a) + len(c)  # len(c) of c, not a number: h is unknown
        for i in range(n):
            a = a + 1.0
        return a, b, d, e, f, g, h
    names = scalar_names(build(lane).entry, {"x"}, {"w"})
    assert sorted(names) == ["a", "b", "e", "f", "i", "x"]


# ----------------------------------------------------------------------------- the IR they read


@dataclass
class _Point:
    a: float


def test_a_call_keeps_the_object_it_calls_out_of_the_irs_fields():
    def lane(x):
        s = 0.0
        for _ in range(3):
            s = s + _Point(x).a + math.floor(x)
        return s
    loop = build(lane).entry.body[1]
    total = loop.body[0].value
    assert ir.called(total.args[1]) is math.floor and ir.called(total.args[0].args[1].args[0]) is _Point
    assert loop.carried == ("s",)
    same = ir.Prim("abs", (ir.Var("x"),), ir.Loc("f.py", 1, 0), callee=ir.Callee(abs))
    assert same == ir.Prim("abs", (ir.Var("x"),), ir.Loc("f.py", 1, 0)) and "callee" not in repr(same)


def test_the_ir_of_a_rewritten_def_resolves_names_in_its_function():
    tree = function_ast(integers)
    tree.body = tree.body[:1] + [ast.parse("z = np.exp(f)").body[0]]
    function = function_of_tree(integers, tree)
    assert [ir.called(s.value) for s in function.body] == [math.floor, np.exp]


def _reachable() -> list:
    """Every Python function the corpus and real-world lanes reach (helpers through the IR's calls)."""
    seen, out = set(), []
    todo = [e.lane for e in CORPUS] + [lane for m in modules() for lane in getattr(m, "lanes", ())]
    while todo:
        f = as_lane_function(todo.pop())
        f = getattr(f, "py_func", f)
        if isinstance(f, types.FunctionType) and f.__code__ not in seen:
            seen.add(f.__code__)
            out.append(f)
            todo += [helper(ir.called(n)) for fun in build(f).functions() for n in _walk(fun.body)
                     if isinstance(n, ir.Prim) and n.op.startswith("call:")]
    return out


def _walk(node):
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, (tuple, list)):
            todo.extend(n)
        elif hasattr(n, "__dataclass_fields__") and not isinstance(n, ir.Loc):
            yield n
            todo.extend(getattr(n, f) for f in n.__dataclass_fields__ if f != "loc")


@pytest.mark.parametrize("fn", _reachable(), ids=lambda f: f.__qualname__)
def test_every_reachable_lane_is_analysed(fn):
    function = build(fn).entry
    params = [p.name for p in function.params]
    everything = active_names(function, set(params))
    assert set(params) <= everything
    for p in params:  # monotone: one argument activates no more than all of them
        assert active_names(function, {p}) <= everything
    try:
        assert element_arrays(function, params) <= set(params)
    except Mixed as e:
        assert str(e).split(" ")[0] in params


# ----------------------------------------------------------------------------- the emitters' text


def _ast_lines(statements):
    """The first line of each statement the IR keeps (no ``pass``, no docstring), as ``ast.unparse`` writes it."""
    for s in statements:
        if isinstance(s, ast.Pass) or isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
            continue
        yield ast.unparse(s).splitlines()[0][:80]
        if isinstance(s, (ast.If, ast.For, ast.While)):
            yield from _ast_lines(s.body)
            yield from _ast_lines(s.orelse)


def _ir_lines(statements):
    for group in grouped(statements):
        yield first_line(group)
        if isinstance(group[0], ir.If):
            yield from _ir_lines(group[0].then)
            yield from _ir_lines(group[0].orelse)
        elif isinstance(group[0], ir.Loop):
            yield from _ir_lines(group[0].body)
            yield from _ir_lines(group[0].orelse)


_NOT_WRITTEN_ALIKE = (ast.AnnAssign, ast.Try, ast.With, ast.FunctionDef, ast.Lambda, ast.ClassDef, ast.Delete,
                      ast.Match, ast.Global, ast.Nonlocal, ast.Import, ast.ImportFrom, ast.List)


@pytest.mark.parametrize("fn", _reachable(), ids=lambda f: f.__qualname__)
def test_the_emitters_quote_each_statement_as_ast_unparse_writes_it(fn):
    """The comment line naming each statement in a derivative lane is the statement as
    the user wrote it (names as written: ``numpy.exp``, ``root`` for ``from math import
    sqrt as root``), as ``ast.unparse`` writes it (the reference)."""
    tree = definition(fn)
    body = tree.body if isinstance(tree, ast.FunctionDef) else None
    if body is None or any(isinstance(n, _NOT_WRITTEN_ALIKE) for s in body for n in ast.walk(s)):
        pytest.skip("a lambda, or a construct the emitters refuse or write otherwise")
    assert list(_ir_lines(function_ir(fn).body)) == list(_ast_lines(body))


def _as_written(x):
    y = numpy.exp(x) * root(x)
    return y


def test_a_derivative_lane_calls_functions_by_the_names_the_lane_wrote():
    made = transform(_as_written, Plan(k=1, seeds=((1.0,),), finish="grad", transform="lw.grad"))
    assert "numpy.exp(x)" in made._lw_source and "root(x)" in made._lw_source
    x = 1.5
    assert made(x) == pytest.approx(math.exp(x) * math.sqrt(x) + math.exp(x) / (2.0 * math.sqrt(x)), rel=1e-14)
