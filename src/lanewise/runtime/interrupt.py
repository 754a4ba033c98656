"""The stop flag a parallel kernel reads before each block (Ctrl-C).

A plain ``stop[0]`` read is loop-invariant to LLVM, which hoists it out of the
block loop (Numba gives each thread one contiguous run of blocks, so the flag
was read once per thread: a reduction ignored Ctrl-C for its whole run).  An
atomic load is read every time, and costs a plain load on x86 and ARM.

Example:
    >>> import numba, numpy as np
    >>> numba.njit(lambda s: stopped(s))(np.ones(1, np.int64))
    True
"""

from __future__ import annotations

from numba.core import types
from numba.extending import intrinsic


@intrinsic
def stopped(typingctx, flag):
    """``flag[0] != 0``, read with an atomic (monotonic) load."""
    if not (isinstance(flag, types.Array) and flag.dtype == types.int64 and flag.ndim == 1):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        value = builder.load_atomic(data, "monotonic", 8)
        return builder.icmp_signed("!=", value, value.type(0))

    return types.boolean(flag), codegen
