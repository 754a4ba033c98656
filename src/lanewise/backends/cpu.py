"""The CPU backend: a lane program compiled by Numba into one parallel loop nest.

Flow for a call (each step cached): type the lane with a one-lane ``probe`` ->
program -> render the module (codegen.cpu) -> store it in the disk cache and
import it -> launch ``kernel`` (``prange`` over blocks) or, for small problems,
``kernel_serial``.  A warm process finds module and result type on disk and
Numba finds the object code beside it: no typing, no compile.

Example:
    >>> import numpy as np, lanewise as lw
    >>> lw.vmap(lambda x, y: x * y, backend="cpu")(np.arange(3.0), np.arange(3.0))
    array([0., 1., 4.])
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numba
import numpy as np
from numba.core import types as nt
from numba.core.errors import NumbaError
from numba.np.numpy_support import as_dtype

from .. import pytree, spmd
from ..codegen import cpu as render_cpu
from ..codegen.plan import Blocking, blocking, lane_work, loop_order
from ..config import config
from ..errors import LaneTypeError, LanewiseError, OutputError
from ..inplace import rewrite
from ..lanefn import fingerprint, inlined_lane, jit_lane, may_raise, python_function
from ..program import (Call, Program, ResultLeaf, ResultNode, dummy_values, lane_arguments,
                       make_program)
from ..runtime import cache
from .numba_errors import compile_error

NAME = "cpu"

#: How executables were obtained in this process (tests and ``explain`` read it):
#: "typed" counts lanes typed and rendered (cold), "disk" modules found on disk.
stats = {"typed": 0, "disk": 0}


@dataclass
class Executable:
    """A compiled program: the imported module and what launching it needs."""

    program: Program
    module: ModuleType
    source: str
    path: Any  # pathlib.Path of the cached module, or None (memory only)

    inject: dict = None
    lane_path: str = "scalar (one lane per iteration)"  # lanewise.spmd: which path runs, and why

    def __post_init__(self):
        self.order = loop_order(self.program)
        self.array_outputs = [k for k, o in enumerate(self.program.outputs) if o.lane_ndim]
        self.reloaded = False

    def call(self, name: str, *args):
        """Call a kernel of the module; if Numba's cached object code for it will
        not load (corrupt files), drop those files and recompile once."""
        try:
            return getattr(self.module, name)(*args)
        except NumbaError as e:  # a new specialisation (e.g. layout) failed to compile
            raise compile_error(e, self.program.lane, NAME) from e
        except Exception:
            if self.path is None or self.reloaded:
                raise
        self.reloaded = True
        cache.discard_object_code(self.path)
        self.module = cache.load_module(self.module.__name__, self.path, self.source, self.inject)
        return getattr(self.module, name)(*args)


def build(call: Call) -> Executable:
    """The executable for ``call``'s signature: from disk if cached, else compiled."""
    fp = fingerprint(call.lane) if config.disk_cache else None
    key = cache.key_of(fp, call.signature, config.vector_math, spmd.cache_key()) if fp else None
    found = cache.lookup(key) if key else None
    if found is not None:
        path, source, (result, inplace, lane_path) = found
        program = make_program(call, result)
        stats["disk"] += 1
    else:
        result = result_type(call)
        program = make_program(call, result)
        inplace = _inplace_lane(program, result) is not None
        choice = spmd.choose(program, call, result, inplace)
        lane_path = choice.describe()
        source = render_cpu.render(program, inplace, spmd=choice.plan)
        path = cache.store(key, source, (result, inplace, lane_path)) if key else None
        stats["typed"] += 1
    if config.debug:
        print(f"# ---- lanewise kernel ({path or 'in memory'})\n{source}")
    inject = {"lane": kernel_lane(call.lane), **render_cpu.injected_names(call.signature)}
    if inplace:
        inject["lane_inplace"] = kernel_lane(_inplace_lane(program, result))
    module = cache.load_module(f"lw_{key or id(call.signature)}", path, source, inject)
    return Executable(program, module, source, path, inject, lane_path)


def kernel_lane(fn):
    """The lane as the kernel calls it: inlined when it cannot raise (lanefn.may_raise)."""
    return jit_lane(fn) if may_raise(fn) else inlined_lane(fn)


def _inplace_lane(program: Program, result, returns_array: bool = True):
    """The lane rewritten to fill its output slice (lanewise.inplace), or None."""
    outs = program.outputs
    if len(outs) != 1 or not outs[0].lane_ndim or outs[0].dtype != result.dtype:
        return None
    return rewrite(python_function(program.lane), returns_array)


# ----------------------------------------------------------------------------- typing


def result_type(call: Call):
    """The lane's result type (ResultNode/ResultLeaf tree), by compiling lane 0."""
    source = render_cpu.render_probe(call.signature)
    inject = {"lane": jit_lane(call.lane), **render_cpu.injected_names(call.signature)}
    module = cache.load_module("lw_probe", None, source, inject)
    argtypes = tuple(numba.typeof(v) for v in call.values)
    try:
        module.probe.compile(argtypes)
    except NumbaError as e:
        raise compile_error(e, call.lane, NAME) from e
    rtype = module.probe.overloads[argtypes].signature.return_type
    return _result(rtype, call.lane)


def _result(t, lane):
    if isinstance(t, nt.BaseNamedTuple):
        return ResultNode(tuple(_result(c, lane) for c in t.types), t.instance_class)
    if isinstance(t, nt.BaseTuple):
        return ResultNode(tuple(_result(c, lane) for c in t.types))
    if isinstance(t, nt.Array):
        return ResultLeaf(as_dtype(t.dtype), t.ndim)
    if isinstance(t, (nt.Number, nt.Boolean)):
        return ResultLeaf(as_dtype(t), 0)
    if isinstance(t, nt.NoneType):
        return None
    name = getattr(lane, "__qualname__", repr(lane))
    if isinstance(t, nt.Optional):
        raise LaneTypeError(f"lane function {name} returns None on some paths and {t.type} on "
                            "others (a missing return?); every path must return the same kind of value")
    raise LaneTypeError(f"lane function {name} returns {t}; lanes return scalars, fixed-shape "
                        "arrays, or tuples/namedtuples of them")


# ----------------------------------------------------------------------------- launch


def run(exe: Executable, call: Call, out=None):
    """Run every lane of ``call``; return the output pytree."""
    program, sizes = exe.program, call.sizes
    lane_shapes = _lane_shapes(exe, call)
    shapes = [o.shape(sizes, lane_shapes.get(k, ())) for k, o in enumerate(program.outputs)]
    outs = _outputs(program, shapes, out)
    values = _unaliased(call.values, outs)
    if all(sizes):
        extra = tuple(lane_shapes[k] for k in exe.array_outputs)
        plan = blocking(sizes, exe.order, lane_work(program.signature.leaves, values, sizes))
        failure = launch(exe, plan, (*values, *outs, *sizes, *extra),
                         _is_small(sizes, values))
        if failure is not None:
            _raise_lane_error(exe, call, *failure, lane_shapes)
    return pytree.unflatten(program.out_tree, outs)


#: One parallel launch at a time: Numba's default "workqueue" threading layer
#: aborts the process on concurrent launches from two Python threads, and a
#: launch already uses every core, so waiting costs nothing.
_PARALLEL = threading.Lock()


def _is_small(sizes, values) -> bool:
    """Run on the calling thread? Work ~ lanes + elements the lanes can read
    (a lane scanning a 5000-step row is not a small lane)."""
    work = int(np.prod(sizes)) + sum(v.size for v in values if isinstance(v, np.ndarray))
    return work < config.serial_below


def launch(exe: Executable, plan, args: tuple, serial: bool):
    """Run the kernel over ``plan``'s blocks; None, or (plan, block, lane) that failed."""
    if serial:
        flat = exe.call("kernel_serial", *args)
        if flat < 0:
            return None
        outer, lane = divmod(flat, plan.n_inner)
        return Blocking(plan.n_outer, plan.n_inner, 1, plan.n_inner), outer, lane
    err = np.full((numba.config.NUMBA_NUM_THREADS, 2), -1, np.int64)
    with _PARALLEL:
        exe.call("kernel", *args, plan.inner_blocks, plan.block, err)
    failed = err[err[:, 0] >= 0]
    if not failed.size:
        return None
    block, lane = failed[np.argmin(failed[:, 0])]
    return plan, int(block), int(lane)


def fast_launcher(exe: Executable, call: Call):
    """A generated host function that repeats ``call``'s work for arguments of the
    same types (None if the call is not eligible: pytrees, keywords, per-lane
    arrays).  It checks types and sizes inline and returns :data:`MISS` on any
    doubt, so the slow path can bind properly and raise the right error.
    """
    sig = exe.program.signature
    if exe.array_outputs or any(p.keyword is not None or p.tree.num_nodes != 1 for p in sig.params):
        return None
    source, names = render_cpu.render_launcher(exe.program, call.values)
    namespace = {"np": np, "MISS": MISS, "serial": exe.module.kernel_serial,
                 "SERIAL_BELOW": config.serial_below, "parallel": _parallel(exe),
                 "unflatten": pytree.unflatten, "TREE": exe.program.out_tree, **names}
    exec(compile(source, f"<lanewise launcher {exe.module.__name__}>", "exec"), namespace)
    return namespace["launch"]


def _parallel(exe: Executable):
    def run_parallel(args, sizes):
        leaves = exe.program.signature.leaves
        work = lane_work(leaves, args[:len(leaves)], sizes)
        return launch(exe, blocking(sizes, exe.order, work), args, False) is not None
    return run_parallel


MISS = object()


def _lane_shapes(exe: Executable, call: Call) -> dict[int, tuple]:
    if not exe.array_outputs:
        return {}
    result = exe.call("probe", *dummy_values(call))
    return {k: np.shape(_at(result, exe.program.outputs[k].path)) for k in exe.array_outputs}


def _at(value, path):
    for i in path:
        value = value[i]
    return value


def _outputs(program: Program, shapes, out) -> list[np.ndarray]:
    if out is None:
        return [np.empty(s, o.dtype) for s, o in zip(shapes, program.outputs, strict=True)]
    leaves, tree = pytree.flatten(out)
    if tree != program.out_tree:
        raise OutputError(f"out= has structure {tree} but the lanes produce {program.out_tree}")
    for leaf, shape, o in zip(leaves, shapes, program.outputs, strict=True):
        if not isinstance(leaf, np.ndarray) or leaf.shape != shape or leaf.dtype != o.dtype:
            got = f"{leaf.dtype}{list(leaf.shape)}" if isinstance(leaf, np.ndarray) else type(leaf).__name__
            raise OutputError(f"out= for {o.name} must be a {o.dtype}{list(shape)} array, got {got}")
        if not leaf.flags.writeable:
            raise OutputError(f"out= for {o.name} is read-only")
    return leaves


def _unaliased(values, outs) -> tuple:
    """Inputs that overlap an out= array are copied first, as NumPy does."""
    return tuple(v.copy() if isinstance(v, np.ndarray) and any(np.may_share_memory(v, o) for o in outs)
                 else v for v in values)


def _raise_lane_error(exe, call, plan, block, lane, lane_shapes):
    index = _lane_index(exe.order, call.sizes, plan, block, lane)
    result = replay_lane(call, index, raise_anyway=False)
    where = _where(index)
    for k in exe.array_outputs:
        got = np.shape(_at(result, exe.program.outputs[k].path))
        if got != lane_shapes[k]:
            raise LaneTypeError(
                f"lane ({where}) returned {exe.program.outputs[k].name} of shape {got}, but lane 0 "
                f"returned shape {lane_shapes[k]}; per-lane arrays must have one shape")
    raise LanewiseError(f"lane ({where}) failed inside the compiled kernel but not when replayed")


def replay_lane(call: Call, index: tuple[int, ...], raise_anyway: bool = True):
    """Run lane ``index`` alone (compiled) to re-raise its exception with a note.

    Kernels report only *which* lane failed; the exception itself comes from
    running that lane again, which is deterministic.
    """
    args, kwargs = lane_arguments(call.signature, call.values, index)
    try:
        result = jit_lane(call.lane)(*args, **kwargs)
    except Exception as e:
        e.add_note(f"raised by lane ({_where(index)}) of {getattr(call.lane, '__qualname__', call.lane)} "
                   "(level indices, outermost first)")
        raise
    if raise_anyway:
        raise LanewiseError(f"lane ({_where(index)}) failed inside the compiled kernel but not when replayed")
    return result


def _where(index) -> str:
    return ", ".join(f"i{lv}={i}" for lv, i in enumerate(index))


def _lane_index(order, sizes, plan, block, lane) -> tuple[int, ...]:
    index = [0] * len(sizes)
    rem = block // plan.inner_blocks
    for lv in reversed(order[:-1]):
        rem, index[lv] = divmod(rem, sizes[lv])
    index[order[-1]] = lane
    return tuple(index)
