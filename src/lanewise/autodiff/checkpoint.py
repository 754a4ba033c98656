"""Which loops reverse mode can checkpoint, and what a checkpoint holds.

With a memory budget (``lw.config.reverse_memory``), the adjoint code
(:mod:`.adjoint`) does not record every iteration of a lane's outermost loops:
it keeps the loop's *state* every few iterations and, in the reverse sweep,
recomputes one segment of iterations at a time from its checkpoint, recording
that segment only.  The state is what an iteration reads that an earlier one
(or the code before the loop) wrote: the loop's live-in locals.  A checkpoint
stores them as float64 on the lane's value stack, so each must be a number
(``int``, ``bool`` or float): this module decides that from the lane IR, and a
loop whose state it cannot prove scalar is recorded in full as without a budget.

A loop is checkpointed when:

* it is a ``while`` or a ``for`` over ``range(...)``, not inside another loop;
* it stores into no array element or attribute (recomputing it must not see
  its own later writes);
* every live-in local is assigned before the loop on every path (or is an
  argument) and is a number.

Example:
    >>> from lanewise.lane.ir.build import build
    >>> def f(x, n):
    ...     s = 0.0
    ...     k = 0
    ...     while k < n:
    ...         t = s * x
    ...         s = t + 1.0
    ...         k += 1
    ...     return s
    >>> function = build(f).entry
    >>> state(function, function.body[2], scalar_names(function, {"x"}, set()))
    ['k', 's']
"""

from __future__ import annotations

from ..lane.ir import nodes as ir
from ..lane.ir.passes.walk import walk
from . import intrinsics
from .activity import SYNTAX_OPS, statements
from .rules import is_zero, rule_for


def _hashable_rule(obj) -> bool:
    try:
        return rule_for(obj) is not None or is_zero(obj)
    except TypeError:
        return False


#: Operators whose result is a number when their operands are.
_NUMBER_OPS = frozenset({"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "bitor",
                         "bitand", "bitxor", "matmul", "neg", "pos", "not", "invert", "eq", "ne", "lt", "le", "gt",
                         "ge", "is", "isnot", "in", "notin", "and", "or", "ifexp"})


def scalar_names(function: ir.Function, scalars: set, arrays: set, resolve=ir.called,
                    checked=lambda call: False) -> set:
    """The locals that only ever hold numbers: every assignment to them is a number
    (a greatest fixpoint from the assigned names, arguments other than ``scalars`` unknown).
    ``resolve(call)``: the object a call Prim calls; ``checked(call)``: whether the names a
    call's tuple is unpacked into are checked to be numbers where the lane runs (the
    adjoint code checks a helper's)."""
    params = _params(function)
    assigned: dict[str, list] = {}
    for s in statements(function.body):
        for name, value in _assignments(s):
            assigned.setdefault(name, []).append(value)
    names = (set(assigned) - params) | (set(scalars) & params)
    changed = True
    while changed:
        changed = False
        for name in sorted(names & set(assigned)):
            if not all(v == "int" or (checked(v[1]) if isinstance(v, tuple) else _number(v, names, arrays, resolve))
                       for v in assigned[name]):
                names.discard(name)
                changed = True
    return names


def _params(function: ir.Function) -> set:
    return {p.name for p in function.params if p.kind == "positional"}


def _assignments(s):
    """``(name, value or "int")`` for each name a statement binds (a value None: unknown;
    ``("unpacked", call)``: an item of the tuple a call returns)."""
    if isinstance(s, ir.Assign):
        yield from _bound(s.target, s.value)
    elif isinstance(s, ir.Loop) and s.target is not None:
        if s.kind == "range" and isinstance(s.target, ir.Var):
            yield s.target.name, "int"
        else:
            yield from ((name, None) for name in _names(s.target))


def _bound(target, value):
    if isinstance(target, ir.Var):
        yield target.name, value
    elif isinstance(target, ir.Unpack):
        paired = isinstance(value, ir.Prim) and value.op in ("tuple", "list") and value.callee is None \
            and len(value.args) == len(target.items)
        unpacked = value if isinstance(value, tuple) else ("unpacked", value) if _is_call(value) else None
        for k, item in enumerate(target.items):
            yield from _bound(item, None if k == target.star else value.args[k] if paired else unpacked)


def _is_call(e) -> bool:
    return isinstance(e, ir.Prim) and (e.op not in SYNTAX_OPS or e.callee is not None)


def _number(e, names: set, arrays: set, resolve) -> bool:
    """Whether an IR expression is a number, given the names known to be numbers."""
    if isinstance(e, ir.Const):
        return isinstance(e.value, (bool, int, float))
    if isinstance(e, (ir.Var, ir.Global)):
        return e.name in names
    if not isinstance(e, ir.Prim):
        return False
    if e.op in _NUMBER_OPS and e.callee is None:
        return all(_number(a, names, arrays, resolve) for a in e.args)
    if e.op == "getitem":  # an element of a differentiated 1-D array
        return isinstance(e.args[0], ir.Var) and e.args[0].name in arrays and _number(e.args[1], names, arrays,
                                                                                       resolve)
    if _is_call(e) and not e.keywords:
        obj = resolve(e)
        known = obj is not None and (_hashable_rule(obj) or obj in (intrinsics.trips, intrinsics.stop_gradient))
        args = e.args[1:] if e.op == "call" or e.op.startswith("method.") else e.args
        return known and all(_number(a, names, arrays, resolve) for a in args)
    return False


def state(function: ir.Function, loop: ir.Loop, scalars: set) -> list[str] | None:
    """The sorted live-in locals a checkpoint of ``loop`` (a loop of ``function``) holds,
    or None when the loop cannot be checkpointed."""
    if _stores_into_items(loop) or loop.kind == "iter":
        return None
    params = _params(function)
    assigned_anywhere = {name for s in statements(function.body) for name, _ in _assignments(s)}
    live = _live_in(loop) & (params | assigned_anywhere)
    live -= params - assigned_anywhere  # arguments never rebound do not change
    before = _assigned_before(function.body, loop) | params
    if not live <= before or not live <= scalars:
        return None
    return sorted(live)


def _stores_into_items(loop: ir.Loop) -> bool:
    """Whether the loop writes an array element or attribute, or unpacks into a starred name."""
    for n in walk(loop):
        if isinstance(n, ir.Prim) and n.op in ("setitem", "setattr") and n.callee is None:
            return True
        if isinstance(n, (ir.Item, ir.Field)) or (isinstance(n, ir.Unpack) and n.star is not None):
            return True
    return False


def _live_in(loop: ir.Loop) -> set:
    """Names an iteration may read before writing them (conservative: the first top-level
    statement naming one must be a plain assignment to it that does not read it)."""
    live = _reads(loop.cond)
    killed = _names(loop.target) if loop.target is not None else set()
    for s in loop.body:
        live |= _reads(s) - killed
        if isinstance(s, ir.Assign) and ("inplace", True) not in getattr(s.value, "params", ()):
            killed |= _names(s.target) - live
        elif not isinstance(s, ir.Do):
            live |= _names(s) - killed
    return live


def _assigned_before(block, loop) -> set:
    """Names every path assigns before ``loop`` (straight-line assignments on the way to it)."""
    names: set = set()
    for s in block:
        if s is loop:
            return names
        for child in (s.then, s.orelse) if isinstance(s, ir.If) else ():
            if any(n is loop for n in walk(child)):
                return names | _assigned_before(child, loop)
        if isinstance(s, ir.Assign):
            names |= {n for n, _ in _assignments(s)}
    return names


def _reads(node) -> set:
    """The names ``node`` reads (not those it binds)."""
    out = set()
    for n in walk(node, reads=True):
        if isinstance(n, (ir.Var, ir.Global)) and "." not in n.name:
            out.add(n.name)
    return out


def _names(node) -> set:
    """Every name in ``node``, read or bound."""
    out = set()
    for n in walk(node):
        if isinstance(n, (ir.Var, ir.Global)) and "." not in n.name:
            out.add(n.name)
        elif isinstance(n, ir.Prim) and n.op == "walrus":
            out.add(dict(n.params)["name"])
    return out
