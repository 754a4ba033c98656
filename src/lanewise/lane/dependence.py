"""Which lane parameters each lane output depends on (for ``out_axes=None``).

JAX rejects ``out_axes=None`` for an output that depends on the mapped axis; it
knows by tracing.  lanewise knows by a conservative taint analysis of the lane's
source: a value is tainted by a parameter when it is computed from it, or
assigned/returned under control flow (``if``, loop, ``break``) that depends on
it.  "Conservative" means it may say "depends" for a value that does not, never
the reverse.  What it does not model makes every output depend on everything.

Values also move outside the lane's own names, and the analysis follows them:

* memory: a write into an array (``a[i] = v``, ``a.fill(v)``, a helper given
  ``a``) taints every name that may share its memory; a write into memory the
  lane did not make (a parameter, a global) may be seen through any of them;
* the world: state outside the lane (globals, closure cells, what a helper
  with side effects changes).  Writing it (``global``/``nonlocal``, a store into
  a global, a call of a function with side effects) taints ``world``, and
  reading a global or calling a helper after that reads ``world``;
* functions of the lane (nested ``def``/``lambda``): computed from everything;
  calling one, or handing one to another function, may run its writes into the
  lane's names, so those names then depend on everything;
* ``lw.scan``: the carry follows the step function's own dependences (a carry
  the step returns unchanged depends on ``init`` only, as JAX's tracing finds).

Example:
    >>> def lane(x, y):
    ...     s = x + 1
    ...     return s, y * 2
    >>> output_dependencies(lane)
    (frozenset({'x'}), frozenset({'y'}))
"""

from __future__ import annotations

import ast
import builtins
import inspect
import types
import weakref
from typing import Callable, NamedTuple

import numpy as np

from ..errors import UnmappedOutputError
from ..plan.program import Program
from .source import definition, own_nodes

Deps = frozenset

#: Passes of the taint analysis before it gives up (unsure: every output depends).
MAX_PASSES = 100

#: Modules whose functions change nothing but the arrays they are given (handled
#: as writes into those operands) and whose results depend on their arguments only.
_PURE_MODULES = ("math", "cmath", "numpy", "lanewise.random", "lanewise.lanemath")
_CARRY, _X = "\0carry", "\0x"  # the step's parameters while its scan is analysed


def output_dependencies(fn: Callable, values_only: bool = False) -> tuple[Deps, ...] | Deps | None:
    """Per returned tuple element (or one set for any return) the params used.

    ``None`` means the source could not be analysed: assume everything depends.
    ``values_only``: the params the returned values are computed from, not those
    that only choose which values (``a * 3 if k > 0 else a`` is computed from ``a``).
    """
    node = _function_node(fn)
    if node is None:
        return None
    taint = _Taint(node, namespace_of(fn))
    taint.values_only = values_only
    return taint.outputs() if taint.run() else None


def _function_node(fn):
    node = definition(fn)
    if isinstance(node, ast.Lambda):
        node = ast.FunctionDef(name="<lambda>", args=node.args, body=[ast.Return(node.body)], decorator_list=[])
    return node


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


def _params(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs] + [p.arg for p in (a.vararg, a.kwarg) if p]


def _nested_functions(node):
    return [n for n in ast.walk(node) if n is not node and isinstance(n, (ast.FunctionDef, ast.Lambda))]


class _Taint:
    def __init__(self, fn: ast.FunctionDef, namespace: dict, env: dict | None = None, world: Deps = Deps(),
                 seen: frozenset = frozenset()):
        self.fn, self.namespace, self.seen = fn, namespace, seen
        self.params = _params(fn)
        self.env: dict[str, Deps] = {p: Deps({p}) for p in self.params} if env is None else dict(env)
        declared = {n for s in own_nodes(fn) if isinstance(s, (ast.Global, ast.Nonlocal)) for n in s.names}
        stored = {n.id for n in own_nodes(fn) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        stored |= {n.name for n in own_nodes(fn) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        self.locals = (stored | set(self.params)) - declared  # the lane's own names
        self.functions = {n.name for n in own_nodes(fn) if isinstance(n, ast.FunctionDef)}
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
        """The lane's names its nested functions may change when they run."""
        names = set()
        for node in _nested_functions(self.fn):
            for n in ast.walk(node):
                if isinstance(n, ast.Nonlocal):
                    names.update(n.names)
                elif isinstance(n, (ast.Subscript, ast.Attribute)) and not isinstance(n.ctx, ast.Load):
                    names.update(_target_names(n))
                elif isinstance(n, ast.Call):
                    names.update(_call_operands(n))
        return names & self.locals

    # -- statements -------------------------------------------------------------
    def block(self, body, ctl: Deps) -> None:
        for stmt in body:
            self.stmt(stmt, Deps() if self.values_only else ctl | self.sticky)

    def stmt(self, s, ctl: Deps) -> None:
        handler = getattr(self, "s_" + type(s).__name__, None)
        if handler is None:  # unknown statement (try, with, match): anything in it may change
            everything = ctl | self.all_taint()
            for name in _assigned_names(s) + _written_names(s):
                self.write(name, everything)
            self.effect(everything)
            # A return, break or raise inside it is a path the analysis does not
            # follow: it cannot say what the outputs depend on.
            self.unsure |= _has_own_exit(s)
            return
        handler(s, ctl)

    def s_Return(self, s, ctl):
        parts = self.parts(s.value) if s.value is not None else None
        if parts is not None:
            self.returns.append([p | ctl for p in parts])
        else:
            self.returns.append([(self.expr(s.value) if s.value else Deps()) | ctl])
        self.sticky |= ctl

    def s_Assign(self, s, ctl):
        for target in s.targets:
            self.target(target, s.value, ctl)

    def s_AnnAssign(self, s, ctl):
        if s.value is not None:
            self.target(s.target, s.value, ctl)

    def s_AugAssign(self, s, ctl):
        self.bind(s.target, self.expr(s.value) | self.expr(s.target) | ctl)

    def s_Expr(self, s, ctl):
        self.expr(s.value, ctl)

    def s_If(self, s, ctl):
        test = self.expr(s.test, ctl)
        # Both branches the same code: which one runs changes nothing (JAX's
        # ``y if x < 0 else y`` under out_axes=None).
        inner = ctl if _same(s.body, s.orelse) else ctl | test
        self.block(s.body, inner)
        self.block(s.orelse, inner)

    def s_While(self, s, ctl):
        self.loop(s, ctl | self.expr(s.test, ctl))

    def s_For(self, s, ctl):
        it = self.expr(s.iter, ctl)
        self.bind(s.target, it | ctl)
        self.loop(s, ctl | it)

    def loop(self, s, ctl):
        # A break/continue under a tainted condition makes every later value of
        # the loop (and after it) depend on that condition.
        exits = self.exit_taint(s.body)
        for _ in range(2):
            self.block(s.body, ctl | exits)
        self.sticky |= exits
        self.block(s.orelse, ctl | exits)

    def exit_taint(self, body) -> Deps:
        taint = Deps()
        for node in body:
            for sub in ast.walk(node):
                if isinstance(sub, (ast.If, ast.While)) and _has_exit(sub):
                    taint |= self.read(sub.test)
        return taint

    def s_FunctionDef(self, s, ctl):
        # A nested function may read any variable when called (late binding), and
        # its defaults and decorators run now: computed from everything.
        for d in s.args.defaults + s.args.kw_defaults + s.decorator_list:
            self.expr(d, ctl)
        self.assign(s.name, ctl | self.all_taint())

    s_AsyncFunctionDef = s_ClassDef = s_FunctionDef

    def s_Global(self, s, ctl):
        self.effects = True  # the names are the world's (self.locals leaves them out)

    s_Nonlocal = s_Global

    def s_Pass(self, s, ctl):
        pass

    s_Break = s_Continue = s_Pass

    def s_Assert(self, s, ctl):
        self.sticky |= self.expr(s.test, ctl)

    def s_Raise(self, s, ctl):
        self.expr(s.exc, ctl)
        self.sticky |= ctl

    # -- assignment ---------------------------------------------------------------
    def target(self, target, value, ctl):
        parts = self.parts(value)
        if isinstance(target, (ast.Tuple, ast.List)) and parts is not None and len(parts) == len(target.elts) \
                and not any(isinstance(t, ast.Starred) for t in target.elts):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [None] * len(parts)
            for t, v, p in zip(target.elts, values, parts, strict=True):
                if v is not None:
                    self.target(t, v, ctl)
                else:
                    self.bind(t, p | ctl)
            return
        if isinstance(target, ast.Name):
            for source in _view_sources(value):
                if source in self.locals or source in self.env or not _immutable(self.namespace.get(source)):
                    self.share(target.id, source)
        self.bind(target, self.expr(value, ctl) | ctl)

    def parts(self, value) -> list[Deps] | None:
        """The taints of the elements of a tuple ``value`` where the analysis knows them:
        a tuple display without ``*`` (whose sizes it cannot count), an ``lw.scan``."""
        if isinstance(value, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in value.elts):
            return [self.expr(e) for e in value.elts]
        if isinstance(value, ast.Call) and self.resolve(value.func) is _scan():
            return self.scan(value)
        return None

    def bind(self, target, taint: Deps):
        if isinstance(target, (ast.Subscript, ast.Attribute)):
            taint = taint | self.expr(target)  # a[i] = v taints a by i and v
            for name in _target_names(target):
                self.write(name, taint)
            return
        for name in _target_names(target):
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
        for node in ast.walk(e):
            if isinstance(node, ast.NamedExpr):  # (y := f(x)) binds y inside an expression
                self.assign(node.target.id, taint | ctl)
            elif isinstance(node, ast.Call):
                self.call(node, taint | ctl)
        return taint

    def call(self, node: ast.Call, taint: Deps) -> None:
        """The effects of a call: writes into its operands, and whatever its callee does."""
        # A callee may write into the arrays it is given, or (a method: a.fill(x),
        # a.sort()) into the object it is called on.
        func = node.func
        operands = [_base_name(v) for v in [*node.args, *(k.value for k in node.keywords)]]
        if not self.writes_operands(node):
            operands = []
        if isinstance(func, ast.Attribute) and func.attr not in _READ_ONLY_METHODS:
            operands.append(_base_name(func.value))
        for name in operands:
            if name is not None and (name in self.locals or name in self.env
                                     or not _immutable(self.namespace.get(name))):
                self.write(name, taint)
        callees = [node.func] + ([node.args[0]] if node.args and self.resolve(node.func) is _scan() else [])
        for callee in callees:
            if not self.known(callee):
                # Calling a function of the lane (or one that is an argument, or
                # computed) may run the nested functions' writes into the lane's names.
                everything = taint | self.all_taint()
                for name in self.nested_writes:
                    self.write(name, everything)
                self.effect(everything)
        if any(isinstance(a, ast.Name) and a.id in self.functions for a in node.args):
            for name in self.nested_writes:  # a lane function handed to the callee may be run by it
                self.write(name, taint | self.all_taint())

    def writes_operands(self, node: ast.Call) -> bool:
        """Whether the callee may write into the arrays passed to it."""
        if any(k.arg == "out" for k in node.keywords):
            return True
        func = node.func
        if isinstance(func, ast.Attribute) and _base_name(func) in self.locals:
            return False  # a method of a lane value (a.fill(x), t.append(v)) writes its object only
        value = self.resolve(func)
        if value is None:
            return True
        if isinstance(value, np.ufunc):
            return len(node.args) > value.nin
        name = getattr(value, "__name__", "")
        module = getattr(getattr(value, "py_func", value), "__module__", None) or ""
        if module.startswith("numpy") or isinstance(value, types.BuiltinFunctionType) or isinstance(value, type):
            return name in _NUMPY_WRITERS
        return _summary(value, self.seen).writes_params

    def known(self, func) -> bool:
        """Whether calling ``func`` changes nothing outside its operands: a method of
        a lane value (its object is written), a pure library function, or a Python
        function that the analysis finds has no effects."""
        if isinstance(func, ast.Attribute) and _base_name(func) in self.locals:
            return True
        value = self.resolve(func)
        if value is None:
            return False
        return _summary(value, self.seen).pure

    def resolve(self, func):
        """The object a function expression names, when it does not depend on the lane."""
        path = []
        while isinstance(func, ast.Attribute):
            path.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name) or func.id in self.locals or func.id not in self.namespace:
            return None
        value = self.namespace[func.id]
        for attr in reversed(path):
            try:
                value = getattr(value, attr)
            except Exception:  # noqa: BLE001 - any attribute error: unknown
                return None
        return value

    def read(self, e) -> Deps:
        """The parameters the value of ``e`` is computed from."""
        if e is None:
            return Deps()
        if isinstance(e, ast.Name):
            if e.id in self.locals:
                return self.env.get(e.id, Deps())
            # A global or closure value: the world's, unless it is a module.
            world = Deps() if isinstance(self.namespace.get(e.id), types.ModuleType) else self.world
            return self.env.get(e.id, Deps()) | world
        if isinstance(e, ast.IfExp) and _same([e.body], [e.orelse]):
            return self.read(e.body)
        if isinstance(e, ast.IfExp) and self.values_only:
            return self.read(e.body) | self.read(e.orelse)
        if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant) and isinstance(e.slice.value, int):
            parts = self.parts(e.value)
            if parts is not None and -len(parts) <= e.slice.value < len(parts):
                return parts[e.slice.value]
        if isinstance(e, ast.Call) and self.resolve(e.func) is _scan():
            return Deps().union(*self.scan(e))
        return Deps().union(*(self.read(c) for c in ast.iter_child_nodes(e)))

    # -- lw.scan ------------------------------------------------------------------
    def scan(self, call: ast.Call) -> list[Deps]:
        """Taints of ``(carry, ys)`` of an ``lw.scan`` call."""
        args = dict(zip(("f", "init", "xs", "length", "reverse", "unroll"), call.args, strict=False))
        args.update({k.arg: k.value for k in call.keywords if k.arg})
        everything = Deps().union(*(self.read(a) for a in (*call.args, *(k.value for k in call.keywords))))
        step = self.resolve(args["f"]) if "f" in args else None
        node = _function_node(step) if isinstance(step, types.FunctionType) else None
        if node is None or len(_params(node)) != 2 or any(k.arg is None for k in call.keywords):
            return [everything, everything]
        init, xs = self.read(args.get("init")), self.read(args.get("xs"))
        # How many steps run: uniform when xs is a parameter's (its lanes' shapes agree).
        length = self.read(args.get("length")) | (Deps() if self.fixed_shape(args.get("xs")) else xs)
        inner = _Taint(node, namespace_of(step), {p: Deps({t}) for p, t in zip(_params(node), (_CARRY, _X),
                                                                             strict=True)},
                       self.world, self.seen | {step.__code__})
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
        if xs is None or (isinstance(xs, ast.Constant) and xs.value is None):
            return True
        if isinstance(xs, ast.Name):
            return xs.id in self.params and not any(
                isinstance(n, ast.Name) and n.id == xs.id and not isinstance(n.ctx, ast.Load)
                for n in own_nodes(self.fn))
        if isinstance(xs, (ast.Tuple, ast.List)):
            return all(self.fixed_shape(e) for e in xs.elts)
        return False


def _substitute(deps: Deps, carry: Deps, xs: Deps) -> Deps:
    """A step's dependences with its parameters replaced by what they hold."""
    out = deps - {_CARRY, _X}
    return out | (carry if _CARRY in deps else Deps()) | (xs if _X in deps else Deps())


def _passes_carry_through(node: ast.FunctionDef) -> bool:
    """Whether every return of the step gives its carry parameter back, unassigned."""
    carry = _params(node)[0]
    returns = [n for n in own_nodes(node) if isinstance(n, ast.Return)]
    assigned = any(isinstance(n, ast.Name) and n.id == carry and not isinstance(n.ctx, ast.Load)
                   for n in ast.walk(node))
    return bool(returns) and not assigned and all(
        isinstance(r.value, ast.Tuple) and len(r.value.elts) == 2 and isinstance(r.value.elts[0], ast.Name)
        and r.value.elts[0].id == carry for r in returns)


def _scan():
    from .scanning import scan
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


def _summary(value, seen: frozenset = frozenset()) -> Summary:
    """What calling ``value`` may do: library functions by table, Python functions
    by analysing their source (``seen``: the functions being analysed)."""
    if isinstance(value, types.BuiltinFunctionType) and getattr(value, "__module__", None) in (
            "builtins", "math", "cmath"):
        return _PURE if value.__name__ not in _IMPURE_BUILTINS else _UNKNOWN
    if isinstance(value, type):  # a constructor: builtin types, namedtuples, classes without __init__
        init = value.__init__
        return _summary(init, seen) if isinstance(init, types.FunctionType) else _PURE
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
        node = _function_node(fn)
        taint = None if node is None else _Taint(node, namespace_of(fn), seen=seen | {fn.__code__})
        found = _UNKNOWN if taint is None or not taint.run() else Summary(not taint.effects, taint.param_writes)
        known = _summaries[fn] = (fn.__code__, found)
    return known[1]


def _immutable(value) -> bool:
    """Values no call can write into (a function, a module, a number, a string...)."""
    return callable(value) or isinstance(value, (types.ModuleType, int, float, complex, str, bytes, tuple,
                                                 frozenset, np.generic, type(None)))


def _has_exit(node) -> bool:
    return any(isinstance(n, (ast.Break, ast.Continue, ast.Return)) for n in ast.walk(node))


def _has_own_exit(node) -> bool:
    """A return/break/continue/raise of this function (not of a nested def or lambda) inside ``node``."""
    if isinstance(node, (ast.Return, ast.Break, ast.Continue, ast.Raise)):
        return True
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
        return False
    return any(_has_own_exit(c) for c in ast.iter_child_nodes(node))


def _same(a: list, b: list) -> bool:
    """Whether two statement lists (or expressions) are the same code."""
    return len(a) == len(b) and bool(a) and all(ast.dump(x) == ast.dump(y) for x, y in zip(a, b, strict=True))


def _base_name(v) -> str | None:
    while isinstance(v, (ast.Subscript, ast.Attribute, ast.Starred)):
        v = v.value
    return v.id if isinstance(v, ast.Name) else None


def _call_operands(call: ast.Call) -> list[str]:
    """Names of the objects a call could write into: its arguments (positional,
    starred, keyword; the array under ``a[1:]`` or ``a.T``) and the object a
    method is called on."""
    values = [*call.args, *(k.value for k in call.keywords)]
    if isinstance(call.func, ast.Attribute):
        values.append(call.func.value)
    return [n for n in map(_base_name, values) if n is not None]


def _view_sources(value) -> list[str]:
    """Names whose memory the value of ``value`` may share: the array itself (``a``),
    under an index or attribute (``a[0:1]``, ``a.T``), or a call's operands
    (``a.reshape(2)``, ``np.asarray(a)``); arithmetic makes new arrays."""
    if isinstance(value, (ast.Subscript, ast.Attribute, ast.Starred)):
        return _view_sources(value.value)
    if isinstance(value, ast.Name):
        return [value.id]
    if isinstance(value, ast.Call):
        return _call_operands(value)
    if isinstance(value, ast.IfExp):
        return _view_sources(value.body) + _view_sources(value.orelse)
    if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        return [n for e in value.elts for n in _view_sources(e)]
    if isinstance(value, ast.Dict):
        return [n for e in value.values for n in _view_sources(e)]
    if isinstance(value, ast.NamedExpr):
        return _view_sources(value.value)
    return []


def _target_names(target) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for t in target.elts for n in _target_names(t)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    if isinstance(target, (ast.Subscript, ast.Attribute)):
        name = _base_name(target)
        return [name] if name is not None else []
    return []


def _assigned_names(stmt) -> list[str]:
    return [n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]


def _written_names(stmt) -> list[str]:
    """Names whose memory ``stmt`` may write: stores under them, call operands."""
    names = []
    for n in ast.walk(stmt):
        if isinstance(n, (ast.Subscript, ast.Attribute)) and not isinstance(n.ctx, ast.Load):
            names += _target_names(n)
        elif isinstance(n, ast.Call):
            names += _call_operands(n)
    return names


# ----------------------------------------------------------------------------- out_axes=None


def check_unmapped_outputs(program: Program) -> None:
    """``out_axes=None`` is only allowed for outputs independent of the level."""
    sig = program.signature
    deps = None
    for out in program.outputs:
        for depth, dim in enumerate(out.level_dims):
            if dim is not None or not sig.mapped_at(depth):
                continue
            if deps is None:
                deps = output_dependencies(program.lane)
            used = _deps_for(deps, out.path)
            for k in sig.mapped_at(depth):
                leaf = sig.leaves[k]
                if used is None or leaf.param in used:
                    raise UnmappedOutputError(
                        f"vmap({sig.levels[depth].fun_name}) has out_axes=None for output "
                        f"{out.name}, but that output depends on argument {leaf.param}, "
                        f"which is mapped at that level (leaf {leaf.name}, axis "
                        f"{leaf.axes[depth]}). Use an integer out_axes, or make the output "
                        "independent of it.")


def unused_parameters(fn: Callable, path: tuple) -> Deps:
    """The parameters of ``fn`` that the values of the output at ``path`` (indices into
    the returned tuple) are not computed from (a parameter that only chooses between
    values is unused): empty when the analysis cannot tell.  What decides a float
    result's storage dtype (plan/program), as NumPy's types follow the values.

    Example:
        >>> unused_parameters(lambda a, k: a * 3, ())
        frozenset({'k'})
    """
    used = _deps_for(_cached_dependencies(fn), path)
    if used is None:
        return Deps()
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return Deps()
    return Deps(name for name in params if name not in used)


def _cached_dependencies(fn: Callable):
    """:func:`output_dependencies`, parsed once per lane function (a build asks per output)."""
    try:
        return _DEPENDENCIES[fn]
    except KeyError:
        _DEPENDENCIES[fn] = found = output_dependencies(fn, values_only=True)
        return found
    except TypeError:  # not weakly referenceable
        return output_dependencies(fn, values_only=True)


_DEPENDENCIES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _deps_for(deps, path):
    if deps is None or isinstance(deps, frozenset):
        return deps
    return deps[path[0]] if path and path[0] < len(deps) else frozenset().union(*deps)
