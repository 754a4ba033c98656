"""The CPU backend: a lane program compiled by Numba into one parallel loop nest.

:mod:`.map` builds and runs ``lw.vmap`` kernels, :mod:`.reduce` the fused
map-reduce of ``lw.reduce``.  This package is the backend
(:class:`lanewise.backends.protocol.Backend`); its members are re-exported here.

Example:
    >>> import numpy as np, lanewise as lw
    >>> lw.vmap(lambda x, y: x * y, backend="cpu")(np.arange(3.0), np.arange(3.0))
    array([0., 1., 4.])
"""

from __future__ import annotations

import os

import numba

from ...plan.program import bind_call

# Fork safety: Numba's default picks GNU OpenMP when it is there, and a process
# that forks after a parallel run then dies ("fork() called from a process already
# using GNU OpenMP"; a multiprocessing Pool hangs).  Unless the user chose a layer,
# lanewise asks for a fork-safe one (TBB if installed, else Numba's workqueue).
# Only lanewise.jax's compiled handlers launch Numba parallel kernels, one at a time
# (runtime.launch_lock), so workqueue's lack of thread safety is never exercised.
# It must be set before the first parallel launch.
if os.environ.get("NUMBA_THREADING_LAYER") is None and numba.config.THREADING_LAYER == "default":
    numba.config.THREADING_LAYER = "forksafe"

from ...plan.schedule import blocking
from .. import host
from .map import (PARALLEL_ABOVE_S, Executable, allocate, build, fast_launcher, inplace_lane, is_small,
                  lane_call_report,
                  lane_output_shapes, raise_lane_error, result_type, run, stats)
from . import vectorised
from .reduce import ReduceExecutable, build_reduce, plan_of, run_reduce

NAME = "cpu"
SCAN = "compiled"


def usable() -> bool:
    """Always: Numba compiles for the host."""
    return True


def explain(exe, call) -> list[str]:
    """The schedule of ``exe`` for ``call``: loop order and blocks, or the reduction's chunks."""
    if isinstance(exe, ReduceExecutable):
        spec, plan = exe.spec, plan_of(exe, call)
        return [f"reduce {spec.op} over levels {list(spec.reduced)}, keeping {list(spec.kept)}; "
                f"accumulators {[str(d) for d in spec.acc_dtypes]}",
                f"schedule: {plan.n_blocks} blocks = {plan.n_kept} kept x {plan.n_chunks} chunks of <= "
                f"{plan.chunk} lanes; partials combined in a fixed order",
                f"lane path: {exe.lane_path}"]
    program, lines = exe.program, []
    if all(call.sizes):
        plan = blocking(call.sizes, exe.order, host.program_work(program, call.values, call.sizes),
                        exe.group)
        mode = "parallel (threads take runs of blocks, shorter as the work runs out)"
        if is_small(call.sizes, call.values):
            mode = ("serial (small problem), unless its first lanes, timed, predict more than "
                    f"{PARALLEL_ABOVE_S * 1e6:.0f} µs of work" if exe.may_be_heavy else "serial (small problem)")
        lines.append(
            f"schedule: loops {' > '.join(f'i{lv}' for lv in exe.order)} (innermost last, contiguous in "
            f"{program.outputs[0].name if program.outputs else 'no output'}); {plan.n_blocks} blocks = "
            f"{plan.n_outer} outer x {plan.inner_blocks} inner blocks of <= {plan.block} lanes; {mode}")
    lines.append(f"lane path: {exe.lane_path}")  # lanewise.spmd: SPMD on SIMD or scalar, and why
    lines.append(lane_call_report(exe))
    if all(call.sizes):
        lines.append(vectorised.report(exe, call))
    return lines


__all__ = ["NAME", "SCAN", "Executable", "ReduceExecutable", "allocate", "bind_call", "build", "build_reduce",
           "explain", "fast_launcher", "inplace_lane", "is_small", "lane_output_shapes", "raise_lane_error",
           "result_type", "run", "run_reduce", "stats", "usable"]
