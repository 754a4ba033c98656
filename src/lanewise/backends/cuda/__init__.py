"""The CUDA backend: a lane program compiled by numba-cuda into one kernel per call.

* :mod:`.device` — the GPU (or simulator), device arrays, allocation, launch;
* :mod:`.map` — ``lw.vmap`` kernels; :mod:`.reduce` — ``lw.reduce``'s two passes;
* :mod:`.ptx` — :func:`compile_kernels`, PTX for any compute capability without a GPU;
* :mod:`.scan`, :mod:`.npmath` — ``lw.scan`` and NumPy's scalar math for device lanes.

Runs without a GPU on numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1`` set
before ``numba.cuda`` is first imported).  This package is the backend
(:class:`lanewise.backends.protocol.Backend`).
"""

from __future__ import annotations

from .device import (NAME, REDUCE_TPB, SIMULATOR, SMALL_HOST_BYTES, TPB, DeviceMemoryError, alloc, bind_call,
                     is_device_array, offline, require_device)
from .map import CudaExecutable, build, run, stats
from .ptx import compile_kernels
from .reduce import CudaReduceExecutable, build_reduce, run_reduce

SCAN = "compiled"


def usable() -> bool:
    """A GPU with its driver, or numba-cuda's simulator."""
    from numba import cuda
    return SIMULATOR or cuda.is_available()


def explain(exe, call) -> list[str]:
    """The schedule of a CUDA executable: one thread per lane, grid-stride."""
    if isinstance(exe, CudaReduceExecutable):
        return [f"schedule: blocks of {REDUCE_TPB} threads fold chunks of the reduced lanes into "
                "partials (a tree in shared memory), then one block per kept index combines them"]
    order = " > ".join(f"i{lv}" for lv in exe.order)
    return [f"schedule: one thread per lane, blocks of {TPB} threads, grid-stride over loops {order} "
            "(innermost last: consecutive threads)"]


__all__ = ["NAME", "SCAN", "SIMULATOR", "SMALL_HOST_BYTES", "TPB", "REDUCE_TPB", "CudaExecutable",
           "CudaReduceExecutable", "DeviceMemoryError", "alloc", "bind_call", "build", "build_reduce",
           "compile_kernels", "explain", "is_device_array", "offline", "require_device", "run", "run_reduce",
           "stats", "usable"]
