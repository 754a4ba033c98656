"""The SPMD path's questions about uniform values (one scalar for all W lanes),
answered by the lane IR's pass :mod:`lanewise.lane.ir.passes.varying`.

The emitter asks which ``while`` loops of its (desugared) AST keep every live
lane in step, so that it can drop selects: such a loop, reached where the mask
is the frame's live lanes, runs its body in every live lane or in none.  Lanes
that returned never read the frame's locals again, so stores in its body need no
``select``; for W6's running sum that removes the mask from the carried
dependency (``s = select(m, s + x, s)`` waited for the previous comparison).
The pass answers by the loop's place in the file, which the desugaring keeps (a
``for`` over ``range`` becomes a ``while`` at the ``for``'s line and column).  The plan
asks whether every read of a row has a uniform index (block reads).

Numba's typing is the judge: the emitter marks each lockstep loop's test with
``m_uniform``, which does not type for a vector, so a mistake here costs the
SPMD path, never a result.

Example:
    >>> def f(x, n):
    ...     s = 0.0
    ...     k = 0
    ...     while k < n:
    ...         s = s + x
    ...         k = k + 1
    ...     return s
    >>> first = f.__code__.co_firstlineno
    >>> [(line - first, col) for line, col in lockstep_loops(f, {"n"}, set())], sorted(lockstep_loops(f, set(), set()))
    ([(3, 4)], [])
"""

from __future__ import annotations

from ..lane.ir.build import function_ir
from ..lane.ir.passes import varying


def lockstep_loops(fn, params: set, rows: set) -> frozenset:
    """(line in the file, column) of each loop of ``fn`` whose test is uniform and which
    no ``break`` or ``continue`` of its own leaves (``return`` is fine); ``params``: the
    parameters given as uniform; ``rows``: its array parameters (each lane's row has the
    same length)."""
    return frozenset((loc.line, loc.col) for loc in varying.analyse(function_ir(fn), params, rows).lockstep)


def uniform_reads(fn, params: set, rows: set, checked: set | None = None) -> bool:
    """Whether every ``row[i]`` in ``fn`` has a uniform index (a block read of a contiguous
    row, :func:`.rows.v_row`, rather than a gather).  ``rows``: every array parameter
    (rows and tables, whose lengths are uniform); ``checked``: those whose reads are
    asked about (default: all of ``rows``)."""
    return varying.uniform_reads(function_ir(fn), params, rows, checked)
