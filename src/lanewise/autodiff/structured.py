"""``break``, ``continue`` and early ``return`` rewritten as flags: the structured
lane that reverse mode's adjoint code (:mod:`.adjoint`) is written from.

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
    >>> import ast
    >>> tree = ast.parse("def f(x):\\n    while x > 1.0:\\n        if x > 9.0:\\n            return x\\n"
    ...                  "        x = x / 2.0\\n    return x").body[0]
    >>> print(ast.unparse(structure(tree, "_q_")))  # doctest: +NORMALIZE_WHITESPACE
    def f(x):
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

import ast
import copy
import itertools


class NotStructured(Exception):
    """The lane has a form the rewrite does not take (the caller keeps the tape)."""


def structure(fdef: ast.FunctionDef, pre: str) -> ast.FunctionDef:
    """``fdef`` with its exits rewritten as flags (a copy; ``fdef`` is unchanged)."""
    body = list(fdef.body)
    while body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    rewriter = _Rewriter(pre)
    returns = [n for s in body for n in _walk(s) if isinstance(n, ast.Return)]
    if not body or not _always_returns(body) or any(r.value is None for r in returns):
        raise NotStructured("a path through the lane ends without returning a value")
    if len(returns) == 1 and returns[0] is body[-1]:
        new = rewriter.block(body[:-1], None) + [body[-1]]
    else:
        if any(isinstance(r.value, (ast.Tuple, ast.List)) for r in returns):
            raise NotStructured("an early return of a tuple")
        start = [_assign(rewriter.returned, ast.Constant(False), body[0]),
                 _assign(rewriter.result, ast.Constant(0.0), body[0])]
        new = start + rewriter.block(body, None) + [ast.copy_location(ast.Return(_load(rewriter.result)), body[-1])]
    out = copy.copy(fdef)
    out.body = new
    return ast.fix_missing_locations(out)


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
            if isinstance(statement, (ast.Return, ast.Break, ast.Continue)):
                return out  # what follows is unreachable
            flags = self._flags(_exits(statement), loop)
            rest = statements[i + 1:]
            if flags and rest:
                guarded = self.block(rest, loop)
                out.append(ast.copy_location(ast.If(_none_of(flags), guarded, []), rest[0]))
                return out
        return out

    def _flags(self, exits: set, loop) -> list[str]:
        flags = [self.returned] if "return" in exits else []
        if loop is not None:
            flags += [loop[0]] if "break" in exits else []
            flags += [loop[1]] if "continue" in exits else []
        return flags

    def statement(self, node, loop) -> list:
        if isinstance(node, ast.Return):
            return [_assign(self.result, node.value, node), _assign(self.returned, ast.Constant(True), node)]
        if isinstance(node, ast.Break):
            return [_assign(loop[0], ast.Constant(True), node)]
        if isinstance(node, ast.Continue):
            return [_assign(loop[1], ast.Constant(True), node)]
        if isinstance(node, ast.If):
            new = copy.copy(node)
            new.body = self.block(node.body, loop) or [ast.copy_location(ast.Pass(), node)]
            new.orelse = self.block(node.orelse, loop)
            return [new]
        if isinstance(node, (ast.While, ast.For)):
            return self._loop(node)
        if isinstance(node, (ast.With, ast.Try, ast.Match, ast.AsyncFor, ast.AsyncWith)) \
                and _exits(node):
            raise NotStructured(f"an exit inside {type(node).__name__}")
        return [node]

    def _loop(self, node) -> list:
        if node.orelse:
            raise NotStructured("a loop with an else clause")
        inner = _exits_of_body(node.body)
        if not inner:
            new = copy.copy(node)
            new.body = self.block(node.body, None) or [ast.copy_location(ast.Pass(), node)]
            return [new]
        n = next(self.counter)
        broke, skipped = f"{self.pre}broke{n}", f"{self.pre}skipped{n}"
        loop = (broke, skipped)
        stop = self._flags(inner, loop)
        before = [_assign(broke, ast.Constant(False), node)] if "break" in inner else []
        top = [_assign(skipped, ast.Constant(False), node)] if "continue" in inner else []
        stop = [f for f in stop if f != skipped]  # a continue ends the iteration, not the loop
        if isinstance(node, ast.While):
            test = _and([_not(f) for f in stop] + [node.test])
            body = top + self.block(node.body, loop)
            return before + [ast.copy_location(ast.While(test, body or [ast.Pass()], []), node)]
        return before + self._range_loop(node, n, stop, top, loop)

    def _range_loop(self, node, n, stop, top, loop) -> list:
        """``for t in range(a, b, s)`` as a while over the trip count."""
        call = node.iter
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "range"
                and 1 <= len(call.args) <= 3 and not call.keywords):
            raise NotStructured("an exit from a for loop that is not over range(...)")
        args = list(call.args)
        start, stop_at, step = range_bounds(args, ast.Constant(0), ast.Constant(1))
        names = [f"{self.pre}{what}{n}" for what in ("start", "stop", "step", "trips", "trip")]
        first, last, stride, trips, trip = names
        setup = [_assign(first, start, node), _assign(last, stop_at, node), _assign(stride, step, node),
                 _assign(trips, _call(f"{self.pre}ad.trips", [_load(first), _load(last), _load(stride)]), node),
                 _assign(trip, ast.Constant(0), node)]
        value = ast.BinOp(_load(first), ast.Add(), ast.BinOp(_load(trip), ast.Mult(), _load(stride)))
        head = [ast.copy_location(ast.Assign([node.target], value), node),
                _assign(trip, ast.BinOp(_load(trip), ast.Add(), ast.Constant(1)), node)]
        test = _and([_not(f) for f in stop] + [ast.Compare(_load(trip), [ast.Lt()], [_load(trips)])])
        body = head + top + self.block(node.body, loop)
        return setup + [ast.copy_location(ast.While(test, body, []), node)]


def range_bounds(args: list, zero, one) -> tuple:
    """``(start, stop, step)`` of ``range(*args)``, with ``zero`` and ``one`` for those left out."""
    return (zero, args[0], one) if len(args) == 1 else tuple((args + [one])[:3])


# ----------------------------------------------------------------------------- what a statement may do


def _walk(node, into_loops: bool = True):
    """The nodes of a statement, not entering nested functions (nor loops, if asked)."""
    yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if not into_loops and isinstance(child, (ast.While, ast.For, ast.AsyncFor)):
            yield from (n for n in _walk(child) if isinstance(n, ast.Return))
            continue
        yield from _walk(child, into_loops)


def _exits(node) -> set:
    """What ``node`` may do to the code around it: return, or break/continue the enclosing loop."""
    if isinstance(node, (ast.While, ast.For, ast.AsyncFor)):  # its breaks are its own
        return {"return"} if any(isinstance(n, ast.Return) for n in _walk(node)) else set()
    kinds = {ast.Return: "return", ast.Break: "break", ast.Continue: "continue"}
    return {kinds[type(n)] for n in _walk(node, into_loops=False) if type(n) in kinds}


def _exits_of_body(statements) -> set:
    return set().union(*(_exits(s) for s in statements))


def _always_returns(statements) -> bool:
    for s in statements:
        if isinstance(s, ast.Return):
            return True
        if isinstance(s, ast.If) and s.orelse and _always_returns(s.body) and _always_returns(s.orelse):
            return True
    return False


# ----------------------------------------------------------------------------- building nodes


def _load(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())


def _assign(name: str, value, where) -> ast.Assign:
    return ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], value), where)


def _call(dotted: str, args) -> ast.Call:
    module, attr = dotted.rsplit(".", 1)
    return ast.Call(ast.Attribute(_load(module), attr, ast.Load()), args, [])


def _not(flag: str):
    return ast.UnaryOp(ast.Not(), _load(flag))


def _and(tests):
    return tests[0] if len(tests) == 1 else ast.BoolOp(ast.And(), tests)


def _none_of(flags):
    return _and([_not(f) for f in flags])
