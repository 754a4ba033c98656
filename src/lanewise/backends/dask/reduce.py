"""``lw.reduce`` on dask arrays: the CPU backend's blocks, computed by chunk tasks, bit for bit.

The CPU backend (:mod:`lanewise.backends.cpu_reduce`) cuts the reduced lanes —
flat index ``r`` over the reduced levels, C order — into blocks of ``chunk``
lanes (``plan.schedule.reduce_blocking``: a function of the *global* sizes
only).  Each block ``(k, c)`` folds lanes ``[c * chunk, (c + 1) * chunk)`` of
kept index ``k`` sequentially into one partial; the partials of a row ``k`` are
then combined in a fixed order (NumPy's pairwise ``add.reduce`` for sums).

Here the same blocks are the unit of work, aligned to global lane indices and
never to dask's chunk boundaries:

1. **Partials.**  A task owns a run of whole blocks ``[c0, c1)`` of one *kept
   box* (a chunk of the kept levels).  It gathers the input blocks that cover
   the bounding box of its lanes (slicing them, so a block that straddles two
   dask chunks is still folded by one task, in lane order), and runs the very
   ``rblock`` function the CPU kernel runs for every block it owns.  A partial
   therefore depends only on ``(k, c)`` — not on the chunking, the number of
   tasks or which worker ran it.
2. **Tree.**  Partials are concatenated (in block order) up a tree of width
   ``split_every`` (Dask's ``split_every`` setting, default 32); concatenation
   is exact, so the tree's shape is irrelevant.
3. **Combine.**  The root of each kept box applies the CPU backend's own
   combine (:func:`lanewise.backends.cpu.reduce.finish`) to the full row of partials.

So the result equals the CPU backend's bit for bit, for any chunking and any
cluster.  Input chunks only decide how many tasks there are: as many runs of
blocks as the reduced levels have chunks (tasks never split a block).

Example:
    >>> import numpy as np, dask.array as da, lanewise as lw
    >>> r = lw.reduce(lw.vmap(lambda x: x * x), "sum")
    >>> float(r(da.arange(4.0, chunks=3)).compute())
    14.0
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np
from dask._task_spec import DataNode, List, Task, TaskRef
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

from ... import pytree
from ...codegen.cpu_reduce import render_finish
from ...errors import LanewiseError
from ...plan import reduction
from ...plan.program import Call
from ...plan.reduction import Monoid
from ...plan.schedule import ReduceBlocking, lane_index, ravel, reduce_blocking, unravel
from ...lane.lanefn import jit_lane
from ...runtime import cache
from .. import host as lwhost
from ..cpu import reduce as cpu_reduce
from . import map as ldask


def build_reduce(op, axis, call: Call) -> "_Host":
    """Type the lane on the client (the CPU's reduce kernel for lane 0) and make the runner."""
    probe = ldask.probe_call(call)
    exe = cpu_reduce.build_reduce(op, axis, probe)
    reduction.require_scalar_lanes(exe.spec, "dask")
    monoid = op if isinstance(op, Monoid) else None
    key = lwhost.token("dask-reduce", [call.lane] + ([monoid.combine] if monoid else []),
                       repr(monoid.identity) if monoid else "", probe.signature, exe.spec)
    runner = _ReduceRunner(call.lane, probe.signature, key, op, axis, exe)
    runner.remember(probe.signature, exe)  # partial tasks run in this process (threads) reuse it
    return _Host(exe, runner)


def run_reduce(host: "_Host", call: Call):
    """``reduced(*args, **kwargs)`` as lazy dask arrays (0-d for a full reduction)."""
    if not all(call.sizes):
        return _empty(host.runner, call)
    return _graph(host, call)


@dataclass
class _Host:
    exe: cpu_reduce.ReduceExecutable  # typed on the client: spec, dtypes, program
    runner: "_ReduceRunner"


def _empty(runner: "_ReduceRunner", call: Call):
    """A reduction with no lanes: the CPU backend's answer (or error), now, as dask arrays."""
    values = tuple(np.broadcast_to(np.zeros((), v.dtype), v.shape) if isinstance(v, da.Array) else v
                   for v in call.values)
    local = Call(call.lane, call.signature, values, call.sizes)
    result = cpu_reduce.run_reduce(cpu_reduce.build_reduce(runner.op, runner.axis, local), local)
    return pytree.unflatten(pytree.flatten(result)[1],
                            [da.from_array(np.asarray(v)) for v in pytree.flatten(result)[0]])


# ----------------------------------------------------------------------------- runner


class _ReduceRunner(ldask.Runner):
    """Ships once per graph: the lane, chunk signature, op and the client's typing results."""

    kind = "reduce"

    def __init__(self, lane, signature, token, op, axis, exe):
        super().__init__(lane, signature, token)
        self.op, self.axis = op, axis
        self.spec, self.program = exe.spec, exe.program
        self._finish = None

    def __getstate__(self):
        state = super().__getstate__()
        state["_finish"] = None
        return state

    def _build(self, call: Call):
        return cpu_reduce.build_reduce(self.op, self.axis, call)

    @property
    def monoid(self) -> Monoid | None:
        return self.op if isinstance(self.op, Monoid) else None

    def finish(self):
        """A Monoid's in-order fold of partials (None for built-in ops), without compiling the lane here."""
        if self.monoid is not None and self._finish is None:
            self._finish = _monoid_finish(self.monoid.combine)
        return self._finish


_FINISH: dict = {}
_FINISH_LOCK = threading.Lock()


def _monoid_finish(combine):
    """The CPU backend's generated ``rfinish`` (codegen.cpu_reduce), compiled for ``combine``."""
    with _FINISH_LOCK:
        key = lwhost.token("finish", [combine]) or id(combine)
        if key not in _FINISH:
            module = cache.load_module("lw_finish", None, "import numba\nfrom numba import int64, uint64\n\n"
                                       + render_finish(), {"combine": jit_lane(combine)})
            _FINISH[key] = module.rfinish
        return _FINISH[key]


# ----------------------------------------------------------------------------- graph


@dataclass(frozen=True)
class _Part:
    """One partial task: blocks [c0, c1) of a kept box, and where its lanes' data lies."""

    box: tuple  # per level (start, stop): kept levels their chunk, reduced the bounding box
    cuts: tuple  # per leaf: None (scalar) or per axis (offset, length) into the gathered blocks
    c0: int
    c1: int
    r_off: int  # global flat reduced index of the box's first lane
    chunk: int
    n_red: int
    strides: tuple  # argmin/argmax: global strides of the reduced levels
    index_off: int  # argmin/argmax: flat index of the box's first lane
    whole: bool  # the task owns every block (its box starts at reduced lane 0)


def _graph(host: _Host, call: Call):
    """The lazy result: partial tasks, a concatenation tree and one combine per kept box."""
    exe, runner = host.exe, host.runner
    spec, sizes = exe.spec, call.sizes
    chunks = ldask.level_chunks(call, 8)
    leaves = ldask.chunked_leaves(call, chunks)
    n_kept = int(np.prod([sizes[lv] for lv in spec.kept], dtype=np.int64))
    n_red = int(np.prod([sizes[lv] for lv in spec.reduced], dtype=np.int64))
    work = lwhost.program_work(exe.program, call.values, sizes)
    plan = reduce_blocking(n_kept, n_red, work)  # exactly as cpu_reduce.run: the same blocks
    wanted = int(np.prod([len(chunks[lv]) for lv in spec.reduced], dtype=np.int64))
    per_task = -(-plan.n_chunks // max(1, min(wanted, plan.n_chunks)))

    token = dask.base.tokenize(runner, [getattr(v, "name", v) for v in leaves], chunks)
    base = f"lw-reduce-{ldask.fun_name(call.lane)}-{token}"
    runner_key = f"lw-runner-{token}"
    dsk = {runner_key: DataNode(runner_key, runner)}
    kept_boxes = list(itertools.product(*[range(len(chunks[lv])) for lv in spec.kept]))
    for kappa in kept_boxes:
        refs = _partial_tasks(dsk, base, runner_key, exe, call, leaves, chunks, kappa, plan, per_task)
        refs = _tree(dsk, base, kappa, refs)
        key = (base, "final", *kappa)
        kept_sizes = tuple(chunks[lv][i] for lv, i in zip(spec.kept, kappa))
        dsk[key] = Task(key, _finish, TaskRef(runner_key), List(*refs), kept_sizes, plan.chunk, n_red)

    arrays = [v for v in leaves if isinstance(v, da.Array)]
    graph = HighLevelGraph.from_collections(base, dsk, dependencies=arrays)
    layers, deps = dict(graph.layers), dict(graph.dependencies)
    results = []
    for m, out in enumerate(exe.program.outputs):  # one array per output, in its own axis order
        order = sorted(range(len(spec.kept)), key=lambda i: out.level_dims[spec.kept[i]])
        name = f"{base}-out{m}"
        layer = {}
        for kappa in kept_boxes:
            key = (name, *[kappa[i] for i in order])
            layer[key] = Task(key, _pick, TaskRef((base, "final", *kappa)), m)
        layers[name], deps[name] = MaterializedLayer(layer), {base}
        results.append((name, tuple(chunks[spec.kept[i]] for i in order), exe.spec.result_dtypes[m]))
    hlg = HighLevelGraph(layers, deps)
    return pytree.unflatten(exe.program.out_tree, [
        da.Array(hlg, name, out_chunks, meta=np.empty((0,) * len(out_chunks), dtype))
        for name, out_chunks, dtype in results])


def _partial_tasks(dsk, base, runner_key, exe, call, leaves, chunks, kappa, plan, per_task):
    """Partial tasks of kept box ``kappa``: runs of ``per_task`` whole blocks each."""
    spec, sizes = exe.spec, call.sizes
    red_sizes = [sizes[lv] for lv in spec.reduced]
    strides = tuple(reduction.index_strides(spec, exe.program.outputs[0], sizes)) if spec.indexed else ()
    bounds = [np.concatenate([[0], np.cumsum(c)]).astype(np.int64) for c in chunks]
    n_tasks = -(-plan.n_chunks // per_task)
    refs = []
    for t in range(n_tasks):
        c0, c1 = t * per_task, min((t + 1) * per_task, plan.n_chunks)
        box = _box(spec, sizes, bounds, kappa, c0 * plan.chunk, min(c1 * plan.chunk, plan.n_reduced))
        r_off = ravel([box[lv][0] for lv in spec.reduced], red_sizes)
        index_off = sum(box[lv][0] * s for lv, s in zip(spec.reduced, strides))
        cuts, blocks = _gather(call, leaves, bounds, box)
        part = _Part(tuple(box), cuts, c0, c1, r_off, plan.chunk, plan.n_reduced, strides, index_off,
                     n_tasks == 1)
        key = (base, "part", *kappa, t)
        dsk[key] = Task(key, _partials, TaskRef(runner_key), part, *blocks)
        refs.append(TaskRef(key))
    return refs


def _tree(dsk, base, kappa, refs):
    """Concatenate partials in groups of Dask's ``split_every`` until few remain (exact)."""
    split = max(2, int(dask.config.get("split_every", None) or 32))
    level = 0
    while len(refs) > split:
        level += 1
        groups = [refs[i:i + split] for i in range(0, len(refs), split)]
        refs = []
        for g, group in enumerate(groups):
            key = (base, f"tree{level}", *kappa, g)
            dsk[key] = Task(key, _concat, List(*group))
            refs.append(TaskRef(key))
    return refs


def _box(spec, sizes, bounds, kappa, lo: int, hi: int) -> list:
    """Per level (start, stop): the kept box's chunk, and the reduced bounding box of [lo, hi)."""
    box = [None] * len(sizes)
    for lv, i in zip(spec.kept, kappa):
        box[lv] = (int(bounds[lv][i]), int(bounds[lv][i + 1]))
    shape = [sizes[lv] for lv in spec.reduced]
    first, last = unravel(lo, shape), unravel(hi - 1, shape)
    varying = next((j for j in range(len(shape)) if first[j] != last[j]), len(shape) - 1)
    for j, lv in enumerate(spec.reduced):
        if j < varying:
            box[lv] = (first[j], first[j] + 1)
        elif j == varying:
            box[lv] = (first[j], last[j] + 1)
        else:  # inner levels whole: the box is one contiguous run of global r
            box[lv] = (0, shape[j])
    return box


def _gather(call: Call, leaves, bounds, box):
    """Per leaf: the input blocks covering ``box`` (nested lists of keys) and where to cut them."""
    cuts, blocks = [], []
    for leaf, value in zip(call.signature.leaves, leaves, strict=True):
        if not leaf.is_array:
            cuts.append(None)
            blocks.append(value)
            continue
        level_of = {a: lv for lv, a in enumerate(leaf.axes) if a is not None}
        ranges, cut = [], []
        for a in range(leaf.ndim):
            if a not in level_of:
                ranges.append(range(1))
                cut.append(None)
                continue
            b, (start, stop) = bounds[level_of[a]], box[level_of[a]]
            i0 = int(np.searchsorted(b, start, "right")) - 1
            i1 = int(np.searchsorted(b, stop - 1, "right")) - 1
            ranges.append(range(i0, i1 + 1))
            cut.append((start - int(b[i0]), stop - start))
        cuts.append(tuple(cut))
        blocks.append(_nested(value.name, ranges, ()))
    return tuple(cuts), blocks


def _nested(name, ranges, prefix):
    if not ranges:
        return TaskRef((name, *prefix))
    return List(*[_nested(name, ranges[1:], prefix + (i,)) for i in ranges[0]])


# ----------------------------------------------------------------------------- tasks


def _assemble(nested, cut):
    """Concatenate nested blocks along their axes, then cut the box out of them."""
    def join(item, axis):
        if not isinstance(item, list):
            return item
        parts = [join(x, axis + 1) for x in item]
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=axis)

    array = join(nested, 0)
    index = tuple(slice(None) if c is None else slice(c[0], c[0] + c[1]) for c in cut)
    return array[index]


def _partials(runner: _ReduceRunner, part: _Part, *blocks):
    """The partials of blocks [c0, c1) for every kept index of the box, as the CPU computes them."""
    values = tuple(v if cut is None else ldask.as_chunk(_assemble(v, cut))
                   for v, cut in zip(blocks, part.cuts, strict=True))
    sizes = tuple(stop - start for start, stop in part.box)
    call = runner.call(values, sizes)
    exe = runner.prepare(call, lambda exe: ldask.precompile(
        exe, "rblock_caught", (*values, *_partial_arrays(exe.spec, 0), *sizes, *part.strides, 0, 0, 0, 0)))
    spec = exe.spec
    n_kept = int(np.prod([sizes[lv] for lv in spec.kept], dtype=np.int64))
    width = part.c1 - part.c0
    partials = _partial_arrays(spec, n_kept * width)
    if part.whole and part.chunk < 256 and n_kept * width >= 1024:
        # Many tiny blocks starting at the box's first lane: the CPU backend's serial kernel
        # as is (one more compile per process, but no Python call per block).
        err = np.full(n_kept * width, -1, np.int64)
        exe.call("rkernel_serial", *values, *partials, *sizes, *part.strides, width, part.chunk,
                 part.n_red, err)
        failed = np.flatnonzero(err >= 0)
        if failed.size:
            b = int(failed[0])
            _lane_error(exe, call, part, b // width, part.c0 * part.chunk + int(err[b]))
    else:
        rblock = exe.module.rblock_caught  # -1 or the failed lane: no exception per block
        for k in range(n_kept):
            for j in range(width):
                c = part.c0 + j
                lo = c * part.chunk - part.r_off
                hi = min((c + 1) * part.chunk, part.n_red) - part.r_off
                e = rblock(*values, *partials, *sizes, *part.strides, k, k * width + j, lo, hi)
                if e >= 0:
                    _lane_error(exe, call, part, k, e)
    if spec.indexed and part.index_off:
        for q in partials[1::2]:
            q[q >= 0] += part.index_off
    ldask.stats["partials"] += 1
    return tuple(p.reshape(n_kept, width) for p in partials)


def _partial_arrays(spec, n: int) -> list[np.ndarray]:
    """Partials as the CPU backend allocates them: one array per accumulator (+ indices)."""
    out = []
    for dtype in spec.acc_dtypes:
        out.append(np.empty(n, dtype))
        if spec.indexed:
            out.append(np.empty(n, np.int64))
    return out


def _lane_error(exe, call, part, k, r):
    """Re-raise a lane's exception (replayed), noting its global index.  ``r`` is the
    lane that failed or the first of its SPMD group: the group's lanes are replayed
    in order until one raises."""
    n_red = int(np.prod([call.sizes[lv] for lv in exe.spec.reduced], dtype=np.int64))
    for q in range(r, max(min(r + exe.group, n_red), r + 1)):
        index = lane_index(call.sizes, (exe.spec.kept, k), (exe.spec.reduced, q))
        where = ", ".join(f"i{lv}={i + part.box[lv][0]}" for lv, i in enumerate(index))
        try:
            lwhost.replay_lane(call, index, raise_anyway=False)
        except Exception as e:
            e.add_note(f"(dask backend: that is global lane ({where}))")
            raise
    index = lane_index(call.sizes, (exe.spec.kept, k), (exe.spec.reduced, r))
    raise LanewiseError(f"lane ({lwhost.where(index)}) failed inside the compiled kernel but not when replayed")


def _concat(parts):
    """Partials of consecutive task runs, joined in block order (exact)."""
    return tuple(np.concatenate([p[j] for p in parts], axis=1) for j in range(len(parts[0])))


def _finish(runner: _ReduceRunner, parts, kept_sizes, chunk: int, n_red: int):
    """The CPU backend's combine over a kept box's full rows of partials."""
    rows = _concat(parts)
    n_kept, n_chunks = rows[0].shape
    plan = ReduceBlocking(n_kept, n_red, n_chunks, chunk)
    partials = [np.ascontiguousarray(r).ravel() for r in rows]
    sizes = [0] * len(runner.signature.levels)
    for lv, n in zip(runner.spec.kept, kept_sizes, strict=True):
        sizes[lv] = n
    results = cpu_reduce.finish(runner.program, runner.spec, plan, partials, sizes, runner.monoid, runner.finish())
    return tuple(np.asarray(r) for r in results)


def _pick(results, m: int):
    return results[m]

