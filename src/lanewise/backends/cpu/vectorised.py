"""Did the lane loop vectorise?  Read from the machine code, not assumed.

``lw.explain`` used to print "LLVM vectorises the scalar nest" for every lane
without divergent control flow; a lane calling a helper LLVM did not inline ran
fully scalar under that line.  Here the compiled ``lane_block`` (the loop over
the innermost level's lanes, with the lane inlined) is disassembled and its
packed floating-point and integer arithmetic counted: SIMD instructions on
vector registers (x86 ``vaddpd %ymm..``, ``vpaddq``; AArch64 ``fadd v0.2d``).

Example:
    >>> packed_arithmetic("vfmadd231pd %zmm1, %zmm2, %zmm3\\n vaddsd %xmm0, %xmm1, %xmm1")
    1
"""

from __future__ import annotations

import re

import numba
import numpy as np
from numba.core import types as nt

from ...runtime import cache
from .. import host

#: Packed arithmetic: x86 AVX/AVX-512 ops on ymm/zmm registers, AArch64 NEON
#: ops on vector arrangements.  Not counted: moves, shuffles and bitwise ops,
#: and anything on xmm, since scalar x86 code uses those too (``vandpd %xmm``
#: is a scalar ``abs``, ``vxorpd`` zeroes a register).
_X86 = re.compile(r"^\s*(v(add|sub|mul|div|sqrt|max|min|blendv|cmp\w*)p[sd]|vf\w*p[sd]"
                  r"|vp(add|sub|mul|max|min|cmp)\w*)\s.*[yz]mm")
_ARM = re.compile(r"^\s*(fadd|fsub|fmul|fdiv|fmla|fmls|fmax|fmin|fcm\w+|add|sub|mul)\s+v\d+\.\d+[bhsd]")


def packed_arithmetic(asm: str) -> int:
    """The number of packed (SIMD) arithmetic instructions in ``asm``."""
    return sum(1 for line in asm.splitlines() if _X86.match(line) or _ARM.match(line))


def report(exe, call) -> str:
    """One line for ``lw.explain``: whether the compiled lane loop uses SIMD arithmetic."""
    try:
        asm = _lane_block_asm(exe, call)
    except Exception as e:  # noqa: BLE001 - explaining must not fail where running works
        return f"vectorised: unknown (the lane loop could not be inspected: {type(e).__name__})"
    n = packed_arithmetic(asm)
    if n:
        return f"vectorised: yes, the compiled lane loop has {n} packed (SIMD) arithmetic instructions"
    return ("vectorised: no, the compiled lane loop has no packed (SIMD) arithmetic: lanes run one at a "
            "time (a call LLVM did not inline, a loop-carried dependency, or a construct it cannot widen)")


def _lane_block_asm(exe, call) -> str:
    """The machine code of ``lane_block`` for ``call``'s argument types (compiled via kernel_serial).

    Compiled afresh in memory: Numba cannot inspect code it loaded from its disk
    cache (it returns an empty text, which read as "not vectorised")."""
    host.complete(exe)  # a module found on disk: its lanes made
    module = cache.load_module(f"{exe.module.__name__}_inspect", None, exe.source, exe.inject)
    module.kernel_serial.compile(_kernel_serial_types(exe, call))
    return module.lane_block.inspect_asm(module.lane_block.signatures[0])


def _kernel_serial_types(exe, call) -> tuple:
    """Numba types of ``kernel_serial(*values, *outputs, *sizes, *lane shapes)``."""
    values = [numba.typeof(v) for v in call.values]
    outs = [nt.Array(numba.from_dtype(np.dtype(out.dtype)), len(out.shape(call.sizes, (0,) * out.lane_ndim)), "C")
            for out in exe.program.outputs]
    sizes = [nt.int64] * len(call.sizes)
    shapes = [nt.UniTuple(nt.int64, exe.program.outputs[k].lane_ndim) for k in exe.array_outputs]
    return (*values, *outs, *sizes, *shapes)
