"""The cuda backend on numba-cuda's simulator: its own pytest process.

Run with ``NUMBA_ENABLE_CUDASIM=1 python -m pytest -q tests/cuda``.  numba-cuda
reads that variable when ``numba.cuda`` is first imported, so it must be set in
the environment of the process; the main test run (without it) skips this
directory, and must never import ``numba.cuda`` in simulator mode.
"""

from __future__ import annotations

import os
import sys

SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def _install_shared_array_lock():
    """Make the simulator's ``cuda.shared.array`` atomic across a block's threads.

    numba-cuda's ``FakeCUDAShared.array`` looks the array up by call site, and
    creates it if absent, without a lock: two threads of a block that get there
    together can each create one, and the block's shared memory splits in two.
    A block tree then folds stale memory (seen in CI: a min reduction returned
    a value left from the previous kernel).  Same lookup, under a lock.
    """
    import threading
    import traceback

    import numpy as np
    from numba.cuda.simulator import kernelapi

    original = kernelapi.FakeCUDAShared.array
    lock = threading.Lock()

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:  # dynamic / unsupported: unchanged
            return original(self, shape, dtype, alignment)
        if isinstance(dtype, kernelapi.types.Type):
            dtype = kernelapi.numpy_support.as_dtype(dtype)
        caller = traceback.extract_stack(sys._getframe())[-2][0:2]
        with lock:
            res = self._allocations.get(caller)
            if res is None:
                res = self._allocations[caller] = np.empty(shape, dtype)
        return res

    kernelapi.FakeCUDAShared.array = array


if not SIMULATOR:
    # Collected only by the simulator run (see the module docstring).
    collect_ignore_glob = ["test_*.py"]
else:
    # The simulator runs each thread of a block as a Python thread and blocks at
    # every syncthreads: a short switch interval makes that ~20x faster.
    sys.setswitchinterval(1e-5)
    sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))  # tests/: corpus.py
    _install_shared_array_lock()
