"""``lw.scan`` in reverse mode: a scan written as the loop it is (a rewrite of the
lane IR), so the adjoint code (:mod:`.adjoint`) records, reverses and checkpoints
it like any loop.

``(a, b), _ = lw.scan(step, (a0, b0), xs)`` becomes::

    a, b = a0, b0
    for t in range(len(xs)):
        (a, b), y = step((a, b), xs[t])

and ``c, _ = lw.scan(step, c0, xs)`` the same with one number ``c``.  The step is
called as the scan calls it, so the lane computes what it computed.  Taken: a
carry that is a number or a flat tuple written in the lane (init and target),
``xs`` a name (an array, one element a step) or ``None`` with ``length``,
``reverse`` a constant, and ``ys`` unused.  Anything else is refused with the
reason (the adjoint code then leaves the lane to the tape, which refuses scans).

Example:
    >>> import lanewise as lw
    >>> from lanewise.lane.ir.build import function_ir
    >>> from lanewise.lane.ir.nodes import called
    >>> from .source import statement_lines
    >>> def step(c, x):
    ...     return c, x
    >>> def f(x, xs):
    ...     (a, b), _ = lw.scan(step, (x, 0.0), xs)
    ...     return a
    >>> rewritten = desugar(function_ir(f), lambda call: called(call) is lw.scan, "_q_")
    >>> print("\\n".join(statement_lines(rewritten.body)))
    a, b = (x, 0.0)
    for _q_t0 in range(len(xs)):
        (a, b), _q_y0 = step((a, b), xs[_q_t0])
    return a
"""

from __future__ import annotations

import builtins
import itertools
from dataclasses import replace

from ..lane.ir import nodes as ir
from ..lane.ir.carried import with_carried
from ..lane.ir.passes.walk import walk
from ..lane.ir.unparse import call_args
from .activity import helper as _helper
from .source import grouped, value_of

_NAMES = ("f", "init", "xs", "length", "reverse", "unroll")


class NotDesugared(Exception):
    """A scan the rewrite does not take; the message says why."""


def desugar(function: ir.Function, is_scan, pre: str) -> ir.Function:
    """``function`` (a new IR function) with each ``lw.scan`` assignment written as a loop;
    ``is_scan(call)`` tells a call of ``lw.scan``."""
    counter = itertools.count()
    read = {n.name for n in walk(function.body, reads=True) if isinstance(n, ir.Var)}
    fn = function.python_function()

    def block(statements) -> tuple:
        out: list = []
        for group in grouped(statements):
            s = group[0]
            if isinstance(s, ir.Assign) and _is_call(s.value) and is_scan(s.value):
                out += _loop(s if len(group) == 1 else None, next(counter), pre, read, fn)
                continue
            for s in group:
                out.append(nested(s))
        return tuple(out)

    def nested(s):
        if isinstance(s, ir.If):
            return replace(s, then=block(s.then), orelse=block(s.orelse))
        if isinstance(s, ir.Loop):
            return replace(s, body=block(s.body), orelse=block(s.orelse))
        if isinstance(s, ir.Try):
            return replace(s, body=block(s.body), orelse=block(s.orelse), final=block(s.final),
                           handlers=tuple(replace(h, body=block(h.body)) for h in s.handlers))
        if isinstance(s, ir.Def):
            return replace(s, function=replace(s.function, body=block(s.function.body)))
        if any(_is_call(n) and is_scan(n) for n in walk(s, opaque=(ir.Def,))):
            raise NotDesugared("lw.scan is taken in reverse mode only as an assignment, "
                               "(a, b), _ = lw.scan(step, (a0, b0), xs)")
        return s

    return with_carried(replace(function, body=block(function.body)))


def _is_call(e) -> bool:
    return isinstance(e, ir.Prim) and e.callee is not None


def _loop(node: ir.Assign | None, n: int, pre: str, read: set, fn) -> list:
    if node is None:
        raise NotDesugared("lw.scan's result is unpacked as carry, ys")
    call, at = node.value, node.loc
    args_in = call_args(call)
    if call.keywords and any(k not in _NAMES for k, _ in call.keywords) or len(args_in) > len(_NAMES):
        raise NotDesugared("lw.scan is called as lw.scan(f, init, xs, length, reverse, unroll)")
    args = dict(zip(_NAMES, args_in))
    args.update(dict(call.keywords))
    target = node.target
    if not (isinstance(target, ir.Unpack) and target.star is None and len(target.items) == 2):
        raise NotDesugared("lw.scan's result is unpacked as carry, ys")
    carry, ys = target.items
    if not isinstance(ys, ir.Var) or ys.name in read:
        raise NotDesugared("lw.scan's ys is used (reverse mode takes scans whose ys is unused: carry, _ = ...)")
    init = args["init"]
    init_tuple = isinstance(init, ir.Prim) and init.op == "tuple" and init.type == "tuple"
    if isinstance(carry, ir.Unpack):
        if not (carry.star is None and all(isinstance(e, ir.Var) for e in carry.items) and init_tuple
                and len(init.args) == len(carry.items)):
            raise NotDesugared("a tuple carry is written in the lane: (a, b), _ = lw.scan(step, (a0, b0), xs)")
    elif not isinstance(carry, ir.Var) or init_tuple:
        raise NotDesugared("the carry is a number, or a tuple written in the lane: (a, b), _ = lw.scan(...)")
    xs = args.get("xs")
    xs = None if isinstance(xs, ir.Const) and xs.value is None else xs
    if xs is not None and not isinstance(xs, ir.Var):
        raise NotDesugared("lw.scan's xs is a name (an array) in reverse mode")
    if xs is None and "length" not in args:
        raise NotDesugared("lw.scan without xs needs length=")
    backwards = args.get("reverse", ir.Const(False, "bool"))
    if not isinstance(backwards, ir.Const):
        raise NotDesugared("lw.scan's reverse= is a constant")
    t = ir.Var(f"{pre}t{n}")
    count = _builtin("len", (xs,), at, "int") if xs is not None else args["length"]
    one = ir.Const(1, "int")
    minus_one = ir.Prim("neg", (one,), at)
    bounds = (ir.Prim("sub", (count, one), at), minus_one, minus_one) if backwards.value else (count,)
    x = ir.Prim("getitem", (xs, t), at) if xs is not None else ir.Const(None, "None")
    value = carry if isinstance(carry, ir.Var) else ir.Prim("tuple", carry.items, at, type="tuple")
    step = ir.Assign(ir.Unpack((carry, ir.Var(f"{pre}y{n}"))), _step_call(args["f"], (value, x), at, fn), at)
    return [ir.Assign(carry, init, at),
            ir.Loop("range", t, _builtin("range", bounds, at), None, (step,), (), (), at)]


def _builtin(name: str, args: tuple, at: ir.Loc, kind: str | None = None) -> ir.Prim:
    return ir.Prim(name, args, at, type=kind, callee=ir.Callee(getattr(builtins, name), 0, name))


def _step_call(f, args: tuple, at: ir.Loc, fn) -> ir.Prim:
    """``f(carry, x)`` as the front end writes a call of what ``f`` names."""
    if not isinstance(f, ir.Global):
        return ir.Prim("call", (f, *args), at)
    written = f.written or f.name
    obj = value_of(fn, f)
    helper = _helper(obj)
    callee = ir.Callee(obj, written.count("."), written)
    return ir.Prim(f"call:{helper.__qualname__}" if helper is not None else f.name, args, at, callee=callee)
