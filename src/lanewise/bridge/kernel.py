"""What a native handler of a compiled ``lw.vmap`` program shares, whoever calls it.

A bridge's handler (the XLA FFI handler of ``lw.jax.op``, the cfunc the C++
kernel of ``lw.torch.op`` calls) is a generated Numba ``cfunc`` that reads its
caller's buffers as arrays and runs the program's compiled kernels on them,
with no Python and no GIL.  How the lanes run -- sizes, blocking, serial or
parallel -- is decided in Python for each set of shapes and handed over as one
int64 array, the ``plan`` (:func:`plan_of`); :data:`RUN` is the handler's body
that follows it.  One handler serves every shape of its argument types.

Example:
    >>> "kernel_serial(a0, x0, plan[5])" in RUN.format(ok=0, values="a0, x0", sizes="plan[5]")
    True
"""

from __future__ import annotations

import numba
import numpy as np

from ..backends import cpu, host
from ..plan.schedule import blocking
from ..runtime import cache, slow_symbols

#: plan[MODE]: how the handler runs the lanes.
SERIAL, PARALLEL, EMPTY = 0, 1, 2
#: The plan's words: the mode, the kernels' blocking, then each level's size and
#: each per-lane array output's shape (:func:`sizes_args`).
MODE, INNER_BLOCKS, BLOCK, THREADS, N_INNER, SIZES = range(6)

#: The generated module's imports for :data:`RUN`.
IMPORTS = '''\
import numba
import numpy as np
from numba import carray
from lanewise.bridge.abi import pointer, word
from lanewise.runtime.launch_lock import release, try_acquire
'''

#: A generated module's function finding the first failed lane of a parallel run.
FAILED_LANE = '''
@numba.njit(nogil=True, cache=True)
def failed_lane(err, nib, n_inner):
    """The first failed lane in loop order (outer * n_inner + lane), or -1."""
    best, lane = -1, -1
    for t in range(err.shape[0]):
        if err[t, 0] >= 0 and (best < 0 or err[t, 0] < best):
            best, lane = err[t, 0], err[t, 1]
    return -1 if best < 0 else (best // nib) * n_inner + lane
'''

#: The handler's body once its arrays are read: runs the kernels as ``plan`` says
#: (``{ok}`` is returned when there are no lanes) and leaves the first failed lane
#: in loop order, or -1, in ``lane``.  A parallel launch is taken only when no other
#: is running (Numba's workqueue layer is not reentrant): a busy one runs here.
RUN = f'''    mode = plan[{MODE}]
    if mode == {EMPTY}:
        return {{ok}}
    if mode == {SERIAL} or not try_acquire():  # busy: another launch is running; run here
        lane = kernel_serial({{values}}, {{sizes}})
    else:
        err = np.full((plan[{THREADS}], 2), -1, np.int64)
        stop = np.zeros(1, np.int64)
        taken = np.zeros(1, np.int64)  # the next block to take
        kernel({{values}}, {{sizes}}, plan[{INNER_BLOCKS}], plan[{BLOCK}], err, stop, taken)
        release()
        lane = failed_lane(err, plan[{INNER_BLOCKS}], plan[{N_INNER}])
'''


def plan_of(exe, call, n_sizes: int, extra: tuple) -> np.ndarray:
    """The ``plan`` for ``call``'s shapes (what ``backends.cpu.run`` decides per call);
    ``extra``: the per-lane array outputs' shapes, flattened."""
    sizes = tuple(call.sizes)
    head = np.zeros(SIZES, np.int64)
    if not all(sizes):
        head[MODE] = EMPTY
    else:
        plan = blocking(sizes, exe.order, host.program_work(exe.program, call.values, sizes), exe.group)
        # Lanes that may loop or read whole arrays can be long even when few: parallel then.
        head[MODE] = SERIAL if cpu.is_small(sizes, call.values) and not exe.may_be_heavy else PARALLEL
        head[INNER_BLOCKS], head[BLOCK], head[N_INNER] = plan.inner_blocks, plan.block, plan.n_inner
    head[THREADS] = numba.config.NUMBA_NUM_THREADS
    tail = np.array([*sizes, *extra], np.int64)
    assert tail.size == n_sizes
    return np.concatenate([head, tail])


def sizes_args(exe) -> tuple[str, int]:
    """The kernels' trailing arguments read from ``plan``: each level's size, then
    each per-lane array output's shape (a tuple); and how many words they take."""
    words = [f"plan[{SIZES + j}]" for j in range(len(exe.order))]
    parts = list(words)
    for k in exe.array_outputs:
        rank = exe.program.outputs[k].lane_ndim
        shape = [f"plan[{SIZES + len(words) + j}]" for j in range(rank)]
        words += shape
        parts.append("(" + ", ".join(shape) + ",)")
    return ", ".join(parts), len(words)


def lane_name(exe) -> str:
    """The lane as a handler's error message names it: its name, file and line."""
    lane = exe.program.lane
    code = getattr(lane, "__code__", None)
    where = f"{code.co_filename}:{code.co_firstlineno}" if code else "?"
    return f"lane {getattr(lane, '__name__', lane)} ({where})"


def disk_key(kind: str, exe, source: str) -> str | None:
    """The disk cache key of a handler of ``exe`` with this source (None: ``exe`` is
    kept in memory only, and so is the handler)."""
    return cache.key_of(kind, exe.module.__name__, source) if exe.path is not None else None


def load(kind: str, key: str | None, exe, source: str, kernels=("kernel", "kernel_serial")):
    """The handler module calling ``exe``'s ``kernels``, loaded from the disk cache or
    compiled.  ``exe`` is completed first: the handler's compile may compile its
    kernels, which call the lane.  Numba's threading layer is started first too: a
    cfunc loaded from the disk cache links against its symbols (allocate_sched...),
    which exist only once the layer has started ("LLVM ERROR: Symbol not found").
    lanemath's trig slow paths are bound as well: a lane's first huge argument would
    otherwise compile one through a ctypes trampoline, taking the GIL on the
    handler's call path (about 1 s once per machine, then Numba's disk cache)."""
    host.complete(exe)
    numba.get_num_threads()
    slow_symbols.bind_all()
    names = {name: getattr(exe.module, name) for name in kernels}
    return host.build_module(kind, key, lambda: (source, None), lambda meta: names)
