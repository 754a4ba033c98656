"""Which loops reverse mode can checkpoint, and what a checkpoint holds.

With a memory budget (``lw.config.reverse_memory``), the adjoint code
(:mod:`.adjoint`) does not record every iteration of a lane's outermost loops:
it keeps the loop's *state* every few iterations and, in the reverse sweep,
recomputes one segment of iterations at a time from its checkpoint, recording
that segment only.  The state is what an iteration reads that an earlier one
(or the code before the loop) wrote: the loop's live-in locals.  A checkpoint
stores them as float64 on the lane's value stack, so each must be a number
(``int``, ``bool`` or float): this module decides that from the source, and a
loop whose state it cannot prove scalar is recorded in full as without a budget.

A loop is checkpointed when:

* it is a ``while`` or a ``for`` over ``range(...)``, not inside another loop;
* it stores into no array element or attribute (recomputing it must not see
  its own later writes);
* every live-in local is assigned before the loop on every path (or is an
  argument) and is a number.

Example:
    >>> import ast
    >>> tree = ast.parse("def f(x, n):\\n    s = 0.0\\n    k = 0\\n    while k < n:\\n"
    ...                  "        t = s * x\\n        s = t + 1.0\\n        k += 1\\n    return s").body[0]
    >>> loop = tree.body[2]
    >>> state(tree, loop, scalar_names(tree, {"x"}, set(), lambda node: None))
    ['k', 's']
"""

from __future__ import annotations

import ast

from . import intrinsics
from .rules import is_zero, rule_for


def scalar_names(fdef, scalars: set, arrays: set, resolve, checked=lambda call: False) -> set:
    """The locals that only ever hold numbers: every assignment to them is a number
    (a greatest fixpoint from the assigned names, arguments other than ``scalars`` unknown).
    ``checked(call)``: whether the names a call's tuple is unpacked into are checked to
    be numbers where the lane runs (the adjoint code checks a helper's)."""
    params = {a.arg for a in fdef.args.args}
    assigned: dict[str, list] = {}
    for node in ast.walk(fdef):
        for name, value in _assignments(node):
            assigned.setdefault(name, []).append(value)
    names = (set(assigned) - params) | (set(scalars) & params)
    changed = True
    while changed:
        changed = False
        for name in sorted(names & set(assigned)):
            if not all(v == "int" or (checked(v[1]) if isinstance(v, tuple) else _scalar(v, names, arrays, resolve))
                       for v in assigned[name]):
                names.discard(name)
                changed = True
    return names


def _assignments(node):
    """``(name, value or "int")`` for each name a statement binds."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield from _bound(target, node.value)
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        yield from _bound(node.target, node.value)
    elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        yield node.target.id, ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op, node.value)
    elif isinstance(node, ast.For):
        is_range = isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Name) \
            and node.iter.func.id == "range"
        for name in (n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)):
            yield name, "int" if is_range and isinstance(node.target, ast.Name) else None


def _bound(target, value):
    if isinstance(target, ast.Name):
        yield target.id, value
    elif isinstance(target, (ast.Tuple, ast.List)):
        paired = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
        for k, element in enumerate(target.elts):
            unpacked = value if isinstance(value, tuple) else ("unpacked", value) if isinstance(value, ast.Call) \
                else None
            yield from _bound(element, value.elts[k] if paired else unpacked)
    elif isinstance(target, ast.Starred):
        yield from _bound(target.value, None)


def _scalar(node, names: set, arrays: set, resolve) -> bool:
    """Whether an expression is a number, given the names known to be numbers."""
    if node is None:
        return False
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (bool, int, float))
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp)):
        return all(_scalar(c, names, arrays, resolve) for c in ast.iter_child_nodes(node)
                   if isinstance(c, ast.expr))
    if isinstance(node, ast.Subscript):  # an element of a differentiated 1-D array
        return isinstance(node.value, ast.Name) and node.value.id in arrays and \
            _scalar(node.slice, names, arrays, resolve)
    if isinstance(node, ast.Call) and not node.keywords:
        obj = resolve(node.func)
        known = obj is not None and (_hashable_rule(obj) or obj in (intrinsics.trips, intrinsics.stop_gradient))
        return known and all(_scalar(a, names, arrays, resolve) for a in node.args)
    return False


def _hashable_rule(obj) -> bool:
    try:
        return rule_for(obj) is not None or is_zero(obj)
    except TypeError:
        return False


def state(fdef, loop, scalars: set) -> list[str] | None:
    """The sorted live-in locals a checkpoint of ``loop`` holds, or None when the loop
    cannot be checkpointed."""
    if any(isinstance(n, (ast.Subscript, ast.Attribute, ast.Starred)) and isinstance(n.ctx, ast.Store)
           for n in ast.walk(loop)):
        return None
    if isinstance(loop, ast.For) and not _is_range(loop):
        return None
    params = {a.arg for a in fdef.args.args}
    assigned_anywhere = {name for node in ast.walk(fdef) for name, _ in _assignments(node)}
    locals_ = params | assigned_anywhere
    live = _live_in(loop) & locals_
    live -= params - assigned_anywhere  # arguments never rebound do not change
    before = _assigned_before(fdef.body, loop) | params
    if not live <= before or not live <= scalars:
        return None
    return sorted(live)


def _is_range(loop) -> bool:
    return isinstance(loop.iter, ast.Call) and isinstance(loop.iter.func, ast.Name) and loop.iter.func.id == "range"


def _reads(node) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _live_in(loop) -> set:
    """Names an iteration may read before writing them (conservative: the first top-level
    statement naming one must be a plain assignment to it that does not read it)."""
    live = _reads(loop.test) if isinstance(loop, ast.While) else set()
    killed = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)} if isinstance(loop, ast.For) \
        else set()
    for statement in loop.body:
        reads = _reads(statement) - killed
        live |= reads
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            killed |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)} - live
        elif not isinstance(statement, ast.Expr):
            live |= {n.id for n in ast.walk(statement) if isinstance(n, ast.Name)} - killed
    return live


def _assigned_before(block, loop) -> set:
    """Names every path assigns before ``loop`` (straight-line assignments on the way to it)."""
    names: set = set()
    for statement in block:
        if statement is loop:
            return names
        for child in (statement.body, statement.orelse) if isinstance(statement, ast.If) else ():
            if any(n is loop for s in child for n in ast.walk(s)):
                return names | _assigned_before(child, loop)
        if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            names |= {n for n, _ in _assignments(statement)}
    return names
