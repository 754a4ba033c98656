"""The cuda backend's suite (tests/cuda) on numba-cuda's simulator, in its own process.

numba-cuda reads ``NUMBA_ENABLE_CUDASIM`` when ``numba.cuda`` is first imported,
so the simulator suite cannot share this process: it runs as a child pytest, and
the one README test command covers it.
"""

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_cuda_suite_on_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(TESTS / "cuda")], env=env, capture_output=True, text=True,
                          timeout=1200, cwd=TESTS.parent)
    tail = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    assert " passed" in proc.stdout and " failed" not in proc.stdout, tail
