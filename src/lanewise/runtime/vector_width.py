"""The SIMD width LLVM vectorises lanewise's kernels for (``lw.config.vector_width``).

On AVX-512 hosts LLVM's tuning for most Intel server CPUs prefers 256-bit vectors
(older parts lowered their clock for 512-bit code), so a kernel's vectorised lane
loop used half of each register.  Lane loops are long, arithmetic-bound and free
of reductions whose order could change, so 512-bit vectors pay: the W5 sum of
``cos(r) / (1 + r)`` over 4e8 lanes took 0.60 s with 256-bit vectors and 0.47 s
with 512-bit ones, the same bits.  The width is the LLVM function attribute
``"prefer-vector-width"``, set on the functions of lanewise's generated kernel
modules only (Numba code of the user's own is left to LLVM), and part of every
kernel's cache key (:func:`setting`).

Example:
    >>> from lanewise.runtime import vector_width
    >>> vector_width.preferred() in (None, 128, 256, 512)
    True
"""

from __future__ import annotations

import functools
import re

from llvmlite import binding as llvm
from numba.core import codegen as numba_codegen

from ..config import config
from .hooks import hook_method

#: Mangled names of functions defined in lanewise's generated modules (``lw_<hash>``).
_KERNEL_FUNCTION = re.compile(r"_ZN\d+lw_")


@functools.cache
def _host_has_avx512() -> bool:
    return bool(llvm.get_host_cpu_features().get("avx512f", False))


def preferred() -> int | None:
    """The width in bits kernels are vectorised for; None: LLVM's own choice
    (``lw.config.vector_width`` 0, or None on a host without AVX-512)."""
    width = config.vector_width
    if width is None:
        return 512 if _host_has_avx512() else None
    return int(width) or None


def setting() -> tuple:
    """What a kernel's cache key needs to know of the width."""
    return ("vector_width", preferred())


def _tag(ir_module, width: int) -> None:
    attribute = f'"prefer-vector-width"="{width}"'
    for fn in ir_module.functions:
        if not fn.is_declaration and _KERNEL_FUNCTION.match(fn.name):
            set.add(fn.attributes, attribute)  # llvmlite checks names it knows; this one is a string attribute


def _tag_kernels(library, ir_module) -> None:
    width = preferred()
    if width is not None:
        _tag(ir_module, width)


def install() -> None:
    """Tag the kernel functions of every module Numba compiles from now on (idempotent)."""
    hook_method(numba_codegen.CPUCodeLibrary, "add_ir_module", _tag_kernels, after=False)
