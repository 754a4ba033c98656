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

if not SIMULATOR:
    # Collected only by the simulator run (see the module docstring).
    collect_ignore_glob = ["test_*.py"]
else:
    # The simulator runs each thread of a block as a Python thread and blocks at
    # every syncthreads: a short switch interval makes that ~20x faster.
    sys.setswitchinterval(1e-5)
    sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))  # tests/: corpus.py
