"""``break``, ``continue`` and early ``return`` rewritten as flags: the structured
lane that reverse mode's adjoint code (:mod:`.adjoint`) is written from (a rewrite
of the lane IR).

The adjoint of a block is the adjoint of its statements in reverse order, the
adjoint of an ``if`` is the adjoint of the branch taken, and the adjoint of a
loop is its body's adjoint run once per iteration, backwards.  An exit in the
middle of a block breaks that picture (the last iteration ran only part of its
body), so exits become assignments to flags, and what follows an exit is
guarded by them:

* ``return e`` before the end: ``result = e; returned = True``, and the lane
  ends with ``return result``;
* ``break``: ``broke = True``, and the loop's test starts with ``not broke``
  (Python never evaluates a loop's test after a ``break``; ``and`` keeps that);
* ``continue``: ``skipped = True``, reset at the top of each iteration;
* the statements after one that may exit run under ``if not (flags)``;
* a ``for`` over ``range`` that may exit becomes a ``while`` over its trip
  count (the range's arguments are evaluated once, as Python does).

The lane computes exactly what it did: the rewritten code runs the same
statements in the same order.

Example:
    >>> from lanewise.lane.ir.build import function_ir
    >>> from .source import statement_lines
    >>> def f(x):
    ...     while x > 1.0:
    ...         if x > 9.0:
    ...             return x
    ...         x = x / 2.0
    ...     return x
    >>> print("\\n".join(statement_lines(structure(function_ir(f), "_q_").body)))
    _q_returned = False
    _q_result = 0.0
    while not _q_returned and x > 1.0:
        if x > 9.0:
            _q_result = x
            _q_returned = True
        if not _q_returned:
            x = x / 2.0
    if not _q_returned:
        _q_result = x
        _q_returned = True
    return _q_result
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from ..lane.ir import nodes as ir
from ..lane.ir.carried import with_carried
from ..lane.ir.passes.walk import walk


class NotStructured(Exception):
    """The lane has a form the rewrite does not take (the caller keeps the tape)."""


def structure(function: ir.Function, pre: str) -> ir.Function:
    """``function`` with its exits rewritten as flags (a new IR function; ``function`` is unchanged)."""
    body = list(function.body)
    rewriter = _Rewriter(pre)
    returns = [n for s in body for n in _walk(s) if _is_exit(n, "return")]
    if not body or not _always_returns(body) or any(r.value is None for r in returns):
        raise NotStructured("a path through the lane ends without returning a value")
    if len(returns) == 1 and returns[0] is body[-1]:
        new = rewriter.block(body[:-1], None) + [body[-1]]
    else:
        if any(isinstance(r.value, ir.Prim) and r.value.op in ("tuple", "list") and r.value.type == r.value.op
               for r in returns):
            raise NotStructured("an early return of a tuple")
        at = body[0].loc
        start = [_assign(rewriter.returned, _const(False), at), _assign(rewriter.result, _const(0.0), at)]
        new = start + rewriter.block(body, None) + [ir.Exit("return", ir.Var(rewriter.result), body[-1].loc)]
    return with_carried(replace(function, body=tuple(new)))


class _Rewriter:
    def __init__(self, pre: str):
        self.pre = pre
        self.returned, self.result = f"{pre}returned", f"{pre}result"
        self.counter = itertools.count()

    def block(self, statements, loop) -> list:
        """``loop``: the (broke, skipped) flags of the innermost loop, or None."""
        out = []
        for i, statement in enumerate(statements):
            out.extend(self.statement(statement, loop))
            if isinstance(statement, ir.Exit):
                return out  # what follows is unreachable
            flags = self._flags(_exits(statement), loop)
            rest = statements[i + 1:]
            if flags and rest:
                guarded = self.block(rest, loop)
                out.append(ir.If(_none_of(flags, rest[0].loc), tuple(guarded), (), rest[0].loc))
                return out
        return out

    def _flags(self, exits: set, loop) -> list[str]:
        flags = [self.returned] if "return" in exits else []
        if loop is not None:
            flags += [loop[0]] if "break" in exits else []
            flags += [loop[1]] if "continue" in exits else []
        return flags

    def statement(self, node, loop) -> list:
        if _is_exit(node, "return"):
            return [_assign(self.result, node.value, node.loc), _assign(self.returned, _const(True), node.loc)]
        if _is_exit(node, "break"):
            return [_assign(loop[0], _const(True), node.loc)]
        if _is_exit(node, "continue"):
            return [_assign(loop[1], _const(True), node.loc)]
        if isinstance(node, ir.If):
            return [replace(node, then=tuple(self.block(node.then, loop)), orelse=tuple(self.block(node.orelse, loop)))]
        if isinstance(node, ir.Loop):
            return self._loop(node)
        if isinstance(node, (ir.Try, ir.Unsupported)) and _exits(node):
            raise NotStructured(f"an exit inside {_described(node)}")
        return [node]

    def _loop(self, node) -> list:
        if node.orelse:
            raise NotStructured("a loop with an else clause")
        inner = _exits_of_body(node.body)
        if not inner:
            return [replace(node, body=tuple(self.block(node.body, None)))]
        n = next(self.counter)
        broke, skipped = f"{self.pre}broke{n}", f"{self.pre}skipped{n}"
        loop = (broke, skipped)
        stop = self._flags(inner, loop)
        before = [_assign(broke, _const(False), node.loc)] if "break" in inner else []
        top = [_assign(skipped, _const(False), node.loc)] if "continue" in inner else []
        stop = [f for f in stop if f != skipped]  # a continue ends the iteration, not the loop
        if node.kind == "while":
            test = _and([_not(f, node.loc) for f in stop] + [node.cond], node.loc)
            body = top + self.block(node.body, loop)
            return before + [_while(test, body, node.loc)]
        return before + self._range_loop(node, n, stop, top, loop)

    def _range_loop(self, node, n, stop, top, loop) -> list:
        """``for t in range(a, b, s)`` as a while over the trip count."""
        call, at = node.iter, node.loc
        if not (node.kind == "range" and call.op == "range" and 1 <= len(call.args) <= 3 and not call.keywords):
            raise NotStructured("an exit from a for loop that is not over range(...)")
        start, stop_at, step = range_bounds(list(call.args), _const(0), _const(1))
        first, last, stride, trips, trip = (ir.Var(f"{self.pre}{what}{n}")
                                            for what in ("start", "stop", "step", "trips", "trip"))
        ad = ir.Global(f"{self.pre}ad", "builtin")
        setup = [_assign(first.name, start, at), _assign(last.name, stop_at, at), _assign(stride.name, step, at),
                 _assign(trips.name, ir.Prim("method.trips", (ad, first, last, stride), at), at),
                 _assign(trip.name, _const(0), at)]
        value = ir.Prim("add", (first, ir.Prim("mul", (trip, stride), at)), at)
        head = [ir.Assign(node.target, value, at), _assign(trip.name, ir.Prim("add", (trip, _const(1)), at), at)]
        test = _and([_not(f, at) for f in stop] + [ir.Prim("lt", (trip, trips), at, type="bool")], at)
        body = head + top + self.block(node.body, loop)
        return setup + [_while(test, body, at)]


def range_bounds(args: list, zero, one) -> tuple:
    """``(start, stop, step)`` of ``range(*args)``, with ``zero`` and ``one`` for those left out."""
    return (zero, args[0], one) if len(args) == 1 else tuple((args + [one])[:3])


# ----------------------------------------------------------------------------- what a statement may do


def _is_exit(node, kind: str) -> bool:
    return isinstance(node, ir.Exit) and node.kind == kind


def _walk(node, into_loops: bool = True):
    """The statements and expressions of a statement, not entering nested functions (nor
    loops, if asked: only their returns)."""
    for n in walk(node, opaque=(ir.Def, ir.Lambda) if into_loops else (ir.Def, ir.Lambda, ir.Loop)):
        if not into_loops and isinstance(n, ir.Loop) and n is not node:
            yield from (r for r in _walk(n) if _is_exit(r, "return"))
        else:
            yield n


def _exits(node) -> set:
    """What ``node`` may do to the code around it: return, or break/continue the enclosing loop."""
    if isinstance(node, ir.Loop):  # its breaks are its own
        return {"return"} if any(_is_exit(n, "return") for n in _walk(node)) else set()
    return {n.kind for n in _walk(node, into_loops=False) if isinstance(n, ir.Exit)}


def _exits_of_body(statements) -> set:
    return set().union(*(_exits(s) for s in statements))


def _always_returns(statements) -> bool:
    for s in statements:
        if _is_exit(s, "return"):
            return True
        if isinstance(s, ir.If) and s.orelse and _always_returns(s.then) and _always_returns(s.orelse):
            return True
    return False


def _described(node) -> str:
    return node.what if isinstance(node, ir.Unsupported) else "Try"


# ----------------------------------------------------------------------------- building nodes


def _const(value) -> ir.Const:
    return ir.Const(value, type(value).__name__)


def _assign(name: str, value, at: ir.Loc) -> ir.Assign:
    return ir.Assign(ir.Var(name), value, at)


def _while(test, body: list, at: ir.Loc) -> ir.Loop:
    return ir.Loop("while", None, None, test, tuple(body), (), (), at)


def _not(flag: str, at: ir.Loc) -> ir.Prim:
    return ir.Prim("not", (ir.Var(flag),), at, type="bool")


def _and(tests, at: ir.Loc):
    return tests[0] if len(tests) == 1 else ir.Prim("and", tuple(tests), at)


def _none_of(flags, at: ir.Loc):
    return _and([_not(f, at) for f in flags], at)
