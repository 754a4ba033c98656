"""Raw memory from Numba code: typed pointers from integer addresses.

The native handlers of lanewise's bridges (the XLA FFI handler of
``lw.jax.op``, the handler ``lw.torch.op``'s C++ kernel calls) receive
addresses, not arrays; these turn them into arrays.

Example:
    >>> import numba, numpy as np
    >>> a = np.array([7, 8, 9], np.int64)
    >>> numba.njit(lambda addr: word(addr, 2))(a.ctypes.data)
    9
"""

from __future__ import annotations

import numba
from numba.core import types
from numba.extending import intrinsic


@intrinsic
def pointer(typingctx, addr, ty):
    """``(ty*) addr``: a typed pointer (index it like an array) from an integer address."""
    if not isinstance(addr, types.Integer) or not isinstance(ty, (types.NumberClass, types.DType)):
        return None
    target = ty.instance_type if isinstance(ty, types.NumberClass) else ty.dtype

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], context.get_value_type(sig.return_type))
    return types.CPointer(target)(addr, ty), codegen


@numba.njit(inline="always")
def word(addr, k):
    """The 64-bit word ``k`` of the struct at ``addr``."""
    return pointer(addr, numba.int64)[k]


@numba.njit(inline="always")
def copy_into(source, target):
    """``target[:] = source`` (1-d, same size, cast as an element assignment casts), as
    a loop: Numba's slice setitem formats its shape errors with string code that took
    3 s to compile in every process that built a handler."""
    for k in range(source.size):
        target[k] = source[k]
