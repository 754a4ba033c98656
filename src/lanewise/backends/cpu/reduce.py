"""The CPU backend of ``lw.reduce``: one parallel nest that folds lanes into partials.

Partials (one per block and output) are combined on the host in a fixed order —
NumPy's pairwise ``add.reduce`` along the contiguous chunk axis for sums — so
the result is the same for any number of threads.

Example:
    >>> import numpy as np, lanewise as lw
    >>> r = lw.reduce(lw.vmap(lambda x: x > 0.5), "any")
    >>> bool(r(np.array([0.1, 0.7])))
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numba
import numpy as np
from numba.core.errors import NumbaError

from ... import pytree, spmd
from ...codegen import cpu_reduce as render_reduce
from ...codegen.common import injected_names
from ...config import config
from ...errors import LanewiseError
from ...plan import reduction
from ...plan.program import Call, Program, dummy_values
from ...plan.reduction import Monoid, ReduceSpec
from ...plan.schedule import ReduceBlocking, lane_index, loop_order, reduce_blocking, segment_slots
from ...lane.lanefn import jit_lane
from ...lane.numba_errors import compile_error
from ...lane.typing_only import call_dtype
from ...runtime.counter import CACHE_LINE
from .. import host
from . import map as cpu


@dataclass
class ReduceExecutable:
    program: Program
    spec: ReduceSpec
    module: ModuleType
    source: str
    path: Any
    monoid: Monoid | None
    inject: dict
    segments: int | None = None  # a segmented reduction's count of segments
    reloaded: bool = False
    lane_path: str = "scalar (one lane per iteration)"  # lanewise.spmd: which path fills the tiles, and why
    group: int = 1  # lanes run together (the SPMD width): a failure names the first of its group

    def call(self, name: str, *args):
        """Call a kernel of the module (cache faults survived: :func:`host.call_kernel`)."""
        try:
            return host.call_kernel(self, name, *args)
        except NumbaError as e:
            raise compile_error(e, self.program.lane, "cpu") from e

    @property
    def finish(self):
        """A Monoid's compiled in-order fold of each row of partials (None otherwise)."""
        return self.module.rfinish if self.monoid is not None else None


def build_reduce(op, axis, call: Call) -> ReduceExecutable:
    """Type the lane, plan the reduction, render and load (or find on disk) its kernel.

    The disk key depends on what the caller gives (lane, op, axis, argument types),
    not on the lane's result type: typing the lane is a Numba compile (3.7 s in
    every new process when it came first), and the cache stores its result.
    """
    monoid = op if isinstance(op, Monoid) else None
    key = host.disk_key("reduce", [call.lane] + ([monoid.combine] if monoid else []),
                        repr(monoid.identity) if monoid else repr(op), repr(axis), call.signature,
                        config.vector_math, spmd.cache_key())
    state: dict = {}
    checked: dict = {}

    def render():
        with cpu.scalar_lane_math(call.lane):
            typed = cpu.typed_lane(call)
        result = typed.result
        program, answers = host.program_and_answers(call, result)  # answers: kept with the kernel
        spec = reduction.reduce_spec(op, axis, program, call_dtype)
        choice = _lane_path(program, spec, call, result, host.module_name("reduce kernel", key))
        if choice.checked is not None:
            checked["lane_spmd"] = choice.checked
        meta = (result, typed.allocating, choice.describe(), choice.plan.width if choice.plan is not None else 1,
                answers)
        # Tracked per lane unless that could cost vectorisation: only the tiled fold of
        # an inlined lane (which cannot raise) vectorises; the fold itself raises for a
        # segment out of range or a changed array shape.
        track = not spec.tiled or spec.segmented or spec.arrays or not cpu.inlines(call.lane, meta[1])
        return render_reduce.render(program, spec, track, spmd=choice.plan), meta

    def inject(meta):
        result, allocating, _, _, answers = meta
        program = host.program(call, result, answers)
        spec = reduction.reduce_spec(op, axis, program, call_dtype)
        state.update(program=program, spec=spec)
        # A running fold (argmin/argmax, Monoid) keeps the lane loop scalar, where libm
        # is faster than lanewise's vector math (W5: 0.30 s vs 0.42 s); tiled folds
        # evaluate lanes in a vectorisable loop, where vector math pays.
        def lane():
            with cpu.scalar_lane_math(call.lane, allocating), config.overridden(
                    vector_math=config.vector_math and spec.tiled):
                return cpu.kernel_lane(call.lane, allocating)

        names = {"lane": host.Deferred(lane), **injected_names(call.signature)}
        if monoid:
            names["combine"] = jit_lane(monoid.combine)  # rfinish is called directly: made now
        for m, (out, identity) in enumerate(zip(program.outputs, reduction.identities(spec, monoid), strict=True)):
            names[f"ID{m}"] = identity
            names[f"BT{m}"] = numba.from_dtype(out.dtype)  # tile buffers: lane values, padded with the identity
            if spec.tiled:
                names[f"IDB{m}"] = np.asarray(identity).astype(out.dtype)[()]
        state["inject"] = names
        return names

    built = host.build_module("reduce kernel", key, render, inject)
    if "lane_spmd" in checked:  # linked rather than compiled again (cpu.build)
        built.module.lane_spmd = checked["lane_spmd"]
    return ReduceExecutable(state["program"], state["spec"], built.module, built.source, built.path, monoid,
                            state["inject"], axis.count if isinstance(axis, reduction.Segments) else None,
                            lane_path=built.meta[2], group=built.meta[3])


def _lane_path(program: Program, spec: ReduceSpec, call: Call, result, module: str | None) -> spmd.Choice:
    """How the tiles are filled: W lanes at a time on the SPMD path when the fold
    is tiled over the innermost loop (lanes go to a buffer, as ``lw.vmap``'s do),
    else one lane at a time (a running fold: argmin/argmax, Monoid; segments)."""
    if not spec.tiled or not spec.reduced or spec.reduced[-1] != loop_order(program)[-1]:
        return spmd.Choice(None, "the fold is not tiled over the innermost loop (argmin/argmax, a Monoid, "
                                 "a segmented reduction, or a kept level innermost): one lane at a time")
    return spmd.choose(program, call, result, False, module, stream=False)


# ----------------------------------------------------------------------------- run


def plan_of(exe: ReduceExecutable, call: Call) -> ReduceBlocking:
    """How the reduction of ``call`` is cut into blocks (sizes only: any thread count agrees)."""
    spec, sizes = exe.spec, call.sizes
    n_kept = int(np.prod([sizes[lv] for lv in spec.kept]))
    n_red = int(np.prod([sizes[lv] for lv in spec.reduced]))
    return reduce_blocking(n_kept, n_red, host.program_work(exe.program, call.values, sizes))


def run_reduce(exe: ReduceExecutable, call: Call):
    """Fold every lane of ``call`` into partials, then combine them: the results pytree."""
    if exe.spec.segmented:
        return run_segments(exe, call, exe.segments)
    spec, sizes = exe.spec, call.sizes
    plan = plan_of(exe, call)
    lane_shapes = lane_array_shapes(exe, call)
    partials = new_partials(spec, plan.n_blocks, lane_shapes, exe.inject)
    strides = reduction.index_strides(spec, exe.program.outputs[0], sizes) if spec.indexed else []
    if plan.n_blocks:
        shapes = [s for s in lane_shapes if s is not None]
        failed = _launch(exe, call, plan.n_blocks, (*partials, *sizes, *strides, *shapes),
                         (plan.n_chunks, plan.chunk, plan.n_reduced), plan.n_blocks)
        if failed is not None:
            # lane: the one that failed, or the first of its SPMD group (or of its block,
            # for an untracked lane): the lanes from there to its chunk's end are candidates
            block, lane = failed
            end = min((block % plan.n_chunks + 1) * plan.chunk, plan.n_reduced)
            kept = (spec.kept, block // plan.n_chunks)
            raise_failed_lane(exe, call, [lane_index(sizes, kept, (spec.reduced, r))
                                          for r in range(lane, max(end, lane + 1))], lane_shapes)
    results = finish(exe.program, spec, plan, partials, sizes, exe.monoid, exe.finish, lane_shapes)
    return pytree.unflatten(exe.program.out_tree, results)


def _launch(exe: ReduceExecutable, call: Call, n_err: int, state: tuple, blocking: tuple, n_units: int):
    """Run ``rkernel_blocks`` over its ``n_units`` units (blocks, or a segmented
    reduction's slots) on ``call``'s values, ``state`` (partials, sizes...) and
    ``blocking``: on this thread for a small problem, else from every core
    (:mod:`lanewise.runtime.pool`; each unit writes only its own partials, so the
    result does not depend on which thread ran it).  None, or (block, lane) of
    the first lane that failed (``n_err``: blocks that report into ``err``)."""
    err = np.full(n_err, -1, np.int64)
    args = (*call.values, *state, *blocking, err)
    if cpu.is_small(call.sizes, call.values) and not _heavy(exe, call, state, blocking[-1]):
        cpu.run_blocks(exe, args, 0, n_units, "rkernel_blocks", run_units)
    else:
        cpu.run_parallel(exe, "rkernel_blocks", args, n_units, resume_units, _work(exe, call))  # failures in err
    failed = np.flatnonzero(err >= 0)
    return (int(failed[0]), int(err[failed[0]])) if failed.size else None


def _work(exe: ReduceExecutable, call: Call) -> int | None:
    """The run's estimated cost (:func:`cpu.run_parallel`'s ``work``), or None for
    lanes whose cost the shapes may miss."""
    if host.may_be_heavy(exe.program):
        return None
    return int(np.prod(call.sizes)) * host.program_work(exe.program, call.values, call.sizes)


def _heavy(exe: ReduceExecutable, call: Call, state: tuple, n_reduced: int) -> bool:
    """Whether a reduction that looks small would still take long on one thread
    (lanes that loop over arrays passed whole: an all-pairs energy of 3,000 atoms
    ran on one core): its first lanes timed as one block of their own
    (:func:`cpu.timed_lanes`), folding into scratch copies of the partials.  Blocks
    stay as the shapes make them, so the result is the same either way.  Segmented
    reductions are not timed (their accumulators can be large to copy)."""
    if exe.spec.segmented or not host.may_be_heavy(exe.program) or not n_reduced:
        return False
    k = min(n_reduced, cpu.PROBE_LANES)
    scratch = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in state)
    n_lanes = int(np.prod(call.sizes))
    args = (*call.values, *scratch, 1, k, k, np.full(1, -1, np.int64))
    return cpu.timed_lanes(exe, "rkernel_blocks", args, k, n_lanes) is not None


def run_units(kernel, args: tuple, first: int, last: int, stop) -> int:
    """``rkernel_blocks`` over units [first, last): a lane's exception is recorded in
    ``err`` (the last of ``args``) and the next unit goes on, as ``rkernel`` does, so
    the smallest failed block is found whichever thread ran it.  -1, or -2 (stopped)."""
    err = args[-1]
    while True:
        code, at = cpu.attempt(kernel, args, first, last, stop)
        if at is None:
            return code
        err[at[1]] = at[0]
        first = int(at[2]) + 1


def resume_units(kernel, args: tuple, at, stop, last: int) -> int:
    """After a lane's exception in a shared run of units below ``last`` (``at``:
    where): record it, run the rest of its chunk on this thread (a segmented
    reduction's later slots hold earlier chunks), then take chunks again.  -1, or
    -2 (stopped)."""
    err = args[-1]
    while True:
        err[at[1]] = at[0]
        if run_units(kernel, args, int(at[2]) + 1, int(at[3]), stop[:1]) == -2:
            return -2
        code, at = cpu.attempt(kernel, args, 0, last, stop)
        if at is None:
            return code


def lane_array_shapes(exe: ReduceExecutable, call: Call) -> list:
    """Per output, the shape of lane 0's array (None for scalar lane values).

    Per-lane arrays are reduced element by element, so their shape is the
    result's: it comes from running lane 0 (with zero lanes, lane 0 of zeros,
    as the map's probe does)."""
    spec = exe.spec
    if not spec.arrays:
        return [None] * len(spec.lane_ndims)
    probe = Call(call.lane, call.signature, dummy_values(call), tuple(max(n, 1) for n in call.sizes))
    result = host.replay_lane(probe, (0,) * len(call.sizes), raise_anyway=False)
    return [tuple(np.shape(host.at_path(result, o.path))) if nd else None
            for o, nd in zip(exe.program.outputs, spec.lane_ndims, strict=True)]


def new_partials(spec: ReduceSpec, n_blocks: int, lane_shapes, inject: dict) -> list[np.ndarray]:
    """The kernel's partials per output (and argmin/argmax indices): one value per
    block, or for per-lane arrays a row of the array's elements per block,
    filled with the identity (the kernel folds into the rows)."""
    partials = []
    for m, (dtype, shape) in enumerate(zip(spec.acc_dtypes, lane_shapes, strict=True)):
        if not spec.arrays:
            partials.append(np.empty(n_blocks, dtype))
            if spec.indexed:
                partials.append(np.empty(n_blocks, np.int64))
            continue
        width = int(np.prod(shape)) if shape is not None else 1
        partials.append(np.full((n_blocks, width), inject[f"ID{m}"], dtype))
        if spec.indexed:
            partials.append(np.full((n_blocks, width), -1, np.int64))
    return partials


def run_segments(exe: ReduceExecutable, call: Call, count: int):
    """A segmented reduction: lanes fold into slot accumulators of ``count`` segments
    each (codegen.cpu_reduce._slot_kernel), combined pairwise over the slots."""
    spec, sizes = exe.spec, call.sizes
    plan = plan_of(exe, call)
    lane_shapes = lane_array_shapes(exe, call)
    width = int(np.prod(lane_shapes[1])) if lane_shapes[1] is not None else 1
    slots = segment_slots(plan.n_chunks, count * width, spec.acc_dtypes[1].itemsize)
    dtype = spec.acc_dtypes[1]
    # Rows a cache line apart at least (and padded by one): each slot's thread writes
    # its row per lane, and 10 segments' rows shared lines between threads.
    padded = -(-(count * width * dtype.itemsize + CACHE_LINE) // CACHE_LINE) * CACHE_LINE // dtype.itemsize
    acc = np.full((slots, padded), exe.inject["ID1"], dtype)
    if plan.n_chunks and count:
        shapes = [s for s in lane_shapes if s is not None]
        failed = _launch(exe, call, plan.n_chunks, (acc, *sizes, *shapes, count, slots),
                         (plan.n_chunks, plan.chunk, plan.n_reduced), slots)
        if failed is not None:
            index = lane_index(sizes, (spec.kept, 0), (spec.reduced, failed[1]))
            raise_failed_lane(exe, call, [index], lane_shapes, count)
    elif plan.n_chunks:  # no segments: a lane naming any segment is out of range
        raise_failed_lane(exe, call, [(0,) * len(sizes)], lane_shapes, count)
    acc = acc[:, :count * width]  # a view: a copy of 64 padded rows cost 0.24 ms of 4
    flat = reduction.combine_partials(spec, 1, acc[None], None, plan.n_reduced, exe.monoid, exe.finish)[0]
    return flat.reshape((count,) + (lane_shapes[1] or ()))



def raise_failed_lane(exe: ReduceExecutable, call: Call, indices: list, lane_shapes, count=None) -> None:
    """The error of the first of the lanes ``indices`` (replayed in order) that fails:
    its own exception, its array's changed shape, or (segmented) its segment out of range."""
    for index in indices:
        result = host.replay_lane(call, index, raise_anyway=False)
        if exe.spec.segmented and not 0 <= int(result[0]) < count:
            raise reduction.segment_out_of_range(int(result[0]), count, f"({host.where(index)})", call.lane)
        for o, want in zip(exe.program.outputs, lane_shapes, strict=True):
            got = np.shape(host.at_path(result, o.path))
            if want is not None and got != want:
                raise host.shape_changed(index, o.name, got, want)
    raise LanewiseError(f"lane ({host.where(indices[0])}) failed inside the compiled kernel but not when replayed")


def finish(program: Program, spec: ReduceSpec, plan: ReduceBlocking, partials: list, sizes,
           monoid: Monoid | None = None, fold=None, lane_shapes=None) -> list:
    """Each output's result, in its own axis order, from the flat partials of ``plan``'s blocks."""
    width = 2 if spec.indexed else 1
    lane_shapes = lane_shapes or [None] * len(program.outputs)
    results = []
    for m, (out, shape) in enumerate(zip(program.outputs, lane_shapes, strict=True)):
        grid = (plan.n_kept, plan.n_chunks) + partials[m * width].shape[1:]
        p = partials[m * width].reshape(grid)
        q = partials[m * width + 1].reshape(grid) if spec.indexed else None
        flat = reduction.combine_partials(spec, m, p, q, plan.n_reduced, monoid, fold)
        results.append(reduction.place(spec, out, flat, sizes, shape or ()))
    return results
