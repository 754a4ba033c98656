"""The CUDA backend of ``lw.reduce``: block trees in shared memory, then a second pass.

Pass 1 (``rkernel``): block ``b`` takes chunk ``b % nchunks`` of the reduced
lanes of kept index ``b // nchunks``; its threads fold lanes ``t, t + TPB, ...``
of the chunk (coalesced), then halve a shared-memory array (thread t takes
t + s) into one partial per block.  Pass 2 (``rfinish``): one block per kept
index combines its partials with the same tree.  The assignment of lanes to
threads and the combination order depend only on the sizes and the block size,
never on timing: no floating-point atomics, bitwise reproducible run to run.
Operations are the rows of :data:`lanewise.plan.reduction.OPS` (and ``lw.Monoid``),
as on the CPU.

Empty reductions (a size-0 level) run on the CPU backend, which owns their
NumPy-compatible results and errors.  Results are NumPy values (a reduction's
result is small); with device inputs, a result with kept axes is returned on
the device.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numba
import numpy as np
from numba import cuda
from numba.core import types as nt

from ... import pytree
from ...codegen import cuda as render_cuda
from ...plan import reduction
from ...plan.program import Call, Program
from ...plan.reduction import Monoid, ReduceSpec
from ...plan.schedule import lane_index
from ...lane.lanefn import jit_lane_cuda
from ...lane.typing_only import call_dtype
from .. import cpu, host
from .device import (REDUCE_TPB, alloc, as_caller_array, device_values, disk_key, host_call, is_device_array,
                     lane_inject, launch, max_blocks, nbytes, program_of, register_overloads, require_device)
from .map import leaf_argtypes


@dataclass
class CudaReduceExecutable:
    program: Program
    spec: ReduceSpec
    module: ModuleType
    source: str
    op: Any  # the user's op and axis: an empty reduction runs on the CPU with them
    axis: Any


def build_reduce(op, axis, call: Call, *, need_device: bool = True) -> CudaReduceExecutable:
    """Type the lane (on the CPU), plan the reduction like the CPU does, render the kernels."""
    if need_device:
        require_device()
    register_overloads()
    monoid = op if isinstance(op, Monoid) else None
    program = program_of(call)
    spec = reduction.reduce_spec(op, axis, program, call_dtype)
    reduction.require_scalar_lanes(spec, "cuda")
    key = disk_key("reduce", call, repr(monoid.identity) if monoid else "", spec,
                   functions=[monoid.combine] if monoid else [])
    inject = {**lane_inject(call.lane, call.signature), "TPB": REDUCE_TPB, "boolean": nt.boolean}
    for m, (dtype, identity) in enumerate(zip(spec.acc_dtypes, reduction.identities(spec, monoid), strict=True)):
        inject[f"ACC{m}"] = numba.from_dtype(dtype)
        inject[f"ID{m}"] = np.asarray(identity).astype(dtype)[()]  # the fold keeps one type
    if monoid is not None:
        inject["combine"] = jit_lane_cuda(monoid.combine)
    built = host.build_module("cuda reduce kernels", key,
                              lambda: (render_cuda.render_reduce(program, spec), None), lambda meta: inject)
    return CudaReduceExecutable(program, spec, built.module, built.source, op, axis)


def _sizes(exe, call):
    spec, sizes = exe.spec, call.sizes
    n_kept = int(np.prod([sizes[lv] for lv in spec.kept], dtype=np.int64))
    n_red = int(np.prod([sizes[lv] for lv in spec.reduced], dtype=np.int64))
    return n_kept, n_red


def run_reduce(exe: CudaReduceExecutable, call: Call):
    """The reduction of ``call``'s lanes (host values; device arrays for kept axes of device inputs)."""
    spec = exe.spec
    n_kept, n_red = _sizes(exe, call)
    if not n_kept or not n_red:  # empty: the CPU owns NumPy's empty-reduction rules
        local = host_call(call)
        return cpu.run_reduce(cpu.build_reduce(exe.op, exe.axis, local), local)
    plan = render_cuda.reduce_plan(n_kept, n_red, REDUCE_TPB)
    values = device_values(call)
    partials = []
    for m, dtype in enumerate(spec.acc_dtypes):
        partials.append(_device_empty(plan.n_blocks, dtype, f"partials of output {m}"))
        if spec.indexed:
            partials.append(_device_empty(plan.n_blocks, np.int64, f"partial indices of output {m}"))
    strides = reduction.index_strides(spec, exe.program.outputs[0], call.sizes) if spec.indexed else []
    err = cuda.to_device(np.array([render_cuda.INT64_MAX], np.int64))
    blocks = min(plan.n_blocks, max_blocks(plan.tpb))  # blocks grid-stride over partials
    launch(exe, exe.module.rkernel, plan.n_blocks * plan.tpb,
           (*values, *partials, *call.sizes, *strides, plan.n_chunks, plan.chunk, n_red, err),
           call, tpb=plan.tpb, blocks=blocks)
    failed = int(err.copy_to_host()[0])
    if failed != render_cuda.INT64_MAX:
        host.replay_lane(host_call(call), lane_index(call.sizes, (spec.kept, failed // n_red),
                                                     (spec.reduced, failed % n_red)))
    outs = [_device_empty(n_kept, np.int64 if spec.indexed else dtype, f"result {m}")
            for m, dtype in enumerate(spec.result_dtypes)]
    launch(exe, exe.module.rfinish, n_kept * plan.tpb, (*partials, *outs, n_kept, plan.n_chunks, n_red),
           call, tpb=plan.tpb, blocks=min(n_kept, max_blocks(plan.tpb)))
    on_device = any(is_device_array(v) for v in call.values)
    results = [_place(exe, dev, call, m, on_device) for m, dev in enumerate(outs)]
    return pytree.unflatten(exe.program.out_tree, results)


def _device_empty(n, dtype, what):
    return alloc(lambda: cuda.device_array(max(n, 1), dtype), nbytes((n,), dtype), what)


def _place(exe, dev, call, m, on_device):
    """Kept results (level order, flat) in the output's own axis order."""
    out = exe.program.outputs[m]
    kept = list(exe.spec.kept)
    in_order = [out.level_dims[lv] for lv in kept] == sorted(out.level_dims[lv] for lv in kept)
    if on_device and kept and in_order:
        return as_caller_array(dev.reshape(tuple(call.sizes[lv] for lv in kept)), call.values)
    flat = dev.copy_to_host().astype(exe.spec.result_dtypes[m], copy=False)
    return reduction.place(exe.spec, out, flat, call.sizes)


def kernel_argtypes(exe: CudaReduceExecutable, call: Call) -> dict:
    """numba types of ``rkernel``'s and ``rfinish``'s arguments (host inputs), for PTX."""
    spec = exe.spec
    arr = lambda dtype: nt.Array(numba.from_dtype(np.dtype(dtype)), 1, "C")  # noqa: E731
    partials = []
    for dtype in spec.acc_dtypes:
        partials.append(arr(dtype))
        if spec.indexed:
            partials.append(arr(np.int64))
    sizes = [nt.int64] * len(call.sizes)
    strides = [nt.int64] * len(spec.reduced) if spec.indexed else []
    outs = [arr(np.int64 if spec.indexed else d) for d in spec.result_dtypes]
    return {"rkernel": (*leaf_argtypes(call), *partials, *sizes, *strides, nt.int64, nt.int64, nt.int64,
                        arr(np.int64)),
            "rfinish": (*partials, *outs, nt.int64, nt.int64, nt.int64)}
