"""The CUDA backend's ``lw.vmap``: a lane program compiled by numba-cuda into one kernel.

A lane is a thread; the kernel (codegen.cuda) walks the flattened lane space
with a grid-stride loop whose innermost level is the contiguous axis of the
first output, so writes coalesce.  Flow for a call: bind the arguments (device
arrays stand in as placeholders, program.bind_call needs only their shape and
dtype) -> type lane 0 on the CPU (the cpu backend's result_type) -> program ->
render the module -> numba-cuda compiles ``kernel`` on its first launch.

Inputs: NumPy arrays are copied to the device and results copied back; arrays
with ``__cuda_array_interface__`` (numba, CuPy, PyTorch) are used in place and
results stay on the device (returned as CuPy/PyTorch arrays when the inputs
were).  Mixing both: a host array of at most :data:`.device.SMALL_HOST_BYTES`
is copied, a larger one is an error naming the argument.

Lane exceptions: device code cannot raise; a failing lane records its flat
index in an error slot (atomic min) and the host replays that lane on the CPU
(:func:`lanewise.backends.host.replay_lane`) to raise the real exception.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

import numba
import numpy as np
from numba import cuda
from numba.core import types as nt

from ... import pytree
from ...codegen import cuda as render_cuda
from ...errors import BackendError, LanewiseError
from ...plan.program import Call, Program
from ...plan.schedule import lane_index, loop_order
from ...lane.lanefn import jit_lane_cuda
from .. import cpu, host
from .device import (alloc, as_caller_array, device_values, disk_key, host_call, is_device_array, lane_inject,
                     launch, nbytes, register_overloads, require_device, typed, typing_values)

#: Builds since import: typed (lane 0 typed on the CPU, module rendered) or found on disk.
stats = {"typed": 0, "disk": 0}


@dataclass
class CudaExecutable:
    """A rendered program: the module of kernels and what launching it needs."""

    program: Program
    module: ModuleType
    source: str
    shapes_from: Any = None  # per-lane array outputs: the CPU executable whose probe runs lane 0
    path: Any = None  # the module's file in the disk cache (None: in memory)

    def __post_init__(self):
        self.order = loop_order(self.program)

    def lane_shapes(self, call: Call) -> dict[int, tuple]:
        """Shapes of per-lane array outputs, from lane 0 on the CPU (zeros for device data)."""
        if self.shapes_from is None:
            return {}
        return cpu.lane_output_shapes(self.shapes_from, replace(call, values=typing_values(call.values)))


def build(call: Call, *, need_device: bool = True) -> CudaExecutable:
    """The executable for ``call``'s signature: from disk if cached, else typed and rendered."""
    if need_device:
        require_device()
    register_overloads()
    typing = replace(call, values=typing_values(call.values))
    rendered = {}

    def render():
        result = typed(call)[1]
        program, answers = host.program_and_answers(call, result)  # answers: kept with the kernel
        rendered["inplace"] = _inplace(program, result)
        return render_cuda.render(program, rendered["inplace"] is not None), (result, answers)

    def inject(meta):
        names = lane_inject(call.lane, call.signature)
        if "inplace" not in rendered:  # found on disk
            rendered["inplace"] = _inplace(host.program(call, *meta), meta[0])
        if rendered["inplace"] is not None:
            names["lane_inplace"] = jit_lane_cuda(rendered["inplace"])
        return names

    built = host.build_module("cuda kernel", disk_key("map", call), render, inject)
    stats["disk" if built.from_disk else "typed"] += 1
    shapes_from = cpu.build(typing) if rendered["inplace"] is not None else None
    return CudaExecutable(host.program(call, *built.meta), built.module, built.source, shapes_from, built.path)


def _inplace(program: Program, result):
    """The lane rewritten to fill its per-lane array output (device code returns no arrays), or None."""
    inplace = cpu.inplace_lane(program, result, returns_array=False)
    if inplace is not None and any(dim is None for dim in program.outputs[0].level_dims):
        return None  # out_axes=None: every lane would write the one slice
    return inplace


# ----------------------------------------------------------------------------- run


def run(exe: CudaExecutable, call: Call, out=None):
    """Run every lane of ``call`` on the GPU; return the output pytree."""
    program, sizes = exe.program, call.sizes
    lane_shapes = exe.lane_shapes(call)
    shapes = [o.shape(sizes, lane_shapes.get(k, ())) for k, o in enumerate(program.outputs)]
    on_device = any(is_device_array(v) for v in call.values)
    values = device_values(call)
    targets, outs = _outputs(program, shapes, out)
    total = int(np.prod(sizes, dtype=np.int64)) if sizes else 1
    if total:
        err = alloc(lambda: cuda.to_device(np.array([render_cuda.INT64_MAX], np.int64)), 8, "error slot")
        launch(exe, exe.module.kernel, total, (*values, *outs, *sizes, err), call)
        failed = int(err.copy_to_host()[0])
        if failed != render_cuda.INT64_MAX:
            _raise_lane_error(exe, call, failed, lane_shapes)
    results = _results(outs, shapes, targets, out, on_device, call)
    return pytree.unflatten(program.out_tree, results) if out is None else out


def _device_output(shape, o):
    return alloc(lambda: cuda.device_array(shape or (1,), o.dtype), nbytes(shape, o.dtype), f"output {o.name}")


def _outputs(program: Program, shapes, out):
    """(host targets or None, device arrays the kernel writes) per output leaf."""
    if out is None:
        outs = [_device_output(s, o) for s, o in zip(shapes, program.outputs, strict=True)]
        return [None] * len(outs), outs
    targets, outs = [], []
    leaves = host.check_out(program, shapes, out, is_device_array)
    for leaf, shape, o in zip(leaves, shapes, program.outputs, strict=True):
        if is_device_array(leaf):
            targets.append(None)
            dev = leaf if hasattr(leaf, "copy_to_host") else cuda.as_cuda_array(leaf)
            outs.append(dev.reshape((1,)) if not shape else dev)
        else:
            targets.append(leaf)
            outs.append(_device_output(shape, o))
    return targets, outs


def _results(outs, shapes, targets, out, on_device, call):
    results = []
    for dev, shape, target in zip(outs, shapes, targets, strict=True):
        if target is not None:  # a host out= array
            target[...] = dev.copy_to_host().reshape(shape)
            results.append(target)
        elif out is not None or on_device:
            results.append(as_caller_array(dev if shape else dev.reshape(()), call.values))
        else:
            results.append(dev.copy_to_host().reshape(shape))
    return results


def _raise_lane_error(exe: CudaExecutable, call: Call, flat: int, lane_shapes=None):
    index = lane_index(call.sizes, (exe.order, flat))
    result = host.replay_lane(host_call(call), index, raise_anyway=False)  # raises the lane's own exception
    if lane_shapes and np.shape(result) != lane_shapes[0]:
        raise host.shape_changed(index, exe.program.outputs[0].name, np.shape(result), lane_shapes[0])
    raise LanewiseError(f"lane {index} failed inside the CUDA kernel but not when replayed on the CPU")


# ----------------------------------------------------------------------------- PTX without a GPU


def kernel_argtypes(exe, call: Call) -> dict:
    """numba types of each kernel's arguments for ``call`` (host inputs), by kernel name."""
    sizes = [nt.int64] * len(call.sizes)
    err = nt.Array(nt.int64, 1, "C")
    outs = [nt.Array(numba.from_dtype(o.dtype), max(o.ndim, 1), "C") for o in exe.program.outputs]
    return {"kernel": (*leaf_argtypes(call), *outs, *sizes, err)}


def leaf_argtypes(call: Call) -> list:
    """numba types of ``call``'s leaves as a kernel receives them (host inputs)."""
    values = []
    for v in call.values:
        if isinstance(v, np.ndarray) and v.ndim:
            layout = "C" if v.flags.c_contiguous else "F" if v.flags.f_contiguous else "C"
            values.append(nt.Array(numba.from_dtype(v.dtype), v.ndim, layout))
        elif isinstance(v, np.ndarray):
            values.append(numba.typeof(v[()]))
        elif is_device_array(v):
            raise BackendError("compile_kernels takes host (NumPy) arguments")
        else:
            values.append(numba.typeof(v))
    return values
