"""The lane IR as the SPMD emitter (:mod:`.transform`) reads it: a function's
desugared IR (:mod:`.desugar`), tuple values, and the small analyses the emitter
asks of statements (block temporaries, branches cheap enough to run masked).

Example:
    >>> from lanewise.spmd.desugar import prepared
    >>> def f(x):
    ...     for k in range(3):
    ...         x += k
    ...     return x
    >>> sorted(local_names(prepared(f)))
    ['_lw_k1', '_lw_re1', '_lw_rs1', '_lw_stop1', 'k', 'x']
"""

from __future__ import annotations

import types
from collections import Counter
from dataclasses import dataclass

from numba.core.dispatcher import Dispatcher

from ..lane import source as _source
from ..lane.ir import nodes as ir
from ..lane.ir.build import function_ir
from ..lane.ir.passes.walk import stored, walk
from ..lane.ir.unparse import is_call as _written_as_call, python_text


class Unsupported(Exception):
    """The lane uses something the SPMD transformation does not handle (the message says what)."""


@dataclass(frozen=True)
class Tup:
    """A tuple value of the W-wide code: its items are expressions or Tups."""

    items: tuple


def shape_of(value):
    return tuple(shape_of(v) for v in value.items) if isinstance(value, Tup) else None


def leaves_of(value) -> list[str]:
    if isinstance(value, Tup):
        return [leaf for v in value.items for leaf in leaves_of(v)]
    return [value]


def rebuild(shape, leaves):
    it = iter(leaves)

    def build(s):
        return Tup(tuple(build(c) for c in s)) if isinstance(s, tuple) else next(it)

    return build(shape)


# ----------------------------------------------------------------------------- source


def function_ast(fn):
    """The ``def`` of ``fn`` as Python's syntax tree (:func:`lanewise.lane.source.function_ast`),
    :class:`Unsupported` when its source is not the code that runs: for autodiff's emitters,
    which still read the tree (the SPMD emitter reads :func:`source_function`)."""
    return _source.function_ast(fn, Unsupported)


resolve = _source.resolve  # autodiff's: the object a syntax-tree name or attribute chain refers to


def source_function(fn) -> ir.Function:
    """The lane IR of ``fn`` read from its text (the code that runs), else :class:`Unsupported`."""
    function = function_ir(fn)
    if function.source != "source":
        raise Unsupported(f"the source of {fn.__qualname__} is not available, or is not the code "
                          "that runs (exec'd from a string, or edited since import)")
    return function


def lane_params(fn) -> list[str]:
    """The names of ``fn``'s positional parameters, in order (:class:`Unsupported` without its source)."""
    return [p.name for p in source_function(fn).params if p.kind == "positional"]


def helper_function(obj):
    """The Python function to inline for a call of ``obj``, or None (a call of
    anything else: a builtin, a NumPy or math function, lanewise's own)."""
    if isinstance(obj, Dispatcher):
        options = getattr(obj, "targetoptions", {}) or {}
        if options.get("fastmath"):
            raise Unsupported(f"the helper {obj.py_func.__qualname__} is compiled with fastmath")
        return obj.py_func
    module = getattr(obj, "__module__", "") or ""
    if isinstance(obj, types.FunctionType) and not getattr(obj, "_lw_intrinsic", False) \
            and (not module.startswith("lanewise") or module == "lanewise._lanes"):  # generated lanes are inlined
        return obj
    return None


def is_call(e) -> bool:
    """Whether the primitive ``e`` is a call the lane wrote (``pow(a, b)`` too, whose op is
    ``**``'s: a resolved call holds its callee, an operator none)."""
    return isinstance(e, ir.Prim) and (e.callee is not None or _written_as_call(e) or e.op == "spmd.range")


def call_args(e: ir.Prim) -> tuple:
    """A call's positional arguments (without a method's value or a local callee)."""
    return e.args[1:] if e.op == "call" or e.op.startswith("method.") else e.args


def bind_arguments(e: ir.Prim, params, what: str) -> dict:
    """The argument expressions of the call ``e`` by parameter name (``params`` in order):
    positional, then keywords; Unsupported for * arguments, too many, or unknown or
    repeated keywords (``what`` names the call in the message)."""
    args = call_args(e)
    if len(args) > len(params) or any(isinstance(a, ir.Prim) and a.op == "star" for a in args):
        raise Unsupported(f"{what} with * or too many arguments")
    bound = dict(zip(params, args))
    for name, value in e.keywords:
        if name not in params or name in bound:
            raise Unsupported(f"{what} with the keyword argument {None if name == '**' else name!r}")
        bound[name] = value
    return bound


def where(loc: ir.Loc) -> str:
    """``file:line`` of a node the user wrote, for messages and the emitted comments."""
    return f"{loc.file}:{loc.line}"


def target_text(t) -> str:
    """An assignment target as the lane wrote it (for messages)."""
    if isinstance(t, ir.Unpack):
        items = [("*" if k == t.star else "") + target_text(i) for k, i in enumerate(t.items)]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(t, ir.Item):
        return python_text(ir.Prim("getitem", (t.base, t.index), ir.Loc("", 0, 0)))
    if isinstance(t, ir.Field):
        return f"{python_text(t.base)}.{t.name}"
    return t.name


def local_names(function: ir.Function) -> set[str]:
    """Names assigned in the function (its locals, Python's scoping rule), params included."""
    return {p.name for p in function.params} | stored(walk(function.body), defs=False)


def name_counts(function: ir.Function) -> Counter:
    """How many times each name is written in ``function`` (its body and its parameters' defaults)."""
    defaults = tuple(p.default for p in function.params if p.default is not None)
    return Counter(n.name for n in walk((defaults, function.body)) if isinstance(n, ir.Var))


# ----------------------------------------------------------------------------- analysis


def grouped(stmts) -> list[list]:
    """``stmts`` with the assignments of one ``a = b = v`` (which share their value node) together."""
    out: list[list] = []
    for s in stmts:
        if out and isinstance(s, ir.Assign) and isinstance(out[-1][0], ir.Assign) and out[-1][0].value is s.value:
            out[-1].append(s)
        else:
            out.append([s])
    return out


def block_temps(stmts, frame_counts: dict) -> frozenset:
    """Names whose every use is inside ``stmts`` and whose first use there is a
    store by one of its top-level statements: such a variable is always assigned
    before it is read in the block, so lanes outside the block's mask never need
    its value and the store needs no select."""
    seen: set[str] = set()
    candidates: set[str] = set()
    counts: Counter = Counter()
    for stmt in stmts:
        counts.update(n.name for n in walk(stmt) if isinstance(n, ir.Var))
        if isinstance(stmt, ir.Assign):
            seen.update(n.name for n in walk(stmt.value) if isinstance(n, ir.Var))
            for name in sorted(ir.target_names(stmt.target)):
                if name not in seen:
                    candidates.add(name)
                    seen.add(name)
        else:
            seen.update(n.name for n in walk(stmt) if isinstance(n, ir.Var))
    return frozenset(n for n in candidates if counts.get(n) == frame_counts.get(n))


_HEAVY = (ir.Loop, ir.If, ir.Exit)


def cheap_branch(stmts) -> bool:
    """A branch body of a few simple statements (no loop, no call, no exit): run it
    masked without testing whether any lane takes it.  A body that leaves (return,
    break, continue) keeps its test: a lane leaves once, so the branch is nearly
    never taken and predicted, while the masked form puts the exit's mask updates
    on every iteration's dependency chain (W2 0.15x -> 0.12x Numba, W6's search
    5.1 -> 4.4 ns per 8-lane step).  Sizes count as Python's syntax tree counts
    nodes (names and operators included), the measure these limits were set in."""
    groups = grouped(stmts)
    if len(groups) > 4 or any(isinstance(n, _HEAVY) or is_call(n) for n in walk(tuple(stmts))):
        return False
    return sum(_statement_size(g) for g in groups) <= 40


def flat_branch(stmts) -> bool:
    """A branch of a few assignments to local names (no exit, no call, no nesting, no
    indexing: a merged branch runs outside its mask, and a row's gather must not)."""
    return cheap_branch(stmts) and not any(isinstance(n, ir.Prim) and n.op == "getitem" for n in walk(tuple(stmts))) \
        and all(isinstance(s, ir.Assign) and _flat_target(s.target) for s in stmts)


def _flat_target(t) -> bool:
    return isinstance(t, ir.Var) or (isinstance(t, ir.Unpack) and t.star is None
                                     and all(isinstance(i, ir.Var) for i in t.items))


def _statement_size(group: list) -> int:
    """The syntax tree's node count of one statement (``group``: the assignments of one ``a = b = v``)."""
    s = group[0]
    if isinstance(s, ir.Assign):
        return 1 + sum(_target_size(g.target) for g in group) + _size(s.value)
    if isinstance(s, ir.Do) and isinstance(s.expr, ir.Prim) and s.expr.op in ("setitem", "setattr"):
        *place, value = s.expr.args  # target[index] = value: an Assign of a Subscript (or Attribute) target
        return 1 + 2 + sum(map(_size, place)) + _size(value)
    parts = [getattr(s, f) for f in ("expr", "value", "exc", "cause", "test", "msg") if hasattr(s, f)]
    return 1 + sum(_size(p) for p in parts if p is not None)


def _target_size(t) -> int:
    if isinstance(t, ir.Unpack):
        return 2 + sum(_target_size(i) + (2 if k == t.star else 0) for k, i in enumerate(t.items))
    if isinstance(t, ir.Item):
        return 2 + _size(t.base) + _size(t.index)
    if isinstance(t, ir.Field):
        return 2 + _size(t.base)
    return 2


def _size(e) -> int:
    """The syntax tree's node count of an expression (a name and its context: 2; an operator: 1)."""
    if isinstance(e, ir.Var):
        return 2
    if isinstance(e, ir.Global):
        return 2 * (e.name.count(".") + 1)
    if not isinstance(e, ir.Prim):
        return 1
    args = sum(map(_size, e.args))
    if e.op in ("and", "or") and dict(e.params).get("chain"):  # a < b < c: one Compare, b once
        return 1 + _size(e.args[0].args[0]) + sum(1 + _size(p.args[1]) for p in e.args)
    if e.op in ("attr", "getitem", "tuple", "list", "star"):  # their context
        return 2 + args
    if e.op == "slice":
        return 1 + sum(_size(a) for a in e.args if not (isinstance(a, ir.Const) and a.value is None))
    if e.op in ("ifexp", "set", "dict", "fstring", "format"):
        return 1 + args
    return 2 + args  # an operator and its op node


def first_in_helpers(fn, seen, find) -> str | None:
    """``find(fn, function)`` for ``fn`` (its IR), else for the helpers it calls by name
    (depth first): the first answer that is not None."""
    if not isinstance(fn, types.FunctionType) or fn in seen:  # (a call of an array, say: unhashable)
        return None
    seen.add(fn)
    try:
        function = source_function(fn)
    except Unsupported:
        return None
    found = find(fn, function)
    if found:
        return found
    for node in walk(function.body):
        if isinstance(node, ir.Prim):
            found = first_in_helpers(callee(node), seen, find)
            if found:
                return found
    return None


def callee(prim: ir.Prim):
    """The function a call names: ``helper(...)`` (a global or closure variable) or
    ``module.helper(...)``; None when it is neither."""
    if prim.callee is None or (prim.callee.hops or 0) > 1:
        return None
    target = prim.callee.obj
    if hasattr(target, "_lw_spmd_twin"):  # lw.random's draws: called as a whole, not inlined
        return None
    return getattr(target, "py_func", target)


def split_at_loop(stmts) -> tuple[tuple, ir.Loop, tuple]:
    r"""A desugared body with one top-level loop as (the statements before it, the
    loop, the statements after it): the parts a streamed lane emits apart.

    Example:
        >>> from lanewise.spmd.desugar import prepared
        >>> def f(n):
        ...     while n < 3:
        ...         n = n + 1
        ...     return n
        >>> [len(part) for part in (split_at_loop(prepared(f).body)[0], split_at_loop(prepared(f).body)[2])]
        [0, 1]
    """
    loops = [k for k, st in enumerate(stmts) if isinstance(st, ir.Loop)]
    if len(loops) != 1:
        raise Unsupported("streaming needs exactly one top-level loop")
    return tuple(stmts[:loops[0]]), stmts[loops[0]], tuple(stmts[loops[0] + 1:])


def leaf_paths(shape, prefix=()):
    """Paths of the leaves of a result shape, depth first (the order of its slots)."""
    if shape is None:
        return [prefix]
    return [p for k, s in enumerate(shape) for p in leaf_paths(s, prefix + (k,))]


def result_shape(results):
    """The nested tuple shape of the result leaves' paths."""
    if len(results) == 1 and results[0][0] == ():
        return None

    def build(prefix):
        children = sorted({p[len(prefix)] for p, _ in results if p[:len(prefix)] == prefix and len(p) > len(prefix)})
        out = []
        for c in children:
            sub = prefix + (c,)
            out.append(None if any(p == sub for p, _ in results) else build(sub))
        return tuple(out)

    return build(())
