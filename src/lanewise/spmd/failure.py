"""``raise`` and ``assert`` in the W-wide lane: the group fails, the host finds the lane.

The W-wide lane cannot build a lane's exception (its message may format lane
values, its class may be the user's), and need not: when a lane of the mask
reaches a ``raise`` or fails an ``assert``, :func:`m_raise` raises one fixed
exception out of the W-wide lane, the kernel reports the failed group as it
does for a row read out of bounds, and the host replays that group's lanes on
the scalar path until one raises: the user gets the exception Python (and the
scalar path) raises, with its lane and line.  Lanes outside the mask raise
nothing, so a ``raise`` under a branch no live lane took costs one test.

Example:
    >>> import numba, numpy as np
    >>> from lanewise.spmd.vector import vload
    >>> @numba.njit
    ... def check(bits):
    ...     m_raise(vload(bits, 4))
    ...     return 0
    >>> check(np.zeros(4, np.bool_))
    0
    >>> check(np.array([False, True, False, False]))
    Traceback (most recent call last):
    ...
    lanewise.spmd.failure.LaneRaised: lanewise: a lane raised inside the W-wide lane
"""

from __future__ import annotations

from numba.core import types
from numba.extending import intrinsic

from .vector import Vec, any_lane

#: The message :func:`m_raise` raises with; :func:`lanewise.spmd.check.check_compiled`
#: accepts an exception of the W-wide lane by this text (and the row bounds one).
LANE_RAISED = "lanewise: a lane raised inside the W-wide lane"


class LaneRaised(RuntimeError):
    """A lane of the W-wide lane raised (the host replays the group for the real exception)."""


@intrinsic
def m_raise(typingctx, mask):
    """Raise :class:`LaneRaised` if any lane of ``mask`` (a mask or a scalar bool) is set."""
    if not (isinstance(mask, types.Boolean) or (isinstance(mask, Vec) and isinstance(mask.dtype, types.Boolean))):
        return None

    def codegen(context, builder, sig, args):
        with builder.if_then(any_lane(builder, args[0]), likely=False):
            context.call_conv.return_user_exc(builder, LaneRaised, (LANE_RAISED,))
        return context.get_dummy_value()

    return types.none(mask), codegen


__all__ = ["LANE_RAISED", "LaneRaised", "m_raise"]
