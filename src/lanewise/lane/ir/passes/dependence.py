"""Dependence analysis over the lane IR: which lane parameters each output depends on.

JAX rejects ``out_axes=None`` for an output that depends on the mapped axis; it
knows by tracing.  lanewise knows by a conservative taint analysis of the lane's
IR: a value is tainted by a parameter when it is computed from it, or
assigned/returned under control flow (``if``, loop, ``break``) that depends on
it.  "Conservative" means it may say "depends" for a value that does not, never
the reverse.  What it does not model (an :class:`~lanewise.lane.ir.nodes.Unsupported`
node, a function rebuilt from bytecode) makes every output depend on everything.

Values also move outside the lane's own names, and the analysis follows them:

* memory: a write into an array (``a[i] = v``, ``a.fill(v)``, a helper given
  ``a``) taints every name that may share its memory; a write into memory the
  lane did not make (a parameter, a global) may be seen through any of them;
* the world: state outside the lane (globals, closure cells, what a helper
  with side effects changes).  Writing it (a store into a global, a call of a
  function with side effects) taints ``world``, and reading a global or calling
  a helper after that reads ``world``;
* functions of the lane (nested ``def``/``lambda``): computed from everything;
  calling one, or handing one to another function, may run its writes into the
  lane's names, so those names then depend on everything;
* ``try``: everything it assigns or writes depends on everything, and a
  ``return``/``raise`` inside it is a path the analysis does not follow (unsure);
* ``lw.scan``: the carry follows the step function's own dependences (a carry
  the step returns unchanged depends on ``init`` only, as JAX's tracing finds).

A :class:`~lanewise.lane.ir.nodes.Global`'s value comes from the globals and
closure cells of the function it is read in (``Function.origin``).

Example:
    >>> def lane(x, y):
    ...     s = x + 1
    ...     return s, y * 2
    >>> output_dependencies(lane)
    (frozenset({'x'}), frozenset({'y'}))
"""

from __future__ import annotations

import builtins
import sys
import types
import weakref
from typing import Callable, NamedTuple

import numpy as np

from .. import nodes as ir
from .walk import (base_name, call_args, calls, display, fields, has_exit, inplace, is_call, is_store, own,
                   same_code, store_names, store_target, stored, target_read, view_sources, walk, written)

Deps = frozenset

#: Passes of the taint analysis before it gives up (unsure: every output depends).
MAX_PASSES = 100

#: Modules whose functions change nothing but the arrays they are given (handled
#: as writes into those operands) and whose results depend on their arguments only.
_PURE_MODULES = ("math", "cmath", "numpy", "lanewise.random", "lanewise.lanemath")
_CARRY, _X = "\0carry", "\0x"  # the step's parameters while its scan is analysed
#: Short module names the IR writes (nodes.Prim), longest first.
_ALIASES = (("lw.random", "lanewise.random"), ("lw", "lanewise"), ("np", "numpy"))


def output_dependencies(fn: Callable, values_only: bool = False) -> tuple[Deps, ...] | Deps | None:
    """Per returned tuple element (or one set for any return) the params used.

    ``None`` means the lane could not be analysed: assume everything depends.
    ``values_only``: the params the returned values are computed from, not those
    that only choose which values (``a * 3 if k > 0 else a`` is computed from ``a``).

    Example:
        >>> output_dependencies(lambda a, k: a * 3 if k > 0 else a, values_only=True)
        frozenset({'a'})
    """
    code, fn = getattr(fn, "__code__", None), getattr(fn, "py_func", fn)
    units: dict = {}  # this analysis's IR: built once per function, let go after
    unit = _unit(fn, units) if isinstance(code, types.CodeType) and isinstance(fn, types.FunctionType) else None
    if unit is None:
        return None
    taint = _Taint(*unit, namespace_of(fn), units=units)
    taint.values_only = values_only
    return taint.outputs() if taint.run() else None


def namespace_of(fn) -> dict:
    """The names ``fn`` reads from outside: builtins, its globals, its closure cells."""
    fn = getattr(fn, "py_func", fn)
    names = dict(vars(builtins))
    names.update(getattr(fn, "__globals__", {}))
    code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None) or ()
    for name, cell in zip(code.co_freevars if code else (), cells, strict=True):
        try:
            names[name] = cell.cell_contents
        except ValueError:  # an empty cell: unknown
            names.pop(name, None)
    return names


def _unit(fn: types.FunctionType, units: dict):
    """(``fn``'s IR, the module it was built in: its ``call:`` names), or None when there
    is no source text to read (a function rebuilt from bytecode is a dispatch loop, not
    the code the user wrote).  ``units``: those built so far (a helper's comes with the
    lane's build)."""
    if fn not in units:
        from ..build import build

        module = build(fn)
        for f in module.helpers:
            origin = f.python_function()
            if isinstance(origin, types.FunctionType):
                units.setdefault(origin, (f, module))
        units[fn] = (module.entry, module)
    return units[fn] if units[fn][0].source == "source" else None


# ----------------------------------------------------------------------------- the analysis


class _Taint:
    def __init__(self, fn: ir.Function, module: ir.LaneModule, namespace: dict, env: dict | None = None,
                 world: Deps = Deps(), seen: frozenset = frozenset(), units: dict | None = None):
        self.fn, self.module, self.namespace, self.seen = fn, module, namespace, seen
        self.units = {} if units is None else units  # the IR of the functions it reaches (:func:`_unit`)
        self.params = [p.name for p in fn.params]
        self.env: dict[str, Deps] = {p: Deps({p}) for p in self.params} if env is None else dict(env)
        declared = {name for n in own(fn.body) if isinstance(n, ir.Unsupported) for name in n.names}
        self.locals = (stored(own(fn.body), defs=True) | set(self.params)) - declared  # the lane's own names
        self.functions = {n.function.name for n in own(fn.body) if isinstance(n, ir.Def)}
        self.helpers = {f.name: f for f in module.functions()}
        self.nested_writes = self._nested_writes()
        self.returns: list[list[Deps]] = []  # one entry per return statement
        self.sticky = Deps()  # taint of "did we get here" after tainted exits
        self.world = world  # taint of the state outside the lane (module docstring)
        self.effects = False  # whether the function may change state outside it
        self.param_writes = False  # whether it may write into an array it was given
        self.unsure = False  # a construct the analysis does not model: every output depends
        self.values_only = False  # no control taint: what values are computed from
        # Names that may share memory (b = a, a[0:1], a.T, a.reshape(2)): a write
        # through one taints them all.  Groups only grow (conservative).
        self.groups: dict[str, set[str]] = {}
        self.memo: dict = {}  # id(node) -> (node, what the passes re-ask of it): the IR does not change

    def once(self, kind: str, node, find):
        """``find(node)``, computed once per node (each pass asks again)."""
        key = (kind, id(node))
        if key not in self.memo:
            self.memo[key] = (node, find(node))  # the node is kept: its id is not reused
        return self.memo[key][1]

    def run(self) -> bool:
        """Analyse; False when the analysis gave up (every output depends)."""
        # Loops and sticky control taint need passes until nothing changes; taints
        # only grow over a finite set of names, so this ends (the cap is a guard).
        for _ in range(MAX_PASSES):
            before = dict(self.env), list(map(tuple, self.returns)), self.sticky, self.world
            self.returns = []
            self.block(self.fn.body, Deps())
            if (dict(self.env), list(map(tuple, self.returns)), self.sticky, self.world) == before:
                return not self.unsure
        return False

    def outputs(self):
        if not self.returns:
            return Deps()
        widths = {len(r) for r in self.returns}
        if len(widths) == 1 and widths != {1}:
            return tuple(Deps().union(*col) for col in zip(*self.returns, strict=True))
        return Deps().union(*(d for r in self.returns for d in r))

    def _nested_writes(self) -> set[str]:
        """The lane's names its nested functions may change when they run (all of them
        where a nested function holds what the IR does not model: ``with``...)."""
        names: set = set()
        params = [p.default for p in self.fn.params]
        for n in own((self.fn.body, params)):
            if isinstance(n, (ir.Def, ir.Lambda)):
                inside = n.function
                unsupported = [u for u in walk(inside) if isinstance(u, ir.Unsupported)]
                if any(not _declares(u) for u in unsupported):
                    return set(self.locals)
                names.update(written(inside), *(u.names for u in unsupported if u.what == _NONLOCAL))
        return names & self.locals

    # -- statements -------------------------------------------------------------
    def block(self, body, ctl: Deps) -> None:
        for stmt in body:
            self.stmt(stmt, Deps() if self.values_only else ctl | self.sticky)

    def stmt(self, s, ctl: Deps) -> None:
        getattr(self, "s_" + type(s).__name__)(s, ctl)

    def s_Unsupported(self, s, ctl):
        if _declares(s):  # global/nonlocal: the names are the world's (self.locals leaves them out)
            self.effects = True
        else:
            self.unsure = True

    def s_Try(self, s, ctl):
        # Not followed: anything in it may change, under everything.
        everything = ctl | self.all_taint()
        for name in sorted(stored(walk(s), defs=False)) + written(s):
            self.write(name, everything)
        self.effect(everything)
        # A return or raise inside it is a path the analysis does not follow: it
        # cannot say what the outputs depend on.
        self.unsure |= any(isinstance(n, (ir.Exit, ir.Raise)) or (isinstance(n, ir.Unsupported) and not _declares(n))
                           for n in own(s))

    def s_Exit(self, s, ctl):
        if s.kind != "return":
            return
        parts = self.parts(s.value) if s.value is not None else None
        if parts is not None:
            self.returns.append([p | ctl for p in parts])
        else:
            self.returns.append([self.expr(s.value) | ctl])
        self.sticky |= ctl

    def s_Assign(self, s, ctl):
        if inplace(s.value):  # x += v
            self.bind(s.target, self.expr(s.value.args[1]) | self.expr(s.value.args[0]) | ctl, s.loc)
        else:
            self.target(s.target, s.value, ctl, s.loc)

    def s_Do(self, s, ctl):
        if not is_store(s.expr):
            self.expr(s.expr, ctl)
            return
        target, value = store_target(s.expr), s.expr.args[-1]
        if inplace(value):  # x[i] += v
            self.bind(target, self.expr(value.args[1]) | self.expr(value.args[0]) | ctl, s.loc)
        else:
            self.target(target, value, ctl, s.loc)

    def s_If(self, s, ctl):
        test = self.expr(s.cond, ctl)
        # Both branches the same code: which one runs changes nothing (JAX's
        # ``y if x < 0 else y`` under out_axes=None).
        inner = ctl if self.once("same", s, lambda s: same_code(s.then, s.orelse)) else ctl | test
        self.block(s.then, inner)
        self.block(s.orelse, inner)

    def s_Loop(self, s, ctl):
        if s.kind == "while":
            ctl = ctl | self.expr(s.cond, ctl)
        else:
            it = self.expr(s.iter, ctl)
            self.bind(s.target, it | ctl, s.loc)
            ctl = ctl | it
        # A break/continue under a tainted condition makes every later value of
        # the loop (and after it) depend on that condition.
        exits = self.exit_taint(s.body)
        for _ in range(2):
            self.block(s.body, ctl | exits)
        self.sticky |= exits
        self.block(s.orelse, ctl | exits)

    def exit_taint(self, body) -> Deps:
        return self.reads(*self.once("exits", body, _exit_tests))

    def s_Def(self, s, ctl):
        # A nested function may read any variable when called (late binding), and
        # its defaults run now: computed from everything.
        for p in s.function.params:
            self.expr(p.default, ctl)
        self.assign(s.function.name, ctl | self.all_taint())

    def s_Assert(self, s, ctl):
        self.sticky |= self.expr(s.test, ctl)

    def s_Raise(self, s, ctl):
        self.expr(s.exc, ctl)
        self.sticky |= ctl

    # -- assignment ---------------------------------------------------------------
    def target(self, target, value, ctl, loc):
        parts = self.parts(value)
        if isinstance(target, ir.Unpack) and target.star is None and parts is not None \
                and len(parts) == len(target.items):
            values = value.args if display(value) else [None] * len(parts)
            for t, v, p in zip(target.items, values, parts, strict=True):
                if v is not None:
                    self.target(t, v, ctl, loc)
                else:
                    self.bind(t, p | ctl, loc)
            return
        if isinstance(target, ir.Var):
            for source in view_sources(value):
                if source in self.locals or source in self.env or not _immutable(self.namespace.get(source)):
                    self.share(target.name, source)
        self.bind(target, self.expr(value, ctl) | ctl, loc)

    def parts(self, value) -> list[Deps] | None:
        """The taints of the elements of a tuple ``value`` where the analysis knows them:
        a tuple display without ``*`` (whose sizes it cannot count), an ``lw.scan``."""
        if display(value):
            return [self.expr(e) for e in value.args]
        if self.is_scan(value):
            return self.scan(value)
        return None

    def bind(self, target, taint: Deps, loc) -> None:
        if isinstance(target, (ir.Item, ir.Field)):
            taint = taint | self.expr(target_read(target, loc))  # a[i] = v taints a by i and v
            for name in store_names(target):
                self.write(name, taint)
            return
        for name in store_names(target):
            self.assign(name, taint)

    def share(self, a: str, b: str) -> None:
        """``a`` may be a view of ``b``'s memory (or the reverse)."""
        group = self.groups.get(a, {a}) | self.groups.get(b, {b})
        for name in group:
            self.groups[name] = group

    def write(self, name: str, taint: Deps) -> None:
        """A write into the memory of ``name``: every name sharing it is tainted.
        Memory the lane did not make (a parameter's, a global's) may be any other
        argument's too, or read by any global or helper: all of them are tainted."""
        group = self.groups.get(name, {name})
        for alias in group:
            self.assign(alias, taint)
        if any(n in self.params for n in group):
            self.param_writes = True
        if any(n in self.params or n not in self.locals for n in group):
            for p in self.params:
                self.assign(p, taint)
            self.effect(taint)

    def assign(self, name: str, taint: Deps):
        # Union, not overwrite: a name assigned in several branches keeps all.
        self.env[name] = self.env.get(name, Deps()) | taint
        if name not in self.locals:  # a global or nonlocal name
            self.effect(taint)

    def effect(self, taint: Deps) -> None:
        """A change outside the lane, under ``taint``."""
        self.effects = True
        self.world |= taint

    def all_taint(self) -> Deps:
        return Deps().union(*self.env.values(), self.world)

    # -- expressions --------------------------------------------------------------
    def expr(self, e, ctl: Deps = Deps()) -> Deps:
        """The taint of ``e``, after the effects of evaluating it under ``ctl``."""
        if e is None:
            return Deps()
        taint = self.read(e)
        for name in self.once("walrus", e, _walrus_names):  # (y := f(x)) binds y inside an expression
            self.assign(name, taint | ctl)
        for call in self.once("calls", e, calls):
            self.call(call, taint | ctl)
        return taint

    def call(self, p: ir.Prim, taint: Deps) -> None:
        """The effects of a call: writes into its operands, and whatever its callee does."""
        # A callee may write into the arrays it is given, or (a method: a.fill(x),
        # a.sort()) into the object it is called on.
        argv, obj = call_args(p)
        operands = [base_name(v) for v in (*argv, *(v for _, v in p.keywords))]
        if not self.writes_operands(p, argv):
            operands = []
        if obj is not None and p.op[len("method."):] not in _READ_ONLY_METHODS:
            operands.append(base_name(obj))
        for name in operands:
            if name is not None and (name in self.locals or name in self.env
                                     or not _immutable(self.namespace.get(name))):
                self.write(name, taint)
        known = [self.known_callee(p)] + ([self.known_value(argv[0])] if argv and self.is_scan(p) else [])
        if not all(known):
            # Calling a function of the lane (or one that is an argument, or
            # computed) may run the nested functions' writes into the lane's names.
            everything = taint | self.all_taint()
            for name in self.nested_writes:
                self.write(name, everything)
            self.effect(everything)
        if any(isinstance(a, ir.Var) and a.name in self.functions for a in argv):
            for name in self.nested_writes:  # a lane function handed to the callee may be run by it
                self.write(name, taint | self.all_taint())

    def writes_operands(self, p: ir.Prim, argv) -> bool:
        """Whether the callee may write into the arrays passed to it."""
        if any(k == "out" for k, _ in p.keywords):
            return True
        if p.op.startswith("method.") and base_name(p.args[0]) in self.locals:
            return False  # a method of a lane value (a.fill(x), t.append(v)) writes its object only
        value = self.resolve_call(p)
        if value is None:
            return True
        if isinstance(value, np.ufunc):
            return len(argv) > value.nin
        name = getattr(value, "__name__", "")
        module = getattr(getattr(value, "py_func", value), "__module__", None) or ""
        if module.startswith("numpy") or isinstance(value, types.BuiltinFunctionType) or isinstance(value, type):
            return name in _NUMPY_WRITERS
        return _summary(value, self.seen, self.units).writes_params

    def known_callee(self, p: ir.Prim) -> bool:
        """Whether call ``p`` changes nothing outside its operands: a method of a lane
        value (its object is written), a pure library function, or a Python
        function that the analysis finds has no effects."""
        if p.op.startswith("method.") and base_name(p.args[0]) in self.locals:
            return True
        value = self.resolve_call(p)
        return value is not None and _summary(value, self.seen, self.units).pure

    def known_value(self, e) -> bool:
        """:meth:`known_callee` for a function given as a value (a scan's step)."""
        if isinstance(e, ir.Prim) and e.op == "attr" and base_name(e) in self.locals:
            return True
        value = self.resolve_value(e)
        return value is not None and _summary(value, self.seen, self.units).pure

    # -- names --------------------------------------------------------------------
    def name(self, name: str) -> Deps:
        """The taint of reading ``name``: a local's, or a global/closure value's (the
        world's, unless it is a module)."""
        if name in self.locals:
            return self.env.get(name, Deps())
        world = Deps() if isinstance(self.namespace.get(name), types.ModuleType) else self.world
        return self.env.get(name, Deps()) | world

    def callee(self, p: ir.Prim) -> Deps:
        """The taint of reading what call ``p`` calls (a method's object or a local
        callee is among its arguments)."""
        op = p.op
        if op == "call" or op.startswith("method."):
            return Deps()
        if op.startswith("call:"):
            return self.world
        root = op.split(".")[0]
        if "." in op and isinstance(self.namespace.get(root), types.ModuleType):
            return self.env.get(root, Deps())  # reached through a module
        return self.name(op) if "." not in op else self.world

    def resolve_call(self, p: ir.Prim):
        """The object call ``p`` calls, when it does not depend on the lane."""
        if p.op.startswith("call:"):
            helper = self.helpers.get(p.op[len("call:"):])
            return None if helper is None else helper.python_function()
        if p.op.startswith("method."):
            return _attribute(self.resolve_value(p.args[0]), p.op[len("method."):])
        if p.op == "call":
            return self.resolve_value(p.args[0])
        return self.resolve_path(p.op)

    def resolve_value(self, e):
        """The object expression ``e`` names, when it does not depend on the lane."""
        if isinstance(e, ir.Var):
            return None if e.name in self.locals else self.namespace.get(e.name)
        if isinstance(e, ir.Global):
            return self.resolve_path(e.name)
        if isinstance(e, ir.Prim) and e.op == "attr":
            return _attribute(self.resolve_value(e.args[0]), dict(e.params)["name"])
        return None

    def resolve_path(self, path: str):
        """A global, builtin or dotted module path (``np.linalg.norm``, ``lw.scan``)."""
        root, *attrs = path.split(".")
        if root in self.namespace:
            value = self.namespace[root]
            for attr in attrs:
                value = _attribute(value, attr)
            if value is not None:
                return value
        for alias, module in _ALIASES:
            if path == alias or path.startswith(alias + "."):
                path = module + path[len(alias):]
                break
        names = path.split(".")
        for k in range(len(names), 0, -1):
            value = sys.modules.get(".".join(names[:k]))
            if value is not None:
                for attr in names[k:]:
                    value = _attribute(value, attr)
                return value
        return None

    def read(self, e) -> Deps:
        """The parameters the value of ``e`` is computed from."""
        if e is None or isinstance(e, ir.Const):
            return Deps()
        if isinstance(e, ir.Var):
            return self.name(e.name)
        if isinstance(e, ir.Global):
            return self.env.get(e.name.split(".")[0], Deps()) if "." in e.name else self.name(e.name)
        if isinstance(e, ir.Unsupported):
            self.unsure = True
            return Deps()
        if isinstance(e, ir.Lambda):
            f = e.function
            return self.reads(*(p.default for p in f.params), *(s.value for s in f.body))
        if isinstance(e, ir.Comp):
            return self.reads(*e.element, *(part for g in e.generators for part in (g.target, g.iter, *g.conds)))
        if isinstance(e, (ir.Unpack, ir.Item, ir.Field)):  # a comprehension's target
            return self.reads(*fields(e)[:2]) if not isinstance(e, ir.Unpack) else self.reads(*e.items)
        return self.read_prim(e)

    def reads(self, *parts) -> Deps:
        return Deps().union(*(self.read(p) for p in parts if not isinstance(p, str)))

    def read_prim(self, e: ir.Prim) -> Deps:
        if e.op == "ifexp" and self.once("same", e, lambda e: same_code((e.args[1],), (e.args[2],))):
            return self.read(e.args[1])
        if e.op == "ifexp" and self.values_only:
            return self.read(e.args[1]) | self.read(e.args[2])
        index = e.args[1] if e.op == "getitem" else None
        if isinstance(index, ir.Const) and isinstance(index.value, int):
            parts = self.parts(e.args[0])
            if parts is not None and -len(parts) <= index.value < len(parts):
                return parts[index.value]
        if self.is_scan(e):
            return Deps().union(*self.scan(e))
        if e.op == "walrus":
            return self.name(dict(e.params)["name"]) | self.read(e.args[0])
        if e.op == "dict" and e.type:
            return self.reads(*(a for item in e.args for a in item.args))
        out = self.reads(*e.args, *(v for _, v in e.keywords))
        return out | self.callee(e) if is_call(e) else out

    # -- lw.scan ------------------------------------------------------------------
    def is_scan(self, p) -> bool:
        return isinstance(p, ir.Prim) and is_call(p) and self.resolve_call(p) is _scan()

    def scan(self, call: ir.Prim) -> list[Deps]:
        """Taints of ``(carry, ys)`` of an ``lw.scan`` call."""
        args = dict(zip(("f", "init", "xs", "length", "reverse", "unroll"), call.args, strict=False))
        args.update({k: v for k, v in call.keywords if k != "**"})
        everything = self.reads(*call.args, *(v for _, v in call.keywords))
        step = self.resolve_value(args["f"]) if "f" in args else None
        unit = _unit(step, self.units) if isinstance(step, types.FunctionType) else None
        if unit is None or len(unit[0].params) != 2 or any(k == "**" for k, _ in call.keywords):
            return [everything, everything]
        node = unit[0]
        init, xs = self.read(args.get("init")), self.read(args.get("xs"))
        # How many steps run: uniform when xs is a parameter's (its lanes' shapes agree).
        length = self.read(args.get("length")) | (Deps() if self.fixed_shape(args.get("xs")) else xs)
        inner = _Taint(*unit, namespace_of(step), {p.name: Deps({t}) for p, t in zip(node.params, (_CARRY, _X),
                                                                                     strict=True)},
                       self.world, self.seen | {step.__code__}, self.units)
        if not inner.run() or inner.effects:
            self.effect(everything)
            return [everything, everything]
        out = inner.outputs()
        carry_out, y_out = out if isinstance(out, tuple) and len(out) == 2 else (out, out)
        carry = init
        if not _passes_carry_through(node):
            carry |= length
            while True:  # the carry after k steps, for every k
                grown = carry | _substitute(carry_out, carry, xs)
                if grown == carry:
                    break
                carry = grown
        return [carry, _substitute(y_out, carry, xs) | length]

    def fixed_shape(self, xs) -> bool:
        """Whether ``xs`` is None or parameters not reassigned (pytrees of them)."""
        if xs is None or (isinstance(xs, ir.Const) and xs.value is None):
            return True
        if isinstance(xs, ir.Var):
            return xs.name in self.params and xs.name not in stored(own(self.fn.body), defs=False)
        if isinstance(xs, ir.Prim) and xs.op in ("tuple", "list") and xs.type is not None:
            return all(self.fixed_shape(e) for e in xs.args)
        return False


_NONLOCAL = "a nonlocal statement"


def _declares(u: ir.Unsupported) -> bool:
    """A ``global`` or ``nonlocal`` statement (modelled: its names are not the function's)."""
    return bool(u.names)


def _walrus_names(e) -> list[str]:
    return [dict(n.params)["name"] for n in walk(e) if isinstance(n, ir.Prim) and n.op == "walrus"]


def _exit_tests(body) -> list:
    """The tests of the ``if``s and ``while``s in ``body`` that hold an exit: when one
    is tainted, so is every later value of the loop."""
    return [n.cond for n in walk(body, (ir.Lambda,))
            if (isinstance(n, ir.If) or (isinstance(n, ir.Loop) and n.kind == "while")) and has_exit(n)]


def _attribute(value, name: str):
    if value is None:
        return None
    try:
        return getattr(value, name)
    except Exception:  # noqa: BLE001 - any attribute error: unknown
        return None




def _substitute(deps: Deps, carry: Deps, xs: Deps) -> Deps:
    """A step's dependences with its parameters replaced by what they hold."""
    out = deps - {_CARRY, _X}
    return out | (carry if _CARRY in deps else Deps()) | (xs if _X in deps else Deps())


def _passes_carry_through(fn: ir.Function) -> bool:
    """Whether every return of the step gives its carry parameter back, unassigned."""
    carry = fn.params[0].name
    returns = [n for n in own(fn.body) if isinstance(n, ir.Exit) and n.kind == "return"]
    assigned = carry in stored(walk(fn.body), defs=False)
    return bool(returns) and not assigned and all(
        isinstance(r.value, ir.Prim) and r.value.op == "tuple" and r.value.type is not None
        and len(r.value.args) == 2 and r.value.args[0] == ir.Var(carry) for r in returns)


def _scan():
    from ...scanning import scan
    return scan


class Summary(NamedTuple):
    """What calling a function may do besides computing its result."""

    pure: bool  # changes nothing outside the arrays it is given
    writes_params: bool  # may write into the arrays it is given


_summaries: "weakref.WeakKeyDictionary[types.FunctionType, tuple]" = weakref.WeakKeyDictionary()
#: Builtins that change state outside their arguments.
_IMPURE_BUILTINS = frozenset({"exec", "eval", "setattr", "delattr", "open", "input", "__import__", "globals",
                              "vars", "locals", "next", "iter"})
#: NumPy functions (and ufunc methods) that write into an argument.
_NUMPY_WRITERS = frozenset({"copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis", "at"})
#: Methods that only read their object (anything else may write into it: a.fill(x)).
_READ_ONLY_METHODS = frozenset({
    "sum", "prod", "max", "min", "mean", "std", "var", "any", "all", "argmax", "argmin", "copy", "astype",
    "dot", "cumsum", "cumprod", "ravel", "flatten", "reshape", "transpose", "conjugate", "conj", "item",
    "tolist", "nonzero", "round", "trace", "diagonal", "searchsorted", "take", "view", "squeeze", "swapaxes",
    "count", "index", "get", "keys", "values", "items", "real", "imag", "ptp", "argsort", "repeat", "clip",
    "startswith", "endswith", "format", "join", "split", "strip", "lower", "upper", "bit_length",
    "is_integer", "hex"})
_PURE, _UNKNOWN = Summary(True, False), Summary(False, True)


def _summary(value, seen: frozenset = frozenset(), units: dict | None = None) -> Summary:
    """What calling ``value`` may do: library functions by table, Python functions
    by analysing their IR (``seen``: the functions being analysed)."""
    if isinstance(value, types.BuiltinFunctionType) and getattr(value, "__module__", None) in (
            "builtins", "math", "cmath"):
        return _PURE if value.__name__ not in _IMPURE_BUILTINS else _UNKNOWN
    if isinstance(value, type):  # a constructor: builtin types, namedtuples, classes without __init__
        init = value.__init__
        return _summary(init, seen, units) if isinstance(init, types.FunctionType) else _PURE
    if isinstance(value, np.ufunc) or value is _scan():
        return _PURE  # a scan's step is analysed where the scan is called
    fn = getattr(value, "py_func", value)  # a Numba dispatcher: its Python function
    module = getattr(fn, "__module__", None) or ""
    if module.startswith("numpy.random") or module == "random":
        return _UNKNOWN
    if any(module == m or module.startswith(m + ".") for m in _PURE_MODULES):
        return Summary(True, getattr(fn, "__name__", "") in _NUMPY_WRITERS)
    if not isinstance(fn, types.FunctionType):
        return _UNKNOWN
    if fn.__code__ in seen:  # recursion: its effects are found in its own body
        return _PURE
    known = _summaries.get(fn)
    if known is None or known[0] is not fn.__code__:
        units = {} if units is None else units
        unit = _unit(fn, units)
        taint = None if unit is None else _Taint(*unit, namespace_of(fn), seen=seen | {fn.__code__}, units=units)
        found = _UNKNOWN if taint is None or not taint.run() else Summary(not taint.effects, taint.param_writes)
        known = _summaries[fn] = (fn.__code__, found)
    return known[1]


def _immutable(value) -> bool:
    """Values no call can write into (a function, a module, a number, a string...)."""
    return callable(value) or isinstance(value, (types.ModuleType, int, float, complex, str, bytes, tuple,
                                                 frozenset, np.generic, type(None)))
