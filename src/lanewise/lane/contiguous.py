"""``as_contiguous``: a unit-stride 1-D view of an 'A'-layout array, typed as 'C'.

A row of ``sliding_window_view(a, w)`` (strides ``(8, 8)``: the rows overlap)
is contiguous, but Numba types the 2-D array, and so each row, as layout 'A'
(any strides): every read of the row then multiplies by a stride loaded at run
time, and loops over it do not vectorise (``np.ptp`` of a window ran 2.6x slower
than over the contiguous slice ``a[i:i + w]``).  The host knows the strides:
when a leaf's lane rows have unit stride (``Leaf.unit_rows``), the kernel hands
the lane ``as_contiguous(row)``, the same array struct (pointer, shape,
strides) under the 'C' type, so the lane is compiled, once, for contiguous rows.

Only for 1-D views whose stride is the itemsize, which the host checks: the
'C' type then tells Numba nothing false.

Example:
    >>> import numba, numpy as np
    >>> windows = np.lib.stride_tricks.sliding_window_view(np.arange(6.0), 3)
    >>> f = numba.njit(lambda w: as_contiguous(w[1]).sum())
    >>> float(f(windows))
    6.0
"""

from __future__ import annotations

from numba.core import types
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic


@intrinsic
def as_contiguous(typingctx, view):
    """``view`` (a 1-D array whose stride is its itemsize) typed as a 'C' array."""
    if not isinstance(view, types.Array) or view.ndim != 1:
        return None
    result = types.Array(view.dtype, 1, "C", readonly=not view.mutable, aligned=view.aligned)

    def codegen(context, builder, signature, args):
        # The array struct is the same for every layout: only the type changes.
        return impl_ret_borrowed(context, builder, signature.return_type, args[0])

    return result(view), codegen
