"""The Dask backend: dask arrays in, lazy dask arrays out; every chunk runs the CPU kernel.

A call on dask arrays (or any call with ``backend="dask"``) is validated exactly
like a CPU call — against zero-memory stand-ins of the dask arrays' shapes — and
becomes one ``dask.array.blockwise`` layer:

* **Chunking follows the mapped axes only.**  Each vmap level gets one chunking
  (the chunks of the dask arrays it maps, unified with
  ``dask.array.core.common_blockdim`` when they disagree; ``"auto"`` — Dask's
  ``array.chunk-size`` counted in output bytes per lane — for a level that only
  NumPy arrays map; one chunk for a level mapped by ``axis_size`` alone).  Every
  array argument is rechunked so its mapped axes follow its level's chunks and
  its other axes are whole: a lane always sees its complete row/column.
* **Unmapped arrays are shipped once per graph**: one graph key holds the whole
  array (a NumPy array becomes a single-chunk ``from_array``), and every chunk
  task refers to that key — Dask moves it to each worker once.
* **The lane program is shipped once per graph too**: a small picklable
  ``_Runner`` (the lane function, the chunk signature, per-lane output shapes)
  is one graph key.  A worker builds the compiled kernel the first time it needs
  it and keeps it for the life of the process (keyed by the lane's fingerprint
  and the signature), loading it from lanewise's disk cache
  (``LANEWISE_CACHE_DIR``, shared by every process on a machine) when another
  process compiled it already.  Chunks are normalised to C-contiguous,
  read-only arrays, so every chunk of a call has one signature: one kernel per
  process, never one per task.  The first build in a process is reported as a
  ``"lanewise"`` event (``Client.get_events("lanewise")``) and on the
  ``lanewise.dask`` logger.
* Each chunk runs the CPU kernel **on the worker thread** (``kernel_blocks``):
  Dask's chunks are the parallelism, so a worker thread never fights the others
  for cores.

The client types the lane once per signature (as the CPU backend would) to know
the output dtypes and per-lane output shapes; that also fills the disk cache the
workers read.  Reductions (``lw.reduce``) live in :mod:`lanewise.backends.dask.reduce`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import time
import uuid
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import dask
import dask.array as da
import numba
import numpy as np
from dask.array.core import PerformanceWarning, common_blockdim, normalize_chunks

from ... import pytree
from ...plan.schedule import blocking
from ...errors import LanewiseError, OutputError
from ...plan.program import Call, Program, Signature
from ...plan.program import bind_call as _bind_call
from .. import host
from ..cpu import map as cpu

#: Per-process counters (read on workers with ``client.run``): kernels built in
#: this process, map chunks run, reduction partial tasks run.
stats = {"builds": 0, "chunks": 0, "partials": 0}

log = logging.getLogger("lanewise.dask")


# ----------------------------------------------------------------------------- binding


def bind_call(mapped, args: tuple, kwargs: dict) -> Call:
    """``bind_call`` with dask arrays kept lazy: validated through stand-ins of their shape.

    The returned call's values hold the dask arrays themselves; its signature
    is what a NumPy call of the same shapes and dtypes would have.
    """
    lazy: dict[int, da.Array] = {}
    keep = []  # stand-ins stay alive (ids unique) until the swap back

    def swap(value):
        if not isinstance(value, da.Array):
            return value
        if any(np.isnan(c) for dim in value.chunks for c in dim):
            raise LanewiseError("lanewise needs dask arrays with known chunk sizes; call "
                                "x.compute_chunk_sizes() first")
        stand_in = np.broadcast_to(np.zeros((), value.dtype), value.shape)
        keep.append(stand_in)
        lazy[id(stand_in)] = value
        return stand_in

    args = tuple(_tree_map(swap, a) for a in args)
    kwargs = {k: _tree_map(swap, v) for k, v in kwargs.items()}
    call = _bind_call(mapped, args, kwargs)
    return dataclasses.replace(call, values=tuple(lazy.get(id(v), v) for v in call.values))


def _tree_map(fn, tree):
    leaves, spec = pytree.flatten(tree)
    return pytree.unflatten(spec, [fn(leaf) for leaf in leaves])


def chunk_signature(sig: Signature) -> Signature:
    """The signature of a chunk's call: arrays C-contiguous and read-only (:func:`as_chunk`).

    Every chunk of a call has it — whatever layout or flags Dask hands over (an
    array received from another worker may arrive read-only, one made locally
    writable) — so a process builds exactly one kernel per call.
    """
    leaves = tuple(dataclasses.replace(leaf, layout="C", readonly=True) if leaf.is_array else leaf
                   for leaf in sig.leaves)
    return dataclasses.replace(sig, leaves=leaves)


def as_chunk(value):
    """A chunk value as kernels see it: C-contiguous (copied only if it is not), read-only (a view)."""
    if not isinstance(value, np.ndarray):
        return value
    if not value.flags.c_contiguous:
        value = np.ascontiguousarray(value)
    if value.flags.writeable:
        value = value.view()
        value.flags.writeable = False
    return value


def probe_values(call: Call) -> tuple:
    """Small concrete values of the chunk signature: mapped axes cut to (at most) one lane.

    Dask arrays become zeros (``np.zeros`` pages are not touched unless read):
    the client only types the lane and learns per-lane output shapes, which
    must therefore not depend on the values of dask arguments.
    """
    out = []
    for leaf, value in zip(call.signature.leaves, call.values, strict=True):
        if not leaf.is_array:
            out.append(value)
            continue
        mapped = {a for a in leaf.axes if a is not None}
        if isinstance(value, da.Array):
            shape = tuple(min(n, 1) if a in mapped else n for a, n in enumerate(value.shape))
            value = np.zeros(shape, value.dtype)
        else:
            value = value[tuple(slice(0, 1) if a in mapped else slice(None) for a in range(value.ndim))]
        out.append(as_chunk(value))
    return tuple(out)


def probe_call(call: Call) -> Call:
    """Lane 0 of ``call`` with concrete values: what the client types."""
    values = probe_values(call)
    sizes = tuple(min(n, 1) for n in call.sizes)
    return Call(call.lane, chunk_signature(call.signature), values, sizes)


# ----------------------------------------------------------------------------- runners


#: Kernels built in this process, by (runner token, chunk signature).
_BUILT: dict[tuple, Any] = {}
_BUILD_LOCK = threading.Lock()


class Runner:
    """What a chunk task needs besides its data; one graph key per graph.

    Pickles without compiled kernels; builds one per chunk signature and process
    (memory, then lanewise's disk cache, then compile).  ``token`` names the
    program (lane fingerprint, signature, op); None for a lane that cannot be
    fingerprinted, whose kernels then live with this runner object only.
    """

    kind = "map"

    def __init__(self, lane: Callable, signature: Signature, token: str | None):
        self.lane, self.signature, self.token = lane, signature, token
        self._exes: dict = {}

    def __getstate__(self):
        state = dict(vars(self))
        state["_exes"] = {}
        return state

    def __dask_tokenize__(self):
        return (type(self).__name__, self.token or uuid.uuid4().hex)

    def call(self, values, sizes) -> Call:
        """A chunk's call (``values`` already through :func:`as_chunk`)."""
        return Call(self.lane, self.signature, values, sizes)

    def executable(self, call: Call):
        """(kernel, fresh) for a chunk's ``call`` (used to type the lane if nothing is cached);
        fresh is True for the call that built the kernel in this process."""
        exe = self._exes.get(call.signature)
        if exe is not None:
            return exe, False
        with _BUILD_LOCK:
            exe = self._exes.get(call.signature)
            if exe is not None:
                return exe, False
            exe = _BUILT.get((self.token, call.signature)) if self.token else None
            fresh = exe is None
            if fresh:
                exe = self._build(call)
                stats["builds"] += 1
                self.remember(call.signature, exe)
            self._exes[call.signature] = exe
        return exe, fresh

    def prepare(self, call: Call, warm: Callable):
        """The kernel for ``call``; the first time in this process, build it, compile it
        for the chunk's argument types with ``warm(exe)``, and report the time as compile."""
        exe = self._exes.get(call.signature)
        if exe is not None:
            return exe
        start, before = time.perf_counter(), dict(cpu.stats)
        with _compile_meter():
            exe, fresh = self.executable(call)
            if fresh:
                warm(exe)
        if fresh:
            report_build(self, time.perf_counter() - start, before)
        return exe

    def remember(self, signature: Signature, exe) -> None:
        """Keep ``exe`` for this process (the client registers what it typed)."""
        self._exes[signature] = exe
        if self.token:
            _BUILT[(self.token, signature)] = exe

    def _build(self, call: Call):
        return cpu.build(call)


class _MapRunner(Runner):
    def __init__(self, lane, signature, token, lane_shapes, n_outputs):
        super().__init__(lane, signature, token)
        self.lane_shapes, self.n_outputs = lane_shapes, n_outputs

    def sizes_of(self, values) -> tuple[int, ...]:
        sizes = []
        for lv, level in enumerate(self.signature.levels):
            mapped = self.signature.mapped_at(lv)
            if mapped:
                k = mapped[0]
                sizes.append(values[k].shape[self.signature.leaves[k].axes[lv]])
            else:
                sizes.append(level.axis_size)
        return tuple(sizes)


def _compile_meter():
    """Time spent building kernels shows as "lanewise-compile" in the Dask dashboard's
    fine performance metrics (a no-op outside a distributed worker task)."""
    try:
        from distributed.metrics import context_meter
    except ImportError:
        return contextlib.nullcontext()
    return context_meter.meter("lanewise-compile")


def precompile(exe, name: str, args: tuple) -> None:
    """Compile (or load from Numba's disk cache) kernel ``name`` of ``exe`` for ``args``'
    types now, so that the first task's compile is measured and reported as such."""
    types = tuple(numba.typeof(a) for a in args)
    for _ in range(2):
        try:
            getattr(exe.module, name).compile(types)
            return
        except Exception:  # noqa: BLE001 - the real call reports errors (and recovers corrupt caches)
            # A module found on disk gets the lanes a compile needs (host.Deferred).
            if not host.complete(exe):
                return


def report_build(runner: Runner, seconds: float, before: dict) -> None:
    """Tell the logs (and the Dask worker's event log) that this process built a kernel."""
    name = getattr(runner.lane, "__qualname__", repr(runner.lane))
    event = {"action": "compile", "kind": runner.kind, "lane": name, "pid": os.getpid(),
             "seconds": round(seconds, 4), "typed": cpu.stats["typed"] - before["typed"],
             "from_disk": cpu.stats["disk"] - before["disk"]}
    log.info("lanewise %(kind)s kernel for %(lane)s ready in process %(pid)s after %(seconds).2f s "
             "of compile/load (lanes typed %(typed)d, modules from disk cache %(from_disk)d)", event)
    try:
        from distributed import get_worker
        worker = get_worker()
    except (ImportError, ValueError):
        return
    worker.log_event("lanewise", event)


# ----------------------------------------------------------------------------- build / run


@dataclass
class DaskExecutable:
    """What the client knows about a call's signature: the program and the runner to ship."""

    program: Program
    runner: _MapRunner
    lane_shapes: dict


def build(call: Call) -> DaskExecutable:
    """Type the lane on the client (filling the disk cache workers read) and make the runner."""
    probe = probe_call(call)
    exe = cpu.build(probe)
    lane_shapes = cpu.lane_output_shapes(exe, probe)
    token = host.token("dask-map", [call.lane], probe.signature, sorted(lane_shapes.items()))
    runner = _MapRunner(call.lane, probe.signature, token, lane_shapes, len(exe.program.outputs))
    runner.remember(probe.signature, exe)  # chunks run in this process (threads) reuse it
    return DaskExecutable(exe.program, runner, lane_shapes)


def run(exe: DaskExecutable, call: Call, out=None):
    """The lazy result: a pytree of dask arrays, one blockwise task per chunk of lanes."""
    if out is not None:
        raise OutputError("out= is not supported by the dask backend (results are lazy dask "
                          "arrays); use dask.array.store or to_zarr to write them somewhere")
    program = exe.program
    chunks = level_chunks(call, bytes_per_lane(program, exe.lane_shapes))
    leaves = chunked_leaves(call, chunks)
    runner = dask.delayed(exe.runner, pure=True)
    args: list = [runner, None]
    for k, (leaf, value) in enumerate(zip(call.signature.leaves, leaves, strict=True)):
        args += [value, leaf_index(leaf, k)] if leaf.is_array else [value, None]
    levels = tuple(_level(lv) for lv in range(len(call.sizes)))
    unmapped = {_level(lv): call.sizes[lv] for lv in range(len(call.sizes))
                if not call.signature.mapped_at(lv)}
    token = "lw-" + fun_name(call.lane)
    with warnings.catch_warnings():  # an outer product of chunked levels has many chunks: by design
        warnings.filterwarnings("ignore", "Increasing number of chunks", PerformanceWarning)
        results = _blockwise(exe, program, args, levels, unmapped, token)
    return pytree.unflatten(program.out_tree, results)


def _blockwise(exe, program, args, levels, unmapped, token) -> list:
    outs = program.outputs
    if len(outs) == 1 and all(d is not None for d in outs[0].level_dims):
        index, lane_axes = output_index(outs[0], exe.lane_shapes.get(0, ()))
        meta = np.empty((0,) * len(index), outs[0].dtype)
        results = [da.blockwise(_map_chunk, index, *args, new_axes={**unmapped, **lane_axes},
                                concatenate=True, token=token, meta=meta)]
    else:
        parts = da.blockwise(_map_chunk, levels, *args, new_axes=unmapped, concatenate=True,
                             token=token, meta=np.empty((0,) * len(levels), object))
        results = []
        for m, o in enumerate(outs):
            index, lane_axes = output_index(o, exe.lane_shapes.get(m, ()))
            results.append(da.blockwise(_pick, index, parts, levels, m, None, new_axes=lane_axes,
                                        concatenate=False, token=token + f"-out{m}",
                                        meta=np.empty((0,) * len(index), o.dtype)))
    return results


def _level(lv: int) -> str:
    return f"L{lv}"


def fun_name(fn) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def leaf_index(leaf, k: int) -> tuple[str, ...]:
    """Blockwise index of an array leaf: its level's letter on mapped axes, its own elsewhere."""
    level_of = {a: lv for lv, a in enumerate(leaf.axes) if a is not None}
    return tuple(_level(level_of[a]) if a in level_of else f"a{k}_{a}" for a in range(leaf.ndim))


def output_index(out, lane_shape) -> tuple[tuple[str, ...], dict]:
    """Blockwise index of an output leaf, and the per-lane axes it adds (whole)."""
    index = [""] * out.ndim
    for lv, d in enumerate(out.level_dims):
        if d is not None:
            index[d] = _level(lv)
    lane_axes = {}
    for j, d in enumerate(out.lane_dims):
        index[d] = f"{out.name}_{j}"
        lane_axes[index[d]] = lane_shape[j]
    return tuple(index), lane_axes


def bytes_per_lane(program: Program, lane_shapes: dict) -> int:
    total = 0
    for m, o in enumerate(program.outputs):
        total += o.dtype.itemsize * int(np.prod(lane_shapes.get(m, ()), dtype=np.int64))
    return max(total, 1)


def level_chunks(call: Call, lane_bytes: int) -> list[tuple[int, ...]]:
    """One chunking per level: its dask arguments' (unified), else auto, else whole."""
    sig, sizes = call.signature, call.sizes
    spec: list = []
    for lv in range(len(sizes)):
        found = {value.chunks[leaf.axes[lv]] for leaf, value in zip(sig.leaves, call.values, strict=True)
                 if leaf.axes[lv] is not None and isinstance(value, da.Array)}
        if found:
            spec.append(found.pop() if len(found) == 1 else common_blockdim(found))
        elif sig.mapped_at(lv):
            spec.append("auto")
        else:
            spec.append((sizes[lv],))
    if "auto" not in spec:
        return spec
    resolved = normalize_chunks(tuple(spec), shape=tuple(sizes), dtype=np.dtype((np.void, lane_bytes)))
    return list(resolved)


def chunked_leaves(call: Call, chunks) -> list:
    """Array leaves as dask arrays chunked by their levels (other axes whole); scalars as is."""
    out = []
    for leaf, value in zip(call.signature.leaves, call.values, strict=True):
        if not leaf.is_array:
            out.append(value)
            continue
        level_of = {a: lv for lv, a in enumerate(leaf.axes) if a is not None}
        target = tuple(chunks[level_of[a]] if a in level_of else (n,) for a, n in enumerate(value.shape))
        if isinstance(value, da.Array):
            out.append(value.rechunk(target))
        else:
            out.append(da.from_array(value, chunks=target))
    return out


# ----------------------------------------------------------------------------- tasks


def _map_chunk(runner: _MapRunner, *leaves):
    """One chunk: the compiled nest over the chunk's lanes, on this thread."""
    values = tuple(as_chunk(v) for v in leaves)
    call = runner.call(values, runner.sizes_of(values))
    exe = runner.prepare(call, lambda exe: precompile(exe, "kernel_blocks",
                                                      (*kernel_args(exe, call, runner.lane_shapes),
                                                       1, 1, 0, 1, cpu.NO_STOP)))
    outs = run_serial(exe, call, runner.lane_shapes)
    stats["chunks"] += 1
    if runner.n_outputs == 1 and all(d is not None for d in exe.program.outputs[0].level_dims):
        return outs[0]
    return tuple(outs)


def _pick(part, m: int):
    while isinstance(part, list):  # an out_axes=None level: every chunk holds the same value
        part = part[0]
    return part[m]


def kernel_args(exe: cpu.Executable, call: Call, lane_shapes: dict) -> tuple:
    """Arguments of the same types as a chunk's kernel call (empty outputs): for typing."""
    outs = [np.empty((0,) * o.ndim, o.dtype) for o in exe.program.outputs]
    extra = tuple(lane_shapes[k] for k in exe.array_outputs)
    return (*call.values, *outs, *call.sizes, *extra)


def run_serial(exe: cpu.Executable, call: Call, lane_shapes: dict) -> list[np.ndarray]:
    """:func:`lanewise.backends.cpu.run` on the calling thread, per-lane shapes given."""
    program, sizes = exe.program, call.sizes
    shapes = [o.shape(sizes, lane_shapes.get(k, ())) for k, o in enumerate(program.outputs)]
    outs = [np.empty(s, o.dtype) for s, o in zip(shapes, program.outputs, strict=True)]
    if all(sizes):
        extra = tuple(lane_shapes[k] for k in exe.array_outputs)
        failure = cpu.launch(exe, blocking(sizes, exe.order, 1, exe.group), (*call.values, *outs, *sizes, *extra), True)
        if failure is not None:
            cpu.raise_lane_error(exe, call, *failure, lane_shapes)
    return outs
