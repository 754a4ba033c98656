"""Does a compiled lane create arrays?  It decides how the kernel calls it.

The CPU kernel inlines a lane into its loop (Numba's ``inline="always"``) so
that LLVM can vectorise across lanes.  A lane that builds per-lane arrays
(``d = (p - points) ** 2``) cannot be vectorised across lanes anyway, and
inlined it ran 1.45x slower than called (a 20000-lane kernel density: 0.124 s
inlined, 0.087 s called, the same as the lane ``njit``-ed into a hand-written
``prange`` loop), so such lanes are called.

Example:
    >>> import numba, numpy as np
    >>> @numba.njit
    ... def spread(p, points):
    ...     return ((p - points) ** 2).sum()
    >>> _ = spread(0.5, np.ones(3))
    >>> allocates(spread)
    True
"""

from __future__ import annotations

from numba.core import ir
from numba.core import types as nt
from numba.core.dispatcher import Dispatcher

from .signedness import reachable

#: Typed IR expressions whose array result is new memory; the others (``getitem``,
#: ``getattr`` such as ``.T``, arguments) are views of arrays the lane was given.
_MAKES = frozenset({"call", "binop", "inplace_binop", "unary", "arrayexpr", "build_list"})


def allocates(dispatcher: Dispatcher, typed=None) -> bool:
    """Whether a compiled overload of ``dispatcher`` or of a helper it calls
    makes an array (as opposed to reading views of its arguments).  ``typed``: typed
    IR that inlined ``dispatcher``'s code (lane.typing_only.Typed), whose inlined
    statements are read too."""
    return ((typed is not None and _makes(typed, typed.inlined))
            or any(_makes_array(cres) for disp in reachable(dispatcher) for cres in list(disp.overloads.values())))


def _makes_array(cres) -> bool:
    annotation = getattr(cres, "type_annotation", None)  # a str for code loaded from a cache
    return isinstance(getattr(annotation, "blocks", None), dict) and _makes(annotation)


def _makes(annotation, read=lambda stmt: True) -> bool:
    """Whether typed IR (``blocks`` and ``typemap``) makes an array or list in the
    statements ``read`` selects."""
    blocks, typemap = annotation.blocks, annotation.typemap
    return any(isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Expr) and stmt.value.op in _MAKES
               and read(stmt) and isinstance(typemap.get(stmt.target.name), (nt.Array, nt.List))
               for block in blocks.values() for stmt in block.body)
