"""The CPU backend's ``lw.vmap``: a lane program compiled by Numba into one parallel loop nest.

Flow for a call (each step cached): type the lane with a one-lane ``probe`` ->
program -> render the module (codegen.cpu) -> store it in the disk cache and
import it -> run ``kernel_blocks`` over every block, from all threads
(:mod:`lanewise.runtime.pool`) or, for small problems, on the calling thread.
A warm process finds module, result type and the lane's dependence answers
(:func:`host.program_and_answers`) on disk and Numba finds the object code beside
it: no typing, no lane IR, no compile.

Example:
    >>> import numpy as np, lanewise as lw
    >>> lw.vmap(lambda x, y: x * y, backend="cpu")(np.arange(3.0), np.arange(3.0))
    array([0., 1., 4.])
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numba
import numpy as np
from numba.core import types as nt
from numba.core.errors import NumbaError, UnsupportedBytecodeError
from numba.np.numpy_support import as_dtype

from ... import pytree, spmd
from ...codegen import cpu as render_cpu
from ...codegen.common import injected_names
from ...plan.schedule import Blocking, blocking, lane_index, loop_order, reblocked
from ...config import config
from ...errors import LaneTypeError, LanewiseError
from ...lane.inplace import rewrite
from ...lane.lanefn import CALL_LIMIT, indexes, inlined_lane, jit_lane, may_raise, python_function, typing_lane
from ...lane.allocation import allocates
from ...lane import typing_only
from ...lane.signedness import check_unsigned_mixing
from ...plan.program import (Call, Program, ResultLeaf, ResultNode, dummy_values)
from ...runtime import cache, interop, pool
from ...runtime.counter import AT_SLOTS, FAILED, SHARED_SLOTS, THREADS, line_array
from .. import host
from ...lane.numba_errors import compile_error, internal_error

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
    group: int = 1  # lanes lane_block runs at a time: the SPMD path's W (blocks are whole groups)
    allocating: bool = False  # the lane makes arrays (lane.allocation): called, with libm

    def __post_init__(self):
        self.order = loop_order(self.program)
        self.array_outputs = [k for k, o in enumerate(self.program.outputs) if o.lane_ndim]
        self.reloaded = False
        self.may_be_heavy = host.may_be_heavy(self.program)  # see measured_work

    def call(self, name: str, *args):
        """Call a kernel of the module (cache faults survived: :func:`host.call_kernel`)."""
        try:
            return host.call_kernel(self, name, *args)
        except NumbaError as e:  # a new specialisation (e.g. layout) failed to compile
            raise compile_error(e, self.program.lane, NAME) from e


def build(call: Call) -> Executable:
    """The executable for ``call``'s signature: from disk if cached, else compiled."""
    key = host.disk_key("map", [call.lane], call.signature, config.vector_math, spmd.cache_key())

    names = injected_names(call.signature)

    def inject(meta):
        result, inplace, _, allocating, _, answers = meta

        def lane(fn):
            with scalar_lane_math(call.lane, allocating):
                return kernel_lane(fn(), allocating)

        names["lane"] = host.Deferred(lambda: lane(lambda: call.lane))
        if inplace:  # the lane fills its per-lane array output in place
            names["lane_inplace"] = host.Deferred(lambda: lane(
                lambda: inplace_lane(host.program(call, result, answers), result)))
        return names

    checked = {}
    built = host.build_module("kernel", key, lambda: _render(call, checked, host.module_name("kernel", key)),
                              inject)
    for name, dispatcher in checked.items():
        # The W-wide lane the SPMD check compiled for these types: lane_block links it
        # rather than compiling the module's copy of it (0.3-0.8 s of a cold call).
        setattr(built.module, name, dispatcher)
    result, inplace, lane_path, allocating, group, answers = built.meta
    stats["disk" if built.from_disk else "typed"] += 1
    return Executable(host.program(call, result, answers), built.module, built.source, built.path, names, lane_path,
                      group, allocating)


def _render(call: Call, checked: dict, module: str | None):
    """Type the lane, choose its path (scalar or SPMD) and render module ``module``
    (None: kept in memory); the SPMD check's compiled W-wide lane goes to ``checked``."""
    with scalar_lane_math(call.lane):
        typed = typed_lane(call)
    result = typed.result
    program, answers = host.program_and_answers(call, result)  # answers: kept with the kernel
    inplace = inplace_lane(program, result) is not None
    choice = spmd.choose(program, call, result, inplace, module, stream_io=lambda plan: _stream_io(program, call, plan))
    if choice.checked is not None:
        checked[choice.checked.py_func.__name__] = choice.checked
    group = choice.plan.width if choice.plan is not None else 1
    meta = (result, inplace, choice.describe(), typed.allocating, group, answers)
    track = inplace or not inlines(call.lane, typed.allocating)
    return render_cpu.render(program, inplace, spmd=choice.plan, track=track), meta


def _stream_io(program: Program, call: Call, plan) -> "spmd.StreamIO | None":
    """The kernel's feed of a streamed W-wide lane, for one level of lanes whose
    varying leaves reach the lane as their elements and whose results are scalars
    (the context's types are then this call's arrays'), else None."""
    varying = [k for kind, k in zip(plan.kinds, plan.leaves) if kind == "varying"]
    leaves = [program.signature.leaves[k] for k in varying]
    if len(loop_order(program)) != 1 or any(
            leaf.element_dtype != leaf.dtype or leaf.unit_rows or leaf.lane_ndim for leaf in leaves) \
            or any(out.lane_ndim for out in program.outputs):
        return None
    arrays = [numba.typeof(call.values[k]) for k in varying]
    outs = [nt.Array(numba.from_dtype(out.dtype), out.ndim, "C") for out in program.outputs]
    return spmd.StreamIO(render_cpu.stream_io(program, plan), (*arrays, *outs))


def scalar_nest(lane) -> bool:
    """Whether the scalar nest of ``lane`` cannot vectorise across lanes: the lane is
    divergent (a while loop, an early exit, a loop of variable trip count:
    ``spmd.divergence``) or subscripts (each read is bounds-checked, a branch that
    keeps the loop scalar)."""
    fn = python_function(lane)
    return indexes(fn) or spmd.divergence(fn) is not None


def scalar_lane_math(lane, allocating: bool = False):
    """The settings to compile ``lane`` with for the scalar nest: libm instead of
    lanewise's vector math when the nest cannot vectorise (:func:`scalar_nest`),
    where one lane at a time libm is faster (a bilateral filter, 49 ``exp`` per
    pixel: 1.6x; a root-finding ``while`` loop: 1.6x; a per-pixel slope with
    ``atan``: 1.5x), or when the lane makes arrays (``allocating``: it is called,
    not inlined, so nothing vectorises across lanes, and vector math's stand-ins
    for ``np.exp`` and ``np.log`` of arrays hide them from Numba's fusion of array
    expressions: a 3-element logsumexp lane made 4 arrays instead of 2 and ran
    1.4x slower).  The SPMD path, which runs divergent lanes in vectors, keeps
    vector math."""
    return config.overridden(vector_math=config.vector_math and not (allocating or scalar_nest(lane)))


def kernel_lane(fn, allocating: bool):
    """The lane as the kernel calls it: inlined (so LLVM can vectorise across lanes)
    unless it cannot raise (lanefn.may_raise), makes arrays (lane.allocation: a
    called allocating lane is faster) or cannot vectorise anyway (:func:`scalar_nest`):
    called, the lane typing compiled (:func:`result_type`) is reused, not compiled
    a second time into the kernel (a cold first call 25-40% shorter)."""
    if not inlines(fn, allocating):
        return jit_lane(fn)
    return inlined_lane(fn)


def inlines(fn, allocating: bool) -> bool:
    """Whether the kernel inlines lane ``fn`` (:func:`kernel_lane`)."""
    return not (allocating or may_raise(fn) or scalar_nest(fn))


def lane_call_report(exe) -> str:
    """One line for ``lw.explain``: how the kernel calls the lane, and which math it uses."""
    lane = exe.program.lane
    if exe.lane_path.startswith("SPMD"):
        return "lane call: transformed to run W lanes per vector step; math functions: lanewise's vector math"
    host.complete(exe)  # a module found on disk: its lane made, as a compile would
    fn = exe.inject.get("lane")
    options = getattr(fn, "targetoptions", {})
    if options.get("inline") == "always":
        how = "inlined into the lane loop"
    elif options.get("forceinline"):
        how = "inlined by LLVM (its range loops are versioned: one bounds test per loop, not per read)"
    else:
        why = ("it may raise (its exceptions are caught per lane)" if may_raise(lane)
               else "the nest cannot vectorise across lanes (it subscripts or is divergent)" if scalar_nest(lane)
               else "it makes arrays (an allocating lane runs faster called)" if exe.allocating
               else "Numba's inliner cannot take it (it calls itself, takes *args, or has more than "
                    f"{CALL_LIMIT} positional-only parameters)")
        how = f"called, not inlined: {why}"
    if not config.vector_math:
        math = "libm (lw.config.vector_math is off)"
    elif scalar_nest(lane):
        math = "libm on the scalar path (one lane at a time libm is faster)"
    elif exe.allocating:
        math = "libm (a lane that makes arrays keeps Numba's fused array expressions)"
    else:
        math = "lanewise's vector math (vectorisable, <= 1 ulp)"
    return f"lane call: {how}; math functions: {math}"


def inplace_lane(program: Program, result, returns_array: bool = True):
    """The lane rewritten to fill its output slice (lanewise.lane.inplace), or None."""
    outs = program.outputs
    # A 1-tuple holding an array is not rewritten: the lane returns a tuple, not the array.
    if len(outs) != 1 or not outs[0].lane_ndim or not isinstance(result, ResultLeaf) or outs[0].dtype != result.dtype:
        return None
    return rewrite(python_function(program.lane), returns_array)


# ----------------------------------------------------------------------------- typing


def result_type(call: Call):
    """The lane's result type (ResultNode/ResultLeaf tree), by typing a call of lane 0
    (see :func:`typed_lane`)."""
    return typed_lane(call).result


@dataclass(frozen=True)
class TypedLane:
    """What typing lane 0 tells: the result type, and whether the lane makes arrays
    (lane.allocation: the kernel then calls it rather than inlining it)."""

    result: Any
    allocating: bool


def typed_lane(call: Call) -> TypedLane:
    """Type a ``probe`` calling lane 0.  The lane and its small helpers are inlined
    into the probe (Numba's ``inline="always"``, lanefn.typing_lane) and typed there,
    larger helpers compiled as the kernels will call them: the lane itself is not
    compiled, which a cold first call paid for (0.1-0.8 s) whether or not the kernel
    ran that code (the SPMD path, a lane the kernel inlines).  The checks read the
    probe's typed IR.  Should that fail, the lane is compiled and typed as a call
    (:func:`_typed_compiled`), whose errors are the user's."""
    argtypes = tuple(numba.typeof(v) for v in call.values)
    try:
        lane = typing_lane(call.lane)
        typed = typing_only.typed(_probe(call, lane).probe, argtypes, **PROBE_OPTIONS)
    except Exception:  # noqa: BLE001 - the compiled lane's typing says what is wrong
        return _typed_compiled(call, argtypes)
    check_unsigned_mixing(lane, typed)
    return TypedLane(_result(typed.return_type, call.lane), allocates(lane, typed))


def _typed_compiled(call: Call, argtypes: tuple) -> TypedLane:
    """:func:`typed_lane` with the lane compiled, the probe calling it only typed."""
    lane = jit_lane(call.lane)
    try:
        rtype = typing_only.return_type(_probe(call, lane).probe, argtypes, **PROBE_OPTIONS)
    except (NumbaError, UnsupportedBytecodeError) as e:  # the second is no NumbaError (*a, b = t; global)
        raise compile_error(e, call.lane, NAME) from e
    except (AssertionError, TypeError, ValueError, KeyError, AttributeError, IndexError, NotImplementedError) as e:
        raise internal_error(e, call.lane, NAME) from e
    check_unsigned_mixing(lane)
    return TypedLane(_result(rtype, call.lane), allocates(lane))


def _probe(call: Call, lane) -> ModuleType:
    inject = {"lane": lane, **injected_names(call.signature)}
    return cache.load_module("lw_probe", None, render_cpu.render_probe(call.signature, call.lane), inject)


#: The probe's options: those of the kernels that call the lane (typing only).
PROBE_OPTIONS = dict(error_model="numpy", nogil=True)


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
    lane_shapes = lane_output_shapes(exe, call)
    shapes = [o.shape(sizes, lane_shapes.get(k, ())) for k, o in enumerate(program.outputs)]
    outs = outputs(program, shapes, out, call.library)
    values = _unaliased(call.values, outs)
    if all(sizes):
        extra = tuple(lane_shapes[k] for k in exe.array_outputs)
        work = host.program_work(program, values, sizes)
        plan = blocking(sizes, exe.order, work, exe.group)
        failure = launch(exe, plan, (*values, *outs, *sizes, *extra),
                         is_small(sizes, values), None if exe.may_be_heavy else work)
        if failure is not None:
            raise_lane_error(exe, call, *failure, lane_shapes)
    return pytree.unflatten(program.out_tree, outs)


def measured_work(exe: Executable, n_inner: int, n_lanes: int, args: tuple) -> int | None:
    """For a run that looks small (few lanes, few elements) but would still take
    long on one thread, the measured work of one lane in :func:`lane_work`'s
    units (about a nanosecond each); else None.  Lanes that loop, or that
    receive arrays, may each do much work (1,000 lanes looping over a
    10,000-element array passed whole ran on one core).  Timed on the first
    lanes of the first outer index (:func:`timed_lanes`), which the run then
    computes again."""
    if not exe.may_be_heavy or not n_lanes:
        return None
    k = min(n_inner, PROBE_LANES)
    return timed_lanes(exe, "kernel_blocks", (*args, 1, k), k, n_lanes)


def timed_lanes(exe, name: str, args: tuple, k: int, n_lanes: int) -> int | None:
    """The nanoseconds one lane takes, from timing unit 0 of kernel ``name`` on
    ``args`` (which make that unit ``k`` lanes), if ``n_lanes`` such lanes would
    take longer than :data:`PARALLEL_ABOVE_S` on one thread; else None (also when
    a lane raised: the run finds it again and reports it).

    Noise (a preempted thread, a page fault) only ever lengthens a timing, so one
    short timing decides "small", while a long one is timed again, up to
    PROBE_TRIES times, and the shortest kept: on a busy machine one slow probe of
    100 trivial lanes had sent them to the thread pool."""
    kernel = loaded(exe, name, args)  # compiled (or loaded) first, so not timed
    call_tracked(kernel, args, 0, 0, NO_STOP)  # and this path's first-call costs, too
    best = float("inf")
    for _ in range(PROBE_TRIES):
        start = time.perf_counter()
        if call_tracked(kernel, args, 0, 1, NO_STOP) >= 0:
            return None
        best = min(best, time.perf_counter() - start)
        if best / k * n_lanes <= PARALLEL_ABOVE_S:
            return None
        if best > PROBE_SURE_S:  # long beyond what noise explains; timing again would cost more
            break
    return int(best / k * 1e9)


def is_small(sizes, values) -> bool:
    """Run on the calling thread? Work ~ lanes + elements the lanes can read
    (a lane scanning a 5000-step row is not a small lane)."""
    work = int(np.prod(sizes)) + sum(v.size for v in values if isinstance(v, np.ndarray))
    return work < config.serial_below


#: A run predicted to take longer than this on one thread runs in parallel,
#: however few lanes and array elements it has (a parallel launch costs tens of µs).
PARALLEL_ABOVE_S = 200e-6
#: Lanes timed to predict a run's length (the first lanes of the first outer index).
PROBE_LANES = 8
#: Timings of those lanes at most, while they say "parallel" (see measured_work).
PROBE_TRIES = 3
#: A probe this long is believed at once.
PROBE_SURE_S = 2e-3


#: The stop flag of serial runs, which nothing sets (a serial run is not interrupted).
NO_STOP = np.zeros(1, np.int64)
#: ``at`` for calls whose failure position nobody reads (the fast launcher falls
#: back to the slow path on any exception; compiling with no blocks).
SCRATCH = np.full(AT_SLOTS, -1, np.int64)


def loaded(exe, name: str, args: tuple, stop=NO_STOP):
    """Kernel ``name`` of ``exe`` (``name(*args, first, last, stop, at)``), compiled
    (or loaded) for ``args`` by a call with no units through :func:`host.call_kernel`,
    which survives faults of the disk cache.  The caller runs it directly, so that
    a lane's exception is never taken for such a fault."""
    exe.call(name, *args, 0, 0, stop, SCRATCH)
    return getattr(exe.module, name)


def call_tracked(kernel, args: tuple, first: int, last: int, stop) -> int:
    """A ``kernel_blocks`` run, its exception turned into the failed flat lane."""
    code, at = attempt(kernel, args, first, last, stop)
    return code if at is None else int(at[1] + at[0])


def attempt(kernel, args: tuple, first: int, last: int, stop):
    """``kernel(*args, first, last, stop, at)``: (its result, None), or (None, at)
    when a lane raised (``at`` says where: see :mod:`lanewise.codegen.cpu`)."""
    at = line_array(AT_SLOTS, -1)
    try:
        return kernel(*args, first, last, stop, at), None
    except Exception:  # a lane raised
        if at[1] < 0:
            raise  # before any block started: not a lane's failure
        return None, at


def run_blocks(exe, args: tuple, first: int, last: int, name: str = "kernel_blocks", run=call_tracked) -> int:
    """Units [first, last) of kernel ``name`` on this thread, by ``run`` (default
    :func:`call_tracked`: -1, or the flat index of the lane that raised, or of the
    first lane of its SPMD group or of its block: :func:`raise_lane_error` replays
    from there)."""
    return run(loaded(exe, name, args), args, first, last, NO_STOP)


def launch(exe: Executable, plan, args: tuple, serial: bool, lane_work: int | None = None):
    """Run the kernel over ``plan``'s blocks; None, or (plan, block, lane) that failed.
    ``lane_work``: one lane's estimated cost (:func:`lane_work`'s units), or None
    where the estimate may miss it (lanes that loop)."""
    if serial:
        lane_work = measured_work(exe, plan.n_inner, plan.n_lanes, args)
        if lane_work is None:
            whole_rows = Blocking(plan.n_outer, plan.n_inner, 1, plan.n_inner)
            return _failure(whole_rows, run_blocks(exe, (*args, 1, plan.n_inner), 0, plan.n_outer))
        plan = reblocked(plan.n_outer, plan.n_inner, lane_work, exe.group)  # heavy lanes: blocks sized by their cost
    work = None if lane_work is None else plan.n_lanes * lane_work
    return _failure(plan, run_parallel(exe, "kernel_blocks", (*args, plan.inner_blocks, plan.block), plan.n_blocks,
                                       work=work))


def run_parallel(exe, name: str, args: tuple, n_units: int, resume=None, work: int | None = None) -> int:
    """Kernel ``name``'s units [0, n_units) from all threads (:mod:`lanewise.runtime.pool`):
    each thread calls the kernel once with a shared ``stop``, and the calls take
    chunks of units from its counter (:func:`lanewise.codegen.common.unit_loop`).
    A lane's exception ends its thread's call; with ``resume`` None (a map: the
    failure is its flat lane, and no chunk is taken after it, every earlier one
    having been taken already) the thread stops, else ``resume(kernel, args, at,
    stop, n_units)`` records it and goes on.  -1, -2 (stopped by Ctrl-C) or the smallest
    failure code >= 0.

    ``work``: the run's estimated cost in :func:`lane_work`'s units (about a
    nanosecond each), or None where it may be underestimated.  A known cost
    decides how many threads are worth waking (:func:`useful_threads`) and
    whether this thread takes chunks too."""
    n_threads = useful_threads(min(threads(), n_units), work)
    join = work is not None and work < JOIN_BELOW * n_threads
    stop = line_array(SHARED_SLOTS)
    kernel = loaded(exe, name, args, stop)  # on this thread, once, before the threads call it
    stop[THREADS] = n_threads

    def share() -> int:
        code, at = attempt(kernel, args, 0, n_units, stop)
        if at is None:
            return code
        if resume is not None:
            return resume(kernel, args, at, stop, n_units)
        stop[FAILED] = 1  # no new chunks: every block before this one was taken already
        return int(at[1] + at[0])

    return pool.run_shared(share, n_threads, lambda: stop.__setitem__(0, 1), join=join)


#: A run whose share per thread is estimated below this (ns) is joined by the
#: calling thread, saving a hand-over; longer ones leave it waiting, where Ctrl-C
#: reaches it (in compiled code it would not until the run ends).
JOIN_BELOW = 20_000_000


def useful_threads(available: int, work: int | None) -> int:
    """Threads for a run of estimated cost ``work`` (None: unknown, so all): one per
    ``config.thread_work`` of it (a 65,536-lane ``x * 2 + 1``, 30 µs of work, took
    0.96 ms on 13 threads, 0.23 ms in Numba's ``prange``).

    Example:
        >>> useful_threads(13, 65_536), useful_threads(13, 450_000), useful_threads(13, None)
        (1, 4, 13)
    """
    if work is None or config.thread_work <= 0:
        return max(1, available)
    return max(1, min(available, work // config.thread_work))


def threads() -> int:
    """Worker threads for a parallel run: ``numba.get_num_threads()`` (a user's
    ``numba.set_num_threads`` counts), without starting Numba's threading layer
    just to ask (its default size, ``NUMBA_NUM_THREADS``, until something has)."""
    from numba.np.ufunc import parallel

    started = getattr(parallel, "_is_initialized", True)  # unknown in another Numba: ask it
    return numba.get_num_threads() if started else numba.config.NUMBA_NUM_THREADS


def _failure(plan: Blocking, flat: int):
    """None for a run that did not fail, else (plan, block, lane) of its flat lane index."""
    if flat < 0:
        return None
    outer, lane = divmod(int(flat), plan.n_inner)
    return plan, outer * plan.inner_blocks + lane // plan.block, lane


def fast_launcher(exe: Executable, call: Call, miss):
    """A generated host function that repeats ``call``'s work for arguments of the
    same types (None if the call is not eligible: pytrees, keywords, per-lane
    arrays).  It checks types and sizes inline and returns ``miss`` on any
    doubt, so the slow path can bind properly and raise the right error.
    """
    sig = exe.program.signature
    if exe.array_outputs or any(p.keyword is not None or p.tree.num_nodes != 1 for p in sig.params):
        return None
    source, names = render_cpu.render_launcher(exe.program, call.values)
    namespace = {"np": np, "empty": new_output(call.library), "MISS": miss, "serial": _serial(exe),
                 "NO_STOP": NO_STOP, "SCRATCH": SCRATCH,
                 "SERIAL_BELOW": config.serial_below, "parallel": _parallel(exe),
                 "unflatten": pytree.unflatten, "TREE": exe.program.out_tree, **names}
    exec(compile(source, f"<lanewise launcher {exe.module.__name__}>", "exec"), namespace)
    return namespace["launch"]


def _serial(exe: Executable):
    """The fast launcher's serial run, ``kernel_blocks(*args, 1, n_inner, 0, n_outer,
    NO_STOP, SCRATCH)``: the kernel itself, or for lanes that may be heavy, a check
    that the run is short enough for one thread first (a parallel run's failure is
    reported as failed lane 0; a lane's exception propagates: the launcher takes the
    slow path, which redoes the run and reports it)."""
    if not exe.may_be_heavy:
        return exe.module.kernel_blocks
    n_leaves, n_out = len(exe.program.signature.leaves), len(exe.program.outputs)
    parallel = _parallel(exe)

    def serial(*args):
        core = args[:-6]  # without the blocking: 1, n_inner, 0, n_outer, NO_STOP, SCRATCH
        sizes = core[n_leaves + n_out:n_leaves + n_out + len(exe.order)]
        lanes = 1
        for n in sizes:
            lanes *= n
        work = measured_work(exe, sizes[exe.order[-1]], lanes, core)
        if work is not None:
            return 0 if parallel(core, sizes, work) else -1
        return run_blocks(exe, args[:-4], args[-4], args[-3])
    return serial


def _parallel(exe: Executable):
    def parallel(args, sizes, measured_work: int = 0):
        leaves = exe.program.signature.leaves
        work = max(host.program_work(exe.program, args[:len(leaves)], sizes), measured_work)
        known = work if measured_work or not exe.may_be_heavy else None
        return launch(exe, blocking(sizes, exe.order, work, exe.group), args, False, known) is not None
    return parallel


def lane_output_shapes(exe: Executable, call: Call) -> dict[int, tuple]:
    """Shapes of the per-lane array outputs (by output index), from lane 0."""
    if not exe.array_outputs:
        return {}
    result = exe.call("probe", *dummy_values(call))
    return {k: np.shape(host.at_path(result, exe.program.outputs[k].path)) for k in exe.array_outputs}


def outputs(program: Program, shapes, out, library: str | None = None) -> list[np.ndarray]:
    """New output arrays of ``shapes`` (for results going back to ``library``), or the
    checked leaves of ``out=``."""
    if out is None:
        empty = new_output(library)
        return [empty(s, o.dtype) for s, o in zip(shapes, program.outputs, strict=True)]
    return host.check_out(program, shapes, out)


def new_output(library: str | None):
    """How results for ``library`` are allocated: aligned for JAX, which then shares
    them rather than copying (runtime.interop.to_library); NumPy's own otherwise."""
    return interop.aligned_empty if library == "jax" else _numpy_empty


def _numpy_empty(shape, dtype) -> np.ndarray:
    # np.empty read at each call, not bound once into a fast launcher: what a
    # wrapped np.empty (a memory profiler, the tests' allocation counter) sees.
    return np.empty(shape, dtype)


def allocate(exe: Executable, call: Call, out=None) -> list[np.ndarray]:
    """The full output leaves of ``call`` (``out``'s, checked, or new): what
    ``progress=True`` fills piece by piece."""
    lane_shapes = lane_output_shapes(exe, call)
    return outputs(exe.program, [o.shape(call.sizes, lane_shapes.get(k, ()))
                                 for k, o in enumerate(exe.program.outputs)], out, call.library)


def _unaliased(values, outs) -> tuple:
    """Inputs that overlap an out= array are copied first, as NumPy does."""
    return tuple(v.copy() if isinstance(v, np.ndarray) and any(np.may_share_memory(v, o) for o in outs)
                 else v for v in values)


def raise_lane_error(exe, call, plan, block, lane, lane_shapes):
    """Re-raise the exception of the lane that failed in ``block`` (or its shape error).

    A scalar block reports the lane that failed; an SPMD block reports the first
    lane of the failed group (or of the block, when streaming), so the lanes
    from there to the block's end are replayed in order until one raises.
    """
    outer = (exe.order[:-1], block // plan.inner_blocks)
    end = min((block % plan.inner_blocks + 1) * plan.block, plan.n_inner)
    for at in range(lane, max(end, lane + 1)):
        index = lane_index(call.sizes, outer, (exe.order[-1:], at))
        result = host.replay_lane(call, index, raise_anyway=False)
        for k in exe.array_outputs:
            got = np.shape(host.at_path(result, exe.program.outputs[k].path))
            if got != lane_shapes[k]:
                raise host.shape_changed(index, exe.program.outputs[k].name, got, lane_shapes[k])
    index = lane_index(call.sizes, outer, (exe.order[-1:], lane))
    raise LanewiseError(f"lane ({host.where(index)}) failed inside the compiled kernel but not when replayed")
