"""A subscript whose value is unused still raises: Numba's dead-code elimination keeps it.

Lanes are compiled with bounds checks (:data:`.lanefn.JIT_OPTIONS`), so ``p[5]`` on a
3-element array raises IndexError as Python does.  But Numba's dead-code elimination
(``numba.core.ir_utils.remove_dead``) holds every expression but a call free of side
effects, so a read whose value is never used (``y = p[5]``, then no ``y``) is deleted
with its check whenever it runs.  It runs when Numba inlines an ``inline="always"``
overload or closure: every derivative lane calls lanewise's autodiff intrinsics that
way (``lw.grad``'s lane returned values where ``backend="python"`` raised), and so
does a plain lane calling ``np.where`` (its kernel raised, its replay did not).

:func:`install` (run when :mod:`.lanefn` is imported, before any lane compiles) makes
Numba's dead-code elimination keep subscripts: in Python, a subscript may raise, so
it is not dead.  A kept read costs nothing where it cannot raise: without bounds
checks LLVM deletes an unused load itself.  Only :func:`numba.core.ir_utils.remove_dead`
sees the change (other Numba passes import the original function by name).

Example:
    >>> import numpy as np, numba
    >>> from lanewise.lane.kept_reads import install
    >>> install()
    >>> @numba.njit(inline="always")
    ... def helper(v):
    ...     return v
    >>> @numba.njit(boundscheck=True)
    ... def f(p, x):
    ...     y = p[5]  # unused, out of range
    ...     return helper(x)
    >>> f(np.arange(3.0), 1.0)
    Traceback (most recent call last):
    ...
    IndexError: index is out of bounds
"""

from __future__ import annotations

from numba.core import ir, ir_utils

#: The expressions that subscript (``a[i]``, ``a[3]``): they may raise IndexError.
_SUBSCRIPTS = frozenset({"getitem", "static_getitem"})


def _removable(rhs, lives, call_table, _numba=ir_utils.has_no_side_effect) -> bool:
    """Numba's ``has_no_side_effect``, except that a subscript has one (it may raise)."""
    if isinstance(rhs, ir.Expr) and rhs.op in _SUBSCRIPTS:
        return False
    return _numba(rhs, lives, call_table)


def install() -> None:
    """Make Numba's dead-code elimination keep subscripts (idempotent)."""
    ir_utils.has_no_side_effect = _removable
