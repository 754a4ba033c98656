"""Row reads and writes checked in a GPU lane: ``p[k]`` as ``_lw_at(p, k)``.

numba-cuda compiles a GPU kernel without bounds checks (its target turns them off), so
a lane's ``p[k]`` with ``k`` out of range would read another lane's memory, or write
over it.  A GPU lane's reads and writes at an index computed at run time (not a
literal or a slice; a tuple of indices counts when one of them is computed) become
calls of :func:`_lw_at` and :func:`_lw_put`; on the device (backends/cuda/device.py)
each integer index into an array is tested against its axis' length (a negative one
wraps, as in Python), and one out of range fails the lane, which the host replays on the CPU, where Numba's own
check raises the ``IndexError``.  As Python, they are the subscript itself.

Example:
    >>> from lanewise.lane.ir.build import function_ir
    >>> from lanewise.lane.ir.render import render
    >>> def lane(p, k):
    ...     p[k + 1] = p[k] * 2.0
    ...     return p[0]
    >>> print(render(checked_indexing(function_ir(lane))), end="")
    def lane(p, k):
        _lw_put(p, k + 1, _lw_at(p, k) * 2.0)
        return p[0]
"""

from __future__ import annotations

from dataclasses import replace

from .ir import nodes as ir
from .ir.passes.walk import mapped


def _lw_at(a, i):
    """``a[i]`` (checked on a GPU: :mod:`lanewise.lane.indexing`)."""
    return a[i]


def _lw_put(a, i, v):
    """``a[i] = v`` (checked on a GPU: :mod:`lanewise.lane.indexing`)."""
    a[i] = v


def _computed(index) -> bool:
    """An index computed at run time (or a tuple of indices, one of them computed): not
    a literal, not a slice (nor a tuple with one)."""
    if isinstance(index, ir.Prim) and index.op == "tuple":
        return all(_computed(i) or isinstance(i, ir.Const) for i in index.args) and any(map(_computed, index.args))
    return not isinstance(index, ir.Const) and not (isinstance(index, ir.Prim) and index.op == "slice")


def _checked(n):
    if not isinstance(n, ir.Prim) or n.params or n.keywords:
        return None
    if n.op == "getitem" and len(n.args) == 2 and _computed(n.args[1]):
        return replace(n, op="_lw_at")
    if n.op == "setitem" and len(n.args) == 3 and _computed(n.args[1]):
        return replace(n, op="_lw_put")
    return None


def checked_indexing(function: ir.Function) -> ir.Function:
    """``function`` with its subscripts at computed indices as checked calls (the module
    docstring); ``function`` itself when it has none."""
    body = mapped(function.body, _checked)
    return function if body == function.body else replace(function, body=body)


GLOBALS = {"_lw_at": _lw_at, "_lw_put": _lw_put}

__all__ = ["GLOBALS", "checked_indexing"]
