"""Test-session setup for lanewise.

Order matters: the cache directory and Numba's allocation statistics are read
from the environment when lanewise / Numba are first imported, so they are set
here, at the very top, before anything imports either of them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

# One cache for the whole run: pytest-xdist's workers inherit the controller's
# environment, so they share the directory it made (the corpus lanes are compiled
# once per run, not once per worker), and only the process that made it deletes it.
_CACHE_DIR = os.environ.get("LANEWISE_TEST_RUN_CACHE")
if _CACHE_DIR is None:
    _CACHE_DIR = tempfile.mkdtemp(prefix="lanewise-test-cache-")
    os.environ["LANEWISE_TEST_RUN_CACHE"] = _CACHE_DIR
    atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
os.environ["LANEWISE_CACHE_DIR"] = _CACHE_DIR
# test_structure counts the allocations made inside compiled kernels.
os.environ.setdefault("NUMBA_NRT_STATS", "1")

_IMPORTED_EARLY = "lanewise" in sys.modules

import jax  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, Phase, settings  # noqa: E402

jax.config.update("jax_enable_x64", True)

import lanewise as lw  # noqa: E402

if _IMPORTED_EARLY:  # a plugin imported lanewise before us: point it at our cache anyway
    lw.config.cache_dir = _CACHE_DIR

# Every distinct lane signature (dtype, rank, layout, read-only flag, axes) costs
# a Numba compile of about a second, so examples are few and deterministic; set
# LANEWISE_HYPOTHESIS_PROFILE=thorough for a long randomised run.
_COMMON = dict(
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
# No shrinking under "ci": each shrink step is a new signature, i.e. a new compile.
settings.register_profile("ci", max_examples=6, derandomize=True,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate], **_COMMON)
settings.register_profile("thorough", max_examples=60, derandomize=False, **_COMMON)
settings.load_profile(os.environ.get("LANEWISE_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def cache_dir() -> str:
    assert str(lw.config.cache_dir) == _CACHE_DIR
    return _CACHE_DIR


@pytest.fixture
def restore_config():
    """Undo changes a test makes to ``lw.config``."""
    saved = dict(vars(lw.config))
    yield lw.config
    for k, v in saved.items():
        setattr(lw.config, k, v)


# --------------------------------------------------------------------------- torch

#: Why torch tests skip where torch is absent.
TORCH_ABSENT = ("torch is not installed: the test extra requires it on Python 3.11 only (pyproject.toml: "
                "its CPU build is what CI installs; on another Python pip would fetch a multi-GB CUDA build)")


def requires_torch():
    """torch, or a skip of the calling test module saying why it is absent."""
    return pytest.importorskip("torch", reason=TORCH_ABSENT)


# --------------------------------------------------------------------------- the fast tier

#: Files whose tests take seconds to minutes each (subprocesses, the corpus on every
#: backend, CUDA PTX, Dask clusters, timings, whole documents): in the fast tier
#: (``pytest -m "not slow"``) each keeps its first test only, so that every module
#: is still imported and run once.
SLOW_FILES = frozenset({
    "test_backends.py", "test_conformance.py", "test_realworld.py", "test_cuda_ptx.py", "test_cuda_simulator.py",
    "test_cuda_disk_cache.py", "test_cuda_backend.py", "test_cuda_conformance.py", "test_gpu_script.py",
    "test_dask.py", "test_demo.py", "test_threads.py", "test_startup.py", "test_prebuilt.py",
    "test_random_speed_paths.py", "test_compile_work.py", "test_cache_soundness.py", "test_torch_native.py",
    "test_vector_width.py", "test_lanes_doc.py", "test_docs.py", "test_readme.py", "test_structure.py",
    "test_lanemath_accuracy.py", "test_lanemath_vectorised.py", "test_lanemath_specials.py", "test_jax_op.py",
    "test_torch_op.py", "test_spmd_random.py", "test_lint.py",
})


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: not in the fast tier (pytest -m 'not slow'; tests/conftest.py)")


def pytest_collection_modifyitems(config, items):
    """Mark ``slow``: every test of :data:`SLOW_FILES` but its file's first, every
    case of a parametrized test after its first, and property-based (hypothesis) tests:
    the fast tier runs each test function once, on its first case."""
    first_of_file, first_of_function = set(), set()
    for item in items:
        path = item.path.name
        function = (path, getattr(item, "originalname", item.name))
        slow = (path in SLOW_FILES and path in first_of_file) or function in first_of_function \
            or getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
        first_of_file.add(path)
        first_of_function.add(function)
        if slow:
            item.add_marker(pytest.mark.slow)
