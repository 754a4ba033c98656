"""SPMD on SIMD: divergent lanes run W at a time in CPU vector registers.

A scalar-per-lane loop nest leaves the vector units idle when the lane has
data-dependent control flow (a ``while``, a ``break``, an early ``return``):
LLVM cannot vectorise the loop over lanes around it.  Here the lane function is
rewritten (:mod:`.transform`) into a W-wide version whose values are vectors of
W lanes (:mod:`.vector`) and whose control flow is execution masks, as ISPC
does.  The CPU backend then runs the innermost level W lanes per call, with a
masked tail.

:func:`choose` decides, per compiled program, which path runs and why
(``lw.explain`` prints it):

* ``lw.config.spmd = "auto"`` (default): lanes with divergent control flow take
  the SPMD path when the transformation supports them; other lanes keep the
  scalar path, which LLVM already vectorises;
* ``True``: the SPMD path whenever supported; ``False``: never.

Lanes may read per-lane 1-D rows (``p[i]``, ``len(p)``, ``lw.scan(f, init, p)``;
see :mod:`.arrays`).  Anything the transformation does not handle — other array
arguments, array outputs, writes, unknown calls, recursion, raising lanes —
keeps the scalar path, with the reason.  Results are bit for bit those of the scalar path.

Example:
    >>> import numpy as np, lanewise as lw
    >>> def steps(x):
    ...     n = 0
    ...     while x > 1.0:
    ...         x = x * 0.5
    ...         n += 1
    ...     return n
    >>> f = lw.vmap(steps)
    >>> f(np.array([0.5, 3.0, 1000.0]))
    array([ 0,  2, 10])
    >>> "lane path: SPMD" in lw.explain(f, np.ones(3))
    True
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

from .auto import MIN_OPS_PER_BLOCK_READ, MIN_OPS_PER_ROW_READ, branch_loops, divergence, long_fixed_loop, row_work
from .check import StreamIO, check_compiled
from .plans import Plan, block_reads, make_plan, refill, row_blocks
from . import settings
from .settings import cache_key, registers_per_value, vector_bits, width_for
from .stream import transform_stream
from .syntax import Unsupported, lane_params
from .transform import transform


@dataclass(frozen=True)
class Choice:
    """The lane path of one program: ``plan`` is None for the scalar path."""

    plan: Plan | None
    reason: str
    #: The W-wide lane compiled by :func:`check_compiled` (a streamed lane: only when
    #: compiled with the kernel's own ``_lw_load``/``_lw_store``, :class:`StreamIO`):
    #: the kernel module may call it instead of compiling its own copy.
    checked: Any = field(default=None, compare=False, repr=False)

    def describe(self) -> str:
        if self.plan is None:
            return f"scalar (one lane per iteration): {self.reason}"
        how = (f"{self.plan.width} lanes per vector step, a lane's slot refilled when it returns"
               if self.plan.stream else f"{self.plan.width} lanes per vector step")
        return f"SPMD on SIMD, {how}: {self.reason}"


def choose(program, call, result, inplace: bool = False, module: str | None = None,
           stream: bool = True, stream_io=None) -> Choice:
    """The lane path for ``program`` (see the module docstring), never raising.

    ``module``: the name of the kernel module that will call the W-wide lane
    (see :func:`check_compiled`); ``stream``: whether the caller can run the
    streamed form (``lw.vmap`` can; ``lw.reduce``'s tiles take groups of W);
    ``stream_io(plan)``: the kernel's :class:`StreamIO` for a streamed plan, or
    None (the check then compiles with stand-ins, and the kernel its own copy)."""
    from ..lane.lanefn import python_function

    mode = settings.mode()
    if mode is False:
        return Choice(None, "SPMD disabled (lw.config.spmd = False)")
    lane = python_function(program.lane)
    if not isinstance(lane, types.FunctionType):
        return Choice(None, f"the lane {lane!r} is not a Python function")
    if mode == "auto":
        why = divergence(lane) or long_fixed_loop(lane)
        if why is None:
            return Choice(None, "no divergent control flow (no while loop, no for loop with a variable trip "
                                "count, no break or return out of a loop): the scalar nest, which LLVM may "
                                "vectorise")
        arms = branch_loops(lane)
        if arms is not None:
            return Choice(None, f"{why}, but {arms}: W lanes that take different branches run every branch's "
                                "loop, one after the other, on the SPMD path (lw.config.spmd = True forces it)")
    else:
        why = "lw.config.spmd = True"
    try:
        if inplace:
            raise Unsupported("the lane writes a per-lane array output")
        plan = make_plan(program, call, result, lane, stream)
        declined = _too_little_work(plan, program, lane, why) if mode == "auto" else None
        if declined is not None:  # decided before compiling a variant that would not run
            return declined
        checked = _checked(plan, program, call, module, stream_io(plan) if plan.stream and stream_io else None)
    except Unsupported as e:
        return Choice(None, f"{why}, but the SPMD transformation does not handle {e}")
    except Exception as e:  # noqa: BLE001 - a defect here must cost speed, never a result
        return Choice(None, f"{why}, but the SPMD path failed to build ({type(e).__name__}: "
                            f"{str(e).splitlines()[0] if str(e) else ''})")
    return Choice(plan, why, checked)


def _checked(plan, program, call, module, io: "StreamIO | None"):
    """:func:`check_compiled`'s W-wide lane, or None for a streamed lane compiled with
    stand-ins.  With the kernel's ``io``, a rejection is checked again with stand-ins:
    a mispredicted context type must not cost the SPMD path."""
    if io is not None:
        try:
            return check_compiled(plan, program, call, module, io)
        except Unsupported:
            pass
    checked = check_compiled(plan, program, call, module)
    return None if plan.stream else checked


def _too_little_work(plan, program, lane, why) -> "Choice | None":
    """Auto mode's refusal of a lane whose loops do too little per row element read
    (see MIN_OPS_PER_ROW_READ), or None.  Tables count when some read of one is a
    gather (W loads, as for a row: W7's CSR rows ran 12x slower on the SPMD path)."""
    if "row" in plan.kinds or plan.gathered:
        counted = ("row", "table") if plan.gathered else ("row",)
        rows = {name for name, kind in zip(lane_params(lane), plan.kinds) if kind in counted}
        work = row_work(lane, rows)
        contiguous = all(b is True for b in row_blocks(program.signature, plan.kinds, plan.leaves))
        blocks = contiguous and not plan.gathered and block_reads(lane, plan.kinds)
        least = MIN_OPS_PER_BLOCK_READ if blocks else MIN_OPS_PER_ROW_READ
        if work is not None and work < least:
            how = "a block read" if blocks else "W loads (its rows may be strided)" if not contiguous \
                else "W loads (it reads its rows at indices that differ between lanes)"
            return Choice(None, f"{why}, but its loop does {work:g} operation(s) per row element it reads "
                                f"(< {least}): {how} per vector step would cost more than the lanes' "
                                "arithmetic gains")
    return None


__all__ = ["Choice", "Plan", "StreamIO", "Unsupported", "cache_key", "choose", "divergence", "refill",
           "registers_per_value", "transform", "transform_stream", "vector_bits", "width_for"]
