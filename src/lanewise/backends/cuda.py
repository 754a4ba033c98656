"""The CUDA backend: a lane program compiled by numba-cuda into one kernel.

A lane is a thread; the kernel (codegen.cuda) walks the flattened lane space
with a grid-stride loop whose innermost level is the contiguous axis of the
first output, so writes coalesce.  Flow for a call: bind the arguments (device
arrays stand in as placeholders, program.bind_call needs only their shape and
dtype) -> type lane 0 on the CPU (backends.cpu.result_type) -> program ->
render the module -> numba-cuda compiles ``kernel`` on its first launch.

Inputs: NumPy arrays are copied to the device and results copied back; arrays
with ``__cuda_array_interface__`` (numba, CuPy, PyTorch) are used in place and
results stay on the device (returned as CuPy/PyTorch arrays when the inputs
were).  Mixing both: a host array of at most :data:`SMALL_HOST_BYTES` is
copied, a larger one is an error naming the argument.

Lane exceptions: device code cannot raise; a failing lane records its flat
index in an error slot (atomic min) and the host replays that lane on the CPU
(backends.cpu.replay_lane) to raise the real exception.

Runs without a GPU on numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1`` set
before ``numba.cuda`` is first imported), and :func:`compile_kernels` compiles
every kernel to PTX for any compute capability on a machine without a GPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numba
import numpy as np
from numba import cuda
from numba.core import types as nt
from numba.core.errors import NumbaError

from .. import pytree
from ..codegen import cuda as render_cuda
from ..codegen.cpu import injected_names
from ..codegen.plan import loop_order
from ..config import config
from ..errors import BackendError, LaneCompileError, LanewiseError, OutputError, function_location
from ..lanefn import fingerprint, jit_lane_cuda
from ..program import Call, Program, bind_call as _bind_call, make_program
from ..runtime import cache
from . import cpu
from .numba_errors import compile_error

NAME = "cuda"

#: True when numba-cuda runs kernels on its CPU simulator (NUMBA_ENABLE_CUDASIM=1).
SIMULATOR = bool(getattr(cuda.config, "ENABLE_CUDASIM", False))

#: A host array mixed with device arrays is copied if it has at most this many bytes.
SMALL_HOST_BYTES = 1 << 20

#: Builds since import: typed (lane 0 typed on the CPU, module rendered) or found on disk.
stats = {"typed": 0, "disk": 0}

#: Threads per block.  The simulator runs every thread as a Python thread: few.
TPB = 32 if SIMULATOR else 256
#: Reductions: threads per block (a power of two: the shared-memory tree halves it).
REDUCE_TPB = 8 if SIMULATOR else 256


class DeviceMemoryError(LanewiseError, MemoryError):
    """The GPU has not enough free memory for a call's arrays."""


# ----------------------------------------------------------------------------- device code helpers

if SIMULATOR:
    from ..scanning import reference_mode

    def checked(fn, args):
        """``(failed, result)`` of ``fn(*args)`` (the simulator runs Python; lanes get
        NumPy views, not the simulator's array wrappers, and lw.scan runs its
        Python reference, as on the python backend)."""
        args = tuple(getattr(a, "_ary", a) for a in args)
        try:
            with reference_mode():
                return False, fn(*args)
        except Exception:
            return True, None

    def device_jit(fn):
        return cuda.jit(device=True)(fn)
else:
    from numba.cuda import cgutils
    from numba.cuda.extending import intrinsic

    @intrinsic
    def checked(typingctx, fn, args):
        """``(failed, result)``: call device function ``fn(*args)`` and return its
        status instead of propagating it (device code has no ``try``)."""
        if not isinstance(args, nt.BaseTuple):
            return None
        sig = typingctx.resolve_function_type(fn, tuple(args.types), {})
        if sig is None:
            return None
        result = nt.Tuple((nt.boolean, sig.return_type))

        def codegen(context, builder, signature, llargs):
            cres = fn.dispatcher.compile_device(tuple(sig.args))
            context.add_linking_libs([cres.library])
            values = cgutils.unpack_tuple(builder, llargs[1], len(args))
            values = [context.cast(builder, v, a, b) for v, a, b in zip(values, args.types, sig.args)]
            status, res = context.call_internal_no_propagate(builder, cres.fndesc, cres.signature, values)
            res = context.cast(builder, res, cres.signature.return_type, sig.return_type)
            return context.make_tuple(builder, result, [status.is_error, res])

        return result(fn, args), codegen

    def device_jit(fn):
        return cuda.jit(device=True, forceinline=True)(fn)


def require_device() -> None:
    """BackendError unless a GPU (or the simulator) is there to run kernels."""
    if SIMULATOR:
        return
    if not cuda.is_available():
        raise BackendError(
            "the 'cuda' backend needs an NVIDIA GPU and its driver, and numba-cuda found none "
            "(numba.cuda.is_available() is False; numba.cuda.detect() says why). Without a GPU, "
            "set NUMBA_ENABLE_CUDASIM=1 before importing lanewise to run on numba-cuda's simulator, "
            "or use lanewise.backends.cuda.compile_kernels() to compile to PTX only.")


@contextlib.contextmanager
def offline(cc=(9, 0)):
    """Let numba-cuda compile device functions with no GPU present (for PTX only):
    it asks the current device for its compute capability; answer ``cc``."""
    if SIMULATOR:
        raise BackendError("PTX cannot be compiled under the simulator (NUMBA_ENABLE_CUDASIM=1)")
    if cuda.is_available():
        yield
        return
    from numba.cuda import dispatcher

    class _Device:
        compute_capability = tuple(cc)

    saved = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: _Device()
    try:
        yield
    finally:
        dispatcher.get_current_device = saved


_registered = False


def _register_overloads() -> None:
    """lw.scan, dict records and NumPy's scalar math for CUDA lanes (once; the
    simulator runs Python and needs none of them)."""
    global _registered
    if SIMULATOR or _registered:
        return
    import operator

    from numba.cuda.extending import overload

    from ..lanefn import CUDA_SUBSTITUTES
    from ..scanning import register_cuda
    from . import records
    from .cuda_numpy import SUBSTITUTES

    register_cuda()
    overload(operator.getitem)(records._record_getitem)
    CUDA_SUBSTITUTES.update(SUBSTITUTES)
    _registered = True


# ----------------------------------------------------------------------------- binding


def is_device_array(value) -> bool:
    """A CUDA array: ``__cuda_array_interface__``, or a (simulated) numba device array."""
    return hasattr(value, "__cuda_array_interface__") or type(value).__module__.startswith("numba.cuda")


def placeholder(value) -> np.ndarray:
    """A host stand-in with the shape and dtype of device array ``value`` (no data)."""
    return np.broadcast_to(np.zeros((), np.dtype(value.dtype)), tuple(value.shape))


def bind_call(mapped, args: tuple, kwargs: dict) -> Call:
    """program.bind_call, with device arrays kept as they are (not copied to the host)."""
    real: dict[int, Any] = {}

    def swap(value):
        leaves, tree = pytree.flatten(value)
        if not any(is_device_array(v) for v in leaves):
            return value
        new = []
        for v in leaves:
            if is_device_array(v):
                p = placeholder(v)
                real[id(p)] = v
                v = p
            new.append(v)
        return pytree.unflatten(tree, new)

    call = _bind_call(mapped, tuple(swap(a) for a in args), {k: swap(v) for k, v in kwargs.items()})
    if not real:
        return call
    return dataclasses.replace(call, values=tuple(real.get(id(v), v) for v in call.values))


def typing_values(values) -> tuple:
    """Values the CPU can type (device arrays replaced by placeholders)."""
    return tuple(placeholder(v) if is_device_array(v) else v for v in values)


def host_call(call: Call) -> Call:
    """``call`` with every device array copied to the host (to replay a lane)."""
    values = tuple(_to_host(v) if is_device_array(v) else v for v in call.values)
    return dataclasses.replace(call, values=values)


def _to_host(value):
    if not hasattr(value, "copy_to_host"):
        value = cuda.as_cuda_array(value)
    return value.copy_to_host()


# ----------------------------------------------------------------------------- build


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
        return cpu._lane_shapes(self.shapes_from, dataclasses.replace(call, values=typing_values(call.values)))


def lane_inject(lane, sig) -> dict:
    """Globals of a generated module: the lane as a device function, and helpers."""
    classes = injected_names(sig)
    if SIMULATOR:  # Python lanes index a dict argument by key: give them dicts
        from .records import Record
        classes = {name: (functools.partial(_as_dict, cls._lw_keys) if issubclass(cls, Record) else cls)
                   for name, cls in classes.items()}
    return {"lane": jit_lane_cuda(lane), "checked": checked, "device_jit": device_jit, **classes}


def _as_dict(keys, *values):
    return dict(zip(keys, values))


def program_of(call: Call) -> Program:
    """Type lane 0 on the CPU (device arrays as placeholders) and build the program."""
    return _typed(call)[0]


def _typed(call: Call):
    typing = dataclasses.replace(call, values=typing_values(call.values))
    try:
        result = cpu.result_type(typing)
    except LaneCompileError as e:  # retold for this backend
        if isinstance(e.__cause__, NumbaError):
            raise compile_error(e.__cause__, call.lane, NAME) from e.__cause__
        raise
    return make_program(call, result), result, typing


def disk_key(kind: str, call: Call, *parts) -> str | None:
    """The disk-cache key of a CUDA module for ``call`` (None: memory only).

    The module file holds ``cuda.jit(..., cache=True)`` kernels, so numba-cuda
    keeps their compiled code beside it and a warm process loads it instead of
    compiling (its index also keys on the card's compute capability).  Block
    sizes differ on the simulator, so they are part of the key."""
    fp = fingerprint(call.lane) if config.disk_cache else None
    return cache.key_of("cuda", kind, fp, call.signature, SIMULATOR, TPB, REDUCE_TPB, *parts) if fp else None


def build(call: Call, *, need_device: bool = True) -> CudaExecutable:
    """The executable for ``call``'s signature: from disk if cached, else typed and rendered."""
    if need_device:
        require_device()
    _register_overloads()
    key = disk_key("map", call)
    found = cache.lookup(key) if key else None
    if found is not None:
        path, source, result = found
        program = make_program(call, result)
        typing = dataclasses.replace(call, values=typing_values(call.values))
        stats["disk"] += 1
    else:
        program, result, typing = _typed(call)
        path = source = None
        stats["typed"] += 1
    inplace = cpu._inplace_lane(program, result, returns_array=False)  # device code returns no arrays
    if inplace is not None and any(dim is None for dim in program.outputs[0].level_dims):
        inplace = None  # out_axes=None: every lane would write the one slice
    if source is None:
        source = render_cuda.render(program, inplace is not None)
        path = cache.store(key, source, result) if key else None
    if config.debug:
        print(f"# ---- lanewise cuda kernel ({path or 'in memory'})\n{source}")
    inject = lane_inject(call.lane, call.signature)
    if inplace is not None:
        inject["lane_inplace"] = jit_lane_cuda(inplace)
    module = cache.load_module(f"lw_cuda_{key or id(call.signature)}", path, source, inject)
    shapes_from = cpu.build(typing) if inplace is not None else None
    return CudaExecutable(program, module, source, shapes_from, path)


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
        err = _alloc(lambda: cuda.to_device(np.array([render_cuda.INT64_MAX], np.int64)), 8, "error slot")
        launch(exe, exe.module.kernel, total, (*values, *outs, *sizes, err), call)
        failed = int(err.copy_to_host()[0])
        if failed != render_cuda.INT64_MAX:
            _raise_lane_error(call, exe.order, failed, lane_shapes)
    results = _results(outs, shapes, targets, out, on_device, call)
    return pytree.unflatten(program.out_tree, results) if out is None else out


def device_values(call: Call) -> list:
    """Kernel arguments: device arrays in place, host arrays copied, 0-d as scalars."""
    has_device = any(is_device_array(v) for v in call.values)
    values = []
    for leaf, v in zip(call.signature.leaves, call.values, strict=True):
        if is_device_array(v):
            v = v if hasattr(v, "copy_to_host") else cuda.as_cuda_array(v)
            values.append(v.copy_to_host()[()] if not v.shape else v)  # 0-d: its value
        elif isinstance(v, np.ndarray) and v.ndim == 0:
            values.append(v[()])
        elif isinstance(v, np.ndarray):
            if has_device and v.nbytes > SMALL_HOST_BYTES:
                raise BackendError(
                    f"argument {leaf.name} is a NumPy array of {v.nbytes} bytes while other arguments "
                    "are CUDA device arrays; pass it as a device array too (e.g. "
                    f"numba.cuda.to_device), or mix only host arrays of at most {SMALL_HOST_BYTES} "
                    "bytes (those are copied)")
            host = v if (v.flags.c_contiguous or v.flags.f_contiguous) else np.ascontiguousarray(v)
            values.append(_alloc(lambda h=host: cuda.to_device(h), v.nbytes, f"argument {leaf.name}"))
        else:
            values.append(v)
    return values


def launch(exe, kernel, total: int, args: tuple, call: Call, tpb: int = TPB, blocks: int | None = None):
    """Launch ``kernel`` over ``total`` lanes (grid-stride); compile errors retold."""
    if blocks is None:
        blocks = max(1, min(-(-total // tpb), _max_blocks(tpb)))
    try:
        kernel[blocks, tpb](*args)
    except (NumbaError, KeyError) as e:
        try:
            argtypes = [numba.typeof(v) for v in args[:len(call.values)]] + [nt.int64] * len(call.sizes)
        except Exception:  # noqa: BLE001 - a value numba cannot type: no refinement
            argtypes = None
        raise retold(e, call.lane, exe.module.lane_at, argtypes) from e


def retold(e: Exception, lane, lane_at=None, argtypes=None) -> Exception:
    """A compile failure as a LaneCompileError naming the lane (KeyError: numba-cuda
    typed a NumPy ufunc it cannot lower).  With ``lane_at`` and its argument types,
    the lane is compiled alone first: its own error says more than the kernel's."""
    if isinstance(e, NumbaError):
        if lane_at is not None and argtypes is not None:
            try:
                with offline():
                    lane_at.compile_device(tuple(argtypes))
            except NumbaError as inner:
                e = inner
            except Exception:  # noqa: BLE001 - keep the kernel's own error
                pass
        return compile_error(e, lane, NAME)
    if e.args and isinstance(e.args[0], np.ufunc):
        name = getattr(lane, "__qualname__", repr(lane))
        return LaneCompileError(
            f"lane function {name} ({function_location(lane)}) cannot be compiled for the cuda "
            f"backend: numba-cuda has no device implementation of np.{e.args[0].__name__} "
            "(use the math module's function instead)")
    return e


def _max_blocks(tpb: int) -> int:
    """Enough resident blocks to fill the GPU; more only add scheduling."""
    if SIMULATOR:
        return 2
    device = cuda.get_current_device()
    return int(device.MULTIPROCESSOR_COUNT) * max(1, 2048 // tpb) * 4


def _alloc(make, nbytes: int, what: str):
    """``make()``, with a device out-of-memory error retold (bytes asked, bytes free)."""
    try:
        return make()
    except Exception as e:
        if not _is_oom(e):
            raise
        try:
            free, total = cuda.current_context().get_memory_info()
            have = f"{free} of {total} bytes are free"
        except Exception:  # noqa: BLE001 - the context may be unusable after the failure
            have = "free memory unknown"
        raise DeviceMemoryError(
            f"cuda backend: allocating {nbytes} bytes on the GPU for {what} failed: out of device "
            f"memory ({have}). Process the lanes in parts, or free device memory first.") from e


def _is_oom(e: Exception) -> bool:
    code = getattr(e, "code", None)
    try:
        if code is not None and int(code) == 2:  # CUDA_ERROR_OUT_OF_MEMORY
            return True
    except (TypeError, ValueError):
        pass
    return "OUT_OF_MEMORY" in str(e).upper().replace(" ", "_")


def _outputs(program: Program, shapes, out):
    """(host targets or None, device arrays the kernel writes) per output leaf."""
    if out is None:
        outs = [_alloc(lambda s=s, o=o: cuda.device_array(s or (1,), o.dtype), _nbytes(s, o.dtype),
                       f"output {o.name}") for s, o in zip(shapes, program.outputs, strict=True)]
        return [None] * len(outs), outs
    leaves, tree = pytree.flatten(out)
    if tree != program.out_tree:
        raise OutputError(f"out= has structure {tree} but the lanes produce {program.out_tree}")
    targets, outs = [], []
    for leaf, shape, o in zip(leaves, shapes, program.outputs, strict=True):
        got = (np.dtype(leaf.dtype), tuple(leaf.shape)) if hasattr(leaf, "shape") else None
        if got != (o.dtype, shape):
            text = f"{got[0]}{list(got[1])}" if got else type(leaf).__name__
            raise OutputError(f"out= for {o.name} must be a {o.dtype}{list(shape)} array, got {text}")
        if is_device_array(leaf):
            targets.append(None)
            dev = leaf if hasattr(leaf, "copy_to_host") else cuda.as_cuda_array(leaf)
            outs.append(dev.reshape((1,)) if not shape else dev)
        else:
            if not leaf.flags.writeable:
                raise OutputError(f"out= for {o.name} is read-only")
            targets.append(leaf)
            outs.append(_alloc(lambda s=shape, o=o: cuda.device_array(s or (1,), o.dtype),
                               _nbytes(shape, o.dtype), f"output {o.name}"))
    return targets, outs


def _nbytes(shape, dtype) -> int:
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


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


def as_caller_array(dev, values):
    """A device result as the array type of the caller's device inputs (CuPy, PyTorch)."""
    for v in values:
        module = type(v).__module__.split(".")[0]
        if module == "cupy":
            import cupy
            return cupy.asarray(dev)
        if module == "torch":
            import torch
            return torch.as_tensor(dev, device="cuda")
    return dev


def flat_to_index(flat: int, order, sizes) -> tuple[int, ...]:
    """Level indices of flat lane ``flat`` in loop ``order`` (innermost fastest)."""
    index = [0] * len(sizes)
    rem = flat
    for lv in reversed(order):
        rem, index[lv] = divmod(rem, sizes[lv])
    return tuple(index)


def _raise_lane_error(call: Call, order, flat: int, lane_shapes=None):
    index = flat_to_index(flat, order, call.sizes)
    result = cpu.replay_lane(host_call(call), index, raise_anyway=False)  # raises the lane's own exception
    if lane_shapes and np.shape(result) != lane_shapes[0]:
        raise OutputError(f"lane ({', '.join(f'i{lv}={i}' for lv, i in enumerate(index))}) of "
                          f"{getattr(call.lane, '__qualname__', call.lane)} returned shape "
                          f"{np.shape(result)}; lane 0 returned {lane_shapes[0]} (lanes return one shape)")
    raise LanewiseError(f"lane {index} failed inside the CUDA kernel but not when replayed on the CPU")


# ----------------------------------------------------------------------------- PTX without a GPU


def kernel_argtypes(exe, call: Call) -> dict:
    """numba types of each kernel's arguments for ``call`` (host inputs), by kernel name."""
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
    sizes = [nt.int64] * len(call.sizes)
    err = nt.Array(nt.int64, 1, "C")
    outs = [nt.Array(numba.from_dtype(o.dtype), max(o.ndim, 1), "C") for o in exe.program.outputs]
    return {"kernel": (*values, *outs, *sizes, err)}


def compile_kernels(fn, *args, cc=(9, 0), llvm: bool = False, **kwargs) -> dict:
    """Compile every kernel of ``fn(*args, **kwargs)`` to PTX for compute capability ``cc``.

    ``fn`` is a function from :func:`lanewise.vmap` or :func:`lanewise.reduce`.
    Needs no GPU.  Returns ``{kernel name: ptx}`` (``{name: (ptx, llvm_ir)}``
    with ``llvm=True``: the NVVM IR before libdevice is linked, where math
    calls appear as ``__nv_*`` functions).
    """
    from ..reducing import Reduced

    if isinstance(fn, Reduced):
        from . import cuda_reduce
        call = bind_call(fn.fun, args, kwargs)
        exe = cuda_reduce.build(fn, call, need_device=False)
        kernels = cuda_reduce.kernel_argtypes(exe, call)
    else:
        call = bind_call(fn, args, kwargs)
        exe = build(call, need_device=False)
        kernels = kernel_argtypes(exe, call)
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
