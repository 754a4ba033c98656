"""Reverse mode as adjoint code: a lane's IR -> a lane that records the partial
derivatives it will need on a value stack, then runs its statements' adjoints backwards.

This is what ``lw.jacrev`` and ``lw.vjp`` generate when the lane allows it (see
:func:`ReverseMode`; the tape of :mod:`.reverse` takes the rest).  For each
assignment ``x = e``, the forward sweep computes ``e`` and its partial
derivatives with respect to the active values it reads (the rules of
:mod:`.rules`, pre-accumulated over the expression), and pushes those that are
not constants.  The reverse sweep is the lane's statements in reverse order,
each ``x = e`` becoming ``g = x̄; x̄ = 0; v̄ += ∂e/∂v · g`` for every ``v`` it read,
with adjoints in locals (registers) and partials popped off the stack:

* an ``if`` pushes which branch it took, and the reverse sweep takes the same
  branch;
* a loop pushes its trip count, and the reverse sweep runs the body's adjoint
  that many times, so data-dependent ``while`` loops need no bound;
* ``break``, ``continue`` and early ``return`` are first rewritten as flags
  (:mod:`.structured`), so every loop iteration runs a whole body;
* a read ``w[i]`` of a differentiated 1-D array also pushes ``i``;
* a helper's partials come from its forward-mode version (one unit tangent per
  active argument, items of a tuple written in the call included), and its
  tuple result is taken when unpacked into names or indexed;
* ``lw.scan`` is first written as its loop (:mod:`.scans`);
* with a memory budget, outermost loops keep checkpoints instead of records
  (:mod:`.checkpoint`).

What is stored, per lane: one float64 per non-constant partial derivative of
each active assignment executed, one per ``if`` on a path that records, one per
loop, one per array index.  The stack starts at 4096 values (32 KB) and doubles as it
grows; it is freed when the lane returns.  Nothing is recorded for the control
flow's tests, for inactive values, or for constant partials (``acc += e``
pushes nothing for ``acc``).

Example:
    >>> import math, numpy as np
    >>> from .forward import Plan
    >>> def f(x, w):
    ...     s = 0.0
    ...     for i in range(w.shape[0]):
    ...         s = s + math.sin(w[i] * x)
    ...     return s
    >>> plan = Plan(k=1, seeds=((1.0, 0.0), (0.0, 1.0)), finish="jacrev", single=False, transform="lw.jacrev",
    ...             mode="reverse")
    >>> dx, dw = AdjointEmitter(f, plan).function()(0.5, np.array([1.0, 2.0]))
    >>> np.allclose(dw, 0.5 * np.cos(0.5 * np.array([1.0, 2.0])))
    True
"""

from __future__ import annotations

import os

from ..errors import LaneCompileError
from ..lane.ir import nodes as ir
from . import aliasing, arrays, checkpoint, intrinsics
from .activity import helper as _helper, is_scan as _is_scan
from .forward import EMITTERS, Emitter, Plan, transform
from .reverse import ReverseEmitter, argnums_order, custom_partials
from .source import arguments as _call_args, method_name as _method, first_line as _first_line, grouped as _grouped, \
    is_inplace as _inplace, is_number as _is_number, is_store as _store, kind as _kind, \
    statement_lines as _statement_lines, statement_name as _statement_name, statement_text as _statement_text, \
    stored_value as _stored_value, target as _target, target_text as _target_text
from .scans import NotDesugared, desugar
from .structured import NotStructured, range_bounds, structure
from ..lane.ir.passes.walk import stored, walk

__all__ = ["AdjointEmitter", "NotAdjoint", "ReverseMode"]


class NotAdjoint(Exception):
    """The lane uses something the adjoint code does not handle; the tape is used instead."""


class Refused(LaneCompileError):
    """Something neither the adjoint code nor the tape differentiates: the error, with the line."""


class ReverseMode:
    """``EMITTERS["reverse"]``: adjoint code where the lane allows it, else the tape."""

    def __init__(self, fn, plan: Plan):
        self.fn, self.plan = fn, plan

    def function(self):
        why = "a helper called from a taped lane"
        if self.plan.finish in ("jacrev", "vjp"):
            try:
                return AdjointEmitter(self.fn, self.plan).function()
            except (Refused, aliasing.Refused):
                raise
            except (NotAdjoint, LaneCompileError) as e:
                why = str(e)  # the tape takes it, or gives the error with the user's line
        try:
            made = ReverseEmitter(self.fn, self.plan).function()
        except LaneCompileError as e:
            raise LaneCompileError(f"{e}\n(reverse mode's adjoint code did not take it either: {why})") from None
        made._lw_tape_reason = why
        return made


class AdjointEmitter(Emitter):
    """The forward emitter's expressions with, as each value's "tangent", a dict
    ``{leaf: partial}`` over the active values it reads; statements written twice
    (the forward sweep here, the reverse sweep as returned lines)."""

    def __init__(self, fn, plan: Plan):
        super().__init__(fn, plan)
        try:
            self.ir = structure(desugar(self.ir, lambda call: _is_scan(self._called(call)), self.pre), self.pre)
        except (NotStructured, NotDesugared) as e:
            raise NotAdjoint(str(e)) from None
        seeded = {p for p, s in zip(self.params, plan.seeds, strict=True) if s is not None}
        self._analyse(seeded)  # on the rewritten lane
        self.differentiated = [p for p, s in zip(self.params, plan.seeds, strict=True) if isinstance(s, tuple)]
        self.arrays = self._element_arrays()
        self.owner, self.stack, self.capacity, self.top = (f"{self.pre}{n}" for n in ("owner", "S", "cap", "sp"))
        self.limit = plan.memory // 8 if plan.memory else -1  # the budget, in stack values
        self.loops, self.scalars = 0, None

    def _unwrap(self, value):
        """A transformed lane's ``return ad.out(e)`` is ``return e`` (a derivative of a derivative)."""
        if _kind(value) == "call" and len(_call_args(value)) == 1 and not value.keywords \
                and self._called(value) is intrinsics.out:
            return _call_args(value)[0]
        return value

    # -- which differentiated arguments are arrays read element by element

    def _element_arrays(self) -> set:
        try:
            return arrays.element_arrays(self.ir, self.differentiated, self._called)
        except arrays.Mixed as e:
            raise NotAdjoint(str(e)) from None

    # -- expressions: {leaf: partial}; a leaf is ("v", name), ("e", array, index) or
    #    ("a", array, direction): a whole array, reduced along a direction (see _accumulate)

    def _ex_var(self, node):
        if node.name in self.arrays:
            raise NotAdjoint(f"{node.name} is used whole")
        return node.name, {("v", node.name): "1.0"}

    # -- linear functions of a whole differentiated array: sum, mean, dot with a constant array

    def _ex_call(self, node):
        whole = self._whole_call(node)
        return whole if whole is not None else super()._ex_call(node)

    def _ex_binary(self, node):
        if node.op == "matmul":
            return self._dot(node, node.args)
        return super()._ex_binary(node)

    def _whole_call(self, node):
        """``np.sum(w)``, ``w.mean()``, ``np.dot(w, v)``...: ``(primal, partials)`` or None."""
        if node.keywords:
            return None
        args = _call_args(node)
        method = _method(node)
        if method in arrays.REDUCING_METHODS and not args and isinstance(node.args[0], ir.Var) \
                and node.args[0].name in self.arrays:
            return self.temp(self.text(node)), {("a", node.args[0].name, arrays.REDUCING_METHODS[method]): "1.0"}
        kind = arrays.linear_numpy(self._called(node))
        if kind == "dot" and len(args) == 2:
            return self._dot(node, args)
        if kind in ("sum", "mean") and len(args) == 1 and isinstance(args[0], ir.Var) and args[0].name in self.arrays:
            return self.temp(self.text(node)), {("a", args[0].name, arrays.REDUCING_METHODS[kind]): "1.0"}
        return None

    def _dot(self, node, operands):
        """``w @ v`` or ``np.dot(w, v)`` of a differentiated 1-D array and an argument never written."""
        names = [o.name if isinstance(o, ir.Var) else None for o in operands]
        mine = [n for n in names if n in self.arrays]
        other = [n for n in names if n not in self.arrays]
        if len(mine) != 1 or len(other) != 1 or not self._constant(other[0]):
            try:  # the tape cannot either: the error, with the line
                self._fail(node, "reverse mode takes np.dot (or @) of a differentiated 1-D array and an argument "
                                 "never written in the lane; write the loop: for i in range(len(w)): s += w[i] * v[i]")
            except LaneCompileError as e:
                raise Refused(str(e)) from None
        return self.temp(self.text(node)), {("a", mine[0], other[0]): "1.0"}

    def _constant(self, name) -> bool:
        """An argument that is neither differentiated nor written: its value in the reverse sweep is its value."""
        if name is None or name not in self.params or name in self.active:
            return False
        nodes = list(walk(self.ir))
        return name not in stored(nodes, defs=False) and not any(
            isinstance(n, ir.Item) and n.base == ir.Var(name) or isinstance(n, ir.Prim) and n.op == "setitem"
            and n.args[0] == ir.Var(name) for n in nodes)

    def _accumulate(self, leaf, scaled: str, index: str | None = None) -> str:
        """The reverse sweep's statement adding ``scaled`` times ``leaf``'s direction to its adjoint."""
        if leaf[0] == "e":
            return f"{self.adjoint(leaf[1])}[{index}] += {scaled}"
        if leaf[0] == "a":
            direction = leaf[2]
            if direction in ("", "mean"):
                share = f"({scaled}) / {leaf[1]}.shape[0]" if direction == "mean" else scaled
                return f"{self.pre}ad.spread_all({self.adjoint(leaf[1])}, {share})"
            return f"{self.pre}ad.spread_along({self.adjoint(leaf[1])}, {direction}, {scaled})"
        return f"{self.adjoint(leaf[1])} += {scaled}"

    def _ex_getitem(self, node):
        base, at = node.args
        helper = self._tuple_helper(base)
        if helper is not None and isinstance(at, ir.Const) and isinstance(at.value, int):
            k = at.value  # helper(...)[k]: one item of a helper's tuple
            p, parts = self._helper_partials(base, helper)
            return self.atom(f"{p}[{k}]"), self._chain([(coefs, f"{d}[{k}]") for coefs, d in parts])
        if not (isinstance(base, ir.Var) and base.name in self.arrays):
            raise NotAdjoint("a subscript of an active value that is not a differentiated array")
        index = self.atom(self.text(at))
        return self.temp(f"{base.name}[{index}]"), {("e", base.name, index): "1.0"}

    def _combine(self, ta, tb, left, right):
        if ta is None and tb is None:
            return None
        out: dict = {}
        for leaf, c in (ta or {}).items():
            out[leaf] = left(c)
        for leaf, c in (tb or {}).items():
            out[leaf] = f"({out[leaf]}) + ({right(c)})" if leaf in out else right(c)
        return {leaf: self.atom(c) for leaf, c in out.items()}

    def _scaled(self, ts, make):
        return None if ts is None else {leaf: self.atom(make(c)) for leaf, c in ts.items()}

    def tangent_temps(self, exprs):
        raise NotAdjoint("an expression the adjoint code does not take")

    def _array_linear(self, node, ts, make):
        raise NotAdjoint("a whole-array operation")

    def _ex_literal(self, node):
        raise NotAdjoint("a tuple of active values in an expression")

    def _ex_attr(self, node):
        raise NotAdjoint("an attribute of an active value")

    def _scan_call(self, node, callee):
        raise NotAdjoint("lw.scan")

    def _ex_ifexp(self, node):
        test = self.atom(self.text(node.args[0]))
        p = f"{self.pre}p{self.count}"
        self.count += 1
        self.depth += 1
        branches = [self._captured(lambda b=b: self.ex(b)) for b in node.args[1:]]
        self.depth -= 1
        leaves = list(dict.fromkeys(leaf for _, (_, c) in branches for leaf in (c or {})))
        names = {leaf: f"{self.pre}c{self.count + k}" for k, leaf in enumerate(leaves)}
        self.count += len(leaves)
        for word, (lines, (value, coefs)) in zip(("if", "else"), branches, strict=True):
            self.emit(f"if {test}:" if word == "if" else "else:")
            self.lines.extend(lines)
            self.depth += 1
            self.emit(f"{p} = {value}")
            for leaf in leaves:
                self.emit(f"{names[leaf]} = {(coefs or {}).get(leaf, '0.0')}")
                if leaf[0] == "e" and leaf not in (coefs or {}) and not _is_number(leaf[2]):
                    self.emit(f"{leaf[2]} = 0")  # the other branch's index: defined, never used
            self.depth -= 1
        return p, {leaf: names[leaf] for leaf in leaves} or None

    def _where(self, node, callee):
        cond, left, right = _call_args(node)
        test = self.atom(self.text(cond))
        (pa, ta), (pb, tb) = self.ex(left), self.ex(right)
        a, b = self.atom(pa), self.atom(pb)
        p = self.temp(f"{callee}({test}, {a}, {b})")
        return p, self._combine(ta, tb, lambda t: f"({t} if {test} else 0.0)", lambda u: f"(0.0 if {test} else {u})")

    def _helper_call(self, node, helper):
        """A helper's partial derivatives: its forward-mode version, one unit tangent per active argument."""
        p, parts = self._helper_partials(node, helper)
        self.temp(f'{self.pre}ad.scalar_result({p}, "{self.plan.transform} (the result of {helper.__qualname__})")')
        return p, self._chain(parts)

    def _helper_partials(self, node, helper):
        """``(result, [(partials of active argument j, d result / d argument j)])`` of a helper
        call (the derivatives are tuples when the helper returns one)."""
        values = self._helper_arguments(node, helper, self._argument)
        # The active slots: (argument, item of a tuple argument or None), one unit tangent each.
        slots = [(i, e) for i, (_, c) in enumerate(values)
                 for e in ([None] if isinstance(c, dict) else range(len(c)) if isinstance(c, list) else [])
                 if e is None or c[e] is not None]
        active = sorted({i for i, _ in slots})
        seeds = tuple("arg" if i in active else None for i in range(len(values)))
        made = transform(helper, Plan(k=len(slots), seeds=seeds, finish="helper", single=True,
                                      transform=self.plan.transform, mode="forward"))
        name = self.helpers.setdefault(made, f"{self.pre}h{len(self.helpers)}")
        self.closure[name] = made
        args = [self.atom(p) for p, _ in values]
        units = [_unit(values[i][1], i, slot) for slot in slots for i in active]
        p = f"{self.pre}p{self.count}"
        partials = [f"{self.pre}d{self.count}_{j}" for j in range(len(slots))]
        self.count += 1
        self.emit(f"{p}, {', '.join(partials)} = {name}({', '.join(args + units)})")
        return p, [(values[i][1] if e is None else values[i][1][e], d)
                   for (i, e), d in zip(slots, partials, strict=True)]

    def _argument(self, node):
        """A helper's argument: ``(primal, partials)``, or for a tuple written in the call,
        ``(primal, [partials of each item])``."""
        if _is_tuple(node) and self.active_ir(node):
            items = [self.ex(e) for e in node.args]
            return "(" + "".join(self.atom(p) + ", " for p, _ in items) + ")", [c for _, c in items]
        return self.ex(node)

    def _unpacked_call(self, target, value):
        """``a, b = helper(...)``: ``[(name, primal, partials)]`` for each name, or None for
        any other assignment."""
        paths = _paths(target) if isinstance(target, ir.Unpack) else None
        helper = self._tuple_helper(value) if paths else None
        if helper is None:
            return None
        p, parts = self._helper_partials(value, helper)
        shape = _target_text(target)
        what = f"{self.plan.transform}: {helper.__qualname__} returns what {shape} unpacks, with numbers for names"
        for path, m in _levels(target):
            self.emit(f'{self.pre}ad.unpacks({p}{path}, {m}, "{what}")')
        for _, path in paths:
            self.emit(f'{self.pre}ad.number({p}{path}, "{what}")')
        return [(name, self.atom(f"{p}{path}"), self._chain([(coefs, f"{d}{path}") for coefs, d in parts]))
                for name, path in paths]

    def _custom_call(self, node, fn):
        """A custom_jvp function: its rule with a unit tangent on each active argument in turn."""
        p, parts = custom_partials(self, node, fn)
        return p, self._chain(parts)

    def _chain(self, parts) -> dict | None:
        """``sum_j coefs_j * d_j``: the partials of a call whose argument j has partials coefs_j."""
        out: dict = {}
        for coefs, d in parts:
            for leaf, c in coefs.items():
                term = d if c == "1.0" else f"{c} * {d}"
                out[leaf] = f"{out[leaf]} + {term}" if leaf in out else term
        return {leaf: self.atom(c) for leaf, c in out.items()} or None

    def _captured(self, make):
        """``(lines emitted by make(), its result)``, the lines kept out of the output."""
        saved, self.lines = self.lines, []
        try:
            result = make()
            return self.lines, result
        finally:
            self.lines = saved

    # -- the stack

    def _push(self, values: list[tuple[str, bool]]) -> tuple[list[str], list[str]]:
        """Emit the pushes of ``values``; return the reverse sweep's lines that pop them into
        fresh names (indices back to ints), and the names, as ``(lines, names)``."""
        if not values:
            return [], []
        n, sp, ad = len(values), self.top, f"{self.pre}ad"
        self.emit(f"if {sp} + {n} > {self.capacity}:")
        self.emit(f"    {self.stack}, {self.capacity} = {ad}.grow({self.owner}, {self.stack}, {sp}, {n}, {self.limit})")
        for k, (value, _) in enumerate(values):
            self.emit(f"{ad}.poke({self.stack}, {sp} + {k}, {value})" if k else
                      f"{ad}.poke({self.stack}, {sp}, {value})")
        self.emit(f"{sp} += {n}")
        names = [f"{self.pre}r{self.count + k}" for k in range(n)]
        self.count += n
        pops = [f"{sp} -= {n}"]
        for k, (name, (_, index)) in enumerate(zip(names, values, strict=True)):
            at = f"{sp} + {k}" if k else sp
            pops.append(f"{name} = int({ad}.peek({self.stack}, {at}))" if index else
                        f"{name} = {ad}.peek({self.stack}, {at})")
        return pops, names

    # -- statements: forward here, the reverse sweep returned as lines

    def adjoint(self, name: str) -> str:
        return f"{self.pre}a_{name}"

    def fw_block(self, statements) -> list[str]:
        reverse: list[str] = []
        for group in _grouped(statements):
            reverse = self.fw(group) + reverse
        return reverse

    def fw(self, group) -> list[str]:
        node = self._at = group[0]
        where = f"# {os.path.basename(self._line(node))}: {_first_line(group)}"
        self.emit(where)
        method = getattr(self, f"_fw_{type(node).__name__}", None)
        if method is None:
            raise NotAdjoint(f"the statement {_statement_name(node)}")
        reverse = method(group if isinstance(node, (ir.Assign, ir.Do)) else node)
        return [where.replace("# ", "# adjoint of ", 1)] + reverse if reverse else []

    def _fw_Do(self, group):
        if _store(group[0].expr):
            return self._fw_Assign(group)
        return self._fw_Raise(group[0])

    def _fw_Raise(self, node):
        self.emit(_statement_text((node,)))
        return []

    _fw_Assert = _fw_Raise

    def _fw_Exit(self, node):
        if node.kind == "return":
            raise NotAdjoint("a return before the end")  # structure() leaves only the last one
        raise NotAdjoint(f"the statement {node.kind.capitalize()}")

    def _fw_Assign(self, group):
        targets, value = [_target(s) for s in group], _stored_value(group[0])
        if _inplace(value):
            return self._fw_inplace(group[0], targets[0], value)
        *firsts, last = targets
        if firsts and not all(isinstance(t, ir.Var) for t in targets):
            raise NotAdjoint("a chained assignment to something other than names")
        reverse = self._assign(last, value)  # x = y = e: y = e, then x = y
        for target in firsts:
            reverse = self._assign(target, ir.Var(last.name)) + reverse
        return reverse

    def _fw_inplace(self, node, target, value):
        """``x op= e`` (``value`` is ``x op e``)."""
        if not isinstance(target, ir.Var):
            if self.active_ir(target.base) or self.active_ir(value.args[1]):
                raise NotAdjoint("an augmented assignment into an active array")
            self.emit(_statement_text((node,)))
            return []
        if target.name not in self.active and not self.active_ir(value):
            self.emit(_statement_text((node,)))  # nothing differentiated: as written (an array changed in place)
            return []
        guard = self.active.guarded.get(target.name)
        if guard is not None:  # another name may share it: a number is rebound, an array is refused
            self.emit(f"{self.pre}ad.unshared({target.name}, {guard!r})")
        return self._assign(target, value)

    def _assign(self, target, value) -> list[str]:
        results = self._unpacked_call(target, value)
        pairs = _pairs(target, value) if results is None else []
        if results is None and pairs is None:
            if any(n.name in self.active for n in walk(target) if isinstance(n, ir.Var)) or self.active_ir(value):
                raise NotAdjoint(f"the assignment {_target_text(target)} = ... of active values")
            self.emit(f"{_target_text(target)} = {self.text(value)}")
            return []
        if results is None:
            results = []
            for name, expr in pairs:
                p, coefs = self.ex(expr)
                results.append((name, self.atom(p) if len(pairs) > 1 else p, coefs))
        pushed, terms = [], []
        for name, _, coefs in results:
            if name not in self.active:
                continue
            mine = []
            for leaf, c in (coefs or {}).items():
                index = leaf[2] if leaf[0] == "e" else None
                c = c if _is_number(c) else _slot(pushed, c, False)
                if index is not None and not _is_number(index):
                    index = _slot(pushed, index, True)
                mine.append((leaf, c, index))
            terms.append((name, mine))
        pops, names = self._push(pushed)
        texts = ", ".join(n for n, _, _ in results)
        self.emit(f"{texts} = {', '.join(p for _, p, _ in results)}")
        if not terms:
            return []
        return pops + self._adjoint_lines(terms, names)

    def _adjoint_lines(self, terms, names) -> list[str]:
        """``g = x̄; x̄ = 0; v̄ += ∂·g`` for each assigned name (its own leaf first, assigned)."""
        def value(slot):
            return names[slot] if isinstance(slot, int) else slot

        lines = []
        for name, _ in terms:
            lines.append(f"{self.pre}g_{name} = {self.adjoint(name)}")
        for name, mine in terms:
            own = [t for t in mine if t[0] == ("v", name)] if len(terms) == 1 else []
            lines.append(f"{self.adjoint(name)} = {value(own[0][1])} * {self.pre}g_{name}" if own
                         else f"{self.adjoint(name)} = 0.0")
        for name, mine in terms:
            for leaf, c, index in mine:
                if len(terms) == 1 and leaf == ("v", name):
                    continue
                lines.append(self._accumulate(leaf, f"{value(c)} * {self.pre}g_{name}",
                                              value(index) if leaf[0] == "e" else None))
        return lines

    def _fw_If(self, node):
        test = self.text(node.cond)
        self.depth += 1
        body_lines, body_rev = self._captured(lambda: self.fw_block(node.then))
        else_lines, else_rev = self._captured(lambda: self.fw_block(node.orelse))
        self.depth -= 1
        if not body_rev and not else_rev:
            self.emit(f"if {test}:")
            self.lines.extend(body_lines or ["    " * (self.depth + 1) + "pass"])
            if else_lines:
                self.emit("else:")
                self.lines.extend(else_lines)
            return []
        for word, lines, flag in (("if", body_lines, "1.0"), ("else", else_lines, "0.0")):
            self.emit(f"if {test}:" if word == "if" else "else:")
            self.lines.extend(lines)
            self.depth += 1
            self._push([(flag, False)])  # which branch ran: pushed last, so popped first
            self.depth -= 1
        return [f"{self.top} -= 1", f"if {self.pre}ad.peek({self.stack}, {self.top}) != 0.0:"] + \
            _indent(body_rev or ["pass"]) + ["else:"] + _indent(else_rev or ["pass"])

    def _fw_Loop(self, node):
        if node.kind == "while":
            if node.orelse:
                raise NotAdjoint("while ... else")
            return self._loop(node, f"while {self.text(node.cond)}:")
        if node.orelse or self.active_ir(node.iter):
            raise NotAdjoint("a for loop over active values, or for ... else")
        return self._loop(node, f"for {_target_text(node.target)} in {self.text(node.iter)}:")

    def _loop(self, node, head: str) -> list[str]:
        """The loop, counting its trips when its body records anything; the reverse sweep
        runs the body's adjoint that many times (or, checkpointed, one segment at a time)."""
        trips = f"{self.pre}n{self.count}"
        self.count += 1
        self.depth += 1
        self.loops += 1
        lines, rev = self._captured(lambda: self.fw_block(node.body))
        self.loops -= 1
        self.depth -= 1
        if rev and self.limit >= 0 and self.loops == 0:
            held = checkpoint.state(self.ir, node, self._scalars())
            if held is not None:
                return self._checkpointed(node, held, lines, rev)
        if rev:
            self.emit(f"{trips} = 0")
        self.emit(head)
        if rev:
            self.emit(f"    {trips} += 1")
        self.lines.extend(lines or ["    " * (self.depth + 1) + "pass"])
        if not rev:
            return []
        pops, names = self._push([(trips, True)])
        return pops + [f"for {self.pre}k in range({names[0]}):"] + _indent(rev)

    def _scalars(self) -> set:
        if self.scalars is None:
            numbers = {p for p in self.differentiated if p not in self.arrays}
            self.scalars = checkpoint.scalar_names(self.ir, numbers, self.arrays, self._called_here,
                                                   lambda call: self._tuple_helper(call) is not None)
        return self.scalars

    def _called_here(self, call):
        """The object an IR call calls, the checks the rewritten lane calls included (``{pre}ad.trips``)."""
        head = call.args[0] if call.op.startswith("method.") else None
        if isinstance(head, ir.Global) and head.name == f"{self.pre}ad":
            return getattr(intrinsics, call.op[len("method."):], None)
        return self._called(call)

    def _tuple_helper(self, call):
        """The user helper an active IR ``call`` calls (not a custom rule), whose tuple result the
        adjoint code takes item by item (checked to be numbers where unpacked), or None."""
        if not (isinstance(call, ir.Prim) and self.active_ir(call)):
            return None
        return _rule_free(_helper(self._called(call)))

    def _checkpointed(self, node, held: list[str], lines: list[str], rev: list[str]) -> list[str]:
        """The loop keeping its state ``held`` every ``seg`` iterations (at most ``most``
        checkpoints: past that, every other one is dropped and ``seg`` doubles); the
        reverse sweep recomputes each segment from its checkpoint, recording it, and runs
        its adjoint, last segment first."""
        n, ad, sp, width = self.count, f"{self.pre}ad", self.top, len(held)
        self.count += 1
        trips, seg, kept, base, top, first, count, j, c = (f"{self.pre}{w}{n}" for w in (
            "n", "seg", "kept", "base", "top", "first", "count", "j", "c"))
        most = max(2, (self.limit // 2) // max(1, width)) // 2 * 2
        loop = self._counted(node, n, j)
        self.emit(f"{trips}, {seg}, {kept}, {base} = 0, 1, 0, {sp}")
        self.emit(loop["head"])
        self.depth += 1
        self.emit(f"if {trips} % {seg} == 0:")
        self.emit(f"    if {kept} == {most}:")
        self.emit(f"        {ad}.thin({self.stack}, {base}, {kept}, {width})")
        self.emit(f"        {kept}, {seg} = {most // 2}, {seg} * 2")
        self.emit(f"        {sp} = {base} + {kept} * {width}")
        self.depth += 1
        self._push([(name, False) for name in held])
        self.emit(f"{kept} += 1")
        self.depth -= 1
        for line in loop["enter"]:
            self.emit(line)
        self.emit(f"{trips} += 1")
        for line in _statement_lines(node.body):  # the plain body: nothing recorded
            self.emit(line)
        self.depth -= 1
        pops, names = self._push([(trips, True), (seg, True), (kept, True)] + [(v, True) for v in loop["keep"]])
        relative = [line[4 * (self.depth + 1):] for line in lines]
        restore = [f"{v} = {ad}.restore({v}, {ad}.peek({self.stack}, {base} + {c} * {width} + {k}))"
                   for k, v in enumerate(held)]
        return pops + [f"{trips}, {seg}, {kept} = {names[0]}, {names[1]}, {names[2]}"] + \
            [f"{v} = {r}" for v, r in zip(loop["keep"], names[3:], strict=True)] + \
            [f"{top} = {sp}", f"{base} = {top} - {kept} * {width}",
             f"for {c} in range({kept} - 1, -1, -1):",
             f"    {sp} = {top}"] + _indent(restore) + \
            [f"    {first} = {c} * {seg}", f"    {count} = min({seg}, {trips} - {first})",
             f"    for {j} in range({first}, {first} + {count}):"] + _indent(_indent(loop["enter"] + relative)) + \
            [f"    for {self.pre}k in range({count}):"] + _indent(_indent(rev)) + [f"{sp} = {base}"]

    def _counted(self, node, n: int, j: str) -> dict:
        """How a checkpointed loop is written: ``head``, the lines that ``enter`` iteration
        ``j`` (a range's target), and the values to ``keep`` for the reverse sweep."""
        if node.kind == "while":
            return {"head": f"while {self.text(node.cond)}:", "enter": [], "keep": []}
        start, stop, step = range_bounds([self.text(a) for a in _call_args(node.iter)], "0", "1")
        first, stride, total = (f"{self.pre}{w}{n}" for w in ("from", "by", "total"))
        self.emit(f"{first}, {stride} = {start}, {step}")
        self.emit(f"{total} = {self.pre}ad.trips({first}, {stop}, {stride})")
        return {"head": f"for {j} in range({total}):",
                "enter": [f"{_target_text(node.target)} = {first} + {j} * {stride}"], "keep": [first, stride]}

    # -- the function

    def _body(self) -> None:
        for p in self.differentiated:
            if p not in self.arrays:
                self.emit(f'{self.pre}ad.require_scalar_input({p}, "{p}", "{self.plan.transform}")')
            self.emit(f'{self.adjoint(p)} = {self.pre}ad.adjoint_of({p}, "{p}", "{self.plan.transform}")')
        self.emit(f"{self.owner}, {self.stack}, {self.capacity} = {self.pre}ad.new_stack({self.limit})")
        self.emit(f"{self.top} = 0")
        body = self.ir.body
        if not body or not (isinstance(body[-1], ir.Exit) and body[-1].kind == "return" and body[-1].value):
            raise NotAdjoint("no return at the end")
        reverse = self.fw_block(body[:-1])
        self.emit(f"# {os.path.basename(self._line(body[-1]))}: {_first_line(body[-1:])}")
        value = self._unwrap(body[-1].value)
        aux = None
        if self.plan.has_aux:
            if not (_is_tuple(value) and len(value.args) == 2):
                raise NotAdjoint("has_aux with a result not written as (value, aux)")
            value, aux = value.args[0], self.temp(self.text(value.args[1]))
        leaves: list = []
        if self.plan.finish == "vjp":
            shape = self._leaves(value, f"{self.pre}cotangent", leaves)
            sweeps = [leaves]
        else:
            shape = self._leaves(value, None, leaves)
            sweeps = [[leaf] for leaf in leaves]  # one sweep per output leaf, each from the same stack
        end = f"{self.pre}end"
        if len(sweeps) > 1:
            self.emit(f"{end} = {self.top}")
        results = [self._sweep(seeds, reverse, first=k == 0, restart=end if k else None)
                   for k, seeds in enumerate(sweeps)]
        if self.plan.finish == "vjp":
            result = f"({shape}, {results[0]})"
        else:
            result = _fill(value, iter(results))
            result = f"({result}, {aux})" if aux is not None else result
        self.emit(f"{self.pre}ad.keep({self.owner})  # the stack's buffer lives to here")
        self.emit(f"return {self.pre}ad.out({result})")

    def _sweep(self, seeds, reverse: list[str], first: bool, restart: str | None) -> str:
        """One reverse sweep from the output ``seeds`` ([(partials, seed)]): the text of its gradients."""
        self.emit("# the reverse sweep")
        if restart is not None:
            self.emit(f"{self.top} = {restart}")
        for name in sorted(n for n in self.active if n not in self.arrays):
            if name not in self.differentiated or not first:
                self.emit(f"{self.adjoint(name)} = 0.0")
        if not first:
            for p in sorted(self.arrays):
                self.emit(f'{self.adjoint(p)} = {self.pre}ad.adjoint_of({p}, "{p}", "{self.plan.transform}")')
        for coefs, seed in seeds:
            for leaf, c in (coefs or {}).items():
                self.emit(self._accumulate(leaf, f"{c} * {seed}", leaf[2] if leaf[0] == "e" else None))
        for line in reverse:
            self.emit(line)
        picked = [self.adjoint(p) for p in self._order()]
        grads = picked[0] if self.plan.single else "(" + "".join(t + ", " for t in picked) + ")"
        return self.temp(grads)

    def _leaves(self, value, cotangent: str | None, leaves: list) -> str:
        """The primal of a returned expression; each scalar leaf's (partials, seed) appended
        (the seed: the leaf's part of ``cotangent``, or 1.0 without one)."""
        if _is_tuple(value):
            parts = [self._leaves(e, f"{cotangent}[{k}]" if cotangent else None, leaves)
                     for k, e in enumerate(value.args)]
            return "(" + "".join(q + ", " for q in parts) + ")"
        p, coefs = self.ex(value)
        p = self.atom(p)
        self.temp(f'{self.pre}ad.scalar_result({p}, "{self.plan.transform}'
                  f'{" (each returned leaf)" if self.plan.finish == "vjp" else ""}")')
        leaves.append((coefs, self.atom(cotangent) if cotangent else "1.0"))
        return p

    def _order(self) -> list[str]:
        return argnums_order(self.params, self.plan.seeds)

    def _tangent_params(self) -> list[str]:
        return [f"{self.pre}cotangent"] if self.plan.finish == "vjp" else []

    def _how(self) -> str:
        return "reverse mode: adjoint code over a value stack"


def _is_tuple(value) -> bool:
    """Whether an IR expression is a tuple written as one (``a, b``)."""
    return isinstance(value, ir.Prim) and value.op == "tuple" and value.type == "tuple"


def _fill(value, results) -> str:
    """The Jacobian's structure: the returned tuple's, with one sweep's gradients at each leaf."""
    if _is_tuple(value):
        return "(" + "".join(_fill(e, results) + ", " for e in value.args) + ")"
    return next(results)


def _unit(partials, i: int, slot) -> str:
    """Argument ``i``'s tangent when only ``slot`` has a unit tangent (a tuple for a tuple argument)."""
    if isinstance(partials, list):
        return "(" + "".join(("1.0" if (i, e) == slot else "0.0") + ", " for e in range(len(partials))) + ")"
    return "1.0" if slot == (i, None) else "0.0"


def _paths(target, path: str = "") -> list | None:
    """``[(name, "[0][1]")]`` for a (nested) tuple of names; None for any other target."""
    if isinstance(target, ir.Var):
        return [(target.name, path)]
    if isinstance(target, ir.Unpack) and target.star is None:
        found = [_paths(e, f"{path}[{k}]") for k, e in enumerate(target.items)]
        return None if any(f is None for f in found) else [x for f in found for x in f]
    return None


def _levels(target, path: str = "") -> list:
    """``[(path, length)]`` of every tuple level of an unpacking target."""
    if not isinstance(target, ir.Unpack):
        return []
    return [(path, len(target.items))] + [x for k, e in enumerate(target.items) for x in _levels(e, f"{path}[{k}]")]


def _slot(pushed: list, value: str, index: bool) -> int:
    pushed.append((value, index))
    return len(pushed) - 1


def _pairs(target, value):
    """``[(name, expression)]`` for ``x = e`` and ``x, y = e1, e2``; None for any other form."""
    if isinstance(target, ir.Var):
        return [(target.name, value)]
    if isinstance(target, ir.Unpack) and target.star is None and _kind(value) == "literal" \
            and len(target.items) == len(value.args) and all(isinstance(t, ir.Var) for t in target.items):
        return [(t.name, v) for t, v in zip(target.items, value.args, strict=True)]
    return None


def _indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


EMITTERS["reverse"] = ReverseMode
EMITTERS["tape"] = ReverseEmitter


def _rule_free(helper):
    """``helper``, unless it is None or has a custom derivative rule."""
    return helper if helper is not None and getattr(helper, "_lw_jvp_rule", None) is None else None
