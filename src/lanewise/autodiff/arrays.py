"""Which differentiated arguments of a lane reverse mode takes as 1-D arrays, from the source.

Reverse mode's adjoint code (:mod:`.adjoint`) gives a differentiated argument
a scalar adjoint or an array of them.  It cannot know the argument's type when
the lane is transformed, so it reads the uses: an argument read element by
element (``w[i]``), measured (``w.shape``, ``len(w)``) or reduced linearly
(``np.sum(w)``, ``w.mean()``, ``np.dot(w, v)``, ``w @ v``) is an array; one used
as a number anywhere else is a number (checked where the lane runs).  Mixing
the two, or handing a number-like argument to a helper that reads it as an
array, is for the tape (:class:`Mixed`).

Example:
    >>> import ast
    >>> tree = ast.parse("def f(w, x):\\n    return w[0] * x + np.sum(w)").body[0]
    >>> element_arrays(tree, ["w", "x"], lambda node: np.sum if ast.unparse(node) == "np.sum" else None)
    {'w'}
"""

from __future__ import annotations

import ast

import numpy as np

from .activity import INERT_ATTRIBUTES, helper as _helper
from ..spmd.syntax import resolve as _resolve

#: Array methods reducing a differentiated array, and the direction of their derivative.
REDUCING_METHODS = {"sum": "", "mean": "mean"}
_ARRAY_USES = {"element", "inert", "linear"}


class Mixed(Exception):
    """An argument used both as an array and as a number, or passed whole to a helper that indexes it."""


def element_arrays(fdef, differentiated, resolve) -> set:
    """The differentiated parameters of ``fdef`` used as 1-D arrays."""
    uses = {p: set() for p in differentiated}
    parents = {child: node for node in ast.walk(fdef) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and node.id in uses:
            uses[node.id].add(_use(node, parents.get(node), resolve))
    found = {p for p, kinds in uses.items() if kinds & _ARRAY_USES}
    for p in found:
        if uses[p] - _ARRAY_USES:
            raise Mixed(f"{p} is used both element by element and whole")
    for p in set(uses) - found:
        if not ("store" in uses[p] and "whole" not in uses[p]) and _passed_as_array(fdef, p, resolve):
            raise Mixed(f"{p} is passed to a helper that reads it as an array")
    return found


def linear_numpy(obj) -> str | None:
    """``"sum"``, ``"mean"`` or ``"dot"`` for those NumPy functions, else None."""
    return next((n for n in ("sum", "mean", "dot") if obj is not None and obj is getattr(np, n)), None)


def _use(node, parent, resolve) -> str:
    if isinstance(node.ctx, ast.Store):
        return "store"
    if (isinstance(parent, ast.Attribute) and parent.attr in REDUCING_METHODS) or \
            (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.MatMult)) or \
            (isinstance(parent, ast.Call) and node in parent.args and linear_numpy(resolve(parent.func))):
        return "linear"
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return "whole" if isinstance(parent.slice, (ast.Slice, ast.Tuple)) else "element"
    if isinstance(parent, ast.Attribute) and parent.attr in INERT_ATTRIBUTES:
        return "inert"
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "len":
        return "inert"
    return "whole"


def _passed_as_array(fdef, name: str, resolve) -> bool:
    for node in ast.walk(fdef):
        if isinstance(node, ast.Call) and any(isinstance(a, ast.Name) and a.id == name for a in node.args):
            fn = _helper(resolve(node.func))
            if fn is not None and _reads_as_array(fn, [k for k, a in enumerate(node.args)
                                                       if isinstance(a, ast.Name) and a.id == name], 3):
                return True
    return False


def _reads_as_array(fn, positions: list[int], depth: int) -> bool:
    """Whether ``fn`` (a helper) may read its parameters at ``positions`` as arrays."""
    from ..spmd.syntax import Unsupported, function_ast
    try:
        fdef = function_ast(fn)
    except Unsupported:
        return True
    names = {fdef.args.args[k].arg for k in positions if k < len(fdef.args.args)}
    parents = {child: node for node in ast.walk(fdef) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(fdef):
        if not (isinstance(node, ast.Name) and node.id in names):
            continue
        parent = parents.get(node)
        if isinstance(parent, (ast.Subscript, ast.For)) or \
                (isinstance(parent, ast.Attribute) and parent.attr in INERT_ATTRIBUTES) or \
                (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "len"):
            return True
        if isinstance(parent, ast.Call) and node in parent.args:
            inner = _helper(_resolve(fn, parent.func))
            if inner is not None and (depth == 0 or _reads_as_array(inner, [parent.args.index(node)], depth - 1)):
                return True
    return False
