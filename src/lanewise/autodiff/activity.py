"""Which values of a lane carry derivatives, and what the calls in it name.

A local is *active* when it may hold a nonzero derivative: a differentiated
argument, or anything assigned (or written into) from an active expression, to a
fixpoint over the whole function (flow-insensitive: a variable active anywhere
is active everywhere, and every assignment updates its derivative).  Comparisons,
integer-valued functions (``floor``, ``int``, ``len``), ``lw.stop_gradient`` and
lanewise's own checks are never active.  The fixpoint runs on the lane IR
(:func:`active_names`); the emitters ask the same rules of one IR expression
(:func:`active_expr`).

Example:
    >>> from lanewise.lane.ir.build import build
    >>> def f(x, n):
    ...     k = n + 1
    ...     y = x * k
    ...     return y > 0, y
    >>> sorted(active_names(build(f).entry, {"x"}))
    ['x', 'y']
"""

from __future__ import annotations

import types

import numpy as np
from numba.core.dispatcher import Dispatcher

from ..lane.ir import nodes as ir
from ..lane.source import LANE_MODULE
from . import intrinsics
from .rules import is_zero


def original(fn):
    """The user's function behind a compiled helper or a rebound clone."""
    fn = fn.py_func if isinstance(fn, Dispatcher) else fn
    return getattr(fn, "_lw_original", fn)


def where(fn, node=None) -> str:
    code = fn.__code__
    line = code.co_firstlineno + (getattr(node, "lineno", 1) - 1 if node is not None else 0)
    return f"{code.co_filename}:{line}"


# ----------------------------------------------------------------------------- names


def helper(obj):
    """The user function a call names, or None (math, NumPy, builtins, lanewise)."""
    obj = obj.py_func if isinstance(obj, Dispatcher) else obj
    if not isinstance(obj, types.FunctionType) or getattr(obj, "_lw_intrinsic", False):
        return None
    module = getattr(obj, "__module__", "") or ""
    if module.startswith("lanewise") and module != LANE_MODULE:
        return None
    return obj


def _scan_function():
    from ..lane.scanning import scan
    return scan


def custom(fn) -> bool:
    return getattr(fn, "_lw_jvp_rule", None) is not None


def is_intrinsic(obj) -> bool:
    """Checks and zeros a transformed lane calls: constants to a second transformation
    (``out``, the identity on the result, has a rule; ``update`` and ``mirror`` carry
    values, so a second transformation differentiates or refuses them, never drops them)."""
    return getattr(obj, "__module__", None) == intrinsics.__name__ and obj not in _CARRYING


_CARRYING = (intrinsics.out, intrinsics.update, intrinsics.mirror)


#: Attributes of arrays that are integers or types, never differentiated.
INERT_ATTRIBUTES = frozenset({"shape", "size", "ndim", "dtype", "itemsize", "nbytes", "strides"})
#: Array methods that are linear: the tangent is the same method of the tangent.
LINEAR_METHODS = frozenset({"sum", "mean", "copy", "ravel", "flatten", "transpose", "reshape", "cumsum"})
#: NumPy functions linear in their (one) array argument.
LINEAR_NUMPY = ("sum", "mean", "cumsum", "copy", "ravel", "diff", "trace", "transpose")

def numpy_named(obj, names) -> bool:
    return any(obj is getattr(np, n, None) for n in names)


# ----------------------------------------------------------------------------- emitter


def is_scan(obj) -> bool:
    """Whether ``obj`` is ``lw.scan``."""
    return obj is not None and obj is _scan_function()


# ----------------------------------------------------------------------------- activity (on the lane IR)

#: Primitives that are never active: comparisons, ``and``/``or`` (chained comparisons
#: too), ``not``, ``~``, integer operators and f-strings.
INERT_OPS = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "is", "isnot", "in", "notin", "and", "or", "not",
                       "invert", "floordiv", "bitand", "bitor", "bitxor", "lshift", "rshift", "fstring"})
#: The primitives the front end writes for Python's own syntax (any other op is a call).
SYNTAX_OPS = INERT_OPS | {"add", "sub", "mul", "truediv", "mod", "pow", "matmul", "neg", "pos", "ifexp", "getitem",
                          "slice", "attr", "setitem", "setattr", "tuple", "list", "set", "dict", "star", "star2",
                          "format", "walrus"}


def inert_callee(obj) -> bool:
    """Whether a call of ``obj`` is never active: a zero-derivative function
    (``floor``, ``int``, ``len``) or one of lanewise's checks (``lw.stop_gradient``)."""
    return obj is not None and (is_zero(obj) or is_intrinsic(obj))


def active_names(function: ir.Function, seeded, resolve=ir.called) -> set:
    """The locals of ``function`` (nested functions' included, in one flat namespace) that
    may carry a nonzero derivative when ``seeded`` are differentiated.  ``resolve(call)``:
    the object a call Prim calls (:func:`~lanewise.lane.ir.nodes.called` unless the caller binds names of its own).

    Example:
        >>> from lanewise.lane.ir.build import build
        >>> def f(x, n):
        ...     k = n + 1
        ...     y = x * k
        ...     return y > 0, y
        >>> sorted(active_names(build(f).entry, {"x"}))
        ['x', 'y']
    """
    active = set(seeded)
    facts = _Facts(active, resolve)
    every = list(statements(function.body))
    before = None
    while before != active:  # each assignment may activate a name an earlier one reads
        before = set(active)
        for s in every:
            facts.statement(s)
    return active


def active_expr(e, active, resolve=ir.called) -> bool:
    """Whether the IR expression ``e`` may have a nonzero tangent, ``active`` the active locals.

    Example:
        >>> active_expr(ir.Prim("lt", (ir.Var("x"), ir.Const(0.0)), ir.Loc("f.py", 1, 0)), {"x"})
        False
    """
    return _Facts(set(active), resolve).expr(e)


def statements(body):
    """Every statement of ``body``, nested ones and nested functions' included (pre-order)."""
    for s in body:
        yield s
        if isinstance(s, ir.If):
            yield from statements(s.then + s.orelse)
        elif isinstance(s, ir.Loop):
            yield from statements(s.body + s.orelse)
        elif isinstance(s, ir.Try):
            yield from statements(s.body + s.orelse + s.final + tuple(x for h in s.handlers for x in h.body))
        elif isinstance(s, ir.Def):
            yield from statements(s.function.body)


class _Facts:
    """The activity rules over the IR, for a given set of active names."""

    def __init__(self, active: set, resolve):
        self.active, self.resolve = active, resolve

    def statement(self, s) -> None:
        if isinstance(s, ir.Assign) and self.expr(_assigned(s.value)):
            self.mark(s.target)
        elif isinstance(s, ir.Do) and isinstance(s.expr, ir.Prim) and s.expr.op == "setitem" \
                and self.expr(_assigned(s.expr.args[2])):
            self.mark_base(s.expr.args[0])
        elif isinstance(s, ir.Loop) and s.target is not None and self.expr(s.iter):
            self.mark(s.target)

    def mark(self, target) -> None:
        if isinstance(target, ir.Var):
            self.active.add(target.name)
        elif isinstance(target, ir.Unpack):
            for item in target.items:
                self.mark(item)
        elif isinstance(target, ir.Item):
            self.mark_base(target.base)

    def mark_base(self, e) -> None:
        """Writing into ``e[...]`` makes the array (``a`` of ``a[i][j]``) active."""
        if isinstance(e, ir.Prim) and e.op == "getitem":
            self.mark_base(e.args[0])
        elif isinstance(e, (ir.Var, ir.Global)) and "." not in e.name:  # names are one flat namespace
            self.active.add(e.name)

    def expr(self, e) -> bool:
        """Whether the IR expression ``e`` may have a nonzero tangent."""
        if isinstance(e, (ir.Var, ir.Global)):  # a global is read by the name it shares with locals
            return "." not in e.name and e.name in self.active
        if isinstance(e, ir.Lambda):  # active when it closes over an active value (its calls depend on it)
            own = {p.name for p in e.function.params if p.kind in ("positional", "keyword")}
            return bool((_names(e.function.body) - own) & self.active)
        if isinstance(e, ir.Comp):
            return any(self.expr(x) for x in e.element) or any(
                self.target(g.target) or self.expr(g.iter) or any(self.expr(c) for c in g.conds)
                for g in e.generators)
        if isinstance(e, ir.Unsupported):
            return True  # unknown: active (the transformation refuses it where it meets it)
        if not isinstance(e, ir.Prim) or e.op in INERT_OPS:
            return False
        if e.op == "attr":
            return dict(e.params)["name"] not in INERT_ATTRIBUTES and self.expr(e.args[0])
        if e.op == "getitem":
            return self.expr(e.args[0])
        if e.op == "ifexp":
            return self.expr(e.args[1]) or self.expr(e.args[2])
        if e.op == "walrus":
            return dict(e.params)["name"] in self.active or self.expr(e.args[0])
        if e.op not in SYNTAX_OPS or e.callee is not None:
            return self.call(e)
        return any(self.expr(a) for a in e.args)

    def call(self, e: ir.Prim) -> bool:
        if inert_callee(self.resolve(e)):
            return False
        head = e.op == "call" or e.op.startswith("method.")  # args[0]: what is called, or whose method
        if head and e.op != "call" and self.expr(e.args[0]):
            return True  # a method of an active array
        return any(self.expr(a) for a in e.args[head:]) or any(self.expr(v) for _, v in e.keywords)

    def target(self, t) -> bool:
        """Whether a comprehension's target names an active value (the rules read it as an expression)."""
        if isinstance(t, ir.Var):
            return t.name in self.active
        if isinstance(t, ir.Unpack):
            return any(self.target(i) for i in t.items)
        if isinstance(t, ir.Item):
            return self.expr(t.base)
        return isinstance(t, ir.Field) and t.name not in INERT_ATTRIBUTES and self.expr(t.base)


def _assigned(value):
    """What an assignment assigns from: ``v`` of ``x += v`` (the in-place operator's
    result is as active as ``v``: ``x`` itself is then active already, or stays not)."""
    if isinstance(value, ir.Prim) and ("inplace", True) in value.params:
        return value.args[1]
    return value


def _names(node) -> set:
    """Every name read or bound in ``node`` (locals, plain globals, comprehension and walrus targets)."""
    out, todo = set(), [node]
    while todo:
        n = todo.pop()
        if isinstance(n, (tuple, list)):
            todo.extend(n)
        elif isinstance(n, (ir.Var, ir.Global)):
            out |= {n.name} if "." not in n.name else set()
        elif n is not None and hasattr(n, "__dataclass_fields__") and not isinstance(n, ir.Loc):
            if isinstance(n, ir.Prim) and n.op == "walrus":
                out.add(dict(n.params)["name"])
            todo.extend(getattr(n, f) for f in n.__dataclass_fields__ if f not in ("loc", "callee"))
    return out
