r"""Which values of a lane carry derivatives, and what the calls in it name.

A local is *active* when it may hold a nonzero derivative: a differentiated
argument, or anything assigned (or written into) from an active expression, to a
fixpoint over the whole function (flow-insensitive: a variable active anywhere
is active everywhere, and every assignment updates its derivative).  Comparisons,
integer-valued functions (``floor``, ``int``, ``len``), ``lw.stop_gradient`` and
lanewise's own checks are never active.

Example:
    >>> import ast
    >>> tree = ast.parse("def f(x, n):\n    k = n + 1\n    y = x * k\n    return y > 0, y").body[0]
    >>> sorted(Activity(None, tree, {"x"}).run())
    ['x', 'y']
"""

from __future__ import annotations

import ast
import types

import numpy as np
from numba.core.dispatcher import Dispatcher

from ..lane.source import LANE_MODULE
from ..spmd.syntax import resolve as _resolve
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
    (``out``, the identity on the result, has a rule)."""
    return getattr(obj, "__module__", None) == intrinsics.__name__ and obj is not intrinsics.out


#: Attributes of arrays that are integers or types, never differentiated.
INERT_ATTRIBUTES = frozenset({"shape", "size", "ndim", "dtype", "itemsize", "nbytes", "strides"})
#: Array methods that are linear: the tangent is the same method of the tangent.
LINEAR_METHODS = frozenset({"sum", "mean", "copy", "ravel", "flatten", "transpose", "reshape", "cumsum"})
#: NumPy functions linear in their (one) array argument.
LINEAR_NUMPY = ("sum", "mean", "cumsum", "copy", "ravel", "diff", "trace", "transpose")

def numpy_named(obj, names) -> bool:
    return any(obj is getattr(np, n, None) for n in names)


# ----------------------------------------------------------------------------- activity


class Activity:
    """Which locals may carry a nonzero tangent: seeded parameters and whatever is
    assigned (or written into) from an active expression, to a fixpoint."""

    def __init__(self, fn, fdef, seeded, objects=None):
        self.fn, self.fdef, self.active = fn, fdef, set(seeded)
        self.objects = objects or {}

    def run(self) -> set:
        before = None
        while before != self.active:
            before = set(self.active)
            for node in ast.walk(self.fdef):
                self._statement(node)
        return self.active

    def _statement(self, node) -> None:
        if isinstance(node, ast.Assign) and self.expr(node.value):
            for target in node.targets:
                self._mark(target)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None and self.expr(node.value):
            self._mark(node.target)
        elif isinstance(node, ast.For) and self.expr(node.iter):
            self._mark(node.target)

    def _mark(self, target) -> None:
        if isinstance(target, ast.Name):
            self.active.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._mark(element)
        elif isinstance(target, (ast.Subscript, ast.Starred)):
            self._mark(target.value)

    def expr(self, node) -> bool:
        """Whether ``node`` may have a nonzero tangent."""
        if isinstance(node, ast.Name):
            return node.id in self.active
        if isinstance(node, ast.Lambda):
            # A lambda closing over a differentiated value: what its calls return depends
            # on that value.  Active, so its use is refused where the lane is transformed
            # (counted constant, g = lambda t: t * x; g(2.0) had a derivative of 0).
            own = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
            return any(isinstance(n, ast.Name) and n.id in self.active and n.id not in own
                       for n in ast.walk(node.body))
        if isinstance(node, (ast.Constant, ast.Compare, ast.BoolOp, ast.JoinedStr)):
            return False
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.Invert)):
            return False
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.BitAnd, ast.BitOr, ast.BitXor,
                                                               ast.LShift, ast.RShift)):
            return False
        if isinstance(node, ast.Attribute):
            return node.attr not in INERT_ATTRIBUTES and self.expr(node.value)
        if isinstance(node, ast.Subscript):
            return self.expr(node.value)
        if isinstance(node, ast.IfExp):
            return self.expr(node.body) or self.expr(node.orelse)
        if isinstance(node, ast.Call):
            return self._call(node)
        return any(self.expr(child) for child in ast.iter_child_nodes(node))

    def _call(self, node) -> bool:
        func = node.func
        obj = self.objects.get(func.id) if isinstance(func, ast.Name) and func.id in self.objects \
            else _resolve(self.fn, func)
        if obj is not None and (is_zero(obj) or is_intrinsic(obj)):  # lw.stop_gradient is one
            return False
        if isinstance(node.func, ast.Attribute) and obj is None and self.expr(node.func.value):
            return True  # a method of an active array
        return any(self.expr(a) for a in node.args) or any(self.expr(k.value) for k in node.keywords)


# ----------------------------------------------------------------------------- emitter


def is_scan(obj) -> bool:
    """Whether ``obj`` is ``lw.scan``."""
    return obj is not None and obj is _scan_function()
