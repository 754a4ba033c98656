"""The check a compiled lane runs where it reads a local that may be unbound.

:mod:`lanewise.lane.ir.passes.unbound` rewrites such a read ``y`` into
``_lw_unbound(y, _lw_bound_y, message)``: ``y`` where the flag says a statement bound
it, else :class:`~lanewise.errors.LaneUnboundError` (an ``UnboundLocalError``) with
Python's words and the user's ``file:line``.  Numba compiles the call with the message
as a constant (it is a literal in the text); as Python it is the same function.

Example:
    >>> _lw_unbound(2.0, True, "unused")
    2.0
    >>> _lw_unbound(0.0, False, "cannot access local variable 'y' where it is not associated with a value (f.py:3)")
    Traceback (most recent call last):
    ...
    lanewise.errors.LaneUnboundError: cannot access local variable 'y' where it is not associated with a value (f.py:3)
"""

from __future__ import annotations

from numba.core import types
from numba.extending import overload

from ..errors import LaneUnboundError


def _lw_unbound(value, bound, message):
    """``value`` if ``bound``, else raise LaneUnboundError(``message``)."""
    if not bound:
        raise LaneUnboundError(message)
    return value


@overload(_lw_unbound, prefer_literal=True, inline="always")
def _compiled(value, bound, message):
    if not isinstance(message, types.StringLiteral):
        return None
    text = message.literal_value

    def impl(value, bound, message):
        if not bound:
            raise LaneUnboundError(text)
        return value

    return impl


GLOBALS = {"_lw_unbound": _lw_unbound}

__all__ = ["GLOBALS"]
