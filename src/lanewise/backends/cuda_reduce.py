"""The CUDA backend of ``lw.reduce``: block trees in shared memory, then a second pass.

Pass 1 (``rkernel``): block ``b`` takes chunk ``b % nchunks`` of the reduced
lanes of kept index ``b // nchunks``; its threads fold lanes ``t, t + TPB, ...``
of the chunk (coalesced), then halve a shared-memory array (thread t takes
t + s) into one partial per block.  Pass 2 (``rfinish``): one block per kept
index combines its partials with the same tree.  The assignment of lanes to
threads and the combination order depend only on the sizes and the block size,
never on timing: no floating-point atomics, bitwise reproducible run to run.
Operations are the rows of ``reducing.OPS`` (and ``lw.Monoid``), as on the CPU.

Empty reductions (a size-0 level) run on the CPU backend, which owns their
NumPy-compatible results and errors.  Results are NumPy values (a reduction's
result is small); with device inputs, a result with kept axes is returned on
the device.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numba
import numpy as np
from numba import cuda
from numba.core import types as nt

from .. import pytree
from ..codegen import cuda as render_cuda
from ..codegen.cpu_reduce import ReduceSpec
from ..config import config
from ..lanefn import fingerprint
from ..program import Call, Program
from ..reducing import Monoid, Reduced
from ..runtime import cache
from . import cpu, cpu_reduce
from .cuda import (REDUCE_TPB, _alloc, _max_blocks, _nbytes, _register_overloads, as_caller_array, device_values,
                   disk_key, host_call, is_device_array, lane_inject, launch, program_of, require_device)
from .cuda import kernel_argtypes as _map_argtypes

NAME = "cuda"


@dataclass
class CudaReduceExecutable:
    program: Program
    spec: ReduceSpec
    result_dtypes: tuple
    module: ModuleType
    source: str
    monoid: Monoid | None


def build(reduced: Reduced, call: Call, *, need_device: bool = True) -> CudaReduceExecutable:
    """Type the lane (on the CPU), plan the reduction like the CPU does, render the kernels."""
    if need_device:
        require_device()
    _register_overloads()
    monoid = reduced.op if isinstance(reduced.op, Monoid) else None
    program = program_of(call)
    spec, result_dtypes = cpu_reduce._spec(reduced, program, call)
    fp_monoid = fingerprint(monoid.combine) if monoid else ""
    key = disk_key("reduce", call, fp_monoid, repr(monoid.identity) if monoid else "", spec) \
        if fp_monoid is not None else None
    found = cache.lookup(key) if key else None
    source = found[1] if found else render_cuda.render_reduce(program, spec)
    path = found[0] if found else (cache.store(key, source, None) if key else None)
    if config.debug:
        print(f"# ---- lanewise cuda reduce kernels ({path or 'in memory'})\n{source}")
    inject = {**lane_inject(call.lane, call.signature), "TPB": REDUCE_TPB, "boolean": nt.boolean}
    for m, dtype in enumerate(spec.acc_dtypes):
        inject[f"ACC{m}"] = numba.from_dtype(dtype)
    identities = cpu_reduce._identities(spec, monoid)
    for m, dtype in enumerate(spec.acc_dtypes):
        # a NumPy scalar of the accumulator's dtype: the fold keeps one type
        inject[f"ID{m}"] = np.asarray(identities[f"ID{m}"]).astype(dtype)[()]
    if monoid is not None:
        from ..lanefn import jit_lane_cuda
        inject["combine"] = jit_lane_cuda(monoid.combine)
    module = cache.load_module(f"lw_cuda_r{key or id(spec)}", path, source, inject)
    return CudaReduceExecutable(program, spec, result_dtypes, module, source, monoid)


def _sizes(exe, call):
    spec, sizes = exe.spec, call.sizes
    n_kept = int(np.prod([sizes[lv] for lv in spec.kept], dtype=np.int64))
    n_red = int(np.prod([sizes[lv] for lv in spec.reduced], dtype=np.int64))
    return n_kept, n_red


def run(exe: CudaReduceExecutable, call: Call, reduced: Reduced):
    """The reduction of ``call``'s lanes (host values; device arrays for kept axes of device inputs)."""
    spec = exe.spec
    n_kept, n_red = _sizes(exe, call)
    if not n_kept or not n_red:  # empty: the CPU owns NumPy's empty-reduction rules
        host = host_call(call)
        return cpu_reduce.run(cpu_reduce.build(reduced, host), host)
    plan = render_cuda.reduce_plan(n_kept, n_red, REDUCE_TPB)
    values = device_values(call)
    partials = []
    for m, dtype in enumerate(spec.acc_dtypes):
        partials.append(_device_empty(plan.n_blocks, dtype, f"partials of output {m}"))
        if spec.indexed:
            partials.append(_device_empty(plan.n_blocks, np.int64, f"partial indices of output {m}"))
    strides = cpu_reduce._index_strides(exe, call.sizes) if spec.indexed else []
    err = cuda.to_device(np.array([render_cuda.INT64_MAX], np.int64))
    blocks = min(plan.n_blocks, _max_blocks(plan.tpb))  # blocks grid-stride over partials
    launch(exe, exe.module.rkernel, plan.n_blocks * plan.tpb,
           (*values, *partials, *call.sizes, *strides, plan.n_chunks, plan.chunk, n_red, err),
           call, tpb=plan.tpb, blocks=blocks)
    failed = int(err.copy_to_host()[0])
    if failed != render_cuda.INT64_MAX:
        _raise_lane_error(exe, call, failed, n_red)
    outs = [_device_empty(n_kept, np.int64 if spec.indexed else dtype, f"result {m}")
            for m, dtype in enumerate(exe.result_dtypes)]
    launch(exe, exe.module.rfinish, n_kept * plan.tpb, (*partials, *outs, n_kept, plan.n_chunks, n_red),
           call, tpb=plan.tpb, blocks=min(n_kept, _max_blocks(plan.tpb)))
    on_device = any(is_device_array(v) for v in call.values)
    results = [_place(exe, dev, call, m, on_device) for m, dev in enumerate(outs)]
    return pytree.unflatten(exe.program.out_tree, results)


def _device_empty(n, dtype, what):
    return _alloc(lambda: cuda.device_array(max(n, 1), dtype), _nbytes((n,), dtype), what)


def _place(exe, dev, call, m, on_device):
    """Kept results (level order, flat) in the output's own axis order."""
    out = exe.program.outputs[m]
    kept = list(exe.spec.kept)
    in_order = [out.level_dims[lv] for lv in kept] == sorted(out.level_dims[lv] for lv in kept)
    if on_device and kept and in_order:
        return as_caller_array(dev.reshape(tuple(call.sizes[lv] for lv in kept)), call.values)
    host = dev.copy_to_host().astype(exe.result_dtypes[m], copy=False)
    return cpu_reduce._place(exe, host, call.sizes, m)


def _raise_lane_error(exe, call, flat, n_red):
    k, r = divmod(flat, n_red)
    index = [0] * len(call.sizes)
    for lv in reversed(exe.spec.kept):
        k, index[lv] = divmod(k, call.sizes[lv])
    for lv in reversed(exe.spec.reduced):
        r, index[lv] = divmod(r, call.sizes[lv])
    cpu.replay_lane(host_call(call), tuple(index))


def kernel_argtypes(exe: CudaReduceExecutable, call: Call) -> dict:
    """numba types of ``rkernel``'s and ``rfinish``'s arguments (host inputs), for PTX."""
    spec = exe.spec
    leaves = list(_map_argtypes(_MapLike(exe.program), call)["kernel"][:len(call.values)])
    arr = lambda dtype: nt.Array(numba.from_dtype(np.dtype(dtype)), 1, "C")  # noqa: E731
    partials = []
    for dtype in spec.acc_dtypes:
        partials.append(arr(dtype))
        if spec.indexed:
            partials.append(arr(np.int64))
    sizes = [nt.int64] * len(call.sizes)
    strides = [nt.int64] * len(spec.reduced) if spec.indexed else []
    outs = [arr(np.int64 if spec.indexed else d) for d in exe.result_dtypes]
    return {"rkernel": (*leaves, *partials, *sizes, *strides, nt.int64, nt.int64, nt.int64, arr(np.int64)),
            "rfinish": (*partials, *outs, nt.int64, nt.int64, nt.int64)}


@dataclass
class _MapLike:
    program: Program


def call_reduced(reduced: Reduced, args: tuple, kwargs: dict):
    """``reduced(*args, **kwargs)`` on the GPU (reducing.Reduced dispatches here)."""
    from .cuda import bind_call
    call = bind_call(reduced.fun, args, kwargs)
    key = ("cuda", call.signature)
    exe = reduced._executables.get(key)
    if exe is None:
        exe = reduced._executables[key] = build(reduced, call)
    return run(exe, call, reduced)

