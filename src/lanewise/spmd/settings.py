"""What of lanewise's settings the W-wide lane depends on: its width W (from the
machine's vector registers, or ``lw.config.spmd_width``), the ``lw.config.spmd``
mode, and whether lanes may stream (:data:`STREAMING`).

Example:
    >>> from lanewise.spmd.settings import vector_bits, width_for
    >>> vector_bits() in (128, 256, 512) and width_for(8) >= 4
    True
"""

from __future__ import annotations

import functools
import platform
import re
import sys

from ..config import config


@functools.cache
def vector_bits() -> int:
    """Width in bits of the vector registers Numba compiles for (AVX-512: 512,
    AVX/AVX2: 256, NEON and SSE: 128)."""
    import numba
    import llvmlite.binding as ll

    features = numba.config.CPU_FEATURES
    if features is None:
        try:
            flags = ll.get_host_cpu_features()
            features = ",".join(("+" if v else "-") + k for k, v in flags.items())
        except Exception:  # noqa: BLE001 - some platforms cannot report features
            features = ""
    enabled = set(re.findall(r"\+([\w.-]+)", features))
    if "avx512f" in enabled:
        return 512
    if "avx2" in enabled or "avx" in enabled:
        return 256
    return 128  # NEON (aarch64), SSE2 (x86-64 baseline)


def registers_per_value() -> int:
    """Vector registers per W-wide value: 4 where the register file has 32 of them
    (AVX-512, AArch64), else 2 (AVX2, SSE: 16 registers).  Several independent
    registers per value hide the latency of a loop-carried computation."""
    return 4 if vector_bits() == 512 or platform.machine().lower() in ("arm64", "aarch64") else 2


def width_for(itemsize: int, rows: bool = False) -> int:
    """W for lanes whose widest value is ``itemsize`` bytes: ``lw.config.spmd_width``,
    else :func:`registers_per_value` vector registers' worth (AVX-512: 32 float64
    lanes, 64 float32; AVX2: 8 float64; NEON: 8 float64), at most 64.

    Lanes that read per-lane rows (``rows``) get one register's worth (AVX-512:
    8 float64 lanes; AVX2: 4): every read of a row is W scalar loads inserted
    into a vector, and beyond one register the inserts, not the arithmetic,
    set the pace.  W3's scan over 2000 rows of 5000 prices on Zen 4: 0.0046 s
    at W=8, 0.0052 s at 4, 0.0077 s at 16, 0.016 s at 32 (scalar path 0.0155 s)."""
    if config.spmd_width:
        return max(2, min(64, int(config.spmd_width)))
    if rows:
        return max(2, vector_bits() // (8 * max(itemsize, 4)))
    return max(4, min(64, registers_per_value() * vector_bits() // (8 * max(itemsize, 4))))


#: Stream lanes of the form ``prologue; loop; epilogue`` (slots refilled as lanes
#: finish); False runs every lane in fixed groups of W (tests switch it).
STREAMING = True


def cache_key() -> tuple:
    """What of the SPMD settings the generated code depends on."""
    # python -O drops the lanes' asserts, and the W-wide lane's with them
    return ("spmd", mode(), config.spmd_width or vector_bits(), STREAMING, sys.flags.optimize)


def mode():
    """``lw.config.spmd`` read as "auto", True or False."""
    mode = config.spmd
    if isinstance(mode, str):
        mode = mode.strip().lower()
        if mode in ("auto", ""):
            return "auto"
        return mode not in ("0", "false", "off", "no", "never")
    return bool(mode)

