"""The lane IR (issue 43): built and printed for every lane lanewise compiles, the same on every Python.

Structural facts are checked against the lane's source (where a loop is, which
names it carries, which helpers it calls); the uniform/varying pass is checked
against hand-worked answers, and on every lane for the one fact the SPMD emitter
relies on to ask it: the IR's loops are where the desugared AST's are.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import itertools
import linecache
import pathlib
import re
import sys
import textwrap
import types

import numpy as np
import pytest

import lanewise as lw
from benchmarks.realworld import modules
from lanewise.lane.ir import nodes as ir
from lanewise.lane.ir.build import build, function_ir
from lanewise.lane.ir.passes.varying import analyse, uniform_names, uniform_reads, varying_names
from lanewise.lane.ir.passes.walk import walk
from lanewise.lane.ir.printer import pretty
from lanewise.spmd.desugar import prepared
from lanewise.spmd.syntax import Unsupported

from corpus import BY_NAME, CORPUS


def _walk(node):
    """Every IR node in ``node`` (a node or a tuple of them), with the loops around it."""
    todo = [(node, ())]
    while todo:
        n, loops = todo.pop()
        if isinstance(n, (tuple, list)):
            todo.extend(reversed([(c, loops) for c in n]))
        elif dataclasses.is_dataclass(n) and not isinstance(n, ir.Loc):
            yield n, loops
            inner = loops + (n,) if isinstance(n, ir.Loop) else loops
            todo.extend(reversed([(getattr(n, f.name), inner) for f in dataclasses.fields(n)]))


def _ops(module: ir.LaneModule) -> set:
    return {n.op for f in module.functions() for n, _ in _walk(f.body) if isinstance(n, ir.Prim)}


def _unsupported(module: ir.LaneModule) -> list:
    return [n for f in module.functions() for n, _ in _walk(f.body) if isinstance(n, ir.Unsupported)]


def _realworld_lanes():
    return [pytest.param(lane, id=f"{m.__name__.rsplit('.', 1)[-1]}.{lane.__name__}")
            for m in modules() for lane in getattr(m, "lanes", ())]


def _line_of(fn, text: str) -> int:
    """The file line of the first line of ``fn``'s source containing ``text``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


# ----------------------------------------------------------------------------- every lane builds


@pytest.mark.parametrize("entry", CORPUS, ids=lambda e: e.name)
def test_every_corpus_lane_builds_and_prints(entry):
    module = build(entry.lane)
    text = pretty(module)
    assert text.splitlines()[0].startswith(f"lane {module.entry.name}(")
    assert [p.name for p in module.entry.params] == list(inspect.signature(entry.lane).parameters)
    assert not _unsupported(module)
    assert module.entry.source == "source"
    assert build(entry.lane) == module  # deterministic: equal nodes, equal text
    lines, first = inspect.getsourcelines(inspect.unwrap(entry.lane))
    where = {n.loc.line for n, _ in _walk(module.entry.body) if hasattr(n, "loc")}
    assert where and min(where) > first and max(where) < first + len(lines)


@pytest.mark.parametrize("lane", _realworld_lanes())
def test_every_realworld_lane_and_its_helpers_build_and_print(lane):
    module = build(lane)
    assert not _unsupported(module)
    names = [f.name for f in module.functions()]
    assert len(names) == len(set(names))  # each helper once
    called = {op.removeprefix("call:") for op in _ops(module) if op.startswith("call:")}
    assert called <= set(names[1:]) and set(names[1:]) <= called  # exactly the helpers it calls
    text = pretty(module)
    assert all(line.strip() and line == line.rstrip() for line in text.splitlines())
    assert text.count("\nhelper ") == len(module.helpers)


def test_phys_spa_builds_every_helper_once():
    spa = next(m for m in modules() if m.__name__.endswith("phys_spa"))
    module = build(spa.lanes[0])
    defined = {name for name, obj in vars(spa).items()
               if isinstance(obj, types.FunctionType) and obj.__module__ == spa.__name__}
    helpers = {f.name for f in module.helpers}
    assert helpers <= defined and len(helpers) >= 30


# ----------------------------------------------------------------------------- structure


def test_loop_with_break_and_continue_carries_its_accumulator():
    module = build(BY_NAME["loops"].lane)
    (loop,) = [n for n, _ in _walk(module.entry.body) if isinstance(n, ir.Loop)]
    assert (loop.kind, loop.target, loop.carried) == ("range", ir.Var("k"), ("acc",))
    assert loop.iter.op == "range" and loop.iter.args == (ir.Var("n"),)
    exits = sorted(n.kind for n, loops in _walk(loop.body) if isinstance(n, ir.Exit) and loops == ())
    assert exits == ["break", "continue"]
    assert loop.loc.line == _line_of(BY_NAME["loops"].lane, "for k in range")
    assert loop.loc.file == inspect.getsourcefile(BY_NAME["loops"].lane)


def test_early_return_inside_a_loop_is_an_exit_in_the_loop():
    module = build(BY_NAME["first_above"].lane)
    returns = [(n, loops) for n, loops in _walk(module.entry.body) if isinstance(n, ir.Exit) and n.kind == "return"]
    inside = [n for n, loops in returns if loops]
    assert len(inside) == 1 and inside[0].value == ir.Var("i")
    assert inside[0].loc.line == _line_of(BY_NAME["first_above"].lane, "return i")


@pytest.mark.parametrize("name, carried", [("collatz", ("n", "steps")), ("escape", ("zi", "zr")),
                                           ("rownorm", ("s",)), ("dot", ("s",))])
def test_carried_names_of_known_loops(name, carried):
    loops = [n for n, _ in _walk(build(BY_NAME[name].lane).entry.body) if isinstance(n, ir.Loop)]
    assert [lp.carried for lp in loops] == [carried]


def test_carried_names_include_values_read_before_they_are_assigned():
    def lane(row):
        s = 0.0
        t = 1.0
        for i in range(row.shape[0]):
            if i > 0:
                s += row[i] - prev  # noqa: F821 - bound by the previous iteration
            prev = row[i]
            u = 2.0 * prev
            s += u
        k = 0
        while k < 3:
            t = t * 0.5
            k += 1
        return s + t

    loops = [n for n, _ in _walk(build(lane).entry.body) if isinstance(n, ir.Loop)]
    assert [lp.carried for lp in loops] == [("prev", "s"), ("k", "t")]  # u: assigned before read, not live in


def test_names_resolve_to_primitives_as_the_lane_compiler_resolves_them():
    from math import sqrt as root

    assert {"math.sin", "math.cos", "tuple"} <= _ops(build(BY_NAME["sincos"].lane))
    assert {"cmath.exp", "cmath.sqrt", "method.conjugate", "mul"} <= _ops(build(BY_NAME["cplx"].lane))
    assert {"np.tanh", "np.arctan2", "np.hypot", "np.exp", "neg"} <= _ops(build(BY_NAME["npfuncs"].lane))

    def lane(x, key):
        z = lw.random.normal(key, 0)
        return root(abs(x)) + len((x, z)) + np.pi

    module = build(lane)
    assert {"lw.random.normal", "math.sqrt", "abs", "len", "tuple", "add"} <= _ops(module)
    assert ir.Global("np.pi", "global") in [n for n, _ in _walk(module.entry.body)]


def test_helpers_are_parsed_once_each_and_closures_are_read_from_their_cells():
    module = build(BY_NAME["helper"].lane)
    assert [f.name for f in module.functions()] == ["helper", "_sq", "_clip"]
    assert {"call:_sq", "call:_clip"} <= _ops(module)
    closure = build(BY_NAME["closure"].lane)
    assert [f.name for f in closure.helpers] == ["_sq"]
    globals_ = {n for n, _ in _walk(closure.entry.body) if isinstance(n, ir.Global)}
    assert globals_ == {ir.Global("scale", "closure"), ir.Global("shift", "closure")}


def test_a_recursive_helper_and_a_shared_one_appear_once():
    module = build(_uses_twice)
    assert [f.name for f in module.functions()] == ["_uses_twice", "_twice", "_fact"]  # as reached


def _fact(n):
    return 1 if n <= 1 else n * _fact(n - 1)


def _twice(v):
    return _fact(2) * v


def _scaled(a, v):
    return a * _twice(v)


def _uses_twice(x):
    return _twice(x) + _twice(2.0 * x) + _fact(3)


_KINDS = """\
def kinds(x, out):
    a, (b, *c) = x, (x, x, x)
    out[0] = a
    out[1] += b
    try:
        assert x > 0, "negative"
    except Exception:
        raise ValueError("bad")
    d = [v * v for v in c if v > 0]
    return (lambda y: y + 1.0)(a) + len(d)
"""


def _cell(text: str, name: str) -> dict:
    """``text`` run as a notebook cell: registered with linecache, as IPython does
    (a lane with an ``assert`` cannot live in a test module: pytest rewrites its asserts,
    so its code is not what its text compiles to)."""
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    namespace: dict = {}
    exec(compile(text, name, "exec"), namespace)  # noqa: S102 - what IPython does with a cell
    return namespace


def test_statement_kinds():
    module = build(_cell(_KINDS, "<lane IR statement kinds>")["kinds"])
    body = module.entry.body
    assert module.entry.source == "source"
    assert body[0].target == ir.Unpack((ir.Var("a"), ir.Unpack((ir.Var("b"), ir.Var("c")), 1)), None)
    assert [type(s).__name__ for s in body] == ["Assign", "Do", "Do", "Try", "Assign", "Exit"]
    assert body[1].expr.op == "setitem" and body[2].expr.args[2].op == "add"
    assert isinstance(body[3].body[0], ir.Assert) and isinstance(body[3].handlers[0].body[0], ir.Raise)
    assert isinstance(body[4].value, ir.Comp) and body[4].value.kind == "list"
    assert isinstance(body[5].value.args[0].args[0], ir.Lambda)


def test_a_function_whose_bytecode_numba_cannot_read_is_an_unsupported_node():
    """The same function without its text: pytest's assertion rewriting makes its code
    differ from any text, and Numba cannot read its starred unpacking."""
    namespace: dict = {}
    exec(compile(_KINDS, "<string>", "exec"), namespace)  # noqa: S102 - no text kept
    (node,) = _unsupported(build(namespace["kinds"]))
    assert "UNPACK_EX" in node.what and node.loc == ir.Loc("<string>", 1, 0)


def test_unsupported_syntax_is_a_node_naming_its_line_not_a_crash():
    def lane(x):
        with open(x) as f:  # a construct the IR does not model
            y = f
        return y

    (node,) = _unsupported(build(lane))
    assert node.what == "a with statement" and node.loc.line == _line_of(lane, "with open")
    assert "unsupported: a with statement" in pretty(build(lane))


def test_nodes_are_frozen():
    node = build(BY_NAME["arith"].lane).entry
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.name = "other"
    assert not hasattr(node, "__dict__")  # slots


# ----------------------------------------------------------------------------- lambdas, cells, exec'd code


_LAMBDAS = [lambda x: x + 1.0, lambda x: x * 2.0]  # two on a line of the same parameters: located by column


def test_lambdas_anywhere_are_located_exactly():
    assert build(_LAMBDAS[0]).entry.body[0].value.op == "add"
    assert build(_LAMBDAS[1]).entry.body[0].value.op == "mul"
    assert build(lambda x: (lambda y: y - x)(x)).entry.body[0].value.op == "call"


def test_ufuncs_and_partials_build_as_the_wrappers_vmap_compiles():
    import functools

    assert "np.sin" in _ops(build(np.sin))
    module = build(functools.partial(_scaled, 3.0))
    assert module.entry.source == "bytecode" and [p.name for p in module.entry.params] == ["v"]
    assert "call:_scaled#2" in _ops(module)  # the wrapper takes the partial's name
    assert [f.name for f in module.helpers] == ["_scaled#2", "_twice", "_fact"]


def test_a_cell_registered_with_linecache_is_read_from_its_text():
    name = "<ipython-input-7-lane-ir>"
    module = build(_cell("import numpy as np\ndef cell_lane(x, y):\n    return np.exp(x) * y - x / y\n",
                         name)["cell_lane"])
    assert module.entry.source == "source"
    assert pretty(module) == "lane cell_lane(x, y):\n  return sub(mul(np.exp(x), y), truediv(x, y))"
    assert module.entry.body[0].loc == ir.Loc(name, 3, 4)


_SOURCELESS = textwrap.dedent("""
    import math
    def nowhere(x, n):
        s = 0.0
        for k in range(n):
            if x > k:
                s += math.sin(x) * k
        return s
    def over_a_tuple(x):
        t = 0.0
        for v in (x, 2.0 * x):
            t += v
        return t
    pair = lambda x, y: (x * y, x + y)
""")


def test_code_with_no_source_is_rebuilt_from_its_bytecode():
    namespace: dict = {}
    exec(compile(_SOURCELESS, "<string>", "exec"), namespace)  # noqa: S102
    module = build(namespace["nowhere"])
    assert module.entry.source == "bytecode" and "[rebuilt from bytecode]" in pretty(module)
    assert {"math.sin", "mul", "add", "gt"} <= _ops(module)
    (dispatch,) = [n for n, _ in _walk(module.entry.body) if isinstance(n, ir.Loop)]
    assert {"s", "k", "_bc_block"} <= set(dispatch.carried)  # values cross blocks through iterations
    pair = build(namespace["pair"])
    assert pair.entry.source == "bytecode" and {"mul", "add"} <= _ops(pair)


def test_code_with_no_source_that_cannot_be_rebuilt_is_one_unsupported_node_naming_it():
    namespace: dict = {}
    exec(compile(_SOURCELESS, "<string>", "exec"), namespace)  # noqa: S102
    (node,) = _unsupported(build(namespace["over_a_tuple"]))
    assert "<string>:11" in node.what and "other than range" in node.what
    assert node.loc == ir.Loc("<string>", 9, 0)


def test_statements_typed_at_the_interactive_interpreter_are_read_from_its_history(monkeypatch):
    typed = ["import numpy as np", "def typed(x):", "    if x > 0:", "        return x * np.sin(x)",
             "    return -x", "", "y = 1"]
    history = types.SimpleNamespace(get_current_history_length=lambda: len(typed),
                                    get_history_item=lambda k: typed[k - 1])
    monkeypatch.setitem(sys.modules, "readline", history)
    namespace: dict = {"np": np}
    exec(compile("\n".join(typed[1:6]) + "\n", "<stdin>", "single"), namespace)  # noqa: S102 - as the REPL does
    module = build(namespace["typed"])
    assert module.entry.source == "source"
    assert pretty(module) == ("lane typed(x):\n  if gt(x, 0):\n    return mul(x, np.sin(x))\n"
                              "  return neg(x)")


# ----------------------------------------------------------------------------- golden text


_GOLDEN = {
    "loops": """\
lane loops(x, n):
  acc = 0.0
  for k in range(n) carry (acc):
    if eq(mod(k, 3), 1):
      continue
    acc = add(acc, truediv(x, add(k, 1)))
    if gt(acc, 2.0):
      break
  return acc""",
    "escape": """\
lane escape(cr, ci, max_iter=40):
  zr = 0.0
  zi = 0.0
  for n in range(max_iter) carry (zi, zr):
    (zr, zi) = tuple(add(sub(mul(zr, zr), mul(zi, zi)), cr), add(mul(mul(2, zr), zi), ci))
    if gt(add(mul(zr, zr), mul(zi, zi)), 4.0):
      return n
  return max_iter""",
    "helper": """\
lane helper(x, y):
  return call:_clip(sub(call:_sq(x), y), neg(2.0), 2.0)
helper _sq(v):
  return mul(v, v)
helper _clip(v, lo, hi):
  if lt(v, lo):
    return lo
  if gt(v, hi):
    return hi
  return v""",
    "rownorm": """\
lane rownorm(row):
  s = 0.0
  for i in range(getitem(attr(row, name:'shape'), 0)) carry (s):
    s = add(s, mul(getitem(row, i), getitem(row, i)))
  return math.sqrt(s)""",
}


@pytest.mark.parametrize("name", sorted(_GOLDEN))
def test_printed_text_is_the_golden_text_on_every_python(name):
    """The same text on 3.11, 3.12 and 3.13 (CI runs each; the test pins the text)."""
    assert pretty(build(BY_NAME[name].lane)) == _GOLDEN[name]


def test_explain_shows_the_lane_ir():
    text = str(lw.explain(lw.vmap(BY_NAME["helper"].lane), np.arange(3.0), np.arange(3.0)))
    section = text.split("lane IR:\n", 1)[1].split("\ncache:", 1)[0]
    assert section == "\n".join("  " + line for line in _GOLDEN["helper"].splitlines())
    assert text.index("lane path:") < text.index("lane IR:") < text.index("generated source:")


# ----------------------------------------------------------------------------- the uniform/varying pass


def _python_functions(lane):
    """The lane and its Python helpers as functions, in the IR's order."""
    found, todo = {}, [lane]
    while todo:
        fn = todo.pop(0)
        if fn.__code__ in found:
            continue
        found[fn.__code__] = fn
        for name in fn.__code__.co_names + fn.__code__.co_freevars:
            obj = fn.__globals__.get(name)
            if fn.__closure__ and name in fn.__code__.co_freevars:
                obj = fn.__closure__[fn.__code__.co_freevars.index(name)].cell_contents
            obj = getattr(obj, "py_func", obj)
            if isinstance(obj, types.FunctionType) and not obj.__module__.startswith("lanewise"):
                todo.append(obj)
    return list(found.values())


def _cases():
    lanes = [pytest.param(e.lane, id=e.name) for e in CORPUS] + _realworld_lanes()
    return lanes


@pytest.mark.parametrize("lane", _cases())
def test_loops_are_where_the_desugared_ir_has_them(lane):
    """The SPMD emitter asks the pass about its desugared IR's ``while`` loops by line
    and column (a ``for`` over ``range`` becomes a ``while`` at the ``for``'s place):
    every function it could emit has its IR loops exactly there, and the pass runs on
    it for every choice of uniform, varying and row parameters."""
    by_name = {f.name: f for f in build(lane).functions()}
    compared = 0
    for fn in _python_functions(lane):
        try:
            desugared = prepared(fn)
        except Unsupported:
            continue  # the SPMD path refuses it: it never asks
        function = by_name[fn.__qualname__]
        loops = [n for n, _ in _walk(function.body) if isinstance(n, ir.Loop) and not _in_def(function, n)]
        whiles = [n for n, _ in _walk(desugared.body) if isinstance(n, ir.Loop)]
        assert all(w.kind == "while" for w in whiles), fn.__qualname__
        assert sorted((loop.loc.line, loop.loc.col) for loop in loops) == sorted(
            (w.loc.line, w.loc.col) for w in whiles), fn.__qualname__
        params = [p.name for p in desugared.params]
        for kind in itertools.product("vur", repeat=len(params)) if len(params) <= 5 else ["v" * len(params)]:
            uniform = {p for p, k in zip(params, kind, strict=True) if k == "u"}
            rows = {p for p, k in zip(params, kind, strict=True) if k == "r"}
            found = analyse(function, uniform, rows)
            assert found.lockstep <= {loop.loc for loop in loops}
            assert found.names <= uniform | {p for p in _stored(function)} and not found.names & rows
            compared += 1
    assert compared


def _in_def(function, node) -> bool:
    """Whether ``node`` is inside a function nested in ``function`` (its own IR function)."""
    return any(node is n for d, _ in _walk(function.body) if isinstance(d, (ir.Def, ir.Lambda))
               for n, _ in _walk(d.function.body))


def _stored(function) -> set:
    return {name for n, _ in _walk(function.body) for name in (
        ir.target_names(n.target) if isinstance(n, ir.Assign) or (isinstance(n, ir.Loop) and n.target) else ())}


def _u_counter(x, n):
    s = 0.0
    k = 0
    while k < n:
        s = s + x
        k = k + 1
    return s


def _u_leaves(x, n):
    k = 0
    while k < n:
        k = k + 1
        if x > k:
            break
    for i in range(n):
        if x > i:
            continue
    return x


def _u_places(x, n):
    k = 0
    while k < n:
        for j in range(n):
            x = x + j
        k = k + 1
    if x > 0:
        while n > 2:
            return x
        for i in range(n):
            x = x + i
    return x


def _u_try(x, n):
    a = 1
    b = 2
    try:
        b = n + 1
    except ValueError:
        pass
    for i in range(n):
        try:
            if x > i:
                break
        finally:
            a = a
    return a + b + x


def _u_store(out, n):
    k = 0
    out[k] = 1.0
    m = n * 2
    return m


def _u_rows(row, tab, x, n):
    s = 0.0
    for i in range(len(row)):
        s = s + row[i] * tab[int(x)]
    return s + tab[n] + row[row.shape[0] - 1] + row.size


@pytest.mark.parametrize("fn, params, rows, names, loops", [
    (_u_counter, {"n"}, set(), {"k", "n"}, ["while k < n"]),
    (_u_counter, set(), set(), set(), []),  # n varying: k too (stored in a loop lanes leave apart)
    (_u_leaves, {"n"}, set(), {"n"}, []),  # a break, a continue: lanes leave apart
    # the while under the branch: its test is uniform, its place the emitter's to judge;
    # the range loop under it: its counter is stored under the branch (a vector)
    (_u_places, {"n"}, set(), {"k", "j", "n"}, ["while k < n", "for j in", "while n > 2"]),
    (_u_places, set(), set(), set(), []),
    # stores inside try are varying (b, and a, stored in a finally); a break inside try leaves the loop
    (_u_try, {"n"}, set(), {"n"}, []),
    (_u_store, {"n"}, {"out"}, {"m", "n"}, []),  # out[k] = ...: k varying, as the AST analysis had it
    (_u_rows, {"n"}, {"row", "tab"}, {"i", "n"}, ["for i in"]),
    (_u_rows, {"n", "x"}, {"row", "tab"}, {"i", "n", "x"}, ["for i in"]),
    (_u_rows, {"n"}, set(), {"n"}, []),  # len(row) of a value that is not a row: varying
], ids=lambda v: v.__name__ if callable(v) else None)
def test_uniform_names_and_lockstep_loops(fn, params, rows, names, loops):
    found = analyse(build(fn).entry, params, rows)
    assert found.names == names
    assert sorted(loc.line for loc in found.lockstep) == sorted(_line_of(fn, text) for text in loops)
    assert uniform_names(build(fn).entry, params, rows) == found.names


def test_uniform_reads():
    """Block reads: every read (and store) of the rows asked about at a uniform index."""
    fn = build(_u_rows).entry
    rows = {"row", "tab"}
    assert uniform_reads(fn, {"n"}, rows, {"row"})  # row[i] in a lockstep loop, row[row.shape[0] - 1]
    assert not uniform_reads(fn, {"n"}, rows, {"tab"})  # tab[int(x)], x varying
    assert not uniform_reads(fn, {"n"}, rows)
    assert uniform_reads(fn, {"n", "x"}, rows)
    assert not uniform_reads(fn, {"x"}, rows, {"tab"})  # tab[n], n varying
    store = build(_u_store).entry
    assert not uniform_reads(store, {"n"}, {"out"})  # out[k]: k varying (a store reads its index)


def test_varying_names_of_a_lane():
    def lane(x, n, row):
        s = 0.0
        k = 0
        m = row.shape[0] + n
        while k < n:
            s = s + x
            k = k + 1
        for i in range(m):
            if x > i:
                s = s - 1.0
        return s

    fn = build(lane).entry
    assert varying_names(fn, {"n"}, {"row"}) == {"x", "s", "row"}
    assert varying_names(fn, set(), {"row"}) == {"x", "n", "s", "k", "m", "i", "row"}


# ----------------------------------------------------------------------------- robustness


@pytest.mark.parametrize("name", ["corpus", "conformance", "many_lanes", "lanewise.lanemath",
                                  "lanewise.random._lanes", "lanewise.random._core"])
def test_every_function_of_lane_modules_builds_without_raising(name):
    """Lanes, their helpers and whatever else those modules define (generators, imports,
    ``with``): the front end never fails; what it does not model is an Unsupported node."""
    module = importlib.import_module(name)
    functions = [getattr(obj, "py_func", obj) for obj in vars(module).values()]
    functions = [f for f in functions if isinstance(f, types.FunctionType) and f.__module__ == module.__name__]
    assert len(functions) >= 4
    for fn in functions:
        built = build(fn)
        for node in _unsupported(built):
            assert node.what and node.loc.line > 0
        assert pretty(built, lines=True)


def test_only_the_front_end_reads_python_syntax():
    """Issue 43's target: passes read the IR; only build.py imports ``ast``."""
    root = pathlib.Path(ir.__file__).parent
    readers = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                     if re.search(r"^\s*(import ast|from ast )", p.read_text(), re.M))
    assert readers == ["build.py"]


def _binds_and_stores(a, p, xs, n):
    y, a[n] = n, 1.0
    for k in range(n):
        p.x = n
    s = [2.0 for t in xs]
    for a[0] in xs:
        pass
    return y, s


@pytest.mark.parametrize("statement, reads, every", [
    (0, {"a", "n"}, {"a", "n", "y"}),  # an unpacking: y is bound; a[n] reads a and n
    (1, {"n", "p"}, {"k", "n", "p"}),  # the loop binds k; p.x = n reads p
    (2, {"xs"}, {"s", "t", "xs"}),  # a comprehension binds t
    (3, {"a", "xs"}, {"a", "xs"}),  # a loop storing into a[0] reads a
    (4, {"y", "s"}, {"y", "s"}),
])
def test_walk_reads_leaves_out_the_names_a_statement_binds(statement, reads, every):
    """``walk(node, reads=True)`` (what reverse mode's checkpoints read) visits the targets
    of assignments, loops and comprehensions only for what storing into them reads."""
    node = function_ir(_binds_and_stores).body[statement]
    assert {v.name for v in walk(node, reads=True) if isinstance(v, ir.Var)} == reads
    assert {v.name for v in walk(node) if isinstance(v, ir.Var)} == every
    assert set(map(id, walk(node, reads=True))) <= set(map(id, walk(node)))
