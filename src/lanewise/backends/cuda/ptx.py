"""PTX without a GPU: every kernel of a mapped function or reduction, compiled for a compute capability.

Example (needs the ``[cuda]`` extra and no GPU)::

    ptx = compile_kernels(lw.vmap(f), x, cc=(9, 0))["kernel"]
"""

from __future__ import annotations

from numba import cuda
from numba.core import types as nt
from numba.core.errors import NumbaError

from . import map as cuda_map
from . import reduce as cuda_reduce
from .device import bind_call, offline, retold


def compile_kernels(fn, *args, cc=(9, 0), llvm: bool = False, **kwargs) -> dict:
    """Compile every kernel of ``fn(*args, **kwargs)`` to PTX for compute capability ``cc``.

    ``fn`` is a function from :func:`lanewise.vmap` or :func:`lanewise.reduce`.
    Needs no GPU.  Returns ``{kernel name: ptx}`` (``{name: (ptx, llvm_ir)}``
    with ``llvm=True``: the NVVM IR before libdevice is linked, where math
    calls appear as ``__nv_*`` functions).
    """
    if getattr(fn, "_lw_reduce_spec", False):
        call = bind_call(fn.fun, args, kwargs)
        exe = cuda_reduce.build_reduce(fn.op, fn.axis, call, need_device=False)
        kernels = cuda_reduce.kernel_argtypes(exe, call)
    else:
        call = bind_call(fn, args, kwargs)
        exe = cuda_map.build(call, need_device=False)
        kernels = cuda_map.kernel_argtypes(exe, call)
    out = {}
    with offline(cc):
        for name, argtypes in kernels.items():
            pyfunc = getattr(exe.module, "_" + name)
            try:
                ptx, _ = cuda.compile_ptx(pyfunc, argtypes, cc=cc)
                if llvm:
                    from numba.cuda.compiler import compile_cuda
                    ir = compile_cuda(pyfunc, nt.void, argtypes, cc=cc).library.get_llvm_str()
            except (NumbaError, KeyError) as e:
                leaves = list(argtypes[:len(call.values)]) + [nt.int64] * len(call.sizes)
                raise retold(e, call.lane, exe.module.lane_at, leaves) from e
            out[name] = (ptx, ir) if llvm else ptx
    return out
