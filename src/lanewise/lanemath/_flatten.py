"""Lanemath's public kernels with their helpers inlined, as one plain function.

lanemath writes each function as small helpers (``two_prod``, ``reduce_cw``,
``sin_kernel`` ...), each an ``inline="always"`` njit function.  Numba's IR
inliner builds a helper's IR again from its bytecode, runs the untyped passes
on it and deep-copies it, at every call site and recursively: half of the
compile of ``cos`` (0.1 of 0.2 s), paid by every new lane that uses it on a
fresh cache.  :func:`flatten` does the same inlining once, on the lane IR
(:mod:`lanewise.lane.ir`): the kernel's IR and its helpers' IR are read by the
front end, the calls are replaced by the helpers' bodies in new nodes, and the
result is printed as Python source (:func:`~lanewise.lane.ir.render.render`)
that the public kernel compiles as one plain function.

The computation is the same: each helper's arguments are evaluated once,
left to right, into its renamed parameters, then its body runs, then its
``return`` value is taken.  Only calls that always run are inlined (not those
in a ``while`` test, in one branch of ``a if c else b`` or after the first
operand of ``and``/``or``): those stay calls, which Numba inlines as before.
A helper that is not a plain function with one ``return`` at its end stays a
call too.  ``if`` on a module constant (``HAS_FMA``) keeps only its taken
branch, as Numba's branch pruning would.

Example:
    >>> from lanewise.lanemath import trig
    >>> flat = flatten(trig.cos64.py_func)
    >>> flat.__qualname__, "reduce_cw" in flat.__globals__   # inlined, not called
    ('cos64', False)
"""

from __future__ import annotations

import builtins
import itertools
import sys
import types
import weakref
from dataclasses import replace

from numba.core.dispatcher import Dispatcher

from ..errors import LaneCompileError
from ..lane.ir import nodes as ir
from ..lane.ir.build import library_function_ir
from ..lane.ir.passes.walk import walk
from ..lane.ir.render import render

_MISSING = object()
#: The front end's short names of modules (``np.exp``), back to the modules.
_MODULES = {"np": "numpy", "lw": "lanewise"}


class _Unflattenable(Exception):
    """A construct :func:`flatten` does not handle: the function stays as it is."""


def flatten(fn: types.FunctionType) -> types.FunctionType:
    """``fn`` with its calls to inlined helpers replaced by their bodies (module
    docstring), or ``fn`` itself when it calls none or cannot be flattened.

    Example:
        >>> def plain(x):
        ...     return x + 1
        >>> flatten(plain) is plain
        True
    """
    found = _surveyed(fn)
    if found is None or not found[3]:
        return fn
    try:
        return _Flattener(fn, found[0], found[1]).function()
    except (_Unflattenable, LaneCompileError):  # render refuses what it cannot print
        return fn


def _function_ir(fn):
    """The IR of ``fn`` read from its text (a ``def``), or None (a lambda, no source)."""
    if not isinstance(fn, types.FunctionType):
        return None
    try:
        return library_function_ir(fn)
    except LaneCompileError:
        return None


def _helper(value):
    """The Python function of an ``inline="always"`` njit helper (else None)."""
    if isinstance(value, Dispatcher) and value.targetoptions.get("inline") == "always":
        return value.py_func
    return None


def _surveyed(fn):
    """(the IR of ``fn``, its local names, its ``return`` statements, whether it calls an
    inlined helper), or None without IR; worked out once per IR (:func:`library_function_ir`
    gives the same object until ``fn`` changes)."""
    made = _function_ir(fn)
    known = _SURVEYS.get(fn)
    if known is None or known[0] is not made:
        known = _SURVEYS[fn] = (made, None if made is None else _survey(made))
    return None if made is None else (made, *known[1])


_SURVEYS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _survey(made: ir.Function) -> tuple:
    names, returns, calls = [p.name for p in made.params], [], False
    todo = list(reversed(made.body))
    while todo:  # the walk of passes.walk, by kind: a kernel's first compile pays for it
        n = todo.pop()
        parts = _PARTS.get(type(n))
        if parts is None:
            todo.extend(reversed(tuple(walk(n))[1:]))  # a kind flatten refuses anyway: every node in it
        else:
            todo.extend(reversed([p for f in parts for p in _flat(getattr(n, f))]))
        if isinstance(n, ir.Var):
            names.append(n.name)
        elif isinstance(n, ir.Exit) and n.kind == "return":
            returns.append(n)
        elif isinstance(n, ir.Prim):
            todo.extend(reversed([v for _, v in n.keywords]))
            calls = calls or (n.op.startswith("call:") and _helper(ir.called(n)) is not None)
    return list(dict.fromkeys(names)), returns, calls


#: The parts of each kind of node :func:`_survey` reads (a keyword's value: by hand).
_PARTS = {ir.Var: (), ir.Const: (), ir.Global: (), ir.Prim: ("args",), ir.Assign: ("target", "value"),
          ir.Do: ("expr",), ir.If: ("cond", "then", "orelse"), ir.Exit: ("value",),
          ir.Loop: ("target", "iter", "cond", "body", "orelse"), ir.Unpack: ("items",), ir.Item: ("base", "index"),
          ir.Field: ("base",)}


def _flat(part) -> tuple:
    return part if isinstance(part, tuple) else () if part is None else (part,)


def _helper_body(helper):
    """(the IR, its local names) of a helper whose body can replace a call (positional
    parameters only, one ``return``, last), else None."""
    found = _surveyed(helper)
    if found is None:
        return None
    made, local_names, returns, _ = found
    if made.posonly or any(p.kind != "positional" or p.default is not None for p in made.params):
        return None
    last = made.body[-1] if made.body else None
    if len(returns) != 1 or returns[0] is not last or last.value is None:
        return None
    return made, local_names


class _Scope:
    """One function's body being inlined: its local names' new names, and its free names."""

    def __init__(self, fn, rename: dict):
        self.fn, self.rename = fn, rename

    def resolve(self, name: str):
        """The value ``fn`` reads as the free name ``name`` (closure, globals, builtins)."""
        code = self.fn.__code__
        if name in code.co_freevars:
            return self.fn.__closure__[code.co_freevars.index(name)].cell_contents
        value = self.fn.__globals__.get(name, _MISSING)
        return getattr(builtins, name, _MISSING) if value is _MISSING else value


def _attribute_chain(value, path: list):
    for attr in path:
        value = getattr(value, attr, _MISSING)
        if value is _MISSING:
            break
    return value


class _Flattener:
    """Builds the flattened function: its body as new IR, and the globals it reads."""

    def __init__(self, fn, kernel: ir.Function, local_names: list):
        self.fn, self.kernel = fn, kernel
        self.reserved = set(local_names)
        self.locals = {p.name for p in kernel.params}  # every name the flattened function binds (for render)
        self.globals = {"__builtins__": builtins}
        self.fresh = itertools.count()
        self.helpers: dict = {}  # helper -> _helper_body's answer, checked once per flatten

    def function(self):
        scope = _Scope(self.fn, {name: name for name in self.reserved})
        names = _Names(self, scope)
        params = tuple(p if p.default is None else replace(p, default=names.visit(p.default))
                       for p in self.kernel.params)
        body = tuple(self.block(self.kernel.body, scope))
        flat_ir = replace(self.kernel, name=self.fn.__name__, params=params, body=body)
        # The def at the kernel's own line, in its own file: Numba's disk cache and the
        # shipped kernels (runtime.prebuilt.key) file a function by its first line.
        text = "\n" * (self.kernel.loc.line - 1) + render(flat_ir, local_names=frozenset(self.locals))
        exec(compile(text, self.fn.__code__.co_filename, "exec"), self.globals)  # noqa: S102 - lanemath's code
        flat = self.globals.pop(self.fn.__name__)
        for attr in ("__module__", "__qualname__", "__doc__"):
            setattr(flat, attr, getattr(self.fn, attr))
        flat.__wrapped__ = self.fn
        return flat

    def bind(self, name: str, value) -> str:
        """The name the flattened code reads ``value`` by: ``name`` when it is free."""
        if self.globals.get(name, _MISSING) is value:
            return name
        if name in self.globals or name in self.reserved:
            name = f"{name}_lw{next(self.fresh)}"
        self.globals[name] = value
        return name

    # ---------------------------------------------------------------- statements

    def block(self, stmts, scope: _Scope) -> list:
        out: list = []
        shared = (None, None)  # a = b = v: the IR shares v between the stores; so does the copy
        for s in stmts:
            if isinstance(s, ir.Assign) and s.value is shared[0]:
                out.append(replace(s, target=_Names(self, scope).target(s.target), value=shared[1]))
                continue
            made = self.statement(s, scope)
            shared = (s.value, made[-1].value) if isinstance(s, ir.Assign) else (None, None)
            out += made
        return out

    def statement(self, s, scope: _Scope) -> list:
        if isinstance(s, ir.If):
            taken = self.constant_test(s.cond, scope)
            if taken is not None:
                return self.block(s.then if taken else s.orelse, scope)
            pre, cond = self.expression(s.cond, scope)
            return pre + [replace(s, cond=cond, then=tuple(self.block(s.then, scope)),
                                  orelse=tuple(self.block(s.orelse, scope)))]
        if isinstance(s, ir.Loop):
            names = _Names(self, scope)
            if s.kind == "while":  # its test runs again each iteration: its calls stay calls
                pre, head = [], dict(cond=names.visit(s.cond))
            else:
                pre, it = self.expression(s.iter, scope)
                head = dict(iter=it, target=names.target(s.target))
            carried = tuple(scope.rename.get(c, c) for c in s.carried)
            return pre + [replace(s, **head, body=tuple(self.block(s.body, scope)),
                                  orelse=tuple(self.block(s.orelse, scope)), carried=carried)]
        if isinstance(s, ir.Assign):
            pre, value = self.stored_value(s.value, scope)
            return pre + [replace(s, target=_Names(self, scope).target(s.target), value=value)]
        if isinstance(s, ir.Do):
            if isinstance(s.expr, ir.Prim) and s.expr.op in ("setitem", "setattr"):
                # the value runs first; the target's parts are renamed, their calls kept
                pre, value = self.stored_value(s.expr.args[-1], scope)
                names = _Names(self, scope)
                parts = tuple(names.visit(a) for a in s.expr.args[:-1])
                return pre + [replace(s, expr=replace(s.expr, args=(*parts, value)))]
            pre, e = self.expression(s.expr, scope)
            return pre + [replace(s, expr=e)]
        if isinstance(s, ir.Exit):
            if s.value is None:
                return [s]
            pre, value = self.expression(s.value, scope)
            return pre + [replace(s, value=value)]
        raise _Unflattenable(type(s).__name__)

    def stored_value(self, value, scope: _Scope) -> tuple[list, object]:
        """(statements to run first, the value) of a store; of ``x += e``, ``e``'s calls
        inlined and the read of ``x`` (the target's) only renamed."""
        if isinstance(value, ir.Prim) and ("inplace", True) in value.params:
            pre, operand = self.expression(value.args[1], scope)
            return pre, replace(value, args=(_Names(self, scope).visit(value.args[0]), operand))
        return self.expression(value, scope)

    def constant_test(self, test, scope: _Scope):
        """True/False for ``if NAME`` / ``if not NAME`` on a module's bool constant, else None."""
        negate = isinstance(test, ir.Prim) and test.op == "not" and len(test.args) == 1 and test.callee is None
        node = test.args[0] if negate else test
        if not isinstance(node, ir.Global) or "." in node.name:
            return None
        value = scope.resolve(node.name)
        return (not value if negate else bool(value)) if isinstance(value, bool) else None

    def expression(self, node, scope: _Scope) -> tuple[list, object]:
        """(statements to run first, the expression): its helper calls inlined."""
        names = _Names(self, scope, inline=True)
        return names.pre, names.visit(node)

    def inline(self, helper, args: list, pre: list) -> ir.Var:
        """Append ``helper(*args)``'s body to ``pre``; the name holding its result."""
        if helper not in self.helpers:
            self.helpers[helper] = _helper_body(helper)
        found = self.helpers[helper]
        if found is None or len(args) != len(found[0].params):
            raise _Unflattenable(helper.__qualname__)
        known, local_names = found
        k = next(self.fresh)
        scope = _Scope(helper, {name: f"{name}_lw{k}" for name in local_names})
        for param, arg in zip(known.params, args, strict=True):
            pre.append(ir.Assign(ir.Var(scope.rename[param.name]), arg, known.loc))
        pre += self.block(known.body[:-1], scope)
        more, value = self.expression(known.body[-1].value, scope)
        result = f"_lw_t{k}"
        self.locals.update([scope.rename[p.name] for p in known.params], (result,))
        pre += more + [ir.Assign(ir.Var(result), value, known.body[-1].loc)]
        return ir.Var(result)


class _Names:
    """Renames one expression's names for the flattened function (new nodes); with
    ``inline``, inlines the helper calls that always run into :attr:`pre`."""

    def __init__(self, flattener: _Flattener, scope: _Scope, inline: bool = False):
        self.flattener, self.scope, self.inline, self.pre = flattener, scope, inline, []

    def visit(self, e):
        # Every node is a new one: a value the IR shares only between ``a = b = v``'s
        # stores is written once by render, which must not see sharing anywhere else.
        if isinstance(e, ir.Var):
            self.flattener.locals.add(self.scope.rename[e.name])
            return ir.Var(self.scope.rename[e.name])
        if isinstance(e, ir.Const):
            return ir.Const(e.value, e.type)
        if isinstance(e, ir.Global):
            return self.global_(e.name)
        if isinstance(e, ir.Prim):
            return self.prim(e)
        raise _Unflattenable(type(e).__name__)  # a lambda, a comprehension, an unsupported construct

    def target(self, t):
        if isinstance(t, ir.Var):
            return self.visit(t)
        if isinstance(t, ir.Unpack):
            return replace(t, items=tuple(self.target(i) for i in t.items))
        if isinstance(t, ir.Item):
            return replace(t, base=self.visit(t.base), index=self.visit(t.index))
        return replace(t, base=self.visit(t.base))

    def global_(self, name: str) -> ir.Global:
        """A free name (or a module's attribute, ``np.pi``) bound in the flattened globals."""
        root, *path = name.split(".")
        value = self.scope.resolve(root)
        if value is _MISSING and path:  # a module the front end names by its short name
            value = sys.modules.get(_MODULES.get(root, root), _MISSING)
        if value is _MISSING:
            raise _Unflattenable(name)
        return ir.Global(".".join([self.flattener.bind(root, value), *path]), "global")

    def callee(self, e: ir.Prim, obj) -> ir.Global:
        """The name a kept call of ``obj`` reads it by: as written where the IR's name
        says it (``np.exp``, ``abs``, a helper's own name), else a name of the function
        that holds it."""
        op = e.op.removeprefix("call:")
        root, *path = op.split(".")
        if path and not e.op.startswith("call:") and _attribute_chain(self.scope.resolve(root), path) is obj:
            return self.global_(op)
        for name in (getattr(obj, "__name__", None), op.split(".")[-1]):
            if name and self.scope.resolve(name) is obj:
                return self.global_(name)
        fn = self.scope.fn
        held = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True))
        for name, value in [*((n, c.cell_contents) for n, c in held.items()), *fn.__globals__.items()]:
            if value is obj:
                return self.global_(name)
        module = sys.modules.get(_MODULES.get(root, root))
        if path and module is not None and _attribute_chain(module, path) is obj:
            return self.global_(op)
        raise _Unflattenable(op)

    def prim(self, e: ir.Prim):
        if e.op in ("and", "or"):
            if ("chain", True) in e.params:  # a < b < c: each operand once, all evaluated (as written)
                operands = [self.visit(a) for a in (e.args[0].args[0], *(c.args[1] for c in e.args))]
                return _with_args(e, tuple(_with_args(c, (a, b)) for c, a, b in
                                           zip(e.args, operands[:-1], operands[1:], strict=True)))
            return _with_args(e, (self.visit(e.args[0]), *(self.conditional(a) for a in e.args[1:])))
        if e.op == "ifexp":
            test = self.visit(e.args[0])
            return _with_args(e, (test, *(self.conditional(a) for a in e.args[1:])))
        if e.op == "walrus":
            raise _Unflattenable("walrus")
        if e.callee is None:  # an operator, a method or a local called
            return _with_args(e, tuple(self.visit(a) for a in e.args),
                              tuple((k, self.visit(v)) for k, v in e.keywords))
        obj = ir.called(e)
        helper = _helper(obj) if self.inline and e.op.startswith("call:") else None
        if helper is not None and not e.keywords and not any(isinstance(a, ir.Prim) and a.op == "star"
                                                             for a in e.args):
            args = [self.visit(a) for a in e.args]  # evaluated first, left to right
            return self.flattener.inline(helper, args, self.pre)
        head = self.callee(e, obj)  # a call kept: written as a call of the name that holds the object
        return ir.Prim("call", (head, *(self.visit(a) for a in e.args)), e.loc,
                       keywords=tuple((k, self.visit(v)) for k, v in e.keywords))

    def conditional(self, node):
        """A part evaluated only sometimes: renamed, its calls kept."""
        return _Names(self.flattener, self.scope).visit(node)


def _with_args(e: ir.Prim, args: tuple, keywords: tuple | None = None) -> ir.Prim:
    """``e`` with new operands (``dataclasses.replace``'s result, made directly: this is
    the pass's most frequent step, and a kernel's first compile pays for it)."""
    return ir.Prim(e.op, args, e.loc, e.keywords if keywords is None else keywords, e.params, e.type, e.callee)
