"""One Numba parallel launch at a time, for compiled callers.

Numba's default threading layer here ("workqueue") aborts the process when two
parallel kernels launch at once.  Python callers never launch one (``lw.vmap``
and ``lw.reduce`` run their blocks from lanewise's own threads:
:mod:`lanewise.runtime.pool`), but an XLA custom call (:mod:`lanewise.jax`)
launches ``prange`` kernels from compiled code on XLA's own threads, where no
Python lock can be taken without the GIL.  So every such launch holds this
flag: one 64-bit word in process memory, taken by compare-and-swap.  The
compiled code finds it by symbol name (``llvmlite.binding.add_symbol``), so the
address is never baked into cached object code.

A caller that finds the flag taken does not wait: it runs its lanes on its own
thread instead (no deadlock, no abort).

Example:
    >>> import numba
    >>> @numba.njit
    ... def launch_once():
    ...     if try_acquire():
    ...         release()
    ...         return True
    ...     return False
    >>> launch_once()
    True
"""

from __future__ import annotations

import ctypes
import os

import llvmlite.binding as llvm
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic


SYMBOL = "lanewise_launch_lock"

_FLAG = ctypes.c_int64(0)
llvm.add_symbol(SYMBOL, ctypes.addressof(_FLAG))
# A child forked while another thread held the flag would otherwise never launch again.
os.register_at_fork(after_in_child=lambda: setattr(_FLAG, "value", 0))


def _flag(builder):
    """The flag, declared external in this LLVM module (resolved to ``_FLAG`` at link)."""
    flag = builder.module.globals.get(SYMBOL)
    if flag is None:
        flag = ir.GlobalVariable(builder.module, ir.IntType(64), SYMBOL)
        flag.linkage = "external"
    return flag


@intrinsic
def try_acquire(typingctx):
    """Take the flag if it is free (compare-and-swap 0 -> 1); whether it was taken."""
    def codegen(context, builder, sig, args):
        word = ir.IntType(64)
        swapped = builder.cmpxchg(_flag(builder), word(0), word(1), "acquire", "monotonic")
        return builder.extract_value(swapped, 1)
    return types.boolean(), codegen


@intrinsic
def release(typingctx):
    """Give the flag back (an atomic release store of 0)."""
    def codegen(context, builder, sig, args):
        builder.store_atomic(ir.IntType(64)(0), _flag(builder), "release", 8)
        return context.get_dummy_value()
    return types.none(), codegen
