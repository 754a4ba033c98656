"""Whether a function's end is reachable: where Python returns None without a ``return``.

A lane that returns a value on some paths and falls off its end on others returns
None there (Python), which the compiled backends cannot hold in a float result: the
cpu backend refuses it (Numba types the result as optional), and the tpu backend uses
this to refuse it too, instead of handing those lanes another path's value.  The
analysis is structural and conservative the way Python's own is: a ``while`` whose
test is a true literal ends only by ``break``; any other loop may run to its end; an
``if`` completes when a branch does (a literal test picks one).

Example:
    >>> from lanewise.lane.ir.build import function_ir
    >>> def clipped(x):
    ...     if x > 1.0:
    ...         return x
    >>> def bounded(x):
    ...     while True:
    ...         if x > 1.0:
    ...             return x
    ...         x = x * 2.0
    >>> falls_through(function_ir(clipped).body), falls_through(function_ir(bounded).body)
    (True, False)
"""

from __future__ import annotations

from .. import nodes as ir
from .walk import walk


def falls_through(stmts) -> bool:
    """Whether running ``stmts`` may reach their end (no ``return``, ``raise``, ``break``
    or ``continue`` on some path)."""
    for s in stmts:
        if not _completes(s):
            return False
    return True


def _completes(s) -> bool:
    if isinstance(s, (ir.Exit, ir.Raise)):
        return False
    if isinstance(s, ir.If):
        if isinstance(s.cond, ir.Const):
            return falls_through(s.then if s.cond.value else s.orelse)
        return falls_through(s.then) or falls_through(s.orelse)
    if isinstance(s, ir.Loop) and s.kind == "while" and isinstance(s.cond, ir.Const) and s.cond.value:
        return _breaks(s.body)  # ends only by a break of its own
    if isinstance(s, ir.Try):
        return True  # a handler may complete; conservative
    return True


def _breaks(stmts) -> bool:
    """A ``break`` of this loop in ``stmts`` (not of a loop inside it)."""
    return any(isinstance(n, ir.Exit) and n.kind == "break" for n in walk(stmts, (ir.Loop, ir.Lambda, ir.Def)))


__all__ = ["falls_through"]
