"""The SPMD path's questions about uniform values (one scalar for all W lanes),
answered by the lane IR's pass :mod:`lanewise.lane.ir.passes.varying`.

The emitter asks which ``while`` loops of its (desugared) AST keep every live
lane in step, so that it can drop selects: such a loop, reached where the mask
is the frame's live lanes, runs its body in every live lane or in none.  Lanes
that returned never read the frame's locals again, so stores in its body need no
``select``; for W6's running sum that removes the mask from the carried
dependency (``s = select(m, s + x, s)`` waited for the previous comparison).
The pass answers by the loop's location, which the desugaring keeps (a ``for``
over ``range`` becomes a ``while`` at the ``for``'s line and column).  The plan
asks whether every read of a row has a uniform index (block reads).

Numba's typing is the judge: the emitter marks each lockstep loop's test with
``m_uniform``, which does not type for a vector, so a mistake here costs the
SPMD path, never a result.

Example:
    >>> from lanewise.spmd.syntax import function_ast
    >>> def f(x, n):
    ...     s = 0.0
    ...     k = 0
    ...     while k < n:
    ...         s = s + x
    ...         k = k + 1
    ...     return s
    >>> fdef = function_ast(f)
    >>> sorted(lockstep_loops(f, fdef, {"n"}, set())), sorted(lockstep_loops(f, fdef, set(), set()))
    ([(4, 4)], [])
"""

from __future__ import annotations

from ..lane.ir.build import function_ir
from ..lane.ir.passes import varying


def lockstep_loops(fn, fdef, params: set, rows: set) -> frozenset:
    """(line, column) in ``fdef`` (``fn``'s definition, desugared or not) of each loop of
    ``fn`` whose test is uniform and which no ``break`` or ``continue`` of its own leaves
    (``return`` is fine); ``params``: the parameters given as uniform; ``rows``: its array
    parameters (each lane's row has the same length)."""
    function = function_ir(fn)
    shift = function.loc.line - fdef.lineno  # the IR counts file lines, the AST the definition's
    return frozenset((loc.line - shift, loc.col) for loc in varying.analyse(function, params, rows).lockstep)


def uniform_reads(fn, params: set, rows: set, checked: set | None = None) -> bool:
    """Whether every ``row[i]`` in ``fn`` has a uniform index (a block read of a contiguous
    row, :func:`.rows.v_row`, rather than a gather).  ``rows``: every array parameter
    (rows and tables, whose lengths are uniform); ``checked``: those whose reads are
    asked about (default: all of ``rows``)."""
    return varying.uniform_reads(function_ir(fn), params, rows, checked)
