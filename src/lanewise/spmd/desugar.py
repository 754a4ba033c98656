"""A lane function's IR as the SPMD emitter (:mod:`.transform`) walks it: ``for``
over ``range`` as a ``while`` over a hidden counter, and constant operations folded
as CPython folds them.

The counter of the k-th ``for`` (in the order written) is ``_lw_k<k>``; the loop
keeps the ``for``'s place (:mod:`.uniform` answers by it).  ``x += e`` is already
``x = x + e`` in the IR (an ``inplace`` primitive, which the emitter evaluates the
same way).

Example:
    >>> from lanewise.lane.ir.printer import pretty
    >>> def lane(x):
    ...     for k in range(3):
    ...         x += -2 ** 2
    ...     return x
    >>> print(pretty(ir.LaneModule(prepared(lane), ())))
    lane lane(x):
      _lw_rs1 = 0
      _lw_re1 = 3
      _lw_stop1 = spmd.range(_lw_re1, _lw_rs1, _lw_re1, 1)
      _lw_k1 = spmd.range(_lw_rs1, _lw_rs1, _lw_re1, 1)
      while lt(_lw_k1, _lw_stop1):
        k = _lw_k1
        _lw_k1 = spmd.range(add(_lw_k1, 1), _lw_rs1, _lw_re1, 1)
        x = add(x, -4)
      return x
"""

from __future__ import annotations

import operator
from dataclasses import replace

from ..lane.ir import nodes as ir
from ..lane.ir.passes import unbound
from ..lane.ir.passes.walk import spliced, walk
from ..lane.ir.unparse import python_text
from .syntax import Unsupported, is_call, source_function, target_text, where

_FOLDED = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
           "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow, "lshift": operator.lshift,
           "rshift": operator.rshift, "bitor": operator.or_, "bitand": operator.and_, "bitxor": operator.xor,
           "matmul": operator.matmul, "neg": operator.neg, "pos": operator.pos, "invert": operator.invert,
           "not": operator.not_}


def prepared(fn) -> ir.Function:
    """The desugared IR of ``fn`` (from its text), refusing what the emitter never handles:
    parameters other than plain positional ones, ``global``/``nonlocal``, nested functions."""
    function = source_function(fn)
    if function.posonly or any(p.kind != "positional" for p in function.params):
        raise Unsupported(f"{fn.__qualname__} has *args, **kwargs, keyword-only or positional-only parameters")
    function = unbound.checked(replace(function, body=_Desugar().block(function.body)))
    for node in walk(function.body):
        if isinstance(node, ir.Unsupported) and node.what in ("a global statement", "a nonlocal statement"):
            raise Unsupported(f"{fn.__qualname__} declares global/nonlocal names")
    for node in walk(function.body):
        if isinstance(node, (ir.Def, ir.Lambda)) or (isinstance(node, ir.Unsupported) and node.what in (
                "a class", "a decorated nested def", "an async def")):
            raise Unsupported(f"{fn.__qualname__} defines a function or class inside the lane")
    return function


def folded(e: ir.Prim):
    """``e`` (an operator) as the constant CPython folds it to, when its operands are
    number constants and the result an int of at most 64 bits or a float (a wider
    int is refused: lane.refusals), else ``e``.

    Example:
        >>> at = ir.Loc("f.py", 1, 0)
        >>> folded(ir.Prim("pow", (ir.Const(2), ir.Const(63)), at))
        Const(value=9223372036854775808, type='int')
        >>> folded(ir.Prim("pow", (ir.Const(2), ir.Const(64)), at)).op  # beyond uint64: left to run time
        'pow'

    """
    if e.op not in _FOLDED or is_call(e) or not all(
            isinstance(a, ir.Const) and isinstance(a.value, (int, float, complex)) for a in e.args):
        return e
    values = [a.value for a in e.args]
    if e.op in ("pow", "lshift") and all(type(v) is int for v in values) and abs(values[0]) > 1 and values[1] > 128:
        return e  # CPython leaves a huge result unfolded (and computing it would take long)
    try:
        value = _FOLDED[e.op](*values)
    except Exception:  # noqa: BLE001 - 1 / 0 and friends: left to run time, as CPython does
        return e
    if isinstance(value, int) and not -2**63 <= value < 2**64:
        return e
    return ir.Const(value, type(value).__name__)


def int_literal(e):
    """The value of an integer literal (``3``, ``-1``), else None."""
    if isinstance(e, ir.Const) and type(e.value) is int:
        return e.value
    if isinstance(e, ir.Prim) and e.op == "neg" and not is_call(e):
        inner = int_literal(e.args[0])
        return None if inner is None else -inner
    return None


def _statements_inside(s) -> list:
    """The statement lists inside a statement the emitter refuses (a nested ``def``, a ``with``)."""
    if isinstance(s, ir.Def):
        return [s.function.body]
    if isinstance(s, ir.Unsupported):
        return [[p for p in s.parts if not isinstance(p, (ir.Handler, *_EXPRESSIONS))]]
    return []


_EXPRESSIONS = (ir.Var, ir.Const, ir.Global, ir.Prim, ir.Lambda, ir.Comp)


class _Desugar:
    """``for v in range(...)`` -> ``while`` over a hidden counter; constants folded."""

    def __init__(self):
        self.n = 0
        self.made: dict = {}  # id of an expression -> its folded form (a = b = v shares v: kept shared)

    def block(self, stmts) -> tuple:
        return spliced(stmts, self.stmt)

    def stmt(self, s):
        if isinstance(s, ir.Loop):
            return self.loop(s)
        if isinstance(s, ir.If):
            return replace(s, cond=self.expr(s.cond), then=self.block(s.then), orelse=self.block(s.orelse))
        if isinstance(s, ir.Assign):
            return replace(s, value=self.expr(s.value))
        if isinstance(s, ir.Do):
            if isinstance(s.expr, ir.Prim) and s.expr.op in ("setitem", "setattr") and isinstance(
                    s.expr.args[-1], ir.Prim) and dict(s.expr.args[-1].params).get("inplace"):
                target = s.expr.args[-1].args[0]  # x[i] += e: its value reads the target
                raise Unsupported(f"augmented assignment to {python_text(target)} at {where(s.loc)}")
            return replace(s, expr=self.expr(s.expr))
        if isinstance(s, ir.Exit) and s.value is not None:
            return replace(s, value=self.expr(s.value))
        if isinstance(s, ir.Assert):
            return replace(s, test=self.expr(s.test), msg=self.opt(s.msg))
        if isinstance(s, ir.Raise):
            return replace(s, exc=self.opt(s.exc), cause=self.opt(s.cause))
        if isinstance(s, ir.Try):  # refused by the emitter, its loops numbered as the others
            return replace(s, body=self.block(s.body), orelse=self.block(s.orelse), final=self.block(s.final),
                           handlers=tuple(replace(h, body=self.block(h.body)) for h in s.handlers))
        for part in _statements_inside(s):  # refused later, but what is refused here is said first
            self.block(part)
        return s

    def opt(self, e):
        return None if e is None else self.expr(e)

    def expr(self, e):
        if not isinstance(e, ir.Prim):
            return e
        if id(e) not in self.made:
            args = tuple(self.expr(a) for a in e.args)
            keywords = tuple((k, self.expr(v)) for k, v in e.keywords)
            changed = args != e.args or keywords != e.keywords
            self.made[id(e)] = folded(replace(e, args=args, keywords=keywords) if changed else e)
        return self.made[id(e)]

    def loop(self, s: ir.Loop):
        at = where(s.loc)
        if s.kind == "while":
            if s.orelse:
                raise Unsupported(f"a while ... else loop at {at}")
            return replace(s, cond=self.expr(s.cond), body=self.block(s.body))
        if s.orelse:
            raise Unsupported(f"a for ... else loop at {at}")
        it = s.iter
        if not (s.kind == "range" and isinstance(it, ir.Prim) and not it.keywords and 1 <= len(it.args) <= 3):
            raise Unsupported(f"a for loop over something other than range(...) at {at}")
        if not isinstance(s.target, ir.Var):
            raise Unsupported(f"a for loop with target {target_text(s.target)} at {at}")
        args = [self.expr(a) for a in it.args]
        start, stop = (ir.Const(0, "int"), args[0]) if len(args) == 1 else (args[0], args[1])
        step = args[2] if len(args) == 3 else ir.Const(1, "int")
        step_value = int_literal(step)
        if step_value is None or step_value == 0:
            raise Unsupported(f"a range with a step that is not a non-zero integer literal at {at}")
        self.n += 1
        k, e, rs, re_ = (ir.Var(f"_lw_{name}{self.n}") for name in ("k", "stop", "rs", "re"))

        def as_range(value):  # value as the type Numba's range(start, stop, step) yields
            return ir.Prim("spmd.range", (value, rs, re_, step), s.loc)

        init = [ir.Assign(rs, start, s.loc), ir.Assign(re_, stop, s.loc), ir.Assign(e, as_range(re_), s.loc),
                ir.Assign(k, as_range(rs), s.loc)]
        test = ir.Prim("lt" if step_value > 0 else "gt", (k, e), s.loc, type="bool")
        body = (ir.Assign(s.target, k, s.loc), ir.Assign(k, as_range(ir.Prim("add", (k, step), s.loc)), s.loc),
                *self.block(s.body))  # a nested for becomes a list of statements: flattened
        return [*init, ir.Loop("while", None, None, test, body, (), (), s.loc)]


