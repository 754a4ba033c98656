"""Which differentiated arguments of a lane reverse mode takes as 1-D arrays, from their uses (on the lane IR).

Reverse mode's adjoint code (:mod:`.adjoint`) gives a differentiated argument
a scalar adjoint or an array of them.  It cannot know the argument's type when
the lane is transformed, so it reads the uses: an argument read element by
element (``w[i]``), measured (``w.shape``, ``len(w)``) or reduced linearly
(``np.sum(w)``, ``w.mean()``, ``np.dot(w, v)``, ``w @ v``) is an array; one used
as a number anywhere else is a number (checked where the lane runs).  Mixing
the two, or handing a number-like argument to a helper that reads it as an
array, is for the tape (:class:`Mixed`).

Example:
    >>> from lanewise.lane.ir.build import build
    >>> def f(w, x):
    ...     return w[0] * x + np.sum(w)
    >>> element_arrays(build(f).entry, ["w", "x"])
    {'w'}
"""

from __future__ import annotations

import numpy as np

from ..lane.ir import nodes as ir
from ..lane.ir.build import function_ir
from .activity import INERT_ATTRIBUTES, SYNTAX_OPS, helper as _helper

#: Array methods reducing a differentiated array, and the direction of their derivative.
REDUCING_METHODS = {"sum": "", "mean": "mean"}
_ARRAY_USES = {"element", "inert", "linear"}


class Mixed(Exception):
    """An argument used both as an array and as a number, or passed whole to a helper that indexes it."""


def linear_numpy(obj) -> str | None:
    """``"sum"``, ``"mean"`` or ``"dot"`` for those NumPy functions, else None."""
    return next((n for n in ("sum", "mean", "dot") if obj is not None and obj is getattr(np, n)), None)


def element_arrays(function: ir.Function, differentiated, resolve=ir.called) -> set:
    """The differentiated parameters of ``function`` (its IR) used as 1-D arrays;
    ``resolve(call)``: the object a call Prim calls."""
    uses = {p: set() for p in differentiated}
    for name, role in _occurrences(function):
        if name in uses:
            uses[name].add(_kind(role, resolve))
    found = {p for p, kinds in uses.items() if kinds & _ARRAY_USES}
    for p in sorted(found):  # sorted: the same message every run
        if uses[p] - _ARRAY_USES:
            raise Mixed(f"{p} is used both element by element and whole")
    for p in sorted(set(uses) - found):
        if not ("store" in uses[p] and "whole" not in uses[p]) and _passed_as_array(function, p, resolve):
            raise Mixed(f"{p} is passed to a helper that reads it as an array")
    return found


def _kind(role, resolve) -> str:
    """How one occurrence of a differentiated argument uses it (see :func:`_occurrences`)."""
    what = role[0]
    if what in ("store", "loop-target"):
        return "store"
    if (what == "attr" and role[1] in REDUCING_METHODS) or what == "matmul" or \
            (what == "arg" and linear_numpy(resolve(role[1]))):
        return "linear"
    if what == "base":
        index = role[1]
        whole = isinstance(index, ir.Prim) and index.op in ("slice", "tuple") and index.callee is None
        return "whole" if whole else "element"
    if (what == "attr" and role[1] in INERT_ATTRIBUTES) or (what == "arg" and role[1].op == "len"):
        return "inert"
    return "whole"


def _passed_as_array(function: ir.Function, name: str, resolve) -> bool:
    calls: dict = {}  # a call Prim (by identity) -> the positions it passes ``name`` at
    for n, role in _occurrences(function):
        if n == name and role[0] == "arg":
            calls.setdefault(id(role[1]), (role[1], []))[1].append(role[2])
    return any(_helper(resolve(call)) is not None and _reads_as_array(_helper(resolve(call)), positions, 3)
               for call, positions in calls.values())


def _reads_as_array(fn, positions: list[int], depth: int) -> bool:
    """Whether ``fn`` (a helper) may read its parameters at ``positions`` as arrays."""
    function = function_ir(fn)
    if function.source != "source":
        return True  # no text to read
    params = [p.name for p in function.params if p.kind == "positional"]
    names = {params[k] for k in positions if k < len(params)}
    for name, role in _occurrences(function):
        if name not in names:
            continue
        if role[0] in ("base", "index", "loop-target", "loop-iter") or \
                (role[0] == "attr" and role[1] in INERT_ATTRIBUTES) or (role[0] == "arg" and role[1].op == "len"):
            return True
        inner = _helper(ir.called(role[1])) if role[0] == "arg" else None
        if inner is not None and (depth == 0 or _reads_as_array(inner, [role[2]], depth - 1)):
            return True
    return False


def _occurrences(function: ir.Function):
    """``(name, role)`` for each place a local's name appears in ``function`` (nested
    functions included), ``role`` saying where: ``("store",)``, ``("loop-target",)``,
    ``("loop-iter",)``, ``("attr", name)`` (``x.name``, a method's object included),
    ``("matmul",)``, ``("base", index)`` (``x[index]``, read or written), ``("index",)``,
    ``("arg", call, k)`` (the k-th positional argument of a call Prim) or ``("other",)``."""
    todo = [(p.default, ("other",)) for p in function.params] + [(s, None) for s in function.body]
    while todo:
        node, role = todo.pop()
        if isinstance(node, (tuple, list)):
            todo.extend((n, role) for n in node)
        elif isinstance(node, ir.Var):
            yield node.name, role or ("other",)
        elif hasattr(node, "__dataclass_fields__") and not isinstance(node, (ir.Const, ir.Global, ir.Unsupported,
                                                                               ir.Loc)):
            todo.extend(_parts(node))


def _parts(node) -> list:
    """The children of an IR node, each with the role a name has there."""
    other = ("other",)
    if isinstance(node, ir.Assign):
        return _target_parts(node.target, ("store",)) + _value_parts(node.value)
    if isinstance(node, ir.Loop):
        return _target_parts(node.target, ("loop-target",)) + [(node.iter, ("loop-iter",)), (node.cond, other),
                                                               (node.body, None), (node.orelse, None)]
    if isinstance(node, ir.Generator):
        return _target_parts(node.target, ("store",)) + [(node.iter, other), (node.conds, other)]
    if isinstance(node, (ir.Def, ir.Lambda)):
        return [(p.default, other) for p in node.function.params] + [(node.function.body, None)]
    if isinstance(node, ir.Prim):
        return _prim_parts(node)
    return [(getattr(node, f), other) for f in node.__dataclass_fields__ if f != "loc"]


def _prim_parts(p: ir.Prim) -> list:
    other, args = ("other",), p.args
    if p.op in ("attr", "setattr") or p.op.startswith("method."):
        name = p.op[len("method."):] if p.op.startswith("method.") else dict(p.params)["name"]
        rest = [(a, other) for a in args[1:]] if p.op != "setattr" else _value_parts(args[1])
        return [(args[0], ("attr", name))] + rest + [(p.keywords, other)]
    if p.op in ("getitem", "setitem"):
        rest = _value_parts(args[2]) if p.op == "setitem" else []
        return [(args[0], ("base", args[1])), (args[1], ("index",))] + rest
    if p.op == "matmul" and p.callee is None:
        return [(a, ("matmul",)) for a in args]
    if p.op == "walrus":
        return [(ir.Var(dict(p.params)["name"]), ("store",)), (args[0], other)]
    if p.op not in SYNTAX_OPS or p.callee is not None:  # a call: a local called, then its arguments
        head = 1 if p.op == "call" else 0
        return [(args[:head], other)] + [(a, ("arg", p, k)) for k, a in enumerate(args[head:])] + \
            [(p.keywords, other)]
    return [(args, other), (p.keywords, other)]


def _target_parts(target, role) -> list:
    if isinstance(target, ir.Unpack):
        return [part for item in target.items for part in _target_parts(item, role)]
    if isinstance(target, ir.Item):
        return [(target.base, ("base", target.index)), (target.index, ("index",))]
    if isinstance(target, ir.Field):
        return [(target.base, ("attr", target.name))]
    return [(target, role)]


def _value_parts(value) -> list:
    """An assigned value's parts: of ``x op= v``, only ``v`` (``x``'s read is the store's)."""
    if isinstance(value, ir.Prim) and ("inplace", True) in value.params:
        return [(value.args[1], ("other",))]
    return [(value, ("other",))]
