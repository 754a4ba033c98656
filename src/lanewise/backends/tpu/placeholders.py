"""The values a lane rebuilt from bytecode enters its block dispatch loop with.

Such a lane (and its derivative) is one ``while True`` over its basic blocks, its locals
first assigned inside it; each enters the loop as a placeholder of the structure the
body gives it (False at each leaf, None where it holds None), whose types the loop then
settles (:meth:`.lower._Lowering.settle`).

Example:
    >>> from lanewise.lane.ir import nodes as ir
    >>> at = ir.Loc("lane.py", 2, 0)
    >>> body = (ir.Assign(ir.Var("t"), ir.Prim("tuple", (ir.Var("x"), ir.Const(None, "None")), at), at),)
    >>> placeholders(body, {"t"}, {}, lambda e: None)
    {'t': (False, None)}
"""

from __future__ import annotations

import jax

from ...lane.ir import nodes as ir
from ...lane.ir.build import build_with_functions
from ...lane.ir.passes.walk import walk


def placeholders(body, names, functions, step) -> dict:
    """The placeholder each of ``names`` enters a bytecode lane's loop with: False, or a
    tuple of placeholders where the body assigns it a tuple (a lane returning ``a, b`` builds
    the tuple in one block and returns it from a local; a derivative gets ``(p, t)`` from a
    helper's derivative), so that the local keeps one structure on every path.
    ``functions``: the helpers by name, whose returns give a call's structure; ``step``:
    the Python function an ``lw.scan``'s first argument names."""
    values = _first_values(body)
    return {n: _shape(ir.Var(n), values, (functions, step), set()) for n in sorted(names)}


def _item(shape, path):
    """The structure at ``path`` inside ``shape`` (False where it is not a tuple that deep)."""
    for k in path:
        if not (isinstance(shape, tuple) and k < len(shape)):
            return False
        shape = shape[k]
    return shape


def _first_values(stmts) -> dict:
    """The value each local is first assigned in ``stmts``, as (value, path): the local is
    ``value``'s item at ``path`` (``a, b = pair`` binds ``b`` to ``(pair, (1,))``)."""
    values = {}

    def bind(target, value, path):
        if isinstance(target, ir.Var):
            values.setdefault(target.name, (value, path))
        elif isinstance(target, ir.Unpack) and target.star is None:
            for k, item in enumerate(target.items):
                bind(item, value, (*path, k))

    for node in walk(stmts):
        if isinstance(node, ir.Assign):
            bind(node.target, node.value, ())
    return values


def _shape(value, values, known, seen):
    """``value``'s tuple structure (False at each leaf), following locals through ``values``,
    literal indexes, helper calls to their first returned value and ``lw.scan`` to its
    carry and ys (``known``: the helpers and the scan step's resolver; ``seen``: what is
    followed already)."""
    if isinstance(value, ir.Prim) and value.op == "tuple":
        return tuple(_shape(a, values, known, seen) for a in value.args)
    if isinstance(value, ir.Const) and value.value is None:
        return None  # (carry, None): the None a rebuilt step returns, held in a local first
    if isinstance(value, ir.Var) and value.name in values and value.name not in seen:
        first, path = values[value.name]
        return _item(_shape(first, values, known, seen | {value.name}), path)
    if not isinstance(value, ir.Prim) or value.op in seen:
        return False
    if value.op == "getitem" and isinstance(value.args[1], ir.Const) and type(value.args[1].value) is int:
        return _item(_shape(value.args[0], values, known, seen), (value.args[1].value,))
    if value.op == "lw.scan" and len(value.args) >= 2 and not value.keywords:
        step = known[1](value.args[0])
        return _shape(value.args[1], values, known, seen), False if step is None else _scan_ys(step)
    helper = known[0].get(value.op[5:]) if value.op.startswith("call:") else None
    if helper is None:
        return False
    return _shape(_returned(helper), _first_values(helper.body), known, seen | {value.op})


def _returned(function: ir.Function):
    """The value ``function`` first returns (None when it returns none)."""
    return next((n.value for n in walk(function.body) if isinstance(n, ir.Exit) and n.kind == "return"
                 and n.value is not None), None)


def _scan_ys(step) -> object:
    """The placeholder of an ``lw.scan``'s ys: its structure where it is all None (a step
    returning ``(carry, None)``, or a derived step's ``(None, None)``: no ys, which a tile
    cannot hold), else False (stacked ys are not kept in a local)."""
    module = build_with_functions(step)[0]
    known = ({f.name: f for f in module.functions()}, lambda e: None)
    ys = _item(_shape(_returned(module.entry), _first_values(module.entry.body), known, set()), (1,))
    return ys if jax.tree.leaves(ys, is_leaf=lambda v: v is False) == [] else False
