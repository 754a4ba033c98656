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

from ... import pytree
from ...codegen import cpu_reduce as render_reduce
from ...codegen.common import injected_names
from ...config import config
from ...ir import reduction
from ...ir.program import Call, Program
from ...ir.reduction import Monoid, ReduceSpec
from ...ir.schedule import ReduceBlocking, lane_index, lane_work, reduce_blocking
from ...lane.lanefn import jit_lane
from ...lane.numba_errors import compile_error
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
    reloaded: bool = False

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
                        config.vector_math)
    state: dict = {}

    def render():
        result = cpu.result_type(call)
        program = host.program(call, result)
        return render_reduce.render(program, reduction.reduce_spec(op, axis, program)), result

    def inject(result):
        program = host.program(call, result)
        spec = reduction.reduce_spec(op, axis, program)
        state.update(program=program, spec=spec)
        # A running fold (argmin/argmax, Monoid) keeps the lane loop scalar, where libm
        # is faster than lanewise's vector math (W5: 0.30 s vs 0.42 s); tiled folds
        # evaluate lanes in a vectorisable loop, where vector math pays.
        with config.overridden(vector_math=config.vector_math and spec.tiled):
            names = {"lane": cpu.kernel_lane(call.lane), **injected_names(call.signature)}
            if monoid:
                names["combine"] = jit_lane(monoid.combine)
        for m, (out, identity) in enumerate(zip(program.outputs, reduction.identities(spec, monoid), strict=True)):
            names[f"ID{m}"] = identity
            names[f"BT{m}"] = numba.from_dtype(out.dtype)  # tile buffers: lane values, padded with the identity
            if spec.tiled:
                names[f"IDB{m}"] = np.asarray(identity).astype(out.dtype)[()]
        state["inject"] = names
        return names

    built = host.build_module("reduce kernel", key, render, inject)
    return ReduceExecutable(state["program"], state["spec"], built.module, built.source, built.path, monoid,
                            state["inject"])


# ----------------------------------------------------------------------------- run


def plan_of(exe: ReduceExecutable, call: Call) -> ReduceBlocking:
    """How the reduction of ``call`` is cut into blocks (sizes only: any thread count agrees)."""
    spec, sizes = exe.spec, call.sizes
    n_kept = int(np.prod([sizes[lv] for lv in spec.kept]))
    n_red = int(np.prod([sizes[lv] for lv in spec.reduced]))
    return reduce_blocking(n_kept, n_red, lane_work(exe.program.signature.leaves, call.values, sizes))


def run_reduce(exe: ReduceExecutable, call: Call):
    """Fold every lane of ``call`` into partials, then combine them: the results pytree."""
    spec, sizes = exe.spec, call.sizes
    plan = plan_of(exe, call)
    partials = []
    for dtype in spec.acc_dtypes:
        partials.append(np.empty(plan.n_blocks, dtype))
        if spec.indexed:
            partials.append(np.empty(plan.n_blocks, np.int64))
    strides = reduction.index_strides(spec, exe.program.outputs[0], sizes) if spec.indexed else []
    if plan.n_blocks:
        err = np.full(plan.n_blocks, -1, np.int64)
        args = (*call.values, *partials, *sizes, *strides, plan.n_chunks, plan.chunk, plan.n_reduced, err)
        if cpu.is_small(sizes, call.values):
            exe.call("rkernel_serial", *args)
        else:
            cpu.interruptible(lambda stop: cpu.dynamic(exe.call, "rkernel", *args, stop))
        failed = np.flatnonzero(err >= 0)
        if failed.size:
            block = int(failed[0])
            host.replay_lane(call, lane_index(sizes, (spec.kept, block // plan.n_chunks),
                                              (spec.reduced, int(err[block]))))
    results = finish(exe.program, spec, plan, partials, sizes, exe.monoid, exe.finish)
    return pytree.unflatten(exe.program.out_tree, results)


def finish(program: Program, spec: ReduceSpec, plan: ReduceBlocking, partials: list, sizes,
           monoid: Monoid | None = None, fold=None) -> list:
    """Each output's result, in its own axis order, from the flat partials of ``plan``'s blocks."""
    width = 2 if spec.indexed else 1
    results = []
    for m, out in enumerate(program.outputs):
        p = partials[m * width].reshape(plan.n_kept, plan.n_chunks)
        q = partials[m * width + 1].reshape(plan.n_kept, plan.n_chunks) if spec.indexed else None
        flat = reduction.combine_partials(spec, m, p, q, plan.n_reduced, monoid, fold)
        results.append(reduction.place(spec, out, flat, sizes))
    return results
