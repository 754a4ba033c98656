"""The CUDA backend's host and device helpers, shared by its map and reduce modules.

Everything here is about the device itself, not about one kind of kernel:
whether kernels run on a GPU or numba-cuda's simulator, binding device arrays
without copying them, moving values to and from the device, allocating with an
out-of-memory error that says how much was asked and free, launching with
compile errors retold, and the lane as a device function.

Runs without a GPU on numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1`` set
before ``numba.cuda`` is first imported); :func:`offline` lets kernels compile
to PTX for any compute capability on a machine without a GPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools

import numba
import numpy as np
from numba import cuda
from numba.core import types as nt
from numba.core.errors import NumbaError

from ...codegen.common import injected_names
from ...errors import BackendError, LaneCompileError, LanewiseError, function_location
from ...plan.program import Call, Program
from ...plan.program import bind_keeping
from ...lane.lanefn import jit_lane_cuda
from ...lane import indexing as lane_indexing
from ...lane import unbound as lane_unbound
from ...lane.numba_errors import compile_error
from .. import cpu, host

NAME = "cuda"

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
    from ...lane.scanning import reference_mode

    def checked(fn, args):
        """``(failed, result)`` of ``fn(*args)`` (the simulator runs Python; lanes get
        NumPy views, not the simulator's array wrappers, and lw.scan runs its
        Python reference, as on the python backend)."""
        args = tuple(getattr(a, "_ary", a) for a in args)
        try:
            with reference_mode(), np.errstate(all="ignore"):  # int64 wraps silently, as on the GPU
                return False, fn(*args)
        except Exception:  # noqa: BLE001 - a lane's failure, reported as a status like on the GPU
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


def register_overloads() -> None:
    """lw.scan, dict records and NumPy's scalar math for CUDA lanes (once; the
    simulator runs Python and needs none of them)."""
    global _registered
    if SIMULATOR or _registered:
        return
    import operator

    from numba.cuda.extending import overload

    from ...lane import records
    from ...lane.lanefn import CUDA_SUBSTITUTES
    from .npmath import SUBSTITUTES
    from .scan import register_scan

    register_scan()
    overload(operator.getitem)(records.record_getitem)
    # the checks lane.versioning.checked_for_gpu writes into a GPU lane, by the names it calls
    overload(lane_unbound.GLOBALS["_lw_unbound"], inline="always")(_unbound_on_device)
    overload(lane_indexing.GLOBALS["_lw_at"], inline="always")(_at_on_device)
    overload(lane_indexing.GLOBALS["_lw_put"], inline="always")(_put_on_device)
    CUDA_SUBSTITUTES.update(SUBSTITUTES)
    _registered = True


# ----------------------------------------------------------------------------- binding


def _unbound_on_device(value, bound, message):
    """A read of a local that may be unbound (lane.unbound) in device code: a failed lane
    where the flag is False (the host replays it on the CPU, which raises Python's words);
    the message is not carried to the device."""
    def impl(value, bound, message):
        if not bound:
            raise UnboundLocalError
        return value

    return impl


def _checked_index(a, i) -> bool:
    """Whether ``a[i]`` is an array's element at one integer index, or at a tuple of
    them of one type, one per axis (checked on the device)."""
    if not isinstance(a, nt.Array) or a.ndim < 1:
        return False
    if isinstance(i, nt.UniTuple):
        return len(i) == a.ndim and isinstance(i.dtype, nt.Integer)
    return isinstance(i, nt.Integer)


def _within(a, i) -> bool:
    """Whether every index of ``i`` (an int or a tuple of ints) lies in its axis (a negative
    one wraps in ``a[i]`` itself, as in Python)."""
    if isinstance(i, nt.Integer):
        return lambda a, i: not (i < -a.shape[0] or i >= a.shape[0])

    def each(a, i):
        for d in range(len(i)):
            if i[d] < -a.shape[d] or i[d] >= a.shape[d]:
                return False
        return True

    return each


def _at_on_device(a, i):
    """``a[i]`` (lane.indexing): an integer index out of its axis fails the lane."""
    if not _checked_index(a, i):
        return lambda a, i: a[i]
    within = device_jit(_within(a, i))

    def impl(a, i):
        if not within(a, i):
            raise IndexError
        return a[i]

    return impl


def _put_on_device(a, i, v):
    """``a[i] = v`` (lane.indexing): an integer index out of its axis fails the lane."""
    if not _checked_index(a, i):
        def store(a, i, v):
            a[i] = v
        return store
    within = device_jit(_within(a, i))

    def impl(a, i, v):
        if not within(a, i):
            raise IndexError
        a[i] = v

    return impl


def is_device_array(value) -> bool:
    """A CUDA array: ``__cuda_array_interface__``, or a (simulated) numba device array."""
    return hasattr(value, "__cuda_array_interface__") or type(value).__module__.startswith("numba.cuda")


def placeholder(value) -> np.ndarray:
    """A host stand-in with the shape and dtype of device array ``value`` (no data)."""
    return np.broadcast_to(np.zeros((), np.dtype(value.dtype)), tuple(value.shape))


def bind_call(mapped, args: tuple, kwargs: dict) -> Call:
    """program.bind_call, with device arrays kept as they are (not copied to the host)."""
    return bind_keeping(mapped, args, kwargs, is_device_array)


def typing_values(values) -> tuple:
    """Values the CPU can type (device arrays replaced by placeholders)."""
    return tuple(placeholder(v) if is_device_array(v) else v for v in values)


def host_call(call: Call) -> Call:
    """``call`` with every device array copied to the host (to replay a lane)."""
    values = tuple(to_host(v) if is_device_array(v) else v for v in call.values)
    return dataclasses.replace(call, values=values)


def to_host(value):
    if not hasattr(value, "copy_to_host"):
        value = cuda.as_cuda_array(value)
    return value.copy_to_host()


def lane_inject(lane, sig) -> dict:
    """Globals of a generated module: the lane as a device function, and helpers."""
    classes = injected_names(sig)
    if SIMULATOR:  # Python lanes index a dict argument by key: give them dicts
        from ...lane.records import Record
        classes = {name: (functools.partial(_as_dict, cls._lw_keys) if issubclass(cls, Record) else cls)
                   for name, cls in classes.items()}
    return {"lane": jit_lane_cuda(lane), "checked": checked, "device_jit": device_jit, **classes}




def _as_dict(keys, *values):
    return dict(zip(keys, values))




def program_of(call: Call) -> Program:
    """Type lane 0 on the CPU (device arrays as placeholders) and build the program."""
    return typed(call)[0]




def typed(call: Call):
    """(program, result type, call with device arrays as placeholders): lane 0 typed on the CPU."""
    typing = dataclasses.replace(call, values=typing_values(call.values))
    try:
        result = cpu.result_type(typing)
    except LaneCompileError as e:  # retold for this backend
        if isinstance(e.__cause__, NumbaError):
            raise compile_error(e.__cause__, call.lane, NAME) from e.__cause__
        raise
    return host.program(call, result), result, typing




def disk_key(kind: str, call: Call, *parts, functions=()) -> str | None:
    """The disk-cache key of a CUDA module for ``call`` (None: memory only).

    The module file holds ``cuda.jit(..., cache=True)`` kernels, so numba-cuda
    keeps their compiled code beside it and a warm process loads it instead of
    compiling (its index also keys on the card's compute capability).  Block
    sizes differ on the simulator, so they are part of the key."""
    return host.disk_key(f"cuda {kind}", [call.lane, *functions], call.signature, SIMULATOR, TPB, REDUCE_TPB,
                         *parts)


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
            values.append(alloc(lambda h=host: cuda.to_device(h), v.nbytes, f"argument {leaf.name}"))
        else:
            values.append(v)
    return values




def launch(exe, kernel, total: int, args: tuple, call: Call, tpb: int = TPB, blocks: int | None = None):
    """Launch ``kernel`` over ``total`` lanes (grid-stride); compile errors retold."""
    if blocks is None:
        blocks = max(1, min(-(-total // tpb), max_blocks(tpb)))
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




def max_blocks(tpb: int) -> int:
    """Enough resident blocks to fill the GPU; more only add scheduling."""
    if SIMULATOR:
        return 2
    device = cuda.get_current_device()
    return int(device.MULTIPROCESSOR_COUNT) * max(1, 2048 // tpb) * 4




def alloc(make, nbytes: int, what: str):
    """``make()``, with a device out-of-memory error retold (bytes asked, bytes free)."""
    try:
        return make()
    except Exception as e:
        if not is_oom(e):
            raise
        try:
            free, total = cuda.current_context().get_memory_info()
            have = f"{free} of {total} bytes are free"
        except Exception:  # noqa: BLE001 - the context may be unusable after the failure
            have = "free memory unknown"
        raise DeviceMemoryError(
            f"cuda backend: allocating {nbytes} bytes on the GPU for {what} failed: out of device "
            f"memory ({have}). Process the lanes in parts, or free device memory first.") from e




def is_oom(e: Exception) -> bool:
    code = getattr(e, "code", None)
    try:
        if code is not None and int(code) == 2:  # CUDA_ERROR_OUT_OF_MEMORY
            return True
    except (TypeError, ValueError):
        pass
    return "OUT_OF_MEMORY" in str(e).upper().replace(" ", "_")




def nbytes(shape, dtype) -> int:
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize




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
