"""``lw.scan`` inside CUDA lanes: the scan overload registered for numba-cuda's target.

The implementation is the CPU's (:func:`lanewise.lane.scanning.scan_implementation`),
typed with the CUDA target's typing context.  On the GPU a lane cannot allocate,
so the step's ``y`` must be None there (keep what you need in the carry).
Registered once, when the cuda backend first builds a kernel, so
``import lanewise`` never imports ``numba.cuda``.
"""

from __future__ import annotations

from ...lane.scanning import scan, scan_implementation

_registered = False


def register_scan() -> None:
    """Register the overload of :func:`lanewise.scan` for numba-cuda lanes (once)."""
    global _registered
    if _registered:
        return
    from numba.cuda.descriptor import cuda_target
    from numba.cuda.extending import overload as cuda_overload

    @cuda_overload(scan, inline="always")
    def _scan_overload_cuda(f, init, xs=None, length=None, reverse=False, unroll=1):
        return scan_implementation(cuda_target.typing_context, f, init, xs, stacked_ys=False)

    _registered = True
