"""Forward mode: a lane's IR -> the source of a lane that carries k tangents per value.

The transformed lane is plain lane code, so every backend, the SPMD path and
lanewise's other transformations take it as they take the user's own lane:

* every *active* local (one computed from a differentiated argument; a
  flow-insensitive fixpoint on the lane IR, :mod:`.activity`) gets k tangent locals beside it,
  updated at each assignment, before the primal (``x = x * x`` reads the old
  ``x``); inactive values (counters, flags, integers) carry nothing;
* control flow is kept as it is: ``if``/``while``/``for``/``break``/``continue``
  and early ``return`` run exactly the primal lane's path, so data-dependent
  loops and branches need no special treatment in forward mode;
* calls of math/NumPy/builtin functions take their rule from :mod:`.rules`;
  calls of the user's helpers call the helper's own transformed version
  (generated once per helper, activity pattern and k);
* what the lane returns is decided by a :class:`Plan`: ``(value, tangent)``
  (``lw.jvp``), the gradient (``lw.grad``), the Jacobian (``lw.jacfwd``)...

Generated text is deterministic, registered with ``linecache`` (so ``inspect``,
``lw.explain`` and error messages show it) and carries a comment naming the
user's line of each statement.

Example:
    >>> import math
    >>> def f(x):
    ...     return math.sin(x) * x
    >>> g = transform(f, Plan(k=1, seeds=((1.0,),), finish="grad", single=True, transform="lw.grad"))
    >>> round(g(0.5), 12) == round(math.cos(0.5) * 0.5 + math.sin(0.5), 12)
    True
"""

from __future__ import annotations

import builtins
import linecache
import math
import operator
import os
import threading
import weakref
import dataclasses
from dataclasses import dataclass

import numpy as np

from .. import primitives
from ..errors import LaneCompileError
from ..lane.ir import nodes as ir
from ..lane.ir.build import function_ir
from ..lane.lanefn import fingerprint
from . import aliasing as _aliasing, intrinsics
from .activity import (LINEAR_METHODS as _LINEAR_METHODS, LINEAR_NUMPY as _LINEAR_NUMPY, active_expr, active_names,
                       custom as _custom, helper as _helper, is_scan as _is_scan, numpy_named as _numpy_named,
                       original as _original, where as _where)
from .rules import Rule, module_of, rule_for
from .source import arguments as _call_args, build, called_text as _callee_text, exponent as _exponent, \
    first_line as _first_line, grouped as _grouped, InPlace, inlinable as _inlinable, is_inplace as _inplace, \
    list_write as _list_write, method_name as _method, \
    is_number as _is_number, is_scalar as _is_scalar, is_store as _store, kind as _kind, number as _number, \
    pairwise as _pairwise, place as _place, shares_as_tangents as _shares, statement_name as _statement_name, \
    statement_text as _statement_text, stored_value as _stored_value, syntax_name as _syntax_name, \
    target as _target, target_text as _target_text, text as _text, value_of as _value_of


@dataclass(frozen=True)
class Plan:
    """What to generate.

    ``seeds``: per parameter, None (no tangent), ``"arg"`` (its tangents are
    parameters of the generated lane: one for ``lw.jvp``, k for a helper) or a
    tuple of k constants (the basis vectors of ``lw.grad``/``lw.jacfwd``).
    ``finish``: ``"jvp"`` returns ``(value, tangent)``; ``"helper"`` returns
    ``(value, t_0, ..., t_k-1)``; ``"grad"``, ``"value_and_grad"`` and
    ``"jacfwd"`` return what their JAX namesakes return.  ``single``: argnums
    was an int (results are not wrapped in a tuple).  ``transform``: the name
    errors use."""

    k: int
    seeds: tuple
    finish: str
    single: bool = True
    has_aux: bool = False
    transform: str = "lw.jvp"
    mode: str = "forward"  # or "reverse" (autodiff.adjoint: adjoint code, else autodiff.reverse's tape)
    memory: int | None = None  # reverse mode's budget per lane in bytes (lw.config.reverse_memory)


def transform(fn, plan: Plan):
    """The generated lane for ``fn`` under ``plan`` (cached per function, plan and
    the function's fingerprint: editing a global it reads gives a new lane)."""
    fn = _original(fn)
    made = _MADE.get(fn)
    if made is None:
        made = _MADE[fn] = {}
    key = (plan, fingerprint(fn))
    if key[1] is not None and key in made:
        return made[key]
    building = _BUILDING.__dict__.setdefault("stack", [])
    if (fn, plan) in building:
        raise LaneCompileError(f"{plan.transform} cannot differentiate {fn.__qualname__} ({_where(fn)}): "
                               "it calls itself (recursion), which forward mode does not follow")
    building.append((fn, plan))
    try:
        result = EMITTERS[plan.mode](fn, plan).function()
    finally:
        building.pop()
    if key[1] is not None:
        made[key] = result
    return result


_MADE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_BUILDING = threading.local()


class Emitter(InPlace):
    """Writes the transformed function, one statement of the user's at a time."""

    #: The derivative of a constant, and the intrinsic giving a value's zero derivative.
    ZERO, ZERO_OF = "0.0", "zero"

    def __init__(self, fn, plan: Plan):
        self.fn, self.plan = fn, plan
        self.objects = {}  # names the transformation adds, and what they refer to
        self.ir = self._custom_body(fn) if _custom(fn) else function_ir(fn)
        if self.ir.source == "bytecode" and len(self.ir.body) == 1 and isinstance(self.ir.body[0], ir.Unsupported):
            # no source text anywhere, and no def written back from the bytecode either: why
            raise LaneCompileError(f"{plan.transform}: {self.ir.body[0].what}")
        if self.ir.posonly or any(p.kind != "positional" for p in self.ir.params):
            self._fail(self.ir, "only plain positional parameters are supported (no *args, **kwargs, "
                                "keyword-only or positional-only parameters)")
        self.params = [p.name for p in self.ir.params]
        self._at = self.ir  # the statement being written (errors name its line)
        written = _list_write(self.ir)
        if written is not None:
            self._fail(written, "changing a list (a[i] = ..., a.append(...)) is not supported in a differentiated "
                                "lane: lists are differentiated as tuples. Build a new list, or use an array "
                                "(np.array([...]), np.zeros(n))")
        if len(plan.seeds) != len(self.params):
            raise LaneCompileError(f"{plan.transform}: {fn.__qualname__} takes {len(self.params)} arguments, "
                                   f"{len(plan.seeds)} were described")
        self.pre = self._prefix()
        seeded = {p for p, s in zip(self.params, plan.seeds, strict=True) if s is not None}
        self._analyse(seeded)
        self.lines: list[str] = []
        self.depth = 1
        self.count = 0
        self.closure = {f"{self.pre}ad": intrinsics, f"{self.pre}math": math, f"{self.pre}np": np}
        self.helpers: dict = {}

    # -- names

    def _custom_body(self, fn) -> ir.Function:
        """``def f(x, y): return f(x, y)``: transforming a custom_jvp function itself
        applies its rule (its body is never differentiated)."""
        code = fn.__code__
        params = list(code.co_varnames[:code.co_argcount])
        self.objects["_lw_custom"] = fn
        at = ir.Loc(code.co_filename, code.co_firstlineno, 0)
        call = ir.Prim("_lw_custom", tuple(ir.Var(p) for p in params), at)
        return ir.Function(fn.__name__, tuple(ir.Param(p) for p in params), (ir.Exit("return", call, at),), at)

    def _analyse(self, seeded) -> None:
        """The active locals of ``self.ir``."""
        # aliasing.widen: a class of names sharing an array changed in place is active whole
        self.active = _aliasing.widen(self, active_names(self.ir, seeded, self._called))

    def _called(self, call):
        """The object an IR call calls: as :meth:`resolve` (the names the transformation binds first)."""
        return self.objects[call.op] if call.op in self.objects else ir.called(call)

    def _prefix(self) -> str:
        """``_lw<L>_`` with L one more than any level the function's own names use
        (a transformed lane transformed again keeps both levels apart)."""
        used = {n for n in self.fn.__code__.co_varnames + self.fn.__code__.co_freevars}
        level = 0
        while any(n.startswith(f"_lw{level}_") for n in used):
            level += 1
        return f"_lw{level}_"

    def tan(self, name: str, j: int) -> str:
        return f"{self.pre}t{j}_{name}"

    def _line(self, node) -> str:
        return _place(self.fn, node)

    def _fail(self, node, why: str):
        line = self._line(node)
        path, number = line.rsplit(":", 1)
        text = linecache.getline(path, int(number)).strip()
        raise LaneCompileError(f"{self.plan.transform} cannot differentiate {self.fn.__qualname__} at {line}: "
                               f"{why}\n    {text}")

    # -- output

    def emit(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def temp(self, expr: str) -> str:
        name = f"{self.pre}p{self.count}"
        self.count += 1
        self.emit(f"{name} = {expr}")
        return name

    def tangent_temps(self, exprs) -> list | None:
        if exprs is None:
            return None
        n = self.count
        self.count += 1
        names = [f"{self.pre}d{n}_{j}" for j in range(self.plan.k)]
        for name, expr in zip(names, exprs, strict=True):
            self.emit(f"{name} = {expr}")
        return names

    def atom(self, text: str) -> str:
        if text.isidentifier() or _is_number(text):
            return text
        return self.temp(text)

    # -- expressions (the lane IR's: autodiff.source.kind names the visitor of each)

    def ex(self, node):
        """``(primal text, tangent texts or None)`` for an IR expression (an AST one is read
        as its IR); statements it needs (temporaries) are emitted first."""
        if not self.active_ir(node):
            return self.text(node), None
        kind = _kind(node)
        method = getattr(self, f"_ex_{kind}", None)
        if method is None and kind == "lambda":
            self._fail(node, "a lambda that reads a differentiated value is not supported: define the function "
                             "with def outside the lane and pass it the value (lanewise differentiates helpers)")
        if method is None:
            self._fail(node, f"{_syntax_name(node)} expressions of differentiated values are not supported")
        return method(node)

    def text(self, node) -> str:
        """An IR expression as the lane wrote it."""
        return _text(node)

    def _ex_var(self, node):
        return node.name, [self.tan(node.name, j) for j in range(self.plan.k)]

    def _ex_literal(self, node):
        parts = [self.ex(e) for e in node.args]
        primal = "(" + "".join(p + ", " for p, _ in parts) + ")"
        tangents = ["(" + "".join(self._or_zero(t, j, e, p) + ", " for (p, t), e in zip(parts, node.args, strict=True))
                    + ")" for j in range(self.plan.k)]
        return primal, tangents

    def _or_zero(self, ts, j, node, primal) -> str:
        if ts is not None:
            return ts[j]
        return self.ZERO if _is_scalar(node) else f"{self.pre}ad.{self.ZERO_OF}({primal})"

    def _ex_unary(self, node):
        p, ts = self.ex(node.args[0])
        if node.op == "pos":
            return p, ts
        return self.temp(f"-{self.atom(p)}"), self._scaled(ts, lambda t: f"-{t}")

    def _ex_binary(self, node):
        if node.op not in _BINOPS:
            self._fail(node, f"the operator {_syntax_name(node)} has no derivative rule")
        pa, ta = self.ex(node.args[0])
        pb, tb = self.ex(node.args[1])
        a, b = self.atom(pa), self.atom(pb)
        p = self.temp(f"{a} {_BINOPS[node.op]} {b}")
        if node.op == "pow":
            return p, self._pow(node, a, b, p, ta, tb)
        return p, self._operator_rule(node.op, a, b, p, ta, tb)

    def _operator_rule(self, op, a, b, p, ta, tb):
        """The tangent of ``a <op> b`` from the operator primitive's jvp rule."""
        jvp = primitives.lookup(_OPERATORS[op]).rules["jvp"]
        fill = dict(x=a, y=b, p=p, m=f"{self.pre}math")
        return self._combine(ta, tb, lambda t: jvp.left.format(t=t, **fill), lambda u: jvp.right.format(u=u, **fill))

    def _pow(self, node, a, b, p, ta, tb):
        if tb is None and _is_number(b):
            c = float(b)
            if c == 0:
                return None
            slope = "1.0" if c == 1 else f"{b} * {a}" if c == 2 else f"{b} * {a} ** {_exponent(c - 1)}"
            return self._scaled(ta, lambda t: f"{slope} * {t}")
        return self._operator_rule("pow", a, b, p, ta, tb)

    def _combine(self, ta, tb, left, right):
        if ta is None and tb is None:
            return None
        out = []
        for j in range(self.plan.k):
            terms = ([left(ta[j])] if ta is not None else []) + ([right(tb[j])] if tb is not None else [])
            out.append(" + ".join(f"({t})" for t in terms))
        return self.tangent_temps(out)

    def _ex_ifexp(self, node):
        test, body, orelse = node.args
        p = f"{self.pre}p{self.count}"
        self.count += 1
        ts = [f"{self.pre}d{self.count}_{j}" for j in range(self.plan.k)]
        self.count += 1
        self.emit(f"if {self.text(test)}:")
        for branch in (body, orelse):
            self.depth += 1
            bp, bt = self.ex(branch)
            for j, t in enumerate(ts):
                self.emit(f"{t} = {self._or_zero(bt, j, branch, bp)}")
            self.emit(f"{p} = {bp}")
            self.depth -= 1
            if branch is body:
                self.emit("else:")
        return p, ts

    def _ex_getitem(self, node):
        p, ts = self.ex(node.args[0])
        base = self.atom(p)
        index = self.text(node.args[1])
        return self.temp(f"{base}[{index}]"), self.tangent_temps([f"{t}[{index}]" for t in ts])

    def _ex_attr(self, node):
        name = dict(node.params)["name"]
        if name in ("real", "imag", "T"):
            p, ts = self.ex(node.args[0])
            return self.temp(f"{self.atom(p)}.{name}"), self._array_linear(node, ts, lambda t: f"{t}.{name}")
        self._fail(node, f"the attribute .{name} of a differentiated value is not supported")

    def _ex_call(self, node):
        obj = self._called(node)
        callee = _callee_text(node)
        args = _call_args(node)
        if node.keywords and _helper(obj) is None:
            self._fail(node, f"keyword arguments in a call of {callee} on differentiated values are not supported")
        rule = rule_for(obj) if obj is not None else None
        if rule is not None and obj in (builtins.max, builtins.min) and len(args) > 2:
            return self.ex(_pairwise(node))
        if rule is not None and rule.arity == len(args):
            return self._ruled(node, callee, rule, module_of(obj))
        if _custom(_original(obj)):
            return self._custom_call(node, _original(obj))
        if _helper(obj) is not None:
            return self._helper_call(node, _helper(obj))
        if obj is not None and obj is getattr(np, "where", None) and len(args) == 3:
            return self._where(node, callee)
        if obj is not None and _numpy_named(obj, _LINEAR_NUMPY) and len(args) == 1:
            p, ts = self.ex(args[0])
            x = self.atom(p)
            return self.temp(f"{callee}({x})"), self._array_linear(node, ts, lambda t: f"{callee}({t})")
        if obj is not None and obj is getattr(np, "dot", None) and len(args) == 2:
            return self._ruled(node, callee, _DOT, "np")
        method = _method(node)
        if obj is None and method in _LINEAR_METHODS:
            p, ts = self.ex(node.args[0])
            base = self.atom(p)
            rest = ", ".join(self.text(a) for a in args)
            return (self.temp(f"{base}.{method}({rest})"),
                    self._array_linear(node, ts, lambda t: f"{t}.{method}({rest})"))
        if _is_scan(obj):
            return self._scan_call(node, callee)
        if obj is intrinsics.update or obj is intrinsics.mirror:
            return self._update_call(node, callee, obj)
        if isinstance(obj, type) and issubclass(obj, tuple):
            self._fail(node, f"{callee}(...) builds a namedtuple of differentiated values, which a differentiated "
                             "lane does not support (nor reading its fields by name): return a plain tuple, "
                             "(a, b), and index it")
        prim = primitives.lookup(obj) if obj is not None else None
        if prim is not None and prim.rules.get("jvp") is None:  # the table's own error: one wording everywhere
            self._fail(node, f"{primitives.missing(prim, 'jvp', obj)}; wrap it in lw.stop_gradient if its value "
                             "is a constant")
        self._fail(node, f"{callee} has no derivative rule (lanewise differentiates math/NumPy functions with "
                         "rules, the lane's own helpers, and arithmetic); wrap it in lw.stop_gradient if its "
                         "value is a constant")

    def _custom_call(self, node, fn):
        """A call of an ``lw.custom_jvp`` function: its rule, once per tangent."""
        values, primals, name = self._custom_rule(node, fn)
        p = f"{self.pre}p{self.count}"
        ts = [f"{self.pre}d{self.count}_{j}" for j in range(self.plan.k)]
        self.count += 1
        for j, t in enumerate(ts):
            tangents = "(" + "".join(self._or_zero(tv, j, a, pv) + ", "
                                     for (pv, tv), a in zip(values, _call_args(node), strict=True)) + ")"
            self.emit(f"{p}, {t} = {name}({primals}, {tangents})")
        return p, ts

    def _custom_rule(self, node, fn):
        """``(argument values, primals tuple text, rule name)`` of a call of a custom_jvp function."""
        args = _call_args(node)
        if node.keywords or len(args) != fn.__code__.co_argcount:
            self._fail(node, f"{fn.__qualname__} has a custom derivative rule: pass all its arguments by position")
        values = [self.ex(a) for a in args]
        primals = "(" + "".join(self.atom(p) + ", " for p, _ in values) + ")"
        name = self.helpers.setdefault(fn._lw_jvp_rule, f"{self.pre}h{len(self.helpers)}")
        self.closure[name] = fn._lw_jvp_rule
        return values, primals, name

    def _scan_call(self, node, callee):
        """``lw.scan(f, init, xs, ...)``: a scan of f's transformed step over (carry, its
        tangents) and (xs, their tangents), so the loop stays one compiled loop."""
        names = ("f", "init", "xs", "length", "reverse", "unroll")
        args = dict(zip(names, _call_args(node)))
        args.update(dict(node.keywords))
        step = _helper(_value_of(self.fn, args["f"]))
        if step is None or set(args) - set(names) or len(_call_args(node)) > len(names):
            self._fail(node, "lw.scan's step must be a function defined with def (a global or closure name), "
                             "called as lw.scan(f, init, xs, length, reverse)")
        k = self.plan.k
        pi, ti = self.ex(args["init"])
        init = self.atom(pi)
        init_t = [self.atom(self._or_zero(ti, j, args["init"], init)) for j in range(k)]
        px, tx = self.ex(args["xs"]) if "xs" in args else ("None", None)
        made = transform(step, self._helper_plan(("arg", "arg" if tx is not None else None)))
        wrapper = _scan_step(made, k, tx is not None)
        name = self.helpers.setdefault(wrapper, f"{self.pre}h{len(self.helpers)}")
        self.closure[name] = wrapper
        xs = f"({px}, {', '.join(tx)})" if tx is not None else px
        rest = "".join(f", {n}={self.text(args[n])}" for n in ("length", "reverse", "unroll") if n in args)
        carry, ys = f"{self.pre}p{self.count}", f"{self.pre}p{self.count + 1}"
        self.count += 2
        self.emit(f"{carry}, {ys} = {callee}({name}, ({init}, {', '.join(init_t)}), {xs}{rest})")
        return (self.temp(f"({carry}[0], {ys}[0])"),
                self.tangent_temps([f"({carry}[{1 + j}], {ys}[{1 + j}])" for j in range(k)]))

    def _ruled(self, node, callee, rule, module):
        values = [self.ex(a) for a in _call_args(node)]
        atoms = [self.atom(p) for p, _ in values]
        p = self.temp(f"{callee}({', '.join(atoms)})")
        m = f"{self.pre}{module}"
        if rule.arity == 1:
            ts = values[0][1]
            return p, self._scaled(ts, lambda t: rule.unary.format(x=atoms[0], p=p, t=t, m=m))
        fill = dict(x=atoms[0], y=atoms[1], p=p, m=m)
        return p, self._combine(values[0][1], values[1][1], lambda t: rule.left.format(t=t, u="", **fill),
                                lambda u: rule.right.format(u=u, t="", **fill))

    def _where(self, node, callee):
        cond, left, right = _call_args(node)
        test = self.text(cond)
        (pa, ta), (pb, tb) = self.ex(left), self.ex(right)
        a, b = self.atom(pa), self.atom(pb)
        p = self.temp(f"{callee}({test}, {a}, {b})")
        c = self.atom(test)
        return p, self.tangent_temps([f"({self._or_zero(ta, j, left, a)} if {c} else "
                                      f"{self._or_zero(tb, j, right, b)})" for j in range(self.plan.k)])

    def _helper_call(self, node, helper):
        values = self._helper_arguments(node, helper, self.ex)
        seeds = tuple("arg" if t is not None else None for _, t in values)
        made = _inlinable(transform(helper, self._helper_plan(seeds)))  # Numba inlines it
        name = self.helpers.setdefault(made, f"{self.pre}h{len(self.helpers)}")
        self.closure[name] = made
        args = [self.atom(p) for p, _ in values]
        tangents = [t[j] for j in range(self.plan.k) for _, t in values if t is not None]
        p = f"{self.pre}p{self.count}"
        self.count += 1
        ts = [f"{self.pre}d{self.count}_{j}" for j in range(self.plan.k)]
        self.count += 1
        call = ", ".join(args + tangents + self._helper_extra())
        self.emit(f"{p}, {', '.join(ts)} = {name}({call})")  # unpacked: SPMD needs it
        return p, ts

    def _helper_arguments(self, node, helper, value_of) -> list:
        """``value_of(argument)`` for each argument of a helper call, then ``(repr, None)``
        for each numeric default it leaves out."""
        n = helper.__code__.co_argcount
        args = _call_args(node)
        if node.keywords or any(isinstance(a, ir.Prim) and a.op == "star" for a in args) or len(args) > n:
            self._fail(node, f"calls of {helper.__qualname__} with keywords or *args cannot be differentiated "
                             "(pass the arguments by position)")
        values = [value_of(a) for a in args]
        defaults = helper.__defaults__ or ()
        missing = n - len(values)
        if missing > len(defaults):
            self._fail(node, f"{helper.__qualname__} is called with too few arguments")
        for value in defaults[len(defaults) - missing:] if missing else ():
            if not isinstance(value, (int, float, bool, type(None))):
                self._fail(node, f"{helper.__qualname__} is called without an argument whose default "
                                 f"({value!r}) is not a number; pass it explicitly")
            values.append((repr(value), None))
        return values

    # -- hooks reverse mode overrides

    def _scaled(self, ts, make):
        """The derivative of a value that is ``make(t)`` for each tangent ``t`` (linear in it)."""
        return self.tangent_temps([make(t) for t in ts])

    def _array_linear(self, node, ts, make):
        """The derivative of a linear function of an array (``np.sum(a)``, ``a.T``)."""
        return self.tangent_temps([make(t) for t in ts])

    def _helper_plan(self, seeds) -> Plan:
        """The plan of a helper called with these arguments active (``"arg"``) or not."""
        return dataclasses.replace(self.plan, seeds=seeds, finish="helper", single=True, has_aux=False)

    def _helper_extra(self) -> list[str]:
        """Arguments every transformed helper takes after the tangents (reverse mode: the tape)."""
        return []

    # -- statements (the lane IR's; ``a = b = v`` is one group of stores of one value)

    def block(self, statements) -> None:
        start = len(self.lines)
        for group in _grouped(statements):
            self.statement(group)
        if len(self.lines) == start:
            self.emit("pass")

    def statement(self, group) -> None:
        node = self._at = group[0]
        self.emit(f"# {os.path.basename(self._line(node))}: {_first_line(group)}")
        method = getattr(self, f"_st_{type(node).__name__}", None)
        if method is None:
            self._fail(node, f"the statement {_statement_name(node)} is not supported in a differentiated lane")
        method(group if isinstance(node, (ir.Assign, ir.Do)) else node)

    def _st_Exit(self, node):
        if node.kind != "return":
            self.emit(node.kind)
        elif node.value is None:
            self._fail(node, "a differentiated lane must return a value")
        else:
            getattr(self, f"_finish_{self.plan.finish}")(node.value)

    def _st_Raise(self, node):
        self.emit(_statement_text((node,)))  # its value is dropped: only the primal call matters

    _st_Assert = _st_Raise

    def _st_Do(self, group):
        call = group[0].expr
        if _store(call):
            return self._st_Assign(group)
        helper = _helper(self._called(call)) if isinstance(call, ir.Prim) else None
        if helper is not None and self.active_ir(call) and _aliasing.mutates(helper):
            self.ex(call)  # a helper writing into its argument: its transformed version updates the tangent
        else:
            self._st_Raise(group[0])

    def _st_Assign(self, group):
        targets, value = [_target(s) for s in group], _stored_value(group[0])
        target = targets[0]
        if not _inplace(value) or not isinstance(target, ir.Var):
            self._assign(targets, value)  # a[i] op= e: a[i] = a[i] op e writes into a, as Python does
        elif target.name not in self.active and not self.active_ir(value):
            self.emit(_statement_text(group))  # nothing differentiated: as written
        elif target.name in self.active.inplace:
            self._update(target.name, value)
        else:  # no other name sees its storage: a new value is the same, and stays differentiable again
            self._assign(targets, value)

    def active_ir(self, e) -> bool:
        """Whether the IR expression ``e`` may carry a nonzero derivative."""
        return active_expr(e, self.active, self._called)

    def _assign(self, targets, value) -> None:
        p, ts = self.ex(value)
        texts = " = ".join(_target_text(t) for t in targets)
        if ts is None:
            self.emit(f"{texts} = {p}")
            for target in targets:
                self._zero_target(target, value)
            return
        if self._reaches_update(targets, value) and not _shares(value):
            p, ts = self._mirrored(value, self.atom(p), ts)
        for j in range(self.plan.k):
            self.emit(" = ".join(self._tangent_target(t, j) for t in targets) + f" = {ts[j]}")
        self.emit(f"{texts} = {p}")

    def _tangent_target(self, target, j) -> str:
        if isinstance(target, ir.Var):
            return self.tan(target.name, j) if target.name in self.active else f"{self.pre}drop"
        if isinstance(target, ir.Unpack) and target.star is None:
            return "(" + "".join(self._tangent_target(e, j) + ", " for e in target.items) + ")"
        if isinstance(target, ir.Item) and isinstance(target.base, ir.Var):
            return f"{self.tan(target.base.name, j)}[{self.text(target.index)}]"
        self._fail(self._at, f"assigning to {_target_text(target)} is not supported in a differentiated lane")

    def _zero_target(self, target, value) -> None:
        """After an inactive value is stored into active locals: their tangents are zero."""
        if isinstance(target, ir.Var) and target.name in self.active:
            scalar = _is_scalar(value) and target.name not in self.active.shared  # else an array
            zero = self.ZERO if scalar else f"{self.pre}ad.{self.ZERO_OF}({target.name})"
            for j in range(self.plan.k):
                self.emit(f"{self.tan(target.name, j)} = {zero}")
        elif isinstance(target, ir.Unpack) and target.star is None:
            paired = _kind(value) == "literal" and len(value.args) == len(target.items)
            for k, element in enumerate(target.items):
                self._zero_target(element, value.args[k] if paired else ir.Var("?"))
        elif isinstance(target, ir.Item) and isinstance(target.base, ir.Var) and target.base.name in self.active:
            for j in range(self.plan.k):
                self.emit(f"{self.tan(target.base.name, j)}[{self.text(target.index)}] = {self.ZERO}")
        elif not isinstance(target, (ir.Var, ir.Item)):
            self._fail(self._at, f"assigning to {_target_text(target)} is not supported in a differentiated lane")

    def _st_If(self, node):
        self.emit(f"if {self.text(node.cond)}:")
        self._indented(node.then)
        if node.orelse:
            self.emit("else:")
            self._indented(node.orelse)

    def _st_Loop(self, node):
        if node.orelse:
            self._fail(node, f"{'while' if node.kind == 'while' else 'for'} ... else is not supported in a "
                             "differentiated lane")
        if node.kind == "while":
            self.emit(f"while {self.text(node.cond)}:")
            self._indented(node.body)
            return
        if not self.active_ir(node.iter):
            self.emit(f"for {_target_text(node.target)} in {self.text(node.iter)}:")
            self._indented(node.body)
            return
        p, ts = self.ex(node.iter)  # iterating over a differentiated array: by index
        seq = self.atom(p)
        index = f"{self.pre}i{self.count}"
        self.count += 1
        self.emit(f"for {index} in range(len({seq})):")
        self.depth += 1
        self._at = node
        for j in range(self.plan.k):
            self.emit(f"{self._tangent_target(node.target, j)} = {ts[j]}[{index}]")
        self.emit(f"{_target_text(node.target)} = {seq}[{index}]")
        self.depth -= 1
        self._indented(node.body)

    def _indented(self, body) -> None:
        self.depth += 1
        self.block(body)
        self.depth -= 1

    # -- results

    def _result(self, value):
        p, ts = self.ex(value)
        p = self.atom(p)
        return p, [self.atom(self._or_zero(ts, j, value, p)) for j in range(self.plan.k)]

    def _finish_helper(self, value):
        p, ts = self._result(value)
        self.emit(f"return ({p}, {', '.join(ts)})")

    def _finish_jvp(self, value):
        p, ts = self._result(value)
        self.emit(f"return {self.pre}ad.out(({p}, {ts[0]}))")

    def _gradients(self, ts, aux: bool) -> str:
        picked = [f"{t}[0]" if aux else t for t in ts]
        return picked[0] if self.plan.single else "(" + "".join(t + ", " for t in picked) + ")"

    def _checked_result(self, value):
        """The result and its tangents, the value checked to be one scalar."""
        p, ts = self._result(value)
        out = self.temp(f"{p}[0]") if self.plan.has_aux else p
        self.temp(f'{self.pre}ad.scalar_result({out}, "{self.plan.transform}")')
        return p, ts

    def _finish_grad(self, value):
        p, ts = self._checked_result(value)
        grads = self._gradients(ts, self.plan.has_aux)
        self.emit(f"return {self.pre}ad.out(({grads}, {p}[1]))" if self.plan.has_aux
                  else f"return {self.pre}ad.out({grads})")

    def _finish_value_and_grad(self, value):
        p, ts = self._checked_result(value)
        self.emit(f"return {self.pre}ad.out(({p}, {self._gradients(ts, self.plan.has_aux)}))")

    def _finish_jacfwd(self, value):
        if self.plan.has_aux:
            p, ts = self._result(value)
            self.emit(f"return {self.pre}ad.out(({self._jacobian_of(f'{p}[0]', [f'{t}[0]' for t in ts])}, {p}[1]))")
            return
        self.emit(f"return {self.pre}ad.out({self._jacobian(value)})")

    def _jacobian(self, value) -> str:
        """The Jacobian of a returned expression: its tuple structure (when written as
        a tuple) with, at each leaf, the leaf's tangents along every argument."""
        if _kind(value) == "call" and len(_call_args(value)) == 1 and self._called(value) is intrinsics.out:
            return self._jacobian(_call_args(value)[0])  # a transformed lane's result, transformed again
        if _kind(value) == "literal" and value.op == "tuple":
            return "(" + "".join(self._jacobian(e) + ", " for e in value.args) + ")"
        p, ts = self._result(value)
        return self._jacobian_of(p, ts)

    def _jacobian_of(self, p, ts) -> str:
        self.temp(f'{self.pre}ad.scalar_result({p}, "{self.plan.transform}")')
        return ts[0] if self.plan.single else "(" + "".join(t + ", " for t in ts) + ")"

    # -- the function

    def function(self):
        self._body()
        name = f"{self.fn.__name__}_{self.plan.finish}"
        name = name if name.isidentifier() else f"lambda_{self.plan.finish}"
        params = self.params + self._tangent_params()
        if self.plan.finish in ("grad", "value_and_grad", "jacfwd", "jacrev") and self.fn.__defaults__:
            # Written into the def (not only set on the function): the SPMD path reads them there.
            first = len(self.params) - len(self.fn.__defaults__)
            for k, value in enumerate(self.fn.__defaults__):
                self.closure[f"{self.pre}default{k}"] = value
                params[first + k] += f"={self.pre}default{k}"
        closure = {**{n: c.cell_contents for n, c in zip(self.fn.__code__.co_freevars, self.fn.__closure__ or (),
                                                         strict=True)}, **self.objects, **self.closure}
        comment = f"# Generated by lanewise ({self.plan.transform}, {self._how()}) from {self.fn.__qualname__} at " \
            f"{_where(self.fn)}"
        made = build(comment, f"def {name}({', '.join(params)}):", self.lines, closure, self.fn.__globals__)
        # Not "lw.grad(...)": lanewise's error summary looks for its own "lw.x: " messages.
        made.__qualname__ = f"{self.plan.transform.removeprefix('lw.')}({self.fn.__qualname__})"
        made._lw_origin = getattr(self.fn, "_lw_origin", self.fn)  # errors name the user's def, not ours
        # a lane rebuilt from bytecode is a block dispatch loop whose locals are first
        # assigned inside it, and so is its derivative: the tpu backend must know (lower.py)
        made._lw_blocks = self.ir.blocks
        return made

    def _body(self) -> None:
        self._seed()
        self.block(self.ir.body)

    def _how(self) -> str:
        """How the derivative is computed, for the generated source's first line."""
        return f"forward mode, {self.plan.k} tangent(s)"

    def _tangent_params(self) -> list[str]:
        ks = range(self.plan.k)
        if self.plan.finish == "helper":
            return [self.tan(p, j) for j in ks for p, s in zip(self.params, self.plan.seeds, strict=True) if s == "arg"]
        return [f"{self.pre}tangent_{p}" for p, s in zip(self.params, self.plan.seeds, strict=True) if s == "arg"]

    def _seed(self) -> None:
        for param, seed in zip(self.params, self.plan.seeds, strict=True):
            if seed == "arg" and self.plan.finish != "helper":
                self.emit(f'{self.tan(param, 0)} = {self.pre}ad.zero_tangent_of({param}, '
                          f'{self.pre}tangent_{param}, "{param}")')
            elif isinstance(seed, tuple):
                self.emit(f'{self.tan(param, 0)} = {self.pre}ad.seed({param}, {_number(seed[0])}, "{param}", '
                          f'"{self.plan.transform}")')
                for j, value in enumerate(seed[1:], start=1):
                    self.emit(f"{self.tan(param, j)} = {_number(value)}")
            elif seed is None and param in self.active:  # not differentiated, but reassigned from active values
                for j in range(self.plan.k):
                    self.emit(f"{self.tan(param, j)} = {self.pre}ad.{self.ZERO_OF}({param})")


_BINOPS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "pow": "**", "mod": "%"}
#: The operator primitives whose jvp rules differentiate those operators.
_OPERATORS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
              "pow": operator.pow, "mod": operator.mod}
#: ``np.dot(a, b)`` is bilinear.
_DOT = Rule(2, left="{m}.dot({t}, {y})", right="{m}.dot({x}, {u})")


def _scan_step(made, k: int, xs_active: bool):
    """The step ``lw.scan`` runs for a differentiated scan: carry and x packed with
    their k tangents, ``made`` (the step's transformed helper) unpacked around."""
    x_args = ["x[0]"] if xs_active else ["x"]
    tangents = [a for j in range(1, k + 1) for a in [f"c[{j}]"] + ([f"x[{j}]"] if xs_active else [])]
    ts = [f"t{j}" for j in range(k)]
    lines = [f"    p, {', '.join(ts)} = step(c[0], {', '.join(x_args + tangents)})",
             f"    return (p[0], {', '.join(t + '[0]' for t in ts)}), (p[1], {', '.join(t + '[1]' for t in ts)})"]
    return build(f"# lw.scan step of {made.__qualname__}, {k} tangent(s)", "def scan_step(c, x):", lines,
                 {"step": made}, {})


#: Emitter classes by ``Plan.mode`` (autodiff.reverse registers "reverse").
EMITTERS = {"forward": Emitter}
