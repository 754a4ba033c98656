"""Run-time options of lanewise, each read once from the environment.

Change them at run time by assigning the attribute (``lw.config.debug = True``).

Example:
    >>> import lanewise as lw
    >>> lw.config.disk_cache in (True, False)
    True
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path


def _flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() not in ("0", "false", "no", "off", "")


def _default_cache_dir() -> Path:
    # XDG-style location so that deleting it is always safe and obvious.
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lanewise"


def _bytes(value: str | None) -> int | None:
    """``"64MB"``, ``"1GiB"``, ``"1000000"`` -> bytes; empty/None/"none" -> None."""
    if value is None or value.strip().lower() in ("", "none", "0"):
        return None
    text = value.strip().upper().replace("IB", "B")
    for suffix, scale in (("KB", 2**10), ("MB", 2**20), ("GB", 2**30), ("TB", 2**40), ("B", 1)):
        if text.endswith(suffix):
            return int(float(text[:-len(suffix)]) * scale)
    return int(float(text))


def _tile(value: str) -> tuple:
    """``"8x512"`` -> (8, 512); the tpu backend checks that it fits the chip's registers."""
    rows, sep, cols = value.lower().partition("x")
    if not sep or not rows.strip().isdigit() or not cols.strip().isdigit():
        raise ValueError(f"LANEWISE_TPU_TILE={value!r}: expected ROWSxCOLUMNS, e.g. 8x128")
    return int(rows), int(cols)


def _strip(value: str) -> tuple | None:
    """``LANEWISE_TPU_STRIP``: ``"16x512"`` -> (16, 512); ``"0"`` or ``"none"``: no strips."""
    return None if value.strip().lower() in ("0", "none", "off", "") else _tile(value)


def _devices(value: str) -> int | str:
    """``LANEWISE_TPU_DEVICES``: ``"all"`` or a positive count (the tpu backend checks it
    against the devices JAX has)."""
    value = value.strip().lower()
    if value in ("", "all"):
        return "all"
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"LANEWISE_TPU_DEVICES={value!r}: expected 'all' or a positive number of devices")
    return int(value)


def _spmd_mode(value: str) -> str | bool:
    value = value.strip().lower()
    if value in ("", "auto"):
        return "auto"
    return value not in ("0", "false", "no", "off", "never")


@dataclass
class Config:
    #: Where generated kernel modules, their metadata and Numba's object code
    #: are stored.  ``LANEWISE_CACHE_DIR`` overrides; deleting it is always safe.
    cache_dir: Path = field(
        default_factory=lambda: Path(os.environ.get("LANEWISE_CACHE_DIR") or _default_cache_dir())
    )
    #: Keep compiled kernels on disk so a new process pays no compile
    #: (``LANEWISE_DISK_CACHE=0`` keeps them in memory only).
    disk_cache: bool = field(default_factory=lambda: _flag("LANEWISE_DISK_CACHE", True))
    #: Print every generated kernel's source when it is built (``LANEWISE_DEBUG=1``).
    debug: bool = field(default_factory=lambda: _flag("LANEWISE_DEBUG", False))
    #: Backend used when ``vmap(..., backend=None)`` (``LANEWISE_BACKEND``): ``"cpu"``
    #: (the default), ``"python"``, ``"tpu"``, or ``"auto"``: the tpu backend where JAX,
    #: already imported, computes on a TPU (or an argument is a JAX array on one) and the
    #: call qualifies (32-bit arguments, a lane the tpu backend lowers), else ``"cpu"``;
    #: ``lw.explain`` says which and why (lanewise/backends/auto.py).  Not the default:
    #: on a TPU the results are ``jax.Array`` s computed in float32.
    backend: str = field(default_factory=lambda: os.environ.get("LANEWISE_BACKEND", "cpu"))
    #: Lanes' ``math.*``/``np.*`` scalar calls use lanewise's vectorisable,
    #: <= 1 ulp functions (lanewise.lanemath) instead of libm
    #: (``LANEWISE_VECTOR_MATH=0`` restores libm).  CPU backend only.
    vector_math: bool = field(default_factory=lambda: _flag("LANEWISE_VECTOR_MATH", True))
    #: On a fresh cache, load lanemath's and lw.random's functions from the prebuilt
    #: bitcode shipped with lanewise instead of compiling them
    #: (``LANEWISE_PREBUILT_MATH=0`` compiles them; lanewise/runtime/prebuilt.py).
    prebuilt_math: bool = field(default_factory=lambda: _flag("LANEWISE_PREBUILT_MATH", True))
    #: Below this many lanes the CPU backend runs the nest on the calling thread:
    #: a parallel launch costs more than it saves on small problems.
    serial_below: int = 32768
    #: A parallel run wakes one thread per this much of its estimated work (about
    #: nanoseconds; lanes that loop count as unknown work and get every thread):
    #: each thread costs two hand-overs of the GIL, 10-50 µs on a loaded or
    #: virtualised machine.  0 wakes every thread for any parallel run.
    thread_work: int = 100_000
    #: SPMD on SIMD (lanewise.spmd): run lanes with divergent control flow
    #: (``while``, ``break``, early ``return``) W at a time in vector registers.
    #: ``"auto"``: divergent lanes that the transformation supports; ``True``:
    #: every supported lane; ``False``: never (``LANEWISE_SPMD=auto|1|0``).
    #: ``lw.explain`` says which path ran and why.  CPU backend only.
    spmd: str | bool = field(default_factory=lambda: _spmd_mode(os.environ.get("LANEWISE_SPMD", "auto")))
    #: Lanes per vector step of the SPMD path; None: several vector registers'
    #: worth of the widest lane value (32 float64 lanes with AVX-512, 8 with
    #: AVX2 or NEON) (``LANEWISE_SPMD_WIDTH``).
    spmd_width: int | None = field(default_factory=lambda: int(os.environ["LANEWISE_SPMD_WIDTH"])
                                   if os.environ.get("LANEWISE_SPMD_WIDTH") else None)
    #: SIMD width in bits LLVM vectorises kernels for (``LANEWISE_VECTOR_WIDTH``):
    #: None picks 512 on AVX-512 hosts (LLVM's tuning for many of them prefers 256,
    #: which left half of each register unused: 1.3x slower on lane loops) and LLVM's
    #: choice elsewhere; 0 is always LLVM's choice; 128/256/512 ask for that width.
    #: Part of the cache key: kernels of either width are kept apart.
    vector_width: int | None = field(default_factory=lambda: int(os.environ["LANEWISE_VECTOR_WIDTH"])
                                     if os.environ.get("LANEWISE_VECTOR_WIDTH") else None)
    #: Reverse mode's memory budget per lane, in bytes (``lw.jacrev``, ``lw.vjp``;
    #: ``LANEWISE_REVERSE_MEMORY=64MB``).  None: every loop iteration's record
    #: is kept (fastest; memory grows with the trip count).  A number: a lane's
    #: outermost loops keep checkpoints instead (their state every few
    #: iterations, thinned as the loop runs) and recompute one segment at a time
    #: in the reverse sweep, and a lane that would need more than the budget
    #: stops with an error.  Taken when the derivative lane is made.
    reverse_memory: int | None = field(default_factory=lambda: _bytes(os.environ.get("LANEWISE_REVERSE_MEMORY")))
    #: ``lw.torch.op`` operators run a C++ CPU kernel (lanewise/torch/native.cpp,
    #: compiled with the machine's C++ compiler the first time, ~6 s, then kept in
    #: the cache folder) that calls the compiled program without Python: a call
    #: costs a few microseconds instead of PyTorch's Python-kernel dispatch.  Without
    #: a compiler, or with ``LANEWISE_TORCH_NATIVE=0``, operators use a Python
    #: kernel (same results, more time per call).  Read when the first operator
    #: is defined.
    torch_native: bool = field(default_factory=lambda: _flag("LANEWISE_TORCH_NATIVE", True))
    #: Run the tpu backend's Pallas kernels in interpret mode (on the CPU, no TPU needed:
    #: how CI tests them) (``LANEWISE_TPU_INTERPRET=1``).
    tpu_interpret: bool = field(default_factory=lambda: _flag("LANEWISE_TPU_INTERPRET", False))
    #: The tpu backend's lanes per grid step, (rows, columns) (``LANEWISE_TPU_TILE=8x512``):
    #: a multiple of the (8, 128) vector register.  Larger tiles mean fewer grid steps
    #: and more independent registers per operation, but a loop runs until the slowest
    #: lane of its tile is done.  Read when a kernel is built.
    tpu_tile: tuple = field(default_factory=lambda: _tile(os.environ.get("LANEWISE_TPU_TILE", "32x128")))
    #: The tpu backend's lanes per grid step for a lane without loops, (rows, columns)
    #: (``LANEWISE_TPU_BLOCK``): no lane waits for another there, so a bigger block
    #: only saves grid steps (each costs a fraction of a microsecond), within the
    #: chip's vector memory.  Read when a kernel is built.
    tpu_block: tuple = field(default_factory=lambda: _tile(os.environ.get("LANEWISE_TPU_BLOCK", "256x1024")))
    #: The lanes at a time, (rows, columns), that a grid step of a *long* lane without
    #: loops computes its block in (``LANEWISE_TPU_STRIP``; ``0`` or None: the whole block
    #: at once).  The chip computes one operation over the whole block before the next,
    #: so each intermediate of a block of 256 registers goes through vector memory; a
    #: strip of a few registers keeps a long chain of operations (a Philox draw per lane:
    #: about 1,000) in registers, 2.1x faster on a TPU v5e, while a short lane (W1's cos and
    #: division) runs 1.3x slower in strips: only a lane of at least ``kernel.LONG``
    #: operations takes them (docs/tpu.md).  Read when a kernel is built.
    tpu_strip: tuple | None = field(default_factory=lambda: _strip(os.environ.get("LANEWISE_TPU_STRIP", "16x512")))
    #: Loop iterations the tpu backend runs between two checks of "some lane of the tile
    #: is still active" (``LANEWISE_TPU_UNROLL``): the check is a reduction over the tile,
    #: dearer than an iteration of a small loop; iterations after the tile's lanes are
    #: done change nothing but cost time (a range of literal bounds never runs past its
    #: end).  Read when a kernel is built.  The defaults, (32, 128) and 16, were the
    #: fastest on a TPU v5e for escape-time loops (docs/tpu.md).
    tpu_unroll: int = field(default_factory=lambda: int(os.environ.get("LANEWISE_TPU_UNROLL", "16")))
    #: The JAX devices a tpu call splits its lanes over (``LANEWISE_TPU_DEVICES``):
    #: ``"all"`` (the default) every device of JAX's default backend (the host's TPU
    #: chips; CPU devices in interpret mode), or a number n, the first n of them; 1
    #: runs every call on one device as before.  With two or more, the outermost vmap
    #: level's indices are split over the devices (padded to equal shares), each runs
    #: the same kernel on its share and the results come back as one ``jax.Array``
    #: sharded over them; ``lw.reduce`` folds on each device, then combines the
    #: devices' partials, in the same jitted call (docs/tpu.md, backends/tpu/sharded.py).
    #: Read at each call.
    tpu_devices: int | str = field(default_factory=lambda: _devices(os.environ.get("LANEWISE_TPU_DEVICES", "all")))

    @contextlib.contextmanager
    def overridden(self, **values):
        """Temporarily change options (restored on exit).

        Example:
            >>> with config.overridden(debug=True):
            ...     config.debug
            True
        """
        saved = {name: getattr(self, name) for name in values}
        for name, value in values.items():
            setattr(self, name, value)
        try:
            yield self
        finally:
            for name, value in saved.items():
                setattr(self, name, value)


config = Config()
