"""Arrays without reference counting, for the body of a kernel.

Numba counts references to an array's memory with atomic increments and
decrements (``NRT_incref``/``NRT_decref``).  A lane inlined into the block loop
that takes whole arrays (a CSR gather reading ``indices``, ``w`` and ``x``) did
three such calls per lane, and two threads sharing one array contended for the
cache line of its count: W7 ran 1.9x slower than in Numba's own ``prange``
kernel, whose loop body sees arrays with no count at all.  ``borrowed(a)`` is
``a`` with that count detached, so every increment and decrement of it (and of
views taken from it) does nothing.  Sound because the caller keeps the arrays
alive for the whole call and nothing borrowed outlives it: kernels return an
integer, and a lane's array results are copied into the outputs.

Example:
    >>> import numba, numpy as np
    >>> numba.njit(lambda a: borrowed(a)[1:].sum())(np.arange(4.0))
    6.0
"""

from __future__ import annotations

from numba.core import cgutils, types
from numba.extending import intrinsic


@intrinsic
def borrowed(typingctx, array):
    """``array``, the same view, without its memory's reference count."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, sig, args):
        view = context.make_array(sig.args[0])(context, builder, args[0])
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        return view._getvalue()

    return array(array), codegen
